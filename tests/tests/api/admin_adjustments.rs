//! An administrator's credit adjustment end to end: its idempotency key belongs to one
//! adjustment of one user (the same key for another user or another body is a 409, never a
//! silent "done"), its amount is bounded by the ledger's largest balance before anything is
//! written (a 422 naming the field and the limit, never a 500), and a day whose grants add up
//! to more than any one balance still renders the console's overview.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

/// A new user's id.
async fn user_id(app: &TestApp, email: &str) -> String {
    let token = app.register(email).await;
    let (status, me) = app.get(&token, "/api/auth/me").await;
    assert_eq!(status, 200, "{me}");
    me["id"].as_str().expect("id").to_owned()
}

async fn adjust(app: &TestApp, admin: &str, user: &str, body: &Value, key: &str) -> (u16, Value) {
    let path = format!("/api/admin/users/{user}/credits");
    app.post(admin, &path, body, Some(key)).await
}

async fn balance(app: &TestApp, admin: &str, user: &str) -> Value {
    let (status, me) = adjust(
        app,
        admin,
        user,
        &json!({"amount": "0.01", "reason": "probe"}),
        &format!("probe-{user}"),
    )
    .await;
    assert_eq!(status, 200, "{me}");
    me["balance"].clone()
}

#[tokio::test]
async fn an_adjustment_key_used_for_another_user_or_body_is_a_conflict() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let ada = user_id(&app, "adjust-ada@example.com").await;
    let bob = user_id(&app, "adjust-bob@example.com").await;
    let grant = json!({"amount": "25", "reason": "goodwill"});
    let (status, first) = adjust(&app, &admin, &ada, &grant, "K").await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = adjust(&app, &admin, &ada, &grant, "K").await;
    assert_eq!(
        (status, &again["balance"]),
        (200, &first["balance"]),
        "a retry replays"
    );
    let debit = json!({"amount": "-1", "reason": "goodwill"});
    let other = json!({"amount": "30", "reason": "goodwill"});
    for (user, body) in [(&bob, &grant), (&bob, &debit), (&ada, &other)] {
        let (status, problem) = adjust(&app, &admin, user, body, "K").await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (409, Some("idempotency_conflict")),
            "{user} {body}: {problem}"
        );
    }
    assert_eq!(
        balance(&app, &admin, &bob).await,
        "0.01",
        "bob was given nothing"
    );
    assert_eq!(balance(&app, &admin, &ada).await, "25.01");
}

#[tokio::test]
async fn amounts_past_the_ledger_limits_are_refused_and_the_overview_still_renders() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let ada = user_id(&app, "adjust-big@example.com").await;
    let big = json!({"amount": "999999999000", "reason": "big"});
    let (status, first) = adjust(&app, &admin, &ada, &big, "big-1").await;
    assert_eq!(status, 200, "{first}");
    let too_much = json!({"amount": "2000000000000", "reason": "big"});
    for (body, key) in [(&big, "big-2"), (&too_much, "big-3")] {
        let (status, problem) = adjust(&app, &admin, &ada, body, key).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (422, Some("validation_failed")),
            "{problem}"
        );
        assert_eq!(problem["errors"][0]["field"], "amount", "{problem}");
        let message = problem["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("1000000000000.00"),
            "names the limit: {problem}"
        );
    }
    // Another user's grant the same day: the day's total exceeds any one balance.
    let bob = user_id(&app, "adjust-big-bob@example.com").await;
    let (status, _) = adjust(&app, &admin, &bob, &big, "big-bob").await;
    assert_eq!(status, 200);
    let response = app
        .client
        .get(app.url("/admin"))
        .header("cookie", format!("tally_session={admin}"))
        .send()
        .await
        .expect("overview");
    assert_eq!(response.status(), 200);
    let page = response.text().await.expect("page");
    assert!(page.contains("chart-credits"), "the credits chart is shown");
}
