//! Bounded retries and the one translation of database errors into the ports' vocabulary.
//!
//! An operation is an async function that runs one whole transaction. It is run again, up to
//! [`RetryPolicy::attempts`] times with a small jittered exponential backoff, when it fails with:
//! - SQLite `SQLITE_BUSY`/`SQLITE_LOCKED` ("database is locked": the busy timeout ran out);
//! - PostgreSQL serialization failure (40001), deadlock (40P01) or lock timeout (55P03);
//! - [`Fail::Retry`]: the operation lost a uniqueness race with a concurrent duplicate (PostgreSQL
//!   reports it only after the other transaction commits); run again, it sees the winner's row
//!   and replays its outcome.
//!
//! After the last attempt these surface as [`StoreError::Busy`]. Connection failures (pool
//! timeout, closed pool, I/O) are `Busy` at once: the pool already waited `acquire_timeout_ms`.
//! Unique and foreign-key violations are [`StoreError::Conflict`]; values that fail to decode are
//! [`StoreError::Corrupt`]; anything else is [`StoreError::Unexpected`].

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::anyhow;
use application::ports::StoreError;
use sea_orm::sqlx::error::ErrorKind;
use sea_orm::{DbErr, RuntimeErr, sqlx};

/// Why one run of an operation failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// A database error (classified by [`classify`]).
    Db(DbErr),
    /// A lost race with a concurrent duplicate: run the whole operation again.
    Retry(&'static str),
    /// A decided outcome in the ports' vocabulary.
    Store(StoreError),
}

impl From<DbErr> for Fail {
    fn from(e: DbErr) -> Self {
        Fail::Db(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

/// What kind of failure a database error is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// Lock contention or a serialization failure: worth running again.
    Busy,
    /// The database cannot be reached.
    Unavailable,
    /// A UNIQUE or PRIMARY KEY constraint.
    Unique,
    /// A FOREIGN KEY constraint.
    ForeignKey,
    /// A stored value that does not decode.
    Decode,
    /// Anything else.
    Other,
}

/// Classify a database error.
pub(crate) fn classify(e: &DbErr) -> ErrorClass {
    match e {
        DbErr::ConnectionAcquire(_) | DbErr::Conn(_) => return ErrorClass::Unavailable,
        DbErr::Type(_) | DbErr::TryIntoErr { .. } | DbErr::Json(_) => return ErrorClass::Decode,
        _ => {}
    }
    let (DbErr::Exec(RuntimeErr::SqlxError(sqlx_error))
    | DbErr::Query(RuntimeErr::SqlxError(sqlx_error))) = e
    else {
        return ErrorClass::Other;
    };
    match sqlx_error.as_ref() {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            match (db.kind(), code.as_ref()) {
                (ErrorKind::UniqueViolation, _) => ErrorClass::Unique,
                (ErrorKind::ForeignKeyViolation, _) => ErrorClass::ForeignKey,
                // SQLite extended codes: BUSY, BUSY_RECOVERY, BUSY_SNAPSHOT, BUSY_TIMEOUT, LOCKED,
                // LOCKED_SHAREDCACHE.
                (_, "5" | "261" | "517" | "773" | "6" | "262") => ErrorClass::Busy,
                (_, "40001" | "40P01" | "55P03") => ErrorClass::Busy,
                (_, c) if c.starts_with("08") || c.starts_with("57P") => ErrorClass::Unavailable,
                _ => ErrorClass::Other,
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => ErrorClass::Unavailable,
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => ErrorClass::Decode,
        _ => ErrorClass::Other,
    }
}

/// The port error for a database error that was not retried (or ran out of retries).
pub(crate) fn store_error(e: DbErr) -> StoreError {
    match classify(&e) {
        ErrorClass::Busy | ErrorClass::Unavailable => StoreError::Busy(e.into()),
        ErrorClass::Unique => StoreError::Conflict(format!("already exists: {e}")),
        ErrorClass::ForeignKey => StoreError::Conflict(format!("refers to a missing row: {e}")),
        ErrorClass::Decode => StoreError::Corrupt(e.to_string()),
        ErrorClass::Other => StoreError::Unexpected(e.into()),
    }
}

/// How often and how patiently operations are run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Runs in total (at least 1).
    pub(crate) attempts: u32,
    /// The first backoff.
    pub(crate) backoff_ms: u64,
}

impl RetryPolicy {
    /// Run `operation` until it succeeds, fails for good, or runs out of attempts.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        what: &'static str,
        mut operation: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Fail>>,
    {
        let attempts = self.attempts.max(1);
        let mut attempt = 1;
        loop {
            let retryable = match operation().await {
                Ok(value) => return Ok(value),
                Err(Fail::Store(e)) => return Err(e),
                Err(Fail::Db(e)) if classify(&e) != ErrorClass::Busy => return Err(store_error(e)),
                Err(Fail::Db(e)) => anyhow::Error::new(e),
                Err(Fail::Retry(why)) => anyhow!("{why}"),
            };
            if attempt >= attempts {
                tracing::warn!(operation = what, attempts, "store operation stayed busy");
                return Err(StoreError::Busy(
                    retryable.context(format!("{what}: still busy after {attempts} attempts")),
                ));
            }
            tracing::debug!(operation = what, attempt, error = %retryable, "retrying store operation");
            tokio::time::sleep(self.backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// The delay before run `attempt + 1`: `backoff_ms * 2^(attempt-1)` capped at 32 times
    /// `backoff_ms`, of which a pseudo-random half is kept (a counter through a mixing function,
    /// so that contending tasks spread out without a random number generator).
    fn backoff(&self, attempt: u32) -> Duration {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let ceiling = self
            .backoff_ms
            .max(1)
            .saturating_mul(1 << attempt.saturating_sub(1).min(5));
        let noise = mix(COUNTER.fetch_add(1, Ordering::Relaxed)) % (ceiling / 2 + 1);
        Duration::from_millis(ceiling / 2 + noise)
    }
}

/// SplitMix64's finalizer: spreads consecutive counter values over the whole range.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jitters() {
        let policy = RetryPolicy {
            attempts: 5,
            backoff_ms: 4,
        };
        for attempt in 1..=10 {
            let ceiling = 4 * (1_u64 << (attempt - 1).min(5));
            let d = u64::try_from(policy.backoff(attempt).as_millis()).unwrap();
            assert!(
                (ceiling / 2..=ceiling).contains(&d),
                "attempt {attempt}: {d} ms"
            );
        }
        let spread: std::collections::BTreeSet<u128> =
            (0..20).map(|_| policy.backoff(6).as_millis()).collect();
        assert!(spread.len() > 3, "no jitter: {spread:?}");
    }

    #[tokio::test]
    async fn lost_races_are_retried_then_reported_busy() {
        let policy = RetryPolicy {
            attempts: 3,
            backoff_ms: 1,
        };
        let mut runs = 0;
        let result: Result<(), StoreError> = policy
            .run("test", || {
                runs += 1;
                async { Err(Fail::Retry("lost a race")) }
            })
            .await;
        assert!(matches!(result, Err(StoreError::Busy(_))));
        assert_eq!(runs, 3);
        let mut runs = 0;
        let result = policy
            .run("test", || {
                runs += 1;
                let n = runs;
                async move {
                    if n < 2 {
                        Err(Fail::Retry("once"))
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
        assert_eq!(result.unwrap(), 2);
    }
}
