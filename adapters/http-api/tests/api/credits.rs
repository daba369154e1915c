//! `GET /api/credits/{balance,transactions,status}`.

use domain::{Currency, ProviderId};
use serde_json::{Value, json};

use crate::helpers::{Answer, activated, bearer, paid, spawn_app};

#[tokio::test]
async fn a_new_user_has_a_zero_balance() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let answer = Answer::of(
        app.client
            .get("/api/credits/balance")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    answer.expect(200, None);
    assert_eq!(
        answer.body,
        json!({"balance": "0.00", "balanceHundredths": 0})
    );
}

#[tokio::test]
async fn credits_reads_need_a_credential() {
    let app = spawn_app();
    for path in ["balance", "transactions", "status"] {
        Answer::of(app.client.get(format!("/api/credits/{path}")).send().await)
            .await
            .expect(401, Some("unauthorized"));
    }
}

#[tokio::test]
async fn transactions_are_described_in_the_requested_language() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order_id = app.buy_credits(&token).await;
    let english = Answer::of(
        app.client
            .get("/api/credits/transactions")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    english.expect(200, None);
    let item = &english.body["items"][0];
    assert_eq!(item["type"], "purchase_grant");
    assert_eq!(item["description"], "Credits purchased");
    assert_eq!(item["amount"], "100.00");
    assert_eq!(item["balanceAfter"], "100.00");
    assert_eq!(item["orderId"], order_id.as_str());
    assert_eq!(english.body["page"], 1);
    assert_eq!(english.body["limit"], 20);
    assert_eq!(english.body["total"], 1);
    assert_eq!(english.body["totalPages"], 1);
    let chinese = Answer::of(
        app.client
            .get("/api/credits/transactions")
            .header("authorization", bearer(&token))
            .header("accept-language", "zh-CN,zh;q=0.9,en;q=0.5")
            .send()
            .await,
    )
    .await;
    assert_eq!(chinese.body["items"][0]["description"], "购买积分");
    let query_wins = Answer::of(
        app.client
            .get("/api/credits/transactions?locale=en")
            .header("authorization", bearer(&token))
            .header("accept-language", "zh-CN")
            .send()
            .await,
    )
    .await;
    assert_eq!(
        query_wins.body["items"][0]["description"],
        "Credits purchased"
    );
}

#[tokio::test]
async fn transactions_refuse_out_of_range_pagination() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    for query in ["page=0", "limit=0", "limit=101", "page=-3"] {
        Answer::of(
            app.client
                .get(format!("/api/credits/transactions?{query}"))
                .header("authorization", bearer(&token))
                .send()
                .await,
        )
        .await
        .expect(400, Some("invalid_pagination"));
    }
}

#[tokio::test]
async fn the_status_shows_subscription_lifetime_access_and_pending_reservations() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    app.buy_credits(&token).await;
    let sub = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    let sub_order = sub.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![activated(&sub_order)],
    )
    .await
    .expect(200, None);
    let life = app.initiate(&token, "lifetime", "card_gateway", None).await;
    let life_order = life.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-life",
        vec![paid(&life_order, 9900, Currency::Usd)],
    )
    .await
    .expect(200, None);
    let key = app.api_key(&["credits:consume"]).await;
    Answer::of(
        app.client
            .post("/api/credits/reservations")
            .header("authorization", bearer(&key))
            .header("idempotency-key", "r-1")
            .body_json(&json!({"userId": user_id, "feature": "image"}))
            .send()
            .await,
    )
    .await
    .expect(201, None);

    let status = Answer::of(
        app.client
            .get("/api/credits/status")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    status.expect(200, None);
    let body = &status.body;
    assert_eq!(body["balance"], "95.00");
    assert_eq!(body["subscription"]["planId"], "pro-monthly");
    assert_eq!(body["subscription"]["status"], "active");
    assert_eq!(body["subscription"]["cancelAtPeriodEnd"], false);
    assert_eq!(
        body["subscription"]["currentPeriodStart"],
        "2026-01-01T00:00:00.000Z"
    );
    assert_eq!(body["lifetimeAccess"], true);
    assert_eq!(body["lifetimeOrderId"], life_order.as_str());
    assert_eq!(body["hasAccess"], true);
    // Everything held, besides the single fields kept for older clients.
    assert_eq!(
        body["subscription"]["accessUntil"],
        Value::Null,
        "it renews"
    );
    assert_eq!(body["subscriptions"].as_array().unwrap().len(), 1);
    assert_eq!(body["subscriptions"][0], body["subscription"]);
    assert_eq!(
        body["oneTimeAccess"],
        json!([{"orderId": life_order, "planId": "lifetime"}])
    );
    assert_eq!(body["pendingReservations"][0]["held"], "5.00");
    assert_eq!(body["pendingReservations"][0]["heldHundredths"], 500);
}

#[tokio::test]
async fn an_api_key_with_credits_read_reads_any_users_credits_by_user_id() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    app.buy_credits(&token).await;
    let reader = app.api_key(&["credits:read"]).await;
    for path in ["balance", "transactions", "status"] {
        let answer = Answer::of(
            app.client
                .get(format!("/api/credits/{path}?userId={user_id}"))
                .header("x-api-key", reader.as_str())
                .send()
                .await,
        )
        .await;
        answer.expect(200, None);
    }
    Answer::of(
        app.client
            .get("/api/credits/balance?userId=usr_404")
            .header("x-api-key", reader.as_str())
            .send()
            .await,
    )
    .await
    .expect(404, Some("user_not_found"));
    Answer::of(
        app.client
            .get("/api/credits/balance")
            .header("x-api-key", reader.as_str())
            .send()
            .await,
    )
    .await
    .expect(400, Some("validation_failed"));
}

#[tokio::test]
async fn the_wrong_scope_and_another_users_id_are_forbidden() {
    let app = spawn_app();
    let (ada_id, _) = app.register("ada@example.com").await;
    let (_, bob) = app.register("bob@example.com").await;
    let consumer = app.api_key(&["credits:consume"]).await;
    Answer::of(
        app.client
            .get(format!("/api/credits/balance?userId={ada_id}"))
            .header("authorization", bearer(&consumer))
            .send()
            .await,
    )
    .await
    .expect(403, Some("forbidden"));
    Answer::of(
        app.client
            .get(format!("/api/credits/status?userId={ada_id}"))
            .header("authorization", bearer(&bob))
            .send()
            .await,
    )
    .await
    .expect(403, Some("forbidden"));
}
