//! The outbox of host events, as the catch-up feed and the delivery worker read it, and what the
//! host was last told of each user's entitlements.
//!
//! Events are written inside the transaction of the change they describe: with the write that
//! carries them (a payment event's command, an order's transition, the ledger's entries), never
//! on their own. This port reads them back and forgets old ones, and keeps the entitlements
//! record the service works `entitlements.changed` out against.

use async_trait::async_trait;
use domain::entitlements::Entitlements;
use domain::{AccountId, Order, OrderId, Subscription, Timestamp, UserId};

use super::StoreError;
use crate::host_events::{HostEvent, HostEventKind};

/// Renders an event as the host receives it. The store calls it when it writes an event and
/// keeps the bytes; the HTTP adapter implements it with the API's own views, so an event's
/// `data` shows an order, a subscription or a transaction exactly as the API does.
pub trait HostEventEncoder: std::fmt::Debug + Send + Sync + 'static {
    /// The complete Standard Webhooks envelope of `event` as JSON:
    /// `{"id": event_id, "type", "timestamp", "data": {"userId", "hostSubject"?, …}}`, where
    /// `host_subject` is the host application's id of the event's user, when it has one.
    fn encode(&self, event: &HostEvent, event_id: &str, host_subject: Option<&str>) -> String;
}

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

/// What the host was last told of a user's effective entitlements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToldEntitlements {
    /// The map told.
    pub entitlements: Entitlements,
    /// The earliest moment after it was told at which one of the user's purchases stops
    /// granting access by the passing of time (the reconciler works the user out again then).
    pub next_change_at: Option<Timestamp>,
    /// Moves on with every write: what [`EntitlementsWrite::expected_version`] compares.
    pub version: i64,
}

/// What an account's effective entitlements are worked out from: what was last told, and its
/// purchases that may grant access. The record is read first: a change of the purchases that
/// commits after it moves its version, so a write decided from an older read is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntitlementBasis {
    /// What was last told (`None`: nothing since entitlements were released).
    pub told: Option<ToldEntitlements>,
    /// Every subscription of the account, with the id of the order that started it.
    pub subscriptions: Vec<(Subscription, Option<OrderId>)>,
    /// The orders that may grant access: the one-time orders paid (or partly refunded), and
    /// those that started a subscription.
    pub orders: Vec<Order>,
}

/// What to keep as last told of an account's entitlements, written only if the record still
/// has the version it was decided from (else [`StoreError::Conflict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitlementsWrite {
    /// Whose: a user's personal account, or a team's.
    pub account: AccountId,
    /// The version read (`None`: there was no record; the write creates it).
    pub expected_version: Option<i64>,
    /// The map now.
    pub entitlements: Entitlements,
    /// When the passing of time changes them next.
    pub next_change_at: Option<Timestamp>,
    /// When they were worked out.
    pub at: Timestamp,
}

/// A write's entitlements: what to keep, and the `entitlements.changed` it tells when they
/// changed (written after the write's other events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitlementsTold {
    /// What to keep.
    pub write: EntitlementsWrite,
    /// What the change tells: `entitlements.changed` when they changed, and
    /// `account.seats_exceeded` when the change left a team fewer seats than members.
    pub events: Vec<HostEvent>,
}

/// What one read of the outbox found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventsRead {
    /// The events, in id order.
    pub events: Vec<StoredEvent>,
    /// Set when the read stopped looking before it had `limit` events (a store that keeps no
    /// index by type bounds how many events a read filtered by type looks at): every event up to
    /// this id was looked at, and the next read may start after it. `None` when the read looked
    /// as far as it needed to.
    pub looked_through: Option<i64>,
}

/// The largest number of events one read returns.
pub const MAX_EVENTS_PER_READ: u32 = 1_000;

/// Reading the outbox in order, and forgetting what is past its retention.
#[async_trait]
pub trait HostEventLog: Send + Sync + 'static {
    /// Up to `limit` (at most [`MAX_EVENTS_PER_READ`]) events with an id above `after` (all
    /// when `None`), of one of `kinds` (any kind when empty), in id order. With `kinds`, an
    /// adapter MAY look at a bounded number of events and say how far it looked
    /// ([`EventsRead::looked_through`]); without, it returns `limit` events when there are.
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
    ) -> Result<EventsRead, StoreError>;

    /// The largest event id this log can have handed out so far (0 when it has handed out
    /// none). Every id a read ever returned, and so every cursor the feed ever issued, is at or
    /// below it, whatever was purged since and whichever instance wrote or read the event; an
    /// id above it names no event this log wrote.
    ///
    /// # Errors
    /// Storage failures.
    async fn issued_through(&self) -> Result<i64, StoreError>;

    /// Delete up to `limit` events that occurred before `before`, oldest first; returns how
    /// many.
    ///
    /// # Errors
    /// Storage failures.
    async fn purge_events(&self, before: Timestamp, limit: u32) -> Result<u32, StoreError>;

    /// What `account`'s effective entitlements are worked out from (see [`EntitlementBasis`]).
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn entitlement_basis(&self, account: &AccountId) -> Result<EntitlementBasis, StoreError>;

    /// Up to `limit` accounts one of whose purchases stopped granting access by the passing of
    /// time at or before `now` (their record's `next_change_at`), soonest first.
    ///
    /// # Errors
    /// Storage failures.
    async fn entitlements_due(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<AccountId>, StoreError>;
}
