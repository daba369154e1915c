//! Step 6: the webhook inbox is listed to administrators newest first, filtered by provider or
//! outcome (issue 18: the mismatches, foreign-merchant and unknown-order events CORRECTNESS.md
//! promises are visible to admins); these indexes keep a filtered page cheap.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Inbox indexes by provider and by outcome.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260601_000006_inbox_indexes"
    }
}

const UP: &[&str] = &[
    "CREATE INDEX webhook_inbox_provider_id ON webhook_inbox (provider, id)",
    "CREATE INDEX webhook_inbox_outcome_id ON webhook_inbox (outcome, id)",
];

const DOWN: &[&str] = &[
    "DROP INDEX webhook_inbox_outcome_id",
    "DROP INDEX webhook_inbox_provider_id",
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
