//! The Waffo Pancake (`mor_c`) simulator: the part of Pancake's API the gateway calls, and
//! Pancake's webhooks.
//!
//! Served at `/sandbox/mor_c`: `POST /v1/actions/checkout/create-session`,
//! `POST /v1/actions/subscription-order/cancel-order` and `POST /v1/graphql`. Each checks the
//! request signature as Pancake does: `X-Merchant-Id`, `X-Timestamp` within five minutes of now,
//! and `X-Signature` = RSA-SHA256 over `POST\n{path}\n{X-Timestamp}\n{base64(SHA-256(body))}`,
//! verified with [`CREDENTIALS`]`.merchant_public_pem`; failures answer in Pancake's envelope
//! (`{"data":null,"errors":[…]}`). The price comes from the session's `priceSnapshot`, a real
//! Pancake field; the billing interval, which Pancake reads from the product, comes from
//! `metadata.intervalMonths` (the real Pancake only echoes it back). Pancake posts webhooks to
//! the store's registered endpoint; the sandbox posts them to `metadata.notifyUrl`, else to
//! `{public base}/api/payment/webhook/mor_c`, signed with [`CREDENTIALS`]`.provider_private_pem`
//! as `X-Waffo-Signature: t=<ms>,v1=<base64 RSA-SHA256("{t}.{body}")>`. The GraphQL endpoint
//! answers the gateway's three queries from their variables (`storeId` + `ref`: the order status;
//! `id`: a subscription order's payments; `storeId` alone: the credential check's store read,
//! `null` for a store that is not the sandbox merchant's); it parses no GraphQL. A subscription's payments are
//! its charges: the first period's is the checkout's payment.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use domain::{Currency, Money, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json};
use poem::{Body, IntoResponse, Request, Response, Route, handler, post};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::{
    PrivateKey, PublicKey, b64, private_key, public_key, rsa_sha256_sign, rsa_sha256_verify,
    sha256, unb64,
};

use crate::credentials::CREDENTIALS;
use crate::formats::{display_amount, parse_display};
use crate::hub::{
    Hub, SandboxError, SimCharge, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription,
    SimSubscriptionStatus, SimWebhook,
};
use crate::simulator::Simulator;

/// The sandbox merchant (`X-Merchant-Id`).
pub const SANDBOX_MERCHANT_ID: &str = "MER_sandboxTally0000000000";
/// The sandbox store.
pub const SANDBOX_STORE_ID: &str = "STO_sandboxTally0000000000";
/// The sandbox's environment: its webhooks say `"mode": "test"`.
pub const SANDBOX_MODE: &str = "test";
/// How far `X-Timestamp` may be from now, in seconds.
const REQUEST_WINDOW_S: i64 = 300;
/// The largest request body the simulator reads, in bytes.
const MAX_BODY_BYTES: usize = 64 * 1024;
const CREATE_SESSION: &str = "/v1/actions/checkout/create-session";
const CANCEL_ORDER: &str = "/v1/actions/subscription-order/cancel-order";
const GRAPHQL: &str = "/v1/graphql";

/// The Waffo Pancake simulator.
#[derive(Debug, Clone, Copy, Default)]
pub struct MorCSimulator;

/// The `[providers.mor_c]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/mor_c`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "merchantId": SANDBOX_MERCHANT_ID,
        "privateKey": CREDENTIALS.merchant_private_pem,
        "webhookPublicKey": CREDENTIALS.provider_public_pem,
        "storeId": SANDBOX_STORE_ID,
        "mode": SANDBOX_MODE,
        "baseUrl": api_base_url,
    })
}

fn merchant_key() -> Option<&'static PublicKey> {
    static KEY: OnceLock<Option<PublicKey>> = OnceLock::new();
    KEY.get_or_init(|| public_key(CREDENTIALS.merchant_public_pem).ok())
        .as_ref()
}

fn platform_key() -> Option<&'static PrivateKey> {
    static KEY: OnceLock<Option<PrivateKey>> = OnceLock::new();
    KEY.get_or_init(|| private_key(CREDENTIALS.provider_private_pem).ok())
        .as_ref()
}

#[async_trait]
impl Simulator for MorCSimulator {
    // A declined card sends nothing: the checkout stays open for another try.
    fn tells_declines(&self, _payment: &SimPayment) -> bool {
        false
    }

    fn provider(&self) -> ProviderId {
        ProviderId::MorC
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        Route::new()
            .at(CREATE_SESSION, post(create_session))
            .at(CANCEL_ORDER, post(cancel_order))
            .at(GRAPHQL, post(graphql))
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        events_for(hub, event)
            .into_iter()
            .filter_map(|(kind, id, data)| signed_event(hub, kind, &id, data))
            .collect()
    }
}

/// `(event type, event id, data)` for each webhook Pancake sends on `event`.
fn events_for(hub: &Hub, event: &SimEvent) -> Vec<(&'static str, String, Value)> {
    match event {
        SimEvent::Paid(p) => vec![("order.completed", pancake_order_id(p), paid_data(p, hub))],
        SimEvent::SubscriptionStarted(p, s) => vec![
            status_event(hub, s, "subscription.activated", "active"),
            (
                "subscription.payment_succeeded",
                first_payment_id(hub, p),
                paid_data(p, hub),
            ),
        ],
        SimEvent::Renewed(s, transaction) => vec![
            (
                "subscription.payment_succeeded",
                transaction.clone(),
                renewal_payment_data(hub, s, transaction),
            ),
            status_event(hub, s, "subscription.renewed", "active"),
        ],
        SimEvent::RenewalFailed(s) => {
            vec![status_event(hub, s, "subscription.past_due", "past_due")]
        }
        SimEvent::SubscriptionCancelScheduled(s) => {
            vec![status_event(hub, s, "subscription.canceling", "canceling")]
        }
        SimEvent::SubscriptionCanceled(s) => {
            vec![status_event(hub, s, "subscription.canceled", "canceled")]
        }
        SimEvent::Refunded {
            payment,
            refund_id,
            amount_minor,
        } => {
            vec![(
                "refund.succeeded",
                refund_id.clone(),
                refund_data(hub, payment, *amount_minor),
            )]
        }
        SimEvent::ChargeRefunded {
            subscription,
            charge,
            refund_id,
            amount_minor,
            dispute: false,
        } => charge_refund_event(hub, subscription, charge, refund_id, *amount_minor)
            .into_iter()
            .collect(),
        // Pancake has no dispute or chargeback webhook (its event list has none; chargebacks
        // only reach the merchant as a notification e-mail), so a lost dispute sends nothing.
        SimEvent::ChargeRefunded { dispute: true, .. } => Vec::new(),
        // Pancake has no event for a declined card (the session stays open) or an approval.
        SimEvent::Declined(_) | SimEvent::Approved(_) => Vec::new(),
    }
}

/// A subscription event: `event_type` about `s`, which is now in `status`.
fn status_event(
    hub: &Hub,
    s: &SimSubscription,
    event_type: &'static str,
    status: &str,
) -> (&'static str, String, Value) {
    (event_type, s.id.clone(), subscription_data(hub, s, status))
}

/// `refund.succeeded` for a refunded subscription charge (none if its payment is gone).
fn charge_refund_event(
    hub: &Hub,
    subscription: &SimSubscription,
    charge: &SimCharge,
    refund_id: &str,
    amount_minor: i64,
) -> Option<(&'static str, String, Value)> {
    let payment = hub.payment(&subscription.payment_id)?;
    Some((
        "refund.succeeded",
        refund_id.to_owned(),
        charge_refund_data(&payment, subscription, charge, amount_minor),
    ))
}

fn signed_event(hub: &Hub, event_type: &str, event_id: &str, data: Value) -> Option<SimWebhook> {
    let now = hub.now_ms();
    let envelope = json!({
        "id": hub.new_id("dlv_sandbox_"),
        "timestamp": iso(now),
        "eventType": event_type,
        "eventId": event_id,
        "storeId": SANDBOX_STORE_ID,
        "storeName": "Tally Sandbox",
        "mode": SANDBOX_MODE,
        "data": data,
    });
    let body = envelope.to_string().into_bytes();
    let mut message = format!("{now}.").into_bytes();
    message.extend_from_slice(&body);
    let Some(key) = platform_key() else {
        tracing::error!("sandbox mor_c: the provider key cannot be read; no webhook sent");
        return None;
    };
    let signature = b64(&rsa_sha256_sign(key, &message));
    Some(SimWebhook {
        headers: vec![(
            "X-Waffo-Signature".into(),
            format!("t={now},v1={signature}"),
        )],
        content_type: "application/json".into(),
        body,
    })
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// A Pancake-style refusal.
fn refusal(status: StatusCode, layer: &str, message: &str) -> Response {
    (
        status,
        Json(json!({ "data": null, "errors": [{ "message": message, "layer": layer }] })),
    )
        .into_response()
}

/// Why a request is refused, before it becomes Pancake's envelope.
#[derive(Debug)]
struct Refusal(StatusCode, &'static str, &'static str);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        refusal(self.0, self.1, self.2)
    }
}

/// Read and authenticate a signed request to `path`, as Pancake's gateway does.
async fn signed_body(
    request: &Request,
    body: Body,
    path: &str,
    hub: &Hub,
) -> Result<Vec<u8>, Refusal> {
    let denied = |message: &'static str| Refusal(StatusCode::UNAUTHORIZED, "gateway", message);
    if request.header("x-merchant-id") != Some(SANDBOX_MERCHANT_ID) {
        return Err(denied("Unknown merchant"));
    }
    let timestamp_s = request
        .header("x-timestamp")
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| denied("Missing or malformed X-Timestamp"))?;
    if (hub.now_ms().div_euclid(1000) - timestamp_s).abs() > REQUEST_WINDOW_S {
        return Err(denied("X-Timestamp outside the allowed window"));
    }
    let signature = request
        .header("x-signature")
        .and_then(unb64)
        .ok_or_else(|| denied("Missing or malformed X-Signature"))?;
    let bytes = body.into_bytes_limit(MAX_BODY_BYTES).await.map_err(|_| {
        Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "gateway",
            "Request body too large",
        )
    })?;
    let canonical = format!("POST\n{path}\n{timestamp_s}\n{}", b64(&sha256(&bytes)));
    let key = merchant_key().ok_or_else(|| denied("Sandbox merchant key unavailable"))?;
    if !rsa_sha256_verify(key, canonical.as_bytes(), &signature) {
        return Err(denied("Invalid signature"));
    }
    Ok(bytes.to_vec())
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(bytes).map_err(|_| {
        Refusal(
            StatusCode::BAD_REQUEST,
            "order",
            "Request body does not match this action",
        )
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionInput {
    product_id: String,
    currency: String,
    #[serde(default)]
    price_snapshot: Option<PriceInput>,
    #[serde(default)]
    order_merchant_external_id: Option<String>,
    #[serde(default)]
    buyer_email: Option<String>,
    #[serde(default)]
    success_url: Option<String>,
    #[serde(default)]
    expires_in_seconds: Option<i64>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct PriceInput {
    amount: String,
}

/// The payment a session request describes, or why Pancake (or the sandbox) refuses it.
fn payment_from(hub: &Hub, input: SessionInput) -> Result<SimPayment, &'static str> {
    if input.product_id.trim().is_empty() {
        return Err("productId must not be empty");
    }
    let currency: Currency = input
        .currency
        .parse()
        .map_err(|_| "Currency not supported")?;
    let amount = input
        .price_snapshot
        .as_ref()
        .ok_or("the sandbox needs priceSnapshot (it has no product prices)")
        .and_then(|p| {
            parse_display(&p.amount, currency).ok_or("priceSnapshot.amount is not a display amount")
        })?;
    let kind = kind_of(&input)?;
    if currency == Currency::Cny && kind != SimKind::OneTime {
        return Err("CNY is not available for subscription products");
    }
    let order_id = input
        .order_merchant_external_id
        .clone()
        .or_else(|| input.metadata.get("orderId").cloned())
        .ok_or("orderMerchantExternalId is required by the sandbox")?;
    let notify_url = input
        .metadata
        .get("notifyUrl")
        .cloned()
        .unwrap_or_else(|| format!("{}/api/payment/webhook/mor_c", hub.public_base_url()));
    let extra = extra_of(hub, &input);
    Ok(SimPayment {
        id: hub.new_id("cs_sandbox_"),
        provider: ProviderId::MorC,
        order_id,
        amount_minor: amount.amount_minor(),
        currency,
        kind,
        status: SimStatus::Open,
        success_url: input
            .success_url
            .unwrap_or_else(|| hub.public_base_url().to_owned()),
        // Pancake's session has no cancel URL; leaving the checkout goes back to the site.
        cancel_url: hub.public_base_url().to_owned(),
        notify_url,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: hub.now_ms(),
        extra,
    })
}

/// One-time, or a subscription billed every `metadata.intervalMonths` (a sandbox hint).
fn kind_of(input: &SessionInput) -> Result<SimKind, &'static str> {
    match input
        .metadata
        .get("intervalMonths")
        .map(|m| m.parse::<u32>())
    {
        None => Ok(SimKind::OneTime),
        Some(Ok(months)) if (1..=12).contains(&months) => Ok(SimKind::Subscription {
            interval_months: months,
            plan_ref: Some(input.product_id.clone()),
        }),
        Some(_) => Err("metadata.intervalMonths must be 1 to 12"),
    }
}

/// What the simulator keeps beside the payment: product, Pancake's order id, metadata, e-mail.
fn extra_of(hub: &Hub, input: &SessionInput) -> BTreeMap<String, String> {
    let mut extra = BTreeMap::from([
        ("product_id".to_owned(), input.product_id.clone()),
        ("pancake_order_id".to_owned(), hub.new_id("ORD_sandbox")),
        ("metadata".to_owned(), json!(input.metadata).to_string()),
        (
            "expires_in_seconds".to_owned(),
            input.expires_in_seconds.unwrap_or(2_700).to_string(),
        ),
    ]);
    if let Some(email) = &input.buyer_email {
        extra.insert("buyer_email".into(), email.clone());
    }
    extra
}

#[handler]
async fn create_session(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    let bytes = match signed_body(request, body, CREATE_SESSION, &hub).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused.into_response(),
    };
    let input: SessionInput = match parse(&bytes) {
        Ok(input) => input,
        Err(refused) => return refused.into_response(),
    };
    let payment = match payment_from(&hub, input) {
        Ok(payment) => payment,
        Err(problem) => return refusal(StatusCode::BAD_REQUEST, "order", problem),
    };
    let lifetime_s = payment
        .extra
        .get("expires_in_seconds")
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(2_700);
    let answer = json!({ "data": {
        "sessionId": payment.id,
        "checkoutUrl": hub.checkout_url(&payment.id),
        "expiresAt": iso(payment.created_at_ms.saturating_add(lifetime_s.saturating_mul(1000))),
    }});
    match hub.insert_payment(payment, ["successUrl", "successUrl", "metadata.notifyUrl"]) {
        Ok(()) => Json(answer).into_response(),
        Err(foreign) => refusal(StatusCode::BAD_REQUEST, "order", &foreign.to_string()),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelInput {
    order_id: String,
}

#[handler]
async fn cancel_order(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    let input: CancelInput = match signed_body(request, body, CANCEL_ORDER, &hub)
        .await
        .and_then(|b| parse(&b))
    {
        Ok(input) => input,
        Err(refused) => return refused.into_response(),
    };
    if hub
        .subscription(&input.order_id)
        .is_none_or(|s| s.provider != ProviderId::MorC)
    {
        return refusal(
            StatusCode::NOT_FOUND,
            "order",
            "Subscription order not found",
        );
    }
    // An active subscription becomes `canceling` and ends with its paid period.
    match hub.cancel_subscription(&input.order_id, true).await {
        Ok(s) => {
            Json(json!({ "data": { "orderId": s.id, "status": "canceling" } })).into_response()
        }
        Err(SandboxError::NotFound) => refusal(
            StatusCode::NOT_FOUND,
            "order",
            "Subscription order not found",
        ),
        Err(SandboxError::Conflict(problem)) => refusal(StatusCode::BAD_REQUEST, "order", &problem),
    }
}

#[derive(Debug, Deserialize)]
struct GraphqlInput {
    #[serde(default)]
    variables: BTreeMap<String, Value>,
}

#[handler]
async fn graphql(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    let input: GraphqlInput = match signed_body(request, body, GRAPHQL, &hub)
        .await
        .and_then(|b| parse(&b))
    {
        Ok(input) => input,
        Err(refused) => return refused.into_response(),
    };
    let store_only = !input.variables.contains_key("ref") && !input.variables.contains_key("id");
    if let (true, Some(store_id)) = (
        store_only,
        input.variables.get("storeId").and_then(Value::as_str),
    ) {
        // The credential check's read: the store, when it is the sandbox merchant's.
        let store = (store_id == SANDBOX_STORE_ID)
            .then(|| json!({ "id": SANDBOX_STORE_ID, "status": "active" }));
        return Json(json!({ "data": { "store": store } })).into_response();
    }
    if let Some(id) = input.variables.get("id").and_then(Value::as_str) {
        return Json(
            json!({ "data": { "subscriptionOrder": subscription_payments_json(&hub, id) } }),
        )
        .into_response();
    }
    let reference = input
        .variables
        .get("ref")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let payment = hub.payment_for_order(ProviderId::MorC, reference);
    let (onetime, subscriptions) = match &payment {
        Some(p) if p.kind == SimKind::OneTime => (vec![onetime_order_json(p)], vec![]),
        Some(p) => (vec![], vec![subscription_order_json(&hub, p)]),
        None => (vec![], vec![]),
    };
    Json(json!({ "data": { "onetimeOrders": onetime, "subscriptionOrders": subscriptions } }))
        .into_response()
}

fn display(minor: i64, currency: Currency) -> String {
    Money::from_minor(minor, currency)
        .map(display_amount)
        .unwrap_or_default()
}

fn onetime_order_json(payment: &SimPayment) -> Value {
    let status = match payment.status {
        SimStatus::Paid => "completed",
        SimStatus::Canceled => "canceled",
        SimStatus::Open | SimStatus::Approved | SimStatus::Declined => "pending",
    };
    let amount = display(payment.amount_minor, payment.currency);
    json!({
        "id": pancake_order_id(payment),
        "status": status,
        "orderMerchantExternalId": payment.order_id,
        "updatedAt": iso(payment.created_at_ms),
        "priceSnapshot": {
            "currency": payment.currency.code(),
            "subtotal": amount,
            "taxAmount": display(0, payment.currency),
            "total": amount,
        },
    })
}

fn subscription_order_json(hub: &Hub, payment: &SimPayment) -> Value {
    let subscription = payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id));
    let status = match (&subscription, payment.status) {
        (Some(s), _) => subscription_status(s).to_owned(),
        (None, SimStatus::Canceled) => "canceled".to_owned(),
        (None, _) => "pending".to_owned(),
    };
    let amount = display(payment.amount_minor, payment.currency);
    json!({
        "id": subscription.as_ref().map_or_else(|| pancake_order_id(payment), |s| s.id.clone()),
        "status": status,
        "orderMerchantExternalId": payment.order_id,
        "createdAt": iso(payment.created_at_ms),
        "currentPeriodStart": subscription.as_ref().map(|s| iso(s.period_start_ms)),
        "currentPeriodEnd": subscription.as_ref().map(|s| iso(s.period_end_ms)),
        "priceSnapshot": {
            "currency": payment.currency.code(),
            "regularPhase": { "subtotal": amount, "total": amount },
        },
    })
}

fn subscription_status(subscription: &SimSubscription) -> &'static str {
    match subscription.status {
        SimSubscriptionStatus::Active => "active",
        SimSubscriptionStatus::CancelScheduled => "canceling",
        SimSubscriptionStatus::Canceled => "canceled",
    }
}

fn pancake_order_id(payment: &SimPayment) -> String {
    payment
        .extra
        .get("pancake_order_id")
        .cloned()
        .unwrap_or_else(|| format!("ORD_{}", payment.id))
}

fn payment_id(source: &str, n: u32) -> String {
    format!("PAY_{source}_{n}")
}

/// The id of a checkout's payment: for a subscription, its first period's charge.
fn first_payment_id(hub: &Hub, payment: &SimPayment) -> String {
    payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id))
        .and_then(|s| s.charges.first().map(|c| c.id.clone()))
        .unwrap_or_else(|| payment_id(&payment.id, 0))
}

/// `subscriptionOrder(id) { id payments { id status createdAt } }`: a subscription's charges,
/// each made when its period started; `null` for an order the sandbox does not know.
fn subscription_payments_json(hub: &Hub, id: &str) -> Value {
    let Some(subscription) = hub
        .subscription(id)
        .filter(|s| s.provider == ProviderId::MorC)
    else {
        return Value::Null;
    };
    let payments: Vec<Value> = subscription
        .charges
        .iter()
        .map(|c| json!({ "id": c.id, "status": "succeeded", "createdAt": iso(c.period_start_ms) }))
        .collect();
    json!({ "id": subscription.id, "payments": payments })
}

fn metadata_of(payment: &SimPayment) -> Value {
    payment
        .extra
        .get("metadata")
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_else(|| json!({ "orderId": payment.order_id }))
}

/// The fields every order event shares.
fn order_data(payment: &SimPayment, order_id: &str, amount_minor: i64) -> Value {
    let amount = display(amount_minor, payment.currency);
    json!({
        "orderId": order_id,
        "buyerEmail": payment
            .extra
            .get("buyer_email")
            .cloned()
            .unwrap_or_else(|| "buyer@sandbox.invalid".into()),
        "orderMerchantExternalId": payment.order_id,
        "currency": payment.currency.code(),
        "orderMetadata": metadata_of(payment),
        "amount": amount,
        "taxAmount": display(0, payment.currency),
        "subtotal": amount,
        "total": amount,
        "productName": payment.extra.get("product_id"),
    })
}

fn with(mut data: Value, fields: Value) -> Value {
    if let (Some(data), Value::Object(fields)) = (data.as_object_mut(), fields) {
        data.extend(fields);
    }
    data
}

/// `order.completed` (one-time) or the first `subscription.payment_succeeded`.
fn paid_data(payment: &SimPayment, hub: &Hub) -> Value {
    let order_id = payment
        .subscription_id
        .clone()
        .unwrap_or_else(|| pancake_order_id(payment));
    let data = order_data(payment, &order_id, payment.amount_minor);
    let mut fields = json!({
        "paymentId": first_payment_id(hub, payment),
        "paymentStatus": "succeeded",
        "paymentMethod": "card",
        "paymentLast4": "4242", "paymentDate": iso(hub.now_ms()).get(..10),
    });
    if payment.kind == SimKind::OneTime {
        fields["orderStatus"] = json!("completed");
    }
    with(data, fields)
}

fn renewal_payment_data(hub: &Hub, subscription: &SimSubscription, charge_id: &str) -> Value {
    let Some(payment) = billed(hub, subscription) else {
        return json!({ "orderId": subscription.id });
    };
    with(
        order_data(&payment, &subscription.id, subscription.amount_minor),
        json!({
            "paymentId": charge_id,
            "paymentStatus": "succeeded",
            "paymentMethod": "card",
        }),
    )
}

/// The payment that started `subscription`, in the currency the subscription bills now (its
/// price may have changed at the provider since).
fn billed(hub: &Hub, subscription: &SimSubscription) -> Option<SimPayment> {
    hub.payment(&subscription.payment_id)
        .map(|payment| SimPayment {
            currency: subscription.currency,
            ..payment
        })
}

/// A subscription domain event's data: the order fields plus the period.
fn subscription_data(hub: &Hub, subscription: &SimSubscription, status: &str) -> Value {
    let base = match billed(hub, subscription) {
        Some(payment) => order_data(&payment, &subscription.id, subscription.amount_minor),
        None => {
            json!({
                "orderId": subscription.id,
                "currency": subscription.currency.code(),
                "amount": display(subscription.amount_minor, subscription.currency),
            })
        }
    };
    let mut fields = json!({
        "orderStatus": status,
        "billingPeriod": billing_period(subscription.interval_months),
        "currentPeriodStart": iso(subscription.period_start_ms),
        "currentPeriodEnd": iso(subscription.period_end_ms),
    });
    if status == "canceled" {
        fields["canceledAt"] = json!(iso(hub.now_ms()));
    }
    with(base, fields)
}

fn billing_period(months: u32) -> &'static str {
    match months {
        3 => "quarterly",
        12 => "yearly",
        _ => "monthly",
    }
}

/// `refund.succeeded` of a checkout's payment: this refund's own amount (`refundedAmount`, as
/// Pancake's refund events carry "this event's own figure") and the payment it returns money
/// from.
fn refund_data(hub: &Hub, payment: &SimPayment, amount_minor: i64) -> Value {
    let subscription = payment
        .subscription_id
        .as_deref()
        .and_then(|id| hub.subscription(id));
    let (order_id, status) = match &subscription {
        Some(s) => (s.id.clone(), subscription_status(s)),
        None => (pancake_order_id(payment), "completed"),
    };
    let refunded = display(amount_minor, payment.currency);
    let charged = display(payment.amount_minor, payment.currency);
    with(
        order_data(payment, &order_id, amount_minor),
        json!({
            "orderStatus": status,
            "refundedAmount": refunded,
            "originalChargedAmount": charged,
            "originalPayment": { "total": charged, "subtotal": charged, "taxAmount": display(0, payment.currency) },
            "paymentId": first_payment_id(hub, payment),
            "refundStatus": "succeeded",
            "refundReason": "requested_by_customer",
        }),
    )
}

/// `refund.succeeded` of one of a subscription's charges.
fn charge_refund_data(
    payment: &SimPayment,
    subscription: &SimSubscription,
    charge: &SimCharge,
    amount_minor: i64,
) -> Value {
    let charged = display(charge.amount_minor, subscription.currency);
    with(
        order_data(payment, &subscription.id, amount_minor),
        json!({
            "orderStatus": subscription_status(subscription),
            "refundedAmount": display(amount_minor, subscription.currency),
            "originalChargedAmount": charged,
            "originalPayment": { "total": charged, "subtotal": charged, "taxAmount": display(0, subscription.currency) },
            "paymentId": charge.id,
            "refundStatus": "succeeded",
            "refundReason": "requested_by_customer",
        }),
    )
}
