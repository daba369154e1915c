//! The Stripe Checkout gateway against a wiremock Stripe and recorded event payloads.

use std::collections::BTreeMap;

use crate::support::{self, usd};
use application::ports::{
    AckFor, CheckoutRequest, CheckoutTarget, CredentialMode, GatewayError, OrderLocator,
    PaymentEvent, PaymentGateway, PaymentRef, PaymentStatus, RefundReport, RefundRequest,
    RefundStarted, RefundState, RefundedCharge, WebhookError, WebhookRequest,
};
use domain::{
    BillingPeriod, Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::card_gateway::transformers::encode_form;
use gateways::card_gateway::{CardGatewayGateway, CardGatewaySettings};
use gateways::shared::signing::{hex, hmac_sha256};
use wiremock::matchers::{bearer_token, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET_KEY: &str = "sk_test_51TallyTestKey0000000000";
const WEBHOOK_SECRET: &str = "whsec_vectorSecret0123456789";
/// 2024-11-16T14:06:40Z, the `created` of the completed-session fixture.
const NOW_S: i64 = 1_731_766_000;

fn fixture(name: &str) -> Vec<u8> {
    support::fixture("card_gateway", name)
}

fn plan(kind: &str, amount: &str, currency: &str, price_id: Option<&str>) -> Plan {
    let i18n = support::english("Pro plan");
    let draft = PlanDraft {
        id: format!("{kind}-plan"),
        provider: Some("card_gateway".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months: match kind {
            "credits" => None,
            "one_time" => Some(999_999),
            _ => Some(1),
        },
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "500".parse().unwrap()),
        provider_refs: price_id.map_or_else(ProviderRefs::default, |id| {
            ProviderRefs::default().with(ProviderId::CardGateway, id)
        }),
        i18n,
        ..PlanDraft::default()
    };
    Plan::from_draft(&draft).unwrap()
}

fn checkout_request(plan: Plan, order_id: &str) -> CheckoutRequest {
    CheckoutRequest {
        save_method: false,
        order_id: OrderId::new(order_id).unwrap(),
        user_id: UserId::new("usr_7").unwrap(),
        customer_email: Some("buyer@example.com".into()),
        customer_name: None,
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: format!("https://tally.example/payment-success?orderId={order_id}"),
        cancel_url: format!("https://tally.example/payment-cancel?orderId={order_id}"),
        notify_url: "https://tally.example/api/payment/webhook/card_gateway".into(),
        // Two hours from now: inside Stripe's window, so sent as is.
        expires_at: Timestamp::from_unix_millis((NOW_S + 7_200) * 1000),
    }
}

fn gateway_at(base_url: &str, now_s: i64) -> CardGatewayGateway {
    let settings = CardGatewaySettings::new(SECRET_KEY, WEBHOOK_SECRET, Some(base_url.to_owned()));
    let context = support::context(&settings.http(), now_s * 1000, false);
    CardGatewayGateway::new(&settings, context).unwrap()
}

fn gateway(base_url: &str) -> CardGatewayGateway {
    gateway_at(base_url, NOW_S)
}

fn signed(body: &[u8], secret: &str, t: i64) -> String {
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    hex(&hmac_sha256(secret.as_bytes(), &message))
}

fn webhook(body: Vec<u8>, signature_header: Option<String>) -> WebhookRequest {
    let mut headers = BTreeMap::new();
    headers.insert("content-type".to_owned(), "application/json".to_owned());
    if let Some(value) = signature_header {
        headers.insert("stripe-signature".to_owned(), value);
    }
    WebhookRequest { headers, body }
}

fn signed_webhook(name: &str) -> WebhookRequest {
    let body = fixture(name);
    let signature = signed(&body, WEBHOOK_SECRET, NOW_S);
    webhook(body, Some(format!("t={NOW_S},v1={signature}")))
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_millis(seconds * 1000)
}

fn order_id(id: &str) -> Option<OrderId> {
    Some(OrderId::new(id).unwrap())
}

async fn stripe_answering(status: u16, body: Vec<u8>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkout/sessions"))
        .respond_with(ResponseTemplate::new(status).set_body_raw(body, "application/json"))
        .mount(&server)
        .await;
    server
}

async fn only_form(server: &MockServer) -> Vec<(String, String)> {
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    serde_urlencoded::from_bytes(&requests[0].body).unwrap()
}

fn field<'a>(form: &'a [(String, String)], key: &str) -> Option<&'a str> {
    form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

// ---------------------------------------------------------------------------------------------
// Checkout and the other API calls

#[tokio::test]
async fn a_one_time_checkout_is_a_form_encoded_session_carrying_our_order_id_and_idempotency_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkout/sessions"))
        .and(bearer_token(SECRET_KEY))
        .and(header("idempotency-key", "ord_01JCZ8M4QW"))
        .and(header("content-type", "application/x-www-form-urlencoded"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            fixture("checkout.session.response.json"),
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    let request = checkout_request(
        plan(
            "one_time",
            "9.99",
            "USD",
            Some("price_1QJ0kELkdIwHu7ixLife"),
        ),
        "ord_01JCZ8M4QW",
    );

    let checkout = gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap();

    assert_eq!(
        checkout.provider_reference.as_deref(),
        Some("cs_test_a1Xq9ZfWm3tY7hB2kLr5Vd8NcPe4UoJs6GiHw0AzQ1Ky")
    );
    assert!(
        matches!(checkout.target, CheckoutTarget::Redirect(url) if url.starts_with("https://checkout.stripe.com/c/pay/cs_test_"))
    );
    let form = only_form(&server).await;
    assert_eq!(field(&form, "mode"), Some("payment"));
    assert_eq!(
        field(&form, "line_items[0][price]"),
        Some("price_1QJ0kELkdIwHu7ixLife")
    );
    assert_eq!(field(&form, "line_items[0][quantity]"), Some("1"));
    assert_eq!(field(&form, "client_reference_id"), Some("ord_01JCZ8M4QW"));
    assert_eq!(field(&form, "metadata[orderId]"), Some("ord_01JCZ8M4QW"));
    assert_eq!(field(&form, "metadata[amountMinor]"), Some("999"));
    assert_eq!(field(&form, "metadata[currency]"), Some("USD"));
    assert_eq!(
        field(&form, "payment_intent_data[metadata][orderId]"),
        Some("ord_01JCZ8M4QW")
    );
    assert_eq!(field(&form, "customer_email"), Some("buyer@example.com"));
    assert_eq!(
        field(&form, "success_url"),
        Some("https://tally.example/payment-success?orderId=ord_01JCZ8M4QW")
    );
    assert_eq!(
        field(&form, "cancel_url"),
        Some("https://tally.example/payment-cancel?orderId=ord_01JCZ8M4QW")
    );
    assert_eq!(
        field(&form, "expires_at"),
        Some((NOW_S + 7_200).to_string().as_str())
    );
    assert_eq!(field(&form, "subscription_data[metadata][orderId]"), None);
    assert_eq!(
        field(&form, "metadata[notifyUrl]"),
        None,
        "only the sandbox is told where webhooks go"
    );
}

#[tokio::test]
async fn a_credits_plan_without_a_price_id_sends_an_ad_hoc_price_in_minor_units() {
    let server = stripe_answering(200, fixture("checkout.session.response.json")).await;
    let request = checkout_request(plan("credits", "500", "JPY", None), "ord_01JD0CREDS");

    gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap();

    let form = only_form(&server).await;
    assert_eq!(field(&form, "mode"), Some("payment"));
    assert_eq!(field(&form, "line_items[0][price]"), None);
    // JPY is zero-decimal for Stripe and for the domain alike: 500 yen is 500.
    assert_eq!(
        field(&form, "line_items[0][price_data][unit_amount]"),
        Some("500")
    );
    assert_eq!(
        field(&form, "line_items[0][price_data][currency]"),
        Some("jpy")
    );
    assert_eq!(
        field(&form, "line_items[0][price_data][product_data][name]"),
        Some("Pro plan")
    );
    assert_eq!(
        field(&form, "line_items[0][price_data][recurring][interval]"),
        None
    );
}

#[tokio::test]
async fn an_order_priced_differently_from_its_plan_is_charged_its_own_price_not_the_price_id() {
    let server = stripe_answering(200, fixture("checkout.session.response.json")).await;
    let plan = plan("one_time", "9.99", "USD", Some("price_live"));
    let mut request = checkout_request(plan, "ord_01JD0DEVPR");
    request.snapshot.price = usd(1);

    gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap();

    let form = only_form(&server).await;
    assert_eq!(field(&form, "line_items[0][price]"), None);
    assert_eq!(
        field(&form, "line_items[0][price_data][unit_amount]"),
        Some("1")
    );
    assert_eq!(
        field(&form, "line_items[0][price_data][currency]"),
        Some("usd")
    );
}

#[tokio::test]
async fn a_subscription_checkout_uses_the_price_id_and_tags_the_subscription_with_our_order_id() {
    let server = stripe_answering(200, fixture("checkout.session.response.json")).await;
    let request = checkout_request(
        plan(
            "recurring",
            "19",
            "USD",
            Some("price_1QJ0kELkdIwHu7ixPro19M"),
        ),
        "ord_01JCZ9SUB1",
    );

    gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap();

    let form = only_form(&server).await;
    assert_eq!(field(&form, "mode"), Some("subscription"));
    assert_eq!(
        field(&form, "line_items[0][price]"),
        Some("price_1QJ0kELkdIwHu7ixPro19M")
    );
    assert_eq!(
        field(&form, "subscription_data[metadata][orderId]"),
        Some("ord_01JCZ9SUB1")
    );
    assert_eq!(field(&form, "metadata[intervalMonths]"), Some("1"));
    assert_eq!(field(&form, "metadata[amountMinor]"), Some("1900"));
    assert_eq!(
        field(&form, "payment_intent_data[metadata][orderId]"),
        None,
        "Stripe refuses it in subscription mode"
    );
}

#[tokio::test]
async fn an_order_expiring_too_soon_or_too_late_is_clamped_into_stripes_window() {
    let server = stripe_answering(200, fixture("checkout.session.response.json")).await;
    let mut soon = checkout_request(plan("one_time", "9.99", "USD", None), "ord_soon");
    soon.expires_at = at(NOW_S + 60);
    let mut late = checkout_request(plan("one_time", "9.99", "USD", None), "ord_late");
    late.expires_at = at(NOW_S + 3 * 86_400);
    let gateway = gateway(&server.uri());

    gateway.create_checkout(&soon).await.unwrap();
    gateway.create_checkout(&late).await.unwrap();

    let requests = server.received_requests().await.unwrap();
    let expiry = |i: usize| -> i64 {
        let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&requests[i].body).unwrap();
        field(&form, "expires_at").unwrap().parse().unwrap()
    };
    assert_eq!(expiry(0), NOW_S + 31 * 60);
    assert_eq!(expiry(1), NOW_S + 24 * 3600 - 60);
}

#[test]
fn the_form_uses_stripes_percent_encoded_bracket_syntax() {
    let fields = vec![
        (
            "line_items[0][price_data][product_data][name]".to_owned(),
            "Pro plan".to_owned(),
        ),
        ("metadata[orderId]".to_owned(), "ord_1".to_owned()),
        (
            "success_url".to_owned(),
            "https://t.example/s?a=1&b=2".to_owned(),
        ),
    ];
    // Python's urllib.parse.urlencode of the same pairs.
    let expected = "line_items%5B0%5D%5Bprice_data%5D%5Bproduct_data%5D%5Bname%5D=Pro+plan\
                    &metadata%5BorderId%5D=ord_1&success_url=https%3A%2F%2Ft.example%2Fs%3Fa%3D1%26b%3D2";
    assert_eq!(encode_form(&fields).unwrap(), expected);
}

#[tokio::test]
async fn a_refusal_by_stripe_carries_its_error_message_and_a_server_error_is_unreachable() {
    let refusal = br#"{"error":{"message":"No such price: 'price_gone'","param":"line_items[0][price]","type":"invalid_request_error"}}"#;
    let server = stripe_answering(400, refusal.to_vec()).await;
    let request = checkout_request(plan("one_time", "9.99", "USD", Some("price_gone")), "ord_1");
    let error = gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(m) if m.contains("No such price") && m.contains("invalid_request_error")),
        "{error:?}"
    );

    let server = stripe_answering(503, b"{}".to_vec()).await;
    let error = gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap_err();
    assert!(matches!(error, GatewayError::Unreachable(_)), "{error:?}");
}

async fn session_query(body: serde_json::Value) -> Result<PaymentStatus, GatewayError> {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/checkout/sessions/cs_test_q1"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .expect(1)
        .mount(&server)
        .await;
    let payment = PaymentRef {
        order_id: OrderId::new("ord_q").unwrap(),
        provider_reference: Some("cs_test_q1".into()),
    };
    gateway(&server.uri()).query_payment(&payment).await
}

#[tokio::test]
async fn a_queried_session_is_paid_only_when_complete_and_paid_and_failed_only_when_expired() {
    let session = |status: &str, payment_status: &str| {
        serde_json::json!({"id": "cs_test_q1", "object": "checkout.session", "status": status,
            "payment_status": payment_status, "mode": "payment", "amount_total": 999, "currency": "usd"})
    };
    assert_eq!(
        session_query(session("complete", "paid")).await.unwrap(),
        PaymentStatus::Succeeded {
            amount: usd(999),
            paid_at: at(NOW_S)
        }
    );
    assert_eq!(
        session_query(session("open", "unpaid")).await.unwrap(),
        PaymentStatus::Pending
    );
    assert_eq!(
        session_query(session("complete", "unpaid")).await.unwrap(),
        PaymentStatus::Pending
    );
    assert_eq!(
        session_query(session("brand_new", "paid")).await.unwrap(),
        PaymentStatus::Pending
    );
    assert!(matches!(
        session_query(session("expired", "unpaid")).await.unwrap(),
        PaymentStatus::Failed { .. }
    ));
}

#[tokio::test]
async fn closing_a_payment_expires_its_checkout_session() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkout/sessions/cs_test_c1/expire"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "cs_test_c1", "object": "checkout.session", "status": "expired", "payment_status": "unpaid", "mode": "payment"})))
        .expect(1)
        .mount(&server)
        .await;
    let payment = PaymentRef {
        order_id: OrderId::new("ord_c").unwrap(),
        provider_reference: Some("cs_test_c1".into()),
    };
    gateway(&server.uri())
        .close_payment(&payment)
        .await
        .unwrap();
}

#[tokio::test]
async fn cancelling_a_subscription_sets_cancel_at_period_end() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/subscriptions/sub_1QKy7pLkdIwHu7ixWbQz4u2Y"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "sub_1QKy7pLkdIwHu7ixWbQz4u2Y", "object": "subscription", "status": "active", "cancel_at_period_end": true})))
        .expect(1)
        .mount(&server)
        .await;

    gateway(&server.uri())
        .cancel_subscription("sub_1QKy7pLkdIwHu7ixWbQz4u2Y")
        .await
        .unwrap();

    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&requests[0].body),
        "cancel_at_period_end=true"
    );
}

#[tokio::test]
async fn ids_that_would_change_the_url_path_are_refused_before_any_call() {
    let server = MockServer::start().await;
    let error = gateway(&server.uri())
        .cancel_subscription("../customers/cus_1")
        .await
        .unwrap_err();
    assert!(matches!(error, GatewayError::Rejected(_)));
    assert!(server.received_requests().await.unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Webhook verification

#[tokio::test]
async fn a_signature_computed_independently_with_openssl_verifies() {
    // printf '1731766000.' | cat - checkout.session.completed.json \
    //   | openssl dgst -sha256 -hmac whsec_vectorSecret0123456789 -hex
    let expected = "fccfde1af408b0b33ddb15aca8c7f53cd8ee15b1752e38fb70cc3704dad2f8fa";
    let body = fixture("checkout.session.completed.json");
    assert_eq!(signed(&body, WEBHOOK_SECRET, NOW_S), expected);
    let request = webhook(body, Some(format!("t={NOW_S},v1={expected}")));
    let verified = gateway("http://unused.invalid")
        .verify_webhook(&request)
        .await
        .unwrap();
    assert_eq!(verified.event_id, "evt_1QKx2cLkdIwHu7ixV0mZ3b9a");
    assert_eq!(verified.event_type, "checkout.session.completed");
}

#[tokio::test]
async fn a_tampered_body_is_refused() {
    let mut request = signed_webhook("checkout.session.completed.json");
    let at = request.body.windows(3).position(|w| w == b"999").unwrap();
    request.body[at] = b'1';
    let result = gateway("http://unused.invalid")
        .verify_webhook(&request)
        .await;
    assert_eq!(result.unwrap_err(), WebhookError::BadSignature);
}

#[tokio::test]
async fn a_signature_made_with_another_secret_is_refused() {
    let body = fixture("checkout.session.completed.json");
    let signature = signed(&body, "whsec_someoneElse", NOW_S);
    let request = webhook(body, Some(format!("t={NOW_S},v1={signature}")));
    let result = gateway("http://unused.invalid")
        .verify_webhook(&request)
        .await;
    assert_eq!(result.unwrap_err(), WebhookError::BadSignature);
}

#[tokio::test]
async fn a_timestamp_more_than_five_minutes_old_is_stale_and_one_in_the_future_passes_as_in_stripe_python()
 {
    // stripe-python: `timestamp < time.time() - tolerance` is refused, nothing else is.
    let request = signed_webhook("checkout.session.completed.json");
    let at_ms = |ms: i64| {
        let settings = CardGatewaySettings::new(SECRET_KEY, WEBHOOK_SECRET, None);
        let context = support::context(&settings.http(), ms, false);
        CardGatewayGateway::new(&settings, context).unwrap()
    };
    let edge = at_ms((NOW_S + 300) * 1000).verify_webhook(&request).await;
    assert!(edge.is_ok(), "{edge:?}");
    let late = at_ms((NOW_S + 300) * 1000 + 1)
        .verify_webhook(&request)
        .await;
    assert_eq!(late.unwrap_err(), WebhookError::Stale);
    let later = gateway_at("http://unused.invalid", NOW_S + 3_600)
        .verify_webhook(&request)
        .await;
    assert_eq!(later.unwrap_err(), WebhookError::Stale);
    let ahead = gateway_at("http://unused.invalid", NOW_S - 86_400)
        .verify_webhook(&request)
        .await;
    assert!(ahead.is_ok(), "{ahead:?}");
}

#[tokio::test]
async fn a_missing_or_malformed_signature_header_is_refused_as_missing() {
    let body = fixture("checkout.session.completed.json");
    let good = signed(&body, WEBHOOK_SECRET, NOW_S);
    let gateway = gateway("http://unused.invalid");
    for header in [
        None,
        Some(String::new()),
        Some(format!("v1={good}")),
        Some(format!("t={NOW_S}")),
        Some(format!("t=yesterday,v1={good}")),
        Some(format!("t={NOW_S},v1=not-hex")),
        Some(format!("t={NOW_S},v0={good}")),
    ] {
        let result = gateway
            .verify_webhook(&webhook(body.clone(), header.clone()))
            .await;
        assert_eq!(
            result.unwrap_err(),
            WebhookError::MissingSignature,
            "{header:?}"
        );
    }
}

#[tokio::test]
async fn during_secret_rotation_any_v1_signature_may_match() {
    let body = fixture("checkout.session.completed.json");
    let old = signed(&body, "whsec_previousSecret", NOW_S);
    let new = signed(&body, WEBHOOK_SECRET, NOW_S);
    let request = webhook(
        body,
        Some(format!(
            "t={NOW_S},v1={old},v1={new},v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"
        )),
    );
    assert!(
        gateway("http://unused.invalid")
            .verify_webhook(&request)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_signed_body_that_is_not_a_stripe_event_is_malformed() {
    let body = b"{\"hello\":\"world\"}".to_vec();
    let signature = signed(&body, WEBHOOK_SECRET, NOW_S);
    let result = gateway("http://unused.invalid")
        .verify_webhook(&webhook(body, Some(format!("t={NOW_S},v1={signature}"))))
        .await;
    assert!(matches!(result.unwrap_err(), WebhookError::Malformed(_)));
}

// ---------------------------------------------------------------------------------------------
// Event mapping

async fn events_of(name: &str) -> Vec<PaymentEvent> {
    gateway("http://unused.invalid")
        .verify_webhook(&signed_webhook(name))
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn a_completed_paid_payment_session_is_a_payment_of_its_total_for_our_order() {
    assert_eq!(
        events_of("checkout.session.completed.json").await,
        vec![PaymentEvent::PaymentSucceeded {
            order: OrderLocator {
                order_id: order_id("ord_01JCZ8M4QW"),
                provider_reference: Some(
                    "cs_test_a1Xq9ZfWm3tY7hB2kLr5Vd8NcPe4UoJs6GiHw0AzQ1Ky".into()
                ),
            },
            amount: usd(999),
            occurred_at: at(1_731_766_000),
        }]
    );
}

#[tokio::test]
async fn a_completed_subscription_session_waits_for_its_invoice() {
    assert_eq!(
        events_of("checkout.session.completed.subscription.json").await,
        vec![]
    );
}

#[tokio::test]
async fn an_asynchronous_payment_that_succeeds_is_a_payment_in_a_zero_decimal_currency() {
    let events = events_of("checkout.session.async_payment_succeeded.json").await;
    assert!(
        matches!(&events[..], [PaymentEvent::PaymentSucceeded { order, amount, .. }]
        if order.order_id == order_id("ord_01JD0CREDS") && *amount == Money::from_minor(50_000, Currency::Jpy).unwrap())
    );
}

#[tokio::test]
async fn an_asynchronous_payment_that_fails_and_an_expired_session_fail_the_order() {
    let failed = events_of("checkout.session.async_payment_failed.json").await;
    assert!(
        matches!(&failed[..], [PaymentEvent::PaymentFailed { order, reason, .. }]
        if order.order_id == order_id("ord_01JD0ASYNC") && reason == "asynchronous payment failed")
    );
    let expired = events_of("checkout.session.expired.json").await;
    assert!(
        matches!(&expired[..], [PaymentEvent::PaymentFailed { order, reason, occurred_at }]
        if order.order_id == order_id("ord_01JD0EXPRD") && reason == "checkout session expired" && *occurred_at == at(1_731_852_200))
    );
}

#[tokio::test]
async fn a_declined_card_fails_the_order_with_stripes_reason() {
    let declined = events_of("payment_intent.payment_failed.json").await;
    assert!(
        matches!(&declined[..], [PaymentEvent::PaymentFailed { order, reason, occurred_at }]
        if order.order_id == order_id("ord_01JD0DECLN")
            && reason == "Your card was declined."
            && *occurred_at == at(1_731_853_100)),
        "{declined:?}"
    );
}

#[tokio::test]
async fn the_first_paid_invoice_activates_the_subscription_with_the_lines_period_and_our_order() {
    assert_eq!(
        events_of("invoice.paid.subscription_create.json").await,
        vec![PaymentEvent::SubscriptionActivated {
            order: OrderLocator {
                order_id: order_id("ord_01JCZ9SUB1"),
                provider_reference: None
            },
            provider_subscription_id: "sub_1QKy7pLkdIwHu7ixWbQz4u2Y".into(),
            period: BillingPeriod::new(at(1_731_769_998), at(1_734_361_998)).unwrap(),
            amount: Some(usd(1900)),
            charge_ref: Some(FIRST_INVOICE.into()),
            occurred_at: at(1_731_770_002),
        }]
    );
}

#[tokio::test]
async fn a_renewal_invoice_in_the_pre_2025_shape_renews_for_the_next_period() {
    assert_eq!(
        events_of("invoice.payment_succeeded.subscription_cycle.json").await,
        vec![PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: "sub_1QKy7pLkdIwHu7ixWbQz4u2Y".into(),
            period: BillingPeriod::new(at(1_734_361_998), at(1_736_953_998)).unwrap(),
            amount: usd(1900),
            charge_ref: Some(RENEWAL_INVOICE.into()),
            occurred_at: at(1_734_362_100),
        }]
    );
}

#[tokio::test]
async fn a_failed_invoice_payment_puts_the_subscription_past_due() {
    assert_eq!(
        events_of("invoice.payment_failed.json").await,
        vec![PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: "sub_1QKy7pLkdIwHu7ixWbQz4u2Y".into(),
            occurred_at: at(1_736_954_100),
        }]
    );
}

#[tokio::test]
async fn a_subscription_set_to_cancel_at_period_end_is_scheduled_to_end_and_a_deleted_one_ended() {
    assert_eq!(
        events_of("customer.subscription.updated.json").await,
        vec![PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: "sub_1QKy7pLkdIwHu7ixWbQz4u2Y".into(),
            occurred_at: at(1_734_500_000),
        }]
    );
    assert_eq!(
        events_of("customer.subscription.deleted.json").await,
        vec![PaymentEvent::SubscriptionCanceled {
            provider_subscription_id: "sub_1QKy7pLkdIwHu7ixWbQz4u2Y".into(),
            occurred_at: at(1_736_954_001),
        }]
    );
}

#[tokio::test]
async fn a_refunded_charge_reports_the_cumulative_refunded_amount_for_our_order() {
    assert_eq!(
        events_of("charge.refunded.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: order_id("ord_01JCZ8M4QW"),
                provider_reference: None
            }),
            refund: RefundReport::Total(usd(500)),
            occurred_at: at(1_731_900_000),
        }]
    );
}

const SUBSCRIPTION: &str = "sub_1QKy7pLkdIwHu7ixWbQz4u2Y";
/// The invoice of the first period: the activation's `charge_ref`.
const FIRST_INVOICE: &str = "in_1QKy7pLkdIwHu7ixM3gS8r0T";
/// The invoice of the renewal: the renewal's `charge_ref`, which its charge's refunds lead to.
const RENEWAL_INVOICE: &str = "in_1QVq2aLkdIwHu7ixN4hT9s1U";
const RENEWAL_CHARGE: &str = "ch_3QVq2bLkdIwHu7ix1pU9lM2N";
const RENEWAL_PAYMENT_INTENT: &str = "pi_3QVq2bLkdIwHu7ix1Kr9nO3M";

/// A Stripe that answers the Invoice Payments lookup for the renewal's PaymentIntent with
/// `fixture` (only when asked the way the gateway must ask: pinned version, filter, expansion).
async fn stripe_with_invoice_payments(status: u16, fixture_name: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/invoice_payments"))
        .and(bearer_token(SECRET_KEY))
        .and(header("stripe-version", "2025-03-31.basil"))
        .and(query_param("payment[type]", "payment_intent"))
        .and(query_param(
            "payment[payment_intent]",
            RENEWAL_PAYMENT_INTENT,
        ))
        .and(query_param("expand[]", "data.invoice"))
        .respond_with(
            ResponseTemplate::new(status).set_body_raw(fixture(fixture_name), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    server
}

async fn events_through(
    server: &MockServer,
    name: &str,
) -> Result<Vec<PaymentEvent>, WebhookError> {
    gateway(&server.uri())
        .verify_webhook(&signed_webhook(name))
        .await
        .map(|verified| verified.events)
}

fn renewal_charge(provider_subscription_id: Option<&str>) -> RefundedCharge {
    RefundedCharge::SubscriptionCharge {
        provider_subscription_id: provider_subscription_id.map(str::to_owned),
        charge_ref: RENEWAL_INVOICE.into(),
    }
}

#[tokio::test]
async fn a_refunded_renewal_charge_is_traced_to_its_invoice_through_the_invoice_payments_api() {
    // API 2025-03-31.basil: the charge names neither invoice nor order, only its PaymentIntent.
    let stripe = stripe_with_invoice_payments(200, "invoice_payments.list.json").await;
    assert_eq!(
        events_through(&stripe, "charge.refunded.subscription.json")
            .await
            .unwrap(),
        vec![PaymentEvent::Refunded {
            charge: renewal_charge(Some(SUBSCRIPTION)),
            refund: RefundReport::Total(usd(950)),
            occurred_at: at(1_734_400_000),
        }]
    );
}

#[tokio::test]
async fn a_refunded_invoice_charge_in_the_pre_basil_shape_names_its_invoice_without_a_lookup() {
    assert_eq!(
        events_of("charge.refunded.subscription.pre_basil.json").await,
        vec![PaymentEvent::Refunded {
            charge: renewal_charge(None),
            refund: RefundReport::Total(usd(950)),
            occurred_at: at(1_734_400_000),
        }]
    );
}

#[tokio::test]
async fn a_refunded_charge_that_paid_no_invoice_and_names_no_order_is_reported_without_one() {
    let stripe = stripe_with_invoice_payments(200, "invoice_payments.empty.json").await;
    assert_eq!(
        events_through(&stripe, "charge.refunded.subscription.json")
            .await
            .unwrap(),
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: None,
                provider_reference: None
            }),
            refund: RefundReport::Total(usd(950)),
            occurred_at: at(1_734_400_000),
        }]
    );
}

#[tokio::test]
async fn an_invoice_lookup_stripe_cannot_answer_refuses_the_webhook_and_a_refused_one_changes_nothing()
 {
    let down = stripe_with_invoice_payments(500, "invoice_payments.empty.json").await;
    assert!(matches!(
        events_through(&down, "charge.refunded.subscription.json").await,
        Err(WebhookError::Malformed(reason)) if reason.contains("retry")
    ));
    let refused = stripe_with_invoice_payments(404, "invoice_payments.empty.json").await;
    assert_eq!(
        events_through(&refused, "charge.refunded.subscription.json")
            .await
            .unwrap(),
        vec![]
    );
}

#[tokio::test]
async fn a_lost_dispute_of_a_renewal_charge_takes_the_whole_charge_back_from_its_invoice() {
    let stripe = stripe_with_invoice_payments(200, "invoice_payments.list.json").await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/charges/{RENEWAL_CHARGE}")))
        .and(bearer_token(SECRET_KEY))
        .and(header("stripe-version", "2025-03-31.basil"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture("charge.subscription.json"), "application/json"),
        )
        .expect(1)
        .mount(&stripe)
        .await;
    assert_eq!(
        events_through(&stripe, "charge.dispute.closed.lost.json")
            .await
            .unwrap(),
        vec![PaymentEvent::Refunded {
            charge: renewal_charge(Some(SUBSCRIPTION)),
            refund: RefundReport::DisputeLost {
                dispute_id: "dp_1QVr8cLkdIwHu7ix9sT2uV3W".into()
            },
            occurred_at: at(1_737_000_000),
        }]
    );
}

#[tokio::test]
async fn a_lost_dispute_of_a_one_time_charge_finds_the_order_in_the_charge_metadata_and_a_won_one_nothing()
 {
    let stripe = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/charges/ch_3QKx2aLkdIwHu7ix0oT8kL1M"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture("charge.one_time.json"), "application/json"),
        )
        .expect(1)
        .mount(&stripe)
        .await;
    assert_eq!(
        events_through(&stripe, "charge.dispute.closed.lost.one_time.json")
            .await
            .unwrap(),
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: order_id("ord_01JCZ8M4QW"),
                provider_reference: None
            }),
            refund: RefundReport::DisputeLost {
                dispute_id: "dp_1QKz3bLkdIwHu7ix5rS1tU2V".into()
            },
            occurred_at: at(1_737_000_000),
        }]
    );
    // Won: nothing goes back, and nothing is read (the unused base would fail any lookup).
    assert_eq!(events_of("charge.dispute.closed.won.json").await, vec![]);
}

#[tokio::test]
async fn an_event_type_tally_does_not_handle_verifies_with_no_events() {
    let verified = gateway("http://unused.invalid")
        .verify_webhook(&signed_webhook("customer.created.json"))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "customer.created");
    assert_eq!(verified.event_id, "evt_1QKy7oLkdIwHu7ixY3Gk0uJd");
    assert!(verified.events.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Settings and acknowledgements

#[test]
fn settings_are_camel_case_refuse_unknown_keys_and_never_print_secrets() {
    let settings: CardGatewaySettings = serde_json::from_value(serde_json::json!({
        "secretKey": SECRET_KEY, "webhookSecret": WEBHOOK_SECRET, "timeoutMs": 2500}))
    .unwrap();
    assert_eq!(settings.http().base_url, "https://api.stripe.com");
    assert_eq!(settings.http().timeout_ms, 2500);
    let printed = format!("{settings:?}");
    assert!(
        !printed.contains("sk_test") && !printed.contains("whsec_"),
        "{printed}"
    );
    let unknown = serde_json::from_value::<CardGatewaySettings>(serde_json::json!({
        "secretKey": SECRET_KEY, "webhookSecret": WEBHOOK_SECRET, "publishableKey": "pk_test_1"}));
    assert!(unknown.is_err());
}

#[test]
fn keys_that_are_not_stripe_secrets_are_configuration_errors() {
    let context = || {
        support::context(
            &gateways::HttpSettings::new("http://unused.invalid"),
            0,
            false,
        )
    };
    let publishable = CardGatewaySettings::new("pk_test_1234567890", WEBHOOK_SECRET, None);
    let error = CardGatewayGateway::new(&publishable, context()).unwrap_err();
    assert_eq!(error.field, "secretKey");
    assert!(!error.to_string().contains("pk_test"));
    let bare = CardGatewaySettings::new(SECRET_KEY, "not-a-signing-secret", None);
    assert_eq!(
        CardGatewayGateway::new(&bare, context()).unwrap_err().field,
        "webhookSecret"
    );
}

#[test]
fn accepted_webhooks_get_200_and_refused_ones_400_with_a_short_reason() {
    let gateway = gateway("http://unused.invalid");
    assert_eq!(gateway.provider(), ProviderId::CardGateway);
    assert_eq!(
        gateway.webhook_ack(&AckFor::Accepted).verdict,
        application::ports::AckVerdict::Accepted
    );
    let refused = gateway.webhook_ack(&AckFor::Refused(WebhookError::BadSignature));
    assert_eq!(refused.verdict, application::ports::AckVerdict::Refused);
    assert_eq!(refused.body, "signature does not verify");
}

// ---- merchant isolation ----------------------------------------------------------------------

/// The completed-session fixture with `livemode` and `account` set as given, signed.
fn event_as(livemode: bool, account: Option<&str>) -> WebhookRequest {
    let mut event: serde_json::Value =
        serde_json::from_slice(&fixture("checkout.session.completed.json")).unwrap();
    event["livemode"] = livemode.into();
    if let Some(account) = account {
        event["account"] = account.into();
    }
    let body = serde_json::to_vec(&event).unwrap();
    let signature = signed(&body, WEBHOOK_SECRET, NOW_S);
    webhook(body, Some(format!("t={NOW_S},v1={signature}")))
}

fn gateway_with(secret_key: &str, account_id: Option<&str>) -> CardGatewayGateway {
    let mut settings = CardGatewaySettings::new(secret_key, WEBHOOK_SECRET, None);
    settings.account_id = account_id.map(str::to_owned);
    let context = support::context(&settings.http(), NOW_S * 1000, false);
    CardGatewayGateway::new(&settings, context).unwrap()
}

#[tokio::test]
async fn an_event_of_the_other_mode_than_the_key_is_foreign_and_changes_nothing() {
    let test_key = gateway_with(SECRET_KEY, None);
    let ours = test_key
        .verify_webhook(&event_as(false, None))
        .await
        .unwrap();
    assert_eq!(ours.foreign, None);
    assert_eq!(ours.events.len(), 1);
    let live_event = test_key
        .verify_webhook(&event_as(true, None))
        .await
        .unwrap();
    assert!(live_event.foreign.unwrap().contains("live-mode event"));
    assert!(live_event.events.is_empty());
    assert_eq!(live_event.event_type, "checkout.session.completed");

    for live_key in ["sk_live_51TallyLiveKey0000", "rk_live_51TallyLiveKey0000"] {
        let live = gateway_with(live_key, None);
        let test_event = live.verify_webhook(&event_as(false, None)).await.unwrap();
        assert!(test_event.foreign.unwrap().contains("test-mode event"));
        assert!(test_event.events.is_empty());
        let ours = live.verify_webhook(&event_as(true, None)).await.unwrap();
        assert_eq!(ours.foreign, None);
        assert_eq!(ours.events.len(), 1);
    }
}

#[tokio::test]
async fn an_event_of_a_connected_account_is_foreign_unless_it_is_the_configured_one() {
    let platform = gateway_with(SECRET_KEY, None);
    let connected = platform
        .verify_webhook(&event_as(false, Some("acct_1Other")))
        .await
        .unwrap();
    assert!(connected.foreign.unwrap().contains("acct_1Other"));
    assert!(connected.events.is_empty());

    let ours = gateway_with(SECRET_KEY, Some("acct_1Ours"));
    let mine = ours
        .verify_webhook(&event_as(false, Some("acct_1Ours")))
        .await
        .unwrap();
    assert_eq!(mine.foreign, None);
    assert_eq!(mine.events.len(), 1);
    let other = ours
        .verify_webhook(&event_as(false, Some("acct_1Other")))
        .await
        .unwrap();
    assert!(other.foreign.is_some());
    let platform_event = ours.verify_webhook(&event_as(false, None)).await.unwrap();
    assert!(platform_event.foreign.is_some());
}

#[tokio::test]
async fn a_foreign_refund_event_is_not_traced_through_stripes_api() {
    // The renewal charge's refund would be looked up; a foreign one must not be.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let mut event: serde_json::Value =
        serde_json::from_slice(&fixture("charge.refunded.subscription.json")).unwrap();
    event["livemode"] = true.into();
    let body = serde_json::to_vec(&event).unwrap();
    let signature = signed(&body, WEBHOOK_SECRET, NOW_S);
    let verified = gateway(&server.uri())
        .verify_webhook(&webhook(body, Some(format!("t={NOW_S},v1={signature}"))))
        .await
        .unwrap();
    assert!(verified.foreign.is_some());
    assert!(verified.events.is_empty());
}

#[test]
fn an_account_id_that_is_not_a_connected_account_is_a_configuration_error() {
    let mut settings = CardGatewaySettings::new(SECRET_KEY, WEBHOOK_SECRET, None);
    settings.account_id = Some("../v1/accounts".into());
    let context = support::context(&settings.http(), 0, false);
    assert_eq!(
        CardGatewayGateway::new(&settings, context)
            .unwrap_err()
            .field,
        "accountId"
    );
    let parsed: CardGatewaySettings = serde_json::from_value(serde_json::json!({
        "secretKey": SECRET_KEY, "webhookSecret": WEBHOOK_SECRET, "accountId": "acct_1Ours"}))
    .unwrap();
    assert_eq!(parsed.account_id.as_deref(), Some("acct_1Ours"));
}

// ---- refunds ------------------------------------------------------------------------------------

fn refund_request(reference: &str, amount: i64) -> RefundRequest {
    RefundRequest {
        payment: PaymentRef {
            order_id: OrderId::new("ord_r1").unwrap(),
            provider_reference: Some(reference.to_owned()),
        },
        refund_id: "rf_ord_r1_500".into(),
        amount: usd(amount),
        paid: usd(1900),
        reason: "requested by the buyer".into(),
        notify_url: "https://tally.example/api/payment/webhook/card_gateway".into(),
    }
}

/// A Stripe that shows session `cs_test_r1` with `session` and answers `POST /v1/refunds` (asked
/// with our refund id as `Idempotency-Key`) with `refund`.
async fn stripe_refunding(session: serde_json::Value, refund: serde_json::Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/checkout/sessions/cs_test_r1"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(session))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/refunds"))
        .and(bearer_token(SECRET_KEY))
        .and(header("idempotency-key", "rf_ord_r1_500"))
        .and(header("content-type", "application/x-www-form-urlencoded"))
        .respond_with(ResponseTemplate::new(200).set_body_json(refund))
        .mount(&server)
        .await;
    server
}

fn paid_session(extra: serde_json::Value) -> serde_json::Value {
    let mut session = serde_json::json!({
        "id": "cs_test_r1", "object": "checkout.session", "status": "complete",
        "payment_status": "paid", "mode": "payment", "amount_total": 1900, "currency": "usd",
        "payment_intent": "pi_3R1", "livemode": false
    });
    for (key, value) in extra.as_object().unwrap() {
        session[key] = value.clone();
    }
    session
}

fn refund_answer(status: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "re_3R1", "object": "refund", "amount": 500, "currency": "usd",
        "payment_intent": "pi_3R1", "status": status, "metadata": {"orderId": "ord_r1"}
    })
}

#[tokio::test]
async fn a_refund_posts_the_sessions_payment_intent_amount_and_order_with_our_idempotency_key() {
    let server = stripe_refunding(
        paid_session(serde_json::json!({})),
        refund_answer("succeeded"),
    )
    .await;
    let started = gateway(&server.uri())
        .refund(&refund_request("cs_test_r1", 500))
        .await
        .unwrap();
    assert_eq!(
        started,
        RefundStarted {
            provider_refund_id: Some("re_3R1".into()),
            state: RefundState::Succeeded
        }
    );
    let requests = server.received_requests().await.unwrap();
    let post = requests
        .iter()
        .find(|r| r.method.as_str() == "POST")
        .unwrap();
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&post.body).unwrap();
    assert_eq!(field(&form, "payment_intent"), Some("pi_3R1"));
    assert_eq!(field(&form, "amount"), Some("500"));
    assert_eq!(field(&form, "metadata[orderId]"), Some("ord_r1"));
    assert_eq!(
        field(&form, "metadata[reason]"),
        Some("requested by the buyer")
    );
    assert_eq!(field(&form, "charge"), None);
}

#[tokio::test]
async fn refund_statuses_map_onto_pending_succeeded_and_failed() {
    let cases = [
        ("pending", RefundState::Pending),
        ("requires_action", RefundState::Pending),
        ("something_new", RefundState::Pending),
        ("failed", RefundState::Failed("refund failed".into())),
        ("canceled", RefundState::Failed("refund canceled".into())),
    ];
    for (status, expected) in cases {
        let server =
            stripe_refunding(paid_session(serde_json::json!({})), refund_answer(status)).await;
        let started = gateway(&server.uri())
            .refund(&refund_request("cs_test_r1", 500))
            .await
            .unwrap();
        assert_eq!(started.state, expected, "{status}");
    }
    let mut failed = refund_answer("failed");
    failed["failure_reason"] = "expired_or_canceled_card".into();
    let server = stripe_refunding(paid_session(serde_json::json!({})), failed).await;
    let started = gateway(&server.uri())
        .refund(&refund_request("cs_test_r1", 500))
        .await
        .unwrap();
    assert_eq!(
        started.state,
        RefundState::Failed("expired_or_canceled_card".into())
    );
}

#[tokio::test]
async fn a_refund_stripe_refuses_carries_its_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/refunds"))
        .respond_with(
            ResponseTemplate::new(400).set_body_json(serde_json::json!({"error": {
            "type": "invalid_request_error", "code": "charge_already_refunded",
            "message": "Charge ch_3R1 has already been refunded."}})),
        )
        .mount(&server)
        .await;
    let error = gateway(&server.uri())
        .refund(&refund_request("pi_3R1", 500))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(m) if m.contains("already been refunded")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_subscriptions_first_payment_is_refunded_through_the_payment_intent_of_its_first_invoice()
{
    let server = stripe_refunding(
        paid_session(serde_json::json!({
            "mode": "subscription", "payment_intent": null, "invoice": "in_1First",
            "subscription": "sub_1"
        })),
        refund_answer("pending"),
    )
    .await;
    Mock::given(method("GET"))
        .and(path("/v1/invoice_payments"))
        .and(query_param("invoice", "in_1First"))
        .and(header("stripe-version", "2025-03-31.basil"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "object": "list", "has_more": false, "data": [{
                "id": "inpay_1", "object": "invoice_payment", "invoice": "in_1First",
                "status": "paid",
                "payment": {"type": "payment_intent", "payment_intent": "pi_3First"}}]})))
        .expect(1)
        .mount(&server)
        .await;
    let started = gateway(&server.uri())
        .refund(&refund_request("cs_test_r1", 500))
        .await
        .unwrap();
    assert_eq!(started.state, RefundState::Pending);
    let requests = server.received_requests().await.unwrap();
    let post = requests
        .iter()
        .find(|r| r.method.as_str() == "POST")
        .unwrap();
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&post.body).unwrap();
    assert_eq!(field(&form, "payment_intent"), Some("pi_3First"));
}

#[tokio::test]
async fn a_refund_without_a_session_or_with_a_path_changing_reference_calls_nothing() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let gateway = gateway(&server.uri());
    let mut request = refund_request("cs_test_r1", 500);
    request.payment.provider_reference = None;
    assert!(matches!(
        gateway.refund(&request).await,
        Err(GatewayError::Rejected(_))
    ));
    let request = refund_request("../v1/customers", 500);
    assert!(matches!(
        gateway.refund(&request).await,
        Err(GatewayError::Rejected(_))
    ));
}

#[tokio::test]
async fn a_recorded_event_replays_through_the_same_parsing_without_its_stale_signature() {
    let request = signed_webhook("checkout.session.completed.json");
    let live = gateway("http://unused.invalid")
        .verify_webhook(&request)
        .await
        .unwrap();
    let a_day_later = gateway_at("http://unused.invalid", NOW_S + 86_400);
    assert_eq!(
        a_day_later.verify_webhook(&request).await.unwrap_err(),
        WebhookError::Stale
    );
    let recorded = application::ports::RecordedWebhook {
        event_id: live.event_id.clone(),
        body: request.body.clone(),
        received_at: at(NOW_S),
    };
    assert_eq!(a_day_later.parse_recorded(&recorded).await.unwrap(), live);
    let unreadable = application::ports::RecordedWebhook {
        body: b"not json".to_vec(),
        ..recorded.clone()
    };
    assert!(matches!(
        a_day_later.parse_recorded(&unreadable).await,
        Err(WebhookError::Malformed(_))
    ));
}

#[tokio::test]
async fn cancelling_a_subscription_now_deletes_it_and_a_refusal_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/v1/subscriptions/sub_1QKy7pLkdIwHu7ixWbQz4u2Y"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "sub_1QKy7pLkdIwHu7ixWbQz4u2Y", "object": "subscription", "status": "canceled",
            "cancel_at_period_end": false})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/v1/subscriptions/sub_gone"))
        .respond_with(ResponseTemplate::new(404).set_body_json(serde_json::json!({
            "error": {"type": "invalid_request_error", "message": "No such subscription: 'sub_gone'"}})))
        .mount(&server)
        .await;
    let gateway = gateway(&server.uri());
    gateway
        .cancel_subscription_now("sub_1QKy7pLkdIwHu7ixWbQz4u2Y")
        .await
        .unwrap();
    assert!(gateway.cancel_subscription_now("sub_gone").await.is_err());
    assert!(matches!(
        gateway.cancel_subscription_now("../v1/charges").await,
        Err(GatewayError::Rejected(_))
    ));
}

/// A Stripe answering `GET /v1/balance` for `SECRET_KEY` with `status` and `body`.
async fn stripe_balance(status: u16, body: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/balance"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(status).set_body_raw(body, "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_credential_check_reads_the_balance_and_reports_the_keys_mode() {
    for (livemode, mode) in [(false, CredentialMode::Test), (true, CredentialMode::Live)] {
        let body = format!(
            r#"{{"object":"balance","available":[{{"amount":0,"currency":"usd","source_types":{{"card":0}}}}],"livemode":{livemode},"pending":[]}}"#
        );
        let server = stripe_balance(200, &body).await;
        let check = gateway(&server.uri()).check_credentials().await.unwrap();
        assert_eq!(check.mode, mode);
        assert!(check.detail.contains("/v1/balance"), "{check:?}");
    }
}

#[tokio::test]
async fn a_credential_check_reports_stripes_refusal_without_the_key() {
    let refusal = r#"{"error":{"message":"Invalid API Key provided: sk_test_****0000","type":"invalid_request_error"}}"#;
    let server = stripe_balance(401, refusal).await;
    let check = gateway(&server.uri()).check_credentials().await;
    let Err(GatewayError::Rejected(why)) = check else {
        panic!("expected a refusal, got {check:?}");
    };
    assert!(
        why.contains("HTTP 401") && why.contains("Invalid API Key provided"),
        "{why}"
    );
    assert!(!why.contains(SECRET_KEY), "{why}");
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
fn only_a_live_secret_key_is_live_mode() {
    for (key, test) in [
        ("sk_test_51Abc", true),
        ("rk_test_51Abc", true),
        ("sk_live_51Abc", false),
        ("rk_live_51Abc", false),
    ] {
        let setting = CardGatewaySettings::new(key, WEBHOOK_SECRET, None).test_mode();
        assert_eq!(setting.is_some(), test, "{key}");
        if let Some(setting) = setting {
            assert_eq!(setting.field, "secretKey");
            assert!(!setting.reason.contains(key), "{setting:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forgetting a saved method

fn saved_card() -> application::ports::SavedMethod {
    application::ports::SavedMethod {
        customer_ref: "cus_Qx1".into(),
        method_ref: "pm_1QKy7pLkdIwHu7ix".into(),
        brand: Some("visa".into()),
        last4: Some("4242".into()),
        wallet_account: None,
    }
}

#[tokio::test]
async fn forgetting_a_method_detaches_it_from_its_customer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/payment_methods/pm_1QKy7pLkdIwHu7ix/detach"))
        .and(bearer_token(SECRET_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "pm_1QKy7pLkdIwHu7ix", "object": "payment_method", "customer": null,
            "type": "card"})))
        .expect(1)
        .mount(&server)
        .await;
    gateway(&server.uri())
        .forget_saved_method(&saved_card())
        .await
        .unwrap();
    let sent = server.received_requests().await.unwrap();
    assert!(sent[0].body.is_empty(), "detach takes no parameters");
}

#[tokio::test]
async fn a_method_stripe_does_not_know_is_forgotten_already_and_other_failures_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/payment_methods/pm_1QKy7pLkdIwHu7ix/detach"))
        .respond_with(ResponseTemplate::new(404).set_body_json(serde_json::json!({
            "error": {"type": "invalid_request_error", "code": "resource_missing",
                "param": "payment_method",
                "message": "No such PaymentMethod: 'pm_1QKy7pLkdIwHu7ix'"}})))
        .mount(&server)
        .await;
    gateway(&server.uri())
        .forget_saved_method(&saved_card())
        .await
        .unwrap();

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/payment_methods/pm_1QKy7pLkdIwHu7ix/detach"))
        .respond_with(ResponseTemplate::new(500).set_body_json(serde_json::json!({
            "error": {"type": "api_error", "message": "down"}})))
        .mount(&server)
        .await;
    assert!(matches!(
        gateway(&server.uri())
            .forget_saved_method(&saved_card())
            .await,
        Err(GatewayError::Unreachable(_))
    ));
    let mut unsafe_id = saved_card();
    unsafe_id.method_ref = "pm_1/../../v1/refunds".into();
    assert!(matches!(
        gateway(&server.uri()).forget_saved_method(&unsafe_id).await,
        Err(GatewayError::Rejected(_))
    ));
}
