//! Buying through the pages, the return pages, and the dashboard.

use application::ports::{OrderLocator, PaymentEvent, PaymentStatus};
use application::use_cases::plans::PricingMode;
use domain::{BillingPeriod, Currency, Money, OrderId, ProviderId, Timestamp};
use poem::http::StatusCode;

use super::harness::{App, Browser, START_MS, config};
use crate::PageSettings;

fn by_id(order: &str) -> OrderLocator {
    OrderLocator {
        order_id: Some(OrderId::new(order).unwrap()),
        provider_reference: None,
    }
}

fn paid(order: &str, minor: i64, currency: Currency) -> PaymentEvent {
    PaymentEvent::PaymentSucceeded {
        order: by_id(order),
        amount: Money::from_minor(minor, currency).unwrap(),
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    }
}

/// Buy `plan_id` from the pricing page; the order id from the redirect.
async fn buy(browser: &Browser<'_>, plan_id: &str, provider: &str) -> (String, String) {
    let page = browser
        .submit(
            "/pricing",
            "/pricing/buy",
            &[("planId", plan_id), ("provider", provider)],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let location = page.location().to_owned();
    let order = location.rsplit('/').next().unwrap().to_owned();
    (location, order)
}

#[tokio::test]
async fn buying_sends_the_browser_to_the_provider_checkout() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("ann@example.com", false).await;
    let pricing = browser.get("/pricing").await;
    assert!(pricing.body.contains("action=\"/pricing/buy\""));
    let (location, order) = buy(&browser, "credits-100", "card_gateway").await;
    assert_eq!(
        location,
        format!("https://fake.invalid/card_gateway/checkout/{order}")
    );
    let refused = browser
        .submit(
            "/pricing",
            "/pricing/buy",
            &[("planId", "nope"), ("provider", "card_gateway")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("cannot be bought"));
}

#[tokio::test]
async fn a_qr_payment_shows_the_code_and_waits_for_the_payment() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("bea@example.com", false).await;
    let (location, order) = buy(&browser, "qr-credits", "wallet_qr").await;
    assert_eq!(location, format!("/pay/qr/{order}"));
    let page = browser.get(&location).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<svg"));
    assert!(!page.body.contains("<?xml"));
    assert!(page.body.contains(&format!("data-poll-order=\"{order}\"")));
    assert!(page.body.contains(&format!(
        "data-poll-next=\"/payment-success?orderId={order}\""
    )));
    assert!(
        page.body
            .contains("href=\"https://fake.invalid/wallet_qr/checkout/"),
        "sandbox link"
    );
    app.deliver(
        ProviderId::WalletQr,
        "e1",
        vec![paid(&order, 6800, Currency::Cny)],
    )
    .await;
    let after = browser.get(&location).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER);
    assert_eq!(
        after.location(),
        format!("/payment-success?orderId={order}")
    );
    let stranger = app.signed_in("cat@example.com", false).await;
    assert_eq!(stranger.get(&location).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn payment_success_waits_for_the_webhook_then_shows_the_new_balance() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("dan@example.com", false).await;
    let (_, order) = buy(&browser, "credits-100", "card_gateway").await;
    let success = format!("/payment-success?orderId={order}");
    let waiting = browser.get(&success).await;
    assert!(waiting.body.contains("Confirming your payment"));
    assert!(
        waiting
            .body
            .contains(&format!("data-poll-order=\"{order}\""))
    );
    app.deliver(
        ProviderId::CardGateway,
        "e1",
        vec![paid(&order, 1000, Currency::Usd)],
    )
    .await;
    let done = browser.get(&success).await;
    assert!(done.body.contains("Payment successful"));
    assert!(done.body.contains("100.00 credits were added"));
    assert!(
        done.body
            .contains("data-testid=\"balance\">100.00</strong>")
    );
    let credits = browser.get("/dashboard?tab=credits").await;
    assert!(
        credits
            .body
            .contains("data-testid=\"credit-balance\">100.00<")
    );
    assert!(credits.body.contains("Credits purchased"));
    assert!(credits.body.contains("+100.00"));
    assert!(
        credits
            .body
            .contains("data-testid=\"transaction-plan\">credits-100 name<"),
        "a purchase is named by its plan"
    );
    assert!(
        credits.body.contains("<time datetime=\""),
        "times are <time> elements"
    );
    assert!(
        credits.body.contains(" UTC</time>"),
        "in UTC until the script runs"
    );
    assert!(
        credits.body.contains("data-label=\"Balance"),
        "stacked-row labels"
    );
    let chinese = browser.get("/dashboard?tab=credits&lang=zh-CN").await;
    assert!(chinese.body.contains("购买积分"));
    assert!(chinese.body.contains("积分状态"));
}

#[tokio::test]
async fn payment_success_captures_an_approved_payment_at_once() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("eve@example.com", false).await;
    let (_, order) = buy(&browser, "credits-100", "card_gateway").await;
    let fake = &app.gateways[&ProviderId::CardGateway];
    let id = OrderId::new(&order).unwrap();
    fake.answer_capture(
        &id,
        PaymentStatus::Succeeded {
            amount: Money::from_minor(1000, Currency::Usd).unwrap(),
            paid_at: Timestamp::from_unix_millis(START_MS + 1_000),
        },
    );
    // The provider's return adds its own parameters (PayPal: token, PayerID).
    let success = format!("/payment-success?orderId={order}&token=5O190127TN364715T&PayerID=X");
    let done = browser.get(&success).await;
    assert!(done.body.contains("Payment successful"), "{}", done.body);
    assert!(done.body.contains("100.00 credits were added"));
    let captures = fake.captures();
    assert_eq!(captures.len(), 1);
    assert_eq!(captures[0].order_id, id);
    // Another user's order is not captured.
    let stranger = app.signed_in("fox@example.com", false).await;
    assert_eq!(stranger.get(&success).await.status, StatusCode::NOT_FOUND);
    assert_eq!(fake.captures().len(), 1);
}

#[tokio::test]
async fn the_cancel_page_says_nothing_was_charged() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("fay@example.com", false).await;
    let (_, order) = buy(&browser, "lifetime", "card_gateway").await;
    let page = browser
        .get(&format!("/payment-cancel?orderId={order}"))
        .await;
    assert!(page.body.contains("nothing was charged"));
    assert!(page.body.contains("lifetime name"));
    assert!(page.body.contains("href=\"/pricing\""));
    // Leaving the checkout cancelled the order at once, here and at the provider: no dead
    // "continue payment" link stays on the dashboard.
    let closed = app.gateways[&ProviderId::CardGateway].closed();
    assert_eq!(closed, vec![OrderId::new(order.as_str()).unwrap()]);
    let dashboard = browser.get("/dashboard").await;
    assert!(
        !dashboard.body.contains(&format!("checkout/{order}")),
        "{}",
        dashboard.body
    );
}

/// Issue 19 point 2: the return pages word each status as it is.
#[tokio::test]
async fn the_return_pages_tell_a_declined_or_already_paid_order_as_it_is() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("gus@example.com", false).await;
    let (_, declined) = buy(&browser, "credits-100", "card_gateway").await;
    let failed = PaymentEvent::PaymentFailed {
        order: by_id(&declined),
        reason: "card declined".into(),
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    };
    app.deliver(ProviderId::CardGateway, "f1", vec![failed])
        .await;
    for path in ["/payment-cancel", "/payment-success"] {
        let page = browser.get(&format!("{path}?orderId={declined}")).await;
        assert!(
            page.body.contains("The payment did not go through"),
            "{path}: {}",
            page.body
        );
        assert!(page.body.contains("card declined"), "{path}");
        assert!(!page.body.contains("You cancelled the checkout"), "{path}");
    }
    let (_, paid_order) = buy(&browser, "credits-100", "card_gateway").await;
    app.deliver(
        ProviderId::CardGateway,
        "p1",
        vec![paid(&paid_order, 1000, Currency::Usd)],
    )
    .await;
    let back = browser
        .get(&format!("/payment-cancel?orderId={paid_order}"))
        .await;
    assert!(
        back.body.contains("This order is already paid"),
        "{}",
        back.body
    );
    let chinese = browser
        .get(&format!("/payment-cancel?orderId={declined}&lang=zh-CN"))
        .await;
    assert!(chinese.body.contains("付款未成功"));
}

#[tokio::test]
async fn a_subscription_is_shown_and_cancelled_at_period_end_from_the_dashboard() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("gus@example.com", false).await;
    let (_, order) = buy(&browser, "pro-monthly", "card_gateway").await;
    let day = 86_400_000;
    let period = BillingPeriod::new(
        Timestamp::from_unix_millis(START_MS),
        Timestamp::from_unix_millis(START_MS + 30 * day),
    )
    .unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&order),
        provider_subscription_id: "sub_1".into(),
        period,
        amount: None,
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    };
    app.deliver(ProviderId::CardGateway, "e1", vec![activated])
        .await;
    let dashboard = browser.get("/dashboard").await;
    assert!(dashboard.body.contains("pro-monthly name"));
    assert!(dashboard.body.contains("Renews on"));
    assert!(
        dashboard
            .body
            .contains("data-testid=\"cancel-subscription\"")
    );
    assert!(dashboard.body.contains("data-testid=\"orders\""));
    assert!(
        dashboard.body.contains("<time datetime=\""),
        "dates are <time> elements"
    );
    let credits = browser.get("/dashboard?tab=credits").await;
    assert!(
        credits
            .body
            .contains("data-testid=\"transaction-plan\">pro-monthly name<"),
        "a subscription's grant is named by its plan"
    );
    let id_marker = "name=\"subscriptionId\" value=\"";
    let start = dashboard.body.find(id_marker).unwrap() + id_marker.len();
    let subscription_id =
        &dashboard.body[start..start + dashboard.body[start..].find('"').unwrap()];
    let cancelled = browser
        .post(
            "/dashboard/subscription/cancel",
            &[
                ("csrf", &dashboard.csrf()),
                ("subscriptionId", subscription_id),
            ],
        )
        .await;
    assert_eq!(
        cancelled.location(),
        "/dashboard?notice=subscription_cancelled"
    );
    assert_eq!(
        app.gateways[&ProviderId::CardGateway].cancelled_subscriptions(),
        vec!["sub_1".to_owned()]
    );
    let after = browser.get(cancelled.location()).await;
    assert!(after.body.contains("Your subscription is cancelled"));
    assert!(after.body.contains("Ends on"));
    assert!(!after.body.contains("data-testid=\"cancel-subscription\""));
}

fn activated(order: &str, subscription: &str) -> PaymentEvent {
    let day = 86_400_000;
    let period = BillingPeriod::new(
        Timestamp::from_unix_millis(START_MS),
        Timestamp::from_unix_millis(START_MS + 30 * day),
    )
    .unwrap();
    PaymentEvent::SubscriptionActivated {
        order: by_id(order),
        provider_subscription_id: subscription.into(),
        period,
        amount: None,
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    }
}

#[tokio::test]
async fn buying_what_is_already_held_shows_a_readable_conflict_page() {
    let app = App::new(PricingMode::Static);
    let browser = app.signed_in("hal@example.com", false).await;
    let (_, order) = buy(&browser, "pro-monthly", "card_gateway").await;
    app.deliver(
        ProviderId::CardGateway,
        "e1",
        vec![activated(&order, "sub_1")],
    )
    .await;
    let form = [("planId", "pro-monthly"), ("provider", "card_gateway")];
    let again = browser.submit("/pricing", "/pricing/buy", &form).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("You already have a subscription"));
    assert!(again.body.contains("href=\"/dashboard\""));
    let (_, lifetime) = buy(&browser, "lifetime", "card_gateway").await;
    app.deliver(
        ProviderId::CardGateway,
        "e2",
        vec![paid(&lifetime, 9_900, Currency::Usd)],
    )
    .await;
    let form = [("planId", "lifetime"), ("provider", "card_gateway")];
    let again = browser.submit("/pricing", "/pricing/buy", &form).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("You already own this plan"));
    let chinese = browser
        .submit("/pricing?lang=zh-CN", "/pricing/buy", &form)
        .await;
    assert_eq!(chinese.status, StatusCode::CONFLICT);
    // Credit packs stay for sale.
    buy(&browser, "credits-100", "card_gateway").await;
}

#[tokio::test]
async fn the_dashboard_lists_every_subscription_with_its_own_cancel_button_and_each_access() {
    let mut several = config(PricingMode::Static);
    several.allow_several_subscriptions = true;
    let settings = PageSettings {
        secure_cookies: true,
        sandbox_notice: true,
        trust_forwarded_for: false,
        public_base_url: None,
    };
    let app = App::with_config(several, settings);
    let browser = app.signed_in("ida@example.com", false).await;
    for (event, subscription) in [("e1", "sub_1"), ("e2", "sub_2")] {
        let (_, order) = buy(&browser, "pro-monthly", "card_gateway").await;
        let events = vec![activated(&order, subscription)];
        app.deliver(ProviderId::CardGateway, event, events).await;
    }
    let (_, lifetime) = buy(&browser, "lifetime", "card_gateway").await;
    let events = vec![paid(&lifetime, 9_900, Currency::Usd)];
    app.deliver(ProviderId::CardGateway, "e3", events).await;
    let dashboard = browser.get("/dashboard").await;
    assert_eq!(
        dashboard
            .body
            .matches("data-testid=\"held-subscription\"")
            .count(),
        2
    );
    assert_eq!(
        dashboard
            .body
            .matches("data-testid=\"cancel-subscription\"")
            .count(),
        2
    );
    assert_eq!(
        dashboard
            .body
            .matches("data-testid=\"held-one-time\"")
            .count(),
        1
    );
    assert!(dashboard.body.contains("Lifetime access"));
    // The second subscription's own button cancels it, not the first.
    let id_marker = "name=\"subscriptionId\" value=\"";
    let ids: Vec<&str> = dashboard
        .body
        .match_indices(id_marker)
        .map(|(i, _)| {
            let start = i + id_marker.len();
            &dashboard.body[start..start + dashboard.body[start..].find('"').unwrap()]
        })
        .collect();
    assert_eq!(ids.len(), 2);
    let cancelled = browser
        .post(
            "/dashboard/subscription/cancel",
            &[("csrf", &dashboard.csrf()), ("subscriptionId", ids[1])],
        )
        .await;
    assert_eq!(
        cancelled.location(),
        "/dashboard?notice=subscription_cancelled"
    );
    assert_eq!(
        app.gateways[&ProviderId::CardGateway]
            .cancelled_subscriptions()
            .len(),
        1
    );
    let after = browser.get("/dashboard").await;
    assert_eq!(
        after
            .body
            .matches("data-testid=\"cancel-subscription\"")
            .count(),
        1
    );
    let chinese = browser.get("/dashboard?lang=zh-CN").await;
    assert!(chinese.body.contains("终身"), "the zh-CN catalog is used");
}
