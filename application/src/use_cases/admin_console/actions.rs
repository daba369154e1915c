//! Administrators' actions on a customer's purchases (issue 18), each written to the audit log:
//! cancel a subscription at the end of its period through its provider (the same path as the
//! subscriber's own cancel), and refund an order through its provider.

use std::collections::BTreeMap;

use domain::{RenewalIntent, Subscription, SubscriptionId};

use super::super::cancel_payment::{CancelOutcome, CancelPaymentError};
use super::super::refund_order::{RefundAccepted, RefundOrder, RefundOrderError};
use crate::accounts::User;
use crate::ports::{
    AuditAction, AuditFacts, AuditValue, Clock, GatewayError, IdGenerator, NewAudit, RefundState,
    SecretHasher, Store, StoreError,
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

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// `POST /api/admin/subscriptions/{id}/cancel`: `admin` cancels a customer's subscription at
    /// the end of its current period, through its provider like the subscriber's own cancel;
    /// cancelling one already scheduled to end changes nothing and is not logged again.
    ///
    /// # Errors
    /// See [`AdminCancelError`].
    pub async fn cancel_subscription_for_customer(
        &self,
        admin: &User,
        subscription_id: &str,
    ) -> Result<Subscription, AdminCancelError> {
        let id = SubscriptionId::new(subscription_id).map_err(|_| AdminCancelError::NotFound)?;
        let before = self
            .store
            .find_subscription(&id)
            .await?
            .ok_or(AdminCancelError::NotFound)?;
        let record = self
            .store
            .subscription_order(&id)
            .await?
            .ok_or(AdminCancelError::NotFound)?;
        let CancelOutcome::SubscriptionEndsAtPeriodEnd(_, after) =
            self.cancel_subscription(record).await?
        else {
            return Err(AdminCancelError::NotFound);
        };
        if after != before {
            self.store
                .record_audit(&NewAudit {
                    admin_id: admin.id.clone(),
                    action: AuditAction::SubscriptionCanceled,
                    object_kind: "subscription",
                    object_id: id.to_string(),
                    before: Some(subscription_facts(&before)),
                    after: Some(subscription_facts(&after)),
                    at: self.clock.now(),
                })
                .await?;
        }
        Ok(after)
    }

    /// `POST /api/admin/subscriptions/{id}/cancel` with `when: now`: `admin` asks the provider to
    /// end a customer's subscription at once. Nothing changes here: the subscription ends when
    /// the provider's ended event arrives, checked like any other. The request is logged
    /// (`subscription.canceled`, after: `when: now`).
    ///
    /// # Errors
    /// See [`AdminCancelError`]: [`AdminCancelError::NowNotSupported`] for a provider without
    /// an immediate cancel; `NotCancellable` for a subscription that is over.
    pub async fn cancel_subscription_now_for_customer(
        &self,
        admin: &User,
        subscription_id: &str,
    ) -> Result<Subscription, AdminCancelError> {
        let id = SubscriptionId::new(subscription_id).map_err(|_| AdminCancelError::NotFound)?;
        let current = self
            .store
            .find_subscription(&id)
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
                object_id: id.to_string(),
                before: Some(subscription_facts(&current)),
                after: Some(after),
                at: self.clock.now(),
            })
            .await?;
        Ok(current)
    }

    /// `POST /api/admin/orders/{orderId}/refund` by `admin`: [`Service::refund_order`], then
    /// an audit entry naming the refund asked of the provider and its state.
    ///
    /// # Errors
    /// See [`RefundOrderError`]; nothing is logged for a refused refund.
    pub async fn refund_order_by(
        &self,
        admin: &User,
        request: &RefundOrder,
    ) -> Result<RefundAccepted, RefundOrderError> {
        let before = self
            .store
            .find_order(
                &domain::OrderId::new(request.order_id.as_str())
                    .map_err(|_| RefundOrderError::NotFound)?,
            )
            .await?;
        let accepted = self.refund_order(request).await?;
        let state = match &accepted.state {
            RefundState::Pending => "pending".to_owned(),
            RefundState::Succeeded => "succeeded".to_owned(),
            RefundState::Failed(why) => format!("failed: {why}"),
        };
        let order_facts = |status: &str, refunded: i64| {
            BTreeMap::from([
                ("status".to_owned(), text(status)),
                ("refundedMinor".to_owned(), AuditValue::Integer(refunded)),
            ])
        };
        let refunded =
            |r: &crate::ports::OrderRecord| r.order.refunded().map_or(0, |m| m.amount_minor());
        let mut after = order_facts(
            accepted.order.order.status().code(),
            refunded(&accepted.order),
        );
        after.insert("refundId".into(), text(&accepted.refund_id));
        after.insert(
            "amountMinor".into(),
            AuditValue::Integer(accepted.amount.amount_minor()),
        );
        after.insert("currency".into(), text(accepted.amount.currency().code()));
        after.insert("refundState".into(), AuditValue::Text(state));
        after.insert("reason".into(), text(&request.reason));
        self.store
            .record_audit(&NewAudit {
                admin_id: admin.id.clone(),
                action: AuditAction::OrderRefunded,
                object_kind: "order",
                object_id: request.order_id.clone(),
                before: before.map(|r| order_facts(r.order.status().code(), refunded(&r))),
                after: Some(after),
                at: self.clock.now(),
            })
            .await?;
        Ok(accepted)
    }
}
