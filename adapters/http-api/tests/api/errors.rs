//! Errors and limits: every error is problem JSON, bodies are limited, clients are rate limited.

use std::sync::atomic::Ordering;

use application::sign_up::{SignUpPolicy, SignUpRate};
use http_api::{ApiSettings, RateLimit};
use serde_json::json;

use crate::helpers::{
    Answer, bearer, service_with, settings, spawn_app, spawn_app_of, spawn_app_with,
};

#[tokio::test]
async fn malformed_json_is_a_400_problem() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let cases: [(&str, &str); 4] = [
        ("application/json", "{\"planId\": "),
        ("application/json", "{\"planId\": \"credits-100\"}"),
        (
            "application/json",
            "{\"planId\": [\"x\"], \"provider\": \"mor_a\"}",
        ),
        ("text/plain", "planId=credits-100"),
    ];
    for (content_type, body) in cases {
        let answer = Answer::of(
            app.client
                .post("/api/payment/initiate")
                .header("authorization", bearer(&token))
                .content_type(content_type)
                .body(body)
                .send()
                .await,
        )
        .await;
        assert_eq!(answer.status.as_u16(), 400, "{body}: {}", answer.body);
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json")
        );
        let code = answer.body["code"].as_str().unwrap();
        assert!(
            ["validation_failed", "bad_request"].contains(&code),
            "{code}"
        );
    }
}

#[tokio::test]
async fn strings_over_their_length_limit_are_refused() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let answer = Answer::of(
        app.client
            .post("/api/payment/initiate")
            .header("authorization", bearer(&token))
            .body_json(&json!({"planId": "p".repeat(65), "provider": "card_gateway"}))
            .send()
            .await,
    )
    .await;
    answer.expect(400, Some("validation_failed"));
}

#[tokio::test]
async fn a_json_body_over_64_kib_is_a_413_problem() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    let big = format!("{{\"planId\": \"{}\"}}", "x".repeat(70 * 1024));
    Answer::of(
        app.client
            .post("/api/payment/initiate")
            .header("authorization", bearer(&token))
            .content_type("application/json")
            .body(big.clone())
            .send()
            .await,
    )
    .await
    .expect(413, Some("payload_too_large"));
    Answer::of(
        app.client
            .post("/api/payment/initiate")
            .header("authorization", bearer(&token))
            .header("content-length", big.len().to_string())
            .content_type("application/json")
            .body(big)
            .send()
            .await,
    )
    .await
    .expect(413, Some("payload_too_large"));
}

#[tokio::test]
async fn unknown_paths_and_methods_are_problems_too() {
    let app = spawn_app();
    Answer::of(app.client.get("/api/nothing-here").send().await)
        .await
        .expect(404, Some("not_found"));
    Answer::of(app.client.delete("/api/plans").send().await)
        .await
        .expect(405, Some("method_not_allowed"));
}

#[tokio::test]
async fn every_response_carries_a_request_id_and_a_sane_client_id_is_kept() {
    let app = spawn_app();
    let kept = Answer::of(
        app.client
            .get("/healthz")
            .header("x-request-id", "client-abc.123")
            .send()
            .await,
    )
    .await;
    assert_eq!(kept.header("x-request-id"), Some("client-abc.123"));
    let replaced = Answer::of(
        app.client
            .get("/healthz")
            .header("x-request-id", "no spaces allowed")
            .send()
            .await,
    )
    .await;
    let id = replaced.header("x-request-id").unwrap();
    assert_ne!(id, "no spaces allowed");
    let other = Answer::of(app.client.get("/healthz").send().await).await;
    assert_ne!(other.header("x-request-id"), Some(id));
}

#[tokio::test]
async fn sign_in_and_initiate_are_rate_limited_per_client_with_retry_after() {
    let tight = RateLimit::per_minute(1.try_into().unwrap(), 2.try_into().unwrap());
    let app = spawn_app_with(ApiSettings {
        sign_in_limit: tight,
        initiate_limit: tight,
        ..settings()
    });
    let login = |client_ip: &'static str| {
        let client = &app.client;
        async move {
            Answer::of(
                client
                    .post("/api/auth/login")
                    .header("x-forwarded-for", client_ip)
                    .body_json(&json!({"email": "ada@example.com", "password": "wrong password"}))
                    .send()
                    .await,
            )
            .await
        }
    };
    login("203.0.113.1")
        .await
        .expect(401, Some("invalid_credentials"));
    login("203.0.113.1")
        .await
        .expect(401, Some("invalid_credentials"));
    let limited = login("203.0.113.1").await;
    limited.expect(429, Some("rate_limited"));
    let retry_after: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(limited.body["retryAfterSeconds"], retry_after);
    login("203.0.113.2")
        .await
        .expect(401, Some("invalid_credentials"));

    let (_, token) = app.register("ada@example.com").await;
    for _ in 0..2 {
        app.initiate(&token, "lifetime", "card_gateway", None)
            .await
            .expect(201, None);
    }
    app.initiate(&token, "lifetime", "card_gateway", None)
        .await
        .expect(429, Some("rate_limited"));
}

#[tokio::test]
async fn readiness_follows_the_probe() {
    let app = spawn_app();
    Answer::of(app.client.get("/healthz").send().await)
        .await
        .expect(200, None);
    Answer::of(app.client.get("/readyz").send().await)
        .await
        .expect(200, None);
    app.ready.0.store(false, Ordering::SeqCst);
    Answer::of(app.client.get("/readyz").send().await)
        .await
        .expect(503, None);
}

#[tokio::test]
async fn more_than_100_header_fields_are_a_431_problem() {
    let app = spawn_app();
    let mut request = app.client.get("/healthz");
    for i in 0..300 {
        request = request.header(format!("x-filler-{i}"), "1");
    }
    let answer = Answer::of(request.send().await).await;
    answer.expect(431, Some("request_header_fields_too_large"));
    assert!(
        answer.body["detail"].as_str().unwrap().contains("100"),
        "{}",
        answer.body
    );
    let mut request = app.client.get("/healthz");
    for i in 0..4 {
        request = request.header(format!("x-filler-{i}"), "v".repeat(5000));
    }
    Answer::of(request.send().await)
        .await
        .expect(431, Some("request_header_fields_too_large"));
}

#[tokio::test]
async fn the_header_limit_middleware_answers_problem_json_around_any_endpoint() {
    use poem::EndpointExt;
    let client = poem::test::TestClient::new(
        poem::endpoint::make_sync(|_| "a page").with(http_api::HeaderLimit),
    );
    let mut request = client.get("/pricing");
    for i in 0..=http_api::MAX_REQUEST_HEADERS {
        request = request.header(format!("x-filler-{i}"), "1");
    }
    let answer = Answer::of(request.send().await).await;
    assert_eq!(answer.status.as_u16(), 431);
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(answer.body["code"], "request_header_fields_too_large");
    let fine = Answer::of(client.get("/pricing").send().await).await;
    assert_eq!(fine.status.as_u16(), 200);
}

/// Header values poem-openapi cannot read as text: an emoji (UTF-8), a Latin-1 byte.
fn unreadable_keys() -> [poem::http::HeaderValue; 2] {
    [
        poem::http::HeaderValue::from_bytes("key-\u{1F511}".as_bytes()).unwrap(),
        poem::http::HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    ]
}

#[tokio::test]
async fn an_unreadable_idempotency_key_at_initiate_is_refused_naming_the_rule() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    for key in unreadable_keys() {
        let answer = Answer::of(
            app.client
                .post("/api/payment/initiate")
                .header("authorization", bearer(&token))
                .header("idempotency-key", key.clone())
                .body_json(&json!({"planId": "credits-100", "provider": "card_gateway"}))
                .send()
                .await,
        )
        .await;
        answer.expect(400, Some("validation_failed"));
        let detail = answer.body["detail"].as_str().unwrap();
        assert!(
            detail.contains("Idempotency-Key") && detail.contains("printable ASCII"),
            "{key:?}: {detail}"
        );
    }
}

#[tokio::test]
async fn an_unreadable_idempotency_key_at_consume_and_reserve_is_refused_naming_the_rule() {
    let app = spawn_app();
    let (user_id, _) = app.register("ada@example.com").await;
    let key = app.api_key(&["credits:consume"]).await;
    for path in ["/api/credits/consume", "/api/credits/reservations"] {
        for idempotency in unreadable_keys() {
            let answer = Answer::of(
                app.client
                    .post(path)
                    .header("authorization", bearer(&key))
                    .header("idempotency-key", idempotency.clone())
                    .body_json(&json!({"userId": user_id, "feature": "image"}))
                    .send()
                    .await,
            )
            .await;
            answer.expect(400, Some("validation_failed"));
            let detail = answer.body["detail"].as_str().unwrap();
            assert!(
                detail.contains("printable ASCII") && !detail.contains("required"),
                "{path} {idempotency:?}: {detail}"
            );
        }
    }
}

#[tokio::test]
async fn an_address_with_a_bidirectional_override_is_refused_at_registration() {
    let app = spawn_app();
    for email in [
        "ada\u{202E}moc.liame@example.com",
        "ada\u{200B}@example.com",
    ] {
        let answer = Answer::of(
            app.client
                .post("/api/auth/register")
                .body_json(&json!({"email": email, "password": "correct horse"}))
                .send()
                .await,
        )
        .await;
        answer.expect(422, Some("validation_failed"));
        assert_eq!(
            answer.body["errors"][0]["field"], "email",
            "{}",
            answer.body
        );
    }
}

#[tokio::test]
async fn undecodable_query_and_path_values_are_problems() {
    let app = spawn_app();
    let (_, token) = app.register("ada@example.com").await;
    for path in [
        "/api/orders?page=%FF%FE",
        "/api/orders?limit=%00",
        "/api/payment/query/%FF%FE",
        "/api/payment/query/a%00b",
    ] {
        let answer = Answer::of(
            app.client
                .get(path)
                .header("authorization", bearer(&token))
                .send()
                .await,
        )
        .await;
        assert!(
            answer.status.is_client_error(),
            "{path}: {} {}",
            answer.status,
            answer.body
        );
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json"),
            "{path}: {}",
            answer.body
        );
    }
}

#[tokio::test]
async fn registration_follows_the_services_sign_up_policy_per_address_and_per_domain() {
    let tight = SignUpRate {
        per_hour: 1.try_into().unwrap(),
        burst: 2.try_into().unwrap(),
    };
    let policy = SignUpPolicy {
        per_address: tight,
        per_domain: SignUpRate {
            burst: 3.try_into().unwrap(),
            ..tight
        },
        ..SignUpPolicy::default()
    };
    let app = spawn_app_of(settings(), service_with(policy));
    let register = |client_ip: &'static str, email: &'static str| {
        let client = &app.client;
        async move {
            Answer::of(
                client
                    .post("/api/auth/register")
                    .header("x-forwarded-for", client_ip)
                    .body_json(&json!({"email": email, "password": "password123"}))
                    .send()
                    .await,
            )
            .await
        }
    };
    register("203.0.113.1", "a@one.example")
        .await
        .expect(201, None);
    register("203.0.113.1", "b@one.example")
        .await
        .expect(201, None);
    let limited = register("203.0.113.1", "c@two.example").await;
    limited.expect(429, Some("rate_limited"));
    let retry_after: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((3000..=3600).contains(&retry_after), "{retry_after}");
    assert_eq!(limited.body["retryAfterSeconds"], retry_after);
    register("203.0.113.2", "d@ONE.example")
        .await
        .expect(201, None);
    let domain = register("203.0.113.3", "e@one.example").await;
    domain.expect(429, Some("rate_limited"));
    assert!(
        domain.body["detail"]
            .as_str()
            .unwrap()
            .contains("e-mail domain"),
        "{:?}",
        domain.body
    );
    register("203.0.113.3", "e@two.example")
        .await
        .expect(201, None);
}
