//! Issue 14 findings 1 and 2 with every provider that sells subscriptions (Stripe, PayPal,
//! Creem, Dodo and Waffo Pancake; Alipay and WeChat Pay sell none), through HTTP and webhooks
//! the service accepts as genuinely signed.
//!
//! The app's own sandbox simulates each provider and is made to send the hostile event itself,
//! as a real provider does when something is set up wrong at its end: `subscribe` bills a
//! checkout as a subscription of another amount (a product misconfigured as recurring), and
//! `renew` with a price bills a renewal at a price changed at the provider. So even where the
//! gateway asks the provider about the event (PayPal verifies each webhook by asking PayPal,
//! Creem's renewal amount is read from Creem's API, Dodo's events describe the checkout the
//! provider keeps), it hears exactly what it would hear from the provider.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::api::{Account, Api, REQUEST_TIMEOUT, Reply, counter};

/// What a provider that sells subscriptions sells, from the shipped catalog.
struct Sells {
    provider: &'static str,
    /// A one-time plan: a credits pack where the provider has one (Creem has none: its
    /// lifetime plan).
    one_time: &'static str,
    /// A recurring plan that grants credits every period.
    recurring: &'static str,
    /// Its billing period.
    interval_months: u32,
}

/// Every provider that sells subscriptions.
const SUBSCRIPTION_PROVIDERS: [Sells; 5] = [
    Sells {
        provider: "card_gateway",
        one_time: "credits_card_500",
        recurring: "pro_monthly",
        interval_months: 1,
    },
    Sells {
        provider: "wallet_global",
        one_time: "credits_wallet_global_2000",
        recurring: "pro_monthly_wallet_global",
        interval_months: 1,
    },
    Sells {
        provider: "mor_a",
        one_time: "lifetime_mor_a",
        recurring: "pro_monthly_eur",
        interval_months: 1,
    },
    Sells {
        provider: "mor_b",
        one_time: "credits_mor_b_10000",
        recurring: "team_yearly",
        interval_months: 12,
    },
    Sells {
        provider: "mor_c",
        one_time: "credits_mor_c_jpy",
        recurring: "pro_quarterly",
        interval_months: 3,
    },
];

/// Gives each buyer an address of its own.
static NEXT_ADDRESS: AtomicUsize = AtomicUsize::new(1);

/// An app that tells clients apart by `X-Forwarded-For`, as behind a proxy, so that every
/// buyer a test needs registers within the per-client limit.
async fn open_app() -> (tests::TestApp, Api) {
    let app = tests::spawn_app_with(|s| s.trust_forwarded_for = true).await;
    let api = Api::new(&app.address);
    (app, api)
}

/// A buyer: an account, and a browser at an address of its own.
struct Buyer {
    browser: Api,
    account: Account,
}

/// Register `email` from a browser at an address of its own, which the buyer then buys with
/// (registration and initiation are rate limited per client).
async fn register(api: &Api, email: &str) -> Buyer {
    let n = NEXT_ADDRESS.fetch_add(1, Ordering::Relaxed) % 250;
    let mut headers = reqwest::header::HeaderMap::new();
    let address = format!("203.0.113.{n}").parse().expect("a header value");
    headers.insert("x-forwarded-for", address);
    let client = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .expect("http client");
    let browser = Api {
        client,
        base: api.base.clone(),
    };
    let account = browser.register(email).await;
    Buyer { browser, account }
}

/// How many webhooks of `provider` the service has recorded as `mismatch`.
async fn mismatches(api: &Api, provider: &str) -> u64 {
    let labels = [("provider", provider), ("result", "mismatch")];
    counter(&api.metrics().await, "tally_webhooks_total", &labels)
}

/// `GET /api/credits/status` of the buyer.
async fn credit_status(api: &Api, buyer: &Account) -> Value {
    let reply = api.get(&buyer.token, "/api/credits/status").await;
    assert_eq!(reply.status, 200, "status: {reply:?}");
    reply.body
}

/// The buyer's subscriptions as `/api/credits/status` lists them.
async fn subscriptions(api: &Api, buyer: &Account) -> Vec<Value> {
    credit_status(api, buyer).await["subscriptions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Poll the balance until it is `expected` (at most 5 s); returns the last one read.
async fn wait_for_balance(api: &Api, buyer: &Account, expected: i64) -> i64 {
    let mut now = api.balance(&buyer.token, None).await;
    for _ in 0..50 {
        if now == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = api.balance(&buyer.token, None).await;
    }
    now
}

/// The provider bills our order's open checkout as a subscription of `amount_minor` every
/// `interval_months`, and sends its activation webhooks before this returns.
async fn provider_subscribes(api: &Api, order: &str, amount_minor: i64, interval_months: u32) {
    let payment = api.sandbox_payment(order).await;
    let id = payment["id"].as_str().expect("sandbox payment");
    let body = json!({ "amountMinor": amount_minor, "intervalMonths": interval_months });
    let reply = api.sandbox_action(id, "subscribe", &body).await;
    assert_eq!(reply.status, 200, "subscribe {order}: {reply:?}");
    let billed = &reply.body["payment"];
    assert_eq!(
        billed["status"], "paid",
        "the provider took the money: {reply:?}"
    );
    assert!(
        billed["subscriptionId"].is_string(),
        "the provider started a subscription: {reply:?}"
    );
}

/// The provider bills the next period of its subscription `subscription` (at the price in
/// `body`, if any) and sends the renewal webhooks before this returns.
async fn provider_renews(api: &Api, subscription: &str, body: &Value) -> Reply {
    let path = format!("/sandbox/api/subscriptions/{subscription}/renew");
    let reply = api.send(api.client.post(api.url(&path)).json(body)).await;
    assert_eq!(reply.status, 200, "renew {subscription} {body}: {reply:?}");
    reply
}

/// A validly signed activation that `order` does not allow was acknowledged, recorded as a
/// mismatch, and started, paid and granted nothing.
async fn assert_nothing_started(
    api: &Api,
    buyer: &Account,
    order: &str,
    provider: &str,
    before: u64,
) {
    let recorded = mismatches(api, provider).await - before;
    let metrics = api.metrics().await;
    let webhooks: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("tally_webhooks_total") && l.contains(provider))
        .collect();
    assert!(
        recorded >= 1,
        "{provider}: recorded as a mismatch ({recorded}); webhooks: {webhooks:?}"
    );
    let status = api.order_status(&buyer.token, order).await;
    assert_eq!(
        status, "pending",
        "{provider}: the order is not paid; webhooks: {webhooks:?}"
    );
    assert_eq!(
        api.balance(&buyer.token, None).await,
        0,
        "{provider}: nothing granted"
    );
    let ledger = api.ledger(&buyer.token, None).await;
    assert!(ledger.is_empty(), "{provider}: no credit moved: {ledger:?}");
    let status = credit_status(api, buyer).await;
    assert_eq!(
        status["subscriptions"].as_array().map_or(0, Vec::len),
        0,
        "{provider}: no subscription started: {status}"
    );
    assert_eq!(
        status["hasAccess"], false,
        "{provider}: no access: {status}"
    );
}

/// Issue 14 finding 1, with every provider that sells subscriptions: the provider bills the
/// checkout of a one-time order (a credits pack; Creem's lifetime plan) as a subscription and
/// sends its genuinely signed activation, at 0.01 (the finding) and, for another order, at the
/// order's own price (the plan type alone). Each time the order stays pending, nothing is paid
/// or granted, no subscription starts, and the activation is recorded as a mismatch. Fails when
/// activation stops checking the plan type.
#[tokio::test]
async fn a_subscription_any_provider_starts_for_a_one_time_order_starts_nothing() {
    let (_app, api) = open_app().await;
    let api = &api;
    for sells in SUBSCRIPTION_PROVIDERS {
        let provider = sells.provider;
        let buyer = register(api, &format!("one-time-{provider}@example.com")).await;
        let token = &buyer.account.token;
        for at_its_price in [false, true] {
            let order = buyer
                .browser
                .initiate(token, sells.one_time, provider)
                .await;
            let price = api.sandbox_payment(&order).await["amountMinor"]
                .as_i64()
                .expect("the order's price");
            let before = mismatches(api, provider).await;
            let amount = if at_its_price { price } else { 1 };
            provider_subscribes(api, &order, amount, 1).await;
            assert_nothing_started(api, &buyer.account, &order, provider, before).await;
        }
    }
}

/// The amount half of finding 1, with every provider that sells subscriptions: the provider
/// bills the checkout of a recurring order at 0.01 instead of its price (same plan, same
/// period) and sends its genuinely signed activation. Nothing starts, and the activation is
/// recorded as a mismatch. Fails when activation stops checking the amount.
#[tokio::test]
async fn a_subscription_any_provider_starts_below_the_plans_price_starts_nothing() {
    let (_app, api) = open_app().await;
    let api = &api;
    for sells in SUBSCRIPTION_PROVIDERS {
        let provider = sells.provider;
        let buyer = register(api, &format!("cheap-{provider}@example.com")).await;
        let token = &buyer.account.token;
        let order = buyer
            .browser
            .initiate(token, sells.recurring, provider)
            .await;
        let before = mismatches(api, provider).await;
        provider_subscribes(api, &order, 1, sells.interval_months).await;
        assert_nothing_started(api, &buyer.account, &order, provider, before).await;
    }
}

/// Issue 14 finding 2, with every provider that sells subscriptions: after the first period,
/// the provider renews at 0.01, then at the plan's amount in another currency, each sent as its
/// genuinely signed renewal. Neither grants credits or moves the paid period, and each is
/// recorded as a mismatch; the renewal at the plan's own price then grants one period, once,
/// however often every webhook is delivered again. Fails when renewals stop checking the
/// amount or the currency.
#[tokio::test]
async fn a_renewal_any_provider_bills_at_another_price_grants_nothing() {
    let (_app, api) = open_app().await;
    let api = &api;
    for sells in SUBSCRIPTION_PROVIDERS {
        let provider = sells.provider;
        // One live subscription per user: a buyer per provider.
        let Buyer { browser, account } =
            register(api, &format!("renewal-{provider}@example.com")).await;
        let buyer = &account;
        let order = browser
            .buy_and_pay(&buyer.token, sells.recurring, provider)
            .await;
        // The first period is granted in the transaction that marks the order paid.
        let per_period = api.balance(&buyer.token, None).await;
        assert!(per_period > 0, "{provider}: the first period granted");
        let payment = api.sandbox_payment(&order).await;
        let subscription = payment["subscriptionId"].as_str().expect("subscription");
        let price = payment["amountMinor"].as_i64().expect("amount");
        let currency = payment["currency"].as_str().expect("currency");
        let other = if currency == "USD" { "EUR" } else { "USD" };
        let paid_until = subscriptions(api, buyer).await[0]["currentPeriodEnd"].clone();
        let tampered = [
            ("0.01", json!({ "amountMinor": 1 })),
            (other, json!({ "amountMinor": price, "currency": other })),
        ];
        for (what, body) in tampered {
            let before = mismatches(api, provider).await;
            provider_renews(api, subscription, &body).await;
            let recorded = mismatches(api, provider).await - before;
            assert!(recorded >= 1, "{provider} {what}: a mismatch ({recorded})");
            let balance = api.balance(&buyer.token, None).await;
            assert_eq!(balance, per_period, "{provider} {what}: nothing granted");
            let held = subscriptions(api, buyer).await;
            assert_eq!(held.len(), 1, "{provider} {what}: {held:?}");
            assert_eq!(
                held[0]["currentPeriodEnd"], paid_until,
                "{provider} {what}: the paid period did not move"
            );
        }
        let genuine = json!({ "amountMinor": price, "currency": currency });
        provider_renews(api, subscription, &genuine).await;
        let expected = 2 * per_period;
        let balance = wait_for_balance(api, buyer, expected).await;
        assert_eq!(balance, expected, "{provider}: the genuine renewal grants");
        let payment_id = payment["id"].as_str().expect("payment id");
        let again = api
            .sandbox_action(payment_id, "redeliver", &json!({ "amountMinor": 2 }))
            .await;
        assert_eq!(again.status, 200, "{provider}: {again:?}");
        let balance = api.balance(&buyer.token, None).await;
        assert_eq!(
            balance, expected,
            "{provider}: the genuine renewal grants once"
        );
        let held = subscriptions(api, buyer).await;
        assert_eq!(held.len(), 1, "{provider}: one subscription: {held:?}");
    }
}
