//! Stripe's PaymentIntents as the sandbox simulates them for automatic top-up: a card saved at
//! checkout and charged later off-session.
//!
//! Saving: a `payment`-mode session created with `customer_creation=always` gets a Customer
//! (`cus_` and the session id's rest) when it is paid; with
//! `payment_intent_data[setup_future_usage]` (`off_session` or `on_session`) too, its card
//! (`pm_` and the same rest, a Visa ending 4242) is attached to that Customer and kept in the
//! hub as a [`SimMethod`]. The completed session names the Customer, and
//! `GET /v1/payment_intents/{pi}` (the session's `payment_intent`) shows `customer` and the
//! `payment_method`, expanded with `card.brand`/`card.last4` on `expand[]=payment_method`.
//!
//! Charging: `POST /v1/payment_intents` creates a PaymentIntent confirmed at once (`confirm=
//! true`, `off_session=true`; the sandbox simulates nothing else), and checks what Stripe
//! checks: known parameters only, a positive integer `amount`, a known `currency`, a
//! `return_url` unless `automatic_payment_methods[allow_redirects]=never` (or
//! `payment_method_types`), a known PaymentMethod (`400 resource_missing`, param
//! `payment_method`), a known Customer (`400 resource_missing`, param `customer`) that the
//! method belongs to, metadata values of at most 500 characters. An `Idempotency-Key` answers
//! the same request again with the first answer, status and body, byte for byte
//! (`Idempotent-Replayed: true`), and charges nothing more; the same key with other parameters,
//! or first used for a Checkout Session, is refused with `400 idempotency_error`. A request
//! refused by those checks is not kept under its key, as at Stripe.
//!
//! What the charge does is the method's [`SimBehaviour`] (set by a test through
//! `/sandbox/api/payment-methods/{id}/behaviour`): `succeed` answers `succeeded` and sends
//! `payment_intent.succeeded`; `duplicate_webhook` sends that event twice (one event id);
//! `late_webhook` holds it back until `/sandbox/api/payments/{pi}/redeliver`; `slow` answers
//! `processing` and sends nothing until `/sandbox/api/payments/{pi}/settle`; `decline` answers
//! `402` `card_error` `card_declined` (`generic_decline`) and `authentication_required` answers
//! `402` `card_error` `authentication_required`, both with the PaymentIntent in
//! `requires_payment_method` in `error.payment_intent`, and both send
//! `payment_intent.payment_failed`, as Stripe does for a failed off-session confirmation
//! (<https://docs.stripe.com/payments/save-during-payment?payment-ui=stripe-hosted#charge-saved-payment-method>).
//! `POST /v1/payment_intents/{id}/cancel` cancels one that is not paid (`canceled`, and
//! `payment_intent.canceled`), and refuses any other with `400
//! payment_intent_unexpected_state`. A paid one is refunded through `POST /v1/refunds`, and its
//! charge (`ch_` and the PaymentIntent id's rest) carries the PaymentIntent's metadata, as
//! Stripe copies it.
//!
//! Forgetting: `POST /v1/payment_methods/{pm}/detach`
//! (<https://docs.stripe.com/api/payment_methods/detach>) detaches a saved card from its
//! Customer and answers the PaymentMethod with `customer: null`; an unknown one is `404
//! resource_missing`, one detached already `400` (not attached to a customer). A detached card
//! "is no longer usable for payments": charging it is refused with `400 invalid_request_error`,
//! param `payment_method` (it may not be used again).

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use domain::{Currency, ProviderId};
use poem::http::{HeaderValue, StatusCode};
use poem::web::{Data, Json, Path};
use poem::{IntoResponse, Request, Response, handler};
use serde_json::{Value, json};

use super::objects::{self, StripeError, error, missing, missing_param, seconds};
use super::{
    CardGatewaySimulator, MAX_FIELDS, authorized, bad, form, idempotency_key, nested, sign,
    unauthorized,
};
use crate::hub::{
    Hub, SandboxError, SimBehaviour, SimEvent, SimKind, SimMethod, SimPayment, SimStatus,
};
use crate::simulator::Simulator;

/// `extra` key: the behaviour the charged method had, which decides the webhooks.
const BEHAVIOUR: &str = "behaviour";
/// `extra` key: `description`.
const DESCRIPTION: &str = "description";
/// `extra` key: `last_payment_error`, as JSON.
const LAST_ERROR: &str = "lastPaymentError";
/// `extra` key: the creating request's parameters, as JSON: what an idempotent retry must send.
const REQUEST: &str = "request";
/// `extra` key: the first answer's HTTP status.
const ANSWER_STATUS: &str = "answerStatus";
/// `extra` key: the first answer's body.
const ANSWER: &str = "answer";
/// `extra` key: `cancellation_reason`.
const CANCELLATION_REASON: &str = "cancellationReason";
/// `extra` key: `canceled_at`, seconds.
const CANCELED_AT: &str = "canceledAt";
/// The card every sandbox checkout saves: Stripe's test Visa.
const CARD_BRAND: &str = "visa";
const CARD_LAST4: &str = "4242";
/// The parameters `POST /v1/payment_intents` takes here, besides `metadata[…]` and
/// `payment_method_types[…]`.
const KNOWN: [&str; 10] = [
    "amount",
    "currency",
    "customer",
    "payment_method",
    "off_session",
    "confirm",
    "description",
    "return_url",
    "automatic_payment_methods[enabled]",
    "automatic_payment_methods[allow_redirects]",
];
/// The longest metadata value Stripe takes.
const MAX_METADATA_CHARS: usize = 500;
/// Stripe's `cancellation_reason`s.
const CANCELLATION_REASONS: [&str; 4] = [
    "duplicate",
    "fraudulent",
    "requested_by_customer",
    "abandoned",
];
/// Stripe's refusal to confirm without a `return_url` when redirect-based methods are allowed.
const RETURN_URL_REQUIRED: &str = "A `return_url` must be specified because this Payment Intent is configured to automatically accept the payment methods enabled in the Dashboard, some of which may require a full page redirect to succeed. If you do not want to accept redirect-based payment methods, set `automatic_payment_methods[enabled]` to `true` and `automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents.";

/// Whether a payment is an off-session PaymentIntent (a top-up's), not a Checkout Session.
pub(super) fn is_intent(payment: &SimPayment) -> bool {
    payment.id.starts_with("pi_")
}

/// An off-session PaymentIntent of this provider.
fn own_intent(hub: &Hub, id: &str) -> Option<SimPayment> {
    hub.payment(id)
        .filter(|p| p.provider == ProviderId::CardGateway && is_intent(p))
}

/// A paid off-session PaymentIntent, for its charge.
pub(super) fn paid_intent(hub: &Hub, id: &str) -> Option<SimPayment> {
    own_intent(hub, id).filter(|p| p.status == SimStatus::Paid)
}

/// Stripe's checks on a session's saving parameters.
pub(super) fn check_saving(form: &BTreeMap<String, String>) -> Result<(), StripeError> {
    let usage = "payment_intent_data[setup_future_usage]";
    if let Some(value) = form.get(usage)
        && !["on_session", "off_session"].contains(&value.as_str())
    {
        return Err(bad(
            &format!("Invalid {usage}: must be one of on_session or off_session"),
            usage,
        ));
    }
    if let Some(value) = form.get("customer_creation")
        && !["always", "if_required"].contains(&value.as_str())
    {
        return Err(bad(
            "Invalid customer_creation: must be one of if_required or always",
            "customer_creation",
        ));
    }
    Ok(())
}

/// The card of a session: `pm_` and the session id's rest.
fn method_id(session: &SimPayment) -> String {
    format!("pm_{}", session.id.trim_start_matches("cs_"))
}

/// The buyer pays a session that asked for a Customer (`customer_creation=always`): the
/// Customer is created, and with `setup_future_usage` the card is attached to it and kept.
/// Nothing for any other payment, or one no longer open.
pub(super) fn save_card(hub: &Hub, session_id: &str) {
    let Some(session) = hub.payment(session_id).filter(|p| {
        !is_intent(p) && p.status == SimStatus::Open && matches!(p.kind, SimKind::OneTime)
    }) else {
        return;
    };
    if session
        .extra
        .get(objects::CUSTOMER_CREATION)
        .map(String::as_str)
        != Some("always")
    {
        return;
    }
    let customer = objects::customer_id(&session);
    let method = method_id(&session);
    let saves = session.extra.contains_key(objects::SETUP_FUTURE_USAGE);
    let created = hub.update_payment(session_id, |p| {
        if p.status != SimStatus::Open {
            return Ok(false);
        }
        p.extra
            .insert(objects::CUSTOMER.to_owned(), customer.clone());
        if saves {
            p.extra
                .insert(objects::PAYMENT_METHOD.to_owned(), method.clone());
        }
        Ok(true)
    });
    if saves && matches!(created, Ok(true)) {
        hub.save_method(SimMethod {
            id: method,
            provider: ProviderId::CardGateway,
            customer_id: customer,
            brand: Some(CARD_BRAND.to_owned()),
            last4: Some(CARD_LAST4.to_owned()),
            wallet_account: None,
            order_id: session.order_id,
            payment_id: session.id,
            next: SimBehaviour::default(),
            forgotten_at_ms: None,
            created_at_ms: hub.now_ms(),
        });
    }
}

/// `400 idempotency_error`: the key was first used on another endpoint.
pub(super) fn other_endpoint(key: &str, first: &str, now: &str) -> StripeError {
    let key: String = key.chars().take(64).collect();
    error(
        StatusCode::BAD_REQUEST,
        &format!(
            "Keys for idempotent requests can only be used for the same endpoint they were first used for ('{first}' vs '{now}'). Try using a key other than '{key}' if you meant to execute a different request."
        ),
        None,
    )
    .with_type("idempotency_error")
}

/// A charge's parts, checked.
struct Charge {
    amount_minor: i64,
    currency: Currency,
    method: SimMethod,
    metadata: BTreeMap<String, String>,
    notify_url: String,
}

/// `POST /v1/payment_intents`: a saved card charged off-session, confirmed at once.
#[handler]
pub(super) async fn create_payment_intent(
    request: &Request,
    body: Vec<u8>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let parts = idempotency_key(request).and_then(|key| Ok((key, form(request, &body)?)));
    let (key, form) = match parts {
        Ok(parts) => parts,
        Err(refusal) => return refusal.into_response(),
    };
    if let Some(key) = key.as_deref()
        && let Some(first) = super::replayed(&hub, key)
    {
        return replay(&first, &form, key);
    }
    let charge = match read_charge(&hub, &form) {
        Ok(charge) => charge,
        Err(refusal) => return refusal.into_response(),
    };
    let intent = new_intent(&hub, &form, charge, key.as_deref());
    let fields = ["return_url", "return_url", "metadata[notifyUrl]"];
    let stored = match key.as_deref() {
        Some(key) => hub
            .insert_payment_once(intent.clone(), fields, (objects::IDEMPOTENCY_KEY, key))
            .map(|first| first.map(|first| (first, key))),
        None => hub.insert_payment(intent.clone(), fields).map(|()| None),
    };
    match stored {
        Err(foreign) => return bad(&foreign.to_string(), foreign.field).into_response(),
        // The same key sent at the same time: the first request's answer.
        Ok(Some((first, key))) => return replay(&first, &form, key),
        Ok(None) => {}
    }
    tell(&hub, &intent).await;
    answer(&intent)
}

/// A request sent again under a key that already holds an answer.
fn replay(first: &SimPayment, form: &BTreeMap<String, String>, key: &str) -> Response {
    if !is_intent(first) {
        return other_endpoint(key, "/v1/checkout/sessions", "/v1/payment_intents").into_response();
    }
    if first.extra.get(REQUEST) != Some(&fingerprint(form)) {
        let key: String = key.chars().take(64).collect();
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '{key}' if you meant to execute a different request."
            ),
            None,
        )
        .with_type("idempotency_error")
        .into_response();
    }
    let mut response = answer(first);
    response
        .headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

/// The answer a PaymentIntent's creation got, as kept.
fn answer(intent: &SimPayment) -> Response {
    let status = intent
        .extra
        .get(ANSWER_STATUS)
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let body: Value = intent
        .extra
        .get(ANSWER)
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default();
    (status, Json(body)).into_response()
}

fn fingerprint(form: &BTreeMap<String, String>) -> String {
    serde_json::to_string(form).unwrap_or_default()
}

/// Stripe's checks on a charge's parameters.
fn read_charge(hub: &Hub, form: &BTreeMap<String, String>) -> Result<Charge, StripeError> {
    check_parameters(form)?;
    let amount_minor = match form.get("amount") {
        None => return Err(bad("Missing required param: amount.", "amount")),
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|a| *a > 0)
            .ok_or_else(|| bad("Invalid positive integer", "amount"))?,
    };
    let currency = match form.get("currency") {
        None => return Err(bad("Missing required param: currency.", "currency")),
        Some(code) => Currency::from_str(&code.to_ascii_uppercase())
            .map_err(|_| bad("Invalid currency.", "currency"))?,
    };
    let method = method_of(hub, form)?;
    let metadata = nested(form, "metadata");
    if metadata
        .values()
        .any(|v| v.chars().count() > MAX_METADATA_CHARS)
    {
        return Err(bad(
            "Metadata values can have up to 500 characters.",
            "metadata",
        ));
    }
    let notify_url = metadata
        .get("notifyUrl")
        .cloned()
        .unwrap_or_else(|| format!("{}/api/payment/webhook/card_gateway", hub.public_base_url()));
    Ok(Charge {
        amount_minor,
        currency,
        method,
        metadata,
        notify_url,
    })
}

/// Known parameters only; confirmed at once, off-session; redirects ruled out or a return URL.
fn check_parameters(form: &BTreeMap<String, String>) -> Result<(), StripeError> {
    if let Some(unknown) = form.keys().find(|k| {
        !KNOWN.contains(&k.as_str())
            && !k.starts_with("metadata[")
            && !k.starts_with("payment_method_types[")
    }) {
        let name: String = unknown.chars().take(64).collect();
        return Err(bad(&format!("Received unknown parameter: {name}"), unknown));
    }
    let flag = |name: &str| form.get(name).map(String::as_str);
    if flag("off_session").is_some() && flag("confirm") != Some("true") {
        return Err(bad(
            "You can only pass `off_session` when `confirm` is `true`.",
            "off_session",
        ));
    }
    if flag("confirm") != Some("true") || flag("off_session") != Some("true") {
        return Err(bad(
            "The sandbox simulates off-session charges of a saved card only: send confirm=true and off_session=true.",
            "off_session",
        ));
    }
    let redirects = flag("automatic_payment_methods[allow_redirects]");
    if redirects.is_some() && flag("automatic_payment_methods[enabled]") != Some("true") {
        return Err(bad(
            "Missing required param: automatic_payment_methods[enabled].",
            "automatic_payment_methods[enabled]",
        ));
    }
    let typed = form.keys().any(|k| k.starts_with("payment_method_types["));
    if redirects != Some("never") && !typed && !form.contains_key("return_url") {
        return Err(bad(RETURN_URL_REQUIRED, "return_url"));
    }
    Ok(())
}

/// The saved method the charge names, which must belong to the Customer it names.
fn method_of(hub: &Hub, form: &BTreeMap<String, String>) -> Result<SimMethod, StripeError> {
    let Some(id) = form.get("payment_method") else {
        return Err(bad(
            "You cannot confirm this PaymentIntent because it's missing a payment method.",
            "payment_method",
        ));
    };
    let method = hub
        .method(id)
        .filter(|m| m.provider == ProviderId::CardGateway)
        .ok_or_else(|| missing_param("PaymentMethod", id, "payment_method"))?;
    if method.forgotten() {
        return Err(bad(DETACHED, "payment_method"));
    }
    let Some(customer) = form.get("customer") else {
        return Err(bad(
            "The PaymentMethod is attached to a Customer: pass that customer to charge it.",
            "customer",
        ));
    };
    // A Customer is known by its card: `cus_X` has `pm_X`.
    let known = customer
        .strip_prefix("cus_")
        .and_then(|rest| hub.method(&format!("pm_{rest}")))
        .is_some_and(|m| &m.customer_id == customer);
    if !known {
        return Err(missing_param("customer", customer, "customer"));
    }
    if &method.customer_id != customer {
        return Err(bad(
            "The provided PaymentMethod does not belong to the provided Customer.",
            "payment_method",
        ));
    }
    Ok(method)
}

/// A new PaymentIntent, in the state its method's behaviour leaves it, with its answer.
fn new_intent(
    hub: &Hub,
    form: &BTreeMap<String, String>,
    charge: Charge,
    key: Option<&str>,
) -> SimPayment {
    let behaviour = charge.method.next;
    let (status, failure) = match behaviour {
        SimBehaviour::Succeed | SimBehaviour::DuplicateWebhook | SimBehaviour::LateWebhook => {
            (SimStatus::Paid, None)
        }
        SimBehaviour::Slow => (SimStatus::Open, None),
        SimBehaviour::Decline => (SimStatus::Declined, Some(decline_error())),
        SimBehaviour::AuthenticationRequired => (SimStatus::Declined, Some(authentication_error())),
    };
    let mut extra = BTreeMap::new();
    let mut keep = |name: &str, value: String| {
        extra.insert(name.to_owned(), value);
    };
    keep(objects::METADATA, fingerprint(&charge.metadata));
    keep(objects::CUSTOMER, charge.method.customer_id.clone());
    keep(objects::PAYMENT_METHOD, charge.method.id.clone());
    keep(BEHAVIOUR, behaviour.code().to_owned());
    keep(REQUEST, fingerprint(form));
    if let Some(description) = form.get("description") {
        keep(DESCRIPTION, description.clone());
    }
    if let Some(failure) = failure {
        keep(LAST_ERROR, failure.to_string());
    }
    if let Some(key) = key {
        keep(objects::IDEMPOTENCY_KEY, key.to_owned());
    }
    let mut intent = SimPayment {
        id: hub.new_id("pi_sandbox_"),
        provider: ProviderId::CardGateway,
        order_id: charge.metadata.get("orderId").cloned().unwrap_or_default(),
        amount_minor: charge.amount_minor,
        currency: charge.currency,
        kind: SimKind::OneTime,
        status,
        success_url: String::new(),
        cancel_url: String::new(),
        notify_url: charge.notify_url,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra,
    };
    let (code, body) = first_answer(hub, &intent);
    intent
        .extra
        .insert(ANSWER_STATUS.to_owned(), code.to_string());
    intent.extra.insert(ANSWER.to_owned(), body.to_string());
    intent
}

/// What Stripe answers the creation: the PaymentIntent, or for a failed confirmation `402`
/// with the `card_error`, which names the charge, the PaymentIntent and the method.
fn first_answer(hub: &Hub, intent: &SimPayment) -> (u16, Value) {
    if intent.status != SimStatus::Declined {
        return (200, intent_object(hub, intent, false));
    }
    let mut error = last_error(intent).unwrap_or_else(decline_error);
    error["charge"] = charge_id(&intent.id).into();
    error["payment_intent"] = intent_object(hub, intent, false);
    if let Some(method) = intent.extra.get(objects::PAYMENT_METHOD) {
        error["payment_method"] = method_object(
            hub,
            method,
            intent.extra.get(objects::CUSTOMER).map(String::as_str),
        );
    }
    (402, json!({ "error": error }))
}

/// A generic issuer decline, as Stripe's test card `4000 0000 0000 0002` gets it.
fn decline_error() -> Value {
    json!({
        "type": "card_error",
        "code": "card_declined",
        "decline_code": "generic_decline",
        "message": objects::DECLINE_MESSAGE,
        "doc_url": "https://stripe.com/docs/error-codes/card-declined",
    })
}

/// What Stripe answers an off-session charge of a card whose issuer wants 3-D Secure.
fn authentication_error() -> Value {
    json!({
        "type": "card_error",
        "code": "authentication_required",
        "decline_code": "authentication_required",
        "message": "Your card was declined. This transaction requires authentication.",
        "doc_url": "https://stripe.com/docs/error-codes/authentication-required",
    })
}

/// The failure kept on a PaymentIntent, or a generic decline for one that failed later (a slow
/// payment settled as failed).
fn last_error(intent: &SimPayment) -> Option<Value> {
    let kept = intent
        .extra
        .get(LAST_ERROR)
        .and_then(|e| serde_json::from_str(e).ok());
    match intent.status {
        SimStatus::Declined | SimStatus::Canceled => {
            kept.or_else(|| (intent.status == SimStatus::Declined).then(decline_error))
        }
        SimStatus::Open | SimStatus::Approved | SimStatus::Paid => None,
    }
}

fn charge_id(intent_id: &str) -> String {
    format!("ch_{}", intent_id.trim_start_matches("pi_"))
}

fn behaviour(intent: &SimPayment) -> Option<SimBehaviour> {
    intent
        .extra
        .get(BEHAVIOUR)
        .and_then(|code| SimBehaviour::parse(code))
}

/// Send what Stripe sends about a new PaymentIntent: the payment or failure event, sent or held
/// back as its method's behaviour says; nothing for one still processing.
async fn tell(hub: &Hub, intent: &SimPayment) {
    let event = match intent.status {
        SimStatus::Paid => SimEvent::Paid(intent.clone()),
        SimStatus::Declined => SimEvent::Declined(intent.clone()),
        SimStatus::Open | SimStatus::Approved | SimStatus::Canceled => return,
    };
    if behaviour(intent) == Some(SimBehaviour::LateWebhook) {
        let webhooks = CardGatewaySimulator.webhooks(hub, &event);
        hub.hold(
            ProviderId::CardGateway,
            &intent.notify_url,
            webhooks,
            &intent.id,
            "held back (late_webhook): POST /sandbox/api/payments/{id}/redeliver sends it",
        );
        return;
    }
    hub.dispatch(ProviderId::CardGateway, &intent.notify_url, &event)
        .await;
}

/// The events Stripe sends about an off-session PaymentIntent; `None` for any other payment.
pub(super) fn webhooks(hub: &Hub, event: &SimEvent) -> Option<Vec<Value>> {
    match event {
        SimEvent::Paid(p) if is_intent(p) => {
            let succeeded = objects::event(
                hub,
                "payment_intent.succeeded",
                intent_object(hub, p, false),
            );
            let times = if behaviour(p) == Some(SimBehaviour::DuplicateWebhook) {
                2
            } else {
                1
            };
            Some(vec![succeeded; times])
        }
        SimEvent::Declined(p) if is_intent(p) => Some(vec![objects::event(
            hub,
            "payment_intent.payment_failed",
            intent_object(hub, p, false),
        )]),
        SimEvent::Refunded { payment, .. } if is_intent(payment) => Some(vec![objects::event(
            hub,
            "charge.refunded",
            charge(payment),
        )]),
        _ => None,
    }
}

/// What a PaymentIntent shows besides the payment's own amount, currency and time.
struct Shown {
    id: String,
    status: &'static str,
    customer: Option<String>,
    method: Option<String>,
    metadata: BTreeMap<String, String>,
    last_error: Option<Value>,
    description: Option<String>,
    setup_future_usage: Option<String>,
}

/// `payment_intent.status` of an off-session PaymentIntent.
fn status_of(intent: &SimPayment) -> &'static str {
    match intent.status {
        SimStatus::Paid => "succeeded",
        SimStatus::Open => "processing",
        SimStatus::Approved => "requires_capture",
        SimStatus::Declined => "requires_payment_method",
        SimStatus::Canceled => "canceled",
    }
}

/// An off-session PaymentIntent as Stripe shows it now; the method expanded when asked.
fn intent_object(hub: &Hub, intent: &SimPayment, expand: bool) -> Value {
    let shown = Shown {
        id: intent.id.clone(),
        status: status_of(intent),
        customer: intent.extra.get(objects::CUSTOMER).cloned(),
        method: intent.extra.get(objects::PAYMENT_METHOD).cloned(),
        metadata: objects::metadata(intent),
        last_error: last_error(intent),
        description: intent.extra.get(DESCRIPTION).cloned(),
        setup_future_usage: None,
    };
    let mut object = render(hub, intent, shown, expand);
    object["canceled_at"] = intent
        .extra
        .get(CANCELED_AT)
        .and_then(|t| t.parse::<i64>().ok())
        .into();
    object["cancellation_reason"] = intent.extra.get(CANCELLATION_REASON).cloned().into();
    object
}

/// The PaymentIntent of a paid or declined payment-mode session.
fn session_intent(hub: &Hub, session: &SimPayment, expand: bool) -> Value {
    let paid = session.status == SimStatus::Paid;
    let shown = Shown {
        id: objects::payment_intent_id(session),
        status: if paid {
            "succeeded"
        } else {
            "requires_payment_method"
        },
        customer: session.extra.get(objects::CUSTOMER).cloned(),
        method: Some(
            session
                .extra
                .get(objects::PAYMENT_METHOD)
                .cloned()
                .unwrap_or_else(|| method_id(session)),
        ),
        metadata: objects::payment_intent_metadata(session),
        last_error: (!paid).then(decline_error),
        description: None,
        setup_future_usage: session.extra.get(objects::SETUP_FUTURE_USAGE).cloned(),
    };
    render(hub, session, shown, expand)
}

fn render(hub: &Hub, payment: &SimPayment, shown: Shown, expand: bool) -> Value {
    let customer = shown.customer.as_deref();
    let method = shown.method.as_deref().map(|id| {
        if expand {
            method_object(hub, id, customer)
        } else {
            Value::String(id.to_owned())
        }
    });
    let mut last_error = shown.last_error;
    if let (Some(error), Some(id)) = (last_error.as_mut(), shown.method.as_deref()) {
        error["payment_method"] = method_object(hub, id, customer);
    }
    let charged = matches!(payment.status, SimStatus::Paid | SimStatus::Declined);
    json!({
        "id": shown.id,
        "object": "payment_intent",
        "amount": payment.amount_minor,
        "amount_capturable": 0,
        "amount_received": if payment.status == SimStatus::Paid { payment.amount_minor } else { 0 },
        "canceled_at": null,
        "cancellation_reason": null,
        "capture_method": "automatic",
        "confirmation_method": "automatic",
        "created": seconds(payment.created_at_ms),
        "currency": payment.currency.code().to_ascii_lowercase(),
        "customer": customer,
        "description": shown.description,
        "last_payment_error": last_error,
        "latest_charge": charged.then(|| charge_id(&shown.id)),
        "livemode": false,
        "metadata": shown.metadata,
        "payment_method": method,
        "payment_method_types": ["card"],
        "setup_future_usage": shown.setup_future_usage,
        "status": shown.status,
    })
}

/// A card payment method as Stripe shows it: the saved card's brand and last four digits.
fn method_object(hub: &Hub, id: &str, customer: Option<&str>) -> Value {
    let saved = hub.method(id);
    let brand = saved
        .as_ref()
        .and_then(|m| m.brand.as_deref())
        .unwrap_or(CARD_BRAND);
    let last4 = saved
        .as_ref()
        .and_then(|m| m.last4.as_deref())
        .unwrap_or(CARD_LAST4);
    let created = saved.as_ref().map_or(hub.now_ms(), |m| m.created_at_ms);
    json!({
        "id": id,
        "object": "payment_method",
        "allow_redisplay": "unspecified",
        "billing_details": { "address": null, "email": null, "name": null, "phone": null },
        "card": {
            "brand": brand,
            "checks": { "address_line1_check": null, "address_postal_code_check": null, "cvc_check": "pass" },
            "country": "US",
            "display_brand": brand,
            "exp_month": 12,
            "exp_year": 2034,
            "funding": "credit",
            "last4": last4,
            "networks": { "available": [brand], "preferred": null },
            "three_d_secure_usage": { "supported": true },
            "wallet": null,
        },
        "created": seconds(created),
        "customer": customer,
        "livemode": false,
        "metadata": {},
        "type": "card",
    })
}

/// The charge of a paid off-session PaymentIntent, with its cumulative refunds and the
/// PaymentIntent's metadata, which Stripe copies onto it.
pub(super) fn charge(intent: &SimPayment) -> Value {
    json!({
        "id": charge_id(&intent.id),
        "object": "charge",
        "amount": intent.amount_minor,
        "amount_captured": intent.amount_minor,
        "amount_refunded": intent.refunded_minor,
        "captured": true,
        "created": seconds(intent.created_at_ms),
        "currency": intent.currency.code().to_ascii_lowercase(),
        "customer": intent.extra.get(objects::CUSTOMER),
        "livemode": false,
        "metadata": objects::metadata(intent),
        "paid": true,
        "payment_intent": intent.id,
        "payment_method": intent.extra.get(objects::PAYMENT_METHOD),
        "refunded": intent.refunded_minor >= intent.amount_minor,
        "status": "succeeded",
    })
}

/// `GET /v1/payment_intents/{id}`: an off-session PaymentIntent, or a paid or declined
/// payment-mode session's; `expand[]=payment_method` expands the method.
#[handler]
pub(super) fn retrieve_payment_intent(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let expand = match expansions(request) {
        Ok(expand) => expand,
        Err(refusal) => return refusal.into_response(),
    };
    if let Some(intent) = own_intent(&hub, &id) {
        return Json(intent_object(&hub, &intent, expand)).into_response();
    }
    let session = id
        .strip_prefix("pi_")
        .and_then(|rest| super::own_session(&hub, &format!("cs_{rest}")))
        .filter(|s| {
            matches!(s.kind, SimKind::OneTime)
                && matches!(s.status, SimStatus::Paid | SimStatus::Declined)
        });
    match session {
        Some(session) => Json(session_intent(&hub, &session, expand)).into_response(),
        None => missing("payment_intent", &id).into_response(),
    }
}

/// Whether the query asks `expand[]=payment_method`; any other expansion is refused.
fn expansions(request: &Request) -> Result<bool, StripeError> {
    let query: Vec<(String, String)> =
        serde_urlencoded::from_str(request.uri().query().unwrap_or("")).unwrap_or_default();
    let mut expand = false;
    for (key, value) in query.iter().take(MAX_FIELDS) {
        if !key.starts_with("expand[") {
            continue;
        }
        if value != "payment_method" {
            let value: String = value.chars().take(64).collect();
            return Err(bad(
                &format!(
                    "This property cannot be expanded ({value}); the sandbox expands payment_method only."
                ),
                "expand",
            ));
        }
        expand = true;
    }
    Ok(expand)
}

/// Stripe's refusal of a PaymentMethod detached from its Customer: it may not be used again.
const DETACHED: &str = "The provided PaymentMethod was previously used with a PaymentIntent \
    without Customer attachment, shared with a connected account without Customer attachment, or \
    was detached from a Customer. It may not be used again. To use a PaymentMethod multiple \
    times, you must attach it to a Customer first.";

/// `POST /v1/payment_methods/{id}/detach`: the saved card is detached from its Customer and can
/// no longer be charged; the answer is the PaymentMethod without a customer. Detaching one
/// that is not attached any more is refused as Stripe refuses it.
#[handler]
pub(super) fn detach_payment_method(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    match hub.forget_method(ProviderId::CardGateway, &id) {
        Err(_) => missing("payment_method", &id).into_response(),
        Ok(before) if before.forgotten() => bad(
            "The payment method you provided is not attached to a customer so detachment is \
             impossible.",
            "payment_method",
        )
        .into_response(),
        Ok(_) => Json(method_object(&hub, &id, None)).into_response(),
    }
}

/// `POST /v1/payment_intents/{id}/cancel`: an off-session PaymentIntent that is not paid is
/// cancelled, and `payment_intent.canceled` sent.
#[handler]
pub(super) async fn cancel_payment_intent(
    request: &Request,
    Path(id): Path<String>,
    body: Vec<u8>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let form = match form(request, &body).and_then(cancellation_form) {
        Ok(form) => form,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(intent) = own_intent(&hub, &id) else {
        return missing("payment_intent", &id).into_response();
    };
    let reason = form.get("cancellation_reason").cloned();
    let now_s = seconds(hub.now_ms());
    let canceled = hub.update_payment(&id, |p| match p.status {
        SimStatus::Open | SimStatus::Declined => {
            p.status = SimStatus::Canceled;
            p.extra.insert(CANCELED_AT.to_owned(), now_s.to_string());
            if let Some(reason) = &reason {
                p.extra
                    .insert(CANCELLATION_REASON.to_owned(), reason.clone());
            }
            Ok(p.clone())
        }
        _ => Err(SandboxError::Conflict("not cancelable".into())),
    });
    let Ok(canceled) = canceled else {
        let now = hub.payment(&id).unwrap_or(intent);
        return unexpected_state(&hub, &now).into_response();
    };
    let event = objects::event(
        &hub,
        "payment_intent.canceled",
        intent_object(&hub, &canceled, false),
    );
    hub.deliver(
        ProviderId::CardGateway,
        &canceled.notify_url,
        vec![sign(&hub, &event)],
        Some(canceled.id.clone()),
    )
    .await;
    Json(intent_object(&hub, &canceled, false)).into_response()
}

/// A cancel's form: only a known `cancellation_reason`.
fn cancellation_form(
    form: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, StripeError> {
    if let Some(unknown) = form.keys().find(|k| *k != "cancellation_reason") {
        let name: String = unknown.chars().take(64).collect();
        return Err(bad(&format!("Received unknown parameter: {name}"), unknown));
    }
    if let Some(reason) = form.get("cancellation_reason")
        && !CANCELLATION_REASONS.contains(&reason.as_str())
    {
        return Err(bad(
            "Invalid cancellation_reason: must be one of duplicate, fraudulent, requested_by_customer, or abandoned",
            "cancellation_reason",
        ));
    }
    Ok(form)
}

/// Stripe's refusal to cancel a PaymentIntent that is paid or cancelled already.
fn unexpected_state(hub: &Hub, intent: &SimPayment) -> StripeError {
    error(
        StatusCode::BAD_REQUEST,
        &format!(
            "You cannot cancel this PaymentIntent because it has a status of {}. Only a PaymentIntent with one of the following statuses may be canceled: requires_payment_method, requires_capture, requires_confirmation, requires_action, processing.",
            status_of(intent)
        ),
        None,
    )
    .with_code("payment_intent_unexpected_state")
    .with_payment_intent(intent_object(hub, intent, false))
}
