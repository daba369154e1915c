//! The admin console's endpoints (issue 18): `GET /api/admin/users` (search), `GET
//! /api/admin/users/{id}` (overview), `GET /api/admin/users/{id}/transactions` and `GET
//! /api/admin/orders` (JSON pages or streamed CSV), `GET /api/admin/audit`, and `POST
//! /api/admin/subscriptions/{id}/cancel`. Administrators only: anyone else gets a 403 problem.

use std::sync::Arc;

use application::ports::OrderFilter;
use application::use_cases::admin_console::{
    AdminCancelError, AdminListError, PageAfter, PlanAllowanceError, order_status,
};
use domain::{PlanId, ProviderId, SubscriptionId, UserId};
use poem::Request;
use poem_openapi::OpenApi;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;

use crate::AppState;
use crate::admin_allowances::{
    AllowPlanResponse, PlanAllowanceList, PlanAllowanceView, PlanAllowancesResponse,
    RemovePlanAllowanceResponse, allowance_problem,
};
use crate::admin_customers::{
    AdminCancelBody, AdminCancelResponse, AdminOrderPage, AdminOrderView, AdminOrdersResponse,
    AdminTransactionPage, AdminTransactionView, AuditEntryView, AuditPage, AuditResponse,
    CancelWhen, CustomerOverviewView, CustomerPage, CustomerResponse, CustomerTransactionsResponse,
    CustomerView, CustomersResponse, ORDER_CSV, PaymentTotalView, TRANSACTION_CSV, cancel_problem,
    cancel_when, list_problem, map_page, order_cells, transaction_cells,
};
use crate::admin_export::{Exported, csv_body, wants_csv};
use crate::auth::Credential;
use crate::credits::StatusView;
use crate::dto::{SubscriptionView, parse_id};
use crate::entitlements::EntitlementGrantView;
use crate::i18n::text_language;
use crate::optional_json::OptionalJson;
use crate::problem::{Code, Problem};

/// The admin console's endpoints.
pub(crate) struct AdminConsoleApi {
    state: Arc<AppState>,
}

impl AdminConsoleApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the admin console's endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Customers, orders, ledgers and the audit log (administrators only).
    AdminConsole,
}

/// A page request from query parameters.
pub(crate) fn page_after(
    cursor: Option<String>,
    limit: Option<String>,
) -> Result<PageAfter, Problem> {
    let limit = limit
        .map(|l| {
            l.trim()
                .parse::<i64>()
                .map_err(|_| Problem::new(Code::InvalidPagination, "limit must be an integer"))
        })
        .transpose()?;
    Ok(PageAfter { cursor, limit })
}

/// The order filter from query parameters but the status ([`with_status`]).
fn order_filter(provider: Option<String>, user_id: Option<String>) -> Result<OrderFilter, Problem> {
    let provider = provider
        .map(|p| {
            p.parse::<ProviderId>()
                .map_err(|e| Problem::new(Code::UnknownProvider, e.to_string()))
        })
        .transpose()?;
    let user_id = user_id
        .map(|u| UserId::new(u).map_err(|e| Problem::invalid_field("userId", e.to_string())))
        .transpose()?;
    Ok(OrderFilter {
        status: None,
        provider,
        user_id,
    })
}

/// `filter` with the order status named by `status`, if any: an unknown status is refused.
fn with_status(filter: OrderFilter, status: Option<String>) -> Result<OrderFilter, Problem> {
    let status = status
        .map(|s| order_status(s.trim()).map_err(list_problem))
        .transpose()?;
    Ok(OrderFilter { status, ..filter })
}

#[OpenApi(tag = "Tag::AdminConsole")]
impl AdminConsoleApi {
    /// Find customers: with `query`, those whose e-mail starts with it (case-insensitive) or,
    /// from six characters, whose id does, by e-mail; without, every customer, newest first.
    #[oai(path = "/api/admin/users", method = "get")]
    async fn customers(
        &self,
        credential: Credential,
        /// The start of an e-mail or of an id.
        query: Query<Option<String>>,
        /// The `nextCursor` of the previous page.
        cursor: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20).
        limit: Query<Option<String>>,
    ) -> CustomersResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let page = page_after(cursor.0, limit.0)?;
            self.state
                .ports
                .admin
                .find_customers(query.0.as_deref(), &page)
                .await
                .map_err(list_problem)
        };
        match result.await {
            Ok(page) => {
                let (items, next_cursor) = map_page(&page, |u| CustomerView::from(u));
                CustomersResponse::Ok(Json(CustomerPage { items, next_cursor }))
            }
            Err(problem) => problem.into(),
        }
    }

    /// A customer's balance, subscriptions, one-time access, open reservations, entitlements
    /// and totals paid and refunded per currency.
    #[oai(path = "/api/admin/users/:id", method = "get")]
    async fn customer(&self, credential: Credential, id: Path<String>) -> CustomerResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let id = customer_id(&id.0)?;
            self.state
                .ports
                .admin
                .customer_overview(&id)
                .await
                .map_err(list_problem)
        };
        match result.await {
            Ok(o) => {
                let now = self.state.ports.accounts.now();
                CustomerResponse::Ok(Json(CustomerOverviewView {
                    user: CustomerView::from(&o.user),
                    status: StatusView::new(&o.status, now, &o.entitlements.entitlements),
                    entitlement_grants: o
                        .entitlements
                        .grants
                        .iter()
                        .map(EntitlementGrantView::from)
                        .collect(),
                    totals: o.totals.iter().map(PaymentTotalView::from).collect(),
                }))
            }
            Err(problem) => problem.into(),
        }
    }

    /// A customer's ledger, newest first; `?format=csv` or `Accept: text/csv` streams all of it
    /// as CSV.
    #[oai(path = "/api/admin/users/:id/transactions", method = "get")]
    #[allow(clippy::too_many_arguments)] // reason: one parameter per query parameter of the endpoint
    async fn customer_transactions(
        &self,
        credential: Credential,
        id: Path<String>,
        /// The `nextCursor` of the previous page (CSV: where the export starts).
        cursor: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20; CSV reads pages of 100).
        limit: Query<Option<String>>,
        /// `json` (default) or `csv`.
        format: Query<Option<String>>,
        /// Descriptions' language (`en` or `zh-CN`), else `Accept-Language`.
        locale: Query<Option<String>>,
        request: &Request,
    ) -> Exported<CustomerTransactionsResponse> {
        let result = async {
            self.state.admin(&credential).await?;
            let (csv, page) = export_page(format.0.as_deref(), request, cursor.0, limit.0)?;
            let user = customer_id(&id.0)?;
            let first = self
                .state
                .ports
                .admin
                .customer_transactions(&user, &page)
                .await
                .map_err(list_problem)?;
            Ok::<_, Problem>((csv, user, first))
        };
        match result.await {
            Ok((true, user, first)) => {
                let state = self.state.clone();
                let fetch = move |after: PageAfter| {
                    let state = state.clone();
                    let user = user.clone();
                    async move { state.ports.admin.customer_transactions(&user, &after).await }
                };
                Exported::Csv {
                    body: csv_body(TRANSACTION_CSV, first, transaction_cells, fetch),
                    filename: "transactions.csv",
                }
            }
            Ok((false, _, page)) => {
                let language = text_language(locale.0.as_deref(), request);
                let (items, next_cursor) =
                    map_page(&page, |t| AdminTransactionView::new(t, language));
                Exported::Json(CustomerTransactionsResponse::Ok(Json(
                    AdminTransactionPage { items, next_cursor },
                )))
            }
            Err(problem) => Exported::Json(problem.into()),
        }
    }

    /// Every order, newest first, filtered by status, provider and buyer; `?format=csv` or
    /// `Accept: text/csv` streams all of them as CSV.
    #[oai(path = "/api/admin/orders", method = "get")]
    #[allow(clippy::too_many_arguments)] // reason: one parameter per query parameter of the endpoint
    async fn orders(
        &self,
        credential: Credential,
        /// Only orders in this status (`pending`, `paid`, `refunded`, …).
        status: Query<Option<String>>,
        /// Only this provider's.
        provider: Query<Option<String>>,
        /// Only this user's.
        #[oai(name = "userId")]
        user_id: Query<Option<String>>,
        /// The `nextCursor` of the previous page (CSV: where the export starts).
        cursor: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20; CSV reads pages of 100).
        limit: Query<Option<String>>,
        /// `json` (default) or `csv`.
        format: Query<Option<String>>,
        request: &Request,
    ) -> Exported<AdminOrdersResponse> {
        let result = async {
            self.state.admin(&credential).await?;
            let csv = wants_csv(format.0.as_deref(), request)
                .map_err(|m| Problem::invalid_field("format", m))?;
            let filter = order_filter(provider.0, user_id.0)?;
            let page = export_page_after(csv, cursor.0, limit.0)?;
            // A bad page size is answered before a bad status, a bad status before a bad cursor.
            let filter = with_status(filter, status.0)?;
            let first = self
                .state
                .ports
                .admin
                .admin_orders(&filter, &page)
                .await
                .map_err(list_problem)?;
            Ok::<_, Problem>((csv, filter, first))
        };
        match result.await {
            Ok((true, filter, first)) => {
                let state = self.state.clone();
                let fetch = move |after: PageAfter| {
                    let state = state.clone();
                    let filter = filter.clone();
                    async move { state.ports.admin.admin_orders(&filter, &after).await }
                };
                Exported::Csv {
                    body: csv_body(ORDER_CSV, first, order_cells, fetch),
                    filename: "orders.csv",
                }
            }
            Ok((false, _, page)) => {
                let (items, next_cursor) = map_page(&page, |r| AdminOrderView::from(r));
                Exported::Json(AdminOrdersResponse::Ok(Json(AdminOrderPage {
                    items,
                    next_cursor,
                })))
            }
            Err(problem) => Exported::Json(problem.into()),
        }
    }

    /// What administrators did, newest first.
    #[oai(path = "/api/admin/audit", method = "get")]
    async fn audit(
        &self,
        credential: Credential,
        /// The `nextCursor` of the previous page.
        cursor: Query<Option<String>>,
        /// Page size, 1 to 100 (default 20).
        limit: Query<Option<String>>,
    ) -> AuditResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let page = page_after(cursor.0, limit.0)?;
            self.state
                .ports
                .admin
                .audit_log(&page)
                .await
                .map_err(list_problem)
        };
        match result.await {
            Ok(page) => {
                let (items, next_cursor) = map_page(&page, |e| AuditEntryView::from(e));
                AuditResponse::Ok(Json(AuditPage { items, next_cursor }))
            }
            Err(problem) => problem.into(),
        }
    }

    /// The hidden plans an administrator allowed a customer to buy or switch to.
    #[oai(path = "/api/admin/users/:id/plan-allowances", method = "get")]
    async fn plan_allowances(
        &self,
        credential: Credential,
        id: Path<String>,
    ) -> PlanAllowancesResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let id = customer_id(&id.0)?;
            let admin = &self.state.ports.admin;
            admin.plan_allowances(&id).await.map_err(allowance_problem)
        };
        match result.await {
            Ok(list) => PlanAllowancesResponse::Ok(Json(PlanAllowanceList {
                items: list.iter().map(PlanAllowanceView::from).collect(),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Allow a customer a hidden plan: they may then buy it, or switch to it, although it is
    /// neither listed nor for sale to anyone else (a private offer). Audited (`plan.allowed`).
    #[oai(path = "/api/admin/users/:id/plan-allowances/:plan_id", method = "put")]
    async fn allow_plan(
        &self,
        credential: Credential,
        id: Path<String>,
        plan_id: Path<String>,
    ) -> AllowPlanResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let (user, plan) = allowance_ids(&id.0, &plan_id.0)?;
            let port = &self.state.ports.admin;
            port.allow_plan(&admin, &user, &plan)
                .await
                .map_err(allowance_problem)
        };
        match result.await {
            Ok(allowed) => AllowPlanResponse::Ok(Json(PlanAllowanceView::from(&allowed))),
            Err(problem) => problem.into(),
        }
    }

    /// Withdraw a customer's allowance of a plan. Audited (`plan.allowance_removed`); what the
    /// customer already bought stays theirs.
    #[oai(
        path = "/api/admin/users/:id/plan-allowances/:plan_id",
        method = "delete"
    )]
    async fn remove_plan_allowance(
        &self,
        credential: Credential,
        id: Path<String>,
        plan_id: Path<String>,
    ) -> RemovePlanAllowanceResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let (user, plan) = allowance_ids(&id.0, &plan_id.0)?;
            let port = &self.state.ports.admin;
            port.remove_plan_allowance(&admin, &user, &plan)
                .await
                .map_err(allowance_problem)
        };
        match result.await {
            Ok(()) => RemovePlanAllowanceResponse::Removed,
            Err(problem) => problem.into(),
        }
    }

    /// Cancel a customer's subscription through its provider: at the end of its current
    /// period (the default, as the subscriber's own cancel does), or now (`when: now`, where
    /// the provider can end one at once; it ends when the provider's ended event arrives).
    #[oai(path = "/api/admin/subscriptions/:id/cancel", method = "post")]
    async fn cancel_subscription(
        &self,
        credential: Credential,
        id: Path<String>,
        // `{"when": "now"}` or `{"when": "period_end"}`; absent (or `{}`): at period end.
        body: OptionalJson<AdminCancelBody>,
    ) -> AdminCancelResponse {
        let when = cancel_when(&body);
        let now = matches!(when, Ok(CancelWhen::Now));
        let result = async {
            let admin = self.state.admin(&credential).await?;
            when?;
            let id = parse_id(&id.0, SubscriptionId::new, || {
                cancel_problem(AdminCancelError::NotFound)
            })?;
            let admin_port = &self.state.ports.admin;
            if now {
                admin_port
                    .cancel_subscription_now_for_customer(&admin, &id)
                    .await
            } else {
                admin_port
                    .cancel_subscription_for_customer(&admin, &id)
                    .await
            }
            .map_err(cancel_problem)
        };
        match result.await {
            Ok(subscription) => {
                let access = self.state.ports.payments.subscription_access(&subscription);
                let view = SubscriptionView::new(&subscription, access);
                if now {
                    AdminCancelResponse::Accepted(Json(view))
                } else {
                    AdminCancelResponse::Ok(Json(view))
                }
            }
            Err(problem) => problem.into(),
        }
    }
}

/// The customer a path names: a malformed id names nobody.
/// Whether a list is exported as CSV (`format`, else the `Accept` header) and the page it
/// starts from.
fn export_page(
    format: Option<&str>,
    request: &Request,
    cursor: Option<String>,
    limit: Option<String>,
) -> Result<(bool, PageAfter), Problem> {
    let csv = wants_csv(format, request).map_err(|m| Problem::invalid_field("format", m))?;
    Ok((csv, export_page_after(csv, cursor, limit)?))
}

/// The page a list starts from: a CSV export reads the largest pages.
fn export_page_after(
    csv: bool,
    cursor: Option<String>,
    limit: Option<String>,
) -> Result<PageAfter, Problem> {
    let mut page = page_after(cursor, limit)?;
    if csv {
        page.limit = Some(i64::from(application::pagination::MAX_LIMIT));
    }
    Ok(page)
}

/// The customer and plan an allowance path names: a malformed id is one that does not exist.
fn allowance_ids(user: &str, plan: &str) -> Result<(UserId, PlanId), Problem> {
    let user = customer_id(user)?;
    let plan = parse_id(plan, PlanId::new, || {
        allowance_problem(PlanAllowanceError::PlanNotFound)
    })?;
    Ok((user, plan))
}

fn customer_id(raw: &str) -> Result<UserId, Problem> {
    parse_id(raw, UserId::new, || {
        list_problem(AdminListError::UserNotFound)
    })
}
