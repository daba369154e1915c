//! Step 12: the admin console (issue 18).
//!
//! - `admin_audit`: one row per administrator's action (who, what, when, the object, its state
//!   before and after as JSON text), written in the transaction of the action; listed newest
//!   first by `id`.
//! - Indexes that keep every console list one index range per page: customers by e-mail prefix
//!   (`lower(email)`; on PostgreSQL with `text_pattern_ops`, so the prefix range does not depend
//!   on the database's collation) or id prefix, customers newest first, and orders newest first
//!   overall, by status and by provider. A customer's orders and ledger already have theirs
//!   (`orders_user_created`, `credit_transactions_user_created`), the inbox too (step 6).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// The audit log and the console's indexes.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260803_000012_admin_audit"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE admin_audit (
        id {SERIAL_PK},
        admin_id TEXT NOT NULL REFERENCES users (id),
        action TEXT NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
        object_kind TEXT NOT NULL CHECK (length(object_kind) BETWEEN 1 AND 64),
        object_id TEXT NOT NULL,
        before_state TEXT NULL,
        after_state TEXT NULL,
        created_at BIGINT NOT NULL
    )",
    "CREATE INDEX admin_audit_object ON admin_audit (object_kind, object_id, id)",
    "CREATE INDEX users_created ON users (created_at, id)",
    "CREATE INDEX orders_created ON orders (created_at, id)",
    "CREATE INDEX orders_status_created_id ON orders (status, created_at, id)",
    "CREATE INDEX orders_provider_created ON orders (provider, created_at, id)",
];

const UP_SQLITE: &[&str] = &["CREATE INDEX users_email_prefix ON users (lower(email), id)"];

const UP_POSTGRES: &[&str] = &[
    "CREATE INDEX users_email_prefix ON users (lower(email) text_pattern_ops, id)",
    "CREATE INDEX users_id_prefix ON users (id text_pattern_ops)",
];

const DOWN: &[&str] = &[
    "DROP INDEX orders_provider_created",
    "DROP INDEX orders_status_created_id",
    "DROP INDEX orders_created",
    "DROP INDEX users_created",
    "DROP INDEX admin_audit_object",
    "DROP TABLE admin_audit",
];

const DOWN_POSTGRES: &[&str] = &["DROP INDEX users_id_prefix"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await?;
        match manager.get_database_backend() {
            DbBackend::Postgres => sql::run(manager, UP_POSTGRES).await,
            _ => sql::run(manager, UP_SQLITE).await,
        }
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Postgres {
            sql::run(manager, DOWN_POSTGRES).await?;
        }
        sql::run(manager, &["DROP INDEX users_email_prefix"]).await?;
        sql::run(manager, DOWN).await
    }
}
