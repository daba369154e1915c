//! The simulated `card_gateway` (Stripe Checkout): the API subset the gateway calls and the
//! events Stripe sends, signed with `Stripe-Signature` exactly as Stripe signs them.
//!
//! API, at `/sandbox/card_gateway`: `POST /v1/checkout/sessions`, `GET /v1/checkout/sessions/{id}`,
//! `POST /v1/checkout/sessions/{id}/expire`, `GET /v1/subscriptions/{id}`,
//! `DELETE /v1/subscriptions/{id}` (cancel now),
//! `POST /v1/subscriptions/{id}` (`cancel_at_period_end=true` or `false`, or a Price switch,
//! see `subscriptions.rs`), and the reads the gateway makes for refunds and disputes:
//! `GET /v1/charges/{id}` and `GET /v1/invoice_payments` (filtered by
//! `payment[payment_intent]` or by `invoice`, `expand[]=data.invoice` honoured), and
//! `POST /v1/refunds` by `payment_intent` (a one-time session's, or a subscription's first
//! invoice's), which refunds at once, sends `charge.refunded`, and answers a repeated
//! `Idempotency-Key` with the first refund; `GET /v1/balance` (the credential check's read: an
//! empty test-mode balance); and for automatic top-up `POST /v1/payment_intents` (a saved card
//! charged off-session), `GET /v1/payment_intents/{id}` (`expand[]=payment_method` honoured)
//! and `POST /v1/payment_intents/{id}/cancel` (see `intents.rs`). Requests must carry
//! `Authorization: Bearer <api key>` (or HTTP basic with the key as user) and form-encoded
//! bodies; errors come in Stripe's
//! `{"error": {"type", "message", "param"}}` shape. A repeated `Idempotency-Key` returns the
//! first session, as Stripe does.
//!
//! Two things a real Stripe account knows that the sandbox cannot: what a Price id costs, and
//! which webhook endpoint is registered. So the sandbox reads the amount from
//! `price_data[unit_amount]` or else `metadata[amountMinor]` + `metadata[currency]`, the billing
//! period from `metadata[intervalMonths]` (or `price_data[recurring][interval_count]`), and the
//! webhook URL from `metadata[notifyUrl]` (default `{public base}/api/payment/webhook/card_gateway`).
//! The gateway sends all of these.

mod intents;
mod objects;
mod subscriptions;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{IntoResponse, Request, Response, Route, get, handler, post};
use serde_json::{Value, json};
use signing::{hex, hmac_sha256, unb64};

use crate::credentials::CREDENTIALS;
use crate::hub::{
    Hub, SandboxError, SimCharge, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription,
    SimWebhook,
};
use crate::simulator::Simulator;
use objects::{StripeError, error, missing};

/// Stripe refuses a session expiring sooner than this after creation.
const MIN_EXPIRY_S: i64 = 30 * 60;
/// Stripe refuses a session expiring later than this after creation.
const MAX_EXPIRY_S: i64 = 24 * 60 * 60;
/// The most form fields read from one request (a bound on parsing work).
const MAX_FIELDS: usize = 200;

/// The simulated Stripe.
pub struct CardGatewaySimulator;

/// The `[providers.card_gateway]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/card_gateway`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "secretKey": CREDENTIALS.api_key,
        "webhookSecret": CREDENTIALS.hmac_secret,
        "baseUrl": api_base_url,
    })
}

#[async_trait]
impl Simulator for CardGatewaySimulator {
    fn provider(&self) -> ProviderId {
        ProviderId::CardGateway
    }

    fn lookup_keys(&self) -> &'static [&'static str] {
        &[objects::IDEMPOTENCY_KEY]
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        // The hub reaches the handlers as data of the enclosing sandbox route.
        Route::new()
            .at("/v1/checkout/sessions", post(create_session))
            .at("/v1/checkout/sessions/:id", get(retrieve_session))
            .at("/v1/checkout/sessions/:id/expire", post(expire_session))
            .at(
                "/v1/subscriptions/:id",
                get(retrieve_subscription)
                    .post(update_subscription)
                    .delete(delete_subscription),
            )
            .at("/v1/charges/:id", get(retrieve_charge))
            .at("/v1/invoice_payments", get(list_invoice_payments))
            .at("/v1/refunds", post(create_refund))
            .at("/v1/balance", get(retrieve_balance))
            .at("/v1/payment_intents", post(intents::create_payment_intent))
            .at(
                "/v1/payment_intents/:id",
                get(intents::retrieve_payment_intent),
            )
            .at(
                "/v1/payment_intents/:id/cancel",
                post(intents::cancel_payment_intent),
            )
            .at(
                "/v1/payment_methods/:id/detach",
                post(intents::detach_payment_method),
            )
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        // An off-session PaymentIntent's own events (a top-up's), not a Checkout Session's.
        if let Some(events) = intents::webhooks(hub, event) {
            return events.iter().map(|e| sign(hub, e)).collect();
        }
        let events = match event {
            SimEvent::Paid(p) => vec![objects::event(
                hub,
                "checkout.session.completed",
                objects::session(hub, p),
            )],
            SimEvent::SubscriptionStarted(p, s) => started_events(hub, p, s),
            SimEvent::Renewed(s, invoice_id) => vec![renewal_invoice(hub, s, invoice_id)],
            SimEvent::RenewalFailed(s) => vec![objects::event(
                hub,
                "invoice.payment_failed",
                failed_invoice(hub, s),
            )],
            SimEvent::SubscriptionCancelScheduled(s) => {
                vec![objects::event(
                    hub,
                    "customer.subscription.updated",
                    objects::subscription(hub, s),
                )]
            }
            SimEvent::SubscriptionCanceled(s) => {
                vec![objects::event(
                    hub,
                    "customer.subscription.deleted",
                    objects::subscription(hub, s),
                )]
            }
            SimEvent::Refunded { payment, .. } => vec![refunded_payment(hub, payment)],
            // A declined card fails the session's PaymentIntent, which says why
            // (`last_payment_error`); a subscription's session has no PaymentIntent of ours, and
            // one the merchant expired was not declined: those end as an expired session.
            SimEvent::Declined(p)
                if p.status == SimStatus::Declined && matches!(p.kind, SimKind::OneTime) =>
            {
                vec![objects::event(
                    hub,
                    "payment_intent.payment_failed",
                    objects::declined_payment_intent(p),
                )]
            }
            SimEvent::Declined(p) => vec![objects::event(
                hub,
                "checkout.session.expired",
                objects::session(hub, p),
            )],
            SimEvent::Approved(_) => Vec::new(),
            SimEvent::ChargeRefunded {
                subscription,
                charge,
                refund_id,
                dispute,
                ..
            } => charge_refunded_events(hub, subscription, charge, refund_id, *dispute),
        };
        events.iter().map(|e| sign(hub, e)).collect()
    }

    /// Paying a session that asked to keep the card (`customer_creation=always`,
    /// `payment_intent_data[setup_future_usage]`) creates its Customer and saves the card first,
    /// so that the completed session names the Customer.
    async fn pay(&self, hub: &Hub, payment_id: &str) -> Result<String, SandboxError> {
        intents::save_card(hub, payment_id);
        let payment = hub.complete_payment(payment_id).await?;
        Ok(self.success_redirect(&payment))
    }

    /// The subscription carries the session's metadata (our order id) as
    /// `subscription_data[metadata]` would have, so that its invoices name the order.
    fn sold_as_subscription(&self, payment: &mut SimPayment) {
        if objects::subscription_metadata(payment).is_empty() {
            let metadata = serde_json::to_string(&objects::metadata(payment)).unwrap_or_default();
            payment
                .extra
                .insert(objects::SUBSCRIPTION_METADATA.to_owned(), metadata);
        }
    }

    fn success_redirect(&self, payment: &SimPayment) -> String {
        payment
            .success_url
            .replace("{CHECKOUT_SESSION_ID}", &payment.id)
    }
}

/// A subscription's checkout completed: the session, which names the subscription it created,
/// then the paid invoice of its first period.
fn started_events(hub: &Hub, p: &SimPayment, s: &SimSubscription) -> Vec<serde_json::Value> {
    let session = SimPayment {
        subscription_id: Some(s.id.clone()),
        ..p.clone()
    };
    let mut events = vec![objects::event(
        hub,
        "checkout.session.completed",
        objects::session(hub, &session),
    )];
    // The first period's invoice is the subscription's first charge.
    if let Some(first) = s.charges.first() {
        events.push(objects::event(
            hub,
            "invoice.paid",
            objects::invoice(hub, s, first, "subscription_create"),
        ));
    }
    events
}

/// `invoice.paid` for a renewal: the invoice of the charge `invoice_id` (or of the current
/// period, if the subscription no longer lists that charge).
fn renewal_invoice(hub: &Hub, s: &SimSubscription, invoice_id: &str) -> serde_json::Value {
    let charge = s
        .charges
        .iter()
        .find(|c| c.id == invoice_id)
        .cloned()
        .unwrap_or_else(|| SimCharge {
            id: invoice_id.to_owned(),
            period_start_ms: s.period_start_ms,
            period_end_ms: s.period_end_ms,
            amount_minor: s.amount_minor,
            refunded_minor: 0,
        });
    objects::event(
        hub,
        "invoice.paid",
        objects::invoice(hub, s, &charge, "subscription_cycle"),
    )
}

/// A subscription charge refunded: `charge.refunded`, or for a chargeback the dispute Stripe
/// opens, then closes lost.
fn charge_refunded_events(
    hub: &Hub,
    subscription: &SimSubscription,
    charge: &SimCharge,
    refund_id: &str,
    dispute: bool,
) -> Vec<serde_json::Value> {
    if !dispute {
        return vec![objects::event(
            hub,
            "charge.refunded",
            objects::subscription_charge(hub, subscription, charge),
        )];
    }
    ["needs_response", "lost"]
        .into_iter()
        .zip(["charge.dispute.created", "charge.dispute.closed"])
        .map(|(status, event_type)| {
            objects::event(
                hub,
                event_type,
                objects::dispute(hub, subscription, charge, refund_id, status),
            )
        })
        .collect()
}

/// The open invoice of a subscription's next period whose payment failed: nothing paid,
/// everything still due.
fn failed_invoice(hub: &Hub, s: &SimSubscription) -> serde_json::Value {
    let charge = SimCharge {
        id: hub.new_id("in_sandbox_"),
        period_start_ms: s.period_end_ms,
        period_end_ms: crate::hub::add_months(s.period_end_ms, s.interval_months),
        amount_minor: s.amount_minor,
        refunded_minor: 0,
    };
    let mut invoice = objects::invoice(hub, s, &charge, "subscription_cycle");
    invoice["amount_paid"] = 0.into();
    invoice["amount_remaining"] = charge.amount_minor.into();
    invoice["attempted"] = true.into();
    invoice["status"] = "open".into();
    invoice
}

/// `charge.refunded` for a refunded payment: a one-time session's charge, or for a subscription's
/// payment the charge of its first invoice, which is what that payment was.
fn refunded_payment(hub: &Hub, payment: &SimPayment) -> serde_json::Value {
    let first = payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id))
        .and_then(|s| Some((s.charges.first()?.clone(), s)));
    let charge = match first {
        Some((first, s)) => {
            let first = SimCharge {
                refunded_minor: payment.refunded_minor,
                ..first
            };
            objects::subscription_charge(hub, &s, &first)
        }
        None => objects::charge(payment),
    };
    objects::event(hub, "charge.refunded", charge)
}

/// A Stripe event signed exactly as the sandbox signs its webhooks, for tests that change a
/// genuine event and sign it again (a hostile but validly signed event).
#[must_use]
pub fn sign_event(hub: &Hub, event: &serde_json::Value) -> SimWebhook {
    sign(hub, event)
}

/// `Stripe-Signature: t=<now>,v1=hex(HMAC-SHA256(secret string, "t.body"))`.
fn sign(hub: &Hub, event: &serde_json::Value) -> SimWebhook {
    let body = event.to_string().into_bytes();
    let t = hub.now_ms().div_euclid(1000);
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(&body);
    let signature = hex(&hmac_sha256(CREDENTIALS.hmac_secret.as_bytes(), &message));
    SimWebhook {
        headers: vec![
            (
                "Stripe-Signature".to_owned(),
                format!("t={t},v1={signature}"),
            ),
            (
                "User-Agent".to_owned(),
                "Stripe/1.0 (+https://stripe.com/docs/webhooks)".to_owned(),
            ),
        ],
        content_type: "application/json; charset=utf-8".to_owned(),
        body,
    }
}

/// Bearer with the API key, or HTTP basic with the key as user name, as Stripe accepts.
fn authorized(request: &Request) -> bool {
    let Some(value) = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    if let Some(token) = value.strip_prefix("Bearer ") {
        return token == CREDENTIALS.api_key;
    }
    value
        .strip_prefix("Basic ")
        .and_then(unb64)
        .is_some_and(|decoded| decoded.strip_suffix(b":") == Some(CREDENTIALS.api_key.as_bytes()))
}

fn unauthorized() -> Response {
    error(StatusCode::UNAUTHORIZED, "Invalid API Key provided", None).into_response()
}

/// A form-encoded body as a map (a repeated key keeps its last value).
fn form(request: &Request, body: &[u8]) -> Result<BTreeMap<String, String>, StripeError> {
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/x-www-form-urlencoded") {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "Invalid request (check that your POST content type is application/x-www-form-urlencoded)",
            None,
        ));
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body).map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            "Invalid request: the body is not form-encoded",
            None,
        )
    })?;
    if pairs.len() > MAX_FIELDS {
        return Err(error(StatusCode::BAD_REQUEST, "Too many parameters", None));
    }
    Ok(pairs.into_iter().collect())
}

/// `prefix[key]` fields as a map.
fn nested(form: &BTreeMap<String, String>, prefix: &str) -> BTreeMap<String, String> {
    form.iter()
        .filter_map(|(k, v)| {
            Some((
                k.strip_prefix(prefix)?
                    .strip_prefix('[')?
                    .strip_suffix(']')?
                    .to_owned(),
                v.clone(),
            ))
        })
        .filter(|(k, _)| !k.contains('['))
        .collect()
}

fn bad(message: &str, param: &str) -> StripeError {
    error(StatusCode::BAD_REQUEST, message, Some(param))
}

/// What a session costs: `price_data`, or, for a Price id the sandbox cannot look up, the
/// amount the gateway put in metadata.
fn amount(
    form: &BTreeMap<String, String>,
    metadata: &BTreeMap<String, String>,
) -> Result<(i64, Currency), StripeError> {
    let price_data = form.contains_key("line_items[0][price_data][unit_amount]");
    let (amount, currency, param) = if price_data {
        (
            form.get("line_items[0][price_data][unit_amount]"),
            form.get("line_items[0][price_data][currency]"),
            "line_items[0][price_data]",
        )
    } else if form.contains_key("line_items[0][price]") {
        (
            metadata.get("amountMinor"),
            metadata.get("currency"),
            "metadata[amountMinor]",
        )
    } else {
        return Err(bad(
            "Missing required param: line_items[0][price] or line_items[0][price_data].",
            "line_items",
        ));
    };
    let sandbox_hint =
        "the sandbox cannot look up Prices: send metadata[amountMinor] and metadata[currency]";
    let amount: i64 = amount
        .and_then(|a| a.parse().ok())
        .filter(|a| *a >= 0)
        .ok_or_else(|| bad(sandbox_hint, param))?;
    let currency = currency
        .and_then(|c| Currency::from_str(&c.to_ascii_uppercase()).ok())
        .ok_or_else(|| bad("Invalid currency.", param))?;
    if price_data
        && form
            .get("line_items[0][price_data][product_data][name]")
            .is_none_or(|n| n.is_empty())
    {
        return Err(bad(
            "Missing required param: line_items[0][price_data][product_data][name].",
            param,
        ));
    }
    Ok((amount, currency))
}

/// Payment or subscription, with the period the gateway sent.
fn kind(
    form: &BTreeMap<String, String>,
    metadata: &BTreeMap<String, String>,
) -> Result<SimKind, StripeError> {
    match form.get("mode").map(String::as_str) {
        Some("payment") => {
            if form.keys().any(|k| k.starts_with("subscription_data[")) {
                return Err(bad(
                    "You can not pass `subscription_data` in `payment` mode.",
                    "subscription_data",
                ));
            }
            Ok(SimKind::OneTime)
        }
        Some("subscription") => {
            if form.keys().any(|k| k.starts_with("payment_intent_data[")) {
                return Err(bad(
                    "You can not pass `payment_intent_data` in `subscription` mode.",
                    "payment_intent_data",
                ));
            }
            if form.contains_key("customer_creation") {
                return Err(bad(
                    "`customer_creation` can only be used in `payment` mode.",
                    "customer_creation",
                ));
            }
            let interval = form
                .get("line_items[0][price_data][recurring][interval_count]")
                .or(metadata.get("intervalMonths"));
            let interval_months = interval
                .and_then(|i| i.parse().ok())
                .filter(|i| (1..=12).contains(i))
                .ok_or_else(|| {
                    bad(
                        "the sandbox needs metadata[intervalMonths] (1 to 12) for a subscription",
                        "metadata[intervalMonths]",
                    )
                })?;
            Ok(SimKind::Subscription {
                interval_months,
                plan_ref: form.get("line_items[0][price]").cloned(),
            })
        }
        _ => Err(bad(
            "Invalid mode: must be one of payment, setup, or subscription.",
            "mode",
        )),
    }
}

/// Stripe's own checks on a session form, and the parts the sandbox needs.
fn new_session(hub: &Hub, form: &BTreeMap<String, String>) -> Result<SimPayment, StripeError> {
    let metadata = nested(form, "metadata");
    let kind = kind(form, &metadata)?;
    intents::check_saving(form)?;
    if form.get("line_items[0][quantity]").map(String::as_str) != Some("1") {
        return Err(bad(
            "The sandbox sells one item: line_items[0][quantity] must be 1.",
            "line_items[0][quantity]",
        ));
    }
    let (amount_minor, currency) = amount(form, &metadata)?;
    let expires_at = expires_at(hub, form)?;
    let success_url = form
        .get("success_url")
        .cloned()
        .ok_or_else(|| bad("Missing required param: success_url.", "success_url"))?;
    let order_id = form
        .get("client_reference_id")
        .or(metadata.get("orderId"))
        .cloned()
        .ok_or_else(|| {
            bad(
                "the sandbox needs client_reference_id or metadata[orderId]",
                "client_reference_id",
            )
        })?;
    let notify_url = metadata
        .get("notifyUrl")
        .cloned()
        .unwrap_or_else(|| format!("{}/api/payment/webhook/card_gateway", hub.public_base_url()));
    Ok(SimPayment {
        id: hub.new_id("cs_sandbox_"),
        provider: ProviderId::CardGateway,
        order_id,
        amount_minor,
        currency,
        kind,
        status: SimStatus::Open,
        cancel_url: form
            .get("cancel_url")
            .cloned()
            .unwrap_or_else(|| success_url.clone()),
        success_url,
        notify_url,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra: kept(form, metadata, expires_at),
    })
}

/// `expires_at`, which Stripe wants 30 minutes to 24 hours from now (24 hours when absent).
fn expires_at(hub: &Hub, form: &BTreeMap<String, String>) -> Result<i64, StripeError> {
    let now_s = hub.now_ms().div_euclid(1000);
    let Some(t) = form.get("expires_at") else {
        return Ok(now_s + MAX_EXPIRY_S);
    };
    t.parse::<i64>().ok().filter(|t| (now_s + MIN_EXPIRY_S..=now_s + MAX_EXPIRY_S).contains(t)).ok_or_else(|| {
        bad(
            "The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.",
            "expires_at",
        )
    })
}

/// What the sandbox keeps of a session form to render the session and its events later.
fn kept(
    form: &BTreeMap<String, String>,
    metadata: BTreeMap<String, String>,
    expires_at: i64,
) -> BTreeMap<String, String> {
    let json = |map: BTreeMap<String, String>| serde_json::to_string(&map).unwrap_or_default();
    let mut extra = BTreeMap::new();
    extra.insert(objects::METADATA.to_owned(), json(metadata));
    extra.insert(
        objects::SUBSCRIPTION_METADATA.to_owned(),
        json(nested(form, "subscription_data[metadata]")),
    );
    extra.insert(
        objects::PAYMENT_INTENT_METADATA.to_owned(),
        json(nested(form, "payment_intent_data[metadata]")),
    );
    extra.insert(objects::EXPIRES_AT.to_owned(), expires_at.to_string());
    if let Some(email) = form.get("customer_email") {
        extra.insert(objects::CUSTOMER_EMAIL.to_owned(), email.clone());
    }
    for (field, key) in [
        (
            "payment_intent_data[setup_future_usage]",
            objects::SETUP_FUTURE_USAGE,
        ),
        ("customer_creation", objects::CUSTOMER_CREATION),
    ] {
        if let Some(value) = form.get(field) {
            extra.insert(key.to_owned(), value.clone());
        }
    }
    extra
}

/// The session an earlier request with the same `Idempotency-Key` created.
fn replayed(hub: &Hub, key: &str) -> Option<SimPayment> {
    hub.payment_by(ProviderId::CardGateway, objects::IDEMPOTENCY_KEY, key)
}

#[handler]
async fn create_session(request: &Request, body: Vec<u8>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let idempotency_key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(key) = idempotency_key.as_deref()
        && let Some(existing) = replayed(&hub, key)
    {
        if intents::is_intent(&existing) {
            return intents::other_endpoint(key, "/v1/payment_intents", "/v1/checkout/sessions")
                .into_response();
        }
        return Json(objects::session(&hub, &existing)).into_response();
    }
    let form = match form(request, &body) {
        Ok(form) => form,
        Err(refusal) => return refusal.into_response(),
    };
    let mut payment = match new_session(&hub, &form) {
        Ok(payment) => payment,
        Err(refusal) => return refusal.into_response(),
    };
    if let Some(key) = idempotency_key {
        payment
            .extra
            .insert(objects::IDEMPOTENCY_KEY.to_owned(), key);
    }
    if let Err(foreign) = hub.insert_payment(
        payment.clone(),
        ["success_url", "cancel_url", "metadata[notifyUrl]"],
    ) {
        return bad(&foreign.to_string(), foreign.field).into_response();
    }
    Json(objects::session(&hub, &payment)).into_response()
}

/// A Checkout Session of this provider (not an off-session PaymentIntent).
fn own_session(hub: &Hub, id: &str) -> Option<SimPayment> {
    hub.payment(id)
        .filter(|p| p.provider == ProviderId::CardGateway && !intents::is_intent(p))
}

#[handler]
fn retrieve_session(request: &Request, Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    match own_session(&hub, &id) {
        Some(payment) => Json(objects::session(&hub, &payment)).into_response(),
        None => missing("checkout.session", &id).into_response(),
    }
}

/// `GET /v1/balance`: the sandbox account's balance, empty and in test mode, as Stripe answers a
/// test-mode key; a wrong key is refused as everywhere.
#[handler]
fn retrieve_balance(request: &Request) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    Json(json!({
        "object": "balance",
        "available": [{ "amount": 0, "currency": "usd", "source_types": { "card": 0 } }],
        "pending": [{ "amount": 0, "currency": "usd", "source_types": { "card": 0 } }],
        "livemode": false,
    }))
    .into_response()
}

/// Expiring an open session ends it and, as at Stripe, sends `checkout.session.expired`.
#[handler]
async fn expire_session(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    if own_session(&hub, &id).is_none() {
        return missing("checkout.session", &id).into_response();
    }
    match hub.set_status(&id, SimStatus::Canceled) {
        Ok(payment) => {
            hub.dispatch(
                payment.provider,
                &payment.notify_url,
                &SimEvent::Declined(payment.clone()),
            )
            .await;
            Json(objects::session(&hub, &payment)).into_response()
        }
        Err(_) => error(
            StatusCode::BAD_REQUEST,
            "Only Checkout Sessions with a status in [\"open\"] can be expired.",
            None,
        )
        .into_response(),
    }
}

#[handler]
async fn update_subscription(
    request: &Request,
    Path(id): Path<String>,
    body: Vec<u8>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let form = match form(request, &body) {
        Ok(form) => form,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(subscription) = hub
        .subscription(&id)
        .filter(|s| s.provider == ProviderId::CardGateway)
    else {
        return missing("subscription", &id).into_response();
    };
    // A Price switch or a withdrawn cancellation (`subscriptions.rs`).
    let answer = if form.contains_key("items[0][price]") || form.contains_key("items[0][id]") {
        Some(subscriptions::switch_price(&hub, &subscription, &form).await)
    } else if form.len() == 1
        && form.get("cancel_at_period_end").map(String::as_str) == Some("false")
    {
        Some(subscriptions::resume(&hub, &subscription).await)
    } else {
        None
    };
    if let Some(answer) = answer {
        return match answer {
            Ok(object) => Json(object).into_response(),
            Err(refusal) => refusal.into_response(),
        };
    }
    if let Some(unknown) = form.keys().find(|k| *k != "cancel_at_period_end") {
        return bad(
            &format!(
                "Received unknown parameter: {}",
                unknown.chars().take(64).collect::<String>()
            ),
            unknown,
        )
        .into_response();
    }
    if form.get("cancel_at_period_end").map(String::as_str) != Some("true") {
        return bad(
            "the sandbox supports only cancel_at_period_end=true",
            "cancel_at_period_end",
        )
        .into_response();
    }
    match hub.cancel_subscription(&id, true).await {
        Ok(subscription) => Json(objects::subscription(&hub, &subscription)).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string(), None).into_response(),
    }
}

/// `DELETE /v1/subscriptions/{id}`: end the subscription now; `customer.subscription.deleted`
/// follows.
#[handler]
async fn delete_subscription(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    if hub
        .subscription(&id)
        .filter(|s| s.provider == ProviderId::CardGateway)
        .is_none()
    {
        return missing("subscription", &id).into_response();
    }
    match hub.cancel_subscription(&id, false).await {
        Ok(subscription) => Json(objects::subscription(&hub, &subscription)).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string(), None).into_response(),
    }
}

/// `GET /v1/subscriptions/{id}`.
#[handler]
fn retrieve_subscription(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    match hub
        .subscription(&id)
        .filter(|s| s.provider == ProviderId::CardGateway)
    {
        Some(s) => Json(objects::subscription(&hub, &s)).into_response(),
        None => missing("subscription", &id).into_response(),
    }
}

/// The subscription charge whose invoice is `invoice_id`, with its subscription.
fn subscription_charge(hub: &Hub, invoice_id: &str) -> Option<(SimSubscription, SimCharge)> {
    hub.subscriptions()
        .into_iter()
        .filter(|s| s.provider == ProviderId::CardGateway)
        .find_map(|s| {
            let charge = s.charges.iter().find(|c| c.id == invoice_id)?.clone();
            Some((s, charge))
        })
}

/// `GET /v1/charges/{id}`: a subscription period's charge or a one-time session's.
#[handler]
fn retrieve_charge(request: &Request, Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    if let Some((s, charge)) = objects::invoice_of(&id).and_then(|i| subscription_charge(&hub, &i))
    {
        return Json(objects::subscription_charge(&hub, &s, &charge)).into_response();
    }
    let session = id
        .strip_prefix("ch_")
        .and_then(|rest| own_session(&hub, &format!("cs_{rest}")))
        .filter(|p| p.status == SimStatus::Paid && matches!(p.kind, SimKind::OneTime));
    if let Some(payment) = session {
        return Json(objects::charge(&payment)).into_response();
    }
    match id
        .strip_prefix("ch_")
        .and_then(|rest| intents::paid_intent(&hub, &format!("pi_{rest}")))
    {
        Some(intent) => Json(intents::charge(&intent)).into_response(),
        None => missing("charge", &id).into_response(),
    }
}

/// `GET /v1/invoice_payments?payment[type]=payment_intent&payment[payment_intent]=pi_…`: the
/// invoice payment of a subscription charge's PaymentIntent, or an empty list (a one-time
/// session's PaymentIntent paid no invoice).
#[handler]
fn list_invoice_payments(request: &Request, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let query: Vec<(String, String)> =
        serde_urlencoded::from_str(request.uri().query().unwrap_or("")).unwrap_or_default();
    let value = |key: &str| {
        query
            .iter()
            .take(MAX_FIELDS)
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let expand = query
        .iter()
        .take(MAX_FIELDS)
        .any(|(k, v)| k == "expand[]" && v == "data.invoice");
    if let Some(invoice_id) = value("invoice") {
        let data = subscription_charge(&hub, invoice_id)
            .map(|(s, charge)| objects::invoice_payment(&hub, &s, &charge, expand))
            .into_iter()
            .collect();
        return Json(objects::list("/v1/invoice_payments", data)).into_response();
    }
    let Some(payment_intent) = value("payment[payment_intent]") else {
        return bad(
            "The sandbox lists invoice payments by payment[payment_intent] or invoice only.",
            "payment",
        )
        .into_response();
    };
    if value("payment[type]") != Some("payment_intent") {
        return bad(
            "Missing required param: payment[type] (payment_intent).",
            "payment[type]",
        )
        .into_response();
    }
    let data = objects::invoice_of(payment_intent)
        .and_then(|invoice_id| subscription_charge(&hub, &invoice_id))
        .map(|(s, charge)| objects::invoice_payment(&hub, &s, &charge, expand))
        .into_iter()
        .collect();
    Json(objects::list("/v1/invoice_payments", data)).into_response()
}

/// `extra` key prefix under which a payment keeps the refund made with an `Idempotency-Key`.
const REFUND_KEY_PREFIX: &str = "refund:";
/// The longest `Idempotency-Key` Stripe takes.
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;

/// The payment a PaymentIntent paid: a paid top-up's (the PaymentIntent itself), a paid
/// one-time session's (`pi_X` of `cs_X`), or the subscription payment whose first invoice it
/// paid (`pi_X` of `in_X`).
fn payment_of_intent(hub: &Hub, payment_intent: &str) -> Option<SimPayment> {
    if let Some(intent) = hub
        .payment(payment_intent)
        .filter(|p| p.provider == ProviderId::CardGateway && intents::is_intent(p))
    {
        return (intent.status == SimStatus::Paid).then_some(intent);
    }
    let rest = payment_intent.strip_prefix("pi_")?;
    if let Some(session) = own_session(hub, &format!("cs_{rest}")) {
        return (session.status == SimStatus::Paid && matches!(session.kind, SimKind::OneTime))
            .then_some(session);
    }
    let (s, charge) = subscription_charge(hub, &objects::invoice_of(payment_intent)?)?;
    let first = s.charges.first().is_some_and(|c| c.id == charge.id);
    first.then(|| hub.payment(&s.payment_id)).flatten()
}

/// `POST /v1/refunds`: `payment_intent` and `amount` (the rest when absent), `metadata[…]`.
#[handler]
async fn create_refund(request: &Request, body: Vec<u8>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let idempotency_key = match idempotency_key(request) {
        Ok(key) => key,
        Err(refusal) => return refusal.into_response(),
    };
    let form = match form(request, &body) {
        Ok(form) => form,
        Err(refusal) => return refusal.into_response(),
    };
    if form.contains_key("charge") {
        return bad("The sandbox refunds by payment_intent only.", "charge").into_response();
    }
    let Some(payment_intent) = form.get("payment_intent") else {
        return bad("Missing required param: payment_intent.", "payment_intent").into_response();
    };
    let Some(payment) = payment_of_intent(&hub, payment_intent) else {
        return missing("payment_intent", payment_intent).into_response();
    };
    let stored_key = idempotency_key
        .as_ref()
        .map(|k| format!("{REFUND_KEY_PREFIX}{k}"));
    if let Some(existing) = stored_key.as_ref().and_then(|k| payment.extra.get(k)) {
        return kept_refund(existing);
    }
    let amount = match refund_amount(&form, &payment) {
        Ok(amount) => amount,
        Err(refusal) => return refusal.into_response(),
    };
    let refund = objects::refund(
        &hub,
        &hub.new_id("re_sandbox_"),
        payment_intent,
        &payment,
        amount,
        &nested(&form, "metadata"),
    );
    // Reserve the key first, so that the same key sent twice at once refunds once.
    if let Some(key) = stored_key.as_ref()
        && let Some(answer) = reserve_refund_key(&hub, &payment.id, key, &refund)
    {
        return answer;
    }
    if let Err(e) = hub.refund_payment(&payment.id, amount).await {
        if let Some(key) = stored_key.as_ref() {
            let _ = hub.update_payment(&payment.id, |p| {
                p.extra.remove(key);
                Ok(())
            });
        }
        return error(StatusCode::BAD_REQUEST, &e.to_string(), None).into_response();
    }
    Json(refund).into_response()
}

/// A request's `Idempotency-Key`, if any; refused when empty or longer than Stripe takes.
fn idempotency_key(request: &Request) -> Result<Option<String>, StripeError> {
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.chars().count() > MAX_IDEMPOTENCY_KEY_CHARS)
    {
        return Err(bad("Invalid Idempotency-Key.", "Idempotency-Key"));
    }
    Ok(key)
}

/// The amount to refund: the form's positive `amount`, at most what is left of the payment,
/// or all that is left when absent.
fn refund_amount(
    form: &BTreeMap<String, String>,
    payment: &SimPayment,
) -> Result<i64, StripeError> {
    let left = payment.amount_minor - payment.refunded_minor;
    let amount = match form.get("amount") {
        None => left,
        Some(text) => match text.parse::<i64>() {
            Ok(amount) if amount > 0 => amount,
            _ => return Err(bad("Invalid positive integer", "amount")),
        },
    };
    if amount > left {
        return Err(bad(
            &format!(
                "Refund amount ({amount}) is greater than unrefunded amount on charge ({left})"
            ),
            "amount",
        ));
    }
    Ok(amount)
}

/// The answer kept under an `Idempotency-Key`, sent again.
fn kept_refund(kept: &str) -> Response {
    let value: serde_json::Value = serde_json::from_str(kept).unwrap_or_default();
    Json(value).into_response()
}

/// Keeps `refund` under `key` on the payment, unless the key already holds one: then (or if the
/// payment cannot be updated) the answer to send instead.
fn reserve_refund_key(
    hub: &Hub,
    payment_id: &str,
    key: &str,
    refund: &serde_json::Value,
) -> Option<Response> {
    let reserved = hub.update_payment(payment_id, |p| {
        if let Some(existing) = p.extra.get(key) {
            return Ok(Some(existing.clone()));
        }
        p.extra.insert(key.to_owned(), refund.to_string());
        Ok(None)
    });
    match reserved {
        Ok(Some(existing)) => Some(kept_refund(&existing)),
        Ok(None) => None,
        Err(e) => Some(error(StatusCode::BAD_REQUEST, &e.to_string(), None).into_response()),
    }
}
