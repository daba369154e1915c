//! `POST /api/admin/webhook-events/{id}/replay` (issue 18): a recorded provider event replayed
//! through the webhook pipeline.

use application::ports::VerifiedWebhook;
use domain::{Currency, ProviderId};
use serde_json::Value;

use crate::helpers::{Answer, TestApp, bearer, paid, spawn_app};

async fn call(app: &TestApp, method: &str, path: &str, token: &str) -> Answer {
    let request = match method {
        "GET" => app.client.get(path),
        _ => app.client.post(path),
    };
    Answer::of(request.header("authorization", bearer(token)).send().await).await
}

async fn balance(app: &TestApp, token: &str) -> Value {
    call(app, "GET", "/api/credits/balance", token).await.body["balance"].clone()
}

/// The inbox row of `event_id`.
async fn row(app: &TestApp, admin: &str, event_id: &str) -> Value {
    let inbox = call(app, "GET", "/api/admin/webhook-events", admin).await;
    inbox.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["eventId"] == event_id)
        .unwrap_or_else(|| panic!("{event_id} is recorded: {}", inbox.body))
        .clone()
}

async fn replay(app: &TestApp, token: &str, id: &Value) -> Answer {
    let path = format!("/api/admin/webhook-events/{id}/replay");
    call(app, "POST", &path, token).await
}

#[tokio::test]
async fn replaying_an_applied_event_is_a_duplicate_and_only_admins_replay() {
    let app = spawn_app();
    let (_, buyer) = app.register("buyer@example.com").await;
    let order = app.buy_credits(&buyer).await;
    let admin = app.admin().await;
    let applied = row(&app, &admin, &format!("evt-{order}")).await;
    assert_eq!(applied["outcome"], "applied");
    replay(&app, &buyer, &applied["id"])
        .await
        .expect(403, Some("forbidden"));
    assert_eq!(balance(&app, &buyer).await, "100.00");
    let answer = replay(&app, &admin, &applied["id"]).await;
    answer.expect(200, None);
    assert_eq!(answer.body["outcome"], "duplicate");
    assert!(answer.body.get("replayedAs").is_none());
    assert_eq!(answer.body["event"]["id"], applied["id"]);
    assert_eq!(balance(&app, &buyer).await, "100.00", "nothing changed");
    let inbox = call(&app, "GET", "/api/admin/webhook-events", &admin).await;
    assert_eq!(inbox.body["items"].as_array().unwrap().len(), 1, "no row");
    let audit = call(&app, "GET", "/api/admin/audit", &admin).await;
    assert_eq!(
        audit.body["items"].as_array().unwrap().len(),
        0,
        "a replay that changes nothing writes no entry"
    );
    for missing in ["999999", "abc"] {
        let path = format!("/api/admin/webhook-events/{missing}/replay");
        call(&app, "POST", &path, &admin)
            .await
            .expect(404, Some("webhook_event_not_found"));
    }
}

#[tokio::test]
async fn replaying_a_mismatch_after_the_fix_applies_it_once() {
    let app = spawn_app();
    let (_, buyer) = app.register("buyer@example.com").await;
    let first = app.buy_credits(&buyer).await;
    let order = app
        .initiate(&buyer, "credits-100", "card_gateway", None)
        .await;
    order.expect(201, None);
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    assert_ne!(order_id, first);
    // Read as 0.01 USD (a parsing bug, say): a mismatch, nothing granted.
    let wrong = paid(&order_id, 1, Currency::Usd);
    app.deliver(ProviderId::CardGateway, "evt-late", vec![wrong])
        .await
        .expect(200, None);
    let admin = app.admin().await;
    let mismatch = row(&app, &admin, "evt-late").await;
    assert_eq!(mismatch["outcome"], "mismatch");
    assert_eq!(balance(&app, &buyer).await, "100.00");
    // The fix deployed: the recorded body now reads as the 9.99 USD it says.
    app.gateway(ProviderId::CardGateway).prepare_recorded(
        "evt-late",
        VerifiedWebhook {
            event_id: "evt-late".into(),
            event_type: "payment.succeeded".into(),
            events: vec![paid(&order_id, 999, Currency::Usd)],
            foreign: None,
        },
    );
    let answer = replay(&app, &admin, &mismatch["id"]).await;
    answer.expect(200, None);
    assert_eq!(answer.body["outcome"], "applied");
    let replayed_as = answer.body["replayedAs"].as_str().unwrap().to_owned();
    assert!(replayed_as.starts_with("evt-late#replay-"), "{replayed_as}");
    assert_eq!(balance(&app, &buyer).await, "200.00", "granted once");
    assert_eq!(row(&app, &admin, "evt-late").await["outcome"], "mismatch");
    assert_eq!(row(&app, &admin, &replayed_as).await["outcome"], "applied");
    // Again: the order is paid now, so the same mismatch re-decided grants nothing more (a
    // credits order's repeat goes through the pipeline; its grant is once per order).
    let again = replay(&app, &admin, &mismatch["id"]).await;
    again.expect(200, None);
    assert_ne!(
        again.body["replayedAs"], answer.body["replayedAs"],
        "a new row"
    );
    assert_eq!(balance(&app, &buyer).await, "200.00", "not granted twice");
    // And the replay's own row was applied: a duplicate.
    let replay_row = row(&app, &admin, &replayed_as).await;
    let twice = replay(&app, &admin, &replay_row["id"]).await;
    assert_eq!(twice.body["outcome"], "duplicate");
    assert_eq!(balance(&app, &buyer).await, "200.00", "still granted once");
}

/// `tally_webhooks_total` of card_gateway events with `result` from `source`, as served now.
async fn webhooks_counted(app: &TestApp, result: &str, source: &str) -> u64 {
    let answer = Answer::of(app.client.get("/metrics").send().await).await;
    let labels = [
        "provider=\"card_gateway\"".to_owned(),
        format!("result=\"{result}\""),
        format!("source=\"{source}\""),
    ];
    answer
        .body
        .as_str()
        .unwrap()
        .lines()
        .filter(|line| line.starts_with("tally_webhooks_total{"))
        .filter(|line| labels.iter().all(|label| line.contains(label.as_str())))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A mismatch replayed while the recorded body still mismatches: decided again (a row of its
/// own, audited with what it came to), counted as a replay, never as a delivery.
#[tokio::test]
async fn a_replay_is_counted_as_a_replay_and_audited_with_what_it_came_to() {
    let app = spawn_app();
    let (_, buyer) = app.register("buyer@example.com").await;
    let order = app
        .initiate(&buyer, "credits-100", "card_gateway", None)
        .await;
    order.expect(201, None);
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    let wrong = paid(&order_id, 1, Currency::Usd);
    app.deliver(
        ProviderId::CardGateway,
        "evt-still-wrong",
        vec![wrong.clone()],
    )
    .await
    .expect(200, None);
    let admin = app.admin().await;
    let mismatch = row(&app, &admin, "evt-still-wrong").await;
    assert_eq!(mismatch["outcome"], "mismatch");
    // The recorded body still reads as 0.01 USD.
    app.gateway(ProviderId::CardGateway).prepare_recorded(
        "evt-still-wrong",
        VerifiedWebhook {
            event_id: "evt-still-wrong".into(),
            event_type: "payment.succeeded".into(),
            events: vec![wrong],
            foreign: None,
        },
    );
    // Other tests of this binary count deliveries at the same time; only this one replays a
    // mismatch.
    let replayed_before = webhooks_counted(&app, "mismatch", "replay").await;
    let answer = replay(&app, &admin, &mismatch["id"]).await;
    answer.expect(200, None);
    assert_eq!(answer.body["outcome"], "mismatch");
    let replayed_as = answer.body["replayedAs"].as_str().unwrap().to_owned();
    assert_eq!(
        webhooks_counted(&app, "mismatch", "replay").await,
        replayed_before + 1,
        "counted once, as a replay"
    );
    assert!(webhooks_counted(&app, "mismatch", "delivery").await >= 1);
    assert_eq!(row(&app, &admin, &replayed_as).await["outcome"], "mismatch");
    assert_eq!(balance(&app, &buyer).await, "0.00", "nothing granted");
    let audit = call(&app, "GET", "/api/admin/audit", &admin).await;
    let entries = audit.body["items"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{}", audit.body);
    assert_eq!(entries[0]["action"], "webhook_event.replayed");
    assert_eq!(entries[0]["objectId"], mismatch["id"].to_string());
    let after = entries[0]["after"].to_string();
    assert!(
        after.contains("mismatch") && after.contains(&replayed_as),
        "{after}"
    );
    // An event already applied answers `duplicate`, counted as a replay too.
    let paid_order = app.buy_credits(&buyer).await;
    let applied = row(&app, &admin, &format!("evt-{paid_order}")).await;
    let duplicates = webhooks_counted(&app, "duplicate", "replay").await;
    let twice = replay(&app, &admin, &applied["id"]).await;
    assert_eq!(twice.body["outcome"], "duplicate");
    assert!(webhooks_counted(&app, "duplicate", "replay").await > duplicates);
}

/// The admin cancel's optional body is in the OpenAPI document: `application/json`, not
/// required, `{"when": "now" | "period_end"}`.
#[tokio::test]
async fn the_cancel_body_is_documented_as_optional_json() {
    let app = spawn_app();
    let answer = Answer::of(app.client.get("/api/openapi.json").send().await).await;
    answer.expect(200, None);
    let cancel = &answer.body["paths"]["/api/admin/subscriptions/{id}/cancel"]["post"];
    let body = &cancel["requestBody"];
    assert_eq!(body["required"], false, "{cancel}");
    let schema = &body["content"]["application/json"]["schema"]["$ref"];
    assert_eq!(schema, "#/components/schemas/AdminCancelBody", "{body}");
    let when = &answer.body["components"]["schemas"]["AdminCancelBody"]["properties"]["when"];
    assert!(when.to_string().contains("CancelWhen"), "{when}");
    let values = &answer.body["components"]["schemas"]["CancelWhen"]["enum"];
    assert_eq!(values, &serde_json::json!(["period_end", "now"]));
}

/// `POST /api/admin/subscriptions/{id}/cancel` with `{"when": "now"}`: the provider is asked
/// to end the subscription at once; it ends when the provider's ended event arrives.
#[tokio::test]
async fn an_admin_cancels_a_subscription_now_and_it_ends_with_the_providers_event() {
    use application::ports::PaymentEvent;
    use domain::Timestamp;

    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let sub = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    let sub_order = sub.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![crate::helpers::activated(&sub_order)],
    )
    .await
    .expect(200, None);
    let admin = app.admin().await;
    let overview = call(&app, "GET", &format!("/api/admin/users/{user_id}"), &admin).await;
    let subscription = overview.body["status"]["subscriptions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancel = format!("/api/admin/subscriptions/{subscription}/cancel");
    let send = |body: &'static str, token: &str| {
        app.client
            .post(&cancel)
            .header("authorization", bearer(token))
            .content_type("application/json")
            .body(body)
            .send()
    };
    Answer::of(send(r#"{"when":"now"}"#, &token).await)
        .await
        .expect(403, Some("forbidden"));
    Answer::of(send(r#"{"when":"tomorrow"}"#, &admin).await)
        .await
        .expect(400, Some("validation_failed"));
    let asked = Answer::of(send(r#"{"when":"now"}"#, &admin).await).await;
    asked.expect(202, None);
    assert_eq!(asked.body["status"], "active", "it ends with the event");
    let gateway = app.gateway(ProviderId::CardGateway);
    assert_eq!(gateway.ended_now(), ["sub_provider_1"]);
    assert!(
        gateway.cancelled_subscriptions().is_empty(),
        "not at period end"
    );
    let ended = PaymentEvent::SubscriptionCanceled {
        provider_subscription_id: "sub_provider_1".into(),
        occurred_at: Timestamp::from_unix_millis(crate::helpers::START_MS + 5_000),
    };
    app.deliver(ProviderId::CardGateway, "evt-ended", vec![ended])
        .await
        .expect(200, None);
    let after = call(&app, "GET", &format!("/api/admin/users/{user_id}"), &admin).await;
    assert_eq!(
        after.body["status"]["subscriptions"][0]["status"], "canceled",
        "ended by the provider's event"
    );
    Answer::of(send(r#"{"when":"now"}"#, &admin).await)
        .await
        .expect(409, Some("not_cancellable"));
    assert_eq!(gateway.ended_now().len(), 1, "asked once");
    let audit = call(&app, "GET", "/api/admin/audit", &admin).await;
    assert_eq!(audit.body["items"][0]["action"], "subscription.canceled");
    assert!(audit.body["items"][0]["after"].to_string().contains("now"));
}
