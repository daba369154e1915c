//! `/api/admin/plans` and `/api/admin/api-keys`.

use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp, bearer, spawn_app};

fn plan(id: &str) -> Value {
    json!({
        "id": id,
        "provider": "card_gateway",
        "amount": 9.99,
        "currency": "USD",
        "duration": {"type": "credits", "credits": "50"},
        "i18n": {
            "en": {"name": "Starter", "description": "50 credits", "features": ["chat"]},
            "zh-CN": {"name": "入门"}
        }
    })
}

async fn send(app: &TestApp, method: &str, path: &str, token: &str, body: Option<Value>) -> Answer {
    let mut request = match method {
        "GET" => app.client.get(path),
        "PUT" => app.client.put(path),
        "DELETE" => app.client.delete(path),
        _ => app.client.post(path),
    }
    .header("authorization", bearer(token));
    if let Some(body) = body {
        request = request.body_json(&body);
    }
    Answer::of(request.send().await).await
}

#[tokio::test]
async fn admin_endpoints_are_forbidden_to_non_admins() {
    let app = spawn_app();
    let (_, user) = app.register("ada@example.com").await;
    send(&app, "GET", "/api/admin/plans", &user, None)
        .await
        .expect(403, Some("forbidden"));
    send(
        &app,
        "POST",
        "/api/admin/plans",
        &user,
        Some(plan("starter")),
    )
    .await
    .expect(403, Some("forbidden"));
    send(&app, "GET", "/api/admin/api-keys", &user, None)
        .await
        .expect(403, Some("forbidden"));
    Answer::of(app.client.get("/api/admin/plans").send().await)
        .await
        .expect(401, Some("unauthorized"));
}

#[tokio::test]
async fn an_admin_creates_updates_and_hides_plans() {
    let app = spawn_app();
    let admin = app.admin().await;
    let create = || {
        send(
            &app,
            "POST",
            "/api/admin/plans",
            &admin,
            Some(plan("starter")),
        )
    };
    let created = create().await;
    created.expect(201, None);
    assert_eq!(created.body["amount"], "9.99");
    assert_eq!(created.body["duration"]["credits"], "50");
    create().await.expect(409, Some("plan_exists"));

    let mut changed = plan("starter");
    changed["amount"] = json!("12.50");
    changed["recommended"] = json!(true);
    let updated = send(
        &app,
        "PUT",
        "/api/admin/plans/starter",
        &admin,
        Some(changed),
    )
    .await;
    updated.expect(200, None);
    assert_eq!(updated.body["amount"], "12.5");
    assert_eq!(updated.body["recommended"], true);
    send(
        &app,
        "PUT",
        "/api/admin/plans/ghost",
        &admin,
        Some(plan("ghost")),
    )
    .await
    .expect(404, Some("plan_not_found"));

    let hidden = send(&app, "POST", "/api/admin/plans/starter/hide", &admin, None).await;
    hidden.expect(200, None);
    assert_eq!(hidden.body["hidden"], true);
    let unhidden = send(
        &app,
        "POST",
        "/api/admin/plans/starter/unhide",
        &admin,
        None,
    )
    .await;
    unhidden.expect(200, None);
    assert_eq!(unhidden.body["hidden"], false);
}

#[tokio::test]
async fn an_admin_reorders_and_deletes_plans() {
    let app = spawn_app();
    let admin = app.admin().await;
    for id in ["starter", "second"] {
        send(&app, "POST", "/api/admin/plans", &admin, Some(plan(id)))
            .await
            .expect(201, None);
    }
    let reorder = |ids: Value| {
        send(
            &app,
            "POST",
            "/api/admin/plans/reorder",
            &admin,
            Some(json!({"ids": ids})),
        )
    };
    reorder(json!(["second", "starter"]))
        .await
        .expect(204, None);
    let listed = send(&app, "GET", "/api/admin/plans", &admin, None).await;
    listed.expect(200, None);
    assert_eq!(listed.body["pricingMode"], "static");
    let ids: Vec<&str> = listed.body["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["second", "starter"]);
    reorder(json!(["ghost"]))
        .await
        .expect(404, Some("plan_not_found"));

    let delete = || send(&app, "DELETE", "/api/admin/plans/starter", &admin, None);
    delete().await.expect(204, None);
    delete().await.expect(404, Some("plan_not_found"));
}

#[tokio::test]
async fn a_bad_plan_is_a_422_listing_every_field_to_correct() {
    let app = spawn_app();
    let admin = app.admin().await;
    let bad = json!({
        "id": "bad",
        "provider": "wallet_qr",
        "amount": "-1",
        "currency": "XYZ",
        "duration": {"type": "recurring", "months": 1},
        "i18n": {}
    });
    let answer = send(&app, "POST", "/api/admin/plans", &admin, Some(bad)).await;
    answer.expect(422, Some("validation_failed"));
    let fields: Vec<&str> = answer.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert!(fields.contains(&"currency"), "{fields:?}");
    assert!(fields.contains(&"i18n.en"), "{fields:?}");
    for error in answer.body["errors"].as_array().unwrap() {
        assert!(error["message"].is_string());
    }
}

#[tokio::test]
async fn importing_copies_the_static_catalog() {
    let app = spawn_app();
    let admin = app.admin().await;
    let answer = send(&app, "POST", "/api/admin/plans/import", &admin, None).await;
    answer.expect(200, None);
    assert_eq!(answer.body, json!({"created": 6, "updated": 0}));
    let listed = send(&app, "GET", "/api/admin/plans", &admin, None).await;
    assert_eq!(listed.body["plans"].as_array().unwrap().len(), 6);
}

#[tokio::test]
async fn api_keys_are_created_with_a_secret_shown_once_listed_and_revoked() {
    let app = spawn_app();
    let admin = app.admin().await;
    let created = send(
        &app,
        "POST",
        "/api/admin/api-keys",
        &admin,
        Some(json!({"name": "worker", "scopes": ["credits:read"]})),
    )
    .await;
    created.expect(201, None);
    let secret = created.body["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("tly_"));
    let id = created.body["id"].as_str().unwrap().to_owned();
    let listed = send(&app, "GET", "/api/admin/api-keys", &admin, None).await;
    listed.expect(200, None);
    assert_eq!(listed.body["keys"][0]["id"], id.as_str());
    assert!(listed.body["keys"][0].get("secret").is_none());
    assert_eq!(listed.body["keys"][0]["scopes"], json!(["credits:read"]));

    send(
        &app,
        "DELETE",
        &format!("/api/admin/api-keys/{id}"),
        &admin,
        None,
    )
    .await
    .expect(204, None);
    send(&app, "DELETE", "/api/admin/api-keys/key_404", &admin, None)
        .await
        .expect(404, Some("api_key_not_found"));
    Answer::of(
        app.client
            .get("/api/credits/balance?userId=usr_1")
            .header("x-api-key", secret.as_str())
            .send()
            .await,
    )
    .await
    .expect(401, Some("unauthorized"));
    send(
        &app,
        "POST",
        "/api/admin/api-keys",
        &admin,
        Some(json!({"name": "worker", "scopes": ["everything"]})),
    )
    .await
    .expect(422, Some("validation_failed"));
}

#[tokio::test]
async fn public_plans_are_listed_in_the_requested_locale_without_hidden_ones() {
    let app = spawn_app();
    let answer = Answer::of(app.client.get("/api/plans?locale=zh-CN").send().await).await;
    answer.expect(200, None);
    let plans = answer.body["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 5);
    assert!(plans.iter().all(|p| p["id"] != "hidden-deal"));
    let credits = &plans[0];
    assert_eq!(credits["id"], "credits-100");
    assert_eq!(credits["amount"], "9.99");
    assert_eq!(credits["amountMinor"], 999);
    assert_eq!(credits["duration"]["type"], "credits");
    assert_eq!(credits["duration"]["credits"], "100.00");
    assert_eq!(credits["text"]["name"], "credits-100（中文）");
    let lifetime = &plans[2];
    assert_eq!(lifetime["duration"]["months"], 999_999);
    let english = Answer::of(
        app.client
            .get("/api/plans")
            .header("accept-language", "fr-FR, en;q=0.5")
            .send()
            .await,
    )
    .await;
    assert_eq!(english.body["plans"][0]["text"]["name"], "credits-100");
}

/// Issue 15: `POST /api/admin/orders/{orderId}/refund`.
#[tokio::test]
async fn an_admin_refunds_an_order_through_its_provider_and_bad_refunds_are_problems() {
    use application::ports::RefundState;
    use domain::ProviderId;
    let app = spawn_app();
    let (_, buyer) = app.register("buyer@example.com").await;
    let order = app.buy_credits(&buyer).await;
    let admin = app.admin().await;
    let path = format!("/api/admin/orders/{order}/refund");
    send(&app, "POST", &path, &buyer, Some(json!({"reason": "x"})))
        .await
        .expect(403, Some("forbidden"));
    // The fake provider has no refund API until told otherwise.
    send(&app, "POST", &path, &admin, Some(json!({"reason": "x"})))
        .await
        .expect(422, Some("refund_not_supported"));
    app.gateway(ProviderId::CardGateway)
        .answer_refunds(Some(RefundState::Succeeded));
    for amount in ["0", "9.991", "10.00"] {
        let body = json!({"amount": amount.parse::<f64>().unwrap(), "reason": "x"});
        send(&app, "POST", &path, &admin, Some(body))
            .await
            .expect(422, Some("validation_failed"));
    }
    let missing = "/api/admin/orders/ord_missing/refund";
    send(&app, "POST", missing, &admin, Some(json!({})))
        .await
        .expect(404, Some("order_not_found"));
    let half = send(
        &app,
        "POST",
        &path,
        &admin,
        Some(json!({"amount": 4.99, "reason": "x"})),
    )
    .await;
    half.expect(202, None);
    assert_eq!(half.body["state"], "succeeded");
    assert_eq!(half.body["amountMinor"], 499);
    assert_eq!(half.body["refundId"], format!("rf_{order}_499"));
    assert_eq!(half.body["order"]["status"], "partially_refunded");
    let rest = send(&app, "POST", &path, &admin, Some(json!({"reason": "x"}))).await;
    rest.expect(202, None);
    assert_eq!(rest.body["amountMinor"], 500);
    assert_eq!(rest.body["order"]["status"], "refunded");
    send(&app, "POST", &path, &admin, Some(json!({})))
        .await
        .expect(409, Some("not_refundable"));
    let refunds = app.gateway(ProviderId::CardGateway).refunds();
    assert_eq!(refunds.len(), 2);
    assert!(
        refunds
            .iter()
            .all(|r| r.notify_url.ends_with("/api/payment/webhook/card_gateway"))
    );
}

/// Issue 18: the webhook inbox is visible to administrators, filtered and paged.
#[tokio::test]
async fn admins_list_recorded_webhook_events_by_provider_and_outcome() {
    use domain::{Currency, ProviderId};
    let app = spawn_app();
    let (_, buyer) = app.register("buyer@example.com").await;
    let order = app.buy_credits(&buyer).await;
    // A payment of the wrong amount: recorded as a mismatch.
    let wrong = crate::helpers::paid(&order, 1, Currency::Usd);
    app.deliver(ProviderId::CardGateway, "evt-wrong", vec![wrong])
        .await
        .expect(200, None);
    let admin = app.admin().await;
    send(&app, "GET", "/api/admin/webhook-events", &buyer, None)
        .await
        .expect(403, Some("forbidden"));
    let all = send(&app, "GET", "/api/admin/webhook-events", &admin, None).await;
    all.expect(200, None);
    assert_eq!(all.body["items"].as_array().unwrap().len(), 2);
    assert!(all.body.get("nextCursor").is_none(), "one page holds both");
    assert_eq!(all.body["items"][0]["eventId"], "evt-wrong", "newest first");
    assert_eq!(all.body["items"][0]["outcome"], "mismatch");
    assert!(
        all.body["items"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("paid")
    );
    assert_eq!(all.body["items"][0]["payload"], "{\"id\":\"evt\"}");
    let path = "/api/admin/webhook-events?outcome=mismatch&provider=card_gateway";
    let mismatches = send(&app, "GET", path, &admin, None).await;
    assert_eq!(mismatches.body["items"].as_array().unwrap().len(), 1);
    let other = "/api/admin/webhook-events?provider=mor_a";
    let none = send(&app, "GET", other, &admin, None).await;
    assert_eq!(none.body["items"], serde_json::json!([]));
    let first = send(
        &app,
        "GET",
        "/api/admin/webhook-events?limit=1",
        &admin,
        None,
    )
    .await;
    assert_eq!(first.body["items"][0]["eventId"], "evt-wrong");
    let cursor = first.body["nextCursor"].as_str().unwrap();
    let paged = format!("/api/admin/webhook-events?limit=1&cursor={cursor}");
    let second = send(&app, "GET", &paged, &admin, None).await;
    assert_eq!(second.body["items"][0]["outcome"], "applied");
    assert!(second.body.get("nextCursor").is_none(), "the last page");
    send(
        &app,
        "GET",
        "/api/admin/webhook-events?cursor=nonsense",
        &admin,
        None,
    )
    .await
    .expect(400, Some("invalid_pagination"));
    send(
        &app,
        "GET",
        "/api/admin/webhook-events?provider=stripe",
        &admin,
        None,
    )
    .await
    .expect(422, Some("unknown_provider"));
    send(
        &app,
        "GET",
        "/api/admin/webhook-events?limit=0",
        &admin,
        None,
    )
    .await
    .expect(400, Some("invalid_pagination"));
}

/// Issue 18: an administrator grants (optionally expiring) or debits credits, once per key.
#[tokio::test]
async fn admins_grant_and_debit_credits_once_per_key_and_never_below_zero() {
    let app = spawn_app();
    let (user_id, buyer) = app.register("buyer@example.com").await;
    let admin = app.admin().await;
    let path = format!("/api/admin/users/{user_id}/credits");
    let post = |key: &'static str, body: Value| {
        let request = app
            .client
            .post(&path)
            .header("authorization", bearer(&admin))
            .header("idempotency-key", key)
            .body_json(&body);
        async move { Answer::of(request.send().await).await }
    };
    let grant =
        json!({"amount": 100, "reason": "outage on 24 Nov", "expiresAt": "2099-01-01T00:00:00Z"});
    let first = post("grant-1", grant.clone()).await;
    first.expect(200, None);
    assert_eq!(first.body["balanceHundredths"], 10_000);
    assert_eq!(first.body["transaction"]["type"], "admin_adjustment");
    assert_eq!(first.body["transaction"]["category"], "compensation");
    let again = post("grant-1", grant).await;
    again.expect(200, None);
    assert!(again.body.get("transaction").is_none(), "{:?}", again.body);
    assert_eq!(again.body["balanceHundredths"], 10_000);
    post("grant-1", json!({"amount": 5, "reason": "other"}))
        .await
        .expect(409, Some("idempotency_conflict"));
    post("debit-1", json!({"amount": -150, "reason": "mistake"}))
        .await
        .expect(402, Some("insufficient_credits"));
    let debit = post("debit-2", json!({"amount": -25.5, "reason": "mistake"})).await;
    debit.expect(200, None);
    assert_eq!(debit.body["balanceHundredths"], 7_450);
    for (key, body, field) in [
        ("bad-1", json!({"amount": 0, "reason": "x"}), "amount"),
        ("bad-2", json!({"amount": 1.001, "reason": "x"}), "amount"),
        ("bad-3", json!({"amount": 1, "reason": "  "}), "reason"),
        (
            "bad-4",
            json!({"amount": -1, "reason": "x", "expiresAt": "2099-01-01T00:00:00Z"}),
            "expiresAt",
        ),
        (
            "bad-5",
            json!({"amount": 1, "reason": "x", "expiresAt": "2000-01-01T00:00:00Z"}),
            "expiresAt",
        ),
        (
            "bad-6",
            json!({"amount": 1, "reason": "x", "expiresAt": "tomorrow"}),
            "expiresAt",
        ),
        (
            "bad-7",
            json!({"amount": -1, "reason": "x", "category": "bonus"}),
            "category",
        ),
        (
            "bad-8",
            json!({"amount": -1, "reason": "x", "priority": 3}),
            "priority",
        ),
    ] {
        let answer = post(key, body).await;
        answer.expect(422, Some("validation_failed"));
        assert_eq!(answer.body["errors"][0]["field"], field, "{key}");
    }
    post(
        "bad-9",
        json!({"amount": 1, "reason": "x", "priority": 1001}),
    )
    .await
    .expect(400, Some("validation_failed"));
    // A promotional grant spent before anything else: its category and priority are kept,
    // and the status splits the balance by what the credits are.
    let promo = post(
        "promo-1",
        json!({"amount": 10, "reason": "launch", "category": "promotional", "priority": 3}),
    )
    .await;
    promo.expect(200, None);
    assert_eq!(promo.body["transaction"]["category"], "promotional");
    let status = Answer::of(
        app.client
            .get("/api/credits/status")
            .header("authorization", bearer(&buyer))
            .send()
            .await,
    )
    .await;
    status.expect(200, None);
    let split = &status.body["balanceByCategory"];
    assert_eq!(split["compensation"], "74.50");
    assert_eq!(split["promotionalHundredths"], 1_000);
    assert_eq!(split["paid"], "0.00");
    assert_eq!(split["bonusHundredths"], 0);
    let no_key = Answer::of(
        app.client
            .post(&path)
            .header("authorization", bearer(&admin))
            .body_json(&json!({"amount": 1, "reason": "x"}))
            .send()
            .await,
    )
    .await;
    no_key.expect(400, None);
    let missing = Answer::of(
        app.client
            .post("/api/admin/users/usr_missing/credits")
            .header("authorization", bearer(&admin))
            .header("idempotency-key", "k")
            .body_json(&json!({"amount": 1, "reason": "x"}))
            .send()
            .await,
    )
    .await;
    missing.expect(404, Some("user_not_found"));
    let forbidden = Answer::of(
        app.client
            .post(&path)
            .header("authorization", bearer(&buyer))
            .header("idempotency-key", "k2")
            .body_json(&json!({"amount": 1, "reason": "x"}))
            .send()
            .await,
    )
    .await;
    forbidden.expect(403, Some("forbidden"));
}
