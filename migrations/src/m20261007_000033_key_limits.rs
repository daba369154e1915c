//! Step 33: spend limits on an API key, and the key behind each spend.
//!
//! - `spend_limits.api_key_id`: a limit that counts only the spends made with that key (a key
//!   bound to the limit's account). NULL: every spend of the account, as before.
//! - `credit_transactions.api_key_id` and `credit_reservations.api_key_id`: the key a spend or a
//!   hold was made with (NULL: made by the account's own user in the browser, by the operator,
//!   or before this step). A limit made on a key starts from what the key already spent in its
//!   window, and a settle counts against the limits of the key that held.
//!
//! No foreign keys: keys are revoked, never deleted, and SQLite cannot drop a column that
//! takes part in one.
//!
//! Down is refused while a key carries a limit: without the column the limit would count every
//! spend of the account. Remove those limits first.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `api_key_id` on limits, transactions and reservations.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261007_000033_key_limits"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE spend_limits ADD COLUMN api_key_id TEXT NULL \
     CHECK (api_key_id IS NULL OR length(api_key_id) BETWEEN 1 AND 64)",
    "ALTER TABLE credit_transactions ADD COLUMN api_key_id TEXT NULL",
    "ALTER TABLE credit_reservations ADD COLUMN api_key_id TEXT NULL",
];

const DOWN: &[&str] = &[
    "ALTER TABLE credit_reservations DROP COLUMN api_key_id",
    "ALTER TABLE credit_transactions DROP COLUMN api_key_id",
    "ALTER TABLE spend_limits DROP COLUMN api_key_id",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let keyed = crate::m20260901_000025_accounts::count(
            manager,
            "SELECT COUNT(*) AS n FROM spend_limits WHERE api_key_id IS NOT NULL",
        )
        .await?;
        if keyed > 0 {
            return Err(DbErr::Migration(format!(
                "{keyed} spend limit(s) are on an API key: without this step they would count \
                 every spend of their account, so it cannot be undone until they are removed"
            )));
        }
        sql::run(manager, DOWN).await
    }
}
