//! Automatic top-up through HTTP against the sandbox's Dodo Payments: a buyer keeps their card
//! by buying `credits_mor_b_10000` with consent (an on-demand subscription), sets a rule, and a
//! spend below the threshold buys the pack with `POST /subscriptions/{id}/charge`, paid only by
//! Dodo's `payment.succeeded`; a decline cools off, a charge that needs the buyer sends them to
//! a checkout of the same order, and a webhook delivered twice grants once; removing the card
//! cancels the on-demand subscription at Dodo.

use std::time::Duration;

use serde_json::json;
use tests::{TestApp, spawn_app_with_admin};

use crate::auto_top_up::{
    Buyer, behave, buyer_of, event_types, remove_method, sandbox_method, set_rule, spend, statuses,
    wait_for,
};

const PACK: &str = "credits_mor_b_10000";
const TOP_UP: &str = "/api/auto-top-up";
/// The pack's 10,000 credits, in hundredths.
const PACK_HUNDREDTHS: i64 = 1_000_000;
/// What a spend of `image_hd` takes, in hundredths.
const SPEND_HUNDREDTHS: i64 = 1_000;

async fn buyer(app: &TestApp, admin: &str, email: &str) -> Buyer {
    let buyer = buyer_of(app, admin, email, PACK, "mor_b").await;
    let rule = json!({"enabled": true, "threshold": "20000", "planId": PACK});
    let overview = set_rule(app, &buyer, &rule).await;
    assert_eq!(
        overview["rule"]["paymentMethod"]["id"],
        buyer.method.as_str(),
        "{overview}"
    );
    buyer
}

#[tokio::test]
async fn a_spend_below_the_threshold_charges_the_on_demand_subscription_paid_by_its_webhook() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "dodo-topup@example.com").await;
    let mandate = sandbox_method(&app, &buyer).await;
    assert!(mandate.starts_with("sub_"), "{mandate}");
    assert_eq!(app.balance_hundredths(&buyer.token).await, PACK_HUNDREDTHS);

    spend(&app, &buyer, "s1").await;
    let done = wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    let top_up = &done["history"][0];
    assert_eq!(
        (top_up["amountMinor"].as_i64(), top_up["credits"].as_str()),
        (Some(7900), Some("10000.00")),
        "{done}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        2 * PACK_HUNDREDTHS - SPEND_HUNDREDTHS,
        "the pack granted once"
    );
    let order = top_up["orderId"].as_str().expect("order");
    let charge = app.sandbox_payment(order).await;
    assert!(
        charge["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("pay_")),
        "{charge}"
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
async fn a_declined_charge_fails_the_top_up_cools_off_and_grants_nothing() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "dodo-declined@example.com").await;
    behave(&app, &buyer, "decline").await;

    spend(&app, &buyer, "d1").await;
    let declined = wait_for(&app, &buyer.token, |o| statuses(o) == ["failed"]).await;

    assert_eq!(declined["rule"]["declines"], 1, "{declined}");
    assert!(declined["rule"]["coolOffUntil"].is_string(), "{declined}");
    assert_eq!(declined["rule"]["monthCount"], 0, "{declined}");
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        PACK_HUNDREDTHS - SPEND_HUNDREDTHS,
        "nothing granted"
    );
    // The owner removes the card: Dodo's on-demand subscription is cancelled too.
    let removed = remove_method(&app, &buyer).await;
    assert_eq!(removed["rule"]["disabledReason"], "method_removed");
}

#[tokio::test]
async fn a_charge_that_needs_the_buyer_sends_them_to_a_checkout_of_the_same_order() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "dodo-sca@example.com").await;
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
        PACK_HUNDREDTHS - SPEND_HUNDREDTHS,
        "nothing granted yet"
    );
    let order = top_up["orderId"].as_str().expect("order");
    app.sandbox_action(order, "pay", &json!({})).await;
    wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        2 * PACK_HUNDREDTHS - SPEND_HUNDREDTHS
    );
}

#[tokio::test]
async fn a_payment_webhook_delivered_twice_grants_once_and_a_refund_turns_it_off() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "dodo-twice@example.com").await;
    behave(&app, &buyer, "duplicate_webhook").await;

    spend(&app, &buyer, "t1").await;
    let done = wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    tokio::time::sleep(Duration::from_millis(800)).await;

    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        2 * PACK_HUNDREDTHS - SPEND_HUNDREDTHS,
        "granted once"
    );
    let order = done["history"][0]["orderId"].as_str().expect("order");
    let (status, refund) = app
        .post(
            &admin,
            &format!("/api/admin/orders/{order}/refund"),
            &json!({}),
            None,
        )
        .await;
    assert!(status < 300, "{refund}");
    let off = wait_for(&app, &buyer.token, |o| o["rule"]["enabled"] == false).await;
    assert_eq!(off["rule"]["disabledReason"], "refunded", "{off}");
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        PACK_HUNDREDTHS - SPEND_HUNDREDTHS,
        "the top-up's credits are back"
    );
    let (_, overview) = app.get(&buyer.token, TOP_UP).await;
    assert_eq!(statuses(&overview), ["succeeded"], "{overview}");
}
