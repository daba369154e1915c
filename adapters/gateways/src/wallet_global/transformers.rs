//! PayPal's wire format, and nothing else: the bodies of Orders v2, Subscriptions v1, OAuth and
//! `verify-webhook-signature`; webhook envelopes and their resources; amounts as decimal strings
//! in major units; PayPal's statuses and their exhaustive mapping into Tally's; RFC 3339 times.
//! Nothing here performs I/O; `wallet_global.rs` decides what to call and when.

use std::str::FromStr;

use application::ports::{
    CheckoutRequest, GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundReport,
    RefundState, RefundedCharge, WebhookError, WebhookRequest,
};
use domain::{
    BillingPeriod, Currency, Duration, Locale, Money, OrderId, PlanSnapshot, ProviderId, Timestamp,
};
use secrecy::SecretString;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::shared::http::HttpReply;
pub use crate::shared::money::to_decimal as money_to_value;
use crate::shared::money::{DecimalError, decimal_minor};
use crate::shared::time::{parse_rfc3339, unix_seconds};
use crate::shared::wire;
use crate::webhook::header;

/// PayPal's `description` limit for a purchase unit.
const MAX_DESCRIPTION_CHARS: usize = 127;
/// The longest amount string read (PayPal allows 32 characters).
const MAX_VALUE_CHARS: usize = 32;
/// The longest transmission header value accepted (a bound on what is forwarded to PayPal).
const MAX_HEADER_CHARS: usize = 4096;
/// The longest provider id put into a URL path.
const MAX_ID_CHARS: usize = 64;
/// The most characters of one field of a PayPal error kept in a message.
const MAX_ERROR_FIELD_CHARS: usize = 64;
/// How much older than a sale a subscription's last payment may be and still be that sale.
pub const SALE_SLACK_MS: i64 = 3_600_000;
/// The reason sent with a subscription cancellation (PayPal allows 128 characters).
pub const CANCEL_REASON: &str = "Cancelled by the subscriber";
/// The most disputed transactions of one dispute looked up (a bound on work; one is usual).
pub const MAX_DISPUTED_TRANSACTIONS: usize = 5;
/// The dispute outcome in which the buyer keeps the money (PayPal's `dispute_outcome.outcome_code`).
pub const BUYER_FAVOUR: &str = "RESOLVED_BUYER_FAVOUR";

// ---------------------------------------------------------------------------------------------
// Amounts
// ---------------------------------------------------------------------------------------------

/// Why a PayPal amount cannot be read as [`Money`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// The currency is not one Tally prices in.
    #[error("unsupported currency")]
    Currency,
    /// Not a non-negative decimal number.
    #[error("malformed amount")]
    Malformed,
    /// More fraction digits than the currency has.
    #[error("amount has more decimals than its currency")]
    TooPrecise,
    /// Does not fit in 64-bit minor units.
    #[error("amount is too large")]
    TooLarge,
}

/// PayPal's money object: `{"currency_code":"USD","value":"9.99"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amount {
    /// ISO 4217 code.
    pub currency_code: String,
    /// Decimal string in major units.
    pub value: String,
}

impl From<Money> for Amount {
    fn from(money: Money) -> Self {
        Self {
            currency_code: money.currency().code().to_owned(),
            value: money_to_value(money),
        }
    }
}

impl TryFrom<&Amount> for Money {
    type Error = AmountError;

    fn try_from(amount: &Amount) -> Result<Self, Self::Error> {
        value_to_money(&amount.value, &amount.currency_code)
    }
}

/// PayPal's decimal string in major units as exact `Money` (`"10"`, `"9.99"`, `".5"`, `"10.50"`).
///
/// # Errors
/// An unknown currency, a value that is not a non-negative decimal, more significant fraction
/// digits than the currency has, or an amount too large for `i64` minor units.
pub fn value_to_money(value: &str, currency_code: &str) -> Result<Money, AmountError> {
    let currency = Currency::from_str(currency_code).map_err(|_| AmountError::Currency)?;
    if value.len() > MAX_VALUE_CHARS {
        return Err(AmountError::Malformed);
    }
    let (whole, fraction) = match value.split_once('.') {
        Some((_, "")) => return Err(AmountError::Malformed),
        Some(parts) => parts,
        None => (value, ""),
    };
    if whole.is_empty() && fraction.is_empty() {
        return Err(AmountError::Malformed);
    }
    let minor = decimal_minor(whole, fraction, currency.exponent()).map_err(|e| match e {
        DecimalError::Malformed => AmountError::Malformed,
        DecimalError::TooPrecise => AmountError::TooPrecise,
        DecimalError::TooLarge => AmountError::TooLarge,
    })?;
    Money::from_minor(minor, currency).map_err(|_| AmountError::Malformed)
}

/// An RFC 3339 time (`2024-05-01T10:00:00Z`, `2024-05-01T10:00:00.123-07:00`).
#[must_use]
pub fn parse_time(text: &str) -> Option<Timestamp> {
    parse_rfc3339(text.trim())
}

fn time_of(text: Option<&String>) -> Option<Timestamp> {
    text.and_then(|t| parse_time(t))
}

/// `id` when it is safe in a URL path: 1 to 64 ASCII letters, digits, `-` and `_`.
#[must_use]
pub fn path_segment(id: &str) -> Option<&str> {
    wire::path_id(id, MAX_ID_CHARS, &['-', '_'])
}

fn order_id(text: Option<&String>) -> Option<OrderId> {
    text.and_then(|t| OrderId::new(t.as_str()).ok())
}

// ---------------------------------------------------------------------------------------------
// Errors and responses
// ---------------------------------------------------------------------------------------------

/// PayPal's error body: `{"name":…,"message":…,"debug_id":…,"details":[{"issue":…}]}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorBody {
    /// `UNPROCESSABLE_ENTITY`, `RESOURCE_NOT_FOUND`, …
    #[serde(default)]
    pub name: Option<String>,
    /// PayPal's correlation id.
    #[serde(default)]
    pub debug_id: Option<String>,
    /// Specific issues.
    #[serde(default)]
    pub details: Vec<ErrorDetail>,
}

/// One issue of an [`ErrorBody`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ErrorDetail {
    /// `ORDER_ALREADY_CAPTURED`, `SUBSCRIPTION_STATUS_INVALID`, …
    #[serde(default)]
    pub issue: Option<String>,
}

impl ErrorBody {
    /// The error body of a reply (empty when it is not one).
    #[must_use]
    pub fn of(reply: &HttpReply) -> Self {
        serde_json::from_slice(&reply.body).unwrap_or_default()
    }

    /// Whether PayPal named `issue`.
    #[must_use]
    pub fn has_issue(&self, issue: &str) -> bool {
        self.details
            .iter()
            .any(|d| d.issue.as_deref() == Some(issue))
            || self.name.as_deref() == Some(issue)
    }

    /// A short, safe description: status, name, first issue and debug id.
    #[must_use]
    pub fn describe(&self, status: u16) -> String {
        let clean = |s: &Option<String>| -> String {
            s.as_deref()
                .unwrap_or("")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .take(MAX_ERROR_FIELD_CHARS)
                .collect()
        };
        let issue = self
            .details
            .first()
            .map(|d| clean(&d.issue))
            .unwrap_or_default();
        let mut text = format!("HTTP {status} {} {issue}", clean(&self.name));
        if self.debug_id.is_some() {
            text.push_str(&format!(" (debug id {})", clean(&self.debug_id)));
        }
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// `Ok` for a 2xx reply; otherwise PayPal's error in Tally's vocabulary.
///
/// # Errors
/// 4xx: [`GatewayError::Rejected`] with PayPal's error name, issue and debug id (never the
/// body); others: [`GatewayError::Unreachable`].
pub fn checked(reply: HttpReply) -> Result<HttpReply, GatewayError> {
    if (200..=299).contains(&reply.status) {
        Ok(reply)
    } else {
        Err(failure(&reply))
    }
}

/// A non-2xx reply in Tally's vocabulary: 4xx is [`GatewayError::Rejected`] with PayPal's error
/// name, issue and debug id (never the body); anything else [`GatewayError::Unreachable`].
#[must_use]
pub fn failure(reply: &HttpReply) -> GatewayError {
    match reply.status {
        status @ 400..=499 => GatewayError::Rejected(ErrorBody::of(reply).describe(status)),
        status => GatewayError::Unreachable(format!("HTTP {status}")),
    }
}

/// Read a JSON reply as `T`, without echoing any of it in the error.
///
/// # Errors
/// [`GatewayError::BadResponse`] naming `what` and the position of the problem.
pub fn parse<T: DeserializeOwned>(reply: &HttpReply, what: &str) -> Result<T, GatewayError> {
    serde_json::from_slice(&reply.body)
        .map_err(|e| GatewayError::BadResponse(wire::unreadable(what, &e)))
}

/// `POST /v1/oauth2/token` answer.
#[derive(Deserialize)]
pub struct TokenResponse {
    /// The bearer token.
    pub access_token: SecretString,
    /// Lifetime in seconds.
    pub expires_in: u64,
}

/// A HATEOAS link.
#[derive(Debug, Clone, Deserialize)]
pub struct Link {
    /// Target.
    pub href: String,
    /// Relation: `payer-action`, `approve`, `self`, `up`, …
    pub rel: String,
}

fn link<'a>(links: &'a [Link], rel: &str) -> Option<&'a str> {
    links.iter().find(|l| l.rel == rel).map(|l| l.href.as_str())
}

/// A link the buyer may be sent to: http(s) only.
fn web_link<'a>(links: &'a [Link], rel: &str) -> Option<&'a str> {
    link(links, rel).filter(|href| wire::is_web_url(href))
}

// ---------------------------------------------------------------------------------------------
// Orders v2
// ---------------------------------------------------------------------------------------------

/// `POST /v2/checkout/orders` body for a one-time or credits order.
#[derive(Debug, Serialize)]
pub struct CreateOrder<'a> {
    intent: &'static str,
    purchase_units: [OrderUnit<'a>; 1],
    payment_source: PaymentSource<'a>,
}

#[derive(Debug, Serialize)]
struct OrderUnit<'a> {
    reference_id: &'a str,
    custom_id: &'a str,
    invoice_id: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    description: String,
    amount: Amount,
}

#[derive(Debug, Serialize)]
struct PaymentSource<'a> {
    paypal: PaypalSource<'a>,
}

#[derive(Debug, Serialize)]
struct PaypalSource<'a> {
    experience_context: ExperienceContext<'a>,
    /// Present when the buyer consented to keep the account for automatic top-ups.
    #[serde(skip_serializing_if = "Option::is_none")]
    attributes: Option<super::vault::Attributes>,
}

#[derive(Debug, Serialize)]
struct ExperienceContext<'a> {
    return_url: &'a str,
    cancel_url: &'a str,
    user_action: &'static str,
    shipping_preference: &'static str,
}

impl<'a> From<&'a CheckoutRequest> for CreateOrder<'a> {
    fn from(request: &'a CheckoutRequest) -> Self {
        let order_id = request.order_id.as_str();
        let description = wire::printable(
            &request.plan.text_for(&Locale::english()).name,
            MAX_DESCRIPTION_CHARS,
        );
        Self {
            intent: "CAPTURE",
            purchase_units: [OrderUnit {
                reference_id: order_id,
                custom_id: order_id,
                invoice_id: order_id,
                description,
                amount: Amount::from(request.snapshot.price),
            }],
            payment_source: PaymentSource {
                paypal: PaypalSource {
                    experience_context: ExperienceContext {
                        return_url: &request.success_url,
                        cancel_url: &request.cancel_url,
                        user_action: "PAY_NOW",
                        shipping_preference: "NO_SHIPPING",
                    },
                    attributes: request
                        .save_method
                        .then(super::vault::Attributes::save_for_merchant),
                },
            },
        }
    }
}

/// An order (create, get and capture answers; `CHECKOUT.ORDER.APPROVED` resource).
#[derive(Debug, Clone, Deserialize)]
pub struct Order {
    /// PayPal's order id.
    pub id: String,
    /// Where it is.
    pub status: OrderStatus,
    /// Our single purchase unit.
    #[serde(default)]
    pub purchase_units: Vec<PurchaseUnit>,
    /// Links; the buyer approves at `payer-action` (or legacy `approve`).
    #[serde(default)]
    pub links: Vec<Link>,
}

/// A purchase unit as PayPal returns it.
#[derive(Debug, Clone, Deserialize)]
pub struct PurchaseUnit {
    /// Our order id (sent as `reference_id`).
    #[serde(default)]
    pub reference_id: Option<String>,
    /// Our order id (sent as `custom_id`).
    #[serde(default)]
    pub custom_id: Option<String>,
    /// What the buyer approved.
    #[serde(default)]
    pub amount: Option<Amount>,
    /// Captures, once captured.
    #[serde(default)]
    pub payments: Option<Payments>,
}

/// The payments of a purchase unit.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Payments {
    /// Captures (one for `intent: CAPTURE`).
    #[serde(default)]
    pub captures: Vec<Capture>,
}

/// PayPal's order status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    /// Created, not approved.
    Created,
    /// Saved for later.
    Saved,
    /// The buyer approved; the merchant must capture.
    Approved,
    /// Voided (all captures voided or the order lapsed).
    Voided,
    /// Captured (look at the capture for the result).
    Completed,
    /// The buyer must act (approve) first.
    PayerActionRequired,
    /// A status this code does not know.
    #[serde(other)]
    Unknown,
}

/// What Tally does with an order in a given status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStep {
    /// Nothing to do yet: the buyer has not approved.
    Wait,
    /// Approved and not captured: capture it.
    Capture,
    /// Captured: the capture has the result.
    ReadCapture,
    /// Voided: failed for good.
    Voided,
}

impl OrderStatus {
    /// The step for this status (exhaustive; unknown statuses wait).
    #[must_use]
    pub fn step(self) -> OrderStep {
        match self {
            OrderStatus::Created
            | OrderStatus::Saved
            | OrderStatus::PayerActionRequired
            | OrderStatus::Unknown => OrderStep::Wait,
            OrderStatus::Approved => OrderStep::Capture,
            OrderStatus::Completed => OrderStep::ReadCapture,
            OrderStatus::Voided => OrderStep::Voided,
        }
    }
}

impl Order {
    /// Where the buyer approves the order.
    #[must_use]
    pub fn approve_link(&self) -> Option<&str> {
        web_link(&self.links, "payer-action").or_else(|| web_link(&self.links, "approve"))
    }

    /// The order's (first) capture.
    #[must_use]
    pub fn capture(&self) -> Option<&Capture> {
        self.purchase_units
            .iter()
            .filter_map(|u| u.payments.as_ref())
            .flat_map(|p| &p.captures)
            .next()
    }

    /// Our order id, from `custom_id` or `reference_id`.
    #[must_use]
    pub fn our_order_id(&self) -> Option<OrderId> {
        let unit = self.purchase_units.first()?;
        order_id(unit.custom_id.as_ref()).or_else(|| order_id(unit.reference_id.as_ref()))
    }

    /// What capturing came to, for a captured order (`Pending` when no capture is listed).
    ///
    /// # Errors
    /// An unreadable capture amount.
    pub fn capture_outcome(&self, now: Timestamp) -> Result<CaptureOutcome, GatewayError> {
        self.capture()
            .map_or(Ok(CaptureOutcome::Pending), |c| c.outcome(now))
    }
}

/// A capture (inside an order, `GET /v2/payments/captures/{id}`, `PAYMENT.CAPTURE.*` resource).
#[derive(Debug, Clone, Deserialize)]
pub struct Capture {
    /// PayPal's capture id.
    pub id: String,
    /// Where it is.
    pub status: CaptureStatus,
    /// What was captured.
    #[serde(default)]
    pub amount: Option<Amount>,
    /// Our order id.
    #[serde(default)]
    pub custom_id: Option<String>,
    /// When.
    #[serde(default)]
    pub create_time: Option<String>,
    /// The order it belongs to.
    #[serde(default)]
    pub supplementary_data: Option<SupplementaryData>,
}

/// `supplementary_data` of a capture.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SupplementaryData {
    /// Related ids.
    #[serde(default)]
    pub related_ids: Option<RelatedIds>,
}

/// `supplementary_data.related_ids` of a capture.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RelatedIds {
    /// PayPal's order id.
    #[serde(default)]
    pub order_id: Option<String>,
}

/// PayPal's capture status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CaptureStatus {
    /// Money moved.
    Completed,
    /// Refused.
    Declined,
    /// Money moved, part of it refunded since.
    PartiallyRefunded,
    /// Held (eCheck, review): `PAYMENT.CAPTURE.COMPLETED` follows.
    Pending,
    /// Money moved, all of it refunded since.
    Refunded,
    /// Failed.
    Failed,
    /// A status this code does not know.
    #[serde(other)]
    Unknown,
}

/// What capturing an order came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureOutcome {
    /// Money moved.
    Completed {
        /// PayPal's capture id.
        capture_id: String,
        /// What was captured.
        amount: Money,
        /// When.
        captured_at: Timestamp,
    },
    /// Not settled yet (held for review, or another capture of the same order is in flight);
    /// `PAYMENT.CAPTURE.COMPLETED` tells when it is.
    Pending,
    /// Refused.
    Declined {
        /// Why, in words.
        reason: String,
    },
}

impl From<CaptureOutcome> for PaymentStatus {
    fn from(outcome: CaptureOutcome) -> Self {
        match outcome {
            CaptureOutcome::Completed {
                amount,
                captured_at,
                ..
            } => PaymentStatus::Succeeded {
                amount,
                paid_at: captured_at,
            },
            CaptureOutcome::Pending => PaymentStatus::Pending,
            CaptureOutcome::Declined { reason } => PaymentStatus::Failed { reason },
        }
    }
}

impl Capture {
    /// The outcome this capture stands for (exhaustive; unknown statuses are pending).
    ///
    /// # Errors
    /// A settled capture without a readable amount.
    pub fn outcome(&self, now: Timestamp) -> Result<CaptureOutcome, GatewayError> {
        let declined = |what: &str| {
            Ok(CaptureOutcome::Declined {
                reason: format!("capture {what}"),
            })
        };
        match self.status {
            CaptureStatus::Completed
            | CaptureStatus::PartiallyRefunded
            | CaptureStatus::Refunded => Ok(CaptureOutcome::Completed {
                capture_id: self.id.clone(),
                amount: self
                    .money()
                    .map_err(|e| GatewayError::BadResponse(format!("capture amount: {e}")))?,
                captured_at: time_of(self.create_time.as_ref()).unwrap_or(now),
            }),
            CaptureStatus::Declined => declined("declined"),
            CaptureStatus::Failed => declined("failed"),
            CaptureStatus::Pending | CaptureStatus::Unknown => Ok(CaptureOutcome::Pending),
        }
    }

    /// The captured amount.
    ///
    /// # Errors
    /// Missing or unreadable.
    pub fn money(&self) -> Result<Money, AmountError> {
        self.amount
            .as_ref()
            .ok_or(AmountError::Malformed)
            .and_then(Money::try_from)
    }

    /// Our order (from `custom_id`) and PayPal's order id.
    #[must_use]
    pub fn locator(&self) -> OrderLocator {
        OrderLocator {
            order_id: order_id(self.custom_id.as_ref()),
            provider_reference: self
                .supplementary_data
                .as_ref()
                .and_then(|s| s.related_ids.as_ref())
                .and_then(|r| r.order_id.clone()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Subscriptions v1
// ---------------------------------------------------------------------------------------------

/// `POST /v1/billing/subscriptions` body.
#[derive(Debug, Serialize)]
pub struct CreateSubscription<'a> {
    plan_id: &'a str,
    custom_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    subscriber: Option<Subscriber<'a>>,
    application_context: ApplicationContext<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanOverride>,
}

#[derive(Debug, Serialize)]
struct Subscriber<'a> {
    email_address: &'a str,
}

/// PayPal's `plan` override (`plan_override`): the regular cycle's price. Sent only to the local
/// sandbox, which has no plan catalog; it also reads `frequency` there (a sandbox extension, as
/// PayPal's override cannot change the billing frequency).
#[derive(Debug, Serialize)]
pub(super) struct PlanOverride {
    billing_cycles: [CycleOverride; 1],
}

#[derive(Debug, Serialize)]
struct CycleOverride {
    sequence: u32,
    total_cycles: u32,
    pricing_scheme: PricingScheme,
    frequency: Frequency,
}

#[derive(Debug, Serialize)]
struct PricingScheme {
    fixed_price: Amount,
}

#[derive(Debug, Serialize)]
struct Frequency {
    interval_unit: &'static str,
    interval_count: u32,
}

impl PlanOverride {
    /// The price and billing interval of `snapshot`, for the local sandbox only.
    pub(super) fn for_sandbox(snapshot: &PlanSnapshot) -> Self {
        let months = match snapshot.duration {
            Some(Duration::Months(months)) => months.get(),
            Some(Duration::Lifetime) | None => 1,
        };
        Self {
            billing_cycles: [CycleOverride {
                sequence: 1,
                total_cycles: 0,
                pricing_scheme: PricingScheme {
                    fixed_price: Amount::from(snapshot.price),
                },
                frequency: Frequency {
                    interval_unit: "MONTH",
                    interval_count: months,
                },
            }],
        }
    }
}

impl CreateSubscription<'_> {
    /// Add the plan's price and billing interval for the local sandbox (see `PlanOverride`).
    #[must_use]
    pub fn priced_for_sandbox(mut self, request: &CheckoutRequest) -> Self {
        self.plan = Some(PlanOverride::for_sandbox(&request.snapshot));
        self
    }
}

#[derive(Debug, Serialize)]
struct ApplicationContext<'a> {
    user_action: &'static str,
    shipping_preference: &'static str,
    return_url: &'a str,
    cancel_url: &'a str,
}

impl<'a> TryFrom<&'a CheckoutRequest> for CreateSubscription<'a> {
    type Error = GatewayError;

    fn try_from(request: &'a CheckoutRequest) -> Result<Self, Self::Error> {
        let plan_id = request
            .plan
            .provider_refs()
            .get(ProviderId::WalletGlobal)
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| GatewayError::Rejected("the plan has no walletGlobalPlanId".into()))?;
        let email = request
            .customer_email
            .as_deref()
            .filter(|e| e.len() <= 254 && e.contains('@'));
        Ok(Self {
            plan_id,
            custom_id: request.order_id.as_str(),
            subscriber: email.map(|email_address| Subscriber { email_address }),
            application_context: ApplicationContext {
                user_action: "SUBSCRIBE_NOW",
                shipping_preference: "NO_SHIPPING",
                return_url: &request.success_url,
                cancel_url: &request.cancel_url,
            },
            plan: None,
        })
    }
}

/// `POST /v1/billing/subscriptions/{id}/cancel` body.
#[derive(Debug, Serialize)]
pub struct CancelSubscription {
    /// Why (shown to the subscriber).
    pub reason: &'static str,
}

/// A subscription (create and get answers; `BILLING.SUBSCRIPTION.*` resource).
#[derive(Debug, Clone, Deserialize)]
pub struct Subscription {
    /// PayPal's subscription id (`I-…`).
    pub id: String,
    /// Where it is.
    pub status: SubscriptionStatus,
    /// Our order id.
    #[serde(default)]
    pub custom_id: Option<String>,
    /// Billing state.
    #[serde(default)]
    pub billing_info: Option<BillingInfo>,
    /// Links; the buyer approves at `approve`.
    #[serde(default)]
    pub links: Vec<Link>,
    /// The PayPal plan it is on (a revision the subscriber approved changes it).
    #[serde(default)]
    pub plan_id: Option<String>,
    /// The plan's details, when asked for with `?fields=plan` (with the subscription's
    /// overrides applied).
    #[serde(default)]
    pub plan: Option<super::revise::PlanDetails>,
}

/// PayPal's subscription status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubscriptionStatus {
    /// Created, waiting for the buyer.
    ApprovalPending,
    /// Approved, not active yet.
    Approved,
    /// Billing.
    Active,
    /// Suspended (payment failures past the threshold, or by the merchant).
    Suspended,
    /// Cancelled.
    Cancelled,
    /// Ran its cycles out.
    Expired,
    /// A status this code does not know.
    #[serde(other)]
    Unknown,
}

/// `billing_info` of a subscription.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct BillingInfo {
    /// The last successful payment.
    #[serde(default)]
    pub last_payment: Option<LastPayment>,
    /// When the next payment is due: the end of the paid period.
    #[serde(default)]
    pub next_billing_time: Option<String>,
    /// Cycles done per tenure (trial, regular).
    #[serde(default)]
    pub cycle_executions: Vec<CycleExecution>,
}

/// `billing_info.last_payment`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LastPayment {
    /// How much.
    #[serde(default)]
    pub amount: Option<Amount>,
    /// When.
    #[serde(default)]
    pub time: Option<String>,
}

/// One entry of `billing_info.cycle_executions`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CycleExecution {
    /// Billing cycles completed in this tenure.
    #[serde(default)]
    pub cycles_completed: u32,
}

impl Subscription {
    /// Where the buyer approves the subscription.
    #[must_use]
    pub fn approve_link(&self) -> Option<&str> {
        web_link(&self.links, "approve")
    }

    /// Our order (from `custom_id`) and the subscription id.
    #[must_use]
    pub fn locator(&self) -> OrderLocator {
        OrderLocator {
            order_id: order_id(self.custom_id.as_ref()),
            provider_reference: Some(self.id.clone()),
        }
    }

    /// The period the last payment paid for: `[last_payment.time, next_billing_time)`; `None`
    /// before the first payment (PayPal activates before it charges).
    #[must_use]
    pub fn paid_period(&self) -> Option<BillingPeriod> {
        let billing = self.billing_info.as_ref()?;
        let start = time_of(billing.last_payment.as_ref()?.time.as_ref())?;
        let end = time_of(billing.next_billing_time.as_ref())?;
        BillingPeriod::new(start, end)
    }

    /// The last payment, with its time.
    #[must_use]
    pub fn last_payment(&self) -> Option<(Money, Timestamp)> {
        let payment = self.billing_info.as_ref()?.last_payment.as_ref()?;
        let amount = Money::try_from(payment.amount.as_ref()?).ok()?;
        Some((amount, time_of(payment.time.as_ref())?))
    }

    /// Whether the subscription already shows a payment made at `sold_at`: its last payment is
    /// no more than [`SALE_SLACK_MS`] older. PayPal's subscription view may lag behind the sale
    /// webhook; read too early, it would describe the previous period.
    #[must_use]
    pub fn shows_sale_at(&self, sold_at: Timestamp) -> bool {
        self.last_payment()
            .is_some_and(|(_, paid_at)| paid_at.plus_millis(SALE_SLACK_MS) >= sold_at)
    }

    /// Whether at most one billing cycle has been paid: the sale just received is the first.
    #[must_use]
    pub fn is_first_payment(&self) -> bool {
        let cycles: u64 = self
            .billing_info
            .as_ref()
            .map(|b| {
                b.cycle_executions
                    .iter()
                    .map(|c| u64::from(c.cycles_completed))
                    .sum()
            })
            .unwrap_or(0);
        cycles <= 1
    }

    /// `SubscriptionActivated` for the paid period, once the first payment is in; `charge_ref`
    /// is the first sale's id when the event names it (the sale does, `ACTIVATED` does not).
    #[must_use]
    ///
    /// `paid` is what the first payment charged: the sale's amount when a sale activates, else
    /// the subscription's `billing_info.last_payment.amount` (`BILLING.SUBSCRIPTION.ACTIVATED`).
    /// Either way the activation is checked against the order's price, so a first payment of
    /// another amount or currency starts nothing (issue 14 finding 1).
    pub fn activation(
        &self,
        charge_ref: Option<String>,
        paid: Option<Money>,
        occurred_at: Timestamp,
    ) -> Option<PaymentEvent> {
        Some(PaymentEvent::SubscriptionActivated {
            order: self.locator(),
            provider_subscription_id: self.id.clone(),
            period: self.paid_period()?,
            amount: paid.or_else(|| self.last_payment().map(|(amount, _)| amount)),
            charge_ref,
            occurred_at,
        })
    }

    /// The subscription's first payment as a payment status (exhaustive; unknown = pending).
    #[must_use]
    pub fn payment_status(&self) -> PaymentStatus {
        let paid = self
            .last_payment()
            .map(|(amount, paid_at)| PaymentStatus::Succeeded { amount, paid_at });
        match self.status {
            SubscriptionStatus::ApprovalPending
            | SubscriptionStatus::Approved
            | SubscriptionStatus::Unknown => PaymentStatus::Pending,
            SubscriptionStatus::Active | SubscriptionStatus::Suspended => {
                paid.unwrap_or(PaymentStatus::Pending)
            }
            SubscriptionStatus::Cancelled | SubscriptionStatus::Expired => {
                paid.unwrap_or_else(|| PaymentStatus::Failed {
                    reason: "subscription ended before its first payment".into(),
                })
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Webhooks
// ---------------------------------------------------------------------------------------------

/// The `PAYPAL-*` transmission headers of a webhook call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transmission {
    /// `PAYPAL-AUTH-ALGO`.
    pub auth_algo: String,
    /// `PAYPAL-CERT-URL`.
    pub cert_url: String,
    /// `PAYPAL-TRANSMISSION-ID`.
    pub transmission_id: String,
    /// `PAYPAL-TRANSMISSION-SIG`.
    pub transmission_sig: String,
    /// `PAYPAL-TRANSMISSION-TIME`.
    pub transmission_time: String,
    /// The transmission time, seconds since the epoch.
    #[serde(skip)]
    pub time_s: i64,
}

impl Transmission {
    /// Extract the five headers (the pipeline's extraction step).
    ///
    /// # Errors
    /// [`WebhookError::MissingSignature`] when one is absent, empty, too long, or the time is
    /// not RFC 3339.
    pub fn extract(request: &WebhookRequest) -> Result<Self, WebhookError> {
        let get = |name: &str| -> Result<String, WebhookError> {
            let value = header(request, name)?.trim();
            if value.is_empty() || value.len() > MAX_HEADER_CHARS {
                return Err(WebhookError::MissingSignature);
            }
            Ok(value.to_owned())
        };
        let transmission_time = get("paypal-transmission-time")?;
        let time_s =
            unix_seconds(parse_time(&transmission_time).ok_or(WebhookError::MissingSignature)?);
        Ok(Self {
            auth_algo: get("paypal-auth-algo")?,
            cert_url: get("paypal-cert-url")?,
            transmission_id: get("paypal-transmission-id")?,
            transmission_sig: get("paypal-transmission-sig")?,
            transmission_time,
            time_s,
        })
    }

    /// The `verify-webhook-signature` body. The event is spliced in byte for byte, not
    /// re-serialized: PayPal checks the signature against the exact bytes it sent.
    ///
    /// # Errors
    /// [`WebhookError::Malformed`] when the body is not UTF-8.
    pub fn verification_body(
        &self,
        webhook_id: &str,
        raw_event: &[u8],
    ) -> Result<String, WebhookError> {
        #[derive(Serialize)]
        struct Head<'a> {
            #[serde(flatten)]
            transmission: &'a Transmission,
            webhook_id: &'a str,
        }
        let event = std::str::from_utf8(raw_event)
            .map_err(|_| WebhookError::Malformed("body is not UTF-8".into()))?;
        let mut body = serde_json::to_string(&Head {
            transmission: self,
            webhook_id,
        })
        .map_err(|_| WebhookError::Malformed("verification request".into()))?;
        body.pop();
        body.push_str(",\"webhook_event\":");
        body.push_str(event.trim());
        body.push('}');
        Ok(body)
    }
}

/// `verify-webhook-signature` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct VerificationResponse {
    /// `SUCCESS` or `FAILURE`.
    pub verification_status: String,
}

impl VerificationResponse {
    /// Whether PayPal vouches for the webhook.
    #[must_use]
    pub fn verified(&self) -> bool {
        self.verification_status == "SUCCESS"
    }
}

/// A webhook event envelope.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope {
    /// `WH-…`: the deduplication key.
    pub id: String,
    /// `PAYMENT.CAPTURE.COMPLETED`, …
    pub event_type: String,
    /// When PayPal created the event.
    #[serde(default)]
    pub create_time: Option<String>,
    /// The resource (order, capture, refund, subscription, sale).
    #[serde(default)]
    pub resource: serde_json::Value,
}

/// The merchant ids a webhook resource names as the party paid: an order's
/// `purchase_units[].payee.merchant_id`, a capture's `payee.merchant_id`, a dispute's
/// `disputed_transactions[].seller.merchant_id`. Subscriptions, sales and refunds name none.
#[must_use]
pub fn named_merchants(resource: &serde_json::Value) -> Vec<&str> {
    fn merchant_of(party: Option<&serde_json::Value>) -> Option<&str> {
        party?.get("merchant_id")?.as_str()
    }
    let list = |key: &str| {
        resource
            .get(key)
            .and_then(serde_json::Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let mut named: Vec<&str> = merchant_of(resource.get("payee")).into_iter().collect();
    named.extend(
        list("purchase_units")
            .iter()
            .filter_map(|u| merchant_of(u.get("payee"))),
    );
    named.extend(
        list("disputed_transactions")
            .iter()
            .filter_map(|t| merchant_of(t.get("seller"))),
    );
    named
}

/// A sale of a subscription (`PAYMENT.SALE.COMPLETED`, `GET /v1/payments/sale/{id}`), in the v1
/// payments format.
#[derive(Debug, Clone, Deserialize)]
pub struct Sale {
    /// The sale (transaction) id: what refunds (`sale_id`) and disputes
    /// (`seller_transaction_id`) of this payment name, Tally's `charge_ref`.
    #[serde(default)]
    pub id: Option<String>,
    /// The subscription id.
    #[serde(default)]
    pub billing_agreement_id: Option<String>,
    /// `{"total":"9.99","currency":"USD"}`.
    pub amount: SaleAmount,
    /// When the sale was made.
    #[serde(default)]
    pub create_time: Option<String>,
}

/// v1 money.
#[derive(Debug, Clone, Deserialize)]
pub struct SaleAmount {
    /// Decimal string in major units.
    pub total: String,
    /// ISO 4217 code.
    pub currency: String,
}

/// A refund (`PAYMENT.CAPTURE.REFUNDED`).
#[derive(Debug, Clone, Deserialize)]
pub struct Refund {
    /// This refund.
    #[serde(default)]
    pub amount: Option<Amount>,
    /// Our order id, when PayPal copies it (it often does not).
    #[serde(default)]
    pub custom_id: Option<String>,
    /// Breakdown, with the cumulative total.
    #[serde(default)]
    pub seller_payable_breakdown: Option<PayableBreakdown>,
    /// `up` points at the refunded capture.
    #[serde(default)]
    pub links: Vec<Link>,
}

/// `seller_payable_breakdown` of a refund.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PayableBreakdown {
    /// Refunded from the capture so far, this refund included.
    #[serde(default)]
    pub total_refunded_amount: Option<Amount>,
}

impl Refund {
    /// The total refunded so far (PayPal's `total_refunded_amount`; this refund's amount when
    /// PayPal leaves it out, which is right for a first refund).
    ///
    /// # Errors
    /// Neither amount is readable.
    pub fn total_refunded(&self) -> Result<Money, AmountError> {
        let total = self
            .seller_payable_breakdown
            .as_ref()
            .and_then(|b| b.total_refunded_amount.as_ref());
        total
            .or(self.amount.as_ref())
            .ok_or(AmountError::Malformed)
            .and_then(Money::try_from)
    }

    /// The refunded capture's id, from the `up` link's last path segment.
    #[must_use]
    pub fn capture_id(&self) -> Option<String> {
        let href = link(&self.links, "up")?;
        let last = href.trim_end_matches('/').rsplit('/').next()?;
        path_segment(last).map(str::to_owned)
    }
}

/// `POST /v2/payments/captures/{capture_id}/refund` body (Payments v2 `refund_request`): the
/// amount (a partial refund names it; we always do), our order id, and the reason shown to the
/// buyer.
#[derive(Debug, Clone, Serialize)]
pub struct RefundCapture {
    amount: Amount,
    custom_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    note_to_payer: Option<String>,
}

/// PayPal's `note_to_payer` limit.
const MAX_NOTE_CHARS: usize = 255;

impl RefundCapture {
    /// The body refunding `amount` of our order `order_id` for `reason` (left out when blank).
    #[must_use]
    pub fn new(amount: Money, order_id: &OrderId, reason: &str) -> Self {
        let note = wire::clip(reason.trim(), MAX_NOTE_CHARS);
        Self {
            amount: Amount::from(amount),
            custom_id: order_id.as_str().to_owned(),
            note_to_payer: (!note.is_empty()).then_some(note),
        }
    }
}

/// The answer to a capture refund (Payments v2 `refund`).
#[derive(Debug, Clone, Deserialize)]
pub struct CaptureRefund {
    /// PayPal's refund id (the `resource.id` of its `PAYMENT.CAPTURE.REFUNDED` event).
    pub id: String,
    /// Where it stands.
    pub status: CaptureRefundStatus,
    /// Why it is pending or failed (`ECHECK`).
    #[serde(default)]
    pub status_details: Option<RefundStatusDetails>,
}

/// `status_details` of a refund.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RefundStatusDetails {
    /// `ECHECK`, or a reason this code does not know.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Payments v2 `refund_status.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CaptureRefundStatus {
    /// Refunded.
    Completed,
    /// Under way (an eCheck that has not cleared).
    Pending,
    /// Cancelled.
    Cancelled,
    /// Failed.
    Failed,
    /// A status this code does not know: pending.
    #[serde(other)]
    Unknown,
}

impl CaptureRefund {
    /// Tally's view of it (exhaustive; unknown statuses are pending).
    #[must_use]
    pub fn state(&self) -> RefundState {
        let why = || {
            let reason = self
                .status_details
                .as_ref()
                .and_then(|d| d.reason.as_deref())
                .unwrap_or("no reason given");
            wire::clip(reason, MAX_ERROR_FIELD_CHARS)
        };
        match self.status {
            CaptureRefundStatus::Completed => RefundState::Succeeded,
            CaptureRefundStatus::Pending | CaptureRefundStatus::Unknown => RefundState::Pending,
            CaptureRefundStatus::Cancelled => {
                RefundState::Failed(format!("refund cancelled ({})", why()))
            }
            CaptureRefundStatus::Failed => {
                RefundState::Failed(format!("refund failed ({})", why()))
            }
        }
    }
}

/// A refund or reversal of a sale (`PAYMENT.SALE.REFUNDED`, `PAYMENT.SALE.REVERSED`,
/// `GET /v1/payments/refund/{id}`), in the v1 payments format. It carries this refund's own
/// amount (PayPal's samples write it negative) and no running total.
#[derive(Debug, Clone, Deserialize)]
pub struct SaleRefund {
    /// The refund's id.
    pub id: String,
    /// This refund, `{"total":"-0.01","currency":"USD"}`.
    pub amount: SaleAmount,
    /// The refunded sale (absent from PayPal's reversal sample).
    #[serde(default)]
    pub sale_id: Option<String>,
    /// The subscription, when PayPal names it.
    #[serde(default)]
    pub billing_agreement_id: Option<String>,
}

impl SaleRefund {
    /// This refund's amount, whatever its sign.
    ///
    /// # Errors
    /// An unreadable amount or currency.
    pub fn money(&self) -> Result<Money, AmountError> {
        let total = self.amount.total.trim();
        let magnitude = total.strip_prefix('-').unwrap_or(total);
        value_to_money(magnitude, &self.amount.currency)
    }

    /// The refunded sale, when named.
    #[must_use]
    pub fn sale(&self) -> Option<String> {
        self.sale_id
            .as_deref()
            .and_then(path_segment)
            .map(str::to_owned)
    }

    /// The refunded sale as the subscription charge it was.
    #[must_use]
    pub fn charge(&self, sale_id: String) -> RefundedCharge {
        RefundedCharge::SubscriptionCharge {
            provider_subscription_id: self
                .billing_agreement_id
                .as_deref()
                .and_then(path_segment)
                .map(str::to_owned),
            charge_ref: sale_id,
        }
    }
}

impl Sale {
    /// A subscription's sale as the subscription charge it is; `None` for a sale outside any
    /// subscription or without an id.
    #[must_use]
    pub fn subscription_charge(&self) -> Option<RefundedCharge> {
        let subscription = self
            .billing_agreement_id
            .as_deref()
            .and_then(path_segment)?;
        let id = self.id.as_deref().and_then(path_segment)?;
        Some(RefundedCharge::SubscriptionCharge {
            provider_subscription_id: Some(subscription.to_owned()),
            charge_ref: id.to_owned(),
        })
    }
}

/// A dispute (`CUSTOMER.DISPUTE.*` resource), reduced to what a lost one needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Dispute {
    /// `PP-D-…`.
    pub dispute_id: String,
    /// The outcome, once resolved.
    #[serde(default)]
    pub dispute_outcome: Option<DisputeOutcome>,
    /// The disputed transactions.
    #[serde(default)]
    pub disputed_transactions: Vec<DisputedTransaction>,
}

/// `dispute_outcome`.
#[derive(Debug, Clone, Deserialize)]
pub struct DisputeOutcome {
    /// `RESOLVED_BUYER_FAVOUR`, `RESOLVED_SELLER_FAVOUR`, `RESOLVED_WITH_PAYOUT`, …
    #[serde(default)]
    pub outcome_code: Option<String>,
}

/// One of `disputed_transactions`.
#[derive(Debug, Clone, Deserialize)]
pub struct DisputedTransaction {
    /// The merchant's transaction id: an order's capture id or a subscription's sale id.
    #[serde(default)]
    pub seller_transaction_id: Option<String>,
}

/// A subscription resource reduced to its id (lifecycle events).
#[derive(Debug, Clone, Deserialize)]
struct SubscriptionRef {
    id: String,
}

/// What a verified event needs before it becomes Tally events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interpretation {
    /// Ready.
    Events(Vec<PaymentEvent>),
    /// A refund whose order is known only through its capture.
    RefundOfCapture {
        /// The refunded capture.
        capture_id: String,
        /// The cumulative refund.
        total_refunded: Money,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription payment whose period is read from the subscription.
    SubscriptionSale {
        /// The subscription.
        subscription_id: String,
        /// The sale's id, the period's `charge_ref`.
        sale_id: Option<String>,
        /// What was paid.
        amount: Money,
        /// When the sale was made (`create_time`), when readable.
        sold_at: Option<Timestamp>,
        /// When.
        occurred_at: Timestamp,
    },
    /// A refund or reversal of a sale that does not name the sale: read the refund.
    SaleRefundWithoutSale {
        /// The refund's id.
        refund_id: String,
        /// This refund's amount.
        amount: Money,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription was updated (`BILLING.SUBSCRIPTION.UPDATED`): read it, with its plan, to
    /// learn which plan it bills now (an approved revision).
    SubscriptionUpdated {
        /// The subscription.
        subscription_id: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A PayPal account saved in the vault on a purchase (`VAULT.PAYMENT-TOKEN.CREATED`): the
    /// purchase's order is read back, its capture reported before the method.
    VaultTokenCreated {
        /// The account and the PayPal order that saved it.
        token: super::vault::TokenCreated,
        /// When.
        occurred_at: Timestamp,
    },
    /// A dispute the buyer won: each disputed transaction is looked up as an order's capture,
    /// else as a subscription's sale.
    DisputeLost {
        /// PayPal's dispute id.
        dispute_id: String,
        /// The disputed transactions' ids.
        transaction_ids: Vec<String>,
        /// When.
        occurred_at: Timestamp,
    },
}

/// Interpret a verified event; `now` stands in for an unreadable `create_time`.
///
/// # Errors
/// [`WebhookError::Malformed`] when a handled event's resource cannot be read.
pub fn interpret(event: &Envelope, now: Timestamp) -> Result<Interpretation, WebhookError> {
    let at = time_of(event.create_time.as_ref()).unwrap_or(now);
    let lifecycle =
        |make: fn(String, Timestamp) -> PaymentEvent| -> Result<Interpretation, WebhookError> {
            let subscription: SubscriptionRef = resource(event)?;
            Ok(Interpretation::Events(vec![make(subscription.id, at)]))
        };
    match event.event_type.as_str() {
        "CHECKOUT.ORDER.APPROVED" => order_approved(resource(event)?, at),
        "PAYMENT.CAPTURE.COMPLETED" => capture_completed(&resource(event)?, at),
        "PAYMENT.CAPTURE.DENIED" | "PAYMENT.CAPTURE.DECLINED" => {
            Ok(capture_denied(&resource(event)?, at))
        }
        "PAYMENT.CAPTURE.REFUNDED" => capture_refunded(&resource(event)?, at),
        "BILLING.SUBSCRIPTION.ACTIVATED" => {
            let subscription: Subscription = resource(event)?;
            Ok(Interpretation::Events(
                subscription
                    .activation(None, None, at)
                    .into_iter()
                    .collect(),
            ))
        }
        "PAYMENT.SALE.COMPLETED" => sale_completed(resource(event)?, at),
        "BILLING.SUBSCRIPTION.UPDATED" => {
            let subscription: SubscriptionRef = resource(event)?;
            Ok(match path_segment(&subscription.id) {
                Some(id) => Interpretation::SubscriptionUpdated {
                    subscription_id: id.to_owned(),
                    occurred_at: at,
                },
                None => Interpretation::Events(Vec::new()),
            })
        }
        "PAYMENT.SALE.REFUNDED" | "PAYMENT.SALE.REVERSED" => {
            sale_refunded(&resource(event)?, &event.event_type, at)
        }
        "CUSTOMER.DISPUTE.RESOLVED" => Ok(dispute_resolved(resource(event)?, at)),
        "VAULT.PAYMENT-TOKEN.CREATED" => Ok(token_created(&resource(event)?, at)),
        "BILLING.SUBSCRIPTION.PAYMENT.FAILED" | "BILLING.SUBSCRIPTION.SUSPENDED" => lifecycle(
            |provider_subscription_id, occurred_at| PaymentEvent::SubscriptionPastDue {
                provider_subscription_id,
                occurred_at,
            },
        ),
        "BILLING.SUBSCRIPTION.CANCELLED" => {
            lifecycle(
                |provider_subscription_id, occurred_at| PaymentEvent::SubscriptionCanceled {
                    provider_subscription_id,
                    occurred_at,
                },
            )
        }
        "BILLING.SUBSCRIPTION.EXPIRED" => {
            lifecycle(
                |provider_subscription_id, occurred_at| PaymentEvent::SubscriptionExpired {
                    provider_subscription_id,
                    occurred_at,
                },
            )
        }
        _ => Ok(Interpretation::Events(Vec::new())),
    }
}

fn resource<T: DeserializeOwned>(event: &Envelope) -> Result<T, WebhookError> {
    T::deserialize(&event.resource).map_err(|_| {
        WebhookError::Malformed(format!("{} resource is not readable", event.event_type))
    })
}

fn malformed(event_type: &str, what: impl std::fmt::Display) -> WebhookError {
    WebhookError::Malformed(format!("{event_type}: {what}"))
}

/// `VAULT.PAYMENT-TOKEN.CREATED`: a PayPal account saved on a purchase; a card's token, or one
/// naming no order, is nothing Tally can attach.
fn token_created(token: &super::vault::PaymentToken, at: Timestamp) -> Interpretation {
    match token.created() {
        Some(token) => Interpretation::VaultTokenCreated {
            token,
            occurred_at: at,
        },
        None => Interpretation::Events(Vec::new()),
    }
}

/// `CHECKOUT.ORDER.APPROVED`: reported, never captured here. The service captures it only for
/// its own pending order with this PayPal id and price ([`PaymentEvent::PaymentApproved`]).
fn order_approved(order: Order, at: Timestamp) -> Result<Interpretation, WebhookError> {
    let (Some(order_id), Some(paypal_order_id)) = (order.our_order_id(), path_segment(&order.id))
    else {
        // Not an order Tally created (no readable custom_id): nothing to capture.
        return Ok(Interpretation::Events(Vec::new()));
    };
    let amount = order
        .purchase_units
        .first()
        .and_then(|unit| unit.amount.as_ref())
        .ok_or_else(|| malformed("CHECKOUT.ORDER.APPROVED", "no purchase unit amount"))?;
    let amount = Money::try_from(amount)
        .map_err(|e| malformed("CHECKOUT.ORDER.APPROVED", format!("amount: {e}")))?;
    Ok(Interpretation::Events(vec![
        PaymentEvent::PaymentApproved {
            order: OrderLocator {
                order_id: Some(order_id),
                provider_reference: Some(paypal_order_id.to_owned()),
            },
            amount,
            occurred_at: at,
        },
    ]))
}

fn capture_completed(capture: &Capture, at: Timestamp) -> Result<Interpretation, WebhookError> {
    if capture.status != CaptureStatus::Completed {
        return Ok(Interpretation::Events(Vec::new()));
    }
    let amount = capture
        .money()
        .map_err(|e| malformed("PAYMENT.CAPTURE.COMPLETED", e))?;
    Ok(Interpretation::Events(vec![
        PaymentEvent::PaymentSucceeded {
            order: capture.locator(),
            amount,
            occurred_at: time_of(capture.create_time.as_ref()).unwrap_or(at),
        },
    ]))
}

fn capture_denied(capture: &Capture, at: Timestamp) -> Interpretation {
    Interpretation::Events(vec![PaymentEvent::PaymentFailed {
        order: capture.locator(),
        reason: "paypal denied the capture".into(),
        occurred_at: at,
    }])
}

fn capture_refunded(refund: &Refund, at: Timestamp) -> Result<Interpretation, WebhookError> {
    let total_refunded = refund
        .total_refunded()
        .map_err(|e| malformed("PAYMENT.CAPTURE.REFUNDED", e))?;
    if let Some(order_id) = order_id(refund.custom_id.as_ref()) {
        let order = OrderLocator {
            order_id: Some(order_id),
            provider_reference: None,
        };
        return Ok(Interpretation::Events(vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            refund: RefundReport::Total(total_refunded),
            occurred_at: at,
        }]));
    }
    Ok(match refund.capture_id() {
        Some(capture_id) => Interpretation::RefundOfCapture {
            capture_id,
            total_refunded,
            occurred_at: at,
        },
        None => Interpretation::Events(Vec::new()),
    })
}

fn sale_completed(sale: Sale, at: Timestamp) -> Result<Interpretation, WebhookError> {
    // A sale without a billing agreement is not a subscription payment (Payments v1 checkout).
    let Some(subscription_id) = sale.billing_agreement_id.as_deref().and_then(path_segment) else {
        return Ok(Interpretation::Events(Vec::new()));
    };
    let amount = value_to_money(&sale.amount.total, &sale.amount.currency)
        .map_err(|e| malformed("PAYMENT.SALE.COMPLETED", e))?;
    Ok(Interpretation::SubscriptionSale {
        subscription_id: subscription_id.to_owned(),
        sale_id: sale.id.as_deref().and_then(path_segment).map(str::to_owned),
        amount,
        sold_at: time_of(sale.create_time.as_ref()),
        occurred_at: at,
    })
}

/// A refund (or reversal) of a subscription's sale: this refund's own amount, by its id, since
/// PayPal's v1 refund carries no running total.
fn sale_refunded(
    refund: &SaleRefund,
    event_type: &str,
    at: Timestamp,
) -> Result<Interpretation, WebhookError> {
    let amount = refund.money().map_err(|e| malformed(event_type, e))?;
    let Some(refund_id) = path_segment(&refund.id).map(str::to_owned) else {
        return Err(malformed(event_type, "refund id missing or unreadable"));
    };
    Ok(match refund.sale() {
        Some(sale_id) => Interpretation::Events(vec![PaymentEvent::Refunded {
            charge: refund.charge(sale_id),
            refund: RefundReport::One { refund_id, amount },
            occurred_at: at,
        }]),
        None => Interpretation::SaleRefundWithoutSale {
            refund_id,
            amount,
            occurred_at: at,
        },
    })
}

/// `CUSTOMER.DISPUTE.RESOLVED`: only a dispute resolved in the buyer's favour takes money back.
fn dispute_resolved(dispute: Dispute, at: Timestamp) -> Interpretation {
    let lost = dispute
        .dispute_outcome
        .as_ref()
        .and_then(|o| o.outcome_code.as_deref())
        == Some(BUYER_FAVOUR);
    let transaction_ids: Vec<String> = dispute
        .disputed_transactions
        .iter()
        .filter_map(|t| t.seller_transaction_id.as_deref().and_then(path_segment))
        .take(MAX_DISPUTED_TRANSACTIONS)
        .map(str::to_owned)
        .collect();
    if !lost || transaction_ids.is_empty() || dispute.dispute_id.trim().is_empty() {
        return Interpretation::Events(Vec::new());
    }
    Interpretation::DisputeLost {
        dispute_id: dispute.dispute_id,
        transaction_ids,
        occurred_at: at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    #[test]
    fn money_becomes_a_decimal_string_with_the_currency_decimal_places() {
        assert_eq!(money_to_value(usd(999)), "9.99");
        assert_eq!(money_to_value(usd(1000)), "10.00");
        assert_eq!(money_to_value(usd(5)), "0.05");
        assert_eq!(money_to_value(usd(0)), "0.00");
        assert_eq!(
            money_to_value(Money::from_minor(1000, Currency::Jpy).unwrap()),
            "1000"
        );
    }

    #[test]
    fn decimal_strings_become_exact_money() {
        assert_eq!(value_to_money("9.99", "USD"), Ok(usd(999)));
        assert_eq!(value_to_money("10", "USD"), Ok(usd(1000)));
        assert_eq!(value_to_money("10.5", "USD"), Ok(usd(1050)));
        assert_eq!(value_to_money(".5", "USD"), Ok(usd(50)));
        assert_eq!(value_to_money("10.000", "USD"), Ok(usd(1000)));
        assert_eq!(
            value_to_money("1000", "JPY"),
            Money::from_minor(1000, Currency::Jpy).map_err(|_| AmountError::Malformed)
        );
    }

    #[test]
    fn unreadable_amounts_are_refused() {
        assert_eq!(value_to_money("9.999", "USD"), Err(AmountError::TooPrecise));
        assert_eq!(value_to_money("10.5", "JPY"), Err(AmountError::TooPrecise));
        assert_eq!(value_to_money("-1.00", "USD"), Err(AmountError::Malformed));
        assert_eq!(value_to_money("1e3", "USD"), Err(AmountError::Malformed));
        assert_eq!(value_to_money("", "USD"), Err(AmountError::Malformed));
        assert_eq!(value_to_money(".", "USD"), Err(AmountError::Malformed));
        assert_eq!(value_to_money("10.", "USD"), Err(AmountError::Malformed));
        assert_eq!(value_to_money("1.00", "XYZ"), Err(AmountError::Currency));
        assert_eq!(
            value_to_money("99999999999999999999", "USD"),
            Err(AmountError::TooLarge)
        );
    }

    #[test]
    fn every_representable_amount_round_trips() {
        for minor in [0, 1, 9, 10, 99, 100, 12_345, 999_999_999, i64::MAX / 100] {
            for currency in Currency::ALL {
                let money = Money::from_minor(minor, currency).unwrap();
                assert_eq!(
                    value_to_money(&money_to_value(money), currency.code()),
                    Ok(money)
                );
            }
        }
    }

    #[test]
    fn a_sale_refund_is_its_amount_whatever_the_sign_paypal_writes() {
        let refund = |total: &str| -> SaleRefund {
            serde_json::from_value(serde_json::json!({
                "id": "6YX43824R4443062K", "amount": {"total": total, "currency": "USD"},
                "sale_id": "9T2590785R617035G"
            }))
            .unwrap()
        };
        assert_eq!(refund("-4.99").money(), Ok(usd(499)));
        assert_eq!(refund("4.99").money(), Ok(usd(499)));
        assert_eq!(refund("--4.99").money(), Err(AmountError::Malformed));
        assert_eq!(refund("-4.999").money(), Err(AmountError::TooPrecise));
        assert_eq!(refund("1").sale().as_deref(), Some("9T2590785R617035G"));
    }

    #[test]
    fn only_a_dispute_resolved_for_the_buyer_takes_money_back() {
        let dispute = |outcome: &str| -> Dispute {
            serde_json::from_value(serde_json::json!({
                "dispute_id": "PP-D-1", "dispute_outcome": {"outcome_code": outcome},
                "disputed_transactions": [{"seller_transaction_id": "9T2590785R617035G"}, {"seller_transaction_id": "../x"}]
            }))
            .unwrap()
        };
        let at = Timestamp::from_unix_millis(1);
        assert_eq!(
            dispute_resolved(dispute(BUYER_FAVOUR), at),
            Interpretation::DisputeLost {
                dispute_id: "PP-D-1".into(),
                transaction_ids: vec!["9T2590785R617035G".into()],
                occurred_at: at,
            }
        );
        for won in [
            "RESOLVED_SELLER_FAVOUR",
            "CANCELED_BY_BUYER",
            "DENIED",
            "NONE",
        ] {
            assert_eq!(
                dispute_resolved(dispute(won), at),
                Interpretation::Events(Vec::new())
            );
        }
    }

    #[test]
    fn times_are_read_as_rfc_3339_with_any_offset() {
        assert_eq!(
            parse_time("1970-01-01T00:00:01Z"),
            Some(Timestamp::from_unix_millis(1000))
        );
        assert_eq!(
            parse_time("1970-01-01T00:00:01.500Z"),
            Some(Timestamp::from_unix_millis(1500))
        );
        assert_eq!(
            parse_time("1970-01-01T01:00:01+01:00"),
            Some(Timestamp::from_unix_millis(1000))
        );
        assert_eq!(parse_time("2018-19-12T22:20:32.000Z"), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn order_statuses_map_to_steps_and_unknown_ones_wait() {
        let status = |s: &str| serde_json::from_value::<OrderStatus>(serde_json::json!(s)).unwrap();
        assert_eq!(status("APPROVED").step(), OrderStep::Capture);
        assert_eq!(status("COMPLETED").step(), OrderStep::ReadCapture);
        assert_eq!(status("VOIDED").step(), OrderStep::Voided);
        for waiting in ["CREATED", "SAVED", "PAYER_ACTION_REQUIRED", "SOMETHING_NEW"] {
            assert_eq!(status(waiting).step(), OrderStep::Wait);
        }
    }

    #[test]
    fn capture_statuses_map_to_payment_statuses_and_unknown_ones_are_pending() {
        let capture = |status: &str| -> Capture {
            serde_json::from_value(serde_json::json!({
                "id": "C1", "status": status, "amount": {"currency_code": "USD", "value": "9.99"},
                "create_time": "1970-01-01T00:00:02Z"
            }))
            .unwrap()
        };
        let now = Timestamp::from_unix_millis(5);
        let paid = PaymentStatus::Succeeded {
            amount: usd(999),
            paid_at: Timestamp::from_unix_millis(2000),
        };
        for status in ["COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"] {
            assert_eq!(
                PaymentStatus::from(capture(status).outcome(now).unwrap()),
                paid
            );
        }
        for status in ["DECLINED", "FAILED"] {
            assert!(matches!(
                PaymentStatus::from(capture(status).outcome(now).unwrap()),
                PaymentStatus::Failed { .. }
            ));
        }
        for status in ["PENDING", "NEW_STATUS"] {
            assert_eq!(
                PaymentStatus::from(capture(status).outcome(now).unwrap()),
                PaymentStatus::Pending
            );
        }
    }

    #[test]
    fn subscription_statuses_map_to_payment_statuses() {
        let subscription = |status: &str, paid: bool| -> Subscription {
            let billing = if paid {
                serde_json::json!({"last_payment": {"amount": {"currency_code": "USD", "value": "9.99"}, "time": "1970-01-01T00:00:01Z"}})
            } else {
                serde_json::json!({})
            };
            serde_json::from_value(
                serde_json::json!({"id": "I-1", "status": status, "billing_info": billing}),
            )
            .unwrap()
        };
        let paid = PaymentStatus::Succeeded {
            amount: usd(999),
            paid_at: Timestamp::from_unix_millis(1000),
        };
        assert_eq!(subscription("ACTIVE", true).payment_status(), paid);
        assert_eq!(
            subscription("ACTIVE", false).payment_status(),
            PaymentStatus::Pending
        );
        assert_eq!(
            subscription("APPROVAL_PENDING", false).payment_status(),
            PaymentStatus::Pending
        );
        assert_eq!(
            subscription("BRAND_NEW", true).payment_status(),
            PaymentStatus::Pending
        );
        assert_eq!(subscription("CANCELLED", true).payment_status(), paid);
        assert!(matches!(
            subscription("EXPIRED", false).payment_status(),
            PaymentStatus::Failed { .. }
        ));
    }

    #[test]
    fn paypal_errors_become_short_messages_without_the_body() {
        let reply = HttpReply {
            status: 422,
            body: br#"{"name":"UNPROCESSABLE_ENTITY","message":"secret-ish text","debug_id":"f1e2","details":[{"issue":"ORDER_ALREADY_CAPTURED","description":"x"}]}"#.to_vec(),
            headers: vec![],
        };
        let error = ErrorBody::of(&reply);
        assert!(error.has_issue("ORDER_ALREADY_CAPTURED"));
        assert_eq!(
            error.describe(422),
            "HTTP 422 UNPROCESSABLE_ENTITY ORDER_ALREADY_CAPTURED (debug id f1e2)"
        );
        match checked(reply) {
            Err(GatewayError::Rejected(text)) => assert!(!text.contains("secret-ish")),
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn only_safe_ids_go_into_url_paths() {
        assert_eq!(path_segment("5O190127TN364715T"), Some("5O190127TN364715T"));
        assert_eq!(path_segment("I-BW452GLLEP1G"), Some("I-BW452GLLEP1G"));
        for bad in ["", "../x", "a/b", "a?b", "a b", &"x".repeat(65)] {
            assert_eq!(path_segment(bad), None);
        }
    }

    #[test]
    fn the_verification_body_carries_the_raw_event_byte_for_byte() {
        let transmission = Transmission {
            auth_algo: "SHA256withRSA".into(),
            cert_url: "https://api.paypal.com/v1/notifications/certs/CERT-1".into(),
            transmission_id: "t1".into(),
            transmission_sig: "c2ln".into(),
            transmission_time: "1970-01-01T00:00:01Z".into(),
            time_s: 1,
        };
        let raw = br#"{"id":"WH-1","amount":1.0,"z":1,"a":2}"#;
        let body = transmission.verification_body("WH-ID", raw).unwrap();
        assert!(
            body.ends_with(r#","webhook_event":{"id":"WH-1","amount":1.0,"z":1,"a":2}}"#),
            "{body}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["webhook_id"], "WH-ID");
        assert_eq!(parsed["transmission_id"], "t1");
        assert_eq!(parsed["auth_algo"], "SHA256withRSA");
        assert!(parsed.get("time_s").is_none());
    }
}
