//! Metrics and the OpenAPI document.

use std::path::PathBuf;

use domain::{Currency, ProviderId};
use serde_json::json;

use crate::helpers::{Answer, bearer, paid, spawn_app};

#[tokio::test]
async fn the_metrics_endpoint_exposes_requests_orders_webhooks_and_credits() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let order = app
        .initiate(&token, "credits-100", "card_gateway", None)
        .await;
    let order_id = order.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-metrics",
        vec![paid(&order_id, 999, Currency::Usd)],
    )
    .await;
    let key = app.api_key(&["credits:consume"]).await;
    Answer::of(
        app.client
            .post("/api/credits/consume")
            .header("authorization", bearer(&key))
            .header("idempotency-key", "m-1")
            .body_json(&json!({"userId": user_id, "feature": "chat"}))
            .send()
            .await,
    )
    .await
    .expect(201, None);
    let answer = Answer::of(app.client.get("/metrics").send().await).await;
    answer.expect(200, None);
    let text = answer.body.as_str().unwrap();
    for name in [
        "http_requests_total",
        "http_request_duration_seconds_bucket",
        "tally_orders_total{status=\"pending\"}",
        "tally_webhooks_total{provider=\"card_gateway\",result=\"applied\",source=\"delivery\"}",
        "tally_orders_total{status=\"paid\"}",
        "tally_credits_granted_hundredths_total",
        "tally_credits_consumed_hundredths_total",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert!(text.contains("route=\"/api/payment/initiate\""), "{text}");
}

fn committed_spec() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn docs_openapi_json_matches_the_code() {
    let generated = format!("{}\n", http_api::openapi_json());
    let path = committed_spec();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json is out of date with the code; regenerate it with\n    \
         UPDATE_OPENAPI=1 cargo test -p http-api openapi\nand commit the result"
    );
}

#[tokio::test]
async fn the_served_openapi_document_documents_every_endpoint_and_the_docs_page_loads() {
    let app = spawn_app();
    let answer = Answer::of(app.client.get("/api/openapi.json").send().await).await;
    answer.expect(200, None);
    let paths = answer.body["paths"].as_object().unwrap();
    for path in [
        "/api/payment/initiate",
        "/api/payment/query/{orderId}",
        "/api/payment/webhook/{provider}",
        "/api/payment/cancel/{orderId}",
        "/api/credits/balance",
        "/api/credits/transactions",
        "/api/credits/status",
        "/api/credits/consume",
        "/api/credits/reservations",
        "/api/credits/reservations/{id}/settle",
        "/api/credits/reservations/{id}/release",
        "/api/plans",
        "/api/orders",
        "/api/admin/plans",
        "/api/admin/plans/{id}",
        "/api/admin/plans/{id}/hide",
        "/api/admin/plans/{id}/unhide",
        "/api/admin/plans/reorder",
        "/api/admin/plans/import",
        "/api/admin/api-keys",
        "/api/admin/api-keys/{id}",
        "/api/auth/register",
        "/api/auth/login",
        "/api/auth/logout",
        "/api/auth/me",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(paths.contains_key(path), "{path} is not documented");
    }
    let initiate = &paths["/api/payment/initiate"]["post"]["responses"];
    for status in [
        "201", "400", "401", "404", "409", "422", "429", "500", "502", "503",
    ] {
        assert!(
            initiate.get(status).is_some(),
            "initiate does not document {status}"
        );
    }
    assert!(
        initiate["402"].is_null(),
        "only the statuses an endpoint answers are documented"
    );
    let docs = app.client.get("/api/docs").send().await;
    docs.assert_status_is_ok();
}
