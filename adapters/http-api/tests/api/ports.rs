//! Handler tests against mocks of the inbound ports: each test says what a port answers and
//! checks only the HTTP mapping (status, problem code, what reaches the port). A port call a
//! test did not expect panics inside the handler, which the API turns into a 500, so "never
//! reaches the port" is checked by the status too.

use std::sync::Arc;

use application::accounts::{ApiKey, Email, Role, Scope, User};
use application::authorization::{Acting, Actor, Denied, Reach};
use application::cursor::CursorError;
use application::inbound::{
    MockAccountsService, MockAdminService, MockCreditsService, MockHostEventsService,
    MockPaymentsService, MockPlansService, Ports,
};
use application::ports::{AckVerdict, WebhookAck, WebhookError};
use application::use_cases::admin_console::{AdminListError, CursorPage};
use application::use_cases::credits::CreditsError;
use application::use_cases::handle_webhook::HandleWebhookError;
use application::use_cases::sessions::{AccountsError, Principal};
use domain::{AccountId, Credits, ProviderId, Timestamp, UserId};
use http_api::{ApiSettings, Readiness, build_api};
use poem::endpoint::BoxEndpoint;
use poem::test::TestClient;
use poem::{EndpointExt, Response};
use serde_json::{Value, json};

const NOW_MS: i64 = 1_767_225_600_000;
const ADMIN_TOKEN: &str = "session-of-an-admin";
const CUSTOMER_TOKEN: &str = "session-of-a-customer";
const KEY_TOKEN: &str = "tly_key_with_credits_consume";

/// A mock per port; `accounts` already knows the clock and the three callers above.
struct Mocks {
    payments: MockPaymentsService,
    credits: MockCreditsService,
    accounts: MockAccountsService,
    plans: MockPlansService,
    admin: MockAdminService,
    host_events: MockHostEventsService,
}

impl Mocks {
    fn new() -> Self {
        let mut accounts = MockAccountsService::new();
        accounts
            .expect_now()
            .returning(|| Timestamp::from_unix_millis(NOW_MS));
        accounts
            .expect_authenticate()
            .returning(|token| match token {
                ADMIN_TOKEN => Ok(Principal::User(user("usr_admin", Role::Admin))),
                CUSTOMER_TOKEN => Ok(Principal::User(user("usr_customer", Role::User))),
                KEY_TOKEN => Ok(Principal::Service(key(vec![Scope::CreditsConsume]))),
                _ => Err(AccountsError::Unauthenticated),
            });
        // Billing endpoints ask whom they act for: a user acts for themself; the key above
        // carries no billing scope.
        accounts
            .expect_acting_for()
            .returning(|principal, scope, _| match principal {
                Principal::User(user) => Ok(Acting::user(user)),
                Principal::Portal(portal) => Ok(Acting {
                    reach: Reach::Portal(AccountId::personal(&portal.user.id)),
                    user: portal.user,
                    actor: Actor::TheUser,
                }),
                Principal::Service(_) => Err(Denied::MissingScope(scope).into()),
            });
        // Requests about an object by its id ask whether it is within reach: a user's is.
        accounts
            .expect_within_reach()
            .returning(|acting, _| match acting.reach {
                Reach::Memberships => Ok(()),
                _ => Err(Denied::PortalBillingOnly.into()),
            });
        Self {
            payments: MockPaymentsService::new(),
            credits: MockCreditsService::new(),
            accounts,
            plans: MockPlansService::new(),
            admin: MockAdminService::new(),
            host_events: MockHostEventsService::new(),
        }
    }

    fn app(self) -> TestClient<BoxEndpoint<'static, Response>> {
        let ports = Ports {
            payments: Arc::new(self.payments),
            credits: Arc::new(self.credits),
            accounts: Arc::new(self.accounts),
            plans: Arc::new(self.plans),
            admin: Arc::new(self.admin),
            host_events: Arc::new(self.host_events),
        };
        let settings = ApiSettings {
            secure_cookies: false,
            ..ApiSettings::default()
        };
        TestClient::new(build_api(ports, Arc::new(Ready), settings).boxed())
    }
}

struct Ready;

#[async_trait::async_trait]
impl Readiness for Ready {
    async fn ready(&self) -> bool {
        true
    }
}

fn user(id: &str, role: Role) -> User {
    User {
        id: UserId::new(id).unwrap(),
        email: Email::parse(&format!("{id}@example.com")).unwrap(),
        role,
        created_at: Timestamp::from_unix_millis(NOW_MS),
    }
}

fn key(scopes: Vec<Scope>) -> ApiKey {
    ApiKey {
        id: "key_1".to_owned(),
        owner: UserId::new("usr_admin").unwrap(),
        name: "backend".to_owned(),
        prefix: "tly_key".to_owned(),
        scopes,
        account: None,
        created_at: Timestamp::from_unix_millis(NOW_MS),
        revoked_at: None,
    }
}

fn credits(whole: i64) -> Credits {
    Credits::from_whole(whole).unwrap()
}

/// Status, `Content-Type` and JSON body (`Null` when the body is not JSON).
async fn answer(response: poem::test::TestResponse) -> (u16, String, String) {
    let status = response.0.status().as_u16();
    let content_type = response
        .0
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.0.into_body().into_string().await.unwrap();
    (status, content_type, body)
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or(Value::Null)
}

async fn consume(app: &TestClient<BoxEndpoint<'static, Response>>, token: &str) -> (u16, Value) {
    let response = app
        .post("/api/credits/consume")
        .header("Authorization", format!("Bearer {token}"))
        .header("Idempotency-Key", "spend-1")
        .body_json(&json!({"userId": "usr_customer", "feature": "chat"}))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    (status, json_of(&body))
}

#[tokio::test]
async fn a_refused_spend_is_a_402_insufficient_credits_with_both_amounts() {
    let mut mocks = Mocks::new();
    mocks
        .credits
        .expect_consume_credits()
        .withf(|r| {
            r.user_id.as_str() == "usr_customer"
                && r.idempotency_key.as_str() == "spend-1"
                && r.usage.feature.as_deref() == Some("chat")
        })
        .times(1)
        .returning(|_| {
            Err(CreditsError::Insufficient {
                requested: credits(5),
                available: credits(2),
            })
        });
    let (status, body) = consume(&mocks.app(), KEY_TOKEN).await;
    assert_eq!(status, 402, "{body}");
    assert_eq!(body["code"], "insufficient_credits");
    assert_eq!(body["requestedHundredths"], 500);
    assert_eq!(body["availableHundredths"], 200);
}

#[tokio::test]
async fn a_key_reused_with_another_request_is_a_409_idempotency_conflict() {
    let mut mocks = Mocks::new();
    mocks
        .credits
        .expect_consume_credits()
        .times(1)
        .returning(|_| Err(CreditsError::IdempotencyConflict));
    let (status, body) = consume(&mocks.app(), KEY_TOKEN).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "idempotency_conflict");
}

#[tokio::test]
async fn a_spend_without_an_idempotency_key_never_reaches_the_port() {
    // No expectation on `consume_credits`: a call would panic and answer 500.
    let app = Mocks::new().app();
    let response = app
        .post("/api/credits/consume")
        .header("Authorization", format!("Bearer {KEY_TOKEN}"))
        .body_json(&json!({"userId": "usr_customer", "feature": "chat"}))
        .send()
        .await;
    let (status, content_type, body) = answer(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(content_type, "application/problem+json");
}

#[tokio::test]
async fn a_signed_in_customer_may_not_spend_for_anyone() {
    let (status, body) = consume(&Mocks::new().app(), CUSTOMER_TOKEN).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["code"], "forbidden");
}

#[tokio::test]
async fn an_unknown_token_is_a_401() {
    let (status, body) = consume(&Mocks::new().app(), "nobody").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["code"], "unauthorized");
}

/// A webhook for `provider` whose handling the port refuses with `verdict`.
async fn refused_webhook(verdict: AckVerdict) -> (u16, String, String) {
    let mut mocks = Mocks::new();
    mocks
        .payments
        .expect_handle_webhook()
        .withf(|known, request| {
            *known == Some(ProviderId::CardGateway) && request.body == b"{\"id\":\"evt_1\"}"
        })
        .times(1)
        .returning(move |_, _| {
            Err(HandleWebhookError::Rejected {
                reason: WebhookError::BadSignature,
                ack: WebhookAck {
                    verdict,
                    content_type: "application/json",
                    body: "{\"received\":false}".to_owned(),
                },
            })
        });
    let response = mocks
        .app()
        .post("/api/payment/webhook/card_gateway")
        .header("content-type", "application/json")
        .body("{\"id\":\"evt_1\"}")
        .send()
        .await;
    answer(response).await
}

#[tokio::test]
async fn an_unauthenticated_webhook_verdict_is_a_401_with_the_providers_body() {
    let (status, content_type, body) = refused_webhook(AckVerdict::Unauthenticated).await;
    assert_eq!(status, 401);
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert_eq!(body, "{\"received\":false}");
}

#[tokio::test]
async fn a_refused_webhook_verdict_is_a_400_with_the_providers_body() {
    let (status, _, body) = refused_webhook(AckVerdict::Refused).await;
    assert_eq!(status, 400);
    assert_eq!(body, "{\"received\":false}");
}

#[tokio::test]
async fn an_unknown_provider_reaches_the_port_as_none_and_is_a_404_problem() {
    let mut mocks = Mocks::new();
    mocks
        .payments
        .expect_handle_webhook()
        .withf(|known, _| known.is_none())
        .times(1)
        .returning(|_, _| Err(HandleWebhookError::UnknownProvider));
    let response = mocks
        .app()
        .post("/api/payment/webhook/no_such_provider")
        .body("{}")
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(json_of(&body)["code"], "unknown_provider");
}

#[tokio::test]
async fn an_unreachable_provider_during_a_webhook_is_a_503_so_the_provider_retries() {
    let mut mocks = Mocks::new();
    mocks
        .payments
        .expect_handle_webhook()
        .times(1)
        .returning(|_, _| {
            Err(HandleWebhookError::ProviderUnavailable(
                "timeout".to_owned(),
            ))
        });
    let response = mocks
        .app()
        .post("/api/payment/webhook/wallet_qr")
        .body("<xml/>")
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(json_of(&body)["code"], "service_unavailable");
}

#[tokio::test]
async fn admin_lists_are_403_for_a_customer_and_never_reach_the_port() {
    // No expectation on `audit_log`: a call would panic and answer 500.
    let response = Mocks::new()
        .app()
        .get("/api/admin/audit")
        .header("Authorization", format!("Bearer {CUSTOMER_TOKEN}"))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(json_of(&body)["code"], "forbidden");
}

#[tokio::test]
async fn an_admin_list_passes_the_cursor_through_and_returns_the_next_one() {
    let mut mocks = Mocks::new();
    mocks
        .admin
        .expect_audit_log()
        .withf(|page| page.cursor.as_deref() == Some("cursor-2") && page.limit == Some(5))
        .times(1)
        .returning(|_| {
            Ok(CursorPage {
                items: Vec::new(),
                next_cursor: Some("cursor-3".to_owned()),
            })
        });
    let response = mocks
        .app()
        .get("/api/admin/audit?cursor=cursor-2&limit=5")
        .header("Authorization", format!("Bearer {ADMIN_TOKEN}"))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 200, "{body}");
    let body = json_of(&body);
    assert_eq!(body["nextCursor"], "cursor-3");
    assert_eq!(body["items"], json!([]));
}

#[tokio::test]
async fn a_cursor_the_port_refuses_is_a_400_problem() {
    let mut mocks = Mocks::new();
    mocks
        .admin
        .expect_audit_log()
        .times(1)
        .returning(|_| Err(AdminListError::Page(CursorError::Invalid)));
    let response = mocks
        .app()
        .get("/api/admin/audit?cursor=forged")
        .header("Authorization", format!("Bearer {ADMIN_TOKEN}"))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(json_of(&body)["code"], "invalid_pagination");
}

#[tokio::test]
async fn webhook_endpoints_are_a_503_while_delivery_is_not_wired() {
    let mut mocks = Mocks::new();
    mocks
        .host_events
        .expect_delivery_configured()
        .return_const(false);
    let response = mocks
        .app()
        .post("/api/admin/webhook-endpoints")
        .header("Authorization", format!("Bearer {ADMIN_TOKEN}"))
        .body_json(&json!({"url": "https://example.com/hook"}))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(json_of(&body)["code"], "service_unavailable");
}

#[tokio::test]
async fn a_balance_is_read_for_the_owner_the_port_names() {
    let mut mocks = Mocks::new();
    mocks
        .credits
        .expect_balance()
        .withf(|id| id.as_str() == "usr_customer")
        .times(1)
        .returning(|_| Ok(Credits::from_hundredths(1250).unwrap()));
    let response = mocks
        .app()
        .get("/api/credits/balance")
        .header("Authorization", format!("Bearer {CUSTOMER_TOKEN}"))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 200, "{body}");
    let body = json_of(&body);
    assert_eq!(body["balanceHundredths"], 1250, "{body}");
}

#[tokio::test]
async fn an_unknown_provider_is_refused_at_the_edge_and_never_reaches_the_port() {
    // No expectation on `initiate_payment`: a call would panic and answer 500.
    let response = Mocks::new()
        .app()
        .post("/api/payment/initiate")
        .header("Authorization", format!("Bearer {CUSTOMER_TOKEN}"))
        .body_json(&json!({"planId": "credits-100", "provider": "stripe"}))
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    assert_eq!(status, 422, "{body}");
    let body = json_of(&body);
    assert_eq!(body["code"], "unknown_provider");
    assert_eq!(body["detail"], "unknown provider \"stripe\"");
}

/// The customer's Pancake subscription to `pro`, scheduled to end with a switch to `team`.
fn scheduled_subscription() -> domain::Subscription {
    use domain::{
        BillingPeriod, Money, PlanId, PlanSnapshot, PlanType, RenewalIntent, ScheduledSwitch,
        SoldTerms, Subscription, SubscriptionId, SubscriptionParts, SubscriptionStatus,
        SwitchClaim,
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
            id: SubscriptionId::new("sub_1").unwrap(),
            user_id: UserId::new("usr_customer").unwrap(),
            account: None,
            plan_id: PlanId::new("pro").unwrap(),
            provider: ProviderId::MorC,
            provider_subscription_id: "order_1".into(),
            status: SubscriptionStatus::Active,
            current_period: BillingPeriod::new(at(NOW_MS), at(NOW_MS + 1_000)).unwrap(),
            renewal: RenewalIntent::EndsAtPeriodEnd,
            last_event_at: at(NOW_MS),
            sold_terms: Some(SoldTerms::of_order(&snapshot).unwrap()),
        },
        SwitchClaim {
            pending_change: None,
            scheduled_switch: Some(ScheduledSwitch::new(
                PlanId::new("team").unwrap(),
                at(NOW_MS),
            )),
        },
    )
}

async fn change_plan(
    app: &TestClient<BoxEndpoint<'static, Response>>,
    body: &Value,
) -> (u16, Value) {
    let response = app
        .post("/api/subscriptions/sub_1/change-plan")
        .header("Authorization", format!("Bearer {CUSTOMER_TOKEN}"))
        .body_json(body)
        .send()
        .await;
    let (status, _, body) = answer(response).await;
    (status, json_of(&body))
}

#[tokio::test]
async fn a_switch_at_period_end_reaches_the_scheduling_port_and_says_when_it_starts() {
    use application::use_cases::change_plan::PlanSwitchScheduled;
    let mut mocks = Mocks::new();
    mocks
        .payments
        .expect_schedule_plan_switch()
        .withf(|user, id, plan| {
            user.id.as_str() == "usr_customer" && id.as_str() == "sub_1" && plan.as_str() == "team"
        })
        .times(1)
        .returning(|_, _, _| {
            Ok(PlanSwitchScheduled {
                subscription: scheduled_subscription(),
                plan_id: domain::PlanId::new("team").unwrap(),
                direction: domain::ChangeDirection::Upgrade,
                kind: domain::SwitchKind::Upgrade,
            })
        });
    mocks
        .payments
        .expect_subscription_access()
        .returning(|s| s.access(0));
    let app = mocks.app();
    let (status, body) = change_plan(&app, &json!({"planId": "team", "when": "period_end"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["when"], "period_end");
    assert_eq!(body["confirmed"], false);
    assert_eq!(body["change"], "upgrade");
    assert_eq!(body["subscription"]["scheduledPlanId"], "team");
    assert_eq!(body["startsAt"], body["subscription"]["currentPeriodEnd"]);
    // An unknown `when` never reaches a port.
    let (status, body) = change_plan(&app, &json!({"planId": "team", "when": "later"})).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_switch_while_another_is_in_progress_is_a_409_change_in_progress() {
    use application::use_cases::change_plan::ChangePlanError;
    let mut mocks = Mocks::new();
    mocks
        .payments
        .expect_change_plan()
        .times(1)
        .returning(|_, _, _| Err(ChangePlanError::InProgress(domain::ChangeInProgress)));
    let (status, body) = change_plan(&mocks.app(), &json!({"planId": "team"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "change_in_progress");
}

#[tokio::test]
async fn malformed_ids_are_answered_at_the_edge_as_unknown_ones_and_never_reach_a_port() {
    // No expectation is set on the payments or credits port: a call would panic into a 500.
    let app = Mocks::new().app();
    let customer = format!("Bearer {CUSTOMER_TOKEN}");
    let ask = |response: poem::test::TestResponse| async {
        let (status, _, body) = answer(response).await;
        (status, json_of(&body))
    };
    let (status, body) = ask(app
        .get("/api/payment/query/bad%20id")
        .header("Authorization", &customer)
        .send()
        .await)
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("order_not_found")),
        "{body}"
    );
    let (status, body) = ask(app
        .post("/api/subscriptions/bad%20id/resume")
        .header("Authorization", &customer)
        .send()
        .await)
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("subscription_not_found")),
        "{body}"
    );
    let (status, body) = change_plan(&app, &json!({"planId": "Not A Plan"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("plan_not_found")),
        "{body}"
    );
    let (status, body) = ask(app
        .post("/api/payment/initiate")
        .header("Authorization", &customer)
        .body_json(&json!({"planId": "Not A Plan", "provider": "card_gateway"}))
        .send()
        .await)
    .await;
    assert_eq!(
        (status, body["code"].as_str(), body["detail"].as_str()),
        (
            404,
            Some("plan_not_found"),
            Some("plan \"Not A Plan\" not found")
        ),
        "{body}"
    );
    let (status, body) = ask(app
        .post("/api/credits/reservations/bad%20id/release")
        .header("Authorization", format!("Bearer {KEY_TOKEN}"))
        .body_json(&json!({"userId": "usr_customer"}))
        .send()
        .await)
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("reservation_not_found")),
        "{body}"
    );
}

#[tokio::test]
async fn malformed_api_key_and_endpoint_ids_are_unknown_ones_and_never_reach_a_port() {
    // No expectation on any endpoint or key method: a call would panic into a 500.
    let mut mocks = Mocks::new();
    mocks
        .host_events
        .expect_delivery_configured()
        .return_const(true);
    let app = mocks.app();
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let cases = [
        (
            "delete",
            "/api/admin/api-keys/bad%20id",
            "api_key_not_found",
        ),
        (
            "delete",
            "/api/admin/webhook-endpoints/bad%20id",
            "webhook_endpoint_not_found",
        ),
        (
            "post",
            "/api/admin/webhook-endpoints/bad%20id/rotate-secret",
            "webhook_endpoint_not_found",
        ),
        (
            "get",
            "/api/admin/webhook-endpoints/bad%20id/deliveries",
            "webhook_endpoint_not_found",
        ),
        (
            "post",
            "/api/admin/webhook-endpoints/bad%20id/deliveries/d1/redeliver",
            "webhook_endpoint_not_found",
        ),
    ];
    for (method, path, code) in cases {
        let request = match method {
            "delete" => app.delete(path),
            "get" => app.get(path),
            _ => app.post(path),
        };
        let (status, _, body) = answer(request.header("Authorization", &admin).send().await).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(json_of(&body)["code"], code, "{path}");
    }
}

#[tokio::test]
async fn a_malformed_buyer_detail_is_a_422_naming_the_field_and_never_reaches_the_port() {
    // No expectation on `initiate_payment_as`: a call would panic and answer 500.
    let app = Mocks::new().app();
    for (extra, field) in [
        (
            json!({"customerEmail": "hst_1@host.invalid"}),
            "customerEmail",
        ),
        (json!({"customerEmail": "nobody"}), "customerEmail"),
        (json!({"customerName": ""}), "customerName"),
    ] {
        let mut body = json!({"planId": "credits-100", "provider": "card_gateway"});
        let fields = body.as_object_mut().unwrap();
        fields.extend(extra.as_object().unwrap().clone());
        let response = app
            .post("/api/payment/initiate")
            .header("Authorization", format!("Bearer {CUSTOMER_TOKEN}"))
            .body_json(&body)
            .send()
            .await;
        let (status, _, answer) = answer(response).await;
        assert_eq!(status, 422, "{answer}");
        let answer = json_of(&answer);
        assert_eq!(answer["code"], "validation_failed");
        assert_eq!(answer["errors"][0]["field"], field, "{answer}");
    }
}

#[tokio::test]
async fn billing_endpoints_ask_the_port_whom_they_act_for_and_answer_its_refusal() {
    // The accounts mock refuses every API key the billing scope; no payments port is reached.
    let app = Mocks::new().app();
    for path in [
        "/api/subscriptions?userId=usr_customer",
        "/api/orders?userId=usr_customer",
    ] {
        let response = app
            .get(path)
            .header("Authorization", format!("Bearer {KEY_TOKEN}"))
            .send()
            .await;
        let (status, _, body) = answer(response).await;
        assert_eq!(status, 403, "{path}: {body}");
        let body = json_of(&body);
        assert_eq!(body["code"], "forbidden");
        assert_eq!(
            body["detail"],
            "this endpoint needs an API key with scope billing:read"
        );
    }
}
