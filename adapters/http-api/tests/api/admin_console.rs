//! Issue 18: the admin console's API — customers, a customer's overview and ledger, every order
//! (filters, cursor pages, CSV), the audit log and an administrator's cancel.

use application::ports::RefundState;
use domain::ProviderId;
use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp, activated, bearer, spawn_app};

async fn get(app: &TestApp, path: &str, token: &str) -> Answer {
    Answer::of(
        app.client
            .get(path)
            .header("authorization", bearer(token))
            .send()
            .await,
    )
    .await
}

async fn post(app: &TestApp, path: &str, token: &str, body: Value) -> Answer {
    Answer::of(
        app.client
            .post(path)
            .header("authorization", bearer(token))
            .header("idempotency-key", key_of(path, &body))
            .body_json(&body)
            .send()
            .await,
    )
    .await
}

/// An idempotency key per request: its path and body, printable and without spaces.
fn key_of(path: &str, body: &Value) -> String {
    format!("{path}{body}")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

/// Every page of `path` (which has a `?`), following `nextCursor`; the items in order.
async fn every_page(app: &TestApp, path: &str, token: &str) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut pages = 0;
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}&cursor={c}"),
            None => path.to_owned(),
        };
        let answer = get(app, &url, token).await;
        answer.expect(200, None);
        pages += 1;
        items.extend(answer.body["items"].as_array().unwrap().iter().cloned());
        match answer.body.get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (items, pages),
        }
        assert!(pages < 100, "pagination never ends");
    }
}

fn field(items: &[Value], name: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| i[name].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn every_console_endpoint_is_forbidden_to_non_admins() {
    let app = spawn_app();
    let (user_id, user) = app.register("ada@example.com").await;
    let gets = [
        "/api/admin/users".to_owned(),
        "/api/admin/users?query=ada".to_owned(),
        format!("/api/admin/users/{user_id}"),
        format!("/api/admin/users/{user_id}/transactions"),
        format!("/api/admin/users/{user_id}/transactions?format=csv"),
        "/api/admin/orders".to_owned(),
        "/api/admin/orders?format=csv".to_owned(),
        "/api/admin/audit".to_owned(),
    ];
    for path in &gets {
        get(&app, path, &user).await.expect(403, Some("forbidden"));
        let anonymous = Answer::of(app.client.get(path).send().await).await;
        anonymous.expect(401, Some("unauthorized"));
    }
    post(
        &app,
        "/api/admin/subscriptions/sub_1/cancel",
        &user,
        json!({}),
    )
    .await
    .expect(403, Some("forbidden"));
}

#[tokio::test]
async fn customers_are_found_by_email_or_id_prefix_a_page_at_a_time() {
    let app = spawn_app();
    let mut ids = Vec::new();
    for name in ["bob", "Beth", "bianca", "carl", "betty"] {
        ids.push(app.register(&format!("{name}@example.com")).await.0);
    }
    let admin = app.admin().await;
    let (found, pages) = every_page(&app, "/api/admin/users?query=B&limit=2", &admin).await;
    assert_eq!(pages, 2);
    let emails: Vec<String> = field(&found, "email")
        .iter()
        .map(|e| e.to_lowercase())
        .collect();
    assert_eq!(
        emails,
        [
            "beth@example.com",
            "betty@example.com",
            "bianca@example.com",
            "bob@example.com"
        ],
        "case-insensitive, by e-mail"
    );
    let (everyone, _) = every_page(&app, "/api/admin/users?limit=2", &admin).await;
    assert_eq!(everyone.len(), 6, "five customers and the admin");
    let by_id = get(&app, &format!("/api/admin/users?query={}", ids[3]), &admin).await;
    assert_eq!(
        field(by_id.body["items"].as_array().unwrap(), "email"),
        ["carl@example.com"]
    );
    let nobody = get(&app, "/api/admin/users?query=zed", &admin).await;
    assert_eq!(nobody.body["items"], json!([]));
    assert!(nobody.body.get("nextCursor").is_none());
    get(
        &app,
        &format!("/api/admin/users?query={}", "x".repeat(300)),
        &admin,
    )
    .await
    .expect(422, Some("validation_failed"));
    for bad in ["cursor=c1zz", "limit=0", "limit=101", "limit=ten"] {
        get(&app, &format!("/api/admin/users?{bad}"), &admin)
            .await
            .expect(400, Some("invalid_pagination"));
    }
}

#[tokio::test]
async fn a_customers_page_shows_balance_holdings_and_totals_per_currency() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let order = app.buy_credits(&token).await;
    let sub = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    let sub_order = sub.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![activated(&sub_order)],
    )
    .await
    .expect(200, None);
    let admin = app.admin().await;
    let overview = get(&app, &format!("/api/admin/users/{user_id}"), &admin).await;
    overview.expect(200, None);
    let body = &overview.body;
    assert_eq!(body["user"]["email"], "ada@example.com");
    assert_eq!(body["status"]["balanceHundredths"], 10_000);
    assert_eq!(body["status"]["subscriptions"][0]["planId"], "pro-monthly");
    assert_eq!(body["status"]["entitlements"]["seats"], 5);
    assert_eq!(body["entitlementGrants"].as_array().unwrap().len(), 2);
    assert_eq!(body["totals"][0]["currency"], "USD");
    assert_eq!(body["totals"][0]["paidMinor"], 999 + 1900);
    assert_eq!(body["totals"][0]["refundedMinor"], 0);
    app.gateway(ProviderId::CardGateway)
        .answer_refunds(Some(RefundState::Succeeded));
    let refund = format!("/api/admin/orders/{order}/refund");
    post(
        &app,
        &refund,
        &admin,
        json!({"amount": 4.99, "reason": "x"}),
    )
    .await
    .expect(202, None);
    let after = get(&app, &format!("/api/admin/users/{user_id}"), &admin).await;
    assert_eq!(after.body["totals"][0]["refundedMinor"], 499);
    assert_eq!(after.body["totals"][0]["refunded"], "4.99");
    get(&app, "/api/admin/users/usr_missing", &admin)
        .await
        .expect(404, Some("user_not_found"));
}

#[tokio::test]
async fn a_customers_ledger_pages_newest_first_and_exports_as_csv() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    app.buy_credits(&token).await;
    let admin = app.admin().await;
    let credits = format!("/api/admin/users/{user_id}/credits");
    for n in 1..=4 {
        post(
            &app,
            &credits,
            &admin,
            json!({"amount": n, "reason": format!("=gift {n}")}),
        )
        .await
        .expect(200, None);
    }
    let path = format!("/api/admin/users/{user_id}/transactions?limit=2");
    let (entries, pages) = every_page(&app, &path, &admin).await;
    assert_eq!(pages, 3);
    let ids: Vec<i64> = entries.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 5);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    assert_eq!(entries[0]["type"], "admin_adjustment");
    let note = entries[0]["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("=gift 4"), "{}", entries[0]);
    let csv = get(
        &app,
        &format!("/api/admin/users/{user_id}/transactions?format=csv"),
        &admin,
    )
    .await;
    csv.expect(200, None);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert!(
        csv.header("content-disposition")
            .unwrap()
            .contains("transactions.csv")
    );
    let text = csv.body.as_str().unwrap().to_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "a header and five rows: {text}");
    assert!(lines[0].starts_with("id,type,description,amount_hundredths"));
    assert!(lines[1].contains(",400,"), "{}", lines[1]);
    assert!(
        lines[1].contains("'=gift 4"),
        "formulas are defused: {}",
        lines[1]
    );
    assert!(lines[5].contains("purchase_grant"));
    let accepted = Answer::of(
        app.client
            .get(format!("/api/admin/users/{user_id}/transactions"))
            .header("authorization", bearer(&admin))
            .header("accept", "text/csv")
            .send()
            .await,
    )
    .await;
    assert_eq!(
        accepted.body.as_str().unwrap(),
        text,
        "Accept: text/csv is the same export"
    );
    get(&app, "/api/admin/users/usr_missing/transactions", &admin)
        .await
        .expect(404, Some("user_not_found"));
    get(
        &app,
        &format!("/api/admin/users/{user_id}/transactions?format=xml"),
        &admin,
    )
    .await
    .expect(422, Some("validation_failed"));
}

#[tokio::test]
async fn orders_are_filtered_paged_and_exported_with_the_same_filters() {
    let app = spawn_app();
    let (ada, ada_token) = app.register("ada@example.com").await;
    let (_, bob_token) = app.register("bob@example.com").await;
    app.buy_credits(&ada_token).await;
    app.buy_credits(&bob_token).await;
    app.initiate(&ada_token, "credits-100", "card_gateway", None)
        .await
        .expect(201, None);
    app.initiate(&bob_token, "qr-credits", "wallet_qr", None)
        .await
        .expect(201, None);
    let admin = app.admin().await;
    let (all, pages) = every_page(&app, "/api/admin/orders?limit=3", &admin).await;
    assert_eq!((all.len(), pages), (4, 2));
    let (paid, _) = every_page(&app, "/api/admin/orders?status=paid", &admin).await;
    assert_eq!(paid.len(), 2);
    assert!(paid.iter().all(|o| o["status"] == "paid"));
    let (qr, _) = every_page(&app, "/api/admin/orders?provider=wallet_qr", &admin).await;
    assert_eq!(field(&qr, "planId"), ["qr-credits"]);
    let path = format!("/api/admin/orders?userId={ada}&status=pending");
    let (mine, _) = every_page(&app, &path, &admin).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0]["userId"], ada.as_str());
    get(&app, "/api/admin/orders?status=lost", &admin)
        .await
        .expect(422, Some("validation_failed"));
    get(&app, "/api/admin/orders?provider=stripe", &admin)
        .await
        .expect(422, Some("unknown_provider"));
    let csv = get(&app, "/api/admin/orders?status=paid&format=csv", &admin).await;
    csv.expect(200, None);
    assert!(
        csv.header("content-disposition")
            .unwrap()
            .contains("orders.csv")
    );
    let text = csv.body.as_str().unwrap();
    assert!(text.starts_with("order_id,user_id,status,provider,plan_id"));
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines()
            .skip(1)
            .all(|l| l.contains(",paid,card_gateway,credits-100,"))
    );
}

#[tokio::test]
async fn grants_debits_refunds_and_cancels_are_in_the_audit_log() {
    let app = spawn_app();
    let (user_id, token) = app.register("ada@example.com").await;
    let order = app.buy_credits(&token).await;
    let sub = app
        .initiate(&token, "pro-monthly", "card_gateway", None)
        .await;
    let sub_order = sub.body["orderId"].as_str().unwrap().to_owned();
    app.deliver(
        ProviderId::CardGateway,
        "evt-sub",
        vec![activated(&sub_order)],
    )
    .await
    .expect(200, None);
    let admin = app.admin().await;
    let credits = format!("/api/admin/users/{user_id}/credits");
    post(
        &app,
        &credits,
        &admin,
        json!({"amount": 10, "reason": "outage"}),
    )
    .await
    .expect(200, None);
    post(
        &app,
        &credits,
        &admin,
        json!({"amount": -2.5, "reason": "oops"}),
    )
    .await
    .expect(200, None);
    app.gateway(ProviderId::CardGateway)
        .answer_refunds(Some(RefundState::Succeeded));
    post(
        &app,
        &format!("/api/admin/orders/{order}/refund"),
        &admin,
        json!({"reason": "asked"}),
    )
    .await
    .expect(202, None);
    let overview = get(&app, &format!("/api/admin/users/{user_id}"), &admin).await;
    let subscription = overview.body["status"]["subscriptions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancel = format!("/api/admin/subscriptions/{subscription}/cancel");
    let canceled = post(&app, &cancel, &admin, json!({})).await;
    canceled.expect(200, None);
    assert_eq!(canceled.body["cancelAtPeriodEnd"], true);
    post(&app, &cancel, &admin, json!({}))
        .await
        .expect(200, None);
    // No body and no content type at all: at period end, as before the body was documented.
    let bare = app
        .client
        .post(&cancel)
        .header("authorization", bearer(&admin))
        .send()
        .await;
    Answer::of(bare).await.expect(200, None);
    post(
        &app,
        "/api/admin/subscriptions/sub_missing/cancel",
        &admin,
        json!({}),
    )
    .await
    .expect(404, Some("not_found"));
    let (log, _) = every_page(&app, "/api/admin/audit?limit=2", &admin).await;
    assert_eq!(
        field(&log, "action"),
        [
            "subscription.canceled",
            "order.refunded",
            "credits.debited",
            "credits.granted"
        ],
        "newest first; the second cancel changed nothing and is not logged"
    );
    assert!(log.iter().all(|e| e["adminId"].is_string()));
    assert_eq!(log[3]["objectKind"], "user");
    assert_eq!(log[3]["objectId"], user_id.as_str());
    assert!(log[3]["before"].as_str().unwrap().contains("10000"));
    assert!(log[3]["after"].as_str().unwrap().contains("11000"));
    assert_eq!(log[1]["objectId"], order.as_str());
    assert!(
        log[0]["after"]
            .as_str()
            .unwrap()
            .contains("cancelAtPeriodEnd=true")
    );
}

#[tokio::test]
async fn api_keys_created_and_revoked_are_in_the_audit_log_without_their_secret() {
    let app = spawn_app();
    let admin = app.admin().await;
    let created = post(
        &app,
        "/api/admin/api-keys",
        &admin,
        json!({"name": "worker", "scopes": ["credits:consume"]}),
    )
    .await;
    created.expect(201, None);
    let id = created.body["id"].as_str().unwrap().to_owned();
    let secret = created.body["secret"].as_str().unwrap().to_owned();
    let revoke = Answer::of(
        app.client
            .delete(format!("/api/admin/api-keys/{id}"))
            .header("authorization", bearer(&admin))
            .send()
            .await,
    )
    .await;
    revoke.expect(204, None);
    let log = get(&app, "/api/admin/audit", &admin).await;
    let items = log.body["items"].as_array().unwrap();
    assert_eq!(
        field(items, "action"),
        ["api_key.revoked", "api_key.created"]
    );
    assert!(items.iter().all(|e| e["objectId"] == id.as_str()));
    assert!(
        !log.body.to_string().contains(&secret),
        "the secret is never logged"
    );
}
