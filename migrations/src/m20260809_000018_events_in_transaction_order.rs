//! Step 18 (PostgreSQL only): event ids follow the order of their transactions (the outbox's
//! feed and delivery order, CORRECTNESS.md invariant 13).
//!
//! PostgreSQL hands a `BIGSERIAL` id out when the row is inserted, not when its transaction
//! commits, and the readers of `events` (the catch-up feed and the delivery dispatcher) return
//! only rows whose transaction is older than every transaction still running (`txid <
//! pg_snapshot_xmin(...)`), then move their cursor to the largest id they saw. With ids from a
//! plain sequence that is not enough: a transaction that started first (smaller `txid`) but
//! inserted its events last (larger id) can commit while a younger one that inserted earlier
//! (smaller id) is still open; a reader then returns the older transaction's event, moves its
//! cursor past the younger one's smaller id, and never sees that event when it commits, so an
//! endpoint is never sent it.
//!
//! From this step an id is `txid << 20 | (a sequence value mod 2^20)`: ids order events by the
//! transaction that wrote them first (their order within one transaction, which becomes
//! visible all at once, is the sequence's), so every row a running transaction can still commit
//! has a larger id than any row the visibility rule lets a reader return. The cursor stays one
//! opaque integer, and every id written before this step is smaller than every id written after
//! it (a transaction writes far fewer than 2^20 events, so `txid << 20` exceeds the count of all
//! earlier events). `txid` is a 64-bit `xid8` (epoch and 32-bit xid); the shifted value fits a
//! `BIGINT` for the first 2,048 epochs, that is 8.8 trillion transactions. The `ALTER TABLE`
//! waits for every transaction that wrote events to finish, so no id of the old form is still
//! uncommitted when the new one starts.
//!
//! SQLite has one writer at a time: id order is commit order there, and nothing changes.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::sql;

/// Event ids in the order of their transactions (PostgreSQL).
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260809_000018_events_in_transaction_order"
    }
}

const POSTGRES_UP: &[&str] = &["ALTER TABLE events ALTER COLUMN id SET DEFAULT \
     ((pg_current_xact_id()::text::bigint << 20) | (nextval('events_id_seq'::regclass) & 1048575))"];

/// Back to the plain sequence, moved past every id written meanwhile so that ids keep growing.
const POSTGRES_DOWN: &[&str] = &[
    "SELECT setval('events_id_seq'::regclass, GREATEST((SELECT MAX(id) FROM events), 1))",
    "ALTER TABLE events ALTER COLUMN id SET DEFAULT nextval('events_id_seq'::regclass)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Postgres {
            sql::run(manager, POSTGRES_UP).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Postgres {
            sql::run(manager, POSTGRES_DOWN).await?;
        }
        Ok(())
    }
}
