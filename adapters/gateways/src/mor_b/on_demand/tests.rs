use std::collections::BTreeMap;

use application::ports::{OrderLocator, RefundedCharge};
use domain::{
    Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId, ProviderRefs,
    UserId,
};
use serde_json::{Value, json};

use super::*;
use crate::mor_b::transformers::{
    Meaning, PaymentList, checkout_request, meaning_of, parse_envelope,
};

fn charge() -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new("ord_top_1").unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        amount: Money::from_minor(7900, Currency::Usd).unwrap(),
        method: SavedMethod {
            customer_ref: "cus_1".into(),
            method_ref: "sub_od_1".into(),
            brand: Some("visa".into()),
            last4: Some("4242".into()),
            wallet_account: None,
        },
        idempotency_key: "tu_1".into(),
        description: "Automatic top-up: credits_mor_b_10000".into(),
        notify_url: "http://127.0.0.1:8080/api/payment/webhook/mor_b".into(),
    }
}

fn pack() -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: "Pack".into(),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: "credits_mor_b_10000".into(),
        provider: Some("mor_b".into()),
        amount: Some("79".parse().unwrap()),
        currency: Some("USD".into()),
        duration_type: Some("credits".into()),
        credits: Some("10000".parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::MorB, "pdt_pack"),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

fn checkout(save_method: bool) -> CheckoutRequest {
    let plan = pack();
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

/// A Dodo payment as its webhooks and `GET /payments/{id}` show it.
fn payment(status: &str, metadata: Value, extra: Value) -> Payment {
    let mut body = json!({
        "payment_id": "pay_1",
        "total_amount": 7900,
        "tax": 0,
        "currency": "USD",
        "status": status,
        "metadata": metadata,
        "customer": { "customer_id": "cus_1", "email": "a@example.com", "name": "A" },
        "card_network": "VISA",
        "card_last_four": "4242",
        "subscription_id": "sub_od_1",
        "error_code": null,
        "error_message": null,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    serde_json::from_value(body).unwrap()
}

fn top_up_metadata() -> Value {
    json!({ "orderId": "ord_top_1", "topUp": "tu_1", "amountMinor": "7900", "currency": "USD" })
}

fn consent_metadata() -> Value {
    json!({ "orderId": "ord_1", "saveMethod": "1", "amountMinor": "7900", "currency": "USD" })
}

fn events(event_type: &str, data: &Value) -> Vec<PaymentEvent> {
    let body = json!({
        "business_id": "bus_1",
        "type": event_type,
        "timestamp": "2026-01-01T00:00:00Z",
        "data": data,
    });
    let envelope = parse_envelope(body.to_string().as_bytes()).unwrap();
    match meaning_of(&envelope).unwrap() {
        Meaning::Events(events) => events,
        other => panic!("{event_type}: {other:?}"),
    }
}

fn payment_json(status: &str, metadata: Value, error_code: Option<&str>) -> Value {
    json!({
        "payload_type": "Payment",
        "payment_id": "pay_1",
        "total_amount": 7900,
        "tax": 0,
        "currency": "USD",
        "status": status,
        "metadata": metadata,
        "customer": { "customer_id": "cus_1", "email": "a@example.com", "name": "A" },
        "card_network": "VISA",
        "card_last_four": "4242",
        "subscription_id": "sub_od_1",
        "checkout_session_id": null,
        "error_code": error_code,
        "error_message": error_code.map(|_| "Refused by the issuer"),
    })
}

#[test]
fn a_consented_checkout_sells_the_on_demand_product_at_the_packs_price_and_keeps_the_mandate() {
    let mut body = checkout_request(&checkout(true), None).unwrap();
    consent(&mut body, "pdt_on_demand", &checkout(true)).unwrap();
    let sent = serde_json::to_value(&body).unwrap();
    assert_eq!(
        sent["product_cart"],
        json!([{ "product_id": "pdt_on_demand", "quantity": 1 }])
    );
    assert_eq!(
        sent["subscription_data"],
        json!({ "on_demand": { "mandate_only": false, "product_price": 7900, "product_currency": "USD" } })
    );
    assert_eq!(sent["metadata"]["saveMethod"], "1");
    assert_eq!(sent["metadata"]["orderId"], "ord_1");
    assert_eq!(sent["metadata"]["amountMinor"], "7900");
    assert!(sent["metadata"].get("intervalMonths").is_none());
    let plain = serde_json::to_value(checkout_request(&checkout(false), None).unwrap()).unwrap();
    assert!(plain.get("subscription_data").is_none());
    assert_eq!(plain["product_cart"][0]["product_id"], "pdt_pack");
    assert!(consent(&mut body, "pdt/../x", &checkout(true)).is_err());
}

#[test]
fn a_top_up_charges_the_on_demand_subscription_with_the_price_and_our_order_in_metadata() {
    assert_eq!(subscription_of(&charge()).unwrap(), "sub_od_1");
    let body = serde_json::to_value(charge_body(&charge(), None).unwrap()).unwrap();
    assert_eq!(
        body,
        json!({
            "product_price": 7900,
            "product_currency": "USD",
            "product_description": "Automatic top-up: credits_mor_b_10000",
            "metadata": {
                "orderId": "ord_top_1",
                "userId": "usr_1",
                "topUp": "tu_1",
                "amountMinor": "7900",
                "currency": "USD",
            },
        })
    );
    let sandboxed = charge_body(&charge(), Some("http://127.0.0.1:8080/hook")).unwrap();
    assert_eq!(
        sandboxed.metadata.get("notifyUrl").map(String::as_str),
        Some("http://127.0.0.1:8080/hook")
    );
    let answer: ChargeAnswer = serde_json::from_value(json!({ "payment_id": "pay_9" })).unwrap();
    assert_eq!(answer.payment_id, "pay_9");
}

#[test]
fn a_top_up_with_a_foreign_id_an_empty_key_or_nothing_to_charge_is_refused_before_dodo() {
    let mut foreign = charge();
    foreign.method.method_ref = "sub_1/../../refunds".into();
    assert!(subscription_of(&foreign).is_err());
    let mut keyless = charge();
    keyless.idempotency_key = "  ".into();
    assert!(charge_body(&keyless, None).is_err());
    let mut free = charge();
    free.amount = Money::from_minor(0, Currency::Usd).unwrap();
    assert!(charge_body(&free, None).is_err());
}

#[test]
fn a_charge_sent_again_finds_the_payment_that_carries_its_key_instead_of_charging_twice() {
    let now = Timestamp::from_unix_millis(1_767_225_600_000);
    let query = charges_query("sub_od_1", now);
    assert!(query.contains(&("subscription_id", "sub_od_1".to_owned())));
    assert!(query.contains(&("created_at_gte", "2025-12-25T00:00:00.000Z".to_owned())));
    assert!(query.contains(&("page_size", "100".to_owned())));
    let list: PaymentList = serde_json::from_value(json!({ "items": [
        { "payment_id": "pay_consent", "created_at": "2026-01-01T00:00:00Z", "status": "succeeded",
          "subscription_id": "sub_od_1", "total_amount": 7900, "metadata": consent_metadata() },
        { "payment_id": "pay_other", "created_at": "2026-01-01T00:00:00Z", "status": "failed",
          "subscription_id": "sub_od_1", "total_amount": 7900,
          "metadata": { "orderId": "ord_2", "topUp": "tu_0" } },
        { "payment_id": "pay_1", "created_at": "2026-01-01T00:00:00Z", "status": "succeeded",
          "subscription_id": "sub_od_1", "total_amount": 7900, "metadata": top_up_metadata() },
    ] }))
    .unwrap();
    assert_eq!(
        charged_before("sub_od_1", "tu_1", &list.items),
        Some("pay_1")
    );
    assert_eq!(charged_before("sub_od_2", "tu_1", &list.items), None);
    assert_eq!(charged_before("sub_od_1", "tu_2", &list.items), None);
}

#[test]
fn the_payment_read_after_the_charge_says_accepted_declined_or_authentication_required() {
    let accepted =
        |status: &str| outcome(&payment(status, top_up_metadata(), json!({})), "pay_1").unwrap();
    for status in [
        "succeeded",
        "processing",
        "requires_merchant_action",
        "brand_new",
    ] {
        assert_eq!(
            accepted(status),
            OffSessionOutcome::Accepted {
                provider_reference: Some("pay_1".into())
            },
            "{status}"
        );
    }
    assert_eq!(
        accepted("requires_customer_action"),
        OffSessionOutcome::AuthenticationRequired
    );
    let failed = |code: &str| {
        let extra = json!({ "error_code": code, "error_message": "Refused by the issuer" });
        outcome(&payment("failed", top_up_metadata(), extra), "pay_1").unwrap()
    };
    assert_eq!(
        failed("AUTHENTICATION_REQUIRED"),
        OffSessionOutcome::AuthenticationRequired
    );
    assert_eq!(
        failed("INSUFFICIENT_FUNDS"),
        OffSessionOutcome::Declined {
            reason: "INSUFFICIENT_FUNDS: Refused by the issuer".into()
        }
    );
    let cancelled = outcome(&payment("cancelled", top_up_metadata(), json!({})), "pay_1");
    assert_eq!(
        cancelled.unwrap(),
        OffSessionOutcome::Declined {
            reason: "payment failed".into()
        }
    );
    assert!(matches!(
        outcome(&payment("succeeded", top_up_metadata(), json!({})), "pay_2"),
        Err(GatewayError::BadResponse(_))
    ));
}

#[test]
fn the_consented_checkouts_payment_pays_the_order_and_saves_the_on_demand_subscription() {
    let mut data = payment_json("succeeded", consent_metadata(), None);
    data["checkout_session_id"] = json!("cks_1");
    let locator = OrderLocator {
        order_id: Some(OrderId::new("ord_1").unwrap()),
        provider_reference: Some("cks_1".into()),
    };
    let got = events("payment.succeeded", &data);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(matches!(
        &got[0],
        PaymentEvent::PaymentSucceeded { order, amount, .. }
            if *order == locator && amount.amount_minor() == 7900
    ));
    let PaymentEvent::PaymentMethodSaved { order, method, .. } = &got[1] else {
        panic!("{got:?}");
    };
    assert_eq!(*order, locator);
    assert_eq!(
        *method,
        SavedMethod {
            customer_ref: "cus_1".into(),
            method_ref: "sub_od_1".into(),
            brand: Some("visa".into()),
            last4: Some("4242".into()),
            wallet_account: None,
        }
    );
}

#[test]
fn a_top_ups_payment_pays_its_order_by_the_payment_id_and_saves_nothing() {
    let got = events(
        "payment.succeeded",
        &payment_json("succeeded", top_up_metadata(), None),
    );
    let locator = OrderLocator {
        order_id: Some(OrderId::new("ord_top_1").unwrap()),
        provider_reference: Some("pay_1".into()),
    };
    assert!(
        matches!(&got[..], [PaymentEvent::PaymentSucceeded { order, amount, .. }]
            if *order == locator && amount.amount_minor() == 7900),
        "{got:?}"
    );
    let declined = events(
        "payment.failed",
        &payment_json("failed", top_up_metadata(), Some("CARD_DECLINED")),
    );
    assert!(
        matches!(&declined[..], [PaymentEvent::PaymentFailed { order, reason, .. }]
            if *order == locator && reason == "Refused by the issuer"),
        "{declined:?}"
    );
    let authenticate = events(
        "payment.failed",
        &payment_json("failed", top_up_metadata(), Some("AUTHENTICATION_REQUIRED")),
    );
    assert!(
        authenticate.is_empty(),
        "the buyer finishes it in a checkout"
    );
    let refunded = payment("succeeded", top_up_metadata(), json!({}));
    assert_eq!(refunded.charge(), RefundedCharge::Order(locator));
}

#[test]
fn another_payment_of_a_subscription_pays_nothing_and_an_on_demand_subscription_is_no_tally_one() {
    let renewal = payment_json("succeeded", json!({ "orderId": "ord_sub" }), None);
    assert!(events("payment.succeeded", &renewal).is_empty());
    let subscription = |on_demand: bool, metadata: Value| {
        json!({
            "payload_type": "Subscription",
            "subscription_id": "sub_od_1",
            "status": "active",
            "on_demand": on_demand,
            "previous_billing_date": "2026-01-01T00:00:00Z",
            "next_billing_date": "2026-02-01T00:00:00Z",
            "recurring_pre_tax_amount": 7900,
            "currency": "USD",
            "cancel_at_next_billing_date": false,
            "metadata": metadata,
        })
    };
    for event_type in [
        "subscription.active",
        "subscription.renewed",
        "subscription.on_hold",
        "subscription.failed",
        "subscription.cancelled",
        "subscription.expired",
    ] {
        let marked = subscription(true, json!({ "orderId": "ord_1" }));
        assert!(events(event_type, &marked).is_empty(), "{event_type}");
        let consented = subscription(false, consent_metadata());
        assert!(events(event_type, &consented).is_empty(), "{event_type}");
    }
    let tally = subscription(false, json!({ "orderId": "ord_sub" }));
    assert!(!events("subscription.expired", &tally).is_empty());
}
