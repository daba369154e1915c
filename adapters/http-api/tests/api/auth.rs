//! `/api/auth/*`.

use serde_json::json;

use crate::helpers::{Answer, bearer, spawn_app};

#[tokio::test]
async fn registering_signs_in_and_sets_an_http_only_session_cookie() {
    let app = spawn_app();
    let answer = Answer::of(
        app.client
            .post("/api/auth/register")
            .body_json(&json!({"email": "Ada@Example.com", "password": "correct horse"}))
            .send()
            .await,
    )
    .await;
    answer.expect(201, None);
    assert_eq!(answer.body["user"]["email"], "ada@example.com");
    assert_eq!(answer.body["user"]["role"], "user");
    assert_eq!(answer.body["expiresAt"], "2026-01-02T00:00:00.000Z");
    let token = answer.body["token"].as_str().unwrap();
    let cookie = answer.header("set-cookie").unwrap();
    assert!(
        cookie.starts_with(&format!("tally_session={token};")),
        "{cookie}"
    );
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=86400"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "secure_cookies is off in tests: {cookie}"
    );
}

#[tokio::test]
async fn registration_refuses_taken_and_invalid_addresses() {
    let app = spawn_app();
    app.register("ada@example.com").await;
    let register = |email: &'static str, password: &'static str| {
        let client = &app.client;
        async move {
            Answer::of(
                client
                    .post("/api/auth/register")
                    .body_json(&json!({"email": email, "password": password}))
                    .send()
                    .await,
            )
            .await
        }
    };
    register("ada@example.com", "correct horse")
        .await
        .expect(409, Some("email_taken"));
    let invalid = register("not-an-address", "correct horse").await;
    invalid.expect(422, Some("validation_failed"));
    assert_eq!(invalid.body["errors"][0]["field"], "email");
    let short = register("bob@example.com", "short").await;
    short.expect(422, Some("validation_failed"));
    assert_eq!(short.body["errors"][0]["field"], "password");
}

#[tokio::test]
async fn login_me_and_logout_work_and_wrong_credentials_are_401() {
    let app = spawn_app();
    app.register("ada@example.com").await;
    let login = |password: &'static str| {
        let client = &app.client;
        async move {
            Answer::of(
                client
                    .post("/api/auth/login")
                    .body_json(&json!({"email": "ada@example.com", "password": password}))
                    .send()
                    .await,
            )
            .await
        }
    };
    login("wrong password")
        .await
        .expect(401, Some("invalid_credentials"));
    let signed_in = login("correct horse").await;
    signed_in.expect(200, None);
    assert!(signed_in.header("set-cookie").is_some());
    let token = signed_in.body["token"].as_str().unwrap().to_owned();

    let me = Answer::of(
        app.client
            .get("/api/auth/me")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await;
    me.expect(200, None);
    assert_eq!(me.body["email"], "ada@example.com");

    let logout = Answer::of(
        app.client
            .post("/api/auth/logout")
            .header("cookie", format!("tally_session={token}"))
            .send()
            .await,
    )
    .await;
    logout.expect(204, None);
    assert!(logout.header("set-cookie").unwrap().contains("Max-Age=0"));
    Answer::of(
        app.client
            .get("/api/auth/me")
            .header("authorization", bearer(&token))
            .send()
            .await,
    )
    .await
    .expect(401, Some("unauthorized"));
    Answer::of(app.client.post("/api/auth/logout").send().await)
        .await
        .expect(204, None);
}

#[tokio::test]
async fn an_api_key_is_not_a_signed_in_user() {
    let app = spawn_app();
    let key = app.api_key(&["credits:read"]).await;
    Answer::of(
        app.client
            .get("/api/auth/me")
            .header("x-api-key", key.as_str())
            .send()
            .await,
    )
    .await
    .expect(403, Some("forbidden"));
}
