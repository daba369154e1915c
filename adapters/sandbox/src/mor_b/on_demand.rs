//! Dodo's on-demand subscriptions as the sandbox simulates them for automatic top-up: a card
//! authorized once at a checkout and charged later with amounts the merchant chooses.
//!
//! Saving: `POST /checkouts` with `subscription_data.on_demand` (`mandate_only: false` and a
//! `product_price`: the sandbox simulates a first charge with the mandate, and reads the price
//! from it as Dodo does) opens a session; paying it creates the on-demand subscription
//! (`sub_sandbox_od_…`, kept in the hub as a [`SimMethod`] under that id, a Visa ending 4242 of
//! `cus_sandbox_tally`) and sends `payment.succeeded` (with `subscription_id`, `customer` and
//! `card_network` / `card_last_four`), then `subscription.active` with `on_demand: true`.
//! `GET /subscriptions/{id}` shows it.
//!
//! Charging: `POST /subscriptions/{id}/charge` (`product_price` required and positive,
//! `product_currency`, `product_description`, `metadata`, `adaptive_currency_fees_inclusive`,
//! `customer_balance_config`; anything else refused) answers `{"payment_id"}`; the payment
//! carries the request's `metadata` (the subscription's when none is sent, as Dodo documents)
//! and `subscription_id`. Like Dodo it takes no idempotency key: each call charges. What it
//! does is the method's [`SimBehaviour`]: `succeed` pays at once and sends `payment.succeeded`;
//! `duplicate_webhook` sends it twice (one `webhook-id`); `late_webhook` holds it back until
//! `/sandbox/api/payments/{id}/redeliver`; `slow` leaves the payment `processing` until
//! `/sandbox/api/payments/{id}/settle`; `decline` fails it with `error_code` `CARD_DECLINED`
//! and `authentication_required` with `AUTHENTICATION_REQUIRED` (Dodo's failure codes,
//! <https://docs.dodopayments.com/api-reference/transaction-failures>), both sending
//! `payment.failed`. A Tally subscription (not on demand) is refused, an unknown id is `404`.
//!
//! Ending: `PATCH /subscriptions/{id}` `{"status": "cancelled"}` cancels the on-demand
//! subscription at once (`status: cancelled`, `cancelled_at`); the method is forgotten, and a
//! charge of it is refused with `409` `INVALID_SUBSCRIPTION_STATE`.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{IntoResponse, Request, Response, handler};
use serde::Deserialize;
use serde_json::{Value, json};

use super::objects::{self, DodoError, error};
use super::{authorized, invalid, json_body, not_found, sign, string_metadata, unauthorized};
use crate::hub::{
    Hub, SimBehaviour, SimEvent, SimKind, SimMethod, SimPayment, SimStatus, SimWebhook,
};
use crate::simulator::Simulator;

/// `extra` key of a session: `1` when it sets an on-demand subscription up.
pub const ON_DEMAND: &str = "onDemand";
/// `extra` key: the on-demand subscription a paid session set up, or a charge was made on.
pub const SUBSCRIPTION: &str = "onDemandSubscription";
/// `extra` key of a charge: the behaviour its method had, which decides the webhooks.
const BEHAVIOUR: &str = "behaviour";
/// `extra` key of a failed charge: Dodo's `error_code`.
pub const ERROR_CODE: &str = "errorCode";
/// `extra` key of a failed charge: Dodo's `error_message`.
pub const ERROR_MESSAGE: &str = "errorMessage";

/// `subscription_data` of a checkout session.
#[derive(Debug, Deserialize)]
pub struct SubscriptionData {
    #[serde(default)]
    on_demand: Option<OnDemandTerms>,
}

/// `subscription_data.on_demand`.
#[derive(Debug, Deserialize)]
struct OnDemandTerms {
    mandate_only: bool,
    #[serde(default)]
    product_price: Option<i64>,
    #[serde(default)]
    product_currency: Option<String>,
}

/// The first price of an on-demand checkout, if the session asks for one: its amount and
/// currency (else the metadata's), checked.
///
/// # Errors
/// Dodo's `422` for a mandate without a charge (not simulated) or a price that is not positive.
pub fn first_price(
    data: Option<&SubscriptionData>,
    currency: Option<Currency>,
) -> Result<Option<(i64, Currency)>, DodoError> {
    let Some(terms) = data.and_then(|d| d.on_demand.as_ref()) else {
        return Ok(None);
    };
    if terms.mandate_only {
        return Err(invalid(
            "the sandbox simulates on-demand checkouts that charge a first price: send mandate_only false",
        ));
    }
    let amount = terms
        .product_price
        .filter(|p| *p > 0)
        .ok_or_else(|| invalid("on_demand.product_price must be a positive integer"))?;
    let currency = match terms.product_currency.as_deref() {
        Some(code) => Some(
            Currency::from_str(code).map_err(|_| invalid("unknown on_demand.product_currency"))?,
        ),
        None => currency,
    }
    .ok_or_else(|| invalid("on_demand needs product_currency or metadata currency"))?;
    Ok(Some((amount, currency)))
}

/// Whether a payment is an on-demand charge (made by `POST /subscriptions/{id}/charge`).
pub fn is_charge(payment: &SimPayment) -> bool {
    payment.id.starts_with("pay_") && payment.extra.contains_key(SUBSCRIPTION)
}

/// The on-demand subscription a session set up or a charge was made on.
pub fn subscription_of(payment: &SimPayment) -> Option<String> {
    payment.extra.get(SUBSCRIPTION).cloned()
}

/// The buyer pays a session that sets an on-demand subscription up: the subscription is
/// created and its card kept. Nothing for any other session, or one no longer open.
pub fn save_mandate(hub: &Hub, session_id: &str) {
    let Some(session) = hub.payment(session_id).filter(|p| {
        p.provider == ProviderId::MorB
            && p.status == SimStatus::Open
            && p.extra.contains_key(ON_DEMAND)
            && !p.extra.contains_key(SUBSCRIPTION)
    }) else {
        return;
    };
    let subscription = hub.new_id("sub_sandbox_od_");
    let kept = hub.update_payment(session_id, |p| {
        if p.status != SimStatus::Open {
            return Ok(false);
        }
        p.extra
            .insert(SUBSCRIPTION.to_owned(), subscription.clone());
        Ok(true)
    });
    if matches!(kept, Ok(true)) {
        hub.save_method(SimMethod {
            id: subscription,
            provider: ProviderId::MorB,
            customer_id: objects::CUSTOMER_ID.to_owned(),
            brand: Some(objects::CARD_NETWORK.to_owned()),
            last4: Some(objects::CARD_LAST4.to_owned()),
            wallet_account: None,
            order_id: session.order_id,
            payment_id: session.id,
            next: SimBehaviour::default(),
            forgotten_at_ms: None,
            created_at_ms: hub.now_ms(),
        });
    }
}

/// An on-demand subscription as Dodo shows it (`on_demand: true`).
pub fn subscription(hub: &Hub, method: &SimMethod) -> Value {
    let session = hub.payment(&method.payment_id);
    let currency = session.as_ref().map_or("USD", |p| p.currency.code());
    let created = rfc(method.created_at_ms);
    json!({
        "payload_type": "Subscription",
        "addons": [],
        "billing": { "city": "Sandbox", "country": "US", "state": "CA", "street": "1 Test Street", "zipcode": "94103" },
        "cancel_at_next_billing_date": false,
        "cancelled_at": method.forgotten_at_ms.map(rfc),
        "created_at": created,
        "currency": currency,
        "customer": { "customer_id": method.customer_id, "email": "buyer@sandbox.invalid", "name": "Sandbox Buyer" },
        "metadata": session.as_ref().map(objects::metadata).unwrap_or_default(),
        "meters": [],
        "next_billing_date": rfc(method.created_at_ms.saturating_add(30 * 24 * 3_600_000)),
        "on_demand": true,
        "payment_frequency_count": 1,
        "payment_frequency_interval": "Month",
        "previous_billing_date": created,
        "product_id": session.as_ref().and_then(|p| p.extra.get(objects::PRODUCT_ID).cloned()),
        "quantity": 1,
        "recurring_pre_tax_amount": session.as_ref().map_or(0, |p| p.amount_minor),
        "status": if method.forgotten() { "cancelled" } else { "active" },
        "subscription_id": method.id,
        "subscription_period_count": 10,
        "subscription_period_interval": "Year",
        "tax_inclusive": false,
        "trial_period_days": 0,
    })
}

fn rfc(ms: i64) -> String {
    objects::rfc3339(ms)
}

/// `PATCH /subscriptions/{id}` of an on-demand subscription: `{"status": "cancelled"}` (and
/// nothing else) ends it at once, as the merchant ends any subscription; its charges are
/// refused from then on. Cancelling it again answers it cancelled.
pub fn update(hub: &Hub, method: &SimMethod, cancel_now: bool) -> Response {
    if !cancel_now {
        return invalid("the sandbox ends an on-demand subscription with status: cancelled only")
            .into_response();
    }
    match hub.forget_method(ProviderId::MorB, &method.id) {
        Ok(_) => match mandate(hub, &method.id) {
            Some(cancelled) => Json(subscription(hub, &cancelled)).into_response(),
            None => not_found("Subscription"),
        },
        Err(_) => not_found("Subscription"),
    }
}

/// The on-demand subscription `id`, if the sandbox keeps one.
pub fn mandate(hub: &Hub, id: &str) -> Option<SimMethod> {
    hub.method(id).filter(|m| m.provider == ProviderId::MorB)
}

/// What Dodo sends about a mandate's checkout or an on-demand charge, signed; `None` for
/// anything else. A duplicated delivery is the same signed message (one `webhook-id`) twice.
pub fn webhooks(hub: &Hub, event: &SimEvent) -> Option<Vec<SimWebhook>> {
    let signed =
        |event_type: &str, data: Value| sign(hub, &objects::envelope(hub, event_type, data));
    match event {
        SimEvent::Paid(p) if is_charge(p) => {
            let paid = signed("payment.succeeded", objects::payment(hub, p, None));
            let times = if behaviour(p) == Some(SimBehaviour::DuplicateWebhook) {
                2
            } else {
                1
            };
            Some(vec![paid; times])
        }
        SimEvent::Paid(p) => {
            let method = mandate(hub, &subscription_of(p)?)?;
            Some(vec![
                signed("payment.succeeded", objects::payment(hub, p, None)),
                signed("subscription.active", subscription(hub, &method)),
            ])
        }
        SimEvent::Declined(p) if is_charge(p) => Some(vec![signed(
            "payment.failed",
            objects::payment(hub, p, None),
        )]),
        _ => None,
    }
}

fn behaviour(payment: &SimPayment) -> Option<SimBehaviour> {
    payment
        .extra
        .get(BEHAVIOUR)
        .and_then(|code| SimBehaviour::parse(code))
}

/// The body of `POST /subscriptions/{id}/charge`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChargeRequest {
    product_price: i64,
    #[serde(default)]
    product_currency: Option<String>,
    #[serde(default)]
    product_description: Option<String>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, Value>>,
    /// Taken as Dodo takes it; the sandbox charges no currency fees.
    #[serde(default, rename = "adaptive_currency_fees_inclusive")]
    _adaptive_fees: Option<bool>,
    /// Taken as Dodo takes it; the sandbox keeps no customer balance.
    #[serde(default, rename = "customer_balance_config")]
    _balance: Option<Value>,
}

/// `POST /subscriptions/{id}/charge`: the on-demand subscription charged as its method's
/// behaviour says; the payment's id answered.
#[handler]
pub async fn charge_route(
    request: &Request,
    Path(id): Path<String>,
    body: Vec<u8>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let input: ChargeRequest = match json_body(request, &body) {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(method) = mandate(&hub, &id) else {
        if hub
            .subscription(&id)
            .is_some_and(|s| s.provider == ProviderId::MorB)
        {
            return invalid("the subscription is not on demand").into_response();
        }
        return not_found("Subscription");
    };
    if method.forgotten() {
        return error(
            StatusCode::CONFLICT,
            "INVALID_SUBSCRIPTION_STATE",
            "the subscription is cancelled",
        )
        .into_response();
    }
    let charge = match new_charge(&hub, &method, input) {
        Ok(charge) => charge,
        Err(refusal) => return refusal.into_response(),
    };
    if let Err(foreign) = hub.insert_payment(
        charge.clone(),
        ["return_url", "return_url", "metadata.notifyUrl"],
    ) {
        return error(StatusCode::BAD_REQUEST, "INVALID_URL", &foreign.to_string()).into_response();
    }
    tell(&hub, &charge).await;
    Json(json!({ "payment_id": charge.id })).into_response()
}

/// A new charge of `method`, in the state its behaviour leaves it.
fn new_charge(
    hub: &Hub,
    method: &SimMethod,
    input: ChargeRequest,
) -> Result<SimPayment, DodoError> {
    if input.product_price <= 0 {
        return Err(invalid("product_price must be a positive integer"));
    }
    let session = hub
        .payment(&method.payment_id)
        .ok_or_else(|| not_found_error("Subscription"))?;
    let currency = match input.product_currency.as_deref() {
        Some(code) => Currency::from_str(code).map_err(|_| invalid("unknown product_currency"))?,
        None => session.currency,
    };
    let metadata = match input.metadata {
        Some(metadata) => string_metadata(metadata)?,
        None => objects::metadata(&session),
    };
    let notify_url = metadata
        .get("notifyUrl")
        .cloned()
        .unwrap_or_else(|| session.notify_url.clone());
    let next = method.next;
    let (status, failure) = outcome(next);
    let id = hub.new_id("pay_sandbox_od_");
    let mut extra = BTreeMap::new();
    extra.insert(objects::PAYMENT_ID.to_owned(), id.clone());
    extra.insert(SUBSCRIPTION.to_owned(), method.id.clone());
    extra.insert(BEHAVIOUR.to_owned(), next.code().to_owned());
    extra.insert(
        objects::METADATA.to_owned(),
        serde_json::to_string(&metadata).unwrap_or_default(),
    );
    if let Some(product) = session.extra.get(objects::PRODUCT_ID) {
        extra.insert(objects::PRODUCT_ID.to_owned(), product.clone());
    }
    if let Some(description) = input.product_description {
        extra.insert("description".to_owned(), description);
    }
    if let Some((code, message)) = failure {
        extra.insert(ERROR_CODE.to_owned(), code.to_owned());
        extra.insert(ERROR_MESSAGE.to_owned(), message.to_owned());
    }
    Ok(SimPayment {
        id,
        provider: ProviderId::MorB,
        order_id: metadata.get("orderId").cloned().unwrap_or_default(),
        amount_minor: input.product_price,
        currency,
        kind: SimKind::OneTime,
        status,
        success_url: String::new(),
        cancel_url: String::new(),
        notify_url,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra,
    })
}

/// Where a charge of a method with behaviour `next` ends up, and Dodo's failure code and
/// message for a failed one.
fn outcome(next: SimBehaviour) -> (SimStatus, Option<(&'static str, &'static str)>) {
    match next {
        SimBehaviour::Succeed | SimBehaviour::DuplicateWebhook | SimBehaviour::LateWebhook => {
            (SimStatus::Paid, None)
        }
        SimBehaviour::Slow => (SimStatus::Open, None),
        SimBehaviour::Decline => (
            SimStatus::Declined,
            Some((objects::DECLINE_CODE, objects::DECLINE_MESSAGE)),
        ),
        SimBehaviour::AuthenticationRequired => (
            SimStatus::Declined,
            Some((
                "AUTHENTICATION_REQUIRED",
                "Additional authentication is needed to complete the transaction",
            )),
        ),
    }
}

fn not_found_error(what: &str) -> DodoError {
    error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        &format!("{what} not found"),
    )
}

/// Send what Dodo sends about a new charge: the payment or failure event, sent or held back as
/// its method's behaviour says; nothing for one still processing.
async fn tell(hub: &Hub, charge: &SimPayment) {
    let event = match charge.status {
        SimStatus::Paid => SimEvent::Paid(charge.clone()),
        SimStatus::Declined => SimEvent::Declined(charge.clone()),
        SimStatus::Open | SimStatus::Approved | SimStatus::Canceled => return,
    };
    if behaviour(charge) == Some(SimBehaviour::LateWebhook) {
        let webhooks = super::MorBSimulator.webhooks(hub, &event);
        hub.hold(
            ProviderId::MorB,
            &charge.notify_url,
            webhooks,
            &charge.id,
            "held back (late_webhook): POST /sandbox/api/payments/{id}/redeliver sends it",
        );
        return;
    }
    hub.dispatch(ProviderId::MorB, &charge.notify_url, &event)
        .await;
}
