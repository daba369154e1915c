//! Step 8: webhook endpoints of the host application and the delivery of host events to them
//! (issue 17, "Delivery").
//!
//! - `webhook_endpoints`: the URL, the event types it receives (comma-separated codes; empty
//!   means every type that is not opt-in), whether it is enabled and why it was disabled, the
//!   signing secret (`whsec_…`) and, after a rotation, the previous secret with the time it stops being used,
//!   the dispatch cursor (the last `events.id` fanned out to it) and the time of its first
//!   failure since its last success.
//! - `webhook_deliveries`: one row per (endpoint, event), with its status, attempts, the next
//!   attempt's time, the lease of the instance attempting it (`locked_until`) and the last
//!   attempt's status code, latency and error. Deleting an endpoint, or an event past its
//!   retention, deletes its deliveries.

use sea_orm_migration::prelude::*;

use crate::sql;

/// The endpoint and delivery tables.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260702_000008_webhook_endpoints"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE webhook_endpoints (
        id TEXT PRIMARY KEY,
        url TEXT NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
        event_types TEXT NOT NULL DEFAULT '',
        enabled BOOLEAN NOT NULL DEFAULT TRUE,
        disabled_reason TEXT NULL,
        secret TEXT NOT NULL CHECK (secret LIKE 'whsec_%'),
        previous_secret TEXT NULL,
        previous_secret_until BIGINT NULL,
        dispatch_cursor BIGINT NOT NULL DEFAULT 0 CHECK (dispatch_cursor >= 0),
        failing_since BIGINT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL))
    )",
    "CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        event_row BIGINT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
        status TEXT NOT NULL
            CHECK (status IN ('pending', 'failed', 'succeeded', 'abandoned')),
        attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at BIGINT NULL,
        locked_until BIGINT NULL,
        last_status_code INTEGER NULL,
        last_latency_ms BIGINT NULL,
        last_error TEXT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        CHECK ((status IN ('pending', 'failed')) = (next_attempt_at IS NOT NULL)),
        UNIQUE (endpoint_id, event_row)
    )",
    "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
        WHERE next_attempt_at IS NOT NULL",
    "CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at, id)",
    "CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_row)",
];

const DOWN: &[&str] = &[
    "DROP TABLE webhook_deliveries",
    "DROP TABLE webhook_endpoints",
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
