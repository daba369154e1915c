//! Step 39: what a spend's tokens were by kind and how it was priced.
//!
//! - `credit_transactions.usage_tokens`: the call's tokens by kind when the caller reported
//!   them, as five counts separated by commas in the order input, output, cache read, cache
//!   write, reasoning (`tokens` keeps their total). NULL: reported as one count, or not a call.
//! - `credit_transactions.price_from`: when the price-book entry that priced it took effect
//!   (the entry is the one of its `model`). NULL: priced by the per-kilotoken or fixed rules.
//! - `credit_transactions.cost_basis_millionths`: the provider's cost of the use, in
//!   millionths of the price book's cost currency, rounded up, when the entry records costs.
//!
//! Down drops the three columns: what they recorded is lost, the credits are not.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `usage_tokens`, `price_from` and `cost_basis_millionths` on the ledger.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261013_000039_token_usage"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE credit_transactions ADD COLUMN usage_tokens TEXT NULL \
     CHECK (usage_tokens IS NULL OR length(usage_tokens) BETWEEN 9 AND 64)",
    "ALTER TABLE credit_transactions ADD COLUMN price_from BIGINT NULL",
    "ALTER TABLE credit_transactions ADD COLUMN cost_basis_millionths BIGINT NULL \
     CHECK (cost_basis_millionths IS NULL OR cost_basis_millionths >= 0)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE credit_transactions DROP COLUMN cost_basis_millionths",
    "ALTER TABLE credit_transactions DROP COLUMN price_from",
    "ALTER TABLE credit_transactions DROP COLUMN usage_tokens",
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
