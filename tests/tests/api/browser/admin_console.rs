//! The admin console in a real browser (issue 18): an administrator finds a customer, grants
//! 100 credits that the customer then sees on their dashboard, refunds the customer's order
//! through the sandbox and sees the clawback in their ledger, replays a recorded webhook event,
//! and creates and revokes an API key; every console page is photographed at 1280 and at 390 px.

use std::time::{Duration, Instant};

use tests::{ADMIN_PASSWORD, spawn_app_with_admin};

use super::webdriver::{Browser, Viewport, browser_available};
use super::{buy_through_the_sandbox, sign_in, sign_up};

/// The console's pages, photographed on both viewports (the customer's page separately).
const PAGES: [(&str, &str); 10] = [
    ("overview", "/admin"),
    ("customers", "/admin/customers"),
    ("accounts", "/admin/accounts"),
    ("orders", "/admin/orders"),
    ("webhooks", "/admin/webhooks"),
    ("api_keys", "/admin/api-keys"),
    ("endpoints", "/admin/webhook-endpoints"),
    ("audit", "/admin/audit"),
    ("pricing", "/admin/pricing"),
    ("promo_codes", "/admin/promo-codes"),
];

/// Reload `url` until `css` shows `needle` (a webhook from the sandbox lands in its own time).
async fn reload_until(browser: &Browser, url: &str, css: &str, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        browser.goto(url).await;
        if browser.exists(css).await && browser.text(css).await.contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{css:?} never showed {needle:?} at {url}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Accept the page's `data-confirm` questions without a dialog.
async fn accept_confirms(browser: &Browser) {
    browser
        .script("window.confirm = function () { return true; }; return true")
        .await;
}

#[tokio::test]
async fn browser_an_admin_grants_refunds_and_manages_api_keys() {
    const TEST: &str = "browser_an_admin_grants_refunds_and_manages_api_keys";
    if !browser_available(TEST) {
        return;
    }
    let (app, _) = spawn_app_with_admin(|_| {}).await;
    let customer = Browser::start(Viewport::Desktop).await;
    sign_up(&app, &customer, "cleo@example.com").await;
    buy_through_the_sandbox(&app, &customer, "credits", "credits_card_500").await;
    let admin = Browser::start(Viewport::Desktop).await;
    sign_in_admin(&app, &admin).await;
    admin.click(".site-header a[href='/admin']").await;
    admin.wait_for_url("/admin").await;
    admin.click(".console-nav a[href='/admin/customers']").await;
    admin
        .type_into("[data-testid=customer-query]", "cleo")
        .await;
    admin.click("[data-testid=search]").await;
    admin.wait_for_url("query=cleo").await;
    admin.click("[data-testid=customer-link]").await;
    admin
        .wait_for_text("[data-testid=customer-email]", "cleo@example.com")
        .await;
    let page = admin.url().await;
    assert_eq!(admin.text("[data-testid=customer-balance]").await, "500.00");
    admin.type_into("[data-testid=adjust-amount]", "100").await;
    admin
        .type_into("[data-testid=adjust-reason]", "Sorry for the outage")
        .await;
    admin.click("[data-testid=adjust]").await;
    admin
        .wait_for_text("[data-testid=confirm]", "Grant 100 credits")
        .await;
    admin.click("[data-testid=confirm-action]").await;
    admin.wait_for_url("notice=granted").await;
    assert_eq!(admin.text("[data-testid=customer-balance]").await, "600.00");
    customer.goto(&app.url("/dashboard?tab=credits")).await;
    assert_eq!(
        customer.text("[data-testid=credit-balance]").await,
        "600.00"
    );
    customer
        .wait_for_text("[data-testid=transactions]", "+100.00")
        .await;
    // An administrator's grant is compensation unless the form says otherwise: the balance
    // says what its credits are.
    customer
        .wait_for_text(
            "[data-testid=balance-by-category]",
            "500.00 paid · 100.00 compensation",
        )
        .await;
    customer
        .screenshot(&format!("{TEST}_customer_dashboard"), Viewport::Desktop)
        .await;
    admin.goto(&page).await;
    admin.click("[data-testid=refund-order]").await;
    admin
        .wait_for_text("[data-testid=confirm]", "Refund order")
        .await;
    admin.click("[data-testid=confirm-action]").await;
    admin.wait_for_url("notice=refunded").await;
    reload_until(
        &admin,
        &page,
        "[data-testid=customer-ledger]",
        "refund_clawback",
    )
    .await;
    admin
        .screenshot(&format!("{TEST}_customer"), Viewport::Desktop)
        .await;
    // Replay a recorded event: it was applied, so the replay is a duplicate and the balance
    // the refund left stays as it is.
    admin.goto(&app.url("/admin/webhooks")).await;
    admin.click("[data-testid=replay]").await;
    admin
        .wait_for_text("[data-testid=confirm]", "through the pipeline")
        .await;
    admin.click("[data-testid=confirm-action]").await;
    admin.wait_for_url("notice=replayed").await;
    admin
        .wait_for_text("[data-testid=notice]", "The event was replayed")
        .await;
    admin.goto(&app.url("/admin/audit")).await;
    assert!(
        admin.exists("[data-action='order.refunded']").await,
        "the refund is in the audit log"
    );
    assert!(
        !admin.exists("[data-action='webhook_event.replayed']").await,
        "a replay that changed nothing (a duplicate) writes no entry"
    );
    admin.goto(&app.url("/admin/api-keys")).await;
    admin.type_into("[data-testid=key-name]", "Backend").await;
    admin.click("[data-testid='scope-credits:consume']").await;
    admin.click("[data-testid=create-key]").await;
    let secret = admin.text("[data-testid=new-key-secret]").await;
    assert!(secret.starts_with("tly_"), "{secret}");
    admin
        .screenshot(&format!("{TEST}_new_key"), Viewport::Desktop)
        .await;
    admin.goto(&app.url("/admin/api-keys")).await;
    assert!(!admin.text("main").await.contains(&secret), "shown once");
    accept_confirms(&admin).await;
    admin.click("[data-testid=revoke-key]").await;
    admin.wait_for_url("notice=key_revoked").await;
    admin
        .wait_for_text("[data-testid=api-keys]", "Revoked")
        .await;
    admin.goto(&app.url("/admin/pricing")).await;
    admin.click("[data-testid=import]").await;
    admin.wait_for_url("notice=imported").await;
    admin
        .screenshot(&format!("{TEST}_pricing_imported"), Viewport::Desktop)
        .await;
    // Every row's buttons, Delete last, stay inside the table's box at 1280 px.
    let outside = admin
        .script(
            "var wrap = document.querySelector('.table-wrap').getBoundingClientRect(); \
             return Array.from(document.querySelectorAll('.actions-cell .btn')) \
             .filter(b => b.getBoundingClientRect().right > wrap.right + 1).length",
        )
        .await;
    assert_eq!(
        outside,
        serde_json::json!(0),
        "a button sticks out of the plans table"
    );
    for (name, path) in PAGES {
        admin.goto(&app.url(path)).await;
        admin
            .screenshot(&format!("{TEST}_{name}"), Viewport::Desktop)
            .await;
    }
    let phone = Browser::start(Viewport::Phone).await;
    sign_in_admin(&app, &phone).await;
    phone.goto(&page).await;
    phone
        .screenshot(&format!("{TEST}_customer_phone"), Viewport::Phone)
        .await;
    for (name, path) in PAGES {
        phone.goto(&app.url(path)).await;
        phone
            .screenshot(&format!("{TEST}_{name}_phone"), Viewport::Phone)
            .await;
        let wide = phone
            .script("return document.documentElement.scrollWidth > window.innerWidth")
            .await;
        assert_eq!(
            wide,
            serde_json::Value::Bool(false),
            "{path} is wider than the phone"
        );
    }
}

/// Sign in as the administrator `spawn_app_with_admin` made.
async fn sign_in_admin(app: &tests::TestApp, browser: &Browser) {
    assert_eq!(
        ADMIN_PASSWORD,
        super::PASSWORD,
        "one password for every test account"
    );
    sign_in(app, browser, "admin@example.com").await;
}

/// An administrator caps a customer's monthly spending from the customer's page: the limit
/// shows with its meter, and the customer's credits tab shows it too. Photographed at 1280 and
/// 390 px.
#[tokio::test]
async fn browser_an_admin_caps_a_customer_s_spending() {
    const TEST: &str = "browser_an_admin_caps_a_customer_s_spending";
    if !browser_available(TEST) {
        return;
    }
    let (app, _) = spawn_app_with_admin(|_| {}).await;
    let customer = Browser::start(Viewport::Phone).await;
    sign_up(&app, &customer, "dara@example.com").await;
    let admin = Browser::start(Viewport::Desktop).await;
    sign_in_admin(&app, &admin).await;
    admin.goto(&app.url("/admin/customers?query=dara")).await;
    admin.click("[data-testid=customer-link]").await;
    admin
        .wait_for_text("[data-testid=customer-email]", "dara@example.com")
        .await;
    let page = admin.url().await;
    admin.type_into("#limit-credits", "250").await;
    admin
        .script("document.querySelector('#limit-window').value = 'month'; return 0")
        .await;
    admin.click("[data-testid=add-limit-button]").await;
    admin.wait_for_url("notice=limit_added").await;
    admin
        .wait_for_text(
            "[data-testid=spend-limits]",
            "0.00 of 250.00 credits per month",
        )
        .await;
    assert!(admin.exists("[data-testid=spend-limit] meter").await);
    admin
        .script("document.querySelector('[data-testid=spend-limits]').scrollIntoView(); return 0")
        .await;
    admin
        .screenshot(&format!("{TEST}_desktop"), Viewport::Desktop)
        .await;
    let phone = Browser::start(Viewport::Phone).await;
    sign_in_admin(&app, &phone).await;
    phone.goto(&page).await;
    phone
        .script("document.querySelector('[data-testid=spend-limits]').scrollIntoView(); return 0")
        .await;
    let overflow = phone
        .script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
        )
        .await;
    assert_eq!(overflow, 0, "no horizontal overflow at 390 px");
    phone.screenshot(TEST, Viewport::Phone).await;
    customer.goto(&app.url("/dashboard?tab=credits")).await;
    customer
        .wait_for_text(
            "[data-testid=spend-limits]",
            "0.00 of 250.00 credits per month",
        )
        .await;
}

/// An administrator creates a promo code on the console; a customer on a phone redeems it on
/// the credits tab (in lower case), sees the credits as promotional, and a second try is told
/// it was redeemed already; the console shows the redemption against the code's limit, and
/// switching the code off makes it invalid. Photographed at 1280 and 390 px.
#[tokio::test]
async fn browser_a_promo_code_is_created_on_the_console_and_redeemed_on_the_dashboard() {
    const TEST: &str =
        "browser_a_promo_code_is_created_on_the_console_and_redeemed_on_the_dashboard";
    if !browser_available(TEST) {
        return;
    }
    let (app, _) = spawn_app_with_admin(|_| {}).await;
    let admin = Browser::start(Viewport::Desktop).await;
    sign_in_admin(&app, &admin).await;
    admin.goto(&app.url("/admin")).await;
    admin
        .click(".console-nav a[href='/admin/promo-codes']")
        .await;
    admin.wait_for_url("/admin/promo-codes").await;
    admin
        .type_into("[data-testid=promo-code]", "Launch-50")
        .await;
    admin.type_into("[data-testid=promo-credits]", "50").await;
    admin.type_into("#promo-max", "100").await;
    admin.click("[data-testid=create-promo-submit]").await;
    admin.wait_for_url("notice=promo_created").await;
    admin
        .wait_for_text("[data-testid=promo-codes]", "LAUNCH-50")
        .await;

    let customer = Browser::start(Viewport::Phone).await;
    sign_up(&app, &customer, "ren@example.com").await;
    customer.goto(&app.url("/dashboard?tab=credits")).await;
    customer
        .type_into("[data-testid=promo-code-input]", "launch-50")
        .await;
    customer.click("[data-testid=redeem-promo]").await;
    customer.wait_for_url("notice=promo_redeemed").await;
    customer
        .wait_for_text("[data-testid=notice]", "50.00 credits were added")
        .await;
    assert_eq!(customer.text("[data-testid=credit-balance]").await, "50.00");
    customer
        .wait_for_text("[data-testid=transactions]", "Promotional credits")
        .await;
    let overflow = customer
        .script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
        )
        .await;
    assert_eq!(overflow, 0, "no horizontal overflow at 390 px");
    customer
        .screenshot(&format!("{TEST}_customer"), Viewport::Phone)
        .await;
    customer
        .type_into("[data-testid=promo-code-input]", "LAUNCH-50")
        .await;
    customer.click("[data-testid=redeem-promo]").await;
    customer.wait_for_url("notice=promo_already").await;
    assert_eq!(customer.text("[data-testid=credit-balance]").await, "50.00");

    admin.goto(&app.url("/admin/promo-codes")).await;
    admin
        .wait_for_text("[data-testid=promo-codes]", "1 / 100")
        .await;
    admin
        .screenshot(&format!("{TEST}_console"), Viewport::Desktop)
        .await;
    admin.click("[data-testid=promo-disable]").await;
    admin.wait_for_url("notice=promo_disabled").await;
    let (_, other) = app.user("sol@example.com").await;
    let (status, refused) = app
        .post(
            &other,
            "/api/promo-codes/redeem",
            &serde_json::json!({"code": "LAUNCH-50"}),
            None,
        )
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (404, Some("promo_code_invalid"))
    );
}

/// A customer on a phone saves a card for automatic top-up from the dashboard's credits tab
/// (buying the pack with consent in the sandbox), turns the rule on, and a spend below the
/// threshold buys the pack by itself: the panel shows the card (Visa •••• 4242), the rule and
/// the paid top-up; the console's customer page shows the same status. Photographed at 390 and
/// 1280 px.
#[tokio::test]
async fn browser_a_card_is_saved_for_automatic_top_up_and_a_spend_refills_the_balance() {
    const TEST: &str =
        "browser_a_card_is_saved_for_automatic_top_up_and_a_spend_refills_the_balance";
    if !browser_available(TEST) {
        return;
    }
    let (app, admin_token) = spawn_app_with_admin(|_| {}).await;
    let customer = Browser::start(Viewport::Phone).await;
    sign_up(&app, &customer, "mia@example.com").await;
    customer.goto(&app.url("/dashboard?tab=credits")).await;
    customer
        .wait_for_text("[data-testid=auto-top-up]", "No card saved yet")
        .await;
    customer.click("[data-testid=save-card] button").await;
    customer.wait_for_url("/sandbox/checkout/").await;
    customer.click("form[action$='/pay'] button").await;
    customer.wait_for_url("/payment-success?orderId=").await;
    let panel = app.url("/dashboard?tab=credits");
    reload_until(&customer, &panel, "[data-testid=saved-method]", "4242").await;
    customer.type_into("#top-up-threshold", "10000").await;
    customer.click("[data-testid=save-top-up]").await;
    customer.wait_for_url("notice=top_up_saved").await;
    customer
        .wait_for_text("[data-testid=top-up-status]", "On")
        .await;

    let login = serde_json::json!({"email": "mia@example.com", "password": super::PASSWORD});
    let (status, signed_in) = app.post("", "/api/auth/login", &login, None).await;
    assert_eq!(status, 200, "{signed_in}");
    let token = signed_in["token"].as_str().expect("token");
    let (_, me) = app.get(token, "/api/auth/me").await;
    let user_id = me["id"].as_str().expect("user id").to_owned();
    let spender = app.api_key(&admin_token, &["credits:consume"]).await;
    let body = serde_json::json!({"userId": user_id, "feature": "image"});
    let (status, spent) = app
        .post(&spender, "/api/credits/consume", &body, Some("b1"))
        .await;
    assert_eq!(status, 201, "{spent}");
    // The page reads the balance before the top-ups: wait for the balance, then the history.
    reload_until(&customer, &panel, "[data-testid=credit-balance]", "995.00").await;
    assert!(
        customer
            .text("[data-testid=top-up-history]")
            .await
            .contains("Paid")
    );
    let overflow = customer
        .script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
        )
        .await;
    assert_eq!(overflow, 0, "no horizontal overflow at 390 px");
    customer
        .script("document.querySelector('[data-testid=auto-top-up]').scrollIntoView(); return 1")
        .await;
    customer
        .screenshot(&format!("{TEST}_phone"), Viewport::Phone)
        .await;

    let desktop = Browser::start(Viewport::Desktop).await;
    sign_in(&app, &desktop, "mia@example.com").await;
    desktop.goto(&panel).await;
    desktop
        .wait_for_text("[data-testid=auto-top-up]", "Used for top-ups")
        .await;
    desktop
        .screenshot(&format!("{TEST}_desktop"), Viewport::Desktop)
        .await;
    let admin = Browser::start(Viewport::Desktop).await;
    sign_in_admin(&app, &admin).await;
    admin
        .goto(&app.url(&format!("/admin/customers/{user_id}")))
        .await;
    admin
        .wait_for_text("[data-testid=console-auto-top-up]", "4242")
        .await;
    admin
        .screenshot(&format!("{TEST}_console"), Viewport::Desktop)
        .await;
}
