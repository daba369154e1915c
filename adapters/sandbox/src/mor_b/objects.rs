//! The Dodo Payments objects the simulated `mor_b` answers with and sends in webhooks: checkout
//! sessions, payments, refunds, subscriptions and the webhook envelope, plus Dodo's error body.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat};
use poem::http::StatusCode;
use poem::web::Json;
use poem::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::hub::{Hub, SimCharge, SimPayment, SimStatus, SimSubscription, SimSubscriptionStatus};

/// The simulated business.
pub const BUSINESS_ID: &str = "bus_sandbox_tally";
/// The customer of every sandbox payment.
pub const CUSTOMER_ID: &str = "cus_sandbox_tally";
/// The card of every sandbox payment, as Dodo's payments name its network.
pub const CARD_NETWORK: &str = "VISA";
/// Its last four digits.
pub const CARD_LAST4: &str = "4242";
/// `extra` key: the session's `metadata`, as JSON.
pub const METADATA: &str = "metadata";
/// `extra` key: the payment id the session's payment gets.
pub const PAYMENT_ID: &str = "paymentId";
/// `extra` key: the product bought.
pub const PRODUCT_ID: &str = "productId";
/// `extra` key: the buyer's e-mail address.
pub const CUSTOMER_EMAIL: &str = "customerEmail";
/// `extra` key: the buyer's name, when the checkout was given one.
pub const CUSTOMER_NAME: &str = "customerName";
/// `extra` key: the payment's refunds, as JSON.
pub const REFUNDS: &str = "refunds";
/// `extra` key: the refunds of the session's subscription's charges, by charge id, as JSON.
pub const CHARGE_REFUNDS: &str = "chargeRefunds";
/// `extra` key: the lost disputes of the session's subscription's charges, by charge id.
pub const CHARGE_DISPUTES: &str = "chargeDisputes";

/// One refund of a payment, as the sandbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptRefund {
    /// `ref_…`.
    pub refund_id: String,
    /// Minor units.
    pub amount: i64,
    /// When, ms.
    pub created_at_ms: i64,
    /// The metadata given with `POST /refunds` (none for refunds made at the hub).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The reason given with `POST /refunds`.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A refused request, answered in Dodo's `{"code", "message"}` shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DodoError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl IntoResponse for DodoError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({ "code": self.code, "message": self.message })),
        )
            .into_response()
    }
}

/// Dodo's error with `status`.
pub fn error(status: StatusCode, code: &'static str, message: &str) -> DodoError {
    DodoError {
        status,
        code,
        message: message.to_owned(),
    }
}

/// RFC 3339 with milliseconds, UTC, as Dodo writes times.
pub fn rfc3339(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// A session's `metadata`.
pub fn metadata(payment: &SimPayment) -> BTreeMap<String, String> {
    payment
        .extra
        .get(METADATA)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// A payment's refunds so far.
pub fn refunds(payment: &SimPayment) -> Vec<KeptRefund> {
    payment
        .extra
        .get(REFUNDS)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The refunds of a subscription's charges, by charge id.
pub fn charge_refunds(session: &SimPayment) -> BTreeMap<String, Vec<KeptRefund>> {
    session
        .extra
        .get(CHARGE_REFUNDS)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The lost disputes of a subscription's charges: dispute id by charge id.
pub fn charge_disputes(session: &SimPayment) -> BTreeMap<String, String> {
    session
        .extra
        .get(CHARGE_DISPUTES)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

fn customer(payment: Option<&SimPayment>) -> Value {
    let email = payment
        .and_then(|p| p.extra.get(CUSTOMER_EMAIL))
        .cloned()
        .unwrap_or_else(|| "buyer@sandbox.invalid".into());
    let name = payment
        .and_then(|p| p.extra.get(CUSTOMER_NAME))
        .cloned()
        .unwrap_or_else(|| "Sandbox Buyer".into());
    json!({ "customer_id": CUSTOMER_ID, "email": email, "name": name })
}

fn payment_id(payment: &SimPayment) -> String {
    payment
        .extra
        .get(PAYMENT_ID)
        .cloned()
        .unwrap_or_else(|| format!("pay_{}", payment.id))
}

/// `GET /checkouts/{id}`: a payment exists once the buyer paid or was declined.
pub fn session_status(payment: &SimPayment) -> Value {
    let status = match payment.status {
        SimStatus::Paid => Some("succeeded"),
        SimStatus::Declined => Some("failed"),
        SimStatus::Open | SimStatus::Approved | SimStatus::Canceled => None,
    };
    json!({
        "id": payment.id,
        "created_at": rfc3339(payment.created_at_ms),
        "customer_email": payment.extra.get(CUSTOMER_EMAIL),
        "customer_name": payment.extra.get(CUSTOMER_NAME),
        "payment_id": status.map(|_| payment_id(payment)),
        "payment_status": status,
    })
}

/// What a payment object shows of the session's own payment or of one of its subscription's
/// charges.
struct Shown {
    id: String,
    amount: i64,
    refunds: Vec<KeptRefund>,
    subscription_id: Option<String>,
    created_at_ms: i64,
    dispute: Option<String>,
}

fn shown(session: &SimPayment, charge: Option<(&SimCharge, &SimSubscription)>) -> Shown {
    match charge {
        Some((c, s)) => {
            let mut refunds = charge_refunds(session).remove(&c.id).unwrap_or_default();
            if s.charges.first().is_some_and(|first| first.id == c.id) {
                refunds.extend(self::refunds(session));
            }
            Shown {
                id: c.id.clone(),
                amount: c.amount_minor,
                refunds,
                subscription_id: Some(s.id.clone()),
                created_at_ms: c.period_start_ms,
                dispute: charge_disputes(session).remove(&c.id),
            }
        }
        None => Shown {
            id: payment_id(session),
            amount: session.amount_minor,
            refunds: self::refunds(session),
            subscription_id: session
                .subscription_id
                .clone()
                .or_else(|| super::on_demand::subscription_of(session)),
            created_at_ms: session.created_at_ms,
            dispute: None,
        },
    }
}

/// A payment: the session's own, or (with `charge`) one of its subscription's charges (the
/// first period's charge is the session's payment, under the charge's id).
pub fn payment(
    hub: &Hub,
    session: &SimPayment,
    charge: Option<(&SimCharge, &SimSubscription)>,
) -> Value {
    let charged = super::on_demand::is_charge(session);
    let status = payment_status(session);
    // A charge bills the subscription's price, which may have changed since the session.
    let currency = charge.map_or(session.currency, |(_, s)| s.currency);
    let Shown {
        id,
        amount,
        refunds,
        subscription_id,
        created_at_ms,
        dispute,
    } = shown(session, charge);
    let (error_code, error_message) = failure(session);
    let refunds: Vec<Value> = refunds
        .iter()
        .map(|r| refund_object(session, &id, r, false))
        .collect();
    let disputes: Vec<Value> = dispute
        .iter()
        .map(|d| dispute_object(session, &id, d, amount, "dispute_lost", false))
        .collect();
    json!({
        "payload_type": "Payment",
        "billing": { "city": "Sandbox", "country": "US", "state": "CA", "street": "1 Test Street", "zipcode": "94103" },
        "brand_id": BUSINESS_ID,
        "business_id": BUSINESS_ID,
        "card_issuing_country": "US",
        "card_last_four": CARD_LAST4,
        "card_network": CARD_NETWORK,
        "card_type": "CREDIT",
        "checkout_session_id": (charge.is_none() && !charged).then(|| session.id.clone()),
        "created_at": rfc3339(created_at_ms),
        "currency": currency.code(),
        "customer": customer(Some(session)),
        "digital_products_delivered": false,
        "disputes": disputes,
        "error_code": error_code,
        "error_message": error_message,
        "metadata": metadata(session),
        "payment_id": id,
        "payment_method": "card",
        "product_cart": [{ "product_id": session.extra.get(PRODUCT_ID), "quantity": 1 }],
        "refunds": refunds,
        "settlement_amount": amount,
        "settlement_currency": currency.code(),
        "settlement_tax": 0,
        "status": status,
        "subscription_id": subscription_id,
        "tax": 0,
        "total_amount": amount,
        "updated_at": rfc3339(hub.now_ms()),
    })
}

/// The `error_code` of a declined payment (Dodo's standardized failure reasons).
pub const DECLINE_CODE: &str = "CARD_DECLINED";
/// The `error_message` of a declined payment.
pub const DECLINE_MESSAGE: &str = "The card was declined by the issuing bank.";

/// Null until a payment fails; a declined card says why, as Dodo's `payment.failed` does: an
/// on-demand charge's own `error_code` and `error_message`, else a generic decline.
fn failure(payment: &SimPayment) -> (Option<&str>, Option<&str>) {
    if payment.status != SimStatus::Declined {
        return (None, None);
    }
    let kept = |key: &str, otherwise: &'static str| {
        payment.extra.get(key).map_or(otherwise, String::as_str)
    };
    (
        Some(kept(super::on_demand::ERROR_CODE, DECLINE_CODE)),
        Some(kept(super::on_demand::ERROR_MESSAGE, DECLINE_MESSAGE)),
    )
}

/// Dodo's payment `status` for a simulated payment's: an on-demand charge exists from the
/// start, `processing` until it settles; a session has a payment once paid or declined.
fn payment_status(payment: &SimPayment) -> &'static str {
    match payment.status {
        SimStatus::Open if super::on_demand::is_charge(payment) => "processing",
        SimStatus::Paid => "succeeded",
        SimStatus::Declined => "failed",
        SimStatus::Canceled => "cancelled",
        SimStatus::Open | SimStatus::Approved => "requires_payment_method",
    }
}

/// A row of `GET /payments` for a payment object made by [`payment`].
pub fn list_item(payment: &Value) -> Value {
    let mut item = json!({});
    for key in [
        "brand_id",
        "created_at",
        "currency",
        "customer",
        "digital_products_delivered",
        "metadata",
        "payment_id",
        "payment_method",
        "status",
        "subscription_id",
        "total_amount",
    ] {
        item[key] = payment.get(key).cloned().unwrap_or(Value::Null);
    }
    item["has_license_key"] = json!(false);
    item["payment_provider"] = json!("stripe");
    item
}

/// A dispute of a payment (Dodo's `Dispute`; the amount is a string).
pub fn dispute_object(
    session: &SimPayment,
    payment_id: &str,
    dispute_id: &str,
    amount_minor: i64,
    status: &str,
    with_type: bool,
) -> Value {
    let mut object = json!({
        "amount": amount_minor.to_string(),
        "business_id": BUSINESS_ID,
        "created_at": rfc3339(session.created_at_ms),
        "currency": session.currency.code(),
        "dispute_id": dispute_id,
        "dispute_stage": "chargeback",
        "dispute_status": status,
        "payment_id": payment_id,
        "remarks": "disputed in the sandbox",
    });
    if with_type {
        object["payload_type"] = "Dispute".into();
    }
    object
}

/// A refund of the session's payment.
pub fn refund_object(
    session: &SimPayment,
    payment_id: &str,
    refund: &KeptRefund,
    with_type: bool,
) -> Value {
    let mut object = json!({
        "brand_id": BUSINESS_ID,
        "business_id": BUSINESS_ID,
        "created_at": rfc3339(refund.created_at_ms),
        "currency": session.currency.code(),
        "customer": customer(Some(session)),
        "is_partial": refund.amount < session.amount_minor,
        "metadata": refund.metadata,
        "payment_id": payment_id,
        "reason": refund.reason.as_deref().unwrap_or("requested in the sandbox"),
        "refund_id": refund.refund_id,
        "status": "succeeded",
        "amount": refund.amount,
    });
    if with_type {
        object["payload_type"] = "Refund".into();
    }
    object
}

/// The id of the payment a session made.
pub fn session_payment_id(session: &SimPayment) -> String {
    payment_id(session)
}

/// A subscription as Dodo shows it now.
pub fn subscription(hub: &Hub, s: &SimSubscription) -> Value {
    let session = hub.payment(&s.payment_id);
    let (status, at_period_end) = match s.status {
        SimSubscriptionStatus::Active => ("active", false),
        SimSubscriptionStatus::CancelScheduled => ("active", true),
        SimSubscriptionStatus::Canceled => ("cancelled", false),
    };
    json!({
        "payload_type": "Subscription",
        "addons": [],
        "billing": { "city": "Sandbox", "country": "US", "state": "CA", "street": "1 Test Street", "zipcode": "94103" },
        "cancel_at_next_billing_date": at_period_end,
        "cancelled_at": (s.status != SimSubscriptionStatus::Active).then(|| rfc3339(hub.now_ms())),
        "created_at": rfc3339(session.as_ref().map_or(s.period_start_ms, |p| p.created_at_ms)),
        "credit_entitlement_cart": [],
        "currency": s.currency.code(),
        "customer": customer(session.as_ref()),
        "metadata": session.as_ref().map(metadata).unwrap_or_default(),
        "meter_credit_entitlement_cart": [],
        "meters": [],
        "next_billing_date": rfc3339(s.period_end_ms),
        "on_demand": false,
        "payment_frequency_count": s.interval_months,
        "payment_frequency_interval": "Month",
        "previous_billing_date": rfc3339(s.period_start_ms),
        "product_id": session.as_ref().and_then(|p| p.extra.get(PRODUCT_ID).cloned()),
        "quantity": 1,
        "recurring_pre_tax_amount": s.amount_minor,
        "status": status,
        "subscription_id": s.id,
        "subscription_period_count": 10,
        "subscription_period_interval": "Year",
        "tax_inclusive": false,
        "trial_period_days": 0,
    })
}

/// A webhook body: `{business_id, type, timestamp, data}`.
pub fn envelope(hub: &Hub, event_type: &str, data: Value) -> Value {
    json!({ "business_id": BUSINESS_ID, "type": event_type, "timestamp": rfc3339(hub.now_ms()), "data": data })
}
