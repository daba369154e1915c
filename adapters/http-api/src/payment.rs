//! Payments (spec 4.1): initiate, query and cancel a payment, and the caller's orders.

use std::sync::Arc;

use application::accounts::{BuyerContact, CustomerName, Email, Scope};
use application::authorization::{Acting, Owned, OwnerError};
use application::ports::Replay;
use application::use_cases::cancel_payment::{CancelOutcome, CancelPaymentError, ProviderClose};
use application::use_cases::initiate_payment::{
    BuyerDetail, InitiatePayment, InitiatePaymentError,
};
use application::use_cases::query_payment::QueryPaymentError;
use domain::{OrderId, PlanId, ProviderId, ReturnField, ReturnUrl, ReturnUrlRefused, ReturnUrls};
use poem::Request;
use poem_openapi::param::{Header, Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::{Credential, denied};
use crate::dto::{
    OrderView, PageInfo, SubscriptionView, page_request, parse_id, parse_idempotency_key,
};
use crate::problem::{Code, Problem, api_response};
use crate::rate_limit::Action;

/// `POST /api/payment/initiate`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct InitiatePaymentBody {
    /// The plan to buy.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub plan_id: String,
    /// The provider id to pay through (must be the plan's provider).
    #[oai(validator(min_length = 1, max_length = 32))]
    pub provider: String,
    /// The buyer's e-mail address, told to the provider (receipts, a Merchant of Record's
    /// invoices, a pre-filled checkout) instead of the one Tally knows. Only for an API key
    /// acting for the user (`billing:write` and `?userId=`): the user's own credential sending
    /// it is a 422. At most 254 bytes, never in the reserved `.invalid` domain.
    #[oai(skip_serializing_if_is_none)]
    pub customer_email: Option<String>,
    /// The buyer's name, told to the providers that take one (Dodo Payments), instead of the
    /// one Tally knows. Only for an API key acting for the user, like `customerEmail`. 1 to
    /// 200 characters, without control or formatting characters.
    #[oai(skip_serializing_if_is_none)]
    pub customer_name: Option<String>,
    /// Where the buyer goes after the checkout: an absolute http(s) URL under an allowed
    /// origin (`[hostApp] returnOrigins`; any loopback origin in development). Tally's own
    /// result page does its work first, then sends the buyer here with `orderId` and `outcome`
    /// (the order's status: `paid`, `pending`, `failed`, `cancelled`, `expired`) added.
    #[oai(validator(max_length = 2048))]
    pub success_url: Option<String>,
    /// Where the buyer goes after leaving the checkout (same rules; the pending order is
    /// cancelled first). Without it a cancel goes to `successUrl`.
    #[oai(validator(max_length = 2048))]
    pub cancel_url: Option<String>,
    /// The account bought for: a team (`team_…`) whose owner or admin the buyer is; what is
    /// bought (its credits, access or subscription) belongs to the team. Without it, or with the
    /// buyer's own id, the buyer's personal account. A team the buyer is not a member of is a
    /// 404 `account_not_found`; a plain member is a 403 `not_billing_manager`.
    #[oai(validator(max_length = 64))]
    pub account_id: Option<String>,
    /// The buyer consents to keep this payment method for automatic top-up (`PUT
    /// /api/auto-top-up`): a credits pack through a provider that charges saved methods
    /// off-session (otherwise a 422 `save_method_not_supported`). The consent and its time are
    /// kept with the order.
    pub save_for_auto_top_up: Option<bool>,
}

/// What cancelling did: the order, and for a subscription order the subscription that now
/// ends at its period's end.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CancelView {
    /// The order.
    pub order: OrderView,
    /// The subscription, with `cancelAtPeriodEnd` true (subscription orders only).
    #[oai(skip_serializing_if_is_none)]
    pub subscription: Option<SubscriptionView>,
}

/// A page of orders, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct OrderPage {
    /// The orders on this page.
    pub items: Vec<OrderView>,
    /// Where this page sits.
    #[oai(flatten)]
    pub page: PageInfo,
}

api_response! {
    /// `POST /api/payment/initiate`.
    pub enum InitiateResponse {
        /// The order is pending and the checkout is ready (also for a replay of the same
        /// `Idempotency-Key`, then with `Idempotency-Replayed: true`).
        201 Created(
            Json<OrderView>,
            /// `true` when this is the first response again.
            #[oai(header = "Idempotency-Replayed")] Option<bool>
        ),
    }
    problems {
        /// `validation_failed`: the body or the `Idempotency-Key` is malformed, or an API key
        /// named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`, or a user naming another user;
        /// `not_billing_manager`: a member of the team `accountId` names who is neither an
        /// owner nor an admin.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `plan_not_found`; `user_not_found`: the `userId` an API key named does not exist;
        /// `account_not_found`: the buyer is not a member of the team `accountId` names.
        404 NotFound,
        /// `idempotency_conflict`: the key was used with another plan or provider;
        /// `already_subscribed`: the user holds a live subscription (the detail names it) and
        /// this deployment allows one; `already_owned`: the user owns this one-time plan and
        /// its access still runs.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `unknown_provider`, `provider_mismatch`, `provider_not_supported`,
        /// `provider_unavailable` (the plan's provider is not configured here),
        /// `plan_not_available` (a hidden plan, not offered to this buyer) or
        /// `validation_failed` naming `customerEmail` or `customerName` (malformed, or sent
        /// with the user's own credential rather than an API key acting for them).
        /// `return_url_not_allowed` (`successUrl` or `cancelUrl`, named in the detail, is not an
        /// absolute http(s) URL under an allowed origin).
        422 Unprocessable,
        /// `provider_error`: the provider failed; the order is `failed`.
        502 BadGateway,
    }
    rate_limited:
        /// `rate_limited`: too many payments started by this client.
        TooManyRequests
}

api_response! {
    /// `GET /api/payment/query/{orderId}`.
    pub enum QueryResponse {
        /// The order.
        200 Ok(Json<OrderView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:read`, or a user naming another user.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `order_not_found`: no such order of the user (another user's order included);
        /// `user_not_found`: the `userId` an API key named does not exist.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/payment/cancel/{orderId}`.
    pub enum CancelResponse {
        /// The pending order is cancelled, or the subscription ends at its period's end.
        200 Ok(Json<CancelView>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`, or a user naming another user;
        /// `not_owner`: the paid order's subscription belongs to a team whose billing the
        /// buyer no longer manages.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `order_not_found`: no such order of the user; `user_not_found`: the `userId` an API
        /// key named does not exist.
        404 NotFound,
        /// `not_cancellable`: the order is paid (one-time or credits), failed or expired.
        409 Conflict,
        /// `provider_error`: the provider could not be told; nothing changed, retry.
        502 BadGateway,
    }
}

api_response! {
    /// `GET /api/orders`.
    pub enum OrdersResponse {
        /// A page of the caller's orders, newest first.
        200 Ok(Json<OrderPage>),
    }
    problems {
        /// `invalid_pagination`: page or limit out of range; `validation_failed`: an API key
        /// named no `userId`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:read`, or a user naming another user.
        /// Also `forbidden`: an account out of the caller's reach (not the one its API key is bound to; for a
        /// customer-portal session, not its user's own).
        403 Forbidden,
        /// `user_not_found`: the `userId` an API key named does not exist;
        /// `account_not_found`: the user is not a member of the `accountId` named.
        404 NotFound,
    }
}

/// The payment endpoints.
pub(crate) struct PaymentApi {
    state: Arc<AppState>,
}

impl PaymentApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the payment endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Start, follow and cancel payments.
    Payment,
}

#[OpenApi(tag = "Tag::Payment")]
impl PaymentApi {
    /// Start a payment for a plan: creates a pending order and the provider's checkout.
    ///
    /// Send an `Idempotency-Key` to make retries safe: the same key and body answer the first
    /// response again. The user's own credential buys for them; an API key with
    /// `billing:write` buys for the user `?userId=` names (the host application's backend
    /// acting for its signed-in user), and may name the buyer's e-mail address and name.
    #[oai(path = "/api/payment/initiate", method = "post")]
    async fn initiate(
        &self,
        credential: Credential,
        request: &Request,
        /// Makes a retry return the first outcome (at most 255 printable characters).
        #[oai(name = "Idempotency-Key")]
        idempotency_key: Header<Option<String>>,
        /// The user to buy for (API keys with `billing:write` only; users buy for themselves).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<InitiatePaymentBody>,
    ) -> InitiateResponse {
        let named = user_id.0.as_deref();
        match self
            .initiate_inner(&credential, request, named, idempotency_key.0, body.0)
            .await
        {
            Ok(response) => response,
            Err(problem) => problem.into(),
        }
    }

    /// The user's order: its status and, while pending, where to pay.
    #[oai(path = "/api/payment/query/:orderId", method = "get")]
    async fn query(
        &self,
        credential: Credential,
        /// The order id.
        #[oai(name = "orderId")]
        order_id: Path<String>,
        /// The user whose order it is (API keys with `billing:read` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> QueryResponse {
        let result = async {
            let acting = self
                .state
                .acting_for(&credential, Scope::BillingRead, user_id.0.as_deref())
                .await?;
            let order_id = parse_id(&order_id.0, OrderId::new, order_not_found)?;
            self.reachable(&acting, &order_id).await?;
            let user = acting.user;
            self.state
                .ports
                .payments
                .query_payment(&user, &order_id)
                .await
                .map_err(|e| match e {
                    QueryPaymentError::NotFound => order_not_found(),
                    QueryPaymentError::Infra(infra) => infra.into(),
                })
        };
        match result.await {
            Ok(record) => QueryResponse::Ok(Json(OrderView::from(&record))),
            Err(problem) => problem.into(),
        }
    }

    /// Cancel the user's payment: a pending order is cancelled; a subscription order's
    /// subscription is cancelled at the end of its period.
    #[oai(path = "/api/payment/cancel/:orderId", method = "post")]
    async fn cancel(
        &self,
        credential: Credential,
        /// The order id.
        #[oai(name = "orderId")]
        order_id: Path<String>,
        /// The user whose order it is (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> CancelResponse {
        let result = async {
            let acting = self
                .state
                .acting_for(&credential, Scope::BillingWrite, user_id.0.as_deref())
                .await?;
            let order_id = parse_id(&order_id.0, OrderId::new, order_not_found)?;
            self.reachable(&acting, &order_id).await?;
            let user = acting.user;
            self.state
                .ports
                .payments
                .cancel_payment(&user, &order_id)
                .await
                .map_err(cancel_problem)
        };
        match result.await {
            Ok(CancelOutcome::OrderCancelled(record, closed)) => {
                if let ProviderClose::Failed(reason) = closed {
                    tracing::warn!(order = %record.order.id(), %reason, "order cancelled, but the provider could not close its checkout");
                }
                CancelResponse::Ok(Json(CancelView {
                    order: OrderView::from(&record),
                    subscription: None,
                }))
            }
            Ok(CancelOutcome::SubscriptionEndsAtPeriodEnd(record, subscription)) => {
                CancelResponse::Ok(Json(CancelView {
                    order: OrderView::from(&record),
                    // Scheduled to cancel: access ends with the paid period, whatever the
                    // past-due grace.
                    subscription: Some(SubscriptionView::new(
                        &subscription,
                        subscription.access(0),
                    )),
                }))
            }
            Err(problem) => problem.into(),
        }
    }

    /// The user's orders, newest first.
    #[oai(path = "/api/orders", method = "get")]
    async fn orders(
        &self,
        credential: Credential,
        /// Page number, from 1 (default 1).
        page: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20).
        limit: Query<Option<String>>,
        /// The user whose orders to list (API keys with `billing:read` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to: its orders, whoever placed them (omitted: the
        /// user's personal account's).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> OrdersResponse {
        let result = async {
            let (_, account) = self
                .state
                .acting_in(
                    &credential,
                    Scope::BillingRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let request = page_request(page.0.as_deref(), limit.0.as_deref())?;
            Ok::<_, Problem>(
                self.state
                    .ports
                    .payments
                    .list_orders(&account, request)
                    .await?,
            )
        };
        match result.await {
            Ok(page) => OrdersResponse::Ok(Json(OrderPage {
                items: page.items.iter().map(OrderView::from).collect(),
                page: PageInfo::from(&page),
            })),
            Err(problem) => problem.into(),
        }
    }
}

impl PaymentApi {
    /// Whether order `id` is within the reach of `acting`: one of another account than a bound
    /// key's or a portal session's is answered as not found, as another user's order is.
    async fn reachable(&self, acting: &Acting, id: &OrderId) -> Result<(), Problem> {
        match self.state.within_reach(acting, Owned::Order(id)).await {
            Ok(()) => Ok(()),
            Err(OwnerError::Denied(_)) => Err(order_not_found()),
            Err(OwnerError::Infra(infra)) => Err(infra.into()),
        }
    }

    async fn initiate_inner(
        &self,
        credential: &Credential,
        request: &Request,
        named: Option<&str>,
        idempotency_key: Option<String>,
        body: InitiatePaymentBody,
    ) -> Result<InitiateResponse, Problem> {
        let acting = self
            .state
            .acting_for(credential, Scope::BillingWrite, named)
            .await?;
        self.state.limits.check(Action::Initiate, request)?;
        // The account bought for: the one named when within the caller's reach, else the
        // personal account (a bound key's own); the use case checks the buyer's role in it.
        let named_account = body.account_id.as_deref().map(crate::teams::team_id);
        let account = acting.account(named_account.transpose()?).map_err(denied)?;
        let idempotency_key = parse_idempotency_key(idempotency_key, request)?;
        let returns = parse_returns(&body)?;
        let provider = parse_provider(&body.provider)?;
        let stated = stated_buyer(&body)?;
        // A malformed plan id is answered like an unknown one: 404 `plan_not_found`.
        let plan_id = PlanId::new(body.plan_id.clone()).map_err(|_| {
            initiate_problem(InitiatePaymentError::PlanNotFound(body.plan_id.clone()))
        })?;
        let started = self
            .state
            .ports
            .payments
            .initiate_payment_as(
                InitiatePayment {
                    user: acting.user,
                    account: Some(account),
                    plan_id,
                    provider,
                    idempotency_key,
                    returns,
                    save_method: body.save_for_auto_top_up.unwrap_or(false),
                },
                acting.actor,
                stated,
            )
            .await
            .map_err(initiate_problem)?;
        let replayed = started.replay == Replay::Replayed;
        Ok(InitiateResponse::Created(
            Json(OrderView::from(&started.order)),
            replayed.then_some(true),
        ))
    }
}

/// The buyer's e-mail address and name the body states, parsed here: 422 `validation_failed`
/// naming the field for a malformed one (an address in the reserved `.invalid` domain too).
fn stated_buyer(body: &InitiatePaymentBody) -> Result<BuyerContact, Problem> {
    let email = body
        .customer_email
        .as_deref()
        .map(|raw| {
            Email::parse_new(raw).map_err(|_| {
                Problem::invalid_field(
                    "customerEmail",
                    "must be an e-mail address that can receive mail (not in .invalid)",
                )
            })
        })
        .transpose()?;
    let name = body
        .customer_name
        .as_deref()
        .map(|raw| {
            CustomerName::parse(raw)
                .map_err(|e| Problem::invalid_field("customerName", e.to_string()))
        })
        .transpose()?;
    Ok(BuyerContact::new(email, name))
}

/// The wire name of a buyer detail.
const fn buyer_field(detail: BuyerDetail) -> &'static str {
    match detail {
        BuyerDetail::Email => "customerEmail",
        BuyerDetail::Name => "customerName",
    }
}

/// The return URLs as URLs (422 `return_url_not_allowed` naming the field when one is not);
/// whether their origins are allowed is the use case's decision.
fn parse_returns(body: &InitiatePaymentBody) -> Result<ReturnUrls, Problem> {
    let parse = |field: ReturnField, raw: &Option<String>| {
        raw.as_deref()
            .map(|url| {
                ReturnUrl::parse(url).map_err(|e| {
                    initiate_problem(InitiatePaymentError::ReturnUrlNotAllowed(
                        ReturnUrlRefused {
                            field,
                            reason: e.to_string(),
                        },
                    ))
                })
            })
            .transpose()
    };
    Ok(ReturnUrls {
        success: parse(ReturnField::SuccessUrl, &body.success_url)?,
        cancel: parse(ReturnField::CancelUrl, &body.cancel_url)?,
    })
}

/// The provider a buyer names, parsed once, here: 422 `unknown_provider` for anything else.
fn parse_provider(raw: &str) -> Result<ProviderId, Problem> {
    raw.parse()
        .map_err(|_| Problem::new(Code::UnknownProvider, format!("unknown provider {raw:?}")))
}

fn order_not_found() -> Problem {
    Problem::new(Code::OrderNotFound, "no such order")
}

fn initiate_problem(e: InitiatePaymentError) -> Problem {
    match e {
        InitiatePaymentError::PlanNotFound(_) => Problem::new(Code::PlanNotFound, e.to_string()),
        InitiatePaymentError::NotAvailable(_) => {
            Problem::new(Code::PlanNotAvailable, e.to_string())
        }
        InitiatePaymentError::ProviderMismatch { .. } => {
            Problem::new(Code::ProviderMismatch, e.to_string())
        }
        InitiatePaymentError::ProviderNotSupported(_) => {
            Problem::new(Code::ProviderNotSupported, e.to_string())
        }
        InitiatePaymentError::ProviderUnavailable(_) => {
            Problem::new(Code::ProviderUnavailable, e.to_string())
        }
        InitiatePaymentError::AccountNotFound => Problem::new(Code::AccountNotFound, e.to_string()),
        InitiatePaymentError::NotBillingManager => {
            Problem::new(Code::NotBillingManager, e.to_string())
        }
        InitiatePaymentError::IdempotencyConflict => {
            Problem::new(Code::IdempotencyConflict, e.to_string())
        }
        InitiatePaymentError::BuyerDetailNotAllowed(detail) => Problem::invalid_field(
            buyer_field(detail),
            "is only for an API key acting for the user (billing:write and ?userId=); a user's \
             own address and name come from their account or host token",
        ),
        InitiatePaymentError::ReturnUrlNotAllowed(_) => {
            Problem::new(Code::ReturnUrlNotAllowed, e.to_string())
        }
        InitiatePaymentError::AlreadySubscribed { .. } => {
            Problem::new(Code::AlreadySubscribed, e.to_string())
        }
        InitiatePaymentError::AlreadyOwned { .. } => {
            Problem::new(Code::AlreadyOwned, e.to_string())
        }
        InitiatePaymentError::SaveMethodNotSupported(_) => {
            Problem::new(Code::SaveMethodNotSupported, e.to_string())
        }
        InitiatePaymentError::Gateway { order_id, reason } => Problem::provider_error(
            &format!(
                "the payment provider could not start the payment; order {order_id} is failed"
            ),
            &reason,
        ),
        InitiatePaymentError::Infra(infra) => infra.into(),
    }
}

fn cancel_problem(e: CancelPaymentError) -> Problem {
    match e {
        CancelPaymentError::NotFound => order_not_found(),
        CancelPaymentError::NotCancellable(_) => Problem::new(Code::NotCancellable, e.to_string()),
        CancelPaymentError::NotOwner => Problem::new(Code::NotOwner, e.to_string()),
        CancelPaymentError::Gateway(reason) => Problem::provider_error(
            "the payment provider could not be told; nothing changed, retry later",
            &reason,
        ),
        CancelPaymentError::Infra(infra) => infra.into(),
    }
}
