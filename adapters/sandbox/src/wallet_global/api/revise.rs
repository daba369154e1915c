//! PayPal's plan change as the simulator plays it (issue 19):
//! `POST /v1/billing/subscriptions/{id}/revise` (`plan_id`, `application_context.return_url` and
//! `cancel_url`, and the sandbox-only `plan` override with the new price) answers PayPal's revise
//! response with an `approve` link to the simulator's approval page (`/revise/{id}`); there the
//! subscriber approves (the subscription moves to the new plan, its new price billed from the next
//! renewal, and `BILLING.SUBSCRIPTION.UPDATED` is sent) or cancels (nothing changes, nothing is
//! sent, as at PayPal). A repeated `PayPal-Request-Id` answers the same revision. The sandbox
//! keeps the billing interval (it refuses a revise to another one) and the currency.

use std::sync::Arc;

use domain::ProviderId;
use poem::http::StatusCode;
use poem::web::{Data, Json, Path, Query};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ContextInput, PlanOverrideInput, Refusal, authorized, invalid, not_found, plan_terms,
    read_json, request_id, subscription_payment, unprocessable,
};
use crate::hub::{Hub, SimKind, SimPayment, SimSubscription, SimSubscriptionStatus};
use crate::wallet_global::resources::{PLAN_ID, subscription_json};
use crate::wallet_global::signed_event;

/// `extra` key: the PayPal plan id a pending revision moves to.
const REVISE_PLAN_ID: &str = "revisePlanId";
/// `extra` key: the new price per period of a pending revision, minor units.
const REVISE_AMOUNT: &str = "reviseAmountMinor";
/// `extra` key: the pending revision's token (`ba_token` of its approval page).
const REVISE_TOKEN: &str = "reviseToken";
/// `extra` key: where the subscriber returns after approving.
const REVISE_RETURN: &str = "reviseReturnUrl";
/// `extra` key: where the subscriber returns after cancelling.
const REVISE_CANCEL: &str = "reviseCancelUrl";
/// `extra` key prefix: the revision token a `PayPal-Request-Id` created.
const REVISE_REQUEST_PREFIX: &str = "reviseRequest:";

/// The revise body.
#[derive(Debug, Deserialize)]
pub(in crate::wallet_global) struct ReviseInput {
    plan_id: String,
    #[serde(default)]
    application_context: Option<ContextInput>,
    #[serde(default)]
    plan: Option<PlanOverrideInput>,
}

/// A revision asked for, checked.
struct Revision {
    plan_id: String,
    amount_minor: i64,
    return_url: String,
    cancel_url: String,
}

/// `POST /v1/billing/subscriptions/{id}/revise`.
#[handler]
pub(in crate::wallet_global) async fn revise(
    request: &Request,
    Path(id): Path<String>,
    body: Body,
    hub: Data<&Arc<Hub>>,
) -> Response {
    if let Err(refusal) = authorized(request) {
        return refusal.into_response();
    }
    let Some((payment, subscription)) = live_subscription(&hub, &id) else {
        return not_found().into_response();
    };
    let request_id = request_id(request);
    let replayed = request_id
        .as_deref()
        .and_then(|rid| payment.extra.get(&format!("{REVISE_REQUEST_PREFIX}{rid}")));
    if let Some(token) = replayed {
        return Json(answer(&hub, &payment, token)).into_response();
    }
    let input: ReviseInput = match read_json(body).await {
        Ok(input) => input,
        Err(refusal) => return refusal.into_response(),
    };
    let revision = match checked(&hub, input, &subscription) {
        Ok(revision) => revision,
        Err(refusal) => return refusal.into_response(),
    };
    let token = format!("BA-{}", hub.new_id("REV"));
    let kept = hub.update_payment(&payment.id, |p| {
        p.extra
            .insert(REVISE_PLAN_ID.to_owned(), revision.plan_id.clone());
        p.extra
            .insert(REVISE_AMOUNT.to_owned(), revision.amount_minor.to_string());
        p.extra.insert(REVISE_TOKEN.to_owned(), token.clone());
        p.extra
            .insert(REVISE_RETURN.to_owned(), revision.return_url.clone());
        p.extra
            .insert(REVISE_CANCEL.to_owned(), revision.cancel_url.clone());
        if let Some(rid) = &request_id {
            p.extra
                .insert(format!("{REVISE_REQUEST_PREFIX}{rid}"), token.clone());
        }
        Ok(p.clone())
    });
    match kept {
        Ok(payment) => Json(answer(&hub, &payment, &token)).into_response(),
        Err(_) => not_found().into_response(),
    }
}

/// The PayPal subscription `id` (the payment that started it) and the live subscription.
fn live_subscription(hub: &Hub, id: &str) -> Option<(SimPayment, SimSubscription)> {
    let payment = subscription_payment(hub, id)?;
    let subscription = hub.subscription(payment.subscription_id.as_deref()?)?;
    Some((payment, subscription))
}

/// Check a revise against the subscription it changes.
fn checked(
    hub: &Hub,
    input: ReviseInput,
    subscription: &SimSubscription,
) -> Result<Revision, Refusal> {
    if subscription.status != SimSubscriptionStatus::Active {
        return Err(unprocessable(
            "SUBSCRIPTION_STATUS_INVALID",
            "Invalid subscription status for revise action; subscription status should be active.",
        ));
    }
    let plan_id = input.plan_id.trim().to_owned();
    if plan_id.is_empty() || plan_id.len() > 50 {
        return Err(invalid("INVALID_PARAMETER_VALUE", "plan_id is invalid."));
    }
    let ((amount_minor, currency), months) = plan_terms(input.plan.as_ref())?;
    if currency != subscription.currency || months != subscription.interval_months {
        return Err(unprocessable(
            "UNSUPPORTED_PLAN_CHANGE",
            "The sandbox revises to a plan of the same currency and billing interval only.",
        ));
    }
    let (Some(return_url), Some(cancel_url)) = input
        .application_context
        .map_or((None, None), |c| (c.return_url, c.cancel_url))
    else {
        return Err(invalid(
            "MISSING_REQUIRED_PARAMETER",
            "The sandbox needs application_context.return_url and cancel_url.",
        ));
    };
    for (field, url) in [
        ("application_context.return_url", &return_url),
        ("application_context.cancel_url", &cancel_url),
    ] {
        hub.own_url(field, url)
            .map_err(|foreign| invalid("INVALID_PARAMETER_VALUE", &foreign.to_string()))?;
    }
    Ok(Revision {
        plan_id,
        amount_minor,
        return_url,
        cancel_url,
    })
}

/// PayPal's revise response: the plan asked for and the links, `approve` first.
fn answer(hub: &Hub, payment: &SimPayment, token: &str) -> Value {
    let api = format!(
        "{}/sandbox/wallet_global/v1/billing/subscriptions/{}",
        hub.public_base_url(),
        payment.id
    );
    json!({
        "plan_id": payment.extra.get(REVISE_PLAN_ID),
        "plan_overridden": true,
        "links": [
            { "href": approval_url(hub, &payment.id, token), "rel": "approve", "method": "GET" },
            { "href": api, "rel": "edit", "method": "PATCH" },
            { "href": api, "rel": "self", "method": "GET" },
            { "href": format!("{api}/cancel"), "rel": "cancel", "method": "POST" },
        ],
    })
}

/// The simulator's approval page of revision `token` of subscription `id`.
fn approval_url(hub: &Hub, id: &str, token: &str) -> String {
    format!(
        "{}/sandbox/wallet_global/revise/{id}?ba_token={token}",
        hub.public_base_url()
    )
}

/// The approval page's query.
#[derive(Debug, Deserialize)]
pub(in crate::wallet_global) struct TokenQuery {
    #[serde(default)]
    ba_token: String,
}

/// The pending revision of `payment` whose token is `token`: `(plan id, amount)`.
fn pending(payment: &SimPayment, token: &str) -> Option<(String, i64)> {
    if token.is_empty() || payment.extra.get(REVISE_TOKEN).map(String::as_str) != Some(token) {
        return None;
    }
    let plan = payment.extra.get(REVISE_PLAN_ID)?.clone();
    let amount = payment.extra.get(REVISE_AMOUNT)?.parse().ok()?;
    Some((plan, amount))
}

/// `GET /revise/{id}?ba_token=…`: PayPal's consent page for a revision.
#[handler]
pub(in crate::wallet_global) fn approval_page(
    Path(id): Path<String>,
    Query(query): Query<TokenQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    let found = subscription_payment(&hub, &id)
        .and_then(|p| pending(&p, &query.ba_token).map(|pending| (p, pending)));
    let Some((payment, (plan_id, amount_minor))) = found else {
        return (StatusCode::NOT_FOUND, "no such pending revision").into_response();
    };
    let price = domain::Money::from_minor(amount_minor, payment.currency)
        .map(|m| m.to_string())
        .unwrap_or_default();
    let action = |what: &str| {
        format!(
            "/sandbox/wallet_global/revise/{}/{what}?ba_token={}",
            escape(&payment.id),
            escape(&query.ba_token)
        )
    };
    let body = format!(
        "<p>Change subscription <code>{}</code> to PayPal plan <code>{}</code> at <strong>{}</strong> \
         per period, from the next billing cycle.</p>\
         <form method=post action='{}'><button class=primary>Approve</button></form>\
         <form method=post action='{}'><button>Cancel</button></form>",
        escape(&payment.id),
        escape(&plan_id),
        escape(&price),
        action("approve"),
        action("cancel"),
    );
    crate::pages::page("Approve the plan change", &body).into_response()
}

/// `POST /revise/{id}/{approve|cancel}?ba_token=…`: the subscriber's answer; 303 to the return
/// or cancel URL the revise named.
#[handler]
pub(in crate::wallet_global) async fn approval_action(
    Path((id, action)): Path<(String, String)>,
    Query(query): Query<TokenQuery>,
    hub: Data<&Arc<Hub>>,
) -> Response {
    let Some((payment, subscription)) = live_subscription(&hub, &id) else {
        return (StatusCode::NOT_FOUND, "no such subscription").into_response();
    };
    let Some((plan_id, amount_minor)) = pending(&payment, &query.ba_token) else {
        return (StatusCode::CONFLICT, "this revision is no longer pending").into_response();
    };
    let back = match action.as_str() {
        "approve" => payment.extra.get(REVISE_RETURN),
        "cancel" => payment.extra.get(REVISE_CANCEL),
        _ => return (StatusCode::NOT_FOUND, "no such action").into_response(),
    }
    .cloned()
    .unwrap_or_default();
    let _ = hub.update_payment(&payment.id, |p| {
        for key in [
            REVISE_PLAN_ID,
            REVISE_AMOUNT,
            REVISE_TOKEN,
            REVISE_RETURN,
            REVISE_CANCEL,
        ] {
            p.extra.remove(key);
        }
        if action == "approve" {
            p.extra.insert(PLAN_ID.to_owned(), plan_id.clone());
            if let SimKind::Subscription { plan_ref, .. } = &mut p.kind {
                *plan_ref = Some(plan_id.clone());
            }
        }
        Ok(())
    });
    if action == "approve" {
        approve(&hub, &payment.id, &subscription, amount_minor).await;
    }
    if !hub.is_own_url(&back) {
        return (StatusCode::BAD_REQUEST, "not a URL of this service").into_response();
    }
    let separator = if back.contains('?') { '&' } else { '?' };
    let to = format!(
        "{back}{separator}subscription_id={}&ba_token={}",
        payment.id, query.ba_token
    );
    poem::web::Redirect::see_other(to).into_response()
}

/// The approved revision: the subscription bills `amount_minor` from its next renewal, and
/// `BILLING.SUBSCRIPTION.UPDATED` says it is on the new plan.
async fn approve(hub: &Hub, payment_id: &str, subscription: &SimSubscription, amount_minor: i64) {
    let Ok(after) = hub.update_subscription(&subscription.id, |s| {
        s.amount_minor = amount_minor;
        Ok(s.clone())
    }) else {
        return;
    };
    let Some(payment) = hub.payment(payment_id) else {
        return;
    };
    let resource = subscription_json(hub, &payment, Some(&after));
    let webhook = signed_event(hub, payment_id, "BILLING.SUBSCRIPTION.UPDATED", resource);
    hub.deliver(
        ProviderId::WalletGlobal,
        &after.notify_url,
        vec![webhook],
        Some(payment_id.to_owned()),
    )
    .await;
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
