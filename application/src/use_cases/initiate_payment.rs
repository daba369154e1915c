//! Initiate a payment: validate plan and provider, create the pending order with a snapshot of
//! the plan, ask the gateway for a checkout.

use domain::{
    CapabilityError, IdempotencyKey, Order, OrderId, OrderStatus, PlanId, PlanSnapshot, ProviderId,
};

use super::InfraError;
use super::plans::find_plan;
use crate::accounts::User;
use crate::ports::{
    CheckoutRecord, CheckoutRequest, Clock, CreateOrderOutcome, IdGenerator, IdempotencyRecord,
    OrderRecord, Replay, SecretHasher, Store,
};
use crate::service::Service;

/// `POST /api/payment/initiate`.
#[derive(Debug, Clone)]
pub struct InitiatePayment {
    /// The buyer.
    pub user: User,
    /// `planId`.
    pub plan_id: String,
    /// `provider`.
    pub provider: String,
    /// `Idempotency-Key`.
    pub idempotency_key: Option<IdempotencyKey>,
}

/// The started payment.
#[derive(Debug, Clone)]
pub struct PaymentStarted {
    /// The order, with its checkout.
    pub order: OrderRecord,
    /// Whether the order was created now or by an earlier request with the same key.
    pub replay: Replay,
}

/// Why a payment could not start.
#[derive(Debug, thiserror::Error)]
pub enum InitiatePaymentError {
    /// No such plan.
    #[error("plan {0:?} not found")]
    PlanNotFound(String),
    /// Not a provider id.
    #[error("unknown provider {0:?}")]
    UnknownProvider(String),
    /// The plan belongs to another provider.
    #[error("plan {plan} is sold through {expected}, not {given}")]
    ProviderMismatch {
        /// The plan.
        plan: PlanId,
        /// Its provider.
        expected: ProviderId,
        /// The provider asked for.
        given: ProviderId,
    },
    /// The provider cannot sell this plan's type or currency.
    #[error("{0}")]
    ProviderNotSupported(String),
    /// The plan's provider has no gateway here (off in production: not configured).
    #[error("{0} is not available here")]
    ProviderUnavailable(ProviderId),
    /// The idempotency key was used with another request.
    #[error("idempotency key reused with a different request")]
    IdempotencyConflict,
    /// The gateway failed; the order is `failed`.
    #[error("payment provider failed: {reason}")]
    Gateway {
        /// The failed order.
        order_id: OrderId,
        /// Why, safe to show.
        reason: String,
    },
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for InitiatePaymentError {
    fn from(e: crate::ports::StoreError) -> Self {
        InitiatePaymentError::Infra(e.into())
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Start a payment.
    ///
    /// # Errors
    /// See [`InitiatePaymentError`]; a gateway failure leaves the order `failed`.
    pub async fn initiate_payment(
        &self,
        request: InitiatePayment,
    ) -> Result<PaymentStarted, InitiatePaymentError> {
        let plan_id = PlanId::new(request.plan_id.clone())
            .map_err(|_| InitiatePaymentError::PlanNotFound(request.plan_id.clone()))?;
        let plan = find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            &plan_id,
        )
        .await?
        .ok_or_else(|| InitiatePaymentError::PlanNotFound(request.plan_id.clone()))?;
        let provider: ProviderId = request
            .provider
            .parse()
            .map_err(|_| InitiatePaymentError::UnknownProvider(request.provider.clone()))?;
        if provider != plan.provider() {
            return Err(InitiatePaymentError::ProviderMismatch {
                plan: plan_id,
                expected: plan.provider(),
                given: provider,
            });
        }
        let price = plan.price_in(self.config.environment);
        provider
            .supports(plan.plan_type(), price.currency())
            .map_err(|e: CapabilityError| {
                InitiatePaymentError::ProviderNotSupported(e.to_string())
            })?;
        let gateway = self
            .gateways
            .get(provider)
            .ok_or(InitiatePaymentError::ProviderUnavailable(provider))?
            .clone();
        let now = self.clock.now();
        let order_id =
            OrderId::new(self.ids.new_id("ord")).map_err(|e| InfraError::Unexpected(e.into()))?;
        let order = Order::place(
            order_id.clone(),
            request.user.id.clone(),
            provider,
            PlanSnapshot::of(&plan, price),
            now,
            self.config.order_lifetime_ms,
        );
        let idempotency = request.idempotency_key.map(|key| IdempotencyRecord {
            key,
            request_hash: format!("initiate:{plan_id}:{provider}"),
        });
        match self
            .store
            .create_order(&order, idempotency.as_ref())
            .await?
        {
            CreateOrderOutcome::Created => {}
            CreateOrderOutcome::KeyConflict => {
                return Err(InitiatePaymentError::IdempotencyConflict);
            }
            CreateOrderOutcome::Replayed(existing) => return replay(existing),
        }
        let checkout_request = CheckoutRequest {
            order_id: order_id.clone(),
            user_id: request.user.id.clone(),
            customer_email: Some(request.user.email.as_str().to_owned()),
            snapshot: order.plan.clone(),
            plan,
            success_url: format!(
                "{}/payment-success?orderId={order_id}",
                self.config.base_url
            ),
            cancel_url: format!("{}/payment-cancel?orderId={order_id}", self.config.base_url),
            notify_url: format!("{}/api/payment/webhook/{provider}", self.config.base_url),
            expires_at: order.expires_at,
        };
        match gateway.create_checkout(&checkout_request).await {
            Ok(checkout) => {
                let record = CheckoutRecord {
                    provider_reference: checkout.provider_reference,
                    target: checkout.target,
                };
                self.store
                    .attach_checkout(&order_id, &record, self.clock.now())
                    .await?;
            }
            Err(e) => {
                let reason = e.to_string();
                let failed = OrderStatus::Failed {
                    reason: reason.clone(),
                };
                self.store
                    .transition_order(&order_id, "pending", &failed, self.clock.now())
                    .await?;
                return Err(InitiatePaymentError::Gateway { order_id, reason });
            }
        }
        let order = self
            .store
            .find_order(&order_id)
            .await?
            .ok_or(crate::ports::StoreError::NotFound)?;
        Ok(PaymentStarted {
            order,
            replay: Replay::Fresh,
        })
    }
}

/// The first outcome of a replayed request: the order, or the same gateway failure.
fn replay(existing: OrderRecord) -> Result<PaymentStarted, InitiatePaymentError> {
    match &existing.order.status {
        OrderStatus::Failed { reason } => Err(InitiatePaymentError::Gateway {
            order_id: existing.order.id.clone(),
            reason: reason.clone(),
        }),
        _ => Ok(PaymentStarted {
            order: existing,
            replay: Replay::Replayed,
        }),
    }
}
