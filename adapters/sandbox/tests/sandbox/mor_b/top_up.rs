//! Automatic top-up end to end on Dodo: a credits checkout sets an on-demand subscription up,
//! the real gateway charges it against the simulated Dodo, and the simulated webhooks come back
//! through the real gateway's verification and look-ups.

use application::ports::{
    GatewayError, OffSessionCharge, OffSessionOutcome, OrderLocator, PaymentEvent, PaymentGateway,
    PaymentRef, PaymentStatus, RefundReport, RefundRequest, RefundState, RefundedCharge,
    SavedMethod,
};
use domain::{OrderId, UserId};
use sandbox::SimStatus;
use serde_json::{Value, json};

use super::{World, plan, world};
use crate::support::{self, usd};

/// A credits pack bought with consent to keep the card; the events of its payment.
async fn buy_keeping_the_card(world: &World, order_id: &str) -> Vec<(String, Vec<PaymentEvent>)> {
    let mut request = world.checkout_request(plan("credits", "79.00", "USD", "pdt_pack"), order_id);
    request.save_method = true;
    let checkout = world.gateway.create_checkout(&request).await.unwrap();
    world.pay(&checkout.provider_reference.unwrap()).await;
    world.take_events()
}

/// The on-demand subscription a credits checkout of `order_id` set up.
async fn mandate(world: &World, order_id: &str) -> SavedMethod {
    buy_keeping_the_card(world, order_id)
        .await
        .into_iter()
        .flat_map(|(_, events)| events)
        .find_map(|event| match event {
            PaymentEvent::PaymentMethodSaved { method, .. } => Some(method),
            _ => None,
        })
        .expect("the checkout saved the on-demand subscription")
}

fn top_up(world: &World, method: &SavedMethod, order_id: &str, key: &str) -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new(order_id).unwrap(),
        user_id: UserId::new("usr_e2e").unwrap(),
        amount: usd(7900),
        method: method.clone(),
        idempotency_key: key.to_owned(),
        description: "Automatic top-up: credits-plan".into(),
        notify_url: format!("{}/api/payment/webhook/mor_b", world.base),
    }
}

async fn set_behaviour(world: &World, method: &SavedMethod, next: &str) {
    support::set_behaviour(&world.base, &method.method_ref, next).await;
}

/// The sandbox's on-demand charges of an order, newest first.
fn charges_of(world: &World, order_id: &str) -> Vec<sandbox::SimPayment> {
    world
        .sandbox
        .hub()
        .payments_for_order(order_id)
        .into_iter()
        .filter(|p| p.id.starts_with("pay_"))
        .collect()
}

async fn charge(
    world: &World,
    method: &SavedMethod,
    order_id: &str,
) -> (OffSessionOutcome, String) {
    let outcome = world
        .gateway
        .charge_saved_method(&top_up(world, method, order_id, &format!("tu_{order_id}")))
        .await
        .unwrap();
    let [charge] = &charges_of(world, order_id)[..] else {
        panic!("one charge of {order_id}")
    };
    (outcome, charge.id.clone())
}

fn locator(order_id: &str, payment_id: &str) -> OrderLocator {
    OrderLocator {
        order_id: OrderId::new(order_id).ok(),
        provider_reference: Some(payment_id.to_owned()),
    }
}

#[tokio::test]
async fn a_consented_credits_checkout_pays_the_pack_and_saves_its_on_demand_subscription() {
    let world = world().await;
    let events = buy_keeping_the_card(&world, "ord_keep").await;

    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["payment.succeeded", "subscription.active"]);
    let [
        PaymentEvent::PaymentSucceeded {
            order: paid,
            amount,
            ..
        },
        PaymentEvent::PaymentMethodSaved { order, method, .. },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(order, paid, "the same order as the payment");
    assert_eq!(*amount, usd(7900));
    assert_eq!(method.customer_ref, "cus_sandbox_tally");
    assert!(method.method_ref.starts_with("sub_"), "{method:?}");
    assert_eq!(
        (method.brand.as_deref(), method.last4.as_deref()),
        (Some("visa"), Some("4242"))
    );
    assert!(
        events[1].1.is_empty(),
        "an on-demand subscription is no Tally subscription: {events:?}"
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
    assert_eq!(listed[0]["next"], "succeed");
    let session = &world.sandbox.hub().payments_for_order("ord_keep")[0];
    assert_eq!(
        session.extra.get("productId").map(String::as_str),
        Some(sandbox::mor_b::ON_DEMAND_PRODUCT_ID)
    );

    // Without consent the pack's own product is sold and nothing is kept.
    let (session_id, _) = world
        .checkout(plan("credits", "79.00", "USD", "pdt_pack"), "ord_no_keep")
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
async fn a_top_up_is_paid_by_its_payment_webhook_queried_by_its_payment_and_refunded_as_an_order() {
    let world = world().await;
    let method = mandate(&world, "ord_first_pack").await;

    let (outcome, payment_id) = charge(&world, &method, "ord_top_ok").await;

    assert_eq!(
        outcome,
        OffSessionOutcome::Accepted {
            provider_reference: Some(payment_id.clone())
        }
    );
    let events = world.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "payment.succeeded");
    let [PaymentEvent::PaymentSucceeded { order, amount, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*order, locator("ord_top_ok", &payment_id));
    assert_eq!(*amount, usd(7900));
    let payment = PaymentRef {
        order_id: OrderId::new("ord_top_ok").unwrap(),
        provider_reference: Some(payment_id.clone()),
    };
    assert!(matches!(
        world.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Succeeded { amount, .. } if amount == usd(7900)
    ));

    let refund = RefundRequest {
        payment,
        refund_id: "rf_top_1".into(),
        amount: usd(2000),
        paid: usd(7900),
        reason: "requested by the buyer".into(),
        notify_url: format!("{}/api/payment/webhook/mor_b", world.base),
    };
    let started = world.gateway.refund(&refund).await.unwrap();
    assert_eq!(started.state, RefundState::Succeeded);
    let events = world.take_events();
    assert_eq!(events[0].0, "refund.succeeded");
    let [
        PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            refund: RefundReport::One { amount, .. },
            ..
        },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(*order, locator("ord_top_ok", &payment_id));
    assert_eq!(*amount, usd(2000));
}

#[tokio::test]
async fn a_declined_top_up_is_declined_and_its_failure_webhook_fails_the_order() {
    let world = world().await;
    let method = mandate(&world, "ord_first_pack").await;
    set_behaviour(&world, &method, "decline").await;

    let (outcome, payment_id) = charge(&world, &method, "ord_top_declined").await;

    let OffSessionOutcome::Declined { reason } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(reason.starts_with("CARD_DECLINED"), "{reason}");
    let events = world.take_events();
    assert_eq!(events[0].0, "payment.failed");
    let [PaymentEvent::PaymentFailed { order, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*order, locator("ord_top_declined", &payment_id));
}

#[tokio::test]
async fn a_top_up_that_needs_authentication_asks_for_the_buyer_and_its_failure_fails_nothing() {
    let world = world().await;
    let method = mandate(&world, "ord_first_pack").await;
    set_behaviour(&world, &method, "authentication_required").await;

    let (outcome, payment_id) = charge(&world, &method, "ord_top_auth").await;

    assert_eq!(outcome, OffSessionOutcome::AuthenticationRequired);
    let events = world.take_events();
    assert_eq!(events[0].0, "payment.failed");
    assert!(events[0].1.is_empty(), "{events:?}");
    let payment = PaymentRef {
        order_id: OrderId::new("ord_top_auth").unwrap(),
        provider_reference: Some(payment_id),
    };
    assert_eq!(
        world.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Pending,
        "the buyer finishes it in a checkout of the same order"
    );
}

#[tokio::test]
async fn a_top_up_sent_again_with_its_key_finds_its_payment_and_charges_once() {
    let world = world().await;
    let method = mandate(&world, "ord_first_pack").await;
    let (first, payment_id) = charge(&world, &method, "ord_top_twice").await;
    world.take_events();

    let again = world
        .gateway
        .charge_saved_method(&top_up(
            &world,
            &method,
            "ord_top_twice",
            "tu_ord_top_twice",
        ))
        .await
        .unwrap();

    assert_eq!(again, first);
    assert_eq!(charges_of(&world, "ord_top_twice").len(), 1);
    assert!(world.take_events().is_empty(), "nothing charged again");
    let other = world
        .gateway
        .charge_saved_method(&top_up(&world, &method, "ord_top_twice", "tu_other"))
        .await
        .unwrap();
    assert_ne!(
        other,
        OffSessionOutcome::Accepted {
            provider_reference: Some(payment_id)
        },
        "another key is another charge"
    );
}

#[tokio::test]
async fn a_duplicated_payment_webhook_is_the_same_event_twice() {
    let world = world().await;
    let method = mandate(&world, "ord_first_pack").await;
    set_behaviour(&world, &method, "duplicate_webhook").await;

    charge(&world, &method, "ord_top_dup").await;

    let accepted = world.receiver.take_accepted();
    assert_eq!(accepted.len(), 2, "{accepted:?}");
    assert_eq!(accepted[0].event_id, accepted[1].event_id);
    assert_eq!(accepted[0].events, accepted[1].events);
}

#[tokio::test]
async fn a_slow_top_up_is_paid_when_settled_and_a_late_webhook_when_redelivered() {
    let world = world().await;
    let method = mandate(&world, "ord_first_pack").await;
    set_behaviour(&world, &method, "slow").await;

    let (outcome, payment_id) = charge(&world, &method, "ord_top_slow").await;

    assert_eq!(
        outcome,
        OffSessionOutcome::Accepted {
            provider_reference: Some(payment_id.clone())
        }
    );
    assert!(world.take_events().is_empty(), "processing: nothing yet");
    let payment = PaymentRef {
        order_id: OrderId::new("ord_top_slow").unwrap(),
        provider_reference: Some(payment_id.clone()),
    };
    assert_eq!(
        world.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Pending
    );
    let path = format!("payments/{payment_id}/settle");
    let settled = support::sandbox_api(&world.base, &path, json!({ "outcome": "succeed" })).await;
    assert_eq!(settled["payment"]["status"], "paid");
    let events = world.take_events();
    let [PaymentEvent::PaymentSucceeded { order, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*order, locator("ord_top_slow", &payment_id));

    set_behaviour(&world, &method, "late_webhook").await;
    let (_, late) = charge(&world, &method, "ord_top_late").await;
    assert!(world.take_events().is_empty(), "held back");
    assert_eq!(
        charges_of(&world, "ord_top_late")[0].status,
        SimStatus::Paid
    );
    let path = format!("payments/{late}/redeliver");
    let redelivered = support::sandbox_api(&world.base, &path, json!({ "amountMinor": 1 })).await;
    assert_eq!(redelivered["statuses"], json!([200]));
    let events = world.take_events();
    assert!(matches!(
        &events[0].1[..],
        [PaymentEvent::PaymentSucceeded { .. }]
    ));
}

#[tokio::test]
async fn the_simulated_dodo_refuses_to_charge_an_unknown_or_a_tally_subscription() {
    let world = world().await;
    let mut method = mandate(&world, "ord_first_pack").await;
    method.method_ref = "sub_sandbox_unknown".into();
    let unknown = world
        .gateway
        .charge_saved_method(&top_up(&world, &method, "ord_top_unknown", "tu_unknown"))
        .await;
    assert!(
        matches!(unknown, Err(GatewayError::Rejected(_))),
        "{unknown:?}"
    );

    let (session_id, _) = world
        .checkout(plan("recurring", "19", "USD", "pdt_sandbox_pro"), "ord_sub")
        .await;
    world.pay(&session_id).await;
    let subscription = world
        .sandbox
        .hub()
        .payment(&session_id)
        .unwrap()
        .subscription_id
        .unwrap();
    method.method_ref = subscription;
    let tally = world
        .gateway
        .charge_saved_method(&top_up(&world, &method, "ord_top_sub", "tu_sub"))
        .await;
    assert!(matches!(tally, Err(GatewayError::Rejected(_))), "{tally:?}");
}

#[tokio::test]
async fn a_forgotten_method_ends_its_on_demand_subscription_and_is_charged_no_more() {
    let world = world().await;
    let method = mandate(&world, "ord_pack_forget").await;
    assert!(
        support::listed_method(&world.base, &method.method_ref).await["forgottenAtMs"].is_null()
    );
    let subscription_url = format!(
        "{}/subscriptions/{}",
        world.sandbox.api_base_url(domain::ProviderId::MorB),
        method.method_ref
    );
    let without_key = reqwest::Client::new()
        .patch(&subscription_url)
        .json(&json!({ "status": "cancelled" }))
        .send()
        .await
        .unwrap();
    assert_eq!(without_key.status(), 401);

    world.gateway.forget_saved_method(&method).await.unwrap();
    assert!(
        support::listed_method(&world.base, &method.method_ref).await["forgottenAtMs"].is_i64()
    );
    let shown: Value = reqwest::Client::new()
        .get(&subscription_url)
        .bearer_auth(sandbox::CREDENTIALS.api_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["status"], "cancelled");
    assert!(shown["cancelled_at"].is_string());
    let refused = world
        .gateway
        .charge_saved_method(&top_up(&world, &method, "ord_top_forgotten", "tu_f"))
        .await;
    assert!(
        matches!(&refused, Err(GatewayError::Rejected(why)) if why.contains("cancelled")),
        "{refused:?}"
    );
    assert!(charges_of(&world, "ord_top_forgotten").is_empty());
}
