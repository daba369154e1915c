//! Step 38: a count of the changes to an account's set of spend limits.
//!
//! - `credit_balances.limit_changes`: one more each time a limit of the account is made or
//!   removed, under the balance row's lock like `limit_count`. `limit_count` alone does not
//!   tell a removal followed by an addition from no change at all; a grouped spend decided
//!   without the row's lock (PostgreSQL, group commit) writes only if both still hold what it
//!   read, so a limit made or removed in between sends it to the locked path.
//!
//! Down drops the column; nothing else reads it.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `credit_balances.limit_changes`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261012_000038_limit_changes"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE credit_balances ADD COLUMN limit_changes BIGINT NOT NULL \
     DEFAULT 0 CHECK (limit_changes >= 0)",
];

const DOWN: &[&str] = &["ALTER TABLE credit_balances DROP COLUMN limit_changes"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
