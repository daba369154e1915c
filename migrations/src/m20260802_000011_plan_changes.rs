//! Step 11: plan changes (issue 19). A subscriber's switch to another recurring plan is asked of
//! the provider and confirmed by the provider's own event; in between, the subscription keeps the
//! change it asked for (`pending_*`): the plan, the terms that plan sells (price, currency,
//! interval, credits per period), whether it is an upgrade or a downgrade, and when it was asked.
//! The provider's subscription-updated event is checked against these; only a matching one moves
//! the subscription's plan and sold terms, and clears them.
//!
//! Existing subscriptions have no change pending (all NULL).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// The `pending_*` columns of `subscriptions`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260802_000011_plan_changes"
    }
}

const ADD_COLUMNS: &[&str] = &[
    "ALTER TABLE subscriptions ADD COLUMN pending_plan_id TEXT NULL",
    "ALTER TABLE subscriptions ADD COLUMN pending_price_minor BIGINT NULL
        CHECK (pending_price_minor IS NULL OR pending_price_minor >= 0)",
    "ALTER TABLE subscriptions ADD COLUMN pending_currency TEXT NULL
        CHECK (pending_currency IS NULL OR length(pending_currency) = 3)",
    "ALTER TABLE subscriptions ADD COLUMN pending_interval_months INTEGER NULL
        CHECK (pending_interval_months IS NULL OR pending_interval_months BETWEEN 1 AND 1200)",
    "ALTER TABLE subscriptions ADD COLUMN pending_credits_hundredths BIGINT NULL
        CHECK (pending_credits_hundredths IS NULL OR pending_credits_hundredths > 0)",
    "ALTER TABLE subscriptions ADD COLUMN pending_direction TEXT NULL
        CHECK (pending_direction IS NULL OR pending_direction IN ('upgrade', 'downgrade'))",
];

/// The change is there whole or not at all (SQLite cannot add a table constraint, so there the
/// rule sits on the last column; it is dropped first going down).
const REQUESTED_AT_SQLITE: &str = "ALTER TABLE subscriptions ADD COLUMN pending_requested_at \
    BIGINT NULL CHECK ((pending_plan_id IS NULL) = (pending_requested_at IS NULL)
        AND (pending_price_minor IS NULL) = (pending_requested_at IS NULL)
        AND (pending_currency IS NULL) = (pending_requested_at IS NULL)
        AND (pending_interval_months IS NULL) = (pending_requested_at IS NULL)
        AND (pending_direction IS NULL) = (pending_requested_at IS NULL))";

const REQUESTED_AT_POSTGRES: &[&str] = &[
    "ALTER TABLE subscriptions ADD COLUMN pending_requested_at BIGINT NULL",
    "ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_pending_change_whole
        CHECK ((pending_plan_id IS NULL) = (pending_requested_at IS NULL)
            AND (pending_price_minor IS NULL) = (pending_requested_at IS NULL)
            AND (pending_currency IS NULL) = (pending_requested_at IS NULL)
            AND (pending_interval_months IS NULL) = (pending_requested_at IS NULL)
            AND (pending_direction IS NULL) = (pending_requested_at IS NULL))",
];

const DOWN_POSTGRES_CONSTRAINT: &str =
    "ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_pending_change_whole";

const DOWN: &[&str] = &[
    "ALTER TABLE subscriptions DROP COLUMN pending_requested_at",
    "ALTER TABLE subscriptions DROP COLUMN pending_direction",
    "ALTER TABLE subscriptions DROP COLUMN pending_credits_hundredths",
    "ALTER TABLE subscriptions DROP COLUMN pending_interval_months",
    "ALTER TABLE subscriptions DROP COLUMN pending_currency",
    "ALTER TABLE subscriptions DROP COLUMN pending_price_minor",
    "ALTER TABLE subscriptions DROP COLUMN pending_plan_id",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut up: Vec<&str> = ADD_COLUMNS.to_vec();
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
