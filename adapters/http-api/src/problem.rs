//! Problem details (RFC 9457): the one error body of the API, its stable codes, and the
//! translation of infrastructure and framework errors into it.
//!
//! Every error response is `application/problem+json` with `type`, `title`, `status`, `detail`
//! and a stable `code`. [`Code`] is the only table that ties a code to its default status and
//! title. A 5xx body never says anything about internals: its cause chain is logged once, here,
//! inside the request's span (which carries the request id).

use std::any::Any;
use std::error::Error as StdError;

use application::use_cases::InfraError;
use application::use_cases::manage_plans::FieldError;
use domain::Credits;
use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::Object;
use poem_openapi::payload::Json;

/// The media type of every error body.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Declares [`Code`] and its table: each code's wire name, default status and title, one row
/// per code (the one place that ties them together).
macro_rules! codes {
    ($($variant:ident => ($code:literal, $status:ident, $title:literal),)*) => {
        /// The stable error codes clients switch on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Code {
            $($variant,)*
        }

        impl Code {
            /// The code as clients see it.
            pub(crate) const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $code,)*
                }
            }

            /// The status this code is answered with unless a call site says otherwise.
            pub(crate) const fn status(self) -> StatusCode {
                match self {
                    $(Code::$variant => StatusCode::$status,)*
                }
            }

            /// A short summary of the problem type.
            const fn title(self) -> &'static str {
                match self {
                    $(Code::$variant => $title,)*
                }
            }
        }
    };
}

codes! {
    BadRequest => ("bad_request", BAD_REQUEST, "Bad request"),
    ValidationFailed => ("validation_failed", UNPROCESSABLE_ENTITY, "Validation failed"),
    InvalidPagination => ("invalid_pagination", BAD_REQUEST, "Invalid pagination"),
    InvalidCursor => ("invalid_cursor", BAD_REQUEST, "Invalid cursor"),
    Unauthorized => ("unauthorized", UNAUTHORIZED, "Not signed in"),
    InvalidCredentials => ("invalid_credentials", UNAUTHORIZED, "Wrong email address or password"),
    Forbidden => ("forbidden", FORBIDDEN, "Forbidden"),
    NotFound => ("not_found", NOT_FOUND, "Not found"),
    PlanNotFound => ("plan_not_found", NOT_FOUND, "Plan not found"),
    PlanNotAvailable => ("plan_not_available", UNPROCESSABLE_ENTITY, "Plan not available"),
    OrderNotFound => ("order_not_found", NOT_FOUND, "Order not found"),
    UserNotFound => ("user_not_found", NOT_FOUND, "User not found"),
    ReservationNotFound => ("reservation_not_found", NOT_FOUND, "Reservation not found"),
    ApiKeyNotFound => ("api_key_not_found", NOT_FOUND, "API key not found"),
    WebhookEndpointNotFound => ("webhook_endpoint_not_found", NOT_FOUND, "Webhook endpoint not found"),
    WebhookDeliveryNotFound => ("webhook_delivery_not_found", NOT_FOUND, "Webhook delivery or event not found"),
    WebhookEventNotFound => ("webhook_event_not_found", NOT_FOUND, "Recorded provider event not found"),
    NotReplayable => ("not_replayable", UNPROCESSABLE_ENTITY, "Recorded event cannot be replayed"),
    CancelNowNotSupported => ("cancel_now_not_supported", UNPROCESSABLE_ENTITY, "Provider cannot end a subscription at once"),
    InvalidWebhookUrl => ("invalid_webhook_url", UNPROCESSABLE_ENTITY, "Webhook URL not allowed"),
    UnknownEventType => ("unknown_event_type", UNPROCESSABLE_ENTITY, "Unknown event type"),
    TooManyWebhookEndpoints => ("too_many_webhook_endpoints", CONFLICT, "Too many webhook endpoints"),
    UnknownProvider => ("unknown_provider", UNPROCESSABLE_ENTITY, "Unknown payment provider"),
    MethodNotAllowed => ("method_not_allowed", METHOD_NOT_ALLOWED, "Method not allowed"),
    ProviderMismatch => ("provider_mismatch", UNPROCESSABLE_ENTITY, "Plan is sold through another provider"),
    ProviderNotSupported => ("provider_not_supported", UNPROCESSABLE_ENTITY, "Provider cannot sell this plan"),
    ProviderUnavailable => ("provider_unavailable", UNPROCESSABLE_ENTITY, "Provider not available"),
    ReturnUrlNotAllowed => ("return_url_not_allowed", UNPROCESSABLE_ENTITY, "Return URL not allowed"),
    NotCancellable => ("not_cancellable", CONFLICT, "Order cannot be cancelled"),
    SubscriptionNotFound => ("subscription_not_found", NOT_FOUND, "Subscription not found"),
    NotOwner => ("not_owner", FORBIDDEN, "Not the subscriber"),
    SubscriptionNotLive => ("subscription_not_live", CONFLICT, "Subscription is not active"),
    SamePlan => ("same_plan", CONFLICT, "Already on this plan"),
    DifferentPlanType => ("different_plan_type", CONFLICT, "Not a subscription plan"),
    DifferentCurrency => ("different_currency", CONFLICT, "Plan sells in another currency"),
    DifferentInterval => ("different_interval", CONFLICT, "Plan bills another interval"),
    NotSwitchable => ("not_switchable", CONFLICT, "Provider cannot switch or resume"),
    NotScheduledToEnd => ("not_scheduled_to_end", CONFLICT, "Subscription is not scheduled to end"),
    ChangeInProgress => ("change_in_progress", CONFLICT, "Another plan change is in progress"),
    NotRefundable => ("not_refundable", CONFLICT, "Order cannot be refunded"),
    RefundNotSupported => ("refund_not_supported", UNPROCESSABLE_ENTITY, "Provider has no refund API"),
    IdempotencyConflict => ("idempotency_conflict", CONFLICT, "Idempotency key reused with another request"),
    AlreadySubscribed => ("already_subscribed", CONFLICT, "Already subscribed"),
    AlreadyOwned => ("already_owned", CONFLICT, "Plan already owned"),
    EmailTaken => ("email_taken", CONFLICT, "Email address taken"),
    PlanExists => ("plan_exists", CONFLICT, "Plan exists"),
    ReservationResolved => ("reservation_resolved", CONFLICT, "Reservation already resolved"),
    InsufficientCredits => ("insufficient_credits", PAYMENT_REQUIRED, "Insufficient credits"),
    LimitReached => ("limit_reached", PAYMENT_REQUIRED, "Spend limit reached"),
    LimitNotFound => ("limit_not_found", NOT_FOUND, "Spend limit not found"),
    TooManyLimits => ("too_many_limits", UNPROCESSABLE_ENTITY, "Too many spend limits"),
    ThresholdNotFound => ("threshold_not_found", NOT_FOUND, "Balance threshold not found"),
    TooManyThresholds => ("too_many_thresholds", UNPROCESSABLE_ENTITY, "Too many balance thresholds"),
    NotAMember => ("not_a_member", FORBIDDEN, "Not a member of this account"),
    AccountNotFound => ("account_not_found", NOT_FOUND, "Account not found"),
    MemberNotFound => ("member_not_found", NOT_FOUND, "Member not found"),
    AlreadyMember => ("already_member", CONFLICT, "Already a member"),
    LastOwner => ("last_owner", CONFLICT, "The last owner stays"),
    HostManaged => ("host_managed", CONFLICT, "Members follow the host application's organisation"),
    InvitationNotFound => ("invitation_not_found", NOT_FOUND, "Invitation not found"),
    InvitationUsed => ("invitation_used", CONFLICT, "Invitation already accepted"),
    InvitationRevoked => ("invitation_revoked", CONFLICT, "Invitation revoked"),
    InvitationExpired => ("invitation_expired", GONE, "Invitation expired"),
    InvitationEmailMismatch => ("invitation_email_mismatch", FORBIDDEN, "Invitation is for another address"),
    PersonalAccount => ("personal_account", CONFLICT, "A personal account has no other members"),
    NotBillingManager => ("not_billing_manager", FORBIDDEN, "Only a team's owners and admins manage its billing"),
    SeatsExceeded => ("seats_exceeded", CONFLICT, "The team's seats are taken"),
    PromoCodeInvalid => ("promo_code_invalid", NOT_FOUND, "Promo code not valid"),
    PromoCodeExhausted => ("promo_code_exhausted", CONFLICT, "Promo code used up"),
    PromoCodeAlreadyRedeemed => ("promo_code_already_redeemed", CONFLICT, "Promo code already redeemed"),
    PromoCodeNotEligible => ("promo_code_not_eligible", FORBIDDEN, "Promo code not for this user"),
    PromoCodeExists => ("promo_code_exists", CONFLICT, "Promo code exists"),
    PromoCodeNotFound => ("promo_code_not_found", NOT_FOUND, "Promo code not found"),
    SaveMethodNotSupported => ("save_method_not_supported", UNPROCESSABLE_ENTITY, "The payment method cannot be saved for automatic top-up"),
    AutoTopUpPlanNotAllowed => ("auto_top_up_plan_not_allowed", UNPROCESSABLE_ENTITY, "This plan cannot be bought automatically"),
    PaymentMethodNotFound => ("payment_method_not_found", NOT_FOUND, "Saved payment method not found"),
    AutoTopUpConflict => ("auto_top_up_conflict", CONFLICT, "Automatic top-up changed meanwhile"),
    PayloadTooLarge => ("payload_too_large", PAYLOAD_TOO_LARGE, "Request body too large"),
    RequestHeaderFieldsTooLarge => ("request_header_fields_too_large", REQUEST_HEADER_FIELDS_TOO_LARGE, "Request header fields too large"),
    UriTooLong => ("uri_too_long", URI_TOO_LONG, "URI too long"),
    RateLimited => ("rate_limited", TOO_MANY_REQUESTS, "Too many requests"),
    InternalError => ("internal_error", INTERNAL_SERVER_ERROR, "Internal error"),
    ProviderError => ("provider_error", BAD_GATEWAY, "Payment provider failed"),
    ServiceUnavailable => ("service_unavailable", SERVICE_UNAVAILABLE, "Service temporarily unavailable"),
}

/// One field to correct.
#[derive(Debug, Clone, PartialEq, Eq, Object)]
#[oai(rename_all = "camelCase")]
pub struct FieldErrorView {
    /// The field, as the request spells it (`amount`, `duration.months`, `i18n.en.name`, …).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl From<&FieldError> for FieldErrorView {
    fn from(e: &FieldError) -> Self {
        Self {
            field: e.field.clone(),
            message: e.message.clone(),
        }
    }
}

/// An RFC 9457 problem: what went wrong, with a stable `code` and, for some codes, extension
/// members.
#[derive(Debug, Clone, Object)]
#[oai(rename = "Problem", rename_all = "camelCase")]
pub struct ProblemBody {
    /// A URI naming the problem type (`urn:tally:problem:<code>`).
    #[oai(rename = "type")]
    pub problem_type: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What happened in this case.
    pub detail: String,
    /// The stable code: `plan_not_found`, `insufficient_credits`, `validation_failed`, ….
    pub code: String,
    /// `validation_failed`: every field to correct.
    #[oai(skip_serializing_if_is_none)]
    pub errors: Option<Vec<FieldErrorView>>,
    /// `insufficient_credits`: the available balance (decimal string, two places).
    #[oai(skip_serializing_if_is_none)]
    pub available: Option<String>,
    /// `insufficient_credits`: the available balance in hundredths of a credit.
    #[oai(skip_serializing_if_is_none)]
    pub available_hundredths: Option<i64>,
    /// `insufficient_credits`: the cost asked for (decimal string, two places).
    #[oai(skip_serializing_if_is_none)]
    pub requested: Option<String>,
    /// `insufficient_credits`: the cost in hundredths of a credit.
    #[oai(skip_serializing_if_is_none)]
    pub requested_hundredths: Option<i64>,
    /// `rate_limited`: seconds to wait (also sent as `Retry-After`).
    #[oai(skip_serializing_if_is_none)]
    pub retry_after_seconds: Option<u64>,
    /// `limit_reached`: the limit that refused the spend.
    #[oai(skip_serializing_if_is_none)]
    pub limit: Option<LimitReachedView>,
    /// `seats_exceeded`: the seats the team holds (its plan's `seats` entitlement).
    #[oai(skip_serializing_if_is_none)]
    pub seats: Option<u64>,
}

/// `limit_reached`: which limit, what is left of it, and when it resets.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct LimitReachedView {
    /// Whose limit: `member` (a limit on the acting member of a team: their seat's own limit,
    /// without an `id`, or one listed by `GET /api/limits` with its `memberId`), `account` (a
    /// limit on the account, `GET /api/limits`) or `key` (a limit on the API key the spend was
    /// made with, also listed by `GET /api/limits`).
    pub scope: String,
    /// The id of a limit `GET /api/limits` lists.
    #[oai(skip_serializing_if_is_none)]
    pub id: Option<String>,
    /// The one feature the limit counts, if any.
    #[oai(skip_serializing_if_is_none)]
    pub feature: Option<String>,
    /// The one AI model the limit counts, if any.
    #[oai(skip_serializing_if_is_none)]
    pub model: Option<String>,
    /// The API key a `key` limit counts the spends of.
    #[oai(skip_serializing_if_is_none)]
    pub api_key_id: Option<String>,
    /// The member a listed `member` limit counts the spends of.
    #[oai(skip_serializing_if_is_none)]
    pub member_id: Option<String>,
    /// The most that may be spent in one window (decimal string, two places).
    pub credits: String,
    /// The same, in hundredths.
    pub credits_hundredths: i64,
    /// The window: `hour`, `day`, `week`, `month` (UTC calendar) or `rolling`.
    pub window: String,
    /// The hours of a rolling window.
    #[oai(skip_serializing_if_is_none)]
    pub rolling_hours: Option<u32>,
    /// What is left in the current window (decimal string).
    pub left: String,
    /// The same, in hundredths.
    pub left_hundredths: i64,
    /// When headroom next comes back (RFC 3339): the end of a calendar window; for a rolling
    /// window, when its oldest counted hour leaves it.
    pub resets_at: String,
}

/// A problem on its way out: the body (boxed: problems travel in `Result`s), and the status it
/// is answered with.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    status: StatusCode,
    body: Box<ProblemBody>,
}

impl Problem {
    /// A problem with the code's default status.
    pub(crate) fn new(code: Code, detail: impl Into<String>) -> Self {
        Self::with_status(code, code.status(), detail)
    }

    /// A problem with a status chosen by the call site (`validation_failed` as 400, say).
    pub(crate) fn with_status(code: Code, status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            body: Box::new(ProblemBody {
                problem_type: format!("urn:tally:problem:{}", code.as_str()),
                title: code.title().to_owned(),
                status: status.as_u16(),
                detail: detail.into(),
                code: code.as_str().to_owned(),
                errors: None,
                available: None,
                available_hundredths: None,
                requested: None,
                requested_hundredths: None,
                retry_after_seconds: None,
                limit: None,
                seats: None,
            }),
        }
    }

    /// `validation_failed` as a 400: the request itself is malformed.
    pub(crate) fn bad_input(detail: impl Into<String>) -> Self {
        Self::with_status(Code::ValidationFailed, StatusCode::BAD_REQUEST, detail)
    }

    /// `validation_failed` as a 422 for one field.
    pub(crate) fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        Self::invalid_fields(vec![FieldErrorView {
            field: field.to_owned(),
            message: message.into(),
        }])
    }

    /// `validation_failed` as a 422, listing every field to correct.
    pub(crate) fn invalid_fields(errors: Vec<FieldErrorView>) -> Self {
        let detail = match errors.as_slice() {
            [one] => format!("{} {}", one.field, one.message),
            _ => format!("{} fields are invalid", errors.len()),
        };
        let mut problem = Self::new(Code::ValidationFailed, detail);
        problem.body.errors = Some(errors);
        problem
    }

    /// `insufficient_credits`, with what was asked for and what is available.
    pub(crate) fn insufficient(requested: Credits, available: Credits) -> Self {
        let mut problem = Self::new(
            Code::InsufficientCredits,
            format!("this costs {requested} credits; {available} are available"),
        );
        problem.body.available = Some(available.to_string());
        problem.body.available_hundredths = Some(available.hundredths());
        problem.body.requested = Some(requested.to_string());
        problem.body.requested_hundredths = Some(requested.hundredths());
        problem
    }

    /// `seats_exceeded`: the team's members fill its `seats`.
    pub(crate) fn seats_exceeded(seats: u64) -> Self {
        let mut problem = Self::new(
            Code::SeatsExceeded,
            format!(
                "the team holds {seats} seats and its members fill them: remove a member or buy \
                 a plan with more seats"
            ),
        );
        problem.body.seats = Some(seats);
        problem
    }

    /// `limit_reached`: a hard limit (the member's or the account's) leaves less than the
    /// spend; which, what is left and when it resets.
    pub(crate) fn limit_reached(reached: &domain::LimitReached) -> Self {
        let window = match reached.window.rolling_hours() {
            Some(hours) => format!("{hours} hours"),
            None => reached.window.code().to_owned(),
        };
        let mut problem = Self::new(
            Code::LimitReached,
            format!(
                "this spend would pass the limit of {} credits per {window}: {} left until {}",
                reached.credits,
                reached.left,
                crate::dto::timestamp(reached.resets_at)
            ),
        );
        let none = domain::LimitScope::default();
        let (code, id, scope) = match &reached.owner {
            domain::LimitOwner::Member => ("member", None, &none),
            domain::LimitOwner::Account { id, scope } => {
                (scope.owner_code(), Some(id.to_string()), &**scope)
            }
        };
        problem.body.limit = Some(LimitReachedView {
            scope: code.into(),
            id,
            feature: scope.feature.clone(),
            model: scope.model.clone(),
            api_key_id: scope.api_key.clone(),
            member_id: scope.member.as_ref().map(ToString::to_string),
            credits: reached.credits.to_string(),
            credits_hundredths: reached.credits.hundredths(),
            window: reached.window.code().into(),
            rolling_hours: reached.window.rolling_hours(),
            left: reached.left.to_string(),
            left_hundredths: reached.left.hundredths(),
            resets_at: crate::dto::timestamp(reached.resets_at),
        });
        problem
    }

    /// `rate_limited`, retryable after `seconds`.
    pub(crate) fn rate_limited(seconds: u64) -> Self {
        Self::rate_limited_because(
            seconds,
            format!("too many requests from this client; retry in {seconds} s"),
        )
    }

    /// `rate_limited` with `detail` saying which limit: retry after `seconds`.
    pub(crate) fn rate_limited_because(seconds: u64, detail: String) -> Self {
        let mut problem = Self::new(Code::RateLimited, detail);
        problem.body.retry_after_seconds = Some(seconds);
        problem
    }

    /// The payment provider failed; `cause` is logged, never shown.
    pub(crate) fn provider_error(detail: &str, cause: &str) -> Self {
        tracing::error!(cause, "payment provider failed");
        Self::new(Code::ProviderError, detail)
    }

    /// An unexpected failure with its cause chain logged once.
    pub(crate) fn internal(cause: &(dyn StdError + 'static)) -> Self {
        tracing::error!(error = %error_chain(cause), "request failed");
        Self::new(Code::InternalError, "an unexpected error occurred")
    }

    /// The status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub(crate) fn code(&self) -> &str {
        &self.body.code
    }

    /// `Retry-After`, for `rate_limited`.
    pub(crate) fn retry_after_seconds(&self) -> Option<u64> {
        self.body.retry_after_seconds
    }

    /// The body, for an `ApiResponse` variant.
    pub(crate) fn into_json(self) -> Json<ProblemBody> {
        Json(*self.body)
    }
}

impl From<InfraError> for Problem {
    fn from(e: InfraError) -> Self {
        match &e {
            InfraError::Unavailable(_) => {
                tracing::error!(error = %error_chain(&e), "database unavailable");
                Problem::new(
                    Code::ServiceUnavailable,
                    "the service is temporarily unavailable; retry later",
                )
            }
            InfraError::Unexpected(_) => Problem::internal(&e),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let retry_after = self.body.retry_after_seconds;
        let status = self.status;
        let body = serde_json::to_vec(&poem_openapi::types::ToJSON::to_json(&*self.body))
            .unwrap_or_default();
        let mut builder = Response::builder()
            .status(status)
            .content_type(PROBLEM_CONTENT_TYPE);
        if let Some(seconds) = retry_after {
            builder = builder.header("retry-after", seconds);
        }
        builder.body(body)
    }
}

/// `error: cause: cause of cause`.
pub(crate) fn error_chain(e: &(dyn StdError + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The problem JSON for a request the HTTP server refuses before any endpoint sees it, because
/// it cannot parse the request head: its status, and the body as bytes. `None` for statuses the
/// server does not answer that way.
///
/// The server (hyper) answers 400 for bytes HTTP does not allow in the request line or a header
/// field (a NUL, a bare CR, another control character), 431 for more header fields than it
/// parses, and 414 for a URI longer than it reads; it sends no body, so the caller puts this
/// one in.
#[must_use]
pub fn unparsed_request_problem(status: u16) -> Option<Vec<u8>> {
    let problem = match status {
        400 => Problem::new(
            Code::BadRequest,
            "the request line or a header field could not be parsed: header names must be \
             tokens and header values visible ASCII, spaces or tabs; a NUL or another control \
             character is refused",
        ),
        431 => Problem::new(
            Code::RequestHeaderFieldsTooLarge,
            "the request's header fields are larger than the server reads",
        ),
        414 => Problem::new(
            Code::UriTooLong,
            "the request URI is longer than the server reads",
        ),
        _ => return None,
    };
    serde_json::to_vec(&poem_openapi::types::ToJSON::to_json(&*problem.body)).ok()
}

/// The answer to a request whose handler panicked (`CatchPanic`'s handler).
pub(crate) fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %message, "request handler panicked");
    Problem::new(Code::InternalError, "an unexpected error occurred").into_response()
}

/// Declares one endpoint's `ApiResponse` enum: its success variants as written, one
/// `application/problem+json` variant per listed error status, and always 500 and 503. A
/// [`Problem`] converts into the variant of its status.
macro_rules! api_response {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$ok_doc:meta])*
                $ok_status:literal $ok_variant:ident
                $( ( $( $(#[$field_meta:meta])* $field_ty:ty ),* ) )?
            ),* $(,)?
        }
        problems {
            $(
                $(#[$err_doc:meta])*
                $err_status:literal $err_variant:ident
            ),* $(,)?
        }
        $( rate_limited: $(#[$rl_doc:meta])* $rl_variant:ident )?
    ) => {
        $(#[$meta])*
        #[derive(poem_openapi::ApiResponse)]
        $vis enum $name {
            $(
                $(#[$ok_doc])*
                #[oai(status = $ok_status)]
                $ok_variant $( ( $( $(#[$field_meta])* $field_ty ),* ) )?,
            )*
            $(
                $(#[$err_doc])*
                #[oai(status = $err_status, content_type = "application/problem+json")]
                $err_variant(poem_openapi::payload::Json<$crate::problem::ProblemBody>),
            )*
            $(
                $(#[$rl_doc])*
                #[oai(status = 429, content_type = "application/problem+json")]
                $rl_variant(
                    poem_openapi::payload::Json<$crate::problem::ProblemBody>,
                    /// Seconds to wait before retrying.
                    #[oai(header = "Retry-After")] u64,
                ),
            )?
            /// `internal_error`: an unexpected failure (details are logged, never shown).
            #[oai(status = 500, content_type = "application/problem+json")]
            InternalError(poem_openapi::payload::Json<$crate::problem::ProblemBody>),
            /// `service_unavailable`: the database is down or busy; retry later.
            #[oai(status = 503, content_type = "application/problem+json")]
            ServiceUnavailable(poem_openapi::payload::Json<$crate::problem::ProblemBody>),
        }

        impl From<$crate::problem::Problem> for $name {
            fn from(problem: $crate::problem::Problem) -> Self {
                match problem.status().as_u16() {
                    $( $err_status => Self::$err_variant(problem.into_json()), )*
                    $(
                        429 => {
                            let seconds = problem.retry_after_seconds().unwrap_or(1);
                            Self::$rl_variant(problem.into_json(), seconds)
                        }
                    )?
                    503 => Self::ServiceUnavailable(problem.into_json()),
                    500 => Self::InternalError(problem.into_json()),
                    other => {
                        tracing::error!(
                            status = other,
                            code = problem.code(),
                            "a problem's status is not declared for this endpoint"
                        );
                        debug_assert!(false, "undeclared status {other} ({})", problem.code());
                        Self::InternalError(
                            $crate::problem::Problem::new(
                                $crate::problem::Code::InternalError,
                                "an unexpected error occurred",
                            )
                            .into_json(),
                        )
                    }
                }
            }
        }
    };
}

pub(crate) use api_response;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infrastructure_failures_are_503_or_500_and_never_show_their_cause() {
        let busy = Problem::from(InfraError::Unavailable(anyhow_like(
            "pool timed out at db-7",
        )));
        assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.code(), "service_unavailable");
        let broken = Problem::from(InfraError::Unexpected(anyhow_like("row 12 is corrupt")));
        assert_eq!(broken.status(), StatusCode::INTERNAL_SERVER_ERROR);
        for problem in [busy, broken] {
            let detail = problem.into_json().0.detail;
            assert!(
                !detail.contains("db-7") && !detail.contains("row 12"),
                "{detail}"
            );
        }
    }

    #[test]
    fn a_panic_becomes_a_500_problem() {
        let response = panic_response(Box::new("index out of bounds"));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(response.content_type(), Some(PROBLEM_CONTENT_TYPE));
    }

    #[test]
    fn every_code_has_a_distinct_snake_case_name_and_an_error_status() {
        let codes = [
            Code::BadRequest,
            Code::ValidationFailed,
            Code::InvalidPagination,
            Code::InvalidCursor,
            Code::Unauthorized,
            Code::InvalidCredentials,
            Code::Forbidden,
            Code::NotFound,
            Code::PlanNotFound,
            Code::PlanNotAvailable,
            Code::OrderNotFound,
            Code::UserNotFound,
            Code::ReservationNotFound,
            Code::ApiKeyNotFound,
            Code::WebhookEndpointNotFound,
            Code::WebhookDeliveryNotFound,
            Code::InvalidWebhookUrl,
            Code::UnknownEventType,
            Code::TooManyWebhookEndpoints,
            Code::UnknownProvider,
            Code::MethodNotAllowed,
            Code::ProviderMismatch,
            Code::ProviderNotSupported,
            Code::ProviderUnavailable,
            Code::ReturnUrlNotAllowed,
            Code::NotCancellable,
            Code::IdempotencyConflict,
            Code::AlreadySubscribed,
            Code::AlreadyOwned,
            Code::EmailTaken,
            Code::PlanExists,
            Code::ReservationResolved,
            Code::InsufficientCredits,
            Code::PayloadTooLarge,
            Code::RequestHeaderFieldsTooLarge,
            Code::UriTooLong,
            Code::RateLimited,
            Code::InternalError,
            Code::ProviderError,
            Code::ServiceUnavailable,
        ];
        let mut names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), codes.len());
        for code in codes {
            assert!(
                code.as_str()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
            );
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }

    #[test]
    fn the_servers_own_refusals_have_problem_bodies() {
        for (status, code) in [
            (400, "bad_request"),
            (431, "request_header_fields_too_large"),
            (414, "uri_too_long"),
        ] {
            let body = unparsed_request_problem(status).unwrap();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["code"], code);
            assert_eq!(json["status"], status);
        }
        assert!(unparsed_request_problem(500).is_none());
    }

    fn anyhow_like(message: &str) -> anyhow::Error {
        anyhow::anyhow!(message.to_owned())
    }
}
