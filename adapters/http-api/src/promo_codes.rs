//! Promo codes: `POST /api/promo-codes/redeem` (a user redeems a code into their personal
//! account), and the administrators' `GET`/`POST /api/admin/promo-codes`,
//! `GET`/`PATCH /api/admin/promo-codes/{id}`.
//!
//! Codes are case-insensitive. An unknown, disabled, not yet valid or expired code is told
//! alike (`404 promo_code_invalid`), so that guessing learns nothing about codes the guesser
//! cannot redeem, and every user's attempts are limited (20 an hour, 10 at once: `429`).

use std::sync::Arc;

use application::accounts::Scope;
use application::ports::{RedemptionRecord, StoredPromoCode};
use application::use_cases::admin_console::{PromoAdminError, PromoDraft};
use application::use_cases::promo_codes::{RedeemError, Redeemed};
use domain::PromoRefusal;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::admin_console::parse_time;
use crate::auth::Credential;
use crate::dto::timestamp;
use crate::problem::{Code, Problem, api_response};

/// `POST /api/promo-codes/redeem`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct RedeemBody {
    /// The code, as the user typed it (case-insensitive).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub code: String,
    /// The request's key: the same key for the same user and code answers with the redemption
    /// it made and grants nothing again. Omitted: one key for every request without one, so a
    /// user's repeated request answers with their first redemption.
    #[oai(validator(min_length = 1, max_length = 128))]
    pub idempotency_key: Option<String>,
}

/// A redemption.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct RedemptionView {
    /// The redemption's id.
    pub id: String,
    /// The code redeemed (upper-case).
    pub code: String,
    /// Who redeemed it.
    pub user_id: String,
    /// The user's how-manieth redemption of the code (from 1).
    pub ordinal: u32,
    /// Credits granted (decimal string).
    pub credits: String,
    /// The same, in hundredths.
    pub credits_hundredths: i64,
    /// What they are: `paid`, `promotional`, `bonus` or `compensation`.
    pub category: String,
    /// When they expire, if they do.
    #[oai(skip_serializing_if_is_none)]
    pub expires_at: Option<String>,
    /// When it was redeemed.
    pub redeemed_at: String,
    /// Whether an earlier request with the same key made it (nothing was granted now).
    pub replayed: bool,
}

impl RedemptionView {
    fn new(code: &StoredPromoCode, r: &RedemptionRecord, replayed: bool) -> Self {
        let expires_at = code.terms.expires_at(r.redeemed_at).map(timestamp);
        Self {
            id: r.id.clone(),
            code: code.code.to_string(),
            user_id: r.user_id.to_string(),
            ordinal: r.ordinal,
            credits: r.credits.to_string(),
            credits_hundredths: r.credits.hundredths(),
            category: code.terms.category.code().to_owned(),
            expires_at,
            redeemed_at: timestamp(r.redeemed_at),
            replayed,
        }
    }
}

impl From<&Redeemed> for RedemptionView {
    fn from(r: &Redeemed) -> Self {
        Self::new(&r.code, &r.redemption, r.replayed)
    }
}

/// `POST /api/admin/promo-codes`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreatePromoCodeBody {
    /// The code users type: 3 to 40 letters, digits, `-` or `_` (stored upper-case).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub code: String,
    /// Credits per redemption (decimal string, up to two places, above zero).
    #[oai(validator(min_length = 1, max_length = 32))]
    pub credits: String,
    /// `promotional` (default), `bonus`, `compensation` or `paid`.
    #[oai(validator(max_length = 16))]
    pub category: Option<String>,
    /// Days after a redemption when its credits expire (1 to 3650); omitted: they do not.
    pub expires_after_days: Option<u32>,
    /// From when it can be redeemed (RFC 3339); omitted: now.
    #[oai(validator(max_length = 64))]
    pub valid_from: Option<String>,
    /// Until when (RFC 3339, exclusive); omitted: no end.
    #[oai(validator(max_length = 64))]
    pub valid_until: Option<String>,
    /// The most redemptions in total; omitted: no limit.
    pub max_redemptions: Option<u32>,
    /// The most redemptions per user (1 to 1000, default 1).
    pub per_user: Option<u32>,
    /// Only users who never paid an order.
    #[oai(default)]
    pub new_users_only: bool,
    /// Only users who hold this plan now (a live subscription, or one-time access that runs).
    #[oai(validator(max_length = 64))]
    pub plan_id: Option<String>,
}

/// `PATCH /api/admin/promo-codes/{id}`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UpdatePromoCodeBody {
    /// `false` switches the code off (no more redemptions), `true` on again.
    pub active: bool,
}

/// A promo code.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PromoCodeView {
    /// Its id.
    pub id: String,
    /// The code (upper-case).
    pub code: String,
    /// Credits per redemption (decimal string).
    pub credits: String,
    /// What they are.
    pub category: String,
    /// Days after a redemption when its credits expire.
    #[oai(skip_serializing_if_is_none)]
    pub expires_after_days: Option<u32>,
    /// From when it can be redeemed.
    #[oai(skip_serializing_if_is_none)]
    pub valid_from: Option<String>,
    /// Until when (exclusive).
    #[oai(skip_serializing_if_is_none)]
    pub valid_until: Option<String>,
    /// The most redemptions in total.
    #[oai(skip_serializing_if_is_none)]
    pub max_redemptions: Option<u32>,
    /// The most per user.
    pub per_user: u32,
    /// Only users who never paid an order.
    pub new_users_only: bool,
    /// Only holders of this plan.
    #[oai(skip_serializing_if_is_none)]
    pub plan_id: Option<String>,
    /// Whether it may be redeemed.
    pub active: bool,
    /// Its redemptions so far.
    pub redeemed: u32,
    /// Who created it.
    pub created_by: String,
    /// When.
    pub created_at: String,
}

impl From<&StoredPromoCode> for PromoCodeView {
    fn from(c: &StoredPromoCode) -> Self {
        let t = &c.terms;
        Self {
            id: c.id.clone(),
            code: c.code.to_string(),
            credits: t.credits.to_string(),
            category: t.category.code().to_owned(),
            expires_after_days: t.expires_after_days,
            valid_from: t.valid_from.map(timestamp),
            valid_until: t.valid_until.map(timestamp),
            max_redemptions: t.max_redemptions,
            per_user: t.per_user,
            new_users_only: t.new_users_only,
            plan_id: t.plan.as_ref().map(ToString::to_string),
            active: c.active,
            redeemed: c.redeemed,
            created_by: c.created_by.to_string(),
            created_at: timestamp(c.created_at),
        }
    }
}

/// Every promo code.
#[derive(Debug, Clone, Object)]
pub struct PromoCodeList {
    /// Newest first (up to 200).
    pub items: Vec<PromoCodeView>,
}

/// A promo code with its latest redemptions.
#[derive(Debug, Clone, Object)]
pub struct PromoCodeDetail {
    /// The code.
    pub code: PromoCodeView,
    /// Its latest redemptions, newest first (up to 100).
    pub redemptions: Vec<RedemptionView>,
}

api_response! {
    /// `POST /api/promo-codes/redeem`.
    pub enum RedeemResponse {
        /// Redeemed (its credits are in the user's personal account), or the redemption an
        /// earlier request with the same key made (`replayed`).
        200 Ok(Json<RedemptionView>),
    }
    problems {
        /// `validation_failed`: the body is malformed, or an API key named no `userId`.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `promo_code_not_eligible`: only for users who never paid, or for holders of a plan
        /// the user does not hold; `forbidden`: an API key without `billing:write`.
        403 Forbidden,
        /// `promo_code_invalid`: no such code, or disabled, not yet valid or expired;
        /// `user_not_found`.
        404 NotFound,
        /// `promo_code_already_redeemed`: the user redeemed it as often as it allows;
        /// `promo_code_exhausted`: redeemed as often as its total limit allows.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `rate_limited`: too many codes tried by this user lately (`Retry-After`).
        429 TooManyRequests,
    }
}

api_response! {
    /// `GET /api/admin/promo-codes`.
    pub enum PromoCodesResponse {
        /// Every promo code, newest first.
        200 Ok(Json<PromoCodeList>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
    }
}

api_response! {
    /// `POST /api/admin/promo-codes`.
    pub enum CreatePromoCodeResponse {
        /// Created: users may redeem it from `validFrom`.
        201 Created(Json<PromoCodeView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `promo_code_exists`: a code with this text exists (case-insensitive).
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: a field out of form (named in `errors`): the code's length or
        /// characters, zero or too precise credits, a category, a window that ends before it
        /// starts, a limit of zero, a per-user limit or expiry out of range, a plan the
        /// catalogue does not have.
        422 Unprocessable,
    }
}

api_response! {
    /// `GET /api/admin/promo-codes/{id}`.
    pub enum PromoCodeResponse {
        /// The code and its latest redemptions.
        200 Ok(Json<PromoCodeDetail>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `promo_code_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `PATCH /api/admin/promo-codes/{id}`.
    pub enum UpdatePromoCodeResponse {
        /// The code as it is now.
        200 Ok(Json<PromoCodeView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `promo_code_not_found`.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
    }
}

/// The promo code endpoints.
pub(crate) struct PromoCodesApi {
    state: Arc<AppState>,
}

impl PromoCodesApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the promo code endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Promo codes: redeeming them, and administrators' codes.
    PromoCodes,
}

#[OpenApi(tag = "Tag::PromoCodes")]
impl PromoCodesApi {
    /// Redeem a promo code: its credits go to the user's personal account, once per request
    /// key, within the code's limits (exact under concurrency), told as `credits.granted` and
    /// `promo_code.redeemed`.
    #[oai(path = "/api/promo-codes/redeem", method = "post")]
    async fn redeem(
        &self,
        credential: Credential,
        /// The user (API keys with `billing:write` only; users redeem for themselves).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        body: Json<RedeemBody>,
    ) -> RedeemResponse {
        let result = async {
            let acting = (self.state)
                .acting_for(&credential, Scope::BillingWrite, user_id.0.as_deref())
                .await?;
            let Json(body) = body;
            (self.state.ports.credits)
                .redeem_promo_code(&acting.user, &body.code, body.idempotency_key)
                .await
                .map_err(redeem_problem)
        };
        match result.await {
            Ok(redeemed) => RedeemResponse::Ok(Json(RedemptionView::from(&redeemed))),
            Err(problem) => problem.into(),
        }
    }

    /// Every promo code, newest first (administrators).
    #[oai(path = "/api/admin/promo-codes", method = "get")]
    async fn promo_codes(&self, credential: Credential) -> PromoCodesResponse {
        let result = async {
            self.state.admin(&credential).await?;
            Ok::<_, Problem>(self.state.ports.admin.promo_codes().await?)
        };
        match result.await {
            Ok(codes) => PromoCodesResponse::Ok(Json(PromoCodeList {
                items: codes.iter().map(PromoCodeView::from).collect(),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Create a promo code (administrators). Audited (`promo_code.created`).
    #[oai(path = "/api/admin/promo-codes", method = "post")]
    async fn create_promo_code(
        &self,
        credential: Credential,
        body: Json<CreatePromoCodeBody>,
    ) -> CreatePromoCodeResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let Json(b) = body;
            let draft = PromoDraft {
                valid_from: parse_time("validFrom", b.valid_from.as_deref())?,
                valid_until: parse_time("validUntil", b.valid_until.as_deref())?,
                code: b.code,
                credits: b.credits,
                category: b.category,
                expires_after_days: b.expires_after_days,
                max_redemptions: b.max_redemptions,
                per_user: b.per_user,
                new_users_only: b.new_users_only,
                plan_id: b.plan_id,
            };
            (self.state.ports.admin)
                .create_promo_code(&admin, &draft)
                .await
                .map_err(admin_problem)
        };
        match result.await {
            Ok(code) => CreatePromoCodeResponse::Created(Json(PromoCodeView::from(&code))),
            Err(problem) => problem.into(),
        }
    }

    /// A promo code and its latest redemptions (administrators).
    #[oai(path = "/api/admin/promo-codes/:id", method = "get")]
    async fn promo_code(&self, credential: Credential, id: Path<String>) -> PromoCodeResponse {
        let result = async {
            self.state.admin(&credential).await?;
            (self.state.ports.admin)
                .promo_code_detail(&id.0)
                .await
                .map_err(admin_problem)
        };
        match result.await {
            Ok((code, redemptions)) => PromoCodeResponse::Ok(Json(PromoCodeDetail {
                redemptions: redemptions
                    .iter()
                    .map(|r| RedemptionView::new(&code, r, false))
                    .collect(),
                code: PromoCodeView::from(&code),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Switch a promo code off (no more redemptions) or on again (administrators). Audited
    /// (`promo_code.updated`); what was redeemed stays redeemed.
    #[oai(path = "/api/admin/promo-codes/:id", method = "patch")]
    async fn update_promo_code(
        &self,
        credential: Credential,
        id: Path<String>,
        body: Json<UpdatePromoCodeBody>,
    ) -> UpdatePromoCodeResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            (self.state.ports.admin)
                .set_promo_code_active(&admin, &id.0, body.0.active)
                .await
                .map_err(admin_problem)
        };
        match result.await {
            Ok(code) => UpdatePromoCodeResponse::Ok(Json(PromoCodeView::from(&code))),
            Err(problem) => problem.into(),
        }
    }
}

/// The problem of a refused redemption.
pub(crate) fn redeem_problem(e: RedeemError) -> Problem {
    match e {
        RedeemError::Refused(refusal) => {
            let code = match refusal {
                PromoRefusal::Invalid => Code::PromoCodeInvalid,
                PromoRefusal::Exhausted => Code::PromoCodeExhausted,
                PromoRefusal::AlreadyRedeemed => Code::PromoCodeAlreadyRedeemed,
                PromoRefusal::NewUsersOnly | PromoRefusal::PlanRequired => {
                    Code::PromoCodeNotEligible
                }
            };
            let detail = match refusal {
                PromoRefusal::Invalid => "no such promo code, or it is not valid now",
                PromoRefusal::Exhausted => {
                    "this promo code has been redeemed as often as it allows"
                }
                PromoRefusal::AlreadyRedeemed => "you redeemed this promo code already",
                PromoRefusal::NewUsersOnly => "this promo code is for new customers only",
                PromoRefusal::PlanRequired => "this promo code is for subscribers of another plan",
            };
            Problem::new(code, detail)
        }
        RedeemError::BadKey => {
            Problem::invalid_field("idempotencyKey", "must be 1 to 128 characters")
        }
        RedeemError::TooManyAttempts(seconds) => Problem::rate_limited(seconds),
        RedeemError::Infra(infra) => infra.into(),
    }
}

fn admin_problem(e: PromoAdminError) -> Problem {
    match e {
        PromoAdminError::Invalid { field, message } => Problem::invalid_field(field, message),
        PromoAdminError::Exists => Problem::new(Code::PromoCodeExists, e.to_string()),
        PromoAdminError::NotFound => Problem::new(Code::PromoCodeNotFound, e.to_string()),
        PromoAdminError::Infra(infra) => infra.into(),
    }
}
