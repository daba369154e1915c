//! The host application's backend acting for its users through HTTP: every billing endpoint
//! takes the user's own credential, or an API key with `billing:read` / `billing:write` and
//! `?userId=`; the user-level cancel (at the period's end, or now where the provider can); the
//! list of subscriptions; and the buyer's e-mail address and name the provider is told (from the
//! API key's request, or from the host token's claims; never a `.invalid` placeholder).

use bootstrap::host_tokens::{ContactClaims, HostJwtKey, HostJwtSettings};
use jsonwebtoken::{EncodingKey, Header, encode};
use secrecy::SecretString;
use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

const SECRET: &str = "a-host-secret-of-at-least-32-bytes!!";
/// 2100-01-01: far enough ahead not to need the clock.
const EXP: i64 = 4_102_444_800;

/// `method` `path` with `token` and an optional JSON body: status and JSON answer.
async fn call(
    app: &TestApp,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let url = app.url(path);
    let request = match method {
        "GET" => app.client.get(url),
        "DELETE" => app.client.delete(url),
        _ => app.client.post(url),
    };
    let request = match body {
        Some(body) => request.json(body),
        None => request,
    };
    let response = request.bearer_auth(token).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Buy `plan` through `provider` for the user `token` is (or names, with `?userId=` in
/// `query`), pay it in the sandbox and wait until it is paid: the order id.
async fn buy_paid(app: &TestApp, token: &str, query: &str, plan: &str, provider: &str) -> String {
    let body = json!({"planId": plan, "provider": provider});
    let path = format!("/api/payment/initiate{query}");
    let (status, started) = app.post(token, &path, &body, None).await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().expect("order").to_owned();
    let opened = app.client.get(tests::checkout_url(&started)).send().await;
    assert!(opened.is_ok(), "open the checkout");
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &format!("{order}{query}"), "paid")
        .await;
    order
}

/// The user's subscriptions as `GET /api/subscriptions` lists them.
async fn subscriptions(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let (status, page) = app.get(token, &format!("/api/subscriptions{query}")).await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().cloned().expect("items")
}

#[tokio::test]
async fn an_api_key_with_billing_write_manages_a_subscription_for_the_user_it_names() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let key = app.api_key(&admin, &["billing:write"]).await;
    let (id, token) = app.user("subscriber@example.com").await;
    let q = format!("?userId={id}");

    let order = buy_paid(&app, &key, &q, "pro_monthly", "card_gateway").await;
    let (status, orders) = app.get(&key, &format!("/api/orders{q}")).await;
    assert_eq!(status, 200, "{orders}");
    assert_eq!(orders["items"][0]["orderId"], order.as_str(), "{orders}");
    let listed = subscriptions(&app, &key, &q).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed,
        subscriptions(&app, &token, "").await,
        "the user sees the same"
    );
    let sub = listed[0]["id"].as_str().expect("id").to_owned();
    assert_eq!(listed[0]["status"], "active");

    // Cancel at the period's end (the default), twice: the same answer.
    for _ in 0..2 {
        let path = format!("/api/subscriptions/{sub}/cancel{q}");
        let (status, body) = call(&app, &key, "POST", &path, None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            (body["status"].as_str(), body["cancelAtPeriodEnd"].as_bool()),
            (Some("active"), Some(true))
        );
    }
    let path = format!("/api/subscriptions/{sub}/resume{q}");
    let (status, body) = call(&app, &key, "POST", &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelAtPeriodEnd"], false, "{body}");

    // A switch at the period's end, withdrawn.
    let path = format!("/api/subscriptions/{sub}/change-plan{q}");
    let switch = json!({"planId": "pro_yearly", "when": "period_end"});
    let (status, body) = call(&app, &key, "POST", &path, Some(&switch)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["subscription"]["scheduledPlanId"], "pro_yearly",
        "{body}"
    );
    let path = format!("/api/subscriptions/{sub}/scheduled-plan{q}");
    let (status, body) = call(&app, &key, "DELETE", &path, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.get("scheduledPlanId"), None, "{body}");

    // Now: Stripe ends it at once; the sandbox sends its event before it answers. Stripe's
    // events carry whole seconds, and one stamped in the second of Tally's last write of the
    // subscription (the withdrawal above) would be older than it, so the test waits a second.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let path = format!("/api/subscriptions/{sub}/cancel{q}");
    let (status, body) = call(&app, &key, "POST", &path, Some(&json!({"when": "now"}))).await;
    assert!(matches!(status, 200 | 202), "{status} {body}");
    let mut ended = Value::Null;
    for _ in 0..50 {
        ended = subscriptions(&app, &token, "").await[0].clone();
        if ended["status"] == "canceled" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(ended["status"], "canceled", "{ended}");
    let (status, body) = call(&app, &key, "POST", &path, None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("subscription_not_live")),
        "{body}"
    );
}

#[tokio::test]
async fn a_subscriber_cancels_with_their_own_token_and_now_is_refused_where_the_provider_cannot() {
    let (app, _admin) = spawn_app_with_admin(|_| {}).await;
    let (_, token) = app.user("pancake@example.com").await;
    buy_paid(&app, &token, "", "pro_quarterly", "mor_c").await;
    let sub = subscriptions(&app, &token, "").await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let path = format!("/api/subscriptions/{sub}/cancel");
    let (status, body) = call(&app, &token, "POST", &path, Some(&json!({"when": "now"}))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("cancel_now_not_supported")),
        "{body}"
    );
    assert_eq!(
        subscriptions(&app, &token, "").await[0]["cancelAtPeriodEnd"],
        false
    );
    let (status, body) = call(&app, &token, "POST", &path, Some(&json!({"when": "later"}))).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("validation_failed")),
        "{body}"
    );
    let (status, body) = call(&app, &token, "POST", &path, Some(&json!({}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelAtPeriodEnd"], true, "{body}");
}

/// Every billing endpoint, as (method, path, body, scope it needs).
fn endpoints(sub: &str, order: &str) -> Vec<(&'static str, String, Option<Value>, &'static str)> {
    vec![
        (
            "POST",
            "/api/payment/initiate".into(),
            Some(json!({"planId": "credits_card_500", "provider": "card_gateway"})),
            "billing:write",
        ),
        (
            "GET",
            format!("/api/payment/query/{order}"),
            None,
            "billing:read",
        ),
        ("GET", "/api/orders".into(), None, "billing:read"),
        (
            "POST",
            format!("/api/payment/cancel/{order}"),
            None,
            "billing:write",
        ),
        ("GET", "/api/subscriptions".into(), None, "billing:read"),
        (
            "POST",
            format!("/api/subscriptions/{sub}/cancel"),
            None,
            "billing:write",
        ),
        (
            "POST",
            format!("/api/subscriptions/{sub}/resume"),
            None,
            "billing:write",
        ),
        (
            "POST",
            format!("/api/subscriptions/{sub}/change-plan"),
            Some(json!({"planId": "pro_yearly"})),
            "billing:write",
        ),
        (
            "DELETE",
            format!("/api/subscriptions/{sub}/scheduled-plan"),
            None,
            "billing:write",
        ),
    ]
}

#[tokio::test]
async fn every_billing_endpoint_refuses_other_users_keys_without_the_scope_and_no_or_unknown_users()
{
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, ada_token) = app.user("ada@example.com").await;
    let (bo, bo_token) = app.user("bo@example.com").await;
    let order = buy_paid(&app, &ada_token, "", "pro_monthly", "card_gateway").await;
    let sub = subscriptions(&app, &ada_token, "").await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let credits_key = app
        .api_key(&admin, &["credits:read", "credits:consume"])
        .await;
    let reader = app.api_key(&admin, &["billing:read"]).await;
    let writer = app.api_key(&admin, &["billing:write"]).await;
    let code = |body: &Value| body["code"].as_str().map(str::to_owned);
    let with = |path: &str, query: &str| {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}{query}")
    };
    for (method, path, body, scope) in endpoints(&sub, &order) {
        let body = body.as_ref();
        let named = with(&path, &format!("userId={ada}"));
        let (status, answer) = call(&app, &credits_key, method, &named, body).await;
        assert_eq!(
            (status, code(&answer)),
            (403, Some("forbidden".into())),
            "{method} {path}: {answer}"
        );
        if scope == "billing:write" {
            let (status, answer) = call(&app, &reader, method, &named, body).await;
            assert_eq!(
                (status, code(&answer)),
                (403, Some("forbidden".into())),
                "{method} {path}: {answer}"
            );
        }
        let (status, answer) = call(&app, &writer, method, &path, body).await;
        assert_eq!(
            (status, code(&answer)),
            (400, Some("validation_failed".into())),
            "{method} {path}: {answer}"
        );
        let unknown = with(&path, "userId=usr_nobody");
        let (status, answer) = call(&app, &writer, method, &unknown, body).await;
        assert_eq!(
            (status, code(&answer)),
            (404, Some("user_not_found".into())),
            "{method} {path}: {answer}"
        );
        let other = with(&path, &format!("userId={ada}"));
        let (status, answer) = call(&app, &bo_token, method, &other, body).await;
        assert_eq!(
            (status, code(&answer)),
            (403, Some("forbidden".into())),
            "{method} {path}: {answer}"
        );
    }
    // Another user's subscription: with their own token, or a key naming them.
    for (token, query) in [
        (bo_token.clone(), String::new()),
        (writer.clone(), format!("?userId={bo}")),
    ] {
        for action in ["cancel", "resume"] {
            let path = format!("/api/subscriptions/{sub}/{action}{query}");
            let (status, answer) = call(&app, &token, "POST", &path, None).await;
            assert_eq!(
                (status, code(&answer)),
                (403, Some("not_owner".into())),
                "{path}: {answer}"
            );
        }
        let path = format!("/api/payment/query/{order}{query}");
        let (status, answer) = call(&app, &token, "GET", &path, None).await;
        assert_eq!(
            (status, code(&answer)),
            (404, Some("order_not_found".into())),
            "{answer}"
        );
    }
    // Nothing was written: one order, the subscription renews, nothing scheduled.
    let (_, orders) = app.get(&ada_token, "/api/orders").await;
    assert_eq!(orders["total"], 1, "{orders}");
    let now = &subscriptions(&app, &ada_token, "").await[0];
    assert_eq!(
        (now["status"].as_str(), now["cancelAtPeriodEnd"].as_bool()),
        (Some("active"), Some(false)),
        "{now}"
    );
    assert_eq!(now.get("scheduledPlanId"), None, "{now}");
}

#[tokio::test]
async fn the_buyers_details_come_from_the_key_only_and_bad_ones_write_nothing() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let writer = app.api_key(&admin, &["billing:write"]).await;
    let (id, token) = app.user("buyer@example.com").await;
    let plan = json!({"planId": "credits_mor_b_10000", "provider": "mor_b"});
    let with = |extra: Value| {
        let mut body = plan.clone();
        body.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        body
    };
    let refusals = [
        (
            token.as_str(),
            String::new(),
            json!({"customerEmail": "other@example.com"}),
            "customerEmail",
        ),
        (
            token.as_str(),
            String::new(),
            json!({"customerName": "Someone Else"}),
            "customerName",
        ),
        (
            writer.as_str(),
            format!("?userId={id}"),
            json!({"customerEmail": "hst_1@host.invalid"}),
            "customerEmail",
        ),
        (
            writer.as_str(),
            format!("?userId={id}"),
            json!({"customerEmail": "not an address"}),
            "customerEmail",
        ),
        (
            writer.as_str(),
            format!("?userId={id}"),
            json!({"customerName": "x".repeat(201)}),
            "customerName",
        ),
        (
            writer.as_str(),
            format!("?userId={id}"),
            json!({"customerName": "Ada\u{202E}"}),
            "customerName",
        ),
    ];
    for (caller, query, extra, field) in refusals {
        let path = format!("/api/payment/initiate{query}");
        let (status, body) = app.post(caller, &path, &with(extra.clone()), None).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("validation_failed")),
            "{extra}: {body}"
        );
        assert_eq!(body["errors"][0]["field"], field, "{body}");
    }
    let (_, orders) = app.get(&token, "/api/orders").await;
    assert_eq!(orders["total"], 0, "nothing written: {orders}");

    let stated =
        with(json!({"customerEmail": "Billing@Example.org", "customerName": "Ada Lovelace"}));
    let path = format!("/api/payment/initiate?userId={id}");
    let (status, started) = app.post(&writer, &path, &stated, None).await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().expect("order");
    let payment = app.sandbox_payment(order).await;
    assert_eq!(
        payment["extra"]["customerEmail"], "billing@example.org",
        "{payment}"
    );
    assert_eq!(
        payment["extra"]["customerName"], "Ada Lovelace",
        "{payment}"
    );
    let (status, mine) = app.post(&token, "/api/payment/initiate", &plan, None).await;
    assert_eq!(status, 201, "{mine}");
    let payment = app
        .sandbox_payment(mine["orderId"].as_str().expect("order"))
        .await;
    assert_eq!(
        payment["extra"]["customerEmail"], "buyer@example.com",
        "{payment}"
    );
    assert_eq!(payment["extra"].get("customerName"), None, "{payment}");
}

fn host_token(claims: &Value) -> String {
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    encode(&Header::default(), claims, &key).expect("token")
}

#[tokio::test]
async fn a_host_users_email_and_name_claims_reach_the_provider_and_follow_the_token() {
    let (app, _admin) = spawn_app_with_admin(|s| {
        s.host_jwt = Some(HostJwtSettings {
            key: HostJwtKey::Secret(SecretString::from(SECRET)),
            issuer: None,
            audience: None,
            admin_claim: None,
            contact_claims: ContactClaims::default(),
            org_claims: None,
        });
    })
    .await;
    let plan = json!({"planId": "credits_mor_b_10000", "provider": "mor_b"});
    let told = |order: Value| {
        let app = &app;
        async move {
            let payment = app
                .sandbox_payment(order["orderId"].as_str().expect("order"))
                .await;
            (
                payment["extra"].get("customerEmail").cloned(),
                payment["extra"].get("customerName").cloned(),
            )
        }
    };
    // No claims: the provider is told nothing (never the `.invalid` placeholder).
    let bare = host_token(&json!({"sub": "user-7", "exp": EXP}));
    let (status, started) = app.post(&bare, "/api/payment/initiate", &plan, None).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(told(started).await, (None, None));
    let claims = json!({"sub": "user-7", "exp": EXP, "email": "ada@example.com", "name": "Ada"});
    let (status, started) = app
        .post(&host_token(&claims), "/api/payment/initiate", &plan, None)
        .await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(
        told(started).await,
        (Some(json!("ada@example.com")), Some(json!("Ada")))
    );
    // A later token changes the name; one without claims keeps what is stored.
    let renamed = json!({"sub": "user-7", "exp": EXP, "name": "Ada Lovelace"});
    app.get(&host_token(&renamed), "/api/auth/me").await;
    let (status, started) = app.post(&bare, "/api/payment/initiate", &plan, None).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(
        told(started).await,
        (Some(json!("ada@example.com")), Some(json!("Ada Lovelace")))
    );
    // A `.invalid` address in the claim is never sent.
    let placeholder = json!({"sub": "user-8", "exp": EXP, "email": "x@host.invalid"});
    let (status, started) = app
        .post(
            &host_token(&placeholder),
            "/api/payment/initiate",
            &plan,
            None,
        )
        .await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(told(started).await.0, None);
}
