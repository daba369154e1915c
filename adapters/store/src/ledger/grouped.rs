//! The ledger commands group commit applies: consume, reserve and grant. Each runs the same body
//! as its ungrouped path (`spend::consume`, `reservations::reserve`, `grants::grant_command`),
//! in a savepoint of the group's transaction instead of a transaction of its own
//! (`crate::group_commit`).

use application::ports::{
    ConsumeCommand, CreditTransaction, GrantCommand, LedgerEffect, Replay, Reservation,
    ReserveCommand,
};
use sea_orm::DatabaseTransaction;

use super::{Spent, batch, grants, reservations, spend};
use crate::group_commit::{GroupedCommand, Job};
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
                let body = spend::consume(tx, &job.command).await;
                job.settle(body)
            }
            LedgerCommand::Reserve(job) => {
                let body = reservations::reserve(tx, &job.command).await;
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

    async fn run_batch(batch: &mut [Self], tx: &DatabaseTransaction) -> bool {
        let size = batch.len();
        let mut jobs: Vec<&mut Job<ConsumeCommand, Consumed>> = batch
            .iter_mut()
            .filter_map(|command| match command {
                LedgerCommand::Consume(job) => Some(job),
                _ => None,
            })
            .collect();
        let commands: Vec<&ConsumeCommand> = jobs.iter().map(|job| &job.command).collect();
        let decided = if commands.len() == size {
            batch::consume_many(tx, &commands).await
        } else {
            Err(Fail::Retry("only consumptions are batched"))
        };
        match decided {
            Ok(outcomes) => {
                for (job, outcome) in jobs.iter_mut().zip(outcomes) {
                    job.settle(outcome);
                }
                true
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

    fn deliver(self) -> bool {
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
