//! Storage ports: users, sessions, API keys, dynamic plans, orders, subscriptions, the webhook
//! inbox, idempotency records and the credit ledger.
//!
//! Contract for every adapter: a method either commits all of its effect or none of it; a
//! database that stays busy (SQLite `BUSY`, PostgreSQL serialization failure or deadlock) past a
//! bounded number of retries MUST surface as [`StoreError::Busy`]; a stored row that fails the
//! domain's validating constructors MUST surface as [`StoreError::Corrupt`], never a panic.

use async_trait::async_trait;
use domain::{
    AccountId, BillingPeriod, CreditDelta, Credits, IdempotencyKey, KeptRefund, Locale, Money,
    Order, OrderId, Plan, PlanId, ProviderId, ReservationId, Subscription, SubscriptionId,
    Timestamp, TransactionKind, UserId,
};

use super::{EntitlementsTold, NewAudit};
use crate::accounts::{
    ApiKey, BuyerContact, Email, PasswordHash, PortalSession, Role, TokenHash, User,
};
use crate::host_events::HostEvent;
use crate::pagination::{Page, PageRequest};
use crate::sign_up::SignupIdentity;

/// What any storage operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The row does not exist.
    #[error("not found")]
    NotFound,
    /// A uniqueness rule or an expected state did not hold (the caller may re-read and retry).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database stayed busy past the retry budget, or is unreachable.
    #[error("database busy or unavailable")]
    Busy(#[source] anyhow::Error),
    /// A stored row failed validation.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The database's guard (a conditional decrement, a `CHECK`) refused, or left another
    /// balance than, a posting the ledger's rules decided on the balance its transaction locked:
    /// an invariant broke, and nothing was written. Never turned into an answer such as
    /// "insufficient"; the use case that meets it logs and counts it
    /// ([`crate::ports::Metrics::spend_disagreement`]).
    #[error("the spend rule and the database disagree on {account}'s balance: {disagreement}")]
    SpendDisagreement {
        /// Whose balance.
        account: AccountId,
        /// What was decided, and what the guard did.
        disagreement: domain::SpendDisagreement,
    },
    /// Anything else.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// Whether an idempotent command ran now or returned an earlier outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The command took effect now.
    Fresh,
    /// The same key and request were seen before; this is the first outcome again.
    Replayed,
}

// ---------------------------------------------------------------------------------------------
// Users, sessions and API keys

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// Id.
    pub id: UserId,
    /// Sign-in address (unique).
    pub email: Email,
    /// Password hash; `None` for users who sign in through a host application's JWTs.
    pub password_hash: Option<PasswordHash>,
    /// Role.
    pub role: Role,
    /// Now.
    pub created_at: Timestamp,
    /// Whom the sign-up credits would be given to; `None`: none are (see [`SignupGrant`]).
    pub signup_identity: Option<SignupIdentity>,
}

/// A host application's user as a token names it: its identity in the host's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHostUser {
    /// The host's issuer (`''` when no issuer is configured).
    pub issuer: String,
    /// The token's subject, unique within the issuer.
    pub subject: String,
    /// Now (the creation time if the identity is new).
    pub created_at: Timestamp,
    /// Whom the sign-up credits would be given to if the user is created; `None`: none are.
    pub signup_identity: Option<SignupIdentity>,
    /// How the payment provider may reach the user, as the token says now: stored with the
    /// identity, and what is stored replaced when the token says something else (a detail
    /// the token does not carry keeps its stored value).
    pub contact: BuyerContact,
}

/// The id prefix of users created for host identities (password accounts are `usr_…`).
pub const HOST_USER_ID_PREFIX: &str = "hst_";

/// 26 hex digits (104 bits) of SHA-256 of `parts` joined by a 0x00 byte: the part of an id
/// derived from a host's identity (a host user's from issuer and subject, a host organisation's
/// team from its issuer and id), the same on every instance that derives it. No part holds a
/// NUL (the callers refuse control characters), so the input is unambiguous.
#[must_use]
pub fn derived_id_digits(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            digest.update([0_u8]);
        }
        digest.update(part.as_bytes());
    }
    digest
        .finalize()
        .iter()
        .take(13)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Users and their sign-in sessions.
#[async_trait]
pub trait UserRepository: Send + Sync + 'static {
    /// Create a user. With a sign-up grant configured and a `signup_identity`, the user is
    /// given its credits in the same transaction, unless that identity was given them before
    /// (whatever became of that account) or the UTC day's cap is reached: the identity is
    /// claimed by a UNIQUE row and the day's count taken by one conditional statement, never
    /// by a read then a write. A sign-up past the cap is still created and counted as capped.
    ///
    /// # Errors
    /// MUST return [`StoreError::Conflict`] when the e-mail address or id is taken.
    async fn create_user(&self, user: &NewUser) -> Result<User, StoreError>;

    /// Find a user and its password hash by e-mail address.
    ///
    /// # Errors
    /// Storage failures only; an unknown address is `Ok(None)`.
    async fn find_user_by_email(
        &self,
        email: &Email,
    ) -> Result<Option<(User, Option<PasswordHash>)>, StoreError>;

    /// Find a user by id.
    ///
    /// # Errors
    /// Storage failures only.
    async fn find_user(&self, id: &UserId) -> Result<Option<User>, StoreError>;

    /// The user a host application's identity (issuer, subject) maps to, creating it and the
    /// mapping on first use, in one transaction. A new user gets an id derived only from
    /// (issuer, subject) and starting with [`HOST_USER_ID_PREFIX`], the placeholder address
    /// `<id>@host.invalid`, no password and the role `user`, so two instances racing on the
    /// same identity end with the one mapped user. The user MUST be read through the mapping,
    /// never by id alone, and MUST NOT be a password account.
    ///
    /// # Errors
    /// MUST return [`StoreError::Conflict`] when the mapping cannot be made or names a password
    /// account (an id collision); storage failures otherwise. A user created here is given the
    /// sign-up credits by the rule of [`UserRepository::create_user`].
    async fn find_or_create_host_user(&self, user: &NewHostUser) -> Result<User, StoreError>;

    /// How the payment provider may reach user `id`: a host user's stored contact details,
    /// else the account's own address (never a `.invalid` placeholder).
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] for an unknown user.
    async fn find_buyer_contact(&self, id: &UserId) -> Result<BuyerContact, StoreError>;

    /// Change a user's role.
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] for an unknown user.
    async fn set_role(&self, id: &UserId, role: Role) -> Result<(), StoreError>;

    /// Store a session token's hash for `user` until `expires_at`.
    ///
    /// # Errors
    /// Storage failures only.
    async fn create_session(
        &self,
        token: &TokenHash,
        user: &UserId,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> Result<(), StoreError>;

    /// The user of an unexpired session.
    ///
    /// # Errors
    /// Storage failures only; unknown or expired sessions are `Ok(None)`.
    async fn find_session_user(
        &self,
        token: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<User>, StoreError>;

    /// Delete a session (sign out). Deleting an unknown session is not an error.
    ///
    /// # Errors
    /// Storage failures only.
    async fn delete_session(&self, token: &TokenHash) -> Result<(), StoreError>;

    /// Store a customer-portal link (its token's digest) for a user, unopened.
    ///
    /// # Errors
    /// Storage failures only.
    async fn create_portal_link(&self, link: &NewPortalLink) -> Result<(), StoreError>;

    /// Open the portal link `link` once: only if it was never opened and `now` is before its
    /// end, mark it opened at `now` with the session `session` lasting until
    /// `session_expires_at`, in one conditional statement (two requests with the same link
    /// never both open it). `None` when the link is unknown, used or expired.
    ///
    /// # Errors
    /// Storage failures only.
    async fn open_portal_link(
        &self,
        link: &TokenHash,
        session: &TokenHash,
        now: Timestamp,
        session_expires_at: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError>;

    /// The unexpired portal session `session`, with its user.
    ///
    /// # Errors
    /// Storage failures only; unknown or expired sessions are `Ok(None)`.
    async fn find_portal_session(
        &self,
        session: &TokenHash,
        now: Timestamp,
    ) -> Result<Option<PortalSession>, StoreError>;
}

/// A customer-portal link to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPortalLink {
    /// The digest of the link's token (the token itself is only in the URL).
    pub link: TokenHash,
    /// Whose billing it opens.
    pub user_id: UserId,
    /// The team whose billing it opens; `None`: the user's own.
    pub account_id: Option<domain::AccountId>,
    /// Where "Back to the app" leads.
    pub return_url: domain::ReturnUrl,
    /// The page language asked for.
    pub locale: Option<String>,
    /// The API key that asked for it (its id).
    pub created_by: String,
    /// When.
    pub created_at: Timestamp,
    /// Until when it can be opened.
    pub expires_at: Timestamp,
}

/// Service API keys (stored hashed).
#[async_trait]
pub trait ApiKeyRepository: Send + Sync + 'static {
    /// Store a new key's record and hash.
    ///
    /// # Errors
    /// MUST return [`StoreError::Conflict`] when the id or hash exists.
    async fn create_api_key(&self, key: &ApiKey, hash: &TokenHash) -> Result<(), StoreError>;

    /// The unrevoked key with this hash.
    ///
    /// # Errors
    /// Storage failures only.
    async fn find_api_key(&self, hash: &TokenHash) -> Result<Option<ApiKey>, StoreError>;

    /// Every key, newest first, revoked ones included.
    ///
    /// # Errors
    /// Storage failures only.
    async fn list_api_keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// Revoke a key. Revoking a revoked key is not an error.
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] for an unknown id.
    async fn revoke_api_key(&self, id: &str, now: Timestamp) -> Result<(), StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Dynamic plans

/// How a dynamic plan is listed (the dynamic-mode extras of spec section 1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// Position on `/pricing`, ascending.
    pub sort_order: i32,
    /// Locales the plan is shown in; empty means every locale.
    pub locales: Vec<Locale>,
}

/// A plan in the dynamic table. The strikethrough price is the plan's `originalAmount` and the
/// hidden flag its visibility.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPlan {
    /// The validated plan.
    pub plan: Plan,
    /// Listing extras.
    pub listing: Listing,
}

/// What an import of static plans did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportReport {
    /// Plans that were new.
    pub created: u32,
    /// Plans that replaced a stored plan of the same id (listing kept).
    pub updated: u32,
}

/// The dynamic plans table (`pricing_plan`).
#[async_trait]
pub trait PlanRepository: Send + Sync + 'static {
    /// Every stored plan in listing order (sort order, then id).
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for a row that is not a valid plan.
    async fn list_plans(&self) -> Result<Vec<StoredPlan>, StoreError>;

    /// One plan.
    ///
    /// # Errors
    /// As [`PlanRepository::list_plans`].
    async fn find_plan(&self, id: &PlanId) -> Result<Option<StoredPlan>, StoreError>;

    /// Whether an administrator allowed `user` the plan `plan` ([`super::AdminWrite::AllowPlan`]).
    ///
    /// # Errors
    /// Storage failures.
    async fn plan_allowed(&self, user: &UserId, plan: &PlanId) -> Result<bool, StoreError>;

    /// The plans allowed to `user`, by plan id.
    ///
    /// # Errors
    /// Storage failures.
    async fn plan_allowances(&self, user: &UserId)
    -> Result<Vec<super::PlanAllowance>, StoreError>;

    /// Add a plan.
    ///
    /// # Errors
    /// MUST return [`StoreError::Conflict`] when the id exists.
    async fn create_plan(&self, plan: &StoredPlan, now: Timestamp) -> Result<(), StoreError>;

    /// Replace a plan of the same id.
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] for an unknown id.
    async fn update_plan(&self, plan: &StoredPlan, now: Timestamp) -> Result<(), StoreError>;

    /// Remove a plan. Orders keep their own snapshot of it.
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] for an unknown id.
    async fn delete_plan(&self, id: &PlanId) -> Result<(), StoreError>;

    /// Give the listed plans sort orders 0, 1, 2, … in the given order, in one transaction;
    /// plans not listed keep their order after them.
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] when an id is unknown (and change nothing).
    async fn reorder_plans(&self, ids: &[PlanId], now: Timestamp) -> Result<(), StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Orders and idempotency

/// What the provider's checkout gave back for an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRecord {
    /// The provider's id for the payment (session, order, trade number).
    pub provider_reference: Option<String>,
    /// Where to send the buyer, or what to encode in the QR code.
    pub target: CheckoutTarget,
}

/// Where the buyer pays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutTarget {
    /// A page to redirect to.
    Redirect(String),
    /// A payment link to show as a QR code (`wallet_qr`).
    QrCode(String),
}

/// An order with what the store keeps beside the domain order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    /// The order.
    pub order: Order,
    /// The checkout, once the gateway created it.
    pub checkout: Option<CheckoutRecord>,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// A verified provider event that did not match the order (amount or currency), for admins.
    pub mismatch: Option<String>,
    /// Bumped by every change a provider event makes: the webhook pipeline's compare-and-set.
    pub version: i64,
    /// The provider's id of a charge made without a checkout (an automatic top-up's), which
    /// its refunds name.
    pub charge_reference: Option<String>,
}

impl OrderRecord {
    /// The version of an order just created, before any change.
    pub const FIRST_VERSION: i64 = 0;

    /// The order as the provider knows it.
    #[must_use]
    pub fn payment_ref(&self) -> crate::ports::PaymentRef {
        crate::ports::PaymentRef {
            order_id: self.order.id().clone(),
            provider_reference: self
                .checkout
                .as_ref()
                .and_then(|c| c.provider_reference.clone())
                .or_else(|| self.charge_reference.clone()),
        }
    }
}

/// The idempotency facts of a money-moving request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// The caller's key.
    pub key: IdempotencyKey,
    /// A fingerprint of the request body, to tell a retry from a different request.
    pub request_hash: String,
}

/// What creating an order did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOrderOutcome {
    /// The order was created.
    Created,
    /// The key was used before with the same request: the earlier order.
    Replayed(OrderRecord),
    /// The key was used before with a different request.
    KeyConflict,
}

/// Orders.
#[async_trait]
pub trait OrderRepository: Send + Sync + 'static {
    /// Create a pending order and, when given, its idempotency record, in one transaction.
    ///
    /// # Errors
    /// Storage failures. A reused key is an `Ok` outcome, not an error.
    async fn create_order(
        &self,
        order: &Order,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<CreateOrderOutcome, StoreError>;

    /// What [`OrderRepository::create_order`] would answer for `idempotency` without writing
    /// anything: `Some(Replayed)` or `Some(KeyConflict)` when `user` used the key before, `None`
    /// when it is new (a use case answers a retry before checks that may have changed since).
    ///
    /// # Errors
    /// Storage failures.
    async fn earlier_order(
        &self,
        user: &UserId,
        idempotency: &IdempotencyRecord,
    ) -> Result<Option<CreateOrderOutcome>, StoreError>;

    /// Record the checkout of a pending order.
    ///
    /// # Errors
    /// MUST return [`StoreError::NotFound`] for an unknown order and [`StoreError::Conflict`]
    /// when the order is no longer pending.
    async fn attach_checkout(
        &self,
        id: &OrderId,
        checkout: &CheckoutRecord,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    /// One order.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn find_order(&self, id: &OrderId) -> Result<Option<OrderRecord>, StoreError>;

    /// The order a provider knows by `reference`.
    ///
    /// # Errors
    /// As [`OrderRepository::find_order`].
    async fn find_order_by_reference(
        &self,
        provider: ProviderId,
        reference: &str,
    ) -> Result<Option<OrderRecord>, StoreError>;

    /// An account's orders (what was bought for it, by whichever member), newest first.
    ///
    /// # Errors
    /// As [`OrderRepository::find_order`].
    async fn list_orders(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<OrderRecord>, StoreError>;

    /// Up to `limit` pending orders created before `created_before`, oldest first, for the
    /// reconciler. On PostgreSQL the rows are claimed with `FOR UPDATE SKIP LOCKED` for
    /// `lease_ms`, so that several instances never work on the same order at once.
    ///
    /// # Errors
    /// Storage failures.
    async fn claim_pending_orders(
        &self,
        created_before: Timestamp,
        limit: u32,
        now: Timestamp,
        lease_ms: i64,
    ) -> Result<Vec<OrderRecord>, StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Subscriptions

/// Subscriptions.
#[async_trait]
pub trait SubscriptionRepository: Send + Sync + 'static {
    /// One subscription.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn find_subscription(
        &self,
        id: &SubscriptionId,
    ) -> Result<Option<Subscription>, StoreError>;

    /// The subscription a provider knows by its id.
    ///
    /// # Errors
    /// As [`SubscriptionRepository::find_subscription`].
    async fn find_subscription_by_provider_id(
        &self,
        provider: ProviderId,
        provider_subscription_id: &str,
    ) -> Result<Option<Subscription>, StoreError>;

    /// The subscription created by an order.
    ///
    /// # Errors
    /// As [`SubscriptionRepository::find_subscription`].
    async fn find_subscription_by_order(
        &self,
        order: &OrderId,
    ) -> Result<Option<Subscription>, StoreError>;

    /// An account's subscriptions, most recently changed first.
    ///
    /// # Errors
    /// As [`SubscriptionRepository::find_subscription`].
    async fn list_subscriptions(
        &self,
        account: &AccountId,
    ) -> Result<Vec<Subscription>, StoreError>;

    /// One page of an account's subscriptions, newest first (by when each started, then by id).
    ///
    /// # Errors
    /// As [`SubscriptionRepository::find_subscription`].
    async fn page_subscriptions(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<Subscription>, StoreError>;

    /// The order that started subscription `id` (its plan snapshot is what the subscription was
    /// sold with); `None` when the subscription or its order is unknown.
    ///
    /// # Errors
    /// As [`SubscriptionRepository::find_subscription`]; [`StoreError::Corrupt`] for an invalid
    /// order row.
    async fn subscription_order(
        &self,
        id: &SubscriptionId,
    ) -> Result<Option<OrderRecord>, StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Refunds and subscription charges

/// One paid period of a subscription: what refunds of that charge take back from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionCharge {
    /// The subscription.
    pub subscription_id: SubscriptionId,
    /// Whose subscription.
    pub user_id: UserId,
    /// The account it belongs to: the owner of its credits.
    pub account_id: AccountId,
    /// Its provider.
    pub provider: ProviderId,
    /// The provider's id for the charge (what its refunds name), when the provider gave one.
    pub charge_ref: Option<String>,
    /// The order that started the subscription, on its first period's charge.
    pub order_id: Option<OrderId>,
    /// The period it paid.
    pub period: BillingPeriod,
    /// What it paid.
    pub amount: Money,
    /// The credits it granted, if any.
    pub credits: Option<Credits>,
    /// The refunded total acted on so far.
    pub refunded: Money,
    /// When it was paid.
    pub paid_at: Timestamp,
    /// When the plan change it paid was asked, for a plan change's proration (issue 19): its
    /// credits are that change's lot (`GrantSource::PlanChange`), not a period's. `None` for a
    /// period's charge.
    pub plan_change_at: Option<Timestamp>,
}

/// What a refund report is kept against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundTarget {
    /// An order's payment.
    Order(OrderId),
    /// A subscription charge, by the provider's id for it (known or not yet).
    Charge(String),
}

/// A verified refund report, kept once per `(provider, key)` against the payment it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRecord {
    /// The provider.
    pub provider: ProviderId,
    /// Unique per provider: the refund or dispute id, or the running total for the payment.
    pub key: String,
    /// The payment.
    pub target: RefundTarget,
    /// Its form and amount.
    pub refund: KeptRefund,
    /// When it was received.
    pub received_at: Timestamp,
}

/// A change of a subscription charge within a payment event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeChange {
    /// Record a newly paid period (UNIQUE per subscription and period start, and per provider
    /// and charge id).
    Record(SubscriptionCharge),
    /// Move a charge's refunded total, if it is still `expected` (compare-and-set).
    Refund {
        /// The subscription.
        subscription_id: SubscriptionId,
        /// The period's start.
        period_start: Timestamp,
        /// The refunded total it must still have.
        expected: Money,
        /// Its new refunded total.
        refunded: Money,
    },
}

/// Refund reports and subscription charges.
#[async_trait]
pub trait RefundRepository: Send + Sync + 'static {
    /// Every refund report kept against `target` of `provider`, oldest first.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn refunds_of(
        &self,
        provider: ProviderId,
        target: &RefundTarget,
    ) -> Result<Vec<RefundRecord>, StoreError>;

    /// The credits the lot of `source` was granted with, if it has one (an upgrade that granted
    /// nothing has none).
    ///
    /// # Errors
    /// As [`RefundRepository::refunds_of`].
    async fn granted_by(&self, source: &GrantSource) -> Result<Option<Credits>, StoreError>;

    /// The lots granted for plan changes of `subscription` ([`GrantSource::PlanChange`]): when
    /// each change was asked, and the credits its lot was granted with, in the order asked.
    ///
    /// # Errors
    /// As [`RefundRepository::refunds_of`].
    async fn change_grants(
        &self,
        subscription: &SubscriptionId,
    ) -> Result<Vec<(Timestamp, Credits)>, StoreError>;

    /// The subscription charge a provider knows by `charge_ref`.
    ///
    /// # Errors
    /// As [`RefundRepository::refunds_of`].
    async fn find_charge(
        &self,
        provider: ProviderId,
        charge_ref: &str,
    ) -> Result<Option<SubscriptionCharge>, StoreError>;

    /// The first period's charge of the subscription started by `order`.
    ///
    /// # Errors
    /// As [`RefundRepository::refunds_of`].
    async fn find_charge_of_order(
        &self,
        order: &OrderId,
    ) -> Result<Option<SubscriptionCharge>, StoreError>;

    /// At most `limit` charges whose kept refund reports add up to more than they have applied:
    /// a refund kept because its charge had not landed, committed while the charge's own
    /// payment was being applied (on another instance), is applied by the reconciler from these.
    ///
    /// # Errors
    /// As [`RefundRepository::refunds_of`].
    async fn charges_with_unapplied_refunds(
        &self,
        limit: u32,
    ) -> Result<Vec<SubscriptionCharge>, StoreError>;
}

// ---------------------------------------------------------------------------------------------
// Credit ledger

/// A credit transaction as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditTransaction {
    /// Id (increasing).
    pub id: i64,
    /// Whose balance: the account charged or credited.
    pub account_id: AccountId,
    /// The member of a team's account who spent (`None` on a personal account, whose only
    /// member is its user, and on grants).
    pub member_id: Option<UserId>,
    /// Kind (its code localises the description).
    pub kind: TransactionKind,
    /// Signed amount.
    pub amount: CreditDelta,
    /// Balance after it.
    pub balance_after: Credits,
    /// What it relates to.
    pub context: UsageContext,
    /// When.
    pub created_at: Timestamp,
}

/// What a credit transaction relates to, for the history.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsageContext {
    /// The order that bought or refunded the credits.
    pub order_id: Option<OrderId>,
    /// The subscription whose period granted them.
    pub subscription_id: Option<SubscriptionId>,
    /// The reservation held, settled or released.
    pub reservation_id: Option<ReservationId>,
    /// The feature used.
    pub feature: Option<String>,
    /// The AI model used.
    pub model: Option<String>,
    /// Tokens used.
    pub tokens: Option<u64>,
    /// A free-text note (admin adjustments).
    pub note: Option<String>,
    /// The API key the spend or hold was made with (`None`: made in the browser, by an
    /// operator, or not a spend). The limits on that key count it.
    pub api_key_id: Option<String>,
    /// The call's tokens by kind, when the caller reported them (`tokens` is their total).
    pub breakdown: Option<domain::pricing::TokenUsage>,
    /// When the price-book entry that priced the use took effect (the entry of `model`);
    /// `None`: priced by the per-kilotoken or fixed rules.
    pub price_from: Option<Timestamp>,
    /// The provider's cost of the use, in millionths of the price book's cost currency,
    /// when the entry that priced it records costs.
    pub cost_basis_millionths: Option<i64>,
    /// What a grant's credits are (a grant's row only).
    pub grant_category: Option<domain::GrantCategory>,
}

impl UsageContext {
    /// The context with how `priced` priced the use.
    #[must_use]
    pub fn priced(mut self, priced: &domain::pricing::Priced) -> Self {
        self.price_from = priced.entry.as_ref().map(|e| e.effective_from);
        self.cost_basis_millionths = priced.cost_basis_millionths;
        self
    }
}

impl UsageContext {
    /// The spend as limits see it ([`domain::LimitScope::counts`]): its feature, model and
    /// API key, and the team `member` who made it.
    #[must_use]
    pub fn spent_as(&self, member: Option<&UserId>) -> domain::LimitScope {
        domain::LimitScope {
            feature: self.feature.clone(),
            model: self.model.clone(),
            api_key: self.api_key_id.clone(),
            member: member.cloned(),
        }
    }
}

/// Spend credits now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumeCommand {
    /// The account charged.
    pub account_id: AccountId,
    /// The member who spends from a team's account (`None` for a personal account: its user).
    /// The store checks the membership and the member's limit in the spend's transaction.
    pub member_id: Option<UserId>,
    /// The cost.
    pub amount: Credits,
    /// Makes the call safe to retry.
    pub idempotency: IdempotencyRecord,
    /// What was used.
    pub context: UsageContext,
    /// Now.
    pub now: Timestamp,
    /// The balance below which a crossing is told (`credits.low_balance`), if configured.
    pub low_balance_below: Option<Credits>,
    /// Which lots the spend draws first among lots of equal priority and expiry.
    pub spend_order: domain::SpendOrder,
}

/// Why spending credits was refused.
#[derive(Debug, thiserror::Error)]
pub enum SpendError {
    /// The balance does not cover the cost.
    #[error("insufficient credits: requested {requested}, available {available}")]
    Insufficient {
        /// The cost.
        requested: Credits,
        /// The balance.
        available: Credits,
    },
    /// The idempotency key was used with a different request.
    #[error("idempotency key reused with a different request")]
    IdempotencyConflict,
    /// The spender is not a member of the team's account (any more): nothing written.
    #[error("not a member of this account")]
    NotAMember,
    /// A spend limit (the member's or the account's) does not leave room for the spend:
    /// nothing written.
    #[error("a spend limit leaves {} of {} this {}", .0.left, .0.credits, .0.window.code())]
    LimitReached(domain::LimitReached),
    /// An increase would take the balance past the ledger's largest balance
    /// ([`domain::credits::MAX_CREDITS_HUNDREDTHS`]); nothing was written.
    #[error("the balance {balance} plus {amount} would exceed the largest balance")]
    BalanceLimit {
        /// The balance.
        balance: Credits,
        /// The increase refused.
        amount: Credits,
    },
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A credit reservation (a two-phase hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Id.
    pub id: ReservationId,
    /// The account whose credits are held.
    pub account_id: AccountId,
    /// The member of a team's account who holds them (`None` on a personal account).
    pub member_id: Option<UserId>,
    /// Held amount.
    pub held: Credits,
    /// Where it is.
    pub status: ReservationStatus,
    /// What it is for.
    pub context: UsageContext,
    /// When made.
    pub created_at: Timestamp,
    /// When an unsettled hold is released by itself.
    pub expires_at: Timestamp,
}

/// Where a reservation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationStatus {
    /// Holding credits.
    Pending,
    /// Settled: `charged` was finally spent, for a reported usage of `actual`.
    Settled {
        /// The usage reported at settle.
        actual: Credits,
        /// What was charged (at most the hold plus what was available).
        charged: Credits,
    },
    /// Released unused.
    Released,
    /// Released by itself at expiry.
    Expired,
}

impl ReservationStatus {
    /// The stable code.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        self.kind().code()
    }

    /// Which status it is, without its amounts.
    #[must_use]
    pub const fn kind(&self) -> ReservationStatusKind {
        match self {
            ReservationStatus::Pending => ReservationStatusKind::Pending,
            ReservationStatus::Settled { .. } => ReservationStatusKind::Settled,
            ReservationStatus::Released => ReservationStatusKind::Released,
            ReservationStatus::Expired => ReservationStatusKind::Expired,
        }
    }
}

/// A [`ReservationStatus`] without its amounts: what a store keeps as the status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationStatusKind {
    /// [`ReservationStatus::Pending`].
    Pending,
    /// [`ReservationStatus::Settled`].
    Settled,
    /// [`ReservationStatus::Released`].
    Released,
    /// [`ReservationStatus::Expired`].
    Expired,
}

impl ReservationStatusKind {
    /// Every kind.
    pub const ALL: [ReservationStatusKind; 4] = [
        ReservationStatusKind::Pending,
        ReservationStatusKind::Settled,
        ReservationStatusKind::Released,
        ReservationStatusKind::Expired,
    ];

    /// The stable code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            ReservationStatusKind::Pending => "pending",
            ReservationStatusKind::Settled => "settled",
            ReservationStatusKind::Released => "released",
            ReservationStatusKind::Expired => "expired",
        }
    }

    /// The kind a stored code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }
}

/// Hold credits for work whose cost is known afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveCommand {
    /// The new reservation's id.
    pub reservation_id: ReservationId,
    /// The account whose credits are held.
    pub account_id: AccountId,
    /// The member who holds them on a team's account (`None` for a personal account).
    pub member_id: Option<UserId>,
    /// The estimate to hold.
    pub amount: Credits,
    /// Makes the call safe to retry.
    pub idempotency: IdempotencyRecord,
    /// What it is for.
    pub context: UsageContext,
    /// Now.
    pub now: Timestamp,
    /// When the hold lapses by itself.
    pub expires_at: Timestamp,
    /// The balance below which a crossing is told (`credits.low_balance`), if configured.
    pub low_balance_below: Option<Credits>,
}

/// Why a settle or release was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReservationError {
    /// No such reservation for this user.
    #[error("reservation not found")]
    NotFound,
    /// The reservation was already resolved differently (released, expired, or settled with
    /// another amount).
    #[error("reservation is already {0}")]
    AlreadyResolved(&'static str),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where grant credits come from; UNIQUE in storage, so one source grants once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantSource {
    /// A paid credits order.
    Order(OrderId),
    /// The bonus credits of a paid credits order (its pack's `bonusCredits`).
    OrderBonus(OrderId),
    /// A paid billing period of a subscription, identified by the period's start.
    SubscriptionPeriod(SubscriptionId, BillingPeriod),
    /// An administrator's adjustment (or a sign-up grant), by a unique reference.
    Admin(String),
    /// The extra credits of an upgrade the provider confirmed (issue 19), identified by the
    /// subscription and the time the switch was asked (one request grants once).
    PlanChange(SubscriptionId, Timestamp),
    /// A promo code's redemption, by the redemption's id; its ledger entry is noted
    /// "Promo code <code>" and its credits are of the code's category.
    Promo {
        /// The redemption's id.
        redemption: String,
        /// The code redeemed.
        code: domain::PromoCode,
        /// What its credits are.
        category: domain::GrantCategory,
    },
}

impl GrantSource {
    /// What the credits of a grant from this source are: bought (an order, a subscription
    /// period, an upgrade's extra credits) or, from an administrator, compensation.
    #[must_use]
    pub fn category(&self) -> domain::GrantCategory {
        match self {
            GrantSource::Order(_)
            | GrantSource::SubscriptionPeriod(..)
            | GrantSource::PlanChange(..) => domain::GrantCategory::Paid,
            GrantSource::Admin(_) => domain::GrantCategory::Compensation,
            GrantSource::Promo { category, .. } => *category,
            GrantSource::OrderBonus(_) => domain::GrantCategory::Bonus,
        }
    }
}

/// Grant credits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantCommand {
    /// To which account (a buyer's personal account).
    pub account_id: AccountId,
    /// How much.
    pub amount: Credits,
    /// From what (unique).
    pub source: GrantSource,
    /// When the granted credits expire, if they do.
    pub expires_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}

/// Take back the unspent part of an order's grant after a refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClawbackCommand {
    /// Whose credits: the account the grant went to.
    pub account_id: AccountId,
    /// The grant clawed back: a refunded order's, or a refunded subscription period's.
    pub source: GrantSource,
    /// How much the refund should take back (the refunded share of the grant, not yet clawed back).
    pub wanted: Credits,
    /// Now.
    pub now: Timestamp,
}

/// What a grant, clawback or expiry did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerEffect {
    /// A transaction was written.
    Written(CreditTransaction),
    /// Nothing to do: already granted, nothing left to take, or nothing due.
    Nothing,
}

/// An administrator's signed correction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdjustCommand {
    /// Whose credits: a user's personal account or a team's.
    pub account_id: AccountId,
    /// Signed amount.
    pub amount: CreditDelta,
    /// Why, shown in the history.
    pub note: String,
    /// Unique reference (makes the adjustment idempotent).
    pub reference: String,
    /// When granted credits expire (an increase only: promotional credits), if they do.
    pub expires_at: Option<Timestamp>,
    /// What granted credits are (an increase only), and their priority in spend order.
    pub grant: (domain::GrantCategory, domain::GrantPriority),
    /// Which lots a debit draws first among lots of equal priority and expiry.
    pub spend_order: domain::SpendOrder,
    /// Now.
    pub now: Timestamp,
}

/// The credit ledger. Balances never go below zero (the database enforces it too); every
/// change writes one append-only transaction recording the balance after it.
#[async_trait]
pub trait CreditLedger: Send + Sync + 'static {
    /// The balance (0 for a user with no credits yet).
    ///
    /// # Errors
    /// Storage failures.
    async fn balance(&self, account: &AccountId) -> Result<Credits, StoreError>;

    /// A page of a user's transactions, newest first.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn transactions(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<CreditTransaction>, StoreError>;

    /// A user's pending reservations.
    ///
    /// # Errors
    /// Storage failures.
    async fn pending_reservations(
        &self,
        account: &AccountId,
    ) -> Result<Vec<Reservation>, StoreError>;

    /// The account's grant lots that still hold credits and have not expired.
    ///
    /// # Errors
    /// Storage failures.
    async fn grant_lots(&self, account: &AccountId) -> Result<Vec<domain::GrantLot>, StoreError>;

    /// Release up to `limit` pending reservations whose `expires_at` has passed; returns how many.
    ///
    /// # Errors
    /// Storage failures.
    async fn expire_reservations(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError>;

    /// Write `expiry` transactions for up to `limit` grants past their expiry with credits left.
    ///
    /// # Errors
    /// Storage failures.
    async fn expire_grants(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError>;
}

// ---------------------------------------------------------------------------------------------
// The webhook pipeline's single transaction

/// The inbox row of one provider event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEntry {
    /// Provider.
    pub provider: ProviderId,
    /// The provider's event id (UNIQUE with the provider).
    pub event_id: String,
    /// The provider's event type.
    pub event_type: String,
    /// The raw body, kept for audit and replay.
    pub payload: String,
    /// What processing decided (stored as its code: `applied`, `ignored`, `stale`, `mismatch`, …).
    pub outcome: domain::EventOutcome,
    /// Details for admins.
    pub detail: Option<String>,
    /// Now.
    pub received_at: Timestamp,
    /// The user whose order or subscription the event names, when known: told with a
    /// `payment.mismatch` (not kept in the inbox; `None` when read back).
    pub user_id: Option<UserId>,
}

/// An order change within a payment event: `before` becomes `after` (compare-and-set on the
/// version `before` was read at). Only the status and the mismatch are written: an order's
/// other parts never change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderChange {
    /// The order as read.
    pub before: Order,
    /// The version it must still have (compare-and-set); the change bumps it.
    pub expected_version: i64,
    /// The order after the change (its status may equal `before`'s when only `mismatch` is
    /// recorded, or a refund is kept against a pending order).
    pub after: Order,
    /// A mismatch to record on the order.
    pub mismatch: Option<String>,
}

impl OrderChange {
    /// `before`, read at `expected_version`, becomes `after`; no mismatch recorded.
    #[must_use]
    pub fn new(before: &Order, expected_version: i64, after: Order) -> Self {
        Self {
            before: before.clone(),
            expected_version,
            after,
            mismatch: None,
        }
    }
}

/// A subscription change within a payment event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriptionChange {
    /// Create it (UNIQUE on provider and provider subscription id).
    Create(Subscription, Option<OrderId>),
    /// Replace `before` by `subscription`, only if the stored one's `last_event_at` is still
    /// `before`'s and its switch claim still the one `subscription` was read with
    /// ([`domain::Subscription::claim_unchanged_since_read`]) (compare-and-set), and only if it
    /// does not replace one switch claim by another
    /// ([`domain::Subscription::overwrites_claim_of`]): otherwise a [`StoreError::Conflict`].
    Update {
        /// The state as read.
        before: Subscription,
        /// The new state.
        subscription: Subscription,
    },
}

impl SubscriptionChange {
    /// The subscription as the change writes it.
    #[must_use]
    pub fn written(&self) -> &Subscription {
        match self {
            SubscriptionChange::Create(s, _) => s,
            SubscriptionChange::Update { subscription, .. } => subscription,
        }
    }

    /// The state it replaces (`None` for one it creates).
    #[must_use]
    pub fn replaced(&self) -> Option<&Subscription> {
        match self {
            SubscriptionChange::Create(..) => None,
            SubscriptionChange::Update { before, .. } => Some(before),
        }
    }
}

/// Everything one verified provider event changes, applied in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentEventCommand {
    /// The inbox row; a duplicate `(provider, event_id)` makes the whole command a no-op.
    pub inbox: InboxEntry,
    /// Order transition.
    pub order: Option<OrderChange>,
    /// Subscription change.
    pub subscription: Option<SubscriptionChange>,
    /// Credits to grant (once per source).
    pub grant: Option<GrantCommand>,
    /// A credits pack's bonus credits to grant with it (once per order).
    pub bonus: Option<GrantCommand>,
    /// Credits to take back (after a refund, or from the lots of a period a change of billing
    /// interval ended early), each from its own lot.
    pub clawbacks: Vec<ClawbackCommand>,
    /// A subscription charge recorded or refunded.
    pub charge: Option<ChargeChange>,
    /// A refund report to keep (a report kept before makes the store refuse with a conflict).
    pub refund: Option<RefundRecord>,
    /// The host events the order, subscription and inbox changes tell, decided from the states
    /// before and after (`host_events::payment_event_told`); the grant and clawbacks tell theirs
    /// as they are written.
    pub told: Vec<HostEvent>,
    /// The entitlements of the user whose access the change moves, worked out with the change
    /// (compare-and-set on their record's version).
    pub entitlements: Option<EntitlementsTold>,
    /// The administrator's action the event carries, if any: its audit entry is written in the
    /// same transaction, and neither is written when the command is a duplicate or refused.
    pub audit: Option<NewAudit>,
    /// What the event does to an automatic top-up or its rule (the top-up its order pays
    /// succeeds or fails, a refunded top-up turns the rule off, a saved method is kept), with
    /// what that tells.
    pub top_up: Option<super::TopUpChange>,
}

/// Which recorded provider events to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxFilter {
    /// Only this provider's.
    pub provider: Option<ProviderId>,
    /// Only this outcome.
    pub outcome: Option<domain::EventOutcome>,
}

/// A recorded provider event, as the inbox keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEvent {
    /// The inbox row id (increasing).
    pub id: i64,
    /// The row.
    pub entry: InboxEntry,
}

/// What applying a payment event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentEventOutcome {
    /// Everything was applied.
    Applied {
        /// The grant, clawback or nothing.
        ledger: Vec<LedgerEffect>,
    },
    /// The event was seen before; nothing changed.
    Duplicate,
}

/// The webhook inbox and the single transaction of the webhook pipeline.
#[async_trait]
pub trait PaymentEventStore: Send + Sync + 'static {
    /// The recorded provider events matching `filter`, newest first.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn list_events(
        &self,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<RecordedEvent>, StoreError>;
}

/// Everything the use cases persist, in one bound.
pub trait Store:
    UserRepository
    + ApiKeyRepository
    + PlanRepository
    + OrderRepository
    + SubscriptionRepository
    + RefundRepository
    + CreditLedger
    + PaymentEventStore
    + super::ChangeStore
    + super::HostEventLog
    + super::ReportRepository
    + super::AdminConsoleStore
    + super::TeamStore
    + super::SpendLimitStore
    + super::ThresholdStore
    + super::PromoStore
    + super::TopUpStore
{
}

impl<T> Store for T where
    T: UserRepository
        + ApiKeyRepository
        + PlanRepository
        + OrderRepository
        + SubscriptionRepository
        + RefundRepository
        + CreditLedger
        + PaymentEventStore
        + super::ChangeStore
        + super::HostEventLog
        + super::ReportRepository
        + super::AdminConsoleStore
        + super::TeamStore
        + super::SpendLimitStore
        + super::ThresholdStore
        + super::PromoStore
        + super::TopUpStore
{
}

#[cfg(test)]
mod derived_id_tests {
    use super::derived_id_digits;

    /// The digits are SHA-256 of the parts joined by NUL, cut to 13 bytes: a host user's id has
    /// been derived so since host identities existed, and must never change (checked against
    /// Python's hashlib).
    #[test]
    fn derived_ids_are_the_sha256_of_their_parts_joined_by_nul() {
        assert_eq!(
            derived_id_digits(&["https://app.example.com", "user-1"]),
            "3a5b2a07dc2d010fe173ae2e57"
        );
        assert_eq!(
            derived_id_digits(&["org", "https://app.example.com", "org_1"]),
            "8eae00bbc805eaf5d890bc7a93"
        );
    }
}
