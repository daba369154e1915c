//! The Alipay open-platform simulator for PC website payment.
//!
//! Serves `/sandbox/wallet_web/gateway.do`, the one URL Alipay has:
//! - `GET …/gateway.do?method=alipay.trade.page.pay&…&sign=…` is where the gateway sends the
//!   buyer's browser: the parameters are checked as Alipay checks them (app id, `RSA2`,
//!   `utf-8`, version, `timestamp`, the RSA-SHA256 `sign` over every non-empty parameter but
//!   `sign`, sorted, with the application public key, and the `biz_content` rules including
//!   `time_expire`), the trade is created, and the browser goes on to the hosted checkout page.
//! - `POST …/gateway.do` with `method=alipay.trade.query`, `alipay.trade.close` or
//!   `alipay.trade.refund` (same checks, and a `timestamp` within 10 minutes of now) answers
//!   `{"<method>_response": {…}, "sign": …}`, signed over the raw response object with the
//!   Alipay key. A refund is idempotent per `out_request_no` (`fund_change` `Y` the first time,
//!   `N` after) and sends the refund notification with `out_biz_no` = `out_request_no`.
//!
//! Notifications are form POSTs signed with the Alipay key over the sorted parameters without
//! `sign` and `sign_type`: `TRADE_SUCCESS` on payment, `TRADE_CLOSED` on a declined payment,
//! and for a refund `refund_fee` (the total refunded so far) with `TRADE_SUCCESS`, or
//! `TRADE_CLOSED` once fully refunded. After paying, the browser returns to `return_url` with
//! the signed synchronous return parameters, as from Alipay.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use domain::{Currency, ProviderId, Timestamp};
use poem::http::StatusCode;
use poem::web::Data;
use poem::{Body, Request, Response, Route, get, handler};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::{
    PrivateKey, PublicKey, b64, private_key, public_key, rsa_sha256_sign, rsa_sha256_verify, unb64,
};

use crate::credentials::CREDENTIALS;
use crate::formats::{beijing_time, parse_beijing_time as parse_time};
use crate::hub::{
    ForeignUrl, Hub, SandboxError, SimEvent, SimKind, SimPayment, SimStatus, SimWebhook,
};
use crate::simulator::Simulator;

/// The simulated Alipay.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalletWebSimulator;

/// The `[providers.wallet_web]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/wallet_web`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "appId": CREDENTIALS.app_id,
        "appPrivateKey": CREDENTIALS.merchant_private_pem,
        "alipayPublicKey": CREDENTIALS.provider_public_pem,
        "sellerId": CREDENTIALS.alipay_seller_id,
        "baseUrl": api_base_url,
    })
}

/// The largest request body read, in bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// The most parameters one call may carry.
const MAX_PARAMS: usize = 50;
/// How far a request `timestamp` may be from now, in milliseconds.
const TIMESTAMP_WINDOW_MS: i64 = 10 * 60 * 1000;
/// The sandbox seller (Alipay's `seller_id`).
const SELLER_ID: &str = CREDENTIALS.alipay_seller_id;

static APP_KEY: LazyLock<Option<PublicKey>> =
    LazyLock::new(|| public_key(CREDENTIALS.merchant_public_pem).ok());
static ALIPAY_KEY: LazyLock<Option<PrivateKey>> =
    LazyLock::new(|| private_key(CREDENTIALS.provider_private_pem).ok());

/// An Alipay error: `code`, `sub_code`, `sub_msg`.
type ApiError = (&'static str, &'static str, String);

#[async_trait]
impl Simulator for WalletWebSimulator {
    fn provider(&self) -> ProviderId {
        ProviderId::WalletWeb
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        Route::new().at("/gateway.do", get(page_pay).post(api_call))
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        let now = beijing(hub.now_ms());
        let params = match event {
            SimEvent::Paid(payment) => {
                let _ = hub.update_payment(&payment.id, |p| {
                    p.extra.insert("gmt_payment".into(), now.clone());
                    Ok(())
                });
                let mut params = notification(hub, payment, "TRADE_SUCCESS");
                params.insert("gmt_payment".into(), now);
                params
            }
            SimEvent::Declined(payment) => {
                let mut params = notification(hub, payment, "TRADE_CLOSED");
                params.insert("gmt_close".into(), now);
                params
            }
            SimEvent::Refunded {
                payment, refund_id, ..
            } => refund_notification(hub, payment, refund_id),
            _ => return Vec::new(),
        };
        signed_form(params)
            .map(|body| SimWebhook {
                headers: Vec::new(),
                content_type: "application/x-www-form-urlencoded; charset=utf-8".into(),
                body: body.into_bytes(),
            })
            .into_iter()
            .collect()
    }

    fn success_redirect(&self, payment: &SimPayment) -> String {
        let return_url = payment.success_url.as_str();
        let timestamp = payment
            .extra
            .get("gmt_payment")
            .cloned()
            .unwrap_or_else(|| beijing(payment.created_at_ms));
        let mut params = BTreeMap::new();
        for (name, value) in [
            ("charset", "utf-8".to_owned()),
            ("out_trade_no", payment.order_id.clone()),
            ("method", "alipay.trade.page.pay.return".to_owned()),
            ("total_amount", yuan(payment.amount_minor)),
            ("trade_no", payment.id.clone()),
            ("auth_app_id", CREDENTIALS.app_id.to_owned()),
            ("version", "1.0".to_owned()),
            ("app_id", CREDENTIALS.app_id.to_owned()),
            ("sign_type", "RSA2".to_owned()),
            ("seller_id", SELLER_ID.to_owned()),
            ("timestamp", timestamp),
        ] {
            params.insert(name.to_owned(), value);
        }
        match signed_form(params) {
            Some(query) if return_url.contains('?') => format!("{return_url}&{query}"),
            Some(query) => format!("{return_url}?{query}"),
            None => return_url.to_owned(),
        }
    }
}

fn beijing(ms: i64) -> String {
    beijing_time(Timestamp::from_unix_millis(ms))
}

/// Yuan with two decimals.
fn yuan(fen: i64) -> String {
    format!("{}.{:02}", fen / 100, fen % 100)
}

/// Fen from a yuan string with at most two decimals, 0.01 to 100 000 000.
fn fen(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || fraction.len() > 2 || (text.contains('.') && !digits(fraction)) {
        return None;
    }
    let fen = whole.parse::<i64>().ok()? * 100 + format!("{fraction:0<2}").parse::<i64>().ok()?;
    (1..=10_000_000_000).contains(&fen).then_some(fen)
}

/// `params` with `sign` added (Alipay key, sorted, without `sign` and `sign_type`), as a form.
fn signed_form(mut params: BTreeMap<String, String>) -> Option<String> {
    let key = ALIPAY_KEY.as_ref()?;
    let content = params
        .iter()
        .filter(|(k, _)| k.as_str() != "sign" && k.as_str() != "sign_type")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    params.insert(
        "sign".into(),
        b64(&rsa_sha256_sign(key, content.as_bytes())),
    );
    serde_urlencoded::to_string(&params).ok()
}

/// The parameters every notification of `payment` carries.
fn notification(hub: &Hub, payment: &SimPayment, trade_status: &str) -> BTreeMap<String, String> {
    let amount = yuan(payment.amount_minor);
    let mut params = BTreeMap::new();
    for (name, value) in [
        ("notify_time", beijing(hub.now_ms())),
        ("notify_type", "trade_status_sync".to_owned()),
        ("notify_id", hub.new_id("2026sandbox")),
        ("app_id", CREDENTIALS.app_id.to_owned()),
        ("auth_app_id", CREDENTIALS.app_id.to_owned()),
        ("charset", "utf-8".to_owned()),
        ("version", "1.0".to_owned()),
        ("sign_type", "RSA2".to_owned()),
        ("trade_no", payment.id.clone()),
        ("out_trade_no", payment.order_id.clone()),
        ("buyer_id", "2088000000000001".to_owned()),
        ("buyer_logon_id", "sandbox***@tally.local".to_owned()),
        ("seller_id", SELLER_ID.to_owned()),
        ("trade_status", trade_status.to_owned()),
        ("total_amount", amount.clone()),
        ("receipt_amount", amount.clone()),
        ("invoice_amount", amount.clone()),
        ("buyer_pay_amount", amount),
        (
            "subject",
            payment.extra.get("subject").cloned().unwrap_or_default(),
        ),
        ("gmt_create", beijing(payment.created_at_ms)),
    ] {
        params.insert(name.to_owned(), value);
    }
    params
}

/// A refund notification: `refund_fee` is the total refunded so far.
fn refund_notification(
    hub: &Hub,
    payment: &SimPayment,
    refund_id: &str,
) -> BTreeMap<String, String> {
    let full = payment.refunded_minor >= payment.amount_minor;
    let status = if full {
        "TRADE_CLOSED"
    } else {
        "TRADE_SUCCESS"
    };
    let mut params = notification(hub, payment, status);
    let now_ms = hub.now_ms();
    params.insert("refund_fee".into(), yuan(payment.refunded_minor));
    params.insert(
        "gmt_refund".into(),
        format!("{}.{:03}", beijing(now_ms), now_ms.rem_euclid(1000)),
    );
    params.insert("out_biz_no".into(), refund_id.to_owned());
    if let Some(paid) = payment.extra.get("gmt_payment") {
        params.insert("gmt_payment".into(), paid.clone());
    }
    if full {
        params.insert("gmt_close".into(), beijing(now_ms));
    }
    params
}

/// Parameters from a query string or form, refusing duplicates and floods.
fn parse_params(
    pairs: &[(String, String)],
    into: &mut BTreeMap<String, String>,
) -> Result<(), ApiError> {
    for (name, value) in pairs {
        if into.len() >= MAX_PARAMS || into.insert(name.clone(), value.clone()).is_some() {
            return Err((
                "40002",
                "isv.invalid-parameter",
                "duplicated or too many parameters".into(),
            ));
        }
    }
    Ok(())
}

/// Who sends a call: a server right after signing it, or a browser that may come back to a
/// stored page-pay URL later (bounded by the trade's `time_expire` instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Server,
    Browser,
}

/// Check the common parameters and the `sign` as Alipay does.
fn check_request(
    hub: &Hub,
    params: &BTreeMap<String, String>,
    caller: Caller,
) -> Result<(), ApiError> {
    let param = |name: &str| params.get(name).map(String::as_str);
    if param("app_id") != Some(CREDENTIALS.app_id) {
        return Err(("40002", "isv.invalid-app-id", "unknown app_id".into()));
    }
    if param("sign_type") != Some("RSA2") {
        return Err((
            "40002",
            "isv.invalid-signature-type",
            "sign_type must be RSA2".into(),
        ));
    }
    if !param("charset").is_some_and(|c| c.eq_ignore_ascii_case("utf-8")) {
        return Err((
            "40002",
            "isv.invalid-charset",
            "charset must be utf-8".into(),
        ));
    }
    if param("version") != Some("1.0")
        || param("format").is_some_and(|f| !f.eq_ignore_ascii_case("JSON"))
    {
        return Err((
            "40002",
            "isv.invalid-parameter",
            "version must be 1.0, format JSON".into(),
        ));
    }
    let fresh = param("timestamp").and_then(parse_time).is_some_and(|t| {
        let ahead_ms = t.unix_millis() - hub.now_ms();
        match caller {
            Caller::Server => ahead_ms.abs() <= TIMESTAMP_WINDOW_MS,
            Caller::Browser => ahead_ms <= TIMESTAMP_WINDOW_MS,
        }
    });
    if !fresh {
        return Err((
            "40002",
            "isv.invalid-timestamp",
            "timestamp missing or out of range".into(),
        ));
    }
    let content = params
        .iter()
        .filter(|(k, v)| k.as_str() != "sign" && !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let verified = match (APP_KEY.as_ref(), param("sign").and_then(unb64)) {
        (Some(key), Some(sign)) => rsa_sha256_verify(key, content.as_bytes(), &sign),
        _ => false,
    };
    if verified {
        Ok(())
    } else {
        Err((
            "40002",
            "isv.invalid-signature",
            "sign does not verify".into(),
        ))
    }
}

#[derive(Debug, Deserialize)]
struct PagePay {
    out_trade_no: String,
    total_amount: String,
    subject: String,
    product_code: String,
    #[serde(default)]
    time_expire: Option<String>,
}

/// The cashier page error, as plain text.
fn error_page(error: &ApiError) -> Response {
    Response::builder()
        .status(StatusCode::BAD_REQUEST)
        .content_type("text/plain; charset=utf-8")
        .body(format!(
            "Alipay sandbox: {} {}: {}",
            error.0, error.1, error.2
        ))
}

#[handler]
fn page_pay(request: &Request, hub: Data<&Arc<Hub>>) -> Response {
    match start_page_pay(&hub, request.uri().query().unwrap_or_default()) {
        Ok(location) => Response::builder()
            .status(StatusCode::FOUND)
            .header("Location", location)
            .finish(),
        Err(error) => error_page(&error),
    }
}

/// Check a page-pay URL's parameters, create (or find) the trade, and return the cashier page.
fn start_page_pay(hub: &Hub, query: &str) -> Result<String, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(|_| {
        (
            "40002",
            "isv.invalid-parameter",
            "query is not a form".to_owned(),
        )
    })?;
    let mut params = BTreeMap::new();
    parse_params(&pairs, &mut params)?;
    check_request(hub, &params, Caller::Browser)?;
    if params.get("method").map(String::as_str) != Some("alipay.trade.page.pay") {
        return Err((
            "40002",
            "isv.invalid-method",
            "GET serves alipay.trade.page.pay only".into(),
        ));
    }
    let content: PagePay = params
        .get("biz_content")
        .and_then(|b| serde_json::from_str(b).ok())
        .ok_or((
            "40002",
            "isv.invalid-parameter",
            "biz_content is missing or unreadable".to_owned(),
        ))?;
    let amount_fen = validate_page_pay(&content, hub.now_ms())?;
    if let Some(existing) = hub.payment_for_order(ProviderId::WalletWeb, &content.out_trade_no) {
        return match existing.status {
            SimStatus::Open if existing.amount_minor == amount_fen => {
                Ok(hub.checkout_url(&existing.id))
            }
            SimStatus::Open => Err((
                "40004",
                "ACQ.CONTEXT_INCONSISTENT",
                "trade exists with other parameters".into(),
            )),
            SimStatus::Paid => Err((
                "40004",
                "ACQ.TRADE_HAS_SUCCESS",
                "trade already paid".into(),
            )),
            _ => Err(("40004", "ACQ.TRADE_HAS_CLOSE", "trade closed".into())),
        };
    }
    insert_trade(hub, content, amount_fen, &params)
        .map_err(|foreign| ("40002", "isv.invalid-parameter", foreign.to_string()))
}

/// Store a new open trade for a checked page-pay call; the cashier page of it.
fn insert_trade(
    hub: &Hub,
    content: PagePay,
    amount_fen: i64,
    params: &BTreeMap<String, String>,
) -> Result<String, ForeignUrl> {
    let id = hub.new_id("2088");
    let mut extra = BTreeMap::new();
    extra.insert("subject".to_owned(), content.subject);
    if let Some(time_expire) = content.time_expire {
        extra.insert("time_expire".to_owned(), time_expire);
    }
    let return_url = params.get("return_url").cloned().unwrap_or_default();
    hub.insert_payment(
        SimPayment {
            id: id.clone(),
            provider: ProviderId::WalletWeb,
            order_id: content.out_trade_no,
            amount_minor: amount_fen,
            currency: Currency::Cny,
            kind: SimKind::OneTime,
            status: SimStatus::Open,
            success_url: return_url.clone(),
            // Page pay has no cancel URL; the buyer who gives up goes back to the return URL.
            cancel_url: return_url,
            notify_url: params.get("notify_url").cloned().unwrap_or_default(),
            refunded_minor: 0,
            subscription_id: None,
            created_at_ms: hub.now_ms(),
            extra,
        },
        ["return_url", "return_url", "notify_url"],
    )?;
    Ok(hub.checkout_url(&id))
}

/// Alipay's field rules for page pay; the amount in fen.
fn validate_page_pay(content: &PagePay, now_ms: i64) -> Result<i64, ApiError> {
    let invalid = |message: &str| ("40002", "isv.invalid-parameter", message.to_owned());
    let out_trade_no_ok = !content.out_trade_no.is_empty()
        && content.out_trade_no.len() <= 64
        && content
            .out_trade_no
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !out_trade_no_ok {
        return Err(invalid("out_trade_no must be at most 64 of [0-9A-Za-z_]"));
    }
    if content.product_code != "FAST_INSTANT_TRADE_PAY" {
        return Err(invalid("product_code must be FAST_INSTANT_TRADE_PAY"));
    }
    let subject_ok = !content.subject.is_empty()
        && content.subject.chars().count() <= 256
        && !content.subject.contains(['/', '=', '&']);
    if !subject_ok {
        return Err(invalid("subject must be 1 to 256 characters without / = &"));
    }
    match content.time_expire.as_deref().map(parse_time) {
        Some(None) => return Err(invalid("time_expire must be yyyy-MM-dd HH:mm:ss")),
        Some(Some(expire)) if expire.unix_millis() <= now_ms => {
            return Err(("40004", "ACQ.TRADE_HAS_CLOSE", "订单已超时".to_owned()));
        }
        _ => {}
    }
    fen(&content.total_amount).ok_or_else(|| invalid("total_amount must be 0.01 to 100000000 yuan"))
}

#[handler]
async fn api_call(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    let Ok(body) = body.into_bytes_limit(MAX_BODY_BYTES).await else {
        return Response::builder()
            .status(StatusCode::PAYLOAD_TOO_LARGE)
            .content_type("text/plain; charset=utf-8")
            .body("body too large");
    };
    let mut params = BTreeMap::new();
    let query = request.uri().query().unwrap_or_default();
    let answer = match run_call(&hub, query, &body, &mut params) {
        Ok(Answer::Plain(answer)) => answer,
        Ok(Answer::Refunded { answer, event }) => {
            // The refund notification goes to the trade's notify_url, as Alipay sends it.
            if let SimEvent::Refunded { payment, .. } = &event {
                hub.dispatch(ProviderId::WalletWeb, &payment.notify_url, &event)
                    .await;
            }
            answer
        }
        Err((code, sub_code, sub_msg)) => {
            let msg = if code == "40004" {
                "Business Failed"
            } else {
                "Invalid Arguments"
            };
            json!({ "code": code, "msg": msg, "sub_code": sub_code, "sub_msg": sub_msg })
        }
    };
    let method = params.get("method").map_or("", String::as_str);
    signed_answer(method, &answer)
}

/// A call's answer, and the refund notification to send when it refunded.
enum Answer {
    Plain(Value),
    Refunded { answer: Value, event: SimEvent },
}

/// Read a call's parameters (query string and form body) into `params`, check them, and
/// answer it.
fn run_call(
    hub: &Hub,
    query: &str,
    body: &[u8],
    params: &mut BTreeMap<String, String>,
) -> Result<Answer, ApiError> {
    let not_form = |_| {
        (
            "40002",
            "isv.invalid-parameter",
            "parameters are not a form".to_owned(),
        )
    };
    let from_query: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(not_form)?;
    let from_body: Vec<(String, String)> = serde_urlencoded::from_bytes(body).map_err(not_form)?;
    parse_params(&from_query, params)?;
    parse_params(&from_body, params)?;
    check_request(hub, params, Caller::Server)?;
    if params.get("method").map(String::as_str) == Some("alipay.trade.refund") {
        let content = params
            .get("biz_content")
            .and_then(|b| serde_json::from_str::<RefundContent>(b).ok())
            .ok_or((
                "40002",
                "isv.missing-parameter",
                "biz_content needs out_trade_no and refund_amount".to_owned(),
            ))?;
        return refund_trade(hub, &content);
    }
    let out_trade_no = params
        .get("biz_content")
        .and_then(|b| serde_json::from_str::<TradeRef>(b).ok())
        .map(|t| t.out_trade_no)
        .ok_or((
            "40002",
            "isv.missing-parameter",
            "biz_content.out_trade_no is required".to_owned(),
        ))?;
    match params.get("method").map(String::as_str) {
        Some("alipay.trade.query") => query_trade(hub, &out_trade_no).map(Answer::Plain),
        Some("alipay.trade.close") => close_trade(hub, &out_trade_no).map(Answer::Plain),
        _ => Err((
            "40002",
            "isv.invalid-method",
            "method not served by the sandbox".to_owned(),
        )),
    }
}

#[derive(Debug, Deserialize)]
struct TradeRef {
    out_trade_no: String,
}

/// `{"<method>_response": answer, "sign": …}`, signed over the exact response text.
fn signed_answer(method: &str, answer: &Value) -> Response {
    let member = if method.starts_with("alipay.") {
        format!("{}_response", method.replace('.', "_"))
    } else {
        "error_response".to_owned()
    };
    let raw = answer.to_string();
    let sign = ALIPAY_KEY
        .as_ref()
        .map(|key| b64(&rsa_sha256_sign(key, raw.as_bytes())))
        .unwrap_or_default();
    let member_json = Value::String(member).to_string();
    let sign_json = Value::String(sign).to_string();
    Response::builder()
        .status(StatusCode::OK)
        .content_type("application/json; charset=utf-8")
        .body(format!("{{{member_json}:{raw},\"sign\":{sign_json}}}"))
}

fn not_exist() -> ApiError {
    ("40004", "ACQ.TRADE_NOT_EXIST", "交易不存在".to_owned())
}

fn query_trade(hub: &Hub, out_trade_no: &str) -> Result<Value, ApiError> {
    let payment = hub
        .payment_for_order(ProviderId::WalletWeb, out_trade_no)
        .ok_or_else(not_exist)?;
    let status = match payment.status {
        SimStatus::Open | SimStatus::Approved => "WAIT_BUYER_PAY",
        SimStatus::Paid if payment.refunded_minor >= payment.amount_minor => "TRADE_CLOSED",
        SimStatus::Paid => "TRADE_SUCCESS",
        SimStatus::Declined | SimStatus::Canceled => "TRADE_CLOSED",
    };
    let mut answer = json!({
        "code": "10000",
        "msg": "Success",
        "trade_no": payment.id,
        "out_trade_no": payment.order_id,
        "buyer_logon_id": "sandbox***@tally.local",
        "trade_status": status,
        "total_amount": yuan(payment.amount_minor),
    });
    if let Some(paid) = payment.extra.get("gmt_payment") {
        answer["send_pay_date"] = json!(paid);
        answer["buyer_pay_amount"] = json!(yuan(payment.amount_minor));
        answer["receipt_amount"] = json!(yuan(payment.amount_minor));
    }
    Ok(answer)
}

fn close_trade(hub: &Hub, out_trade_no: &str) -> Result<Value, ApiError> {
    let payment = hub
        .payment_for_order(ProviderId::WalletWeb, out_trade_no)
        .ok_or_else(not_exist)?;
    match payment.status {
        SimStatus::Open | SimStatus::Approved => {
            hub.cancel_payment(&payment.id)
                .map_err(|e| ("40004", "ACQ.TRADE_STATUS_ERROR", e.to_string()))?;
        }
        SimStatus::Paid => {
            return Err((
                "40004",
                "ACQ.TRADE_STATUS_ERROR",
                "交易状态不合法".to_owned(),
            ));
        }
        SimStatus::Declined | SimStatus::Canceled => {}
    }
    Ok(json!({
        "code": "10000",
        "msg": "Success",
        "trade_no": payment.id,
        "out_trade_no": payment.order_id,
    }))
}

#[derive(Debug, Deserialize)]
struct RefundContent {
    out_trade_no: String,
    refund_amount: String,
    #[serde(default)]
    out_request_no: Option<String>,
    #[serde(default)]
    refund_reason: Option<String>,
}

/// `alipay.trade.refund`: idempotent per `out_request_no` of a trade (absent, Alipay takes
/// `out_trade_no`, which allows one refund). A new request refunds and answers
/// `fund_change = Y`; the same request again answers the same refund with `fund_change = N`
/// and refunds nothing; the same `out_request_no` with another amount is refused.
/// `refund_fee` is the trade's running total refunded.
/// The refund's `out_request_no` (the trade's number when absent), when it and the reason fit
/// Alipay's limits.
fn refund_request_no(content: &RefundContent) -> Option<String> {
    let request_no = content
        .out_request_no
        .clone()
        .unwrap_or_else(|| content.out_trade_no.clone());
    let reason_fits = content
        .refund_reason
        .as_deref()
        .is_none_or(|r| r.chars().count() <= 256);
    (!request_no.is_empty() && request_no.len() <= 64 && reason_fits).then_some(request_no)
}

/// Alipay's answer to a refund of `p`; `fund_change` is `N` for a repeated request.
fn refund_answer(hub: &Hub, p: &SimPayment, fund_change: &str) -> Value {
    json!({
        "code": "10000",
        "msg": "Success",
        "trade_no": p.id,
        "out_trade_no": p.order_id,
        "buyer_logon_id": "sandbox***@tally.local",
        "fund_change": fund_change,
        "refund_fee": yuan(p.refunded_minor),
        "gmt_refund_pay": beijing(hub.now_ms()),
        "buyer_user_id": "2088000000000001",
    })
}

fn refund_trade(hub: &Hub, content: &RefundContent) -> Result<Answer, ApiError> {
    let payment = hub
        .payment_for_order(ProviderId::WalletWeb, &content.out_trade_no)
        .ok_or_else(not_exist)?;
    let invalid = |message: &str| ("40004", "ACQ.INVALID_PARAMETER", message.to_owned());
    let amount = fen(&content.refund_amount)
        .ok_or_else(|| invalid("refund_amount must be 0.01 to 100000000 yuan"))?;
    let request_no = refund_request_no(content).ok_or_else(|| {
        invalid("out_request_no must be 1 to 64 characters, refund_reason at most 256")
    })?;
    let key = format!("refund_request:{request_no}");
    let answer = |p: &SimPayment, fund_change: &str| refund_answer(hub, p, fund_change);
    // Checked and changed under the hub's lock, so two calls with one out_request_no refund
    // once however they interleave.
    let outcome = hub.update_payment(&payment.id, |p| {
        if let Some(earlier) = p.extra.get(&key) {
            return Ok((*earlier == amount.to_string()).then(|| (p.clone(), false)));
        }
        if p.status != SimStatus::Paid {
            return Err(SandboxError::Conflict("ACQ.TRADE_STATUS_ERROR".into()));
        }
        if p.refunded_minor + amount > p.amount_minor {
            return Err(SandboxError::Conflict(
                "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL".into(),
            ));
        }
        p.refunded_minor += amount;
        p.extra.insert(key.clone(), amount.to_string());
        Ok(Some((p.clone(), true)))
    });
    let refunded = match outcome {
        Ok(Some((p, true))) => p,
        Ok(Some((p, false))) => return Ok(Answer::Plain(answer(&p, "N"))),
        Ok(None) => {
            return Err(invalid(
                "out_request_no was used with another refund_amount",
            ));
        }
        Err(SandboxError::Conflict(code)) if code == "ACQ.TRADE_STATUS_ERROR" => {
            return Err((
                "40004",
                "ACQ.TRADE_STATUS_ERROR",
                "交易状态不合法".to_owned(),
            ));
        }
        Err(_) => {
            return Err((
                "40004",
                "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL",
                "退款金额超限".to_owned(),
            ));
        }
    };
    Ok(Answer::Refunded {
        answer: answer(&refunded, "Y"),
        event: SimEvent::Refunded {
            payment: refunded,
            refund_id: request_no,
            amount_minor: amount,
        },
    })
}
