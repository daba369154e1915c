//! Step 40: what each grant's credits are, and its priority in spend order.
//!
//! - `credit_grants.category`: `paid` (bought), `promotional` (a sign-up grant, a promotion),
//!   `bonus` (given with a purchase) or `compensation` (a refund in credits, goodwill). Lots
//!   already granted get theirs from their source: sign-up grants (`admin`, `signup:…`) are
//!   promotional, other administrator grants compensation, orders and subscription periods
//!   paid.
//! - `credit_grants.priority`: 0 to 1000, higher spent first (before expiry and category).
//! - `credit_transactions.grant_category`: the category of a grant's ledger row, for the
//!   history and the `credits.granted` event; NULL on every other row.
//!
//! Down drops the columns: spend order falls back to expiry and age.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `category` and `priority` on grant lots, `grant_category` on the ledger.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261014_000040_grant_categories"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE credit_grants ADD COLUMN category TEXT NOT NULL DEFAULT 'paid' \
     CHECK (category IN ('paid', 'promotional', 'bonus', 'compensation'))",
    "ALTER TABLE credit_grants ADD COLUMN priority INTEGER NOT NULL DEFAULT 0 \
     CHECK (priority BETWEEN 0 AND 1000)",
    "UPDATE credit_grants SET category = 'promotional' \
     WHERE source_kind = 'admin' AND source_key LIKE 'signup:%'",
    "UPDATE credit_grants SET category = 'compensation' \
     WHERE source_kind = 'admin' AND source_key NOT LIKE 'signup:%'",
    "ALTER TABLE credit_transactions ADD COLUMN grant_category TEXT NULL \
     CHECK (grant_category IS NULL OR grant_category IN \
     ('paid', 'promotional', 'bonus', 'compensation'))",
    "UPDATE credit_transactions SET grant_category = \
     (SELECT g.category FROM credit_grants g WHERE g.transaction_id = credit_transactions.id) \
     WHERE id IN (SELECT transaction_id FROM credit_grants)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE credit_transactions DROP COLUMN grant_category",
    "ALTER TABLE credit_grants DROP COLUMN priority",
    "ALTER TABLE credit_grants DROP COLUMN category",
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
