//! Switching a live subscription to another recurring plan, and resuming one scheduled to end.
//!
//! A switch is two steps. The subscriber's request is checked here ([`plan_change`]) and kept on
//! the subscription as a [`PlanChange`]: the plan asked for and the terms it sells. Nothing the
//! subscription bills or grants moves then. The provider's own event that it now bills the new
//! price is checked against that request ([`decide_plan_changed`]): only an event billing the
//! asked plan's price, in its currency and interval, moves the subscription to the new plan and
//! terms; any other is a mismatch and changes nothing.
//!
//! Credits (`docs/subscriptions-and-refunds.md`, "Switching plans"; the rule is
//! [`period_credits`]'s):
//! - an **upgrade** (a higher price per month) grants, when the provider confirms it, what the
//!   new plan's credits per period exceed everything already granted for the current period by
//!   (the period's own lot and earlier upgrades' lots), once, expiring with the current period;
//!   every later renewal grants the new plan's credits. Switching down and back up within one
//!   period grants nothing the second time;
//! - a **downgrade** grants and takes back nothing when confirmed: the period already granted
//!   keeps its credits, and the lower credits start with the next renewal, which bills the new
//!   (lower) price.

use crate::credits::Credits;
use crate::ids::PlanId;
use crate::money::Money;
use crate::order::PlanSnapshot;
use crate::outcome::EventOutcome;
use crate::plan::PlanType;
use crate::provider::ProviderId;
use crate::subscription::{
    BillingPeriod, RenewalIntent, SoldTerms, Subscription, SubscriptionStatus,
};
use crate::time::Timestamp;

/// What Tally can ask a provider to do to a live subscription through the provider's own API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchSupport {
    /// Switch it to another plan (the provider's plan-change API).
    pub change_plan: bool,
    /// Withdraw a scheduled cancellation.
    pub resume: bool,
    /// End it now (the provider's immediate cancel), rather than at the period's end.
    pub cancel_now: bool,
}

/// What `provider` supports, as Tally implements it (`docs/providers/<id>.md` cites each API):
/// Stripe (`card_gateway`) switches Prices with proration and resumes with
/// `cancel_at_period_end=false`; Dodo (`mor_b`) switches products with `change-plan` and resumes
/// with `cancel_at_next_billing_date=false`; Creem (`mor_a`) switches products with `upgrade` but
/// documents no way to withdraw a scheduled cancellation; PayPal (`wallet_global`) revises the
/// plan once the subscriber approves it at PayPal ([`decide_plan_revised`]) and has no resume (a
/// cancellation is final). WeChat Pay and Alipay sell no subscriptions; for the other providers a
/// switch is a cancellation at the period's end and a new purchase when it ends. Stripe, Dodo,
/// Creem and PayPal can also end a subscription at once; Waffo (`mor_c`) documents no immediate
/// cancel.
#[must_use]
pub const fn switch_support(provider: ProviderId) -> SwitchSupport {
    match provider {
        ProviderId::CardGateway | ProviderId::MorB => SwitchSupport {
            change_plan: true,
            resume: true,
            cancel_now: true,
        },
        // PayPal revises the plan after the subscriber approves it; a cancellation is final.
        ProviderId::MorA | ProviderId::WalletGlobal => SwitchSupport {
            change_plan: true,
            resume: false,
            cancel_now: true,
        },
        ProviderId::MorC | ProviderId::WalletQr | ProviderId::WalletWeb => SwitchSupport {
            change_plan: false,
            resume: false,
            cancel_now: false,
        },
    }
}

/// Whether Tally can follow a change of billing interval (monthly ↔ yearly) at `provider`: only
/// where the provider's semantics are documented and its events tell the new period. Stripe
/// (`card_gateway`) resets the billing cycle at the change and invoices the new period at once
/// (`invoice.paid`, `billing_reason=subscription_update`, a line for the new period), which
/// [`decide_change_invoice`] checks. Dodo's `change-plan` and Creem's `upgrade` document neither
/// whether the period restarts nor what the immediate charge covers, and their events carry no
/// new period Tally could check: they keep refusing (`docs/subscriptions-and-refunds.md`).
#[must_use]
pub const fn changes_interval(provider: ProviderId) -> bool {
    match provider {
        ProviderId::CardGateway => true,
        ProviderId::WalletQr
        | ProviderId::WalletWeb
        | ProviderId::WalletGlobal
        | ProviderId::MorA
        | ProviderId::MorB
        | ProviderId::MorC => false,
    }
}

/// Whether a switch raises or lowers what the subscriber pays per month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeDirection {
    /// A higher price per month (or the same price with more credits per month).
    Upgrade,
    /// A lower price per month (or the same price with no more credits per month).
    Downgrade,
}

impl ChangeDirection {
    /// `upgrade` or `downgrade`, as stored and shown.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
        }
    }

    /// The direction a stored code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        match code {
            "upgrade" => Some(Self::Upgrade),
            "downgrade" => Some(Self::Downgrade),
            _ => None,
        }
    }

    /// The direction from terms `from` to terms `to` (same currency): the price per month
    /// decides, then the credits per month.
    #[must_use]
    pub fn between(from: &SoldTerms, to: &SoldTerms) -> Self {
        let monthly =
            |price: i64, other_interval: u32| i128::from(price) * i128::from(other_interval);
        let (from_months, to_months) = (from.interval().get(), to.interval().get());
        let old_price = monthly(from.price().amount_minor(), to_months);
        let new_price = monthly(to.price().amount_minor(), from_months);
        if new_price != old_price {
            return if new_price > old_price {
                Self::Upgrade
            } else {
                Self::Downgrade
            };
        }
        let credits = |c: Option<Credits>| c.map_or(0, Credits::hundredths);
        let old_credits = monthly(credits(from.credits_per_period()), to_months);
        let new_credits = monthly(credits(to.credits_per_period()), from_months);
        if new_credits > old_credits {
            Self::Upgrade
        } else {
            Self::Downgrade
        }
    }
}

/// How a switch is told to the subscriber and the host: a change of billing interval is neither
/// an upgrade nor a downgrade (a yearly plan is cheaper per month and sells more per period);
/// within one interval, what the buyer pays per unit of time decides ([`ChangeDirection`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SwitchKind {
    /// The same interval at a higher price per month (or more credits for the same price).
    Upgrade,
    /// The same interval at a lower price per month (or no more credits for the same price).
    Downgrade,
    /// Another billing interval (monthly to yearly, or back).
    IntervalChange,
}

impl SwitchKind {
    /// The switch from terms `from` to terms `to`.
    #[must_use]
    pub fn between(from: &SoldTerms, to: &SoldTerms) -> Self {
        if from.interval() != to.interval() {
            return Self::IntervalChange;
        }
        match ChangeDirection::between(from, to) {
            ChangeDirection::Upgrade => Self::Upgrade,
            ChangeDirection::Downgrade => Self::Downgrade,
        }
    }

    /// `upgrade`, `downgrade` or `interval_change`, as shown.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
            Self::IntervalChange => "interval_change",
        }
    }
}

/// A switch asked of the provider and not confirmed by its event yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanChange {
    plan_id: PlanId,
    terms: SoldTerms,
    direction: ChangeDirection,
    requested_at: Timestamp,
}

impl PlanChange {
    /// A change as a store kept it.
    #[must_use]
    pub const fn new(
        plan_id: PlanId,
        terms: SoldTerms,
        direction: ChangeDirection,
        requested_at: Timestamp,
    ) -> Self {
        Self {
            plan_id,
            terms,
            direction,
            requested_at,
        }
    }

    /// The plan asked for.
    #[must_use]
    pub const fn plan_id(&self) -> &PlanId {
        &self.plan_id
    }

    /// What the plan asked for sells: its price per period, interval and credits per period.
    #[must_use]
    pub const fn terms(&self) -> SoldTerms {
        self.terms
    }

    /// Upgrade or downgrade.
    #[must_use]
    pub const fn direction(&self) -> ChangeDirection {
        self.direction
    }

    /// When the subscriber asked (unique per subscription: it keys the upgrade's credits).
    #[must_use]
    pub const fn requested_at(&self) -> Timestamp {
        self.requested_at
    }

    /// How this switch from `from` (the terms the subscription bills now) is told; a direction
    /// alone where the subscription has no terms to compare with.
    #[must_use]
    pub fn kind(&self, from: Option<&SoldTerms>) -> SwitchKind {
        match from {
            Some(from) => SwitchKind::between(from, &self.terms),
            None if self.direction == ChangeDirection::Upgrade => SwitchKind::Upgrade,
            None => SwitchKind::Downgrade,
        }
    }
}

/// Why a switch or a resume is refused (nothing is asked of the provider then).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanChangeRefusal {
    /// The subscription ended, is past due, or (for a switch) is scheduled to end.
    #[error("subscription is {0}")]
    NotLive(&'static str),
    /// The plan asked for is the one the subscription already bills.
    #[error("subscription is already on this plan")]
    SamePlan,
    /// The plan asked for is not a recurring plan with a billing interval in months.
    #[error("plan is a {0} plan, not a subscription")]
    NotRecurring(&'static str),
    /// The plan asked for sells in another currency than the subscription bills.
    #[error("plan sells in {to}, the subscription bills in {from}")]
    OtherCurrency {
        /// The subscription's currency.
        from: &'static str,
        /// The plan's.
        to: &'static str,
    },
    /// The plan asked for bills another interval at a provider whose interval change Tally
    /// cannot follow ([`changes_interval`]): it is a new subscription, bought when this one
    /// ends, not a switch.
    #[error("plan bills every {to} month(s), the subscription every {from}")]
    OtherInterval {
        /// The subscription's interval in months.
        from: u32,
        /// The plan's.
        to: u32,
    },
    /// The subscription predates sold terms: there is nothing to compare the plan with.
    #[error("subscription has no sold terms")]
    NoTerms,
    /// A resume of a subscription that is not scheduled to end.
    #[error("subscription is not scheduled to end")]
    NotScheduledToEnd,
}

impl PlanChangeRefusal {
    /// A stable code for the refusal (problem JSON `code`).
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::NotLive(_) => "subscription_not_live",
            Self::SamePlan => "same_plan",
            Self::NotRecurring(_) => "different_plan_type",
            Self::OtherCurrency { .. } => "different_currency",
            Self::OtherInterval { .. } => "different_interval",
            Self::NoTerms => "not_switchable",
            Self::NotScheduledToEnd => "not_scheduled_to_end",
        }
    }
}

/// Check a switch of `current` to the plan `target` (its price in the environment the
/// subscription bills in) asked at `now`.
///
/// # Errors
/// [`PlanChangeRefusal`]: the subscription is not active and renewing, the plan is the same, not
/// recurring, in another currency or billing interval, or the subscription has no terms to
/// compare with.
pub fn plan_change(
    current: &Subscription,
    target: &PlanSnapshot,
    now: Timestamp,
) -> Result<PlanChange, PlanChangeRefusal> {
    match (current.status(), current.renewal()) {
        (SubscriptionStatus::Active | SubscriptionStatus::Trialing, RenewalIntent::Renews) => {}
        (_, RenewalIntent::EndsAtPeriodEnd) if current.is_live() => {
            return Err(PlanChangeRefusal::NotLive("scheduled to end"));
        }
        (status, _) => return Err(PlanChangeRefusal::NotLive(status.code())),
    }
    if &target.plan_id == current.plan_id() {
        return Err(PlanChangeRefusal::SamePlan);
    }
    if target.plan_type != PlanType::Recurring {
        return Err(PlanChangeRefusal::NotRecurring(target.plan_type.as_str()));
    }
    let terms = SoldTerms::of_order(target)
        .map_err(|_| PlanChangeRefusal::NotRecurring(target.plan_type.as_str()))?;
    let from = current.sold_terms().ok_or(PlanChangeRefusal::NoTerms)?;
    if from.price().currency() != terms.price().currency() {
        return Err(PlanChangeRefusal::OtherCurrency {
            from: from.price().currency().code(),
            to: terms.price().currency().code(),
        });
    }
    if from.interval() != terms.interval() && !changes_interval(current.provider()) {
        return Err(PlanChangeRefusal::OtherInterval {
            from: from.interval().get(),
            to: terms.interval().get(),
        });
    }
    let direction = ChangeDirection::between(&from, &terms);
    Ok(PlanChange::new(
        target.plan_id.clone(),
        terms,
        direction,
        now,
    ))
}

/// Check a resume of `current`: it must be live and scheduled to end at its period's end.
///
/// # Errors
/// [`PlanChangeRefusal::NotLive`] for an ended subscription;
/// [`PlanChangeRefusal::NotScheduledToEnd`] for one that renews.
pub fn check_resume(current: &Subscription) -> Result<(), PlanChangeRefusal> {
    if !current.is_live() {
        return Err(PlanChangeRefusal::NotLive(current.status().code()));
    }
    if current.renewal() != RenewalIntent::EndsAtPeriodEnd {
        return Err(PlanChangeRefusal::NotScheduledToEnd);
    }
    Ok(())
}

/// What a provider's "the subscription now bills another price" event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanChangedFacts {
    /// The price per period the provider now bills, in its currency.
    pub price: Money,
    /// The billing interval in months, when the event says.
    pub interval_months: Option<u32>,
    /// When it happened at the provider.
    pub occurred_at: Timestamp,
}

/// Credits an upgrade grants once when the provider confirms it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpgradeCredits {
    /// How many: the new plan's credits per period less the old plan's.
    pub amount: Credits,
    /// From the request to the current period's end: the credits expire with the period.
    pub period: BillingPeriod,
}

/// What a verified plan-changed event comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanChangedDecision {
    /// It bills what the pending change asked for: the subscription after it, and the credits
    /// an upgrade grants.
    Apply {
        /// The subscription on its new plan and terms.
        subscription: Subscription,
        /// The change confirmed.
        change: PlanChange,
        /// The upgrade's credits, if any.
        credits: Option<UpgradeCredits>,
    },
    /// It bills what the subscription already bills (a repeat, or an update of something else).
    AlreadyDone,
    /// No change was asked, or it bills another price, currency or interval than asked.
    Mismatch(String),
    /// Older than what the subscription has applied, or the subscription ended.
    Stale(String),
    /// It bills the pending change of billing interval: the provider's invoice for the new
    /// period decides that change ([`decide_change_invoice`]), this event changes nothing.
    AwaitsInvoice(String),
}

impl PlanChangedDecision {
    /// The inbox outcome this decision records.
    #[must_use]
    pub const fn outcome(&self) -> EventOutcome {
        match self {
            Self::Apply { .. } => EventOutcome::Applied,
            Self::AlreadyDone => EventOutcome::DuplicateState,
            Self::Mismatch(_) => EventOutcome::Mismatch,
            Self::Stale(_) => EventOutcome::Stale,
            Self::AwaitsInvoice(_) => EventOutcome::Ignored,
        }
    }
}

/// A provider event saying `current` now bills `facts.price`: checked against the change the
/// subscriber asked for (see the module documentation for the credits it implies); `granted`
/// is what the current period has been granted so far.
#[must_use]
pub fn decide_plan_changed(
    current: &Subscription,
    facts: &PlanChangedFacts,
    granted: &PeriodGrants,
) -> PlanChangedDecision {
    if !current.is_live() {
        return PlanChangedDecision::Stale(format!("subscription is {}", current.status().code()));
    }
    let bills = |terms: &SoldTerms| {
        terms.price() == facts.price
            && facts
                .interval_months
                .is_none_or(|m| m == terms.interval().get())
    };
    let Some(change) = current.pending_change() else {
        return match current.sold_terms() {
            Some(terms) if bills(&terms) => PlanChangedDecision::AlreadyDone,
            _ => PlanChangedDecision::Mismatch(format!(
                "the provider bills {} but no plan change was asked for",
                facts.price
            )),
        };
    };
    if !bills(&change.terms()) {
        if current.sold_terms().is_some_and(|t| bills(&t)) {
            return PlanChangedDecision::AlreadyDone;
        }
        return PlanChangedDecision::Mismatch(format!(
            "the provider bills {} every {} month(s); plan {} sells {} every {} month(s)",
            facts.price,
            facts
                .interval_months
                .map_or_else(|| "?".into(), |m| m.to_string()),
            change.plan_id(),
            change.terms().price(),
            change.terms().interval().get()
        ));
    }
    let old = current.sold_terms();
    if old.is_some_and(|t| t.interval() != change.terms().interval()) {
        return PlanChangedDecision::AwaitsInvoice(format!(
            "the change to plan {} starts a new billing period: its invoice applies it",
            change.plan_id()
        ));
    }
    let mut next = current.clone();
    let Some(change) = next.confirm_plan_change(facts.occurred_at) else {
        return PlanChangedDecision::AlreadyDone;
    };
    let credits = upgrade_credits(old, &change, granted);
    PlanChangedDecision::Apply {
        subscription: next,
        change,
        credits,
    }
}

/// The credits an upgrade grants: the new credits per period less everything the current
/// period (`granted`) was already granted, and never less than the old plan's credits per period
/// (counted as granted); nothing for a downgrade.
fn upgrade_credits(
    old: Option<SoldTerms>,
    change: &PlanChange,
    granted: &PeriodGrants,
) -> Option<UpgradeCredits> {
    if change.direction() != ChangeDirection::Upgrade {
        return None;
    }
    let new = change.terms().credits_per_period()?;
    let floor = old.and_then(|t| t.credits_per_period()).unwrap_or_default();
    let amount = granted.still_due(new, floor)?;
    let current = granted.period();
    let start = change.requested_at();
    let period = BillingPeriod::new(start, current.end().max(start))?;
    debug_assert!(amount.checked_add(granted.total().max(floor)).ok() == Some(new));
    Some(UpgradeCredits { amount, period })
}

mod period_credits;

pub use period_credits::{PeriodGrants, PeriodLot, PeriodLotSource};

mod revision;

pub use revision::{RevisedTo, decide_plan_revised};

mod invoice;

pub use invoice::{
    ChangeInvoiceDecision, ChangeInvoiceFacts, NewPeriodLine, decide_change_invoice,
    proration_charge,
};

#[cfg(test)]
mod tests;
