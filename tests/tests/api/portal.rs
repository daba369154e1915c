//! The customer portal: `POST /api/portal-sessions` (an API key with `billing:write`) makes a
//! single-use link; opening it starts a browser session that reaches the user's billing and
//! nothing else; a used link is a 410 page, never the sign-in page.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

const RETURN: &str = "http://localhost:3000/account";

async fn user_id(app: &TestApp, token: &str) -> String {
    let (_, me) = app.get(token, "/api/auth/me").await;
    me["id"].as_str().expect("id").to_owned()
}

async fn portal_link(app: &TestApp, key: &str, user: &str) -> (u16, Value) {
    let body = json!({"userId": user, "returnUrl": RETURN, "locale": "zh-CN"});
    app.post(key, "/api/portal-sessions", &body, None).await
}

/// Open `url` as a browser would: the session cookie it sets.
async fn open(app: &TestApp, url: &str) -> (u16, Option<String>, Option<String>) {
    let answer = app.client.get(url).send().await.unwrap();
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let cookie = header("set-cookie").and_then(|c| {
        c.split(';')
            .next()
            .and_then(|pair| pair.strip_prefix("tally_session="))
            .map(str::to_owned)
    });
    (answer.status().as_u16(), header("location"), cookie)
}

async fn with_cookie(app: &TestApp, session: &str, path: &str) -> (u16, String) {
    let answer = app
        .client
        .get(app.url(path))
        .header("cookie", format!("tally_session={session}"))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

#[tokio::test]
async fn only_a_key_with_billing_write_makes_portal_links_for_existing_users_and_allowed_urls() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = app.register("portal-scope@example.com").await;
    let user = user_id(&app, &buyer).await;
    let reader = app.api_key(&admin, &["credits:read"]).await;
    let billing = app.api_key(&admin, &["billing:write"]).await;
    for (token, who) in [
        (&reader, "a key without the scope"),
        (&buyer, "the user"),
        (&admin, "an administrator"),
    ] {
        let (status, problem) = portal_link(&app, token, &user).await;
        assert_eq!(status, 403, "{who}: {problem}");
        assert_eq!(problem["code"], "forbidden");
    }
    let (status, problem) = portal_link(&app, &billing, "usr_nobody").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("user_not_found"))
    );
    let body = json!({"userId": user, "returnUrl": "https://evil.test/account"});
    let (status, problem) = app
        .post(&billing, "/api/portal-sessions", &body, None)
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["code"], "return_url_not_allowed");
    assert!(problem["detail"].as_str().unwrap().starts_with("returnUrl"));
    let (status, link) = portal_link(&app, &billing, &user).await;
    assert_eq!(status, 201, "{link}");
    assert!(
        link["url"]
            .as_str()
            .unwrap()
            .starts_with(&app.url("/portal/"))
    );
    assert!(link["expiresAt"].as_str().is_some());
}

#[tokio::test]
async fn a_portal_link_opens_once_into_the_dashboard_and_then_says_it_is_gone() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = app.register("portal-once@example.com").await;
    let user = user_id(&app, &buyer).await;
    let billing = app.api_key(&admin, &["billing:write"]).await;
    let (_, link) = portal_link(&app, &billing, &user).await;
    let url = link["url"].as_str().unwrap();
    let (status, location, session) = open(&app, url).await;
    assert_eq!(status, 303);
    assert_eq!(location.as_deref(), Some("/dashboard?lang=zh-CN"));
    let session = session.expect("a session cookie");
    assert!(session.starts_with("tlp_"));
    let (status, page) = with_cookie(&app, &session, "/dashboard").await;
    assert_eq!(status, 200);
    assert!(page.contains("data-testid=\"portal-back\""), "{page}");
    assert!(page.contains(RETURN));
    // Used: a page saying so, never the sign-in page.
    let (status, location, cookie) = open(&app, url).await;
    assert_eq!((status, location, cookie), (410, None, None));
    let gone = app
        .client
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!gone.contains("action=\"/signin\""), "{gone}");
    let (status, _, _) = open(&app, &app.url("/portal/not-a-link")).await;
    assert_eq!(status, 410);
}

#[tokio::test]
async fn a_portal_session_reaches_its_users_billing_and_nothing_else() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let buyer = app.register("portal-reach@example.com").await;
    let other = app.register("portal-other@example.com").await;
    let other_id = user_id(&app, &other).await;
    let billing = app.api_key(&admin, &["billing:write"]).await;
    // Even a link made for an administrator opens no console.
    let admin_id = user_id(&app, &admin).await;
    for user in [user_id(&app, &buyer).await, admin_id] {
        let (_, link) = portal_link(&app, &billing, &user).await;
        let (_, _, session) = open(&app, link["url"].as_str().unwrap()).await;
        let session = session.unwrap();
        for path in [
            "/dashboard",
            "/pricing",
            "/api/orders",
            "/api/credits/balance",
        ] {
            assert_eq!(with_cookie(&app, &session, path).await.0, 200, "{path}");
        }
        for path in [
            "/admin",
            "/admin/api-keys",
            "/api/admin/api-keys",
            "/api/admin/users",
            "/api/events",
            &format!("/api/credits/balance?userId={other_id}"),
        ] {
            let (status, _) = with_cookie(&app, &session, path).await;
            assert_eq!(status, 403, "{path}");
        }
        // No team is shown to it: the Teams tab is not offered, and asking for it shows the
        // overview.
        let (status, page) = with_cookie(&app, &session, "/dashboard?tab=teams").await;
        assert_eq!(status, 200);
        assert!(!page.contains("data-testid=\"tab-teams\""), "no Teams tab");
        assert!(!page.contains("data-testid=\"team\""), "no team");
        assert!(
            !page.contains("data-testid=\"no-teams\""),
            "not the Teams panel"
        );
        let consume = json!({"userId": user, "feature": "chat"});
        let (status, _) = app
            .post(&session, "/api/credits/consume", &consume, Some("c1"))
            .await;
        assert_eq!(status, 403, "no credit consumption");
        let key = json!({"name": "mine", "scopes": ["billing:write"]});
        let (status, _) = app.post(&session, "/api/admin/api-keys", &key, None).await;
        assert_eq!(status, 403, "no API keys");
    }
}
