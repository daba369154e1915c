//! Switching plans at the providers other than Stripe, through the sandbox (issue 19): Dodo
//! Payments (`mor_b`) switches with `POST /subscriptions/{id}/change-plan` and resumes with
//! `cancel_at_next_billing_date: false`; the subscription follows Dodo's
//! `subscription.plan_changed`, checked against the switch asked for.
//!
//! Creem (`mor_a`) switches with `POST /v1/subscriptions/{id}/upgrade` and has no resume; the
//! subscription follows Creem's `subscription.update`.
//!
//! The catalog adds `team_small_yearly` (199 USD a year, 30,000 credits a year) next to the
//! shipped `team_yearly` (299 USD a year, 60,000 credits a year), both sold through `mor_b`, and
//! `pro_plus_monthly_eur` (19.49 EUR a month, 3,000 credits a month) next to the shipped
//! `pro_monthly_eur` (9.49 EUR a month, 1,000 credits a month), both sold through `mor_a`.

use std::sync::Arc;

use application::ports::Clock;
use bootstrap::seams::SystemClock;
use serde_json::{Value, json};
use tests::{TestApp, catalog_with, spawn_app_from};

pub(super) const SMALL_TEAM: &str = r#"
[plans.team_small_yearly]
provider = "mor_b"
amount = 199.00
currency = "USD"
duration = { months = 12, type = "recurring", credits = 30000 }
morBProductId = "pdt_TeamSmallYearlyUsd19900"
[plans.team_small_yearly.i18n.en]
name = "Small team yearly"

[plans.pro_plus_monthly_eur]
provider = "mor_a"
amount = 19.49
currency = "EUR"
duration = { months = 1, type = "recurring", credits = 3000 }
morAProductId = "prod_ProPlusMonthlyEur1949"
[plans.pro_plus_monthly_eur.i18n.en]
name = "Pro Plus monthly"
"#;

/// 30,000 credits in hundredths.
const CREDITS_30000: i64 = 3_000_000;

async fn app() -> TestApp {
    let catalog = catalog_with(SMALL_TEAM);
    let app = spawn_app_from(catalog.path(), |_| {}).await;
    // The catalog is read at start; the directory may go.
    drop(catalog);
    app
}

/// Buy and pay `plan` through `mor_b`: our subscription's id, Dodo's, and the order.
async fn subscribe(app: &TestApp, token: &str, plan: &str) -> (String, String, String) {
    subscribe_at(app, token, plan, "mor_b").await
}

/// Buy and pay `plan` through `provider`: our subscription's id, the provider's, and the order.
async fn subscribe_at(
    app: &TestApp,
    token: &str,
    plan: &str,
    provider: &str,
) -> (String, String, String) {
    let (order, _) = app.open_checkout(token, plan, provider, None).await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    let dodo = app.sandbox_payment(&order).await["subscriptionId"]
        .as_str()
        .expect("dodo subscription")
        .to_owned();
    let ours = subscription(app, token).await["id"]
        .as_str()
        .expect("subscription id")
        .to_owned();
    (ours, dodo, order)
}

async fn subscription(app: &TestApp, token: &str) -> Value {
    let (status, body) = app.get(token, "/api/credits/status").await;
    assert_eq!(status, 200, "{body}");
    let list = body["subscriptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(list.len(), 1, "{body}");
    list[0].clone()
}

async fn change_plan(app: &TestApp, token: &str, id: &str, plan: &str) -> (u16, Value) {
    app.post(
        token,
        &format!("/api/subscriptions/{id}/change-plan"),
        &json!({ "planId": plan }),
        None,
    )
    .await
}

async fn wait_for_balance(app: &TestApp, token: &str, expected: i64) {
    for _ in 0..50 {
        if app.balance_hundredths(token).await == expected {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(app.balance_hundredths(token).await, expected);
}

#[tokio::test]
async fn a_dodo_upgrade_follows_subscription_plan_changed_and_grants_the_extra_credits() {
    let app = app().await;
    let token = app.register("dodo-up@example.com").await;
    let (id, _, _) = subscribe(&app, &token, "team_small_yearly").await;
    wait_for_balance(&app, &token, CREDITS_30000).await;

    let (status, body) = change_plan(&app, &token, &id, "team_yearly").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "upgrade");
    assert_eq!(body["confirmed"], true, "{body}");
    let now = subscription(&app, &token).await;
    assert_eq!(now["planId"], "team_yearly");
    assert_eq!(now["pendingPlanId"], Value::Null);
    // 60,000 a year less the 30,000 already granted for the period.
    wait_for_balance(&app, &token, 2 * CREDITS_30000).await;
}

#[tokio::test]
async fn a_dodo_downgrade_moves_the_plan_and_grants_nothing_now() {
    let app = app().await;
    let token = app.register("dodo-down@example.com").await;
    let (id, _, _) = subscribe(&app, &token, "team_yearly").await;
    wait_for_balance(&app, &token, 2 * CREDITS_30000).await;

    let (status, body) = change_plan(&app, &token, &id, "team_small_yearly").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "downgrade");
    assert_eq!(body["confirmed"], true, "{body}");
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "team_small_yearly"
    );
    assert_eq!(app.balance_hundredths(&token).await, 2 * CREDITS_30000);
}

#[tokio::test]
async fn a_dodo_scheduled_cancellation_is_resumed_at_the_provider() {
    let app = app().await;
    let token = app.register("dodo-resume@example.com").await;
    let (id, _, order) = subscribe(&app, &token, "team_yearly").await;
    let (status, body) = app
        .post(
            &token,
            &format!("/api/payment/cancel/{order}"),
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(subscription(&app, &token).await["cancelAtPeriodEnd"], true);

    let resume = format!("/api/subscriptions/{id}/resume");
    let (status, body) = app.post(&token, &resume, &json!({}), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelAtPeriodEnd"], false);
    assert_eq!(subscription(&app, &token).await["cancelAtPeriodEnd"], false);
}

/// A `subscription.plan_changed` signed with the sandbox's webhook secret, saying the
/// subscription now bills `amount_minor` a year.
fn plan_changed(app: &TestApp, dodo_id: &str, amount_minor: i64) -> sandbox::SimWebhook {
    // Any RFC 3339 offset reads as Dodo's UTC times do.
    let at = sandbox::formats::beijing_rfc3339(SystemClock.now());
    let hub = sandbox::Hub::new(&app.address, Arc::new(SystemClock));
    let body = json!({
        "business_id": "bus_sandbox_tally",
        "type": "subscription.plan_changed",
        "timestamp": at,
        "data": {
            "subscription_id": dodo_id, "status": "active", "currency": "USD",
            "recurring_pre_tax_amount": amount_minor, "product_id": "pdt_Hostile",
            "payment_frequency_interval": "Month", "payment_frequency_count": 12,
            "cancel_at_next_billing_date": false, "metadata": {}
        }
    });
    sandbox::mor_b::sign_event(&hub, &body)
}

async fn post_webhook(app: &TestApp, webhook: &sandbox::SimWebhook) -> u16 {
    let mut request = app
        .client
        .post(app.url("/api/payment/webhook/mor_b"))
        .header("content-type", webhook.content_type.clone())
        .body(webhook.body.clone());
    for (name, value) in &webhook.headers {
        request = request.header(name, value);
    }
    request.send().await.expect("webhook").status().as_u16()
}

#[tokio::test]
async fn a_dodo_plan_change_at_another_price_is_a_mismatch_and_changes_nothing() {
    let app = app().await;
    let token = app.register("dodo-hostile@example.com").await;
    let (id, dodo, _) = subscribe(&app, &token, "team_small_yearly").await;
    wait_for_balance(&app, &token, CREDITS_30000).await;

    // No switch asked: a signed event billing 299 changes nothing.
    assert_eq!(
        post_webhook(&app, &plan_changed(&app, &dodo, 29_900)).await,
        200
    );
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "team_small_yearly"
    );

    // A switch asked, Dodo's own event lost: the change stays pending.
    let dropped = app
        .client
        .post(app.url("/sandbox/api/drop-webhooks"))
        .json(&json!({ "count": 1 }))
        .send()
        .await
        .unwrap();
    assert!(dropped.status().is_success());
    let (status, body) = change_plan(&app, &token, &id, "team_yearly").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["confirmed"], false, "{body}");
    assert_eq!(
        subscription(&app, &token).await["pendingPlanId"],
        "team_yearly"
    );

    // At another price than asked: a mismatch.
    assert_eq!(post_webhook(&app, &plan_changed(&app, &dodo, 1)).await, 200);
    let still = subscription(&app, &token).await;
    assert_eq!(still["planId"], "team_small_yearly");
    assert_eq!(still["pendingPlanId"], "team_yearly");
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_30000);

    // At the asked price: applied once.
    let genuine = plan_changed(&app, &dodo, 29_900);
    assert_eq!(post_webhook(&app, &genuine).await, 200);
    assert_eq!(post_webhook(&app, &genuine).await, 200);
    let done = subscription(&app, &token).await;
    assert_eq!(done["planId"], "team_yearly");
    assert_eq!(done["pendingPlanId"], Value::Null);
    wait_for_balance(&app, &token, 2 * CREDITS_30000).await;
}

/// 1,000 credits in hundredths.
const CREDITS_1000: i64 = 100_000;

#[tokio::test]
async fn a_creem_upgrade_and_downgrade_follow_subscription_update() {
    let app = app().await;
    let token = app.register("creem-switch@example.com").await;
    let (id, _, _) = subscribe_at(&app, &token, "pro_monthly_eur", "mor_a").await;
    wait_for_balance(&app, &token, CREDITS_1000).await;

    let (status, body) = change_plan(&app, &token, &id, "pro_plus_monthly_eur").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "upgrade");
    assert_eq!(body["confirmed"], true, "{body}");
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "pro_plus_monthly_eur"
    );
    // 3,000 a month less the 1,000 already granted for the period.
    wait_for_balance(&app, &token, 3 * CREDITS_1000).await;

    let (status, body) = change_plan(&app, &token, &id, "pro_monthly_eur").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "downgrade");
    assert_eq!(body["confirmed"], true, "{body}");
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "pro_monthly_eur"
    );
    assert_eq!(app.balance_hundredths(&token).await, 3 * CREDITS_1000);
}

#[tokio::test]
async fn a_creem_scheduled_cancellation_cannot_be_resumed_and_says_so() {
    let app = app().await;
    let token = app.register("creem-resume@example.com").await;
    let (id, _, order) = subscribe_at(&app, &token, "pro_monthly_eur", "mor_a").await;
    let (status, body) = app
        .post(
            &token,
            &format!("/api/payment/cancel/{order}"),
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let resume = format!("/api/subscriptions/{id}/resume");
    let (status, body) = app.post(&token, &resume, &json!({}), None).await;
    assert_eq!(
        (status, body["code"].clone()),
        (409, json!("not_switchable")),
        "{body}"
    );
    assert_eq!(subscription(&app, &token).await["cancelAtPeriodEnd"], true);
}
