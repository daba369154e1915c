//! Many tasks at once on one account or one payment, on a SQLite file (WAL, 8 connections) and on
//! PostgreSQL (16 connections). `Busy` reaching a caller fails these tests.

use std::collections::BTreeSet;

use application::ports::{
    CreditLedger, GrantCommand, GrantSource, LedgerEffect, OrderRepository, PaymentEventOutcome,
    Replay, SpendError, StoreError,
};
use domain::{OrderStatus, ReservationId};
use tokio::task::JoinSet;

use crate::events::payment;
use crate::ledger::reserve_command;
use crate::support::{
    TestStore, assert_ledger_consistent, c, concurrency_tests, consume, grant, oid, order, t, user,
};
use application::ports::Writes;

async fn thirty_two_spends_at_once_never_overdraw(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 10_000, None).await;
    let mut tasks = JoinSet::new();
    for i in 0..32 {
        let (store, u) = ((**store).clone(), u.clone());
        tasks.spawn(async move {
            store
                .consume(&consume(&u, 700, &format!("spend-{i}")))
                .await
        });
    }
    let mut spent = 0;
    while let Some(result) = tasks.join_next().await {
        match result.expect("task") {
            Ok((_, Replay::Fresh)) => spent += 1,
            Err(SpendError::Insufficient { .. }) => {}
            other => panic!("only successes and Insufficient may reach the caller: {other:?}"),
        }
    }
    assert_eq!(spent, 14, "floor(100.00 / 7.00) spends succeed");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(10_000 - 14 * 700)
    );
    assert_ledger_consistent(store, &u).await;
}

async fn eight_deliveries_of_one_payment_grant_once(store: &TestStore) {
    let u = user(store, "u1").await;
    store
        .create_order(&order("o1", &u, 10), None)
        .await
        .unwrap();
    let mut tasks = JoinSet::new();
    for i in 0..8 {
        let (store, u) = ((**store).clone(), u.clone());
        // Four event ids (checkout completed, invoice paid, …), each delivered twice; half of
        // the deliveries also move the order.
        let command = payment(&format!("evt_{}", i % 4), &oid("o1"), &u, i % 2 == 0);
        tasks.spawn(async move { store.apply_payment_event(&command).await });
    }
    let mut written = 0;
    while let Some(result) = tasks.join_next().await {
        match result.expect("task") {
            Ok(PaymentEventOutcome::Applied { ledger }) => {
                written += ledger
                    .iter()
                    .filter(|e| matches!(e, LedgerEffect::Written(_)))
                    .count();
            }
            Ok(PaymentEventOutcome::Duplicate) | Err(StoreError::Conflict(_)) => {}
            Err(other) => {
                panic!("only applied, duplicate or conflict may reach the caller: {other:?}")
            }
        }
    }
    assert_eq!(written, 1, "exactly one grant");
    assert_eq!(store.raw_i64("SELECT COUNT(*) FROM credit_grants").await, 1);
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(10_000)
    );
    let paid = store.find_order(&oid("o1")).await.unwrap().unwrap();
    assert_eq!(*paid.order.status(), OrderStatus::Paid { paid_at: t(50) });
    assert_ledger_consistent(store, &u).await;
}

async fn one_key_sent_by_eight_tasks_spends_once(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 10_000, None).await;
    let mut tasks = JoinSet::new();
    for _ in 0..8 {
        let (store, u) = ((**store).clone(), u.clone());
        tasks.spawn(async move { store.consume(&consume(&u, 700, "the-one-key")).await });
    }
    let mut fresh = 0;
    let mut ids = BTreeSet::new();
    while let Some(result) = tasks.join_next().await {
        let (tx, replay) = result.expect("task").expect("spend or replay");
        fresh += usize::from(replay == Replay::Fresh);
        ids.insert(tx.id);
    }
    assert_eq!((fresh, ids.len()), (1, 1), "one spend, seven replays of it");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(10_000 - 700)
    );
    assert_ledger_consistent(store, &u).await;
}

async fn reconcilers_never_claim_an_order_twice(store: &TestStore) {
    let u = user(store, "u1").await;
    for i in 0..20 {
        store
            .create_order(&order(&format!("o{i:02}"), &u, 100 + i), None)
            .await
            .unwrap();
    }
    let mut tasks = JoinSet::new();
    for _ in 0..4 {
        let store = (**store).clone();
        tasks.spawn(async move {
            store
                .claim_pending_orders(t(1_000), 5, t(2_000), 60_000)
                .await
        });
    }
    let mut claimed = Vec::new();
    while let Some(result) = tasks.join_next().await {
        claimed.extend(
            result
                .expect("task")
                .expect("claim")
                .into_iter()
                .map(|r| r.order.id().clone()),
        );
    }
    let rest = store
        .claim_pending_orders(t(1_000), 20, t(2_001), 60_000)
        .await
        .unwrap();
    claimed.extend(rest.into_iter().map(|r| r.order.id().clone()));
    let distinct: BTreeSet<_> = claimed.iter().collect();
    assert_eq!(
        (claimed.len(), distinct.len()),
        (20, 20),
        "every order claimed exactly once"
    );
}

async fn a_mixed_workload_keeps_the_ledger_exact(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "base", 20_000, None).await;
    let mut tasks = JoinSet::new();
    for i in 0..24_i64 {
        let (store, u) = ((**store).clone(), u.clone());
        tasks.spawn(async move {
            let id = ReservationId::new(format!("r{i}")).unwrap();
            match i % 4 {
                0 => store
                    .consume(&consume(&u, 150, &format!("c{i}")))
                    .await
                    .map(drop),
                1 => {
                    store
                        .reserve(&reserve_command(&u, id.as_str(), 300, &format!("h{i}")))
                        .await?;
                    store
                        .settle(
                            (&domain::AccountId::personal(&u), None),
                            &id,
                            c(40 * i),
                            t(500),
                        )
                        .await
                        .map(drop)
                        .map_err(|e| SpendError::Store(StoreError::Conflict(e.to_string())))
                }
                2 => {
                    store
                        .reserve(&reserve_command(&u, id.as_str(), 200, &format!("h{i}")))
                        .await?;
                    store
                        .release((&domain::AccountId::personal(&u), None), &id, t(500))
                        .await
                        .map(drop)
                        .map_err(|e| SpendError::Store(StoreError::Conflict(e.to_string())))
                }
                _ => {
                    let source = GrantSource::Admin(format!("g{i}"));
                    let command = GrantCommand {
                        account_id: domain::AccountId::personal(&u),
                        amount: c(100),
                        source,
                        expires_at: Some(t(0)),
                        now: t(1),
                    };
                    store.grant(&command).await?;
                    store
                        .expire_grants(t(10), 3)
                        .await
                        .map(drop)
                        .map_err(SpendError::Store)
                }
            }
        });
    }
    while let Some(result) = tasks.join_next().await {
        match result.expect("task") {
            Ok(()) | Err(SpendError::Insufficient { .. }) => {}
            Err(other) => panic!("unexpected failure: {other:?}"),
        }
    }
    store.expire_grants(t(10), 100).await.unwrap();
    assert_eq!(store.raw_i64("SELECT COUNT(*) FROM credit_grants WHERE expires_at IS NOT NULL AND expired = FALSE AND remaining_hundredths > 0").await, 0);
    assert_ledger_consistent(store, &u).await;
}

concurrency_tests!(
    thirty_two_spends_at_once_never_overdraw,
    eight_deliveries_of_one_payment_grant_once,
    one_key_sent_by_eight_tasks_spends_once,
    reconcilers_never_claim_an_order_twice,
    a_mixed_workload_keeps_the_ledger_exact,
);
