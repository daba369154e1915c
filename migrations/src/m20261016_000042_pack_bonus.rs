//! Step 42: a credits pack's bonus on the orders that bought it.
//!
//! - `orders.bonus_credits_hundredths`: the bonus credits the pack gave when the order was
//!   placed (frozen with the rest of what was sold), granted as `bonus` with the payment; NULL
//!   for every other order.
//! - `orders.bonus_expires_in_days`: when they expire, in days after the payment; NULL: never.
//!
//! Dynamic plans keep their bonus in `pricing_plan.data`, which needs no column. Down drops
//! the columns.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `bonus_credits_hundredths` and `bonus_expires_in_days` on orders.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261016_000042_pack_bonus"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE orders ADD COLUMN bonus_credits_hundredths BIGINT NULL \
     CHECK (bonus_credits_hundredths IS NULL OR bonus_credits_hundredths > 0)",
    "ALTER TABLE orders ADD COLUMN bonus_expires_in_days INTEGER NULL \
     CHECK (bonus_expires_in_days IS NULL OR bonus_expires_in_days BETWEEN 1 AND 3650)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE orders DROP COLUMN bonus_expires_in_days",
    "ALTER TABLE orders DROP COLUMN bonus_credits_hundredths",
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
