//! Stripe subscription updates: switching a subscription's Price, withdrawing a
//! scheduled cancellation, and what `customer.subscription.updated` says about either.
//!
//! - Switch: `POST /v1/subscriptions/{id}` with `items[0][id]` (the subscription's one item,
//!   read first with `GET /v1/subscriptions/{id}`) and `items[0][price]` (the new plan's
//!   `cardGatewayPriceId`), `proration_behavior=always_invoice` for an upgrade (the difference
//!   for the rest of the period is invoiced and charged now) and `none` for a downgrade (the
//!   lower price bills from the next period), under an `Idempotency-Key`.
//!   <https://docs.stripe.com/billing/subscriptions/change-price>
//! - Resume: `POST /v1/subscriptions/{id}` with `cancel_at_period_end=false`.
//!   <https://docs.stripe.com/billing/subscriptions/cancel#reactivating-canceled-subscriptions>
//! - `customer.subscription.updated` carries `data.previous_attributes`: `items` there means the
//!   Price changed (Tally is told the price, currency and interval it bills now);
//!   `cancel_at_period_end: true` there, with the subscription renewing now, means a scheduled
//!   cancellation was withdrawn.

use application::ports::{GatewayError, PaymentEvent, PlanChangeRequest, WebhookError};
use domain::{ChangeDirection, Duration, ProviderId, Timestamp};
use serde::Deserialize;

use super::transformers::{Event, money};

/// A subscription as `GET /v1/subscriptions/{id}` and its update events show it: only what a
/// switch needs.
#[derive(Debug, Clone, Deserialize)]
pub struct PricedSubscription {
    /// `sub_…`.
    pub id: String,
    /// `active`, `trialing`, `past_due`, ….
    #[serde(default)]
    pub status: String,
    /// Ends at the period's end.
    #[serde(default)]
    pub cancel_at_period_end: bool,
    /// Ends at this time, when scheduled.
    #[serde(default)]
    pub cancel_at: Option<i64>,
    /// Lower-case currency code of the subscription (every Price on it bills in it).
    #[serde(default)]
    pub currency: Option<String>,
    /// Its items (Tally's subscriptions have one).
    #[serde(default)]
    pub items: Items,
}

/// `subscription.items`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Items {
    /// The items.
    #[serde(default)]
    pub data: Vec<Item>,
}

/// One subscription item.
#[derive(Debug, Clone, Deserialize)]
pub struct Item {
    /// `si_…`.
    pub id: String,
    /// The Price it bills.
    #[serde(default)]
    pub price: Option<Price>,
}

/// A Price, as embedded in an item.
#[derive(Debug, Clone, Deserialize)]
pub struct Price {
    /// Minor units per period.
    #[serde(default)]
    pub unit_amount: Option<i64>,
    /// Lower-case currency code.
    #[serde(default)]
    pub currency: Option<String>,
    /// The billing interval.
    #[serde(default)]
    pub recurring: Option<Recurring>,
}

/// `price.recurring`.
#[derive(Debug, Clone, Deserialize)]
pub struct Recurring {
    /// `day`, `week`, `month` or `year`.
    pub interval: String,
    /// How many intervals a period lasts.
    #[serde(default = "one")]
    pub interval_count: u32,
}

const fn one() -> u32 {
    1
}

impl Recurring {
    /// The interval in months (`None` for days and weeks, which Tally does not sell).
    #[must_use]
    pub fn months(&self) -> Option<u32> {
        match self.interval.as_str() {
            "month" => Some(self.interval_count),
            "year" => self.interval_count.checked_mul(12),
            _ => None,
        }
    }
}

impl PricedSubscription {
    /// The one item a switch replaces.
    ///
    /// # Errors
    /// [`GatewayError::BadResponse`] for a subscription with no item or several.
    pub fn only_item(&self) -> Result<&Item, GatewayError> {
        match self.items.data.as_slice() {
            [item] => Ok(item),
            items => Err(GatewayError::BadResponse(format!(
                "subscription has {} items, Tally switches one",
                items.len()
            ))),
        }
    }

    fn is_live(&self) -> bool {
        matches!(self.status.as_str(), "active" | "trialing" | "past_due")
    }
}

/// The form of a switch to the request's plan, replacing `item` (the subscription's one item).
/// The sandbox, which cannot look Prices up, reads the new price from `metadata[…]` as at
/// checkout. `metadata[planChangeAt]` marks the change on the subscription: Stripe copies the
/// subscription's metadata onto the invoices it creates (`subscription_details.metadata`), so
/// the change's invoice names the change it bills.
///
/// A change of billing interval resets the billing cycle and invoices the new period at once
/// whatever `proration_behavior` says; `always_invoice` makes that invoice credit the unused
/// time of the current period (`none` would charge the whole new period on top of it).
///
/// # Errors
/// [`GatewayError::Rejected`] when the plan has no `cardGatewayPriceId` or no interval.
pub fn plan_change_form(
    request: &PlanChangeRequest,
    item: &Item,
) -> Result<Vec<(String, String)>, GatewayError> {
    let price_id = request
        .plan
        .provider_refs()
        .get(ProviderId::CardGateway)
        .map(str::to_owned)
        .ok_or_else(|| {
            GatewayError::Rejected(format!(
                "plan {} has no cardGatewayPriceId",
                request.snapshot.plan_id
            ))
        })?;
    let Some(Duration::Months(interval)) = request.snapshot.duration else {
        return Err(GatewayError::Rejected(
            "plan has no billing interval".into(),
        ));
    };
    let current_months = item
        .price
        .as_ref()
        .and_then(|p| p.recurring.as_ref())
        .and_then(Recurring::months);
    let new_interval = current_months.is_some_and(|m| m != interval.get());
    let proration = match request.direction {
        _ if new_interval => "always_invoice",
        ChangeDirection::Upgrade => "always_invoice",
        ChangeDirection::Downgrade => "none",
    };
    let price = request.snapshot.price;
    Ok(vec![
        ("items[0][id]".into(), item.id.clone()),
        ("items[0][price]".into(), price_id),
        ("proration_behavior".into(), proration.into()),
        (
            "metadata[planId]".into(),
            request.snapshot.plan_id.as_str().to_owned(),
        ),
        (
            "metadata[amountMinor]".into(),
            price.amount_minor().to_string(),
        ),
        (
            "metadata[currency]".into(),
            price.currency().code().to_owned(),
        ),
        (
            "metadata[intervalMonths]".into(),
            interval.get().to_string(),
        ),
        (
            "metadata[planChangeAt]".into(),
            request.requested_at.unix_millis().to_string(),
        ),
    ])
}

/// The form that withdraws a scheduled cancellation.
#[must_use]
pub fn resume_form() -> Vec<(String, String)> {
    vec![("cancel_at_period_end".to_owned(), "false".to_owned())]
}

#[derive(Debug, Default, Deserialize)]
struct Previous {
    #[serde(default)]
    items: Option<serde_json::Value>,
    #[serde(default)]
    cancel_at_period_end: Option<bool>,
}

/// What a `customer.subscription.updated` says beyond a scheduled end: a Price switch, a
/// withdrawn cancellation.
///
/// # Errors
/// [`WebhookError::Malformed`] when the subscription or its new Price cannot be read.
pub fn updated(event: &Event, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    let Some(previous) = event.data.previous_attributes.as_ref() else {
        return Ok(Vec::new());
    };
    let previous: Previous = serde_json::from_value(previous.clone()).unwrap_or_default();
    let subscription: PricedSubscription = serde_json::from_value(event.data.object.clone())
        .map_err(|e| WebhookError::Malformed(format!("{}: {e}", event.event_type)))?;
    let mut events = Vec::new();
    if previous.items.is_some() && subscription.is_live() {
        events.push(switched(&subscription, at)?);
    }
    let scheduled = subscription.cancel_at_period_end || subscription.cancel_at.is_some();
    if previous.cancel_at_period_end == Some(true) && !scheduled && subscription.is_live() {
        events.push(PaymentEvent::SubscriptionCancelWithdrawn {
            provider_subscription_id: subscription.id,
            occurred_at: at,
        });
    }
    Ok(events)
}

fn switched(
    subscription: &PricedSubscription,
    at: Timestamp,
) -> Result<PaymentEvent, WebhookError> {
    let malformed = |why: &str| WebhookError::Malformed(format!("subscription update: {why}"));
    let item = subscription
        .only_item()
        .map_err(|e| WebhookError::Malformed(e.to_string()))?;
    let price = item
        .price
        .as_ref()
        .ok_or_else(|| malformed("item has no price"))?;
    let currency = price
        .currency
        .as_deref()
        .or(subscription.currency.as_deref());
    let (Some(amount), Some(currency)) = (price.unit_amount, currency) else {
        return Err(malformed("price has no unit amount or currency"));
    };
    Ok(PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: subscription.id.clone(),
        price: money(amount, currency).map_err(WebhookError::Malformed)?,
        interval_months: price.recurring.as_ref().and_then(Recurring::months),
        occurred_at: at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card_gateway::transformers::parse_event;

    fn event(previous: &str, cancel_at_period_end: bool) -> Event {
        let body = format!(
            r#"{{"id":"evt_1","type":"customer.subscription.updated","created":1700000000,
            "data":{{"object":{{"id":"sub_1","status":"active",
              "cancel_at_period_end":{cancel_at_period_end},
              "items":{{"data":[{{"id":"si_1","price":{{"id":"price_2","unit_amount":1999,
                "currency":"usd","recurring":{{"interval":"month","interval_count":1}}}}}}]}}}},
             "previous_attributes":{previous}}}}}"#
        );
        parse_event(body.as_bytes()).unwrap()
    }

    #[test]
    fn a_price_switch_tells_the_price_currency_and_interval_billed_now() {
        let at = Timestamp::from_unix_millis(1);
        let events = updated(&event(r#"{"items":{"data":[]}}"#, false), at).unwrap();
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
        assert_eq!(price.amount_minor(), 1999);
        assert_eq!(price.currency().code(), "USD");
        assert_eq!(*interval_months, Some(1));
    }

    fn change_invoice(lines: &str) -> Vec<PaymentEvent> {
        let body = format!(
            r#"{{"id":"evt_2","type":"invoice.paid","created":1700000000,
            "data":{{"object":{{"id":"in_change","billing_reason":"subscription_update",
              "amount_paid":9324,"currency":"usd",
              "parent":{{"subscription_details":{{"subscription":"sub_1",
                "metadata":{{"planChangeAt":"1699999999000"}}}}}},
              "lines":{{"data":{lines}}}}}}}}}"#
        );
        match crate::card_gateway::transformers::interpret(&parse_event(body.as_bytes()).unwrap())
            .unwrap()
        {
            crate::card_gateway::transformers::Interpretation::Events(events) => events,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_interval_changes_invoice_tells_the_new_period_and_the_change_it_bills() {
        let events = change_invoice(
            r#"[{"amount":-666,"proration":true,"period":{"start":1699999999,"end":1701000000}},
                {"amount":9990,"proration":false,"period":{"start":1699999999,"end":1731535999},
                 "price":{"unit_amount":9990,"currency":"usd",
                          "recurring":{"interval":"year","interval_count":1}}}]"#,
        );
        let [
            PaymentEvent::SubscriptionChangeInvoiced {
                provider_subscription_id,
                paid,
                new_period: Some(line),
                change_requested_at,
                charge_ref,
                ..
            },
        ] = events.as_slice()
        else {
            panic!("{events:?}")
        };
        assert_eq!(provider_subscription_id, "sub_1");
        assert_eq!(paid.amount_minor(), 9324);
        assert_eq!(line.price.amount_minor(), 9990);
        assert_eq!(line.interval_months, Some(12));
        assert_eq!(line.period.start().unix_millis(), 1_699_999_999_000);
        assert_eq!(
            *change_requested_at,
            Some(Timestamp::from_unix_millis(1_699_999_999_000))
        );
        assert_eq!(charge_ref.as_deref(), Some("in_change"));
    }

    #[test]
    fn a_prorations_invoice_bills_no_new_period() {
        // The current API marks prorations on the line's parent.
        let events = change_invoice(
            r#"[{"amount":-333,"period":{"start":1699999999,"end":1701000000},
                 "parent":{"subscription_item_details":{"proration":true}}},
                {"amount":666,"period":{"start":1699999999,"end":1701000000},
                 "parent":{"subscription_item_details":{"proration":true}}}]"#,
        );
        assert!(
            matches!(
                events.as_slice(),
                [PaymentEvent::SubscriptionChangeInvoiced {
                    new_period: None,
                    change_requested_at: Some(_),
                    ..
                }]
            ),
            "{events:?}"
        );
    }

    #[test]
    fn a_withdrawn_cancellation_is_told_and_other_updates_are_not() {
        let at = Timestamp::from_unix_millis(1);
        let events = updated(&event(r#"{"cancel_at_period_end":true}"#, false), at).unwrap();
        assert!(matches!(
            events.as_slice(),
            [PaymentEvent::SubscriptionCancelWithdrawn { .. }]
        ));
        assert!(
            updated(&event(r#"{"cancel_at_period_end":false}"#, true), at)
                .unwrap()
                .is_empty()
        );
        assert!(
            updated(&event(r#"{"metadata":{}}"#, false), at)
                .unwrap()
                .is_empty()
        );
    }
}
