//! Automatic top-up end to end: a consented credits checkout saves the buyer's PayPal account in
//! the simulated vault, the real gateway charges it by its vault id, and the simulated webhooks
//! come back through the real gateway's verification and look-ups.

use application::ports::{
    GatewayError, OffSessionCharge, OffSessionOutcome, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, SavedMethod,
};
use domain::{OrderId, UserId};
use sandbox::SimStatus;
use serde_json::{Value, json};

use super::{World, paid, plan, world};
use crate::support::usd;

/// The account a consented credits checkout of `order_id` saved, from its token event.
async fn saved_account(w: &World, order_id: &str) -> SavedMethod {
    let mut request = w.checkout_request(order_id, plan("credits", "17.99"));
    request.save_method = true;
    let id = w.checkout(&request).await;
    w.pay_and_capture(&request, &id).await;
    let saved = w.events_of("VAULT.PAYMENT-TOKEN.CREATED");
    saved
        .into_iter()
        .flatten()
        .find_map(|event| match event {
            PaymentEvent::PaymentMethodSaved { order, method, .. }
                if order.order_id.as_ref().map(OrderId::as_str) == Some(order_id) =>
            {
                Some(method)
            }
            _ => None,
        })
        .expect("the checkout saved the account")
}

fn top_up(method: &SavedMethod, order_id: &str, key: &str) -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new(order_id).unwrap(),
        user_id: UserId::new("user_1").unwrap(),
        amount: usd(1799),
        method: method.clone(),
        idempotency_key: key.to_owned(),
        description: "Automatic top-up: credits plan".into(),
        notify_url: String::new(),
    }
}

async fn set_behaviour(w: &World, method: &SavedMethod, next: &str) {
    let url = format!(
        "{}/sandbox/api/payment-methods/{}/behaviour",
        w.base, method.method_ref
    );
    let answer: Value = w
        .http
        .post(url)
        .json(&json!({ "next": next }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["next"], next);
}

/// The PayPal order id of an accepted charge.
fn accepted(outcome: OffSessionOutcome) -> String {
    match outcome {
        OffSessionOutcome::Accepted {
            provider_reference: Some(id),
        } => id,
        other => panic!("{other:?}"),
    }
}

async fn charge(w: &World, method: &SavedMethod, order_id: &str, key: &str) -> OffSessionOutcome {
    w.gateway
        .charge_saved_method(&top_up(method, order_id, key))
        .await
        .unwrap()
}

/// The payment events of `PAYMENT.CAPTURE.COMPLETED` for our order `order_id`.
fn captures_of(w: &World, order_id: &str) -> usize {
    w.events_of("PAYMENT.CAPTURE.COMPLETED")
        .iter()
        .flatten()
        .filter(|e| matches!(e, PaymentEvent::PaymentSucceeded { order, .. } if order.order_id.as_ref().map(OrderId::as_str) == Some(order_id)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consented_checkout_saves_the_paypal_account_and_reports_it_after_its_capture() {
    let w = world().await;
    let method = saved_account(&w, "ord_e2e_vault").await;
    assert_eq!(method.brand.as_deref(), Some("paypal"));
    assert_eq!(method.last4, None);
    assert_eq!(
        method.wallet_account.as_deref(),
        Some("buyer@sandbox.invalid")
    );
    // The token event reports the capture first, then the account, for the order that saved it.
    let token = w.events_of("VAULT.PAYMENT-TOKEN.CREATED");
    let checkout = w.sandbox.hub().payments_for_order("ord_e2e_vault")[0].clone();
    assert!(
        matches!(token[0].as_slice(), [succeeded, PaymentEvent::PaymentMethodSaved { order, .. }]
            if paid("ord_e2e_vault", &checkout.id, usd(1799))(succeeded)
                && order.provider_reference.as_deref() == Some(checkout.id.as_str())),
        "{token:?}"
    );
    // The simulator lists the account with its e-mail address and no card.
    let listed: Value = w
        .http
        .get(format!(
            "{}/sandbox/api/payment-methods?orderId=ord_e2e_vault",
            w.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed[0]["id"], method.method_ref);
    assert_eq!(listed[0]["customerId"], method.customer_ref);
    assert_eq!(listed[0]["walletAccount"], "buyer@sandbox.invalid");
    assert!(listed[0].get("brand").is_none() && listed[0].get("last4").is_none());
    // A checkout without consent saves nothing.
    let request = w.checkout_request("ord_e2e_no_vault", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    w.pay_and_capture(&request, &id).await;
    assert!(
        w.sandbox
            .hub()
            .methods_for_order("ord_e2e_no_vault")
            .is_empty()
    );
    assert_eq!(w.events_of("VAULT.PAYMENT-TOKEN.CREATED").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_up_is_paid_by_its_capture_webhook_once_however_often_it_is_retried() {
    let w = world().await;
    let method = saved_account(&w, "ord_e2e_vault_paid").await;
    let first = accepted(charge(&w, &method, "ord_e2e_top_1", "tu_1").await);
    let again = accepted(charge(&w, &method, "ord_e2e_top_1", "tu_1").await);
    assert_eq!(first, again, "the same request id answers the same order");
    assert_eq!(w.sandbox.hub().payments_for_order("ord_e2e_top_1").len(), 1);
    assert_eq!(captures_of(&w, "ord_e2e_top_1"), 1);
    assert!(
        w.events_of("PAYMENT.CAPTURE.COMPLETED")
            .iter()
            .flatten()
            .any(paid("ord_e2e_top_1", &first, usd(1799)))
    );
    // The reconciler reads the top-up's order by the PayPal id the charge answered.
    let status = w
        .gateway
        .query_payment(&PaymentRef {
            order_id: OrderId::new("ord_e2e_top_1").unwrap(),
            provider_reference: Some(first.clone()),
        })
        .await
        .unwrap();
    assert!(matches!(status, PaymentStatus::Succeeded { amount, .. } if amount == usd(1799)));
    // Another top-up is another charge.
    let second = accepted(charge(&w, &method, "ord_e2e_top_2", "tu_2").await);
    assert_ne!(first, second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_or_payer_action_charge_is_refused_at_once_and_sends_nothing() {
    let w = world().await;
    let method = saved_account(&w, "ord_e2e_vault_refused").await;
    set_behaviour(&w, &method, "decline").await;
    match charge(&w, &method, "ord_e2e_top_declined", "tu_d").await {
        OffSessionOutcome::Declined { reason } => {
            assert!(reason.starts_with("INSTRUMENT_DECLINED"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    set_behaviour(&w, &method, "authentication_required").await;
    assert_eq!(
        charge(&w, &method, "ord_e2e_top_auth", "tu_a").await,
        OffSessionOutcome::AuthenticationRequired
    );
    // Retried under its request id, a refusal is the same refusal, whatever the account says now.
    set_behaviour(&w, &method, "succeed").await;
    assert_eq!(
        charge(&w, &method, "ord_e2e_top_auth", "tu_a").await,
        OffSessionOutcome::AuthenticationRequired
    );
    assert_eq!(captures_of(&w, "ord_e2e_top_declined"), 0);
    assert_eq!(captures_of(&w, "ord_e2e_top_auth"), 0);
    assert!(w.events_of("PAYMENT.CAPTURE.DENIED").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicated_capture_webhook_is_the_same_event_twice() {
    let w = world().await;
    let method = saved_account(&w, "ord_e2e_vault_dup").await;
    set_behaviour(&w, &method, "duplicate_webhook").await;
    accepted(charge(&w, &method, "ord_e2e_top_dup", "tu_dup").await);
    let ids: Vec<String> = w
        .inbox
        .all()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|v| {
            v.events.iter().any(|e| matches!(e, PaymentEvent::PaymentSucceeded { order, .. } if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_e2e_top_dup")))
        })
        .map(|v| v.event_id)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_top_up_is_paid_or_denied_when_settled_and_a_late_webhook_when_redelivered() {
    let w = world().await;
    let method = saved_account(&w, "ord_e2e_vault_slow").await;
    set_behaviour(&w, &method, "slow").await;
    let slow = accepted(charge(&w, &method, "ord_e2e_top_slow", "tu_s").await);
    let reference = PaymentRef {
        order_id: OrderId::new("ord_e2e_top_slow").unwrap(),
        provider_reference: Some(slow.clone()),
    };
    let pending = w.gateway.query_payment(&reference).await.unwrap();
    assert_eq!(pending, PaymentStatus::Pending);
    assert_eq!(captures_of(&w, "ord_e2e_top_slow"), 0);
    w.action("payments", &slow, "settle", json!({ "outcome": "succeed" }))
        .await;
    assert_eq!(captures_of(&w, "ord_e2e_top_slow"), 1);
    assert!(matches!(
        w.gateway.query_payment(&reference).await.unwrap(),
        PaymentStatus::Succeeded { .. }
    ));
    let denied = accepted(charge(&w, &method, "ord_e2e_top_denied", "tu_sd").await);
    w.action("payments", &denied, "settle", json!({ "outcome": "fail" }))
        .await;
    let failures = w.events_of("PAYMENT.CAPTURE.DENIED");
    assert!(
        matches!(failures[0].as_slice(), [PaymentEvent::PaymentFailed { order, .. }]
            if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_e2e_top_denied")),
        "{failures:?}"
    );
    set_behaviour(&w, &method, "late_webhook").await;
    let late = accepted(charge(&w, &method, "ord_e2e_top_late", "tu_l").await);
    assert_eq!(w.payment(&late).status, SimStatus::Paid);
    assert_eq!(captures_of(&w, "ord_e2e_top_late"), 0);
    w.action("payments", &late, "redeliver", json!({ "amountMinor": 1 }))
        .await;
    assert_eq!(captures_of(&w, "ord_e2e_top_late"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_vault_refuses_an_account_it_does_not_know() {
    let w = world().await;
    let method = SavedMethod {
        customer_ref: "CUSnobody".into(),
        method_ref: "VTnobody".into(),
        brand: Some("paypal".into()),
        last4: None,
        wallet_account: None,
    };
    let refused = w
        .gateway
        .charge_saved_method(&top_up(&method, "ord_e2e_top_unknown", "tu_u"))
        .await;
    assert!(
        matches!(&refused, Err(GatewayError::Rejected(why)) if why.contains("INVALID_RESOURCE_ID")),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_account_has_its_payment_token_deleted_and_is_charged_no_more() {
    let w = world().await;
    let account = saved_account(&w, "ord_e2e_forget").await;
    let listed = || crate::support::listed_method(&w.base, &account.method_ref);
    assert!(listed().await["forgottenAtMs"].is_null());
    let token_url = format!(
        "{}/v3/vault/payment-tokens/{}",
        w.sandbox.api_base_url(domain::ProviderId::WalletGlobal),
        account.method_ref
    );
    let without_token = w.http.delete(&token_url).send().await.unwrap();
    assert_eq!(without_token.status(), 401);
    assert!(listed().await["forgottenAtMs"].is_null());

    w.gateway.forget_saved_method(&account).await.unwrap();
    assert!(listed().await["forgottenAtMs"].is_i64());
    let refused = w
        .gateway
        .charge_saved_method(&top_up(&account, "ord_e2e_top_forgotten", "tu_f"))
        .await;
    assert!(
        matches!(&refused, Err(GatewayError::Rejected(why)) if why.contains("INVALID_RESOURCE_ID")),
        "{refused:?}"
    );
    assert_eq!(captures_of(&w, "ord_e2e_top_forgotten"), 0);
    // A deleted token is unknown (404): forgetting it again is done already.
    w.gateway.forget_saved_method(&account).await.unwrap();
}
