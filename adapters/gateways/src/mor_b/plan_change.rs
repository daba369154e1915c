//! Dodo Payments plan changes (issue 19): switching a subscription's product, withdrawing a
//! scheduled cancellation, and what `subscription.plan_changed` says.
//!
//! - Switch: `POST /subscriptions/{id}/change-plan` with `product_id` (the new plan's
//!   `morBProductId`), `quantity: 1` and `proration_billing_mode`: `prorated_immediately` for an
//!   upgrade (the difference for the rest of the period is charged now) and `do_not_bill` for a
//!   downgrade (the lower price bills from the next billing date). `metadata` carries the plan id
//!   and price Tally asked for, as at checkout (Dodo keeps it on the payment; the sandbox, which
//!   cannot look products up, reads the new price from it). Dodo answers `200` with no body.
//!   <https://docs.dodopayments.com/api-reference/subscriptions/change-plan>,
//!   <https://docs.dodopayments.com/developer-resources/subscription-upgrade-downgrade>
//! - Resume: `PATCH /subscriptions/{id}` with `{"cancel_at_next_billing_date": false}`.
//!   <https://docs.dodopayments.com/api-reference/subscriptions/patch-subscriptions>
//! - `subscription.plan_changed` carries the subscription as it bills now: its
//!   `recurring_pre_tax_amount`, `currency`, `payment_frequency_interval` and
//!   `payment_frequency_count` are what Tally checks against the change asked for.

use application::ports::{GatewayError, PaymentEvent, PlanChangeRequest, WebhookError};
use domain::{ChangeDirection, Duration, ProviderId, Timestamp};
use serde::{Deserialize, Serialize};

use super::transformers::{AMOUNT_KEY, money};

/// The body of `POST /subscriptions/{id}/change-plan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangePlanBody {
    /// The product switched to.
    pub product_id: String,
    /// Always 1: Tally sells one unit per subscription.
    pub quantity: u32,
    /// `prorated_immediately` (upgrade) or `do_not_bill` (downgrade).
    pub proration_billing_mode: &'static str,
    /// Tally's plan id and price of the switch.
    pub metadata: std::collections::BTreeMap<String, String>,
}

/// The change-plan body of `request`.
///
/// # Errors
/// [`GatewayError::Rejected`] when the plan has no `morBProductId` or no interval in months.
pub fn change_plan_body(request: &PlanChangeRequest) -> Result<ChangePlanBody, GatewayError> {
    let product_id = request
        .plan
        .provider_refs()
        .get(ProviderId::MorB)
        .map(str::to_owned)
        .ok_or_else(|| {
            GatewayError::Rejected(format!(
                "plan {} has no morBProductId",
                request.snapshot.plan_id
            ))
        })?;
    let Some(Duration::Months(interval)) = request.snapshot.duration else {
        return Err(GatewayError::Rejected(
            "plan has no billing interval".into(),
        ));
    };
    let proration_billing_mode = match request.direction {
        ChangeDirection::Upgrade => "prorated_immediately",
        ChangeDirection::Downgrade => "do_not_bill",
    };
    let price = request.snapshot.price;
    let metadata = [
        ("planId", request.snapshot.plan_id.as_str().to_owned()),
        (AMOUNT_KEY, price.amount_minor().to_string()),
        ("currency", price.currency().code().to_owned()),
        ("intervalMonths", interval.get().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    Ok(ChangePlanBody {
        product_id,
        quantity: 1,
        proration_billing_mode,
        metadata,
    })
}

/// The body of `PATCH /subscriptions/{id}` that withdraws a scheduled cancellation.
#[must_use]
pub fn resume_body() -> serde_json::Value {
    serde_json::json!({ "cancel_at_next_billing_date": false })
}

/// The subscription a `subscription.plan_changed` carries: only what the check needs.
#[derive(Debug, Clone, Deserialize)]
struct Changed {
    subscription_id: String,
    #[serde(default)]
    recurring_pre_tax_amount: Option<i64>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    payment_frequency_interval: Option<String>,
    #[serde(default)]
    payment_frequency_count: Option<u32>,
}

/// Dodo's `TimeInterval` (`Day`, `Week`, `Month`, `Year`) and count in months; `None` for days
/// and weeks, which Tally does not sell.
fn months(interval: Option<&str>, count: Option<u32>) -> Option<u32> {
    let count = count.unwrap_or(1);
    match interval?.to_ascii_lowercase().as_str() {
        "month" => Some(count),
        "year" => count.checked_mul(12),
        _ => None,
    }
}

/// The [`PaymentEvent::SubscriptionPlanChanged`] of a `subscription.plan_changed`.
///
/// # Errors
/// [`WebhookError::Malformed`] when the subscription or its recurring price cannot be read.
pub fn plan_changed(data: &serde_json::Value, at: Timestamp) -> Result<PaymentEvent, WebhookError> {
    let malformed =
        |why: String| WebhookError::Malformed(format!("subscription.plan_changed: {why}"));
    let s: Changed = serde_json::from_value(data.clone()).map_err(|e| malformed(e.to_string()))?;
    let (Some(amount), Some(currency)) = (s.recurring_pre_tax_amount, s.currency.as_deref()) else {
        return Err(malformed("no recurring amount or currency".into()));
    };
    Ok(PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: s.subscription_id,
        price: money(amount, currency).map_err(malformed)?,
        interval_months: months(
            s.payment_frequency_interval.as_deref(),
            s.payment_frequency_count,
        ),
        occurred_at: at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_change_tells_the_price_currency_and_interval_billed_now() {
        let data = serde_json::json!({
            "subscription_id": "sub_1", "recurring_pre_tax_amount": 1999, "currency": "USD",
            "payment_frequency_interval": "Year", "payment_frequency_count": 1,
            "product_id": "pdt_2", "status": "active"
        });
        let at = Timestamp::from_unix_millis(1);
        let PaymentEvent::SubscriptionPlanChanged {
            provider_subscription_id,
            price,
            interval_months,
            ..
        } = plan_changed(&data, at).unwrap()
        else {
            panic!("not a plan change")
        };
        assert_eq!(provider_subscription_id, "sub_1");
        assert_eq!(price.amount_minor(), 1999);
        assert_eq!(price.currency().code(), "USD");
        assert_eq!(interval_months, Some(12));
    }

    #[test]
    fn a_plan_change_without_a_price_is_malformed() {
        let data = serde_json::json!({ "subscription_id": "sub_1", "currency": "USD" });
        assert!(matches!(
            plan_changed(&data, Timestamp::from_unix_millis(1)),
            Err(WebhookError::Malformed(_))
        ));
        assert_eq!(months(Some("Week"), Some(2)), None);
        assert_eq!(months(Some("Month"), None), Some(1));
    }
}
