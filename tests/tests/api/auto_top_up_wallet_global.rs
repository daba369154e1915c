//! Automatic top-up through HTTP, against the sandbox's PayPal: a buyer keeps their PayPal
//! account in PayPal's vault by buying the PayPal pack with consent (approved in the sandbox,
//! captured by the service), sets a rule, and a spend below the threshold buys the pack with the
//! vaulted account, paid only by PayPal's capture event; a decline, a charge PayPal wants the
//! buyer for, and a capture event delivered twice each do what `docs/auto-top-up.md` says;
//! removing the account deletes its payment token at PayPal.

use std::time::Duration;

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

use crate::auto_top_up::{
    Buyer, behave, event_types, remove_method, set_rule, spend, statuses, wait_for,
};

const PACK: &str = "credits_wallet_global_2000";
/// The pack's credits, in hundredths.
const PACK_HUNDREDTHS: i64 = 200_000;
/// What one `image_hd` spend costs, in hundredths.
const SPEND: i64 = 1_000;

/// Buy the PayPal pack with consent to keep the account, approve it in the sandbox (the service
/// captures it), and wait for the vaulted account.
async fn paypal_buyer(app: &TestApp, admin: &str, email: &str) -> Buyer {
    let (id, token) = app.user(email).await;
    let body = json!({"planId": PACK, "provider": "wallet_global", "saveForAutoTopUp": true});
    let (status, started) = app.post(&token, "/api/payment/initiate", &body, None).await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().expect("order").to_owned();
    let opened = app.client.get(tests::checkout_url(&started)).send().await;
    assert!(opened.is_ok());
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    let overview = wait_for(app, &token, |o| {
        o["paymentMethods"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
    })
    .await;
    let method = &overview["paymentMethods"][0];
    assert_eq!(method["brand"], "paypal", "{overview}");
    assert!(method["last4"].is_null(), "{overview}");
    assert_eq!(
        method["walletAccount"], "buyer@sandbox.invalid",
        "{overview}"
    );
    assert_eq!(method["orderId"], order.as_str());
    Buyer {
        spender: app.api_key(admin, &["credits:consume"]).await,
        reader: app.api_key(admin, &["events:read"]).await,
        method: method["id"].as_str().expect("method id").to_owned(),
        token,
        id,
    }
}

fn rule() -> Value {
    json!({"enabled": true, "threshold": "10000", "planId": PACK})
}

#[tokio::test]
async fn a_spend_below_the_threshold_buys_the_paypal_pack_with_the_vaulted_account_once() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = paypal_buyer(&app, &admin, "paypal-topup@example.com").await;
    assert_eq!(app.balance_hundredths(&buyer.token).await, PACK_HUNDREDTHS);
    let overview = set_rule(&app, &buyer, &rule()).await;
    assert_eq!(
        overview["rule"]["paymentMethod"]["id"],
        buyer.method.as_str(),
        "{overview}"
    );
    spend(&app, &buyer, "p1").await;
    let done = wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    let first = &done["history"][0];
    assert_eq!(
        (first["amountMinor"].as_i64(), first["credits"].as_str()),
        (Some(1799), Some("2000.00")),
        "{done}"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        2 * PACK_HUNDREDTHS - SPEND,
        "the pack is granted once"
    );
    let told = event_types(&app, &buyer).await;
    let count = |t: &str| told.iter().filter(|e| *e == t).count();
    assert_eq!(
        (
            count("auto_top_up.requested"),
            count("auto_top_up.succeeded")
        ),
        (1, 1),
        "{told:?}"
    );
}

#[tokio::test]
async fn a_declined_paypal_charge_fails_the_top_up_and_grants_nothing() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = paypal_buyer(&app, &admin, "paypal-declined@example.com").await;
    set_rule(&app, &buyer, &rule()).await;
    behave(&app, &buyer, "decline").await;
    spend(&app, &buyer, "d1").await;
    let declined = wait_for(&app, &buyer.token, |o| statuses(o) == ["failed"]).await;
    assert_eq!(declined["rule"]["declines"], 1, "{declined}");
    assert!(declined["rule"]["coolOffUntil"].is_string(), "{declined}");
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        PACK_HUNDREDTHS - SPEND,
        "nothing granted"
    );
    // The owner removes the account: PayPal deletes its payment token too.
    let removed = remove_method(&app, &buyer).await;
    assert_eq!(removed["rule"]["disabledReason"], "method_removed");
}

#[tokio::test]
async fn a_charge_paypal_wants_the_buyer_for_sends_them_to_a_paypal_checkout_of_the_same_order() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = paypal_buyer(&app, &admin, "paypal-payer@example.com").await;
    set_rule(&app, &buyer, &rule()).await;
    behave(&app, &buyer, "authentication_required").await;
    spend(&app, &buyer, "a1").await;
    let waiting = wait_for(&app, &buyer.token, |o| {
        statuses(o) == ["authentication_required"]
    })
    .await;
    let top_up = &waiting["history"][0];
    assert!(
        top_up["actionUrl"]
            .as_str()
            .is_some_and(|u| u.contains("/sandbox/")),
        "{top_up}"
    );
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        PACK_HUNDREDTHS - SPEND,
        "nothing granted yet"
    );
    // The buyer approves the new PayPal order; the service captures it.
    let order = top_up["orderId"].as_str().expect("order");
    app.sandbox_action(order, "pay", &json!({})).await;
    wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        2 * PACK_HUNDREDTHS - SPEND
    );
}

#[tokio::test]
async fn a_paypal_capture_event_delivered_twice_grants_the_pack_once() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = paypal_buyer(&app, &admin, "paypal-twice@example.com").await;
    set_rule(&app, &buyer, &rule()).await;
    behave(&app, &buyer, "duplicate_webhook").await;
    spend(&app, &buyer, "t1").await;
    wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        2 * PACK_HUNDREDTHS - SPEND,
        "granted once"
    );
}
