//! Refunds and lost disputes (CORRECTNESS.md invariant 11): every verified report is kept once
//! against the payment it names — an order's payment or one charge of a subscription — and the
//! payment's refunded total is what all its reports add up to (the domain's `refund_step`). A
//! report for a payment that has not arrived is kept and applied when the payment lands.

use domain::{
    EventOutcome, KeptRefund, Money, OrderRefundDecision, PlanType, RefundForm, RefundMismatch,
    RefundStep, Subscription, Transition, UserId, check_refund, decide_order_refund, refund_step,
};

use super::{
    Change, Decision, HandleWebhookError, Received, kept_amounts, unknown_order,
    unknown_subscription,
};
use crate::ports::{
    ChargeChange, ClawbackCommand, Clock, GrantSource, IdGenerator, OrderRecord,
    PaymentEventOutcome, RefundRecord, RefundReport, RefundTarget, RefundedCharge, SecretHasher,
    Store, StoreError, SubscriptionCharge,
};
use crate::service::Service;

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// A refund or lost dispute, of an order's payment or of a subscription charge.
    pub(super) async fn decide_refund(
        &self,
        r: &Received,
        charge: &RefundedCharge,
        report: &RefundReport,
    ) -> Result<Decision, HandleWebhookError> {
        match charge {
            RefundedCharge::Order(locator) => {
                let Some(record) = self.locate(r.provider, locator).await? else {
                    return Ok(unknown_order());
                };
                // A subscription's first payment is its first charge: refunding it takes back
                // that period's credits.
                if record.order.plan().plan_type == PlanType::Recurring
                    && let Some(charge) = self.store.find_charge_of_order(record.order.id()).await?
                {
                    return self.refund_charge(r, &charge, report).await;
                }
                self.refund_order_payment(r, &record, report).await
            }
            RefundedCharge::SubscriptionCharge {
                provider_subscription_id,
                charge_ref,
            } => match self.store.find_charge(r.provider, charge_ref).await? {
                Some(charge) => self.refund_charge(r, &charge, report).await,
                None => {
                    self.keep_charge_refund(
                        r,
                        provider_subscription_id.as_deref(),
                        charge_ref,
                        report,
                    )
                    .await
                }
            },
        }
    }

    /// A refund of a one-time or credits order: the order moves along the refund path and the
    /// refunded share of its credits is taken back; before the payment, the report is kept.
    async fn refund_order_payment(
        &self,
        r: &Received,
        record: &OrderRecord,
        report: &RefundReport,
    ) -> Result<Decision, HandleWebhookError> {
        let order = &record.order;
        let target = RefundTarget::Order(order.id().clone());
        let price = order.plan().price;
        let user = order.user_id();
        let (new, all) = match self.fresh_report(r, &target, report, price, user).await? {
            NewReport::Fresh { record, all } => (record, all),
            NewReport::Refused(decision) => return Ok(decision),
        };
        let (outcome, detail, next, clawback) = match decide_order_refund(order, &all) {
            // Kept until the payment lands; the order's version moves, so a payment decided
            // before this report was kept is decided again.
            OrderRefundDecision::KeepUntilPaid => (
                EventOutcome::RefundKept,
                Some("refund kept until the payment arrives".to_owned()),
                Some(order.clone()),
                None,
            ),
            OrderRefundDecision::Unpaid(why) => {
                (EventOutcome::RefundRefused, Some(why), None, None)
            }
            OrderRefundDecision::Nothing => (EventOutcome::DuplicateState, None, None, None),
            OrderRefundDecision::Refund { order, clawback } => {
                (EventOutcome::Applied, None, Some(order), clawback)
            }
        };
        let mut change = r.change(outcome, detail);
        if let Some(next) = next {
            change = change.order(record, &next, None);
        }
        change.command.refund = Some(new);
        change.command.clawbacks = clawback.map_or_else(Vec::new, |back| {
            order_clawbacks(order.id(), order.account_id(), back, r.now)
        });
        Ok(change.apply())
    }

    /// A refund of a subscription charge: the charge's refunded total moves and the refunded
    /// share of that period's credits is taken back (the originating order follows for the
    /// first period's charge).
    async fn refund_charge(
        &self,
        r: &Received,
        charge: &SubscriptionCharge,
        report: &RefundReport,
    ) -> Result<Decision, HandleWebhookError> {
        let target = RefundTarget::Charge(charge_key(charge));
        let paid = charge.amount;
        let user = &charge.user_id;
        let (new, all) = match self.fresh_report(r, &target, report, paid, user).await? {
            NewReport::Fresh { record, all } => (record, all),
            NewReport::Refused(decision) => return Ok(decision),
        };
        let Some(step) = refund_step(charge.amount, charge.credits, charge.refunded, &all) else {
            let mut change = r.change(EventOutcome::DuplicateState, None);
            change.command.refund = Some(new);
            return Ok(change.apply());
        };
        let mut change = self
            .charge_refund(r.change(EventOutcome::Applied, None), charge, &step)
            .await?;
        change.command.refund = Some(new);
        Ok(change.apply())
    }

    /// Refunds kept against a charge whose own payment was applied concurrently (another
    /// instance read the kept reports before this one committed): found by the store and
    /// applied here, once each (the inbox row names the refunded total reached), at most
    /// `limit` charges a pass. Returns how many charges moved.
    ///
    /// # Errors
    /// Infrastructure; a charge that moved meanwhile is left for the next pass.
    pub(crate) async fn apply_unapplied_charge_refunds(
        &self,
        limit: u32,
    ) -> Result<u32, HandleWebhookError> {
        let mut applied = 0;
        for charge in self.store.charges_with_unapplied_refunds(limit).await? {
            let Some(charge_ref) = charge.charge_ref.clone() else {
                continue;
            };
            let target = RefundTarget::Charge(charge_ref.clone());
            let all = kept_amounts(&self.store.refunds_of(charge.provider, &target).await?);
            let Some(step) = refund_step(charge.amount, charge.credits, charge.refunded, &all)
            else {
                continue;
            };
            let r = Received {
                provider: charge.provider,
                event_id: format!(
                    "tally:kept-refunds:{charge_ref}:{}",
                    step.after.amount_minor()
                ),
                event_type: "tally.reconcile.kept_refunds".into(),
                payload: String::new(),
                now: self.clock.now(),
                audit: None,
            };
            let detail = "refunds kept before their charge landed, applied by the reconciler";
            let change = r.change(EventOutcome::Applied, Some(detail.into()));
            let change = self.charge_refund(change, &charge, &step).await?;
            match self.write_payment_event(&change.command, None).await {
                Ok(PaymentEventOutcome::Applied { .. }) => applied += 1,
                Ok(PaymentEventOutcome::Duplicate) | Err(StoreError::Conflict(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(applied)
    }

    /// `change` with `charge`'s refunded total moved by `step`, the period's credits taken
    /// back, and (for the first period's charge) the originating order following.
    async fn charge_refund(
        &self,
        mut change: Change,
        charge: &SubscriptionCharge,
        step: &RefundStep,
    ) -> Result<Change, HandleWebhookError> {
        if let Some(order_id) = &charge.order_id
            && let Some(record) = self.store.find_order(order_id).await?
        {
            let mut order = record.order.clone();
            if order.plan().price == charge.amount
                && order.refund(step.after) == Ok(Transition::Applied)
            {
                change = change.order(&record, &order, None);
            }
        }
        change.command.charge = Some(ChargeChange::Refund {
            subscription_id: charge.subscription_id.clone(),
            period_start: charge.period.start(),
            expected: charge.refunded,
            refunded: step.after,
        });
        // A plan change's proration took its credits from that change's lot, a period's
        // charge from the period's.
        let source = match charge.plan_change_at {
            Some(asked) => GrantSource::PlanChange(charge.subscription_id.clone(), asked),
            None => GrantSource::SubscriptionPeriod(charge.subscription_id.clone(), charge.period),
        };
        change.command.clawbacks = Vec::from_iter(charge.credits.map(|_| ClawbackCommand {
            account_id: charge.account_id.clone(),
            source,
            wanted: step.clawback,
            now: change.command.inbox.received_at,
        }));
        Ok(change)
    }

    /// A refund of a subscription charge not seen yet: kept against the provider's charge id
    /// when the subscription is ours (checked against its sold price), applied when the
    /// charge's activation or renewal lands.
    async fn keep_charge_refund(
        &self,
        r: &Received,
        provider_subscription_id: Option<&str>,
        charge_ref: &str,
        report: &RefundReport,
    ) -> Result<Decision, HandleWebhookError> {
        let subscription = match provider_subscription_id {
            Some(id) => self.find_subscription(r, id).await?,
            None => None,
        };
        let Some((price, user)) = subscription
            .as_ref()
            .and_then(|s| Some((sold_price(s)?, s.user_id())))
        else {
            return Ok(unknown_subscription(
                provider_subscription_id.unwrap_or(charge_ref),
            ));
        };
        let target = RefundTarget::Charge(charge_ref.to_owned());
        let new = match self.fresh_report(r, &target, report, price, user).await? {
            NewReport::Fresh { record, .. } => record,
            NewReport::Refused(decision) => return Ok(decision),
        };
        let detail = "refund kept until the charge arrives".to_owned();
        let mut change = r.change(EventOutcome::RefundKept, Some(detail));
        change.command.refund = Some(new);
        Ok(change.apply())
    }
}

/// A refund report not kept before, or the decision that records why it changes nothing.
enum NewReport {
    /// New: the report as kept, and every report of its payment with it.
    Fresh {
        record: RefundRecord,
        all: Vec<KeptRefund>,
    },
    /// Not of that payment (a mismatch), or kept before (a duplicate state).
    Refused(Decision),
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// `report` as kept against `target` of a payment of `paid`, checked against that payment
    /// and against the reports kept before.
    async fn fresh_report(
        &self,
        r: &Received,
        target: &RefundTarget,
        report: &RefundReport,
        paid: Money,
        user: &UserId,
    ) -> Result<NewReport, HandleWebhookError> {
        let new = match kept(r, target, report, paid) {
            Ok(new) => new,
            Err(mismatch) => return Ok(NewReport::Refused(refund_mismatch(&mismatch, user))),
        };
        let earlier = self.store.refunds_of(r.provider, target).await?;
        if earlier.iter().any(|k| k.key == new.key) {
            let duplicate = Decision::Record(EventOutcome::DuplicateState, None);
            return Ok(NewReport::Refused(duplicate));
        }
        let mut all = kept_amounts(&earlier);
        all.push(new.refund);
        Ok(NewReport::Fresh { record: new, all })
    }
}

fn sold_price(subscription: &Subscription) -> Option<Money> {
    subscription.sold_terms().map(|terms| terms.price())
}

/// What refunds of `charge` are kept against: the provider's id for it, or (a charge stored
/// without one) its subscription and period.
fn charge_key(charge: &SubscriptionCharge) -> String {
    charge.charge_ref.clone().unwrap_or_else(|| {
        format!(
            "{}@{}",
            charge.subscription_id,
            charge.period.start().unix_millis()
        )
    })
}

/// A verified refund report that cannot be of the payment it names: recorded (told with the
/// user whose payment it names), nothing changes.
fn refund_mismatch(mismatch: &RefundMismatch, user: &UserId) -> Decision {
    let detail = Some(mismatch.to_string());
    Decision::RecordFor(EventOutcome::Mismatch, detail, user.clone())
}

/// The report as kept against `target` of a payment of `paid`, or why it cannot be of that
/// payment.
fn kept(
    r: &Received,
    target: &RefundTarget,
    report: &RefundReport,
    paid: Money,
) -> Result<RefundRecord, RefundMismatch> {
    let (key, form, amount) = match report {
        RefundReport::Total(total) => {
            let payment = match target {
                RefundTarget::Order(id) => id.as_str(),
                RefundTarget::Charge(charge) => charge.as_str(),
            };
            let key = format!("total:{payment}:{}", total.amount_minor());
            (key, RefundForm::Total, *total)
        }
        RefundReport::One { refund_id, amount } => {
            (format!("refund:{refund_id}"), RefundForm::One, *amount)
        }
        RefundReport::DisputeLost { dispute_id } => (
            format!("dispute:{dispute_id}"),
            RefundForm::DisputeLost,
            paid,
        ),
    };
    check_refund(paid, amount)?;
    Ok(RefundRecord {
        provider: r.provider,
        key: key.chars().take(255).collect(),
        target: target.clone(),
        refund: KeptRefund { form, amount },
        received_at: r.now,
    })
}

/// What refunds take back of credits order `order` in `account`: the share of its credits,
/// and of its bonus credits when it had any, each from its own lot.
pub(super) fn order_clawbacks(
    order: &domain::OrderId,
    account: &domain::AccountId,
    back: domain::Takeback,
    now: domain::Timestamp,
) -> Vec<ClawbackCommand> {
    let of = |source, wanted| ClawbackCommand {
        account_id: account.clone(),
        source,
        wanted,
        now,
    };
    let mut clawbacks = vec![of(GrantSource::Order(order.clone()), back.credits)];
    if let Some(bonus) = back.bonus {
        clawbacks.push(of(GrantSource::OrderBonus(order.clone()), bonus));
    }
    clawbacks
}
