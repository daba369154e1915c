//! A provider's "the subscription now bills another price" event (issue 19): checked against
//! the plan change the subscriber asked for (`domain::decide_plan_changed`); a matching one moves
//! the subscription to the new plan and terms and grants an upgrade's extra credits, in the
//! event's one transaction; any other is a mismatch and changes nothing.

use domain::{
    EventOutcome, PlanChangedDecision, PlanChangedFacts, Subscription, decide_plan_changed,
};

use super::{Decision, HandleWebhookError, Received, unknown_subscription, update};
use crate::ports::{
    Clock, GrantCommand, GrantSource, IdGenerator, PaymentEvent, SecretHasher, Store,
};
use crate::service::Service;

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
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
        Ok(command_for(r, &current, &facts))
    }
}

/// The command a plan-changed event comes to.
fn command_for(r: &Received, current: &Subscription, facts: &PlanChangedFacts) -> Decision {
    let decision = decide_plan_changed(current, facts);
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
                change.direction().code(),
                current.plan_id(),
                change.plan_id(),
                change.terms().price(),
                change.terms().interval().get()
            ));
            // The upgrade's extra credits, keyed by the request's time: one request grants once.
            applied.command.grant = credits.map(|extra| GrantCommand {
                user_id: subscription.user_id().clone(),
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
        PlanChangedDecision::Stale(why) => Decision::Record(outcome, Some(why)),
    }
}
