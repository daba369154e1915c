//! The admin console's reads (issue 18): customers found by e-mail or id, a customer's overview
//! and ledger, every order, the webhook inbox and the audit log, each one page at a time by an
//! opaque cursor, newest first (customer search: by e-mail). The team accounts are in
//! `accounts`.
//!
//! Every driving adapter (the JSON API, the admin pages) calls these same functions; their
//! results are the contract each renders.

use domain::entitlements::EffectiveEntitlements;
use domain::{OrderStatusKind, UserId};

use super::super::InfraError;
use super::super::report_status::StatusReport;
use crate::accounts::User;
use crate::cursor::{CursorError, CursorKey, Keyset, KeysetPage};
use crate::ports::{
    AuditEntry, Clock, CreditTransaction, CustomerSearch, IdGenerator, IdMatch, InboxFilter,
    Membership, OrderFilter, OrderRecord, PaymentTotal, RecordedEvent, SecretHasher, Store,
};
use crate::service::Service;

/// The longest customer search accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 254;

/// The shortest query also matched against ids: ids share short prefixes (`usr_`), so a shorter
/// one would match every customer.
pub const MIN_ID_PREFIX_CHARS: usize = 6;

/// Which page of a list to read: the `nextCursor` of the page before (none for the first) and a
/// page size (default 20, at most 100).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageAfter {
    /// The cursor a previous page returned.
    pub cursor: Option<String>,
    /// Rows per page.
    pub limit: Option<i64>,
}

/// One page of a list, and the cursor of the next page when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorPage<T> {
    /// The rows, newest first (customer search: by e-mail).
    pub items: Vec<T>,
    /// Pass it back as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

impl<T, K: CursorKey> From<KeysetPage<T, K>> for CursorPage<T> {
    fn from(page: KeysetPage<T, K>) -> Self {
        Self {
            next_cursor: page.next_cursor(),
            items: page.items,
        }
    }
}

/// Why a list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AdminListError {
    /// The cursor or the page size was refused.
    #[error(transparent)]
    Page(#[from] CursorError),
    /// A filter is not acceptable; names the parameter.
    #[error("{field}: {message}")]
    Invalid {
        /// The query parameter.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No such user.
    #[error("user not found")]
    UserNotFound,
    /// No such team account.
    #[error("account not found")]
    AccountNotFound,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for AdminListError {
    fn from(e: crate::ports::StoreError) -> Self {
        Self::Infra(e.into())
    }
}

/// Everything an operator sees of one customer.
#[derive(Debug, Clone)]
pub struct CustomerOverview {
    /// The account.
    pub user: User,
    /// Balance, live subscriptions, one-time access and open reservations, as the customer's
    /// own status reports them.
    pub status: StatusReport,
    /// What the customer may use now, and the purchase granting each key.
    pub entitlements: EffectiveEntitlements,
    /// Paid and refunded per currency, in minor units.
    pub totals: Vec<PaymentTotal>,
    /// The teams the customer is a present member of, and their role in each, oldest
    /// membership first.
    pub teams: Vec<Membership>,
}

/// The order status a filter names by its code; a code that is not an order status is refused
/// rather than matching nothing.
///
/// # Errors
/// [`AdminListError::Invalid`] for an unknown status.
pub fn order_status(code: &str) -> Result<OrderStatusKind, AdminListError> {
    OrderStatusKind::parse(code).ok_or_else(|| {
        let codes: Vec<&str> = OrderStatusKind::ALL.map(OrderStatusKind::code).to_vec();
        AdminListError::Invalid {
            field: "status",
            message: format!("one of {}", codes.join(", ")),
        }
    })
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Customers: with a query, users whose e-mail starts with it
    /// (case-insensitive) or whose id is it (from `MIN_ID_PREFIX_CHARS` (6) characters: starts
    /// with it), by e-mail; without one, every user, newest first.
    ///
    /// # Errors
    /// [`AdminListError::Page`] for a bad cursor or limit; [`AdminListError::Invalid`] for a
    /// query over [`MAX_QUERY_CHARS`]; infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn find_customers(
        &self,
        query: Option<&str>,
        page: &PageAfter,
    ) -> Result<CursorPage<User>, AdminListError> {
        let typed = query.map(str::trim).unwrap_or_default();
        if typed.chars().count() > MAX_QUERY_CHARS {
            return Err(AdminListError::Invalid {
                field: "query",
                message: format!("at most {MAX_QUERY_CHARS} characters"),
            });
        }
        if typed.is_empty() {
            let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
            return Ok(self.store.list_users(&keyset).await?.into());
        }
        let search = CustomerSearch {
            email_prefix: typed.to_lowercase(),
            id: if typed.chars().count() >= MIN_ID_PREFIX_CHARS {
                IdMatch::Prefix(typed.to_owned())
            } else {
                IdMatch::Exact(typed.to_owned())
            },
        };
        let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
        Ok(self.store.search_users(&search, &keyset).await?.into())
    }

    /// The user `user_id` names, or [`AdminListError::UserNotFound`].
    async fn customer(&self, user_id: &UserId) -> Result<User, AdminListError> {
        self.store
            .find_user(user_id)
            .await?
            .ok_or(AdminListError::UserNotFound)
    }

    /// A customer's balance, subscriptions, one-time access, open
    /// reservations, entitlements, payment totals and teams.
    ///
    /// # Errors
    /// [`AdminListError::UserNotFound`]; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user_id))]
    pub async fn customer_overview(
        &self,
        user_id: &UserId,
    ) -> Result<CustomerOverview, AdminListError> {
        let user = self.customer(user_id).await?;
        let status = self.report_status(&user).await?;
        let entitlements = self.entitlements_of(&status).await?;
        let totals = self.store.payment_totals(&user.id).await?;
        let teams = self.store.memberships(&user.id).await?;
        Ok(CustomerOverview {
            user,
            status,
            entitlements,
            totals,
            teams,
        })
    }

    /// A customer's ledger, newest first.
    ///
    /// # Errors
    /// [`AdminListError::UserNotFound`]; a bad cursor or limit; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user_id))]
    pub async fn customer_transactions(
        &self,
        user_id: &UserId,
        page: &PageAfter,
    ) -> Result<CursorPage<CreditTransaction>, AdminListError> {
        let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
        let user = self.customer(user_id).await?;
        Ok(self
            .store
            .transactions_page(&user.id, &keyset)
            .await?
            .into())
    }

    /// Every order matching the filter, newest first (an edge reads a status with
    /// [`order_status`]).
    ///
    /// # Errors
    /// A bad cursor or limit; infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn admin_orders(
        &self,
        filter: &OrderFilter,
        page: &PageAfter,
    ) -> Result<CursorPage<OrderRecord>, AdminListError> {
        let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
        Ok(self.store.orders_page(filter, &keyset).await?.into())
    }

    /// Recorded provider events, newest first, with their
    /// outcome and raw body.
    ///
    /// # Errors
    /// A bad cursor or limit; infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn webhook_inbox(
        &self,
        filter: &InboxFilter,
        page: &PageAfter,
    ) -> Result<CursorPage<RecordedEvent>, AdminListError> {
        let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
        Ok(self.store.inbox_page(filter, &keyset).await?.into())
    }

    /// What administrators did, newest first.
    ///
    /// # Errors
    /// A bad cursor or limit; infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn audit_log(
        &self,
        page: &PageAfter,
    ) -> Result<CursorPage<AuditEntry>, AdminListError> {
        let keyset = Keyset::parse(page.cursor.as_deref(), page.limit)?;
        Ok(self.store.audit_page(&keyset).await?.into())
    }
}
