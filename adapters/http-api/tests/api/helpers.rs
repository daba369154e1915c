//! `spawn_app()`: the whole API over the in-memory fakes, and helpers that speak to it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use application::inbound::Ports;
use application::ports::{Gateways, OrderLocator, PaymentEvent, VerifiedWebhook};
use application::service::{Service, ServiceConfig};
use application::sign_up::{SignUpPolicy, SignUpRate};
use application::testing::{
    FAKE_SIGNATURE_HEADER, FakeGateway, FixedClock, InMemoryStore, PlainHasher, SequentialIds,
};
use application::use_cases::plans::PricingMode;
use domain::consumption::ConsumptionSettings;
use domain::{
    AppEnvironment, BillingPeriod, ConsumptionMode, ConsumptionRules, Credits, Currency,
    FeatureName, ModelName, Money, Multiplier, OrderId, Plan, PlanDraft, PlanText, ProviderId,
    ProviderRefs, Timestamp, UnknownModelPolicy,
};
use http_api::{ApiSettings, RateLimit, Readiness, build_api};
use poem::endpoint::BoxEndpoint;
use poem::http::{HeaderMap, StatusCode};
use poem::test::{TestClient, TestResponse};
use poem::{EndpointExt, Response};
use serde_json::{Value, json};

pub type TestService = Service<InMemoryStore, FixedClock, SequentialIds, PlainHasher>;
pub type Client = TestClient<BoxEndpoint<'static, Response>>;

/// 2026-01-01T00:00:00Z.
pub const START_MS: i64 = 1_767_225_600_000;

/// A readiness probe the test flips.
pub struct Flag(pub AtomicBool);

#[async_trait::async_trait]
impl Readiness for Flag {
    async fn ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// One app: the client, the service behind it, its gateways and readiness flag.
pub struct TestApp {
    pub client: Client,
    pub service: Arc<TestService>,
    pub gateways: BTreeMap<ProviderId, Arc<FakeGateway>>,
    pub ready: Arc<Flag>,
    admins: AtomicU64,
}

/// A status, headers and JSON (or text as a JSON string) body.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    pub async fn of(response: TestResponse) -> Self {
        let response = response.0;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().into_vec().await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Self {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Assert the status and, for errors, the problem shape and code.
    #[track_caller]
    pub fn expect(&self, status: u16, code: Option<&str>) -> &Self {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.body);
        assert!(
            self.header("x-request-id").is_some(),
            "every response has a request id"
        );
        if let Some(code) = code {
            assert_eq!(
                self.header("content-type"),
                Some("application/problem+json"),
                "{}",
                self.body
            );
            assert_eq!(self.body["code"], code, "{}", self.body);
            assert_eq!(self.body["status"], status);
            for member in ["type", "title", "detail"] {
                assert!(self.body[member].is_string(), "{member} in {}", self.body);
            }
        }
        self
    }
}

fn text(name: &str) -> BTreeMap<String, PlanText> {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: name.to_owned(),
            description: format!("{name} plan"),
            duration: "month".to_owned(),
            features: vec!["everything".to_owned()],
        },
    );
    i18n.insert(
        "zh-CN".to_owned(),
        PlanText {
            name: format!("{name}（中文）"),
            ..PlanText::default()
        },
    );
    i18n
}

fn plan(id: &str, provider: &str, kind: &str, amount: &str, currency: &str) -> Plan {
    let draft = PlanDraft {
        id: id.to_owned(),
        provider: Some(provider.to_owned()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.to_owned()),
        months: match kind {
            "credits" => None,
            "one_time" => Some(999_999),
            _ => Some(1),
        },
        duration_type: Some(kind.to_owned()),
        credits: (kind == "credits").then(|| "100".parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, "price_1"),
        hidden: id.starts_with("hidden"),
        i18n: text(id),
        ..PlanDraft::default()
    };
    Plan::from_draft(&draft).unwrap()
}

/// `plan` declaring `entitlements` (feature key, `true` as -1 or a limit).
fn entitled(plan: Plan, entitlements: &[(&str, i64)]) -> Plan {
    let entitlements = entitlements
        .iter()
        .map(|(key, value)| {
            let value = match *value {
                -1 => domain::entitlements::EntitlementDraft::Flag(true),
                n => domain::entitlements::EntitlementDraft::Integer(n),
            };
            ((*key).to_owned(), value)
        })
        .collect();
    Plan::from_draft(&PlanDraft {
        entitlements,
        ..plan.to_draft()
    })
    .unwrap()
}

/// `plan` in offer `group` (issue 19).
fn in_group(plan: Plan, group: &str) -> Plan {
    Plan::from_draft(&PlanDraft {
        group: Some(group.to_owned()),
        ..plan.to_draft()
    })
    .unwrap()
}

/// The static catalog of the tests.
pub fn catalog() -> Vec<Plan> {
    vec![
        plan("credits-100", "card_gateway", "credits", "9.99", "USD"),
        in_group(
            entitled(
                plan("pro-monthly", "card_gateway", "recurring", "19.00", "USD"),
                &[("seats", 5), ("export", -1)],
            ),
            "pro",
        ),
        entitled(
            plan("lifetime", "card_gateway", "one_time", "99.00", "USD"),
            &[("seats", 3), ("sso", -1)],
        ),
        plan("qr-credits", "wallet_qr", "credits", "10.00", "CNY"),
        plan("web-one-time", "wallet_web", "one_time", "30.00", "CNY"),
        plan("hidden-deal", "card_gateway", "one_time", "1.00", "USD"),
    ]
}

fn consumption() -> ConsumptionRules {
    let mut fixed_costs = BTreeMap::new();
    fixed_costs.insert(
        FeatureName::new("chat").unwrap(),
        Credits::from_whole(1).unwrap(),
    );
    fixed_costs.insert(
        FeatureName::new("image").unwrap(),
        Credits::from_whole(5).unwrap(),
    );
    let mut model_multipliers = BTreeMap::new();
    model_multipliers.insert(
        ModelName::new("big-model").unwrap(),
        Multiplier::from_ten_thousandths(20_000).unwrap(),
    );
    ConsumptionRules::new(ConsumptionSettings {
        mode: ConsumptionMode::Dynamic,
        fixed_costs,
        cost_per_kilo_token: Credits::from_whole(2).unwrap(),
        model_multipliers,
        default_multiplier: Multiplier::ONE,
        unknown_model: UnknownModelPolicy::Refuse,
    })
    .unwrap()
    .with_price_book(price_book())
}

/// `priced-model`, from the epoch: 10 credits per million input tokens, 40 output, 1 cache
/// read (the rest as input); the provider's cost 5 and 20 per million input and output tokens.
fn price_book() -> domain::pricing::PriceBook {
    use domain::pricing::{EntryPrices, PerKind, PriceBook, PriceEntry};
    let entry = PriceEntry::new(
        ModelName::new("priced-model").unwrap(),
        domain::Timestamp::from_unix_millis(0),
        EntryPrices::Given {
            credits: PerKind::new(1_000, [Some(4_000), Some(100), None, None]),
            cost: Some(PerKind::new(
                5_000_000,
                [Some(20_000_000), None, None, None],
            )),
        },
        None,
    )
    .unwrap();
    PriceBook::new([entry]).unwrap()
}

/// Settings of the tests: plain cookies, generous limits.
pub fn settings() -> ApiSettings {
    let generous = RateLimit::per_minute(1000.try_into().unwrap(), 1000.try_into().unwrap());
    ApiSettings {
        secure_cookies: false,
        trust_forwarded_for: true,
        sign_in_limit: generous,
        initiate_limit: generous,
        ..ApiSettings::default()
    }
}

/// A sign-up policy no test reaches by accident: 1,000 sign-ups at once per address and domain.
pub fn generous_sign_ups() -> SignUpPolicy {
    let generous = SignUpRate {
        per_hour: 1000.try_into().unwrap(),
        burst: 1000.try_into().unwrap(),
    };
    SignUpPolicy {
        per_address: generous,
        per_domain: generous,
        ..SignUpPolicy::default()
    }
}

/// The service of the tests, with a fake gateway per provider.
pub fn service() -> (Arc<TestService>, BTreeMap<ProviderId, Arc<FakeGateway>>) {
    service_with(generous_sign_ups())
}

/// The service of the tests under the sign-up policy `sign_ups`.
pub fn service_with(
    sign_ups: SignUpPolicy,
) -> (Arc<TestService>, BTreeMap<ProviderId, Arc<FakeGateway>>) {
    let mut gateways = Gateways::new();
    let mut fakes = BTreeMap::new();
    for provider in ProviderId::ALL {
        let fake = Arc::new(FakeGateway::new(provider));
        gateways = gateways.with(fake.clone());
        fakes.insert(provider, fake);
    }
    let config = ServiceConfig {
        pricing_mode: PricingMode::Static,
        environment: AppEnvironment::Production,
        catalog: catalog(),
        consumption: consumption(),
        callbacks: application::callbacks::CallbackUrls::new(
            "https://tally.test/payment-success?orderId=".to_owned(),
            "https://tally.test/payment-cancel?orderId=".to_owned(),
            http_api::webhook_url_prefix("https://tally.test"),
        ),
        order_lifetime_ms: 30 * 60 * 1000,
        session_lifetime_ms: 24 * 3600 * 1000,
        reservation_lifetime_ms: 10 * 60 * 1000,
        webhook_conflict_retries: 3,
        renewal_clock_tolerance_ms: application::service::DEFAULT_RENEWAL_CLOCK_TOLERANCE_MS,
        allow_several_subscriptions: false,
        past_due_grace_ms: application::service::DEFAULT_PAST_DUE_GRACE_MS,
    };
    let service = Service::new(
        InMemoryStore::new(),
        FixedClock::at(START_MS),
        SequentialIds::default(),
        PlainHasher,
        gateways,
        config,
    )
    .with_metrics(Arc::new(http_api::PrometheusMetrics))
    .with_sign_up_policy(sign_ups);
    (Arc::new(service), fakes)
}

/// The app with the test settings.
pub fn spawn_app() -> TestApp {
    spawn_app_with(settings())
}

/// The app with `settings`.
pub fn spawn_app_with(settings: ApiSettings) -> TestApp {
    spawn_app_of(settings, service())
}

/// The app with `settings` over `service` and its fake gateways.
pub fn spawn_app_of(
    settings: ApiSettings,
    (service, gateways): (Arc<TestService>, BTreeMap<ProviderId, Arc<FakeGateway>>),
) -> TestApp {
    let ready = Arc::new(Flag(AtomicBool::new(true)));
    let endpoint = build_api(Ports::new(service.clone()), ready.clone(), settings).boxed();
    TestApp {
        client: TestClient::new(endpoint),
        service,
        gateways,
        ready,
        admins: AtomicU64::new(0),
    }
}

impl TestApp {
    pub fn gateway(&self, provider: ProviderId) -> &FakeGateway {
        &self.gateways[&provider]
    }

    /// Register `email` and return `(user id, session token)`.
    pub async fn register(&self, email: &str) -> (String, String) {
        let answer = Answer::of(
            self.client
                .post("/api/auth/register")
                .body_json(&json!({"email": email, "password": "correct horse"}))
                .send()
                .await,
        )
        .await;
        answer.expect(201, None);
        (
            answer.body["user"]["id"].as_str().unwrap().to_owned(),
            answer.body["token"].as_str().unwrap().to_owned(),
        )
    }

    /// A new signed-in administrator's token.
    pub async fn admin(&self) -> String {
        let n = self.admins.fetch_add(1, Ordering::SeqCst);
        let email = format!("admin{n}@example.com");
        let (_, token) = self.register(&email).await;
        self.service.promote_to_admin(&email).await.unwrap();
        token
    }

    /// A service API key with `scopes`.
    pub async fn api_key(&self, scopes: &[&str]) -> String {
        let admin = self.admin().await;
        let answer = Answer::of(
            self.client
                .post("/api/admin/api-keys")
                .header("authorization", format!("Bearer {admin}"))
                .body_json(&json!({"name": "worker", "scopes": scopes}))
                .send()
                .await,
        )
        .await;
        answer.expect(201, None);
        answer.body["secret"].as_str().unwrap().to_owned()
    }

    /// `POST /api/payment/initiate` as `token`.
    pub async fn initiate(
        &self,
        token: &str,
        plan: &str,
        provider: &str,
        key: Option<&str>,
    ) -> Answer {
        let mut request = self
            .client
            .post("/api/payment/initiate")
            .header("authorization", format!("Bearer {token}"))
            .body_json(&json!({"planId": plan, "provider": provider}));
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        Answer::of(request.send().await).await
    }

    /// Deliver a verified webhook of `provider` carrying `events`.
    pub async fn deliver(
        &self,
        provider: ProviderId,
        event_id: &str,
        events: Vec<PaymentEvent>,
    ) -> Answer {
        let signature = format!("sig-{event_id}");
        self.gateway(provider).prepare_webhook(
            &signature,
            VerifiedWebhook {
                event_id: event_id.to_owned(),
                event_type: "payment.succeeded".to_owned(),
                events,
                foreign: None,
            },
        );
        Answer::of(
            self.client
                .post(format!("/api/payment/webhook/{provider}"))
                .header(FAKE_SIGNATURE_HEADER, signature)
                .content_type("application/json")
                .body("{\"id\":\"evt\"}")
                .send()
                .await,
        )
        .await
    }

    /// Buy the `credits-100` plan as `token` and have the provider confirm it: 100 credits.
    pub async fn buy_credits(&self, token: &str) -> String {
        let order = self
            .initiate(token, "credits-100", "card_gateway", None)
            .await;
        order.expect(201, None);
        let order_id = order.body["orderId"].as_str().unwrap().to_owned();
        let event = paid(&order_id, 999, Currency::Usd);
        self.deliver(
            ProviderId::CardGateway,
            &format!("evt-{order_id}"),
            vec![event],
        )
        .await
        .expect(200, None);
        order_id
    }
}

/// A payment of `amount_minor` for `order_id`.
pub fn paid(order_id: &str, amount_minor: i64, currency: Currency) -> PaymentEvent {
    PaymentEvent::PaymentSucceeded {
        order: OrderLocator {
            order_id: Some(OrderId::new(order_id).unwrap()),
            provider_reference: None,
        },
        amount: Money::from_minor(amount_minor, currency).unwrap(),
        occurred_at: Timestamp::from_unix_millis(START_MS + 1000),
    }
}

/// A subscription's activation for `order_id`.
pub fn activated(order_id: &str) -> PaymentEvent {
    PaymentEvent::SubscriptionActivated {
        order: OrderLocator {
            order_id: Some(OrderId::new(order_id).unwrap()),
            provider_reference: None,
        },
        provider_subscription_id: "sub_provider_1".to_owned(),
        period: BillingPeriod::new(
            Timestamp::from_unix_millis(START_MS),
            Timestamp::from_unix_millis(START_MS + 30 * 86_400_000),
        )
        .unwrap(),
        amount: None,
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 1000),
    }
}

/// `Authorization: Bearer …`.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}
