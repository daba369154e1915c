//! Tally adapter: the SeaORM implementation of the store ports, for SQLite and PostgreSQL from
//! the same code.
//!
//! [`SeaOrmStore`] implements every trait of `application::ports::store`; every write goes through
//! `apply`. Each port method is one database transaction (or one statement), run under `retry`'s bounded retry policy; SQL is
//! written once with `$N` placeholders (`sql`); rows are decoded into the private structs of
//! `rows` and re-validated through the domain's constructors on every read.
//!
//! Codemap:
//! - `settings`: [`StoreSettings`] (URL and direct URL, pool, prepared statements, SQLite
//!   durability, timeouts, retries, group commit);
//! - `group_commit`: the writer that commits consumes, reservations and grants in groups
//!   ([`GroupCommit`]);
//! - `users`: users, sessions, API keys; `plans`: the dynamic plans table;
//! - `orders`: orders, idempotent creation, the reconciler's claims; `subscriptions`: reads, and
//!   the writes the payment-event transaction makes;
//! - `ledger`: balances, the append-only transaction ledger, grant lots and reservations;
//! - `apply`: the one write, [`ChangeStore::apply`](application::ports::ChangeStore::apply): a
//!   change set's parts in one transaction, or a lone ledger operation through group commit;
//! - `events`: the webhook inbox and the order and subscription compare-and-sets;
//! - `outbox`: the host events written inside those transactions, and the catch-up feed;
//! - `webhooks`: the host application's webhook endpoints and the deliveries to them;
//! - `admin`: the admin console's lists by keyset, payment totals and the audit log;
//! - `observe`: every statement sent, shown to a test (feature `testing`,
//!   `SeaOrmStore::connect_observed`).
//!
//! Architecture Invariant: no SQL and no sea-orm type leaves this crate; the schema lives in the
//! `migrations` crate, which never imports anything from here.

mod accounts;
mod admin;
mod apply;
#[cfg(feature = "bench")]
pub mod bench;
mod entitlements_told;
mod events;
mod group_commit;
mod key_cache;
mod ledger;
mod limits;
mod observe;
mod opt_in;
mod orders;
mod outbox;
mod plans;
mod portal;
mod promo;
mod refunds;
mod reports;
mod retry;
mod rows;
mod settings;
mod signup;
mod sql;
mod subscriptions;
mod thresholds;
mod top_ups;
mod users;
mod webhooks;

use std::future::Future;

use application::ports::StoreError;
use sea_orm::{Database, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr};

pub use crate::group_commit::GroupCommitStats;
use crate::group_commit::{Committer, Home};
use crate::key_cache::KeyCache;
use crate::ledger::LedgerCommand;
use crate::observe::Watch;
#[cfg(feature = "testing")]
pub use crate::observe::{SentStatement, StatementObserver};
use crate::retry::{RetryPolicy, store_error};
pub use crate::settings::{GroupCommit, PreparedStatements, SqliteSynchronous, StoreSettings};

/// The store: a connection pool, the retry policy and, with group commit on, the handle on its
/// writer; cheap to clone (clones share the pool and the writer).
#[derive(Debug, Clone)]
pub struct SeaOrmStore {
    db: DatabaseConnection,
    retry: RetryPolicy,
    group: Option<Committer<LedgerCommand>>,
    keys: KeyCache,
    /// Which opt-in (consumption) event types an enabled endpoint names (`opt_in`).
    opt_in: opt_in::OptInCache,
    /// SQLite files: one write transaction of this process at a time, in arrival order
    /// ([`SeaOrmStore::begin_write`]).
    turn: Option<WriteTurn>,
    /// Credits every new user is given in the transaction that creates them
    /// ([`SeaOrmStore::with_signup_grant`]).
    signup: Option<application::ports::SignupGrant>,
    /// The monthly credit ceiling every account opened from now on starts with
    /// ([`SeaOrmStore::with_new_account_ceiling`]).
    ceiling: Option<domain::Credits>,
    /// Renders the host events the store writes (the wiring's: the API's JSON).
    events: Encoder,
}

/// The host-event encoder the store writes with, shared by its clones and its writers.
pub(crate) type Encoder = std::sync::Arc<Enc>;

/// A host-event encoder, as the write paths take it.
pub(crate) type Enc = dyn application::ports::HostEventEncoder;

/// The process's queue for SQLite's write lock.
pub(crate) type WriteTurn = std::sync::Arc<tokio::sync::Mutex<()>>;

/// A place in that queue, held until the write transaction ends.
pub(crate) type Turn = Option<tokio::sync::OwnedMutexGuard<()>>;

/// Wait for a turn in `turn` (when there is a queue), then begin a write transaction on `db`
/// ([`sql::begin_write`]); keep the turn until the transaction ends.
pub(crate) async fn begin_in_turn(
    db: &DatabaseConnection,
    turn: Option<&WriteTurn>,
) -> Result<(Turn, DatabaseTransaction), DbErr> {
    let turn = match turn {
        Some(queue) => Some(std::sync::Arc::clone(queue).lock_owned().await),
        None => None,
    };
    Ok((turn, sql::begin_write(db).await?))
}

impl SeaOrmStore {
    /// Connect to the database `settings` names. SQLite databases are opened in WAL mode (files
    /// only) with `foreign_keys=ON`, the configured `synchronous` level and busy timeout, and
    /// created when missing (the directory must exist). The schema is not touched: run the
    /// `migrations` crate's `Migrator` on [`SeaOrmStore::connection`] first.
    ///
    /// With [`StoreSettings::group_commit`] enabled this starts the store's group-commit
    /// writers: on a thread of their own with their own connections (one per writer, besides
    /// the pool's `max_connections`), or, for an in-memory SQLite database, as tasks on the
    /// current tokio runtime sharing its one connection. They stop at [`SeaOrmStore::close`] or
    /// when every clone of the store has been dropped.
    ///
    /// # Errors
    /// Host events are written as `events` renders them.
    ///
    /// # Errors
    /// [`StoreError::Busy`] when the database cannot be reached.
    pub async fn connect(settings: &StoreSettings, events: Encoder) -> Result<Self, StoreError> {
        Self::connect_watched(settings, events, Watch::default()).await
    }

    /// [`SeaOrmStore::connect`], with every statement the store runs (on its pool and on the
    /// group-commit writers' connections) shown to `observer` as it completes (`observe`).
    ///
    /// # Errors
    /// As [`SeaOrmStore::connect`].
    #[cfg(feature = "testing")]
    pub async fn connect_observed(
        settings: &StoreSettings,
        events: Encoder,
        observer: StatementObserver,
    ) -> Result<Self, StoreError> {
        Self::connect_watched(settings, events, Watch::new(observer)).await
    }

    async fn connect_watched(
        settings: &StoreSettings,
        events: Encoder,
        watch: Watch,
    ) -> Result<Self, StoreError> {
        let mut db = Database::connect(settings.connect_options())
            .await
            .map_err(|e| match e {
                sea_orm::DbErr::Conn(_) | sea_orm::DbErr::ConnectionAcquire(_) => {
                    StoreError::Busy(e.into())
                }
                other => store_error(other),
            })?;
        watch.attach(&mut db);
        // SQLite files: writers of this process queue here, first come first served, instead of
        // in SQLite's busy handler, which sleeps in growing steps (up to 100 ms) and wakes
        // whoever polls first, so that under 32 concurrent writers the slowest waited hundreds
        // of milliseconds while the lock stood idle between sleeps. Other processes on the
        // same file still meet the busy handler. (An in-memory database has one connection,
        // which already queues.)
        let turn = (db.get_database_backend() == DbBackend::Sqlite && !settings.is_sqlite_memory())
            .then(WriteTurn::default);
        let group = if settings.group_commit.enabled {
            let home = if settings.is_sqlite_memory() {
                Home::Shared(db.clone())
            } else {
                Home::Own(settings.connect_options(), watch)
            };
            Some(
                Committer::spawn(home, turn.clone(), settings.group_commit)
                    .map_err(|e| StoreError::Unexpected(e.into()))?,
            )
        } else {
            None
        };
        Ok(Self {
            db,
            retry: RetryPolicy {
                attempts: settings.retry_attempts,
                backoff_ms: settings.retry_backoff_ms,
            },
            group,
            keys: KeyCache::new(std::time::Duration::from_millis(settings.api_key_cache_ms)),
            opt_in: opt_in::OptInCache::default(),
            turn,
            signup: None,
            ceiling: None,
            events,
        })
    }

    /// Wait for this process's turn at the SQLite write lock (see `connect`), then begin a write
    /// transaction ([`sql::begin_write`]); keep the turn until the transaction ends.
    pub(crate) async fn begin_write(&self) -> Result<(Turn, DatabaseTransaction), DbErr> {
        begin_in_turn(&self.db, self.turn.as_ref()).await
    }

    /// What the group-commit writer has done so far; `None` when group commit is off.
    #[must_use]
    pub fn group_commit_stats(&self) -> Option<GroupCommitStats> {
        self.group.as_ref().map(Committer::stats)
    }

    /// A future that completes once the group-commit writer has stopped (after
    /// [`SeaOrmStore::close`], or once every clone of the store has been dropped); `None` when
    /// group commit is off.
    #[must_use]
    pub fn group_commit_stopped(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        self.group.as_ref().map(Committer::stopped)
    }

    /// The underlying connection, for running migrations.
    #[must_use]
    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// A connection to [`StoreSettings::direct_url`], past any connection pooler, for work that
    /// needs a database session of its own (migrations: their DDL and the migration table are
    /// best not spread over a transaction pooler's server connections); `None` when no direct
    /// URL is set, and then [`SeaOrmStore::connection`] serves. One connection, with named
    /// prepared statements; close it when done.
    ///
    /// # Errors
    /// [`StoreError::Busy`] when the database cannot be reached.
    pub async fn connect_direct(
        settings: &StoreSettings,
    ) -> Result<Option<DatabaseConnection>, StoreError> {
        let Some(options) = settings.direct_connect_options() else {
            return Ok(None);
        };
        Database::connect(options)
            .await
            .map(Some)
            .map_err(|e| StoreError::Busy(e.into()))
    }

    /// Which database this is.
    #[must_use]
    pub fn backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    /// Check that the database answers queries (readiness): one query with a bound parameter
    /// through the pool, as every request's queries are, whose answer must echo the parameter.
    /// A protocol-level ping would pass where every query fails, as behind a transaction pooler
    /// with prepared statements kept.
    ///
    /// # Errors
    /// [`StoreError::Busy`] when the query fails or answers something else.
    pub async fn ping(&self) -> Result<(), StoreError> {
        const PROBE: i64 = 7_340_033;
        let answer = sql::one_i64(&self.db, "SELECT $1 AS ready", vec![PROBE.into()], "ready")
            .await
            .map_err(|e| StoreError::Busy(e.into()))?;
        if answer == Some(PROBE) {
            Ok(())
        } else {
            Err(StoreError::Busy(anyhow::anyhow!(
                "the readiness query answered {answer:?}"
            )))
        }
    }

    /// Stop the group-commit writer (after the group it is writing, which is answered), then
    /// close the pool. Calls made afterwards through other clones fail with
    /// [`StoreError::Busy`].
    ///
    /// # Errors
    /// When closing fails.
    pub async fn close(self) -> Result<(), StoreError> {
        if let Some(group) = &self.group {
            group.stop().await;
        }
        self.db.close().await.map_err(store_error)
    }
}
