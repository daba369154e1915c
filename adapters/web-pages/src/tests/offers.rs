//! `/pricing` built around offers (issue 19): one card per group and billing interval, the
//! interval toggle and its saving, the reader's currency, payment methods by the names buyers
//! know, "Current plan" and "Owned", and Buy after sign-in continuing the purchase.

use application::ports::{OrderLocator, PaymentEvent};
use application::use_cases::plans::PricingMode;
use domain::{BillingPeriod, Currency, Money, OrderId, Plan, PlanDraft, ProviderId, Timestamp};
use poem::http::StatusCode;

use super::harness::{App, Browser, START_MS, config, plan};
use crate::PageSettings;

fn grouped(mut draft: PlanDraft, group: &str, months: i64) -> PlanDraft {
    draft.group = Some(group.to_owned());
    draft.months = Some(months);
    draft
}

/// A credit pack whose credits stay valid for `months` (`None`: they never expire).
fn pack(id: &str, provider: &str, amount: &str, currency: &str, months: Option<i64>) -> PlanDraft {
    let mut draft = plan(id, provider, "credits", amount, currency);
    draft.months = months;
    for text in draft.i18n.values_mut() {
        text.duration = months.map(|m| format!("{m} months")).unwrap_or_default();
    }
    draft
}

/// A "pro" offer sold monthly by card and PayPal in USD and by a reseller in EUR, yearly by
/// card in USD; a "team" offer sold only yearly; a "life" offer by card in USD and WeChat Pay
/// in CNY; a plan of its own; and credit packs in USD (valid 12 months), CNY and JPY.
fn offers_catalog() -> Vec<Plan> {
    let mut paypal = plan("pro-paypal", "wallet_global", "recurring", "10", "USD");
    paypal.provider_refs = paypal.provider_refs.with(ProviderId::WalletGlobal, "P-1");
    let mut eur = plan("pro-eur", "mor_a", "recurring", "9.50", "EUR");
    eur.provider_refs = eur.provider_refs.with(ProviderId::MorA, "prod_1");
    let mut life_qr = plan("life-qr", "wallet_qr", "one_time", "299", "CNY");
    life_qr.group = Some("life".into());
    let mut life_card = plan("life-card", "card_gateway", "one_time", "199", "USD");
    life_card.group = Some("life".into());
    let drafts = [
        grouped(
            plan("pro-month", "card_gateway", "recurring", "10", "USD"),
            "pro",
            1,
        ),
        grouped(paypal, "pro", 1),
        grouped(eur, "pro", 1),
        grouped(
            plan("pro-year", "card_gateway", "recurring", "96", "USD"),
            "pro",
            12,
        ),
        plan("solo", "card_gateway", "recurring", "5", "USD"),
        grouped(
            plan("team-year", "card_gateway", "recurring", "299", "USD"),
            "team",
            12,
        ),
        life_card,
        life_qr,
        pack("pack-usd", "card_gateway", "17.99", "USD", Some(12)),
        pack("pack-cny", "wallet_qr", "10", "CNY", None),
        pack("pack-jpy", "card_gateway", "1000", "JPY", None),
    ];
    drafts
        .iter()
        .map(|d| Plan::from_draft(d).unwrap())
        .collect()
}

fn app() -> App {
    let mut config = config(PricingMode::Static);
    config.catalog = offers_catalog();
    App::with_config(
        config,
        PageSettings {
            secure_cookies: true,
            sandbox_notice: true,
            trust_forwarded_for: false,
            public_base_url: None,
        },
    )
}

/// The ids of the cards on a page, in order.
fn card_ids(body: &str) -> Vec<String> {
    body.split("<article class=\"plan-card")
        .skip(1)
        .filter_map(|card| {
            let start = card.find("data-plan-id=\"")? + "data-plan-id=\"".len();
            Some(card[start..].split('"').next()?.to_owned())
        })
        .collect()
}

/// The body of the card whose id is `plan-<id>`.
fn card<'b>(body: &'b str, id: &str) -> &'b str {
    let start = body
        .find(&format!("id=\"plan-{id}\""))
        .unwrap_or_else(|| panic!("no card plan-{id}"));
    let rest = &body[start..];
    &rest[..rest.find("</article>").unwrap()]
}

#[tokio::test]
async fn a_group_is_one_card_per_interval_with_its_methods_by_name() {
    let app = app();
    let page = app.browser().get("/pricing?tab=subscriptions").await;
    assert_eq!(page.status, StatusCode::OK);
    let subscriptions = &page.body[page.body.find("id=\"panel-subscriptions\"").unwrap()..];
    let subscriptions = &subscriptions[..subscriptions.find("id=\"panel-one-time\"").unwrap()];
    // Monthly shows only what is sold monthly: not the yearly-only team offer.
    assert_eq!(card_ids(subscriptions), ["pro-month", "solo"]);
    let pro = card(&page.body, "pro-month");
    assert!(pro.contains("data-offer=\"group-pro\""));
    assert!(pro.contains("data-method=\"card_gateway\""));
    assert!(pro.contains(">Card<"), "{pro}");
    assert!(pro.contains(">PayPal<"), "{pro}");
    assert!(
        !pro.contains("mor_a"),
        "the EUR method is not shown to a USD reader"
    );
    assert!(!page.body.contains("(A)") && !page.body.contains("Global wallet"));
    assert!(
        page.body
            .contains("href=\"/pricing?tab=subscriptions&amp;period=year\"")
    );
    // 12 × 10.00 = 120.00 against 96.00: save 20 %.
    assert!(
        page.body.contains("Save 20%"),
        "the yearly toggle says the saving"
    );
    let yearly = app
        .browser()
        .get("/pricing?tab=subscriptions&period=year")
        .await;
    let pro_year = card(&yearly.body, "pro-year");
    assert!(pro_year.contains("data-testid=\"saving\""));
    assert!(pro_year.contains("$96.00"));
    let yearly_panel = &yearly.body[yearly.body.find("id=\"panel-subscriptions\"").unwrap()..];
    let yearly_panel = &yearly_panel[..yearly_panel.find("id=\"panel-one-time\"").unwrap()];
    assert_eq!(
        card_ids(yearly_panel),
        ["pro-year", "team-year"],
        "yearly shows only what is sold yearly: not the monthly-only plan"
    );
    assert!(
        yearly
            .body
            .contains("aria-current=\"true\" data-period=\"year\"")
            || yearly
                .body
                .contains("data-period=\"year\" aria-current=\"true\"")
    );
}

#[tokio::test]
async fn the_currency_follows_the_query_then_the_language_then_the_offers_default() {
    let app = app();
    let browser = app.browser();
    let euros = browser.get("/pricing?tab=subscriptions&currency=EUR").await;
    let pro = card(&euros.body, "pro-eur");
    assert!(pro.contains("€9.50"), "{pro}");
    assert!(pro.contains("Card (tax included)"));
    // A chosen currency filters: nothing yearly is sold in EUR, so the toggle has no year and
    // the page shows the months sold in euros.
    let yearly = browser
        .get("/pricing?tab=subscriptions&period=year&currency=EUR")
        .await;
    assert!(!yearly.body.contains("id=\"plan-pro-year\""));
    assert!(!yearly.body.contains("data-testid=\"period-toggle\""));
    assert!(card(&yearly.body, "pro-eur").contains("€9.50"));
    // A Chinese reader sees CNY where the offer has it, the default elsewhere.
    let chinese = browser.get("/pricing?tab=one-time&lang=zh-CN").await;
    let life = card(&chinese.body, "life-qr");
    assert!(life.contains("微信支付"), "{life}");
    assert!(card(&chinese.body, "pro-month").contains("银行卡"));
    // English reader: USD; an unknown code is ignored.
    let english = browser
        .get("/pricing?tab=one-time&lang=en&currency=XYZ")
        .await;
    assert!(card(&english.body, "life-card").contains("$199.00"));
    assert!(english.body.contains("data-testid=\"currencies\""));
    assert!(english.body.contains("data-currency=\"CNY\""));
}

/// The cards of the panel of `tab` on `body`.
fn panel_cards(body: &str, tab: &str) -> Vec<String> {
    let panel = &body[body.find(&format!("id=\"panel-{tab}\"")).unwrap()..];
    let end = panel[1..]
        .find("<section class=\"tab-panel")
        .map_or(panel.len(), |e| e + 1);
    card_ids(&panel[..end])
}

#[tokio::test]
async fn a_chosen_currency_shows_only_offers_priced_in_it_on_every_tab() {
    let app = app();
    let browser = app.browser();
    let all = browser.get("/pricing?tab=credits").await;
    assert_eq!(
        panel_cards(&all.body, "credits"),
        ["pack-usd", "pack-cny", "pack-jpy"]
    );
    assert!(all.body.contains("data-currency=\"all\""));
    let dollars = browser.get("/pricing?tab=credits&currency=USD").await;
    assert_eq!(panel_cards(&dollars.body, "credits"), ["pack-usd"]);
    assert_eq!(panel_cards(&dollars.body, "one-time"), ["life-card"]);
    assert_eq!(
        panel_cards(&dollars.body, "subscriptions"),
        ["pro-month", "solo"]
    );
    let yuan = browser.get("/pricing?tab=credits&currency=CNY").await;
    assert_eq!(panel_cards(&yuan.body, "credits"), ["pack-cny"]);
    assert_eq!(
        panel_cards(&yuan.body, "subscriptions"),
        Vec::<String>::new()
    );
    assert!(
        yuan.body.contains("None of these are sold in CNY."),
        "{}",
        yuan.body
    );
    assert!(yuan.body.contains(">Show all currencies<"));
}

#[tokio::test]
async fn a_credit_pack_shows_how_long_its_credits_last_not_a_billing_period() {
    let app = app();
    let browser = app.browser();
    let english = browser.get("/pricing?tab=credits").await;
    let pack = card(&english.body, "pack-usd");
    assert!(pack.contains("$17.99"), "{pack}");
    assert!(!pack.contains("/ 12 months"), "{pack}");
    assert!(pack.contains("Credits valid for 12 months"), "{pack}");
    assert!(
        !card(&english.body, "pack-cny").contains("credits-validity"),
        "credits that never expire say nothing of validity"
    );
    let chinese = browser.get("/pricing?tab=credits&lang=zh-CN").await;
    let pack = card(&chinese.body, "pack-usd");
    assert!(pack.contains("积分 12 个月内有效"), "{pack}");
    assert!(!pack.contains("price-period"), "{pack}");
}

fn by_id(order: &str) -> OrderLocator {
    OrderLocator {
        order_id: Some(OrderId::new(order).unwrap()),
        provider_reference: None,
    }
}

async fn buy(browser: &Browser<'_>, plan_id: &str, provider: &str) -> String {
    let page = browser
        .submit(
            "/pricing",
            "/pricing/buy",
            &[("planId", plan_id), ("provider", provider)],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    page.location().rsplit('/').next().unwrap().to_owned()
}

#[tokio::test]
async fn the_current_subscription_and_an_owned_lifetime_plan_are_marked_and_not_sold_again() {
    let app = app();
    let browser = app.signed_in("cara@example.com", false).await;
    let order = buy(&browser, "pro-month", "card_gateway").await;
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
    let lifetime = buy(&browser, "life-card", "card_gateway").await;
    let paid = PaymentEvent::PaymentSucceeded {
        order: by_id(&lifetime),
        amount: Money::from_minor(19_900, Currency::Usd).unwrap(),
        occurred_at: Timestamp::from_unix_millis(START_MS + 2_000),
    };
    app.deliver(ProviderId::CardGateway, "e2", vec![paid]).await;
    let page = browser.get("/pricing?tab=subscriptions").await;
    let pro = card(&page.body, "pro-month");
    assert!(pro.contains("data-testid=\"current-plan\""), "{pro}");
    assert!(pro.contains("Current plan"));
    assert!(
        !pro.contains("action=\"/pricing/buy\""),
        "no Buy on the current plan"
    );
    assert!(card(&page.body, "solo").contains("action=\"/pricing/buy\""));
    let one_time = browser.get("/pricing?tab=one-time").await;
    let life = card(&one_time.body, "life-card");
    assert!(
        life.contains("data-testid=\"owned\"") && life.contains("Owned"),
        "{life}"
    );
    assert!(!life.contains("action=\"/pricing/buy\""));
    let chinese = browser.get("/pricing?tab=one-time&lang=zh-CN").await;
    let life_in_yuan = card(&chinese.body, "life-qr");
    assert!(
        life_in_yuan.contains("已拥有"),
        "owned whatever the currency shown: {life_in_yuan}"
    );
    assert!(!life_in_yuan.contains("action=\"/pricing/buy\""));
}

#[tokio::test]
async fn buy_while_signed_out_comes_back_after_sign_up_to_continue_that_purchase() {
    let app = app();
    let browser = app.browser();
    let page = browser.get("/pricing?tab=subscriptions").await;
    let next = "/pricing/continue?planId=pro-paypal&provider=wallet_global";
    let link =
        "/signin?next=%2Fpricing%2Fcontinue%3FplanId%3Dpro-paypal%26provider%3Dwallet_global";
    assert!(
        page.body.contains(&format!("href=\"{link}\"")),
        "{}",
        page.body
    );
    // Sign up from the sign-in page's link, which keeps `next`.
    let signup = browser
        .get(&format!("/signup?next={}", urlencode(next)))
        .await;
    let response = browser
        .post(
            "/signup",
            &[
                ("csrf", &signup.csrf()),
                ("email", "dan@example.com"),
                ("password", super::harness::PASSWORD),
                ("next", next),
            ],
        )
        .await;
    assert_eq!(response.status, StatusCode::SEE_OTHER, "{}", response.body);
    assert_eq!(response.location(), next);
    let resume = browser.get(next).await;
    assert_eq!(resume.status, StatusCode::OK);
    assert!(resume.body.contains("Continue your purchase"));
    assert!(resume.body.contains("Subscribe with PayPal"));
    assert!(resume.body.contains("name=\"planId\" value=\"pro-paypal\""));
    let bought = browser
        .submit(
            next,
            "/pricing/buy",
            &[("planId", "pro-paypal"), ("provider", "wallet_global")],
        )
        .await;
    assert_eq!(bought.status, StatusCode::SEE_OTHER);
    assert!(
        bought
            .location()
            .starts_with("https://fake.invalid/wallet_global/checkout/"),
        "{}",
        bought.location()
    );
}

#[tokio::test]
async fn continue_asks_to_sign_in_and_refuses_a_plan_not_on_offer() {
    let app = app();
    let signed_out = app
        .browser()
        .get("/pricing/continue?planId=solo&provider=card_gateway")
        .await;
    assert_eq!(signed_out.status, StatusCode::SEE_OTHER);
    assert!(
        signed_out
            .location()
            .starts_with("/signin?next=%2Fpricing%2Fcontinue")
    );
    let browser = app.signed_in("eve@example.com", false).await;
    for query in [
        "planId=nope&provider=card_gateway",
        "planId=solo&provider=wallet_global",
        "planId=secret-plan&provider=card_gateway",
    ] {
        let page = browser.get(&format!("/pricing/continue?{query}")).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{query}");
        assert!(!page.body.contains("action=\"/pricing/buy\""));
    }
    // Sign-in never sends the reader off this site, whatever `next` says.
    let signin = browser.get("/signin?next=https://evil.example/x").await;
    assert_eq!(signin.status, StatusCode::SEE_OTHER);
    assert_eq!(signin.location(), "/dashboard");
}

fn urlencode(value: &str) -> String {
    let pairs = [("v", value)];
    serde_urlencoded::to_string(pairs).unwrap()[2..].to_owned()
}

/// The admin form's fields for a monthly EUR card plan in `group`.
fn admin_plan(id: &str, group: &str) -> Vec<(&'static str, String)> {
    vec![
        ("id", id.to_owned()),
        ("duration.type", "recurring".to_owned()),
        ("provider", "card_gateway".to_owned()),
        ("currency", "EUR".to_owned()),
        ("amount", "49".to_owned()),
        ("duration.months", "1".to_owned()),
        ("cardGatewayPriceId", format!("price_{id}")),
        ("group", group.to_owned()),
        ("i18n.en.name", "Team".to_owned()),
    ]
}

#[tokio::test]
async fn the_admin_form_sets_a_group_and_refuses_one_that_is_not_a_slug() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("root@example.com", true).await;
    let form = admin_plan("team-month", "Team Plan");
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let refused = admin
        .submit("/admin/pricing/new", "/admin/pricing", &fields)
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.body.contains("data-field=\"group\""),
        "{}",
        refused.body
    );
    assert!(refused.body.contains("value=\"Team Plan\""));
    for (id, months) in [("team-month", "1"), ("team-year", "12")] {
        let mut form = admin_plan(id, "team");
        form[5].1 = months.to_owned();
        let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let created = admin
            .submit("/admin/pricing/new", "/admin/pricing", &fields)
            .await;
        assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.body);
    }
    let edit = admin.get("/admin/pricing/plans/team-year/edit").await;
    assert!(
        edit.body.contains("name=\"group\" value=\"team\""),
        "{}",
        edit.body
    );
    let pricing = admin.get("/pricing?tab=subscriptions").await;
    let subscriptions = &pricing.body[pricing.body.find("id=\"panel-subscriptions\"").unwrap()..];
    assert_eq!(
        card_ids(subscriptions),
        ["team-month"],
        "one card for the group"
    );
    assert!(pricing.body.contains("data-period=\"year\""));
}
