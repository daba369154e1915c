//! Step 35: when a reached limit gets its headroom back.
//!
//! - `spend_limits.reached_until`: set, in the spend's transaction, when a spend brings the
//!   limit to its credits or past them (`limit.reached`), to when its window resets; the
//!   reconciler tells `limit.reset` once that time has passed and the limit has room again,
//!   and clears it. `NULL`: nothing to tell.
//! - A partial index on it, so that the reconciler's scan reads only the limits waiting.
//!
//! Down drops both: no reset is told any more.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Limit resets.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261009_000035_limit_resets"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE spend_limits ADD COLUMN reached_until BIGINT NULL",
    "CREATE INDEX spend_limits_reached ON spend_limits (reached_until) \
     WHERE reached_until IS NOT NULL",
];

const DOWN: &[&str] = &[
    "DROP INDEX spend_limits_reached",
    "ALTER TABLE spend_limits DROP COLUMN reached_until",
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
