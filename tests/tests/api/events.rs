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
