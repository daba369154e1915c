//! Step 17: the outbox's events lose their `occurred_at` index (issue 17, the outbox's cost).
//!
//! Every host event is inserted in the transaction of the change it tells, so each index on
//! `events` is paid for on the webhook's and the spend's hot path. The only reader of
//! `events_occurred_at` was the retention purge, which now walks the table in `id` order (the
//! primary key) instead: events are written in time order, so the oldest ids are the oldest
//! events, and an out-of-order one is simply deleted by a later pass.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Drop `events_occurred_at`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260808_000017_events_purge_by_id"
    }
}

const UP: &[&str] = &["DROP INDEX events_occurred_at"];

const DOWN: &[&str] = &["CREATE INDEX events_occurred_at ON events (occurred_at)"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
