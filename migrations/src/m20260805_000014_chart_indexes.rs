//! Step 14: indexes for the admin overview's charts (issue 18).
//!
//! Each chart's statement (`adapters/store/src/reports.rs`) restricts one time column to its
//! window (`>= from AND < until`); without an index of that column's own, every chart read the
//! whole table, which at a million ledger rows is most of the overview's time. One index per
//! column the charts filter on:
//!
//! - `credit_transactions (created_at, kind, amount_hundredths, feature, model)`: the three ledger
//!   charts (credits granted vs consumed per day, consumption by feature and by model) read only
//!   these columns, so their window is one range of this index and never the table (an
//!   index-only scan on PostgreSQL once the table is vacuumed, a covering index on SQLite). It is
//!   one index more on the ledger's insert path; its key starts with the time, so new rows land
//!   at its end.
//! - `orders (paid_at)` and `subscription_charges (paid_at)`: revenue per day.
//! - `subscriptions (created_at)`: subscriptions started per month; `subscriptions (status,
//!   updated_at)`: ended per month (`status IN ('canceled', 'expired')`, one range per status).

use sea_orm_migration::prelude::*;

use crate::sql;

/// The charts' indexes.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260805_000014_chart_indexes"
    }
}

const UP: &[&str] = &[
    "CREATE INDEX credit_transactions_created ON credit_transactions \
     (created_at, kind, amount_hundredths, feature, model)",
    "CREATE INDEX orders_paid ON orders (paid_at)",
    "CREATE INDEX subscription_charges_paid ON subscription_charges (paid_at)",
    "CREATE INDEX subscriptions_created ON subscriptions (created_at)",
    "CREATE INDEX subscriptions_status_updated ON subscriptions (status, updated_at)",
];

const DOWN: &[&str] = &[
    "DROP INDEX subscriptions_status_updated",
    "DROP INDEX subscriptions_created",
    "DROP INDEX subscription_charges_paid",
    "DROP INDEX orders_paid",
    "DROP INDEX credit_transactions_created",
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
