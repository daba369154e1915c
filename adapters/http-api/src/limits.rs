//! Spend limits on an account: `GET /api/limits` (each with its usage in the current window),
//! `POST /api/limits` and `DELETE /api/limits/{limitId}`.
//!
//! A limit caps what an account spends per hour, UTC day, ISO week, calendar month or rolling
//! window of N hours, optionally of one feature, of one model, of the spends made with one API
//! key bound to the account or of those of one member of a team. A hard limit refuses a spend that would pass it
//! (`402 limit_reached`, checked in the spend's own transaction); a soft one lets it through.
//! Anyone acting in the account reads its limits (an API key with `credits:read` for the user
//! `?userId=` names); its owners and admins, or on a personal account its user, add and remove
//! them (an API key with `billing:write`).

use std::sync::Arc;

use application::accounts::Scope;
use application::use_cases::spend_limits::{LimitDraft, LimitsError, ShownLimit};
use domain::{AccountId, SpendLimitId};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{parse_id, timestamp};
use crate::problem::{Code, Problem, api_response};

/// `POST /api/limits`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreateLimitBody {
    /// The most the account spends per window, in credits (decimal string, up to two places).
    #[oai(validator(min_length = 1, max_length = 32))]
    pub credits: String,
    /// `hour`, `day` (from 00:00 UTC), `week` (from Monday 00:00 UTC), `month` (from the 1st,
    /// UTC) or `rolling` (the last `rollingHours` hours, counted in whole hours).
    #[oai(validator(min_length = 1, max_length = 16))]
    pub window: String,
    /// The hours of a `rolling` window (1 to 744); absent for the others.
    pub rolling_hours: Option<u32>,
    /// The one feature the limit counts (absent: every spend of the account).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub feature: Option<String>,
    /// The one AI model the limit counts (absent: every spend of the account), as spends name
    /// it in `model`.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub model: Option<String>,
    /// The one API key whose spends the limit counts (absent: every spend of the account): a
    /// key bound to this account (`accountId` of `POST /api/admin/api-keys`) and not revoked.
    /// Spends made with other keys, or in the browser, do not count against it.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub api_key_id: Option<String>,
    /// The one member of a team whose spends the limit counts (absent: every spend of the
    /// account): a user who is a member of this account.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub member_id: Option<String>,
    /// `hard` (default): a spend that would pass it is refused with `limit_reached`; `soft`: it
    /// goes through.
    #[oai(validator(min_length = 1, max_length = 16))]
    pub enforcement: Option<String>,
}

/// A spend limit and where it stands now.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct SpendLimitView {
    /// The limit's id.
    pub id: String,
    /// The account it limits.
    pub account_id: String,
    /// The one feature it counts, if any.
    #[oai(skip_serializing_if_is_none)]
    pub feature: Option<String>,
    /// The one AI model it counts, if any.
    #[oai(skip_serializing_if_is_none)]
    pub model: Option<String>,
    /// The one API key whose spends it counts, if any.
    #[oai(skip_serializing_if_is_none)]
    pub api_key_id: Option<String>,
    /// The one member whose spends it counts, if any.
    #[oai(skip_serializing_if_is_none)]
    pub member_id: Option<String>,
    /// `hour`, `day`, `week`, `month` or `rolling`.
    pub window: String,
    /// The hours of a rolling window.
    #[oai(skip_serializing_if_is_none)]
    pub rolling_hours: Option<u32>,
    /// `hard` or `soft`.
    pub enforcement: String,
    /// The most per window (decimal string).
    pub credits: String,
    /// The same, in hundredths.
    pub credits_hundredths: i64,
    /// What counts against it in the current window, held reservations included.
    pub used: String,
    /// The same, in hundredths.
    pub used_hundredths: i64,
    /// What is left of it (zero once a soft limit is passed).
    pub left: String,
    /// The same, in hundredths.
    pub left_hundredths: i64,
    /// When headroom next comes back (RFC 3339): the end of a calendar window; for a rolling
    /// window, when its oldest counted hour leaves it.
    pub resets_at: String,
    /// When it was made.
    pub created_at: String,
}

impl From<&ShownLimit> for SpendLimitView {
    fn from(shown: &ShownLimit) -> Self {
        let (r, s) = (&shown.record, &shown.standing);
        Self {
            id: r.id.to_string(),
            account_id: r.account_id.to_string(),
            feature: r.scope.feature.clone(),
            model: r.scope.model.clone(),
            api_key_id: r.scope.api_key.clone(),
            member_id: r.scope.member.as_ref().map(ToString::to_string),
            window: r.limit.window.code().to_owned(),
            rolling_hours: r.limit.window.rolling_hours(),
            enforcement: r.limit.enforcement.code().to_owned(),
            credits: r.limit.credits.to_string(),
            credits_hundredths: r.limit.credits.hundredths(),
            used: s.used.to_string(),
            used_hundredths: s.used.hundredths(),
            left: s.left.to_string(),
            left_hundredths: s.left.hundredths(),
            resets_at: timestamp(s.resets_at),
            created_at: timestamp(r.created_at),
        }
    }
}

/// An account's limits.
#[derive(Debug, Clone, Object)]
pub struct SpendLimitList {
    /// Oldest first.
    pub items: Vec<SpendLimitView>,
}

api_response! {
    /// `GET /api/limits`.
    pub enum LimitsResponse {
        /// The account's limits with their usage now.
        200 Ok(Json<SpendLimitList>),
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: another user's account, an API key without `credits:read`, or an
        /// account other than the one the API key is bound to.
        403 Forbidden,
        /// `user_not_found`; `account_not_found`: the user does not belong to the account.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/limits`.
    pub enum CreateLimitResponse {
        /// The limit, counting from now.
        201 Created(Json<SpendLimitView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `not_billing_manager`: not an owner or admin of the account; `forbidden`: an API key
        /// without `billing:write`, or an account other than the one the API key is bound to.
        403 Forbidden,
        /// `user_not_found`; `account_not_found`: the user does not belong to the account.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a bad credits, window, rollingHours, feature, model or
        /// enforcement, an apiKeyId that is no unrevoked key bound to the account, or a memberId
        /// that is no member of it; `too_many_limits`: the account has 20 limits already.
        422 Unprocessable,
    }
}

api_response! {
    /// `DELETE /api/limits/{limitId}`.
    pub enum DeleteLimitResponse {
        /// Removed: it counts nothing from now on.
        204 Removed,
    }
    problems {
        /// `validation_failed`: an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `not_billing_manager`: not an owner or admin of the account; `forbidden`: an API key
        /// without `billing:write`, or an account other than the one the API key is bound to.
        403 Forbidden,
        /// `limit_not_found`: the account has no such limit; `user_not_found`;
        /// `account_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `GET /api/admin/accounts/{accountId}/limits`.
    pub enum AdminLimitsResponse {
        /// The account's limits with their usage now.
        200 Ok(Json<SpendLimitList>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `account_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `POST /api/admin/accounts/{accountId}/limits`.
    pub enum AdminCreateLimitResponse {
        /// The limit, counting from what its window already spent.
        201 Created(Json<SpendLimitView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `account_not_found`.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a bad field, an apiKeyId that is no unrevoked key bound to the
        /// account, or a memberId that is no member of it; `too_many_limits`: the account has
        /// 20 limits already.
        422 Unprocessable,
    }
}

api_response! {
    /// `DELETE /api/admin/accounts/{accountId}/limits/{limitId}`.
    pub enum AdminDeleteLimitResponse {
        /// Removed.
        204 Removed,
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `account_not_found`; `limit_not_found`: the account has no such limit.
        404 NotFound,
    }
}

/// The spend-limit endpoints.
pub(crate) struct LimitsApi {
    state: Arc<AppState>,
}

impl LimitsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the spend-limit endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Spend limits on an account.
    Limits,
}

#[OpenApi(tag = "Tag::Limits")]
impl LimitsApi {
    /// An account's spend limits, with what each counted in its current window.
    #[oai(path = "/api/limits", method = "get")]
    async fn limits(
        &self,
        credential: Credential,
        /// The user (API keys with `credits:read` only; users read their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> LimitsResponse {
        let result = async {
            let (_, account) = (self.state)
                .acting_in(
                    &credential,
                    Scope::CreditsRead,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let shown = (self.state.ports.credits)
                .spend_limits(&account)
                .await
                .map_err(limits_problem)?;
            Ok::<_, Problem>(SpendLimitList {
                items: shown.iter().map(SpendLimitView::from).collect(),
            })
        };
        match result.await {
            Ok(list) => LimitsResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }

    /// Add a spend limit to an account (its owners and admins; a personal account's user).
    #[oai(path = "/api/limits", method = "post")]
    async fn create_limit(
        &self,
        credential: Credential,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
        body: Json<CreateLimitBody>,
    ) -> CreateLimitResponse {
        let result = async {
            let (acting, account) = (self.state)
                .acting_in(
                    &credential,
                    Scope::BillingWrite,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            (self.state.ports.credits)
                .add_spend_limit(&acting.user.id, &account, draft_of(body.0))
                .await
                .map_err(limits_problem)
        };
        match result.await {
            Ok(shown) => CreateLimitResponse::Created(Json(SpendLimitView::from(&shown))),
            Err(problem) => problem.into(),
        }
    }

    /// Remove a spend limit (its account's owners and admins; a personal account's user).
    #[oai(path = "/api/limits/:limitId", method = "delete")]
    async fn delete_limit(
        &self,
        credential: Credential,
        /// The limit's id.
        #[oai(name = "limitId")]
        limit_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> DeleteLimitResponse {
        let result = async {
            let (acting, account) = (self.state)
                .acting_in(
                    &credential,
                    Scope::BillingWrite,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let id = parse_id(&limit_id.0, SpendLimitId::new, || {
                limits_problem(LimitsError::NotFound)
            })?;
            (self.state.ports.credits)
                .remove_spend_limit(&acting.user.id, &account, &id)
                .await
                .map_err(limits_problem)
        };
        match result.await {
            Ok(()) => DeleteLimitResponse::Removed,
            Err(problem) => problem.into(),
        }
    }

    /// Any account's spend limits, with their usage now (administrators).
    #[oai(path = "/api/admin/accounts/:accountId/limits", method = "get")]
    async fn admin_limits(
        &self,
        credential: Credential,
        /// The account: a user's id (their personal account) or a team's.
        #[oai(name = "accountId")]
        account_id: Path<String>,
    ) -> AdminLimitsResponse {
        let result = async {
            self.state.admin(&credential).await?;
            let account = named_account(&account_id.0)?;
            let admin = &self.state.ports.admin;
            admin
                .customer_limits(&account)
                .await
                .map_err(limits_problem)
        };
        match result.await {
            Ok(shown) => AdminLimitsResponse::Ok(Json(SpendLimitList {
                items: shown.iter().map(SpendLimitView::from).collect(),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Add a spend limit to any account (administrators), audited (`limit.added`). It counts
    /// from what its window already spent, and binds the account's owners as any limit does.
    #[oai(path = "/api/admin/accounts/:accountId/limits", method = "post")]
    async fn admin_create_limit(
        &self,
        credential: Credential,
        /// The account: a user's id (their personal account) or a team's.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        body: Json<CreateLimitBody>,
    ) -> AdminCreateLimitResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let account = named_account(&account_id.0)?;
            let port = &self.state.ports.admin;
            port.add_customer_limit(&admin, &account, draft_of(body.0))
                .await
                .map_err(limits_problem)
        };
        match result.await {
            Ok(shown) => AdminCreateLimitResponse::Created(Json(SpendLimitView::from(&shown))),
            Err(problem) => problem.into(),
        }
    }

    /// Remove a spend limit of any account (administrators), audited (`limit.removed`).
    #[oai(
        path = "/api/admin/accounts/:accountId/limits/:limitId",
        method = "delete"
    )]
    async fn admin_delete_limit(
        &self,
        credential: Credential,
        /// The account.
        #[oai(name = "accountId")]
        account_id: Path<String>,
        /// The limit's id.
        #[oai(name = "limitId")]
        limit_id: Path<String>,
    ) -> AdminDeleteLimitResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let account = named_account(&account_id.0)?;
            let id = parse_id(&limit_id.0, SpendLimitId::new, || {
                limits_problem(LimitsError::NotFound)
            })?;
            let port = &self.state.ports.admin;
            port.remove_customer_limit(&admin, &account, &id)
                .await
                .map_err(limits_problem)
        };
        match result.await {
            Ok(()) => AdminDeleteLimitResponse::Removed,
            Err(problem) => problem.into(),
        }
    }
}

/// An account an administrator names: a malformed id names none.
fn named_account(raw: &str) -> Result<AccountId, Problem> {
    parse_id(raw, AccountId::new, || {
        limits_problem(LimitsError::AccountNotFound)
    })
}

fn draft_of(body: CreateLimitBody) -> LimitDraft {
    LimitDraft {
        feature: body.feature,
        model: body.model,
        api_key_id: body.api_key_id,
        member_id: body.member_id,
        window: body.window,
        rolling_hours: body.rolling_hours,
        credits: body.credits,
        enforcement: body.enforcement,
    }
}

fn limits_problem(e: LimitsError) -> Problem {
    match e {
        LimitsError::Invalid { field, message } => Problem::invalid_field(field, message),
        LimitsError::NotAllowed => Problem::new(Code::NotBillingManager, e.to_string()),
        LimitsError::TooMany(_) => Problem::new(Code::TooManyLimits, e.to_string()),
        LimitsError::NotFound => Problem::new(Code::LimitNotFound, e.to_string()),
        LimitsError::AccountNotFound => Problem::new(Code::AccountNotFound, e.to_string()),
        LimitsError::NoSuchKey => Problem::invalid_field(
            "apiKeyId",
            "is no API key bound to this account (or it is revoked)".to_owned(),
        ),
        LimitsError::NoSuchMember => {
            Problem::invalid_field("memberId", "is no member of this account".to_owned())
        }
        LimitsError::Infra(infra) => infra.into(),
    }
}
