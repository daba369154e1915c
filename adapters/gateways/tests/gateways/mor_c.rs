//! The Waffo Pancake gateway against a wiremock Pancake and recorded webhook payloads
//! (`fixtures/mor_c`), with signatures checked against vectors computed by `openssl`.

use std::collections::BTreeMap;

use crate::support::{self};
use application::ports::{
    AckFor, CheckoutRequest, CheckoutTarget, CredentialMode, GatewayError, OrderLocator,
    PaymentEvent, PaymentGateway, PaymentRef, PaymentStatus, RefundReport, RefundRequest,
    RefundedCharge, WebhookError, WebhookRequest,
};
use domain::{
    BillingPeriod, Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, PlanType,
    ProviderId, ProviderRefs, Timestamp, UserId,
};
use gateways::mor_c::{MorCGateway, MorCSettings, PRODUCTION_BASE_URL, PancakeMode};
use gateways::shared::signing::{b64, private_key, public_key, rsa_sha256_sign, rsa_sha256_verify};
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const NOW_MS: i64 = 1_775_000_000_000;
const MERCHANT_ID: &str = "MER_2aUyqjCzEIiEcYMKj7TZtw";
const MERCHANT_PRIVATE: &str = include_str!("../../../sandbox/keys/merchant_private.pem");
const MERCHANT_PUBLIC: &str = include_str!("../../../sandbox/keys/merchant_public.pem");
const PROVIDER_PRIVATE: &str = include_str!("../../../sandbox/keys/provider_private.pem");
const PROVIDER_PUBLIC: &str = include_str!("../../../sandbox/keys/provider_public.pem");
/// The store (and mode, `test`) of every fixture.
const STORE_ID: &str = "STO_2aUyqjCzEIiEcYMKj7TZtw";

fn settings(base_url: &str) -> MorCSettings {
    let mut settings = MorCSettings::new(
        MERCHANT_ID,
        MERCHANT_PRIVATE,
        PROVIDER_PUBLIC,
        STORE_ID,
        PancakeMode::Test,
    );
    settings.base_url = Some(base_url.to_owned());
    settings
}

fn gateway_with(settings: &MorCSettings, sandbox: bool) -> MorCGateway {
    let context = support::context(&settings.http(), NOW_MS, sandbox);
    MorCGateway::new(settings, context).unwrap()
}

fn gateway(base_url: &str) -> MorCGateway {
    gateway_with(&settings(base_url), false)
}

fn plan(id: &str, duration_type: &str, amount: &str, currency: &str, months: Option<i64>) -> Plan {
    let text = PlanText {
        name: id.into(),
        description: "test plan".into(),
        duration: "month".into(),
        features: vec![],
    };
    let draft = PlanDraft {
        id: id.into(),
        provider: Some("mor_c".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months,
        duration_type: Some(duration_type.into()),
        credits: (duration_type == "credits").then(|| "100".parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::MorC, format!("PROD_{id}")),
        i18n: BTreeMap::from([("en".to_owned(), text)]),
        ..PlanDraft::default()
    };
    Plan::from_draft(&draft).unwrap()
}

fn checkout_request(plan: &Plan) -> CheckoutRequest {
    CheckoutRequest {
        save_method: false,
        order_id: OrderId::new("ord_01J9ZK4M2QW").unwrap(),
        user_id: UserId::new("user_1").unwrap(),
        customer_email: Some("buyer@example.com".into()),
        customer_name: None,
        snapshot: PlanSnapshot::of(plan, plan.price()),
        plan: plan.clone(),
        success_url: "https://app.example/payment/success".into(),
        cancel_url: "https://app.example/payment/cancel".into(),
        notify_url: "https://app.example/api/payment/webhook/mor_c".into(),
        expires_at: Timestamp::from_unix_millis(NOW_MS + 1_800_000),
    }
}

fn money(minor: i64, currency: Currency) -> Money {
    Money::from_minor(minor, currency).unwrap()
}

fn at(text: &str) -> Timestamp {
    Timestamp::from_unix_millis(
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis(),
    )
}

fn session_answer() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "data": {
            "sessionId": "cs_7f3a9b",
            "checkoutUrl": "https://checkout.waffo.ai/store/demo/checkout/cs_7f3a9b",
            "expiresAt": "2026-04-01T00:03:20.000Z"
        }
    }))
}

#[tokio::test]
async fn a_checkout_is_signed_exactly_as_openssl_signs_the_canonical_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/actions/checkout/create-session"))
        .and(header("x-merchant-id", MERCHANT_ID))
        .and(header("x-timestamp", "1775000000"))
        .and(header("content-type", "application/json"))
        .respond_with(session_answer())
        .expect(1)
        .mount(&server)
        .await;
    let plan = plan("lifetime", "one_time", "199.00", "USD", Some(999_999));
    let checkout = gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await
        .unwrap();
    assert_eq!(checkout.provider_reference.as_deref(), Some("cs_7f3a9b"));
    assert_eq!(
        checkout.target,
        CheckoutTarget::Redirect("https://checkout.waffo.ai/store/demo/checkout/cs_7f3a9b".into())
    );

    let sent = &server.received_requests().await.unwrap()[0];
    let expected_body = concat!(
        r#"{"productId":"PROD_lifetime","currency":"USD","#,
        r#""priceSnapshot":{"amount":"199.00","taxCategory":"saas"},"#,
        r#""orderMerchantExternalId":"ord_01J9ZK4M2QW","buyerEmail":"buyer@example.com","#,
        r#""successUrl":"https://app.example/payment/success","expiresInSeconds":1800,"#,
        r#""metadata":{"orderId":"ord_01J9ZK4M2QW"}}"#
    );
    assert_eq!(String::from_utf8_lossy(&sent.body), expected_body);
    // H=$(printf '%s' "$BODY" | openssl dgst -sha256 -binary | base64)
    // printf 'POST\n/v1/actions/checkout/create-session\n1775000000\n%s' "$H" \
    //   | openssl dgst -sha256 -sign adapters/sandbox/keys/merchant_private.pem | base64 -w0
    let openssl_signature = concat!(
        "FCmLNfzBVmXttkPwIEWKV5olt4DEV6XciRlrluB/iqjijA0mL7g+PZ/xn90uqkFXa1w/UJgSpP73mVogdYOeITT9",
        "5zWBiqunLA+WVzIu8tEDKZ6Z7erwQ0av5dWTL70+NSAffJeZWRVDcgVWttfngNRo9No/vyDaMQqRf5eYUh8AQO39",
        "AWYjFz5EaK08HZRcV6NsePrTnaThInkhuRh0Cv0hagURbkDK/6Iil3Kp7MRacqxZTRtx9q+19uZfcWlMA88zhxW+",
        "P/MzGxYKvveUaDf8bFKzmqLUu3r4GYVMmaOnFCtqAaLr9HrGVaSGRc9hpBo+pxHsTlJpD2snTjbA8A=="
    );
    assert_eq!(
        sent.headers.get("x-signature").unwrap().to_str().unwrap(),
        openssl_signature
    );
}

#[tokio::test]
async fn every_signed_request_verifies_with_the_merchant_public_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(session_answer())
        .mount(&server)
        .await;
    let plan = plan("credits_jpy", "credits", "1500", "JPY", None);
    gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await
        .unwrap();
    let sent = &server.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["currency"], "JPY");
    assert_eq!(body["priceSnapshot"]["amount"], "1500");
    let canonical = gateways::mor_c::transformers::canonical_request(
        "POST",
        "/v1/actions/checkout/create-session",
        1_775_000_000,
        &sent.body,
    );
    let signature = gateways::shared::signing::unb64(
        sent.headers.get("x-signature").unwrap().to_str().unwrap(),
    )
    .unwrap();
    assert!(rsa_sha256_verify(
        &public_key(MERCHANT_PUBLIC).unwrap(),
        canonical.as_bytes(),
        &signature
    ));
}

#[tokio::test]
async fn a_subscription_checkout_tells_the_sandbox_its_interval_and_webhook_url() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(session_answer())
        .mount(&server)
        .await;
    let plan = plan("pro_quarterly", "recurring", "26.97", "EUR", Some(3));
    gateway_with(&settings(&server.uri()), true)
        .create_checkout(&checkout_request(&plan))
        .await
        .unwrap();
    let sent = &server.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body["priceSnapshot"],
        json!({ "amount": "26.97", "taxCategory": "saas" })
    );
    assert_eq!(
        body["metadata"],
        json!({
            "orderId": "ord_01J9ZK4M2QW",
            "intervalMonths": "3",
            "notifyUrl": "https://app.example/api/payment/webhook/mor_c"
        })
    );
}

#[tokio::test]
async fn a_cny_subscription_is_refused_without_calling_pancake() {
    let server = MockServer::start().await;
    let plan = plan("pro_monthly", "recurring", "9.90", "USD", Some(1));
    let mut request = checkout_request(&plan);
    request.snapshot = PlanSnapshot {
        price: money(990, Currency::Cny),
        ..request.snapshot
    };
    assert_eq!(request.snapshot.plan_type, PlanType::Recurring);
    let result = gateway(&server.uri()).create_checkout(&request).await;
    assert!(
        matches!(result, Err(GatewayError::Rejected(ref m)) if m.contains("CNY")),
        "{result:?}"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn pancake_errors_in_the_envelope_are_refusals_with_their_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "data": null,
            "errors": [{ "message": "Currency not supported for this product", "layer": "order" }]
        })))
        .mount(&server)
        .await;
    let plan = plan("lifetime", "one_time", "199.00", "USD", Some(999_999));
    match gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await
    {
        Err(GatewayError::Rejected(message)) => {
            assert!(message.contains("Currency not supported"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_ok_answer_without_data_is_a_refusal() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": null,
            "errors": [{ "message": "Product not found", "layer": "product" }]
        })))
        .mount(&server)
        .await;
    let plan = plan("lifetime", "one_time", "199.00", "USD", Some(999_999));
    let result = gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await;
    assert!(
        matches!(result, Err(GatewayError::Rejected(ref m)) if m.contains("Product not found")),
        "{result:?}"
    );
}

#[tokio::test]
async fn cancelling_a_subscription_cancels_its_order_at_the_period_end() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/actions/subscription-order/cancel-order"))
        .and(header("x-merchant-id", MERCHANT_ID))
        .and(body_json(
            json!({ "orderId": "ORD_7wQ2mHsK4nV6pX8rZ1tB3c" }),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({ "data": { "orderId": "ORD_7wQ2mHsK4nV6pX8rZ1tB3c", "status": "canceling" } }),
        ))
        .expect(1)
        .mount(&server)
        .await;
    gateway(&server.uri())
        .cancel_subscription("ORD_7wQ2mHsK4nV6pX8rZ1tB3c")
        .await
        .unwrap();
    let sent = &server.received_requests().await.unwrap()[0];
    let canonical = gateways::mor_c::transformers::canonical_request(
        "POST",
        "/v1/actions/subscription-order/cancel-order",
        1_775_000_000,
        &sent.body,
    );
    let signature = gateways::shared::signing::unb64(
        sent.headers.get("x-signature").unwrap().to_str().unwrap(),
    )
    .unwrap();
    assert!(rsa_sha256_verify(
        &public_key(MERCHANT_PUBLIC).unwrap(),
        canonical.as_bytes(),
        &signature
    ));
}

fn payment() -> PaymentRef {
    PaymentRef {
        order_id: OrderId::new("ord_01J9ZK4M2QW").unwrap(),
        provider_reference: Some("cs_7f3a9b".into()),
    }
}

async fn query_with(data: Value) -> Result<PaymentStatus, GatewayError> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/graphql"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "data": data })))
        .expect(1)
        .mount(&server)
        .await;
    let status = gateway(&server.uri()).query_payment(&payment()).await;
    let sent = &server.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body["variables"],
        json!({ "storeId": "STO_2aUyqjCzEIiEcYMKj7TZtw", "ref": "ord_01J9ZK4M2QW" })
    );
    assert!(
        body["query"]
            .as_str()
            .unwrap()
            .contains("orderMerchantExternalId")
    );
    status
}

#[tokio::test]
async fn a_completed_order_queries_as_succeeded_with_its_pre_tax_amount() {
    let status = query_with(json!({
        "onetimeOrders": [{
            "id": "ORD_1",
            "status": "completed",
            "updatedAt": "2026-03-10T08:30:00.000Z",
            "priceSnapshot": {
                "currency": "USD", "subtotal": "199.00", "taxAmount": "19.90", "total": "218.90"
            }
        }],
        "subscriptionOrders": []
    }))
    .await
    .unwrap();
    assert_eq!(
        status,
        PaymentStatus::Succeeded {
            amount: money(19_900, Currency::Usd),
            paid_at: at("2026-03-10T08:30:00.000Z")
        }
    );
}

#[tokio::test]
async fn an_active_subscription_queries_as_succeeded_and_a_closed_one_as_failed() {
    let active = query_with(json!({
        "onetimeOrders": [],
        "subscriptionOrders": [{
            "id": "ORD_2",
            "status": "active",
            "createdAt": "2026-04-01T00:00:00.000Z",
            "currentPeriodStart": "2026-04-01T00:00:01.000Z",
            "priceSnapshot": { "currency": "EUR", "regularPhase": { "subtotal": "26.97" } }
        }]
    }))
    .await
    .unwrap();
    assert_eq!(
        active,
        PaymentStatus::Succeeded {
            amount: money(2697, Currency::Eur),
            paid_at: at("2026-04-01T00:00:01.000Z")
        }
    );
    let closed =
        query_with(json!({ "subscriptionOrders": [{ "id": "ORD_3", "status": "closed" }] }))
            .await
            .unwrap();
    assert!(matches!(closed, PaymentStatus::Failed { .. }), "{closed:?}");
}

#[tokio::test]
async fn an_order_pancake_does_not_know_yet_is_pending() {
    let status = query_with(json!({ "onetimeOrders": [], "subscriptionOrders": [] }))
        .await
        .unwrap();
    assert_eq!(status, PaymentStatus::Pending);
}

#[tokio::test]
async fn orders_cannot_be_closed_nor_refunded_through_pancakes_api() {
    let server = MockServer::start().await;
    let gateway = gateway(&server.uri());
    assert!(matches!(
        gateway.close_payment(&payment()).await,
        Err(GatewayError::NotSupported)
    ));
    let refund = RefundRequest {
        payment: payment(),
        refund_id: "rf_1".into(),
        amount: money(500, Currency::Usd),
        paid: money(2900, Currency::Usd),
        reason: "requested by the buyer".into(),
        notify_url: "https://app.example/api/payment/webhook/mor_c".into(),
    };
    assert!(matches!(
        gateway.refund(&refund).await,
        Err(GatewayError::NotSupported)
    ));
    assert!(server.received_requests().await.unwrap().is_empty());
}

fn fixture(name: &str) -> Vec<u8> {
    support::fixture("mor_c", name)
}

fn signed_at(body: Vec<u8>, t_ms: i64, key_pem: &str) -> WebhookRequest {
    let mut message = format!("{t_ms}.").into_bytes();
    message.extend_from_slice(&body);
    let signature = b64(&rsa_sha256_sign(&private_key(key_pem).unwrap(), &message));
    let header = format!("t={t_ms},v1={signature}");
    WebhookRequest {
        headers: BTreeMap::from([("x-waffo-signature".to_owned(), header)]),
        body,
    }
}

fn signed(body: Vec<u8>) -> WebhookRequest {
    signed_at(body, NOW_MS - 2_000, PROVIDER_PRIVATE)
}

async fn events_of(name: &str) -> Vec<PaymentEvent> {
    gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(fixture(name)))
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn a_webhook_verifies_against_a_signature_computed_by_openssl() {
    // printf '%s.%s' 1775000000000 "$BODY" \
    //   | openssl dgst -sha256 -sign adapters/sandbox/keys/provider_private.pem | base64 -w0
    let body = concat!(
        r#"{"id":"0b1c2d3e-vector","timestamp":"2026-03-31T23:33:20.000Z","#,
        r#""eventType":"subscription.uncanceled","eventId":"ORD_vector","storeId":"STO_x","#,
        r#""storeName":"x","mode":"test","data":{"orderId":"ORD_vector"}}"#
    )
    .as_bytes();
    let signature = concat!(
        "F9PLNuf5tk6w7rqg01uZJckn0VLhXBfYC2Dmzb+7xUZTSW64L4rNkD0Aj3kg7Be4MaXMnm1vRDZ8IGTmzszgXKLT",
        "ciGVuQEbwo3I01ILeS1FUNufOPP27JPKQXRZTszrYaJl09s4TY7zMNsv2WJnU1FfiE05GEepsjdm4zD0GlISv7zA",
        "ObE/iMZ8Wj++RSv4/92WCX2f/3gPg4xszFE/69g6aNY56H/HKYL1Zdx4RxtvRLNmNYMdwSq1LbgCuMkqOuw6J3f1",
        "dyFJiBYZM63T2uY56hsf2EqR2OIH0BAJd2VP2IAUG4KV4ZY48bmEcHTxxHmr7NdV2lPK0pg0xm+h3w=="
    );
    let request = WebhookRequest {
        headers: BTreeMap::from([(
            "x-waffo-signature".to_owned(),
            format!("t=1775000000000,v1={signature}"),
        )]),
        body: body.to_vec(),
    };
    let mut settings = settings(PRODUCTION_BASE_URL);
    settings.store_id = "STO_x".into();
    let verified = gateway_with(&settings, false)
        .verify_webhook(&request)
        .await
        .unwrap();
    assert_eq!(verified.foreign, None);
    assert_eq!(verified.event_id, "0b1c2d3e-vector");
    assert_eq!(verified.event_type, "subscription.uncanceled");
    assert!(matches!(
        &verified.events[..],
        [PaymentEvent::SubscriptionCancelWithdrawn { provider_subscription_id, .. }] if provider_subscription_id == "ORD_vector"
    ));
}

#[tokio::test]
async fn a_tampered_body_is_refused() {
    let mut request = signed(fixture("order_completed.json"));
    let at = request.body.iter().position(|b| *b == b'2').unwrap();
    request.body[at] = b'1';
    assert_eq!(
        gateway(PRODUCTION_BASE_URL).verify_webhook(&request).await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn a_webhook_signed_with_another_key_is_refused() {
    let request = signed_at(fixture("order_completed.json"), NOW_MS, MERCHANT_PRIVATE);
    assert_eq!(
        gateway(PRODUCTION_BASE_URL).verify_webhook(&request).await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn a_retry_signed_44_minutes_ago_is_accepted_but_one_signed_46_minutes_ago_is_stale() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    let retry = signed_at(
        fixture("order_completed.json"),
        NOW_MS - 44 * 60_000,
        PROVIDER_PRIVATE,
    );
    assert!(gateway.verify_webhook(&retry).await.is_ok());
    let stale = signed_at(
        fixture("order_completed.json"),
        NOW_MS - 46 * 60_000,
        PROVIDER_PRIVATE,
    );
    assert_eq!(
        gateway.verify_webhook(&stale).await,
        Err(WebhookError::Stale)
    );
}

#[tokio::test]
async fn the_window_is_exactly_45_minutes_back_and_one_minute_ahead_to_the_millisecond() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    let signed = |t_ms: i64| signed_at(fixture("order_completed.json"), t_ms, PROVIDER_PRIVATE);
    for accepted in [NOW_MS - 45 * 60_000, NOW_MS + 60_000] {
        assert!(
            gateway.verify_webhook(&signed(accepted)).await.is_ok(),
            "t = now {:+} ms",
            accepted - NOW_MS
        );
    }
    for stale in [NOW_MS - 45 * 60_000 - 1, NOW_MS + 60_001] {
        assert_eq!(
            gateway.verify_webhook(&signed(stale)).await,
            Err(WebhookError::Stale),
            "t = now {:+} ms",
            stale - NOW_MS
        );
    }
    // 45 minutes and 999 ms old: the same whole second as the limit, still stale.
    let settings = settings(PRODUCTION_BASE_URL);
    let later = MorCGateway::new(
        &settings,
        support::context(&settings.http(), NOW_MS + 999, false),
    )
    .unwrap();
    assert_eq!(
        later.verify_webhook(&signed(NOW_MS - 45 * 60_000)).await,
        Err(WebhookError::Stale)
    );
    assert!(
        later
            .verify_webhook(&signed(NOW_MS + 999 - 45 * 60_000))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_signature_more_than_a_minute_in_the_future_is_stale() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    let skewed = signed_at(
        fixture("order_completed.json"),
        NOW_MS + 50_000,
        PROVIDER_PRIVATE,
    );
    assert!(gateway.verify_webhook(&skewed).await.is_ok());
    let future = signed_at(
        fixture("order_completed.json"),
        NOW_MS + 2 * 60_000,
        PROVIDER_PRIVATE,
    );
    assert_eq!(
        gateway.verify_webhook(&future).await,
        Err(WebhookError::Stale)
    );
}

#[tokio::test]
async fn a_missing_or_malformed_signature_header_is_refused() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    let body = fixture("order_completed.json");
    let with = |value: &str| WebhookRequest {
        headers: BTreeMap::from([("x-waffo-signature".to_owned(), value.to_owned())]),
        body: body.clone(),
    };
    let none = WebhookRequest {
        headers: BTreeMap::new(),
        body: body.clone(),
    };
    assert_eq!(
        gateway.verify_webhook(&none).await,
        Err(WebhookError::MissingSignature)
    );
    for header in [
        "v1=abcd",
        &format!("t={NOW_MS}"),
        "t=yesterday,v1=abcd",
        &format!("t={NOW_MS},v1=***"),
    ] {
        assert_eq!(
            gateway.verify_webhook(&with(header)).await,
            Err(WebhookError::MissingSignature),
            "{header}"
        );
    }
}

/// `name` as another store (or the other mode) would have it: Pancake's one platform key
/// signs it just the same.
fn fixture_for(name: &str, store_id: Option<&str>, mode: Option<&str>) -> Vec<u8> {
    let mut event: Value = serde_json::from_slice(&fixture(name)).unwrap();
    let envelope = event.as_object_mut().unwrap();
    for (field, value) in [("storeId", store_id), ("mode", mode)] {
        match value {
            Some(value) => envelope.insert(field.into(), json!(value)),
            None => envelope.remove(field),
        };
    }
    serde_json::to_vec(&event).unwrap()
}

#[tokio::test]
async fn another_stores_completed_order_naming_our_order_is_foreign_and_grants_nothing() {
    let verified = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(fixture_for(
            "order_completed.json",
            Some("STO_someoneElse000000000"),
            Some("test"),
        )))
        .await
        .unwrap();
    assert_eq!(verified.event_id, "550e8400-e29b-41d4-a716-446655440000");
    assert_eq!(verified.event_type, "order.completed");
    assert!(verified.events.is_empty());
    let why = verified.foreign.expect("another store's event is foreign");
    assert!(why.contains("STO_someoneElse"), "{why}");
}

#[tokio::test]
async fn a_refund_in_the_other_mode_or_naming_no_store_is_foreign_and_refunds_nothing() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    for (store, mode) in [
        (Some(STORE_ID), Some("prod")),
        (None, Some("test")),
        (Some(STORE_ID), None),
    ] {
        let verified = gateway
            .verify_webhook(&signed(fixture_for("refund_succeeded.json", store, mode)))
            .await
            .unwrap();
        assert!(verified.events.is_empty(), "{store:?} {mode:?}");
        assert!(verified.foreign.is_some(), "{store:?} {mode:?}");
    }
}

#[tokio::test]
async fn a_foreign_subscription_event_is_not_looked_up_at_pancake() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let verified = gateway(&server.uri())
        .verify_webhook(&signed(fixture_for(
            "subscription_activated.json",
            Some("STO_someoneElse000000000"),
            Some("test"),
        )))
        .await
        .unwrap();
    assert!(verified.foreign.is_some());
    assert!(verified.events.is_empty());
}

#[tokio::test]
async fn a_foreign_event_must_still_be_signed_by_pancake() {
    let forged = signed_at(
        fixture_for(
            "order_completed.json",
            Some("STO_someoneElse"),
            Some("test"),
        ),
        NOW_MS,
        MERCHANT_PRIVATE,
    );
    assert_eq!(
        gateway(PRODUCTION_BASE_URL).verify_webhook(&forged).await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn a_completed_order_is_a_payment_of_its_amount_for_our_order() {
    let verified = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(fixture("order_completed.json")))
        .await
        .unwrap();
    assert_eq!(verified.foreign, None);
    assert_eq!(verified.event_id, "550e8400-e29b-41d4-a716-446655440000");
    assert_eq!(verified.event_type, "order.completed");
    assert_eq!(
        verified.events,
        vec![PaymentEvent::PaymentSucceeded {
            order: OrderLocator {
                order_id: Some(OrderId::new("ord_01J9ZK4M2QW").unwrap()),
                provider_reference: None
            },
            amount: money(2900, Currency::Usd),
            occurred_at: at("2026-03-10T08:30:00.000Z"),
        }]
    );
}

fn subscription_order() -> OrderLocator {
    OrderLocator {
        order_id: Some(OrderId::new("ord_01J9ZK4M2QX").unwrap()),
        provider_reference: None,
    }
}

const SUBSCRIPTION: &str = "ORD_7wQ2mHsK4nV6pX8rZ1tB3c";

/// The first period's payment in `subscription_payments.graphql.json`.
const FIRST_CHARGE: &str = "PAY_4tM1hGpK2nS6uV8xZ0bD3f";
/// The renewal's payment (`subscription_payment_succeeded.json`, and the refunds of it).
const RENEWAL_CHARGE: &str = "PAY_8yR3nJtL5oW7qY9sA2uC4d";

/// A Pancake that answers the subscription order's payments query.
async fn pancake_with_subscription_payments() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/graphql"))
        .and(header("x-merchant-id", MERCHANT_ID))
        .and(body_partial_json(
            json!({ "variables": { "id": SUBSCRIPTION } }),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            fixture("subscription_payments.graphql.json"),
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    server
}

async fn events_with(server: &MockServer, name: &str) -> Vec<PaymentEvent> {
    gateway(&server.uri())
        .verify_webhook(&signed(fixture(name)))
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn an_activated_subscription_starts_with_its_first_period_and_its_first_payment() {
    let server = pancake_with_subscription_payments().await;
    assert_eq!(
        events_with(&server, "subscription_activated.json").await,
        vec![PaymentEvent::SubscriptionActivated {
            order: subscription_order(),
            provider_subscription_id: SUBSCRIPTION.into(),
            period: BillingPeriod::new(
                at("2026-04-01T00:00:00.000Z"),
                at("2026-07-01T00:00:00.000Z")
            )
            .unwrap(),
            amount: Some(money(2697, Currency::Eur)),
            charge_ref: Some(FIRST_CHARGE.into()),
            occurred_at: at("2026-04-01T00:00:05.000Z"),
        }]
    );
    let sent = &server.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert!(
        body["query"]
            .as_str()
            .unwrap()
            .contains("subscriptionOrder(id: $id) { id payments { id status createdAt } }"),
        "{body}"
    );
}

#[tokio::test]
async fn a_renewed_subscription_moves_to_the_next_period_with_the_payment_that_paid_it() {
    let server = pancake_with_subscription_payments().await;
    assert_eq!(
        events_with(&server, "subscription_renewed.json").await,
        vec![PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: SUBSCRIPTION.into(),
            period: BillingPeriod::new(at("2026-07-01T00:00:00Z"), at("2026-10-01T00:00:00Z"))
                .unwrap(),
            amount: money(2697, Currency::Eur),
            // The succeeded payment of the period, not the failed attempt before it.
            charge_ref: Some(RENEWAL_CHARGE.into()),
            occurred_at: at("2026-07-01T00:00:04.000Z"),
        }]
    );
}

#[tokio::test]
async fn a_period_whose_payments_cannot_be_read_is_still_paid_but_names_no_charge() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/graphql"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let events = events_with(&server, "subscription_renewed.json").await;
    assert!(
        matches!(
            &events[..],
            [PaymentEvent::SubscriptionRenewed {
                charge_ref: None,
                ..
            }]
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_recovered_subscription_is_paid_for_its_period_again() {
    let server = pancake_with_subscription_payments().await;
    let events = events_with(&server, "subscription_recovered.json").await;
    match &events[..] {
        [
            PaymentEvent::SubscriptionRenewed {
                provider_subscription_id,
                charge_ref,
                ..
            },
        ] => {
            assert_eq!(provider_subscription_id, SUBSCRIPTION);
            // The period April–July was paid by the first payment.
            assert_eq!(charge_ref.as_deref(), Some(FIRST_CHARGE));
        }
        other => panic!("expected a renewal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_canceling_subscription_runs_to_its_period_end_then_cancels() {
    assert_eq!(
        events_of("subscription_canceling.json").await,
        vec![PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: SUBSCRIPTION.into(),
            occurred_at: at("2026-05-15T09:12:00.000Z")
        }]
    );
    assert_eq!(
        events_of("subscription_canceled.json").await,
        vec![PaymentEvent::SubscriptionCanceled {
            provider_subscription_id: SUBSCRIPTION.into(),
            occurred_at: at("2026-07-01T00:00:01.000Z")
        }]
    );
}

#[tokio::test]
async fn a_canceled_event_for_an_expired_order_is_an_expiry() {
    let mut event: Value = serde_json::from_slice(&fixture("subscription_canceled.json")).unwrap();
    event["data"]["orderStatus"] = json!("expired");
    let events = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(serde_json::to_vec(&event).unwrap()))
        .await
        .unwrap()
        .events;
    assert_eq!(
        events,
        vec![PaymentEvent::SubscriptionExpired {
            provider_subscription_id: SUBSCRIPTION.into(),
            occurred_at: at("2026-07-01T00:00:01.000Z")
        }]
    );
}

#[tokio::test]
async fn a_failed_renewal_is_past_due() {
    assert_eq!(
        events_of("subscription_past_due.json").await,
        vec![PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: SUBSCRIPTION.into(),
            occurred_at: at("2026-07-01T00:05:00.000Z")
        }]
    );
}

#[tokio::test]
async fn a_refund_of_a_one_time_order_is_one_refund_of_its_own_amount_under_its_event_id() {
    assert_eq!(
        events_of("refund_succeeded.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: Some(OrderId::new("ord_01J9ZK4M2QW").unwrap()),
                provider_reference: None
            }),
            // `refundedAmount` is this refund's own figure, not the payment's running total.
            refund: RefundReport::One {
                refund_id: "REF_6zS4oKuM6pX8rZ0tB3vD5e".into(),
                amount: money(1000, Currency::Usd),
            },
            occurred_at: at("2026-03-12T10:00:02.000Z"),
        }]
    );
}

#[tokio::test]
async fn a_refund_without_refunded_amount_reports_its_deprecated_amount() {
    let events = events_of("refund_succeeded_without_running_total.json").await;
    match &events[..] {
        [
            PaymentEvent::Refunded {
                refund: RefundReport::One { refund_id, amount },
                ..
            },
        ] => {
            assert_eq!(refund_id, "REF_8bU6qMwO8rZ0tB2vD5xF7g");
            assert_eq!(*amount, money(2900, Currency::Usd));
        }
        other => panic!("expected a refund, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refund_of_a_renewal_names_the_payment_that_paid_it_on_the_price_basis() {
    assert_eq!(
        events_of("refund_succeeded_renewal.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(SUBSCRIPTION.into()),
                charge_ref: RENEWAL_CHARGE.into(),
            },
            // 16.31 of 32.63 charged (26.97 + 5.66 tax), on the 26.97 basis, rounded down.
            refund: RefundReport::One {
                refund_id: "REF_9cV7rNxP9sA1uC3wE6yG8h".into(),
                amount: money(1348, Currency::Eur),
            },
            occurred_at: at("2026-07-05T09:00:02.000Z"),
        }]
    );
    let mut full: Value =
        serde_json::from_slice(&fixture("refund_succeeded_renewal.json")).unwrap();
    full["data"]["refundedAmount"] = json!("32.63");
    let events = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(serde_json::to_vec(&full).unwrap()))
        .await
        .unwrap()
        .events;
    assert!(
        matches!(&events[..], [PaymentEvent::Refunded { refund: RefundReport::One { amount, .. }, .. }]
            if *amount == money(2697, Currency::Eur)),
        "the whole payment refunds the whole price: {events:?}"
    );
}

#[tokio::test]
async fn an_uncanceled_subscription_withdraws_the_scheduled_cancellation() {
    let events = events_of("subscription_uncanceled.json").await;
    assert!(
        matches!(
            &events[..],
            [PaymentEvent::SubscriptionCancelWithdrawn { .. }]
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn events_tally_does_not_handle_verify_and_mean_nothing() {
    for name in ["subscription_payment_succeeded.json", "refund_failed.json"] {
        assert_eq!(events_of(name).await, vec![], "{name}");
    }
    let body = concat!(
        r#"{"id":"d-1","timestamp":"2026-03-31T00:00:00.000Z","#,
        r#""eventType":"subscription.plan_changed","storeId":"STO_2aUyqjCzEIiEcYMKj7TZtw","#,
        r#""mode":"test","data":{"weird":[1]}}"#
    );
    let body = body.as_bytes().to_vec();
    let verified = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(body))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "subscription.plan_changed");
    assert!(verified.events.is_empty());
}

#[test]
fn pancake_gets_a_200_for_an_accepted_webhook_and_a_400_for_a_refused_one() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    assert_eq!(
        gateway.webhook_ack(&AckFor::Accepted).verdict,
        application::ports::AckVerdict::Accepted
    );
    assert_eq!(
        gateway
            .webhook_ack(&AckFor::Refused(WebhookError::Stale))
            .verdict,
        application::ports::AckVerdict::Refused
    );
}

#[test]
fn settings_read_camel_case_and_default_to_the_production_host() {
    let settings: MorCSettings = serde_json::from_value(json!({
        "merchantId": MERCHANT_ID,
        "privateKey": MERCHANT_PRIVATE,
        "webhookPublicKey": PROVIDER_PUBLIC,
        "storeId": STORE_ID,
        "mode": "prod",
        "timeoutMs": 4000
    }))
    .unwrap();
    assert_eq!(settings.store_id, STORE_ID);
    assert_eq!(settings.mode, PancakeMode::Prod);
    assert_eq!(settings.http().base_url, PRODUCTION_BASE_URL);
    assert_eq!(settings.http().timeout_ms, 4000);
    assert_eq!(settings.tax_category, "saas");
    let unknown = serde_json::from_value::<MorCSettings>(json!({
        "merchantId": MERCHANT_ID, "privateKey": "k", "webhookPublicKey": "k",
        "storeId": STORE_ID, "mode": "test", "testMode": true
    }));
    assert!(unknown.is_err());
}

#[test]
fn the_store_and_the_mode_are_required_settings() {
    let full = json!({
        "merchantId": MERCHANT_ID, "privateKey": "k", "webhookPublicKey": "k",
        "storeId": STORE_ID, "mode": "test"
    });
    assert!(serde_json::from_value::<MorCSettings>(full.clone()).is_ok());
    for missing in ["storeId", "mode"] {
        let mut partial = full.clone();
        partial.as_object_mut().unwrap().remove(missing);
        let error = serde_json::from_value::<MorCSettings>(partial).unwrap_err();
        assert!(error.to_string().contains(missing), "{error}");
    }
    let mut live = full;
    live["mode"] = json!("live");
    assert!(serde_json::from_value::<MorCSettings>(live).is_err());
}

#[test]
fn settings_never_print_the_private_key() {
    let text = format!("{:?}", settings("http://localhost"));
    assert!(
        !text.contains("PRIVATE KEY") && !text.contains(&MERCHANT_PRIVATE[40..80]),
        "{text}"
    );
}

#[test]
fn unreadable_keys_and_unknown_tax_categories_are_configuration_errors_naming_the_field() {
    let check = |change: &dyn Fn(&mut MorCSettings), field: &str| {
        let mut s = settings("http://localhost");
        change(&mut s);
        let context = support::context(&s.http(), NOW_MS, false);
        let error = MorCGateway::new(&s, context).unwrap_err();
        assert_eq!(error.field, field);
        assert!(
            !error.to_string().contains("not-a-key-but-secret"),
            "{error}"
        );
    };
    check(
        &|s| s.private_key = SecretString::from("not-a-key-but-secret".to_owned()),
        "privateKey",
    );
    check(
        &|s| s.webhook_public_key = "not-a-key-but-secret".into(),
        "webhookPublicKey",
    );
    check(&|s| s.tax_category = "groceries".into(), "taxCategory");
    check(&|s| s.merchant_id = "MER 1\n".into(), "merchantId");
    check(&|s| s.store_id = String::new(), "storeId");
    check(&|s| s.store_id = "../STO_1".into(), "storeId");
}

// --- Credential check ------------------------------------------------------------------------

#[tokio::test]
async fn a_credential_check_is_a_signed_graphql_read_of_the_configured_store() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/graphql"))
        .and(header("x-merchant-id", MERCHANT_ID))
        .and(body_partial_json(
            json!({ "variables": { "storeId": STORE_ID } }),
        ))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({ "data": { "store": { "id": STORE_ID, "status": "active" } } }),
            ),
        )
        .expect(1)
        .mount(&server)
        .await;
    let check = gateway(&server.uri()).check_credentials().await.unwrap();
    assert_eq!(check.mode, CredentialMode::Test, "mode = \"test\"");
    let requests = server.received_requests().await.unwrap();
    let request = &requests[0];
    let timestamp = request.headers["x-timestamp"].to_str().unwrap();
    let signature = request.headers["x-signature"].to_str().unwrap();
    let canonical = gateways::mor_c::transformers::canonical_request(
        "POST",
        "/v1/graphql",
        timestamp.parse().unwrap(),
        &request.body,
    );
    assert!(rsa_sha256_verify(
        &public_key(MERCHANT_PUBLIC).unwrap(),
        canonical.as_bytes(),
        &gateways::shared::signing::unb64(signature).unwrap()
    ));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert!(
        body["query"]
            .as_str()
            .unwrap()
            .contains("store(id: $storeId)"),
        "{body}"
    );
}

#[tokio::test]
async fn a_credential_check_reports_pancakes_refusal_and_a_store_that_is_not_the_merchants() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "data": null,
            "errors": [{ "message": "Invalid signature", "layer": "gateway" }]
        })))
        .mount(&server)
        .await;
    let check = gateway(&server.uri()).check_credentials().await;
    let Err(GatewayError::Rejected(why)) = check else {
        panic!("expected a refusal, got {check:?}");
    };
    assert!(
        why.contains("HTTP 401") && why.contains("Invalid signature"),
        "{why}"
    );
    assert!(!why.contains("PRIVATE KEY"), "{why}");

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({ "data": { "store": null } })),
        )
        .mount(&server)
        .await;
    let check = gateway(&server.uri()).check_credentials().await;
    assert!(
        matches!(&check, Err(GatewayError::Rejected(why)) if why.contains("storeId") && why.contains(STORE_ID)),
        "{check:?}"
    );
}

#[tokio::test]
async fn a_credential_check_of_an_unreachable_api_is_unreachable() {
    let check = gateway("http://127.0.0.1:9").check_credentials().await;
    assert!(
        matches!(check, Err(GatewayError::Unreachable(_))),
        "{check:?}"
    );
}

#[test]
fn test_mode_is_mode_test() {
    let mut settings = settings(PRODUCTION_BASE_URL);
    assert_eq!(settings.test_mode().unwrap().field, "mode");
    settings.mode = PancakeMode::Prod;
    assert_eq!(settings.test_mode(), None);
}
