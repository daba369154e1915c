//! `wallet_qr`: WeChat Pay APIv3, Native (QR code) payment, direct merchant, public-key or
//! platform-certificate mode (or both, while a merchant switches).
//!
//! - Checkout: `POST /v3/pay/transactions/native` → `code_url`, shown as a QR code.
//! - Status: `GET /v3/pay/transactions/out-trade-no/{id}?mchid=…`; close: `POST …/close` (204).
//! - Refund: `POST /v3/refund/domestic/refunds` with `out_refund_no` = our refund id and our
//!   `notify_url`; WeChat Pay's `refund_id` names it in the answer and the notification.
//! - Every request carries `Authorization: WECHATPAY2-SHA256-RSA2048 …`, an RSA-SHA256
//!   signature by the merchant API key over `METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n`,
//!   and, in public-key mode, `Wechatpay-Serial: PUB_KEY_ID_…` (the key WeChat Pay answers
//!   with).
//! - Every 2xx answer and every notification is signed by WeChat Pay
//!   (`Wechatpay-Timestamp/Nonce/Signature/Serial`, over `TIMESTAMP\nNONCE\nBODY\n`) with the
//!   platform public key or a platform certificate, chosen by `Wechatpay-Serial`; certificates
//!   come from `GET /v3/certificates` (decrypted with the APIv3 key), downloaded again for an
//!   unknown serial at most once a minute. Timestamps are refused from 300 s either way, as
//!   WeChat Pay's SDK does.
//! - Notifications carry the transaction AES-256-GCM-encrypted with the APIv3 key; one for
//!   another `mchid` or `appid` is acknowledged as foreign and changes nothing.
//! - Subscriptions do not exist in this protocol, nor does a test mode. Credential check: a
//!   look-up of an order that does not exist, answered `ORDER_NOT_EXIST` once the signature is
//!   accepted.
//!
//! Wire formats live in [`transformers`]; the protocol is described in
//! `docs/providers/wallet_qr.md`.

pub mod transformers;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, CredentialCheck, CredentialMode,
    GatewayError, PaymentEvent, PaymentGateway, PaymentRef, PaymentStatus, RecordedWebhook,
    RefundRequest, RefundStarted, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{PlanType, ProviderId, Timestamp};
use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::http::HttpReply;
use crate::shared::signing::{
    PrivateKey, PublicKey, aes_256_gcm_decrypt, b64, hex, private_key, public_key, rsa_sha256_sign,
    sha256, unb64,
};
use crate::shared::time::unix_seconds;
use crate::shared::wire::{plan_name, unreadable};
use crate::shared::{ConfigError, GatewayContext, HttpSettings, TestModeSetting};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{
    Authorization, CertificateList, CloseRequest, NativeOrderRequest, NativeOrderResponse,
    Notification, OrderAmount, RefundAnswer, RefundCreateAmount, RefundCreateRequest, RefundNotice,
    Resource, Transaction,
};

/// WeChat Pay's production API.
pub const DEFAULT_BASE_URL: &str = "https://api.mch.weixin.qq.com";
/// How far a signature timestamp may be from now, in seconds, either way: WeChat Pay's own
/// SDK (wechatpay-go `validateHTTPMessage`, `checkWechatPayHeader`) refuses
/// `|now - Wechatpay-Timestamp| >= 300`, so 299 s is the last accepted distance.
pub const TOLERANCE_S: i64 = 299;
/// The largest notification body read, in bytes.
pub const MAX_NOTIFICATION_BYTES: usize = 64 * 1024;
/// The APIv3 key is 32 ASCII characters (the AES-256 key).
const API_V3_KEY_BYTES: usize = 32;
const PROVIDER: &str = "wallet_qr";
const USER_AGENT_VALUE: &str = concat!("tally-gateways/", env!("CARGO_PKG_VERSION"));
/// How long after asking for the platform certificates an unknown serial may make the gateway
/// ask again, in milliseconds: a burst of notifications under a serial nobody knows costs one
/// download per minute at most.
pub const CERTIFICATE_REFRESH_MS: i64 = 60_000;
/// The most platform certificates kept from one download.
const MAX_CERTIFICATES: usize = 16;
/// Where the platform certificates are listed.
const CERTIFICATES_PATH: &str = "/v3/certificates";
/// The `out_trade_no` a credential check looks up: no order of Tally's has it (Tally's order ids
/// are `ord_…`), so WeChat Pay answers `ORDER_NOT_EXIST` once it has accepted the signature.
pub const CREDENTIAL_PROBE_OUT_TRADE_NO: &str = "tally_credential_check";
/// The request header naming the platform key WeChat Pay should answer with.
const WECHATPAY_SERIAL: &str = "Wechatpay-Serial";

/// `[providers.wallet_qr]` in `tally.toml`. `Debug` shows the private key and the APIv3 key
/// as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
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
    /// The WeChat Pay public key (PEM), which signs answers and notifications in public-key
    /// mode. Set together with its id, or neither.
    #[serde(default)]
    pub platform_public_key: Option<String>,
    /// Its id, `PUB_KEY_ID_…`, sent as `Wechatpay-Serial`.
    #[serde(default)]
    pub platform_public_key_id: Option<String>,
    /// Platform-certificate mode: download WeChat Pay's platform certificates
    /// (`GET /v3/certificates`, decrypted with the APIv3 key) and verify answers and
    /// notifications signed by a certificate serial with them. Default `false`. With the
    /// public key as well, both are trusted (a merchant switching from certificates to the
    /// public key); at least one of the two is required.
    #[serde(default)]
    pub platform_certificates: bool,
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
        let base_url = self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        HttpSettings::with_timeout(base_url, self.timeout_ms)
    }

    /// Always `None`: WeChat Pay has no test mode or sandbox (merchants test with real
    /// payments of 0.01 CNY), so its credentials are always live ones.
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        None
    }
}

/// The WeChat Pay Native gateway.
pub struct WalletQrGateway {
    app_id: String,
    mch_id: String,
    merchant_serial_no: String,
    merchant_key: PrivateKey,
    api_v3_key: SecretString,
    /// The WeChat Pay public key and its id (public-key mode).
    platform_public_key: Option<(PublicKey, String)>,
    /// The downloaded platform certificates (certificate mode).
    certificates: Option<Mutex<CertificateStore>>,
    context: GatewayContext,
    nonces: AtomicU64,
}

/// The platform certificates known so far, by normalized serial.
#[derive(Default)]
struct CertificateStore {
    by_serial: BTreeMap<String, PlatformCertificate>,
    /// When the list was last asked for (successfully or not).
    asked_at: Option<Timestamp>,
}

/// One platform certificate's key and validity.
#[derive(Clone)]
struct PlatformCertificate {
    key: PublicKey,
    effective: Timestamp,
    expires: Timestamp,
}

impl CertificateStore {
    fn key(&self, serial: &str, now: Timestamp) -> Option<PublicKey> {
        self.by_serial
            .get(serial)
            .filter(|c| c.effective <= now && now <= c.expires)
            .map(|c| c.key.clone())
    }
}

impl std::fmt::Debug for WalletQrGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalletQrGateway")
            .field("mch_id", &self.mch_id)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl WalletQrGateway {
    /// A gateway for `settings`; keys are read once, here.
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting that is missing or unreadable (never its value).
    pub fn new(settings: &WalletQrSettings, context: GatewayContext) -> Result<Self, ConfigError> {
        let merchant_key =
            private_key(settings.merchant_private_key.expose_secret()).map_err(|_| {
                ConfigError::new(
                    PROVIDER,
                    "merchantPrivateKey",
                    "is not an RSA private key (PEM)",
                )
            })?;
        let platform_public_key = platform_public_key(settings)?;
        if platform_public_key.is_none() && !settings.platform_certificates {
            return Err(ConfigError::new(
                PROVIDER,
                "platformPublicKey",
                "is required unless platformCertificates is true",
            ));
        }
        if settings.api_v3_key.expose_secret().len() != API_V3_KEY_BYTES {
            return Err(ConfigError::new(
                PROVIDER,
                "apiV3Key",
                "must be 32 characters",
            ));
        }
        Ok(Self {
            app_id: ConfigError::required(PROVIDER, "appId", &settings.app_id)?,
            mch_id: ConfigError::required(PROVIDER, "mchId", &settings.mch_id)?,
            merchant_serial_no: ConfigError::required(
                PROVIDER,
                "merchantSerialNo",
                &settings.merchant_serial_no,
            )?,
            merchant_key,
            api_v3_key: settings.api_v3_key.clone(),
            platform_public_key,
            certificates: settings
                .platform_certificates
                .then(|| Mutex::new(CertificateStore::default())),
            context: context.for_provider(ProviderId::WalletQr),
            nonces: AtomicU64::new(0),
        })
    }

    /// The key that signed with `serial`: the public key when `serial` is its id, otherwise a
    /// platform certificate (certificate mode), downloading the list again when the serial is
    /// unknown, at most once per [`CERTIFICATE_REFRESH_MS`].
    async fn platform_key(&self, serial: &str) -> Option<PublicKey> {
        if let Some((key, id)) = &self.platform_public_key
            && serial == id
        {
            return Some(key.clone());
        }
        let store = self.certificates.as_ref()?;
        let serial = transformers::normalized_serial(serial)?;
        let now = self.context.clock.now();
        {
            let mut known = lock(store);
            if let Some(key) = known.key(&serial, now) {
                return Some(key);
            }
            let recently = known.asked_at.is_some_and(|at| {
                (now.unix_millis() - at.unix_millis()).abs() < CERTIFICATE_REFRESH_MS
            });
            if recently {
                return None;
            }
            known.asked_at = Some(now);
        }
        match self.download_certificates().await {
            Ok(downloaded) => {
                let mut known = lock(store);
                known.by_serial = downloaded;
                known.key(&serial, now)
            }
            Err(e) => {
                tracing::warn!(error = %e, "wallet_qr: platform certificates could not be downloaded");
                None
            }
        }
    }

    /// `GET /v3/certificates`: every certificate that decrypts with the APIv3 key, is the
    /// certificate its `serial_no` says and is valid now; the answer must be signed by one of
    /// them (or the public key).
    async fn download_certificates(
        &self,
    ) -> Result<BTreeMap<String, PlatformCertificate>, GatewayError> {
        let reply = self
            .send_signed(Method::GET, CERTIFICATES_PATH, None)
            .await?;
        if !(200..300).contains(&reply.status) {
            return Err(transformers::error_from_reply(reply.status, &reply.body));
        }
        let list: CertificateList = reply.json()?;
        let now = self.context.clock.now();
        let mut certificates = BTreeMap::new();
        for item in list.data.iter().take(MAX_CERTIFICATES) {
            let Some(serial) = transformers::normalized_serial(&item.serial_no) else {
                continue;
            };
            let Ok(pem) = self.decrypt(&item.encrypt_certificate) else {
                continue;
            };
            let Some((cert_serial, spki)) = std::str::from_utf8(&pem)
                .ok()
                .and_then(transformers::certificate_key)
            else {
                continue;
            };
            let (Some(effective), Some(expires), Ok(key)) = (
                transformers::parse_time(&item.effective_time),
                transformers::parse_time(&item.expire_time),
                public_key(&b64(&spki)),
            ) else {
                continue;
            };
            if cert_serial != serial || now < effective || expires < now {
                continue;
            }
            certificates.insert(
                serial,
                PlatformCertificate {
                    key,
                    effective,
                    expires,
                },
            );
        }
        let signed = lowercase_headers(&reply);
        let serial = webhook::header(&signed, SERIAL_HEADER)
            .map_err(|_| GatewayError::BadResponse("certificates answer is not signed".into()))?
            .trim()
            .to_owned();
        let key = match &self.platform_public_key {
            Some((key, id)) if *id == serial => Some(key.clone()),
            _ => transformers::normalized_serial(&serial)
                .and_then(|s| certificates.get(&s))
                .map(|c| c.key.clone()),
        }
        .ok_or_else(|| {
            GatewayError::BadResponse("certificates answer is signed by no key it carries".into())
        })?;
        let scheme = WechatSignature {
            key: &key,
            serial: &serial,
        };
        webhook::verify(&scheme, &signed, now).map_err(|e| {
            GatewayError::BadResponse(format!("certificates answer signature: {e}"))
        })?;
        Ok(certificates)
    }

    /// Verify WeChat Pay's signature on a notification or answer: the headers are checked and
    /// the timestamp is in the window before the key is looked up (so that junk never makes
    /// the gateway download certificates).
    async fn verify_signed(&self, request: &WebhookRequest) -> Result<(), WebhookError> {
        let now = self.context.clock.now();
        let serial = webhook::header(request, SERIAL_HEADER)?.trim().to_owned();
        let unchecked = Unchecked;
        let parts = unchecked.extract(request)?;
        let timestamp_s = parts.timestamp_s.ok_or(WebhookError::MissingSignature)?;
        if (unix_seconds(now) - timestamp_s).abs() > TOLERANCE_S {
            return Err(WebhookError::Stale);
        }
        let key = self
            .platform_key(&serial)
            .await
            .ok_or(WebhookError::BadSignature)?;
        let scheme = WechatSignature {
            key: &key,
            serial: &serial,
        };
        webhook::verify(&scheme, request, now).map(|_| ())
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
        let timestamp_s = unix_seconds(self.context.clock.now());
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
        if let Some((_, id)) = &self.platform_public_key {
            // The platform key WeChat Pay should sign its answer with, as wechatpayv3 sends it
            // in public-key mode (`Core.request`); without it (certificate mode) WeChat Pay
            // signs with a platform certificate.
            request = request.header(WECHATPAY_SERIAL, id);
        }
        if method == Method::POST {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        self.context.http.send(request).await
    }

    /// Refuse a 2xx answer whose WeChat Pay signature does not verify.
    async fn verify_answer(&self, reply: &HttpReply) -> Result<(), GatewayError> {
        self.verify_signed(&lowercase_headers(reply))
            .await
            .map_err(|e| GatewayError::BadResponse(format!("answer signature: {e}")))
    }

    /// A 2xx answer whose signature verifies; the provider's error otherwise.
    async fn accept(&self, reply: HttpReply) -> Result<HttpReply, GatewayError> {
        if !(200..300).contains(&reply.status) {
            return Err(transformers::error_from_reply(reply.status, &reply.body));
        }
        self.verify_answer(&reply).await?;
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

    /// The events of a verified notification, or why it is another merchant's or app's.
    fn events(&self, notification: &Notification) -> Result<Reading, WebhookError> {
        let handled = [
            transformers::EVENT_TRANSACTION_SUCCESS,
            transformers::EVENT_REFUND_SUCCESS,
        ];
        if !handled.contains(&notification.event_type.as_str()) {
            return Ok(Reading::Events(Vec::new()));
        }
        let resource = notification
            .resource
            .as_ref()
            .ok_or_else(|| WebhookError::Malformed("notification without resource".into()))?;
        let plain = self.decrypt(resource)?;
        if notification.event_type == transformers::EVENT_TRANSACTION_SUCCESS {
            let transaction: Transaction = serde_json::from_slice(&plain)
                .map_err(|e| WebhookError::Malformed(unreadable("transaction", &e)))?;
            if let Some(why) =
                transformers::foreign_transaction(&transaction, &self.mch_id, &self.app_id)
            {
                return Ok(Reading::Foreign(why));
            }
            return Ok(Reading::Events(vec![transformers::transaction_event(
                &transaction,
                &self.mch_id,
            )?]));
        }
        let refund: RefundNotice = serde_json::from_slice(&plain)
            .map_err(|e| WebhookError::Malformed(unreadable("refund", &e)))?;
        if let Some(why) = transformers::foreign_refund(&refund, &self.mch_id) {
            return Ok(Reading::Foreign(why));
        }
        let fallback = notification
            .create_time
            .as_deref()
            .and_then(transformers::parse_time)
            .unwrap_or_else(|| self.context.clock.now());
        Ok(Reading::Events(
            transformers::refund_event(&refund, &self.mch_id, fallback)?
                .into_iter()
                .collect(),
        ))
    }
}

/// What a verified notification says.
enum Reading {
    /// Ours: these events (none for types Tally does not handle).
    Events(Vec<PaymentEvent>),
    /// Validly signed, but for another merchant or app: why.
    Foreign(String),
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
        let name = plan_name(request);
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
        let created: NativeOrderResponse = self.accept(reply).await?.json()?;
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
        let transaction: Transaction = self.accept(reply).await?.json()?;
        if transaction.out_trade_no != out_trade_no || transaction.mchid != self.mch_id {
            return Err(GatewayError::BadResponse(
                "answer is for another order or merchant".into(),
            ));
        }
        transformers::payment_status(&transaction)
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // A signed look-up of an order that does not exist: `ORDER_NOT_EXIST` comes only after
        // WeChat Pay has checked the merchant, its certificate serial and the signature
        // (`SIGN_ERROR` otherwise); nothing changes.
        let query = serde_urlencoded::to_string([("mchid", self.mch_id.as_str())])
            .map_err(|e| GatewayError::Rejected(format!("query: {e}")))?;
        let path =
            format!("/v3/pay/transactions/out-trade-no/{CREDENTIAL_PROBE_OUT_TRADE_NO}?{query}");
        let reply = self.send_signed(Method::GET, &path, None).await?;
        let code = transformers::error_code(&reply.body);
        match reply.status {
            404 if code.as_deref() == Some(transformers::ORDER_NOT_EXIST) => {}
            200..=299 => {
                self.accept(reply).await?;
            }
            400..=599 => return Err(transformers::error_from_reply(reply.status, &reply.body)),
            status => {
                return Err(GatewayError::BadResponse(format!(
                    "HTTP {status} to an order look-up"
                )));
            }
        }
        Ok(CredentialCheck {
            mode: CredentialMode::Live,
            detail: "GET /v3/pay/transactions/out-trade-no/{probe} accepted the signature \
                     (ORDER_NOT_EXIST)"
                .to_owned(),
        })
    }

    async fn close_payment(&self, payment: &PaymentRef) -> Result<(), GatewayError> {
        let out_trade_no = transformers::out_trade_no(&payment.order_id)?;
        let body = serde_json::to_string(&CloseRequest {
            mchid: self.mch_id.clone(),
        })
        .map_err(|e| GatewayError::Rejected(format!("close body: {e}")))?;
        let path = format!("/v3/pay/transactions/out-trade-no/{out_trade_no}/close");
        let reply = self.send_signed(Method::POST, &path, Some(body)).await?;
        self.accept(reply).await.map(|_| ())
    }

    async fn cancel_subscription(
        &self,
        _provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        Err(GatewayError::NotSupported)
    }

    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let out_trade_no = transformers::out_trade_no(&request.payment.order_id)?;
        let out_refund_no = transformers::out_refund_no(&request.refund_id)?;
        let refund = transformers::fen(&request.amount)?;
        let total = transformers::fen(&request.paid)?;
        if refund > total {
            return Err(GatewayError::Rejected(
                "refund is more than the order paid".into(),
            ));
        }
        let notify_url = request.notify_url.trim();
        let body = serde_json::to_string(&RefundCreateRequest {
            out_trade_no: out_trade_no.clone(),
            out_refund_no: out_refund_no.clone(),
            reason: transformers::refund_reason(&request.reason),
            notify_url: (!notify_url.is_empty()).then(|| notify_url.to_owned()),
            amount: RefundCreateAmount {
                refund,
                total,
                currency: transformers::CURRENCY,
            },
        })
        .map_err(|e| GatewayError::Rejected(format!("refund body: {e}")))?;
        let reply = self
            .send_signed(Method::POST, "/v3/refund/domestic/refunds", Some(body))
            .await?;
        let answer: RefundAnswer = self.accept(reply).await?.json()?;
        if answer.out_refund_no != out_refund_no
            || answer
                .out_trade_no
                .as_deref()
                .is_some_and(|o| o != out_trade_no)
        {
            return Err(GatewayError::BadResponse(
                "answer is for another refund or order".into(),
            ));
        }
        // WeChat Pay's `refund_id` is what its REFUND.SUCCESS notification names the refund by
        // (see `transformers::refund_event`), so the service can tell that notification is a
        // repeat of a refund it applied already.
        let provider_refund_id = transformers::usable_refund_id(answer.refund_id.as_deref())
            .ok_or_else(|| GatewayError::BadResponse("refund without a usable refund_id".into()))?
            .to_owned();
        Ok(RefundStarted {
            provider_refund_id: Some(provider_refund_id),
            state: transformers::refund_state(answer.status),
        })
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if request.body.len() > MAX_NOTIFICATION_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        self.verify_signed(request).await?;
        self.parse_verified(&request.body)
    }

    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if recorded.body.len() > MAX_NOTIFICATION_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        self.parse_verified(&recorded.body)
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "text/plain; charset=utf-8",
                body: String::new(),
            },
            AckFor::Refused(reason) => {
                let verdict = match reason {
                    WebhookError::Malformed(_) => AckVerdict::Refused,
                    WebhookError::MissingSignature
                    | WebhookError::BadSignature
                    | WebhookError::Stale => AckVerdict::Unauthenticated,
                };
                let body = serde_json::json!({ "code": "FAIL", "message": reason.to_string() });
                WebhookAck {
                    verdict,
                    content_type: "application/json",
                    body: body.to_string(),
                }
            }
        }
    }
}

/// WeChat Pay's signature on answers and notifications, by the key `serial` names.
struct WechatSignature<'a> {
    key: &'a PublicKey,
    serial: &'a str,
}

/// The headers and body of an answer as a [`WebhookRequest`] (names lower-cased).
fn lowercase_headers(reply: &HttpReply) -> WebhookRequest {
    WebhookRequest {
        headers: reply
            .headers
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
            .collect::<BTreeMap<_, _>>(),
        body: reply.body.clone(),
    }
}

fn lock(store: &Mutex<CertificateStore>) -> std::sync::MutexGuard<'_, CertificateStore> {
    store
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Header names (lower case, as [`WebhookRequest`] keeps them).
const TIMESTAMP_HEADER: &str = "wechatpay-timestamp";
const NONCE_HEADER: &str = "wechatpay-nonce";
const SIGNATURE_HEADER: &str = "wechatpay-signature";
const SERIAL_HEADER: &str = "wechatpay-serial";

/// The signature headers, read before any key is chosen.
struct Unchecked;

impl Unchecked {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let timestamp_s = webhook::header(request, TIMESTAMP_HEADER)?
            .trim()
            .parse::<i64>()
            .map_err(|_| WebhookError::MissingSignature)?;
        let nonce = webhook::header(request, NONCE_HEADER)?;
        let signature = unb64(webhook::header(request, SIGNATURE_HEADER)?)
            .ok_or(WebhookError::MissingSignature)?;
        if nonce.is_empty() || signature.is_empty() {
            return Err(WebhookError::MissingSignature);
        }
        Ok(SignedParts {
            timestamp_s: Some(timestamp_s),
            signatures: vec![signature],
            extras: vec![("nonce".to_owned(), nonce.to_owned())],
        })
    }
}

impl WebhookScheme for WechatSignature<'_> {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        // The serial names the key; a signature under any other serial is not one we trust.
        if webhook::header(request, SERIAL_HEADER)?.trim() != self.serial {
            return Err(WebhookError::BadSignature);
        }
        Unchecked.extract(request)
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

/// WeChat Pay's platform public key and its id (`platformPublicKey`, `platformPublicKeyId`):
/// both or neither.
fn platform_public_key(
    settings: &WalletQrSettings,
) -> Result<Option<(PublicKey, String)>, ConfigError> {
    match (
        settings.platform_public_key.as_deref().map(str::trim),
        settings.platform_public_key_id.as_deref().map(str::trim),
    ) {
        (None | Some(""), None | Some("")) => Ok(None),
        (Some(key), Some(id)) if !key.is_empty() && !id.is_empty() => {
            let key = public_key(key).map_err(|_| {
                ConfigError::new(
                    PROVIDER,
                    "platformPublicKey",
                    "is not an RSA public key (PEM)",
                )
            })?;
            Ok(Some((key, id.to_owned())))
        }
        (None | Some(""), _) => Err(ConfigError::new(
            PROVIDER,
            "platformPublicKey",
            "is required with platformPublicKeyId",
        )),
        _ => Err(ConfigError::new(
            PROVIDER,
            "platformPublicKeyId",
            "is required with platformPublicKey",
        )),
    }
}

impl WalletQrGateway {
    /// Read a verified notification (live or recorded): decrypt its resource, check the
    /// merchant, and say what it means.
    fn parse_verified(&self, body: &[u8]) -> Result<VerifiedWebhook, WebhookError> {
        let notification: Notification = serde_json::from_slice(body)
            .map_err(|e| WebhookError::Malformed(unreadable("notification", &e)))?;
        let (events, foreign) = match self.events(&notification)? {
            Reading::Events(events) => (events, None),
            Reading::Foreign(why) => (Vec::new(), Some(why)),
        };
        Ok(VerifiedWebhook {
            event_id: notification.id,
            event_type: notification.event_type,
            events,
            foreign,
        })
    }
}
