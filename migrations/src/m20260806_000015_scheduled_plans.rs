//! Step 15: switches at the period's end (issue 19). A provider without a plan-change API cannot
//! move a live subscription to another price, so there the subscriber's switch is scheduled: the
//! subscription is cancelled at its period's end and keeps the plan asked for
//! (`scheduled_plan_id`) and when it was asked (`scheduled_requested_at`). When it ends, the
//! subscriber starts that plan with a new checkout; resuming the subscription clears them.
//!
//! Existing subscriptions have no switch scheduled (both NULL).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// The `scheduled_*` columns of `subscriptions`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260806_000015_scheduled_plans"
    }
}

const PLAN: &str = "ALTER TABLE subscriptions ADD COLUMN scheduled_plan_id TEXT NULL \
    CHECK (scheduled_plan_id IS NULL OR length(scheduled_plan_id) BETWEEN 1 AND 64)";

/// Both or neither (SQLite cannot add a table constraint, so there the rule sits on the second
/// column, which is dropped first going down).
const REQUESTED_AT_SQLITE: &str = "ALTER TABLE subscriptions ADD COLUMN scheduled_requested_at \
    BIGINT NULL CHECK ((scheduled_plan_id IS NULL) = (scheduled_requested_at IS NULL))";

const REQUESTED_AT_POSTGRES: &[&str] = &[
    "ALTER TABLE subscriptions ADD COLUMN scheduled_requested_at BIGINT NULL",
    "ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_scheduled_switch_whole
        CHECK ((scheduled_plan_id IS NULL) = (scheduled_requested_at IS NULL))",
];

const DOWN_POSTGRES_CONSTRAINT: &str =
    "ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_scheduled_switch_whole";

const DOWN: &[&str] = &[
    "ALTER TABLE subscriptions DROP COLUMN scheduled_requested_at",
    "ALTER TABLE subscriptions DROP COLUMN scheduled_plan_id",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut up: Vec<&str> = vec![PLAN];
        match manager.get_database_backend() {
            DbBackend::Sqlite => up.push(REQUESTED_AT_SQLITE),
            _ => up.extend_from_slice(REQUESTED_AT_POSTGRES),
        }
        sql::run(manager, &up).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut down: Vec<&str> = Vec::new();
        if manager.get_database_backend() != DbBackend::Sqlite {
            down.push(DOWN_POSTGRES_CONSTRAINT);
        }
        down.extend_from_slice(DOWN);
        sql::run(manager, &down).await
    }
}
