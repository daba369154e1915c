//! An administrator replays one recorded provider event through the webhook pipeline
//! (issue 18).
//!
//! The inbox records only events whose signature verified, so a replay re-reads the recorded
//! body through the gateway's parsing without the signature step
//! ([`crate::ports::PaymentGateway::parse_recorded`]: providers' timestamp windows would refuse
//! any recorded event) and then decides it exactly like a live delivery.
//!
//! - An event that was applied (or found its change already made) is a duplicate: nothing is
//!   read again or changed.
//! - Any other event (a mismatch, an unknown order or subscription, a stale or late one) is
//!   decided again, now, under a new inbox id `<recorded id>#replay-rp_<unique>`: the domain's
//!   state machines and the store's compare-and-set make that idempotent (an order paid by an
//!   earlier replay is a `duplicate_state`), and the recorded row stays as it was.
//!
//! Every replay is counted apart from deliveries
//! ([`crate::ports::Metrics::webhook_replayed`], `tally_webhooks_total{source="replay"}`): the
//! outcome it came to (`duplicate` for an event already applied), `rejected` for an event that
//! cannot be read again, `provider_unavailable` or `error`.
//!
//! A replay that is decided again is written to the audit log (`webhook_event.replayed`, with
//! the recorded outcome and what the replay came to) in the transaction of the replay's own
//! write (its inbox row and whatever it changes); a replay that changes nothing (of an event
//! already applied) or is refused writes no entry. A replay of an event recorded as a mismatch
//! that mismatches again tells the host nothing more: its `payment.mismatch` was told when the
//! event arrived.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::{EventOutcome, OrderStatus, Timestamp};

use super::super::handle_webhook::{EventAuditFor, HandleWebhookError};
use crate::accounts::User;
use crate::ports::{
    AckFor, AuditAction, AuditFacts, AuditValue, Clock, EventAudit, IdGenerator, MismatchNotice,
    NewAudit, RecordedEvent, RecordedWebhook, SecretHasher, Store, StoreError, WebhookResult,
};
use crate::service::Service;

/// The marker between a recorded event id and a replay's suffix.
const REPLAY_MARK: &str = "#replay-";

/// Why a replay was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// No recorded event with this id.
    #[error("recorded event not found")]
    NotFound,
    /// The event cannot be read again: its provider is not configured, it was recorded without
    /// a body (reconciliation), or its body no longer parses.
    #[error("not replayable: {0}")]
    NotReplayable(String),
    /// The provider could not be asked what the event needs; replaying later may work.
    #[error("the provider could not be reached: {0}")]
    ProviderUnavailable(String),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] super::InfraError),
}

impl From<StoreError> for ReplayError {
    fn from(e: StoreError) -> Self {
        Self::Infra(e.into())
    }
}

impl From<HandleWebhookError> for ReplayError {
    fn from(e: HandleWebhookError) -> Self {
        match e {
            HandleWebhookError::UnknownProvider => {
                Self::NotReplayable("the provider is not configured".into())
            }
            HandleWebhookError::Rejected { reason, .. } => Self::NotReplayable(reason.to_string()),
            HandleWebhookError::ProviderUnavailable(why) => Self::ProviderUnavailable(why),
            HandleWebhookError::Infra(infra) => Self::Infra(infra),
        }
    }
}

/// What a replay came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The recorded event replayed (as it was recorded; its row does not change).
    pub recorded: RecordedEvent,
    /// The outcome of the replay: `duplicate` for an event that was applied, else what the
    /// pipeline decided now (`applied`, `mismatch`, `duplicate_state`, …).
    pub outcome: String,
    /// The inbox id the replay was recorded under; `None` for a duplicate.
    pub replayed_as: Option<String>,
}

/// The recorded id without a replay's suffix, and the index of its event in the webhook
/// (`<id>#<index>` names a webhook's later events).
fn original_id(event_id: &str) -> (&str, &str, usize) {
    let original = event_id.split(REPLAY_MARK).next().unwrap_or(event_id);
    match original.rsplit_once('#') {
        Some((base, index)) => match index.parse::<usize>() {
            Ok(index) => (original, base, index),
            Err(_) => (original, original, 0),
        },
        None => (original, original, 0),
    }
}

/// Whether a recorded outcome means the event's change is made: replaying it changes nothing.
const fn already_applied(outcome: EventOutcome) -> bool {
    matches!(
        outcome,
        EventOutcome::Applied | EventOutcome::Duplicate | EventOutcome::DuplicateState
    )
}

/// The entry of `admin`'s replay of `recorded` at `at`, recorded as `as_id`, for whatever the
/// replay comes to; a mismatch told when the event arrived is not told again.
fn replay_audit(
    admin: &User,
    recorded: &RecordedEvent,
    as_id: &str,
    at: Timestamp,
) -> Arc<EventAuditFor> {
    let entry = &recorded.entry;
    let text = |v: &str| AuditValue::Text(v.to_owned());
    let before: AuditFacts = BTreeMap::from([
        ("provider".to_owned(), text(entry.provider.as_str())),
        ("eventId".to_owned(), text(&entry.event_id)),
        ("outcome".to_owned(), text(entry.outcome.code())),
    ]);
    let mismatch = if entry.outcome == EventOutcome::Mismatch {
        MismatchNotice::ToldBefore
    } else {
        MismatchNotice::Tell
    };
    let (admin_id, object_id, as_id) = (admin.id.clone(), recorded.id.to_string(), text(as_id));
    Arc::new(move |outcome: EventOutcome, _: Option<&OrderStatus>| {
        let after = BTreeMap::from([
            (
                "outcome".to_owned(),
                AuditValue::Text(outcome.code().into()),
            ),
            ("replayedAs".to_owned(), as_id.clone()),
        ]);
        EventAudit {
            entry: NewAudit {
                admin_id: admin_id.clone(),
                action: AuditAction::WebhookReplayed,
                object_kind: "webhook_event",
                object_id: object_id.clone(),
                before: Some(before.clone()),
                after: Some(after),
                at,
            },
            mismatch,
        }
    })
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// `admin` replays the recorded event `id`
    /// through the pipeline, its audit entry written with the replay's write (see the module
    /// documentation).
    ///
    /// # Errors
    /// See [`ReplayError`].
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, event_row = id))]
    pub async fn replay_webhook_event(
        &self,
        admin: &User,
        id: i64,
    ) -> Result<Replayed, ReplayError> {
        let recorded = self
            .store
            .find_recorded_event(id)
            .await?
            .ok_or(ReplayError::NotFound)?;
        let provider = recorded.entry.provider;
        if already_applied(recorded.entry.outcome) {
            let duplicate = WebhookResult::Event(EventOutcome::Duplicate);
            self.metrics.webhook_replayed(provider, duplicate);
            return Ok(Replayed {
                recorded,
                outcome: EventOutcome::Duplicate.code().to_owned(),
                replayed_as: None,
            });
        }
        let replayed = self.replay_recorded(admin, &recorded).await;
        let counted = match &replayed {
            Ok((outcome, _)) => WebhookResult::Event(*outcome),
            Err(ReplayError::NotFound | ReplayError::NotReplayable(_)) => WebhookResult::Rejected,
            Err(ReplayError::ProviderUnavailable(_)) => WebhookResult::ProviderUnavailable,
            Err(ReplayError::Infra(_)) => WebhookResult::Error,
        };
        self.metrics.webhook_replayed(provider, counted);
        let (outcome, as_id) = replayed?;
        Ok(Replayed {
            recorded,
            outcome: outcome.code().to_owned(),
            replayed_as: Some(as_id),
        })
    }

    /// Read `recorded` again through its gateway and decide its event now, with `admin`'s
    /// entry: the outcome and the inbox id it was recorded under.
    async fn replay_recorded(
        &self,
        admin: &User,
        recorded: &RecordedEvent,
    ) -> Result<(EventOutcome, String), ReplayError> {
        let entry = &recorded.entry;
        if entry.payload.is_empty() {
            return Err(ReplayError::NotReplayable(
                "recorded without a body (learnt by reconciliation)".into(),
            ));
        }
        let gateway = self
            .gateways
            .get(entry.provider)
            .ok_or_else(|| ReplayError::NotReplayable("the provider is not configured".into()))?
            .clone();
        let (original, base, index) = original_id(&entry.event_id);
        let mut verified = gateway
            .parse_recorded(&RecordedWebhook {
                event_id: base.to_owned(),
                body: entry.payload.as_bytes().to_vec(),
                received_at: entry.received_at,
            })
            .await
            .map_err(|e| ReplayError::NotReplayable(e.to_string()))?;
        if !verified.events.is_empty() {
            // Only the event this row recorded; the webhook's others have rows of their own.
            if index >= verified.events.len() {
                return Err(ReplayError::NotReplayable(
                    "the recorded body no longer holds this event".into(),
                ));
            }
            verified.events = vec![verified.events.swap_remove(index)];
        }
        let as_id = format!("{original}{REPLAY_MARK}{}", self.ids.new_id("rp"));
        let named = as_id.clone();
        let ack = gateway.webhook_ack(&AckFor::Accepted);
        let audit = replay_audit(admin, recorded, &as_id, self.clock.now());
        let handled = self
            .apply_verified(
                entry.provider,
                &verified,
                entry.payload.clone(),
                ack,
                &move |_| named.clone(),
                Some(audit),
            )
            .await?;
        let outcome = handled
            .outcomes()
            .first()
            .copied()
            .unwrap_or(EventOutcome::Ignored);
        Ok((outcome, as_id))
    }
}

#[cfg(test)]
mod tests {
    use super::original_id;

    #[test]
    fn a_recorded_id_names_its_event_and_drops_a_replay_suffix() {
        assert_eq!(original_id("evt_1"), ("evt_1", "evt_1", 0));
        assert_eq!(original_id("evt_1#2"), ("evt_1#2", "evt_1", 2));
        assert_eq!(original_id("evt_1#replay-17"), ("evt_1", "evt_1", 0));
        assert_eq!(original_id("evt_1#2#replay-17"), ("evt_1#2", "evt_1", 2));
        assert_eq!(original_id("a#b"), ("a#b", "a#b", 0));
    }
}
