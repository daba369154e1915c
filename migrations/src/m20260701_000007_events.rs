//! Step 7: the transactional outbox of host events (issue 17, CORRECTNESS.md invariant 13).
//!
//! `events` holds one row per event for the host application, written in the same transaction
//! as the change it describes. `id` is the catch-up feed's cursor and the delivery order;
//! `event_id` (`evt_…`) is the Standard Webhooks `webhook-id`; `payload` is the complete JSON
//! envelope exactly as it is delivered and as the feed returns it.
//!
//! On PostgreSQL an id is handed out before its transaction commits, so a smaller id can become
//! visible after a larger one. `txid` (the writing transaction's id, `xid8`) lets a reader
//! return only rows whose transaction is older than every transaction still running
//! (`txid < pg_snapshot_xmin(pg_current_snapshot())`), so that a cursor never moves past an
//! event that commits later. SQLite has one writer at a time: id order is commit order there,
//! and the column does not exist.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// The host events outbox.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260701_000007_events"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE events (
        id {SERIAL_PK},
        event_id TEXT NOT NULL UNIQUE CHECK (length(event_id) BETWEEN 1 AND 64),
        event_type TEXT NOT NULL CHECK (length(event_type) BETWEEN 1 AND 64),
        user_id TEXT NULL,
        payload TEXT NOT NULL,
        occurred_at BIGINT NOT NULL
    )",
    "CREATE INDEX events_type_id ON events (event_type, id)",
    "CREATE INDEX events_occurred_at ON events (occurred_at)",
];

/// PostgreSQL only: the writing transaction, for the feed's visibility rule.
const POSTGRES_UP: &[&str] =
    &["ALTER TABLE events ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id()"];

const DOWN: &[&str] = &["DROP TABLE events"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await?;
        if manager.get_database_backend() == DbBackend::Postgres {
            sql::run(manager, POSTGRES_UP).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }

    /// SQLite runs DDL in transactions too; a step that fails half-way leaves nothing behind.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
