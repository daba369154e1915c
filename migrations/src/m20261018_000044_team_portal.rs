//! Step 44: a customer-portal link for a team's billing.
//!
//! - `portal_sessions.account_id`: the team whose billing the link (and the session it opens)
//!   shows; NULL for the user's own billing, as every link made before this step. No foreign
//!   key: SQLite cannot drop a column a foreign key names, and the link is checked against the
//!   team's members when it is made and the user's role at every action.
//!
//! Down drops the column (and with it the team links: they would open the user's own billing).

use sea_orm_migration::prelude::*;

use crate::sql;

/// `account_id` on portal links and sessions.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261018_000044_team_portal"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE portal_sessions ADD COLUMN account_id TEXT NULL \
     CHECK (account_id IS NULL OR length(account_id) BETWEEN 1 AND 128)",
];

const DOWN: &[&str] = &[
    "DELETE FROM portal_sessions WHERE account_id IS NOT NULL",
    "ALTER TABLE portal_sessions DROP COLUMN account_id",
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
