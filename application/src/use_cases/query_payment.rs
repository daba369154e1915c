//! Query a payment: the caller's own order; anyone else's is "not found".

use domain::OrderId;

use super::InfraError;
use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{Clock, IdGenerator, OrderRecord, SecretHasher, Store};
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
    /// The caller's order `order_id`.
    ///
    /// # Errors
    /// [`QueryPaymentError::NotFound`] for an unknown id or another user's order.
    pub async fn query_payment(
        &self,
        user: &User,
        order_id: &str,
    ) -> Result<OrderRecord, QueryPaymentError> {
        self.own_order(user, order_id).await
    }

    pub(crate) async fn own_order(
        &self,
        user: &User,
        order_id: &str,
    ) -> Result<OrderRecord, QueryPaymentError> {
        let id = OrderId::new(order_id).map_err(|_| QueryPaymentError::NotFound)?;
        let record = self.store.find_order(&id).await.map_err(InfraError::from)?;
        record
            .filter(|r| r.order.user_id == user.id)
            .ok_or(QueryPaymentError::NotFound)
    }

    /// The caller's orders, newest first.
    ///
    /// # Errors
    /// Infrastructure only.
    pub async fn list_orders(
        &self,
        user: &User,
        page: PageRequest,
    ) -> Result<Page<OrderRecord>, InfraError> {
        Ok(self.store.list_orders(&user.id, page).await?)
    }
}
