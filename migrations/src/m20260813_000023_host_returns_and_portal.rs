//! Step 22: the host application's return URLs on an order (where its buyer goes back to after
//! the checkout, NULL when the host gave none), and customer-portal sessions: a single-use link
//! (its token's SHA-256 digest, valid minutes) that, once opened, becomes a short browser session
//! restricted to one user's billing (its own token's digest), with the host's return URL.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `orders.success_url`, `orders.cancel_url` and the `portal_sessions` table.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260813_000023_host_returns_and_portal"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE orders ADD COLUMN success_url TEXT \
        CHECK (success_url IS NULL OR length(success_url) BETWEEN 1 AND 2048)",
    "ALTER TABLE orders ADD COLUMN cancel_url TEXT \
        CHECK (cancel_url IS NULL OR length(cancel_url) BETWEEN 1 AND 2048)",
    "CREATE TABLE portal_sessions (
        link_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users (id),
        return_url TEXT NOT NULL CHECK (length(return_url) BETWEEN 1 AND 2048),
        locale TEXT CHECK (locale IS NULL OR length(locale) BETWEEN 1 AND 16),
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        link_expires_at BIGINT NOT NULL,
        session_hash TEXT UNIQUE,
        opened_at BIGINT,
        session_expires_at BIGINT,
        CHECK ((session_hash IS NULL AND opened_at IS NULL AND session_expires_at IS NULL)
            OR (session_hash IS NOT NULL AND opened_at IS NOT NULL
                AND session_expires_at IS NOT NULL))
    )",
    "CREATE INDEX portal_sessions_link_expires_at ON portal_sessions (link_expires_at)",
];

const DOWN: &[&str] = &[
    "DROP TABLE portal_sessions",
    "ALTER TABLE orders DROP COLUMN cancel_url",
    "ALTER TABLE orders DROP COLUMN success_url",
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
