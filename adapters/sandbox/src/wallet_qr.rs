//! The WeChat Pay APIv3 Native simulator.
//!
//! Serves, below `/sandbox/wallet_qr`, the calls the gateway makes: create a Native order
//! (`POST /v3/pay/transactions/native` → `{"code_url": <hosted checkout page>}`), query it by
//! `out_trade_no`, close it (204), refund it (`POST /v3/refund/domestic/refunds`, idempotent per
//! `out_refund_no`, the `REFUND.SUCCESS` notification to the refund's `notify_url`), and list
//! the platform certificates (`GET /v3/certificates`, each encrypted with the APIv3 key).
//! Answers are signed with the platform public key when the request names it in
//! `Wechatpay-Serial`, with the platform certificate otherwise (a certificate-mode merchant),
//! and an order's notifications with whichever signed the answer to its creation. Each request's `Authorization` is checked as WeChat Pay
//! checks it (merchant id, certificate serial, a 5-minute timestamp window and the RSA-SHA256
//! signature over `METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n` with the merchant public
//! key), failures answer WeChat Pay's `{"code","message"}` errors, and every success answer
//! is signed with the platform key like WeChat Pay's (`Wechatpay-*` headers).
//!
//! Notifications: `TRANSACTION.SUCCESS` for a payment and `REFUND.SUCCESS` for each refund
//! (that refund's own amount and its own `refund_id`), their resource AES-256-GCM-encrypted
//! with the APIv3 key and the envelope signed with the platform key; nothing for a declined
//! payment, as Native sends no failure notification, and nothing for subscription events, as
//! Native has no subscriptions.
//! One difference from WeChat Pay: `notify_url` may be plain HTTP, for local development.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use domain::{Currency, ProviderId, Timestamp};
use poem::http::StatusCode;
use poem::web::{Data, Path, Query};
use poem::{Body, Request, Response, Route, get, handler, post};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::{
    PrivateKey, PublicKey, aes_256_gcm_encrypt, b64, hex, private_key, public_key, rsa_sha256_sign,
    rsa_sha256_verify, sha256, unb64,
};

use crate::credentials::CREDENTIALS;
use crate::formats::beijing_rfc3339;
use crate::hub::{ForeignUrl, Hub, SimEvent, SimKind, SimPayment, SimStatus, SimWebhook};
use crate::simulator::Simulator;

/// The simulated WeChat Pay.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalletQrSimulator;

/// The `[providers.wallet_qr]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/wallet_qr`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "appId": CREDENTIALS.app_id,
        "mchId": CREDENTIALS.wechat_mch_id,
        "merchantSerialNo": CREDENTIALS.merchant_serial,
        "merchantPrivateKey": CREDENTIALS.merchant_private_pem,
        "apiV3Key": CREDENTIALS.wechat_api_v3_key,
        "platformPublicKey": CREDENTIALS.provider_public_pem,
        "platformPublicKeyId": CREDENTIALS.platform_key_id,
        "baseUrl": api_base_url,
    })
}

/// The gateway settings of a merchant in platform-certificate mode: no public key, the
/// platform certificates downloaded from the sandbox's `/v3/certificates` (a settings table, as
/// [`gateway_settings`]).
#[must_use]
pub fn gateway_settings_certificate_mode(api_base_url: &str) -> Value {
    json!({
        "appId": CREDENTIALS.app_id,
        "mchId": CREDENTIALS.wechat_mch_id,
        "merchantSerialNo": CREDENTIALS.merchant_serial,
        "merchantPrivateKey": CREDENTIALS.merchant_private_pem,
        "apiV3Key": CREDENTIALS.wechat_api_v3_key,
        "platformCertificates": true,
        "baseUrl": api_base_url,
    })
}

/// The largest request body read, in bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// How far a request timestamp may be from now, in seconds.
const TOLERANCE_S: i64 = 300;
const SCHEME: &str = "WECHATPAY2-SHA256-RSA2048";

static MERCHANT_KEY: LazyLock<Option<PublicKey>> =
    LazyLock::new(|| public_key(CREDENTIALS.merchant_public_pem).ok());
static PLATFORM_KEY: LazyLock<Option<PrivateKey>> =
    LazyLock::new(|| private_key(CREDENTIALS.provider_private_pem).ok());
static CERTIFICATE_KEY: LazyLock<Option<PrivateKey>> =
    LazyLock::new(|| private_key(CREDENTIALS.wechat_platform_cert_private_pem).ok());

/// Which platform key signs an answer or notification: the WeChat Pay public key
/// (`PUB_KEY_ID_…`) for a merchant whose requests name it in `Wechatpay-Serial`, the platform
/// certificate for one whose requests name no key or the certificate (certificate mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signer {
    PublicKey,
    Certificate,
}

impl Signer {
    /// The signer a request asks for; `None` for a serial that names no key of the merchant.
    fn of(request: &Request) -> Option<Self> {
        match request.header("wechatpay-serial").map(str::trim) {
            Some(serial) if serial == CREDENTIALS.platform_key_id => Some(Signer::PublicKey),
            None => Some(Signer::Certificate),
            Some(serial)
                if serial.eq_ignore_ascii_case(CREDENTIALS.wechat_platform_cert_serial) =>
            {
                Some(Signer::Certificate)
            }
            Some(_) => None,
        }
    }

    /// The signer kept with a payment for its notifications.
    fn of_payment(payment: &SimPayment) -> Self {
        if payment.extra.get(SIGNER_EXTRA).map(String::as_str) == Some("certificate") {
            Signer::Certificate
        } else {
            Signer::PublicKey
        }
    }

    fn key(self) -> Option<&'static PrivateKey> {
        match self {
            Signer::PublicKey => PLATFORM_KEY.as_ref(),
            Signer::Certificate => CERTIFICATE_KEY.as_ref(),
        }
    }

    fn serial(self) -> &'static str {
        match self {
            Signer::PublicKey => CREDENTIALS.platform_key_id,
            Signer::Certificate => CREDENTIALS.wechat_platform_cert_serial,
        }
    }
}

/// The answer to a request whose `Wechatpay-Serial` names no key of the merchant.
fn unknown_serial() -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "PARAM_ERROR",
        "Wechatpay-Serial names no platform key or certificate of this merchant",
    )
}

/// Where a payment keeps the signer of its merchant's mode.
const SIGNER_EXTRA: &str = "signer";

#[async_trait]
impl Simulator for WalletQrSimulator {
    // A declined card sends nothing: the checkout stays open for another try.
    fn tells_declines(&self, _payment: &SimPayment) -> bool {
        false
    }

    fn provider(&self) -> ProviderId {
        ProviderId::WalletQr
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        Route::new()
            .at("/v3/pay/transactions/native", post(create_order))
            .at(
                "/v3/pay/transactions/out-trade-no/:out_trade_no",
                get(query_order),
            )
            .at(
                "/v3/pay/transactions/out-trade-no/:out_trade_no/close",
                post(close_order),
            )
            .at("/v3/refund/domestic/refunds", post(create_refund))
            .at("/v3/certificates", get(certificates))
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        let notification = match event {
            SimEvent::Paid(payment) => {
                let success_time = now_text(hub);
                // The query answer reports the same payment time as the notification.
                let _ = hub.update_payment(&payment.id, |p| {
                    p.extra.insert("success_time".into(), success_time.clone());
                    Ok(())
                });
                let mut paid = payment.clone();
                paid.extra.insert("success_time".into(), success_time);
                let resource = transaction(&paid);
                seal(
                    hub,
                    Signer::of_payment(&paid),
                    "TRANSACTION.SUCCESS",
                    "支付成功",
                    "transaction",
                    &resource,
                )
            }
            SimEvent::Refunded {
                payment,
                refund_id,
                amount_minor,
            } => {
                let resource = refund(hub, payment, refund_id, *amount_minor);
                seal(
                    hub,
                    Signer::of_payment(payment),
                    "REFUND.SUCCESS",
                    "退款成功",
                    "refund",
                    &resource,
                )
            }
            // Native has no failure notification, and no subscriptions.
            _ => None,
        };
        notification.into_iter().collect()
    }
}

/// A WeChat Pay error answer.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json")
        .body(json!({ "code": code, "message": message }).to_string())
}

/// A success answer signed with the platform key the request asks for, as WeChat Pay signs
/// its answers.
fn signed(hub: &Hub, request: &Request, status: StatusCode, body: String) -> Response {
    match Signer::of(request) {
        Some(signer) => signed_by(hub, signer, status, body),
        None => unknown_serial(),
    }
}

/// A success answer signed by `signer`.
fn signed_by(hub: &Hub, signer: Signer, status: StatusCode, body: String) -> Response {
    let Some(key) = signer.key() else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "SYSTEM_ERROR",
            "no platform key",
        );
    };
    let timestamp_s = hub.now_ms().div_euclid(1000);
    let nonce = nonce(hub, 32);
    let message = format!("{timestamp_s}\n{nonce}\n{body}\n");
    let builder = Response::builder()
        .status(status)
        .header("Wechatpay-Timestamp", timestamp_s.to_string())
        .header("Wechatpay-Nonce", nonce)
        .header(
            "Wechatpay-Signature",
            b64(&rsa_sha256_sign(key, message.as_bytes())),
        )
        .header("Wechatpay-Serial", signer.serial())
        .header("Request-ID", hub.new_id("sandbox-"));
    if body.is_empty() {
        builder.finish()
    } else {
        builder.content_type("application/json").body(body)
    }
}

/// A fresh upper-case hex nonce of `length` (at most 64) characters.
fn nonce(hub: &Hub, length: usize) -> String {
    let digest = hex(&sha256(hub.new_id("nonce").as_bytes())).to_ascii_uppercase();
    digest.chars().take(length).collect()
}

fn now_text(hub: &Hub) -> String {
    beijing_rfc3339(Timestamp::from_unix_millis(hub.now_ms()))
}

/// WeChat Pay's `SIGN_ERROR` answer when the `Authorization` header does not check out.
fn refuse_signature(hub: &Hub, request: &Request, body: &[u8]) -> Option<Response> {
    signature_problem(hub, request, body)
        .map(|problem| error(StatusCode::UNAUTHORIZED, "SIGN_ERROR", problem))
}

/// What is wrong with a request's `Authorization`, if anything.
fn signature_problem(hub: &Hub, request: &Request, body: &[u8]) -> Option<&'static str> {
    let Some(value) = request.header("authorization") else {
        return Some("missing Authorization header");
    };
    let Some(rest) = value.strip_prefix(SCHEME) else {
        return Some("Authorization scheme is not WECHATPAY2-SHA256-RSA2048");
    };
    let pairs = authorization_pairs(rest.trim_start());
    let field = |name: &str| pairs.get(name).map(String::as_str);
    let (Some(mch_id), Some(nonce), Some(signature), Some(timestamp), Some(serial_no)) = (
        field("mchid"),
        field("nonce_str"),
        field("signature"),
        field("timestamp"),
        field("serial_no"),
    ) else {
        return Some("Authorization field missing");
    };
    if mch_id != CREDENTIALS.wechat_mch_id || serial_no != CREDENTIALS.merchant_serial {
        return Some("unknown merchant or certificate serial");
    }
    let Ok(timestamp_s) = timestamp.parse::<i64>() else {
        return Some("bad timestamp");
    };
    if (hub.now_ms().div_euclid(1000) - timestamp_s).abs() > TOLERANCE_S {
        return Some("timestamp expired");
    }
    let path = request
        .original_uri()
        .path_and_query()
        .map_or("/", |p| p.as_str());
    let mut message =
        format!("{}\n{path}\n{timestamp_s}\n{nonce}\n", request.method()).into_bytes();
    message.extend_from_slice(body);
    message.push(b'\n');
    let verified = match (MERCHANT_KEY.as_ref(), unb64(signature)) {
        (Some(key), Some(signature)) => rsa_sha256_verify(key, &message, &signature),
        _ => false,
    };
    (!verified).then_some("signature does not verify")
}

/// The `k="v"` pairs of an `Authorization` header after its scheme.
fn authorization_pairs(text: &str) -> BTreeMap<String, String> {
    text.split(',')
        .take(16)
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
        .collect()
}

/// The body, or `None` when it is over [`MAX_BODY_BYTES`] or unreadable.
async fn read_body(body: Body) -> Option<Vec<u8>> {
    body.into_bytes_limit(MAX_BODY_BYTES)
        .await
        .ok()
        .map(|b| b.to_vec())
}

fn too_large() -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PARAM_ERROR",
        "body too large or unreadable",
    )
}

#[derive(Debug, Deserialize)]
struct NativeOrder {
    appid: String,
    mchid: String,
    description: String,
    out_trade_no: String,
    #[serde(default)]
    time_expire: Option<String>,
    #[serde(default)]
    attach: Option<String>,
    notify_url: String,
    amount: OrderAmount,
}

#[derive(Debug, Deserialize)]
struct OrderAmount {
    total: i64,
    #[serde(default)]
    currency: Option<String>,
}

/// WeChat Pay's field rules for a Native order; the `PARAM_ERROR` message otherwise.
fn validate(order: &NativeOrder) -> Result<(), &'static str> {
    let out_trade_no_ok = (6..=32).contains(&order.out_trade_no.len())
        && order
            .out_trade_no
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '|'));
    let notify_ok = (order.notify_url.starts_with("https://")
        || order.notify_url.starts_with("http://"))
        && !order.notify_url.contains('?')
        && order.notify_url.len() <= 256;
    let time_ok = order
        .time_expire
        .as_deref()
        .is_none_or(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok());
    let problems = [
        (
            order.description.is_empty() || order.description.len() > 127,
            "description must be 1 to 127 bytes",
        ),
        (
            !out_trade_no_ok,
            "out_trade_no must be 6 to 32 of [0-9A-Za-z_-*|]",
        ),
        (
            !notify_ok,
            "notify_url must be an http(s) URL without a query string",
        ),
        (order.amount.total < 1, "amount.total must be at least 1"),
        (
            order.amount.currency.as_deref().is_some_and(|c| c != "CNY"),
            "amount.currency must be CNY",
        ),
        (!time_ok, "time_expire must be RFC 3339"),
        (
            order.attach.as_deref().is_some_and(|a| a.len() > 128),
            "attach must be at most 128 bytes",
        ),
    ];
    match problems.into_iter().find(|(bad, _)| *bad) {
        Some((_, message)) => Err(message),
        None => Ok(()),
    }
}

#[handler]
async fn create_order(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    let Some(body) = read_body(body).await else {
        return too_large();
    };
    if let Some(answer) = refuse_signature(&hub, request, &body) {
        return answer;
    }
    let order: NativeOrder = match serde_json::from_slice(&body) {
        Ok(order) => order,
        Err(e) => return error(StatusCode::BAD_REQUEST, "PARAM_ERROR", &e.to_string()),
    };
    if order.appid != CREDENTIALS.app_id || order.mchid != CREDENTIALS.wechat_mch_id {
        return error(
            StatusCode::BAD_REQUEST,
            "APPID_MCHID_NOT_MATCH",
            "appid and mchid do not match",
        );
    }
    if let Err(message) = validate(&order) {
        return error(StatusCode::BAD_REQUEST, "PARAM_ERROR", message);
    }
    let Some(signer) = Signer::of(request) else {
        return unknown_serial();
    };
    let id = match hub.payment_for_order(ProviderId::WalletQr, &order.out_trade_no) {
        Some(existing) => match existing.status {
            SimStatus::Open if existing.amount_minor == order.amount.total => existing.id,
            SimStatus::Open => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_REQUEST",
                    "out_trade_no reused with other parameters",
                );
            }
            SimStatus::Paid => {
                return error(StatusCode::BAD_REQUEST, "ORDERPAID", "order already paid");
            }
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "ORDERCLOSED",
                    "order already closed",
                );
            }
        },
        None => match insert_order(&hub, order, signer) {
            Ok(id) => id,
            Err(foreign) => {
                return error(StatusCode::BAD_REQUEST, "PARAM_ERROR", &foreign.to_string());
            }
        },
    };
    signed(
        &hub,
        request,
        StatusCode::OK,
        json!({ "code_url": hub.checkout_url(&id) }).to_string(),
    )
}

/// Store a new open payment for `order`; its id plays the `transaction_id`.
fn insert_order(hub: &Hub, order: NativeOrder, signer: Signer) -> Result<String, ForeignUrl> {
    let id = hub.new_id("4200");
    let page = hub.checkout_url(&id);
    let mut extra = BTreeMap::new();
    if signer == Signer::Certificate {
        extra.insert(SIGNER_EXTRA.to_owned(), "certificate".to_owned());
    }
    extra.insert("description".to_owned(), order.description);
    if let Some(time_expire) = order.time_expire {
        extra.insert("time_expire".to_owned(), time_expire);
    }
    if let Some(attach) = order.attach {
        extra.insert("attach".to_owned(), attach);
    }
    hub.insert_payment(
        SimPayment {
            id: id.clone(),
            provider: ProviderId::WalletQr,
            order_id: order.out_trade_no,
            amount_minor: order.amount.total,
            currency: Currency::Cny,
            kind: SimKind::OneTime,
            status: SimStatus::Open,
            // Native has no return URL: the buyer pays on the phone while Tally's page polls.
            success_url: page.clone(),
            cancel_url: page,
            notify_url: order.notify_url,
            refunded_minor: 0,
            subscription_id: None,
            created_at_ms: hub.now_ms(),
            extra,
        },
        ["notify_url", "notify_url", "notify_url"],
    )?;
    Ok(id)
}

#[derive(Debug, Deserialize)]
struct MerchantQuery {
    #[serde(default)]
    mchid: Option<String>,
}

#[handler]
fn query_order(
    request: &Request,
    Path(out_trade_no): Path<String>,
    Query(query): Query<MerchantQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Some(answer) = refuse_signature(&hub, request, b"") {
        return answer;
    }
    if query.mchid.as_deref() != Some(CREDENTIALS.wechat_mch_id) {
        return error(
            StatusCode::BAD_REQUEST,
            "PARAM_ERROR",
            "mchid is required and must be yours",
        );
    }
    match hub.payment_for_order(ProviderId::WalletQr, &out_trade_no) {
        Some(payment) => signed(
            &hub,
            request,
            StatusCode::OK,
            transaction(&payment).to_string(),
        ),
        None => error(
            StatusCode::NOT_FOUND,
            "ORDER_NOT_EXIST",
            "order does not exist",
        ),
    }
}

#[derive(Debug, Deserialize)]
struct CloseBody {
    mchid: String,
}

#[handler]
async fn close_order(
    request: &Request,
    Path(out_trade_no): Path<String>,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    let Some(body) = read_body(body).await else {
        return too_large();
    };
    if let Some(answer) = refuse_signature(&hub, request, &body) {
        return answer;
    }
    match serde_json::from_slice::<CloseBody>(&body) {
        Ok(close) if close.mchid == CREDENTIALS.wechat_mch_id => {}
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "PARAM_ERROR",
                "body must be {\"mchid\": yours}",
            );
        }
    }
    let Some(payment) = hub.payment_for_order(ProviderId::WalletQr, &out_trade_no) else {
        return error(
            StatusCode::NOT_FOUND,
            "ORDER_NOT_EXIST",
            "order does not exist",
        );
    };
    match payment.status {
        SimStatus::Paid => error(StatusCode::BAD_REQUEST, "ORDERPAID", "order already paid"),
        SimStatus::Open | SimStatus::Approved => match hub.cancel_payment(&payment.id) {
            Ok(_) => signed(&hub, request, StatusCode::NO_CONTENT, String::new()),
            Err(e) => error(StatusCode::BAD_REQUEST, "INVALID_REQUEST", &e.to_string()),
        },
        // Closing a closed or failed order again changes nothing.
        SimStatus::Canceled | SimStatus::Declined => {
            signed(&hub, request, StatusCode::NO_CONTENT, String::new())
        }
    }
}

/// The transaction object of the query answer and the `TRANSACTION.SUCCESS` resource.
fn transaction(payment: &SimPayment) -> Value {
    let (state, description) = match payment.status {
        SimStatus::Open | SimStatus::Approved => ("NOTPAY", "订单未支付"),
        SimStatus::Paid if payment.refunded_minor > 0 => ("REFUND", "转入退款"),
        SimStatus::Paid => ("SUCCESS", "支付成功"),
        SimStatus::Declined => ("PAYERROR", "支付失败"),
        SimStatus::Canceled => ("CLOSED", "订单已关闭"),
    };
    let mut value = json!({
        "appid": CREDENTIALS.app_id,
        "mchid": CREDENTIALS.wechat_mch_id,
        "out_trade_no": payment.order_id,
        "trade_type": "NATIVE",
        "trade_state": state,
        "trade_state_desc": description,
        "attach": payment.extra.get("attach").cloned().unwrap_or_default(),
        "amount": { "total": payment.amount_minor, "currency": "CNY", "payer_currency": "CNY" },
    });
    if payment.status == SimStatus::Paid {
        let success_time = payment
            .extra
            .get("success_time")
            .cloned()
            .unwrap_or_else(|| beijing_rfc3339(Timestamp::from_unix_millis(payment.created_at_ms)));
        value["transaction_id"] = json!(payment.id);
        value["bank_type"] = json!("OTHERS");
        value["success_time"] = json!(success_time);
        value["payer"] = json!({ "openid": "o_sandbox_buyer" });
        value["amount"]["payer_total"] = json!(payment.amount_minor);
    }
    value
}

/// The `REFUND.SUCCESS` resource, as WeChat Pay reports it: this refund's own amount
/// (`amount.refund`, never the total refunded so far) next to the order's `amount.total`, and
/// two ids per refund: WeChat Pay's `refund_id` and the refunding party's `out_refund_no`
/// (here the hub's id of the dashboard refund).
fn refund(hub: &Hub, payment: &SimPayment, refund_id: &str, amount_minor: i64) -> Value {
    // A refund asked for through the refund API: the hub's id is already WeChat Pay's
    // `refund_id`, and the merchant's `out_refund_no` was kept with the payment.
    let (out_refund_no, wechat_id) = match payment.extra.get(&api_refund_key(refund_id)) {
        Some(out_refund_no) => (out_refund_no.clone(), refund_id.to_owned()),
        None => (refund_id.to_owned(), wechat_refund_id(refund_id)),
    };
    json!({
        "mchid": CREDENTIALS.wechat_mch_id,
        "out_trade_no": payment.order_id,
        "transaction_id": payment.id,
        "out_refund_no": out_refund_no,
        "refund_id": wechat_id,
        "refund_status": "SUCCESS",
        "success_time": now_text(hub),
        "user_received_account": "支付用户零钱",
        "amount": {
            "total": payment.amount_minor,
            "refund": amount_minor,
            // No coupons in the sandbox: the buyer paid, and gets back, the list price.
            "payer_total": payment.amount_minor,
            "payer_refund": amount_minor,
        },
    })
}

/// Where a payment keeps the `out_refund_no` of the API refund whose WeChat id is `refund_id`.
fn api_refund_key(refund_id: &str) -> String {
    format!("api_refund:{refund_id}")
}

/// Where a payment keeps the WeChat id and amount of the API refund `out_refund_no`.
fn out_refund_key(out_refund_no: &str) -> String {
    format!("out_refund_no:{out_refund_no}")
}

#[derive(Debug, Deserialize)]
struct RefundBody {
    #[serde(default)]
    out_trade_no: Option<String>,
    #[serde(default)]
    transaction_id: Option<String>,
    out_refund_no: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    notify_url: Option<String>,
    amount: RefundBodyAmount,
}

#[derive(Debug, Deserialize)]
struct RefundBodyAmount {
    refund: i64,
    total: i64,
    currency: String,
}

/// `POST /v3/refund/domestic/refunds`, idempotent per `out_refund_no` like WeChat Pay's: a new
/// number refunds and answers `PROCESSING`, then the `REFUND.SUCCESS` notification goes to the
/// refund's `notify_url` (the order's when absent); the same number again answers the same
/// refund (`SUCCESS` by then) and refunds nothing; the same number with other amounts is
/// refused.
#[handler]
async fn create_refund(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    let Some(body) = read_body(body).await else {
        return too_large();
    };
    if let Some(answer) = refuse_signature(&hub, request, &body) {
        return answer;
    }
    let asked: RefundBody = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(e) => return error(StatusCode::BAD_REQUEST, "PARAM_ERROR", &e.to_string()),
    };
    let bad = |message: &str| error(StatusCode::BAD_REQUEST, "PARAM_ERROR", message);
    if let Some(problem) = refund_form_problem(&asked) {
        return bad(problem);
    }
    let payment = match (&asked.out_trade_no, &asked.transaction_id) {
        (Some(out_trade_no), _) => hub.payment_for_order(ProviderId::WalletQr, out_trade_no),
        (None, Some(id)) => hub
            .payment(id)
            .filter(|p| p.provider == ProviderId::WalletQr),
        (None, None) => return bad("out_trade_no or transaction_id is required"),
    };
    let Some(payment) = payment else {
        return error(StatusCode::NOT_FOUND, "RESOURCE_NOT_EXISTS", "订单不存在");
    };
    let notify_url = asked
        .notify_url
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| payment.notify_url.clone());
    if hub.own_url("notify_url", &notify_url).is_err() || notify_url.contains('?') {
        return bad("notify_url must be a URL of this service without a query string");
    }
    let new_id = wechat_refund_id(&hub.new_id(""));
    let key = out_refund_key(&asked.out_refund_no);
    // Checked and changed under the hub's lock: one out_refund_no refunds once.
    let outcome = hub.update_payment(&payment.id, |p| {
        Ok(refund_payment(p, &asked, &key, &new_id))
    });
    let (id, payment, status) = match outcome {
        Ok(RefundOutcome::New(payment)) => {
            let event = SimEvent::Refunded {
                payment: payment.clone(),
                refund_id: new_id.clone(),
                amount_minor: asked.amount.refund,
            };
            hub.dispatch(ProviderId::WalletQr, &notify_url, &event)
                .await;
            (new_id, payment, "PROCESSING")
        }
        Ok(RefundOutcome::Repeat(id, payment)) => (id, payment, "SUCCESS"),
        Ok(refused) => return refund_refused(&refused),
        Err(e) => return error(StatusCode::NOT_FOUND, "RESOURCE_NOT_EXISTS", &e.to_string()),
    };
    let now = now_text(&hub);
    let answer = refund_json(&asked, &id, &payment, status, &now);
    signed(&hub, request, StatusCode::OK, answer.to_string())
}

/// WeChat Pay's error for a refund it refuses (unpaid, too much, or not what the same
/// out_refund_no asked before).
fn refund_refused(outcome: &RefundOutcome) -> Response {
    match outcome {
        RefundOutcome::Unpaid => {
            error(StatusCode::FORBIDDEN, "TRADE_STATE_ERROR", "订单状态不正确")
        }
        RefundOutcome::TooMuch => error(
            StatusCode::FORBIDDEN,
            "NOT_ENOUGH",
            "退款金额超过订单可退金额",
        ),
        RefundOutcome::Mismatch | RefundOutcome::New(_) | RefundOutcome::Repeat(..) => error(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "订单金额或退款金额与之前请求不一致",
        ),
    }
}

/// What is wrong with a refund request's number, amount or reason, if anything.
fn refund_form_problem(asked: &RefundBody) -> Option<&'static str> {
    let no_ok = !asked.out_refund_no.is_empty()
        && asked.out_refund_no.len() <= 64
        && asked
            .out_refund_no
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|' | '*' | '@'));
    if !no_ok {
        return Some("out_refund_no must be 1 to 64 of [0-9A-Za-z_-|*@]");
    }
    if asked.amount.currency != "CNY" || asked.amount.refund < 1 || asked.amount.total < 1 {
        return Some("amount must be CNY, refund and total at least 1");
    }
    asked
        .reason
        .as_deref()
        .is_some_and(|r| r.chars().count() > 80)
        .then_some("reason must be at most 80 characters")
}

/// Refund `p` as `asked` (under the hub's lock), remembering the request under `key` with
/// the new refund's id `new_id`; a repeated request answers what the first one did.
fn refund_payment(
    p: &mut SimPayment,
    asked: &RefundBody,
    key: &str,
    new_id: &str,
) -> RefundOutcome {
    if let Some(earlier) = p.extra.get(key) {
        let (id, amount) = earlier.split_once(':').unwrap_or_default();
        return if amount == asked.amount.refund.to_string() {
            RefundOutcome::Repeat(id.to_owned(), p.clone())
        } else {
            RefundOutcome::Mismatch
        };
    }
    if p.status != SimStatus::Paid {
        return RefundOutcome::Unpaid;
    }
    if asked.amount.total != p.amount_minor {
        return RefundOutcome::Mismatch;
    }
    if p.refunded_minor + asked.amount.refund > p.amount_minor {
        return RefundOutcome::TooMuch;
    }
    p.refunded_minor += asked.amount.refund;
    p.extra
        .insert(key.to_owned(), format!("{new_id}:{}", asked.amount.refund));
    p.extra
        .insert(api_refund_key(new_id), asked.out_refund_no.clone());
    RefundOutcome::New(p.clone())
}

/// WeChat Pay's answer to a refund request: the refund `id` of `payment`, in `status`.
fn refund_json(
    asked: &RefundBody,
    id: &str,
    payment: &SimPayment,
    status: &str,
    now: &str,
) -> Value {
    json!({
        "refund_id": id,
        "out_refund_no": asked.out_refund_no,
        "transaction_id": payment.id,
        "out_trade_no": payment.order_id,
        "channel": "ORIGINAL",
        "user_received_account": "支付用户零钱",
        "create_time": now,
        "status": status,
        "funds_account": "AVAILABLE",
        "amount": {
            "total": payment.amount_minor,
            "refund": asked.amount.refund,
            "payer_total": payment.amount_minor,
            "payer_refund": asked.amount.refund,
            "settlement_refund": asked.amount.refund,
            "settlement_total": payment.amount_minor,
            "discount_refund": 0,
            "currency": "CNY",
        },
    })
}

/// What a refund request did.
enum RefundOutcome {
    New(SimPayment),
    Repeat(String, SimPayment),
    Mismatch,
    Unpaid,
    TooMuch,
}

/// A WeChat Pay style refund id (`503…`, digits only) for the hub's refund id `hub_id`, whose
/// digits (the time and the hub's counter) already differ from refund to refund.
fn wechat_refund_id(hub_id: &str) -> String {
    let digits: String = hub_id.chars().filter(char::is_ascii_digit).collect();
    format!("503{digits:0>26}")
}

/// A notification: `resource` encrypted with the APIv3 key, the envelope signed.
fn seal(
    hub: &Hub,
    signer: Signer,
    event_type: &str,
    summary: &str,
    original_type: &str,
    resource: &Value,
) -> Option<SimWebhook> {
    let aes_nonce = nonce(hub, 12);
    let sealed = aes_256_gcm_encrypt(
        CREDENTIALS.wechat_api_v3_key.as_bytes(),
        aes_nonce.as_bytes(),
        original_type.as_bytes(),
        resource.to_string().as_bytes(),
    );
    let (Ok(sealed), Some(key)) = (sealed, signer.key()) else {
        tracing::warn!("sandbox wallet_qr: cannot seal a notification");
        return None;
    };
    let body = json!({
        "id": format!("EV-{}", hub.new_id("")),
        "create_time": now_text(hub),
        "resource_type": "encrypt-resource",
        "event_type": event_type,
        "summary": summary,
        "resource": {
            "original_type": original_type,
            "algorithm": "AEAD_AES_256_GCM",
            "ciphertext": b64(&sealed),
            "associated_data": original_type,
            "nonce": aes_nonce,
        },
    })
    .to_string();
    let timestamp_s = hub.now_ms().div_euclid(1000);
    let nonce = nonce(hub, 32);
    let message = format!("{timestamp_s}\n{nonce}\n{body}\n");
    Some(SimWebhook {
        headers: vec![
            ("Wechatpay-Timestamp".into(), timestamp_s.to_string()),
            ("Wechatpay-Nonce".into(), nonce),
            (
                "Wechatpay-Signature".into(),
                b64(&rsa_sha256_sign(key, message.as_bytes())),
            ),
            ("Wechatpay-Serial".into(), signer.serial().into()),
            ("Wechatpay-Signature-Type".into(), SCHEME.into()),
        ],
        content_type: "application/json".into(),
        body: body.into_bytes(),
    })
}

/// `GET /v3/certificates`: the platform certificate, AES-256-GCM-encrypted with the APIv3 key
/// (associated data `certificate`), the answer signed like every answer.
#[handler]
fn certificates(request: &Request, hub: Data<&Arc<Hub>>) -> Response {
    if let Some(answer) = refuse_signature(&hub, request, b"") {
        return answer;
    }
    let aes_nonce = nonce(&hub, 12);
    let Ok(sealed) = aes_256_gcm_encrypt(
        CREDENTIALS.wechat_api_v3_key.as_bytes(),
        aes_nonce.as_bytes(),
        b"certificate",
        CREDENTIALS.wechat_platform_cert_pem.as_bytes(),
    ) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "SYSTEM_ERROR",
            "cannot seal the certificate",
        );
    };
    let body = json!({
        "data": [{
            "serial_no": CREDENTIALS.wechat_platform_cert_serial,
            // The sandbox's clock may be set anywhere; the certificate is valid throughout.
            "effective_time": "2020-01-01T00:00:00+08:00",
            "expire_time": "2046-01-01T00:00:00+08:00",
            "encrypt_certificate": {
                "algorithm": "AEAD_AES_256_GCM",
                "nonce": aes_nonce,
                "associated_data": "certificate",
                "ciphertext": b64(&sealed),
            },
        }],
    });
    signed(&hub, request, StatusCode::OK, body.to_string())
}
