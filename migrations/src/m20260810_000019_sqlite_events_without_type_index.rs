//! Step 19 (SQLite only): the outbox's events lose their `(event_type, id)` index (issue 17, the
//! outbox's cost).
//!
//! Every host event is inserted in the transaction of the change it tells, and on SQLite every
//! index on `events` is a page more that each of those commits writes to the WAL and syncs under
//! the one write lock: a paid credits pack tells `order.paid` and `credits.granted`, two types,
//! so this index alone wrote two pages per webhook. Its only reader was the catch-up feed's
//! `type` filter, which on SQLite now walks the primary key from the cursor instead and looks at a
//! bounded number of events per read (`adapters/store/src/outbox.rs`, `FEED_SCAN_EVENTS`),
//! handing back how far it looked so that the reader's cursor still moves on.
//!
//! PostgreSQL keeps the index: it writes many transactions at once, and its measured cost there
//! was within the budget.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// Drop `events_type_id` (SQLite).
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260810_000019_sqlite_events_without_type_index"
    }
}

const SQLITE_UP: &[&str] = &["DROP INDEX events_type_id"];

const SQLITE_DOWN: &[&str] = &["CREATE INDEX events_type_id ON events (event_type, id)"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Sqlite {
            sql::run(manager, SQLITE_UP).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Sqlite {
            sql::run(manager, SQLITE_DOWN).await?;
        }
        Ok(())
    }
}
