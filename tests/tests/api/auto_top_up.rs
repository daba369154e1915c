//! Automatic top-up through HTTP, against the sandbox's Stripe: a buyer saves their card by
//! buying a pack with consent, sets a rule, and spends below the threshold buy the pack
//! off-session, paid only by the provider's event; the monthly cap, a decline's cool-off,
//! declines in a row, a charge that needs the buyer, a webhook delivered twice, a refund, and
//! removing the card each do what `docs/auto-top-up.md` says; 64 concurrent spends below the
//! threshold ask for one top-up.

use std::time::Duration;

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

const PACK: &str = "credits_card_500";
const CONSUME: &str = "/api/credits/consume";
pub(crate) const TOP_UP: &str = "/api/auto-top-up";

/// A buyer with a saved card and the keys to spend and read events for them.
pub(crate) struct Buyer {
    pub(crate) token: String,
    pub(crate) id: String,
    pub(crate) spender: String,
    pub(crate) reader: String,
    pub(crate) method: String,
}

pub(crate) async fn put(app: &TestApp, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let response = app
        .client
        .put(app.url(path))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("put");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn sandbox_post(app: &TestApp, path: &str, body: &Value) -> Value {
    let response = app
        .client
        .post(app.url(path))
        .json(body)
        .send()
        .await
        .expect("sandbox");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.unwrap_or(Value::Null)
}

/// Buy the pack with consent to save the card, and pay it in the sandbox.
async fn buyer(app: &TestApp, admin: &str, email: &str) -> Buyer {
    buyer_of(app, admin, email, PACK, "card_gateway").await
}

/// Buy `pack` through `provider` with consent to save the card, and pay it in the sandbox; the
/// sandbox's card is a Visa ending 4242 at every provider.
pub(crate) async fn buyer_of(
    app: &TestApp,
    admin: &str,
    email: &str,
    pack: &str,
    provider: &str,
) -> Buyer {
    let (id, token) = app.user(email).await;
    let body = json!({"planId": pack, "provider": provider, "saveForAutoTopUp": true});
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
    assert_eq!(
        (method["brand"].as_str(), method["last4"].as_str()),
        (Some("visa"), Some("4242")),
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

/// Poll `GET /api/auto-top-up` until `done` holds (at most 10 s).
pub(crate) async fn wait_for(app: &TestApp, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        let (status, overview) = app.get(token, TOP_UP).await;
        assert_eq!(status, 200, "{overview}");
        if done(&overview) {
            return overview;
        }
        last = overview;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never got there: {last}");
}

pub(crate) fn statuses(overview: &Value) -> Vec<&str> {
    overview["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|t| t["status"].as_str().unwrap_or_default())
        .collect()
}

pub(crate) async fn spend(app: &TestApp, buyer: &Buyer, key: &str) {
    let body = json!({"userId": buyer.id, "feature": "image_hd"});
    let (status, spent) = app.post(&buyer.spender, CONSUME, &body, Some(key)).await;
    assert_eq!(status, 201, "{spent}");
}

pub(crate) async fn set_rule(app: &TestApp, buyer: &Buyer, rule: &Value) -> Value {
    let (status, overview) = put(app, &buyer.token, TOP_UP, rule).await;
    assert_eq!(status, 200, "{overview}");
    overview
}

pub(crate) async fn behave(app: &TestApp, buyer: &Buyer, next: &str) {
    let path = format!(
        "/sandbox/api/payment-methods/{}/behaviour",
        sandbox_method(app, buyer).await
    );
    sandbox_post(app, &path, &json!({"next": next})).await;
}

/// The sandbox's id of the buyer's saved method (Stripe's `pm_…`, PayPal's vault token, Dodo's
/// on-demand `sub_…`).
pub(crate) async fn sandbox_method(app: &TestApp, buyer: &Buyer) -> String {
    let (_, overview) = app.get(&buyer.token, TOP_UP).await;
    let order = overview["paymentMethods"][0]["orderId"]
        .as_str()
        .expect("order")
        .to_owned();
    let listed = sandbox_methods(app, &order).await;
    listed[0]["id"].as_str().expect("pm id").to_owned()
}

/// The methods the sandbox saved at `order`'s checkout (`GET /sandbox/api/payment-methods`).
async fn sandbox_methods(app: &TestApp, order: &str) -> Value {
    app.client
        .get(app.url("/sandbox/api/payment-methods"))
        .query(&[("orderId", order)])
        .send()
        .await
        .expect("methods")
        .json()
        .await
        .expect("json")
}

/// Remove the buyer's saved method (`DELETE /api/auto-top-up/payment-methods/{id}`) and check
/// that its provider was asked to forget it: the sandbox lists it forgotten. The overview the
/// removal answered.
pub(crate) async fn remove_method(app: &TestApp, buyer: &Buyer) -> Value {
    let (_, overview) = app.get(&buyer.token, TOP_UP).await;
    let order = overview["paymentMethods"][0]["orderId"]
        .as_str()
        .expect("order")
        .to_owned();
    assert!(
        sandbox_methods(app, &order).await[0]["forgottenAtMs"].is_null(),
        "kept at the provider until removed"
    );
    let path = format!("{TOP_UP}/payment-methods/{}", buyer.method);
    let (status, removed) = app.delete(&buyer.token, &path).await;
    assert_eq!(status, 200, "{removed}");
    let listed = sandbox_methods(app, &order).await;
    assert!(
        listed[0]["forgottenAtMs"].is_i64(),
        "the provider forgot it: {listed}"
    );
    removed
}

pub(crate) async fn event_types(app: &TestApp, buyer: &Buyer) -> Vec<String> {
    let feed = "/api/events?type=auto_top_up.requested,auto_top_up.succeeded,auto_top_up.failed,\
                auto_top_up.disabled,auto_top_up.authentication_required&limit=100";
    let (status, events) = app.get(&buyer.reader, feed).await;
    assert_eq!(status, 200, "{events}");
    events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["data"]["accountId"] == buyer.id.as_str())
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn spends_below_the_threshold_buy_the_pack_once_each_within_the_monthly_cap() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "topup@example.com").await;
    assert_eq!(app.balance_hundredths(&buyer.token).await, 50_000);
    let rule = json!({"enabled": true, "threshold": "10000", "planId": PACK, "maxPerMonth": 2});
    let overview = set_rule(&app, &buyer, &rule).await;
    assert_eq!(
        overview["rule"]["paymentMethod"]["id"],
        buyer.method.as_str(),
        "{overview}"
    );

    spend(&app, &buyer, "s1").await;
    let done = wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        50_000 - 1_000 + 50_000
    );
    let first = &done["history"][0];
    assert_eq!(
        (first["amountMinor"].as_i64(), first["credits"].as_str()),
        (Some(499), Some("500.00"))
    );
    assert_eq!(done["rule"]["monthCount"], 1);

    spend(&app, &buyer, "s2").await;
    wait_for(&app, &buyer.token, |o| {
        statuses(o) == ["succeeded", "succeeded"]
    })
    .await;
    // The cap of two is reached: a third spend below the threshold asks for nothing.
    spend(&app, &buyer, "s3").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, after) = app.get(&buyer.token, TOP_UP).await;
    assert_eq!(statuses(&after), ["succeeded", "succeeded"], "{after}");
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        50_000 - 3_000 + 100_000
    );
    let told = event_types(&app, &buyer).await;
    let count = |t: &str| told.iter().filter(|e| *e == t).count();
    assert_eq!(
        (
            count("auto_top_up.requested"),
            count("auto_top_up.succeeded")
        ),
        (2, 2),
        "{told:?}"
    );
}

#[tokio::test]
async fn a_decline_cools_off_and_three_in_a_row_turn_automatic_top_up_off() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "declined@example.com").await;
    set_rule(
        &app,
        &buyer,
        &json!({"enabled": true, "threshold": "10000", "planId": PACK}),
    )
    .await;
    behave(&app, &buyer, "decline").await;
    spend(&app, &buyer, "d1").await;
    let declined = wait_for(&app, &buyer.token, |o| statuses(o) == ["failed"]).await;
    assert_eq!(declined["rule"]["declines"], 1, "{declined}");
    assert!(declined["rule"]["coolOffUntil"].is_string(), "{declined}");
    assert_eq!(
        declined["rule"]["monthCount"], 0,
        "a decline gives its count back"
    );
    // During the cool-off no spend asks for a top-up.
    spend(&app, &buyer, "d2").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(statuses(&app.get(&buyer.token, TOP_UP).await.1), ["failed"]);
    for (round, key) in [(2, "d3"), (3, "d4")] {
        app.advance_clock(25 * 3_600_000);
        spend(&app, &buyer, key).await;
        wait_for(&app, &buyer.token, |o| {
            statuses(o).len() == round && statuses(o)[0] == "failed"
        })
        .await;
    }
    let off = wait_for(&app, &buyer.token, |o| o["rule"]["enabled"] == false).await;
    assert_eq!(off["rule"]["disabledReason"], "declines", "{off}");
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        50_000 - 4_000,
        "nothing granted"
    );
    assert!(
        event_types(&app, &buyer)
            .await
            .contains(&"auto_top_up.disabled".to_owned())
    );
    // Turned on again by its owner: it charges again.
    behave(&app, &buyer, "succeed").await;
    set_rule(
        &app,
        &buyer,
        &json!({"enabled": true, "threshold": "10000", "planId": PACK}),
    )
    .await;
    spend(&app, &buyer, "d5").await;
    wait_for(&app, &buyer.token, |o| statuses(o)[0] == "succeeded").await;
}

#[tokio::test]
async fn a_charge_that_needs_the_buyer_sends_them_to_a_checkout_of_the_same_order() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "sca@example.com").await;
    set_rule(
        &app,
        &buyer,
        &json!({"enabled": true, "threshold": "10000", "planId": PACK}),
    )
    .await;
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
    assert!(waiting["rule"]["coolOffUntil"].is_string());
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        49_000,
        "nothing granted yet"
    );
    let order = top_up["orderId"].as_str().expect("order");
    app.sandbox_action(order, "pay", &json!({})).await;
    wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    assert_eq!(app.balance_hundredths(&buyer.token).await, 99_000);
}

#[tokio::test]
async fn a_webhook_delivered_twice_grants_once_and_a_refund_turns_it_off() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "twice@example.com").await;
    set_rule(
        &app,
        &buyer,
        &json!({"enabled": true, "threshold": "10000", "planId": PACK}),
    )
    .await;
    behave(&app, &buyer, "duplicate_webhook").await;
    spend(&app, &buyer, "t1").await;
    let done = wait_for(&app, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        99_000,
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
        49_000,
        "the top-up's credits are back"
    );
}

#[tokio::test]
async fn removing_the_card_turns_it_off_and_consent_is_refused_where_nothing_could_be_saved() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "remove@example.com").await;
    set_rule(
        &app,
        &buyer,
        &json!({"enabled": true, "threshold": "100", "planId": PACK}),
    )
    .await;
    let removed = remove_method(&app, &buyer).await;
    assert_eq!(removed["rule"]["enabled"], false);
    assert_eq!(removed["rule"]["disabledReason"], "method_removed");
    assert!(
        removed["paymentMethods"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
    let path = format!("{TOP_UP}/payment-methods/{}", buyer.method);
    assert_eq!(app.delete(&buyer.token, &path).await.0, 404);

    let subscription =
        json!({"planId": "pro_monthly", "provider": "card_gateway", "saveForAutoTopUp": true});
    let (status, refused) = app
        .post(&buyer.token, "/api/payment/initiate", &subscription, None)
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("save_method_not_supported"))
    );
    let no_vault =
        json!({"planId": "credits_cn_qr_1000", "provider": "wallet_qr", "saveForAutoTopUp": true});
    let (status, refused) = app
        .post(&buyer.token, "/api/payment/initiate", &no_vault, None)
        .await;
    assert_eq!(status, 422, "{refused}");
    let (status, refused) = put(
        &app,
        &buyer.token,
        TOP_UP,
        &json!({"enabled": true, "threshold": "5", "planId": "pro_monthly"}),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("auto_top_up_plan_not_allowed"))
    );
    let (status, refused) = put(
        &app,
        &buyer.token,
        TOP_UP,
        &json!({"enabled": true, "threshold": "0", "planId": PACK}),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("validation_failed"))
    );

    // A purchase without consent saves nothing.
    let (other_id, other) = app.user("nosave@example.com").await;
    let (order, _) = app.open_checkout(&other, PACK, "card_gateway", None).await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&other, &order, "paid").await;
    let (_, overview) = app.get(&other, TOP_UP).await;
    assert!(
        overview["paymentMethods"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{overview}"
    );
    let (status, seen) = app
        .get(
            &admin,
            &format!("/api/admin/accounts/{other_id}/auto-top-up"),
        )
        .await;
    assert_eq!(status, 200, "{seen}");
}

#[tokio::test]
async fn sixty_four_concurrent_spends_below_the_threshold_ask_for_one_top_up() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = buyer(&app, &admin, "crowd@example.com").await;
    // A slow charge keeps the top-up in flight while the spends run.
    behave(&app, &buyer, "slow").await;
    set_rule(
        &app,
        &buyer,
        &json!({"enabled": true, "threshold": "10000", "planId": PACK, "maxPerMonth": 50}),
    )
    .await;
    let app = std::sync::Arc::new(app);
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (app, spender, id) = (app.clone(), buyer.spender.clone(), buyer.id.clone());
            tokio::spawn(async move {
                let body = json!({"userId": id, "feature": "image"});
                app.post(&spender, CONSUME, &body, Some(&format!("c{i}")))
                    .await
                    .0
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("task"));
    }
    assert!(answers.iter().all(|s| *s == 201), "{answers:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, overview) = app.get(&buyer.token, TOP_UP).await;
    assert_eq!(statuses(&overview), ["charging"], "{overview}");
    let requested = event_types(&app, &buyer).await;
    assert_eq!(requested, ["auto_top_up.requested"], "{requested:?}");
    assert_eq!(
        app.balance_hundredths(&buyer.token).await,
        50_000 - 32_000,
        "nothing granted yet"
    );
}
