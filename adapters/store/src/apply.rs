//! [`ChangeStore::apply`]: the one write of the store. A set is executed as the core decided
//! it, part by part in one transaction; the store decides nothing about what it means.
//!
//! Strategies, chosen by the set's shape and invisible in its outcome:
//! - one consumption, reservation or grant alone goes to the group-commit writer when it is
//!   on and another such command is in flight (`crate::group_commit`: many callers' operations
//!   in one transaction, a run of consumptions decided and written as one set of statements),
//!   else runs alone at once;
//! - an inbox row alone is one statement;
//! - anything else is one write transaction under the retry policy.

use application::host_events::{self, HostEventKind};
use application::ports::{
    AdminWrite, Applied, ApplyError, ChangeSet, ChangeStore, Done, LedgerEffect, LedgerOp,
    LedgerOutcome, Refusal, ReservationStatus, StoreError,
};
use async_trait::async_trait;
use sea_orm::DatabaseTransaction;

use crate::events::{apply_order, apply_subscription, conflict, insert_inbox};
use crate::group_commit::Committer;
use crate::ledger::{self, NewGrant, Resolution, Spent};
use crate::opt_in::Wanted;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::sql::{self, End};
use crate::{Enc, SeaOrmStore, admin, entitlements_told, refunds};

/// What one ledger operation did inside a set's transaction.
enum Step {
    /// Done now: the set goes on.
    Done(LedgerOutcome),
    /// Answered from an earlier write (a replayed key): the set stops and writes nothing.
    Earlier(LedgerOutcome),
    /// Refused by a ledger rule: the set writes nothing.
    Refused(Refusal),
}

impl<T> Spent<T> {
    /// As a step of a set: `earlier` when the operation rolled back with an answer.
    fn step(self, earlier: bool, outcome: impl FnOnce(T) -> LedgerOutcome) -> Step {
        match self {
            Spent::Done(value) if earlier => Step::Earlier(outcome(value)),
            Spent::Done(value) => Step::Done(outcome(value)),
            Spent::Refused(refusal) => Step::Refused(refusal),
        }
    }
}

impl Resolution {
    fn step(self, earlier: bool) -> Step {
        match self {
            Resolution::Done(r, replay) if earlier => Step::Earlier(LedgerOutcome::Held(r, replay)),
            Resolution::Done(r, replay) => Step::Done(LedgerOutcome::Held(r, replay)),
            Resolution::NotFound => Step::Refused(Refusal::ReservationNotFound),
            Resolution::AlreadyResolved(code) => Step::Refused(Refusal::ReservationResolved(code)),
        }
    }
}

/// An operation's end as a step.
fn ended<T>(end: End<T>, step: impl FnOnce(T, bool) -> Step) -> Step {
    match end {
        End::Commit(value) => step(value, false),
        End::Rollback(value) => step(value, true),
    }
}

/// One ledger operation inside `tx`; a grant writes the events collected so far in `outbox`
/// with its lot, a clawback's are added to it.
async fn ledger_op(
    tx: &DatabaseTransaction,
    op: &LedgerOp,
    outbox: &mut Outbox,
    wanted: Wanted,
    events: &Enc,
) -> Result<Step, Fail> {
    Ok(match op {
        LedgerOp::Grant(c) => {
            let effect = ledger::grant(tx, &NewGrant::of(c), outbox).await?;
            Step::Done(LedgerOutcome::Effect(effect))
        }
        LedgerOp::Clawback(c) => {
            let mut crossings = Outbox::default();
            let effect = ledger::clawback(tx, c, &mut crossings).await?;
            if let LedgerEffect::Written(t) = &effect {
                outbox.extend(host_events::credits_changed(t));
            }
            outbox.extend(crossings);
            Step::Done(LedgerOutcome::Effect(effect))
        }
        LedgerOp::Adjust { command, admin } => {
            let end = admin::adjust_keyed(tx, command, admin, events).await?;
            ended(end, |spent, earlier| {
                spent.step(earlier, LedgerOutcome::Effect)
            })
        }
        LedgerOp::Consume(c) => {
            let end = ledger::consume_in(tx, c, wanted, events).await?;
            ended(end, |spent, earlier| {
                spent.step(earlier, |(t, replay)| LedgerOutcome::Spent(t, replay))
            })
        }
        LedgerOp::Reserve(c) => {
            let end = ledger::reserve_in(tx, c, wanted, events).await?;
            ended(end, |spent, earlier| {
                spent.step(earlier, |(r, replay)| LedgerOutcome::Held(r, replay))
            })
        }
        LedgerOp::Settle {
            account,
            member,
            id,
            actual,
            order,
            now,
        } => {
            let by = (account, member.as_ref());
            let settled = (*actual, *order);
            let end = ledger::settle_in(tx, by, id, settled, *now, wanted, events).await?;
            ended(end, Resolution::step)
        }
        LedgerOp::Release {
            account,
            member,
            id,
            now,
        } => {
            let to = ReservationStatus::Released;
            let by = (account, member.as_ref());
            let end = ledger::release_in(tx, by, id, *now, to, wanted, events).await?;
            ended(end, Resolution::step)
        }
    })
}

/// Every part of `set` inside `tx`, in the order [`ChangeSet`] names.
async fn execute(
    tx: &DatabaseTransaction,
    set: &ChangeSet<'_>,
    wanted: Wanted,
    events: &Enc,
) -> Result<End<Result<Applied, Refusal>>, Fail> {
    // The inbox row first: a duplicate delivery stops here (PostgreSQL makes a concurrent
    // duplicate wait for the first one's commit, then do nothing).
    if let Some(entry) = &set.inbox
        && !insert_inbox(tx, entry).await?
    {
        return Ok(End::Rollback(Ok(Applied::Duplicate)));
    }
    let now = set.at;
    if let Some(change) = &set.order {
        apply_order(tx, change, now).await?;
    }
    if let Some(change) = &set.subscription {
        apply_subscription(tx, change, now).await?;
    }
    if let Some(refund) = &set.refund
        && !refunds::keep(tx, refund).await?
    {
        return Err(conflict("the refund report was kept before"));
    }
    if let Some(change) = &set.charge {
        refunds::apply_charge(tx, change).await?;
    }
    let mut done = Done::default();
    if let Some(write) = set.admin {
        match admin::write(tx, write, now).await? {
            End::Commit(imported) => done.imported = imported,
            End::Rollback(_) => return Ok(End::Rollback(Ok(Applied::Done(done)))),
        }
    }
    if let Some(new) = &set.promo
        && !crate::promo::redeem(tx, new).await?
    {
        return Ok(End::Rollback(Err(Refusal::PromoExhausted)));
    }
    if let Some(write) = &set.top_up {
        crate::top_ups::write(tx, write, now).await?;
    }
    let mut outbox = Outbox::default();
    outbox.extend(set.told.iter().cloned());
    for op in &set.ledger {
        match ledger_op(tx, op, &mut outbox, wanted, events).await? {
            Step::Done(outcome) => done.ledger.push(outcome),
            Step::Earlier(outcome) => {
                done.ledger.push(outcome);
                return Ok(End::Rollback(Ok(Applied::Done(done))));
            }
            Step::Refused(refusal) => return Ok(End::Rollback(Err(refusal))),
        }
    }
    if let Some(told) = &set.entitlements {
        entitlements_told::write(tx, &told.write).await?;
        outbox.extend(told.events.iter().cloned());
    }
    outbox.write(tx, events).await?;
    if let Some(entry) = set.audit.as_ref().and_then(|audit| audit.entry(&done)) {
        admin::insert_audit(tx, &entry).await?;
    }
    Ok(End::Commit(Ok(Applied::Done(done))))
}

/// Whether a set spends, holds or frees credits (and so may tell an opt-in event).
fn tells_opt_in(set: &ChangeSet<'_>) -> bool {
    set.ledger.iter().any(|op| {
        matches!(
            op,
            LedgerOp::Consume(_)
                | LedgerOp::Reserve(_)
                | LedgerOp::Settle { .. }
                | LedgerOp::Release { .. }
        )
    })
}

impl SeaOrmStore {
    /// A lone consumption, reservation or grant through the group-commit writer when it may
    /// take it; `None` when it runs as any other set.
    async fn grouped(&self, op: &LedgerOp) -> Result<Option<Step>, StoreError> {
        Ok(match op {
            LedgerOp::Consume(c) => {
                let wanted = self.wanted().await?;
                if wanted.wants(HostEventKind::CreditsConsumed) {
                    return Ok(None);
                }
                self.consume_grouped(c)
                    .await?
                    .map(|spent| spent.step(false, |(t, r)| LedgerOutcome::Spent(t, r)))
            }
            LedgerOp::Reserve(c) => {
                let wanted = self.wanted().await?;
                if wanted.wants(HostEventKind::CreditsReserved) {
                    return Ok(None);
                }
                self.reserve_grouped(c)
                    .await?
                    .map(|spent| spent.step(false, |(r, replay)| LedgerOutcome::Held(r, replay)))
            }
            LedgerOp::Grant(c) => self
                .grant_grouped(c)
                .await?
                .map(|effect| Step::Done(LedgerOutcome::Effect(effect))),
            _ => None,
        })
    }
}

#[async_trait]
impl ChangeStore for SeaOrmStore {
    async fn apply(&self, set: ChangeSet<'_>) -> Result<Applied, ApplyError> {
        // A lone ledger op is admitted among the grouped commands in flight: alone, it is
        // written at once on the ordinary path below (the flight held until it is); with
        // company, it goes to the writer.
        let lone = set.lone_ledger_op();
        let flight = lone.and(self.group.as_ref()).map(Committer::admit);
        if let Some(op) = lone
            && flight.as_ref().is_some_and(|f| !f.direct())
            && let Some(step) = self.grouped(op).await?
        {
            return match step {
                Step::Done(outcome) | Step::Earlier(outcome) => Ok(Applied::Done(Done {
                    ledger: vec![outcome],
                    imported: None,
                })),
                Step::Refused(refusal) => Err(ApplyError::Refused(refusal)),
            };
        }
        if let Some(entry) = set.inbox_alone() {
            let fresh = self
                .retry
                .run("record_event", || async {
                    Ok(insert_inbox(&self.db, entry).await?)
                })
                .await?;
            return Ok(if fresh {
                Applied::Done(Done::default())
            } else {
                Applied::Duplicate
            });
        }
        let wanted = if tells_opt_in(&set) {
            self.wanted().await?
        } else {
            Wanted::NONE
        };
        let applied = self
            .retry
            .run("apply", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = execute(&tx, &set, wanted, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await;
        drop(flight);
        if matches!(set.admin, Some(AdminWrite::RevokeApiKey(_))) {
            // Forget cached keys whatever the outcome: a failed commit may still have happened.
            self.keys.clear();
        }
        applied?.map_err(ApplyError::Refused)
    }
}
