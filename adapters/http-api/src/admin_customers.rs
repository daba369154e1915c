//! The admin console's JSON views (issue 18): customers, a customer's overview and ledger,
//! every order, the audit log; each list is one page and the cursor of the next.

use application::accounts::User;
use application::ports::{AuditEntry, CreditTransaction, OrderRecord, PaymentTotal};
use application::use_cases::admin_console::{AdminCancelError, AdminListError, CursorPage};
use domain::Money;
use poem_openapi::Object;
use poem_openapi::payload::Json;

use crate::admin_export::text_cell;
use crate::credits::{StatusView, TransactionView};
use crate::dto::{OrderView, SubscriptionView, major_units, timestamp};
use crate::entitlements::EntitlementGrantView;
use crate::i18n::{Language, transaction_description};
use crate::problem::{Code, Problem, api_response};

/// A customer as the console lists them.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CustomerView {
    /// The user id.
    pub id: String,
    /// The sign-in address.
    pub email: String,
    /// `user` or `admin`.
    pub role: String,
    /// When the account was made.
    pub created_at: String,
}

impl From<&User> for CustomerView {
    fn from(u: &User) -> Self {
        Self {
            id: u.id.to_string(),
            email: u.email.as_str().to_owned(),
            role: u.role.code().to_owned(),
            created_at: timestamp(u.created_at),
        }
    }
}

/// A page of customers.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CustomerPage {
    /// With a query: by e-mail; without: newest first.
    pub items: Vec<CustomerView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

/// What a customer paid and was refunded in one currency.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PaymentTotalView {
    /// ISO 4217 code.
    pub currency: String,
    /// Paid, in minor units (orders paid, refunded since or not, and renewals).
    pub paid_minor: i64,
    /// Refunded of those, in minor units.
    pub refunded_minor: i64,
    /// Paid in major units (decimal string).
    pub paid: String,
    /// Refunded in major units (decimal string).
    pub refunded: String,
}

impl From<&PaymentTotal> for PaymentTotalView {
    fn from(t: &PaymentTotal) -> Self {
        let major = |minor| {
            Money::from_minor(minor, t.currency)
                .map(major_units)
                .unwrap_or_else(|_| minor.to_string())
        };
        Self {
            currency: t.currency.code().to_owned(),
            paid_minor: t.paid_minor,
            refunded_minor: t.refunded_minor,
            paid: major(t.paid_minor),
            refunded: major(t.refunded_minor),
        }
    }
}

/// Everything an operator sees of one customer.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CustomerOverviewView {
    /// The account.
    pub user: CustomerView,
    /// Balance, live subscriptions, one-time access, open reservations and entitlements, as the
    /// customer's own `GET /api/credits/status` reports them.
    pub status: StatusView,
    /// For each entitlement key, the purchase giving it.
    pub entitlement_grants: Vec<EntitlementGrantView>,
    /// Paid and refunded per currency.
    pub totals: Vec<PaymentTotalView>,
}

/// A ledger entry as an operator sees it: the customer's view plus its note (an adjustment's
/// reason and acting administrator).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminTransactionView {
    /// The entry as the customer's history shows it.
    #[oai(flatten)]
    pub transaction: TransactionView,
    /// The note kept with it.
    #[oai(skip_serializing_if_is_none)]
    pub note: Option<String>,
}

impl AdminTransactionView {
    pub(crate) fn new(t: &CreditTransaction, language: Language) -> Self {
        Self {
            transaction: TransactionView::new(t, language),
            note: t.context.note.clone(),
        }
    }
}

/// A page of a customer's ledger, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminTransactionPage {
    /// The entries.
    pub items: Vec<AdminTransactionView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

/// An order as the console lists it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminOrderView {
    /// The buyer.
    pub user_id: String,
    /// The order.
    #[oai(flatten)]
    pub order: OrderView,
    /// Refunded so far, in minor units.
    pub refunded_minor: i64,
    /// A provider event that did not match the order (amount or currency).
    #[oai(skip_serializing_if_is_none)]
    pub mismatch: Option<String>,
}

impl From<&OrderRecord> for AdminOrderView {
    fn from(r: &OrderRecord) -> Self {
        Self {
            user_id: r.order.user_id().to_string(),
            order: OrderView::from(r),
            refunded_minor: r.order.refunded().map_or(0, |m| m.amount_minor()),
            mismatch: r.mismatch.clone(),
        }
    }
}

/// A page of orders, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminOrderPage {
    /// The orders.
    pub items: Vec<AdminOrderView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

/// One administrator's action.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AuditEntryView {
    /// Id (increasing).
    pub id: i64,
    /// The acting administrator.
    pub admin_id: String,
    /// `credits.granted`, `credits.debited`, `order.refunded`, `subscription.canceled`, …
    pub action: String,
    /// `user`, `order`, `subscription`, …
    pub object_kind: String,
    /// The object's id.
    pub object_id: String,
    /// Its state before, a JSON object as text.
    #[oai(skip_serializing_if_is_none)]
    pub before: Option<String>,
    /// Its state after, a JSON object as text.
    #[oai(skip_serializing_if_is_none)]
    pub after: Option<String>,
    /// When.
    pub at: String,
}

impl From<&AuditEntry> for AuditEntryView {
    fn from(e: &AuditEntry) -> Self {
        Self {
            id: e.id,
            admin_id: e.admin_id.to_string(),
            action: e.action.code().to_owned(),
            object_kind: e.object_kind.clone(),
            object_id: e.object_id.clone(),
            before: e.before.clone(),
            after: e.after.clone(),
            at: timestamp(e.at),
        }
    }
}

/// A page of the audit log, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AuditPage {
    /// The entries.
    pub items: Vec<AuditEntryView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

/// Map a page's rows into views, keeping its cursor.
pub(crate) fn map_page<T, V>(
    page: &CursorPage<T>,
    view: impl Fn(&T) -> V,
) -> (Vec<V>, Option<String>) {
    (
        page.items.iter().map(view).collect(),
        page.next_cursor.clone(),
    )
}

/// The problem for a list that could not be read.
pub(crate) fn list_problem(e: AdminListError) -> Problem {
    match e {
        AdminListError::Page(e) => Problem::new(Code::InvalidPagination, e.to_string()),
        AdminListError::Invalid { field, message } => Problem::invalid_field(field, message),
        AdminListError::UserNotFound => Problem::new(Code::UserNotFound, "no such user"),
        AdminListError::AccountNotFound => Problem::new(Code::AccountNotFound, "no such account"),
        AdminListError::Infra(infra) => infra.into(),
    }
}

/// The problem for a refused cancel.
pub(crate) fn cancel_problem(e: AdminCancelError) -> Problem {
    use application::use_cases::cancel_payment::CancelPaymentError as E;
    match e {
        AdminCancelError::NotFound | AdminCancelError::Cancel(E::NotFound) => {
            Problem::new(Code::NotFound, "no such subscription")
        }
        AdminCancelError::Cancel(E::NotCancellable(state)) => Problem::new(
            Code::NotCancellable,
            format!("the subscription is {state} and cannot be cancelled"),
        ),
        AdminCancelError::Cancel(E::Gateway(reason)) => Problem::provider_error(
            "the payment provider could not be told; nothing changed, retry later",
            &reason,
        ),
        AdminCancelError::Cancel(E::Infra(infra)) => infra.into(),
        // An administrator's cancel is not a member's: it never asks who manages billing.
        AdminCancelError::Cancel(E::NotOwner) => Problem::new(Code::Forbidden, e.to_string()),
        AdminCancelError::NowNotSupported => {
            Problem::new(Code::CancelNowNotSupported, e.to_string())
        }
    }
}

/// The CSV columns of an order export.
pub(crate) const ORDER_CSV: &[&str] = &[
    "order_id",
    "user_id",
    "status",
    "provider",
    "plan_id",
    "plan_type",
    "amount_minor",
    "currency",
    "refunded_minor",
    "created_at",
    "paid_at",
    "mismatch",
];

/// One order as CSV cells.
pub(crate) fn order_cells(r: &OrderRecord) -> Vec<String> {
    let v = AdminOrderView::from(r);
    vec![
        text_cell(&v.order.order_id),
        text_cell(&v.user_id),
        v.order.status,
        v.order.provider,
        text_cell(&v.order.plan_id),
        v.order.plan_type,
        v.order.amount_minor.to_string(),
        v.order.currency,
        v.refunded_minor.to_string(),
        v.order.created_at,
        v.order.paid_at.unwrap_or_default(),
        text_cell(v.mismatch.as_deref().unwrap_or_default()),
    ]
}

/// The CSV columns of a ledger export.
pub(crate) const TRANSACTION_CSV: &[&str] = &[
    "id",
    "type",
    "description",
    "amount_hundredths",
    "balance_after_hundredths",
    "order_id",
    "subscription_id",
    "reservation_id",
    "feature",
    "model",
    "note",
    "created_at",
];

/// One ledger entry as CSV cells (descriptions in English).
pub(crate) fn transaction_cells(t: &CreditTransaction) -> Vec<String> {
    let text = |v: Option<String>| text_cell(&v.unwrap_or_default());
    vec![
        t.id.to_string(),
        t.kind.code().to_owned(),
        transaction_description(t.kind, Language::English).to_owned(),
        t.amount.hundredths().to_string(),
        t.balance_after.hundredths().to_string(),
        text(t.context.order_id.as_ref().map(ToString::to_string)),
        text(t.context.subscription_id.as_ref().map(ToString::to_string)),
        text(t.context.reservation_id.as_ref().map(ToString::to_string)),
        text(t.context.feature.clone()),
        text(t.context.model.clone()),
        text(t.context.note.clone()),
        timestamp(t.created_at),
    ]
}

api_response! {
    /// `GET /api/admin/users`.
    pub enum CustomersResponse {
        /// A page of customers.
        200 Ok(Json<CustomerPage>),
    }
    problems {
        /// `invalid_pagination`: a bad cursor or limit.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `validation_failed`: the query is too long.
        422 UnprocessableEntity,
    }
}

api_response! {
    /// `GET /api/admin/users/{id}`.
    pub enum CustomerResponse {
        /// The customer's overview.
        200 Ok(Json<CustomerOverviewView>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `GET /api/admin/users/{id}/transactions`.
    pub enum CustomerTransactionsResponse {
        /// A page of the customer's ledger (or, asked for, all of it as CSV).
        200 Ok(Json<AdminTransactionPage>),
    }
    problems {
        /// `invalid_pagination`: a bad cursor or limit.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
        /// `validation_failed`: an unknown `format`.
        422 UnprocessableEntity,
    }
}

api_response! {
    /// `GET /api/admin/orders`.
    pub enum AdminOrdersResponse {
        /// A page of orders (or, asked for, all of them as CSV).
        200 Ok(Json<AdminOrderPage>),
    }
    problems {
        /// `invalid_pagination`: a bad cursor or limit.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `validation_failed` (an unknown `status`, `userId` or `format`) or `unknown_provider`.
        422 UnprocessableEntity,
    }
}

api_response! {
    /// `GET /api/admin/audit`.
    pub enum AuditResponse {
        /// A page of the audit log.
        200 Ok(Json<AuditPage>),
    }
    problems {
        /// `invalid_pagination`: a bad cursor or limit.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
    }
}

/// When an administrator's cancel takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, poem_openapi::Enum)]
#[oai(rename_all = "snake_case")]
pub enum CancelWhen {
    /// At the end of the paid period (the default).
    #[default]
    PeriodEnd,
    /// Now, through the provider's immediate cancel.
    Now,
}

/// `POST /api/admin/subscriptions/{id}/cancel`'s optional body, `{"when": "now"}`.
#[derive(Debug, Clone, Default, poem_openapi::Object)]
#[oai(rename_all = "camelCase")]
pub struct AdminCancelBody {
    /// `period_end` (the default) or `now`.
    #[oai(default)]
    pub when: CancelWhen,
}

/// When the cancel's body (absent, `{}` or `{"when": …}`) says; 400 `validation_failed` for
/// anything else.
pub(crate) fn cancel_when(
    body: &crate::optional_json::OptionalJson<AdminCancelBody>,
) -> Result<CancelWhen, Problem> {
    match &body.0 {
        Ok(body) => Ok(body.as_ref().map_or(CancelWhen::PeriodEnd, |b| b.when)),
        Err(_) => Err(Problem::bad_input(
            "the body must be {\"when\": \"now\"} or {\"when\": \"period_end\"}",
        )),
    }
}

api_response! {
    /// `POST /api/admin/subscriptions/{id}/cancel`.
    pub enum AdminCancelResponse {
        /// The subscription, now ending at the end of its period.
        200 Ok(Json<SubscriptionView>),
        /// `when: now`: the provider was asked to end it at once; it ends (here) when the
        /// provider's ended event arrives. The subscription as it stands now.
        202 Accepted(Json<SubscriptionView>),
    }
    problems {
        /// `validation_failed`: the body is not `{"when": "now" | "period_end"}`.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `not_found`: no such subscription.
        404 NotFound,
        /// `not_cancellable`: it is over already.
        409 Conflict,
        /// `cancel_now_not_supported`: its provider cannot end it at once (`when: now`).
        422 Unprocessable,
        /// `provider_error`: the provider could not be told; nothing changed.
        502 BadGateway,
    }
}
