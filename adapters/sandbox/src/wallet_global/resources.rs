//! PayPal's resources as the simulator shows them: orders, captures, subscriptions, sales and
//! refunds in PayPal's JSON shapes, and amounts as PayPal's decimal strings. The simulator
//! formats and reads amounts itself (not with the gateway's code), so that the end-to-end tests
//! check the gateway against an independent implementation.

use domain::Currency;
use serde_json::{Value, json};

use crate::credentials::CREDENTIALS;
use crate::hub::{
    Hub, SimCharge, SimKind, SimPayment, SimStatus, SimSubscription, SimSubscriptionStatus,
};

/// `extra` key: the `PayPal-Request-Id` the order or subscription was created with.
pub(super) const CREATE_REQUEST_ID: &str = "createRequestId";
/// `extra` key: the `PayPal-Request-Id` of the one capture.
pub(super) const CAPTURE_REQUEST_ID: &str = "captureRequestId";
/// `extra` key: the capture's id.
pub(super) const CAPTURE_ID: &str = "captureId";
/// `extra` key: when the capture was made, ms.
pub(super) const CAPTURED_AT_MS: &str = "capturedAtMs";
/// `extra` key: how many captures were made (at most one).
pub(super) const CAPTURES: &str = "captures";
/// `extra` key prefix: the refund made for a `PayPal-Request-Id` (`<refund id> <amount>`).
pub(super) const REFUND_REQUEST_PREFIX: &str = "refundRequest:";
/// `extra` key prefix: the id of the API refund that brought the refunded total to the suffix,
/// which its `PAYMENT.CAPTURE.REFUNDED` carries.
pub(super) const REFUND_ID_AT_PREFIX: &str = "refundIdAt:";
/// `extra` key: the PayPal plan id of a subscription.
pub(super) const PLAN_ID: &str = "planId";
/// `extra` key: whether the order was created with `payment_source` (`PAYER_ACTION_REQUIRED`).
pub(super) const PAYER_ACTION: &str = "payerAction";
/// The e-mail address of the simulator's buyer (the PayPal account a vault saves).
pub(super) const PAYER_EMAIL: &str = "buyer@sandbox.invalid";
/// `extra` key: the subscriber's e-mail address.
pub(super) const EMAIL: &str = "email";

/// The merchant paid (`payee` of orders and captures).
fn payee() -> Value {
    json!({ "merchant_id": CREDENTIALS.paypal_merchant_id, "email_address": "merchant@sandbox.invalid" })
}

/// A PayPal decimal string of `minor` units of `currency`.
pub(super) fn value(minor: i64, currency: Currency) -> String {
    match currency.exponent() {
        0 => minor.to_string(),
        _ => format!("{}.{:02}", minor / 100, minor % 100),
    }
}

/// Minor units of a PayPal decimal string; `None` unless it is a plain non-negative decimal
/// with no more fraction digits than the currency has.
pub(super) fn minor_units(text: &str, currency: Currency) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let decimals = usize::try_from(currency.exponent()).ok()?;
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !plain(whole)
        || !plain(fraction)
        || fraction.len() > decimals
        || text.len() > 20
    {
        return None;
    }
    let padded = format!("{whole}{fraction:0<decimals$}");
    padded.parse().ok()
}

/// PayPal's money object.
pub(super) fn money(minor: i64, currency: Currency) -> Value {
    json!({ "currency_code": currency.code(), "value": value(minor, currency) })
}

/// An RFC 3339 time with seconds, as PayPal writes resource times.
pub(super) fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

fn api_url(hub: &Hub, path: &str) -> String {
    format!("{}/sandbox/wallet_global{path}", hub.public_base_url())
}

fn link(href: String, rel: &str, method: &str) -> Value {
    json!({ "href": href, "rel": rel, "method": method })
}

fn captured_at(payment: &SimPayment) -> i64 {
    payment
        .extra
        .get(CAPTURED_AT_MS)
        .and_then(|t| t.parse().ok())
        .unwrap_or(payment.created_at_ms)
}

/// A capture of a one-time order, in the status its payment is in.
pub(super) fn capture_json(hub: &Hub, payment: &SimPayment) -> Value {
    let status = match payment.status {
        SimStatus::Declined => "DECLINED",
        // A vaulted account's charge held (`slow`): settled later.
        SimStatus::Open => "PENDING",
        _ if payment.refunded_minor >= payment.amount_minor && payment.amount_minor > 0 => {
            "REFUNDED"
        }
        _ if payment.refunded_minor > 0 => "PARTIALLY_REFUNDED",
        _ => "COMPLETED",
    };
    let id = payment
        .extra
        .get(CAPTURE_ID)
        .cloned()
        .unwrap_or_else(|| format!("CAP{}", payment.id));
    let time = iso(captured_at(payment));
    json!({
        "id": id,
        "status": status,
        "amount": money(payment.amount_minor, payment.currency),
        "final_capture": true,
        "disbursement_mode": "INSTANT",
        "seller_protection": { "status": "ELIGIBLE", "dispute_categories": ["ITEM_NOT_RECEIVED", "UNAUTHORIZED_TRANSACTION"] },
        "invoice_id": payment.order_id,
        "custom_id": payment.order_id,
        "payee": payee(),
        "supplementary_data": { "related_ids": { "order_id": payment.id } },
        "create_time": time,
        "update_time": time,
        "links": [
            link(api_url(hub, &format!("/v2/payments/captures/{id}")), "self", "GET"),
            link(api_url(hub, &format!("/v2/payments/captures/{id}/refund")), "refund", "POST"),
            link(api_url(hub, &format!("/v2/checkout/orders/{}", payment.id)), "up", "GET"),
        ],
    })
}

/// An order as `GET /v2/checkout/orders/{id}` shows it. A claimed capture shows as completed
/// even while its webhooks are still being delivered.
pub(super) fn order_json(hub: &Hub, payment: &SimPayment) -> Value {
    let claimed = payment.extra.contains_key(CAPTURE_ID);
    let status = match payment.status {
        // A vaulted account's charge is captured at creation; `slow` holds its capture.
        SimStatus::Open if super::api::vault::is_charge(payment) => "COMPLETED",
        SimStatus::Open if payment.extra.contains_key(PAYER_ACTION) => "PAYER_ACTION_REQUIRED",
        SimStatus::Open => "CREATED",
        SimStatus::Approved if claimed => "COMPLETED",
        SimStatus::Approved => "APPROVED",
        SimStatus::Paid | SimStatus::Declined => "COMPLETED",
        SimStatus::Canceled => "VOIDED",
    };
    let mut unit = json!({
        "reference_id": payment.order_id,
        "custom_id": payment.order_id,
        "invoice_id": payment.order_id,
        "amount": money(payment.amount_minor, payment.currency),
        "payee": payee(),
    });
    if status == "COMPLETED" {
        unit["payments"] = json!({ "captures": [capture_json(hub, payment)] });
    }
    let mut links = vec![link(
        api_url(hub, &format!("/v2/checkout/orders/{}", payment.id)),
        "self",
        "GET",
    )];
    match status {
        "PAYER_ACTION_REQUIRED" => {
            links.push(link(hub.checkout_url(&payment.id), "payer-action", "GET"))
        }
        "CREATED" => links.push(link(hub.checkout_url(&payment.id), "approve", "GET")),
        "APPROVED" => links.push(link(
            api_url(hub, &format!("/v2/checkout/orders/{}/capture", payment.id)),
            "capture",
            "POST",
        )),
        _ => {}
    }
    let mut order = json!({
        "id": payment.id,
        "intent": "CAPTURE",
        "status": status,
        "purchase_units": [unit],
        "create_time": iso(payment.created_at_ms),
        "links": links,
    });
    if !matches!(payment.status, SimStatus::Open | SimStatus::Canceled) {
        order["payer"] = json!({ "payer_id": "SANDBOXPAYER1", "email_address": PAYER_EMAIL, "name": { "given_name": "Sandbox", "surname": "Buyer" } });
    }
    if let Some(source) = super::api::vault::payment_source(hub, payment) {
        order["payment_source"] = source;
    }
    order
}

/// A subscription as `GET /v1/billing/subscriptions/{id}` shows it; `subscription` is the
/// hub's record once the first payment is made.
pub(super) fn subscription_json(
    hub: &Hub,
    payment: &SimPayment,
    subscription: Option<&SimSubscription>,
) -> Value {
    let status = match (subscription.map(|s| s.status), payment.status) {
        (Some(SimSubscriptionStatus::Active), _) => "ACTIVE",
        (Some(SimSubscriptionStatus::CancelScheduled | SimSubscriptionStatus::Canceled), _) => {
            "CANCELLED"
        }
        (None, SimStatus::Canceled | SimStatus::Declined) => "CANCELLED",
        (None, _) => "APPROVAL_PENDING",
    };
    let cycles = subscription.map_or(0, |s| s.renewals + 1);
    let mut billing = json!({
        "outstanding_balance": money(0, payment.currency),
        "cycle_executions": [{
            "tenure_type": "REGULAR", "sequence": 1, "cycles_completed": cycles,
            "cycles_remaining": 0, "current_pricing_scheme_version": 1, "total_cycles": 0
        }],
        "failed_payments_count": 0,
    });
    if let Some(s) = subscription {
        // What the last charge paid: an approved revision bills its price from the next one.
        let paid = s.charges.last().map_or(s.amount_minor, |c| c.amount_minor);
        billing["last_payment"] =
            json!({ "amount": money(paid, s.currency), "time": iso(s.period_start_ms) });
        if status == "ACTIVE" {
            billing["next_billing_time"] = json!(iso(s.period_end_ms));
        }
    }
    let self_url = api_url(hub, &format!("/v1/billing/subscriptions/{}", payment.id));
    let mut links = vec![
        link(self_url.clone(), "self", "GET"),
        link(self_url.clone(), "edit", "PATCH"),
    ];
    match status {
        "APPROVAL_PENDING" => {
            links.insert(0, link(hub.checkout_url(&payment.id), "approve", "GET"))
        }
        "ACTIVE" => links.push(link(format!("{self_url}/cancel"), "cancel", "POST")),
        _ => {}
    }
    let email = payment
        .extra
        .get(EMAIL)
        .map_or("buyer@sandbox.invalid", String::as_str);
    json!({
        "id": payment.id,
        "plan_id": payment.extra.get(PLAN_ID),
        "status": status,
        "start_time": iso(payment.created_at_ms),
        "quantity": "1",
        "custom_id": payment.order_id,
        "plan_overridden": true,
        "subscriber": { "email_address": email, "payer_id": "SANDBOXPAYER1" },
        "billing_info": billing,
        "create_time": iso(payment.created_at_ms),
        "update_time": iso(hub.now_ms()),
        "links": links,
    })
}

/// The plan details a subscription shows with `?fields=plan`: one regular cycle at the price
/// and interval it bills (the sandbox's plans are the gateway's overrides).
pub(super) fn plan_json(payment: &SimPayment, subscription: Option<&SimSubscription>) -> Value {
    let (amount_minor, months) = match (subscription, &payment.kind) {
        (Some(s), _) => (s.amount_minor, s.interval_months),
        (
            None,
            SimKind::Subscription {
                interval_months, ..
            },
        ) => (payment.amount_minor, *interval_months),
        (None, SimKind::OneTime) => (payment.amount_minor, 1),
    };
    json!({
        "billing_cycles": [{
            "tenure_type": "REGULAR",
            "sequence": 1,
            "total_cycles": 0,
            "frequency": { "interval_unit": "MONTH", "interval_count": months },
            "pricing_scheme": { "fixed_price": money(amount_minor, payment.currency) },
        }],
    })
}

/// A subscription payment in the v1 `sale` format (`PAYMENT.SALE.COMPLETED`).
pub(super) fn sale_json(hub: &Hub, subscription: &SimSubscription, sale_id: &str) -> Value {
    let amount = value(subscription.amount_minor, subscription.currency);
    let time = iso(hub.now_ms());
    json!({
        "id": sale_id,
        "state": "completed",
        "amount": { "total": amount, "currency": subscription.currency.code(), "details": { "subtotal": amount } },
        "payment_mode": "INSTANT_TRANSFER",
        "protection_eligibility": "ELIGIBLE",
        "protection_eligibility_type": "ITEM_NOT_RECEIVED_ELIGIBLE,UNAUTHORIZED_PAYMENT_ELIGIBLE",
        "billing_agreement_id": subscription.payment_id,
        "create_time": time,
        "update_time": time,
        "links": [
            link(api_url(hub, &format!("/v1/payments/sale/{sale_id}")), "self", "GET"),
            link(api_url(hub, &format!("/v1/payments/sale/{sale_id}/refund")), "refund", "POST"),
        ],
    })
}

/// A refund of a capture (`PAYMENT.CAPTURE.REFUNDED`). Like PayPal's own samples it carries no
/// `custom_id`: the gateway finds the order through the `up` link's capture.
pub(super) fn refund_json(
    hub: &Hub,
    payment: &SimPayment,
    refund_id: &str,
    amount_minor: i64,
) -> Value {
    let capture_id = payment
        .extra
        .get(CAPTURE_ID)
        .cloned()
        .unwrap_or_else(|| format!("CAP{}", payment.id));
    let time = iso(hub.now_ms());
    json!({
        "id": refund_id,
        "status": "COMPLETED",
        "amount": money(amount_minor, payment.currency),
        "seller_payable_breakdown": {
            "gross_amount": money(amount_minor, payment.currency),
            "net_amount": money(amount_minor, payment.currency),
            "total_refunded_amount": money(payment.refunded_minor, payment.currency),
        },
        "create_time": time,
        "update_time": time,
        "links": [
            link(api_url(hub, &format!("/v2/payments/refunds/{refund_id}")), "self", "GET"),
            link(api_url(hub, &format!("/v2/payments/captures/{capture_id}")), "up", "GET"),
        ],
    })
}

/// A subscription's sale as `GET /v1/payments/sale/{id}` shows it now.
pub(super) fn sale_of_charge(
    hub: &Hub,
    subscription: &SimSubscription,
    charge: &SimCharge,
) -> Value {
    let state = match charge.refunded_minor {
        0 => "completed",
        r if r >= charge.amount_minor => "refunded",
        _ => "partially_refunded",
    };
    let mut sale = sale_json(hub, subscription, &charge.id);
    sale["state"] = json!(state);
    sale["amount"]["total"] = json!(value(charge.amount_minor, subscription.currency));
    sale["amount"]["details"]["subtotal"] = sale["amount"]["total"].clone();
    sale["create_time"] = json!(iso(charge.period_start_ms));
    sale
}

/// A refund of a subscription's sale (`PAYMENT.SALE.REFUNDED`) in the v1 format of PayPal's
/// sample: this refund's amount, written negative, the refunded `sale_id`, no running total and
/// no subscription id.
pub(super) fn sale_refund_json(
    hub: &Hub,
    sale_id: &str,
    currency: Currency,
    refund_id: &str,
    amount_minor: i64,
) -> Value {
    let time = iso(hub.now_ms());
    let parent = format!("PAY-{}", sale_id.trim_start_matches("SALE-"));
    json!({
        "id": refund_id,
        "create_time": time,
        "update_time": time,
        "state": "completed",
        "amount": { "total": format!("-{}", value(amount_minor, currency)), "currency": currency.code() },
        "sale_id": sale_id,
        "parent_payment": parent,
        "links": [
            link(api_url(hub, &format!("/v1/payments/refund/{refund_id}")), "self", "GET"),
            link(api_url(hub, &format!("/v1/payments/payment/{parent}")), "parent_payment", "GET"),
            link(api_url(hub, &format!("/v1/payments/sale/{sale_id}")), "sale", "GET"),
        ],
    })
}

/// A dispute of a subscription's sale (`CUSTOMER.DISPUTE.*`): open, or resolved in the buyer's
/// favour (the disputed amount went back to the buyer).
pub(super) fn dispute_json(
    hub: &Hub,
    subscription: &SimSubscription,
    charge: &SimCharge,
    dispute_id: &str,
    amount_minor: i64,
    resolved: bool,
) -> Value {
    let time = iso(hub.now_ms());
    let amount = money(amount_minor, subscription.currency);
    let mut dispute = json!({
        "dispute_id": dispute_id,
        "create_time": time,
        "update_time": time,
        "disputed_transactions": [{
            "seller_transaction_id": charge.id,
            "seller": { "merchant_id": CREDENTIALS.paypal_merchant_id },
            "items": [],
            "seller_protection_eligible": true
        }],
        "reason": "UNAUTHORISED",
        "status": if resolved { "RESOLVED" } else { "OPEN" },
        "dispute_amount": amount,
        "dispute_life_cycle_stage": "CHARGEBACK",
        "dispute_channel": "EXTERNAL",
        "links": [link(api_url(hub, &format!("/v1/customer/disputes/{dispute_id}")), "self", "GET")],
    });
    if resolved {
        dispute["dispute_outcome"] =
            json!({ "outcome_code": "RESOLVED_BUYER_FAVOUR", "amount_refunded": amount });
    }
    dispute
}

/// Whether the simulator treats `payment` as a PayPal subscription.
pub(super) fn is_subscription(payment: &SimPayment) -> bool {
    matches!(payment.kind, SimKind::Subscription { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_written_and_read_in_major_units() {
        assert_eq!(value(1799, Currency::Usd), "17.99");
        assert_eq!(value(5, Currency::Usd), "0.05");
        assert_eq!(value(1000, Currency::Jpy), "1000");
        assert_eq!(minor_units("17.99", Currency::Usd), Some(1799));
        assert_eq!(minor_units("17.9", Currency::Usd), Some(1790));
        assert_eq!(minor_units("17", Currency::Usd), Some(1700));
        assert_eq!(minor_units("1000", Currency::Jpy), Some(1000));
        assert_eq!(minor_units("10.5", Currency::Jpy), None);
        assert_eq!(minor_units("1.999", Currency::Usd), None);
        assert_eq!(minor_units("-1", Currency::Usd), None);
        assert_eq!(minor_units("", Currency::Usd), None);
    }
}
