//! A service over in-memory fakes with a small catalog, the pages around it, and a tiny
//! "browser" that keeps cookies and reads CSRF tokens out of pages.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use application::accounts::Role;
use application::inbound::Ports;
use application::ports::{Gateways, PaymentEvent, VerifiedWebhook, WebhookRequest};
use application::service::{HostApp, Service, ServiceConfig};
use application::testing::{
    FAKE_SIGNATURE_HEADER, FakeGateway, FixedClock, InMemoryStore, PlainHasher, SequentialIds,
};
use application::use_cases::plans::PricingMode;
use domain::consumption::ConsumptionSettings;
use domain::{
    AppEnvironment, ConsumptionMode, ConsumptionRules, Credits, Multiplier, Plan, PlanDraft,
    PlanText, ProviderId, ProviderRefs, UnknownModelPolicy,
};
use poem::endpoint::BoxEndpoint;
use poem::http::StatusCode;
use poem::test::TestClient;
use poem::{EndpointExt, Response};

use crate::PageSettings;

pub(crate) type TestService = Service<InMemoryStore, FixedClock, SequentialIds, PlainHasher>;

pub(crate) const START_MS: i64 = 1_800_000_000_000;
pub(crate) const PASSWORD: &str = "correct horse battery";

/// A plan for tests: `kind` is one_time, recurring or credits.
pub(crate) fn plan(
    id: &str,
    provider: &str,
    kind: &str,
    amount: &str,
    currency: &str,
) -> PlanDraft {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: format!("{id} name"),
            description: format!("{id} description"),
            duration: "month".into(),
            features: vec![
                "**Unlimited** projects".into(),
                "<script>alert(1)</script>".into(),
            ],
        },
    );
    PlanDraft {
        id: id.into(),
        provider: Some(provider.into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months: match kind {
            "one_time" => Some(999_999),
            "recurring" => Some(1),
            _ => None,
        },
        duration_type: Some(kind.into()),
        credits: (kind != "one_time").then(|| "100".parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, "price_x"),
        i18n,
        ..PlanDraft::default()
    }
}

/// The static catalog: a subscription with a strikethrough price and a zh-CN text, a lifetime
/// plan, a credits pack, a QR credits pack, and a hidden plan.
pub(crate) fn catalog() -> Vec<Plan> {
    let mut pro = plan("pro-monthly", "card_gateway", "recurring", "9.99", "USD");
    pro.original_amount = Some("19.99".parse().unwrap());
    pro.recommended = true;
    pro.i18n.insert(
        "zh-CN".into(),
        PlanText {
            name: "专业版月付".into(),
            description: "每月付款".into(),
            duration: "月".into(),
            features: vec!["全部功能".into()],
        },
    );
    let mut hidden = plan("secret-plan", "card_gateway", "one_time", "1", "USD");
    hidden.hidden = true;
    [
        pro,
        plan("lifetime", "card_gateway", "one_time", "99", "USD"),
        plan("credits-100", "card_gateway", "credits", "10", "USD"),
        plan("qr-credits", "wallet_qr", "credits", "68", "CNY"),
        hidden,
    ]
    .iter()
    .map(|d| Plan::from_draft(d).unwrap())
    .collect()
}

fn rules() -> ConsumptionRules {
    ConsumptionRules::new(ConsumptionSettings {
        mode: ConsumptionMode::Dynamic,
        fixed_costs: BTreeMap::new(),
        cost_per_kilo_token: Credits::from_whole(1).unwrap(),
        model_multipliers: BTreeMap::from([(
            domain::consumption::ModelName::new("gpt-test").unwrap(),
            Multiplier::ONE,
        )]),
        default_multiplier: Multiplier::ONE,
        unknown_model: UnknownModelPolicy::Refuse,
    })
    .unwrap()
}

pub(crate) fn config(mode: PricingMode) -> ServiceConfig {
    ServiceConfig {
        pricing_mode: mode,
        environment: AppEnvironment::Production,
        catalog: catalog(),
        consumption: rules(),
        callbacks: application::testing::fixtures::callback_urls("http://tally.test"),
        order_lifetime_ms: 3_600_000,
        session_lifetime_ms: 86_400_000,
        reservation_lifetime_ms: 600_000,
        webhook_conflict_retries: 5,
        renewal_clock_tolerance_ms: application::service::DEFAULT_RENEWAL_CLOCK_TOLERANCE_MS,
        allow_several_subscriptions: false,
        past_due_grace_ms: application::service::DEFAULT_PAST_DUE_GRACE_MS,
    }
}

/// The service, its fake gateways and the pages.
pub(crate) struct App {
    pub(crate) service: Arc<TestService>,
    pub(crate) gateways: BTreeMap<ProviderId, Arc<FakeGateway>>,
    pub(crate) client: TestClient<BoxEndpoint<'static, Response>>,
}

impl App {
    pub(crate) fn new(mode: PricingMode) -> Self {
        Self::with_settings(
            mode,
            PageSettings {
                secure_cookies: true,
                sandbox_notice: true,
                trust_forwarded_for: false,
                public_base_url: None,
            },
        )
    }

    pub(crate) fn with_settings(mode: PricingMode, settings: PageSettings) -> Self {
        Self::with_config(config(mode), settings)
    }

    pub(crate) fn with_config(config: ServiceConfig, settings: PageSettings) -> Self {
        Self::with_host_app(config, settings, HostApp::default())
    }

    /// Pages over a service whose host application is `host_app` (its return origins).
    pub(crate) fn with_host_app(
        config: ServiceConfig,
        settings: PageSettings,
        host_app: HostApp,
    ) -> Self {
        let mut gateways = Gateways::new();
        let mut fakes = BTreeMap::new();
        for provider in ProviderId::ALL {
            let fake = Arc::new(FakeGateway::new(provider));
            fakes.insert(provider, fake.clone());
            gateways = gateways.with(fake);
        }
        let service = Arc::new(
            Service::new(
                InMemoryStore::new(),
                FixedClock::at(START_MS),
                SequentialIds::default(),
                PlainHasher,
                gateways,
                config,
            )
            .with_host_app(host_app),
        );
        let ports = Ports::new(service.clone());
        let client = TestClient::new(crate::routes(ports, settings).boxed());
        Self {
            service,
            gateways: fakes,
            client,
        }
    }

    /// A browser with no cookies.
    pub(crate) fn browser(&self) -> Browser<'_> {
        Browser {
            app: self,
            cookies: Mutex::new(BTreeMap::new()),
        }
    }

    /// A browser signed in as a new user (an admin when `admin`).
    pub(crate) async fn signed_in(&self, email: &str, admin: bool) -> Browser<'_> {
        let role = if admin { Role::Admin } else { Role::User };
        self.service
            .register(
                email,
                PASSWORD.into(),
                role,
                &application::testing::client_of(email),
            )
            .await
            .unwrap();
        let browser = self.browser();
        let page = browser.get("/signin").await;
        let response = browser
            .post(
                "/signin",
                &[
                    ("csrf", &page.csrf()),
                    ("email", email),
                    ("password", PASSWORD),
                ],
            )
            .await;
        assert_eq!(response.status, StatusCode::SEE_OTHER, "{}", response.body);
        browser
    }

    /// Deliver a verified provider event for `provider`.
    pub(crate) async fn deliver(
        &self,
        provider: ProviderId,
        event_id: &str,
        events: Vec<PaymentEvent>,
    ) {
        let signature = format!("sig-{event_id}");
        self.gateways[&provider].prepare_webhook(
            &signature,
            VerifiedWebhook {
                event_id: event_id.into(),
                event_type: "test".into(),
                events,
                foreign: None,
            },
        );
        let mut headers = BTreeMap::new();
        headers.insert(FAKE_SIGNATURE_HEADER.to_owned(), signature);
        self.service
            .handle_webhook(
                Some(provider),
                WebhookRequest {
                    headers,
                    body: b"{}".to_vec(),
                },
            )
            .await
            .unwrap();
    }
}

/// What a request returned.
pub(crate) struct Page {
    pub(crate) status: StatusCode,
    pub(crate) headers: poem::http::HeaderMap,
    pub(crate) body: String,
}

impl Page {
    /// The first CSRF token in the page.
    pub(crate) fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let start = self.body.find(marker).expect("a csrf field") + marker.len();
        self.body[start..start + 64].to_owned()
    }

    pub(crate) fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub(crate) fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect()
    }
}

/// Requests with a cookie jar.
pub(crate) struct Browser<'a> {
    app: &'a App,
    cookies: Mutex<BTreeMap<String, String>>,
}

impl Browser<'_> {
    fn cookie_header(&self) -> String {
        let jar = self.cookies.lock().unwrap();
        jar.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn keep(&self, response: poem::test::TestResponse) -> Page {
        let status = response.0.status();
        let headers = response.0.headers().clone();
        let body = response.0.into_body().into_string().await.unwrap();
        let page = Page {
            status,
            headers,
            body,
        };
        let mut jar = self.cookies.lock().unwrap();
        for cookie in page.set_cookies() {
            let pair = cookie.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() || cookie.contains("Max-Age=0") {
                    jar.remove(name);
                } else {
                    jar.insert(name.to_owned(), value.to_owned());
                }
            }
        }
        page
    }

    pub(crate) async fn get(&self, path: &str) -> Page {
        self.get_with(path, &[]).await
    }

    pub(crate) async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Page {
        let mut request = self
            .app
            .client
            .get(path)
            .header("cookie", self.cookie_header());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.keep(request.send().await).await
    }

    pub(crate) async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        let response = self
            .app
            .client
            .post(path)
            .header("cookie", self.cookie_header())
            .form(&form)
            .send()
            .await;
        self.keep(response).await
    }

    /// GET `page`, then post `form` with that page's CSRF token to `action`.
    pub(crate) async fn submit(&self, page: &str, action: &str, form: &[(&str, &str)]) -> Page {
        let token = self.get(page).await.csrf();
        let mut fields = vec![("csrf", token.as_str())];
        fields.extend_from_slice(form);
        self.post(action, &fields).await
    }

    pub(crate) fn cookie(&self, name: &str) -> Option<String> {
        self.cookies.lock().unwrap().get(name).cloned()
    }
}
