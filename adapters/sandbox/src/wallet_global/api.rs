//! The PayPal endpoints the gateway calls, answering as PayPal does: OAuth client credentials,
//! Orders v2 (create, get, capture), captures, Subscriptions v1 (create, get, cancel) and
//! `verify-webhook-signature`. Every endpoint but the token one wants the bearer token; POSTs
//! that PayPal makes idempotent with `PayPal-Request-Id` are idempotent here too.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::{Currency, ProviderId};
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde::Deserialize;
use serde_json::{Value, json};
use signing::unb64;

use super::resources::{
    CAPTURE_ID, CAPTURE_REQUEST_ID, CAPTURED_AT_MS, CAPTURES, CREATE_REQUEST_ID, EMAIL,
    PAYER_ACTION, PLAN_ID, REFUND_ID_AT_PREFIX, REFUND_REQUEST_PREFIX, capture_json,
    is_subscription, minor_units, order_json, plan_json, refund_json, sale_of_charge,
    subscription_json,
};
use super::transmission::{VerifyRequest, verifies};
use super::{ACCESS_TOKEN, TOKEN_LIFETIME_S, notify_url};
use crate::credentials::CREDENTIALS;
use crate::hub::{Hub, SandboxError, SimKind, SimPayment, SimStatus};

pub(super) mod revise;
pub(super) mod vault;

/// The largest request body read, in bytes (verification requests carry a whole event).
const MAX_BODY_BYTES: usize = 256 * 1024;
/// The longest billing interval a sandbox subscription may have, in months.
const MAX_INTERVAL_MONTHS: u32 = 120;

/// A refusal in PayPal's format: a status and a JSON body (small, unlike a `Response`).
struct Refusal {
    status: StatusCode,
    body: Value,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// How PayPal names the URLs a payment carries (the webhook URL is the sandbox's setting).
const URL_FIELDS: [&str; 3] = [
    "experience_context.return_url",
    "experience_context.cancel_url",
    "webhook url",
];

/// PayPal's error answer.
fn paypal_error(status: StatusCode, name: &str, issue: &str, description: &str) -> Refusal {
    let body = json!({
        "name": name,
        "message": description,
        "debug_id": "sandbox0debug",
        "details": [{ "issue": issue, "description": description }],
    });
    Refusal { status, body }
}

fn not_found() -> Refusal {
    paypal_error(
        StatusCode::NOT_FOUND,
        "RESOURCE_NOT_FOUND",
        "INVALID_RESOURCE_ID",
        "Specified resource ID does not exist.",
    )
}

fn invalid(issue: &str, description: &str) -> Refusal {
    paypal_error(
        StatusCode::BAD_REQUEST,
        "INVALID_REQUEST",
        issue,
        description,
    )
}

fn unprocessable(issue: &str, description: &str) -> Refusal {
    paypal_error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "UNPROCESSABLE_ENTITY",
        issue,
        description,
    )
}

/// `Authorization: Bearer` with the sandbox's token, as every PayPal REST call needs.
fn authorized(request: &Request) -> Result<(), Refusal> {
    match request
        .header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
    {
        Some(bearer) if bearer == ACCESS_TOKEN => Ok(()),
        _ => Err(Refusal {
            status: StatusCode::UNAUTHORIZED,
            body: json!({
                "error": "invalid_token",
                "error_description": "Authentication failed due to invalid authentication credentials or a missing Authorization header."
            }),
        }),
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(body: Body) -> Result<T, Refusal> {
    let bytes = body
        .into_bytes_limit(MAX_BODY_BYTES)
        .await
        .map_err(|_| invalid("INVALID_PARAMETER_SYNTAX", "The request body is too large."))?;
    serde_json::from_slice(&bytes).map_err(|_| {
        invalid(
            "MALFORMED_REQUEST_JSON",
            "The request JSON is not well formed.",
        )
    })
}

fn request_id(request: &Request) -> Option<String> {
    request
        .header("paypal-request-id")
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The payment first created with `request_id`, for an idempotent replay.
fn created_with(hub: &Hub, request_id: Option<&str>) -> Option<SimPayment> {
    let request_id = request_id?;
    hub.payment_by(ProviderId::WalletGlobal, CREATE_REQUEST_ID, request_id)
}

fn one_time(hub: &Hub, id: &str) -> Option<SimPayment> {
    hub.payment(id)
        .filter(|p| p.provider == ProviderId::WalletGlobal && !is_subscription(p))
}

fn subscription_payment(hub: &Hub, id: &str) -> Option<SimPayment> {
    hub.payment(id)
        .filter(|p| p.provider == ProviderId::WalletGlobal && is_subscription(p))
}

// --- OAuth ------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct TokenForm {
    grant_type: String,
}

/// `POST /v1/oauth2/token`: HTTP Basic client credentials, form `grant_type=client_credentials`.
#[handler]
pub(super) async fn token(request: &Request, body: Body) -> Response {
    let expected = format!(
        "{}:{}",
        CREDENTIALS.paypal_client_id, CREDENTIALS.paypal_client_secret
    );
    let presented = request
        .header("authorization")
        .and_then(|h| h.strip_prefix("Basic "))
        .and_then(unb64)
        .is_some_and(|credentials| credentials == expected.as_bytes());
    if !presented {
        let body = json!({ "error": "invalid_client", "error_description": "Client Authentication failed" });
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    let form = body
        .into_bytes_limit(MAX_BODY_BYTES)
        .await
        .ok()
        .and_then(|b| serde_urlencoded::from_bytes::<TokenForm>(&b).ok());
    if form.is_none_or(|f| f.grant_type != "client_credentials") {
        let body =
            json!({ "error": "unsupported_grant_type", "error_description": "Grant Type is NULL" });
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    Json(json!({
        "scope": "https://uri.paypal.com/services/payments/payment/authcapture https://uri.paypal.com/services/subscriptions https://uri.paypal.com/services/applications/webhooks",
        "access_token": ACCESS_TOKEN,
        "token_type": "Bearer",
        "app_id": "APP-SANDBOX-TALLY",
        "expires_in": TOKEN_LIFETIME_S,
        "nonce": "sandbox",
    }))
    .into_response()
}

// --- Orders -----------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct CreateOrderInput {
    intent: String,
    purchase_units: Vec<UnitInput>,
    #[serde(default)]
    payment_source: Option<PaymentSourceInput>,
    #[serde(default)]
    application_context: Option<ContextInput>,
}

#[derive(Debug, Deserialize)]
struct UnitInput {
    #[serde(default)]
    reference_id: Option<String>,
    #[serde(default)]
    custom_id: Option<String>,
    amount: AmountInput,
}

#[derive(Debug, Deserialize)]
struct AmountInput {
    currency_code: String,
    value: String,
}

#[derive(Debug, Deserialize)]
struct PaymentSourceInput {
    paypal: PaypalSourceInput,
}

#[derive(Debug, Deserialize)]
struct PaypalSourceInput {
    #[serde(default)]
    experience_context: Option<ContextInput>,
    /// The saving instruction of a checkout that keeps the account.
    #[serde(default)]
    attributes: Option<vault::AttributesInput>,
    /// A saved account charged by the merchant.
    #[serde(default)]
    vault_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ContextInput {
    #[serde(default)]
    return_url: Option<String>,
    #[serde(default)]
    cancel_url: Option<String>,
}

fn amount_of(amount: &AmountInput) -> Result<(i64, Currency), Refusal> {
    let currency: Currency = amount
        .currency_code
        .parse()
        .map_err(|_| unprocessable("CURRENCY_NOT_SUPPORTED", "Currency code is not supported."))?;
    let minor = minor_units(&amount.value, currency)
        .filter(|m| *m > 0)
        .ok_or_else(|| {
            unprocessable(
                "DECIMAL_PRECISION",
                "The value of the field should not be more than two decimals.",
            )
        })?;
    Ok((minor, currency))
}

/// The one purchase unit of an order the sandbox captures: `intent` must be `CAPTURE` (else
/// `UNSUPPORTED_INTENT` saying `only_capture`), with exactly one purchase unit.
fn capture_unit<'a>(
    input: &'a CreateOrderInput,
    only_capture: &str,
) -> Result<&'a UnitInput, Refusal> {
    if input.intent != "CAPTURE" {
        return Err(unprocessable("UNSUPPORTED_INTENT", only_capture));
    }
    let [unit] = input.purchase_units.as_slice() else {
        return Err(invalid(
            "INVALID_ARRAY_MAX_ITEMS",
            "The sandbox takes exactly one purchase unit.",
        ));
    };
    Ok(unit)
}

/// The payment a create-order request describes.
fn order_payment(
    hub: &Hub,
    input: CreateOrderInput,
    request_id: Option<String>,
) -> Result<SimPayment, Refusal> {
    let unit = capture_unit(&input, "The sandbox supports intent CAPTURE only.")?;
    let (amount_minor, currency) = amount_of(&unit.amount)?;
    let order_id = unit
        .custom_id
        .clone()
        .or_else(|| unit.reference_id.clone())
        .filter(|o| !o.is_empty());
    let order_id = order_id.ok_or_else(|| {
        invalid(
            "MISSING_REQUIRED_PARAMETER",
            "The sandbox needs custom_id (Tally's order id).",
        )
    })?;
    let payer_action = input.payment_source.is_some();
    let saves = vault::asks_to_save(
        input
            .payment_source
            .as_ref()
            .and_then(|s| s.paypal.attributes.as_ref()),
    )?;
    let context = input
        .payment_source
        .and_then(|s| s.paypal.experience_context)
        .or(input.application_context);
    let (Some(return_url), Some(cancel_url)) =
        context.map_or((None, None), |c| (c.return_url, c.cancel_url))
    else {
        return Err(invalid(
            "MISSING_REQUIRED_PARAMETER",
            "return_url and cancel_url are required.",
        ));
    };
    let mut extra = BTreeMap::new();
    extra.extend(request_id.map(|id| (CREATE_REQUEST_ID.to_owned(), id)));
    if payer_action {
        extra.insert(PAYER_ACTION.to_owned(), "true".to_owned());
    }
    if saves {
        extra.insert(vault::SAVE_ON_SUCCESS.to_owned(), "true".to_owned());
    }
    let id = hub.new_id("SBX");
    let price = (amount_minor, currency);
    Ok(NewPayment {
        id,
        order_id,
        price,
        kind: SimKind::OneTime,
        return_url,
        cancel_url,
        extra,
    }
    .open(hub))
}

/// A new open payment (order or subscription) and what only the simulator keeps of it.
struct NewPayment {
    id: String,
    order_id: String,
    price: (i64, Currency),
    kind: SimKind,
    return_url: String,
    cancel_url: String,
    extra: BTreeMap<String, String>,
}

impl NewPayment {
    fn open(self, hub: &Hub) -> SimPayment {
        let (amount_minor, currency) = self.price;
        SimPayment {
            id: self.id,
            provider: ProviderId::WalletGlobal,
            order_id: self.order_id,
            amount_minor,
            currency,
            kind: self.kind,
            status: SimStatus::Open,
            success_url: self.return_url,
            cancel_url: self.cancel_url,
            notify_url: notify_url(hub),
            refunded_minor: 0,
            subscription_id: None,
            created_at_ms: hub.now_ms(),
            extra: self.extra,
        }
    }
}

/// `POST /v2/checkout/orders`.
#[handler]
pub(super) async fn create_order(request: &Request, body: Body, hub: Data<&Arc<Hub>>) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let request_id = request_id(request);
    if let Some(existing) = created_with(&hub, request_id.as_deref()) {
        if vault::is_charge(&existing) {
            return vault::replay(&existing);
        }
        return (StatusCode::OK, Json(order_json(&hub, &existing))).into_response();
    }
    let input: CreateOrderInput = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let vault_id = input
        .payment_source
        .as_ref()
        .and_then(|s| s.paypal.vault_id.clone());
    if let Some(vault_id) = vault_id {
        return vault::charge(&hub, input, &vault_id, request_id).await;
    }
    match order_payment(&hub, input, request_id) {
        Ok(payment) => match hub.insert_payment(payment.clone(), URL_FIELDS) {
            Ok(()) => (StatusCode::CREATED, Json(order_json(&hub, &payment))).into_response(),
            Err(foreign) => {
                invalid("INVALID_PARAMETER_VALUE", &foreign.to_string()).into_response()
            }
        },
        Err(refusal) => refusal.into_response(),
    }
}

/// `GET /v2/checkout/orders/{id}`.
#[handler]
pub(super) fn get_order(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    match one_time(&hub, &id) {
        Some(payment) => Json(order_json(&hub, &payment)).into_response(),
        None => not_found().into_response(),
    }
}

/// What a capture request comes to, decided atomically on the payment.
enum Claim {
    /// This request captures.
    New,
    /// The capture was made by a request with the same `PayPal-Request-Id`.
    Repeat,
    /// Captured by another request.
    AlreadyCaptured,
    /// Not approved (or voided).
    NotApproved,
}

/// `POST /v2/checkout/orders/{id}/capture`: one capture per order; a repeated
/// `PayPal-Request-Id` gets the first answer, any other request `ORDER_ALREADY_CAPTURED`.
#[handler]
pub(super) async fn capture_order(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    if one_time(&hub, &id).is_none() {
        return not_found().into_response();
    }
    let request_id = request_id(request);
    let capture_id = hub.new_id("CAP");
    let now = hub.now_ms();
    let claim = hub.update_payment(&id, |p| {
        Ok(claim(p, request_id.as_deref(), &capture_id, now))
    });
    match claim {
        Ok(Claim::New) => match hub.complete_payment(&id).await {
            Ok(paid) => {
                vault::save_on_capture(&hub, &paid).await;
                let paid = hub.payment(&id).unwrap_or(paid);
                (StatusCode::CREATED, Json(order_json(&hub, &paid))).into_response()
            }
            Err(e) => unprocessable("ORDER_NOT_APPROVED", &e.to_string()).into_response(),
        },
        Ok(Claim::Repeat) => match one_time(&hub, &id) {
            Some(payment) => {
                (StatusCode::CREATED, Json(order_json(&hub, &payment))).into_response()
            }
            None => not_found().into_response(),
        },
        Ok(Claim::AlreadyCaptured) => unprocessable(
            "ORDER_ALREADY_CAPTURED",
            "Order already captured.If 'intent=CAPTURE' only one capture per order is allowed.",
        )
        .into_response(),
        Ok(Claim::NotApproved) => unprocessable(
            "ORDER_NOT_APPROVED",
            "Payer has not yet approved the Order for payment.",
        )
        .into_response(),
        Err(_) => not_found().into_response(),
    }
}

fn claim(
    payment: &mut SimPayment,
    request_id: Option<&str>,
    capture_id: &str,
    now_ms: i64,
) -> Claim {
    if let Some(first) = payment.extra.get(CAPTURE_REQUEST_ID) {
        return if request_id.is_some_and(|id| id == first) {
            Claim::Repeat
        } else {
            Claim::AlreadyCaptured
        };
    }
    match payment.status {
        SimStatus::Approved => {
            let count = payment
                .extra
                .get(CAPTURES)
                .and_then(|c| c.parse::<u32>().ok())
                .unwrap_or(0);
            payment.extra.insert(
                CAPTURE_REQUEST_ID.into(),
                request_id.unwrap_or_default().to_owned(),
            );
            payment
                .extra
                .insert(CAPTURE_ID.into(), capture_id.to_owned());
            payment
                .extra
                .insert(CAPTURED_AT_MS.into(), now_ms.to_string());
            payment
                .extra
                .insert(CAPTURES.into(), (count + 1).to_string());
            Claim::New
        }
        SimStatus::Paid => Claim::AlreadyCaptured,
        SimStatus::Open | SimStatus::Declined | SimStatus::Canceled => Claim::NotApproved,
    }
}

/// `GET /v2/payments/captures/{id}`.
#[handler]
pub(super) fn get_capture(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let found = hub.payment_by(ProviderId::WalletGlobal, CAPTURE_ID, &id);
    match found {
        Some(payment) => Json(capture_json(&hub, &payment)).into_response(),
        None => not_found().into_response(),
    }
}

#[derive(Debug, Default, Deserialize)]
struct RefundInput {
    #[serde(default)]
    amount: Option<AmountInput>,
}

/// What a refund request comes to before the hub refunds anything.
enum RefundClaim {
    /// Refund this much now, under this refund id.
    New(String, i64),
    /// The same `PayPal-Request-Id` again: the first refund, unchanged.
    Repeat(String, i64),
}

/// Claim a refund of `wanted` (the rest of the capture when `None`) for `request_id`.
fn claim_refund(
    payment: &mut SimPayment,
    request_id: Option<&str>,
    wanted: Option<(i64, Currency)>,
    refund_id: &str,
) -> Result<RefundClaim, Refusal> {
    let key = request_id.map(|id| format!("{REFUND_REQUEST_PREFIX}{id}"));
    if let Some(first) = key.as_ref().and_then(|k| payment.extra.get(k)) {
        let (id, amount) = first.split_once(' ').unwrap_or((first, "0"));
        return Ok(RefundClaim::Repeat(
            id.to_owned(),
            amount.parse().unwrap_or(0),
        ));
    }
    let left = payment.amount_minor - payment.refunded_minor;
    if left <= 0 {
        return Err(unprocessable(
            "CAPTURE_FULLY_REFUNDED",
            "The capture has already been fully refunded.",
        ));
    }
    let amount = match wanted {
        None => left,
        Some((_, currency)) if currency != payment.currency => {
            return Err(unprocessable(
                "REFUND_CURRENCY_MISMATCH",
                "Refund must be in the same currency as the capture.",
            ));
        }
        Some((minor, _)) if minor > left => {
            return Err(unprocessable(
                "REFUND_AMOUNT_EXCEEDED",
                "The refund amount must be less than or equal to the capture amount that has not yet been refunded.",
            ));
        }
        Some((minor, _)) => minor,
    };
    if let Some(key) = key {
        payment.extra.insert(key, format!("{refund_id} {amount}"));
    }
    let total_after = payment.refunded_minor + amount;
    payment.extra.insert(
        format!("{REFUND_ID_AT_PREFIX}{total_after}"),
        refund_id.to_owned(),
    );
    Ok(RefundClaim::New(refund_id.to_owned(), amount))
}

/// `POST /v2/payments/captures/{id}/refund`: a full (empty body) or partial refund of a
/// completed capture; a repeated `PayPal-Request-Id` answers the first refund and refunds
/// nothing more. The refund's `PAYMENT.CAPTURE.REFUNDED` carries the same refund id.
#[handler]
pub(super) async fn refund_capture(
    request: &Request,
    Path(capture_id): Path<String>,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let Some(payment) = hub.payment_by(ProviderId::WalletGlobal, CAPTURE_ID, &capture_id) else {
        return not_found().into_response();
    };
    let input: RefundInput = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let wanted = match input.amount.as_ref().map(amount_of).transpose() {
        Ok(wanted) => wanted,
        Err(refusal) => return refusal.into_response(),
    };
    if payment.status != SimStatus::Paid {
        return unprocessable("CAPTURE_NOT_COMPLETED", "The capture is not completed.")
            .into_response();
    }
    let request_id = request_id(request);
    let fresh_id = hub.new_id("RF");
    let mut refusal = None;
    let claim = hub.update_payment(&payment.id, |p| {
        claim_refund(p, request_id.as_deref(), wanted, &fresh_id).map_err(|r| {
            refusal = Some(r);
            SandboxError::Conflict("refused".into())
        })
    });
    let (refund_id, amount) = match claim {
        Ok(RefundClaim::Repeat(id, amount)) => (id, amount),
        Ok(RefundClaim::New(id, amount)) => match hub.refund_payment(&payment.id, amount).await {
            Ok(_) => (id, amount),
            Err(e) => {
                // Nothing was refunded: forget the claim, so that a retry may refund.
                let _ = hub.update_payment(&payment.id, |p| {
                    p.extra.retain(|_, v| !v.starts_with(id.as_str()));
                    Ok(())
                });
                return unprocessable("REFUND_FAILED", &e.to_string()).into_response();
            }
        },
        Err(_) => {
            return refusal.unwrap_or_else(not_found).into_response();
        }
    };
    let now = hub.payment(&payment.id).unwrap_or(payment);
    (
        StatusCode::CREATED,
        Json(refund_json(&hub, &now, &refund_id, amount)),
    )
        .into_response()
}

/// `GET /v1/payments/sale/{id}`: a subscription's sale (one of its charges).
#[handler]
pub(super) fn get_sale(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let found = hub
        .subscriptions()
        .into_iter()
        .filter(|s| s.provider == ProviderId::WalletGlobal)
        .find_map(|s| {
            let charge = s.charges.iter().find(|c| c.id == id)?.clone();
            Some((s, charge))
        });
    match found {
        Some((subscription, charge)) => {
            Json(sale_of_charge(&hub, &subscription, &charge)).into_response()
        }
        None => not_found().into_response(),
    }
}

// --- Subscriptions ----------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
struct CreateSubscriptionInput {
    plan_id: String,
    #[serde(default)]
    custom_id: Option<String>,
    #[serde(default)]
    subscriber: Option<SubscriberInput>,
    #[serde(default)]
    application_context: Option<ContextInput>,
    #[serde(default)]
    plan: Option<PlanOverrideInput>,
}

#[derive(Debug, Deserialize)]
struct SubscriberInput {
    #[serde(default)]
    email_address: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PlanOverrideInput {
    #[serde(default)]
    billing_cycles: Vec<CycleInput>,
}

#[derive(Debug, Deserialize)]
struct CycleInput {
    #[serde(default)]
    pricing_scheme: Option<PricingInput>,
    #[serde(default)]
    frequency: Option<FrequencyInput>,
}

#[derive(Debug, Deserialize)]
struct PricingInput {
    fixed_price: AmountInput,
}

#[derive(Debug, Deserialize)]
struct FrequencyInput {
    interval_unit: String,
    interval_count: u32,
}

/// Price and interval: from the `plan` override the gateway sends to the sandbox, else a free
/// monthly plan in USD (the sandbox has no plan catalog).
fn plan_terms(plan: Option<&PlanOverrideInput>) -> Result<((i64, Currency), u32), Refusal> {
    let cycle = plan.and_then(|p| p.billing_cycles.first());
    let price = match cycle.and_then(|c| c.pricing_scheme.as_ref()) {
        Some(pricing) => amount_of(&pricing.fixed_price)?,
        None => (0, Currency::Usd),
    };
    let months = match cycle.and_then(|c| c.frequency.as_ref()) {
        Some(f) if f.interval_unit == "MONTH" => f.interval_count,
        Some(f) if f.interval_unit == "YEAR" => f.interval_count.saturating_mul(12),
        Some(_) => {
            return Err(unprocessable(
                "UNSUPPORTED_INTERVAL_UNIT",
                "The sandbox bills by month or year.",
            ));
        }
        None => 1,
    };
    if !(1..=MAX_INTERVAL_MONTHS).contains(&months) {
        return Err(unprocessable(
            "INVALID_INTERVAL_COUNT",
            "The billing interval is out of range.",
        ));
    }
    Ok((price, months))
}

fn subscription_of(
    hub: &Hub,
    input: CreateSubscriptionInput,
    request_id: Option<String>,
) -> Result<SimPayment, Refusal> {
    if input.plan_id.trim().is_empty() {
        return Err(invalid(
            "MISSING_REQUIRED_PARAMETER",
            "plan_id is required.",
        ));
    }
    let order_id = input.custom_id.filter(|c| !c.is_empty());
    let order_id = order_id.ok_or_else(|| {
        invalid(
            "MISSING_REQUIRED_PARAMETER",
            "The sandbox needs custom_id (Tally's order id).",
        )
    })?;
    let (price, interval_months) = plan_terms(input.plan.as_ref())?;
    let (Some(return_url), Some(cancel_url)) = input
        .application_context
        .map_or((None, None), |c| (c.return_url, c.cancel_url))
    else {
        return Err(invalid(
            "MISSING_REQUIRED_PARAMETER",
            "application_context.return_url and cancel_url are required.",
        ));
    };
    let mut extra = BTreeMap::from([(PLAN_ID.to_owned(), input.plan_id.clone())]);
    extra.extend(request_id.map(|id| (CREATE_REQUEST_ID.to_owned(), id)));
    extra.extend(
        input
            .subscriber
            .and_then(|s| s.email_address)
            .map(|e| (EMAIL.to_owned(), e)),
    );
    let kind = SimKind::Subscription {
        interval_months,
        plan_ref: Some(input.plan_id),
    };
    let id = hub.new_id("I-SBX");
    Ok(NewPayment {
        id,
        order_id,
        price,
        kind,
        return_url,
        cancel_url,
        extra,
    }
    .open(hub))
}

/// `POST /v1/billing/subscriptions`.
#[handler]
pub(super) async fn create_subscription(
    request: &Request,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let request_id = request_id(request);
    if let Some(existing) = created_with(&hub, request_id.as_deref()) {
        return (
            StatusCode::OK,
            Json(subscription_json(&hub, &existing, None)),
        )
            .into_response();
    }
    let input = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    match subscription_of(&hub, input, request_id) {
        Ok(payment) => match hub.insert_payment(payment.clone(), URL_FIELDS) {
            Ok(()) => (
                StatusCode::CREATED,
                Json(subscription_json(&hub, &payment, None)),
            )
                .into_response(),
            Err(foreign) => {
                invalid("INVALID_PARAMETER_VALUE", &foreign.to_string()).into_response()
            }
        },
        Err(refusal) => refusal.into_response(),
    }
}

/// `GET /v1/billing/subscriptions/{id}`.
#[handler]
pub(super) fn get_subscription(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    match subscription_payment(&hub, &id) {
        Some(payment) => {
            let subscription = payment
                .subscription_id
                .as_deref()
                .and_then(|s| hub.subscription(s));
            let mut shown = subscription_json(&hub, &payment, subscription.as_ref());
            // `?fields=plan` adds the plan's details, overrides applied (PayPal's `fields`).
            let fields = request.uri().query().unwrap_or_default();
            if fields.split('&').any(|f| {
                f.strip_prefix("fields=")
                    .is_some_and(|v| v.split(',').any(|v| v == "plan"))
            }) {
                shown["plan"] = plan_json(&payment, subscription.as_ref());
            }
            Json(shown).into_response()
        }
        None => not_found().into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct CancelInput {
    reason: String,
}

/// `POST /v1/billing/subscriptions/{id}/cancel`: cancels at once (PayPal has no cancel at
/// period end); 204.
#[handler]
pub(super) async fn cancel_subscription(
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
    if input.reason.trim().is_empty() || input.reason.chars().count() > 128 {
        return invalid(
            "INVALID_STRING_LENGTH",
            "reason must be 1 to 128 characters.",
        )
        .into_response();
    }
    let Some(payment) = subscription_payment(&hub, &id) else {
        return not_found().into_response();
    };
    let invalid_status = || {
        unprocessable(
            "SUBSCRIPTION_STATUS_INVALID",
            "Invalid subscription status for cancel action; subscription status should be active or suspended.",
        )
    };
    let Some(subscription_id) = payment.subscription_id else {
        return invalid_status().into_response();
    };
    match hub.cancel_subscription(&subscription_id, false).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(SandboxError::Conflict(_)) => invalid_status().into_response(),
        Err(SandboxError::NotFound) => not_found().into_response(),
    }
}

// --- Webhooks ---------------------------------------------------------------------------------

/// `POST /v1/notifications/verify-webhook-signature`.
#[handler]
pub(super) async fn verify_signature(
    request: &Request,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let input: VerifyRequest = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let status = if verifies(&hub, &input) {
        "SUCCESS"
    } else {
        "FAILURE"
    };
    Json(json!({ "verification_status": status })).into_response()
}
