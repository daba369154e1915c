//! A service over in-memory fakes with a small catalog, and builders for provider events.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::{BillingPeriod, Credits, Money, OrderId, ProviderId, Timestamp};

use crate::accounts::{Role, User};
use crate::ports::{
    Gateways, OrderLocator, PaymentEvent, PaymentGateway, VerifiedWebhook, WebhookRequest,
};
use crate::service::{Service, ServiceConfig};
use crate::testing::{
    FAKE_SIGNATURE_HEADER, FakeGateway, FixedClock, InMemoryStore, PlainHasher, SequentialIds,
};

pub type TestService = Service<InMemoryStore, FixedClock, SequentialIds, PlainHasher>;

pub const START_MS: i64 = 1_800_000_000_000;

pub use crate::testing::fixtures::{catalog, config, plan};

pub struct Harness {
    pub service: TestService,
    pub gateways: BTreeMap<ProviderId, Arc<FakeGateway>>,
}

impl Harness {
    pub fn new() -> Self {
        Self::with(config(), |_| None)
    }

    /// A harness with gateways for `providers` only (the others are off, as in production
    /// without their settings).
    pub fn only(config: ServiceConfig, providers: &[ProviderId]) -> Self {
        let fakes: BTreeMap<ProviderId, Arc<FakeGateway>> = providers
            .iter()
            .map(|&p| (p, Arc::new(FakeGateway::new(p))))
            .collect();
        let gateways = fakes.values().fold(Gateways::new(), |gateways, fake| {
            gateways.with(fake.clone() as Arc<dyn PaymentGateway>)
        });
        Self::wired(config, gateways, fakes)
    }

    /// A harness where `replace` may swap in another gateway for a provider.
    pub fn with(
        config: ServiceConfig,
        replace: impl Fn(ProviderId) -> Option<Arc<dyn PaymentGateway>>,
    ) -> Self {
        let mut gateways = Gateways::new();
        let mut fakes = BTreeMap::new();
        for p in ProviderId::ALL {
            match replace(p) {
                Some(g) => gateways = gateways.with(g),
                None => {
                    let fake = Arc::new(FakeGateway::new(p));
                    fakes.insert(p, fake.clone());
                    gateways = gateways.with(fake);
                }
            }
        }
        Self::wired(config, gateways, fakes)
    }

    fn wired(
        config: ServiceConfig,
        gateways: Gateways,
        fakes: BTreeMap<ProviderId, Arc<FakeGateway>>,
    ) -> Self {
        let service = Service::new(
            InMemoryStore::new(),
            FixedClock::at(START_MS),
            SequentialIds::default(),
            PlainHasher,
            gateways,
            config,
        );
        Self {
            service,
            gateways: fakes,
        }
    }

    pub fn fake(&self, p: ProviderId) -> &FakeGateway {
        &self.gateways[&p]
    }

    pub async fn user(&self, email: &str) -> User {
        self.service
            .register(
                email,
                "password123".into(),
                Role::User,
                &crate::testing::client_of(email),
            )
            .await
            .unwrap()
            .user
    }

    /// The administrator who makes the console's changes (registered on first use).
    pub async fn admin(&self) -> User {
        let email = "admin@example.com";
        match self
            .service
            .register(
                email,
                "password123".into(),
                Role::Admin,
                &crate::testing::client_of(email),
            )
            .await
        {
            Ok(signed_in) => signed_in.user,
            Err(_) => {
                self.service
                    .sign_in(email, "password123".into())
                    .await
                    .unwrap()
                    .user
            }
        }
    }

    /// Deliver a webhook for `provider` carrying `events` under `event_id`.
    pub async fn deliver(
        &self,
        provider: ProviderId,
        event_id: &str,
        events: Vec<PaymentEvent>,
    ) -> Result<
        crate::use_cases::handle_webhook::WebhookHandled,
        crate::use_cases::handle_webhook::HandleWebhookError,
    > {
        let signature = format!("sig-{event_id}");
        self.fake(provider).prepare_webhook(
            &signature,
            VerifiedWebhook {
                event_id: event_id.into(),
                event_type: "test.event".into(),
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
    }
}

pub fn paid(order: &OrderId, amount: Money) -> PaymentEvent {
    PaymentEvent::PaymentSucceeded {
        order: by_id(order),
        amount,
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    }
}

pub fn by_id(order: &OrderId) -> OrderLocator {
    OrderLocator {
        order_id: Some(order.clone()),
        provider_reference: None,
    }
}

pub fn usd(minor: i64) -> Money {
    Money::from_minor(minor, domain::Currency::Usd).unwrap()
}

pub fn period(start_days: i64, end_days: i64) -> BillingPeriod {
    let t = |d: i64| Timestamp::from_unix_millis(START_MS).plus_days(d);
    BillingPeriod::new(t(start_days), t(end_days)).unwrap()
}

pub fn credits(whole: i64) -> Credits {
    Credits::from_whole(whole).unwrap()
}

/// A subscription id as the edge would have parsed it.
pub fn sub_id(raw: &str) -> domain::SubscriptionId {
    domain::SubscriptionId::new(raw).expect("a well-formed subscription id")
}

/// A plan id as the edge would have parsed it.
pub fn plan_id(raw: &str) -> domain::PlanId {
    domain::PlanId::new(raw).expect("a well-formed plan id")
}
