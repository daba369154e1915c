//! Issue 14 findings 6, 7 and 8 ("What a user owns") through HTTP, with every provider that
//! sells subscriptions (Stripe, PayPal, Creem, Dodo and Waffo Pancake): each purchase is paid on
//! the app's own sandbox, whose simulators send the provider's own signed webhooks.
//!
//! - Finding 6: one live subscription per user (409 `already_subscribed` naming it), a one-time
//!   plan whose access runs cannot be bought again (409 `already_owned` naming its order),
//!   credit packs stay buyable; with `[subscriptions] allowSeveral` every subscription held shows
//!   on `/api/credits/status` and `/dashboard`, each cancellable.
//! - Finding 7: a `one_time` plan of finite `duration.months` (passes added to the shipped
//!   catalog here: it sells none) grants access until its payment time plus that many calendar
//!   months.
//! - Finding 8: a renewal the provider fails (the sandbox's `fail_renewal`, Stripe
//!   `invoice.payment_failed`) makes the subscription `past_due`, which keeps access for the
//!   grace after the failed renewal (the end of the paid period) and says until when. Nothing
//!   outside the service moves its clock, so that access then ends is covered by the use-case
//!   tests (`application/src/use_cases/tests/ownership.rs`), not here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tests::{TestApp, catalog_with, checkout_url, spawn_app_from};

/// What a provider that sells subscriptions sells, from the catalog of [`catalog`].
struct Sells {
    provider: &'static str,
    /// A recurring plan.
    recurring: &'static str,
    /// A 12-month pass (`one_time`, `duration.months = 12`), added by [`catalog`].
    pass: &'static str,
}

/// Every provider that sells subscriptions.
const SUBSCRIPTION_PROVIDERS: [Sells; 5] = [
    Sells {
        provider: "card_gateway",
        recurring: "pro_monthly",
        pass: "pass_12m_card",
    },
    Sells {
        provider: "wallet_global",
        recurring: "pro_monthly_wallet_global",
        pass: "pass_12m_wallet_global",
    },
    Sells {
        provider: "mor_a",
        recurring: "pro_monthly_eur",
        pass: "pass_12m_mor_a",
    },
    Sells {
        provider: "mor_b",
        recurring: "team_yearly",
        pass: "pass_12m_mor_b",
    },
    Sells {
        provider: "mor_c",
        recurring: "pro_quarterly",
        pass: "pass_12m_mor_c",
    },
];

/// Lifetime plans of the shipped catalog, at the providers that sell subscriptions too.
const LIFETIME_PLANS: [(&str, &str); 3] = [
    ("card_gateway", "lifetime_card"),
    ("mor_a", "lifetime_mor_a"),
    ("mor_c", "lifetime_mor_c_cny"),
];

/// The passes of finite duration the shipped catalog lacks: 12 months at every provider that
/// sells subscriptions, and 3 months by card (a quarter is 92 days from most dates: not 90).
const PASSES: &str = r#"
[plans.pass_12m_card]
provider = "card_gateway"
amount = 49.00
currency = "USD"
duration = { months = 12, type = "one_time" }
[plans.pass_12m_card.i18n.en]
name = "12-month pass"

[plans.pass_3m_card]
provider = "card_gateway"
amount = 19.00
currency = "USD"
duration = { months = 3, type = "one_time" }
[plans.pass_3m_card.i18n.en]
name = "3-month pass"

[plans.pass_12m_wallet_global]
provider = "wallet_global"
amount = 49.00
currency = "USD"
duration = { months = 12, type = "one_time" }
[plans.pass_12m_wallet_global.i18n.en]
name = "12-month pass"

[plans.pass_12m_mor_a]
provider = "mor_a"
amount = 49.00
currency = "USD"
duration = { months = 12, type = "one_time" }
morAProductId = "prod_7kLtM9pQrS3uVwPass12"
[plans.pass_12m_mor_a.i18n.en]
name = "12-month pass"

[plans.pass_12m_mor_b]
provider = "mor_b"
amount = 49.00
currency = "USD"
duration = { months = 12, type = "one_time" }
morBProductId = "pdt_Pass12MonthsUsd4900"
[plans.pass_12m_mor_b.i18n.en]
name = "12-month pass"

[plans.pass_12m_mor_c]
provider = "mor_c"
amount = 4900
currency = "JPY"
duration = { months = 12, type = "one_time" }
morCProductId = "PROD_Pass12MonthsJpy4900"
[plans.pass_12m_mor_c.i18n.en]
name = "12-month pass"
"#;

/// The default past-due grace: 7 days.
const DEFAULT_GRACE_MS: i64 = 7 * DAY_MS;
const DAY_MS: i64 = 86_400_000;

/// Gives each buyer an address of its own.
static NEXT_ADDRESS: AtomicUsize = AtomicUsize::new(1);

/// The app with the shipped catalog plus [`PASSES`], telling clients apart by
/// `X-Forwarded-For` (as behind a proxy) so that each buyer registers and buys within the
/// per-client limits; `several` sets `[subscriptions] allowSeveral`, `grace_days`
/// `pastDueGraceDays`.
async fn app(several: bool, grace_days: Option<i64>) -> TestApp {
    let catalog = catalog_with(PASSES);
    let app = spawn_app_from(catalog.path(), |s| {
        s.trust_forwarded_for = true;
        s.allow_several_subscriptions = several;
        if let Some(days) = grace_days {
            s.past_due_grace_ms = days * DAY_MS;
        }
    })
    .await;
    // The catalog is read at start: its directory may go.
    drop(catalog);
    app
}

/// One HTTP answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    content_type: String,
    body: Value,
}

impl Reply {
    /// An RFC 9457 problem with `code` and HTTP `status`.
    fn assert_problem(&self, status: u16, code: &str, what: &str) {
        assert_eq!(self.status, status, "{what}: {self:?}");
        assert!(
            self.content_type.starts_with("application/problem+json"),
            "{what}: problem JSON: {self:?}"
        );
        assert_eq!(self.body["code"], code, "{what}: {self:?}");
    }

    /// The problem's `detail`.
    fn detail(&self) -> &str {
        self.body["detail"].as_str().unwrap_or_default()
    }
}

/// A signed-in buyer with a browser at an address of its own.
struct Buyer<'a> {
    app: &'a TestApp,
    client: reqwest::Client,
    token: String,
}

impl<'a> Buyer<'a> {
    /// Register `email` from a new address.
    async fn register(app: &'a TestApp, email: &str) -> Self {
        let n = NEXT_ADDRESS.fetch_add(1, Ordering::Relaxed) % 250;
        let mut headers = reqwest::header::HeaderMap::new();
        let address = format!("198.51.100.{n}").parse().expect("a header value");
        headers.insert("x-forwarded-for", address);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
            .expect("http client");
        let mut buyer = Self {
            app,
            client,
            token: String::new(),
        };
        let body = json!({"email": email, "password": "correct horse battery"});
        let reply = buyer.send("POST", "/api/auth/register", Some(&body)).await;
        assert_eq!(reply.status, 201, "register {email}: {reply:?}");
        buyer.token = reply.body["token"].as_str().expect("token").to_owned();
        buyer
    }

    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let url = self.app.url(path);
        let mut request = match method {
            "POST" => self.client.post(url),
            _ => self.client.get(url),
        };
        if !self.token.is_empty() {
            request = request.bearer_auth(&self.token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.json().await.unwrap_or(Value::Null);
        Reply {
            status,
            content_type,
            body,
        }
    }

    /// `POST /api/payment/initiate` for `plan` at `provider`.
    async fn initiate(&self, plan: &str, provider: &str) -> Reply {
        let body = json!({"planId": plan, "provider": provider});
        self.send("POST", "/api/payment/initiate", Some(&body))
            .await
    }

    /// Buy `plan`, open its checkout, pay it on the sandbox (the provider's webhooks go out
    /// before that returns) and wait until the order is paid; returns the paid order.
    async fn buy_and_pay(&self, plan: &str, provider: &str) -> Value {
        let started = self.initiate(plan, provider).await;
        assert_eq!(started.status, 201, "initiate {plan}: {started:?}");
        let opened = self
            .client
            .get(checkout_url(&started.body))
            .send()
            .await
            .expect("open checkout");
        assert!(
            opened.status().as_u16() < 400,
            "checkout of {plan}: {opened:?}"
        );
        let order = started.body["orderId"].as_str().expect("order id");
        self.app.sandbox_action(order, "pay", &json!({})).await;
        self.app.wait_for_status(&self.token, order, "paid").await
    }

    /// `GET /api/credits/status`.
    async fn status(&self) -> Value {
        let reply = self.send("GET", "/api/credits/status", None).await;
        assert_eq!(reply.status, 200, "status: {reply:?}");
        reply.body
    }

    /// How many orders the buyer has.
    async fn order_count(&self) -> u64 {
        let reply = self.send("GET", "/api/orders?limit=100", None).await;
        assert_eq!(reply.status, 200, "orders: {reply:?}");
        let listed = reply.body["items"].as_array().map_or(0, Vec::len);
        reply.body["total"]
            .as_u64()
            .unwrap_or_else(|| u64::try_from(listed).unwrap_or(u64::MAX))
    }

    /// `/dashboard` as the buyer's signed-in browser sees it (the session cookie).
    async fn dashboard(&self) -> String {
        let response = self
            .client
            .get(self.app.url("/dashboard"))
            .header("cookie", format!("tally_session={}", self.token))
            .send()
            .await
            .expect("dashboard");
        assert_eq!(response.status(), 200, "dashboard");
        response.text().await.expect("html")
    }
}

/// The subscriptions `/api/credits/status` lists.
fn subscriptions(status: &Value) -> Vec<Value> {
    status["subscriptions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Issue 14 finding 6, with every provider that sells subscriptions: a buyer whose
/// subscription was bought and paid through the provider's sandbox, then starting another one
/// (the same plan, and another provider's recurring plan), gets 409 `already_subscribed`
/// naming the live subscription, and no order is created. `/api/credits/status` and
/// `/dashboard` show the one held. Fails when initiation stops checking what the user holds.
#[tokio::test]
async fn a_second_subscription_is_a_409_naming_the_live_one_at_every_provider() {
    let app = app(false, None).await;
    for (i, sells) in SUBSCRIPTION_PROVIDERS.iter().enumerate() {
        let provider = sells.provider;
        let buyer = Buyer::register(&app, &format!("one-sub-{provider}@example.com")).await;
        buyer.buy_and_pay(sells.recurring, provider).await;
        let status = buyer.status().await;
        let held = subscriptions(&status);
        assert_eq!(held.len(), 1, "{provider}: {status}");
        assert_eq!(held[0]["status"], "active", "{provider}: {status}");
        assert_eq!(status["hasAccess"], true, "{provider}: {status}");
        let id = held[0]["id"].as_str().expect("subscription id");
        let other = &SUBSCRIPTION_PROVIDERS[(i + 1) % SUBSCRIPTION_PROVIDERS.len()];
        for (plan, at) in [
            (sells.recurring, provider),
            (other.recurring, other.provider),
        ] {
            let again = buyer.initiate(plan, at).await;
            let what = format!("{provider} holds {id}, starts {plan} at {at}");
            again.assert_problem(409, "already_subscribed", &what);
            assert!(again.detail().contains(id), "{what}: names it: {again:?}");
        }
        assert_eq!(buyer.order_count().await, 1, "{provider}: no order made");
        let html = buyer.dashboard().await;
        assert_eq!(
            html.matches("data-testid=\"held-subscription\"").count(),
            1,
            "{provider}: the dashboard shows the subscription"
        );
        assert!(
            html.contains(&format!("name=\"subscriptionId\" value=\"{id}\"")),
            "{provider}: the dashboard can cancel {id}"
        );
    }
}

/// Issue 14 finding 6, one-time plans: a buyer who paid a lifetime plan (at each provider that
/// sells one and subscriptions) or a 12-month pass still running gets 409 `already_owned`
/// naming the paid order when buying the same plan again; a credits pack is bought and paid
/// twice, next to a lifetime plan. Fails when initiation stops checking what the user owns, or
/// starts refusing credit packs.
#[tokio::test]
async fn a_one_time_plan_still_running_is_a_409_and_credit_packs_stay_buyable() {
    let app = app(false, None).await;
    let passes = SUBSCRIPTION_PROVIDERS.iter().map(|s| (s.provider, s.pass));
    for (provider, plan) in LIFETIME_PLANS.into_iter().chain(passes) {
        let buyer = Buyer::register(&app, &format!("owns-{plan}@example.com")).await;
        let paid = buyer.buy_and_pay(plan, provider).await;
        let order = paid["orderId"].as_str().expect("order id");
        let again = buyer.initiate(plan, provider).await;
        let what = format!("{plan} at {provider}, owned by {order}");
        again.assert_problem(409, "already_owned", &what);
        assert!(
            again.detail().contains(order),
            "{what}: names it: {again:?}"
        );
        assert_eq!(buyer.order_count().await, 1, "{what}: no order made");
        if plan == "lifetime_card" {
            for n in 1..=2 {
                let pack = buyer.buy_and_pay("credits_card_500", provider).await;
                assert_eq!(pack["status"], "paid", "credits pack {n}: {pack}");
            }
            let balance = buyer.send("GET", "/api/credits/balance", None).await;
            assert_eq!(
                balance.body["balanceHundredths"], 100_000,
                "two packs of 500 credits: {balance:?}"
            );
        }
    }
}

/// Issue 14 finding 6, `allowSeveral`: a buyer who buys and pays two subscriptions (Stripe and
/// PayPal) sees both in `/api/credits/status` `subscriptions` and on `/dashboard`, each with its
/// own cancel form, and cancels each through the API: both then end at their period's end.
/// Fails when the status or the dashboard shows only one subscription, or a second one is
/// refused although the setting allows it.
#[tokio::test]
async fn several_subscriptions_when_allowed_show_everywhere_and_each_is_cancellable() {
    let app = app(true, None).await;
    let buyer = Buyer::register(&app, "several@example.com").await;
    let bought = [
        ("card_gateway", "pro_monthly"),
        ("wallet_global", "pro_monthly_wallet_global"),
    ];
    let mut orders = Vec::new();
    for (provider, plan) in bought {
        let paid = buyer.buy_and_pay(plan, provider).await;
        orders.push(paid["orderId"].as_str().expect("order id").to_owned());
    }
    let status = buyer.status().await;
    let held = subscriptions(&status);
    let mut plans: Vec<&str> = held.iter().filter_map(|s| s["planId"].as_str()).collect();
    plans.sort_unstable();
    assert_eq!(
        plans,
        ["pro_monthly", "pro_monthly_wallet_global"],
        "{status}"
    );
    let html = buyer.dashboard().await;
    assert_eq!(
        html.matches("data-testid=\"held-subscription\"").count(),
        2,
        "the dashboard shows both"
    );
    for subscription in &held {
        let id = subscription["id"].as_str().expect("id");
        assert_eq!(subscription["status"], "active", "{subscription}");
        assert!(
            html.contains(&format!("name=\"subscriptionId\" value=\"{id}\"")),
            "the dashboard can cancel {id}"
        );
    }
    for order in &orders {
        let path = format!("/api/payment/cancel/{order}");
        let cancelled = buyer.send("POST", &path, None).await;
        assert_eq!(cancelled.status, 200, "cancel {order}: {cancelled:?}");
        let subscription = &cancelled.body["subscription"];
        assert!(ends_with_period(subscription), "{cancelled:?}");
    }
    let status = buyer.status().await;
    let held = subscriptions(&status);
    assert_eq!(
        held.len(),
        2,
        "both still held until their period ends: {status}"
    );
    for subscription in &held {
        assert!(ends_with_period(subscription), "{status}");
        assert_eq!(
            subscription["accessUntil"], subscription["currentPeriodEnd"],
            "{status}"
        );
    }
    assert_eq!(status["hasAccess"], true, "{status}");
}

/// Whether a cancelled `subscription` ends with its period: scheduled to (`cancelAtPeriodEnd`),
/// or - where the provider ends a subscription at once and tells it by an event (PayPal), which
/// may have arrived by the time it is read - cancelled, with access still running to the
/// period's end.
fn ends_with_period(subscription: &Value) -> bool {
    subscription["cancelAtPeriodEnd"] == true
        || (subscription["status"] == "canceled"
            && subscription["accessUntil"] == subscription["currentPeriodEnd"])
}

/// Issue 14 finding 7: a 12-month pass (at every provider that sells subscriptions) and a
/// 3-month pass by card, each bought and paid through the sandbox, grant access: `hasAccess`,
/// and a `oneTimeAccess` entry whose `endsAt` is the order's `paidAt` plus that many calendar
/// months. A lifetime plan's entry has no `endsAt`. Fails when finite passes grant lifetime or
/// no access, or their end is counted in anything but calendar months from the payment.
#[tokio::test]
async fn a_pass_grants_access_until_its_payment_plus_its_calendar_months() {
    let app = app(false, None).await;
    let twelve = SUBSCRIPTION_PROVIDERS
        .iter()
        .map(|s| (s.provider, s.pass, 12));
    for (provider, plan, months) in twelve.chain([("card_gateway", "pass_3m_card", 3)]) {
        let buyer = Buyer::register(&app, &format!("pass-{plan}@example.com")).await;
        let paid = buyer.buy_and_pay(plan, provider).await;
        let order = paid["orderId"].as_str().expect("order id");
        let paid_at = paid["paidAt"].as_str().expect("paidAt");
        let status = buyer.status().await;
        assert_eq!(status["hasAccess"], true, "{plan}: {status}");
        assert_eq!(status["lifetimeAccess"], false, "{plan}: {status}");
        let access = one_time_access(&status, order);
        assert_eq!(access["planId"], plan, "{status}");
        let expected = plus_calendar_months(paid_at, months);
        assert_eq!(
            access["endsAt"].as_str(),
            Some(expected.as_str()),
            "{plan} paid at {paid_at}: {status}"
        );
    }
    let buyer = Buyer::register(&app, "lifetime@example.com").await;
    let paid = buyer.buy_and_pay("lifetime_card", "card_gateway").await;
    let status = buyer.status().await;
    let access = one_time_access(&status, paid["orderId"].as_str().expect("order"));
    assert!(access.get("endsAt").is_none(), "lifetime: no end: {status}");
    assert_eq!(status["lifetimeAccess"], true, "{status}");
    assert_eq!(status["hasAccess"], true, "{status}");
}

/// The `oneTimeAccess` entry of `order`.
fn one_time_access(status: &Value, order: &str) -> Value {
    status["oneTimeAccess"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["orderId"] == order).cloned())
        .unwrap_or_else(|| panic!("no oneTimeAccess entry for {order}: {status}"))
}

/// Issue 14 finding 8, with every provider that sells subscriptions: after a subscription is
/// bought and paid, the provider fails its renewal (the sandbox sends the provider's own
/// signed past-due event: Stripe `invoice.payment_failed`, PayPal
/// `BILLING.SUBSCRIPTION.PAYMENT.FAILED`, Creem and Waffo `subscription.past_due`, Dodo
/// `subscription.on_hold`). The subscription is `past_due`, still grants access, and says
/// until when: the failed renewal's time (the paid period's end, when the provider bills the
/// next one) plus the default 7-day grace; the paid period does not move. Fails when past-due
/// subscriptions lose access at once, keep it without an end, or count the grace otherwise.
#[tokio::test]
async fn a_failed_renewal_keeps_access_for_the_grace_and_says_until_when() {
    let app = app(false, None).await;
    for sells in &SUBSCRIPTION_PROVIDERS {
        let provider = sells.provider;
        let buyer = Buyer::register(&app, &format!("past-due-{provider}@example.com")).await;
        let paid = buyer.buy_and_pay(sells.recurring, provider).await;
        let order = paid["orderId"].as_str().expect("order id");
        fails_renewal_and_keeps_access(&app, &buyer, order, DEFAULT_GRACE_MS, provider).await;
    }
}

/// Finding 8 with `[subscriptions] pastDueGraceDays = 3`, by Stripe: the stated end follows the
/// setting. Fails when the grace is not read from the setting.
#[tokio::test]
async fn the_past_due_grace_follows_its_setting() {
    let app = app(false, Some(3)).await;
    let buyer = Buyer::register(&app, "grace-3@example.com").await;
    let paid = buyer.buy_and_pay("pro_monthly", "card_gateway").await;
    let order = paid["orderId"].as_str().expect("order id");
    fails_renewal_and_keeps_access(&app, &buyer, order, 3 * DAY_MS, "card_gateway").await;
}

/// The provider fails the renewal of `order`'s subscription; it is past due with access until
/// the failed renewal plus `grace_ms`.
async fn fails_renewal_and_keeps_access(
    app: &TestApp,
    buyer: &Buyer<'_>,
    order: &str,
    grace_ms: i64,
    provider: &str,
) {
    let before = subscriptions(&buyer.status().await);
    assert_eq!(before.len(), 1, "{provider}: {before:?}");
    assert_eq!(before[0]["status"], "active", "{provider}: {before:?}");
    assert_eq!(before[0]["accessUntil"], Value::Null, "{provider}: renews");
    let payment = app.sandbox_payment(order).await;
    let at_provider = payment["subscriptionId"].as_str().expect("subscription");
    let path = format!("/sandbox/api/subscriptions/{at_provider}/fail_renewal");
    let response = app
        .client
        .post(app.url(&path))
        .send()
        .await
        .expect("sandbox");
    assert_eq!(response.status(), 200, "{provider}: fail_renewal");
    let failed: Value = response.json().await.expect("json");
    // The provider bills the next period when the paid one ends: that is when it failed.
    let failed_at = failed["periodEndMs"].as_i64().expect("periodEndMs");
    let status = buyer.status().await;
    let held = subscriptions(&status);
    assert_eq!(held.len(), 1, "{provider}: {status}");
    let subscription = &held[0];
    assert_eq!(subscription["status"], "past_due", "{provider}: {status}");
    assert_eq!(
        subscription["currentPeriodEnd"], before[0]["currentPeriodEnd"],
        "{provider}: the paid period did not move"
    );
    // The failed renewal's time as the provider states it (Stripe counts whole seconds).
    let period_end = unix_ms(
        subscription["currentPeriodEnd"]
            .as_str()
            .expect("period end"),
    );
    assert!(
        (failed_at - period_end).abs() < 1000,
        "{provider}: the provider's period is ours: {failed_at} vs {status}"
    );
    assert_eq!(
        status["hasAccess"], true,
        "{provider}: within the grace: {status}"
    );
    assert_eq!(
        subscription["accessUntil"].as_str(),
        Some(rfc3339(period_end + grace_ms).as_str()),
        "{provider}: access until the failed renewal plus the grace: {status}"
    );
    assert_eq!(
        status["subscription"]["accessUntil"], subscription["accessUntil"],
        "{provider}: the single-subscription field agrees"
    );
}

// --- Calendar arithmetic, independent of the service's own (UTC, proleptic Gregorian) --------

/// Days since 1970-01-01 of a civil date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of milliseconds since the epoch, as the API writes instants.
fn rfc3339(ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (year, month, day) = civil_from_days(days);
    let (h, m) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (s, milli) = (in_day / 1000 % 60, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// Milliseconds since the epoch of an API instant (`YYYY-MM-DDTHH:MM:SS[.mmm]Z`).
fn unix_ms(instant: &str) -> i64 {
    let number = |range: std::ops::Range<usize>| -> i64 {
        instant
            .get(range)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an API instant: {instant}"))
    };
    let milli = instant
        .get(20..23)
        .filter(|_| instant.as_bytes().get(19) == Some(&b'.'))
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(0);
    let days = days_from_civil(number(0..4), number(5..7), number(8..10));
    days * DAY_MS
        + number(11..13) * 3_600_000
        + number(14..16) * 60_000
        + number(17..19) * 1000
        + milli
}

/// `instant` plus `months` calendar months: the same day of the month and time of day, or the
/// month's last day when it is shorter.
fn plus_calendar_months(instant: &str, months: i64) -> String {
    let ms = unix_ms(instant);
    let (days, in_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (year, month, day) = civil_from_days(days);
    let index = year * 12 + (month - 1) + months;
    let (to_year, to_month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
    let next = if to_month == 12 {
        days_from_civil(to_year + 1, 1, 1)
    } else {
        days_from_civil(to_year, to_month + 1, 1)
    };
    let month_length = next - days_from_civil(to_year, to_month, 1);
    let to_day = day.min(month_length);
    rfc3339(days_from_civil(to_year, to_month, to_day) * DAY_MS + in_day)
}

#[test]
fn calendar_months_clamp_to_the_months_end_and_keep_the_time() {
    assert_eq!(unix_ms("1970-01-02T00:00:00.001Z"), DAY_MS + 1);
    assert_eq!(rfc3339(1_767_225_600_123), "2026-01-01T00:00:00.123Z");
    assert_eq!(
        plus_calendar_months("2026-01-31T10:20:30.400Z", 1),
        "2026-02-28T10:20:30.400Z"
    );
    assert_eq!(
        plus_calendar_months("2028-02-29T00:00:00.000Z", 12),
        "2029-02-28T00:00:00.000Z"
    );
    assert_eq!(
        plus_calendar_months("2026-11-25T23:59:59.999Z", 3),
        "2027-02-25T23:59:59.999Z"
    );
    assert_eq!(
        plus_calendar_months("2026-03-31T01:00:00Z", 12),
        "2027-03-31T01:00:00.000Z"
    );
}
