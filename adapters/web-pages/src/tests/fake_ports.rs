//! The pages over mocks of the inbound ports (`application::inbound::Mock…Service`): what a
//! reader sees when a port answers this or that, with no store and no service behind it.
//!
//! A mock with no expectation for a method panics when the method is called (the page then
//! answers 500 and the test fails), and a `times(1)` expectation not met fails the test when
//! the pages are dropped: so each test also says which ports a page may call.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::{Email, Role, User};
use application::inbound::{
    MockAccountsService, MockAdminService, MockCreditsService, MockHostEventsService,
    MockPaymentsService, MockPlansService, Ports,
};
use application::pagination::Page as ListPage;
use application::ports::{Listing, StoreError, StoredPlan};
use application::use_cases::InfraError;
use application::use_cases::initiate_payment::InitiatePaymentError;
use application::use_cases::report_status::StatusReport;
use application::use_cases::sessions::{AccountsError, Principal};
use domain::{AppEnvironment, Credits, PlanId, SubscriptionId, Timestamp, UserId};
use poem::EndpointExt;
use poem::http::StatusCode;
use poem::test::TestClient;

use super::harness::{START_MS, catalog};
use crate::PageSettings;
use crate::csrf;

/// The session token the signed-in tests send.
const SESSION: &str = "session-token-of-the-reader";
/// The CSRF secret the tests' browser holds (a plausible one: URL-safe, 8 to 128 characters).
const CSRF_SECRET: &str = "csrf-secret-0123456789abcdef";

/// One mock per port, each given its expectations before the pages are built.
#[derive(Default)]
struct Fakes {
    payments: MockPaymentsService,
    credits: MockCreditsService,
    accounts: MockAccountsService,
    plans: MockPlansService,
    admin: MockAdminService,
    host_events: MockHostEventsService,
}

/// What a request answered.
struct Answer {
    status: StatusCode,
    location: String,
    body: String,
}

/// The pages over the mocks, and requests to them with or without a session.
struct Pages {
    client: TestClient<poem::endpoint::BoxEndpoint<'static, poem::Response>>,
}

impl Fakes {
    /// `SESSION` belongs to a user with `role`.
    fn signed_in_as(mut self, role: Role) -> Self {
        self.accounts
            .expect_authenticate()
            .withf(|token| token == SESSION)
            .returning(move |_| Ok(Principal::User(reader(role))));
        // In no team: the dashboard and pricing offer no other account.
        self.accounts
            .expect_my_accounts()
            .returning(|_| Ok(Vec::new()));
        self
    }

    /// A browser without a CSRF cookie is given this secret.
    fn new_csrf_secret(mut self) -> Self {
        self.accounts
            .expect_new_secret()
            .returning(|| CSRF_SECRET.to_owned());
        self
    }

    fn pages(self) -> Pages {
        let ports = Ports {
            payments: Arc::new(self.payments),
            credits: Arc::new(self.credits),
            accounts: Arc::new(self.accounts),
            plans: Arc::new(self.plans),
            admin: Arc::new(self.admin),
            host_events: Arc::new(self.host_events),
        };
        let settings = PageSettings {
            secure_cookies: true,
            sandbox_notice: false,
            trust_forwarded_for: false,
            public_base_url: None,
        };
        Pages {
            client: TestClient::new(crate::routes(ports, settings).boxed()),
        }
    }
}

impl Pages {
    async fn answer(response: poem::test::TestResponse) -> Answer {
        let status = response.0.status();
        let location = response
            .0
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.0.into_body().into_string().await.unwrap();
        Answer {
            status,
            location,
            body,
        }
    }

    /// `GET path` by a visitor with no cookies.
    async fn get_anonymous(&self, path: &str) -> Answer {
        Self::answer(self.client.get(path).send().await).await
    }

    /// `GET path` with the session cookie (and no CSRF cookie yet).
    async fn get_signed_in(&self, path: &str) -> Answer {
        let cookie = format!("tally_session={SESSION}");
        Self::answer(self.client.get(path).header("cookie", cookie).send().await).await
    }

    /// `POST path` with the session and CSRF cookies and `form` as the body.
    async fn post_signed_in(&self, path: &str, form: &[(&str, &str)]) -> Answer {
        let cookie = format!("tally_session={SESSION}; tally_csrf={CSRF_SECRET}");
        let request = self.client.post(path).header("cookie", cookie).form(&form);
        Self::answer(request.send().await).await
    }
}

/// The CSRF token a page shows the signed-in reader.
fn valid_token() -> String {
    csrf::token(CSRF_SECRET, Some(SESSION))
}

fn reader(role: Role) -> User {
    User {
        id: UserId::new("u_reader").unwrap(),
        email: Email::parse("reader@example.com").unwrap(),
        role,
        created_at: Timestamp::from_unix_millis(START_MS),
    }
}

fn empty_report() -> StatusReport {
    StatusReport {
        balance: Credits::ZERO,
        by_category: std::collections::BTreeMap::new(),
        subscription: None,
        subscriptions: Vec::new(),
        lifetime_order: None,
        one_time_access: Vec::new(),
        pending_reservations: Vec::new(),
        past_due_grace_ms: 0,
        as_of: Timestamp::from_unix_millis(START_MS),
    }
}

#[tokio::test]
async fn the_dashboard_of_a_user_with_nothing_shows_a_zero_balance_and_empty_cards() {
    let mut fakes = Fakes::default().signed_in_as(Role::User).new_csrf_secret();
    fakes
        .credits
        .expect_report_status()
        .withf(|user| user.id.as_str() == "u_reader")
        .times(1)
        .returning(|_| Ok(empty_report()));
    fakes
        .plans
        .expect_plan_names()
        .times(1)
        .returning(|_| Ok(BTreeMap::new()));
    fakes
        .payments
        .expect_list_orders()
        .times(1)
        .returning(|_, request| {
            Ok(ListPage {
                items: Vec::new(),
                request,
                total: 0,
            })
        });
    let page = fakes.pages().get_signed_in("/dashboard").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("reader@example.com"));
    assert!(page.body.contains("You have no active subscription."));
    assert!(page.body.contains("You have not bought anything yet."));
    assert!(
        page.body.contains("<span class=\"stat-value\">0.00</span>"),
        "{}",
        page.body
    );
    // No live subscription: no "Change plan" card, so no switch options were asked for.
    assert!(!page.body.contains("data-testid=\"plan-switch\""));
}

#[tokio::test]
async fn the_admin_console_refuses_a_user_without_asking_the_admin_port() {
    let mut fakes = Fakes::default().signed_in_as(Role::User).new_csrf_secret();
    fakes.admin.expect_admin_overview().never();
    fakes.admin.expect_find_customers().never();
    fakes.admin.expect_admin_plans().never();
    fakes.admin.expect_adjust_credits().never();
    fakes.admin.expect_admin_team_accounts().never();
    fakes.admin.expect_admin_team_account().never();
    let pages = fakes.pages();
    for path in [
        "/admin",
        "/admin/customers",
        "/admin/accounts",
        "/admin/accounts/team_1",
        "/admin/pricing",
    ] {
        let page = pages.get_signed_in(path).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{path}");
        assert!(page.body.contains("This page is for administrators."));
    }
    // Even with a valid form, a user's post to the console is refused.
    let token = valid_token();
    let post = pages
        .post_signed_in(
            "/admin/customers/u_other/apply",
            &[
                ("csrf", &token),
                ("action", "grant"),
                ("amount", "5"),
                ("key", "adm_1"),
            ],
        )
        .await;
    assert_eq!(post.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_pricing_page_is_built_from_the_ports_catalogue() {
    let mut fakes = Fakes::default().new_csrf_secret();
    let listed: Vec<StoredPlan> = catalog()
        .into_iter()
        .filter(|plan| ["pro-monthly", "credits-100"].contains(&plan.id().as_str()))
        .enumerate()
        .map(|(position, plan)| StoredPlan {
            plan,
            listing: Listing {
                sort_order: i32::try_from(position).unwrap(),
                locales: Vec::new(),
            },
        })
        .collect();
    fakes
        .plans
        .expect_public_plans()
        .withf(|locale| locale.is_some_and(|l| l.as_str() == "en"))
        .times(1)
        .returning(move |_| Ok(listed.clone()));
    fakes
        .plans
        .expect_environment()
        .returning(|| AppEnvironment::Production);
    let page = fakes.pages().get_anonymous("/pricing").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("pro-monthly name"), "{}", page.body);
    assert!(page.body.contains("$9.99"));
    assert!(page.body.contains("$19.99"), "the strikethrough price");
    assert!(page.body.contains("credits-100 name"));
    // Only what the port listed: the catalogue's other plans are not on the page.
    assert!(!page.body.contains("lifetime name"));
    assert!(!page.body.contains("qr-credits name"));
}

#[tokio::test]
async fn a_port_error_becomes_the_error_page_without_its_cause() {
    let mut fakes = Fakes::default().new_csrf_secret();
    fakes.plans.expect_public_plans().times(1).returning(|_| {
        Err(InfraError::Unavailable(anyhow::anyhow!(
            "connection to db.internal:5432 refused"
        )))
    });
    let page = fakes.pages().get_anonymous("/pricing").await;
    assert_eq!(page.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.body.contains("Temporarily unavailable"));
    assert!(!page.body.contains("db.internal"), "{}", page.body);

    let mut fakes = Fakes::default().signed_in_as(Role::User).new_csrf_secret();
    fakes
        .credits
        .expect_report_status()
        .times(1)
        .returning(|_| {
            Err(InfraError::from(StoreError::Corrupt(
                "orders row 42: status 'weird'".into(),
            )))
        });
    let page = fakes.pages().get_signed_in("/dashboard").await;
    assert_eq!(page.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(page.body.contains("Something went wrong"));
    assert!(!page.body.contains("orders row 42"), "{}", page.body);
    assert!(!page.body.contains("weird"));
}

#[tokio::test]
async fn a_session_check_the_database_cannot_answer_is_a_503_page() {
    let mut fakes = Fakes::default();
    fakes
        .accounts
        .expect_authenticate()
        .times(1)
        .returning(|_| {
            Err(AccountsError::Infra(InfraError::Unavailable(
                anyhow::anyhow!("pool timed out"),
            )))
        });
    let page = fakes.pages().get_signed_in("/dashboard").await;
    assert_eq!(page.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.body.contains("Temporarily unavailable"));
    assert!(!page.body.contains("pool timed out"));
}

#[tokio::test]
async fn a_form_without_a_valid_csrf_token_is_refused_before_any_port_is_called() {
    let mut fakes = Fakes::default().signed_in_as(Role::Admin);
    fakes.payments.expect_initiate_payment().never();
    fakes.payments.expect_cancel_payment().never();
    fakes.admin.expect_adjust_credits().never();
    fakes.admin.expect_create_plan().never();
    fakes.accounts.expect_sign_out().never();
    let pages = fakes.pages();
    let forged = "0".repeat(64);
    let posts = [
        ("/pricing/buy", "planId", "pro-monthly"),
        ("/dashboard/subscription/cancel", "subscriptionId", "sub_1"),
        ("/admin/customers/u_other/apply", "amount", "5"),
        ("/admin/pricing", "id", "team"),
        ("/signout", "x", "y"),
    ];
    for (path, field, value) in posts {
        for token in ["", forged.as_str()] {
            let fields: Vec<(&str, &str)> = if token.is_empty() {
                vec![(field, value)]
            } else {
                vec![("csrf", token), (field, value)]
            };
            let page = pages.post_signed_in(path, &fields).await;
            assert_eq!(page.status, StatusCode::FORBIDDEN, "{path} {token:?}");
            assert!(page.body.contains("This form has expired"), "{path}");
        }
    }
}

#[tokio::test]
async fn a_buy_the_port_refuses_as_already_subscribed_is_the_409_page() {
    let mut fakes = Fakes::default().signed_in_as(Role::User);
    fakes
        .payments
        .expect_initiate_payment()
        .withf(|request| {
            request.user.id.as_str() == "u_reader"
                && request.plan_id.as_str() == "pro-monthly"
                && request.idempotency_key.is_none()
        })
        .times(1)
        .returning(|_| {
            Err(InitiatePaymentError::AlreadySubscribed {
                subscription_id: SubscriptionId::new("sub_1").unwrap(),
                plan_id: PlanId::new("pro-monthly").unwrap(),
            })
        });
    let token = valid_token();
    let page = fakes
        .pages()
        .post_signed_in(
            "/pricing/buy",
            &[
                ("csrf", &token),
                ("planId", "pro-monthly"),
                ("provider", "card_gateway"),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::CONFLICT, "{}", page.body);
    assert!(page.body.contains("You already have a subscription"));
    // The dashboard switches plans: the page says so and links to its switch.
    assert!(!page.body.contains("not available yet"), "{}", page.body);
    assert!(page.body.contains("href=\"/dashboard#plan-switch\""));
    assert!(page.body.contains("Change plan on the dashboard"));
    assert!(page.location.is_empty());
}

#[tokio::test]
async fn a_provider_failure_at_checkout_is_the_502_page_without_the_reason() {
    let mut fakes = Fakes::default().signed_in_as(Role::User);
    fakes
        .payments
        .expect_initiate_payment()
        .times(1)
        .returning(|_| {
            Err(InitiatePaymentError::Gateway {
                order_id: domain::OrderId::new("ord_1").unwrap(),
                reason: "card_gateway answered 500: upstream trace abc".into(),
            })
        });
    let token = valid_token();
    let page = fakes
        .pages()
        .post_signed_in(
            "/pricing/buy",
            &[
                ("csrf", &token),
                ("planId", "pro-monthly"),
                ("provider", "card_gateway"),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::BAD_GATEWAY);
    assert!(page.body.contains("The payment provider did not respond"));
    assert!(!page.body.contains("upstream trace"));
}

#[tokio::test]
async fn a_buy_naming_no_known_provider_is_refused_without_asking_the_payments_port() {
    let mut fakes = Fakes::default().signed_in_as(Role::User);
    fakes.payments.expect_initiate_payment().never();
    let pages = fakes.pages();
    let token = valid_token();
    for provider in ["", "stripe", "CARD_GATEWAY"] {
        let page = pages
            .post_signed_in(
                "/pricing/buy",
                &[
                    ("csrf", &token),
                    ("planId", "pro-monthly"),
                    ("provider", provider),
                ],
            )
            .await;
        assert_eq!(
            page.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{provider:?}"
        );
        assert!(page.body.contains("This plan cannot be bought right now"));
    }
}

#[tokio::test]
async fn a_buy_naming_a_malformed_plan_is_the_unknown_plan_page_without_asking_the_port() {
    let mut fakes = Fakes::default().signed_in_as(Role::User);
    fakes.payments.expect_initiate_payment().never();
    let pages = fakes.pages();
    let token = valid_token();
    for plan in ["", "Pro Monthly", "../x"] {
        let page = pages
            .post_signed_in(
                "/pricing/buy",
                &[
                    ("csrf", &token),
                    ("planId", plan),
                    ("provider", "card_gateway"),
                ],
            )
            .await;
        assert_eq!(page.status, StatusCode::UNPROCESSABLE_ENTITY, "{plan:?}");
        assert!(page.body.contains("This plan cannot be bought right now"));
    }
}

#[tokio::test]
async fn without_webhook_delivery_the_endpoints_page_says_so_and_offers_no_action() {
    let mut fakes = Fakes::default().signed_in_as(Role::Admin).new_csrf_secret();
    fakes
        .host_events
        .expect_delivery_configured()
        .return_const(false);
    fakes.host_events.expect_list_endpoints().never();
    fakes.host_events.expect_create_endpoint().never();
    let pages = fakes.pages();
    let page = pages.get_signed_in("/admin/webhook-endpoints").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body
            .contains("Webhook delivery is not configured for this service.")
    );
    assert!(!page.body.contains("data-testid=\"endpoint-url\""));
    let token = valid_token();
    let post = pages
        .post_signed_in(
            "/admin/webhook-endpoints",
            &[("csrf", &token), ("url", "https://example.com/hook")],
        )
        .await;
    assert_eq!(post.status, StatusCode::NOT_FOUND);
}

/// A Pancake (`mor_c`) subscription to `pro` in `status`, with a switch to `team` scheduled for
/// its period's end.
fn switching_to_team(status: domain::SubscriptionStatus) -> domain::Subscription {
    use domain::{
        BillingPeriod, Money, PlanSnapshot, PlanType, ProviderId, RenewalIntent, ScheduledSwitch,
        SoldTerms, Subscription, SubscriptionParts, SwitchClaim,
    };
    let at = Timestamp::from_unix_millis;
    let snapshot = PlanSnapshot {
        bonus: None,
        plan_id: PlanId::new("pro").unwrap(),
        plan_type: PlanType::Recurring,
        price: Money::from_minor(2697, domain::Currency::Usd).unwrap(),
        credits: None,
        duration: domain::Duration::from_months_value(3),
        entitlements: None,
    };
    Subscription::restore_claimed(
        SubscriptionParts {
            id: SubscriptionId::new("sub_ours").unwrap(),
            user_id: UserId::new("u_reader").unwrap(),
            account: None,
            plan_id: PlanId::new("pro").unwrap(),
            provider: ProviderId::MorC,
            provider_subscription_id: "order_1".into(),
            status,
            current_period: BillingPeriod::new(at(START_MS), at(START_MS + 86_400_000)).unwrap(),
            renewal: RenewalIntent::EndsAtPeriodEnd,
            last_event_at: at(START_MS),
            sold_terms: Some(SoldTerms::of_order(&snapshot).unwrap()),
        },
        SwitchClaim {
            pending_change: None,
            scheduled_switch: Some(ScheduledSwitch::new(
                PlanId::new("team").unwrap(),
                at(START_MS),
            )),
        },
    )
}

/// The dashboard's expectations for a reader whose status is `report`.
fn dashboard_of(report: StatusReport, live: bool) -> Pages {
    let mut fakes = Fakes::default().signed_in_as(Role::User).new_csrf_secret();
    fakes
        .credits
        .expect_report_status()
        .returning(move |_| Ok(report.clone()));
    fakes.plans.expect_plan_names().returning(|_| {
        Ok(BTreeMap::from([
            (PlanId::new("pro").unwrap(), "Pro Quarterly".to_owned()),
            (PlanId::new("team").unwrap(), "Team Quarterly".to_owned()),
        ]))
    });
    fakes
        .plans
        .expect_environment()
        .returning(|| AppEnvironment::Production);
    fakes.payments.expect_list_orders().returning(|_, request| {
        Ok(ListPage {
            items: Vec::new(),
            request,
            total: 0,
        })
    });
    fakes
        .payments
        .expect_subscription_access()
        .returning(|s| s.access(0));
    if live {
        fakes
            .payments
            .expect_period_end_switch_options()
            .times(2)
            .returning(|_| Ok(Vec::new()));
    }
    fakes.pages()
}

#[tokio::test]
async fn a_scheduled_switch_is_shown_with_its_date_and_the_ways_back_in_both_languages() {
    use application::use_cases::report_status::HeldSubscription;
    let subscription = switching_to_team(domain::SubscriptionStatus::Active);
    let report = StatusReport {
        subscription: Some(subscription.clone()),
        subscriptions: vec![HeldSubscription {
            access: subscription.access(0),
            subscription,
        }],
        ..empty_report()
    };
    let pages = dashboard_of(report, true);
    let en = pages.get_signed_in("/dashboard").await;
    assert_eq!(en.status, StatusCode::OK, "{}", en.body);
    assert!(
        en.body.contains("data-testid=\"switch-scheduled\""),
        "{}",
        en.body
    );
    assert!(
        en.body.contains("Switching to Team Quarterly on"),
        "{}",
        en.body
    );
    assert!(en.body.contains("in a new checkout"));
    // Pancake cannot resume: "Don't switch" only.
    assert!(!en.body.contains("data-testid=\"resume-subscription\""));
    assert!(
        en.body
            .contains("action=\"/dashboard/subscription/withdraw-switch\"")
    );
    assert!(!en.body.contains("data-testid=\"start-scheduled-plan\""));
    let zh = pages.get_signed_in("/dashboard?lang=zh-CN").await;
    assert_eq!(zh.status, StatusCode::OK, "{}", zh.body);
    assert!(zh.body.contains("更换为Team Quarterly"), "{}", zh.body);
    assert!(zh.body.contains("不更换"));
}

#[tokio::test]
async fn an_ended_subscription_with_a_scheduled_plan_offers_its_checkout_in_one_click() {
    let ended = switching_to_team(domain::SubscriptionStatus::Canceled);
    let report = StatusReport {
        subscription: Some(ended),
        ..empty_report()
    };
    let page = dashboard_of(report, false)
        .get_signed_in("/dashboard")
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Start Team Quarterly"), "{}", page.body);
    assert!(
        page.body
            .contains("Your Pro Quarterly subscription has ended.")
    );
    let form = &page.body[page.body.find("action=\"/pricing/buy\"").expect("buy form")..];
    assert!(form.contains("name=\"planId\" value=\"team\""), "{form}");
    assert!(form.contains("name=\"provider\" value=\"mor_c\""), "{form}");
    assert!(form.contains(&valid_token()));
}

#[tokio::test]
async fn a_switch_paypal_must_approve_sends_the_subscriber_to_the_approval_page() {
    use application::use_cases::change_plan::PlanChangeOutcome;
    use domain::{ChangeDirection, PlanChange, SoldTerms, SubscriptionStatus};
    let approval = "https://www.paypal.com/webapps/billing/subscriptions/update?ba_token=BA-1";
    let mut fakes = Fakes::default().signed_in_as(Role::User).new_csrf_secret();
    fakes
        .payments
        .expect_change_plan()
        .withf(|user, subscription, plan| {
            user.id.as_str() == "u_reader"
                && subscription.as_str() == "sub_ours"
                && plan.as_str() == "team"
        })
        .times(1)
        .returning(move |_, _, _| {
            let subscription = switching_to_team(SubscriptionStatus::Active);
            let terms: SoldTerms = subscription.sold_terms().unwrap();
            Ok(PlanChangeOutcome {
                change: PlanChange::new(
                    PlanId::new("team").unwrap(),
                    terms,
                    ChangeDirection::Upgrade,
                    Timestamp::from_unix_millis(START_MS),
                ),
                subscription,
                kind: domain::SwitchKind::Upgrade,
                approval_url: Some(approval.to_owned()),
            })
        });
    let token = valid_token();
    let answer = fakes
        .pages()
        .post_signed_in(
            "/dashboard/subscription/change-plan",
            &[
                ("csrf", &token),
                ("subscriptionId", "sub_ours"),
                ("planId", "team"),
            ],
        )
        .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(answer.location, approval);
}

#[tokio::test]
async fn a_malformed_order_id_is_not_found_before_the_payments_port_is_asked() {
    let mut fakes = Fakes::default().signed_in_as(Role::User).new_csrf_secret();
    fakes.payments.expect_query_payment().never();
    fakes.payments.expect_confirm_payment().never();
    let pages = fakes.pages();
    for path in ["/pay/qr/bad%20id", "/payment-success?orderId=bad%20id"] {
        let page = pages.get_signed_in(path).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
    }
}
