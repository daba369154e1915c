//! `/dashboard?tab=teams`: the teams the user belongs to, each with its shared balance, their
//! role, its members (role, and each limit with what counts against it this window), its seats,
//! and, for its owners and admins, the invitations still open, with the forms of
//! [`super::dashboard_team_forms`] (create, invite, edit, remove, leave, revoke). Never shown
//! to a customer-portal session (one user's billing, as the API's teams endpoints refuse it
//! too).

use application::accounts::User;
use application::ports::{Account, Invitation, Member};
use application::use_cases::teams::{AccountEntry, TeamError};
use domain::{AccountId, AccountKind, MemberRole, Timestamp};
use maud::{Markup, html};

use super::dashboard_team_forms as forms;
use crate::format;
use crate::state::{PageError, PageState, Visitor};

/// One team as the panel shows it.
struct TeamView {
    entry: AccountEntry,
    members: Vec<Member>,
    seats: Option<u64>,
    invitations: Vec<Invitation>,
}

/// The panel: every team of `user`, or a word on what a team is.
pub(crate) async fn panel(
    state: &PageState,
    v: &Visitor,
    user: &User,
) -> Result<Markup, PageError> {
    let accounts = state
        .ports
        .accounts
        .my_accounts(&user.id)
        .await
        .map_err(page_error)?;
    let mut teams = Vec::new();
    for entry in accounts
        .into_iter()
        .filter(|e| e.account.kind == AccountKind::Team)
    {
        teams.push(load(state, user, entry).await?);
    }
    let now = state.ports.accounts.now();
    Ok(html! {
        @if teams.is_empty() {
            section.card.section-card data-testid="no-teams" {
                h2 { (v.t("teams.title")) }
                p.muted { (v.t("teams.none")) }
            }
        }
        @for team in &teams { (team_card(v, team, now)) }
        (forms::create_form(v))
    })
}

async fn load(state: &PageState, user: &User, entry: AccountEntry) -> Result<TeamView, PageError> {
    let id = &entry.account.id;
    let members = (state.ports.accounts)
        .team_members(&user.id, id)
        .await
        .map_err(page_error)?;
    let status = state.ports.credits.report_account_status(id).await?;
    let held = state.ports.credits.entitlements_of(&status).await?;
    let invitations = if entry.role.manages_members() {
        (state.ports.accounts)
            .open_invitations(&user.id, id)
            .await
            .map_err(page_error)?
    } else {
        Vec::new()
    };
    Ok(TeamView {
        seats: domain::seat_cap(&held.entitlements),
        entry,
        members,
        invitations,
    })
}

/// A team read that failed: infrastructure, or a membership that ended between two reads
/// (shown as not found; the next load no longer lists the team).
pub(crate) fn page_error(e: TeamError) -> PageError {
    match e {
        TeamError::Infra(infra) => infra.into(),
        _ => PageError::NotFound,
    }
}

/// A team's name as the pages show it: its name, else its id.
pub(crate) fn team_name(account: &Account) -> &str {
    account.name.as_deref().unwrap_or(account.id.as_str())
}

/// A member's role, in the reader's language (the dashboard's and the console's word for it).
pub(crate) fn role_label(v: &Visitor, role: MemberRole) -> &'static str {
    v.t(match role {
        MemberRole::Owner => "teams.role_owner",
        MemberRole::Admin => "teams.role_admin",
        MemberRole::Member => "teams.role_member",
    })
}

fn team_card(v: &Visitor, team: &TeamView, now: Timestamp) -> Markup {
    let account = &team.entry.account;
    let name = team_name(account);
    let count = team.members.len().to_string();
    let seats = match team.seats {
        Some(seats) => v.tf(
            "teams.seats_of",
            &[("members", &count), ("seats", &seats.to_string())],
        ),
        None => v.tf("teams.members_count", &[("members", &count)]),
    };
    let manages = team.entry.role.manages_members();
    let host = account.host_organisation.is_some();
    let members = u64::try_from(team.members.len()).unwrap_or(u64::MAX);
    let full = team.seats.is_some_and(|seats| members == seats);
    let over = team.seats.filter(|seats| members > *seats);
    html! {
        section.card.section-card data-testid="team" {
            h2 {
                (name) " "
                span.badge.badge-neutral data-testid="team-role" { (role_label(v, team.entry.role)) }
            }
            @if host {
                p.muted data-testid="team-host" { (v.t("teams.host_managed")) }
            }
            p.stat {
                span.stat-value data-testid="team-balance" { (format::credits(team.entry.balance)) }
                " "
                span.stat-unit { (v.t("credits.unit")) }
            }
            p data-testid="team-seats" { (seats) }
            @if full {
                div.alert.alert-warning role="status" data-testid="seats-full" {
                    (v.t("teams.seats_full"))
                }
            }
            @if let Some(seats) = over {
                div.alert.alert-warning role="status" data-testid="seats-over" {
                    (v.tf("teams.seats_over", &[("members", &count), ("seats", &seats.to_string())]))
                }
            }
            (members_table(v, team, now))
            @if manages && !host {
                (forms::invite_form(v, &account.id, team.entry.role))
            }
            @if !team.invitations.is_empty() {
                (invitations_table(v, &account.id, &team.invitations))
            }
            @if !host {
                div.team-leave { (forms::leave_form(v, &account.id)) }
            }
        }
    }
}

fn members_table(v: &Visitor, team: &TeamView, now: Timestamp) -> Markup {
    let viewer = team.entry.role;
    let manages = viewer.manages_members();
    let host = team.entry.account.host_organisation.is_some();
    let id = &team.entry.account.id;
    html! {
        h3 { (v.t("teams.members_title")) }
        div.table-wrap {
            table.table.table-stack data-testid="team-members" {
                thead { tr {
                    th scope="col" { (v.t("teams.col_member")) }
                    th scope="col" { (v.t("teams.col_role")) }
                    th scope="col" { (v.t("teams.col_limit")) }
                    @if manages { th scope="col" { span.sr-only { (v.t("teams.col_actions")) } } }
                } }
                tbody {
                    @for m in &team.members {
                        tr {
                            td data-label=(v.t("teams.col_member")) {
                                span.cell-title {
                                    (m.email.clone().unwrap_or_else(|| m.user_id.to_string()))
                                }
                            }
                            td data-label=(v.t("teams.col_role")) { (role_label(v, m.role)) }
                            td data-label=(v.t("teams.col_limit")) { (limit_cell(v, m, now)) }
                            @if manages {
                                td.actions-cell { (forms::member_actions(v, id, m, (viewer, host))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A member's limit as a table cell shows it: what counts against it in the window running at
/// `now` (a window that ended counts nothing), out of the limit, and when the window resets; or
/// that they have none. Shared by the dashboard's and the console's members tables.
pub(crate) fn limit_cell(v: &Visitor, m: &Member, now: Timestamp) -> Markup {
    let Some(limit) = m.limit else {
        return html! { span.muted { (v.t("teams.no_limit")) } };
    };
    let current = m.count.at(limit.window, now);
    let window = v.t(match limit.window.code() {
        "day" => "teams.per_day",
        "week" => "teams.per_week",
        _ => "teams.per_month",
    });
    let used = v.tf(
        "teams.used_of",
        &[
            ("used", &format::credits(current.spent)),
            ("limit", &format::credits(limit.credits)),
            ("window", window),
        ],
    );
    html! {
        span.cell-title data-testid="member-limit" { (used) }
        span.cell-sub {
            (v.tf("teams.resets", &[("date", &format::date_time(limit.window.end_of(current.start), v.lang))]))
        }
    }
}

fn invitations_table(v: &Visitor, team: &AccountId, invitations: &[Invitation]) -> Markup {
    html! {
        h3 { (v.t("teams.invitations_title")) }
        div.table-wrap {
            table.table.table-stack data-testid="team-invitations" {
                thead { tr {
                    th scope="col" { (v.t("teams.col_email")) }
                    th scope="col" { (v.t("teams.col_role")) }
                    th scope="col" { (v.t("teams.col_expires")) }
                    th scope="col" { span.sr-only { (v.t("teams.col_actions")) } }
                } }
                tbody {
                    @for i in invitations {
                        tr {
                            td data-label=(v.t("teams.col_email")) { (i.email) }
                            td data-label=(v.t("teams.col_role")) { (role_label(v, i.role)) }
                            td.nowrap data-label=(v.t("teams.col_expires")) {
                                (format::day(i.expires_at, v.lang))
                            }
                            td.actions-cell { (forms::revoke_form(v, team, i)) }
                        }
                    }
                }
            }
        }
    }
}
