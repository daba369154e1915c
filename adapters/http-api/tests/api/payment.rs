//! `/api/payment/*` and `/api/orders`.

use domain::{Currency, ProviderId};
use serde_json::json;

use crate::helpers::{Answer, activated, bearer, paid, spawn_app};

#[tokio::test]
async fn initiating_a_payment_creates_a_pending_order_with_a_checkout_url() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let answer = app
        .initiate(&token, "credits-100", "card_gateway", None)
        .await;
    answer.expect(201, None);
    let body = &answer.body;
    assert_eq!(body["status"], "pending");
    assert_eq!(body["provider"], "card_gateway");
    assert_eq!(body["planId"], "credits-100");
    assert_eq!(body["amount"], "9.99");
    assert_eq!(body["amountMinor"], 999);
    assert_eq!(body["credits"], "100.00");
    assert_eq!(body["expiresAt"], "2026-01-01T00:30:00.000Z");
    let order_id = body["orderId"].as_str().unwrap();
    assert_eq!(
        body["paymentUrl"],
        format!("https://fake.invalid/card_gateway/checkout/{order_id}")
    );
    assert!(body.get("qrCodeUrl").is_none());
    assert!(answer.header("idempotency-replayed").is_none());
}

#[tokio::test]
async fn a_wallet_qr_order_answers_a_qr_code_url() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let answer = app.initiate(&token, "qr-credits", "wallet_qr", None).await;
    answer.expect(201, None);
    assert!(answer.body["qrCodeUrl"].is_string());
    assert!(answer.body.get("paymentUrl").is_none());
    assert_eq!(answer.body["currency"], "CNY");
}

#[tokio::test]
async fn initiate_refuses_unknown_plans_and_providers_and_mismatches() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    app.initiate(&token, "no-such-plan", "card_gateway", None)
        .await
        .expect(404, Some("plan_not_found"));
    app.initiate(&token, "credits-100", "stripe", None)
        .await
        .expect(422, Some("unknown_provider"));
    app.initiate(&token, "credits-100", "mor_a", None)
        .await
        .expect(422, Some("provider_mismatch"));
}

#[tokio::test]
async fn initiate_needs_a_signed_in_user() {
    let app = spawn_app();
    let answer = Answer::of(
        app.client
            .post("/api/payment/initiate")
            .body_json(&json!({"planId": "credits-100", "provider": "card_gateway"}))
            .send()
            .await,
    )
    .await;
    answer.expect(401, Some("unauthorized"));
    let key = app.api_key(&["credits:consume"]).await;
    app.initiate(&key, "credits-100", "card_gateway", None)
        .await
        .expect(403, Some("forbidden"));
    app.initiate("not-a-token", "credits-100", "card_gateway", None)
        .await
        .expect(401, Some("unauthorized"));
}

#[tokio::test]
async fn initiate_with_the_same_idempotency_key_replays_the_first_response() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let first = app
        .initiate(&token, "credits-100", "card_gateway", Some("key-1"))
        .await;
    first.expect(201, None);
    let again = app
        .initiate(&token, "credits-100", "card_gateway", Some("key-1"))
        .await;
    again.expect(201, None);
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(app.gateway(ProviderId::CardGateway).checkouts().len(), 1);
    app.initiate(&token, "lifetime", "card_gateway", Some("key-1"))
        .await
        .expect(409, Some("idempotency_conflict"));
}

#[tokio::test]
async fn a_gateway_failure_answers_502_and_leaves_the_order_failed() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    app.gateway(ProviderId::CardGateway)
        .fail_checkouts(Some("card declined by secret backend 10.0.0.7"));
    let answer = app
        .initiate(&token, "credits-100", "card_gateway", None)
        .await;
    answer.expect(502, Some("provider_error"));
    let detail = answer.body["detail"].as_str().unwrap();
    assert!(
        !detail.contains("10.0.0.7"),
        "5xx bodies hide internals: {detail}"
    );
    let orders = Answer::of(
        app.client
            .get("/api/orders")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    orders.expect(200, None);
    assert_eq!(orders.body["items"][0]["status"], "failed");
}

#[tokio::test]
async fn querying_an_order_shows_its_status_and_someone_elses_is_not_found() {
    let app = spawn_app();
    let (_, ada) = app.register("ada@example.com").await;
    let (_, bob) = app.register("bob@example.com").await;
    let order = app.initiate(&ada, "lifetime", "card_gateway", None).await;
    let order_id = order.body["orderId"].as_str().unwrap();
    let own = Answer::of(
        app.client
            .get(format!("/api/payment/query/{order_id}"))
            .header("authorization", bearer(&ada))
            .send()
            .await,
    )
    .await;
    own.expect(200, None);
    assert_eq!(own.body["planType"], "one_time");
    assert!(own.body["paymentUrl"].is_string());
    let other = Answer::of(
        app.client
            .get(format!("/api/payment/query/{order_id}"))
            .header("authorization", bearer(&bob))
            .send()
            .await,
    )
    .await;
    other.expect(404, Some("order_not_found"));
    Answer::of(
        app.client
            .get("/api/payment/query/ord_404")
            .header("authorization", bearer(&ada))
            .send()
            .await,
    )
    .await
    .expect(404, Some("order_not_found"));
}

#[tokio::test]
async fn the_session_cookie_signs_requests_in() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let answer = Answer::of(
        app.client
            .get("/api/orders")
            .header("cookie", format!("tally_session={token}"))
            .send()
            .await,
    )
    .await;
    answer.expect(200, None);
    assert_eq!(answer.body["total"], 0);
}

#[tokio::test]
async fn cancelling_a_pending_order_cancels_it() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order = app.initiate(&token, "lifetime", "card_gateway", None).await;
    let order_id = order.body["orderId"].as_str().unwrap();
    let answer = Answer::of(
        app.client
            .post(format!("/api/payment/cancel/{order_id}"))
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    answer.expect(200, None);
    assert_eq!(answer.body["order"]["status"], "cancelled");
    assert!(answer.body["order"].get("paymentUrl").is_none());
    assert_eq!(app.gateway(ProviderId::CardGateway).closed().len(), 1);
}

#[tokio::test]
async fn a_paid_credits_order_is_not_cancellable() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order_id = app.buy_credits(&token).await;
    Answer::of(
        app.client
            .post(format!("/api/payment/cancel/{order_id}"))
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await
    .expect(409, Some("not_cancellable"));
}

#[tokio::test]
async fn cancelling_a_subscription_order_ends_the_subscription_at_period_end() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![activated(&order_id)],
    )
    .await
    .expect(200, None);
    let answer = Answer::of(
        app.client
            .post(format!("/api/payment/cancel/{order_id}"))
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    answer.expect(200, None);
    assert_eq!(answer.body["order"]["status"], "paid");
    assert_eq!(answer.body["subscription"]["cancelAtPeriodEnd"], true);
    assert_eq!(answer.body["subscription"]["status"], "active");
    assert_eq!(
        answer.body["subscription"]["accessUntil"],
        answer.body["subscription"]["currentPeriodEnd"]
    );
    assert_eq!(
        app.gateway(ProviderId::CardGateway)
            .cancelled_subscriptions(),
        vec!["sub_provider_1".to_owned()]
    );
}

#[tokio::test]
async fn orders_are_listed_newest_first_with_page_facts_and_bad_pages_are_refused() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    for plan in ["lifetime", "credits-100", "pro-monthly"] {
        app.initiate(&token, plan, "card_gateway", None)
            .await
            .expect(201, None);
    }
    let answer = Answer::of(
        app.client
            .get("/api/orders?page=2&limit=2")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    answer.expect(200, None);
    assert_eq!(answer.body["page"], 2);
    assert_eq!(answer.body["limit"], 2);
    assert_eq!(answer.body["total"], 3);
    assert_eq!(answer.body["totalPages"], 2);
    assert_eq!(answer.body["items"].as_array().unwrap().len(), 1);
    for query in ["limit=101", "page=0", "limit=abc"] {
        Answer::of(
            app.client
                .get(format!("/api/orders?{query}"))
                .header("authorization", bearer(&token))
                .send()
                .await,
        )
        .await
        .expect(400, Some("invalid_pagination"));
    }
}

#[tokio::test]
async fn a_payment_webhook_marks_the_order_paid_with_its_time() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order = app.initiate(&token, "lifetime", "card_gateway", None).await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-paid",
        vec![paid(&order_id, 9900, Currency::Usd)],
    )
    .await
    .expect(200, None);
    let answer = Answer::of(
        app.client
            .get(format!("/api/payment/query/{order_id}"))
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    answer.expect(200, None);
    assert_eq!(answer.body["status"], "paid");
    assert_eq!(answer.body["paidAt"], "2026-01-01T00:00:01.000Z");
}

#[tokio::test]
async fn buying_what_the_user_already_holds_is_a_409_naming_it() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let order = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![activated(&order_id)],
    )
    .await
    .expect(200, None);
    let again = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    again.expect(409, Some("already_subscribed"));
    let status = Answer::of(
        app.client
            .get("/api/credits/status")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    let subscription_id = status.body["subscription"]["id"].as_str().unwrap();
    let detail = again.body["detail"].as_str().unwrap();
    assert!(detail.contains(subscription_id), "{detail}");
    assert!(detail.contains("pro-monthly"), "{detail}");

    let life = app.initiate(&token, "lifetime", "card_gateway", None).await;
    let life_order = life.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-life",
        vec![paid(&life_order, 9900, Currency::Usd)],
    )
    .await
    .expect(200, None);
    let again = app.initiate(&token, "lifetime", "card_gateway", None).await;
    again.expect(409, Some("already_owned"));
    let detail = again.body["detail"].as_str().unwrap();
    assert!(detail.contains(&life_order), "{detail}");
    // Credit packs are always for sale.
    app.buy_credits(&token).await;
    app.buy_credits(&token).await;
}
