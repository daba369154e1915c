//! Step 37: balance thresholds at a percentage of a spend limit.
//!
//! - `balance_thresholds.percent_of_limit` and `balance_thresholds.limit_id`: a level at that
//!   percentage of the credits of the account's limit `limit_id` (a monthly ceiling of 5,000
//!   credits at 50%: the balance falling below 2,500). Both or neither; a threshold still has
//!   exactly one of `credits_hundredths`, `percent_of_grant` and `percent_of_limit`. No foreign
//!   key, as for the limits' own columns: removing a limit removes its thresholds in the same
//!   transaction.
//!
//! The table is rebuilt, on both databases alike, because the rule "exactly one of" is a check
//! on the table and SQLite cannot change a table's checks in place. Down rebuilds it as step 34
//! made it, refused while a threshold sits at a percentage of a limit.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Thresholds at a percentage of a limit.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261011_000037_limit_thresholds"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE balance_thresholds_next (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        credits_hundredths BIGINT NULL CHECK (credits_hundredths IS NULL OR credits_hundredths > 0),
        percent_of_grant INTEGER NULL
            CHECK (percent_of_grant IS NULL OR percent_of_grant BETWEEN 1 AND 100),
        created_by TEXT NULL,
        created_at BIGINT NOT NULL,
        percent_of_limit INTEGER NULL
            CHECK (percent_of_limit IS NULL OR percent_of_limit BETWEEN 1 AND 100),
        limit_id TEXT NULL CHECK (limit_id IS NULL OR length(limit_id) BETWEEN 1 AND 64),
        CHECK ((percent_of_limit IS NULL) = (limit_id IS NULL)),
        CHECK ((CASE WHEN credits_hundredths IS NULL THEN 0 ELSE 1 END)
            + (CASE WHEN percent_of_grant IS NULL THEN 0 ELSE 1 END)
            + (CASE WHEN percent_of_limit IS NULL THEN 0 ELSE 1 END) = 1)
    )",
    "INSERT INTO balance_thresholds_next (id, account_id, credits_hundredths, percent_of_grant, \
     created_by, created_at) SELECT id, account_id, credits_hundredths, percent_of_grant, \
     created_by, created_at FROM balance_thresholds",
    "DROP TABLE balance_thresholds",
    "ALTER TABLE balance_thresholds_next RENAME TO balance_thresholds",
    "CREATE INDEX balance_thresholds_account ON balance_thresholds (account_id)",
];

const DOWN: &[&str] = &[
    "CREATE TABLE balance_thresholds_before (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        credits_hundredths BIGINT NULL CHECK (credits_hundredths IS NULL OR credits_hundredths > 0),
        percent_of_grant INTEGER NULL
            CHECK (percent_of_grant IS NULL OR percent_of_grant BETWEEN 1 AND 100),
        created_by TEXT NULL,
        created_at BIGINT NOT NULL,
        CHECK ((credits_hundredths IS NULL) <> (percent_of_grant IS NULL))
    )",
    "INSERT INTO balance_thresholds_before (id, account_id, credits_hundredths, \
     percent_of_grant, created_by, created_at) SELECT id, account_id, credits_hundredths, \
     percent_of_grant, created_by, created_at FROM balance_thresholds",
    "DROP TABLE balance_thresholds",
    "ALTER TABLE balance_thresholds_before RENAME TO balance_thresholds",
    "CREATE INDEX balance_thresholds_account ON balance_thresholds (account_id)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let on_limits = crate::m20260901_000025_accounts::count(
            manager,
            "SELECT COUNT(*) AS n FROM balance_thresholds WHERE limit_id IS NOT NULL",
        )
        .await?;
        if on_limits > 0 {
            return Err(DbErr::Migration(format!(
                "{on_limits} balance threshold(s) sit at a percentage of a limit: the table \
                 before this step cannot hold them, so it cannot be undone until they are removed"
            )));
        }
        sql::run(manager, DOWN).await
    }

    /// The rebuild happens all or not at all, on one connection, on SQLite too.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
