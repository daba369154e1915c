//! `card_gateway`: Stripe Checkout Sessions.
//!
//! Checkout: `POST /v1/checkout/sessions` (form-encoded, `Authorization: Bearer sk_…`,
//! `Idempotency-Key` = our order id) and a redirect to the session's `url`. Query:
//! `GET /v1/checkout/sessions/{id}`; close: `POST /v1/checkout/sessions/{id}/expire`; cancel:
//! `POST /v1/subscriptions/{id}` with `cancel_at_period_end=true`. Webhooks carry
//! `Stripe-Signature: t=…,v1=…` = hex HMAC-SHA256 of `{t}.{raw body}` keyed with the endpoint
//! secret string as is (`whsec_…` included), five minutes of tolerance, any `v1` may match.
//! Wire formats and the event mapping are in [`transformers`]; `docs/providers/card_gateway.md`
//! has the status table.

pub mod transformers;

use std::sync::Arc;

use application::ports::{
    AckFor, Checkout, CheckoutRequest, CheckoutTarget, Clock, GatewayError, PaymentGateway,
    PaymentRef, PaymentStatus, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::ProviderId;
use reqwest::header::CONTENT_TYPE;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::http::{HttpReply, HttpSettings, ProviderHttp};
use crate::shared::signing::unhex;
use crate::shared::{ConfigError, GatewayContext};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{CheckoutSession, path_id};

/// Stripe's API.
pub const DEFAULT_BASE_URL: &str = "https://api.stripe.com";
/// How far a webhook's `t` may be from now (the Stripe SDKs' default).
pub const TOLERANCE_S: i64 = 300;
/// The signature header.
pub const SIGNATURE_HEADER: &str = "stripe-signature";
const PROVIDER: &str = "card_gateway";
const FORM: &str = "application/x-www-form-urlencoded";
/// The most comma-separated items read from a signature header (a bound on parsing work).
const MAX_HEADER_ITEMS: usize = 32;

/// `[providers.card_gateway]` in `tally.toml`.
#[derive(Clone, Deserialize)]
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
        }
    }

    /// Where the API is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        let mut http = HttpSettings::new(self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL));
        if let Some(timeout_ms) = self.timeout_ms {
            http.timeout_ms = timeout_ms;
        }
        http
    }
}

impl std::fmt::Debug for CardGatewaySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardGatewaySettings")
            .field("secret_key", &"[redacted]")
            .field("webhook_secret", &"[redacted]")
            .field("base_url", &self.base_url)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

/// The Stripe Checkout gateway.
pub struct CardGatewayGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    secret_key: SecretString,
    webhook_secret: SecretString,
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
            return Err(config_error(
                "secretKey",
                "must be a Stripe secret key (sk_… or rk_…)",
            ));
        }
        let secret = settings.webhook_secret.expose_secret();
        if !secret.starts_with("whsec_") || secret.len() <= "whsec_".len() {
            return Err(config_error(
                "webhookSecret",
                "must be the endpoint's signing secret (whsec_…)",
            ));
        }
        Ok(Self {
            http: context.http,
            clock: context.clock,
            sandbox: context.sandbox,
            secret_key: settings.secret_key.clone(),
            webhook_secret: settings.webhook_secret.clone(),
        })
    }

    async fn post_form(
        &self,
        path: &str,
        fields: &[(String, String)],
        idempotency_key: Option<&str>,
    ) -> Result<HttpReply, GatewayError> {
        let mut request = self
            .http
            .client()
            .post(self.http.url(path))
            .bearer_auth(self.secret_key.expose_secret())
            .header(CONTENT_TYPE, FORM)
            .body(transformers::encode_form(fields)?);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        self.http.send(request).await
    }
}

fn config_error(field: &'static str, problem: &str) -> ConfigError {
    ConfigError {
        provider: PROVIDER,
        field,
        problem: problem.to_owned(),
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
        let path = format!("/v1/checkout/sessions/{}", path_id(reference)?);
        let request = self
            .http
            .client()
            .get(self.http.url(&path))
            .bearer_auth(self.secret_key.expose_secret());
        let session: CheckoutSession = transformers::read(self.http.send(request).await?)?;
        session.payment_status(self.clock.now())
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

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let scheme = StripeSignature {
            secret: self.webhook_secret.expose_secret().as_bytes(),
        };
        webhook::verify(&scheme, request, self.clock.now())?;
        let event = transformers::parse_event(&request.body)?;
        let events = transformers::events_of(&event)?;
        Ok(VerifiedWebhook {
            event_id: event.id,
            event_type: event.event_type,
            events,
        })
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                status: 200,
                content_type: "application/json",
                body: "{\"received\":true}".into(),
            },
            AckFor::Refused(e) => WebhookAck {
                status: 400,
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
        Some(TOLERANCE_S)
    }
}
