//! The ledger commands group commit applies: consume, reserve and grant. Each runs the same body
//! as its ungrouped path (`spend::consume`, `reservations::reserve`, `grants::grant_command`),
//! in a savepoint of the group's transaction instead of a transaction of its own
//! (`crate::group_commit`).

use application::ports::{
    ConsumeCommand, CreditTransaction, GrantCommand, LedgerEffect, Replay, Reservation,
    ReserveCommand, StoreError,
};
use sea_orm::{DatabaseConnection, DatabaseTransaction};

use super::{Spent, consume_many, grants, reservations, spend};
use crate::Encoder;
use crate::group_commit::{GroupedCommand, Job, Unlocked};
use crate::opt_in::Wanted;
use crate::retry::Fail;
use std::sync::Arc;

/// What a consume decides.
pub(crate) type Consumed = Spent<(CreditTransaction, Replay)>;
/// What a reservation decides.
pub(crate) type Reserved = Spent<(Reservation, Replay)>;

/// A ledger command waiting for its group, and how the host events it writes are rendered.
pub(crate) struct LedgerCommand {
    job: LedgerJob,
    events: Encoder,
}

impl LedgerCommand {
    /// `job`, whose events `events` renders.
    pub(crate) fn new(job: LedgerJob, events: &Encoder) -> Self {
        Self {
            job,
            events: Arc::clone(events),
        }
    }
}

/// What a [`LedgerCommand`] asks for.
pub(crate) enum LedgerJob {
    /// A lone `LedgerOp::Consume`.
    Consume(Job<ConsumeCommand, Consumed>),
    /// A lone `LedgerOp::Reserve`.
    Reserve(Job<ReserveCommand, Reserved>),
    /// A lone `LedgerOp::Grant`.
    Grant(Job<GrantCommand, LedgerEffect>),
}

impl GroupedCommand for LedgerCommand {
    type Known = consume_many::Known;

    fn user(&self) -> &str {
        match &self.job {
            LedgerJob::Consume(job) => job.command.account_id.as_str(),
            LedgerJob::Reserve(job) => job.command.account_id.as_str(),
            LedgerJob::Grant(job) => job.command.account_id.as_str(),
        }
    }

    async fn run(&mut self, tx: &DatabaseTransaction) -> bool {
        let events = &*self.events;
        match &mut self.job {
            LedgerJob::Consume(job) => {
                // Grouped only while no endpoint opted in to consumption events.
                let body = spend::consume(tx, &job.command, Wanted::NONE, events).await;
                job.settle(body)
            }
            LedgerJob::Reserve(job) => {
                let body = reservations::reserve(tx, &job.command, Wanted::NONE, events).await;
                job.settle(body)
            }
            LedgerJob::Grant(job) => {
                let body = grants::grant_command(tx, &job.command, events).await;
                job.settle(body)
            }
        }
    }

    /// A consumption, from a personal account or by a team's member (the batch counts each
    /// member's spends against their limit as the one-by-one path does).
    fn batchable(&self) -> bool {
        matches!(&self.job, LedgerJob::Consume(_))
    }

    async fn run_many(batch: &mut [Self], tx: &DatabaseTransaction) -> bool {
        let Some(events) = batch.first().map(|c| Arc::clone(&c.events)) else {
            return false;
        };
        let Some(mut jobs) = consume_jobs(batch) else {
            return false;
        };
        let commands: Vec<&ConsumeCommand> = jobs.iter().map(|job| &job.command).collect();
        match consume_many::consume_many(tx, &commands, &*events).await {
            Ok(outcomes) => settle_all(&mut jobs, outcomes),
            // The database's guard refused what the spending rule decided for this user under
            // the balance lock: an invariant broke. The batch is undone; the user's commands
            // answer the disagreement (never relabelled, never run again), the rest run alone.
            Err(Fail::Store(StoreError::SpendDisagreement {
                account,
                disagreement,
            })) => {
                for job in &mut jobs {
                    let outcome = if job.command.account_id == account {
                        let account = account.clone();
                        Fail::Store(StoreError::SpendDisagreement {
                            account,
                            disagreement,
                        })
                    } else {
                        Fail::Retry("another user's spend in the batch disagreed")
                    };
                    job.settle(Err(outcome));
                }
                false
            }
            Err(why) => {
                tracing::debug!(error = ?why, "a batch of consumptions runs alone");
                for job in &mut jobs {
                    job.settle(Err(Fail::Retry("the batch could not be decided")));
                }
                false
            }
        }
    }

    async fn run_many_unlocked(
        batch: &mut [Self],
        db: &DatabaseConnection,
        known: &mut consume_many::Known,
    ) -> Unlocked {
        let Some(mut jobs) = consume_jobs(batch) else {
            return Unlocked::NotWritten;
        };
        let commands: Vec<&ConsumeCommand> = jobs.iter().map(|job| &job.command).collect();
        match consume_many::consume_many_unlocked(db, &commands, known).await {
            Ok((outcomes, source)) => {
                settle_all(&mut jobs, outcomes);
                Unlocked::Written {
                    from_memory: source == consume_many::Source::Known,
                }
            }
            Err(why) => {
                tracing::debug!(error = ?why, "an unlocked batch of consumptions takes the locked path");
                Unlocked::NotWritten
            }
        }
    }

    fn forget(known: &mut consume_many::Known, group: &[Self]) {
        known.forget(group.iter().map(GroupedCommand::user));
    }

    fn decided(&self) -> bool {
        match &self.job {
            LedgerJob::Consume(job) => job.decided(),
            LedgerJob::Reserve(job) => job.decided(),
            LedgerJob::Grant(job) => job.decided(),
        }
    }

    fn deliver(self) {
        match self.job {
            LedgerJob::Consume(job) => job.deliver(),
            LedgerJob::Reserve(job) => job.deliver(),
            LedgerJob::Grant(job) => job.deliver(),
        }
    }

    fn run_alone(self) {
        match self.job {
            LedgerJob::Consume(job) => job.run_alone(),
            LedgerJob::Reserve(job) => job.run_alone(),
            LedgerJob::Grant(job) => job.run_alone(),
        }
    }
}

/// The batch's consume jobs, or `None` (nothing settled) if it holds anything else.
fn consume_jobs(batch: &mut [LedgerCommand]) -> Option<Vec<&mut Job<ConsumeCommand, Consumed>>> {
    batch
        .iter_mut()
        .map(|command| match &mut command.job {
            LedgerJob::Consume(job) => Some(job),
            _ => None,
        })
        .collect()
}

/// Keep each job's outcome; the batch's writes are kept.
fn settle_all(
    jobs: &mut [&mut Job<ConsumeCommand, Consumed>],
    outcomes: Vec<consume_many::Decided>,
) -> bool {
    for (job, outcome) in jobs.iter_mut().zip(outcomes) {
        job.settle(outcome);
    }
    true
}
