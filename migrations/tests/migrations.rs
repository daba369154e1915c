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
            // The columns of step one, by name: sqlx's SQLite statement cache would keep the
            // column count of a `SELECT *` prepared before a later step adds a column.
            "SELECT id, user_id, provider, plan_id, plan_type, currency, status, failure_reason,
                provider_reference, checkout_kind, checkout_url, mismatch, amount_minor,
                credits_hundredths, months, paid_at, refunded_minor, expires_at, created_at,
                updated_at, claimed_until FROM orders ORDER BY id",
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
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('u2', 0, 0, 1)",
    )
    .await;
}

async fn every_step_migrates_down_and_up_again(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    let all = tables(&t.db).await;
    // The steps after step 9 (issue 18 on), newest first, each down on its own; then step 9.
    let later = u32::try_from(Migrator::migrations().len() - 9).expect("a few steps");
    for _ in 0..later {
        Migrator::down(&t.db, Some(1))
            .await
            .expect("down a later step");
    }
    assert_eq!(tables(&t.db).await.len(), 19, "{all:?}");
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down the plan entitlements step");
    assert_eq!(tables(&t.db).await.len(), 19);
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down the webhook endpoints step");
    assert_eq!(tables(&t.db).await.len(), 17);
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down the events step");
    assert_eq!(tables(&t.db).await.len(), 16);
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down the inbox indexes step");
    assert_eq!(tables(&t.db).await.len(), 16);
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down the refunds step");
    assert_eq!(tables(&t.db).await.len(), 14);
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down the sold-terms step");
    assert_eq!(tables(&t.db).await.len(), 14);
    Migrator::down(&t.db, Some(1)).await.expect("down one step");
    assert_eq!(tables(&t.db).await.len(), 13);
    Migrator::down(&t.db, Some(1))
        .await
        .expect("down another step");
    assert_eq!(tables(&t.db).await.len(), 9);
    Migrator::down(&t.db, None).await.expect("down to 0");
    assert_eq!(tables(&t.db).await, vec!["seaql_migrations".to_owned()]);
    Migrator::up(&t.db, None).await.expect("up again");
    assert_eq!(tables(&t.db).await, all);
    let applied = Migrator::get_applied_migrations(&t.db)
        .await
        .expect("status");
    assert_eq!(applied.len(), Migrator::migrations().len());
}

/// `(id, price_minor, currency, interval_months, credits_per_period_hundredths)` of every
/// subscription, in id order.
type SoldTermsRow = (
    String,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

async fn sold_terms(db: &DatabaseConnection) -> Vec<SoldTermsRow> {
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT id, price_minor, currency, CAST(interval_months AS BIGINT) AS interval_months,
                credits_per_period_hundredths FROM subscriptions ORDER BY id",
        ))
        .await
        .expect("subscriptions");
    rows.iter()
        .map(|row| {
            let int = |c: &str| row.try_get::<Option<i64>>("", c).unwrap();
            (
                row.try_get("", "id").unwrap(),
                int("price_minor"),
                row.try_get("", "currency").unwrap(),
                int("interval_months"),
                int("credits_per_period_hundredths"),
            )
        })
        .collect()
}

async fn subscriptions_keep_the_terms_of_their_order(t: &TestDb) {
    Migrator::up(&t.db, Some(3))
        .await
        .expect("migrate to step 3");
    for sql in STEP_ONE_DATA {
        exec(&t.db, sql).await;
    }
    exec(
        &t.db,
        "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, currency,
            credits_hundredths, months, status, paid_at, expires_at, created_at, updated_at)
         VALUES ('o3', 'u1', 'card_gateway', 'pro-monthly', 'recurring', 999, 'USD', 5000, 1,
            'paid', 1, 1, 1, 1),
                ('o4', 'u2', 'mor_b', 'team-yearly', 'recurring', 9900, 'EUR', NULL, 12,
            'paid', 1, 1, 1, 1)",
    )
    .await;
    // Started by a recurring order with credits, one without credits, one wrongly by a
    // one-time order, and one with no order at all.
    exec(
        &t.db,
        "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider,
            provider_subscription_id, status, period_start, period_end, last_event_at,
            created_at, updated_at)
         VALUES ('s1', 'u1', 'o3', 'pro-monthly', 'card_gateway', 'sub_1', 'active', 1, 2, 1, 1, 1),
                ('s2', 'u2', 'o4', 'team-yearly', 'mor_b', 'sub_2', 'active', 1, 2, 1, 1, 1),
                ('s3', 'u1', 'o1', 'pro', 'card_gateway', 'sub_3', 'active', 1, 2, 1, 1, 1),
                ('s4', 'u1', NULL, 'pro', 'card_gateway', 'sub_4', 'active', 1, 2, 1, 1, 1)",
    )
    .await;
    Migrator::up(&t.db, None).await.expect("migrate up");
    assert_eq!(
        sold_terms(&t.db).await,
        vec![
            (
                "s1".into(),
                Some(999),
                Some("USD".into()),
                Some(1),
                Some(5000)
            ),
            ("s2".into(), Some(9900), Some("EUR".into()), Some(12), None),
            ("s3".into(), None, None, None, None),
            ("s4".into(), None, None, None, None),
        ]
    );
    let refused = [
        // A price without an interval.
        "UPDATE subscriptions SET price_minor = 100, currency = 'USD' WHERE id = 's4'",
        // An interval out of range.
        "UPDATE subscriptions SET interval_months = 0 WHERE id = 's1'",
        // No credits is NULL, never zero.
        "UPDATE subscriptions SET credits_per_period_hundredths = 0 WHERE id = 's1'",
        // A negative price.
        "UPDATE subscriptions SET price_minor = -1 WHERE id = 's1'",
    ];
    for sql in refused {
        assert!(
            t.db.execute_unprepared(sql).await.is_err(),
            "accepted: {sql}"
        );
    }
}

/// Step 5 keeps what earlier steps knew of refunds and paid periods: a refunded order's total as
/// one running-total report, each subscription's current period (with sold terms) as a charge.
async fn refunds_and_charges_are_filled_from_what_was_known(t: &TestDb) {
    Migrator::up(&t.db, Some(4))
        .await
        .expect("migrate to step 4");
    for sql in STEP_ONE_DATA {
        exec(&t.db, sql).await;
    }
    exec(
        &t.db,
        "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, currency,
            credits_hundredths, months, status, paid_at, refunded_minor, expires_at, created_at,
            updated_at)
         VALUES ('o5', 'u1', 'wallet_qr', 'pack', 'credits', 6800, 'CNY', 100000, NULL,
            'partially_refunded', 1, 3400, 1, 1, 7),
                ('o6', 'u1', 'card_gateway', 'pro-monthly', 'recurring', 999, 'USD', 5000, 1,
            'paid', 1, 0, 1, 1, 1)",
    )
    .await;
    exec(
        &t.db,
        "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider,
            provider_subscription_id, status, period_start, period_end, last_event_at,
            created_at, updated_at, price_minor, currency, interval_months,
            credits_per_period_hundredths)
         VALUES ('s5', 'u1', 'o6', 'pro-monthly', 'card_gateway', 'sub_5', 'active', 10, 20, 1,
            1, 1, 999, 'USD', 1, 5000),
                ('s6', 'u1', NULL, 'pro', 'card_gateway', 'sub_6', 'active', 10, 20, 1, 1, 1,
            NULL, NULL, NULL, NULL)",
    )
    .await;
    Migrator::up(&t.db, None).await.expect("migrate up");
    let rows = |sql: &'static str| {
        let db = &t.db;
        async move {
            db.query_all_raw(Statement::from_string(db.get_database_backend(), sql))
                .await
                .expect("query")
        }
    };
    let refunds = rows("SELECT order_id, form, amount_minor FROM refunds ORDER BY id").await;
    let refunds: Vec<(String, String, i64)> = refunds
        .iter()
        .map(|r| {
            (
                r.try_get("", "order_id").unwrap(),
                r.try_get("", "form").unwrap(),
                r.try_get("", "amount_minor").unwrap(),
            )
        })
        .collect();
    assert_eq!(refunds, vec![("o5".into(), "total".into(), 3400)]);
    let charges = rows(
        "SELECT subscription_id, order_id, period_start, amount_minor, credits_hundredths
         FROM subscription_charges ORDER BY id",
    )
    .await;
    let charges: Vec<(String, String, i64, i64, Option<i64>)> = charges
        .iter()
        .map(|r| {
            (
                r.try_get("", "subscription_id").unwrap(),
                r.try_get("", "order_id").unwrap(),
                r.try_get("", "period_start").unwrap(),
                r.try_get("", "amount_minor").unwrap(),
                r.try_get("", "credits_hundredths").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        charges,
        vec![("s5".into(), "o6".into(), 10, 999, Some(5000))]
    );
    let refused = [
        // A refund of nothing.
        "INSERT INTO refunds (provider, refund_key, order_id, form, amount_minor, currency,
            received_at) VALUES ('wallet_qr', 'k0', 'o5', 'one', 0, 'CNY', 1)",
        // Against both an order and a charge.
        "INSERT INTO refunds (provider, refund_key, order_id, charge_ref, form, amount_minor,
            currency, received_at) VALUES ('wallet_qr', 'k1', 'o5', 'c', 'one', 1, 'CNY', 1)",
        // The same report twice.
        "INSERT INTO refunds (provider, refund_key, order_id, form, amount_minor, currency,
            received_at) SELECT provider, refund_key, order_id, form, amount_minor, currency, 1
            FROM refunds",
        // More refunded than charged.
        "UPDATE subscription_charges SET refunded_minor = 1000",
    ];
    for sql in refused {
        assert!(
            t.db.execute_unprepared(sql).await.is_err(),
            "accepted: {sql}"
        );
    }
}

#[tokio::test]
async fn sqlite_refunds_and_charges_are_filled_from_what_was_known() {
    let t = TestDb::sqlite().await;
    refunds_and_charges_are_filled_from_what_was_known(&t).await;
}

#[tokio::test]
async fn postgres_refunds_and_charges_are_filled_from_what_was_known() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    refunds_and_charges_are_filled_from_what_was_known(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn sqlite_subscriptions_keep_the_terms_of_their_order() {
    let t = TestDb::sqlite().await;
    subscriptions_keep_the_terms_of_their_order(&t).await;
}

#[tokio::test]
async fn postgres_subscriptions_keep_the_terms_of_their_order() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    subscriptions_keep_the_terms_of_their_order(&t).await;
    t.cleanup().await;
}

/// `(issuer, subject, user_id)` of every host identity, in key order.
async fn host_identities(db: &DatabaseConnection) -> Vec<(String, String, String)> {
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT issuer, subject, user_id FROM host_identities ORDER BY issuer, subject",
        ))
        .await
        .expect("host identities");
    rows.iter()
        .map(|r| {
            let text = |c: &str| r.try_get::<String>("", c).unwrap();
            (text("issuer"), text("subject"), text("user_id"))
        })
        .collect()
}

async fn earlier_host_users_are_mapped_to_themselves(t: &TestDb) {
    Migrator::up(&t.db, Some(2))
        .await
        .expect("migrate to step 2");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    // An earlier host user (no password, placeholder address, id = the token's subject), and a
    // password-less account that is not one.
    exec(
        &t.db,
        "INSERT INTO users (id, email, password_hash, role, created_at)
         VALUES ('host-sub-7', 'host-sub-7@host.invalid', NULL, 'user', 1700000000002),
                ('u3', 'u3@host.invalid', '$argon2id$v=19$y', 'user', 1700000000003)",
    )
    .await;
    exec(
        &t.db,
        "INSERT INTO credit_balances (user_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('host-sub-7', 500, 0, 1)",
    )
    .await;
    Migrator::up(&t.db, None).await.expect("migrate up");
    assert_eq!(
        host_identities(&t.db).await,
        vec![(
            String::new(),
            "host-sub-7".to_owned(),
            "host-sub-7".to_owned()
        )]
    );
    let refused = [
        // A second identity for the same user.
        "INSERT INTO host_identities (issuer, subject, user_id, created_at)
         VALUES ('https://idp.example', 'x', 'host-sub-7', 1)",
        // A user that does not exist.
        "INSERT INTO host_identities (issuer, subject, user_id, created_at)
         VALUES ('https://idp.example', 'y', 'nobody', 1)",
        // An empty subject.
        "INSERT INTO host_identities (issuer, subject, user_id, created_at)
         VALUES ('https://idp.example', '', 'u2', 1)",
    ];
    for sql in refused {
        assert!(
            t.db.execute_unprepared(sql).await.is_err(),
            "accepted: {sql}"
        );
    }
}

async fn the_database_refuses_rows_that_break_the_invariants(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    exec(
        &t.db,
        "INSERT INTO accounts (id, kind, created_by, created_at) VALUES ('u1', 'personal', 'u1', 1)",
    )
    .await;
    let refused = [
        // A negative balance.
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('u1', -1, 0, 1)",
        // A grant with the wrong sign.
        "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, balance_after_hundredths,
            created_at) VALUES ('u1', 'purchase_grant', -5, 0, 1)",
        // An unknown kind.
        "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, balance_after_hundredths,
            created_at) VALUES ('u1', 'gift', 5, 5, 1)",
        // An account that does not exist (foreign keys are on).
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, updated_at)
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
async fn sqlite_earlier_host_users_are_mapped_to_themselves() {
    let t = TestDb::sqlite().await;
    earlier_host_users_are_mapped_to_themselves(&t).await;
}

#[tokio::test]
async fn postgres_earlier_host_users_are_mapped_to_themselves() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    earlier_host_users_are_mapped_to_themselves(&t).await;
    t.cleanup().await;
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

/// Step 9: orders placed before it keep a NULL entitlements snapshot (read as "not kept"), new
/// ones store theirs, and migrating down drops only the column.
async fn orders_before_step_nine_have_no_entitlements_snapshot(t: &TestDb) {
    Migrator::up(&t.db, Some(8))
        .await
        .expect("migrate to step 8");
    for sql in STEP_ONE_DATA {
        exec(&t.db, sql).await;
    }
    let before = users_and_orders(&t.db).await;
    Migrator::up(&t.db, None).await.expect("step 9");
    let count = |sql: &'static str| {
        let db = &t.db;
        async move {
            let backend = db.get_database_backend();
            let row = db
                .query_one_raw(Statement::from_string(backend, sql))
                .await
                .expect(sql)
                .expect("a row");
            row.try_get_by_index::<i64>(0).expect("a count")
        }
    };
    let nulls = "SELECT COUNT(*) FROM orders WHERE plan_entitlements IS NULL";
    assert_eq!(count(nulls).await, 2);
    exec(
        &t.db,
        r#"UPDATE orders SET plan_entitlements = '{"seats":5,"sso":true}' WHERE id = 'o1'"#,
    )
    .await;
    assert_eq!(count(nulls).await, 1);
    assert_eq!(users_and_orders(&t.db).await, before);
    Migrator::down(&t.db, Some(1)).await.expect("down step 9");
    assert_eq!(users_and_orders(&t.db).await, before);
}

#[tokio::test]
async fn sqlite_orders_before_step_nine_have_no_entitlements_snapshot() {
    let t = TestDb::sqlite().await;
    orders_before_step_nine_have_no_entitlements_snapshot(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_orders_before_step_nine_have_no_entitlements_snapshot() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    orders_before_step_nine_have_no_entitlements_snapshot(&t).await;
    t.cleanup().await;
}

/// Step 18 (PostgreSQL): events written after it have larger ids than every event written
/// before it, ids begin with their transaction's id, and migrating down keeps ids growing.
#[tokio::test]
async fn postgres_event_ids_follow_transactions_from_step_eighteen() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    // Sixteen migrations reach step 17 (there is no step 10).
    Migrator::up(&t.db, Some(16)).await.expect("to step 17");
    let insert = |event_id: &'static str| {
        let db = &t.db;
        async move {
            let sql = format!(
                "INSERT INTO events (event_id, event_type, payload, occurred_at) \
                 VALUES ('{event_id}', 'order.paid', '{{}}', 1) RETURNING id, \
                 pg_current_xact_id()::text::bigint AS txid"
            );
            let row = db
                .query_one_raw(Statement::from_string(DbBackend::Postgres, sql))
                .await
                .expect("insert")
                .expect("a row");
            let id: i64 = row.try_get("", "id").expect("id");
            let txid: i64 = row.try_get("", "txid").expect("txid");
            (id, txid)
        }
    };
    let (old_a, _) = insert("evt_a").await;
    let (old_b, _) = insert("evt_b").await;
    assert!(old_a < old_b);
    Migrator::up(&t.db, Some(1)).await.expect("step 18");
    let (new_c, txid_c) = insert("evt_c").await;
    let (new_d, txid_d) = insert("evt_d").await;
    assert!(old_b < new_c && new_c < new_d, "{old_b} {new_c} {new_d}");
    assert_eq!(new_c >> 20, txid_c);
    assert_eq!(new_d >> 20, txid_d);
    Migrator::down(&t.db, Some(1)).await.expect("down step 18");
    let (after_down, _) = insert("evt_e").await;
    assert!(new_d < after_down, "{new_d} {after_down}");
    t.cleanup().await;
}

/// Whether `events` has the index `events_type_id`.
async fn has_type_index(db: &DatabaseConnection) -> bool {
    let sql = match db.get_database_backend() {
        DbBackend::Sqlite => {
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'index' AND name = 'events_type_id'"
        }
        _ => {
            "SELECT COUNT(*) AS n FROM pg_indexes WHERE indexname = 'events_type_id' \
              AND schemaname = current_schema()"
        }
    };
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("index query")
        .expect("a row");
    row.try_get::<i64>("", "n").expect("n") == 1
}

/// Step 19: SQLite's events lose the index by type (and get it back going down); PostgreSQL
/// keeps it.
async fn the_type_index_goes_on_sqlite_only(t: &TestDb) {
    // Seventeen migrations reach step 18 (there is no step 10).
    Migrator::up(&t.db, Some(17)).await.expect("to step 18");
    assert!(has_type_index(&t.db).await);
    // Step 19 alone: later steps are not this test's business.
    Migrator::up(&t.db, Some(1)).await.expect("step 19");
    let sqlite = t.db.get_database_backend() == DbBackend::Sqlite;
    assert_eq!(has_type_index(&t.db).await, !sqlite);
    Migrator::down(&t.db, Some(1)).await.expect("down step 19");
    assert!(has_type_index(&t.db).await);
}

#[tokio::test]
async fn sqlite_the_type_index_goes_on_sqlite_only() {
    let t = TestDb::sqlite().await;
    the_type_index_goes_on_sqlite_only(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_the_type_index_goes_on_sqlite_only() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    the_type_index_goes_on_sqlite_only(&t).await;
    t.cleanup().await;
}

/// Step 21: one allowance per user and plan; the table goes away going down.
async fn a_plan_is_allowed_to_a_user_once(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    exec(
        &t.db,
        "INSERT INTO users (id, email, password_hash, role, created_at) VALUES
         ('u1', 'ada@example.com', NULL, 'admin', 1700000000000)",
    )
    .await;
    let allow = "INSERT INTO plan_allowances (user_id, plan_id, allowed_by, allowed_at)
         VALUES ('u1', 'pro_monthly_legacy', 'u1', 1700000000001)";
    exec(&t.db, allow).await;
    let again =
        t.db.execute_raw(Statement::from_string(t.db.get_database_backend(), allow))
            .await;
    assert!(again.is_err(), "a second allowance of the same plan");
    // Step 21 and those after it.
    let later = (Migrator::migrations().iter())
        .filter(|m| m.name() >= "m20260812_000021")
        .count();
    Migrator::down(&t.db, Some(u32::try_from(later).expect("few")))
        .await
        .expect("down step 21");
    assert!(!tables(&t.db).await.contains(&"plan_allowances".to_owned()));
}

#[tokio::test]
async fn sqlite_a_plan_is_allowed_to_a_user_once() {
    let t = TestDb::sqlite().await;
    a_plan_is_allowed_to_a_user_once(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_a_plan_is_allowed_to_a_user_once() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    a_plan_is_allowed_to_a_user_once(&t).await;
    t.cleanup().await;
}

/// Step 20: an identity is claimed once, with no reference to its account (it outlives it),
/// and the day's counts never go negative.
async fn sign_up_grant_identities_are_unique_and_outlive_their_accounts(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    exec(
        &t.db,
        "INSERT INTO signup_grant_identities (identity, user_id, granted_at)
         VALUES ('email:ada@example.com', 'a_user_long_gone', 1)",
    )
    .await;
    exec(
        &t.db,
        "INSERT INTO signup_grant_days (day, granted, capped) VALUES (20000, 3, 0)",
    )
    .await;
    let refused = [
        "INSERT INTO signup_grant_identities (identity, user_id, granted_at)
         VALUES ('email:ada@example.com', 'another', 2)",
        "INSERT INTO signup_grant_identities (identity, user_id, granted_at)
         VALUES ('', 'another', 2)",
        "INSERT INTO signup_grant_days (day, granted, capped) VALUES (20000, 1, 0)",
        "INSERT INTO signup_grant_days (day, granted, capped) VALUES (20001, -1, 0)",
        "UPDATE signup_grant_days SET capped = capped - 1 WHERE day = 20000",
    ];
    for sql in refused {
        assert!(
            t.db.execute_unprepared(sql).await.is_err(),
            "accepted: {sql}"
        );
    }
}

#[tokio::test]
async fn sqlite_sign_up_grant_identities_are_unique_and_outlive_their_accounts() {
    let t = TestDb::sqlite().await;
    sign_up_grant_identities_are_unique_and_outlive_their_accounts(&t).await;
}

#[tokio::test]
async fn postgres_sign_up_grant_identities_are_unique_and_outlive_their_accounts() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    sign_up_grant_identities_are_unique_and_outlive_their_accounts(&t).await;
    t.cleanup().await;
}

/// A populated ledger as step 24 left it: two users, a paid order, a grant lot, a consumption, a
/// pending hold and a settled one.
const LEDGER_AT_STEP_24: &[&str] = &[
    "INSERT INTO credit_reservations (id, user_id, held_hundredths, status, actual_hundredths,
        charged_hundredths, idempotency_key, request_hash, feature, model, tokens, note,
        created_at, expires_at, resolved_at)
     VALUES ('r1', 'u1', 300, 'pending', NULL, NULL, 'k-r1', 'h1', 'chat', 'gpt', 12, NULL,
        1700000002000, 1700000900000, NULL),
            ('r2', 'u2', 100, 'settled', 80, 80, 'k-r2', 'h2', NULL, NULL, NULL, 'n',
        1700000002100, 1700000900000, 1700000002200)",
    "INSERT INTO credit_transactions (id, user_id, kind, amount_hundredths,
        balance_after_hundredths, order_id, subscription_id, reservation_id, feature, model,
        tokens, note, idempotency_key, request_hash, created_at)
     VALUES (1, 'u1', 'purchase_grant', 10000, 10000, 'o1', NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, 1700000001000),
            (2, 'u1', 'consumption', -250, 9750, NULL, NULL, NULL, 'chat', 'gpt', 40, NULL,
        'k-c1', 'hc1', 1700000001500),
            (3, 'u1', 'reservation_hold', -300, 9450, NULL, NULL, 'r1', NULL, NULL, NULL, NULL,
        NULL, NULL, 1700000002000),
            (4, 'u2', 'admin_adjustment', 500, 500, NULL, NULL, NULL, NULL, NULL, NULL, 'gift',
        'ref-1', 'ha', 1700000002050),
            (5, 'u2', 'reservation_hold', -100, 400, NULL, NULL, 'r2', NULL, NULL, NULL, NULL,
        NULL, NULL, 1700000002100),
            (6, 'u2', 'reservation_settle', 20, 420, NULL, NULL, 'r2', NULL, NULL, NULL, NULL,
        NULL, NULL, 1700000002200)",
    "INSERT INTO credit_grants (id, user_id, transaction_id, source_kind, source_key,
        amount_hundredths, remaining_hundredths, clawed_back_hundredths, shortfall_hundredths,
        expires_at, expired, granted_at)
     VALUES (1, 'u1', 1, 'order', 'o1', 10000, 9450, 0, 0, NULL, FALSE, 1700000001000),
            (2, 'u2', 4, 'admin', 'ref-1', 500, 420, 0, 0, 1800000000000, FALSE, 1700000002050)",
    "INSERT INTO credit_balances (user_id, balance_hundredths, transaction_count, updated_at)
     VALUES ('u1', 9450, 3, 1700000002000), ('u2', 420, 3, 1700000002200)",
];

/// Every row of the four credit tables as text, owner first, in key order; `owner` names the
/// owner column (`user_id` before step 25, `account_id` after).
async fn ledger_rows(db: &DatabaseConnection, owner: &str) -> Vec<String> {
    let tables: [(&str, &str, &[&str]); 4] = [
        (
            "credit_balances",
            "1",
            &["balance_hundredths", "transaction_count", "updated_at"],
        ),
        (
            "credit_reservations",
            "id",
            &[
                "id",
                "held_hundredths",
                "status",
                "actual_hundredths",
                "charged_hundredths",
                "idempotency_key",
                "request_hash",
                "feature",
                "model",
                "tokens",
                "note",
                "created_at",
                "expires_at",
                "resolved_at",
            ],
        ),
        (
            "credit_transactions",
            "id",
            &[
                "id",
                "kind",
                "amount_hundredths",
                "balance_after_hundredths",
                "order_id",
                "subscription_id",
                "reservation_id",
                "feature",
                "model",
                "tokens",
                "note",
                "idempotency_key",
                "request_hash",
                "created_at",
            ],
        ),
        (
            "credit_grants",
            "id",
            &[
                "id",
                "transaction_id",
                "source_kind",
                "source_key",
                "amount_hundredths",
                "remaining_hundredths",
                "clawed_back_hundredths",
                "shortfall_hundredths",
                "expires_at",
                "granted_at",
            ],
        ),
    ];
    let backend = db.get_database_backend();
    let mut out = Vec::new();
    for (table, order, columns) in tables {
        let text: Vec<String> = std::iter::once(owner)
            .chain(columns.iter().copied())
            .map(|c| format!("COALESCE(CAST({c} AS TEXT), '-')"))
            .collect();
        let sql = format!(
            "SELECT {} AS row_text FROM {table} ORDER BY {owner}, {order}",
            text.join(" || '|' || ")
        );
        let rows = db
            .query_all_raw(Statement::from_string(backend, sql))
            .await
            .unwrap_or_else(|e| panic!("{table}: {e}"));
        for row in rows {
            let text: String = row.try_get("", "row_text").expect("row_text");
            out.push(format!("{table} {text}"));
        }
    }
    out
}

async fn count(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .expect("a row");
    row.try_get_by_index::<i64>(0).expect("a count")
}

/// How many steps come before the step named `name`.
fn step_index(name: &str) -> u32 {
    let at = Migrator::migrations()
        .iter()
        .position(|m| m.name() == name)
        .unwrap_or_else(|| panic!("no step {name}"));
    u32::try_from(at).expect("few steps")
}

/// Step 25 on a populated copy: every credit row keeps its values and belongs to its user's
/// personal account (same id); a team account can own credits; down refuses while a team
/// exists, then gives back exactly the rows it was given; up again works.
async fn credits_move_to_personal_accounts_and_back(t: &TestDb) {
    Migrator::up(&t.db, Some(step_index("m20260901_000025_accounts")))
        .await
        .expect("up to step 24");
    for sql in STEP_ONE_DATA.iter().chain(LEDGER_AT_STEP_24) {
        exec(&t.db, sql).await;
    }
    let before = ledger_rows(&t.db, "user_id").await;
    assert_eq!(before.len(), 12, "{before:#?}");
    let people = users_and_orders(&t.db).await;
    Migrator::up(&t.db, Some(1)).await.expect("step 25");
    assert_eq!(ledger_rows(&t.db, "account_id").await, before);
    assert_eq!(users_and_orders(&t.db).await, people);
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM accounts a JOIN users u ON u.id = a.id \
             WHERE a.kind = 'personal' AND a.created_by = u.id AND a.created_at = u.created_at"
        )
        .await,
        2
    );
    // The rebuilt tables keep their constraints: a second consumption under a used key, a
    // negative balance and an unknown account are refused.
    for refused in [
        "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
         balance_after_hundredths, idempotency_key, created_at) \
         VALUES ('u1', 'consumption', -1, 9449, 'k-c1', 1)",
        "UPDATE credit_balances SET balance_hundredths = -1 WHERE account_id = 'u1'",
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
         updated_at) VALUES ('nobody', 1, 0, 1)",
    ] {
        assert!(
            t.db.execute_unprepared(refused).await.is_err(),
            "accepted: {refused}"
        );
    }
    // A team account owns a balance and a member's spend.
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('team_1', 'team', 'Acme', 'u1', 1)",
        "INSERT INTO account_members (account_id, user_id, role, added_at) \
         VALUES ('team_1', 'u2', 'member', 1)",
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
         updated_at) VALUES ('team_1', 0, 1, 1)",
        // The fixture's rows name their ids, which PostgreSQL's sequence does not see.
        "INSERT INTO credit_transactions (id, account_id, member_id, kind, amount_hundredths, \
         balance_after_hundredths, created_at) \
         VALUES (7, 'team_1', 'u2', 'admin_adjustment', 5, 5, 2)",
    ] {
        exec(&t.db, sql).await;
    }
    let refused = Migrator::down(&t.db, Some(1)).await;
    assert!(refused.is_err(), "down with a team account");
    for sql in [
        "DELETE FROM credit_transactions WHERE account_id = 'team_1'",
        "DELETE FROM credit_balances WHERE account_id = 'team_1'",
        "DELETE FROM account_members",
        "DELETE FROM accounts WHERE id = 'team_1'",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::down(&t.db, Some(1)).await.expect("down step 25");
    assert_eq!(ledger_rows(&t.db, "user_id").await, before);
    assert!(!tables(&t.db).await.contains(&"accounts".to_owned()));
    // The owner refers to users again.
    assert!(
        t.db.execute_unprepared(
            "INSERT INTO credit_balances (user_id, balance_hundredths, transaction_count, \
             updated_at) VALUES ('nobody', 1, 0, 1)"
        )
        .await
        .is_err()
    );
    Migrator::up(&t.db, None).await.expect("step 25 again");
    assert_eq!(ledger_rows(&t.db, "account_id").await, before);
}

#[tokio::test]
async fn sqlite_credits_move_to_personal_accounts_and_back() {
    let t = TestDb::sqlite().await;
    credits_move_to_personal_accounts_and_back(&t).await;
}

#[tokio::test]
async fn postgres_credits_move_to_personal_accounts_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    credits_move_to_personal_accounts_and_back(&t).await;
    t.cleanup().await;
}

/// The orders and subscriptions as `(id, user_id, account_id)`.
async fn purchase_owners(db: &DatabaseConnection) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    for table in ["orders", "subscriptions"] {
        let rows = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT id, user_id, account_id FROM {table} ORDER BY id"),
            ))
            .await
            .expect("purchases");
        for row in rows {
            out.push((
                row.try_get("", "id").unwrap(),
                row.try_get("", "user_id").unwrap(),
                row.try_get("", "account_id").unwrap(),
            ));
        }
    }
    out
}

/// Step 26 on a populated copy: every order and subscription belongs to its buyer's personal
/// account; one can belong to a team; down refuses while one does, then drops the column with
/// every row and constraint kept; up again fills it in again.
async fn purchases_belong_to_accounts_and_back(t: &TestDb) {
    Migrator::up(
        &t.db,
        Some(step_index("m20260902_000026_account_purchases")),
    )
    .await
    .expect("up to step 25");
    for sql in STEP_ONE_DATA {
        exec(&t.db, sql).await;
    }
    exec(
        &t.db,
        "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider,
            provider_subscription_id, status, period_start, period_end, last_event_at,
            created_at, updated_at)
         VALUES ('s1', 'u1', 'o1', 'pro', 'card_gateway', 'sub_1', 'active', 1, 2, 1, 1, 1)",
    )
    .await;
    let people = users_and_orders(&t.db).await;
    Migrator::up(&t.db, Some(1)).await.expect("step 26");
    let personal = vec![
        ("o1".to_owned(), "u1".to_owned(), Some("u1".to_owned())),
        ("o2".to_owned(), "u2".to_owned(), Some("u2".to_owned())),
        ("s1".to_owned(), "u1".to_owned(), Some("u1".to_owned())),
    ];
    assert_eq!(purchase_owners(&t.db).await, personal);
    assert_eq!(users_and_orders(&t.db).await, people);
    // An unknown account is refused; a team's purchase is kept.
    assert!(
        t.db.execute_unprepared("UPDATE orders SET account_id = 'nobody' WHERE id = 'o1'")
            .await
            .is_err()
    );
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('team_1', 'team', 'Acme', 'u1', 1)",
        "UPDATE orders SET account_id = 'team_1' WHERE id = 'o1'",
        "UPDATE subscriptions SET account_id = 'team_1' WHERE id = 's1'",
    ] {
        exec(&t.db, sql).await;
    }
    assert!(
        Migrator::down(&t.db, Some(1)).await.is_err(),
        "down with a team's purchases"
    );
    for sql in [
        "UPDATE orders SET account_id = 'u1' WHERE id = 'o1'",
        "UPDATE subscriptions SET account_id = 'u1' WHERE id = 's1'",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::down(&t.db, Some(1)).await.expect("down step 26");
    assert_eq!(users_and_orders(&t.db).await, people);
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM subscriptions WHERE order_id = 'o1'"
        )
        .await,
        1
    );
    // The rebuilt tables keep their references and keys.
    for refused in [
        "UPDATE orders SET user_id = 'nobody' WHERE id = 'o1'",
        "UPDATE subscriptions SET order_id = 'nothing' WHERE id = 's1'",
        "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider,
            provider_subscription_id, status, period_start, period_end, last_event_at,
            created_at, updated_at)
         VALUES ('s1', 'u1', 'o1', 'pro', 'card_gateway', 'sub_9', 'active', 1, 2, 1, 1, 1)",
    ] {
        assert!(
            t.db.execute_unprepared(refused).await.is_err(),
            "accepted: {refused}"
        );
    }
    Migrator::up(&t.db, None).await.expect("step 26 again");
    assert_eq!(purchase_owners(&t.db).await, personal);
}

#[tokio::test]
async fn sqlite_purchases_belong_to_accounts_and_back() {
    let t = TestDb::sqlite().await;
    purchases_belong_to_accounts_and_back(&t).await;
}

#[tokio::test]
async fn postgres_purchases_belong_to_accounts_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    purchases_belong_to_accounts_and_back(&t).await;
    t.cleanup().await;
}

/// Step 27 on a populated copy: teams keep their rows and may name a host organisation; a
/// member's row can wait away from the team; down refuses while one does, then drops both
/// with every other row kept; up again works.
async fn host_organisations_and_back(t: &TestDb) {
    Migrator::up(
        &t.db,
        Some(step_index("m20261001_000027_host_organisations")),
    )
    .await
    .expect("up to step 26");
    for sql in STEP_ONE_DATA.iter().chain(&[
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('team_1', 'team', 'Acme', 'u1', 1)",
        "INSERT INTO account_members (account_id, user_id, role, added_at) \
         VALUES ('team_1', 'u1', 'owner', 1)",
    ]) {
        exec(&t.db, sql).await;
    }
    let people = users_and_orders(&t.db).await;
    Migrator::up(&t.db, Some(1)).await.expect("step 27");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM accounts WHERE host_organisation IS NULL"
        )
        .await,
        count(&t.db, "SELECT COUNT(*) FROM accounts").await,
    );
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at, host_organisation) \
         VALUES ('team_org_1', 'team', 'Org', 'u2', 2, 'org_1')",
        "INSERT INTO account_members_away (account_id, user_id, role, limit_hundredths, \
         limit_window, added_at, away_since) \
         VALUES ('team_org_1', 'u2', 'member', 500, 'day', 2, 3)",
    ] {
        exec(&t.db, sql).await;
    }
    // The away table keeps the member table's rules.
    for refused in [
        "INSERT INTO account_members_away (account_id, user_id, role, added_at, away_since) \
         VALUES ('team_org_1', 'nobody', 'member', 2, 3)",
        "INSERT INTO account_members_away (account_id, user_id, role, added_at, away_since) \
         VALUES ('team_org_1', 'u1', 'boss', 2, 3)",
        "INSERT INTO account_members_away (account_id, user_id, role, limit_hundredths, \
         added_at, away_since) VALUES ('team_org_1', 'u1', 'member', 5, 2, 3)",
        "INSERT INTO account_members_away (account_id, user_id, role, added_at, away_since) \
         VALUES ('team_org_1', 'u2', 'member', 2, 3)",
    ] {
        assert!(
            t.db.execute_unprepared(refused).await.is_err(),
            "accepted: {refused}"
        );
    }
    assert!(
        Migrator::down(&t.db, Some(1)).await.is_err(),
        "down with a member away"
    );
    exec(&t.db, "DELETE FROM account_members_away").await;
    Migrator::down(&t.db, Some(1)).await.expect("down step 27");
    assert_eq!(users_and_orders(&t.db).await, people);
    assert_eq!(
        count(&t.db, "SELECT COUNT(*) FROM account_members").await,
        1
    );
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM accounts WHERE id = 'team_org_1'"
        )
        .await,
        1
    );
    Migrator::up(&t.db, None).await.expect("step 27 again");
}

#[tokio::test]
async fn sqlite_host_organisations_and_back() {
    let t = TestDb::sqlite().await;
    host_organisations_and_back(&t).await;
}

#[tokio::test]
async fn postgres_host_organisations_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    host_organisations_and_back(&t).await;
    t.cleanup().await;
}

/// Steps 30 and 31: a key's binding, and entitlements told per account. Undoing step 31 keeps
/// the users' records and drops the teams'; undoing step 30 is refused while a bound key is
/// live.
async fn bound_keys_and_account_entitlements_and_back(t: &TestDb) {
    Migrator::up(&t.db, None).await.expect("up");
    for sql in [
        STEP_ONE_DATA[0],
        "INSERT INTO accounts (id, kind, created_by, created_at) \
         VALUES ('u1', 'personal', 'u1', 1)",
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('team_1', 'team', 'Acme', 'u1', 1)",
        "INSERT INTO entitlements_told (account_id, entitlements, next_change_at, told_at, \
         version) VALUES ('u1', '{}', NULL, 1, 1)",
        "INSERT INTO entitlements_told (account_id, entitlements, next_change_at, told_at, \
         version) VALUES ('team_1', '{\"seats\":5}', 10, 1, 2)",
        "INSERT INTO api_keys (id, owner_id, name, prefix, key_hash, scopes, created_at, \
         account_id) VALUES ('k1', 'u1', 'acme', 'tly_a', 'h1', 'credits:consume', 1, 'team_1')",
    ] {
        exec(&t.db, sql).await;
    }
    // A record names an account that exists.
    let orphan = "INSERT INTO entitlements_told (account_id, entitlements, told_at) \
                  VALUES ('nobody', '{}', 1)";
    assert!(t.db.execute_unprepared(orphan).await.is_err(), "{orphan}");
    // The steps after 31, then 31.
    let steps = u32::try_from(Migrator::migrations().len()).expect("few steps");
    let after = steps - step_index("m20261005_000031_account_entitlements_told");
    Migrator::down(&t.db, Some(after))
        .await
        .expect("down step 31");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM entitlements_told WHERE user_id = 'u1'"
        )
        .await,
        1
    );
    assert_eq!(
        count(&t.db, "SELECT COUNT(*) FROM entitlements_told").await,
        1
    );
    let refused = Migrator::down(&t.db, Some(1)).await;
    assert!(refused.is_err(), "down with a live bound key");
    exec(&t.db, "UPDATE api_keys SET revoked_at = 2").await;
    Migrator::down(&t.db, Some(1)).await.expect("down step 30");
    Migrator::up(&t.db, None)
        .await
        .expect("steps 30 and 31 again");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM entitlements_told WHERE account_id = 'u1' AND version = 1"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn sqlite_bound_keys_and_account_entitlements_and_back() {
    let t = TestDb::sqlite().await;
    bound_keys_and_account_entitlements_and_back(&t).await;
}

#[tokio::test]
async fn postgres_bound_keys_and_account_entitlements_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    bound_keys_and_account_entitlements_and_back(&t).await;
    t.cleanup().await;
}

/// Step 32: spend limits. Existing balances carry no limits; a limit, its usage and a hold's
/// count go with the step when it is undone, and the balance rows keep their values.
async fn spend_limits_and_back(t: &TestDb) {
    let before = step_index("m20261006_000032_spend_limits");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 31");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    exec(
        &t.db,
        "INSERT INTO accounts (id, kind, name, created_by, created_at)
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
    )
    .await;
    exec(
        &t.db,
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, updated_at)
         VALUES ('u1', 500, 1, 1700000002000)",
    )
    .await;
    Migrator::up(&t.db, Some(1)).await.expect("step 32");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM credit_balances WHERE limit_count = 0"
        )
        .await,
        1
    );
    for sql in [
        "INSERT INTO spend_limits (id, account_id, feature, limit_window, rolling_hours, \
         credits_hundredths, enforcement, created_by, created_at) \
         VALUES ('lim_1', 'u1', NULL, 'rolling', 5, 1000, 'hard', 'u1', 1700000003000)",
        "INSERT INTO spend_limit_usage (limit_id, bucket_start, spent_hundredths) \
         VALUES ('lim_1', 1699999200000, 300)",
        "UPDATE credit_balances SET limit_count = 1 WHERE account_id = 'u1'",
    ] {
        exec(&t.db, sql).await;
    }
    for bad in [
        // A rolling window names its hours; a calendar one does not.
        "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
         enforcement, created_at) VALUES ('lim_2', 'u1', 'rolling', 1000, 'hard', 1)",
        "INSERT INTO spend_limits (id, account_id, limit_window, rolling_hours, \
         credits_hundredths, enforcement, created_at) VALUES ('lim_3', 'u1', 'day', 5, 1000, 'hard', 1)",
        // A limit of nothing, or of an account that does not exist.
        "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
         enforcement, created_at) VALUES ('lim_4', 'u1', 'day', 0, 'hard', 1)",
        "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
         enforcement, created_at) VALUES ('lim_5', 'nobody', 'day', 100, 'hard', 1)",
    ] {
        assert!(t.db.execute_unprepared(bad).await.is_err(), "{bad}");
    }
    Migrator::down(&t.db, Some(1)).await.expect("down step 32");
    assert!(!tables(&t.db).await.contains(&"spend_limits".to_owned()));
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM credit_balances WHERE balance_hundredths = 500"
        )
        .await,
        1
    );
    Migrator::up(&t.db, None).await.expect("step 32 again");
}

/// Step 33: a limit on an API key, and the key behind each spend. Existing limits count every
/// spend of their account; undoing the step is refused while a key carries a limit.
async fn key_limits_and_back(t: &TestDb) {
    let before = step_index("m20261007_000033_key_limits");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 32");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
        "INSERT INTO spend_limits (id, account_id, feature, limit_window, rolling_hours, \
         credits_hundredths, enforcement, created_by, created_at) \
         VALUES ('lim_1', 'u1', NULL, 'day', NULL, 1000, 'hard', 'u1', 1700000003000)",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::up(&t.db, Some(1)).await.expect("step 33");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM spend_limits WHERE api_key_id IS NULL"
        )
        .await,
        1
    );
    exec(
        &t.db,
        "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
         enforcement, created_at, api_key_id) VALUES ('lim_2', 'u1', 'day', 100, 'hard', 1, 'key_1')",
    )
    .await;
    assert!(
        Migrator::down(&t.db, Some(1)).await.is_err(),
        "a key's limit would count every spend without the step"
    );
    exec(&t.db, "DELETE FROM spend_limits WHERE id = 'lim_2'").await;
    Migrator::down(&t.db, Some(1)).await.expect("down step 33");
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM spend_limits").await, 1);
    Migrator::up(&t.db, None).await.expect("step 33 again");
}

#[tokio::test]
async fn sqlite_key_limits_and_back() {
    let t = TestDb::sqlite().await;
    key_limits_and_back(&t).await;
}

#[tokio::test]
async fn postgres_key_limits_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    key_limits_and_back(&t).await;
    t.cleanup().await;
}

#[tokio::test]
async fn sqlite_spend_limits_and_back() {
    let t = TestDb::sqlite().await;
    spend_limits_and_back(&t).await;
}

#[tokio::test]
async fn postgres_spend_limits_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    spend_limits_and_back(&t).await;
    t.cleanup().await;
}

/// Step 34: balance thresholds, absolute or a percentage of the last grant, and the count on
/// the balance row; down drops them and keeps the balances.
async fn balance_thresholds_and_back(t: &TestDb) {
    let before = step_index("m20261008_000034_balance_thresholds");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 33");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
         updated_at) VALUES ('u1', 500, 1, 1700000000000)",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::up(&t.db, Some(1)).await.expect("step 34");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM credit_balances WHERE threshold_count = 0"
        )
        .await,
        1
    );
    for good in [
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, created_at) \
         VALUES ('thr_1', 'u1', 10000, 1)",
        "INSERT INTO balance_thresholds (id, account_id, percent_of_grant, created_at) \
         VALUES ('thr_2', 'u1', 20, 1)",
    ] {
        exec(&t.db, good).await;
    }
    for bad in [
        // Neither or both levels; a level of nothing; a percentage past 100; no such account.
        "INSERT INTO balance_thresholds (id, account_id, created_at) VALUES ('thr_3', 'u1', 1)",
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, percent_of_grant, \
         created_at) VALUES ('thr_4', 'u1', 100, 10, 1)",
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, created_at) \
         VALUES ('thr_5', 'u1', 0, 1)",
        "INSERT INTO balance_thresholds (id, account_id, percent_of_grant, created_at) \
         VALUES ('thr_6', 'u1', 101, 1)",
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, created_at) \
         VALUES ('thr_7', 'nobody', 100, 1)",
        "UPDATE credit_balances SET threshold_count = -1",
    ] {
        assert!(t.db.execute_unprepared(bad).await.is_err(), "{bad}");
    }
    Migrator::down(&t.db, Some(1)).await.expect("down step 34");
    assert!(
        !tables(&t.db)
            .await
            .contains(&"balance_thresholds".to_owned())
    );
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM credit_balances WHERE balance_hundredths = 500"
        )
        .await,
        1
    );
    Migrator::up(&t.db, None).await.expect("step 34 again");
}

#[tokio::test]
async fn sqlite_balance_thresholds_and_back() {
    let t = TestDb::sqlite().await;
    balance_thresholds_and_back(&t).await;
}

#[tokio::test]
async fn postgres_balance_thresholds_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    balance_thresholds_and_back(&t).await;
    t.cleanup().await;
}

/// Step 35: `reached_until` on spend limits, empty on existing ones; down drops it and keeps
/// the limits.
async fn limit_resets_and_back(t: &TestDb) {
    let before = step_index("m20261009_000035_limit_resets");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 34");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
        "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
         enforcement, created_at) VALUES ('lim_1', 'u1', 'day', 100, 'soft', 1)",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::up(&t.db, Some(1)).await.expect("step 35");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM spend_limits WHERE reached_until IS NULL"
        )
        .await,
        1
    );
    exec(
        &t.db,
        "UPDATE spend_limits SET reached_until = 1700086400000 WHERE id = 'lim_1'",
    )
    .await;
    Migrator::down(&t.db, Some(1)).await.expect("down step 35");
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM spend_limits").await, 1);
    Migrator::up(&t.db, None).await.expect("step 35 again");
}

#[tokio::test]
async fn sqlite_limit_resets_and_back() {
    let t = TestDb::sqlite().await;
    limit_resets_and_back(&t).await;
}

#[tokio::test]
async fn postgres_limit_resets_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    limit_resets_and_back(&t).await;
    t.cleanup().await;
}

/// Step 36: `model` and `member_id` on spend limits, empty on existing ones; down is refused
/// while a limit names either, and keeps the others.
async fn limit_scopes_and_back(t: &TestDb) {
    let before = step_index("m20261010_000036_limit_scopes");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 35");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
        "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
         enforcement, created_at) VALUES ('lim_1', 'u1', 'day', 100, 'hard', 1)",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::up(&t.db, Some(1)).await.expect("step 36");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM spend_limits WHERE model IS NULL AND member_id IS NULL"
        )
        .await,
        1
    );
    for (id, column) in [("lim_2", "model"), ("lim_3", "member_id")] {
        exec(
            &t.db,
            &format!(
                "INSERT INTO spend_limits (id, account_id, limit_window, credits_hundredths, \
                 enforcement, created_at, {column}) VALUES ('{id}', 'u1', 'day', 100, 'hard', 1, 'x')"
            ),
        )
        .await;
        assert!(
            Migrator::down(&t.db, Some(1)).await.is_err(),
            "a limit on a {column} would count every spend without the step"
        );
        exec(
            &t.db,
            &format!("DELETE FROM spend_limits WHERE id = '{id}'"),
        )
        .await;
    }
    Migrator::down(&t.db, Some(1)).await.expect("down step 36");
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM spend_limits").await, 1);
    Migrator::up(&t.db, None).await.expect("step 36 again");
}

#[tokio::test]
async fn sqlite_limit_scopes_and_back() {
    let t = TestDb::sqlite().await;
    limit_scopes_and_back(&t).await;
}

#[tokio::test]
async fn postgres_limit_scopes_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    limit_scopes_and_back(&t).await;
    t.cleanup().await;
}

/// Step 37: thresholds at a percentage of a limit; existing thresholds are kept through the
/// rebuild both ways, exactly one level per threshold holds, and down is refused while a
/// threshold sits on a limit.
async fn limit_thresholds_and_back(t: &TestDb) {
    let before = step_index("m20261011_000037_limit_thresholds");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 36");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    for sql in [
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, created_at) \
         VALUES ('thr_1', 'u1', 500, 1)",
        "INSERT INTO balance_thresholds (id, account_id, percent_of_grant, created_at) \
         VALUES ('thr_2', 'u1', 20, 1)",
    ] {
        exec(&t.db, sql).await;
    }
    Migrator::up(&t.db, Some(1)).await.expect("step 37");
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM balance_thresholds WHERE limit_id IS NULL"
        )
        .await,
        2
    );
    let on_limit = "INSERT INTO balance_thresholds (id, account_id, percent_of_limit, limit_id, \
                    created_at) VALUES ('thr_3', 'u1', 50, 'lim_1', 1)";
    exec(&t.db, on_limit).await;
    for refused in [
        // Two levels at once, a percentage without its limit, a limit without its percentage.
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, percent_of_limit, \
         limit_id, created_at) VALUES ('thr_x', 'u1', 5, 50, 'lim_1', 1)",
        "INSERT INTO balance_thresholds (id, account_id, percent_of_limit, created_at) \
         VALUES ('thr_x', 'u1', 50, 1)",
        "INSERT INTO balance_thresholds (id, account_id, credits_hundredths, limit_id, \
         created_at) VALUES ('thr_x', 'u1', 5, 'lim_1', 1)",
    ] {
        assert!(t.db.execute_unprepared(refused).await.is_err(), "{refused}");
    }
    assert!(
        Migrator::down(&t.db, Some(1)).await.is_err(),
        "a threshold on a limit has no place before the step"
    );
    exec(&t.db, "DELETE FROM balance_thresholds WHERE id = 'thr_3'").await;
    Migrator::down(&t.db, Some(1)).await.expect("down step 37");
    assert_eq!(
        count(&t.db, "SELECT COUNT(*) FROM balance_thresholds").await,
        2
    );
    Migrator::up(&t.db, None).await.expect("step 37 again");
}

#[tokio::test]
async fn sqlite_limit_thresholds_and_back() {
    let t = TestDb::sqlite().await;
    limit_thresholds_and_back(&t).await;
}

#[tokio::test]
async fn postgres_limit_thresholds_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    limit_thresholds_and_back(&t).await;
    t.cleanup().await;
}

/// Step 40: every lot gets its category from its source (sign-up grants promotional, other
/// administrator grants compensation, purchases paid) and priority 0, and the ledger's grant
/// rows the category of their lot; down drops the columns and keeps the lots.
async fn grant_categories_and_back(t: &TestDb) {
    let before = step_index("m20261014_000040_grant_categories");
    Migrator::up(&t.db, Some(before))
        .await
        .expect("up to step 39");
    exec(&t.db, STEP_ONE_DATA[0]).await;
    exec(
        &t.db,
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ('u1', 'personal', NULL, 'u1', 1700000000000)",
    )
    .await;
    for (id, kind, source_kind, source_key) in [
        (1, "purchase_grant", "order", "o1"),
        (2, "admin_adjustment", "admin", "signup:u1"),
        (3, "admin_adjustment", "admin", "ticket-7"),
    ] {
        exec(
            &t.db,
            &format!(
                "INSERT INTO credit_transactions (id, account_id, kind, amount_hundredths, \
                 balance_after_hundredths, created_at) VALUES ({id}, 'u1', '{kind}', 100, \
                 {id}00, 1)"
            ),
        )
        .await;
        exec(
            &t.db,
            &format!(
                "INSERT INTO credit_grants (account_id, transaction_id, source_kind, source_key, \
                 amount_hundredths, remaining_hundredths, granted_at) \
                 VALUES ('u1', {id}, '{source_kind}', '{source_key}', 100, 100, 1)"
            ),
        )
        .await;
    }
    exec(
        &t.db,
        "INSERT INTO credit_transactions (id, account_id, kind, amount_hundredths, \
         balance_after_hundredths, created_at) VALUES (4, 'u1', 'consumption', -50, 250, 2)",
    )
    .await;
    Migrator::up(&t.db, Some(1)).await.expect("step 40");
    for (source_key, category) in [
        ("o1", "paid"),
        ("signup:u1", "promotional"),
        ("ticket-7", "compensation"),
    ] {
        let sql = format!(
            "SELECT COUNT(*) FROM credit_grants g JOIN credit_transactions t \
             ON t.id = g.transaction_id WHERE g.source_key = '{source_key}' \
             AND g.category = '{category}' AND g.priority = 0 AND t.grant_category = '{category}'"
        );
        assert_eq!(count(&t.db, &sql).await, 1, "{source_key}");
    }
    assert_eq!(
        count(
            &t.db,
            "SELECT COUNT(*) FROM credit_transactions WHERE grant_category IS NULL"
        )
        .await,
        1,
        "the consumption has no category"
    );
    for refused in [
        "UPDATE credit_grants SET category = 'gift' WHERE source_key = 'o1'",
        "UPDATE credit_grants SET priority = 1001 WHERE source_key = 'o1'",
    ] {
        assert!(t.db.execute_unprepared(refused).await.is_err(), "{refused}");
    }
    Migrator::down(&t.db, Some(1)).await.expect("down step 40");
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM credit_grants").await, 3);
    Migrator::up(&t.db, None).await.expect("step 40 again");
}

#[tokio::test]
async fn sqlite_grant_categories_and_back() {
    let t = TestDb::sqlite().await;
    grant_categories_and_back(&t).await;
}

#[tokio::test]
async fn postgres_grant_categories_and_back() {
    let Some(t) = TestDb::postgres().await else {
        return;
    };
    grant_categories_and_back(&t).await;
    t.cleanup().await;
}
