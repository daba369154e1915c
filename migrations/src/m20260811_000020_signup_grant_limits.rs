//! Step 20: sign-up credits at most once per identity, and at most so many per day.
//!
//! `signup_grant_identities`: one row per identity (a normalized e-mail address, or a host's
//! issuer and subject when e-mail is not required) that was given sign-up credits. It has no
//! foreign key to `users` on purpose: deleting the account keeps the row, so an account made
//! again with the same identity is not given them a second time.
//!
//! `signup_grant_days`: per UTC day (days since the epoch), how many sign-up grants were given
//! and how many sign-ups were refused one because the day's cap was reached. The grant takes
//! its place with one conditional upsert in the transaction that creates the user.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `signup_grant_identities` and `signup_grant_days`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260811_000020_signup_grant_limits"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE signup_grant_identities (
        identity TEXT NOT NULL PRIMARY KEY CHECK (length(identity) > 0),
        user_id TEXT NOT NULL,
        granted_at BIGINT NOT NULL CHECK (granted_at >= 0)
    )",
    "CREATE TABLE signup_grant_days (
        day BIGINT NOT NULL PRIMARY KEY CHECK (day >= 0),
        granted BIGINT NOT NULL CHECK (granted >= 0),
        capped BIGINT NOT NULL CHECK (capped >= 0)
    )",
];

const DOWN: &[&str] = &[
    "DROP TABLE signup_grant_days",
    "DROP TABLE signup_grant_identities",
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
