//! Step 4: a subscription remembers what was sold (CORRECTNESS.md invariant 10). Each
//! subscription keeps the price (minor units and currency), the billing interval and the credits
//! per period of the order that started it; renewals are checked against these and grant these
//! credits, never a plan's as edited later.
//!
//! Existing rows are filled from their originating order (`subscriptions.order_id`) when that
//! order is recurring; a row without one keeps NULL terms, and the service treats its renewals as
//! mismatches rather than guess.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// The sold-terms columns of `subscriptions`, and their backfill.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260401_000004_subscription_terms"
    }
}

const ADD_COLUMNS: &[&str] = &[
    "ALTER TABLE subscriptions ADD COLUMN price_minor BIGINT NULL
        CHECK (price_minor IS NULL OR price_minor >= 0)",
    "ALTER TABLE subscriptions ADD COLUMN currency TEXT NULL
        CHECK (currency IS NULL OR length(currency) = 3)",
    "ALTER TABLE subscriptions ADD COLUMN credits_per_period_hundredths BIGINT NULL
        CHECK (credits_per_period_hundredths IS NULL OR credits_per_period_hundredths > 0)",
];

/// Price, currency and interval are there together or not at all (SQLite cannot add a table
/// constraint, so there the rule sits on the interval column; it is dropped first going down).
const INTERVAL_SQLITE: &str = "ALTER TABLE subscriptions ADD COLUMN interval_months INTEGER NULL
    CHECK ((interval_months IS NULL OR interval_months BETWEEN 1 AND 1200)
        AND (price_minor IS NULL) = (interval_months IS NULL)
        AND (currency IS NULL) = (interval_months IS NULL))";

const INTERVAL_POSTGRES: &[&str] = &[
    "ALTER TABLE subscriptions ADD COLUMN interval_months INTEGER NULL
        CHECK (interval_months IS NULL OR interval_months BETWEEN 1 AND 1200)",
    "ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_sold_terms_together
        CHECK ((price_minor IS NULL) = (interval_months IS NULL)
            AND (currency IS NULL) = (interval_months IS NULL))",
];

/// Fill existing subscriptions from the recurring order that started them.
const BACKFILL: &str = "UPDATE subscriptions SET
        price_minor = (SELECT o.amount_minor FROM orders o WHERE o.id = subscriptions.order_id),
        currency = (SELECT o.currency FROM orders o WHERE o.id = subscriptions.order_id),
        interval_months = (SELECT o.months FROM orders o WHERE o.id = subscriptions.order_id),
        credits_per_period_hundredths =
            (SELECT o.credits_hundredths FROM orders o WHERE o.id = subscriptions.order_id)
     WHERE EXISTS (SELECT 1 FROM orders o WHERE o.id = subscriptions.order_id
        AND o.plan_type = 'recurring' AND o.months BETWEEN 1 AND 1200)";

const DOWN: &[&str] = &[
    "ALTER TABLE subscriptions DROP COLUMN interval_months",
    "ALTER TABLE subscriptions DROP COLUMN credits_per_period_hundredths",
    "ALTER TABLE subscriptions DROP COLUMN currency",
    "ALTER TABLE subscriptions DROP COLUMN price_minor",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let mut up: Vec<&str> = ADD_COLUMNS.to_vec();
        match manager.get_database_backend() {
            DbBackend::Sqlite => up.push(INTERVAL_SQLITE),
            _ => up.extend_from_slice(INTERVAL_POSTGRES),
        }
        up.push(BACKFILL);
        sql::run(manager, &up).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }

    /// SQLite runs DDL in transactions too; a step that fails half-way leaves nothing behind.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
