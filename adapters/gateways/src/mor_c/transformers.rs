//! Waffo Pancake's wire format: the signed request's canonical string, request and response
//! bodies, display-string amounts (`"9.99"`, JPY `"1000"`) converted exactly through the
//! currency's exponent, the order status enums with their exhaustive mapping into ours, the
//! `X-Waffo-Signature` header, and webhook event parsing. Everything Tally knows about Pancake's
//! JSON lives here; `mor_c.rs` only moves bytes.

use std::collections::BTreeMap;

use application::ports::{
    GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundReport, RefundedCharge,
    WebhookError,
};
use domain::{BillingPeriod, Currency, Money, OrderId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::shared::money::currency;
use crate::shared::money::{decimal_minor, to_decimal};
pub use crate::shared::period::CHARGE_LEAD_MS;
use crate::shared::signing::{b64, sha256};
use crate::shared::time::{from_chrono, parse_rfc3339};
use crate::shared::{period, wire};

/// Path of the checkout-session action.
pub const CREATE_SESSION_PATH: &str = "/v1/actions/checkout/create-session";
/// Path of the subscription cancel action.
pub const CANCEL_ORDER_PATH: &str = "/v1/actions/subscription-order/cancel-order";
/// Path of the (query-only) GraphQL endpoint.
pub const GRAPHQL_PATH: &str = "/v1/graphql";
/// The longest event id accepted.
const MAX_EVENT_ID_CHARS: usize = 200;
/// The most digits an amount may have (beyond that it cannot fit in `i64` minor units anyway).
const MAX_AMOUNT_DIGITS: usize = 18;
/// The most provider errors quoted in a refusal.
const MAX_NOTICES: usize = 3;
/// The most payments of one subscription looked at.
const MAX_ORDER_PAYMENTS: usize = 1_000;
/// Subscription order statuses (`SubscriptionOrderStatus`) that a one-time order never has.
const SUBSCRIPTION_ONLY_STATUSES: [&str; 5] =
    ["active", "canceling", "past_due", "closed", "expired"];

/// A subscription order's payments, to find the one that paid a period (webhooks of the
/// subscription domain name no payment). `subscriptionOrder(id)` is in Pancake's GraphQL guide
/// ("Order Details (with Payment History)").
pub const SUBSCRIPTION_PAYMENTS_QUERY: &str = "query TallySubscriptionPayments($id: String!) { \
subscriptionOrder(id: $id) { id payments { id status createdAt } } }";

/// The configured store, read to check the credentials (the guide's "Store Queries"). Pancake's
/// GraphQL is query-only, so the read changes nothing.
pub const CREDENTIAL_CHECK_QUERY: &str =
    "query TallyCredentialCheck($storeId: String!) { store(id: $storeId) { id status } }";

/// The GraphQL answer to [`CREDENTIAL_CHECK_QUERY`].
#[derive(Debug, Clone, Deserialize)]
pub struct StoreData {
    /// The store, when the merchant may see it.
    #[serde(default)]
    pub store: Option<StoreRef>,
}

/// A store, as far as the credential check reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct StoreRef {
    /// `STO_…`.
    pub id: String,
}

/// One order's status across both order kinds, read with a single GraphQL request.
pub const ORDER_STATUS_QUERY: &str = "query TallyOrderStatus($storeId: String!, $ref: String!) { \
onetimeOrders(storeId: $storeId, filter: { orderMerchantExternalId: { eq: $ref } }, limit: 1) \
{ id status updatedAt priceSnapshot { currency subtotal } } \
subscriptionOrders(storeId: $storeId, filter: { orderMerchantExternalId: { eq: $ref } }, limit: 1) \
{ id status createdAt currentPeriodStart priceSnapshot { currency regularPhase { subtotal } } } }";

/// The string a request signature covers:
/// `METHOD\nPATH\nTIMESTAMP\nbase64(SHA-256(body))`, no trailing newline.
#[must_use]
pub fn canonical_request(method: &str, path: &str, timestamp_s: i64, body: &[u8]) -> String {
    format!("{method}\n{path}\n{timestamp_s}\n{}", b64(&sha256(body)))
}

/// `amount` as a display string in major units: `999 USD` → `"9.99"`, `1000 JPY` → `"1000"`.
#[must_use]
pub fn display_amount(amount: Money) -> String {
    to_decimal(amount)
}

/// A display string as exact [`Money`]: `"9.99"`, `"9.9"` and `"9.990"` are 999 cents; more
/// significant decimals than the currency has, signs, exponents and spaces are refused.
///
/// # Errors
/// A string that is not a plain non-negative decimal fitting the currency.
pub fn parse_display(text: &str, currency: Currency) -> Result<Money, String> {
    let refuse = || format!("{currency} amount {:?} is not a plain decimal", clip(text));
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let exponent = currency.exponent();
    if whole.is_empty() || whole.len() + exponent as usize > MAX_AMOUNT_DIGITS {
        return Err(refuse());
    }
    let minor = decimal_minor(whole, fraction, exponent).map_err(|_| refuse())?;
    Money::from_minor(minor, currency).map_err(|e| e.to_string())
}

fn clip(text: &str) -> String {
    wire::clip(text, 24)
}

/// An amount as Pancake sends it: a display string (checkout, webhooks) or, in older shapes,
/// integer minor units.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum WireAmount {
    /// `"9.99"`.
    Display(String),
    /// `999`.
    Minor(i64),
}

impl WireAmount {
    /// The amount in `currency`.
    ///
    /// # Errors
    /// A malformed display string or a negative amount.
    pub fn to_money(&self, currency: Currency) -> Result<Money, String> {
        match self {
            WireAmount::Display(text) => parse_display(text, currency),
            WireAmount::Minor(minor) => {
                Money::from_minor(*minor, currency).map_err(|e| e.to_string())
            }
        }
    }
}

/// `POST /v1/actions/checkout/create-session` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSession {
    /// The Pancake product (`morCProductId`, `PROD_…`).
    pub product_id: String,
    /// ISO 4217 code.
    pub currency: String,
    /// Charge exactly Tally's price (merchant API-key requests only).
    pub price_snapshot: PriceSnapshot,
    /// Our order id; inherited by orders, payments and refunds and echoed in webhooks.
    pub order_merchant_external_id: String,
    /// Prefills the checkout's e-mail field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buyer_email: Option<String>,
    /// Where the buyer goes after paying.
    pub success_url: String,
    /// How long the session stays open.
    pub expires_in_seconds: i64,
    /// String map echoed in webhooks as `orderMetadata`.
    pub metadata: BTreeMap<String, String>,
}

/// A session-level price override.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceSnapshot {
    /// Display string.
    pub amount: String,
    /// The product's tax category (`saas`, `digital_goods`, …).
    pub tax_category: String,
}

/// `POST /v1/actions/subscription-order/cancel-order` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelOrder {
    /// The subscription order (`ORD_…`).
    pub order_id: String,
}

/// `POST /v1/graphql` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphqlRequest {
    /// The query text.
    pub query: &'static str,
    /// Its variables.
    pub variables: BTreeMap<&'static str, String>,
}

/// Every answer's envelope: `{"data": T | null, "errors"?: [...]}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope<T> {
    /// The result.
    #[serde(default = "Option::default")]
    pub data: Option<T>,
    /// What went wrong.
    #[serde(default)]
    pub errors: Vec<Notice>,
}

/// One error or warning.
#[derive(Debug, Clone, Deserialize)]
pub struct Notice {
    /// Human-readable text.
    #[serde(default)]
    pub message: String,
}

impl<T> Envelope<T> {
    /// The data, or the provider's errors as a refusal.
    ///
    /// # Errors
    /// [`GatewayError::Rejected`] when `data` is null.
    pub fn into_data(self) -> Result<T, GatewayError> {
        match self.data {
            Some(data) if self.errors.is_empty() => Ok(data),
            _ => {
                let messages: Vec<String> = self
                    .errors
                    .iter()
                    .take(MAX_NOTICES)
                    .map(|n| clip_message(&n.message))
                    .collect();
                Err(GatewayError::Rejected(if messages.is_empty() {
                    "empty answer".into()
                } else {
                    messages.join("; ")
                }))
            }
        }
    }
}

fn clip_message(text: &str) -> String {
    wire::printable(text, 200)
}

/// A created checkout session.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCreated {
    /// Session id.
    pub session_id: String,
    /// Hosted checkout page.
    pub checkout_url: String,
}

/// The answer to a cancellation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    /// The order.
    pub order_id: String,
    /// `canceling` (ends at period end) or `canceled`.
    #[serde(default)]
    pub status: SubscriptionOrderStatus,
}

/// One-time order status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnetimeOrderStatus {
    /// Not paid yet.
    Pending,
    /// Paid.
    Completed,
    /// Closed without payment.
    Canceled,
    /// Anything newer.
    #[default]
    #[serde(other)]
    Unknown,
}

/// Subscription order status (`pending → active → canceling → canceled`, `past_due`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionOrderStatus {
    /// Not paid yet.
    Pending,
    /// Paid and renewing.
    Active,
    /// Ends at the period's end.
    Canceling,
    /// A renewal payment failed.
    PastDue,
    /// Never activated; closed by the payment provider.
    Closed,
    /// Ended.
    Canceled,
    /// Ran out.
    Expired,
    /// Anything newer.
    #[default]
    #[serde(other)]
    Unknown,
}

/// The GraphQL answer to [`ORDER_STATUS_QUERY`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderStatusData {
    /// At most one one-time order.
    #[serde(default)]
    pub onetime_orders: Vec<OnetimeOrder>,
    /// At most one subscription order.
    #[serde(default)]
    pub subscription_orders: Vec<SubscriptionOrder>,
}

/// A one-time order, as far as Tally reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnetimeOrder {
    /// Its status.
    #[serde(default)]
    pub status: OnetimeOrderStatus,
    /// Last change, ISO 8601.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// What was charged.
    #[serde(default)]
    pub price_snapshot: Option<SnapshotAmounts>,
}

/// A subscription order, as far as Tally reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionOrder {
    /// Its status.
    #[serde(default)]
    pub status: SubscriptionOrderStatus,
    /// Created, ISO 8601.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Start of the paid period, once activated.
    #[serde(default)]
    pub current_period_start: Option<String>,
    /// What each period costs.
    #[serde(default)]
    pub price_snapshot: Option<SubscriptionSnapshot>,
}

/// The GraphQL answer to [`SUBSCRIPTION_PAYMENTS_QUERY`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionPaymentsData {
    /// The order, when Pancake knows it.
    #[serde(default)]
    pub subscription_order: Option<SubscriptionPayments>,
}

/// A subscription order's payments.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SubscriptionPayments {
    /// Every payment of the order, first and renewals, failed ones included.
    #[serde(default)]
    pub payments: Vec<OrderPayment>,
}

/// One payment of an order.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderPayment {
    /// The payment id, which `subscription.payment_succeeded` and refunds name.
    pub id: String,
    /// `pending`, `succeeded`, `failed`, `canceled`.
    #[serde(default)]
    pub status: Option<String>,
    /// Created, ISO 8601.
    #[serde(default)]
    pub created_at: Option<String>,
}

/// An order's price snapshot.
#[derive(Debug, Clone, Deserialize)]
pub struct SnapshotAmounts {
    /// ISO code.
    pub currency: String,
    /// Before tax.
    pub subtotal: WireAmount,
}

/// A subscription's price snapshot.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSnapshot {
    /// ISO code.
    pub currency: String,
    /// The regular period's amounts.
    pub regular_phase: PhaseAmounts,
}

/// One billing phase's amounts.
#[derive(Debug, Clone, Deserialize)]
pub struct PhaseAmounts {
    /// Before tax.
    pub subtotal: WireAmount,
}

/// An ISO 8601 date (`2026-04-01`, midnight UTC) or date-time as a [`Timestamp`].
#[must_use]
pub fn timestamp(text: &str) -> Option<Timestamp> {
    if let Some(at) = parse_rfc3339(text) {
        return Some(at);
    }
    let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(from_chrono(&date.and_hms_opt(0, 0, 0)?.and_utc()))
}

/// The order's state as our [`PaymentStatus`]; `now` stands in for a paid time Pancake omits.
///
/// # Errors
/// [`GatewayError::BadResponse`] for a paid order whose amount cannot be read.
pub fn payment_status(
    data: &OrderStatusData,
    now: Timestamp,
) -> Result<PaymentStatus, GatewayError> {
    if let Some(order) = data.onetime_orders.first() {
        return onetime_status(order, now);
    }
    match data.subscription_orders.first() {
        Some(order) => subscription_status(order, now),
        None => Ok(PaymentStatus::Pending),
    }
}

fn onetime_status(order: &OnetimeOrder, now: Timestamp) -> Result<PaymentStatus, GatewayError> {
    match order.status {
        OnetimeOrderStatus::Completed => {
            let snapshot = order.price_snapshot.as_ref().ok_or_else(|| {
                GatewayError::BadResponse("completed order without a price".into())
            })?;
            let amount = currency(&snapshot.currency)
                .and_then(|c| snapshot.subtotal.to_money(c))
                .map_err(GatewayError::BadResponse)?;
            let paid_at = order
                .updated_at
                .as_deref()
                .and_then(timestamp)
                .unwrap_or(now);
            Ok(PaymentStatus::Succeeded { amount, paid_at })
        }
        OnetimeOrderStatus::Canceled => Ok(PaymentStatus::Failed {
            reason: "order canceled".into(),
        }),
        OnetimeOrderStatus::Pending | OnetimeOrderStatus::Unknown => Ok(PaymentStatus::Pending),
    }
}

fn subscription_status(
    order: &SubscriptionOrder,
    now: Timestamp,
) -> Result<PaymentStatus, GatewayError> {
    let activated = order.current_period_start.is_some();
    match order.status {
        SubscriptionOrderStatus::Active
        | SubscriptionOrderStatus::Canceling
        | SubscriptionOrderStatus::PastDue
        | SubscriptionOrderStatus::Expired => first_payment(order, now),
        // A canceled subscription was paid if it ever had a period; otherwise it never started.
        SubscriptionOrderStatus::Canceled if activated => first_payment(order, now),
        SubscriptionOrderStatus::Canceled | SubscriptionOrderStatus::Closed => {
            Ok(PaymentStatus::Failed {
                reason: "subscription closed without payment".into(),
            })
        }
        SubscriptionOrderStatus::Pending | SubscriptionOrderStatus::Unknown => {
            Ok(PaymentStatus::Pending)
        }
    }
}

fn first_payment(order: &SubscriptionOrder, now: Timestamp) -> Result<PaymentStatus, GatewayError> {
    let snapshot = order
        .price_snapshot
        .as_ref()
        .ok_or_else(|| GatewayError::BadResponse("active subscription without a price".into()))?;
    let amount = currency(&snapshot.currency)
        .and_then(|c| snapshot.regular_phase.subtotal.to_money(c))
        .map_err(GatewayError::BadResponse)?;
    let paid_at = order
        .current_period_start
        .as_deref()
        .or(order.created_at.as_deref())
        .and_then(timestamp)
        .unwrap_or(now);
    Ok(PaymentStatus::Succeeded { amount, paid_at })
}

/// The parts of an `X-Waffo-Signature: t=<ms>,v1=<base64>` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    /// `t` exactly as sent (it is part of the signed string).
    pub t: String,
    /// `t` in milliseconds since the epoch.
    pub t_ms: i64,
    /// Every `v1` value, base64.
    pub v1: Vec<String>,
}

/// Parse an `X-Waffo-Signature` header; `None` when `t` or `v1` is missing or malformed.
#[must_use]
pub fn parse_signature_header(header: &str) -> Option<SignatureHeader> {
    let mut t = None;
    let mut v1 = Vec::new();
    for item in header.split(',').take(crate::webhook::MAX_SIGNATURES + 1) {
        match item.trim().split_once('=') {
            Some(("t", value)) => t = Some(value.to_owned()),
            Some(("v1", value)) => v1.push(value.to_owned()),
            _ => {}
        }
    }
    let t = t?;
    let t_ms = t.parse::<i64>().ok()?;
    (!v1.is_empty()).then_some(SignatureHeader { t, t_ms, v1 })
}

/// Whether a webhook signed at `t_ms` may be accepted at `now_ms`: at most `past_ms` old and
/// at most `future_ms` ahead, both ends included (the SDK refuses `Date.now() - t > toleranceMs`
/// and `t - Date.now() > futureToleranceMs`).
#[must_use]
pub fn within_window(t_ms: i64, now_ms: i64, past_ms: i64, future_ms: i64) -> bool {
    let age = i128::from(now_ms) - i128::from(t_ms);
    age <= i128::from(past_ms) && -age <= i128::from(future_ms)
}

/// Whose a webhook is: its delivery id and type, and the store and environment it names
/// (`storeId`, `mode` on the envelope; the SDK's `WebhookEvent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookScope {
    /// The delivery id.
    pub id: String,
    /// The event type.
    pub event_type: String,
    /// `storeId`, when present.
    pub store_id: Option<String>,
    /// `mode` (`test` or `prod`), when present.
    pub mode: Option<String>,
}

impl WebhookScope {
    /// Why the event is not for `store_id` in `mode`; `None` when it is. An event that names no
    /// store or no mode cannot be shown to be ours and is foreign too.
    #[must_use]
    pub fn foreign(&self, store_id: &str, mode: &str) -> Option<String> {
        match (self.store_id.as_deref(), self.mode.as_deref()) {
            (None, _) => Some("the event names no storeId".into()),
            (_, None) => Some("the event names no mode".into()),
            (Some(store), _) if store != store_id => Some(format!(
                "the event is for store {:?}, not the configured storeId",
                clip(store)
            )),
            (_, Some(event_mode)) if event_mode != mode => Some(format!(
                "the event is in mode {:?}, not the configured {mode}",
                clip(event_mode)
            )),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScopeEnvelope {
    id: String,
    event_type: String,
    #[serde(default)]
    store_id: Option<String>,
    #[serde(default)]
    mode: Option<String>,
}

/// The [`WebhookScope`] of a verified webhook body, read before its data.
///
/// # Errors
/// [`WebhookError::Malformed`] when the envelope cannot be read or has no usable id.
pub fn webhook_scope(body: &[u8]) -> Result<WebhookScope, WebhookError> {
    let envelope: ScopeEnvelope =
        serde_json::from_slice(body).map_err(|e| malformed(format!("not a pancake event: {e}")))?;
    if envelope.id.is_empty() || envelope.id.chars().count() > MAX_EVENT_ID_CHARS {
        return Err(malformed("event id missing or too long"));
    }
    Ok(WebhookScope {
        id: envelope.id,
        event_type: envelope.event_type,
        store_id: envelope.store_id,
        mode: envelope.mode,
    })
}

/// The string a webhook signature covers: `{t}.{raw body}`.
#[must_use]
pub fn webhook_message(t: &str, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(t.len() + 1 + body.len());
    message.extend_from_slice(t.as_bytes());
    message.push(b'.');
    message.extend_from_slice(body);
    message
}

/// Every webhook's envelope.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookEnvelope {
    id: String,
    event_type: String,
    /// The business event's id (a payment's, a refund's): one delivery record per event.
    #[serde(default)]
    event_id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    data: Value,
}

/// An event's `data`, as far as Tally reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookData {
    /// The Pancake order (`ORD_…`); for subscriptions, the subscription's id.
    #[serde(default)]
    pub order_id: Option<String>,
    /// The order's status after the event.
    #[serde(default)]
    pub order_status: Option<String>,
    /// Our order id, as sent.
    #[serde(default)]
    pub order_merchant_external_id: Option<String>,
    /// The checkout metadata.
    #[serde(default)]
    pub order_metadata: Option<BTreeMap<String, Value>>,
    /// ISO code.
    #[serde(default)]
    pub currency: Option<String>,
    /// The amount before tax (a refund's own amount on refund events).
    #[serde(default)]
    pub amount: Option<WireAmount>,
    /// Refund events: what this refund actually returned ("this event's own figure").
    #[serde(default)]
    pub refunded_amount: Option<WireAmount>,
    /// Refund events: what the refunded payment actually collected, tax included.
    #[serde(default)]
    pub original_charged_amount: Option<WireAmount>,
    /// Refund events: the refunded payment as originally charged.
    #[serde(default)]
    pub original_payment: Option<AmountBreakdown>,
    /// Payment and refund events: the payment (`order.completed`,
    /// `subscription.payment_succeeded`, and the payment a refund returns money from).
    #[serde(default)]
    pub payment_id: Option<String>,
    /// Current period start.
    #[serde(default)]
    pub current_period_start: Option<String>,
    /// Current period end.
    #[serde(default)]
    pub current_period_end: Option<String>,
}

/// A `WebhookAmountBreakdown` (`originalPayment` on refund events).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmountBreakdown {
    /// Tax included.
    #[serde(default)]
    pub total: Option<WireAmount>,
    /// Before tax.
    #[serde(default)]
    pub subtotal: Option<WireAmount>,
}

/// A parsed webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedWebhook {
    /// The delivery id (stable across retries).
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// What it means for Tally.
    pub meaning: Meaning,
}

/// What a webhook means, or what must be read from Pancake to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Meaning {
    /// These events (empty for event types Tally does not handle).
    Events(Vec<PaymentEvent>),
    /// A period was paid (`subscription.activated`, `.renewed`, `.recovered`): the
    /// subscription's payments must be read for the one that paid it ([`period_event`]).
    Period(PeriodChange, Box<WebhookData>, Timestamp),
}

/// Which subscription event a [`Meaning::Period`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodChange {
    /// The first period.
    Activated,
    /// A later period, or the current one paid again after a failed charge.
    Renewed,
}

/// Parse a verified webhook body; `signed_at` is the signature's `t`, used when the envelope
/// carries no readable `timestamp`.
///
/// # Errors
/// [`WebhookError::Malformed`] when the envelope or a handled event's data cannot be read.
pub fn parse_webhook(body: &[u8], signed_at: Timestamp) -> Result<ParsedWebhook, WebhookError> {
    let envelope: WebhookEnvelope =
        serde_json::from_slice(body).map_err(|e| malformed(format!("not a pancake event: {e}")))?;
    if envelope.id.is_empty() || envelope.id.chars().count() > MAX_EVENT_ID_CHARS {
        return Err(malformed("event id missing or too long"));
    }
    let at = envelope
        .timestamp
        .as_deref()
        .and_then(timestamp)
        .unwrap_or(signed_at);
    let period_change = match envelope.event_type.as_str() {
        "subscription.activated" => Some(PeriodChange::Activated),
        "subscription.renewed" | "subscription.recovered" => Some(PeriodChange::Renewed),
        _ => None,
    };
    if let Some(change) = period_change {
        let data = read(envelope.data)?;
        // Checked now, so that a malformed event is refused before anything is read.
        subscription_id(&data)?;
        period(&data)?;
        return Ok(ParsedWebhook {
            event_id: envelope.id,
            event_type: envelope.event_type,
            meaning: Meaning::Period(change, Box::new(data), at),
        });
    }
    let refund_id = envelope
        .event_id
        .clone()
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| envelope.id.clone());
    let events = match envelope.event_type.as_str() {
        "order.completed" => vec![order_completed(&read(envelope.data)?, at)?],
        "subscription.canceling" => {
            let id = subscription_id(&read(envelope.data)?)?;
            vec![PaymentEvent::SubscriptionCancelScheduled {
                provider_subscription_id: id,
                occurred_at: at,
            }]
        }
        "subscription.uncanceled" => {
            let id = subscription_id(&read(envelope.data)?)?;
            vec![PaymentEvent::SubscriptionCancelWithdrawn {
                provider_subscription_id: id,
                occurred_at: at,
            }]
        }
        "subscription.canceled" => vec![canceled(&read(envelope.data)?, at)?],
        "subscription.past_due" => {
            let id = subscription_id(&read(envelope.data)?)?;
            vec![PaymentEvent::SubscriptionPastDue {
                provider_subscription_id: id,
                occurred_at: at,
            }]
        }
        "refund.succeeded" => vec![refunded(&read(envelope.data)?, refund_id, at)?],
        _ => Vec::new(),
    };
    Ok(ParsedWebhook {
        event_id: envelope.id,
        event_type: envelope.event_type,
        meaning: Meaning::Events(events),
    })
}

fn read(data: Value) -> Result<WebhookData, WebhookError> {
    serde_json::from_value(data).map_err(|e| malformed(format!("event data cannot be read: {e}")))
}

fn malformed(text: impl Into<String>) -> WebhookError {
    WebhookError::Malformed(text.into())
}

/// Our order from `orderMerchantExternalId`, or else `orderMetadata.orderId`.
#[must_use]
pub fn locator(data: &WebhookData) -> OrderLocator {
    let from_metadata = || {
        data.order_metadata
            .as_ref()
            .and_then(|m| m.get("orderId"))
            .and_then(Value::as_str)
            .and_then(|s| OrderId::new(s).ok())
    };
    let order_id = data
        .order_merchant_external_id
        .as_deref()
        .and_then(|s| OrderId::new(s).ok())
        .or_else(from_metadata);
    // Webhooks name Pancake's order, not the checkout session Tally keeps as its reference.
    OrderLocator {
        order_id,
        provider_reference: None,
    }
}

fn amount_of(data: &WebhookData, amount: Option<&WireAmount>) -> Result<Money, WebhookError> {
    let code = data
        .currency
        .as_deref()
        .ok_or_else(|| malformed("event without a currency"))?;
    let amount = amount.ok_or_else(|| malformed("event without an amount"))?;
    currency(code)
        .and_then(|c| amount.to_money(c))
        .map_err(WebhookError::Malformed)
}

fn subscription_id(data: &WebhookData) -> Result<String, WebhookError> {
    data.order_id
        .clone()
        .filter(|id| !id.is_empty())
        .ok_or_else(|| malformed("event without an orderId"))
}

fn period(data: &WebhookData) -> Result<BillingPeriod, WebhookError> {
    let start = data.current_period_start.as_deref().and_then(timestamp);
    let end = data.current_period_end.as_deref().and_then(timestamp);
    let (Some(start), Some(end)) = (start, end) else {
        return Err(malformed("subscription event without a readable period"));
    };
    BillingPeriod::new(start, end).ok_or_else(|| malformed("subscription period is empty"))
}

fn order_completed(data: &WebhookData, at: Timestamp) -> Result<PaymentEvent, WebhookError> {
    Ok(PaymentEvent::PaymentSucceeded {
        order: locator(data),
        amount: amount_of(data, data.amount.as_ref())?,
        occurred_at: at,
    })
}

/// The `SubscriptionActivated` or `SubscriptionRenewed` of a subscription event, once the
/// subscription's payments have been read (`None` when they could not be): the charge is the
/// payment that paid the period ([`charge_of_period`]).
///
/// # Errors
/// [`WebhookError::Malformed`] when the subscription id, period or amount cannot be read.
pub fn period_event(
    change: PeriodChange,
    data: &WebhookData,
    payments: Option<&[OrderPayment]>,
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    let period = period(data)?;
    let charge_ref =
        payments.and_then(|p| charge_of_period(period, change == PeriodChange::Activated, p));
    Ok(match change {
        PeriodChange::Activated => PaymentEvent::SubscriptionActivated {
            order: locator(data),
            provider_subscription_id: subscription_id(data)?,
            period,
            amount: data
                .amount
                .as_ref()
                .map(|amount| amount_of(data, Some(amount)))
                .transpose()?,
            charge_ref,
            occurred_at: at,
        },
        PeriodChange::Renewed => PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: subscription_id(data)?,
            period,
            amount: amount_of(data, data.amount.as_ref())?,
            charge_ref,
            occurred_at: at,
        },
    })
}

/// Which of a subscription's payments paid `period`: of its succeeded payments, the one
/// [`period::charge_of_period`] picks (the earliest in the period's window for the first period,
/// else the latest). `None` when there is none (a free trial).
#[must_use]
pub fn charge_of_period(
    period: BillingPeriod,
    first: bool,
    payments: &[OrderPayment],
) -> Option<String> {
    let paid = payments
        .iter()
        .take(MAX_ORDER_PAYMENTS)
        .filter(|p| p.status.as_deref() == Some("succeeded") && !p.id.is_empty())
        .filter_map(|p| Some((p.created_at.as_deref().and_then(timestamp)?, p.id.as_str())));
    period::charge_of_period(period, first, paid)
}

/// `subscription.canceled` ends the subscription; an `expired` order status says it ran out.
fn canceled(data: &WebhookData, at: Timestamp) -> Result<PaymentEvent, WebhookError> {
    let provider_subscription_id = subscription_id(data)?;
    Ok(if data.order_status.as_deref() == Some("expired") {
        PaymentEvent::SubscriptionExpired {
            provider_subscription_id,
            occurred_at: at,
        }
    } else {
        PaymentEvent::SubscriptionCanceled {
            provider_subscription_id,
            occurred_at: at,
        }
    })
}

/// Whether an event is about a subscription order: Tally's checkout metadata marks its
/// subscriptions (`intervalMonths`), and some order statuses only subscriptions have.
fn is_subscription(data: &WebhookData) -> bool {
    let marked = data
        .order_metadata
        .as_ref()
        .is_some_and(|m| m.contains_key("intervalMonths"));
    let status = data
        .order_status
        .as_deref()
        .is_some_and(|s| SUBSCRIPTION_ONLY_STATUSES.contains(&s));
    marked || status
}

/// `refund.succeeded`: this refund's own amount (`refundedAmount`, else the deprecated `amount`:
/// refund events carry "this event's own figure", not the payment's running total), reported as
/// one refund under its business event id. A subscription's payment is named by its
/// `paymentId`, the `charge_ref` of its activation or renewal; a one-time order by our order.
/// When the refunded payment's amounts say tax was added on top, the amount is scaled to the
/// price before tax (the whole payment maps exactly onto it).
fn refunded(
    data: &WebhookData,
    refund_id: String,
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    let amount = amount_of(data, data.refunded_amount.as_ref().or(data.amount.as_ref()))?;
    let amount = on_price_basis(data, amount)?;
    let payment_id = data.payment_id.clone().filter(|id| !id.is_empty());
    let charge = match (is_subscription(data), payment_id) {
        (true, Some(charge_ref)) => RefundedCharge::SubscriptionCharge {
            provider_subscription_id: data.order_id.clone().filter(|id| !id.is_empty()),
            charge_ref,
        },
        _ => RefundedCharge::Order(locator(data)),
    };
    Ok(PaymentEvent::Refunded {
        charge,
        refund: RefundReport::One { refund_id, amount },
        occurred_at: at,
    })
}

/// `amount` (tax included, as charged) on the basis of the price before tax, when the refunded
/// payment's `originalChargedAmount` (or `originalPayment.total`) and `originalPayment.subtotal`
/// say tax was added on top; else as it is.
fn on_price_basis(data: &WebhookData, amount: Money) -> Result<Money, WebhookError> {
    let original = data.original_payment.as_ref();
    let charged = data
        .original_charged_amount
        .as_ref()
        .or_else(|| original.and_then(|o| o.total.as_ref()));
    let subtotal = original.and_then(|o| o.subtotal.as_ref());
    let (Some(charged), Some(subtotal)) = (charged, subtotal) else {
        return Ok(amount);
    };
    let charged = charged
        .to_money(amount.currency())
        .map_err(WebhookError::Malformed)?
        .amount_minor();
    let net = subtotal
        .to_money(amount.currency())
        .map_err(WebhookError::Malformed)?
        .amount_minor();
    let gross = amount.amount_minor();
    if charged <= 0 || net >= charged {
        return Ok(amount);
    }
    let scaled = if gross >= charged {
        net
    } else {
        i64::try_from(i128::from(gross) * i128::from(net) / i128::from(charged))
            .map_err(|_| malformed("refund amounts out of range"))?
    };
    Money::from_minor(scaled, amount.currency()).map_err(|e| malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    #[test]
    fn money_becomes_a_display_string_with_the_currency_exponent() {
        assert_eq!(display_amount(usd(999)), "9.99");
        assert_eq!(display_amount(usd(5)), "0.05");
        assert_eq!(display_amount(usd(0)), "0.00");
        assert_eq!(display_amount(usd(123_456)), "1234.56");
        assert_eq!(
            display_amount(Money::from_minor(1000, Currency::Jpy).unwrap()),
            "1000"
        );
    }

    #[test]
    fn display_strings_become_exact_money() {
        assert_eq!(parse_display("9.99", Currency::Usd).unwrap(), usd(999));
        assert_eq!(parse_display("9.9", Currency::Usd).unwrap(), usd(990));
        assert_eq!(parse_display("9.990", Currency::Usd).unwrap(), usd(999));
        assert_eq!(parse_display("10", Currency::Usd).unwrap(), usd(1000));
        assert_eq!(
            parse_display("1000", Currency::Jpy).unwrap().amount_minor(),
            1000
        );
    }

    #[test]
    fn malformed_display_strings_are_refused() {
        for text in [
            "",
            ".5",
            "9.999",
            "-1.00",
            "1e3",
            " 9.99",
            "9,99",
            "1000.5",
            "99999999999999999999",
        ] {
            let currency = if text == "1000.5" {
                Currency::Jpy
            } else {
                Currency::Usd
            };
            assert!(
                parse_display(text, currency).is_err(),
                "{text:?} was accepted"
            );
        }
    }

    #[test]
    fn display_strings_round_trip() {
        for minor in [0, 1, 10, 99, 100, 101, 999_999] {
            assert_eq!(
                parse_display(&display_amount(usd(minor)), Currency::Usd).unwrap(),
                usd(minor)
            );
        }
    }

    #[test]
    fn the_canonical_request_hashes_the_exact_body() {
        let text = canonical_request("POST", "/v1/x", 1_700_000_000, b"{}");
        assert_eq!(
            text,
            "POST\n/v1/x\n1700000000\nRBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o="
        );
    }

    #[test]
    fn signature_headers_parse_and_malformed_ones_do_not() {
        let parsed = parse_signature_header("t=1700000000123,v1=abc==").unwrap();
        assert_eq!(parsed.t_ms, 1_700_000_000_123);
        assert_eq!(parsed.v1, vec!["abc==".to_owned()]);
        assert_eq!(parse_signature_header("v1=abc"), None);
        assert_eq!(parse_signature_header("t=1"), None);
        assert_eq!(parse_signature_header("t=soon,v1=abc"), None);
    }

    #[test]
    fn the_webhook_window_is_45_minutes_back_and_one_minute_ahead_to_the_millisecond() {
        let (past, future) = (2_700_000, 60_000);
        let now = 1_775_000_000_000;
        assert!(within_window(now - past, now, past, future));
        assert!(!within_window(now - past - 1, now, past, future));
        assert!(within_window(now + future, now, past, future));
        assert!(!within_window(now + future + 1, now, past, future));
        assert!(!within_window(i64::MIN, i64::MAX, past, future));
        assert!(!within_window(i64::MAX, i64::MIN, past, future));
    }

    #[test]
    fn a_webhook_is_ours_only_for_our_store_in_our_mode() {
        let scope = |store: Option<&str>, mode: Option<&str>| WebhookScope {
            id: "d".into(),
            event_type: "order.completed".into(),
            store_id: store.map(str::to_owned),
            mode: mode.map(str::to_owned),
        };
        assert_eq!(
            scope(Some("STO_a"), Some("test")).foreign("STO_a", "test"),
            None
        );
        for other in [
            scope(Some("STO_b"), Some("test")),
            scope(Some("STO_a"), Some("prod")),
            scope(None, Some("test")),
            scope(Some("STO_a"), None),
            scope(Some("sto_a"), Some("test")),
        ] {
            assert!(other.foreign("STO_a", "test").is_some(), "{other:?}");
        }
    }

    #[test]
    fn dates_and_date_times_become_timestamps() {
        assert_eq!(timestamp("1970-01-02").unwrap().unix_millis(), 86_400_000);
        assert_eq!(
            timestamp("1970-01-01T00:00:01.500Z").unwrap().unix_millis(),
            1_500
        );
        assert_eq!(timestamp("tomorrow"), None);
    }

    #[test]
    fn unknown_order_statuses_read_as_pending() {
        let data: OrderStatusData =
            serde_json::from_str(r#"{"onetimeOrders":[{"status":"brand_new"}]}"#).unwrap();
        assert_eq!(
            payment_status(&data, Timestamp::from_unix_millis(0)).unwrap(),
            PaymentStatus::Pending
        );
    }

    fn paid(id: &str, at: &str, status: &str) -> OrderPayment {
        OrderPayment {
            id: id.into(),
            status: Some(status.into()),
            created_at: Some(at.into()),
        }
    }

    #[test]
    fn the_charge_of_a_period_is_the_succeeded_payment_made_for_it() {
        let payments = [
            paid("PAY_first", "2026-03-31T23:59:58.000Z", "succeeded"),
            paid("PAY_failed", "2026-07-01T00:00:01.000Z", "failed"),
            paid("PAY_retry", "2026-07-03T08:00:00.000Z", "succeeded"),
            paid("PAY_next", "2026-10-01T00:00:02.000Z", "succeeded"),
        ];
        let first = BillingPeriod::new(
            timestamp("2026-04-01").unwrap(),
            timestamp("2026-07-01").unwrap(),
        )
        .unwrap();
        let second = BillingPeriod::new(
            timestamp("2026-07-01").unwrap(),
            timestamp("2026-10-01").unwrap(),
        )
        .unwrap();
        assert_eq!(
            charge_of_period(first, true, &payments).as_deref(),
            Some("PAY_first")
        );
        assert_eq!(
            charge_of_period(second, false, &payments).as_deref(),
            Some("PAY_retry")
        );
        assert_eq!(charge_of_period(second, false, &payments[..2]), None);
    }
}
