//! WeChat Pay APIv3 wire format: request and response bodies, the notification envelope and
//! its decrypted resources, amounts in fen, RFC 3339 times in Beijing time, the request
//! signature message and `Authorization` header, and the `trade_state` enum with its exhaustive
//! mapping into [`PaymentStatus`].
//!
//! Everything here is pure: no I/O, no clock, no keys. Sources are listed in
//! `docs/providers/wallet_qr.md`.

use application::ports::{
    GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundReport, RefundState,
    RefundedCharge, WebhookError,
};
use domain::{Currency, Money, OrderId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::shared::time::{in_beijing, parse_rfc3339};
use crate::shared::wire::printable;

/// The `Authorization` scheme and the notification signature type.
pub const SIGNATURE_SCHEME: &str = "WECHATPAY2-SHA256-RSA2048";
/// The only resource encryption WeChat Pay uses.
pub const AEAD_ALGORITHM: &str = "AEAD_AES_256_GCM";
/// A payment succeeded.
pub const EVENT_TRANSACTION_SUCCESS: &str = "TRANSACTION.SUCCESS";
/// A refund succeeded.
pub const EVENT_REFUND_SUCCESS: &str = "REFUND.SUCCESS";
/// The currency WeChat Pay Native charges in.
pub const CURRENCY: &str = "CNY";
/// `description` is `string(127)`; we cut at 127 bytes so that multi-byte names fit too.
pub const DESCRIPTION_MAX_BYTES: usize = 127;
/// `out_trade_no` is 6 to 32 characters.
pub const OUT_TRADE_NO_LENGTH: std::ops::RangeInclusive<usize> = 6..=32;
/// Beijing time, the offset WeChat Pay writes its times in.
/// The longest `refund_id` accepted (WeChat Pay documents `string(32)`).
const MAX_REFUND_ID_CHARS: usize = 64;
/// The most characters of a provider message kept in an error.
const MAX_MESSAGE_CHARS: usize = 200;

/// Body of `POST /v3/pay/transactions/native`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NativeOrderRequest {
    /// Official Account or app id bound to the merchant.
    pub appid: String,
    /// Merchant id.
    pub mchid: String,
    /// What is bought (at most 127 bytes).
    pub description: String,
    /// Our order id.
    pub out_trade_no: String,
    /// Pay deadline, RFC 3339 in Beijing time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_expire: Option<String>,
    /// Where WeChat Pay posts notifications (HTTPS, no query string).
    pub notify_url: String,
    /// The amount.
    pub amount: OrderAmount,
}

/// `amount` of a Native order: integer fen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrderAmount {
    /// Fen (0.01 CNY).
    pub total: i64,
    /// Always `CNY`.
    pub currency: &'static str,
}

/// Answer of `POST /v3/pay/transactions/native`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NativeOrderResponse {
    /// The `weixin://wxpay/bizpayurl?pr=…` link to render as a QR code.
    pub code_url: String,
}

/// Body of `POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloseRequest {
    /// Merchant id.
    pub mchid: String,
}

/// The error code of an order look-up that found no order.
pub const ORDER_NOT_EXIST: &str = "ORDER_NOT_EXIST";

/// The `code` of an error body, when `body` is one.
#[must_use]
pub fn error_code(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|e| e.code)
}

/// WeChat Pay's error body on 4xx and 5xx answers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ErrorBody {
    /// Such as `PARAM_ERROR`, `SIGN_ERROR`, `ORDER_NOT_EXIST`.
    pub code: String,
    /// Human-readable text.
    #[serde(default)]
    pub message: String,
}

/// `trade_state` of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TradeState {
    /// Paid.
    Success,
    /// Paid, then (partly) refunded.
    Refund,
    /// Not paid yet.
    Notpay,
    /// Closed without payment.
    Closed,
    /// Revoked (payment-code payments).
    Revoked,
    /// The buyer is entering the password (payment-code payments).
    Userpaying,
    /// The payment failed.
    Payerror,
    /// A state this code does not know yet.
    #[serde(other)]
    Unknown,
}

/// Where a [`TradeState`] puts a payment, before amounts and times are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateClass {
    /// Not (or not known to be) finished.
    Pending,
    /// Paid.
    Succeeded,
    /// Finished without payment, with a reason.
    Failed(&'static str),
}

impl From<TradeState> for StateClass {
    fn from(state: TradeState) -> Self {
        match state {
            TradeState::Success => StateClass::Succeeded,
            TradeState::Closed => StateClass::Failed("order closed"),
            TradeState::Revoked => StateClass::Failed("payment revoked"),
            TradeState::Payerror => StateClass::Failed("payment failed"),
            // REFUND: paid, then refunded. `PaymentStatus` has no refunded state, and a
            // reconciliation must not grant for a refunded trade; refunds arrive as
            // notifications. So it stays non-terminal, like every state we do not know.
            TradeState::Refund
            | TradeState::Notpay
            | TradeState::Userpaying
            | TradeState::Unknown => StateClass::Pending,
        }
    }
}

/// A transaction: the query answer and the decrypted `TRANSACTION.SUCCESS` resource.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Transaction {
    /// The app id the order was placed for.
    #[serde(default)]
    pub appid: Option<String>,
    /// Merchant id.
    pub mchid: String,
    /// Our order id.
    pub out_trade_no: String,
    /// WeChat Pay's id (present once paid).
    #[serde(default)]
    pub transaction_id: Option<String>,
    /// Where the payment is.
    pub trade_state: TradeState,
    /// Why, in words.
    #[serde(default)]
    pub trade_state_desc: Option<String>,
    /// When it was paid (RFC 3339).
    #[serde(default)]
    pub success_time: Option<String>,
    /// The amounts.
    #[serde(default)]
    pub amount: Option<TransactionAmount>,
}

/// `amount` of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TransactionAmount {
    /// The order amount in fen.
    #[serde(default)]
    pub total: Option<i64>,
    /// What the buyer paid after coupons, in fen.
    #[serde(default)]
    pub payer_total: Option<i64>,
    /// The order currency.
    #[serde(default)]
    pub currency: Option<String>,
}

/// The notification envelope.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Notification {
    /// The notification id (the same across resends).
    pub id: String,
    /// Such as `TRANSACTION.SUCCESS`.
    pub event_type: String,
    /// When it was created.
    #[serde(default)]
    pub create_time: Option<String>,
    /// The encrypted payload.
    #[serde(default)]
    pub resource: Option<Resource>,
}

/// The encrypted `resource` of a notification.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Resource {
    /// Always `AEAD_AES_256_GCM`.
    pub algorithm: String,
    /// Base64 of ciphertext ‖ 16-byte tag.
    pub ciphertext: String,
    /// AES-GCM associated data (may be empty).
    #[serde(default)]
    pub associated_data: String,
    /// The 12-character AES-GCM nonce.
    pub nonce: String,
    /// `transaction` or `refund`.
    #[serde(default)]
    pub original_type: Option<String>,
}

/// `refund_status` of a refund.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RefundStatus {
    /// Refunded.
    Success,
    /// Closed.
    Closed,
    /// Failed at the bank; needs manual handling.
    Abnormal,
    /// Being processed.
    Processing,
    /// A status this code does not know yet.
    #[serde(other)]
    Unknown,
}

/// The decrypted `REFUND.*` resource.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RefundNotice {
    /// Merchant id.
    pub mchid: String,
    /// Our order id.
    pub out_trade_no: String,
    /// WeChat Pay's id for this refund (微信支付退款单号): Tally's refund id.
    #[serde(default)]
    pub refund_id: Option<String>,
    /// The refund number chosen by whoever asked for the refund (商户退款单号; Tally's refund
    /// id for refunds Tally asked for); read for completeness, not used as the id (see
    /// [`refund_event`]).
    #[serde(default)]
    pub out_refund_no: Option<String>,
    /// Where the refund is.
    pub refund_status: RefundStatus,
    /// When it succeeded.
    #[serde(default)]
    pub success_time: Option<String>,
    /// The amounts.
    pub amount: RefundAmount,
}

/// `amount` of a refund.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RefundAmount {
    /// The order amount in fen (订单金额), the `amount.total` Tally's payment was priced in.
    pub total: i64,
    /// This refund's amount in fen, on the same list-price basis as `total` (退款标价金额,
    /// coupons included): never the running total of the order's refunds.
    pub refund: i64,
    /// What went back to the buyer's own funds, without coupons (用户退款金额); the buyer-side
    /// counterpart of `payer_total`, not used.
    #[serde(default)]
    pub payer_refund: Option<i64>,
}

/// Body of `POST /v3/refund/domestic/refunds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefundCreateRequest {
    /// Our order id (the payment to refund).
    pub out_trade_no: String,
    /// Our refund id: WeChat Pay refunds once per `out_refund_no`.
    pub out_refund_no: String,
    /// Why (at most 80 characters; shown to the buyer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where WeChat Pay posts this refund's `REFUND.*` notification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
    /// The amounts.
    pub amount: RefundCreateAmount,
}

/// `amount` of a refund request: integer fen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefundCreateAmount {
    /// This refund, in fen.
    pub refund: i64,
    /// What the order paid, in fen (WeChat Pay checks it against the order).
    pub total: i64,
    /// Always `CNY`.
    pub currency: &'static str,
}

/// Answer of `POST /v3/refund/domestic/refunds` (the refund object).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RefundAnswer {
    /// WeChat Pay's id for the refund, the `refund_id` its notification carries.
    #[serde(default)]
    pub refund_id: Option<String>,
    /// Our refund id, echoed.
    pub out_refund_no: String,
    /// Our order id, echoed.
    #[serde(default)]
    pub out_trade_no: Option<String>,
    /// Where the refund is.
    pub status: RefundStatus,
}

/// The longest `out_refund_no` (`string(64)`).
pub const OUT_REFUND_NO_MAX_CHARS: usize = 64;
/// The longest refund `reason` (`string(80)`).
pub const REFUND_REASON_MAX_CHARS: usize = 80;

/// Our refund id as `out_refund_no`: 1 to 64 of `[0-9A-Za-z_-|*@]`.
///
/// # Errors
/// [`GatewayError::Rejected`] when the id does not fit.
pub fn out_refund_no(refund_id: &str) -> Result<String, GatewayError> {
    let fits = !refund_id.is_empty()
        && refund_id.len() <= OUT_REFUND_NO_MAX_CHARS
        && refund_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|' | '*' | '@'));
    if fits {
        Ok(refund_id.to_owned())
    } else {
        Err(GatewayError::Rejected(
            "refund id does not fit out_refund_no (1 to 64 letters, digits, _ - | * @)".into(),
        ))
    }
}

/// The refund `reason`: printable characters only, at most 80; `None` when empty.
#[must_use]
pub fn refund_reason(text: &str) -> Option<String> {
    let reason = printable(text.trim(), REFUND_REASON_MAX_CHARS);
    (!reason.is_empty()).then_some(reason)
}

/// Where a refund the API accepted stands, from its `status`.
#[must_use]
pub fn refund_state(status: RefundStatus) -> RefundState {
    match status {
        RefundStatus::Success => RefundState::Succeeded,
        RefundStatus::Processing | RefundStatus::Unknown => RefundState::Pending,
        RefundStatus::Closed => RefundState::Failed("WeChat Pay closed the refund".into()),
        RefundStatus::Abnormal => RefundState::Failed(
            "WeChat Pay could not return the money to the buyer (ABNORMAL): handle it in the merchant platform".into(),
        ),
    }
}

/// A WeChat Pay refund id that is safe to keep: 1 to 64 printable ASCII characters.
#[must_use]
pub fn usable_refund_id(id: Option<&str>) -> Option<&str> {
    id.map(str::trim).filter(|id| {
        !id.is_empty()
            && id.len() <= MAX_REFUND_ID_CHARS
            && id.chars().all(|c| c.is_ascii_graphic())
    })
}

/// Why a decrypted `TRANSACTION.*` resource is not ours: another merchant or another app.
#[must_use]
pub fn foreign_transaction(
    transaction: &Transaction,
    mch_id: &str,
    app_id: &str,
) -> Option<String> {
    if transaction.mchid != mch_id {
        return Some(format!(
            "mchid {:?} is not the configured merchant",
            printable(&transaction.mchid, 32)
        ));
    }
    match transaction.appid.as_deref() {
        Some(appid) if appid == app_id => None,
        Some(appid) => Some(format!(
            "appid {:?} is not the configured app",
            printable(appid, 32)
        )),
        None => Some("transaction names no appid".to_owned()),
    }
}

/// Why a decrypted `REFUND.*` resource is not ours: another merchant (refunds name no app).
#[must_use]
pub fn foreign_refund(refund: &RefundNotice, mch_id: &str) -> Option<String> {
    (refund.mchid != mch_id).then(|| {
        format!(
            "mchid {:?} is not the configured merchant",
            printable(&refund.mchid, 32)
        )
    })
}

/// Answer of `GET /v3/certificates`: the platform certificates, each encrypted with the
/// APIv3 key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CertificateList {
    /// The certificates.
    pub data: Vec<CertificateItem>,
}

/// One platform certificate of [`CertificateList`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CertificateItem {
    /// Its serial number, upper-case hex (what `Wechatpay-Serial` names).
    pub serial_no: String,
    /// From when it is valid (RFC 3339).
    pub effective_time: String,
    /// Until when it is valid (RFC 3339).
    pub expire_time: String,
    /// The PEM certificate, AES-256-GCM-encrypted like a notification resource.
    pub encrypt_certificate: Resource,
}

/// The longest certificate serial accepted, in hex digits (X.509 serials are at most 20
/// bytes).
const MAX_SERIAL_HEX: usize = 64;

/// A certificate serial as compared: upper-case hex without leading zeros; `None` when it is
/// not hex or too long.
#[must_use]
pub fn normalized_serial(serial: &str) -> Option<String> {
    let serial = serial.trim();
    if serial.is_empty()
        || serial.len() > MAX_SERIAL_HEX
        || !serial.chars().all(|c| c.is_ascii_hexdigit())
    {
        return None;
    }
    let digits = serial.trim_start_matches('0').to_ascii_uppercase();
    Some(if digits.is_empty() {
        "0".to_owned()
    } else {
        digits
    })
}

/// The serial number (normalized as [`normalized_serial`]) and the `SubjectPublicKeyInfo`
/// (DER) of a PEM X.509 certificate; `None` when it is not one.
///
/// Only the structure is read (RFC 5280 §4.1: `Certificate ::= SEQUENCE { tbsCertificate
/// SEQUENCE { [0] version OPTIONAL, serialNumber INTEGER, signature, issuer, validity,
/// subject, subjectPublicKeyInfo, … }, … }`): the certificate comes from WeChat Pay's own API,
/// decrypted with the APIv3 key, and the answer that carried it is signed by it.
#[must_use]
pub fn certificate_key(pem: &str) -> Option<(String, Vec<u8>)> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|line| *line != "-----BEGIN CERTIFICATE-----")
        .skip(1)
        .take_while(|line| *line != "-----END CERTIFICATE-----")
        .collect();
    let der = crate::shared::signing::unb64(&body)?;
    let (certificate, _) = der_element(&der, 0x30)?;
    let (tbs, _) = der_element(der_content(certificate)?, 0x30)?;
    let mut rest = der_content(tbs)?;
    if rest.first() == Some(&0xA0) {
        rest = der_element(rest, 0xA0)?.1;
    }
    let (serial, rest) = der_element(rest, 0x02)?;
    let serial = normalized_serial(&crate::shared::signing::hex(der_content(serial)?))?;
    let mut rest = rest;
    // signature, issuer, validity, subject
    for _ in 0..4 {
        rest = der_element(rest, 0x30)?.1;
    }
    let (spki, _) = der_element(rest, 0x30)?;
    Some((serial, spki.to_vec()))
}

/// The DER element with `tag` at the start of `input` (tag, length and content) and what
/// follows it.
fn der_element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *input.first()? != tag {
        return None;
    }
    let first = *input.get(1)?;
    let (length, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 {
            return None;
        }
        let mut length = 0_usize;
        for byte in input.get(2..2 + count)? {
            length = (length << 8) | usize::from(*byte);
        }
        (length, 2 + count)
    };
    let end = header.checked_add(length)?;
    Some((input.get(..end)?, input.get(end..)?))
}

/// The content of a DER element returned by [`der_element`].
fn der_content(element: &[u8]) -> Option<&[u8]> {
    let first = *element.get(1)?;
    let header = if first < 0x80 {
        2
    } else {
        2 + usize::from(first & 0x7F)
    };
    element.get(header..)
}

/// The fen amount of a price: CNY only, above zero.
///
/// # Errors
/// [`GatewayError::Rejected`] for another currency or a zero amount.
pub fn fen(price: &Money) -> Result<i64, GatewayError> {
    if price.currency() != Currency::Cny {
        return Err(GatewayError::Rejected(format!(
            "wallet_qr charges CNY only, not {}",
            price.currency()
        )));
    }
    if price.amount_minor() <= 0 {
        return Err(GatewayError::Rejected("amount must be above zero".into()));
    }
    Ok(price.amount_minor())
}

/// Money from a fen amount and WeChat's currency code (absent means CNY).
///
/// # Errors
/// A currency other than CNY, or a negative amount, as text.
pub fn money_from_fen(total: i64, currency: Option<&str>) -> Result<Money, String> {
    match currency {
        None | Some(CURRENCY) => {}
        Some(other) => {
            return Err(format!("currency {:?} is not CNY", printable(other, 8)));
        }
    }
    Money::from_minor(total, Currency::Cny).map_err(|e| e.to_string())
}

/// Our order id as `out_trade_no`: 6 to 32 of `[0-9A-Za-z_-*|]`.
///
/// # Errors
/// [`GatewayError::Rejected`] when the id does not fit.
pub fn out_trade_no(order_id: &OrderId) -> Result<String, GatewayError> {
    let id = order_id.as_str();
    let fits = OUT_TRADE_NO_LENGTH.contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '|'));
    if fits {
        Ok(id.to_owned())
    } else {
        Err(GatewayError::Rejected(format!(
            "order id {id:?} does not fit out_trade_no (6 to 32 letters, digits, _ - * |)"
        )))
    }
}

/// `description`: the text cut to at most 127 bytes on a character boundary.
#[must_use]
pub fn description(text: &str) -> String {
    let mut end = text.len().min(DESCRIPTION_MAX_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A time as WeChat Pay writes it: RFC 3339 with the `+08:00` offset, whole seconds.
///
/// # Errors
/// [`GatewayError::Rejected`] for a time outside chrono's range.
pub fn beijing_rfc3339(at: Timestamp) -> Result<String, GatewayError> {
    let local = in_beijing(at).map_err(|e| GatewayError::Rejected(e.into()))?;
    Ok(local.format("%Y-%m-%dT%H:%M:%S%:z").to_string())
}

/// Parse an RFC 3339 time (any offset) into a timestamp.
#[must_use]
pub fn parse_time(text: &str) -> Option<Timestamp> {
    parse_rfc3339(text.trim())
}

/// The message a request signature covers:
/// `METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n` (an empty body for GET).
#[must_use]
pub fn request_message(
    method: &str,
    path_and_query: &str,
    timestamp_s: i64,
    nonce: &str,
    body: &str,
) -> String {
    format!("{method}\n{path_and_query}\n{timestamp_s}\n{nonce}\n{body}\n")
}

/// The message a response or notification signature covers: `TIMESTAMP\nNONCE\nBODY\n`.
#[must_use]
pub fn response_message(timestamp_s: i64, nonce: &str, body: &[u8]) -> Vec<u8> {
    let mut message = format!("{timestamp_s}\n{nonce}\n").into_bytes();
    message.extend_from_slice(body);
    message.push(b'\n');
    message
}

/// The parts of an `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization<'a> {
    /// Merchant id.
    pub mch_id: &'a str,
    /// The request nonce.
    pub nonce: &'a str,
    /// Base64 of the RSA-SHA256 signature of [`request_message`].
    pub signature_b64: &'a str,
    /// Unix seconds.
    pub timestamp_s: i64,
    /// Serial number of the merchant API certificate.
    pub serial_no: &'a str,
}

impl Authorization<'_> {
    /// The header value.
    #[must_use]
    pub fn header_value(&self) -> String {
        format!(
            "{SIGNATURE_SCHEME} mchid=\"{}\",nonce_str=\"{}\",signature=\"{}\",timestamp=\"{}\",serial_no=\"{}\"",
            self.mch_id, self.nonce, self.signature_b64, self.timestamp_s, self.serial_no
        )
    }
}

/// A payment's state from a transaction, read exhaustively through [`StateClass`].
///
/// # Errors
/// [`GatewayError::BadResponse`] for a paid transaction without a usable amount or time.
pub fn payment_status(transaction: &Transaction) -> Result<PaymentStatus, GatewayError> {
    Ok(match StateClass::from(transaction.trade_state) {
        StateClass::Pending => PaymentStatus::Pending,
        StateClass::Failed(reason) => PaymentStatus::Failed {
            reason: failure_reason(reason, transaction.trade_state_desc.as_deref()),
        },
        StateClass::Succeeded => {
            let (amount, paid_at) = paid(transaction).map_err(GatewayError::BadResponse)?;
            PaymentStatus::Succeeded { amount, paid_at }
        }
    })
}

/// The order amount and payment time of a paid transaction.
///
/// # Errors
/// A missing or non-CNY amount, or a missing or unreadable `success_time`, as text.
pub fn paid(transaction: &Transaction) -> Result<(Money, Timestamp), String> {
    let amount = transaction
        .amount
        .as_ref()
        .ok_or("paid transaction without amount")?;
    let total = amount
        .total
        .ok_or("paid transaction without amount.total")?;
    let money = money_from_fen(total, amount.currency.as_deref())?;
    let paid_at = transaction
        .success_time
        .as_deref()
        .and_then(parse_time)
        .ok_or("paid transaction without a readable success_time")?;
    Ok((money, paid_at))
}

/// Where a notification points: our order id from `out_trade_no`.
#[must_use]
pub fn locator(out_trade_no: &str) -> OrderLocator {
    OrderLocator {
        order_id: OrderId::new(out_trade_no).ok(),
        provider_reference: None,
    }
}

/// The event of a decrypted `TRANSACTION.SUCCESS` resource.
///
/// # Errors
/// [`WebhookError::Malformed`] for another merchant, a state other than `SUCCESS`, or a
/// missing amount or time.
pub fn transaction_event(
    transaction: &Transaction,
    mch_id: &str,
) -> Result<PaymentEvent, WebhookError> {
    if transaction.mchid != mch_id {
        return Err(WebhookError::Malformed(
            "notification is for another merchant".into(),
        ));
    }
    if transaction.trade_state != TradeState::Success {
        return Err(WebhookError::Malformed(
            "TRANSACTION.SUCCESS with a trade_state other than SUCCESS".into(),
        ));
    }
    let (amount, occurred_at) = paid(transaction).map_err(WebhookError::Malformed)?;
    Ok(PaymentEvent::PaymentSucceeded {
        order: locator(&transaction.out_trade_no),
        amount,
        occurred_at,
    })
}

/// The event of a decrypted `REFUND.SUCCESS` resource; `fallback_time` when it has none.
///
/// The notification carries this refund's own amount (`amount.refund`, on the `amount.total`
/// basis the payment was priced in; `payer_refund` leaves coupons out), never the total
/// refunded so far, and WeChat Pay has no API that sums an order's refunds. So it is a
/// [`RefundReport::One`] under WeChat Pay's `refund_id`, and the service adds an order's
/// refunds up, each id once: two partial refunds of 34.00 on a 68.00 order are 68.00.
///
/// `refund_id` rather than `out_refund_no`: refunds are made by Tally (`out_refund_no` = our
/// refund id, and the refund API's answer carries the same `refund_id`, which the service
/// applies a finished refund under) but also in the merchant platform or by another system of
/// the merchant, whose `out_refund_no` is whatever that party chose, while `refund_id` is
/// assigned by WeChat Pay to every refund and is in every refund notification. Each refund has
/// one of each (a repeated `out_refund_no` refunds once), so resends of a notification carry
/// the same `refund_id`.
///
/// # Errors
/// [`WebhookError::Malformed`] for another merchant, unreadable amounts, or a successful
/// refund without a usable `refund_id`.
pub fn refund_event(
    refund: &RefundNotice,
    mch_id: &str,
    fallback_time: Timestamp,
) -> Result<Option<PaymentEvent>, WebhookError> {
    if refund.mchid != mch_id {
        return Err(WebhookError::Malformed(
            "notification is for another merchant".into(),
        ));
    }
    if refund.refund_status != RefundStatus::Success {
        return Ok(None);
    }
    if refund.amount.refund <= 0 || refund.amount.refund > refund.amount.total {
        return Err(WebhookError::Malformed("refund amount out of range".into()));
    }
    let refund_id = usable_refund_id(refund.refund_id.as_deref())
        .ok_or_else(|| WebhookError::Malformed("refund without a usable refund_id".into()))?;
    let amount = money_from_fen(refund.amount.refund, None).map_err(WebhookError::Malformed)?;
    let occurred_at = refund
        .success_time
        .as_deref()
        .and_then(parse_time)
        .unwrap_or(fallback_time);
    Ok(Some(PaymentEvent::Refunded {
        charge: RefundedCharge::Order(locator(&refund.out_trade_no)),
        refund: RefundReport::One {
            refund_id: refund_id.to_owned(),
            amount,
        },
        occurred_at,
    }))
}

/// The error for a 4xx or 5xx answer, with WeChat Pay's code and message when readable.
#[must_use]
pub fn error_from_reply(status: u16, body: &[u8]) -> GatewayError {
    let detail = serde_json::from_slice::<ErrorBody>(body)
        .map(|e| {
            format!(
                "{}: {}",
                printable(&e.code, 64),
                printable(&e.message, MAX_MESSAGE_CHARS)
            )
        })
        .unwrap_or_else(|_| "unreadable error body".to_owned());
    if (400..500).contains(&status) {
        GatewayError::Rejected(format!("HTTP {status}: {detail}"))
    } else {
        GatewayError::Unreachable(format!("HTTP {status}: {detail}"))
    }
}

fn failure_reason(reason: &str, description: Option<&str>) -> String {
    match description {
        Some(d) if !d.is_empty() => format!("{reason}: {}", printable(d, MAX_MESSAGE_CHARS)),
        _ => reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transaction(state: &str, extra: &str) -> Transaction {
        let json = format!(
            r#"{{"mchid":"1900000109","out_trade_no":"ord_000001","trade_state":"{state}"{extra}}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn every_trade_state_maps_to_our_status_and_unknown_states_stay_pending() {
        let paid =
            r#","success_time":"2026-01-01T08:00:01+08:00","amount":{"total":1,"currency":"CNY"}"#;
        assert_eq!(
            payment_status(&transaction("SUCCESS", paid)).unwrap(),
            PaymentStatus::Succeeded {
                amount: Money::from_minor(1, Currency::Cny).unwrap(),
                paid_at: Timestamp::from_unix_millis(1_767_225_601_000),
            }
        );
        for state in ["NOTPAY", "USERPAYING", "REFUND", "SOMETHING_NEW"] {
            assert_eq!(
                payment_status(&transaction(state, "")).unwrap(),
                PaymentStatus::Pending,
                "{state}"
            );
        }
        for state in ["CLOSED", "REVOKED", "PAYERROR"] {
            assert!(
                matches!(
                    payment_status(&transaction(state, "")).unwrap(),
                    PaymentStatus::Failed { .. }
                ),
                "{state}"
            );
        }
    }

    #[test]
    fn a_paid_transaction_without_amount_or_time_or_in_another_currency_is_a_bad_response() {
        let usd =
            r#","success_time":"2026-01-01T08:00:01+08:00","amount":{"total":1,"currency":"USD"}"#;
        let no_time = r#","amount":{"total":1,"currency":"CNY"}"#;
        for extra in ["", usd, no_time] {
            assert!(matches!(
                payment_status(&transaction("SUCCESS", extra)),
                Err(GatewayError::BadResponse(_))
            ));
        }
    }

    #[test]
    fn times_are_written_in_beijing_time_and_read_in_any_offset() {
        let at = Timestamp::from_unix_millis(1_767_225_600_000);
        assert_eq!(beijing_rfc3339(at).unwrap(), "2026-01-01T08:00:00+08:00");
        assert_eq!(parse_time("2026-01-01T08:00:00+08:00"), Some(at));
        assert_eq!(parse_time("2026-01-01T00:00:00Z"), Some(at));
        assert_eq!(parse_time("2026-01-01 08:00:00"), None);
    }

    #[test]
    fn only_cny_above_zero_is_charged() {
        let cny = Money::from_minor(990, Currency::Cny).unwrap();
        assert_eq!(fen(&cny).unwrap(), 990);
        assert!(fen(&Money::from_minor(990, Currency::Usd).unwrap()).is_err());
        assert!(fen(&Money::from_minor(0, Currency::Cny).unwrap()).is_err());
        assert_eq!(money_from_fen(5, Some("CNY")).unwrap().amount_minor(), 5);
        assert!(money_from_fen(5, Some("USD")).is_err());
        assert!(money_from_fen(-5, None).is_err());
    }

    #[test]
    fn order_ids_must_fit_out_trade_no() {
        let ok = OrderId::new("ord_0123456789").unwrap();
        assert_eq!(out_trade_no(&ok).unwrap(), "ord_0123456789");
        for bad in ["ord_1", &"x".repeat(33)] {
            assert!(out_trade_no(&OrderId::new(bad).unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn descriptions_are_cut_at_127_bytes_on_a_character_boundary() {
        assert_eq!(description("Pro"), "Pro");
        let long = "专".repeat(60); // 180 bytes
        let cut = description(&long);
        assert!(cut.len() <= DESCRIPTION_MAX_BYTES);
        assert_eq!(cut, "专".repeat(42));
    }

    fn refund_notice(extra: &str) -> RefundNotice {
        let json = format!(
            r#"{{"mchid":"1900000109","out_trade_no":"ord_000001","out_refund_no":"rf_1","refund_status":"SUCCESS","success_time":"2026-01-01T09:00:00+08:00","amount":{{"total":6800,"refund":3400,"payer_total":6000,"payer_refund":3000}}{extra}}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn a_successful_refund_is_one_refund_of_its_list_price_amount_under_wechats_refund_id() {
        let at = Timestamp::from_unix_millis(0);
        let event = refund_event(
            &refund_notice(r#","refund_id":"50300000000000000000000000001""#),
            "1900000109",
            at,
        )
        .unwrap();
        let Some(PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            refund: RefundReport::One { refund_id, amount },
            occurred_at,
        }) = event
        else {
            panic!("expected one refund, got {event:?}");
        };
        assert_eq!(order.order_id, Some(OrderId::new("ord_000001").unwrap()));
        assert_eq!(refund_id, "50300000000000000000000000001");
        // amount.refund (coupons included), not payer_refund.
        assert_eq!(amount, Money::from_minor(3400, Currency::Cny).unwrap());
        assert_eq!(occurred_at, Timestamp::from_unix_millis(1_767_229_200_000));
    }

    #[test]
    fn a_successful_refund_without_a_usable_refund_id_is_malformed() {
        let at = Timestamp::from_unix_millis(0);
        for extra in ["", r#","refund_id":"""#, r#","refund_id":"a b""#] {
            assert!(
                matches!(
                    refund_event(&refund_notice(extra), "1900000109", at),
                    Err(WebhookError::Malformed(_))
                ),
                "{extra}"
            );
        }
        let mut closed = refund_notice("");
        closed.refund_status = RefundStatus::Closed;
        assert_eq!(refund_event(&closed, "1900000109", at), Ok(None));
    }

    #[test]
    fn the_signature_messages_end_every_line_with_a_newline() {
        assert_eq!(
            request_message("GET", "/v3/x?mchid=1", 1, "n", ""),
            "GET\n/v3/x?mchid=1\n1\nn\n\n"
        );
        assert_eq!(response_message(1, "n", b"{}"), b"1\nn\n{}\n".to_vec());
    }
}
