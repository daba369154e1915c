//! `wallet_global` = PayPal: Orders v2 for one-time and credits plans, Subscriptions v1 for
//! recurring plans, webhooks verified by PayPal itself (`verify-webhook-signature`). The wire
//! format lives in [`transformers`]; `docs/providers/wallet_global.md` is the operator's guide.
//!
//! **Capture exactly once, and only Tally's own pending orders.** An approved PayPal order moves
//! no money until the merchant captures it. `verify_webhook` never captures: it reports
//! `CHECKOUT.ORDER.APPROVED` as `PaymentEvent::PaymentApproved` (our order id from `custom_id`,
//! PayPal's order id, the approved amount), and the service captures through
//! [`PaymentGateway::capture`] only when that is its own pending PayPal order with the same
//! PayPal id and price; an approval of an order Tally cancelled, expired or does not know is
//! recorded and left to lapse at PayPal. The buyer's return to the success page captures the
//! caller's own pending order the same way, and the reconciler
//! ([`WalletGlobalGateway::query_payment`], called only for Tally's pending orders by the PayPal
//! id stored at checkout) captures an order it finds approved. Every path goes through
//! [`WalletGlobalGateway::capture_order`], which sends `PayPal-Request-Id: capture-<our order
//! id>`: PayPal answers a repeated request id with the first request's result, and a capture
//! that lost a race (`ORDER_ALREADY_CAPTURED`) reads the order back and reports the winner's
//! capture. Every path reports the same capture, and `PaymentSucceeded` is applied once by the
//! webhook pipeline's idempotency.
//!
//! **Automatic top-up** ([`vault`]): a consented checkout asks PayPal's vault to keep the
//! buyer's PayPal account; `VAULT.PAYMENT-TOKEN.CREATED` reports it (after the capture of the
//! order that saved it), and a top-up charges it by `vault_id` with `PayPal-Request-Id:
//! topup-<key>`; its `PAYMENT.CAPTURE.COMPLETED` pays the top-up's order like any other.

mod client;
pub mod revise;
pub mod transformers;
pub mod vault;

use std::sync::Arc;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, Clock, CredentialCheck,
    CredentialMode, GatewayError, OffSessionCharge, OffSessionOutcome, PaymentEvent,
    PaymentGateway, PaymentRef, PaymentStatus, PlanChangeRequest, PlanChangeStarted,
    RecordedWebhook, RefundReport, RefundRequest, RefundStarted, RefundedCharge, SavedMethod,
    VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{Money, OrderId, PlanType, ProviderId, Timestamp};
use serde::Deserialize;

pub use transformers::CaptureOutcome;

use self::client::Api;
use self::transformers::{
    CreateOrder, CreateSubscription, Envelope, ErrorBody, Interpretation, Order, OrderStep,
    RefundCapture, SubscriptionStatus, Transmission, checked, failure, interpret, named_merchants,
    parse, path_segment,
};
use crate::shared::http::{default_connect_timeout_ms, default_timeout_ms};
use crate::shared::time::unix_seconds;
use crate::shared::wire::{clip, is_web_url};
use crate::shared::{
    ConfigError, GatewayContext, HttpSettings, Secret, TestModeSetting, names_host,
};

/// PayPal's live API.
pub const LIVE_BASE_URL: &str = "https://api-m.paypal.com";
/// PayPal's sandbox API (`sandbox = true`).
pub const SANDBOX_BASE_URL: &str = "https://api-m.sandbox.paypal.com";
/// How far a webhook's `PAYPAL-TRANSMISSION-TIME` may be from now, in seconds.
pub const WEBHOOK_TOLERANCE_S: i64 = 300;
/// The largest webhook body read, in bytes (the HTTP layer enforces the same limit).
const MAX_WEBHOOK_BYTES: usize = 256 * 1024;
/// The longest webhook event id kept.
const MAX_EVENT_ID_CHARS: usize = 128;
/// The provider id, as `ConfigError` spells it.
const PROVIDER: &str = "wallet_global";
/// PayPal subscription ids start with this; order ids never contain a dash.
const SUBSCRIPTION_ID_PREFIX: &str = "I-";

/// `[providers.wallet_global]` in `tally.toml`. `Debug` shows the client secret as
/// `[redacted]` (a [`Secret`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalletGlobalSettings {
    /// The API base URL; default: PayPal live, or PayPal's sandbox when `sandbox` is set.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Use PayPal's sandbox environment (TinyShip's `PAYPAL_SANDBOX`).
    #[serde(default)]
    pub sandbox: bool,
    /// Total time for one API call.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Time to establish a connection.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// The REST app's client id.
    pub client_id: String,
    /// The REST app's secret.
    pub client_secret: Secret,
    /// The id (`WH-…` or similar) of the webhook registered for Tally's webhook URL.
    pub webhook_id: String,
    /// Optional: the PayPal merchant id (the 13-character account id) of the account the REST
    /// app belongs to. When set, a verified event whose resource names another merchant as
    /// payee or seller is acknowledged as foreign and changes nothing.
    #[serde(default)]
    pub merchant_id: Option<String>,
}

impl WalletGlobalSettings {
    /// Settings with default timeouts (the sandbox and tests build them this way).
    #[must_use]
    pub fn new(
        base_url: Option<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
        webhook_id: impl Into<String>,
    ) -> Self {
        Self {
            base_url,
            sandbox: false,
            timeout_ms: default_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
            client_id: client_id.into(),
            client_secret: Secret::from(client_secret.into()),
            webhook_id: webhook_id.into(),
            merchant_id: None,
        }
    }

    /// The same settings, checking webhooks against merchant `merchant_id`.
    #[must_use]
    pub fn for_merchant(mut self, merchant_id: impl Into<String>) -> Self {
        self.merchant_id = Some(merchant_id.into());
        self
    }

    /// The API base URL in effect.
    #[must_use]
    pub fn effective_base_url(&self) -> &str {
        match (&self.base_url, self.sandbox) {
            (Some(url), _) => url,
            (None, true) => SANDBOX_BASE_URL,
            (None, false) => LIVE_BASE_URL,
        }
    }

    /// Where the API is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        HttpSettings {
            base_url: self.effective_base_url().trim_end_matches('/').to_owned(),
            timeout_ms: self.timeout_ms,
            connect_timeout_ms: self.connect_timeout_ms,
        }
    }

    /// The setting that makes these test-mode credentials: `sandbox = true`, or a base URL on
    /// PayPal's sandbox host.
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        if self.sandbox {
            return Some(TestModeSetting::new(
                "sandbox",
                "is true: PayPal's sandbox environment",
            ));
        }
        self.base_url
            .as_deref()
            .is_some_and(is_paypal_sandbox)
            .then_some(TestModeSetting::new(
                "baseUrl",
                "is PayPal's sandbox API (api-m.sandbox.paypal.com)",
            ))
    }

    fn check(&self) -> Result<(), ConfigError> {
        let fail = |field, problem| Err(ConfigError::new(PROVIDER, field, problem));
        let base = self.effective_base_url();
        if !is_web_url(base) {
            return fail("baseUrl", "must be an http(s) URL");
        }
        if self.timeout_ms == 0 || self.connect_timeout_ms == 0 {
            return fail("timeoutMs", "must be greater than zero");
        }
        if self.client_id.trim().is_empty() {
            return fail("clientId", "is required");
        }
        if secrecy::ExposeSecret::expose_secret(&self.client_secret)
            .trim()
            .is_empty()
        {
            return fail("clientSecret", "is required");
        }
        if self.webhook_id.trim().is_empty() {
            return fail("webhookId", "is required");
        }
        if let Some(merchant) = &self.merchant_id
            && path_segment(merchant.trim()).is_none()
        {
            return fail(
                "merchantId",
                "must be a PayPal merchant id (letters and digits)",
            );
        }
        Ok(())
    }
}

/// Whether `url` is on PayPal's sandbox host.
fn is_paypal_sandbox(url: &str) -> bool {
    names_host(url, "sandbox.paypal.com")
}

/// The PayPal gateway.
pub struct WalletGlobalGateway {
    api: Api,
    api_base_url: String,
    /// Whether the settings name PayPal's sandbox (the mode a credential check reports).
    test_mode: bool,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    webhook_id: String,
    merchant_id: Option<String>,
}

impl std::fmt::Debug for WalletGlobalGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalletGlobalGateway")
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

/// The `PayPal-Request-Id` of the capture of our order: the same for every path that captures
/// it, so PayPal captures once.
#[must_use]
pub fn capture_request_id(order_id: &OrderId) -> String {
    format!("capture-{order_id}")
}

impl WalletGlobalGateway {
    /// A gateway for `settings`; `context.http` must point at `settings.http()`.
    ///
    /// # Errors
    /// A setting that cannot work (empty credentials, a base URL that is not http(s)).
    pub fn new(
        settings: &WalletGlobalSettings,
        context: GatewayContext,
    ) -> Result<Self, ConfigError> {
        settings.check()?;
        let api = Api::new(
            context.http.for_provider(ProviderId::WalletGlobal),
            context.clock.clone(),
            settings.client_id.trim().to_owned(),
            settings.client_secret.to_secret_string(),
        );
        Ok(Self {
            api,
            api_base_url: settings.http().base_url,
            test_mode: settings.test_mode().is_some(),
            clock: context.clock,
            sandbox: context.sandbox,
            webhook_id: settings.webhook_id.trim().to_owned(),
            merchant_id: settings.merchant_id.as_deref().map(|m| m.trim().to_owned()),
        })
    }

    /// Capture an approved PayPal order, idempotently: concurrent and repeated captures of the
    /// same order (return URL, webhook, reconciler) come to one capture at PayPal and the same
    /// outcome here.
    ///
    /// # Errors
    /// [`GatewayError::Rejected`] when PayPal refuses (not approved yet, expired, voided);
    /// [`GatewayError::Unreachable`] on transport failures (retrying is safe).
    pub async fn capture_order(
        &self,
        paypal_order_id: &str,
        our_order_id: &OrderId,
    ) -> Result<CaptureOutcome, GatewayError> {
        let id = path_segment(paypal_order_id)
            .ok_or_else(|| GatewayError::Rejected("not a paypal order id".into()))?;
        let reply = self
            .api
            .capture_order(id, &capture_request_id(our_order_id))
            .await?;
        if (200..=299).contains(&reply.status) {
            let order: Order = parse(&reply, "capture answer")?;
            return order.capture_outcome(self.clock.now());
        }
        if !(400..=499).contains(&reply.status) {
            return Err(failure(&reply));
        }
        // Another capture may have won the race (`ORDER_ALREADY_CAPTURED`), or PayPal refused a
        // concurrent duplicate of our request id: what the order says now is the answer.
        let order = self.api.get_order(id).await?;
        let already = ErrorBody::of(&reply).has_issue("ORDER_ALREADY_CAPTURED");
        match order.status.step() {
            OrderStep::ReadCapture => order.capture_outcome(self.clock.now()),
            OrderStep::Capture if already => Ok(CaptureOutcome::Pending),
            OrderStep::Wait | OrderStep::Capture | OrderStep::Voided => Err(failure(&reply)),
        }
    }

    async fn checkout_order(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        let order = self
            .api
            .create_order(&CreateOrder::from(request), request.order_id.as_str())
            .await?;
        let link = self.paypal_page(order.approve_link(), "order")?;
        let id = path_segment(&order.id)
            .ok_or_else(|| GatewayError::BadResponse("unexpected order id".into()))?;
        Ok(Checkout {
            provider_reference: Some(id.to_owned()),
            target: CheckoutTarget::Redirect(link.to_owned()),
        })
    }

    async fn checkout_subscription(
        &self,
        request: &CheckoutRequest,
    ) -> Result<Checkout, GatewayError> {
        let mut body = CreateSubscription::try_from(request)?;
        if self.sandbox {
            body = body.priced_for_sandbox(request);
        }
        let subscription = self
            .api
            .create_subscription(&body, request.order_id.as_str())
            .await?;
        let link = self.paypal_page(subscription.approve_link(), "subscription")?;
        let id = path_segment(&subscription.id)
            .filter(|id| id.starts_with(SUBSCRIPTION_ID_PREFIX))
            .ok_or_else(|| GatewayError::BadResponse("unexpected subscription id".into()))?;
        Ok(Checkout {
            provider_reference: Some(id.to_owned()),
            target: CheckoutTarget::Redirect(link.to_owned()),
        })
    }

    /// The approval page of a created `what`: present, and PayPal's own (or on the configured
    /// API's origin, the local sandbox), so that no answer sends a buyer elsewhere.
    fn paypal_page<'a>(&self, link: Option<&'a str>, what: &str) -> Result<&'a str, GatewayError> {
        let link =
            link.ok_or_else(|| GatewayError::BadResponse(format!("{what} has no approval link")))?;
        if revise::approval_link_allowed(link, &self.api_base_url) {
            Ok(link)
        } else {
            Err(GatewayError::BadResponse(format!(
                "the {what}'s approval link is not a paypal page"
            )))
        }
    }

    async fn query_order(
        &self,
        id: &str,
        order_id: &OrderId,
    ) -> Result<PaymentStatus, GatewayError> {
        let order = self.api.get_order(id).await?;
        Ok(match order.status.step() {
            OrderStep::Wait => PaymentStatus::Pending,
            // Approved but not captured: the buyer never came back and the webhook was lost.
            OrderStep::Capture => self.capture_order(id, order_id).await?.into(),
            OrderStep::ReadCapture => order.capture_outcome(self.clock.now())?.into(),
            OrderStep::Voided => PaymentStatus::Failed {
                reason: "paypal voided the order".into(),
            },
        })
    }

    /// Extract the transmission headers, refuse a stale one, and have PayPal verify the rest.
    async fn verified_envelope(&self, request: &WebhookRequest) -> Result<Envelope, WebhookError> {
        let transmission = Transmission::extract(request)?;
        let now_s = unix_seconds(self.clock.now());
        if (now_s - transmission.time_s).abs() > WEBHOOK_TOLERANCE_S {
            return Err(WebhookError::Stale);
        }
        let envelope = read_envelope(&request.body)?;
        let body = transmission.verification_body(&self.webhook_id, &request.body)?;
        let answer = self
            .api
            .verify_signature(&body)
            .await
            .map_err(|e| retry_later("signature verification", &e))?;
        if answer.verified() {
            Ok(envelope)
        } else {
            Err(WebhookError::BadSignature)
        }
    }

    /// Why a verified event is another merchant's: PayPal verified it for our webhook id (so it
    /// was sent to our app, in the environment of the API that verified it), and when
    /// `merchantId` is set, every merchant its resource names as payee or seller must be ours.
    fn foreign(&self, envelope: &Envelope) -> Option<String> {
        let ours = self.merchant_id.as_deref()?;
        let other = named_merchants(&envelope.resource)
            .into_iter()
            .find(|named| *named != ours)?;
        let other = clip(other, MAX_EVENT_ID_CHARS);
        Some(format!(
            "names paypal merchant {other}, not the configured merchantId"
        ))
    }

    /// Turn an interpretation into events, calling PayPal where the event alone is not enough.
    async fn resolve(
        &self,
        interpretation: Interpretation,
    ) -> Result<Vec<PaymentEvent>, WebhookError> {
        match interpretation {
            Interpretation::Events(events) => Ok(events),
            Interpretation::RefundOfCapture {
                capture_id,
                total_refunded,
                occurred_at,
            } => {
                let capture = lookup(self.api.get_capture(&capture_id).await, "refunded capture")?;
                Ok(capture
                    .map(|c| PaymentEvent::Refunded {
                        charge: RefundedCharge::Order(c.locator()),
                        refund: RefundReport::Total(total_refunded),
                        occurred_at,
                    })
                    .into_iter()
                    .collect())
            }
            Interpretation::SubscriptionSale {
                subscription_id,
                sale_id,
                amount,
                sold_at,
                occurred_at,
            } => {
                let sale = Sale {
                    subscription_id,
                    sale_id,
                    amount,
                    sold_at,
                    occurred_at,
                };
                self.sale(sale).await
            }
            Interpretation::SaleRefundWithoutSale {
                refund_id,
                amount,
                occurred_at,
            } => {
                let refund = lookup(self.api.get_sale_refund(&refund_id).await, "sale refund")?;
                Ok(refund
                    .and_then(|r| Some(r.charge(r.sale()?)))
                    .map(|charge| PaymentEvent::Refunded {
                        charge,
                        refund: RefundReport::One { refund_id, amount },
                        occurred_at,
                    })
                    .into_iter()
                    .collect())
            }
            Interpretation::SubscriptionUpdated {
                subscription_id,
                occurred_at,
            } => self.revised(&subscription_id, occurred_at).await,
            Interpretation::DisputeLost {
                dispute_id,
                transaction_ids,
                occurred_at,
            } => {
                self.dispute_lost(&dispute_id, transaction_ids, occurred_at)
                    .await
            }
            Interpretation::VaultTokenCreated { token, occurred_at } => {
                self.vaulted(token, occurred_at).await
            }
        }
    }

    /// `VAULT.PAYMENT-TOKEN.CREATED` of a purchase: the order that saved the account is read
    /// back, and its completed capture reported before the method, so that the method meets a
    /// paid order however PayPal ordered its events (the payment is applied once). A capture
    /// still pending refuses the event, so that PayPal redelivers it once the capture settles;
    /// an order PayPal does not know changes nothing.
    async fn vaulted(
        &self,
        token: vault::TokenCreated,
        occurred_at: Timestamp,
    ) -> Result<Vec<PaymentEvent>, WebhookError> {
        let Some(order) = lookup(
            self.api.get_order(&token.paypal_order_id).await,
            "vaulting order",
        )?
        else {
            return Ok(Vec::new());
        };
        let locator = vault::saving_order(&order);
        let mut events = Vec::with_capacity(2);
        if order.status.step() == OrderStep::ReadCapture {
            let outcome = order
                .capture_outcome(self.clock.now())
                .map_err(|e| retry_later("vaulting order's capture", &e))?;
            if outcome == CaptureOutcome::Pending {
                return Err(redeliver("the vaulting order's capture is still pending"));
            }
            if let Some((amount, paid_at)) = vault::paid(&outcome) {
                events.push(PaymentEvent::PaymentSucceeded {
                    order: locator.clone(),
                    amount,
                    occurred_at: paid_at,
                });
            }
        }
        events.push(PaymentEvent::PaymentMethodSaved {
            order: locator,
            method: token.method,
            occurred_at,
        });
        Ok(events)
    }

    /// A lost dispute: the whole of every disputed transaction PayPal took back.
    async fn dispute_lost(
        &self,
        dispute_id: &str,
        transaction_ids: Vec<String>,
        occurred_at: Timestamp,
    ) -> Result<Vec<PaymentEvent>, WebhookError> {
        let mut events = Vec::with_capacity(transaction_ids.len());
        for id in transaction_ids {
            if let Some(charge) = self.disputed_charge(&id).await? {
                events.push(PaymentEvent::Refunded {
                    charge,
                    refund: RefundReport::DisputeLost {
                        dispute_id: dispute_id.to_owned(),
                    },
                    occurred_at,
                });
            }
        }
        Ok(events)
    }

    /// What a disputed transaction paid: an order's capture (`GET /v2/payments/captures/{id}`),
    /// else a subscription's sale (`GET /v1/payments/sale/{id}`); `None` when PayPal knows it as
    /// neither (or it is a sale outside any subscription).
    async fn disputed_charge(&self, id: &str) -> Result<Option<RefundedCharge>, WebhookError> {
        match self.api.get_capture(id).await {
            Ok(capture) => return Ok(Some(RefundedCharge::Order(capture.locator()))),
            // Not a capture: a sale's id is unknown to the captures API.
            Err(GatewayError::Rejected(_)) => {}
            Err(e) => return Err(retry_later("disputed capture", &e)),
        }
        let sale = lookup(self.api.get_sale(id).await, "disputed sale")?;
        Ok(sale.and_then(|s| s.subscription_charge()))
    }

    /// A subscription payment: the first activates (whichever of `ACTIVATED` and the sale comes
    /// first), later ones renew for the period PayPal now reports as paid.
    async fn sale(&self, sale: Sale) -> Result<Vec<PaymentEvent>, WebhookError> {
        let Some(subscription) = lookup(
            self.api.get_subscription(&sale.subscription_id).await,
            "subscription",
        )?
        else {
            return Ok(Vec::new());
        };
        if sale
            .sold_at
            .is_some_and(|at| !subscription.shows_sale_at(at))
        {
            return Err(redeliver("the subscription does not show the sale yet"));
        }
        let first = subscription.is_first_payment();
        // A renewal under a plan the subscriber approved a revision to tells it too, first, for
        // the case that PayPal's `BILLING.SUBSCRIPTION.UPDATED` was lost.
        let mut events = Vec::new();
        if !first {
            events.extend(
                self.revision_at_sale(&sale.subscription_id, sale.occurred_at)
                    .await,
            );
        }
        let event = if first {
            subscription.activation(sale.sale_id.clone(), Some(sale.amount), sale.occurred_at)
        } else {
            subscription
                .paid_period()
                .map(|period| PaymentEvent::SubscriptionRenewed {
                    provider_subscription_id: sale.subscription_id,
                    period,
                    amount: sale.amount,
                    charge_ref: sale.sale_id.clone(),
                    occurred_at: sale.occurred_at,
                })
        };
        if event.is_none() {
            tracing::warn!(
                provider = PROVIDER,
                "paypal subscription shows no paid period; the sale changes nothing"
            );
        }
        events.extend(event);
        Ok(events)
    }

    /// The plan a renewed subscription is on, as [`WalletGlobalGateway::revised`] reads it; best
    /// effort: the renewal is applied whatever this look-up answers.
    async fn revision_at_sale(
        &self,
        subscription_id: &str,
        occurred_at: Timestamp,
    ) -> Option<PaymentEvent> {
        match self.revised(subscription_id, occurred_at).await {
            Ok(mut events) => events.pop(),
            Err(error) => {
                tracing::warn!(provider = PROVIDER, %error, "paypal plan of a renewed subscription unreadable; the renewal is checked as it is");
                None
            }
        }
    }
}

impl WalletGlobalGateway {
    /// `BILLING.SUBSCRIPTION.UPDATED`: the plan a live subscription is on now, with what it
    /// bills, read back from PayPal (`?fields=plan`, else the plan itself). Tally decides whether
    /// that is the revision the subscriber asked for; an ended or unknown subscription, or one
    /// PayPal shows no plan for, changes nothing here.
    async fn revised(
        &self,
        subscription_id: &str,
        occurred_at: Timestamp,
    ) -> Result<Vec<PaymentEvent>, WebhookError> {
        let Some(subscription) = lookup(
            self.api.get_subscription_with_plan(subscription_id).await,
            "updated subscription",
        )?
        else {
            return Ok(Vec::new());
        };
        let live = matches!(
            subscription.status,
            SubscriptionStatus::Active | SubscriptionStatus::Suspended
        );
        let plan_id = subscription
            .plan_id
            .as_deref()
            .and_then(path_segment)
            .map(str::to_owned);
        let (true, Some(plan_id)) = (live, plan_id) else {
            return Ok(Vec::new());
        };
        let plan = match subscription.plan {
            Some(plan) if !plan.billing_cycles.is_empty() => plan,
            _ => match lookup(self.api.get_plan(&plan_id).await, "revised plan")? {
                Some(plan) => plan,
                None => return Ok(Vec::new()),
            },
        };
        let (price, interval_months) = plan.regular_terms().map_err(|why| {
            WebhookError::Malformed(format!("BILLING.SUBSCRIPTION.UPDATED: {why}"))
        })?;
        Ok(vec![PaymentEvent::SubscriptionPlanRevised {
            provider_subscription_id: subscription.id,
            provider_plan_id: plan_id,
            price,
            interval_months,
            occurred_at,
        }])
    }
}

/// A subscription sale to resolve.
struct Sale {
    subscription_id: String,
    sale_id: Option<String>,
    amount: Money,
    sold_at: Option<Timestamp>,
    occurred_at: Timestamp,
}

/// A PayPal call made while handling a webhook: a refusal (not found, not ours) makes the event
/// a no-op; a transient failure refuses the webhook so that PayPal delivers it again.
fn lookup<T>(result: Result<T, GatewayError>, what: &str) -> Result<Option<T>, WebhookError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(GatewayError::Rejected(reason)) => {
            tracing::warn!(provider = PROVIDER, %reason, "paypal refused the {what}; the event changes nothing");
            Ok(None)
        }
        Err(e) => Err(retry_later(what, &e)),
    }
}

/// The refusal for a webhook that could not be handled now. PayPal redelivers on any non-2xx
/// answer (25 times over three days). The port has no retryable variant, so this is
/// `Malformed` with a clear reason.
fn retry_later(what: &str, error: &GatewayError) -> WebhookError {
    tracing::warn!(provider = PROVIDER, %error, "paypal {what} failed; refusing the webhook so that paypal retries");
    WebhookError::Malformed(format!("{what} failed, paypal will redeliver: {error}"))
}

/// The refusal for a webhook PayPal's data is not ready for yet (see [`retry_later`]).
fn redeliver(reason: &str) -> WebhookError {
    tracing::warn!(
        provider = PROVIDER,
        reason,
        "refusing the webhook so that paypal redelivers it"
    );
    WebhookError::Malformed(format!("{reason}, paypal will redeliver"))
}

#[async_trait]
impl PaymentGateway for WalletGlobalGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::WalletGlobal
    }

    fn is_sandbox(&self) -> bool {
        self.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        match request.snapshot.plan_type {
            PlanType::Recurring => self.checkout_subscription(request).await,
            PlanType::OneTime | PlanType::Credits => self.checkout_order(request).await,
        }
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // A client-credentials token is what every call starts with; asking for one changes
        // nothing at PayPal.
        self.api.check_credentials().await?;
        let mode = if self.test_mode {
            CredentialMode::Test
        } else {
            CredentialMode::Live
        };
        Ok(CredentialCheck {
            mode,
            detail: "POST /v1/oauth2/token issued an access token".to_owned(),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        // No PayPal id means the checkout was never created: nothing can have been paid.
        let Some(reference) = payment.provider_reference.as_deref() else {
            return Ok(PaymentStatus::Pending);
        };
        let id = path_segment(reference)
            .ok_or_else(|| GatewayError::BadResponse("unexpected paypal id".into()))?;
        if id.starts_with(SUBSCRIPTION_ID_PREFIX) {
            return Ok(self.api.get_subscription(id).await?.payment_status());
        }
        self.query_order(id, &payment.order_id).await
    }

    /// Capture the approved PayPal order of `payment` (the service checked that it is its own
    /// pending order). Subscriptions need no capture.
    async fn capture(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let reference = payment
            .provider_reference
            .as_deref()
            .ok_or_else(|| GatewayError::Rejected("no paypal order to capture".into()))?;
        let id = path_segment(reference)
            .ok_or_else(|| GatewayError::Rejected("not a paypal order id".into()))?;
        if id.starts_with(SUBSCRIPTION_ID_PREFIX) {
            return Err(GatewayError::NotSupported);
        }
        Ok(self.capture_order(id, &payment.order_id).await?.into())
    }

    /// Refund an order's capture: `GET /v2/checkout/orders/{id}` finds the capture, then
    /// `POST /v2/payments/captures/{capture_id}/refund` with `PayPal-Request-Id: <our refund
    /// id>` (the same id twice refunds once and answers the same refund). The answer's refund id
    /// is the `resource.id` of PayPal's `PAYMENT.CAPTURE.REFUNDED`, which Tally reads as the
    /// capture's running total. A subscription's payments are sales (Payments v1), refunded in
    /// PayPal's dashboard.
    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let reference = request
            .payment
            .provider_reference
            .as_deref()
            .ok_or_else(|| GatewayError::Rejected("the order has no paypal order".into()))?;
        let id = path_segment(reference)
            .ok_or_else(|| GatewayError::Rejected("not a paypal order id".into()))?;
        if id.starts_with(SUBSCRIPTION_ID_PREFIX) {
            return Err(GatewayError::Rejected(
                "a paypal subscription's payment is refunded in paypal's dashboard".into(),
            ));
        }
        let order = self.api.get_order(id).await?;
        let capture = order
            .capture()
            .ok_or_else(|| GatewayError::Rejected("the paypal order has no capture".into()))?;
        let body = RefundCapture::new(request.amount, &request.payment.order_id, &request.reason);
        let refund = self
            .api
            .refund_capture(&capture.id, &body, &request.refund_id)
            .await?;
        let refund_id = path_segment(&refund.id)
            .ok_or_else(|| GatewayError::BadResponse("unexpected refund id".into()))?;
        Ok(RefundStarted {
            provider_refund_id: Some(refund_id.to_owned()),
            state: refund.state(),
        })
    }

    /// PayPal's vault saves a PayPal account at a consented checkout (see [`vault`]).
    fn saves_methods(&self) -> bool {
        true
    }

    /// `POST /v2/checkout/orders` with the saved account's `vault_id`, captured at once by
    /// PayPal, under `PayPal-Request-Id: topup-<key>` (see [`vault`]). Nothing is left to undo
    /// when PayPal wants the buyer: the refused request created no capture.
    async fn charge_saved_method(
        &self,
        charge: &OffSessionCharge,
    ) -> Result<OffSessionOutcome, GatewayError> {
        let body = vault::VaultCharge::for_charge(charge)?;
        let request_id = vault::request_id(charge)?;
        let reply = self.api.charge_vault(&body, &request_id).await?;
        Ok(match vault::read_charge(&reply, self.clock.now())? {
            vault::ChargeAnswer::Accepted(provider_reference) => {
                OffSessionOutcome::Accepted { provider_reference }
            }
            vault::ChargeAnswer::Declined(reason) => OffSessionOutcome::Declined { reason },
            vault::ChargeAnswer::NeedsPayer => OffSessionOutcome::AuthenticationRequired,
        })
    }

    /// PayPal has no call to close an unapproved order: it lapses at PayPal by itself, and
    /// Tally expires its own order.
    async fn close_payment(&self, _payment: &PaymentRef) -> Result<(), GatewayError> {
        Err(GatewayError::NotSupported)
    }

    /// PayPal cancels at once; the subscriber keeps access to the end of the paid period
    /// because Tally's `canceled` status grants access until then. Cancelling a cancelled
    /// subscription succeeds.
    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let id = path_segment(provider_subscription_id)
            .ok_or_else(|| GatewayError::Rejected("not a paypal subscription id".into()))?;
        let reply = self.api.cancel_subscription(id).await?;
        if (200..=299).contains(&reply.status) {
            return Ok(());
        }
        if reply.status == 422 && ErrorBody::of(&reply).has_issue("SUBSCRIPTION_STATUS_INVALID") {
            let status = self.api.get_subscription(id).await?.status;
            if matches!(
                status,
                SubscriptionStatus::Cancelled | SubscriptionStatus::Expired
            ) {
                return Ok(());
            }
        }
        checked(reply).map(|_| ())
    }

    /// `DELETE /v3/vault/payment-tokens/{id}` of the vaulted account
    /// (<https://developer.paypal.com/docs/api/payment-tokens/v3/>): a deleted payment token can
    /// no longer be charged. 204 is the answer; a token PayPal does not know (404) is forgotten
    /// already.
    async fn forget_saved_method(&self, method: &SavedMethod) -> Result<(), GatewayError> {
        let reply = self.api.delete_payment_token(&method.method_ref).await?;
        if reply.status == 404 {
            return Ok(());
        }
        checked(reply).map(|_| ())
    }

    /// PayPal's cancel is immediate already: the same call (`POST …/cancel`), whose
    /// `BILLING.SUBSCRIPTION.CANCELLED` ends the subscription.
    async fn cancel_subscription_now(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        PaymentGateway::cancel_subscription(self, provider_subscription_id).await
    }

    /// PayPal's revise (`POST /v1/billing/subscriptions/{id}/revise`, see [`revise`]): the
    /// subscriber must approve the new plan at PayPal, whose page is answered only when it is
    /// PayPal's own (or the configured API's origin); PayPal's `BILLING.SUBSCRIPTION.UPDATED`
    /// confirms it. A revise PayPal applies without consent (a card-funded subscription)
    /// answers no approval link: accepted, confirmed by the same event.
    async fn change_subscription_plan(
        &self,
        request: &PlanChangeRequest,
    ) -> Result<PlanChangeStarted, GatewayError> {
        let id = path_segment(&request.provider_subscription_id)
            .filter(|id| id.starts_with(SUBSCRIPTION_ID_PREFIX))
            .ok_or_else(|| GatewayError::Rejected("not a paypal subscription id".into()))?;
        let mut body = revise::ReviseSubscription::for_request(request)?;
        if self.sandbox {
            body = body.priced_for_sandbox(request);
        }
        let answer = self
            .api
            .revise_subscription(id, &body, &request.idempotency_key)
            .await?;
        match answer.approve_link() {
            None => Ok(PlanChangeStarted::Accepted),
            link => Ok(PlanChangeStarted::ApprovalNeeded {
                url: self.paypal_page(link, "revise")?.to_owned(),
            }),
        }
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let envelope = self.verified_envelope(request).await?;
        self.parse_verified(envelope).await
    }

    /// The recorded body without PayPal's verification call (itself the signature check).
    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        self.parse_verified(read_envelope(&recorded.body)?).await
    }

    /// PayPal wants any 2xx; anything else is redelivered.
    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "text/plain",
                body: String::new(),
            },
            AckFor::Refused(_) => WebhookAck {
                verdict: AckVerdict::Refused,
                content_type: "text/plain",
                body: "webhook refused".into(),
            },
        }
    }
}

impl WalletGlobalGateway {
    /// Read a verified event (live or recorded): the merchant check, then its meaning, with
    /// the look-ups it needs.
    async fn parse_verified(&self, envelope: Envelope) -> Result<VerifiedWebhook, WebhookError> {
        if let Some(why) = self.foreign(&envelope) {
            return Ok(VerifiedWebhook {
                event_id: envelope.id,
                event_type: envelope.event_type,
                events: Vec::new(),
                foreign: Some(why),
            });
        }
        let interpretation = interpret(&envelope, self.clock.now())?;
        let events = self.resolve(interpretation).await?;
        Ok(VerifiedWebhook {
            event_id: envelope.id,
            event_type: envelope.event_type,
            events,
            foreign: None,
        })
    }
}

/// A PayPal webhook body read (before or without the verification call).
fn read_envelope(body: &[u8]) -> Result<Envelope, WebhookError> {
    if body.len() > MAX_WEBHOOK_BYTES {
        return Err(WebhookError::Malformed("body too large".into()));
    }
    let envelope: Envelope = serde_json::from_slice(body)
        .map_err(|_| WebhookError::Malformed("body is not a paypal webhook event".into()))?;
    if envelope.id.is_empty() || envelope.id.len() > MAX_EVENT_ID_CHARS {
        return Err(WebhookError::Malformed(
            "event id missing or too long".into(),
        ));
    }
    Ok(envelope)
}
