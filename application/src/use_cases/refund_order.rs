//! Refund an order from Tally (issue 15): an administrator refunds a paid order fully or in
//! part through its provider's refund API. Our refund id — the order and the refunded total it
//! asks for — is the provider's idempotency key, so a repeated request refunds once. The
//! provider's refund event completes it through the webhook path (the clawback of the refunded
//! share happens there, once); a refund the provider reports done at once is applied the same
//! way immediately, under the provider's refund id, which its later event repeats.

use std::sync::Arc;

use domain::{Money, OrderId, OrderStatus};
use rust_decimal::Decimal;

use super::InfraError;
use super::handle_webhook::EventAuditFor;
use crate::ports::{
    Clock, GatewayError, IdGenerator, OrderLocator, OrderRecord, PaymentEvent, PaymentRef,
    RefundReport, RefundRequest, RefundStarted, RefundState, RefundedCharge, SecretHasher, Store,
};
use crate::service::Service;

/// What to refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundOrder {
    /// The order.
    pub order_id: OrderId,
    /// How much, in major units of the order's currency; everything not yet refunded when
    /// `None`.
    pub amount: Option<Decimal>,
    /// Why (sent to the provider where it takes a reason).
    pub reason: String,
}

/// A refund the provider accepted.
#[derive(Debug, Clone)]
pub struct RefundAccepted {
    /// Our refund id (the provider's idempotency key).
    pub refund_id: String,
    /// The provider's refund id, when it gave one.
    pub provider_refund_id: Option<String>,
    /// What is refunded.
    pub amount: Money,
    /// Where it stands.
    pub state: RefundState,
    /// The order after it (already refunded when the provider said it was done).
    pub order: OrderRecord,
}

/// A refund the provider accepted, before Tally applies what it says.
#[derive(Debug, Clone)]
pub(crate) struct ProviderRefund {
    /// The order as it was before.
    pub(crate) before: OrderRecord,
    /// Our refund id (the provider's idempotency key).
    pub(crate) refund_id: String,
    /// The payment refunded.
    pub(crate) payment: PaymentRef,
    /// What is refunded.
    pub(crate) amount: Money,
    /// What the provider answered.
    pub(crate) started: RefundStarted,
}

/// Why an order could not be refunded.
#[derive(Debug, thiserror::Error)]
pub enum RefundOrderError {
    /// No such order.
    #[error("order not found")]
    NotFound,
    /// The order was never paid, or is refunded already.
    #[error("order is {0} and cannot be refunded")]
    NotRefundable(&'static str),
    /// The amount is zero, negative, has too many decimals, or is more than is left.
    #[error("{0}")]
    InvalidAmount(String),
    /// The provider is not configured here.
    #[error("provider {0} is not available")]
    ProviderUnavailable(String),
    /// The provider's API has no refund: refund in its dashboard; its refund event still
    /// reaches Tally.
    #[error("{0} has no refund API: refund in the provider's dashboard")]
    NotSupported(String),
    /// The provider refused or failed; nothing changed at Tally.
    #[error("payment provider failed: {0}")]
    Gateway(String),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for RefundOrderError {
    fn from(e: crate::ports::StoreError) -> Self {
        RefundOrderError::Infra(e.into())
    }
}

/// The amount refunded so far and what is left of the order's payment.
fn refundable(record: &OrderRecord) -> Result<(Money, Money), RefundOrderError> {
    let price = record.order.plan().price;
    let status = record.order.status();
    let refunded = match record.order.refunded() {
        Some(refunded) if !matches!(status, OrderStatus::Refunded { .. }) => refunded,
        _ => return Err(RefundOrderError::NotRefundable(status.code())),
    };
    let left = Money::from_minor(
        price.amount_minor() - refunded.amount_minor(),
        price.currency(),
    )
    .map_err(|e| RefundOrderError::InvalidAmount(e.to_string()))?;
    Ok((refunded, left))
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Check `request` against its order and ask the provider for the refund.
    pub(crate) async fn ask_refund(
        &self,
        request: &RefundOrder,
    ) -> Result<ProviderRefund, RefundOrderError> {
        let record = self
            .store
            .find_order(&request.order_id)
            .await?
            .ok_or(RefundOrderError::NotFound)?;
        let (refunded, left) = refundable(&record)?;
        let price = record.order.plan().price;
        let amount = match request.amount {
            None => left,
            Some(major) => Money::from_decimal(major, price.currency())
                .map_err(|e| RefundOrderError::InvalidAmount(e.to_string()))?,
        };
        if amount.is_zero() || amount.amount_minor() > left.amount_minor() {
            return Err(RefundOrderError::InvalidAmount(format!(
                "{amount} is not between 0 and the {left} left to refund"
            )));
        }
        let provider = record.order.provider();
        let gateway = self
            .gateways
            .get(provider)
            .ok_or_else(|| RefundOrderError::ProviderUnavailable(provider.to_string()))?
            .clone();
        let refund_id = format!(
            "rf_{}_{}",
            record.order.id(),
            refunded.amount_minor() + amount.amount_minor()
        );
        let asked = RefundRequest {
            payment: record.payment_ref(),
            refund_id: refund_id.clone(),
            amount,
            paid: price,
            reason: request.reason.chars().take(80).collect(),
            notify_url: self.config.callbacks.webhook(provider),
        };
        let started = gateway.refund(&asked).await.map_err(|e| match e {
            GatewayError::NotSupported => RefundOrderError::NotSupported(provider.to_string()),
            other => RefundOrderError::Gateway(other.to_string()),
        })?;
        Ok(ProviderRefund {
            before: record,
            refund_id,
            payment: asked.payment,
            amount,
            started,
        })
    }

    /// Apply a refund the provider reports done at once (with the administrator's action
    /// `audit`, whose entry then commits with it), and answer with the order as it is now.
    pub(crate) async fn finish_refund(
        &self,
        refund: ProviderRefund,
        audit: Option<Arc<EventAuditFor>>,
    ) -> Result<RefundAccepted, RefundOrderError> {
        let ProviderRefund {
            before,
            refund_id,
            payment,
            amount,
            started,
        } = refund;
        if started.state == RefundState::Succeeded {
            let provider_refund_id = started.provider_refund_id.as_deref();
            self.apply_done_refund(&payment, &refund_id, provider_refund_id, amount, audit)
                .await?;
        }
        let order = self
            .store
            .find_order(before.order.id())
            .await?
            .unwrap_or(before);
        Ok(RefundAccepted {
            refund_id,
            provider_refund_id: started.provider_refund_id,
            amount,
            state: started.state,
            order,
        })
    }

    /// A refund the provider reports done at once goes through the webhook path now, under the
    /// provider's refund id (its own refund event repeats that id, or reports the running total,
    /// and changes nothing more).
    async fn apply_done_refund(
        &self,
        payment: &PaymentRef,
        refund_id: &str,
        provider_refund_id: Option<&str>,
        amount: Money,
        audit: Option<Arc<EventAuditFor>>,
    ) -> Result<(), RefundOrderError> {
        let Some(record) = self.store.find_order(&payment.order_id).await? else {
            return Err(RefundOrderError::NotFound);
        };
        let event = PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: Some(payment.order_id.clone()),
                provider_reference: None,
            }),
            refund: RefundReport::One {
                refund_id: provider_refund_id.unwrap_or(refund_id).to_owned(),
                amount,
            },
            occurred_at: self.clock.now(),
        };
        self.apply_reconciled_audited(
            record.order.provider(),
            format!("tally:refund:{refund_id}"),
            &event,
            audit,
        )
        .await
        .map_err(|e| match e {
            super::handle_webhook::HandleWebhookError::Infra(infra) => infra.into(),
            other => RefundOrderError::Gateway(other.to_string()),
        })
    }
}
