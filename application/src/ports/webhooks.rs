//! Webhook endpoints and the delivery of host events to them (issue 17, "Delivery").
//!
//! [`WebhookStore`] keeps the endpoints and one delivery per (endpoint, event); the delivery
//! worker claims due deliveries with a lease so that several instances share the work and a
//! crashed instance's claims come back. [`WebhookSender`] signs and sends one attempt (Standard
//! Webhooks), checks targets against the operator's policy and makes new signing secrets.

use std::fmt;

use async_trait::async_trait;
use domain::Timestamp;
use domain::delivery::{DeliveryStatus, TargetRefusal};

use super::StoreError;
use crate::host_events::HostEventKind;
use crate::pagination::{Page, PageRequest};

/// A signing secret: `whsec_` and the base64 of its key bytes. Redacted in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// Wrap a secret as stored or made by [`WebhookSender::new_secret`].
    #[must_use]
    pub fn new(secret: String) -> Self {
        Self(secret)
    }

    /// The secret itself, for signing and for the one answer that shows it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

/// An endpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// `we_…`.
    pub id: String,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The types it receives; empty means every type that is not opt-in.
    pub event_types: Vec<HostEventKind>,
    /// Whether deliveries are made.
    pub enabled: bool,
    /// Why it was disabled automatically, if it was.
    pub disabled_reason: Option<String>,
    /// The current signing secret.
    pub secret: WebhookSecret,
    /// The secret before the last rotation, and when it stops being used.
    pub previous_secret: Option<(WebhookSecret, Timestamp)>,
    /// The last `events.id` fanned out to it.
    pub cursor: i64,
    /// Its first failed attempt since its last success.
    pub failing_since: Option<Timestamp>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

/// A change an administrator makes to an endpoint; `None` keeps the field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointChange {
    /// A new URL (already checked).
    pub url: Option<String>,
    /// New types.
    pub event_types: Option<Vec<HostEventKind>>,
    /// Enable or disable (enabling clears the disabled reason and the failing time).
    pub enabled: Option<bool>,
}

/// One delivery as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// `wd_…`.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// The event's `evt_…` id (the `webhook-id`).
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// Its state.
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (open deliveries).
    pub next_attempt_at: Option<Timestamp>,
    /// The last attempt's HTTP status, if it got an answer.
    pub last_status_code: Option<u16>,
    /// The last attempt's duration.
    pub last_latency_ms: Option<i64>,
    /// Why the last attempt failed (short, never a secret).
    pub last_error: Option<String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

/// A delivery claimed for an attempt, with what the attempt needs.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// `wd_…`.
    pub id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// Its URL.
    pub url: String,
    /// The secrets to sign with: the current one, and the previous one while it is still valid.
    pub secrets: Vec<WebhookSecret>,
    /// The event's `evt_…` id.
    pub event_id: String,
    /// The envelope to send, verbatim.
    pub payload: String,
    /// Attempts made before this one.
    pub attempts: u32,
    /// The endpoint's first failure since its last success.
    pub failing_since: Option<Timestamp>,
    /// The lease: the attempt is recorded only while it is still this instance's.
    pub lease_until: Timestamp,
}

/// What one attempt came to, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// The delivery.
    pub delivery_id: String,
    /// The endpoint.
    pub endpoint_id: String,
    /// The claim's lease ([`ClaimedDelivery::lease_until`]).
    pub lease_until: Timestamp,
    /// When the attempt was made.
    pub at: Timestamp,
    /// The delivery's new state.
    pub status: DeliveryStatus,
    /// Attempts made, this one included.
    pub attempts: u32,
    /// The next attempt (when the status is `failed`).
    pub next_attempt_at: Option<Timestamp>,
    /// The HTTP status, if any.
    pub status_code: Option<u16>,
    /// How long it took.
    pub latency_ms: i64,
    /// Why it failed.
    pub error: Option<String>,
    /// Disable the endpoint, with this reason.
    pub disable: Option<String>,
}

/// Which delivery to schedule again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedeliveryTarget {
    /// An existing delivery of the endpoint.
    Delivery(String),
    /// An event by its `evt_…` id (a delivery is created when there is none).
    Event(String),
}

/// An administrator's change to the webhook endpoints, which the store makes in one transaction
/// with its audit entry ([`WebhookStore::write_endpoint`]); each means what the store
/// method it names means.
#[derive(Debug, Clone, Copy)]
pub enum EndpointWrite<'a> {
    /// [`WebhookStore::create_endpoint`].
    Create(&'a WebhookEndpoint),
    /// [`WebhookStore::update_endpoint`].
    Update {
        /// The endpoint.
        id: &'a str,
        /// What changes.
        change: &'a EndpointChange,
        /// Now.
        now: Timestamp,
    },
    /// [`WebhookStore::delete_endpoint`].
    Delete(&'a str),
    /// [`WebhookStore::rotate_secret`].
    Rotate {
        /// The endpoint.
        id: &'a str,
        /// The new secret.
        secret: &'a WebhookSecret,
        /// Until when the current one stays valid.
        previous_until: Timestamp,
        /// Now.
        now: Timestamp,
    },
    /// [`WebhookStore::redeliver`].
    Redeliver {
        /// The endpoint.
        endpoint_id: &'a str,
        /// What to send again.
        target: &'a RedeliveryTarget,
        /// Now.
        now: Timestamp,
    },
}

/// What an [`EndpointWrite`] did, read in its transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointWritten {
    /// The endpoint created.
    Created(WebhookEndpoint),
    /// The endpoint as it was and as it is now.
    Updated {
        /// Before the change.
        before: WebhookEndpoint,
        /// After it.
        after: WebhookEndpoint,
    },
    /// The endpoint deleted, as it was.
    Deleted(WebhookEndpoint),
    /// The endpoint with its new secret.
    Rotated(WebhookEndpoint),
    /// The delivery scheduled again.
    Redelivered(DeliveryRecord),
}

/// Builds an administrator's audit entry from what their write did.
pub type EndpointAudit<'a> = dyn Fn(&EndpointWritten) -> super::NewAudit + Send + Sync + 'a;

/// Storage of endpoints and deliveries.
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Store a new endpoint; its cursor starts after the newest event, so it receives what
    /// happens from now on. `None` when [`MAX_ENDPOINTS`] exist already: the count and the
    /// insert are one transaction, so concurrent creates on several instances never exceed it.
    ///
    /// # Errors
    /// Storage failures.
    async fn create_endpoint(
        &self,
        endpoint: &WebhookEndpoint,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// Every endpoint, oldest first (at most [`MAX_ENDPOINTS`]).
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, StoreError>;

    /// One endpoint.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn find_endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// Apply `change`; disabling abandons the endpoint's open deliveries. `None` when there is
    /// no such endpoint.
    ///
    /// # Errors
    /// Storage failures.
    async fn update_endpoint(
        &self,
        id: &str,
        change: &EndpointChange,
        now: Timestamp,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// Delete an endpoint and its deliveries; `false` when there was none.
    ///
    /// # Errors
    /// Storage failures.
    async fn delete_endpoint(&self, id: &str) -> Result<bool, StoreError>;

    /// Make `secret` the endpoint's secret; the current one stays valid until `previous_until`.
    /// `None` when there is no such endpoint.
    ///
    /// # Errors
    /// Storage failures.
    async fn rotate_secret(
        &self,
        id: &str,
        secret: &WebhookSecret,
        previous_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// In one transaction: lock the endpoint if its cursor is still `from` (skipping it when
    /// another instance holds it: `FOR UPDATE SKIP LOCKED` on PostgreSQL), create a pending
    /// delivery due at `now` for each of `events` (id, `events.id`) when it is enabled and
    /// subscribed (once per endpoint and event), and move its cursor to `to`. Returns how many
    /// deliveries were created, or `None` when the endpoint was skipped.
    ///
    /// # Errors
    /// Storage failures.
    async fn fan_out(
        &self,
        endpoint_id: &str,
        from: i64,
        to: i64,
        events: &[(String, i64)],
        now: Timestamp,
    ) -> Result<Option<u32>, StoreError>;

    /// Claim up to `limit` open deliveries due at `now` of enabled endpoints, none claimed by
    /// another instance (`SKIP LOCKED` on PostgreSQL), each leased until `now + lease_ms`: a
    /// delivery whose attempt is not recorded by then may be claimed again.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn claim_deliveries(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> Result<Vec<ClaimedDelivery>, StoreError>;

    /// Record an attempt in one transaction: the delivery's state and lease, and the endpoint's
    /// failing time (cleared by a success), disabling it (and abandoning its open deliveries)
    /// when `record.disable` says so. Nothing is recorded when the delivery is no longer held
    /// under `record.lease_until` (its lease ran out and another instance claimed it, or it was
    /// scheduled again).
    ///
    /// # Errors
    /// Storage failures.
    async fn record_attempt(&self, record: &AttemptRecord) -> Result<(), StoreError>;

    /// An endpoint's deliveries, newest first, optionally of one status.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn list_deliveries(
        &self,
        endpoint_id: &str,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Page<DeliveryRecord>, StoreError>;

    /// Schedule a delivery again at `now` with a fresh schedule; for an event without a
    /// delivery to this endpoint, create one (delivery ids are `wd_<endpoint id>_<events.id>`,
    /// so one (endpoint, event) is one delivery). `None` when the endpoint, the delivery or the
    /// event does not exist.
    ///
    /// # Errors
    /// Storage failures.
    async fn redeliver(
        &self,
        endpoint_id: &str,
        target: &RedeliveryTarget,
        now: Timestamp,
    ) -> Result<Option<DeliveryRecord>, StoreError>;

    /// Make `write` and, in the same transaction, the audit entry `audit` builds from what it
    /// did: both are stored or neither. `None`, and no entry, when the write was refused as the
    /// method it names refuses it (no such endpoint, delivery or event; [`MAX_ENDPOINTS`]
    /// reached).
    ///
    /// # Errors
    /// Storage failures; nothing is written when it fails.
    async fn write_endpoint(
        &self,
        write: EndpointWrite<'_>,
        audit: &EndpointAudit<'_>,
    ) -> Result<Option<EndpointWritten>, StoreError>;
}

/// The most endpoints a deployment may have.
pub const MAX_ENDPOINTS: u32 = 100;

/// One signed request to make.
#[derive(Debug, Clone)]
pub struct OutgoingWebhook {
    /// The endpoint's URL.
    pub url: String,
    /// The `webhook-id`.
    pub message_id: String,
    /// The body, verbatim.
    pub payload: String,
    /// One signature per secret, in order.
    pub secrets: Vec<WebhookSecret>,
    /// The `webhook-timestamp`.
    pub timestamp: Timestamp,
}

/// What an attempt came to at the HTTP level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The endpoint answered with this status (2xx is a success).
    Answered {
        /// The status code.
        status: u16,
        /// How long it took.
        latency_ms: i64,
    },
    /// No answer: a refused target, a connection failure or a timeout (no secret in `reason`).
    Failed {
        /// Short reason.
        reason: String,
        /// How long it took.
        latency_ms: i64,
    },
}

/// Signing and sending webhooks, under the operator's target policy.
#[async_trait]
pub trait WebhookSender: Send + Sync + 'static {
    /// A new `whsec_` secret of 24 to 32 random bytes.
    fn new_secret(&self) -> WebhookSecret;

    /// Check a URL against the target policy: scheme, and every address its host resolves to.
    ///
    /// # Errors
    /// The refusal.
    async fn check_target(&self, url: &str) -> Result<(), TargetRefusal>;

    /// Check the target again (DNS may have changed), then POST the payload signed with every
    /// secret, connecting only to a checked address and following no redirect. A refused
    /// target is a [`SendOutcome::Failed`], never a request.
    async fn send(&self, webhook: &OutgoingWebhook) -> SendOutcome;
}
