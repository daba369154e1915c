//! Step 21: plans an operator allowed a user to buy or switch to although they are hidden (a
//! private offer, or a legacy price kept for one customer). A hidden plan is for sale only to a
//! user who holds it or who has a row here; each row names the administrator who allowed it and
//! when (the audit log keeps the same, with removals).

use sea_orm_migration::prelude::*;

use crate::sql;

/// The `plan_allowances` table.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260812_000021_plan_allowances"
    }
}

const UP: &[&str] = &["CREATE TABLE plan_allowances (
        user_id TEXT NOT NULL REFERENCES users (id),
        plan_id TEXT NOT NULL CHECK (length(plan_id) BETWEEN 1 AND 64),
        allowed_by TEXT NOT NULL REFERENCES users (id),
        allowed_at BIGINT NOT NULL,
        PRIMARY KEY (user_id, plan_id)
    )"];

const DOWN: &[&str] = &["DROP TABLE plan_allowances"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
