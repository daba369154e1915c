//! The Teams tab's forms and what they post to (`POST /dashboard/teams/{action}`): create a
//! team; for its owners and admins, invite an address, change a member's role and limit, remove
//! a member, revoke an invitation; for any member, leave. Every change goes through the same use
//! cases as the API, so the rules (who may grant which role, the last owner, seats, a host
//! organisation's members) are decided there; a refusal comes back as a notice on the tab.
//!
//! An invitation's link is shown once, on the answer to the form that made it: only its digest
//! is stored.

use std::sync::Arc;

use application::accounts::User;
use application::ports::{Invitation, Member};
use application::use_cases::invitations::CreatedInvitation;
use application::use_cases::teams::{MemberRequest, TeamError, parse_limit_text};
use domain::{AccountId, MemberChangeRefusal, MemberLimit, MemberRole, UserId};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;
use serde::Deserialize;

use super::{message_panel, parse_id, require_user};
use crate::layout::{self, Nav, csrf_field};
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect, with_query};

/// Where the Teams tab is.
const TEAMS_TAB: &str = "/dashboard?tab=teams";

/// Every field any of the forms posts; each action reads the ones it needs.
#[derive(Debug, Deserialize)]
pub(crate) struct TeamForm {
    #[serde(rename = "accountId", default)]
    account_id: String,
    #[serde(rename = "memberId", default)]
    member_id: String,
    #[serde(rename = "invitationId", default)]
    invitation_id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: String,
    #[serde(rename = "limitCredits", default)]
    limit_credits: String,
    /// `day`, `week` or `month`; empty (or `none`) for no limit.
    #[serde(rename = "limitWindow", default)]
    limit_window: String,
    /// The member's role and limit as the edit form showed them ([`was`]): only what the
    /// editor changed is asked for.
    #[serde(rename = "roleWas", default)]
    role_was: String,
    #[serde(rename = "limitWas", default)]
    limit_was: String,
}

/// A role and a limit as an edit form carries what it showed: the role's code, and
/// `hundredths|window` or `-` for no limit.
fn was(role: MemberRole, limit: Option<MemberLimit>) -> (String, String) {
    let limit = limit.map_or_else(
        || "-".to_owned(),
        |l| format!("{}|{}", l.credits.hundredths(), l.window.code()),
    );
    (role.code().to_owned(), limit)
}

impl TeamForm {
    fn team(&self) -> Result<AccountId, PageError> {
        parse_id(&self.account_id, AccountId::new).ok_or(PageError::NotFound)
    }

    fn member(&self) -> Result<UserId, PageError> {
        parse_id(&self.member_id, UserId::new).ok_or(PageError::NotFound)
    }

    /// The limit the form sets: `None` clears it.
    fn limit(&self) -> Result<Option<MemberLimit>, TeamError> {
        match self.limit_window.trim() {
            "" | "none" => Ok(None),
            window => parse_limit_text(&self.limit_credits, window).map(Some),
        }
    }

    fn role(&self) -> Option<MemberRole> {
        MemberRole::parse(self.role.trim())
    }
}

/// `POST /dashboard/teams/{action}`.
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let action = request.uri().path().rsplit('/').next().unwrap_or_default();
    let action = action.to_owned();
    let form: TeamForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    if v.portal_return.is_some() {
        // A customer-portal session is one user's billing: it manages no team.
        return Err(PageError::Forbidden);
    }
    let accounts = &state.ports.accounts;
    let done = match action.as_str() {
        "create" => accounts
            .create_team(&user.id, &form.name)
            .await
            .map(|_| "team_created"),
        "invite" => return invite(&state, &v, &user, &form).await,
        "member" => {
            let limit = match form.limit() {
                Ok(limit) => limit,
                Err(e) => return answer(Err(e)),
            };
            // Only what changed: an unchanged limit is not set again (which would count the
            // window anew), an unchanged role not asked for (an admin may edit their own role
            // but not their own limit).
            let role = form.role().filter(|r| r.code() != form.role_was);
            let (_, limit_now) = was(MemberRole::Member, limit);
            let limit = (limit_now != form.limit_was).then_some(limit);
            let request = MemberRequest::Update { role, limit };
            let (team, member) = (form.team()?, form.member()?);
            let changed = accounts.change_team_member(&user.id, &team, &member, request);
            changed.await.map(|_| "member_saved")
        }
        "remove" => {
            let (team, member) = (form.team()?, form.member()?);
            let removed =
                accounts.change_team_member(&user.id, &team, &member, MemberRequest::Remove);
            removed.await.map(|_| "member_removed")
        }
        "leave" => {
            let team = form.team()?;
            let left =
                accounts.change_team_member(&user.id, &team, &user.id, MemberRequest::Remove);
            left.await.map(|_| "team_left")
        }
        "revoke" => {
            let team = form.team()?;
            let revoked = accounts.revoke_invitation(&user.id, &team, &form.invitation_id);
            revoked.await.map(|()| "invitation_revoked")
        }
        _ => return Err(PageError::NotFound),
    };
    answer(done)
}

/// Back to the Teams tab with the notice of `done`, or of why it was refused.
fn answer(done: Result<&'static str, TeamError>) -> PageResult {
    let notice = match done {
        Ok(notice) => notice,
        Err(e) => refused(e)?,
    };
    Ok(redirect(&format!("{TEAMS_TAB}&notice={notice}")))
}

/// `POST /dashboard/teams/invite`: the invitation's link, shown this once.
async fn invite(state: &PageState, v: &Visitor, user: &User, form: &TeamForm) -> PageResult {
    let team = form.team()?;
    let limit = match form.limit() {
        Ok(limit) => limit,
        Err(e) => return answer(Err(e)),
    };
    let role = form.role().unwrap_or(MemberRole::Member);
    let invited = (state.ports.accounts)
        .invite_member(&user.id, &team, &form.email, (role, limit))
        .await;
    match invited {
        Ok(created) => Ok(invitation_made(state, v, &created)),
        Err(e) => answer(Err(e)),
    }
}

fn invitation_made(state: &PageState, v: &Visitor, created: &CreatedInvitation) -> poem::Response {
    let pairs = [("token".to_owned(), created.token.clone())];
    let path = with_query(ACCEPT_PATH, pairs.iter());
    let link = match &state.settings.public_base_url {
        Some(base) => format!("{}{path}", base.trim_end_matches('/')),
        None => path,
    };
    let email = &created.invitation.email;
    let title = v.t("teams.invited_title");
    let text = v.tf("teams.invited_text", &[("email", email)]);
    let actions = html! {
        div.field.invitation-link {
            label for="invitation-link" { (v.t("teams.invited_link")) }
            input #invitation-link type="text" readonly value=(link) data-testid="invitation-link";
        }
        div.actions {
            a.btn.btn-primary href=(TEAMS_TAB) { (v.t("teams.back")) }
        }
    };
    let body = message_panel(title, &text, actions);
    layout::page(v, StatusCode::CREATED, title, Nav::Dashboard, body)
}

/// Where an invitation is accepted.
pub(crate) const ACCEPT_PATH: &str = "/invitations/accept";

/// The notice a refused change shows; a team the user is not in is not found.
fn refused(e: TeamError) -> Result<&'static str, PageError> {
    Ok(match e {
        TeamError::Invalid { field, .. } if field.starts_with("limit") => "team_invalid_limit",
        TeamError::Invalid { field: "email", .. } => "team_invalid_email",
        TeamError::Invalid { .. } => "team_invalid_name",
        TeamError::AccountNotFound | TeamError::UserNotFound => return Err(PageError::NotFound),
        TeamError::InvitationNotFound => "invitation_gone",
        TeamError::Refused(refusal) => match refusal {
            MemberChangeRefusal::NotAllowed => "team_not_allowed",
            MemberChangeRefusal::LastOwner => "team_last_owner",
            MemberChangeRefusal::AlreadyMember => "team_already_member",
            MemberChangeRefusal::NotAMember => "team_not_member",
            MemberChangeRefusal::HostManaged => "team_host_managed",
            MemberChangeRefusal::SeatsExhausted { .. } => "team_seats_exceeded",
            MemberChangeRefusal::PersonalAccount => return Err(PageError::NotFound),
        },
        TeamError::Infra(e) => return Err(e.into()),
    })
}

/// The notice a team form redirects with, if `notice` is one of theirs.
pub(crate) fn notice(v: &Visitor) -> Markup {
    let (tone, key) = match v.query("notice") {
        Some("team_created") => ("alert-success", "teams.notice_created"),
        Some("member_saved") => ("alert-success", "teams.notice_saved"),
        Some("member_removed") => ("alert-success", "teams.notice_removed"),
        Some("team_left") => ("alert-success", "teams.notice_left"),
        Some("team_joined") => ("alert-success", "teams.notice_joined"),
        Some("invitation_revoked") => ("alert-success", "teams.notice_revoked"),
        Some("invitation_gone") => ("alert-warning", "teams.notice_invitation_gone"),
        Some("team_invalid_limit") => ("alert-danger", "teams.notice_invalid_limit"),
        Some("team_invalid_email") => ("alert-danger", "teams.notice_invalid_email"),
        Some("team_invalid_name") => ("alert-danger", "teams.notice_invalid_name"),
        Some("team_not_allowed") => ("alert-warning", "teams.notice_not_allowed"),
        Some("team_last_owner") => ("alert-warning", "teams.notice_last_owner"),
        Some("team_already_member") => ("alert-warning", "teams.notice_already_member"),
        Some("team_not_member") => ("alert-warning", "teams.notice_not_member"),
        Some("team_host_managed") => ("alert-warning", "teams.notice_host_managed"),
        Some("team_seats_exceeded") => ("alert-warning", "teams.notice_seats"),
        _ => return html! {},
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

/// "Create a team": a name and a button.
pub(crate) fn create_form(v: &Visitor) -> Markup {
    html! {
        section.card.section-card data-testid="create-team" {
            h2 { (v.t("teams.create_title")) }
            p.muted { (v.t("teams.create_text")) }
            form.stack method="post" action="/dashboard/teams/create" data-busy {
                (csrf_field(v))
                div.field {
                    label for="team-name" { (v.t("teams.name")) }
                    input #team-name type="text" name="name" required maxlength="100"
                        autocomplete="organization";
                }
                div.actions {
                    button.btn.btn-primary type="submit" data-testid="create-team-button" {
                        (v.t("teams.create_button"))
                    }
                }
            }
        }
    }
}

/// The role and limit fields a form sets, with ids made unique by `key`. `roles` lists the
/// roles offered (none: the role is not the form's to set).
fn role_and_limit(
    v: &Visitor,
    key: &str,
    roles: &[MemberRole],
    (role, limit): (MemberRole, Option<MemberLimit>),
) -> Markup {
    let window = limit.map_or("none", |l| l.window.code());
    let credits = limit.map(|l| l.credits.to_decimal().to_string());
    html! {
        div.form-grid {
            @if !roles.is_empty() {
                div.field {
                    label for={ "role-" (key) } { (v.t("teams.col_role")) }
                    select id={ "role-" (key) } name="role" {
                        @for r in roles {
                            option value=(r.code()) selected[*r == role] {
                                (super::dashboard_teams::role_label(v, *r))
                            }
                        }
                    }
                }
            }
            div.field {
                label for={ "limit-" (key) } { (v.t("teams.limit_credits")) }
                input id={ "limit-" (key) } type="text" name="limitCredits" inputmode="decimal"
                    value=[credits] placeholder="100";
            }
            div.field {
                label for={ "window-" (key) } { (v.t("teams.limit_window")) }
                select id={ "window-" (key) } name="limitWindow" {
                    @for (code, label) in [
                        ("none", "teams.no_limit"),
                        ("day", "teams.window_day"),
                        ("week", "teams.window_week"),
                        ("month", "teams.window_month"),
                    ] {
                        option value=(code) selected[code == window] { (v.t(label)) }
                    }
                }
            }
        }
    }
}

/// The roles `viewer` may offer: an owner grants any, an admin admins and members.
fn grantable(viewer: MemberRole) -> &'static [MemberRole] {
    match viewer {
        MemberRole::Owner => &[MemberRole::Member, MemberRole::Admin, MemberRole::Owner],
        MemberRole::Admin => &[MemberRole::Member, MemberRole::Admin],
        MemberRole::Member => &[],
    }
}

/// "Invite a member", folded until opened.
pub(crate) fn invite_form(v: &Visitor, team: &AccountId, viewer: MemberRole) -> Markup {
    let key = format!("invite-{team}");
    html! {
        details.disclosure data-testid="invite" {
            summary { (v.t("teams.invite_title")) }
            form.stack method="post" action="/dashboard/teams/invite" data-busy {
                (csrf_field(v))
                input type="hidden" name="accountId" value=(team);
                p.hint { (v.t("teams.invite_text")) }
                div.field {
                    label for={ "email-" (key) } { (v.t("teams.col_email")) }
                    input id={ "email-" (key) } type="email" name="email" required
                        autocomplete="off";
                }
                (role_and_limit(v, &key, grantable(viewer), (MemberRole::Member, None)))
                div.actions {
                    button.btn.btn-primary type="submit" data-testid="invite-button" {
                        (v.t("teams.invite_button"))
                    }
                }
            }
        }
    }
}

/// A member's "Edit" (role and limit, or the limit alone in a host organisation's team) and
/// "Remove", for the team's owners and admins.
pub(crate) fn member_actions(
    v: &Visitor,
    team: &AccountId,
    member: &Member,
    (viewer, host_managed): (MemberRole, bool),
) -> Markup {
    let key = format!("{team}-{}", member.user_id);
    let roles = if host_managed {
        &[][..]
    } else {
        grantable(viewer)
    };
    let (role_was, limit_was) = was(member.role, member.limit);
    html! {
        details.disclosure data-testid="member-edit" {
            summary { (v.t("teams.edit")) }
            form.stack method="post" action="/dashboard/teams/member" data-busy {
                (csrf_field(v))
                input type="hidden" name="accountId" value=(team);
                input type="hidden" name="memberId" value=(member.user_id);
                input type="hidden" name="roleWas" value=(role_was);
                input type="hidden" name="limitWas" value=(limit_was);
                (role_and_limit(v, &key, roles, (member.role, member.limit)))
                div.actions {
                    button.btn.btn-primary.btn-sm type="submit" data-testid="member-save" {
                        (v.t("teams.save"))
                    }
                }
            }
            @if !host_managed {
                form.inline-form method="post" action="/dashboard/teams/remove" data-busy
                    data-confirm=(v.t("teams.confirm_remove")) {
                    (csrf_field(v))
                    input type="hidden" name="accountId" value=(team);
                    input type="hidden" name="memberId" value=(member.user_id);
                    button.btn.btn-danger-ghost.btn-sm type="submit" data-testid="member-remove" {
                        (v.t("teams.remove"))
                    }
                }
            }
        }
    }
}

/// "Leave this team".
pub(crate) fn leave_form(v: &Visitor, team: &AccountId) -> Markup {
    html! {
        form.inline-form method="post" action="/dashboard/teams/leave" data-busy
            data-confirm=(v.t("teams.confirm_leave")) {
            (csrf_field(v))
            input type="hidden" name="accountId" value=(team);
            button.btn.btn-danger-ghost.btn-sm type="submit" data-testid="team-leave" {
                (v.t("teams.leave"))
            }
        }
    }
}

/// "Revoke" for an open invitation.
pub(crate) fn revoke_form(v: &Visitor, team: &AccountId, invitation: &Invitation) -> Markup {
    html! {
        form.inline-form method="post" action="/dashboard/teams/revoke" data-busy {
            (csrf_field(v))
            input type="hidden" name="accountId" value=(team);
            input type="hidden" name="invitationId" value=(invitation.id);
            button.btn.btn-danger-ghost.btn-sm type="submit" data-testid="invitation-revoke" {
                (v.t("teams.revoke"))
            }
        }
    }
}
