//! Buying every shipped plan end to end through the sandbox: initiate, pay on the hosted
//! checkout, the provider's signed webhook, the order paid, credits granted exactly once even
//! when the webhook is delivered again, three times at once; decline; subscription renewal,
//! cancellation and refund; the reconciler completing an order whose webhook was lost.

use serde_json::{Value, json};

use tests::{TestApp, checkout_url, spawn_app, spawn_app_with};

async fn buy(app: &TestApp, token: &str, plan: &str, provider: &str) -> String {
    let key = format!("buy-{plan}");
    let (order, started) = app.open_checkout(token, plan, provider, Some(&key)).await;
    assert_eq!(started["status"], "pending");
    let url = checkout_url(&started);
    assert!(url.starts_with("http"), "{plan}: checkout target {url}");
    order
}

async fn balance_hundredths(app: &TestApp, token: &str) -> i64 {
    app.balance_hundredths(token).await
}

async fn all_plans(app: &TestApp) -> Vec<Value> {
    let admin_view: Value = app
        .client
        .get(app.url("/api/plans"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    admin_view["plans"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn every_listed_plan_of_every_provider_can_be_bought_through_the_sandbox() {
    // One buyer buys every subscription plan too.
    let app = spawn_app_with(|s| s.allow_several_subscriptions = true).await;
    let token = app.register("buyer@example.com").await;
    let plans = all_plans(&app).await;
    let providers: std::collections::BTreeSet<&str> = plans
        .iter()
        .filter_map(|p| p["provider"].as_str())
        .collect();
    assert_eq!(
        providers.len(),
        7,
        "the catalog lists every provider: {providers:?}"
    );
    let mut expected_hundredths = 0;
    for plan in &plans {
        let id = plan["id"].as_str().unwrap();
        let order = buy(&app, &token, id, plan["provider"].as_str().unwrap()).await;
        app.sandbox_action(&order, "pay", &json!({})).await;
        app.wait_for_status(&token, &order, "paid").await;
        // Credits packs grant once; subscriptions grant their first period's credits.
        expected_hundredths += plan["duration"]["creditsHundredths"].as_i64().unwrap_or(0);
    }
    for _ in 0..100 {
        if balance_hundredths(&app, &token).await == expected_hundredths {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(balance_hundredths(&app, &token).await, expected_hundredths);
}

#[tokio::test]
async fn a_credits_pack_is_granted_once_when_its_webhooks_arrive_three_more_times_at_once() {
    let app = spawn_app().await;
    let token = app.register("dup@example.com").await;
    let order = buy(&app, &token, "credits_card_500", "card_gateway").await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    assert_eq!(balance_hundredths(&app, &token).await, 50_000);
    let replays = app
        .sandbox_action(&order, "redeliver", &json!({"amountMinor": 3}))
        .await;
    for status in replays["statuses"].as_array().unwrap() {
        assert_eq!(
            status.as_u64().map(|s| s / 100),
            Some(2),
            "a duplicate is acknowledged: {replays}"
        );
    }
    assert_eq!(balance_hundredths(&app, &token).await, 50_000);
    let (_, history) = app.get(&token, "/api/credits/transactions").await;
    assert_eq!(history["total"], 1, "{history}");
}

#[tokio::test]
async fn a_declined_payment_fails_the_order_and_grants_nothing() {
    let app = spawn_app().await;
    let token = app.register("decline@example.com").await;
    let order = buy(&app, &token, "credits_mor_b_10000", "mor_b").await;
    app.sandbox_action(&order, "decline", &json!({})).await;
    app.wait_for_status(&token, &order, "failed").await;
    assert_eq!(balance_hundredths(&app, &token).await, 0);
}

#[tokio::test]
async fn a_refund_claws_back_the_unspent_credits() {
    let app = spawn_app().await;
    let token = app.register("refund@example.com").await;
    let order = buy(&app, &token, "credits_card_500", "card_gateway").await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    app.sandbox_action(&order, "refund", &json!({})).await;
    app.wait_for_status(&token, &order, "refunded").await;
    assert_eq!(balance_hundredths(&app, &token).await, 0);
}

#[tokio::test]
async fn a_subscription_renews_with_its_period_credits_once_and_cancels_at_period_end() {
    let app = spawn_app().await;
    let token = app.register("sub@example.com").await;
    let order = buy(&app, &token, "pro_monthly", "card_gateway").await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    let payment = app.sandbox_payment(&order).await;
    let subscription = payment["subscriptionId"]
        .as_str()
        .expect("sandbox subscription")
        .to_owned();
    for _ in 0..50 {
        if balance_hundredths(&app, &token).await == 100_000 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        balance_hundredths(&app, &token).await,
        100_000,
        "first period's credits"
    );
    let renew = app
        .client
        .post(app.url(&format!("/sandbox/api/subscriptions/{subscription}/renew")))
        .send()
        .await
        .unwrap();
    assert!(renew.status().is_success());
    for _ in 0..50 {
        if balance_hundredths(&app, &token).await == 200_000 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        balance_hundredths(&app, &token).await,
        200_000,
        "second period's credits"
    );
    let (status, cancelled) = app
        .post(
            &token,
            &format!("/api/payment/cancel/{order}"),
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    let (_, report) = app.get(&token, "/api/credits/status").await;
    assert_eq!(
        report["subscription"]["cancelAtPeriodEnd"], true,
        "{report}"
    );
}

#[tokio::test]
async fn the_reconciler_completes_an_order_whose_webhook_was_lost() {
    let app = spawn_app_with(|s| {
        s.reconciler.enabled = true;
        s.reconciler.interval_ms = 200;
        s.reconciler.pass.pending_after_ms = 0;
    })
    .await;
    let token = app.register("lost@example.com").await;
    let order = buy(&app, &token, "credits_card_500", "card_gateway").await;
    let dropped = app
        .client
        .post(app.url("/sandbox/api/drop-webhooks"))
        .json(&json!({"count": 10}))
        .send()
        .await
        .unwrap();
    assert_eq!(dropped.status(), 204);
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    assert_eq!(balance_hundredths(&app, &token).await, 50_000);
}
