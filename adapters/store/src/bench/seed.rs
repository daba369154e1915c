//! The benchmark's users and ledgers, written straight to the database, keeping the ledger's
//! invariants: every balance equals the sum of its user's transactions, `transaction_count`
//! counts them, and the grant lot holds what is left. A million ledger rows could not be made
//! through the API in reasonable time, so they are written here (the users funded this way have
//! no password; users that sign in are registered over the API). Also the checks the benchmark
//! makes of what the service wrote, and the host events its delivery figure starts from.

use std::time::Instant;

use anyhow::{Context, bail};

use super::pool::{Pool, Val};

/// What each benchmark user is funded with, in hundredths (10^10 credits).
pub const FUNDING: i64 = 1_000_000_000_000;
/// What one synthetic history row spends, in hundredths (the `image` feature's 5 credits).
const HISTORY_COST: i64 = 500;

/// Users without a password (consumed for by the service API key).
///
/// # Errors
/// The database refuses.
pub async fn create_users(pool: &Pool, ids: &[String], now_ms: i64) -> anyhow::Result<()> {
    for id in ids {
        pool.execute(
            "INSERT INTO users (id, email, password_hash, role, created_at) \
             VALUES ($1, $2, NULL, 'user', $3)",
            &[
                Val::T(id.clone()),
                Val::T(format!("{id}@bench.example.com")),
                Val::I(now_ms),
            ],
        )
        .await?;
        pool.execute(
            "INSERT INTO accounts (id, kind, name, created_by, created_at) \
             VALUES ($1, 'personal', NULL, $1, $2)",
            &[Val::T(id.clone()), Val::I(now_ms)],
        )
        .await?;
    }
    Ok(())
}

/// Give `user` (without a balance yet) `amount` as an admin grant at `at_ms`: the
/// `admin_adjustment` transaction, its lot with `remaining` left, and the balance row.
async fn grant(
    pool: &Pool,
    user: &str,
    amount: i64,
    remaining: i64,
    count: i64,
    at_ms: i64,
) -> anyhow::Result<()> {
    let transaction = pool
        .scalar(
            "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
             balance_after_hundredths, note, idempotency_key, request_hash, created_at) \
             VALUES ($1, 'admin_adjustment', $2, $2, 'bench funding', 'bench-funding', $3, $4) \
             RETURNING id",
            &[
                Val::T(user.to_owned()),
                Val::I(amount),
                Val::T(format!("{amount}|bench funding")),
                Val::I(at_ms),
            ],
        )
        .await?
        .ok_or_else(|| anyhow::anyhow!("the funding insert returned no id"))?;
    pool.execute(
        "INSERT INTO credit_grants (account_id, transaction_id, source_kind, source_key, \
         amount_hundredths, remaining_hundredths, expires_at, granted_at) \
         VALUES ($1, $2, 'admin', $3, $4, $5, NULL, $6)",
        &[
            Val::T(user.to_owned()),
            Val::I(transaction),
            Val::T(format!("bench-funding-{user}")),
            Val::I(amount),
            Val::I(remaining),
            Val::I(at_ms),
        ],
    )
    .await?;
    pool.execute(
        "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, updated_at) \
         VALUES ($1, $2, $3, $4)",
        &[
            Val::T(user.to_owned()),
            Val::I(remaining),
            Val::I(count),
            Val::I(at_ms),
        ],
    )
    .await?;
    Ok(())
}

/// Fund each of `users` with [`FUNDING`].
///
/// # Errors
/// The database refuses.
pub async fn fund(pool: &Pool, users: &[String], now_ms: i64) -> anyhow::Result<()> {
    for user in users {
        grant(pool, user, FUNDING, FUNDING, 1, now_ms).await?;
    }
    Ok(())
}

/// A team account `team` funded with [`FUNDING`], its members `members` (users created by
/// [`create_users`]; the first is the owner, the rest plain members), each with a daily limit of
/// `limit` hundredths: a limit checked on every spend but never reached by the benchmark.
///
/// # Errors
/// The database refuses.
pub async fn create_team(
    pool: &Pool,
    team: &str,
    members: &[String],
    limit: i64,
    now_ms: i64,
) -> anyhow::Result<()> {
    let owner = members.first().context("a team needs an owner")?;
    pool.execute(
        "INSERT INTO accounts (id, kind, name, created_by, created_at) \
         VALUES ($1, 'team', 'Bench team', $2, $3)",
        &[
            Val::T(team.to_owned()),
            Val::T(owner.clone()),
            Val::I(now_ms),
        ],
    )
    .await?;
    for (i, member) in members.iter().enumerate() {
        pool.execute(
            "INSERT INTO account_members (account_id, user_id, role, limit_hundredths, \
             limit_window, window_start, window_spent_hundredths, added_at) \
             VALUES ($1, $2, $3, $4, 'day', 0, 0, $5)",
            &[
                Val::T(team.to_owned()),
                Val::T(member.clone()),
                Val::T(if i == 0 { "owner" } else { "member" }.to_owned()),
                Val::I(limit),
                Val::I(now_ms),
            ],
        )
        .await?;
    }
    grant(pool, team, FUNDING, FUNDING, 1, now_ms).await
}

const HISTORY_SQLITE: &str = "WITH RECURSIVE seq(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM seq \
    WHERE i < $2) INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
    balance_after_hundredths, feature, idempotency_key, request_hash, created_at) \
    SELECT $3, 'consumption', -500, $4 - 500 * i, 'image', 'hist-' || i, 'bench', $5 + i FROM seq";

const HISTORY_POSTGRES: &str = "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
    balance_after_hundredths, feature, idempotency_key, request_hash, created_at) \
    SELECT $3, 'consumption', -500, $4 - 500 * i, 'image', 'hist-' || i, 'bench', $5 + i \
    FROM generate_series($1::bigint, $2::bigint) AS s(i)";

/// Give `user` (registered, without a balance) a ledger of exactly `rows` transactions: one
/// funding grant, then `rows - 1` consumptions of 5 credits, one millisecond apart, ending a
/// minute before `now_ms`. Inserted by `INSERT … SELECT` over a generated series, in chunks of
/// 10 000 rows per transaction on SQLite and 100 000 on PostgreSQL (then `ANALYZE`, as
/// autovacuum would). Returns the seconds it took.
///
/// # Errors
/// The database refuses.
pub async fn history(pool: &Pool, user: &str, rows: i64, now_ms: i64) -> anyhow::Result<f64> {
    let started = Instant::now();
    let rows = rows.max(1);
    let first_ms = now_ms - rows - 60_000;
    let spent = HISTORY_COST * (rows - 1);
    grant(pool, user, FUNDING, FUNDING - spent, rows, first_ms).await?;
    let (sql, chunk) = if pool.is_postgres() {
        (HISTORY_POSTGRES, 100_000)
    } else {
        (HISTORY_SQLITE, 10_000)
    };
    let mut from = 1;
    while from < rows {
        let to = (from + chunk - 1).min(rows - 1);
        pool.execute(
            sql,
            &[
                Val::I(from),
                Val::I(to),
                Val::T(user.to_owned()),
                Val::I(FUNDING),
                Val::I(first_ms),
            ],
        )
        .await?;
        from = to + 1;
    }
    if pool.is_postgres() {
        pool.execute("ANALYZE credit_transactions", &[]).await?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Check the ledger invariants of `user`: balance = sum of transactions, count = rows.
///
/// # Errors
/// The database refuses, or an invariant does not hold.
pub async fn check_ledger(pool: &Pool, user: &str) -> anyhow::Result<()> {
    let u = || [Val::T(user.to_owned())];
    let sum = pool
        .scalar(
            "SELECT CAST(COALESCE(SUM(amount_hundredths), 0) AS BIGINT) FROM credit_transactions \
             WHERE account_id = $1",
            &u(),
        )
        .await?;
    let count = pool
        .scalar(
            "SELECT COUNT(*) FROM credit_transactions WHERE account_id = $1",
            &u(),
        )
        .await?;
    let balance = pool
        .scalar(
            "SELECT balance_hundredths FROM credit_balances WHERE account_id = $1",
            &u(),
        )
        .await?;
    let counted = pool
        .scalar(
            "SELECT transaction_count FROM credit_balances WHERE account_id = $1",
            &u(),
        )
        .await?;
    anyhow::ensure!(
        sum == balance && count == counted,
        "ledger of {user} inconsistent: sum {sum:?} vs balance {balance:?}, {count:?} rows vs \
         transaction_count {counted:?}"
    );
    Ok(())
}

/// What the service wrote for the paid orders of every buyer whose id starts with `prefix`:
/// their paid orders, their orders' grant lots, and the distinct orders those lots are for
/// (`prefix` ≤ id < `prefix` with its last character incremented: a range of the index).
///
/// # Errors
/// The database refuses, or `prefix` is empty.
pub async fn order_grants_of_prefix(pool: &Pool, prefix: &str) -> anyhow::Result<(i64, i64, i64)> {
    let mut end: Vec<char> = prefix.chars().collect();
    let last = end
        .pop()
        .ok_or_else(|| anyhow::anyhow!("an empty buyer prefix"))?;
    let next = char::from_u32(u32::from(last) + 1)
        .ok_or_else(|| anyhow::anyhow!("a buyer prefix ending in {last:?}"))?;
    end.push(next);
    let range = || [Val::T(prefix.to_owned()), Val::T(end.iter().collect())];
    let paid = pool
        .scalar(
            "SELECT COUNT(*) FROM orders WHERE user_id >= $1 AND user_id < $2 \
             AND status = 'paid'",
            &range(),
        )
        .await?
        .unwrap_or(0);
    let grants = pool
        .scalar(
            "SELECT COUNT(*) FROM credit_grants WHERE account_id >= $1 AND account_id < $2 \
             AND source_kind = 'order'",
            &range(),
        )
        .await?
        .unwrap_or(0);
    let distinct = pool
        .scalar(
            "SELECT COUNT(DISTINCT source_key) FROM credit_grants \
             WHERE account_id >= $1 AND account_id < $2 AND source_kind = 'order'",
            &range(),
        )
        .await?
        .unwrap_or(0);
    Ok((paid, grants, distinct))
}

const EVENTS_POSTGRES: &str = "INSERT INTO events (event_id, event_type, user_id, payload, \
    occurred_at) SELECT 'evt_bench_' || $3 || '_' || g, 'credits.granted', NULL, \
    '{\"id\":\"evt_bench_' || $3 || '_' || g || '\",\"type\":\"credits.granted\",\
    \"timestamp\":\"2026-01-01T00:00:00Z\",\"data\":{}}', $4 \
    FROM generate_series(CAST($1 AS BIGINT), CAST($2 AS BIGINT)) AS g";

const EVENTS_SQLITE: &str = "WITH RECURSIVE s(g) AS (SELECT $1 UNION ALL SELECT g + 1 FROM s \
    WHERE g < $2) INSERT INTO events (event_id, event_type, user_id, payload, occurred_at) \
    SELECT 'evt_bench_' || $3 || '_' || g, 'credits.granted', NULL, \
    '{\"id\":\"evt_bench_' || $3 || '_' || g || '\",\"type\":\"credits.granted\",\
    \"timestamp\":\"2026-01-01T00:00:00Z\",\"data\":{}}', $4 FROM s";

/// Write `events` `credits.granted` events in one statement, at `now` (milliseconds).
///
/// # Errors
/// The database refuses, or writes another number of events.
pub async fn write_events(pool: &Pool, events: usize, now: i64) -> anyhow::Result<()> {
    let sql = if pool.is_postgres() {
        EVENTS_POSTGRES
    } else {
        EVENTS_SQLITE
    };
    let last = i64::try_from(events)?;
    let written = pool
        .execute(
            sql,
            &[
                Val::I(1),
                Val::I(last),
                Val::T(now.to_string()),
                Val::I(now),
            ],
        )
        .await
        .context("writing the events")?;
    if written != u64::try_from(events)? {
        bail!("wrote {written} events of {events}");
    }
    Ok(())
}
