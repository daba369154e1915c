//! Entitlements kept with what was sold: an order's plan snapshot keeps its plan's
//! entitlements (NULL for orders placed before they were kept), a dynamic plan keeps its own,
//! and a subscription finds the order that started it.

use std::collections::BTreeMap;

use application::ports::{
    Listing, OrderRepository, PlanRepository, StoreError, StoredPlan, SubscriptionRepository,
};
use domain::entitlements::{EntitlementDraft, EntitlementKey, EntitlementValue, Entitlements};
use domain::{
    Currency, Duration, Money, Order, Plan, PlanDraft, PlanId, PlanSnapshot, PlanText, PlanType,
    ProviderId, ProviderRefs, SubscriptionId,
};

use crate::support::{TestStore, contract_tests, oid, t, user};

fn seats_and_export() -> Entitlements {
    Entitlements::from_pairs([
        (
            EntitlementKey::new("seats").unwrap(),
            EntitlementValue::Limit(5),
        ),
        (
            EntitlementKey::new("export").unwrap(),
            EntitlementValue::Enabled,
        ),
    ])
}

fn snapshot(plan_id: &str, entitlements: Option<Entitlements>) -> PlanSnapshot {
    PlanSnapshot {
        bonus: None,
        plan_id: PlanId::new(plan_id).unwrap(),
        plan_type: PlanType::Recurring,
        price: Money::from_minor(999, Currency::Usd).unwrap(),
        credits: None,
        duration: Duration::from_months_value(1),
        entitlements,
    }
}

async fn an_order_keeps_the_entitlements_it_was_sold_with(store: &TestStore) {
    let u = user(store, "u1").await;
    let sold = Order::place(
        oid("o1"),
        u.clone(),
        ProviderId::CardGateway,
        snapshot("pro", Some(seats_and_export())),
        t(10),
        60_000,
    );
    store.create_order(&sold, None).await.unwrap();
    let found = store.find_order(&oid("o1")).await.unwrap().unwrap();
    assert_eq!(found.order.plan().entitlements, Some(seats_and_export()));

    let none_declared = Order::place(
        oid("o2"),
        u.clone(),
        ProviderId::CardGateway,
        snapshot("basic", Some(Entitlements::none())),
        t(11),
        60_000,
    );
    store.create_order(&none_declared, None).await.unwrap();
    let found = store.find_order(&oid("o2")).await.unwrap().unwrap();
    assert_eq!(found.order.plan().entitlements, Some(Entitlements::none()));

    // An order placed before orders kept entitlements reads back as "not kept".
    store
        .raw("UPDATE orders SET plan_entitlements = NULL WHERE id = 'o2'")
        .await;
    let found = store.find_order(&oid("o2")).await.unwrap().unwrap();
    assert_eq!(found.order.plan().entitlements, None);
}

async fn stored_entitlements_that_break_the_rules_are_corrupt(store: &TestStore) {
    let u = user(store, "u1").await;
    let order = Order::place(
        oid("o1"),
        u,
        ProviderId::CardGateway,
        snapshot("pro", Some(seats_and_export())),
        t(10),
        60_000,
    );
    store.create_order(&order, None).await.unwrap();
    for bad in [
        r#"{"seats":-1}"#,
        r#"{"Seats":1}"#,
        r#"{"x":"yes"}"#,
        "[1]",
        "nope",
    ] {
        store
            .raw(&format!(
                "UPDATE orders SET plan_entitlements = '{bad}' WHERE id = 'o1'"
            ))
            .await;
        assert!(
            matches!(
                store.find_order(&oid("o1")).await,
                Err(StoreError::Corrupt(_))
            ),
            "{bad}"
        );
    }
}

async fn a_dynamic_plan_keeps_its_entitlements(store: &TestStore) {
    let draft = PlanDraft {
        id: "team".into(),
        provider: Some("card_gateway".into()),
        amount: Some("29".parse().unwrap()),
        currency: Some("USD".into()),
        months: Some(1),
        duration_type: Some("recurring".into()),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, "price_team"),
        i18n: [(
            "en".to_owned(),
            PlanText {
                name: "Team".into(),
                ..PlanText::default()
            },
        )]
        .into(),
        entitlements: BTreeMap::from([
            ("seats".to_owned(), EntitlementDraft::Integer(10)),
            ("sso".to_owned(), EntitlementDraft::Flag(true)),
        ]),
        ..PlanDraft::default()
    };
    let stored = StoredPlan {
        plan: Plan::from_draft(&draft).unwrap(),
        listing: Listing {
            sort_order: 0,
            locales: Vec::new(),
        },
    };
    store.create_plan(&stored, t(1)).await.unwrap();
    let found = store
        .find_plan(&PlanId::new("team").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, stored);
    assert_eq!(
        found
            .plan
            .entitlements()
            .get(&EntitlementKey::new("seats").unwrap()),
        Some(EntitlementValue::Limit(10))
    );
}

async fn a_subscription_finds_the_order_that_started_it(store: &TestStore) {
    let u = user(store, "u1").await;
    let order = Order::place(
        oid("o1"),
        u,
        ProviderId::CardGateway,
        snapshot("pro", Some(seats_and_export())),
        t(10),
        60_000,
    );
    store.create_order(&order, None).await.unwrap();
    store
        .raw(
            "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider, \
             provider_subscription_id, status, period_start, period_end, last_event_at, \
             created_at, updated_at) VALUES ('s1', 'u1', 'o1', 'pro', 'card_gateway', 'sub_1', \
             'active', 10, 20, 10, 10, 10), ('s2', 'u1', NULL, 'pro', 'card_gateway', 'sub_2', \
             'active', 10, 20, 10, 10, 10)",
        )
        .await;
    let sid = |id: &str| SubscriptionId::new(id).unwrap();
    let started = store.subscription_order(&sid("s1")).await.unwrap().unwrap();
    assert_eq!(started.order.id(), &oid("o1"));
    assert_eq!(started.order.plan().entitlements, Some(seats_and_export()));
    assert_eq!(store.subscription_order(&sid("s2")).await.unwrap(), None);
    assert_eq!(store.subscription_order(&sid("nope")).await.unwrap(), None);
}

contract_tests!(
    an_order_keeps_the_entitlements_it_was_sold_with,
    stored_entitlements_that_break_the_rules_are_corrupt,
    a_dynamic_plan_keeps_its_entitlements,
    a_subscription_finds_the_order_that_started_it,
);
