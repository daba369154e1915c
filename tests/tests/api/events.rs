//! The host events feed end to end (issue 17): a credits pack and a subscription bought and paid
//! through the sandbox are told as `order.paid`, `credits.granted` and `subscription.activated`
//! with the buyer and the object as the API shows it; an administrator and an API key with
//! `events:read` read them, a key without the scope gets a 403 problem; the cursor pages
//! without gaps or repeats; bad input is a problem with a stable code.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

struct Feed {
    app: TestApp,
    admin: String,
    reader_key: String,
    credits_key: String,
}

async fn open() -> Feed {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let key = |scopes: Value| {
        let app = &app;
        let admin = admin.clone();
        async move {
            let body = json!({"name": "events", "scopes": scopes});
            let (status, made) = app.post(&admin, "/api/admin/api-keys", &body, None).await;
            assert_eq!(status, 201, "{made}");
            made["secret"].as_str().expect("secret").to_owned()
        }
    };
    let reader_key = key(json!(["events:read"])).await;
    let credits_key = key(json!(["credits:read"])).await;
    Feed {
        app,
        admin,
        reader_key,
        credits_key,
    }
}

async fn buy_and_pay(app: &TestApp, token: &str, plan: &str) -> String {
    let key = format!("events-{plan}");
    let (order, _) = app
        .open_checkout(token, plan, "card_gateway", Some(&key))
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    order
}

/// Every event readable now, following the cursor `limit` at a time.
async fn read_all(app: &TestApp, token: &str, limit: u32) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..200 {
        let path = match &after {
            Some(cursor) => format!("/api/events?limit={limit}&after={cursor}"),
            None => format!("/api/events?limit={limit}"),
        };
        let (status, page) = app.get(token, &path).await;
        assert_eq!(status, 200, "{page}");
        events.extend(page["data"].as_array().expect("data").iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) if page["hasMore"] == true => after = Some(next.to_owned()),
            _ => return events,
        }
    }
    panic!("the feed did not end");
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[tokio::test]
async fn purchases_are_told_in_the_feed_to_admins_and_readers_in_order_without_gaps() {
    let feed = open().await;
    let app = &feed.app;
    let buyer = app.register("events-buyer@example.com").await;
    let (_, me) = app.get(&buyer, "/api/auth/me").await;
    let buyer_id = me["id"].as_str().expect("id").to_owned();
    let pack = buy_and_pay(app, &buyer, "credits_card_500").await;
    let monthly = buy_and_pay(app, &buyer, "pro_monthly").await;

    let mut events = Vec::new();
    for _ in 0..100 {
        events = read_all(app, &feed.admin, 100).await;
        if of_type(&events, "credits.granted").len() >= 2
            && !of_type(&events, "subscription.activated").is_empty()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let paid = of_type(&events, "order.paid");
    let paid_orders: Vec<&str> = paid
        .iter()
        .map(|e| e["data"]["order"]["orderId"].as_str().unwrap())
        .collect();
    assert_eq!(
        paid_orders,
        [pack.as_str(), monthly.as_str()],
        "{events:#?}"
    );
    assert_eq!(paid[0]["data"]["order"]["status"], "paid");
    assert_eq!(paid[0]["data"]["order"]["planId"], "credits_card_500");
    assert!(paid[0]["data"]["order"]["amountMinor"].is_i64());
    let granted = of_type(&events, "credits.granted");
    assert_eq!(granted[0]["data"]["transaction"]["orderId"], pack.as_str());
    assert_eq!(granted[0]["data"]["transaction"]["type"], "purchase_grant");
    assert_eq!(
        granted[0]["data"]["transaction"]["amountHundredths"],
        50_000
    );
    assert_eq!(
        granted[1]["data"]["transaction"]["type"],
        "subscription_grant"
    );
    let activated = of_type(&events, "subscription.activated");
    assert_eq!(activated.len(), 1);
    assert_eq!(
        activated[0]["data"]["subscription"]["planId"],
        "pro_monthly"
    );
    assert_eq!(activated[0]["data"]["subscription"]["status"], "active");
    for event in &events {
        assert_eq!(event["data"]["userId"], buyer_id.as_str(), "{event}");
        assert!(event["id"].as_str().unwrap().starts_with("evt_"));
        assert!(event["timestamp"].as_str().unwrap().ends_with('Z'));
    }

    // The reader key sees the same, one at a time: no gaps, no repeats, same order.
    let one_by_one = read_all(app, &feed.reader_key, 1).await;
    let ids = |list: &[Value]| -> Vec<String> {
        list.iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&one_by_one), ids(&events));
    let (status, only) = app
        .get(
            &feed.reader_key,
            "/api/events?type=subscription.activated,order.paid",
        )
        .await;
    assert_eq!(status, 200);
    let kinds: Vec<&str> = only["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["order.paid", "order.paid", "subscription.activated"]
    );
    let last = only["nextCursor"].as_str().unwrap().to_owned();
    let (_, after_last) = app
        .get(
            &feed.reader_key,
            &format!("/api/events?after={last}&type=order.paid"),
        )
        .await;
    assert_eq!(after_last["data"], json!([]));
    assert_eq!(after_last["nextCursor"], Value::Null);
}

#[tokio::test]
async fn the_feed_refuses_other_callers_and_bad_input_with_problems() {
    let feed = open().await;
    let app = &feed.app;
    let buyer = app.register("events-nosy@example.com").await;
    for token in [&feed.credits_key, &buyer] {
        let response = app
            .client
            .get(app.url("/api/events"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403);
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], "forbidden", "{problem}");
    }
    let (status, _) = app.get("", "/api/events").await;
    assert_eq!(status, 401);
    for (query, status, code) in [
        ("after=abc", 400, "invalid_cursor"),
        ("after=-1", 400, "invalid_cursor"),
        ("limit=0", 400, "invalid_pagination"),
        ("limit=501", 400, "invalid_pagination"),
        ("limit=ten", 400, "invalid_pagination"),
        ("type=order.shipped", 422, "unknown_event_type"),
    ] {
        let (got, problem) = app.get(&feed.admin, &format!("/api/events?{query}")).await;
        assert_eq!(
            (got, problem["code"].as_str()),
            (status, Some(code)),
            "{query}"
        );
    }
    let (status, empty) = app.get(&feed.admin, "/api/events").await;
    assert_eq!(status, 200);
    assert_eq!(empty, json!({"data": [], "hasMore": false}));
}

/// A cursor is something the feed handed out: one beyond every event id it ever issued is a
/// 400 `invalid_cursor`, not an empty page a reader would wait on forever; the cursors it
/// issued keep working.
#[tokio::test]
async fn a_cursor_the_feed_never_issued_is_refused() {
    let feed = open().await;
    let app = &feed.app;
    // Nothing handed out yet: no cursor at all is the feed's.
    refused(app, &feed.admin, &["9223372036854775807", "1"]).await;
    let user = app.register("events-cursor@example.com").await;
    let user_id = app.get(&user, "/api/auth/me").await.1["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let body = json!({"amount": "5", "reason": "cursor"});
    let path = format!("/api/admin/users/{user_id}/credits");
    let (status, _) = app.post(&feed.admin, &path, &body, Some("cursor-1")).await;
    assert_eq!(status, 200);
    let (status, page) = app.get(&feed.reader_key, "/api/events").await;
    assert_eq!(status, 200, "{page}");
    let cursor = page["nextCursor"].as_str().expect("a cursor").to_owned();
    let (status, rest) = app
        .get(&feed.reader_key, &format!("/api/events?after={cursor}"))
        .await;
    assert_eq!(
        (status, rest["hasMore"].as_bool()),
        (200, Some(false)),
        "{rest}"
    );
    refused(
        app,
        &feed.reader_key,
        &["9223372036854775807", "1000000000000000"],
    )
    .await;
}

/// Each of `cursors` is a 400 `invalid_cursor`.
async fn refused(app: &TestApp, token: &str, cursors: &[&str]) {
    for forged in cursors {
        let path = format!("/api/events?after={forged}");
        let (status, problem) = app.get(token, &path).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (400, Some("invalid_cursor")),
            "{forged}: {problem}"
        );
    }
}

/// Spends are high volume and opt-in: none is in the feed while no endpoint names
/// `credits.consumed`, nor for an endpoint of every (other) type; once an enabled endpoint
/// names it, each fresh spend is (a replay is not), and `type=credits.consumed` finds it.
#[tokio::test]
async fn spends_are_told_only_while_an_endpoint_opts_in() {
    let feed = open().await;
    let app = &feed.app;
    let buyer = app.register("metered-buyer@example.com").await;
    let (_, me) = app.get(&buyer, "/api/auth/me").await;
    let buyer_id = me["id"].as_str().expect("id").to_owned();
    buy_and_pay(app, &buyer, "credits_card_500").await;
    let body = json!({"name": "spender", "scopes": ["credits:consume"]});
    let (status, made) = app
        .post(&feed.admin, "/api/admin/api-keys", &body, None)
        .await;
    assert_eq!(status, 201, "{made}");
    let spender = made["secret"].as_str().expect("secret").to_owned();
    let spend = |key: &'static str| {
        let spender = spender.clone();
        let body = json!({"userId": buyer_id, "feature": "image"});
        async move {
            let (status, spent) = app
                .post(&spender, "/api/credits/consume", &body, Some(key))
                .await;
            assert_eq!(status, 201, "{spent}");
            spent
        }
    };
    let admin = feed.admin.clone();
    let endpoint = |types: Value| {
        let admin = admin.clone();
        let body = json!({"url": "http://127.0.0.1:9/hook", "eventTypes": types});
        async move {
            let (status, created) = app
                .post(&admin, "/api/admin/webhook-endpoints", &body, None)
                .await;
            assert_eq!(status, 201, "{created}");
        }
    };
    spend("metered-1").await;
    endpoint(json!([])).await;
    spend("metered-2").await;
    endpoint(json!(["credits.consumed"])).await;
    let told = spend("metered-3").await;
    spend("metered-3").await;
    let mut consumed = Vec::new();
    for _ in 0..100 {
        let events = read_all(app, &feed.admin, 100).await;
        consumed = of_type(&events, "credits.consumed")
            .into_iter()
            .cloned()
            .collect();
        if !consumed.is_empty() && !of_type(&events, "credits.granted").is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(consumed.len(), 1, "{consumed:?}");
    let data = &consumed[0]["data"];
    assert_eq!(data["userId"], buyer_id.as_str());
    assert_eq!(data["transaction"]["type"], "consumption");
    assert_eq!(data["transaction"]["feature"], "image");
    assert_eq!(data["transaction"]["id"], told["transactionId"], "{told}");
    let (status, page) = app
        .get(&feed.reader_key, "/api/events?type=credits.consumed")
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["data"].as_array().map(Vec::len), Some(1), "{page}");
}

#[tokio::test]
async fn a_declined_card_and_a_buyers_cancel_are_told_as_they_happened() {
    let feed = open().await;
    let app = &feed.app;
    let buyer = app.register("told@example.com").await;
    let (declined, _) = app
        .open_checkout(&buyer, "credits_card_500", "card_gateway", Some("told-1"))
        .await;
    app.sandbox_action(&declined, "decline", &json!({})).await;
    app.wait_for_status(&buyer, &declined, "failed").await;
    // The sandbox's Decline returns the buyer to the cancel page: it tells the decline.
    let page = app
        .client
        .get(app.url(&format!("/payment-cancel?orderId={declined}")))
        .header("cookie", format!("tally_session={buyer}"))
        .send()
        .await
        .expect("cancel page")
        .text()
        .await
        .expect("page");
    assert!(page.contains("The payment did not go through"), "{page}");
    assert!(page.contains("Your card was declined."), "{page}");
    assert!(!page.contains("You cancelled the checkout"), "{page}");
    let (cancelled, _) = app
        .open_checkout(&buyer, "credits_card_500", "card_gateway", Some("told-2"))
        .await;
    let path = format!("/api/payment/cancel/{cancelled}");
    let (status, answer) = app.post(&buyer, &path, &json!({}), None).await;
    assert_eq!(status, 200, "{answer}");
    let events = read_all(app, &feed.admin, 100).await;
    let failed = of_type(&events, "order.failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["data"]["order"]["orderId"], declined.as_str());
    assert_eq!(
        failed[0]["data"]["reason"], "Your card was declined.",
        "a decline is told with the provider's reason, not as an expired checkout"
    );
    let told: Vec<&Value> = of_type(&events, "order.cancelled");
    assert_eq!(told.len(), 1, "the buyer's cancel is told: {events:#?}");
    assert_eq!(told[0]["data"]["order"]["orderId"], cancelled.as_str());
    assert_eq!(told[0]["data"]["order"]["status"], "cancelled");
    assert!(
        of_type(&events, "order.failed")
            .iter()
            .all(|e| e["data"]["order"]["orderId"] != cancelled.as_str()),
        "the provider's closing of a cancelled checkout fails nothing"
    );
}
