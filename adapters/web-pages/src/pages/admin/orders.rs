//! `/admin/orders`: every order, newest first, filtered by status, provider and customer id, a
//! page at a time; a paid order has a Refund button that goes through the customer's
//! confirmation step.

use std::sync::Arc;

use application::ports::{OrderFilter, OrderRecord};
use application::use_cases::admin_console::order_status;
use domain::{OrderStatusKind, ProviderId, UserId};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::customers::refundable;
use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::pages::provider_key;
use crate::state::{PageError, PageResult, PageState, Visitor};

const PATH: &str = "/admin/orders";

/// `GET /admin/orders?status=&provider=&userId=&cursor=`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let given = |name: &str| v.query(name).map(str::trim).filter(|s| !s.is_empty());
    let filter = OrderFilter {
        status: match given("status") {
            Some(code) => Some(order_status(code).map_err(console::list_error)?),
            None => None,
        },
        provider: match given("provider") {
            Some(p) => Some(p.parse::<ProviderId>().map_err(|_| PageError::BadRequest)?),
            None => None,
        },
        user_id: match given("userId") {
            Some(u) => Some(UserId::new(u).map_err(|_| PageError::BadRequest)?),
            None => None,
        },
    };
    let page = state
        .ports
        .admin
        .admin_orders(&filter, &console::page_after(&v))
        .await
        .map_err(console::list_error)?;
    let kept = [
        ("status", given("status")),
        ("provider", given("provider")),
        ("userId", given("userId")),
    ];
    let body = html! {
        (console::sections(&v, PATH))
        section.page-intro {
            h1 { (v.t("console.orders_title")) }
            p.muted { (v.t("console.orders_lead")) }
        }
        (filters(&v, &filter))
        section.card.section-card {
            @if page.items.is_empty() { p.muted { (v.t("console.orders_none")) } }
            @else { div.table-wrap { (order_table(&v, &page.items)) } }
            (console::pager(&v, PATH, &kept, page.next_cursor.as_deref()))
        }
    };
    let title = v.t("console.orders_title");
    Ok(layout::page(&v, StatusCode::OK, title, Nav::Admin, body))
}

fn filters(v: &Visitor, filter: &OrderFilter) -> Markup {
    let statuses: Vec<(String, String)> = OrderStatusKind::ALL
        .iter()
        .map(|s| (s.code().to_owned(), s.code().to_owned()))
        .collect();
    let providers: Vec<(String, String)> = ProviderId::ALL
        .iter()
        .map(|p| (p.as_str().to_owned(), v.t(provider_key(*p)).to_owned()))
        .collect();
    html! {
        form.card.section-card.filter-bar method="get" action=(PATH) role="search" {
            (console::select(v, "status", "console.col_status", &statuses,
                filter.status.map(OrderStatusKind::code)))
            (console::select(v, "provider", "console.col_provider", &providers,
                filter.provider.map(ProviderId::as_str)))
            div.field {
                label for="filter-user" { (v.t("console.col_user_id")) }
                input #filter-user type="text" name="userId" autocomplete="off"
                    value=[filter.user_id.as_ref().map(UserId::as_str)];
            }
            div.form-actions {
                button.btn.btn-secondary type="submit" data-testid="filter" { (v.t("console.filter")) }
            }
        }
    }
}

/// Orders as a table; a refundable one has a Refund button (through the confirmation step).
pub(crate) fn order_table(v: &Visitor, orders: &[OrderRecord]) -> Markup {
    html! {
        table.table.table-stack data-testid="orders" {
            thead { tr {
                th scope="col" { (v.t("console.col_order")) }
                th scope="col" { (v.t("console.col_user_id")) }
                th.num scope="col" { (v.t("console.col_amount")) }
                th scope="col" { (v.t("console.col_status")) }
                th scope="col" { (v.t("console.col_created")) }
                th scope="col" { span.sr-only { (v.t("console.col_actions")) } }
            } }
            tbody {
                @for record in orders {
                    @let order = &record.order;
                    @let user = order.user_id().as_str();
                    tr data-order-id=(order.id().as_str()) {
                        td data-label=(v.t("console.col_order")) {
                            span {
                                span.cell-title { (order.plan().plan_id.as_str()) }
                                span.cell-sub { code { (order.id().as_str()) } " · " (v.t(provider_key(order.provider()))) }
                            }
                        }
                        td data-label=(v.t("console.col_user_id")) {
                            a href={"/admin/customers/" (user)} { code { (user) } }
                        }
                        td.num data-label=(v.t("console.col_amount")) {
                            span.nowrap { (format::money(order.plan().price, v.lang)) }
                        }
                        td data-label=(v.t("console.col_status")) {
                            span { code data-status=(order.status().code()) { (order.status().code()) } }
                        }
                        td data-label=(v.t("console.col_created")) {
                            span.nowrap { (format::date_time(order.created_at(), v.lang)) }
                        }
                        td.actions-cell {
                            @if refundable(record) {
                                form.inline-form method="post" action={"/admin/customers/" (user) "/confirm"} {
                                    (csrf_field(v))
                                    input type="hidden" name="action" value="refund";
                                    input type="hidden" name="orderId" value=(order.id().as_str());
                                    button.btn.btn-sm.btn-danger-ghost type="submit" data-testid="refund-order" {
                                        (v.t("console.refund"))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
