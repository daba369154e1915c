use std::collections::BTreeMap;

use application::ports::{CheckoutRequest, OffSessionCharge};
use domain::{
    Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId, ProviderRefs,
    Timestamp, UserId,
};
use serde_json::json;

use super::*;
use crate::card_gateway::transformers::{
    Event, Interpretation, checkout_form, interpret, parse_event,
};

fn charge() -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new("ord_top_1").unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        amount: Money::from_minor(500, Currency::Usd).unwrap(),
        method: SavedMethod {
            customer_ref: "cus_1".into(),
            method_ref: "pm_1".into(),
            brand: Some("visa".into()),
            last4: Some("4242".into()),
            wallet_account: None,
        },
        idempotency_key: "tu_1".into(),
        description: "500 credits".into(),
        notify_url: "http://127.0.0.1:8080/api/payment/webhook/card_gateway".into(),
    }
}

fn reply(status: u16, body: serde_json::Value) -> HttpReply {
    HttpReply {
        status,
        body: body.to_string().into_bytes(),
        headers: Vec::new(),
    }
}

fn value<'a>(form: &'a [(String, String)], key: &str) -> Option<&'a str> {
    form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn a_top_up_charges_the_saved_card_off_session_confirmed_at_once_and_marked_as_a_top_up() {
    let form = charge_form(&charge(), None).unwrap();
    for (key, expected) in [
        ("amount", "500"),
        ("currency", "usd"),
        ("customer", "cus_1"),
        ("payment_method", "pm_1"),
        ("off_session", "true"),
        ("confirm", "true"),
        ("automatic_payment_methods[enabled]", "true"),
        ("automatic_payment_methods[allow_redirects]", "never"),
        ("description", "500 credits"),
        ("metadata[orderId]", "ord_top_1"),
        ("metadata[userId]", "usr_1"),
        ("metadata[topUp]", "tu_1"),
    ] {
        assert_eq!(value(&form, key), Some(expected), "{key}");
    }
    assert_eq!(
        value(&form, "metadata[notifyUrl]"),
        None,
        "only the sandbox is told"
    );
    let sandboxed = charge_form(&charge(), Some("http://127.0.0.1:8080/hook")).unwrap();
    assert_eq!(
        value(&sandboxed, "metadata[notifyUrl]"),
        Some("http://127.0.0.1:8080/hook")
    );
    assert_eq!(idempotency_key(&charge()).unwrap(), "topup-tu_1");
}

#[test]
fn a_top_up_with_a_foreign_id_an_empty_key_or_nothing_to_charge_is_refused_before_stripe() {
    let mut bad_method = charge();
    bad_method.method.method_ref = "pm_1/../../v1/customers".into();
    assert!(charge_form(&bad_method, None).is_err());
    let mut nothing = charge();
    nothing.amount = Money::from_minor(0, Currency::Usd).unwrap();
    assert!(charge_form(&nothing, None).is_err());
    let mut no_key = charge();
    no_key.idempotency_key = " ".into();
    assert!(idempotency_key(&no_key).is_err());
    let mut long_key = charge();
    long_key.idempotency_key = "k".repeat(250);
    assert!(idempotency_key(&long_key).is_err());
}

#[test]
fn succeeded_and_processing_are_accepted_and_the_payment_event_brings_the_credits() {
    for status in ["succeeded", "processing", "something_new"] {
        let answer = read_charge(reply(200, json!({"id": "pi_1", "status": status}))).unwrap();
        assert_eq!(
            answer,
            ChargeAnswer::Accepted(Some("pi_1".into())),
            "{status}"
        );
    }
}

#[test]
fn a_card_error_is_a_decline_with_the_issuers_code_and_stripes_words() {
    let declined = reply(
        402,
        json!({"error": {"type": "card_error", "code": "card_declined",
            "decline_code": "insufficient_funds", "message": "Your card has insufficient funds.",
            "payment_intent": {"id": "pi_2", "status": "requires_payment_method"}}}),
    );
    assert_eq!(
        read_charge(declined).unwrap(),
        ChargeAnswer::Declined("insufficient_funds: Your card has insufficient funds.".into())
    );
    let expired = reply(
        402,
        json!({"error": {"type": "card_error", "code": "expired_card"}}),
    );
    assert_eq!(
        read_charge(expired).unwrap(),
        ChargeAnswer::Declined("expired_card".into())
    );
}

#[test]
fn authentication_required_names_the_payment_intent_to_cancel() {
    let error = reply(
        402,
        json!({"error": {"type": "card_error", "code": "authentication_required",
            "decline_code": "authentication_required",
            "message": "Your card was declined. This transaction requires authentication.",
            "payment_intent": {"id": "pi_3", "status": "requires_payment_method"}}}),
    );
    assert_eq!(
        read_charge(error).unwrap(),
        ChargeAnswer::NeedsAuthentication(Some("pi_3".into()))
    );
    let requires_action = reply(200, json!({"id": "pi_4", "status": "requires_action"}));
    assert_eq!(
        read_charge(requires_action).unwrap(),
        ChargeAnswer::NeedsAuthentication(Some("pi_4".into()))
    );
}

#[test]
fn other_failures_keep_the_gateways_usual_errors() {
    let reused_key = reply(
        400,
        json!({"error": {"type": "idempotency_error",
            "message": "Keys for idempotent requests can only be used with the same parameters they were first used with."}}),
    );
    assert!(matches!(
        read_charge(reused_key),
        Err(GatewayError::Rejected(m)) if m.contains("idempotency_error")
    ));
    let unknown_method = reply(
        400,
        json!({"error": {"type": "invalid_request_error", "code": "resource_missing",
            "message": "No such PaymentMethod: 'pm_x'", "param": "payment_method"}}),
    );
    assert!(matches!(
        read_charge(unknown_method),
        Err(GatewayError::Rejected(_))
    ));
    assert!(matches!(
        read_charge(reply(500, json!({}))),
        Err(GatewayError::Unreachable(_))
    ));
}

#[test]
fn a_payment_intent_cancelled_already_is_cancelled() {
    assert!(read_cancel(reply(200, json!({"id": "pi_3", "status": "canceled"}))).is_ok());
    let already = reply(
        400,
        json!({"error": {"type": "invalid_request_error", "code": "payment_intent_unexpected_state",
            "message": "You cannot cancel this PaymentIntent because it has a status of canceled.",
            "payment_intent": {"id": "pi_3", "status": "canceled"}}}),
    );
    assert!(read_cancel(already).is_ok());
    let paid = reply(
        400,
        json!({"error": {"type": "invalid_request_error", "code": "payment_intent_unexpected_state",
            "payment_intent": {"id": "pi_3", "status": "succeeded"}}}),
    );
    assert!(read_cancel(paid).is_err());
}

#[test]
fn the_saved_method_is_the_customer_and_the_expanded_card() {
    let intent: Intent = serde_json::from_value(json!({
        "id": "pi_1", "status": "succeeded", "customer": "cus_9",
        "payment_method": {"id": "pm_9", "object": "payment_method", "type": "card",
            "card": {"brand": "visa", "last4": "4242"}}
    }))
    .unwrap();
    assert_eq!(
        intent.saved_method(),
        Some(SavedMethod {
            customer_ref: "cus_9".into(),
            method_ref: "pm_9".into(),
            brand: Some("visa".into()),
            last4: Some("4242".into()),
            wallet_account: None,
        })
    );
    let unexpanded: Intent = serde_json::from_value(json!({
        "id": "pi_1", "status": "succeeded", "customer": {"id": "cus_9", "object": "customer"},
        "payment_method": "pm_9"
    }))
    .unwrap();
    let method = unexpanded.saved_method().unwrap();
    assert_eq!((method.brand, method.last4), (None, None));
    let guest: Intent = serde_json::from_value(json!({
        "id": "pi_1", "status": "succeeded", "customer": null, "payment_method": "pm_9"
    }))
    .unwrap();
    assert_eq!(
        guest.saved_method(),
        None,
        "a method without a Customer cannot be reused"
    );
}

fn event(event_type: &str, object: serde_json::Value) -> Event {
    parse_event(
        json!({"id": "evt_1", "type": event_type, "created": 1_700_000_000,
            "data": {"object": object}})
        .to_string()
        .as_bytes(),
    )
    .unwrap()
}

#[test]
fn a_top_ups_payment_intent_succeeded_pays_its_order_and_a_sessions_is_ignored() {
    let top_up = event(
        "payment_intent.succeeded",
        json!({"id": "pi_5", "object": "payment_intent", "status": "succeeded",
            "amount": 500, "amount_received": 500, "currency": "usd",
            "metadata": {"orderId": "ord_top_1", "topUp": "tu_1"}}),
    );
    let Interpretation::Events(events) = interpret(&top_up).unwrap() else {
        panic!("no lookup")
    };
    assert_eq!(
        events,
        vec![PaymentEvent::PaymentSucceeded {
            order: OrderLocator {
                order_id: OrderId::new("ord_top_1").ok(),
                provider_reference: Some("pi_5".into()),
            },
            amount: Money::from_minor(500, Currency::Usd).unwrap(),
            occurred_at: Timestamp::from_unix_millis(1_700_000_000_000),
        }]
    );
    let session = event(
        "payment_intent.succeeded",
        json!({"id": "pi_6", "status": "succeeded", "amount_received": 500, "currency": "usd",
            "metadata": {"orderId": "ord_checkout"}}),
    );
    assert_eq!(
        interpret(&session).unwrap(),
        Interpretation::Events(Vec::new()),
        "checkout.session.completed reports a session's payment"
    );
}

#[test]
fn a_top_up_declined_fails_its_order_but_one_that_needs_authentication_fails_nothing() {
    let declined = event(
        "payment_intent.payment_failed",
        json!({"id": "pi_7", "status": "requires_payment_method",
            "metadata": {"orderId": "ord_top_1", "topUp": "tu_1"},
            "last_payment_error": {"type": "card_error", "code": "card_declined",
                "decline_code": "generic_decline", "message": "Your card was declined."}}),
    );
    let Interpretation::Events(events) = interpret(&declined).unwrap() else {
        panic!("no lookup")
    };
    let [PaymentEvent::PaymentFailed { order, reason, .. }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(order.provider_reference.as_deref(), Some("pi_7"));
    assert_eq!(reason, "Your card was declined.");
    let authentication = event(
        "payment_intent.payment_failed",
        json!({"id": "pi_8", "status": "requires_payment_method",
            "metadata": {"orderId": "ord_top_1", "topUp": "tu_1"},
            "last_payment_error": {"type": "card_error", "code": "authentication_required",
                "decline_code": "authentication_required"}}),
    );
    assert_eq!(
        interpret(&authentication).unwrap(),
        Interpretation::Events(Vec::new())
    );
}

fn session_event(metadata: serde_json::Value) -> Event {
    event(
        "checkout.session.completed",
        json!({"id": "cs_1", "object": "checkout.session", "status": "complete",
            "payment_status": "paid", "mode": "payment", "amount_total": 500, "currency": "usd",
            "client_reference_id": "ord_1", "metadata": metadata, "payment_intent": "pi_1",
            "customer": "cus_1"}),
    )
}

#[test]
fn a_paid_session_that_saved_the_card_reads_its_payment_intent_after_the_payment() {
    let saved = interpret(&session_event(
        json!({"orderId": "ord_1", "saveMethod": "1"}),
    ))
    .unwrap();
    let Interpretation::SavedMethod {
        events,
        payment_intent,
        order,
        ..
    } = saved
    else {
        panic!("{saved:?}")
    };
    assert!(matches!(
        &events[..],
        [PaymentEvent::PaymentSucceeded { .. }]
    ));
    assert_eq!(payment_intent, "pi_1");
    assert_eq!(order.order_id.as_ref().map(OrderId::as_str), Some("ord_1"));
    assert_eq!(order.provider_reference.as_deref(), Some("cs_1"));
    let plain = interpret(&session_event(json!({"orderId": "ord_1"}))).unwrap();
    assert!(matches!(plain, Interpretation::Events(e) if e.len() == 1));
}

fn plan(kind: &str) -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: "Pack".into(),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: format!("{kind}-plan"),
        provider: Some("card_gateway".into()),
        amount: Some("5".parse().unwrap()),
        currency: Some("USD".into()),
        months: (kind == "recurring").then_some(1),
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "500".parse().unwrap()),
        provider_refs: if kind == "recurring" {
            ProviderRefs::default().with(ProviderId::CardGateway, "price_pro")
        } else {
            ProviderRefs::default()
        },
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

fn checkout(kind: &str, save_method: bool) -> CheckoutRequest {
    let plan = plan(kind);
    CheckoutRequest {
        order_id: OrderId::new("ord_1").unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        customer_email: None,
        customer_name: None,
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: "https://tally.example/ok".into(),
        cancel_url: "https://tally.example/cancel".into(),
        notify_url: "https://tally.example/hook".into(),
        expires_at: Timestamp::from_unix_millis(1_700_007_200_000),
        save_method,
    }
}

#[test]
fn a_payment_mode_checkout_with_consent_asks_stripe_to_keep_the_card_for_off_session_use() {
    let now = Timestamp::from_unix_millis(1_700_000_000_000);
    let form = checkout_form(&checkout("credits", true), now, None).unwrap();
    for (key, expected) in [
        ("customer_creation", "always"),
        ("payment_intent_data[setup_future_usage]", "off_session"),
        ("metadata[saveMethod]", "1"),
        ("payment_intent_data[metadata][saveMethod]", "1"),
    ] {
        assert_eq!(value(&form, key), Some(expected), "{key}");
    }
    let without = checkout_form(&checkout("credits", false), now, None).unwrap();
    let subscription = checkout_form(&checkout("recurring", true), now, None).unwrap();
    for form in [without, subscription] {
        assert!(
            form.iter().all(|(k, _)| !k.contains("setup_future_usage")
                && k != "customer_creation"
                && !k.contains("saveMethod")),
            "{form:?}"
        );
    }
}

#[test]
fn a_detached_or_unknown_method_is_forgotten_and_other_refusals_are_errors() {
    let detached = reply(
        200,
        json!({"id": "pm_1", "object": "payment_method", "customer": null}),
    );
    assert!(read_detach(detached).is_ok());
    let missing = reply(
        400,
        json!({"error": {"type": "invalid_request_error", "code": "resource_missing"}}),
    );
    assert!(read_detach(missing).is_ok());
    assert!(read_detach(reply(404, json!({}))).is_ok());
    let refused = reply(
        400,
        json!({"error": {"type": "invalid_request_error", "message": "not attached"}}),
    );
    assert!(matches!(
        read_detach(refused),
        Err(GatewayError::Rejected(_))
    ));
    assert!(matches!(
        read_detach(reply(200, json!({"unexpected": true}))),
        Err(GatewayError::BadResponse(_))
    ));
}
