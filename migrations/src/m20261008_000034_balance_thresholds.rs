//! Step 34: balance thresholds on an account.
//!
//! - `balance_thresholds`: a level of the account's balance the host is told about when the
//!   balance crosses it (`credits.threshold_crossed` downwards, `credits.recovered` back up):
//!   `credits_hundredths` credits, or `percent_of_grant` percent of the account's last grant;
//!   exactly one of the two.
//! - `credit_balances.threshold_count`: how many thresholds the account has. It lives on the
//!   balance row, which every posting updates anyway, so a posting learns from the row it
//!   writes whether to read thresholds at all (an account without any pays nothing), and
//!   grouped spends, which compare the row before they write, leave such an account to the
//!   path that tells crossings.
//!
//! Down drops the table and the column: no crossing is told any more.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Balance thresholds.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261008_000034_balance_thresholds"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE balance_thresholds (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        credits_hundredths BIGINT NULL CHECK (credits_hundredths IS NULL OR credits_hundredths > 0),
        percent_of_grant INTEGER NULL
            CHECK (percent_of_grant IS NULL OR percent_of_grant BETWEEN 1 AND 100),
        created_by TEXT NULL,
        created_at BIGINT NOT NULL,
        CHECK ((credits_hundredths IS NULL) <> (percent_of_grant IS NULL))
    )",
    "CREATE INDEX balance_thresholds_account ON balance_thresholds (account_id)",
    "ALTER TABLE credit_balances ADD COLUMN threshold_count INTEGER NOT NULL DEFAULT 0 \
     CHECK (threshold_count >= 0)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE credit_balances DROP COLUMN threshold_count",
    "DROP INDEX balance_thresholds_account",
    "DROP TABLE balance_thresholds",
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
