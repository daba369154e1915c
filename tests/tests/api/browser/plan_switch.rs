//! Issue 19 in a real browser: a subscriber upgrades from the dashboard. The subscription was
//! bought through the API on the hidden `pro_monthly_legacy` plan (7.99 USD, no credits); the
//! dashboard's "Change plan" card offers `pro_monthly` (9.99 USD, 1,000 credits a month), the
//! switch goes through the sandbox's Stripe subscription update, and the dashboard then shows
//! the new plan and the 1,000 credits the upgrade adds, on a desktop and on a phone.

use serde_json::json;
use tests::spawn_app;

use super::sign_in;
use super::webdriver::{Browser, Viewport, browser_available};

#[tokio::test]
async fn browser_a_subscriber_upgrades_from_the_dashboard() {
    const TEST: &str = "browser_a_subscriber_upgrades_from_the_dashboard";
    if !browser_available(TEST) {
        return;
    }
    let app = spawn_app().await;
    let email = "switch@example.com";
    let token = app.register(email).await;
    // A customer kept on the hidden legacy price.
    app.allow_plan(&token, "pro_monthly_legacy").await;
    let (order, _) = app
        .open_checkout(&token, "pro_monthly_legacy", "card_gateway", None)
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;

    let browser = Browser::start(Viewport::Desktop).await;
    sign_in(&app, &browser, email).await;
    browser
        .wait_for_text("[data-testid=subscription-plan]", "2023 price")
        .await;
    browser
        .wait_for_text("[data-testid=plan-switch]", "Change plan")
        .await;
    let offered = browser.text("[data-testid=switch-plan-choice]").await;
    assert!(offered.contains("Pro Monthly"), "offered: {offered}");
    // Stripe's interval change is followed (its invoice starts the yearly period), so the
    // yearly plan is offered too; the monthly one comes first and is the one chosen below.
    assert!(
        offered.contains("Yearly"),
        "an interval change is a switch at Stripe: {offered}"
    );
    browser
        .wait_for_text(
            "[data-testid=switch-interval-explain]",
            "new billing period",
        )
        .await;
    browser
        .screenshot(&format!("{TEST}_before"), Viewport::Desktop)
        .await;
    browser.click("[data-testid=switch-plan]").await;
    browser.wait_for_url("notice=plan_changed").await;
    browser
        .wait_for_text("[data-testid=notice]", "Your plan has been switched")
        .await;
    browser
        .wait_for_text("[data-testid=subscription-plan]", "Pro Monthly")
        .await;
    let plan = browser.text("[data-testid=subscription-plan]").await;
    assert!(!plan.contains("2023"), "still on the old plan: {plan}");
    assert!(!browser.exists("[data-testid=switch-pending]").await);
    assert_eq!(app.balance_hundredths(&token).await, 100_000);
    browser.screenshot(TEST, Viewport::Desktop).await;

    let phone = Browser::start(Viewport::Phone).await;
    sign_in(&app, &phone, email).await;
    phone
        .wait_for_text("[data-testid=subscription-plan]", "Pro Monthly")
        .await;
    let overflow = phone
        .script("return document.documentElement.scrollWidth - window.innerWidth;")
        .await;
    assert!(
        overflow.as_i64().unwrap_or(0) <= 0,
        "the dashboard overflows by {overflow} px"
    );
    phone
        .screenshot(&format!("{TEST}_phone"), Viewport::Phone)
        .await;
}
