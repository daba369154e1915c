//! Many consumptions as one set of statements, for group commit.
//!
//! Run one by one, each consumption of a group costs about six statements (savepoint, key
//! lookup, locked read of the balance and its lots, conditional decrement, ledger insert, lot
//! draw-down), and the group's
//! single writer issues them one after the other: on PostgreSQL each is a network round trip,
//! and the writer ends up slower than eight connections working side by side. [`consume_many`]
//! decides a whole run of consumptions from two reads (three with team members) and writes them
//! with one statement (PostgreSQL) or three (SQLite; four with members), whatever their number:
//!
//! 1. read, with the balance rows locked on PostgreSQL (`FOR UPDATE OF b`, in user order, the
//!    order every group takes them in): the balances of the run's users joined with their
//!    spendable lots (lots are serialized by the balance locks, like every lot change: see
//!    `postings`); then the rows of the team members the run's spends act as (locked after the
//!    balances, see [`members`]); then the consumptions already written under the run's keys;
//! 2. decide each consumption in arrival order with the same rules as [`super::spend::consume`]
//!    (a known key replays or conflicts, a member past their limit or not a member is refused,
//!    a balance that does not cover the cost refuses with the
//!    balance as it stands after the earlier consumptions of the run, else the domain's posting
//!    rule and spend order), against the balances and lots as the earlier ones left them;
//! 3. write the fresh ones: one multi-row ledger insert, one decrement per user (a single
//!    `UPDATE … FROM` a row set, still conditional on the balance covering it) and one
//!    draw-down per lot (likewise conditional), one count update per member who spent, and
//!    one upsert of the spend-limit buckets the run counted in ([`buckets`]); three to five
//!    statements on SQLite, ONE on PostgreSQL
//!    (data-modifying common table expressions). On PostgreSQL the row sets travel as one JSON
//!    parameter each, so every statement has one text whatever the run's size and is prepared
//!    once per connection.
//!
//! Each statement's result is checked against the decision (rows written, balances after,
//! lots changed). Any difference, like any database error, is a [`Fail`]: the writer rolls the
//! run back to its savepoint and every command of it runs alone on the ordinary path, so a
//! batch never acknowledges anything the one-by-one path would not have. One difference is not
//! run again: a decrement the database's guard refused, or that left another balance than the
//! decided one, under the locks of [`consume_many`] is a disagreement between the spending rule
//! and the guard ([`StoreError::SpendDisagreement`], as on the one-by-one path), which the
//! user's commands of the run answer; the others run alone.
//!
//! On PostgreSQL a group of consumptions only first tries [`consume_many_unlocked`]: the same
//! decision from a read without locks (and without the keys, looked up only for refusals),
//! written by the same single statement outside any transaction. Its updates are conditional on
//! each balance and lot still holding what was read, and the statement checks its own row
//! counts and fails (so writes nothing) on any difference; then the group runs the locked way.
//! There, and from the writer's memory ([`Known`]), the decrement's conditions are a
//! compare-and-set on the balance read: a refusal cannot be told from a balance that moved since,
//! so it is never an answer; the locked way decides again and checks the guard as above.

mod buckets;
mod members;

use std::collections::{BTreeSet, HashMap};

use application::ports::{
    ConsumeCommand, CreditTransaction, Refusal, Replay, SpendLimitRecord, StoreError,
};
use domain::ledger::{
    self, DecidedPosting, GrantLot, KeyReuse, LedgerError, SpendDecision, allocate_spend_in,
};
use domain::{AccountId, Credits, TransactionKind};
use sea_orm::{
    ConnectionTrait, DatabaseTransaction, DbBackend, FromQueryResult, QueryResult, Value,
};

use super::{Spent, postings, spend};
use application::host_events;

use crate::Enc;
use crate::limits;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::{
    LOT_COLUMNS, LotRow, TRANSACTION_COLUMNS, TransactionRow, tokens_value, usage_tokens_value,
};
use crate::sql::{self, End};

/// What one consumption of a run decided.
pub(crate) type Decided = Result<End<Spent<(CreditTransaction, Replay)>>, Fail>;

/// How one consumption ends, before the writes (a fresh one's transaction comes from the insert).
enum Decision {
    /// Written by this run: the `n`-th fresh posting.
    Fresh(usize),
    /// The key was written by an earlier request with the same body.
    Replay(CreditTransaction),
    /// The key was written earlier in this run with the same body: replays the `n`-th posting.
    ReplayOfFresh(usize),
    /// Decided without writing (insufficient, key conflict, a malformed command).
    Refused(Decided),
}

/// A key seen so far: in the database, or fresh in this run.
enum Seen {
    Stored(CreditTransaction, Option<String>),
    Fresh(usize, String),
}

/// One consumption to write.
struct Fresh<'a> {
    command: &'a ConsumeCommand,
    balance_after: i64,
}

/// Decide and write `commands` (consumptions, in arrival order) inside `tx`; one outcome per
/// command, in the same order. An `Err` means nothing is decided: undo the run's writes and run
/// every command alone.
pub(crate) async fn consume_many(
    tx: &DatabaseTransaction,
    commands: &[&ConsumeCommand],
    events: &Enc,
) -> Result<Vec<Decided>, Fail> {
    let users: BTreeSet<&str> = commands.iter().map(|c| c.account_id.as_str()).collect();
    let (balances, lots) = balances_with_lots(tx, &users, Lock::Rows).await?;
    // The members' rows after the balances: the one lock order of every spend.
    let members = members::read(tx, commands, Lock::Rows).await?;
    let limits = run_limits(tx, &balances, commands).await?;
    let seen = stored_keys(tx, commands).await?;
    let mut run = Run::new(balances, lots, seen, Lock::Rows)
        .with_members(members)
        .with_limits(limits);
    let outcomes = run.decide_and_write(tx, commands, Keys::Read).await?;
    let counted: Vec<limits::LimitCount> = run.limit_counts.iter().flatten().cloned().collect();
    limits::mark_reached(tx, &counted).await?;
    // The balance crossings and the limits reached of the fresh spends are told in the same
    // transaction.
    let mut told = Outbox::default();
    let mut fresh = run.limit_counts.iter();
    for (c, outcome) in commands.iter().zip(&outcomes) {
        if let Ok(End::Commit(Spent::Done((spend, Replay::Fresh)))) = outcome {
            told.extend(host_events::balance_alerts(spend, c.low_balance_below));
            if let Some(counts) = fresh.next() {
                told.extend(limits::reached_events(counts, spend));
            }
        }
    }
    told.write(tx, events).await?;
    Ok(outcomes)
}

/// The spend limits, with their buckets, of the run's accounts whose balance rows (`balances`,
/// read first) say they have any, in one statement: read under the rows' locks, or after the
/// rows by an unlocked run (every change to a limit or its buckets changes the balance row, so
/// the run's conditional write fails if any came in after the rows were read).
async fn run_limits<C: ConnectionTrait>(
    conn: &C,
    balances: &Balances,
    commands: &[&ConsumeCommand],
) -> Result<HashMap<String, Vec<SpendLimitRecord>>, Fail> {
    let limited: BTreeSet<&str> = balances
        .iter()
        .filter(|(_, b)| b.limits > 0)
        .map(|(u, _)| u.as_str())
        .collect();
    let Some(earliest) = commands.iter().map(|c| c.now).min() else {
        return Ok(HashMap::new());
    };
    if limited.is_empty() {
        return Ok(HashMap::new());
    }
    let (accounts, values) = member_of(is_postgres(conn), "l.account_id", 2, &limited);
    limits::read_for_run(conn, (&accounts, values), earliest).await
}

/// PostgreSQL: decide and write `commands` without an explicit transaction, in two round trips
/// instead of five: ONE read of the balances with their lots (one snapshot, no locks) and, when
/// something is to be written, the ONE writing statement of [`Run::write_postgres`], which
/// commits by itself. That statement changes each balance only if it still holds the amount
/// and transaction count the read saw, and each lot only if it still holds what the read saw,
/// and fails as a whole (so changes nothing) unless every row it was to write was written. A
/// decided run is therefore exactly what the locked path would have decided at the moment of
/// the read, committed atomically; anything that moved in between (another instance's spend, a
/// grant, an expiry) is an `Err` with nothing written, and the caller runs the commands on the
/// locked path ([`consume_many`]).
///
/// The run's keys are not read up front: a key already stored makes the insert of a spend
/// decided fresh conflict, which fails the statement like any other change, and the locked
/// path then replays it. Only a spend refused for want of credits needs its key looked up
/// before answering (a retry of a spend that succeeded must replay it, not be refused): see
/// [`Keys::OnRefusal`].
///
/// The balance rows are locked only for the writing statement and its commit, not from the
/// read on: a hot account spends its lock time on one statement per group.
///
/// When `known` holds every user of the run and the run refuses nothing, the read is skipped:
/// the run is decided from what the writer's earlier runs left, and the same conditional write
/// checks it (see [`Known`]); if it fails, the run reads and decides again. Returns where the
/// run's balances came from. On `Err` the caller forgets the run's users
/// (`GroupedCommand::forget`): the locked path may change them.
pub(crate) async fn consume_many_unlocked<C: ConnectionTrait>(
    db: &C,
    commands: &[&ConsumeCommand],
    known: &mut Known,
) -> Result<(Vec<Decided>, Source), Fail> {
    let users: BTreeSet<&str> = commands.iter().map(|c| c.account_id.as_str()).collect();
    if let Some((balances, lots, members, limits)) = known.recall(&users, &members::keys(commands))
    {
        let mut run = Run::new(balances, lots, HashMap::new(), Lock::None)
            .with_members(members)
            .with_limits(limits);
        let decisions = run.decide_all(commands)?;
        run.refuse_crossings()?;
        // A refusal decided from memory is not checked by any write: read instead.
        if !decisions.iter().any(is_refusal) {
            match run.write_decided(db, decisions).await {
                Ok(outcomes) => {
                    known.keep(&run);
                    return Ok((outcomes, Source::Known));
                }
                // What the read finds replaces what was known.
                Err(why) => {
                    tracing::debug!(error = ?why, "balances moved since this writer wrote them; reading them");
                }
            }
        }
    }
    let (balances, lots) = balances_with_lots(db, &users, Lock::None).await?;
    let members = members::read(db, commands, Lock::None).await?;
    let limits = run_limits(db, &balances, commands).await?;
    let mut run = Run::new(balances, lots, HashMap::new(), Lock::None)
        .with_members(members)
        .with_limits(limits);
    let mut decisions = run.decide_all(commands)?;
    run.refuse_crossings()?;
    replay_refusals(db, commands, &mut decisions).await?;
    let outcomes = run.write_decided(db, decisions).await?;
    known.keep(&run);
    Ok((outcomes, Source::Read))
}

/// Where an unlocked run's balances came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Read from the database.
    Read,
    /// What the writer's previous runs wrote ([`Known`]).
    Known,
}

/// The balance rows (and their spendable lots) a group-commit writer's unlocked runs last
/// wrote or read, as those runs left them: a run whose users are all here is decided from
/// them and written without reading first, one round trip instead of two.
///
/// It is safe for the reason the unlocked path is: the writing statement changes nothing
/// unless every balance still holds the amount and transaction count the run started from and
/// every lot it draws still holds what the run believed, so a spend decided from a balance
/// that has since moved (a grant, an expiry, a spend through another instance or the locked
/// path) fails the statement; the run then reads and decides again. Every change to a user's
/// lots that matters to a spend changes the balance row too (a grant adds to it, an expiry or
/// a clawback takes from it, each counting a transaction). A refusal is not written, so
/// nothing would check one decided from memory (the user may just have bought credits): a run
/// that would refuse anything reads instead.
#[derive(Debug, Default)]
pub(crate) struct Known {
    users: HashMap<String, KnownBalance>,
    /// The member rows those runs counted in, as they left them (see [`members`]).
    members: members::Members,
}

#[derive(Debug, Clone)]
struct KnownBalance {
    hundredths: i64,
    count: i64,
    /// `limit_count` and `limit_changes`.
    limited: (i64, i64),
    lots: Vec<GrantLot>,
    /// The account's spend limits with their buckets (none when `limit_count` is 0).
    limits: Vec<SpendLimitRecord>,
}

impl Known {
    /// At most this many users are remembered; past it, the memory starts again.
    const MOST: usize = 4096;

    /// The balances, lots and spend limits of `users`, and the rows of `members`, if every one
    /// of them is known.
    fn recall(&self, users: &BTreeSet<&str>, members: &BTreeSet<(&str, &str)>) -> Option<Recalled> {
        let mut known_members = members::Members::new();
        for (account, user) in members {
            let key = ((*account).to_owned(), (*user).to_owned());
            let row = self.members.get(&key)?;
            known_members.insert(key, members::MemberCount::read(row.limit, row.now));
        }
        let mut balances = Balances::new();
        let mut lots = HashMap::new();
        let mut limits = HashMap::new();
        for user in users {
            let known = self.users.get(*user)?;
            balances.insert(
                (*user).to_owned(),
                Balance::read(known.hundredths, known.count, known.limited),
            );
            lots.insert((*user).to_owned(), known.lots.clone());
            if known.limited.0 > 0 {
                limits.insert((*user).to_owned(), known.limits.clone());
            }
        }
        Some((balances, lots, known_members, limits))
    }

    /// Remember what `run` wrote (or found) for each of its users.
    fn keep(&mut self, run: &Run<'_>) {
        if self.users.len() + run.balances.len() > Self::MOST
            || self.members.len() + run.members.len() > Self::MOST
        {
            self.users.clear();
            self.members.clear();
        }
        for (key, row) in &run.members {
            self.members.insert(key.clone(), *row);
        }
        for (user, balance) in &run.balances {
            let Some(hundredths) = balance.hundredths else {
                self.users.remove(user);
                continue;
            };
            let lots = run.lots.get(user).map_or_else(Vec::new, |lots| {
                lots.iter()
                    .filter(|lot| !lot.remaining.is_zero())
                    .cloned()
                    .collect()
            });
            self.users.insert(
                user.clone(),
                KnownBalance {
                    hundredths,
                    count: balance.count + balance.postings,
                    limited: (balance.limits, balance.limit_changes),
                    lots,
                    limits: run.limits.get(user).cloned().unwrap_or_default(),
                },
            );
        }
    }

    /// Forget `users` (their balances may have changed by other means).
    pub(crate) fn forget<'u>(&mut self, users: impl IntoIterator<Item = &'u str>) {
        for user in users {
            self.users.remove(user);
            self.members.retain(|(account, _), _| account != user);
        }
    }
}

/// What [`Known::recall`] gives back: the run's balances, lots, members and spend limits.
type Recalled = (
    Balances,
    HashMap<String, Vec<GrantLot>>,
    members::Members,
    HashMap<String, Vec<SpendLimitRecord>>,
);

/// Whether a read locks the balance rows it returns (PostgreSQL; SQLite's write transaction
/// already holds the database's write lock).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lock {
    Rows,
    None,
}

/// When a run learns which of its keys are already stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// Before deciding ([`stored_keys`] filled [`Run::seen`]).
    Read,
    /// Only for the spends decided insufficient, after deciding: each of them whose key is
    /// stored becomes a replay or a key conflict instead. Neither a refusal nor a replay
    /// changes a balance, so no other decision of the run changes with it.
    OnRefusal,
}

/// The users' current balances and lots, as the run changes them.
type Balances = HashMap<String, Balance>;

/// One user's balance row as the run has left it so far.
#[derive(Debug, Clone, Copy, Default)]
struct Balance {
    /// `None`: the user has no balance row (nothing was ever granted).
    hundredths: Option<i64>,
    /// The transaction count as read: the run writes only if it and the balance as read (what
    /// it holds now plus what the run debited) still hold.
    count: i64,
    /// What the run takes from it.
    debited: i64,
    /// Transactions the run adds.
    postings: i64,
    /// The `updated_at` of the run's last posting.
    updated_at: i64,
    /// The account's `limit_count` as read: whether the run reads its limits.
    limits: i64,
    /// The account's `limit_changes` as read: the run writes only if it and `limit_count`
    /// still hold (no limit was made or removed since).
    limit_changes: i64,
}

impl Balance {
    /// The run's posting of `amount` (hundredths) at `now`, leaving `after`.
    fn debit(&mut self, after: Credits, amount: i64, now: domain::Timestamp) {
        self.hundredths = Some(after.hundredths());
        self.debited += amount;
        self.postings += 1;
        self.updated_at = now.unix_millis();
    }

    /// A balance row as read: its balance, transaction count, and `limit_count` and
    /// `limit_changes`.
    fn read(hundredths: i64, count: i64, (limits, limit_changes): (i64, i64)) -> Self {
        Balance {
            hundredths: Some(hundredths),
            count,
            limits,
            limit_changes,
            ..Balance::default()
        }
    }
}

/// The run's state: what it read, as its decisions so far have changed it.
struct Run<'a> {
    balances: Balances,
    seen: HashMap<(String, String), Seen>,
    lots: HashMap<String, Vec<GrantLot>>,
    /// `(lot id, hundredths)` drawn, in decision order.
    takes: Vec<(i64, i64)>,
    fresh: Vec<Fresh<'a>>,
    /// The members the run's spends act as, as its spends left them.
    members: members::Members,
    /// The spend limits of the run's accounts that have any, with their buckets as the run's
    /// spends left them.
    limits: HashMap<String, Vec<SpendLimitRecord>>,
    /// What each fresh spend counted against them, by fresh posting.
    limit_counts: Vec<Vec<limits::LimitCount>>,
    /// Whether the balances were read under their rows' locks ([`consume_many`]), so that a
    /// decrement the database refuses is a disagreement with the decision, not a balance that
    /// moved since the read.
    lock: Lock,
}

impl<'a> Run<'a> {
    fn new(
        balances: Balances,
        lots: HashMap<String, Vec<GrantLot>>,
        seen: HashMap<(String, String), Seen>,
        lock: Lock,
    ) -> Self {
        Run {
            balances,
            seen,
            lots,
            takes: Vec::new(),
            fresh: Vec::new(),
            members: members::Members::new(),
            limits: HashMap::new(),
            limit_counts: Vec::new(),
            lock,
        }
    }

    /// The run with the spend limits of its accounts that have any.
    fn with_limits(mut self, limits: HashMap<String, Vec<SpendLimitRecord>>) -> Self {
        self.limits = limits;
        self
    }

    /// The run with the rows of the members its spends act as.
    fn with_members(mut self, members: members::Members) -> Self {
        self.members = members;
        self
    }

    /// Decide every command in arrival order, write the fresh ones on `conn`, and return one
    /// outcome per command.
    async fn decide_and_write<C: ConnectionTrait>(
        &mut self,
        conn: &C,
        commands: &[&'a ConsumeCommand],
        keys: Keys,
    ) -> Result<Vec<Decided>, Fail> {
        let mut decisions = self.decide_all(commands)?;
        if keys == Keys::OnRefusal {
            replay_refusals(conn, commands, &mut decisions).await?;
        }
        self.write_decided(conn, decisions).await
    }

    /// A run whose fresh spends take a balance across the low-balance threshold or to zero, or
    /// take a spend limit to its credits, must tell it in the same transaction, which the
    /// unlocked path has not got: such a (rare) run is refused here, before anything is
    /// written, and takes the locked path.
    fn refuse_crossings(&self) -> Result<(), Fail> {
        let crosses = self.fresh.iter().any(|f| {
            let after = f.balance_after;
            let before = after.saturating_add(f.command.amount.hundredths());
            match (
                Credits::from_hundredths(before),
                Credits::from_hundredths(after),
            ) {
                (Ok(before), Ok(after)) => {
                    !ledger::balance_alerts(before, after, f.command.low_balance_below).is_empty()
                }
                _ => true,
            }
        });
        if crosses {
            return Err(Fail::Retry(
                "a balance crossing is told inside a transaction",
            ));
        }
        if self
            .limit_counts
            .iter()
            .flatten()
            .any(|c| c.crossed.is_some())
        {
            return Err(Fail::Retry("a limit reached is told inside a transaction"));
        }
        Ok(())
    }

    /// Decide every command in arrival order.
    fn decide_all(&mut self, commands: &[&'a ConsumeCommand]) -> Result<Vec<Decision>, Fail> {
        commands.iter().map(|c| self.decide(c)).collect()
    }

    /// Write the fresh postings and turn `decisions` into outcomes.
    async fn write_decided<C: ConnectionTrait>(
        &self,
        conn: &C,
        decisions: Vec<Decision>,
    ) -> Result<Vec<Decided>, Fail> {
        let written = self.write(conn).await?;
        Ok(decisions
            .into_iter()
            .map(|decision| match decision {
                Decision::Fresh(n) => Ok(End::Commit(Spent::Done((
                    written[n].clone(),
                    Replay::Fresh,
                )))),
                Decision::ReplayOfFresh(n) => Ok(End::Rollback(Spent::Done((
                    written[n].clone(),
                    Replay::Replayed,
                )))),
                Decision::Replay(earlier) => {
                    Ok(End::Rollback(Spent::Done((earlier, Replay::Replayed))))
                }
                Decision::Refused(outcome) => outcome,
            })
            .collect())
    }

    /// Decide one consumption with the domain's spending rule (`domain::decide_spend`) against
    /// the run's balance and keys, then draw its lots in the domain's spend order.
    fn decide(&mut self, c: &'a ConsumeCommand) -> Result<Decision, Fail> {
        let Run {
            balances,
            seen,
            lots,
            takes,
            fresh,
            members,
            limits,
            limit_counts,
            ..
        } = self;
        let user = c.account_id.as_str();
        let hash = c.idempotency.request_hash.as_str();
        let key = (user.to_owned(), c.idempotency.key.as_str().to_owned());
        let earlier = seen.get(&key);
        let key_used = earlier.map(|s| match s {
            Seen::Stored(_, stored) => stored.as_deref(),
            Seen::Fresh(_, stored) => Some(stored.as_str()),
        });
        let balance = balances.entry(user.to_owned()).or_default();
        let before = postings::credits(balance.hundredths.unwrap_or(0))?;
        let decision = ledger::decide_spend(
            TransactionKind::Consumption,
            c.amount,
            hash,
            key_used,
            before,
        );
        let decision = match keyed(decision, earlier, c)? {
            Ok(decision) => decision,
            Err(answered) => return Ok(answered),
        };
        // A member's limit is decided before the balance, as on the one-by-one path, then the
        // account's limits; neither moves unless the spend is written.
        let counts = members::count(members, c).and_then(|m| Ok((m, count_limits(limits, c)?)));
        let (counted, (account_limits, limits_counted)) = match counts {
            Ok(counts) => counts,
            Err(refusal) => return Ok(refused(refusal)),
        };
        let after = match decision {
            SpendDecision::Insufficient { available } => {
                let requested = c.amount;
                return Ok(refused(Refusal::Insufficient {
                    requested,
                    available,
                }));
            }
            SpendDecision::Post { after } => after,
            SpendDecision::Reused(_) => return Ok(refused(Refusal::KeyConflict)),
        };
        let amount = c.amount.hundredths();
        let taken = before.hundredths() - after.hundredths();
        assert_eq!(taken, amount, "a batched spend takes exactly its amount");
        members::apply(members, counted);
        limits.extend(account_limits.map(|moved| (user.to_owned(), moved)));
        limit_counts.push(limits_counted);
        balance.debit(after, amount, c.now);
        if let Some(user_lots) = lots.get_mut(user) {
            draw(user_lots, (c.amount, c.spend_order), takes)?;
        }
        let n = fresh.len();
        fresh.push(Fresh {
            command: c,
            balance_after: after.hundredths(),
        });
        seen.insert(key, Seen::Fresh(n, hash.to_owned()));
        Ok(Decision::Fresh(n))
    }
}

/// What `c` counts against its account's limits in the run (`limits`: as the run's spends left
/// them): the account's limits with the spend counted, to keep if it is written, and the
/// counts; or the refusal of a hard limit.
fn count_limits(
    limits: &HashMap<String, Vec<SpendLimitRecord>>,
    c: &ConsumeCommand,
) -> Result<(Option<Vec<SpendLimitRecord>>, Vec<limits::LimitCount>), Refusal> {
    let Some(mut of_account) = limits.get(c.account_id.as_str()).cloned() else {
        return Ok((None, Vec::new()));
    };
    let spend = c.context.spent_as(c.member_id.as_ref());
    let counted = limits::count_in_run(&mut of_account, &spend, c.amount, c.now)?;
    Ok((Some(of_account), counted))
}

/// The spending rule's `decision` for `c` with its key's earlier use (`earlier`): what is left to
/// decide (`Ok`: post it or refuse it for want of credits), or the answer a used key (a replay,
/// a conflict) or a malformed command already gives.
fn keyed(
    decision: Result<SpendDecision, LedgerError>,
    earlier: Option<&Seen>,
    c: &ConsumeCommand,
) -> Result<Result<SpendDecision, Decision>, Fail> {
    Ok(Err(match (decision, earlier) {
        (Err(LedgerError::WrongSign { .. }), _) if c.amount.is_zero() => {
            Decision::Refused(Err(spend::zero_consumption()))
        }
        (Err(e), _) => {
            return Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!("{e}"))));
        }
        (Ok(SpendDecision::Reused(KeyReuse::Replay)), Some(Seen::Stored(earlier, _))) => {
            Decision::Replay(earlier.clone())
        }
        (Ok(SpendDecision::Reused(KeyReuse::Replay)), Some(Seen::Fresh(n, _))) => {
            Decision::ReplayOfFresh(*n)
        }
        (Ok(SpendDecision::Reused(_)), _) => refused(Refusal::KeyConflict),
        (Ok(decision), _) => return Ok(Ok(decision)),
    }))
}

/// Draw `amount` from a user's lots in the domain's spend order (`order`), recording each take.
fn draw(
    user_lots: &mut [GrantLot],
    (amount, order): (Credits, domain::SpendOrder),
    takes: &mut Vec<(i64, i64)>,
) -> Result<(), Fail> {
    let held = |lots: &[GrantLot]| lots.iter().map(|l| l.remaining.hundredths()).sum::<i64>();
    let before = if cfg!(debug_assertions) {
        held(user_lots)
    } else {
        0
    };
    let taken_before = takes.len();
    for (id, take) in allocate_spend_in(order, user_lots, amount) {
        takes.push((id, take.hundredths()));
        if let Some(lot) = user_lots.iter_mut().find(|l| l.id == id) {
            lot.remaining = lot
                .remaining
                .checked_sub(take)
                .map_err(|_| Fail::Retry("a lot drawn beyond what it holds"))?;
        }
    }
    debug_assert!(
        {
            let drawn: i64 = takes[taken_before..].iter().map(|(_, t)| t).sum();
            drawn <= amount.hundredths() && held(user_lots) == before - drawn
        },
        "the lots drop by exactly what the spend draws, at most its amount"
    );
    Ok(())
}

/// One value of a row set ([`rows`]).
#[derive(Debug, Clone)]
enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
}

impl Cell {
    fn text(s: impl Into<String>) -> Self {
        Cell::Text(Some(s.into()))
    }

    fn sea(self) -> Value {
        match self {
            Cell::Text(t) => t.into(),
            Cell::Int(i) => i.into(),
        }
    }
}

fn is_postgres<C: ConnectionTrait>(conn: &C) -> bool {
    conn.get_database_backend() == DbBackend::Postgres
}

/// `$first, $first+1, …` for `count` values.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A common table expression `name` with `columns` (name, PostgreSQL type) holding `rows`, whose
/// parameters start at `$first`; returns its text and parameters.
///
/// SQLite gets `name(a, b) AS (VALUES ($1, $2), …)`. PostgreSQL gets ONE JSON parameter read by
/// `json_to_recordset`, so that the statement's text is the same whatever the number of rows:
/// sqlx prepares each distinct text once per connection (a parse and describe round trip, and
/// an eviction from its cache of 100 when too many differ), which for a group's statements,
/// whose row counts change from group to group, would cost more than the statements themselves.
fn rows(
    postgres: bool,
    (name, first): (&str, usize),
    columns: &[(&str, &str)],
    rows: Vec<Vec<Cell>>,
) -> (String, Vec<Value>) {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    if postgres {
        let definitions: Vec<String> = columns.iter().map(|(n, t)| format!("{n} {t}")).collect();
        let cte = format!(
            "{name} AS (SELECT * FROM json_to_recordset(${first}::json) AS r({}))",
            definitions.join(", ")
        );
        return (cte, vec![json_rows(&names, rows).into()]);
    }
    let width = columns.len();
    let count = rows.len();
    let tuples: Vec<String> = (0..count)
        .map(|r| format!("({})", placeholders(first + r * width, width)))
        .collect();
    let values = rows.into_iter().flatten().map(Cell::sea).collect();
    (
        format!(
            "{name}({}) AS (VALUES {})",
            names.join(", "),
            tuples.join(", ")
        ),
        values,
    )
}

/// `rows` as the JSON array `json_to_recordset` reads: one object per row with a member per
/// column named in `names`, written straight to text. A NULL cell is left out (the function
/// reads a missing member as NULL), so the many empty columns of a spend cost nothing.
fn json_rows(names: &[&str], rows: Vec<Vec<Cell>>) -> String {
    use std::fmt::Write as _;
    let mut json = String::with_capacity(rows.len() * 64 + 2);
    json.push('[');
    for (r, row) in rows.into_iter().enumerate() {
        if r > 0 {
            json.push(',');
        }
        json.push('{');
        let mut first = true;
        for (name, cell) in names.iter().zip(row) {
            let value = match cell {
                Cell::Text(None) | Cell::Int(None) => continue,
                Cell::Text(Some(text)) => serde_json::Value::String(text).to_string(),
                Cell::Int(Some(n)) => n.to_string(),
            };
            if !first {
                json.push(',');
            }
            first = false;
            // Column names are this file's identifiers: nothing to escape.
            let _ = write!(json, "\"{name}\":{value}");
        }
        json.push('}');
    }
    json.push(']');
    json
}

/// `column` is one of `items` (parameters from `$first`): `IN ($1, …)` on SQLite, one JSON
/// array parameter on PostgreSQL (see [`rows`]), still an index lookup per item.
fn member_of(
    postgres: bool,
    column: &str,
    first: usize,
    items: &BTreeSet<&str>,
) -> (String, Vec<Value>) {
    if postgres {
        let json = serde_json::Value::from(items.iter().copied().collect::<Vec<&str>>());
        return (
            format!("{column} = ANY(ARRAY(SELECT json_array_elements_text(${first}::json)))"),
            vec![json.to_string().into()],
        );
    }
    (
        format!("{column} IN ({})", placeholders(first, items.len())),
        items.iter().map(|i| Value::from(*i)).collect(),
    )
}

/// The users' balances with their spendable lots, in one statement; with [`Lock::Rows`], the
/// balance rows locked in user order on PostgreSQL (`FOR UPDATE OF b`: the balance rows only;
/// the lots are serialized by them). The run reads the spend limits of the accounts that have
/// any next ([`run_limits`]). A run with an account that has balance thresholds fails here: its commands
/// run alone, on the path that tells their crossings (`super::spend::consume`).
async fn balances_with_lots<C: ConnectionTrait>(
    tx: &C,
    users: &BTreeSet<&str>,
    lock: Lock,
) -> Result<(Balances, HashMap<String, Vec<GrantLot>>), Fail> {
    let postgres = is_postgres(tx);
    let (users, values) = member_of(postgres, "b.account_id", 1, users);
    // `NOT g.expired`: see `postings::lock_balance_with_lots` (keeps SQLite on the per-user lot
    // index).
    let sql = format!(
        "SELECT b.account_id, b.balance_hundredths, b.transaction_count, b.limit_count, \
         b.limit_changes, b.threshold_count, {LOT_COLUMNS} \
         FROM credit_balances b LEFT JOIN credit_grants g \
         ON g.account_id = b.account_id AND NOT g.expired AND g.remaining_hundredths > 0 \
         WHERE {users} ORDER BY b.account_id{}",
        if postgres && lock == Lock::Rows {
            " FOR UPDATE OF b"
        } else {
            ""
        }
    );
    let mut balances = Balances::new();
    let mut lots: HashMap<String, Vec<GrantLot>> = HashMap::new();
    for row in sql::rows(tx, &sql, values).await? {
        let user: String = row.try_get("", "account_id")?;
        let hundredths: i64 = row.try_get("", "balance_hundredths")?;
        let count: i64 = row.try_get("", "transaction_count")?;
        let limit_count = i64::from(row.try_get::<i32>("", "limit_count")?);
        let limit_changes: i64 = row.try_get("", "limit_changes")?;
        if row.try_get::<i32>("", "threshold_count")? > 0 {
            return Err(Fail::Retry("an account of the run has balance thresholds"));
        }
        balances
            .entry(user.clone())
            .or_insert_with(|| Balance::read(hundredths, count, (limit_count, limit_changes)));
        if row.try_get::<Option<i64>>("", "id")?.is_some() {
            let lot = LotRow::from_query_result(&row, "")?.into_domain()?;
            lots.entry(user).or_default().push(lot);
        }
    }
    Ok((balances, lots))
}

/// The consumptions already written under the run's (user, key) pairs: one probe of the unique
/// index (user, kind, key) per pair. (Two `IN` lists, users and keys, would probe every user
/// with every key, and SQLite without statistics may scan each user's whole ledger instead.)
async fn stored_keys<C: ConnectionTrait>(
    tx: &C,
    commands: &[&ConsumeCommand],
) -> Result<HashMap<(String, String), Seen>, Fail> {
    let pairs: BTreeSet<(&str, &str)> = commands
        .iter()
        .map(|c| (c.account_id.as_str(), c.idempotency.key.as_str()))
        .collect();
    let table = pairs
        .iter()
        .map(|(user, key)| vec![Cell::text(*user), Cell::text(*key)])
        .collect();
    let (cte, mut values) = rows(
        is_postgres(tx),
        ("k", 2),
        &[("uid", "text"), ("ikey", "text")],
        table,
    );
    values.insert(0, TransactionKind::Consumption.code().into());
    // CROSS JOIN: SQLite then loops over the pairs and probes the index for each.
    let sql = format!(
        "WITH {cte} SELECT idempotency_key, {TRANSACTION_COLUMNS} FROM k \
         CROSS JOIN credit_transactions t \
         WHERE t.account_id = k.uid AND t.kind = $1 AND t.idempotency_key = k.ikey"
    );
    let mut seen = HashMap::new();
    for row in sql::rows(tx, &sql, values).await? {
        let key: String = row.try_get("", "idempotency_key")?;
        let stored = TransactionRow::from_query_result(&row, "")?;
        let hash = stored.request_hash.clone();
        let stored = stored.into_domain()?;
        seen.insert(
            (stored.account_id.as_str().to_owned(), key),
            Seen::Stored(stored, hash),
        );
    }
    Ok(seen)
}

/// A spend whose key is already stored with `stored` (its request hash): a replay of `earlier`
/// when the request is the same (`hash`), else a key conflict.
fn stored_outcome(earlier: &CreditTransaction, stored: &Option<String>, hash: &str) -> Decision {
    match KeyReuse::of(stored.as_deref(), hash) {
        KeyReuse::Replay => Decision::Replay(earlier.clone()),
        KeyReuse::Conflict => refused(Refusal::KeyConflict),
    }
}

/// A command refused by a ledger rule: it writes nothing.
fn refused(refusal: Refusal) -> Decision {
    Decision::Refused(Ok(End::Rollback(Spent::Refused(refusal))))
}

/// A refusal for want of credits, or by a member's row (not a member, past their limit):
/// a refusal no write checks, whose key must be looked up before it is answered (a retry of a
/// spend that succeeded replays it).
fn is_refusal(decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::Refused(Ok(End::Rollback(Spent::Refused(
            Refusal::Insufficient { .. } | Refusal::NotAMember | Refusal::LimitReached(_)
        ))))
    )
}

/// [`Keys::OnRefusal`]: look up the keys of the spends decided insufficient, and answer each
/// whose key is stored as the locked path would have: a replay of the stored spend, or a key
/// conflict when it was written by another request.
async fn replay_refusals<C: ConnectionTrait>(
    conn: &C,
    commands: &[&ConsumeCommand],
    decisions: &mut [Decision],
) -> Result<(), Fail> {
    let refused: Vec<&ConsumeCommand> = commands
        .iter()
        .zip(decisions.iter())
        .filter(|(_, d)| is_refusal(d))
        .map(|(c, _)| *c)
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let stored = stored_keys(conn, &refused).await?;
    for (c, decision) in commands.iter().zip(decisions.iter_mut()) {
        let key = (
            c.account_id.as_str().to_owned(),
            c.idempotency.key.as_str().to_owned(),
        );
        if let (true, Some(Seen::Stored(earlier, stored))) =
            (is_refusal(decision), stored.get(&key))
        {
            *decision = stored_outcome(earlier, stored, c.idempotency.request_hash.as_str());
        }
    }
    Ok(())
}

/// One writing statement of a run: the rows it reads (a CTE named after it) and the statement.
struct Part {
    /// `name AS (…)` or `name(…) AS (VALUES …)`.
    cte: String,
    /// The statement reading `name`, with a RETURNING clause.
    statement: String,
    values: Vec<Value>,
}

impl Part {
    /// The part alone, as one statement.
    fn alone(&self) -> String {
        format!("WITH {} {}", self.cte, self.statement)
    }
}

/// The ledger insert of the fresh postings (parameters from `$first`).
fn insert_part(postgres: bool, first: usize, fresh: &[Fresh<'_>]) -> Result<Part, Fail> {
    const COLUMNS: [(&str, &str); 19] = [
        ("account_id", "text"),
        ("member_id", "text"),
        ("kind", "text"),
        ("amount_hundredths", "bigint"),
        ("balance_after_hundredths", "bigint"),
        ("order_id", "text"),
        ("subscription_id", "text"),
        ("reservation_id", "text"),
        ("feature", "text"),
        ("model", "text"),
        ("tokens", "bigint"),
        ("note", "text"),
        ("idempotency_key", "text"),
        ("request_hash", "text"),
        ("created_at", "bigint"),
        ("api_key_id", "text"),
        ("usage_tokens", "text"),
        ("price_from", "bigint"),
        ("cost_basis_millionths", "bigint"),
    ];
    let mut table = Vec::with_capacity(fresh.len());
    for f in fresh {
        let c = f.command;
        let u = &c.context;
        let id = |id: Option<&str>| Cell::Text(id.map(str::to_owned));
        table.push(vec![
            Cell::text(c.account_id.as_str()),
            Cell::Text(c.member_id.as_ref().map(|m| m.as_str().to_owned())),
            Cell::text(TransactionKind::Consumption.code()),
            Cell::Int(Some(c.amount.as_decrease().hundredths())),
            Cell::Int(Some(f.balance_after)),
            id(u.order_id.as_ref().map(|i| i.as_str())),
            id(u.subscription_id.as_ref().map(|i| i.as_str())),
            id(u.reservation_id.as_ref().map(|i| i.as_str())),
            Cell::Text(u.feature.clone()),
            Cell::Text(u.model.clone()),
            Cell::Int(tokens_value(u.tokens)?),
            Cell::Text(u.note.clone()),
            Cell::text(c.idempotency.key.as_str()),
            Cell::text(c.idempotency.request_hash.as_str()),
            Cell::Int(Some(c.now.unix_millis())),
            Cell::Text(u.api_key_id.clone()),
            Cell::Text(usage_tokens_value(u.breakdown.as_ref())),
            Cell::Int(u.price_from.map(domain::Timestamp::unix_millis)),
            Cell::Int(u.cost_basis_millionths),
        ]);
    }
    let (cte, values) = rows(postgres, ("t", first), &COLUMNS, table);
    let names: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
    let names = names.join(", ");
    // `WHERE TRUE`: SQLite's parser needs it between INSERT … SELECT and ON CONFLICT.
    let statement = format!(
        "INSERT INTO credit_transactions ({names}) SELECT {names} FROM t WHERE TRUE \
         ON CONFLICT DO NOTHING RETURNING idempotency_key, {TRANSACTION_COLUMNS}"
    );
    Ok(Part {
        cte,
        statement,
        values,
    })
}

/// The users' decrements, each conditional on the balance row still holding the balance and
/// transaction count the run read, and on the account's `limit_count` and `limit_changes`
/// being the ones read (a limit made or removed since the read, or since the writer
/// remembered the row, fails the run: see [`buckets`]) (parameters from `$first`); returns the part and how many
/// balances it must change. (Under the locked read nothing else can have changed them; on the
/// unlocked path this is what tells a run that something moved since its read.)
fn debit_part(postgres: bool, first: usize, balances: &Balances) -> (Part, usize) {
    let table: Vec<Vec<Cell>> = balances
        .iter()
        .filter(|(_, b)| b.postings > 0)
        .map(|(user, b)| {
            vec![
                Cell::text(user.as_str()),
                Cell::Int(Some(b.debited)),
                Cell::Int(Some(b.postings)),
                Cell::Int(Some(b.updated_at)),
                Cell::Int(b.hundredths.map(|now| now + b.debited)),
                Cell::Int(Some(b.count)),
                Cell::Int(Some(b.limits)),
                Cell::Int(Some(b.limit_changes)),
            ]
        })
        .collect();
    let count = table.len();
    let columns = [
        ("uid", "text"),
        ("amount", "bigint"),
        ("n", "bigint"),
        ("at", "bigint"),
        ("was", "bigint"),
        ("was_n", "bigint"),
        ("was_l", "bigint"),
        ("was_lc", "bigint"),
    ];
    let (mut cte, values) = rows(postgres, ("d", first), &columns, table);
    // PostgreSQL: lock the rows in user order first (`lk`, which the UPDATE's one-time filter
    // reads to the end before it touches a row), the order every batch and every group takes
    // them in, so that two instances' batches wait for each other instead of deadlocking.
    let gate = if postgres {
        cte.push_str(
            ", lk AS MATERIALIZED (SELECT account_id FROM credit_balances \
             WHERE account_id IN (SELECT uid FROM d) ORDER BY account_id FOR UPDATE)",
        );
        "(SELECT count(*) FROM lk) >= 0 AND "
    } else {
        ""
    };
    let statement = format!(
        "UPDATE credit_balances SET balance_hundredths = balance_hundredths - d.amount, \
         transaction_count = transaction_count + d.n, updated_at = d.at \
         FROM d WHERE {gate}account_id = d.uid AND balance_hundredths = d.was \
         AND transaction_count = d.was_n AND limit_count = d.was_l \
         AND limit_changes = d.was_lc AND threshold_count = 0 \
         AND balance_hundredths >= d.amount \
         RETURNING account_id, balance_hundredths"
    );
    (
        Part {
            cte,
            statement,
            values,
        },
        count,
    )
}

/// Each lot drawn down by what the run took from it, conditional on the lot still holding what
/// the run read (parameters from `$first`); returns the part and how many lots it must change,
/// or `None` when no lot is drawn.
fn draw_part(postgres: bool, first: usize, draws: &[Draw]) -> Option<(Part, usize)> {
    if draws.is_empty() {
        return None;
    }
    let count = draws.len();
    let table = draws
        .iter()
        .map(|d| {
            vec![
                Cell::Int(Some(d.lot)),
                Cell::text(&d.user),
                Cell::Int(Some(d.take)),
                Cell::Int(Some(d.was)),
            ]
        })
        .collect();
    let (cte, values) = rows(
        postgres,
        ("l", first),
        &[
            ("lot", "bigint"),
            ("uid", "text"),
            ("take", "bigint"),
            ("was", "bigint"),
        ],
        table,
    );
    // The owner too: a lot is found by its account first (docs/scaling.md).
    let statement =
        "UPDATE credit_grants SET remaining_hundredths = remaining_hundredths - l.take \
         FROM l WHERE id = l.lot AND account_id = l.uid AND remaining_hundredths = l.was \
         AND remaining_hundredths >= l.take RETURNING id"
            .to_owned();
    Some((
        Part {
            cte,
            statement,
            values,
        },
        count,
    ))
}

/// What a run takes from one lot in total.
struct Draw {
    lot: i64,
    /// Whose lot it is.
    user: String,
    take: i64,
    /// What the lot held when the run read it.
    was: i64,
}

impl Run<'_> {
    /// Write the fresh postings, the balances and the lot draw-downs, and check each against
    /// the decisions; the written transactions, in posting order. SQLite runs the three
    /// statements one after the other; PostgreSQL runs them as ONE statement (data-modifying
    /// common table expressions), one round trip instead of three.
    async fn write<C: ConnectionTrait>(&self, tx: &C) -> Result<Vec<CreditTransaction>, Fail> {
        if self.fresh.is_empty() {
            return Ok(Vec::new());
        }
        if is_postgres(tx) {
            return self.write_postgres(tx).await;
        }
        let insert = insert_part(false, 1, &self.fresh)?;
        let inserted = sql::rows(tx, &insert.alone(), insert.values).await?;
        let written = self.check_inserted(&inserted)?;
        let (debit, debits) = debit_part(false, 1, &self.balances);
        let debited = sql::rows(tx, &debit.alone(), debit.values).await?;
        let after = debited
            .iter()
            .map(|row| {
                Ok((
                    row.try_get("", "account_id")?,
                    row.try_get("", "balance_hundredths")?,
                ))
            })
            .collect::<Result<Vec<(String, i64)>, Fail>>()?;
        self.check_debited(&after, debits)?;
        if let Some((draw, lots)) = draw_part(false, 1, &self.draws()) {
            let drawn = sql::rows(tx, &draw.alone(), draw.values).await?;
            check_drawn(drawn.len(), lots)?;
        }
        if let Some((counts, rows)) = members::part(false, 1, &self.members) {
            let counted = sql::rows(tx, &counts.alone(), counts.values).await?;
            members::check_counted(counted.len(), rows)?;
        }
        if let Some((sums, rows)) = buckets::part(false, 1, &self.bucket_sums()?) {
            let counted = sql::rows(tx, &sums.alone(), sums.values).await?;
            buckets::check_counted(counted.len(), rows)?;
        }
        Ok(written)
    }

    /// ONE statement: the insert, the decrements and the draw-downs as data-modifying common
    /// table expressions, and a check that each wrote every row it was given (`chk`), which
    /// otherwise fails the statement (a cast error naming the mismatch) so that it changes
    /// nothing even outside a transaction ([`consume_many_unlocked`]). `chk` is a materialized
    /// CTE the final SELECT reads from, so it is evaluated whether or not the insert wrote rows.
    /// It reads the decrements first, then the members, the draw-downs, the buckets (whose
    /// upsert reads the decrements itself: see [`buckets`]), then the insert: balance rows
    /// first, as on the one-by-one path (`postings`).
    async fn write_postgres<C: ConnectionTrait>(
        &self,
        tx: &C,
    ) -> Result<Vec<CreditTransaction>, Fail> {
        let insert = insert_part(true, 1, &self.fresh)?;
        let (debit, debits) = debit_part(true, 2, &self.balances);
        let draw = draw_part(true, 3, &self.draws());
        let mut ctes = vec![insert.cte, debit.cte];
        let mut values = insert.values;
        values.extend(debit.values);
        let mut statement = (&mut ctes, &mut values);
        let (draw_cte, drawn_count, draws_expected, lots) =
            optional_part(draw, ("drw", "l"), &mut statement);
        let counts = members::part(true, statement.1.len() + 1, &self.members);
        let (count_cte, counted_count, counts_expected, counted_rows) =
            optional_part(counts, ("mem", "mc"), &mut statement);
        let sums = buckets::part(true, statement.1.len() + 1, &self.bucket_sums()?);
        let (sum_cte, summed_count, sums_expected, summed_rows) =
            optional_part(sums, ("lim", "lu"), &mut statement);
        // Under the locks, the decrements are checked one by one against the decisions after
        // the statement (`check_debited`): a refusal there is a disagreement to report, not a
        // reason to fail the statement.
        let debits_written = match self.lock {
            Lock::Rows => "TRUE",
            Lock::None => "(SELECT count(*) FROM deb) = (SELECT count(*) FROM d)",
        };
        let sql = format!(
            "WITH {}, ins AS ({}), deb AS ({}){count_cte}{draw_cte}{sum_cte}, \
             chk AS MATERIALIZED (SELECT CASE WHEN {debits_written} \
             AND {counted_count} = {counts_expected} \
             AND {drawn_count} = {draws_expected} \
             AND {summed_count} = {sums_expected} \
             AND (SELECT count(*) FROM ins) = (SELECT count(*) FROM t) THEN 0 ELSE CAST('tally: a batched spend no \
             longer matches the database: ' || (SELECT count(*) FROM ins) || ' ' || \
             (SELECT count(*) FROM deb) || ' ' || {drawn_count} || ' ' || {counted_count} \
             || ' ' || {summed_count} AS INT) END AS ok) \
             SELECT chk.ok, ins.*, \
             (SELECT json_agg(json_build_array(account_id, balance_hundredths)) FROM deb)::text \
             AS debits, CAST({drawn_count} AS BIGINT) AS drawn, \
             CAST({counted_count} AS BIGINT) AS counted, \
             CAST({summed_count} AS BIGINT) AS summed FROM chk LEFT JOIN ins ON TRUE",
            ctes.join(", "),
            insert.statement,
            debit.statement,
        );
        let rows = sql::rows(tx, &sql, values).await?;
        let written = self.check_inserted(&rows)?;
        // Every row carries the same totals; the insert wrote at least one row (checked above).
        let first = rows
            .first()
            .ok_or(Fail::Retry("a batched insert wrote nothing"))?;
        let debited: Option<String> = first.try_get("", "debits")?;
        let after: Vec<(String, i64)> = match debited {
            Some(json) => serde_json::from_str(&json).map_err(|e| {
                Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
                    "the batched decrement's result: {e}"
                )))
            })?,
            None => Vec::new(),
        };
        self.check_debited(&after, debits)?;
        let drawn: i64 = first.try_get("", "drawn")?;
        check_drawn(usize::try_from(drawn).unwrap_or(usize::MAX), lots)?;
        let counted: i64 = first.try_get("", "counted")?;
        members::check_counted(usize::try_from(counted).unwrap_or(usize::MAX), counted_rows)?;
        let summed: i64 = first.try_get("", "summed")?;
        buckets::check_counted(usize::try_from(summed).unwrap_or(usize::MAX), summed_rows)?;
        Ok(written)
    }

    /// The inserted rows, in posting order, each with the balance decided for it. A row
    /// missing here lost its key to a concurrent request: the one-by-one path replays it.
    fn check_inserted(&self, rows: &[QueryResult]) -> Result<Vec<CreditTransaction>, Fail> {
        let mut by_key: HashMap<(String, String), CreditTransaction> = HashMap::new();
        for row in rows {
            let key: String = row.try_get("", "idempotency_key")?;
            let written = TransactionRow::from_query_result(row, "")?.into_domain()?;
            by_key.insert((written.account_id.as_str().to_owned(), key), written);
        }
        self.fresh
            .iter()
            .map(|f| {
                let key = (
                    f.command.account_id.as_str().to_owned(),
                    f.command.idempotency.key.as_str().to_owned(),
                );
                match by_key.remove(&key) {
                    Some(t) if t.balance_after.hundredths() == f.balance_after => Ok(t),
                    Some(_) => Err(Fail::Retry("a batched posting's balance differs")),
                    None => Err(Fail::Retry(
                        "a concurrent request with the same key committed first",
                    )),
                }
            })
            .collect()
    }

    /// Every decremented balance is the one decided, and none is missing. Under the locks, the
    /// first that is not is a [`StoreError::SpendDisagreement`] (the database's guard refused,
    /// or wrote otherwise, what the spending rule decided); unlocked, a balance that moved
    /// since the read, and the run takes the locked path.
    fn check_debited(&self, after: &[(String, i64)], expected: usize) -> Result<(), Fail> {
        if self.lock == Lock::Rows {
            for (user, b) in self.balances.iter().filter(|(_, b)| b.postings > 0) {
                let left = after.iter().find(|(u, _)| u == user).map(|(_, left)| *left);
                self.check_guard(user, b, left)?;
            }
        }
        let agrees = after.len() == expected
            && after.iter().all(|(user, balance)| {
                self.balances.get(user).and_then(|b| b.hundredths) == Some(*balance)
            });
        if agrees {
            Ok(())
        } else {
            Err(Fail::Retry("a balance changed during a batched spend"))
        }
    }

    /// The decrement of `user`'s balance (`b`, as the run decided it) against what the
    /// guarded statement left (`left`; `None` when it refused).
    fn check_guard(&self, user: &str, b: &Balance, left: Option<i64>) -> Result<(), Fail> {
        let after = postings::credits(b.hundredths.unwrap_or(0))?;
        let before = postings::credits(after.hundredths() + b.debited)?;
        let debited = postings::credits(b.debited)?;
        let decided = DecidedPosting::spend(TransactionKind::Consumption, debited, before, after);
        let guarded = left.map(postings::credits).transpose()?;
        decided.check(guarded).map(drop).map_err(|disagreement| {
            let account = AccountId::new(user).map_err(|e| StoreError::Unexpected(e.into()));
            match account {
                Ok(account) => Fail::Store(StoreError::SpendDisagreement {
                    account,
                    disagreement,
                }),
                Err(e) => Fail::Store(e),
            }
        })
    }
}

impl Run<'_> {
    /// What the run's fresh spends counted against their limits, one count per bucket.
    fn bucket_sums(&self) -> Result<Vec<limits::LimitCount>, Fail> {
        let counted: Vec<limits::LimitCount> =
            self.limit_counts.iter().flatten().cloned().collect();
        limits::bucket_sums(&counted)
    }

    /// What the run takes from each lot, in total, with what the lot held when read.
    fn draws(&self) -> Vec<Draw> {
        let mut draws: Vec<Draw> = Vec::new();
        for &(lot, take) in &self.takes {
            match draws.iter_mut().find(|d| d.lot == lot) {
                Some(d) => d.take += take,
                None => draws.push(Draw {
                    lot,
                    user: String::new(),
                    take,
                    was: 0,
                }),
            }
        }
        // Each lot now holds what it held minus what the run took.
        for d in &mut draws {
            let owned = self
                .lots
                .iter()
                .find_map(|(user, lots)| Some((user, lots.iter().find(|l| l.id == d.lot)?)));
            if let Some((user, lot)) = owned {
                d.user.clone_from(user);
                d.was = lot.remaining.hundredths() + d.take;
            } else {
                d.was = d.take;
            }
        }
        draws
    }
}

/// A part of the single PostgreSQL statement that may have nothing to write (`None`): its CTE
/// and values added to `statement`'s, and how the check reads it: the part named `name` as a
/// CTE, the count of rows it wrote, the count of rows of its input `input`, and how many it must
/// write. Without a part, both counts are `0`.
fn optional_part(
    part: Option<(Part, usize)>,
    (name, input): (&str, &str),
    (ctes, values): &mut (&mut Vec<String>, &mut Vec<Value>),
) -> (String, String, String, usize) {
    match part {
        Some((part, expected)) => {
            ctes.push(part.cte);
            values.extend(part.values);
            (
                format!(", {name} AS ({})", part.statement),
                format!("(SELECT count(*) FROM {name})"),
                format!("(SELECT count(*) FROM {input})"),
                expected,
            )
        }
        None => (String::new(), "0".to_owned(), "0".to_owned(), 0),
    }
}

fn check_drawn(drawn: usize, expected: usize) -> Result<(), Fail> {
    if drawn == expected {
        Ok(())
    } else {
        Err(Fail::Retry("a grant lot changed during a batched spend"))
    }
}
