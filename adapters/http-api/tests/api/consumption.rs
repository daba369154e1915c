//! `POST /api/credits/consume` and the reservations.

use serde_json::json;

use crate::helpers::{Answer, TestApp, bearer, spawn_app};

/// A funded user (100 credits): its id, its session token, and a consuming API key.
async fn funded(app: &TestApp) -> (String, String, String) {
    let (user_id, token) = app.register("ada@example.com").await;
    app.buy_credits(&token).await;
    (user_id, token, app.api_key(&["credits:consume"]).await)
}

async fn consume(
    app: &TestApp,
    key: &str,
    idempotency: Option<&str>,
    body: serde_json::Value,
) -> Answer {
    let mut request = app
        .client
        .post("/api/credits/consume")
        .header("authorization", bearer(key))
        .body_json(&body);
    if let Some(k) = idempotency {
        request = request.header("idempotency-key", k);
    }
    Answer::of(request.send().await).await
}

#[tokio::test]
async fn consuming_spends_the_priced_cost_and_reports_the_balance_after() {
    let app = spawn_app();
    let (user_id, _, key) = funded(&app).await;
    let answer = consume(
        &app,
        &key,
        Some("c-1"),
        json!({"userId": user_id, "model": "big-model", "tokens": 1500}),
    )
    .await;
    answer.expect(201, None);
    // 1.5 kilo-tokens × 2 credits × multiplier 2.
    assert_eq!(answer.body["cost"], "6.00");
    assert_eq!(answer.body["costHundredths"], 600);
    assert_eq!(answer.body["balanceAfter"], "94.00");
    assert_eq!(answer.body["tokens"], 1500);
}

#[tokio::test]
async fn a_consume_replay_answers_the_first_response_and_another_body_conflicts() {
    let app = spawn_app();
    let (user_id, token, key) = funded(&app).await;
    let body = json!({"userId": user_id, "feature": "image"});
    let first = consume(&app, &key, Some("c-1"), body.clone()).await;
    first.expect(201, None);
    assert!(first.header("idempotency-replayed").is_none());
    let again = consume(&app, &key, Some("c-1"), body).await;
    again.expect(201, None);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    consume(
        &app,
        &key,
        Some("c-1"),
        json!({"userId": user_id, "feature": "chat"}),
    )
    .await
    .expect(409, Some("idempotency_conflict"));
    let balance = Answer::of(
        app.client
            .get("/api/credits/balance")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    assert_eq!(balance.body["balance"], "95.00");
}

#[tokio::test]
async fn consume_and_reserve_require_an_idempotency_key() {
    let app = spawn_app();
    let (user_id, _, key) = funded(&app).await;
    consume(
        &app,
        &key,
        None,
        json!({"userId": user_id, "feature": "chat"}),
    )
    .await
    .expect(400, Some("validation_failed"));
    Answer::of(
        app.client
            .post("/api/credits/reservations")
            .header("authorization", bearer(&key))
            .body_json(&json!({"userId": user_id, "feature": "chat"}))
            .send()
            .await,
    )
    .await
    .expect(400, Some("validation_failed"));
}

#[tokio::test]
async fn insufficient_credits_is_a_402_with_the_available_balance() {
    let app = spawn_app();
    let (user_id, _) = app.register("bob@example.com").await;
    let key = app.api_key(&["credits:consume"]).await;
    let answer = consume(
        &app,
        &key,
        Some("c-1"),
        json!({"userId": user_id, "feature": "image"}),
    )
    .await;
    answer.expect(402, Some("insufficient_credits"));
    assert_eq!(answer.body["available"], "0.00");
    assert_eq!(answer.body["availableHundredths"], 0);
    assert_eq!(answer.body["requested"], "5.00");
}

#[tokio::test]
async fn consumption_needs_an_api_key_with_the_consume_scope() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let body = json!({"userId": user_id, "feature": "chat"});
    consume(&app, &token, Some("c-1"), body.clone())
        .await
        .expect(403, Some("forbidden"));
    let reader = app.api_key(&["credits:read"]).await;
    consume(&app, &reader, Some("c-1"), body.clone())
        .await
        .expect(403, Some("forbidden"));
    Answer::of(
        app.client
            .post("/api/credits/consume")
            .body_json(&body)
            .send()
            .await,
    )
    .await
    .expect(401, Some("unauthorized"));
}

#[tokio::test]
async fn unknown_users_and_unpriceable_usage_are_refused() {
    let app = spawn_app();
    let (user_id, _, key) = funded(&app).await;
    consume(
        &app,
        &key,
        Some("c-1"),
        json!({"userId": "usr_404", "feature": "chat"}),
    )
    .await
    .expect(404, Some("user_not_found"));
    consume(
        &app,
        &key,
        Some("c-2"),
        json!({"userId": user_id, "feature": "teleport"}),
    )
    .await
    .expect(422, Some("validation_failed"));
}

#[tokio::test]
async fn a_reservation_is_held_then_settled_with_the_actual_usage() {
    let app = spawn_app();
    let (user_id, _, key) = funded(&app).await;
    let reserved = Answer::of(
        app.client
            .post("/api/credits/reservations")
            .header("authorization", bearer(&key))
            .header("idempotency-key", "r-1")
            .body_json(&json!({"userId": user_id, "model": "big-model", "tokens": 5000}))
            .send()
            .await,
    )
    .await;
    reserved.expect(201, None);
    assert_eq!(reserved.body["status"], "pending");
    assert_eq!(reserved.body["held"], "20.00");
    let id = reserved.body["id"].as_str().unwrap().to_owned();
    let settle = || async {
        Answer::of(
            app.client
                .post(format!("/api/credits/reservations/{id}/settle"))
                .header("authorization", bearer(&key))
                .body_json(&json!({"userId": user_id, "model": "big-model", "tokens": 1000}))
                .send()
                .await,
        )
        .await
    };
    let settled = settle().await;
    settled.expect(200, None);
    assert_eq!(settled.body["status"], "settled");
    assert_eq!(settled.body["charged"], "4.00");
    let again = settle().await;
    again.expect(200, None);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    Answer::of(
        app.client
            .post(format!("/api/credits/reservations/{id}/release"))
            .header("authorization", bearer(&key))
            .body_json(&json!({"userId": user_id}))
            .send()
            .await,
    )
    .await
    .expect(409, Some("reservation_resolved"));
}

#[tokio::test]
async fn a_reservation_released_unused_returns_its_credits() {
    let app = spawn_app();
    let (user_id, _, key) = funded(&app).await;
    let reserved = Answer::of(
        app.client
            .post("/api/credits/reservations")
            .header("authorization", bearer(&key))
            .header("idempotency-key", "r-1")
            .body_json(&json!({"userId": user_id, "feature": "image"}))
            .send()
            .await,
    )
    .await;
    let id = reserved.body["id"].as_str().unwrap().to_owned();
    let released = Answer::of(
        app.client
            .post(format!("/api/credits/reservations/{id}/release"))
            .header("authorization", bearer(&key))
            .body_json(&json!({"userId": user_id}))
            .send()
            .await,
    )
    .await;
    released.expect(200, None);
    assert_eq!(released.body["status"], "released");
    Answer::of(
        app.client
            .post("/api/credits/reservations/res_404/release")
            .header("authorization", bearer(&key))
            .body_json(&json!({"userId": user_id}))
            .send()
            .await,
    )
    .await
    .expect(404, Some("reservation_not_found"));
}
