//! Orders: idempotent creation, checkout, compare-and-set transitions, pages, claims.

use application::pagination::PageRequest;
use application::ports::{
    CheckoutRecord, CheckoutTarget, CreateOrderOutcome, OrderRecord, OrderRepository, StoreError,
};
use domain::{
    AccountId, Currency, Duration, Money, Order, OrderStatus, PlanId, PlanSnapshot, PlanType,
    ProviderId,
};

use crate::support::{TestStore, contract_tests, key, oid, order, t, user};
use application::ports::Writes;

fn record(order: Order) -> OrderRecord {
    OrderRecord {
        updated_at: order.created_at(),
        order,
        checkout: None,
        mismatch: None,
        version: 0,
        charge_reference: None,
    }
}

async fn creating_with_a_key_creates_replays_or_refuses(store: &TestStore) {
    let u = user(store, "u1").await;
    let first = order("o1", &u, 10);
    let k = key("idem-1", "hash-a");
    assert_eq!(
        store.create_order(&first, Some(&k)).await.unwrap(),
        CreateOrderOutcome::Created
    );
    let retry = order("o2", &u, 11);
    assert_eq!(
        store.create_order(&retry, Some(&k)).await.unwrap(),
        CreateOrderOutcome::Replayed(record(first.clone()))
    );
    // The same answers, read without writing.
    assert_eq!(
        store.earlier_order(&u, &k).await.unwrap(),
        Some(CreateOrderOutcome::Replayed(record(first.clone())))
    );
    assert_eq!(
        store
            .earlier_order(&u, &key("idem-1", "hash-b"))
            .await
            .unwrap(),
        Some(CreateOrderOutcome::KeyConflict)
    );
    assert_eq!(
        store
            .earlier_order(&u, &key("idem-new", "hash-a"))
            .await
            .unwrap(),
        None
    );
    let other = key("idem-1", "hash-b");
    assert_eq!(
        store.create_order(&retry, Some(&other)).await.unwrap(),
        CreateOrderOutcome::KeyConflict
    );
    assert_eq!(
        store.find_order(&oid("o2")).await.unwrap(),
        None,
        "a replay creates nothing"
    );
    let other_user = user(store, "u2").await;
    let theirs = order("o3", &other_user, 12);
    assert_eq!(
        store.create_order(&theirs, Some(&k)).await.unwrap(),
        CreateOrderOutcome::Created,
        "keys are per user"
    );
}

async fn orders_round_trip_and_a_duplicate_id_conflicts(store: &TestStore) {
    let u = user(store, "u1").await;
    let lifetime = Order::place(
        oid("o1"),
        u.clone(),
        ProviderId::CardGateway,
        PlanSnapshot {
            bonus: None,
            plan_id: PlanId::new("lifetime").unwrap(),
            plan_type: PlanType::OneTime,
            price: Money::from_minor(19_900, Currency::Jpy).unwrap(),
            credits: None,
            duration: Some(Duration::Lifetime),
            entitlements: None,
        },
        t(10),
        60_000,
    );
    store.create_order(&lifetime, None).await.unwrap();
    assert_eq!(
        store.find_order(&oid("o1")).await.unwrap(),
        Some(record(lifetime.clone()))
    );
    assert!(matches!(
        store.create_order(&lifetime, None).await,
        Err(StoreError::Conflict(_))
    ));
    let orphan = order("o2", &domain::UserId::new("ghost").unwrap(), 10);
    assert!(
        store.create_order(&orphan, None).await.is_err(),
        "orders need a user"
    );
}

async fn checkout_is_attached_to_pending_orders_only(store: &TestStore) {
    let u = user(store, "u1").await;
    store
        .create_order(&order("o1", &u, 10), None)
        .await
        .unwrap();
    store
        .create_order(&order("o2", &u, 10), None)
        .await
        .unwrap();
    let checkout = CheckoutRecord {
        provider_reference: Some("cs_1".into()),
        target: CheckoutTarget::QrCode("weixin://x".into()),
    };
    store
        .attach_checkout(&oid("o1"), &checkout, t(15))
        .await
        .unwrap();
    let found = store
        .find_order_by_reference(ProviderId::CardGateway, "cs_1")
        .await
        .unwrap()
        .expect("by reference");
    assert_eq!(
        (found.order.id().as_str(), found.checkout, found.updated_at),
        ("o1", Some(checkout.clone()), t(15))
    );
    assert_eq!(
        store
            .find_order_by_reference(ProviderId::MorA, "cs_1")
            .await
            .unwrap(),
        None
    );
    let taken = store.attach_checkout(&oid("o2"), &checkout, t(16)).await;
    assert!(
        matches!(taken, Err(StoreError::Conflict(_))),
        "a provider reference names one order: {taken:?}"
    );
    assert!(matches!(
        store.attach_checkout(&oid("o9"), &checkout, t(16)).await,
        Err(StoreError::NotFound)
    ));
    store
        .transition_order(
            crate::events::order_change(
                &oid("o2"),
                &u,
                0,
                OrderStatus::Pending,
                OrderStatus::Cancelled,
            ),
            t(17),
            &[],
        )
        .await
        .unwrap();
    let redirect = CheckoutRecord {
        provider_reference: None,
        target: CheckoutTarget::Redirect("https://x".into()),
    };
    assert!(matches!(
        store.attach_checkout(&oid("o2"), &redirect, t(18)).await,
        Err(StoreError::Conflict(_))
    ));
}

async fn transitions_are_compare_and_set_and_every_status_round_trips(store: &TestStore) {
    let u = user(store, "u1").await;
    let o = order("o1", &u, 10);
    store.create_order(&o, None).await.unwrap();
    let paid = OrderStatus::Paid { paid_at: t(20) };
    store
        .transition_order(
            crate::events::order_change(o.id(), &u, 0, OrderStatus::Pending, (paid).clone()),
            t(20),
            &[],
        )
        .await
        .unwrap();
    // The version read before that change is stale now.
    assert!(matches!(
        store
            .transition_order(
                crate::events::order_change(o.id(), &u, 0, OrderStatus::Pending, (paid).clone()),
                t(21),
                &[],
            )
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .transition_order(
                crate::events::order_change(
                    &oid("nope"),
                    &u,
                    0,
                    OrderStatus::Pending,
                    (paid).clone()
                ),
                t(21),
                &[],
            )
            .await,
        Err(StoreError::NotFound)
    ));
    let partial = OrderStatus::PartiallyRefunded {
        paid_at: t(20),
        refunded: Money::from_minor(300, Currency::Usd).unwrap(),
    };
    let full = OrderStatus::Refunded { paid_at: t(20) };
    for (version, to) in [(1, &partial), (2, &full)] {
        store
            .transition_order(
                crate::events::order_change(
                    o.id(),
                    &u,
                    version,
                    OrderStatus::Pending,
                    (to).clone(),
                ),
                t(30),
                &[],
            )
            .await
            .unwrap();
        let found = store.find_order(o.id()).await.unwrap().unwrap();
        assert_eq!((found.order.status(), found.updated_at), (to, t(30)));
    }
    let failed = order("o2", &u, 10);
    store.create_order(&failed, None).await.unwrap();
    let reason = OrderStatus::Failed {
        reason: "card declined".into(),
    };
    store
        .transition_order(
            crate::events::order_change(failed.id(), &u, 0, OrderStatus::Pending, (reason).clone()),
            t(40),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .find_order(failed.id())
            .await
            .unwrap()
            .unwrap()
            .order
            .status(),
        &reason
    );
}

async fn orders_are_listed_newest_first_in_pages(store: &TestStore) {
    let u = user(store, "u1").await;
    let other = user(store, "u2").await;
    for i in 0..5 {
        store
            .create_order(&order(&format!("o{i}"), &u, 100 + i), None)
            .await
            .unwrap();
    }
    store
        .create_order(&order("same-time-b", &u, 104), None)
        .await
        .unwrap();
    store
        .create_order(&order("theirs", &other, 999), None)
        .await
        .unwrap();
    let first = store
        .list_orders(
            &AccountId::personal(&u),
            PageRequest::new(Some(1), Some(4)).unwrap(),
        )
        .await
        .unwrap();
    let ids: Vec<&str> = first.items.iter().map(|r| r.order.id().as_str()).collect();
    assert_eq!(
        (ids, first.total, first.total_pages()),
        (vec!["same-time-b", "o4", "o3", "o2"], 6, 2)
    );
    let second = store
        .list_orders(
            &AccountId::personal(&u),
            PageRequest::new(Some(2), Some(4)).unwrap(),
        )
        .await
        .unwrap();
    let ids: Vec<&str> = second.items.iter().map(|r| r.order.id().as_str()).collect();
    assert_eq!(ids, vec!["o1", "o0"]);
    let empty = store
        .list_orders(
            &AccountId::personal(&u),
            PageRequest::new(Some(9), Some(4)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!((empty.items.len(), empty.total), (0, 6));
}

async fn the_reconciler_claims_pending_orders_once_per_lease(store: &TestStore) {
    let u = user(store, "u1").await;
    for i in 0..4 {
        store
            .create_order(&order(&format!("o{i}"), &u, 100 + i), None)
            .await
            .unwrap();
    }
    store
        .create_order(&order("young", &u, 500), None)
        .await
        .unwrap();
    store
        .transition_order(
            crate::events::order_change(
                &oid("o1"),
                &u,
                0,
                OrderStatus::Pending,
                OrderStatus::Expired,
            ),
            t(200),
            &[],
        )
        .await
        .unwrap();
    let claimed = store
        .claim_pending_orders(t(400), 2, t(1000), 60_000)
        .await
        .unwrap();
    let ids: Vec<&str> = claimed.iter().map(|r| r.order.id().as_str()).collect();
    assert_eq!(
        ids,
        vec!["o0", "o2"],
        "oldest pending first, never expired or young ones"
    );
    let next = store
        .claim_pending_orders(t(400), 10, t(2000), 60_000)
        .await
        .unwrap();
    let ids: Vec<&str> = next.iter().map(|r| r.order.id().as_str()).collect();
    assert_eq!(
        ids,
        vec!["o3"],
        "claimed orders wait for their lease to end"
    );
    let after_lease = store
        .claim_pending_orders(t(400), 10, t(61_001), 60_000)
        .await
        .unwrap();
    assert_eq!(
        after_lease.len(),
        2,
        "o0 and o2 are claimable again after the lease"
    );
}

contract_tests!(
    creating_with_a_key_creates_replays_or_refuses,
    orders_round_trip_and_a_duplicate_id_conflicts,
    checkout_is_attached_to_pending_orders_only,
    transitions_are_compare_and_set_and_every_status_round_trips,
    orders_are_listed_newest_first_in_pages,
    the_reconciler_claims_pending_orders_once_per_lease,
);
