//! Credit consumption for server-side callers holding a service API key with scope
//! `credits:consume`: spend now, or reserve, then settle or release.
//!
//! Consume and reserve require an `Idempotency-Key`: a retry with the same key and body answers
//! the first response again with `Idempotency-Replayed: true`; the same key with another body
//! is a 409 `idempotency_conflict`. Settle and release are idempotent by reservation id.

use std::sync::Arc;

use application::accounts::{ApiKey, Scope};
use application::authorization;
use application::ports::{CreditTransaction, Replay};
use application::use_cases::credits::{ConsumeCredits, CreditsError, UsageRequest};
use domain::{AccountId, ReservationId, UserId};
use poem::Request;
use poem_openapi::param::{Header, Path};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::{Credential, denied};
use crate::dto::{ReservationView, parse_id, parse_idempotency_key, timestamp};
use crate::problem::{Code, Problem, api_response};
use crate::token_usage::{PricingView, TokenUsageBody};

/// What was used (consume, settle) or is about to be used (reserve).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UsageBody {
    /// Who spends: their personal account is charged unless `accountId` names a team they
    /// belong to.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub user_id: String,
    /// The team account to charge (the user must be a member; their limit applies). Omitted,
    /// or the user's own id: their personal account.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub account_id: Option<String>,
    /// A fixed-cost feature (`chat`, `image`, …); omit for a per-token chat.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub feature: Option<String>,
    /// The AI model (its multiplier applies).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub model: Option<String>,
    /// Tokens used (consume, settle) or estimated (reserve). With `usage`, omit it or give
    /// their total.
    #[oai(validator(minimum(value = "1"), maximum(value = "100000000")))]
    pub tokens: Option<i64>,
    /// The call's tokens by kind (with `model`, without `feature`): each kind priced by the
    /// model's price-book entry.
    pub usage: Option<TokenUsageBody>,
}

impl UsageBody {
    fn usage(&self) -> UsageRequest {
        UsageRequest {
            feature: self.feature.clone(),
            model: self.model.clone(),
            tokens: self.tokens,
            breakdown: self.usage.as_ref().map(TokenUsageBody::counts),
        }
    }
}

/// `POST /api/credits/reservations/{id}/release`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ReleaseBody {
    /// Who releases it: on a team's account, the member who holds it or an owner or admin.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub user_id: String,
    /// The team account that holds it (omitted: the user's personal account).
    #[oai(validator(min_length = 1, max_length = 64))]
    pub account_id: Option<String>,
}

/// A consumption: what it cost and the balance after it.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ConsumptionView {
    /// The credit transaction's id.
    pub transaction_id: i64,
    /// Who spent.
    pub user_id: String,
    /// The account charged (the user's own id for their personal account).
    pub account_id: String,
    /// The cost, decimal string with two places.
    pub cost: String,
    /// The cost, in hundredths.
    pub cost_hundredths: i64,
    /// The balance after it, decimal string.
    pub balance_after: String,
    /// The balance after it, in hundredths.
    pub balance_after_hundredths: i64,
    /// The feature used.
    #[oai(skip_serializing_if_is_none)]
    pub feature: Option<String>,
    /// The AI model used.
    #[oai(skip_serializing_if_is_none)]
    pub model: Option<String>,
    /// Tokens used.
    #[oai(skip_serializing_if_is_none)]
    pub tokens: Option<u64>,
    /// How it was priced.
    #[oai(flatten)]
    pub pricing: PricingView,
    /// When.
    pub created_at: String,
}

impl From<&CreditTransaction> for ConsumptionView {
    fn from(t: &CreditTransaction) -> Self {
        let cost = t.amount.magnitude();
        Self {
            transaction_id: t.id,
            user_id: crate::dto::spender(&t.account_id, t.member_id.as_ref()),
            account_id: t.account_id.to_string(),
            cost: cost.to_string(),
            cost_hundredths: cost.hundredths(),
            balance_after: t.balance_after.to_string(),
            balance_after_hundredths: t.balance_after.hundredths(),
            feature: t.context.feature.clone(),
            model: t.context.model.clone(),
            tokens: t.context.tokens,
            pricing: PricingView::from(&t.context),
            created_at: timestamp(t.created_at),
        }
    }
}

api_response! {
    /// `POST /api/credits/consume`.
    pub enum ConsumeResponse {
        /// Spent (or the first response again, with `Idempotency-Replayed: true`).
        201 Created(
            Json<ConsumptionView>,
            /// `true` when this is the first response again.
            #[oai(header = "Idempotency-Replayed")] Option<bool>
        ),
    }
    problems {
        /// `validation_failed`: the body is malformed or `Idempotency-Key` is missing.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `insufficient_credits`: the balance does not cover the cost (`available`,
        /// `requested`); `limit_reached`: the member's limit does not leave room for it
        /// (`limit`: what is left and when it resets); nothing was spent.
        402 PaymentRequired,
        /// `forbidden`: not an API key with `credits:consume`; `not_a_member`: the user does
        /// not belong to the account named.
        /// Also `forbidden`: an account other than the one the API key is bound to.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
        /// `idempotency_conflict`: the key was used with another body.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the usage cannot be priced (unknown feature or model, bad
        /// token count).
        422 Unprocessable,
    }
}

api_response! {
    /// `POST /api/credits/reservations`.
    pub enum ReserveResponse {
        /// Held (or the first response again, with `Idempotency-Replayed: true`).
        201 Created(
            Json<ReservationView>,
            /// `true` when this is the first response again.
            #[oai(header = "Idempotency-Replayed")] Option<bool>
        ),
    }
    problems {
        /// `validation_failed`: the body is malformed or `Idempotency-Key` is missing.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `insufficient_credits`: the balance does not cover the estimate; `limit_reached`: the
        /// member's limit does not leave room for it; nothing was held.
        402 PaymentRequired,
        /// `forbidden`: not an API key with `credits:consume`; `not_a_member`.
        /// Also `forbidden`: an account other than the one the API key is bound to.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
        /// `idempotency_conflict`: the key was used with another body.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the usage cannot be priced.
        422 Unprocessable,
    }
}

api_response! {
    /// `POST /api/credits/reservations/{id}/settle` and `…/release`.
    pub enum ResolveResponse {
        /// Settled or released (or the first outcome again, with `Idempotency-Replayed: true`).
        200 Ok(
            Json<ReservationView>,
            /// `true` when this is the first outcome again.
            #[oai(header = "Idempotency-Replayed")] Option<bool>
        ),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: not an API key with `credits:consume`.
        /// Also `forbidden`: an account other than the one the API key is bound to.
        403 Forbidden,
        /// `user_not_found` or `reservation_not_found`.
        404 NotFound,
        /// `reservation_resolved`: it was released, expired or settled with another usage.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the usage cannot be priced.
        422 Unprocessable,
    }
}

/// The consumption endpoints.
pub(crate) struct ConsumptionApi {
    state: Arc<AppState>,
}

impl ConsumptionApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the consumption endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Spend credits (service API keys with `credits:consume`).
    Consumption,
}

#[OpenApi(tag = "Tag::Consumption")]
impl ConsumptionApi {
    /// Spend credits for one use, priced by the consumption rules (fixed or per token).
    #[oai(path = "/api/credits/consume", method = "post")]
    async fn consume(
        &self,
        credential: Credential,
        request: &Request,
        /// Required: makes a retry return the first response.
        #[oai(name = "Idempotency-Key")]
        idempotency_key: Header<Option<String>>,
        body: Json<UsageBody>,
    ) -> ConsumeResponse {
        let result = async {
            let key = (self.state)
                .account_key(&credential, Scope::CreditsConsume)
                .await?;
            let request = consume_request(&key, idempotency_key.0, request, &body.0)?;
            self.state
                .ports
                .credits
                .consume_credits(request)
                .await
                .map_err(credits_problem)
        };
        match result.await {
            Ok((transaction, replay)) => {
                ConsumeResponse::Created(Json((&transaction).into()), replayed(replay))
            }
            Err(problem) => problem.into(),
        }
    }

    /// Hold the estimated cost of a use whose real cost is known afterwards.
    #[oai(path = "/api/credits/reservations", method = "post")]
    async fn reserve(
        &self,
        credential: Credential,
        request: &Request,
        /// Required: makes a retry return the first response.
        #[oai(name = "Idempotency-Key")]
        idempotency_key: Header<Option<String>>,
        body: Json<UsageBody>,
    ) -> ReserveResponse {
        let result = async {
            let key = (self.state)
                .account_key(&credential, Scope::CreditsConsume)
                .await?;
            let request = consume_request(&key, idempotency_key.0, request, &body.0)?;
            self.state
                .ports
                .credits
                .reserve_credits(request)
                .await
                .map_err(credits_problem)
        };
        match result.await {
            Ok((reservation, replay)) => {
                ReserveResponse::Created(Json((&reservation).into()), replayed(replay))
            }
            Err(problem) => problem.into(),
        }
    }

    /// Settle a reservation with the actual usage: the unused part returns to the balance; an
    /// overrun is taken up to what is available.
    #[oai(path = "/api/credits/reservations/:id/settle", method = "post")]
    async fn settle(
        &self,
        credential: Credential,
        /// The reservation id.
        id: Path<String>,
        body: Json<UsageBody>,
    ) -> ResolveResponse {
        let result = async {
            let key = (self.state)
                .account_key(&credential, Scope::CreditsConsume)
                .await?;
            let (user, id) = reservation_of(&body.0.user_id, &id.0)?;
            let account = account_id(&key, body.0.account_id.as_deref())?;
            self.state
                .ports
                .credits
                .settle_reservation(&user, account, &id, &body.0.usage())
                .await
                .map_err(credits_problem)
        };
        match result.await {
            Ok((reservation, replay)) => {
                ResolveResponse::Ok(Json((&reservation).into()), replayed(replay))
            }
            Err(problem) => problem.into(),
        }
    }

    /// Release a reservation unused.
    #[oai(path = "/api/credits/reservations/:id/release", method = "post")]
    async fn release(
        &self,
        credential: Credential,
        /// The reservation id.
        id: Path<String>,
        body: Json<ReleaseBody>,
    ) -> ResolveResponse {
        let result = async {
            let key = (self.state)
                .account_key(&credential, Scope::CreditsConsume)
                .await?;
            let (user, id) = reservation_of(&body.0.user_id, &id.0)?;
            let account = account_id(&key, body.0.account_id.as_deref())?;
            self.state
                .ports
                .credits
                .release_reservation(&user, account, &id)
                .await
                .map_err(credits_problem)
        };
        match result.await {
            Ok((reservation, replay)) => {
                ResolveResponse::Ok(Json((&reservation).into()), replayed(replay))
            }
            Err(problem) => problem.into(),
        }
    }
}

fn replayed(replay: Replay) -> Option<bool> {
    (replay == Replay::Replayed).then_some(true)
}

fn consume_request(
    api_key: &ApiKey,
    key: Option<String>,
    request: &Request,
    body: &UsageBody,
) -> Result<ConsumeCredits, Problem> {
    let idempotency_key = parse_idempotency_key(key, request)?
        .ok_or_else(|| Problem::bad_input("the Idempotency-Key header is required"))?;
    Ok(ConsumeCredits {
        user_id: user_id(&body.user_id)?,
        account_id: account_id(api_key, body.account_id.as_deref())?,
        usage: body.usage(),
        idempotency_key,
        api_key_id: Some(api_key.id.clone()),
    })
}

/// The account a spend by `key` is charged to: the one a body names (a malformed id is one the
/// user does not belong to), or none (the user's personal account), as the key's binding
/// allows ([`authorization::key_account`]).
fn account_id(key: &ApiKey, raw: Option<&str>) -> Result<Option<AccountId>, Problem> {
    let named = raw
        .map(|raw| {
            parse_id(raw, AccountId::new, || {
                credits_problem(CreditsError::NotAMember)
            })
        })
        .transpose()?;
    authorization::key_account(key, named).map_err(denied)
}

/// The user a body names: a malformed id names nobody.
fn user_id(raw: &str) -> Result<UserId, Problem> {
    parse_id(raw, UserId::new, || {
        credits_problem(CreditsError::UserNotFound)
    })
}

/// The user and the reservation a settle or release names, in the order the use case checks
/// them: a malformed id is one it does not know.
fn reservation_of(user: &str, reservation: &str) -> Result<(UserId, ReservationId), Problem> {
    let user = user_id(user)?;
    let unknown = || credits_problem(CreditsError::ReservationNotFound);
    Ok((user, parse_id(reservation, ReservationId::new, unknown)?))
}

fn credits_problem(e: CreditsError) -> Problem {
    match e {
        CreditsError::UserNotFound => Problem::new(Code::UserNotFound, e.to_string()),
        CreditsError::InvalidUsage(_) => Problem::new(Code::ValidationFailed, e.to_string()),
        CreditsError::Insufficient {
            requested,
            available,
        } => Problem::insufficient(requested, available),
        CreditsError::IdempotencyConflict => Problem::new(Code::IdempotencyConflict, e.to_string()),
        CreditsError::ReservationNotFound => Problem::new(Code::ReservationNotFound, e.to_string()),
        CreditsError::AlreadyResolved(_) => Problem::new(Code::ReservationResolved, e.to_string()),
        CreditsError::NotAMember => Problem::new(Code::NotAMember, e.to_string()),
        CreditsError::LimitReached(reached) => Problem::limit_reached(&reached),
        CreditsError::Infra(infra) => infra.into(),
    }
}
