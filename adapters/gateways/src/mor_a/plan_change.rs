//! Creem plan changes (issue 19): upgrading or downgrading a subscription to another product,
//! and what `subscription.update` says about it.
//!
//! - Switch: `POST /v1/subscriptions/{id}/upgrade` with `product_id` (the new plan's
//!   `morAProductId`) and `update_behavior`: `proration-charge-immediately` for an upgrade (the
//!   prorated difference is charged now) and `proration-none` for a downgrade (the new price
//!   applies from the next billing date). Creem answers with the subscription.
//!   <https://docs.creem.io/features/subscriptions/managing> ("Programmatic Upgrades", "Update
//!   Behavior Options").
//! - Resume: Creem's documentation shows no call that withdraws a scheduled cancellation, so
//!   Tally does not offer it for Creem (the subscription ends; the buyer can buy again).
//! - `subscription.update` carries the subscription with its product expanded (or its id, then
//!   read with `GET /v1/products`): the product's `price`, `currency` and `billing_period` are
//!   what Tally checks against the change asked for. Creem sends it for other updates too; one
//!   that bills what the subscription already sells changes nothing.
//!
//! The sandbox cannot look products up: in sandbox mode only, the gateway adds
//! `sandbox_product` (the new price and interval), as it adds `notifyUrl` at checkout.

use application::ports::{GatewayError, PaymentEvent, PlanChangeRequest, WebhookError};
use domain::{ChangeDirection, Duration, ProviderId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::transformers::money;

/// The body of `POST /v1/subscriptions/{id}/upgrade`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpgradeBody {
    /// The product switched to.
    pub product_id: String,
    /// `proration-charge-immediately` (upgrade) or `proration-none` (downgrade).
    pub update_behavior: &'static str,
    /// Sandbox mode only: the new product's price, which the sandbox cannot look up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_product: Option<SandboxProduct>,
}

/// What the sandbox is told about the product switched to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxProduct {
    /// Price in minor units.
    pub price: i64,
    /// Upper-case ISO code.
    pub currency: String,
    /// Billing interval in months.
    pub interval_months: u32,
}

/// The upgrade body of `request` (`sandbox`: add the sandbox's product hint).
///
/// # Errors
/// [`GatewayError::Rejected`] when the plan has no `morAProductId` or no interval in months.
pub fn upgrade_body(
    request: &PlanChangeRequest,
    sandbox: bool,
) -> Result<UpgradeBody, GatewayError> {
    let product_id = request
        .plan
        .provider_refs()
        .get(ProviderId::MorA)
        .map(str::to_owned)
        .ok_or_else(|| {
            GatewayError::Rejected(format!(
                "plan {} has no morAProductId",
                request.snapshot.plan_id
            ))
        })?;
    let Some(Duration::Months(interval)) = request.snapshot.duration else {
        return Err(GatewayError::Rejected(
            "plan has no billing interval".into(),
        ));
    };
    let update_behavior = match request.direction {
        ChangeDirection::Upgrade => "proration-charge-immediately",
        ChangeDirection::Downgrade => "proration-none",
    };
    let price = request.snapshot.price;
    Ok(UpgradeBody {
        product_id,
        update_behavior,
        sandbox_product: sandbox.then(|| SandboxProduct {
            price: price.amount_minor(),
            currency: price.currency().code().to_owned(),
            interval_months: interval.get(),
        }),
    })
}

#[derive(Debug, Deserialize)]
struct Updated {
    id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    product: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Product {
    #[serde(default)]
    price: Option<i64>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    billing_period: Option<String>,
}

/// Creem's `billing_period` in months (`every-month`, `every-three-months`,
/// `every-six-months`, `every-year`); `None` for anything else.
fn months(period: &str) -> Option<u32> {
    match period {
        "every-month" => Some(1),
        "every-three-months" => Some(3),
        "every-six-months" => Some(6),
        "every-year" => Some(12),
        _ => None,
    }
}

/// What a `subscription.update` says: the price the subscription bills now, when it is live and
/// its product is expanded (a product given only as an id was read by the gateway first).
///
/// # Errors
/// [`WebhookError::Malformed`] when the subscription cannot be read.
pub fn updated(object: Value, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    let malformed = |why: String| WebhookError::Malformed(format!("subscription.update: {why}"));
    let s: Updated = serde_json::from_value(object).map_err(|e| malformed(e.to_string()))?;
    if !matches!(s.status.as_str(), "active" | "trialing" | "past_due") {
        return Ok(Vec::new());
    }
    let Some(product @ Value::Object(_)) = s.product else {
        return Ok(Vec::new());
    };
    let product: Product = serde_json::from_value(product).map_err(|e| malformed(e.to_string()))?;
    let (Some(amount), Some(currency)) = (product.price, product.currency.as_deref()) else {
        return Err(malformed("the product has no price or currency".into()));
    };
    Ok(vec![PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: s.id,
        price: money(amount, currency).map_err(malformed)?,
        interval_months: product.billing_period.as_deref().and_then(months),
        occurred_at: at,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_tells_the_price_currency_and_interval_billed_now() {
        let object = serde_json::json!({
            "id": "sub_1", "status": "active",
            "product": { "id": "prod_2", "price": 1949, "currency": "EUR",
                         "billing_period": "every-month" }
        });
        let events = updated(object, Timestamp::from_unix_millis(1)).unwrap();
        let [
            PaymentEvent::SubscriptionPlanChanged {
                price,
                interval_months,
                ..
            },
        ] = events.as_slice()
        else {
            panic!("{events:?}")
        };
        assert_eq!(price.amount_minor(), 1949);
        assert_eq!(price.currency().code(), "EUR");
        assert_eq!(*interval_months, Some(1));
    }

    #[test]
    fn an_update_of_an_ended_subscription_or_an_unread_product_tells_nothing() {
        let at = Timestamp::from_unix_millis(1);
        let ended = serde_json::json!({ "id": "sub_1", "status": "canceled",
            "product": { "price": 1, "currency": "EUR" } });
        assert!(updated(ended, at).unwrap().is_empty());
        let id_only = serde_json::json!({ "id": "sub_1", "status": "active", "product": "prod_2" });
        assert!(updated(id_only, at).unwrap().is_empty());
        let unpriced = serde_json::json!({ "id": "sub_1", "status": "active", "product": {} });
        assert!(updated(unpriced, at).is_err());
    }
}
