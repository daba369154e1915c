//! [`PaymentsService`]: orders, provider webhooks and a buyer's subscriptions.

use domain::{
    AccountId, CancelWhen, OrderId, Plan, PlanId, ProviderId, Subscription, SubscriptionAccess,
    SubscriptionId, UserId,
};

use crate::accounts::{BuyerContact, User};
use crate::authorization::Actor;
use crate::pagination::{Page, PageRequest};
use crate::ports::{OrderRecord, WebhookRequest};
#[cfg(doc)]
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::auto_top_up::{AutoTopUpError, AutoTopUpOverview, SetAutoTopUp};
use crate::use_cases::cancel_payment::{CancelOutcome, CancelPaymentError};
use crate::use_cases::cancel_subscription::{CancelSubscriptionError, SubscriptionCancelled};
use crate::use_cases::change_plan::{ChangePlanError, PlanChangeOutcome, PlanSwitchScheduled};
use crate::use_cases::handle_webhook::{HandleWebhookError, WebhookHandled};
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError, PaymentStarted};
use crate::use_cases::query_payment::QueryPaymentError;
use crate::use_cases::return_from_checkout::{CheckoutReturn, ReturnError, Returned};

inbound_port! {
    /// Orders, provider webhooks and a buyer's subscriptions.
    #[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
    #[async_trait::async_trait]
    pub trait PaymentsService {
        /// Start a payment (see [`Service::initiate_payment`]).
        async fn initiate_payment(
            &self,
            request: InitiatePayment,
        ) -> Result<PaymentStarted, InitiatePaymentError>;

        /// Start a payment by `actor`, with the buyer's contact details it states (see
        /// [`Service::initiate_payment_as`]).
        async fn initiate_payment_as(
            &self,
            request: InitiatePayment,
            actor: Actor,
            stated: BuyerContact,
        ) -> Result<PaymentStarted, InitiatePaymentError>;

        /// One of `user`'s orders (see [`Service::query_payment`]).
        async fn query_payment(
            &self,
            user: &User,
            order_id: &OrderId,
        ) -> Result<OrderRecord, QueryPaymentError>;

        /// One of `user`'s orders, asking the provider when it is still pending (see
        /// [`Service::confirm_payment`]).
        async fn confirm_payment(
            &self,
            user: &User,
            order_id: &OrderId,
        ) -> Result<OrderRecord, QueryPaymentError>;

        /// A buyer back from the checkout with a return token (see
        /// [`Service::return_from_checkout`]).
        async fn return_from_checkout(&self, request: CheckoutReturn)
            -> Result<Returned, ReturnError>;

        /// Cancel one of `user`'s pending orders (see [`Service::cancel_payment`]).
        async fn cancel_payment(
            &self,
            user: &User,
            order_id: &OrderId,
        ) -> Result<CancelOutcome, CancelPaymentError>;

        /// An account's orders, newest first (see [`Service::list_orders`]).
        async fn list_orders(
            &self,
            account: &AccountId,
            page: PageRequest,
        ) -> Result<Page<OrderRecord>, InfraError>;

        /// Verify and apply a provider's webhook (see [`Service::handle_webhook`]).
        async fn handle_webhook(
            &self,
            known: Option<ProviderId>,
            request: WebhookRequest,
        ) -> Result<WebhookHandled, HandleWebhookError>;

        /// Move one of `user`'s subscriptions to another plan (see [`Service::change_plan`]).
        async fn change_plan(
            &self,
            user: &User,
            subscription_id: &SubscriptionId,
            plan_id: &PlanId,
        ) -> Result<PlanChangeOutcome, ChangePlanError>;

        /// Cancel one of `user`'s subscriptions at its period's end or now (see
        /// [`Service::cancel_subscription_for`]).
        async fn cancel_subscription_for(
            &self,
            user: &User,
            subscription_id: &SubscriptionId,
            when: CancelWhen,
        ) -> Result<SubscriptionCancelled, CancelSubscriptionError>;

        /// An account's subscriptions, newest first (see [`Service::list_subscriptions`]).
        async fn list_subscriptions(
            &self,
            account: &AccountId,
            page: PageRequest,
        ) -> Result<Page<Subscription>, InfraError>;

        /// Withdraw a scheduled cancellation (see [`Service::resume_subscription`]).
        async fn resume_subscription(
            &self,
            user: &User,
            subscription_id: &SubscriptionId,
        ) -> Result<Subscription, ChangePlanError>;

        /// The plans `current` may switch to (see [`Service::switch_options`]).
        async fn switch_options(&self, current: &Subscription) -> Result<Vec<Plan>, InfraError>;

        /// Switch one of `user`'s subscriptions to another plan when its period ends (see
        /// [`Service::schedule_plan_switch`]).
        async fn schedule_plan_switch(
            &self,
            user: &User,
            subscription_id: &SubscriptionId,
            plan_id: &PlanId,
        ) -> Result<PlanSwitchScheduled, ChangePlanError>;

        /// Withdraw a switch at the period's end (see [`Service::cancel_scheduled_switch`]).
        async fn cancel_scheduled_switch(
            &self,
            user: &User,
            subscription_id: &SubscriptionId,
        ) -> Result<Subscription, ChangePlanError>;

        /// The plans `current` may switch to at its period's end (see
        /// [`Service::period_end_switch_options`]).
        async fn period_end_switch_options(
            &self,
            current: &Subscription,
        ) -> Result<Vec<Plan>, InfraError>;

        /// Until when `subscription` gives access (see [`Service::subscription_access`]).
        fn subscription_access(&self, subscription: &Subscription) -> SubscriptionAccess;

        /// The plan order `order_id` bought, when the order exists (see
        /// [`Service::ordered_plan`]).
        async fn ordered_plan(&self, order_id: &OrderId) -> Result<Option<PlanId>, InfraError>;

        /// The subscription order `order_id` started, if any (see
        /// [`Service::subscription_started_by`]).
        async fn subscription_started_by(
            &self,
            order_id: &OrderId,
        ) -> Result<Option<SubscriptionId>, InfraError>;

        /// The automatic top-up of an account the user manages (see [`Service::auto_top_up`]).
        async fn auto_top_up(
            &self,
            user: &UserId,
            account: &AccountId,
        ) -> Result<AutoTopUpOverview, AutoTopUpError>;

        /// Set an account's automatic top-up rule (see [`Service::set_auto_top_up`]).
        async fn set_auto_top_up(
            &self,
            set: SetAutoTopUp,
        ) -> Result<AutoTopUpOverview, AutoTopUpError>;

        /// Remove a saved payment method (see [`Service::remove_payment_method`]).
        async fn remove_payment_method(
            &self,
            user: &UserId,
            account: &AccountId,
            method_id: &str,
        ) -> Result<AutoTopUpOverview, AutoTopUpError>;

        /// Any account's automatic top-up, for an administrator (see
        /// [`Service::top_up_overview`]).
        async fn top_up_overview(
            &self,
            account: &AccountId,
        ) -> Result<AutoTopUpOverview, InfraError>;
    }
}
