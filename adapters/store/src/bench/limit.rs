//! The database's own limit: the consume transaction the store runs (`ledger/spend.rs` and
//! `postings.rs`), issued straight through sqlx on the benchmark's [`Pool`].
//!
//! [`Shape::Store`] is the store's whole transaction: `BEGIN IMMEDIATE` on SQLite (a plain
//! `BEGIN`, READ COMMITTED, on PostgreSQL); the idempotency-key lookup; the read the spend is
//! decided from, the balance with its lots (the balance row locked `FOR UPDATE OF b` on
//! PostgreSQL); the conditional decrement `UPDATE … WHERE balance >= $n RETURNING`; the ledger
//! insert `… ON CONFLICT DO NOTHING RETURNING`; the conditional lot draw-down; `COMMIT`.
//! [`Shape::Core`] is the decrement and the insert alone.

use anyhow::{Context, bail};
use sea_orm::sqlx;
use serde::Serialize;

use super::pool::{Backend, Pool};

/// The columns the store reads back (`rows::TRANSACTION_COLUMNS`).
macro_rules! transaction_columns {
    () => {
        "id, account_id, kind, amount_hundredths, balance_after_hundredths, order_id, \
         subscription_id, reservation_id, feature, model, tokens, note, created_at, request_hash"
    };
}

const REPLAY: &str = concat!(
    "SELECT ",
    transaction_columns!(),
    " FROM credit_transactions WHERE account_id = $1 AND kind = $2 AND idempotency_key = $3"
);
const DEBIT: &str = "UPDATE credit_balances SET balance_hundredths = balance_hundredths - $2, \
    transaction_count = transaction_count + 1, updated_at = $3 \
    WHERE account_id = $1 AND balance_hundredths >= $2 RETURNING balance_hundredths";
const INSERT: &str = concat!(
    "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, balance_after_hundredths, \
     order_id, subscription_id, reservation_id, feature, model, tokens, note, idempotency_key, \
     request_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
     ON CONFLICT DO NOTHING RETURNING ",
    transaction_columns!()
);
/// The balance with its spendable lots (`postings::lock_balance_with_lots`), without the lock.
macro_rules! balance_with_lots {
    () => {
        "SELECT b.balance_hundredths, g.id, g.remaining_hundredths FROM credit_balances b \
         LEFT JOIN credit_grants g ON g.account_id = b.account_id AND NOT g.expired \
         AND g.remaining_hundredths > 0 WHERE b.account_id = $1"
    };
}
const LOCK_SQLITE: &str = balance_with_lots!();
const LOCK_POSTGRES: &str = concat!(balance_with_lots!(), " FOR UPDATE OF b");
const DRAW: &str = "UPDATE credit_grants SET remaining_hundredths = remaining_hundredths - $2 \
    WHERE id = $1 AND account_id = $3 AND remaining_hundredths >= $2";

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
    ($tx:expr, $c:expr, $shape:expr, $lock:expr) => {{
        let c: &Consume<'_> = $c;
        let mut lots: Vec<(i64, Option<i64>, Option<i64>)> = Vec::new();
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
            lots = sqlx::query_as($lock)
                .bind(c.user)
                .fetch_all(&mut *$tx)
                .await?;
            if lots.first().is_none_or(|lot| lot.0 < c.amount) {
                bail!("the balance does not cover the consumption");
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
            let lot = lots
                .iter()
                .find_map(|lot| match (lot.1, lot.2) {
                    (Some(id), Some(remaining)) if remaining >= c.amount => Some(id),
                    _ => None,
                })
                .context("no lot covers the consumption")?;
            let drawn = sqlx::query(DRAW)
                .bind(lot)
                .bind(c.amount)
                .bind(c.user)
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
            consume_body!(tx, c, shape, LOCK_SQLITE);
            tx.commit().await?;
        }
        Backend::Postgres(p) => {
            let mut tx = p.begin().await?;
            consume_body!(tx, c, shape, LOCK_POSTGRES);
            tx.commit().await?;
        }
    }
    Ok(())
}
