//! Prometheus metrics through the `metrics` facade: requests by route and status and a latency
//! histogram (this adapter's own), and, through the use cases' [`Metrics`] port, order
//! transitions, webhook results by provider, credits consumed, reserved, granted and taken
//! back, and postings the database's guard did not write as the ledger's rules decided.
//!
//! One recorder is built and installed globally, once per process (tests build many apps).

use std::sync::OnceLock;
use std::time::Duration;

use application::ports::{Metrics, WebhookResult};
use domain::{Credits, OrderStatus, ProviderId, TransactionKind};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Requests answered, by method, route pattern and status.
pub(crate) const REQUESTS_TOTAL: &str = "http_requests_total";
/// Request latency in seconds, by method and route pattern.
pub(crate) const REQUEST_DURATION_SECONDS: &str = "http_request_duration_seconds";
/// Order transitions, by resulting status (`pending`, `paid`, `failed`, `cancelled`, `refunded`, …).
pub(crate) const ORDERS_TOTAL: &str = "tally_orders_total";
/// Webhook events handled, by provider, result (`applied`, `duplicate`, `ignored`, `stale`,
/// `mismatch`, `late_payment`, `unknown_order`, `rejected`, `unknown_provider`, `error`, …) and
/// source ([`SOURCE_DELIVERY`] or [`SOURCE_REPLAY`]).
pub(crate) const WEBHOOKS_TOTAL: &str = "tally_webhooks_total";
/// `source` of a webhook event the provider delivered.
const SOURCE_DELIVERY: &str = "delivery";
/// `source` of a recorded event an administrator replayed.
const SOURCE_REPLAY: &str = "replay";
/// Credits consumed (consumptions and settled reservations), in hundredths of a credit.
pub(crate) const CREDITS_CONSUMED_HUNDREDTHS_TOTAL: &str =
    "tally_credits_consumed_hundredths_total";
/// Credits reserved, in hundredths of a credit.
pub(crate) const CREDITS_RESERVED_HUNDREDTHS_TOTAL: &str =
    "tally_credits_reserved_hundredths_total";
/// Credits granted by provider events (purchases, subscription periods), in hundredths.
pub(crate) const CREDITS_GRANTED_HUNDREDTHS_TOTAL: &str = "tally_credits_granted_hundredths_total";
/// Credits taken back by refunds, in hundredths.
pub(crate) const CREDITS_CLAWED_BACK_HUNDREDTHS_TOTAL: &str =
    "tally_credits_clawed_back_hundredths_total";
/// Postings the ledger's rules decided that the database's guard refused or wrote otherwise, by
/// transaction kind: an invariant broke (the request got a 500; nothing was written).
pub(crate) const SPEND_DISAGREEMENTS_TOTAL: &str = "tally_spend_disagreements_total";

/// Latency buckets, in seconds.
const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process's recorder handle, installing the recorder on first use. `None` when another
/// global recorder was installed first (metrics then go there).
fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(REQUEST_DURATION_SECONDS.to_owned()),
                    LATENCY_BUCKETS_SECONDS,
                )
                .map_err(|e| tracing::error!(error = %e, "metrics buckets refused"))
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => Some(handle),
                Err(_) => {
                    tracing::warn!("a global metrics recorder was already installed");
                    None
                }
            }
        })
        .as_ref()
}

/// Install the recorder (idempotent), so the first scrape already lists the metrics.
pub(crate) fn install() {
    let _ = handle();
}

/// The Prometheus text exposition of every metric.
pub(crate) fn render() -> String {
    handle().map_or_else(String::new, |h| {
        h.run_upkeep();
        h.render()
    })
}

/// One answered request.
pub(crate) fn record_request(method: &str, route: &str, status: u16, elapsed: Duration) {
    let labels = [
        ("method", method.to_owned()),
        ("route", route.to_owned()),
        ("status", status.to_string()),
    ];
    metrics::counter!(REQUESTS_TOTAL, &labels).increment(1);
    let labels = [("method", method.to_owned()), ("route", route.to_owned())];
    metrics::histogram!(REQUEST_DURATION_SECONDS, &labels).record(elapsed.as_secs_f64());
}

/// One webhook event counted.
fn count_webhook(provider: &'static str, result: WebhookResult, source: &'static str) {
    let labels = [
        ("provider", provider),
        ("result", result.code()),
        ("source", source),
    ];
    metrics::counter!(WEBHOOKS_TOTAL, &labels).increment(1);
}

/// The Prometheus side of the use cases' [`Metrics`] port: what a use case reports, wherever it
/// ran (the API, a page, the reconciler), becomes a series here.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrometheusMetrics;

impl Metrics for PrometheusMetrics {
    fn order_moved(&self, status: &OrderStatus) {
        metrics::counter!(ORDERS_TOTAL, "status" => status.code()).increment(1);
    }

    fn webhook(&self, provider: Option<ProviderId>, result: WebhookResult) {
        // Only known ids become labels, so a scan of odd paths cannot grow them.
        let provider = provider.map_or("unknown", ProviderId::as_str);
        count_webhook(provider, result, SOURCE_DELIVERY);
    }

    fn webhook_replayed(&self, provider: ProviderId, result: WebhookResult) {
        count_webhook(provider.as_str(), result, SOURCE_REPLAY);
    }

    fn credits_consumed(&self, amount: Credits) {
        add(CREDITS_CONSUMED_HUNDREDTHS_TOTAL, amount);
    }

    fn credits_reserved(&self, amount: Credits) {
        add(CREDITS_RESERVED_HUNDREDTHS_TOTAL, amount);
    }

    fn credits_granted(&self, amount: Credits) {
        add(CREDITS_GRANTED_HUNDREDTHS_TOTAL, amount);
    }

    fn credits_clawed_back(&self, amount: Credits) {
        add(CREDITS_CLAWED_BACK_HUNDREDTHS_TOTAL, amount);
    }

    fn spend_disagreement(&self, kind: TransactionKind) {
        metrics::counter!(SPEND_DISAGREEMENTS_TOTAL, "kind" => kind.code()).increment(1);
    }
}

/// Add `amount`, in hundredths, to the counter `name`.
fn add(name: &'static str, amount: Credits) {
    if let Ok(n) = u64::try_from(amount.hundredths()) {
        metrics::counter!(name).increment(n);
    }
}
