//! One write as the core decided it ([`ChangeSet`]), the one store method that applies it
//! ([`ChangeStore::apply`]), and typed views of the shapes the use cases write ([`Writes`]).
//!
//! A change set carries everything one write changes: the inbox row of a provider event, the
//! order and subscription compare-and-sets with the whole entity before and after, the
//! refund report and the subscription charge, an administrator's configuration write, the
//! ledger operations, the entitlements compare-and-set, the host events the core decided,
//! and the audit entry. The store applies all of it in one transaction or none of it, and
//! decides nothing: which events a write tells, what an audit entry says and which
//! entitlements a user holds were worked out before the set reached it. A ledger operation's
//! own outcome (the transaction it wrote, the balance after it) exists only inside the
//! transaction; what the host is told about it is decided by the application's pure
//! functions in [`crate::host_events`], and an audit entry that names it is built by the
//! caller's [`Audit::Of`] from the set's outcome.

use async_trait::async_trait;
use domain::{AccountId, Credits, Plan, ReservationId, Timestamp, UserId};

use super::admin::{AdminWrite, AuditAction, AuditValue, NewAudit, balance_facts};
use super::host_events::EntitlementsTold;
use super::store::{
    AdjustCommand, ChargeChange, ClawbackCommand, ConsumeCommand, CreditTransaction, GrantCommand,
    ImportReport, InboxEntry, LedgerEffect, OrderChange, PaymentEventCommand, PaymentEventOutcome,
    RefundRecord, Replay, Reservation, ReservationError, ReserveCommand, SpendError, StoreError,
    SubscriptionChange,
};
use crate::host_events::HostEvent;

/// A ledger operation within a change set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerOp {
    /// Grant credits, once per source.
    Grant(GrantCommand),
    /// Take back what is left of a grant.
    Clawback(ClawbackCommand),
    /// An administrator's signed correction, once per administrator and reference.
    Adjust {
        /// The correction.
        command: AdjustCommand,
        /// The administrator making it (their references are their own).
        admin: UserId,
    },
    /// Spend now, once per idempotency key.
    Consume(ConsumeCommand),
    /// Hold credits for a later settle or release, once per idempotency key.
    Reserve(ReserveCommand),
    /// Spend a pending reservation's actual usage and free the rest.
    Settle {
        /// The account whose credits it holds.
        account: AccountId,
        /// On a team's account, the member settling it: the one who holds it, or an owner or
        /// admin (`None` on a personal account).
        member: Option<UserId>,
        /// Which.
        id: ReservationId,
        /// The actual usage.
        actual: Credits,
        /// Which lots it draws first among lots of equal priority and expiry.
        order: domain::SpendOrder,
        /// Now.
        now: Timestamp,
    },
    /// Free a pending reservation whole.
    Release {
        /// The account whose credits it holds.
        account: AccountId,
        /// As for [`LedgerOp::Settle`].
        member: Option<UserId>,
        /// Which.
        id: ReservationId,
        /// Now.
        now: Timestamp,
    },
}

/// What one ledger operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerOutcome {
    /// A grant's, clawback's or adjustment's: the transaction written, or nothing to do.
    Effect(LedgerEffect),
    /// A consumption: the transaction, written now or by an earlier request with the key.
    Spent(CreditTransaction, Replay),
    /// A reservation held, settled or released, now or by an earlier request.
    Held(Reservation, Replay),
}

/// Builds an audit entry from what the rest of the set did (the transaction an adjustment
/// wrote, the balances around it); `None` writes no entry (nothing was done).
pub type AuditOf<'a> = dyn Fn(&Done) -> Option<NewAudit> + Send + Sync + 'a;

/// The audit entry of the administrator's action a set carries.
pub enum Audit<'a> {
    /// This entry.
    Entry(NewAudit),
    /// The entry this function builds from the set's outcome, inside its transaction.
    Of(&'a AuditOf<'a>),
}

impl Audit<'_> {
    /// The entry to write after the rest of the set did `done`; `None` for none.
    #[must_use]
    pub fn entry(&self, done: &Done) -> Option<NewAudit> {
        match self {
            Audit::Entry(entry) => Some(entry.clone()),
            Audit::Of(build) => build(done),
        }
    }
}

impl std::fmt::Debug for Audit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Audit::Entry(entry) => f.debug_tuple("Entry").field(entry).finish(),
            Audit::Of(_) => f.write_str("Of(..)"),
        }
    }
}

/// Everything one write changes, applied in one transaction or not at all, in this order:
/// inbox, order, subscription, refund report, charge, administrator's write, promo code
/// redemption, top-up, ledger, entitlements, host events, audit entry.
#[derive(Debug)]
pub struct ChangeSet<'a> {
    /// When the write happens (the time its rows are stamped with).
    pub at: Timestamp,
    /// A provider event's inbox row: when `(provider, event_id)` was seen before, the whole
    /// set is a no-op ([`Applied::Duplicate`]).
    pub inbox: Option<InboxEntry>,
    /// An order's compare-and-set on its version.
    pub order: Option<OrderChange>,
    /// A subscription created, or replaced by compare-and-set.
    pub subscription: Option<SubscriptionChange>,
    /// A provider's refund report to keep (kept before: a conflict).
    pub refund: Option<RefundRecord>,
    /// A subscription charge recorded or refunded.
    pub charge: Option<ChargeChange>,
    /// An administrator's change to the plans, API keys or plan allowances.
    pub admin: Option<AdminWrite<'a>>,
    /// A promo code's redemption: counted on its code only while the code's count is below the
    /// code's total limit as stored (else the set is [`Refusal::PromoExhausted`]), written under
    /// its ordinal and request key (either taken: [`StoreError::Conflict`]).
    pub promo: Option<super::NewRedemption>,
    /// A change of an automatic top-up or of an account's rule.
    pub top_up: Option<super::TopUpWrite>,
    /// Ledger operations, in order. One that answers from an earlier write (a replayed key, a
    /// reference used before) stops the set: nothing of it is written, and the answer is the
    /// earlier one.
    pub ledger: Vec<LedgerOp>,
    /// Entitlements kept by compare-and-set on the user's record version.
    pub entitlements: Option<EntitlementsTold>,
    /// The host events the core decided the changes above tell. A ledger operation's own
    /// events (`credits.*`) are decided from the entry it writes, with it.
    pub told: Vec<HostEvent>,
    /// The audit entry of the administrator's action.
    pub audit: Option<Audit<'a>>,
}

impl<'a> ChangeSet<'a> {
    /// A set that changes nothing yet, happening `at`.
    #[must_use]
    pub fn at(at: Timestamp) -> Self {
        Self {
            at,
            inbox: None,
            order: None,
            subscription: None,
            refund: None,
            charge: None,
            admin: None,
            promo: None,
            top_up: None,
            ledger: Vec::new(),
            entitlements: None,
            told: Vec::new(),
            audit: None,
        }
    }

    /// One ledger operation alone.
    #[must_use]
    pub fn ledger(op: LedgerOp, at: Timestamp) -> Self {
        Self {
            ledger: vec![op],
            ..Self::at(at)
        }
    }

    /// A verified provider event's changes.
    #[must_use]
    pub fn payment_event(command: &PaymentEventCommand) -> Self {
        let mut told = command.told.clone();
        told.extend(command.top_up.iter().flat_map(|c| c.told.iter().cloned()));
        let mut ledger = Vec::with_capacity(command.clawbacks.len() + 1);
        ledger.extend(command.grant.clone().map(LedgerOp::Grant));
        ledger.extend(command.bonus.clone().map(LedgerOp::Grant));
        ledger.extend(command.clawbacks.iter().cloned().map(LedgerOp::Clawback));
        Self {
            inbox: Some(command.inbox.clone()),
            order: command.order.clone(),
            subscription: command.subscription.clone(),
            refund: command.refund.clone(),
            charge: command.charge.clone(),
            ledger,
            entitlements: command.entitlements.clone(),
            told,
            audit: command.audit.clone().map(Audit::Entry),
            top_up: command.top_up.as_ref().map(|c| c.write.clone()),
            ..Self::at(command.inbox.received_at)
        }
    }

    /// Only the inbox row, its events and its audit entry: an event that changes nothing.
    #[must_use]
    pub fn recorded_event(
        entry: &InboxEntry,
        told: &[HostEvent],
        audit: Option<&NewAudit>,
    ) -> Self {
        Self {
            inbox: Some(entry.clone()),
            told: told.to_vec(),
            audit: audit.cloned().map(Audit::Entry),
            ..Self::at(entry.received_at)
        }
    }

    /// The entitlements `write` keeps and the events `told`.
    #[must_use]
    pub fn entitlements(write: EntitlementsTold) -> Self {
        let at = write.write.at;
        Self {
            entitlements: Some(write),
            ..Self::at(at)
        }
    }

    /// Whether the set is one ledger operation and nothing else: the store may group it
    /// with other such sets in one transaction.
    #[must_use]
    pub fn lone_ledger_op(&self) -> Option<&LedgerOp> {
        match self.ledger.as_slice() {
            [op] if self.inbox.is_none() && self.holds_nothing_else() => Some(op),
            _ => None,
        }
    }

    /// The inbox row, when the set is that row and nothing else (an event recorded that
    /// changes nothing): the store may write it as one statement.
    #[must_use]
    pub fn inbox_alone(&self) -> Option<&InboxEntry> {
        self.inbox
            .as_ref()
            .filter(|_| self.ledger.is_empty() && self.holds_nothing_else())
    }

    /// Whether every part but the inbox row and the ledger operations is empty.
    fn holds_nothing_else(&self) -> bool {
        let Self {
            at: _,
            inbox: _,
            ledger: _,
            order,
            subscription,
            refund,
            charge,
            admin,
            promo,
            top_up,
            entitlements,
            told,
            audit,
        } = self;
        order.is_none()
            && subscription.is_none()
            && refund.is_none()
            && charge.is_none()
            && admin.is_none()
            && promo.is_none()
            && top_up.is_none()
            && entitlements.is_none()
            && told.is_empty()
            && audit.is_none()
    }
}

/// What a set did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Its inbox row was there already: nothing changed.
    Duplicate,
    /// Everything in it was done (or, for a ledger operation answering from an earlier
    /// write, had been done before).
    Done(Done),
}

/// The outcome of a set that was done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Done {
    /// Each ledger operation's, in order (up to the one that answered from an earlier write).
    pub ledger: Vec<LedgerOutcome>,
    /// What an [`AdminWrite::ImportPlans`] created and replaced.
    pub imported: Option<ImportReport>,
}

/// Why a set was refused; nothing of it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A spend the balance does not cover.
    Insufficient {
        /// The amount asked for.
        requested: Credits,
        /// The balance.
        available: Credits,
    },
    /// An idempotency key or adjustment reference used with another request.
    KeyConflict,
    /// An increase past the largest balance.
    BalanceLimit {
        /// The balance.
        balance: Credits,
        /// The increase.
        amount: Credits,
    },
    /// No such reservation for this user.
    ReservationNotFound,
    /// The spender is not a member of the team's account.
    NotAMember,
    /// A hard limit (the member's or the account's) leaves no room for the spend.
    LimitReached(domain::LimitReached),
    /// The reservation was resolved otherwise (its status code).
    ReservationResolved(&'static str),
    /// A promo code's redemptions reached its limit before this one was counted.
    PromoExhausted,
}

/// Why [`ChangeStore::apply`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A ledger rule refused one of its operations.
    #[error("refused: {0:?}")]
    Refused(Refusal),
    /// A compare-and-set lost ([`StoreError::Conflict`]), a row it names is missing, or
    /// storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The one write of the store.
#[async_trait]
pub trait ChangeStore: Send + Sync + 'static {
    /// Apply every part of `set` in one transaction, or none of it. A set that is one ledger
    /// operation alone may be grouped with others in one transaction (group commit); its
    /// outcome is the same as alone.
    ///
    /// # Errors
    /// [`ApplyError::Refused`] when a ledger rule refuses an operation;
    /// [`StoreError::Conflict`] when a compare-and-set fails (the caller re-reads and decides
    /// again); [`StoreError::NotFound`] when an order, plan, key or reservation it changes is
    /// missing; storage failures. Nothing is written in any of these cases.
    async fn apply(&self, set: ChangeSet<'_>) -> Result<Applied, ApplyError>;
}

/// The outcome of a set of one ledger operation, or the store's answer was not what it asks.
fn lone(applied: Applied) -> Result<LedgerOutcome, StoreError> {
    match applied {
        Applied::Done(Done { mut ledger, .. }) if ledger.len() == 1 => {
            Ok(ledger.pop().expect("one outcome"))
        }
        other => Err(StoreError::Unexpected(anyhow::anyhow!(
            "a single ledger operation answered with {other:?}"
        ))),
    }
}

fn unexpected(what: &str, outcome: &LedgerOutcome) -> StoreError {
    StoreError::Unexpected(anyhow::anyhow!("{what} answered with {outcome:?}"))
}

impl From<ApplyError> for SpendError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Refused(Refusal::Insufficient {
                requested,
                available,
            }) => SpendError::Insufficient {
                requested,
                available,
            },
            ApplyError::Refused(Refusal::KeyConflict) => SpendError::IdempotencyConflict,
            ApplyError::Refused(Refusal::BalanceLimit { balance, amount }) => {
                SpendError::BalanceLimit { balance, amount }
            }
            ApplyError::Refused(Refusal::NotAMember) => SpendError::NotAMember,
            ApplyError::Refused(Refusal::LimitReached(reached)) => {
                SpendError::LimitReached(reached)
            }
            ApplyError::Refused(other) => SpendError::Store(StoreError::Unexpected(
                anyhow::anyhow!("a spend refused as {other:?}"),
            )),
            ApplyError::Store(e) => SpendError::Store(e),
        }
    }
}

impl From<ApplyError> for ReservationError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Refused(Refusal::ReservationNotFound) => ReservationError::NotFound,
            ApplyError::Refused(Refusal::ReservationResolved(code)) => {
                ReservationError::AlreadyResolved(code)
            }
            ApplyError::Refused(other) => ReservationError::Store(StoreError::Unexpected(
                anyhow::anyhow!("a reservation refused as {other:?}"),
            )),
            ApplyError::Store(e) => ReservationError::Store(e),
        }
    }
}

impl From<SpendError> for ApplyError {
    fn from(e: SpendError) -> Self {
        match e {
            SpendError::Insufficient {
                requested,
                available,
            } => ApplyError::Refused(Refusal::Insufficient {
                requested,
                available,
            }),
            SpendError::IdempotencyConflict => ApplyError::Refused(Refusal::KeyConflict),
            SpendError::BalanceLimit { balance, amount } => {
                ApplyError::Refused(Refusal::BalanceLimit { balance, amount })
            }
            SpendError::NotAMember => ApplyError::Refused(Refusal::NotAMember),
            SpendError::LimitReached(reached) => {
                ApplyError::Refused(Refusal::LimitReached(reached))
            }
            SpendError::Store(e) => ApplyError::Store(e),
        }
    }
}

impl From<ReservationError> for ApplyError {
    fn from(e: ReservationError) -> Self {
        match e {
            ReservationError::NotFound => ApplyError::Refused(Refusal::ReservationNotFound),
            ReservationError::AlreadyResolved(code) => {
                ApplyError::Refused(Refusal::ReservationResolved(code))
            }
            ReservationError::Store(e) => ApplyError::Store(e),
        }
    }
}

impl ApplyError {
    /// As a plain store error: a refusal where the caller expects none is unexpected.
    #[must_use]
    pub fn into_store_error(self) -> StoreError {
        match self {
            ApplyError::Store(e) => e,
            ApplyError::Refused(r) => {
                StoreError::Unexpected(anyhow::anyhow!("a write refused as {r:?}"))
            }
        }
    }
}

/// The audit entry of an administrator's adjustment: the balance before and after it, the
/// transaction, its note and expiry.
#[must_use]
pub fn adjustment_audit(
    tx: &CreditTransaction,
    command: &AdjustCommand,
    admin: &UserId,
) -> NewAudit {
    let after_hundredths = tx.balance_after.hundredths();
    let mut after = balance_facts(after_hundredths);
    after.insert("transactionId".into(), AuditValue::Integer(tx.id));
    after.insert(
        "amountHundredths".into(),
        AuditValue::Integer(tx.amount.hundredths()),
    );
    after.insert("note".into(), AuditValue::Text(command.note.clone()));
    after.insert(
        "expiresAt".into(),
        command
            .expires_at
            .map_or(AuditValue::Null, |at| AuditValue::Integer(at.unix_millis())),
    );
    NewAudit {
        admin_id: admin.clone(),
        action: if command.amount.is_decrease() {
            AuditAction::CreditsDebited
        } else {
            AuditAction::CreditsGranted
        },
        object_kind: "user",
        object_id: command.account_id.to_string(),
        before: Some(balance_facts(after_hundredths - tx.amount.hundredths())),
        after: Some(after),
        at: command.now,
    }
}

/// Typed views of the sets the use cases write, over [`ChangeStore::apply`]: each builds its
/// set and reads its outcome, so a caller names what it writes and gets its own result type.
#[async_trait]
pub trait Writes: ChangeStore {
    /// A verified provider event's changes (see [`ChangeSet::payment_event`]).
    ///
    /// # Errors
    /// As [`ChangeStore::apply`]; a refusal is unexpected here.
    async fn apply_payment_event(
        &self,
        command: &PaymentEventCommand,
    ) -> Result<PaymentEventOutcome, StoreError> {
        match self.apply(ChangeSet::payment_event(command)).await {
            Ok(Applied::Duplicate) => Ok(PaymentEventOutcome::Duplicate),
            Ok(Applied::Done(done)) => done
                .ledger
                .into_iter()
                .map(|outcome| match outcome {
                    LedgerOutcome::Effect(effect) => Ok(effect),
                    other => Err(unexpected("a grant or clawback", &other)),
                })
                .collect::<Result<_, _>>()
                .map(|ledger| PaymentEventOutcome::Applied { ledger }),
            Err(e) => Err(e.into_store_error()),
        }
    }

    /// Record an event that changes nothing, once, with its events and audit entry; `false`
    /// when its row was there already (nothing written).
    ///
    /// # Errors
    /// Storage failures.
    async fn record_event(
        &self,
        entry: &InboxEntry,
        told: &[HostEvent],
        audit: Option<&NewAudit>,
    ) -> Result<bool, StoreError> {
        let set = ChangeSet::recorded_event(entry, told, audit);
        match self.apply(set).await {
            Ok(applied) => Ok(applied != Applied::Duplicate),
            Err(e) => Err(e.into_store_error()),
        }
    }

    /// Move an order to `status` by compare-and-set on `expected_version`, with the events
    /// `told` the caller decided the move tells.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::Conflict`] when the order changed since it was
    /// read.
    async fn transition_order(
        &self,
        change: OrderChange,
        now: Timestamp,
        told: &[HostEvent],
    ) -> Result<(), StoreError> {
        let set = ChangeSet {
            order: Some(change),
            told: told.to_vec(),
            ..ChangeSet::at(now)
        };
        self.apply(set)
            .await
            .map(drop)
            .map_err(ApplyError::into_store_error)
    }

    /// Keep `write` and its event, by compare-and-set on the user's record version.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the record moved; storage failures.
    async fn write_entitlements(&self, told: EntitlementsTold) -> Result<(), StoreError> {
        self.apply(ChangeSet::entitlements(told))
            .await
            .map(drop)
            .map_err(ApplyError::into_store_error)
    }

    /// Spend credits once per idempotency key: decided by `domain::decide_spend` on the balance
    /// as the transaction reads it under the balance row's lock, written by a conditional
    /// decrement and a ledger insert in that transaction. The same key and request hash return
    /// the first transaction with [`Replay::Replayed`].
    ///
    /// # Errors
    /// [`SpendError::Insufficient`] (nothing written); [`SpendError::IdempotencyConflict`];
    /// [`StoreError::SpendDisagreement`] when the database's guard did not write what the rule
    /// decided (nothing written); storage failures.
    async fn consume(
        &self,
        command: &ConsumeCommand,
    ) -> Result<(CreditTransaction, Replay), SpendError> {
        let set = ChangeSet::ledger(LedgerOp::Consume(command.clone()), command.now);
        match lone(self.apply(set).await?)? {
            LedgerOutcome::Spent(tx, replay) => Ok((tx, replay)),
            other => Err(SpendError::Store(unexpected("a consumption", &other))),
        }
    }

    /// Hold credits once per idempotency key.
    ///
    /// # Errors
    /// As [`Writes::consume`].
    async fn reserve(&self, command: &ReserveCommand) -> Result<(Reservation, Replay), SpendError> {
        let set = ChangeSet::ledger(LedgerOp::Reserve(command.clone()), command.now);
        match lone(self.apply(set).await?)? {
            LedgerOutcome::Held(r, replay) => Ok((r, replay)),
            other => Err(SpendError::Store(unexpected("a reservation", &other))),
        }
    }

    /// Settle a pending reservation with the actual usage (again with the same usage: the
    /// first outcome).
    ///
    /// # Errors
    /// [`ReservationError::NotFound`]; [`ReservationError::AlreadyResolved`].
    async fn settle(
        &self,
        who: (&AccountId, Option<&UserId>),
        id: &ReservationId,
        actual: Credits,
        now: Timestamp,
    ) -> Result<(Reservation, Replay), ReservationError> {
        self.settle_in(domain::SpendOrder::default(), who, id, actual, now)
            .await
    }

    /// [`Writes::settle`], drawing lots in `order`.
    ///
    /// # Errors
    /// As [`Writes::settle`].
    async fn settle_in(
        &self,
        order: domain::SpendOrder,
        (account, member): (&AccountId, Option<&UserId>),
        id: &ReservationId,
        actual: Credits,
        now: Timestamp,
    ) -> Result<(Reservation, Replay), ReservationError> {
        let op = LedgerOp::Settle {
            account: account.clone(),
            member: member.cloned(),
            id: id.clone(),
            actual,
            order,
            now,
        };
        match lone(self.apply(ChangeSet::ledger(op, now)).await?)? {
            LedgerOutcome::Held(r, replay) => Ok((r, replay)),
            other => Err(ReservationError::Store(unexpected("a settle", &other))),
        }
    }

    /// Release a pending reservation unused (again: the first outcome).
    ///
    /// # Errors
    /// As [`Writes::settle`].
    async fn release(
        &self,
        (account, member): (&AccountId, Option<&UserId>),
        id: &ReservationId,
        now: Timestamp,
    ) -> Result<(Reservation, Replay), ReservationError> {
        let op = LedgerOp::Release {
            account: account.clone(),
            member: member.cloned(),
            id: id.clone(),
            now,
        };
        match lone(self.apply(ChangeSet::ledger(op, now)).await?)? {
            LedgerOutcome::Held(r, replay) => Ok((r, replay)),
            other => Err(ReservationError::Store(unexpected("a release", &other))),
        }
    }

    /// Grant credits once per source.
    ///
    /// # Errors
    /// Storage failures.
    async fn grant(&self, command: &GrantCommand) -> Result<LedgerEffect, StoreError> {
        let set = ChangeSet::ledger(LedgerOp::Grant(command.clone()), command.now);
        let applied = self
            .apply(set)
            .await
            .map_err(ApplyError::into_store_error)?;
        match lone(applied)? {
            LedgerOutcome::Effect(effect) => Ok(effect),
            other => Err(unexpected("a grant", &other)),
        }
    }

    /// An administrator's correction, once per administrator and reference, audited with the
    /// balances around it in the same transaction (a reference used before writes nothing).
    ///
    /// # Errors
    /// [`SpendError::Insufficient`] for a decrease past the balance;
    /// [`SpendError::IdempotencyConflict`] for a reference used with another correction;
    /// [`SpendError::BalanceLimit`]; storage failures.
    async fn adjust(
        &self,
        command: &AdjustCommand,
        admin: &UserId,
    ) -> Result<LedgerEffect, SpendError> {
        let audit = |done: &Done| match done.ledger.first() {
            Some(LedgerOutcome::Effect(LedgerEffect::Written(tx))) => {
                Some(adjustment_audit(tx, command, admin))
            }
            _ => None,
        };
        let op = LedgerOp::Adjust {
            command: command.clone(),
            admin: admin.clone(),
        };
        let set = ChangeSet {
            audit: Some(Audit::Of(&audit)),
            ..ChangeSet::ledger(op, command.now)
        };
        let applied = self.apply(set).await?;
        match applied {
            Applied::Done(Done { ledger, .. }) => match ledger.as_slice() {
                [LedgerOutcome::Effect(effect)] => Ok(effect.clone()),
                _ => Err(SpendError::Store(StoreError::Unexpected(anyhow::anyhow!(
                    "an adjustment answered with {ledger:?}"
                )))),
            },
            Applied::Duplicate => Err(SpendError::Store(StoreError::Unexpected(anyhow::anyhow!(
                "an adjustment answered as a duplicate event"
            )))),
        }
    }

    /// An administrator's change to the plans, API keys or allowances, with its audit entry.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when what it changes is missing; storage failures.
    async fn write_admin(&self, write: AdminWrite<'_>, entry: &NewAudit) -> Result<(), StoreError> {
        let set = ChangeSet {
            admin: Some(write),
            audit: Some(Audit::Entry(entry.clone())),
            ..ChangeSet::at(entry.at)
        };
        self.apply(set)
            .await
            .map(drop)
            .map_err(ApplyError::into_store_error)
    }

    /// Insert or replace `plans` (stored listings kept), with the administrator's audit entry.
    ///
    /// # Errors
    /// Storage failures; nothing is written on error.
    async fn import_plans(
        &self,
        plans: &[Plan],
        entry: &NewAudit,
    ) -> Result<ImportReport, StoreError> {
        let set = ChangeSet {
            admin: Some(AdminWrite::ImportPlans(plans)),
            audit: Some(Audit::Entry(entry.clone())),
            ..ChangeSet::at(entry.at)
        };
        match self.apply(set).await {
            Ok(Applied::Done(Done {
                imported: Some(report),
                ..
            })) => Ok(report),
            Ok(other) => Err(StoreError::Unexpected(anyhow::anyhow!(
                "an import answered with {other:?}"
            ))),
            Err(e) => Err(e.into_store_error()),
        }
    }
}

impl<T: ChangeStore + ?Sized> Writes for T {}
