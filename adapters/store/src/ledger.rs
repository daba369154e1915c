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

use application::pagination::{Page, PageRequest};
use application::ports::{
    ConsumeCommand, CreditLedger, CreditTransaction, GrantCommand, LedgerEffect, Refusal, Replay,
    Reservation, ReservationStatus, ReserveCommand, StoreError,
};
use async_trait::async_trait;
use domain::{AccountId, Credits, Timestamp};

pub(crate) use self::grants::{NewGrant, clawback, grant, source_parts};
use self::group_commands::{Consumed, Reserved};
pub(crate) use self::group_commands::{LedgerCommand, LedgerJob};
pub(crate) use self::postings::read_balance;
pub(crate) use self::reservations::{
    Resolution, release as release_in, reserve as reserve_in, settle as settle_in,
};
pub(crate) use self::spend::consume as consume_in;
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
    /// A ledger rule refused it; nothing was written.
    Refused(Refusal),
}

/// The grouped paths: a lone consumption, reservation or grant handed to the group-commit
/// writer; `None` when it could not take it (the set then runs alone).
impl SeaOrmStore {
    /// The ledger job `job` builds around its reply channel, through the group-commit writer;
    /// `None` when group commit is off or the writer did not take it.
    async fn submit_grouped<T>(
        &self,
        job: impl FnOnce(tokio::sync::oneshot::Sender<Grouped<T>>) -> LedgerJob,
    ) -> Result<Option<T>, StoreError> {
        let Some(group) = &self.group else {
            return Ok(None);
        };
        let outcome = group
            .submit(|reply| LedgerCommand::new(job(reply), &self.events))
            .await;
        match outcome {
            Grouped::Done(done) => done.map(Some),
            Grouped::Alone => Ok(None),
        }
    }

    pub(crate) async fn consume_grouped(
        &self,
        command: &ConsumeCommand,
    ) -> Result<Option<Consumed>, StoreError> {
        self.submit_grouped(|reply| LedgerJob::Consume(Job::new(command.clone(), reply)))
            .await
    }

    pub(crate) async fn reserve_grouped(
        &self,
        command: &ReserveCommand,
    ) -> Result<Option<Reserved>, StoreError> {
        self.submit_grouped(|reply| LedgerJob::Reserve(Job::new(command.clone(), reply)))
            .await
    }

    pub(crate) async fn grant_grouped(
        &self,
        command: &GrantCommand,
    ) -> Result<Option<LedgerEffect>, StoreError> {
        self.submit_grouped(|reply| LedgerJob::Grant(Job::new(command.clone(), reply)))
            .await
    }

    /// The opt-in event types some enabled endpoint names (kept for `opt_in::TTL`).
    pub(crate) async fn wanted(&self) -> Result<Wanted, StoreError> {
        self.retry
            .run("opt_in_types", || async {
                Ok(self.opt_in.wanted(&self.db).await?)
            })
            .await
    }
}

#[async_trait]
impl CreditLedger for SeaOrmStore {
    async fn balance(&self, user: &AccountId) -> Result<Credits, StoreError> {
        self.retry
            .run("balance", || postings::read_balance(&self.db, user))
            .await
    }

    async fn transactions(
        &self,
        user: &AccountId,
        page: PageRequest,
    ) -> Result<Page<CreditTransaction>, StoreError> {
        // The total is the counter kept with the balance; the page is a walk down the index on
        // (user_id, created_at, id) that stops after `limit` rows.
        let count = "SELECT transaction_count AS total FROM credit_balances WHERE account_id = $1";
        let items = format!(
            "SELECT {TRANSACTION_COLUMNS} FROM credit_transactions WHERE account_id = $1 \
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

    async fn pending_reservations(&self, user: &AccountId) -> Result<Vec<Reservation>, StoreError> {
        self.retry
            .run("pending_reservations", || {
                reservations::pending(&self.db, user)
            })
            .await
    }

    async fn grant_lots(&self, user: &AccountId) -> Result<Vec<domain::GrantLot>, StoreError> {
        self.retry
            .run("grant_lots", || postings::grant_lots(&self.db, user))
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
                    let body = reservations::release(
                        &tx,
                        (user, None),
                        id,
                        now,
                        to,
                        wanted,
                        &*self.events,
                    )
                    .await;
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
}
