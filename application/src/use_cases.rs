//! One file per use case: its request, response, error enum and function body.

pub mod admin_console;
pub mod admin_reports;
pub mod api_keys;
pub mod auto_top_up;
pub mod cancel_payment;
pub mod cancel_subscription;
pub mod change_plan;
pub mod credits;
pub mod deliver_events;
pub mod entitlements;
pub mod event_feed;
pub mod handle_webhook;
pub mod initiate_payment;
pub mod invitations;
pub mod manage_plans;
pub mod plans;
pub mod portal;
pub mod promo_codes;
pub mod query_payment;
pub mod reconcile;
pub mod refund_order;
pub mod report_status;
pub mod return_from_checkout;
pub mod sessions;
pub mod spend_chart;
pub mod spend_limits;
pub mod teams;
pub mod thresholds;
pub mod top_up_worker;
pub mod webhook_endpoints;

#[cfg(test)]
mod tests;

use crate::ports::{Metrics, ReservationError, SpendError, StoreError};

/// Failures every use case shares: the database is unavailable, or something unexpected.
#[derive(Debug, thiserror::Error)]
pub enum InfraError {
    /// The database is down or busy beyond the retry budget (the caller may retry).
    #[error("service temporarily unavailable")]
    Unavailable(#[source] anyhow::Error),
    /// Anything else (the cause is logged, never shown).
    #[error("unexpected error")]
    Unexpected(#[source] anyhow::Error),
}

impl InfraError {
    /// The store error this stands for, for a caller that answers in store errors.
    pub(crate) fn into_store_error(self) -> StoreError {
        match self {
            InfraError::Unavailable(cause) => StoreError::Busy(cause),
            InfraError::Unexpected(cause) => StoreError::Unexpected(cause),
        }
    }
}

impl From<StoreError> for InfraError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Busy(cause) => InfraError::Unavailable(cause),
            other => InfraError::Unexpected(anyhow::Error::new(other)),
        }
    }
}

/// The store error a use case's error carries, if any.
pub(crate) trait StoreCause {
    /// The store error, if this is one.
    fn store_cause(&self) -> Option<&StoreError>;
}

impl StoreCause for StoreError {
    fn store_cause(&self) -> Option<&StoreError> {
        Some(self)
    }
}

impl StoreCause for SpendError {
    fn store_cause(&self) -> Option<&StoreError> {
        match self {
            SpendError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl StoreCause for ReservationError {
    fn store_cause(&self) -> Option<&StoreError> {
        match self {
            ReservationError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// `result`, after logging and counting a posting the database's guard did not write as the
/// ledger's rules decided ([`StoreError::SpendDisagreement`]): an invariant broke, so it is an
/// error line and a count (`Metrics::spend_disagreement`) here, where the use case meets it,
/// and an internal error to the caller. Every other outcome passes untouched.
pub(crate) fn noted<T, E: StoreCause>(metrics: &dyn Metrics, result: Result<T, E>) -> Result<T, E> {
    if let Err(e) = &result
        && let Some(StoreError::SpendDisagreement {
            account,
            disagreement,
        }) = e.store_cause()
    {
        let decided = &disagreement.decided;
        tracing::error!(
            account_id = %account,
            kind = %decided.kind,
            amount_hundredths = decided.amount.hundredths(),
            before_hundredths = decided.before.hundredths(),
            decided_after_hundredths = decided.after.hundredths(),
            guarded_after_hundredths = ?disagreement.guarded.map(domain::Credits::hundredths),
            "the database's guard did not write a posting as the ledger's rules decided it"
        );
        metrics.spend_disagreement(decided.kind);
    }
    result
}
