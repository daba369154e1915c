//! The buyer comes back from the provider's checkout to Tally's result pages, carrying a return
//! token: a signature by the server's secret over the order id, the page and an expiry
//! ([`return_token`]), never the order id alone. With a valid token the page needs no Tally
//! session: the return does its work (a payment waiting for the merchant's capture is captured;
//! a still-pending order the buyer left is cancelled here and at the provider) and then sends
//! the buyer to the host application's URL with `orderId` and `outcome` (the order's status).

use domain::{OrderId, OrderStatus, Timestamp};

use super::InfraError;
use super::cancel_payment::CancelOutcome;
use super::query_payment::QueryPaymentError;
use crate::accounts::User;
use crate::ports::{Clock, IdGenerator, MessageSigner, OrderRecord, SecretHasher, Store};
use crate::service::Service;

/// How long after its order's expiry a return token still works: a buyer who paid in the last
/// minute of the order's life may be slow to come back.
pub const RETURN_TOKEN_GRACE_MS: i64 = 30 * 60 * 1000;

/// The result page a return lands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnPage {
    /// `/payment-success`: the checkout ended (paid, or not).
    Success,
    /// `/payment-cancel`: the buyer left the checkout.
    Cancel,
}

impl ReturnPage {
    const fn code(self) -> &'static str {
        match self {
            ReturnPage::Success => "success",
            ReturnPage::Cancel => "cancel",
        }
    }
}

/// A buyer back from the checkout.
#[derive(Debug, Clone)]
pub struct CheckoutReturn {
    /// The order named by the page's query.
    pub order_id: OrderId,
    /// The return token from the query.
    pub token: String,
    /// Which page.
    pub page: ReturnPage,
}

/// What the return did.
#[derive(Debug, Clone)]
pub struct Returned {
    /// The order's buyer.
    pub user: User,
    /// The order, after the return's work.
    pub record: OrderRecord,
    /// The host application's URL with `orderId` and `outcome`, when the order has one for
    /// this page (a cancel without its own URL goes to the success URL: the outcome says).
    pub host_url: Option<String>,
}

/// Why a return was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReturnError {
    /// No token, a forged one, one for another order or page, or an expired one.
    #[error("the return link is not valid")]
    InvalidToken,
    /// The token is valid but its order is gone.
    #[error("no such order")]
    NotFound,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for ReturnError {
    fn from(e: crate::ports::StoreError) -> Self {
        ReturnError::Infra(e.into())
    }
}

/// Return tokens: `<expiry in ms>.<tag>`, the tag signing the page, the order and the expiry.
pub mod return_token {
    use super::{MessageSigner, OrderId, ReturnPage, Timestamp};

    fn message(order: &OrderId, page: ReturnPage, expires_at_ms: i64) -> String {
        format!("tally-return:v1:{}:{order}:{expires_at_ms}", page.code())
    }

    /// The token for returning to `page` of `order` until `expires_at`.
    #[must_use]
    pub fn issue(
        signer: &dyn MessageSigner,
        order: &OrderId,
        page: ReturnPage,
        expires_at: Timestamp,
    ) -> String {
        let expires_at_ms = expires_at.unix_millis();
        let tag = signer.sign(&message(order, page, expires_at_ms));
        format!("{expires_at_ms}.{tag}")
    }

    /// Whether `token` returns to `page` of `order` at `now`.
    #[must_use]
    pub fn verify(
        signer: &dyn MessageSigner,
        token: &str,
        order: &OrderId,
        page: ReturnPage,
        now: Timestamp,
    ) -> bool {
        let Some((expiry, tag)) = token.split_once('.') else {
            return false;
        };
        let Ok(expires_at_ms) = expiry.parse::<i64>() else {
            return false;
        };
        // The signature first: an expiry is only believed once it is known to be ours.
        signer.verify(&message(order, page, expires_at_ms), tag)
            && now.unix_millis() < expires_at_ms
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The return URL of `page` for `order`: Tally's result page with the order id and a return
    /// token, when a signer is configured; the bare page otherwise.
    pub(crate) fn return_page_url(&self, order: &domain::Order, page: ReturnPage) -> String {
        let callbacks = &self.config.callbacks;
        let base = match page {
            ReturnPage::Success => callbacks.success(order.id()),
            ReturnPage::Cancel => callbacks.cancel(order.id()),
        };
        match &self.host_app.signer {
            Some(signer) => {
                let expires_at = order.expires_at().plus_millis(RETURN_TOKEN_GRACE_MS);
                let token = return_token::issue(signer.as_ref(), order.id(), page, expires_at);
                format!("{base}&rt={token}")
            }
            None => base,
        }
    }

    /// A buyer back from the checkout with a return token: check it, do the page's work, and
    /// say where the host application wants the buyer.
    ///
    /// # Errors
    /// [`ReturnError::InvalidToken`] for anything but a valid, unexpired token of this order and
    /// page; [`ReturnError::NotFound`]; infrastructure.
    #[tracing::instrument(skip_all, fields(order_id = %request.order_id))]
    pub async fn return_from_checkout(
        &self,
        request: CheckoutReturn,
    ) -> Result<Returned, ReturnError> {
        let signer = self
            .host_app
            .signer
            .as_ref()
            .ok_or(ReturnError::InvalidToken)?;
        let now = self.clock.now();
        let order_id = &request.order_id;
        if !return_token::verify(signer.as_ref(), &request.token, order_id, request.page, now) {
            return Err(ReturnError::InvalidToken);
        }
        let order = self
            .store
            .find_order(order_id)
            .await?
            .ok_or(ReturnError::NotFound)?;
        let user = self
            .store
            .find_user(order.order.user_id())
            .await?
            .ok_or(ReturnError::NotFound)?;
        let record = match request.page {
            ReturnPage::Success => {
                self.confirm_payment(&user, order_id)
                    .await
                    .map_err(|e| match e {
                        QueryPaymentError::NotFound => ReturnError::NotFound,
                        QueryPaymentError::Infra(infra) => ReturnError::Infra(infra),
                    })?
            }
            ReturnPage::Cancel => self.leave_checkout(&user, order).await?,
        };
        let returns = record.order.returns();
        let target = match request.page {
            ReturnPage::Success => returns.success.as_ref(),
            ReturnPage::Cancel => returns.cancel.as_ref().or(returns.success.as_ref()),
        };
        let host_url =
            target.map(|url| url.with_outcome(record.order.id(), record.order.status().code()));
        Ok(Returned {
            user,
            record,
            host_url,
        })
    }

    /// The buyer left the checkout: a still-pending order is cancelled (closed at the provider
    /// where its protocol allows); any other order is answered as it is.
    async fn leave_checkout(
        &self,
        user: &User,
        record: OrderRecord,
    ) -> Result<OrderRecord, ReturnError> {
        if *record.order.status() != OrderStatus::Pending {
            return Ok(record);
        }
        let order_id = record.order.id().clone();
        match self.cancel_payment(user, &order_id).await {
            Ok(CancelOutcome::OrderCancelled(cancelled, _)) => Ok(cancelled),
            // Paid or failed meanwhile, or the provider refused: the order as it now is.
            _ => Ok(self
                .store
                .find_order(&order_id)
                .await?
                .ok_or(ReturnError::NotFound)?),
        }
    }
}
