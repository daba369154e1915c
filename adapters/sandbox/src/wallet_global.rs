//! The PayPal (`wallet_global`) simulator: the part of PayPal's REST API the gateway calls, the
//! buyer's approval, and PayPal's webhooks.
//!
//! Served at `/sandbox/wallet_global`: `POST /v1/oauth2/token` (HTTP Basic with
//! [`CREDENTIALS`]`.paypal_client_id`/`paypal_client_secret`), and with its bearer token
//! `POST /v2/checkout/orders`, `GET /v2/checkout/orders/{id}`,
//! `POST /v2/checkout/orders/{id}/capture`, `GET /v2/payments/captures/{id}`,
//! `POST /v2/payments/captures/{id}/refund` (idempotent per `PayPal-Request-Id`),
//! `POST /v1/billing/subscriptions`, `GET /v1/billing/subscriptions/{id}`,
//! `POST /v1/billing/subscriptions/{id}/cancel`, `POST /v1/billing/subscriptions/{id}/revise`
//! (a plan change, approved on the simulator's page `/revise/{id}`, then
//! `BILLING.SUBSCRIPTION.UPDATED`: see `api/revise.rs`), `GET /v1/payments/sale/{id}` (a
//! subscription's sale, read for disputes) and `POST /v1/notifications/verify-webhook-signature`.
//! `GET /v1/billing/subscriptions/{id}?fields=plan` adds the plan's details.
//!
//! PayPal's vault (automatic top-up, `api/vault.rs`): an order created with
//! `payment_source.paypal.attributes.vault` keeps the buyer's account when captured
//! (`VAULT.PAYMENT-TOKEN.CREATED`, listed by `/sandbox/api/payment-methods`), and an order
//! created with `payment_source.paypal.vault_id` charges it at once, as the account's test
//! behaviour says.
//!
//! As at PayPal, Pay on the hosted page only *approves* an order (`CHECKOUT.ORDER.APPROVED`)
//! and sends the browser to the return URL with `?token=<order id>&PayerID=…`; money moves when
//! the gateway captures, once per order (`PAYMENT.CAPTURE.COMPLETED`). Pay on a subscription
//! activates it with its first payment (`BILLING.SUBSCRIPTION.ACTIVATED`, then
//! `PAYMENT.SALE.COMPLETED`).
//!
//! Differences from PayPal, all for a sandbox without accounts: a subscription's price and
//! interval come from the `plan` override the gateway sends only to the sandbox (PayPal reads
//! them from the plan; without one the sandbox bills 0.00 USD monthly); webhooks go to
//! `{public base}/api/payment/webhook/wallet_global` (PayPal's is set in its dashboard); the
//! transmission signature is an HMAC only this simulator verifies (see the `transmission` module).

mod api;
mod resources;
mod transmission;

use std::sync::Arc;

use async_trait::async_trait;
use domain::ProviderId;
use poem::{Route, delete, get, post};
use serde_json::{Value, json};

use self::resources::{
    capture_json, dispute_json, order_json, refund_json, sale_json, sale_refund_json,
    subscription_json,
};
use crate::credentials::CREDENTIALS;
use crate::hub::{
    Hub, SandboxError, SimCharge, SimEvent, SimKind, SimPayment, SimStatus, SimSubscription,
    SimWebhook,
};
use crate::simulator::Simulator;

/// The bearer token the simulator hands out and accepts.
const ACCESS_TOKEN: &str = "A21AA-sandbox-tally-access-token";
/// Its lifetime, in seconds (PayPal's usual 9 hours).
const TOKEN_LIFETIME_S: u64 = 32_400;
/// The payer id the simulator's buyer has.
const PAYER_ID: &str = "SANDBOXPAYER1";

/// The PayPal simulator.
#[derive(Debug, Clone, Copy, Default)]
pub struct WalletGlobalSimulator;

/// The `[providers.wallet_global]` settings table that points the gateway at this sandbox
/// (`api_base_url` is `{public}/sandbox/wallet_global`) with the sandbox's published test credentials,
/// as an operator would write it; the wiring deserializes it into the gateway's settings.
#[must_use]
pub fn gateway_settings(api_base_url: &str) -> Value {
    json!({
        "baseUrl": api_base_url,
        "clientId": CREDENTIALS.paypal_client_id,
        "clientSecret": CREDENTIALS.paypal_client_secret,
        "webhookId": CREDENTIALS.paypal_webhook_id,
        "merchantId": CREDENTIALS.paypal_merchant_id,
    })
}

/// Where the simulator posts webhooks: Tally's PayPal webhook endpoint.
fn notify_url(hub: &Hub) -> String {
    format!(
        "{}/api/payment/webhook/wallet_global",
        hub.public_base_url()
    )
}

#[async_trait]
impl Simulator for WalletGlobalSimulator {
    // PayPal denies a one-time capture (`PAYMENT.CAPTURE.DENIED`); a subscription the buyer
    // could not pay is never activated, and nothing is sent.
    fn tells_declines(&self, payment: &SimPayment) -> bool {
        payment.kind == SimKind::OneTime
    }

    fn provider(&self) -> ProviderId {
        ProviderId::WalletGlobal
    }

    fn lookup_keys(&self) -> &'static [&'static str] {
        &[resources::CREATE_REQUEST_ID, resources::CAPTURE_ID]
    }

    fn api(&self, _hub: Arc<Hub>) -> Route {
        Route::new()
            .at("/v1/oauth2/token", post(api::token))
            .at("/v2/checkout/orders", post(api::create_order))
            .at("/v2/checkout/orders/:id", get(api::get_order))
            .at("/v2/checkout/orders/:id/capture", post(api::capture_order))
            .at("/v2/payments/captures/:id", get(api::get_capture))
            .at(
                "/v2/payments/captures/:id/refund",
                post(api::refund_capture),
            )
            .at("/v1/payments/sale/:id", get(api::get_sale))
            .at(
                "/v3/vault/payment-tokens/:id",
                delete(api::vault::delete_payment_token),
            )
            .at("/v1/billing/subscriptions", post(api::create_subscription))
            .at("/v1/billing/subscriptions/:id", get(api::get_subscription))
            .at(
                "/v1/billing/subscriptions/:id/cancel",
                post(api::cancel_subscription),
            )
            .at(
                "/v1/billing/subscriptions/:id/revise",
                post(api::revise::revise),
            )
            .at("/revise/:id", get(api::revise::approval_page))
            .at("/revise/:id/:action", post(api::revise::approval_action))
            .at(
                "/v1/notifications/verify-webhook-signature",
                post(api::verify_signature),
            )
    }

    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
        let mut webhooks: Vec<SimWebhook> = events_for(hub, event)
            .into_iter()
            .map(|(payment_id, event_type, resource)| {
                signed_event(hub, &payment_id, event_type, resource)
            })
            .collect();
        // A vaulted account's charge whose method says so: the same event delivered twice.
        if let SimEvent::Paid(p) = event
            && api::vault::duplicated(p)
            && let Some(first) = webhooks.first().cloned()
        {
            webhooks.push(first);
        }
        webhooks
    }

    /// Pay approves a one-time order (the gateway must capture it) and activates a
    /// subscription.
    async fn pay(&self, hub: &Hub, payment_id: &str) -> Result<String, SandboxError> {
        let payment = hub.payment(payment_id).ok_or(SandboxError::NotFound)?;
        if payment.status != SimStatus::Open {
            return Err(SandboxError::Conflict(format!(
                "payment is {:?}",
                payment.status
            )));
        }
        let settled = match payment.kind {
            SimKind::OneTime => {
                let approved = hub.set_status(payment_id, SimStatus::Approved)?;
                hub.dispatch(
                    approved.provider,
                    &approved.notify_url,
                    &SimEvent::Approved(approved.clone()),
                )
                .await;
                approved
            }
            SimKind::Subscription { .. } => hub.complete_payment(payment_id).await?,
        };
        Ok(self.success_redirect(&settled))
    }

    /// PayPal's return: `token` is the order id (with `PayerID`), or for a subscription
    /// `subscription_id`, `ba_token` and `token`.
    fn success_redirect(&self, payment: &SimPayment) -> String {
        let separator = if payment.success_url.contains('?') {
            '&'
        } else {
            '?'
        };
        let query = match payment.kind {
            SimKind::OneTime => format!("token={}&PayerID={PAYER_ID}", payment.id),
            SimKind::Subscription { .. } => {
                format!("subscription_id={0}&ba_token=BA-{0}&token={0}", payment.id)
            }
        };
        format!("{}{separator}{query}", payment.success_url)
    }
}

/// A webhook PayPal sends: `(payment it is about, event type, resource)`.
type PayPalEvent = (String, &'static str, Value);

/// `(payment the webhook is about, event type, resource)` for each webhook PayPal sends.
fn events_for(hub: &Hub, event: &SimEvent) -> Vec<PayPalEvent> {
    match event {
        SimEvent::Approved(p) => {
            vec![(p.id.clone(), "CHECKOUT.ORDER.APPROVED", order_json(hub, p))]
        }
        SimEvent::Paid(p) => vec![(
            p.id.clone(),
            "PAYMENT.CAPTURE.COMPLETED",
            capture_json(hub, p),
        )],
        SimEvent::Declined(p) if p.kind == SimKind::OneTime => {
            let mut capture = capture_json(hub, p);
            // A held capture (a vaulted account's `slow` charge) keeps its id when denied.
            if !p.extra.contains_key(resources::CAPTURE_ID) {
                capture["id"] = json!(hub.new_id("CAP"));
            }
            vec![(p.id.clone(), "PAYMENT.CAPTURE.DENIED", capture)]
        }
        // A subscription the buyer could not pay is never activated: PayPal sends nothing.
        SimEvent::Declined(_) => Vec::new(),
        SimEvent::ChargeRefunded {
            subscription: s,
            charge,
            refund_id,
            amount_minor,
            dispute: false,
        } => vec![(
            s.payment_id.clone(),
            "PAYMENT.SALE.REFUNDED",
            sale_refund_json(hub, &charge.id, s.currency, refund_id, *amount_minor),
        )],
        SimEvent::ChargeRefunded {
            subscription: s,
            charge,
            refund_id,
            amount_minor,
            dispute: true,
        } => dispute_events(hub, s, charge, refund_id, *amount_minor),
        SimEvent::SubscriptionStarted(p, s) => started_events(hub, p, s),
        SimEvent::Renewed(s, sale_id) => {
            vec![(
                s.payment_id.clone(),
                "PAYMENT.SALE.COMPLETED",
                sale_json(hub, s, sale_id),
            )]
        }
        SimEvent::RenewalFailed(s) => {
            subscription_event(hub, s, "BILLING.SUBSCRIPTION.PAYMENT.FAILED")
        }
        // PayPal has no cancel at period end: both mean PayPal cancelled it.
        SimEvent::SubscriptionCancelScheduled(s) | SimEvent::SubscriptionCanceled(s) => {
            subscription_event(hub, s, "BILLING.SUBSCRIPTION.CANCELLED")
        }
        SimEvent::Refunded {
            payment,
            refund_id,
            amount_minor,
        } => refund_events(hub, payment, refund_id, *amount_minor),
    }
}

/// A chargeback: PayPal opens the dispute, then resolves it for the buyer.
fn dispute_events(
    hub: &Hub,
    s: &SimSubscription,
    charge: &SimCharge,
    refund_id: &str,
    amount_minor: i64,
) -> Vec<PayPalEvent> {
    let dispute_id = format!("PP-D-{}", refund_id.trim_start_matches("dp_sandbox_"));
    [
        ("CUSTOMER.DISPUTE.CREATED", false),
        ("CUSTOMER.DISPUTE.RESOLVED", true),
    ]
    .into_iter()
    .map(|(event_type, resolved)| {
        let resource = dispute_json(hub, s, charge, &dispute_id, amount_minor, resolved);
        (s.payment_id.clone(), event_type, resource)
    })
    .collect()
}

/// A subscription the buyer paid: activated, then its first sale completed.
fn started_events(hub: &Hub, p: &SimPayment, s: &SimSubscription) -> Vec<PayPalEvent> {
    let first_sale = s
        .charges
        .first()
        .map_or_else(|| hub.new_id("SALE-SANDBOX-"), |c| c.id.clone());
    vec![
        (
            p.id.clone(),
            "BILLING.SUBSCRIPTION.ACTIVATED",
            subscription_json(hub, p, Some(s)),
        ),
        (
            p.id.clone(),
            "PAYMENT.SALE.COMPLETED",
            sale_json(hub, s, &first_sale),
        ),
    ]
}

/// `event_type` with the subscription as its resource, about the payment that started it
/// (none if that payment is gone).
fn subscription_event(
    hub: &Hub,
    s: &SimSubscription,
    event_type: &'static str,
) -> Vec<PayPalEvent> {
    let Some(payment) = hub.payment(&s.payment_id) else {
        return Vec::new();
    };
    vec![(
        payment.id.clone(),
        event_type,
        subscription_json(hub, &payment, Some(s)),
    )]
}

/// A refund of a payment: a one-time capture's, or a subscription's first sale's.
fn refund_events(
    hub: &Hub,
    payment: &SimPayment,
    refund_id: &str,
    amount_minor: i64,
) -> Vec<PayPalEvent> {
    match payment.kind {
        SimKind::OneTime => {
            // A refund made through the API carries the id its answer gave.
            let refund_id = payment
                .extra
                .get(&format!(
                    "{}{}",
                    resources::REFUND_ID_AT_PREFIX,
                    payment.refunded_minor
                ))
                .map_or(refund_id, String::as_str);
            vec![(
                payment.id.clone(),
                "PAYMENT.CAPTURE.REFUNDED",
                refund_json(hub, payment, refund_id, amount_minor),
            )]
        }
        // A subscription's payment is its first sale.
        SimKind::Subscription { .. } => payment
            .subscription_id
            .as_deref()
            .and_then(|id| hub.subscription(id))
            .and_then(|s| s.charges.first().map(|c| c.id.clone()))
            .map(|sale_id| {
                (
                    payment.id.clone(),
                    "PAYMENT.SALE.REFUNDED",
                    sale_refund_json(hub, &sale_id, payment.currency, refund_id, amount_minor),
                )
            })
            .into_iter()
            .collect(),
    }
}

fn signed_event(hub: &Hub, payment_id: &str, event_type: &str, resource: Value) -> SimWebhook {
    let id = format!("WH-{}", hub.new_id("SBX"));
    let resource_type = match event_type {
        "CHECKOUT.ORDER.APPROVED" => "checkout-order",
        "PAYMENT.SALE.COMPLETED" | "PAYMENT.SALE.REFUNDED" => "sale",
        "PAYMENT.CAPTURE.REFUNDED" => "refund",
        t if t.starts_with("VAULT.PAYMENT-TOKEN.") => "payment_token",
        t if t.starts_with("CUSTOMER.DISPUTE.") => "dispute",
        t if t.starts_with("PAYMENT.CAPTURE.") => "capture",
        _ => "subscription",
    };
    let links_base = format!(
        "{}/sandbox/wallet_global/v1/notifications/webhooks-events/{id}",
        hub.public_base_url()
    );
    let event = json!({
        "id": id,
        "event_version": "1.0",
        "create_time": resources::iso(hub.now_ms()),
        "resource_type": resource_type,
        "resource_version": "2.0",
        "event_type": event_type,
        "summary": format!("{event_type} (sandbox)"),
        "resource": resource,
        "links": [
            { "href": links_base, "rel": "self", "method": "GET" },
            { "href": format!("{links_base}/resend"), "rel": "resend", "method": "POST" },
        ],
    });
    SimWebhook {
        headers: transmission::sign(hub, payment_id, &event),
        content_type: "application/json".into(),
        body: event.to_string().into_bytes(),
    }
}
