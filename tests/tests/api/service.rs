//! The service as `tally serve` runs it: health, readiness, the API documents, the sandbox.

use tests::spawn_app;

#[tokio::test]
async fn the_service_starts_on_the_embedded_default_and_answers_health_and_readiness() {
    let app = spawn_app().await;
    let health = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let spec = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(spec.status(), 200);
    let sandbox = app.client.get(app.url("/sandbox")).send().await.unwrap();
    assert_eq!(sandbox.status(), 200);
    assert!(
        sandbox
            .text()
            .await
            .unwrap()
            .contains("no real money moves")
    );
}

#[tokio::test]
async fn the_public_plan_list_is_the_shipped_catalog_without_hidden_plans() {
    let app = spawn_app().await;
    let plans: serde_json::Value = app
        .client
        .get(app.url("/api/plans?locale=zh-CN"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = plans.to_string();
    assert!(text.contains("credits_card_500"));
    assert!(
        !text.contains("pro_monthly_legacy"),
        "hidden plans are not listed"
    );
}

#[tokio::test]
async fn too_many_header_fields_are_a_431_problem_on_every_path() {
    let app = spawn_app().await;
    for path in ["/api/plans", "/pricing", "/sandbox"] {
        let mut request = app.client.get(app.url(path));
        for i in 0..300 {
            request = request.header(format!("x-filler-{i}"), "1");
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), 431, "{path}");
        assert_eq!(
            answer.headers()["content-type"],
            "application/problem+json",
            "{path}"
        );
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["code"], "request_header_fields_too_large", "{path}");
    }
}
