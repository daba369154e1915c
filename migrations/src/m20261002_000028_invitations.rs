//! `account_invitations`: invitations to a team by e-mail. Each names the team, the address
//! (normalised), the role and limit the invitee joins with, the digest of its secret token (the
//! token itself is never stored), who invited, when it expires, and, once it is no longer open,
//! who accepted it and when, or when it was revoked.
//!
//! Down refuses while an invitation is stored: open ones and the record of answered ones would
//! be lost.

use sea_orm_migration::prelude::*;

use crate::m20260901_000025_accounts::count;
use crate::sql;

/// `account_invitations`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261002_000028_invitations"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE account_invitations (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id),
        email TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
        limit_hundredths BIGINT NULL CHECK (limit_hundredths IS NULL OR limit_hundredths > 0),
        limit_window TEXT NULL CHECK (limit_window IS NULL OR limit_window IN ('day', 'week', 'month')),
        token_hash TEXT NOT NULL UNIQUE,
        invited_by TEXT NOT NULL REFERENCES users (id),
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        accepted_by TEXT NULL REFERENCES users (id),
        accepted_at BIGINT NULL,
        revoked_at BIGINT NULL,
        CHECK ((limit_hundredths IS NULL) = (limit_window IS NULL)),
        CHECK ((accepted_by IS NULL) = (accepted_at IS NULL)),
        CHECK (accepted_at IS NULL OR revoked_at IS NULL)
    )",
    "CREATE INDEX account_invitations_account ON account_invitations (account_id, created_at)",
];

const DOWN: &[&str] = &["DROP TABLE account_invitations"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let kept = count(manager, "SELECT COUNT(*) AS n FROM account_invitations").await?;
        if kept > 0 {
            return Err(DbErr::Migration(format!(
                "{kept} invitation(s), open or answered, would be lost: this step cannot be \
                 undone until they are deleted"
            )));
        }
        sql::run(manager, DOWN).await
    }
}
