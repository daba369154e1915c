//! PayPal's vault as the sandbox simulates it for automatic top-up: a PayPal account saved at a
//! consented checkout and charged later by the merchant.
//!
//! Saving: an order created with `payment_source.paypal.attributes.vault.store_in_vault =
//! ON_SUCCESS` (and `usage_type` `MERCHANT`) keeps the buyer's account when its capture
//! succeeds: the payment token (`VT` and the order id) of a customer (`CUS` and the order id)
//! is kept in the hub as a [`SimMethod`] with the payer's e-mail address, the order and its
//! capture show `payment_source.paypal.attributes.vault {id, status: VAULTED, customer}`, and
//! `VAULT.PAYMENT-TOKEN.CREATED` follows `PAYMENT.CAPTURE.COMPLETED`, its resource the token
//! with `metadata.order_id` (the PayPal order that saved it).
//!
//! Charging: `POST /v2/checkout/orders` with `payment_source.paypal.vault_id` creates and
//! captures an order at once, as the method's [`SimBehaviour`] says: `succeed` answers `201`
//! `COMPLETED` with a `COMPLETED` capture and sends `PAYMENT.CAPTURE.COMPLETED`
//! (`duplicate_webhook`: the same event twice; `late_webhook`: held back until
//! `/sandbox/api/payments/{id}/redeliver`); `slow` answers `COMPLETED` with a `PENDING` capture
//! and sends nothing until `/sandbox/api/payments/{id}/settle` (`succeed`:
//! `PAYMENT.CAPTURE.COMPLETED`, `fail`: `PAYMENT.CAPTURE.DENIED`); `decline` answers `422`
//! `INSTRUMENT_DECLINED` and `authentication_required` `422` `PAYER_ACTION_REQUIRED`, with no
//! capture and no webhook. A repeated `PayPal-Request-Id` gets the first answer, status and
//! body, and charges nothing more. An unknown vault id is `422` `INVALID_RESOURCE_ID`.
//!
//! Forgetting: `DELETE /v3/vault/payment-tokens/{id}` (Payment Method Tokens API v3,
//! <https://developer.paypal.com/docs/api/payment-tokens/v3/>) deletes the token: `204` with no
//! body; an unknown or already deleted one is `404` `RESOURCE_NOT_FOUND`. A deleted token is
//! charged no more: a charge naming it is refused like an unknown vault id.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::ProviderId;
use poem::http::StatusCode;
use poem::web::{Data, Json, Path};
use poem::{IntoResponse, Request, Response, handler};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::WalletGlobalSimulator;
use super::super::resources::{
    CAPTURE_ID, CAPTURED_AT_MS, CREATE_REQUEST_ID, PAYER_EMAIL, iso, order_json,
};
use super::{
    CreateOrderInput, NewPayment, Refusal, URL_FIELDS, amount_of, authorized, capture_unit,
    invalid, not_found, unprocessable,
};
use crate::hub::{Hub, SimBehaviour, SimEvent, SimKind, SimMethod, SimPayment, SimStatus};
use crate::simulator::Simulator;

/// `extra` key: an order whose buyer's account is saved when its capture succeeds.
pub(in crate::wallet_global) const SAVE_ON_SUCCESS: &str = "vaultOnSuccess";
/// `extra` key: the vault id an order saved, or a charge charged.
pub(in crate::wallet_global) const VAULT_ID: &str = "vaultId";
/// `extra` key: the behaviour the charged account had, which decides the webhooks.
const BEHAVIOUR: &str = "behaviour";
/// `extra` key: the first answer's HTTP status.
const ANSWER_STATUS: &str = "answerStatus";
/// `extra` key: the first answer's body.
const ANSWER: &str = "answer";

/// `payment_source.paypal.attributes` of a create-order request.
#[derive(Debug, Deserialize)]
pub(super) struct AttributesInput {
    #[serde(default)]
    vault: Option<VaultInput>,
}

#[derive(Debug, Deserialize)]
struct VaultInput {
    store_in_vault: String,
    #[serde(default)]
    usage_type: Option<String>,
}

/// Whether a create-order request asks to save the account: `Ok(true)` for
/// `store_in_vault: ON_SUCCESS` with a `MERCHANT` (or no) usage type.
pub(super) fn asks_to_save(attributes: Option<&AttributesInput>) -> Result<bool, Refusal> {
    let Some(vault) = attributes.and_then(|a| a.vault.as_ref()) else {
        return Ok(false);
    };
    if vault.store_in_vault != "ON_SUCCESS" {
        return Err(invalid(
            "INVALID_PARAMETER_VALUE",
            "store_in_vault must be ON_SUCCESS.",
        ));
    }
    if vault.usage_type.as_deref().is_some_and(|u| u != "MERCHANT") {
        return Err(invalid(
            "INVALID_PARAMETER_VALUE",
            "The sandbox saves accounts for usage_type MERCHANT only.",
        ));
    }
    Ok(true)
}

/// Whether a payment is a charge of a vaulted account (not a checkout).
pub(in crate::wallet_global) fn is_charge(payment: &SimPayment) -> bool {
    payment.extra.contains_key(BEHAVIOUR)
}

fn behaviour(payment: &SimPayment) -> Option<SimBehaviour> {
    payment
        .extra
        .get(BEHAVIOUR)
        .and_then(|b| SimBehaviour::parse(b))
}

/// Whether PayPal's payment webhook of `payment` goes out twice (`duplicate_webhook`).
pub(in crate::wallet_global) fn duplicated(payment: &SimPayment) -> bool {
    behaviour(payment) == Some(SimBehaviour::DuplicateWebhook)
}

fn token_of(order: &SimPayment) -> (String, String) {
    (format!("VT{}", order.id), format!("CUS{}", order.id))
}

/// `DELETE /v3/vault/payment-tokens/{id}`: the payment token is deleted (`204`), and charges
/// of it are refused from now on; an unknown or deleted one is `404`.
#[handler]
pub(in crate::wallet_global) fn delete_payment_token(
    request: &Request,
    Path(id): Path<String>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    match hub.forget_method(ProviderId::WalletGlobal, &id) {
        Ok(before) if !before.forgotten() => StatusCode::NO_CONTENT.into_response(),
        _ => not_found().into_response(),
    }
}

/// `payment_source` of an order that saved (once captured) or charged an account.
pub(in crate::wallet_global) fn payment_source(hub: &Hub, payment: &SimPayment) -> Option<Value> {
    let vault_id = payment.extra.get(VAULT_ID)?;
    let method = hub.method(vault_id)?;
    Some(json!({ "paypal": {
        "email_address": method.wallet_account,
        "account_id": super::super::PAYER_ID,
        "attributes": { "vault": {
            "id": method.id,
            "status": "VAULTED",
            "customer": { "id": method.customer_id },
        }},
    }}))
}

/// The buyer's capture of `order` succeeded: its account is saved if the order asked, and
/// `VAULT.PAYMENT-TOKEN.CREATED` is sent. Nothing for any other order.
pub(super) async fn save_on_capture(hub: &Hub, order: &SimPayment) {
    if !order.extra.contains_key(SAVE_ON_SUCCESS) || order.status != SimStatus::Paid {
        return;
    }
    let (vault_id, customer_id) = token_of(order);
    let fresh = hub.update_payment(&order.id, |p| {
        Ok(p.extra
            .insert(VAULT_ID.to_owned(), vault_id.clone())
            .is_none())
    });
    if !matches!(fresh, Ok(true)) {
        return;
    }
    hub.save_method(SimMethod {
        id: vault_id.clone(),
        provider: ProviderId::WalletGlobal,
        customer_id: customer_id.clone(),
        brand: None,
        last4: None,
        wallet_account: Some(PAYER_EMAIL.to_owned()),
        order_id: order.order_id.clone(),
        payment_id: order.id.clone(),
        next: SimBehaviour::default(),
        forgotten_at_ms: None,
        created_at_ms: hub.now_ms(),
    });
    let self_url = format!(
        "{}/sandbox/wallet_global/v3/vault/payment-tokens/{vault_id}",
        hub.public_base_url()
    );
    let token = json!({
        "id": vault_id,
        "time_created": iso(hub.now_ms()),
        "customer": { "id": customer_id },
        "payment_source": { "paypal": {
            "permit_multiple_payment_tokens": false,
            "usage_type": "MERCHANT",
            "customer_type": "CONSUMER",
            "email_address": PAYER_EMAIL,
            "payer_id": super::super::PAYER_ID,
        }},
        "metadata": { "order_id": order.id },
        "links": [
            { "href": self_url, "rel": "self", "method": "GET", "encType": "application/json" },
            { "href": self_url, "rel": "delete", "method": "DELETE", "encType": "application/json" },
        ],
    });
    let webhook = super::super::signed_event(hub, &order.id, "VAULT.PAYMENT-TOKEN.CREATED", token);
    hub.deliver(
        ProviderId::WalletGlobal,
        &order.notify_url,
        vec![webhook],
        Some(order.id.clone()),
    )
    .await;
}

/// `POST /v2/checkout/orders` naming `vault_id`: the saved account charged at once.
pub(super) async fn charge(
    hub: &Hub,
    input: CreateOrderInput,
    vault_id: &str,
    request_id: Option<String>,
) -> Response {
    let payment = match new_charge(hub, input, vault_id, request_id.as_deref()) {
        Ok(payment) => payment,
        Err(refusal) => return refusal.into_response(),
    };
    let stored = match request_id.as_deref() {
        Some(id) => hub.insert_payment_once(payment.clone(), URL_FIELDS, (CREATE_REQUEST_ID, id)),
        None => hub
            .insert_payment(payment.clone(), URL_FIELDS)
            .map(|()| None),
    };
    match stored {
        Err(foreign) => invalid("INVALID_PARAMETER_VALUE", &foreign.to_string()).into_response(),
        // The same request id at the same time: the first request's answer.
        Ok(Some(first)) => replay(&first),
        Ok(None) => {
            tell(hub, &payment).await;
            replay(&payment)
        }
    }
}

/// The answer a charge's creation got, as kept (a repeated `PayPal-Request-Id` gets it again).
pub(super) fn replay(payment: &SimPayment) -> Response {
    let status = payment
        .extra
        .get(ANSWER_STATUS)
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::CREATED);
    let body: Value = payment
        .extra
        .get(ANSWER)
        .and_then(|a| serde_json::from_str(a).ok())
        .unwrap_or_default();
    (status, Json(body)).into_response()
}

/// A charge of `vault_id` as its account's behaviour leaves it, with its answer.
fn new_charge(
    hub: &Hub,
    input: CreateOrderInput,
    vault_id: &str,
    request_id: Option<&str>,
) -> Result<SimPayment, Refusal> {
    let unit = capture_unit(
        &input,
        "The sandbox charges a vaulted account with intent CAPTURE only.",
    )?;
    let price = amount_of(&unit.amount)?;
    let order_id = unit
        .custom_id
        .clone()
        .filter(|o| !o.is_empty())
        .ok_or_else(|| {
            invalid(
                "MISSING_REQUIRED_PARAMETER",
                "The sandbox needs custom_id (Tally's order id).",
            )
        })?;
    let method = hub
        .method(vault_id)
        .filter(|m| m.provider == ProviderId::WalletGlobal && !m.forgotten())
        .ok_or_else(|| {
            unprocessable(
                "INVALID_RESOURCE_ID",
                "Specified resource ID does not exist. Please check the resource ID and try again.",
            )
        })?;
    let mut extra = BTreeMap::new();
    extra.insert(VAULT_ID.to_owned(), method.id.clone());
    extra.insert(BEHAVIOUR.to_owned(), method.next.code().to_owned());
    extra.extend(request_id.map(|id| (CREATE_REQUEST_ID.to_owned(), id.to_owned())));
    let status = status_after(method.next);
    if status != SimStatus::Declined {
        extra.insert(CAPTURE_ID.to_owned(), hub.new_id("CAP"));
        extra.insert(CAPTURED_AT_MS.to_owned(), hub.now_ms().to_string());
    }
    let mut payment = NewPayment {
        id: hub.new_id("SBX"),
        order_id,
        price,
        kind: SimKind::OneTime,
        return_url: String::new(),
        cancel_url: String::new(),
        extra,
    }
    .open(hub);
    payment.status = status;
    let (code, body) = first_answer(hub, &payment, method.next);
    payment
        .extra
        .insert(ANSWER_STATUS.to_owned(), code.to_string());
    payment.extra.insert(ANSWER.to_owned(), body.to_string());
    Ok(payment)
}

/// Where a charge of an account with behaviour `next` is left: paid, its capture held, or
/// refused.
fn status_after(next: SimBehaviour) -> SimStatus {
    match next {
        SimBehaviour::Succeed | SimBehaviour::DuplicateWebhook | SimBehaviour::LateWebhook => {
            SimStatus::Paid
        }
        SimBehaviour::Slow => SimStatus::Open,
        SimBehaviour::Decline | SimBehaviour::AuthenticationRequired => SimStatus::Declined,
    }
}

/// What PayPal answers the charge: the completed order, or the `422` of a refused one.
fn first_answer(hub: &Hub, payment: &SimPayment, next: SimBehaviour) -> (u16, Value) {
    let refusal = match next {
        SimBehaviour::Decline => unprocessable(
            "INSTRUMENT_DECLINED",
            "The instrument presented was either declined by the processor or bank, or it can't be used for this payment.",
        ),
        SimBehaviour::AuthenticationRequired => unprocessable(
            "PAYER_ACTION_REQUIRED",
            "Transaction cannot complete successfully, instruct the buyer to return to PayPal.",
        ),
        _ => return (201, order_json(hub, payment)),
    };
    (refusal.status.as_u16(), refusal.body)
}

/// Send what PayPal sends about a new charge: the capture's event for a paid one, sent or held
/// back as the account's behaviour says; nothing for a pending or refused one.
async fn tell(hub: &Hub, payment: &SimPayment) {
    if payment.status != SimStatus::Paid {
        return;
    }
    let event = SimEvent::Paid(payment.clone());
    if behaviour(payment) == Some(SimBehaviour::LateWebhook) {
        let webhooks = WalletGlobalSimulator.webhooks(hub, &event);
        hub.hold(
            ProviderId::WalletGlobal,
            &payment.notify_url,
            webhooks,
            &payment.id,
            "held back (late_webhook): POST /sandbox/api/payments/{id}/redeliver sends it",
        );
        return;
    }
    hub.dispatch(ProviderId::WalletGlobal, &payment.notify_url, &event)
        .await;
}
