//! `wallet_web`: Alipay PC website payment (`alipay.trade.page.pay`) on the open-platform
//! gateway, RSA2 (RSA-SHA256) keys.
//!
//! - Checkout: no server round-trip; the buyer is redirected to the signed gateway URL
//!   (`{base}/gateway.do?…&sign=…`), where Alipay creates the trade.
//! - Status: `alipay.trade.query`; close: `alipay.trade.close`; refund: `alipay.trade.refund`
//!   with `out_request_no` = our refund id (form POSTs to the gateway); their answers are
//!   signed by Alipay over the raw `…_response` JSON and checked here.
//! - Notifications are form POSTs signed by Alipay over the sorted parameters without `sign`
//!   and `sign_type`; they go through the fixed [`webhook::verify`] pipeline (Alipay sends no
//!   signing time, so there is no tolerance window; `notify_id` deduplicates). One naming
//!   another `app_id`, or another `seller_id` when `sellerId` is set, is acknowledged as
//!   foreign and changes nothing.
//! - Subscriptions do not exist in this protocol. Credential check: `alipay.trade.query` of a
//!   trade that does not exist, answered `ACQ.TRADE_NOT_EXIST` once app id and signature are
//!   accepted; test mode is a base URL on Alipay's sandbox.
//!
//! Wire formats live in [`transformers`]; the protocol is described in
//! `docs/providers/wallet_web.md`.

pub mod transformers;

use std::collections::BTreeMap;

use application::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, CredentialCheck, CredentialMode,
    GatewayError, PaymentGateway, PaymentRef, PaymentStatus, RecordedWebhook, RefundRequest,
    RefundStarted, VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest,
};
use async_trait::async_trait;
use domain::{PlanType, ProviderId};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::shared::signing::{
    PrivateKey, PublicKey, b64, private_key, public_key, rsa_sha256_sign, rsa_sha256_verify, unb64,
};
use crate::shared::wire::{plan_name, unreadable};
use crate::shared::{ConfigError, GatewayContext, HttpSettings, TestModeSetting, names_host};
use crate::webhook::{self, SignedParts, Verifier, WebhookScheme};
use transformers::{
    ApiResponse, CommonParams, Notification, PagePayContent, RefundContent, TradeRef,
};

/// Alipay's production open-platform host (the gateway is `{base}/gateway.do`).
pub const DEFAULT_BASE_URL: &str = "https://openapi.alipay.com";
/// The gateway path below the base URL.
pub const GATEWAY_PATH: &str = "/gateway.do";
/// The largest notification body read, in bytes.
pub const MAX_NOTIFICATION_BYTES: usize = 64 * 1024;
const PROVIDER: &str = "wallet_web";
/// The `out_trade_no` a credential check queries: no order of Tally's has it (Tally's order ids
/// are `ord_…`), so Alipay answers `ACQ.TRADE_NOT_EXIST` once it has accepted the app id and
/// the signature.
pub const CREDENTIAL_PROBE_OUT_TRADE_NO: &str = "tally_credential_check";

/// `[providers.wallet_web]` in `tally.toml`. `Debug` shows the private key as `[REDACTED]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalletWebSettings {
    /// The application id (`app_id`).
    pub app_id: String,
    /// The application private key (RSA2): bare base64 PKCS#8 as Alipay's key tool writes it,
    /// or PEM.
    pub app_private_key: SecretString,
    /// The Alipay public key of the application (not the application public key): bare
    /// base64 or PEM.
    pub alipay_public_key: String,
    /// The merchant's Alipay user id (`2088…`, the `seller_id` of its trades). Optional: when
    /// set, a notification naming another seller is acknowledged and changes nothing.
    #[serde(default)]
    pub seller_id: Option<String>,
    /// The open-platform base URL; default [`DEFAULT_BASE_URL`].
    #[serde(default)]
    pub base_url: Option<String>,
    /// Total time for one API call, in milliseconds; default 10 000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl WalletWebSettings {
    /// Where the gateway is and how long to wait for it.
    #[must_use]
    pub fn http(&self) -> HttpSettings {
        let base_url = self.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL);
        HttpSettings::with_timeout(base_url, self.timeout_ms)
    }

    /// The setting that makes these test-mode credentials: a base URL on Alipay's sandbox
    /// (`openapi-sandbox.dl.alipaydev.com`, or the older `openapi.alipaydev.com`), whose apps and
    /// keys are the sandbox's own.
    #[must_use]
    pub fn test_mode(&self) -> Option<TestModeSetting> {
        self.base_url
            .as_deref()
            .is_some_and(is_alipay_sandbox)
            .then_some(TestModeSetting::new(
                "baseUrl",
                "is Alipay's sandbox gateway (alipaydev.com)",
            ))
    }
}

/// Whether `url` is on Alipay's sandbox domain.
fn is_alipay_sandbox(url: &str) -> bool {
    names_host(url, "alipaydev.com")
}

/// The Alipay PC website payment gateway.
pub struct WalletWebGateway {
    app_id: String,
    seller_id: Option<String>,
    app_key: PrivateKey,
    alipay_key: PublicKey,
    /// Whether the base URL is Alipay's sandbox (the mode a credential check reports).
    test_mode: bool,
    context: GatewayContext,
}

impl std::fmt::Debug for WalletWebGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalletWebGateway")
            .field("app_id", &self.app_id)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl WalletWebGateway {
    /// A gateway for `settings`; keys are read once, here.
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting that is missing or unreadable (never its value).
    pub fn new(settings: &WalletWebSettings, context: GatewayContext) -> Result<Self, ConfigError> {
        let app_id = ConfigError::required(PROVIDER, "appId", &settings.app_id)?;
        let app_key = private_key(settings.app_private_key.expose_secret()).map_err(|_| {
            ConfigError::new(
                PROVIDER,
                "appPrivateKey",
                "is not an RSA private key (base64 or PEM)",
            )
        })?;
        let alipay_key = public_key(&settings.alipay_public_key).map_err(|_| {
            ConfigError::new(
                PROVIDER,
                "alipayPublicKey",
                "is not an RSA public key (base64 or PEM)",
            )
        })?;
        let seller_id = settings
            .seller_id
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        Ok(Self {
            app_id,
            seller_id,
            app_key,
            alipay_key,
            test_mode: settings.test_mode().is_some(),
            context: context.for_provider(ProviderId::WalletWeb),
        })
    }

    /// The signed parameters of a call to `method`.
    fn signed_params(
        &self,
        method: &str,
        biz_content: String,
        extra: &[(&str, &str)],
    ) -> Result<BTreeMap<String, String>, GatewayError> {
        let common = CommonParams {
            app_id: &self.app_id,
            timestamp: transformers::beijing_time(self.context.clock.now())?,
        };
        let mut params = transformers::call_params(&common, method, biz_content, extra);
        let content = transformers::request_sign_content(&params);
        let sign = b64(&rsa_sha256_sign(&self.app_key, content.as_bytes()));
        params.insert("sign".to_owned(), sign);
        Ok(params)
    }

    /// Call `method` about `out_trade_no` and return its verified `…_response` object.
    async fn call(&self, method: &str, out_trade_no: String) -> Result<ApiResponse, GatewayError> {
        let biz_content = serde_json::to_string(&TradeRef { out_trade_no })
            .map_err(|e| GatewayError::Rejected(format!("biz_content: {e}")))?;
        self.call_with(method, biz_content).await
    }

    /// Call `method` with `biz_content` and return its verified `…_response` object.
    async fn call_with(
        &self,
        method: &str,
        biz_content: String,
    ) -> Result<ApiResponse, GatewayError> {
        let params = self.signed_params(method, biz_content, &[])?;
        let form = serde_urlencoded::to_string(&params)
            .map_err(|e| GatewayError::Rejected(format!("form: {e}")))?;
        let request = self
            .context
            .http
            .post(GATEWAY_PATH)
            .header(
                CONTENT_TYPE,
                "application/x-www-form-urlencoded;charset=utf-8",
            )
            .header(ACCEPT, "application/json")
            .body(form);
        let reply = self.context.http.send(request).await?.success()?;
        let body = std::str::from_utf8(&reply.body)
            .map_err(|_| GatewayError::BadResponse("answer is not UTF-8".into()))?;
        self.read_answer(body, method)
    }

    /// The `…_response` object of an answer, after checking Alipay's signature over its raw
    /// text. Error answers may come unsigned (Alipay does not sign some); they only ever make
    /// a call fail or leave a payment pending.
    fn read_answer(&self, body: &str, method: &str) -> Result<ApiResponse, GatewayError> {
        let member = transformers::response_member(method);
        let Some(raw) = transformers::raw_member(body, &member)
            .or_else(|| transformers::raw_member(body, "error_response"))
        else {
            return Err(GatewayError::BadResponse(format!(
                "no {member} in the answer"
            )));
        };
        let answer: ApiResponse = serde_json::from_str(raw)
            .map_err(|e| GatewayError::BadResponse(unreadable(&member, &e)))?;
        let envelope: Envelope = serde_json::from_str(body)
            .map_err(|e| GatewayError::BadResponse(unreadable("answer", &e)))?;
        match envelope.sign.as_deref() {
            Some(sign) => {
                let verified = unb64(sign)
                    .is_some_and(|s| rsa_sha256_verify(&self.alipay_key, raw.as_bytes(), &s));
                if !verified {
                    return Err(GatewayError::BadResponse(
                        "answer signature does not verify".into(),
                    ));
                }
            }
            None if answer.code == transformers::CODE_SUCCESS => {
                return Err(GatewayError::BadResponse("answer is not signed".into()));
            }
            None => {}
        }
        Ok(answer)
    }
}

#[async_trait]
impl PaymentGateway for WalletWebGateway {
    fn provider(&self) -> ProviderId {
        ProviderId::WalletWeb
    }

    fn is_sandbox(&self) -> bool {
        self.context.sandbox
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        if request.snapshot.plan_type == PlanType::Recurring {
            return Err(GatewayError::NotSupported);
        }
        let name = plan_name(request);
        let content = PagePayContent {
            out_trade_no: transformers::out_trade_no(&request.order_id)?,
            total_amount: transformers::yuan(&request.snapshot.price)?,
            subject: transformers::subject(name),
            product_code: transformers::PRODUCT_CODE,
            time_expire: Some(transformers::beijing_time(request.expires_at)?),
        };
        let biz_content = serde_json::to_string(&content)
            .map_err(|e| GatewayError::Rejected(format!("biz_content: {e}")))?;
        let params = self.signed_params(
            transformers::METHOD_PAGE_PAY,
            biz_content,
            &[
                ("notify_url", &request.notify_url),
                ("return_url", &request.success_url),
            ],
        )?;
        let query = serde_urlencoded::to_string(&params)
            .map_err(|e| GatewayError::Rejected(format!("query: {e}")))?;
        Ok(Checkout {
            provider_reference: None,
            target: CheckoutTarget::Redirect(format!(
                "{}?{query}",
                self.context.http.url(GATEWAY_PATH)
            )),
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let out_trade_no = transformers::out_trade_no(&payment.order_id)?;
        let answer = self
            .call(transformers::METHOD_QUERY, out_trade_no.clone())
            .await?;
        if answer.code != transformers::CODE_SUCCESS {
            // Page pay creates the trade only when the buyer opens the cashier: until then
            // the order is simply unpaid.
            if answer.sub_code.as_deref() == Some(transformers::SUB_CODE_TRADE_NOT_EXIST) {
                return Ok(PaymentStatus::Pending);
            }
            return Err(transformers::api_error(&answer));
        }
        if answer.out_trade_no.as_deref() != Some(out_trade_no.as_str()) {
            return Err(GatewayError::BadResponse(
                "answer is for another order".into(),
            ));
        }
        transformers::payment_status(&answer)
    }

    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        // A signed query of a trade that does not exist: `ACQ.TRADE_NOT_EXIST` comes only after
        // Alipay has checked the app id and the signature (`isv.invalid-app-id`,
        // `isv.invalid-signature` otherwise), and its own signature over the answer is checked
        // with the configured Alipay public key; nothing changes.
        let answer = self
            .call(
                transformers::METHOD_QUERY,
                CREDENTIAL_PROBE_OUT_TRADE_NO.to_owned(),
            )
            .await?;
        let not_found = answer.sub_code.as_deref() == Some(transformers::SUB_CODE_TRADE_NOT_EXIST);
        if answer.code != transformers::CODE_SUCCESS && !not_found {
            return Err(transformers::api_error(&answer));
        }
        let mode = if self.test_mode {
            CredentialMode::Test
        } else {
            CredentialMode::Live
        };
        Ok(CredentialCheck {
            mode,
            detail: "alipay.trade.query accepted the app id and signature (ACQ.TRADE_NOT_EXIST)"
                .to_owned(),
        })
    }

    async fn close_payment(&self, payment: &PaymentRef) -> Result<(), GatewayError> {
        let out_trade_no = transformers::out_trade_no(&payment.order_id)?;
        let answer = self.call(transformers::METHOD_CLOSE, out_trade_no).await?;
        if answer.code == transformers::CODE_SUCCESS
            || answer.sub_code.as_deref() == Some(transformers::SUB_CODE_TRADE_NOT_EXIST)
        {
            // No trade yet: nothing to close at Alipay; the signed URL's `time_expire` bounds
            // how long the buyer could still open it.
            return Ok(());
        }
        Err(transformers::api_error(&answer))
    }

    async fn cancel_subscription(
        &self,
        _provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        Err(GatewayError::NotSupported)
    }

    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let out_trade_no = transformers::out_trade_no(&request.payment.order_id)?;
        let out_request_no = transformers::out_request_no(&request.refund_id)?;
        if request.amount.amount_minor() > request.paid.amount_minor() {
            return Err(GatewayError::Rejected(
                "refund is more than the order paid".into(),
            ));
        }
        let content = RefundContent {
            out_trade_no: out_trade_no.clone(),
            refund_amount: transformers::yuan(&request.amount)?,
            out_request_no: out_request_no.clone(),
            refund_reason: transformers::refund_reason(&request.reason),
        };
        let biz_content = serde_json::to_string(&content)
            .map_err(|e| GatewayError::Rejected(format!("biz_content: {e}")))?;
        let answer = self
            .call_with(transformers::METHOD_REFUND, biz_content)
            .await?;
        if answer.code != transformers::CODE_SUCCESS {
            return Err(transformers::api_error(&answer));
        }
        if answer.out_trade_no.as_deref() != Some(out_trade_no.as_str()) {
            return Err(GatewayError::BadResponse(
                "answer is for another order".into(),
            ));
        }
        // Alipay gives a refund no id of its own; its refund notification reports the trade's
        // running total (`refund_fee`) and names the request by `out_biz_no` = our
        // `out_request_no`.
        Ok(RefundStarted {
            provider_refund_id: Some(out_request_no),
            state: transformers::refund_state(&answer, &request.amount)?,
        })
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        if request.body.len() > MAX_NOTIFICATION_BYTES {
            return Err(WebhookError::Malformed("body too large".into()));
        }
        let scheme = AlipaySignature {
            key: &self.alipay_key,
        };
        webhook::verify(&scheme, request, self.context.clock.now())?;
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
        // Alipay reads the body only: exactly `success` stops the resends.
        let (verdict, body) = match outcome {
            AckFor::Accepted => (AckVerdict::Accepted, "success"),
            AckFor::Refused(_) => (AckVerdict::Refused, "fail"),
        };
        WebhookAck {
            verdict,
            content_type: "text/plain; charset=utf-8",
            body: body.to_owned(),
        }
    }
}

/// The signature beside an answer's `…_response` object.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    sign: Option<String>,
}

/// Alipay's signature on notifications: RSA2 over the sorted form without `sign` and
/// `sign_type`.
struct AlipaySignature<'a> {
    key: &'a PublicKey,
}

impl WebhookScheme for AlipaySignature<'_> {
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
        let params =
            transformers::form_params(&request.body).map_err(|_| WebhookError::MissingSignature)?;
        let sign = params
            .get("sign")
            .and_then(|s| unb64(s))
            .filter(|s| !s.is_empty())
            .ok_or(WebhookError::MissingSignature)?;
        Ok(SignedParts {
            timestamp_s: None,
            signatures: vec![sign],
            extras: Vec::new(),
        })
    }

    fn message(
        &self,
        request: &WebhookRequest,
        _parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError> {
        let params = transformers::form_params(&request.body)?;
        Ok(transformers::notification_sign_content(&params).into_bytes())
    }

    fn verifier(&self) -> Verifier<'_> {
        Verifier::RsaSha256(self.key)
    }

    fn tolerance_s(&self) -> Option<i64> {
        None
    }
}

impl WalletWebGateway {
    /// Read a verified notification (live or recorded): the app and seller check, then what
    /// it means.
    fn parse_verified(&self, body: &[u8]) -> Result<VerifiedWebhook, WebhookError> {
        let params = transformers::form_params(body)?;
        let notification: Notification = serde_urlencoded::from_bytes(body)
            .map_err(|_| WebhookError::Malformed("notification is not the expected form".into()))?;
        let event_id = notification
            .notify_id
            .clone()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| WebhookError::Malformed("notification without notify_id".into()))?;
        if let Some(why) =
            transformers::foreign(&notification, &self.app_id, self.seller_id.as_deref())
        {
            return Ok(VerifiedWebhook {
                event_id,
                event_type: transformers::event_type(&notification, &params),
                events: Vec::new(),
                foreign: Some(why),
            });
        }
        let events = transformers::events(&notification, self.context.clock.now())?;
        Ok(VerifiedWebhook {
            event_id,
            event_type: transformers::event_type(&notification, &params),
            events,
            foreign: None,
        })
    }
}
