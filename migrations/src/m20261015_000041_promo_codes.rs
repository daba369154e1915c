//! Step 41: promo codes and their redemptions.
//!
//! - `promo_codes`: one row per code an administrator created, its terms (credits, their
//!   category and expiry, validity window, limits in total and per user, new users only, a plan
//!   its redeemers must hold), whether it is active, and `redeemed`, the count of its
//!   redemptions. A redemption moves `redeemed` up with a statement that does so only while it
//!   is below `max_redemptions`; the CHECK makes passing the limit impossible on any path.
//! - `promo_redemptions`: one row per redemption, UNIQUE per code, user and ordinal (the
//!   user's first, second, … redemption of the code: two concurrent redemptions cannot both be
//!   the first) and per code, user and request key (a retried request finds its redemption).
//!   Its credits are a grant lot with the source key `promo:<redemption id>`.
//!
//! Down drops both tables.

use sea_orm_migration::prelude::*;

use crate::sql;

/// `promo_codes` and `promo_redemptions`.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261015_000041_promo_codes"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE promo_codes (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        code TEXT NOT NULL UNIQUE CHECK (length(code) BETWEEN 3 AND 40),
        credits_hundredths BIGINT NOT NULL CHECK (credits_hundredths > 0),
        category TEXT NOT NULL \
            CHECK (category IN ('paid', 'promotional', 'bonus', 'compensation')),
        expires_after_days INTEGER NULL \
            CHECK (expires_after_days IS NULL OR expires_after_days BETWEEN 1 AND 3650),
        valid_from BIGINT NULL,
        valid_until BIGINT NULL,
        max_redemptions INTEGER NULL CHECK (max_redemptions IS NULL OR max_redemptions > 0),
        per_user INTEGER NOT NULL CHECK (per_user BETWEEN 1 AND 1000),
        new_users_only BOOLEAN NOT NULL DEFAULT FALSE,
        plan_id TEXT NULL CHECK (plan_id IS NULL OR length(plan_id) BETWEEN 1 AND 64),
        active BOOLEAN NOT NULL DEFAULT TRUE,
        redeemed INTEGER NOT NULL DEFAULT 0 \
            CHECK (redeemed >= 0 AND (max_redemptions IS NULL OR redeemed <= max_redemptions)),
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )",
    "CREATE TABLE promo_redemptions (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        code_id TEXT NOT NULL REFERENCES promo_codes (id),
        user_id TEXT NOT NULL,
        ordinal INTEGER NOT NULL CHECK (ordinal >= 1),
        request_key TEXT NOT NULL CHECK (length(request_key) BETWEEN 1 AND 128),
        credits_hundredths BIGINT NOT NULL CHECK (credits_hundredths > 0),
        redeemed_at BIGINT NOT NULL,
        UNIQUE (code_id, user_id, ordinal),
        UNIQUE (code_id, user_id, request_key)
    )",
    "CREATE INDEX promo_redemptions_code ON promo_redemptions (code_id, redeemed_at)",
    "CREATE INDEX promo_redemptions_user ON promo_redemptions (user_id, redeemed_at)",
];

const DOWN: &[&str] = &["DROP TABLE promo_redemptions", "DROP TABLE promo_codes"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, DOWN).await
    }
}
