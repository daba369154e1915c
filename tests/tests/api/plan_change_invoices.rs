//! A plan change's invoice through the sandbox's Stripe (issue 19): a change of billing interval
//! restarts the period and is applied by the invoice of the new period; an upgrade's proration
//! invoice is a charge whose refunds take back the upgrade's credits in proportion.
//!
//! The card gateway sells `pro_monthly` (9.99 USD a month, 1,000 credits), `pro_yearly`
//! (99.90 USD a year, 12,000 credits) and `pro_monthly_legacy` (7.99 USD a month, no credits).

use serde_json::{Value, json};
use tests::{TestApp, catalog_with, spawn_app, spawn_app_from};

const CREDITS_1000: i64 = 100_000;
const CREDITS_12000: i64 = 1_200_000;

/// Buy and pay `plan` at the card gateway; returns our subscription's id and Stripe's.
async fn subscribe(app: &TestApp, token: &str, plan: &str) -> (String, String) {
    let (order, _) = app.open_checkout(token, plan, "card_gateway", None).await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    let stripe = app.sandbox_payment(&order).await["subscriptionId"]
        .as_str()
        .expect("stripe subscription")
        .to_owned();
    let ours = subscription(app, token).await["id"]
        .as_str()
        .expect("subscription id")
        .to_owned();
    (ours, stripe)
}

async fn subscription(app: &TestApp, token: &str) -> Value {
    let (status, body) = app.get(token, "/api/credits/status").await;
    assert_eq!(status, 200, "{body}");
    body["subscriptions"][0].clone()
}

async fn change_plan(app: &TestApp, token: &str, id: &str, plan: &str) -> Value {
    let (status, body) = app
        .post(
            token,
            &format!("/api/subscriptions/{id}/change-plan"),
            &json!({ "planId": plan }),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The sandbox's subscription action `action` with `body`; its answer (the subscription).
async fn sandbox(app: &TestApp, stripe_id: &str, action: &str, body: &Value) -> Value {
    let response = app
        .client
        .post(app.url(&format!("/sandbox/api/subscriptions/{stripe_id}/{action}")))
        .json(body)
        .send()
        .await
        .expect("sandbox");
    assert_eq!(response.status(), 200, "{action}");
    response.json().await.expect("json")
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

/// The refunded share of `credits` for `refunded` of `paid`, rounded up as the domain does.
fn share(credits: i64, refunded: i64, paid: i64) -> i64 {
    (credits * refunded + paid - 1) / paid
}

/// The last charge of a sandbox subscription: its id and amount.
fn last_charge(subscription: &Value) -> (String, i64) {
    let charge = subscription["charges"]
        .as_array()
        .and_then(|c| c.last())
        .cloned()
        .expect("a charge");
    (
        charge["id"].as_str().expect("charge id").to_owned(),
        charge["amountMinor"].as_i64().expect("charge amount"),
    )
}

#[tokio::test]
async fn a_change_to_yearly_restarts_the_period_and_grants_the_yearly_credits_once() {
    let app = spawn_app().await;
    let token = app.register("yearly@example.com").await;
    let (id, stripe) = subscribe(&app, &token, "pro_monthly").await;
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_1000);
    let before = subscription(&app, &token).await;

    // Stripe restarts the cycle and invoices the year at once, less the unused month: the
    // sandbox sends the update and that invoice before it answers.
    let body = change_plan(&app, &token, &id, "pro_yearly").await;
    assert_eq!(body["confirmed"], true, "{body}");
    let now = subscription(&app, &token).await;
    assert_eq!(now["planId"], "pro_yearly");
    assert_eq!(now["pendingPlanId"], Value::Null);
    let year = |v: &Value, key: &str| v[key].as_str().expect(key)[..4].parse::<i32>().unwrap();
    assert_ne!(now["currentPeriodEnd"], before["currentPeriodEnd"]);
    assert_eq!(
        year(&now, "currentPeriodEnd"),
        year(&now, "currentPeriodStart") + 1
    );
    // The year's 12,000 credits, once; nearly all of the month's 1,000 went back with the
    // unused month (a few milliseconds of it were used).
    let balance = app.balance_hundredths(&token).await;
    assert!(
        (CREDITS_12000..CREDITS_12000 + 100).contains(&balance),
        "{balance}"
    );

    // Half of the year's invoice refunded: half of the year's credits back, once.
    let charges = sandbox(&app, &stripe, "refund", &json!({ "amountMinor": 1 })).await;
    let (invoice, paid) = last_charge(&charges);
    let taken = share(CREDITS_12000, 1, paid);
    wait_for_balance(&app, &token, balance - taken).await;
    let half = paid / 2;
    sandbox(
        &app,
        &stripe,
        "refund",
        &json!({ "amountMinor": half - 1, "chargeId": invoice }),
    )
    .await;
    wait_for_balance(&app, &token, balance - share(CREDITS_12000, half, paid)).await;

    // The next renewal bills the yearly price and grants the yearly credits.
    let renewed = sandbox(&app, &stripe, "renew", &json!({})).await;
    assert_eq!(renewed["amountMinor"], 9990);
    wait_for_balance(
        &app,
        &token,
        balance - share(CREDITS_12000, half, paid) + CREDITS_12000,
    )
    .await;
}

#[tokio::test]
async fn refunding_an_upgrades_proration_takes_back_its_credits_in_proportion_once() {
    let app = spawn_app().await;
    let token = app.register("proration@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (id, stripe) = subscribe(&app, &token, "pro_monthly_legacy").await;
    assert_eq!(app.balance_hundredths(&token).await, 0);
    let body = change_plan(&app, &token, &id, "pro_monthly").await;
    assert_eq!(body["confirmed"], true, "{body}");
    // The upgrade's 1,000 credits (the legacy plan grants none).
    wait_for_balance(&app, &token, CREDITS_1000).await;

    // A part of the proration invoice refunded: that share of the upgrade's credits back.
    let first = 50;
    let after = sandbox(&app, &stripe, "refund", &json!({ "amountMinor": first })).await;
    let (invoice, paid) = last_charge(&after);
    assert!(paid > first, "the proration charged {paid}");
    wait_for_balance(
        &app,
        &token,
        CREDITS_1000 - share(CREDITS_1000, first, paid),
    )
    .await;
    // Asked again for the same total: refused by the sandbox, nothing moves in Tally.
    // The rest: the rest of the upgrade's credits, never below zero.
    sandbox(
        &app,
        &stripe,
        "refund",
        &json!({ "amountMinor": paid - first, "chargeId": invoice }),
    )
    .await;
    wait_for_balance(&app, &token, 0).await;
    // The subscription stays on the plan the provider bills.
    assert_eq!(subscription(&app, &token).await["planId"], "pro_monthly");
}

/// A monthly plan at Dodo (`mor_b`) next to the shipped `team_yearly`.
const DODO_MONTHLY: &str = r#"
[plans.team_monthly]
provider = "mor_b"
amount = 29.00
currency = "USD"
duration = { months = 1, type = "recurring", credits = 5000 }
morBProductId = "pdt_TeamMonthlyUsd2900"
[plans.team_monthly.i18n.en]
name = "Team monthly"
"#;

#[tokio::test]
async fn an_interval_change_at_a_provider_tally_cannot_follow_is_refused_as_before() {
    let catalog = catalog_with(DODO_MONTHLY);
    let app = spawn_app_from(catalog.path(), |_| {}).await;
    let token = app.register("dodo-interval@example.com").await;
    let (order, _) = app
        .open_checkout(&token, "team_monthly", "mor_b", None)
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    let id = subscription(&app, &token).await["id"]
        .as_str()
        .expect("subscription id")
        .to_owned();
    let (status, body) = app
        .post(
            &token,
            &format!("/api/subscriptions/{id}/change-plan"),
            &json!({ "planId": "team_yearly" }),
            None,
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("different_interval")),
        "{body}"
    );
    let unchanged = subscription(&app, &token).await;
    assert_eq!(unchanged["planId"], "team_monthly");
    assert_eq!(unchanged["pendingPlanId"], Value::Null);
}
