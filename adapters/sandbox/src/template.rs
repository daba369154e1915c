//! The skeleton of a simulator, for the next provider (`docs/add-a-provider.md`): copy this file
//! to `<provider>.rs` and replace the example protocol with the provider's own, as its
//! documentation spells it (paths, authentication, encodings, error shape, signed webhooks). It
//! simulates the example provider of the gateways' template (`gateways::template`) and is
//! compiled with the crate's tests, so that it follows the [`Simulator`] trait as it changes.

use std::sync::Arc;

use async_trait::async_trait;
use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{IntoResponse, Request, Response, Route, get, handler, post};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::{hex, hmac_sha256};

use crate::credentials::CREDENTIALS;
use crate::hub::{Hub, SimEvent, SimKind, SimPayment, SimStatus, SimWebhook};
use crate::simulator::Simulator;

/// The provider simulated: the new [`ProviderId`] variant.
const PROVIDER_ID: ProviderId = ProviderId::MorB;

/// The example provider's simulator.
pub struct ExampleSimulator;

#[async_trait]
impl Simulator for ExampleSimulator {
    fn provider(&self) -> ProviderId {
        PROVIDER_ID
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        // The hub reaches the handlers as data of the enclosing sandbox route.
        Route::new()
            .at("/checkouts", post(create_checkout))
            .at("/checkouts/:id", get(retrieve_checkout))
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        // Every event is named, so that a new one is a decision here rather than silence.
        let (kind, payment) = match event {
            SimEvent::Paid(p) => ("checkout.paid", p),
            SimEvent::Declined(p) => ("checkout.failed", p),
            SimEvent::Approved(_)
            | SimEvent::SubscriptionStarted(..)
            | SimEvent::Renewed(..)
            | SimEvent::RenewalFailed(_)
            | SimEvent::SubscriptionCancelScheduled(_)
            | SimEvent::SubscriptionCanceled(_)
            | SimEvent::Refunded { .. }
            | SimEvent::ChargeRefunded { .. } => return Vec::new(),
        };
        let body = json!({
            "id": hub.new_id("evt_"),
            "type": kind,
            "data": {
                "id": payment.id,
                "reference": payment.order_id,
                "amount": payment.amount_minor,
                "currency": payment.currency.code(),
            },
        })
        .to_string()
        .into_bytes();
        vec![signed(hub.now_ms() / 1000, body)]
    }
}

/// A webhook signed as the example provider signs: HMAC-SHA256 over `{timestamp}.{body}`.
fn signed(timestamp_s: i64, body: Vec<u8>) -> SimWebhook {
    let mut message = format!("{timestamp_s}.").into_bytes();
    message.extend_from_slice(&body);
    let signature = hmac_sha256(CREDENTIALS.hmac_secret.as_bytes(), &message);
    SimWebhook {
        headers: vec![
            ("example-timestamp".to_owned(), timestamp_s.to_string()),
            ("example-signature".to_owned(), hex(&signature)),
        ],
        content_type: "application/json".to_owned(),
        body,
    }
}

/// Whether the request carries the sandbox's API key, as the provider checks its bearer key.
fn authorized(request: &Request) -> bool {
    request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {}", CREDENTIALS.api_key))
}

/// An error in the provider's shape.
fn refusal(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": { "message": message } }))).into_response()
}

/// `POST /checkouts`, as the gateway sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewCheckout {
    reference: String,
    amount: i64,
    currency: String,
    success_url: String,
    cancel_url: String,
}

fn checkout_json(hub: &Hub, payment: &SimPayment) -> Value {
    let status = match payment.status {
        SimStatus::Paid => "paid",
        SimStatus::Declined => "declined",
        SimStatus::Canceled => "expired",
        SimStatus::Open | SimStatus::Approved => "open",
    };
    json!({
        "id": payment.id,
        "url": hub.checkout_url(&payment.id),
        "status": status,
        "amount": payment.amount_minor,
        "currency": payment.currency.code(),
    })
}

#[handler]
fn create_checkout(request: &Request, body: Vec<u8>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return refusal(StatusCode::UNAUTHORIZED, "invalid api key");
    }
    let Ok(new) = serde_json::from_slice::<NewCheckout>(&body) else {
        return refusal(StatusCode::BAD_REQUEST, "malformed checkout");
    };
    let Ok(currency) = new.currency.parse::<Currency>() else {
        return refusal(StatusCode::BAD_REQUEST, "unknown currency");
    };
    if new.amount <= 0 {
        return refusal(StatusCode::BAD_REQUEST, "amount must be positive");
    }
    let payment = SimPayment {
        id: hub.new_id("chk_"),
        provider: PROVIDER_ID,
        order_id: new.reference,
        amount_minor: new.amount,
        currency,
        kind: SimKind::OneTime,
        status: SimStatus::Open,
        success_url: new.success_url,
        cancel_url: new.cancel_url.clone(),
        // The example provider posts webhooks to the endpoint registered in its dashboard; the
        // sandbox posts them to Tally's path for the provider.
        notify_url: format!(
            "{}/api/payment/webhook/{}",
            hub.public_base_url(),
            PROVIDER_ID.as_str()
        ),
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra: std::collections::BTreeMap::new(),
    };
    if let Err(foreign) =
        hub.insert_payment(payment.clone(), ["success_url", "cancel_url", "notify_url"])
    {
        return refusal(StatusCode::BAD_REQUEST, &foreign.to_string());
    }
    Json(checkout_json(&hub, &payment)).into_response()
}

#[handler]
fn retrieve_checkout(request: &Request, Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return refusal(StatusCode::UNAUTHORIZED, "invalid api key");
    }
    match hub.payment(&id).filter(|p| p.provider == PROVIDER_ID) {
        Some(payment) => Json(checkout_json(&hub, &payment)).into_response(),
        None => refusal(StatusCode::NOT_FOUND, "no such checkout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment() -> SimPayment {
        SimPayment {
            id: "chk_1".to_owned(),
            provider: PROVIDER_ID,
            order_id: "ord_1".to_owned(),
            amount_minor: 999,
            currency: Currency::Usd,
            kind: SimKind::OneTime,
            status: SimStatus::Paid,
            success_url: String::new(),
            cancel_url: String::new(),
            notify_url: String::new(),
            refunded_minor: 0,
            subscription_id: None,
            created_at_ms: 0,
            extra: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn a_paid_checkout_sends_one_signed_webhook_naming_the_order_and_its_amount() {
        let hub = Hub::new(
            "http://127.0.0.1:9",
            Arc::new(application::testing::FixedClock::at(1_767_225_600_000)),
        );
        let webhooks = ExampleSimulator.webhooks(&hub, &SimEvent::Paid(payment()));
        let [webhook] = &webhooks[..] else {
            panic!("{webhooks:?}");
        };
        let body: Value = serde_json::from_slice(&webhook.body).unwrap();
        assert_eq!(body["type"], "checkout.paid");
        assert_eq!(body["data"]["reference"], "ord_1");
        assert_eq!(body["data"]["amount"], 999);
        let mut message = b"1767225600.".to_vec();
        message.extend_from_slice(&webhook.body);
        let expected = hex(&hmac_sha256(CREDENTIALS.hmac_secret.as_bytes(), &message));
        assert!(
            webhook
                .headers
                .contains(&("example-signature".to_owned(), expected))
        );
    }
}
