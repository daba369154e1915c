//! The admin console beyond pricing (issue 18): who may see each page, CSRF on every form, the
//! overview's charts and their tables, API keys (the secret shown once), the webhook inbox
//! with its filters, the endpoints page without delivery wired, and reordering plans in one
//! request.

use application::ports::{OrderLocator, PaymentEvent};
use application::use_cases::plans::PricingMode;
use domain::{Currency, Money, OrderId, ProviderId, Timestamp};
use poem::http::StatusCode;

use super::harness::{App, Browser, START_MS};

/// Every console page this module serves.
const PAGES: [&str; 8] = [
    "/admin",
    "/admin/customers",
    "/admin/accounts",
    "/admin/orders",
    "/admin/webhooks",
    "/admin/api-keys",
    "/admin/webhook-endpoints",
    "/admin/audit",
];

async fn paid_order(app: &App, browser: &Browser<'_>, event_id: &str) -> String {
    let page = browser
        .submit(
            "/pricing",
            "/pricing/buy",
            &[("planId", "credits-100"), ("provider", "card_gateway")],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let order = page.location().rsplit('/').next().unwrap().to_owned();
    let event = PaymentEvent::PaymentSucceeded {
        order: OrderLocator {
            order_id: Some(OrderId::new(order.as_str()).unwrap()),
            provider_reference: None,
        },
        amount: Money::from_minor(1000, Currency::Usd).unwrap(),
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    };
    app.deliver(ProviderId::CardGateway, event_id, vec![event])
        .await;
    order
}

#[tokio::test]
async fn only_administrators_reach_the_console_pages() {
    let app = App::new(PricingMode::Static);
    let visitor = app.browser();
    let user = app.signed_in("user@example.com", false).await;
    let admin = app.signed_in("admin@example.com", true).await;
    for path in PAGES {
        let anonymous = visitor.get(path).await;
        assert_eq!(anonymous.status, StatusCode::SEE_OTHER, "{path}");
        assert!(anonymous.location().starts_with("/signin"), "{path}");
        assert_eq!(user.get(path).await.status, StatusCode::FORBIDDEN, "{path}");
        let page = admin.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(
            page.body
                .contains(&format!("href=\"{path}\" aria-current=\"page\"")),
            "{path} is the current section"
        );
    }
    let posts = [
        "/admin/api-keys",
        "/admin/api-keys/key_1/revoke",
        "/admin/webhook-endpoints",
        "/admin/webhook-endpoints/we_1/disable",
        "/admin/pricing/reorder",
        "/admin/customers/usr_1/confirm",
        "/admin/customers/usr_1/apply",
        "/admin/limits/add",
        "/admin/limits/remove",
    ];
    for action in posts {
        let forged = admin
            .post(action, &[("csrf", "0".repeat(64).as_str())])
            .await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN, "{action}");
        let as_user = user.submit("/dashboard", action, &[]).await;
        assert_eq!(as_user.status, StatusCode::FORBIDDEN, "{action}");
    }
    assert!(!user.get("/pricing").await.body.contains("href=\"/admin\""));
    assert!(admin.get("/pricing").await.body.contains("href=\"/admin\""));
}

#[tokio::test]
async fn the_overview_charts_revenue_and_credits_with_their_numbers_beside_them() {
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("buyer@example.com", false).await;
    paid_order(&app, &buyer, "evt-paid").await;
    let admin = app.signed_in("admin@example.com", true).await;
    let page = admin.get("/admin").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    for id in [
        "chart-revenue-usd",
        "chart-credits",
        "chart-subscriptions",
        "chart-features",
        "chart-models",
    ] {
        assert!(body.contains(&format!("data-testid=\"{id}\"")), "{id}");
    }
    assert!(body.contains("role=\"img\" aria-label=\"Revenue per day in USD"));
    // The paid order's day, in the accessible table: 10.00 net, nothing refunded.
    assert!(
        body.contains("<td class=\"num nowrap\">$10.00</td><td class=\"num nowrap\">$0.00</td>")
    );
    // Its 100 credits granted that day.
    assert!(
        body.contains("<td class=\"num nowrap\">100.00</td><td class=\"num nowrap\">0.00</td>")
    );
    assert!(body.contains("Nothing consumed in the last 30 days."));
    assert!(!body.contains("<script>"), "no inline script");
    let chinese = admin.get("/admin?lang=zh-CN").await;
    assert!(chinese.body.contains("USD 每日收入"));
}

#[tokio::test]
async fn an_api_key_secret_is_shown_once_and_a_revoked_key_says_so() {
    let app = App::new(PricingMode::Static);
    let admin = app.signed_in("admin@example.com", true).await;
    let refused = admin
        .submit("/admin/api-keys", "/admin/api-keys", &[("name", "backend")])
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.body.contains("at least one scope"),
        "{}",
        refused.body
    );
    let created = admin
        .submit(
            "/admin/api-keys",
            "/admin/api-keys",
            &[
                ("name", "backend"),
                ("scope", "credits:consume"),
                ("scope", "credits:read"),
            ],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let marker = "data-testid=\"new-key-secret\">";
    let start = created.body.find(marker).expect("the secret") + marker.len();
    let secret: String = created.body[start..]
        .chars()
        .take_while(|c| *c != '<')
        .collect();
    assert!(secret.starts_with("tly_"), "{secret}");
    assert_eq!(created.header("cache-control"), "no-store");
    let listed = admin.get("/admin/api-keys").await;
    assert!(!listed.body.contains(&secret), "the secret is shown once");
    assert!(listed.body.contains("credits:consume, credits:read"));
    let id_marker = "data-key-id=\"";
    let at = listed.body.find(id_marker).unwrap() + id_marker.len();
    let id: String = listed.body[at..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    let revoked = admin
        .submit(
            "/admin/api-keys",
            &format!("/admin/api-keys/{id}/revoke"),
            &[],
        )
        .await;
    assert_eq!(revoked.location(), "/admin/api-keys?notice=key_revoked");
    let after = admin.get("/admin/api-keys?notice=key_revoked").await;
    assert!(after.body.contains("The key was revoked."));
    assert!(after.body.contains("Revoked"));
    assert!(!after.body.contains("data-testid=\"revoke-key\""));
    let unknown = admin
        .submit("/admin/api-keys", "/admin/api-keys/nope/revoke", &[])
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn every_action_from_a_console_page_is_in_the_audit_log() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    let before = admin.get("/admin/audit").await.body;
    assert!(!before.contains("data-action=\"api_key.created\""));
    let created = admin
        .submit(
            "/admin/api-keys",
            "/admin/api-keys",
            &[("name", "audited"), ("scope", "credits:read")],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let listed = admin.get("/admin/api-keys").await.body;
    let id_marker = "data-key-id=\"";
    let at = listed.find(id_marker).unwrap() + id_marker.len();
    let id: String = listed[at..].chars().take_while(|c| *c != '"').collect();
    admin
        .submit(
            "/admin/api-keys",
            &format!("/admin/api-keys/{id}/revoke"),
            &[],
        )
        .await;
    admin
        .submit("/admin/pricing", "/admin/pricing/import", &[])
        .await;
    let hidden = admin
        .submit(
            "/admin/pricing",
            "/admin/pricing/plans/qr-credits/hide",
            &[],
        )
        .await;
    assert_eq!(hidden.location(), "/admin/pricing?notice=hidden");
    let deleted = admin
        .submit(
            "/admin/pricing",
            "/admin/pricing/plans/qr-credits/delete",
            &[],
        )
        .await;
    assert_eq!(deleted.location(), "/admin/pricing?notice=deleted");
    let audit = admin.get("/admin/audit").await.body;
    for action in [
        "api_key.created",
        "api_key.revoked",
        "plan.updated",
        "plan.deleted",
    ] {
        assert!(
            audit.contains(&format!("data-action=\"{action}\"")),
            "{action}: {audit}"
        );
    }
    assert!(audit.contains(&id), "the revoked key is named");
    assert!(audit.contains("qr-credits"), "the plan is named");
}

#[tokio::test]
async fn the_inbox_lists_recorded_events_filtered_by_provider_and_outcome() {
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("buyer@example.com", false).await;
    paid_order(&app, &buyer, "evt-inbox-1").await;
    let admin = app.signed_in("admin@example.com", true).await;
    let all = admin.get("/admin/webhooks").await;
    assert!(
        all.body.contains("data-event-id=\"evt-inbox-1\""),
        "{}",
        all.body
    );
    assert!(all.body.contains("data-outcome=\"applied\""));
    assert!(all.body.contains("Raw body"));
    let applied = admin
        .get("/admin/webhooks?provider=card_gateway&outcome=applied")
        .await;
    assert!(applied.body.contains("data-event-id=\"evt-inbox-1\""));
    assert!(applied.body.contains("<option value=\"applied\" selected>"));
    let mismatches = admin.get("/admin/webhooks?outcome=mismatch").await;
    assert!(!mismatches.body.contains("data-event-id=\"evt-inbox-1\""));
    assert!(mismatches.body.contains("No recorded events match."));
    let other = admin.get("/admin/webhooks?provider=wallet_qr").await;
    assert!(!other.body.contains("data-event-id=\"evt-inbox-1\""));
    for bad in ["outcome=nonsense", "provider=nope", "cursor=garbage"] {
        let page = admin.get(&format!("/admin/webhooks?{bad}")).await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn without_webhook_delivery_the_endpoints_page_says_so() {
    let app = App::new(PricingMode::Static);
    let admin = app.signed_in("admin@example.com", true).await;
    let page = admin.get("/admin/webhook-endpoints").await;
    assert!(page.body.contains("Webhook delivery is not configured"));
    assert!(!page.body.contains("data-testid=\"add-endpoint\""));
    let post = admin
        .submit(
            "/admin/webhook-endpoints",
            "/admin/webhook-endpoints",
            &[("url", "https://example.com/hook")],
        )
        .await;
    assert_eq!(post.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn plans_are_reordered_by_their_position_fields_in_one_request() {
    let app = App::new(PricingMode::Dynamic);
    let admin = app.signed_in("admin@example.com", true).await;
    admin
        .submit("/admin/pricing", "/admin/pricing/import", &[])
        .await;
    let page = admin.get("/admin/pricing").await.body;
    assert!(page.contains("form=\"reorder\" name=\"position.qr-credits\""));
    assert!(page.contains("id=\"reorder\""));
    let at = |body: &str, id: &str| body.find(&format!("data-plan-id=\"{id}\"")).unwrap();
    assert!(at(&page, "credits-100") < at(&page, "qr-credits"));
    let moved = admin
        .submit(
            "/admin/pricing",
            "/admin/pricing/reorder",
            &[("position.qr-credits", "1"), ("position.credits-100", "9")],
        )
        .await;
    assert_eq!(moved.location(), "/admin/pricing?notice=moved");
    let audit = admin.get("/admin/audit").await.body;
    assert!(
        audit.contains("data-action=\"plans.reordered\""),
        "the page's reorder is audited: {audit}"
    );
    let after = admin.get("/admin/pricing").await.body;
    // The plan the admin gave position 1 is first, although pro-monthly's field still shows 1.
    assert!(at(&after, "qr-credits") < at(&after, "pro-monthly"));
    assert!(at(&after, "pro-monthly") < at(&after, "lifetime"));
    assert!(at(&after, "qr-credits") < at(&after, "credits-100"));
    let public = admin.get("/pricing?tab=credits").await.body;
    assert!(at(&public, "qr-credits") < at(&public, "credits-100"));
    for bad in [
        ("position.qr-credits", "0"),
        ("position.nope", "1"),
        ("position.qr-credits", "x"),
    ] {
        let refused = admin
            .submit("/admin/pricing", "/admin/pricing/reorder", &[bad])
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad:?}");
    }
    // A plan given the last position goes last, although the last plan's field still shows it.
    let rows = after.matches("data-plan-id=").count().to_string();
    let last = after
        .rsplit("data-plan-id=\"")
        .next()
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert_ne!(last, "qr-credits");
    admin
        .submit(
            "/admin/pricing",
            "/admin/pricing/reorder",
            &[("position.qr-credits", rows.as_str())],
        )
        .await;
    let moved = admin.get("/admin/pricing").await.body;
    assert!(
        at(&moved, &last) < at(&moved, "qr-credits"),
        "qr-credits, given position {rows}, comes after {last}"
    );
}

/// The value of the first `name="<name>" value="…"` in `body`.
fn hidden(body: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = body.find(&marker).unwrap_or_else(|| panic!("{name}")) + marker.len();
    body[at..].chars().take_while(|c| *c != '"').collect()
}

#[tokio::test]
async fn an_admin_finds_a_customer_and_grants_credits_after_confirming_once() {
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("buyer@example.com", false).await;
    let order = paid_order(&app, &buyer, "evt-c1").await;
    app.signed_in("other@example.com", false).await;
    let admin = app.signed_in("admin@example.com", true).await;
    let found = admin.get("/admin/customers?query=BUY").await;
    assert!(
        found.body.contains(">buyer@example.com</a>"),
        "{}",
        found.body
    );
    assert!(!found.body.contains("other@example.com"));
    let marker = "data-user-id=\"";
    let at = found.body.find(marker).unwrap() + marker.len();
    let id: String = found.body[at..].chars().take_while(|c| *c != '"').collect();
    let page = format!("/admin/customers/{id}");
    let shown = admin.get(&page).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert!(
        shown
            .body
            .contains("data-testid=\"customer-balance\">100.00<")
    );
    assert!(shown.body.contains(&format!("data-order-id=\"{order}\"")));
    assert!(shown.body.contains("data-testid=\"refund-order\""));
    assert!(shown.body.contains("Paid in USD"), "{}", shown.body);
    let confirm = admin
        .submit(
            &page,
            &format!("{page}/confirm"),
            &[
                ("action", "credits"),
                ("amount", "100"),
                ("reason", "outage"),
                ("priority", "7"),
            ],
        )
        .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("Grant 100 credits, for: outage"));
    assert_eq!(
        hidden(&confirm.body, "priority"),
        "7",
        "the confirmation carries it on"
    );
    let key = hidden(&confirm.body, "key");
    let form = [
        ("csrf", hidden(&confirm.body, "csrf")),
        ("action", "credits".to_owned()),
        ("key", key),
        ("amount", "100".to_owned()),
        ("reason", "outage".to_owned()),
        ("expiresOn", String::new()),
        ("category", "promotional".to_owned()),
        ("priority", "7".to_owned()),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for _ in 0..2 {
        let applied = admin.post(&format!("{page}/apply"), &form).await;
        assert_eq!(applied.location(), format!("{page}?notice=granted"));
    }
    let after = admin.get(&format!("{page}?notice=granted")).await;
    assert!(after.body.contains("The credits were granted."));
    assert!(
        after
            .body
            .contains("data-testid=\"customer-balance\">200.00<"),
        "the same confirmation sent twice grants once"
    );
    let credits = buyer.get("/dashboard?tab=credits").await.body;
    assert!(
        credits.contains(
            "data-testid=\"balance-by-category\">Of which: 100.00 paid · 100.00 promotional<"
        ),
        "the grant is promotional, as chosen: {credits}"
    );
    let too_much = admin
        .submit(
            &page,
            &format!("{page}/apply"),
            &[
                ("action", "credits"),
                ("key", "k-debit"),
                ("amount", "-500"),
                ("reason", "x"),
            ],
        )
        .await;
    assert_eq!(too_much.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(too_much.body.contains("insufficient credits"));
    let missing = admin.get("/admin/customers/usr_nobody").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn orders_are_filtered_by_status_provider_and_customer() {
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("buyer@example.com", false).await;
    let order = paid_order(&app, &buyer, "evt-o1").await;
    let admin = app.signed_in("admin@example.com", true).await;
    let row = format!("data-order-id=\"{order}\"");
    assert!(admin.get("/admin/orders").await.body.contains(&row));
    assert!(
        admin
            .get("/admin/orders?status=paid&provider=card_gateway")
            .await
            .body
            .contains(&row)
    );
    assert!(
        !admin
            .get("/admin/orders?status=refunded")
            .await
            .body
            .contains(&row)
    );
    assert!(
        !admin
            .get("/admin/orders?provider=wallet_qr")
            .await
            .body
            .contains(&row)
    );
    assert!(
        !admin
            .get("/admin/orders?userId=usr_nobody")
            .await
            .body
            .contains(&row)
    );
    for bad in ["status=nonsense", "provider=nope", "cursor=garbage"] {
        let page = admin.get(&format!("/admin/orders?{bad}")).await;
        assert_eq!(page.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn an_admin_replays_a_recorded_event_after_confirming() {
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("buyer@example.com", false).await;
    paid_order(&app, &buyer, "evt-replay-1").await;
    let admin = app.signed_in("admin@example.com", true).await;
    let inbox = admin.get("/admin/webhooks").await;
    assert!(
        inbox.body.contains("data-testid=\"replay\""),
        "{}",
        inbox.body
    );
    let marker = "action=\"/admin/webhooks/";
    let at = inbox.body.find(marker).unwrap() + marker.len();
    let id: String = inbox.body[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let confirm_path = format!("/admin/webhooks/{id}/confirm");
    let replay_path = format!("/admin/webhooks/{id}/replay");
    for action in [&confirm_path, &replay_path] {
        let forged = admin
            .post(action, &[("csrf", "0".repeat(64).as_str())])
            .await;
        assert_eq!(forged.status, StatusCode::FORBIDDEN, "{action}");
        let as_user = buyer.submit("/dashboard", action, &[]).await;
        assert_eq!(as_user.status, StatusCode::FORBIDDEN, "{action}");
    }
    let confirm = admin
        .submit(
            "/admin/webhooks",
            &confirm_path,
            &[
                ("eventId", "evt-replay-1"),
                ("outcome", "applied"),
                ("provider", "card_gateway"),
            ],
        )
        .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    assert!(confirm.body.contains("evt-replay-1 (recorded as applied)"));
    let csrf = hidden(&confirm.body, "csrf");
    let replayed = admin.post(&replay_path, &[("csrf", csrf.as_str())]).await;
    assert_eq!(replayed.location(), "/admin/webhooks?notice=replayed");
    let after = admin.get("/admin/webhooks?notice=replayed").await;
    assert!(after.body.contains("The event was replayed."));
    assert_eq!(
        after.body.matches("data-event-id=").count(),
        1,
        "an applied event replays as a duplicate: no new row"
    );
    let audit = admin.get("/admin/audit").await;
    assert!(
        !audit
            .body
            .contains("data-action=\"webhook_event.replayed\""),
        "a replay that changed nothing (a duplicate) writes no entry"
    );
    let missing = admin
        .post("/admin/webhooks/999999/replay", &[("csrf", csrf.as_str())])
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_admin_asks_the_provider_to_end_a_subscription_now_after_confirming() {
    use domain::BillingPeriod;
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("sub@example.com", false).await;
    let page = buyer
        .submit(
            "/pricing",
            "/pricing/buy",
            &[("planId", "pro-monthly"), ("provider", "card_gateway")],
        )
        .await;
    let order = page.location().rsplit('/').next().unwrap().to_owned();
    let activated = PaymentEvent::SubscriptionActivated {
        order: OrderLocator {
            order_id: Some(OrderId::new(order.as_str()).unwrap()),
            provider_reference: None,
        },
        provider_subscription_id: "sub_now".into(),
        period: BillingPeriod::new(
            Timestamp::from_unix_millis(START_MS),
            Timestamp::from_unix_millis(START_MS + 30 * 86_400_000),
        )
        .unwrap(),
        amount: None,
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    };
    app.deliver(ProviderId::CardGateway, "evt-now", vec![activated])
        .await;
    let admin = app.signed_in("admin@example.com", true).await;
    let found = admin.get("/admin/customers?query=sub").await;
    let marker = "data-user-id=\"";
    let at = found.body.find(marker).unwrap() + marker.len();
    let id: String = found.body[at..].chars().take_while(|c| *c != '"').collect();
    let customer = format!("/admin/customers/{id}");
    let shown = admin.get(&customer).await;
    assert!(
        shown
            .body
            .contains("data-testid=\"cancel-subscription-now\""),
        "{}",
        shown.body
    );
    let marker = "name=\"subscriptionId\" value=\"";
    let at = shown.body.find(marker).unwrap() + marker.len();
    let subscription: String = shown.body[at..].chars().take_while(|c| *c != '"').collect();
    let confirm = admin
        .submit(
            &customer,
            &format!("{customer}/confirm"),
            &[("action", "cancel_now"), ("subscriptionId", &subscription)],
        )
        .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("now through its provider"));
    let form = [
        ("csrf", hidden(&confirm.body, "csrf")),
        ("action", "cancel_now".to_owned()),
        ("key", hidden(&confirm.body, "key")),
        ("subscriptionId", subscription),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let applied = admin.post(&format!("{customer}/apply"), &form).await;
    assert_eq!(
        applied.location(),
        format!("{customer}?notice=cancel_requested")
    );
    let after = admin
        .get(&format!("{customer}?notice=cancel_requested"))
        .await;
    assert!(
        after
            .body
            .contains("The provider was asked to end the subscription now.")
    );
}

#[tokio::test]
async fn an_admin_allows_a_customer_a_hidden_plan_and_withdraws_it_after_confirming() {
    let app = App::new(PricingMode::Static);
    let buyer = app.signed_in("buyer@example.com", false).await;
    let admin = app.signed_in("admin@example.com", true).await;
    let found = admin.get("/admin/customers?query=buyer").await;
    let marker = "data-user-id=\"";
    let at = found.body.find(marker).unwrap() + marker.len();
    let id: String = found.body[at..].chars().take_while(|c| *c != '"').collect();
    let page = format!("/admin/customers/{id}");
    let shown = admin.get(&page).await;
    assert!(
        shown
            .body
            .contains("No hidden plan is allowed to this customer.")
    );
    for (action, notice) in [
        ("allow_plan", "allowed"),
        ("remove_allowance", "allowance_removed"),
    ] {
        let fields = [("action", action), ("planId", "lifetime")];
        let confirm = admin
            .submit(&page, &format!("{page}/confirm"), &fields)
            .await;
        assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
        assert!(confirm.body.contains("lifetime"));
        let form = [
            ("csrf", hidden(&confirm.body, "csrf")),
            ("action", action.to_owned()),
            ("key", hidden(&confirm.body, "key")),
            ("planId", "lifetime".to_owned()),
        ];
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let applied = admin.post(&format!("{page}/apply"), &form).await;
        assert_eq!(applied.location(), format!("{page}?notice={notice}"));
        let after = admin.get(&format!("{page}?notice={notice}")).await;
        assert!(
            after.body.contains("data-testid=\"notice\""),
            "{}",
            after.body
        );
        assert_eq!(
            after.body.contains("data-testid=\"allowance\""),
            action == "allow_plan",
            "{}",
            after.body
        );
    }
    let unknown = [
        ("action", "allow_plan"),
        ("key", "k-x"),
        ("planId", "no_such_plan"),
    ];
    let refused = admin
        .submit(&page, &format!("{page}/apply"), &unknown)
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.body.contains("plan not found"));
    let audit = admin.get("/admin/audit").await;
    assert!(audit.body.contains("plan.allowed"), "{}", audit.body);
    drop(buyer);
}

/// An administrator caps a customer's spending from the customer's page: the limit shows with
/// its meter, the customer sees it on their own credits tab, both changes are in the audit log;
/// a bad limit, or one removed already, is a notice.
#[tokio::test]
async fn an_admin_sets_and_removes_a_customer_s_limit_from_the_console() {
    let app = App::new(PricingMode::Static);
    let customer = app.signed_in("capped@example.com", false).await;
    let admin = app.signed_in("admin@example.com", true).await;
    let found = admin.get("/admin/customers?query=capped").await;
    let marker = "data-user-id=\"";
    let at = found.body.find(marker).unwrap() + marker.len();
    let id: String = found.body[at..].chars().take_while(|c| *c != '"').collect();
    let page = format!("/admin/customers/{id}");
    let shown = admin.get(&page).await.body;
    assert!(shown.contains("data-testid=\"spend-limits\""), "{shown}");
    assert!(shown.contains("action=\"/admin/limits/add\""), "{shown}");
    let bad = admin
        .submit(
            &page,
            "/admin/limits/add",
            &[("accountId", &id), ("credits", "0"), ("window", "day")],
        )
        .await;
    assert_eq!(bad.location(), format!("{page}?notice=limit_invalid"));
    let added = admin
        .submit(
            &page,
            "/admin/limits/add",
            &[("accountId", &id), ("credits", "40"), ("window", "month")],
        )
        .await;
    assert_eq!(added.location(), format!("{page}?notice=limit_added"));
    let after = admin.get(added.location()).await.body;
    assert!(
        after.contains("0.00 of 40.00 credits per month (UTC)"),
        "{after}"
    );
    let own = customer.get("/dashboard?tab=credits").await.body;
    assert!(
        own.contains("0.00 of 40.00 credits per month (UTC)"),
        "{own}"
    );
    let marker = "name=\"limitId\" value=\"";
    let at = after.find(marker).unwrap() + marker.len();
    let limit: String = after[at..].chars().take_while(|c| *c != '"').collect();
    let form = [("accountId", id.as_str()), ("limitId", limit.as_str())];
    let removed = admin.submit(&page, "/admin/limits/remove", &form).await;
    assert_eq!(removed.location(), format!("{page}?notice=limit_removed"));
    let again = admin.submit(&page, "/admin/limits/remove", &form).await;
    assert_eq!(again.location(), format!("{page}?notice=limit_gone"));
    // A team's limits are on its page in the console.
    let owner = domain::UserId::new(id.clone()).unwrap();
    let team = app.service.create_team(&owner, "Capped").await.unwrap();
    let team_page = format!("/admin/accounts/{}", team.account.id);
    let shown = admin.get(&team_page).await.body;
    assert!(shown.contains("data-testid=\"spend-limits\""), "{shown}");
    let team_id = team.account.id.to_string();
    let added = admin
        .submit(
            &team_page,
            "/admin/limits/add",
            &[
                ("accountId", &team_id),
                ("credits", "9"),
                ("window", "week"),
            ],
        )
        .await;
    assert_eq!(added.location(), format!("{team_page}?notice=limit_added"));
    let after = admin.get(added.location()).await.body;
    assert!(after.contains("0.00 of 9.00 credits per week"), "{after}");
    let audit = admin.get("/admin/audit").await.body;
    for action in ["limit.added", "limit.removed"] {
        assert!(
            audit.contains(&format!("data-action=\"{action}\"")),
            "{action}: {audit}"
        );
    }
}
