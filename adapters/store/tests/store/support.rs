//! Test stores on both backends, fixtures, and the ledger invariant check.
//!
//! SQLite contract tests use a private `sqlite::memory:` database each; concurrency tests use a
//! file database in a temporary directory with several connections. PostgreSQL tests run when
//! `TEST_DATABASE_URL` is set, each in a fresh schema of that database, dropped when the test
//! passes (a failed test leaves its schema for inspection). With `CI=true` and no URL the
//! PostgreSQL variants fail instead of skipping.
//!
//! Every contract and concurrency test runs twice per backend: with group commit off
//! (`sqlite`, `postgres`) and on (`sqlite_grouped`, `postgres_grouped`, see [`grouped`]).

use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};

use application::accounts::{Email, Role};
use application::ports::Writes;
use application::ports::{
    ConsumeCommand, CreditLedger, GrantCommand, GrantSource, IdempotencyRecord, LedgerEffect,
    NewUser, OrderRepository, UsageContext, UserRepository,
};
use domain::{
    Credits, Currency, IdempotencyKey, Money, Order, OrderId, OrderStatus, PlanId, PlanSnapshot,
    PlanType, ProviderId, Timestamp, UserId,
};
use migrations::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};
use store::{GroupCommit, SeaOrmStore, SqliteSynchronous, StoreSettings};
use tempfile::TempDir;

/// How the test stores render host events: as the service does, with the API's views.
pub fn events() -> std::sync::Arc<dyn application::ports::HostEventEncoder> {
    std::sync::Arc::new(http_api::HostEventJson)
}

/// A migrated store for one test.
pub struct TestStore {
    store: SeaOrmStore,
    /// What the store was connected with (its URL reaches the test's schema).
    pub settings: StoreSettings,
    _dir: Option<TempDir>,
    schema: Option<(DatabaseConnection, String)>,
}

/// Group commit as the `*_grouped` variants run it: on, with a short wait for company so that
/// concurrent calls do share groups.
pub fn grouped() -> GroupCommit {
    GroupCommit {
        max_wait_us: 200,
        direct_when_idle: false,
        ..GroupCommit::on()
    }
}

/// Group commit that writes exactly `n` commands per group: the writer waits (up to 5 s) until
/// `n` are queued.
pub fn exact_groups(n: usize) -> GroupCommit {
    GroupCommit {
        enabled: true,
        max_batch: n,
        max_wait_us: 5_000_000,
        refill_us: 0,
        writers: 1,
        direct_when_idle: false,
    }
}

impl Deref for TestStore {
    type Target = SeaOrmStore;
    fn deref(&self) -> &SeaOrmStore {
        &self.store
    }
}

async fn migrated(settings: &StoreSettings) -> SeaOrmStore {
    let store = SeaOrmStore::connect(settings, events())
        .await
        .expect("connect");
    Migrator::up(store.connection(), None)
        .await
        .expect("migrate");
    store
}

/// A private in-memory SQLite store.
pub async fn sqlite() -> TestStore {
    sqlite_with(GroupCommit::off()).await
}

/// A private in-memory SQLite store with `group_commit`.
pub async fn sqlite_with(group_commit: GroupCommit) -> TestStore {
    let settings = StoreSettings {
        group_commit,
        ..StoreSettings::new("sqlite::memory:")
    };
    TestStore {
        store: migrated(&settings).await,
        settings,
        _dir: None,
        schema: None,
    }
}

/// A SQLite file store (WAL) with `max_connections` connections.
pub async fn sqlite_file(max_connections: u32) -> TestStore {
    sqlite_file_with(max_connections, GroupCommit::off()).await
}

/// A SQLite file store (WAL) with `max_connections` connections and `group_commit`.
pub async fn sqlite_file_with(max_connections: u32, group_commit: GroupCommit) -> TestStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("tally.db").display());
    let settings = StoreSettings {
        max_connections,
        sqlite_synchronous: SqliteSynchronous::Full,
        group_commit,
        ..StoreSettings::new(url)
    };
    TestStore {
        store: migrated(&settings).await,
        settings,
        _dir: Some(dir),
        schema: None,
    }
}

/// A PostgreSQL store with `group_commit` in a fresh schema, or `None` (skip) when
/// `TEST_DATABASE_URL` is unset.
///
/// # Panics
/// When `CI=true` and `TEST_DATABASE_URL` is unset: CI must run the PostgreSQL variants.
pub async fn postgres_with(max_connections: u32, group_commit: GroupCommit) -> Option<TestStore> {
    let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but TEST_DATABASE_URL is unset: the PostgreSQL variants must run in CI"
        );
        eprintln!("TEST_DATABASE_URL is unset: skipping the PostgreSQL variant");
        return None;
    };
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let schema = format!(
        "tally_t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let admin = Database::connect(url.as_str())
        .await
        .expect("connect to TEST_DATABASE_URL");
    admin
        .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("create schema");
    let separator = if url.contains('?') { '&' } else { '?' };
    let settings = StoreSettings {
        max_connections,
        group_commit,
        ..StoreSettings::new(format!("{url}{separator}options[search_path]={schema}"))
    };
    Some(TestStore {
        store: migrated(&settings).await,
        settings,
        _dir: None,
        schema: Some((admin, schema)),
    })
}

/// Where a test that builds its own stores runs.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    /// A SQLite file (WAL), 8 connections.
    SqliteFile,
    /// PostgreSQL, 8 connections, when `TEST_DATABASE_URL` is set.
    Postgres,
}

impl Backend {
    /// A migrated store with `group_commit`, or `None` (skip).
    pub async fn store(self, group_commit: GroupCommit) -> Option<TestStore> {
        match self {
            Backend::SqliteFile => Some(sqlite_file_with(8, group_commit).await),
            Backend::Postgres => postgres_with(8, group_commit).await,
        }
    }
}

impl TestStore {
    /// Another store on the same database (not for `sqlite::memory:`), with `group_commit`.
    pub async fn reconnect(&self, group_commit: GroupCommit) -> SeaOrmStore {
        let settings = StoreSettings {
            group_commit,
            ..self.settings.clone()
        };
        SeaOrmStore::connect(&settings, events())
            .await
            .expect("reconnect")
    }

    /// Drop the test's PostgreSQL schema.
    pub async fn cleanup(self) {
        let TestStore {
            store,
            settings: _,
            _dir,
            schema,
        } = self;
        store.close().await.expect("close");
        if let Some((admin, schema)) = schema {
            admin
                .execute_unprepared(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .expect("drop schema");
        }
    }

    /// Run raw SQL on the store's database (for planting rows the ports would refuse).
    pub async fn raw(&self, sql: &str) {
        self.connection()
            .execute_unprepared(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// One integer from raw SQL.
    pub async fn raw_i64(&self, sql: &str) -> i64 {
        let backend = self.connection().get_database_backend();
        let row = self
            .connection()
            .query_one_raw(Statement::from_string(backend, sql))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .expect("a row");
        row.try_get_by_index::<i64>(0).expect("an integer")
    }

    /// Rows of `(text, integer, integer)` from `sql`.
    pub async fn raw_rows(&self, sql: &str) -> Vec<(String, i64, i64)> {
        let backend = self.connection().get_database_backend();
        let rows = self
            .connection()
            .query_all_raw(Statement::from_string(backend, sql))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .map(|row| {
                (
                    row.try_get_by_index::<String>(0).expect("a text"),
                    row.try_get_by_index::<i64>(1).expect("an integer"),
                    row.try_get_by_index::<i64>(2).expect("an integer"),
                )
            })
            .collect()
    }
}

/// Generate SQLite and PostgreSQL tests, with group commit off and on, for each contract
/// function `name(&TestStore)`: `sqlite::name`, `postgres::name`, `sqlite_grouped::name`,
/// `postgres_grouped::name`.
macro_rules! contract_tests {
    ($($name:ident),* $(,)?) => {
        $crate::support::contract_tests!(@mode sqlite, postgres, store::GroupCommit::off(); $($name),*);
        $crate::support::contract_tests!(@mode sqlite_grouped, postgres_grouped, $crate::support::grouped(); $($name),*);
    };
    (@mode $sqlite:ident, $postgres:ident, $group:expr; $($name:ident),*) => {
        mod $sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let store = $crate::support::sqlite_with($group).await;
                    super::$name(&store).await;
                    store.cleanup().await;
                }
            )*
        }
        mod $postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(store) = $crate::support::postgres_with(4, $group).await else { return };
                    super::$name(&store).await;
                    store.cleanup().await;
                }
            )*
        }
    };
}

/// Generate SQLite-file and PostgreSQL tests, with group commit off and on, for each
/// concurrency function `name(&TestStore)`.
macro_rules! concurrency_tests {
    ($($name:ident),* $(,)?) => {
        $crate::support::concurrency_tests!(@mode sqlite, postgres, store::GroupCommit::off(); $($name),*);
        $crate::support::concurrency_tests!(@mode sqlite_grouped, postgres_grouped, $crate::support::grouped(); $($name),*);
    };
    (@mode $sqlite:ident, $postgres:ident, $group:expr; $($name:ident),*) => {
        mod $sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let store = $crate::support::sqlite_file_with(8, $group).await;
                    super::$name(&store).await;
                    store.cleanup().await;
                }
            )*
        }
        mod $postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(store) = $crate::support::postgres_with(16, $group).await else { return };
                    super::$name(&store).await;
                    store.cleanup().await;
                }
            )*
        }
    };
}

/// Generate a SQLite-file and a PostgreSQL test for each function `name(Backend)` that builds
/// its own stores.
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::support::Backend::SqliteFile).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::support::Backend::Postgres).await;
                }
            )*
        }
    };
}

pub(crate) use {backend_tests, concurrency_tests, contract_tests};

// ---------------------------------------------------------------------------------------------
// Fixtures

pub fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

pub fn c(hundredths: i64) -> Credits {
    Credits::from_hundredths(hundredths).unwrap()
}

pub fn uid(id: &str) -> UserId {
    UserId::new(id).unwrap()
}

pub fn oid(id: &str) -> OrderId {
    OrderId::new(id).unwrap()
}

pub fn key(key: &str, hash: &str) -> IdempotencyRecord {
    IdempotencyRecord {
        key: IdempotencyKey::new(key).unwrap(),
        request_hash: hash.into(),
    }
}

/// Create user `id` (`id@example.com`).
pub async fn user(store: &SeaOrmStore, id: &str) -> UserId {
    let new = NewUser {
        id: uid(id),
        email: Email::parse(&format!("{id}@example.com")).unwrap(),
        password_hash: None,
        role: Role::User,
        created_at: t(1),
        signup_identity: None,
    };
    store.create_user(&new).await.expect("create user");
    new.id
}

/// A credits plan snapshot: `price_minor` USD for `credits` hundredths.
pub fn credits_snapshot(price_minor: i64, credits: i64) -> PlanSnapshot {
    PlanSnapshot {
        bonus: None,
        plan_id: PlanId::new("credits-pack").unwrap(),
        plan_type: PlanType::Credits,
        price: Money::from_minor(price_minor, Currency::Usd).unwrap(),
        credits: Some(c(credits)),
        duration: None,
        entitlements: Some(domain::entitlements::Entitlements::none()),
    }
}

/// A pending credits order created at `created_ms`.
pub fn order(id: &str, user: &UserId, created_ms: i64) -> Order {
    Order::place(
        oid(id),
        user.clone(),
        ProviderId::CardGateway,
        credits_snapshot(1000, 10_000),
        t(created_ms),
        60_000,
    )
}

/// Create order `id` for `user` and mark it paid.
pub async fn paid_order(store: &SeaOrmStore, id: &str, user: &UserId) -> OrderId {
    let o = order(id, user, 10);
    store.create_order(&o, None).await.expect("create order");
    store
        .transition_order(
            crate::events::order_change(
                o.id(),
                user,
                0,
                OrderStatus::Pending,
                OrderStatus::Paid { paid_at: t(20) },
            ),
            t(20),
            &[],
        )
        .await
        .expect("pay");
    o.id().clone()
}

/// Grant `amount` hundredths to `user` by an admin reference, expiring at `expires_at`.
pub async fn grant(
    store: &SeaOrmStore,
    user: &UserId,
    reference: &str,
    amount: i64,
    expires_at: Option<i64>,
) {
    let command = GrantCommand {
        account_id: domain::AccountId::personal(user),
        amount: c(amount),
        source: GrantSource::Admin(reference.into()),
        expires_at: expires_at.map(t),
        now: t(100),
    };
    let effect = store.grant(&command).await.expect("grant");
    assert!(matches!(effect, LedgerEffect::Written(_)), "{effect:?}");
}

/// A consumption of `amount` hundredths under `key`.
pub fn consume(user: &UserId, amount: i64, key_text: &str) -> ConsumeCommand {
    ConsumeCommand {
        account_id: domain::AccountId::personal(user),
        member_id: None,
        amount: c(amount),
        idempotency: key(key_text, &format!("hash-{amount}")),
        context: UsageContext {
            feature: Some("chat".into()),
            model: Some("gpt".into()),
            tokens: Some(1200),
            ..UsageContext::default()
        },
        now: t(200),
        low_balance_below: None,
        spend_order: domain::SpendOrder::default(),
    }
}

/// The ledger invariant: the balance equals the sum of the user's transactions, the last
/// transaction records it, the counter counts every transaction, and unexpired lots never hold
/// more than the balance plus the pending holds.
pub async fn assert_ledger_consistent(store: &TestStore, user: &UserId) {
    let u = user.as_str();
    let balance = store
        .balance(&domain::AccountId::personal(user))
        .await
        .expect("balance")
        .hundredths();
    let sum = store
        .raw_i64(&format!(
            "SELECT CAST(COALESCE(SUM(amount_hundredths), 0) AS BIGINT) FROM credit_transactions WHERE account_id = '{u}'"
        ))
        .await;
    assert_eq!(
        sum, balance,
        "balance of {u} differs from the sum of its ledger"
    );
    let count = store
        .raw_i64(&format!(
            "SELECT COUNT(*) FROM credit_transactions WHERE account_id = '{u}'"
        ))
        .await;
    if count > 0 {
        let last = store
            .raw_i64(&format!(
                "SELECT balance_after_hundredths FROM credit_transactions WHERE account_id = '{u}' ORDER BY id DESC LIMIT 1"
            ))
            .await;
        assert_eq!(
            last, balance,
            "the last transaction of {u} does not record the balance"
        );
        let counted = store
            .raw_i64(&format!(
                "SELECT transaction_count FROM credit_balances WHERE account_id = '{u}'"
            ))
            .await;
        assert_eq!(counted, count, "transaction_count of {u} is off");
    }
    let lots = store
        .raw_i64(&format!(
            "SELECT CAST(COALESCE(SUM(remaining_hundredths), 0) AS BIGINT) FROM credit_grants \
             WHERE account_id = '{u}' AND expired = FALSE"
        ))
        .await;
    let held = store
        .raw_i64(&format!(
            "SELECT CAST(COALESCE(SUM(held_hundredths), 0) AS BIGINT) FROM credit_reservations \
             WHERE account_id = '{u}' AND status = 'pending'"
        ))
        .await;
    assert!(
        lots <= balance + held,
        "lots of {u} hold {lots}, more than balance {balance} + holds {held}"
    );
}
