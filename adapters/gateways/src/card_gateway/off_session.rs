//! Automatic top-up on Stripe: the card a buyer saved at checkout, charged later off-session.
//!
//! - Saving: a `payment`-mode Checkout Session with `payment_intent_data[setup_future_usage]=
//!   off_session` and `customer_creation=always` attaches the card to a new Customer when it is
//!   paid (<https://docs.stripe.com/payments/save-during-payment?payment-ui=stripe-hosted>,
//!   <https://docs.stripe.com/api/checkout/sessions/create>). Tally marks such a session with
//!   `metadata[saveMethod]=1`; its `checkout.session.completed` is followed by a read of the
//!   session's PaymentIntent (`GET /v1/payment_intents/{id}?expand[]=payment_method`) for
//!   `customer` and the card's `payment_method.card.brand/last4`.
//! - Charging: `POST /v1/payment_intents` with `customer`, `payment_method`, `off_session=true`
//!   and `confirm=true` (<https://docs.stripe.com/payments/save-during-payment?payment-ui=stripe-hosted#charge-saved-payment-method>,
//!   <https://docs.stripe.com/api/payment_intents/create>), `automatic_payment_methods[enabled]=
//!   true` with `allow_redirects=never` (a card charged without the buyer never redirects, and
//!   Stripe refuses to confirm without a `return_url` otherwise), our order id and the top-up
//!   marker in metadata, under `Idempotency-Key: topup-<key>`.
//! - Answers: `succeeded` and `processing` are accepted (the credits come with
//!   `payment_intent.succeeded`); a `402` `card_error` whose `code` (or `decline_code`) is
//!   `authentication_required` means the issuer wants the buyer present: the PaymentIntent the
//!   error carries is cancelled (`POST /v1/payment_intents/{id}/cancel`) and the buyer is sent to
//!   a checkout instead; any other `card_error` is a decline
//!   (<https://docs.stripe.com/declines/codes>, <https://docs.stripe.com/error-codes>).

use std::collections::BTreeMap;

use application::ports::{
    GatewayError, OffSessionCharge, OrderLocator, PaymentEvent, SavedMethod, WebhookError,
};
use domain::{OrderId, Timestamp};
use serde::Deserialize;

use super::transformers::{
    self, Expandable, ORDER_ID_KEY, PaymentError, currency_code, money, path_id,
};
use crate::shared::http::HttpReply;
use crate::shared::wire::{prefixed_key, printable};

/// The metadata key that marks a top-up's PaymentIntent; its value is the top-up's idempotency
/// key. Only a PaymentIntent carrying it pays an order by `payment_intent.succeeded`: a
/// Checkout Session's payment is reported by `checkout.session.completed`.
pub const TOP_UP_KEY: &str = "topUp";
/// The metadata key (value `1`) of a Checkout Session, and of its PaymentIntent, whose buyer
/// consented to keep the card for automatic top-ups.
pub const SAVE_METHOD_KEY: &str = "saveMethod";
/// The metadata key that carries the buyer's user id.
pub const USER_ID_KEY: &str = "userId";
/// What a top-up's `Idempotency-Key` starts with, so that it never meets a Checkout Session's
/// key (our order id) in Stripe's per-account key space.
pub const IDEMPOTENCY_PREFIX: &str = "topup-";
/// The longest `Idempotency-Key` Stripe takes.
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
/// The longest metadata value Stripe takes.
const MAX_METADATA_CHARS: usize = 500;
/// The most characters of a description sent (Stripe's limit on `description`).
const MAX_DESCRIPTION_CHARS: usize = 1000;
/// The most characters of a decline reason kept.
const MAX_REASON_CHARS: usize = 200;
/// Stripe's code for a card the issuer wants authenticated (3-D Secure).
const AUTHENTICATION_REQUIRED: &str = "authentication_required";

/// The `Idempotency-Key` of a top-up's charge.
///
/// # Errors
/// [`GatewayError::Rejected`] for an empty key or one longer than Stripe takes.
pub fn idempotency_key(charge: &OffSessionCharge) -> Result<String, GatewayError> {
    prefixed_key(
        IDEMPOTENCY_PREFIX,
        &charge.idempotency_key,
        MAX_IDEMPOTENCY_KEY_CHARS,
    )
}

/// The form of `POST /v1/payment_intents` for a top-up, in order. `notify_url` is sent only to
/// the sandbox, which cannot know the endpoint registered in a dashboard.
///
/// # Errors
/// [`GatewayError::Rejected`] for a non-positive amount or ids that are not Stripe ids.
pub fn charge_form(
    charge: &OffSessionCharge,
    notify_url: Option<&str>,
) -> Result<Vec<(String, String)>, GatewayError> {
    let amount = charge.amount.amount_minor();
    if amount <= 0 {
        return Err(GatewayError::Rejected(
            "a top-up charges a positive amount".into(),
        ));
    }
    let customer = path_id(&charge.method.customer_ref)?;
    let method = path_id(&charge.method.method_ref)?;
    let put = |form: &mut Vec<(String, String)>, key: &str, value: &str| {
        form.push((key.to_owned(), value.to_owned()));
    };
    let mut form = Vec::with_capacity(14);
    put(&mut form, "amount", &amount.to_string());
    put(
        &mut form,
        "currency",
        &currency_code(charge.amount.currency()),
    );
    put(&mut form, "customer", customer);
    put(&mut form, "payment_method", method);
    put(&mut form, "off_session", "true");
    put(&mut form, "confirm", "true");
    put(&mut form, "automatic_payment_methods[enabled]", "true");
    put(
        &mut form,
        "automatic_payment_methods[allow_redirects]",
        "never",
    );
    let description = printable(charge.description.trim(), MAX_DESCRIPTION_CHARS);
    if !description.is_empty() {
        put(&mut form, "description", &description);
    }
    put(&mut form, "metadata[orderId]", charge.order_id.as_str());
    put(&mut form, "metadata[userId]", charge.user_id.as_str());
    let marker = printable(&charge.idempotency_key, MAX_METADATA_CHARS);
    put(&mut form, "metadata[topUp]", &marker);
    if let Some(url) = notify_url {
        put(&mut form, "metadata[notifyUrl]", url);
    }
    Ok(form)
}

/// The form of `POST /v1/payment_intents/{id}/cancel`: the attempt is abandoned (the buyer
/// finishes the payment in a new checkout).
#[must_use]
pub fn cancel_form() -> Vec<(String, String)> {
    vec![("cancellation_reason".to_owned(), "abandoned".to_owned())]
}

/// `payment_intent.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    /// Paid.
    Succeeded,
    /// Accepted, the outcome comes later (some payment methods, a slow network).
    Processing,
    /// Authorized, waiting for a capture Tally never asks for.
    RequiresCapture,
    /// The buyer must act (3-D Secure).
    RequiresAction,
    /// Not confirmed yet.
    RequiresConfirmation,
    /// Failed; another method may be tried.
    RequiresPaymentMethod,
    /// Cancelled.
    Canceled,
    /// Anything Stripe adds later.
    #[serde(other)]
    Unknown,
}

/// A PaymentIntent, as a top-up's answer, its events and the saved-method read show it.
#[derive(Debug, Clone, Deserialize)]
pub struct Intent {
    /// `pi_…`.
    pub id: String,
    /// Where it is.
    pub status: IntentStatus,
    /// What was received, minor units.
    #[serde(default)]
    pub amount_received: Option<i64>,
    /// Lower-case currency code.
    #[serde(default)]
    pub currency: Option<String>,
    /// The Customer the payment method belongs to.
    #[serde(default)]
    pub customer: Option<Expandable>,
    /// The payment method, as an id or expanded (`expand[]=payment_method`).
    #[serde(default)]
    pub payment_method: Option<MethodOrId>,
    /// Metadata: our order id, the top-up marker.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Why the last attempt failed.
    #[serde(default)]
    pub last_payment_error: Option<PaymentError>,
}

/// A payment method id, or the method when expanded.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MethodOrId {
    /// The id.
    Id(String),
    /// The expanded method.
    Method(PaymentMethod),
}

/// A payment method, as far as showing it needs.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentMethod {
    /// `pm_…`.
    pub id: String,
    /// A card's details, for `type: card`.
    #[serde(default)]
    pub card: Option<Card>,
}

/// `payment_method.card`.
#[derive(Debug, Clone, Deserialize)]
pub struct Card {
    /// `visa`, `mastercard`, ….
    #[serde(default)]
    pub brand: Option<String>,
    /// The last four digits.
    #[serde(default)]
    pub last4: Option<String>,
}

impl Intent {
    /// The method the PaymentIntent saved: its Customer and payment method, with the card's
    /// brand and last four digits when the method came expanded; `None` without either id.
    #[must_use]
    pub fn saved_method(&self) -> Option<SavedMethod> {
        let customer = self.customer.as_ref().map(Expandable::id)?;
        let (method_ref, card) = match self.payment_method.as_ref()? {
            MethodOrId::Id(id) => (id.as_str(), None),
            MethodOrId::Method(method) => (method.id.as_str(), method.card.as_ref()),
        };
        let (customer, method_ref) = (path_id(customer).ok()?, path_id(method_ref).ok()?);
        let shown = |text: Option<&String>, max: usize| {
            text.map(|t| printable(t.trim(), max))
                .filter(|t| !t.is_empty())
        };
        Some(SavedMethod {
            customer_ref: customer.to_owned(),
            method_ref: method_ref.to_owned(),
            brand: shown(card.and_then(|c| c.brand.as_ref()), 32),
            last4: shown(card.and_then(|c| c.last4.as_ref()), 4),
            wallet_account: None,
        })
    }

    /// Whether it is a top-up's (it carries the marker).
    #[must_use]
    pub fn is_top_up(&self) -> bool {
        is_top_up(&self.metadata)
    }

    /// Where a top-up's charge stands, for the reconciler (a lost `payment_intent.succeeded`):
    /// succeeded with what it received, failed once cancelled or back to needing a method,
    /// pending otherwise.
    ///
    /// # Errors
    /// [`GatewayError::BadResponse`] for a succeeded PaymentIntent without a readable amount.
    pub fn payment_status(
        &self,
        now: Timestamp,
    ) -> Result<application::ports::PaymentStatus, GatewayError> {
        use application::ports::PaymentStatus;
        Ok(match self.status {
            IntentStatus::Succeeded => {
                let amount = self.received().map_err(GatewayError::BadResponse)?;
                PaymentStatus::Succeeded {
                    amount,
                    paid_at: now,
                }
            }
            IntentStatus::Canceled => PaymentStatus::Failed {
                reason: "payment canceled".into(),
            },
            IntentStatus::RequiresPaymentMethod => PaymentStatus::Failed {
                reason: "payment declined".into(),
            },
            _ => PaymentStatus::Pending,
        })
    }

    /// What it received.
    fn received(&self) -> Result<domain::Money, String> {
        match (self.amount_received, self.currency.as_deref()) {
            (Some(received), Some(currency)) => money(received, currency),
            _ => Err("payment intent has no amount_received or currency".into()),
        }
    }

    fn order_id(&self) -> Option<OrderId> {
        self.metadata
            .get(ORDER_ID_KEY)
            .and_then(|id| OrderId::new(id.as_str()).ok())
    }
}

/// Whether metadata carries the top-up marker.
#[must_use]
pub fn is_top_up(metadata: &BTreeMap<String, String>) -> bool {
    metadata.get(TOP_UP_KEY).is_some_and(|k| !k.is_empty())
}

/// Whether a failed attempt failed because the issuer wants the buyer to authenticate.
#[must_use]
pub fn needs_authentication(error: Option<&PaymentError>) -> bool {
    error.is_some_and(|e| asks_authentication(e.code.as_deref(), e.decline_code.as_deref()))
}

/// Whether Stripe's `code` or the issuer's `decline_code` is `authentication_required` (Stripe
/// sets both for a card that needs 3-D Secure off-session).
fn asks_authentication(code: Option<&str>, decline_code: Option<&str>) -> bool {
    [code, decline_code].contains(&Some(AUTHENTICATION_REQUIRED))
}

/// `payment_intent.succeeded` of a top-up pays its order (`metadata.orderId`) what it received;
/// any other PaymentIntent is a Checkout Session's, whose payment
/// `checkout.session.completed` reports, and means nothing here.
///
/// # Errors
/// [`WebhookError::Malformed`] for a top-up's PaymentIntent without a readable amount.
pub fn intent_succeeded(intent: &Intent, at: Timestamp) -> Result<Vec<PaymentEvent>, WebhookError> {
    let Some(order_id) = intent.order_id().filter(|_| intent.is_top_up()) else {
        return Ok(Vec::new());
    };
    let amount = intent.received().map_err(WebhookError::Malformed)?;
    Ok(vec![PaymentEvent::PaymentSucceeded {
        order: OrderLocator {
            order_id: Some(order_id),
            provider_reference: Some(intent.id.clone()),
        },
        amount,
        occurred_at: at,
    }])
}

/// What Stripe answered a top-up's charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeAnswer {
    /// Succeeded or processing: the payment event follows. The PaymentIntent's id.
    Accepted(Option<String>),
    /// Declined, with Stripe's reason.
    Declined(String),
    /// The issuer wants the buyer present: the PaymentIntent to cancel, when Stripe named it.
    NeedsAuthentication(Option<String>),
}

/// Stripe's error body, as far as a charge's answer needs it.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    decline_code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    /// The PaymentIntent the failed request created or touched.
    #[serde(default)]
    payment_intent: Option<ErrorIntent>,
}

#[derive(Debug, Deserialize)]
struct ErrorIntent {
    id: String,
    #[serde(default)]
    status: Option<IntentStatus>,
}

/// A 4xx body in Stripe's error shape, if it is one.
fn error_of(reply: &HttpReply) -> Option<ErrorDetail> {
    if !(400..500).contains(&reply.status) {
        return None;
    }
    serde_json::from_slice::<ErrorBody>(&reply.body)
        .ok()
        .map(|body| body.error)
}

/// Read the answer of `POST /v1/payment_intents`.
///
/// # Errors
/// As [`transformers::read`] maps a failure that is no card error: 4xx
/// [`GatewayError::Rejected`] (an unknown customer or method, an idempotency key reused with
/// other parameters), 5xx [`GatewayError::Unreachable`], an unreadable body
/// [`GatewayError::BadResponse`].
pub fn read_charge(reply: HttpReply) -> Result<ChargeAnswer, GatewayError> {
    if let Some(error) = error_of(&reply).filter(|e| e.kind == "card_error") {
        if asks_authentication(error.code.as_deref(), error.decline_code.as_deref()) {
            let intent = error.payment_intent.map(|i| i.id);
            return Ok(ChargeAnswer::NeedsAuthentication(
                intent.filter(|id| path_id(id).is_ok()),
            ));
        }
        return Ok(ChargeAnswer::Declined(reason(
            error.code.as_deref(),
            error.decline_code.as_deref(),
            error.message.as_deref(),
        )));
    }
    let intent: Intent = transformers::read(reply)?;
    Ok(match intent.status {
        IntentStatus::RequiresAction | IntentStatus::RequiresConfirmation => {
            ChargeAnswer::NeedsAuthentication(Some(intent.id).filter(|id| path_id(id).is_ok()))
        }
        IntentStatus::RequiresPaymentMethod => {
            let error = intent.last_payment_error.as_ref();
            if needs_authentication(error) {
                ChargeAnswer::NeedsAuthentication(Some(intent.id).filter(|id| path_id(id).is_ok()))
            } else {
                ChargeAnswer::Declined(reason(
                    error.and_then(|e| e.code.as_deref()),
                    error.and_then(|e| e.decline_code.as_deref()),
                    error.and_then(|e| e.message.as_deref()),
                ))
            }
        }
        IntentStatus::Canceled => ChargeAnswer::Declined("payment canceled".into()),
        // Credits come only with the payment event; a status Stripe adds later waits for it.
        IntentStatus::Succeeded
        | IntentStatus::Processing
        | IntentStatus::RequiresCapture
        | IntentStatus::Unknown => {
            ChargeAnswer::Accepted(Some(intent.id).filter(|id| path_id(id).is_ok()))
        }
    })
}

/// Read the answer of `POST /v1/payment_intents/{id}/cancel`: cancelled, or cancelled already
/// (a retried top-up cancels the same PaymentIntent again).
///
/// # Errors
/// As [`transformers::read`] maps any other failure.
pub fn read_cancel(reply: HttpReply) -> Result<(), GatewayError> {
    let already = error_of(&reply).is_some_and(|e| {
        e.code.as_deref() == Some("payment_intent_unexpected_state")
            && e.payment_intent
                .as_ref()
                .is_some_and(|i| i.status == Some(IntentStatus::Canceled))
    });
    if already {
        return Ok(());
    }
    let _: Intent = transformers::read(reply)?;
    Ok(())
}

/// Read the answer of `POST /v1/payment_methods/{pm}/detach`
/// (<https://docs.stripe.com/api/payment_methods/detach>): the detached PaymentMethod. A
/// method Stripe does not know (404, `resource_missing`) is forgotten already.
///
/// # Errors
/// As [`transformers::read`]: another 4xx [`GatewayError::Rejected`], 5xx
/// [`GatewayError::Unreachable`], an unreadable body [`GatewayError::BadResponse`].
pub fn read_detach(reply: HttpReply) -> Result<(), GatewayError> {
    let missing = reply.status == 404
        || error_of(&reply).is_some_and(|e| e.code.as_deref() == Some("resource_missing"));
    if missing {
        return Ok(());
    }
    let _: DetachedMethod = transformers::read(reply)?;
    Ok(())
}

/// The PaymentMethod `detach` answers; only its id is read, to know the answer is one.
#[derive(Debug, Deserialize)]
struct DetachedMethod {
    #[serde(rename = "id")]
    _id: String,
}

/// A decline in words: the issuer's `decline_code` (else Stripe's `code`) and Stripe's message,
/// at most [`MAX_REASON_CHARS`] printable characters. Stripe's errors carry no card number or
/// key.
fn reason(code: Option<&str>, decline_code: Option<&str>, message: Option<&str>) -> String {
    let code = decline_code
        .or(code)
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or("card_declined");
    let words = match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(message) => format!("{code}: {message}"),
        None => code.to_owned(),
    };
    printable(&words, MAX_REASON_CHARS)
}

#[cfg(test)]
mod tests;
