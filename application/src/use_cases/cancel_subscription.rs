//! A subscriber cancels their subscription, or the host application's backend does for them:
//! at the end of the paid period by default (through the provider, recorded here as the
//! subscriber's cancel of the subscription's order always was), or now where the provider can
//! end a subscription at once (`domain::decide_cancel`). Also the subscriber's subscriptions,
//! a page at a time.

use domain::{
    AccountId, CancelRefusal, CancelStep, CancelWhen, OrderId, Subscription, SubscriptionAccess,
    SubscriptionId, decide_cancel,
};

use super::InfraError;
use super::cancel_payment::{CancelOutcome, CancelPaymentError};
use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{Clock, GatewayError, IdGenerator, SecretHasher, Store, StoreError};
use crate::service::Service;

/// What a cancel did.
#[derive(Debug, Clone)]
pub enum SubscriptionCancelled {
    /// The subscription ends when its current period does (now, or as it already did).
    AtPeriodEnd(Subscription),
    /// The provider accepted ending it now. The subscription as stored after asking: ended
    /// when the provider's ended event has already arrived, else still live until it does
    /// (the event is checked and applied like any other).
    Now(Subscription),
}

/// Why a cancel was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum CancelSubscriptionError {
    /// No such subscription.
    #[error("subscription not found")]
    NotFound,
    /// The subscription is someone else's.
    #[error("subscription belongs to another user")]
    NotOwner,
    /// Over already, or the provider cannot end it now.
    #[error(transparent)]
    Refused(#[from] CancelRefusal),
    /// The provider could not be told; nothing changed, the caller may retry.
    #[error("payment provider failed: {0}")]
    Gateway(String),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for CancelSubscriptionError {
    fn from(e: StoreError) -> Self {
        CancelSubscriptionError::Infra(e.into())
    }
}

impl From<CancelPaymentError> for CancelSubscriptionError {
    fn from(e: CancelPaymentError) -> Self {
        match e {
            CancelPaymentError::NotFound => CancelSubscriptionError::NotFound,
            CancelPaymentError::NotOwner => CancelSubscriptionError::NotOwner,
            CancelPaymentError::NotCancellable(status) => CancelRefusal::NotLive(status).into(),
            CancelPaymentError::Gateway(reason) => CancelSubscriptionError::Gateway(reason),
            CancelPaymentError::Infra(infra) => CancelSubscriptionError::Infra(infra),
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Cancel `user`'s subscription `subscription_id`, `when` asked.
    ///
    /// # Errors
    /// See [`CancelSubscriptionError`].
    #[tracing::instrument(
        skip_all,
        fields(user_id = %user.id, subscription_id = %subscription_id, when = ?when)
    )]
    pub async fn cancel_subscription_for(
        &self,
        user: &User,
        subscription_id: &SubscriptionId,
        when: CancelWhen,
    ) -> Result<SubscriptionCancelled, CancelSubscriptionError> {
        let current = self
            .store
            .find_subscription(subscription_id)
            .await?
            .ok_or(CancelSubscriptionError::NotFound)?;
        if !self
            .manages_billing_of(&user.id, current.account_id())
            .await?
        {
            return Err(CancelSubscriptionError::NotOwner);
        }
        match decide_cancel(&current, when)? {
            CancelStep::AlreadyEndsAtPeriodEnd => Ok(SubscriptionCancelled::AtPeriodEnd(current)),
            CancelStep::AskAtPeriodEnd => {
                let record = self
                    .store
                    .subscription_order(subscription_id)
                    .await?
                    .ok_or(CancelSubscriptionError::NotFound)?;
                match self.cancel_subscription(record).await? {
                    CancelOutcome::SubscriptionEndsAtPeriodEnd(_, after) => {
                        Ok(SubscriptionCancelled::AtPeriodEnd(after))
                    }
                    CancelOutcome::OrderCancelled(..) => Err(CancelSubscriptionError::NotFound),
                }
            }
            CancelStep::AskNow => self.cancel_now(current).await,
        }
    }

    /// Ask `current`'s provider to end it now; nothing is written here (the provider's ended
    /// event ends it, checked like any other).
    async fn cancel_now(
        &self,
        current: Subscription,
    ) -> Result<SubscriptionCancelled, CancelSubscriptionError> {
        let provider = current.provider();
        let gateway = self
            .gateways
            .get(provider)
            .ok_or_else(|| CancelSubscriptionError::Gateway("provider is not configured".into()))?;
        match gateway
            .cancel_subscription_now(current.provider_subscription_id())
            .await
        {
            Ok(()) => {}
            Err(GatewayError::NotSupported) => {
                return Err(CancelRefusal::NowNotSupported(provider).into());
            }
            Err(e) => return Err(CancelSubscriptionError::Gateway(e.to_string())),
        }
        tracing::info!("the provider accepted ending the subscription now");
        let fresh = self.store.find_subscription(current.id()).await?;
        Ok(SubscriptionCancelled::Now(fresh.unwrap_or(current)))
    }

    /// One page of an account's subscriptions, newest first (the caller checked who may read
    /// them).
    ///
    /// # Errors
    /// The store cannot be read.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn list_subscriptions(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<Subscription>, InfraError> {
        Ok(self.store.page_subscriptions(account, page).await?)
    }

    /// Until when `subscription` gives access, by the configured past-due grace.
    pub fn subscription_access(&self, subscription: &Subscription) -> SubscriptionAccess {
        subscription.access(self.config.past_due_grace_ms)
    }

    /// The subscription order `order_id` started, if any.
    ///
    /// # Errors
    /// The store cannot be read.
    #[tracing::instrument(skip_all, fields(order_id = %order_id))]
    pub async fn subscription_started_by(
        &self,
        order_id: &OrderId,
    ) -> Result<Option<SubscriptionId>, InfraError> {
        let started = self.store.find_subscription_by_order(order_id).await?;
        Ok(started.map(|s| s.id().clone()))
    }
}
