//! Initiate a payment: validate plan and provider, create the pending order with a snapshot of
//! the plan, ask the gateway for a checkout.

use domain::{
    AccessEnd, AccountId, CapabilityError, IdempotencyKey, Order, OrderId, OrderStatus, Plan,
    PlanId, PlanNotAvailable, PlanSnapshot, PlanType, ProviderId, ReturnField, ReturnUrlRefused,
    ReturnUrls, Standing, SubscriptionId, Transition, UserId,
};

use super::InfraError;
use super::plans::find_plan;
use super::return_from_checkout::ReturnPage;
use crate::accounts::{BuyerContact, User};
use crate::authorization::Actor;
use crate::host_events;
use crate::ports::{
    CheckoutRecord, CheckoutRequest, Clock, CreateOrderOutcome, IdGenerator, IdempotencyRecord,
    OrderRecord, Replay, SecretHasher, Store,
};
use crate::ports::{OrderChange, Writes};
use crate::service::Service;

/// A buyer asks to pay for a plan through a provider.
#[derive(Debug, Clone)]
pub struct InitiatePayment {
    /// The buyer.
    pub user: User,
    /// The account bought for: `None` (or the buyer's own id) for their personal account, or a
    /// team whose billing they manage (an owner or admin).
    pub account: Option<AccountId>,
    /// The plan (parsed by the caller, who answers a malformed id as an unknown one).
    pub plan_id: PlanId,
    /// The provider (parsed by the caller: an unknown id never reaches the use case).
    pub provider: ProviderId,
    /// The caller's idempotency key: the same key replays the first order.
    pub idempotency_key: Option<IdempotencyKey>,
    /// Where the host application wants the buyer back (parsed by the caller; whether their
    /// origins are allowed is decided here).
    pub returns: ReturnUrls,
    /// The buyer consents to keep the payment method for automatic top-ups (a credits pack,
    /// through a provider that saves methods).
    pub save_method: bool,
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
    /// The plan is hidden and not offered to this buyer.
    #[error(transparent)]
    NotAvailable(#[from] PlanNotAvailable),
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
    /// The user already holds a live subscription (trialing, active, past due or scheduled to
    /// cancel) and several are not allowed.
    #[error("already subscribed: subscription {subscription_id} to plan {plan_id} is live")]
    AlreadySubscribed {
        /// The live subscription.
        subscription_id: SubscriptionId,
        /// Its plan.
        plan_id: PlanId,
    },
    /// The user already owns this one-time plan and its access still runs.
    #[error("plan {plan_id} is already owned through order {order_id}")]
    AlreadyOwned {
        /// The plan.
        plan_id: PlanId,
        /// The paid order that grants it.
        order_id: OrderId,
        /// When that access ends.
        ends: AccessEnd,
    },
    /// The idempotency key was used with another request.
    #[error("idempotency key reused with a different request")]
    IdempotencyConflict,
    /// The buyer is not a member of the account named (or there is no such account).
    #[error("no such account for this user")]
    AccountNotFound,
    /// The buyer is a member of the team named, but not one who manages its billing.
    #[error("only a team's owners and admins buy for it")]
    NotBillingManager,
    /// The user's own credential named the buyer's e-mail address or name: only the host
    /// application's backend, acting for its user with an API key, may (a user's own address
    /// and name come from their account or host token).
    #[error("only an API key acting for a user may name the buyer's {0}")]
    BuyerDetailNotAllowed(BuyerDetail),
    /// A return URL outside the allowed origins (`[hostApp] returnOrigins`).
    #[error(transparent)]
    ReturnUrlNotAllowed(#[from] ReturnUrlRefused),
    /// The buyer asked to save the payment method where it cannot be: a plan that is not a
    /// credits pack, or a provider that keeps no methods for off-session charges.
    #[error("{0}")]
    SaveMethodNotSupported(String),
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

/// A detail of the buyer a request may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuyerDetail {
    /// The e-mail address.
    Email,
    /// The name.
    Name,
}

impl std::fmt::Display for BuyerDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BuyerDetail::Email => "e-mail address",
            BuyerDetail::Name => "name",
        })
    }
}

impl From<crate::ports::StoreError> for InitiatePaymentError {
    fn from(e: crate::ports::StoreError) -> Self {
        InitiatePaymentError::Infra(e.into())
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Start a payment; the provider is told the buyer's contact details as stored (a host
    /// user's from their token, else the account's own address, never a `.invalid` one).
    ///
    /// # Errors
    /// See [`InitiatePaymentError`]; a gateway failure leaves the order `failed`.
    #[tracing::instrument(skip_all, fields(user_id = %request.user.id, plan_id = %request.plan_id))]
    pub async fn initiate_payment(
        &self,
        request: InitiatePayment,
    ) -> Result<PaymentStarted, InitiatePaymentError> {
        self.initiate_payment_as(request, Actor::TheUser, BuyerContact::default())
            .await
    }

    /// Start a payment for `request.user`, by `actor`: an API key acting for its user may name
    /// the buyer's e-mail address and name (`stated`), which the provider is told instead of
    /// what is stored; the user's own credential may not.
    ///
    /// # Errors
    /// [`InitiatePaymentError::BuyerDetailNotAllowed`] for details stated by the user's own
    /// credential; otherwise as [`Service::initiate_payment`].
    #[tracing::instrument(
        skip_all,
        fields(
            user_id = %request.user.id,
            plan_id = %request.plan_id,
            provider = %request.provider,
            actor = ?actor,
        )
    )]
    pub async fn initiate_payment_as(
        &self,
        request: InitiatePayment,
        actor: Actor,
        stated: BuyerContact,
    ) -> Result<PaymentStarted, InitiatePaymentError> {
        check_stated_by(actor, &stated)?;
        self.check_returns(&request.returns)?;
        let account = self
            .billing_account(&request.user.id, request.account.as_ref())
            .await?;
        let (plan, provider) = self.sellable_plan(&request, &account).await?;
        let gateway = self
            .gateways
            .get(provider)
            .ok_or(InitiatePaymentError::ProviderUnavailable(provider))?
            .clone();
        let idempotency = request
            .idempotency_key
            .clone()
            .map(|key| IdempotencyRecord {
                key,
                request_hash: initiate_hash(&plan, provider, &request, &account),
            });
        // A retry replays its first answer, even if what it bought is now held.
        if let Some(earlier) = self
            .earlier_answer(&request.user, idempotency.as_ref())
            .await?
        {
            return Ok(earlier);
        }
        self.check_not_held(&account, &plan).await?;
        if request.save_method {
            check_saves(&plan, &*gateway)?;
        }
        let order = self.new_order(&request, account, &plan)?;
        let order_id = order.id().clone();
        match self
            .store
            .create_order(&order, idempotency.as_ref())
            .await?
        {
            CreateOrderOutcome::Created => self.metrics.order_moved(order.status()),
            CreateOrderOutcome::KeyConflict => {
                return Err(InitiatePaymentError::IdempotencyConflict);
            }
            CreateOrderOutcome::Replayed(existing) => return replay(existing),
        }
        let stored = self.store.find_buyer_contact(&request.user.id).await?;
        let checkout_request = self.checkout_request(&order, plan, stated.or(stored));
        let checkout = gateway.create_checkout(&checkout_request).await;
        self.attach_or_fail(&order, checkout).await?;
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

    /// The pending order `request` places for `account`, with a snapshot of `plan` at its price
    /// here.
    fn new_order(
        &self,
        request: &InitiatePayment,
        account: AccountId,
        plan: &Plan,
    ) -> Result<Order, InfraError> {
        let order_id =
            OrderId::new(self.ids.new_id("ord")).map_err(|e| InfraError::Unexpected(e.into()))?;
        Ok(Order::place(
            order_id,
            request.user.id.clone(),
            plan.provider(),
            PlanSnapshot::of(plan, plan.price_in(self.config.environment)),
            self.clock.now(),
            self.config.order_lifetime_ms,
        )
        .for_account(account)
        .returning_to(request.returns.clone())
        .saving_method(request.save_method))
    }

    /// Keep the provider's checkout on the new order, or fail the order with the reason the
    /// provider could not open one.
    async fn attach_or_fail(
        &self,
        order: &Order,
        checkout: Result<crate::ports::Checkout, crate::ports::GatewayError>,
    ) -> Result<(), InitiatePaymentError> {
        match checkout {
            Ok(checkout) => {
                let record = CheckoutRecord {
                    provider_reference: checkout.provider_reference,
                    target: checkout.target,
                };
                let now = self.clock.now();
                Ok(self.store.attach_checkout(order.id(), &record, now).await?)
            }
            Err(e) => {
                let reason = e.to_string();
                let mut failed = order.clone();
                let moved = failed.mark_failed(reason.clone());
                debug_assert_eq!(moved, Ok(Transition::Applied), "a new order is pending");
                // The order was created just before and nothing else knows it yet.
                let version = OrderRecord::FIRST_VERSION;
                let now = self.clock.now();
                let told = host_events::order_changed(order, &failed, failed.status().code(), now);
                self.store
                    .transition_order(
                        OrderChange::new(order, version, failed.clone()),
                        now,
                        told.as_slice(),
                    )
                    .await?;
                self.metrics.order_moved(failed.status());
                let order_id = order.id().clone();
                Err(InitiatePaymentError::Gateway { order_id, reason })
            }
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The account `user` buys for when they name `account`: their personal account (`None` or
    /// their own id), or a team in which their role manages billing.
    ///
    /// # Errors
    /// [`InitiatePaymentError::AccountNotFound`] unless they are a member;
    /// [`InitiatePaymentError::NotBillingManager`] for a member who only spends.
    async fn billing_account(
        &self,
        user: &UserId,
        account: Option<&AccountId>,
    ) -> Result<AccountId, InitiatePaymentError> {
        let account = account.map_or_else(|| AccountId::personal(user), Clone::clone);
        match self.role_in(user, &account).await? {
            None => Err(InitiatePaymentError::AccountNotFound),
            Some(role) if !role.manages_billing() => Err(InitiatePaymentError::NotBillingManager),
            Some(_) => Ok(account),
        }
    }

    /// The first answer to an earlier request with the same key, if there was one.
    async fn earlier_answer(
        &self,
        user: &User,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<Option<PaymentStarted>, InitiatePaymentError> {
        let Some(record) = idempotency else {
            return Ok(None);
        };
        match self.store.earlier_order(&user.id, record).await? {
            Some(CreateOrderOutcome::Replayed(existing)) => replay(existing).map(Some),
            Some(CreateOrderOutcome::KeyConflict) => Err(InitiatePaymentError::IdempotencyConflict),
            Some(CreateOrderOutcome::Created) | None => Ok(None),
        }
    }

    /// What the gateway is asked to open a checkout for, telling it `buyer`'s contact details
    /// (whose address is never a `.invalid` placeholder).
    pub(crate) fn checkout_request(
        &self,
        order: &Order,
        plan: Plan,
        buyer: BuyerContact,
    ) -> CheckoutRequest {
        let callbacks = &self.config.callbacks;
        let order_id = order.id();
        CheckoutRequest {
            order_id: order_id.clone(),
            user_id: order.user_id().clone(),
            customer_email: buyer
                .email()
                .filter(|email| email.is_deliverable())
                .map(|email| email.as_str().to_owned()),
            customer_name: buyer.name.map(|name| name.as_str().to_owned()),
            snapshot: order.plan().clone(),
            plan,
            success_url: self.return_page_url(order, ReturnPage::Success),
            cancel_url: self.return_page_url(order, ReturnPage::Cancel),
            notify_url: callbacks.webhook(order.provider()),
            expires_at: order.expires_at(),
            save_method: order.save_method(),
        }
    }

    /// Refuse a return URL whose origin is not allowed (`domain::ReturnOrigins`), naming its
    /// field, before anything is written.
    fn check_returns(&self, returns: &ReturnUrls) -> Result<(), ReturnUrlRefused> {
        let origins = &self.host_app.return_origins;
        let fields = [
            (ReturnField::SuccessUrl, &returns.success),
            (ReturnField::CancelUrl, &returns.cancel),
        ];
        for (field, url) in fields {
            if let Some(url) = url {
                origins.check(field, url.as_str())?;
            }
        }
        Ok(())
    }

    /// The plan asked for and its provider, when that provider can sell it.
    async fn sellable_plan(
        &self,
        request: &InitiatePayment,
        account: &AccountId,
    ) -> Result<(Plan, ProviderId), InitiatePaymentError> {
        let plan_id = request.plan_id.clone();
        let plan = find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            &plan_id,
        )
        .await?
        .ok_or_else(|| InitiatePaymentError::PlanNotFound(request.plan_id.to_string()))?;
        let provider = request.provider;
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
        self.check_offered::<InitiatePaymentError>(&request.user.id, account, &plan)
            .await?;
        Ok((plan, provider))
    }

    /// Refuse a hidden plan to a buyer who was not allowed it by an operator and whose
    /// `account` (the one bought for) does not hold it (`domain::Visibility::offered_to`).
    ///
    /// # Errors
    /// [`PlanNotAvailable`], or the store cannot be read.
    pub(crate) async fn check_offered<E>(
        &self,
        user: &UserId,
        account: &AccountId,
        plan: &Plan,
    ) -> Result<(), E>
    where
        E: From<PlanNotAvailable> + From<crate::ports::StoreError> + From<InfraError>,
    {
        let visibility = plan.visibility();
        if visibility.offered_to(Standing::Newcomer) {
            return Ok(());
        }
        let standing = if self.store.plan_allowed(user, plan.id()).await? {
            Standing::Allowed
        } else if self.holds(account, plan).await? {
            Standing::Holder
        } else {
            Standing::Newcomer
        };
        if visibility.offered_to(standing) {
            Ok(())
        } else {
            Err(PlanNotAvailable(plan.id().clone()).into())
        }
    }

    /// Whether `account` holds `plan` now: a live subscription to it, or running access it sold.
    async fn holds(&self, account: &AccountId, plan: &Plan) -> Result<bool, InfraError> {
        let subscribed = (self.store.list_subscriptions(account).await?)
            .iter()
            .any(|s| s.is_live() && s.plan_id() == plan.id());
        if subscribed || plan.plan_type() != PlanType::OneTime {
            return Ok(subscribed);
        }
        let owned = self.one_time_orders(account, self.clock.now()).await?;
        Ok(owned
            .iter()
            .any(|r| &r.order.plan().plan_id == plan.id() && r.order.one_time_access().is_some()))
    }

    /// Refuse to sell what the account already holds: a second live subscription (unless
    /// several are allowed) or a one-time plan whose access still runs. Credit packs are always
    /// sold.
    ///
    /// This is checked when the payment starts; two checkouts started before either is paid
    /// can both be paid (the provider takes the money), and both then show in the status.
    async fn check_not_held(
        &self,
        account: &AccountId,
        plan: &Plan,
    ) -> Result<(), InitiatePaymentError> {
        match plan.plan_type() {
            PlanType::Credits => Ok(()),
            PlanType::Recurring if self.config.allow_several_subscriptions => Ok(()),
            PlanType::Recurring => {
                let subscriptions = self.store.list_subscriptions(account).await?;
                match subscriptions
                    .into_iter()
                    .find(domain::Subscription::is_live)
                {
                    Some(live) => Err(InitiatePaymentError::AlreadySubscribed {
                        subscription_id: live.id().clone(),
                        plan_id: live.plan_id().clone(),
                    }),
                    None => Ok(()),
                }
            }
            PlanType::OneTime => {
                let owned = self.one_time_orders(account, self.clock.now()).await?;
                let same = owned
                    .into_iter()
                    .find(|r| &r.order.plan().plan_id == plan.id());
                match same.and_then(|r| Some((r.order.one_time_access()?, r.order.id().clone()))) {
                    Some((ends, order_id)) => Err(InitiatePaymentError::AlreadyOwned {
                        plan_id: plan.id().clone(),
                        order_id,
                        ends,
                    }),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Only an API key acting for its user may state the buyer's details.
fn check_stated_by(actor: Actor, stated: &BuyerContact) -> Result<(), InitiatePaymentError> {
    let named = match (stated.email(), &stated.name) {
        (Some(_), _) => Some(BuyerDetail::Email),
        (None, Some(_)) => Some(BuyerDetail::Name),
        (None, None) => None,
    };
    match (actor, named) {
        (Actor::TheUser, Some(detail)) => Err(InitiatePaymentError::BuyerDetailNotAllowed(detail)),
        _ => Ok(()),
    }
}

/// The first outcome of a replayed request: the order, or the same gateway failure.
fn replay(existing: OrderRecord) -> Result<PaymentStarted, InitiatePaymentError> {
    match existing.order.status() {
        OrderStatus::Failed { reason } => Err(InitiatePaymentError::Gateway {
            order_id: existing.order.id().clone(),
            reason: reason.clone(),
        }),
        _ => Ok(PaymentStarted {
            order: existing,
            replay: Replay::Replayed,
        }),
    }
}

/// What an idempotency key of a payment start protects: the plan and provider, and the account
/// bought for when it is not the buyer's own (a key reused for another account is a conflict).
fn initiate_hash(
    plan: &Plan,
    provider: ProviderId,
    request: &InitiatePayment,
    account: &AccountId,
) -> String {
    let user = &request.user.id;
    // The hash of a request without consent is the one earlier keys were stored with.
    let saving = if request.save_method { ":save" } else { "" };
    if account.is_personal_of(user) {
        format!("initiate:{}:{provider}{saving}", plan.id())
    } else {
        format!("initiate:{}:{provider}:{account}{saving}", plan.id())
    }
}

/// Refuse consent to save the payment method where nothing could be saved: only a credits pack
/// tops an account up, and only a provider that charges saved methods off-session keeps one.
fn check_saves(
    plan: &Plan,
    gateway: &dyn crate::ports::PaymentGateway,
) -> Result<(), InitiatePaymentError> {
    if plan.plan_type() != PlanType::Credits {
        return Err(InitiatePaymentError::SaveMethodNotSupported(format!(
            "only a credits pack saves its payment method for automatic top-up; {} is not one",
            plan.id()
        )));
    }
    if !gateway.saves_methods() {
        return Err(InitiatePaymentError::SaveMethodNotSupported(format!(
            "{} does not keep payment methods for automatic top-up",
            gateway.provider()
        )));
    }
    Ok(())
}
