//! Step 16: a plan change's proration as a charge of its own (issue 19).
//!
//! `subscription_charges.plan_change_at`: set on the charge of a plan change's proration (an
//! upgrade invoiced at once), to the time the change was asked — the key of the credits that
//! change granted (`credit_grants` source `<subscription>:change:<ms>`). A refund of that charge
//! takes back that change's credits, not a period's. `NULL` on every period's charge, as on all
//! rows before this step.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `subscription_charges.plan_change_at`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260807_000016_change_charges"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE subscription_charges ADD COLUMN plan_change_at BIGINT NULL
        CHECK (plan_change_at IS NULL OR plan_change_at >= 0)",
];

const DOWN: &[&str] = &["ALTER TABLE subscription_charges DROP COLUMN plan_change_at"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
