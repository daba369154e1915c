//! Stripe's subscription update, as the sandbox simulates it (issue 19): switching the Price of a
//! subscription's one item (`items[0][id]` + `items[0][price]`, `proration_behavior`), and
//! withdrawing a scheduled cancellation (`cancel_at_period_end=false`). Each sends the events
//! Stripe sends: `customer.subscription.updated` with `data.previous_attributes`, and for an
//! upgrade invoiced now (`always_invoice`) the proration's `invoice.paid`
//! (`billing_reason=subscription_update`).
//!
//! The sandbox cannot look a Price up: the gateway sends the new price in `metadata[…]`, as at
//! checkout. It keeps Stripe's refusals that matter to Tally: an unknown item, a Price in another
//! currency, a canceled subscription. It does not simulate interval changes (Stripe restarts the
//! billing period for them).

use std::collections::BTreeMap;
use std::str::FromStr;

use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use serde_json::{Value, json};

use super::objects::{self, StripeError, error};
use super::{bad, sign};
use crate::hub::{Hub, SimCharge, SimKind, SimSubscription, SimSubscriptionStatus};

const SWITCH_KEYS: [&str; 7] = [
    "items[0][id]",
    "items[0][price]",
    "proration_behavior",
    "metadata[planId]",
    "metadata[amountMinor]",
    "metadata[currency]",
    "metadata[intervalMonths]",
];

/// What a switch asks for.
struct Switch {
    price_id: String,
    amount_minor: i64,
    currency: Currency,
    interval_months: u32,
    invoice_now: bool,
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
    if switch.interval_months != s.interval_months {
        return Err(bad(
            "the sandbox does not simulate a change of billing interval",
            "items[0][price]",
        ));
    }
    let before = objects::subscription(hub, s);
    let after = hub
        .update_subscription(&s.id, |s| {
            s.amount_minor = switch.amount_minor;
            Ok(s.clone())
        })
        .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string(), None))?;
    let _ = hub.update_payment(&s.payment_id, |p| {
        if let SimKind::Subscription { plan_ref, .. } = &mut p.kind {
            *plan_ref = Some(switch.price_id.clone());
        }
        Ok(())
    });
    let mut updated = objects::event(
        hub,
        "customer.subscription.updated",
        objects::subscription(hub, &after),
    );
    updated["data"]["previous_attributes"] = json!({ "items": before["items"] });
    let mut events = vec![updated];
    if switch.invoice_now
        && let Some(proration) = proration(hub, s, switch.amount_minor)
    {
        events.push(objects::event(
            hub,
            "invoice.paid",
            objects::invoice(hub, &after, &proration, "subscription_update"),
        ));
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
