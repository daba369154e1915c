//! A provider's "the subscription now bills another price" event (issue 19): checked against
//! the plan change the subscriber asked for (`domain::decide_plan_changed`); a matching one moves
//! the subscription to the new plan and terms and grants an upgrade's extra credits, in the
//! event's one transaction; any other is a mismatch and changes nothing.

use domain::{
    EventOutcome, PeriodGrants, Plan, PlanChangedDecision, PlanChangedFacts, PlanId, RevisedTo,
    Subscription, decide_plan_changed, decide_plan_revised,
};

use super::{Decision, HandleWebhookError, Received, unknown_subscription, update};
use crate::ports::{
    Clock, GrantCommand, GrantSource, IdGenerator, PaymentEvent, SecretHasher, Store,
};
use crate::service::Service;
use crate::use_cases::plans::find_plan;

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// An event of a plan change: the provider switched the subscription
    /// ([`PaymentEvent::SubscriptionPlanChanged`]), invoiced the switch
    /// ([`PaymentEvent::SubscriptionChangeInvoiced`]), or the subscriber approved a revision
    /// ([`PaymentEvent::SubscriptionPlanRevised`]).
    pub(super) async fn plan_event(
        &self,
        r: &Received,
        event: &PaymentEvent,
    ) -> Result<Decision, HandleWebhookError> {
        match event {
            PaymentEvent::SubscriptionPlanChanged { .. } => self.plan_changed(r, event).await,
            PaymentEvent::SubscriptionChangeInvoiced { .. } => self.change_invoiced(r, event).await,
            PaymentEvent::SubscriptionPlanRevised { .. } => self.plan_revised(r, event).await,
            _ => Ok(Decision::Record(EventOutcome::Ignored, None)),
        }
    }

    /// A [`PaymentEvent::SubscriptionPlanChanged`]: the subscription now bills what it says.
    pub(super) async fn plan_changed(
        &self,
        r: &Received,
        event: &PaymentEvent,
    ) -> Result<Decision, HandleWebhookError> {
        let PaymentEvent::SubscriptionPlanChanged {
            provider_subscription_id,
            price,
            interval_months,
            occurred_at,
        } = event
        else {
            return Ok(Decision::Record(EventOutcome::Ignored, None));
        };
        let facts = PlanChangedFacts {
            price: *price,
            interval_months: *interval_months,
            occurred_at: *occurred_at,
        };
        let Some(current) = self.find_subscription(r, provider_subscription_id).await? else {
            return Ok(unknown_subscription(provider_subscription_id));
        };
        let granted = self.period_grants(&current).await?;
        Ok(command_of(
            r,
            &current,
            decide_plan_changed(&current, &facts, &granted),
        ))
    }

    /// What `current`'s current billing period was granted so far: its own lot and the lots of
    /// plan changes asked within it.
    pub(super) async fn period_grants(
        &self,
        current: &Subscription,
    ) -> Result<PeriodGrants, HandleWebhookError> {
        let period = current.current_period();
        let own = GrantSource::SubscriptionPeriod(current.id().clone(), period);
        let own = self.store.granted_by(&own).await?;
        let changes = self.store.change_grants(current.id()).await?;
        Ok(PeriodGrants::of(period, own, &changes))
    }
}

/// The command a plan-changed or plan-revised decision comes to.
fn command_of(r: &Received, current: &Subscription, decision: PlanChangedDecision) -> Decision {
    let outcome = decision.outcome();
    match decision {
        PlanChangedDecision::Apply {
            subscription,
            change,
            credits,
        } => {
            let mut applied = update(r, current, &subscription);
            applied.command.inbox.detail = Some(format!(
                "{} from plan {} to plan {} at {} every {} month(s)",
                change.kind(current.sold_terms().as_ref()).code(),
                current.plan_id(),
                change.plan_id(),
                change.terms().price(),
                change.terms().interval().get()
            ));
            // The upgrade's extra credits, keyed by the request's time: one request grants once.
            applied.command.grant = credits.map(|extra| GrantCommand {
                account_id: subscription.account_id().clone(),
                amount: extra.amount,
                source: GrantSource::PlanChange(subscription.id().clone(), change.requested_at()),
                expires_at: Some(extra.period.end()),
                now: r.now,
            });
            applied.apply()
        }
        PlanChangedDecision::Mismatch(why) => {
            Decision::RecordFor(outcome, Some(why), current.user_id().clone())
        }
        PlanChangedDecision::AlreadyDone => Decision::Record(outcome, None),
        PlanChangedDecision::Stale(why) | PlanChangedDecision::AwaitsInvoice(why) => {
            Decision::Record(outcome, Some(why))
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// A [`PaymentEvent::SubscriptionPlanRevised`]: the subscriber approved, at the provider,
    /// moving to the provider plan it names; which of our plans that is decides.
    pub(super) async fn plan_revised(
        &self,
        r: &Received,
        event: &PaymentEvent,
    ) -> Result<Decision, HandleWebhookError> {
        let PaymentEvent::SubscriptionPlanRevised {
            provider_subscription_id,
            provider_plan_id,
            price,
            interval_months,
            occurred_at,
        } = event
        else {
            return Ok(Decision::Record(EventOutcome::Ignored, None));
        };
        let facts = PlanChangedFacts {
            price: *price,
            interval_months: *interval_months,
            occurred_at: *occurred_at,
        };
        let Some(current) = self.find_subscription(r, provider_subscription_id).await? else {
            return Ok(unknown_subscription(provider_subscription_id));
        };
        let to = self.revised_to(&current, provider_plan_id).await?;
        let decision = decide_plan_revised(&current, &to, &facts);
        Ok(command_of(r, &current, decision))
    }

    /// Which of our plans the provider plan `provider_plan_id` of `current` is: the pending
    /// change's, the subscription's own, or neither (a plan no longer known is neither).
    async fn revised_to(
        &self,
        current: &Subscription,
        provider_plan_id: &str,
    ) -> Result<RevisedTo, HandleWebhookError> {
        let names = |plan: Option<Plan>| {
            plan.is_some_and(|p| provider_plan_ref(&p) == Some(provider_plan_id))
        };
        if let Some(change) = current.pending_change()
            && names(self.known_plan(change.plan_id()).await?)
        {
            return Ok(RevisedTo::AskedPlan);
        }
        if names(self.known_plan(current.plan_id()).await?) {
            return Ok(RevisedTo::CurrentPlan);
        }
        Ok(RevisedTo::OtherPlan(
            provider_plan_id.chars().take(64).collect(),
        ))
    }

    async fn known_plan(&self, id: &PlanId) -> Result<Option<Plan>, HandleWebhookError> {
        Ok(find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            id,
        )
        .await?)
    }
}

/// The provider's id for `plan` at the provider that sells it (its price, plan or product).
fn provider_plan_ref(plan: &Plan) -> Option<&str> {
    plan.provider_refs()
        .get(plan.provider())
        .map(str::trim)
        .filter(|id| !id.is_empty())
}
