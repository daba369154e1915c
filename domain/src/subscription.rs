//! Subscriptions and their lifecycle.
//!
//! ```text
//! trialing ──► active ◄──► past_due
//!    │           │            │
//!    └───────────┴────────────┴──► canceled ──► expired
//!                                      (expired is terminal)
//! ```
//! Events carry the provider's time. An event older than the last one applied is refused
//! (CORRECTNESS.md invariant 7), and a renewal never moves the billing period backwards.
//!
//! A subscription pays for what was sold (invariant 10): at activation it keeps [`SoldTerms`]
//! from its recurring order, and every payment is checked against them
//! ([`check_activation`], [`Subscription::check_renewal`]) before it may grant anything.

use std::fmt;

use crate::credits::Credits;
use crate::ids::{AccountId, PlanId, SubscriptionId, UserId};
use crate::money::Money;
use crate::order::{PlanSnapshot, Transition};
use crate::plan::{Duration, Months, PlanType};
use crate::plan_change::PlanChange;
use crate::provider::ProviderId;
use crate::scheduled_switch::ScheduledSwitch;
use crate::time::Timestamp;

/// Where a subscription is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionStatus {
    /// In a free trial.
    Trialing,
    /// Paid up for the current period.
    Active,
    /// A renewal payment failed; the provider is retrying.
    PastDue,
    /// Ended at the provider; access lasts to the end of the paid period.
    Canceled,
    /// Over (terminal).
    Expired,
}

impl SubscriptionStatus {
    /// The stable code used in storage and the API.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            SubscriptionStatus::Trialing => "trialing",
            SubscriptionStatus::Active => "active",
            SubscriptionStatus::PastDue => "past_due",
            SubscriptionStatus::Canceled => "canceled",
            SubscriptionStatus::Expired => "expired",
        }
    }

    /// Parse the stable code.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        use SubscriptionStatus::*;
        [Trialing, Active, PastDue, Canceled, Expired]
            .into_iter()
            .find(|s| s.code() == code)
    }
}

impl fmt::Display for SubscriptionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// What happens at the end of the current period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalIntent {
    /// The provider bills the next period.
    Renews,
    /// The subscription ends when the current period does (`cancel_at_period_end`).
    EndsAtPeriodEnd,
}

/// A paid period `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BillingPeriod {
    start: Timestamp,
    end: Timestamp,
}

impl BillingPeriod {
    /// A period; `None` unless `start < end`.
    #[must_use]
    pub fn new(start: Timestamp, end: Timestamp) -> Option<Self> {
        (start < end).then_some(Self { start, end })
    }
    /// Start, inclusive.
    #[must_use]
    pub const fn start(&self) -> Timestamp {
        self.start
    }
    /// End, exclusive.
    #[must_use]
    pub const fn end(&self) -> Timestamp {
        self.end
    }
}

/// A normalized lifecycle event from a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionEvent {
    /// The first payment succeeded (or the trial converted).
    Activated(BillingPeriod),
    /// A renewal payment succeeded for a new period.
    Renewed(BillingPeriod),
    /// A renewal payment failed.
    PastDue,
    /// The customer asked to end at the period's end.
    CancelScheduled,
    /// A scheduled cancellation was withdrawn.
    CancelWithdrawn,
    /// The provider ended the subscription.
    Canceled,
    /// The subscription ran out.
    Expired,
}

/// Why a subscription event was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    /// The event happened before the last one applied.
    #[error("event at {event_at} is older than the last applied event at {last_event_at}")]
    Stale {
        /// The event's time.
        event_at: Timestamp,
        /// The last applied event's time.
        last_event_at: Timestamp,
    },
    /// The event is not allowed in the current state.
    #[error("subscription cannot take {event} while {from}")]
    NotAllowed {
        /// Current status.
        from: SubscriptionStatus,
        /// The event, in words.
        event: &'static str,
    },
}

/// What a subscription was sold at: the price (and currency) of each period, the billing
/// interval and the credits each paid period grants. Kept from the order at activation and never
/// read again from a plan, so editing or deleting the plan changes nothing already sold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoldTerms {
    price: Money,
    interval: Months,
    credits_per_period: Option<Credits>,
}

impl SoldTerms {
    /// Terms as stored (the store rehydrates them through this).
    #[must_use]
    pub const fn new(price: Money, interval: Months, credits_per_period: Option<Credits>) -> Self {
        Self {
            price,
            interval,
            credits_per_period,
        }
    }

    /// The terms a recurring order sold.
    ///
    /// # Errors
    /// [`SoldTermsMismatch::NotRecurring`] for a one-time or credits order;
    /// [`SoldTermsMismatch::NoInterval`] for a recurring order without a finite interval.
    pub fn of_order(plan: &PlanSnapshot) -> Result<Self, SoldTermsMismatch> {
        if plan.plan_type != PlanType::Recurring {
            return Err(SoldTermsMismatch::NotRecurring {
                plan_type: plan.plan_type,
            });
        }
        let Some(Duration::Months(interval)) = plan.duration else {
            return Err(SoldTermsMismatch::NoInterval);
        };
        Ok(Self::new(plan.price, interval, plan.credits))
    }

    /// The price of one period, in the currency it was sold in.
    #[must_use]
    pub const fn price(&self) -> Money {
        self.price
    }

    /// The billing interval.
    #[must_use]
    pub const fn interval(&self) -> Months {
        self.interval
    }

    /// The credits each paid period grants, if any.
    #[must_use]
    pub const fn credits_per_period(&self) -> Option<Credits> {
        self.credits_per_period
    }

    /// Whether `paid` is exactly the sold price in the sold currency.
    ///
    /// # Errors
    /// [`SoldTermsMismatch::Amount`] otherwise.
    pub fn check_paid(&self, paid: Money) -> Result<(), SoldTermsMismatch> {
        if paid == self.price {
            return Ok(());
        }
        Err(SoldTermsMismatch::Amount {
            paid,
            sold: self.price,
        })
    }
}

/// Why a subscription payment does not match what was sold (recorded as a mismatch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SoldTermsMismatch {
    /// Only a recurring order can start a subscription.
    #[error("a {plan_type} order cannot start a subscription")]
    NotRecurring {
        /// The order's plan type.
        plan_type: PlanType,
    },
    /// A recurring order without a finite billing interval.
    #[error("recurring order without a billing interval in months")]
    NoInterval,
    /// The amount or currency paid is not the price sold.
    #[error("paid {paid}, sold at {sold}")]
    Amount {
        /// What the provider reported.
        paid: Money,
        /// The sold price.
        sold: Money,
    },
    /// The subscription predates sold terms and none could be recovered from its order.
    #[error("subscription has no sold terms")]
    Unknown,
}

/// Check an activation against the order it names: the order must be recurring and, when the
/// provider reports the amount, it must be the order's price in its currency.
///
/// # Errors
/// [`SoldTermsMismatch`] when it does not match; nothing may change then.
pub fn check_activation(
    plan: &PlanSnapshot,
    paid: Option<Money>,
) -> Result<SoldTerms, SoldTermsMismatch> {
    let terms = SoldTerms::of_order(plan)?;
    if let Some(paid) = paid {
        terms.check_paid(paid)?;
    }
    Ok(terms)
}

/// Why a renewal grants nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenewalRefusal {
    /// It did not pay what was sold (recorded as a mismatch).
    #[error(transparent)]
    Mismatch(#[from] SoldTermsMismatch),
    /// It is for the period already paid (a repeat; recorded as a duplicate state).
    #[error("period already paid")]
    AlreadyPaid,
    /// It starts before the paid period ends, beyond the clock tolerance: it overlaps a period
    /// already granted or lies in the past (recorded as stale).
    #[error("period starting at {start} overlaps the paid period ending at {paid_until}")]
    Overlaps {
        /// The renewal's period start.
        start: Timestamp,
        /// The end of the period already paid.
        paid_until: Timestamp,
    },
}

/// A user's subscription to a recurring plan at one provider. Its fields are private: a new one
/// comes from [`Subscription::start`], a stored one from [`Subscription::restore`]; its status,
/// period and renewal change only through [`Subscription::apply`], its plan and terms only
/// through [`Subscription::move_to_terms`].
///
/// It also remembers the switch claim (pending change and scheduled switch) a store held when it
/// was read ([`Subscription::pending_change_as_read`], [`Subscription::scheduled_switch_as_read`]):
/// a store replaces the subscription only where the claim is still that one, so a write decided
/// from an older read never clears or replaces a claim written since. It is set by
/// [`Subscription::restore_claimed`] (a store's row mapping) and [`Subscription::as_stored`],
/// never by a transition, and equality ignores it.
#[derive(Debug, Clone, Eq)]
pub struct Subscription {
    /// Our id.
    id: SubscriptionId,
    /// The subscriber.
    user_id: UserId,
    /// The account it belongs to (its order's): the subscriber's personal account or a team.
    account_id: AccountId,
    /// The recurring plan.
    plan_id: PlanId,
    /// The provider billing it.
    provider: ProviderId,
    /// The provider's id for it.
    provider_subscription_id: String,
    /// Where it is.
    status: SubscriptionStatus,
    /// The period paid for.
    current_period: BillingPeriod,
    /// Whether it renews.
    renewal: RenewalIntent,
    /// The provider time of the last applied event.
    last_event_at: Timestamp,
    /// What was sold, kept at activation; `None` only for a subscription stored before terms
    /// were kept whose order could not supply them (its renewals are mismatches).
    sold_terms: Option<SoldTerms>,
    /// A plan change asked of the provider and not yet confirmed by its event.
    pending_change: Option<PlanChange>,
    /// The plan the subscriber starts when it ends (a switch at the period's end).
    scheduled_switch: Option<ScheduledSwitch>,
    /// `pending_change` as the store held it when this was read.
    pending_change_as_read: Option<PlanChange>,
    /// `scheduled_switch` as the store held it when this was read.
    scheduled_switch_as_read: Option<ScheduledSwitch>,
}

impl PartialEq for Subscription {
    /// The same state; the claim as read is where it came from, not part of it.
    fn eq(&self, other: &Self) -> bool {
        // Destructured in full, so that a new field must be decided on here.
        let Self {
            id,
            user_id,
            account_id,
            plan_id,
            provider,
            provider_subscription_id,
            status,
            current_period,
            renewal,
            last_event_at,
            sold_terms,
            pending_change,
            scheduled_switch,
            pending_change_as_read: _,
            scheduled_switch_as_read: _,
        } = self;
        *id == other.id
            && *user_id == other.user_id
            && *account_id == other.account_id
            && *plan_id == other.plan_id
            && *provider == other.provider
            && *provider_subscription_id == other.provider_subscription_id
            && *status == other.status
            && *current_period == other.current_period
            && *renewal == other.renewal
            && *last_event_at == other.last_event_at
            && *sold_terms == other.sold_terms
            && *pending_change == other.pending_change
            && *scheduled_switch == other.scheduled_switch
    }
}

/// Every field of a [`Subscription`], as a store wrote it, for [`Subscription::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionParts {
    /// Our id.
    pub id: SubscriptionId,
    /// The subscriber.
    pub user_id: UserId,
    /// The account it belongs to; `None` for the subscriber's personal account (a subscription
    /// stored before accounts could buy).
    pub account: Option<AccountId>,
    /// The recurring plan.
    pub plan_id: PlanId,
    /// The provider billing it.
    pub provider: ProviderId,
    /// The provider's id for it.
    pub provider_subscription_id: String,
    /// Where it is.
    pub status: SubscriptionStatus,
    /// The period paid for.
    pub current_period: BillingPeriod,
    /// Whether it renews.
    pub renewal: RenewalIntent,
    /// The provider time of the last applied event.
    pub last_event_at: Timestamp,
    /// What was sold, kept at activation; `None` only for a subscription stored before terms
    /// were kept whose order could not supply them (its renewals are mismatches).
    pub sold_terms: Option<SoldTerms>,
}

/// The switch claim a store keeps beside a subscription's row, for
/// [`Subscription::restore_claimed`]: the plan change asked of the provider and not yet
/// confirmed, and the switch at the period's end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchClaim {
    /// The plan change asked of the provider and not yet confirmed by its event.
    pub pending_change: Option<PlanChange>,
    /// The plan the subscriber starts when it ends.
    pub scheduled_switch: Option<ScheduledSwitch>,
}

impl Subscription {
    /// A subscription just started by a verified activation at the provider time `at`: active
    /// for `period`, renewing, and keeping the `terms` its recurring order sold.
    #[allow(
        clippy::too_many_arguments,
        reason = "each argument has its own type, so none can be passed in another's place"
    )]
    #[must_use]
    pub fn start(
        id: SubscriptionId,
        user_id: UserId,
        plan_id: PlanId,
        provider: ProviderId,
        provider_subscription_id: String,
        period: BillingPeriod,
        terms: SoldTerms,
        at: Timestamp,
    ) -> Self {
        Self {
            id,
            account_id: AccountId::personal(&user_id),
            user_id,
            plan_id,
            provider,
            provider_subscription_id,
            status: SubscriptionStatus::Active,
            current_period: period,
            renewal: RenewalIntent::Renews,
            last_event_at: at,
            sold_terms: Some(terms),
            pending_change: None,
            scheduled_switch: None,
            pending_change_as_read: None,
            scheduled_switch_as_read: None,
        }
    }

    /// A subscription exactly as a store wrote it, for storage adapters reading back what they
    /// stored (and tests building fixtures). It enforces nothing the lifecycle would: the parts
    /// are trusted to be a subscription this service started and moved only through
    /// [`Subscription::apply`] and [`Subscription::move_to_terms`]. Code starting a subscription
    /// uses [`Subscription::start`].
    #[must_use]
    pub fn restore(parts: SubscriptionParts) -> Self {
        Self::restore_claimed(parts, SwitchClaim::default())
    }

    /// A subscription exactly as a store wrote it, with the switch claim it kept beside it: that
    /// claim is also the claim as read. Trusted as [`Subscription::restore`] is.
    #[must_use]
    pub fn restore_claimed(parts: SubscriptionParts, claim: SwitchClaim) -> Self {
        let SubscriptionParts {
            id,
            user_id,
            account,
            plan_id,
            provider,
            provider_subscription_id,
            status,
            current_period,
            renewal,
            last_event_at,
            sold_terms,
        } = parts;
        Self {
            id,
            account_id: account.unwrap_or_else(|| AccountId::personal(&user_id)),
            user_id,
            plan_id,
            provider,
            provider_subscription_id,
            status,
            current_period,
            renewal,
            last_event_at,
            sold_terms,
            pending_change_as_read: claim.pending_change.clone(),
            scheduled_switch_as_read: claim.scheduled_switch.clone(),
            pending_change: claim.pending_change,
            scheduled_switch: claim.scheduled_switch,
        }
    }

    /// The same new subscription, belonging to `account` (its order's) instead of the
    /// subscriber's personal account.
    #[must_use]
    pub fn belonging_to(mut self, account: AccountId) -> Self {
        self.account_id = account;
        self
    }

    /// The same subscription as a store holds it once it has written it: its claim as read is
    /// its claim now (for a store keeping values, and a writer that writes again after its
    /// write committed without reading it back).
    #[must_use]
    pub fn as_stored(mut self) -> Self {
        self.pending_change_as_read.clone_from(&self.pending_change);
        self.scheduled_switch_as_read
            .clone_from(&self.scheduled_switch);
        self
    }

    /// The plan change the store held when this was read (what a replacement expects to find).
    #[must_use]
    pub const fn pending_change_as_read(&self) -> Option<&PlanChange> {
        self.pending_change_as_read.as_ref()
    }

    /// The scheduled switch the store held when this was read (what a replacement expects to
    /// find).
    #[must_use]
    pub const fn scheduled_switch_as_read(&self) -> Option<&ScheduledSwitch> {
        self.scheduled_switch_as_read.as_ref()
    }

    /// Whether the claim a store holds now (`stored`) is still the one this was read with: a
    /// store replaces the subscription only then (besides its `last_event_at`).
    #[must_use]
    pub fn claim_unchanged_since_read(&self, stored: &Self) -> bool {
        self.pending_change_as_read.as_ref() == stored.pending_change()
            && self.scheduled_switch_as_read.as_ref() == stored.scheduled_switch()
    }

    /// The plan its subscriber starts when it ends, if a switch at the period's end was asked.
    #[must_use]
    pub const fn scheduled_switch(&self) -> Option<&ScheduledSwitch> {
        self.scheduled_switch.as_ref()
    }

    /// Record a switch at the period's end (`crate::schedule_switch` checked it). Nothing else
    /// changes: the cancellation at the period's end is the provider's event, or the request's
    /// own [`SubscriptionEvent::CancelScheduled`].
    pub fn schedule_switch(&mut self, switch: ScheduledSwitch) {
        self.scheduled_switch = Some(switch);
    }

    /// Forget the switch at the period's end (withdrawn, or the provider refused to cancel).
    pub fn drop_scheduled_switch(&mut self) {
        self.scheduled_switch = None;
    }

    /// The plan change asked of the provider and not yet confirmed by its event, if any.
    #[must_use]
    pub const fn pending_change(&self) -> Option<&PlanChange> {
        self.pending_change.as_ref()
    }

    /// Record that `change` was asked of the provider (replacing an earlier unconfirmed one).
    /// Nothing else changes: the plan, terms and period move only when the provider's event
    /// confirms it (`Subscription::confirm_plan_change`).
    pub fn ask_plan_change(&mut self, change: PlanChange) {
        self.pending_change = Some(change);
    }

    /// Forget an unconfirmed plan change (the provider refused it).
    pub fn drop_plan_change(&mut self) {
        self.pending_change = None;
    }

    /// The provider confirmed the pending change at `event_at`: the subscription belongs to the
    /// new plan and bills its terms from now on; status, period and renewal are unchanged.
    /// Returns the change, or `None` when none was pending.
    pub(crate) fn confirm_plan_change(&mut self, event_at: Timestamp) -> Option<PlanChange> {
        let change = self.pending_change.take()?;
        self.plan_id = change.plan_id().clone();
        self.sold_terms = Some(change.terms());
        self.last_event_at = self.last_event_at.max(event_at);
        Some(change)
    }

    /// The provider confirmed a pending change of billing interval at `event_at` by billing the
    /// new plan for `period`, the new period it started (issue 19): the subscription belongs to
    /// the new plan, bills its terms and is paid for `period` (which may end before the old one
    /// did: yearly to monthly). Returns the change, or `None` when none was pending or the event
    /// is older than the last applied one.
    pub(crate) fn confirm_interval_change(
        &mut self,
        period: BillingPeriod,
        event_at: Timestamp,
    ) -> Option<PlanChange> {
        if event_at < self.last_event_at {
            return None;
        }
        let change = self.confirm_plan_change(event_at)?;
        self.current_period = period;
        self.status = SubscriptionStatus::Active;
        Some(change)
    }

    /// Our id.
    #[must_use]
    pub const fn id(&self) -> &SubscriptionId {
        &self.id
    }

    /// The subscriber.
    #[must_use]
    pub const fn user_id(&self) -> &UserId {
        &self.user_id
    }

    /// The account it belongs to: whose credits its periods grant and whose access it is.
    #[must_use]
    pub const fn account_id(&self) -> &AccountId {
        &self.account_id
    }

    /// The recurring plan.
    #[must_use]
    pub const fn plan_id(&self) -> &PlanId {
        &self.plan_id
    }

    /// The provider billing it.
    #[must_use]
    pub const fn provider(&self) -> ProviderId {
        self.provider
    }

    /// The provider's id for it.
    #[must_use]
    pub fn provider_subscription_id(&self) -> &str {
        &self.provider_subscription_id
    }

    /// Where it is.
    #[must_use]
    pub const fn status(&self) -> SubscriptionStatus {
        self.status
    }

    /// The period paid for.
    #[must_use]
    pub const fn current_period(&self) -> BillingPeriod {
        self.current_period
    }

    /// Whether it renews.
    #[must_use]
    pub const fn renewal(&self) -> RenewalIntent {
        self.renewal
    }

    /// The provider time of the last applied event.
    #[must_use]
    pub const fn last_event_at(&self) -> Timestamp {
        self.last_event_at
    }

    /// What was sold, kept at activation; `None` only for a subscription stored before terms
    /// were kept whose order could not supply them.
    #[must_use]
    pub const fn sold_terms(&self) -> Option<SoldTerms> {
        self.sold_terms
    }

    /// A provider-side price change moved it to another recurring plan of ours: from now on it
    /// belongs to `plan_id` and pays what `terms` sell. Status, period and renewal are unchanged.
    pub fn move_to_terms(&mut self, plan_id: PlanId, terms: SoldTerms) {
        self.plan_id = plan_id;
        self.sold_terms = Some(terms);
    }

    /// Check a renewal paying `paid` for `period` against what was sold and what is already paid.
    ///
    /// The period must start no earlier than the end of the paid period less `tolerance_ms`
    /// (providers' clocks drift a little). Periods only move forward, so every earlier paid
    /// period ends no later than the current one: this also keeps it from overlapping any of them.
    ///
    /// # Errors
    /// [`RenewalRefusal`]: a mismatch of amount or currency (checked first), the period already
    /// paid, or an overlapping or past period.
    pub fn check_renewal(
        &self,
        paid: Money,
        period: BillingPeriod,
        tolerance_ms: i64,
    ) -> Result<(), RenewalRefusal> {
        let terms = self.sold_terms.ok_or(SoldTermsMismatch::Unknown)?;
        terms.check_paid(paid)?;
        if period == self.current_period {
            return Err(RenewalRefusal::AlreadyPaid);
        }
        let paid_until = self.current_period.end;
        if period.start.plus_millis(tolerance_ms.max(0)) < paid_until {
            return Err(RenewalRefusal::Overlaps {
                start: period.start,
                paid_until,
            });
        }
        Ok(())
    }

    /// Apply a provider event that happened at `event_at`.
    ///
    /// # Errors
    /// [`SubscriptionError::Stale`] for an event older than the last applied one or a renewal
    /// for a period that is not newer; [`SubscriptionError::NotAllowed`] for events an ended
    /// subscription cannot take.
    pub fn apply(
        &mut self,
        event: SubscriptionEvent,
        event_at: Timestamp,
    ) -> Result<Transition, SubscriptionError> {
        if event_at < self.last_event_at {
            return Err(SubscriptionError::Stale {
                event_at,
                last_event_at: self.last_event_at,
            });
        }
        let paid_until = self.current_period.end;
        let outcome = self.transition(event, event_at)?;
        assert!(
            self.current_period.end >= paid_until,
            "the paid period only moves forward"
        );
        self.last_event_at = event_at;
        Ok(outcome)
    }

    fn transition(
        &mut self,
        event: SubscriptionEvent,
        event_at: Timestamp,
    ) -> Result<Transition, SubscriptionError> {
        use SubscriptionStatus::*;
        let ended = matches!(self.status, Canceled | Expired);
        match event {
            SubscriptionEvent::Activated(period) | SubscriptionEvent::Renewed(period) => {
                if ended {
                    return Err(self.not_allowed("a payment"));
                }
                if period.end <= self.current_period.end && self.status == Active {
                    return Ok(Transition::AlreadyDone);
                }
                if period.end < self.current_period.end {
                    return Err(SubscriptionError::Stale {
                        event_at,
                        last_event_at: self.last_event_at,
                    });
                }
                self.current_period = period;
                self.status = Active;
                Ok(Transition::Applied)
            }
            SubscriptionEvent::PastDue => self.set_status(PastDue, !ended, "past due"),
            SubscriptionEvent::CancelScheduled => {
                self.set_renewal(RenewalIntent::EndsAtPeriodEnd, ended)
            }
            SubscriptionEvent::CancelWithdrawn => self.set_renewal(RenewalIntent::Renews, ended),
            SubscriptionEvent::Canceled => {
                self.set_status(Canceled, self.status != Expired, "a cancellation")
            }
            SubscriptionEvent::Expired => self.set_status(Expired, true, "an expiry"),
        }
    }

    fn set_status(
        &mut self,
        to: SubscriptionStatus,
        allowed: bool,
        event: &'static str,
    ) -> Result<Transition, SubscriptionError> {
        if self.status == to {
            return Ok(Transition::AlreadyDone);
        }
        if !allowed {
            return Err(self.not_allowed(event));
        }
        self.status = to;
        Ok(Transition::Applied)
    }

    fn set_renewal(
        &mut self,
        to: RenewalIntent,
        ended: bool,
    ) -> Result<Transition, SubscriptionError> {
        if ended {
            return Err(self.not_allowed("a renewal change"));
        }
        if self.renewal == to {
            return Ok(Transition::AlreadyDone);
        }
        self.renewal = to;
        if to == RenewalIntent::Renews {
            // It no longer ends, so nothing starts when it ends.
            self.scheduled_switch = None;
        }
        Ok(Transition::Applied)
    }

    fn not_allowed(&self, event: &'static str) -> SubscriptionError {
        SubscriptionError::NotAllowed {
            from: self.status,
            event,
        }
    }

    /// Whether it is live: trialing, active or past due, including one scheduled to cancel at
    /// its period's end (canceled and expired ones are not, even with paid time left).
    #[must_use]
    pub const fn is_live(&self) -> bool {
        matches!(
            self.status,
            SubscriptionStatus::Trialing | SubscriptionStatus::Active | SubscriptionStatus::PastDue
        )
    }

    /// How long it grants access. A past-due subscription's renewal failed when its period
    /// ended: it keeps access for `past_due_grace_ms` after that, then none (the provider may
    /// still recover it, and a paid renewal makes it active again).
    #[must_use]
    pub fn access(&self, past_due_grace_ms: i64) -> SubscriptionAccess {
        let end = self.current_period.end;
        match (self.status, self.renewal) {
            (SubscriptionStatus::Expired, _) => SubscriptionAccess::Ended,
            (SubscriptionStatus::Canceled, _) | (_, RenewalIntent::EndsAtPeriodEnd) => {
                SubscriptionAccess::Until(end)
            }
            (SubscriptionStatus::PastDue, RenewalIntent::Renews) => {
                SubscriptionAccess::Until(end.plus_millis(past_due_grace_ms.max(0)))
            }
            (SubscriptionStatus::Trialing | SubscriptionStatus::Active, RenewalIntent::Renews) => {
                SubscriptionAccess::WhileItRenews
            }
        }
    }

    /// Whether the subscriber has access at `now` (see [`Subscription::access`]).
    #[must_use]
    pub fn grants_access_at(&self, now: Timestamp, past_due_grace_ms: i64) -> bool {
        self.access(past_due_grace_ms).is_open_at(now)
    }
}

/// How long a subscription grants access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionAccess {
    /// As long as it renews (trialing or active, not scheduled to cancel).
    WhileItRenews,
    /// Until this instant (exclusive): the period's end when canceled or scheduled to cancel,
    /// the period's end plus the grace when past due.
    Until(Timestamp),
    /// None any more (expired).
    Ended,
}

impl SubscriptionAccess {
    /// Whether access is still running at `now`.
    #[must_use]
    pub fn is_open_at(self, now: Timestamp) -> bool {
        match self {
            SubscriptionAccess::WhileItRenews => true,
            SubscriptionAccess::Until(end) => now < end,
            SubscriptionAccess::Ended => false,
        }
    }

    /// When access ends, if it is known to end (not while it renews).
    #[must_use]
    pub const fn ends_at(self) -> Option<Timestamp> {
        match self {
            SubscriptionAccess::WhileItRenews => None,
            SubscriptionAccess::Until(end) => Some(end),
            SubscriptionAccess::Ended => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(ms)
    }

    fn period(start: i64, end: i64) -> BillingPeriod {
        BillingPeriod::new(t(start), t(end)).unwrap()
    }

    fn sub(status: SubscriptionStatus) -> Subscription {
        Subscription {
            id: SubscriptionId::new("s1").unwrap(),
            user_id: UserId::new("u1").unwrap(),
            account_id: AccountId::new("u1").unwrap(),
            plan_id: PlanId::new("pro-monthly").unwrap(),
            provider: ProviderId::CardGateway,
            provider_subscription_id: "sub_1".into(),
            status,
            current_period: period(0, 100),
            renewal: RenewalIntent::Renews,
            last_event_at: t(10),
            sold_terms: Some(terms()),
            pending_change: None,
            scheduled_switch: None,
            pending_change_as_read: None,
            scheduled_switch_as_read: None,
        }
    }

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, crate::money::Currency::Usd).unwrap()
    }

    fn terms() -> SoldTerms {
        let Some(Duration::Months(month)) = Duration::from_months_value(1) else {
            unreachable!()
        };
        SoldTerms::new(usd(999), month, Some(Credits::from_whole(1000).unwrap()))
    }

    #[test]
    fn an_activation_starts_an_active_renewing_subscription_with_its_sold_terms() {
        let s = Subscription::start(
            SubscriptionId::new("s1").unwrap(),
            UserId::new("u1").unwrap(),
            PlanId::new("pro-monthly").unwrap(),
            ProviderId::CardGateway,
            "sub_1".into(),
            period(0, 100),
            terms(),
            t(10),
        );
        assert_eq!(s, sub(SubscriptionStatus::Active));
        assert_eq!(s.renewal(), RenewalIntent::Renews);
        assert_eq!(s.last_event_at(), t(10));
        assert_eq!(s.sold_terms(), Some(terms()));
    }

    #[test]
    fn a_stored_subscription_is_restored_as_written() {
        let mut s = sub(SubscriptionStatus::Active);
        s.apply(SubscriptionEvent::CancelScheduled, t(12)).unwrap();
        let restored = Subscription::restore(SubscriptionParts {
            id: s.id().clone(),
            user_id: s.user_id().clone(),
            account: Some(s.account_id().clone()),
            plan_id: s.plan_id().clone(),
            provider: s.provider(),
            provider_subscription_id: s.provider_subscription_id().to_owned(),
            status: s.status(),
            current_period: s.current_period(),
            renewal: s.renewal(),
            last_event_at: s.last_event_at(),
            sold_terms: s.sold_terms(),
        });
        assert_eq!(restored, s);
    }

    #[test]
    fn a_subscription_remembers_the_claim_it_was_read_with_through_its_changes() {
        let change = PlanChange::new(
            PlanId::new("pro-plus").unwrap(),
            SoldTerms::new(usd(1999), terms().interval(), None),
            crate::plan_change::ChangeDirection::Upgrade,
            t(20),
        );
        let free = sub(SubscriptionStatus::Active);
        let mut read = free.clone();
        read.ask_plan_change(change.clone());
        let read = read.as_stored();
        assert_eq!(read.pending_change_as_read(), Some(&change));
        // A transition or a dropped claim keeps what was read; equality ignores it.
        let mut next = read.clone();
        next.apply(SubscriptionEvent::CancelScheduled, t(30))
            .unwrap();
        next.drop_plan_change();
        assert_eq!(next.pending_change_as_read(), Some(&change));
        assert!(next.claim_unchanged_since_read(&read));
        assert!(!next.claim_unchanged_since_read(&free));
        let mut unread = free.clone();
        unread.ask_plan_change(change.clone());
        assert_eq!(unread, read);
        assert!(!unread.claim_unchanged_since_read(&read));
        assert!(unread.claim_unchanged_since_read(&free));
        // Once written, the written claim is the one a store holds.
        let stored = unread.as_stored();
        assert!(stored.claim_unchanged_since_read(&read));
        let switch = ScheduledSwitch::new(PlanId::new("team").unwrap(), t(40));
        let mut switched = free.clone();
        switched.schedule_switch(switch.clone());
        let switched = switched.as_stored();
        assert_eq!(switched.scheduled_switch_as_read(), Some(&switch));
        assert!(!free.claim_unchanged_since_read(&switched));
    }

    #[test]
    fn moving_to_other_terms_changes_only_the_plan_and_the_terms() {
        let before = sub(SubscriptionStatus::PastDue);
        let mut s = before.clone();
        let Some(Duration::Months(month)) = Duration::from_months_value(1) else {
            unreachable!()
        };
        let plus = SoldTerms::new(usd(1999), month, None);
        s.move_to_terms(PlanId::new("pro-plus").unwrap(), plus);
        assert_eq!(s.plan_id().as_str(), "pro-plus");
        assert_eq!(s.sold_terms(), Some(plus));
        assert_eq!(s.status(), before.status());
        assert_eq!(s.current_period(), before.current_period());
        assert_eq!(s.renewal(), before.renewal());
        assert_eq!(s.last_event_at(), before.last_event_at());
        assert_eq!(s.check_renewal(usd(1999), period(100, 200), 5), Ok(()));
    }

    #[test]
    fn a_renewal_must_pay_the_sold_price_for_the_next_period() {
        let s = sub(SubscriptionStatus::Active);
        assert_eq!(s.check_renewal(usd(999), period(100, 200), 5), Ok(()));
        assert_eq!(s.check_renewal(usd(999), period(96, 200), 5), Ok(()));
        assert!(matches!(
            s.check_renewal(usd(1), period(100, 200), 5),
            Err(RenewalRefusal::Mismatch(SoldTermsMismatch::Amount { .. }))
        ));
        assert_eq!(
            s.check_renewal(usd(999), period(0, 100), 5),
            Err(RenewalRefusal::AlreadyPaid)
        );
        assert!(matches!(
            s.check_renewal(usd(999), period(50, 150), 5),
            Err(RenewalRefusal::Overlaps { .. })
        ));
        assert!(matches!(
            s.check_renewal(usd(999), period(-900, -800), 5),
            Err(RenewalRefusal::Overlaps { .. })
        ));
    }

    #[test]
    fn a_subscription_without_sold_terms_renews_nothing() {
        let mut s = sub(SubscriptionStatus::Active);
        s.sold_terms = None;
        assert_eq!(
            s.check_renewal(usd(999), period(100, 200), 5),
            Err(RenewalRefusal::Mismatch(SoldTermsMismatch::Unknown))
        );
    }

    #[test]
    fn a_renewal_extends_the_period() {
        let mut s = sub(SubscriptionStatus::Active);
        assert_eq!(
            s.apply(SubscriptionEvent::Renewed(period(100, 200)), t(100)),
            Ok(Transition::Applied)
        );
        assert_eq!(s.current_period, period(100, 200));
        assert_eq!(
            s.apply(SubscriptionEvent::Renewed(period(100, 200)), t(101)),
            Ok(Transition::AlreadyDone)
        );
    }

    #[test]
    fn an_event_older_than_the_recorded_state_is_refused() {
        let mut s = sub(SubscriptionStatus::Active);
        s.apply(SubscriptionEvent::Canceled, t(50)).unwrap();
        let stale = s.apply(SubscriptionEvent::Renewed(period(100, 200)), t(20));
        assert!(matches!(stale, Err(SubscriptionError::Stale { .. })));
        assert_eq!(s.status, SubscriptionStatus::Canceled);
    }

    #[test]
    fn past_due_recovers_on_payment_and_ended_subscriptions_stay_ended() {
        let mut s = sub(SubscriptionStatus::Active);
        s.apply(SubscriptionEvent::PastDue, t(90)).unwrap();
        assert_eq!(s.status, SubscriptionStatus::PastDue);
        s.apply(SubscriptionEvent::Renewed(period(100, 200)), t(95))
            .unwrap();
        assert_eq!(s.status, SubscriptionStatus::Active);
        s.apply(SubscriptionEvent::Expired, t(300)).unwrap();
        assert!(
            s.apply(SubscriptionEvent::Renewed(period(300, 400)), t(301))
                .is_err()
        );
        assert!(s.apply(SubscriptionEvent::Canceled, t(302)).is_err());
    }

    #[test]
    fn cancel_at_period_end_keeps_access_until_the_end() {
        let mut s = sub(SubscriptionStatus::Trialing);
        s.apply(SubscriptionEvent::Activated(period(0, 100)), t(11))
            .unwrap();
        s.apply(SubscriptionEvent::CancelScheduled, t(12)).unwrap();
        assert_eq!(s.renewal, RenewalIntent::EndsAtPeriodEnd);
        s.apply(SubscriptionEvent::Canceled, t(13)).unwrap();
        assert!(s.grants_access_at(t(99), 0));
        assert!(!s.grants_access_at(t(100), 0));
    }

    #[test]
    fn a_cancel_scheduled_subscription_is_live_until_its_period_ends() {
        let mut s = sub(SubscriptionStatus::Active);
        assert_eq!(s.access(50), SubscriptionAccess::WhileItRenews);
        s.apply(SubscriptionEvent::CancelScheduled, t(12)).unwrap();
        assert!(s.is_live());
        assert_eq!(s.access(50), SubscriptionAccess::Until(t(100)));
        assert!(!s.grants_access_at(t(100), 50));
        s.apply(SubscriptionEvent::Canceled, t(13)).unwrap();
        assert!(!s.is_live());
    }

    #[test]
    fn past_due_keeps_access_for_the_grace_after_the_failed_renewal_then_not() {
        let mut s = sub(SubscriptionStatus::Active);
        s.apply(SubscriptionEvent::PastDue, t(100)).unwrap();
        assert!(s.is_live());
        assert_eq!(s.access(50), SubscriptionAccess::Until(t(150)));
        assert!(s.grants_access_at(t(149), 50));
        assert!(!s.grants_access_at(t(150), 50));
        assert!(!s.grants_access_at(t(10_000), 50));
        // A paid renewal restores it.
        s.apply(SubscriptionEvent::Renewed(period(100, 200)), t(160))
            .unwrap();
        assert!(s.grants_access_at(t(10_000), 50));
        s.apply(SubscriptionEvent::Expired, t(170)).unwrap();
        assert_eq!(s.access(50), SubscriptionAccess::Ended);
    }
}
