//! Step 24: `entitlements_told.version`, moved on by every write of the row. The service works a
//! user's entitlements out from what it read and writes them only if the row still has the
//! version it read (compare-and-set): a concurrent change of the same user's purchases makes
//! one of the two writes work them out again.

use sea_orm_migration::prelude::*;

use crate::sql;

/// The version of `entitlements_told`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260814_000024_entitlements_told_version"
    }
}

const UP: &[&str] = &["ALTER TABLE entitlements_told ADD COLUMN version BIGINT NOT NULL DEFAULT 0"];

const DOWN: &[&str] = &["ALTER TABLE entitlements_told DROP COLUMN version"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
