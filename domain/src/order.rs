//! Orders: one attempt by one user to buy one plan, and its state machine.
//!
//! ```text
//! pending ──► paid ──► partially_refunded ──► refunded
//!    │          └───────────────────────────► refunded
//!    ├──► failed      (terminal)
//!    ├──► cancelled   (terminal)
//!    └──► expired     (terminal)
//! ```

use std::fmt;

use crate::credits::Credits;
use crate::entitlements::Entitlements;
use crate::ids::{AccountId, OrderId, PlanId, UserId};
use crate::money::{Money, MoneyError};
use crate::plan::{Duration, Plan, PlanType};
use crate::provider::ProviderId;
use crate::return_url::ReturnUrls;
use crate::time::Timestamp;

/// The plan as it was when the order was placed: later catalog edits never change an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanSnapshot {
    /// The plan's id.
    pub plan_id: PlanId,
    /// Its type.
    pub plan_type: PlanType,
    /// The price charged, in the environment the order was placed in.
    pub price: Money,
    /// Credits granted per purchase or per paid period.
    pub credits: Option<Credits>,
    /// A credits pack's bonus, granted with each purchase as `bonus`.
    pub bonus: Option<crate::plan::PackBonus>,
    /// Access period, billing period, or credits validity.
    pub duration: Option<Duration>,
    /// The plan's entitlements when the order was placed; `None` for an order stored before
    /// orders kept them (readers fall back to the plan as it is now).
    pub entitlements: Option<Entitlements>,
}

impl PlanSnapshot {
    /// Snapshot `plan` at `price` (the price for the environment the order is placed in).
    #[must_use]
    pub fn of(plan: &Plan, price: Money) -> Self {
        Self {
            plan_id: plan.id().clone(),
            plan_type: plan.plan_type(),
            price,
            credits: plan.credits(),
            bonus: plan.bonus(),
            duration: plan.duration(),
            entitlements: Some(plan.entitlements().clone()),
        }
    }
}

/// Where an order is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderStatus {
    /// Created; waiting for the provider to report the payment.
    Pending,
    /// The provider confirmed the payment.
    Paid {
        /// When the payment was confirmed.
        paid_at: Timestamp,
    },
    /// The provider reported the payment failed (terminal).
    Failed {
        /// Why, in words safe to show the user.
        reason: String,
    },
    /// The user or the service cancelled before payment (terminal).
    Cancelled,
    /// Nobody paid within the order's lifetime (terminal).
    Expired,
    /// Part of the payment was refunded; more may follow.
    PartiallyRefunded {
        /// When the payment was confirmed.
        paid_at: Timestamp,
        /// The total refunded so far, below the price.
        refunded: Money,
    },
    /// The whole payment was refunded (terminal).
    Refunded {
        /// When the payment was confirmed.
        paid_at: Timestamp,
    },
}

/// Which state an order is in, without the state's data: what storage filters on and what a
/// handled webhook reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderStatusKind {
    /// [`OrderStatus::Pending`].
    Pending,
    /// [`OrderStatus::Paid`].
    Paid,
    /// [`OrderStatus::Failed`].
    Failed,
    /// [`OrderStatus::Cancelled`].
    Cancelled,
    /// [`OrderStatus::Expired`].
    Expired,
    /// [`OrderStatus::PartiallyRefunded`].
    PartiallyRefunded,
    /// [`OrderStatus::Refunded`].
    Refunded,
}

impl OrderStatusKind {
    /// Every state, in the order of an order's life.
    pub const ALL: [Self; 7] = [
        Self::Pending,
        Self::Paid,
        Self::Failed,
        Self::Cancelled,
        Self::Expired,
        Self::PartiallyRefunded,
        Self::Refunded,
    ];

    /// The states of an order whose payment arrived, whatever was refunded since.
    pub const PAYMENT_ARRIVED: [Self; 3] = [Self::Paid, Self::PartiallyRefunded, Self::Refunded];

    /// The stable status code used in storage and the API.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            OrderStatusKind::Pending => "pending",
            OrderStatusKind::Paid => "paid",
            OrderStatusKind::Failed => "failed",
            OrderStatusKind::Cancelled => "cancelled",
            OrderStatusKind::Expired => "expired",
            OrderStatusKind::PartiallyRefunded => "partially_refunded",
            OrderStatusKind::Refunded => "refunded",
        }
    }

    /// The state a stable status code names, if any.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }
}

impl fmt::Display for OrderStatusKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl OrderStatus {
    /// Which state this is, without its data.
    #[must_use]
    pub const fn kind(&self) -> OrderStatusKind {
        match self {
            OrderStatus::Pending => OrderStatusKind::Pending,
            OrderStatus::Paid { .. } => OrderStatusKind::Paid,
            OrderStatus::Failed { .. } => OrderStatusKind::Failed,
            OrderStatus::Cancelled => OrderStatusKind::Cancelled,
            OrderStatus::Expired => OrderStatusKind::Expired,
            OrderStatus::PartiallyRefunded { .. } => OrderStatusKind::PartiallyRefunded,
            OrderStatus::Refunded { .. } => OrderStatusKind::Refunded,
        }
    }

    /// The stable status code used in storage and the API.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// Whether no transition leaves this state.
    #[must_use]
    pub const fn is_terminal(&self) -> bool {
        matches!(
            self,
            OrderStatus::Failed { .. }
                | OrderStatus::Cancelled
                | OrderStatus::Expired
                | OrderStatus::Refunded { .. }
        )
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Whether a transition changed the order or found it already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The order moved to the new state.
    Applied,
    /// The order was already in that state (a duplicate or second event for the same fact).
    AlreadyDone,
}

/// Why an order cannot make a transition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderTransitionError {
    /// The move is not an edge of the state machine.
    #[error("order cannot go from {from} to {to}")]
    NotAllowed {
        /// Current status code.
        from: &'static str,
        /// Requested status code.
        to: &'static str,
    },
    /// A refund amount is zero, in another currency, or more than was paid.
    #[error("invalid refund amount: {0}")]
    InvalidRefund(String),
}

impl From<MoneyError> for OrderTransitionError {
    fn from(e: MoneyError) -> Self {
        OrderTransitionError::InvalidRefund(e.to_string())
    }
}

/// An order. Its fields are private: a new order comes from [`Order::place`], a stored one from
/// [`Order::restore`], and its status changes only through the transition methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    /// Our id, sent to the provider as its reference.
    id: OrderId,
    /// Who buys.
    user_id: UserId,
    /// The account what is bought belongs to: the buyer's personal account, or a team they
    /// buy for.
    account_id: AccountId,
    /// Who takes the payment.
    provider: ProviderId,
    /// What is bought, frozen at creation.
    plan: PlanSnapshot,
    /// Where the order is.
    status: OrderStatus,
    /// When it was created.
    created_at: Timestamp,
    /// When a still-pending order expires.
    expires_at: Timestamp,
    /// Where the host application wants its buyer back, when it said.
    returns: ReturnUrls,
    /// The buyer consented to keep its payment method for automatic top-ups.
    save_method: bool,
}

/// Every field of an [`Order`], as a store wrote it, for [`Order::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderParts {
    /// Our id, sent to the provider as its reference.
    pub id: OrderId,
    /// Who buys.
    pub user_id: UserId,
    /// The account what is bought belongs to; `None` for the buyer's personal account (an
    /// order stored before accounts could buy).
    pub account: Option<AccountId>,
    /// Who takes the payment.
    pub provider: ProviderId,
    /// What is bought, frozen at creation.
    pub plan: PlanSnapshot,
    /// Where the order is.
    pub status: OrderStatus,
    /// When it was created.
    pub created_at: Timestamp,
    /// When a still-pending order expires.
    pub expires_at: Timestamp,
    /// Where the host application wants its buyer back, when it said.
    pub returns: ReturnUrls,
    /// The buyer consented to keep its payment method for automatic top-ups.
    pub save_method: bool,
}

impl Order {
    /// A new pending order.
    #[must_use]
    pub fn place(
        id: OrderId,
        user_id: UserId,
        provider: ProviderId,
        plan: PlanSnapshot,
        now: Timestamp,
        lifetime_ms: i64,
    ) -> Self {
        Self {
            id,
            account_id: AccountId::personal(&user_id),
            user_id,
            provider,
            plan,
            status: OrderStatus::Pending,
            created_at: now,
            expires_at: now.plus_millis(lifetime_ms),
            returns: ReturnUrls::default(),
            save_method: false,
        }
    }

    /// The same new order, buying for `account` (a team the buyer may buy for: the caller
    /// checked) instead of the buyer's personal account.
    #[must_use]
    pub fn for_account(mut self, account: AccountId) -> Self {
        self.account_id = account;
        self
    }

    /// The same new order, sending its buyer back to the host application's `returns`.
    #[must_use]
    pub fn returning_to(mut self, returns: ReturnUrls) -> Self {
        self.returns = returns;
        self
    }

    /// Where the host application wants its buyer back (both `None` when it did not say).
    #[must_use]
    pub const fn returns(&self) -> &ReturnUrls {
        &self.returns
    }

    /// An order exactly as a store wrote it, for storage adapters reading back what they stored
    /// (and tests building fixtures). It enforces nothing the state machine would: the parts are
    /// trusted to be an order this service placed and moved only through its transitions. Code
    /// creating an order uses [`Order::place`].
    #[must_use]
    pub fn restore(parts: OrderParts) -> Self {
        let OrderParts {
            id,
            user_id,
            account,
            provider,
            plan,
            status,
            created_at,
            expires_at,
            returns,
            save_method,
        } = parts;
        Self {
            id,
            account_id: account.unwrap_or_else(|| AccountId::personal(&user_id)),
            user_id,
            provider,
            plan,
            status,
            created_at,
            expires_at,
            returns,
            save_method,
        }
    }

    /// The same new order, with the buyer's consent to keep its payment method for automatic
    /// top-ups.
    #[must_use]
    pub fn saving_method(mut self, save: bool) -> Self {
        self.save_method = save;
        self
    }

    /// Whether the buyer consented to keep its payment method for automatic top-ups.
    #[must_use]
    pub const fn save_method(&self) -> bool {
        self.save_method
    }

    /// Our id, sent to the provider as its reference.
    #[must_use]
    pub const fn id(&self) -> &OrderId {
        &self.id
    }

    /// Who buys.
    #[must_use]
    pub const fn user_id(&self) -> &UserId {
        &self.user_id
    }

    /// The account what is bought belongs to: its credits, access and subscription.
    #[must_use]
    pub const fn account_id(&self) -> &AccountId {
        &self.account_id
    }

    /// Who takes the payment.
    #[must_use]
    pub const fn provider(&self) -> ProviderId {
        self.provider
    }

    /// What is bought, frozen at creation.
    #[must_use]
    pub const fn plan(&self) -> &PlanSnapshot {
        &self.plan
    }

    /// Where the order is.
    #[must_use]
    pub const fn status(&self) -> &OrderStatus {
        &self.status
    }

    /// When it was created.
    #[must_use]
    pub const fn created_at(&self) -> Timestamp {
        self.created_at
    }

    /// When a still-pending order expires.
    #[must_use]
    pub const fn expires_at(&self) -> Timestamp {
        self.expires_at
    }

    fn not_allowed(&self, to: &'static str) -> OrderTransitionError {
        OrderTransitionError::NotAllowed {
            from: self.status.code(),
            to,
        }
    }

    /// The provider confirmed payment.
    ///
    /// # Errors
    /// The order is failed, cancelled or expired. (A payment confirmed after expiry or cancel is
    /// real money: the caller records it for an admin rather than dropping it.)
    pub fn mark_paid(&mut self, now: Timestamp) -> Result<Transition, OrderTransitionError> {
        match self.status {
            OrderStatus::Pending => {
                self.status = OrderStatus::Paid { paid_at: now };
                Ok(Transition::Applied)
            }
            OrderStatus::Paid { .. }
            | OrderStatus::PartiallyRefunded { .. }
            | OrderStatus::Refunded { .. } => Ok(Transition::AlreadyDone),
            _ => Err(self.not_allowed("paid")),
        }
    }

    /// The provider reported the payment failed.
    ///
    /// # Errors
    /// The order is not pending (a late failure never undoes a payment).
    pub fn mark_failed(
        &mut self,
        reason: impl Into<String>,
    ) -> Result<Transition, OrderTransitionError> {
        self.end_pending(
            OrderStatus::Failed {
                reason: reason.into(),
            },
            "failed",
        )
    }

    /// The user or the service cancelled the order before payment.
    ///
    /// # Errors
    /// The order is not pending.
    pub fn cancel(&mut self) -> Result<Transition, OrderTransitionError> {
        self.end_pending(OrderStatus::Cancelled, "cancelled")
    }

    /// The order's lifetime passed without payment.
    ///
    /// # Errors
    /// The order is not pending.
    pub fn expire(&mut self) -> Result<Transition, OrderTransitionError> {
        self.end_pending(OrderStatus::Expired, "expired")
    }

    fn end_pending(
        &mut self,
        to: OrderStatus,
        code: &'static str,
    ) -> Result<Transition, OrderTransitionError> {
        if self.status.code() == code {
            return Ok(Transition::AlreadyDone);
        }
        if self.status != OrderStatus::Pending {
            return Err(self.not_allowed(code));
        }
        self.status = to;
        Ok(Transition::Applied)
    }

    /// The provider refunded `total_refunded` of this order so far (providers report the running
    /// total). A total below the price makes the order partially refunded; the full price
    /// refunds it.
    ///
    /// # Errors
    /// The order was never paid, the total is zero, in another currency, above the price, or
    /// below what was already refunded.
    pub fn refund(&mut self, total_refunded: Money) -> Result<Transition, OrderTransitionError> {
        let price = self.plan.price;
        if total_refunded.currency() != price.currency() {
            return Err(
                MoneyError::CurrencyMismatch(total_refunded.currency(), price.currency()).into(),
            );
        }
        if total_refunded.is_zero() || total_refunded.amount_minor() > price.amount_minor() {
            return Err(OrderTransitionError::InvalidRefund(format!(
                "{total_refunded} against a price of {price}"
            )));
        }
        let (paid_at, already) = match &self.status {
            OrderStatus::Paid { paid_at } => (*paid_at, 0),
            OrderStatus::PartiallyRefunded { paid_at, refunded } => {
                (*paid_at, refunded.amount_minor())
            }
            OrderStatus::Refunded { .. } => return Ok(Transition::AlreadyDone),
            _ => return Err(self.not_allowed("refunded")),
        };
        if total_refunded.amount_minor() <= already {
            return Ok(Transition::AlreadyDone);
        }
        self.status = if total_refunded.amount_minor() == price.amount_minor() {
            OrderStatus::Refunded { paid_at }
        } else {
            OrderStatus::PartiallyRefunded {
                paid_at,
                refunded: total_refunded,
            }
        };
        assert!(
            self.refunded().is_some_and(
                |r| r.amount_minor() > already && r.amount_minor() <= price.amount_minor()
            ),
            "a refund raises the refunded total, never past the price"
        );
        Ok(Transition::Applied)
    }

    /// What was refunded of a paid order so far (zero for a paid one, the whole price for a
    /// refunded one); `None` for an order that was never paid.
    #[must_use]
    pub fn refunded(&self) -> Option<Money> {
        let price = self.plan.price;
        match &self.status {
            OrderStatus::Paid { .. } => Some(Money::zero(price.currency())),
            OrderStatus::PartiallyRefunded { refunded, .. } => Some(*refunded),
            OrderStatus::Refunded { .. } => Some(price),
            _ => None,
        }
    }

    /// The access this order grants: a paid (or only partly refunded) `one_time` order grants
    /// access for life, or until its payment time plus its `duration.months` in calendar months.
    /// `None` for any other order (unpaid, fully refunded, recurring, credits).
    #[must_use]
    pub fn one_time_access(&self) -> Option<AccessEnd> {
        if self.plan.plan_type != PlanType::OneTime {
            return None;
        }
        let paid_at = match self.status {
            OrderStatus::Paid { paid_at } | OrderStatus::PartiallyRefunded { paid_at, .. } => {
                paid_at
            }
            _ => return None,
        };
        match self.plan.duration? {
            Duration::Lifetime => Some(AccessEnd::Lifetime),
            Duration::Months(months) => {
                Some(AccessEnd::At(paid_at.plus_calendar_months(months.get())))
            }
        }
    }

    /// Whether this order grants one-time access at `now`.
    #[must_use]
    pub fn grants_access_at(&self, now: Timestamp) -> bool {
        self.one_time_access()
            .is_some_and(|end| end.is_open_at(now))
    }
}

/// When a one-time purchase's access ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessEnd {
    /// Never.
    Lifetime,
    /// At this instant (exclusive).
    At(Timestamp),
}

impl AccessEnd {
    /// Whether access is still running at `now`.
    #[must_use]
    pub fn is_open_at(self, now: Timestamp) -> bool {
        match self {
            AccessEnd::Lifetime => true,
            AccessEnd::At(end) => now < end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::Currency;
    use proptest::prelude::*;

    fn order() -> Order {
        let plan = PlanSnapshot {
            bonus: None,
            plan_id: PlanId::new("credits-100").unwrap(),
            plan_type: PlanType::Credits,
            price: Money::from_minor(1000, Currency::Usd).unwrap(),
            credits: Some(Credits::from_whole(100).unwrap()),
            duration: None,
            entitlements: None,
        };
        Order::place(
            OrderId::new("o1").unwrap(),
            UserId::new("u1").unwrap(),
            ProviderId::CardGateway,
            plan,
            Timestamp::from_unix_millis(0),
            60_000,
        )
    }

    fn usd(minor: i64) -> Money {
        Money::from_minor(minor, Currency::Usd).unwrap()
    }

    #[test]
    fn pending_to_paid_then_duplicate_is_already_done() {
        let mut o = order();
        assert_eq!(
            o.mark_paid(Timestamp::from_unix_millis(5)),
            Ok(Transition::Applied)
        );
        assert_eq!(
            o.mark_paid(Timestamp::from_unix_millis(9)),
            Ok(Transition::AlreadyDone)
        );
        assert_eq!(
            o.status,
            OrderStatus::Paid {
                paid_at: Timestamp::from_unix_millis(5)
            }
        );
        assert!(o.cancel().is_err());
        assert!(o.mark_failed("late").is_err());
    }

    #[test]
    fn a_stored_order_is_restored_as_written() {
        let mut o = order();
        o.mark_paid(Timestamp::from_unix_millis(5)).unwrap();
        let restored = Order::restore(OrderParts {
            id: o.id().clone(),
            user_id: o.user_id().clone(),
            account: Some(o.account_id().clone()),
            provider: o.provider(),
            plan: o.plan().clone(),
            status: o.status().clone(),
            created_at: o.created_at(),
            expires_at: o.expires_at(),
            returns: o.returns().clone(),
            save_method: o.save_method(),
        });
        assert_eq!(restored, o);
        assert_eq!(restored.expires_at(), Timestamp::from_unix_millis(60_000));
    }

    #[test]
    fn partial_then_full_refund() {
        let mut o = order();
        o.mark_paid(Timestamp::from_unix_millis(1)).unwrap();
        assert_eq!(o.refund(usd(300)), Ok(Transition::Applied));
        assert_eq!(o.status.code(), "partially_refunded");
        assert_eq!(o.refund(usd(300)), Ok(Transition::AlreadyDone));
        assert_eq!(o.refund(usd(1000)), Ok(Transition::Applied));
        assert_eq!(o.status.code(), "refunded");
        assert!(o.refund(usd(1001)).is_err());
    }

    #[test]
    fn refunds_of_unpaid_orders_and_bad_amounts_are_refused() {
        let mut o = order();
        assert!(matches!(
            o.refund(usd(100)),
            Err(OrderTransitionError::NotAllowed { .. })
        ));
        o.mark_paid(Timestamp::from_unix_millis(1)).unwrap();
        assert!(o.refund(usd(0)).is_err());
        assert!(
            o.refund(Money::from_minor(100, Currency::Eur).unwrap())
                .is_err()
        );
        assert!(o.refund(usd(1001)).is_err());
    }

    #[derive(Debug, Clone)]
    enum Step {
        Pay,
        Fail,
        Cancel,
        Expire,
        Refund(i64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Pay),
            Just(Step::Fail),
            Just(Step::Cancel),
            Just(Step::Expire),
            (1_i64..=1000).prop_map(Step::Refund)
        ]
    }

    proptest! {
        #[test]
        fn no_transition_leaves_a_terminal_state_except_the_refund_path(steps in proptest::collection::vec(step(), 1..12)) {
            let mut o = order();
            for s in steps {
                let before = o.status.clone();
                let _ = match s {
                    Step::Pay => o.mark_paid(Timestamp::from_unix_millis(1)),
                    Step::Fail => o.mark_failed("x"),
                    Step::Cancel => o.cancel(),
                    Step::Expire => o.expire(),
                    Step::Refund(m) => o.refund(usd(m)),
                };
                if before.is_terminal() {
                    prop_assert_eq!(&o.status, &before);
                }
                if matches!(before, OrderStatus::Paid { .. } | OrderStatus::PartiallyRefunded { .. }) {
                    let still_paid = matches!(o.status, OrderStatus::Paid { .. } | OrderStatus::PartiallyRefunded { .. } | OrderStatus::Refunded { .. });
                    prop_assert!(still_paid, "a paid order left the refund path: {:?}", o.status);
                }
            }
        }
    }

    fn one_time(duration: Duration) -> Order {
        let mut o = order();
        o.plan.plan_id = PlanId::new("pass").unwrap();
        o.plan.plan_type = PlanType::OneTime;
        o.plan.credits = None;
        o.plan.duration = Some(duration);
        o
    }

    #[test]
    fn a_paid_one_time_order_grants_access_for_its_calendar_months() {
        let Some(Duration::Months(twelve)) = Duration::from_months_value(12) else {
            unreachable!()
        };
        let mut pass = one_time(Duration::Months(twelve));
        assert_eq!(pass.one_time_access(), None, "not paid yet");
        // 2026-11-24T19:00:00Z, paid; access runs to 2027-11-24T19:00:00Z.
        let paid_at = Timestamp::from_unix_millis(1_795_546_800_000);
        pass.mark_paid(paid_at).unwrap();
        let end = Timestamp::from_unix_millis(1_827_082_800_000);
        assert_eq!(pass.one_time_access(), Some(AccessEnd::At(end)));
        assert!(pass.grants_access_at(end.plus_millis(-1)));
        assert!(!pass.grants_access_at(end));
        pass.refund(usd(500)).unwrap();
        assert!(
            pass.grants_access_at(paid_at),
            "a partial refund keeps access"
        );
        pass.refund(usd(1000)).unwrap();
        assert_eq!(pass.one_time_access(), None, "a full refund ends it");
    }

    #[test]
    fn a_lifetime_order_grants_access_for_ever_and_other_types_grant_none() {
        let mut lifetime = one_time(Duration::Lifetime);
        lifetime.mark_paid(Timestamp::from_unix_millis(5)).unwrap();
        assert_eq!(lifetime.one_time_access(), Some(AccessEnd::Lifetime));
        assert!(lifetime.grants_access_at(Timestamp::from_unix_millis(i64::MAX)));
        let mut credits = order();
        credits.mark_paid(Timestamp::from_unix_millis(5)).unwrap();
        assert_eq!(credits.one_time_access(), None);
    }
}
