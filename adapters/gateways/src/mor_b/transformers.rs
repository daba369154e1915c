//! Dodo Payments' wire format: the checkout-session request, the payment, refund and
//! subscription objects, their status enums and mapping into ours, amounts, RFC 3339 times, and
//! webhook payloads into [`PaymentEvent`]s. All Dodo format knowledge lives here.
//!
//! Amounts are integers in the currency's smallest unit (cents; yen and won have none), which is
//! the domain's minor unit; currency codes are upper-case ISO 4217 as in the domain.

use std::collections::BTreeMap;
use std::str::FromStr;

use application::ports::{
    CheckoutRequest, GatewayError, OrderLocator, PaymentEvent, PaymentStatus, RefundReport,
    RefundRequest, RefundStarted, RefundState, RefundedCharge, WebhookError,
};
#[cfg(test)]
use domain::Currency;
use domain::{BillingPeriod, Duration, Money, OrderId, PlanType, ProviderId, Timestamp};
use serde::{Deserialize, Deserializer, Serialize};

use crate::shared::http::HttpReply;
pub use crate::shared::money::from_minor as money;
pub use crate::shared::period::CHARGE_LEAD_MS;
use crate::shared::time::{from_chrono, parse_rfc3339, to_rfc3339};
use crate::shared::{period, wire};

/// The metadata key that carries our order id.
pub const ORDER_ID_KEY: &str = "orderId";
/// The metadata key that carries the price Tally asked for, in minor units.
pub const AMOUNT_KEY: &str = "amountMinor";
/// The refund metadata key that carries Tally's refund id (Dodo's API takes no idempotency key).
pub const REFUND_ID_KEY: &str = "tallyRefundId";
/// The longest refund reason Dodo takes.
const MAX_REASON_CHARS: usize = 3000;
/// The longest provider id accepted into a URL path.
const MAX_ID_CHARS: usize = 255;
/// The most payments of a subscription read to find a period's charge (Dodo's largest page).
pub const PAYMENTS_PAGE_SIZE: usize = 100;

/// The body of `POST /checkouts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckoutSessionRequest {
    /// One line: the plan's product.
    pub product_cart: Vec<CartItem>,
    /// The buyer, when we know the e-mail address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer: Option<CustomerRequest>,
    /// Where the buyer goes after paying or failing.
    pub return_url: String,
    /// String-to-string metadata: our order id and what the sandbox needs.
    pub metadata: BTreeMap<String, String>,
    /// An on-demand subscription's terms, for a checkout whose buyer consented to automatic
    /// top-ups (see [`super::on_demand`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<super::on_demand::SubscriptionData>,
}

/// `product_cart[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CartItem {
    /// `pdt_…` (= `morBProductId`).
    pub product_id: String,
    /// Always 1.
    pub quantity: u32,
}

/// `customer`: a new customer by e-mail address, and name when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CustomerRequest {
    /// The buyer's address.
    pub email: String,
    /// The buyer's name (Dodo shows it on the checkout and its invoices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The checkout-session request for an order.
///
/// `metadata` carries `orderId` (how webhooks find the order), `userId`, `planId`, and the
/// price asked (`amountMinor`, `currency`) and billing period (`intervalMonths`, recurring plans
/// only): Dodo prices come from the product, so these let the sandbox, which has no product
/// catalog, charge the same, and let us tell tax added on top from a price mismatch.
///
/// # Errors
/// [`GatewayError::Rejected`] when the plan has no `morBProductId`, or a recurring plan has no
/// monthly billing period.
pub fn checkout_request(
    request: &CheckoutRequest,
    notify_url: Option<&str>,
) -> Result<CheckoutSessionRequest, GatewayError> {
    let product_id = request
        .plan
        .provider_refs()
        .get(ProviderId::MorB)
        .map(str::to_owned)
        .ok_or_else(|| GatewayError::Rejected("plan has no morBProductId".into()))?;
    let price = request.snapshot.price;
    let mut metadata = BTreeMap::new();
    metadata.insert(
        ORDER_ID_KEY.to_owned(),
        request.order_id.as_str().to_owned(),
    );
    metadata.insert("userId".to_owned(), request.user_id.as_str().to_owned());
    metadata.insert(
        "planId".to_owned(),
        request.snapshot.plan_id.as_str().to_owned(),
    );
    metadata.insert(AMOUNT_KEY.to_owned(), price.amount_minor().to_string());
    metadata.insert("currency".to_owned(), price.currency().code().to_owned());
    if request.snapshot.plan_type == PlanType::Recurring {
        let Some(Duration::Months(months)) = request.snapshot.duration else {
            return Err(GatewayError::Rejected(
                "a recurring plan needs a billing period in months".into(),
            ));
        };
        metadata.insert("intervalMonths".to_owned(), months.get().to_string());
    }
    if let Some(url) = notify_url {
        metadata.insert("notifyUrl".to_owned(), url.to_owned());
    }
    let customer = request
        .customer_email
        .as_deref()
        .filter(|e| !e.trim().is_empty())
        .map(|email| CustomerRequest {
            email: email.to_owned(),
            name: request
                .customer_name
                .as_deref()
                .filter(|n| !n.trim().is_empty())
                .map(str::to_owned),
        });
    Ok(CheckoutSessionRequest {
        product_cart: vec![CartItem {
            product_id,
            quantity: 1,
        }],
        customer,
        return_url: request.success_url.clone(),
        metadata,
        subscription_data: None,
    })
}

/// The body of `PATCH /subscriptions/{id}` that ends a subscription at its period's end.
#[must_use]
pub fn cancel_at_period_end_body() -> serde_json::Value {
    serde_json::json!({ "cancel_at_next_billing_date": true })
}

/// A Dodo id checked before it goes into a URL path.
///
/// # Errors
/// [`GatewayError::Rejected`] for anything but ASCII letters, digits, `_` and `-`.
pub fn path_id(id: &str) -> Result<&str, GatewayError> {
    wire::path_id(id, MAX_ID_CHARS, &['_', '-'])
        .ok_or_else(|| GatewayError::Rejected("not a Dodo Payments id".into()))
}

/// An RFC 3339 time (Dodo writes UTC, sometimes with fractions, sometimes without an offset).
///
/// # Errors
/// Text that is not such a time.
pub fn timestamp(text: &str) -> Result<Timestamp, String> {
    if let Some(at) = parse_rfc3339(text) {
        return Ok(at);
    }
    chrono::NaiveDateTime::from_str(text)
        .map(|t| from_chrono(&t.and_utc()))
        .map_err(|_| format!("not an RFC 3339 time: {:?}", wire::clip(text, 40)))
}

/// Dodo's error body: `{"code": "…", "message": "…"}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// A Dodo answer as `T`, or the [`GatewayError`] its status and error body mean.
///
/// # Errors
/// 4xx: [`GatewayError::Rejected`] with Dodo's code and message; 5xx:
/// [`GatewayError::Unreachable`]; an unreadable 2xx body: [`GatewayError::BadResponse`].
pub fn read<T: serde::de::DeserializeOwned>(reply: HttpReply) -> Result<T, GatewayError> {
    reply.decode(|body: ErrorBody| (body.code, body.message))
}

/// Metadata values may come back as strings, numbers or booleans; all become strings.
pub(crate) fn lenient_metadata<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: Option<BTreeMap<String, serde_json::Value>> = Option::deserialize(deserializer)?;
    Ok(raw
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(key, value)| match value {
            serde_json::Value::String(s) => Some((key, s)),
            serde_json::Value::Number(n) => Some((key, n.to_string())),
            serde_json::Value::Bool(b) => Some((key, b.to_string())),
            _ => None,
        })
        .collect())
}

pub(crate) fn order_id_in(metadata: &BTreeMap<String, String>) -> Option<OrderId> {
    metadata
        .get(ORDER_ID_KEY)
        .and_then(|id| OrderId::new(id.as_str()).ok())
}

/// The answer of `POST /checkouts`.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckoutSessionResponse {
    /// `cks_…`.
    pub session_id: String,
    /// The hosted page.
    #[serde(default)]
    pub checkout_url: Option<String>,
}

/// The answer of `GET /checkouts/{id}`.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckoutSessionStatus {
    /// The session id.
    pub id: String,
    /// The payment, once the buyer submitted one.
    #[serde(default)]
    pub payment_id: Option<String>,
    /// Its status, once there is a payment.
    #[serde(default)]
    pub payment_status: Option<IntentStatus>,
}

/// A payment's status (Dodo's `IntentStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    /// Paid.
    Succeeded,
    /// Failed.
    Failed,
    /// Cancelled before completion.
    Cancelled,
    /// Still being processed.
    Processing,
    /// Waiting for the buyer (3-D Secure, …).
    RequiresCustomerAction,
    /// Waiting for the merchant.
    RequiresMerchantAction,
    /// Waiting for a payment method.
    RequiresPaymentMethod,
    /// Waiting for confirmation.
    RequiresConfirmation,
    /// Authorized, not captured.
    RequiresCapture,
    /// Partly captured.
    PartiallyCaptured,
    /// Partly captured, more capturable.
    PartiallyCapturedAndCapturable,
    /// Anything Dodo adds later.
    #[serde(other)]
    Unknown,
}

/// Where a payment is, whatever the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Not settled: wait.
    Open,
    /// Paid.
    Paid,
    /// Ended without payment.
    Failed(&'static str),
}

impl From<IntentStatus> for Settlement {
    /// Only `succeeded` is a success and only `failed` and `cancelled` are failures; every
    /// intermediate or unknown status waits.
    fn from(status: IntentStatus) -> Self {
        match status {
            IntentStatus::Succeeded => Settlement::Paid,
            IntentStatus::Failed => Settlement::Failed("payment failed"),
            IntentStatus::Cancelled => Settlement::Failed("payment cancelled"),
            IntentStatus::Processing
            | IntentStatus::RequiresCustomerAction
            | IntentStatus::RequiresMerchantAction
            | IntentStatus::RequiresPaymentMethod
            | IntentStatus::RequiresConfirmation
            | IntentStatus::RequiresCapture
            | IntentStatus::PartiallyCaptured
            | IntentStatus::PartiallyCapturedAndCapturable
            | IntentStatus::Unknown => Settlement::Open,
        }
    }
}

/// A refund's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    /// Money returned.
    Succeeded,
    /// Waiting.
    Pending,
    /// Waiting for action.
    RequiresAction,
    /// Failed.
    Failed,
    /// Cancelled.
    Canceled,
    /// Anything Dodo adds later.
    #[serde(other)]
    Unknown,
}

/// A payment (`GET /payments/{id}`, `payment.*` webhooks).
#[derive(Debug, Clone, Deserialize)]
pub struct Payment {
    /// `pay_…`.
    pub payment_id: String,
    /// Charged, tax included, minor units.
    pub total_amount: i64,
    /// Tax collected, minor units.
    #[serde(default)]
    pub tax: Option<i64>,
    /// Currency code.
    pub currency: String,
    /// Its status.
    #[serde(default)]
    pub status: Option<IntentStatus>,
    /// The metadata given at checkout.
    #[serde(default, deserialize_with = "lenient_metadata")]
    pub metadata: BTreeMap<String, String>,
    /// The checkout session that made it.
    #[serde(default)]
    pub checkout_session_id: Option<String>,
    /// Why it failed: a standardized reason (`CARD_DECLINED`, `INSUFFICIENT_FUNDS` …); null
    /// unless it failed.
    #[serde(default)]
    pub error_code: Option<String>,
    /// Why it failed, in words; null unless it failed.
    #[serde(default)]
    pub error_message: Option<String>,
    /// The subscription it pays, if any (an on-demand subscription's for an automatic
    /// top-up's charge and for the checkout that set the mandate up).
    #[serde(default)]
    pub subscription_id: Option<String>,
    /// The customer who paid.
    #[serde(default)]
    pub customer: Option<PaymentCustomer>,
    /// The card's network (`VISA`, `MASTERCARD`, …), for a card payment.
    #[serde(default)]
    pub card_network: Option<String>,
    /// The card's last four digits, for a card payment.
    #[serde(default)]
    pub card_last_four: Option<String>,
    /// Refunds so far.
    #[serde(default)]
    pub refunds: Vec<PaymentRefund>,
    /// What was bought (`product_cart`, nullable): a partial refund names the item.
    #[serde(default)]
    pub product_cart: Option<Vec<ProductCartItem>>,
    /// Created.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last changed.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// `payment.customer` (Dodo's `CustomerLimitedDetails`), as far as a saved method needs it.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentCustomer {
    /// `cus_…`.
    pub customer_id: String,
}

/// `payment.product_cart[]`.
#[derive(Debug, Clone, Deserialize)]
pub struct ProductCartItem {
    /// `pdt_…` (read leniently: only a partial refund needs it).
    #[serde(default)]
    pub product_id: Option<String>,
}

/// `payment.refunds[]`.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentRefund {
    /// `ref_…`.
    pub refund_id: String,
    /// Refunded, minor units.
    #[serde(default)]
    pub amount: Option<i64>,
    /// Its status.
    pub status: RefundStatus,
    /// The metadata given when it was created (newer API versions list it).
    #[serde(default, deserialize_with = "lenient_metadata")]
    pub metadata: BTreeMap<String, String>,
}

impl RefundStatus {
    /// Where a refund in this status stands for Tally: only `succeeded` is done and only
    /// `failed` and `canceled` failed; `pending`, `review`, `requires_action` and anything newer
    /// wait for the refund webhook.
    #[must_use]
    pub fn state(self) -> RefundState {
        match self {
            RefundStatus::Succeeded => RefundState::Succeeded,
            RefundStatus::Failed => RefundState::Failed("Dodo Payments: refund failed".into()),
            RefundStatus::Canceled => RefundState::Failed("Dodo Payments: refund cancelled".into()),
            RefundStatus::Pending | RefundStatus::RequiresAction | RefundStatus::Unknown => {
                RefundState::Pending
            }
        }
    }
}

/// The body of `POST /refunds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateRefund {
    /// The payment (`pay_…`).
    pub payment_id: String,
    /// A partial refund: the item and the amount; none refunds the whole payment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<RefundItem>>,
    /// Why, at most 3000 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `tallyRefundId` and `orderId`.
    pub metadata: BTreeMap<String, String>,
}

/// `items[]` of [`CreateRefund`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefundItem {
    /// The product (`product_id` of the payment's cart).
    pub item_id: String,
    /// Minor units, tax included as charged.
    pub amount: i64,
    /// The amount includes tax (Dodo's default, sent explicitly).
    pub tax_inclusive: bool,
}

/// What to do for a refund request, once the payment has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundPlan {
    /// Dodo already has a refund made for this refund id: answer it, ask nothing.
    Existing(RefundStarted),
    /// Ask for this refund.
    Create(CreateRefund),
}

/// The refund of `request` out of `payment` (the order's checkout payment).
///
/// `request.amount` is on the basis of the order's price; when Dodo added tax on top, the
/// amount asked is scaled up to what was charged (rounded up, so that the refund Dodo reports
/// maps back onto exactly `request.amount`), at most the whole charge. The whole price, with
/// nothing refunded before, is a full refund (no `items`); anything else names the payment's
/// product.
///
/// # Errors
/// [`GatewayError::Rejected`] when the payment is not paid, not the order's, in another
/// currency, or a partial refund cannot name its product.
pub fn refund_plan(request: &RefundRequest, payment: &Payment) -> Result<RefundPlan, GatewayError> {
    let refused = |why: &str| Err(GatewayError::Rejected(why.to_owned()));
    if let Some(done) = payment
        .refunds
        .iter()
        .find(|r| r.metadata.get(REFUND_ID_KEY) == Some(&request.refund_id))
    {
        return Ok(RefundPlan::Existing(RefundStarted {
            provider_refund_id: Some(done.refund_id.clone()),
            state: done.status.state(),
        }));
    }
    if payment.status != Some(IntentStatus::Succeeded) {
        return refused("the order's Dodo payment is not paid");
    }
    if order_id_in(&payment.metadata).as_ref() != Some(&request.payment.order_id) {
        return refused("the Dodo payment is not this order's");
    }
    if !payment
        .currency
        .eq_ignore_ascii_case(request.amount.currency().code())
    {
        return refused("the refund's currency is not the payment's");
    }
    let amount = request.amount.amount_minor();
    let price = payment
        .paid()
        .map_err(GatewayError::BadResponse)?
        .amount_minor();
    if amount <= 0 || amount > price {
        return refused("the refund amount is not within what the payment paid");
    }
    let items = refund_items(payment, amount, price)?;
    let reason: String = request
        .reason
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_REASON_CHARS)
        .collect();
    Ok(RefundPlan::Create(CreateRefund {
        payment_id: payment.payment_id.clone(),
        items,
        reason: (!reason.trim().is_empty()).then_some(reason),
        metadata: BTreeMap::from([
            (REFUND_ID_KEY.to_owned(), request.refund_id.clone()),
            (
                ORDER_ID_KEY.to_owned(),
                request.payment.order_id.as_str().to_owned(),
            ),
        ]),
    }))
}

/// What a refund of `amount` of a payment of `price` names: nothing for the first refund of
/// the whole payment, else the product and the amount on the basis of what was charged.
///
/// # Errors
/// A partial refund of a payment that lists no product.
fn refund_items(
    payment: &Payment,
    amount: i64,
    price: i64,
) -> Result<Option<Vec<RefundItem>>, GatewayError> {
    let refunded_before = payment
        .refunds
        .iter()
        .any(|r| !matches!(r.status, RefundStatus::Failed | RefundStatus::Canceled));
    if amount == price && !refunded_before {
        return Ok(None);
    }
    let Some(product_id) = payment
        .product_cart
        .iter()
        .flatten()
        .find_map(|item| item.product_id.clone().filter(|id| !id.is_empty()))
    else {
        return Err(GatewayError::Rejected(
            "a partial Dodo refund names the product, and the payment lists none".to_owned(),
        ));
    };
    Ok(Some(vec![RefundItem {
        item_id: product_id,
        amount: as_charged(amount, price, payment.total_amount),
        tax_inclusive: true,
    }]))
}

/// `amount` of a `price` on the basis of what was charged (`total`, tax on top included):
/// scaled by `total / price` and rounded up, at most `total`; as it is when no tax was added.
#[must_use]
pub fn as_charged(amount: i64, price: i64, total: i64) -> i64 {
    if price <= 0 || total <= price {
        return amount;
    }
    let scaled =
        (i128::from(amount) * i128::from(total) + i128::from(price) - 1) / i128::from(price);
    i64::try_from(scaled).map_or(total, |s| s.min(total))
}

/// Dodo's answer to `POST /refunds` as [`RefundStarted`], under Dodo's refund id (the id its
/// `refund.*` webhooks carry).
///
/// # Errors
/// [`GatewayError::BadResponse`] when the refund is not of `payment_id`.
pub fn refund_started(refund: &Refund, payment_id: &str) -> Result<RefundStarted, GatewayError> {
    if refund.payment_id != payment_id || refund.refund_id.is_empty() {
        return Err(GatewayError::BadResponse(
            "Dodo answered a refund of another payment".into(),
        ));
    }
    Ok(RefundStarted {
        provider_refund_id: Some(refund.refund_id.clone()),
        state: refund.status.state(),
    })
}

impl Payment {
    /// Where our order is: its id from metadata, and the checkout session id (an automatic
    /// top-up's charge, made without a session, is its order's reference itself).
    #[must_use]
    pub fn locator(&self) -> OrderLocator {
        let reference = match &self.checkout_session_id {
            Some(session) => Some(session.clone()),
            None => super::on_demand::is_top_up(&self.metadata).then(|| self.payment_id.clone()),
        };
        OrderLocator {
            order_id: order_id_in(&self.metadata),
            provider_reference: reference,
        }
    }

    /// What was paid for the plan.
    ///
    /// Dodo is the Merchant of Record and adds tax on top of tax-exclusive prices, so
    /// `total_amount` can exceed the price. The amount reported is `total_amount` when it is the
    /// price Tally asked for (`metadata.amountMinor`), else `total_amount − tax` when that is,
    /// else `total_amount`, so that a real mismatch is still recorded as one.
    ///
    /// # Errors
    /// An unknown currency or a negative amount.
    pub fn paid(&self) -> Result<Money, String> {
        let asked: Option<i64> = self.metadata.get(AMOUNT_KEY).and_then(|a| a.parse().ok());
        let before_tax = self.tax.and_then(|tax| self.total_amount.checked_sub(tax));
        let amount = match (asked, before_tax) {
            (Some(asked), _) if asked == self.total_amount => self.total_amount,
            (Some(asked), Some(before_tax)) if asked == before_tax => before_tax,
            _ => self.total_amount,
        };
        money(amount, &self.currency)
    }

    /// When it was paid: its last change, else its creation, else `fallback`.
    #[must_use]
    pub fn paid_at(&self, fallback: Timestamp) -> Timestamp {
        self.updated_at
            .as_deref()
            .or(self.created_at.as_deref())
            .and_then(|t| timestamp(t).ok())
            .unwrap_or(fallback)
    }

    /// The payment's state as [`PaymentStatus`].
    ///
    /// # Errors
    /// [`GatewayError::BadResponse`] when a paid payment has no readable amount.
    pub fn payment_status(&self, now: Timestamp) -> Result<PaymentStatus, GatewayError> {
        // The worker's next attempt turns it into a checkout for the buyer (see `on_demand`).
        if super::on_demand::needs_buyer(self) {
            return Ok(PaymentStatus::Pending);
        }
        Ok(
            match Settlement::from(self.status.unwrap_or(IntentStatus::Unknown)) {
                Settlement::Open => PaymentStatus::Pending,
                Settlement::Failed(reason) => PaymentStatus::Failed {
                    reason: reason.into(),
                },
                Settlement::Paid => PaymentStatus::Succeeded {
                    amount: self.paid().map_err(GatewayError::BadResponse)?,
                    paid_at: self.paid_at(now),
                },
            },
        )
    }

    /// `amount` (a refund of this payment, tax included like `total_amount`) on the basis of the
    /// price [`Payment::paid`] reports: when tax was added on top, scaled by
    /// `price / total_amount` and rounded down, the whole `total_amount` being exactly the price.
    #[must_use]
    pub fn on_price_basis(&self, amount: i64) -> i64 {
        let price = self
            .paid()
            .map(|m| m.amount_minor())
            .unwrap_or(self.total_amount);
        if self.total_amount <= 0 || price >= self.total_amount || price < 0 {
            return amount;
        }
        if amount >= self.total_amount {
            return price;
        }
        let scaled = i128::from(amount.max(0)) * i128::from(price) / i128::from(self.total_amount);
        i64::try_from(scaled).unwrap_or(price)
    }

    /// Which charge a refund or dispute of this payment takes money from: a subscription's
    /// payment by its id (the `charge_ref` of its activation or renewal), else our order (an
    /// on-demand subscription's payments, a top-up's charge or the consented checkout, pay
    /// orders, never a Tally subscription).
    #[must_use]
    pub fn charge(&self) -> RefundedCharge {
        if super::on_demand::pays_order(self) {
            return RefundedCharge::Order(self.locator());
        }
        match self.subscription_id.clone().filter(|id| !id.is_empty()) {
            Some(subscription_id) => RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(subscription_id),
                charge_ref: self.payment_id.clone(),
            },
            None => RefundedCharge::Order(self.locator()),
        }
    }
}

/// A refund (`refund.*` webhooks).
#[derive(Debug, Clone, Deserialize)]
pub struct Refund {
    /// `ref_…`.
    pub refund_id: String,
    /// The refunded payment.
    pub payment_id: String,
    /// This refund's amount, minor units.
    #[serde(default)]
    pub amount: Option<i64>,
    /// Currency code.
    #[serde(default)]
    pub currency: Option<String>,
    /// Its status.
    pub status: RefundStatus,
}

/// A dispute (`dispute.*` webhooks).
#[derive(Debug, Clone, Deserialize)]
pub struct Dispute {
    /// `dsp_…`.
    pub dispute_id: String,
    /// The disputed payment.
    pub payment_id: String,
    /// Where the dispute is (`dispute_lost`, …).
    #[serde(default)]
    pub dispute_status: Option<String>,
}

/// One row of `GET /payments` (`{"items": [...]}`).
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentListItem {
    /// `pay_…`.
    pub payment_id: String,
    /// Created, RFC 3339.
    pub created_at: String,
    /// Its status.
    #[serde(default)]
    pub status: Option<IntentStatus>,
    /// The subscription it pays, if any.
    #[serde(default)]
    pub subscription_id: Option<String>,
    /// Charged, minor units (zero for a payment that only saved a payment method).
    #[serde(default)]
    pub total_amount: Option<i64>,
    /// The metadata given at checkout or with an on-demand charge.
    #[serde(default, deserialize_with = "lenient_metadata")]
    pub metadata: BTreeMap<String, String>,
}

/// The answer of `GET /payments`.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentList {
    /// One page of payments.
    #[serde(default)]
    pub items: Vec<PaymentListItem>,
}

/// Which of a subscription's payments paid `period`: of its succeeded, non-zero payments of
/// `subscription_id`, the one [`period::charge_of_period`] picks (the earliest in the period's
/// window for the first period, else the latest). `None` when there is none (a free trial).
#[must_use]
pub fn charge_of_period(
    subscription_id: &str,
    period: BillingPeriod,
    first: bool,
    payments: &[PaymentListItem],
) -> Option<String> {
    let paid = payments
        .iter()
        .take(PAYMENTS_PAGE_SIZE)
        .filter(|p| p.status == Some(IntentStatus::Succeeded) && p.total_amount != Some(0))
        .filter(|p| p.subscription_id.as_deref() == Some(subscription_id))
        .filter_map(|p| Some((timestamp(&p.created_at).ok()?, p.payment_id.as_str())));
    period::charge_of_period(period, first, paid)
}

/// A subscription's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    /// Being created.
    Pending,
    /// Renewing (also during a trial).
    Active,
    /// A renewal failed; in the grace period.
    PastDue,
    /// A renewal failed; access revoked, recoverable.
    OnHold,
    /// Paused on purpose.
    Paused,
    /// Will not renew.
    Cancelled,
    /// The first mandate or payment failed (terminal).
    Failed,
    /// Ran out (terminal).
    Expired,
    /// Anything Dodo adds later.
    #[serde(other)]
    Unknown,
}

/// A subscription (`subscription.*` webhooks, `GET`/`PATCH /subscriptions/{id}`).
#[derive(Debug, Clone, Deserialize)]
pub struct Subscription {
    /// `sub_…`.
    pub subscription_id: String,
    /// Where it is.
    pub status: SubscriptionStatus,
    /// Start of the current period.
    #[serde(default)]
    pub previous_billing_date: Option<String>,
    /// End of the current period (the next charge).
    #[serde(default)]
    pub next_billing_date: Option<String>,
    /// Ends at the next billing date.
    #[serde(default)]
    pub cancel_at_next_billing_date: bool,
    /// Per period, before tax, minor units.
    #[serde(default)]
    pub recurring_pre_tax_amount: Option<i64>,
    /// Currency code.
    #[serde(default)]
    pub currency: Option<String>,
    /// The metadata given at checkout.
    #[serde(default, deserialize_with = "lenient_metadata")]
    pub metadata: BTreeMap<String, String>,
    /// An on-demand subscription: a saved method for automatic top-ups, never a Tally
    /// subscription.
    #[serde(default)]
    pub on_demand: bool,
}

impl Subscription {
    /// The current period: previous to next billing date.
    ///
    /// # Errors
    /// Missing or unreadable dates, or an empty period.
    pub fn period(&self) -> Result<BillingPeriod, String> {
        let (Some(start), Some(end)) = (&self.previous_billing_date, &self.next_billing_date)
        else {
            return Err("subscription has no billing dates".into());
        };
        BillingPeriod::new(timestamp(start)?, timestamp(end)?)
            .ok_or_else(|| "subscription period is empty".into())
    }

    fn renewal_amount(&self) -> Result<Money, String> {
        match (self.recurring_pre_tax_amount, self.currency.as_deref()) {
            (Some(amount), Some(currency)) => money(amount, currency),
            _ => Err("subscription has no recurring amount".into()),
        }
    }
}

/// A webhook body: `{business_id, type, timestamp, data}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope {
    /// The business the event is about (`bus_…`).
    #[serde(default)]
    pub business_id: Option<String>,
    /// `payment.succeeded`, ….
    #[serde(rename = "type")]
    pub event_type: String,
    /// When it happened (RFC 3339).
    pub timestamp: String,
    /// The payment, refund or subscription.
    pub data: serde_json::Value,
}

impl Envelope {
    /// Why the event is not for `business_id` (when one is configured); `None` when it is.
    #[must_use]
    pub fn foreign(&self, business_id: Option<&str>) -> Option<String> {
        let expected = business_id?;
        match self.business_id.as_deref() {
            Some(named) if named == expected => None,
            Some(named) => Some(format!(
                "the event is for business {:?}, not the configured businessId",
                named.chars().take(64).collect::<String>()
            )),
            None => Some("the event names no business_id".into()),
        }
    }
}

/// Parse a webhook body.
///
/// # Errors
/// [`WebhookError::Malformed`] when it is not a Dodo webhook.
pub fn parse_envelope(body: &[u8]) -> Result<Envelope, WebhookError> {
    serde_json::from_slice(body)
        .map_err(|e| WebhookError::Malformed(format!("not a Dodo Payments webhook: {e}")))
}

/// What a webhook means, or what must be read from Dodo's API to know it.
#[derive(Debug, Clone)]
pub enum Meaning {
    /// These events (empty for event types Tally does not handle).
    Events(Vec<PaymentEvent>),
    /// A `refund.succeeded`: the payment must be read for the order or subscription it paid.
    Refund(Refund, Timestamp),
    /// A `dispute.lost`: the payment must be read for the order or subscription it paid.
    DisputeLost(Dispute, Timestamp),
    /// A `subscription.active` or `subscription.renewed`: the subscription's payments must be
    /// read for the charge of the period (see [`subscription_event`]).
    Period(PeriodChange, Subscription, Timestamp),
}

/// Which subscription event a [`Meaning::Period`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodChange {
    /// `subscription.active`: the first period.
    Activated,
    /// `subscription.renewed`: a new period.
    Renewed,
}

fn data<T: serde::de::DeserializeOwned>(envelope: &Envelope) -> Result<T, WebhookError> {
    serde_json::from_value(envelope.data.clone())
        .map_err(|e| WebhookError::Malformed(format!("{}: {e}", envelope.event_type)))
}

/// What a webhook means for Tally.
///
/// # Errors
/// [`WebhookError::Malformed`] when a handled event's data cannot be read.
pub fn meaning_of(envelope: &Envelope) -> Result<Meaning, WebhookError> {
    let at = timestamp(&envelope.timestamp).map_err(WebhookError::Malformed)?;
    // An on-demand subscription is a saved method: its lifecycle is no Tally subscription's.
    if super::on_demand::is_mandate_event(envelope) {
        return Ok(Meaning::Events(Vec::new()));
    }
    let events = match envelope.event_type.as_str() {
        "payment.succeeded" => payment_succeeded(&data(envelope)?, at)?,
        "payment.failed" => failed(&data(envelope)?, "payment failed", at),
        "payment.cancelled" => failed(&data(envelope)?, "payment cancelled", at),
        "subscription.active" => {
            return Ok(Meaning::Period(
                PeriodChange::Activated,
                data(envelope)?,
                at,
            ));
        }
        "subscription.renewed" => {
            return Ok(Meaning::Period(PeriodChange::Renewed, data(envelope)?, at));
        }
        "subscription.on_hold" | "subscription.past_due" => {
            let s: Subscription = data(envelope)?;
            vec![PaymentEvent::SubscriptionPastDue {
                provider_subscription_id: s.subscription_id,
                occurred_at: at,
            }]
        }
        "subscription.failed" => {
            // Creation failed, so Tally holds no subscription: the order's payment failed.
            let s: Subscription = data(envelope)?;
            let order = OrderLocator {
                order_id: order_id_in(&s.metadata),
                provider_reference: None,
            };
            vec![PaymentEvent::PaymentFailed {
                order,
                reason: "subscription could not be created".into(),
                occurred_at: at,
            }]
        }
        "subscription.cancelled" => vec![subscription_cancelled(&data(envelope)?, at)],
        "subscription.plan_changed" => vec![super::plan_change::plan_changed(&envelope.data, at)?],
        "subscription.expired" => {
            let s: Subscription = data(envelope)?;
            vec![PaymentEvent::SubscriptionExpired {
                provider_subscription_id: s.subscription_id,
                occurred_at: at,
            }]
        }
        "refund.succeeded" => return Ok(Meaning::Refund(data(envelope)?, at)),
        "dispute.lost" => return Ok(Meaning::DisputeLost(data(envelope)?, at)),
        _ => Vec::new(),
    };
    Ok(Meaning::Events(events))
}

/// A one-time or credits payment, an automatic top-up's charge, or the consented checkout that
/// set an on-demand mandate up (which also saves the method). Tally subscriptions' charges
/// (`subscription_id` set) are reported by `subscription.active` and `subscription.renewed`,
/// which carry the billing period.
fn payment_succeeded(payment: &Payment, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    if payment.subscription_id.is_some() && !super::on_demand::pays_order(payment) {
        return Ok(Vec::new());
    }
    let amount = payment.paid().map_err(WebhookError::Malformed)?;
    let mut events = vec![PaymentEvent::PaymentSucceeded {
        order: payment.locator(),
        amount,
        occurred_at: at,
    }];
    events.extend(super::on_demand::method_saved(payment, at));
    Ok(events)
}

/// A failed or cancelled payment, except an automatic top-up's charge that failed only because
/// the buyer must authenticate: the charge's answer said so, and the buyer finishes the same
/// order in a checkout.
fn failed(payment: &Payment, fallback: &str, at: Timestamp) -> Vec<PaymentEvent> {
    if super::on_demand::needs_buyer(payment) {
        return Vec::new();
    }
    vec![payment_failed(payment, fallback, at)]
}

/// A failed or cancelled payment fails its order with Dodo's reason (`error_message`, else
/// `error_code`), else `fallback`; at most [`MAX_FAILURE_CHARS`] characters.
fn payment_failed(payment: &Payment, fallback: &str, at: Timestamp) -> PaymentEvent {
    let reason = [&payment.error_message, &payment.error_code]
        .into_iter()
        .flatten()
        .map(|words| words.trim())
        .find(|words| !words.is_empty())
        .unwrap_or(fallback);
    PaymentEvent::PaymentFailed {
        order: payment.locator(),
        reason: reason.chars().take(MAX_FAILURE_CHARS).collect(),
        occurred_at: at,
    }
}

/// The most characters of a provider's failure reason kept on the order.
const MAX_FAILURE_CHARS: usize = 200;

/// The `SubscriptionActivated` or `SubscriptionRenewed` of a subscription event, once the
/// subscription's payments have been read: the charge is the payment that paid the period
/// ([`charge_of_period`]), which Dodo's subscription payload does not name.
///
/// # Errors
/// [`WebhookError::Malformed`] when the period or (for a renewal) the amount is unreadable.
pub fn subscription_event(
    change: PeriodChange,
    s: &Subscription,
    payments: &[PaymentListItem],
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    let period = s.period().map_err(WebhookError::Malformed)?;
    let first = change == PeriodChange::Activated;
    let charge_ref = charge_of_period(&s.subscription_id, period, first, payments);
    Ok(match change {
        PeriodChange::Activated => PaymentEvent::SubscriptionActivated {
            order: OrderLocator {
                order_id: order_id_in(&s.metadata),
                provider_reference: None,
            },
            provider_subscription_id: s.subscription_id.clone(),
            period,
            // The recurring price before tax, as the order's price is; absent from some payloads.
            amount: s.renewal_amount().ok(),
            charge_ref,
            occurred_at: at,
        },
        PeriodChange::Renewed => PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: s.subscription_id.clone(),
            period,
            amount: s.renewal_amount().map_err(WebhookError::Malformed)?,
            charge_ref,
            occurred_at: at,
        },
    })
}

/// The query of `GET /payments` for the payments that may have paid `period` of
/// `subscription_id`.
#[must_use]
pub fn period_payments_query(
    subscription_id: &str,
    period: BillingPeriod,
) -> Vec<(&'static str, String)> {
    let iso = |ms: i64| to_rfc3339(Timestamp::from_unix_millis(ms));
    vec![
        ("subscription_id", subscription_id.to_owned()),
        ("status", "succeeded".to_owned()),
        (
            "created_at_gte",
            iso(period.start().unix_millis().saturating_sub(CHARGE_LEAD_MS)),
        ),
        ("created_at_lte", iso(period.end().unix_millis())),
        ("page_size", PAYMENTS_PAGE_SIZE.to_string()),
    ]
}

/// `subscription.cancelled` is sent both for "ends at the next billing date" and for "ended
/// now": the first while `cancel_at_next_billing_date` is set and that date is still ahead.
fn subscription_cancelled(s: &Subscription, at: Timestamp) -> PaymentEvent {
    let ends_later = s
        .next_billing_date
        .as_deref()
        .and_then(|t| timestamp(t).ok())
        .is_some_and(|end| end > at);
    let provider_subscription_id = s.subscription_id.clone();
    if s.cancel_at_next_billing_date && ends_later {
        PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id,
            occurred_at: at,
        }
    } else {
        PaymentEvent::SubscriptionCanceled {
            provider_subscription_id,
            occurred_at: at,
        }
    }
}

/// The `Refunded` event of a `refund.succeeded`, once its payment has been read.
///
/// The refund carries its own amount and id (not the payment's running total), so it is
/// reported as one refund; the payment says which charge it is (a subscription's payment by its
/// id, else our order) and, for tax added on top, the price basis the amount is scaled to.
///
/// # Errors
/// [`WebhookError::Malformed`] when the payment is not the refund's, or amounts are unreadable.
pub fn refunded(
    refund: &Refund,
    payment: &Payment,
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    if payment.payment_id != refund.payment_id {
        return Err(WebhookError::Malformed(
            "refund and payment do not match".into(),
        ));
    }
    let amount = refund
        .amount
        .ok_or_else(|| WebhookError::Malformed("refund without an amount".into()))?;
    let currency = refund.currency.as_deref().unwrap_or(&payment.currency);
    let amount =
        money(payment.on_price_basis(amount), currency).map_err(WebhookError::Malformed)?;
    Ok(PaymentEvent::Refunded {
        charge: payment.charge(),
        refund: RefundReport::One {
            refund_id: refund.refund_id.clone(),
            amount,
        },
        occurred_at: at,
    })
}

/// The `Refunded` event of a `dispute.lost`, once its payment has been read: the whole payment
/// is taken back.
///
/// # Errors
/// [`WebhookError::Malformed`] when the payment is not the dispute's.
pub fn dispute_lost(
    dispute: &Dispute,
    payment: &Payment,
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    if payment.payment_id != dispute.payment_id {
        return Err(WebhookError::Malformed(
            "dispute and payment do not match".into(),
        ));
    }
    Ok(PaymentEvent::Refunded {
        charge: payment.charge(),
        refund: RefundReport::DisputeLost {
            dispute_id: dispute.dispute_id.clone(),
        },
        occurred_at: at,
    })
}

/// A page of `GET /products`, as far as a credential check reads it: `{"items": […]}`.
#[derive(Debug, Deserialize)]
pub struct ProductPage {
    /// The products on this page (not read).
    pub items: Vec<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment(total: i64, tax: Option<i64>, asked: &str) -> Payment {
        let mut metadata = BTreeMap::new();
        metadata.insert(AMOUNT_KEY.to_owned(), asked.to_owned());
        Payment {
            payment_id: "pay_1".into(),
            total_amount: total,
            tax,
            currency: "USD".into(),
            status: Some(IntentStatus::Succeeded),
            metadata,
            checkout_session_id: None,
            error_code: None,
            error_message: None,
            subscription_id: None,
            customer: None,
            card_network: None,
            card_last_four: None,
            refunds: Vec::new(),
            product_cart: None,
            created_at: None,
            updated_at: None,
        }
    }

    #[test]
    fn only_succeeded_is_paid_and_only_failed_or_cancelled_failed() {
        assert_eq!(Settlement::from(IntentStatus::Succeeded), Settlement::Paid);
        assert!(matches!(
            Settlement::from(IntentStatus::Failed),
            Settlement::Failed(_)
        ));
        assert!(matches!(
            Settlement::from(IntentStatus::Cancelled),
            Settlement::Failed(_)
        ));
        assert_eq!(Settlement::from(IntentStatus::Processing), Settlement::Open);
        assert_eq!(
            Settlement::from(IntentStatus::RequiresCapture),
            Settlement::Open
        );
        let unknown: IntentStatus = serde_json::from_str("\"brand_new\"").unwrap();
        assert_eq!(Settlement::from(unknown), Settlement::Open);
    }

    #[test]
    fn tax_added_on_top_is_taken_off_and_anything_else_is_reported_as_charged() {
        let usd = |m| Money::from_minor(m, Currency::Usd).unwrap();
        assert_eq!(payment(999, Some(0), "999").paid().unwrap(), usd(999));
        assert_eq!(payment(1199, Some(200), "999").paid().unwrap(), usd(999));
        assert_eq!(payment(999, Some(167), "999").paid().unwrap(), usd(999));
        assert_eq!(payment(1500, Some(100), "999").paid().unwrap(), usd(1500));
        assert_eq!(payment(1199, None, "x").paid().unwrap(), usd(1199));
    }

    #[test]
    fn times_with_and_without_offsets_and_fractions_parse() {
        assert_eq!(
            timestamp("2024-01-01T12:00:00Z").unwrap(),
            Timestamp::from_unix_millis(1_704_110_400_000)
        );
        assert_eq!(
            timestamp("2024-01-01T12:00:00.250+00:00").unwrap(),
            Timestamp::from_unix_millis(1_704_110_400_250)
        );
        assert_eq!(
            timestamp("2024-01-01T12:00:00.250").unwrap(),
            Timestamp::from_unix_millis(1_704_110_400_250)
        );
        assert!(timestamp("yesterday").is_err());
    }

    #[test]
    fn a_refund_on_the_price_basis_scales_up_to_the_charge_and_back_exactly() {
        assert_eq!(as_charged(300, 999, 999), 300);
        assert_eq!(as_charged(999, 999, 1199), 1199);
        let taxed = payment(1199, Some(200), "999");
        for amount in [1, 2, 299, 500, 998, 999] {
            let charged = as_charged(amount, 999, 1199);
            assert!(charged <= 1199);
            assert_eq!(taxed.on_price_basis(charged), amount, "{amount}");
        }
    }

    #[test]
    fn a_refund_of_a_payment_with_tax_on_top_is_scaled_to_the_price() {
        let taxed = payment(1199, Some(200), "999");
        assert_eq!(taxed.on_price_basis(1199), 999);
        assert_eq!(taxed.on_price_basis(600), 499);
        let untaxed = payment(999, Some(0), "999");
        assert_eq!(untaxed.on_price_basis(300), 300);
    }

    fn listed(id: &str, at: &str, status: IntentStatus, subscription: &str) -> PaymentListItem {
        PaymentListItem {
            payment_id: id.into(),
            created_at: at.into(),
            status: Some(status),
            subscription_id: Some(subscription.into()),
            total_amount: Some(1900),
            metadata: BTreeMap::new(),
        }
    }

    #[test]
    fn the_charge_of_a_period_is_the_succeeded_payment_made_for_it() {
        let period = BillingPeriod::new(
            timestamp("2025-02-20T08:59:41Z").unwrap(),
            timestamp("2025-03-20T08:59:41Z").unwrap(),
        )
        .unwrap();
        let payments = [
            listed(
                "pay_first",
                "2025-01-20T08:59:40Z",
                IntentStatus::Succeeded,
                "sub_1",
            ),
            listed(
                "pay_failed",
                "2025-02-20T09:00:00Z",
                IntentStatus::Failed,
                "sub_1",
            ),
            listed(
                "pay_retry",
                "2025-02-22T09:00:00Z",
                IntentStatus::Succeeded,
                "sub_1",
            ),
            listed(
                "pay_other",
                "2025-02-21T09:00:00Z",
                IntentStatus::Succeeded,
                "sub_2",
            ),
            listed(
                "pay_next",
                "2025-03-20T08:59:41Z",
                IntentStatus::Succeeded,
                "sub_1",
            ),
        ];
        assert_eq!(
            charge_of_period("sub_1", period, false, &payments).as_deref(),
            Some("pay_retry")
        );
        let first = BillingPeriod::new(
            timestamp("2025-01-20T08:59:41Z").unwrap(),
            timestamp("2025-02-20T08:59:41Z").unwrap(),
        )
        .unwrap();
        assert_eq!(
            charge_of_period("sub_1", first, true, &payments).as_deref(),
            Some("pay_first")
        );
        assert_eq!(charge_of_period("sub_3", first, true, &payments), None);
    }
}
