//! Administrators' actions on a customer's purchases (issue 18), each written to the audit log:
//! cancel a subscription at the end of its period through its provider (the same path as the
//! subscriber's own cancel) or at once, and refund an order through its provider.
//!
//! Each entry is written in the transaction of the action's own write at Tally: the
//! subscription scheduled to end, the refund a provider reports done at once applied. An action
//! whose only write at Tally is its entry (a cancel-now, whose provider event ends the
//! subscription later; a refund the provider completes later) writes the entry alone, after
//! the provider accepted. A refused or repeated action (already scheduled, the same refund
//! applied before) writes none.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::{
    EventOutcome, Money, OrderStatus, RenewalIntent, Subscription, SubscriptionId, Timestamp,
};

use super::super::cancel_payment::{CancelOutcome, CancelPaymentError};
use super::super::handle_webhook::EventAuditFor;
use super::super::refund_order::{ProviderRefund, RefundAccepted, RefundOrder, RefundOrderError};
use crate::accounts::User;
use crate::ports::{
    AuditAction, AuditFacts, AuditValue, Clock, EventAudit, GatewayError, IdGenerator,
    MismatchNotice, NewAudit, RefundState, SecretHasher, Store, StoreError,
};
use crate::service::Service;

/// Why an administrator's cancel was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminCancelError {
    /// No such subscription, or none started by an order Tally knows.
    #[error("subscription not found")]
    NotFound,
    /// The subscription is over, or cannot be cancelled in its state.
    #[error(transparent)]
    Cancel(#[from] CancelPaymentError),
    /// Its provider cannot end a subscription at once (or Tally does not call it): cancel it
    /// at period end instead.
    #[error("this provider cannot end a subscription at once; cancel it at period end")]
    NowNotSupported,
}

impl From<StoreError> for AdminCancelError {
    fn from(e: StoreError) -> Self {
        Self::Cancel(CancelPaymentError::Infra(e.into()))
    }
}

fn subscription_facts(s: &Subscription) -> AuditFacts {
    BTreeMap::from([
        (
            "status".to_owned(),
            AuditValue::Text(s.status().code().to_owned()),
        ),
        (
            "cancelAtPeriodEnd".to_owned(),
            AuditValue::Text((s.renewal() == RenewalIntent::EndsAtPeriodEnd).to_string()),
        ),
    ])
}

fn text(value: impl ToString) -> AuditValue {
    AuditValue::Text(value.to_string())
}

/// What an order's entry tells of it: its status, and how much of it is refunded.
fn order_facts(status: &OrderStatus, price: Money) -> AuditFacts {
    let refunded = match status {
        OrderStatus::PartiallyRefunded { refunded, .. } => refunded.amount_minor(),
        OrderStatus::Refunded { .. } => price.amount_minor(),
        _ => 0,
    };
    BTreeMap::from([
        ("status".to_owned(), text(status.code())),
        ("refundedMinor".to_owned(), AuditValue::Integer(refunded)),
    ])
}

/// The entry of `admin`'s refund at `at` (`reason`), for the order's status after it.
fn refund_entry(
    admin: &User,
    refund: &ProviderRefund,
    reason: &str,
    at: Timestamp,
    after_status: &OrderStatus,
) -> NewAudit {
    let before = &refund.before.order;
    let price = before.plan().price;
    let state = match &refund.started.state {
        RefundState::Pending => "pending".to_owned(),
        RefundState::Succeeded => "succeeded".to_owned(),
        RefundState::Failed(why) => format!("failed: {why}"),
    };
    let mut after = order_facts(after_status, price);
    after.insert("refundId".into(), text(&refund.refund_id));
    after.insert(
        "amountMinor".into(),
        AuditValue::Integer(refund.amount.amount_minor()),
    );
    after.insert("currency".into(), text(refund.amount.currency().code()));
    after.insert("refundState".into(), AuditValue::Text(state));
    after.insert("reason".into(), text(reason));
    NewAudit {
        admin_id: admin.id.clone(),
        action: AuditAction::OrderRefunded,
        object_kind: "order",
        object_id: before.id().to_string(),
        before: Some(order_facts(before.status(), price)),
        after: Some(after),
        at,
    }
}

/// The entry of `admin`'s cancel of a subscription at period end, at `at`.
fn cancel_entry(
    admin: &User,
    before: &Subscription,
    after: &Subscription,
    at: Timestamp,
) -> NewAudit {
    NewAudit {
        admin_id: admin.id.clone(),
        action: AuditAction::SubscriptionCanceled,
        object_kind: "subscription",
        object_id: before.id().to_string(),
        before: Some(subscription_facts(before)),
        after: Some(subscription_facts(after)),
        at,
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// `admin` cancels a customer's subscription at
    /// the end of its current period, through its provider like the subscriber's own cancel,
    /// audited in the transaction that schedules the end; cancelling one already scheduled to
    /// end changes nothing and is not logged again.
    ///
    /// # Errors
    /// See [`AdminCancelError`].
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, subscription_id = %subscription_id))]
    pub async fn cancel_subscription_for_customer(
        &self,
        admin: &User,
        subscription_id: &SubscriptionId,
    ) -> Result<Subscription, AdminCancelError> {
        let record = self
            .store
            .subscription_order(subscription_id)
            .await?
            .ok_or(AdminCancelError::NotFound)?;
        let at = self.clock.now();
        let audit = |before: &Subscription, after: &Subscription| EventAudit {
            entry: cancel_entry(admin, before, after, at),
            mismatch: MismatchNotice::Tell,
        };
        let CancelOutcome::SubscriptionEndsAtPeriodEnd(_, after) = self
            .cancel_subscription_audited(record, Some(&audit))
            .await?
        else {
            return Err(AdminCancelError::NotFound);
        };
        Ok(after)
    }

    /// `admin` asks the provider to
    /// end a customer's subscription at once. Nothing changes here: the subscription ends when
    /// the provider's ended event arrives, checked like any other. The request is logged
    /// (`subscription.canceled`, after: `when: now`) once the provider accepted it: the entry is
    /// the action's only write at Tally.
    ///
    /// # Errors
    /// See [`AdminCancelError`]: [`AdminCancelError::NowNotSupported`] for a provider without
    /// an immediate cancel; `NotCancellable` for a subscription that is over.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, subscription_id = %subscription_id))]
    pub async fn cancel_subscription_now_for_customer(
        &self,
        admin: &User,
        subscription_id: &SubscriptionId,
    ) -> Result<Subscription, AdminCancelError> {
        let current = self
            .store
            .find_subscription(subscription_id)
            .await?
            .ok_or(AdminCancelError::NotFound)?;
        if !current.is_live() {
            return Err(CancelPaymentError::NotCancellable(current.status().code()).into());
        }
        let gateway = self
            .gateways
            .get(current.provider())
            .ok_or(AdminCancelError::NowNotSupported)?;
        match gateway
            .cancel_subscription_now(current.provider_subscription_id())
            .await
        {
            Ok(()) => {}
            Err(GatewayError::NotSupported) => return Err(AdminCancelError::NowNotSupported),
            Err(e) => return Err(CancelPaymentError::Gateway(e.to_string()).into()),
        }
        let mut after = subscription_facts(&current);
        after.insert("when".to_owned(), text("now"));
        self.store
            .record_audit(&NewAudit {
                admin_id: admin.id.clone(),
                action: AuditAction::SubscriptionCanceled,
                object_kind: "subscription",
                object_id: subscription_id.to_string(),
                before: Some(subscription_facts(&current)),
                after: Some(after),
                at: self.clock.now(),
            })
            .await?;
        Ok(current)
    }

    /// `admin` refunds part or all of a paid order through its provider, audited with the
    /// refund asked of the provider and its state. A refund the provider
    /// reports done at once is applied with its entry in one transaction (the same refund applied
    /// before writes none); one the provider completes later has the entry as its only write.
    ///
    /// # Errors
    /// See [`RefundOrderError`]; nothing is logged for a refused refund.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, order_id = %request.order_id))]
    pub async fn refund_order(
        &self,
        admin: &User,
        request: &RefundOrder,
    ) -> Result<RefundAccepted, RefundOrderError> {
        let refund = self.ask_refund(request).await?;
        let at = self.clock.now();
        if refund.started.state != RefundState::Succeeded {
            let unchanged = refund.before.order.status().clone();
            let entry = refund_entry(admin, &refund, &request.reason, at, &unchanged);
            self.store.record_audit(&entry).await?;
            return self.finish_refund(refund, None).await;
        }
        let (shared, admin) = (Arc::new(refund.clone()), admin.clone());
        let reason = request.reason.clone();
        let audit: Arc<EventAuditFor> =
            Arc::new(move |_: EventOutcome, moved_to: Option<&OrderStatus>| {
                let before = shared.before.order.status();
                let status = moved_to.unwrap_or(before);
                EventAudit {
                    entry: refund_entry(&admin, &shared, &reason, at, status),
                    mismatch: MismatchNotice::Tell,
                }
            });
        self.finish_refund(refund, Some(audit)).await
    }
}
