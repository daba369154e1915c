//! Automatic top-up in storage: saved payment methods, each account's rule and its state, and
//! the top-ups themselves.
//!
//! A top-up is asked for by the spend that takes the balance below the threshold, in the
//! spend's own transaction (the store's posting path reads the rule and asks
//! [`domain::decide_request`]); at most one is in flight per account, which the database
//! enforces. The worker then claims it ([`TopUpStore::claim_top_ups`]), decides the charge
//! ([`domain::decide_charge`]) and starts it with its order ([`TopUpStore::start_top_up`], a
//! compare-and-set on the rule's version, so the caps read are the caps counted). Every later
//! change of a top-up (succeeded, declined, sent to the buyer to authenticate, refused before
//! its charge) and of the rule it moves is a [`TopUpWrite`] in a [`super::ChangeSet`], with the
//! order's change and the events of the same write.

use async_trait::async_trait;
use domain::{
    AccountId, AfterDecline, Credits, DisabledReason, Money, Order, OrderId, PlanId, ProviderId,
    Timestamp, TopUpRule, TopUpState, TopUpStatus, UserId,
};

use super::gateway::SavedMethod;
use super::store::StoreError;
use crate::host_events::HostEvent;

/// A saved payment method as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedMethodRecord {
    /// Its id.
    pub id: String,
    /// The account it charges.
    pub account_id: AccountId,
    /// The provider that keeps it.
    pub provider: ProviderId,
    /// What the provider reported.
    pub method: SavedMethod,
    /// The order on which the buyer consented.
    pub order_id: OrderId,
    /// Who consented.
    pub consented_by: UserId,
    /// When (the order's creation).
    pub consented_at: Timestamp,
    /// When it was saved.
    pub created_at: Timestamp,
    /// When the owner removed it (never charged again).
    pub removed_at: Option<Timestamp>,
}

/// An account's automatic top-up, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoTopUpRecord {
    /// The account.
    pub account_id: AccountId,
    /// The rule.
    pub rule: TopUpRule,
    /// Its state.
    pub state: TopUpState,
    /// The method it charges, while one is attached.
    pub method: Option<SavedMethodRecord>,
    /// Why Tally turned it off, until its owner turns it on again.
    pub disabled_reason: Option<DisabledReason>,
    /// The compare-and-set version.
    pub version: i64,
    /// Who changed the rule last (`None`: Tally).
    pub updated_by: Option<UserId>,
    /// When.
    pub updated_at: Timestamp,
}

/// One top-up, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopUpRecord {
    /// Its id.
    pub id: String,
    /// The account.
    pub account_id: AccountId,
    /// The pack.
    pub plan_id: PlanId,
    /// Where it stands.
    pub status: TopUpStatus,
    /// The balance the spend that asked for it left.
    pub balance: Credits,
    /// Its order, once its charge started.
    pub order_id: Option<OrderId>,
    /// What it charges, once its charge started.
    pub amount: Option<Money>,
    /// The credits it buys, once its charge started.
    pub credits: Option<Credits>,
    /// Why it failed, or what the provider said.
    pub reason: Option<String>,
    /// Where the buyer finishes a charge that needs them.
    pub action_url: Option<String>,
    /// When it was asked for.
    pub created_at: Timestamp,
    /// When it last moved.
    pub updated_at: Timestamp,
}

/// The rule as its owner sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutAutoTopUp {
    /// The account.
    pub account_id: AccountId,
    /// The rule.
    pub rule: TopUpRule,
    /// The saved method to charge (one of the account's, not removed); `None`: none yet (a
    /// purchase that saves one attaches it).
    pub method_id: Option<String>,
    /// Who sets it.
    pub by: UserId,
    /// When.
    pub at: Timestamp,
    /// The version read (`None`: the account has no rule yet).
    pub expected_version: Option<i64>,
}

/// Why a rule could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PutAutoTopUpError {
    /// The method named is not one of the account's saved methods.
    #[error("no such saved payment method on this account")]
    NoSuchMethod,
    /// The rule changed since it was read.
    #[error("the rule changed meanwhile")]
    Conflict,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A charge to start: the top-up claimed, the state counted with it, and its order.
#[derive(Debug, Clone)]
pub struct StartTopUp {
    /// The top-up (status `requested`).
    pub top_up: TopUpRecord,
    /// The rule's version read.
    pub expected_version: i64,
    /// The rule's state with this charge counted.
    pub state: TopUpState,
    /// When the worker sends the charge again (same idempotency key) if no provider event
    /// settled it by then.
    pub retry_at: Timestamp,
    /// Its order, created with it.
    pub order: Order,
    /// What the write tells.
    pub told: Vec<HostEvent>,
}

/// What a settled top-up does to its account's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEffect {
    /// Nothing.
    Keep,
    /// A success: no declines in a row, no cool-off.
    Reset,
    /// A decline (`domain::decide_decline`), giving back the charge's count and money.
    Declined {
        /// The cool-off or the rule turned off.
        after: AfterDecline,
        /// The money the charge had counted.
        give_back: i64,
    },
    /// No charge before `until`, giving back the charge's count and money (`give_back`; zero
    /// and no count for a top-up that never charged).
    CoolOff {
        /// The end of the cool-off.
        until: Timestamp,
        /// The money the charge had counted, if it started.
        give_back: Option<i64>,
    },
}

/// A change of a top-up or a rule, within a [`super::ChangeSet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopUpWrite {
    /// A payment method the provider saved, with the buyer's consent on its order; attached to
    /// the account's rule when the rule has none.
    MethodSaved(SavedMethodRecord),
    /// A top-up moves to `to` (only from a status that may move there; else nothing of this
    /// part is written), and its rule as `rule` says.
    Settle {
        /// The top-up.
        id: String,
        /// Its account.
        account: AccountId,
        /// Where it moves.
        to: TopUpStatus,
        /// Why, or what the provider said.
        reason: Option<String>,
        /// Where the buyer finishes it.
        action_url: Option<String>,
        /// What it does to the rule.
        rule: RuleEffect,
    },
    /// Tally turns the account's rule off until its owner turns it on again.
    Disable {
        /// The account.
        account: AccountId,
        /// Why.
        reason: DisabledReason,
    },
    /// The owner removes a saved method: it is never charged again, and a rule charging it is
    /// turned off.
    RemoveMethod {
        /// The account.
        account: AccountId,
        /// The method.
        id: String,
    },
}

/// A top-up part with the events it tells, decided apart from the events of the order change
/// it rides with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopUpChange {
    /// The write.
    pub write: TopUpWrite,
    /// What it tells (`auto_top_up.*`).
    pub told: Vec<HostEvent>,
}

/// The statuses a top-up may move to `to` from.
#[must_use]
pub fn may_move(from: TopUpStatus, to: TopUpStatus) -> bool {
    use TopUpStatus::{AuthenticationRequired, Charging, Failed, Requested, Succeeded};
    match to {
        Charging => from == Requested,
        Succeeded => from.awaits_payment(),
        Failed => matches!(from, Requested | Charging | AuthenticationRequired),
        AuthenticationRequired => from == Charging,
        Requested => false,
    }
}

/// Automatic top-up in storage.
#[async_trait]
pub trait TopUpStore: Send + Sync {
    /// The account's rule, its state and method, if it has one.
    async fn auto_top_up(&self, account: &AccountId)
    -> Result<Option<AutoTopUpRecord>, StoreError>;

    /// The account's saved methods, newest first (removed ones too).
    async fn saved_methods(
        &self,
        account: &AccountId,
    ) -> Result<Vec<SavedMethodRecord>, StoreError>;

    /// Write the owner's rule (compare-and-set on the version read), turning it on or off; a
    /// rule turned on again forgets why Tally turned it off, its declines and its cool-off.
    async fn put_auto_top_up(
        &self,
        put: &PutAutoTopUp,
    ) -> Result<AutoTopUpRecord, PutAutoTopUpError>;

    /// Claim up to `limit` top-ups whose claim lapsed (another instance skips them meanwhile),
    /// oldest first: requested ones, for `lease_ms`; and charging ones no provider event
    /// settled by their retry time, until `retry_ms` from now (their charge is sent again).
    async fn claim_top_ups(
        &self,
        now: Timestamp,
        (lease_ms, retry_ms): (i64, i64),
        limit: u32,
    ) -> Result<Vec<TopUpRecord>, StoreError>;

    /// Start a claimed top-up's charge: its order created, the top-up `charging` with it, the
    /// rule's state counted, all only while the rule still has the version read and the top-up
    /// is still `requested`; false (nothing written) otherwise.
    async fn start_top_up(&self, start: &StartTopUp) -> Result<bool, StoreError>;

    /// Keep the provider's id of a top-up's charge on its order (unless it has one), whatever
    /// the order's status by then: its refunds name it.
    async fn keep_charge_reference(
        &self,
        order: &OrderId,
        reference: &str,
    ) -> Result<(), StoreError>;

    /// The top-up an order pays, if any.
    async fn top_up_of_order(&self, order: &OrderId) -> Result<Option<TopUpRecord>, StoreError>;

    /// The account's top-ups, newest first.
    async fn top_ups(
        &self,
        account: &AccountId,
        limit: u32,
    ) -> Result<Vec<TopUpRecord>, StoreError>;
}
