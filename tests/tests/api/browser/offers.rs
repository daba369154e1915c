//! Issue 19 in a real browser: `/pricing` as offers (one card per group and billing period),
//! the monthly / yearly toggle and the currency choice working without script, each payment
//! method of one offer buying through the sandbox, "Current plan" and "Owned", and Buy while
//! signed out continuing the purchase after sign-up.

use tests::{TestApp, spawn_app};

use super::webdriver::{Browser, Viewport, browser_available};
use super::{PASSWORD, sign_up};

/// Pay in the sandbox's hosted checkout and wait until the webhook marked the order paid.
async fn pay_in_the_sandbox(browser: &Browser) {
    browser.wait_for_url("/sandbox/checkout/").await;
    browser.click("form[action$='/pay'] button").await;
    browser.wait_for_url("/payment-success?orderId=").await;
    browser.wait_for_text("h1", "Payment successful").await;
}

/// Press `method`'s Buy button on the card `#plan-<card>` of `/pricing?<query>`, and pay.
async fn buy_with(app: &TestApp, browser: &Browser, query: &str, card: &str, method: &str) {
    browser.goto(&app.url(&format!("/pricing?{query}"))).await;
    browser
        .click(&format!("#plan-{card} [data-method={method}]"))
        .await;
    pay_in_the_sandbox(browser).await;
}

/// The page is no wider than the screen.
async fn assert_no_overflow(browser: &Browser, what: &str) {
    let overflow = browser
        .script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
        )
        .await;
    assert_eq!(overflow, 0, "{what}: no horizontal overflow");
}

#[tokio::test]
async fn browser_offers_toggle_between_monthly_and_yearly_and_change_currency() {
    const TEST: &str = "browser_offers_toggle_between_monthly_and_yearly_and_change_currency";
    if !browser_available(TEST) {
        return;
    }
    let app = spawn_app().await;
    for (viewport, size) in [(Viewport::Desktop, "1280"), (Viewport::Phone, "390")] {
        let browser = Browser::start(viewport).await;
        browser.goto(&app.url("/pricing")).await;
        // One Pro card, monthly, with Card and PayPal as its methods.
        let pro = browser.text("#plan-pro_monthly").await;
        assert!(pro.contains("Card") && pro.contains("PayPal"), "{pro}");
        assert!(!browser.exists("#plan-pro_monthly_wallet_global").await);
        assert!(!browser.exists("#plan-pro_yearly").await);
        let methods = browser
            .script(
                "return document.querySelectorAll('#plan-pro_monthly [data-testid=buy]').length",
            )
            .await;
        assert_eq!(methods, 2);
        assert!(!browser.text("body").await.contains("(A)"));
        browser
            .screenshot(&format!("{TEST}_monthly_{size}"), viewport)
            .await;
        assert_no_overflow(&browser, "monthly").await;
        browser
            .click("[data-testid=period-toggle] [data-period=year]")
            .await;
        browser.wait_for_url("period=year").await;
        browser
            .wait_for_text("#plan-pro_yearly [data-testid=saving]", "Save 16%")
            .await;
        assert_eq!(
            browser.text("#plan-pro_yearly [data-testid=price]").await,
            "$99.90"
        );
        browser
            .screenshot(&format!("{TEST}_yearly_{size}"), viewport)
            .await;
        browser
            .click("[data-testid=currencies] [data-currency=EUR]")
            .await;
        browser.wait_for_url("currency=EUR").await;
        // Euros filter the offers: nothing is sold yearly in EUR, so the page shows monthly.
        assert!(!browser.exists("#plan-pro_yearly").await);
        assert!(!browser.exists("[data-testid=period-toggle]").await);
        browser
            .wait_for_text("#plan-pro_monthly_eur [data-testid=price]", "€9.49")
            .await;
        assert!(
            browser
                .text("#plan-pro_monthly_eur")
                .await
                .contains("Card (tax included)")
        );
        browser
            .screenshot(&format!("{TEST}_eur_{size}"), viewport)
            .await;
        assert_no_overflow(&browser, "euros").await;
        // A Chinese reader sees the lifetime offer in CNY, paid by WeChat Pay or Alipay.
        browser
            .goto(&app.url("/pricing?tab=one-time&lang=zh-CN"))
            .await;
        let lifetime = browser.text("#plan-lifetime_cn_qr").await;
        assert!(
            lifetime.contains("微信支付") && lifetime.contains("支付宝"),
            "{lifetime}"
        );
        browser
            .screenshot(&format!("{TEST}_zh_{size}"), viewport)
            .await;
        assert_no_overflow(&browser, "zh-CN one-time").await;
    }
}

#[tokio::test]
async fn browser_each_method_of_one_offer_buys_and_the_card_then_says_current_or_owned() {
    const TEST: &str =
        "browser_each_method_of_one_offer_buys_and_the_card_then_says_current_or_owned";
    if !browser_available(TEST) {
        return;
    }
    let app = spawn_app().await;
    for (email, method) in [
        ("card@example.com", "card_gateway"),
        ("paypal@example.com", "wallet_global"),
    ] {
        let browser = Browser::start(Viewport::Desktop).await;
        sign_up(&app, &browser, email).await;
        buy_with(&app, &browser, "tab=subscriptions", "pro_monthly", method).await;
        browser.goto(&app.url("/pricing?tab=subscriptions")).await;
        browser
            .wait_for_text(
                "#plan-pro_monthly [data-testid=current-plan]",
                "Current plan",
            )
            .await;
        assert!(
            !browser.exists("#plan-pro_monthly [data-testid=buy]").await,
            "no Buy on the current plan ({method})"
        );
        if method == "card_gateway" {
            browser
                .screenshot(&format!("{TEST}_current"), Viewport::Desktop)
                .await;
            buy_with(
                &app,
                &browser,
                "tab=one-time",
                "lifetime_card",
                "card_gateway",
            )
            .await;
            browser.goto(&app.url("/pricing?tab=one-time")).await;
            browser
                .wait_for_text("#plan-lifetime_card [data-testid=owned]", "Owned")
                .await;
            assert!(
                !browser
                    .exists("#plan-lifetime_card [data-testid=buy]")
                    .await
            );
            browser
                .screenshot(&format!("{TEST}_owned"), Viewport::Desktop)
                .await;
        }
    }
}

#[tokio::test]
async fn browser_buy_while_signed_out_continues_after_sign_up() {
    const TEST: &str = "browser_buy_while_signed_out_continues_after_sign_up";
    if !browser_available(TEST) {
        return;
    }
    let app = spawn_app().await;
    let browser = Browser::start(Viewport::Phone).await;
    browser.goto(&app.url("/pricing")).await;
    browser
        .click("#plan-pro_monthly [data-method=wallet_global]")
        .await;
    browser.wait_for_url("/signin?next=").await;
    browser.click(".auth-switch a").await;
    browser.wait_for_url("/signup?next=").await;
    browser.type_into("#f-email", "fay@example.com").await;
    browser.type_into("#f-password", PASSWORD).await;
    browser
        .click("form[action='/signup'] button[type=submit]")
        .await;
    browser
        .wait_for_url("/pricing/continue?planId=pro_monthly_wallet_global")
        .await;
    browser
        .wait_for_text("[data-testid=continue-purchase]", "PayPal")
        .await;
    browser.screenshot(TEST, Viewport::Phone).await;
    assert_no_overflow(&browser, "continue").await;
    browser.click("[data-testid=continue-buy]").await;
    pay_in_the_sandbox(&browser).await;
    browser.goto(&app.url("/pricing")).await;
    browser
        .wait_for_text(
            "#plan-pro_monthly [data-testid=current-plan]",
            "Current plan",
        )
        .await;
}
