//! `card_gateway`: Stripe Checkout Sessions.
//!
//! Checkout: `POST /v1/checkout/sessions` (form-encoded, `Authorization: Bearer sk_…`,
//! `Idempotency-Key` = our order id) and a redirect to the session's `url`. Query:
//! `GET /v1/checkout/sessions/{id}`; close: `POST /v1/checkout/sessions/{id}/expire`; cancel:
//! `POST /v1/subscriptions/{id}` with `cancel_at_period_end=true`. Webhooks carry
//! `Stripe-Signature: t=…,v1=…` = hex HMAC-SHA256 of `{t}.{raw body}` keyed with the endpoint
//! secret string as is (`whsec_…` included), any `v1` may match; a `t` more than five minutes in
//! the past is refused and one in the future is not (stripe-python's rule). A verified event
//! whose `livemode` is not the secret key's mode, or that names a connected `account` other
//! than the configured one, is foreign: acknowledged, and nothing changes. Refunds:
//! `POST /v1/refunds` for the order's PaymentIntent, read from its Checkout Session, with our
//! refund id as `Idempotency-Key`.
//! A refund or lost dispute whose event does not name the order or invoice is traced through
//! `GET /v1/charges/{id}` and `GET /v1/invoice_payments` (both pinned to
//! [`transformers::LOOKUP_API_VERSION`]). Credential check: `GET /v1/balance`, whose `livemode`
//! is the key's mode. Automatic top-up (a card saved at checkout, charged later off-session
//! with `POST /v1/payment_intents`) is in [`off_session`]. Wire formats and the event mapping
//! are in [`transformers`]; `docs/providers/card_gateway.md` has the status table.

pub mod off_session;
pub mod plan_change;
pub mod transformers;

use std::sync::Arc;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, Clock, CredentialCheck,
    CredentialMode, GatewayError, OffSessionCharge, OffSessionOutcome, OrderLocator, PaymentEvent,
    PaymentGateway, PaymentRef, PaymentStatus, PlanChangeRequest, PlanChangeStarted,
    RecordedWebhook, RefundRequest, RefundStarted, RefundedCharge, SavedMethod, VerifiedWebhook,
    WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::ProviderId;
use reqwest::header::CONTENT_TYPE;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::http::{HttpReply, HttpSettings, ProviderHttp};
use crate::shared::signing::unhex;
use crate::shared::time::from_unix_seconds;
use crate::shared::wire::clip;
use crate::shared::{ConfigError, GatewayContext, TestModeSetting};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use off_session::{ChargeAnswer, Intent};
use plan_change::PricedSubscription;
use transformers::{
    Balance, Charge, ChargeTarget, CheckoutSession, Event, Interpretation, InvoicePayment,
    LOOKUP_API_VERSION, List, Lookup, Refund, path_id,
};

/// Stripe's API.
pub const DEFAULT_BASE_URL: &str = "https://api.stripe.com";
/// How far in the past a webhook's `t` may be (the Stripe SDKs' default); stripe-python
/// refuses `t < now - tolerance` only, so a `t` in the future passes.
pub const TOLERANCE_S: i64 = 300;
/// The signature header.
pub const SIGNATURE_HEADER: &str = "stripe-signature";
const PROVIDER: &str = "card_gateway";
const FORM: &str = "application/x-www-form-urlencoded";
/// The account's balance: the read `check_credentials` makes.
const BALANCE_PATH: &str = "/v1/balance";
/// The most comma-separated items read from a signature header (a bound on parsing work).
const MAX_HEADER_ITEMS: usize = 32;

/// `[providers.card_gateway]` in `tally.toml`. `Debug` shows the secrets as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CardGatewaySettings {
    /// `secretKey`: `sk_test_…`/`sk_live_…` (or a restricted `rk_…` key). Required.
    pub secret_key: SecretString,
    /// `webhookSecret`: the endpoint's signing secret, `whsec_…`. Required.
    pub webhook_secret: SecretString,
    /// `baseUrl`: defaults to [`DEFAULT_BASE_URL`].
    #[serde(default)]
    pub base_url: Option<String>,
    /// `timeoutMs`: total time per request; defaults to the shared HTTP default.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `accountId`: the connected account (`acct_…`) whose events this endpoint takes, for a
    /// Connect endpoint. Unset: an event naming any connected `account` is foreign.
    #[serde(default)]
    pub account_id: Option<String>,
}

impl CardGatewaySettings {
    /// Settings from plain values (the sandbox's published test credentials, tests).
    #[must_use]
    pub fn new(secret_key: &str, webhook_secret: &str, base_url: Option<String>) -> Self {
        Self {
            secret_key: SecretString::from(secret_key.to_owned()),
            webhook_secret: SecretString::from(webhook_secret.to_owned()),
            base_url,
            timeout_ms: None,
            account_id: None,
        }
    }

    /// Where the API is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        let base_url = self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        HttpSettings::with_timeout(base_url, self.timeout_ms)
    }

    /// The setting that makes these test-mode credentials: a secret key that is not a live-mode
    /// key (`sk_test_…`, `rk_test_…`).
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        (!is_live_key(self.secret_key.expose_secret())).then_some(TestModeSetting::new(
            "secretKey",
            "is a test-mode key (sk_test_…/rk_test_…), not a live one (sk_live_…/rk_live_…)",
        ))
    }
}

/// Whether a secret or restricted key is a live-mode key (`sk_live_…`, `rk_live_…`); every
/// other key (`sk_test_…`, `rk_test_…`, the sandbox's) is a test-mode key.
#[must_use]
pub fn is_live_key(key: &str) -> bool {
    key.starts_with("sk_live_") || key.starts_with("rk_live_")
}

/// The Stripe Checkout gateway.
pub struct CardGatewayGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    secret_key: SecretString,
    webhook_secret: SecretString,
    /// The key's mode: events must carry the same `livemode`.
    livemode: bool,
    /// The connected account whose events are ours (Connect), if any.
    account_id: Option<String>,
}

impl std::fmt::Debug for CardGatewayGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardGatewayGateway")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

impl CardGatewayGateway {
    /// A gateway for `settings`, talking through `context.http`.
    ///
    /// # Errors
    /// A secret key that is not a Stripe secret or restricted key, or a webhook secret that is
    /// not a `whsec_…` signing secret.
    pub fn new(
        settings: &CardGatewaySettings,
        context: GatewayContext,
    ) -> Result<Self, ConfigError> {
        let key = settings.secret_key.expose_secret();
        if !(key.starts_with("sk_") || key.starts_with("rk_")) || key.len() < 8 {
            return Err(ConfigError::new(
                PROVIDER,
                "secretKey",
                "must be a Stripe secret key (sk_… or rk_…)",
            ));
        }
        let secret = settings.webhook_secret.expose_secret();
        if !secret.starts_with("whsec_") || secret.len() <= "whsec_".len() {
            return Err(ConfigError::new(
                PROVIDER,
                "webhookSecret",
                "must be the endpoint's signing secret (whsec_…)",
            ));
        }
        let account_id = match settings.account_id.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(id) if id.starts_with("acct_") && path_id(id).is_ok() => Some(id.to_owned()),
            Some(_) => {
                return Err(ConfigError::new(
                    PROVIDER,
                    "accountId",
                    "must be a connected account id (acct_…)",
                ));
            }
        };
        Ok(Self {
            http: context.http.for_provider(ProviderId::CardGateway),
            clock: context.clock,
            sandbox: context.sandbox,
            livemode: is_live_key(key),
            secret_key: settings.secret_key.clone(),
            webhook_secret: settings.webhook_secret.clone(),
            account_id,
        })
    }

    /// Why a verified event is not ours: the other mode than the key's, or a connected account
    /// other than the configured one; `None` when it is ours.
    fn foreign(&self, event: &Event) -> Option<String> {
        if event.livemode != self.livemode {
            let mode = |live: bool| if live { "live" } else { "test" };
            return Some(format!(
                "a {}-mode event, but the secret key is a {}-mode key",
                mode(event.livemode),
                mode(self.livemode)
            ));
        }
        match (event.account.as_deref(), self.account_id.as_deref()) {
            (None, None) => None,
            (Some(theirs), Some(ours)) if theirs == ours => None,
            (Some(theirs), _) => Some(format!(
                "an event of connected account {}, not of this account",
                clip(theirs, 64)
            )),
            (None, Some(ours)) => Some(format!(
                "an event of the platform account, not of connected account {ours}"
            )),
        }
    }

    async fn post_form(
        &self,
        path: &str,
        fields: &[(String, String)],
        idempotency_key: Option<&str>,
    ) -> Result<HttpReply, GatewayError> {
        let mut request = self
            .http
            .post(path)
            .bearer_auth(self.secret_key.expose_secret())
            .header(CONTENT_TYPE, FORM)
            .body(transformers::encode_form(fields)?);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        self.http.send(request).await
    }
}

impl CardGatewayGateway {
    /// `GET {path}?{query}` with the API version the lookups pin.
    async fn lookup_get(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<HttpReply, GatewayError> {
        let mut url = self.http.url(path);
        if !query.is_empty() {
            url = format!("{url}?{}", transformers::encode_form(query)?);
        }
        let request = self
            .http
            .client()
            .get(url)
            .bearer_auth(self.secret_key.expose_secret())
            .header("Stripe-Version", LOOKUP_API_VERSION);
        self.http.send(request).await
    }

    /// The PaymentIntent that paid an order: the reference itself (`pi_…`), or its Checkout
    /// Session's, or for a subscription's session the one that paid the session's first invoice.
    async fn payment_intent_of(&self, payment: &PaymentRef) -> Result<String, GatewayError> {
        let reference = payment
            .provider_reference
            .as_deref()
            .ok_or_else(|| GatewayError::Rejected("order has no checkout session id".into()))?;
        let reference = path_id(reference)?;
        if reference.starts_with("pi_") {
            return Ok(reference.to_owned());
        }
        let path = format!("/v1/checkout/sessions/{reference}");
        let session: CheckoutSession = transformers::read(self.lookup_get(&path, &[]).await?)?;
        if let Some(intent) = session.payment_intent.as_ref() {
            return Ok(path_id(intent.id())?.to_owned());
        }
        let invoice = session.invoice.as_ref().ok_or_else(|| {
            GatewayError::Rejected("the checkout session has no payment to refund".into())
        })?;
        let query = transformers::invoice_payments_of_invoice_query(path_id(invoice.id())?);
        let payments: List<InvoicePayment> =
            transformers::read(self.lookup_get("/v1/invoice_payments", &query).await?)?;
        payments.paid_payment_intent().ok_or_else(|| {
            GatewayError::Rejected("the session's invoice was paid by no PaymentIntent".into())
        })
    }

    /// `GET /v1/charges/{id}`.
    async fn retrieve_charge(&self, id: &str) -> Result<Charge, GatewayError> {
        let path = format!("/v1/charges/{}", path_id(id)?);
        transformers::read(self.lookup_get(&path, &[]).await?)
    }

    /// `GET /v1/invoice_payments` for the invoice `payment_intent` paid.
    async fn invoice_payments(
        &self,
        payment_intent: &str,
    ) -> Result<List<InvoicePayment>, GatewayError> {
        let query = transformers::invoice_payments_query(path_id(payment_intent)?);
        transformers::read(self.lookup_get("/v1/invoice_payments", &query).await?)
    }

    /// `GET /v1/payment_intents/{id}?expand[]=payment_method`.
    async fn retrieve_payment_intent(&self, id: &str) -> Result<Intent, GatewayError> {
        let path = format!("/v1/payment_intents/{}", path_id(id)?);
        let query = [("expand[]".to_owned(), "payment_method".to_owned())];
        transformers::read(self.lookup_get(&path, &query).await?)
    }

    /// The card a paid session saved, read from its PaymentIntent; `None` when Stripe refuses
    /// the read or the PaymentIntent names no Customer or method.
    async fn saved_method(
        &self,
        payment_intent: &str,
    ) -> Result<Option<SavedMethod>, WebhookError> {
        let intent = looked_up(
            self.retrieve_payment_intent(payment_intent).await,
            "payment intent",
        )?;
        Ok(intent.as_ref().and_then(Intent::saved_method))
    }

    /// Turn an interpretation into events, reading from Stripe what the event does not say.
    async fn resolve(
        &self,
        interpretation: Interpretation,
    ) -> Result<Vec<PaymentEvent>, WebhookError> {
        let (lookup, refund, occurred_at) = match interpretation {
            Interpretation::Events(events) => return Ok(events),
            Interpretation::SavedMethod {
                mut events,
                payment_intent,
                order,
                occurred_at,
            } => {
                if let Some(method) = self.saved_method(&payment_intent).await? {
                    events.push(PaymentEvent::PaymentMethodSaved {
                        order,
                        method,
                        occurred_at,
                    });
                }
                return Ok(events);
            }
            Interpretation::Lookup {
                lookup,
                refund,
                occurred_at,
            } => (lookup, refund, occurred_at),
        };
        Ok(self
            .refunded_charge(lookup)
            .await?
            .map(|charge| PaymentEvent::Refunded {
                charge,
                refund,
                occurred_at,
            })
            .into_iter()
            .collect())
    }

    /// The payment a refund or dispute takes back from: from the charge (read when only its id
    /// is known), else from the invoice its PaymentIntent paid; a charge that paid no invoice
    /// and names no order is reported without an order (Tally records it as unknown).
    async fn refunded_charge(
        &self,
        lookup: Lookup,
    ) -> Result<Option<RefundedCharge>, WebhookError> {
        let payment_intent = match lookup {
            Lookup::PaymentIntent(payment_intent) => payment_intent,
            Lookup::Charge(id) => {
                let Some(charge) = looked_up(self.retrieve_charge(&id).await, "charge")? else {
                    return Ok(None);
                };
                match charge.target() {
                    ChargeTarget::Known(charge) => return Ok(Some(charge)),
                    ChargeTarget::PaymentIntent(payment_intent) => payment_intent,
                }
            }
        };
        let Some(payments) = looked_up(
            self.invoice_payments(&payment_intent).await,
            "invoice payments",
        )?
        else {
            return Ok(None);
        };
        Ok(Some(payments.subscription_charge().unwrap_or(
            RefundedCharge::Order(OrderLocator {
                order_id: None,
                provider_reference: None,
            }),
        )))
    }
}

/// A Stripe read made while handling a webhook: a refusal (not found, not this account's)
/// makes the event a no-op; a transient failure refuses the webhook so that Stripe sends it
/// again (it retries any non-2xx answer).
fn looked_up<T>(result: Result<T, GatewayError>, what: &str) -> Result<Option<T>, WebhookError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(GatewayError::Rejected(reason)) => {
            tracing::warn!(provider = PROVIDER, %reason, "stripe refused the {what} lookup; the event changes nothing");
            Ok(None)
        }
        Err(error) => {
            tracing::warn!(provider = PROVIDER, %error, "stripe {what} lookup failed; refusing the webhook so that stripe retries");
            Err(WebhookError::Malformed(format!(
                "{what} lookup failed, stripe will retry: {error}"
            )))
        }
    }
}

#[async_trait]
impl PaymentGateway for CardGatewayGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::CardGateway
    }

    fn is_sandbox(&self) -> bool {
        self.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        // The sandbox cannot know the endpoint registered in a dashboard, so it is told.
        let notify_url = self.sandbox.then_some(request.notify_url.as_str());
        let form = transformers::checkout_form(request, self.clock.now(), notify_url)?;
        let reply = self
            .post_form(
                "/v1/checkout/sessions",
                &form,
                Some(request.order_id.as_str()),
            )
            .await?;
        let session: CheckoutSession = transformers::read(reply)?;
        let url = session
            .url
            .ok_or_else(|| GatewayError::BadResponse("checkout session has no url".into()))?;
        Ok(Checkout {
            provider_reference: Some(session.id),
            target: CheckoutTarget::Redirect(url),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let reference = payment
            .provider_reference
            .as_deref()
            .ok_or_else(|| GatewayError::Rejected("order has no checkout session id".into()))?;
        // A top-up's charge made off-session is a PaymentIntent without a session.
        if reference.starts_with("pi_") {
            let path = format!("/v1/payment_intents/{}", path_id(reference)?);
            let intent: off_session::Intent =
                transformers::read(self.lookup_get(&path, &[]).await?)?;
            return intent.payment_status(self.clock.now());
        }
        let path = format!("/v1/checkout/sessions/{}", path_id(reference)?);
        let request = self
            .http
            .get(&path)
            .bearer_auth(self.secret_key.expose_secret());
        let session: CheckoutSession = transformers::read(self.http.send(request).await?)?;
        session.payment_status(self.clock.now())
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // The balance is the cheapest read every secret key may make; it changes nothing.
        let request = self
            .http
            .get(BALANCE_PATH)
            .bearer_auth(self.secret_key.expose_secret());
        let balance: Balance = transformers::read(self.http.send(request).await?)?;
        if balance.object != "balance" {
            return Err(GatewayError::BadResponse(format!(
                "GET {BALANCE_PATH} answered a {:?}, not a balance",
                clip(&balance.object, 32)
            )));
        }
        let mode = if balance.livemode {
            CredentialMode::Live
        } else {
            CredentialMode::Test
        };
        Ok(CredentialCheck {
            mode,
            detail: format!("GET {BALANCE_PATH} answered the account's balance"),
        })
    }

    async fn close_payment(&self, payment: &PaymentRef) -> Result<(), GatewayError> {
        // No session, nothing to close.
        let Some(reference) = payment.provider_reference.as_deref() else {
            return Ok(());
        };
        let path = format!("/v1/checkout/sessions/{}/expire", path_id(reference)?);
        let _: CheckoutSession = transformers::read(self.post_form(&path, &[], None).await?)?;
        Ok(())
    }

    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let path = format!("/v1/subscriptions/{}", path_id(provider_subscription_id)?);
        let reply = self
            .post_form(&path, &transformers::cancel_at_period_end_form(), None)
            .await?;
        let _: transformers::Subscription = transformers::read(reply)?;
        Ok(())
    }

    /// `DELETE /v1/subscriptions/{id}`: Stripe ends the subscription at once and sends
    /// `customer.subscription.deleted`.
    async fn cancel_subscription_now(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let path = format!("/v1/subscriptions/{}", path_id(provider_subscription_id)?);
        let request = self
            .http
            .request(reqwest::Method::DELETE, &path)
            .bearer_auth(self.secret_key.expose_secret());
        let _: transformers::Subscription = transformers::read(self.http.send(request).await?)?;
        Ok(())
    }

    async fn change_subscription_plan(
        &self,
        request: &PlanChangeRequest,
    ) -> Result<PlanChangeStarted, GatewayError> {
        let path = format!(
            "/v1/subscriptions/{}",
            path_id(&request.provider_subscription_id)?
        );
        let current: PricedSubscription = transformers::read(self.lookup_get(&path, &[]).await?)?;
        let form = plan_change::plan_change_form(request, current.only_item()?)?;
        let reply = self
            .post_form(&path, &form, Some(&request.idempotency_key))
            .await?;
        let _: PricedSubscription = transformers::read(reply)?;
        Ok(PlanChangeStarted::Accepted)
    }

    async fn resume_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let path = format!("/v1/subscriptions/{}", path_id(provider_subscription_id)?);
        let reply = self
            .post_form(&path, &plan_change::resume_form(), None)
            .await?;
        let _: PricedSubscription = transformers::read(reply)?;
        Ok(())
    }

    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let payment_intent = self.payment_intent_of(&request.payment).await?;
        let form = transformers::refund_form(request, &payment_intent);
        let reply = self
            .post_form("/v1/refunds", &form, Some(&request.refund_id))
            .await?;
        let refund: Refund = transformers::read(reply)?;
        Ok(refund.started())
    }

    fn saves_methods(&self) -> bool {
        true
    }

    /// `POST /v1/payment_intents` off-session and confirmed at once (see [`off_session`]); a
    /// PaymentIntent the issuer wants authenticated is cancelled before the answer, so that
    /// nothing is left open at Stripe while the buyer pays in a checkout instead.
    async fn charge_saved_method(
        &self,
        charge: &OffSessionCharge,
    ) -> Result<OffSessionOutcome, GatewayError> {
        // The sandbox cannot know the endpoint registered in a dashboard, so it is told.
        let notify_url = self.sandbox.then_some(charge.notify_url.as_str());
        let form = off_session::charge_form(charge, notify_url)?;
        let key = off_session::idempotency_key(charge)?;
        let reply = self
            .post_form("/v1/payment_intents", &form, Some(&key))
            .await?;
        match off_session::read_charge(reply)? {
            ChargeAnswer::Accepted(provider_reference) => {
                Ok(OffSessionOutcome::Accepted { provider_reference })
            }
            ChargeAnswer::Declined(reason) => Ok(OffSessionOutcome::Declined { reason }),
            ChargeAnswer::NeedsAuthentication(intent) => {
                if let Some(intent) = intent {
                    let path = format!("/v1/payment_intents/{}/cancel", path_id(&intent)?);
                    let reply = self
                        .post_form(&path, &off_session::cancel_form(), None)
                        .await?;
                    off_session::read_cancel(reply)?;
                }
                Ok(OffSessionOutcome::AuthenticationRequired)
            }
        }
    }

    /// `POST /v1/payment_methods/{pm}/detach` (<https://docs.stripe.com/api/payment_methods/detach>):
    /// a detached PaymentMethod can no longer be charged. A method Stripe does not know any more
    /// counts as forgotten.
    async fn forget_saved_method(&self, method: &SavedMethod) -> Result<(), GatewayError> {
        let path = format!(
            "/v1/payment_methods/{}/detach",
            path_id(&method.method_ref)?
        );
        let reply = self.post_form(&path, &[], None).await?;
        off_session::read_detach(reply)
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let scheme = StripeSignature {
            secret: self.webhook_secret.expose_secret().as_bytes(),
        };
        let now = self.clock.now();
        let parts = webhook::verify(&scheme, request, now)?;
        // stripe-python: `timestamp < time.time() - tolerance` is too old; no upper bound.
        let signed_at = from_unix_seconds(parts.timestamp_s.ok_or(WebhookError::MissingSignature)?);
        if signed_at.unix_millis() < now.unix_millis().saturating_sub(TOLERANCE_S * 1000) {
            return Err(WebhookError::Stale);
        }
        self.parse_verified(&request.body).await
    }

    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        self.parse_verified(&recorded.body).await
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "application/json",
                body: "{\"received\":true}".into(),
            },
            AckFor::Refused(e) => WebhookAck {
                verdict: AckVerdict::Refused,
                content_type: "text/plain",
                body: e.to_string(),
            },
        }
    }
}

/// `Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>…][,v0=…]` over `{t}.{raw body}`.
struct StripeSignature<'a> {
    secret: &'a [u8],
}

impl WebhookScheme for StripeSignature<'_> {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let header = webhook::header(request, SIGNATURE_HEADER)?;
        let mut parts = SignedParts::default();
        for item in header.split(',').take(MAX_HEADER_ITEMS) {
            match item.trim().split_once('=') {
                Some(("t", t)) => {
                    parts.timestamp_s =
                        Some(t.parse().map_err(|_| WebhookError::MissingSignature)?);
                }
                Some(("v1", hex)) => parts
                    .signatures
                    .push(unhex(hex).ok_or(WebhookError::MissingSignature)?),
                // `v0` (test-mode legacy) and unknown schemes are ignored, as Stripe's SDKs do.
                _ => {}
            }
        }
        Ok(parts)
    }

    fn message(
        &self,
        request: &WebhookRequest,
        parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        let t = parts.timestamp_s.ok_or(WebhookError::MissingSignature)?;
        let mut message = format!("{t}.").into_bytes();
        message.extend_from_slice(&request.body);
        Ok(message)
    }

    fn verifier(&self) -> Verifier<'_> {
        Verifier::HmacSha256(self.secret)
    }

    fn tolerance_s(&self) -> Option<i64> {
        // One-sided (too old only), checked after verification in `verify_webhook`.
        None
    }
}

impl CardGatewayGateway {
    /// Read a verified event (live or recorded): the merchant check, then its meaning, with
    /// the look-ups it needs.
    async fn parse_verified(&self, body: &[u8]) -> Result<VerifiedWebhook, WebhookError> {
        let event = transformers::parse_event(body)?;
        if let Some(why) = self.foreign(&event) {
            tracing::warn!(provider = PROVIDER, event_id = %event.id, %why, "foreign stripe event");
            return Ok(VerifiedWebhook {
                event_id: event.id,
                event_type: event.event_type,
                events: Vec::new(),
                foreign: Some(why),
            });
        }
        let events = self.resolve(transformers::interpret(&event)?).await?;
        Ok(VerifiedWebhook {
            event_id: event.id,
            event_type: event.event_type,
            events,
            foreign: None,
        })
    }
}
