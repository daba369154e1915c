//! Stripe's wire format: the Checkout Session form (bracket notation), the objects Stripe answers
//! with, its status enums and their mapping into ours, amounts, and events into
//! [`PaymentEvent`]s. All Stripe format knowledge lives here.
//!
//! Amounts: Stripe counts in the currency's smallest unit and treats JPY and KRW as
//! zero-decimal, which is exactly the domain's `Currency::exponent`, so minor units pass through
//! unchanged; only the currency code changes case (Stripe writes `usd`).

use std::collections::BTreeMap;

use application::ports::{
    CheckoutRequest, GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundReport,
    RefundRequest, RefundStarted, RefundState, RefundedCharge, WebhookError,
};
use domain::{
    BillingPeriod, Currency, Duration, Locale, Money, NewPeriodLine, OrderId, PlanType, ProviderId,
    Timestamp,
};
use serde::Deserialize;

use crate::shared::http::HttpReply;
pub use crate::shared::money::from_minor as money;
pub use crate::shared::time::from_unix_seconds as timestamp;
use crate::shared::time::unix_seconds;
use crate::shared::wire;

/// The metadata key that carries our order id (TinyShip's convention).
pub const ORDER_ID_KEY: &str = "orderId";
/// The metadata key that marks a plan change on the subscription (when it was asked, ms).
pub const PLAN_CHANGE_AT_KEY: &str = "planChangeAt";
/// Stripe refuses a session expiring sooner than 30 minutes after creation; a minute of margin.
const MIN_EXPIRY_S: i64 = 30 * 60 + 60;
/// Stripe refuses a session expiring later than 24 hours after creation; a minute of margin.
const MAX_EXPIRY_S: i64 = 24 * 60 * 60 - 60;
/// The most invoice lines looked at in one invoice (a bound on work).
const MAX_ITEMS: usize = 100;
/// The longest provider id accepted into a URL path.
const MAX_ID_CHARS: usize = 255;
/// The API version the lookups made while handling a refund or a dispute pin
/// (`Stripe-Version`): the first with the Invoice Payments API, and a known charge shape.
pub const LOOKUP_API_VERSION: &str = "2025-03-31.basil";
/// The most invoice payments asked for one PaymentIntent (one is usual).
pub const MAX_INVOICE_PAYMENTS: usize = 10;

/// What a Checkout Session form is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionPurpose {
    /// `mode=payment`: one-time and credits plans.
    Payment,
    /// `mode=subscription`: recurring plans, billed every this many months.
    Subscription {
        /// The billing period in months.
        interval_months: u32,
    },
}

/// The form fields of `POST /v1/checkout/sessions`, in order.
///
/// # Errors
/// [`GatewayError::Rejected`] for a recurring plan without a monthly billing period.
pub fn checkout_form(
    request: &CheckoutRequest,
    now: Timestamp,
    notify_url: Option<&str>,
) -> Result<Vec<(String, String)>, GatewayError> {
    let purpose = purpose_of(request)?;
    let order_id = request.order_id.as_str();
    let mut form = Form(Vec::with_capacity(24));
    form.put(
        "mode",
        match purpose {
            SessionPurpose::Payment => "payment",
            SessionPurpose::Subscription { .. } => "subscription",
        },
    );
    line_item(&mut form, request, purpose);
    form.put("success_url", &request.success_url);
    form.put("cancel_url", &request.cancel_url);
    form.put("client_reference_id", order_id);
    if let Some(email) = request
        .customer_email
        .as_deref()
        .filter(|e| !e.trim().is_empty())
    {
        form.put("customer_email", email);
    }
    form.put(
        "expires_at",
        expires_at_s(request.expires_at, now).to_string(),
    );
    metadata(&mut form, request, purpose, notify_url);
    match purpose {
        SessionPurpose::Payment => form.put("payment_intent_data[metadata][orderId]", order_id),
        SessionPurpose::Subscription { .. } => {
            form.put("subscription_data[metadata][orderId]", order_id);
        }
    }
    save_method(&mut form, request, purpose);
    Ok(form.0)
}

/// The buyer's consent to keep the card for automatic top-ups: Stripe attaches the card to a
/// new Customer (`customer_creation=always`) for off-session use
/// (`payment_intent_data[setup_future_usage]=off_session`), and `metadata[saveMethod]` tells the
/// completed session's handler to read the method back. Payment mode only: Stripe refuses both
/// parameters in subscription mode, where it keeps the card for the subscription's own renewals
/// under the subscription's terms, not for top-ups.
fn save_method(form: &mut Form, request: &CheckoutRequest, purpose: SessionPurpose) {
    if !request.save_method || purpose != SessionPurpose::Payment {
        return;
    }
    form.put("customer_creation", "always");
    form.put("payment_intent_data[setup_future_usage]", "off_session");
    form.put("metadata[saveMethod]", "1");
    form.put("payment_intent_data[metadata][saveMethod]", "1");
}

/// Form fields in the order they are put.
struct Form(Vec<(String, String)>);

impl Form {
    fn put(&mut self, key: &str, value: impl Into<String>) {
        self.0.push((key.to_owned(), value.into()));
    }
}

/// `line_items[0]`: the configured Price, or an ad-hoc `price_data` in minor units.
fn line_item(form: &mut Form, request: &CheckoutRequest, purpose: SessionPurpose) {
    let price = request.snapshot.price;
    form.put("line_items[0][quantity]", "1");
    if let Some(price_id) = price_id_for(request, purpose) {
        form.put("line_items[0][price]", price_id);
        return;
    }
    form.put(
        "line_items[0][price_data][currency]",
        currency_code(price.currency()),
    );
    form.put(
        "line_items[0][price_data][unit_amount]",
        price.amount_minor().to_string(),
    );
    form.put(
        "line_items[0][price_data][product_data][name]",
        product_name(request),
    );
    if let SessionPurpose::Subscription { interval_months } = purpose {
        form.put("line_items[0][price_data][recurring][interval]", "month");
        form.put(
            "line_items[0][price_data][recurring][interval_count]",
            interval_months.to_string(),
        );
    }
}

/// `metadata[…]`: our order id (how webhooks find the order), who bought what, and the price
/// and period asked, which the sandbox needs because it cannot look up a Price id.
fn metadata(
    form: &mut Form,
    request: &CheckoutRequest,
    purpose: SessionPurpose,
    notify_url: Option<&str>,
) {
    let price = request.snapshot.price;
    form.put("metadata[orderId]", request.order_id.as_str());
    form.put("metadata[userId]", request.user_id.as_str());
    form.put("metadata[planId]", request.snapshot.plan_id.as_str());
    form.put("metadata[amountMinor]", price.amount_minor().to_string());
    form.put("metadata[currency]", price.currency().code());
    if let SessionPurpose::Subscription { interval_months } = purpose {
        form.put("metadata[intervalMonths]", interval_months.to_string());
    }
    if let Some(url) = notify_url {
        form.put("metadata[notifyUrl]", url);
    }
}

/// `mode=payment` for one-time and credits plans, `mode=subscription` for recurring ones.
fn purpose_of(request: &CheckoutRequest) -> Result<SessionPurpose, GatewayError> {
    match request.snapshot.plan_type {
        PlanType::OneTime | PlanType::Credits => Ok(SessionPurpose::Payment),
        PlanType::Recurring => match request.snapshot.duration {
            Some(Duration::Months(months)) => Ok(SessionPurpose::Subscription {
                interval_months: months.get(),
            }),
            Some(Duration::Lifetime) | None => Err(GatewayError::Rejected(
                "a recurring plan needs a billing period in months".into(),
            )),
        },
    }
}

/// The configured Stripe Price, when it charges what the order costs.
///
/// A one-time or credits order priced differently from the plan (a development price) gets an
/// ad-hoc `price_data` instead, so that Stripe charges exactly the order's amount. Recurring
/// orders always use the Price when there is one: Stripe bills renewals from it.
fn price_id_for(request: &CheckoutRequest, purpose: SessionPurpose) -> Option<&str> {
    let price_id = request.plan.provider_refs().get(ProviderId::CardGateway)?;
    match purpose {
        SessionPurpose::Subscription { .. } => Some(price_id),
        SessionPurpose::Payment => {
            (request.snapshot.price == request.plan.price()).then_some(price_id)
        }
    }
}

fn product_name(request: &CheckoutRequest) -> String {
    let name = request.plan.text_for(&Locale::english()).name.trim();
    if name.is_empty() {
        request.snapshot.plan_id.as_str().to_owned()
    } else {
        name.to_owned()
    }
}

/// Our order's expiry as Stripe's `expires_at`, clamped into the window Stripe accepts.
#[must_use]
pub fn expires_at_s(expires_at: Timestamp, now: Timestamp) -> i64 {
    let now_s = unix_seconds(now);
    let wanted_s = unix_seconds(expires_at);
    wanted_s.clamp(now_s + MIN_EXPIRY_S, now_s + MAX_EXPIRY_S)
}

/// `application/x-www-form-urlencoded` of the fields, brackets percent-encoded as browsers and
/// Stripe's own SDKs do.
///
/// # Errors
/// [`GatewayError::Rejected`] when a value cannot be encoded (never for valid UTF-8).
pub fn encode_form(fields: &[(String, String)]) -> Result<String, GatewayError> {
    serde_urlencoded::to_string(fields).map_err(|e| GatewayError::Rejected(format!("form: {e}")))
}

/// The one form field of `POST /v1/subscriptions/{id}` that schedules the end.
#[must_use]
pub fn cancel_at_period_end_form() -> Vec<(String, String)> {
    vec![("cancel_at_period_end".to_owned(), "true".to_owned())]
}

/// A Stripe id checked before it goes into a URL path.
///
/// # Errors
/// [`GatewayError::Rejected`] for anything but ASCII letters, digits and `_`.
pub fn path_id(id: &str) -> Result<&str, GatewayError> {
    wire::path_id(id, MAX_ID_CHARS, &['_'])
        .ok_or_else(|| GatewayError::Rejected("not a Stripe id".into()))
}

/// Stripe's lower-case currency code.
#[must_use]
pub fn currency_code(currency: Currency) -> String {
    currency.code().to_ascii_lowercase()
}

/// The answer of `GET /v1/balance`, as far as a credential check reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct Balance {
    /// `balance`.
    pub object: String,
    /// Whether the key is a live-mode key.
    pub livemode: bool,
}

/// Stripe's error body: `{"error": {"type": …, "message": …}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A Stripe answer as `T`, or the [`GatewayError`] its status and error body mean.
///
/// # Errors
/// 4xx: [`GatewayError::Rejected`] with Stripe's error type and message; 5xx:
/// [`GatewayError::Unreachable`]; an unreadable 2xx body: [`GatewayError::BadResponse`].
pub fn read<T: serde::de::DeserializeOwned>(reply: HttpReply) -> Result<T, GatewayError> {
    reply.decode(|body: ErrorBody| (body.error.kind, body.error.message))
}

/// An id, or the object it names when Stripe expanded it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Expandable {
    /// The id.
    Id(String),
    /// The expanded object.
    Object {
        /// Its id.
        id: String,
    },
}

impl Expandable {
    /// The id either way.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Expandable::Id(id) | Expandable::Object { id } => id,
        }
    }
}

/// `checkout.session.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// The buyer has not finished.
    Open,
    /// Finished (paid, or an asynchronous payment is still on its way).
    Complete,
    /// Expired or expired by us; no payment.
    Expired,
    /// Anything Stripe adds later.
    #[serde(other)]
    Unknown,
}

/// `checkout.session.payment_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionPaymentStatus {
    /// The funds are available.
    Paid,
    /// Not paid (yet).
    Unpaid,
    /// Nothing to pay (a trial or a 100 % discount).
    NoPaymentRequired,
    /// Anything Stripe adds later.
    #[serde(other)]
    Unknown,
}

/// `checkout.session.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    /// A one-time payment.
    Payment,
    /// The first payment of a subscription.
    Subscription,
    /// Saving a payment method (Tally never creates these).
    Setup,
    /// Anything Stripe adds later.
    #[serde(other)]
    Unknown,
}

/// Where a session's payment is, whatever the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Not settled: wait.
    Open,
    /// Paid.
    Paid,
    /// Ended without payment.
    Failed(&'static str),
}

impl From<(SessionStatus, SessionPaymentStatus)> for Settlement {
    /// Only `complete` + `paid` is a success and only `expired` a failure; everything else,
    /// including `no_payment_required` and statuses we do not know, waits.
    fn from((status, payment): (SessionStatus, SessionPaymentStatus)) -> Self {
        match (status, payment) {
            (SessionStatus::Complete, SessionPaymentStatus::Paid) => Settlement::Paid,
            (SessionStatus::Expired, _) => Settlement::Failed("checkout session expired"),
            (SessionStatus::Open | SessionStatus::Complete | SessionStatus::Unknown, _) => {
                Settlement::Open
            }
        }
    }
}

/// A Checkout Session, as created, fetched or sent in an event.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckoutSession {
    /// `cs_…`.
    pub id: String,
    /// The hosted page, while the session is open.
    #[serde(default)]
    pub url: Option<String>,
    /// Open, complete or expired.
    pub status: SessionStatus,
    /// Paid or not.
    pub payment_status: SessionPaymentStatus,
    /// Payment or subscription.
    pub mode: SessionMode,
    /// Total in minor units, after discounts and taxes.
    #[serde(default)]
    pub amount_total: Option<i64>,
    /// Lower-case currency code.
    #[serde(default)]
    pub currency: Option<String>,
    /// Our order id, as sent.
    #[serde(default)]
    pub client_reference_id: Option<String>,
    /// Metadata, as sent.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The subscription it created.
    #[serde(default)]
    pub subscription: Option<Expandable>,
    /// The PaymentIntent of a `payment`-mode session, once the buyer paid.
    #[serde(default)]
    pub payment_intent: Option<Expandable>,
    /// The invoice a `subscription`-mode session created (its first period's).
    #[serde(default)]
    pub invoice: Option<Expandable>,
}

impl CheckoutSession {
    /// Where our order is: its id from metadata (or `client_reference_id`), and the session id.
    #[must_use]
    pub fn locator(&self) -> OrderLocator {
        let order_id = self
            .metadata
            .get(ORDER_ID_KEY)
            .or(self.client_reference_id.as_ref())
            .and_then(|id| OrderId::new(id.as_str()).ok());
        OrderLocator {
            order_id,
            provider_reference: Some(self.id.clone()),
        }
    }

    /// Whether the buyer consented to keep the card (`metadata[saveMethod]=1`, sent with
    /// `setup_future_usage`).
    #[must_use]
    pub fn saves_method(&self) -> bool {
        self.metadata
            .get(super::off_session::SAVE_METHOD_KEY)
            .is_some_and(|v| v == "1")
    }

    /// What was paid.
    ///
    /// # Errors
    /// A missing amount or currency, or one Tally does not know.
    pub fn paid(&self) -> Result<Money, String> {
        match (self.amount_total, self.currency.as_deref()) {
            (Some(amount), Some(currency)) => money(amount, currency),
            _ => Err("checkout session has no amount_total or currency".into()),
        }
    }

    /// The session's state as [`PaymentStatus`]; `now` stands for the payment time, which a
    /// session does not carry.
    ///
    /// # Errors
    /// [`GatewayError::BadResponse`] when a paid session has no readable amount.
    pub fn payment_status(&self, now: Timestamp) -> Result<PaymentStatus, GatewayError> {
        Ok(match Settlement::from((self.status, self.payment_status)) {
            Settlement::Open => PaymentStatus::Pending,
            Settlement::Failed(reason) => PaymentStatus::Failed {
                reason: reason.into(),
            },
            Settlement::Paid => PaymentStatus::Succeeded {
                amount: self.paid().map_err(GatewayError::BadResponse)?,
                paid_at: now,
            },
        })
    }
}

/// An event's envelope.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// `evt_…`, the deduplication key.
    pub id: String,
    /// `checkout.session.completed`, ….
    #[serde(rename = "type")]
    pub event_type: String,
    /// When it happened, seconds.
    pub created: i64,
    /// The object it is about.
    pub data: EventData,
    /// Whether it happened in live mode (`false`, the test mode, when absent).
    #[serde(default)]
    pub livemode: bool,
    /// The connected account it happened on (Connect endpoints only).
    #[serde(default)]
    pub account: Option<String>,
}

/// `event.data`.
#[derive(Debug, Clone, Deserialize)]
pub struct EventData {
    /// The object as it is after the event.
    pub object: serde_json::Value,
    /// The fields an `*.updated` event changed, as they were before it.
    #[serde(default)]
    pub previous_attributes: Option<serde_json::Value>,
}

/// Parse an event body.
///
/// # Errors
/// [`WebhookError::Malformed`] when it is not a Stripe event.
pub fn parse_event(body: &[u8]) -> Result<Event, WebhookError> {
    serde_json::from_slice(body)
        .map_err(|e| WebhookError::Malformed(format!("not a Stripe event: {e}")))
}

/// `invoice.billing_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BillingReason {
    /// The first invoice of a subscription.
    SubscriptionCreate,
    /// A renewal.
    SubscriptionCycle,
    /// A change (proration).
    SubscriptionUpdate,
    /// Anything else (manual, threshold, upcoming, later additions).
    #[serde(other)]
    Other,
}

/// An invoice, in both the pre-2025 shape (`subscription`, `subscription_details`) and the
/// current one (`parent.subscription_details`).
#[derive(Debug, Clone, Deserialize)]
pub struct Invoice {
    /// `in_…`: the id a refund or dispute of its charge leads back to (Tally's `charge_ref`).
    #[serde(default)]
    pub id: Option<String>,
    /// Why it was created.
    #[serde(default)]
    pub billing_reason: Option<BillingReason>,
    /// Paid so far, minor units.
    #[serde(default)]
    pub amount_paid: i64,
    /// Lower-case currency code.
    pub currency: String,
    #[serde(default)]
    subscription: Option<Expandable>,
    #[serde(default)]
    subscription_details: Option<SubscriptionDetails>,
    #[serde(default)]
    parent: Option<InvoiceParent>,
    #[serde(default)]
    lines: InvoiceLines,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct SubscriptionDetails {
    #[serde(default)]
    subscription: Option<Expandable>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize)]
struct InvoiceParent {
    #[serde(default)]
    subscription_details: Option<SubscriptionDetails>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct InvoiceLines {
    #[serde(default)]
    data: Vec<InvoiceLine>,
}

#[derive(Debug, Clone, Deserialize)]
struct InvoiceLine {
    #[serde(default)]
    period: Option<LinePeriod>,
    /// The line's amount, minor units (negative for the credit of unused time).
    #[serde(default)]
    amount: i64,
    /// Whether it is a proration (API versions before 2025-03-31).
    #[serde(default)]
    proration: Option<bool>,
    /// Where it comes from (API versions since 2025-03-31 say proration there).
    #[serde(default)]
    parent: Option<LineParent>,
    /// The Price it bills (API versions before 2025-03-31), for its interval.
    #[serde(default)]
    price: Option<super::plan_change::Price>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct LineParent {
    #[serde(default)]
    subscription_item_details: Option<LineItemDetails>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct LineItemDetails {
    #[serde(default)]
    proration: bool,
}

impl InvoiceLine {
    fn is_proration(&self) -> bool {
        self.proration.unwrap_or(false)
            || self
                .parent
                .as_ref()
                .and_then(|p| p.subscription_item_details.as_ref())
                .is_some_and(|d| d.proration)
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct LinePeriod {
    start: i64,
    end: i64,
}

impl Invoice {
    fn details(&self) -> Option<&SubscriptionDetails> {
        self.parent
            .as_ref()
            .and_then(|p| p.subscription_details.as_ref())
            .or(self.subscription_details.as_ref())
    }

    /// The subscription it bills.
    #[must_use]
    pub fn subscription_id(&self) -> Option<&str> {
        self.details()
            .and_then(|d| d.subscription.as_ref())
            .or(self.subscription.as_ref())
            .map(Expandable::id)
    }

    /// Our order id, from the subscription's metadata snapshot.
    #[must_use]
    pub fn order_id(&self) -> Option<OrderId> {
        [
            self.parent
                .as_ref()
                .and_then(|p| p.subscription_details.as_ref()),
            self.subscription_details.as_ref(),
        ]
        .into_iter()
        .flatten()
        .filter_map(|d| d.metadata.as_ref()?.get(ORDER_ID_KEY))
        .find_map(|id| OrderId::new(id.as_str()).ok())
    }

    /// A value of the subscription's metadata snapshot.
    fn metadata(&self, key: &str) -> Option<&str> {
        [
            self.parent
                .as_ref()
                .and_then(|p| p.subscription_details.as_ref()),
            self.subscription_details.as_ref(),
        ]
        .into_iter()
        .flatten()
        .find_map(|d| d.metadata.as_ref()?.get(key))
        .map(String::as_str)
    }

    /// The line of a plan change's invoice that bills a whole new period at the new price (a
    /// change of billing interval restarts the period): the first line that is no proration,
    /// with a positive amount and a period.
    ///
    /// # Errors
    /// An unreadable currency.
    pub fn new_period_line(&self) -> Result<Option<NewPeriodLine>, String> {
        let Some(line) = self
            .lines
            .data
            .iter()
            .take(MAX_ITEMS)
            .find(|l| !l.is_proration() && l.amount > 0 && l.period.is_some())
        else {
            return Ok(None);
        };
        let Some(period) = line
            .period
            .and_then(|p| BillingPeriod::new(timestamp(p.start), timestamp(p.end)))
        else {
            return Ok(None);
        };
        Ok(Some(NewPeriodLine {
            period,
            price: money(line.amount, &self.currency)?,
            interval_months: line
                .price
                .as_ref()
                .and_then(|p| p.recurring.as_ref())
                .and_then(super::plan_change::Recurring::months),
        }))
    }

    /// When the plan change this invoice bills was asked (`metadata[planChangeAt]`, which the
    /// gateway set with the change).
    #[must_use]
    pub fn change_requested_at(&self) -> Option<Timestamp> {
        self.metadata(PLAN_CHANGE_AT_KEY)?
            .parse::<i64>()
            .ok()
            .filter(|ms| *ms >= 0)
            .map(Timestamp::from_unix_millis)
    }

    /// The invoice id, as the `charge_ref` of the period it paid.
    #[must_use]
    pub fn charge_ref(&self) -> Option<String> {
        self.id.clone().filter(|id| !id.is_empty())
    }

    /// The billed period: the first line's period (the invoice's own `period_*` fields describe
    /// the previous period for subscription invoices).
    #[must_use]
    pub fn period(&self) -> Option<BillingPeriod> {
        self.lines
            .data
            .iter()
            .take(MAX_ITEMS)
            .filter_map(|line| line.period)
            .find_map(|p| BillingPeriod::new(timestamp(p.start), timestamp(p.end)))
    }
}

/// `subscription.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    /// Renewing.
    Active,
    /// In a trial.
    Trialing,
    /// A renewal failed; Stripe retries.
    PastDue,
    /// Retries exhausted, kept open.
    Unpaid,
    /// Ended.
    Canceled,
    /// The first payment is outstanding.
    Incomplete,
    /// The first payment never came.
    IncompleteExpired,
    /// Paused.
    Paused,
    /// Anything Stripe adds later.
    #[serde(other)]
    Unknown,
}

/// A subscription, as sent in `customer.subscription.*` events.
#[derive(Debug, Clone, Deserialize)]
pub struct Subscription {
    /// `sub_…`.
    pub id: String,
    /// Where it is.
    pub status: SubscriptionStatus,
    /// Ends at the period's end.
    #[serde(default)]
    pub cancel_at_period_end: bool,
    /// Ends at this time, when scheduled.
    #[serde(default)]
    pub cancel_at: Option<i64>,
}

/// A charge, as sent in `charge.refunded` and read by `GET /v1/charges/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Charge {
    /// `ch_…`.
    pub id: String,
    /// Refunded so far, minor units (cumulative).
    pub amount_refunded: i64,
    /// Lower-case currency code.
    pub currency: String,
    /// Metadata, copied from the PaymentIntent (`payment_intent_data[metadata]`).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The invoice the charge paid: API versions before `2025-03-31.basil` only.
    #[serde(default)]
    pub invoice: Option<Expandable>,
    /// The PaymentIntent the charge belongs to.
    #[serde(default)]
    pub payment_intent: Option<Expandable>,
}

/// The most characters of a provider's decline reason kept on the order.
const MAX_FAILURE_CHARS: usize = 200;

/// A PaymentIntent, as far as a failed payment needs it.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentIntent {
    /// `pi_…`.
    pub id: String,
    /// Metadata (`payment_intent_data[metadata]`): our order id.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Why the last attempt failed.
    #[serde(default)]
    pub last_payment_error: Option<PaymentError>,
}

/// `last_payment_error`: what Stripe tells of a failed attempt.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentError {
    /// Words for the buyer ("Your card was declined.").
    #[serde(default)]
    pub message: Option<String>,
    /// A short code (`card_declined`, `expired_card`, `insufficient_funds` …).
    #[serde(default)]
    pub code: Option<String>,
    /// The issuer's reason for a card decline (`generic_decline`, `insufficient_funds` …).
    #[serde(default)]
    pub decline_code: Option<String>,
}

impl PaymentIntent {
    /// Stripe's message for the failure, else its code, else "payment declined"; at most
    /// [`MAX_FAILURE_CHARS`] characters.
    #[must_use]
    pub fn decline_reason(&self) -> String {
        let error = self.last_payment_error.as_ref();
        let words = error
            .and_then(|e| e.message.as_deref())
            .or_else(|| error.and_then(|e| e.decline_code.as_deref()))
            .or_else(|| error.and_then(|e| e.code.as_deref()))
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .unwrap_or("payment declined");
        words.chars().take(MAX_FAILURE_CHARS).collect()
    }
}

/// Which payment a charge took, as far as the charge itself says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeTarget {
    /// Said by the charge.
    Known(RefundedCharge),
    /// A charge without an order id or invoice: the invoice it paid, if any, is found through
    /// this PaymentIntent (`GET /v1/invoice_payments`, API `2025-03-31.basil` and later).
    PaymentIntent(String),
}

impl Charge {
    /// An invoice charge (pre-basil `invoice`) is a subscription charge named by its invoice; a
    /// charge with our order id in its metadata pays that order; any other charge of a
    /// PaymentIntent may pay an invoice that only the Invoice Payments API names.
    #[must_use]
    pub fn target(&self) -> ChargeTarget {
        if let Some(invoice) = self.invoice.as_ref().filter(|i| !i.id().is_empty()) {
            return ChargeTarget::Known(RefundedCharge::SubscriptionCharge {
                provider_subscription_id: None,
                charge_ref: invoice.id().to_owned(),
            });
        }
        let order_id = self
            .metadata
            .get(ORDER_ID_KEY)
            .and_then(|id| OrderId::new(id.as_str()).ok());
        match (order_id, self.payment_intent.as_ref()) {
            (None, Some(intent)) if path_id(intent.id()).is_ok() => {
                ChargeTarget::PaymentIntent(intent.id().to_owned())
            }
            (order_id, _) => ChargeTarget::Known(RefundedCharge::Order(OrderLocator {
                order_id,
                provider_reference: None,
            })),
        }
    }
}

/// `dispute.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisputeStatus {
    /// The merchant lost: the disputed amount stays with the buyer.
    Lost,
    /// The merchant won.
    Won,
    /// Open, under review, an inquiry closed without a chargeback, or anything Stripe adds.
    #[serde(other)]
    Other,
}

/// A dispute, as sent in `charge.dispute.*`.
#[derive(Debug, Clone, Deserialize)]
pub struct Dispute {
    /// `dp_…`.
    pub id: String,
    /// Where it is.
    pub status: DisputeStatus,
    /// The disputed charge.
    pub charge: Expandable,
}

/// An invoice payment (`GET /v1/invoice_payments`): which invoice a PaymentIntent paid.
#[derive(Debug, Clone, Deserialize)]
pub struct InvoicePayment {
    /// The invoice, as an id or expanded (`expand[]=data.invoice`).
    pub invoice: InvoiceOrId,
    /// `paid`, `open` or `canceled`.
    #[serde(default)]
    pub status: Option<String>,
    /// What paid it.
    #[serde(default)]
    pub payment: Option<InvoicePaymentMethod>,
}

/// `invoice_payment.payment`: `{"type": "payment_intent", "payment_intent": "pi_…"}`.
#[derive(Debug, Clone, Deserialize)]
pub struct InvoicePaymentMethod {
    /// The PaymentIntent, for `type: payment_intent`.
    #[serde(default)]
    pub payment_intent: Option<Expandable>,
}

/// An invoice id, or the invoice when expanded.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum InvoiceOrId {
    /// The id.
    Id(String),
    /// The expanded invoice.
    Invoice(Box<Invoice>),
}

/// A list answer: `{"object": "list", "data": […]}`.
#[derive(Debug, Clone, Deserialize)]
pub struct List<T> {
    /// The items.
    #[serde(default = "Vec::new")]
    pub data: Vec<T>,
}

impl List<InvoicePayment> {
    /// The subscription charge the PaymentIntent paid: its paid invoice payment's invoice (the
    /// subscription named when the invoice came expanded); `None` when it paid no invoice.
    #[must_use]
    pub fn subscription_charge(&self) -> Option<RefundedCharge> {
        let payments = &self.data[..self.data.len().min(MAX_INVOICE_PAYMENTS)];
        let payment = payments
            .iter()
            .find(|p| p.status.as_deref() == Some("paid"))
            .or(payments.first())?;
        let (charge_ref, provider_subscription_id) = match &payment.invoice {
            InvoiceOrId::Id(id) => (Some(id.clone()), None),
            InvoiceOrId::Invoice(invoice) => (
                invoice.charge_ref(),
                invoice.subscription_id().map(str::to_owned),
            ),
        };
        Some(RefundedCharge::SubscriptionCharge {
            provider_subscription_id,
            charge_ref: charge_ref.filter(|id| !id.is_empty())?,
        })
    }
}

impl List<InvoicePayment> {
    /// The PaymentIntent of the paid invoice payment.
    #[must_use]
    pub fn paid_payment_intent(&self) -> Option<String> {
        self.data
            .iter()
            .take(MAX_INVOICE_PAYMENTS)
            .filter(|p| p.status.as_deref() == Some("paid"))
            .find_map(|p| p.payment.as_ref()?.payment_intent.as_ref())
            .map(|intent| intent.id().to_owned())
            .filter(|id| path_id(id).is_ok())
    }
}

/// The query of `GET /v1/invoice_payments` for the payments of one invoice.
#[must_use]
pub fn invoice_payments_of_invoice_query(invoice_id: &str) -> Vec<(String, String)> {
    vec![
        ("invoice".to_owned(), invoice_id.to_owned()),
        ("limit".to_owned(), MAX_INVOICE_PAYMENTS.to_string()),
    ]
}

/// The most characters of our refund reason put in the refund's metadata (Stripe takes 500).
const MAX_METADATA_CHARS: usize = 500;

/// The form of `POST /v1/refunds`: the PaymentIntent, this refund's amount in minor units, and
/// our order id and reason in metadata (Stripe's `reason` is an enum of its own).
#[must_use]
pub fn refund_form(request: &RefundRequest, payment_intent: &str) -> Vec<(String, String)> {
    let mut form = Form(Vec::with_capacity(4));
    form.put("payment_intent", payment_intent);
    form.put("amount", request.amount.amount_minor().to_string());
    form.put("metadata[orderId]", request.payment.order_id.as_str());
    let reason: String = request.reason.chars().take(MAX_METADATA_CHARS).collect();
    if !reason.trim().is_empty() {
        form.put("metadata[reason]", reason);
    }
    form.0
}

/// `refund.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    /// Done.
    Succeeded,
    /// On its way.
    Pending,
    /// The buyer must act (some payment methods).
    RequiresAction,
    /// Failed after it was accepted.
    Failed,
    /// Canceled.
    Canceled,
    /// Anything Stripe adds later.
    #[serde(other)]
    Unknown,
}

/// A refund (`POST /v1/refunds`' answer).
#[derive(Debug, Clone, Deserialize)]
pub struct Refund {
    /// `re_…`.
    pub id: String,
    /// Where it is.
    pub status: RefundStatus,
    /// Why it failed, when it did.
    #[serde(default)]
    pub failure_reason: Option<String>,
}

impl Refund {
    /// Where the refund stands, under its `re_…` id; statuses Stripe adds later wait.
    #[must_use]
    pub fn started(&self) -> RefundStarted {
        let state = match self.status {
            RefundStatus::Succeeded => RefundState::Succeeded,
            RefundStatus::Pending | RefundStatus::RequiresAction | RefundStatus::Unknown => {
                RefundState::Pending
            }
            RefundStatus::Failed => RefundState::Failed(
                self.failure_reason
                    .clone()
                    .unwrap_or_else(|| "refund failed".into()),
            ),
            RefundStatus::Canceled => RefundState::Failed("refund canceled".into()),
        };
        RefundStarted {
            provider_refund_id: Some(self.id.clone()).filter(|id| !id.is_empty()),
            state,
        }
    }
}

/// The query of `GET /v1/invoice_payments` for the invoice a PaymentIntent paid, the invoice
/// expanded so that its subscription is known.
#[must_use]
pub fn invoice_payments_query(payment_intent: &str) -> Vec<(String, String)> {
    vec![
        ("payment[type]".to_owned(), "payment_intent".to_owned()),
        (
            "payment[payment_intent]".to_owned(),
            payment_intent.to_owned(),
        ),
        ("expand[]".to_owned(), "data.invoice".to_owned()),
        ("limit".to_owned(), MAX_INVOICE_PAYMENTS.to_string()),
    ]
}

fn object<T: serde::de::DeserializeOwned>(event: &Event) -> Result<T, WebhookError> {
    serde_json::from_value(event.data.object.clone())
        .map_err(|e| WebhookError::Malformed(format!("{}: {e}", event.event_type)))
}

/// What a verified event needs before it becomes Tally events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interpretation {
    /// Ready.
    Events(Vec<PaymentEvent>),
    /// A refund or lost dispute whose payment the event does not name: read it from the API.
    Lookup {
        /// What to read.
        lookup: Lookup,
        /// How much goes back.
        refund: RefundReport,
        /// When.
        occurred_at: Timestamp,
    },
    /// A paid session that saved the buyer's card: `events`, then the saved method, read from
    /// the session's PaymentIntent (`GET /v1/payment_intents/{id}?expand[]=payment_method`).
    SavedMethod {
        /// The payment's events, reported first.
        events: Vec<PaymentEvent>,
        /// The session's PaymentIntent (`pi_…`, checked for a URL path).
        payment_intent: String,
        /// The order, as the payment's event locates it.
        order: OrderLocator,
        /// When.
        occurred_at: Timestamp,
    },
}

/// What a refund or dispute needs read from Stripe to know the payment it takes back from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The disputed charge (`GET /v1/charges/{id}`): its order id, invoice or PaymentIntent.
    Charge(String),
    /// The invoice a PaymentIntent paid (`GET /v1/invoice_payments`).
    PaymentIntent(String),
}

/// What an event means for Tally; empty for the event types Tally does not handle.
///
/// # Errors
/// [`WebhookError::Malformed`] when a handled event's object cannot be read.
pub fn interpret(event: &Event) -> Result<Interpretation, WebhookError> {
    let at = timestamp(event.created);
    let events = match event.event_type.as_str() {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            return session_paid(&object(event)?, at);
        }
        "checkout.session.async_payment_failed" => vec![session_failed(
            &object(event)?,
            "asynchronous payment failed",
            at,
        )],
        "checkout.session.expired" => vec![session_failed(
            &object(event)?,
            "checkout session expired",
            at,
        )],
        "payment_intent.payment_failed" => intent_failed(&object(event)?, at),
        "payment_intent.succeeded" => super::off_session::intent_succeeded(&object(event)?, at)?,
        "invoice.paid" | "invoice.payment_succeeded" => invoice_paid(&object(event)?, at)?,
        "invoice.payment_failed" => {
            let invoice: Invoice = object(event)?;
            invoice
                .subscription_id()
                .map(|id| PaymentEvent::SubscriptionPastDue {
                    provider_subscription_id: id.to_owned(),
                    occurred_at: at,
                })
                .into_iter()
                .collect()
        }
        "customer.subscription.updated" => {
            let mut events = subscription_updated(&object(event)?, at);
            events.extend(super::plan_change::updated(event, at)?);
            events
        }
        "customer.subscription.deleted" => {
            let subscription: Subscription = object(event)?;
            vec![PaymentEvent::SubscriptionCanceled {
                provider_subscription_id: subscription.id,
                occurred_at: at,
            }]
        }
        "charge.refunded" => return charge_refunded(&object(event)?, at),
        "charge.dispute.closed" => return Ok(dispute_closed(&object(event)?, at)),
        _ => Vec::new(),
    };
    Ok(Interpretation::Events(events))
}

/// A completed session pays a one-time or credits order; a subscription's first payment is
/// reported by its `invoice.paid` (which carries the billing period) instead. A session that
/// saved the buyer's card has its method read from its PaymentIntent after the payment.
fn session_paid(session: &CheckoutSession, at: Timestamp) -> Result<Interpretation, WebhookError> {
    if session.mode != SessionMode::Payment || session.payment_status != SessionPaymentStatus::Paid
    {
        return Ok(Interpretation::Events(Vec::new()));
    }
    let amount = session.paid().map_err(WebhookError::Malformed)?;
    let events = vec![PaymentEvent::PaymentSucceeded {
        order: session.locator(),
        amount,
        occurred_at: at,
    }];
    let payment_intent = session
        .payment_intent
        .as_ref()
        .and_then(|intent| path_id(intent.id()).ok())
        .filter(|_| session.saves_method());
    Ok(match payment_intent {
        Some(payment_intent) => Interpretation::SavedMethod {
            events,
            payment_intent: payment_intent.to_owned(),
            order: session.locator(),
            occurred_at: at,
        },
        None => Interpretation::Events(events),
    })
}

fn session_failed(session: &CheckoutSession, reason: &str, at: Timestamp) -> PaymentEvent {
    PaymentEvent::PaymentFailed {
        order: session.locator(),
        reason: reason.to_owned(),
        occurred_at: at,
    }
}

/// A declined card fails our order with Stripe's reason (`last_payment_error.message`, words
/// Stripe writes for the buyer). Only a PaymentIntent carrying our order id
/// (`payment_intent_data[metadata]`, sent for `payment`-mode sessions, and a top-up's own)
/// names an order; a subscription invoice's failed PaymentIntent is told by
/// `invoice.payment_failed` instead. A top-up's PaymentIntent is its order's reference; one that
/// failed only because the issuer wants the buyer present fails nothing: the charge's answer
/// said so, and the buyer finishes the same order in a checkout.
fn intent_failed(intent: &PaymentIntent, at: Timestamp) -> Vec<PaymentEvent> {
    let Some(order_id) = intent
        .metadata
        .get(ORDER_ID_KEY)
        .and_then(|id| OrderId::new(id.as_str()).ok())
    else {
        return Vec::new();
    };
    let top_up = super::off_session::is_top_up(&intent.metadata);
    if top_up && super::off_session::needs_authentication(intent.last_payment_error.as_ref()) {
        return Vec::new();
    }
    vec![PaymentEvent::PaymentFailed {
        order: OrderLocator {
            order_id: Some(order_id),
            provider_reference: top_up.then(|| intent.id.clone()),
        },
        reason: intent.decline_reason(),
        occurred_at: at,
    }]
}

fn invoice_paid(invoice: &Invoice, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    let Some(subscription_id) = invoice.subscription_id() else {
        return Ok(Vec::new());
    };
    let reason = invoice.billing_reason.unwrap_or(BillingReason::Other);
    if reason == BillingReason::SubscriptionUpdate {
        return change_invoiced(invoice, subscription_id, at).map(|e| vec![e]);
    }
    if !matches!(
        reason,
        BillingReason::SubscriptionCreate | BillingReason::SubscriptionCycle
    ) {
        return Ok(Vec::new());
    }
    let period = invoice
        .period()
        .ok_or_else(|| WebhookError::Malformed("invoice has no billing period".into()))?;
    let provider_subscription_id = subscription_id.to_owned();
    let amount = money(invoice.amount_paid, &invoice.currency).map_err(WebhookError::Malformed)?;
    Ok(vec![match reason {
        BillingReason::SubscriptionCreate => PaymentEvent::SubscriptionActivated {
            order: OrderLocator {
                order_id: invoice.order_id(),
                provider_reference: None,
            },
            provider_subscription_id,
            period,
            amount: Some(amount),
            charge_ref: invoice.charge_ref(),
            occurred_at: at,
        },
        _ => PaymentEvent::SubscriptionRenewed {
            provider_subscription_id,
            period,
            amount,
            charge_ref: invoice.charge_ref(),
            occurred_at: at,
        },
    }])
}

/// A plan change's invoice (`billing_reason=subscription_update`): a proration, or the first
/// period of a new billing interval.
fn change_invoiced(
    invoice: &Invoice,
    subscription_id: &str,
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    let paid = money(invoice.amount_paid, &invoice.currency).map_err(WebhookError::Malformed)?;
    Ok(PaymentEvent::SubscriptionChangeInvoiced {
        provider_subscription_id: subscription_id.to_owned(),
        paid,
        new_period: invoice.new_period_line().map_err(WebhookError::Malformed)?,
        change_requested_at: invoice.change_requested_at(),
        charge_ref: invoice.charge_ref(),
        occurred_at: at,
    })
}

/// A scheduled end (`cancel_at_period_end`, or a `cancel_at` time) on a live subscription.
fn subscription_updated(subscription: &Subscription, at: Timestamp) -> Vec<PaymentEvent> {
    let scheduled = subscription.cancel_at_period_end || subscription.cancel_at.is_some();
    let live = matches!(
        subscription.status,
        SubscriptionStatus::Active | SubscriptionStatus::Trialing | SubscriptionStatus::PastDue
    );
    if scheduled && live {
        vec![PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: subscription.id.clone(),
            occurred_at: at,
        }]
    } else {
        Vec::new()
    }
}

/// `charge.refunded`: Stripe's `amount_refunded` is the charge's running total.
fn charge_refunded(charge: &Charge, at: Timestamp) -> Result<Interpretation, WebhookError> {
    let total_refunded =
        money(charge.amount_refunded, &charge.currency).map_err(WebhookError::Malformed)?;
    let refund = RefundReport::Total(total_refunded);
    Ok(match charge.target() {
        ChargeTarget::Known(charge) => Interpretation::Events(vec![PaymentEvent::Refunded {
            charge,
            refund,
            occurred_at: at,
        }]),
        ChargeTarget::PaymentIntent(payment_intent) => Interpretation::Lookup {
            lookup: Lookup::PaymentIntent(payment_intent),
            refund,
            occurred_at: at,
        },
    })
}

/// `charge.dispute.closed` with `status: lost`: the whole charge is taken back. The dispute names
/// only the charge, which is read to find the order or invoice.
fn dispute_closed(dispute: &Dispute, at: Timestamp) -> Interpretation {
    match (dispute.status, path_id(dispute.charge.id())) {
        (DisputeStatus::Lost, Ok(charge)) if !dispute.id.is_empty() => Interpretation::Lookup {
            lookup: Lookup::Charge(charge.to_owned()),
            refund: RefundReport::DisputeLost {
                dispute_id: dispute.id.clone(),
            },
            occurred_at: at,
        },
        _ => Interpretation::Events(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_complete_paid_session_is_paid_and_only_an_expired_one_failed() {
        use SessionPaymentStatus as P;
        use SessionStatus as S;
        assert_eq!(Settlement::from((S::Complete, P::Paid)), Settlement::Paid);
        assert_eq!(Settlement::from((S::Complete, P::Unpaid)), Settlement::Open);
        assert_eq!(
            Settlement::from((S::Complete, P::NoPaymentRequired)),
            Settlement::Open
        );
        assert_eq!(Settlement::from((S::Open, P::Unpaid)), Settlement::Open);
        assert_eq!(Settlement::from((S::Unknown, P::Paid)), Settlement::Open);
        assert!(matches!(
            Settlement::from((S::Expired, P::Unpaid)),
            Settlement::Failed(_)
        ));
    }

    fn failed_intent(object: serde_json::Value) -> Event {
        serde_json::from_value(serde_json::json!({
            "id": "evt_1", "type": "payment_intent.payment_failed", "created": 1_700_000_000,
            "data": {"object": object}
        }))
        .unwrap()
    }

    #[test]
    fn a_declined_payment_intent_fails_its_order_with_stripes_reason() {
        let event = failed_intent(serde_json::json!({
            "id": "pi_1", "object": "payment_intent", "metadata": {"orderId": "ord_1"},
            "last_payment_error": {"type": "card_error", "code": "card_declined",
                "decline_code": "insufficient_funds", "message": "Your card has insufficient funds."}
        }));
        let Interpretation::Events(events) = interpret(&event).unwrap() else {
            panic!("no lookup for a failed payment");
        };
        let [PaymentEvent::PaymentFailed { order, reason, .. }] = events.as_slice() else {
            panic!("{events:?}");
        };
        assert_eq!(order.order_id.as_ref().unwrap().as_str(), "ord_1");
        assert_eq!(reason, "Your card has insufficient funds.");
        // Without a message, the issuer's code; without our order id, nothing to fail.
        let coded = failed_intent(serde_json::json!({
            "id": "pi_2", "metadata": {"orderId": "ord_2"},
            "last_payment_error": {"code": "card_declined", "decline_code": "do_not_honor"}
        }));
        assert!(matches!(
            interpret(&coded).unwrap(),
            Interpretation::Events(e) if matches!(&e[..], [PaymentEvent::PaymentFailed { reason, .. }] if reason == "do_not_honor")
        ));
        let invoice_intent = failed_intent(serde_json::json!({"id": "pi_3", "metadata": {}}));
        assert_eq!(
            interpret(&invoice_intent).unwrap(),
            Interpretation::Events(Vec::new())
        );
    }

    #[test]
    fn unknown_statuses_parse_as_unknown() {
        let status: SessionStatus = serde_json::from_str("\"something_new\"").unwrap();
        assert_eq!(status, SessionStatus::Unknown);
        let status: SubscriptionStatus = serde_json::from_str("\"something_new\"").unwrap();
        assert_eq!(status, SubscriptionStatus::Unknown);
    }

    #[test]
    fn expiry_is_clamped_into_stripes_window() {
        let now = Timestamp::from_unix_millis(1_700_000_000_000);
        assert_eq!(expires_at_s(now, now), 1_700_000_000 + MIN_EXPIRY_S);
        assert_eq!(
            expires_at_s(now.plus_days(3), now),
            1_700_000_000 + MAX_EXPIRY_S
        );
        let two_hours = now.plus_millis(7_200_000);
        assert_eq!(expires_at_s(two_hours, now), 1_700_007_200);
    }

    #[test]
    fn amounts_keep_minor_units_and_currency_codes_change_case() {
        assert_eq!(
            money(999, "usd").unwrap(),
            Money::from_minor(999, Currency::Usd).unwrap()
        );
        assert_eq!(
            money(500, "jpy").unwrap(),
            Money::from_minor(500, Currency::Jpy).unwrap()
        );
        assert_eq!(currency_code(Currency::Jpy), "jpy");
        assert!(money(1, "xts").is_err());
        assert!(money(-1, "usd").is_err());
    }

    #[test]
    fn a_charge_leads_to_its_invoice_its_order_or_its_payment_intent() {
        let charge = |extra: serde_json::Value| -> Charge {
            let mut value = serde_json::json!({
                "id": "ch_1", "amount_refunded": 0, "currency": "usd", "payment_intent": "pi_1"
            });
            for (key, field) in extra.as_object().unwrap() {
                value[key] = field.clone();
            }
            serde_json::from_value(value).unwrap()
        };
        assert_eq!(
            charge(serde_json::json!({"invoice": "in_1"})).target(),
            ChargeTarget::Known(RefundedCharge::SubscriptionCharge {
                provider_subscription_id: None,
                charge_ref: "in_1".into()
            })
        );
        assert_eq!(
            charge(serde_json::json!({"invoice": {"id": "in_2", "object": "invoice"}})).target(),
            ChargeTarget::Known(RefundedCharge::SubscriptionCharge {
                provider_subscription_id: None,
                charge_ref: "in_2".into()
            })
        );
        assert_eq!(
            charge(serde_json::json!({"metadata": {"orderId": "ord_1"}})).target(),
            ChargeTarget::Known(RefundedCharge::Order(OrderLocator {
                order_id: OrderId::new("ord_1").ok(),
                provider_reference: None
            }))
        );
        assert_eq!(
            charge(serde_json::json!({"invoice": null})).target(),
            ChargeTarget::PaymentIntent("pi_1".into())
        );
        assert_eq!(
            charge(serde_json::json!({"payment_intent": null})).target(),
            ChargeTarget::Known(RefundedCharge::Order(OrderLocator {
                order_id: None,
                provider_reference: None
            }))
        );
    }

    #[test]
    fn ids_with_path_characters_are_refused() {
        assert_eq!(path_id("cs_test_a1B2").unwrap(), "cs_test_a1B2");
        assert!(path_id("../v1/customers").is_err());
        assert!(path_id("").is_err());
    }
}
