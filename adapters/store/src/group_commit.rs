//! Group commit: many callers' writes in one database transaction, each with its own outcome.
//!
//! A database commits only so many transactions per second: each commit waits for a WAL sync
//! (SQLite with `synchronous=FULL`) or flush (PostgreSQL), and a hot balance row stays locked
//! until its transaction has committed. With [`GroupCommit`] enabled, the store sends each
//! grouped call (a [`GroupedCommand`]: consume, reserve, grant) over a bounded queue to a
//! writer task, started at connect, and waits for the answer on a oneshot channel. The writers
//! run on a thread of their own with connections of their own ([`Home`]), so that the
//! database's answers reach them without waiting behind the service's request handlers. There
//! is one writer unless [`GroupCommit::writers`] says more; then each user's commands always go
//! to the same writer (by a hash of the user id), so one user's commands keep their arrival
//! order.
//! Each writer:
//!
//! 1. takes the first queued command, then whatever else is queued, up to `max_batch` (waiting up
//!    to `max_wait_us` for more when that is not zero);
//! 2. orders the group by user (stable: commands of one user keep their arrival order), so that
//!    the writers of several instances take row locks in one order;
//! 3. opens ONE write transaction (`BEGIN IMMEDIATE` on SQLite, like every write) and runs each
//!    command in a SAVEPOINT of its own, with the very function the ungrouped path runs in its
//!    own transaction. A command that refuses (insufficient credits, a replay, an idempotency
//!    conflict) or fails is rolled back to its savepoint, so it changes nothing and the next
//!    command sees the database as if it had not run. (A group of one needs no savepoint: it is
//!    the ordinary transaction, so an idle store costs what it costs without grouping.)
//!    A run of two or more batchable commands (consumptions) is run instead as ONE batch, in a
//!    savepoint of its own ([`GroupedCommand::run_many`], `ledger/consume_many.rs`): two reads and
//!    one write (three on SQLite) whatever its size, each command decided as it would have been
//!    one by one; a batch that cannot be decided is undone and its commands run alone.
//!
//!    On PostgreSQL a group of consumptions only is first tried WITHOUT a transaction
//!    ([`GroupedCommand::run_many_unlocked`]): one read without locks, then one writing
//!    statement that commits by itself, and that changes nothing unless every balance and lot
//!    it touches still holds what the read saw. Two round trips instead of five (BEGIN, two
//!    reads, the write, COMMIT), and the balance rows stay locked for one statement only. If
//!    anything moved in between, nothing was written and the group runs as described above.
//!    A writer also remembers the balances and lots its unlocked groups left
//!    (`ledger::consume_many::Known`): a group whose users it all knows, and which it would not refuse
//!    anything, is decided from them and written without the read, one round trip in all; the
//!    same conditions catch a balance that moved since (the group then reads).
//! 4. commits once, and only then sends each command its outcome ([`Grouped::Done`]).
//!
//! Each outcome is what the command would have returned had it run alone at its place in the
//! group: later commands see earlier ones' writes (a second spend with the same key replays the
//! first; an insufficient-credits refusal reports the balance left by the commands before it).
//!
//! Nothing is acknowledged before its group has committed, and nothing is applied twice:
//! - if the group's transaction fails anywhere (BEGIN, a savepoint, COMMIT), it is rolled back and
//!   every command of it is answered [`Grouped::Alone`]: the caller runs it again on the ordinary
//!   path (its own transaction, the bounded retry policy). That is safe even when a COMMIT's
//!   answer was lost after it took effect: every grouped command is idempotent (consume and
//!   reserve by their key, grant by its source), so the rerun replays the committed outcome;
//! - a command whose own run lost a race or met contention (`Fail::Retry`, a busy or unreachable
//!   database) is rolled back to its savepoint and answered `Alone` after the commit, and runs
//!   again on its own, exactly as the ordinary path would have retried it;
//! - when the writer is gone (the store was closed), the caller runs its command alone as well.
//!
//! A caller that stops waiting (its future dropped) does not withdraw its command: once queued
//! it is applied, and a retry with the same key replays it.
//!
//! The writer stops when [`Committer::stop`] is called (by `SeaOrmStore::close`) or when every
//! clone of the store has been dropped; commands still queued then run alone.
//!
//! PostgreSQL:
//! - every savepoint of a command that writes is a subtransaction, and a transaction with more
//!   than 64 of them overflows each backend's subtransaction cache (which slows every snapshot on
//!   the server); keep `max_batch` at or below the default of 64 there;
//! - a group holds the balance rows of the users it has written until it commits, so it can
//!   deadlock with a concurrent ungrouped reservation of the same user and key (which takes the
//!   reservation first, then the balance). PostgreSQL breaks the cycle after `deadlock_timeout`;
//!   the victim is retried (an ungrouped transaction) or runs alone (a grouped command), so this
//!   costs latency in that rare case, never correctness.
//!
//! `examples/group_commit_probe.rs` measures both modes side by side.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use application::ports::StoreError;
use sea_orm::{
    ConnectOptions, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::WriteTurn;
use crate::observe::Watch;
use crate::retry::{ErrorClass, Fail, classify, store_error};
use crate::settings::GroupCommit;
use crate::sql::End;

/// What a grouped command's caller is told.
#[derive(Debug)]
pub(crate) enum Grouped<T> {
    /// The outcome, sent after the group committed (an error wrote nothing).
    Done(Result<T, StoreError>),
    /// Not decided by a group: run the command alone, on the ordinary path.
    Alone,
}

/// A command the writer can apply inside a group's transaction.
pub(crate) trait GroupedCommand: Send + 'static {
    /// The user whose rows the command changes (groups are ordered by it).
    fn user(&self) -> &str;

    /// Run the command's body on `tx` (the same body as its ungrouped path) and keep the outcome
    /// ([`Job::settle`]). Returns whether its writes are to be kept; if not, the writer undoes
    /// them (back to the command's savepoint).
    fn run<'a>(&'a mut self, tx: &'a DatabaseTransaction)
    -> impl Future<Output = bool> + Send + 'a;

    /// Whether the command may be written together with its batchable neighbours by
    /// [`GroupedCommand::run_many`] instead of in a savepoint of its own.
    fn batchable(&self) -> bool;

    /// Run `batch` (two or more batchable commands, in group order) as one set of statements on
    /// `tx` and keep each command's outcome. Returns whether the writes are to be kept; if not,
    /// the writer undoes them (back to the batch's savepoint) and every command of the batch has
    /// been told to run alone.
    fn run_many<'a>(
        batch: &'a mut [Self],
        tx: &'a DatabaseTransaction,
    ) -> impl Future<Output = bool> + Send + 'a
    where
        Self: Sized;

    /// What a writer remembers of the rows its unlocked batches wrote (see
    /// [`GroupedCommand::run_many_unlocked`]).
    type Known: Default + Send + 'static;

    /// PostgreSQL: try to decide and write `batch` (batchable commands, in group order) without
    /// an explicit transaction, each write a single statement that commits by itself or changes
    /// nothing, from what `known` remembers of earlier batches when that covers it (the write
    /// changes nothing unless the rows still hold it), else from a read. Returns whether it did
    /// (the outcomes are kept and committed); if not, nothing was written and no outcome is
    /// kept, and the writer runs the group in a transaction.
    fn run_many_unlocked<'a>(
        batch: &'a mut [Self],
        db: &'a DatabaseConnection,
        known: &'a mut Self::Known,
    ) -> impl Future<Output = Unlocked> + Send + 'a
    where
        Self: Sized;

    /// The group runs in a transaction: forget what `known` holds of its users' rows.
    fn forget(known: &mut Self::Known, group: &[Self])
    where
        Self: Sized;

    /// Whether the group decided the command (it has an outcome to deliver, not `Alone`).
    fn decided(&self) -> bool;

    /// The group committed: send the kept outcome (`Alone` if there is none).
    fn deliver(self);

    /// The group failed: tell the caller to run the command alone.
    fn run_alone(self);
}

/// What [`GroupedCommand::run_many_unlocked`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// Nothing: run the group in a transaction.
    NotWritten,
    /// Decided and committed; `from_memory`: from what the writer knew, without a read.
    Written { from_memory: bool },
}

/// One queued command, its reply channel and, once run, its outcome.
pub(crate) struct Job<C, T> {
    /// The command.
    pub(crate) command: C,
    reply: oneshot::Sender<Grouped<T>>,
    outcome: Option<Grouped<T>>,
}

impl<C, T> Job<C, T> {
    /// A job answering on `reply`.
    pub(crate) fn new(command: C, reply: oneshot::Sender<Grouped<T>>) -> Self {
        Self {
            command,
            reply,
            outcome: None,
        }
    }

    /// Keep the outcome the ordinary path would have produced from `body` until the group
    /// commits, and say whether the body's writes are to be kept:
    /// - `End::Commit`: kept; the outcome is the value;
    /// - `End::Rollback` (a refusal or a replay): undone; the outcome is the value;
    /// - a decided error (`Fail::Store`, or a database error that is not contention): undone;
    ///   the outcome is the error the ordinary path returns for it;
    /// - a lost race or contention (`Fail::Retry`, a busy or unreachable database): undone; the
    ///   command runs again alone, as the ordinary path would have retried it.
    pub(crate) fn settle(&mut self, body: Result<End<T>, Fail>) -> bool {
        let (keep, outcome) = match body {
            Ok(End::Commit(value)) => (true, Grouped::Done(Ok(value))),
            Ok(End::Rollback(value)) => (false, Grouped::Done(Ok(value))),
            Err(Fail::Store(e)) => (false, Grouped::Done(Err(e))),
            Err(Fail::Retry(_)) => (false, Grouped::Alone),
            Err(Fail::Db(e)) => match classify(&e) {
                ErrorClass::Busy | ErrorClass::Unavailable => (false, Grouped::Alone),
                _ => (false, Grouped::Done(Err(store_error(e)))),
            },
        };
        self.outcome = Some(outcome);
        keep
    }

    /// Send the kept outcome. A caller that stopped waiting is not an error.
    /// Whether a decided outcome is kept.
    pub(crate) fn decided(&self) -> bool {
        matches!(self.outcome, Some(Grouped::Done(_)))
    }

    /// Send the kept outcome (`Alone` if there is none).
    pub(crate) fn deliver(self) {
        let _ = self.reply.send(self.outcome.unwrap_or(Grouped::Alone));
    }

    /// Send `Alone`.
    pub(crate) fn run_alone(self) {
        let _ = self.reply.send(Grouped::Alone);
    }
}

/// What the writer has done since connect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Groups written: committed (or, for a group of one that refused, rolled back).
    pub groups: u64,
    /// Commands answered from a committed group (successes, refusals and errors alike).
    pub grouped: u64,
    /// Groups whose transaction failed (each of their commands ran alone).
    pub failed_groups: u64,
    /// Commands decided as part of a batch (a run of consumptions written with one set of
    /// statements) rather than one by one in savepoints.
    pub batched: u64,
    /// Groups written without reading their balances first: decided from what the writer had
    /// written for the same users (PostgreSQL).
    pub from_memory: u64,
    /// Commands that ran alone on the ordinary path instead: from a failed group, after a lost
    /// race or contention inside a group, or because the writer had stopped.
    pub alone: u64,
    /// Commands that went straight through: each found no other grouped command in flight and
    /// was written on the ordinary path without the writer ([`GroupCommit::direct_when_idle`]).
    pub direct: u64,
}

#[derive(Debug, Default)]
struct Counters {
    groups: AtomicU64,
    grouped: AtomicU64,
    failed_groups: AtomicU64,
    batched: AtomicU64,
    from_memory: AtomicU64,
    alone: AtomicU64,
    direct: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The store's handle on its writer: the queue, the stop signal and the counters. Cheap to
/// clone; the writer stops once every clone is dropped.
pub(crate) struct Committer<C> {
    /// One queue per writer; a command goes to its user's writer.
    queues: Arc<[mpsc::Sender<C>]>,
    stop: Arc<watch::Sender<bool>>,
    stopped: watch::Receiver<()>,
    counters: Arc<Counters>,
    /// Grouped commands of this process admitted and not yet answered ([`Committer::admit`]).
    in_flight: Arc<AtomicUsize>,
    /// Whether a command admitted with nothing else in flight goes straight through.
    direct_when_idle: bool,
}

/// A grouped command's place among those in flight, from its admission until it is dropped
/// (after its answer, whichever path wrote it).
pub(crate) struct Flight {
    in_flight: Arc<AtomicUsize>,
    direct: bool,
}

impl Flight {
    /// Whether the command is to be written straight away on the ordinary path: nothing else
    /// was in flight when it was admitted, so there is no group to join.
    pub(crate) fn direct(&self) -> bool {
        self.direct
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<C> std::fmt::Debug for Committer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer")
            .field(
                "queued",
                &self
                    .queues
                    .iter()
                    .map(|q| q.max_capacity() - q.capacity())
                    .sum::<usize>(),
            )
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<C> Clone for Committer<C> {
    fn clone(&self) -> Self {
        Self {
            queues: Arc::clone(&self.queues),
            stop: Arc::clone(&self.stop),
            stopped: self.stopped.clone(),
            counters: Arc::clone(&self.counters),
            in_flight: Arc::clone(&self.in_flight),
            direct_when_idle: self.direct_when_idle,
        }
    }
}

impl<C: GroupedCommand> Committer<C> {
    /// Start the writers where `home` says.
    ///
    /// # Errors
    /// When the writers' own thread or runtime cannot be created ([`Home::Own`]).
    pub(crate) fn spawn(
        home: Home,
        turn: Option<WriteTurn>,
        config: GroupCommit,
    ) -> std::io::Result<Self> {
        let (stop, stop_rx) = watch::channel(false);
        let (stopped_tx, stopped) = watch::channel(());
        let counters = Arc::new(Counters::default());
        let mut queues = Vec::new();
        let mut intakes = Vec::new();
        for _ in 0..config.writer_count() {
            let (queue, rx) = mpsc::channel(config.queue_capacity());
            queues.push(queue);
            intakes.push(Intake::new(rx, config));
        }
        let crew = Crew {
            intakes,
            turn,
            stop: stop_rx,
            counters: Arc::clone(&counters),
            stopped: stopped_tx,
        };
        match home {
            Home::Shared(db) => crew.spawn(&db),
            Home::Own(options, seen) => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                std::thread::Builder::new()
                    .name("tally-group-commit".to_owned())
                    .spawn(move || runtime.block_on(crew.run_own(options, seen)))?;
            }
        }
        Ok(Self {
            queues: queues.into(),
            stop: Arc::new(stop),
            stopped,
            counters,
            in_flight: Arc::new(AtomicUsize::new(0)),
            direct_when_idle: config.direct_when_idle,
        })
    }

    /// Admit one grouped command. It goes straight through ([`Flight::direct`]) when nothing
    /// else is in flight and [`GroupCommit::direct_when_idle`] is on: a lone request is then
    /// committed at once, with no hop to the writer; a command arriving while another is in
    /// flight is submitted and groups with whatever else arrives. Keep the [`Flight`] until the
    /// command has its answer.
    pub(crate) fn admit(&self) -> Flight {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let direct = self.direct_when_idle && before == 0;
        if direct {
            Counters::add(&self.counters.direct, 1);
        }
        Flight {
            in_flight: Arc::clone(&self.in_flight),
            direct,
        }
    }

    /// Queue the command `make` builds around a reply channel and wait for its outcome.
    pub(crate) async fn submit<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Grouped<T>>) -> C,
    ) -> Grouped<T> {
        let (reply, answer) = oneshot::channel();
        let command = make(reply);
        let queue = &self.queues[shard(command.user(), self.queues.len())];
        let outcome = match queue.send(command).await {
            Ok(()) => answer.await.unwrap_or(Grouped::Alone),
            Err(_) => Grouped::Alone,
        };
        if matches!(outcome, Grouped::Alone) {
            Counters::add(&self.counters.alone, 1);
        }
        outcome
    }

    /// Ask the writer to stop after its current group, and wait until it has.
    pub(crate) async fn stop(&self) {
        self.stop.send_replace(true);
        self.stopped().await;
    }

    /// Completes once the writer has stopped.
    pub(crate) fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopped = self.stopped.clone();
        async move { while stopped.changed().await.is_ok() {} }
    }
}

impl<C> Committer<C> {
    /// The counters so far.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        let c = &self.counters;
        GroupCommitStats {
            groups: c.groups.load(Ordering::Relaxed),
            grouped: c.grouped.load(Ordering::Relaxed),
            failed_groups: c.failed_groups.load(Ordering::Relaxed),
            batched: c.batched.load(Ordering::Relaxed),
            from_memory: c.from_memory.load(Ordering::Relaxed),
            alone: c.alone.load(Ordering::Relaxed),
            direct: c.direct.load(Ordering::Relaxed),
        }
    }
}

/// Which of `writers` writes `user`'s commands (FNV-1a of the id: stable and cheap).
fn shard(user: &str, writers: usize) -> usize {
    if writers <= 1 {
        return 0;
    }
    let hash = user.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    usize::try_from(hash % writers as u64).unwrap_or(0)
}

/// Where the writers run and which connections they use.
pub(crate) enum Home {
    /// As tasks on the caller's runtime, on the store's pool (an in-memory SQLite database,
    /// whose one connection is the database).
    Shared(DatabaseConnection),
    /// On a thread of their own, with a single-threaded runtime and a pool of their own made
    /// from these options (one connection per writer, opened when first needed).
    ///
    /// The writers' round trips are every grouped request's critical path. As tasks among the
    /// service's request handlers, each answer from the database waited in the runtime's run
    /// queue behind whatever requests were being parsed and answered: over HTTP at 32 clients
    /// on PostgreSQL, the group's read took 1.5 ms from send to wake-up for 0.1 ms of execution
    /// in the server, and the writer was busy 93% of the time. On their own thread the
    /// operating system's scheduler wakes them when their socket is ready.
    ///
    /// The [`Watch`] is shown their statements, as the store's pool shows it its own.
    Own(ConnectOptions, Watch),
}

/// The writers before they start.
struct Crew<C> {
    intakes: Vec<Intake<C>>,
    turn: Option<WriteTurn>,
    stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
    /// Dropped once every writer has stopped ([`Committer::stopped`]).
    stopped: watch::Sender<()>,
}

impl<C: GroupedCommand> Crew<C> {
    fn writers(self, db: &DatabaseConnection) -> (Vec<Writer<C>>, watch::Sender<()>) {
        let Self {
            intakes,
            turn,
            stop,
            counters,
            stopped,
        } = self;
        let writers = intakes
            .into_iter()
            .map(|intake| Writer {
                db: db.clone(),
                turn: turn.clone(),
                intake,
                stop: stop.clone(),
                counters: Arc::clone(&counters),
                known: C::Known::default(),
            })
            .collect();
        (writers, stopped)
    }

    /// Spawn each writer as a task of the current runtime.
    fn spawn(self, db: &DatabaseConnection) {
        let (writers, stopped) = self.writers(db);
        for writer in writers {
            let stopped = stopped.clone();
            tokio::spawn(async move {
                writer.run().await;
                drop(stopped);
            });
        }
    }

    /// Open the writers' pool, run them until they stop, then close it. When the pool cannot
    /// be made, no writer runs: the queues are dropped and every command runs alone.
    async fn run_own(self, mut options: ConnectOptions, seen: Watch) {
        options
            .max_connections(u32::try_from(self.intakes.len()).unwrap_or(u32::MAX))
            .min_connections(0)
            .connect_lazy(true);
        let mut db = match sea_orm::Database::connect(options).await {
            Ok(db) => db,
            Err(e) => {
                tracing::error!(error = %e, "the group-commit writers could not open their pool; every command runs alone");
                return;
            }
        };
        seen.attach(&mut db);
        let (writers, stopped) = self.writers(&db);
        let mut running = tokio::task::JoinSet::new();
        for writer in writers {
            running.spawn(writer.run());
        }
        while running.join_next().await.is_some() {}
        if let Err(e) = db.close().await {
            tracing::warn!(error = %e, "closing the group-commit writers' pool");
        }
        drop(stopped);
    }
}

/// The writer task's state.
struct Writer<C: GroupedCommand> {
    db: DatabaseConnection,
    /// The process's queue for SQLite's write lock (`SeaOrmStore::begin_write`).
    turn: Option<WriteTurn>,
    intake: Intake<C>,
    stop: watch::Receiver<bool>,
    counters: Arc<Counters>,
    /// What this writer's unlocked batches wrote.
    known: C::Known,
}

/// A writer's queue, and how it makes groups of what arrives.
struct Intake<C> {
    rx: mpsc::Receiver<C>,
    config: GroupCommit,
    /// The size of the last group (`GroupCommit::refill_us`).
    last_group: usize,
}

impl<C: GroupedCommand> Writer<C> {
    /// Write groups until stopped or until every sender is gone. Commands still queued are
    /// dropped with the queue, and their callers run them alone.
    async fn run(mut self) {
        loop {
            let first = tokio::select! {
                biased;
                _ = self.stop.changed() => break,
                next = self.intake.rx.recv() => match next {
                    Some(command) => command,
                    None => break,
                },
            };
            let group = self.intake.collect(first).await;
            self.write(group).await;
        }
        tracing::debug!("group-commit writer stopped");
    }

    /// Apply and commit one group, then answer every command of it.
    async fn write(&mut self, mut group: Vec<C>) {
        group.sort_by(|a, b| a.user().cmp(b.user()));
        match apply(&self.db, self.turn.as_ref(), &mut group, &mut self.known).await {
            Ok(Applied {
                batched,
                from_memory,
            }) => {
                Counters::add(&self.counters.batched, batched);
                Counters::add(&self.counters.from_memory, u64::from(from_memory));
                Counters::add(&self.counters.groups, 1);
                // Counted before anyone is answered, so a caller that reads the counters after
                // its answer sees its group in them.
                let decided = group.iter().filter(|c| c.decided()).count();
                Counters::add(
                    &self.counters.grouped,
                    u64::try_from(decided).unwrap_or(u64::MAX),
                );
                group.into_iter().for_each(C::deliver);
            }
            Err(e) => {
                tracing::warn!(error = %e, commands = group.len(), "a commit group failed; its commands run alone");
                Counters::add(&self.counters.failed_groups, 1);
                group.into_iter().for_each(C::run_alone);
            }
        }
    }
}

impl<C> Intake<C> {
    fn new(rx: mpsc::Receiver<C>, config: GroupCommit) -> Self {
        Self {
            rx,
            config,
            last_group: 0,
        }
    }

    /// `first` and whatever else is queued, up to `max_batch`; when `max_wait_us` is set, wait
    /// that long at most for the group to fill (sub-millisecond waits yield instead of sleeping,
    /// as tokio's timers tick in milliseconds).
    ///
    /// Before that, when `refill_us` is set, wait that long at most for the group to be as large
    /// as the previous one.
    async fn collect(&mut self, first: C) -> Vec<C> {
        let limit = self.config.batch_limit();
        let mut group = Vec::with_capacity(limit);
        group.push(first);
        self.drain(&mut group, limit);
        let target = self.last_group.min(limit);
        self.fill(&mut group, target, self.config.refill_limit())
            .await;
        self.fill(&mut group, limit, self.config.wait_limit()).await;
        self.last_group = group.len();
        group
    }

    /// Wait up to `wait` for `group` to hold `target` commands.
    async fn fill(&mut self, group: &mut Vec<C>, target: usize, wait: Duration) {
        let deadline = Instant::now() + wait;
        while group.len() < target && !wait.is_zero() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if left.as_millis() >= 1 {
                match tokio::time::timeout(left, self.rx.recv()).await {
                    Ok(Some(command)) => group.push(command),
                    Ok(None) | Err(_) => break,
                }
            } else {
                tokio::task::yield_now().await;
            }
            self.drain(group, target);
        }
    }

    fn drain(&mut self, group: &mut Vec<C>, limit: usize) {
        while group.len() < limit {
            match self.rx.try_recv() {
                Ok(command) => group.push(command),
                Err(_) => break,
            }
        }
    }
}

/// The savepoint each command of a group runs in. It is never released: the next command's
/// `SAVEPOINT` of the same name nests inside it and `ROLLBACK TO` always names the newest, so a
/// rollback undoes exactly one command, and the group's COMMIT releases them all. (Releasing
/// each would cost one more round trip per command and change nothing.)
const SAVEPOINT: &str = "SAVEPOINT grouped";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT grouped";

/// What [`apply`] did with a group that committed.
struct Applied {
    /// How many commands a batch decided.
    batched: u64,
    /// Whether the group was decided from what the writer knew, without a read.
    from_memory: bool,
}

/// One transaction for the whole group; any failure rolls it all back. A group of one runs
/// without a savepoint, exactly like the ordinary path (its refusal rolls the transaction back).
/// On PostgreSQL a group of batchable commands is first tried without a transaction.
async fn apply<C: GroupedCommand>(
    db: &DatabaseConnection,
    turn: Option<&WriteTurn>,
    group: &mut [C],
    known: &mut C::Known,
) -> Result<Applied, DbErr> {
    let all_batchable = group.iter().all(GroupedCommand::batchable);
    let size = u64::try_from(group.len()).unwrap_or(u64::MAX);
    if all_batchable
        && db.get_database_backend() == DbBackend::Postgres
        && let Unlocked::Written { from_memory } = C::run_many_unlocked(group, db, known).await
    {
        return Ok(Applied {
            batched: size,
            from_memory,
        });
    }
    C::forget(known, group);
    let batched = in_transaction(db, turn, group, all_batchable).await?;
    Ok(Applied {
        batched,
        from_memory: false,
    })
}

/// [`apply`]'s transaction; returns how many commands a batch decided.
async fn in_transaction<C: GroupedCommand>(
    db: &DatabaseConnection,
    turn: Option<&WriteTurn>,
    group: &mut [C],
    all_batchable: bool,
) -> Result<u64, DbErr> {
    let (_turn, tx) = crate::begin_in_turn(db, turn).await?;
    if let [only] = group {
        return if only.run(&tx).await {
            tx.commit().await.map(|()| 0)
        } else {
            tx.rollback().await.map(|()| 0)
        };
    }
    if all_batchable {
        // One batch is the whole group: the transaction is its savepoint.
        let size = u64::try_from(group.len()).unwrap_or(u64::MAX);
        return if C::run_many(group, &tx).await {
            tx.commit().await.map(|()| size)
        } else {
            tx.rollback().await.map(|()| 0)
        };
    }
    let mut batched = 0;
    let mut body = Ok(());
    let mut rest = group;
    while !rest.is_empty() && body.is_ok() {
        let run = rest.iter().take_while(|c| c.batchable()).count();
        let (now, later) = rest.split_at_mut(if run >= 2 { run } else { 1 });
        body = if let [one] = now {
            run_in_savepoint(&tx, one).await
        } else {
            run_many_in_savepoint(&tx, now).await.map(|kept| {
                if kept {
                    batched += now.len() as u64;
                }
            })
        };
        rest = later;
    }
    match body {
        Ok(()) => tx.commit().await.map(|()| batched),
        Err(e) => {
            // The statement's error is the one worth reporting.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

async fn run_in_savepoint<C: GroupedCommand>(
    tx: &DatabaseTransaction,
    command: &mut C,
) -> Result<(), DbErr> {
    tx.execute_unprepared(SAVEPOINT).await?;
    if !command.run(tx).await {
        tx.execute_unprepared(ROLLBACK_TO_SAVEPOINT).await?;
    }
    Ok(())
}

/// Returns whether the batch's writes were kept.
async fn run_many_in_savepoint<C: GroupedCommand>(
    tx: &DatabaseTransaction,
    batch: &mut [C],
) -> Result<bool, DbErr> {
    tx.execute_unprepared(SAVEPOINT).await?;
    let kept = C::run_many(batch, tx).await;
    if !kept {
        tx.execute_unprepared(ROLLBACK_TO_SAVEPOINT).await?;
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_job() -> (Job<(), u8>, oneshot::Receiver<Grouped<u8>>) {
        let (reply, answer) = oneshot::channel();
        (Job::new((), reply), answer)
    }

    /// Settle `body`, deliver, and return (keep, what the caller got).
    fn settled(body: Result<End<u8>, Fail>) -> (bool, Grouped<u8>) {
        let (mut job, mut answer) = new_job();
        let keep = job.settle(body);
        job.deliver();
        (keep, answer.try_recv().expect("an answer"))
    }

    #[test]
    fn outcomes_are_what_the_ordinary_path_returns() {
        assert!(matches!(
            settled(Ok(End::Commit(1))),
            (true, Grouped::Done(Ok(1)))
        ));
        assert!(matches!(
            settled(Ok(End::Rollback(2))),
            (false, Grouped::Done(Ok(2)))
        ));
        assert!(matches!(
            settled(Err(Fail::Store(StoreError::NotFound))),
            (false, Grouped::Done(Err(StoreError::NotFound)))
        ));
        assert!(matches!(
            settled(Err(Fail::Db(DbErr::Custom("odd".into())))),
            (false, Grouped::Done(Err(StoreError::Unexpected(_))))
        ));
    }

    fn intake(refill_us: u64) -> (mpsc::Sender<u8>, Intake<u8>) {
        let (tx, rx) = mpsc::channel(16);
        let config = GroupCommit {
            refill_us,
            ..GroupCommit::on()
        };
        (tx, Intake::new(rx, config))
    }

    /// Send `n` commands, 20 ms apart, from a task of their own.
    fn staggered(tx: &mpsc::Sender<u8>, n: u8) {
        let tx = tx.clone();
        tokio::spawn(async move {
            for i in 0..n {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                // The intake may be gone already (a group that did not wait).
                let _ = tx.send(i).await;
            }
        });
    }

    /// With `refill_us`, a group waits (at most that long) to be as large as the previous one;
    /// without, it is what is queued. A first group never waits (there was no previous one).
    #[tokio::test]
    async fn a_group_waits_to_be_as_large_as_the_previous_one() {
        for (refill_us, expected) in [(60_000_000, 3), (0, 1)] {
            let (tx, mut intake) = intake(refill_us);
            for i in 0..3 {
                tx.send(i).await.unwrap();
            }
            let first = intake.rx.recv().await.unwrap();
            assert_eq!(intake.collect(first).await.len(), 3, "what is queued");
            tx.send(9).await.unwrap();
            staggered(&tx, 2);
            let first = intake.rx.recv().await.unwrap();
            assert_eq!(
                intake.collect(first).await.len(),
                expected,
                "refill {refill_us}"
            );
        }
        let (tx, mut intake) = intake(60_000_000);
        tx.send(1).await.unwrap();
        let first = intake.rx.recv().await.unwrap();
        let lone = tokio::time::timeout(std::time::Duration::from_secs(10), intake.collect(first));
        assert_eq!(lone.await.expect("a first group does not wait").len(), 1);
    }

    /// A wait that runs out makes the next target what came.
    #[tokio::test]
    async fn a_wait_that_runs_out_lowers_the_next_target() {
        let (tx, mut intake) = intake(50_000);
        for i in 0..4 {
            tx.send(i).await.unwrap();
        }
        let first = intake.rx.recv().await.unwrap();
        assert_eq!(intake.collect(first).await.len(), 4);
        tx.send(5).await.unwrap();
        let first = intake.rx.recv().await.unwrap();
        assert_eq!(intake.collect(first).await.len(), 1, "50 ms, then alone");
        assert_eq!(intake.last_group, 1);
    }

    #[test]
    fn lost_races_and_contention_run_alone() {
        assert!(matches!(
            settled(Err(Fail::Retry("lost a race"))),
            (false, Grouped::Alone)
        ));
        let unreachable = DbErr::Conn(sea_orm::RuntimeErr::Internal("gone".into()));
        assert!(matches!(
            settled(Err(Fail::Db(unreachable))),
            (false, Grouped::Alone)
        ));
        let (job, mut answer) = new_job();
        job.run_alone();
        assert!(matches!(answer.try_recv(), Ok(Grouped::Alone)));
        let (job, mut answer) = new_job();
        assert!(!job.decided(), "never settled: not decided");
        job.deliver();
        assert!(matches!(answer.try_recv(), Ok(Grouped::Alone)));
    }
}
