//! Group commit: each command of a group gets its own outcome, only after the group committed;
//! a failed group acknowledges nothing it did not commit; the writer stops with the store.
//!
//! These tests build a store with exactly-sized groups ([`exact_groups`]) next to an ungrouped
//! store on the same database (for the setup), on a SQLite file and on PostgreSQL. The whole
//! contract and concurrency suites also run with group commit on (`*_grouped` modules).

use std::collections::BTreeSet;
use std::time::Duration;

use application::ports::{
    ConsumeCommand, CreditLedger, GrantCommand, GrantSource, LedgerEffect, Replay, SpendError,
    StoreError,
};
use store::{GroupCommit, SeaOrmStore};
use tokio::task::JoinSet;

use crate::ledger::reserve_command;
use crate::support::{
    Backend, TestStore, assert_ledger_consistent, backend_tests, c, consume, exact_groups, grant,
    grouped, t, user,
};
use application::ports::Writes;

type Spend = Result<(application::ports::CreditTransaction, Replay), SpendError>;

/// Run every command at once on `store`, each in its own task; results in command order.
async fn consume_all(store: &SeaOrmStore, commands: Vec<ConsumeCommand>) -> Vec<Spend> {
    let mut tasks = JoinSet::new();
    for (i, command) in commands.into_iter().enumerate() {
        let store = store.clone();
        tasks.spawn(async move { (i, store.consume(&command).await) });
    }
    let mut results: Vec<(usize, Spend)> = tasks.join_all().await;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// The balance after each spend, sorted; every spend must be fresh.
fn balances_after(results: &[Spend]) -> Vec<i64> {
    let mut after: Vec<i64> = results
        .iter()
        .map(|r| match r {
            Ok((t, Replay::Fresh)) => t.balance_after.hundredths(),
            other => panic!("a spend failed: {other:?}"),
        })
        .collect();
    after.sort_unstable();
    after
}

fn admin_grant(user: &domain::UserId, reference: &str, amount: i64) -> GrantCommand {
    GrantCommand {
        account_id: domain::AccountId::personal(user),
        amount: c(amount),
        source: GrantSource::Admin(reference.into()),
        expires_at: None,
        now: t(100),
    }
}

/// Twelve commands in one group: two fresh spends, a spend the balance cannot cover, a replay of
/// an earlier spend, a conflicting reuse of its key, one key sent twice within the group, a
/// grant, a grant of a source already granted, a reservation, a reservation the balance cannot
/// cover (its row is written, then undone), and one whose id is taken.
async fn one_group_answers_each_command_with_its_own_outcome(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let (u1, u2, u3) = (
        user(&setup, "u1").await,
        user(&setup, "u2").await,
        user(&setup, "u3").await,
    );
    grant(&setup, &u1, "g1", 1_000, None).await;
    grant(&setup, &u2, "old", 50, None).await;
    grant(&setup, &u3, "g3", 500, None).await;
    let (k0, _) = setup.consume(&consume(&u1, 100, "k0")).await.unwrap();
    setup
        .reserve(&reserve_command(&u3, "r0", 100, "hold-0"))
        .await
        .unwrap();
    let store = setup.reconnect(exact_groups(12)).await;

    let (new, old) = (admin_grant(&u2, "new", 700), admin_grant(&u2, "old", 50));
    let holds = [
        reserve_command(&u3, "r1", 200, "hold-1"),
        reserve_command(&u3, "r2", 5_000, "hold-2"),
        reserve_command(&u1, "r0", 100, "someone-elses-id"),
    ];
    let (others, results) = tokio::join!(
        async {
            let (a, b, r1, r2, r0) = tokio::join!(
                store.grant(&new),
                store.grant(&old),
                store.reserve(&holds[0]),
                store.reserve(&holds[1]),
                store.reserve(&holds[2]),
            );
            (a.unwrap(), b.unwrap(), r1.unwrap(), r2, r0)
        },
        consume_all(&store, spends(&u1)),
    );
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (
            stats.groups,
            stats.grouped,
            stats.failed_groups,
            stats.alone
        ),
        (1, 12, 0, 0),
        "all twelve in one group: {stats:?}"
    );
    assert_each_outcome(&results, &k0);
    let (fresh_grant, old_grant, (reservation, replay), short, taken) = others;
    assert!(matches!(fresh_grant, LedgerEffect::Written(tx) if tx.balance_after == c(750)));
    assert_eq!(old_grant, LedgerEffect::Nothing);
    assert_eq!((reservation.held, replay), (c(200), Replay::Fresh));
    assert!(
        matches!(short, Err(SpendError::Insufficient { available, .. }) if [200, 400].contains(&available.hundredths())),
        "{short:?}"
    );
    assert!(
        matches!(taken, Err(SpendError::Store(StoreError::Conflict(_)))),
        "{taken:?}"
    );
    assert_final_state(&setup, [&u1, &u2, &u3]).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

async fn assert_final_state(setup: &TestStore, [u1, u2, u3]: [&domain::UserId; 3]) {
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(u1))
            .await
            .unwrap(),
        c(0)
    );
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(u3))
            .await
            .unwrap(),
        c(200)
    );
    let pending: Vec<String> = setup
        .pending_reservations(&domain::AccountId::personal(u3))
        .await
        .unwrap()
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(pending, ["r0", "r1"], "the refused hold left no row");
    for u in [u1, u2, u3] {
        assert_ledger_consistent(setup, u).await;
    }
}

/// The seven spends of `one_group_answers_each_command_with_its_own_outcome` (from 9.00).
fn spends(u1: &domain::UserId) -> Vec<ConsumeCommand> {
    let mut conflicting = consume(u1, 100, "k0");
    conflicting.idempotency.request_hash = "another request".into();
    vec![
        consume(u1, 300, "k1"),
        consume(u1, 300, "k2"),
        consume(u1, 5_000, "too-much"),
        consume(u1, 100, "k0"),
        conflicting,
        consume(u1, 300, "k4"),
        consume(u1, 300, "k4"),
    ]
}

fn assert_each_outcome(results: &[Spend], k0: &application::ports::CreditTransaction) {
    for (i, result) in results[..2].iter().enumerate() {
        assert!(
            matches!(result, Ok((tx, Replay::Fresh)) if tx.amount.hundredths() == -300),
            "spend {i}: {result:?}"
        );
    }
    match &results[2] {
        Err(SpendError::Insufficient {
            requested,
            available,
        }) => {
            assert_eq!(*requested, c(5_000));
            // What the spends before it in the group left.
            assert!([0, 300, 600, 900].contains(&available.hundredths()));
        }
        other => panic!("insufficient expected: {other:?}"),
    }
    assert!(matches!(&results[3], Ok((tx, Replay::Replayed)) if tx == k0));
    assert!(matches!(&results[4], Err(SpendError::IdempotencyConflict)));
    let (Ok((a, ra)), Ok((b, rb))) = (&results[5], &results[6]) else {
        panic!("k4 twice: {:?} {:?}", results[5], results[6]);
    };
    assert_eq!(a, b, "the second k4 replays the first");
    let replays: BTreeSet<_> = [format!("{ra:?}"), format!("{rb:?}")].into();
    assert_eq!(replays, ["Fresh".to_owned(), "Replayed".to_owned()].into());
}

/// Poison: an insert of a transaction with feature `poison` also writes a row whose deferred
/// foreign key fails at COMMIT, so the whole group's commit fails.
async fn plant_commit_failure(store: &TestStore) {
    store
        .raw("CREATE TABLE poison_target (id BIGINT PRIMARY KEY)")
        .await;
    store
        .raw("CREATE TABLE poison (ref BIGINT REFERENCES poison_target (id) DEFERRABLE INITIALLY DEFERRED)")
        .await;
    if store.backend() == sea_orm::DbBackend::Postgres {
        store
            .raw(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.feature = 'poison' THEN INSERT INTO poison (ref) VALUES (1); END IF; \
                 RETURN NEW; END $$",
            )
            .await;
        store
            .raw("CREATE TRIGGER poison AFTER INSERT ON credit_transactions FOR EACH ROW EXECUTE FUNCTION poison()")
            .await;
    } else {
        store
            .raw("CREATE TRIGGER poison AFTER INSERT ON credit_transactions WHEN NEW.feature = 'poison' \
                  BEGIN INSERT INTO poison (ref) VALUES (1); END")
            .await;
    }
}

/// A group whose COMMIT fails acknowledges nothing: every command runs again alone; the sound
/// ones then commit (once each), the poisoned one fails on its own.
async fn a_failed_commit_acknowledges_nothing_it_did_not_commit(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 1_000, None).await;
    plant_commit_failure(&setup).await;
    let store = setup.reconnect(exact_groups(4)).await;
    let mut poisoned = consume(&u, 100, "k4");
    poisoned.context.feature = Some("poison".into());
    let commands = vec![
        consume(&u, 100, "k1"),
        consume(&u, 100, "k2"),
        consume(&u, 100, "k3"),
        poisoned,
    ];
    let results = consume_all(&store, commands).await;
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.failed_groups, stats.alone),
        (0, 1, 4),
        "{stats:?}"
    );
    for result in &results[..3] {
        let Ok((tx, Replay::Fresh)) = result else {
            panic!("a sound spend fails: {result:?}")
        };
        let stored = setup
            .raw_i64(&format!(
                "SELECT COUNT(*) FROM credit_transactions WHERE id = {}",
                tx.id
            ))
            .await;
        assert_eq!(stored, 1, "acknowledged, so committed");
    }
    assert!(
        matches!(&results[3], Err(SpendError::Store(StoreError::Conflict(_)))),
        "{:?}",
        results[3]
    );
    assert_eq!(
        setup
            .raw_i64("SELECT COUNT(*) FROM credit_transactions WHERE kind = 'consumption'")
            .await,
        3,
        "each sound spend once, the poisoned one never"
    );
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(700)
    );
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// 32 spenders of one balance share commits and still end with exactly the affordable number of
/// successes.
async fn thirty_two_spenders_share_commits_and_never_overdraw(backend: Backend) {
    let wait = GroupCommit {
        max_wait_us: 5_000,
        ..grouped()
    };
    let Some(store) = backend.store(wait).await else {
        return;
    };
    let u = user(&store, "u1").await;
    grant(&store, &u, "g1", 10_000, None).await;
    let commands = (0..32).map(|i| consume(&u, 700, &format!("spend-{i}")));
    let results = consume_all(&store, commands.collect()).await;
    let fresh = results
        .iter()
        .filter(|r| matches!(r, Ok((_, Replay::Fresh))))
        .count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(SpendError::Insufficient { .. })))
        .count();
    assert_eq!((fresh, refused), (14, 18), "floor(100.00 / 7.00) succeed");
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(stats.grouped, 33, "the grant and the 32 spends: {stats:?}");
    assert!(stats.groups < 32, "no sharing at all: {stats:?}");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(10_000 - 14 * 700)
    );
    assert_ledger_consistent(&store, &u).await;
    store.cleanup().await;
}

/// A lone spend goes straight through, on the ordinary path; spends that arrive while one is
/// in flight go to the writer and share its groups. Either way the ledger is exact.
async fn a_lone_spend_goes_straight_through_and_company_groups(backend: Backend) {
    let direct = GroupCommit {
        max_wait_us: 5_000,
        ..GroupCommit::on()
    };
    assert!(direct.direct_when_idle, "on by default");
    let Some(store) = backend.store(direct).await else {
        return;
    };
    let u = user(&store, "u1").await;
    grant(&store, &u, "g1", 10_000, None).await;
    let granted = store.group_commit_stats().unwrap();
    assert_eq!((granted.direct, granted.groups), (1, 0), "{granted:?}");
    store.consume(&consume(&u, 100, "lone")).await.unwrap();
    let lone = store.group_commit_stats().unwrap();
    assert_eq!((lone.direct, lone.groups), (2, 0), "{lone:?}");
    // Sixteen at once from one task: the first is admitted with nothing in flight and goes
    // straight through; it is still in flight when the other fifteen are admitted.
    let spends: Vec<_> = (0..16)
        .map(|i| consume(&u, 100, &format!("together-{i}")))
        .collect();
    let results = futures_util::future::join_all(spends.iter().map(|c| store.consume(c))).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.direct, stats.grouped, stats.alone),
        (3, 15, 0),
        "one straight through, fifteen grouped: {stats:?}"
    );
    assert!(stats.groups < 15, "the fifteen shared groups: {stats:?}");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(10_000 - 17 * 100)
    );
    assert_ledger_consistent(&store, &u).await;
    store.cleanup().await;
}

/// With several writers (commands sharded by user), spenders of several accounts still spend
/// exactly what each account holds, and nothing runs alone.
async fn several_writers_keep_every_account_exact(backend: Backend) {
    let writers = GroupCommit {
        writers: 4,
        ..grouped()
    };
    let Some(store) = backend.store(writers).await else {
        return;
    };
    let mut users = Vec::new();
    for name in ["w1", "w2", "w3", "w4", "w5"] {
        let u = user(&store, name).await;
        grant(&store, &u, &format!("{name}-g"), 1_000, None).await;
        users.push(u);
    }
    let commands = users
        .iter()
        .flat_map(|u| (0..12).map(move |i| consume(u, 100, &format!("{u}-{i}"))))
        .collect();
    let results = consume_all(&store, commands).await;
    for (n, u) in users.iter().enumerate() {
        let mine = &results[n * 12..(n + 1) * 12];
        let fresh = mine.iter().filter(|r| r.is_ok()).count();
        assert_eq!(fresh, 10, "10.00 buys ten spends of 1.00 for {u}: {mine:?}");
        assert_eq!(
            store
                .balance(&domain::AccountId::personal(u))
                .await
                .unwrap(),
            c(0)
        );
        assert_ledger_consistent(&store, u).await;
    }
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(stats.alone, 0, "{stats:?}");
    store.cleanup().await;
}

/// Groups never hold more than `max_batch` commands.
async fn groups_hold_at_most_max_batch_commands(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 10_000, None).await;
    let store = setup.reconnect(exact_groups(3)).await;
    let commands = (0..6).map(|i| consume(&u, 10, &format!("k{i}")));
    let results = consume_all(&store, commands.collect()).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.grouped, stats.batched),
        (2, 6, 6),
        "{stats:?}"
    );
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// Dropping every clone of the store stops its writer; closing stops it too, and later calls
/// through a surviving clone are `Busy`, not lost.
async fn the_writer_stops_with_the_store(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 1_000, None).await;
    let store = setup.reconnect(grouped()).await;
    let clone = store.clone();
    let stopped = store.group_commit_stopped().unwrap();
    clone.consume(&consume(&u, 100, "k1")).await.unwrap();
    drop(store);
    drop(clone);
    tokio::time::timeout(Duration::from_secs(5), stopped)
        .await
        .expect("the writer stops once the store is dropped");

    let store = setup.reconnect(grouped()).await;
    let survivor = store.clone();
    let stopped = store.group_commit_stopped().unwrap();
    store.close().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), stopped)
        .await
        .expect("the writer stops at close");
    let late = survivor.consume(&consume(&u, 100, "k2")).await;
    assert!(
        matches!(late, Err(SpendError::Store(StoreError::Busy(_)))),
        "{late:?}"
    );
    // A spend first asks which endpoints opted in to consumption events (issue 17); the closed
    // store cannot read that, so the call is refused before it reaches the stopped writer.
    assert_eq!(survivor.group_commit_stats().unwrap().alone, 0);
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(900)
    );
    setup.cleanup().await;
}

/// A group of consumptions only is written as one batch (`ledger/consume_many.rs`): lots are drawn in
/// spend order exactly as one-by-one spends draw them, a key sent twice replays, a spend the
/// balance (as the earlier spends of the batch left it) cannot cover is refused, and nothing
/// runs alone.
async fn a_batch_of_spends_draws_lots_as_one_by_one_spends_do(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let mut users = Vec::new();
    for name in ["a", "b", "c"] {
        let u = user(&setup, name).await;
        grant(&setup, &u, &format!("{name}-never"), 1_000, None).await;
        grant(&setup, &u, &format!("{name}-later"), 300, Some(9_000_000)).await;
        grant(&setup, &u, &format!("{name}-soon"), 300, Some(8_000_000)).await;
        users.push(u);
    }
    let store = setup.reconnect(exact_groups(14)).await;
    let mut commands: Vec<ConsumeCommand> = users
        .iter()
        .flat_map(|u| (0..4).map(move |i| consume(u, 250, &format!("{u}-{i}"))))
        .collect();
    // 16.00 - 10.00 leaves 6.00: a second "a-0" replays; 17.00 never fits, and the refusal
    // reports the balance as the spends of the batch before it left it.
    commands.push(consume(&users[0], 250, "a-0"));
    commands.push(consume(&users[1], 1_700, "b-big"));
    let results = consume_all(&store, commands).await;
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.grouped, stats.batched, stats.alone),
        (1, 14, 14, 0),
        "one batch decides all: {stats:?}"
    );
    let fresh = results
        .iter()
        .filter(|r| matches!(r, Ok((_, Replay::Fresh))))
        .count();
    let replayed: Vec<_> = results
        .iter()
        .filter_map(|r| match r {
            Ok((t, Replay::Replayed)) => Some(t.id),
            _ => None,
        })
        .collect();
    assert_eq!(fresh, 12, "{results:?}");
    assert_eq!(replayed.len(), 1, "{results:?}");
    assert!(
        matches!(&results[13], Err(SpendError::Insufficient { available, .. })
            if [1_600, 1_350, 1_100, 850, 600].contains(&available.hundredths())),
        "{:?}",
        results[13]
    );
    for u in &users {
        assert_eq!(
            setup
                .balance(&domain::AccountId::personal(u))
                .await
                .unwrap(),
            c(600)
        );
        let name = u.as_str();
        for (lot, left) in [("soon", 0), ("later", 0), ("never", 600)] {
            let remaining = setup
                .raw_i64(&format!(
                    "SELECT remaining_hundredths FROM credit_grants \
                     WHERE account_id = '{name}' AND source_key = '{name}-{lot}'"
                ))
                .await;
            assert_eq!(remaining, left, "lot {lot} of {name}");
        }
        assert_ledger_consistent(&setup, u).await;
    }
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// PostgreSQL decides a batch of spends from a read without locks and writes it with one
/// statement that commits by itself (`consume_many_unlocked`). When a balance changes between
/// that read and that write (here another transaction adds 5.00 while holding the row), the
/// statement must write nothing, not spends recorded against the old balance, and the group runs
/// on the locked path, where each spend sees the new balance.
#[tokio::test]
async fn postgres_a_batch_whose_balance_moved_since_its_read_writes_nothing_and_runs_locked() {
    use sea_orm::{ConnectionTrait, Database, TransactionTrait};
    let Some(setup) = Backend::Postgres.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 1_000, None).await;
    let store = setup.reconnect(exact_groups(2)).await;
    let other = Database::connect(setup.settings.url.as_str())
        .await
        .unwrap();
    let holder = other.begin().await.unwrap();
    holder
        .execute_unprepared("SELECT 1 FROM credit_balances WHERE account_id = 'u1' FOR UPDATE")
        .await
        .unwrap();
    let spends = tokio::spawn({
        let store = store.clone();
        let u = u.clone();
        async move { consume_all(&store, vec![consume(&u, 100, "k1"), consume(&u, 100, "k2")]).await }
    });
    // The batch has read 10.00 without a lock and now waits for the row in its write.
    // pg_locks, not pg_stat_activity: the latter is a snapshot kept for the whole transaction.
    let blocked = "SELECT COUNT(*) AS n FROM pg_locks \
                   WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))";
    let mut waited = 0;
    loop {
        let row = holder
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                blocked,
            ))
            .await
            .unwrap()
            .unwrap();
        if row.try_get::<i64>("", "n").unwrap() > 0 {
            break;
        }
        waited += 1;
        assert!(waited < 500, "the batch never waited for the balance row");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder
        .execute_unprepared(
            "UPDATE credit_balances SET balance_hundredths = balance_hundredths + 500, \
             transaction_count = transaction_count + 1 WHERE account_id = 'u1'; \
             INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
             balance_after_hundredths, note, idempotency_key, created_at) \
             VALUES ('u1', 'admin_adjustment', 500, 1500, 'moved', 'adj-1', 150)",
        )
        .await
        .unwrap();
    holder.commit().await.unwrap();
    let after = balances_after(&spends.await.unwrap());
    assert_eq!(
        after,
        [1_300, 1_400],
        "each spend saw the 5.00 added under it"
    );
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(1_300)
    );
    assert_eq!(
        setup
            .raw_i64("SELECT COUNT(*) FROM credit_transactions WHERE kind = 'consumption'")
            .await,
        2
    );
    assert_ledger_consistent(&setup, &u).await;
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.batched, stats.alone),
        (1, 2, 0),
        "the locked batch decided both: {stats:?}"
    );
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// On PostgreSQL an account with spend limits is batched without locks too: the batch reads
/// its limits after the balance, counts its spends in them and writes the buckets in its one
/// statement, and a writer remembers them with the balance. A limit replaced through another
/// store (one on another model removed, one on every spend added: the account still has one)
/// leaves the balance and its transaction count as they were, and the batch would write no
/// bucket of the old limit, so only `limit_changes` tells memory it is stale: the new limit
/// counts the batch.
#[tokio::test]
async fn postgres_a_writer_spends_limited_accounts_from_memory_and_sees_a_limit_replaced() {
    use application::ports::{NewSpendLimit, SpendLimitStore};
    use domain::{Enforcement, LimitScope, SpendLimit, SpendLimitId, SpendWindow};
    let Some(setup) = Backend::Postgres.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 10_000, None).await;
    let account = domain::AccountId::personal(&u);
    let new = |id: &str, model: Option<&str>, credits: i64, at: i64| NewSpendLimit {
        id: SpendLimitId::new(id).unwrap(),
        account_id: account.clone(),
        scope: LimitScope {
            model: model.map(str::to_owned),
            ..LimitScope::default()
        },
        limit: SpendLimit {
            credits: c(credits),
            window: SpendWindow::Day,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now: t(at),
    };
    setup
        .add_spend_limit(&new("lim_a", Some("other"), 5_000, 100))
        .await
        .unwrap();
    let store = setup.reconnect(exact_groups(2)).await;
    let from_memory = |store: &SeaOrmStore| store.group_commit_stats().unwrap().from_memory;
    let used = |limits: &[application::ports::SpendLimitRecord]| -> Vec<(String, i64)> {
        limits
            .iter()
            .map(|l| {
                let used = l.limit.standing(&l.buckets, t(100)).used.hundredths();
                (l.id.as_str().to_owned(), used)
            })
            .collect()
    };

    let first = consume_all(&store, vec![consume(&u, 100, "k1"), consume(&u, 100, "k2")]).await;
    assert_eq!(balances_after(&first), [9_800, 9_900]);
    let second = consume_all(&store, vec![consume(&u, 100, "k3"), consume(&u, 100, "k4")]).await;
    assert_eq!(balances_after(&second), [9_600, 9_700]);
    assert_eq!(from_memory(&store), 1, "the second batch did not read");
    let limits = setup.spend_limits(&account, t(100)).await.unwrap();
    assert_eq!(used(&limits), [("lim_a".to_owned(), 0)]);

    // Replaced elsewhere: the new limit starts from the day's 4.00 and counts the next batch.
    // (The spends are on `gpt`: the old limit counted none of them.)
    assert!(
        setup
            .remove_spend_limit(&account, &SpendLimitId::new("lim_a").unwrap())
            .await
            .unwrap()
    );
    setup
        .add_spend_limit(&new("lim_b", None, 1_000, 300))
        .await
        .unwrap();
    let third = consume_all(&store, vec![consume(&u, 100, "k5"), consume(&u, 100, "k6")]).await;
    assert_eq!(balances_after(&third), [9_400, 9_500]);
    assert_eq!(
        from_memory(&store),
        1,
        "a replaced limit is not spent from memory"
    );
    let fourth = consume_all(&store, vec![consume(&u, 100, "k7"), consume(&u, 100, "k8")]).await;
    assert_eq!(balances_after(&fourth), [9_200, 9_300]);
    assert_eq!(from_memory(&store), 2);
    let limits = setup.spend_limits(&account, t(100)).await.unwrap();
    assert_eq!(used(&limits), [("lim_b".to_owned(), 800)]);

    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.batched, stats.alone),
        (4, 8, 0),
        "{stats:?}"
    );
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// On PostgreSQL a writer remembers the balances and lots its unlocked batches wrote, and
/// decides the next batch of the same users from them without reading (one round trip instead
/// of two). What moved since by other means (here grants through another store) must not be
/// spent from memory: a batch decided from a balance that has since changed writes nothing and
/// is decided again from a read; and a batch that memory would refuse is read first, since a
/// refusal is checked by no write (the user may just have bought credits).
#[tokio::test]
async fn postgres_a_writer_spends_from_what_it_wrote_and_rereads_what_moved() {
    let Some(setup) = Backend::Postgres.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 1_000, None).await;
    let store = setup.reconnect(exact_groups(2)).await;
    let from_memory = |store: &SeaOrmStore| store.group_commit_stats().unwrap().from_memory;

    // The first batch reads; the second is decided from what the first wrote.
    let first = consume_all(&store, vec![consume(&u, 100, "k1"), consume(&u, 100, "k2")]).await;
    assert_eq!(balances_after(&first), [800, 900]);
    assert_eq!(from_memory(&store), 0);
    let second = consume_all(&store, vec![consume(&u, 100, "k3"), consume(&u, 100, "k4")]).await;
    assert_eq!(balances_after(&second), [600, 700]);
    assert_eq!(from_memory(&store), 1, "the second batch did not read");

    // 5.00 granted elsewhere: the batch from memory (6.00) writes nothing; read, it spends 11.00.
    grant(&setup, &u, "g2", 500, None).await;
    let third = consume_all(&store, vec![consume(&u, 100, "k5"), consume(&u, 100, "k6")]).await;
    assert_eq!(balances_after(&third), [900, 1_000]);
    assert_eq!(from_memory(&store), 1);

    // 20.00 granted elsewhere: memory (9.00) would refuse both, so the batch reads 29.00.
    grant(&setup, &u, "g3", 2_000, None).await;
    let fourth = consume_all(
        &store,
        vec![consume(&u, 1_500, "k7"), consume(&u, 1_200, "k8")],
    )
    .await;
    assert_eq!(balances_after(&fourth), [200, 1_400]);
    assert_eq!(from_memory(&store), 1);

    // What the read found is remembered too.
    let fifth = consume_all(&store, vec![consume(&u, 50, "k9"), consume(&u, 50, "k10")]).await;
    assert_eq!(balances_after(&fifth), [100, 150]);
    assert_eq!(from_memory(&store), 2);

    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.batched, stats.alone),
        (5, 10, 0),
        "{stats:?}"
    );
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(100)
    );
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// A batch answers a spend whose key is already stored as one by one spends do, whatever the
/// balance says now: a retry of a spend that succeeded replays it even when the balance no longer
/// covers it (on PostgreSQL the unlocked batch looks up the keys of the spends it would refuse),
/// reusing the key for another request is a conflict, and a retry the balance still covers
/// replays too (on PostgreSQL its insert conflicts, the unlocked statement writes nothing and the
/// locked path answers).
async fn a_batch_replays_stored_keys_whatever_the_balance(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 300, None).await;
    let (k1, _) = setup.consume(&consume(&u, 200, "k1")).await.unwrap();
    let store = setup.reconnect(exact_groups(2)).await;

    // 1.00 left: the retry of k1 (2.00) replays; k2 spends 0.50.
    let results = consume_all(&store, vec![consume(&u, 200, "k1"), consume(&u, 50, "k2")]).await;
    assert!(
        matches!(&results[0], Ok((t, Replay::Replayed)) if t.id == k1.id),
        "{:?}",
        results[0]
    );
    let Ok((k2, Replay::Fresh)) = &results[1] else {
        panic!("{:?}", results[1])
    };
    assert_eq!(k2.balance_after, c(50));

    // 0.50 left: k1 with another amount (so another request) is a conflict; k3 spends 0.10.
    let results = consume_all(&store, vec![consume(&u, 60, "k1"), consume(&u, 10, "k3")]).await;
    assert!(
        matches!(results[0], Err(SpendError::IdempotencyConflict)),
        "{:?}",
        results[0]
    );
    assert!(matches!(&results[1], Ok((t, Replay::Fresh)) if t.balance_after == c(40)));

    // 0.40 left: the retry of k3 (0.10) is covered, and still replays; k4 spends 0.10.
    let results = consume_all(&store, vec![consume(&u, 10, "k3"), consume(&u, 10, "k4")]).await;
    assert!(
        matches!(&results[0], Ok((t, Replay::Replayed)) if t.balance_after == c(40)),
        "{:?}",
        results[0]
    );
    assert!(matches!(&results[1], Ok((t, Replay::Fresh)) if t.balance_after == c(30)));

    let stats = store.group_commit_stats().unwrap();
    assert_eq!((stats.groups, stats.alone), (3, 0), "{stats:?}");
    assert_eq!(
        setup
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(30)
    );
    assert_eq!(
        setup
            .raw_i64("SELECT COUNT(*) FROM credit_transactions WHERE kind = 'consumption'")
            .await,
        4,
        "k1, k2, k3, k4 once each"
    );
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// A batch of spends on an account with spend limits is decided as one batch (on PostgreSQL
/// after the unlocked attempt steps aside): each spend counted in order against the limits its
/// scope falls under, the one past a hard limit refused, and the counts written once per bucket.
async fn a_batch_counts_spend_limits_in_order(backend: Backend) {
    use application::ports::{NewSpendLimit, SpendLimitStore};
    use domain::{Enforcement, LimitScope, SpendLimit, SpendLimitId, SpendWindow};
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 10_000, None).await;
    let account = domain::AccountId::personal(&u);
    let new = |id: &str, model: Option<&str>, credits: i64| NewSpendLimit {
        id: SpendLimitId::new(id).unwrap(),
        account_id: account.clone(),
        scope: LimitScope {
            model: model.map(str::to_owned),
            ..LimitScope::default()
        },
        limit: SpendLimit {
            credits: c(credits),
            window: SpendWindow::Day,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now: t(100),
    };
    setup
        .add_spend_limit(&new("lim_all", None, 350))
        .await
        .unwrap();
    setup
        .add_spend_limit(&new("lim_other", Some("other"), 100))
        .await
        .unwrap();
    let store = setup.reconnect(exact_groups(4)).await;
    let commands = (0..4).map(|i| consume(&u, 100, &format!("k{i}")));
    let results = consume_all(&store, commands.collect()).await;
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(SpendError::LimitReached(_))))
        .count();
    assert_eq!(
        (results.iter().filter(|r| r.is_ok()).count(), refused),
        (3, 1),
        "3.50 a day holds three spends of 1.00: {results:?}"
    );
    let stats = store.group_commit_stats().unwrap();
    assert_eq!(
        (stats.groups, stats.batched, stats.alone),
        (1, 4, 0),
        "{stats:?}"
    );
    let limits = setup.spend_limits(&account, t(100)).await.unwrap();
    let used: Vec<i64> = limits
        .iter()
        .map(|l| l.limit.standing(&l.buckets, t(100)).used.hundredths())
        .collect();
    assert_eq!(
        used,
        [300, 0],
        "gpt spends do not count against the other model's limit"
    );
    assert_eq!(setup.balance(&account).await.unwrap(), c(10_000 - 300));
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// A batch writes each spend's tokens by kind, price-book date and cost basis as the
/// one-by-one path does.
async fn a_batch_keeps_each_spend_s_tokens_by_kind(backend: Backend) {
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    grant(&setup, &u, "g1", 10_000, None).await;
    let store = setup.reconnect(exact_groups(2)).await;
    let mut priced = consume(&u, 231, "k1");
    priced.context.breakdown =
        Some(domain::pricing::TokenUsage::new([100_000, 20_000, 500_000, 0, 1]).unwrap());
    priced.context.price_from = Some(t(5));
    priced.context.cost_basis_millionths = Some(3_400_005);
    let results = consume_all(&store, vec![priced.clone(), consume(&u, 100, "k2")]).await;
    let written: Vec<_> = results.into_iter().map(|r| r.unwrap().0.context).collect();
    assert_eq!(written[0], priced.context);
    assert_eq!(written[1].breakdown, None);
    let stats = store.group_commit_stats().unwrap();
    assert_eq!((stats.batched, stats.alone), (2, 0), "{stats:?}");
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

/// A batch draws each spend's lots in the order its command says, as the one-by-one path does.
async fn a_batch_draws_lots_in_each_spend_s_order(backend: Backend) {
    use application::ports::{AdjustCommand, Writes as _};
    use domain::{CreditDelta, GrantCategory, GrantPriority, SpendOrder};
    let Some(setup) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&setup, "u1").await;
    let account = domain::AccountId::personal(&u);
    for (reference, category) in [
        ("paid", GrantCategory::Paid),
        ("promo", GrantCategory::Promotional),
    ] {
        let grant = AdjustCommand {
            account_id: account.clone(),
            amount: CreditDelta::from_hundredths(500).unwrap(),
            note: "grant".into(),
            reference: reference.into(),
            expires_at: None,
            grant: (category, GrantPriority::default()),
            spend_order: SpendOrder::default(),
            now: t(10),
        };
        setup.adjust(&grant, &u).await.unwrap();
    }
    let store = setup.reconnect(exact_groups(2)).await;
    let mut paid_first = consume(&u, 200, "k2");
    paid_first.spend_order = SpendOrder::PaidFirst;
    let results = consume_all(&store, vec![consume(&u, 100, "k1"), paid_first]).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let stats = store.group_commit_stats().unwrap();
    assert_eq!((stats.batched, stats.alone), (2, 0), "{stats:?}");
    let mut left: Vec<(GrantCategory, i64)> = setup
        .grant_lots(&account)
        .await
        .unwrap()
        .iter()
        .map(|l| (l.category, l.remaining.hundredths()))
        .collect();
    left.sort_unstable();
    assert_eq!(
        left,
        [
            (GrantCategory::Paid, 300),
            (GrantCategory::Promotional, 400)
        ]
    );
    assert_ledger_consistent(&setup, &u).await;
    store.close().await.unwrap();
    setup.cleanup().await;
}

backend_tests!(
    a_batch_draws_lots_in_each_spend_s_order,
    a_batch_keeps_each_spend_s_tokens_by_kind,
    a_batch_counts_spend_limits_in_order,
    a_batch_replays_stored_keys_whatever_the_balance,
    a_batch_of_spends_draws_lots_as_one_by_one_spends_do,
    one_group_answers_each_command_with_its_own_outcome,
    a_failed_commit_acknowledges_nothing_it_did_not_commit,
    thirty_two_spenders_share_commits_and_never_overdraw,
    a_lone_spend_goes_straight_through_and_company_groups,
    groups_hold_at_most_max_batch_commands,
    several_writers_keep_every_account_exact,
    the_writer_stops_with_the_store,
);
