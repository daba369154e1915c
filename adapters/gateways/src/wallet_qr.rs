//! `wallet_qr`: WeChat Pay APIv3, Native (QR code) payment, direct merchant, public-key mode.
//!
//! - Checkout: `POST /v3/pay/transactions/native` → `code_url`, shown as a QR code.
//! - Status: `GET /v3/pay/transactions/out-trade-no/{id}?mchid=…`; close: `POST …/close` (204).
//! - Every request carries `Authorization: WECHATPAY2-SHA256-RSA2048 …`, an RSA-SHA256
//!   signature by the merchant API key over `METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n`.
//! - Every 2xx answer and every notification is signed by WeChat Pay with the platform public
//!   key (`Wechatpay-Timestamp/Nonce/Signature/Serial`, over `TIMESTAMP\nNONCE\nBODY\n`); both
//!   are checked through the fixed [`webhook::verify`] pipeline with a 300 s tolerance.
//! - Notifications carry the transaction AES-256-GCM-encrypted with the APIv3 key.
//! - Subscriptions do not exist in this protocol.
//!
//! Wire formats live in [`transformers`]; the protocol is described in
//! `docs/providers/wallet_qr.md`.

pub mod transformers;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use application::ports::{
    AckFor, Checkout, CheckoutRequest, CheckoutTarget, GatewayError, PaymentEvent, PaymentGateway,
    PaymentRef, PaymentStatus, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{Locale, PlanType, ProviderId};
use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::http::HttpReply;
use crate::shared::signing::{
    PrivateKey, PublicKey, aes_256_gcm_decrypt, b64, hex, private_key, public_key, rsa_sha256_sign,
    sha256, unb64,
};
use crate::shared::{ConfigError, GatewayContext, HttpSettings};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{
    Authorization, CloseRequest, NativeOrderRequest, NativeOrderResponse, Notification,
    OrderAmount, RefundNotice, Resource, Transaction,
};

/// WeChat Pay's production API.
pub const DEFAULT_BASE_URL: &str = "https://api.mch.weixin.qq.com";
/// How far a signature timestamp may be from now, in seconds.
pub const TOLERANCE_S: i64 = 300;
/// The largest notification body read, in bytes.
pub const MAX_NOTIFICATION_BYTES: usize = 64 * 1024;
/// The APIv3 key is 32 ASCII characters (the AES-256 key).
const API_V3_KEY_BYTES: usize = 32;
const PROVIDER: &str = "wallet_qr";
const USER_AGENT_VALUE: &str = concat!("tally-gateways/", env!("CARGO_PKG_VERSION"));

/// `[providers.wallet_qr]` in `tally.toml`.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalletQrSettings {
    /// The Official Account, Mini Program or app id bound to the merchant (`appid`).
    pub app_id: String,
    /// The merchant id (`mchid`).
    pub mch_id: String,
    /// Serial number of the merchant API certificate (`serial_no` in `Authorization`).
    pub merchant_serial_no: String,
    /// The merchant API private key, `apiclient_key.pem` (PKCS#8 PEM).
    pub merchant_private_key: SecretString,
    /// The APIv3 key: 32 characters set in the merchant console.
    pub api_v3_key: SecretString,
    /// The WeChat Pay public key (PEM), which signs answers and notifications.
    pub platform_public_key: String,
    /// Its id, `PUB_KEY_ID_…`, sent as `Wechatpay-Serial`.
    pub platform_public_key_id: String,
    /// The API base URL; default [`DEFAULT_BASE_URL`].
    #[serde(default)]
    pub base_url: Option<String>,
    /// Total time for one API call, in milliseconds; default 10 000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl WalletQrSettings {
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

impl std::fmt::Debug for WalletQrSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalletQrSettings")
            .field("app_id", &self.app_id)
            .field("mch_id", &self.mch_id)
            .field("merchant_serial_no", &self.merchant_serial_no)
            .field("merchant_private_key", &"[redacted]")
            .field("api_v3_key", &"[redacted]")
            .field("platform_public_key_id", &self.platform_public_key_id)
            .field("base_url", &self.base_url)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

/// The WeChat Pay Native gateway.
pub struct WalletQrGateway {
    app_id: String,
    mch_id: String,
    merchant_serial_no: String,
    merchant_key: PrivateKey,
    api_v3_key: SecretString,
    platform_key: PublicKey,
    platform_key_id: String,
    context: GatewayContext,
    nonces: AtomicU64,
}

impl std::fmt::Debug for WalletQrGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalletQrGateway")
            .field("mch_id", &self.mch_id)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// Where JSON could not be read, without echoing its content (which may be personal data).
fn unreadable(what: &str, error: &serde_json::Error) -> String {
    format!(
        "{what} is not the expected JSON ({:?} error at line {}, column {})",
        error.classify(),
        error.line(),
        error.column()
    )
}

fn config_error(field: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        provider: PROVIDER,
        field,
        problem: problem.into(),
    }
}

fn required(field: &'static str, value: &str) -> Result<String, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(config_error(field, "is required"));
    }
    Ok(value.to_owned())
}

impl WalletQrGateway {
    /// A gateway for `settings`; keys are read once, here.
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting that is missing or unreadable (never its value).
    pub fn new(settings: &WalletQrSettings, context: GatewayContext) -> Result<Self, ConfigError> {
        let merchant_key = private_key(settings.merchant_private_key.expose_secret())
            .map_err(|_| config_error("merchantPrivateKey", "is not an RSA private key (PEM)"))?;
        let platform_key = public_key(&settings.platform_public_key)
            .map_err(|_| config_error("platformPublicKey", "is not an RSA public key (PEM)"))?;
        if settings.api_v3_key.expose_secret().len() != API_V3_KEY_BYTES {
            return Err(config_error("apiV3Key", "must be 32 characters"));
        }
        Ok(Self {
            app_id: required("appId", &settings.app_id)?,
            mch_id: required("mchId", &settings.mch_id)?,
            merchant_serial_no: required("merchantSerialNo", &settings.merchant_serial_no)?,
            merchant_key,
            api_v3_key: settings.api_v3_key.clone(),
            platform_key,
            platform_key_id: required("platformPublicKeyId", &settings.platform_public_key_id)?,
            context,
            nonces: AtomicU64::new(0),
        })
    }

    /// The signature scheme of answers and notifications.
    fn scheme(&self) -> WechatSignature<'_> {
        WechatSignature {
            key: &self.platform_key,
            key_id: &self.platform_key_id,
        }
    }

    /// A request nonce, unique within the process (counter), across processes (pid) and across
    /// restarts (time); WeChat Pay needs it unique, not secret.
    fn nonce(&self) -> String {
        let count = self.nonces.fetch_add(1, Ordering::Relaxed);
        let seed = format!(
            "{}:{}:{count}",
            self.context.clock.now().unix_millis(),
            std::process::id()
        );
        hex(&sha256(seed.as_bytes()))[..32].to_ascii_uppercase()
    }

    /// Send a signed request to `path_and_query` (below the base URL) and read the answer.
    async fn send_signed(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<String>,
    ) -> Result<HttpReply, GatewayError> {
        let url = reqwest::Url::parse(&self.context.http.url(path_and_query))
            .map_err(|e| GatewayError::Rejected(format!("bad API URL: {e}")))?;
        // The signature covers the path and query exactly as they go on the wire.
        let signed_path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let timestamp_s = self.context.clock.now().unix_millis().div_euclid(1000);
        let nonce = self.nonce();
        let body = body.unwrap_or_default();
        let message = transformers::request_message(
            method.as_str(),
            &signed_path,
            timestamp_s,
            &nonce,
            &body,
        );
        let signature_b64 = b64(&rsa_sha256_sign(&self.merchant_key, message.as_bytes()));
        let authorization = Authorization {
            mch_id: &self.mch_id,
            nonce: &nonce,
            signature_b64: &signature_b64,
            timestamp_s,
            serial_no: &self.merchant_serial_no,
        };
        let mut request = self
            .context
            .http
            .client()
            .request(method.clone(), url)
            .header(AUTHORIZATION, authorization.header_value())
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, USER_AGENT_VALUE);
        if method == Method::POST {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        self.context.http.send(request).await
    }

    /// Refuse a 2xx answer whose WeChat Pay signature does not verify.
    fn verify_answer(&self, reply: &HttpReply) -> Result<(), GatewayError> {
        let signed = WebhookRequest {
            headers: reply
                .headers
                .iter()
                .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
                .collect::<BTreeMap<_, _>>(),
            body: reply.body.clone(),
        };
        webhook::verify(&self.scheme(), &signed, self.context.clock.now())
            .map(|_| ())
            .map_err(|e| GatewayError::BadResponse(format!("answer signature: {e}")))
    }

    /// A 2xx answer whose signature verifies; the provider's error otherwise.
    fn accept(&self, reply: HttpReply) -> Result<HttpReply, GatewayError> {
        if !(200..300).contains(&reply.status) {
            return Err(transformers::error_from_reply(reply.status, &reply.body));
        }
        self.verify_answer(&reply)?;
        Ok(reply)
    }

    /// Decrypt a notification resource with the APIv3 key.
    fn decrypt(&self, resource: &Resource) -> Result<Vec<u8>, WebhookError> {
        if resource.algorithm != transformers::AEAD_ALGORITHM {
            return Err(WebhookError::Malformed("unknown resource algorithm".into()));
        }
        let sealed = unb64(&resource.ciphertext)
            .ok_or_else(|| WebhookError::Malformed("ciphertext is not base64".into()))?;
        let opened = aes_256_gcm_decrypt(
            self.api_v3_key.expose_secret().as_bytes(),
            resource.nonce.as_bytes(),
            resource.associated_data.as_bytes(),
            &sealed,
        )
        .map_err(|_| WebhookError::Malformed("resource cannot be decrypted".into()))?;
        opened.ok_or_else(|| WebhookError::Malformed("resource cannot be decrypted".into()))
    }

    /// The events of a verified notification.
    fn events(&self, notification: &Notification) -> Result<Vec<PaymentEvent>, WebhookError> {
        let handled = [
            transformers::EVENT_TRANSACTION_SUCCESS,
            transformers::EVENT_REFUND_SUCCESS,
        ];
        if !handled.contains(&notification.event_type.as_str()) {
            return Ok(Vec::new());
        }
        let resource = notification
            .resource
            .as_ref()
            .ok_or_else(|| WebhookError::Malformed("notification without resource".into()))?;
        let plain = self.decrypt(resource)?;
        if notification.event_type == transformers::EVENT_TRANSACTION_SUCCESS {
            let transaction: Transaction = serde_json::from_slice(&plain)
                .map_err(|e| WebhookError::Malformed(unreadable("transaction", &e)))?;
            return Ok(vec![transformers::transaction_event(
                &transaction,
                &self.mch_id,
            )?]);
        }
        let refund: RefundNotice = serde_json::from_slice(&plain)
            .map_err(|e| WebhookError::Malformed(unreadable("refund", &e)))?;
        let fallback = notification
            .create_time
            .as_deref()
            .and_then(transformers::parse_time)
            .unwrap_or_else(|| self.context.clock.now());
        Ok(transformers::refund_event(&refund, &self.mch_id, fallback)?
            .into_iter()
            .collect())
    }
}

#[async_trait]
impl PaymentGateway for WalletQrGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::WalletQr
    }

    fn is_sandbox(&self) -> bool {
        self.context.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        if request.snapshot.plan_type == PlanType::Recurring {
            return Err(GatewayError::NotSupported);
        }
        let name = &request.plan.text_for(&Locale::english()).name;
        let name = if name.trim().is_empty() {
            request.plan.id().as_str()
        } else {
            name.as_str()
        };
        let order = NativeOrderRequest {
            appid: self.app_id.clone(),
            mchid: self.mch_id.clone(),
            description: transformers::description(name),
            out_trade_no: transformers::out_trade_no(&request.order_id)?,
            time_expire: Some(transformers::beijing_rfc3339(request.expires_at)?),
            notify_url: request.notify_url.clone(),
            amount: OrderAmount {
                total: transformers::fen(&request.snapshot.price)?,
                currency: transformers::CURRENCY,
            },
        };
        let body = serde_json::to_string(&order)
            .map_err(|e| GatewayError::Rejected(format!("order body: {e}")))?;
        let reply = self
            .send_signed(Method::POST, "/v3/pay/transactions/native", Some(body))
            .await?;
        let created: NativeOrderResponse = self.accept(reply)?.json()?;
        if created.code_url.is_empty() {
            return Err(GatewayError::BadResponse("empty code_url".into()));
        }
        Ok(Checkout {
            provider_reference: None,
            target: CheckoutTarget::QrCode(created.code_url),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let out_trade_no = transformers::out_trade_no(&payment.order_id)?;
        let query = serde_urlencoded::to_string([("mchid", self.mch_id.as_str())])
            .map_err(|e| GatewayError::Rejected(format!("query: {e}")))?;
        let path = format!("/v3/pay/transactions/out-trade-no/{out_trade_no}?{query}");
        let reply = self.send_signed(Method::GET, &path, None).await?;
        if reply.status == 404 {
            // ORDER_NOT_EXIST: the order never reached WeChat Pay; it stays pending until our
            // own expiry, like every state that is not an explicit success or failure.
            return Ok(PaymentStatus::Pending);
        }
        let transaction: Transaction = self.accept(reply)?.json()?;
        if transaction.out_trade_no != out_trade_no || transaction.mchid != self.mch_id {
            return Err(GatewayError::BadResponse(
                "answer is for another order or merchant".into(),
            ));
        }
        transformers::payment_status(&transaction)
    }

    async fn close_payment(&self, payment: &PaymentRef) -> Result<(), GatewayError> {
        let out_trade_no = transformers::out_trade_no(&payment.order_id)?;
        let body = serde_json::to_string(&CloseRequest {
            mchid: self.mch_id.clone(),
        })
        .map_err(|e| GatewayError::Rejected(format!("close body: {e}")))?;
        let path = format!("/v3/pay/transactions/out-trade-no/{out_trade_no}/close");
        let reply = self.send_signed(Method::POST, &path, Some(body)).await?;
        self.accept(reply).map(|_| ())
    }

    async fn cancel_subscription(
        &self,
        _provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        Err(GatewayError::NotSupported)
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if request.body.len() > MAX_NOTIFICATION_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        webhook::verify(&self.scheme(), request, self.context.clock.now())?;
        let notification: Notification = serde_json::from_slice(&request.body)
            .map_err(|e| WebhookError::Malformed(unreadable("notification", &e)))?;
        let events = self.events(&notification)?;
        Ok(VerifiedWebhook {
            event_id: notification.id,
            event_type: notification.event_type,
            events,
            foreign: None,
        })
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                status: 200,
                content_type: "text/plain; charset=utf-8",
                body: String::new(),
            },
            AckFor::Refused(reason) => {
                let status = match reason {
                    WebhookError::Malformed(_) => 400,
                    WebhookError::MissingSignature
                    | WebhookError::BadSignature
                    | WebhookError::Stale => 401,
                };
                let body = serde_json::json!({ "code": "FAIL", "message": reason.to_string() });
                WebhookAck {
                    status,
                    content_type: "application/json",
                    body: body.to_string(),
                }
            }
        }
    }
}

/// WeChat Pay's signature on answers and notifications.
struct WechatSignature<'a> {
    key: &'a PublicKey,
    key_id: &'a str,
}

/// Header names (lower case, as [`WebhookRequest`] keeps them).
const TIMESTAMP_HEADER: &str = "wechatpay-timestamp";
const NONCE_HEADER: &str = "wechatpay-nonce";
const SIGNATURE_HEADER: &str = "wechatpay-signature";
const SERIAL_HEADER: &str = "wechatpay-serial";

impl WebhookScheme for WechatSignature<'_> {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let timestamp_s = webhook::header(request, TIMESTAMP_HEADER)?
            .trim()
            .parse::<i64>()
            .map_err(|_| WebhookError::MissingSignature)?;
        let nonce = webhook::header(request, NONCE_HEADER)?;
        let signature = unb64(webhook::header(request, SIGNATURE_HEADER)?)
            .ok_or(WebhookError::MissingSignature)?;
        // Public-key mode: the serial names the key; any other key is not one we trust.
        if webhook::header(request, SERIAL_HEADER)?.trim() != self.key_id {
            return Err(WebhookError::BadSignature);
        }
        if nonce.is_empty() || signature.is_empty() {
            return Err(WebhookError::MissingSignature);
        }
        Ok(SignedParts {
            timestamp_s: Some(timestamp_s),
            signatures: vec![signature],
            extras: vec![("nonce".to_owned(), nonce.to_owned())],
        })
    }

    fn message(
        &self,
        request: &WebhookRequest,
        parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        let timestamp_s = parts.timestamp_s.ok_or(WebhookError::MissingSignature)?;
        let nonce = parts.extra("nonce").ok_or(WebhookError::MissingSignature)?;
        Ok(transformers::response_message(
            timestamp_s,
            nonce,
            &request.body,
        ))
    }

    fn verifier(&self) -> Verifier<'_> {
        Verifier::RsaSha256(self.key)
    }

    fn tolerance_s(&self) -> Option<i64> {
        Some(TOLERANCE_S)
    }
}
