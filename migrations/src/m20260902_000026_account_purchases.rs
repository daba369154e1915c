//! The account a purchase belongs to: `orders.account_id` and `subscriptions.account_id`, a
//! reference to `accounts`. Every existing order and subscription belongs to its buyer's
//! personal account, whose id is the buyer's (step 25), so both are filled in with `user_id`
//! (after giving a personal account to any user still without one).
//! An order an owner or admin places for a team names the team; the subscription it starts
//! takes its order's account. `user_id` stays: who bought.
//!
//! Down refuses while a purchase belongs to another account than its buyer's: it would move to
//! the buyer. SQLite drops a column only without a reference on it, so down rebuilds both tables
//! from their stored definitions (as step 25 does).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::m20260901_000025_accounts::{columns_of, count, rebuild_with, stored_definition};
use crate::sql;

/// `orders.account_id` and `subscriptions.account_id`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260902_000026_account_purchases"
    }
}

const TABLES: &[&str] = &["orders", "subscriptions"];

/// The column each table gets, as SQLite stores it in the table's definition.
const COLUMN: &str = "account_id TEXT NULL REFERENCES accounts (id)";

const UP: &[&str] = &[
    // Every user has had a personal account since step 25; one written without it (by a
    // binary from before that step, during a rolling deploy) gets it now.
    "INSERT INTO accounts (id, kind, name, created_by, created_at)
        SELECT id, 'personal', NULL, id, created_at FROM users u
        WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = u.id)",
    "ALTER TABLE orders ADD COLUMN account_id TEXT NULL REFERENCES accounts (id)",
    "ALTER TABLE subscriptions ADD COLUMN account_id TEXT NULL REFERENCES accounts (id)",
    "UPDATE orders SET account_id = user_id",
    "UPDATE subscriptions SET account_id = user_id",
    "CREATE INDEX orders_account ON orders (account_id, created_at, id)",
    "CREATE INDEX subscriptions_account ON subscriptions (account_id)",
];

const DROP_INDEXES: &[&str] = &[
    "DROP INDEX orders_account",
    "DROP INDEX subscriptions_account",
];

const DROP_COLUMNS: &[&str] = &[
    "ALTER TABLE subscriptions DROP COLUMN account_id",
    "ALTER TABLE orders DROP COLUMN account_id",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in TABLES {
            let others = count(
                manager,
                &format!("SELECT COUNT(*) AS n FROM {table} WHERE account_id <> user_id"),
            )
            .await?;
            if others > 0 {
                return Err(DbErr::Migration(format!(
                    "{others} row(s) of {table} belong to a team: this step cannot be undone \
                     until they are deleted"
                )));
            }
        }
        sql::run(manager, DROP_INDEXES).await?;
        if manager.get_database_backend() != DbBackend::Sqlite {
            return sql::run(manager, DROP_COLUMNS).await;
        }
        for table in TABLES {
            let definition = stored_definition(manager, table).await?;
            let added = format!(", {COLUMN}");
            if definition.matches(&added).count() != 1 {
                return Err(DbErr::Migration(format!(
                    "{table}: expected exactly one `{COLUMN}` in {definition}"
                )));
            }
            let kept = definition.replacen(&added, "", 1);
            let columns: Vec<String> = columns_of(manager, table)
                .await?
                .into_iter()
                .filter(|c| c != "account_id")
                .collect();
            rebuild_with(manager, table, &kept, &columns.join(", ")).await?;
        }
        Ok(())
    }

    /// The rebuilds happen all or not at all, on SQLite too.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
