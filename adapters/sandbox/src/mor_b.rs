//! The simulated `mor_b` (Dodo Payments): the API subset the gateway calls and the webhooks Dodo
//! sends, signed per Standard Webhooks exactly as Dodo signs them.
//!
//! API, at `/sandbox/mor_b`: `POST /checkouts`, `GET /checkouts/{id}`, `GET /payments` (filters
//! `subscription_id`, `status`, `created_at_gte`, `created_at_lte`, `page_size`),
//! `GET /payments/{id}`, `GET /products` (`page_size`, `page_number`: the credential check's
//! read), `GET /subscriptions/{id}` and `PATCH /subscriptions/{id}`
//! (`cancel_at_next_billing_date: true` or `false`, or `status: "cancelled"`),
//! `POST /subscriptions/{id}/change-plan` (see the `subscriptions` module), and `POST /refunds`
//! (`payment_id`, `items` for a partial refund, `reason`, `metadata`; like Dodo it takes no
//! idempotency key: each call refunds, and the refund keeps its metadata, which
//! `GET /payments/{id}` lists). A subscription's charges are
//! payments with `subscription_id` set; its first charge is the checkout session's payment. Requests must carry `Authorization: Bearer <api key>` and JSON
//! bodies; errors come in Dodo's `{"code", "message"}` shape.
//!
//! On-demand subscriptions (automatic top-up): a checkout with `subscription_data.on_demand`
//! and `POST /subscriptions/{id}/charge`, see the `on_demand` module.
//!
//! What a real Dodo account knows that the sandbox cannot: a product's price and billing period,
//! and the registered webhook endpoint. So the sandbox reads `metadata.amountMinor` +
//! `metadata.currency`, `metadata.intervalMonths` (present = a subscription product) and
//! `metadata.notifyUrl` (default `{public base}/api/payment/webhook/mor_b`); the gateway sends
//! them all.

mod objects;
mod on_demand;
mod subscriptions;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path, Query};
use poem::{IntoResponse, Request, Response, Route, get, handler, post};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::{b64, hmac_sha256, unb64};

use crate::credentials::CREDENTIALS;
use crate::hub::{
    Hub, SandboxError, SimCharge, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription,
    SimWebhook,
};
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

/// The on-demand subscription product the sandbox's gateway settings name.
pub const ON_DEMAND_PRODUCT_ID: &str = "pdt_sandbox_on_demand";

/// The `[providers.mor_b]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/mor_b`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "apiKey": CREDENTIALS.api_key,
        "webhookSecret": CREDENTIALS.standard_webhooks_secret,
        "baseUrl": api_base_url,
        // The sandbox's webhooks name its business, as Dodo's name the merchant's.
        "businessId": objects::BUSINESS_ID,
        // The sandbox takes any product id; this one names the on-demand subscription product.
        "onDemandProductId": ON_DEMAND_PRODUCT_ID,
    })
}

#[async_trait]
impl Simulator for MorBSimulator {
    fn provider(&self) -> ProviderId {
        ProviderId::MorB
    }

    fn lookup_keys(&self) -> &'static [&'static str] {
        &[objects::PAYMENT_ID]
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        // The hub reaches the handlers as data of the enclosing sandbox route.
        Route::new()
            .at("/checkouts", post(create_session))
            .at("/checkouts/:id", get(retrieve_session))
            .at("/payments", get(list_payments))
            .at("/products", get(list_products))
            .at("/payments/:id", get(retrieve_payment))
            .at("/refunds", post(create_refund))
            .at(
                "/subscriptions/:id",
                get(retrieve_subscription).patch(update_subscription),
            )
            .at(
                "/subscriptions/:id/change-plan",
                post(subscriptions::change_plan_route),
            )
            .at("/subscriptions/:id/charge", post(on_demand::charge_route))
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        if let Some(signed) = on_demand::webhooks(hub, event) {
            return signed;
        }
        let bodies = match event {
            SimEvent::Paid(p) => vec![objects::envelope(
                hub,
                "payment.succeeded",
                objects::payment(hub, p, None),
            )],
            SimEvent::SubscriptionStarted(p, s) => started(hub, p, s),
            SimEvent::Renewed(s, charge_id) => renewal(hub, s, charge_id),
            // Dodo puts a subscription whose renewal charge failed on hold.
            SimEvent::RenewalFailed(s) => vec![objects::envelope(
                hub,
                "subscription.on_hold",
                objects::subscription(hub, s),
            )],
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
            SimEvent::ChargeRefunded {
                subscription,
                charge,
                refund_id,
                amount_minor,
                dispute: false,
            } => charge_refund(hub, subscription, charge, refund_id, *amount_minor),
            SimEvent::ChargeRefunded {
                subscription,
                charge,
                refund_id,
                dispute: true,
                ..
            } => charge_dispute(hub, subscription, charge, refund_id),
        };
        bodies.iter().map(|body| sign(hub, body)).collect()
    }

    /// Paying a session with `subscription_data.on_demand` sets its on-demand subscription up
    /// first, so that the payment names it.
    async fn pay(&self, hub: &Hub, payment_id: &str) -> Result<String, SandboxError> {
        on_demand::save_mandate(hub, payment_id);
        let payment = hub.complete_payment(payment_id).await?;
        Ok(self.success_redirect(&payment))
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

/// A subscription's start: its first charge is the session's payment, under the charge's id
/// (`payment.succeeded` with `subscription_id`), then `subscription.active`.
fn started(hub: &Hub, session: &SimPayment, s: &SimSubscription) -> Vec<serde_json::Value> {
    let Some(first) = s.charges.first() else {
        return Vec::new();
    };
    let session = hub
        .update_payment(&session.id, |p| {
            p.extra
                .insert(objects::PAYMENT_ID.to_owned(), first.id.clone());
            Ok(p.clone())
        })
        .unwrap_or_else(|_| session.clone());
    vec![
        objects::envelope(
            hub,
            "payment.succeeded",
            objects::payment(hub, &session, Some((first, s))),
        ),
        objects::envelope(hub, "subscription.active", objects::subscription(hub, s)),
    ]
}

/// A renewal: the charge, then the subscription with its new period.
fn renewal(hub: &Hub, s: &SimSubscription, charge_id: &str) -> Vec<serde_json::Value> {
    let (Some(session), Some(charge)) = (
        hub.payment(&s.payment_id),
        s.charges.iter().find(|c| c.id == charge_id),
    ) else {
        return Vec::new();
    };
    vec![
        objects::envelope(
            hub,
            "payment.succeeded",
            objects::payment(hub, &session, Some((charge, s))),
        ),
        objects::envelope(hub, "subscription.renewed", objects::subscription(hub, s)),
    ]
}

/// A refund of a subscription's charge: kept on the session (which `GET /payments/{id}` lists
/// on the charge), then `refund.succeeded` naming the charge's payment.
fn charge_refund(
    hub: &Hub,
    s: &SimSubscription,
    charge: &SimCharge,
    refund_id: &str,
    amount_minor: i64,
) -> Vec<serde_json::Value> {
    let kept = KeptRefund {
        refund_id: refund_id.to_owned(),
        amount: amount_minor,
        created_at_ms: hub.now_ms(),
        metadata: BTreeMap::new(),
        reason: None,
    };
    let stored = hub.update_payment(&s.payment_id, |p| {
        let mut all = objects::charge_refunds(p);
        let refunds = all.entry(charge.id.clone()).or_default();
        if refunds.len() < MAX_REFUNDS {
            refunds.push(kept.clone());
        }
        p.extra.insert(
            objects::CHARGE_REFUNDS.to_owned(),
            serde_json::to_string(&all).unwrap_or_default(),
        );
        Ok(p.clone())
    });
    let Ok(session) = stored else {
        return Vec::new();
    };
    let mut data = objects::refund_object(&session, &charge.id, &kept, true);
    data["is_partial"] = (charge.refunded_minor < charge.amount_minor).into();
    vec![objects::envelope(hub, "refund.succeeded", data)]
}

/// A lost dispute of a subscription's charge: `dispute.opened`, then `dispute.lost` (Dodo
/// reports each stage), both naming the charge's payment.
fn charge_dispute(
    hub: &Hub,
    s: &SimSubscription,
    charge: &SimCharge,
    dispute_id: &str,
) -> Vec<serde_json::Value> {
    let stored = hub.update_payment(&s.payment_id, |p| {
        let mut all = objects::charge_disputes(p);
        all.insert(charge.id.clone(), dispute_id.to_owned());
        p.extra.insert(
            objects::CHARGE_DISPUTES.to_owned(),
            serde_json::to_string(&all).unwrap_or_default(),
        );
        Ok(p.clone())
    });
    let Ok(session) = stored else {
        return Vec::new();
    };
    ["dispute_opened", "dispute_lost"]
        .into_iter()
        .map(|status| {
            let data = objects::dispute_object(
                &session,
                &charge.id,
                dispute_id,
                charge.amount_minor,
                status,
                true,
            );
            let event_type = status.replacen("dispute_", "dispute.", 1);
            objects::envelope(hub, &event_type, data)
        })
        .collect()
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
        metadata: BTreeMap::new(),
        reason: None,
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

/// A Dodo webhook body signed exactly as the sandbox signs its webhooks, for tests that send a
/// genuine-looking but hostile event.
#[must_use]
pub fn sign_event(hub: &Hub, body: &serde_json::Value) -> SimWebhook {
    sign(hub, body)
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
    #[serde(default)]
    subscription_data: Option<on_demand::SubscriptionData>,
}

#[derive(Debug, Deserialize)]
struct CartItem {
    product_id: String,
    quantity: u32,
}

/// Keep the session's customer (its address and name) with the payment.
fn keep_customer(extra: &mut BTreeMap<String, String>, customer: CustomerRequest) {
    let details = [
        (objects::CUSTOMER_EMAIL, customer.email),
        (objects::CUSTOMER_NAME, customer.name),
    ];
    for (key, value) in details {
        if let Some(value) = value {
            extra.insert(key.to_owned(), value);
        }
    }
}

#[derive(Debug, Deserialize)]
struct CustomerRequest {
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    name: Option<String>,
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
/// What a session charges, and whether it sets an on-demand subscription up: an on-demand
/// checkout's first price, else the price the metadata names (the sandbox has no catalog).
fn session_price(
    metadata: &BTreeMap<String, String>,
    subscription_data: Option<&on_demand::SubscriptionData>,
) -> Result<(i64, Currency, bool), DodoError> {
    let hint = "the sandbox cannot look up products: send metadata amountMinor and currency";
    let named_currency = metadata
        .get("currency")
        .and_then(|c| Currency::from_str(c).ok());
    if let Some((amount, currency)) = on_demand::first_price(subscription_data, named_currency)? {
        return Ok((amount, currency, true));
    }
    let amount = metadata
        .get("amountMinor")
        .and_then(|a| a.parse().ok())
        .filter(|a| *a >= 0)
        .ok_or_else(|| invalid(hint))?;
    Ok((amount, named_currency.ok_or_else(|| invalid(hint))?, false))
}

fn new_session(hub: &Hub, request: CreateSession) -> Result<SimPayment, DodoError> {
    let [item] = &request.product_cart[..] else {
        return Err(invalid("the sandbox sells one product per session"));
    };
    if item.quantity != 1 || item.product_id.is_empty() {
        return Err(invalid("product_cart needs one product_id with quantity 1"));
    }
    let metadata = string_metadata(request.metadata)?;
    let (amount_minor, currency, on_demand) =
        session_price(&metadata, request.subscription_data.as_ref())?;
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
    if let Some(customer) = request.customer {
        keep_customer(&mut extra, customer);
    }
    if on_demand {
        extra.insert(on_demand::ON_DEMAND.to_owned(), "1".to_owned());
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

/// Every payment the sandbox's Dodo knows: each session's payment once there is one, a
/// subscription's charges (the first one being its session's payment) in its stead.
fn all_payments(hub: &Hub) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    for session in hub.payments().into_iter().take(MAX_SCANNED) {
        // A session has a payment once paid or declined; an on-demand charge from the start.
        let processing = session.status == SimStatus::Open && on_demand::is_charge(&session);
        if session.provider != ProviderId::MorB
            || (session.status == SimStatus::Open && !processing)
        {
            continue;
        }
        match session
            .subscription_id
            .as_deref()
            .and_then(|id| hub.subscription(id))
        {
            Some(s) => all.extend(
                s.charges
                    .iter()
                    .map(|charge| objects::payment(hub, &session, Some((charge, &s)))),
            ),
            None => all.push(objects::payment(hub, &session, None)),
        }
    }
    all
}

#[handler]
fn retrieve_payment(request: &Request, Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    match all_payments(&hub)
        .into_iter()
        .find(|p| p["payment_id"].as_str() == Some(id.as_str()))
    {
        Some(payment) => Json(payment).into_response(),
        None => not_found("Payment"),
    }
}

#[derive(Debug, Deserialize)]
struct PaymentFilters {
    #[serde(default)]
    subscription_id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    created_at_gte: Option<String>,
    #[serde(default)]
    created_at_lte: Option<String>,
    #[serde(default)]
    page_size: Option<usize>,
}

fn millis(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

#[handler]
fn list_payments(
    request: &Request,
    Query(filters): Query<PaymentFilters>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let bound = |text: &Option<String>| match text.as_deref().map(millis) {
        None => Ok(None),
        Some(Some(ms)) => Ok(Some(ms)),
        Some(None) => Err(invalid("created_at filters must be ISO 8601 times")),
    };
    let (from, until) = match (
        bound(&filters.created_at_gte),
        bound(&filters.created_at_lte),
    ) {
        (Ok(from), Ok(until)) => (from, until),
        (Err(refusal), _) | (_, Err(refusal)) => return refusal.into_response(),
    };
    let page_size = filters.page_size.unwrap_or(10).clamp(1, 100);
    let mut items: Vec<serde_json::Value> = all_payments(&hub)
        .into_iter()
        .filter(|p| {
            let created = p["created_at"].as_str().and_then(millis).unwrap_or(0);
            filters
                .subscription_id
                .as_deref()
                .is_none_or(|s| p["subscription_id"].as_str() == Some(s))
                && filters
                    .status
                    .as_deref()
                    .is_none_or(|s| p["status"].as_str() == Some(s))
                && from.is_none_or(|from| created >= from)
                && until.is_none_or(|until| created <= until)
        })
        .map(|p| objects::list_item(&p))
        .collect();
    // Newest first, as Dodo lists.
    items.sort_by(|a, b| b["created_at"].as_str().cmp(&a["created_at"].as_str()));
    items.truncate(page_size);
    Json(serde_json::json!({ "items": items })).into_response()
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    #[serde(default)]
    page_size: Option<usize>,
    #[serde(default)]
    page_number: Option<usize>,
}

/// `GET /products`: the products checked out so far (the sandbox has no catalog of its own),
/// a page of them, as `{"items": […]}`.
#[handler]
fn list_products(
    request: &Request,
    Query(page): Query<PageQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let mut ids: Vec<String> = hub
        .payments()
        .into_iter()
        .filter(|p| p.provider == ProviderId::MorB)
        .filter_map(|p| p.extra.get(objects::PRODUCT_ID).cloned())
        .collect();
    ids.sort();
    ids.dedup();
    let page_size = page.page_size.unwrap_or(10).clamp(1, 100);
    let skip = page.page_number.unwrap_or(0).saturating_mul(page_size);
    let items: Vec<serde_json::Value> = ids
        .iter()
        .skip(skip)
        .take(page_size)
        .map(|id| json!({ "product_id": id, "is_recurring": false }))
        .collect();
    Json(serde_json::json!({ "items": items })).into_response()
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
    if let Some(mandate) = on_demand::mandate(&hub, &id) {
        return Json(on_demand::subscription(&hub, &mandate)).into_response();
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
    if let Some(mandate) = on_demand::mandate(&hub, &id) {
        let cancel_now = update.cancel_at_next_billing_date.is_none()
            && update.status.as_deref() == Some("cancelled");
        return on_demand::update(&hub, &mandate, cancel_now);
    }
    let Some(subscription) = own_subscription(&hub, &id) else {
        return not_found("Subscription");
    };
    let at_period_end = match (update.cancel_at_next_billing_date, update.status.as_deref()) {
        (Some(false), None) => {
            return match subscriptions::resume(&hub, &subscription).await {
                Ok(body) => Json(body).into_response(),
                Err(refusal) => refusal.into_response(),
            };
        }
        (Some(true), None) => true,
        (None, Some("cancelled")) => false,
        _ => {
            return invalid(
                "the sandbox supports cancel_at_next_billing_date: true or false, or status: cancelled",
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

#[derive(Debug, Deserialize)]
struct CreateRefund {
    payment_id: String,
    #[serde(default)]
    items: Option<Vec<RefundItem>>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    metadata: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct RefundItem {
    item_id: String,
    #[serde(default)]
    amount: Option<i64>,
}

/// The session whose payment (or whose subscription's first charge) is `payment_id`: the one
/// that keeps it as its payment id, or else (a session that keeps none) the session `pay_<id>`
/// names.
fn session_of_payment(hub: &Hub, payment_id: &str) -> Option<SimPayment> {
    hub.payment_by(ProviderId::MorB, objects::PAYMENT_ID, payment_id)
        .or_else(|| {
            payment_id
                .strip_prefix("pay_")
                .and_then(|id| hub.payment(id))
        })
        .filter(|p| {
            p.provider == ProviderId::MorB
                && p.status == SimStatus::Paid
                && objects::session_payment_id(p) == payment_id
        })
}

/// `POST /refunds`: refund the whole payment (no `items`) or an item's `amount` of it, then
/// send `refund.succeeded` and answer the refund (`succeeded`: the sandbox pays at once).
#[handler]
async fn create_refund(request: &Request, body: Vec<u8>, hub: Data<&Arc<Hub>>) -> Response {
    if !authorized(request) {
        return unauthorized();
    }
    let input: CreateRefund = match json_body(request, &body) {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let metadata = match string_metadata(input.metadata) {
        Ok(metadata) => metadata,
        Err(refusal) => return refusal.into_response(),
    };
    if input
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > 3000)
    {
        return invalid("reason is longer than 3000 characters").into_response();
    }
    let Some(session) = session_of_payment(&hub, &input.payment_id) else {
        return not_found("Payment");
    };
    let amount = match item_amount(&session, input.items.as_deref()) {
        Ok(amount) => amount,
        Err(refusal) => return refusal.into_response(),
    };
    if let Err(e) = refund_at_hub(&hub, &session, &input.payment_id, amount).await {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "REFUND_NOT_ALLOWED",
            &e.to_string(),
        )
        .into_response();
    }
    // The refund the hub just made (and announced) is the last one kept for the payment.
    let kept = hub.update_payment(&session.id, |p| {
        annotate_last_refund(p, &input.payment_id, &metadata, &input.reason)
    });
    match kept {
        Ok((session, kept)) => Json(objects::refund_object(
            &session,
            &input.payment_id,
            &kept,
            false,
        ))
        .into_response(),
        Err(_) => not_found("Refund"),
    }
}

/// The amount `items` asks to refund: `None` (all that is left) without items, else the one
/// item's positive `amount`; refused unless that item is the payment's one product.
fn item_amount(
    session: &SimPayment,
    items: Option<&[RefundItem]>,
) -> Result<Option<i64>, DodoError> {
    let product = session.extra.get(objects::PRODUCT_ID);
    match items {
        None => Ok(None),
        Some([item]) if Some(&item.item_id) == product => match item.amount {
            Some(amount) if amount <= 0 => Err(invalid("a refund amount must be positive")),
            amount => Ok(amount),
        },
        Some(_) => Err(invalid("items must name the payment's one product")),
    }
}

/// Refunds `amount` (all that is left when `None`) of the session's payment at the hub, which
/// announces it.
async fn refund_at_hub(
    hub: &Hub,
    session: &SimPayment,
    payment_id: &str,
    amount: Option<i64>,
) -> Result<(), SandboxError> {
    match session.subscription_id.as_deref() {
        // A subscription's first charge: the session's payment under the charge's id.
        Some(subscription_id) => hub
            .refund_subscription_charge(subscription_id, Some(payment_id), amount, false)
            .await
            .map(|_| ()),
        None => {
            let left = session.amount_minor - session.refunded_minor;
            hub.refund_payment(&session.id, amount.unwrap_or(left))
                .await
                .map(|_| ())
        }
    }
}

/// Gives the last refund kept for `payment_id` on the session `p` the request's metadata and
/// reason; returns the session and that refund.
fn annotate_last_refund(
    p: &mut SimPayment,
    payment_id: &str,
    metadata: &BTreeMap<String, String>,
    reason: &Option<String>,
) -> Result<(SimPayment, KeptRefund), SandboxError> {
    let subscription = p.subscription_id.is_some();
    let mut refunds = if subscription {
        objects::charge_refunds(p)
            .remove(payment_id)
            .unwrap_or_default()
    } else {
        objects::refunds(p)
    };
    let last = refunds.last_mut().ok_or(SandboxError::NotFound)?;
    last.metadata.clone_from(metadata);
    last.reason.clone_from(reason);
    let kept = last.clone();
    if subscription {
        let mut all = objects::charge_refunds(p);
        all.insert(payment_id.to_owned(), refunds);
        p.extra.insert(
            objects::CHARGE_REFUNDS.to_owned(),
            serde_json::to_string(&all).unwrap_or_default(),
        );
    } else {
        p.extra.insert(
            objects::REFUNDS.to_owned(),
            serde_json::to_string(&refunds).unwrap_or_default(),
        );
    }
    Ok((p.clone(), kept))
}
