//! The operator's API beyond plans (issue 18, first part): `GET /api/admin/webhook-events` (the
//! webhook inbox: every recorded provider event with its outcome, detail and raw body) and
//! `POST /api/admin/users/{id}/credits` (a grant, optionally expiring, or a debit that never goes
//! below zero; once per `Idempotency-Key`).

use application::ports::RecordedEvent;
use application::use_cases::admin_console::{AdjustCreditsError, AdjustedCredits, CursorPage};
use chrono::DateTime;
use domain::Timestamp;
use poem_openapi::Object;
use poem_openapi::payload::Json;
use rust_decimal::Decimal;

use crate::credits::TransactionView;
use crate::dto::timestamp;
use crate::i18n::Language;
use crate::problem::{Code, Problem, api_response};

/// One recorded provider event.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebhookEventView {
    /// The inbox row id (increasing).
    pub id: i64,
    /// The provider id.
    pub provider: String,
    /// The provider's event id (`#n` suffixed for the n-th event of one delivery).
    pub event_id: String,
    /// The provider's event type.
    pub event_type: String,
    /// What it came to: `applied`, `duplicate`, `ignored`, `stale`, `mismatch`, `late_payment`,
    /// `unknown_order`, `unknown_subscription`, `duplicate_state`, `refund_refused`,
    /// `refund_kept` or `foreign_merchant`.
    pub outcome: String,
    /// Why, when it changed nothing.
    #[oai(skip_serializing_if_is_none)]
    pub detail: Option<String>,
    /// When it was received.
    pub received_at: String,
    /// The body as received (at most 256 KiB), for administrators only.
    pub payload: String,
}

impl From<&RecordedEvent> for WebhookEventView {
    fn from(r: &RecordedEvent) -> Self {
        let e = &r.entry;
        Self {
            id: r.id,
            provider: e.provider.as_str().to_owned(),
            event_id: e.event_id.clone(),
            event_type: e.event_type.clone(),
            outcome: e.outcome.code().to_owned(),
            detail: e.detail.clone(),
            received_at: timestamp(e.received_at),
            payload: e.payload.clone(),
        }
    }
}

/// A page of recorded provider events, newest first.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebhookEventPage {
    /// The events on this page.
    pub items: Vec<WebhookEventView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

impl From<&CursorPage<RecordedEvent>> for WebhookEventPage {
    fn from(page: &CursorPage<RecordedEvent>) -> Self {
        Self {
            items: page.items.iter().map(WebhookEventView::from).collect(),
            next_cursor: page.next_cursor.clone(),
        }
    }
}

api_response! {
    /// `GET /api/admin/webhook-events`.
    pub enum WebhookEventsResponse {
        /// A page of recorded provider events, newest first.
        200 Ok(Json<WebhookEventPage>),
    }
    problems {
        /// `invalid_pagination`: a bad cursor or limit.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `unknown_provider`: `provider` is not one of the seven ids.
        422 UnprocessableEntity,
    }
}

/// A credit adjustment.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdjustCreditsBody {
    /// Credits to add (positive: a grant) or take (negative: a debit, never below zero), two
    /// decimal places at most.
    pub amount: Decimal,
    /// Why, shown in the user's history with the acting administrator's id.
    #[oai(validator(max_length = 200))]
    pub reason: String,
    /// When granted credits expire (RFC 3339; a grant only).
    #[oai(skip_serializing_if_is_none)]
    pub expires_at: Option<String>,
    /// What granted credits are (a grant only; default `compensation`): finance keeps paid
    /// and given credits apart.
    #[oai(skip_serializing_if_is_none)]
    pub category: Option<GrantCategoryName>,
    /// Their priority in spend order, 0 to 1000 (a grant only; default 0): a spend draws the
    /// highest first, before expiry and category.
    #[oai(
        skip_serializing_if_is_none,
        validator(minimum(value = "0"), maximum(value = "1000"))
    )]
    pub priority: Option<i64>,
}

/// What a grant's credits are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, poem_openapi::Enum)]
#[oai(rename_all = "lowercase")]
pub enum GrantCategoryName {
    /// Bought.
    Paid,
    /// Given to win or keep a customer.
    Promotional,
    /// Given with a purchase.
    Bonus,
    /// Given to make up for something.
    Compensation,
}

impl From<GrantCategoryName> for domain::GrantCategory {
    fn from(c: GrantCategoryName) -> Self {
        match c {
            GrantCategoryName::Paid => domain::GrantCategory::Paid,
            GrantCategoryName::Promotional => domain::GrantCategory::Promotional,
            GrantCategoryName::Bonus => domain::GrantCategory::Bonus,
            GrantCategoryName::Compensation => domain::GrantCategory::Compensation,
        }
    }
}

/// What an adjustment did.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct AdjustedCreditsView {
    /// The ledger entry; absent when the same `Idempotency-Key` was used before for the same
    /// adjustment (nothing happened twice).
    #[oai(skip_serializing_if_is_none)]
    pub transaction: Option<TransactionView>,
    /// The user's balance now, decimal string.
    pub balance: String,
    /// The balance in hundredths.
    pub balance_hundredths: i64,
}

impl AdjustedCreditsView {
    pub(crate) fn new(a: &AdjustedCredits) -> Self {
        Self {
            transaction: a
                .transaction
                .as_ref()
                .map(|t| TransactionView::new(t, Language::English)),
            balance: a.balance.to_string(),
            balance_hundredths: a.balance.hundredths(),
        }
    }
}

api_response! {
    /// `POST /api/admin/users/{id}/credits`.
    pub enum AdjustCreditsResponse {
        /// Adjusted (or, with a key used before for the same adjustment, already adjusted).
        200 Ok(Json<AdjustedCreditsView>),
    }
    problems {
        /// `bad_request`: the body is malformed or `Idempotency-Key` is missing or invalid.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `insufficient_credits`: a debit larger than the balance.
        402 PaymentRequired,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
        /// `idempotency_conflict`: the key was used for another adjustment.
        409 Conflict,
        /// `validation_failed`: amount, reason or expiresAt (named in `errors`).
        422 UnprocessableEntity,
    }
}

/// `expiresAt` as a timestamp.
pub(crate) fn parse_expiry(raw: Option<&str>) -> Result<Option<Timestamp>, Problem> {
    parse_time("expiresAt", raw)
}

/// A body's RFC 3339 time `field` as a timestamp; a malformed one is 422 naming the field.
pub(crate) fn parse_time(field: &str, raw: Option<&str>) -> Result<Option<Timestamp>, Problem> {
    raw.map(|text| {
        DateTime::parse_from_rfc3339(text.trim())
            .map(|d| Timestamp::from_unix_millis(d.timestamp_millis()))
            .map_err(|e| Problem::invalid_field(field, format!("not an RFC 3339 time: {e}")))
    })
    .transpose()
}

/// The problem for a refused adjustment.
pub(crate) fn adjust_problem(e: AdjustCreditsError) -> Problem {
    match e {
        AdjustCreditsError::UserNotFound => Problem::new(Code::UserNotFound, "no such user"),
        AdjustCreditsError::AccountNotFound => {
            Problem::new(Code::AccountNotFound, "no such account")
        }
        AdjustCreditsError::Invalid { field, message } => Problem::invalid_field(field, message),
        AdjustCreditsError::Insufficient {
            requested,
            available,
        } => Problem::insufficient(requested, available),
        AdjustCreditsError::IdempotencyConflict => {
            Problem::new(Code::IdempotencyConflict, e.to_string())
        }
        AdjustCreditsError::Infra(infra) => infra.into(),
    }
}
