//! Alipay open-platform wire format: the common request parameters and `biz_content`, the
//! RSA2 sign content (`k=v&…` sorted), amounts as yuan strings, `yyyy-MM-dd HH:mm:ss` times in
//! Beijing time, the synchronous response envelope with its signed raw JSON, the asynchronous
//! notification, and the `trade_status` enum with its exhaustive mapping into
//! [`PaymentStatus`].
//!
//! Everything here is pure: no I/O, no clock, no keys. Sources are listed in
//! `docs/providers/wallet_web.md`.

use std::collections::BTreeMap;

use application::ports::{
    GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundState, WebhookError,
};
use chrono::NaiveDateTime;
use domain::{Currency, Money, OrderId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::shared::money::{decimal_minor, to_decimal};
use crate::shared::time::{from_beijing, in_beijing};
use crate::shared::wire::printable;

/// The page-pay method.
pub const METHOD_PAGE_PAY: &str = "alipay.trade.page.pay";
/// The query method.
pub const METHOD_QUERY: &str = "alipay.trade.query";
/// The close method.
pub const METHOD_CLOSE: &str = "alipay.trade.close";
/// The product code of PC website pay.
pub const PRODUCT_CODE: &str = "FAST_INSTANT_TRADE_PAY";
/// `code` of a successful call.
pub const CODE_SUCCESS: &str = "10000";
/// `sub_code` when Alipay has no trade for the order (page pay creates it when the buyer
/// opens the cashier).
pub const SUB_CODE_TRADE_NOT_EXIST: &str = "ACQ.TRADE_NOT_EXIST";
/// The only signature type used: RSA-SHA256.
pub const SIGN_TYPE: &str = "RSA2";
/// `subject` is at most 256 characters.
pub const SUBJECT_MAX_CHARS: usize = 256;
/// `out_trade_no` is at most 64 characters.
pub const OUT_TRADE_NO_MAX_CHARS: usize = 64;
/// The largest amount Alipay takes, in fen (100 000 000 yuan).
pub const MAX_AMOUNT_FEN: i64 = 10_000_000_000;
/// The most parameters a notification may carry (a bound on parsing work).
pub const MAX_PARAMS: usize = 100;
const TIME_FORMAT: &str = "%Y-%m-%d %H:%M:%S";
const MAX_MESSAGE_CHARS: usize = 200;

/// The common parameters of every call (besides `method`, `biz_content` and `sign`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommonParams<'a> {
    /// The application id.
    pub app_id: &'a str,
    /// `yyyy-MM-dd HH:mm:ss`, Beijing time.
    pub timestamp: String,
}

/// `biz_content` of `alipay.trade.page.pay`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PagePayContent {
    /// Our order id.
    pub out_trade_no: String,
    /// Yuan with two decimals.
    pub total_amount: String,
    /// What is bought.
    pub subject: String,
    /// Always `FAST_INSTANT_TRADE_PAY`.
    pub product_code: &'static str,
    /// Pay deadline, `yyyy-MM-dd HH:mm:ss` Beijing time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_expire: Option<String>,
}

/// `biz_content` of `alipay.trade.query` and `alipay.trade.close`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TradeRef {
    /// Our order id.
    pub out_trade_no: String,
}

/// `trade_status` of a trade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TradeStatus {
    /// Created, not paid.
    WaitBuyerPay,
    /// Closed unpaid, or fully refunded.
    TradeClosed,
    /// Paid (refundable).
    TradeSuccess,
    /// Paid (no longer refundable).
    TradeFinished,
    /// A status this code does not know yet.
    #[serde(other)]
    Unknown,
}

/// Where a [`TradeStatus`] puts a payment, before amounts and times are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// Not (or not known to be) finished.
    Pending,
    /// Paid.
    Succeeded,
    /// Finished without payment (or fully refunded), with a reason.
    Failed(&'static str),
}

impl From<TradeStatus> for StatusClass {
    fn from(status: TradeStatus) -> Self {
        match status {
            TradeStatus::TradeSuccess | TradeStatus::TradeFinished => StatusClass::Succeeded,
            TradeStatus::TradeClosed => StatusClass::Failed("trade closed"),
            TradeStatus::WaitBuyerPay | TradeStatus::Unknown => StatusClass::Pending,
        }
    }
}

/// The fields of a `*_response` object that Tally reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ApiResponse {
    /// `10000` on success.
    pub code: String,
    /// Words.
    #[serde(default)]
    pub msg: String,
    /// The business error, such as `ACQ.TRADE_NOT_EXIST`.
    #[serde(default)]
    pub sub_code: Option<String>,
    /// Its words.
    #[serde(default)]
    pub sub_msg: Option<String>,
    /// Our order id.
    #[serde(default)]
    pub out_trade_no: Option<String>,
    /// Alipay's trade id.
    #[serde(default)]
    pub trade_no: Option<String>,
    /// Where the trade is (query).
    #[serde(default)]
    pub trade_status: Option<TradeStatus>,
    /// The order amount, yuan (query).
    #[serde(default)]
    pub total_amount: Option<String>,
    /// When it was paid, `yyyy-MM-dd HH:mm:ss` (query).
    #[serde(default)]
    pub send_pay_date: Option<String>,
    /// `Y` when this refund call moved money, `N` when it did not (a repeated
    /// `out_request_no`, or not yet confirmed) (refund).
    #[serde(default)]
    pub fund_change: Option<String>,
    /// The total refunded on the trade so far, yuan (refund).
    #[serde(default)]
    pub refund_fee: Option<String>,
}

/// `biz_content` of `alipay.trade.refund`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefundContent {
    /// Our order id (the trade to refund).
    pub out_trade_no: String,
    /// This refund, yuan with two decimals.
    pub refund_amount: String,
    /// Our refund id: Alipay refunds once per `out_request_no` of a trade (required for
    /// partial refunds).
    pub out_request_no: String,
    /// Why (at most 256 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_reason: Option<String>,
}

/// `alipay.trade.refund`.
pub const METHOD_REFUND: &str = "alipay.trade.refund";
/// The longest `out_request_no` (`string(64)`).
pub const OUT_REQUEST_NO_MAX_CHARS: usize = 64;
/// The longest `refund_reason` (`string(256)`).
pub const REFUND_REASON_MAX_CHARS: usize = 256;

/// Our refund id as `out_request_no`: 1 to 64 letters, digits, `_` or `-`.
///
/// # Errors
/// [`GatewayError::Rejected`] when it does not fit.
pub fn out_request_no(refund_id: &str) -> Result<String, GatewayError> {
    let fits = !refund_id.is_empty()
        && refund_id.len() <= OUT_REQUEST_NO_MAX_CHARS
        && refund_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if fits {
        Ok(refund_id.to_owned())
    } else {
        Err(GatewayError::Rejected(
            "refund id does not fit out_request_no (1 to 64 letters, digits, _ -)".into(),
        ))
    }
}

/// The refund reason: printable characters, at most 256; `None` when empty.
#[must_use]
pub fn refund_reason(text: &str) -> Option<String> {
    let reason = printable(text.trim(), REFUND_REASON_MAX_CHARS);
    (!reason.is_empty()).then_some(reason)
}

/// Where a refund stands from a successful `alipay.trade.refund` answer of `amount`.
///
/// `fund_change = Y`: the money moved now, and `refund_fee` (the running total) includes it.
/// `N`: this call moved nothing (a repeat of an `out_request_no` Alipay refunded already, or a
/// refund Alipay has not confirmed): pending; the refund notification's running total settles
/// it.
///
/// # Errors
/// [`GatewayError::BadResponse`] for a `Y` whose running total is unreadable or below the
/// refund.
pub fn refund_state(answer: &ApiResponse, amount: &Money) -> Result<RefundState, GatewayError> {
    if answer.fund_change.as_deref() != Some("Y") {
        return Ok(RefundState::Pending);
    }
    let total = answer
        .refund_fee
        .as_deref()
        .ok_or_else(|| GatewayError::BadResponse("refund answer without refund_fee".into()))
        .and_then(|fee| money_from_yuan(fee).map_err(GatewayError::BadResponse))?;
    if total.currency() != amount.currency() || total.amount_minor() < amount.amount_minor() {
        return Err(GatewayError::BadResponse(
            "refund_fee is below this refund".into(),
        ));
    }
    Ok(RefundState::Succeeded)
}

/// Why a verified notification is not ours: another app, or another seller when `seller_id`
/// is configured.
#[must_use]
pub fn foreign(
    notification: &Notification,
    app_id: &str,
    seller_id: Option<&str>,
) -> Option<String> {
    match notification.app_id.as_deref() {
        Some(id) if id == app_id => {}
        Some(id) => {
            return Some(format!(
                "app_id {:?} is not the configured app",
                printable(id, 32)
            ));
        }
        None => return Some("notification names no app_id".to_owned()),
    }
    let seller_id = seller_id?;
    match notification.seller_id.as_deref() {
        Some(id) if id == seller_id => None,
        Some(id) => Some(format!(
            "seller_id {:?} is not the configured seller",
            printable(id, 32)
        )),
        None => Some("notification names no seller_id".to_owned()),
    }
}

/// The asynchronous notification (`trade_status_sync`), as a form.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Notification {
    /// The notification id (the same across resends).
    #[serde(default)]
    pub notify_id: Option<String>,
    /// `trade_status_sync`.
    #[serde(default)]
    pub notify_type: Option<String>,
    /// When it was sent.
    #[serde(default)]
    pub notify_time: Option<String>,
    /// The application it is for.
    #[serde(default)]
    pub app_id: Option<String>,
    /// The seller (the merchant's Alipay user id, `2088…`) who was paid.
    #[serde(default)]
    pub seller_id: Option<String>,
    /// Our order id.
    #[serde(default)]
    pub out_trade_no: Option<String>,
    /// Where the trade is.
    #[serde(default)]
    pub trade_status: Option<TradeStatus>,
    /// The order amount, yuan.
    #[serde(default)]
    pub total_amount: Option<String>,
    /// The total refunded on the trade so far, this refund included, yuan (refund
    /// notifications only): "退款通知中，返回总退款金额", the same `refund_fee` that
    /// `alipay.trade.refund` answers as "该笔交易累计已经退款成功的金额". Not this refund's own
    /// amount, so it is a [`application::ports::RefundReport::Total`].
    #[serde(default)]
    pub refund_fee: Option<String>,
    /// When it was paid.
    #[serde(default)]
    pub gmt_payment: Option<String>,
    /// When it was refunded (refund notifications only; may carry milliseconds).
    #[serde(default)]
    pub gmt_refund: Option<String>,
    /// When it was closed.
    #[serde(default)]
    pub gmt_close: Option<String>,
}

/// Yuan with two decimals (`"0.01"`, `"99.00"`) from a CNY price above zero.
///
/// # Errors
/// [`GatewayError::Rejected`] for another currency, zero, or more than Alipay takes.
pub fn yuan(price: &Money) -> Result<String, GatewayError> {
    if price.currency() != Currency::Cny {
        return Err(GatewayError::Rejected(format!(
            "wallet_web charges CNY only, not {}",
            price.currency()
        )));
    }
    let fen = price.amount_minor();
    if !(1..=MAX_AMOUNT_FEN).contains(&fen) {
        return Err(GatewayError::Rejected(
            "amount must be 0.01 to 100000000 CNY".into(),
        ));
    }
    Ok(to_decimal(*price))
}

/// CNY money from a yuan string: digits, optionally `.` and one or two digits.
///
/// # Errors
/// Anything else (signs, spaces, exponents, three decimals, too many digits), as text.
pub fn money_from_yuan(text: &str) -> Result<Money, String> {
    let bad = || format!("amount {:?} is not a yuan amount", printable(text, 24));
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let trailing_point = text.contains('.') && fraction.is_empty();
    if whole.is_empty() || whole.len() > 12 || fraction.len() > 2 || trailing_point {
        return Err(bad());
    }
    let fen = decimal_minor(whole, fraction, Currency::Cny.exponent()).map_err(|_| bad())?;
    Money::from_minor(fen, Currency::Cny).map_err(|e| e.to_string())
}

/// Our order id as `out_trade_no`: at most 64 of `[0-9A-Za-z_]`.
///
/// # Errors
/// [`GatewayError::Rejected`] when the id does not fit.
pub fn out_trade_no(order_id: &OrderId) -> Result<String, GatewayError> {
    let id = order_id.as_str();
    if id.len() <= OUT_TRADE_NO_MAX_CHARS
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        Ok(id.to_owned())
    } else {
        Err(GatewayError::Rejected(format!(
            "order id {id:?} does not fit out_trade_no (at most 64 letters, digits and _)"
        )))
    }
}

/// `subject`: at most 256 characters, without `/`, `=` and `&`, which Alipay refuses.
#[must_use]
pub fn subject(text: &str) -> String {
    text.chars()
        .map(|c| if matches!(c, '/' | '=' | '&') { ' ' } else { c })
        .filter(|c| !c.is_control())
        .take(SUBJECT_MAX_CHARS)
        .collect()
}

/// A time as Alipay writes it: `yyyy-MM-dd HH:mm:ss`, Beijing time.
///
/// # Errors
/// [`GatewayError::Rejected`] for a time outside chrono's range.
pub fn beijing_time(at: Timestamp) -> Result<String, GatewayError> {
    let local = in_beijing(at).map_err(|e| GatewayError::Rejected(e.into()))?;
    Ok(local.format(TIME_FORMAT).to_string())
}

/// Parse `yyyy-MM-dd HH:mm:ss` (optionally with `.SSS`), Beijing time.
#[must_use]
pub fn parse_time(text: &str) -> Option<Timestamp> {
    from_beijing(&NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S%.f").ok()?)
}

/// The parameters of a call, without `sign`: the common ones, `method`, `biz_content`, and
/// `extra` (`notify_url`, `return_url`).
#[must_use]
pub fn call_params(
    common: &CommonParams<'_>,
    method: &str,
    biz_content: String,
    extra: &[(&str, &str)],
) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    params.insert("app_id".to_owned(), common.app_id.to_owned());
    params.insert("method".to_owned(), method.to_owned());
    params.insert("format".to_owned(), "JSON".to_owned());
    params.insert("charset".to_owned(), "utf-8".to_owned());
    params.insert("sign_type".to_owned(), SIGN_TYPE.to_owned());
    params.insert("timestamp".to_owned(), common.timestamp.clone());
    params.insert("version".to_owned(), "1.0".to_owned());
    params.insert("biz_content".to_owned(), biz_content);
    for (name, value) in extra {
        params.insert((*name).to_owned(), (*value).to_owned());
    }
    params
}

/// The content a request signature covers: every parameter but `sign` (so `sign_type` is
/// in), empty values dropped, sorted by name, `k=v` joined with `&`, values not encoded.
#[must_use]
pub fn request_sign_content(params: &BTreeMap<String, String>) -> String {
    join_sorted(
        params
            .iter()
            .filter(|(k, v)| k.as_str() != "sign" && !v.is_empty()),
    )
}

/// The content a notification or return signature covers: every parameter but `sign` and
/// `sign_type`, sorted by name, `k=v` joined with `&`, values decoded.
#[must_use]
pub fn notification_sign_content(params: &BTreeMap<String, String>) -> String {
    join_sorted(
        params
            .iter()
            .filter(|(k, _)| k.as_str() != "sign" && k.as_str() != "sign_type"),
    )
}

fn join_sorted<'a>(pairs: impl Iterator<Item = (&'a String, &'a String)>) -> String {
    // A BTreeMap iterates in byte order of the names, which is ASCII order.
    pairs
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// A form body as a map: refuses duplicated names and more than [`MAX_PARAMS`] parameters.
///
/// # Errors
/// [`WebhookError::Malformed`].
pub fn form_params(body: &[u8]) -> Result<BTreeMap<String, String>, WebhookError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
        .map_err(|_| WebhookError::Malformed("body is not a form".into()))?;
    if pairs.len() > MAX_PARAMS {
        return Err(WebhookError::Malformed("too many parameters".into()));
    }
    let mut params = BTreeMap::new();
    for (name, value) in pairs {
        if params.insert(name, value).is_some() {
            return Err(WebhookError::Malformed("duplicated parameter".into()));
        }
    }
    Ok(params)
}

/// The raw JSON text of the member `name` of the top-level object in `body`, exactly as sent
/// (Alipay signs the text of the `…_response` object, not a re-serialisation).
#[must_use]
pub fn raw_member<'a>(body: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("\"{name}\"");
    let start = body.find(&key)? + key.len();
    let rest = body[start..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let offset = body.len() - rest.len();
    let end = object_end(rest)?;
    Some(&body[offset..offset + end])
}

/// The length of the JSON object at the start of `text` (strings and escapes respected).
fn object_end(text: &str) -> Option<usize> {
    if !text.starts_with('{') {
        return None;
    }
    let (mut depth, mut in_string, mut escaped) = (0_usize, false, false);
    for (index, byte) in text.bytes().enumerate() {
        match (in_string, escaped, byte) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'{') => depth += 1,
            (false, _, b'}') => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + 1);
                }
            }
            (false, _, _) => {}
        }
    }
    None
}

/// The name of a method's response member: `alipay.trade.query` → `alipay_trade_query_response`.
#[must_use]
pub fn response_member(method: &str) -> String {
    format!("{}_response", method.replace('.', "_"))
}

/// A payment's state from a successful query answer, read exhaustively through
/// [`StatusClass`].
///
/// # Errors
/// [`GatewayError::BadResponse`] for a paid trade without a usable amount or time.
pub fn payment_status(answer: &ApiResponse) -> Result<PaymentStatus, GatewayError> {
    let status = answer.trade_status.unwrap_or(TradeStatus::Unknown);
    Ok(match StatusClass::from(status) {
        StatusClass::Pending => PaymentStatus::Pending,
        StatusClass::Failed(reason) => PaymentStatus::Failed {
            reason: reason.to_owned(),
        },
        StatusClass::Succeeded => {
            let amount = answer
                .total_amount
                .as_deref()
                .ok_or_else(|| GatewayError::BadResponse("paid trade without total_amount".into()))
                .and_then(|a| money_from_yuan(a).map_err(GatewayError::BadResponse))?;
            let paid_at = answer
                .send_pay_date
                .as_deref()
                .and_then(parse_time)
                .ok_or_else(|| {
                    GatewayError::BadResponse("paid trade without send_pay_date".into())
                })?;
            PaymentStatus::Succeeded { amount, paid_at }
        }
    })
}

/// The error of an answer whose `code` is not `10000`.
#[must_use]
pub fn api_error(answer: &ApiResponse) -> GatewayError {
    let detail = format!(
        "{} {}: {}",
        printable(&answer.code, 8),
        printable(answer.sub_code.as_deref().unwrap_or("-"), 64),
        printable(
            answer.sub_msg.as_deref().unwrap_or(&answer.msg),
            MAX_MESSAGE_CHARS
        )
    );
    // 20000: the service is unavailable; retrying later is the documented answer.
    if answer.code == "20000" {
        GatewayError::Unreachable(detail)
    } else {
        GatewayError::Rejected(detail)
    }
}

/// The events of a verified notification; `now` when it carries no time.
///
/// A notification with `refund_fee` is a refund: Alipay reports the total refunded on the
/// trade so far (`RefundReport::Total`, so two partial refunds of 34.00 arrive as 34.00, then
/// 68.00), with `TRADE_SUCCESS` for a partial and `TRADE_CLOSED` for a full refund. `out_biz_no`
/// (the refund request number) is not needed: a running total needs no refund id. Otherwise
/// `TRADE_SUCCESS`/`TRADE_FINISHED` is a payment and `TRADE_CLOSED` a closed, unpaid trade.
/// Sources in `docs/providers/wallet_web.md`.
///
/// # Errors
/// [`WebhookError::Malformed`] for unreadable amounts.
pub fn events(
    notification: &Notification,
    now: Timestamp,
) -> Result<Vec<PaymentEvent>, WebhookError> {
    let order = locator(notification.out_trade_no.as_deref().unwrap_or_default());
    let time = |field: &Option<String>| {
        field
            .as_deref()
            .or(notification.notify_time.as_deref())
            .and_then(parse_time)
            .unwrap_or(now)
    };
    if let Some(refund_fee) = notification.refund_fee.as_deref() {
        let total_refunded = money_from_yuan(refund_fee).map_err(WebhookError::Malformed)?;
        if !total_refunded.is_zero() {
            return Ok(vec![PaymentEvent::Refunded {
                charge: application::ports::RefundedCharge::Order(order),
                refund: application::ports::RefundReport::Total(total_refunded),
                occurred_at: time(&notification.gmt_refund),
            }]);
        }
    }
    let status = notification.trade_status.unwrap_or(TradeStatus::Unknown);
    Ok(match StatusClass::from(status) {
        StatusClass::Pending => Vec::new(),
        StatusClass::Failed(reason) => vec![PaymentEvent::PaymentFailed {
            order,
            reason: reason.to_owned(),
            occurred_at: time(&notification.gmt_close),
        }],
        StatusClass::Succeeded => {
            let amount = notification
                .total_amount
                .as_deref()
                .ok_or_else(|| WebhookError::Malformed("paid trade without total_amount".into()))
                .and_then(|a| money_from_yuan(a).map_err(WebhookError::Malformed))?;
            vec![PaymentEvent::PaymentSucceeded {
                order,
                amount,
                occurred_at: time(&notification.gmt_payment),
            }]
        }
    })
}

/// The notification's event type as stored in the inbox: `trade_status_sync.TRADE_SUCCESS`,
/// or `trade_status_sync.refund` for refunds.
#[must_use]
pub fn event_type(notification: &Notification, params: &BTreeMap<String, String>) -> String {
    let kind = printable(notification.notify_type.as_deref().unwrap_or("notify"), 32);
    if notification.refund_fee.is_some() {
        return format!("{kind}.refund");
    }
    let status = params.get("trade_status").map_or("-", String::as_str);
    format!("{kind}.{}", printable(status, 32))
}

/// Where a notification points: our order id from `out_trade_no`.
#[must_use]
pub fn locator(out_trade_no: &str) -> OrderLocator {
    OrderLocator {
        order_id: OrderId::new(out_trade_no).ok(),
        provider_reference: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yuan_strings_round_trip_exactly_and_nothing_else_parses() {
        let cny = |fen| Money::from_minor(fen, Currency::Cny).unwrap();
        assert_eq!(yuan(&cny(1)).unwrap(), "0.01");
        assert_eq!(yuan(&cny(9900)).unwrap(), "99.00");
        assert_eq!(yuan(&cny(123_456)).unwrap(), "1234.56");
        assert!(yuan(&cny(0)).is_err());
        assert!(yuan(&Money::from_minor(1, Currency::Usd).unwrap()).is_err());
        for (text, fen) in [("0.01", 1), ("20", 2000), ("20.5", 2050), ("20.50", 2050)] {
            assert_eq!(money_from_yuan(text).unwrap(), cny(fen), "{text}");
        }
        for bad in [
            "",
            ".5",
            "1.",
            "-1",
            "+1",
            "1.234",
            "1e3",
            " 1",
            "1,00",
            "9999999999999",
        ] {
            assert!(money_from_yuan(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn beijing_times_are_written_and_read_with_or_without_milliseconds() {
        let at = Timestamp::from_unix_millis(1_767_225_600_000);
        assert_eq!(beijing_time(at).unwrap(), "2026-01-01 08:00:00");
        assert_eq!(parse_time("2026-01-01 08:00:00"), Some(at));
        assert_eq!(
            parse_time("2026-01-01 08:00:00.250"),
            Some(at.plus_millis(250))
        );
        assert_eq!(parse_time("2026-01-01T08:00:00+08:00"), None);
    }

    #[test]
    fn every_trade_status_maps_to_our_status_and_unknown_ones_stay_pending() {
        let answer = |status: Option<TradeStatus>| ApiResponse {
            code: CODE_SUCCESS.into(),
            msg: "Success".into(),
            sub_code: None,
            sub_msg: None,
            out_trade_no: Some("ord_1".into()),
            trade_no: None,
            trade_status: status,
            total_amount: Some("0.01".into()),
            send_pay_date: Some("2026-01-01 08:00:00".into()),
            fund_change: None,
            refund_fee: None,
        };
        for status in [TradeStatus::TradeSuccess, TradeStatus::TradeFinished] {
            assert!(matches!(
                payment_status(&answer(Some(status))).unwrap(),
                PaymentStatus::Succeeded { .. }
            ));
        }
        assert!(matches!(
            payment_status(&answer(Some(TradeStatus::TradeClosed))).unwrap(),
            PaymentStatus::Failed { .. }
        ));
        for status in [
            Some(TradeStatus::WaitBuyerPay),
            Some(TradeStatus::Unknown),
            None,
        ] {
            assert_eq!(
                payment_status(&answer(status)).unwrap(),
                PaymentStatus::Pending
            );
        }
        let unknown: TradeStatus = serde_json::from_str("\"TRADE_PENDING_NEW\"").unwrap();
        assert_eq!(unknown, TradeStatus::Unknown);
    }

    #[test]
    fn the_request_sign_content_keeps_sign_type_and_drops_sign_and_empty_values() {
        let params: BTreeMap<String, String> = [
            ("b", "2"),
            ("a", "1"),
            ("sign", "x"),
            ("sign_type", "RSA2"),
            ("e", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(request_sign_content(&params), "a=1&b=2&sign_type=RSA2");
        assert_eq!(notification_sign_content(&params), "a=1&b=2&e=");
    }

    #[test]
    fn the_raw_response_member_is_cut_out_byte_exact() {
        let body = r#"{"alipay_trade_query_response":{"code":"10000","msg":"a \"}\" b","x":{"y":1}},"sign":"abc"}"#;
        assert_eq!(
            raw_member(body, "alipay_trade_query_response"),
            Some(r#"{"code":"10000","msg":"a \"}\" b","x":{"y":1}}"#)
        );
        assert_eq!(raw_member(body, "missing"), None);
        assert_eq!(raw_member(r#"{"a_response":{"open":1"#, "a_response"), None);
    }

    #[test]
    fn order_ids_must_fit_out_trade_no_and_subjects_lose_forbidden_characters() {
        assert!(out_trade_no(&OrderId::new("ord_1").unwrap()).is_ok());
        assert!(out_trade_no(&OrderId::new("ord-1").unwrap()).is_err());
        assert_eq!(subject("A/B=C&D"), "A B C D");
        assert_eq!(subject(&"x".repeat(300)).len(), SUBJECT_MAX_CHARS);
    }
}
