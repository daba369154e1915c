//! Dodo's plan change and resume, as the sandbox simulates them (issue 19):
//! `POST /subscriptions/{id}/change-plan` (`product_id`, `quantity`, `proration_billing_mode`,
//! `metadata`) switches the subscription's product and price and sends
//! `subscription.plan_changed` with the subscription as it bills now; `PATCH /subscriptions/{id}`
//! with `cancel_at_next_billing_date: false` withdraws a scheduled cancellation and sends
//! `subscription.updated`. Dodo answers change-plan with `200` and no body.
//!
//! The sandbox cannot look a product up: the new price comes from `metadata.amountMinor`,
//! `metadata.currency` and `metadata.intervalMonths`, as at checkout. It keeps Dodo's refusals
//! that matter to Tally: a cancelled subscription, a quantity other than 1, an unknown proration
//! mode, another currency. It does not simulate a change of billing interval, nor the proration
//! payment of `prorated_immediately` (Tally ignores subscription payments outside a period event).

use std::collections::BTreeMap;
use std::str::FromStr;

use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use super::objects::{self, DodoError, error};
use super::{invalid, sign, string_metadata};
use crate::hub::{Hub, SimKind, SimSubscription, SimSubscriptionStatus};

/// The body of `POST /subscriptions/{id}/change-plan`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChangePlan {
    product_id: String,
    quantity: u32,
    proration_billing_mode: String,
    #[serde(default)]
    addons: Option<Vec<Value>>,
    #[serde(default)]
    metadata: BTreeMap<String, Value>,
}

const MODES: [&str; 4] = [
    "prorated_immediately",
    "full_immediately",
    "difference_immediately",
    "do_not_bill",
];

/// What a change asks for, checked.
struct Switch {
    product_id: String,
    amount_minor: i64,
    currency: Currency,
    interval_months: u32,
}

fn read_switch(change: ChangePlan) -> Result<Switch, DodoError> {
    if change.quantity != 1 || change.product_id.is_empty() {
        return Err(invalid(
            "the sandbox switches to one product_id with quantity 1",
        ));
    }
    if !MODES.contains(&change.proration_billing_mode.as_str()) {
        return Err(invalid(&format!(
            "proration_billing_mode must be one of {}",
            MODES.join(", ")
        )));
    }
    if change.addons.is_some_and(|a| !a.is_empty()) {
        return Err(invalid("the sandbox sells no addons"));
    }
    let metadata = string_metadata(change.metadata)?;
    let hint = "the sandbox cannot look up products: send metadata amountMinor, currency and \
                intervalMonths";
    let amount_minor = metadata
        .get("amountMinor")
        .and_then(|a| a.parse::<i64>().ok())
        .filter(|a| *a > 0)
        .ok_or_else(|| invalid(hint))?;
    let currency = metadata
        .get("currency")
        .and_then(|c| Currency::from_str(c).ok())
        .ok_or_else(|| invalid(hint))?;
    let interval_months = metadata
        .get("intervalMonths")
        .and_then(|m| m.parse::<u32>().ok())
        .filter(|m| (1..=12).contains(m))
        .ok_or_else(|| invalid(hint))?;
    Ok(Switch {
        product_id: change.product_id,
        amount_minor,
        currency,
        interval_months,
    })
}

fn conflict(message: &str) -> DodoError {
    error(StatusCode::CONFLICT, "INVALID_SUBSCRIPTION_STATE", message)
}

/// Switch `s` to the requested product and send `subscription.plan_changed`.
pub(super) async fn change_plan(
    hub: &Hub,
    s: &SimSubscription,
    change: ChangePlan,
) -> Result<(), DodoError> {
    if s.status == SimSubscriptionStatus::Canceled {
        return Err(conflict("a cancelled subscription cannot change plans"));
    }
    let switch = read_switch(change)?;
    if switch.currency != s.currency {
        return Err(invalid(
            "the new product bills in another currency than the subscription",
        ));
    }
    if switch.interval_months != s.interval_months {
        return Err(invalid(
            "the sandbox does not simulate a change of billing interval",
        ));
    }
    let after = hub
        .update_subscription(&s.id, |s| {
            s.amount_minor = switch.amount_minor;
            Ok(s.clone())
        })
        .map_err(|e| conflict(&e.to_string()))?;
    let _ = hub.update_payment(&s.payment_id, |p| {
        p.extra
            .insert(objects::PRODUCT_ID.to_owned(), switch.product_id.clone());
        if let SimKind::Subscription { plan_ref, .. } = &mut p.kind {
            *plan_ref = Some(switch.product_id.clone());
        }
        Ok(())
    });
    let body = objects::envelope(
        hub,
        "subscription.plan_changed",
        objects::subscription(hub, &after),
    );
    hub.deliver(
        ProviderId::MorB,
        &after.notify_url,
        vec![sign(hub, &body)],
        Some(after.payment_id.clone()),
    )
    .await;
    Ok(())
}

/// `cancel_at_next_billing_date: false`: a scheduled cancellation is withdrawn and
/// `subscription.updated` tells it; on a renewing subscription nothing changes.
pub(super) async fn resume(hub: &Hub, s: &SimSubscription) -> Result<Value, DodoError> {
    match s.status {
        SimSubscriptionStatus::Canceled => {
            Err(conflict("a cancelled subscription cannot be resumed"))
        }
        SimSubscriptionStatus::Active => Ok(objects::subscription(hub, s)),
        SimSubscriptionStatus::CancelScheduled => {
            let after = hub
                .update_subscription(&s.id, |s| {
                    s.status = SimSubscriptionStatus::Active;
                    Ok(s.clone())
                })
                .map_err(|e| conflict(&e.to_string()))?;
            let body = objects::envelope(
                hub,
                "subscription.updated",
                objects::subscription(hub, &after),
            );
            hub.deliver(
                ProviderId::MorB,
                &after.notify_url,
                vec![sign(hub, &body)],
                Some(after.payment_id.clone()),
            )
            .await;
            Ok(objects::subscription(hub, &after))
        }
    }
}

/// `POST /subscriptions/{id}/change-plan`.
#[poem::handler]
pub(super) async fn change_plan_route(
    request: &poem::Request,
    poem::web::Path(id): poem::web::Path<String>,
    body: Vec<u8>,
    hub: poem::web::Data<&std::sync::Arc<Hub>>,
) -> poem::Response {
    use poem::IntoResponse;
    if !super::authorized(request) {
        return super::unauthorized();
    }
    let change: ChangePlan = match super::json_body(request, &body) {
        Ok(change) => change,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(subscription) = super::own_subscription(&hub, &id) else {
        return super::not_found("Subscription");
    };
    match change_plan(&hub, &subscription, change).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(refusal) => refusal.into_response(),
    }
}
