//! `/admin/audit`: what administrators did — who, what, when, the object, before and after —
//! newest first, a page at a time.

use std::sync::Arc;

use application::ports::AuditEntry;
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav};
use crate::state::{PageResult, PageState, Visitor};

const PATH: &str = "/admin/audit";

/// `GET /admin/audit?cursor=`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let page = state
        .ports
        .admin
        .audit_log(&console::page_after(&v))
        .await
        .map_err(console::list_error)?;
    let body = html! {
        (console::sections(&v, PATH))
        section.page-intro {
            h1 { (v.t("console.audit_title")) }
            p.muted { (v.t("console.audit_lead")) }
        }
        section.card.section-card {
            @if page.items.is_empty() { p.muted { (v.t("console.audit_none")) } }
            @else { div.table-wrap { (audit_table(&v, &page.items)) } }
            (console::pager(&v, PATH, &[], page.next_cursor.as_deref()))
        }
    };
    let title = v.t("console.audit_title");
    Ok(layout::page(&v, StatusCode::OK, title, Nav::Admin, body))
}

fn audit_table(v: &Visitor, entries: &[AuditEntry]) -> Markup {
    html! {
        table.table.table-stack data-testid="audit" {
            thead { tr {
                th scope="col" { (v.t("console.col_when")) }
                th scope="col" { (v.t("console.col_admin")) }
                th scope="col" { (v.t("console.col_action")) }
                th scope="col" { (v.t("console.col_object")) }
                th scope="col" { (v.t("console.col_change")) }
            } }
            tbody {
                @for entry in entries {
                    tr data-action=(entry.action.code()) {
                        td data-label=(v.t("console.col_when")) { span.nowrap { (format::date_time(entry.at, v.lang)) } }
                        td data-label=(v.t("console.col_admin")) { code { (entry.admin_id.as_str()) } }
                        td data-label=(v.t("console.col_action")) { code { (entry.action.code()) } }
                        td data-label=(v.t("console.col_object")) {
                            span { (entry.object_kind) " " code { (entry.object_id) } }
                        }
                        td data-label=(v.t("console.col_change")) {
                            div.audit-change {
                                @if let Some(before) = &entry.before { div { span.muted { (v.t("console.before")) " " } code { (before) } } }
                                @if let Some(after) = &entry.after { div { span.muted { (v.t("console.after")) " " } code { (after) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}
