//! Step 9: entitlements (issue 17). An order keeps the entitlements of the plan it sold, as it
//! keeps the plan's price, credits and duration, so that editing or deleting a plan later changes
//! nothing a paying user holds: `orders.plan_entitlements` is a JSON object of feature keys
//! mapped to `true` or a non-negative integer.
//!
//! Orders placed before this step have `NULL`: they were sold before plans declared
//! entitlements, and readers fall back to the plan as it is now. A dynamic plan's own
//! entitlements live in `pricing_plan.data` with its other non-column fields, so that table
//! needs no new column.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `orders.plan_entitlements`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260703_000009_plan_entitlements"
    }
}

const UP: &[&str] = &["ALTER TABLE orders ADD COLUMN plan_entitlements TEXT NULL"];

const DOWN: &[&str] = &["ALTER TABLE orders DROP COLUMN plan_entitlements"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
