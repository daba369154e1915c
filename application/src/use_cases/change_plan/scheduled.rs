//! Switch at the period's end (issue 19), for providers without a plan-change API (and for any
//! subscriber who prefers it): the subscription is cancelled at its period's end through the
//! provider's own cancellation, and keeps the plan asked for (`domain::scheduled_switch`). When
//! it ends, the subscriber starts that plan with a new checkout through the same provider.
//!
//! One switch at a time: the scheduled plan is written on the subscription *before* the provider
//! is asked, as a claim that the store never replaces by another in one write; of two concurrent
//! requests only the one whose claim committed reaches the provider, the other is refused with
//! [`ChangePlanError::InProgress`]. A provider that refuses the cancellation drops the claim
//! again. The cancellation is then recorded in one transaction with the scheduled plan.

use domain::{
    ChangeDirection, PlanId, PlanSnapshot, RenewalIntent, ScheduledSwitch, Subscription,
    SubscriptionEvent, SubscriptionId, SwitchAtPeriodEnd, SwitchKind, Transition,
    check_no_change_in_progress, schedule_switch,
};

use super::{ChangePlanError, in_progress};
use crate::accounts::User;
use crate::ports::{
    Clock, GatewayError, IdGenerator, PaymentEventOutcome, SecretHasher, Store, StoreError,
};
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::plans::{Audience, list_plans};

/// What a switch at the period's end did.
#[derive(Debug, Clone)]
pub struct PlanSwitchScheduled {
    /// The subscription as it is now: scheduled to end, with the plan it switches to then.
    pub subscription: Subscription,
    /// The plan it switches to when it ends.
    pub plan_id: PlanId,
    /// Whether that plan costs more or less per month.
    pub direction: ChangeDirection,
    /// How the switch is told (a change of billing interval is neither up nor down).
    pub kind: SwitchKind,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Switch the caller's subscription `subscription_id` to plan `plan_id` when its period
    /// ends: it is cancelled at the period's end at its provider (unless it already ends then),
    /// and `plan_id` is kept as its scheduled plan.
    ///
    /// # Errors
    /// See [`ChangePlanError`]; [`ChangePlanError::InProgress`] while another switch of the
    /// subscription is in progress or scheduled.
    #[tracing::instrument(
        skip_all,
        fields(
            user_id = %user.id,
            subscription_id = %subscription_id,
            plan_id = %plan_id,
        )
    )]
    pub async fn schedule_plan_switch(
        &self,
        user: &User,
        subscription_id: &SubscriptionId,
        plan_id: &PlanId,
    ) -> Result<PlanSwitchScheduled, ChangePlanError> {
        let current = self.own_subscription(user, subscription_id).await?;
        let now = self.clock.now();
        check_no_change_in_progress(&current, now)?;
        let (snapshot, _) = self.switch_target(&current, plan_id).await?;
        let SwitchAtPeriodEnd {
            switch,
            direction,
            kind,
        } = schedule_switch(&current, &snapshot, now)?;
        let scheduled = |subscription| PlanSwitchScheduled {
            subscription,
            plan_id: switch.plan_id().clone(),
            direction,
            kind,
        };
        let current = self.release_stale_claim(current).await?;
        let claimed = self.claim_switch(&current, switch.clone()).await?;
        if claimed.renewal() == RenewalIntent::EndsAtPeriodEnd {
            // It ends already: nothing to ask the provider.
            return Ok(scheduled(claimed));
        }
        let gateway = self.subscription_gateway(&claimed)?;
        if let Err(e) = gateway
            .cancel_subscription(claimed.provider_subscription_id())
            .await
        {
            self.drop_switch(&claimed, &switch, "the provider refused to cancel")
                .await?;
            return Err(match e {
                GatewayError::NotSupported => ChangePlanError::NotSwitchable(format!(
                    "{} cannot cancel a subscription at its period's end",
                    claimed.provider()
                )),
                other => ChangePlanError::Gateway(other.to_string()),
            });
        }
        let recorded = self.record_scheduled_cancel(&claimed, &switch).await?;
        Ok(scheduled(recorded))
    }

    /// Withdraw the caller's switch at the period's end of `subscription_id`: the scheduled plan
    /// is forgotten. The subscription still ends with its period (resume it, where the provider
    /// allows, to keep it).
    ///
    /// # Errors
    /// See [`ChangePlanError`]; `Refused(NotScheduledToEnd)` when no switch is scheduled.
    #[tracing::instrument(skip_all, fields(user_id = %user.id, subscription_id = %subscription_id))]
    pub async fn cancel_scheduled_switch(
        &self,
        user: &User,
        subscription_id: &SubscriptionId,
    ) -> Result<Subscription, ChangePlanError> {
        let current = self.own_subscription(user, subscription_id).await?;
        let Some(switch) = current.scheduled_switch().cloned() else {
            return Err(domain::PlanChangeRefusal::NotScheduledToEnd.into());
        };
        self.drop_switch(&current, &switch, "withdrawn by the subscriber")
            .await?;
        let fresh = self.fresh(&current).await?;
        if fresh.scheduled_switch() == Some(&switch) {
            // Another write moved the subscription in between: the caller may retry.
            return Err(InfraError::Unavailable(anyhow::anyhow!(
                "subscription changed while its scheduled switch was withdrawn"
            ))
            .into());
        }
        Ok(fresh)
    }

    /// The listed plans `current` can switch to at its period's end (same provider, recurring,
    /// same currency, another plan), in listing order; empty while another switch is in
    /// progress or scheduled.
    ///
    /// # Errors
    /// The dynamic plan table cannot be read.
    #[tracing::instrument(skip_all, fields(subscription_id = %current.id()))]
    pub async fn period_end_switch_options(
        &self,
        current: &Subscription,
    ) -> Result<Vec<domain::Plan>, InfraError> {
        let now = self.clock.now();
        if check_no_change_in_progress(current, now).is_err() {
            return Ok(Vec::new());
        }
        let listed = list_plans(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.gateways,
            &self.store,
            Audience::Public,
            None,
        )
        .await?;
        Ok(listed
            .into_iter()
            .map(|stored| stored.plan)
            .filter(|plan| {
                let snapshot = PlanSnapshot::of(plan, plan.price_in(self.config.environment));
                plan.provider() == current.provider()
                    && schedule_switch(current, &snapshot, now).is_ok()
            })
            .collect())
    }

    /// Drop an abandoned claim (older than the hold) so that a new one can be written: a store
    /// never replaces one claim by another in one write.
    pub(super) async fn release_stale_claim(
        &self,
        current: Subscription,
    ) -> Result<Subscription, ChangePlanError> {
        if current.pending_change().is_none() && current.scheduled_switch().is_none() {
            return Ok(current);
        }
        let mut released = current.clone();
        released.drop_plan_change();
        released.drop_scheduled_switch();
        let command = self.request_command(
            &current,
            &released,
            format!(
                "tally:plan-claim-released:{}:{}",
                current.id(),
                self.clock.now().unix_millis()
            ),
            "tally.subscription.plan_claim_released",
            "an unsettled plan change was abandoned".into(),
        );
        match self.write_payment_event(&command, None).await {
            // Written: the claim is gone from the store too, so the next write expects none.
            Ok(PaymentEventOutcome::Applied { .. }) => Ok(released.as_stored()),
            Ok(PaymentEventOutcome::Duplicate) | Err(StoreError::Conflict(_)) => Err(in_progress()),
            Err(e) => Err(e.into()),
        }
    }

    /// Write `switch` on `current` (compare-and-set, and the store's claim rule): the request
    /// that commits it is the one that asks the provider.
    async fn claim_switch(
        &self,
        current: &Subscription,
        switch: ScheduledSwitch,
    ) -> Result<Subscription, ChangePlanError> {
        let mut claimed = current.clone();
        claimed.schedule_switch(switch.clone());
        let command = self.request_command(
            current,
            &claimed,
            format!(
                "tally:plan-switch:{}:{}",
                current.id(),
                switch.requested_at().unix_millis()
            ),
            "tally.subscription.plan_switch_scheduled",
            format!(
                "switch to plan {} at the period's end asked by the subscriber",
                switch.plan_id()
            ),
        );
        match self.write_payment_event(&command, None).await {
            Ok(PaymentEventOutcome::Applied { .. }) => Ok(claimed),
            // The same request id (same subscription and millisecond) committed first.
            Ok(PaymentEventOutcome::Duplicate) => Err(in_progress()),
            Err(StoreError::Conflict(what)) => {
                let fresh = self.fresh(current).await?;
                if check_no_change_in_progress(&fresh, self.clock.now()).is_err() {
                    return Err(in_progress());
                }
                Err(InfraError::Unavailable(anyhow::anyhow!(
                    "subscription changed while a switch was asked: {what}"
                ))
                .into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The provider accepted the cancellation: record it with the scheduled plan (one write),
    /// unless its own event did already.
    async fn record_scheduled_cancel(
        &self,
        claimed: &Subscription,
        switch: &ScheduledSwitch,
    ) -> Result<Subscription, ChangePlanError> {
        let fresh = self.fresh(claimed).await?;
        let mut ending = fresh.clone();
        let at = self.clock.now().max(fresh.last_event_at());
        if fresh.scheduled_switch() != Some(switch)
            || ending.apply(SubscriptionEvent::CancelScheduled, at) != Ok(Transition::Applied)
        {
            return Ok(fresh);
        }
        let command = self.request_command(
            &fresh,
            &ending,
            format!(
                "tally:plan-switch-cancel:{}:{}",
                fresh.id(),
                switch.requested_at().unix_millis()
            ),
            "tally.subscription.cancel_requested",
            format!(
                "cancelled at the period's end to start plan {} then",
                switch.plan_id()
            ),
        );
        match self.write_payment_event(&command, None).await {
            Ok(_) | Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.fresh(&ending).await
    }

    /// Forget `switch` on the subscription, unless something replaced it meanwhile.
    async fn drop_switch(
        &self,
        known: &Subscription,
        switch: &ScheduledSwitch,
        why: &str,
    ) -> Result<(), ChangePlanError> {
        let fresh = self.fresh(known).await?;
        if fresh.scheduled_switch() != Some(switch) {
            return Ok(());
        }
        let mut dropped = fresh.clone();
        dropped.drop_scheduled_switch();
        let command = self.request_command(
            &fresh,
            &dropped,
            format!(
                "tally:plan-switch-dropped:{}:{}:{}",
                fresh.id(),
                switch.requested_at().unix_millis(),
                self.clock.now().unix_millis()
            ),
            "tally.subscription.plan_switch_dropped",
            format!("switch to plan {}: {why}", switch.plan_id()),
        );
        match self.write_payment_event(&command, None).await {
            Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
