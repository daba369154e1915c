//! The credit ledger: balances, the append-only transaction ledger, grant lots and reservations.
//!
//! How the invariants of CORRECTNESS.md hold here:
//! - A balance never goes below zero: one spend rule decides every decrease, the domain's
//!   `decide_spend` (or `post`, for a settle's overrun, a clawback, an expiry) on the balance read
//!   under the balance row's lock, before anything is written; the write is still one conditional
//!   statement (`UPDATE credit_balances SET balance = balance - $n WHERE user_id = $u AND
//!   balance >= $n RETURNING balance`) and the balance it returns must be the one decided, else
//!   `StoreError::SpendDisagreement` (see `postings`). Every increase is one upsert; the column
//!   has `CHECK (balance_hundredths >= 0)`.
//! - The ledger explains the balance: the balance change and the transaction insert (which
//!   records the balance after it) are in one transaction, and the same statement counts the
//!   transaction in `credit_balances.transaction_count` (the `total` of a page).
//! - One payment, one grant: `UNIQUE (source_kind, source_key)` on lots.
//! - One request, one effect: keyed consumptions and adjustments are UNIQUE per user, kind and
//!   key; reservations per user and key. A replay returns the first outcome.
//!
//! Every write transaction starts with `BEGIN IMMEDIATE` on SQLite and follows one lock order on
//! PostgreSQL (see `postings`).
//!
//! With group commit on, `consume`, `reserve` and `grant` go through the store's writer
//! (`crate::group_commit`: one transaction for many callers' commands), which runs the
//! commands of `group_commands` (the same bodies, each in a savepoint of the shared
//! transaction), except that a run of consumptions is decided and written as one set of
//! statements (`consume_many`); whatever a group cannot decide runs alone here, as with group
//! commit off. One word per idea: a *group* is many callers' commands in one transaction;
//! *consume many* is many consumptions in one set of statements.

mod consume_many;
mod grants;
mod group_commands;
mod postings;
mod reservations;
mod spend;

use application::host_events::HostEventKind;
use application::pagination::{Page, PageRequest};
use application::ports::{
    AdjustCommand, ConsumeCommand, CreditLedger, CreditTransaction, GrantCommand, LedgerEffect,
    Replay, Reservation, ReservationError, ReservationStatus, ReserveCommand, SpendError,
    StoreError,
};
use async_trait::async_trait;
use domain::{Credits, ReservationId, Timestamp, UserId};

pub(crate) use self::grants::{NewGrant, clawback, grant, source_parts};
use self::group_commands::{Consumed, Reserved};
pub(crate) use self::group_commands::{LedgerCommand, LedgerJob};
use self::reservations::Resolution;
pub(crate) use self::spend::{adjust as adjust_in, adjust_hash};
use crate::SeaOrmStore;
use crate::group_commit::{Grouped, Job};
use crate::opt_in::Wanted;
use crate::orders::page_values;
use crate::rows::{TRANSACTION_COLUMNS, TransactionRow};
use crate::sql;

/// What a spend decided inside its transaction.
pub(crate) enum Spent<T> {
    /// Done now or earlier.
    Done(T),
    /// The balance does not cover it; nothing was written.
    Insufficient {
        /// The amount asked for.
        requested: Credits,
        /// The balance.
        available: Credits,
    },
    /// The key was used with another request.
    KeyConflict,
    /// An increase would take the balance past the largest one; nothing was written.
    BalanceLimit {
        /// The balance.
        balance: Credits,
        /// The increase refused.
        amount: Credits,
    },
}

impl<T> Spent<T> {
    pub(crate) fn into_result(self) -> Result<T, SpendError> {
        match self {
            Spent::Done(value) => Ok(value),
            Spent::Insufficient {
                requested,
                available,
            } => Err(SpendError::Insufficient {
                requested,
                available,
            }),
            Spent::KeyConflict => Err(SpendError::IdempotencyConflict),
            Spent::BalanceLimit { balance, amount } => {
                Err(SpendError::BalanceLimit { balance, amount })
            }
        }
    }
}

impl Resolution {
    fn into_result(self) -> Result<(Reservation, Replay), ReservationError> {
        match self {
            Resolution::Done(r, replay) => Ok((r, replay)),
            Resolution::NotFound => Err(ReservationError::NotFound),
            Resolution::AlreadyResolved(code) => Err(ReservationError::AlreadyResolved(code)),
        }
    }
}

/// The ungrouped paths of the grouped commands: one transaction each, under the retry policy.
impl SeaOrmStore {
    async fn consume_alone(
        &self,
        command: &ConsumeCommand,
        wanted: Wanted,
    ) -> Result<Consumed, StoreError> {
        self.retry
            .run("consume", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = spend::consume(&tx, command, wanted, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn reserve_alone(
        &self,
        command: &ReserveCommand,
        wanted: Wanted,
    ) -> Result<Reserved, StoreError> {
        self.retry
            .run("reserve", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = reservations::reserve(&tx, command, wanted, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await
    }

    /// The opt-in event types some enabled endpoint names (kept for `opt_in::TTL`).
    async fn wanted(&self) -> Result<Wanted, StoreError> {
        self.retry
            .run("opt_in_types", || async {
                Ok(self.opt_in.wanted(&self.db).await?)
            })
            .await
    }

    async fn grant_alone(&self, command: &GrantCommand) -> Result<LedgerEffect, StoreError> {
        self.retry
            .run("grant", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = grants::grant_command(&tx, command, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await
    }
}

#[async_trait]
impl CreditLedger for SeaOrmStore {
    async fn balance(&self, user: &UserId) -> Result<Credits, StoreError> {
        self.retry
            .run("balance", || postings::read_balance(&self.db, user))
            .await
    }

    async fn transactions(
        &self,
        user: &UserId,
        page: PageRequest,
    ) -> Result<Page<CreditTransaction>, StoreError> {
        // The total is the counter kept with the balance; the page is a walk down the index on
        // (user_id, created_at, id) that stops after `limit` rows.
        let count = "SELECT transaction_count AS total FROM credit_balances WHERE user_id = $1";
        let items = format!(
            "SELECT {TRANSACTION_COLUMNS} FROM credit_transactions WHERE user_id = $1 \
             ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
        );
        let (total, rows) = self
            .retry
            .run("transactions", || {
                sql::page::<TransactionRow>(
                    &self.db,
                    count,
                    vec![user.as_str().into()],
                    &items,
                    page_values(user, page),
                )
            })
            .await?;
        let items = rows
            .into_iter()
            .map(TransactionRow::into_domain)
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items,
            request: page,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn consume(
        &self,
        command: &ConsumeCommand,
    ) -> Result<(CreditTransaction, Replay), SpendError> {
        // An endpoint that opted in to `credits.consumed` gets it in the spend's own
        // transaction, which the grouped, batched path has not got: such spends run alone.
        let wanted = self.wanted().await?;
        if let Some(group) = &self.group
            && !wanted.wants(HostEventKind::CreditsConsumed)
        {
            let outcome = group
                .submit(|reply| {
                    LedgerCommand::new(
                        LedgerJob::Consume(Job::new(command.clone(), reply)),
                        &self.events,
                    )
                })
                .await;
            if let Grouped::Done(spent) = outcome {
                return spent?.into_result();
            }
        }
        self.consume_alone(command, wanted).await?.into_result()
    }

    async fn reserve(&self, command: &ReserveCommand) -> Result<(Reservation, Replay), SpendError> {
        let wanted = self.wanted().await?;
        if let Some(group) = &self.group
            && !wanted.wants(HostEventKind::CreditsReserved)
        {
            let outcome = group
                .submit(|reply| {
                    LedgerCommand::new(
                        LedgerJob::Reserve(Job::new(command.clone(), reply)),
                        &self.events,
                    )
                })
                .await;
            if let Grouped::Done(spent) = outcome {
                return spent?.into_result();
            }
        }
        self.reserve_alone(command, wanted).await?.into_result()
    }

    async fn settle(
        &self,
        user: &UserId,
        id: &ReservationId,
        actual: Credits,
        now: Timestamp,
    ) -> Result<(Reservation, Replay), ReservationError> {
        let wanted = self.wanted().await?;
        let resolution = self
            .retry
            .run("settle", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body =
                    reservations::settle(&tx, user, id, actual, now, wanted, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await?;
        resolution.into_result()
    }

    async fn release(
        &self,
        user: &UserId,
        id: &ReservationId,
        now: Timestamp,
    ) -> Result<(Reservation, Replay), ReservationError> {
        let wanted = self.wanted().await?;
        let resolution = self
            .retry
            .run("release", || async {
                let (_turn, tx) = self.begin_write().await?;
                let to = ReservationStatus::Released;
                let body =
                    reservations::release(&tx, user, id, now, to, wanted, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await?;
        resolution.into_result()
    }

    async fn pending_reservations(&self, user: &UserId) -> Result<Vec<Reservation>, StoreError> {
        self.retry
            .run("pending_reservations", || {
                reservations::pending(&self.db, user)
            })
            .await
    }

    async fn expire_reservations(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError> {
        let due = self
            .retry
            .run("due_reservations", || {
                reservations::due(&self.db, now, limit)
            })
            .await?;
        let mut expired = 0;
        let wanted = if due.is_empty() {
            Wanted::NONE
        } else {
            self.wanted().await?
        };
        for (user, id) in &due {
            let resolution = self
                .retry
                .run("expire_reservation", || async {
                    let (_turn, tx) = self.begin_write().await?;
                    let to = ReservationStatus::Expired;
                    let body =
                        reservations::release(&tx, user, id, now, to, wanted, &*self.events).await;
                    sql::finish(tx, body).await
                })
                .await?;
            // Another instance may have settled, released or expired it meanwhile.
            if matches!(resolution, Resolution::Done(_, Replay::Fresh)) {
                expired += 1;
            }
        }
        Ok(expired)
    }

    async fn grant(&self, command: &GrantCommand) -> Result<LedgerEffect, StoreError> {
        if let Some(group) = &self.group {
            let outcome = group
                .submit(|reply| {
                    LedgerCommand::new(
                        LedgerJob::Grant(Job::new(command.clone(), reply)),
                        &self.events,
                    )
                })
                .await;
            if let Grouped::Done(effect) = outcome {
                return effect;
            }
        }
        self.grant_alone(command).await
    }

    async fn expire_grants(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError> {
        let due = self
            .retry
            .run("due_grants", || grants::due_lots(&self.db, now, limit))
            .await?;
        let mut expired = 0;
        for (id, user) in &due {
            let done = self
                .retry
                .run("expire_grant", || async {
                    let (_turn, tx) = self.begin_write().await?;
                    let body = grants::expire_lot(&tx, *id, user, now, &*self.events).await;
                    sql::finish(tx, body).await
                })
                .await?;
            expired += u32::from(done);
        }
        Ok(expired)
    }

    async fn adjust(&self, command: &AdjustCommand) -> Result<LedgerEffect, SpendError> {
        let spent = self
            .retry
            .run("adjust", || async {
                let (_turn, tx) = self.begin_write().await?;
                // `adjust` tells an adjustment written now to the host in this transaction.
                let body = spend::adjust(&tx, command, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await?;
        spent.into_result()
    }
}
