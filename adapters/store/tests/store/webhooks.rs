//! Webhook endpoints and deliveries (issue 17): fan-out and claims shared by two instances
//! deliver each event once per endpoint; a failing endpoint is retried, abandoned and disabled
//! as the domain decides; leases come back; redelivery schedules again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use application::accounts::Role;
use application::ports::{
    Clock, EndpointChange, Gateways, HostEventLog, MAX_ENDPOINTS, OutgoingWebhook,
    RedeliveryTarget, SendOutcome, WebhookEndpoint, WebhookSecret, WebhookSender, WebhookStore,
};
use application::service::Service;
use application::testing::fixtures::config;
use application::testing::{FixedClock, PlainHasher, SequentialIds};
use application::use_cases::webhook_endpoints::{DeliverySettings, WebhookEndpointError, Webhooks};
use async_trait::async_trait;
use domain::delivery::{DeliveryStatus, EndpointHealth, RetrySchedule, TargetRefusal};
use sea_orm::ConnectionTrait;
use store::SeaOrmStore;

use crate::support::TestStore;

const START_MS: i64 = 1_800_000_000_000;

/// A sender that records every attempt and answers `status`.
struct RecordingSender {
    status: Mutex<u16>,
    sent: Mutex<Vec<(String, String)>>,
}

impl RecordingSender {
    fn answering(status: u16) -> Arc<Self> {
        Arc::new(Self {
            status: Mutex::new(status),
            sent: Mutex::new(Vec::new()),
        })
    }

    fn sent(&self) -> Vec<(String, String)> {
        self.sent.lock().unwrap().clone()
    }
}

#[async_trait]
impl WebhookSender for RecordingSender {
    fn new_secret(&self) -> WebhookSecret {
        WebhookSecret::new("whsec_c2VjcmV0".to_owned())
    }

    async fn check_target(&self, _url: &str) -> Result<(), TargetRefusal> {
        Ok(())
    }

    async fn send(&self, webhook: &OutgoingWebhook) -> SendOutcome {
        self.sent
            .lock()
            .unwrap()
            .push((webhook.url.clone(), webhook.message_id.clone()));
        SendOutcome::Answered {
            status: *self.status.lock().unwrap(),
            latency_ms: 3,
        }
    }
}

fn webhooks(
    store: &SeaOrmStore,
    sender: Arc<RecordingSender>,
    clock: Arc<FixedClock>,
    schedule: RetrySchedule,
) -> Webhooks {
    Webhooks::new(
        Arc::new(store.clone()) as Arc<dyn WebhookStore>,
        Arc::new(store.clone()) as Arc<dyn HostEventLog>,
        sender,
        clock,
        Arc::new(SequentialIds::default()),
        DeliverySettings {
            schedule,
            health: EndpointHealth::default(),
            lease_ms: 60_000,
            batch: 8,
        },
    )
}

/// Write `count` events straight into the outbox, as the store's transactions do.
async fn insert_events(store: &SeaOrmStore, from: usize, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in from..from + count {
        let id = format!("evt_{n}");
        let payload = format!(r#"{{"id":"{id}","type":"order.paid","timestamp":"t","data":{{}}}}"#);
        store
            .connection()
            .execute_unprepared(&format!(
                "INSERT INTO events (event_id, event_type, payload, occurred_at) \
                 VALUES ('{id}', 'order.paid', '{payload}', {START_MS})"
            ))
            .await
            .expect("insert event");
        ids.push(id);
    }
    ids
}

/// Wait until the outbox shows at least `count` events: on PostgreSQL an event stays hidden
/// while any older transaction of the cluster (another test's) is still running.
async fn wait_visible(store: &SeaOrmStore, count: usize) {
    for _ in 0..500 {
        if store
            .events_after(None, 1_000, &[])
            .await
            .unwrap()
            .events
            .len()
            >= count
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{count} events never became visible");
}

/// Dispatch and deliver until nothing is due (bounded).
async fn drain(webhooks: &Webhooks) {
    for _ in 0..200 {
        webhooks.dispatch(25).await.expect("dispatch");
        let claimed = webhooks.claim_deliveries(8).await.expect("claim");
        if claimed.is_empty() {
            return;
        }
        for delivery in &claimed {
            webhooks.attempt(delivery).await.expect("attempt");
        }
    }
    panic!("deliveries never drained");
}

/// Two instances share the work; every event reaches every endpoint exactly once.
async fn two_instances_deliver_each_event_once_per_endpoint(store: &TestStore) {
    let clock = Arc::new(FixedClock::at(START_MS));
    let sender = RecordingSender::answering(200);
    let other_store = store.reconnect(store::GroupCommit::off()).await;
    let a = webhooks(
        store,
        sender.clone(),
        clock.clone(),
        RetrySchedule::standard(),
    );
    let b = webhooks(
        &other_store,
        sender.clone(),
        clock,
        RetrySchedule::standard(),
    );
    for (n, url) in ["https://one.example/hook", "https://two.example/hook"]
        .into_iter()
        .enumerate()
    {
        register(store, n, url).await;
    }
    let events = insert_events(store, 0, 60).await;
    wait_visible(store, 60).await;
    let (left, right) = tokio::join!(drain(&a), drain(&b));
    let ((), ()) = (left, right);
    drain(&a).await;
    let mut counts: BTreeMap<(String, String), u32> = BTreeMap::new();
    for sent in sender.sent() {
        *counts.entry(sent).or_default() += 1;
    }
    assert_eq!(counts.len(), 120, "every event to both endpoints");
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    for event in &events {
        assert!(counts.contains_key(&("https://one.example/hook".to_owned(), event.clone())));
    }
    other_store.close().await.expect("close");
}

/// Failures follow the schedule, keep the webhook id, and an abandoned delivery after a whole
/// failing schedule disables the endpoint; redelivery schedules again.
async fn a_failing_endpoint_is_retried_abandoned_and_disabled(store: &TestStore) {
    let clock = Arc::new(FixedClock::at(START_MS));
    let sender = RecordingSender::answering(500);
    let schedule = RetrySchedule::new(vec![0, 1_000, 2_000]).unwrap();
    let hooks = webhooks(store, sender.clone(), clock.clone(), schedule);
    let created = register(store, 0, "https://down.example/").await;
    let endpoint = domain::WebhookEndpointId::new(created.id.clone()).unwrap();
    insert_events(store, 100, 1).await;
    wait_visible(store, 1).await;
    drain(&hooks).await;
    let page = hooks
        .list_deliveries(
            &endpoint,
            None,
            application::pagination::PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    let delivery = &page.items[0];
    assert_eq!(delivery.status, DeliveryStatus::Failed);
    assert_eq!(delivery.attempts, 1);
    assert_eq!(delivery.last_status_code, Some(500));
    assert_eq!(delivery.last_error.as_deref(), Some("HTTP 500"));
    // Not due yet: nothing claimed.
    assert!(hooks.claim_deliveries(8).await.unwrap().is_empty());
    clock.advance_ms(1_000);
    drain(&hooks).await;
    clock.advance_ms(2_000);
    drain(&hooks).await;
    assert_eq!(sender.sent().len(), 3);
    assert!(sender.sent().iter().all(|(_, id)| id == "evt_100"));
    let endpoints = hooks.list_endpoints().await.unwrap();
    assert!(
        !endpoints[0].enabled,
        "disabled after a whole failing schedule"
    );
    assert!(endpoints[0].disabled_reason.is_some());
    let page = hooks
        .list_deliveries(
            &endpoint,
            None,
            application::pagination::PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(page.items[0].status, DeliveryStatus::Abandoned);
    assert_eq!(page.items[0].attempts, 3);

    // Fixed and enabled again: a redelivery goes out once, with a fresh schedule.
    *sender.status.lock().unwrap() = 200;
    let change = EndpointChange {
        enabled: Some(true),
        ..Default::default()
    };
    let enabled = store
        .update_endpoint(endpoint.as_str(), &change, clock.now())
        .await
        .unwrap()
        .expect("the endpoint");
    assert!(
        enabled.enabled && enabled.disabled_reason.is_none() && enabled.failing_since.is_none()
    );
    let again = store
        .redeliver(
            endpoint.as_str(),
            &RedeliveryTarget::Delivery(page.items[0].id.clone()),
            clock.now(),
        )
        .await
        .unwrap()
        .expect("the delivery");
    assert_eq!((again.status, again.attempts), (DeliveryStatus::Pending, 0));
    drain(&hooks).await;
    assert_eq!(sender.sent().len(), 4);
    let page = hooks
        .list_deliveries(
            &endpoint,
            Some(DeliveryStatus::Succeeded),
            application::pagination::PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(page.total, 1);
}

/// A claim whose attempt is never recorded comes back after its lease; the late record of the
/// first claim is then ignored.
async fn an_expired_lease_is_claimed_again(store: &TestStore) {
    let clock = Arc::new(FixedClock::at(START_MS));
    let sender = RecordingSender::answering(200);
    let hooks = webhooks(store, sender, clock.clone(), RetrySchedule::standard());
    register(store, 0, "https://slow.example/").await;
    insert_events(store, 200, 1).await;
    wait_visible(store, 1).await;
    hooks.dispatch(10).await.unwrap();
    let first = hooks.claim_deliveries(8).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(
        hooks.claim_deliveries(8).await.unwrap().is_empty(),
        "leased"
    );
    clock.advance_ms(60_001);
    let second = hooks.claim_deliveries(8).await.unwrap();
    assert_eq!(second.len(), 1, "the lease ran out");
    assert_eq!(
        hooks.attempt(&second[0]).await.unwrap(),
        DeliveryStatus::Succeeded
    );
    // The first instance's late attempt changes nothing.
    hooks.attempt(&first[0]).await.unwrap();
    let page = hooks
        .list_deliveries(
            &domain::WebhookEndpointId::new(first[0].endpoint_id.clone()).unwrap(),
            None,
            application::pagination::PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        (page.items[0].status, page.items[0].attempts),
        (DeliveryStatus::Succeeded, 1)
    );
}

/// Register an endpoint `we_<n>` for `url` through the store port (what an administrator's
/// create stores, its audit entry aside).
async fn register(store: &SeaOrmStore, n: usize, url: &str) -> WebhookEndpoint {
    let endpoint = WebhookEndpoint {
        url: url.to_owned(),
        ..endpoint(n)
    };
    store
        .create_endpoint(&endpoint)
        .await
        .expect("create")
        .expect("under the cap")
}

/// An endpoint as the use case would make it, with id `we_<n>`.
fn endpoint(n: usize) -> WebhookEndpoint {
    WebhookEndpoint {
        id: format!("we_{n}"),
        url: format!("https://hook{n}.example/"),
        event_types: Vec::new(),
        enabled: true,
        disabled_reason: None,
        secret: WebhookSecret::new("whsec_c2VjcmV0".to_owned()),
        previous_secret: None,
        cursor: 0,
        failing_since: None,
        created_at: domain::Timestamp::from_unix_millis(START_MS),
        updated_at: domain::Timestamp::from_unix_millis(START_MS),
    }
}

/// The endpoint cap is counted in the insert's transaction: creates racing on two instances
/// for the last few places never exceed it, and every refused one changed nothing.
async fn concurrent_creates_never_exceed_the_endpoint_cap(store: &TestStore) {
    let cap = MAX_ENDPOINTS as usize;
    for n in 0..cap - 3 {
        assert!(store.create_endpoint(&endpoint(n)).await.unwrap().is_some());
    }
    let other = store.reconnect(store::GroupCommit::off()).await;
    let racers = (0..12).map(|i| {
        let instance = if i % 2 == 0 {
            SeaOrmStore::clone(store)
        } else {
            other.clone()
        };
        tokio::spawn(async move { instance.create_endpoint(&endpoint(1_000 + i)).await })
    });
    let mut created = 0;
    for racer in racers.collect::<Vec<_>>() {
        if racer.await.expect("join").expect("create").is_some() {
            created += 1;
        }
    }
    assert_eq!(created, 3, "exactly the places left");
    assert_eq!(store.list_endpoints().await.unwrap().len(), cap);
    assert_eq!(
        store
            .raw_i64("SELECT COUNT(*) AS n FROM webhook_endpoints")
            .await,
        i64::try_from(cap).unwrap()
    );
    // Full: an administrator's create answers "too many".
    let hooks = webhooks(
        store,
        RecordingSender::answering(200),
        Arc::new(FixedClock::at(START_MS)),
        RetrySchedule::standard(),
    );
    let service = Service::new(
        (**store).clone(),
        FixedClock::at(START_MS),
        SequentialIds::default(),
        PlainHasher,
        Gateways::new(),
        config(),
    )
    .with_webhooks(Arc::new(hooks));
    let admin = service
        .register(
            "admin@example.com",
            "password123".into(),
            Role::Admin,
            &application::testing::client_of("admin@example.com"),
        )
        .await
        .unwrap()
        .user;
    let refused = service
        .create_endpoint(&admin, "https://late.example/", &[])
        .await;
    assert!(
        matches!(refused, Err(WebhookEndpointError::TooMany)),
        "{refused:?}"
    );
    other.close().await.expect("close");
}

mod concurrent {
    use super::{
        concurrent_creates_never_exceed_the_endpoint_cap,
        two_instances_deliver_each_event_once_per_endpoint,
    };

    crate::support::concurrency_tests!(
        two_instances_deliver_each_event_once_per_endpoint,
        concurrent_creates_never_exceed_the_endpoint_cap,
    );
}
crate::support::contract_tests!(
    a_failing_endpoint_is_retried_abandoned_and_disabled,
    an_expired_lease_is_claimed_again,
);
