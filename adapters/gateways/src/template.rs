//! The skeleton of a gateway, for the next provider (`docs/add-a-provider.md`): copy this file to
//! `<provider>.rs`, move the wire types into `<provider>/transformers.rs`, and replace every
//! `Example` with the provider's own protocol. It is compiled with the crate's tests, so that it
//! follows the [`PaymentGateway`] port as the port changes.
//!
//! The example provider has a JSON API with a bearer key (`POST /checkouts`, `GET /checkouts/{id}`,
//! `POST /subscriptions/{id}/cancel`) and signs webhooks with HMAC-SHA256 over
//! `{timestamp}.{body}`, hex in `example-signature`, the Unix time in `example-timestamp`.

use std::sync::Arc;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, Clock, GatewayError,
    OrderLocator, PaymentEvent, PaymentGateway, PaymentRef, PaymentStatus, RecordedWebhook,
    VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{Money, OrderId, ProviderId};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::shared::http::{HttpSettings, ProviderHttp};
use crate::shared::signing::unhex;
use crate::shared::{ConfigError, GatewayContext};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};

/// The provider this gateway serves: the new [`ProviderId`] variant.
const PROVIDER_ID: ProviderId = ProviderId::MorB;
/// The provider's id in settings errors (`[providers.<id>]`).
const PROVIDER: &str = "example";
/// The provider's production API.
const LIVE_BASE_URL: &str = "https://api.example.com";
/// How far a webhook's timestamp may be from now, in seconds.
const TOLERANCE_S: i64 = 300;
const SIGNATURE_HEADER: &str = "example-signature";
const TIMESTAMP_HEADER: &str = "example-timestamp";

/// `[providers.example]` in `tally.toml`. `Debug` shows the secrets as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExampleSettings {
    /// `apiKey`: the API key. Required.
    pub api_key: SecretString,
    /// `webhookSecret`: the webhook signing secret. Required.
    pub webhook_secret: SecretString,
    /// `baseUrl`: overrides the production URL (the sandbox, a test host).
    #[serde(default)]
    pub base_url: Option<String>,
    /// `timeoutMs`: total time per request; defaults to the shared HTTP default.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl ExampleSettings {
    /// Where the API is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        HttpSettings::with_timeout(
            self.base_url.as_deref().unwrap_or(LIVE_BASE_URL),
            self.timeout_ms,
        )
    }
}

/// The example provider's gateway.
pub struct ExampleGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    api_key: SecretString,
    webhook_secret: SecretString,
}

impl ExampleGateway {
    /// A gateway for `settings`, talking through `context.http`.
    ///
    /// # Errors
    /// An empty API key or webhook secret.
    pub fn new(settings: &ExampleSettings, context: GatewayContext) -> Result<Self, ConfigError> {
        for (field, value) in [
            ("apiKey", &settings.api_key),
            ("webhookSecret", &settings.webhook_secret),
        ] {
            if value.expose_secret().trim().is_empty() {
                return Err(ConfigError::new(PROVIDER, field, "must not be empty"));
            }
        }
        Ok(Self {
            http: context.http.for_provider(PROVIDER_ID),
            clock: context.clock,
            sandbox: context.sandbox,
            api_key: settings.api_key.clone(),
            webhook_secret: settings.webhook_secret.clone(),
        })
    }

    /// What a verified body means: its events, mapped exhaustively from the provider's types.
    fn parse(&self, body: &[u8]) -> Result<VerifiedWebhook, WebhookError> {
        let event: Event =
            serde_json::from_slice(body).map_err(|e| WebhookError::Malformed(e.to_string()))?;
        let order = OrderLocator {
            order_id: OrderId::new(&event.data.reference).ok(),
            provider_reference: Some(event.data.id.clone()),
        };
        let occurred_at = self.clock.now();
        let events = match event.kind.as_str() {
            "checkout.paid" => {
                let currency = event
                    .data
                    .currency
                    .parse()
                    .map_err(|_| WebhookError::Malformed("unknown currency".to_owned()))?;
                let amount = Money::from_minor(event.data.amount, currency)
                    .map_err(|e| WebhookError::Malformed(e.to_string()))?;
                vec![PaymentEvent::PaymentSucceeded {
                    order,
                    amount,
                    occurred_at,
                }]
            }
            "checkout.failed" => vec![PaymentEvent::PaymentFailed {
                order,
                reason: "the provider declined the payment".to_owned(),
                occurred_at,
            }],
            // An event type Tally does not act on verifies and means nothing.
            _ => Vec::new(),
        };
        Ok(VerifiedWebhook {
            event_id: event.id,
            event_type: event.kind,
            events,
            foreign: None,
        })
    }
}

/// `POST /checkouts`.
#[derive(Serialize)]
struct CheckoutBody<'a> {
    reference: &'a str,
    amount: i64,
    currency: &'a str,
    success_url: &'a str,
    cancel_url: &'a str,
}

/// A checkout, as the API answers it.
#[derive(Deserialize)]
struct CheckoutAnswer {
    id: String,
    url: String,
    status: String,
    amount: i64,
    currency: String,
}

/// A webhook event.
#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    id: String,
    reference: String,
    amount: i64,
    currency: String,
}

#[async_trait]
impl PaymentGateway for ExampleGateway {
    fn provider(&self) -> ProviderId {
        PROVIDER_ID
    }

    fn is_sandbox(&self) -> bool {
        self.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        let price = request.snapshot.price;
        let body = CheckoutBody {
            reference: request.order_id.as_str(),
            amount: price.amount_minor(),
            currency: price.currency().code(),
            success_url: &request.success_url,
            cancel_url: &request.cancel_url,
        };
        let call = self
            .http
            .post("/checkouts")
            .bearer_auth(self.api_key.expose_secret())
            .json(&body);
        let answer: CheckoutAnswer = self.http.send(call).await?.success()?.json()?;
        Ok(Checkout {
            provider_reference: Some(answer.id),
            target: CheckoutTarget::Redirect(answer.url),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let Some(id) = payment.provider_reference.as_deref() else {
            return Ok(PaymentStatus::Pending);
        };
        if !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(GatewayError::Rejected("not a checkout id".into()));
        }
        let call = self
            .http
            .get(&format!("/checkouts/{id}"))
            .bearer_auth(self.api_key.expose_secret());
        let answer: CheckoutAnswer = self.http.send(call).await?.success()?.json()?;
        let currency = answer
            .currency
            .parse()
            .map_err(|_| GatewayError::BadResponse("unknown currency".into()))?;
        let amount = Money::from_minor(answer.amount, currency)
            .map_err(|e| GatewayError::BadResponse(e.to_string()))?;
        Ok(match answer.status.as_str() {
            "paid" => PaymentStatus::Succeeded {
                amount,
                paid_at: self.clock.now(),
            },
            "expired" | "declined" => PaymentStatus::Failed {
                reason: answer.status,
            },
            // Unknown states are pending: only a state the provider documents moves money.
            _ => PaymentStatus::Pending,
        })
    }

    async fn close_payment(&self, _payment: &PaymentRef) -> Result<(), GatewayError> {
        Err(GatewayError::NotSupported)
    }

    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let call = self
            .http
            .post(&format!("/subscriptions/{provider_subscription_id}/cancel"))
            .bearer_auth(self.api_key.expose_secret());
        self.http.send(call).await?.success()?;
        Ok(())
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let scheme = ExampleSignature {
            secret: self.webhook_secret.expose_secret().as_bytes(),
        };
        webhook::verify(&scheme, request, self.clock.now())?;
        self.parse(&request.body)
    }

    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        self.parse(&recorded.body)
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "text/plain",
                body: "ok".into(),
            },
            AckFor::Refused(e) => WebhookAck {
                verdict: AckVerdict::Refused,
                content_type: "text/plain",
                body: e.to_string(),
            },
        }
    }
}

/// HMAC-SHA256 over `{timestamp}.{body}`, hex in [`SIGNATURE_HEADER`].
struct ExampleSignature<'a> {
    secret: &'a [u8],
}

impl WebhookScheme for ExampleSignature<'_> {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let timestamp = webhook::header(request, TIMESTAMP_HEADER)?;
        let signature = webhook::header(request, SIGNATURE_HEADER)?;
        Ok(SignedParts {
            timestamp_s: Some(
                timestamp
                    .trim()
                    .parse()
                    .map_err(|_| WebhookError::MissingSignature)?,
            ),
            signatures: vec![unhex(signature).ok_or(WebhookError::MissingSignature)?],
            extras: Vec::new(),
        })
    }

    fn message(
        &self,
        request: &WebhookRequest,
        parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        let timestamp = parts.timestamp_s.ok_or(WebhookError::MissingSignature)?;
        let mut message = format!("{timestamp}.").into_bytes();
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use application::testing::FixedClock;

    use super::*;
    use crate::shared::signing::{hex, hmac_sha256};

    const NOW_S: i64 = 1_767_225_600;
    const SECRET: &str = "example_webhook_secret";

    fn gateway() -> ExampleGateway {
        let settings = ExampleSettings {
            api_key: SecretString::from("example_key".to_owned()),
            webhook_secret: SecretString::from(SECRET.to_owned()),
            base_url: Some("http://127.0.0.1:9".to_owned()),
            timeout_ms: None,
        };
        let context = GatewayContext {
            http: ProviderHttp::new(&settings.http()).unwrap(),
            clock: Arc::new(FixedClock::at(NOW_S * 1000)),
            sandbox: false,
        };
        ExampleGateway::new(&settings, context).unwrap()
    }

    fn signed(body: &str, secret: &str) -> WebhookRequest {
        let signature = hmac_sha256(secret.as_bytes(), format!("{NOW_S}.{body}").as_bytes());
        let headers = BTreeMap::from([
            (TIMESTAMP_HEADER.to_owned(), NOW_S.to_string()),
            (SIGNATURE_HEADER.to_owned(), hex(&signature)),
        ]);
        WebhookRequest {
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    const PAID: &str = r#"{"id":"evt_1","type":"checkout.paid","data":{"id":"chk_1","reference":"ord_1","amount":999,"currency":"USD"}}"#;

    #[tokio::test]
    async fn a_signed_paid_checkout_is_a_payment_of_its_amount_for_our_order() {
        let verified = gateway()
            .verify_webhook(&signed(PAID, SECRET))
            .await
            .unwrap();
        let [PaymentEvent::PaymentSucceeded { order, amount, .. }] = &verified.events[..] else {
            panic!("{:?}", verified.events);
        };
        assert_eq!(order.order_id.as_ref().map(OrderId::as_str), Some("ord_1"));
        assert_eq!(amount.amount_minor(), 999);
    }

    #[tokio::test]
    async fn a_webhook_signed_with_another_secret_is_refused() {
        let refused = gateway().verify_webhook(&signed(PAID, "another")).await;
        assert_eq!(refused.unwrap_err(), WebhookError::BadSignature);
    }

    #[test]
    fn settings_are_camel_case_and_never_print_secrets() {
        let settings: ExampleSettings =
            serde_json::from_str(r#"{"apiKey":"key_1","webhookSecret":"secret_1"}"#).unwrap();
        let printed = format!("{settings:?}");
        assert!(!printed.contains("key_1") && !printed.contains("secret_1"));
        assert!(serde_json::from_str::<ExampleSettings>(r#"{"apikey":"k"}"#).is_err());
    }
}
