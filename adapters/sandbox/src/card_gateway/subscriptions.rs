//! Stripe's subscription update, as the sandbox simulates it: switching the Price of a
//! subscription's one item (`items[0][id]` + `items[0][price]`, `proration_behavior`), and
//! withdrawing a scheduled cancellation (`cancel_at_period_end=false`). Each sends the events
//! Stripe sends: `customer.subscription.updated` with `data.previous_attributes`, and for an
//! upgrade invoiced now (`always_invoice`) the proration's `invoice.paid`
//! (`billing_reason=subscription_update`).
//!
//! A change of billing interval (monthly ↔ yearly) is simulated as Stripe documents it: the
//! billing cycle restarts at the change (`billing_cycle_anchor` = now, a period of the new
//! interval in calendar months) and the new period is invoiced at once
//! (`billing_reason=subscription_update`), less the unused time of the current period when
//! prorating: a proration line credits the unused time, a line bills the new period. Every
//! change invoice is kept among the subscription's charges, so it can be refunded like a
//! period's (`charge.refunded`).
//!
//! The sandbox cannot look a Price up: the gateway sends the new price in `metadata[…]`, as at
//! checkout. The subscription's metadata (the change's `metadata[planChangeAt]` among it) is
//! kept and copied onto its invoices, as Stripe does. It keeps Stripe's refusals that matter to
//! Tally: an unknown item, a Price in another currency, a canceled subscription.

use std::collections::BTreeMap;
use std::str::FromStr;

use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use serde_json::{Value, json};

use super::objects::{self, StripeError, error};
use super::{bad, sign};
use crate::hub::{Hub, SimCharge, SimKind, SimSubscription, SimSubscriptionStatus};

const SWITCH_KEYS: [&str; 8] = [
    "items[0][id]",
    "items[0][price]",
    "proration_behavior",
    "metadata[planId]",
    "metadata[amountMinor]",
    "metadata[currency]",
    "metadata[intervalMonths]",
    "metadata[planChangeAt]",
];

/// What a switch asks for.
struct Switch {
    price_id: String,
    amount_minor: i64,
    currency: Currency,
    interval_months: u32,
    invoice_now: bool,
    /// `metadata[planChangeAt]`, kept on the subscription's metadata.
    change_at: Option<String>,
}

fn read_switch(
    s: &SimSubscription,
    form: &BTreeMap<String, String>,
) -> Result<Switch, StripeError> {
    if let Some(unknown) = form.keys().find(|k| !SWITCH_KEYS.contains(&k.as_str())) {
        let name: String = unknown.chars().take(64).collect();
        return Err(bad(&format!("Received unknown parameter: {name}"), unknown));
    }
    let item = format!("si_{}", s.id.trim_start_matches("sub_"));
    if form.get("items[0][id]") != Some(&item) {
        return Err(bad(
            "No such subscription item: items[0][id] must name the subscription's item",
            "items[0][id]",
        ));
    }
    let price_id = form
        .get("items[0][price]")
        .filter(|p| !p.is_empty())
        .cloned()
        .ok_or_else(|| {
            bad(
                "Missing required param: items[0][price].",
                "items[0][price]",
            )
        })?;
    let invoice_now = match form.get("proration_behavior").map(String::as_str) {
        None | Some("create_prorations") | Some("none") => false,
        Some("always_invoice") => true,
        Some(_) => {
            return Err(bad(
                "Invalid proration_behavior: must be one of create_prorations, always_invoice, or none",
                "proration_behavior",
            ));
        }
    };
    let hint = "the sandbox cannot look up Prices: send metadata[amountMinor], \
                metadata[currency] and metadata[intervalMonths]";
    let amount_minor = form
        .get("metadata[amountMinor]")
        .and_then(|a| a.parse::<i64>().ok())
        .filter(|a| *a > 0)
        .ok_or_else(|| bad(hint, "metadata[amountMinor]"))?;
    let currency = form
        .get("metadata[currency]")
        .and_then(|c| Currency::from_str(&c.to_ascii_uppercase()).ok())
        .ok_or_else(|| bad(hint, "metadata[currency]"))?;
    let interval_months = form
        .get("metadata[intervalMonths]")
        .and_then(|i| i.parse::<u32>().ok())
        .filter(|i| (1..=12).contains(i))
        .ok_or_else(|| bad(hint, "metadata[intervalMonths]"))?;
    Ok(Switch {
        price_id,
        amount_minor,
        currency,
        interval_months,
        invoice_now,
        change_at: form.get("metadata[planChangeAt]").cloned(),
    })
}

/// `POST /v1/subscriptions/{id}` with `items[0][…]`: switch the Price, send the events.
pub(super) async fn switch_price(
    hub: &Hub,
    s: &SimSubscription,
    form: &BTreeMap<String, String>,
) -> Result<Value, StripeError> {
    if s.status == SimSubscriptionStatus::Canceled {
        return Err(bad(
            "A canceled subscription can only update its cancellation_details and metadata.",
            "items",
        ));
    }
    let switch = read_switch(s, form)?;
    if switch.currency != s.currency {
        return Err(bad(
            "The price specified does not match the currency of the subscription.",
            "items[0][price]",
        ));
    }
    let before = objects::subscription(hub, s);
    let (invoice, after) = if switch.interval_months == s.interval_months {
        let invoice = switch
            .invoice_now
            .then(|| proration(hub, s, switch.amount_minor))
            .flatten();
        let after = hub
            .update_subscription(&s.id, |s| {
                s.amount_minor = switch.amount_minor;
                s.charges.extend(invoice.clone());
                Ok(s.clone())
            })
            .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string(), None))?;
        (invoice.map(|charge| (charge, None)), after)
    } else {
        // The cycle restarts now; the new period is invoiced at once, less the unused time.
        let (charge, credit) = interval_invoice(hub, s, &switch);
        let after = restart(hub, s, &switch, &charge)?;
        (Some((charge, Some(credit))), after)
    };
    keep_on_payment(hub, s, &switch);
    let mut updated = objects::event(
        hub,
        "customer.subscription.updated",
        objects::subscription(hub, &after),
    );
    updated["data"]["previous_attributes"] = json!({ "items": before["items"] });
    let mut events = vec![updated];
    if let Some((charge, credit)) = invoice {
        let mut object = objects::invoice(hub, &after, &charge, "subscription_update");
        change_lines(&mut object, credit, &switch);
        events.push(objects::event(hub, "invoice.paid", object));
    }
    let webhooks = events.iter().map(|e| sign(hub, e)).collect();
    hub.deliver(
        ProviderId::CardGateway,
        &after.notify_url,
        webhooks,
        Some(after.payment_id.clone()),
    )
    .await;
    Ok(objects::subscription(hub, &after))
}

/// The new Price on the payment (its plan), and the subscription's metadata with the change's
/// mark, which later invoices carry.
fn keep_on_payment(hub: &Hub, s: &SimSubscription, switch: &Switch) {
    let _ = hub.update_payment(&s.payment_id, |p| {
        if let SimKind::Subscription { plan_ref, .. } = &mut p.kind {
            *plan_ref = Some(switch.price_id.clone());
        }
        if let Some(at) = &switch.change_at {
            let mut metadata = objects::subscription_metadata(p);
            metadata.insert("planChangeAt".into(), at.clone());
            if let Ok(json) = serde_json::to_string(&metadata) {
                p.extra
                    .insert(objects::SUBSCRIPTION_METADATA.to_owned(), json);
            }
        }
        Ok(())
    });
}

/// The invoice of a change of interval now: the new period (now plus the new interval in
/// calendar months) at the new price, less the unused share of the current period's price when
/// prorating; and that credit (zero or negative).
fn interval_invoice(hub: &Hub, s: &SimSubscription, switch: &Switch) -> (SimCharge, i64) {
    // Stripe's times are whole seconds: the new period starts at least a second after the
    // current one did (a change in its first second would otherwise restart it at its start).
    let now = hub
        .now_ms()
        .max(s.period_start_ms + 1000)
        .min(s.period_end_ms);
    let total = i128::from((s.period_end_ms - s.period_start_ms).max(1));
    let left = i128::from(s.period_end_ms - now);
    let unused = if switch.invoice_now {
        i64::try_from(i128::from(s.amount_minor) * left / total).unwrap_or(0)
    } else {
        0
    };
    let charge = SimCharge {
        id: hub.new_id("in_sandbox_"),
        period_start_ms: now,
        period_end_ms: crate::hub::add_months(now, switch.interval_months),
        amount_minor: (switch.amount_minor - unused).max(0),
        refunded_minor: 0,
    };
    (charge, -unused)
}

/// The subscription after a change of interval: the new price and interval, anchored and paid
/// from the change; the invoice among its charges.
fn restart(
    hub: &Hub,
    s: &SimSubscription,
    switch: &Switch,
    invoice: &SimCharge,
) -> Result<SimSubscription, StripeError> {
    hub.update_subscription(&s.id, |s| {
        s.amount_minor = switch.amount_minor;
        s.interval_months = switch.interval_months;
        s.anchor_ms = invoice.period_start_ms;
        s.period_start_ms = invoice.period_start_ms;
        s.period_end_ms = invoice.period_end_ms;
        s.charges.push(invoice.clone());
        Ok(s.clone())
    })
    .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string(), None))
}

/// A change invoice's lines as Stripe shows them: a proration is marked as one; a change of
/// interval has the credit for the unused time and a line for the new period at the new Price.
fn change_lines(object: &mut Value, credit: Option<i64>, switch: &Switch) {
    let Some(mut line) = object["lines"]["data"].get(0).cloned() else {
        return;
    };
    let Some(credit) = credit else {
        line["parent"]["subscription_item_details"]["proration"] = json!(true);
        object["lines"]["data"] = json!([line]);
        return;
    };
    let mut unused = line.clone();
    unused["id"] = json!(format!("{}_unused", line["id"].as_str().unwrap_or("il")));
    unused["amount"] = json!(credit);
    unused["parent"]["subscription_item_details"]["proration"] = json!(true);
    line["amount"] = json!(switch.amount_minor);
    line["pricing"] = json!({
        "type": "price_details",
        "price_details": { "price": switch.price_id },
        "unit_amount_decimal": switch.amount_minor.to_string(),
    });
    let lines = if credit < 0 {
        json!([unused, line])
    } else {
        json!([line])
    };
    object["lines"]["data"] = lines;
}

/// The proration invoice of an upgrade invoiced now: the price difference for what is left of
/// the paid period (none for a downgrade).
fn proration(hub: &Hub, s: &SimSubscription, new_amount: i64) -> Option<SimCharge> {
    let now = hub.now_ms().clamp(s.period_start_ms, s.period_end_ms);
    let total = i128::from((s.period_end_ms - s.period_start_ms).max(1));
    let left = i128::from(s.period_end_ms - now);
    let difference = i128::from(new_amount - s.amount_minor);
    let amount = i64::try_from(difference * left / total).ok()?;
    (amount > 0).then(|| SimCharge {
        id: hub.new_id("in_sandbox_"),
        period_start_ms: now,
        period_end_ms: s.period_end_ms,
        amount_minor: amount,
        refunded_minor: 0,
    })
}

/// `POST /v1/subscriptions/{id}` with `cancel_at_period_end=false`: a scheduled cancellation is
/// withdrawn (an event tells it); on a renewing subscription nothing changes.
pub(super) async fn resume(hub: &Hub, s: &SimSubscription) -> Result<Value, StripeError> {
    match s.status {
        SimSubscriptionStatus::Canceled => Err(bad(
            "A canceled subscription can only update its cancellation_details and metadata.",
            "cancel_at_period_end",
        )),
        SimSubscriptionStatus::Active => Ok(objects::subscription(hub, s)),
        SimSubscriptionStatus::CancelScheduled => {
            let after = hub
                .update_subscription(&s.id, |s| {
                    s.status = SimSubscriptionStatus::Active;
                    Ok(s.clone())
                })
                .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string(), None))?;
            let mut updated = objects::event(
                hub,
                "customer.subscription.updated",
                objects::subscription(hub, &after),
            );
            updated["data"]["previous_attributes"] = json!({
                "cancel_at": s.period_end_ms / 1000,
                "cancel_at_period_end": true,
            });
            hub.deliver(
                ProviderId::CardGateway,
                &after.notify_url,
                vec![sign(hub, &updated)],
                Some(after.payment_id.clone()),
            )
            .await;
            Ok(objects::subscription(hub, &after))
        }
    }
}
