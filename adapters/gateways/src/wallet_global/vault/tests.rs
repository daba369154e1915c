use application::ports::{OffSessionCharge, SavedMethod};
use domain::{Currency, Money, OrderId, Timestamp, UserId};
use serde_json::json;

use super::*;

const NOW: Timestamp = Timestamp::from_unix_millis(1_714_557_600_000);

fn charge() -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new("ord_top_1").unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        amount: Money::from_minor(1799, Currency::Usd).unwrap(),
        method: SavedMethod {
            customer_ref: "208743798".into(),
            method_ref: "3nqvjt3n".into(),
            brand: Some(BRAND.into()),
            last4: None,
            wallet_account: Some("buyer@example.com".into()),
        },
        idempotency_key: "tu_1".into(),
        description: "Automatic top-up: 2,000 credits".into(),
        notify_url: "http://127.0.0.1:8080/api/payment/webhook/wallet_global".into(),
    }
}

fn reply(status: u16, body: &serde_json::Value) -> HttpReply {
    HttpReply {
        status,
        body: body.to_string().into_bytes(),
        headers: Vec::new(),
    }
}

fn order(status: &str, capture: Option<&str>) -> serde_json::Value {
    let mut unit = json!({
        "reference_id": "ord_top_1", "custom_id": "ord_top_1",
        "amount": { "currency_code": "USD", "value": "17.99" }
    });
    if let Some(capture) = capture {
        unit["payments"] = json!({ "captures": [{
            "id": "3C679366HH908993F", "status": capture,
            "amount": { "currency_code": "USD", "value": "17.99" },
            "custom_id": "ord_top_1", "create_time": "2024-05-01T10:00:00Z"
        }]});
    }
    json!({ "id": "5O190127TN364715T", "status": status, "purchase_units": [unit] })
}

fn issue(name: &str, description: &str) -> serde_json::Value {
    json!({
        "name": "UNPROCESSABLE_ENTITY", "debug_id": "b1d1f06c7246c",
        "message": "The requested action could not be performed, semantically incorrect, or failed business validation.",
        "details": [{ "issue": name, "description": description }]
    })
}

#[test]
fn a_top_up_charges_the_vault_id_for_our_order_under_a_request_id_of_its_own() {
    let body = serde_json::to_value(VaultCharge::for_charge(&charge()).unwrap()).unwrap();
    assert_eq!(
        body,
        json!({
            "intent": "CAPTURE",
            "purchase_units": [{
                "reference_id": "ord_top_1", "custom_id": "ord_top_1",
                "description": "Automatic top-up: 2,000 credits",
                "amount": { "currency_code": "USD", "value": "17.99" }
            }],
            "payment_source": { "paypal": { "vault_id": "3nqvjt3n" } }
        })
    );
    assert_eq!(request_id(&charge()).unwrap(), "topup-tu_1");
}

#[test]
fn a_charge_of_nothing_an_unsafe_vault_id_or_an_unusable_key_is_refused_before_paypal() {
    let mut free = charge();
    free.amount = Money::from_minor(0, Currency::Usd).unwrap();
    assert!(matches!(
        VaultCharge::for_charge(&free),
        Err(GatewayError::Rejected(_))
    ));
    let mut unsafe_id = charge();
    unsafe_id.method.method_ref = "../v1/oauth2".into();
    assert!(matches!(
        VaultCharge::for_charge(&unsafe_id),
        Err(GatewayError::Rejected(_))
    ));
    for key in ["", "  ", "a\nb", &"k".repeat(103)] {
        let mut c = charge();
        c.idempotency_key = key.to_owned();
        assert!(request_id(&c).is_err(), "{key:?}");
    }
    let mut longest = charge();
    longest.idempotency_key = "k".repeat(102);
    assert!(request_id(&longest).is_ok());
}

#[test]
fn a_captured_or_pending_charge_is_accepted_under_paypals_order_id() {
    for capture in ["COMPLETED", "PENDING"] {
        let answer = read_charge(&reply(201, &order("COMPLETED", Some(capture))), NOW).unwrap();
        assert_eq!(
            answer,
            ChargeAnswer::Accepted(Some("5O190127TN364715T".into()))
        );
    }
    // Replayed under the same request id, PayPal answers 200 with the same order.
    let answer = read_charge(&reply(200, &order("COMPLETED", Some("COMPLETED"))), NOW).unwrap();
    assert!(matches!(answer, ChargeAnswer::Accepted(Some(_))));
}

#[test]
fn a_declined_capture_or_a_refused_instrument_is_a_decline_with_paypals_reason() {
    let declined = read_charge(&reply(201, &order("COMPLETED", Some("DECLINED"))), NOW);
    assert_eq!(
        declined.unwrap(),
        ChargeAnswer::Declined("capture declined".into())
    );
    let refused = reply(
        422,
        &issue(
            "INSTRUMENT_DECLINED",
            "The instrument presented was either declined by the processor or bank, or it can't be used for this payment.",
        ),
    );
    match read_charge(&refused, NOW).unwrap() {
        ChargeAnswer::Declined(reason) => {
            assert!(
                reason.starts_with("INSTRUMENT_DECLINED: The instrument"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    let voided = read_charge(&reply(201, &order("VOIDED", None)), NOW).unwrap();
    assert!(matches!(voided, ChargeAnswer::Declined(_)));
}

#[test]
fn paypal_wanting_the_payer_back_is_authentication_required() {
    for name in [
        "PAYER_ACTION_REQUIRED",
        "REDIRECT_PAYER_FOR_ALTERNATE_FUNDING",
    ] {
        let answer = read_charge(&reply(422, &issue(name, "Payer must act.")), NOW).unwrap();
        assert_eq!(answer, ChargeAnswer::NeedsPayer, "{name}");
    }
    let answer = read_charge(&reply(201, &order("PAYER_ACTION_REQUIRED", None)), NOW).unwrap();
    assert_eq!(answer, ChargeAnswer::NeedsPayer);
}

#[test]
fn any_other_refusal_is_an_error_not_a_decline() {
    let unknown_token = reply(422, &issue("INVALID_VAULT_ID", "The vault id is invalid."));
    assert!(matches!(
        read_charge(&unknown_token, NOW),
        Err(GatewayError::Rejected(_))
    ));
    let bad = reply(400, &json!({ "name": "INVALID_REQUEST", "details": [] }));
    assert!(matches!(
        read_charge(&bad, NOW),
        Err(GatewayError::Rejected(_))
    ));
    let down = reply(503, &json!({}));
    assert!(matches!(
        read_charge(&down, NOW),
        Err(GatewayError::Unreachable(_))
    ));
    let garbled = HttpReply {
        status: 201,
        body: b"<html>".to_vec(),
        headers: Vec::new(),
    };
    assert!(matches!(
        read_charge(&garbled, NOW),
        Err(GatewayError::BadResponse(_))
    ));
}

fn token(metadata: serde_json::Value) -> PaymentToken {
    serde_json::from_value(json!({
        "id": "3nqvjt3n",
        "time_created": "2022-08-26T18:25:57.449PDT",
        "customer": { "id": "208743798" },
        "payment_source": { "paypal": {
            "permit_multiple_payment_tokens": false, "usage_type": "MERCHANT",
            "customer_type": "CONSUMER", "email_address": "email@example.com",
            "payer_id": "VTR4JYK7STE7J"
        }},
        "metadata": metadata
    }))
    .unwrap()
}

#[test]
fn a_vaulted_paypal_account_is_its_token_customer_and_email_with_the_order_that_saved_it() {
    let created = token(json!({ "order_id": "5O190127TN364715T" })).created();
    assert_eq!(
        created,
        Some(TokenCreated {
            paypal_order_id: "5O190127TN364715T".into(),
            method: SavedMethod {
                customer_ref: "208743798".into(),
                method_ref: "3nqvjt3n".into(),
                brand: Some("paypal".into()),
                last4: None,
                wallet_account: Some("email@example.com".into()),
            },
        })
    );
}

#[test]
fn a_token_naming_no_order_or_not_a_paypal_account_is_nothing_to_keep() {
    assert_eq!(token(json!({})).created(), None);
    assert_eq!(token(json!({ "order_id": "../x" })).created(), None);
    let card: PaymentToken = serde_json::from_value(json!({
        "id": "nkq2y9g", "customer": { "id": "695922590" },
        "payment_source": { "card": { "last_digits": "1111", "brand": "VISA" } },
        "metadata": { "order_id": "5O190127TN364715T" }
    }))
    .unwrap();
    assert_eq!(card.created(), None);
}

#[test]
fn a_saving_order_is_located_by_our_id_and_paypals_and_only_a_completed_capture_paid() {
    let order: Order = serde_json::from_value(order("COMPLETED", Some("COMPLETED"))).unwrap();
    let locator = saving_order(&order);
    assert_eq!(locator.order_id.unwrap().as_str(), "ord_top_1");
    assert_eq!(
        locator.provider_reference.as_deref(),
        Some("5O190127TN364715T")
    );
    let outcome = order.capture_outcome(NOW).unwrap();
    assert_eq!(
        paid(&outcome).map(|(m, _)| m),
        Some(Money::from_minor(1799, Currency::Usd).unwrap())
    );
    assert_eq!(paid(&CaptureOutcome::Pending), None);
}
