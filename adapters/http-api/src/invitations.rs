//! Invitations to a team by e-mail.
//!
//! `POST /api/accounts/{accountId}/invitations` invites an address with a role and a limit (an
//! owner or admin, as for adding a member) and answers the invitation with its secret `token`,
//! once: the host app sends the invitee a link carrying it (Tally sends no mail).
//! `GET …/invitations` lists the open ones (any member); `DELETE …/invitations/{id}` revokes one
//! (an owner or admin). `POST /api/invitations/accept` accepts one with its token, signed in
//! as the address invited: a session or a host token whose host verified that address.

use std::sync::Arc;

use application::accounts::Scope;
use application::ports::Invitation;
use application::use_cases::invitations::{AcceptInvitationError, CreatedInvitation};
use domain::{InvitationRefusal, MemberRole};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::timestamp;
use crate::problem::{Code, Problem, api_response};
use crate::teams::{LimitBody, MemberView, RoleBody, acting_in_team, limit, team_problem};

/// `POST /api/accounts/{accountId}/invitations`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct InviteBody {
    /// The address invited: the invitee accepts signed in as it.
    #[oai(validator(min_length = 3, max_length = 254))]
    pub email: String,
    /// The role they join with (default `member`).
    pub role: Option<RoleBody>,
    /// The spend limit they join with (default none).
    pub limit: Option<LimitBody>,
}

/// A limit an invitation gives.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct InvitationLimitView {
    /// The most per window (decimal string).
    pub credits: String,
    /// The same, in hundredths.
    pub credits_hundredths: i64,
    /// `day`, `week` or `month`.
    pub window: String,
}

/// An open invitation.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct InvitationView {
    /// Its id (`inv_…`).
    pub id: String,
    /// The team.
    pub account_id: String,
    /// The address invited (lower-cased).
    pub email: String,
    /// The role the invitee joins with.
    pub role: String,
    /// The limit they join with.
    #[oai(skip_serializing_if_is_none)]
    pub limit: Option<InvitationLimitView>,
    /// Who invited them.
    pub invited_by: String,
    /// When.
    pub created_at: String,
    /// Until when it may be accepted (seven days).
    pub expires_at: String,
}

impl From<&Invitation> for InvitationView {
    fn from(i: &Invitation) -> Self {
        Self {
            id: i.id.clone(),
            account_id: i.account_id.to_string(),
            email: i.email.clone(),
            role: i.role.code().to_owned(),
            limit: i.limit.map(|l| InvitationLimitView {
                credits: l.credits.to_string(),
                credits_hundredths: l.credits.hundredths(),
                window: l.window.code().to_owned(),
            }),
            invited_by: i.invited_by.to_string(),
            created_at: timestamp(i.created_at),
            expires_at: timestamp(i.expires_at),
        }
    }
}

/// An invitation just made, with its secret token.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreatedInvitationView {
    /// The invitation.
    pub invitation: InvitationView,
    /// Its secret token (`tinv_…`), shown this once: send it to the invitee in a link of your
    /// app, which accepts it with `POST /api/invitations/accept`.
    pub token: String,
}

/// A team's open invitations.
#[derive(Debug, Clone, Object)]
pub struct InvitationList {
    /// Newest first.
    pub items: Vec<InvitationView>,
}

/// `POST /api/invitations/accept`.
#[derive(Debug, Clone, Object)]
pub struct AcceptBody {
    /// The invitation's token.
    #[oai(validator(min_length = 1, max_length = 256))]
    pub token: String,
}

api_response! {
    /// `POST /api/accounts/{accountId}/invitations`.
    pub enum InviteResponse {
        /// Invited: the token is shown this once.
        201 Created(Json<CreatedInvitationView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: the user's role may not grant this role (or an API key without
        /// `billing:write`, or a customer-portal session).
        /// Also `forbidden`: a team other than the one the API key is bound to.
        403 Forbidden,
        /// `account_not_found`: no such team, or the user is not a member.
        404 NotFound,
        /// `seats_exceeded`: the members fill the team's seats; `host_managed`: the team
        /// mirrors a host organisation.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a bad address or limit.
        422 Unprocessable,
    }
}

api_response! {
    /// `GET /api/accounts/{accountId}/invitations`.
    pub enum InvitationsResponse {
        /// The open invitations.
        200 Ok(Json<InvitationList>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:read`, or a customer-portal session.
        /// Also `forbidden`: a team other than the one the API key is bound to.
        403 Forbidden,
        /// `account_not_found`: no such team, or the user is not a member.
        404 NotFound,
    }
}

api_response! {
    /// `DELETE /api/accounts/{accountId}/invitations/{invitationId}`.
    pub enum RevokeResponse {
        /// Revoked: its token accepts nothing any more.
        204 Revoked,
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: a plain member (or an API key without `billing:write`).
        /// Also `forbidden`: a team other than the one the API key is bound to.
        403 Forbidden,
        /// `account_not_found`, or `invitation_not_found`: no such open invitation.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/invitations/accept`.
    pub enum AcceptResponse {
        /// Joined: the user's membership of the team.
        200 Ok(Json<MemberView>),
    }
    problems {
        /// `bad_request`: no JSON body.
        400 BadRequest,
        /// `unauthorized`: no valid credential, or an API key or portal session (only the
        /// invitee accepts).
        401 Unauthorized,
        /// `invitation_email_mismatch`: the user is not signed in as the address invited (a
        /// host token must say its host verified the address).
        /// Also `forbidden`: a team other than the one the API key is bound to.
        403 Forbidden,
        /// `invitation_not_found`.
        404 NotFound,
        /// `invitation_used`, `invitation_revoked`, `already_member`, `seats_exceeded`.
        409 Conflict,
        /// `invitation_expired`.
        410 Gone,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a malformed body.
        422 Unprocessable,
    }
}

fn accept_problem(e: AcceptInvitationError) -> Problem {
    match e {
        AcceptInvitationError::Unauthenticated => Problem::new(
            Code::Unauthorized,
            "sign in as the invited user to accept an invitation",
        ),
        AcceptInvitationError::NotFound => {
            Problem::new(Code::InvitationNotFound, "invitation not found")
        }
        AcceptInvitationError::Refused(refusal) => match refusal {
            InvitationRefusal::Used => {
                Problem::new(Code::InvitationUsed, "this invitation was accepted already")
            }
            InvitationRefusal::Revoked => {
                Problem::new(Code::InvitationRevoked, "this invitation was revoked")
            }
            InvitationRefusal::Expired => {
                Problem::new(Code::InvitationExpired, "this invitation expired")
            }
            InvitationRefusal::OtherEmail => Problem::new(
                Code::InvitationEmailMismatch,
                "this invitation is for another address: sign in as the address invited",
            ),
        },
        AcceptInvitationError::Join(team) => team_problem(team),
        AcceptInvitationError::Infra(infra) => infra.into(),
    }
}

/// The invitation endpoints.
pub(crate) struct InvitationsApi {
    state: Arc<AppState>,
}

impl InvitationsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the invitation endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Accounts, teams and their members.
    Accounts,
}

#[OpenApi(tag = "Tag::Accounts")]
impl InvitationsApi {
    /// Invite an address to a team (owners and admins, as for adding a member).
    #[oai(path = "/api/accounts/:accountId/invitations", method = "post")]
    async fn invite(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<InviteBody>,
    ) -> InviteResponse {
        let result = async {
            let (actor, account) = acting_in_team(
                &self.state,
                &credential,
                Scope::BillingWrite,
                user_id.0.as_deref(),
                &account_id.0,
            )
            .await?;
            let role = body.0.role.map_or(MemberRole::Member, MemberRole::from);
            let limit = body.0.limit.as_ref().map(limit).transpose()?;
            let created: CreatedInvitation = (self.state.ports.accounts)
                .invite_member(&actor, &account, &body.0.email, (role, limit))
                .await
                .map_err(team_problem)?;
            Ok::<_, Problem>(CreatedInvitationView {
                invitation: InvitationView::from(&created.invitation),
                token: created.token,
            })
        };
        match result.await {
            Ok(view) => InviteResponse::Created(Json(view)),
            Err(problem) => problem.into(),
        }
    }

    /// A team's open invitations (any member).
    #[oai(path = "/api/accounts/:accountId/invitations", method = "get")]
    async fn invitations(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The acting user (API keys with `billing:read` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> InvitationsResponse {
        let result = async {
            let (user, account) = acting_in_team(
                &self.state,
                &credential,
                Scope::BillingRead,
                user_id.0.as_deref(),
                &account_id.0,
            )
            .await?;
            let open = (self.state.ports.accounts)
                .open_invitations(&user, &account)
                .await
                .map_err(team_problem)?;
            Ok::<_, Problem>(InvitationList {
                items: open.iter().map(InvitationView::from).collect(),
            })
        };
        match result.await {
            Ok(list) => InvitationsResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }

    /// Revoke an open invitation (owners and admins).
    #[oai(
        path = "/api/accounts/:accountId/invitations/:invitationId",
        method = "delete"
    )]
    async fn revoke(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The invitation's id.
        #[oai(name = "invitationId", validator(max_length = 64))]
        invitation_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> RevokeResponse {
        let result = async {
            let (actor, account) = acting_in_team(
                &self.state,
                &credential,
                Scope::BillingWrite,
                user_id.0.as_deref(),
                &account_id.0,
            )
            .await?;
            (self.state.ports.accounts)
                .revoke_invitation(&actor, &account, &invitation_id.0)
                .await
                .map_err(team_problem)
        };
        match result.await {
            Ok(()) => RevokeResponse::Revoked,
            Err(problem) => problem.into(),
        }
    }

    /// Accept an invitation with its token, signed in as the address invited.
    #[oai(path = "/api/invitations/accept", method = "post")]
    async fn accept(&self, credential: Credential, body: Json<AcceptBody>) -> AcceptResponse {
        let accepted = (self.state.ports.accounts)
            .accept_invitation(credential.token(), &body.0.token)
            .await;
        match accepted {
            Ok(member) => {
                let now = self.state.ports.accounts.now();
                AcceptResponse::Ok(Json(MemberView::new(&member, now)))
            }
            Err(e) => accept_problem(e).into(),
        }
    }
}
