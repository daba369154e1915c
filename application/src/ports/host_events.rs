//! The outbox of host events, as the catch-up feed and the delivery worker read it.
//!
//! Events are written by the store itself, inside the transaction of the change they describe
//! (no port method writes one on its own); this port only reads them back and forgets old ones.

use async_trait::async_trait;
use domain::{Timestamp, UserId};

use super::StoreError;
use crate::host_events::HostEventKind;

/// One event as the outbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The outbox row id: increasing, the feed's cursor and the delivery order.
    pub id: i64,
    /// `evt_…`, unique: the envelope's `id` and the `webhook-id` of its deliveries.
    pub event_id: String,
    /// Its type.
    pub kind: HostEventKind,
    /// Whose change it tells, when it concerns a user.
    pub user_id: Option<UserId>,
    /// The complete JSON envelope (`{"id", "type", "timestamp", "data"}`), exactly as delivered.
    pub payload: String,
    /// When the change happened.
    pub occurred_at: Timestamp,
}

/// The largest number of events one read returns.
pub const MAX_EVENTS_PER_READ: u32 = 1_000;

/// Reading the outbox in order, and forgetting what is past its retention.
#[async_trait]
pub trait HostEventLog: Send + Sync + 'static {
    /// Up to `limit` (at most [`MAX_EVENTS_PER_READ`]) events with an id above `after` (all
    /// when `None`), of one of `kinds` (any kind when empty), in id order.
    ///
    /// An adapter MUST NOT return an event while an event with a smaller id may still become
    /// visible (a transaction that took a smaller id and has not committed yet): a reader that
    /// moves its cursor past what it was given must never skip anything. It MAY hold back
    /// committed events for that reason; they are returned by a later call.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for a row that names no known type.
    async fn events_after(
        &self,
        after: Option<i64>,
        limit: u32,
        kinds: &[HostEventKind],
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// Delete up to `limit` events that occurred before `before`, oldest first; returns how
    /// many.
    ///
    /// # Errors
    /// Storage failures.
    async fn purge_events(&self, before: Timestamp, limit: u32) -> Result<u32, StoreError>;
}
