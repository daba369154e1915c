//! Creem's subscription upgrade, as the sandbox simulates it (issue 19):
//! `POST /v1/subscriptions/{id}/upgrade` (`product_id`, `update_behavior`) switches the
//! subscription's product and price, answers with the subscription and sends
//! `subscription.update` with the product expanded.
//!
//! The sandbox has no products: the gateway, in sandbox mode only, adds `sandbox_product`
//! (`price`, `currency`, `interval_months`) to the body. It keeps Creem's refusals that matter to
//! Tally: a canceled subscription, an unknown `update_behavior`, another currency. It does not
//! simulate a change of billing interval, nor the proration charge.

use std::str::FromStr;
use std::sync::Arc;

use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde::Deserialize;

use super::{authorized, error, read_json, signed_event, subscription_json};
use crate::hub::{Hub, SimSubscription, SimSubscriptionStatus};

/// The payment's `extra` key for the product a subscription was switched to.
pub(super) const SWITCHED_PRODUCT_ID: &str = "switched_product_id";

const BEHAVIORS: [&str; 3] = [
    "proration-charge-immediately",
    "proration-charge",
    "proration-none",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpgradeInput {
    product_id: String,
    update_behavior: String,
    #[serde(default)]
    sandbox_product: Option<SandboxProduct>,
}

#[derive(Debug, Deserialize)]
struct SandboxProduct {
    price: i64,
    currency: String,
    interval_months: u32,
}

/// The new price of an upgrade, or why Creem refuses it (a 400).
fn check(s: &SimSubscription, input: &UpgradeInput) -> Result<i64, &'static str> {
    if s.status == SimSubscriptionStatus::Canceled {
        return Err("A canceled subscription cannot be upgraded");
    }
    if input.product_id.is_empty() || !BEHAVIORS.contains(&input.update_behavior.as_str()) {
        return Err("product_id and a known update_behavior are required");
    }
    let Some(product) = &input.sandbox_product else {
        return Err("the sandbox cannot look up products: send sandbox_product");
    };
    if Currency::from_str(&product.currency).ok() != Some(s.currency) {
        return Err("The new product bills in another currency");
    }
    if product.interval_months != s.interval_months {
        return Err("the sandbox does not simulate a change of billing interval");
    }
    if product.price <= 0 {
        return Err("price must be positive");
    }
    Ok(product.price)
}

/// `POST /v1/subscriptions/{id}/upgrade`.
#[handler]
pub(super) async fn upgrade(
    request: &Request,
    Path(id): Path<String>,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let input: UpgradeInput = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(s) = hub
        .subscription(&id)
        .filter(|s| s.provider == ProviderId::MorA)
    else {
        return error(StatusCode::NOT_FOUND, "Subscription not found");
    };
    let price = match check(&s, &input) {
        Ok(price) => price,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let Ok(after) = hub.update_subscription(&s.id, |s| {
        s.amount_minor = price;
        Ok(s.clone())
    }) else {
        return error(StatusCode::NOT_FOUND, "Subscription not found");
    };
    // Kept apart from the checkout's `product_id`, which `GET /v1/products` prices from the
    // checkout's amount.
    let _ = hub.update_payment(&s.payment_id, |p| {
        p.extra
            .insert(SWITCHED_PRODUCT_ID.to_owned(), input.product_id.clone());
        Ok(())
    });
    let object = subscription_json(&hub, &after);
    let webhook = signed_event(&hub, "subscription.update", object.clone());
    hub.deliver(
        ProviderId::MorA,
        &after.notify_url,
        vec![webhook],
        Some(after.payment_id.clone()),
    )
    .await;
    Json(object).into_response()
}
