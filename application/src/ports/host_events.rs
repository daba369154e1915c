//! The outbox of host events, as the catch-up feed and the delivery worker read it.
//!
//! Events are written by the store itself, inside the transaction of the change they describe
//! (no port method writes one on its own); this port only reads them back and forgets old ones.

use std::collections::BTreeMap;

use async_trait::async_trait;
use domain::entitlements::Entitlements;
use domain::{PlanId, Timestamp, UserId};

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

/// What decides a user's effective entitlements inside a store transaction, so that
/// `entitlements.changed` is written with the change that causes it (and by the reconciler
/// when one-time access or a subscription's paid time runs out). The same rules as
/// `Service::report_entitlements`: each purchase grants what its order was sold with; a
/// purchase without that (an order stored before orders kept entitlements, a subscription the
/// provider moved to another plan) grants its plan's entitlements as they are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitlementRules {
    /// How long a past-due subscription keeps access after its period ends.
    pub past_due_grace_ms: i64,
    /// Where a plan's entitlements as they are now are found.
    pub live_plans: LivePlans,
}

/// Where the store finds a plan's entitlements as they are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LivePlans {
    /// Static pricing: the catalog's plans (a plan not listed grants nothing).
    Catalog(BTreeMap<PlanId, Entitlements>),
    /// Dynamic pricing: the stored plans.
    Stored,
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

    /// How the store works a user's effective entitlements out when it tells
    /// `entitlements.changed` (in the transaction of each payment event that changes an order or
    /// a subscription, and in [`HostEventLog::tell_entitlement_lapses`]). Until this is called
    /// nothing is told; the service calls it when it is made. The default keeps nothing (an
    /// adapter without an outbox).
    fn configure_entitlements(&self, rules: EntitlementRules) {
        let _ = rules;
    }

    /// Tell `entitlements.changed` for up to `limit` users a purchase of whose stopped granting
    /// access by the passing of time (one-time access ran out, a cancelled or past-due
    /// subscription's paid time or grace ended) at or before `now`, each in a transaction of its
    /// own; returns how many users' entitlements changed. Each change is told exactly once,
    /// however many instances run this. The default tells nothing (an adapter without an
    /// outbox).
    ///
    /// # Errors
    /// Storage failures.
    async fn tell_entitlement_lapses(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError> {
        let _ = (now, limit);
        Ok(0)
    }
}
