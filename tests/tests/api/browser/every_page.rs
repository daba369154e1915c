//! Every page, in English and Chinese, on a laptop (1280 px) and a phone (390 px): axe-core
//! finds no serious or critical accessibility violation, and on the phone nothing is wider
//! than the screen at 390, 360 or 430 px (issue 19).
//!
//! axe-core comes from npm (`tests/browser-assets`, installed by `npm ci` there; `.ci/run` does
//! it) and is injected into each page through WebDriver's execute-script. Without it the tests
//! skip with a note, except on CI (`CI=true`), where they fail.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use tests::{ADMIN_PASSWORD, TestApp, spawn_app_with_admin};

use super::webdriver::{Browser, Viewport, browser_available};
use super::{PASSWORD, buy_through_the_sandbox, sign_in, sign_up};

/// The impacts that fail a page.
const FAILING_IMPACTS: [&str; 2] = ["serious", "critical"];
/// A credits pack paid by scanning a QR code (its page is checked where the reader sees it).
const QR_BUY: &str = "#plan-credits_cn_qr_1000 [data-testid=buy]";
/// The phone widths every page must fit, the emulated phone's own (390 px) first.
const PHONE_WIDTHS: [u32; 3] = [390, 360, 430];
/// The pages (by name, without the language) also photographed at 360 px, for whoever looks.
const SHOT_AT_360: [&str; 3] = ["dashboard", "pricing", "admin_customers"];
/// How long one axe run may take.
const AXE_WAIT: Duration = Duration::from_secs(30);

/// `tests/browser-assets/node_modules/axe-core/axe.min.js`.
fn axe_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("browser-assets/node_modules/axe-core/axe.min.js")
}

/// axe-core's source, or `None` (a skip) off CI when `npm ci` has not run.
///
/// # Panics
/// On CI, when it is missing.
fn axe_source(test: &str) -> Option<String> {
    let path = axe_path();
    if let Ok(source) = std::fs::read_to_string(&path) {
        return Some(source);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: {} is required on CI (`npm ci` in tests/browser-assets; .ci/run does it)",
        path.display()
    );
    eprintln!("note: {test} skipped: run `npm ci` in tests/browser-assets for axe-core");
    None
}

/// What one checked page found wrong, gathered so one run reports every page.
struct Findings {
    viewport: Viewport,
    test: &'static str,
    axe: String,
    problems: String,
    checked: Vec<String>,
}

impl Findings {
    fn new(test: &'static str, viewport: Viewport, axe: String) -> Self {
        Self {
            viewport,
            test,
            axe,
            problems: String::new(),
            checked: Vec::new(),
        }
    }

    /// Check the page the browser shows now, named `name` in the report and screenshot.
    async fn check(&mut self, browser: &Browser, name: &str) {
        let url = browser.url().await;
        self.checked.push(format!("{name} ({url})"));
        if matches!(self.viewport, Viewport::Phone) {
            // The narrowest and the widest common phones too: the loaded page is resized and
            // measured again (cheaper than loading it three times), then set back to 390 px.
            for width in PHONE_WIDTHS {
                self.overflow_at(browser, name, &url, width).await;
            }
            if SHOT_AT_360.contains(&name.split_once('_').map_or(name, |(_, rest)| rest)) {
                set_phone_width(browser, 360).await;
                browser
                    .screenshot(&format!("{}_{name}_360", self.test), self.viewport)
                    .await;
            }
            set_phone_width(browser, PHONE_WIDTHS[0]).await;
        }
        for violation in self.axe_violations(browser).await {
            let _ = writeln!(self.problems, "{name} ({url}): {violation}");
        }
        let shot = format!("{}_{name}", self.test);
        browser.screenshot(&shot, self.viewport).await;
        if matches!(self.viewport, Viewport::Phone) {
            // A phone shows one screen at a time: the page's end too, for whoever looks.
            let scrolled = browser
                .script(
                    "window.scrollTo(0, document.documentElement.scrollHeight); \
                     return window.scrollY > 0",
                )
                .await;
            if scrolled == Value::Bool(true) {
                browser
                    .screenshot(&format!("{shot}_end"), self.viewport)
                    .await;
            }
        }
    }

    /// Note a horizontal overflow of the current page at a phone `width` px wide.
    async fn overflow_at(&mut self, browser: &Browser, name: &str, url: &str, width: u32) {
        set_phone_width(browser, width).await;
        let widths = browser
            .script(
                "return [document.documentElement.scrollWidth, window.innerWidth, \
                 document.documentElement.clientWidth, \
                 Array.from(document.querySelectorAll('body *')).filter(e => \
                 e.getBoundingClientRect().right > window.innerWidth + 1 && \
                 getComputedStyle(e).position !== 'fixed' && !e.closest('.table-wrap, \
                 .sr-only, .skip-link')).slice(0, 5).map(e => e.tagName.toLowerCase() + \
                 (e.className ? '.' + String(e.className).split(' ').join('.') : '')), \
                 Array.from(document.querySelectorAll('[role=tablist], .tabs')).filter(t => \
                 t.scrollWidth > t.clientWidth + 1).map(t => t.getAttribute('aria-label') || \
                 t.className)]",
            )
            .await;
        // A tab bar that scrolls in its own box hides its last tab from a phone reader.
        if let Some(clipped) = widths[4].as_array().filter(|c| !c.is_empty()) {
            let _ = writeln!(
                self.problems,
                "{name} ({url}) at {width} px: a tab bar cuts off a tab: {clipped:?}"
            );
        }
        let scroll = widths[0].as_i64().unwrap_or(i64::MAX);
        let inner = widths[1].as_i64().unwrap_or(0);
        let client = widths[2].as_i64().unwrap_or(0);
        if scroll > inner || scroll > client || inner != i64::from(width) {
            let _ = writeln!(
                self.problems,
                "{name} ({url}) at {width} px: page is {scroll} px wide on a {inner} px screen \
                 ({client} px client); wide: {}",
                widths[3]
            );
        }
    }

    /// The serious and critical axe-core violations on the current page, one line each.
    async fn axe_violations(&self, browser: &Browser) -> Vec<String> {
        let present = browser
            .script("return typeof window.axe === 'object'")
            .await;
        if present != Value::Bool(true) {
            browser
                .script(&format!("{}\n;return true;", self.axe))
                .await;
        }
        browser
            .script(
                "window.__axeResult = null; \
                 axe.run(document, { resultTypes: ['violations'] }).then(r => { \
                   window.__axeResult = JSON.stringify(r.violations.map(v => ({ \
                     id: v.id, impact: v.impact, help: v.help, \
                     nodes: v.nodes.slice(0, 4).map(n => n.target.join(' ') + ' :: ' + \
                       (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 200)) }))); \
                 }, e => { window.__axeResult = JSON.stringify([{ id: 'axe-error', \
                   impact: 'critical', help: String(e), nodes: [] }]); });",
            )
            .await;
        let deadline = Instant::now() + AXE_WAIT;
        let raw = loop {
            let result = browser.script("return window.__axeResult").await;
            if let Some(text) = result.as_str() {
                break text.to_owned();
            }
            assert!(Instant::now() < deadline, "axe-core did not finish");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let violations: Vec<Value> = serde_json::from_str(&raw).expect("axe results as JSON");
        violations
            .iter()
            .filter(|v| FAILING_IMPACTS.contains(&v["impact"].as_str().unwrap_or_default()))
            .map(|v| {
                format!(
                    "axe {} ({}): {} at {}",
                    v["id"], v["impact"], v["help"], v["nodes"]
                )
            })
            .collect()
    }

    fn assert_clean(&self) {
        assert!(
            self.problems.is_empty(),
            "{}: {} pages checked; problems:\n{}",
            self.test,
            self.checked.len(),
            self.problems
        );
    }
}

/// The pages a visitor sees, then a buyer's (through a credit purchase in the sandbox, whose
/// hosted checkout is checked too), in the language the session reads now.
async fn visitor_and_buyer_pages(
    app: &TestApp,
    browser: &Browser,
    findings: &mut Findings,
    lang: &str,
    email: &str,
) {
    for (name, path) in [
        ("home", "/"),
        ("pricing", "/pricing"),
        ("pricing_credits", "/pricing?tab=credits"),
        ("signin", "/signin"),
        ("signup", "/signup"),
        ("not_found", "/no-such-page"),
    ] {
        browser.goto(&app.url(path)).await;
        findings.check(browser, &format!("{lang}_{name}")).await;
    }
    sign_up(app, browser, email).await;
    findings
        .check(browser, &format!("{lang}_dashboard_empty"))
        .await;
    browser.goto(&app.url("/pricing?tab=credits")).await;
    browser
        .click("#plan-credits_card_500 [data-testid=buy]")
        .await;
    browser.wait_for_url("/sandbox/checkout/").await;
    findings
        .check(browser, &format!("{lang}_sandbox_checkout"))
        .await;
    browser.click("form[action$='/pay'] button").await;
    let success = browser.wait_for_url("/payment-success?orderId=").await;
    browser
        .wait_for_text("[data-testid=payment-paid]", "")
        .await;
    findings
        .check(browser, &format!("{lang}_payment_success"))
        .await;
    let mut unpaid = success
        .split("orderId=")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    browser.goto(&app.url("/pricing?tab=credits")).await;
    if browser.exists(QR_BUY).await {
        browser.click(QR_BUY).await;
        let qr = browser.wait_for_url("/pay/qr/").await;
        findings.check(browser, &format!("{lang}_pay_qr")).await;
        unpaid = qr.rsplit('/').next().unwrap_or_default().to_owned();
    }
    browser
        .goto(&app.url(&format!("/payment-cancel?orderId={unpaid}")))
        .await;
    findings
        .check(browser, &format!("{lang}_payment_cancel"))
        .await;
    browser.goto(&app.url("/pricing?tab=subscriptions")).await;
    browser.click("#plan-pro_monthly [data-testid=buy]").await;
    browser.wait_for_url("/sandbox/checkout/").await;
    browser.click("form[action$='/pay'] button").await;
    browser.wait_for_url("/payment-success?orderId=").await;
    browser
        .wait_for_text("[data-testid=payment-paid]", "")
        .await;
    browser.goto(&app.url("/dashboard")).await;
    findings.check(browser, &format!("{lang}_dashboard")).await;
    browser.goto(&app.url("/dashboard?tab=credits")).await;
    findings
        .check(browser, &format!("{lang}_dashboard_credits"))
        .await;
    team_page(app, browser, findings, (lang, email)).await;
    browser.goto(&app.url("/sandbox/")).await;
    findings
        .check(browser, &format!("{lang}_sandbox_dashboard"))
        .await;
}

/// The dashboard's "Teams" tab, with a team of the user's own holding a member with a limit and
/// an open invitation (made through the API with the user's session token).
async fn team_page(
    app: &TestApp,
    browser: &Browser,
    findings: &mut Findings,
    (lang, email): (&str, &str),
) {
    let login = serde_json::json!({"email": email, "password": PASSWORD});
    let (status, session) = app.post("", "/api/auth/login", &login, None).await;
    assert_eq!(status, 200, "{session}");
    let token = session["token"].as_str().expect("a session token");
    let name = serde_json::json!({"name": "Research & evaluation team of the lab"});
    let (_, team) = app.post(token, "/api/accounts", &name, None).await;
    let team = team["id"].as_str().expect("a team").to_owned();
    let (colleague, _) = app.user(&format!("colleague-{lang}@example.com")).await;
    let member = serde_json::json!({"memberId": colleague,
        "limit": {"credits": "2500", "window": "week"}});
    let path = format!("/api/accounts/{team}/members");
    let (status, added) = app.post(token, &path, &member, None).await;
    assert_eq!(status, 201, "{added}");
    let invite = serde_json::json!({
        "email": format!("a-colleague-with-a-rather-long-address-{lang}@research.example.com")
    });
    let path = format!("/api/accounts/{team}/invitations");
    let (status, invited) = app.post(token, &path, &invite, None).await;
    assert_eq!(status, 201, "{invited}");
    browser.goto(&app.url("/dashboard?tab=teams")).await;
    browser.find("[data-testid=team-members]").await;
    findings
        .check(browser, &format!("{lang}_dashboard_teams"))
        .await;
    // The forms unfolded: inviting, and editing the member's role and limit.
    browser
        .script("document.querySelectorAll('details.disclosure').forEach(d => d.open = true)")
        .await;
    findings
        .check(browser, &format!("{lang}_dashboard_teams_forms"))
        .await;
    let token = invited["token"].as_str().expect("the invitation's token");
    browser
        .goto(&app.url(&format!("/invitations/accept?token={token}")))
        .await;
    browser.find("[data-testid=accept-invitation]").await;
    findings
        .check(browser, &format!("{lang}_invitation_accept"))
        .await; // Buying for the team from the pricing page.
    browser
        .goto(&app.url(&format!("/pricing?account={team}")))
        .await;
    browser.find("[data-testid=buying-for-team]").await;
    findings
        .check(browser, &format!("{lang}_pricing_for_team"))
        .await; // The dashboard switched to the team: its holdings, then its ledger.
    browser
        .goto(&app.url(&format!("/dashboard?account={team}")))
        .await;
    browser.find("[data-testid=account-switcher]").await;
    findings
        .check(browser, &format!("{lang}_dashboard_team_account"))
        .await;
    browser
        .goto(&app.url(&format!("/dashboard?tab=credits&account={team}")))
        .await;
    findings
        .check(browser, &format!("{lang}_dashboard_team_credits"))
        .await;
}

/// At most this many admin pages are checked per language (a bound on the crawl).
const MAX_ADMIN_PAGES: usize = 40;

/// The `/admin` links on the current page (no language switches, no downloads).
async fn admin_links(browser: &Browser) -> Vec<String> {
    let links = browser
        .script(
            "return Array.from(new Set(Array.from(document.querySelectorAll('a[href^=\"/admin\"]'))\
             .filter(a => !a.hasAttribute('download')).map(a => a.getAttribute('href'))))",
        )
        .await;
    let links: Vec<String> = serde_json::from_value(links).unwrap_or_default();
    links
        .into_iter()
        .filter(|l| !l.contains("lang=") && !l.contains("csv") && !l.contains('#'))
        .collect()
}

/// Every admin page reachable by links from `/admin/pricing` (the new-plan form among them),
/// each checked once, signed in as the administrator. The team accounts' list is crawled first
/// (the queue is a stack), so that it and the page of the last team it lists (each made by
/// `team_page`, with a member holding a limit) are checked within the crawl's bound.
async fn admin_pages(app: &TestApp, browser: &Browser, findings: &mut Findings, lang: &str) {
    browser.goto(&app.url("/")).await;
    browser
        .click(".site-header form[action='/signout'] button")
        .await;
    browser.find(".site-header a[href='/signup']").await;
    sign_in_admin(app, browser).await;
    let mut queue = vec![
        "/admin/pricing".to_owned(),
        "/admin/pricing/new".to_owned(),
        "/admin/accounts".to_owned(),
    ];
    let mut seen: Vec<String> = Vec::new();
    while let Some(link) = queue.pop() {
        if seen.contains(&link) || seen.len() >= MAX_ADMIN_PAGES {
            continue;
        }
        seen.push(link.clone());
        browser.goto(&app.url(&link)).await;
        let name = link
            .trim_start_matches('/')
            .replace(['/', '?', '=', '&'], "_");
        findings.check(browser, &format!("{lang}_{name}")).await;
        queue.extend(admin_links(browser).await);
    }
}

/// Emulate a phone `width` px wide (844 px tall, as the session's own phone) on the loaded page.
async fn set_phone_width(browser: &Browser, width: u32) {
    let metrics = serde_json::json!({
        "width": width, "height": 844, "deviceScaleFactor": 2, "mobile": true
    });
    browser
        .devtools("Emulation.setDeviceMetricsOverride", metrics)
        .await;
}

async fn sign_in_admin(app: &TestApp, browser: &Browser) {
    assert_eq!(
        ADMIN_PASSWORD, PASSWORD,
        "the shared sign-in helper types one password"
    );
    sign_in(app, browser, "admin@example.com").await;
}

/// Walk every page in English, then in Chinese, on `viewport`.
async fn every_page(test: &'static str, viewport: Viewport) {
    if !browser_available(test) {
        return;
    }
    let Some(axe) = axe_source(test) else {
        return;
    };
    let (app, _admin) = spawn_app_with_admin(|_| {}).await;
    let mut findings = Findings::new(test, viewport, axe);
    for lang in ["en", "zh-CN"] {
        let browser = Browser::start(viewport).await;
        browser.goto(&app.url(&format!("/?lang={lang}"))).await;
        let email = format!("{}-{lang}@example.com", test.len());
        visitor_and_buyer_pages(&app, &browser, &mut findings, lang, &email).await;
        admin_pages(&app, &browser, &mut findings, lang).await;
    }
    findings.assert_clean();
}

#[tokio::test]
async fn browser_every_page_is_accessible_on_a_laptop() {
    every_page(
        "browser_every_page_is_accessible_on_a_laptop",
        Viewport::Desktop,
    )
    .await;
}

#[tokio::test]
async fn browser_every_page_is_accessible_and_fits_a_phone() {
    every_page(
        "browser_every_page_is_accessible_and_fits_a_phone",
        Viewport::Phone,
    )
    .await;
}

/// A buyer's credits and purchases read the same way everywhere: one amount format, times as
/// `<time>` the page script turns into the reader's zone, purchases by plan name.
#[tokio::test]
async fn browser_amounts_and_times_read_one_way() {
    const TEST: &str = "browser_amounts_and_times_read_one_way";
    if !browser_available(TEST) {
        return;
    }
    let (app, _admin) = spawn_app_with_admin(|_| {}).await;
    let browser = Browser::start(Viewport::Phone).await;
    sign_up(&app, &browser, "fay@example.com").await;
    buy_through_the_sandbox(&app, &browser, "credits", "credits_card_500").await;
    // A reader in Shanghai (UTC+8) sees Shanghai time.
    let zone = serde_json::json!({ "timezoneId": "Asia/Shanghai" });
    browser
        .devtools("Emulation.setTimezoneOverride", zone)
        .await;
    browser.goto(&app.url("/dashboard?tab=credits")).await;
    let change = browser.text("[data-testid=transactions] .amount-in").await;
    assert_eq!(change, "+500.00", "credits carry two decimals");
    let purchase = browser.text("[data-testid=transaction-description]").await;
    assert_eq!(purchase, "Credits purchased");
    let plan = browser.text("[data-testid=transaction-plan]").await;
    assert!(
        !plan.contains("ord_") && !plan.is_empty(),
        "named by plan: {plan:?}"
    );
    let localised = browser
        .script(
            "return Array.from(document.querySelectorAll('time[datetime]'))\
             .map(t => [t.dataset.localised || '', t.getAttribute('datetime'), t.textContent])",
        )
        .await;
    let times = localised.as_array().cloned().unwrap_or_default();
    assert!(!times.is_empty(), "times are <time> elements");
    for time in &times {
        assert_eq!(time[0], "true", "the page script localised {time}");
        let shown = time[2].as_str().unwrap_or_default();
        assert!(
            shown.contains("GMT+8") && !shown.contains("UTC"),
            "in the reader's zone: {time}"
        );
        assert!(
            time[1].as_str().unwrap_or_default().ends_with('Z'),
            "UTC in datetime: {time}"
        );
    }
    browser.screenshot(TEST, Viewport::Phone).await;
}
