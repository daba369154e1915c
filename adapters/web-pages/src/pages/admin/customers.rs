//! `/admin/customers`: find a customer by e-mail or id (prefix), and a customer's page — balance,
//! subscriptions, one-time access, entitlements, open reservations, paid and refunded per
//! currency, the teams they belong to (linked to `/admin/accounts/{id}`), the ledger and the
//! orders — with the actions an operator takes: grant or debit credits, refund an order, cancel a
//! subscription at period end, allow a hidden plan. Each action goes through a confirmation page
//! (no script needed) carrying an idempotency key made when it is shown, so a form sent twice
//! acts once.

mod actions;

use std::sync::Arc;

use application::accounts::User;
use application::ports::{CreditTransaction, Membership, OrderFilter, OrderRecord, PlanAllowance};
use application::use_cases::admin_console::{CustomerOverview, PageAfter, PlanAllowanceError};
use domain::{Money, UserId};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::orders::order_table;
use super::{accounts, console, gate};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::pages::dashboard_limits::{self, Audience};
use crate::pages::dashboard_teams::role_label;
use crate::pages::{parse_id, provider_key};
use crate::state::{PageError, PageResult, PageState, Visitor};

pub(crate) use self::actions::{apply, confirm};

const PATH: &str = "/admin/customers";

/// `GET /admin/customers?query=&cursor=`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let query = v.query("query").map(str::trim).filter(|q| !q.is_empty());
    let page = state
        .ports
        .admin
        .find_customers(query, &console::page_after(&v))
        .await
        .map_err(console::list_error)?;
    let body = html! {
        (console::sections(&v, PATH))
        section.page-intro {
            h1 { (v.t("console.customers_title")) }
            p.muted { (v.t("console.customers_lead")) }
        }
        form.card.section-card.filter-bar method="get" action=(PATH) role="search" {
            div.field {
                label for="customer-query" { (v.t("console.customers_search")) }
                input #customer-query type="search" name="query" value=[query] maxlength="254"
                    autocomplete="off" data-testid="customer-query";
            }
            div.form-actions {
                button.btn.btn-secondary type="submit" data-testid="search" {
                    (v.t("console.customers_find"))
                }
            }
        }
        section.card.section-card {
            @if page.items.is_empty() {
                p.muted { (v.t("console.customers_none")) }
            } @else {
                div.table-wrap { (customer_table(&v, &page.items)) }
            }
            (console::pager(&v, PATH, &[("query", query)], page.next_cursor.as_deref()))
        }
    };
    let title = v.t("console.customers_title");
    Ok(layout::page(&v, StatusCode::OK, title, Nav::Admin, body))
}

fn customer_table(v: &Visitor, users: &[User]) -> Markup {
    html! {
        table.table.table-stack data-testid="customers" {
            thead { tr {
                th scope="col" { (v.t("console.col_email")) }
                th scope="col" { (v.t("console.col_user_id")) }
                th scope="col" { (v.t("console.col_created")) }
            } }
            tbody {
                @for user in users {
                    tr data-user-id=(user.id.as_str()) {
                        td data-label=(v.t("console.col_email")) {
                            a href={(PATH) "/" (user.id.as_str())} data-testid="customer-link" {
                                (user.email.as_str())
                            }
                        }
                        td data-label=(v.t("console.col_user_id")) { code { (user.id.as_str()) } }
                        td data-label=(v.t("console.col_created")) {
                            span { (format::date(user.created_at, v.lang)) }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /admin/customers/{id}?cursor=`.
pub(crate) async fn show(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    gate(&v)?;
    let raw = request.raw_path_param("id").unwrap_or_default();
    let id = parse_id(raw, UserId::new).ok_or(PageError::NotFound)?;
    let ports = &state.ports;
    let overview = ports
        .admin
        .customer_overview(&id)
        .await
        .map_err(console::list_error)?;
    let ledger = ports
        .admin
        .customer_transactions(&id, &console::page_after(&v))
        .await
        .map_err(console::list_error)?;
    let filter = OrderFilter {
        user_id: Some(id.clone()),
        ..OrderFilter::default()
    };
    let orders = ports
        .admin
        .admin_orders(
            &filter,
            &PageAfter {
                cursor: None,
                limit: Some(25),
            },
        )
        .await
        .map_err(console::list_error)?;
    let allowances = (ports.admin.plan_allowances(&id).await).map_err(|e| match e {
        PlanAllowanceError::Infra(infra) => infra.into(),
        _ => PageError::NotFound,
    })?;
    let account = domain::AccountId::personal(&id);
    let limits = dashboard_limits::load_for_console(&state, &account).await?;
    let top_up = super::super::dashboard_top_up::console_section(&state, &v, &account).await?;
    let here = format!("{PATH}/{id}");
    let body = html! {
        (console::sections(&v, PATH))
        nav.breadcrumb { a href=(PATH) { "← " (v.t("console.customers_title")) } }
        section.page-intro {
            h1 data-testid="customer-email" { (overview.user.email.as_str()) }
            p.muted { code { (id) } }
        }
        (console::notice(&v, &NOTICES))
        (dashboard_limits::notice(&v))
        (summary(&v, &overview))
        (adjust_form(&v, id.as_str()))
        (holdings(&v, &overview, id.as_str()))
        (teams_card(&v, &overview.teams))
        (allowances_card(&v, &allowances, id.as_str()))
        (dashboard_limits::section(&v, (&limits, &[]), (&account, true), Audience::Console))
        (top_up)
        section.card.section-card {
            h2 { (v.t("console.customer_orders")) }
            @if orders.items.is_empty() { p.muted { (v.t("console.orders_none")) } }
            @else { div.table-wrap { (order_table(&v, &orders.items)) } }
        }
        section.card.section-card {
            h2 { (v.t("console.customer_ledger")) }
            @if ledger.items.is_empty() { p.muted { (v.t("console.ledger_none")) } }
            @else { div.table-wrap { (ledger_table(&v, &ledger.items)) } }
            (console::pager(&v, &here, &[], ledger.next_cursor.as_deref()))
        }
    };
    let title = overview.user.email.as_str().to_owned();
    Ok(layout::page(&v, StatusCode::OK, &title, Nav::Admin, body))
}

/// The notices the customer's page shows after an action.
const NOTICES: [&str; 7] = [
    "granted",
    "debited",
    "refunded",
    "canceled",
    "cancel_requested",
    "allowed",
    "allowance_removed",
];

/// The hidden plans allowed to the customer, each with Withdraw, and a form to allow one.
fn allowances_card(v: &Visitor, allowances: &[PlanAllowance], id: &str) -> Markup {
    let confirm = format!("{PATH}/{id}/confirm");
    html! {
        section.card.section-card data-testid="allowances" {
            h2 { (v.t("console.allowances_title")) }
            p.muted { (v.t("console.allowances_lead")) }
            @if allowances.is_empty() { p.muted { (v.t("console.allowances_none")) } }
            @for a in allowances {
                div data-testid="allowance" { form.inline-form method="post" action=(confirm) {
                    (csrf_field(v))
                    input type="hidden" name="action" value="remove_allowance";
                    input type="hidden" name="planId" value=(a.plan_id);
                    code { (a.plan_id) } " "
                    span.muted { (format::date(a.allowed_at, v.lang)) } " "
                    button.btn.btn-ghost type="submit" { (v.t("console.allowance_remove")) }
                } }
            }
            form.stack method="post" action=(confirm) {
                (csrf_field(v))
                input type="hidden" name="action" value="allow_plan";
                div.field {
                    label for="allow-plan" { (v.t("console.allowance_plan")) }
                    input #allow-plan type="text" name="planId" required maxlength="64"
                        data-testid="allow-plan";
                }
                div.form-actions {
                    button.btn.btn-secondary type="submit" data-testid="allow" {
                        (v.t("console.allowance_add"))
                    }
                }
            }
        }
    }
}

/// The teams the customer is a present member of, each linked to its page in the console.
fn teams_card(v: &Visitor, teams: &[Membership]) -> Markup {
    html! {
        section.card.section-card data-testid="customer-teams" {
            h2 { (v.t("console.customer_teams")) }
            @if teams.is_empty() { p.muted { (v.t("console.customer_teams_none")) } }
            ul.plain-list {
                @for membership in teams {
                    @let account = &membership.account;
                    li {
                        a href={(accounts::PATH) "/" (account.id.as_str())}
                            data-testid="customer-team" {
                            (account.name.as_deref().unwrap_or(account.id.as_str()))
                        }
                        " · " (role_label(v, membership.role))
                        " · " code { (account.id.as_str()) }
                    }
                }
            }
        }
    }
}

fn summary(v: &Visitor, overview: &CustomerOverview) -> Markup {
    html! {
        section.card.section-card data-testid="customer-summary" {
            dl.facts {
                div {
                    dt { (v.t("console.customer_balance")) }
                    dd data-testid="customer-balance" { (format::credits(overview.status.balance)) }
                }
                @for total in &overview.totals {
                    @let money = |minor: i64| Money::from_minor(minor, total.currency)
                        .map_or_else(|_| minor.to_string(), |m| format::money(m, v.lang));
                    div {
                        dt { (v.tf("console.customer_paid_in", &[("currency", total.currency.code())])) }
                        dd {
                            (money(total.paid_minor))
                            @if total.refunded_minor > 0 {
                                " · " (v.t("console.series_refunded")) " " (money(total.refunded_minor))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn adjust_form(v: &Visitor, id: &str) -> Markup {
    html! {
        section.card.section-card {
            h2 { (v.t("console.adjust_title")) }
            form.stack method="post" action={(PATH) "/" (id) "/confirm"} {
                (csrf_field(v))
                input type="hidden" name="action" value="credits";
                div.form-grid {
                    div.field {
                        label for="adjust-amount" { (v.t("console.adjust_amount")) }
                        input #adjust-amount type="text" name="amount" required inputmode="decimal"
                            placeholder="100 / -25.50" data-testid="adjust-amount";
                        p.hint { (v.t("console.adjust_amount_hint")) }
                    }
                    div.field {
                        label for="adjust-reason" { (v.t("console.adjust_reason")) }
                        input #adjust-reason type="text" name="reason" required maxlength="200"
                            data-testid="adjust-reason";
                    }
                    div.field {
                        label for="adjust-expires" { (v.t("console.adjust_expires")) }
                        input #adjust-expires type="date" name="expiresOn";
                        p.hint { (v.t("console.adjust_expires_hint")) }
                    }
                    div.field {
                        label for="adjust-category" { (v.t("console.adjust_category")) }
                        select #adjust-category name="category" data-testid="adjust-category" {
                            @for category in [
                                domain::GrantCategory::Compensation,
                                domain::GrantCategory::Promotional,
                                domain::GrantCategory::Bonus,
                                domain::GrantCategory::Paid,
                            ] {
                                option value=(category.code()) {
                                    (v.t(&format!("console.category_{}", category.code())))
                                }
                            }
                        }
                        p.hint { (v.t("console.adjust_category_hint")) }
                    }
                    div.field {
                        label for="adjust-priority" { (v.t("console.adjust_priority")) }
                        input #adjust-priority type="number" name="priority" min="0" max="1000"
                            placeholder="0" data-testid="adjust-priority";
                        p.hint { (v.t("console.adjust_priority_hint")) }
                    }
                }
                div.form-actions {
                    button.btn.btn-primary type="submit" data-testid="adjust" {
                        (v.t("console.adjust_review"))
                    }
                }
            }
        }
    }
}

fn holdings(v: &Visitor, overview: &CustomerOverview, id: &str) -> Markup {
    let status = &overview.status;
    html! {
        section.card.section-card data-testid="customer-holdings" {
            h2 { (v.t("console.customer_holdings")) }
            h3 { (v.t("console.customer_subscriptions")) }
            @if status.subscriptions.is_empty() { p.muted { (v.t("console.none")) } }
            ul.plain-list {
                @for held in &status.subscriptions {
                    @let s = &held.subscription;
                    li {
                        strong { (s.plan_id().as_str()) } " · " (v.t(provider_key(s.provider())))
                        " · " code { (s.status().code()) }
                        " · " (v.t("console.period_ends")) " " (format::date(s.current_period().end(), v.lang))
                        " "
                        form.inline-form method="post" action={(PATH) "/" (id) "/confirm"} {
                            (csrf_field(v))
                            input type="hidden" name="action" value="cancel";
                            input type="hidden" name="subscriptionId" value=(s.id().as_str());
                            button.btn.btn-sm.btn-danger-ghost type="submit" data-testid="cancel-subscription" {
                                (v.t("console.cancel_subscription"))
                            }
                        }
                        " "
                        form.inline-form method="post" action={(PATH) "/" (id) "/confirm"} {
                            (csrf_field(v))
                            input type="hidden" name="action" value="cancel_now";
                            input type="hidden" name="subscriptionId" value=(s.id().as_str());
                            button.btn.btn-sm.btn-danger-ghost type="submit" data-testid="cancel-subscription-now" {
                                (v.t("console.cancel_now"))
                            }
                        }
                    }
                }
            }
            h3 { (v.t("console.customer_one_time")) }
            @if status.one_time_access.is_empty() { p.muted { (v.t("console.none")) } }
            ul.plain-list {
                @for access in &status.one_time_access {
                    li { strong { (access.plan_id.as_str()) } " · " code { (access.order_id.as_str()) } }
                }
            }
            h3 { (v.t("console.customer_entitlements")) }
            @if overview.entitlements.entitlements.is_empty() { p.muted { (v.t("console.none")) } }
            ul.plain-list {
                @for (key, value) in overview.entitlements.entitlements.iter() {
                    li { code { (key.as_str()) } " = " (value.to_string()) }
                }
            }
            h3 { (v.t("console.customer_reservations")) }
            @if status.pending_reservations.is_empty() { p.muted { (v.t("console.none")) } }
            ul.plain-list {
                @for r in &status.pending_reservations {
                    li {
                        code { (r.id.as_str()) } " · " (format::credits(r.held))
                        " · " (v.t("console.expires")) " " (format::date_time(r.expires_at, v.lang))
                    }
                }
            }
        }
    }
}

fn ledger_table(v: &Visitor, items: &[CreditTransaction]) -> Markup {
    html! {
        table.table.table-stack data-testid="customer-ledger" {
            thead { tr {
                th scope="col" { (v.t("console.col_when")) }
                th scope="col" { (v.t("console.col_kind")) }
                th.num scope="col" { (v.t("console.col_amount")) }
                th.num scope="col" { (v.t("console.col_balance_after")) }
                th scope="col" { (v.t("console.col_note")) }
            } }
            tbody {
                @for tx in items {
                    tr {
                        td data-label=(v.t("console.col_when")) { span.nowrap { (format::date_time(tx.created_at, v.lang)) } }
                        td data-label=(v.t("console.col_kind")) { code { (tx.kind.code()) } }
                        td.num data-label=(v.t("console.col_amount")) { span { (format::credit_delta(tx.amount)) } }
                        td.num data-label=(v.t("console.col_balance_after")) { span { (format::credits(tx.balance_after)) } }
                        td data-label=(v.t("console.col_note")) {
                            span {
                                @if let Some(note) = &tx.context.note { (note) }
                                @if let Some(feature) = &tx.context.feature { " " code { (feature) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The orders of `records` that a refund may name (paid, or partly refunded).
pub(crate) fn refundable(record: &OrderRecord) -> bool {
    matches!(record.order.status().code(), "paid" | "partially_refunded")
}
