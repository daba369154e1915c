//! Pages a visitor sees, sign-up and sign-in, language, headers and CSRF.

use application::use_cases::plans::PricingMode;
use poem::http::StatusCode;

use super::harness::{App, PASSWORD};
use crate::{CONTENT_SECURITY_POLICY, PageSettings};

#[tokio::test]
async fn public_pages_render_for_signed_out_visitors_and_private_ones_ask_to_sign_in() {
    let app = App::new(PricingMode::Static);
    let browser = app.browser();
    for (path, text) in [
        ("/", "Sell access your way"),
        ("/pricing", "Pricing"),
        ("/signin", "Sign in"),
        ("/signup", "Create your account"),
        ("/payment-cancel", "nothing was charged"),
    ] {
        let page = browser.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(page.body.contains(text), "{path} lacks {text}");
        assert!(
            page.body.contains("Sandbox mode."),
            "{path} lacks the sandbox notice"
        );
    }
    for path in [
        "/dashboard",
        "/admin/pricing",
        "/payment-success?orderId=ord_1",
    ] {
        let page = browser.get(path).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{path}");
        assert!(
            page.location().starts_with("/signin?next=%2F"),
            "{path}: {}",
            page.location()
        );
    }
    assert_eq!(
        browser.get("/no-such-page").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn every_response_carries_the_content_security_policy_and_no_inline_code_is_allowed() {
    let app = App::new(PricingMode::Static);
    let browser = app.browser();
    for path in [
        "/",
        "/pricing",
        "/signin",
        "/assets/app.css",
        "/no-such-page",
    ] {
        let page = browser.get(path).await;
        assert_eq!(
            page.header("content-security-policy"),
            CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert_eq!(page.header("x-content-type-options"), "nosniff");
        assert_eq!(page.header("x-frame-options"), "DENY");
    }
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-inline"));
    let page = browser.get("/pricing").await;
    assert!(
        !page.body.contains("style=\""),
        "inline styles would be blocked by the CSP"
    );
    assert!(
        !page.body.contains("<script>"),
        "inline scripts would be blocked by the CSP"
    );
    assert_eq!(page.header("cache-control"), "no-store");
}

#[tokio::test]
async fn assets_are_served_with_long_cache_headers_when_versioned() {
    let app = App::new(PricingMode::Static);
    let browser = app.browser();
    let page = browser.get("/pricing").await;
    let start = page.body.find("/assets/app.css?v=").unwrap();
    let url = &page.body[start..start + "/assets/app.css?v=".len() + 16];
    let css = browser.get(url).await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(css.header("content-type"), "text/css; charset=utf-8");
    assert_eq!(
        css.header("cache-control"),
        "public, max-age=31536000, immutable"
    );
    assert!(css.body.contains(":focus-visible"));
    let stale = browser.get("/assets/app.js?v=0").await;
    assert_eq!(
        stale.header("cache-control"),
        "public, max-age=0, must-revalidate"
    );
    assert_eq!(
        browser.get("/assets/nope.js").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn signing_up_sets_a_secure_http_only_lax_session_and_returns_to_next() {
    let app = App::new(PricingMode::Static);
    let browser = app.browser();
    let page = browser.get("/signup?next=/pricing?tab=credits").await;
    let response = browser
        .post(
            "/signup",
            &[
                ("csrf", &page.csrf()),
                ("email", "Ada@Example.com"),
                ("password", PASSWORD),
                ("next", "/pricing?tab=credits"),
            ],
        )
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER, "{}", response.body);
    assert_eq!(response.location(), "/pricing?tab=credits");
    let session = response
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("tally_session="))
        .unwrap();
    for flag in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(session.contains(flag), "{session} lacks {flag}");
    }
    let dashboard = browser.get("/dashboard").await;
    assert_eq!(dashboard.status, StatusCode::OK);
    assert!(dashboard.body.contains("ada@example.com"));
    assert!(dashboard.body.contains("Sign out"));
}

#[tokio::test]
async fn cookies_are_not_secure_in_development() {
    let app = App::with_settings(
        PricingMode::Static,
        PageSettings {
            secure_cookies: false,
            sandbox_notice: false,
            trust_forwarded_for: false,
            public_base_url: None,
        },
    );
    let browser = app.browser();
    let page = browser.get("/signin").await;
    assert!(
        page.set_cookies()
            .iter()
            .all(|c| !c.contains("Secure") && c.contains("HttpOnly"))
    );
    assert!(!page.body.contains("Sandbox mode."));
}

#[tokio::test]
async fn sign_up_and_sign_in_problems_are_shown_next_to_the_fields() {
    let app = App::new(PricingMode::Static);
    let browser = app.browser();
    let short = browser
        .submit(
            "/signup",
            "/signup",
            &[("email", "bo@example.com"), ("password", "short")],
        )
        .await;
    assert_eq!(short.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(short.body.contains("class=\"field-error\""));
    assert!(short.body.contains("Use 8 to 256 characters."));
    let wrong = browser
        .submit(
            "/signin",
            "/signin",
            &[("email", "nobody@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("do not match an account"));
}

#[tokio::test]
async fn form_posts_without_the_right_csrf_token_are_refused() {
    let app = App::new(PricingMode::Static);
    app.service
        .register(
            "cy@example.com",
            PASSWORD.into(),
            application::accounts::Role::User,
            &application::testing::client_of("cy@example.com"),
        )
        .await
        .unwrap();
    let browser = app.browser();
    let form = [("email", "cy@example.com"), ("password", PASSWORD)];
    let missing = browser.post("/signin", &form).await;
    assert_eq!(missing.status, StatusCode::FORBIDDEN);
    assert!(missing.body.contains("This form has expired"));
    let _ = browser.get("/signin").await;
    let forged = browser
        .post(
            "/signin",
            &[
                ("csrf", &"0".repeat(64)),
                ("email", "cy@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let other_browser = app.browser();
    let foreign = other_browser.get("/signin").await.csrf();
    let replayed = browser
        .post(
            "/signin",
            &[
                ("csrf", &foreign),
                ("email", "cy@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(
        replayed.status,
        StatusCode::FORBIDDEN,
        "a token is bound to its browser"
    );
    let signed_in = app.signed_in("dee@example.com", false).await;
    let before_sign_in = browser.get("/signin").await.csrf();
    let stale = signed_in
        .post("/signout", &[("csrf", &before_sign_in)])
        .await;
    assert_eq!(stale.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn signing_out_ends_the_session() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("eve@example.com", false).await;
    let token = browser.cookie("tally_session").unwrap();
    let out = browser.submit("/dashboard", "/signout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(browser.cookie("tally_session").is_none());
    assert!(app.service.authenticate(&token).await.is_err());
    assert_eq!(
        browser.get("/dashboard").await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn pricing_has_tabs_a_strikethrough_price_safe_features_and_no_hidden_plans() {
    let app = App::new(PricingMode::Static);
    let page = app.browser().get("/pricing").await;
    assert_eq!(page.body.matches("role=\"tab\"").count(), 3);
    assert!(page.body.contains("role=\"tablist\""));
    assert!(page.body.contains("id=\"panel-subscriptions\""));
    assert!(
        page.body.contains("data-panel=\"credits\" hidden"),
        "other tabs start hidden"
    );
    assert!(page.body.contains("<del class=\"price-was\""));
    assert!(page.body.contains("$19.99</del>"));
    assert!(page.body.contains("$9.99"));
    assert!(page.body.contains("Most popular"));
    assert!(page.body.contains("<strong>Unlimited</strong> projects"));
    assert!(page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        !page.body.contains("secret-plan"),
        "hidden plans are absent"
    );
    assert!(page.body.contains("CN¥68.00"));
    let credits = app.browser().get("/pricing?tab=credits").await;
    assert!(credits.body.contains("data-panel=\"subscriptions\" hidden"));
    assert!(credits.body.contains(
        "id=\"tab-credits\" role=\"tab\" href=\"/pricing?tab=credits\" aria-selected=\"true\""
    ));
}

#[tokio::test]
async fn pricing_reads_in_chinese_from_the_query_then_the_cookie_then_accept_language() {
    let app = App::new(PricingMode::Static);
    let browser = app.browser();
    let page = browser.get("/pricing?lang=zh-CN").await;
    assert!(page.body.contains("<html lang=\"zh-CN\">"));
    assert!(page.body.contains("订阅"));
    assert!(
        page.body.contains("专业版月付"),
        "the plan's own zh-CN text"
    );
    assert!(
        page.body.contains("lifetime name"),
        "a plan without zh-CN falls back to en"
    );
    assert!(page.body.contains("US$9.99"));
    assert!(
        page.set_cookies()
            .iter()
            .any(|c| c.starts_with("tally_lang=zh-CN"))
    );
    let again = browser.get("/pricing").await;
    assert!(
        again.body.contains("<html lang=\"zh-CN\">"),
        "the cookie remembers the choice"
    );
    let accept = app
        .browser()
        .get_with("/pricing", &[("accept-language", "zh-CN,zh;q=0.9")])
        .await;
    assert!(accept.body.contains("最受欢迎"));
    let english = app
        .browser()
        .get_with("/pricing", &[("accept-language", "fr, en;q=0.5")])
        .await;
    assert!(english.body.contains("<html lang=\"en\">"));
}

#[tokio::test]
async fn buying_while_signed_out_goes_to_sign_in_and_back() {
    let app = App::new(PricingMode::Static);
    let page = app.browser().get("/pricing?tab=credits").await;
    assert!(
        page.body.contains(
            "href=\"/signin?next=%2Fpricing%2Fcontinue%3FplanId%3Dcredits-100%26provider%3Dcard_gateway\""
        ),
        "Buy comes back to continue that purchase (issue 19)"
    );
}
