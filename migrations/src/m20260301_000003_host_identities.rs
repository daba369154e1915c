//! Step 3: host identities. A user signed in by a host application's token is found by the
//! token's (issuer, subject) in a namespace of its own, never by taking the subject as a Tally
//! user id, so a token can never become a password account.
//!
//! Before this step a host user's id was the token's subject and its address
//! `<id>@host.invalid`, with no password. Those users are mapped as (issuer `''`, subject = id)
//! so they keep their orders and balances; a deployment without a configured issuer keeps
//! finding them under the empty issuer.

use sea_orm_migration::prelude::*;

use crate::sql;

/// The host identities table and the backfill of earlier host users.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260301_000003_host_identities"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE host_identities (
        issuer TEXT NOT NULL CHECK (length(issuer) <= 512),
        subject TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 512),
        user_id TEXT NOT NULL UNIQUE REFERENCES users (id),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (issuer, subject)
    )",
    // Earlier host users: no password, a placeholder address, id = the token's subject.
    "INSERT INTO host_identities (issuer, subject, user_id, created_at)
     SELECT '', id, id, created_at FROM users
      WHERE password_hash IS NULL AND email LIKE '%@host.invalid'",
];

const DOWN: &[&str] = &["DROP TABLE host_identities"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }

    /// SQLite runs DDL in transactions too; a step that fails half-way leaves nothing behind.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
