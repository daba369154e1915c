//! Delivering host events to webhook endpoints, at least once (issue 17, "Delivery").
//!
//! Two steps, both safe on several instances sharing one database:
//! - [`Webhooks::dispatch`] fans new events out: for each endpoint, the events after its cursor
//!   (read through [`HostEventLog::events_after`](crate::ports::HostEventLog::events_after), which
//!   never returns an event while a smaller id may still commit) become one pending delivery
//!   each when the endpoint is enabled and subscribed, and the cursor moves past them, in one
//!   transaction that skips an endpoint another instance holds;
//! - [`Webhooks::claim_deliveries`] and [`Webhooks::attempt`] claim due deliveries under a lease
//!   and make one signed attempt each; the domain decides the next attempt
//!   ([`RetrySchedule`](domain::delivery::RetrySchedule)) and whether the endpoint is disabled
//!   ([`EndpointHealth`](domain::delivery::EndpointHealth)).
//!
//! How many attempts run at once is the caller's choice (the worker in `bootstrap`).

use domain::delivery::{DeliveryStatus, NextAttempt};

use super::InfraError;
use super::webhook_endpoints::{Webhooks, subscribes};
use crate::ports::{AttemptRecord, ClaimedDelivery, OutgoingWebhook, SendOutcome};

/// The longest error text kept on a delivery.
const MAX_ERROR_CHARS: usize = 200;

/// What one dispatch pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DispatchReport {
    /// Endpoints whose cursor moved.
    pub endpoints: u32,
    /// Deliveries created.
    pub deliveries: u32,
}

impl Webhooks {
    /// Fan out up to `batch` new events to every endpoint.
    ///
    /// # Errors
    /// Infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn dispatch(&self, batch: u32) -> Result<DispatchReport, InfraError> {
        let mut report = DispatchReport::default();
        for endpoint in self.store.list_endpoints().await? {
            let events = self
                .events
                .events_after(Some(endpoint.cursor), batch, &[])
                .await?
                .events;
            let Some(last) = events.last() else {
                continue;
            };
            let to = last.id;
            let wanted: Vec<(String, i64)> = events
                .iter()
                .filter(|e| endpoint.enabled && subscribes(&endpoint.event_types, e.kind))
                .map(|e| (e.event_id.clone(), e.id))
                .collect();
            let created = self
                .store
                .fan_out(&endpoint.id, endpoint.cursor, to, &wanted, self.now())
                .await?;
            if let Some(created) = created {
                report.endpoints += 1;
                report.deliveries += created;
            }
        }
        Ok(report)
    }

    /// Claim up to `limit` deliveries due now (at most the configured batch), under the
    /// configured lease.
    ///
    /// # Errors
    /// Infrastructure.
    pub async fn claim_deliveries(&self, limit: u32) -> Result<Vec<ClaimedDelivery>, InfraError> {
        let limit = limit.min(self.settings.batch).max(1);
        Ok(self
            .store
            .claim_deliveries(self.now(), limit, self.settings.lease_ms)
            .await?)
    }

    /// Make one attempt of a claimed delivery and record what it came to.
    ///
    /// # Errors
    /// Infrastructure (the attempt is then retried once its lease runs out).
    pub async fn attempt(&self, claimed: &ClaimedDelivery) -> Result<DeliveryStatus, InfraError> {
        let outcome = self
            .sender
            .send(&OutgoingWebhook {
                url: claimed.url.clone(),
                message_id: claimed.event_id.clone(),
                payload: claimed.payload.clone(),
                secrets: claimed.secrets.clone(),
                timestamp: self.now(),
            })
            .await;
        let record = self.decide(claimed, &outcome);
        self.store.record_attempt(&record).await?;
        Ok(record.status)
    }

    /// The record of an attempt: success on a 2xx; otherwise the schedule's next attempt or
    /// abandonment, and the endpoint's health.
    fn decide(&self, claimed: &ClaimedDelivery, outcome: &SendOutcome) -> AttemptRecord {
        let now = self.now();
        let attempts = claimed.attempts.saturating_add(1);
        let (status_code, latency_ms, error) = match outcome {
            SendOutcome::Answered { status, latency_ms } => {
                let error = (!(200..300).contains(status)).then(|| format!("HTTP {status}"));
                (Some(*status), *latency_ms, error)
            }
            SendOutcome::Failed { reason, latency_ms } => (
                None,
                *latency_ms,
                Some(reason.chars().take(MAX_ERROR_CHARS).collect()),
            ),
        };
        let mut record = AttemptRecord {
            delivery_id: claimed.id.clone(),
            endpoint_id: claimed.endpoint_id.clone(),
            lease_until: claimed.lease_until,
            at: now,
            status: DeliveryStatus::Succeeded,
            attempts,
            next_attempt_at: None,
            status_code,
            latency_ms,
            error,
            disable: None,
        };
        if record.error.is_none() {
            return record;
        }
        let schedule = &self.settings.schedule;
        let abandoned = match schedule.after_failure(attempts, now) {
            NextAttempt::At(at) => {
                record.status = DeliveryStatus::Failed;
                record.next_attempt_at = Some(at);
                false
            }
            NextAttempt::Abandon => {
                record.status = DeliveryStatus::Abandoned;
                true
            }
        };
        record.disable = self
            .settings
            .health
            .after_failure(
                claimed.failing_since.unwrap_or(now),
                now,
                abandoned,
                schedule.span_ms(),
            )
            .map(|reason| reason.as_str().to_owned());
        record
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use domain::Timestamp;
    use domain::delivery::{EndpointHealth, RetrySchedule, TargetRefusal};

    use super::*;
    use crate::host_events::HostEventKind;
    use crate::pagination::{Page, PageRequest};
    use crate::ports::{
        DeliveryRecord, EndpointAudit, EndpointChange, EndpointWrite, EndpointWritten,
        EntitlementBasis, EventsRead, HostEventLog, RedeliveryTarget, StoreError, WebhookEndpoint,
        WebhookSecret, WebhookSender, WebhookStore,
    };
    use crate::testing::{FixedClock, SequentialIds};
    use crate::use_cases::webhook_endpoints::DeliverySettings;

    const NOW_MS: i64 = 1_800_000_000_000;

    /// Keeps the attempts recorded; nothing else is used by `attempt`.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<AttemptRecord>>);

    #[async_trait]
    impl WebhookStore for Recorded {
        async fn create_endpoint(
            &self,
            _: &WebhookEndpoint,
        ) -> Result<Option<WebhookEndpoint>, StoreError> {
            Err(StoreError::NotFound)
        }
        async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, StoreError> {
            Ok(Vec::new())
        }
        async fn find_endpoint(&self, _: &str) -> Result<Option<WebhookEndpoint>, StoreError> {
            Ok(None)
        }
        async fn update_endpoint(
            &self,
            _: &str,
            _: &EndpointChange,
            _: Timestamp,
        ) -> Result<Option<WebhookEndpoint>, StoreError> {
            Ok(None)
        }
        async fn delete_endpoint(&self, _: &str) -> Result<bool, StoreError> {
            Ok(false)
        }
        async fn rotate_secret(
            &self,
            _: &str,
            _: &WebhookSecret,
            _: Timestamp,
            _: Timestamp,
        ) -> Result<Option<WebhookEndpoint>, StoreError> {
            Ok(None)
        }
        async fn fan_out(
            &self,
            _: &str,
            _: i64,
            _: i64,
            _: &[(String, i64)],
            _: Timestamp,
        ) -> Result<Option<u32>, StoreError> {
            Ok(None)
        }
        async fn claim_deliveries(
            &self,
            _: Timestamp,
            _: u32,
            _: i64,
        ) -> Result<Vec<ClaimedDelivery>, StoreError> {
            Ok(Vec::new())
        }
        async fn record_attempt(&self, record: &AttemptRecord) -> Result<(), StoreError> {
            self.0.lock().unwrap().push(record.clone());
            Ok(())
        }
        async fn list_deliveries(
            &self,
            _: &str,
            _: Option<DeliveryStatus>,
            page: PageRequest,
        ) -> Result<Page<DeliveryRecord>, StoreError> {
            Ok(Page {
                items: Vec::new(),
                request: page,
                total: 0,
            })
        }
        async fn redeliver(
            &self,
            _: &str,
            _: &RedeliveryTarget,
            _: Timestamp,
        ) -> Result<Option<DeliveryRecord>, StoreError> {
            Ok(None)
        }
        async fn write_endpoint(
            &self,
            _: EndpointWrite<'_>,
            _: &EndpointAudit<'_>,
        ) -> Result<Option<EndpointWritten>, StoreError> {
            Ok(None)
        }
    }

    struct NoEvents;

    #[async_trait]
    impl HostEventLog for NoEvents {
        async fn events_after(
            &self,
            _: Option<i64>,
            _: u32,
            _: &[HostEventKind],
        ) -> Result<EventsRead, StoreError> {
            Ok(EventsRead::default())
        }
        async fn issued_through(&self) -> Result<i64, StoreError> {
            Ok(0)
        }
        async fn purge_events(&self, _: Timestamp, _: u32) -> Result<u32, StoreError> {
            Ok(0)
        }
        async fn entitlement_basis(
            &self,
            _: &domain::AccountId,
        ) -> Result<EntitlementBasis, StoreError> {
            Ok(EntitlementBasis::default())
        }
        async fn entitlements_due(
            &self,
            _: Timestamp,
            _: u32,
        ) -> Result<Vec<domain::AccountId>, StoreError> {
            Ok(Vec::new())
        }
    }

    struct Answering(SendOutcome);

    #[async_trait]
    impl WebhookSender for Answering {
        fn new_secret(&self) -> WebhookSecret {
            WebhookSecret::new("whsec_AAAA".to_owned())
        }
        async fn check_target(&self, _: &str) -> Result<(), TargetRefusal> {
            Ok(())
        }
        async fn send(&self, _: &OutgoingWebhook) -> SendOutcome {
            self.0.clone()
        }
    }

    /// The record of one attempt of a delivery that had `attempts` before, answered `outcome`,
    /// on an endpoint failing since `failing_since`.
    async fn check(
        outcome: SendOutcome,
        attempts: u32,
        failing_since: Option<i64>,
    ) -> AttemptRecord {
        let store = Arc::new(Recorded::default());
        let webhooks = Webhooks::new(
            store.clone(),
            Arc::new(NoEvents),
            Arc::new(Answering(outcome)),
            Arc::new(FixedClock::at(NOW_MS)),
            Arc::new(SequentialIds::default()),
            DeliverySettings {
                schedule: RetrySchedule::new(vec![0, 1_000, 60_000]).unwrap(),
                health: EndpointHealth::default(),
                lease_ms: 30_000,
                batch: 8,
            },
        );
        let claimed = ClaimedDelivery {
            id: "wd_1".to_owned(),
            endpoint_id: "we_1".to_owned(),
            url: "https://example.com/".to_owned(),
            secrets: vec![WebhookSecret::new("whsec_AAAA".to_owned())],
            event_id: "evt_1".to_owned(),
            payload: "{}".to_owned(),
            attempts,
            failing_since: failing_since.map(Timestamp::from_unix_millis),
            lease_until: Timestamp::from_unix_millis(NOW_MS + 30_000),
        };
        let status = webhooks.attempt(&claimed).await.unwrap();
        let record = store.0.lock().unwrap().pop().unwrap();
        assert_eq!(record.status, status);
        assert_eq!(record.lease_until, claimed.lease_until);
        record
    }

    fn answered(status: u16) -> SendOutcome {
        SendOutcome::Answered {
            status,
            latency_ms: 12,
        }
    }

    #[tokio::test]
    async fn a_2xx_succeeds_and_anything_else_is_retried_on_the_schedule() {
        for status in [200, 201, 204, 299] {
            let record = check(answered(status), 0, Some(NOW_MS - 5)).await;
            assert_eq!(record.status, DeliveryStatus::Succeeded, "{status}");
            assert_eq!(
                (record.next_attempt_at, record.error, record.disable),
                (None, None, None)
            );
        }
        for status in [301, 400, 410, 500, 503] {
            let record = check(answered(status), 0, None).await;
            assert_eq!(record.status, DeliveryStatus::Failed, "{status}");
            assert_eq!(record.attempts, 1);
            assert_eq!(
                record.next_attempt_at,
                Some(Timestamp::from_unix_millis(NOW_MS + 1_000))
            );
            assert_eq!(
                record.error.as_deref(),
                Some(format!("HTTP {status}").as_str())
            );
            assert_eq!(record.status_code, Some(status));
        }
    }

    #[tokio::test]
    async fn a_timeout_is_a_failure_with_its_reason_and_the_last_attempt_abandons() {
        let timeout = SendOutcome::Failed {
            reason: "timed out".to_owned(),
            latency_ms: 10_000,
        };
        let record = check(timeout.clone(), 1, Some(NOW_MS - 1_000)).await;
        assert_eq!(record.status, DeliveryStatus::Failed);
        assert_eq!(
            record.next_attempt_at,
            Some(Timestamp::from_unix_millis(NOW_MS + 60_000))
        );
        assert_eq!((record.status_code, record.latency_ms), (None, 10_000));
        assert_eq!(record.error.as_deref(), Some("timed out"));
        // The third attempt fails after the endpoint failed the whole schedule: abandoned, and
        // the endpoint disabled.
        let record = check(timeout.clone(), 2, Some(NOW_MS - 61_000)).await;
        assert_eq!(record.status, DeliveryStatus::Abandoned);
        assert_eq!(record.next_attempt_at, None);
        assert!(record.disable.is_some());
        // A success in between (failing only since recently): abandoned, still enabled.
        let record = check(timeout, 2, Some(NOW_MS - 10)).await;
        assert_eq!(record.status, DeliveryStatus::Abandoned);
        assert_eq!(record.disable, None);
    }

    #[tokio::test]
    async fn five_days_of_failures_disable_the_endpoint_mid_schedule() {
        let record = check(answered(500), 0, Some(NOW_MS - 5 * 86_400_000)).await;
        assert_eq!(record.status, DeliveryStatus::Failed);
        assert!(record.disable.is_some());
    }

    #[test]
    fn event_types_are_checked_against_the_vocabulary_and_empty_means_all() {
        use crate::use_cases::webhook_endpoints::{
            WebhookEndpointError, parse_event_types, subscribes,
        };
        let kinds = parse_event_types(&[
            "order.paid".into(),
            " order.paid".into(),
            "credits.granted".into(),
        ])
        .unwrap();
        assert_eq!(
            kinds,
            [HostEventKind::OrderPaid, HostEventKind::CreditsGranted]
        );
        assert!(matches!(
            parse_event_types(&["order.shipped".into()]),
            Err(WebhookEndpointError::UnknownEventType(code)) if code == "order.shipped"
        ));
        for kind in HostEventKind::ALL {
            // Consumption types only reach an endpoint that names them.
            assert_eq!(subscribes(&[], kind), !kind.is_opt_in());
            assert_eq!(subscribes(&kinds, kind), kinds.contains(&kind));
            assert!(subscribes(&[kind], kind));
        }
    }
}
