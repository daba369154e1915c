//! Step 13: the host events' remaining options (issue 17).
//!
//! `entitlements_told`: per user, the effective entitlements last told to the host application
//! (`entitlements.changed`), as a JSON object of feature keys mapped to `true` or a limit, and
//! the earliest moment one of the purchases granting them stops granting access by the passing
//! of time (one-time access running out, a cancelled subscription's paid period or a past-due
//! one's grace ending; `NULL` when none will). A change made by a transaction is told in that
//! transaction, which locks the user's row, compares and updates it; the reconciler looks up the
//! rows whose `next_change_at` has passed (`entitlements_told_next`) and tells what the passing
//! of time changed, exactly once however many instances run it. A user without a row was never
//! told anything (their previous entitlements are the empty map).

use sea_orm_migration::prelude::*;

use crate::sql;

/// `entitlements_told`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260804_000013_event_options"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE entitlements_told (
        user_id TEXT PRIMARY KEY REFERENCES users (id),
        entitlements TEXT NOT NULL,
        next_change_at BIGINT NULL,
        told_at BIGINT NOT NULL
    )",
    "CREATE INDEX entitlements_told_next ON entitlements_told (next_change_at)",
];

const DOWN: &[&str] = &[
    "DROP INDEX entitlements_told_next",
    "DROP TABLE entitlements_told",
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
