//! Webhook delivery as `tally serve` runs it: the `[webhooks]` settings, the wiring of the
//! sender and the use cases, and the two background loops (fan-out of new events, attempts of
//! due deliveries with bounded concurrency), both stopped gracefully at shutdown.

use std::sync::Arc;
use std::time::Duration;

use application::ports::{Clock, HostEventLog, IdGenerator, WebhookStore};
use application::use_cases::webhook_endpoints::{DeliverySettings, Webhooks};
use domain::AppEnvironment;
use domain::delivery::{DeliveryStatus, EndpointHealth, RetrySchedule, TargetPolicy};
use notifier::{HttpWebhookSender, NotifierSettings};
use serde::Deserialize;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;

use crate::settings::SettingsError;

/// Events read per endpoint per fan-out pass.
const DISPATCH_BATCH: u32 = 500;

/// `[webhooks]`: delivery of host events to the host application's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// Whether `tally serve` runs the delivery loops (the admin API works either way).
    pub enabled: bool,
    /// Which targets endpoints may have (production: https and public addresses unless
    /// `allowPrivateTargets`; development: http and private addresses too).
    pub policy: TargetPolicy,
    /// Attempts in flight at once on this instance.
    pub concurrency: u32,
    /// The longest one attempt may take.
    pub timeout_ms: u64,
    /// Pause between passes when there is nothing to do.
    pub poll_interval_ms: u64,
    /// How long a claimed delivery stays this instance's (longer than the timeout).
    pub lease_ms: i64,
    /// When failed attempts are retried (production: about three days, like Svix's).
    pub schedule: RetrySchedule,
    /// When an endpoint that keeps failing is disabled (five days).
    pub health: EndpointHealth,
}

/// `[webhooks]` as written in `tally.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct WebhooksFile {
    enabled: Option<bool>,
    allow_private_targets: Option<bool>,
    concurrency: Option<u32>,
    timeout_seconds: Option<u32>,
    poll_interval_ms: Option<u32>,
    lease_seconds: Option<u32>,
}

fn bad(setting: &str, problem: &str) -> SettingsError {
    SettingsError {
        setting: setting.to_owned(),
        problem: problem.to_owned(),
    }
}

/// The settings of `file` for `environment`.
///
/// # Errors
/// A value out of range, named.
pub(crate) fn resolve(
    file: &WebhooksFile,
    environment: AppEnvironment,
) -> Result<WebhookSettings, SettingsError> {
    let concurrency = file.concurrency.unwrap_or(8);
    if !(1..=256).contains(&concurrency) {
        return Err(bad("webhooks.concurrency", "must be between 1 and 256"));
    }
    let timeout_s = file.timeout_seconds.unwrap_or(10);
    if !(1..=60).contains(&timeout_s) {
        return Err(bad("webhooks.timeoutSeconds", "must be between 1 and 60"));
    }
    let lease_s = file.lease_seconds.unwrap_or(60);
    if lease_s <= timeout_s || lease_s > 3_600 {
        return Err(bad(
            "webhooks.leaseSeconds",
            "must be longer than timeoutSeconds and at most 3600",
        ));
    }
    let poll_ms = file.poll_interval_ms.unwrap_or(500);
    if !(10..=60_000).contains(&poll_ms) {
        return Err(bad(
            "webhooks.pollIntervalMs",
            "must be between 10 and 60000",
        ));
    }
    let allow_private = file.allow_private_targets.unwrap_or(false);
    let policy = match environment {
        AppEnvironment::Production => TargetPolicy::production(allow_private),
        AppEnvironment::Development => TargetPolicy::development(),
    };
    Ok(WebhookSettings {
        enabled: file.enabled.unwrap_or(true),
        policy,
        concurrency,
        timeout_ms: u64::from(timeout_s) * 1000,
        poll_interval_ms: u64::from(poll_ms),
        lease_ms: i64::from(lease_s) * 1000,
        schedule: RetrySchedule::standard(),
        health: EndpointHealth::default(),
    })
}

/// Wire delivery over `store` (endpoints, deliveries and the events outbox).
///
/// # Errors
/// The HTTP client cannot be built.
pub fn build<St>(
    store: St,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGenerator>,
    settings: &WebhookSettings,
) -> anyhow::Result<Webhooks>
where
    St: WebhookStore + HostEventLog + Clone,
{
    let sender = HttpWebhookSender::new(NotifierSettings {
        policy: settings.policy,
        timeout_ms: settings.timeout_ms,
    })?;
    Ok(Webhooks::new(
        Arc::new(store.clone()),
        Arc::new(store),
        Arc::new(sender),
        clock,
        ids,
        DeliverySettings {
            schedule: settings.schedule.clone(),
            health: settings.health,
            lease_ms: settings.lease_ms,
            batch: settings.concurrency,
        },
    ))
}

/// Run both loops until `stop` turns true; attempts in flight then finish (each is bounded by
/// the timeout).
pub async fn run(webhooks: Arc<Webhooks>, settings: WebhookSettings, stop: watch::Receiver<bool>) {
    let fanned_out = Arc::new(Notify::new());
    let dispatcher = tokio::spawn(dispatch_loop(
        webhooks.clone(),
        settings.poll_interval_ms,
        fanned_out.clone(),
        stop.clone(),
    ));
    deliver_loop(webhooks, &settings, &fanned_out, stop).await;
    let _ = dispatcher.await;
}

/// Wait `ms`, or less when `stop` changes; `true` when stopping.
async fn pause(ms: u64, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = stop.changed() => true,
        () = tokio::time::sleep(Duration::from_millis(ms)) => *stop.borrow(),
    }
}

/// Fan new events out; wake the deliverer when deliveries were created.
async fn dispatch_loop(
    webhooks: Arc<Webhooks>,
    poll_ms: u64,
    fanned_out: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let busy = match webhooks.dispatch(DISPATCH_BATCH).await {
            Ok(report) => report.deliveries > 0,
            Err(error) => {
                tracing::warn!(error = %error, "webhook fan-out failed; retrying");
                false
            }
        };
        if busy {
            fanned_out.notify_one();
        }
        // A pass that found work looks again at once: the outbox may hold more.
        if !busy && pause(poll_ms, &mut stop).await {
            return;
        }
    }
}

/// Claim as many due deliveries as there are free permits and start an attempt for each;
/// returns how many were started.
async fn start_attempts(
    webhooks: &Arc<Webhooks>,
    permits: &Arc<Semaphore>,
    attempts: &mut JoinSet<()>,
) -> usize {
    let free = u32::try_from(permits.available_permits()).unwrap_or(0);
    if free == 0 {
        return 0;
    }
    let claimed = match webhooks.claim_deliveries(free).await {
        Ok(claimed) => claimed,
        Err(error) => {
            tracing::warn!(error = %error, "claiming webhook deliveries failed; retrying");
            return 0;
        }
    };
    let started = claimed.len();
    for delivery in claimed {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let webhooks = webhooks.clone();
        attempts.spawn(async move {
            match webhooks.attempt(&delivery).await {
                Ok(DeliveryStatus::Abandoned) => tracing::warn!(
                    delivery = %delivery.id,
                    endpoint = %delivery.endpoint_id,
                    "a webhook delivery failed its last attempt and is abandoned"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    error = %error,
                    delivery = %delivery.id,
                    "recording a webhook attempt failed; it is retried when its lease ends"
                ),
            }
            drop(permit);
        });
    }
    started
}

/// Attempt due deliveries, at most `concurrency` at once; claim again as soon as a permit is
/// free and something may be due, else wait for an attempt to end, new deliveries, or the poll
/// interval.
async fn deliver_loop(
    webhooks: Arc<Webhooks>,
    settings: &WebhookSettings,
    fanned_out: &Notify,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(settings.concurrency as usize));
    let mut attempts = JoinSet::new();
    let poll = Duration::from_millis(settings.poll_interval_ms);
    loop {
        while attempts.try_join_next().is_some() {}
        if *stop.borrow() {
            break;
        }
        let started = start_attempts(&webhooks, &permits, &mut attempts).await;
        if started > 0 && permits.available_permits() > 0 {
            // More may be due already.
            continue;
        }
        tokio::select! {
            _ = stop.changed() => {}
            Some(_) = attempts.join_next(), if !attempts.is_empty() => {}
            () = fanned_out.notified(), if permits.available_permits() > 0 => {}
            () = tokio::time::sleep(poll) => {}
        }
    }
    while attempts.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> WebhooksFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_are_eight_attempts_at_once_ten_seconds_and_the_standard_schedule() {
        let s = resolve(&WebhooksFile::default(), AppEnvironment::Production).unwrap();
        assert!(s.enabled);
        assert_eq!(s.concurrency, 8);
        assert_eq!(s.timeout_ms, 10_000);
        assert_eq!(s.lease_ms, 60_000);
        assert_eq!(s.schedule, RetrySchedule::standard());
        assert_eq!(s.policy, TargetPolicy::production(false));
        let dev = resolve(&WebhooksFile::default(), AppEnvironment::Development).unwrap();
        assert_eq!(dev.policy, TargetPolicy::development());
    }

    #[test]
    fn the_operator_may_allow_private_targets_in_production() {
        let s = resolve(
            &file("allowPrivateTargets = true\nconcurrency = 32"),
            AppEnvironment::Production,
        )
        .unwrap();
        assert_eq!(s.policy, TargetPolicy::production(true));
        assert_eq!(s.concurrency, 32);
    }

    #[test]
    fn values_out_of_range_are_named() {
        for (text, setting) in [
            ("concurrency = 0", "webhooks.concurrency"),
            ("concurrency = 1000", "webhooks.concurrency"),
            ("timeoutSeconds = 0", "webhooks.timeoutSeconds"),
            (
                "timeoutSeconds = 30\nleaseSeconds = 30",
                "webhooks.leaseSeconds",
            ),
            ("pollIntervalMs = 1", "webhooks.pollIntervalMs"),
        ] {
            let e = resolve(&file(text), AppEnvironment::Production).unwrap_err();
            assert_eq!(e.setting, setting, "{text}");
        }
        assert!(toml::from_str::<WebhooksFile>("unknown = 1").is_err());
    }
}
