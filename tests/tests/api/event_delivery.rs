//! Host events delivered to webhook endpoints (issue 17, "Delivery"), end to end: an
//! administrator registers a local receiver, a buyer pays for a credits pack through the
//! sandbox, and the receiver gets `order.paid` and `credits.granted` signed per Standard
//! Webhooks (checked with the reference library and the secret from the creation answer);
//! retries keep the `webhook-id`; a rotation sends two signatures; a disabled endpoint gets
//! nothing; redelivery sends again; refused URLs and types are problems.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::delivery::{RetrySchedule, TargetPolicy};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Request, Response, Server};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use tests::{TestApp, spawn_app_with_admin};

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: poem::http::HeaderMap,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON envelope")
    }

    /// Whether the reference library accepts the signature under `secret`.
    fn verifies_with(&self, secret: &str) -> bool {
        standardwebhooks::Webhook::new(secret)
            .expect("a whsec_ secret")
            .verify(self.body.as_bytes(), &self.headers)
            .is_ok()
    }
}

/// A local receiver: answers 500 to the first request of each `webhook-id` when `fail_first`,
/// 204 otherwise; reports every request. Returns its URL.
async fn receiver(fail_first: bool) -> (String, mpsc::UnboundedReceiver<Received>) {
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .expect("bind");
    let address = *acceptor.local_addr()[0].as_socket_addr().expect("address");
    let (tx, rx) = mpsc::unbounded_channel();
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let endpoint = poem::endpoint::make(move |mut request: Request| {
        let tx = tx.clone();
        let seen = seen.clone();
        async move {
            let body = request.take_body().into_string().await.unwrap_or_default();
            let headers = request.headers().clone();
            let id = headers
                .get("webhook-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let first = seen.lock().expect("lock").insert(id);
            let _ = tx.send(Received { headers, body });
            let status = if fail_first && first { 500 } else { 204 };
            Response::builder()
                .status(poem::http::StatusCode::from_u16(status).expect("status"))
                .finish()
        }
    });
    tokio::spawn(Server::new_with_acceptor(acceptor).run(endpoint));
    (format!("http://{address}/hooks"), rx)
}

/// The next request of event type `event_type` (others are kept in `skipped`), within 20 s.
async fn next_of_type(
    rx: &mut mpsc::UnboundedReceiver<Received>,
    event_type: &str,
    skipped: &mut Vec<Received>,
) -> Received {
    let wait = async {
        while let Some(received) = rx.recv().await {
            if received.json()["type"] == event_type {
                return received;
            }
            skipped.push(received);
        }
        panic!("the receiver stopped");
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("no {event_type} delivered within 20 s"))
}

/// An app whose deliveries poll every 50 ms and retry after 300 ms, an administrator's token and
/// a buyer's token.
async fn shop() -> (TestApp, String, String) {
    shop_with(TargetPolicy::development()).await
}

/// [`shop`] with the target policy `policy`.
async fn shop_with(policy: TargetPolicy) -> (TestApp, String, String) {
    let (app, admin) = spawn_app_with_admin(|s| {
        s.webhooks.poll_interval_ms = 50;
        s.webhooks.schedule = RetrySchedule::new(vec![0, 300, 300, 300]).expect("schedule");
        s.webhooks.policy = policy;
    })
    .await;
    let buyer = app.register("buyer@example.com").await;
    (app, admin, buyer)
}

async fn create_endpoint(app: &TestApp, admin: &str, url: &str, types: &[&str]) -> Value {
    let (status, created) = app
        .post(
            admin,
            "/api/admin/webhook-endpoints",
            &json!({"url": url, "eventTypes": types}),
            None,
        )
        .await;
    assert_eq!(status, 201, "{created}");
    created
}

async fn patch(app: &TestApp, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let response = app
        .client
        .patch(app.url(path))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("patch");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Buy the 500-credit card pack and wait until it is paid.
async fn buy_credits(app: &TestApp, buyer: &str, key: &str) -> String {
    let (order, _) = app
        .open_checkout(buyer, "credits_card_500", "card_gateway", Some(key))
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(buyer, &order, "paid").await;
    order
}

/// The endpoint's deliveries, once every one of them is `status` (within 10 s).
async fn deliveries_once(app: &TestApp, admin: &str, endpoint: &str, status: &str) -> Vec<Value> {
    let mut last = Value::Null;
    for _ in 0..200 {
        let (code, page) = app
            .get(
                admin,
                &format!("/api/admin/webhook-endpoints/{endpoint}/deliveries"),
            )
            .await;
        assert_eq!(code, 200, "{page}");
        let deliveries = page["deliveries"].as_array().cloned().unwrap_or_default();
        if !deliveries.is_empty() && deliveries.iter().all(|d| d["status"] == status) {
            return deliveries;
        }
        last = page;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("deliveries never all {status}: {last}");
}

#[tokio::test]
async fn a_paid_credits_pack_reaches_the_endpoint_signed_with_the_secret_shown_at_creation() {
    let (app, admin, buyer) = shop().await;
    let (url, mut rx) = receiver(false).await;
    let created = create_endpoint(&app, &admin, &url, &[]).await;
    let secret = created["secret"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let endpoint = created["id"].as_str().expect("id").to_owned();
    assert!(endpoint.starts_with("we_"), "{endpoint}");

    let order = buy_credits(&app, &buyer, "delivery-1").await;
    let mut skipped = Vec::new();
    for event_type in ["order.paid", "credits.granted"] {
        let received = next_of_type(&mut rx, event_type, &mut skipped).await;
        assert_eq!(received.header("content-type"), "application/json");
        assert!(
            received.verifies_with(&secret),
            "{event_type}: signature refused"
        );
        let envelope = received.json();
        assert_eq!(envelope["id"], received.header("webhook-id"));
        assert!(envelope["timestamp"].is_string(), "{envelope}");
        if event_type == "order.paid" {
            assert!(envelope.to_string().contains(&order), "{envelope}");
        }
    }
    let deliveries = deliveries_once(&app, &admin, &endpoint, "succeeded").await;
    for delivery in &deliveries {
        assert_eq!(delivery["lastStatusCode"], 204, "{delivery}");
        assert_eq!(delivery["attempts"], 1, "{delivery}");
        assert!(delivery["lastLatencyMs"].is_i64(), "{delivery}");
    }
    // The list never shows the secret.
    let (_, list) = app.get(&admin, "/api/admin/webhook-endpoints").await;
    assert!(!list.to_string().contains(&secret), "{list}");
    assert_eq!(list["endpoints"][0]["id"], endpoint.as_str());
}

#[tokio::test]
async fn a_receiver_that_answers_500_gets_the_same_webhook_id_again() {
    let (app, admin, buyer) = shop().await;
    let (url, mut rx) = receiver(true).await;
    let created = create_endpoint(&app, &admin, &url, &["order.paid"]).await;
    let endpoint = created["id"].as_str().expect("id").to_owned();
    buy_credits(&app, &buyer, "delivery-2").await;
    let mut skipped = Vec::new();
    let first = next_of_type(&mut rx, "order.paid", &mut skipped).await;
    let again = next_of_type(&mut rx, "order.paid", &mut skipped).await;
    assert_eq!(first.header("webhook-id"), again.header("webhook-id"));
    assert_eq!(first.body, again.body, "the envelope is sent verbatim");
    assert!(
        skipped.is_empty(),
        "only order.paid is subscribed: {skipped:?}"
    );
    let deliveries = deliveries_once(&app, &admin, &endpoint, "succeeded").await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    assert_eq!(deliveries[0]["attempts"], 2);
    assert_eq!(deliveries[0]["lastStatusCode"], 204);
}

#[tokio::test]
async fn after_a_rotation_both_the_old_and_the_new_secret_verify() {
    let (app, admin, buyer) = shop().await;
    let (url, mut rx) = receiver(false).await;
    let created = create_endpoint(&app, &admin, &url, &["credits.granted"]).await;
    let old = created["secret"].as_str().expect("secret").to_owned();
    let endpoint = created["id"].as_str().expect("id").to_owned();
    let (status, rotated) = app
        .post(
            &admin,
            &format!("/api/admin/webhook-endpoints/{endpoint}/rotate-secret"),
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["secret"].as_str().expect("secret").to_owned();
    assert_ne!(old, new);
    assert!(rotated["previousSecretExpiresAt"].is_string(), "{rotated}");
    buy_credits(&app, &buyer, "delivery-3").await;
    let received = next_of_type(&mut rx, "credits.granted", &mut Vec::new()).await;
    let signatures: Vec<&str> = received.header("webhook-signature").split(' ').collect();
    assert_eq!(signatures.len(), 2, "{signatures:?}");
    assert!(signatures.iter().all(|s| s.starts_with("v1,")));
    assert!(received.verifies_with(&new));
    assert!(received.verifies_with(&old));
}

#[tokio::test]
async fn a_disabled_endpoint_gets_nothing_until_an_event_is_redelivered_to_it() {
    let (app, admin, buyer) = shop().await;
    let (quiet_url, mut quiet_rx) = receiver(false).await;
    let (url, mut rx) = receiver(false).await;
    let quiet = create_endpoint(&app, &admin, &quiet_url, &[]).await;
    let quiet_id = quiet["id"].as_str().expect("id").to_owned();
    create_endpoint(&app, &admin, &url, &[]).await;
    let (status, disabled) = patch(
        &app,
        &admin,
        &format!("/api/admin/webhook-endpoints/{quiet_id}"),
        &json!({"enabled": false}),
    )
    .await;
    assert_eq!(status, 200, "{disabled}");
    assert_eq!(disabled["enabled"], false);

    buy_credits(&app, &buyer, "delivery-4").await;
    let mut skipped = Vec::new();
    let paid = next_of_type(&mut rx, "order.paid", &mut skipped).await;
    next_of_type(&mut rx, "credits.granted", &mut skipped).await;
    // Several polls later, still nothing for the disabled endpoint.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        quiet_rx.try_recv().is_err(),
        "a disabled endpoint got a delivery"
    );

    // Redelivery of that event to it (it has no delivery yet), once enabled again.
    let event_id = paid.header("webhook-id").to_owned();
    let (status, _) = patch(
        &app,
        &admin,
        &format!("/api/admin/webhook-endpoints/{quiet_id}"),
        &json!({"enabled": true}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, scheduled) = app
        .post(
            &admin,
            &format!("/api/admin/webhook-endpoints/{quiet_id}/redeliver"),
            &json!({"eventId": event_id}),
            None,
        )
        .await;
    assert_eq!(status, 202, "{scheduled}");
    let redelivered = next_of_type(&mut quiet_rx, "order.paid", &mut Vec::new()).await;
    assert_eq!(redelivered.header("webhook-id"), event_id);
    assert_eq!(redelivered.body, paid.body);

    // And by delivery id, once it has succeeded: sent again.
    let deliveries = deliveries_once(&app, &admin, &quiet_id, "succeeded").await;
    let delivery = deliveries[0]["id"].as_str().expect("delivery id");
    let (status, again) = app
        .post(
            &admin,
            &format!("/api/admin/webhook-endpoints/{quiet_id}/deliveries/{delivery}/redeliver"),
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 202, "{again}");
    let resent = next_of_type(&mut quiet_rx, "order.paid", &mut Vec::new()).await;
    assert_eq!(resent.header("webhook-id"), event_id);
}

#[tokio::test]
async fn refused_urls_unknown_types_and_non_admins_get_problems() {
    let (app, admin, buyer) = shop().await;
    for (body, code) in [
        (json!({"url": "ftp://127.0.0.1/x"}), "invalid_webhook_url"),
        (
            json!({"url": "http://169.254.169.254/latest"}),
            "invalid_webhook_url",
        ),
        (json!({"url": "not a url"}), "invalid_webhook_url"),
        (
            json!({"url": "http://127.0.0.1:9/x", "eventTypes": ["order.shipped"]}),
            "unknown_event_type",
        ),
    ] {
        let (status, problem) = app
            .post(&admin, "/api/admin/webhook-endpoints", &body, None)
            .await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (422, Some(code)),
            "{body}: {problem}"
        );
    }
    let (status, problem) = app
        .post(
            &buyer,
            "/api/admin/webhook-endpoints",
            &json!({"url": "http://127.0.0.1:9/x"}),
            None,
        )
        .await;
    assert_eq!((status, problem["code"].as_str()), (403, Some("forbidden")));
    let (status, problem) = patch(
        &app,
        &admin,
        "/api/admin/webhook-endpoints/we_missing",
        &json!({"enabled": false}),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("webhook_endpoint_not_found"))
    );
    let created = create_endpoint(&app, &admin, "http://127.0.0.1:9/x", &["order.paid"]).await;
    let id = created["id"].as_str().expect("id");
    let (status, problem) = app
        .post(
            &admin,
            &format!("/api/admin/webhook-endpoints/{id}/redeliver"),
            &json!({"eventId": "evt_missing"}),
            None,
        )
        .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("webhook_delivery_not_found"))
    );
    let deleted = app
        .client
        .delete(app.url(&format!("/api/admin/webhook-endpoints/{id}")))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), 204);
    let (_, list) = app.get(&admin, "/api/admin/webhook-endpoints").await;
    assert_eq!(list["endpoints"], json!([]));
}

#[tokio::test]
async fn the_production_policy_refuses_http_and_private_targets_unless_the_operator_allows_them() {
    let (app, admin, _) = shop_with(TargetPolicy::production(false)).await;
    for url in [
        "http://example.com/hook",
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://10.0.0.7/hook",
        "https://[::1]/hook",
        "https://[::ffff:192.168.1.1]/hook",
        "https://100.64.0.1/hook",
    ] {
        let (status, problem) = app
            .post(
                &admin,
                "/api/admin/webhook-endpoints",
                &json!({"url": url}),
                None,
            )
            .await;
        assert_eq!(status, 422, "{url}: {problem}");
        assert_eq!(problem["code"], "invalid_webhook_url", "{url}");
    }
    let (app, admin, _) = shop_with(TargetPolicy::production(true)).await;
    create_endpoint(&app, &admin, "https://127.0.0.1:9/hook", &[]).await;
    let (status, problem) = app
        .post(
            &admin,
            "/api/admin/webhook-endpoints",
            &json!({"url": "http://127.0.0.1:9/hook"}),
            None,
        )
        .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("invalid_webhook_url"))
    );
    let (status, problem) = app
        .post(
            &admin,
            "/api/admin/webhook-endpoints",
            &json!({"url": "https://169.254.169.254/latest/meta-data"}),
            None,
        )
        .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("invalid_webhook_url"))
    );
}

#[tokio::test]
async fn every_endpoint_change_is_in_the_audit_log_without_its_secret() {
    let (app, admin, _) = shop().await;
    let (url, _rx) = receiver(false).await;
    let created = create_endpoint(&app, &admin, &url, &["credits.granted"]).await;
    let endpoint = created["id"].as_str().expect("id").to_owned();
    let path = format!("/api/admin/webhook-endpoints/{endpoint}");
    let (status, _) = patch(&app, &admin, &path, &json!({"enabled": false})).await;
    assert_eq!(status, 200);
    let (status, rotated) = app
        .post(&admin, &format!("{path}/rotate-secret"), &json!({}), None)
        .await;
    assert_eq!(status, 200, "{rotated}");
    let deleted = app
        .client
        .delete(app.url(&path))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status().as_u16(), 204);
    let (status, log) = app.get(&admin, "/api/admin/audit").await;
    assert_eq!(status, 200, "{log}");
    let items = log["items"].as_array().expect("items");
    let actions: Vec<&str> = items.iter().filter_map(|e| e["action"].as_str()).collect();
    assert_eq!(
        actions,
        [
            "webhook_endpoint.deleted",
            "webhook_endpoint.rotated",
            "webhook_endpoint.updated",
            "webhook_endpoint.created"
        ]
    );
    assert!(items.iter().all(|e| e["objectId"] == endpoint.as_str()));
    assert!(
        items[2]["before"]
            .as_str()
            .expect("before")
            .contains("true")
    );
    assert!(items[2]["after"].as_str().expect("after").contains("false"));
    let text = log.to_string();
    for secret in [&created["secret"], &rotated["secret"]] {
        assert!(
            !text.contains(secret.as_str().expect("secret")),
            "a secret is logged"
        );
    }
}
