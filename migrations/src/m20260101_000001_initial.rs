//! Step 1: the schema as it stood before credits.
//!
//! Conventions: ids are TEXT, times are BIGINT unix milliseconds, money is BIGINT minor units of
//! the row's currency, credits are BIGINT hundredths, booleans are BOOLEAN (an integer 0/1 in
//! SQLite). Status columns carry CHECKs with every stable code of their state machine, so a typo
//! in the store cannot write a state the domain does not know.

use sea_orm_migration::prelude::*;

use crate::sql;

/// The initial schema.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260101_000001_initial"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE users (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL UNIQUE,
        password_hash TEXT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'admin')),
        created_at BIGINT NOT NULL
    )",
    "CREATE TABLE sessions (
        token_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
    )",
    "CREATE INDEX sessions_user_id ON sessions (user_id)",
    "CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL REFERENCES users (id),
        name TEXT NOT NULL,
        prefix TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT NULL
    )",
    "CREATE INDEX api_keys_owner_id ON api_keys (owner_id)",
    "CREATE TABLE pricing_plan (
        id TEXT PRIMARY KEY,
        provider TEXT NOT NULL,
        plan_type TEXT NOT NULL CHECK (plan_type IN ('one_time', 'recurring', 'credits')),
        currency TEXT NOT NULL,
        amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
        original_amount_minor BIGINT NULL
            CHECK (original_amount_minor IS NULL OR original_amount_minor >= amount_minor),
        hidden BOOLEAN NOT NULL DEFAULT FALSE,
        locales TEXT NOT NULL DEFAULT '',
        sort_order INTEGER NOT NULL DEFAULT 0,
        data TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )",
    "CREATE INDEX pricing_plan_listing ON pricing_plan (sort_order, id)",
    "CREATE TABLE orders (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users (id),
        provider TEXT NOT NULL,
        plan_id TEXT NOT NULL,
        plan_type TEXT NOT NULL CHECK (plan_type IN ('one_time', 'recurring', 'credits')),
        amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0),
        currency TEXT NOT NULL,
        credits_hundredths BIGINT NULL CHECK (credits_hundredths IS NULL OR credits_hundredths > 0),
        months BIGINT NULL CHECK (months IS NULL OR months > 0),
        status TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'failed', 'cancelled', 'expired',
            'partially_refunded', 'refunded')),
        failure_reason TEXT NULL,
        paid_at BIGINT NULL,
        refunded_minor BIGINT NOT NULL DEFAULT 0
            CHECK (refunded_minor >= 0 AND refunded_minor <= amount_minor),
        provider_reference TEXT NULL,
        checkout_kind TEXT NULL CHECK (checkout_kind IS NULL OR checkout_kind IN ('redirect', 'qr_code')),
        checkout_url TEXT NULL,
        mismatch TEXT NULL,
        expires_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        claimed_until BIGINT NULL,
        CHECK ((checkout_kind IS NULL) = (checkout_url IS NULL))
    )",
    "CREATE INDEX orders_user_created ON orders (user_id, created_at, id)",
    "CREATE INDEX orders_status_created ON orders (status, created_at)",
    "CREATE UNIQUE INDEX orders_provider_reference ON orders (provider, provider_reference)",
    "CREATE TABLE subscriptions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users (id),
        order_id TEXT NULL REFERENCES orders (id),
        plan_id TEXT NOT NULL,
        provider TEXT NOT NULL,
        provider_subscription_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('trialing', 'active', 'past_due', 'canceled', 'expired')),
        period_start BIGINT NOT NULL,
        period_end BIGINT NOT NULL,
        cancel_at_period_end BOOLEAN NOT NULL DEFAULT FALSE,
        last_event_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        CHECK (period_start < period_end),
        UNIQUE (provider, provider_subscription_id)
    )",
    "CREATE INDEX subscriptions_user_updated ON subscriptions (user_id, updated_at)",
    "CREATE INDEX subscriptions_order_id ON subscriptions (order_id)",
    "CREATE TABLE webhook_inbox (
        id {SERIAL_PK},
        provider TEXT NOT NULL,
        event_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        payload TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail TEXT NULL,
        received_at BIGINT NOT NULL,
        UNIQUE (provider, event_id)
    )",
    "CREATE TABLE idempotency_records (
        user_id TEXT NOT NULL REFERENCES users (id),
        scope TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        order_id TEXT NULL REFERENCES orders (id),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (user_id, scope, idempotency_key)
    )",
];

/// Children before parents, so that foreign keys never dangle.
const DOWN: &[&str] = &[
    "DROP TABLE idempotency_records",
    "DROP TABLE webhook_inbox",
    "DROP TABLE subscriptions",
    "DROP TABLE orders",
    "DROP TABLE pricing_plan",
    "DROP TABLE api_keys",
    "DROP TABLE sessions",
    "DROP TABLE users",
];

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
