//! The simulated `mor_b` (Dodo Payments): the API subset the gateway calls and the webhooks Dodo
//! sends, signed per Standard Webhooks exactly as Dodo signs them.
//!
//! API, at `/sandbox/mor_b`: `POST /checkouts`, `GET /checkouts/{id}`, `GET /payments/{id}`,
//! `GET /subscriptions/{id}` and `PATCH /subscriptions/{id}` (`cancel_at_next_billing_date: true`
//! or `status: "cancelled"`). Requests must carry `Authorization: Bearer <api key>` and JSON
//! bodies; errors come in Dodo's `{"code", "message"}` shape.
//!
//! What a real Dodo account knows that the sandbox cannot: a product's price and billing period,
//! and the registered webhook endpoint. So the sandbox reads `metadata.amountMinor` +
//! `metadata.currency`, `metadata.intervalMonths` (present = a subscription product) and
//! `metadata.notifyUrl` (default `{public base}/api/payment/webhook/mor_b`); the gateway sends
//! them all.

mod objects;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use domain::{Currency, ProviderId};
use gateways::mor_b::MorBSettings;
use gateways::shared::signing::{b64, hmac_sha256, unb64};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{IntoResponse, Request, Response, Route, get, handler, post};
use serde::Deserialize;

use crate::credentials::CREDENTIALS;
use crate::hub::{Hub, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription, SimWebhook};
use crate::simulator::Simulator;
use objects::{DodoError, KeptRefund, error};

/// The largest request body read, in bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// The most payments scanned to find one by payment id.
const MAX_SCANNED: usize = 10_000;
/// The most refunds kept per payment.
const MAX_REFUNDS: usize = 100;

/// The simulated Dodo Payments.
pub struct MorBSimulator;

/// Gateway settings pointing at this sandbox with the sandbox credentials.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> MorBSettings {
    MorBSettings::new(
        CREDENTIALS.api_key,
        CREDENTIALS.standard_webhooks_secret,
        Some(api_base_url.to_owned()),
    )
}

#[async_trait]
impl Simulator for MorBSimulator {
    fn provider(&self) -> ProviderId {
        ProviderId::MorB
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        // The hub reaches the handlers as data of the enclosing sandbox route.
        Route::new()
            .at("/checkouts", post(create_session))
            .at("/checkouts/:id", get(retrieve_session))
            .at("/payments/:id", get(retrieve_payment))
            .at(
                "/subscriptions/:id",
                get(retrieve_subscription).patch(update_subscription),
            )
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        let bodies = match event {
            SimEvent::Paid(p) => vec![objects::envelope(
                hub,
                "payment.succeeded",
                objects::payment(hub, p, None),
            )],
            SimEvent::SubscriptionStarted(p, s) => {
                // The first charge belongs to the subscription it started.
                let first = SimPayment {
                    subscription_id: Some(s.id.clone()),
                    ..p.clone()
                };
                vec![
                    objects::envelope(
                        hub,
                        "payment.succeeded",
                        objects::payment(hub, &first, None),
                    ),
                    objects::envelope(hub, "subscription.active", objects::subscription(hub, s)),
                ]
            }
            SimEvent::Renewed(s, _) => renewal(hub, s),
            // Scheduled and immediate cancellations are both `subscription.cancelled`.
            SimEvent::SubscriptionCancelScheduled(s) | SimEvent::SubscriptionCanceled(s) => {
                vec![objects::envelope(
                    hub,
                    "subscription.cancelled",
                    objects::subscription(hub, s),
                )]
            }
            SimEvent::Refunded {
                payment,
                refund_id,
                amount_minor,
            } => refund(hub, payment, refund_id, *amount_minor),
            SimEvent::Declined(p) => vec![objects::envelope(
                hub,
                "payment.failed",
                objects::payment(hub, p, None),
            )],
            SimEvent::Approved(_) => Vec::new(),
            // Filled in by the refund work of issue 14.
            SimEvent::ChargeRefunded { .. } => Vec::new(),
        };
        bodies.iter().map(|body| sign(hub, body)).collect()
    }

    fn success_redirect(&self, payment: &SimPayment) -> String {
        let separator = if payment.success_url.contains('?') {
            '&'
        } else {
            '?'
        };
        format!(
            "{}{separator}session_id={}&status=success",
            payment.success_url, payment.id
        )
    }
}

/// A renewal: the charge, then the subscription with its new period.
fn renewal(hub: &Hub, s: &SimSubscription) -> Vec<serde_json::Value> {
    let Some(session) = hub.payment(&s.payment_id) else {
        return Vec::new();
    };
    let charge_id = hub.new_id("pay_sandbox_");
    vec![
        objects::envelope(
            hub,
            "payment.succeeded",
            objects::payment(hub, &session, Some((&charge_id, s))),
        ),
        objects::envelope(hub, "subscription.renewed", objects::subscription(hub, s)),
    ]
}

/// A refund: kept on the payment (which `GET /payments/{id}` lists), then announced.
fn refund(
    hub: &Hub,
    payment: &SimPayment,
    refund_id: &str,
    amount_minor: i64,
) -> Vec<serde_json::Value> {
    let kept = KeptRefund {
        refund_id: refund_id.to_owned(),
        amount: amount_minor,
        created_at_ms: hub.now_ms(),
    };
    let stored = hub.update_payment(&payment.id, |p| {
        let mut all = objects::refunds(p);
        if all.len() < MAX_REFUNDS {
            all.push(kept.clone());
        }
        p.extra.insert(
            objects::REFUNDS.to_owned(),
            serde_json::to_string(&all).unwrap_or_default(),
        );
        Ok(p.clone())
    });
    let session = stored.unwrap_or_else(|_| payment.clone());
    let data = objects::refund_object(
        &session,
        &objects::session_payment_id(&session),
        &kept,
        true,
    );
    vec![objects::envelope(hub, "refund.succeeded", data)]
}

/// Standard Webhooks: `webhook-signature: v1,base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))`
/// with the key decoded from the secret after `whsec_`.
fn sign(hub: &Hub, body: &serde_json::Value) -> SimWebhook {
    let body = body.to_string().into_bytes();
    let id = hub.new_id("msg_sandbox_");
    let timestamp = hub.now_ms().div_euclid(1000);
    let secret = CREDENTIALS.standard_webhooks_secret;
    let key = unb64(secret.strip_prefix("whsec_").unwrap_or(secret)).unwrap_or_default();
    let mut message = format!("{id}.{timestamp}.").into_bytes();
    message.extend_from_slice(&body);
    let signature = format!("v1,{}", b64(&hmac_sha256(&key, &message)));
    SimWebhook {
        headers: vec![
            ("webhook-id".to_owned(), id),
            ("webhook-timestamp".to_owned(), timestamp.to_string()),
            ("webhook-signature".to_owned(), signature),
        ],
        content_type: "application/json".to_owned(),
        body,
    }
}

fn authorized(request: &Request) -> bool {
    request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|token| token == CREDENTIALS.api_key)
}

fn unauthorized() -> Response {
    error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "Invalid API key").into_response()
}

fn not_found(what: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        &format!("{what} not found"),
    )
    .into_response()
}

fn invalid(message: &str) -> DodoError {
    error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "INVALID_REQUEST_BODY",
        message,
    )
}

/// A JSON body as `T`.
fn json_body<T: serde::de::DeserializeOwned>(
    request: &Request,
    body: &[u8],
) -> Result<T, DodoError> {
    let content_type = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/json") {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
            "Expected application/json",
        ));
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            "Request body is too large",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| invalid(&format!("Failed to deserialize the JSON body: {e}")))
}

#[derive(Debug, Deserialize)]
struct CreateSession {
    product_cart: Vec<CartItem>,
    #[serde(default)]
    customer: Option<CustomerRequest>,
    #[serde(default)]
    return_url: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct CartItem {
    product_id: String,
    quantity: u32,
}

#[derive(Debug, Deserialize)]
struct CustomerRequest {
    #[serde(default)]
    email: Option<String>,
}

/// Metadata values as strings (Dodo accepts strings, numbers and booleans).
fn string_metadata(
    raw: BTreeMap<String, serde_json::Value>,
) -> Result<BTreeMap<String, String>, DodoError> {
    raw.into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(s) => Ok((key, s)),
            serde_json::Value::Number(n) => Ok((key, n.to_string())),
            serde_json::Value::Bool(b) => Ok((key, b.to_string())),
            _ => Err(invalid(
                "metadata values must be strings, numbers or booleans",
            )),
        })
        .collect()
}

/// Dodo's checks on a session request, and the parts the sandbox needs.
fn new_session(hub: &Hub, request: CreateSession) -> Result<SimPayment, DodoError> {
    let [item] = &request.product_cart[..] else {
        return Err(invalid("the sandbox sells one product per session"));
    };
    if item.quantity != 1 || item.product_id.is_empty() {
        return Err(invalid("product_cart needs one product_id with quantity 1"));
    }
    let metadata = string_metadata(request.metadata)?;
    let hint = "the sandbox cannot look up products: send metadata amountMinor and currency";
    let amount_minor: i64 = metadata
        .get("amountMinor")
        .and_then(|a| a.parse().ok())
        .filter(|a| *a >= 0)
        .ok_or_else(|| invalid(hint))?;
    let currency = metadata
        .get("currency")
        .and_then(|c| Currency::from_str(c).ok())
        .ok_or_else(|| invalid(hint))?;
    let order_id = metadata
        .get("orderId")
        .cloned()
        .ok_or_else(|| invalid("the sandbox needs metadata orderId"))?;
    let kind = match metadata.get("intervalMonths") {
        None => SimKind::OneTime,
        Some(months) => SimKind::Subscription {
            interval_months: months
                .parse()
                .ok()
                .filter(|m| (1..=12).contains(m))
                .ok_or_else(|| invalid("intervalMonths must be 1 to 12"))?,
            plan_ref: Some(item.product_id.clone()),
        },
    };
    let return_url = request
        .return_url
        .unwrap_or_else(|| format!("{}/", hub.public_base_url()));
    let notify_url = metadata
        .get("notifyUrl")
        .cloned()
        .unwrap_or_else(|| format!("{}/api/payment/webhook/mor_b", hub.public_base_url()));
    let mut extra = BTreeMap::new();
    extra.insert(objects::PAYMENT_ID.to_owned(), hub.new_id("pay_sandbox_"));
    extra.insert(objects::PRODUCT_ID.to_owned(), item.product_id.clone());
    extra.insert(
        objects::METADATA.to_owned(),
        serde_json::to_string(&metadata).unwrap_or_default(),
    );
    if let Some(email) = request.customer.and_then(|c| c.email) {
        extra.insert(objects::CUSTOMER_EMAIL.to_owned(), email);
    }
    Ok(SimPayment {
        id: hub.new_id("cks_sandbox_"),
        provider: ProviderId::MorB,
        order_id,
        amount_minor,
        currency,
        kind,
        status: SimStatus::Open,
        success_url: return_url.clone(),
        cancel_url: return_url,
        notify_url,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra,
    })
}

#[handler]
fn create_session(request: &Request, body: Vec<u8>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let payment = match json_body(request, &body).and_then(|parsed| new_session(&hub, parsed)) {
        Ok(payment) => payment,
        Err(refusal) => return refusal.into_response(),
    };
    if let Err(foreign) = hub.insert_payment(
        payment.clone(),
        ["return_url", "return_url", "metadata.notifyUrl"],
    ) {
        return error(StatusCode::BAD_REQUEST, "INVALID_URL", &foreign.to_string()).into_response();
    }
    Json(serde_json::json!({
        "session_id": payment.id,
        "checkout_url": hub.checkout_url(&payment.id),
        "client_secret": null,
        "payment_id": null,
        "publishable_key": null,
    }))
    .into_response()
}

fn own_session(hub: &Hub, id: &str) -> Option<SimPayment> {
    hub.payment(id).filter(|p| p.provider == ProviderId::MorB)
}

#[handler]
fn retrieve_session(request: &Request, Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    match own_session(&hub, &id) {
        Some(payment) => Json(objects::session_status(&payment)).into_response(),
        None => not_found("Checkout session"),
    }
}

#[handler]
fn retrieve_payment(request: &Request, Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let session = hub.payments().into_iter().take(MAX_SCANNED).find(|p| {
        p.provider == ProviderId::MorB
            && p.extra.get(objects::PAYMENT_ID) == Some(&id)
            && p.status != SimStatus::Open
    });
    match session {
        Some(session) => Json(objects::payment(&hub, &session, None)).into_response(),
        None => not_found("Payment"),
    }
}

fn own_subscription(hub: &Hub, id: &str) -> Option<SimSubscription> {
    hub.subscription(id)
        .filter(|s| s.provider == ProviderId::MorB)
}

#[handler]
fn retrieve_subscription(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    match own_subscription(&hub, &id) {
        Some(subscription) => Json(objects::subscription(&hub, &subscription)).into_response(),
        None => not_found("Subscription"),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateSubscription {
    #[serde(default)]
    cancel_at_next_billing_date: Option<bool>,
    #[serde(default)]
    status: Option<String>,
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
    let update: UpdateSubscription = match json_body(request, &body) {
        Ok(update) => update,
        Err(refusal) => return refusal.into_response(),
    };
    if own_subscription(&hub, &id).is_none() {
        return not_found("Subscription");
    }
    let at_period_end = match (update.cancel_at_next_billing_date, update.status.as_deref()) {
        (Some(true), None) => true,
        (None, Some("cancelled")) => false,
        _ => {
            return invalid(
                "the sandbox supports cancel_at_next_billing_date: true or status: cancelled",
            )
            .into_response();
        }
    };
    match hub.cancel_subscription(&id, at_period_end).await {
        Ok(subscription) => Json(objects::subscription(&hub, &subscription)).into_response(),
        Err(e) => error(
            StatusCode::CONFLICT,
            "INVALID_SUBSCRIPTION_STATE",
            &e.to_string(),
        )
        .into_response(),
    }
}
