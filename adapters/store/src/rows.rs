//! Rows as the database returns them, and their conversion into domain values.
//!
//! Every conversion goes through the domain's validating constructors (rule 4: validate on write
//! and on read). A row that fails them is [`StoreError::Corrupt`] naming the table, the row and
//! what is wrong; it never panics.

mod entitlements;
mod plan;

use std::fmt::Display;

use application::accounts::{
    ApiKey, BuyerContact, CustomerName, Email, PasswordHash, Role, Scope, User,
};
use application::ports::{
    CheckoutRecord, CheckoutTarget, CreditTransaction, OrderRecord, Reservation, ReservationStatus,
    ReservationStatusKind, StoreError, UsageContext,
};
use domain::pricing::TokenUsage;
use domain::{
    AccountId, BillingPeriod, ChangeDirection, CreditDelta, Credits, Currency, Duration,
    GrantCategory, GrantLot, GrantPriority, Money, Order, OrderId, OrderParts, OrderStatus,
    OrderStatusKind, PlanChange, PlanId, PlanSnapshot, PlanType, ProviderId, RenewalIntent,
    ReservationId, ReturnUrl, ReturnUrls, ScheduledSwitch, SoldTerms, Subscription, SubscriptionId,
    SubscriptionParts, SubscriptionStatus, SwitchClaim, Timestamp, TransactionKind, UserId,
};
use sea_orm::FromQueryResult;

pub(crate) use entitlements::column_value as entitlements_value;
pub(crate) use entitlements::{
    from_column as entitlements_from_column, to_object as entitlements_object,
};
pub(crate) use plan::{PLAN_COLUMNS, PlanRow, plan_values};

/// A corrupt-row error.
pub(crate) fn corrupt(table: &str, id: &str, what: impl Display) -> StoreError {
    StoreError::Corrupt(format!("{table} {id:?}: {what}"))
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn credits(table: &str, id: &str, field: &str, hundredths: i64) -> Result<Credits, StoreError> {
    Credits::from_hundredths(hundredths)
        .map_err(|e| corrupt(table, id, format_args!("{field}: {e}")))
}

/// `tokens` as stored (a non-negative BIGINT).
fn tokens(table: &str, id: &str, tokens: Option<i64>) -> Result<Option<u64>, StoreError> {
    tokens
        .map(|t| u64::try_from(t).map_err(|_| corrupt(table, id, "tokens is negative")))
        .transpose()
}

/// A call's tokens by kind as `usage_tokens` stores them: five counts separated by commas, in
/// the order of [`domain::pricing::TokenKind::ALL`].
pub(crate) fn usage_tokens_value(usage: Option<&TokenUsage>) -> Option<String> {
    usage.map(|u| {
        u.counts()
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// [`usage_tokens_value`] read back.
fn usage_tokens(stored: &str) -> Result<TokenUsage, String> {
    let mut counts = [0_i64; 5];
    let mut parts = stored.split(',');
    for slot in &mut counts {
        *slot = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("usage_tokens {stored:?}"))?;
    }
    if parts.next().is_some() {
        return Err(format!("usage_tokens {stored:?}"));
    }
    TokenUsage::new(counts).map_err(|e| format!("usage_tokens {stored:?}: {e}"))
}

/// `tokens` to store.
pub(crate) fn tokens_value(tokens: Option<u64>) -> Result<Option<i64>, StoreError> {
    tokens
        .map(|t| i64::try_from(t).map_err(|_| StoreError::Conflict("tokens is too large".into())))
        .transpose()
}

// ---------------------------------------------------------------------------------------------
// Users and API keys

/// The columns of [`UserRow`].
pub(crate) const USER_COLUMNS: &str = "id, email, password_hash, role, created_at";

/// A `users` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct UserRow {
    id: String,
    email: String,
    password_hash: Option<String>,
    role: String,
    created_at: i64,
}

impl UserRow {
    /// A row read as part of a wider one.
    pub(crate) fn from_parts(
        id: String,
        email: String,
        password_hash: Option<String>,
        role: String,
        created_at: i64,
    ) -> Self {
        Self {
            id,
            email,
            password_hash,
            role,
            created_at,
        }
    }

    /// The user and its password hash.
    pub(crate) fn into_domain(self) -> Result<(User, Option<PasswordHash>), StoreError> {
        let id = UserId::new(self.id.clone()).map_err(|e| corrupt("users", &self.id, e))?;
        let email = Email::parse(&self.email).map_err(|e| corrupt("users", &self.id, e))?;
        let role = Role::parse(&self.role).ok_or_else(|| {
            corrupt(
                "users",
                &self.id,
                format_args!("unknown role {:?}", self.role),
            )
        })?;
        let user = User {
            id,
            email,
            role,
            created_at: ts(self.created_at),
        };
        Ok((user, self.password_hash.map(PasswordHash)))
    }
}

/// A host user's `users` row with its identity's contact columns (`contact_email`,
/// `contact_name` from `host_identities`).
#[derive(Debug, FromQueryResult)]
pub(crate) struct HostUserRow {
    id: String,
    email: String,
    password_hash: Option<String>,
    role: String,
    created_at: i64,
    contact_email: Option<String>,
    contact_name: Option<String>,
}

impl HostUserRow {
    /// The user, its password hash (none for a host user) and its stored contact details.
    pub(crate) fn into_domain(
        self,
    ) -> Result<(User, Option<PasswordHash>, BuyerContact), StoreError> {
        let contact = contact(
            "host_identities",
            &self.id,
            self.contact_email,
            self.contact_name,
        )?;
        let user = UserRow {
            id: self.id,
            email: self.email,
            password_hash: self.password_hash,
            role: self.role,
            created_at: self.created_at,
        };
        let (user, hash) = user.into_domain()?;
        Ok((user, hash, contact))
    }
}

/// Contact details as stored, validated again (row `id` of `table`).
pub(crate) fn contact(
    table: &str,
    id: &str,
    email: Option<String>,
    name: Option<String>,
) -> Result<BuyerContact, StoreError> {
    let email = email
        .map(|e| Email::parse(&e))
        .transpose()
        .map_err(|e| corrupt(table, id, e))?;
    let name = name
        .map(|n| CustomerName::parse(&n))
        .transpose()
        .map_err(|e| corrupt(table, id, e))?;
    Ok(BuyerContact::new(email, name))
}

/// The columns of [`ApiKeyRow`].
pub(crate) const API_KEY_COLUMNS: &str =
    "id, owner_id, name, prefix, scopes, account_id, created_at, revoked_at";

/// An `api_keys` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct ApiKeyRow {
    id: String,
    owner_id: String,
    name: String,
    prefix: String,
    scopes: String,
    account_id: Option<String>,
    created_at: i64,
    revoked_at: Option<i64>,
}

impl ApiKeyRow {
    /// The key record.
    pub(crate) fn into_domain(self) -> Result<ApiKey, StoreError> {
        let owner = UserId::new(self.owner_id).map_err(|e| corrupt("api_keys", &self.id, e))?;
        let scopes = self
            .scopes
            .split_whitespace()
            .map(Scope::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("api_keys", &self.id, e))?;
        let account = self
            .account_id
            .map(AccountId::new)
            .transpose()
            .map_err(|e| corrupt("api_keys", &self.id, e))?;
        Ok(ApiKey {
            id: self.id,
            owner,
            name: self.name,
            prefix: self.prefix,
            scopes,
            account,
            created_at: ts(self.created_at),
            revoked_at: self.revoked_at.map(ts),
        })
    }
}

/// Scopes as stored: their codes, space-separated.
pub(crate) fn scopes_value(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.code())
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// Orders

/// The columns of [`OrderRow`].
pub(crate) const ORDER_COLUMNS: &str = "id, user_id, account_id, provider, plan_id, plan_type, amount_minor, \
    currency, credits_hundredths, months, status, failure_reason, paid_at, refunded_minor, \
    provider_reference, checkout_kind, checkout_url, mismatch, expires_at, created_at, updated_at, \
    version, plan_entitlements, success_url, cancel_url, bonus_credits_hundredths, \
    bonus_expires_in_days, save_method";

/// An `orders` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct OrderRow {
    id: String,
    user_id: String,
    account_id: Option<String>,
    provider: String,
    plan_id: String,
    plan_type: String,
    amount_minor: i64,
    currency: String,
    credits_hundredths: Option<i64>,
    months: Option<i64>,
    status: String,
    failure_reason: Option<String>,
    paid_at: Option<i64>,
    refunded_minor: i64,
    provider_reference: Option<String>,
    checkout_kind: Option<String>,
    checkout_url: Option<String>,
    mismatch: Option<String>,
    expires_at: i64,
    created_at: i64,
    updated_at: i64,
    version: i64,
    plan_entitlements: Option<String>,
    success_url: Option<String>,
    cancel_url: Option<String>,
    bonus_credits_hundredths: Option<i64>,
    bonus_expires_in_days: Option<i32>,
    save_method: bool,
}

/// The rows of `orders` or `subscriptions` that belong to account `$1`: those naming it, and
/// those naming no account whose buyer's personal account it is (a row written by a binary from
/// before purchases named their account, during a rolling deploy).
pub(crate) const OWNED_BY_ACCOUNT: &str =
    "(account_id = $1 OR (account_id IS NULL AND user_id = $1))";

/// A purchase's stored account (`NULL`: a row written before purchases named one, which is its
/// buyer's personal account).
fn account(raw: Option<&str>) -> Result<Option<domain::AccountId>, String> {
    raw.map(|id| domain::AccountId::new(id).map_err(|e| format!("account: {e}")))
        .transpose()
}

/// A stored return URL, read through the same parser that accepted it.
fn return_url(raw: Option<&str>) -> Result<Option<ReturnUrl>, String> {
    raw.map(|url| ReturnUrl::parse(url).map_err(|e| format!("return url: {e}")))
        .transpose()
}

impl OrderRow {
    /// The order record.
    pub(crate) fn into_domain(self) -> Result<OrderRecord, StoreError> {
        let bad = |what: String| corrupt("orders", &self.id, what);
        let currency: Currency = self.currency.parse().map_err(|e| bad(format!("{e}")))?;
        let price = Money::from_minor(self.amount_minor, currency)
            .map_err(|e| bad(format!("amount: {e}")))?;
        let plan_type = PlanType::parse(&self.plan_type)
            .ok_or_else(|| bad(format!("unknown plan type {:?}", self.plan_type)))?;
        let bonus = match self.bonus_credits_hundredths {
            None => None,
            Some(h) => Some(domain::PackBonus {
                credits: credits("orders", &self.id, "bonus credits", h)?,
                expires_in_days: self
                    .bonus_expires_in_days
                    .map(u32::try_from)
                    .transpose()
                    .map_err(|e| bad(format!("bonus expiry: {e}")))?,
            }),
        };
        let plan = PlanSnapshot {
            bonus,
            plan_id: PlanId::new(self.plan_id.clone()).map_err(|e| bad(e.to_string()))?,
            plan_type,
            price,
            credits: self
                .credits_hundredths
                .map(|h| credits("orders", &self.id, "credits", h))
                .transpose()?,
            duration: self
                .months
                .map(duration_from_months)
                .transpose()
                .map_err(bad)?,
            entitlements: entitlements::from_column(self.plan_entitlements.as_deref())
                .map_err(bad)?,
        };
        let order = Order::restore(OrderParts {
            id: OrderId::new(self.id.clone()).map_err(|e| bad(e.to_string()))?,
            user_id: UserId::new(self.user_id.clone()).map_err(|e| bad(e.to_string()))?,
            account: account(self.account_id.as_deref()).map_err(bad)?,
            provider: self
                .provider
                .parse::<ProviderId>()
                .map_err(|e| bad(e.to_string()))?,
            status: self.status(price).map_err(bad)?,
            plan,
            created_at: ts(self.created_at),
            expires_at: ts(self.expires_at),
            returns: ReturnUrls {
                success: return_url(self.success_url.as_deref()).map_err(bad)?,
                cancel: return_url(self.cancel_url.as_deref()).map_err(bad)?,
            },
            save_method: self.save_method,
        });
        let checkout = self
            .checkout()
            .map_err(|e| corrupt("orders", &self.id, e))?;
        // A reference without a checkout is a charge's made off-session.
        let charge_reference = match checkout {
            None => self.provider_reference.clone(),
            Some(_) => None,
        };
        Ok(OrderRecord {
            order,
            checkout,
            updated_at: ts(self.updated_at),
            mismatch: self.mismatch,
            version: self.version,
            charge_reference,
        })
    }

    fn status(&self, price: Money) -> Result<OrderStatus, String> {
        let paid_at = || {
            self.paid_at
                .map(ts)
                .ok_or_else(|| format!("{} without paid_at", self.status))
        };
        let kind = OrderStatusKind::parse(&self.status)
            .ok_or_else(|| format!("unknown status {:?}", self.status))?;
        Ok(match kind {
            OrderStatusKind::Pending => OrderStatus::Pending,
            OrderStatusKind::Paid => OrderStatus::Paid {
                paid_at: paid_at()?,
            },
            OrderStatusKind::Failed => OrderStatus::Failed {
                reason: self.failure_reason.clone().unwrap_or_default(),
            },
            OrderStatusKind::Cancelled => OrderStatus::Cancelled,
            OrderStatusKind::Expired => OrderStatus::Expired,
            OrderStatusKind::PartiallyRefunded => {
                if self.refunded_minor <= 0 || self.refunded_minor >= price.amount_minor() {
                    return Err(format!(
                        "partial refund of {} minor units",
                        self.refunded_minor
                    ));
                }
                let refunded = Money::from_minor(self.refunded_minor, price.currency())
                    .map_err(|e| e.to_string())?;
                OrderStatus::PartiallyRefunded {
                    paid_at: paid_at()?,
                    refunded,
                }
            }
            OrderStatusKind::Refunded => OrderStatus::Refunded {
                paid_at: paid_at()?,
            },
        })
    }

    fn checkout(&self) -> Result<Option<CheckoutRecord>, String> {
        let target = match (self.checkout_kind.as_deref(), &self.checkout_url) {
            (None, None) => return Ok(None),
            (Some("redirect"), Some(url)) => CheckoutTarget::Redirect(url.clone()),
            (Some("qr_code"), Some(url)) => CheckoutTarget::QrCode(url.clone()),
            (kind, _) => return Err(format!("checkout kind {kind:?} without a matching url")),
        };
        Ok(Some(CheckoutRecord {
            provider_reference: self.provider_reference.clone(),
            target,
        }))
    }
}

/// The status columns of an order: `(status, paid_at, failure_reason, refunded_minor)`, where a
/// `None` refund means "the whole price" (`refunded_minor = amount_minor` in SQL).
pub(crate) fn order_status_values(
    status: &OrderStatus,
) -> (&'static str, Option<i64>, Option<String>, Option<i64>) {
    let code = status.code();
    match status {
        OrderStatus::Pending | OrderStatus::Cancelled | OrderStatus::Expired => {
            (code, None, None, Some(0))
        }
        OrderStatus::Paid { paid_at } => (code, Some(paid_at.unix_millis()), None, Some(0)),
        OrderStatus::Failed { reason } => (code, None, Some(reason.clone()), Some(0)),
        OrderStatus::PartiallyRefunded { paid_at, refunded } => (
            code,
            Some(paid_at.unix_millis()),
            None,
            Some(refunded.amount_minor()),
        ),
        OrderStatus::Refunded { paid_at } => (code, Some(paid_at.unix_millis()), None, None),
    }
}

/// A stored month count as a [`Duration`].
///
/// The domain builds a `Duration` only inside `Plan::from_draft` (`Months` has no public
/// constructor), so the stored count is checked by exactly those rules through a minimal one-time
/// plan, which accepts every finite count (1 to 1200) and the lifetime marker.
pub(crate) fn duration_from_months(months: i64) -> Result<Duration, String> {
    Duration::from_months_value(months)
        .ok_or_else(|| format!("months {months} is not a valid duration"))
}

// ---------------------------------------------------------------------------------------------
// Subscriptions

/// The columns of [`SubscriptionRow`].
pub(crate) const SUBSCRIPTION_COLUMNS: &str = "id, user_id, account_id, plan_id, provider, \
    provider_subscription_id, status, period_start, period_end, cancel_at_period_end, last_event_at, \
    price_minor, currency, CAST(interval_months AS BIGINT) AS interval_months, \
    credits_per_period_hundredths, pending_plan_id, pending_price_minor, pending_currency, \
    CAST(pending_interval_months AS BIGINT) AS pending_interval_months, \
    pending_credits_hundredths, pending_direction, pending_requested_at, scheduled_plan_id, \
    scheduled_requested_at";

/// A `subscriptions` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct SubscriptionRow {
    id: String,
    user_id: String,
    account_id: Option<String>,
    plan_id: String,
    provider: String,
    provider_subscription_id: String,
    status: String,
    period_start: i64,
    period_end: i64,
    cancel_at_period_end: bool,
    last_event_at: i64,
    price_minor: Option<i64>,
    currency: Option<String>,
    interval_months: Option<i64>,
    credits_per_period_hundredths: Option<i64>,
    pending_plan_id: Option<String>,
    pending_price_minor: Option<i64>,
    pending_currency: Option<String>,
    pending_interval_months: Option<i64>,
    pending_credits_hundredths: Option<i64>,
    pending_direction: Option<String>,
    pending_requested_at: Option<i64>,
    scheduled_plan_id: Option<String>,
    scheduled_requested_at: Option<i64>,
}

impl SubscriptionRow {
    /// The subscription.
    pub(crate) fn into_domain(self) -> Result<Subscription, StoreError> {
        let bad = |what: String| corrupt("subscriptions", &self.id, what);
        let sold_terms = self.sold_terms().map_err(bad)?;
        let claim = SwitchClaim {
            pending_change: self.pending_change().map_err(bad)?,
            scheduled_switch: self.scheduled_switch().map_err(bad)?,
        };
        Ok(Subscription::restore_claimed(
            SubscriptionParts {
                id: SubscriptionId::new(self.id.clone()).map_err(|e| bad(e.to_string()))?,
                user_id: UserId::new(self.user_id.clone()).map_err(|e| bad(e.to_string()))?,
                account: account(self.account_id.as_deref()).map_err(bad)?,
                plan_id: PlanId::new(self.plan_id.clone()).map_err(|e| bad(e.to_string()))?,
                provider: self
                    .provider
                    .parse::<ProviderId>()
                    .map_err(|e| bad(e.to_string()))?,
                status: SubscriptionStatus::parse(&self.status)
                    .ok_or_else(|| bad(format!("unknown status {:?}", self.status)))?,
                current_period: BillingPeriod::new(ts(self.period_start), ts(self.period_end))
                    .ok_or_else(|| bad("period ends before it starts".into()))?,
                renewal: if self.cancel_at_period_end {
                    RenewalIntent::EndsAtPeriodEnd
                } else {
                    RenewalIntent::Renews
                },
                provider_subscription_id: self.provider_subscription_id,
                last_event_at: ts(self.last_event_at),
                sold_terms,
            },
            claim,
        ))
    }

    /// The plan it starts when it ends (a switch at the period's end); both or neither.
    fn scheduled_switch(&self) -> Result<Option<ScheduledSwitch>, String> {
        match (&self.scheduled_plan_id, self.scheduled_requested_at) {
            (None, None) => Ok(None),
            (Some(plan), Some(at)) => {
                let plan = PlanId::new(plan.clone()).map_err(|e| format!("scheduled plan: {e}"))?;
                Ok(Some(ScheduledSwitch::new(plan, ts(at))))
            }
            _ => Err("scheduled switch is partly missing".into()),
        }
    }

    /// The plan change asked of the provider and not confirmed yet; all or nothing.
    fn pending_change(&self) -> Result<Option<PlanChange>, String> {
        let (Some(plan), Some(price), Some(currency), Some(months), Some(direction), Some(at)) = (
            self.pending_plan_id.as_deref(),
            self.pending_price_minor,
            self.pending_currency.as_deref(),
            self.pending_interval_months,
            self.pending_direction.as_deref(),
            self.pending_requested_at,
        ) else {
            return match self.pending_requested_at {
                None => Ok(None),
                Some(_) => Err("pending plan change is partly missing".into()),
            };
        };
        let plan = PlanId::new(plan.to_owned()).map_err(|e| format!("pending plan: {e}"))?;
        let currency = currency
            .parse::<Currency>()
            .map_err(|e| format!("pending currency: {e}"))?;
        let price = Money::from_minor(price, currency).map_err(|e| e.to_string())?;
        let Ok(Duration::Months(interval)) = duration_from_months(months) else {
            return Err(format!("pending interval of {months} months"));
        };
        let credits = self
            .pending_credits_hundredths
            .map(Credits::from_hundredths)
            .transpose()
            .map_err(|e| format!("pending credits per period: {e}"))?;
        let direction = ChangeDirection::parse(direction)
            .ok_or_else(|| format!("pending direction {direction:?}"))?;
        Ok(Some(PlanChange::new(
            plan,
            SoldTerms::new(price, interval, credits),
            direction,
            ts(at),
        )))
    }

    /// The terms it was sold at, through the domain's constructors; all or nothing.
    fn sold_terms(&self) -> Result<Option<SoldTerms>, String> {
        let (price_minor, currency, months) = match (
            self.price_minor,
            self.currency.as_deref(),
            self.interval_months,
        ) {
            (None, None, None) => return Ok(None),
            (Some(price), Some(currency), Some(months)) => (price, currency, months),
            _ => return Err("sold terms are partly missing".into()),
        };
        let currency = currency
            .parse::<Currency>()
            .map_err(|e| format!("sold currency: {e}"))?;
        let price = Money::from_minor(price_minor, currency).map_err(|e| e.to_string())?;
        let Ok(Duration::Months(interval)) = duration_from_months(months) else {
            return Err(format!("interval of {months} months"));
        };
        let credits = self
            .credits_per_period_hundredths
            .map(Credits::from_hundredths)
            .transpose()
            .map_err(|e| format!("credits per period: {e}"))?;
        Ok(Some(SoldTerms::new(price, interval, credits)))
    }
}

// ---------------------------------------------------------------------------------------------
// The credit ledger

/// The columns of [`TransactionRow`].
pub(crate) const TRANSACTION_COLUMNS: &str = "id, account_id, member_id, kind, amount_hundredths, \
    balance_after_hundredths, order_id, subscription_id, reservation_id, feature, model, tokens, \
    note, created_at, request_hash, api_key_id, usage_tokens, price_from, cost_basis_millionths, \
    grant_category";

/// A `credit_transactions` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct TransactionRow {
    id: i64,
    account_id: String,
    member_id: Option<String>,
    kind: String,
    amount_hundredths: i64,
    balance_after_hundredths: i64,
    order_id: Option<String>,
    subscription_id: Option<String>,
    reservation_id: Option<String>,
    feature: Option<String>,
    model: Option<String>,
    tokens: Option<i64>,
    note: Option<String>,
    created_at: i64,
    /// The fingerprint of the request that wrote it, when it was written under a key.
    pub(crate) request_hash: Option<String>,
    api_key_id: Option<String>,
    usage_tokens: Option<String>,
    price_from: Option<i64>,
    cost_basis_millionths: Option<i64>,
    grant_category: Option<String>,
}

impl TransactionRow {
    /// The transaction.
    pub(crate) fn into_domain(self) -> Result<CreditTransaction, StoreError> {
        let id = self.id.to_string();
        let bad = |what: String| corrupt("credit_transactions", &id, what);
        let context = UsageContext {
            order_id: self
                .order_id
                .map(OrderId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            subscription_id: self
                .subscription_id
                .map(SubscriptionId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            reservation_id: self
                .reservation_id
                .map(ReservationId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            feature: self.feature,
            model: self.model,
            tokens: tokens("credit_transactions", &id, self.tokens)?,
            note: self.note,
            api_key_id: self.api_key_id,
            breakdown: self
                .usage_tokens
                .as_deref()
                .map(usage_tokens)
                .transpose()
                .map_err(bad)?,
            price_from: self.price_from.map(Timestamp::from_unix_millis),
            cost_basis_millionths: self.cost_basis_millionths,
            grant_category: self
                .grant_category
                .map(|c| {
                    GrantCategory::parse(&c).ok_or_else(|| bad(format!("grant_category {c:?}")))
                })
                .transpose()?,
        };
        Ok(CreditTransaction {
            id: self.id,
            account_id: AccountId::new(self.account_id).map_err(|e| bad(e.to_string()))?,
            member_id: self
                .member_id
                .map(UserId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            kind: TransactionKind::parse(&self.kind)
                .ok_or_else(|| bad(format!("unknown kind {:?}", self.kind)))?,
            amount: CreditDelta::from_hundredths(self.amount_hundredths)
                .map_err(|e| bad(e.to_string()))?,
            balance_after: credits(
                "credit_transactions",
                &id,
                "balance_after",
                self.balance_after_hundredths,
            )?,
            context,
            created_at: ts(self.created_at),
        })
    }
}

/// The columns of [`ReservationRow`].
pub(crate) const RESERVATION_COLUMNS: &str = "id, account_id, member_id, window_start, held_hundredths, status, \
    actual_hundredths, charged_hundredths, idempotency_key, request_hash, feature, model, tokens, \
    note, created_at, expires_at, api_key_id";

/// A `credit_reservations` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct ReservationRow {
    pub(crate) id: String,
    pub(crate) account_id: String,
    pub(crate) member_id: Option<String>,
    /// The start of the member's limit window the hold counted in, if it counted.
    pub(crate) window_start: Option<i64>,
    pub(crate) held_hundredths: i64,
    pub(crate) status: String,
    actual_hundredths: Option<i64>,
    charged_hundredths: Option<i64>,
    pub(crate) idempotency_key: String,
    pub(crate) request_hash: String,
    feature: Option<String>,
    model: Option<String>,
    tokens: Option<i64>,
    note: Option<String>,
    created_at: i64,
    expires_at: i64,
    api_key_id: Option<String>,
}

impl ReservationRow {
    /// The reservation.
    pub(crate) fn into_domain(self) -> Result<Reservation, StoreError> {
        let table = "credit_reservations";
        let bad = |what: String| corrupt(table, &self.id, what);
        let amount = |field, h: Option<i64>| -> Result<Credits, StoreError> {
            let h =
                h.ok_or_else(|| corrupt(table, &self.id, format_args!("settled without {field}")))?;
            credits(table, &self.id, field, h)
        };
        let kind = ReservationStatusKind::parse(&self.status)
            .ok_or_else(|| bad(format!("unknown status {:?}", self.status)))?;
        let status = match kind {
            ReservationStatusKind::Pending => ReservationStatus::Pending,
            ReservationStatusKind::Settled => ReservationStatus::Settled {
                actual: amount("actual", self.actual_hundredths)?,
                charged: amount("charged", self.charged_hundredths)?,
            },
            ReservationStatusKind::Released => ReservationStatus::Released,
            ReservationStatusKind::Expired => ReservationStatus::Expired,
        };
        Ok(Reservation {
            id: ReservationId::new(self.id.clone()).map_err(|e| bad(e.to_string()))?,
            account_id: AccountId::new(self.account_id.clone()).map_err(|e| bad(e.to_string()))?,
            member_id: self
                .member_id
                .clone()
                .map(UserId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            held: credits(table, &self.id, "held", self.held_hundredths)?,
            status,
            context: UsageContext {
                feature: self.feature,
                model: self.model,
                tokens: tokens(table, &self.id, self.tokens)?,
                note: self.note,
                api_key_id: self.api_key_id,
                ..UsageContext::default()
            },
            created_at: ts(self.created_at),
            expires_at: ts(self.expires_at),
        })
    }
}

/// The spendable part of a `credit_grants` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct LotRow {
    id: i64,
    remaining_hundredths: i64,
    expires_at: Option<i64>,
    granted_at: i64,
    category: String,
    priority: i32,
}

/// The columns of [`LotRow`], of `credit_grants` as `g`.
pub(crate) const LOT_COLUMNS: &str =
    "g.id, g.remaining_hundredths, g.expires_at, g.granted_at, g.category, g.priority";

impl LotRow {
    /// The lot.
    pub(crate) fn into_domain(self) -> Result<GrantLot, StoreError> {
        Ok(GrantLot {
            id: self.id,
            remaining: credits(
                "credit_grants",
                &self.id.to_string(),
                "remaining",
                self.remaining_hundredths,
            )?,
            expires_at: self.expires_at.map(ts),
            granted_at: ts(self.granted_at),
            category: GrantCategory::parse(&self.category).ok_or_else(|| {
                corrupt(
                    "credit_grants",
                    &self.id.to_string(),
                    format!("category {:?}", self.category),
                )
            })?,
            priority: u16::try_from(self.priority)
                .ok()
                .and_then(GrantPriority::new)
                .ok_or_else(|| {
                    corrupt(
                        "credit_grants",
                        &self.id.to_string(),
                        format!("priority {}", self.priority),
                    )
                })?,
        })
    }
}
