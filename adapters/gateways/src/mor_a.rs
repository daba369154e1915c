//! `mor_a`: Creem, a Merchant of Record (docs: <https://docs.creem.io>).
//!
//! Every plan type is a Creem product (`morAProductId`); whether a checkout is a one-time payment
//! or a subscription is a property of that product. Requests carry `x-api-key`; test mode is a
//! separate host with its own keys. Webhooks carry `creem-signature`, the hex HMAC-SHA256 of the
//! raw body under the webhook secret, and no timestamp: freshness cannot be checked, so replays
//! are stopped by deduplicating on the event id (`evt_…`), which Tally does for every provider.
//!
//! Wire formats and the event mapping live in [`transformers`]; `docs/providers/mor_a.md` has the
//! status table.

pub mod transformers;

use std::sync::Arc;

use application::ports::{
    AckFor, Checkout, CheckoutRequest, CheckoutTarget, Clock, GatewayError, PaymentGateway,
    PaymentRef, PaymentStatus, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{Duration, PlanType, ProviderId};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::signing::unhex;
use crate::shared::{ConfigError, GatewayContext, HttpSettings, ProviderHttp};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{
    CancelSubscription, CheckoutCustomer, CheckoutEntity, CheckoutMetadata, CreateCheckout,
};

/// Creem's production API.
pub const PRODUCTION_BASE_URL: &str = "https://api.creem.io";
/// Creem's test-mode API (test keys, no real charges).
pub const TEST_BASE_URL: &str = "https://test-api.creem.io";
/// The largest webhook body accepted, in bytes.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;
/// The longest subscription id accepted before it goes into a URL path.
const MAX_SUBSCRIPTION_ID_CHARS: usize = 128;
const PROVIDER: &str = "mor_a";
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 3_000;

/// `[providers.mor_a]` in `tally.toml`.
#[derive(Clone, Deserialize)]
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

const fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

const fn default_connect_timeout_ms() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
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
            timeout_ms: DEFAULT_TIMEOUT_MS,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
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
}

impl std::fmt::Debug for MorASettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MorASettings")
            .field("api_key", &"[redacted]")
            .field("webhook_secret", &"[redacted]")
            .field("test_mode", &self.test_mode)
            .field("base_url", &self.base_url)
            .field("timeout_ms", &self.timeout_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .finish()
    }
}

/// The Creem gateway.
pub struct MorAGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    api_key: SecretString,
    scheme: CreemSignature,
}

impl std::fmt::Debug for MorAGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MorAGateway")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

fn config_error(field: &'static str, problem: &str) -> ConfigError {
    ConfigError {
        provider: PROVIDER,
        field,
        problem: problem.to_owned(),
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
            return Err(config_error(
                "apiKey",
                "must be a non-empty key without spaces",
            ));
        }
        if api_key.starts_with("creem_test_") && settings.base_url.is_none() && !settings.test_mode
        {
            return Err(config_error(
                "apiKey",
                "is a test-mode key; set testMode = true",
            ));
        }
        if settings.webhook_secret.expose_secret().is_empty() {
            return Err(config_error("webhookSecret", "must not be empty"));
        }
        let base_url = settings.base_url();
        if !(base_url.starts_with("https://") || base_url.starts_with("http://")) {
            return Err(config_error("baseUrl", "must be an http(s) URL"));
        }
        Ok(Self {
            http: context.http,
            clock: context.clock,
            sandbox: context.sandbox,
            api_key: SecretString::from(api_key.to_owned()),
            scheme: CreemSignature {
                secret: settings.webhook_secret.clone(),
            },
        })
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
            .mor_a_product_id
            .clone()
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

/// A subscription id safe to put in a URL path.
fn path_segment(id: &str) -> Result<&str, GatewayError> {
    let ok = !id.is_empty()
        && id.chars().count() <= MAX_SUBSCRIPTION_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(id)
    } else {
        Err(GatewayError::Rejected("not a creem subscription id".into()))
    }
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
        let call = self.authorized(self.http.client().post(self.http.url("/v1/checkouts")));
        let reply = self.http.send(call.json(&body)).await?.success()?;
        let checkout: CheckoutEntity = reply.json()?;
        let url = checkout
            .checkout_url
            .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
            .ok_or_else(|| GatewayError::BadResponse("checkout without a checkout_url".into()))?;
        Ok(Checkout {
            provider_reference: Some(checkout.id),
            target: CheckoutTarget::Redirect(url),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        // Creem looks checkouts up by their id only; without one there is nothing to ask.
        let Some(checkout_id) = payment.provider_reference.as_deref() else {
            return Err(GatewayError::NotSupported);
        };
        let call = self
            .authorized(self.http.client().get(self.http.url("/v1/checkouts")))
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
        let url = self.http.url(&format!("/v1/subscriptions/{id}/cancel"));
        let call = self
            .authorized(self.http.client().post(url))
            .json(&CancelSubscription::at_period_end());
        self.http.send(call).await?.success()?;
        Ok(())
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if request.body.len() > MAX_WEBHOOK_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        webhook::verify(&self.scheme, request, self.clock.now())?;
        let parsed = transformers::parse_webhook(&request.body)?;
        Ok(VerifiedWebhook {
            event_id: parsed.event_id,
            event_type: parsed.event_type,
            events: parsed.events,
            foreign: None,
        })
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        // Creem wants a 200; anything else is retried (30 s, 1 min, 5 min, 1 h).
        match outcome {
            AckFor::Accepted => WebhookAck {
                status: 200,
                content_type: "application/json",
                body: r#"{"received":true}"#.into(),
            },
            AckFor::Refused(_) => WebhookAck {
                status: 400,
                content_type: "application/json",
                body: r#"{"error":"invalid webhook"}"#.into(),
            },
        }
    }
}
