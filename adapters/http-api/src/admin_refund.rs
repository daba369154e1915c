//! `POST /api/admin/orders/{orderId}/refund`: an administrator refunds a paid order, fully or in
//! part, through its provider's refund API (issue 15). The answer is 202: the provider's refund
//! event completes the refund through the webhook path, once; a refund the provider reports done
//! at once is applied before the answer.

use application::ports::RefundState;
use application::use_cases::refund_order::{RefundAccepted, RefundOrderError};
use poem_openapi::Object;
use poem_openapi::payload::Json;
use rust_decimal::Decimal;

use crate::dto::{OrderView, major_units};
use crate::problem::{Code, Problem, api_response};

/// What to refund.
#[derive(Debug, Clone, Default, Object)]
#[oai(rename_all = "camelCase")]
pub struct RefundBody {
    /// How much, in major units of the order's currency (`4.00`); everything not yet refunded
    /// when absent.
    #[oai(skip_serializing_if_is_none)]
    pub amount: Option<Decimal>,
    /// Why; sent to the provider where its refund API takes a reason.
    #[oai(default, validator(max_length = 200))]
    pub reason: String,
}

/// A refund the provider accepted.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct RefundView {
    /// Our refund id: the order and the refunded total asked for, sent to the provider as its
    /// idempotency key (asking again refunds once).
    pub refund_id: String,
    /// The provider's refund id, when it gave one.
    #[oai(skip_serializing_if_is_none)]
    pub provider_refund_id: Option<String>,
    /// `pending` (the provider's refund event completes it) or `succeeded` (applied already).
    pub state: String,
    /// Why the provider failed it, when it did.
    #[oai(skip_serializing_if_is_none)]
    pub failure: Option<String>,
    /// The amount refunded, in major units (decimal string).
    pub amount: String,
    /// The amount in minor units.
    pub amount_minor: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The order as it stands now.
    pub order: OrderView,
}

impl From<&RefundAccepted> for RefundView {
    fn from(r: &RefundAccepted) -> Self {
        let (state, failure) = match &r.state {
            RefundState::Pending => ("pending", None),
            RefundState::Succeeded => ("succeeded", None),
            RefundState::Failed(why) => ("failed", Some(why.clone())),
        };
        Self {
            refund_id: r.refund_id.clone(),
            provider_refund_id: r.provider_refund_id.clone(),
            state: state.to_owned(),
            failure,
            amount: major_units(r.amount),
            amount_minor: r.amount.amount_minor(),
            currency: r.amount.currency().code().to_owned(),
            order: (&r.order).into(),
        }
    }
}

api_response! {
    /// `POST /api/admin/orders/{orderId}/refund`.
    pub enum RefundResponse {
        /// The provider accepted the refund.
        202 Accepted(Json<RefundView>),
    }
    problems {
        /// `bad_request`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `order_not_found`.
        404 NotFound,
        /// `not_refundable`: the order was never paid, or is refunded already.
        409 Conflict,
        /// `validation_failed` (field `amount`), `provider_unavailable`, or
        /// `refund_not_supported` (the provider's API has no refund: refund in its dashboard).
        422 UnprocessableEntity,
        /// `provider_error`: the provider refused or failed; nothing changed.
        502 BadGateway,
    }
}

/// The problem for a refund that could not be asked for.
pub(crate) fn refund_problem(e: RefundOrderError) -> Problem {
    match e {
        RefundOrderError::NotFound => Problem::new(Code::OrderNotFound, "no such order"),
        RefundOrderError::NotRefundable(_) => Problem::new(Code::NotRefundable, e.to_string()),
        RefundOrderError::InvalidAmount(message) => Problem::invalid_field("amount", message),
        RefundOrderError::ProviderUnavailable(_) => {
            Problem::new(Code::ProviderUnavailable, e.to_string())
        }
        RefundOrderError::NotSupported(_) => Problem::new(Code::RefundNotSupported, e.to_string()),
        RefundOrderError::Gateway(cause) => {
            Problem::provider_error("the payment provider refused or failed the refund", &cause)
        }
        RefundOrderError::Infra(infra) => infra.into(),
    }
}
