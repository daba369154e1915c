//! Step 31: what the host was last told of entitlements is kept per account, not per user.
//!
//! `entitlements.changed` is told for a team's purchases as for a user's own: the record of
//! what was last told (`entitlements_told`, with its version and the moment the passing of time
//! changes it next) is keyed by `account_id`, a reference to `accounts`, where it was keyed by
//! `user_id`, a reference to `users`. Every existing row is a user's, and a user's personal
//! account has the user's id, so the rows move as they are. The table is rebuilt (a new one,
//! the rows copied, the old one dropped, the new one renamed) because SQLite cannot change a
//! column's reference in place; the same statements serve PostgreSQL. The step runs in one
//! transaction on both, which on SQLite also keeps every statement on one connection (another
//! connection of the pool could still hold the old schema and refuse the rename).
//!
//! Down keeps the rows of personal accounts and drops the teams': a binary from before this
//! step tells no team's entitlements, and a team's row only says what was last told.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `entitlements_told` keyed by account.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261005_000031_account_entitlements_told"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE entitlements_told_by_account (
        account_id TEXT PRIMARY KEY REFERENCES accounts (id),
        entitlements TEXT NOT NULL,
        next_change_at BIGINT NULL,
        told_at BIGINT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0
    )",
    "INSERT INTO entitlements_told_by_account \
     (account_id, entitlements, next_change_at, told_at, version) \
     SELECT user_id, entitlements, next_change_at, told_at, version FROM entitlements_told",
    "DROP INDEX entitlements_told_next",
    "DROP TABLE entitlements_told",
    "ALTER TABLE entitlements_told_by_account RENAME TO entitlements_told",
    "CREATE INDEX entitlements_told_next ON entitlements_told (next_change_at)",
];

const DOWN: &[&str] = &[
    "CREATE TABLE entitlements_told_by_user (
        user_id TEXT PRIMARY KEY REFERENCES users (id),
        entitlements TEXT NOT NULL,
        next_change_at BIGINT NULL,
        told_at BIGINT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0
    )",
    "INSERT INTO entitlements_told_by_user \
     (user_id, entitlements, next_change_at, told_at, version) \
     SELECT account_id, entitlements, next_change_at, told_at, version FROM entitlements_told \
     WHERE account_id IN (SELECT id FROM users)",
    "DROP INDEX entitlements_told_next",
    "DROP TABLE entitlements_told",
    "ALTER TABLE entitlements_told_by_user RENAME TO entitlements_told",
    "CREATE INDEX entitlements_told_next ON entitlements_told (next_change_at)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }

    /// The rebuild happens all or not at all, on SQLite too.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
