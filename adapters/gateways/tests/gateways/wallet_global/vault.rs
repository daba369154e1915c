//! Automatic top-up against a wiremock PayPal: the consented checkout asks PayPal's vault to
//! keep the account, `VAULT.PAYMENT-TOKEN.CREATED` reports it after the order's capture, and a
//! top-up charges the vault id under its own request id.

use application::ports::{OffSessionCharge, OffSessionOutcome, SavedMethod};

use super::*;

const VAULT_ID: &str = "3nqvjt3n";
const TOP_UP_ORDER: &str = "ord_01HZX3QT";

fn account() -> SavedMethod {
    SavedMethod {
        customer_ref: "208743798".into(),
        method_ref: VAULT_ID.into(),
        brand: Some("paypal".into()),
        last4: None,
        wallet_account: Some("buyer@example.com".into()),
    }
}

fn top_up() -> OffSessionCharge {
    OffSessionCharge {
        order_id: OrderId::new(TOP_UP_ORDER).unwrap(),
        user_id: UserId::new("user_1").unwrap(),
        amount: usd(1799),
        method: account(),
        idempotency_key: "tu_1".into(),
        description: "Automatic top-up: 2,000 credits".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_global".into(),
    }
}

#[tokio::test]
async fn a_consented_checkout_asks_paypal_to_vault_the_account_for_merchant_charges() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders"))
        .and(body_partial_json(json!({
            "payment_source": { "paypal": {
                "experience_context": { "user_action": "PAY_NOW" },
                "attributes": { "vault": {
                    "store_in_vault": "ON_SUCCESS", "usage_type": "MERCHANT",
                    "customer_type": "CONSUMER"
                }}
            }}
        })))
        .respond_with(json_reply(201, "api/order_payer_action_required.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let mut request = checkout_request(plan("credits", "17.99", "USD"));
    request.save_method = true;
    h.gateway.create_checkout(&request).await.unwrap();
    assert!(h.gateway.saves_methods());
    // Without consent, nothing is asked.
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders",
        201,
        "api/order_payer_action_required.json",
    )
    .await;
    h.gateway
        .create_checkout(&checkout_request(plan("credits", "17.99", "USD")))
        .await
        .unwrap();
    let sent: Value = h.requests_to("/v2/checkout/orders").await[0]
        .body_json()
        .unwrap();
    assert!(sent["payment_source"]["paypal"].get("attributes").is_none());
}

#[tokio::test]
async fn a_vaulted_token_reports_the_orders_capture_then_the_account() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        &format!("/v2/checkout/orders/{PAYPAL_ORDER}"),
        200,
        "api/order_captured.json",
    )
    .await;
    let events = h
        .events_of("webhooks/vault_payment_token_created.json")
        .await;
    let locator = OrderLocator {
        order_id: Some(order_id()),
        provider_reference: Some(PAYPAL_ORDER.into()),
    };
    assert!(
        matches!(events.as_slice(), [
            PaymentEvent::PaymentSucceeded { order, amount, .. },
            PaymentEvent::PaymentMethodSaved { order: saved_on, method, .. },
        ] if *order == locator && *amount == usd(1799) && *saved_on == locator && *method == account()),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_token_whose_capture_is_still_pending_is_refused_for_paypal_to_redeliver() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let mut order: Value = serde_json::from_str(&fixture("api/order_captured.json")).unwrap();
    order["purchase_units"][0]["payments"]["captures"][0]["status"] = json!("PENDING");
    Mock::given(method("GET"))
        .and(path(format!("/v2/checkout/orders/{PAYPAL_ORDER}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(order))
        .mount(&h.server)
        .await;
    let refused = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/vault_payment_token_created.json"),
            TRANSMISSION_TIME,
        ))
        .await;
    assert!(
        matches!(refused, Err(WebhookError::Malformed(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_top_up_charges_the_vault_id_under_its_request_id_and_is_accepted_by_paypals_order() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders"))
        .and(header("paypal-request-id", "topup-tu_1"))
        .and(body_partial_json(json!({
            "intent": "CAPTURE",
            "purchase_units": [{
                "reference_id": TOP_UP_ORDER, "custom_id": TOP_UP_ORDER,
                "amount": { "currency_code": "USD", "value": "17.99" }
            }],
            "payment_source": { "paypal": { "vault_id": VAULT_ID } }
        })))
        .respond_with(json_reply(201, "api/order_captured.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let outcome = h.gateway.charge_saved_method(&top_up()).await.unwrap();
    assert_eq!(
        outcome,
        OffSessionOutcome::Accepted {
            provider_reference: Some(PAYPAL_ORDER.into())
        }
    );
}

#[tokio::test]
async fn a_refused_instrument_is_a_decline_and_a_payer_action_is_authentication_required() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders",
        422,
        "api/error_instrument_declined.json",
    )
    .await;
    match h.gateway.charge_saved_method(&top_up()).await.unwrap() {
        OffSessionOutcome::Declined { reason } => {
            assert!(reason.starts_with("INSTRUMENT_DECLINED: "), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders",
        422,
        "api/error_payer_action_required.json",
    )
    .await;
    assert_eq!(
        h.gateway.charge_saved_method(&top_up()).await.unwrap(),
        OffSessionOutcome::AuthenticationRequired
    );
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders",
        201,
        "api/order_capture_declined.json",
    )
    .await;
    assert!(matches!(
        h.gateway.charge_saved_method(&top_up()).await.unwrap(),
        OffSessionOutcome::Declined { .. }
    ));
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders",
        503,
        "api/error_order_not_approved.json",
    )
    .await;
    assert!(matches!(
        h.gateway.charge_saved_method(&top_up()).await,
        Err(GatewayError::Unreachable(_))
    ));
}

#[tokio::test]
async fn forgetting_a_method_deletes_its_payment_token_at_paypal() {
    let h = harness().await;
    Mock::given(method("DELETE"))
        .and(path(format!("/v3/vault/payment-tokens/{VAULT_ID}")))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&h.server)
        .await;
    h.gateway.forget_saved_method(&account()).await.unwrap();
}

#[tokio::test]
async fn a_payment_token_paypal_does_not_know_is_forgotten_already() {
    let h = harness().await;
    Mock::given(method("DELETE"))
        .and(path(format!("/v3/vault/payment-tokens/{VAULT_ID}")))
        .respond_with(json_reply(404, "api/error_resource_not_found.json"))
        .mount(&h.server)
        .await;
    h.gateway.forget_saved_method(&account()).await.unwrap();
}

#[tokio::test]
async fn a_failed_deletion_is_an_error_and_an_unsafe_id_is_never_sent() {
    let h = harness().await;
    Mock::given(method("DELETE"))
        .and(path(format!("/v3/vault/payment-tokens/{VAULT_ID}")))
        .respond_with(ResponseTemplate::new(503))
        .mount(&h.server)
        .await;
    assert!(matches!(
        h.gateway.forget_saved_method(&account()).await,
        Err(GatewayError::Unreachable(_))
    ));
    let mut unsafe_id = account();
    unsafe_id.method_ref = "../v2/checkout/orders".into();
    assert!(matches!(
        h.gateway.forget_saved_method(&unsafe_id).await,
        Err(GatewayError::Rejected(_))
    ));
}
