//! Step 32: spend limits on an account, counted in buckets.
//!
//! - `spend_limits`: at most `credits_hundredths` per window (`limit_window`: hour, day, week,
//!   month, or rolling with `rolling_hours`), hard (refuses) or soft (tells), on one account and
//!   optionally one feature. `limit_window`, not `window`: `WINDOW` is reserved in PostgreSQL.
//! - `spend_limit_usage`: what each limit counted per bucket (the calendar window's start, or
//!   the hour's for a rolling window). Rows of a deleted limit go with it.
//! - `reservation_limit_counts`: the bucket each limit counted a hold in and how much, so that
//!   a release or a settle for less gives that much back there. No reference to the limit: a
//!   limit deleted while a hold is out leaves the row, and giving back to it changes nothing.
//! - `credit_balances.limit_count`: how many limits the account has. It lives on the balance
//!   row, which every spend locks first, so a spend learns whether to read limits from the row
//!   it reads anyway, and making or removing a limit (which updates it) waits for the spends in
//!   flight and moves the row that grouped spends compare before they write.
//!
//! Down drops the tables and the column: the limits stop applying.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Spend limits.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261006_000032_spend_limits"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE spend_limits (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        feature TEXT NULL CHECK (feature IS NULL OR length(feature) BETWEEN 1 AND 64),
        limit_window TEXT NOT NULL CHECK (limit_window IN ('hour', 'day', 'week', 'month', 'rolling')),
        rolling_hours INTEGER NULL CHECK (rolling_hours IS NULL OR rolling_hours BETWEEN 1 AND 744),
        credits_hundredths BIGINT NOT NULL CHECK (credits_hundredths > 0),
        enforcement TEXT NOT NULL CHECK (enforcement IN ('hard', 'soft')),
        created_by TEXT NULL,
        created_at BIGINT NOT NULL,
        CHECK ((limit_window = 'rolling') = (rolling_hours IS NOT NULL))
    )",
    "CREATE INDEX spend_limits_account ON spend_limits (account_id)",
    "CREATE TABLE spend_limit_usage (
        limit_id TEXT NOT NULL REFERENCES spend_limits (id) ON DELETE CASCADE,
        bucket_start BIGINT NOT NULL,
        spent_hundredths BIGINT NOT NULL CHECK (spent_hundredths >= 0),
        PRIMARY KEY (limit_id, bucket_start)
    )",
    "CREATE TABLE reservation_limit_counts (
        reservation_id TEXT NOT NULL REFERENCES credit_reservations (id),
        limit_id TEXT NOT NULL,
        bucket_start BIGINT NOT NULL,
        counted_hundredths BIGINT NOT NULL CHECK (counted_hundredths >= 0),
        PRIMARY KEY (reservation_id, limit_id)
    )",
    "ALTER TABLE credit_balances ADD COLUMN limit_count INTEGER NOT NULL DEFAULT 0 \
     CHECK (limit_count >= 0)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE credit_balances DROP COLUMN limit_count",
    "DROP TABLE reservation_limit_counts",
    "DROP TABLE spend_limit_usage",
    "DROP INDEX spend_limits_account",
    "DROP TABLE spend_limits",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
