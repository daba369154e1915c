//! The Stripe objects the simulated `card_gateway` answers with and sends in events: Checkout
//! Sessions, subscriptions, invoices, charges, disputes, invoice payments and the event envelope,
//! in the current (`2025-03-31.basil`) shape, plus Stripe's error body.
//!
//! Ids: a subscription period's invoice is the hub's charge id (`in_sandbox_…`); its charge and
//! PaymentIntent are the same id with `ch_`/`pi_` for `in_` (one charge per invoice), so that
//! each can be found again from the other. A one-time session `cs_…` has charge `ch_…` and
//! PaymentIntent `pi_…` in the same way.

use std::collections::BTreeMap;

use poem::http::StatusCode;
use poem::web::Json;
use poem::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::hub::{
    Hub, SimCharge, SimKind, SimPayment, SimStatus, SimSubscription, SimSubscriptionStatus,
};

/// The API version the simulated events claim.
const API_VERSION: &str = "2025-03-31.basil";

/// `extra` key: the session's `metadata`, as JSON.
pub const METADATA: &str = "metadata";
/// `extra` key: `subscription_data[metadata]`, as JSON.
pub const SUBSCRIPTION_METADATA: &str = "subscriptionMetadata";
/// `extra` key: `payment_intent_data[metadata]`, as JSON.
pub const PAYMENT_INTENT_METADATA: &str = "paymentIntentMetadata";
/// `extra` key: the `Idempotency-Key` the session was created with.
pub const IDEMPOTENCY_KEY: &str = "idempotencyKey";
/// `extra` key: `customer_email`.
pub const CUSTOMER_EMAIL: &str = "customerEmail";
/// `extra` key: `expires_at`, seconds.
pub const EXPIRES_AT: &str = "expiresAt";
/// `extra` key: `payment_intent_data[setup_future_usage]` (`on_session`, `off_session`).
pub const SETUP_FUTURE_USAGE: &str = "setupFutureUsage";
/// `extra` key: `customer_creation` (`always`, `if_required`).
pub const CUSTOMER_CREATION: &str = "customerCreation";
/// `extra` key: the Customer a paid session created (`customer_creation=always`), or the one
/// an off-session PaymentIntent charged.
pub const CUSTOMER: &str = "customer";
/// `extra` key: the payment method a paid session saved, or an off-session PaymentIntent
/// charged.
pub const PAYMENT_METHOD: &str = "paymentMethod";

/// A refused request, answered in Stripe's `{"error": {"type", "message", "param"}}` shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeError {
    status: StatusCode,
    kind: &'static str,
    code: Option<&'static str>,
    message: String,
    param: Option<String>,
    /// The PaymentIntent the refused request is about, as Stripe adds it to the error.
    payment_intent: Option<Value>,
}

impl StripeError {
    /// The same error with Stripe's `code`.
    #[must_use]
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// The same error with another `type` (`idempotency_error`).
    #[must_use]
    pub fn with_type(mut self, kind: &'static str) -> Self {
        self.kind = kind;
        self
    }

    /// The same error naming the PaymentIntent it is about.
    #[must_use]
    pub fn with_payment_intent(mut self, payment_intent: Value) -> Self {
        self.payment_intent = Some(payment_intent);
        self
    }
}

impl IntoResponse for StripeError {
    fn into_response(self) -> Response {
        let mut error = json!({ "type": self.kind, "message": self.message });
        if let Some(param) = self.param {
            error["param"] = param.into();
        }
        if let Some(code) = self.code {
            error["code"] = code.into();
        }
        if let Some(payment_intent) = self.payment_intent {
            error["payment_intent"] = payment_intent;
        }
        (self.status, Json(json!({ "error": error }))).into_response()
    }
}

/// Stripe's error with `status`.
pub fn error(status: StatusCode, message: &str, param: Option<&str>) -> StripeError {
    StripeError {
        status,
        kind: "invalid_request_error",
        code: None,
        message: message.to_owned(),
        param: param.map(truncated),
        payment_intent: None,
    }
}

/// `404 resource_missing` for an id.
pub fn missing(what: &str, id: &str) -> StripeError {
    error(
        StatusCode::NOT_FOUND,
        &format!("No such {what}: '{}'", truncated(id)),
        Some("id"),
    )
    .with_code("resource_missing")
}

/// `400 resource_missing` for an id sent as the parameter `param`, as Stripe answers an unknown
/// Customer or PaymentMethod in a request body.
pub fn missing_param(what: &str, id: &str, param: &str) -> StripeError {
    error(
        StatusCode::BAD_REQUEST,
        &format!("No such {what}: '{}'", truncated(id)),
        Some(param),
    )
    .with_code("resource_missing")
}

fn truncated(text: &str) -> String {
    text.chars().take(64).collect()
}

/// Milliseconds as Stripe's seconds.
pub fn seconds(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

fn stored_map(payment: &SimPayment, key: &str) -> BTreeMap<String, String> {
    payment
        .extra
        .get(key)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// A session's `metadata`.
pub fn metadata(payment: &SimPayment) -> BTreeMap<String, String> {
    stored_map(payment, METADATA)
}

/// A payment-mode session's `payment_intent_data[metadata]`.
pub fn payment_intent_metadata(payment: &SimPayment) -> BTreeMap<String, String> {
    stored_map(payment, PAYMENT_INTENT_METADATA)
}

/// A subscription session's `subscription_data[metadata]`.
pub fn subscription_metadata(payment: &SimPayment) -> BTreeMap<String, String> {
    stored_map(payment, SUBSCRIPTION_METADATA)
}

/// The Customer of a session: `cus_` and the session id's rest, for a subscription's session
/// and for a paid session that created one (`customer_creation=always`); its card is `pm_` and
/// the same rest.
pub fn customer_id(payment: &SimPayment) -> String {
    format!("cus_{}", payment.id.trim_start_matches("cs_"))
}

/// The PaymentIntent of a payment-mode session: `pi_` and the session id's rest.
pub fn payment_intent_id(payment: &SimPayment) -> String {
    format!("pi_{}", payment.id.trim_start_matches("cs_"))
}

/// A Checkout Session as Stripe shows it now.
pub fn session(hub: &Hub, payment: &SimPayment) -> Value {
    let (status, payment_status) = match payment.status {
        SimStatus::Open | SimStatus::Approved => ("open", "unpaid"),
        SimStatus::Paid => ("complete", "paid"),
        SimStatus::Declined | SimStatus::Canceled => ("expired", "unpaid"),
    };
    let subscription_mode = matches!(payment.kind, SimKind::Subscription { .. });
    let url = (status == "open").then(|| hub.checkout_url(&payment.id));
    // A subscription's session names the invoice of its first period once paid.
    let first_invoice = payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id))
        .and_then(|s| s.charges.first().map(|c| c.id.clone()));
    let paid_one_time = payment.status == SimStatus::Paid && !subscription_mode;
    json!({
        "id": payment.id,
        "object": "checkout.session",
        "amount_subtotal": payment.amount_minor,
        "amount_total": payment.amount_minor,
        "cancel_url": payment.cancel_url,
        "client_reference_id": payment.order_id,
        "created": seconds(payment.created_at_ms),
        "currency": payment.currency.code().to_ascii_lowercase(),
        "customer": if subscription_mode {
            Some(customer_id(payment))
        } else {
            payment.extra.get(CUSTOMER).cloned()
        },
        "customer_creation": payment.extra.get(CUSTOMER_CREATION),
        "customer_email": payment.extra.get(CUSTOMER_EMAIL),
        "expires_at": payment.extra.get(EXPIRES_AT).and_then(|s| s.parse::<i64>().ok()),
        "invoice": first_invoice,
        "livemode": false,
        "metadata": metadata(payment),
        "mode": if subscription_mode { "subscription" } else { "payment" },
        "payment_intent": paid_one_time.then(|| payment_intent_id(payment)),
        "payment_status": payment_status,
        "status": status,
        "subscription": payment.subscription_id,
        "success_url": payment.success_url,
        "ui_mode": "hosted",
        "url": url,
    })
}

/// A subscription as Stripe shows it now.
pub fn subscription(hub: &Hub, s: &SimSubscription) -> Value {
    let payment = hub.payment(&s.payment_id);
    let metadata = payment
        .as_ref()
        .map(|p| stored_map(p, SUBSCRIPTION_METADATA))
        .unwrap_or_default();
    let price = match payment.as_ref().map(|p| &p.kind) {
        Some(SimKind::Subscription {
            plan_ref: Some(price),
            ..
        }) => Some(price.clone()),
        _ => None,
    };
    let (status, scheduled) = match s.status {
        SimSubscriptionStatus::Active => ("active", false),
        SimSubscriptionStatus::CancelScheduled => ("active", true),
        SimSubscriptionStatus::Canceled => ("canceled", false),
    };
    let (start, end) = (seconds(s.period_start_ms), seconds(s.period_end_ms));
    json!({
        "id": s.id,
        "object": "subscription",
        "cancel_at": scheduled.then_some(end),
        "cancel_at_period_end": scheduled,
        "canceled_at": (s.status != SimSubscriptionStatus::Active).then(|| seconds(hub.now_ms())),
        "currency": s.currency.code().to_ascii_lowercase(),
        "customer": payment.as_ref().map(customer_id),
        "ended_at": (s.status == SimSubscriptionStatus::Canceled).then(|| seconds(hub.now_ms())),
        "items": {
            "object": "list",
            "data": [{
                "id": format!("si_{}", s.id.trim_start_matches("sub_")),
                "object": "subscription_item",
                "current_period_end": end,
                "current_period_start": start,
                "price": { "id": price, "object": "price", "unit_amount": s.amount_minor,
                           "currency": s.currency.code().to_ascii_lowercase(),
                           "recurring": { "interval": "month", "interval_count": s.interval_months } },
                "quantity": 1
            }],
            "has_more": false
        },
        "livemode": false,
        "metadata": metadata,
        "status": status,
    })
}

/// The paid invoice of one period of a subscription: `charge` is the hub's record of it.
pub fn invoice(hub: &Hub, s: &SimSubscription, charge: &SimCharge, billing_reason: &str) -> Value {
    let metadata = hub
        .payment(&s.payment_id)
        .map(|p| stored_map(&p, SUBSCRIPTION_METADATA))
        .unwrap_or_default();
    let currency = s.currency.code().to_ascii_lowercase();
    let invoice_id = &charge.id;
    json!({
        "id": invoice_id,
        "object": "invoice",
        "amount_due": charge.amount_minor,
        "amount_paid": charge.amount_minor,
        "amount_remaining": 0,
        "billing_reason": billing_reason,
        "created": seconds(charge.period_start_ms),
        "currency": currency,
        "customer": hub.payment(&s.payment_id).as_ref().map(customer_id),
        "lines": {
            "object": "list",
            "data": [{
                "id": format!("il_{}", invoice_id.trim_start_matches("in_")),
                "object": "line_item",
                "amount": charge.amount_minor,
                "currency": currency,
                "parent": { "type": "subscription_item_details",
                            "subscription_item_details": { "subscription": s.id, "proration": false } },
                "period": { "start": seconds(charge.period_start_ms), "end": seconds(charge.period_end_ms) },
                "quantity": 1
            }],
            "has_more": false
        },
        "livemode": false,
        "parent": {
            "type": "subscription_details",
            "subscription_details": { "metadata": metadata, "subscription": s.id }
        },
        "status": "paid",
    })
}

/// The `billing_reason` of a subscription's charge: the first is `subscription_create`.
pub fn billing_reason(s: &SimSubscription, charge: &SimCharge) -> &'static str {
    if s.charges.first().is_some_and(|first| first.id == charge.id) {
        "subscription_create"
    } else {
        "subscription_cycle"
    }
}

/// The charge id of an invoice.
pub fn invoice_charge_id(invoice_id: &str) -> String {
    format!("ch_{}", invoice_id.trim_start_matches("in_"))
}

/// The PaymentIntent id of an invoice.
pub fn invoice_payment_intent_id(invoice_id: &str) -> String {
    format!("pi_{}", invoice_id.trim_start_matches("in_"))
}

/// The invoice id of a subscription charge's `ch_…` or `pi_…` id.
pub fn invoice_of(charge_or_intent_id: &str) -> Option<String> {
    charge_or_intent_id
        .strip_prefix("ch_")
        .or_else(|| charge_or_intent_id.strip_prefix("pi_"))
        .map(|rest| format!("in_{rest}"))
}

/// The charge of a subscription period's invoice, in the `2025-03-31.basil` shape: no
/// `invoice` field (Stripe removed it), no metadata (Stripe copies none from the subscription);
/// only the PaymentIntent leads back to the invoice, through the Invoice Payments API.
/// `amount_refunded` is the hub's running total, which also counts a lost dispute (Stripe would
/// set `disputed` instead; the gateway reads neither from a charge it looks up).
pub fn subscription_charge(hub: &Hub, s: &SimSubscription, charge: &SimCharge) -> Value {
    let refunded = charge.refunded_minor;
    json!({
        "id": invoice_charge_id(&charge.id),
        "object": "charge",
        "amount": charge.amount_minor,
        "amount_captured": charge.amount_minor,
        "amount_refunded": refunded,
        "captured": true,
        "created": seconds(charge.period_start_ms),
        "currency": s.currency.code().to_ascii_lowercase(),
        "customer": hub.payment(&s.payment_id).as_ref().map(customer_id),
        "disputed": false,
        "livemode": false,
        "metadata": {},
        "paid": true,
        "payment_intent": invoice_payment_intent_id(&charge.id),
        "refunded": refunded >= charge.amount_minor,
        "status": "succeeded",
    })
}

/// A dispute of a subscription charge, in `status`.
pub fn dispute(
    hub: &Hub,
    s: &SimSubscription,
    charge: &SimCharge,
    id: &str,
    status: &str,
) -> Value {
    json!({
        "id": id,
        "object": "dispute",
        "amount": charge.amount_minor,
        "balance_transactions": [],
        "charge": invoice_charge_id(&charge.id),
        "created": seconds(hub.now_ms()),
        "currency": s.currency.code().to_ascii_lowercase(),
        "is_charge_refundable": false,
        "livemode": false,
        "metadata": {},
        "payment_intent": invoice_payment_intent_id(&charge.id),
        "reason": "fraudulent",
        "status": status,
    })
}

/// The invoice payment that links a subscription charge's PaymentIntent to its invoice; the
/// invoice expanded when asked (`expand[]=data.invoice`).
pub fn invoice_payment(hub: &Hub, s: &SimSubscription, charge: &SimCharge, expand: bool) -> Value {
    let invoice = if expand {
        invoice(hub, s, charge, billing_reason(s, charge))
    } else {
        Value::String(charge.id.clone())
    };
    json!({
        "id": format!("inpay_{}", charge.id.trim_start_matches("in_")),
        "object": "invoice_payment",
        "amount_paid": charge.amount_minor,
        "amount_requested": charge.amount_minor,
        "created": seconds(charge.period_start_ms),
        "currency": s.currency.code().to_ascii_lowercase(),
        "invoice": invoice,
        "is_default": true,
        "livemode": false,
        "payment": { "type": "payment_intent", "payment_intent": invoice_payment_intent_id(&charge.id) },
        "status": "paid",
        "status_transitions": { "canceled_at": null, "paid_at": seconds(charge.period_start_ms) },
    })
}

/// A list answer.
pub fn list(url: &str, data: Vec<Value>) -> Value {
    json!({ "object": "list", "data": data, "has_more": false, "url": url })
}

/// What Stripe's test card `4000 0000 0000 0002` is told: a generic decline.
pub const DECLINE_MESSAGE: &str = "Your card was declined.";

/// The PaymentIntent of a payment whose card was declined, as `payment_intent.payment_failed`
/// carries it: the buyer may try another card, and `last_payment_error` says why this one
/// failed.
pub fn declined_payment_intent(payment: &SimPayment) -> Value {
    json!({
        "id": payment_intent_id(payment),
        "object": "payment_intent",
        "amount": payment.amount_minor,
        "created": seconds(payment.created_at_ms),
        "currency": payment.currency.code().to_ascii_lowercase(),
        "last_payment_error": {
            "type": "card_error",
            "code": "card_declined",
            "decline_code": "generic_decline",
            "message": DECLINE_MESSAGE,
        },
        "livemode": false,
        "metadata": stored_map(payment, PAYMENT_INTENT_METADATA),
        "status": "requires_payment_method",
    })
}

/// The charge of a payment, with its cumulative refunds.
pub fn charge(payment: &SimPayment) -> Value {
    json!({
        "id": format!("ch_{}", payment.id.trim_start_matches("cs_")),
        "object": "charge",
        "amount": payment.amount_minor,
        "amount_captured": payment.amount_minor,
        "amount_refunded": payment.refunded_minor,
        "captured": true,
        "created": seconds(payment.created_at_ms),
        "currency": payment.currency.code().to_ascii_lowercase(),
        "livemode": false,
        // Stripe copies the PaymentIntent's metadata (`payment_intent_data[metadata]`) here.
        "metadata": stored_map(payment, PAYMENT_INTENT_METADATA),
        "paid": true,
        "payment_intent": payment_intent_id(payment),
        "refunded": payment.refunded_minor >= payment.amount_minor,
        "status": "succeeded",
    })
}

/// An event envelope around `object`.
pub fn event(hub: &Hub, event_type: &str, object: Value) -> Value {
    json!({
        "id": hub.new_id("evt_sandbox_"),
        "object": "event",
        "api_version": API_VERSION,
        "created": seconds(hub.now_ms()),
        "data": { "object": object },
        "livemode": false,
        "pending_webhooks": 1,
        "request": { "id": null, "idempotency_key": null },
        "type": event_type,
    })
}

/// A refund of a payment's PaymentIntent, done at once (cards refund synchronously here).
pub fn refund(
    hub: &Hub,
    id: &str,
    payment_intent: &str,
    payment: &SimPayment,
    amount_minor: i64,
    metadata: &BTreeMap<String, String>,
) -> Value {
    json!({
        "id": id,
        "object": "refund",
        "amount": amount_minor,
        "balance_transaction": null,
        "charge": format!("ch_{}", payment_intent.trim_start_matches("pi_")),
        "created": seconds(hub.now_ms()),
        "currency": payment.currency.code().to_ascii_lowercase(),
        "metadata": metadata,
        "payment_intent": payment_intent,
        "reason": null,
        "status": "succeeded",
    })
}
