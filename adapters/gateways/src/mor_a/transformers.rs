//! Creem's wire format: request and response bodies, amounts in integer cents, the checkout and
//! subscription status enums with their exhaustive mapping into ours, and webhook event parsing.
//! Everything Tally knows about Creem's JSON lives here; `mor_a.rs` only moves bytes.

use std::collections::BTreeMap;

use application::ports::{
    GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundReport, RefundedCharge,
    WebhookError,
};
#[cfg(test)]
use domain::Currency;
use domain::{BillingPeriod, Money, OrderId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest event id accepted (Creem's are `evt_` + 22 characters).
const MAX_EVENT_ID_CHARS: usize = 200;
/// A `subscription.paid` whose period starts within this long after the subscription was
/// created pays the first period (renewals start a whole billing period later, at least a month).
const FIRST_PERIOD_WINDOW_MS: i64 = 86_400_000;

/// `POST /v1/checkouts` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateCheckout {
    /// The Creem product (`morAProductId`).
    pub product_id: String,
    /// Our order id: Creem echoes it as `request_id` in the checkout and its webhooks.
    pub request_id: String,
    /// Where Creem sends the buyer after paying.
    pub success_url: String,
    /// Prefills the checkout's e-mail field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer: Option<CheckoutCustomer>,
    /// Flows into the checkout, its subscription and every webhook about them.
    pub metadata: CheckoutMetadata,
}

/// The buyer, as Creem's checkout takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckoutCustomer {
    /// E-mail address.
    pub email: String,
}

/// What Tally puts in a checkout's metadata.
///
/// `orderId` is how webhooks find our order. The rest only serves the local sandbox, which cannot
/// look up product prices: the real Creem stores them untouched and charges the product's price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutMetadata {
    /// Our order id.
    pub order_id: String,
    /// The order's price in minor units (sandbox hint).
    pub amount_minor: String,
    /// The order's currency (sandbox hint).
    pub currency: String,
    /// A subscription's billing period in months (sandbox hint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_months: Option<String>,
    /// Where the sandbox posts webhooks (sent to the sandbox only; the real Creem posts to the
    /// endpoint registered in its dashboard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_url: Option<String>,
}

/// `POST /v1/subscriptions/{id}/cancel` body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelSubscription {
    /// `scheduled`: the subscription runs to the end of the paid period.
    pub mode: &'static str,
    /// What happens when the scheduled moment comes.
    pub on_execute: &'static str,
}

impl CancelSubscription {
    /// Cancel at the end of the current period (the buyer keeps what they paid for).
    #[must_use]
    pub const fn at_period_end() -> Self {
        Self {
            mode: "scheduled",
            on_execute: "cancel",
        }
    }

    /// Cancel now (Creem's default mode); `subscription.canceled` follows.
    #[must_use]
    pub const fn immediate() -> Self {
        Self {
            mode: "immediate",
            on_execute: "cancel",
        }
    }
}

/// A checkout as Creem returns it (create, retrieve, and inside `checkout.completed`).
#[derive(Debug, Clone, Deserialize)]
pub struct CheckoutEntity {
    /// `ch_…`.
    pub id: String,
    /// Where it is.
    #[serde(default)]
    pub status: CheckoutStatus,
    /// Our order id, as sent.
    #[serde(default)]
    pub request_id: Option<String>,
    /// The hosted checkout page.
    #[serde(default)]
    pub checkout_url: Option<String>,
    /// The order, once paid.
    #[serde(default)]
    pub order: Option<OrderEntity>,
    /// The subscription it started (an object or its id).
    #[serde(default)]
    pub subscription: Option<Expandable<SubscriptionEntity>>,
    /// Our metadata.
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// An object Creem sends either expanded or as its id.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Expandable<T> {
    /// The whole object.
    Object(Box<T>),
    /// Only its id.
    Id(String),
}

impl<T> Expandable<T> {
    /// The object, when expanded.
    #[must_use]
    pub fn object(&self) -> Option<&T> {
        match self {
            Expandable::Object(o) => Some(o),
            Expandable::Id(_) => None,
        }
    }
}

impl Expandable<SubscriptionEntity> {
    /// The subscription's id, expanded or not.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Expandable::Object(s) => &s.id,
            Expandable::Id(id) => id,
        }
    }
}

impl Expandable<CheckoutEntity> {
    /// The checkout's id, expanded or not.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Expandable::Object(c) => &c.id,
            Expandable::Id(id) => id,
        }
    }
}

/// Metadata as Creem echoes it.
pub type Metadata = BTreeMap<String, Value>;

/// A checkout's status (`CheckoutEntity.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckoutStatus {
    /// Created, not paid.
    Pending,
    /// Payment in progress.
    Processing,
    /// Paid.
    Completed,
    /// Ran out without payment.
    Expired,
    /// Anything newer than this code.
    #[default]
    #[serde(other)]
    Unknown,
}

/// An order (`OrderEntity`); amounts in cents.
#[derive(Debug, Clone, Deserialize)]
pub struct OrderEntity {
    /// `ord_…`.
    #[serde(default)]
    pub id: Option<String>,
    /// The product's price times units, before tax and after discounts, in cents.
    pub amount: i64,
    /// Upper-case ISO code.
    pub currency: String,
    /// `onetime` or `recurring`.
    #[serde(default, rename = "type")]
    pub kind: OrderType,
    /// The transaction that paid it (`tran_…`): for a subscription, its first period's charge.
    #[serde(default)]
    pub transaction: Option<String>,
    /// Created, RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last changed, RFC 3339.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// What an order buys (`OrderEntity.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderType {
    /// A single payment.
    Onetime,
    /// A subscription's payment.
    Recurring,
    /// Anything else.
    #[default]
    #[serde(other)]
    Unknown,
}

/// A subscription (`SubscriptionEntity`).
#[derive(Debug, Clone, Deserialize)]
pub struct SubscriptionEntity {
    /// `sub_…`.
    pub id: String,
    /// Where it is.
    #[serde(default)]
    pub status: SubscriptionStatus,
    /// The product, expanded or as its id.
    #[serde(default)]
    pub product: Option<Expandable<ProductEntity>>,
    /// The last paid transaction, when expanded.
    #[serde(default)]
    pub last_transaction: Option<TransactionEntity>,
    /// The last paid transaction's id (`tran_…`): the charge a `subscription.paid` reports.
    #[serde(default)]
    pub last_transaction_id: Option<String>,
    /// Current period start, RFC 3339.
    #[serde(default)]
    pub current_period_start_date: Option<String>,
    /// Current period end, RFC 3339.
    #[serde(default)]
    pub current_period_end_date: Option<String>,
    /// Created, RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
    /// The checkout's metadata, inherited.
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// A subscription's status (`SubscriptionEntity.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    /// Paid and renewing.
    Active,
    /// In a trial.
    Trialing,
    /// Ends at the period's end.
    ScheduledCancel,
    /// A renewal payment failed; Creem is retrying.
    PastDue,
    /// Payment overdue.
    Unpaid,
    /// Paused by the merchant.
    Paused,
    /// Ended for good.
    Canceled,
    /// Anything else.
    #[default]
    #[serde(other)]
    Unknown,
}

/// A product (`ProductEntity`), as far as Tally reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct ProductEntity {
    /// `prod_…`.
    pub id: String,
    /// Price in cents.
    #[serde(default)]
    pub price: Option<i64>,
    /// Upper-case ISO code.
    #[serde(default)]
    pub currency: Option<String>,
}

/// A transaction (`TransactionEntity`); amounts in cents.
#[derive(Debug, Clone, Deserialize)]
pub struct TransactionEntity {
    /// `tran_…`.
    #[serde(default)]
    pub id: Option<String>,
    /// Before tax.
    #[serde(default)]
    pub amount: Option<i64>,
    /// What the buyer paid, tax included.
    #[serde(default)]
    pub amount_paid: Option<i64>,
    /// Refunded so far, on the `amount_paid` basis.
    #[serde(default)]
    pub refunded_amount: Option<i64>,
    /// Upper-case ISO code.
    #[serde(default)]
    pub currency: Option<String>,
    /// The subscription it paid (`sub_…`), for a subscription's charge.
    #[serde(default)]
    pub subscription: Option<String>,
}

impl SubscriptionEntity {
    /// The id of the transaction that paid the current period: the expanded last transaction's,
    /// else `last_transaction_id`.
    #[must_use]
    pub fn charge_ref(&self) -> Option<String> {
        self.last_transaction
            .as_ref()
            .and_then(|t| t.id.clone())
            .or_else(|| self.last_transaction_id.clone())
            .filter(|id| !id.is_empty())
    }
}

/// The object of `dispute.created`.
#[derive(Debug, Clone, Deserialize)]
pub struct DisputeEntity {
    /// `disp_…`.
    pub id: String,
    /// The disputed amount, in cents, tax included.
    #[serde(default)]
    pub amount: Option<i64>,
    /// Upper-case ISO code.
    #[serde(default)]
    pub currency: Option<String>,
    /// The disputed transaction, with its running refunded total.
    #[serde(default)]
    pub transaction: Option<TransactionEntity>,
    /// The checkout that created the order (an object or its id).
    #[serde(default)]
    pub checkout: Option<Expandable<CheckoutEntity>>,
    /// The subscription, for a subscription payment.
    #[serde(default)]
    pub subscription: Option<Expandable<SubscriptionEntity>>,
}

/// The object of `refund.created`.
#[derive(Debug, Clone, Deserialize)]
pub struct RefundEntity {
    /// `ref_…`.
    pub id: String,
    /// This refund, in cents, tax included.
    pub refund_amount: i64,
    /// Upper-case ISO code.
    pub refund_currency: String,
    /// The refunded transaction.
    #[serde(default)]
    pub transaction: Option<TransactionEntity>,
    /// The checkout that created the order (an object or its id).
    #[serde(default)]
    pub checkout: Option<Expandable<CheckoutEntity>>,
    /// The subscription, for a subscription payment.
    #[serde(default)]
    pub subscription: Option<Expandable<SubscriptionEntity>>,
}

/// Every webhook's envelope.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    id: String,
    event_type: String,
    #[serde(rename = "created_at")]
    created_at_ms: i64,
    #[serde(default)]
    object: Value,
}

/// A parsed webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedWebhook {
    /// The event id (`evt_…`).
    pub event_id: String,
    /// The event type.
    pub event_type: String,
    /// What it means for Tally.
    pub events: Vec<PaymentEvent>,
}

pub use crate::shared::money::from_minor as money;
pub use crate::shared::time::parse_rfc3339 as timestamp;

/// Our order id from a checkout's `request_id`, or else its `metadata.orderId`.
#[must_use]
pub fn order_id(request_id: Option<&str>, metadata: Option<&Metadata>) -> Option<OrderId> {
    let from_metadata = || {
        metadata
            .and_then(|m| m.get("orderId"))
            .and_then(Value::as_str)
            .and_then(|s| OrderId::new(s).ok())
    };
    request_id
        .and_then(|s| OrderId::new(s).ok())
        .or_else(from_metadata)
}

/// A checkout's state as our [`PaymentStatus`]; `now` stands in for a paid time Creem omits.
///
/// # Errors
/// [`GatewayError::BadResponse`] for a completed checkout without a readable order.
pub fn payment_status(
    checkout: &CheckoutEntity,
    now: Timestamp,
) -> Result<PaymentStatus, GatewayError> {
    match checkout.status {
        CheckoutStatus::Completed => {
            let order = checkout.order.as_ref().ok_or_else(|| {
                GatewayError::BadResponse("completed checkout without an order".into())
            })?;
            let amount = money(order.amount, &order.currency).map_err(GatewayError::BadResponse)?;
            let paid_at = order
                .updated_at
                .as_deref()
                .or(order.created_at.as_deref())
                .and_then(timestamp)
                .unwrap_or(now);
            Ok(PaymentStatus::Succeeded { amount, paid_at })
        }
        CheckoutStatus::Expired => Ok(PaymentStatus::Failed {
            reason: "checkout expired".into(),
        }),
        CheckoutStatus::Pending | CheckoutStatus::Processing | CheckoutStatus::Unknown => {
            Ok(PaymentStatus::Pending)
        }
    }
}

/// A verified webhook body as JSON, before ids in it are resolved.
///
/// # Errors
/// [`WebhookError::Malformed`] when it is not a JSON object.
pub fn envelope_value(body: &[u8]) -> Result<Value, WebhookError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(malformed("not a creem event: not a JSON object")),
        Err(e) => Err(WebhookError::Malformed(format!("not a creem event: {e}"))),
    }
}

/// Creem's environments (`EnvironmentMode`): every entity carries `mode`.
const TEST_MODES: [&str; 2] = ["test", "sandbox"];
/// The live environment's `mode`.
const LIVE_MODE: &str = "prod";

/// Why an event is not ours: its object's `mode` (`test`, `sandbox` or `prod`) is not the
/// configured key's environment (`test`/`sandbox` for a test-mode key, `prod` for a live one).
/// An object without `mode` cannot be told apart and is taken as ours.
#[must_use]
pub fn foreign_mode(envelope: &Value, test_mode: bool) -> Option<String> {
    let mode = envelope.get("object")?.get("mode")?;
    let Some(mode) = mode.as_str() else {
        return Some("the event's mode is not a string".into());
    };
    let ours = if test_mode {
        TEST_MODES.contains(&mode)
    } else {
        mode == LIVE_MODE
    };
    (!ours).then(|| {
        format!(
            "a {}-mode event, but the API key is a {} key",
            crate::shared::wire::clip(mode, 16),
            if test_mode { "test-mode" } else { "live" }
        )
    })
}

/// A Creem object an event names only by id, to be read with the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// `GET /v1/checkouts?checkout_id=…`: a refund's or dispute's checkout given as an id.
    Checkout(String),
    /// `GET /v1/transactions?transaction_id=…`: a refund's or dispute's transaction when the
    /// event does not say whether it paid a subscription.
    Transaction(String),
    /// `GET /v1/transactions?transaction_id=…`: the transaction that paid a subscription period
    /// when `subscription.paid` carries no amount.
    LastTransaction(String),
    /// `GET /v1/products?product_id=…`: the product of a `subscription.paid` that carries
    /// neither its last transaction nor an expanded product.
    Product(String),
}

fn text_of(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The lookups an event needs before it can be read: ids where Tally needs the object.
#[must_use]
pub fn lookups(envelope: &Value) -> Vec<Lookup> {
    let Some(object) = envelope.get("object") else {
        return Vec::new();
    };
    match envelope.get("eventType").and_then(Value::as_str) {
        Some("refund.created" | "dispute.created") => {
            let transaction = object.get("transaction");
            let subscription_known = text_of(transaction.and_then(|t| t.get("subscription")))
                .is_some()
                || match object.get("subscription") {
                    Some(Value::String(id)) => !id.is_empty(),
                    Some(Value::Object(s)) => text_of(s.get("id")).is_some(),
                    _ => false,
                };
            let transaction_id = text_of(transaction.and_then(|t| t.get("id")));
            // An expanded checkout names the order: nothing to learn from the transaction.
            let checkout_expanded = object.get("checkout").is_some_and(Value::is_object);
            let mut lookups = Vec::new();
            if let (false, false, Some(id)) =
                (subscription_known, checkout_expanded, transaction_id)
            {
                lookups.push(Lookup::Transaction(id.to_owned()));
            }
            if let Some(Value::String(id)) = object.get("checkout")
                && !subscription_known
                && !id.is_empty()
            {
                lookups.push(Lookup::Checkout(id.clone()));
            }
            lookups
        }
        // A plan change's product must be priced; a product given as an id is read.
        Some("subscription.update") => match text_of(object.get("product")) {
            Some(id) => vec![Lookup::Product(id.to_owned())],
            None => Vec::new(),
        },
        Some("subscription.paid") => {
            let expanded_transaction = object.get("last_transaction").is_some_and(Value::is_object);
            let product = object.get("product");
            let product_priced = product.is_some_and(|p| p.get("price").is_some_and(Value::is_i64));
            if expanded_transaction || product_priced {
                return Vec::new();
            }
            if let Some(id) = text_of(object.get("last_transaction_id")) {
                vec![Lookup::LastTransaction(id.to_owned())]
            } else if let Some(id) = text_of(product) {
                vec![Lookup::Product(id.to_owned())]
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// Put what a lookup found into the event: the checkout and product replace their ids, a
/// subscription's last transaction is added, and a refunded transaction's missing fields are
/// filled in (the event's own values win).
pub fn apply(envelope: &mut Value, lookup: &Lookup, found: Value) {
    let Some(object) = envelope.get_mut("object").and_then(Value::as_object_mut) else {
        return;
    };
    if !found.is_object() {
        return;
    }
    match lookup {
        Lookup::Checkout(_) => {
            object.insert("checkout".into(), found);
        }
        Lookup::Product(_) => {
            object.insert("product".into(), found);
        }
        Lookup::LastTransaction(_) => {
            object.insert("last_transaction".into(), found);
        }
        Lookup::Transaction(_) => {
            let Value::Object(found) = found else { return };
            let transaction = object
                .entry("transaction")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(transaction) = transaction.as_object_mut() {
                for (key, value) in found {
                    if transaction.get(&key).is_none_or(Value::is_null) {
                        transaction.insert(key, value);
                    }
                }
            }
        }
    }
}

/// Parse a verified webhook body into Tally's events.
///
/// # Errors
/// [`WebhookError::Malformed`] when the envelope or a handled event's object cannot be read.
pub fn parse_webhook(body: &[u8]) -> Result<ParsedWebhook, WebhookError> {
    parse_envelope(envelope_value(body)?)
}

/// Parse a verified (and resolved) event into Tally's events.
///
/// # Errors
/// [`WebhookError::Malformed`] when the envelope or a handled event's object cannot be read.
pub fn parse_envelope(envelope: Value) -> Result<ParsedWebhook, WebhookError> {
    let envelope: Envelope = serde_json::from_value(envelope)
        .map_err(|e| WebhookError::Malformed(format!("not a creem event: {e}")))?;
    if envelope.id.is_empty() || envelope.id.chars().count() > MAX_EVENT_ID_CHARS {
        return Err(WebhookError::Malformed(
            "event id missing or too long".into(),
        ));
    }
    let at = Timestamp::from_unix_millis(envelope.created_at_ms);
    let object = envelope.object;
    let events = match envelope.event_type.as_str() {
        "checkout.completed" => checkout_completed(object, at)?,
        "subscription.paid" => subscription_paid(object, at)?,
        "subscription.scheduled_cancel" => {
            let s: SubscriptionEntity = read(object)?;
            vec![PaymentEvent::SubscriptionCancelScheduled {
                provider_subscription_id: s.id,
                occurred_at: at,
            }]
        }
        "subscription.canceled" => vec![subscription_canceled(read(object)?, at)],
        "subscription.update" => super::plan_change::updated(object, at)?,
        "subscription.expired" => vec![subscription_expired(read(object)?, at)],
        "subscription.past_due" | "subscription.unpaid" => {
            let s: SubscriptionEntity = read(object)?;
            vec![PaymentEvent::SubscriptionPastDue {
                provider_subscription_id: s.id,
                occurred_at: at,
            }]
        }
        "refund.created" => vec![refund_created(read(object)?, at)?],
        "dispute.created" => dispute_created(read(object)?, at)?,
        _ => Vec::new(),
    };
    Ok(ParsedWebhook {
        event_id: envelope.id,
        event_type: envelope.event_type,
        events,
    })
}

fn read<T: serde::de::DeserializeOwned>(object: Value) -> Result<T, WebhookError> {
    serde_json::from_value(object)
        .map_err(|e| WebhookError::Malformed(format!("event object cannot be read: {e}")))
}

fn malformed(text: impl Into<String>) -> WebhookError {
    WebhookError::Malformed(text.into())
}

/// `checkout.completed`: a one-time payment succeeded, or a subscription started.
///
/// Creem's checkout carries the subscription without its period in the samples it publishes;
/// then the first `subscription.paid` (which has the period) activates it instead.
fn checkout_completed(object: Value, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    let checkout: CheckoutEntity = read(object)?;
    let order = OrderLocator {
        order_id: order_id(checkout.request_id.as_deref(), checkout.metadata.as_ref()),
        provider_reference: Some(checkout.id.clone()),
    };
    let paid = checkout
        .order
        .as_ref()
        .ok_or_else(|| malformed("completed checkout without an order"))?;
    let recurring = checkout.subscription.is_some() || paid.kind == OrderType::Recurring;
    if !recurring {
        let amount = money(paid.amount, &paid.currency).map_err(WebhookError::Malformed)?;
        return Ok(vec![PaymentEvent::PaymentSucceeded {
            order,
            amount,
            occurred_at: at,
        }]);
    }
    let Some(subscription) = checkout.subscription.as_ref().and_then(Expandable::object) else {
        return Ok(Vec::new());
    };
    let amount = money(paid.amount, &paid.currency).map_err(WebhookError::Malformed)?;
    match period(subscription) {
        Ok(period) => Ok(vec![PaymentEvent::SubscriptionActivated {
            order,
            provider_subscription_id: subscription.id.clone(),
            period,
            amount: Some(amount),
            // The order's transaction paid the first period; the subscription's own last
            // transaction, when expanded, is the same one.
            charge_ref: paid
                .transaction
                .clone()
                .filter(|id| !id.is_empty())
                .or_else(|| subscription.charge_ref()),
            occurred_at: at,
        }]),
        Err(_) => Ok(Vec::new()),
    }
}

/// `subscription.paid`: the first period (activation) or a renewal.
fn subscription_paid(object: Value, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    let subscription: SubscriptionEntity = read(object)?;
    let period = period(&subscription)?;
    if is_first_period(&subscription, period) {
        let order = OrderLocator {
            order_id: order_id(None, subscription.metadata.as_ref()),
            provider_reference: None,
        };
        // The first payment's amount, when the subscription object carries one.
        let amount = renewal_amount(&subscription).ok();
        let charge_ref = subscription.charge_ref();
        return Ok(vec![PaymentEvent::SubscriptionActivated {
            order,
            provider_subscription_id: subscription.id,
            period,
            amount,
            charge_ref,
            occurred_at: at,
        }]);
    }
    let amount = renewal_amount(&subscription)?;
    let charge_ref = subscription.charge_ref();
    Ok(vec![PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: subscription.id,
        period,
        amount,
        charge_ref,
        occurred_at: at,
    }])
}

/// Whether the paid period is the subscription's first: it starts when the subscription was
/// created (Creem stamps the period a few seconds before the subscription object).
fn is_first_period(subscription: &SubscriptionEntity, period: BillingPeriod) -> bool {
    let Some(created) = subscription.created_at.as_deref().and_then(timestamp) else {
        return false;
    };
    period.start().unix_millis() < created.unix_millis().saturating_add(FIRST_PERIOD_WINDOW_MS)
}

fn period(subscription: &SubscriptionEntity) -> Result<BillingPeriod, WebhookError> {
    let start = subscription
        .current_period_start_date
        .as_deref()
        .and_then(timestamp);
    let end = subscription
        .current_period_end_date
        .as_deref()
        .and_then(timestamp);
    let (Some(start), Some(end)) = (start, end) else {
        return Err(malformed("subscription without a readable current period"));
    };
    BillingPeriod::new(start, end).ok_or_else(|| malformed("subscription period is empty"))
}

fn renewal_amount(subscription: &SubscriptionEntity) -> Result<Money, WebhookError> {
    let from_transaction = subscription
        .last_transaction
        .as_ref()
        .and_then(|t| Some((t.amount?, t.currency.clone()?)));
    let from_product = || {
        let product = subscription.product.as_ref()?.object()?;
        Some((product.price?, product.currency.clone()?))
    };
    let (cents, currency) = from_transaction
        .or_else(from_product)
        .ok_or_else(|| malformed("subscription payment without an amount"))?;
    money(cents, &currency).map_err(WebhookError::Malformed)
}

/// `subscription.canceled`: ended, or (should Creem send it so) ending at the period's end.
fn subscription_canceled(subscription: SubscriptionEntity, at: Timestamp) -> PaymentEvent {
    if subscription.status == SubscriptionStatus::ScheduledCancel {
        PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: subscription.id,
            occurred_at: at,
        }
    } else {
        PaymentEvent::SubscriptionCanceled {
            provider_subscription_id: subscription.id,
            occurred_at: at,
        }
    }
}

/// `subscription.expired`: Creem sends it when a period ended unpaid while it keeps retrying
/// ("the subscription status will be terminal only when status is changed to canceled"), so it
/// is past due unless the subscription is already canceled.
fn subscription_expired(subscription: SubscriptionEntity, at: Timestamp) -> PaymentEvent {
    if subscription.status == SubscriptionStatus::Canceled {
        PaymentEvent::SubscriptionExpired {
            provider_subscription_id: subscription.id,
            occurred_at: at,
        }
    } else {
        PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: subscription.id,
            occurred_at: at,
        }
    }
}

/// `refund.created`: which charge, and how much of it is refunded on the basis of our price.
///
/// The charge is the refunded transaction. A subscription's transaction (its first period's or a
/// renewal's) is named by its id, the `charge_ref` its `subscription.paid` carried; a one-time
/// payment by our order. The transaction carries its running `refunded_amount`, reported as the
/// total; without it, this refund's own `refund_amount` is reported as one refund.
fn refund_created(refund: RefundEntity, at: Timestamp) -> Result<PaymentEvent, WebhookError> {
    let charge = refunded_charge(
        refund.checkout.as_ref(),
        refund.subscription.as_ref(),
        refund.transaction.as_ref(),
    );
    let transaction = refund.transaction.as_ref();
    let running_total = transaction.and_then(|t| t.refunded_amount);
    let report = match running_total {
        Some(gross) => {
            let cents = on_price_basis(gross, transaction)
                .ok_or_else(|| malformed("refund amounts out of range"))?;
            RefundReport::Total(
                money(cents, &refund.refund_currency).map_err(WebhookError::Malformed)?,
            )
        }
        None => {
            let cents = on_price_basis(refund.refund_amount, transaction)
                .ok_or_else(|| malformed("refund amounts out of range"))?;
            RefundReport::One {
                refund_id: refund.id,
                amount: money(cents, &refund.refund_currency).map_err(WebhookError::Malformed)?,
            }
        }
    };
    Ok(PaymentEvent::Refunded {
        charge,
        refund: report,
        occurred_at: at,
    })
}

/// `dispute.created`: Creem names no outcome of a dispute (it has no won or lost event), but it
/// takes the money back when the chargeback arrives ("we typically process a full refund on
/// your behalf"): the disputed transaction comes with its status `chargeback` and its running
/// `refunded_amount`. That total is reported like a refund's, so that it counts once with any
/// `refund.created` of the same transaction; without it, the dispute's own `amount` (the whole
/// payment, tax included) is the total. A zero total means nothing was taken back.
fn dispute_created(
    dispute: DisputeEntity,
    at: Timestamp,
) -> Result<Vec<PaymentEvent>, WebhookError> {
    let transaction = dispute.transaction.as_ref();
    let Some(gross) = transaction
        .and_then(|t| t.refunded_amount)
        .or(dispute.amount)
        .filter(|cents| *cents > 0)
    else {
        return Ok(Vec::new());
    };
    let currency = dispute
        .currency
        .clone()
        .or_else(|| transaction.and_then(|t| t.currency.clone()))
        .ok_or_else(|| malformed("dispute without a currency"))?;
    let cents = on_price_basis(gross, transaction)
        .ok_or_else(|| malformed("dispute amounts out of range"))?;
    let total = money(cents, &currency).map_err(WebhookError::Malformed)?;
    Ok(vec![PaymentEvent::Refunded {
        charge: refunded_charge(
            dispute.checkout.as_ref(),
            dispute.subscription.as_ref(),
            transaction,
        ),
        refund: RefundReport::Total(total),
        occurred_at: at,
    }])
}

/// The charge a refund or dispute takes money from: a subscription's transaction by its id, or
/// else our order (from the checkout, or the subscription's metadata).
fn refunded_charge(
    checkout: Option<&Expandable<CheckoutEntity>>,
    subscription: Option<&Expandable<SubscriptionEntity>>,
    transaction: Option<&TransactionEntity>,
) -> RefundedCharge {
    let checkout_id = checkout
        .map(|c| c.id().to_owned())
        .filter(|id| !id.is_empty());
    let checkout = checkout.and_then(Expandable::object);
    let subscription_id = transaction
        .and_then(|t| t.subscription.clone())
        .or_else(|| subscription.map(|s| s.id().to_owned()))
        .filter(|id| !id.is_empty());
    let transaction_id = transaction
        .and_then(|t| t.id.clone())
        .filter(|id| !id.is_empty());
    if let (Some(subscription_id), Some(charge_ref)) = (subscription_id, transaction_id) {
        return RefundedCharge::SubscriptionCharge {
            provider_subscription_id: Some(subscription_id),
            charge_ref,
        };
    }
    let subscription_metadata = subscription
        .and_then(Expandable::object)
        .and_then(|s| s.metadata.as_ref());
    let order_id = order_id(
        checkout.and_then(|c| c.request_id.as_deref()),
        checkout.and_then(|c| c.metadata.as_ref()),
    )
    .or_else(|| order_id(None, subscription_metadata));
    // A checkout left as an id still names the order: it is the order's provider reference.
    RefundedCharge::Order(OrderLocator {
        order_id,
        provider_reference: checkout_id,
    })
}

/// Refunds are reported tax included (`refund_amount`, and the transaction's running
/// `refunded_amount`, on the `amount_paid` basis) while our price is Creem's `amount` (before
/// tax): scale `gross_cents` onto the `amount` basis. The whole `amount_paid` maps exactly onto
/// the price; a part rounds down. Without the transaction's amounts, `gross_cents` is taken as
/// it is.
#[must_use]
pub fn on_price_basis(gross_cents: i64, transaction: Option<&TransactionEntity>) -> Option<i64> {
    if gross_cents < 0 {
        return None;
    }
    match transaction.map(|t| (t.amount, t.amount_paid)) {
        Some((Some(net), Some(gross))) if gross > 0 && net >= 0 && net < gross => {
            if gross_cents >= gross {
                return Some(net);
            }
            let scaled = i128::from(gross_cents) * i128::from(net) / i128::from(gross);
            i64::try_from(scaled).ok()
        }
        _ => Some(gross_cents),
    }
}

/// Creem's error answer: `{"status": 403, "error": "Forbidden", "message": ["Invalid API key"]}`
/// (`message` is a list of strings or one string).
#[derive(Debug, Deserialize)]
pub struct CreemError {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<Value>,
}

impl CreemError {
    /// Its `(code, message)` for [`crate::shared::http::HttpReply::decode`].
    #[must_use]
    pub fn describe(self) -> (String, String) {
        let message = match self.message {
            Some(Value::String(text)) => text,
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; "),
            _ => String::new(),
        };
        (self.error.unwrap_or_default(), message)
    }
}

/// A page of `GET /v1/products/search`, as far as a credential check reads it.
#[derive(Debug, Deserialize)]
pub struct ProductPage {
    /// The products on this page.
    pub items: Vec<ProductItem>,
}

/// One product of a search page.
#[derive(Debug, Deserialize)]
pub struct ProductItem {
    /// Its environment: `test`, `sandbox`, `live` or `prod`.
    #[serde(default)]
    pub mode: Option<String>,
}

impl ProductPage {
    /// Whether the first product is a live one (`Some(true)`), a test one (`Some(false)`), or
    /// there is no product naming its environment (`None`).
    #[must_use]
    pub fn mode(&self) -> Option<bool> {
        let mode = self.items.first()?.mode.as_deref()?;
        Some(matches!(mode, "live" | "prod" | "production"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transaction(amount: i64, paid: i64) -> TransactionEntity {
        TransactionEntity {
            id: None,
            amount: Some(amount),
            amount_paid: Some(paid),
            refunded_amount: None,
            currency: Some("EUR".into()),
            subscription: None,
        }
    }

    #[test]
    fn a_full_tax_inclusive_amount_maps_onto_the_whole_price() {
        assert_eq!(
            on_price_basis(1210, Some(&transaction(1000, 1210))),
            Some(1000)
        );
    }

    #[test]
    fn a_partial_amount_is_scaled_to_the_price_and_rounded_down() {
        assert_eq!(
            on_price_basis(605, Some(&transaction(1000, 1210))),
            Some(500)
        );
        assert_eq!(
            on_price_basis(100, Some(&transaction(1000, 1210))),
            Some(82)
        );
    }

    #[test]
    fn without_tax_an_amount_is_taken_as_it_is() {
        assert_eq!(
            on_price_basis(700, Some(&transaction(1000, 1000))),
            Some(700)
        );
        assert_eq!(on_price_basis(300, None), Some(300));
        assert_eq!(on_price_basis(-1, None), None);
    }

    #[test]
    fn cents_and_codes_become_money_and_unknown_codes_are_refused() {
        assert_eq!(
            money(999, "usd").unwrap(),
            Money::from_minor(999, Currency::Usd).unwrap()
        );
        assert!(money(999, "XYZ").is_err());
        assert!(money(-1, "USD").is_err());
    }

    #[test]
    fn the_order_id_comes_from_request_id_then_metadata() {
        let mut metadata = Metadata::new();
        metadata.insert("orderId".into(), Value::String("ord_meta".into()));
        assert_eq!(
            order_id(Some("ord_req"), Some(&metadata)).unwrap().as_str(),
            "ord_req"
        );
        assert_eq!(
            order_id(Some("not valid!"), Some(&metadata))
                .unwrap()
                .as_str(),
            "ord_meta"
        );
        assert_eq!(order_id(None, None), None);
    }

    #[test]
    fn unknown_checkout_statuses_read_as_pending() {
        let checkout: CheckoutEntity =
            serde_json::from_str(r#"{"id":"ch_1","status":"something_new"}"#).unwrap();
        assert_eq!(checkout.status, CheckoutStatus::Unknown);
        assert_eq!(
            payment_status(&checkout, Timestamp::from_unix_millis(0)).unwrap(),
            PaymentStatus::Pending
        );
    }
}
