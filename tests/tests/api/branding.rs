//! `[branding]`: the operator's name, logo, accent colour and contacts on every page and on the
//! sandbox checkout; "Tally" only as the default.

use serde_json::json;
use tests::{checkout_url, spawn_app, spawn_app_with};

fn acme() -> web_pages::Branding {
    web_pages::Branding {
        name: "Acme Cloud".into(),
        logo_url: Some("https://cdn.acme.test/logo.png".into()),
        accent_color: Some("#ff6600".into()),
        support_email: Some("help@acme.test".into()),
        support_url: None,
        home_url: Some("https://acme.test/".into()),
    }
}

#[tokio::test]
async fn every_page_carries_the_operators_brand_and_tally_only_by_default() {
    let app = spawn_app_with(|s| s.branding = acme()).await;
    for path in [
        "/",
        "/pricing",
        "/signin",
        "/payment-cancel",
        "/no-such-page",
    ] {
        let answer = app.client.get(app.url(path)).send().await.unwrap();
        let csp = answer.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            csp.contains("img-src 'self' data: https://cdn.acme.test;"),
            "{csp}"
        );
        let page = answer.text().await.unwrap();
        assert!(page.contains(" · Acme Cloud</title>"), "{path}");
        assert!(
            page.contains("src=\"https://cdn.acme.test/logo.png\""),
            "{path}"
        );
        assert!(page.contains("href=\"https://acme.test/\""), "{path}");
        assert!(page.contains("href=\"mailto:help@acme.test\""), "{path}");
        assert!(page.contains("/assets/brand.css"), "{path}");
        assert!(!page.contains("Tally"), "{path}: no other product's name");
    }
    let css = app
        .client
        .get(app.url("/assets/brand.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(css.headers()["content-type"], "text/css; charset=utf-8");
    assert!(css.text().await.unwrap().contains("--primary: #ff6600"));

    let plain = spawn_app().await;
    let page = plain
        .client
        .get(plain.url("/pricing"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(" · Tally</title>"));
    assert!(!page.contains("/assets/brand.css"));
}

#[tokio::test]
async fn the_sandbox_checkout_shows_the_operators_name() {
    let app = spawn_app_with(|s| s.branding = acme()).await;
    let token = app.register("brand-checkout@example.com").await;
    let body = json!({"planId": "credits_card_500", "provider": "card_gateway"});
    let (status, started) = app.post(&token, "/api/payment/initiate", &body, None).await;
    assert_eq!(status, 201, "{started}");
    let page = app
        .client
        .get(checkout_url(&started))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<title>Pay Acme Cloud · Sandbox checkout</title>"),
        "{page}"
    );
}
