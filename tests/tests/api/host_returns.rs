//! Return URLs: a host application names where its buyer goes after the checkout
//! (`successUrl`, `cancelUrl`), only under the allowed origins; Tally's result pages do their
//! work and send the buyer there with `orderId` and `outcome`, on a signed return token alone
//! (no Tally session), and refuse a forged, tampered or other order's token.

use domain::Origin;
use serde_json::{Value, json};
use tests::{TestApp, checkout_url, spawn_app_with};

const HOST: &str = "https://app.example.com";

async fn app() -> TestApp {
    spawn_app_with(|s| {
        s.host_app.return_origins =
            domain::ReturnOrigins::new(vec![Origin::parse(HOST).unwrap()], true);
    })
    .await
}

async fn initiate(app: &TestApp, token: &str, body: Value) -> (u16, Value) {
    app.post(token, "/api/payment/initiate", &body, None).await
}

/// The order's return to Tally after `action` in the sandbox checkout (`pay`, `cancel`).
async fn return_link(app: &TestApp, started: &Value, action: &str) -> String {
    let order = started["orderId"].as_str().unwrap();
    let opened = app.client.get(checkout_url(started)).send().await.unwrap();
    assert!(opened.status().is_success() || opened.status().is_redirection());
    let answer = app.sandbox_action(order, action, &json!({})).await;
    let link = answer["redirect"]
        .as_str()
        .expect("a return link")
        .to_owned();
    assert!(link.contains("&rt="), "the return carries a token: {link}");
    link
}

async fn location_of(app: &TestApp, link: &str) -> (u16, Option<String>) {
    let answer = app.client.get(link).send().await.unwrap();
    let location = answer
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    (answer.status().as_u16(), location)
}

#[tokio::test]
async fn a_return_url_outside_the_allowed_origins_is_422_naming_the_field_and_writes_nothing() {
    let app = app().await;
    let token = app.register("host-returns@example.com").await;
    let cases = [
        (
            json!({"successUrl": "https://evil.test/done"}),
            "successUrl",
        ),
        (
            json!({"cancelUrl": "https://app.example.com.evil.test/x"}),
            "cancelUrl",
        ),
        (json!({"successUrl": "javascript:alert(1)"}), "successUrl"),
        (
            json!({"successUrl": "https://user@app.example.com/x"}),
            "successUrl",
        ),
        (
            json!({"successUrl": "http://app.example.com/done"}),
            "successUrl",
        ),
    ];
    for (urls, field) in cases {
        let mut body = json!({"planId": "credits_card_500", "provider": "card_gateway"});
        body.as_object_mut()
            .unwrap()
            .extend(urls.as_object().unwrap().clone());
        let (status, problem) = initiate(&app, &token, body).await;
        assert_eq!(status, 422, "{problem}");
        assert_eq!(problem["code"], "return_url_not_allowed");
        assert!(
            problem["detail"].as_str().unwrap().starts_with(field),
            "{problem}"
        );
    }
    let (_, orders) = app.get(&token, "/api/orders").await;
    assert_eq!(orders["items"], json!([]), "nothing was written");
}

#[tokio::test]
async fn a_paid_checkout_returns_to_the_host_with_the_order_and_its_outcome_without_a_session() {
    let app = app().await;
    let token = app.register("paid-return@example.com").await;
    let body = json!({
        "planId": "credits_card_500", "provider": "card_gateway",
        "successUrl": format!("{HOST}/billing/done?from=tally#top"),
        "cancelUrl": "http://localhost:3000/billing/cancelled",
    });
    let (status, started) = initiate(&app, &token, body).await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().unwrap().to_owned();
    let link = return_link(&app, &started, "pay").await;
    app.wait_for_status(&token, &order, "paid").await;
    // The client holds no cookie: the token alone brings the buyer back.
    let (status, location) = location_of(&app, &link).await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some(format!("{HOST}/billing/done?from=tally&orderId={order}&outcome=paid#top").as_str())
    );
}

#[tokio::test]
async fn a_left_checkout_is_cancelled_here_and_returns_to_the_cancel_url() {
    let app = app().await;
    let token = app.register("cancel-return@example.com").await;
    let body = json!({
        "planId": "credits_card_500", "provider": "card_gateway",
        "successUrl": format!("{HOST}/done"),
        "cancelUrl": "http://localhost:3000/billing/cancelled",
    });
    let (_, started) = initiate(&app, &token, body).await;
    let order = started["orderId"].as_str().unwrap().to_owned();
    let link = return_link(&app, &started, "cancel").await;
    let (status, location) = location_of(&app, &link).await;
    assert_eq!(status, 303);
    assert_eq!(
        location.as_deref(),
        Some(
            format!("http://localhost:3000/billing/cancelled?orderId={order}&outcome=cancelled")
                .as_str()
        )
    );
    let (_, now) = app
        .get(&token, &format!("/api/payment/query/{order}"))
        .await;
    assert_eq!(now["status"], "cancelled", "{now}");
}

#[tokio::test]
async fn a_forged_tampered_or_other_orders_token_does_not_redirect_or_cancel() {
    let app = app().await;
    let token = app.register("forged-return@example.com").await;
    let body = json!({
        "planId": "credits_card_500", "provider": "card_gateway",
        "successUrl": format!("{HOST}/done"), "cancelUrl": format!("{HOST}/cancelled"),
    });
    let (_, first) = initiate(&app, &token, body.clone()).await;
    let (_, second) = initiate(&app, &token, body).await;
    let first_id = first["orderId"].as_str().unwrap();
    let second_id = second["orderId"].as_str().unwrap();
    let link = return_link(&app, &first, "cancel").await;
    let rt = link.split("&rt=").nth(1).unwrap().to_owned();
    let (expiry, tag) = rt.split_once('.').unwrap();
    let later: i64 = expiry.parse::<i64>().unwrap() + 86_400_000;
    let forged = [
        // Another order's token on this order.
        format!("/payment-cancel?orderId={second_id}&rt={rt}"),
        // The success page's token is not the cancel page's, and vice versa.
        format!("/payment-success?orderId={first_id}&rt={rt}"),
        // A longer life under the same tag.
        format!("/payment-cancel?orderId={first_id}&rt={later}.{tag}"),
        format!("/payment-cancel?orderId={first_id}&rt={expiry}.AAAA{tag}"),
        format!("/payment-cancel?orderId={second_id}&rt=garbage"),
        // Only the id, no token: today's page, which needs a session.
    ];
    for path in &forged {
        let (status, location) = location_of(&app, &app.url(path)).await;
        assert_eq!(status, 403, "{path}");
        assert_eq!(location, None, "{path}");
    }
    let (_, second_now) = app
        .get(&token, &format!("/api/payment/query/{second_id}"))
        .await;
    assert_eq!(
        second_now["status"], "pending",
        "a forged return cancels nothing"
    );
    let (status, location) = location_of(
        &app,
        &app.url(&format!("/payment-cancel?orderId={second_id}")),
    )
    .await;
    assert_eq!(
        (status, location),
        (200, None),
        "without a token: today's page"
    );
}

#[tokio::test]
async fn without_return_urls_a_signed_return_shows_tallys_page_and_never_the_sign_in_page() {
    let app = app().await;
    let token = app.register("plain-return@example.com").await;
    let body = json!({"planId": "credits_card_500", "provider": "card_gateway"});
    let (_, started) = initiate(&app, &token, body).await;
    let order = started["orderId"].as_str().unwrap().to_owned();
    let link = return_link(&app, &started, "pay").await;
    app.wait_for_status(&token, &order, "paid").await;
    let answer = app.client.get(&link).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let page = answer.text().await.unwrap();
    assert!(page.contains("data-testid=\"payment-paid\""), "{page}");
}
