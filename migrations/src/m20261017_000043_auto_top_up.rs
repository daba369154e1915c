//! Step 43: automatic top-up.
//!
//! - `saved_payment_methods`: a payment method the provider saved for off-session charges on
//!   an account, with the buyer's consent (the order that asked for it, who and when) and what
//!   is shown of it (a card's brand and last four, a wallet's account); `removed_at` once the
//!   owner removed it (kept for the history, never charged again).
//! - `auto_top_ups`: an account's rule (threshold, pack, monthly caps), the method it charges,
//!   and its state: this calendar month's charges and money, declines in a row, the cool-off,
//!   and why Tally turned it off. `version` is the compare-and-set every change of it goes
//!   through, so a charge is counted under the caps read.
//! - `top_up_intents`: one top-up, asked for by the spend that took the balance below the
//!   threshold, then charged through its order. The partial unique index keeps at most one in
//!   flight (`requested` or `charging`) per account, on several instances alike; `order_id` is
//!   unique, so an order settles at most one top-up.
//! - `orders.save_method`: the buyer consented, on this order, to keep its payment method for
//!   automatic top-ups.
//!
//! Down drops all of it.

use sea_orm_migration::prelude::*;

use crate::sql;

/// Saved payment methods, top-up rules and their intents.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261017_000043_auto_top_up"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE saved_payment_methods (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        provider TEXT NOT NULL,
        customer_ref TEXT NOT NULL CHECK (length(customer_ref) BETWEEN 1 AND 255),
        method_ref TEXT NOT NULL CHECK (length(method_ref) BETWEEN 1 AND 255),
        brand TEXT NULL CHECK (brand IS NULL OR length(brand) <= 32),
        last4 TEXT NULL CHECK (last4 IS NULL OR length(last4) <= 4),
        wallet_account TEXT NULL CHECK (wallet_account IS NULL OR length(wallet_account) <= 255),
        order_id TEXT NOT NULL REFERENCES orders (id),
        consented_by TEXT NOT NULL,
        consented_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        removed_at BIGINT NULL
    )",
    "CREATE UNIQUE INDEX saved_payment_methods_order ON saved_payment_methods (order_id)",
    "CREATE INDEX saved_payment_methods_account ON saved_payment_methods (account_id)",
    "CREATE TABLE auto_top_ups (
        account_id TEXT PRIMARY KEY REFERENCES accounts (id),
        enabled BOOLEAN NOT NULL,
        threshold_hundredths BIGINT NOT NULL CHECK (threshold_hundredths > 0),
        plan_id TEXT NOT NULL,
        max_per_month INTEGER NOT NULL CHECK (max_per_month BETWEEN 1 AND 1000),
        max_amount_minor BIGINT NULL CHECK (max_amount_minor IS NULL OR max_amount_minor > 0),
        method_id TEXT NULL REFERENCES saved_payment_methods (id),
        month_start BIGINT NOT NULL,
        month_count INTEGER NOT NULL CHECK (month_count >= 0),
        month_amount_minor BIGINT NOT NULL CHECK (month_amount_minor >= 0),
        declines INTEGER NOT NULL CHECK (declines >= 0),
        cool_off_until BIGINT NULL,
        disabled_reason TEXT NULL
            CHECK (disabled_reason IS NULL OR disabled_reason IN ('declines', 'refunded', 'method_removed')),
        version BIGINT NOT NULL,
        updated_by TEXT NULL,
        updated_at BIGINT NOT NULL
    )",
    "CREATE TABLE top_up_intents (
        id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 80),
        account_id TEXT NOT NULL REFERENCES accounts (id),
        plan_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN \
            ('requested', 'charging', 'succeeded', 'failed', 'authentication_required')),
        balance_hundredths BIGINT NOT NULL,
        order_id TEXT NULL REFERENCES orders (id),
        amount_minor BIGINT NULL,
        currency TEXT NULL,
        credits_hundredths BIGINT NULL,
        reason TEXT NULL CHECK (reason IS NULL OR length(reason) <= 500),
        action_url TEXT NULL,
        claimed_until BIGINT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )",
    "CREATE UNIQUE INDEX top_up_intents_in_flight ON top_up_intents (account_id) \
     WHERE status IN ('requested', 'charging')",
    "CREATE UNIQUE INDEX top_up_intents_order ON top_up_intents (order_id)",
    "CREATE INDEX top_up_intents_account ON top_up_intents (account_id, created_at)",
    "CREATE INDEX top_up_intents_requested ON top_up_intents (status, claimed_until)",
    "ALTER TABLE orders ADD COLUMN save_method BOOLEAN NOT NULL DEFAULT FALSE",
];

const DOWN: &[&str] = &[
    "ALTER TABLE orders DROP COLUMN save_method",
    "DROP INDEX top_up_intents_requested",
    "DROP INDEX top_up_intents_account",
    "DROP INDEX top_up_intents_order",
    "DROP INDEX top_up_intents_in_flight",
    "DROP TABLE top_up_intents",
    "DROP TABLE auto_top_ups",
    "DROP INDEX saved_payment_methods_account",
    "DROP INDEX saved_payment_methods_order",
    "DROP TABLE saved_payment_methods",
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
