//! Step 22: a host user's contact details, as the host application's token last said them:
//! `host_identities.email` (the address its e-mail claim names, kept only when mail to it can
//! arrive) and `host_identities.name` (its name claim). Tally tells the payment provider who is
//! paying with them (receipts, the Merchant of Record's invoices, a pre-filled checkout); the
//! user's own `users.email` stays the `.invalid` placeholder, which no provider is ever sent.

use sea_orm_migration::prelude::*;

use crate::sql;

/// The contact columns of `host_identities`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260813_000022_host_user_contact"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE host_identities ADD COLUMN email TEXT NULL \
     CHECK (email IS NULL OR length(email) BETWEEN 3 AND 254)",
    "ALTER TABLE host_identities ADD COLUMN name TEXT NULL \
     CHECK (name IS NULL OR length(name) BETWEEN 1 AND 200)",
];

const DOWN: &[&str] = &[
    "ALTER TABLE host_identities DROP COLUMN name",
    "ALTER TABLE host_identities DROP COLUMN email",
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
