//! A plan change's invoice (issue 19; Stripe's `invoice.paid` with
//! `billing_reason=subscription_update`), decided by `domain::decide_change_invoice`:
//!
//! - the first period of a new billing interval moves the subscription to the new plan, terms
//!   and period, grants the new plan's credits for that period, records the invoice as the
//!   period's charge and takes back the old period's unused credits — one transaction;
//! - a proration within the period is recorded as a charge against the change it pays
//!   (`plan_change_at`), so that refunding it takes back that change's credits in proportion.

use domain::{
    ChangeInvoiceDecision, ChangeInvoiceFacts, Credits, EventOutcome, PeriodCharge,
    PeriodLotSource, PlanChange, Subscription, Timestamp, decide_change_invoice, proration_charge,
};

use super::{Decision, HandleWebhookError, Received, period_paid, unknown_subscription, update};
use crate::ports::{
    ChargeChange, ClawbackCommand, Clock, GrantSource, IdGenerator, PaymentEvent, SecretHasher,
    Store, SubscriptionCharge,
};
use crate::service::Service;

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// A [`PaymentEvent::SubscriptionChangeInvoiced`].
    pub(super) async fn change_invoiced(
        &self,
        r: &Received,
        event: &PaymentEvent,
    ) -> Result<Decision, HandleWebhookError> {
        let PaymentEvent::SubscriptionChangeInvoiced {
            provider_subscription_id,
            paid,
            new_period,
            change_requested_at,
            charge_ref,
            occurred_at,
        } = event
        else {
            return Ok(Decision::Record(EventOutcome::Ignored, None));
        };
        let Some(current) = self.find_subscription(r, provider_subscription_id).await? else {
            return Ok(unknown_subscription(provider_subscription_id));
        };
        let facts = ChangeInvoiceFacts {
            paid: *paid,
            new_period: *new_period,
            change_requested_at: *change_requested_at,
            occurred_at: *occurred_at,
        };
        let charge_ref = charge_ref.as_deref();
        let kept = self.kept_for_charge(r, charge_ref).await?;
        let granted = self.period_grants(&current).await?;
        let decision = decide_change_invoice(&current, &facts, &kept, &granted);
        let outcome = decision.outcome();
        Ok(match decision {
            ChangeInvoiceDecision::StartsPeriod {
                subscription,
                change,
                charge,
                unused,
            } => {
                let starts = NewPeriod {
                    subscription: &subscription,
                    change: &change,
                    charge: &charge,
                    unused,
                };
                starts_period(r, &current, &starts, charge_ref)
            }
            ChangeInvoiceDecision::Proration {
                requested_at,
                period,
                pending_credits,
            } => {
                let source = GrantSource::PlanChange(current.id().clone(), requested_at);
                let credits = match pending_credits {
                    Some(credits) => credits,
                    None => self.store.granted_by(&source).await?,
                };
                let charge = proration_charge(period, *paid, *occurred_at, credits, &kept);
                proration(r, &current, &charge, source, (requested_at, charge_ref))
            }
            ChangeInvoiceDecision::Mismatch(why) => {
                Decision::RecordFor(outcome, Some(why), current.user_id().clone())
            }
            ChangeInvoiceDecision::AlreadyDone => Decision::Record(outcome, None),
            ChangeInvoiceDecision::Stale(why) | ChangeInvoiceDecision::Ignored(why) => {
                Decision::Record(outcome, Some(why))
            }
        })
    }
}

/// What an interval change's invoice starts.
struct NewPeriod<'a> {
    subscription: &'a Subscription,
    change: &'a PlanChange,
    charge: &'a PeriodCharge,
    unused: Vec<(PeriodLotSource, Credits)>,
}

/// The command of an interval change's first period: the subscription on its new plan, terms
/// and period, the period paid (charge and credits), the old period's unused credits back.
fn starts_period(
    r: &Received,
    current: &Subscription,
    starts: &NewPeriod<'_>,
    charge_ref: Option<&str>,
) -> Decision {
    let (subscription, change) = (starts.subscription, starts.change);
    let mut applied = update(r, current, subscription);
    applied.command.inbox.detail = Some(format!(
        "{} from plan {} to plan {}: {} every {} month(s) from {}",
        change.kind(current.sold_terms().as_ref()).code(),
        current.plan_id(),
        change.plan_id(),
        change.terms().price(),
        change.terms().interval().get(),
        starts.charge.period.start()
    ));
    let mut applied = period_paid(r, applied, subscription, starts.charge, charge_ref, None);
    // Every lot of the old period gives back its share after the change.
    let old_period = current.current_period();
    let id = subscription.id();
    applied.command.clawbacks = (starts.unused.iter())
        .map(|&(lot, wanted)| ClawbackCommand {
            account_id: subscription.account_id().clone(),
            source: match lot {
                PeriodLotSource::Period => GrantSource::SubscriptionPeriod(id.clone(), old_period),
                PeriodLotSource::Change(asked) => GrantSource::PlanChange(id.clone(), asked),
            },
            wanted,
            now: r.now,
        })
        .collect();
    applied.apply()
}

/// The command of a proration: its charge recorded against the change asked at `requested_at`
/// (whose lot is `source`), and what refunds kept before it take back at once.
fn proration(
    r: &Received,
    current: &Subscription,
    charge: &PeriodCharge,
    source: GrantSource,
    (requested_at, charge_ref): (Timestamp, Option<&str>),
) -> Decision {
    let detail = proration_detail(current, charge.credits);
    let mut applied = r.change(EventOutcome::Applied, Some(detail));
    applied.command.clawbacks = Vec::from_iter(charge.clawback.map(|wanted| ClawbackCommand {
        account_id: current.account_id().clone(),
        source,
        wanted,
        now: r.now,
    }));
    applied.command.charge = Some(ChargeChange::Record(SubscriptionCharge {
        subscription_id: current.id().clone(),
        user_id: current.user_id().clone(),
        account_id: current.account_id().clone(),
        provider: r.provider,
        charge_ref: charge_ref.map(str::to_owned),
        order_id: None,
        period: charge.period,
        amount: charge.amount,
        credits: charge.credits,
        refunded: charge.refunded,
        paid_at: charge.paid_at,
        plan_change_at: Some(requested_at),
    }));
    applied.apply()
}

fn proration_detail(current: &Subscription, credits: Option<Credits>) -> String {
    format!(
        "proration of the plan change of subscription {}, against {} credits",
        current.id(),
        credits.map_or_else(|| "no".to_owned(), |c| c.to_string())
    )
}
