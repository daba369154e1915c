//! Automatic top-up on PayPal: the buyer's PayPal account saved in PayPal's vault at a
//! consented checkout, and charged later by the merchant without the buyer.
//!
//! - Saving: the checkout's `POST /v2/checkout/orders` carries
//!   `payment_source.paypal.attributes.vault = {store_in_vault: ON_SUCCESS, usage_type:
//!   MERCHANT, customer_type: CONSUMER}` beside its `experience_context`; the buyer approves at
//!   the `payer-action` link, and when the capture succeeds PayPal saves the account: the capture
//!   answer shows `payment_source.paypal.attributes.vault {id, status: VAULTED, customer {id}}`
//!   and PayPal sends `VAULT.PAYMENT-TOKEN.CREATED`, whose resource is the payment token: `id`
//!   (the vault id), `customer.id`, `payment_source.paypal.email_address`
//!   (<https://developer.paypal.com/docs/checkout/save-payment-methods/during-purchase/orders-api/paypal>,
//!   <https://developer.paypal.com/checkout/save-customer-info>). Tally reads the method from that
//!   event; the event names the PayPal order it was saved on in `metadata.order_id`, which is the
//!   reference our order stores, and the order is read back (`GET /v2/checkout/orders/{id}`) so
//!   that its capture is reported before the method (a method is kept only with a paid order).
//!   A token event that names no order changes nothing.
//! - Charging: `POST /v2/checkout/orders` with `intent: CAPTURE`, one purchase unit carrying our
//!   order id in `custom_id` (as a checkout does, so that `PAYMENT.CAPTURE.COMPLETED` pays that
//!   order through the usual checks), and `payment_source.paypal.vault_id`, under
//!   `PayPal-Request-Id: topup-<key>`: PayPal answers a repeated request id with the first
//!   answer and charges once. PayPal creates and captures such an order at once (`COMPLETED`
//!   with its capture, which may be `PENDING`).
//! - Answers: a completed (or pending) capture is accepted, the credits come with
//!   `PAYMENT.CAPTURE.COMPLETED`; a capture `DECLINED` or `FAILED`, or a `422` naming a refused
//!   funding instrument (`INSTRUMENT_DECLINED`, `PAYER_CANNOT_PAY`, `TRANSACTION_REFUSED`, …), is
//!   a decline; `PAYER_ACTION_REQUIRED` (a `422` issue, or the order's status) means PayPal wants
//!   the buyer: nothing was captured, and the buyer is sent to a checkout instead
//!   (<https://developer.paypal.com/api/handle-payment-failures>,
//!   <https://developer.paypal.com/docs/api/orders/v2/>).

use application::ports::{GatewayError, OffSessionCharge, OrderLocator, SavedMethod};
use domain::{Money, Timestamp};
use serde::{Deserialize, Serialize};

use super::transformers::{
    Amount, CaptureOutcome, CaptureStatus, Order, OrderStatus, parse, path_segment,
};
use crate::shared::http::HttpReply;
use crate::shared::wire::{prefixed_key, printable};

/// What a top-up's `PayPal-Request-Id` starts with, so that it never meets a checkout's (our
/// order id) or a capture's (`capture-…`).
pub const REQUEST_ID_PREFIX: &str = "topup-";
/// The longest `PayPal-Request-Id` PayPal takes.
const MAX_REQUEST_ID_CHARS: usize = 108;
/// PayPal's `description` limit for a purchase unit.
const MAX_DESCRIPTION_CHARS: usize = 127;
/// The most characters of a decline reason kept.
const MAX_REASON_CHARS: usize = 200;
/// The longest e-mail address shown.
const MAX_EMAIL_CHARS: usize = 254;
/// The brand Tally shows for a saved PayPal account (the `payment_source` it came from).
pub const BRAND: &str = "paypal";
/// PayPal's issue when the buyer must come back to PayPal (approve again, pick another funding).
const PAYER_ACTION_REQUIRED: &str = "PAYER_ACTION_REQUIRED";
/// The `422` issues by which PayPal refuses a vaulted account's funding: declines.
const DECLINES: [&str; 8] = [
    "INSTRUMENT_DECLINED",
    "PAYER_CANNOT_PAY",
    "TRANSACTION_REFUSED",
    "PAYEE_BLOCKED_TRANSACTION",
    "MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED",
    "COMPLIANCE_VIOLATION",
    "PAYER_ACCOUNT_RESTRICTED",
    "PAYER_ACCOUNT_LOCKED_OR_CLOSED",
];
/// `422` issues that need the buyer back at PayPal: authentication required.
const NEEDS_PAYER: [&str; 2] = [
    PAYER_ACTION_REQUIRED,
    "REDIRECT_PAYER_FOR_ALTERNATE_FUNDING",
];

/// `payment_source.paypal.attributes` of a checkout whose buyer consented to keep the account.
#[derive(Debug, Clone, Serialize)]
pub struct Attributes {
    vault: VaultInstruction,
}

#[derive(Debug, Clone, Serialize)]
struct VaultInstruction {
    store_in_vault: &'static str,
    usage_type: &'static str,
    customer_type: &'static str,
}

impl Attributes {
    /// Save the account when the payment succeeds, for charges the merchant starts.
    #[must_use]
    pub fn save_for_merchant() -> Self {
        Self {
            vault: VaultInstruction {
                store_in_vault: "ON_SUCCESS",
                usage_type: "MERCHANT",
                customer_type: "CONSUMER",
            },
        }
    }
}

/// The `PayPal-Request-Id` of a top-up's charge.
///
/// # Errors
/// [`GatewayError::Rejected`] for an empty key, one with control characters, or one longer than
/// PayPal takes.
pub fn request_id(charge: &OffSessionCharge) -> Result<String, GatewayError> {
    prefixed_key(
        REQUEST_ID_PREFIX,
        &charge.idempotency_key,
        MAX_REQUEST_ID_CHARS,
    )
}

/// `POST /v2/checkout/orders` body of a top-up: the vaulted account charged at once.
#[derive(Debug, Serialize)]
pub struct VaultCharge<'a> {
    intent: &'static str,
    purchase_units: [ChargeUnit<'a>; 1],
    payment_source: ChargeSource<'a>,
}

#[derive(Debug, Serialize)]
struct ChargeUnit<'a> {
    reference_id: &'a str,
    custom_id: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    description: String,
    amount: Amount,
}

#[derive(Debug, Serialize)]
struct ChargeSource<'a> {
    paypal: VaultId<'a>,
}

#[derive(Debug, Serialize)]
struct VaultId<'a> {
    vault_id: &'a str,
}

impl<'a> VaultCharge<'a> {
    /// The charge of `charge`'s saved account.
    ///
    /// # Errors
    /// [`GatewayError::Rejected`] for a non-positive amount or a vault id PayPal cannot have
    /// issued.
    pub fn for_charge(charge: &'a OffSessionCharge) -> Result<Self, GatewayError> {
        if charge.amount.amount_minor() <= 0 {
            return Err(GatewayError::Rejected(
                "a top-up charges a positive amount".into(),
            ));
        }
        let vault_id = path_segment(&charge.method.method_ref)
            .ok_or_else(|| GatewayError::Rejected("not a paypal vault id".into()))?;
        let order_id = charge.order_id.as_str();
        Ok(Self {
            intent: "CAPTURE",
            purchase_units: [ChargeUnit {
                reference_id: order_id,
                custom_id: order_id,
                description: printable(charge.description.trim(), MAX_DESCRIPTION_CHARS),
                amount: Amount::from(charge.amount),
            }],
            payment_source: ChargeSource {
                paypal: VaultId { vault_id },
            },
        })
    }
}

/// What PayPal answered a top-up's charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeAnswer {
    /// Captured or capture pending: the payment event follows. PayPal's order id.
    Accepted(Option<String>),
    /// Refused, with PayPal's reason.
    Declined(String),
    /// PayPal wants the buyer back.
    NeedsPayer,
}

/// PayPal's error body, with each issue's description (for a decline's reason).
#[derive(Debug, Default, Deserialize)]
struct Refusal {
    #[serde(default)]
    details: Vec<Issue>,
}

#[derive(Debug, Default, Deserialize)]
struct Issue {
    #[serde(default)]
    issue: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

impl Refusal {
    fn issue_in(&self, issues: &[&str]) -> Option<&Issue> {
        self.details
            .iter()
            .find(|d| d.issue.as_deref().is_some_and(|i| issues.contains(&i)))
    }
}

/// Read the answer of a top-up's `POST /v2/checkout/orders`.
///
/// # Errors
/// Any other refusal as [`super::transformers::failure`] maps it (4xx
/// [`GatewayError::Rejected`]: an unknown vault id, a request id reused with another body;
/// 5xx [`GatewayError::Unreachable`]); an unreadable order [`GatewayError::BadResponse`].
pub fn read_charge(reply: &HttpReply, now: Timestamp) -> Result<ChargeAnswer, GatewayError> {
    if reply.status == 422 {
        let refusal: Refusal = serde_json::from_slice(&reply.body).unwrap_or_default();
        if refusal.issue_in(&NEEDS_PAYER).is_some() {
            return Ok(ChargeAnswer::NeedsPayer);
        }
        if let Some(issue) = refusal.issue_in(&DECLINES) {
            return Ok(ChargeAnswer::Declined(reason(issue)));
        }
    }
    if !(200..=299).contains(&reply.status) {
        return Err(super::transformers::failure(reply));
    }
    let order: Order = parse(reply, "top-up order")?;
    let id = path_segment(&order.id).map(str::to_owned);
    Ok(match order.status {
        OrderStatus::PayerActionRequired => ChargeAnswer::NeedsPayer,
        OrderStatus::Voided => ChargeAnswer::Declined("paypal voided the order".into()),
        OrderStatus::Completed => match order.capture().map(|c| c.status) {
            Some(CaptureStatus::Declined) => ChargeAnswer::Declined("capture declined".into()),
            Some(CaptureStatus::Failed) => ChargeAnswer::Declined("capture failed".into()),
            // A completed or pending capture (or one PayPal has not listed): the event follows.
            _ => match order.capture_outcome(now)? {
                CaptureOutcome::Declined { reason } => ChargeAnswer::Declined(reason),
                CaptureOutcome::Completed { .. } | CaptureOutcome::Pending => {
                    ChargeAnswer::Accepted(id)
                }
            },
        },
        // Created or approved and not captured yet: the reconciler captures an approved one.
        OrderStatus::Created
        | OrderStatus::Saved
        | OrderStatus::Approved
        | OrderStatus::Unknown => ChargeAnswer::Accepted(id),
    })
}

/// A decline in words: PayPal's issue and its description, printable and bounded.
fn reason(issue: &Issue) -> String {
    let code = issue.issue.as_deref().unwrap_or("INSTRUMENT_DECLINED");
    let words = match issue.description.as_deref().map(str::trim) {
        Some(description) if !description.is_empty() => format!("{code}: {description}"),
        _ => code.to_owned(),
    };
    printable(&words, MAX_REASON_CHARS)
}

/// `VAULT.PAYMENT-TOKEN.CREATED`'s resource: a payment token.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentToken {
    /// The vault id, charged as `payment_source.paypal.vault_id`.
    pub id: String,
    /// PayPal's customer the token belongs to.
    #[serde(default)]
    pub customer: Option<TokenCustomer>,
    /// What was saved.
    #[serde(default)]
    pub payment_source: Option<TokenSource>,
    /// The order the token was saved on, when PayPal names it.
    #[serde(default)]
    pub metadata: Option<TokenMetadata>,
}

/// `customer` of a payment token.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenCustomer {
    /// PayPal's customer id.
    pub id: String,
}

/// `payment_source` of a payment token; only a PayPal account is charged by top-ups here.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenSource {
    /// A PayPal account.
    #[serde(default)]
    pub paypal: Option<TokenPaypal>,
}

/// `payment_source.paypal` of a payment token.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenPaypal {
    /// The account's e-mail address.
    #[serde(default)]
    pub email_address: Option<String>,
}

/// `metadata` of a payment token.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenMetadata {
    /// PayPal's order id of the purchase that saved it.
    #[serde(default)]
    pub order_id: Option<String>,
}

/// A saved PayPal account and the PayPal order that saved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCreated {
    /// PayPal's order id (our order's provider reference).
    pub paypal_order_id: String,
    /// The method.
    pub method: SavedMethod,
}

impl PaymentToken {
    /// The saved account, when it is a PayPal account with a customer and names its order.
    #[must_use]
    pub fn created(&self) -> Option<TokenCreated> {
        let paypal = self.payment_source.as_ref()?.paypal.as_ref()?;
        let order = self.metadata.as_ref()?.order_id.as_deref()?;
        let customer = self.customer.as_ref().map(|c| c.id.as_str())?;
        let email = paypal
            .email_address
            .as_deref()
            .map(|e| printable(e.trim(), MAX_EMAIL_CHARS))
            .filter(|e| !e.is_empty());
        Some(TokenCreated {
            paypal_order_id: path_segment(order)?.to_owned(),
            method: SavedMethod {
                customer_ref: path_segment(customer)?.to_owned(),
                method_ref: path_segment(&self.id)?.to_owned(),
                brand: Some(BRAND.to_owned()),
                last4: None,
                wallet_account: email,
            },
        })
    }
}

/// What a saving order's capture came to, for the token event: the order's locator and, when
/// captured, what it paid and when.
#[must_use]
pub fn saving_order(order: &Order) -> OrderLocator {
    OrderLocator {
        order_id: order.our_order_id(),
        provider_reference: path_segment(&order.id).map(str::to_owned),
    }
}

/// The amount and time of a completed capture outcome.
#[must_use]
pub fn paid(outcome: &CaptureOutcome) -> Option<(Money, Timestamp)> {
    match outcome {
        CaptureOutcome::Completed {
            amount,
            captured_at,
            ..
        } => Some((*amount, *captured_at)),
        CaptureOutcome::Pending | CaptureOutcome::Declined { .. } => None,
    }
}

#[cfg(test)]
mod tests;
