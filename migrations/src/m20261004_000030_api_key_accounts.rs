//! Step 30: an API key may be bound to one account.
//!
//! `api_keys.account_id` names the account a key acts for alone (NULL: the whole app, as every
//! key made before this step). It is read with the key on each authenticated call, which
//! already reads the row by its hash, so it needs no index. There is no foreign key: SQLite
//! cannot drop a column that takes part in one, and accounts are never deleted (the application
//! checks the account exists when it makes the key).

use sea_orm_migration::prelude::*;

use crate::sql;

/// `api_keys.account_id`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261004_000030_api_key_accounts"
    }
}

const UP: &[&str] = &["ALTER TABLE api_keys ADD COLUMN account_id TEXT NULL \
     CHECK (account_id IS NULL OR length(account_id) BETWEEN 1 AND 64)"];

const DOWN: &[&str] = &["ALTER TABLE api_keys DROP COLUMN account_id"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
