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

/// `priced-model` has a price-book entry (helpers): 10 credits per million input tokens, 40
/// output, 1 cache read, the rest as input; the provider's cost 5 and 20 (cost-currency units)
/// per million input and output tokens.
#[tokio::test]
async fn tokens_by_kind_are_priced_by_the_price_book_and_recorded() {
    let app = spawn_app();
    let (user_id, token, key) = funded(&app).await;
    let usage = json!({"inputTokens": 100_000, "outputTokens": 20_000,
        "cacheReadTokens": 500_000, "reasoningTokens": 1});
    let answer = consume(
        &app,
        &key,
        Some("k-1"),
        json!({"userId": user_id, "model": "priced-model", "usage": usage}),
    )
    .await;
    answer.expect(201, None);
    // 1.00 input + 0.80 output + 0.50 cache read + 0.00001 reasoning (as input) = 2.30001,
    // rounded up once.
    assert_eq!(answer.body["cost"], "2.31");
    assert_eq!(answer.body["tokens"], 620_001);
    assert_eq!(answer.body["usage"]["cacheReadTokens"], 500_000);
    assert_eq!(answer.body["usage"]["cacheWriteTokens"], 0);
    assert_eq!(answer.body["priceFrom"], "1970-01-01T00:00:00.000Z");
    // Cost basis: 100,001 × 5 + 20,000 × 20 + 500,000 × 5 (cache read at input's cost), in
    // millionths per million tokens: 500,005 + 400,000 + 2,500,000.
    assert_eq!(answer.body["costBasisMillionths"], 3_400_005);

    let history = Answer::of(
        app.client
            .get("/api/credits/transactions")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    history.expect(200, None);
    let spend = &history.body["items"][0];
    assert_eq!(spend["type"], "consumption");
    assert_eq!(spend["usage"]["inputTokens"], 100_000);
    assert_eq!(spend["usage"]["reasoningTokens"], 1);
    assert_eq!(spend["costBasisMillionths"], 3_400_005);

    // The same key with another breakdown is another request.
    let other = json!({"inputTokens": 100_000});
    consume(
        &app,
        &key,
        Some("k-1"),
        json!({"userId": user_id, "model": "priced-model", "usage": other}),
    )
    .await
    .expect(409, Some("idempotency_conflict"));

    // A model without an entry is charged for the total by the per-kilotoken rule:
    // 1.5 kilo-tokens × 2 credits × multiplier 2.
    let unpriced = consume(
        &app,
        &key,
        Some("k-2"),
        json!({"userId": user_id, "model": "big-model",
            "usage": {"inputTokens": 1_000, "outputTokens": 500}}),
    )
    .await;
    unpriced.expect(201, None);
    assert_eq!(unpriced.body["cost"], "6.00");
    assert!(unpriced.body.get("priceFrom").is_none());
    assert_eq!(unpriced.body["usage"]["outputTokens"], 500);
}

#[tokio::test]
async fn a_breakdown_out_of_form_is_refused_and_spends_nothing() {
    let app = spawn_app();
    let (user_id, token, key) = funded(&app).await;
    let refused = [
        json!({"userId": user_id, "model": "priced-model", "usage": {}}),
        json!({"userId": user_id, "model": "priced-model", "usage": {"inputTokens": -1}}),
        json!({"userId": user_id, "model": "priced-model",
            "usage": {"inputTokens": 100_000_000, "outputTokens": 1}}),
        json!({"userId": user_id, "model": "priced-model",
            "usage": {"inputTokens": 10}, "tokens": 11}),
        json!({"userId": user_id, "feature": "chat", "usage": {"inputTokens": 10}}),
        json!({"userId": user_id, "usage": {"inputTokens": 10}}),
        json!({"userId": user_id, "model": "priced-model",
            "usage": {"inputTokens": 1_000_000_000_000_000_000_i64}}),
    ];
    for (n, body) in refused.into_iter().enumerate() {
        let answer = consume(&app, &key, Some(&format!("bad-{n}")), body.clone()).await;
        // Out of the schema's bounds: 400; against the pricing rules: 422. Both are
        // `validation_failed`.
        assert!(
            [400, 422].contains(&answer.status.as_u16()),
            "{body}: {:?}",
            answer.body
        );
        assert_eq!(answer.body["code"], "validation_failed", "{body}");
    }
    let balance = Answer::of(
        app.client
            .get("/api/credits/balance")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    assert_eq!(balance.body["balance"], "100.00");
}
