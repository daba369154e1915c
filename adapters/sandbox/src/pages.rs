//! The sandbox's own pages and actions: hosted checkout (`/checkout/{id}`), the dashboard (`/`),
//! their form actions, and the same actions as JSON under `/api` for tests.
//!
//! Besides the buttons, `/api` has test controls that make the simulated provider itself send
//! what a real one can send when something is set up wrong at its end: `POST
//! /api/payments/{id}/subscribe` (`{"amountMinor", "intervalMonths"}`) bills an open checkout as
//! a subscription of that amount, whatever it was opened for, and `POST
//! /api/subscriptions/{id}/renew` with `{"amountMinor", "currency"}` renews at a price changed
//! at the provider; `/api/drop-webhooks` loses the next webhooks on their way.
//!
//! Saved payment methods (automatic top-up): `GET /api/payment-methods` (`?orderId=` for the
//! ones an order's checkout saved) lists them, newest first; `POST
//! /api/payment-methods/{id}/behaviour` with `{"next": "succeed" | "decline" |
//! "authentication_required" | "slow" | "duplicate_webhook" | "late_webhook"}` sets what the
//! method's off-session charges do from then on; `POST /api/payments/{id}/settle` with
//! `{"outcome": "succeed" | "fail"}` settles a payment still processing (a `slow` charge), and
//! `POST /api/payments/{id}/redeliver` (`{"amountMinor": times}`, 3 when absent) sends a held
//! back (`late_webhook`) or earlier webhook again.

use std::str::FromStr;
use std::sync::Arc;

use domain::Currency;
use poem::endpoint::BoxEndpoint;
use poem::http::StatusCode;
use poem::web::{Data, Form, Html, Json, Path, Query, Redirect};
use poem::{EndpointExt, IntoResponse, Response, Route, get, handler, post};
use qrcode::QrCode;
use qrcode::render::svg;
use serde::Deserialize;
use serde_json::json;

use crate::hub::{
    Hub, SandboxError, SimBehaviour, SimKind, SimMethod, SimPayment, SimPrice, SimStatus,
};

/// Every sandbox route.
pub fn routes(hub: Arc<Hub>) -> BoxEndpoint<'static, Response> {
    let mut route = Route::new()
        .at("/", get(dashboard))
        .at("/checkout/:id", get(checkout_page))
        .at("/checkout/:id/:action", post(checkout_action))
        .at("/subscriptions/:id/:action", post(subscription_action))
        .at("/payments/:id/refund", post(refund_action))
        .at("/api/payments", get(api_payments))
        .at("/api/payments/:id/:action", post(api_payment_action))
        .at(
            "/api/subscriptions/:id/:action",
            post(api_subscription_action),
        )
        .at("/api/payment-methods", get(api_methods))
        .at(
            "/api/payment-methods/:id/behaviour",
            post(api_method_behaviour),
        )
        .at("/api/drop-webhooks", post(api_drop_webhooks))
        .at("/api/deliveries", get(api_deliveries));
    for simulator in hub.simulators() {
        route = route.nest(
            format!("/{}", simulator.provider().as_str()),
            simulator.api(hub.clone()),
        );
    }
    route.data(hub).boxed()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn amount(p: &SimPayment) -> String {
    domain::Money::from_minor(p.amount_minor, p.currency)
        .map(|m| m.to_string())
        .unwrap_or_default()
}

/// A sandbox page: the banner, `title` and `body` (HTML the caller escaped).
pub(crate) fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width,initial-scale=1'>\
         <title>{t}</title><style>body{{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#1f2937}}\
         .banner{{background:#fef3c7;border:1px solid #f59e0b;padding:.5rem 1rem;border-radius:.5rem}}\
         button{{font:inherit;padding:.6rem 1.2rem;border-radius:.5rem;border:1px solid #9ca3af;margin:.25rem;cursor:pointer}}\
         button.primary{{background:#2563eb;color:#fff;border-color:#2563eb}}table{{border-collapse:collapse;width:100%}}\
         td,th{{border-bottom:1px solid #e5e7eb;padding:.4rem;text-align:left;font-size:.9rem}}form{{display:inline}}\
         table{{display:block;overflow-x:auto}}td{{white-space:nowrap}}p code{{overflow-wrap:anywhere;word-break:break-all}}svg{{max-width:100%;height:auto}}</style></head>\
         <body><p class=banner>Sandbox: no real money moves here.</p><h1>{t}</h1>{body}</body></html>",
        t = escape(title)
    ))
}

fn qr_svg(text: &str) -> String {
    QrCode::new(text.as_bytes())
        .map(|code| {
            code.render::<svg::Color<'_>>()
                .min_dimensions(220, 220)
                .build()
        })
        .unwrap_or_default()
}

#[handler]
fn checkout_page(Path(id): Path<String>, hub: Data<&Arc<Hub>>) -> Response {
    let Some(p) = hub.payment(&id) else {
        return (StatusCode::NOT_FOUND, "no such sandbox payment").into_response();
    };
    let what = match &p.kind {
        SimKind::OneTime => "one-time payment".to_owned(),
        SimKind::Subscription {
            interval_months, ..
        } => format!("subscription, every {interval_months} month(s)"),
    };
    let qr = if p.provider.pays_by_qr_code() {
        format!(
            "<p>Scan to pay (or press Pay):</p><div aria-label='QR code'>{}</div>",
            qr_svg(&hub.checkout_url(&p.id))
        )
    } else {
        String::new()
    };
    let actions = if matches!(p.status, SimStatus::Open) {
        let id = escape(&p.id);
        format!(
            "<form method=post action='/sandbox/checkout/{id}/pay'><button class=primary>Pay</button></form>\
             <form method=post action='/sandbox/checkout/{id}/decline'><button>Decline</button></form>\
             <form method=post action='/sandbox/checkout/{id}/cancel'><button>Cancel</button></form>"
        )
    } else {
        format!("<p>This payment is {:?}.</p>", p.status)
    };
    let body = format!(
        "<p><strong>{}</strong> · {} · {}</p><p>Order <code>{}</code></p>{qr}{actions}",
        escape(p.provider.as_str()),
        escape(&amount(&p)),
        escape(&what),
        escape(&p.order_id)
    );
    let title = format!("Pay {} · Sandbox checkout", hub.merchant_name());
    page(&title, &body).into_response()
}

#[handler]
async fn checkout_action(
    Path((id, action)): Path<(String, String)>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    match run_payment_action(&hub, &id, &action).await {
        Ok(Next::Return(redirect)) if hub.is_own_url(&redirect) => {
            Redirect::see_other(redirect).into_response()
        }
        Ok(Next::Return(_)) => error_response(&SandboxError::Conflict(
            "the return URL is not a URL of this service".into(),
        )),
        Ok(Next::StayDeclined(payment)) => declined_page(&hub, &payment).into_response(),
        Err(e) => error_response(&e),
    }
}

/// Where the buyer's browser goes after an action on the hosted checkout.
enum Next {
    /// Back to the merchant's return URL.
    Return(String),
    /// The card was declined and the provider tells the merchant nothing: the buyer stays at
    /// the provider, as on its real checkout.
    StayDeclined(SimPayment),
}

async fn run_payment_action(hub: &Hub, id: &str, action: &str) -> Result<Next, SandboxError> {
    let payment = hub.payment(id).ok_or(SandboxError::NotFound)?;
    let simulator = hub
        .simulator(payment.provider)
        .ok_or(SandboxError::NotFound)?;
    match action {
        "pay" => Ok(Next::Return(simulator.pay(hub, id).await?)),
        "decline" => {
            let declined = hub.decline_payment(id).await?;
            if simulator.tells_declines(&declined) {
                Ok(Next::Return(payment.cancel_url))
            } else {
                Ok(Next::StayDeclined(declined))
            }
        }
        "cancel" => {
            hub.cancel_payment(id)?;
            Ok(Next::Return(payment.cancel_url))
        }
        _ => Err(SandboxError::NotFound),
    }
}

/// A declined card at a provider that tells the merchant nothing of it: the buyer is told here,
/// and may leave the checkout through the merchant's cancel link (only one of the service's own).
fn declined_page(hub: &Hub, payment: &SimPayment) -> Html<String> {
    let back = if hub.is_own_url(&payment.cancel_url) {
        format!(
            "<p><a href='{}'>Leave the checkout and go back to the merchant</a></p>",
            escape(&payment.cancel_url)
        )
    } else {
        String::new()
    };
    let body = format!(
        "<p><strong>{}</strong> · Order <code>{}</code></p>\
         <p role=alert>Your card was declined. This provider tells the merchant nothing of a \
         declined card: the merchant sees the order waiting until its checkout expires.</p>{back}",
        escape(payment.provider.as_str()),
        escape(&payment.order_id),
    );
    let title = format!("Pay {} · Sandbox checkout: declined", hub.merchant_name());
    page(&title, &body)
}

fn error_response(e: &SandboxError) -> Response {
    let status = match e {
        SandboxError::NotFound => StatusCode::NOT_FOUND,
        SandboxError::Conflict(_) => StatusCode::CONFLICT,
    };
    (status, Json(json!({ "error": e.to_string() }))).into_response()
}

#[handler]
fn dashboard(hub: Data<&Arc<Hub>>) -> Html<String> {
    let mut rows = String::new();
    for p in hub.payments().iter().take(100) {
        let refund = if p.status == SimStatus::Paid && p.refunded_minor < p.amount_minor {
            let half = ((p.amount_minor - p.refunded_minor) / 2).max(1);
            format!(
                "<form method=post action='/sandbox/payments/{id}/refund'><input type=hidden name=amountMinor value={half}><button>Refund half</button></form>\
                 <form method=post action='/sandbox/payments/{id}/refund'><input type=hidden name=amountMinor value={rest}><button>Refund rest</button></form>",
                id = escape(&p.id),
                rest = p.amount_minor - p.refunded_minor
            )
        } else {
            String::new()
        };
        rows.push_str(&format!(
            "<tr><td><a href='/sandbox/checkout/{id}'>{id}</a></td><td>{}</td><td>{}</td><td>{:?}</td><td>{refund}</td></tr>",
            escape(p.provider.as_str()),
            escape(&amount(p)),
            p.status,
            id = escape(&p.id)
        ));
    }
    let mut subs = String::new();
    for s in hub.subscriptions() {
        let id = escape(&s.id);
        subs.push_str(&format!(
            "<tr><td>{id}</td><td>{}</td><td>{:?}</td><td>{}</td><td><form method=post action='/sandbox/subscriptions/{id}/renew'><button>Advance billing period</button></form>\
             <form method=post action='/sandbox/subscriptions/{id}/cancel'><button>Cancel now</button></form></td></tr>",
            escape(s.provider.as_str()),
            s.status,
            s.renewals
        ));
    }
    page(
        "Sandbox",
        &format!(
            "<h2>Payments</h2><table><tr><th>Id</th><th>Provider</th><th>Amount</th><th>Status</th><th></th></tr>{rows}</table>\
                  <h2>Subscriptions</h2><table><tr><th>Id</th><th>Provider</th><th>Status</th><th>Renewals</th><th></th></tr>{subs}</table>"
        ),
    )
}

async fn run_subscription_action(
    hub: &Hub,
    id: &str,
    action: &str,
    body: &ActionBody,
) -> Result<serde_json::Value, SandboxError> {
    let at_period_end = body.at_period_end.unwrap_or(false);
    let subscription = match action {
        "renew" => hub.renew_subscription_at(id, body.price()?).await?,
        "fail_renewal" => hub.fail_renewal(id).await?,
        "cancel" => hub.cancel_subscription(id, at_period_end).await?,
        "refund" | "dispute" => {
            hub.refund_subscription_charge(
                id,
                body.charge_id.as_deref(),
                body.amount_minor,
                action == "dispute",
            )
            .await?
        }
        _ => return Err(SandboxError::NotFound),
    };
    serde_json::to_value(subscription).map_err(|e| SandboxError::Conflict(e.to_string()))
}

#[handler]
async fn subscription_action(
    Path((id, action)): Path<(String, String)>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    match run_subscription_action(&hub, &id, &action, &ActionBody::default()).await {
        Ok(_) => Redirect::see_other("/sandbox").into_response(),
        Err(e) => error_response(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RefundForm {
    amount_minor: i64,
}

#[handler]
async fn refund_action(
    Path(id): Path<String>,
    Form(form): Form<RefundForm>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    match hub.refund_payment(&id, form.amount_minor).await {
        Ok(_) => Redirect::see_other("/sandbox").into_response(),
        Err(e) => error_response(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PaymentsQuery {
    order_id: Option<String>,
}

#[handler]
fn api_payments(Query(q): Query<PaymentsQuery>, hub: Data<&Arc<Hub>>) -> Json<Vec<SimPayment>> {
    Json(match q.order_id {
        Some(order_id) => hub.payments_for_order(&order_id),
        None => hub.payments(),
    })
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ActionBody {
    amount_minor: Option<i64>,
    at_period_end: Option<bool>,
    /// Which charge of a subscription to refund or dispute (its latest when absent).
    charge_id: Option<String>,
    /// `renew`: the currency the price changed to (ISO 4217), with `amountMinor` the new
    /// amount; both absent, the subscription renews at its own price.
    currency: Option<String>,
    /// `subscribe`: the billing period of the subscription, in months (1 when absent).
    interval_months: Option<u32>,
    /// `settle`: `succeed` or `fail`.
    outcome: Option<String>,
}

impl ActionBody {
    /// The price a `renew` bills from now on.
    fn price(&self) -> Result<SimPrice, SandboxError> {
        let currency = match self.currency.as_deref() {
            Some(code) => Some(
                Currency::from_str(code)
                    .map_err(|_| SandboxError::Conflict(format!("unknown currency {code:?}")))?,
            ),
            None => None,
        };
        Ok(SimPrice {
            amount_minor: self.amount_minor,
            currency,
        })
    }
}

#[handler]
async fn api_payment_action(
    Path((id, action)): Path<(String, String)>,
    body: Option<Json<ActionBody>>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    let body = body.map(|b| b.0).unwrap_or_default();
    if action == "redeliver" {
        let times = body
            .amount_minor
            .and_then(|t| u32::try_from(t).ok())
            .unwrap_or(3);
        return Json(json!({ "statuses": hub.redeliver(&id, times).await })).into_response();
    }
    let result = if action == "settle" {
        settle(&hub, &id, body.outcome.as_deref())
            .await
            .map(|p| json!({ "payment": p }))
    } else if action == "subscribe" {
        let Some(amount) = body.amount_minor else {
            return error_response(&SandboxError::Conflict("amountMinor is required".into()));
        };
        hub.complete_as_subscription(&id, amount, body.interval_months.unwrap_or(1))
            .await
            .map(|p| json!({ "payment": p }))
    } else if action == "refund" {
        let amount = match body.amount_minor {
            Some(a) => a,
            None => hub
                .payment(&id)
                .map(|p| p.amount_minor - p.refunded_minor)
                .unwrap_or_default(),
        };
        hub.refund_payment(&id, amount)
            .await
            .map(|p| json!({ "payment": p }))
    } else {
        run_payment_action(&hub, &id, &action)
            .await
            .map(|next| match next {
                Next::Return(redirect) => {
                    json!({ "payment": hub.payment(&id), "redirect": redirect })
                }
                // The hosted page keeps the buyer: there is nowhere to go.
                Next::StayDeclined(p) => json!({ "payment": p, "redirect": null }),
            })
    };
    match result {
        Ok(value) => Json(value).into_response(),
        Err(e) => error_response(&e),
    }
}

/// A payment still processing (an off-session charge the provider answered `processing`)
/// succeeds or fails, and the provider's webhook follows.
async fn settle(hub: &Hub, id: &str, outcome: Option<&str>) -> Result<SimPayment, SandboxError> {
    match outcome {
        Some("succeed") => hub.complete_payment(id).await,
        Some("fail") => hub.decline_payment(id).await,
        _ => Err(SandboxError::Conflict(
            "outcome must be \"succeed\" or \"fail\"".into(),
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MethodsQuery {
    order_id: Option<String>,
}

#[handler]
fn api_methods(Query(q): Query<MethodsQuery>, hub: Data<&Arc<Hub>>) -> Json<Vec<SimMethod>> {
    Json(match q.order_id {
        Some(order_id) => hub.methods_for_order(&order_id),
        None => hub.methods(),
    })
}

#[derive(Debug, Deserialize)]
struct BehaviourBody {
    next: String,
}

#[handler]
fn api_method_behaviour(
    Path(id): Path<String>,
    Json(body): Json<BehaviourBody>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    let Some(next) = SimBehaviour::parse(&body.next) else {
        let known: Vec<&str> = SimBehaviour::ALL.iter().map(|b| b.code()).collect();
        return error_response(&SandboxError::Conflict(format!(
            "next must be one of {}",
            known.join(", ")
        )));
    };
    match hub.set_method_behaviour(&id, next) {
        Ok(method) => Json(method).into_response(),
        Err(e) => error_response(&e),
    }
}

#[handler]
async fn api_subscription_action(
    Path((id, action)): Path<(String, String)>,
    body: Option<Json<ActionBody>>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    let body = body.map(|b| b.0).unwrap_or_default();
    match run_subscription_action(&hub, &id, &action, &body).await {
        Ok(value) => Json(value).into_response(),
        Err(e) => error_response(&e),
    }
}

#[derive(Debug, Deserialize)]
struct DropBody {
    count: u32,
}

#[handler]
fn api_drop_webhooks(Json(body): Json<DropBody>, hub: Data<&Arc<Hub>>) -> StatusCode {
    hub.drop_next_webhooks(body.count.min(1000));
    StatusCode::NO_CONTENT
}

#[handler]
fn api_deliveries(hub: Data<&Arc<Hub>>) -> Json<Vec<crate::hub::Delivery>> {
    Json(hub.deliveries())
}
