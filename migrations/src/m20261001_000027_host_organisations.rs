//! Teams that mirror the host application's organisations: `accounts.host_organisation` (the
//! host's id of the organisation a team mirrors) and `account_members_away`, the rows of members
//! whose latest host token named another organisation, or none. Such a member acts in the team
//! no more and holds none of its seats; their role, limit and window count wait in this table
//! for a token naming the organisation again. Moving the row out of `account_members` keeps
//! every query over present members (spends, seats, the member list) as it is.
//!
//! `accounts.seats_told`: the seats and member count at which the team's owners were last told
//! that an addition found no seat (`account.seats_exceeded`), so that a full team's repeated
//! refusals tell once per state.
//!
//! Down refuses while a member is away: their row would be lost.

use sea_orm_migration::prelude::*;

use crate::m20260901_000025_accounts::count;
use crate::sql;

/// `accounts.host_organisation`, `accounts.seats_told` and `account_members_away`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261001_000027_host_organisations"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE accounts ADD COLUMN host_organisation TEXT NULL",
    "ALTER TABLE accounts ADD COLUMN seats_told TEXT NULL",
    "CREATE TABLE account_members_away (
        account_id TEXT NOT NULL REFERENCES accounts (id),
        user_id TEXT NOT NULL REFERENCES users (id),
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
        limit_hundredths BIGINT NULL CHECK (limit_hundredths IS NULL OR limit_hundredths > 0),
        limit_window TEXT NULL CHECK (limit_window IS NULL OR limit_window IN ('day', 'week', 'month')),
        window_start BIGINT NOT NULL DEFAULT 0,
        window_spent_hundredths BIGINT NOT NULL DEFAULT 0 CHECK (window_spent_hundredths >= 0),
        added_at BIGINT NOT NULL,
        away_since BIGINT NOT NULL,
        CHECK ((limit_hundredths IS NULL) = (limit_window IS NULL)),
        PRIMARY KEY (account_id, user_id)
    )",
    "CREATE INDEX account_members_away_user ON account_members_away (user_id)",
];

const DOWN: &[&str] = &[
    "DROP TABLE account_members_away",
    "ALTER TABLE accounts DROP COLUMN seats_told",
    "ALTER TABLE accounts DROP COLUMN host_organisation",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let away = count(manager, "SELECT COUNT(*) AS n FROM account_members_away").await?;
        if away > 0 {
            return Err(DbErr::Migration(format!(
                "{away} member(s) of host organisations' teams are away: this step cannot be \
                 undone until their rows are deleted"
            )));
        }
        sql::run(manager, DOWN).await
    }
}
