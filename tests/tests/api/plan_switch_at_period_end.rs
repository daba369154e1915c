//! Switching at the period's end (issue 19), through the sandbox: Waffo Pancake (`mor_c`) has no
//! plan-change API, so a switch there cancels the subscription at its period's end and keeps the
//! plan asked for; when Pancake reports the subscription ended, `subscription.ended` carries
//! `scheduledPlanId` and the dashboard's "Start" button opens a checkout of that plan. Resuming
//! (Stripe) clears it. One switch at a time: of concurrent requests, exactly one reaches the
//! provider and the others answer 409 `change_in_progress`.
//!
//! The catalog adds `team_quarterly` (44.97 USD every three months, 6,000 credits) next to the
//! shipped `pro_quarterly` (26.97 USD every three months), both sold through `mor_c`.

use serde_json::{Value, json};
use tests::{ADMIN_PASSWORD, TestApp, catalog_with, spawn_app_from};

const TEAM_QUARTERLY: &str = r#"
[plans.team_quarterly]
provider = "mor_c"
amount = 44.97
currency = "USD"
duration = { months = 3, type = "recurring", credits = 6000 }
morCProductId = "PROD_TeamQuarterlyUsd4497"
[plans.team_quarterly.i18n.en]
name = "Team Quarterly"
"#;

/// The app with the extra plan, and an administrator's token (to read `/api/events`).
async fn app() -> (TestApp, String) {
    let catalog = catalog_with(TEAM_QUARTERLY);
    let mut settings = None;
    let app = spawn_app_from(catalog.path(), |s| settings = Some(s.clone())).await;
    drop(catalog);
    let store = bootstrap::app::connect_store(&settings.expect("settings"))
        .await
        .expect("store");
    let role = application::accounts::Role::Admin;
    bootstrap::app::create_user(&store, "admin@example.com", ADMIN_PASSWORD.into(), role)
        .await
        .expect("admin");
    let body = json!({"email": "admin@example.com", "password": ADMIN_PASSWORD});
    let (status, signed_in) = app.post("", "/api/auth/login", &body, None).await;
    assert_eq!(status, 200, "{signed_in}");
    let token = signed_in["token"].as_str().expect("token").to_owned();
    (app, token)
}

/// Buy and pay `plan` through `provider`: our subscription's id and the provider's.
async fn subscribe(app: &TestApp, token: &str, plan: &str, provider: &str) -> (String, String) {
    let (order, _) = app.open_checkout(token, plan, provider, None).await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    let theirs = app.sandbox_payment(&order).await["subscriptionId"]
        .as_str()
        .expect("provider subscription")
        .to_owned();
    let ours = subscription(app, token).await["id"]
        .as_str()
        .expect("subscription id")
        .to_owned();
    (ours, theirs)
}

/// The caller's one subscription, as `/api/credits/status` shows it.
async fn subscription(app: &TestApp, token: &str) -> Value {
    let (status, body) = app.get(token, "/api/credits/status").await;
    assert_eq!(status, 200, "{body}");
    body["subscription"].clone()
}

async fn switch(app: &TestApp, token: &str, id: &str, plan: &str, when: &str) -> (u16, Value) {
    app.post(
        token,
        &format!("/api/subscriptions/{id}/change-plan"),
        &json!({ "planId": plan, "when": when }),
        None,
    )
    .await
}

/// How many webhooks the sandbox has sent so far.
async fn deliveries(app: &TestApp) -> usize {
    let sent: Value = app
        .client
        .get(app.url("/sandbox/api/deliveries"))
        .send()
        .await
        .expect("sandbox")
        .json()
        .await
        .expect("json");
    sent.as_array().map_or(0, Vec::len)
}

/// The events of `kind` in the feed.
async fn events(app: &TestApp, admin: &str, kind: &str) -> Vec<Value> {
    let (status, body) = app
        .get(admin, &format!("/api/events?type={kind}&limit=100"))
        .await;
    assert_eq!(status, 200, "{body}");
    body["data"].as_array().cloned().unwrap_or_default()
}

/// The dashboard as the signed-in buyer's browser gets it, with the CSRF cookie it sends.
async fn dashboard(app: &TestApp, token: &str) -> String {
    let response = app
        .client
        .get(app.url("/dashboard"))
        .header("cookie", cookies(token))
        .send()
        .await
        .expect("dashboard");
    assert_eq!(response.status(), 200);
    response.text().await.expect("html")
}

fn cookies(token: &str) -> String {
    format!("tally_session={token}; tally_csrf=plan-switch-test-secret")
}

/// The value of the hidden field `name` in the first form posting to `action`.
fn form_field(html: &str, action: &str, name: &str) -> Option<String> {
    let form = &html[html.find(&format!("action=\"{action}\""))?..];
    let form = &form[..form.find("</form>")?];
    let at = form.find(&format!("name=\"{name}\" value=\""))?;
    let value = &form[at + name.len() + 15..];
    Some(value[..value.find('"')?].to_owned())
}

#[tokio::test]
async fn a_switch_at_period_end_starts_the_new_plan_with_a_checkout_when_the_provider_ends_it() {
    let (app, admin) = app().await;
    let token = app.register("later@example.com").await;
    let (id, pancake) = subscribe(&app, &token, "pro_quarterly", "mor_c").await;

    // Pancake has no plan change: switching now is refused, at the period's end accepted.
    let (status, body) = switch(&app, &token, &id, "team_quarterly", "now").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("not_switchable"))
    );
    let (status, body) = switch(&app, &token, &id, "team_quarterly", "period_end").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["when"], "period_end");
    assert_eq!(body["change"], "upgrade");
    assert_eq!(body["confirmed"], false);
    assert_eq!(body["subscription"]["cancelAtPeriodEnd"], true, "{body}");
    assert_eq!(body["subscription"]["scheduledPlanId"], "team_quarterly");
    let held = subscription(&app, &token).await;
    assert_eq!(held["planId"], "pro_quarterly");
    assert_eq!(held["scheduledPlanId"], "team_quarterly");
    assert_eq!(
        body["startsAt"], held["currentPeriodEnd"],
        "the new plan starts when the paid period ends"
    );
    // A second switch while one is scheduled is refused.
    let (status, body) = switch(&app, &token, &id, "team_quarterly", "period_end").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("change_in_progress"))
    );
    let page = dashboard(&app, &token).await;
    assert!(page.contains("data-testid=\"switch-scheduled\""), "{page}");

    // Pancake ends it (the period is over): the host is told which plan comes next.
    let ended = app
        .client
        .post(app.url(&format!("/sandbox/api/subscriptions/{pancake}/cancel")))
        .json(&json!({}))
        .send()
        .await
        .expect("sandbox");
    assert!(ended.status().is_success());
    let mut told = Vec::new();
    for _ in 0..50 {
        told = events(&app, &admin, "subscription.ended").await;
        if !told.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(told.len(), 1, "{told:?}");
    let ended = &told[0]["data"]["subscription"];
    assert_eq!(ended["id"], id.as_str());
    assert_eq!(ended["scheduledPlanId"], "team_quarterly");

    // The dashboard's one click opens a checkout of the new plan through the same provider.
    let page = dashboard(&app, &token).await;
    assert!(
        page.contains("data-testid=\"start-scheduled-plan\""),
        "{page}"
    );
    let plan = form_field(&page, "/pricing/buy", "planId").expect("planId field");
    let provider = form_field(&page, "/pricing/buy", "provider").expect("provider field");
    let csrf = form_field(&page, "/pricing/buy", "csrf").expect("csrf field");
    assert_eq!(
        (plan.as_str(), provider.as_str()),
        ("team_quarterly", "mor_c")
    );
    let started = app
        .client
        .post(app.url("/pricing/buy"))
        .header("cookie", cookies(&token))
        .form(&[("planId", plan), ("provider", provider), ("csrf", csrf)])
        .send()
        .await
        .expect("buy");
    assert_eq!(started.status(), 303);
    let checkout = started.headers()["location"].to_str().unwrap().to_owned();
    assert!(checkout.contains("/sandbox/"), "{checkout}");
    let payments: Value = app
        .client
        .get(app.url("/sandbox/api/payments"))
        .send()
        .await
        .expect("sandbox")
        .json()
        .await
        .expect("json");
    let opened: Vec<&Value> = payments
        .as_array()
        .expect("payments")
        .iter()
        .filter(|p| p["amountMinor"] == 4497 && p["provider"] == "mor_c")
        .collect();
    assert_eq!(opened.len(), 1, "{payments}");
    let order = opened[0]["orderId"].as_str().expect("order id");
    let (status, bought) = app
        .get(&token, &format!("/api/payment/query/{order}"))
        .await;
    assert_eq!(status, 200, "{bought}");
    assert_eq!(bought["planId"], "team_quarterly");
    assert_eq!(bought["status"], "pending");
}

#[tokio::test]
async fn resuming_or_withdrawing_clears_the_scheduled_plan() {
    let (app, _) = app().await;
    let token = app.register("resume@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    // Stripe can switch now, and can also switch at the period's end; it can resume.
    let (id, _) = subscribe(&app, &token, "pro_monthly_legacy", "card_gateway").await;
    let (status, body) = switch(&app, &token, &id, "pro_monthly", "period_end").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        subscription(&app, &token).await["scheduledPlanId"],
        "pro_monthly"
    );
    let page = dashboard(&app, &token).await;
    assert!(
        page.contains("data-testid=\"resume-subscription\""),
        "{page}"
    );
    let (status, body) = app
        .post(
            &token,
            &format!("/api/subscriptions/{id}/resume"),
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelAtPeriodEnd"], false);
    assert_eq!(body.get("scheduledPlanId"), None, "{body}");
    assert_eq!(
        subscription(&app, &token).await.get("scheduledPlanId"),
        None
    );

    // Withdrawing the switch keeps the cancellation.
    let (status, body) = switch(&app, &token, &id, "pro_monthly", "period_end").await;
    assert_eq!(status, 200, "{body}");
    let response = app
        .client
        .delete(app.url(&format!("/api/subscriptions/{id}/scheduled-plan")))
        .bearer_auth(&token)
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["cancelAtPeriodEnd"], true, "{body}");
    assert_eq!(body.get("scheduledPlanId"), None, "{body}");
    let response = app
        .client
        .delete(app.url(&format!("/api/subscriptions/{id}/scheduled-plan")))
        .bearer_auth(&token)
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), 409);
    // A subscription already scheduled to end is given a plan without asking the provider.
    let before = deliveries(&app).await;
    let (status, body) = switch(&app, &token, &id, "pro_monthly", "period_end").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["subscription"]["scheduledPlanId"], "pro_monthly");
    assert_eq!(deliveries(&app).await, before);
}

#[tokio::test]
async fn of_eight_concurrent_switches_exactly_one_reaches_the_provider() {
    let (app, _) = app().await;
    let token = app.register("race@example.com").await;
    let (id, _) = subscribe(&app, &token, "pro_quarterly", "mor_c").await;
    let before = deliveries(&app).await;
    let app = std::sync::Arc::new(app);
    let requests: Vec<_> = (0..8)
        .map(|_| {
            let (app, token, id) = (app.clone(), token.clone(), id.clone());
            tokio::spawn(
                async move { switch(&app, &token, &id, "team_quarterly", "period_end").await },
            )
        })
        .collect();
    let mut accepted = 0;
    for request in requests {
        let (status, body) = request.await.expect("request");
        match status {
            200 => accepted += 1,
            409 => assert_eq!(body["code"], "change_in_progress", "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(accepted, 1);
    // One cancellation at Pancake: one `subscription.canceling` webhook.
    assert_eq!(deliveries(&app).await, before + 1);
    let held = subscription(&app, &token).await;
    assert_eq!(held["scheduledPlanId"], "team_quarterly");
    assert_eq!(held["cancelAtPeriodEnd"], true);
}

#[tokio::test]
async fn of_concurrent_switches_now_one_is_asked_of_the_provider_and_granted_once() {
    let (app, _) = app().await;
    let token = app.register("race-now@example.com").await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (id, _) = subscribe(&app, &token, "pro_monthly_legacy", "card_gateway").await;
    let app = std::sync::Arc::new(app);
    let requests: Vec<_> = (0..6)
        .map(|_| {
            let (app, token, id) = (app.clone(), token.clone(), id.clone());
            tokio::spawn(async move { switch(&app, &token, &id, "pro_monthly", "now").await })
        })
        .collect();
    let mut accepted = 0;
    for request in requests {
        let (status, body) = request.await.expect("request");
        match status {
            200 => accepted += 1,
            // The loser of the claim, or a request that read the switch already confirmed.
            409 => assert!(
                ["change_in_progress", "same_plan"].contains(&body["code"].as_str().unwrap_or("")),
                "{body}"
            ),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(accepted, 1);
    assert_eq!(subscription(&app, &token).await["planId"], "pro_monthly");
    // The upgrade's 1,000 credits, once.
    assert_eq!(app.balance_hundredths(&token).await, 100_000);
}
