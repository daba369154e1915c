//! `mor_b`: Dodo Payments, a Merchant of Record, through Checkout Sessions and Standard Webhooks.
//!
//! Checkout: `POST /checkouts` (JSON, `Authorization: Bearer <API key>`) and a redirect to the
//! answer's `checkout_url`. Query: `GET /checkouts/{session_id}`, then `GET /payments/{id}` for
//! the amount once paid. Close: not in Dodo's API (sessions lapse after 24 hours). Cancel:
//! `PATCH /subscriptions/{id}` with `{"cancel_at_next_billing_date": true}`. Webhooks follow the
//! Standard Webhooks spec: `webhook-id`, `webhook-timestamp` (seconds) and `webhook-signature`
//! (space-separated `v1,<base64>`) = base64 HMAC-SHA256 of `{id}.{timestamp}.{raw body}` keyed
//! with the base64-decoded secret after `whsec_`, five minutes of tolerance. A `refund.succeeded`
//! or `dispute.lost` is followed by `GET /payments/{payment_id}` for the order or subscription
//! the payment paid; a `subscription.active` or `subscription.renewed` by `GET /payments`
//! (the subscription's succeeded payments around the period) for the charge that paid it.
//! When `businessId` is configured, a webhook whose envelope names another `business_id` is
//! `foreign` (acknowledged; nothing changes); Dodo's webhooks name no live or test mode (each
//! mode has its own endpoint secret).
//!
//! Refund: `GET /checkouts/{session_id}` for the order's payment, `GET /payments/{id}`, then
//! `POST /refunds` `{payment_id, items?: [{item_id, amount, tax_inclusive}], reason, metadata}`
//! (no `items` for the whole payment). Dodo's API takes no idempotency key (its SDK sends
//! none), so Tally's refund id goes in `metadata.tallyRefundId` and a refund of the payment
//! already carrying it is answered instead of asking again. Dodo's `refund_id` is the id its
//! `refund.succeeded` webhook carries.
//! Credential check: `GET /products?page_size=1&page_number=0`.
//! Automatic top-up: on-demand subscriptions, see [`on_demand`].
//! Wire formats and the event mapping are in [`transformers`]; `docs/providers/mor_b.md` has the
//! status table.

pub mod on_demand;
pub mod plan_change;
pub mod transformers;

use std::sync::Arc;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, Clock, CredentialCheck,
    CredentialMode, GatewayError, OffSessionCharge, OffSessionOutcome, PaymentEvent,
    PaymentGateway, PaymentRef, PaymentStatus, PlanChangeRequest, PlanChangeStarted,
    RecordedWebhook, RefundRequest, RefundStarted, SavedMethod, VerifiedWebhook, WebhookAck,
    WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{ProviderId, Timestamp};
use secrecy::{ExposeSecret, SecretBox, SecretString};
use serde::Deserialize;

use crate::shared::http::{HttpReply, HttpSettings, ProviderHttp};
use crate::shared::signing::unb64;
use crate::shared::{ConfigError, GatewayContext, TestModeSetting, names_host};
use crate::webhook::standard::{self, ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{Meaning, Payment, PaymentList, ProductPage, RefundPlan, path_id};

/// Dodo's live API.
pub const LIVE_BASE_URL: &str = "https://live.dodopayments.com";
/// Dodo's test-mode API (separate keys).
pub const TEST_BASE_URL: &str = "https://test.dodopayments.com";
/// Its host.
const TEST_HOST: &str = "test.dodopayments.com";
/// The product list, one product per page: the read `check_credentials` makes.
const PRODUCT_LIST_PATH: &str = "/products?page_size=1&page_number=0";
/// How far `webhook-timestamp` may be from now (the Standard Webhooks libraries' default).
pub const TOLERANCE_S: i64 = 300;
const PROVIDER: &str = "mor_b";
/// The most space-separated entries read from `webhook-signature` (a bound on parsing work).
const MAX_HEADER_ITEMS: usize = 32;

/// `[providers.mor_b]` in `tally.toml`. `Debug` shows the secrets as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MorBSettings {
    /// `apiKey`: the API key of the live or test-mode account. Required.
    pub api_key: SecretString,
    /// `webhookSecret`: the webhook endpoint's signing secret, `whsec_<base64>`. Required.
    pub webhook_secret: SecretString,
    /// `testMode`: use Dodo's test-mode API when `baseUrl` is not set. Default `false`.
    #[serde(default)]
    pub test_mode: bool,
    /// `baseUrl`: overrides the live or test-mode URL.
    #[serde(default)]
    pub base_url: Option<String>,
    /// `timeoutMs`: total time per request; defaults to the shared HTTP default.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `businessId`: `bus_…`, the business whose webhooks are Tally's. Optional; when set, a
    /// webhook naming another `business_id` is acknowledged and changes nothing.
    #[serde(default)]
    pub business_id: Option<String>,
    /// `onDemandProductId`: `pdt_…`, a subscription product for on-demand subscriptions. Optional;
    /// when set, a credits pack's buyer may keep the card for automatic top-ups: the consented
    /// checkout sells this product on demand at the pack's price (see [`on_demand`]).
    #[serde(default)]
    pub on_demand_product_id: Option<String>,
}

impl MorBSettings {
    /// Settings from plain values (the sandbox's published test credentials, tests).
    #[must_use]
    pub fn new(api_key: &str, webhook_secret: &str, base_url: Option<String>) -> Self {
        Self {
            api_key: SecretString::from(api_key.to_owned()),
            webhook_secret: SecretString::from(webhook_secret.to_owned()),
            test_mode: false,
            base_url,
            timeout_ms: None,
            business_id: None,
            on_demand_product_id: None,
        }
    }

    /// Where the API is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        let default = if self.test_mode {
            TEST_BASE_URL
        } else {
            LIVE_BASE_URL
        };
        HttpSettings::with_timeout(self.base_url.as_deref().unwrap_or(default), self.timeout_ms)
    }

    /// The setting that makes these test-mode credentials: `testMode = true`, or a base URL on
    /// Dodo's test-mode host.
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        if self.test_mode {
            return Some(TestModeSetting::new(
                "testMode",
                "is true: Dodo Payments' test-mode API",
            ));
        }
        self.base_url
            .as_deref()
            .is_some_and(|url| names_host(url, TEST_HOST))
            .then_some(TestModeSetting::new(
                "baseUrl",
                "is Dodo Payments' test-mode API (test.dodopayments.com)",
            ))
    }
}

/// The Dodo Payments gateway.
pub struct MorBGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    api_key: SecretString,
    webhook_key: SecretBox<[u8]>,
    business_id: Option<String>,
    /// The subscription product of on-demand subscriptions, if automatic top-up is on.
    on_demand_product: Option<String>,
    /// Whether the settings name Dodo's test mode (the mode a credential check reports: Dodo's
    /// answers do not say).
    test_mode: bool,
}

impl std::fmt::Debug for MorBGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MorBGateway")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

impl MorBGateway {
    /// A gateway for `settings`, talking through `context.http`.
    ///
    /// # Errors
    /// An empty API key, a webhook secret that is not `whsec_` + base64, or a business id
    /// that is not an id.
    pub fn new(settings: &MorBSettings, context: GatewayContext) -> Result<Self, ConfigError> {
        if settings.api_key.expose_secret().trim().is_empty() {
            return Err(ConfigError::new(PROVIDER, "apiKey", "must not be empty"));
        }
        if let Some(business_id) = &settings.business_id
            && path_id(business_id).is_err()
        {
            return Err(ConfigError::new(
                PROVIDER,
                "businessId",
                "must be an id such as bus_…",
            ));
        }
        if let Some(product) = &settings.on_demand_product_id
            && path_id(product).is_err()
        {
            return Err(ConfigError::new(
                PROVIDER,
                "onDemandProductId",
                "must be a product id such as pdt_…",
            ));
        }
        let key = standard::key(settings.webhook_secret.expose_secret()).ok_or_else(|| {
            ConfigError::new(
                PROVIDER,
                "webhookSecret",
                "must be the endpoint's signing secret (whsec_ and base64)",
            )
        })?;
        Ok(Self {
            http: context.http.for_provider(ProviderId::MorB),
            clock: context.clock,
            sandbox: context.sandbox,
            api_key: settings.api_key.clone(),
            webhook_key: SecretBox::from(key.into_boxed_slice()),
            business_id: settings.business_id.clone(),
            on_demand_product: settings.on_demand_product_id.clone(),
            test_mode: settings.test_mode().is_some(),
        })
    }

    async fn get(&self, path: &str) -> Result<HttpReply, GatewayError> {
        let request = self
            .http
            .get(path)
            .bearer_auth(self.api_key.expose_secret());
        self.http.send(request).await
    }

    /// `PATCH /subscriptions/{id}` with `body`: how Dodo cancels, ends and resumes a
    /// subscription.
    async fn patch_subscription(
        &self,
        provider_subscription_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), GatewayError> {
        let path = format!("/subscriptions/{}", path_id(provider_subscription_id)?);
        let request = self
            .http
            .request(reqwest::Method::PATCH, &path)
            .bearer_auth(self.api_key.expose_secret())
            .json(body);
        let _: transformers::Subscription = transformers::read(self.http.send(request).await?)?;
        Ok(())
    }

    /// The payment of an order's reference: a top-up's charge is one (`pay_…`); a checkout
    /// session's is read from it (`GET /checkouts/{id}`), refused while there is none.
    async fn payment_of(&self, reference: &str) -> Result<String, GatewayError> {
        if reference.starts_with("pay_") {
            return Ok(path_id(reference)?.to_owned());
        }
        let status: transformers::CheckoutSessionStatus = transformers::read(
            self.get(&format!("/checkouts/{}", path_id(reference)?))
                .await?,
        )?;
        status.payment_id.ok_or_else(|| {
            GatewayError::Rejected("the order's checkout has no payment to refund".into())
        })
    }

    /// A top-up's charge made before under the same key, if any: the on-demand subscription's
    /// payments of the last week, one carrying the key (Dodo takes no idempotency key).
    async fn charged_before(
        &self,
        subscription_id: &str,
        key: &str,
    ) -> Result<Option<String>, GatewayError> {
        let query = on_demand::charges_query(subscription_id, self.clock.now());
        let request = self
            .http
            .get("/payments")
            .query(&query)
            .bearer_auth(self.api_key.expose_secret());
        let payments: PaymentList = transformers::read(self.http.send(request).await?)?;
        Ok(on_demand::charged_before(subscription_id, key, &payments.items).map(str::to_owned))
    }

    async fn fetch_payment(&self, payment_id: &str) -> Result<Payment, GatewayError> {
        transformers::read(
            self.get(&format!("/payments/{}", path_id(payment_id)?))
                .await?,
        )
    }

    /// The payment a refund or dispute names. Refusing makes Dodo retry the webhook later,
    /// when the API may answer again.
    async fn payment_for_webhook(&self, payment_id: &str) -> Result<Payment, WebhookError> {
        self.fetch_payment(payment_id)
            .await
            .map_err(|_| WebhookError::Malformed("the named payment cannot be read now".into()))
    }

    /// The activation or renewal of a subscription event, with the charge that paid the period:
    /// Dodo's subscription payload names no payment, so the subscription's succeeded payments
    /// made around the period are read (`GET /payments`). Refused (and retried by Dodo) when
    /// they cannot be read now.
    async fn period_event(
        &self,
        change: transformers::PeriodChange,
        subscription: &transformers::Subscription,
        at: Timestamp,
    ) -> Result<PaymentEvent, WebhookError> {
        let period = subscription.period().map_err(WebhookError::Malformed)?;
        path_id(&subscription.subscription_id)
            .map_err(|_| WebhookError::Malformed("not a Dodo subscription id".into()))?;
        let query = transformers::period_payments_query(&subscription.subscription_id, period);
        let request = self
            .http
            .get("/payments")
            .query(&query)
            .bearer_auth(self.api_key.expose_secret());
        let unreadable =
            |_| WebhookError::Malformed("subscription payments cannot be read now".into());
        let reply = self.http.send(request).await.map_err(unreadable)?;
        let payments: PaymentList = transformers::read(reply).map_err(unreadable)?;
        transformers::subscription_event(change, subscription, &payments.items, at)
    }
}

#[async_trait]
impl PaymentGateway for MorBGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::MorB
    }

    fn is_sandbox(&self) -> bool {
        self.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        // The sandbox cannot know the endpoint registered in a dashboard, so it is told.
        let notify_url = self.sandbox.then_some(request.notify_url.as_str());
        let mut body = transformers::checkout_request(request, notify_url)?;
        if request.save_method {
            let product = self.on_demand_product.as_deref().ok_or_else(|| {
                GatewayError::Rejected("mor_b has no onDemandProductId to keep methods".into())
            })?;
            on_demand::consent(&mut body, product, request)?;
        }
        let http_request = self
            .http
            .post("/checkouts")
            .bearer_auth(self.api_key.expose_secret())
            .json(&body);
        let session: transformers::CheckoutSessionResponse =
            transformers::read(self.http.send(http_request).await?)?;
        let url = session.checkout_url.ok_or_else(|| {
            GatewayError::BadResponse("checkout session has no checkout_url".into())
        })?;
        Ok(Checkout {
            provider_reference: Some(session.session_id),
            target: CheckoutTarget::Redirect(url),
        })
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // One product of the list: the least a key can read, and nothing changes.
        let _: ProductPage = transformers::read(self.get(PRODUCT_LIST_PATH).await?)?;
        let mode = if self.test_mode {
            CredentialMode::Test
        } else {
            CredentialMode::Live
        };
        Ok(CredentialCheck {
            mode,
            detail: "GET /products listed the business's products".to_owned(),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let reference = payment
            .provider_reference
            .as_deref()
            .ok_or_else(|| GatewayError::Rejected("order has no checkout session id".into()))?;
        // A top-up's charge is a payment made without a session.
        if reference.starts_with("pay_") {
            return self
                .fetch_payment(reference)
                .await?
                .payment_status(self.clock.now());
        }
        let status: transformers::CheckoutSessionStatus = transformers::read(
            self.get(&format!("/checkouts/{}", path_id(reference)?))
                .await?,
        )?;
        let Some(payment_id) = status.payment_id else {
            return Ok(PaymentStatus::Pending);
        };
        // The session tells whether; the payment tells how much.
        self.fetch_payment(&payment_id)
            .await?
            .payment_status(self.clock.now())
    }

    async fn close_payment(&self, _payment: &PaymentRef) -> Result<(), GatewayError> {
        Err(GatewayError::NotSupported)
    }

    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let reference = request
            .payment
            .provider_reference
            .as_deref()
            .ok_or_else(|| GatewayError::Rejected("order has no checkout session id".into()))?;
        let payment_id = self.payment_of(reference).await?;
        let payment = self.fetch_payment(&payment_id).await?;
        if payment.payment_id != payment_id {
            return Err(GatewayError::BadResponse(
                "Dodo answered another payment".into(),
            ));
        }
        let body = match transformers::refund_plan(request, &payment)? {
            RefundPlan::Existing(started) => return Ok(started),
            RefundPlan::Create(body) => body,
        };
        let http_request = self
            .http
            .post("/refunds")
            .bearer_auth(self.api_key.expose_secret())
            .json(&body);
        let refund: transformers::Refund = transformers::read(self.http.send(http_request).await?)?;
        transformers::refund_started(&refund, &payment_id)
    }

    fn saves_methods(&self) -> bool {
        self.on_demand_product.is_some()
    }

    /// `POST /subscriptions/{id}/charge` on the saved on-demand subscription, unless a payment
    /// of it already carries the top-up's key; then the payment is read for the outcome (see
    /// [`on_demand`]).
    async fn charge_saved_method(
        &self,
        charge: &OffSessionCharge,
    ) -> Result<OffSessionOutcome, GatewayError> {
        if self.on_demand_product.is_none() {
            return Err(GatewayError::NotSupported);
        }
        let subscription = on_demand::subscription_of(charge)?;
        // The sandbox cannot know the endpoint registered in a dashboard, so it is told.
        let notify_url = self.sandbox.then_some(charge.notify_url.as_str());
        let body = on_demand::charge_body(charge, notify_url)?;
        let key = on_demand::marker(charge)?;
        let payment_id = match self.charged_before(subscription, &key).await? {
            Some(payment_id) => payment_id,
            None => {
                let request = self
                    .http
                    .post(&format!("/subscriptions/{subscription}/charge"))
                    .bearer_auth(self.api_key.expose_secret())
                    .json(&body);
                let answer: on_demand::ChargeAnswer =
                    transformers::read(self.http.send(request).await?)?;
                answer.payment_id
            }
        };
        path_id(&payment_id).map_err(|_| GatewayError::BadResponse("not a payment id".into()))?;
        match self.fetch_payment(&payment_id).await {
            Ok(payment) => on_demand::outcome(&payment, &payment_id),
            // Charged: the payment's webhook settles it, or the next attempt finds it.
            Err(GatewayError::Unreachable(_) | GatewayError::BadResponse(_)) => {
                Ok(OffSessionOutcome::Accepted {
                    provider_reference: Some(payment_id),
                })
            }
            Err(e) => Err(e),
        }
    }

    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        self.patch_subscription(
            provider_subscription_id,
            &transformers::cancel_at_period_end_body(),
        )
        .await
    }

    /// `PATCH /subscriptions/{id}` with `{"status": "cancelled"}`: Dodo ends it now and sends
    /// `subscription.cancelled`.
    async fn cancel_subscription_now(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        self.patch_subscription(
            provider_subscription_id,
            &serde_json::json!({ "status": "cancelled" }),
        )
        .await
    }

    /// A saved method is an on-demand subscription (its `method_ref`): it is ended with
    /// `PATCH /subscriptions/{id}` `{"status":"cancelled"}`, after which Dodo charges it no
    /// more (<https://docs.dodopayments.com/api-reference/subscriptions/patch-subscriptions>).
    async fn forget_saved_method(&self, method: &SavedMethod) -> Result<(), GatewayError> {
        if self.on_demand_product.is_none() {
            return Err(GatewayError::NotSupported);
        }
        self.cancel_subscription_now(&method.method_ref).await
    }

    async fn change_subscription_plan(
        &self,
        request: &PlanChangeRequest,
    ) -> Result<PlanChangeStarted, GatewayError> {
        let body = plan_change::change_plan_body(request)?;
        let path = format!(
            "/subscriptions/{}/change-plan",
            path_id(&request.provider_subscription_id)?
        );
        let http_request = self
            .http
            .post(&path)
            .bearer_auth(self.api_key.expose_secret())
            .json(&body);
        let reply = self.http.send(http_request).await?;
        // Dodo answers 200 with no body; an error body is read as for any other call.
        if !(200..300).contains(&reply.status) {
            let _: serde_json::Value = transformers::read(reply)?;
        }
        Ok(PlanChangeStarted::Accepted)
    }

    async fn resume_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        self.patch_subscription(provider_subscription_id, &plan_change::resume_body())
            .await
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let scheme = StandardWebhooks {
            key: self.webhook_key.expose_secret(),
        };
        let parts = webhook::verify(&scheme, request, self.clock.now())?;
        let event_id = parts
            .extra(ID_HEADER)
            .ok_or(WebhookError::MissingSignature)?
            .to_owned();
        self.parse_verified(event_id, &request.body).await
    }

    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        self.parse_verified(recorded.event_id.clone(), &recorded.body)
            .await
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

/// Standard Webhooks: `v1,<base64>` entries over `{webhook-id}.{webhook-timestamp}.{body}`.
struct StandardWebhooks<'a> {
    key: &'a [u8],
}

impl WebhookScheme for StandardWebhooks<'_> {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let id = webhook::header(request, ID_HEADER)?;
        let timestamp = webhook::header(request, TIMESTAMP_HEADER)?;
        let signatures = webhook::header(request, SIGNATURE_HEADER)?;
        if id.is_empty() || id.contains('.') {
            return Err(WebhookError::MissingSignature);
        }
        let mut parts = SignedParts {
            timestamp_s: Some(
                timestamp
                    .trim()
                    .parse()
                    .map_err(|_| WebhookError::MissingSignature)?,
            ),
            signatures: Vec::new(),
            extras: vec![(ID_HEADER.to_owned(), id.to_owned())],
        };
        for entry in signatures
            .split(' ')
            .filter(|e| !e.is_empty())
            .take(MAX_HEADER_ITEMS)
        {
            // Other versions (`v1a` asymmetric, later ones) are skipped, as the libraries do.
            if let Some(("v1", signature)) = entry.split_once(',') {
                parts
                    .signatures
                    .push(unb64(signature).ok_or(WebhookError::MissingSignature)?);
            }
        }
        Ok(parts)
    }

    fn message(
        &self,
        request: &WebhookRequest,
        parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        let id = parts
            .extra(ID_HEADER)
            .ok_or(WebhookError::MissingSignature)?;
        let timestamp = parts.timestamp_s.ok_or(WebhookError::MissingSignature)?;
        Ok(standard::message(id, timestamp, &request.body))
    }

    fn verifier(&self) -> Verifier<'_> {
        Verifier::HmacSha256(self.key)
    }

    fn tolerance_s(&self) -> Option<i64> {
        Some(TOLERANCE_S)
    }
}

impl MorBGateway {
    /// Read a verified event (live or recorded) whose id the `webhook-id` header gave: the
    /// business check, then its meaning, with the look-ups it needs from Dodo's API.
    async fn parse_verified(
        &self,
        event_id: String,
        body: &[u8],
    ) -> Result<VerifiedWebhook, WebhookError> {
        let envelope = transformers::parse_envelope(body)?;
        // Checked before anything is read from Dodo's API for the event.
        if let Some(why) = envelope.foreign(self.business_id.as_deref()) {
            return Ok(VerifiedWebhook {
                event_id,
                event_type: envelope.event_type,
                events: Vec::new(),
                foreign: Some(why),
            });
        }
        let events = match transformers::meaning_of(&envelope)? {
            Meaning::Events(events) => events,
            Meaning::Refund(refund, at) => {
                let payment = self.payment_for_webhook(&refund.payment_id).await?;
                vec![transformers::refunded(&refund, &payment, at)?]
            }
            Meaning::DisputeLost(dispute, at) => {
                let payment = self.payment_for_webhook(&dispute.payment_id).await?;
                vec![transformers::dispute_lost(&dispute, &payment, at)?]
            }
            Meaning::Period(change, subscription, at) => {
                vec![self.period_event(change, &subscription, at).await?]
            }
        };
        Ok(VerifiedWebhook {
            event_id,
            event_type: envelope.event_type,
            events,
            foreign: None,
        })
    }
}
