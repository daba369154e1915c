//! `mor_c`: Waffo Pancake, a Merchant of Record (docs: <https://docs.waffo.ai>, SDK
//! `waffo-com/waffo-pancake-sdk-ts`). Pancake takes no CNY for subscriptions.
//!
//! Every request is a signed `POST`: `X-Timestamp` (seconds), `X-Merchant-Id` and
//! `X-Signature = base64(RSA-SHA256(merchant private key, "POST\n{path}\n{X-Timestamp}\n
//! {base64(SHA-256(body))}"))`, where `path` is the API path (`/v1/actions/…`), never a prefix of
//! the configured base URL. API keys are bound to test or production when created; there is no
//! test-mode switch. Writes are `/v1/actions/<domain>/<action>`; reads go through the query-only
//! GraphQL endpoint.
//!
//! Webhooks carry `X-Waffo-Signature: t=<ms>,v1=<base64 RSA-SHA256("{t}.{raw body}")>` signed
//! with Waffo's platform key. Retries reuse the first attempt's `t`, so (as Waffo's SDK does) a
//! signature may be up to 45 minutes old and at most 1 minute ahead, to the millisecond;
//! deduplication on the delivery id stops replays within that window. One platform key per
//! environment signs **every** merchant's webhooks, so a valid signature proves only that
//! Pancake sent the event: its envelope's `storeId` and `mode` must be the configured store and
//! environment, else it is `foreign` (acknowledged, and nothing changes).
//!
//! Refunds: Pancake's API has no merchant refund. A refund ticket
//! (`/v1/actions/refund-ticket/create-ticket`) is a *buyer's* request, made with a customer
//! session token, that the merchant then reviews in the dashboard; `refund` answers
//! [`GatewayError::NotSupported`].
//!
//! Subscription events (`subscription.activated`, `.renewed`, `.recovered`) name no payment, so
//! the gateway reads the subscription order's payments (GraphQL `subscriptionOrder(id)`) for the
//! one that paid the period: its id is the charge that refunds name.
//!
//! Wire formats and the event mapping live in [`transformers`]; `docs/providers/mor_c.md` has the
//! status table.

pub mod transformers;

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, Clock, CredentialCheck,
    CredentialMode, GatewayError, PaymentGateway, PaymentRef, PaymentStatus, RecordedWebhook,
    RefundRequest, RefundStarted, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{Currency, Duration, PlanType, ProviderId, Timestamp};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::http::HttpReply;
use crate::shared::http::{default_connect_timeout_ms, default_timeout_ms};
use crate::shared::signing::{self, PrivateKey, PublicKey, b64, rsa_sha256_sign, unb64};
use crate::shared::time::unix_seconds;
use crate::shared::wire::{is_web_url, path_id};
use crate::shared::{ConfigError, GatewayContext, HttpSettings, ProviderHttp, TestModeSetting};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{
    CANCEL_ORDER_PATH, CREATE_SESSION_PATH, CREDENTIAL_CHECK_QUERY, CancelOrder, CancelResult,
    CreateSession, Envelope, GRAPHQL_PATH, GraphqlRequest, Meaning, ORDER_STATUS_QUERY,
    OrderPayment, OrderStatusData, PriceSnapshot, SUBSCRIPTION_PAYMENTS_QUERY, SessionCreated,
    StoreData, SubscriptionPaymentsData,
};

/// Pancake's API (the SDK's default).
pub const PRODUCTION_BASE_URL: &str = "https://api.waffo.ai";
/// The largest webhook body accepted, in bytes.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;
/// How old a webhook signature may be, in milliseconds (Waffo's SDK default `toleranceMs`:
/// retries reuse `t`).
pub const WEBHOOK_PAST_TOLERANCE_MS: i64 = 45 * 60_000;
/// How far ahead of our clock a webhook signature may be, in milliseconds (the SDK's
/// `futureToleranceMs`).
pub const WEBHOOK_FUTURE_TOLERANCE_MS: i64 = 60_000;
/// Bounds on a checkout session's lifetime, in seconds (Pancake's default is 45 minutes).
const SESSION_SECONDS: (i64, i64) = (60, 86_400);
/// Tax categories Pancake knows.
const TAX_CATEGORIES: [&str; 7] = [
    "digital_goods",
    "saas",
    "software",
    "ebook",
    "online_course",
    "consulting",
    "professional_service",
];
const MAX_ID_CHARS: usize = 128;
const PROVIDER: &str = "mor_c";

/// Pancake's environment, as webhooks name it in `mode` (the SDK's `"test" | "prod"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PancakeMode {
    /// Test mode (test API keys, the test platform key).
    Test,
    /// Production.
    Prod,
}

impl PancakeMode {
    /// As webhooks write it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            PancakeMode::Test => "test",
            PancakeMode::Prod => "prod",
        }
    }
}

/// `[providers.mor_c]` in `tally.toml`. `Debug` shows the private key as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MorCSettings {
    /// `merchantId`: `MER_…`, sent as `X-Merchant-Id`.
    pub merchant_id: String,
    /// `privateKey`: the API key's RSA private key (PEM, PKCS#8 or PKCS#1, or bare base64 DER).
    pub private_key: SecretString,
    /// `webhookPublicKey`: Waffo's platform public key for the key's environment (test or prod).
    pub webhook_public_key: String,
    /// `storeId`: `STO_…`, the store whose webhooks are Tally's (Pancake's platform key signs
    /// every store's), also used to look orders up. Required.
    pub store_id: String,
    /// `mode`: `test` or `prod`, the environment of the API key and of the webhooks Tally
    /// accepts. Required.
    pub mode: PancakeMode,
    /// `taxCategory`: sent with Tally's price (`saas` unless set).
    #[serde(default = "default_tax_category")]
    pub tax_category: String,
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

fn default_tax_category() -> String {
    "saas".to_owned()
}

impl MorCSettings {
    /// Settings with the default host, tax category and timeouts.
    #[must_use]
    pub fn new(
        merchant_id: impl Into<String>,
        private_key: impl Into<String>,
        webhook_public_key: impl Into<String>,
        store_id: impl Into<String>,
        mode: PancakeMode,
    ) -> Self {
        Self {
            merchant_id: merchant_id.into(),
            private_key: SecretString::from(private_key.into()),
            webhook_public_key: webhook_public_key.into(),
            store_id: store_id.into(),
            mode,
            tax_category: default_tax_category(),
            base_url: None,
            timeout_ms: default_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
        }
    }

    /// The API host in use.
    #[must_use]
    pub fn base_url(&self) -> String {
        self.base_url
            .as_deref()
            .unwrap_or(PRODUCTION_BASE_URL)
            .trim_end_matches('/')
            .to_owned()
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

    /// The setting that makes these test-mode credentials: `mode = "test"` (Pancake binds a
    /// key to its environment when it is created, and `mode` names that environment).
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        (self.mode == PancakeMode::Test).then_some(TestModeSetting::new(
            "mode",
            "is \"test\": a Waffo Pancake test-environment key",
        ))
    }
}

/// The Waffo Pancake gateway.
pub struct MorCGateway {
    http: ProviderHttp,
    clock: Arc<dyn Clock>,
    sandbox: bool,
    merchant_id: String,
    private_key: PrivateKey,
    store_id: String,
    mode: PancakeMode,
    tax_category: String,
    scheme: WaffoSignature,
}

impl std::fmt::Debug for MorCGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MorCGateway")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .field("merchant_id", &self.merchant_id)
            .finish_non_exhaustive()
    }
}

/// A short printable id (merchant, store, order) safe for a header or a JSON field.
fn plain_id(id: &str) -> bool {
    path_id(id, MAX_ID_CHARS, &['_', '-']).is_some()
}

impl MorCGateway {
    /// A gateway for `settings`; the keys are parsed once, here.
    ///
    /// # Errors
    /// A malformed merchant or store id, an unreadable key, an unknown tax category, or a base
    /// URL that is not HTTP(S); the error names the setting, never a key.
    pub fn new(settings: &MorCSettings, context: GatewayContext) -> Result<Self, ConfigError> {
        if !plain_id(&settings.merchant_id) {
            return Err(ConfigError::new(
                PROVIDER,
                "merchantId",
                "must be an id such as MER_…",
            ));
        }
        if !plain_id(&settings.store_id) {
            return Err(ConfigError::new(
                PROVIDER,
                "storeId",
                "must be an id such as STO_…",
            ));
        }
        let private_key =
            signing::private_key(settings.private_key.expose_secret()).map_err(|_| {
                ConfigError::new(
                    PROVIDER,
                    "privateKey",
                    "is not an RSA private key (PEM or base64 DER)",
                )
            })?;
        let public_key = signing::public_key(&settings.webhook_public_key).map_err(|_| {
            ConfigError::new(
                PROVIDER,
                "webhookPublicKey",
                "is not an RSA public key (PEM or base64 DER)",
            )
        })?;
        if !TAX_CATEGORIES.contains(&settings.tax_category.as_str()) {
            return Err(ConfigError::new(
                PROVIDER,
                "taxCategory",
                "must be one of Pancake's tax categories, such as saas",
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
        Ok(Self {
            http: context.http.for_provider(ProviderId::MorC),
            clock: context.clock,
            sandbox: context.sandbox,
            merchant_id: settings.merchant_id.clone(),
            private_key,
            store_id: settings.store_id.clone(),
            mode: settings.mode,
            tax_category: settings.tax_category.clone(),
            scheme: WaffoSignature { public_key },
        })
    }

    /// `POST` `body` to `path`, signed.
    async fn signed_post(&self, path: &str, body: Vec<u8>) -> Result<HttpReply, GatewayError> {
        let timestamp_s = unix_seconds(self.clock.now());
        let canonical = transformers::canonical_request("POST", path, timestamp_s, &body);
        let signature = b64(&rsa_sha256_sign(&self.private_key, canonical.as_bytes()));
        let call = self
            .http
            .post(path)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("x-merchant-id", &self.merchant_id)
            .header("x-timestamp", timestamp_s.to_string())
            .header("x-signature", signature)
            .body(body);
        self.http.send(call).await?.success()
    }

    /// The payments of subscription order `order_id`, read through GraphQL.
    async fn subscription_payments(
        &self,
        order_id: &str,
    ) -> Result<Vec<OrderPayment>, GatewayError> {
        if !plain_id(order_id) {
            return Err(GatewayError::Rejected("not a pancake order id".into()));
        }
        let query = GraphqlRequest {
            query: SUBSCRIPTION_PAYMENTS_QUERY,
            variables: BTreeMap::from([("id", order_id.to_owned())]),
        };
        let reply = self.signed_post(GRAPHQL_PATH, encode(&query)?).await?;
        let data = reply
            .json::<Envelope<SubscriptionPaymentsData>>()?
            .into_data()?;
        Ok(data
            .subscription_order
            .map(|order| order.payments)
            .unwrap_or_default())
    }

    fn session_body(&self, request: &CheckoutRequest) -> Result<CreateSession, GatewayError> {
        let snapshot = &request.snapshot;
        let price = snapshot.price;
        if snapshot.plan_type == PlanType::Recurring && price.currency() == Currency::Cny {
            return Err(GatewayError::Rejected(
                "waffo pancake takes no CNY subscriptions".into(),
            ));
        }
        let product_id = request
            .plan
            .provider_refs()
            .get(ProviderId::MorC)
            .map(str::to_owned)
            .ok_or_else(|| GatewayError::Rejected("plan has no morCProductId".into()))?;
        let mut metadata =
            BTreeMap::from([("orderId".to_owned(), request.order_id.as_str().to_owned())]);
        if let (PlanType::Recurring, Some(Duration::Months(m))) =
            (snapshot.plan_type, snapshot.duration)
        {
            metadata.insert("intervalMonths".into(), m.get().to_string());
        }
        if self.sandbox {
            metadata.insert("notifyUrl".into(), request.notify_url.clone());
        }
        let left_s = (request.expires_at.unix_millis() - self.clock.now().unix_millis()) / 1000;
        Ok(CreateSession {
            product_id,
            currency: price.currency().code().to_owned(),
            price_snapshot: PriceSnapshot {
                amount: transformers::display_amount(price),
                tax_category: self.tax_category.clone(),
            },
            order_merchant_external_id: request.order_id.as_str().to_owned(),
            buyer_email: request.customer_email.clone(),
            success_url: request.success_url.clone(),
            expires_in_seconds: left_s.clamp(SESSION_SECONDS.0, SESSION_SECONDS.1),
            metadata,
        })
    }
}

fn encode<T: serde::Serialize>(body: &T) -> Result<Vec<u8>, GatewayError> {
    serde_json::to_vec(body).map_err(|_| GatewayError::Rejected("request cannot be encoded".into()))
}

/// Waffo's webhook signature: `X-Waffo-Signature: t=<ms>,v1=<base64>` over `{t}.{raw body}`.
struct WaffoSignature {
    public_key: PublicKey,
}

impl WebhookScheme for WaffoSignature {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let header = webhook::header(request, "x-waffo-signature")?;
        let parsed =
            transformers::parse_signature_header(header).ok_or(WebhookError::MissingSignature)?;
        let signatures = parsed
            .v1
            .iter()
            .map(|s| unb64(s))
            .collect::<Option<Vec<_>>>()
            .ok_or(WebhookError::MissingSignature)?;
        Ok(SignedParts {
            // `t` is in milliseconds; the pipeline compares seconds.
            timestamp_s: Some(parsed.t_ms.div_euclid(1000)),
            signatures,
            extras: vec![("t".into(), parsed.t)],
        })
    }

    fn message(
        &self,
        request: &WebhookRequest,
        parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        let t = parts.extra("t").ok_or(WebhookError::MissingSignature)?;
        Ok(transformers::webhook_message(t, &request.body))
    }

    fn verifier(&self) -> Verifier<'_> {
        Verifier::RsaSha256(&self.public_key)
    }

    fn tolerance_s(&self) -> Option<i64> {
        // Checked to the millisecond in `verify_webhook`, as the SDK compares `t` with
        // `Date.now()`: the pipeline's whole seconds would let up to 999 ms more through.
        None
    }
}

#[async_trait]
impl PaymentGateway for MorCGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::MorC
    }

    fn is_sandbox(&self) -> bool {
        self.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        let body = encode(&self.session_body(request)?)?;
        let reply = self.signed_post(CREATE_SESSION_PATH, body).await?;
        let session = reply.json::<Envelope<SessionCreated>>()?.into_data()?;
        if !is_web_url(&session.checkout_url) {
            return Err(GatewayError::BadResponse(
                "checkout url is not http(s)".into(),
            ));
        }
        Ok(Checkout {
            provider_reference: Some(session.session_id),
            target: CheckoutTarget::Redirect(session.checkout_url),
        })
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // A signed GraphQL read of the configured store: it proves the merchant id and key,
        // and that the store is the merchant's; GraphQL is query-only, so nothing changes.
        let query = GraphqlRequest {
            query: CREDENTIAL_CHECK_QUERY,
            variables: BTreeMap::from([("storeId", self.store_id.clone())]),
        };
        let reply = self.signed_post(GRAPHQL_PATH, encode(&query)?).await?;
        let data = reply.json::<Envelope<StoreData>>()?.into_data()?;
        if data.store.is_none_or(|store| store.id != self.store_id) {
            return Err(GatewayError::Rejected(format!(
                "storeId: store {} is not one of merchant {}'s stores",
                self.store_id, self.merchant_id
            )));
        }
        let mode = match self.mode {
            PancakeMode::Test => CredentialMode::Test,
            PancakeMode::Prod => CredentialMode::Live,
        };
        Ok(CredentialCheck {
            mode,
            detail: format!("POST {GRAPHQL_PATH} read store {}", self.store_id),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let query = GraphqlRequest {
            query: ORDER_STATUS_QUERY,
            variables: BTreeMap::from([
                ("storeId", self.store_id.clone()),
                ("ref", payment.order_id.as_str().to_owned()),
            ]),
        };
        let reply = self.signed_post(GRAPHQL_PATH, encode(&query)?).await?;
        let data = reply.json::<Envelope<OrderStatusData>>()?.into_data()?;
        transformers::payment_status(&data, self.clock.now())
    }

    async fn close_payment(&self, _payment: &PaymentRef) -> Result<(), GatewayError> {
        // Only the buyer can cancel a one-time order; an unpaid session simply expires.
        Err(GatewayError::NotSupported)
    }

    async fn refund(&self, _request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        // Pancake has no merchant refund call: refund tickets are opened by buyers (customer
        // session) and approved by the merchant in the dashboard; `refund.succeeded` follows.
        Err(GatewayError::NotSupported)
    }

    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        if !plain_id(provider_subscription_id) {
            return Err(GatewayError::Rejected("not a pancake order id".into()));
        }
        let body = encode(&CancelOrder {
            order_id: provider_subscription_id.to_owned(),
        })?;
        let reply = self.signed_post(CANCEL_ORDER_PATH, body).await?;
        // An active subscription becomes `canceling` and ends with its paid period.
        let _: CancelResult = reply.json::<Envelope<CancelResult>>()?.into_data()?;
        Ok(())
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if request.body.len() > MAX_WEBHOOK_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        let now = self.clock.now();
        let t_ms =
            transformers::parse_signature_header(webhook::header(request, "x-waffo-signature")?)
                .ok_or(WebhookError::MissingSignature)?
                .t_ms;
        if !transformers::within_window(
            t_ms,
            now.unix_millis(),
            WEBHOOK_PAST_TOLERANCE_MS,
            WEBHOOK_FUTURE_TOLERANCE_MS,
        ) {
            return Err(WebhookError::Stale);
        }
        webhook::verify(&self.scheme, request, now)?;
        self.parse_verified(&request.body, Timestamp::from_unix_millis(t_ms))
            .await
    }

    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if recorded.body.len() > MAX_WEBHOOK_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        // The signature's time, which a live delivery reads, was within the window of receipt.
        self.parse_verified(&recorded.body, recorded.received_at)
            .await
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        // Any 2xx within 30 s accepts; a refusal is a 400.
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "text/plain; charset=utf-8",
                body: "OK".into(),
            },
            AckFor::Refused(_) => WebhookAck {
                verdict: AckVerdict::Refused,
                content_type: "text/plain; charset=utf-8",
                body: "invalid webhook".into(),
            },
        }
    }
}

impl MorCGateway {
    /// Read a verified event (live or recorded) signed at `signed_at`: the store and mode
    /// check, then its meaning, with the look-ups it needs.
    async fn parse_verified(
        &self,
        body: &[u8],
        signed_at: Timestamp,
    ) -> Result<VerifiedWebhook, WebhookError> {
        // The platform key signs every store's events: only ours, in our mode, change anything.
        let scope = transformers::webhook_scope(body)?;
        if let Some(why) = scope.foreign(&self.store_id, self.mode.as_str()) {
            return Ok(VerifiedWebhook {
                event_id: scope.id,
                event_type: scope.event_type,
                events: Vec::new(),
                foreign: Some(why),
            });
        }
        let parsed = transformers::parse_webhook(body, signed_at)?;
        let events = match parsed.meaning {
            Meaning::Events(events) => events,
            Meaning::Period(change, data, at) => {
                let order_id = data.order_id.clone().unwrap_or_default();
                // Pancake retries a refused webhook only three times: a period that was paid is
                // not held back because its payment cannot be read now; it then names no charge.
                let payments = match self.subscription_payments(&order_id).await {
                    Ok(payments) => Some(payments),
                    Err(e) => {
                        tracing::warn!(
                            provider = PROVIDER,
                            error = %e,
                            "the payments of a subscription cannot be read; its period names no charge"
                        );
                        None
                    }
                };
                vec![transformers::period_event(
                    change,
                    &data,
                    payments.as_deref(),
                    at,
                )?]
            }
        };
        Ok(VerifiedWebhook {
            event_id: parsed.event_id,
            event_type: parsed.event_type,
            events,
            foreign: None,
        })
    }
}
