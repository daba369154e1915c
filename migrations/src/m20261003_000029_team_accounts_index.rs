//! Step 29: an index to list team accounts newest first (the admin console's team accounts).
//!
//! `accounts` holds one personal account per user and, among them, a few teams. The console's
//! list reads the teams alone, newest first (`WHERE kind = 'team' ORDER BY created_at DESC, id
//! DESC`, a keyset page at a time); without an index it would read and sort every user's
//! account for each page. `accounts (kind, created_at, id)` makes each page one range of the
//! index, walked in its order and stopped after the page. It is one index more on the insert of
//! every account, which happens once per user and once per team.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `accounts_kind_created`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261003_000029_team_accounts_index"
    }
}

const UP: &[&str] = &["CREATE INDEX accounts_kind_created ON accounts (kind, created_at, id)"];

const DOWN: &[&str] = &["DROP INDEX accounts_kind_created"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
