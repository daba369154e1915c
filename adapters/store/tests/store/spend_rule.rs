//! One spend rule: the domain's `decide_spend` decides every spend (a consumption, a hold, an
//! administrator's debit, a settle's overrun) on the balance its transaction locked, before
//! anything is written; the database's guard (the conditional decrement, the `CHECK`) stays, and
//! a guard that refuses what the rule decided is a disagreement: an error naming both, with
//! nothing written, never an "insufficient" and never run again.
//!
//! A broken guard is played by a trigger that skips the decrease of one user's balance row
//! (`RAISE(IGNORE)` on SQLite, a `BEFORE` trigger returning `NULL` on PostgreSQL), so the
//! store's own statements meet it exactly as they would meet a guard that disagreed.

use application::ports::Writes;
use application::ports::{
    AdjustCommand, CreditLedger, ReservationError, ReservationStatus, SpendError, StoreError,
};
use domain::{CreditDelta, SpendDisagreement, TransactionKind, UserId};
use sea_orm::DbBackend;
use store::GroupCommit;

use crate::ledger::reserve_command;
use crate::support::{
    Backend, TestStore, assert_ledger_consistent, backend_tests, c, consume, contract_tests,
    exact_groups, grant, t, user,
};

/// Make the database refuse every decrease of `user`'s balance row, whatever the rule decided.
async fn break_the_guard(store: &TestStore, user: &UserId) {
    let u = user.as_str();
    if store.connection().get_database_backend() == DbBackend::Postgres {
        store
            .raw(&format!(
                "CREATE FUNCTION refuse_decrease() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF OLD.account_id = '{u}' AND NEW.balance_hundredths < OLD.balance_hundredths \
                 THEN RETURN NULL; END IF; RETURN NEW; END $$"
            ))
            .await;
        store
            .raw(
                "CREATE TRIGGER refuse_decrease BEFORE UPDATE ON credit_balances \
                 FOR EACH ROW EXECUTE FUNCTION refuse_decrease()",
            )
            .await;
    } else {
        store
            .raw(&format!(
                "CREATE TRIGGER refuse_decrease BEFORE UPDATE ON credit_balances FOR EACH ROW \
                 WHEN OLD.account_id = '{u}' AND NEW.balance_hundredths < OLD.balance_hundredths \
                 BEGIN SELECT RAISE(IGNORE); END"
            ))
            .await;
    }
}

async fn mend_the_guard(store: &TestStore) {
    if store.connection().get_database_backend() == DbBackend::Postgres {
        store
            .raw("DROP TRIGGER refuse_decrease ON credit_balances")
            .await;
    } else {
        store.raw("DROP TRIGGER refuse_decrease").await;
    }
}

async fn transaction_count(store: &TestStore, user: &UserId) -> i64 {
    let u = user.as_str();
    store
        .raw_i64(&format!(
            "SELECT COUNT(*) FROM credit_transactions WHERE account_id = '{u}'"
        ))
        .await
}

/// The disagreement `e` carries, for `user`.
fn disagreement(e: &StoreError, user: &UserId) -> SpendDisagreement {
    match e {
        StoreError::SpendDisagreement {
            account: whose,
            disagreement,
        } if whose.is_personal_of(user) => *disagreement,
        other => panic!("not a disagreement on {user}'s balance: {other:?}"),
    }
}

fn spend_disagreement(e: &SpendError, user: &UserId) -> SpendDisagreement {
    match e {
        SpendError::Store(e) => disagreement(e, user),
        other => panic!("not a store error: {other:?}"),
    }
}

fn debit(user: &UserId, amount: i64, reference: &str) -> AdjustCommand {
    AdjustCommand {
        account_id: domain::AccountId::personal(user),
        amount: CreditDelta::from_hundredths(-amount).unwrap(),
        note: "correction".into(),
        reference: reference.into(),
        expires_at: None,
        grant: (
            domain::GrantCategory::Compensation,
            domain::GrantPriority::default(),
        ),
        spend_order: domain::SpendOrder::default(),
        now: t(400),
    }
}

async fn a_spend_the_rule_allows_is_written_and_one_it_refuses_writes_nothing(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g", 1_000, None).await;
    let (spent, _) = store.consume(&consume(&u, 300, "k1")).await.unwrap();
    assert_eq!(
        (spent.kind, spent.amount.hundredths(), spent.balance_after),
        (TransactionKind::Consumption, -300, c(700))
    );
    let refused = store.consume(&consume(&u, 800, "k2")).await;
    assert!(
        matches!(refused, Err(SpendError::Insufficient { requested, available })
            if requested == c(800) && available == c(700)),
        "{refused:?}"
    );
    let held = store.reserve(&reserve_command(&u, "r1", 800, "h1")).await;
    assert!(
        matches!(held, Err(SpendError::Insufficient { available, .. }) if available == c(700)),
        "{held:?}"
    );
    let debited = store.adjust(&debit(&u, 800, "a1"), &u).await;
    assert!(
        matches!(debited, Err(SpendError::Insufficient { available, .. }) if available == c(700)),
        "{debited:?}"
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(700)
    );
    assert_eq!(
        transaction_count(store, &u).await,
        2,
        "refusals write nothing"
    );
    // Every credit of the balance can be spent.
    let (all, _) = store.consume(&consume(&u, 700, "k3")).await.unwrap();
    assert_eq!(all.balance_after, c(0));
    assert_ledger_consistent(store, &u).await;
}

async fn a_guard_that_refuses_a_decided_spend_is_a_disagreement(store: &TestStore) {
    let (u1, u2) = (user(store, "u1").await, user(store, "u2").await);
    grant(store, &u1, "g1", 1_000, None).await;
    grant(store, &u2, "g2", 1_000, None).await;
    let (hold, _) = store
        .reserve(&reserve_command(&u1, "r1", 100, "h1"))
        .await
        .unwrap();
    break_the_guard(store, &u1).await;
    let before = transaction_count(store, &u1).await;

    let consumed = store.consume(&consume(&u1, 300, "k1")).await.unwrap_err();
    let d = spend_disagreement(&consumed, &u1);
    assert_eq!(d.decided.kind, TransactionKind::Consumption);
    assert_eq!((d.decided.before, d.decided.after), (c(900), c(600)));
    assert_eq!(d.guarded, None, "the guard refused what the rule allowed");

    let held = store
        .reserve(&reserve_command(&u1, "r2", 200, "h2"))
        .await
        .unwrap_err();
    let d = spend_disagreement(&held, &u1);
    assert_eq!(
        (d.decided.kind, d.decided.after),
        (TransactionKind::ReservationHold, c(700))
    );

    let debited = store.adjust(&debit(&u1, 200, "a1"), &u1).await.unwrap_err();
    let d = spend_disagreement(&debited, &u1);
    assert_eq!(
        (d.decided.kind, d.decided.after),
        (TransactionKind::AdminAdjustment, c(700))
    );

    // A settle whose overrun the rule takes from the balance.
    let settled = store
        .settle(
            (&domain::AccountId::personal(&u1), None),
            &hold.id,
            c(300),
            t(500),
        )
        .await;
    let Err(ReservationError::Store(e)) = settled else {
        panic!("{settled:?}")
    };
    let d = disagreement(&e, &u1);
    assert_eq!(
        (d.decided.kind, d.decided.after),
        (TransactionKind::ReservationSettle, c(700))
    );

    // Nothing of any of them was written, and the hold is still pending.
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u1))
            .await
            .unwrap(),
        c(900)
    );
    assert_eq!(transaction_count(store, &u1).await, before);
    let pending = store
        .pending_reservations(&domain::AccountId::personal(&u1))
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].status, ReservationStatus::Pending);
    // What the rule refuses is still refused, before any write.
    let refused = store.consume(&consume(&u1, 5_000, "k2")).await;
    assert!(
        matches!(refused, Err(SpendError::Insufficient { available, .. }) if available == c(900)),
        "{refused:?}"
    );
    // Another user's balance is not touched by it.
    let (spent, _) = store.consume(&consume(&u2, 300, "k1")).await.unwrap();
    assert_eq!(spent.balance_after, c(700));

    mend_the_guard(store).await;
    let (spent, _) = store.consume(&consume(&u1, 300, "k1")).await.unwrap();
    assert_eq!(spent.balance_after, c(600));
    assert_ledger_consistent(store, &u1).await;
    assert_ledger_consistent(store, &u2).await;
}

contract_tests!(
    a_spend_the_rule_allows_is_written_and_one_it_refuses_writes_nothing,
    a_guard_that_refuses_a_decided_spend_is_a_disagreement,
);

mod batched {
    use super::*;

    /// A batch of consumptions (two users' spends in one group) decided under the balance locks:
    /// the user whose decrement the guard refused answers the disagreement; the other's spend is
    /// undone with the batch and written alone.
    async fn a_batched_spend_the_guard_refuses_is_a_disagreement(backend: Backend) {
        let Some(setup) = backend.store(GroupCommit::off()).await else {
            return;
        };
        let (u1, u2) = (user(&setup, "u1").await, user(&setup, "u2").await);
        grant(&setup, &u1, "g1", 1_000, None).await;
        grant(&setup, &u2, "g2", 1_000, None).await;
        break_the_guard(&setup, &u1).await;
        let store = setup.reconnect(exact_groups(2)).await;
        let (first, second) = (consume(&u1, 300, "k1"), consume(&u2, 300, "k1"));
        let (a, b) = tokio::join!(store.consume(&first), store.consume(&second));
        let d = spend_disagreement(&a.unwrap_err(), &u1);
        assert_eq!((d.decided.before, d.decided.after), (c(1_000), c(700)));
        assert_eq!(d.guarded, None);
        assert_eq!(b.unwrap().0.balance_after, c(700));
        let stats = store.group_commit_stats().unwrap();
        assert_eq!((stats.batched, stats.alone), (0, 1), "{stats:?}");
        assert_eq!(
            setup
                .balance(&domain::AccountId::personal(&u1))
                .await
                .unwrap(),
            c(1_000)
        );
        assert_eq!(transaction_count(&setup, &u1).await, 1);
        store.close().await.unwrap();
        assert_ledger_consistent(&setup, &u1).await;
        assert_ledger_consistent(&setup, &u2).await;
        setup.cleanup().await;
    }

    backend_tests!(a_batched_spend_the_guard_refuses_is_a_disagreement);
}
