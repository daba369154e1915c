//! `mor_a`: Creem, a Merchant of Record (docs: <https://docs.creem.io>).
//!
//! Every plan type is a Creem product (`morAProductId`); whether a checkout is a one-time payment
//! or a subscription is a property of that product. Requests carry `x-api-key`; test mode is a
//! separate host with its own keys.
//!
//! Webhooks are verified as Creem's official SDK verifies them: when `webhook-id`,
//! `webhook-timestamp` and `webhook-signature` are all present, as Standard Webhooks (HMAC-SHA256
//! over `{id}.{timestamp}.{body}` keyed with the base64 after `whsec_`, five minutes either way);
//! otherwise by `creem-signature`, the hex HMAC-SHA256 of the raw body under the webhook secret
//! string, which has no timestamp (replays are stopped by deduplicating on the event id). A
//! verified event whose object's `mode` is not the API key's environment is foreign. Refunds and
//! disputes whose checkout or transaction, and renewals whose amount, the event gives only as an
//! id are completed by reading Creem's API before they are parsed. Creem's API has no refund
//! endpoint: `refund` is not supported. Credential check: `GET /v1/products/search` with one
//! product per page, whose `mode` is the key's environment.
//!
//! Wire formats and the event mapping live in [`transformers`]; `docs/providers/mor_a.md` has the
//! status table.

pub mod plan_change;
pub mod transformers;

use std::sync::Arc;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, Clock, CredentialCheck,
    CredentialMode, GatewayError, PaymentGateway, PaymentRef, PaymentStatus, PlanChangeRequest,
    PlanChangeStarted, RecordedWebhook, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{Duration, PlanType, ProviderId};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::http::{default_connect_timeout_ms, default_timeout_ms};
use crate::shared::signing::{unb64, unhex};
use crate::shared::wire::{clip, is_web_url, path_id};
use crate::shared::{
    ConfigError, GatewayContext, HttpSettings, ProviderHttp, TestModeSetting, names_host,
};
use crate::webhook::standard::{self, ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use serde_json::Value;
use transformers::{
    CancelSubscription, CheckoutCustomer, CheckoutEntity, CheckoutMetadata, CreateCheckout,
    CreemError, Lookup, ProductPage,
};

/// Creem's production API.
pub const PRODUCTION_BASE_URL: &str = "https://api.creem.io";
/// Creem's test-mode API (test keys, no real charges).
pub const TEST_BASE_URL: &str = "https://test-api.creem.io";
/// Its host.
const TEST_HOST: &str = "test-api.creem.io";
/// The product search: the read `check_credentials` makes, one product at most.
const PRODUCT_SEARCH_PATH: &str = "/v1/products/search";
/// The largest webhook body accepted, in bytes.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;
/// The longest subscription id accepted before it goes into a URL path.
const MAX_SUBSCRIPTION_ID_CHARS: usize = 128;
/// How far `webhook-timestamp` may be from now, either way (the standardwebhooks libraries').
pub const STANDARD_WEBHOOKS_TOLERANCE_S: i64 = 300;
/// The most `webhook-signature` entries read (a bound on parsing work).
const MAX_SIGNATURE_ENTRIES: usize = 16;
/// The most ids an event may need read from Creem's API.
const MAX_LOOKUPS: usize = 3;
const PROVIDER: &str = "mor_a";

/// `[providers.mor_a]` in `tally.toml`. `Debug` shows the secrets as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MorASettings {
    /// `apiKey`: the API key (`creem_…`, or `creem_test_…` in test mode).
    pub api_key: SecretString,
    /// `webhookSecret`: the signing secret shown with the webhook endpoint in the dashboard.
    pub webhook_secret: SecretString,
    /// `testMode`: use `https://test-api.creem.io` (ignored when `baseUrl` is set).
    #[serde(default)]
    pub test_mode: bool,
    /// `baseUrl`: overrides the API host (the sandbox, a proxy).
    #[serde(default)]
    pub base_url: Option<String>,
    /// `timeoutMs`: total time for one request.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// `connectTimeoutMs`: time to connect.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
}

impl MorASettings {
    /// Settings with the default host and timeouts.
    #[must_use]
    pub fn new(api_key: impl Into<String>, webhook_secret: impl Into<String>) -> Self {
        Self {
            api_key: SecretString::from(api_key.into()),
            webhook_secret: SecretString::from(webhook_secret.into()),
            test_mode: false,
            base_url: None,
            timeout_ms: default_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
        }
    }

    /// The API host in use.
    #[must_use]
    pub fn base_url(&self) -> String {
        match (&self.base_url, self.test_mode) {
            (Some(url), _) => url.trim_end_matches('/').to_owned(),
            (None, true) => TEST_BASE_URL.to_owned(),
            (None, false) => PRODUCTION_BASE_URL.to_owned(),
        }
    }

    /// Where the API is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        HttpSettings {
            base_url: self.base_url(),
            timeout_ms: self.timeout_ms,
            connect_timeout_ms: self.connect_timeout_ms,
        }
    }

    /// The setting that makes these test-mode credentials: `testMode = true`, a test-mode key
    /// (`creem_test_…`), or a base URL on Creem's test-mode host.
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        if self.test_mode {
            return Some(TestModeSetting::new(
                "testMode",
                "is true: Creem's test-mode API",
            ));
        }
        if self
            .api_key
            .expose_secret()
            .trim()
            .starts_with("creem_test_")
        {
            return Some(TestModeSetting::new(
                "apiKey",
                "is a test-mode key (creem_test_…)",
            ));
        }
        self.base_url
            .as_deref()
            .is_some_and(|url| names_host(url, TEST_HOST))
            .then_some(TestModeSetting::new(
                "baseUrl",
                "is Creem's test-mode API (test-api.creem.io)",
            ))
    }
}

/// The Creem gateway.
pub struct MorAGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    api_key: SecretString,
    scheme: CreemSignature,
    /// The Standard Webhooks key (base64 after `whsec_`), when the secret has that form.
    standard: Option<StandardWebhooks>,
    /// Whether the key is a test-mode key: events must then be `test` or `sandbox`, else `prod`.
    test_mode: bool,
}

impl std::fmt::Debug for MorAGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MorAGateway")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

impl MorAGateway {
    /// A gateway for `settings`.
    ///
    /// # Errors
    /// An empty key or secret, a test-mode key against the live host, or a base URL that is not
    /// HTTP(S); the error names the setting, never its value.
    pub fn new(settings: &MorASettings, context: GatewayContext) -> Result<Self, ConfigError> {
        let api_key = settings.api_key.expose_secret().trim();
        if api_key.is_empty() || !api_key.chars().all(|c| c.is_ascii_graphic()) {
            return Err(ConfigError::new(
                PROVIDER,
                "apiKey",
                "must be a non-empty key without spaces",
            ));
        }
        if api_key.starts_with("creem_test_") && settings.base_url.is_none() && !settings.test_mode
        {
            return Err(ConfigError::new(
                PROVIDER,
                "apiKey",
                "is a test-mode key; set testMode = true",
            ));
        }
        if settings.webhook_secret.expose_secret().is_empty() {
            return Err(ConfigError::new(
                PROVIDER,
                "webhookSecret",
                "must not be empty",
            ));
        }
        let base_url = settings.base_url();
        if !is_web_url(&base_url) {
            return Err(ConfigError::new(
                PROVIDER,
                "baseUrl",
                "must be an http(s) URL",
            ));
        }
        let secret = settings.webhook_secret.expose_secret();
        let standard = standard::key(secret).map(|key| StandardWebhooks { key });
        let test_mode = context.sandbox
            || settings.test_mode
            || api_key.starts_with("creem_test_")
            || !api_key.starts_with("creem_");
        Ok(Self {
            http: context.http.for_provider(ProviderId::MorA),
            clock: context.clock,
            sandbox: context.sandbox,
            api_key: SecretString::from(api_key.to_owned()),
            scheme: CreemSignature {
                secret: settings.webhook_secret.clone(),
            },
            standard,
            test_mode,
        })
    }

    /// Verify with Standard Webhooks when its three headers are present (and the secret is a
    /// Standard Webhooks secret), else with `creem-signature`, as Creem's SDK does.
    fn verify_signature(&self, request: &WebhookRequest) -> Result<(), WebhookError> {
        let standard_headers = [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER]
            .iter()
            .all(|name| request.headers.get(*name).is_some_and(|v| !v.is_empty()));
        match self.standard.as_ref() {
            Some(standard) if standard_headers => {
                webhook::verify(standard, request, self.clock.now())?;
            }
            _ => {
                webhook::verify(&self.scheme, request, self.clock.now())?;
            }
        }
        Ok(())
    }

    /// `GET {path}?{name}={id}`: one of Creem's retrieve calls, as JSON.
    async fn retrieve(&self, path: &str, name: &str, id: &str) -> Result<Value, GatewayError> {
        let id = path_segment(id)?;
        let call = self.authorized(self.http.get(path)).query(&[(name, id)]);
        let reply = self.http.send(call).await?;
        if reply.status == 429 {
            return Err(GatewayError::Unreachable("HTTP 429".into()));
        }
        reply.success()?.json()
    }

    /// Read from Creem what the event names only by id, and put it into the event. A refusal
    /// (not found) leaves the event as it is; a transient failure refuses the webhook, so that
    /// Creem sends it again.
    async fn resolve_ids(&self, envelope: &mut Value) -> Result<(), WebhookError> {
        for lookup in transformers::lookups(envelope)
            .into_iter()
            .take(MAX_LOOKUPS)
        {
            let found = match &lookup {
                Lookup::Checkout(id) => self.retrieve("/v1/checkouts", "checkout_id", id).await,
                Lookup::Transaction(id) | Lookup::LastTransaction(id) => {
                    self.retrieve("/v1/transactions", "transaction_id", id)
                        .await
                }
                Lookup::Product(id) => self.retrieve("/v1/products", "product_id", id).await,
            };
            match found {
                Ok(found) => transformers::apply(envelope, &lookup, found),
                Err(GatewayError::Rejected(reason)) => {
                    tracing::warn!(provider = PROVIDER, ?lookup, %reason, "creem refused a lookup; the event is read as sent");
                }
                Err(error) => {
                    tracing::warn!(provider = PROVIDER, ?lookup, %error, "creem lookup failed; refusing the webhook so that creem retries");
                    return Err(WebhookError::Malformed(format!(
                        "lookup failed, creem will retry: {error}"
                    )));
                }
            }
        }
        Ok(())
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request
            .header("x-api-key", self.api_key.expose_secret())
            .header("accept", "application/json")
    }

    fn checkout_body(&self, request: &CheckoutRequest) -> Result<CreateCheckout, GatewayError> {
        let product_id = request
            .plan
            .provider_refs()
            .get(ProviderId::MorA)
            .map(str::to_owned)
            .ok_or_else(|| GatewayError::Rejected("plan has no morAProductId".into()))?;
        let price = request.snapshot.price;
        let interval_months = match (request.snapshot.plan_type, request.snapshot.duration) {
            (PlanType::Recurring, Some(Duration::Months(m))) => Some(m.get().to_string()),
            _ => None,
        };
        Ok(CreateCheckout {
            product_id,
            request_id: request.order_id.as_str().to_owned(),
            success_url: request.success_url.clone(),
            customer: request
                .customer_email
                .clone()
                .map(|email| CheckoutCustomer { email }),
            metadata: CheckoutMetadata {
                order_id: request.order_id.as_str().to_owned(),
                amount_minor: price.amount_minor().to_string(),
                currency: price.currency().code().to_owned(),
                interval_months,
                notify_url: self.sandbox.then(|| request.notify_url.clone()),
            },
        })
    }
}

/// Creem's webhook signature: `creem-signature: <hex HMAC-SHA256(secret, raw body)>`.
struct CreemSignature {
    secret: SecretString,
}

impl WebhookScheme for CreemSignature {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let header = webhook::header(request, "creem-signature")?;
        let signature = unhex(header.trim()).ok_or(WebhookError::MissingSignature)?;
        Ok(SignedParts {
            timestamp_s: None,
            signatures: vec![signature],
            extras: Vec::new(),
        })
    }

    fn message(
        &self,
        request: &WebhookRequest,
        _parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        Ok(request.body.clone())
    }

    fn verifier(&self) -> Verifier<'_> {
        Verifier::HmacSha256(self.secret.expose_secret().as_bytes())
    }

    fn tolerance_s(&self) -> Option<i64> {
        // Creem signs no timestamp; deduplication on the event id stops replays.
        None
    }
}

/// Standard Webhooks, as Creem's SDK checks them with the `standardwebhooks` library:
/// `webhook-signature` holds space-separated `v1,<base64>` entries over
/// `{webhook-id}.{webhook-timestamp}.{raw body}`, keyed with the secret's base64 part.
struct StandardWebhooks {
    key: Vec<u8>,
}

impl WebhookScheme for StandardWebhooks {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let id = webhook::header(request, ID_HEADER)?;
        let timestamp = webhook::header(request, TIMESTAMP_HEADER)?;
        let signatures = webhook::header(request, SIGNATURE_HEADER)?;
        if id.is_empty() {
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
            .take(MAX_SIGNATURE_ENTRIES)
        {
            // Other versions (`v1a`, later ones) are skipped, as the library does.
            if let Some(("v1", signature)) = entry.split_once(',')
                && let Some(signature) = unb64(signature)
            {
                parts.signatures.push(signature);
            }
        }
        parts.signatures.truncate(webhook::MAX_SIGNATURES);
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
        Verifier::HmacSha256(&self.key)
    }

    fn tolerance_s(&self) -> Option<i64> {
        // standardwebhooks: `now - t > 300` is too old, `t > now + 300` too new.
        Some(STANDARD_WEBHOOKS_TOLERANCE_S)
    }
}

/// A Creem id safe to put in a URL path or query.
fn path_segment(id: &str) -> Result<&str, GatewayError> {
    path_id(id, MAX_SUBSCRIPTION_ID_CHARS, &['_', '-'])
        .ok_or_else(|| GatewayError::Rejected("not a creem id".into()))
}

#[async_trait]
impl PaymentGateway for MorAGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::MorA
    }

    fn is_sandbox(&self) -> bool {
        self.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        let body = self.checkout_body(request)?;
        let call = self.authorized(self.http.post("/v1/checkouts"));
        let reply = self.http.send(call.json(&body)).await?.success()?;
        let checkout: CheckoutEntity = reply.json()?;
        let url = checkout
            .checkout_url
            .filter(|u| is_web_url(u))
            .ok_or_else(|| GatewayError::BadResponse("checkout without a checkout_url".into()))?;
        Ok(Checkout {
            provider_reference: Some(checkout.id),
            target: CheckoutTarget::Redirect(url),
        })
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // Searching the products, one per page, reads the least and changes nothing.
        let call = self
            .authorized(self.http.get(PRODUCT_SEARCH_PATH))
            .query(&[("page_number", "1"), ("page_size", "1")]);
        let reply = self.http.send(call).await?;
        if reply.status == 429 {
            return Err(GatewayError::Unreachable("HTTP 429".into()));
        }
        let page: ProductPage = reply.decode(CreemError::describe)?;
        // A product names its environment; with none yet, the key's own mode says.
        let mode = match page.mode() {
            Some(true) => CredentialMode::Live,
            Some(false) => CredentialMode::Test,
            None if self.test_mode => CredentialMode::Test,
            None => CredentialMode::Live,
        };
        Ok(CredentialCheck {
            mode,
            detail: format!("GET {PRODUCT_SEARCH_PATH} listed the store's products"),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        // Creem looks checkouts up by their id only; without one there is nothing to ask.
        let Some(checkout_id) = payment.provider_reference.as_deref() else {
            return Err(GatewayError::NotSupported);
        };
        let call = self
            .authorized(self.http.get("/v1/checkouts"))
            .query(&[("checkout_id", checkout_id)]);
        let reply = self.http.send(call).await?.success()?;
        let checkout: CheckoutEntity = reply.json()?;
        transformers::payment_status(&checkout, self.clock.now())
    }

    async fn close_payment(&self, _payment: &PaymentRef) -> Result<(), GatewayError> {
        // Creem has no call to close a checkout; an unpaid one simply expires.
        Err(GatewayError::NotSupported)
    }

    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let id = path_segment(provider_subscription_id)?;
        let call = self
            .authorized(self.http.post(&format!("/v1/subscriptions/{id}/cancel")))
            .json(&CancelSubscription::at_period_end());
        self.http.send(call).await?.success()?;
        Ok(())
    }

    /// `POST /v1/subscriptions/{id}/cancel` with `mode: immediate`.
    async fn cancel_subscription_now(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let id = path_segment(provider_subscription_id)?;
        let call = self
            .authorized(self.http.post(&format!("/v1/subscriptions/{id}/cancel")))
            .json(&CancelSubscription::immediate());
        self.http.send(call).await?.success()?;
        Ok(())
    }

    async fn change_subscription_plan(
        &self,
        request: &PlanChangeRequest,
    ) -> Result<PlanChangeStarted, GatewayError> {
        let id = path_segment(&request.provider_subscription_id)?;
        let body = plan_change::upgrade_body(request, self.sandbox)?;
        let call = self
            .authorized(self.http.post(&format!("/v1/subscriptions/{id}/upgrade")))
            .json(&body);
        self.http.send(call).await?.success()?;
        Ok(PlanChangeStarted::Accepted)
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if request.body.len() > MAX_WEBHOOK_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        self.verify_signature(request)?;
        self.parse_verified(&request.body).await
    }

    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if recorded.body.len() > MAX_WEBHOOK_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        self.parse_verified(&recorded.body).await
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        // Creem wants a 200; anything else is retried (30 s, 1 min, 5 min, 1 h).
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "application/json",
                body: r#"{"received":true}"#.into(),
            },
            AckFor::Refused(_) => WebhookAck {
                verdict: AckVerdict::Refused,
                content_type: "application/json",
                body: r#"{"error":"invalid webhook"}"#.into(),
            },
        }
    }
}

impl MorAGateway {
    /// Read a verified event (live or recorded): the mode check, then its meaning, with the
    /// look-ups it needs (a renewal's amount).
    async fn parse_verified(&self, body: &[u8]) -> Result<VerifiedWebhook, WebhookError> {
        let mut envelope = transformers::envelope_value(body)?;
        if let Some(why) = transformers::foreign_mode(&envelope, self.test_mode) {
            let text = |key: &str| {
                clip(
                    envelope
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    200,
                )
            };
            let (event_id, event_type) = (text("id"), text("eventType"));
            if event_id.is_empty() {
                return Err(WebhookError::Malformed("event id missing".into()));
            }
            tracing::warn!(provider = PROVIDER, %event_id, %why, "foreign creem event");
            return Ok(VerifiedWebhook {
                event_id,
                event_type,
                events: Vec::new(),
                foreign: Some(why),
            });
        }
        self.resolve_ids(&mut envelope).await?;
        let parsed = transformers::parse_envelope(envelope)?;
        Ok(VerifiedWebhook {
            event_id: parsed.event_id,
            event_type: parsed.event_type,
            events: parsed.events,
            foreign: None,
        })
    }
}
