//! Step 2: the credits release. Adds the credit balance, the append-only transaction ledger, the
//! grant lots and the reservations, with their indexes; changes nothing that exists.
//!
//! The database enforces the ledger's invariants as well as the code:
//! - `credit_balances.balance_hundredths >= 0` (a balance never goes below zero), and at most the
//!   domain's largest amount (10^12 credits);
//! - each transaction kind's sign (grants and releases add, spends/holds/clawbacks/expiries
//!   remove, settles and admin adjustments either way, never zero);
//! - `UNIQUE (source_kind, source_key)` on lots (one payment, one grant);
//! - `UNIQUE (user_id, kind, idempotency_key)` on transactions and `UNIQUE (user_id,
//!   idempotency_key)` on reservations (one request, one effect; NULL keys never collide);
//! - `0 <= remaining <= amount` on lots, `held > 0` on reservations, and a settled reservation
//!   always records what it charged.

use sea_orm_migration::prelude::*;

use crate::sql;

/// The credits tables.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260201_000002_credits"
    }
}

const UP: &[&str] = &[
    // `transaction_count` is kept in the same statement as every balance change, so the total of
    // a transactions page costs one primary-key read however long the history is.
    "CREATE TABLE credit_balances (
        user_id TEXT PRIMARY KEY REFERENCES users (id),
        balance_hundredths BIGINT NOT NULL DEFAULT 0
            CHECK (balance_hundredths >= 0 AND balance_hundredths <= 100000000000000),
        transaction_count BIGINT NOT NULL DEFAULT 0 CHECK (transaction_count >= 0),
        updated_at BIGINT NOT NULL
    )",
    "CREATE TABLE credit_reservations (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users (id),
        held_hundredths BIGINT NOT NULL CHECK (held_hundredths > 0),
        status TEXT NOT NULL CHECK (status IN ('pending', 'settled', 'released', 'expired')),
        actual_hundredths BIGINT NULL CHECK (actual_hundredths IS NULL OR actual_hundredths >= 0),
        charged_hundredths BIGINT NULL CHECK (charged_hundredths IS NULL OR charged_hundredths >= 0),
        idempotency_key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        feature TEXT NULL,
        model TEXT NULL,
        tokens BIGINT NULL CHECK (tokens IS NULL OR tokens >= 0),
        note TEXT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        resolved_at BIGINT NULL,
        CHECK ((status = 'settled') = (actual_hundredths IS NOT NULL AND charged_hundredths IS NOT NULL)),
        CHECK ((status = 'pending') = (resolved_at IS NULL)),
        UNIQUE (user_id, idempotency_key)
    )",
    "CREATE INDEX credit_reservations_status_expiry ON credit_reservations (status, expires_at)",
    "CREATE INDEX credit_reservations_user_status ON credit_reservations (user_id, status)",
    "CREATE TABLE credit_transactions (
        id {SERIAL_PK},
        user_id TEXT NOT NULL REFERENCES users (id),
        kind TEXT NOT NULL,
        amount_hundredths BIGINT NOT NULL,
        balance_after_hundredths BIGINT NOT NULL CHECK (balance_after_hundredths >= 0),
        order_id TEXT NULL REFERENCES orders (id),
        subscription_id TEXT NULL REFERENCES subscriptions (id),
        reservation_id TEXT NULL REFERENCES credit_reservations (id),
        feature TEXT NULL,
        model TEXT NULL,
        tokens BIGINT NULL CHECK (tokens IS NULL OR tokens >= 0),
        note TEXT NULL,
        idempotency_key TEXT NULL,
        request_hash TEXT NULL,
        created_at BIGINT NOT NULL,
        CHECK (
            (kind IN ('purchase_grant', 'subscription_grant', 'reservation_release')
                AND amount_hundredths > 0)
            OR (kind IN ('consumption', 'reservation_hold', 'refund_clawback', 'expiry')
                AND amount_hundredths < 0)
            OR (kind IN ('reservation_settle', 'admin_adjustment') AND amount_hundredths <> 0)
        )
    )",
    "CREATE INDEX credit_transactions_user_created ON credit_transactions (user_id, created_at, id)",
    "CREATE UNIQUE INDEX credit_transactions_user_kind_key
        ON credit_transactions (user_id, kind, idempotency_key)",
    "CREATE TABLE credit_grants (
        id {SERIAL_PK},
        user_id TEXT NOT NULL REFERENCES users (id),
        transaction_id BIGINT NOT NULL REFERENCES credit_transactions (id),
        source_kind TEXT NOT NULL CHECK (source_kind IN ('order', 'subscription_period', 'admin')),
        source_key TEXT NOT NULL,
        amount_hundredths BIGINT NOT NULL CHECK (amount_hundredths > 0),
        remaining_hundredths BIGINT NOT NULL
            CHECK (remaining_hundredths >= 0 AND remaining_hundredths <= amount_hundredths),
        clawed_back_hundredths BIGINT NOT NULL DEFAULT 0 CHECK (clawed_back_hundredths >= 0),
        shortfall_hundredths BIGINT NOT NULL DEFAULT 0 CHECK (shortfall_hundredths >= 0),
        expires_at BIGINT NULL,
        expired BOOLEAN NOT NULL DEFAULT FALSE,
        granted_at BIGINT NOT NULL,
        UNIQUE (source_kind, source_key)
    )",
    "CREATE INDEX credit_grants_user_expiry ON credit_grants (user_id, expires_at)",
    "CREATE INDEX credit_grants_due ON credit_grants (expired, expires_at)",
    "CREATE INDEX credit_grants_transaction_id ON credit_grants (transaction_id)",
];

/// Children before parents.
const DOWN: &[&str] = &[
    "DROP TABLE credit_grants",
    "DROP TABLE credit_transactions",
    "DROP TABLE credit_reservations",
    "DROP TABLE credit_balances",
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
