//! Switching plans and resuming a scheduled cancellation through the sandbox (issue 19): the
//! subscription's plan, price and credits follow the provider's own event, checked against the
//! switch the subscriber asked for; an event billing anything else is a mismatch and changes
//! nothing.
//!
//! The card gateway (Stripe) sells `pro_monthly_legacy` (7.99 USD a month, no credits) and
//! `pro_monthly` (9.99 USD a month, 1,000 credits a month): legacy → pro is an upgrade, pro →
//! legacy a downgrade.

use std::sync::Arc;

use application::ports::Clock;
use bootstrap::seams::SystemClock;
use serde_json::{Value, json};
use tests::{TestApp, spawn_app};

const CREDITS_1000: i64 = 100_000;

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

/// The caller's one subscription, as `/api/credits/status` shows it.
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

/// The provider bills the next period (the sandbox's renewal, with its webhooks).
async fn renew(app: &TestApp, stripe_id: &str) -> Value {
    let response = app
        .client
        .post(app.url(&format!("/sandbox/api/subscriptions/{stripe_id}/renew")))
        .send()
        .await
        .expect("sandbox");
    assert_eq!(response.status(), 200, "renew");
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

#[tokio::test]
async fn an_upgrade_moves_the_plan_on_the_providers_event_and_grants_the_extra_credits_once() {
    let app = spawn_app().await;
    let token = app.register("upgrade@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (id, stripe) = subscribe(&app, &token, "pro_monthly_legacy").await;
    assert_eq!(app.balance_hundredths(&token).await, 0);

    let (status, body) = change_plan(&app, &token, &id, "pro_monthly").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "upgrade");
    // The sandbox sends Stripe's `customer.subscription.updated` before it answers.
    assert_eq!(body["confirmed"], true, "{body}");
    let now = subscription(&app, &token).await;
    assert_eq!(now["planId"], "pro_monthly");
    assert_eq!(now["pendingPlanId"], Value::Null);
    // The new plan's 1,000 credits a period less the old plan's none, granted once.
    wait_for_balance(&app, &token, CREDITS_1000).await;
    let payment = app
        .client
        .get(app.url("/sandbox/api/payments"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let payment_id = payment[0]["id"].as_str().expect("payment").to_owned();
    let replays = app
        .client
        .post(app.url(&format!("/sandbox/api/payments/{payment_id}/redeliver")))
        .json(&json!({ "amountMinor": 2 }))
        .send()
        .await
        .unwrap();
    assert!(replays.status().is_success());
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_1000);

    // The next renewal bills the new price and grants the new plan's credits.
    let renewed = renew(&app, &stripe).await;
    assert_eq!(renewed["amountMinor"], 999);
    wait_for_balance(&app, &token, 2 * CREDITS_1000).await;
    assert_eq!(subscription(&app, &token).await["planId"], "pro_monthly");
}

/// The host is told the switch once the provider confirmed it (`subscription.plan_changed`).
#[tokio::test]
async fn a_confirmed_switch_is_told_to_the_host() {
    let (app, admin) = tests::spawn_app_with_admin(|_| {}).await;
    let token = app.register("told@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (id, _) = subscribe(&app, &token, "pro_monthly_legacy").await;
    let (status, body) = change_plan(&app, &token, &id, "pro_monthly").await;
    assert_eq!(status, 200, "{body}");
    let (status, feed) = app
        .get(&admin, "/api/events?type=subscription.plan_changed")
        .await;
    assert_eq!(status, 200, "{feed}");
    let told = feed["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(told.len(), 1, "{feed}");
    assert_eq!(
        told[0]["data"]["subscription"]["planId"], "pro_monthly",
        "{feed}"
    );
}

#[tokio::test]
async fn a_downgrade_moves_the_plan_grants_nothing_now_and_the_next_renewal_bills_the_lower_price()
{
    let app = spawn_app().await;
    let token = app.register("downgrade@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (id, stripe) = subscribe(&app, &token, "pro_monthly").await;
    wait_for_balance(&app, &token, CREDITS_1000).await;
    let before = subscription(&app, &token).await;

    let (status, body) = change_plan(&app, &token, &id, "pro_monthly_legacy").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "downgrade");
    assert_eq!(body["confirmed"], true, "{body}");
    let after = subscription(&app, &token).await;
    assert_eq!(after["planId"], "pro_monthly_legacy");
    assert_eq!(after["currentPeriodEnd"], before["currentPeriodEnd"]);
    // The period already granted keeps its credits; nothing is taken back.
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_1000);

    // The provider's next renewal bills 7.99: it matches the new terms, so the period moves,
    // and the new plan grants no credits.
    let renewed = renew(&app, &stripe).await;
    assert_eq!(renewed["amountMinor"], 799);
    for _ in 0..50 {
        if subscription(&app, &token).await["currentPeriodEnd"] != after["currentPeriodEnd"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_ne!(
        subscription(&app, &token).await["currentPeriodEnd"],
        after["currentPeriodEnd"],
        "the renewal at the new price is applied"
    );
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_1000);
}

#[tokio::test]
async fn a_scheduled_cancellation_is_resumed_at_the_provider() {
    let app = spawn_app().await;
    let token = app.register("resume@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (order, _) = app
        .open_checkout(&token, "pro_monthly", "card_gateway", None)
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    let id = subscription(&app, &token).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let resume = format!("/api/subscriptions/{id}/resume");

    let (status, body) = app.post(&token, &resume, &json!({}), None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "not_scheduled_to_end");

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
    // A subscription scheduled to end cannot switch until it is resumed.
    let (status, body) = change_plan(&app, &token, &id, "pro_monthly_legacy").await;
    assert_eq!(
        (status, body["code"].clone()),
        (409, json!("subscription_not_live"))
    );

    let (status, body) = app.post(&token, &resume, &json!({}), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelAtPeriodEnd"], false);
    assert_eq!(body["accessUntil"], Value::Null);
}

#[tokio::test]
async fn switches_the_service_refuses_say_why_and_change_nothing() {
    let app = spawn_app().await;
    let token = app.register("refused@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let other = app.register("other@example.com").await;
    let (id, _) = subscribe(&app, &token, "pro_monthly").await;
    let cases = [
        (&token, id.as_str(), "pro_monthly", 409, "same_plan"),
        (
            &token,
            id.as_str(),
            "credits_card_500",
            409,
            "different_plan_type",
        ),
        // A change to `pro_yearly` is an interval change Stripe's invoice applies
        // (`plan_change_invoices`); Dodo's refusal of one is tested there too.
        (
            &token,
            id.as_str(),
            "pro_monthly_eur",
            409,
            "not_switchable",
        ),
        (&token, id.as_str(), "no_such_plan", 404, "plan_not_found"),
        (
            &token,
            "sub_unknown",
            "pro_monthly_legacy",
            404,
            "subscription_not_found",
        ),
        (&other, id.as_str(), "pro_monthly_legacy", 403, "not_owner"),
    ];
    for (who, subscription_id, plan, status, code) in cases {
        let (got, body) = change_plan(&app, who, subscription_id, plan).await;
        assert_eq!(
            (got, body["code"].as_str()),
            (status, Some(code)),
            "{plan}: {body}"
        );
        assert_eq!(body["status"], status);
    }
    let unchanged = subscription(&app, &token).await;
    assert_eq!(unchanged["planId"], "pro_monthly");
    assert_eq!(unchanged["pendingPlanId"], Value::Null);
    let (status, _) = app
        .client
        .post(app.url(&format!("/api/subscriptions/{id}/change-plan")))
        .json(&json!({ "planId": "pro_monthly_legacy" }))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 401);
}

/// A `customer.subscription.updated` genuinely signed with the sandbox's webhook secret: the
/// subscription now bills `amount_minor` (the Price switched).
fn switched_event(
    app: &TestApp,
    event_id: &str,
    stripe_id: &str,
    amount_minor: i64,
) -> sandbox::SimWebhook {
    let hub = sandbox::Hub::new(&app.address, Arc::new(SystemClock));
    let event = json!({
        "id": event_id,
        "object": "event",
        "created": chrono_seconds(),
        "livemode": false,
        "type": "customer.subscription.updated",
        "data": {
            "object": {
                "id": stripe_id, "object": "subscription", "status": "active",
                "cancel_at_period_end": false, "currency": "usd", "livemode": false,
                "items": { "object": "list", "data": [{
                    "id": format!("si_{}", stripe_id.trim_start_matches("sub_")),
                    "price": { "id": "price_hostile", "unit_amount": amount_minor,
                               "currency": "usd",
                               "recurring": { "interval": "month", "interval_count": 1 } }
                }] }
            },
            "previous_attributes": { "items": { "data": [] } }
        }
    });
    sandbox::card_gateway::sign_event(&hub, &event)
}

fn chrono_seconds() -> i64 {
    SystemClock.now().unix_millis() / 1000
}

async fn post_webhook(app: &TestApp, webhook: &sandbox::SimWebhook) -> u16 {
    let mut request = app
        .client
        .post(app.url("/api/payment/webhook/card_gateway"))
        .header("content-type", webhook.content_type.clone())
        .body(webhook.body.clone());
    for (name, value) in &webhook.headers {
        request = request.header(name, value);
    }
    request.send().await.expect("webhook").status().as_u16()
}

#[tokio::test]
async fn a_plan_change_event_billing_another_amount_is_a_mismatch_and_changes_nothing() {
    let app = spawn_app().await;
    let token = app.register("hostile@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (id, stripe) = subscribe(&app, &token, "pro_monthly_legacy").await;

    // No switch asked: a signed event saying the subscription now bills 9.99 changes nothing.
    assert_eq!(
        post_webhook(&app, &switched_event(&app, "evt_unasked", &stripe, 999)).await,
        200
    );
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "pro_monthly_legacy"
    );
    assert_eq!(app.balance_hundredths(&token).await, 0);

    // A switch asked, the provider's genuine event lost: still nothing moves.
    let dropped = app
        .client
        .post(app.url("/sandbox/api/drop-webhooks"))
        .json(&json!({ "count": 1 }))
        .send()
        .await
        .unwrap();
    assert!(dropped.status().is_success());
    let (status, body) = change_plan(&app, &token, &id, "pro_monthly").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["confirmed"], false, "{body}");
    let pending = subscription(&app, &token).await;
    assert_eq!(pending["planId"], "pro_monthly_legacy");
    assert_eq!(pending["pendingPlanId"], "pro_monthly");
    assert_eq!(pending["pendingChange"], "upgrade");

    // A signed event at another price than the plan asked for: a mismatch, nothing changes.
    assert_eq!(
        post_webhook(&app, &switched_event(&app, "evt_hostile", &stripe, 1)).await,
        200
    );
    let still = subscription(&app, &token).await;
    assert_eq!(still["planId"], "pro_monthly_legacy");
    assert_eq!(still["pendingPlanId"], "pro_monthly");
    assert_eq!(app.balance_hundredths(&token).await, 0);

    // The genuine event at the asked price applies it, once.
    let genuine = switched_event(&app, "evt_genuine", &stripe, 999);
    assert_eq!(post_webhook(&app, &genuine).await, 200);
    assert_eq!(post_webhook(&app, &genuine).await, 200);
    let done = subscription(&app, &token).await;
    assert_eq!(done["planId"], "pro_monthly");
    assert_eq!(done["pendingPlanId"], Value::Null);
    wait_for_balance(&app, &token, CREDITS_1000).await;
}
