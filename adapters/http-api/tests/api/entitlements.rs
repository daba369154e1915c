//! `GET /api/entitlements`, entitlements in `/api/credits/status` and `/api/plans`, and
//! entitlements on admin plans.

use domain::{Currency, ProviderId};
use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp, activated, bearer, paid, spawn_app};

async fn get(app: &TestApp, path: &str, token: &str) -> Answer {
    Answer::of(
        app.client
            .get(path)
            .header("authorization", bearer(token))
            .send()
            .await,
    )
    .await
}

/// Subscribe `token` to `pro-monthly` and buy `lifetime`; returns both order ids.
async fn subscribe_and_buy_lifetime(app: &TestApp, token: &str) -> (String, String) {
    let sub = app
        .initiate(token, "pro-monthly", "card_gateway", None)
        .await;
    let sub_order = sub.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![activated(&sub_order)],
    )
    .await
    .expect(200, None);
    let life = app.initiate(token, "lifetime", "card_gateway", None).await;
    let life_order = life.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-life",
        vec![paid(&life_order, 9900, Currency::Usd)],
    )
    .await
    .expect(200, None);
    (sub_order, life_order)
}

#[tokio::test]
async fn a_user_without_purchases_holds_no_entitlements() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    app.buy_credits(&token).await;
    let answer = get(&app, "/api/entitlements", &token).await;
    answer.expect(200, None);
    assert_eq!(
        answer.body,
        json!({"userId": user_id, "accountId": user_id, "entitlements": {}, "grants": []})
    );
}

#[tokio::test]
async fn entitlements_are_the_union_of_what_the_user_holds_naming_each_grant() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let (_, life_order) = subscribe_and_buy_lifetime(&app, &token).await;
    let answer = get(&app, "/api/entitlements", &token).await;
    answer.expect(200, None);
    assert_eq!(answer.body["userId"], user_id.as_str());
    assert_eq!(
        answer.body["entitlements"],
        json!({"export": true, "seats": 5, "sso": true})
    );
    let grants = answer.body["grants"].as_array().unwrap();
    let grant = |key: &str| grants.iter().find(|g| g["key"] == key).unwrap().clone();
    let seats = grant("seats");
    assert_eq!(seats["value"], 5);
    assert_eq!(seats["planId"], "pro-monthly");
    assert!(seats["subscriptionId"].is_string(), "{seats}");
    assert_eq!(seats.get("orderId"), None);
    assert_eq!(seats.get("until"), None, "the subscription renews");
    let sso = grant("sso");
    assert_eq!(sso["planId"], "lifetime");
    assert_eq!(sso["orderId"], life_order.as_str());
    assert_eq!(sso.get("until"), None, "lifetime");

    let status = get(&app, "/api/credits/status", &token).await;
    status.expect(200, None);
    assert_eq!(status.body["entitlements"], answer.body["entitlements"]);
}

#[tokio::test]
async fn api_keys_need_the_entitlements_read_scope_and_users_read_only_their_own() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let (other_id, _) = app.register("bob@example.com").await;
    subscribe_and_buy_lifetime(&app, &token).await;
    let reader = app.api_key(&["entitlements:read"]).await;
    let read = get(
        &app,
        &format!("/api/entitlements?userId={user_id}"),
        &reader,
    )
    .await;
    read.expect(200, None);
    assert_eq!(read.body["entitlements"]["seats"], 5);

    let credits_reader = app.api_key(&["credits:read"]).await;
    get(
        &app,
        &format!("/api/entitlements?userId={user_id}"),
        &credits_reader,
    )
    .await
    .expect(403, Some("forbidden"));
    get(
        &app,
        &format!("/api/entitlements?userId={other_id}"),
        &token,
    )
    .await
    .expect(403, Some("forbidden"));
    get(&app, "/api/entitlements", &reader)
        .await
        .expect(400, Some("validation_failed"));
    get(&app, "/api/entitlements?userId=nobody", &reader)
        .await
        .expect(404, Some("user_not_found"));
    Answer::of(app.client.get("/api/entitlements").send().await)
        .await
        .expect(401, Some("unauthorized"));
}

#[tokio::test]
async fn the_plan_listing_shows_each_plans_entitlements() {
    let app = spawn_app();
    let answer = Answer::of(app.client.get("/api/plans").send().await).await;
    answer.expect(200, None);
    let plans = answer.body["plans"].as_array().unwrap();
    let of = |id: &str| plans.iter().find(|p| p["id"] == id).unwrap()["entitlements"].clone();
    assert_eq!(of("pro-monthly"), json!({"export": true, "seats": 5}));
    assert_eq!(of("credits-100"), json!({}));
}

fn recurring_plan(entitlements: Value) -> Value {
    json!({
        "id": "team",
        "provider": "card_gateway",
        "amount": "29.00",
        "currency": "USD",
        "duration": {"type": "recurring", "months": 1},
        "cardGatewayPriceId": "price_team",
        "i18n": {"en": {"name": "Team"}},
        "entitlements": entitlements,
    })
}

#[tokio::test]
async fn admin_plans_keep_valid_entitlements_and_refuse_bad_ones_field_by_field() {
    let app = spawn_app();
    let admin = app.admin().await;
    let post = |body: Value| {
        let admin = admin.clone();
        let app = &app;
        async move {
            Answer::of(
                app.client
                    .post("/api/admin/plans")
                    .header("authorization", bearer(&admin))
                    .body_json(&body)
                    .send()
                    .await,
            )
            .await
        }
    };
    let bad = post(recurring_plan(json!({
        "Seats": 1, "off": false, "negative": -1, "text": "5", "fraction": 1.5
    })))
    .await;
    bad.expect(422, Some("validation_failed"));
    let mut fields: Vec<&str> = bad.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "entitlements.Seats",
            "entitlements.fraction",
            "entitlements.negative",
            "entitlements.off",
            "entitlements.text"
        ]
    );

    let created = post(recurring_plan(json!({"seats": 10, "sso": true}))).await;
    created.expect(201, None);
    assert_eq!(
        created.body["entitlements"],
        json!({"seats": 10, "sso": true})
    );
    let listed = get(&app, "/api/admin/plans", &admin).await;
    assert_eq!(
        listed.body["plans"][0]["entitlements"],
        json!({"seats": 10, "sso": true})
    );
}
