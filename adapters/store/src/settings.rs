//! How to reach the database: URL, pool size, SQLite durability and the limits on waiting.

use std::fmt;
use std::time::Duration;

use sea_orm::ConnectOptions;
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous as SqlxSynchronous};

/// How hard SQLite works to make a commit survive a power cut (`PRAGMA synchronous`, in WAL mode).
///
/// Trade-off: with [`SqliteSynchronous::Normal`] a commit is durable against a crash of the
/// process but the last transactions before a power loss or OS crash may roll back; it is about
/// twice as fast (3–5.7k vs 2–2.8k consume transactions/s on the reference machine).
/// [`SqliteSynchronous::Full`] syncs the WAL on every commit, so a commit that was acknowledged
/// stays committed. The default is `Full`: Tally acknowledges webhooks after committing, and a
/// provider does not redeliver an acknowledged event, so a grant lost to a power cut would be
/// lost for good. Choose `Normal` where throughput matters more and the machine has a UPS or the
/// reconciler is trusted to recover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqliteSynchronous {
    /// `synchronous=NORMAL`: durable against process crashes, not against power loss.
    Normal,
    /// `synchronous=FULL`: every acknowledged commit survives a power loss.
    #[default]
    Full,
}

/// Connection settings of the store; [`StoreSettings::new`] gives the defaults.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// `sqlite://path/to/file.db`, `sqlite::memory:` or `postgres://user:password@host/db`.
    pub url: String,
    /// Pool size. For `sqlite::memory:` the pool always has exactly one connection (each
    /// connection to a private in-memory database would see its own empty database).
    pub max_connections: u32,
    /// SQLite durability; ignored for PostgreSQL.
    pub sqlite_synchronous: SqliteSynchronous,
    /// How long SQLite waits for another writer's lock before reporting `SQLITE_BUSY`.
    pub busy_timeout_ms: u64,
    /// How long a request waits for a pooled connection before the store reports `Busy`.
    pub acquire_timeout_ms: u64,
    /// How many times an operation that met `SQLITE_BUSY`, a PostgreSQL serialization failure or
    /// deadlock, or a lost uniqueness race is run again before the store reports `Busy`.
    pub retry_attempts: u32,
    /// The first retry's delay; each further retry doubles it (with jitter), up to 32 times it.
    pub retry_backoff_ms: u64,
}

impl StoreSettings {
    /// The defaults for `url`: 8 connections, `synchronous=FULL`, 5 s busy and acquire timeouts,
    /// 6 attempts with a 5 ms first backoff.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 8,
            sqlite_synchronous: SqliteSynchronous::Full,
            busy_timeout_ms: 5_000,
            acquire_timeout_ms: 5_000,
            retry_attempts: 6,
            retry_backoff_ms: 5,
        }
    }

    /// Whether the URL names SQLite.
    #[must_use]
    pub fn is_sqlite(&self) -> bool {
        self.url.starts_with("sqlite:")
    }

    fn is_sqlite_memory(&self) -> bool {
        self.is_sqlite() && (self.url.contains(":memory:") || self.url.contains("mode=memory"))
    }

    /// The sea-orm options these settings stand for.
    pub(crate) fn connect_options(&self) -> ConnectOptions {
        let mut options = ConnectOptions::new(self.url.clone());
        options
            .acquire_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .connect_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .sqlx_logging(false);
        if self.is_sqlite_memory() {
            // One connection that never closes: the in-memory database lives as long as it does.
            options
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None::<Duration>)
                .max_lifetime(None::<Duration>);
        } else {
            options.max_connections(self.max_connections.max(1));
        }
        if self.is_sqlite() {
            let busy = Duration::from_millis(self.busy_timeout_ms);
            let synchronous = match self.sqlite_synchronous {
                SqliteSynchronous::Normal => SqlxSynchronous::Normal,
                SqliteSynchronous::Full => SqlxSynchronous::Full,
            };
            let wal = !self.is_sqlite_memory();
            options.map_sqlx_sqlite_opts(move |o| {
                let o = o
                    .foreign_keys(true)
                    .busy_timeout(busy)
                    .synchronous(synchronous)
                    .create_if_missing(true);
                if wal {
                    o.journal_mode(SqliteJournalMode::Wal)
                } else {
                    o
                }
            });
        }
        options
    }
}

impl fmt::Debug for StoreSettings {
    /// The URL's password is never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreSettings")
            .field("url", &redacted(&self.url))
            .field("max_connections", &self.max_connections)
            .field("sqlite_synchronous", &self.sqlite_synchronous)
            .field("busy_timeout_ms", &self.busy_timeout_ms)
            .field("acquire_timeout_ms", &self.acquire_timeout_ms)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_backoff_ms", &self.retry_backoff_ms)
            .finish()
    }
}

/// `scheme://user:secret@host/db` becomes `scheme://user:***@host/db`.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((credentials, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_password() {
        let s = StoreSettings::new("postgres://tally:hunter2@db:5432/tally");
        let printed = format!("{s:?}");
        assert!(
            printed.contains("postgres://tally:***@db:5432/tally"),
            "{printed}"
        );
        assert!(!printed.contains("hunter2"));
        assert_eq!(redacted("sqlite://data/tally.db"), "sqlite://data/tally.db");
    }
}
