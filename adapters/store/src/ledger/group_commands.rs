//! The ledger commands group commit applies: consume, reserve and grant. Each runs the same body
//! as its ungrouped path (`spend::consume`, `reservations::reserve`, `grants::grant_command`),
//! in a savepoint of the group's transaction instead of a transaction of its own
//! (`crate::group_commit`).

use application::ports::{
    ConsumeCommand, CreditTransaction, GrantCommand, LedgerEffect, Replay, Reservation,
    ReserveCommand,
};
use sea_orm::{DatabaseConnection, DatabaseTransaction};

use super::{Spent, consume_many, grants, reservations, spend};
use crate::group_commit::{GroupedCommand, Job, Unlocked};
use crate::opt_in::Wanted;
use crate::retry::Fail;

/// What a consume decides.
pub(crate) type Consumed = Spent<(CreditTransaction, Replay)>;
/// What a reservation decides.
pub(crate) type Reserved = Spent<(Reservation, Replay)>;

/// A ledger command waiting for its group.
pub(crate) enum LedgerCommand {
    /// `CreditLedger::consume`.
    Consume(Job<ConsumeCommand, Consumed>),
    /// `CreditLedger::reserve`.
    Reserve(Job<ReserveCommand, Reserved>),
    /// `CreditLedger::grant`.
    Grant(Job<GrantCommand, LedgerEffect>),
}

impl GroupedCommand for LedgerCommand {
    type Known = consume_many::Known;

    fn user(&self) -> &str {
        match self {
            LedgerCommand::Consume(job) => job.command.user_id.as_str(),
            LedgerCommand::Reserve(job) => job.command.user_id.as_str(),
            LedgerCommand::Grant(job) => job.command.user_id.as_str(),
        }
    }

    async fn run(&mut self, tx: &DatabaseTransaction) -> bool {
        match self {
            LedgerCommand::Consume(job) => {
                // Grouped only while no endpoint opted in to consumption events.
                let body = spend::consume(tx, &job.command, Wanted::NONE).await;
                job.settle(body)
            }
            LedgerCommand::Reserve(job) => {
                let body = reservations::reserve(tx, &job.command, Wanted::NONE).await;
                job.settle(body)
            }
            LedgerCommand::Grant(job) => {
                let body = grants::grant_command(tx, &job.command).await;
                job.settle(body)
            }
        }
    }

    fn batchable(&self) -> bool {
        matches!(self, LedgerCommand::Consume(_))
    }

    async fn run_many(batch: &mut [Self], tx: &DatabaseTransaction) -> bool {
        let Some(mut jobs) = consume_jobs(batch) else {
            return false;
        };
        let commands: Vec<&ConsumeCommand> = jobs.iter().map(|job| &job.command).collect();
        match consume_many::consume_many(tx, &commands).await {
            Ok(outcomes) => settle_all(&mut jobs, outcomes),
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
        match self {
            LedgerCommand::Consume(job) => job.decided(),
            LedgerCommand::Reserve(job) => job.decided(),
            LedgerCommand::Grant(job) => job.decided(),
        }
    }

    fn deliver(self) {
        match self {
            LedgerCommand::Consume(job) => job.deliver(),
            LedgerCommand::Reserve(job) => job.deliver(),
            LedgerCommand::Grant(job) => job.deliver(),
        }
    }

    fn run_alone(self) {
        match self {
            LedgerCommand::Consume(job) => job.run_alone(),
            LedgerCommand::Reserve(job) => job.run_alone(),
            LedgerCommand::Grant(job) => job.run_alone(),
        }
    }
}

/// The batch's consume jobs, or `None` (nothing settled) if it holds anything else.
fn consume_jobs(batch: &mut [LedgerCommand]) -> Option<Vec<&mut Job<ConsumeCommand, Consumed>>> {
    batch
        .iter_mut()
        .map(|command| match command {
            LedgerCommand::Consume(job) => Some(job),
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
