//! What the use cases count, as a port (issue 16): the use case that does the work says what
//! happened, wherever it was started from — the HTTP API, a page, the reconciler — and an
//! adapter (Prometheus in `http-api`) turns it into series. Nothing is counted for work that did
//! not commit, and a replayed request counts nothing; an administrator's replay of a recorded
//! webhook event is counted as such ([`Metrics::webhook_replayed`]), apart from deliveries.

use domain::{Credits, EventOutcome, OrderStatus, ProviderId, TransactionKind};

/// How one delivered webhook event ended, for `tally_webhooks_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookResult {
    /// Verified and decided: the event's inbox outcome.
    Event(EventOutcome),
    /// Verification failed; nothing changed.
    Rejected,
    /// Not a provider id, or the provider is not configured.
    UnknownProvider,
    /// The provider could not be asked what the event needs; refused so that it is sent again.
    ProviderUnavailable,
    /// Infrastructure failure; refused so that it is sent again.
    Error,
}

impl WebhookResult {
    /// The label value.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            WebhookResult::Event(outcome) => outcome.code(),
            WebhookResult::Rejected => "rejected",
            WebhookResult::UnknownProvider => "unknown_provider",
            WebhookResult::ProviderUnavailable => "provider_unavailable",
            WebhookResult::Error => "error",
        }
    }
}

/// Where the use cases report what they did. Implementations must be cheap and never fail: a
/// counter that cannot be written is not a reason to fail a payment.
pub trait Metrics: Send + Sync {
    /// An order reached `status` (created pending, paid, failed, cancelled, expired, refunded).
    fn order_moved(&self, status: &OrderStatus);
    /// A webhook event of `provider` (`None` for a path that names no known provider) that the
    /// provider delivered ended with `result`.
    fn webhook(&self, provider: Option<ProviderId>, result: WebhookResult);
    /// An administrator's replay of a recorded event of `provider` ended with `result` (the
    /// outcome it was decided to now, or why it could not be replayed); never counted as a
    /// delivery.
    fn webhook_replayed(&self, provider: ProviderId, result: WebhookResult);
    /// Credits spent by a consumption or a settled reservation.
    fn credits_consumed(&self, amount: Credits);
    /// Credits held by a new reservation.
    fn credits_reserved(&self, amount: Credits);
    /// Credits granted by provider events (purchases, subscription periods).
    fn credits_granted(&self, amount: Credits);
    /// Credits taken back by refunds and lost disputes.
    fn credits_clawed_back(&self, amount: Credits);
    /// The database's guard refused, or left another balance than, a `kind` posting the
    /// ledger's rules decided ([`crate::ports::StoreError::SpendDisagreement`]): an invariant
    /// broke. Worth an alert at the first one.
    fn spend_disagreement(&self, kind: TransactionKind);
}

/// Counts nothing (the default, for services that export no metrics, and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMetrics;

impl Metrics for NoMetrics {
    fn order_moved(&self, _: &OrderStatus) {}
    fn webhook(&self, _: Option<ProviderId>, _: WebhookResult) {}
    fn webhook_replayed(&self, _: ProviderId, _: WebhookResult) {}
    fn credits_consumed(&self, _: Credits) {}
    fn credits_reserved(&self, _: Credits) {}
    fn credits_granted(&self, _: Credits) {}
    fn credits_clawed_back(&self, _: Credits) {}
    fn spend_disagreement(&self, _: TransactionKind) {}
}
