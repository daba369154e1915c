//! Query a payment: the caller's own order; anyone else's is "not found".

use domain::{AccountId, OrderId, OrderStatus, PlanId};

use super::InfraError;
use super::handle_webhook::{Captured, HandleWebhookError};
use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{Clock, IdGenerator, OrderRecord, PaymentEvent, SecretHasher, Store};
use crate::service::Service;

/// Why an order could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum QueryPaymentError {
    /// No such order of this user (another user's order is reported the same way).
    #[error("order not found")]
    NotFound,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The plan order `order_id` bought, when the order exists (to name the purchase behind a
    /// ledger entry of the order's own user).
    ///
    /// # Errors
    /// The store cannot be read.
    #[tracing::instrument(skip_all, fields(order_id = %order_id))]
    pub async fn ordered_plan(&self, order_id: &OrderId) -> Result<Option<PlanId>, InfraError> {
        let record = self.store.find_order(order_id).await?;
        Ok(record.map(|r| r.order.plan().plan_id.clone()))
    }

    /// The caller's order `order_id`.
    ///
    /// # Errors
    /// [`QueryPaymentError::NotFound`] for an unknown id or another user's order.
    #[tracing::instrument(skip_all, fields(user_id = %user.id, order_id = %order_id))]
    pub async fn query_payment(
        &self,
        user: &User,
        order_id: &OrderId,
    ) -> Result<OrderRecord, QueryPaymentError> {
        self.own_order(user, order_id).await
    }

    /// The caller's order `order_id`, after the buyer's return from the provider: a pending
    /// order whose provider wants the merchant to capture the approved payment (PayPal) is
    /// captured now, with the same idempotency key as the webhook and reconciler paths, and
    /// what the capture came to is applied through the webhook pipeline, so that the success
    /// page shows the result without waiting for the webhook. Only the caller's own pending
    /// order is captured; a capture the provider refuses (not approved yet) or that fails
    /// leaves the order as it was, for the webhook or the reconciler.
    ///
    /// # Errors
    /// [`QueryPaymentError::NotFound`] for an unknown id or another user's order.
    #[tracing::instrument(skip_all, fields(user_id = %user.id, order_id = %order_id))]
    pub async fn confirm_payment(
        &self,
        user: &User,
        order_id: &OrderId,
    ) -> Result<OrderRecord, QueryPaymentError> {
        let record = self.own_order(user, order_id).await?;
        if *record.order.status() != OrderStatus::Pending {
            return Ok(record);
        }
        let event = match self.capture_order(&record).await {
            Ok(Captured::Event(event)) => event,
            // Not approved yet, held, or the provider failed: the webhook or the reconciler
            // settles the order.
            Ok(Captured::Nothing(_)) | Err(_) => return Ok(record),
        };
        let outcome = match &event {
            PaymentEvent::PaymentSucceeded { .. } => "paid",
            _ => "failed",
        };
        // The reconciler's event id for the same fact: whichever applies it first wins.
        let event_id = format!("tally:reconcile:{}:{outcome}", record.order.id());
        match self
            .apply_reconciled(record.order.provider(), event_id, &event)
            .await
        {
            Ok(()) => self.own_order(user, order_id).await,
            Err(HandleWebhookError::Infra(e)) => Err(e.into()),
            Err(_) => Ok(record),
        }
    }

    pub(crate) async fn own_order(
        &self,
        user: &User,
        order_id: &OrderId,
    ) -> Result<OrderRecord, QueryPaymentError> {
        let record = self
            .store
            .find_order(order_id)
            .await
            .map_err(InfraError::from)?;
        record
            .filter(|r| *r.order.user_id() == user.id)
            .ok_or(QueryPaymentError::NotFound)
    }

    /// An account's orders, newest first (the caller checked who may read them).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn list_orders(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<OrderRecord>, InfraError> {
        Ok(self.store.list_orders(account, page).await?)
    }
}
