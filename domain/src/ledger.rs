//! The credit ledger: append-only transactions, pure rules for applying them, grant lots and the
//! spend order.
//!
//! Truth is the balance and the ledger: every transaction records its signed amount and the
//! balance after it, and the balance equals the sum of the amounts. Reservations are two-phase
//! (TigerBeetle's pending/post/void): a hold lowers the balance at once; settling returns the
//! unused part (or takes the overrun, capped at what is available); releasing returns all of it.
//!
//! Grant lots attribute credits to the grant they came from, so that expiry and refund clawback
//! can take back exactly the unspent part of one grant. Spends draw lots down soonest expiry
//! first, then oldest first. Holds do not draw lots down (only what is finally charged does), so
//! `sum(lot remaining) = balance + outstanding holds`; expiry and clawback therefore take at most
//! the balance, and what they cannot take is recorded as a shortfall.

use std::collections::BTreeMap;
use std::fmt;

use crate::credits::{CreditDelta, Credits, CreditsError};
use crate::time::Timestamp;

/// The kinds of credit transaction, each with a stable type code used to localise its
/// description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TransactionKind {
    /// Credits bought with a credits plan.
    PurchaseGrant,
    /// Credits granted for a paid subscription period.
    SubscriptionGrant,
    /// Credits spent by usage.
    Consumption,
    /// Credits held for work whose cost is known afterwards.
    ReservationHold,
    /// A hold settled with the actual cost: the unused part returned, or the overrun taken.
    ReservationSettle,
    /// A hold released unused, or expired.
    ReservationRelease,
    /// Unspent credits of a refunded purchase taken back.
    RefundClawback,
    /// A correction by an administrator.
    AdminAdjustment,
    /// Unspent credits of a grant that reached its expiry.
    Expiry,
}

/// Which signs a kind's amounts may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sign {
    Increase,
    Decrease,
    Either,
}

impl TransactionKind {
    /// Every kind.
    pub const ALL: [TransactionKind; 9] = [
        TransactionKind::PurchaseGrant,
        TransactionKind::SubscriptionGrant,
        TransactionKind::Consumption,
        TransactionKind::ReservationHold,
        TransactionKind::ReservationSettle,
        TransactionKind::ReservationRelease,
        TransactionKind::RefundClawback,
        TransactionKind::AdminAdjustment,
        TransactionKind::Expiry,
    ];

    /// The stable type code (storage, API, and the key of the localised description).
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            TransactionKind::PurchaseGrant => "purchase_grant",
            TransactionKind::SubscriptionGrant => "subscription_grant",
            TransactionKind::Consumption => "consumption",
            TransactionKind::ReservationHold => "reservation_hold",
            TransactionKind::ReservationSettle => "reservation_settle",
            TransactionKind::ReservationRelease => "reservation_release",
            TransactionKind::RefundClawback => "refund_clawback",
            TransactionKind::AdminAdjustment => "admin_adjustment",
            TransactionKind::Expiry => "expiry",
        }
    }

    /// Parse a type code.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        TransactionKind::ALL.into_iter().find(|k| k.code() == code)
    }

    const fn sign(self) -> Sign {
        match self {
            TransactionKind::PurchaseGrant
            | TransactionKind::SubscriptionGrant
            | TransactionKind::ReservationRelease => Sign::Increase,
            TransactionKind::Consumption
            | TransactionKind::ReservationHold
            | TransactionKind::RefundClawback
            | TransactionKind::Expiry => Sign::Decrease,
            TransactionKind::ReservationSettle | TransactionKind::AdminAdjustment => Sign::Either,
        }
    }

    /// Whether this kind is usage: a spend or a reservation's step (the hold, and its settle or
    /// release giving back what was not used), so that its amounts, negated and summed, are what
    /// was consumed.
    #[must_use]
    pub const fn is_usage(self) -> bool {
        matches!(
            self,
            TransactionKind::Consumption
                | TransactionKind::ReservationHold
                | TransactionKind::ReservationSettle
                | TransactionKind::ReservationRelease
        )
    }

    /// Whether an increase of this kind gives back part of a hold rather than granting
    /// credits.
    #[must_use]
    pub const fn returns_a_hold(self) -> bool {
        matches!(
            self,
            TransactionKind::ReservationSettle | TransactionKind::ReservationRelease
        )
    }

    /// Whether this kind creates a grant lot (credits that can later expire or be clawed back).
    #[must_use]
    pub const fn creates_lot(self) -> bool {
        matches!(
            self,
            TransactionKind::PurchaseGrant | TransactionKind::SubscriptionGrant
        )
    }
}

impl fmt::Display for TransactionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Why a ledger operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The balance does not cover the amount.
    #[error("insufficient credits: requested {requested}, available {available}")]
    InsufficientCredits {
        /// What was asked for.
        requested: Credits,
        /// What the balance held.
        available: Credits,
    },
    /// The amount's sign does not fit the transaction kind, or it is zero where that is meaningless.
    #[error("a {kind} transaction cannot have amount {amount}")]
    WrongSign {
        /// The kind.
        kind: TransactionKind,
        /// The refused amount.
        amount: CreditDelta,
    },
    /// The balance would exceed the largest representable amount.
    #[error("balance would exceed the largest amount")]
    Overflow,
    /// No such reservation is pending.
    #[error("no pending reservation {0}")]
    UnknownReservation(String),
}

impl From<CreditsError> for LedgerError {
    fn from(e: CreditsError) -> Self {
        match e {
            CreditsError::Insufficient {
                requested,
                available,
            } => LedgerError::InsufficientCredits {
                requested,
                available,
            },
            _ => LedgerError::Overflow,
        }
    }
}

/// Apply a transaction of `kind` and `amount` to `balance`, returning the balance after it.
///
/// # Errors
/// An amount whose sign does not fit the kind; a decrease larger than the balance; an overflow.
pub fn post(
    balance: Credits,
    kind: TransactionKind,
    amount: CreditDelta,
) -> Result<Credits, LedgerError> {
    let sign_ok = match kind.sign() {
        Sign::Increase => amount.hundredths() > 0,
        Sign::Decrease => amount.hundredths() < 0,
        Sign::Either => amount.hundredths() != 0,
    };
    if !sign_ok {
        return Err(LedgerError::WrongSign { kind, amount });
    }
    let after = balance.apply(amount)?;
    // Both sides are at most `Credits::MAX` in magnitude: no overflow in `i64`.
    assert_eq!(
        after.hundredths(),
        balance.hundredths() + amount.hundredths(),
        "a posting moves the balance by exactly its amount"
    );
    Ok(after)
}

/// What a request whose idempotency key was used before comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyReuse {
    /// The same request again (same fingerprint): answer what the first one did.
    Replay,
    /// Another request under the same key: refused, nothing changes.
    Conflict,
}

impl KeyReuse {
    /// A request fingerprinted `request_hash` under a key whose first request stored
    /// `stored_hash` (`None` for rows written before fingerprints were kept: never a replay).
    #[must_use]
    pub fn of(stored_hash: Option<&str>, request_hash: &str) -> Self {
        if stored_hash == Some(request_hash) {
            KeyReuse::Replay
        } else {
            KeyReuse::Conflict
        }
    }
}

/// What a spend (a consumption, a hold, an administrator's debit) comes to: the one decision
/// both the per-request and the grouped store paths take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendDecision {
    /// Its key was used before.
    Reused(KeyReuse),
    /// The balance does not cover it: nothing changes.
    Insufficient {
        /// What the balance holds.
        available: Credits,
    },
    /// Post it: the balance after it.
    Post {
        /// The balance after the spend.
        after: Credits,
    },
}

/// Decide a spend of `amount` as a `kind` transaction from `balance`. `key_used` is `None` for
/// a key not seen before, else the fingerprint its first request stored; `request_hash` is this
/// request's. The key is decided first (a replay answers even when the balance has since run
/// out), then the posting rule ([`post`]); the lots it draws from come from [`allocate_spend`].
///
/// # Errors
/// [`LedgerError::WrongSign`] for a zero amount or a kind that does not decrease; overflow.
pub fn decide_spend(
    kind: TransactionKind,
    amount: Credits,
    request_hash: &str,
    key_used: Option<Option<&str>>,
    balance: Credits,
) -> Result<SpendDecision, LedgerError> {
    let delta = amount.as_decrease();
    if amount.is_zero() {
        return Err(LedgerError::WrongSign {
            kind,
            amount: delta,
        });
    }
    if let Some(stored) = key_used {
        return Ok(SpendDecision::Reused(KeyReuse::of(stored, request_hash)));
    }
    match post(balance, kind, delta) {
        Ok(after) => {
            assert!(after <= balance, "a spend never raises the balance");
            assert_eq!(
                after.hundredths() + amount.hundredths(),
                balance.hundredths(),
                "a spend takes exactly its amount, never more than the balance"
            );
            Ok(SpendDecision::Post { after })
        }
        Err(LedgerError::InsufficientCredits { available, .. }) => {
            assert!(
                available < amount,
                "only a spend over the balance is refused"
            );
            assert_eq!(available, balance, "a refusal names the whole balance");
            Ok(SpendDecision::Insufficient { available })
        }
        Err(e) => Err(e),
    }
}

/// A balance change decided by the ledger's rules on the balance as its transaction read it
/// under the balance row's lock: what the database's guarded write (a conditional decrement, an
/// upsert under `CHECK`) must leave. The rule decides; the guard stays as the database's last
/// word, and the two must agree ([`DecidedPosting::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidedPosting {
    /// The kind.
    pub kind: TransactionKind,
    /// The signed amount.
    pub amount: CreditDelta,
    /// The balance it was decided on.
    pub before: Credits,
    /// The balance it leaves.
    pub after: Credits,
}

impl DecidedPosting {
    /// A posting of `amount` as `kind` on `before`, decided by [`post`].
    ///
    /// # Errors
    /// As [`post`].
    pub fn decide(
        before: Credits,
        kind: TransactionKind,
        amount: CreditDelta,
    ) -> Result<Self, LedgerError> {
        let after = post(before, kind, amount)?;
        Ok(Self {
            kind,
            amount,
            before,
            after,
        })
    }

    /// A spend [`decide_spend`] decided to post (`SpendDecision::Post { after }`) on `before`.
    #[must_use]
    pub fn spend(kind: TransactionKind, amount: Credits, before: Credits, after: Credits) -> Self {
        assert_eq!(
            after.hundredths() + amount.hundredths(),
            before.hundredths(),
            "a decided spend takes exactly its amount"
        );
        Self {
            kind,
            amount: amount.as_decrease(),
            before,
            after,
        }
    }

    /// What the database's guarded statement did, against the decision: `guarded` is the
    /// balance it left, `None` when its guard refused to write. Anything but the decided balance
    /// is a disagreement: an invariant broke (the rule, the guard or the lock), never an answer
    /// such as "insufficient".
    ///
    /// # Errors
    /// [`SpendDisagreement`] when `guarded` is not `Some(self.after)`.
    pub fn check(self, guarded: Option<Credits>) -> Result<Credits, SpendDisagreement> {
        match guarded {
            Some(left) if left == self.after => Ok(left),
            _ => Err(SpendDisagreement {
                decided: self,
                guarded,
            }),
        }
    }
}

/// The database's guard refused, or left another balance than, a posting the ledger's rules
/// decided under the balance row's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendDisagreement {
    /// What the rule decided.
    pub decided: DecidedPosting,
    /// The balance the guarded statement left; `None` when it refused to write.
    pub guarded: Option<Credits>,
}

impl fmt::Display for SpendDisagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.decided;
        write!(
            f,
            "a {} of {} decided on a balance of {} to leave {}; the database's guard ",
            d.kind, d.amount, d.before, d.after
        )?;
        match self.guarded {
            Some(left) => write!(f, "left {left}"),
            None => f.write_str("refused it"),
        }
    }
}

impl std::error::Error for SpendDisagreement {}

/// A balance crossing the host application is told about (`credits.low_balance`,
/// `credits.depleted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BalanceAlert {
    /// The balance fell below the configured threshold.
    LowBalance {
        /// The threshold it fell below.
        threshold: Credits,
    },
    /// The balance reached zero.
    Depleted,
}

/// The crossings of a spend that took the balance from `before` to `after`: below `low_below`
/// (when set and positive) and to zero, each the downward crossing of a level
/// ([`crate::threshold::crossing`]). Each is told once per crossing: only the spend that
/// crosses, never the ones below it, until a grant lifts the balance over again.
#[must_use]
pub fn balance_alerts(
    before: Credits,
    after: Credits,
    low_below: Option<Credits>,
) -> Vec<BalanceAlert> {
    use crate::threshold::{Crossing, crossing, depleted_level};
    let mut alerts = Vec::new();
    if let Some(threshold) = low_below.filter(|t| !t.is_zero())
        && crossing(before, after, threshold) == Some(Crossing::Down)
    {
        alerts.push(BalanceAlert::LowBalance { threshold });
    }
    if crossing(before, after, depleted_level()) == Some(Crossing::Down) {
        alerts.push(BalanceAlert::Depleted);
    }
    alerts
}

/// What a settle charges: the actual cost, capped at the hold plus what is available, and the
/// ledger amount that settles it (positive returns the unused part of the hold, negative takes
/// an overrun).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    /// What the work finally costs the user.
    pub charged: Credits,
    /// The settle transaction's amount: `held - charged`.
    pub amount: CreditDelta,
}

/// Settle a hold of `held` with actual usage `actual`, when `available` is the balance.
#[must_use]
pub fn settle(held: Credits, actual: Credits, available: Credits) -> Settlement {
    let ceiling = held.checked_add(available).unwrap_or(actual);
    let charged = actual.min(ceiling);
    let amount = CreditDelta::from_hundredths(held.hundredths() - charged.hundredths())
        .expect("the difference of two valid amounts is a valid delta");
    assert!(
        charged <= actual,
        "a settle never charges more than was used"
    );
    // The balance after the settle, `available + held - charged`, is never negative.
    assert!(
        charged.hundredths() <= held.hundredths() + available.hundredths(),
        "a settle never charges more than the hold and the balance"
    );
    Settlement { charged, amount }
}

/// What a grant's credits are, as finance sees them: paid for, or given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum GrantCategory {
    /// Bought: a credits pack, a subscription period, an upgrade's extra credits.
    #[default]
    Paid,
    /// Given to win or keep a customer: a sign-up grant, a promotion, a promo code.
    Promotional,
    /// Given with a purchase: a pack's bonus credits.
    Bonus,
    /// Given to make up for something: a refund in credits, goodwill.
    Compensation,
}

impl GrantCategory {
    /// Every category.
    pub const ALL: [GrantCategory; 4] = [
        GrantCategory::Paid,
        GrantCategory::Promotional,
        GrantCategory::Bonus,
        GrantCategory::Compensation,
    ];

    /// The stable code (storage, API, events).
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            GrantCategory::Paid => "paid",
            GrantCategory::Promotional => "promotional",
            GrantCategory::Bonus => "bonus",
            GrantCategory::Compensation => "compensation",
        }
    }

    /// The category of `code`.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// Whether its credits were paid for.
    #[must_use]
    pub const fn is_paid(self) -> bool {
        matches!(self, GrantCategory::Paid)
    }
}

/// The highest grant priority.
pub const MAX_GRANT_PRIORITY: u16 = 1_000;

/// A grant's priority in spend order: a spend draws the highest first, before any expiry or
/// category order. 0 (the default) to [`MAX_GRANT_PRIORITY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GrantPriority(u16);

impl GrantPriority {
    /// A priority of `value`, at most [`MAX_GRANT_PRIORITY`].
    #[must_use]
    pub fn new(value: u16) -> Option<Self> {
        (value <= MAX_GRANT_PRIORITY).then_some(Self(value))
    }

    /// Its value.
    #[must_use]
    pub const fn get(self) -> u16 {
        self.0
    }
}

/// Which credits a spend draws first among lots of equal priority and expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpendOrder {
    /// Given credits (promotional, bonus, compensation) before paid ones: what a customer
    /// paid for lasts longest, and what was given is used before it can be clawed back or
    /// lapse unused (the default).
    #[default]
    GivenFirst,
    /// Paid credits before given ones.
    PaidFirst,
}

impl SpendOrder {
    /// Where lots of `category` come among lots of equal priority and expiry (lower first).
    const fn rank(self, category: GrantCategory) -> u8 {
        match (self, category.is_paid()) {
            (SpendOrder::GivenFirst, false) | (SpendOrder::PaidFirst, true) => 0,
            _ => 1,
        }
    }
}

/// The part of a grant a lot still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantLot {
    /// The lot's id (the grant transaction's id).
    pub id: i64,
    /// Unspent credits of the grant.
    pub remaining: Credits,
    /// When the grant's credits expire, if they do.
    pub expires_at: Option<Timestamp>,
    /// When it was granted.
    pub granted_at: Timestamp,
    /// What its credits are.
    pub category: GrantCategory,
    /// Its priority in spend order.
    pub priority: GrantPriority,
}

/// How much to draw from which lot to spend `amount`, in the default [`SpendOrder`]: see
/// [`allocate_spend_in`].
#[must_use]
pub fn allocate_spend(lots: &[GrantLot], amount: Credits) -> Vec<(i64, Credits)> {
    allocate_spend_in(SpendOrder::default(), lots, amount)
}

/// How much to draw from which lot to spend `amount`: the highest priority first, then the
/// soonest expiry (never-expiring last), then by category as `order` says, then the oldest.
/// Returns `(lot id, amount)` pairs; lots that cover less than `amount` in total are drawn to
/// zero and the rest is left unattributed.
#[must_use]
pub fn allocate_spend_in(
    order: SpendOrder,
    lots: &[GrantLot],
    amount: Credits,
) -> Vec<(i64, Credits)> {
    let mut in_order: Vec<&GrantLot> = lots.iter().filter(|l| !l.remaining.is_zero()).collect();
    in_order.sort_by_key(|l| {
        (
            std::cmp::Reverse(l.priority),
            l.expires_at.is_none(),
            l.expires_at,
            order.rank(l.category),
            l.granted_at,
            l.id,
        )
    });
    let mut left = amount;
    let mut draws = Vec::new();
    for lot in in_order {
        if left.is_zero() {
            break;
        }
        let take = lot.remaining.min(left);
        draws.push((lot.id, take));
        left = left.checked_sub(take).expect("take is at most left");
    }
    debug_assert_eq!(
        draws.iter().map(|(_, c)| c.hundredths()).sum::<i64>() + left.hundredths(),
        amount.hundredths(),
        "the draws and what is left unattributed make up the spend"
    );
    debug_assert!(
        draws.iter().all(|(id, take)| lots
            .iter()
            .any(|l| l.id == *id && *take <= l.remaining && !take.is_zero())),
        "each draw takes a positive part of a lot, at most what it holds"
    );
    draws
}

/// The available `balance` by category: what `lots` hold, less what the pending holds (`held`)
/// will draw from them when they settle (in `order`, as a settle draws), and at most
/// `balance` in all (drawn in `order` too). Every category appears, with zero when it has
/// nothing.
#[must_use]
pub fn available_by_category(
    order: SpendOrder,
    lots: &[GrantLot],
    held: Credits,
    balance: Credits,
) -> std::collections::BTreeMap<GrantCategory, Credits> {
    let mut left: Vec<GrantLot> = lots.to_vec();
    let take = |amount: Credits, left: &mut Vec<GrantLot>| {
        for (id, taken) in allocate_spend_in(order, left, amount) {
            if let Some(lot) = left.iter_mut().find(|l| l.id == id) {
                lot.remaining = lot.remaining.checked_sub(taken).unwrap_or(Credits::ZERO);
            }
        }
    };
    take(held, &mut left);
    let total: i64 = left.iter().map(|l| l.remaining.hundredths()).sum();
    if let Ok(excess) = Credits::from_hundredths(total - balance.hundredths())
        && !excess.is_zero()
    {
        take(excess, &mut left);
    }
    let mut by: std::collections::BTreeMap<GrantCategory, Credits> = GrantCategory::ALL
        .iter()
        .map(|c| (*c, Credits::ZERO))
        .collect();
    for lot in &left {
        if let Some(sum) = by.get_mut(&lot.category) {
            *sum = sum.checked_add(lot.remaining).unwrap_or(*sum);
        }
    }
    by
}

/// What a clawback or expiry takes, and what it could not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Takeback {
    /// Taken from the balance.
    pub taken: Credits,
    /// Wanted but not available (already spent or held).
    pub shortfall: Credits,
}

/// Take back `wanted` credits, at most what the lot still holds and never more than `balance`.
#[must_use]
pub fn take_back(wanted: Credits, lot_remaining: Credits, balance: Credits) -> Takeback {
    let taken = wanted.min(lot_remaining).min(balance);
    let shortfall = wanted.checked_sub(taken).unwrap_or(Credits::ZERO);
    assert!(
        taken <= lot_remaining && taken <= balance,
        "a takeback never takes more than the lot holds or the balance"
    );
    assert_eq!(
        taken.hundredths() + shortfall.hundredths(),
        wanted.hundredths(),
        "what is taken and what is short make up what was wanted"
    );
    Takeback { taken, shortfall }
}

/// The credits a refund of `refunded_minor` out of `price_minor` should take back from a grant of
/// `granted`: the same proportion, rounded up to the credit unit (a full refund takes it all).
#[must_use]
pub fn refund_share(granted: Credits, refunded_minor: i64, price_minor: i64) -> Credits {
    if price_minor <= 0 || refunded_minor >= price_minor {
        return granted;
    }
    let refunded = i128::from(refunded_minor.max(0));
    let share = (i128::from(granted.hundredths()) * refunded + i128::from(price_minor) - 1)
        / i128::from(price_minor);
    let taken = Credits::from_hundredths(i64::try_from(share).unwrap_or(i64::MAX))
        .unwrap_or(granted)
        .min(granted);
    assert!(
        taken <= granted,
        "a refund never takes back more than was granted"
    );
    taken
}

/// One ledger entry as the pure account model records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The kind.
    pub kind: TransactionKind,
    /// The signed amount.
    pub amount: CreditDelta,
    /// The balance after it.
    pub balance_after: Credits,
}

/// A pure model of one user's credit account: the reference the stores are tested against and
/// the engine of the in-memory fake.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreditAccount {
    balance: Credits,
    entries: Vec<LedgerEntry>,
    holds: BTreeMap<String, Credits>,
}

impl CreditAccount {
    /// The current balance (available credits; held credits are already deducted).
    #[must_use]
    pub fn balance(&self) -> Credits {
        self.balance
    }
    /// Every entry, oldest first.
    #[must_use]
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }
    /// Pending holds by reservation id.
    #[must_use]
    pub fn holds(&self) -> &BTreeMap<String, Credits> {
        &self.holds
    }

    /// Record a transaction.
    ///
    /// # Errors
    /// As [`post`].
    pub fn record(
        &mut self,
        kind: TransactionKind,
        amount: CreditDelta,
    ) -> Result<&LedgerEntry, LedgerError> {
        let balance_after = post(self.balance, kind, amount)?;
        debug_assert_eq!(
            self.entries
                .last()
                .map_or(Credits::ZERO, |e| e.balance_after),
            self.balance,
            "the balance is the last entry's balance after"
        );
        self.balance = balance_after;
        self.entries.push(LedgerEntry {
            kind,
            amount,
            balance_after,
        });
        Ok(self.entries.last().expect("just pushed"))
    }

    /// Hold `amount` under `reservation`.
    ///
    /// # Errors
    /// Insufficient credits, or a zero amount.
    pub fn hold(&mut self, reservation: &str, amount: Credits) -> Result<(), LedgerError> {
        self.record(TransactionKind::ReservationHold, amount.as_decrease())?;
        self.holds.insert(reservation.to_owned(), amount);
        Ok(())
    }

    /// Settle a pending hold with the actual cost.
    ///
    /// # Errors
    /// [`LedgerError::UnknownReservation`].
    pub fn settle(
        &mut self,
        reservation: &str,
        actual: Credits,
    ) -> Result<Settlement, LedgerError> {
        let held = *self
            .holds
            .get(reservation)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation.to_owned()))?;
        let s = settle(held, actual, self.balance);
        if s.amount.hundredths() != 0 {
            self.record(TransactionKind::ReservationSettle, s.amount)?;
        }
        self.holds.remove(reservation);
        Ok(s)
    }

    /// Release a pending hold unused.
    ///
    /// # Errors
    /// [`LedgerError::UnknownReservation`].
    pub fn release(&mut self, reservation: &str) -> Result<Credits, LedgerError> {
        let held = *self
            .holds
            .get(reservation)
            .ok_or_else(|| LedgerError::UnknownReservation(reservation.to_owned()))?;
        self.record(TransactionKind::ReservationRelease, held.as_increase())?;
        self.holds.remove(reservation);
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn c(h: i64) -> Credits {
        Credits::from_hundredths(h).unwrap()
    }

    #[test]
    fn only_the_spend_that_crosses_is_told() {
        let low = Some(c(1000));
        assert_eq!(balance_alerts(c(1500), c(1200), low), []);
        assert_eq!(
            balance_alerts(c(1500), c(900), low),
            [BalanceAlert::LowBalance { threshold: c(1000) }]
        );
        assert_eq!(balance_alerts(c(1000), c(999), low).len(), 1);
        assert_eq!(balance_alerts(c(900), c(500), low), []);
        assert_eq!(balance_alerts(c(500), c(0), low), [BalanceAlert::Depleted]);
        assert_eq!(
            balance_alerts(c(1500), c(0), low),
            [
                BalanceAlert::LowBalance { threshold: c(1000) },
                BalanceAlert::Depleted
            ]
        );
        assert_eq!(balance_alerts(c(0), c(0), low), []);
        assert_eq!(balance_alerts(c(1500), c(900), None), []);
        assert_eq!(balance_alerts(c(1500), c(900), Some(c(0))), []);
    }

    #[test]
    fn a_spend_decides_its_key_first_then_the_balance() {
        let spend = |key, balance| {
            decide_spend(TransactionKind::Consumption, c(500), "h1", key, c(balance))
        };
        assert_eq!(spend(None, 700), Ok(SpendDecision::Post { after: c(200) }));
        assert_eq!(spend(None, 500), Ok(SpendDecision::Post { after: c(0) }));
        assert_eq!(
            spend(None, 499),
            Ok(SpendDecision::Insufficient { available: c(499) })
        );
        // A replay answers what the first request did, even with the balance spent since.
        assert_eq!(
            spend(Some(Some("h1")), 0),
            Ok(SpendDecision::Reused(KeyReuse::Replay))
        );
        assert_eq!(
            spend(Some(Some("h2")), 700),
            Ok(SpendDecision::Reused(KeyReuse::Conflict))
        );
        assert_eq!(
            spend(Some(None), 700),
            Ok(SpendDecision::Reused(KeyReuse::Conflict))
        );
        assert!(matches!(
            decide_spend(TransactionKind::Consumption, c(0), "h", None, c(10)),
            Err(LedgerError::WrongSign { .. })
        ));
        assert!(matches!(
            decide_spend(TransactionKind::PurchaseGrant, c(5), "h", None, c(10)),
            Err(LedgerError::WrongSign { .. })
        ));
    }

    #[test]
    fn a_guard_agrees_only_by_leaving_the_decided_balance() {
        let decided = DecidedPosting::spend(TransactionKind::Consumption, c(300), c(500), c(200));
        assert_eq!(decided.amount, c(300).as_decrease());
        assert_eq!(decided.check(Some(c(200))), Ok(c(200)));
        // A guard that refused what the rule allowed is not "insufficient": it is a disagreement.
        let refused = decided.check(None).unwrap_err();
        assert_eq!(refused.decided, decided);
        assert_eq!(refused.guarded, None);
        assert!(refused.to_string().contains("refused it"), "{refused}");
        // So is a write that left another balance.
        let other = decided.check(Some(c(199))).unwrap_err();
        assert_eq!(other.guarded, Some(c(199)));
        assert!(other.to_string().contains("left 1.99"), "{other}");
        let settle = DecidedPosting::decide(
            c(100),
            TransactionKind::ReservationSettle,
            CreditDelta::from_hundredths(-40).unwrap(),
        )
        .unwrap();
        assert_eq!(settle.after, c(60));
        assert_eq!(settle.check(Some(c(60))), Ok(c(60)));
        assert!(
            DecidedPosting::decide(c(10), TransactionKind::Consumption, c(20).as_decrease())
                .is_err(),
            "the rule refuses before any write"
        );
    }

    proptest! {
        #[test]
        fn a_posted_spend_never_overdraws_and_always_takes_the_amount(
            amount in 1i64..1_000_000,
            balance in 0i64..2_000_000,
        ) {
            let decision =
                decide_spend(TransactionKind::Consumption, c(amount), "h", None, c(balance));
            match decision {
                Ok(SpendDecision::Post { after }) => {
                    prop_assert!(balance >= amount);
                    prop_assert_eq!(after.hundredths(), balance - amount);
                }
                Ok(SpendDecision::Insufficient { available }) => {
                    prop_assert!(balance < amount);
                    prop_assert_eq!(available.hundredths(), balance);
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }

    #[test]
    fn type_codes_are_stable_and_round_trip() {
        let codes: Vec<&str> = TransactionKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(
            codes,
            [
                "purchase_grant",
                "subscription_grant",
                "consumption",
                "reservation_hold",
                "reservation_settle",
                "reservation_release",
                "refund_clawback",
                "admin_adjustment",
                "expiry"
            ]
        );
        for k in TransactionKind::ALL {
            assert_eq!(TransactionKind::parse(k.code()), Some(k));
        }
    }

    #[test]
    fn posting_refuses_wrong_signs_and_negative_balances() {
        assert!(matches!(
            post(c(0), TransactionKind::PurchaseGrant, c(5).as_decrease()),
            Err(LedgerError::WrongSign { .. })
        ));
        assert!(matches!(
            post(c(0), TransactionKind::Consumption, c(5).as_increase()),
            Err(LedgerError::WrongSign { .. })
        ));
        assert_eq!(
            post(c(3), TransactionKind::Consumption, c(5).as_decrease()),
            Err(LedgerError::InsufficientCredits {
                requested: c(5),
                available: c(3)
            })
        );
        assert_eq!(
            post(c(5), TransactionKind::Consumption, c(5).as_decrease()),
            Ok(c(0))
        );
    }

    #[test]
    fn spend_order_is_soonest_expiry_then_oldest() {
        let t = Timestamp::from_unix_millis;
        let lots = vec![
            GrantLot {
                id: 1,
                remaining: c(100),
                expires_at: None,
                granted_at: t(1),
                category: GrantCategory::Paid,
                priority: GrantPriority::default(),
            },
            GrantLot {
                id: 2,
                remaining: c(100),
                expires_at: Some(t(500)),
                granted_at: t(3),
                category: GrantCategory::Paid,
                priority: GrantPriority::default(),
            },
            GrantLot {
                id: 3,
                remaining: c(100),
                expires_at: Some(t(200)),
                granted_at: t(4),
                category: GrantCategory::Paid,
                priority: GrantPriority::default(),
            },
            GrantLot {
                id: 4,
                remaining: c(100),
                expires_at: None,
                granted_at: t(0),
                category: GrantCategory::Paid,
                priority: GrantPriority::default(),
            },
        ];
        assert_eq!(
            allocate_spend(&lots, c(250)),
            vec![(3, c(100)), (2, c(100)), (4, c(50))]
        );
    }

    fn lot(id: i64, expires: Option<i64>, category: GrantCategory, priority: u16) -> GrantLot {
        GrantLot {
            id,
            remaining: c(100),
            expires_at: expires.map(Timestamp::from_unix_millis),
            granted_at: Timestamp::from_unix_millis(id),
            category,
            priority: GrantPriority::new(priority).unwrap(),
        }
    }

    #[test]
    fn priority_comes_first_then_expiry_then_given_before_paid() {
        use GrantCategory::{Bonus, Paid, Promotional};
        let lots = vec![
            lot(1, None, Paid, 0),
            lot(2, None, Promotional, 0),
            lot(3, Some(900), Paid, 0),
            lot(4, Some(900), Bonus, 0),
            lot(5, None, Paid, 7),
        ];
        let ids = |order, amount| -> Vec<i64> {
            allocate_spend_in(order, &lots, c(amount))
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        };
        assert_eq!(ids(SpendOrder::GivenFirst, 500), [5, 4, 3, 2, 1]);
        assert_eq!(ids(SpendOrder::PaidFirst, 500), [5, 3, 4, 1, 2]);
        assert_eq!(ids(SpendOrder::GivenFirst, 150), [5, 4]);
        assert_eq!(GrantPriority::new(MAX_GRANT_PRIORITY + 1), None);
        for category in GrantCategory::ALL {
            assert_eq!(GrantCategory::parse(category.code()), Some(category));
        }
    }

    #[test]
    fn the_available_balance_splits_by_category_after_the_holds() {
        use GrantCategory::{Paid, Promotional};
        let mut lots = vec![lot(1, None, Paid, 0), lot(2, None, Promotional, 0)];
        lots[0].remaining = c(500);
        lots[1].remaining = c(300);
        let by = |order, held, balance| {
            let split = available_by_category(order, &lots, c(held), c(balance));
            (split[&Paid].hundredths(), split[&Promotional].hundredths())
        };
        // A hold of 1.00 will be drawn from the promotional lot when it settles.
        assert_eq!(by(SpendOrder::GivenFirst, 100, 700), (500, 200));
        assert_eq!(by(SpendOrder::PaidFirst, 100, 700), (400, 300));
        // Less available than the lots hold: the excess goes in spend order too.
        assert_eq!(by(SpendOrder::GivenFirst, 100, 600), (500, 100));
        let split = available_by_category(SpendOrder::GivenFirst, &[], c(0), c(0));
        assert_eq!(split.len(), 4);
        assert!(split.values().all(|v| v.is_zero()));
    }

    /// Whether `a` must be drawn before `b`, written out rule by rule.
    fn drawn_before(order: SpendOrder, a: &GrantLot, b: &GrantLot) -> bool {
        if a.priority != b.priority {
            return a.priority > b.priority;
        }
        match (a.expires_at, b.expires_at) {
            (Some(x), Some(y)) if x != y => return x < y,
            (Some(_), None) => return true,
            (None, Some(_)) => return false,
            _ => {}
        }
        if a.category.is_paid() != b.category.is_paid() {
            return match order {
                SpendOrder::GivenFirst => !a.category.is_paid(),
                SpendOrder::PaidFirst => a.category.is_paid(),
            };
        }
        (a.granted_at, a.id) < (b.granted_at, b.id)
    }

    fn any_lot() -> impl Strategy<Value = (Option<i64>, usize, u16, i64)> {
        (
            proptest::option::of(0_i64..5),
            0_usize..4,
            0_u16..3,
            1_i64..500,
        )
    }

    proptest! {
        #[test]
        fn any_sequence_of_grants_and_spends_draws_in_spend_order(
            grants in proptest::collection::vec(any_lot(), 1..12),
            spends in proptest::collection::vec(1_i64..800, 1..10),
            paid_first in any::<bool>(),
        ) {
            let order = if paid_first { SpendOrder::PaidFirst } else { SpendOrder::GivenFirst };
            let mut lots: Vec<GrantLot> = grants
                .iter()
                .enumerate()
                .map(|(i, (expires, category, priority, amount))| GrantLot {
                    id: i64::try_from(i).unwrap(),
                    remaining: c(*amount),
                    expires_at: expires.map(Timestamp::from_unix_millis),
                    granted_at: Timestamp::from_unix_millis(i64::try_from(i % 3).unwrap()),
                    category: GrantCategory::ALL[*category],
                    priority: GrantPriority::new(*priority).unwrap(),
                })
                .collect();
            for amount in spends {
                let draws = allocate_spend_in(order, &lots, c(amount));
                let held: i64 = lots.iter().map(|l| l.remaining.hundredths()).sum();
                let drawn: i64 = draws.iter().map(|(_, t)| t.hundredths()).sum();
                prop_assert_eq!(drawn, amount.min(held));
                // A lot is drawn only when every lot before it is drawn to zero.
                for (id, _) in &draws {
                    let b = lots.iter().find(|l| l.id == *id).unwrap();
                    for a in lots.iter().filter(|a| a.id != b.id && drawn_before(order, a, b)) {
                        let taken = draws.iter().find(|(i, _)| *i == a.id).map(|(_, t)| *t);
                        prop_assert_eq!(
                            taken.unwrap_or(Credits::ZERO),
                            a.remaining,
                            "lot {} drawn before lot {} was used up", b.id, a.id
                        );
                    }
                }
                for (id, take) in draws {
                    let l = lots.iter_mut().find(|l| l.id == id).unwrap();
                    l.remaining = l.remaining.checked_sub(take).unwrap();
                }
            }
        }
    }

    #[test]
    fn settle_returns_the_unused_part_or_takes_the_overrun_up_to_what_is_available() {
        assert_eq!(
            settle(c(100), c(30), c(0)),
            Settlement {
                charged: c(30),
                amount: CreditDelta::from_hundredths(70).unwrap()
            }
        );
        assert_eq!(
            settle(c(100), c(150), c(20)),
            Settlement {
                charged: c(120),
                amount: CreditDelta::from_hundredths(-20).unwrap()
            }
        );
    }

    #[test]
    fn refunds_take_back_the_unspent_share_and_record_the_shortfall() {
        assert_eq!(refund_share(c(10_000), 500, 1000), c(5_000));
        assert_eq!(refund_share(c(10_000), 1000, 1000), c(10_000));
        assert_eq!(refund_share(c(100), 1, 3), c(34));
        assert_eq!(
            take_back(c(5_000), c(3_000), c(10_000)),
            Takeback {
                taken: c(3_000),
                shortfall: c(2_000)
            }
        );
        assert_eq!(
            take_back(c(5_000), c(5_000), c(1_000)),
            Takeback {
                taken: c(1_000),
                shortfall: c(4_000)
            }
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Grant(i64),
        Spend(i64),
        Hold(u8, i64),
        Settle(u8, i64),
        Release(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1_i64..100_000).prop_map(Op::Grant),
            (1_i64..50_000).prop_map(Op::Spend),
            (0_u8..4, 1_i64..50_000).prop_map(|(r, a)| Op::Hold(r, a)),
            (0_u8..4, 0_i64..80_000).prop_map(|(r, a)| Op::Settle(r, a)),
            (0_u8..4).prop_map(Op::Release),
        ]
    }

    proptest! {
        #[test]
        fn any_sequence_keeps_the_balance_equal_to_the_ledger_and_never_negative(ops in proptest::collection::vec(op(), 1..60)) {
            let mut account = CreditAccount::default();
            for op in ops {
                let _ = match op {
                    Op::Grant(h) => account.record(TransactionKind::PurchaseGrant, c(h).as_increase()).map(|_| ()),
                    Op::Spend(h) => account.record(TransactionKind::Consumption, c(h).as_decrease()).map(|_| ()),
                    Op::Hold(r, h) if !account.holds().contains_key(&r.to_string()) => account.hold(&r.to_string(), c(h)),
                    Op::Hold(..) => Ok(()),
                    Op::Settle(r, h) => account.settle(&r.to_string(), c(h)).map(|_| ()),
                    Op::Release(r) => account.release(&r.to_string()).map(|_| ()),
                };
                let sum: i64 = account.entries().iter().map(|e| e.amount.hundredths()).sum();
                prop_assert_eq!(sum, account.balance().hundredths());
                prop_assert!(account.balance().hundredths() >= 0);
                if let Some(last) = account.entries().last() {
                    prop_assert_eq!(last.balance_after, account.balance());
                }
            }
        }
    }
}
