//! How to reach the database: URL (and the direct URL past a connection pooler), pool size,
//! prepared statements, SQLite durability, the limits on waiting, and whether credit-ledger
//! writes are committed in groups.

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

/// Whether PostgreSQL connections keep named prepared statements between queries.
///
/// A transaction pooler (PgBouncer with `pool_mode = transaction`, Supabase's and Neon's pooled
/// connection strings) hands each transaction to whichever server connection is free, so a
/// statement prepared on one server connection is missing on the next (`prepared statement
/// "sqlx_s_5" does not exist`), and two clients' statements of the same name meet on one
/// (`prepared statement "sqlx_s_1" already exists`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreparedStatements {
    /// Each connection keeps up to 100 named statements, so a query it has run before is not
    /// parsed and planned again. Needs a server session per connection: a direct connection,
    /// or a pooler in session mode.
    #[default]
    Kept,
    /// Every query is parsed again as the unnamed statement, in the same message batch as its
    /// execution, so that a transaction pooler keeps the two on one server connection; and the
    /// `extra_float_digits` start-up parameter, which PgBouncer refuses by default, is not sent
    /// (Tally reads no floating-point columns). Costs a parse per query.
    Off,
}

/// Group commit of the credit ledger's hot writes (`consume`, `reserve`, `grant`): see the
/// `group_commit` module.
///
/// When enabled, those calls are queued to ONE writer task per store, which applies up to
/// `max_batch` of them in one database transaction (a savepoint each, so that each keeps its own
/// outcome) and acknowledges them only after that transaction has committed.
///
/// Trade-offs:
/// - Throughput against latency. One commit (one WAL sync on SQLite with `synchronous=FULL`, one
///   WAL flush on PostgreSQL, and one hold of a hot balance row's lock) is shared by a whole
///   group, so under load many more writes per second fit; but every request waits for the whole
///   group before it is answered, and a lone request may wait `max_wait_us` for company. The
///   writer also runs the group's statements one after another on one connection, so when the
///   database is not the bottleneck (few clients, or PostgreSQL with many distinct accounts and
///   spare cores) grouping can be slower than parallel single transactions: measure.
/// - Fairness. The queue is first come, first served and bounded (`4 × max_batch`): when it is
///   full, callers wait for room in arrival order. Within a group, commands run in arrival order
///   per user (groups are ordered by user id, so that writers of several instances take row locks
///   in one order).
/// - One writer per process, not per deployment. With several instances each has its own writer,
///   and groups of different instances (and the operations that are not grouped) still run
///   concurrently; correctness never depended on the writer: it comes from the database's
///   conditional UPDATEs, UNIQUE constraints and transactions, exactly as without grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommit {
    /// Whether grouping is on. When off, each call is its own transaction.
    pub enabled: bool,
    /// The most commands in one group (one transaction); clamped to `1..=1024`.
    pub max_batch: usize,
    /// How long the writer, having taken the first command of a group, waits for more before it
    /// starts the transaction (clamped to 1 s). 0, the default, never waits: a group is whatever
    /// queued up while the previous group was being written, so an idle store adds no latency.
    pub max_wait_us: u64,
    /// How long the writer, having taken the first command of a group, waits for the group to
    /// be as large as the previous one (clamped to 1 s; 0 never waits). Under steady load the
    /// callers the last group answered come straight back with their next request, and one
    /// group of all of them costs less than two of half; a lone request never waits (its
    /// previous group was one command), and a wait that times out shrinks the next one's
    /// target to what came.
    pub refill_us: u64,
    /// How many writers (each its own queue, transaction and connection) share the commands,
    /// by user: all of one user's commands go to the same writer, in arrival order. Clamped to
    /// `1..=16`. One writer on SQLite (which has one write lock anyway); on PostgreSQL several
    /// overlap one group's round trips and flush with the next ones'.
    pub writers: usize,
    /// Whether a lone command goes straight through: one that finds no other grouped command
    /// in flight in this process is written on the ordinary path (its own transaction on the
    /// store's pool), without the hop to the writer and back. Under load the commands arriving
    /// while one is in flight queue and group as before, so the window opens only when there
    /// is company to wait for. On by default; tests of the writer itself turn it off.
    pub direct_when_idle: bool,
}

impl GroupCommit {
    /// The most commands in a group.
    pub const MAX_BATCH: usize = 1024;
    /// The longest wait for company.
    pub const MAX_WAIT_US: u64 = 1_000_000;

    /// Off: 64 commands per group and no wait, when turned on.
    #[must_use]
    pub const fn off() -> Self {
        Self {
            enabled: false,
            max_batch: 64,
            max_wait_us: 0,
            refill_us: 0,
            writers: 1,
            direct_when_idle: true,
        }
    }

    /// On, with 64 commands per group and no wait.
    #[must_use]
    pub const fn on() -> Self {
        Self {
            enabled: true,
            ..Self::off()
        }
    }

    /// `max_batch` within its bounds.
    pub(crate) fn batch_limit(&self) -> usize {
        self.max_batch.clamp(1, Self::MAX_BATCH)
    }

    /// The most writers.
    pub const MAX_WRITERS: usize = 16;

    /// `writers` within its bounds.
    pub(crate) fn writer_count(&self) -> usize {
        self.writers.clamp(1, Self::MAX_WRITERS)
    }

    /// `refill_us` within its bounds.
    pub(crate) fn refill_limit(&self) -> Duration {
        Duration::from_micros(self.refill_us.min(Self::MAX_WAIT_US))
    }

    /// `max_wait_us` within its bounds.
    pub(crate) fn wait_limit(&self) -> Duration {
        Duration::from_micros(self.max_wait_us.min(Self::MAX_WAIT_US))
    }

    /// The bounded queue in front of the writer.
    pub(crate) fn queue_capacity(&self) -> usize {
        self.batch_limit() * 4
    }
}

impl Default for GroupCommit {
    fn default() -> Self {
        Self::off()
    }
}

/// Connection settings of the store; [`StoreSettings::new`] gives the defaults.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreSettings {
    /// `sqlite://path/to/file.db`, `sqlite::memory:` or `postgres://user:password@host/db`.
    pub url: String,
    /// PostgreSQL past any connection pooler, for work that needs a session of its own:
    /// migrations ([`SeaOrmStore::connect_direct`](crate::SeaOrmStore::connect_direct)).
    /// `None`: `url` serves for that too.
    pub direct_url: Option<String>,
    /// Named prepared statements on PostgreSQL connections; ignored for SQLite.
    pub prepared_statements: PreparedStatements,
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
    /// Group commit of consumes, reservations and grants ([`GroupCommit`]); off by default.
    pub group_commit: GroupCommit,
    /// How long an API key found by its hash is kept in memory instead of read again (0: never).
    /// Revoking through this store takes effect at once; another instance's revocation takes
    /// effect here within this time.
    pub api_key_cache_ms: u64,
}

impl StoreSettings {
    /// The defaults for `url`: no direct URL, prepared statements kept, 8 connections,
    /// `synchronous=FULL`, 5 s busy and acquire timeouts, 6 attempts with a 5 ms first backoff,
    /// group commit off, API keys kept for 1 s.
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            direct_url: None,
            prepared_statements: PreparedStatements::Kept,
            max_connections: 8,
            sqlite_synchronous: SqliteSynchronous::Full,
            busy_timeout_ms: 5_000,
            acquire_timeout_ms: 5_000,
            retry_attempts: 6,
            retry_backoff_ms: 5,
            group_commit: GroupCommit::off(),
            api_key_cache_ms: 1_000,
        }
    }

    /// Whether the URL names SQLite.
    #[must_use]
    pub fn is_sqlite(&self) -> bool {
        self.url.starts_with("sqlite:")
    }

    pub(crate) fn is_sqlite_memory(&self) -> bool {
        self.is_sqlite() && (self.url.contains(":memory:") || self.url.contains("mode=memory"))
    }

    /// The sea-orm options of the direct connection: `direct_url` with one connection and named
    /// prepared statements (a session of its own); `None` when there is no direct URL.
    pub(crate) fn direct_connect_options(&self) -> Option<ConnectOptions> {
        let url = self.direct_url.clone()?;
        let mut options = ConnectOptions::new(url);
        options
            .acquire_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .connect_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .max_connections(1)
            .sqlx_logging(false);
        Some(options)
    }

    /// The sea-orm options these settings stand for.
    pub(crate) fn connect_options(&self) -> ConnectOptions {
        let mut options = ConnectOptions::new(self.url.clone());
        options
            .acquire_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .connect_timeout(Duration::from_millis(self.acquire_timeout_ms))
            .sqlx_logging(false);
        if !self.is_sqlite() && self.prepared_statements == PreparedStatements::Off {
            // With the cache off, the patched sqlx-postgres (vendor/README.md) uses the unnamed
            // statement and parses it again with each execution.
            options
                .map_sqlx_postgres_opts(|o| o.statement_cache_capacity(0).extra_float_digits(None));
        }
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
            .field("direct_url", &self.direct_url.as_deref().map(redacted))
            .field("prepared_statements", &self.prepared_statements)
            .field("max_connections", &self.max_connections)
            .field("sqlite_synchronous", &self.sqlite_synchronous)
            .field("busy_timeout_ms", &self.busy_timeout_ms)
            .field("acquire_timeout_ms", &self.acquire_timeout_ms)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_backoff_ms", &self.retry_backoff_ms)
            .field("group_commit", &self.group_commit)
            .field("api_key_cache_ms", &self.api_key_cache_ms)
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
        let s = StoreSettings {
            direct_url: Some("postgres://tally:swordfish@db-direct:5432/tally".into()),
            ..StoreSettings::new("postgres://tally:hunter2@db:5432/tally")
        };
        let printed = format!("{s:?}");
        assert!(
            printed.contains("postgres://tally:***@db:5432/tally"),
            "{printed}"
        );
        assert!(
            printed.contains("postgres://tally:***@db-direct:5432/tally"),
            "{printed}"
        );
        assert!(!printed.contains("hunter2"));
        assert!(!printed.contains("swordfish"));
        assert_eq!(redacted("sqlite://data/tally.db"), "sqlite://data/tally.db");
    }

    #[test]
    fn group_commit_is_off_by_default_and_bounded() {
        assert_eq!(
            StoreSettings::new("sqlite::memory:").group_commit,
            GroupCommit::off()
        );
        assert!(!GroupCommit::default().enabled);
        let wild = GroupCommit {
            enabled: true,
            max_batch: 0,
            max_wait_us: u64::MAX,
            refill_us: u64::MAX,
            writers: 0,
            direct_when_idle: true,
        };
        assert_eq!(wild.batch_limit(), 1);
        assert_eq!(wild.writer_count(), 1);
        assert_eq!(wild.wait_limit(), Duration::from_secs(1));
        assert_eq!(wild.refill_limit(), Duration::from_secs(1));
        let huge = GroupCommit {
            max_batch: usize::MAX,
            ..GroupCommit::on()
        };
        assert_eq!(huge.batch_limit(), GroupCommit::MAX_BATCH);
        assert_eq!(huge.queue_capacity(), 4 * GroupCommit::MAX_BATCH);
    }
}
