//! Switching down and back up within one billing period never grants a plan's credits twice,
//! through every provider whose plan-change API Tally drives: Stripe (`card_gateway`), Dodo
//! (`mor_b`) and Creem (`mor_a`). PayPal's revise grants nothing before the next period and is
//! tested in `plan_changes_paypal`.
//!
//! Found by a hostile probe: a `pro_monthly` subscriber switching to the 0-credit legacy price
//! and back three times got 3,000 extra credits for a few dollars of proration.

use serde_json::{Value, json};
use tests::{TestApp, catalog_with, spawn_app_from};

use super::plan_changes_providers::SMALL_TEAM;

/// A listed cheaper plan next to Stripe's shipped `pro_monthly`; Dodo's and Creem's are
/// `plan_changes_providers`' (`team_small_yearly`, `pro_plus_monthly_eur`).
const PRO_LITE: &str = r#"
[plans.pro_lite_monthly]
provider = "card_gateway"
amount = 4.99
currency = "USD"
duration = { months = 1, type = "recurring", credits = 200 }
cardGatewayPriceId = "price_1PkProLiteMonthlyUsd499"
[plans.pro_lite_monthly.i18n.en]
name = "Pro Lite monthly"
"#;

async fn app() -> TestApp {
    let catalog = catalog_with(&format!("{PRO_LITE}{SMALL_TEAM}"));
    let app = spawn_app_from(catalog.path(), |_| {}).await;
    drop(catalog);
    app
}

/// Buy and pay `plan` through `provider`; our subscription's id.
async fn subscribe(app: &TestApp, token: &str, plan: &str, provider: &str) -> String {
    let (order, _) = app.open_checkout(token, plan, provider, None).await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    let (status, body) = app.get(token, "/api/credits/status").await;
    assert_eq!(status, 200, "{body}");
    body["subscriptions"][0]["id"]
        .as_str()
        .expect("subscription id")
        .to_owned()
}

async fn settled_balance(app: &TestApp, token: &str) -> i64 {
    // Grants arrive with the provider's webhook; give a late one time to land.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    app.balance_hundredths(token).await
}

/// Switch to `plan`; the sandbox's provider confirms it before it answers.
async fn switch(app: &TestApp, token: &str, id: &str, plan: &str) -> Value {
    let path = format!("/api/subscriptions/{id}/change-plan");
    let (status, body) = app
        .post(token, &path, &json!({ "planId": plan }), None)
        .await;
    assert_eq!(status, 200, "{plan}: {body}");
    assert_eq!(body["confirmed"], true, "{plan}: {body}");
    body
}

/// Subscribe to `high` through `provider`, then switch to `low` and back three times: the
/// balance stays what the first period granted.
async fn farm(provider: &str, high: &str, low: &str, granted_hundredths: i64) {
    let app = app().await;
    let token = app
        .register(&format!("farmer-{provider}@example.com"))
        .await;
    let id = subscribe(&app, &token, high, provider).await;
    assert_eq!(settled_balance(&app, &token).await, granted_hundredths);
    for round in 0..3 {
        assert_eq!(switch(&app, &token, &id, low).await["change"], "downgrade");
        assert_eq!(switch(&app, &token, &id, high).await["change"], "upgrade");
        assert_eq!(
            settled_balance(&app, &token).await,
            granted_hundredths,
            "{provider}: round {round} minted credits"
        );
    }
}

#[tokio::test]
async fn switching_down_and_back_up_at_stripe_grants_nothing_more() {
    farm("card_gateway", "pro_monthly", "pro_lite_monthly", 100_000).await;
}

#[tokio::test]
async fn switching_down_and_back_up_at_dodo_grants_nothing_more() {
    farm("mor_b", "team_yearly", "team_small_yearly", 6_000_000).await;
}

#[tokio::test]
async fn switching_down_and_back_up_at_creem_grants_nothing_more() {
    farm("mor_a", "pro_plus_monthly_eur", "pro_monthly_eur", 300_000).await;
}

/// The probe's own sequence, with the legacy price allowed to the subscriber: three round
/// trips through it, then a switch to yearly, which takes back the month's unused share and
/// leaves no extra lot behind.
#[tokio::test]
async fn the_legacy_round_trips_then_a_yearly_switch_leave_only_the_years_credits() {
    let app = app().await;
    let token = app.register("legacy-farmer@example.com").await;
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let id = subscribe(&app, &token, "pro_monthly", "card_gateway").await;
    for _ in 0..3 {
        switch(&app, &token, &id, "pro_monthly_legacy").await;
        switch(&app, &token, &id, "pro_monthly").await;
    }
    assert_eq!(settled_balance(&app, &token).await, 100_000);
    let body = switch(&app, &token, &id, "pro_yearly").await;
    assert_eq!(body["change"], "interval_change", "{body}");
    // 12,000 for the year; of the month's 1,000 only what the seconds since it began used up
    // stays (at most a hundredth of a credit or so).
    let balance = settled_balance(&app, &token).await;
    assert!(
        (1_200_000..=1_200_100).contains(&balance),
        "balance {balance}"
    );
}
