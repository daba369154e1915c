//! The migrations on a real database: SQLite always, PostgreSQL when `TEST_DATABASE_URL` is set
//! (each PostgreSQL test runs in a fresh schema; with `CI=true` and no URL they fail rather than
//! skip).

use migrations::{Migrator, MigratorTrait};
use sea_orm_migration::sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement,
};

/// A migrated-or-not database for one test, and how to clean it up.
struct TestDb {
    db: DatabaseConnection,
    schema: Option<(DatabaseConnection, String)>,
}

impl TestDb {
    async fn sqlite() -> Self {
        let db = Database::connect("sqlite::memory:")
            .await
            .expect("in-memory sqlite");
        Self { db, schema: None }
    }

    async fn postgres() -> Option<Self> {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but TEST_DATABASE_URL is unset: the PostgreSQL tests must run in CI"
            );
            eprintln!("TEST_DATABASE_URL is unset: skipping the PostgreSQL variant");
            return None;
        };
        let admin = Database::connect(url.as_str())
            .await
            .expect("connect to TEST_DATABASE_URL");
        let schema = fresh_schema_name();
        admin
            .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
            .await
            .expect("create schema");
        let separator = if url.contains('?') { '&' } else { '?' };
        let mut options =
            ConnectOptions::new(format!("{url}{separator}options[search_path]={schema}"));
        options.max_connections(2);
        let db = Database::connect(options)
            .await
            .expect("connect to the test schema");
        Some(Self {
            db,
            schema: Some((admin, schema)),
        })
    }

    async fn cleanup(self) {
        if let Some((admin, schema)) = self.schema {
            self.db.close().await.expect("close");
            admin
                .execute_unprepared(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .expect("drop schema");
        }
    }
}

fn fresh_schema_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("tally_m_{}_{n}", std::process::id())
}

async fn exec(db: &DatabaseConnection, sql: &str) {
    db.execute_unprepared(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn tables(db: &DatabaseConnection) -> Vec<String> {
    let sql = match db.get_database_backend() {
        DbBackend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name"
        }
        _ => {
            "SELECT table_name AS name FROM information_schema.tables \
              WHERE table_schema = current_schema() ORDER BY table_name"
        }
    };
    let rows = db
        .query_all_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("list tables");
    rows.iter()
        .map(|r| r.try_get::<String>("", "name").expect("name"))
        .collect()
}

/// Every column of the users and orders tables, as text, in id order.
async fn users_and_orders(db: &DatabaseConnection) -> Vec<String> {
    let backend = db.get_database_backend();
    let users = db
        .query_all_raw(Statement::from_string(
            backend,
            "SELECT * FROM users ORDER BY id",
        ))
        .await
        .expect("users");
    let orders = db
        .query_all_raw(Statement::from_string(
            backend,
            "SELECT * FROM orders ORDER BY id",
        ))
        .await
        .expect("orders");
    let mut out = Vec::new();
    for row in &users {
        let id: String = row.try_get("", "id").unwrap();
        let email: String = row.try_get("", "email").unwrap();
        let hash: Option<String> = row.try_get("", "password_hash").unwrap();
        let role: String = row.try_get("", "role").unwrap();
        let created: i64 = row.try_get("", "created_at").unwrap();
        out.push(format!("user {id} {email} {hash:?} {role} {created}"));
    }
    for row in &orders {
        let text = |c: &str| row.try_get::<Option<String>>("", c).unwrap();
        let int = |c: &str| row.try_get::<Option<i64>>("", c).unwrap();
        let texts = [
            "id",
            "user_id",
            "provider",
            "plan_id",
            "plan_type",
            "currency",
            "status",
        ]
        .map(text);
        let more = [
            "failure_reason",
            "provider_reference",
            "checkout_kind",
            "checkout_url",
            "mismatch",
        ]
        .map(text);
        let ints = [
            "amount_minor",
            "credits_hundredths",
            "months",
            "paid_at",
            "refunded_minor",
        ]
        .map(int);
        let times = ["expires_at", "created_at", "updated_at", "claimed_until"].map(int);
        out.push(format!("order {texts:?} {more:?} {ints:?} {times:?}"));
    }
    out
}

const STEP_ONE_DATA: &[&str] = &[
    "INSERT INTO users (id, email, password_hash, role, created_at)
     VALUES ('u1', 'ada@example.com', '$argon2id$v=19$x', 'admin', 1700000000000),
            ('u2', 'bob@example.com', NULL, 'user', 1700000000001)",
    "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, currency,
        credits_hundredths, months, status, failure_reason, paid_at, refunded_minor,
        provider_reference, checkout_kind, checkout_url, mismatch, expires_at, created_at,
        updated_at, claimed_until)
     VALUES ('o1', 'u1', 'card_gateway', 'pro', 'one_time', 999, 'USD', NULL, 999999, 'paid',
        NULL, 1700000001000, 0, 'cs_1', 'redirect', 'https://pay.example/cs_1', NULL,
        1700000900000, 1700000000500, 1700000001000, NULL),
            ('o2', 'u2', 'wallet_qr', 'credits-100', 'credits', 100, 'CNY', 10000, NULL, 'failed',
        'card declined', NULL, 0, NULL, 'qr_code', 'weixin://wxpay/x', 'amount 1.00 != 2.00',
        1700000900000, 1700000000600, 1700000000700, 1700000000800)",
];

async fn step_one_data_survives_the_credits_release(t: &TestDb) {
    Migrator::up(&t.db, Some(1))
        .await
        .expect("migrate to step 1");
    assert!(!tables(&t.db).await.contains(&"credit_balances".to_owned()));
    for sql in STEP_ONE_DATA {
        exec(&t.db, sql).await;
    }
    let before = users_and_orders(&t.db).await;
    assert_eq!(before.len(), 4);
    Migrator::up(&t.db, None).await.expect("migrate up");
    assert_eq!(users_and_orders(&t.db).await, before);
    let tables = tables(&t.db).await;
    for table in [
        "credit_balances",
        "credit_transactions",
        "credit_grants",
        "credit_reservations",
    ] {
        assert!(
            tables.contains(&table.to_owned()),
            "{table} missing from {tables:?}"
        );
    }
    // The new tables work with the old rows.
    exec(
        &t.db,
        "INSERT INTO credit_balances (user_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('u2', 0, 0, 1)",
    )
    .await;
}

async fn every_step_migrates_down_and_up_again(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    let all = tables(&t.db).await;
    assert_eq!(all.len(), 13, "{all:?}");
    Migrator::down(&t.db, Some(1)).await.expect("down one step");
    assert_eq!(tables(&t.db).await.len(), 9);
    Migrator::down(&t.db, None).await.expect("down to 0");
    assert_eq!(tables(&t.db).await, vec!["seaql_migrations".to_owned()]);
    Migrator::up(&t.db, None).await.expect("up again");
    assert_eq!(tables(&t.db).await, all);
    let applied = Migrator::get_applied_migrations(&t.db)
        .await
        .expect("status");
    assert_eq!(applied.len(), 2);
}

async fn the_database_refuses_rows_that_break_the_invariants(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    let refused = [
        // A negative balance.
        "INSERT INTO credit_balances (user_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('u1', -1, 0, 1)",
        // A grant with the wrong sign.
        "INSERT INTO credit_transactions (user_id, kind, amount_hundredths, balance_after_hundredths,
            created_at) VALUES ('u1', 'purchase_grant', -5, 0, 1)",
        // An unknown kind.
        "INSERT INTO credit_transactions (user_id, kind, amount_hundredths, balance_after_hundredths,
            created_at) VALUES ('u1', 'gift', 5, 5, 1)",
        // A user that does not exist (foreign keys are on).
        "INSERT INTO credit_balances (user_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('nobody', 1, 0, 1)",
        // An unknown order status.
        "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, currency,
            status, expires_at, created_at, updated_at)
         VALUES ('o9', 'u1', 'card_gateway', 'p', 'one_time', 1, 'USD', 'lost', 1, 1, 1)",
    ];
    for sql in refused {
        assert!(
            t.db.execute_unprepared(sql).await.is_err(),
            "accepted: {sql}"
        );
    }
}

#[tokio::test]
async fn sqlite_step_one_data_survives_the_credits_release() {
    let t = TestDb::sqlite().await;
    step_one_data_survives_the_credits_release(&t).await;
}

#[tokio::test]
async fn sqlite_every_step_migrates_down_and_up_again() {
    let t = TestDb::sqlite().await;
    every_step_migrates_down_and_up_again(&t).await;
}

#[tokio::test]
async fn sqlite_the_database_refuses_rows_that_break_the_invariants() {
    let t = TestDb::sqlite().await;
    the_database_refuses_rows_that_break_the_invariants(&t).await;
}

#[tokio::test]
async fn postgres_step_one_data_survives_the_credits_release() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    step_one_data_survives_the_credits_release(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_every_step_migrates_down_and_up_again() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    every_step_migrates_down_and_up_again(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_the_database_refuses_rows_that_break_the_invariants() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    the_database_refuses_rows_that_break_the_invariants(&t).await;
    t.cleanup().await;
}
