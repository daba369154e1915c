//! The customer portal in a real browser, on a desktop (1280 px) and a phone (390 px): a host
//! application's backend makes a portal link for a subscriber; the browser opens it, lands on
//! the branded dashboard without signing in, cancels the subscription at its period's end, and
//! has a "Back to Acme" link to the host's page. A second visit to the same link is the 410 page.

use serde_json::json;
use tests::spawn_app_with_admin;

use super::webdriver::{Browser, Viewport, browser_available};

const RETURN: &str = "http://localhost:3000/account";

fn acme() -> web_pages::Branding {
    web_pages::Branding {
        name: "Acme".into(),
        logo_url: None,
        accent_color: Some("#0f766e".into()),
        support_email: Some("help@acme.test".into()),
        support_url: None,
        home_url: Some("http://localhost:3000/".into()),
    }
}

#[tokio::test]
async fn browser_a_host_user_manages_billing_in_the_portal() {
    const TEST: &str = "browser_a_host_user_manages_billing_in_the_portal";
    if !browser_available(TEST) {
        return;
    }
    let (app, admin) = spawn_app_with_admin(|s| s.branding = acme()).await;
    let body = json!({"name": "acme backend", "scopes": ["billing:write"]});
    let (_, key) = app.post(&admin, "/api/admin/api-keys", &body, None).await;
    let key = key["secret"].as_str().unwrap().to_owned();
    for viewport in [Viewport::Desktop, Viewport::Phone] {
        let name = match viewport {
            Viewport::Desktop => "desktop",
            Viewport::Phone => "phone",
        };
        let token = app.register(&format!("portal-{name}@example.com")).await;
        let (order, _) = app
            .open_checkout(&token, "pro_monthly", "card_gateway", None)
            .await;
        app.sandbox_action(&order, "pay", &json!({})).await;
        app.wait_for_status(&token, &order, "paid").await;
        let (_, me) = app.get(&token, "/api/auth/me").await;
        let link_body = json!({"userId": me["id"], "returnUrl": RETURN});
        let (status, link) = app
            .post(&key, "/api/portal-sessions", &link_body, None)
            .await;
        assert_eq!(status, 201, "{link}");
        let url = link["url"].as_str().unwrap();

        let browser = Browser::start(viewport).await;
        browser.goto(url).await;
        browser.wait_for_url("/dashboard").await;
        browser
            .wait_for_text("[data-testid=portal-back]", "Back to Acme")
            .await;
        browser
            .wait_for_text("[data-testid=subscription-status]", "Active")
            .await;
        assert!(!browser.exists("a[href='/admin']").await);
        let title = browser.script("return document.title").await;
        assert!(title.as_str().unwrap().ends_with("· Acme"), "{title}");
        browser
            .screenshot(&format!("{TEST}_{name}"), viewport)
            .await;
        browser.click("[data-testid=cancel-subscription]").await;
        browser.click("[data-testid=confirm-cancel]").await;
        browser
            .wait_for_text("[data-testid=subscription-renewal]", "Ends on")
            .await;
        browser
            .screenshot(&format!("{TEST}_{name}_cancelled"), viewport)
            .await;
        let back = browser.script(
            "return document.querySelector('[data-testid=portal-back]').getAttribute('href')",
        );
        assert_eq!(back.await.as_str(), Some(RETURN));
        browser.goto(url).await;
        browser.wait_for_text("h1", "This link has expired").await;
        browser
            .screenshot(&format!("{TEST}_{name}_gone"), viewport)
            .await;
    }
}
