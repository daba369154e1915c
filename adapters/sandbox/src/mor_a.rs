//! The Creem (`mor_a`) simulator: the part of Creem's API the gateway calls, and Creem's webhooks.
//!
//! Served at `/sandbox/mor_a`: `POST /v1/checkouts`, `GET /v1/checkouts?checkout_id=…`,
//! `POST /v1/subscriptions/{id}/cancel`, `POST /v1/subscriptions/{id}/upgrade` (see
//! the `subscriptions` module), and the reads the gateway makes when an event names an
//! object only by id, `GET /v1/transactions?transaction_id=…` and `GET /v1/products?product_id=…`,
//! and the credential check's `GET /v1/products/search?page_number=&page_size=`,
//! each refusing a missing or wrong `x-api-key` as Creem does. Creem's API has no refund
//! endpoint, so neither has the sandbox. Creem charges a product's own price; the sandbox has no products, so it reads the price,
//! currency and billing interval from the checkout's metadata (`amountMinor`, `currency`,
//! `intervalMonths`), which the gateway always sends and the real Creem only stores. Creem posts
//! webhooks to the endpoint registered in its dashboard; the sandbox posts them to
//! `metadata.notifyUrl` (sent by a gateway in sandbox mode), else to
//! `{public base}/api/payment/webhook/mor_a`. Webhooks carry both signatures Creem's SDK reads:
//! Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>` over
//! `{id}.{timestamp}.{body}`, keyed with the base64 part of [`CREDENTIALS`]`.creem_webhook_secret`)
//! and `creem-signature` (hex HMAC-SHA256 of the body under that secret string). Every object
//! carries `mode: "test"`. Some objects come as ids only, as the SDK's types allow: a one-time
//! payment's refund names its `checkout` by id, and a renewal's `subscription.paid` its
//! `product`, with only `last_transaction_id` for the charge.
//! A subscription's charges are Creem transactions: `subscription.paid` names the current one in
//! `last_transaction_id`, the checkout's order the first one in `transaction`; a refund of one
//! sends `refund.created` with the transaction's running `refunded_amount`, a lost dispute
//! `dispute.created` with the transaction charged back (Creem has no dispute-outcome event).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path, Query};
use poem::{Body, IntoResponse, Request, Response, Route, get, handler, post};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::{b64, hex, hmac_sha256, unb64};

use crate::credentials::CREDENTIALS;
use crate::hub::{
    Hub, SandboxError, SimCharge, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription,
    SimSubscriptionStatus, SimWebhook,
};
use crate::simulator::Simulator;

mod subscriptions;

/// The largest request body the simulator reads, in bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// The longest billing interval a sandbox subscription may have, in months.
const MAX_INTERVAL_MONTHS: u32 = 12;

/// The Creem simulator.
#[derive(Debug, Clone, Copy, Default)]
pub struct MorASimulator;

/// The `[providers.mor_a]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/mor_a`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "apiKey": CREDENTIALS.api_key,
        "webhookSecret": CREDENTIALS.creem_webhook_secret,
        "baseUrl": api_base_url,
    })
}

#[async_trait]
impl Simulator for MorASimulator {
    // A declined card sends nothing: the checkout stays open for another try.
    fn tells_declines(&self, _payment: &SimPayment) -> bool {
        false
    }

    fn provider(&self) -> ProviderId {
        ProviderId::MorA
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        Route::new()
            .at(
                "/v1/checkouts",
                get(retrieve_checkout).post(create_checkout),
            )
            .at("/v1/subscriptions/:id/cancel", post(cancel_subscription))
            .at(
                "/v1/subscriptions/:id/upgrade",
                post(subscriptions::upgrade),
            )
            .at("/v1/transactions", get(retrieve_transaction))
            .at("/v1/products", get(retrieve_product))
            .at("/v1/products/search", get(search_products))
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        let objects: Vec<(&str, Value)> = match event {
            SimEvent::Paid(p) => vec![("checkout.completed", checkout_json(hub, p))],
            SimEvent::SubscriptionStarted(p, s) => vec![
                ("checkout.completed", checkout_json(hub, p)),
                ("subscription.active", subscription_json(hub, s)),
                ("subscription.paid", subscription_json(hub, s)),
            ],
            SimEvent::Renewed(s, transaction) => {
                let mut object = subscription_json(hub, s);
                object["last_transaction_id"] = json!(transaction);
                // The product by id only: the gateway reads the amount from the transaction.
                object["product"] = object["product"]["id"].clone();
                vec![("subscription.paid", object)]
            }
            SimEvent::ChargeRefunded {
                subscription,
                charge,
                refund_id,
                amount_minor,
                dispute,
            } => match hub.payment(&subscription.payment_id) {
                Some(payment) if *dispute => vec![(
                    "dispute.created",
                    dispute_json(hub, &payment, subscription, charge, refund_id),
                )],
                Some(payment) => vec![(
                    "refund.created",
                    charge_refund_json(
                        hub,
                        &payment,
                        subscription,
                        charge,
                        refund_id,
                        *amount_minor,
                    ),
                )],
                None => Vec::new(),
            },
            SimEvent::RenewalFailed(s) => {
                vec![("subscription.past_due", subscription_json(hub, s))]
            }
            SimEvent::SubscriptionCancelScheduled(s) => {
                vec![("subscription.scheduled_cancel", subscription_json(hub, s))]
            }
            SimEvent::SubscriptionCanceled(s) => {
                vec![("subscription.canceled", subscription_json(hub, s))]
            }
            SimEvent::Refunded {
                payment,
                refund_id,
                amount_minor,
            } => {
                vec![(
                    "refund.created",
                    refund_json(hub, payment, refund_id, *amount_minor),
                )]
            }
            // Creem sends nothing for a declined card (the checkout stays open) or an approval.
            SimEvent::Declined(_) | SimEvent::Approved(_) => Vec::new(),
        };
        objects
            .into_iter()
            .map(|(event_type, object)| signed_event(hub, event_type, object))
            .collect()
    }
}

fn signed_event(hub: &Hub, event_type: &str, object: Value) -> SimWebhook {
    let envelope = json!({
        "id": hub.new_id("evt_sandbox_"),
        "eventType": event_type,
        "created_at": hub.now_ms(),
        "object": object,
    });
    let body = envelope.to_string().into_bytes();
    let secret = CREDENTIALS.creem_webhook_secret;
    let legacy = hex(&hmac_sha256(secret.as_bytes(), &body));
    let message_id = hub.new_id("msg_sandbox_");
    let timestamp = hub.now_ms().div_euclid(1000);
    let key = unb64(secret.trim_start_matches("whsec_")).unwrap_or_default();
    let mut message = format!("{message_id}.{timestamp}.").into_bytes();
    message.extend_from_slice(&body);
    let standard = b64(&hmac_sha256(&key, &message));
    SimWebhook {
        headers: vec![
            ("webhook-id".into(), message_id),
            ("webhook-timestamp".into(), timestamp.to_string()),
            ("webhook-signature".into(), format!("v1,{standard}")),
            ("creem-signature".into(), legacy),
        ],
        content_type: "application/json".into(),
        body,
    }
}

/// A Creem-style error answer.
fn error(status: StatusCode, message: &str) -> Response {
    let body = json!({
        "status": status.as_u16(),
        "error": status.canonical_reason(),
        "message": [message],
    });
    (status, Json(body)).into_response()
}

/// Why a request is refused, before it becomes Creem's error answer.
#[derive(Debug)]
struct Refusal(StatusCode, &'static str);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

fn authorized(request: &Request) -> Result<(), Refusal> {
    match request.header("x-api-key") {
        Some(key) if key == CREDENTIALS.api_key => Ok(()),
        Some(_) => Err(Refusal(StatusCode::FORBIDDEN, "Invalid API key")),
        None => Err(Refusal(StatusCode::UNAUTHORIZED, "Missing API key")),
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(body: Body) -> Result<T, Refusal> {
    let bytes = body
        .into_bytes_limit(MAX_BODY_BYTES)
        .await
        .map_err(|_| Refusal(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large"))?;
    serde_json::from_slice(&bytes).map_err(|_| {
        Refusal(
            StatusCode::BAD_REQUEST,
            "Request body is not valid JSON for this endpoint",
        )
    })
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

#[derive(Debug, Deserialize)]
struct CreateCheckoutInput {
    product_id: String,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    success_url: Option<String>,
    #[serde(default)]
    customer: Option<CustomerInput>,
    #[serde(default)]
    metadata: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
struct CustomerInput {
    #[serde(default)]
    email: Option<String>,
}

fn metadata_text<'a>(metadata: &'a BTreeMap<String, Value>, key: &str) -> Option<&'a str> {
    metadata.get(key).and_then(Value::as_str)
}

/// The payment a checkout request describes, or why the sandbox cannot simulate it.
fn payment_from(hub: &Hub, input: CreateCheckoutInput) -> Result<SimPayment, &'static str> {
    if input.product_id.trim().is_empty() {
        return Err("product_id must not be empty");
    }
    let metadata = &input.metadata;
    let order_id = input
        .request_id
        .clone()
        .or_else(|| metadata_text(metadata, "orderId").map(str::to_owned))
        .ok_or("request_id or metadata.orderId is required")?;
    let amount_minor = metadata_text(metadata, "amountMinor")
        .and_then(|a| a.parse::<i64>().ok())
        .filter(|a| *a > 0)
        .ok_or("the sandbox needs metadata.amountMinor (it has no product prices)")?;
    let currency: Currency = metadata_text(metadata, "currency")
        .and_then(|c| c.parse().ok())
        .ok_or("the sandbox needs metadata.currency")?;
    let kind = match metadata_text(metadata, "intervalMonths") {
        None => SimKind::OneTime,
        Some(text) => match text.parse::<u32>() {
            Ok(months) if (1..=MAX_INTERVAL_MONTHS).contains(&months) => SimKind::Subscription {
                interval_months: months,
                plan_ref: Some(input.product_id.clone()),
            },
            _ => return Err("metadata.intervalMonths must be 1 to 12"),
        },
    };
    let notify_url = metadata_text(metadata, "notifyUrl")
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{}/api/payment/webhook/mor_a", hub.public_base_url()));
    let mut extra = BTreeMap::from([
        ("product_id".to_owned(), input.product_id.clone()),
        (
            "metadata".to_owned(),
            Value::Object(metadata.clone().into_iter().collect()).to_string(),
        ),
    ]);
    if let Some(email) = input.customer.and_then(|c| c.email) {
        extra.insert("customer_email".into(), email);
    }
    Ok(SimPayment {
        id: hub.new_id("ch_sandbox_"),
        provider: ProviderId::MorA,
        order_id,
        amount_minor,
        currency,
        kind,
        status: SimStatus::Open,
        success_url: input
            .success_url
            .unwrap_or_else(|| hub.public_base_url().to_owned()),
        // Creem's checkout has no cancel URL; leaving it goes back to the site.
        cancel_url: hub.public_base_url().to_owned(),
        notify_url,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra,
    })
}

#[handler]
async fn create_checkout(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let input: CreateCheckoutInput = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    match payment_from(&hub, input) {
        Ok(payment) => match hub.insert_payment(
            payment.clone(),
            ["success_url", "success_url", "metadata.notifyUrl"],
        ) {
            Ok(()) => Json(checkout_json(&hub, &payment)).into_response(),
            Err(foreign) => error(StatusCode::BAD_REQUEST, &foreign.to_string()),
        },
        Err(problem) => error(StatusCode::BAD_REQUEST, problem),
    }
}

#[derive(Debug, Deserialize)]
struct RetrieveQuery {
    checkout_id: String,
}

#[handler]
fn retrieve_checkout(
    request: &Request,
    query: Query<RetrieveQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    match hub
        .payment(&query.checkout_id)
        .filter(|p| p.provider == ProviderId::MorA)
    {
        Some(payment) => Json(checkout_json(&hub, &payment)).into_response(),
        None => error(StatusCode::NOT_FOUND, "Checkout not found"),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelInput {
    #[serde(default)]
    mode: Option<String>,
}

#[handler]
async fn cancel_subscription(
    request: &Request,
    Path(id): Path<String>,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let input: CancelInput = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    if hub
        .subscription(&id)
        .is_none_or(|s| s.provider != ProviderId::MorA)
    {
        return error(StatusCode::NOT_FOUND, "Subscription not found");
    }
    // Creem's default mode is immediate; `scheduled` keeps the subscription to its period end.
    let at_period_end = input.mode.as_deref() == Some("scheduled");
    match hub.cancel_subscription(&id, at_period_end).await {
        Ok(subscription) => Json(subscription_json(&hub, &subscription)).into_response(),
        Err(SandboxError::NotFound) => error(StatusCode::NOT_FOUND, "Subscription not found"),
        Err(SandboxError::Conflict(problem)) => error(StatusCode::BAD_REQUEST, &problem),
    }
}

fn metadata_of(payment: &SimPayment) -> Value {
    payment
        .extra
        .get("metadata")
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_else(|| json!({ "orderId": payment.order_id }))
}

fn customer_json(payment: &SimPayment) -> Value {
    json!({
        "id": "cust_sandbox",
        "object": "customer",
        "email": payment
            .extra
            .get("customer_email")
            .cloned()
            .unwrap_or_else(|| "buyer@sandbox.invalid".into()),
        "name": "Sandbox Buyer",
        "country": "NL",
        "mode": "test",
    })
}

/// The transaction that paid a checkout: for a subscription, its first period's charge.
fn first_transaction_id(hub: &Hub, payment: &SimPayment) -> String {
    payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id))
        .and_then(|s| s.charges.first().map(|c| c.id.clone()))
        .unwrap_or_else(|| format!("tran_{}", payment.id))
}

fn order_json(hub: &Hub, payment: &SimPayment, updated_at_ms: i64) -> Value {
    let kind = match payment.kind {
        SimKind::OneTime => "onetime",
        SimKind::Subscription { .. } => "recurring",
    };
    json!({
        "id": format!("ord_{}", payment.id),
        "object": "order",
        "customer": "cust_sandbox",
        "product": payment.extra.get("product_id"),
        "amount": payment.amount_minor,
        "sub_total": payment.amount_minor,
        "tax_amount": 0,
        "amount_due": payment.amount_minor,
        "amount_paid": payment.amount_minor,
        "currency": payment.currency.code(),
        "status": "paid",
        "type": kind,
        "transaction": first_transaction_id(hub, payment),
        "created_at": iso(payment.created_at_ms),
        "updated_at": iso(updated_at_ms),
        "mode": "test",
    })
}

/// A checkout as Creem shows it (`CheckoutEntity`).
fn checkout_json(hub: &Hub, payment: &SimPayment) -> Value {
    let status = match payment.status {
        SimStatus::Paid => "completed",
        SimStatus::Canceled => "expired",
        SimStatus::Open | SimStatus::Approved | SimStatus::Declined => "pending",
    };
    let mut checkout = json!({
        "id": payment.id,
        "object": "checkout",
        "mode": "test",
        "status": status,
        "request_id": payment.order_id,
        "product": payment.extra.get("product_id"),
        "units": 1,
        "checkout_url": hub.checkout_url(&payment.id),
        "success_url": payment.success_url,
        "custom_fields": [],
        "metadata": metadata_of(payment),
    });
    if payment.status == SimStatus::Paid {
        checkout["order"] = order_json(hub, payment, hub.now_ms());
        checkout["customer"] = customer_json(payment);
        // Like Creem's published sample: the subscription without its period (the first
        // `subscription.paid` carries that).
        if let Some(id) = &payment.subscription_id {
            checkout["subscription"] = json!({
                "id": id, "object": "subscription", "product": payment.extra.get("product_id"),
                "customer": "cust_sandbox",
                "collection_method": "charge_automatically",
                "status": "active",
                "canceled_at": null,
                "created_at": iso(payment.created_at_ms),
                "metadata": metadata_of(payment),
                "mode": "test",
            });
        }
    }
    checkout
}

/// A subscription as Creem shows it (`SubscriptionEntity`), product and customer expanded.
fn subscription_json(hub: &Hub, subscription: &SimSubscription) -> Value {
    let payment = hub.payment(&subscription.payment_id);
    let status = match subscription.status {
        SimSubscriptionStatus::Active => "active",
        SimSubscriptionStatus::CancelScheduled => "scheduled_cancel",
        SimSubscriptionStatus::Canceled => "canceled",
    };
    // The first period started when the subscription did.
    let created_at_ms = subscription.anchor_ms;
    let now = hub.now_ms();
    json!({
        "id": subscription.id,
        "object": "subscription",
        "product": {
            "id": payment.as_ref().and_then(|p| {
                p.extra
                    .get(subscriptions::SWITCHED_PRODUCT_ID)
                    .or_else(|| p.extra.get("product_id"))
                    .cloned()
            }),
            "object": "product",
            "price": subscription.amount_minor,
            "currency": subscription.currency.code(),
            "billing_type": "recurring",
            "billing_period": billing_period(subscription.interval_months),
            "mode": "test",
        },
        "customer": payment.as_ref().map(customer_json),
        "collection_method": "charge_automatically",
        "status": status,
        // The charge that paid the current period.
        "last_transaction_id": subscription.charges.last().map(|c| c.id.clone()),
        "last_transaction_date": iso(subscription.period_start_ms),
        "next_transaction_date": iso(subscription.period_end_ms),
        "current_period_start_date": iso(subscription.period_start_ms),
        "current_period_end_date": iso(subscription.period_end_ms),
        "canceled_at": (subscription.status == SimSubscriptionStatus::Canceled).then(|| iso(now)),
        "created_at": iso(created_at_ms),
        "updated_at": iso(now),
        "metadata": payment.as_ref().map(metadata_of),
        "mode": "test",
    })
}

fn billing_period(months: u32) -> String {
    match months {
        1 => "every-month".into(),
        3 => "every-three-months".into(),
        6 => "every-six-months".into(),
        12 => "every-year".into(),
        n => format!("every-{n}-months"),
    }
}

/// `refund.created`'s object: this refund and the transaction's running refunded total.
fn refund_json(hub: &Hub, payment: &SimPayment, refund_id: &str, amount_minor: i64) -> Value {
    let subscription = payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id));
    let refund_status = if payment.refunded_minor >= payment.amount_minor {
        "refunded"
    } else {
        "partially_refunded"
    };
    json!({
        "id": refund_id,
        "object": "refund",
        "status": "succeeded",
        "refund_amount": amount_minor,
        "refund_currency": payment.currency.code(),
        "reason": "requested_by_customer",
        "transaction": {
            "id": first_transaction_id(hub, payment),
            "object": "transaction",
            "amount": payment.amount_minor,
            "amount_paid": payment.amount_minor,
            "currency": payment.currency.code(),
            "tax_amount": 0,
            "status": refund_status,
            "refunded_amount": payment.refunded_minor,
            "order": format!("ord_{}", payment.id),
            "subscription": payment.subscription_id,
            "mode": "test",
        },
        "subscription": subscription.map(|s| subscription_json(hub, &s)),
        // By id only (the SDK's types allow it): the gateway reads the checkout.
        "checkout": payment.id,
        "order": order_json(hub, payment, hub.now_ms()),
        "customer": customer_json(payment),
        "created_at": hub.now_ms(),
        "mode": "test",
    })
}

/// A subscription charge as Creem's `TransactionEntity`, with its running refunded total.
fn charge_transaction_json(
    payment: &SimPayment,
    subscription: &SimSubscription,
    charge: &SimCharge,
    status: &str,
) -> Value {
    json!({
        "id": charge.id,
        "object": "transaction",
        "amount": charge.amount_minor,
        "amount_paid": charge.amount_minor,
        "currency": subscription.currency.code(),
        "type": "invoice",
        "tax_amount": 0,
        "status": status,
        "refunded_amount": charge.refunded_minor,
        "order": format!("ord_{}", payment.id),
        "subscription": subscription.id,
        "description": "Subscription payment",
        "period_start": charge.period_start_ms,
        "period_end": charge.period_end_ms,
        "created_at": charge.period_start_ms,
        "mode": "test",
    })
}

/// `refund.created` for one of a subscription's charges: this refund, and the charge's
/// transaction with its running refunded total.
fn charge_refund_json(
    hub: &Hub,
    payment: &SimPayment,
    subscription: &SimSubscription,
    charge: &SimCharge,
    refund_id: &str,
    amount_minor: i64,
) -> Value {
    let status = if charge.refunded_minor >= charge.amount_minor {
        "refunded"
    } else {
        "partially_refunded"
    };
    json!({
        "id": refund_id,
        "object": "refund",
        "status": "succeeded",
        "refund_amount": amount_minor,
        "refund_currency": subscription.currency.code(),
        "reason": "requested_by_customer",
        "transaction": charge_transaction_json(payment, subscription, charge, status),
        "subscription": subscription_json(hub, subscription),
        "checkout": {
            "id": payment.id, "object": "checkout", "request_id": payment.order_id,
            "status": "completed", "metadata": metadata_of(payment), "mode": "test",
        },
        "order": order_json(hub, payment, hub.now_ms()),
        "customer": customer_json(payment),
        "created_at": hub.now_ms(),
        "mode": "test",
    })
}

/// `dispute.created`: Creem takes the whole charge back when the chargeback arrives, so the
/// transaction shows `chargeback` and its whole amount refunded (as in Creem's sample).
fn dispute_json(
    hub: &Hub,
    payment: &SimPayment,
    subscription: &SimSubscription,
    charge: &SimCharge,
    dispute_id: &str,
) -> Value {
    json!({
        "id": dispute_id,
        "object": "dispute",
        "amount": charge.amount_minor,
        "currency": subscription.currency.code(),
        "transaction": charge_transaction_json(payment, subscription, charge, "chargeback"),
        "subscription": subscription_json(hub, subscription),
        "checkout": {
            "id": payment.id, "object": "checkout", "product": payment.extra.get("product_id"),
            "units": 1, "custom_fields": [], "status": "completed", "mode": "test",
        },
        "order": order_json(hub, payment, hub.now_ms()),
        "customer": customer_json(payment),
        "created_at": hub.now_ms(),
        "mode": "test",
    })
}

#[derive(Debug, Deserialize)]
struct TransactionQuery {
    transaction_id: String,
}

/// A one-time payment's transaction (`tran_{checkout id}`), with its running refunded total.
fn payment_transaction_json(hub: &Hub, payment: &SimPayment) -> Value {
    let status = match payment.refunded_minor {
        0 => "paid",
        r if r >= payment.amount_minor => "refunded",
        _ => "partialRefund",
    };
    json!({
        "id": first_transaction_id(hub, payment),
        "object": "transaction",
        "amount": payment.amount_minor,
        "amount_paid": payment.amount_minor,
        "currency": payment.currency.code(),
        "type": "payment",
        "tax_amount": 0,
        "status": status,
        "refunded_amount": payment.refunded_minor,
        "order": format!("ord_{}", payment.id),
        "subscription": payment.subscription_id,
        "customer": "cust_sandbox",
        "created_at": payment.created_at_ms,
        "mode": "test",
    })
}

/// `GET /v1/transactions?transaction_id=…`: a subscription's charge or a one-time payment's.
#[handler]
fn retrieve_transaction(
    request: &Request,
    query: Query<TransactionQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let id = query.transaction_id.as_str();
    let charge = hub
        .subscriptions()
        .into_iter()
        .filter(|s| s.provider == ProviderId::MorA)
        .find_map(|s| Some((s.charges.iter().find(|c| c.id == id)?.clone(), s)));
    if let Some((charge, subscription)) = charge
        && let Some(payment) = hub.payment(&subscription.payment_id)
    {
        let status = if charge.refunded_minor == 0 {
            "paid"
        } else if charge.refunded_minor >= charge.amount_minor {
            "refunded"
        } else {
            "partialRefund"
        };
        return Json(charge_transaction_json(
            &payment,
            &subscription,
            &charge,
            status,
        ))
        .into_response();
    }
    let payment = id
        .strip_prefix("tran_")
        .and_then(|checkout| hub.payment(checkout))
        .filter(|p| p.provider == ProviderId::MorA && p.status == SimStatus::Paid);
    match payment {
        Some(payment) => Json(payment_transaction_json(&hub, &payment)).into_response(),
        None => error(StatusCode::NOT_FOUND, "Transaction not found"),
    }
}

#[derive(Debug, Deserialize)]
struct ProductQuery {
    product_id: String,
}

/// `GET /v1/products?product_id=…`: the sandbox has no products, so a product is what the
/// latest checkout of it said it costs.
#[handler]
fn retrieve_product(
    request: &Request,
    query: Query<ProductQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let payment = hub
        .payments()
        .into_iter()
        .filter(|p| p.provider == ProviderId::MorA)
        .filter(|p| p.extra.get("product_id") == Some(&query.product_id))
        .max_by_key(|p| p.created_at_ms);
    let Some(payment) = payment else {
        return error(StatusCode::NOT_FOUND, "Product not found");
    };
    let (billing_type, billing_period) = match payment.kind {
        SimKind::OneTime => ("onetime", "once".to_owned()),
        SimKind::Subscription {
            interval_months, ..
        } => ("recurring", billing_period(interval_months)),
    };
    Json(json!({
        "id": query.product_id,
        "object": "product",
        "name": query.product_id,
        "description": "Sandbox product",
        "price": payment.amount_minor,
        "currency": payment.currency.code(),
        "billing_type": billing_type,
        "billing_period": billing_period,
        "status": "active",
        "tax_mode": "exclusive",
        "tax_category": "saas",
        "created_at": iso(payment.created_at_ms),
        "updated_at": iso(payment.created_at_ms),
        "mode": "test",
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    #[serde(default)]
    page_number: Option<u64>,
    #[serde(default)]
    page_size: Option<u64>,
}

/// `GET /v1/products/search`: the products checked out so far (the sandbox has no catalog of
/// its own), a page of them, each in test mode, in Creem's paginated shape.
#[handler]
fn search_products(request: &Request, query: Query<SearchQuery>, hub: Data<&Arc<Hub>>) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let mut ids: Vec<String> = hub
        .payments()
        .into_iter()
        .filter(|p| p.provider == ProviderId::MorA)
        .filter_map(|p| p.extra.get("product_id").cloned())
        .collect();
    ids.sort();
    ids.dedup();
    let page_size = query.page_size.unwrap_or(10).clamp(1, 100);
    let page_number = query.page_number.unwrap_or(1).max(1);
    let total = u64::try_from(ids.len()).unwrap_or(u64::MAX);
    let skip = usize::try_from((page_number - 1).saturating_mul(page_size)).unwrap_or(usize::MAX);
    let take = usize::try_from(page_size).unwrap_or(usize::MAX);
    let items: Vec<Value> = ids
        .iter()
        .skip(skip)
        .take(take)
        .map(|id| json!({ "id": id, "object": "product", "mode": "test", "status": "active" }))
        .collect();
    let total_pages = total.div_ceil(page_size);
    Json(json!({
        "items": items,
        "pagination": {
            "total_records": total,
            "total_pages": total_pages,
            "current_page": page_number,
            "next_page": (page_number < total_pages).then_some(page_number + 1),
            "prev_page": (page_number > 1).then_some(page_number - 1),
        },
    }))
    .into_response()
}
