//! Accounts and teams: the accounts a user acts in, creating a team, and its members.
//!
//! `GET /api/accounts` lists the caller's personal account and the teams they belong to, each
//! with its balance and their role; `POST /api/accounts` creates a team with the caller as its
//! owner. `…/{accountId}/members` lists, adds, changes and removes members; a member removes
//! themself to leave. Owners manage everyone; admins manage admins and members; the last owner
//! cannot leave or be demoted. A member's `limit` caps what they spend from the team's credits
//! per UTC day, ISO week or calendar month, checked in the spend's own transaction.
//!
//! Each endpoint acts for the user whose credential it is, or, for an API key with
//! `billing:write` (`billing:read` for the lists), for the user `?userId=` names
//! (`AppState::acting_for`). An account the acting user does not belong to is answered as not
//! found.

use std::sync::Arc;

use application::accounts::Scope;
use application::ports::Member;
use application::use_cases::sessions::{API_KEY_PREFIX, Principal};
use application::use_cases::teams::{AccountEntry, MemberRequest, TeamError, parse_limit_text};
use domain::{AccountId, Credits, MemberChangeRefusal, MemberLimit, MemberRole, UserId};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::types::MaybeUndefined;
use poem_openapi::{Enum, Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{parse_id, timestamp};
use crate::problem::{Code, Problem, api_response};

/// A member's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "snake_case")]
pub enum RoleBody {
    /// Manages everyone, other owners included.
    Owner,
    /// Manages admins and members.
    Admin,
    /// Spends.
    Member,
}

impl From<RoleBody> for MemberRole {
    fn from(role: RoleBody) -> Self {
        match role {
            RoleBody::Owner => MemberRole::Owner,
            RoleBody::Admin => MemberRole::Admin,
            RoleBody::Member => MemberRole::Member,
        }
    }
}

/// A member's spend limit.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct LimitBody {
    /// The most the member spends per window, in credits (decimal string, up to two places).
    #[oai(validator(min_length = 1, max_length = 32))]
    pub credits: String,
    /// `day` (from 00:00 UTC), `week` (from Monday 00:00 UTC) or `month` (from the 1st, UTC).
    #[oai(validator(min_length = 1, max_length = 16))]
    pub window: String,
}

/// `POST /api/accounts`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreateTeamBody {
    /// The team's name (1 to 100 characters).
    #[oai(validator(min_length = 1, max_length = 400))]
    pub name: String,
}

/// `POST /api/accounts/{accountId}/members`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AddMemberBody {
    /// The user to add: a Tally user id (a host-app user's id is in every event about them).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub member_id: String,
    /// Their role (default `member`).
    pub role: Option<RoleBody>,
    /// Their spend limit (default none).
    pub limit: Option<LimitBody>,
}

/// `PATCH /api/accounts/{accountId}/members/{memberId}`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UpdateMemberBody {
    /// A new role.
    pub role: Option<RoleBody>,
    /// A new limit; `null` removes the limit; omitted leaves it.
    pub limit: MaybeUndefined<LimitBody>,
}

/// A member's limit as shown: the cap, what counts in the current window and when it resets.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct LimitView {
    /// The most per window (decimal string).
    pub credits: String,
    /// The same, in hundredths.
    pub credits_hundredths: i64,
    /// `day`, `week` or `month`.
    pub window: String,
    /// What counts against it in the current window (decimal string).
    pub used: String,
    /// The same, in hundredths.
    pub used_hundredths: i64,
    /// When the current window ends (RFC 3339).
    pub resets_at: String,
}

/// A team's member.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct MemberView {
    /// The team's account.
    pub account_id: String,
    /// The member's user id.
    pub member_id: String,
    /// Their e-mail address, when known.
    #[oai(skip_serializing_if_is_none)]
    pub email: Option<String>,
    /// `owner`, `admin` or `member`.
    pub role: String,
    /// Their spend limit, if any.
    #[oai(skip_serializing_if_is_none)]
    pub limit: Option<LimitView>,
    /// When they joined.
    pub added_at: String,
}

impl MemberView {
    pub(crate) fn new(m: &Member, now: domain::Timestamp) -> Self {
        Self {
            account_id: m.account_id.to_string(),
            member_id: m.user_id.to_string(),
            email: m.email.clone(),
            role: m.role.code().to_owned(),
            limit: m.limit.map(|limit| limit_view(limit, m, now)),
            added_at: timestamp(m.added_at),
        }
    }
}

fn limit_view(limit: MemberLimit, m: &Member, now: domain::Timestamp) -> LimitView {
    let current = m.count.at(limit.window, now);
    LimitView {
        credits: limit.credits.to_string(),
        credits_hundredths: limit.credits.hundredths(),
        window: limit.window.code().to_owned(),
        used: current.spent.to_string(),
        used_hundredths: current.spent.hundredths(),
        resets_at: timestamp(limit.window.end_of(current.start)),
    }
}

/// An account the user acts in.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AccountView {
    /// Its id: the user's own for their personal account, `team_…` for a team's.
    pub id: String,
    /// `personal` or `team`.
    pub kind: String,
    /// A team's name.
    #[oai(skip_serializing_if_is_none)]
    pub name: Option<String>,
    /// The host application's id of the organisation this team mirrors (`hostJwt.orgClaim`):
    /// its members and their roles follow the host's tokens.
    #[oai(skip_serializing_if_is_none)]
    pub host_organisation: Option<String>,
    /// The user's role in it (`owner` of their personal account).
    pub role: String,
    /// Its balance (decimal string).
    pub balance: String,
    /// Its balance in hundredths.
    pub balance_hundredths: i64,
    /// When it was opened.
    pub created_at: String,
}

impl From<&AccountEntry> for AccountView {
    fn from(e: &AccountEntry) -> Self {
        Self {
            id: e.account.id.to_string(),
            kind: e.account.kind.code().to_owned(),
            name: e.account.name.clone(),
            host_organisation: e.account.host_organisation.clone(),
            role: e.role.code().to_owned(),
            balance: e.balance.to_string(),
            balance_hundredths: e.balance.hundredths(),
            created_at: timestamp(e.account.created_at),
        }
    }
}

/// The accounts a user acts in.
#[derive(Debug, Clone, Object)]
pub struct AccountList {
    /// Their personal account first, then their teams, oldest membership first.
    pub items: Vec<AccountView>,
}

/// A team's members.
#[derive(Debug, Clone, Object)]
pub struct MemberList {
    /// Oldest first.
    pub items: Vec<MemberView>,
}

api_response! {
    /// `GET /api/accounts`.
    pub enum AccountsResponse {
        /// The accounts.
        200 Ok(Json<AccountList>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:read`.
        /// Also `forbidden`: a team other than the one the API key is bound to, or every account for a bound key.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/accounts`.
    pub enum CreateTeamResponse {
        /// Created, with the caller as its owner.
        201 Created(Json<AccountView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:write`.
        /// Also `forbidden`: a team other than the one the API key is bound to, or every account for a bound key.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the name is empty, too long or has control characters.
        422 Unprocessable,
    }
}

api_response! {
    /// `GET /api/accounts/{accountId}/members`.
    pub enum MembersResponse {
        /// The members.
        200 Ok(Json<MemberList>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: an API key without `billing:read`.
        /// Also `forbidden`: a team other than the one the API key is bound to, or every account for a bound key.
        403 Forbidden,
        /// `account_not_found`: no such team, or the user is not a member.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/accounts/{accountId}/members`.
    pub enum AddMemberResponse {
        /// Added.
        201 Created(Json<MemberView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: the user's role does not allow the change (or an API key without
        /// `billing:write`, or a customer-portal session).
        /// Also `forbidden`: a team other than the one the API key is bound to, or every account for a bound key.
        403 Forbidden,
        /// `account_not_found` or `user_not_found`.
        404 NotFound,
        /// `already_member`; `seats_exceeded`: the team's seats are taken; `host_managed`: the
        /// team mirrors a host organisation, whose members change in the host.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a bad limit.
        422 Unprocessable,
    }
}

api_response! {
    /// `PATCH /api/accounts/{accountId}/members/{memberId}`.
    pub enum MemberResponse {
        /// The member as they are now.
        200 Ok(Json<MemberView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: the user's role does not allow the change (or an API key without
        /// `billing:write`).
        /// Also `forbidden`: a team other than the one the API key is bound to, or every account for a bound key.
        403 Forbidden,
        /// `account_not_found`, `member_not_found` or `user_not_found`.
        404 NotFound,
        /// `already_member`; `last_owner`: the team would have no owner;
        /// `personal_account`; `host_managed`: the team mirrors a host organisation, whose
        /// members and roles change in the host.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a bad limit.
        422 Unprocessable,
    }
}

api_response! {
    /// `DELETE /api/accounts/{accountId}/members/{memberId}`.
    pub enum RemoveMemberResponse {
        /// Removed (or left). Their pending holds settle within what they hold.
        204 Removed,
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: the user's role does not allow it.
        /// Also `forbidden`: a team other than the one the API key is bound to, or every account for a bound key.
        403 Forbidden,
        /// `account_not_found` or `member_not_found`.
        404 NotFound,
        /// `last_owner`: the last owner cannot leave or be removed; `host_managed`: the team
        /// mirrors a host organisation, whose members leave in the host.
        409 Conflict,
    }
}

/// The accounts and teams endpoints.
pub(crate) struct TeamsApi {
    state: Arc<AppState>,
}

impl TeamsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }

    /// The host's backend saying a member left a host organisation's team: `None` unless the
    /// credential is an API key and the team mirrors a host organisation (then the request is
    /// the usual removal, which names the acting user).
    async fn host_member_left(
        &self,
        credential: &Credential,
        (account, member): (&str, &str),
    ) -> Option<Result<(), Problem>> {
        let account = team_id(account).ok()?;
        if !account.is_host_org() || !credential.token().starts_with(API_KEY_PREFIX) {
            return None;
        }
        let left = async {
            self.state
                .service_key(credential, Scope::BillingWrite)
                .await?;
            let member = parse_id(member, UserId::new, || {
                Problem::new(Code::MemberNotFound, "no such member")
            })?;
            (self.state.ports.accounts)
                .host_member_left(&account, &member)
                .await
                .map_err(team_problem)
        };
        Some(left.await)
    }

    /// A member as a change answers them, their limit's usage as of now.
    fn shown(&self, member: Option<Member>) -> Result<MemberView, Problem> {
        let member = member.ok_or_else(|| Problem::new(Code::MemberNotFound, "no such member"))?;
        Ok(MemberView::new(&member, self.state.ports.accounts.now()))
    }

    async fn change(
        &self,
        credential: &Credential,
        user_id: Option<&str>,
        (account, member): (&str, &str),
        request: MemberRequest,
    ) -> Result<Option<Member>, Problem> {
        let (actor, account) = acting_in_team(
            &self.state,
            credential,
            Scope::BillingWrite,
            user_id,
            account,
        )
        .await?;
        let member = parse_id(member, UserId::new, || {
            Problem::new(Code::MemberNotFound, "no such member")
        })?;
        self.state
            .ports
            .accounts
            .change_team_member(&actor, &account, &member, request)
            .await
            .map_err(team_problem)
    }
}

/// Tags of the teams endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Accounts, teams and their members.
    Accounts,
}

#[OpenApi(tag = "Tag::Accounts")]
impl TeamsApi {
    /// The accounts the user acts in: their personal account, then their teams.
    #[oai(path = "/api/accounts", method = "get")]
    async fn accounts(
        &self,
        credential: Credential,
        /// The user (API keys with `billing:read` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> AccountsResponse {
        let result = async {
            let user = acting_in_every_team(
                &self.state,
                &credential,
                Scope::BillingRead,
                user_id.0.as_deref(),
            )
            .await?;
            let entries = (self.state.ports.accounts)
                .my_accounts(&user)
                .await
                .map_err(team_problem)?;
            Ok::<_, Problem>(AccountList {
                items: entries.iter().map(AccountView::from).collect(),
            })
        };
        match result.await {
            Ok(list) => AccountsResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }

    /// Create a team with the user as its owner.
    #[oai(path = "/api/accounts", method = "post")]
    async fn create_team(
        &self,
        credential: Credential,
        /// The user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<CreateTeamBody>,
    ) -> CreateTeamResponse {
        let result = async {
            let user = acting_in_every_team(
                &self.state,
                &credential,
                Scope::BillingWrite,
                user_id.0.as_deref(),
            )
            .await?;
            let membership = (self.state.ports.accounts)
                .create_team(&user, &body.0.name)
                .await
                .map_err(team_problem)?;
            Ok::<_, Problem>(AccountView::from(&AccountEntry {
                account: membership.account,
                role: membership.role,
                balance: Credits::ZERO,
            }))
        };
        match result.await {
            Ok(view) => CreateTeamResponse::Created(Json(view)),
            Err(problem) => problem.into(),
        }
    }

    /// A team's members, with their roles and limits (for its members).
    #[oai(path = "/api/accounts/:accountId/members", method = "get")]
    async fn members(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The user (API keys with `billing:read` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> MembersResponse {
        let result = async {
            let (user, account) = acting_in_team(
                &self.state,
                &credential,
                Scope::BillingRead,
                user_id.0.as_deref(),
                &account_id.0,
            )
            .await?;
            let members = (self.state.ports.accounts)
                .team_members(&user, &account)
                .await
                .map_err(team_problem)?;
            let now = self.state.ports.accounts.now();
            Ok::<_, Problem>(MemberList {
                items: members.iter().map(|m| MemberView::new(m, now)).collect(),
            })
        };
        match result.await {
            Ok(list) => MembersResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }

    /// Add a user to a team (owners and admins).
    #[oai(path = "/api/accounts/:accountId/members", method = "post")]
    async fn add_member(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<AddMemberBody>,
    ) -> AddMemberResponse {
        let result = async {
            let request = MemberRequest::Add {
                role: body.0.role.map_or(MemberRole::Member, MemberRole::from),
                limit: body.0.limit.as_ref().map(limit).transpose()?,
            };
            let ids = (account_id.0.as_str(), body.0.member_id.as_str());
            self.change(&credential, user_id.0.as_deref(), ids, request)
                .await
        };
        match result.await.and_then(|member| self.shown(member)) {
            Ok(view) => AddMemberResponse::Created(Json(view)),
            Err(problem) => problem.into(),
        }
    }

    /// Change a member's role or limit (owners and admins; admins not for owners).
    #[oai(path = "/api/accounts/:accountId/members/:memberId", method = "patch")]
    async fn update_member(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The member's user id.
        #[oai(name = "memberId")]
        member_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<UpdateMemberBody>,
    ) -> MemberResponse {
        let result = async {
            let new_limit = match &body.0.limit {
                MaybeUndefined::Undefined => None,
                MaybeUndefined::Null => Some(None),
                MaybeUndefined::Value(l) => Some(Some(limit(l)?)),
            };
            let request = MemberRequest::Update {
                role: body.0.role.map(MemberRole::from),
                limit: new_limit,
            };
            let ids = (account_id.0.as_str(), member_id.0.as_str());
            self.change(&credential, user_id.0.as_deref(), ids, request)
                .await
        };
        match result.await.and_then(|member| self.shown(member)) {
            Ok(view) => MemberResponse::Ok(Json(view)),
            Err(problem) => problem.into(),
        }
    }

    /// Remove a member; a member removes themself to leave. The last owner stays. In a team
    /// that mirrors a host organisation, the app's backend (an API key with `billing:write`
    /// naming no `userId`) says the member left the organisation: they are away from the team
    /// until a token of theirs names it again.
    #[oai(path = "/api/accounts/:accountId/members/:memberId", method = "delete")]
    async fn remove_member(
        &self,
        credential: Credential,
        /// The team's account id.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The member's user id.
        #[oai(name = "memberId")]
        member_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
    ) -> RemoveMemberResponse {
        let ids = (account_id.0.as_str(), member_id.0.as_str());
        if user_id.0.is_none()
            && let Some(left) = self.host_member_left(&credential, ids).await
        {
            return match left {
                Ok(()) => RemoveMemberResponse::Removed,
                Err(problem) => problem.into(),
            };
        }
        match self
            .change(
                &credential,
                user_id.0.as_deref(),
                ids,
                MemberRequest::Remove,
            )
            .await
        {
            Ok(_) => RemoveMemberResponse::Removed,
            Err(problem) => problem.into(),
        }
    }
}

/// Who acts on the team a path names (`raw`, parsed once the caller is known), and that team:
/// the caller, or the user an API key names. A customer-portal session is for billing only and
/// manages no team; a key bound to an account reaches that team alone.
///
/// # Errors
/// 401; 403 for a portal session, a key without `scope` or a team out of the key's reach; 404
/// for a malformed id; as `AppState::acting_for`.
pub(crate) async fn acting_in_team(
    state: &AppState,
    credential: &Credential,
    scope: Scope,
    user_id: Option<&str>,
    raw: &str,
) -> Result<(UserId, AccountId), Problem> {
    let acting = managing_teams(state, credential, scope, user_id).await?;
    let account = team_id(raw)?;
    acting.reaches(&account).map_err(crate::auth::denied)?;
    Ok((acting.user.id, account))
}

/// Who acts on every account they are in (the list of them, a new team): as
/// [`acting_in_team`], refused to a key bound to one account.
///
/// # Errors
/// As [`acting_in_team`].
pub(crate) async fn acting_in_every_team(
    state: &AppState,
    credential: &Credential,
    scope: Scope,
    user_id: Option<&str>,
) -> Result<UserId, Problem> {
    let acting = managing_teams(state, credential, scope, user_id).await?;
    acting
        .reaches_every_account()
        .map_err(crate::auth::denied)?;
    Ok(acting.user.id)
}

/// The caller acting on teams: not a customer-portal session.
async fn managing_teams(
    state: &AppState,
    credential: &Credential,
    scope: Scope,
    user_id: Option<&str>,
) -> Result<application::authorization::Acting, Problem> {
    let principal = state.principal(credential).await?;
    if let Principal::Portal(_) = principal {
        return Err(Problem::new(
            Code::Forbidden,
            "a customer-portal session does not manage teams",
        ));
    }
    state.principal_acting_for(principal, scope, user_id).await
}

/// A team's account id as a path names it: a malformed one names no team.
pub(crate) fn team_id(raw: &str) -> Result<AccountId, Problem> {
    parse_id(raw, AccountId::new, || {
        team_problem(TeamError::AccountNotFound)
    })
}

/// A limit as a body gives it.
pub(crate) fn limit(body: &LimitBody) -> Result<MemberLimit, Problem> {
    parse_limit_text(&body.credits, &body.window).map_err(team_problem)
}

pub(crate) fn team_problem(e: TeamError) -> Problem {
    match e {
        TeamError::Invalid { field, message } => Problem::invalid_field(field, message),
        TeamError::AccountNotFound => Problem::new(Code::AccountNotFound, e.to_string()),
        TeamError::UserNotFound => Problem::new(Code::UserNotFound, e.to_string()),
        TeamError::InvitationNotFound => Problem::new(Code::InvitationNotFound, e.to_string()),
        TeamError::Refused(refusal) => refusal_problem(refusal),
        TeamError::Infra(infra) => infra.into(),
    }
}

/// The answer to a member change the rules refused.
fn refusal_problem(refusal: MemberChangeRefusal) -> Problem {
    match refusal {
        MemberChangeRefusal::NotAllowed => {
            Problem::new(Code::Forbidden, "your role does not allow this change")
        }
        MemberChangeRefusal::LastOwner => Problem::new(
            Code::LastOwner,
            "the team's last owner cannot leave, be removed or stop being an owner",
        ),
        MemberChangeRefusal::AlreadyMember => {
            Problem::new(Code::AlreadyMember, "the user is already a member")
        }
        MemberChangeRefusal::NotAMember => Problem::new(Code::MemberNotFound, "no such member"),
        MemberChangeRefusal::PersonalAccount => Problem::new(
            Code::PersonalAccount,
            "a personal account has no other members",
        ),
        MemberChangeRefusal::SeatsExhausted { seats } => Problem::seats_exceeded(seats),
        MemberChangeRefusal::HostManaged => Problem::new(
            Code::HostManaged,
            "this team mirrors an organisation of the host application: its members and their \
             roles change there",
        ),
    }
}

impl AppState {
    /// `account` when `user` may read it: their personal account, or a team they belong to.
    ///
    /// # Errors
    /// 404 `account_not_found` for an account they do not belong to.
    pub(crate) async fn account_for(
        &self,
        user: &UserId,
        account: AccountId,
    ) -> Result<AccountId, Problem> {
        if account.is_personal_of(user) {
            return Ok(account);
        }
        let (account, _role) = self
            .ports
            .accounts
            .account_of(user, Some(account))
            .await
            .map_err(team_problem)?;
        Ok(account)
    }
}
