//! Switching plans at the period's end, and one switch at a time (issue 19).
//!
//! A provider without a plan-change API (`switch_support(..).change_plan == false`) cannot move a
//! live subscription to another price. There a switch is *scheduled*: the subscription is
//! cancelled at its period's end through the provider's own cancellation, and it keeps the plan
//! the subscriber asked for as a [`ScheduledSwitch`]. When it ends, the subscriber starts the new
//! plan with a new checkout (the provider needs the buyer to pay it). A subscription already
//! scheduled to end can be given a scheduled plan without asking the provider anything.
//!
//! Only one switch of a subscription is in progress at a time: a plan change asked of the
//! provider and not confirmed yet ([`crate::PlanChange`]), or a scheduled switch, is a *claim*
//! that a store never replaces by another in one write ([`Subscription::overwrites_claim_of`]).
//! A claim the provider never settled (the request died between the claim and the provider's
//! answer) holds off other requests for [`CLAIM_HOLD_MS`] only.

use crate::ids::PlanId;
use crate::order::PlanSnapshot;
use crate::plan::PlanType;
use crate::plan_change::{ChangeDirection, PlanChangeRefusal, SwitchKind};
use crate::subscription::{RenewalIntent, SoldTerms, Subscription, SubscriptionStatus};
use crate::time::Timestamp;

/// How long an unsettled claim holds off another switch of the same subscription: ten minutes,
/// far longer than a provider call (bounded by the HTTP client's timeout) takes.
pub const CLAIM_HOLD_MS: i64 = 10 * 60 * 1000;

/// The plan a subscription scheduled to end moves to when it ends, as its subscriber asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledSwitch {
    plan_id: PlanId,
    requested_at: Timestamp,
}

impl ScheduledSwitch {
    /// A scheduled switch to `plan_id` asked at `requested_at` (or as a store kept it).
    #[must_use]
    pub const fn new(plan_id: PlanId, requested_at: Timestamp) -> Self {
        Self {
            plan_id,
            requested_at,
        }
    }

    /// The plan that starts when the subscription ends.
    #[must_use]
    pub const fn plan_id(&self) -> &PlanId {
        &self.plan_id
    }

    /// When the subscriber asked.
    #[must_use]
    pub const fn requested_at(&self) -> Timestamp {
        self.requested_at
    }
}

/// A switch at the period's end checked by [`schedule_switch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchAtPeriodEnd {
    /// What the subscription keeps until it ends.
    pub switch: ScheduledSwitch,
    /// Whether the new plan costs more or less per month (for the subscriber's information:
    /// nothing is prorated, the new plan is bought when the old one ends).
    pub direction: ChangeDirection,
    /// How the switch is told: an upgrade, a downgrade, or a change of billing interval.
    pub kind: SwitchKind,
}

/// Another switch of the subscription is in progress: the loser of two concurrent requests, or
/// a request made while a scheduled switch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("another plan change of this subscription is in progress")]
pub struct ChangeInProgress;

/// Refuse a new switch of `current` at `now` while another one holds its claim: a scheduled
/// switch of a subscription scheduled to end (withdraw it first), or an unconfirmed plan change
/// or unsettled scheduled switch younger than [`CLAIM_HOLD_MS`].
///
/// # Errors
/// [`ChangeInProgress`].
pub fn check_no_change_in_progress(
    current: &Subscription,
    now: Timestamp,
) -> Result<(), ChangeInProgress> {
    let fresh = |at: Timestamp| now.unix_millis().saturating_sub(at.unix_millis()) < CLAIM_HOLD_MS;
    if let Some(switch) = current.scheduled_switch()
        && (current.renewal() == RenewalIntent::EndsAtPeriodEnd || fresh(switch.requested_at()))
    {
        return Err(ChangeInProgress);
    }
    if current
        .pending_change()
        .is_some_and(|change| fresh(change.requested_at()))
    {
        return Err(ChangeInProgress);
    }
    Ok(())
}

/// Check a switch of `current` to `target` (its price in the environment the subscription bills
/// in) at the period's end, asked at `now`: the subscription is active (renewing, or already
/// scheduled to end), the plan is another recurring plan in the currency it bills. The billing
/// interval may differ: the new plan is a new purchase.
///
/// # Errors
/// [`PlanChangeRefusal`]: not active, the same plan, not recurring, another currency, or no
/// sold terms to compare with.
pub fn schedule_switch(
    current: &Subscription,
    target: &PlanSnapshot,
    now: Timestamp,
) -> Result<SwitchAtPeriodEnd, PlanChangeRefusal> {
    match current.status() {
        SubscriptionStatus::Active | SubscriptionStatus::Trialing => {}
        status => return Err(PlanChangeRefusal::NotLive(status.code())),
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
    Ok(SwitchAtPeriodEnd {
        switch: ScheduledSwitch::new(target.plan_id.clone(), now),
        direction: ChangeDirection::between(&from, &terms),
        kind: SwitchKind::between(&from, &terms),
    })
}

impl Subscription {
    /// Whether writing `self` over `stored` would replace one claim by another: a plan change or
    /// a scheduled switch set where `stored` holds a different one (of either kind). A store
    /// refuses such a write as a conflict, so that two concurrent switch requests cannot both
    /// claim the subscription; keeping a claim, setting one where none is, and clearing one are
    /// allowed.
    #[must_use]
    pub fn overwrites_claim_of(&self, stored: &Self) -> bool {
        let sets_change = self
            .pending_change()
            .is_some_and(|c| stored.pending_change() != Some(c));
        let sets_switch = self
            .scheduled_switch()
            .is_some_and(|s| stored.scheduled_switch() != Some(s));
        let stored_claims =
            stored.pending_change().is_some() || stored.scheduled_switch().is_some();
        (sets_change || sets_switch) && stored_claims
    }
}

#[cfg(test)]
mod tests;
