//! Automatic top-up end to end: a credits checkout keeps the buyer's card, the real gateway
//! charges it off-session against the simulated Stripe, and the simulated webhooks come back
//! through the real gateway's verification and look-ups.

use application::ports::{
    GatewayError, OffSessionCharge, OffSessionOutcome, OrderLocator, PaymentEvent, PaymentGateway,
    PaymentRef, RefundReport, RefundRequest, RefundState, RefundedCharge, SavedMethod,
};
use domain::{OrderId, ProviderId, UserId};
use sandbox::{CREDENTIALS, SimStatus};
use serde_json::{Value, json};

use super::{World, plan, world};
use crate::support::{self, usd};

/// A credits pack bought with consent to keep the card; the events of its payment.
async fn buy_keeping_the_card(world: &World, order_id: &str) -> Vec<(String, Vec<PaymentEvent>)> {
    let mut request = world.checkout_request(plan("credits", "5.00", "USD", None), order_id);
    request.save_method = true;
    let checkout = world.gateway.create_checkout(&request).await.unwrap();
    world.pay(&checkout.provider_reference.unwrap()).await;
    world.take_events()
}

/// The card a credits checkout of `order_id` saved.
async fn saved_card(world: &World, order_id: &str) -> SavedMethod {
    let events = buy_keeping_the_card(world, order_id).await;
    events
        .into_iter()
        .flat_map(|(_, events)| events)
        .find_map(|event| match event {
            PaymentEvent::PaymentMethodSaved { method, .. } => Some(method),
            _ => None,
        })
        .expect("the checkout saved the card")
}

fn top_up(world: &World, method: &SavedMethod, order_id: &str, key: &str) -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new(order_id).unwrap(),
        user_id: UserId::new("usr_e2e").unwrap(),
        amount: usd(500),
        method: method.clone(),
        idempotency_key: key.to_owned(),
        description: "Automatic top-up: credits-plan".into(),
        notify_url: format!("{}/api/payment/webhook/card_gateway", world.base),
    }
}

/// `POST /sandbox/api/{path}` with a JSON body; the JSON answer.
async fn sandbox_api(world: &World, path: &str, body: Value) -> Value {
    support::sandbox_api(&world.base, path, body).await
}

async fn set_behaviour(world: &World, method: &SavedMethod, next: &str) {
    support::set_behaviour(&world.base, &method.method_ref, next).await;
}

/// The sandbox's off-session PaymentIntents of an order, newest first.
fn intents_of(world: &World, order_id: &str) -> Vec<sandbox::SimPayment> {
    world
        .sandbox
        .hub()
        .payments_for_order(order_id)
        .into_iter()
        .filter(|p| p.id.starts_with("pi_"))
        .collect()
}

#[tokio::test]
async fn a_credits_checkout_that_keeps_the_card_reports_the_saved_visa_after_its_payment() {
    let world = world().await;
    let events = buy_keeping_the_card(&world, "ord_keep").await;

    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "checkout.session.completed");
    let [
        PaymentEvent::PaymentSucceeded { order: paid, .. },
        PaymentEvent::PaymentMethodSaved { order, method, .. },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(order, paid, "the same order as the payment");
    assert!(method.customer_ref.starts_with("cus_"), "{method:?}");
    assert!(method.method_ref.starts_with("pm_"), "{method:?}");
    assert_eq!(
        (method.brand.as_deref(), method.last4.as_deref()),
        (Some("visa"), Some("4242"))
    );
    let listed: Value = reqwest::get(format!(
        "{}/sandbox/api/payment-methods?orderId=ord_keep",
        world.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(listed[0]["id"], method.method_ref.as_str());
    assert_eq!(listed[0]["customerId"], method.customer_ref.as_str());
    assert_eq!(listed[0]["next"], "succeed");

    // Without consent the card is not kept, and nothing is read back.
    let (session_id, _) = world
        .checkout(plan("credits", "5.00", "USD", None), "ord_no_keep")
        .await;
    world.pay(&session_id).await;
    let events = world.take_events();
    assert!(matches!(
        &events[0].1[..],
        [PaymentEvent::PaymentSucceeded { .. }]
    ));
    assert!(
        world
            .sandbox
            .hub()
            .methods_for_order("ord_no_keep")
            .is_empty()
    );
}

#[tokio::test]
async fn an_off_session_top_up_is_paid_by_its_payment_intent_webhook_and_refunded_like_a_checkout()
{
    let world = world().await;
    let card = saved_card(&world, "ord_first_pack").await;

    let outcome = world
        .gateway
        .charge_saved_method(&top_up(&world, &card, "ord_top_ok", "tu_ok"))
        .await
        .unwrap();

    let [intent] = &intents_of(&world, "ord_top_ok")[..] else {
        panic!("one PaymentIntent")
    };
    assert_eq!(
        outcome,
        OffSessionOutcome::Accepted {
            provider_reference: Some(intent.id.clone())
        }
    );
    assert_eq!(intent.status, SimStatus::Paid);
    let events = world.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "payment_intent.succeeded");
    let [PaymentEvent::PaymentSucceeded { order, amount, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        *order,
        OrderLocator {
            order_id: OrderId::new("ord_top_ok").ok(),
            provider_reference: Some(intent.id.clone()),
        }
    );
    assert_eq!(*amount, usd(500));

    let refund = RefundRequest {
        payment: PaymentRef {
            order_id: OrderId::new("ord_top_ok").unwrap(),
            provider_reference: Some(intent.id.clone()),
        },
        refund_id: "rf_top_1".into(),
        amount: usd(200),
        paid: usd(500),
        reason: "requested by the buyer".into(),
        notify_url: format!("{}/api/payment/webhook/card_gateway", world.base),
    };
    let started = world.gateway.refund(&refund).await.unwrap();
    assert_eq!(started.state, RefundState::Succeeded);
    let events = world.take_events();
    assert_eq!(events[0].0, "charge.refunded");
    let [
        PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            refund: RefundReport::Total(total),
            ..
        },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        order.order_id.as_ref().map(OrderId::as_str),
        Some("ord_top_ok"),
        "the charge carries the PaymentIntent's metadata"
    );
    assert_eq!(*total, usd(200));
}

#[tokio::test]
async fn a_declined_top_up_is_declined_and_its_failure_webhook_fails_the_order() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_decline").await;
    set_behaviour(&world, &card, "decline").await;

    let outcome = world
        .gateway
        .charge_saved_method(&top_up(&world, &card, "ord_top_declined", "tu_declined"))
        .await
        .unwrap();

    let OffSessionOutcome::Declined { reason } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(reason, "generic_decline: Your card was declined.");
    let events = world.take_events();
    assert_eq!(events[0].0, "payment_intent.payment_failed");
    let [PaymentEvent::PaymentFailed { order, reason, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        order.order_id.as_ref().map(OrderId::as_str),
        Some("ord_top_declined")
    );
    assert_eq!(reason, "Your card was declined.");
    assert_eq!(
        intents_of(&world, "ord_top_declined")[0].status,
        SimStatus::Declined
    );
}

#[tokio::test]
async fn a_top_up_that_needs_authentication_is_cancelled_at_stripe_and_fails_nothing() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_3ds").await;
    set_behaviour(&world, &card, "authentication_required").await;
    let charge = top_up(&world, &card, "ord_top_3ds", "tu_3ds");

    let outcome = world.gateway.charge_saved_method(&charge).await.unwrap();

    assert_eq!(outcome, OffSessionOutcome::AuthenticationRequired);
    let [intent] = &intents_of(&world, "ord_top_3ds")[..] else {
        panic!("one PaymentIntent")
    };
    assert_eq!(intent.status, SimStatus::Canceled);
    let events = world.take_events();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        ["payment_intent.payment_failed", "payment_intent.canceled"]
    );
    assert!(
        events.iter().all(|(_, e)| e.is_empty()),
        "the order stays open for the buyer's checkout: {events:?}"
    );

    // A retry replays Stripe's answer and cancels again, which Stripe refuses as done already.
    let again = world.gateway.charge_saved_method(&charge).await.unwrap();
    assert_eq!(again, OffSessionOutcome::AuthenticationRequired);
    assert_eq!(intents_of(&world, "ord_top_3ds").len(), 1);
    assert!(world.take_events().is_empty());
}

#[tokio::test]
async fn a_top_up_retried_with_its_key_charges_once_and_the_key_is_refused_for_another_charge() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_retry").await;
    let charge = top_up(&world, &card, "ord_top_retry", "tu_retry");

    let first = world.gateway.charge_saved_method(&charge).await.unwrap();
    let second = world.gateway.charge_saved_method(&charge).await.unwrap();

    assert!(
        matches!(first, OffSessionOutcome::Accepted { .. }) && first == second,
        "the same answer twice: {first:?} {second:?}"
    );
    assert_eq!(intents_of(&world, "ord_top_retry").len(), 1, "charged once");
    assert_eq!(world.take_events().len(), 1, "one payment event");
    let mut bigger = charge.clone();
    bigger.amount = usd(900);
    assert!(matches!(
        world.gateway.charge_saved_method(&bigger).await,
        Err(GatewayError::Rejected(m)) if m.contains("idempotency_error")
    ));
    assert_eq!(intents_of(&world, "ord_top_retry").len(), 1);
}

#[tokio::test]
async fn a_duplicated_payment_webhook_is_the_same_event_twice() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_dup").await;
    set_behaviour(&world, &card, "duplicate_webhook").await;

    let outcome = world
        .gateway
        .charge_saved_method(&top_up(&world, &card, "ord_top_dup", "tu_dup"))
        .await
        .unwrap();

    assert!(
        matches!(
            outcome,
            OffSessionOutcome::Accepted {
                provider_reference: Some(_)
            }
        ),
        "{outcome:?}"
    );
    let webhooks = world.receiver.take_accepted();
    assert_eq!(webhooks.len(), 2);
    assert_eq!(webhooks[0], webhooks[1], "one event id, one meaning");
    assert!(matches!(
        &webhooks[0].events[..],
        [PaymentEvent::PaymentSucceeded { amount, .. }] if *amount == usd(500)
    ));
}

#[tokio::test]
async fn a_slow_top_up_is_paid_when_settled_and_a_late_webhook_when_redelivered() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_slow").await;
    set_behaviour(&world, &card, "slow").await;
    let outcome = world
        .gateway
        .charge_saved_method(&top_up(&world, &card, "ord_top_slow", "tu_slow"))
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            OffSessionOutcome::Accepted {
                provider_reference: Some(_)
            }
        ),
        "{outcome:?}"
    );
    assert!(world.take_events().is_empty(), "processing: nothing yet");
    let intent = intents_of(&world, "ord_top_slow")[0].id.clone();
    // The reconciler asks Stripe about the PaymentIntent itself (no session to read).
    let payment = PaymentRef {
        order_id: OrderId::new("ord_top_slow").unwrap(),
        provider_reference: Some(intent.clone()),
    };
    let asked = world.gateway.query_payment(&payment).await.unwrap();
    assert_eq!(asked, application::ports::PaymentStatus::Pending);
    let settled = sandbox_api(
        &world,
        &format!("payments/{intent}/settle"),
        json!({ "outcome": "succeed" }),
    )
    .await;
    assert_eq!(settled["payment"]["status"], "paid");
    let asked = world.gateway.query_payment(&payment).await.unwrap();
    assert!(
        matches!(asked, application::ports::PaymentStatus::Succeeded { amount, .. } if amount == usd(500)),
        "{asked:?}"
    );
    let events = world.take_events();
    assert_eq!(events[0].0, "payment_intent.succeeded");
    assert!(matches!(
        &events[0].1[..],
        [PaymentEvent::PaymentSucceeded { .. }]
    ));

    set_behaviour(&world, &card, "late_webhook").await;
    let outcome = world
        .gateway
        .charge_saved_method(&top_up(&world, &card, "ord_top_late", "tu_late"))
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            OffSessionOutcome::Accepted {
                provider_reference: Some(_)
            }
        ),
        "{outcome:?}"
    );
    assert!(world.take_events().is_empty(), "held back");
    let intent = intents_of(&world, "ord_top_late")[0].id.clone();
    let redelivered = sandbox_api(
        &world,
        &format!("payments/{intent}/redeliver"),
        json!({ "amountMinor": 1 }),
    )
    .await;
    assert_eq!(redelivered["statuses"], json!([200]));
    let events = world.take_events();
    assert_eq!(events[0].0, "payment_intent.succeeded");
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::PaymentSucceeded { order, .. }] if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_top_late"))
    );
}

#[tokio::test]
async fn the_simulated_stripe_refuses_a_card_it_does_not_know_or_that_is_another_customers() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_mine").await;
    let other = saved_card(&world, "ord_pack_theirs").await;

    let mut unknown = card.clone();
    unknown.method_ref = "pm_sandbox_nope".into();
    let refused = world
        .gateway
        .charge_saved_method(&top_up(&world, &unknown, "ord_top_x", "tu_x1"))
        .await;
    assert!(
        matches!(&refused, Err(GatewayError::Rejected(m)) if m.contains("400") && m.contains("No such PaymentMethod")),
        "{refused:?}"
    );
    let mut mixed = card.clone();
    mixed.method_ref = other.method_ref.clone();
    let refused = world
        .gateway
        .charge_saved_method(&top_up(&world, &mixed, "ord_top_x", "tu_x2"))
        .await;
    assert!(
        matches!(&refused, Err(GatewayError::Rejected(m)) if m.contains("does not belong")),
        "{refused:?}"
    );
    assert!(intents_of(&world, "ord_top_x").is_empty());

    // Confirming without ruling out redirects needs a return URL, as at Stripe.
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/v1/payment_intents",
            world.sandbox.api_base_url(ProviderId::CardGateway)
        ))
        .bearer_auth(CREDENTIALS.api_key)
        .form(&[
            ("amount", "500"),
            ("currency", "usd"),
            ("customer", card.customer_ref.as_str()),
            ("payment_method", card.method_ref.as_str()),
            ("off_session", "true"),
            ("confirm", "true"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["param"], "return_url");
}

async fn listed_method(world: &World, id: &str) -> Value {
    support::listed_method(&world.base, id).await
}

#[tokio::test]
async fn a_forgotten_card_is_detached_at_stripe_and_refused_for_later_charges() {
    let world = world().await;
    let card = saved_card(&world, "ord_pack_forget").await;
    assert!(listed_method(&world, &card.method_ref).await["forgottenAtMs"].is_null());
    let detach = format!(
        "{}/v1/payment_methods/{}/detach",
        world.sandbox.api_base_url(ProviderId::CardGateway),
        card.method_ref
    );
    let without_key = reqwest::Client::new().post(&detach).send().await.unwrap();
    assert_eq!(without_key.status(), 401);
    assert!(listed_method(&world, &card.method_ref).await["forgottenAtMs"].is_null());

    world.gateway.forget_saved_method(&card).await.unwrap();
    assert!(listed_method(&world, &card.method_ref).await["forgottenAtMs"].is_i64());
    let refused = world
        .gateway
        .charge_saved_method(&top_up(&world, &card, "ord_top_forgotten", "tu_f1"))
        .await;
    assert!(
        matches!(&refused, Err(GatewayError::Rejected(m)) if m.contains("detached from a Customer")),
        "{refused:?}"
    );
    assert!(intents_of(&world, "ord_top_forgotten").is_empty());

    // Detaching again is refused as at Stripe; an unknown method is missing, which counts as
    // forgotten.
    let again = reqwest::Client::new()
        .post(&detach)
        .bearer_auth(CREDENTIALS.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 400);
    let mut unknown = card.clone();
    unknown.method_ref = "pm_sandbox_nope".into();
    world.gateway.forget_saved_method(&unknown).await.unwrap();
}
