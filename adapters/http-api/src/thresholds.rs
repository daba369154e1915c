//! Balance thresholds on an account: `GET /api/thresholds` (each with the level it sits at
//! now), `POST /api/thresholds` and `DELETE /api/thresholds/{thresholdId}`.
//!
//! A threshold is a level of the account's balance, in credits or as a percentage of its last
//! grant. The posting that takes the balance below it tells `credits.threshold_crossed`, the
//! one that brings it back to it or above tells `credits.recovered`, each once per crossing
//! and in the posting's own transaction. Anyone acting in the account reads its thresholds (an
//! API key with `credits:read` for the user `?userId=` names); its owners and admins, or on a
//! personal account its user, add and remove them (an API key with `billing:write`).

use std::sync::Arc;

use application::accounts::Scope;
use application::use_cases::thresholds::{ShownThreshold, ThresholdDraft, ThresholdsError};
use domain::{ThresholdId, ThresholdLevel};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{parse_id, timestamp};
use crate::problem::{Code, Problem, api_response};

/// `POST /api/thresholds`: exactly one of `credits`, `percentOfGrant` and `percentOfLimit`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreateThresholdBody {
    /// At this many credits (decimal string, up to two places, above zero).
    #[oai(validator(min_length = 1, max_length = 32))]
    pub credits: Option<String>,
    /// At this percentage (1 to 100) of the account's last grant (a pack bought, a
    /// subscription period's credits, an operator's grant).
    pub percent_of_grant: Option<u32>,
    /// At this percentage (1 to 100) of the credits of the account's limit `limitId` (50 of a
    /// monthly ceiling of 5,000: the balance falling below 2,500). Removing the limit removes
    /// the threshold.
    pub percent_of_limit: Option<u32>,
    /// The limit `percentOfLimit` is of (`GET /api/limits`).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub limit_id: Option<String>,
}

/// A balance threshold and where it sits now.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ThresholdView {
    /// The threshold's id.
    pub id: String,
    /// The account whose balance it watches.
    pub account_id: String,
    /// Its level in credits, when it was set so (decimal string).
    #[oai(skip_serializing_if_is_none)]
    pub credits: Option<String>,
    /// The same, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub credits_hundredths: Option<i64>,
    /// Its level as a percentage of the last grant, when it was set so.
    #[oai(skip_serializing_if_is_none)]
    pub percent_of_grant: Option<u32>,
    /// Its level as a percentage of a limit's credits, when it was set so.
    #[oai(skip_serializing_if_is_none)]
    pub percent_of_limit: Option<u32>,
    /// The limit `percentOfLimit` is of.
    #[oai(skip_serializing_if_is_none)]
    pub limit_id: Option<String>,
    /// The balance it sits at now (decimal string); absent for a percentage of the last grant
    /// on an account never granted anything.
    #[oai(skip_serializing_if_is_none)]
    pub level: Option<String>,
    /// The same, in hundredths.
    #[oai(skip_serializing_if_is_none)]
    pub level_hundredths: Option<i64>,
    /// Whether the balance is below it now.
    pub below: bool,
    /// When it was made.
    pub created_at: String,
}

impl From<&ShownThreshold> for ThresholdView {
    fn from(shown: &ShownThreshold) -> Self {
        let r = &shown.record;
        let (mut credits, mut percent, mut of_limit) = (None, None, None);
        match &r.level {
            ThresholdLevel::Credits(c) => credits = Some(*c),
            ThresholdLevel::PercentOfGrant(p) => percent = Some(u32::from(*p)),
            ThresholdLevel::PercentOfLimit { limit, percent } => {
                of_limit = Some((u32::from(*percent), limit.to_string()));
            }
        }
        Self {
            id: r.id.to_string(),
            account_id: r.account_id.to_string(),
            credits: credits.map(|c| c.to_string()),
            credits_hundredths: credits.map(domain::Credits::hundredths),
            percent_of_grant: percent,
            percent_of_limit: of_limit.as_ref().map(|(p, _)| *p),
            limit_id: of_limit.map(|(_, limit)| limit),
            level: shown.level.map(|l| l.to_string()),
            level_hundredths: shown.level.map(domain::Credits::hundredths),
            below: shown.below,
            created_at: timestamp(r.created_at),
        }
    }
}

/// An account's thresholds.
#[derive(Debug, Clone, Object)]
pub struct ThresholdList {
    /// Oldest first.
    pub items: Vec<ThresholdView>,
}

api_response! {
    /// `GET /api/thresholds`.
    pub enum ThresholdsResponse {
        /// The account's thresholds with their levels now.
        200 Ok(Json<ThresholdList>),
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
    /// `POST /api/thresholds`.
    pub enum CreateThresholdResponse {
        /// The threshold: postings from now on tell its crossings.
        201 Created(Json<ThresholdView>),
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
        /// `validation_failed`: not exactly one of credits, percentOfGrant and
        /// percentOfLimit, zero credits, a percentage outside 1 to 100, or a limitId missing,
        /// without percentOfLimit or naming no limit of the account; `too_many_thresholds`:
        /// the account has 20 thresholds already.
        422 Unprocessable,
    }
}

api_response! {
    /// `DELETE /api/thresholds/{thresholdId}`.
    pub enum DeleteThresholdResponse {
        /// Removed: its crossings are no longer told.
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
        /// `threshold_not_found`: the account has no such threshold; `user_not_found`;
        /// `account_not_found`.
        404 NotFound,
    }
}

/// The balance-threshold endpoints.
pub(crate) struct ThresholdsApi {
    state: Arc<AppState>,
}

impl ThresholdsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the balance-threshold endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Balance thresholds on an account.
    Thresholds,
}

#[OpenApi(tag = "Tag::Thresholds")]
impl ThresholdsApi {
    /// An account's balance thresholds, with the level each sits at now.
    #[oai(path = "/api/thresholds", method = "get")]
    async fn thresholds(
        &self,
        credential: Credential,
        /// The user (API keys with `credits:read` only; users read their own).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> ThresholdsResponse {
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
                .balance_thresholds(&account)
                .await
                .map_err(thresholds_problem)?;
            Ok::<_, Problem>(ThresholdList {
                items: shown.iter().map(ThresholdView::from).collect(),
            })
        };
        match result.await {
            Ok(list) => ThresholdsResponse::Ok(Json(list)),
            Err(problem) => problem.into(),
        }
    }

    /// Add a balance threshold to an account (its owners and admins; a personal account's
    /// user).
    #[oai(path = "/api/thresholds", method = "post")]
    async fn create_threshold(
        &self,
        credential: Credential,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
        body: Json<CreateThresholdBody>,
    ) -> CreateThresholdResponse {
        let result = async {
            let (acting, account) = (self.state)
                .acting_in(
                    &credential,
                    Scope::BillingWrite,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let draft = ThresholdDraft {
                credits: body.0.credits,
                percent_of_grant: body.0.percent_of_grant,
                percent_of_limit: body.0.percent_of_limit,
                limit_id: body.0.limit_id,
            };
            (self.state.ports.credits)
                .add_balance_threshold(&acting.user.id, &account, draft)
                .await
                .map_err(thresholds_problem)
        };
        match result.await {
            Ok(shown) => CreateThresholdResponse::Created(Json(ThresholdView::from(&shown))),
            Err(problem) => problem.into(),
        }
    }

    /// Remove a balance threshold (its account's owners and admins; a personal account's
    /// user).
    #[oai(path = "/api/thresholds/:thresholdId", method = "delete")]
    async fn delete_threshold(
        &self,
        credential: Credential,
        /// The threshold's id.
        #[oai(name = "thresholdId")]
        threshold_id: Path<String>,
        /// The acting user (API keys with `billing:write` only).
        #[oai(name = "userId", validator(max_length = 64))]
        user_id: Query<Option<String>>,
        /// A team account the user belongs to (omitted: their personal account).
        #[oai(name = "accountId", validator(max_length = 64))]
        account_id: Query<Option<String>>,
    ) -> DeleteThresholdResponse {
        let result = async {
            let (acting, account) = (self.state)
                .acting_in(
                    &credential,
                    Scope::BillingWrite,
                    user_id.0.as_deref(),
                    account_id.0.as_deref(),
                )
                .await?;
            let id = parse_id(&threshold_id.0, ThresholdId::new, || {
                thresholds_problem(ThresholdsError::NotFound)
            })?;
            (self.state.ports.credits)
                .remove_balance_threshold(&acting.user.id, &account, &id)
                .await
                .map_err(thresholds_problem)
        };
        match result.await {
            Ok(()) => DeleteThresholdResponse::Removed,
            Err(problem) => problem.into(),
        }
    }
}

fn thresholds_problem(e: ThresholdsError) -> Problem {
    match e {
        ThresholdsError::Invalid { field, message } => Problem::invalid_field(field, message),
        ThresholdsError::NotAllowed => Problem::new(Code::NotBillingManager, e.to_string()),
        ThresholdsError::TooMany(_) => Problem::new(Code::TooManyThresholds, e.to_string()),
        ThresholdsError::NotFound => Problem::new(Code::ThresholdNotFound, e.to_string()),
        ThresholdsError::NoSuchLimit => {
            Problem::invalid_field("limitId", "is no limit of this account".to_owned())
        }
        ThresholdsError::Infra(infra) => infra.into(),
    }
}
