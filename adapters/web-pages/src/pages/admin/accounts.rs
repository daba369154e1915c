//! `/admin/accounts`: every team account, newest first, a page at a time (its name and id, the
//! host organisation it mirrors, its present members, balance and creation date), and
//! `/admin/accounts/{id}`: one team with its balance, seats and members (role, spend limit and
//! what counts against it this window), each member linked to their customer page.
//!
//! Read-only: a team's members change through the API (or, for a host organisation, in the
//! host app), and its credits through `POST /api/admin/accounts/{id}/credits`. A personal
//! account is its user's customer page, so its id is no team here (404).

use std::sync::Arc;

use application::ports::{Member, TeamAccountSummary};
use application::use_cases::admin_console::TeamOverview;
use domain::{AccountId, Timestamp};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav};
use crate::pages::dashboard_limits::{self, Audience};
use crate::pages::dashboard_teams::{limit_cell, role_label, team_name};
use crate::pages::parse_id;
use crate::state::{PageError, PageResult, PageState, Visitor};

/// The list's path, and the prefix of each team's page.
pub(crate) const PATH: &str = "/admin/accounts";

/// `GET /admin/accounts?cursor=`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let page = state
        .ports
        .admin
        .admin_team_accounts(&console::page_after(&v))
        .await
        .map_err(console::list_error)?;
    let body = html! {
        (console::sections(&v, PATH))
        section.page-intro {
            h1 { (v.t("console.accounts_title")) }
            p.muted { (v.t("console.accounts_lead")) }
        }
        section.card.section-card {
            @if page.items.is_empty() { p.muted { (v.t("console.accounts_none")) } }
            @else { div.table-wrap { (account_table(&v, &page.items)) } }
            (console::pager(&v, PATH, &[], page.next_cursor.as_deref()))
        }
    };
    let title = v.t("console.accounts_title");
    Ok(layout::page(&v, StatusCode::OK, title, Nav::Admin, body))
}

/// The host organisation a team mirrors, or a muted word that it mirrors none.
fn host_cell(v: &Visitor, organisation: Option<&str>) -> Markup {
    html! {
        @if let Some(organisation) = organisation { code { (organisation) } }
        @else { span.muted { (v.t("console.host_org_none")) } }
    }
}

fn account_table(v: &Visitor, teams: &[TeamAccountSummary]) -> Markup {
    html! {
        table.table.table-stack data-testid="team-accounts" {
            thead { tr {
                th scope="col" { (v.t("console.col_team")) }
                th scope="col" { (v.t("console.col_account_id")) }
                th scope="col" { (v.t("console.col_host_org")) }
                th.num scope="col" { (v.t("console.col_members")) }
                th.num scope="col" { (v.t("console.col_balance")) }
                th scope="col" { (v.t("console.col_created")) }
            } }
            tbody {
                @for team in teams {
                    @let account = &team.account;
                    @let id = account.id.as_str();
                    tr data-account-id=(id) {
                        td data-label=(v.t("console.col_team")) {
                            a href={(PATH) "/" (id)} data-testid="account-link" {
                                (team_name(account))
                            }
                        }
                        td data-label=(v.t("console.col_account_id")) { code { (id) } }
                        td data-label=(v.t("console.col_host_org")) {
                            span { (host_cell(v, account.host_organisation.as_deref())) }
                        }
                        td.num data-label=(v.t("console.col_members")) { span { (team.members) } }
                        td.num data-label=(v.t("console.col_balance")) {
                            span.nowrap { (format::credits(team.balance)) }
                        }
                        td data-label=(v.t("console.col_created")) {
                            span { (format::date(account.created_at, v.lang)) }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /admin/accounts/{id}`: an unknown or malformed id, or a personal account's, is 404.
pub(crate) async fn show(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    gate(&v)?;
    let raw = request.raw_path_param("id").unwrap_or_default();
    let id = parse_id(raw, AccountId::new).ok_or(PageError::NotFound)?;
    let team = state
        .ports
        .admin
        .admin_team_account(&id)
        .await
        .map_err(console::list_error)?;
    let now = state.ports.accounts.now();
    let limits = dashboard_limits::load_for_console(&state, &id).await?;
    let top_up = super::super::dashboard_top_up::console_section(&state, &v, &id).await?;
    let name = team_name(&team.account).to_owned();
    let body = html! {
        (console::sections(&v, PATH))
        nav.breadcrumb { a href=(PATH) { "← " (v.t("console.accounts_title")) } }
        section.page-intro {
            h1 data-testid="account-name" { (name) }
            p.muted { code { (id) } }
        }
        (dashboard_limits::notice(&v))
        (summary(&v, &team))
        section.card.section-card {
            h2 { (v.t("teams.members_title")) }
            @if team.members.is_empty() { p.muted { (v.t("console.account_members_none")) } }
            @else { div.table-wrap { (members_table(&v, &team.members, now)) } }
        }
        (dashboard_limits::section(&v, (&limits, &team.members), (&id, true), Audience::Console))
        (top_up)
    };
    Ok(layout::page(&v, StatusCode::OK, &name, Nav::Admin, body))
}

fn summary(v: &Visitor, team: &TeamOverview) -> Markup {
    let count = team.members.len().to_string();
    let seats = match team.seats {
        Some(seats) => v.tf(
            "teams.seats_of",
            &[("members", &count), ("seats", &seats.to_string())],
        ),
        None => v.tf("console.account_uncapped", &[("members", &count)]),
    };
    let full = team
        .seats
        .is_some_and(|seats| u64::try_from(team.members.len()).unwrap_or(u64::MAX) >= seats);
    html! {
        section.card.section-card data-testid="account-summary" {
            dl.facts {
                div {
                    dt { (v.t("console.customer_balance")) }
                    dd data-testid="account-balance" { (format::credits(team.balance)) }
                }
                div {
                    dt { (v.t("console.account_seats")) }
                    dd data-testid="account-seats" { (seats) }
                }
                div {
                    dt { (v.t("console.col_host_org")) }
                    dd data-testid="account-host" {
                        (host_cell(v, team.account.host_organisation.as_deref()))
                    }
                }
                div {
                    dt { (v.t("console.col_created")) }
                    dd { (format::date(team.account.created_at, v.lang)) }
                }
            }
            @if full {
                div.alert.alert-warning role="status" data-testid="seats-full" {
                    (v.t("teams.seats_full"))
                }
            }
        }
    }
}

fn members_table(v: &Visitor, members: &[Member], now: Timestamp) -> Markup {
    html! {
        table.table.table-stack data-testid="account-members" {
            thead { tr {
                th scope="col" { (v.t("teams.col_member")) }
                th scope="col" { (v.t("teams.col_role")) }
                th scope="col" { (v.t("teams.col_limit")) }
                th scope="col" { (v.t("console.col_joined")) }
            } }
            tbody {
                @for m in members {
                    @let user = m.user_id.as_str();
                    tr data-member-id=(user) {
                        td data-label=(v.t("teams.col_member")) {
                            span {
                                a.cell-title href={"/admin/customers/" (user)}
                                    data-testid="member-link" {
                                    (m.email.as_deref().unwrap_or(user))
                                }
                                span.cell-sub { code { (user) } }
                            }
                        }
                        td data-label=(v.t("teams.col_role")) { span { (role_label(v, m.role)) } }
                        td data-label=(v.t("teams.col_limit")) { (limit_cell(v, m, now)) }
                        td data-label=(v.t("console.col_joined")) {
                            span { (format::date(m.added_at, v.lang)) }
                        }
                    }
                }
            }
        }
    }
}
