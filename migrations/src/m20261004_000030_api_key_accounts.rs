//! Step 30: an API key may be bound to one account.
//!
//! `api_keys.account_id` names the account a key acts for alone (NULL: the whole app, as every
//! key made before this step). It is read with the key on each authenticated call, which
//! already reads the row by its hash, so it needs no index. There is no foreign key: SQLite
//! cannot drop a column that takes part in one, and accounts are never deleted (the application
//! checks the account exists when it makes the key).
//!
//! Down is refused while a key that is not revoked is bound to an account: without the column
//! it would act for every user. Revoke such keys first (a binary from before this step, run on
//! this schema, would widen them the same way: roll the binary back only after revoking them).

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
        let bound = crate::m20260901_000025_accounts::count(
            manager,
            "SELECT COUNT(*) AS n FROM api_keys WHERE account_id IS NOT NULL \
             AND revoked_at IS NULL",
        )
        .await?;
        if bound > 0 {
            return Err(DbErr::Migration(format!(
                "{bound} API key(s) bound to an account are not revoked: without this step they \
                 would act for every user, so it cannot be undone until they are revoked"
            )));
        }
        sql::run(manager, DOWN).await
    }
}
