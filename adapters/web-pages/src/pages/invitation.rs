//! `/invitations/accept?token=…`: the link an owner or admin sends with an invitation. A
//! signed-in user sees one button that joins the team; someone signed out signs in first and
//! comes back here. Accepting is the API's acceptance (single-use, within seven days, by the
//! address invited, while a seat is free), with the page's own session as the credential.

use std::sync::Arc;

use application::use_cases::invitations::AcceptInvitationError;
use application::use_cases::teams::TeamError;
use domain::{InvitationRefusal, MemberChangeRefusal};
use maud::html;
use poem::Request;
use poem::http::StatusCode;
use serde::Deserialize;

use super::dashboard_team_forms::ACCEPT_PATH;
use super::{message_panel, require_user};
use crate::layout::{self, Nav, csrf_field};
use crate::state::{PageResult, PageState, Visitor, read_form, redirect};

/// The longest token read (a real one is far shorter).
const MAX_TOKEN_CHARS: usize = 200;

/// `POST /invitations/accept`.
#[derive(Debug, Deserialize)]
pub(crate) struct AcceptForm {
    #[serde(default)]
    token: String,
}

/// `GET /invitations/accept?token=…`.
pub(crate) async fn show(_state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    let token = v.query("token").unwrap_or_default().to_owned();
    if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
        return Ok(refusal(&v, Refusal::NotFound));
    }
    let user = require_user(&v)?;
    if v.portal_return.is_some() {
        return Ok(refusal(&v, Refusal::OwnAccount));
    }
    let title = v.t("invitation.title");
    let text = v.tf("invitation.text", &[("email", user.email.as_str())]);
    let actions = html! {
        form method="post" action=(ACCEPT_PATH) data-busy {
            (csrf_field(&v))
            input type="hidden" name="token" value=(token);
            button.btn.btn-primary type="submit" data-testid="accept-invitation" {
                (v.t("invitation.join"))
            }
        }
        " "
        a.btn.btn-secondary href="/dashboard" { (v.t("invitation.not_now")) }
    };
    let body = message_panel(title, &text, actions);
    Ok(layout::page(
        &v,
        StatusCode::OK,
        title,
        Nav::Dashboard,
        body,
    ))
}

/// `POST /invitations/accept`: join, then the Teams tab.
pub(crate) async fn accept(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: AcceptForm = read_form(&v, &mut request).await?;
    require_user(&v)?;
    let credential = match (v.session_token(), v.portal_return.is_some()) {
        (Some(token), false) => token.to_owned(),
        _ => return Ok(refusal(&v, Refusal::OwnAccount)),
    };
    if form.token.is_empty() || form.token.len() > MAX_TOKEN_CHARS {
        return Ok(refusal(&v, Refusal::NotFound));
    }
    let accepted = state
        .ports
        .accounts
        .accept_invitation(&credential, &form.token)
        .await;
    let why = match accepted {
        Ok(_) => return Ok(redirect("/dashboard?tab=teams&notice=team_joined")),
        Err(AcceptInvitationError::Infra(e)) => return Err(e.into()),
        Err(AcceptInvitationError::Unauthenticated) => Refusal::OwnAccount,
        Err(AcceptInvitationError::NotFound) => Refusal::NotFound,
        Err(AcceptInvitationError::Refused(refusal)) => match refusal {
            InvitationRefusal::Used => Refusal::Used,
            InvitationRefusal::Revoked => Refusal::Revoked,
            InvitationRefusal::Expired => Refusal::Expired,
            InvitationRefusal::OtherEmail => Refusal::OtherEmail,
        },
        Err(AcceptInvitationError::Join(TeamError::Refused(refusal))) => match refusal {
            MemberChangeRefusal::AlreadyMember => Refusal::AlreadyMember,
            MemberChangeRefusal::SeatsExhausted { .. } => Refusal::NoSeat,
            _ => Refusal::CannotJoin,
        },
        Err(AcceptInvitationError::Join(TeamError::Infra(e))) => return Err(e.into()),
        Err(AcceptInvitationError::Join(_)) => Refusal::CannotJoin,
    };
    Ok(refusal(&v, why))
}

/// Why the invitation was not accepted, each with its page.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    NotFound,
    Used,
    Revoked,
    Expired,
    OtherEmail,
    OwnAccount,
    AlreadyMember,
    NoSeat,
    CannotJoin,
}

fn refusal(v: &Visitor, why: Refusal) -> poem::Response {
    let (status, key) = match why {
        Refusal::NotFound => (StatusCode::NOT_FOUND, "invitation.not_found"),
        Refusal::Used => (StatusCode::CONFLICT, "invitation.used"),
        Refusal::Revoked => (StatusCode::CONFLICT, "invitation.revoked"),
        Refusal::Expired => (StatusCode::GONE, "invitation.expired"),
        Refusal::OtherEmail => (StatusCode::FORBIDDEN, "invitation.other_email"),
        Refusal::OwnAccount => (StatusCode::FORBIDDEN, "invitation.own_account"),
        Refusal::AlreadyMember => (StatusCode::CONFLICT, "invitation.already_member"),
        Refusal::NoSeat => (StatusCode::CONFLICT, "invitation.no_seat"),
        Refusal::CannotJoin => (StatusCode::CONFLICT, "invitation.cannot_join"),
    };
    let title = v.t("invitation.refused_title");
    let actions = html! { a.btn.btn-primary href="/dashboard" { (v.t("invitation.dashboard")) } };
    let body = message_panel(title, v.t(key), actions);
    layout::page(v, status, title, Nav::Dashboard, body)
}
