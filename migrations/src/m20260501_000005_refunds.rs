//! Step 5: refunds kept against the payment they name (CORRECTNESS.md invariant 11), and each
//! paid period of a subscription as a charge that refunds can find.
//!
//! - `subscription_charges`: one row per paid period (the first period's row names the order that
//!   started the subscription), with the provider's id for the charge, its amount and the
//!   credits it granted, and the refunded total applied so far.
//! - `refunds`: every verified refund report, once per `(provider, refund_key)`, against an
//!   order or a provider charge id, kept even while that payment has not arrived.
//! - `orders.version`: bumped by every webhook change of an order, the compare-and-set of the
//!   webhook pipeline (a refund kept against a pending order bumps it too, so a payment decided
//!   before that refund was kept is decided again).
//!
//! Existing refunded orders get one running-total row with what they have refunded; each
//! subscription with sold terms gets a charge row for its current period (earlier periods are
//! not known to the schema before this step).

use sea_orm_migration::prelude::*;

use crate::sql;

/// The refund and charge tables.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260501_000005_refunds"
    }
}

const UP: &[&str] = &[
    "ALTER TABLE orders ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
    "CREATE TABLE subscription_charges (
        id {SERIAL_PK},
        subscription_id TEXT NOT NULL REFERENCES subscriptions (id),
        provider TEXT NOT NULL,
        charge_ref TEXT NULL,
        order_id TEXT NULL REFERENCES orders (id),
        period_start BIGINT NOT NULL,
        period_end BIGINT NOT NULL,
        amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0),
        currency TEXT NOT NULL CHECK (length(currency) = 3),
        credits_hundredths BIGINT NULL CHECK (credits_hundredths IS NULL OR credits_hundredths > 0),
        refunded_minor BIGINT NOT NULL DEFAULT 0
            CHECK (refunded_minor >= 0 AND refunded_minor <= amount_minor),
        paid_at BIGINT NOT NULL,
        CHECK (period_start < period_end),
        UNIQUE (subscription_id, period_start)
    )",
    "CREATE UNIQUE INDEX subscription_charges_ref ON subscription_charges (provider, charge_ref)",
    "CREATE INDEX subscription_charges_order ON subscription_charges (order_id)",
    "CREATE TABLE refunds (
        id {SERIAL_PK},
        provider TEXT NOT NULL,
        refund_key TEXT NOT NULL,
        order_id TEXT NULL REFERENCES orders (id),
        charge_ref TEXT NULL,
        form TEXT NOT NULL CHECK (form IN ('total', 'one', 'dispute_lost')),
        amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
        currency TEXT NOT NULL CHECK (length(currency) = 3),
        received_at BIGINT NOT NULL,
        CHECK ((order_id IS NULL) <> (charge_ref IS NULL)),
        UNIQUE (provider, refund_key)
    )",
    "CREATE INDEX refunds_order ON refunds (order_id)",
    "CREATE INDEX refunds_charge ON refunds (provider, charge_ref)",
    "INSERT INTO refunds (provider, refund_key, order_id, form, amount_minor, currency, received_at)
        SELECT provider, 'total:' || id || ':' || CAST(refunded_minor AS TEXT), id, 'total',
            refunded_minor, currency, updated_at
        FROM orders
        WHERE status IN ('partially_refunded', 'refunded') AND refunded_minor > 0",
    "INSERT INTO subscription_charges (subscription_id, provider, order_id, period_start,
            period_end, amount_minor, currency, credits_hundredths, paid_at)
        SELECT id, provider, order_id, period_start, period_end, price_minor, currency,
            credits_per_period_hundredths, period_start
        FROM subscriptions
        WHERE price_minor IS NOT NULL",
];

const DOWN: &[&str] = &[
    "DROP TABLE refunds",
    "DROP TABLE subscription_charges",
    "ALTER TABLE orders DROP COLUMN version",
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
