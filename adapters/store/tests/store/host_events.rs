//! The transactional outbox (issue 17): every host event type is written by the store in the
//! transaction of the change it tells, through the real use cases on this store; a change that
//! rolls back tells nothing; a duplicate webhook tells nothing twice; and, on PostgreSQL, the
//! feed never returns an event while one with a smaller id may still commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::{Role, User};
use application::host_events::HostEventKind;
use application::ports::{
    AdjustCommand, Clock, CreditLedger, Gateways, GrantCommand, GrantSource, HostEventLog,
    OrderChange, OrderLocator, OrderRepository, PaymentEvent, PaymentEventCommand, PaymentGateway,
    RefundRecord, RefundReport, RefundRepository, RefundTarget, RefundedCharge, SpendLimitStore,
    StoreError, StoredEvent, SubscriptionChange, VerifiedWebhook, WebhookEndpoint, WebhookRequest,
    WebhookSecret, WebhookStore,
};
use application::service::{Service, ServiceConfig};
use application::testing::fixtures::config;
use application::testing::{
    FAKE_SIGNATURE_HEADER, FakeGateway, FixedClock, PlainHasher, SequentialIds,
};
use application::use_cases::credits::{ConsumeCredits, UsageRequest};
use application::use_cases::initiate_payment::InitiatePayment;
use application::use_cases::reconcile::ReconcileSettings;
use application::use_cases::spend_limits::LimitDraft;
use application::use_cases::thresholds::{ThresholdDraft, ThresholdsError};
use domain::entitlements::EntitlementDraft;
use domain::{
    BillingPeriod, CreditDelta, Currency, IdempotencyKey, Money, OrderId, OrderStatus, Plan,
    PlanDraft, PlanText, ProviderId, ProviderRefs, Subscription, SubscriptionId, Timestamp,
};
use sea_orm::{ConnectionTrait, TransactionTrait};
use serde_json::Value;
use store::SeaOrmStore;

use crate::support::{TestStore, contract_tests};
use application::ports::Writes;

const START_MS: i64 = 1_800_000_000_000;

type TestService = Service<SeaOrmStore, FixedClock, SequentialIds, PlainHasher>;

struct World {
    service: TestService,
    fake: Arc<FakeGateway>,
}

fn at_days(days: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS).plus_days(days)
}

fn usd(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Usd).unwrap()
}

fn by_id(order: &OrderId) -> OrderLocator {
    OrderLocator {
        order_id: Some(order.clone()),
        provider_reference: None,
    }
}

/// A catalog plan of the card gateway with `entitlements`; `months` for a one-time pass.
fn entitled_plan(
    id: &str,
    kind: &str,
    months: Option<i64>,
    amount: &str,
    entitlements: &[(&str, EntitlementDraft)],
) -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: id.to_owned(),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: id.into(),
        provider: Some("card_gateway".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("USD".into()),
        months,
        duration_type: Some(kind.into()),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, "price_x"),
        entitlements: entitlements
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect(),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

/// The fixtures' catalog, with `lifetime` granting `export`, and two plans of their own: a
/// one-month pass (`export`, 2 `seats`) and a team subscription (`api`, 5 `seats`).
fn entitled_config() -> ServiceConfig {
    let mut config = config();
    let on = EntitlementDraft::Flag(true);
    config.catalog.retain(|p| p.id().as_str() != "lifetime");
    config.catalog.extend([
        entitled_plan(
            "lifetime",
            "one_time",
            Some(999_999),
            "99",
            &[("export", on.clone())],
        ),
        entitled_plan(
            "pass-1m",
            "one_time",
            Some(1),
            "5",
            &[
                ("export", on.clone()),
                ("seats", EntitlementDraft::Integer(2)),
            ],
        ),
        entitled_plan(
            "team-monthly",
            "recurring",
            Some(1),
            "19.99",
            &[("api", on), ("seats", EntitlementDraft::Integer(5))],
        ),
    ]);
    config
}

impl World {
    fn new(store: &TestStore) -> Self {
        let fake = Arc::new(FakeGateway::new(ProviderId::CardGateway));
        let gateways = Gateways::new().with(fake.clone() as Arc<dyn PaymentGateway>);
        let service = Service::new(
            (**store).clone(),
            FixedClock::at(START_MS),
            SequentialIds::default(),
            PlainHasher,
            gateways,
            entitled_config(),
        )
        .with_low_balance_threshold(Some(crate::support::c(1000)));
        Self { service, fake }
    }

    async fn user(&self, email: &str) -> User {
        self.service
            .register(
                email,
                "password123".into(),
                Role::User,
                &application::testing::client_of(email),
            )
            .await
            .unwrap()
            .user
    }

    async fn order(&self, user: &User, plan: &str) -> OrderId {
        let request = InitiatePayment {
            save_method: false,
            user: user.clone(),
            account: None,
            plan_id: domain::PlanId::new(plan).unwrap(),
            provider: "card_gateway".parse().unwrap(),
            idempotency_key: None,
            returns: Default::default(),
        };
        let started = self.service.initiate_payment(request).await.unwrap();
        started.order.order.id().clone()
    }

    async fn deliver(&self, event_id: &str, event: PaymentEvent) -> String {
        let signature = format!("sig-{event_id}");
        self.fake.prepare_webhook(
            &signature,
            VerifiedWebhook {
                event_id: event_id.into(),
                event_type: "test.event".into(),
                events: vec![event],
                foreign: None,
            },
        );
        let mut headers = BTreeMap::new();
        headers.insert(FAKE_SIGNATURE_HEADER.to_owned(), signature);
        let request = WebhookRequest {
            headers,
            body: b"{}".to_vec(),
        };
        let handled = self
            .service
            .handle_webhook(Some(domain::ProviderId::CardGateway), request)
            .await;
        handled
            .expect("handled")
            .outcomes()
            .iter()
            .map(|o| o.code())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Every event the feed returns once every committed one is readable. On PostgreSQL the feed
/// holds events back while any older transaction of the cluster runs (other tests' included),
/// so this waits, up to ten seconds, until it returns as many as the table holds.
pub async fn all_events(store: &SeaOrmStore) -> Vec<StoredEvent> {
    let backend = store.connection().get_database_backend();
    let count = sea_orm::Statement::from_string(backend, "SELECT COUNT(*) AS n FROM events");
    for _ in 0..200 {
        let events = store.events_after(None, 1_000, &[]).await.unwrap().events;
        let row = store
            .connection()
            .query_one_raw(count.clone())
            .await
            .unwrap();
        let written: i64 = row.unwrap().try_get("", "n").unwrap();
        if events.len() as i64 == written {
            return events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("committed events stayed unreadable");
}

/// The event ids the feed returns now.
async fn readable_now(store: &SeaOrmStore) -> Vec<String> {
    let events = store.events_after(None, 1_000, &[]).await.unwrap().events;
    events.into_iter().map(|e| e.event_id).collect()
}

/// The events after `after`, as (type, payload).
async fn told_since(store: &SeaOrmStore, after: usize) -> Vec<(HostEventKind, Value)> {
    all_events(store)
        .await
        .into_iter()
        .skip(after)
        .map(|e| (e.kind, serde_json::from_str(&e.payload).unwrap()))
        .collect()
}

fn kinds(told: &[(HostEventKind, Value)]) -> Vec<&'static str> {
    told.iter().map(|(k, _)| k.code()).collect()
}

/// A spend that takes a soft limit past its credits tells `limit.reached` once, with the limit
/// after the spend and the spend; the next spend tells nothing more.
async fn a_spend_reaching_a_limit_tells_it(world: &World, store: &TestStore) {
    let user = world.user("limited@example.com").await;
    let account = domain::AccountId::personal(&user.id);
    let grant = GrantCommand {
        account_id: account.clone(),
        amount: crate::support::c(2_000),
        source: GrantSource::Admin("limited".into()),
        expires_at: None,
        now: at_days(2),
    };
    store.grant(&grant).await.unwrap();
    let draft = LimitDraft {
        feature: None,
        model: None,
        api_key_id: None,
        member_id: None,
        window: "month".into(),
        rolling_hours: None,
        credits: "5".into(),
        enforcement: Some("soft".into()),
    };
    let limit = world
        .service
        .add_spend_limit(&user.id, &account, draft)
        .await
        .unwrap();
    let before = all_events(store).await.len();
    for key in ["l1", "l2", "l3"] {
        let spend = ConsumeCredits {
            user_id: user.id.clone(),
            account_id: None,
            usage: UsageRequest {
                feature: None,
                model: Some("big".into()),
                tokens: Some(1_500),
                breakdown: None,
            },
            idempotency_key: IdempotencyKey::new(key).unwrap(),
            api_key_id: None,
        };
        world.service.consume_credits(spend).await.unwrap();
    }
    let told = told_since(store, before).await;
    let reached: Vec<&Value> = told
        .iter()
        .filter(|(k, _)| *k == HostEventKind::LimitReached)
        .map(|(_, payload)| &payload["data"])
        .collect();
    assert_eq!(reached.len(), 1, "{told:?}");
    assert_eq!(reached[0]["limit"]["id"], limit.record.id.as_str());
    assert_eq!(reached[0]["limit"]["enforcement"], "soft");
    assert_eq!(reached[0]["limit"]["usedHundredths"], 600);
    assert_eq!(reached[0]["limit"]["leftHundredths"], 0);
    assert_eq!(reached[0]["transaction"]["amountHundredths"], -300);
    // Its window has not reset yet: nothing to tell. Once it has, `limit.reset` once.
    let now = world.service.clock().now();
    assert_eq!(store.tell_limit_resets(now, 100).await.unwrap(), 0);
    let before = all_events(store).await.len();
    let next_month = now.plus_days(32);
    assert_eq!(store.tell_limit_resets(next_month, 100).await.unwrap(), 1);
    assert_eq!(store.tell_limit_resets(next_month, 100).await.unwrap(), 0);
    let told = told_since(store, before).await;
    assert_eq!(kinds(&told), ["limit.reset"]);
    let reset = &told[0].1["data"];
    assert_eq!(reset["userId"], user.id.as_str());
    assert_eq!(reset["limit"]["id"], limit.record.id.as_str());
    assert_eq!(reset["limit"]["usedHundredths"], 0);
    assert_eq!(reset["limit"]["leftHundredths"], 500);
}

/// An account's balance thresholds: each crossing told once, downwards by spends and holds,
/// back up by a release and a grant, a percentage taken from the last grant; a removed
/// threshold tells nothing more.
async fn balance_thresholds_tell_each_crossing_once(world: &World, store: &TestStore) {
    let user = world.user("watched@example.com").await;
    let account = domain::AccountId::personal(&user.id);
    let grant = |credits: i64, reference: &str| GrantCommand {
        account_id: account.clone(),
        amount: crate::support::c(credits * 100),
        source: GrantSource::Admin(reference.into()),
        expires_at: None,
        now: at_days(2),
    };
    // 500 tokens of model "big" cost 1.00 credit.
    let spend = |credits: i64, key: &str| ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: None,
            model: Some("big".into()),
            tokens: Some(credits * 500),
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    };
    store.grant(&grant(40, "watch-1")).await.unwrap();
    let mut ids = Vec::new();
    for draft in [
        ThresholdDraft {
            credits: Some("10".into()),
            ..ThresholdDraft::default()
        },
        ThresholdDraft {
            percent_of_grant: Some(50),
            ..ThresholdDraft::default()
        },
    ] {
        let shown = world
            .service
            .add_balance_threshold(&user.id, &account, draft)
            .await
            .unwrap();
        assert!(!shown.below);
        ids.push(shown.record.id);
    }
    let before = all_events(store).await.len();
    // 40 → 25 → 19 (below 50% of 40) → 9 (below 10) → 8.
    for (credits, key) in [(15, "w1"), (6, "w2"), (10, "w3"), (1, "w4")] {
        world
            .service
            .consume_credits(spend(credits, key))
            .await
            .unwrap();
    }
    // A grant of 10 (the last grant now: 50% is 5): 18, back above 10.
    store.grant(&grant(10, "watch-2")).await.unwrap();
    // A hold takes it to 9, its release back to 18.
    let (held, _) = world.service.reserve_credits(spend(9, "w5")).await.unwrap();
    let id = held.id.clone();
    world
        .service
        .release_reservation(&user.id, None, &id)
        .await
        .unwrap();
    let told: Vec<(HostEventKind, Value)> = told_since(store, before)
        .await
        .into_iter()
        .filter(|(k, _)| {
            matches!(
                k,
                HostEventKind::CreditsThresholdCrossed | HostEventKind::CreditsRecovered
            )
        })
        .collect();
    assert_eq!(
        kinds(&told),
        [
            "credits.threshold_crossed",
            "credits.threshold_crossed",
            "credits.recovered",
            "credits.threshold_crossed",
            "credits.recovered",
        ]
    );
    let data = |i: usize| &told[i].1["data"];
    assert_eq!(data(0)["threshold"]["id"], ids[1].as_str());
    assert_eq!(data(0)["threshold"]["percentOfGrant"], 50);
    assert_eq!(data(0)["threshold"]["levelHundredths"], 2_000);
    assert_eq!(data(0)["balanceHundredths"], 1_900);
    assert_eq!(data(0)["transaction"]["type"], "consumption");
    assert_eq!(data(1)["threshold"]["id"], ids[0].as_str());
    assert_eq!(data(1)["threshold"]["creditsHundredths"], 1_000);
    assert_eq!(data(1)["balanceHundredths"], 900);
    assert_eq!(data(2)["threshold"]["id"], ids[0].as_str());
    assert_eq!(data(2)["balanceHundredths"], 1_800);
    assert_eq!(data(2)["transaction"]["type"], "admin_adjustment");
    assert_eq!(data(2)["userId"], user.id.as_str());
    assert_eq!(data(3)["transaction"]["type"], "reservation_hold");
    assert_eq!(data(4)["transaction"]["type"], "reservation_release");
    // Removed, a threshold tells nothing more; the other still does.
    world
        .service
        .remove_balance_threshold(&user.id, &account, &ids[0])
        .await
        .unwrap();
    let before = all_events(store).await.len();
    world
        .service
        .consume_credits(spend(10, "w6"))
        .await
        .unwrap();
    let told = told_since(store, before).await;
    assert!(
        told.iter()
            .all(|(k, _)| *k != HostEventKind::CreditsThresholdCrossed
                && *k != HostEventKind::CreditsRecovered),
        "{told:?}"
    );
    let listed = world.service.balance_thresholds(&account).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].level, Some(crate::support::c(500)));
    assert!(
        !listed[0].below,
        "8 credits are above 50% of the last grant of 10"
    );
}

/// A threshold at a percentage of a limit sits at that share of the limit's credits, tells
/// its crossings as any threshold, and goes when its limit is removed; one on a limit the
/// account does not have is refused.
async fn a_threshold_on_a_limit_follows_the_limit(world: &World, store: &TestStore) {
    let user = world.user("ceiling@example.com").await;
    let account = domain::AccountId::personal(&user.id);
    let grant = GrantCommand {
        account_id: account.clone(),
        amount: crate::support::c(4_000),
        source: GrantSource::Admin("ceiling".into()),
        expires_at: None,
        now: at_days(2),
    };
    store.grant(&grant).await.unwrap();
    let ceiling = LimitDraft {
        window: "month".into(),
        credits: "30".into(),
        ..LimitDraft::default()
    };
    let limit = world
        .service
        .add_spend_limit(&user.id, &account, ceiling)
        .await
        .unwrap();
    let half = |limit: &str| ThresholdDraft {
        percent_of_limit: Some(50),
        limit_id: Some(limit.into()),
        ..ThresholdDraft::default()
    };
    let refused = world
        .service
        .add_balance_threshold(&user.id, &account, half("lim_none"))
        .await;
    assert!(
        matches!(refused, Err(ThresholdsError::NoSuchLimit)),
        "{refused:?}"
    );
    let shown = world
        .service
        .add_balance_threshold(&user.id, &account, half(limit.record.id.as_str()))
        .await
        .unwrap();
    assert_eq!(shown.level, Some(crate::support::c(1_500)));
    let spend = |credits: i64, key: &str| ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: None,
            model: Some("big".into()),
            tokens: Some(credits * 500),
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    };
    let before = all_events(store).await.len();
    // 40 → 20 → 14: below half the ceiling of 30.
    for (credits, key) in [(20, "c1"), (6, "c2")] {
        world
            .service
            .consume_credits(spend(credits, key))
            .await
            .unwrap();
    }
    let told: Vec<(HostEventKind, Value)> = told_since(store, before)
        .await
        .into_iter()
        .filter(|(k, _)| *k == HostEventKind::CreditsThresholdCrossed)
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    let threshold = &told[0].1["data"]["threshold"];
    assert_eq!(threshold["percentOfLimit"], 50);
    assert_eq!(threshold["limitId"], limit.record.id.as_str());
    assert_eq!(threshold["levelHundredths"], 1_500);
    assert_eq!(told[0].1["data"]["balanceHundredths"], 1_400);
    // The limit removed, its threshold is gone with it, and the balance row counts none.
    world
        .service
        .remove_spend_limit(&user.id, &account, &limit.record.id)
        .await
        .unwrap();
    assert!(
        world
            .service
            .balance_thresholds(&account)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .grant(&GrantCommand {
            amount: crate::support::c(2_000),
            source: GrantSource::Admin("ceiling-2".into()),
            ..grant
        })
        .await
        .unwrap();
    let before = all_events(store).await.len();
    world
        .service
        .consume_credits(spend(30, "c3"))
        .await
        .unwrap();
    assert!(
        told_since(store, before)
            .await
            .iter()
            .all(|(k, _)| *k != HostEventKind::CreditsThresholdCrossed),
    );
}

/// A credits order: paid, the same webhook again, partly refunded; another paid with the wrong
/// amount; another failed.
async fn orders_tell_paid_refunded_mismatch_and_failed(world: &World, store: &TestStore) {
    let buyer = world.user("buyer@example.com").await;
    let order = world.order(&buyer, "credits-100").await;
    let paid = PaymentEvent::PaymentSucceeded {
        order: by_id(&order),
        amount: usd(1000),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("pay-1", paid.clone()).await, "applied");
    let told = told_since(store, 0).await;
    assert_eq!(kinds(&told), ["order.paid", "credits.granted"]);
    let (_, envelope) = &told[0];
    assert_eq!(envelope["data"]["userId"], buyer.id.as_str());
    assert_eq!(envelope["data"]["order"]["orderId"], order.as_str());
    assert_eq!(envelope["data"]["order"]["status"], "paid");
    assert_eq!(envelope["data"]["order"]["amountMinor"], 1000);
    assert_eq!(told[1].1["data"]["transaction"]["type"], "purchase_grant");
    assert_eq!(told[1].1["data"]["transaction"]["amount"], "100.00");
    assert_eq!(told[1].1["data"]["transaction"]["orderId"], order.as_str());

    assert_eq!(world.deliver("pay-1", paid).await, "duplicate");
    assert_eq!(
        all_events(store).await.len(),
        2,
        "a duplicate tells nothing"
    );

    let refund = PaymentEvent::Refunded {
        charge: RefundedCharge::Order(by_id(&order)),
        refund: RefundReport::Total(usd(400)),
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("refund-1", refund).await, "applied");
    let told = told_since(store, 2).await;
    assert_eq!(kinds(&told), ["order.refunded", "credits.clawed_back"]);
    let refund = &told[0].1["data"]["refund"];
    assert_eq!(refund["amountMinor"], 400);
    assert_eq!(refund["refundedTotalMinor"], 400);
    assert_eq!(refund["full"], false);
    assert_eq!(told[0].1["data"]["order"]["status"], "partially_refunded");
    assert_eq!(told[1].1["data"]["transaction"]["amount"], "-40.00");

    let cheap = world.order(&buyer, "credits-100").await;
    let underpaid = PaymentEvent::PaymentSucceeded {
        order: by_id(&cheap),
        amount: usd(1),
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("pay-cheap", underpaid).await, "mismatch");
    let told = told_since(store, 4).await;
    assert_eq!(kinds(&told), ["payment.mismatch"]);
    let data = &told[0].1["data"];
    assert_eq!(data["provider"], "card_gateway");
    assert_eq!(data["providerEventId"], "pay-cheap");
    assert_eq!(data["userId"], buyer.id.as_str());
    assert!(data["detail"].is_string(), "{data}");

    let failing = world.order(&buyer, "credits-100").await;
    let failed = PaymentEvent::PaymentFailed {
        order: by_id(&failing),
        reason: "card declined".into(),
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("pay-fail", failed).await, "applied");
    let told = told_since(store, 5).await;
    assert_eq!(kinds(&told), ["order.failed"]);
    assert_eq!(told[0].1["data"]["order"]["orderId"], failing.as_str());
}

/// A subscription: activated, renewed, past due, scheduled to cancel, ended.
async fn a_subscription_tells_its_lifecycle(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let subscriber = world.user("subscriber@example.com").await;
    let order = world.order(&subscriber, "pro-monthly").await;
    let period = |k: i64| BillingPeriod::new(at_days(30 * k), at_days(30 * k + 30)).unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&order),
        provider_subscription_id: "sub_1".into(),
        period: period(0),
        amount: Some(usd(999)),
        charge_ref: Some("in_0".into()),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("sub-act", activated).await, "applied");
    let renewed = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(1),
        amount: usd(999),
        charge_ref: Some("in_1".into()),
        occurred_at: at_days(30),
    };
    assert_eq!(world.deliver("sub-renew", renewed).await, "applied");
    let sub = || "sub_1".to_owned();
    let steps = [
        PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: sub(),
            occurred_at: at_days(31),
        },
        PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: sub(),
            occurred_at: at_days(32),
        },
        PaymentEvent::SubscriptionCanceled {
            provider_subscription_id: sub(),
            occurred_at: at_days(33),
        },
    ];
    for (i, step) in steps.into_iter().enumerate() {
        assert_eq!(world.deliver(&format!("sub-{i}"), step).await, "applied");
    }
    let told = told_since(store, before).await;
    let codes = kinds(&told);
    assert_eq!(
        codes,
        [
            "order.paid",
            "subscription.activated",
            "credits.granted",
            "subscription.renewed",
            "credits.granted",
            "subscription.past_due",
            "subscription.cancel_scheduled",
            "subscription.ended",
        ]
    );
    for (_, envelope) in &told {
        assert_eq!(envelope["data"]["userId"], subscriber.id.as_str());
    }
    let activated = &told[1].1["data"]["subscription"];
    assert_eq!(activated["planId"], "pro-monthly");
    assert_eq!(activated["status"], "active");
    assert_eq!(told[7].1["data"]["subscription"]["status"], "canceled");
    assert_eq!(told[6].1["data"]["subscription"]["cancelAtPeriodEnd"], true);
}

/// A switch to another plan (issue 19), once the provider confirmed it, tells
/// `subscription.plan_changed` with the new plan, once.
async fn a_confirmed_switch_tells_the_plan_change(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let subscriber = world.user("switcher@example.com").await;
    let order = world.order(&subscriber, "pro-monthly").await;
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&order),
        provider_subscription_id: "sub_switch".into(),
        period: BillingPeriod::new(at_days(0), at_days(30)).unwrap(),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("switch-act", activated).await, "applied");
    let status = world.service.report_status(&subscriber).await.unwrap();
    let id = status.subscription.unwrap().id().clone();
    let plan = domain::PlanId::new("team-monthly").unwrap();
    world
        .service
        .change_plan(&subscriber, &id, &plan)
        .await
        .unwrap();
    let switched = || PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: "sub_switch".into(),
        price: usd(1999),
        interval_months: Some(1),
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("switch-upd", switched()).await, "applied");
    assert_eq!(
        world.deliver("switch-upd-2", switched()).await,
        "duplicate_state"
    );
    let told = told_since(store, before).await;
    let changed: Vec<_> = told
        .iter()
        .filter(|(_, e)| e["type"] == "subscription.plan_changed")
        .collect();
    assert_eq!(changed.len(), 1, "{:?}", kinds(&told));
    assert_eq!(
        changed[0].1["data"]["subscription"]["planId"],
        "team-monthly"
    );
}

/// An administrator's grant and debit, a grant on its own, and its expiry.
async fn the_ledger_tells_grants_debits_and_expiries(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let user = world.user("ledger@example.com").await;
    let adjust = |amount: i64, reference: &str| AdjustCommand {
        account_id: domain::AccountId::personal(&user.id),
        amount: CreditDelta::from_hundredths(amount).unwrap(),
        note: "support".into(),
        reference: reference.into(),
        expires_at: None,
        grant: (
            domain::GrantCategory::Compensation,
            domain::GrantPriority::default(),
        ),
        spend_order: domain::SpendOrder::default(),
        now: at_days(2),
    };
    store.adjust(&adjust(500, "adj-1"), &user.id).await.unwrap();
    store.adjust(&adjust(500, "adj-1"), &user.id).await.unwrap();
    store
        .adjust(&adjust(-200, "adj-2"), &user.id)
        .await
        .unwrap();
    let grant = GrantCommand {
        account_id: domain::AccountId::personal(&user.id),
        amount: crate::support::c(300),
        source: GrantSource::Admin("promo-1".into()),
        expires_at: Some(at_days(3)),
        now: at_days(2),
    };
    store.grant(&grant).await.unwrap();
    store.grant(&grant).await.unwrap();
    assert_eq!(store.expire_grants(at_days(4), 10).await.unwrap(), 1);
    assert_eq!(store.expire_grants(at_days(5), 10).await.unwrap(), 0);
    let told = told_since(store, before).await;
    assert_eq!(
        kinds(&told),
        [
            "credits.granted",
            "credits.clawed_back",
            "credits.granted",
            "credits.expired"
        ]
    );
    assert_eq!(told[1].1["data"]["transaction"]["type"], "admin_adjustment");
    assert_eq!(told[1].1["data"]["transaction"]["amount"], "-2.00");
    assert_eq!(told[3].1["data"]["transaction"]["amount"], "-3.00");
    for (_, envelope) in &told {
        assert_eq!(envelope["data"]["userId"], user.id.as_str());
    }
}

/// Spends, alone or grouped: below the low-balance threshold (10 credits) and to zero, told
/// once per crossing, by consumptions and by reservations' holds.
async fn spends_tell_each_balance_crossing_once(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let user = world.user("spender@example.com").await;
    let grant = |credits: i64, reference: &str| GrantCommand {
        account_id: domain::AccountId::personal(&user.id),
        amount: crate::support::c(credits * 100),
        source: GrantSource::Admin(reference.into()),
        expires_at: None,
        now: at_days(2),
    };
    // 1500 tokens of model "big" cost 3.00 credits.
    let spend = |credits: i64, key: &str| ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: None,
            model: Some("big".into()),
            tokens: Some(credits * 500),
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    };
    store.grant(&grant(15, "spend-1")).await.unwrap();
    for (credits, key) in [(3, "s1"), (4, "s2"), (4, "s2"), (2, "s3"), (6, "s4")] {
        world
            .service
            .consume_credits(spend(credits, key))
            .await
            .unwrap();
    }
    store.grant(&grant(20, "spend-2")).await.unwrap();
    world
        .service
        .consume_credits(spend(15, "s5"))
        .await
        .unwrap();
    world.service.reserve_credits(spend(5, "r1")).await.unwrap();
    let told = told_since(store, before).await;
    assert_eq!(
        kinds(&told),
        [
            "credits.granted",
            "credits.low_balance",
            "credits.depleted",
            "credits.granted",
            "credits.low_balance",
            "credits.depleted",
        ]
    );
    let low = &told[1].1["data"];
    assert_eq!(low["userId"], user.id.as_str());
    assert_eq!(low["balance"], "8.00");
    assert_eq!(low["threshold"], "10.00");
    assert_eq!(low["transaction"]["type"], "consumption");
    assert_eq!(told[2].1["data"]["balanceHundredths"], 0);
    assert_eq!(told[5].1["data"]["transaction"]["type"], "reservation_hold");
}

fn reconcile_settings() -> ReconcileSettings {
    ReconcileSettings {
        pending_after_ms: 60_000,
        batch: 10,
        lease_ms: 30_000,
    }
}

/// Unpaid orders: one cancelled by its buyer, one expired by the reconciler.
async fn unpaid_orders_tell_cancelled_and_expired(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let buyer = world.user("unpaid@example.com").await;
    let cancelled = world.order(&buyer, "credits-100").await;
    world
        .service
        .cancel_payment(&buyer, &cancelled)
        .await
        .unwrap();
    let expiring = world.order(&buyer, "credits-100").await;
    world.service.clock().advance_ms(2 * 3_600_000);
    // The mismatched order of the first scenario is still pending: it expires too.
    let report = world.service.reconcile(reconcile_settings()).await.unwrap();
    assert_eq!(report.expired, 2);
    world.service.reconcile(reconcile_settings()).await.unwrap();
    let told = told_since(store, before).await;
    assert_eq!(
        kinds(&told),
        ["order.cancelled", "order.expired", "order.expired"]
    );
    assert_eq!(told[0].1["data"]["order"]["orderId"], cancelled.as_str());
    assert_eq!(told[0].1["data"]["order"]["status"], "cancelled");
    let expired = told
        .iter()
        .find(|(_, e)| e["data"]["order"]["orderId"] == expiring.as_str())
        .expect("the expired order is told");
    assert_eq!(expired.1["data"]["order"]["status"], "expired");
    assert_eq!(expired.1["data"]["userId"], buyer.id.as_str());
}

fn entitlements_of(envelope: &Value) -> (Value, Value) {
    let data = &envelope["data"];
    (data["entitlements"].clone(), data["previous"].clone())
}

/// A one-month pass and a team subscription: each purchase tells the new map with the previous
/// one in its own transaction; a renewal, a cancellation scheduled and withdrawn tell no
/// change; a renewal that does not match is told with its user; the pass running out and then
/// the cancelled subscription's period ending are told by the reconciler, once each, however
/// many instances reconcile.
async fn entitlement_changes_are_told_once_each(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let user = world.user("entitled@example.com").await;
    let pass = world.order(&user, "pass-1m").await;
    let paid = PaymentEvent::PaymentSucceeded {
        order: by_id(&pass),
        amount: usd(500),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("ent-pass", paid).await, "applied");
    let told = told_since(store, before).await;
    assert_eq!(kinds(&told), ["order.paid", "entitlements.changed"]);
    let (now, previous) = entitlements_of(&told[1].1);
    assert_eq!(now, serde_json::json!({"export": true, "seats": 2}));
    assert_eq!(previous, serde_json::json!({}));
    assert_eq!(told[1].1["data"]["userId"], user.id.as_str());

    let team = world.order(&user, "team-monthly").await;
    let period = |k: i64| BillingPeriod::new(at_days(30 * k), at_days(30 * k + 30)).unwrap();
    let sub = || "sub_ent".to_owned();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&team),
        provider_subscription_id: sub(),
        period: period(0),
        amount: Some(usd(1999)),
        charge_ref: Some("in_e0".into()),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("ent-act", activated).await, "applied");
    let renewed = |k: i64, amount: i64| PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: sub(),
        period: period(k),
        amount: usd(amount),
        charge_ref: Some(format!("in_e{k}")),
        occurred_at: at_days(30 * k),
    };
    assert_eq!(
        world.deliver("ent-renew", renewed(1, 1999)).await,
        "applied"
    );
    assert_eq!(world.deliver("ent-cheap", renewed(2, 1)).await, "mismatch");
    let steps = [
        PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: sub(),
            occurred_at: at_days(31),
        },
        PaymentEvent::SubscriptionCancelWithdrawn {
            provider_subscription_id: sub(),
            occurred_at: at_days(32),
        },
        PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: sub(),
            occurred_at: at_days(33),
        },
    ];
    for (i, step) in steps.into_iter().enumerate() {
        assert_eq!(world.deliver(&format!("ent-{i}"), step).await, "applied");
    }
    let told = told_since(store, before + 2).await;
    assert_eq!(
        kinds(&told),
        [
            "order.paid",
            "subscription.activated",
            "entitlements.changed",
            "subscription.renewed",
            "payment.mismatch",
            "subscription.cancel_scheduled",
            "subscription.resumed",
            "subscription.cancel_scheduled",
        ]
    );
    let (now, previous) = entitlements_of(&told[2].1);
    assert_eq!(
        now,
        serde_json::json!({"api": true, "export": true, "seats": 5})
    );
    assert_eq!(previous, serde_json::json!({"export": true, "seats": 2}));
    assert_eq!(
        told[4].1["data"]["userId"],
        user.id.as_str(),
        "renewal mismatch"
    );

    // Nothing has run out yet.
    let report = world.service.reconcile(reconcile_settings()).await.unwrap();
    assert_eq!(report.entitlement_lapses_told, 0);
    // The pass (one calendar month) has run out by day 32; the subscription runs to day 60.
    // (The reconciler also expires other scenarios' credits meanwhile: only this user's
    // events are looked at.)
    let mine = |told: Vec<(HostEventKind, Value)>| -> Vec<(HostEventKind, Value)> {
        told.into_iter()
            .filter(|(_, e)| e["data"]["userId"] == user.id.as_str())
            .collect()
    };
    let mark = all_events(store).await.len();
    world.service.clock().advance_ms(32 * 86_400_000);
    let report = world.service.reconcile(reconcile_settings()).await.unwrap();
    assert_eq!(report.entitlement_lapses_told, 1);
    let again = world.service.reconcile(reconcile_settings()).await.unwrap();
    assert_eq!(again.entitlement_lapses_told, 0);
    let told = mine(told_since(store, mark).await);
    assert_eq!(kinds(&told), ["entitlements.changed"]);
    let (now, previous) = entitlements_of(&told[0].1);
    assert_eq!(now, serde_json::json!({"api": true, "seats": 5}));
    assert_eq!(
        previous,
        serde_json::json!({"api": true, "export": true, "seats": 5})
    );

    // Past the cancelled subscription's period: two instances reconcile at once, one tells.
    let mark = all_events(store).await.len();
    world.service.clock().advance_ms(30 * 86_400_000);
    let other = World::new(store);
    other
        .service
        .clock()
        .advance_ms(62 * 86_400_000 + 2 * 3_600_000);
    let (a, b) = tokio::join!(
        world.service.reconcile(reconcile_settings()),
        other.service.reconcile(reconcile_settings())
    );
    let lapses = a.unwrap().entitlement_lapses_told + b.unwrap().entitlement_lapses_told;
    assert_eq!(lapses, 1, "told exactly once");
    let told = mine(told_since(store, mark).await);
    assert_eq!(kinds(&told), ["entitlements.changed"]);
    let (now, previous) = entitlements_of(&told[0].1);
    assert_eq!(now, serde_json::json!({}));
    assert_eq!(previous, serde_json::json!({"api": true, "seats": 5}));
}

/// A lifetime purchase refunded in full: access ends with the refund, told in its transaction.
async fn a_refund_that_ends_access_tells_the_entitlements_gone(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let user = world.user("refunded@example.com").await;
    let order = world.order(&user, "lifetime").await;
    let paid = PaymentEvent::PaymentSucceeded {
        order: by_id(&order),
        amount: usd(9900),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("life-pay", paid).await, "applied");
    let refund = PaymentEvent::Refunded {
        charge: RefundedCharge::Order(by_id(&order)),
        refund: RefundReport::Total(usd(9900)),
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("life-refund", refund).await, "applied");
    let told = told_since(store, before).await;
    assert_eq!(
        kinds(&told),
        [
            "order.paid",
            "entitlements.changed",
            "order.refunded",
            "entitlements.changed"
        ]
    );
    assert_eq!(
        entitlements_of(&told[1].1).0,
        serde_json::json!({"export": true})
    );
    let (now, previous) = entitlements_of(&told[3].1);
    assert_eq!(now, serde_json::json!({}));
    assert_eq!(previous, serde_json::json!({"export": true}));
}

/// Forget what was told to `user`, as for a user who bought before entitlements were released
/// (no `entitlements_told` row).
async fn forget_told(store: &TestStore, user: &User) {
    let backend = store.connection().get_database_backend();
    let delete = sea_orm::Statement::from_sql_and_values(
        backend,
        "DELETE FROM entitlements_told WHERE account_id = $1",
        [user.id.as_str().into()],
    );
    let deleted = store.connection().execute_raw(delete).await.unwrap();
    assert_eq!(deleted.rows_affected(), 1, "{} had a row", user.id);
}

/// The map stored as told to `user`.
async fn stored_told(store: &TestStore, user: &User) -> Value {
    let backend = store.connection().get_database_backend();
    let select = sea_orm::Statement::from_sql_and_values(
        backend,
        "SELECT entitlements FROM entitlements_told WHERE account_id = $1",
        [user.id.as_str().into()],
    );
    let row = store.connection().query_one_raw(select).await.unwrap();
    let text: String = row.expect("a row").try_get("", "entitlements").unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A user who held entitlements before they were released has no record of what was told:
/// their first change is told with what they held just before it as `previous` (a new
/// subscription, a one-time pass refunded), never `{}`; a change that leaves the set as it was
/// tells nothing and keeps the record for the next one.
pub async fn a_user_from_before_the_release_is_told_what_they_held(store: &TestStore) {
    let world = World::new(store);
    let user = world.user("early@example.com").await;
    let pass = world.order(&user, "pass-1m").await;
    let paid = PaymentEvent::PaymentSucceeded {
        order: by_id(&pass),
        amount: usd(500),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("early-pass", paid).await, "applied");
    let pass_only = serde_json::json!({"export": true, "seats": 2});
    assert_eq!(stored_told(store, &user).await, pass_only);

    // A subscription created.
    forget_told(store, &user).await;
    let mark = all_events(store).await.len();
    let team = world.order(&user, "team-monthly").await;
    let period = BillingPeriod::new(at_days(0), at_days(30)).unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&team),
        provider_subscription_id: "sub_early".into(),
        period,
        amount: Some(usd(1999)),
        charge_ref: Some("in_early".into()),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("early-act", activated).await, "applied");
    let both = serde_json::json!({"api": true, "export": true, "seats": 5});
    let told = told_since(store, mark).await;
    let changed: Vec<_> = told
        .iter()
        .filter(|(k, _)| *k == HostEventKind::EntitlementsChanged)
        .collect();
    assert_eq!(changed.len(), 1, "{:?}", kinds(&told));
    assert_eq!(entitlements_of(&changed[0].1), (both.clone(), pass_only));

    // A subscription's change that leaves the set as it was: nothing told, the record kept.
    forget_told(store, &user).await;
    let mark = all_events(store).await.len();
    let past_due = PaymentEvent::SubscriptionPastDue {
        provider_subscription_id: "sub_early".into(),
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("early-due", past_due).await, "applied");
    assert_eq!(
        kinds(&told_since(store, mark).await),
        ["subscription.past_due"]
    );
    assert_eq!(stored_told(store, &user).await, both);

    // A one-time pass refunded in full (the order is no longer among what the user holds).
    forget_told(store, &user).await;
    let mark = all_events(store).await.len();
    let refund = PaymentEvent::Refunded {
        charge: RefundedCharge::Order(by_id(&pass)),
        refund: RefundReport::Total(usd(500)),
        occurred_at: at_days(2),
    };
    assert_eq!(world.deliver("early-refund", refund).await, "applied");
    let told = told_since(store, mark).await;
    assert_eq!(kinds(&told), ["order.refunded", "entitlements.changed"]);
    let now = serde_json::json!({"api": true, "seats": 5});
    assert_eq!(entitlements_of(&told[1].1), (now.clone(), both));
    assert_eq!(stored_told(store, &user).await, now);
}

/// An endpoint with every consumption type, enabled from `START_MS`.
fn opted_in_endpoint(id: &str, types: Vec<HostEventKind>) -> WebhookEndpoint {
    WebhookEndpoint {
        id: id.into(),
        url: format!("https://{id}.example/hook"),
        event_types: types,
        enabled: true,
        disabled_reason: None,
        secret: WebhookSecret::new("whsec_c2VjcmV0".to_owned()),
        previous_secret: None,
        cursor: 0,
        failing_since: None,
        created_at: at_days(0),
        updated_at: at_days(0),
    }
}

/// Consumption events are written only while an enabled endpoint names them: not for an
/// endpoint of every (other) type, then consumed, reserved, settled and released once each,
/// and nothing more once that endpoint is disabled.
async fn consumption_is_told_only_while_an_endpoint_opts_in(world: &World, store: &TestStore) {
    let before = all_events(store).await.len();
    let user = world.user("metered@example.com").await;
    let grant = GrantCommand {
        account_id: domain::AccountId::personal(&user.id),
        amount: crate::support::c(100_000),
        source: GrantSource::Admin("metered".into()),
        expires_at: None,
        now: world.service.clock().now(),
    };
    store.grant(&grant).await.unwrap();
    let spend = |key: &str| ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: Some("chat".into()),
            model: None,
            tokens: None,
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    };
    world.service.consume_credits(spend("m1")).await.unwrap();
    store
        .create_endpoint(&opted_in_endpoint("we_all", Vec::new()))
        .await
        .unwrap()
        .unwrap();
    world.service.consume_credits(spend("m2")).await.unwrap();
    let metered = opted_in_endpoint("we_metered", HostEventKind::OPT_IN.to_vec());
    store.create_endpoint(&metered).await.unwrap().unwrap();
    world.service.consume_credits(spend("m3")).await.unwrap();
    world.service.consume_credits(spend("m3")).await.unwrap();
    let now = world.service.clock().now();
    let (held, _) = world.service.reserve_credits(spend("r1")).await.unwrap();
    store
        .settle(
            (&domain::AccountId::personal(&user.id), None),
            &held.id,
            crate::support::c(50),
            now,
        )
        .await
        .unwrap();
    let (released, _) = world.service.reserve_credits(spend("r2")).await.unwrap();
    store
        .release(
            (&domain::AccountId::personal(&user.id), None),
            &released.id,
            now,
        )
        .await
        .unwrap();
    let off = application::ports::EndpointChange {
        enabled: Some(false),
        ..Default::default()
    };
    store
        .update_endpoint("we_metered", &off, now)
        .await
        .unwrap();
    world.service.consume_credits(spend("m4")).await.unwrap();
    let told = told_since(store, before).await;
    assert_eq!(
        kinds(&told),
        [
            "credits.granted",
            "credits.consumed",
            "credits.reserved",
            "credits.settled",
            "credits.reserved",
            "credits.released",
        ]
    );
    let consumed = &told[1].1["data"];
    assert_eq!(consumed["userId"], user.id.as_str());
    assert_eq!(consumed["transaction"]["type"], "consumption");
    assert_eq!(consumed["transaction"]["feature"], "chat");
    let settled = &told[3].1["data"];
    assert_eq!(settled["reservation"]["id"], held.id.as_str());
    assert_eq!(settled["reservation"]["status"], "settled");
    assert_eq!(settled["reservation"]["charged"], "0.50");
    assert_eq!(told[5].1["data"]["reservation"]["status"], "released");
    assert_eq!(
        told[5].1["data"]["transaction"]["type"],
        "reservation_release"
    );
}

/// A team created, a member added, promoted and removed: `account.member_added` (the owner,
/// then the member), `account.member_role_changed`, `account.member_removed`.
async fn team_changes_tell_member_events(store: &TestStore) {
    use application::ports::{MemberCommand, NewTeam, TeamStore};
    use domain::{AccountId, MemberChange, MemberRole};
    let owner = crate::support::user(store, "team-owner").await;
    let member = crate::support::user(store, "team-member").await;
    let team = AccountId::new("team_told").unwrap();
    let now = at_days(40);
    let new = NewTeam {
        id: team.clone(),
        name: "Told".into(),
        owner: owner.clone(),
        now,
    };
    store.create_team(&new).await.unwrap();
    for change in [
        MemberChange::Add(MemberRole::Member),
        MemberChange::SetRole(MemberRole::Admin),
        MemberChange::Remove,
    ] {
        let command = MemberCommand {
            account: team.clone(),
            actor: owner.clone(),
            target: member.clone(),
            changes: vec![change],
            seats: None,
            now,
        };
        store
            .change_member(&command, application::host_events::member_changed)
            .await
            .unwrap();
    }
    // One seat, taken by the owner: adding the member again is refused, and told.
    let full = MemberCommand {
        account: team.clone(),
        actor: owner.clone(),
        target: member.clone(),
        changes: vec![MemberChange::Add(MemberRole::Member)],
        seats: Some(1),
        now,
    };
    assert!(
        store
            .change_member(&full, application::host_events::member_changed)
            .await
            .is_err()
    );
}

pub async fn every_change_tells_its_event_once_in_its_own_transaction(store: &TestStore) {
    let world = World::new(store);
    orders_tell_paid_refunded_mismatch_and_failed(&world, store).await;
    a_subscription_tells_its_lifecycle(&world, store).await;
    a_confirmed_switch_tells_the_plan_change(&world, store).await;
    the_ledger_tells_grants_debits_and_expiries(&world, store).await;
    spends_tell_each_balance_crossing_once(&world, store).await;
    a_spend_reaching_a_limit_tells_it(&world, store).await;
    balance_thresholds_tell_each_crossing_once(&world, store).await;
    a_threshold_on_a_limit_follows_the_limit(&world, store).await;
    a_refund_that_ends_access_tells_the_entitlements_gone(&world, store).await;
    consumption_is_told_only_while_an_endpoint_opts_in(&world, store).await;
    unpaid_orders_tell_cancelled_and_expired(&world, store).await;
    entitlement_changes_are_told_once_each(&world, store).await;
    team_changes_tell_member_events(store).await;
    a_redemption_tells_promo_code_redeemed(&world, store).await;
    automatic_top_up_tells_each_step(&world, store).await;
    let events = all_events(store).await;
    let mut ids: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), events.len(), "event ids are unique");
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    for kind in HostEventKind::ALL {
        assert!(events.iter().any(|e| e.kind == kind), "{kind} was told");
    }
    let only = store
        .events_after(Some(events[1].id), 1_000, &[HostEventKind::CreditsGranted])
        .await
        .unwrap()
        .events;
    assert!(only.iter().all(|e| e.kind == HostEventKind::CreditsGranted));
    assert!(only.iter().all(|e| e.id > events[1].id));
    assert_eq!(
        store.events_after(None, 3, &[]).await.unwrap().events.len(),
        3
    );
}

/// A promo code's redemption tells `promo_code.redeemed` and its grant's `credits.granted`
/// (promotional) once; a retry with the same key answers with it and tells nothing more, and a
/// redemption past the code's limit writes nothing.
async fn a_redemption_tells_promo_code_redeemed(world: &World, store: &TestStore) {
    use application::use_cases::admin_console::PromoDraft;
    let admin = world.user("promo-admin@example.com").await;
    let draft = PromoDraft {
        code: "spring-10".into(),
        credits: "10".into(),
        max_redemptions: Some(1),
        ..PromoDraft::default()
    };
    let code = world
        .service
        .create_promo_code(&admin, &draft)
        .await
        .unwrap();
    let (first, second) = (
        world.user("promo-1@example.com").await,
        world.user("promo-2@example.com").await,
    );
    let before = all_events(store).await.len();
    let redeemed = world
        .service
        .redeem_promo_code(&first, "Spring-10", None)
        .await
        .unwrap();
    assert!(!redeemed.replayed);
    let again = world
        .service
        .redeem_promo_code(&first, "SPRING-10", None)
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.redemption.id, redeemed.redemption.id);
    let refused = world
        .service
        .redeem_promo_code(&second, "SPRING-10", None)
        .await;
    assert!(
        matches!(
            refused,
            Err(application::use_cases::promo_codes::RedeemError::Refused(
                domain::PromoRefusal::Exhausted
            ))
        ),
        "{refused:?}"
    );
    let told = told_since(store, before).await;
    let of = |kind| {
        let found: Vec<&Value> = told
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, p)| p)
            .collect();
        assert_eq!(found.len(), 1, "{kind}: {told:?}");
        found[0].clone()
    };
    assert_eq!(told.len(), 2, "{told:?}");
    let granted = of(HostEventKind::CreditsGranted);
    assert_eq!(granted["data"]["transaction"]["category"], "promotional");
    assert_eq!(
        of(HostEventKind::PromoCodeRedeemed)["data"]["code"],
        "SPRING-10"
    );
    let account = domain::AccountId::personal(&first.id);
    assert_eq!(
        store.balance(&account).await.unwrap(),
        crate::support::c(1_000)
    );
    let stored = world.service.promo_code_detail(&code.id).await.unwrap();
    assert_eq!(stored.0.redeemed, 1);
    assert_eq!(stored.1.len(), 1);
}

/// Automatic top-up through the store: a card saved with consent, a spend below the threshold
/// asks for a top-up (`requested`), its charge is paid by the provider's event (`succeeded`), the
/// next one needs the buyer (`authentication_required`), whose checkout then fails (`failed`),
/// and removing the card turns the rule off (`disabled`).
async fn automatic_top_up_tells_each_step(world: &World, store: &TestStore) {
    use application::ports::OffSessionOutcome;
    use application::use_cases::auto_top_up::SetAutoTopUp;
    let accepted = OffSessionOutcome::Accepted {
        provider_reference: Some("pi_1".into()),
    };
    world.fake.answer_charges(&[
        OffSessionOutcome::Declined {
            reason: "card_declined".into(),
        },
        accepted.clone(),
        accepted,
        OffSessionOutcome::AuthenticationRequired,
        OffSessionOutcome::AuthenticationRequired,
    ]);
    let user = world.user("topup@example.com").await;
    let account = domain::AccountId::personal(&user.id);
    let request = InitiatePayment {
        save_method: true,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("credits-100").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let bought = world.service.initiate_payment(request).await.unwrap();
    let order = bought.order.order.id().clone();
    let paid = |order: &OrderId| PaymentEvent::PaymentSucceeded {
        order: by_id(order),
        amount: usd(1000),
        occurred_at: at_days(1),
    };
    world.deliver("topup-paid", paid(&order)).await;
    let method = application::ports::SavedMethod {
        customer_ref: "cus_1".into(),
        method_ref: "pm_1".into(),
        brand: Some("visa".into()),
        last4: Some("4242".into()),
        wallet_account: None,
    };
    let saved = PaymentEvent::PaymentMethodSaved {
        order: by_id(&order),
        method,
        occurred_at: at_days(1),
    };
    assert_eq!(world.deliver("topup-saved", saved).await, "applied");
    let rule = SetAutoTopUp {
        user: user.id.clone(),
        account: account.clone(),
        enabled: true,
        threshold: crate::support::c(500_000),
        plan_id: domain::PlanId::new("credits-100").unwrap(),
        max_per_month: 5,
        max_amount_per_month: None,
        method_id: None,
    };
    let overview = world.service.set_auto_top_up(rule.clone()).await.unwrap();
    let method_id = overview.methods[0].id.clone();
    assert_eq!(overview.record.unwrap().method.unwrap().id, method_id);
    let before = all_events(store).await.len();
    let spend = |key: &str| ConsumeCredits {
        user_id: user.id.clone(),
        account_id: None,
        usage: UsageRequest {
            feature: None,
            model: Some("big".into()),
            tokens: Some(500),
            breakdown: None,
        },
        idempotency_key: IdempotencyKey::new(key).unwrap(),
        api_key_id: None,
    };
    // A decline cools the rule off; its owner setting it again ends the cool-off.
    world.service.consume_credits(spend("tu0")).await.unwrap();
    let pass = world.service.run_top_ups().await.unwrap();
    assert_eq!(pass.declined, 1, "{pass:?}");
    let declined = world.service.top_up_overview(&account).await.unwrap();
    let state = declined.record.unwrap().state;
    assert_eq!((state.declines, state.month_count), (1, 0));
    assert!(state.cool_off_until.is_some());
    let again = world.service.set_auto_top_up(rule).await.unwrap();
    assert_eq!(again.record.unwrap().state.cool_off_until, None);
    world.service.consume_credits(spend("tu1")).await.unwrap();
    let pass = world.service.run_top_ups().await.unwrap();
    assert_eq!(pass.charged, 1, "{pass:?}");
    // No event within ten minutes: the charge is sent again, under the same key.
    world.service.clock().advance_ms(11 * 60_000);
    let pass = world.service.run_top_ups().await.unwrap();
    assert_eq!(pass.retried, 1, "{pass:?}");
    let charges = world.fake.charges();
    let keys: Vec<&str> = charges
        .iter()
        .rev()
        .take(2)
        .map(|c| c.idempotency_key.as_str())
        .collect();
    assert_eq!(keys[0], keys[1], "{charges:?}");
    let history = world
        .service
        .top_up_overview(&account)
        .await
        .unwrap()
        .history;
    let top_up_order = history[0].order_id.clone().expect("the top-up's order");
    world
        .deliver("topup-charge-paid", paid(&top_up_order))
        .await;
    world.service.consume_credits(spend("tu2")).await.unwrap();
    let pass = world.service.run_top_ups().await.unwrap();
    assert_eq!(pass.authentication, 1, "{pass:?}");
    // The buyer never finishes: the reconciler expires the order, and the top-up fails with it.
    world.service.clock().advance_ms(3 * 3_600_000);
    world.service.reconcile(reconcile_settings()).await.unwrap();
    let history = world
        .service
        .top_up_overview(&account)
        .await
        .unwrap()
        .history;
    assert_eq!(history[0].status, domain::TopUpStatus::Failed);
    assert_eq!(history[0].reason.as_deref(), Some("order expired"));
    world
        .service
        .remove_payment_method(&user.id, &account, &method_id)
        .await
        .unwrap();
    let told = told_since(store, before).await;
    let tops: Vec<&str> = kinds(&told)
        .into_iter()
        .filter(|k| k.starts_with("auto_top_up."))
        .collect();
    assert_eq!(
        tops,
        [
            "auto_top_up.requested",
            "auto_top_up.failed",
            "auto_top_up.requested",
            "auto_top_up.succeeded",
            "auto_top_up.requested",
            "auto_top_up.authentication_required",
            "auto_top_up.failed",
            "auto_top_up.disabled",
        ],
        "{told:?}"
    );
    assert_eq!(
        store.balance(&account).await.unwrap(),
        crate::support::c(20_000 - 300),
        "two packs, three spends of 1.00: only the paid top-up granted"
    );
}

/// A refund of a renewal not seen yet, kept while the renewal itself landed with the reports it
/// had read before: the store finds the charge whose kept reports add up to more than it
/// applied, and the reconciler applies them once (and tells the clawback).
pub async fn a_refund_kept_while_its_charge_landed_is_applied_by_the_reconciler(store: &TestStore) {
    let world = World::new(store);
    let subscriber = world.user("raced@example.com").await;
    let order = world.order(&subscriber, "pro-monthly").await;
    let period = |k: i64| BillingPeriod::new(at_days(30 * k), at_days(30 * k + 30)).unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&order),
        provider_subscription_id: "sub_r".into(),
        period: period(0),
        amount: Some(usd(999)),
        charge_ref: Some("in_r0".into()),
        occurred_at: at_days(0),
    };
    assert_eq!(world.deliver("raced-act", activated).await, "applied");
    let renewed = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_r".into(),
        period: period(1),
        amount: usd(999),
        charge_ref: Some("in_r1".into()),
        occurred_at: at_days(30),
    };
    assert_eq!(world.deliver("raced-renew", renewed).await, "applied");
    assert!(
        store
            .charges_with_unapplied_refunds(10)
            .await
            .unwrap()
            .is_empty()
    );
    let late = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: application::ports::InboxEntry {
            provider: ProviderId::CardGateway,
            event_id: "raced-refund".into(),
            event_type: "charge.refunded".into(),
            payload: String::new(),
            outcome: domain::EventOutcome::RefundKept,
            detail: None,
            received_at: at_days(31),
            user_id: None,
        },
        order: None,
        subscription: None,
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: Some(RefundRecord {
            provider: ProviderId::CardGateway,
            key: "total:in_r1:999".into(),
            target: RefundTarget::Charge("in_r1".into()),
            refund: domain::KeptRefund {
                form: domain::RefundForm::Total,
                amount: usd(999),
            },
            received_at: at_days(31),
        }),
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&late).await.unwrap();
    let found = store.charges_with_unapplied_refunds(10).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].charge_ref.as_deref(), Some("in_r1"));
    let before = world
        .service
        .balance(&domain::AccountId::personal(&subscriber.id))
        .await
        .unwrap();
    let settings = ReconcileSettings {
        pending_after_ms: 60_000,
        batch: 10,
        lease_ms: 30_000,
    };
    let report = world.service.reconcile(settings).await.unwrap();
    assert_eq!(report.kept_refunds_applied, 1);
    let after = world
        .service
        .balance(&domain::AccountId::personal(&subscriber.id))
        .await
        .unwrap();
    assert!(
        after < before,
        "the second period's credits were taken back"
    );
    assert!(
        store
            .charges_with_unapplied_refunds(10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = world.service.reconcile(settings).await.unwrap();
    assert_eq!(again.kept_refunds_applied, 0);
    assert_eq!(
        world
            .service
            .balance(&domain::AccountId::personal(&subscriber.id))
            .await
            .unwrap(),
        after
    );
}

pub async fn a_change_that_rolls_back_tells_nothing(store: &TestStore) {
    let world = World::new(store);
    let user = world.user("rollback@example.com").await;
    let order = world.order(&user, "credits-100").await;
    let record = store.find_order(&order).await.unwrap().unwrap();
    let missing = Subscription::restore(domain::SubscriptionParts {
        id: SubscriptionId::new("sub_missing").unwrap(),
        user_id: user.id.clone(),
        account: None,
        plan_id: domain::PlanId::new("pro-monthly").unwrap(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_missing".into(),
        status: domain::SubscriptionStatus::Active,
        current_period: BillingPeriod::new(at_days(0), at_days(30)).unwrap(),
        renewal: domain::RenewalIntent::Renews,
        last_event_at: at_days(0),
        sold_terms: None,
    });
    let mut paid = record.order.clone();
    paid.mark_paid(at_days(0)).unwrap();
    let mut command = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: application::ports::InboxEntry {
            provider: ProviderId::CardGateway,
            event_id: "rolls-back".into(),
            event_type: "test.event".into(),
            payload: String::new(),
            outcome: domain::EventOutcome::Applied,
            detail: None,
            received_at: at_days(0),
            user_id: None,
        },
        order: Some(OrderChange {
            before: record.order.clone(),
            expected_version: record.version,
            after: paid,
            mismatch: None,
        }),
        subscription: Some(SubscriptionChange::Update {
            before: missing.clone(),
            subscription: missing,
        }),
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    // What the service would tell with it (the order's `order.paid`) is rolled back too.
    application::host_events::payment_event_told(
        &mut command,
        0,
        application::ports::MismatchNotice::Tell,
    );
    assert!(!command.told.is_empty());
    let refused = store.apply_payment_event(&command).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
    assert!(all_events(store).await.is_empty(), "nothing was announced");
    let still = store.find_order(&order).await.unwrap().unwrap();
    assert_eq!(*still.order.status(), OrderStatus::Pending);
}

pub async fn old_events_are_purged_in_bounded_batches(store: &TestStore) {
    let world = World::new(store);
    let user = world.user("purge@example.com").await;
    for (i, day) in [1, 2, 3, 10].into_iter().enumerate() {
        let grant = GrantCommand {
            account_id: domain::AccountId::personal(&user.id),
            amount: crate::support::c(100),
            source: GrantSource::Admin(format!("purge-{i}")),
            expires_at: None,
            now: at_days(day),
        };
        store.grant(&grant).await.unwrap();
    }
    assert_eq!(store.purge_events(at_days(5), 2).await.unwrap(), 2);
    assert_eq!(store.purge_events(at_days(5), 2).await.unwrap(), 1);
    assert_eq!(store.purge_events(at_days(5), 2).await.unwrap(), 0);
    let left = all_events(store).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].occurred_at, at_days(10));
}

/// Every id the outbox handed out stays at or below its high-water mark after a purge took every
/// event, and a forged far-off id lies above it.
pub async fn the_issued_high_water_mark_outlives_a_purge(store: &TestStore) {
    let world = World::new(store);
    let user = world.user("issued@example.com").await;
    for i in 0..3 {
        let grant = GrantCommand {
            account_id: domain::AccountId::personal(&user.id),
            amount: crate::support::c(100),
            source: GrantSource::Admin(format!("issued-{i}")),
            expires_at: None,
            now: at_days(1),
        };
        store.grant(&grant).await.unwrap();
    }
    let largest = all_events(store).await.iter().map(|e| e.id).max().unwrap();
    assert!(store.issued_through().await.unwrap() >= largest);
    assert!(store.purge_events(at_days(5), 100).await.unwrap() >= 3);
    assert!(all_events(store).await.is_empty());
    let issued = store.issued_through().await.unwrap();
    assert!(issued >= largest, "{issued} < {largest}");
    assert!(issued < i64::MAX, "a forged cursor lies above it");
}

/// SQLite keeps no index by type (migration step 19): a read filtered by type looks at 5,000
/// events at most and says how far it looked, so a reader's cursor moves on past events of other
/// types; PostgreSQL finds the type through its index in one read.
pub async fn a_read_by_type_looks_at_a_bounded_window(store: &TestStore) {
    const WINDOW: i64 = 5_000;
    let fill = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {}) \
         INSERT INTO events (event_id, event_type, payload, occurred_at) \
         SELECT 'evt_scan_' || i, 'order.paid', '{{}}', i FROM n",
        WINDOW + 3
    );
    let backend = store.connection().get_database_backend();
    store.connection().execute_unprepared(&fill).await.unwrap();
    let last = "INSERT INTO events (event_id, event_type, payload, occurred_at) \
                VALUES ('evt_scan_last', 'credits.granted', '{}', 1)";
    store.connection().execute_unprepared(last).await.unwrap();
    let kinds = [HostEventKind::CreditsGranted];
    let first = store.events_after(None, 10, &kinds).await.unwrap();
    let found = if backend == sea_orm::DbBackend::Sqlite {
        assert!(first.events.is_empty(), "{:?}", first.events);
        let looked = first.looked_through.expect("stopped at the window's end");
        let nth = format!(
            "SELECT id FROM events ORDER BY id LIMIT 1 OFFSET {}",
            WINDOW - 1
        );
        let row = store
            .connection()
            .query_one_raw(sea_orm::Statement::from_string(backend, nth))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(looked, row.try_get::<i64>("", "id").unwrap());
        let second = store.events_after(Some(looked), 10, &kinds).await.unwrap();
        assert_eq!(second.looked_through, None, "the rest fits one window");
        second.events
    } else {
        assert_eq!(first.looked_through, None);
        // Other tests' transactions can hold the feed back for a while (see `all_events`).
        let mut read = first.events;
        for _ in 0..200 {
            if !read.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            read = store.events_after(None, 10, &kinds).await.unwrap().events;
        }
        read
    };
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].event_id, "evt_scan_last");
    // Without a type, a read returns what it is asked for.
    let plain = store.events_after(None, 7, &[]).await.unwrap();
    assert_eq!((plain.events.len(), plain.looked_through), (7, None));
}

contract_tests!(
    every_change_tells_its_event_once_in_its_own_transaction,
    a_read_by_type_looks_at_a_bounded_window,
    a_refund_kept_while_its_charge_landed_is_applied_by_the_reconciler,
    a_change_that_rolls_back_tells_nothing,
    old_events_are_purged_in_bounded_batches,
    the_issued_high_water_mark_outlives_a_purge,
    a_user_from_before_the_release_is_told_what_they_held,
);

/// PostgreSQL hands ids out before commit: an event written by a transaction still open holds
/// back every later event, until it commits.
mod postgres_visibility {
    use super::*;

    async fn insert<C: ConnectionTrait>(conn: &C, event_id: &str) {
        let sql = format!(
            "INSERT INTO events (event_id, event_type, user_id, payload, occurred_at) \
             VALUES ('{event_id}', 'order.paid', NULL, '{{}}', 1)"
        );
        conn.execute_unprepared(&sql).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_transactions_event_holds_back_every_later_one_until_it_commits() {
        let Some(store) = crate::support::postgres_with(4, store::GroupCommit::off()).await else {
            return;
        };
        insert(store.connection(), "evt_before").await;
        let ids = |events: Vec<StoredEvent>| -> Vec<String> {
            events.into_iter().map(|e| e.event_id).collect()
        };
        assert_eq!(ids(all_events(&store).await), ["evt_before"]);
        let open = store.connection().begin().await.unwrap();
        insert(&open, "evt_open").await;
        insert(store.connection(), "evt_after").await;
        // Committed, with a larger id than the open transaction's event: held back meanwhile.
        for _ in 0..5 {
            assert_eq!(readable_now(&store).await, ["evt_before"]);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        open.commit().await.unwrap();
        assert_eq!(
            ids(all_events(&store).await),
            ["evt_before", "evt_open", "evt_after"]
        );
        store.cleanup().await;
    }

    /// The interleaving a plain sequence got wrong: a transaction that started first writes its
    /// event last and commits while a younger one, which wrote earlier, is still open. A reader
    /// that follows its cursor must still be given the younger one's event once it commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cursor_never_passes_an_event_of_a_younger_transaction_still_open() {
        let Some(store) = crate::support::postgres_with(4, store::GroupCommit::off()).await else {
            return;
        };
        let read_after = |after: Option<i64>| {
            let store = &store;
            async move { store.events_after(after, 100, &[]).await.unwrap().events }
        };
        let older = store.connection().begin().await.unwrap();
        // The older transaction's first write (it takes its transaction id now).
        older
            .execute_unprepared("SELECT pg_current_xact_id()")
            .await
            .unwrap();
        let younger = store.connection().begin().await.unwrap();
        insert(&younger, "evt_younger").await;
        insert(&older, "evt_older").await;
        older.commit().await.unwrap();
        // Follow the feed as a reader does, keeping the id of the last event read, until `want`
        // has been read (other tests' transactions on the same server can hold the feed back a
        // moment) or five seconds have passed.
        let mut cursor = None;
        let mut seen = Vec::new();
        let mut follow_until = async |want: &str, seen: &mut Vec<String>| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !seen.iter().any(|s| s == want) && std::time::Instant::now() < deadline {
                for event in read_after(cursor).await {
                    cursor = Some(event.id);
                    seen.push(event.event_id);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        follow_until("evt_older", &mut seen).await;
        assert_eq!(
            seen,
            ["evt_older"],
            "the older transaction's event is readable"
        );
        younger.commit().await.unwrap();
        follow_until("evt_younger", &mut seen).await;
        seen.sort();
        assert_eq!(seen, ["evt_older", "evt_younger"]);
        store.cleanup().await;
    }
}
