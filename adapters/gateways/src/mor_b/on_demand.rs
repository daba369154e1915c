//! Automatic top-up on Dodo Payments: on-demand subscriptions, a payment method authorized once
//! and charged later with amounts the merchant chooses.
//!
//! - Saving: the checkout of a credits pack whose buyer consented is a Checkout Session of the
//!   configured on-demand **subscription** product (`onDemandProductId`: Dodo requires a
//!   subscription product, and the pack's own `morBProductId` is a one-time product) with
//!   `subscription_data.on_demand = {mandate_only: false, product_price, product_currency}`: the
//!   buyer pays the pack's price and authorizes the mandate in one go. Tally marks it with
//!   `metadata.saveMethod = "1"`. Its `payment.succeeded` carries `subscription_id` (the
//!   on-demand subscription, the saved method's `method_ref`), `customer.customer_id` (its
//!   `customer_ref`) and `card_network` / `card_last_four`; it pays the order and saves the
//!   method. The on-demand subscription's own events (`subscription.active`, …, with
//!   `on_demand: true`) are no Tally subscription's and mean nothing here.
//! - Charging: `POST /subscriptions/{subscription_id}/charge` with `product_price` (minor
//!   units), `product_currency`, `product_description` and `metadata` (our order id, the top-up
//!   marker `topUp` = the top-up's idempotency key, and the price asked, as for a checkout); the
//!   answer is `{"payment_id"}` and the outcome comes as `payment.succeeded` / `payment.failed`
//!   with that metadata.
//! - No idempotency key: Dodo's API documents none and its SDKs send none
//!   (`dodopayments-node` `src/client.ts` leaves `idempotencyHeader` unset; the Python SDK's
//!   `_idempotency_header` is `None`). So before charging, the subscription's payments of the
//!   last [`LOOKBACK_MS`] are listed (`GET /payments?subscription_id=…`) and one carrying the same
//!   `metadata.topUp` is answered instead of charging again.
//! - Answers: the charge says only which payment it made, so that payment is read once
//!   (`GET /payments/{id}`): `failed` with `error_code` `AUTHENTICATION_REQUIRED`, or
//!   `requires_customer_action`, needs the buyer; any other `failed` or `cancelled` is a decline
//!   with Dodo's reason; anything else is accepted and the webhook settles it.
//!
//! Sources: <https://docs.dodopayments.com/developer-resources/ondemand-subscriptions>,
//! <https://docs.dodopayments.com/api-reference/subscriptions/create-charge>,
//! <https://docs.dodopayments.com/api-reference/transaction-failures>, `dodopayments-node`
//! `src/resources/subscriptions.ts` (`OnDemandSubscription`, `SubscriptionChargeParams`,
//! `SubscriptionChargeResponse`, `Subscription.on_demand`) and `src/resources/checkout-sessions.ts`
//! (`subscription_data.on_demand`), `dodopayments-python` `types/payment.py` (`card_network`,
//! `card_last_four`, `customer`), `types/payment_list_response.py` (`metadata`).

use std::collections::BTreeMap;

use application::ports::{
    CheckoutRequest, GatewayError, OffSessionCharge, OffSessionOutcome, PaymentEvent, SavedMethod,
};
use domain::Timestamp;
use serde::{Deserialize, Serialize};

use super::transformers::{
    AMOUNT_KEY, CartItem, CheckoutSessionRequest, IntentStatus, ORDER_ID_KEY, PAYMENTS_PAGE_SIZE,
    Payment, PaymentListItem, path_id,
};
use crate::shared::time::to_rfc3339;
use crate::shared::wire::printable;

/// The metadata key of a top-up's charge; its value is the top-up's idempotency key.
pub const TOP_UP_KEY: &str = "topUp";
/// The metadata key (value `1`) of a checkout whose buyer consented to keep the method.
pub const SAVE_METHOD_KEY: &str = "saveMethod";
/// How far back a charge is looked for before charging again: a top-up's charge is sent again
/// only while its order waits, which is far shorter.
pub const LOOKBACK_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Dodo's failure code for a payment the buyer must authenticate.
const AUTHENTICATION_REQUIRED: &str = "AUTHENTICATION_REQUIRED";
/// The most characters of a description sent.
const MAX_DESCRIPTION_CHARS: usize = 500;
/// The most characters of a top-up key kept in metadata.
const MAX_KEY_CHARS: usize = 255;
/// The most characters of a decline reason kept.
const MAX_REASON_CHARS: usize = 200;

/// `subscription_data` of a checkout session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubscriptionData {
    /// The on-demand terms.
    pub on_demand: OnDemand,
}

/// `subscription_data.on_demand` (Dodo's `OnDemandSubscription`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OnDemand {
    /// `false`: the checkout charges `product_price` as well as authorizing the mandate.
    pub mandate_only: bool,
    /// The first charge, minor units: the pack's price.
    pub product_price: i64,
    /// Its currency (upper-case ISO 4217).
    pub product_currency: String,
}

/// Make `body`, the checkout of an order whose buyer consented, an on-demand subscription's
/// checkout of `product_id` that charges the pack's price at once.
///
/// # Errors
/// [`GatewayError::Rejected`] for a non-positive price or a product id that is not an id.
pub fn consent(
    body: &mut CheckoutSessionRequest,
    product_id: &str,
    request: &CheckoutRequest,
) -> Result<(), GatewayError> {
    let price = request.snapshot.price;
    if price.amount_minor() <= 0 {
        return Err(GatewayError::Rejected(
            "an on-demand checkout charges a positive price".into(),
        ));
    }
    body.product_cart = vec![CartItem {
        product_id: path_id(product_id)?.to_owned(),
        quantity: 1,
    }];
    body.subscription_data = Some(SubscriptionData {
        on_demand: OnDemand {
            mandate_only: false,
            product_price: price.amount_minor(),
            product_currency: price.currency().code().to_owned(),
        },
    });
    body.metadata
        .insert(SAVE_METHOD_KEY.to_owned(), "1".to_owned());
    Ok(())
}

/// The body of `POST /subscriptions/{id}/charge` (Dodo's `SubscriptionChargeParams`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChargeBody {
    /// Minor units.
    pub product_price: i64,
    /// Upper-case ISO 4217.
    pub product_currency: String,
    /// What the buyer's invoice says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product_description: Option<String>,
    /// Our order id, the top-up marker, the price asked; Dodo copies it onto the payment.
    pub metadata: BTreeMap<String, String>,
}

/// The on-demand subscription a top-up charges (the saved method's `method_ref`), checked.
///
/// # Errors
/// [`GatewayError::Rejected`] when it is not a Dodo id.
pub fn subscription_of(charge: &OffSessionCharge) -> Result<&str, GatewayError> {
    path_id(&charge.method.method_ref)
}

/// The top-up's marker: its idempotency key, printable and bounded.
///
/// # Errors
/// [`GatewayError::Rejected`] for an empty key.
pub fn marker(charge: &OffSessionCharge) -> Result<String, GatewayError> {
    let key = printable(charge.idempotency_key.trim(), MAX_KEY_CHARS);
    if key.is_empty() {
        return Err(GatewayError::Rejected(
            "a top-up's idempotency key must not be empty".into(),
        ));
    }
    Ok(key)
}

/// The charge of a top-up. `notify_url` is sent only to the sandbox, which cannot know the
/// endpoint registered in a dashboard.
///
/// # Errors
/// [`GatewayError::Rejected`] for a non-positive amount or an empty key.
pub fn charge_body(
    charge: &OffSessionCharge,
    notify_url: Option<&str>,
) -> Result<ChargeBody, GatewayError> {
    let amount = charge.amount.amount_minor();
    if amount <= 0 {
        return Err(GatewayError::Rejected(
            "a top-up charges a positive amount".into(),
        ));
    }
    let currency = charge.amount.currency().code().to_owned();
    let mut metadata = BTreeMap::new();
    let mut put = |key: &str, value: String| {
        metadata.insert(key.to_owned(), value);
    };
    put(ORDER_ID_KEY, charge.order_id.as_str().to_owned());
    put("userId", charge.user_id.as_str().to_owned());
    put(TOP_UP_KEY, marker(charge)?);
    put(AMOUNT_KEY, amount.to_string());
    put("currency", currency.clone());
    if let Some(url) = notify_url {
        put("notifyUrl", url.to_owned());
    }
    let description = printable(charge.description.trim(), MAX_DESCRIPTION_CHARS);
    Ok(ChargeBody {
        product_price: amount,
        product_currency: currency,
        product_description: (!description.is_empty()).then_some(description),
        metadata,
    })
}

/// The answer of `POST /subscriptions/{id}/charge`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChargeAnswer {
    /// The payment the charge made (`pay_…`).
    pub payment_id: String,
}

/// The query of `GET /payments` for the payments of `subscription_id` since `now` less
/// [`LOOKBACK_MS`], one page of the largest size.
#[must_use]
pub fn charges_query(subscription_id: &str, now: Timestamp) -> Vec<(&'static str, String)> {
    let since = Timestamp::from_unix_millis(now.unix_millis().saturating_sub(LOOKBACK_MS));
    vec![
        ("subscription_id", subscription_id.to_owned()),
        ("created_at_gte", to_rfc3339(since)),
        ("page_size", PAYMENTS_PAGE_SIZE.to_string()),
    ]
}

/// The payment of `subscription_id` that carries the top-up marker `key`, if one was made.
#[must_use]
pub fn charged_before<'a>(
    subscription_id: &str,
    key: &str,
    payments: &'a [PaymentListItem],
) -> Option<&'a str> {
    payments
        .iter()
        .take(PAYMENTS_PAGE_SIZE)
        .filter(|p| p.subscription_id.as_deref() == Some(subscription_id))
        .find(|p| p.metadata.get(TOP_UP_KEY).map(String::as_str) == Some(key))
        .map(|p| p.payment_id.as_str())
}

/// What a top-up's payment, read after the charge, says of it.
///
/// # Errors
/// [`GatewayError::BadResponse`] when Dodo answered another payment.
pub fn outcome(payment: &Payment, payment_id: &str) -> Result<OffSessionOutcome, GatewayError> {
    if payment.payment_id != payment_id {
        return Err(GatewayError::BadResponse(
            "Dodo answered another payment".into(),
        ));
    }
    if asks_buyer(payment) {
        return Ok(OffSessionOutcome::AuthenticationRequired);
    }
    Ok(match payment.status {
        Some(IntentStatus::Failed | IntentStatus::Cancelled) => OffSessionOutcome::Declined {
            reason: decline_reason(payment),
        },
        // Credits come only with the payment event; a status Dodo adds later waits for it.
        _ => OffSessionOutcome::Accepted {
            provider_reference: Some(payment_id.to_owned()),
        },
    })
}

/// Whether the payment waits for, or failed for want of, the buyer's authentication.
fn asks_buyer(payment: &Payment) -> bool {
    match payment.status {
        Some(IntentStatus::RequiresCustomerAction) => true,
        Some(IntentStatus::Failed) => {
            payment.error_code.as_deref().map(str::trim) == Some(AUTHENTICATION_REQUIRED)
        }
        _ => false,
    }
}

/// Dodo's `error_code` and `error_message`, at most [`MAX_REASON_CHARS`] printable
/// characters.
fn decline_reason(payment: &Payment) -> String {
    let code = payment
        .error_code
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let message = payment
        .error_message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let words = match (code, message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(words), None) | (None, Some(words)) => words.to_owned(),
        (None, None) => "payment failed".to_owned(),
    };
    printable(&words, MAX_REASON_CHARS)
}

/// Whether metadata carries the top-up marker.
#[must_use]
pub fn is_top_up(metadata: &BTreeMap<String, String>) -> bool {
    metadata
        .get(TOP_UP_KEY)
        .is_some_and(|k| !k.trim().is_empty())
}

/// Whether metadata marks a consented checkout.
fn saves_method(metadata: &BTreeMap<String, String>) -> bool {
    metadata.get(SAVE_METHOD_KEY).map(String::as_str) == Some("1")
}

/// Whether a payment with `subscription_id` pays one of our orders: a top-up's charge or the
/// consented checkout, both of an on-demand subscription.
#[must_use]
pub fn pays_order(payment: &Payment) -> bool {
    is_top_up(&payment.metadata) || saves_method(&payment.metadata)
}

/// Whether a top-up's charge needs the buyer: its failure is then no decline.
#[must_use]
pub fn needs_buyer(payment: &Payment) -> bool {
    is_top_up(&payment.metadata) && asks_buyer(payment)
}

/// `PaymentMethodSaved` for the consented checkout's payment: the on-demand subscription is
/// the method, charged under the customer; the card's network and last four digits are shown.
/// Nothing for any other payment, or one without a subscription or customer.
#[must_use]
pub fn method_saved(payment: &Payment, at: Timestamp) -> Option<PaymentEvent> {
    if !saves_method(&payment.metadata) || is_top_up(&payment.metadata) {
        return None;
    }
    let subscription = path_id(payment.subscription_id.as_deref()?).ok()?;
    let customer = path_id(&payment.customer.as_ref()?.customer_id).ok()?;
    let shown = |text: Option<&String>, max: usize| {
        text.map(|t| printable(t.trim(), max))
            .filter(|t| !t.is_empty())
    };
    Some(PaymentEvent::PaymentMethodSaved {
        order: payment.locator(),
        method: SavedMethod {
            customer_ref: customer.to_owned(),
            method_ref: subscription.to_owned(),
            brand: shown(payment.card_network.as_ref(), 32).map(|b| b.to_ascii_lowercase()),
            last4: shown(payment.card_last_four.as_ref(), 4),
            wallet_account: None,
        },
        occurred_at: at,
    })
}

/// Whether a `subscription.*` webhook is about an on-demand subscription (a saved method, not a
/// Tally subscription): `on_demand` is true, or its metadata marks a consented checkout.
#[must_use]
pub fn is_mandate_event(envelope: &super::transformers::Envelope) -> bool {
    if !envelope.event_type.starts_with("subscription.") {
        return false;
    }
    let data = &envelope.data;
    data.get("on_demand").and_then(serde_json::Value::as_bool) == Some(true)
        || data
            .get("metadata")
            .and_then(|m| m.get(SAVE_METHOD_KEY))
            .and_then(serde_json::Value::as_str)
            == Some("1")
}

#[cfg(test)]
mod tests;
