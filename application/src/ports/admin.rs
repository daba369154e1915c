//! The admin console's storage port: finding customers, listing every order, every
//! team account and a customer's ledger by cursor, the webhook inbox by cursor, payment totals
//! per currency, and the audit log written in the transaction of each administrator's action.
//!
//! Contract for every adapter, besides the one in [`super::store`]: every list is newest first
//! (customer search: by e-mail) and served by an index, so a page costs the same at a million
//! rows as at a thousand; a page holds at most `keyset.limit` rows and names where the next one
//! starts only when more rows follow.

use std::collections::BTreeMap;

use async_trait::async_trait;
use domain::{AccountId, Credits, Currency, Plan, PlanId, ProviderId, Timestamp, UserId};

use super::store::StoredPlan;
use super::store::{CreditTransaction, InboxFilter, OrderRecord, RecordedEvent, StoreError};
use super::teams::Account;
use crate::accounts::{ApiKey, TokenHash, User};
use crate::cursor::{Keyset, KeysetPage};

/// Where a page of users sorted by e-mail starts: the lower-cased e-mail and id of the last row.
pub type EmailKey = (String, String);
/// Where a page sorted newest first by creation time and a text id starts.
pub type TimeTextKey = (i64, String);
/// Where a page sorted newest first by creation time and a numeric id starts.
pub type TimeNumberKey = (i64, i64);

/// A customer search: an e-mail prefix, and an id prefix when the query is long enough to be one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomerSearch {
    /// Lower-cased, trimmed: matches the start of a lower-cased e-mail.
    pub email_prefix: String,
    /// How the query, as typed and trimmed (ids are case-sensitive), matches ids.
    pub id: IdMatch,
}

/// How a customer search matches ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IdMatch {
    /// Not at all.
    #[default]
    None,
    /// The id is exactly this.
    Exact(String),
    /// The id starts with this.
    Prefix(String),
}

/// Credits a new user is given once (`credits.signupGrant` in `credits.toml`), password or
/// host user alike, in the transaction that creates the user: a user exists with them or not at
/// all. Only a user created with a [`crate::sign_up::SignupIdentity`] is given them, at most
/// once per identity (a UNIQUE row outliving the account), and at most `daily_cap` grants per
/// UTC day for the whole service. The ledger entry is an `admin_adjustment` noted `sign-up
/// credits`, its lot keyed by the user (one per user, whatever retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignupGrant {
    /// How many credits.
    pub amount: domain::Credits,
    /// How many days after sign-up they expire; `None`: never.
    pub expires_after_days: Option<u32>,
    /// The most sign-up grants given per UTC day, all instances together.
    pub daily_cap: std::num::NonZeroU32,
}

/// What became of a new user's sign-up credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignupGrantOutcome {
    /// Given.
    Granted,
    /// None configured, or the user has no identity that may be given them.
    NotEligible,
    /// The identity was given them before.
    AlreadyGranted,
    /// The UTC day's cap was reached.
    DailyCapReached,
}

/// Which orders to list (every filter optional; together they all apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderFilter {
    /// Only orders in this state.
    pub status: Option<domain::OrderStatusKind>,
    /// Only this provider's.
    pub provider: Option<ProviderId>,
    /// Only this user's.
    pub user_id: Option<UserId>,
}

/// A team account as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamAccountSummary {
    /// The account (its kind is always [`domain::AccountKind::Team`]).
    pub account: Account,
    /// Its balance (zero when it never held credits).
    pub balance: Credits,
    /// Its present members: a host organisation's members who are away are not counted, as
    /// they hold none of its seats.
    pub members: u64,
}

/// What a customer paid and was refunded in one currency, in minor units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentTotal {
    /// The currency.
    pub currency: Currency,
    /// Everything paid: orders paid (refunded later or not) and subscription renewals.
    pub paid_minor: i64,
    /// Everything refunded of those payments.
    pub refunded_minor: i64,
}

/// A value in an audit entry's before or after state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditValue {
    /// Text.
    Text(String),
    /// An integer (money in minor units, credits in hundredths, times in milliseconds).
    Integer(i64),
    /// Nothing.
    Null,
}

/// A before or after state: named values the store renders as one JSON object.
pub type AuditFacts = BTreeMap<String, AuditValue>;

/// The facts of a balance: `balanceHundredths`.
#[must_use]
pub fn balance_facts(hundredths: i64) -> AuditFacts {
    BTreeMap::from([(
        "balanceHundredths".to_owned(),
        AuditValue::Integer(hundredths),
    )])
}

/// What an administrator did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AuditAction {
    /// Credits granted.
    CreditsGranted,
    /// Credits debited.
    CreditsDebited,
    /// A refund asked of the provider.
    OrderRefunded,
    /// A subscription's cancellation asked of the provider.
    SubscriptionCanceled,
    /// A recorded webhook event replayed.
    WebhookReplayed,
    /// A plan created.
    PlanCreated,
    /// A plan updated.
    PlanUpdated,
    /// A plan deleted.
    PlanDeleted,
    /// Plans reordered.
    PlansReordered,
    /// An API key created.
    ApiKeyCreated,
    /// An API key revoked.
    ApiKeyRevoked,
    /// A webhook endpoint created.
    WebhookEndpointCreated,
    /// A webhook endpoint updated.
    WebhookEndpointUpdated,
    /// A webhook endpoint deleted.
    WebhookEndpointDeleted,
    /// A webhook endpoint's secret rotated.
    WebhookEndpointRotated,
    /// A delivery sent again.
    WebhookRedelivered,
    /// A hidden plan allowed to one user.
    PlanAllowed,
    /// A plan's allowance to one user withdrawn.
    PlanAllowanceRemoved,
    /// The configured catalogue copied into the plans table.
    PlansImported,
    /// A spend limit added to a customer's account.
    LimitAdded,
    /// A spend limit removed from a customer's account.
    LimitRemoved,
    /// A promo code created.
    PromoCodeCreated,
    /// A promo code switched off or on again.
    PromoCodeUpdated,
}

impl AuditAction {
    /// Every action.
    pub const ALL: [AuditAction; 23] = [
        Self::CreditsGranted,
        Self::CreditsDebited,
        Self::OrderRefunded,
        Self::SubscriptionCanceled,
        Self::WebhookReplayed,
        Self::PlanCreated,
        Self::PlanUpdated,
        Self::PlanDeleted,
        Self::PlansReordered,
        Self::ApiKeyCreated,
        Self::ApiKeyRevoked,
        Self::WebhookEndpointCreated,
        Self::WebhookEndpointUpdated,
        Self::WebhookEndpointDeleted,
        Self::WebhookEndpointRotated,
        Self::WebhookRedelivered,
        Self::PlanAllowed,
        Self::PlanAllowanceRemoved,
        Self::PlansImported,
        Self::LimitAdded,
        Self::LimitRemoved,
        Self::PromoCodeCreated,
        Self::PromoCodeUpdated,
    ];

    /// The stable code stored and shown (`credits.granted`, `order.refunded`, …).
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::CreditsGranted => "credits.granted",
            Self::CreditsDebited => "credits.debited",
            Self::OrderRefunded => "order.refunded",
            Self::SubscriptionCanceled => "subscription.canceled",
            Self::WebhookReplayed => "webhook_event.replayed",
            Self::PlanCreated => "plan.created",
            Self::PlanUpdated => "plan.updated",
            Self::PlanDeleted => "plan.deleted",
            Self::PlansReordered => "plans.reordered",
            Self::ApiKeyCreated => "api_key.created",
            Self::ApiKeyRevoked => "api_key.revoked",
            Self::WebhookEndpointCreated => "webhook_endpoint.created",
            Self::WebhookEndpointUpdated => "webhook_endpoint.updated",
            Self::WebhookEndpointDeleted => "webhook_endpoint.deleted",
            Self::WebhookEndpointRotated => "webhook_endpoint.rotated",
            Self::WebhookRedelivered => "webhook_delivery.redelivered",
            Self::PlanAllowed => "plan.allowed",
            Self::PlanAllowanceRemoved => "plan.allowance_removed",
            Self::PlansImported => "plans.imported",
            Self::LimitAdded => "limit.added",
            Self::LimitRemoved => "limit.removed",
            Self::PromoCodeCreated => "promo_code.created",
            Self::PromoCodeUpdated => "promo_code.updated",
        }
    }

    /// The action with this code.
    #[must_use]
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.code() == code)
    }
}

/// An entry to write to the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAudit {
    /// The acting administrator.
    pub admin_id: UserId,
    /// What they did.
    pub action: AuditAction,
    /// The kind of object acted on (`user`, `order`, `subscription`, `plan`, …).
    pub object_kind: &'static str,
    /// Its id.
    pub object_id: String,
    /// Its state before (what matters of it), when there was one.
    pub before: Option<AuditFacts>,
    /// Its state after.
    pub after: Option<AuditFacts>,
    /// When.
    pub at: Timestamp,
}

/// A write an administrator makes: the `admin` part of a [`super::ChangeSet`], performed in one
/// transaction with the set's audit entry; each means what the store method it names means, at
/// the set's time.
#[derive(Debug, Clone, Copy)]
pub enum AdminWrite<'a> {
    /// [`super::PlanRepository::create_plan`].
    CreatePlan(&'a StoredPlan),
    /// [`super::PlanRepository::update_plan`].
    UpdatePlan(&'a StoredPlan),
    /// [`super::PlanRepository::delete_plan`].
    DeletePlan(&'a PlanId),
    /// [`super::PlanRepository::reorder_plans`].
    ReorderPlans(&'a [PlanId]),
    /// [`super::ApiKeyRepository::create_api_key`]: the key and its secret's digest.
    CreateApiKey(&'a ApiKey, &'a TokenHash),
    /// [`super::ApiKeyRepository::revoke_api_key`], by key id.
    RevokeApiKey(&'a str),
    /// Allow a user a hidden plan (kept once per user and plan: allowing it again changes
    /// nothing but the audit log).
    AllowPlan(&'a PlanAllowance),
    /// Withdraw a user's allowance of a plan (nothing to withdraw is not an error).
    RemovePlanAllowance(&'a UserId, &'a PlanId),
    /// These plans inserted, or replacing the stored plan of the same id (its listing kept);
    /// new ones listed after the stored ones.
    ImportPlans(&'a [Plan]),
    /// [`super::SpendLimitStore::add_spend_limit`]: past the account's most limits it is
    /// [`StoreError::Conflict`], on a key not bound to the account [`StoreError::NotFound`].
    AddSpendLimit(&'a super::NewSpendLimit),
    /// [`super::SpendLimitStore::remove_spend_limit`]: [`StoreError::NotFound`] when the
    /// account has no such limit.
    RemoveSpendLimit(&'a AccountId, &'a domain::SpendLimitId),
    /// A promo code created: [`StoreError::Conflict`] when its code exists.
    CreatePromoCode(&'a super::StoredPromoCode),
    /// A promo code switched off (`false`) or on again, by id: [`StoreError::NotFound`] when
    /// there is none.
    SetPromoCodeActive(&'a str, bool),
}

/// A hidden plan an administrator allowed one user to buy or switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanAllowance {
    /// The user.
    pub user_id: UserId,
    /// The plan.
    pub plan_id: PlanId,
    /// The administrator who allowed it.
    pub allowed_by: UserId,
    /// When.
    pub allowed_at: Timestamp,
}

/// Whether a provider event written with an administrator's action was told to the host as a
/// `payment.mismatch` already (issue 18: a replayed mismatch is the same provider event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MismatchNotice {
    /// A `mismatch` outcome is told, as for any event.
    Tell,
    /// The event was recorded as a mismatch and told before: a `mismatch` again tells nothing.
    ToldBefore,
}

/// The administrator's action a payment event's write carries (a replay, a refund or cancel
/// Tally applies itself): its audit entry, written in the event's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAudit {
    /// The entry.
    pub entry: NewAudit,
    /// Whether a mismatch is told.
    pub mismatch: MismatchNotice,
}

/// An entry of the audit log as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Id (increasing).
    pub id: i64,
    /// The acting administrator.
    pub admin_id: UserId,
    /// What they did.
    pub action: AuditAction,
    /// The kind of object acted on.
    pub object_kind: String,
    /// Its id.
    pub object_id: String,
    /// Its state before, a JSON object as the store rendered it.
    pub before: Option<String>,
    /// Its state after, a JSON object.
    pub after: Option<String>,
    /// When.
    pub at: Timestamp,
}

/// The admin console's reads and its audited writes.
#[async_trait]
pub trait AdminConsoleStore: Send + Sync + 'static {
    /// Users whose lower-cased e-mail starts with `search.email_prefix`, or whose id matches
    /// `search.id`, sorted by lower-cased e-mail then id, both compared byte by
    /// byte (code point order).
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn search_users(
        &self,
        search: &CustomerSearch,
        keyset: &Keyset<EmailKey>,
    ) -> Result<KeysetPage<User, EmailKey>, StoreError>;

    /// Every user, newest first (by creation time, then id).
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn list_users(
        &self,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<User, TimeTextKey>, StoreError>;

    /// What `user` paid and was refunded, per currency, in currency-code order; no row for a
    /// currency never paid in.
    ///
    /// # Errors
    /// Storage failures.
    async fn payment_totals(&self, user: &UserId) -> Result<Vec<PaymentTotal>, StoreError>;

    /// Orders matching `filter`, newest first (by creation time, then id).
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn orders_page(
        &self,
        filter: &OrderFilter,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<OrderRecord, TimeTextKey>, StoreError>;

    /// Every team account, newest first (by creation time, then id), each with its balance and
    /// its present members counted; personal accounts are never listed.
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn team_accounts(
        &self,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<TeamAccountSummary, TimeTextKey>, StoreError>;

    /// `user`'s credit transactions, newest first (by creation time, then id).
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn transactions_page(
        &self,
        user: &UserId,
        keyset: &Keyset<TimeNumberKey>,
    ) -> Result<KeysetPage<CreditTransaction, TimeNumberKey>, StoreError>;

    /// Recorded provider events matching `filter`, newest first (by inbox id).
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn inbox_page(
        &self,
        filter: &InboxFilter,
        keyset: &Keyset<i64>,
    ) -> Result<KeysetPage<RecordedEvent, i64>, StoreError>;

    /// One recorded provider event.
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn find_recorded_event(&self, id: i64) -> Result<Option<RecordedEvent>, StoreError>;

    /// Write one audit entry (for an action whose only write is this entry, like a refund
    /// asked of a provider); returns its id.
    ///
    /// # Errors
    /// Storage failures.
    async fn record_audit(&self, entry: &NewAudit) -> Result<i64, StoreError>;

    /// The audit log, newest first (by id).
    ///
    /// # Errors
    /// As [`AdminConsoleStore::search_users`].
    async fn audit_page(
        &self,
        keyset: &Keyset<i64>,
    ) -> Result<KeysetPage<AuditEntry, i64>, StoreError>;
}
