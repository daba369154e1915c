//! Step 36: limits on one AI model and on one member of a team.
//!
//! - `spend_limits.model`: a limit that counts only the spends naming that model (as
//!   `credit_transactions.model` and `credit_reservations.model` record it). NULL: every model.
//! - `spend_limits.member_id`: a limit that counts only the spends of that member of the
//!   account (as `credit_transactions.member_id` and `credit_reservations.member_id` record
//!   them). NULL: every spend. No foreign key, as for `api_key_id`: SQLite cannot drop a column
//!   that takes part in one, and a member who leaves keeps the limit until an owner removes it
//!   (it counts again if they come back).
//!
//! Down is refused while a limit names a model or a member: without the columns it would count
//! every spend of its account. Remove those limits first.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `model` and `member_id` on limits.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261010_000036_limit_scopes"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE spend_limits ADD COLUMN model TEXT NULL \
     CHECK (model IS NULL OR length(model) BETWEEN 1 AND 64)",
    "ALTER TABLE spend_limits ADD COLUMN member_id TEXT NULL \
     CHECK (member_id IS NULL OR length(member_id) BETWEEN 1 AND 64)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE spend_limits DROP COLUMN member_id",
    "ALTER TABLE spend_limits DROP COLUMN model",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let narrowed = crate::m20260901_000025_accounts::count(
            manager,
            "SELECT COUNT(*) AS n FROM spend_limits \
             WHERE model IS NOT NULL OR member_id IS NOT NULL",
        )
        .await?;
        if narrowed > 0 {
            return Err(DbErr::Migration(format!(
                "{narrowed} spend limit(s) are on a model or a member: without this step they \
                 would count every spend of their account, so it cannot be undone until they \
                 are removed"
            )));
        }
        sql::run(manager, DOWN).await
    }
}
