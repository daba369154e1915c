//! The database's own limit: the consume transaction the store runs (`ledger/spend.rs` and
//! `postings.rs`), issued straight through sqlx on the benchmark's [`Pool`].
//!
//! [`Shape::Store`] is the store's whole transaction: `BEGIN IMMEDIATE` on SQLite (a plain
//! `BEGIN`, READ COMMITTED, on PostgreSQL); the idempotency-key lookup; the conditional decrement
//! `UPDATE … WHERE balance >= $n RETURNING`; the ledger insert `… ON CONFLICT DO NOTHING
//! RETURNING`; the lot read and the conditional lot draw-down; `COMMIT`. [`Shape::Core`] is the
//! decrement and the insert alone.

use anyhow::{Context, bail};
use sea_orm::sqlx;
use serde::Serialize;

use super::pool::{Backend, Pool};

/// The columns the store reads back (`rows::TRANSACTION_COLUMNS`).
macro_rules! transaction_columns {
    () => {
        "id, user_id, kind, amount_hundredths, balance_after_hundredths, order_id, \
         subscription_id, reservation_id, feature, model, tokens, note, created_at, request_hash"
    };
}

const REPLAY: &str = concat!(
    "SELECT ",
    transaction_columns!(),
    " FROM credit_transactions WHERE user_id = $1 AND kind = $2 AND idempotency_key = $3"
);
const DEBIT: &str = "UPDATE credit_balances SET balance_hundredths = balance_hundredths - $2, \
    transaction_count = transaction_count + 1, updated_at = $3 \
    WHERE user_id = $1 AND balance_hundredths >= $2 RETURNING balance_hundredths";
const INSERT: &str = concat!(
    "INSERT INTO credit_transactions (user_id, kind, amount_hundredths, balance_after_hundredths, \
     order_id, subscription_id, reservation_id, feature, model, tokens, note, idempotency_key, \
     request_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
     ON CONFLICT DO NOTHING RETURNING ",
    transaction_columns!()
);
const LOTS: &str = "SELECT id, remaining_hundredths, expires_at, granted_at FROM credit_grants \
    WHERE user_id = $1 AND NOT expired AND remaining_hundredths > 0";
const DRAW: &str = "UPDATE credit_grants SET remaining_hundredths = remaining_hundredths - $2 \
    WHERE id = $1 AND remaining_hundredths >= $2";

/// Which statements a transaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// The store's whole consume transaction.
    Store,
    /// The decrement and the ledger insert only.
    Core,
}

/// One consumption to write.
#[derive(Debug, Clone)]
pub struct Consume<'a> {
    /// Whose balance.
    pub user: &'a str,
    /// Its idempotency key.
    pub key: String,
    /// How much, in hundredths.
    pub amount: i64,
    /// When, in milliseconds.
    pub now_ms: i64,
}

/// The statements of one consume, inside the open transaction `$tx` (either backend).
macro_rules! consume_body {
    ($tx:expr, $c:expr, $shape:expr) => {{
        let c: &Consume<'_> = $c;
        if $shape == Shape::Store {
            let seen = sqlx::query(REPLAY)
                .bind(c.user)
                .bind("consumption")
                .bind(c.key.as_str())
                .fetch_optional(&mut *$tx)
                .await?;
            if seen.is_some() {
                bail!("idempotency key {} used twice", c.key);
            }
        }
        let after: Option<i64> = sqlx::query_scalar(DEBIT)
            .bind(c.user)
            .bind(c.amount)
            .bind(c.now_ms)
            .fetch_optional(&mut *$tx)
            .await?;
        let after = after.context("the balance does not cover the consumption")?;
        let written = sqlx::query(INSERT)
            .bind(c.user)
            .bind("consumption")
            .bind(-c.amount)
            .bind(after)
            .bind(None::<String>)
            .bind(None::<String>)
            .bind(None::<String>)
            .bind("image")
            .bind(None::<String>)
            .bind(None::<i64>)
            .bind(None::<String>)
            .bind(c.key.as_str())
            .bind("bench")
            .bind(c.now_ms)
            .fetch_optional(&mut *$tx)
            .await?;
        if written.is_none() {
            bail!("the ledger insert wrote nothing");
        }
        if $shape == Shape::Store {
            let lots: Vec<(i64, i64, Option<i64>, i64)> = sqlx::query_as(LOTS)
                .bind(c.user)
                .fetch_all(&mut *$tx)
                .await?;
            let lot = lots
                .iter()
                .find(|lot| lot.1 >= c.amount)
                .context("no lot covers the consumption")?;
            let drawn = sqlx::query(DRAW)
                .bind(lot.0)
                .bind(c.amount)
                .execute(&mut *$tx)
                .await?
                .rows_affected();
            if drawn != 1 {
                bail!("a lot changed during the draw-down");
            }
        }
    }};
}

/// Run one consume transaction of `shape` on `pool`.
///
/// # Errors
/// The database refuses, the balance or a lot does not cover the amount, or the key was used.
pub async fn consume(pool: &Pool, shape: Shape, c: &Consume<'_>) -> anyhow::Result<()> {
    match &pool.0 {
        Backend::Sqlite(p) => {
            let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
            consume_body!(tx, c, shape);
            tx.commit().await?;
        }
        Backend::Postgres(p) => {
            let mut tx = p.begin().await?;
            consume_body!(tx, c, shape);
            tx.commit().await?;
        }
    }
    Ok(())
}
