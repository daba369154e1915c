//! The admin console's customer base, written with bulk SQL straight into the schema the
//! migrations created (`generate_series` on PostgreSQL, a recursive CTE on SQLite, 10 000
//! customers per statement), keeping the ledger's invariants: each customer has an admin grant,
//! nine consumptions of 5 credits, the grant's lot holding what is left, and a balance row that
//! adds up. Customer `n` (1-based) has the id `adm-{1000000 + n}` and the e-mail
//! `customer{1000000 + n}@bench.example.com`.

use std::time::Instant;

use anyhow::{Context, ensure};

use super::pool::{Pool, Val};

/// Ledger rows of each seeded customer (so 100 thousand customers hold 1 million rows).
pub const ROWS_PER_CUSTOMER: i64 = 10;
/// What each seeded customer was granted, in hundredths (10 000 credits).
const GRANT: i64 = 1_000_000;
/// What one consumption spent, in hundredths (5 credits).
const COST: i64 = 500;
/// Customers inserted per statement.
const CHUNK: i64 = 10_000;

/// Which database a statement is written for.
#[derive(Clone, Copy)]
enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    fn of(pool: &Pool) -> Self {
        if pool.is_postgres() {
            Dialect::Postgres
        } else {
            Dialect::Sqlite
        }
    }
}

const USERS_SQLITE: &str = "WITH RECURSIVE s(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM s \
    WHERE i < $2) INSERT INTO users (id, email, password_hash, role, created_at) \
    SELECT 'adm-' || (1000000 + i), 'customer' || (1000000 + i) || '@bench.example.com', NULL, \
    'user', CAST($3 AS BIGINT) + i FROM s";

const USERS_POSTGRES: &str = "INSERT INTO users (id, email, password_hash, role, created_at) \
    SELECT 'adm-' || (1000000 + i), 'customer' || (1000000 + i) || '@bench.example.com', NULL, \
    'user', CAST($3 AS BIGINT) + i FROM generate_series($1::bigint, $2::bigint) AS s(i)";

/// The ledger's columns and values per customer `i` and row `j` (0 = the grant).
const LEDGER_SELECT: &str = "SELECT 'adm-' || (1000000 + i), \
    CASE WHEN j = 0 THEN 'admin_adjustment' ELSE 'consumption' END, \
    CASE WHEN j = 0 THEN CAST($4 AS BIGINT) ELSE -500 END, CAST($4 AS BIGINT) - 500 * j, \
    CASE WHEN j = 0 THEN 'bench funding' END, CASE WHEN j = 0 THEN NULL ELSE 'image' END, \
    CASE WHEN j = 0 THEN 'bench-funding' ELSE 'hist-' || j END, 'bench', CAST($5 AS BIGINT) + i * 100 + j";

const LEDGER_INTO: &str = "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
    balance_after_hundredths, note, feature, idempotency_key, request_hash, created_at) ";

const BALANCES_SQLITE: &str = "WITH RECURSIVE s(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM s \
    WHERE i < $2) INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
    updated_at) SELECT 'adm-' || (1000000 + i), CAST($3 AS BIGINT), CAST($4 AS BIGINT), \
    CAST($5 AS BIGINT) FROM s";

const BALANCES_POSTGRES: &str = "INSERT INTO credit_balances (account_id, balance_hundredths, \
    transaction_count, updated_at) SELECT 'adm-' || (1000000 + i), CAST($3 AS BIGINT), \
    CAST($4 AS BIGINT), CAST($5 AS BIGINT) \
    FROM generate_series($1::bigint, $2::bigint) AS s(i)";

/// The grant lots of the customers whose ids lie in `[$2, $3]` (ids of one length sort as
/// their numbers).
const GRANTS: &str = "INSERT INTO credit_grants (account_id, transaction_id, source_kind, \
    source_key, amount_hundredths, remaining_hundredths, expires_at, granted_at) \
    SELECT account_id, id, 'admin', 'bench-funding-' || account_id, amount_hundredths, CAST($1 AS BIGINT), NULL, \
    created_at FROM credit_transactions WHERE account_id >= $2 AND account_id <= $3 \
    AND kind = 'admin_adjustment'";

/// The ledger insert of one chunk on `backend` (built once per process).
fn ledger_sql(backend: Dialect) -> &'static str {
    static SQLITE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static POSTGRES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    match backend {
        Dialect::Sqlite => SQLITE.get_or_init(|| {
            format!(
                "WITH RECURSIVE s(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM s WHERE i < $2), \
                 t(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM t WHERE j < $3 - 1) \
                 {LEDGER_INTO}{LEDGER_SELECT} FROM s CROSS JOIN t"
            )
        }),
        Dialect::Postgres => POSTGRES.get_or_init(|| {
            format!(
                "{LEDGER_INTO}{LEDGER_SELECT} FROM generate_series($1::bigint, $2::bigint) AS \
                 s(i) CROSS JOIN generate_series(0, $3::bigint - 1) AS t(j)"
            )
        }),
    }
}

/// The id of customer `n` (1-based).
#[must_use]
pub fn customer_id(n: i64) -> String {
    format!("adm-{}", 1_000_000 + n)
}

/// Insert customers `from..=to` with their ledgers, lots and balances.
async fn seed_chunk(pool: &Pool, from: i64, to: i64, base_ms: i64) -> anyhow::Result<()> {
    let backend = Dialect::of(pool);
    let (users, balances) = match backend {
        Dialect::Sqlite => (USERS_SQLITE, BALANCES_SQLITE),
        Dialect::Postgres => (USERS_POSTGRES, BALANCES_POSTGRES),
    };
    let left = GRANT - COST * (ROWS_PER_CUSTOMER - 1);
    pool.execute(users, &[Val::I(from), Val::I(to), Val::I(base_ms)])
        .await
        .context("inserting customers")?;
    // Each customer's personal account, as the store opens it with the user.
    pool.execute(
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         SELECT id, 'personal', NULL, id, created_at FROM users \
         WHERE id >= $1 AND id <= $2",
        &[Val::T(customer_id(from)), Val::T(customer_id(to))],
    )
    .await
    .context("opening the customers' accounts")?;
    let ledger = [
        Val::I(from),
        Val::I(to),
        Val::I(ROWS_PER_CUSTOMER),
        Val::I(GRANT),
        Val::I(base_ms),
    ];
    pool.execute(ledger_sql(backend), &ledger)
        .await
        .context("inserting their ledgers")?;
    let range = [
        Val::I(left),
        Val::T(customer_id(from)),
        Val::T(customer_id(to)),
    ];
    pool.execute(GRANTS, &range)
        .await
        .context("inserting their lots")?;
    let rows = [
        Val::I(from),
        Val::I(to),
        Val::I(left),
        Val::I(ROWS_PER_CUSTOMER),
        Val::I(base_ms),
    ];
    pool.execute(balances, &rows)
        .await
        .context("inserting their balances")?;
    Ok(())
}

/// Grow the customer base from `have` to `want` customers, created from `base_ms` on, and check
/// that they add up; the seconds it took.
///
/// # Errors
/// The database refuses, or the seeded customers do not add up.
pub async fn seed_customers(
    pool: &Pool,
    have: i64,
    want: i64,
    base_ms: i64,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut from = have + 1;
    while from <= want {
        let to = (from + CHUNK - 1).min(want);
        seed_chunk(pool, from, to, base_ms).await?;
        from = to + 1;
    }
    if pool.is_postgres() {
        // As autovacuum would after such an insert; the service's plans depend on it.
        pool.execute(
            "ANALYZE users, credit_transactions, credit_grants, credit_balances",
            &[],
        )
        .await?;
    }
    check(pool, want).await?;
    Ok(started.elapsed().as_secs_f64())
}

/// The seeded customers add up: count, balances = ledger sums, one lot each.
async fn check(pool: &Pool, want: i64) -> anyhow::Result<()> {
    let customers = pool
        .scalar(
            "SELECT COUNT(*) FROM credit_balances b WHERE b.account_id LIKE 'adm-%' AND \
             b.balance_hundredths = (SELECT SUM(t.amount_hundredths) FROM credit_transactions t \
             WHERE t.account_id = b.account_id) AND b.transaction_count = (SELECT COUNT(*) FROM \
             credit_transactions t WHERE t.account_id = b.account_id)",
            &[],
        )
        .await?;
    let lots = pool
        .scalar(
            "SELECT COUNT(*) FROM credit_grants WHERE source_key LIKE 'bench-funding-adm-%'",
            &[],
        )
        .await?;
    ensure!(
        customers == Some(want) && lots == Some(want),
        "seeded customers do not add up: {customers:?} consistent balances and {lots:?} lots \
         for {want} customers"
    );
    Ok(())
}

async fn count(pool: &Pool, table: &'static str) -> anyhow::Result<i64> {
    let sql = match table {
        "users" => "SELECT COUNT(*) FROM users",
        _ => "SELECT COUNT(*) FROM credit_transactions",
    };
    Ok(pool.scalar(sql, &[]).await?.unwrap_or(0))
}

/// Every row of `users`, and every row of `credit_transactions`.
///
/// # Errors
/// The database refuses.
pub async fn users_and_ledger_rows(pool: &Pool) -> anyhow::Result<(i64, i64)> {
    Ok((count(pool, "users").await?, count(pool, "ledger").await?))
}
