//! The Dodo Payments gateway against a wiremock Dodo and recorded webhook payloads.

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
use gateways::mor_b::{MorBGateway, MorBSettings};
use gateways::shared::signing::{b64, hmac_sha256, unb64};
use wiremock::matchers::{bearer_token, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "dodo_test_Xk29fQpL0mZr7TbY";
/// `whsec_` + base64 of "tally-test-standard-webhooks-key".
const WEBHOOK_SECRET: &str = "whsec_dGFsbHktdGVzdC1zdGFuZGFyZC13ZWJob29rcy1rZXk=";
const KEY: &[u8] = b"tally-test-standard-webhooks-key";
/// 2025-01-16T08:30:02Z.
const NOW_S: i64 = 1_737_016_202;
const MSG_ID: &str = "msg_2mXq8Yc1Vt0bLp5N";
const SUBSCRIPTION: &str = "sub_6Kl9nO2pD5bG8zFr";
/// The subscription's first payment (`payment.succeeded.subscription.json`).
const FIRST_CHARGE: &str = "pay_4Ij7lM0nB3zE6xDp";
/// Its renewal's payment (`payments.list.subscription.json`).
const RENEWAL_CHARGE: &str = "pay_9Tq4sV7wE1hK3mNb";

fn fixture(name: &str) -> Vec<u8> {
    support::fixture("mor_b", name)
}

fn plan(kind: &str, amount: &str, product_id: Option<&str>) -> Plan {
    let i18n = support::english("Pro plan");
    let draft = PlanDraft {
        id: format!("{kind}-plan"),
        provider: Some("mor_b".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("USD".into()),
        months: match kind {
            "credits" => None,
            "one_time" => Some(999_999),
            _ => Some(3),
        },
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "500".parse().unwrap()),
        provider_refs: product_id.map_or_else(ProviderRefs::default, |id| {
            ProviderRefs::default().with(ProviderId::MorB, id)
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
        customer_name: Some("Ada Buyer".into()),
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: format!("https://tally.example/payment-success?orderId={order_id}"),
        cancel_url: format!("https://tally.example/payment-cancel?orderId={order_id}"),
        notify_url: "https://tally.example/api/payment/webhook/mor_b".into(),
        expires_at: Timestamp::from_unix_millis((NOW_S + 7_200) * 1000),
    }
}

fn gateway_with(base_url: &str, secret: &str, now_s: i64) -> MorBGateway {
    let settings = MorBSettings::new(API_KEY, secret, Some(base_url.to_owned()));
    let context = support::context(&settings.http(), now_s * 1000, false);
    MorBGateway::new(&settings, context).unwrap()
}

fn gateway(base_url: &str) -> MorBGateway {
    gateway_with(base_url, WEBHOOK_SECRET, NOW_S)
}

fn signature(key: &[u8], id: &str, t: i64, body: &[u8]) -> String {
    let mut message = format!("{id}.{t}.").into_bytes();
    message.extend_from_slice(body);
    format!("v1,{}", b64(&hmac_sha256(key, &message)))
}

fn webhook(body: Vec<u8>, headers: &[(&str, &str)]) -> WebhookRequest {
    let mut map = BTreeMap::new();
    map.insert("content-type".to_owned(), "application/json".to_owned());
    for (name, value) in headers {
        map.insert((*name).to_owned(), (*value).to_owned());
    }
    WebhookRequest { headers: map, body }
}

fn signed_webhook(name: &str) -> WebhookRequest {
    let body = fixture(name);
    let sig = signature(KEY, MSG_ID, NOW_S, &body);
    webhook(
        body,
        &[
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &NOW_S.to_string()),
            ("webhook-signature", &sig),
        ],
    )
}

fn time(rfc3339: &str) -> Timestamp {
    Timestamp::from_unix_millis(
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_millis(),
    )
}

fn order_id(id: &str) -> Option<OrderId> {
    Some(OrderId::new(id).unwrap())
}

// ---------------------------------------------------------------------------------------------
// Checkout and the other API calls

async fn dodo_answering_checkouts(status: u16, body: Vec<u8>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/checkouts"))
        .and(bearer_token(API_KEY))
        .respond_with(ResponseTemplate::new(status).set_body_raw(body, "application/json"))
        .mount(&server)
        .await;
    server
}

async fn only_json_body(server: &MockServer) -> serde_json::Value {
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    serde_json::from_slice(&requests[0].body).unwrap()
}

#[tokio::test]
async fn a_checkout_is_a_json_session_for_the_plans_product_with_our_order_id_in_metadata() {
    let server = dodo_answering_checkouts(200, fixture("checkout.response.json")).await;
    let request = checkout_request(
        plan("one_time", "9.99", Some("pdt_7Yu3iO9pA1sD5fGh")),
        "ord_01JHDODO01",
    );

    let checkout = gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap();

    assert_eq!(
        checkout.provider_reference.as_deref(),
        Some("cks_0Nf3xQk7Lm2PzR9s")
    );
    assert_eq!(
        checkout.target,
        CheckoutTarget::Redirect(
            "https://test.checkout.dodopayments.com/session/cks_0Nf3xQk7Lm2PzR9s".into()
        )
    );
    let body = only_json_body(&server).await;
    assert_eq!(
        body,
        serde_json::json!({
            "product_cart": [{"product_id": "pdt_7Yu3iO9pA1sD5fGh", "quantity": 1}],
            "customer": {"email": "buyer@example.com", "name": "Ada Buyer"},
            "return_url": "https://tally.example/payment-success?orderId=ord_01JHDODO01",
            "metadata": {"orderId": "ord_01JHDODO01", "userId": "usr_7", "planId": "one_time-plan",
                         "amountMinor": "999", "currency": "USD"}
        })
    );
    let requests = server.received_requests().await.unwrap();
    let content_type = requests[0]
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok());
    assert_eq!(content_type, Some("application/json"));
}

#[tokio::test]
async fn a_subscription_checkout_also_sends_its_billing_period_in_months() {
    let server = dodo_answering_checkouts(200, fixture("checkout.response.json")).await;
    let request = checkout_request(
        plan("recurring", "19", Some("pdt_9Aw5kQ1rC3uF7hIj")),
        "ord_01JHDODOS1",
    );

    gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap();

    let body = only_json_body(&server).await;
    assert_eq!(body["metadata"]["intervalMonths"], "3");
    assert_eq!(body["metadata"]["amountMinor"], "1900");
    assert_eq!(
        body["product_cart"][0]["product_id"],
        "pdt_9Aw5kQ1rC3uF7hIj"
    );
    assert!(
        body["metadata"].get("notifyUrl").is_none(),
        "only the sandbox is told where webhooks go"
    );
}

#[tokio::test]
async fn a_plan_without_a_dodo_product_is_refused_before_any_call() {
    let server = MockServer::start().await;
    let mut request = checkout_request(plan("one_time", "9.99", Some("pdt_x")), "ord_1");
    request.plan = {
        let mut draft = request.plan.to_draft();
        draft.provider = Some("card_gateway".into());
        draft.provider_refs = ProviderRefs::default();
        Plan::from_draft(&draft).unwrap()
    };
    let error = gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap_err();
    assert!(matches!(error, GatewayError::Rejected(m) if m.contains("morBProductId")));
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_by_dodo_carries_its_code_and_message() {
    let refusal = br#"{"code":"PRODUCT_NOT_FOUND","message":"Product pdt_gone does not exist"}"#;
    let server = dodo_answering_checkouts(422, refusal.to_vec()).await;
    let request = checkout_request(plan("one_time", "9.99", Some("pdt_gone")), "ord_1");
    let error = gateway(&server.uri())
        .create_checkout(&request)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(m) if m.contains("PRODUCT_NOT_FOUND") && m.contains("does not exist")),
        "{error:?}"
    );
}

async fn query(session: serde_json::Value, payment: Option<Vec<u8>>) -> PaymentStatus {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/checkouts/cks_0Nf3xQk7Lm2PzR9s"))
        .and(bearer_token(API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(session))
        .expect(1)
        .mount(&server)
        .await;
    if let Some(payment) = payment {
        Mock::given(method("GET"))
            .and(path("/payments/pay_2Gh5jK8lZ1xC4vBn"))
            .and(bearer_token(API_KEY))
            .respond_with(ResponseTemplate::new(200).set_body_raw(payment, "application/json"))
            .expect(1)
            .mount(&server)
            .await;
    }
    let reference = PaymentRef {
        order_id: OrderId::new("ord_01JHDODO01").unwrap(),
        provider_reference: Some("cks_0Nf3xQk7Lm2PzR9s".into()),
    };
    gateway(&server.uri())
        .query_payment(&reference)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_queried_session_is_pending_until_its_payment_succeeds_and_then_paid_its_amount() {
    let collecting = serde_json::json!({"id": "cks_0Nf3xQk7Lm2PzR9s", "created_at": "2025-01-15T10:29:00Z",
        "payment_id": null, "payment_status": null});
    assert_eq!(query(collecting, None).await, PaymentStatus::Pending);

    let paid = serde_json::json!({"id": "cks_0Nf3xQk7Lm2PzR9s", "created_at": "2025-01-15T10:29:00Z",
        "payment_id": "pay_2Gh5jK8lZ1xC4vBn", "payment_status": "succeeded"});
    assert_eq!(
        query(paid, Some(fixture("payment.refunded.response.json"))).await,
        PaymentStatus::Succeeded {
            amount: usd(999),
            paid_at: time("2025-01-18T12:00:05Z")
        }
    );
}

#[tokio::test]
async fn closing_a_payment_is_not_in_dodos_api() {
    let reference = PaymentRef {
        order_id: OrderId::new("ord_1").unwrap(),
        provider_reference: Some("cks_1".into()),
    };
    let result = gateway("http://unused.invalid")
        .close_payment(&reference)
        .await;
    assert!(matches!(result, Err(GatewayError::NotSupported)));
}

#[tokio::test]
async fn cancelling_a_subscription_patches_it_to_end_at_the_next_billing_date() {
    let server = MockServer::start().await;
    let mut subscription: serde_json::Value =
        serde_json::from_slice(&fixture("subscription.active.json")).unwrap();
    subscription["data"]["cancel_at_next_billing_date"] = true.into();
    Mock::given(method("PATCH"))
        .and(path("/subscriptions/sub_6Kl9nO2pD5bG8zFr"))
        .and(bearer_token(API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(subscription["data"].clone()))
        .expect(1)
        .mount(&server)
        .await;

    gateway(&server.uri())
        .cancel_subscription("sub_6Kl9nO2pD5bG8zFr")
        .await
        .unwrap();

    assert_eq!(
        only_json_body(&server).await,
        serde_json::json!({"cancel_at_next_billing_date": true})
    );
}

// ---------------------------------------------------------------------------------------------
// Webhook verification

#[tokio::test]
async fn the_standard_webhooks_specs_published_vector_verifies() {
    // From the spec's reference libraries: secret, id, timestamp, payload and signature.
    let body = br#"{"test": 2432232314}"#.to_vec();
    let headers = [
        ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
        ("webhook-timestamp", "1614265330"),
        (
            "webhook-signature",
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        ),
    ];
    let gateway = gateway_with(
        "http://unused.invalid",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        1_614_265_330,
    );
    // The signature verifies; the body is no Dodo webhook, which is only checked afterwards.
    let verified = gateway
        .verify_webhook(&webhook(body.clone(), &headers))
        .await;
    assert!(
        matches!(verified, Err(WebhookError::Malformed(_))),
        "{verified:?}"
    );
    let mut tampered = body;
    tampered[2] = b'T';
    let refused = gateway.verify_webhook(&webhook(tampered, &headers)).await;
    assert_eq!(refused.unwrap_err(), WebhookError::BadSignature);
}

#[tokio::test]
async fn a_signature_computed_independently_with_openssl_verifies() {
    // printf 'msg_2mXq8Yc1Vt0bLp5N.1737016202.' | cat - payment.succeeded.json \
    //   | openssl dgst -sha256 -mac HMAC -macopt hexkey:<hex of the key> -binary | base64
    let expected = "v1,WI90duEh/9o0mY/qRO/l+NRmiaa1CC77cnWtrm/YUCE=";
    let body = fixture("payment.succeeded.json");
    assert_eq!(signature(KEY, MSG_ID, NOW_S, &body), expected);
    let request = webhook(
        body,
        &[
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", "1737016202"),
            ("webhook-signature", expected),
        ],
    );
    let verified = gateway("http://unused.invalid")
        .verify_webhook(&request)
        .await
        .unwrap();
    assert_eq!(verified.event_id, MSG_ID);
    assert_eq!(verified.event_type, "payment.succeeded");
}

#[tokio::test]
async fn a_tampered_body_or_a_changed_id_is_refused() {
    let mut request = signed_webhook("payment.succeeded.json");
    let at = request.body.windows(3).position(|w| w == b"999").unwrap();
    request.body[at] = b'1';
    assert_eq!(
        gateway("http://unused.invalid")
            .verify_webhook(&request)
            .await
            .unwrap_err(),
        WebhookError::BadSignature
    );
    let mut request = signed_webhook("payment.succeeded.json");
    request
        .headers
        .insert("webhook-id".into(), "msg_replayed".into());
    assert_eq!(
        gateway("http://unused.invalid")
            .verify_webhook(&request)
            .await
            .unwrap_err(),
        WebhookError::BadSignature
    );
}

#[tokio::test]
async fn a_signature_keyed_with_the_secret_string_instead_of_its_decoded_bytes_is_refused() {
    let body = fixture("payment.succeeded.json");
    let wrong = signature(WEBHOOK_SECRET.as_bytes(), MSG_ID, NOW_S, &body);
    let request = webhook(
        body,
        &[
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &NOW_S.to_string()),
            ("webhook-signature", &wrong),
        ],
    );
    assert_eq!(
        gateway("http://unused.invalid")
            .verify_webhook(&request)
            .await
            .unwrap_err(),
        WebhookError::BadSignature
    );
}

#[tokio::test]
async fn a_timestamp_more_than_five_minutes_old_or_ahead_is_stale() {
    let request = signed_webhook("payment.succeeded.json");
    let late = gateway_with("http://unused.invalid", WEBHOOK_SECRET, NOW_S + 301)
        .verify_webhook(&request)
        .await;
    assert_eq!(late.unwrap_err(), WebhookError::Stale);
    let early = gateway_with("http://unused.invalid", WEBHOOK_SECRET, NOW_S - 301)
        .verify_webhook(&request)
        .await;
    assert_eq!(early.unwrap_err(), WebhookError::Stale);
}

#[tokio::test]
async fn missing_or_malformed_webhook_headers_are_refused_as_missing() {
    let body = fixture("payment.succeeded.json");
    let good = signature(KEY, MSG_ID, NOW_S, &body);
    let t = NOW_S.to_string();
    let gateway = gateway("http://unused.invalid");
    let cases: Vec<Vec<(&str, &str)>> = vec![
        vec![("webhook-timestamp", &t), ("webhook-signature", &good)],
        vec![("webhook-id", MSG_ID), ("webhook-signature", &good)],
        vec![("webhook-id", MSG_ID), ("webhook-timestamp", &t)],
        vec![
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", "hello"),
            ("webhook-signature", &good),
        ],
        vec![
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &t),
            ("webhook-signature", "v1,***not base64***"),
        ],
        vec![
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &t),
            (
                "webhook-signature",
                "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            ),
        ],
    ];
    for headers in cases {
        let result = gateway
            .verify_webhook(&webhook(body.clone(), &headers))
            .await;
        assert_eq!(
            result.unwrap_err(),
            WebhookError::MissingSignature,
            "{headers:?}"
        );
    }
}

#[tokio::test]
async fn during_secret_rotation_any_v1_signature_may_match() {
    let body = fixture("payment.succeeded.json");
    let old = signature(b"the previous key", MSG_ID, NOW_S, &body);
    let new = signature(KEY, MSG_ID, NOW_S, &body);
    let all =
        format!("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= {old} v1a,c2lnbmF0dXJl {new}");
    let request = webhook(
        body,
        &[
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &NOW_S.to_string()),
            ("webhook-signature", &all),
        ],
    );
    assert!(
        gateway("http://unused.invalid")
            .verify_webhook(&request)
            .await
            .is_ok()
    );
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
async fn a_succeeded_payment_is_a_payment_of_its_total_for_our_order() {
    assert_eq!(
        events_of("payment.succeeded.json").await,
        vec![PaymentEvent::PaymentSucceeded {
            order: OrderLocator {
                order_id: order_id("ord_01JHDODO01"),
                provider_reference: Some("cks_0Nf3xQk7Lm2PzR9s".into())
            },
            amount: usd(999),
            occurred_at: time("2025-01-15T10:30:02.481913Z"),
        }]
    );
}

#[tokio::test]
async fn tax_the_merchant_of_record_added_on_top_is_not_counted_as_paid_for_the_plan() {
    let events = events_of("payment.succeeded.tax_added.json").await;
    assert!(
        matches!(&events[..], [PaymentEvent::PaymentSucceeded { amount, .. }]
        if *amount == Money::from_minor(4900, Currency::Eur).unwrap())
    );
}

#[tokio::test]
async fn a_subscription_charge_is_reported_by_the_subscription_events_instead() {
    assert_eq!(
        events_of("payment.succeeded.subscription.json").await,
        vec![]
    );
}

#[tokio::test]
async fn a_failed_payment_fails_the_order_with_dodos_reason() {
    let events = events_of("payment.failed.json").await;
    assert!(
        matches!(&events[..], [PaymentEvent::PaymentFailed { order, reason, .. }]
        if order.order_id == order_id("ord_01JHDODOF1")
            && reason == "The card has insufficient funds to complete the purchase"),
        "{events:?}"
    );
}

/// A Dodo that lists the subscription's payments (`GET /payments?subscription_id=…`).
async fn dodo_listing_subscription_payments() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/payments"))
        .and(bearer_token(API_KEY))
        .and(query_param("subscription_id", SUBSCRIPTION))
        .and(query_param("status", "succeeded"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            fixture("payments.list.subscription.json"),
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    server
}

async fn events_with(server: &MockServer, name: &str) -> Vec<PaymentEvent> {
    gateway(&server.uri())
        .verify_webhook(&signed_webhook(name))
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn an_active_subscription_is_activated_with_its_first_payment_as_the_charge() {
    let server = dodo_listing_subscription_payments().await;
    assert_eq!(
        events_with(&server, "subscription.active.json").await,
        vec![PaymentEvent::SubscriptionActivated {
            order: OrderLocator {
                order_id: order_id("ord_01JHDODOS1"),
                provider_reference: None
            },
            provider_subscription_id: SUBSCRIPTION.into(),
            period: BillingPeriod::new(time("2025-01-20T08:59:41Z"), time("2025-02-20T08:59:41Z"))
                .unwrap(),
            amount: Some(usd(1900)),
            // The payment of `payment.succeeded.subscription.json`, a second before the period.
            charge_ref: Some(FIRST_CHARGE.into()),
            occurred_at: time("2025-01-20T09:00:04.12Z"),
        }]
    );
    let requests = server.received_requests().await.unwrap();
    let query: BTreeMap<String, String> = requests[0].url.query_pairs().into_owned().collect();
    assert_eq!(
        query.get("created_at_gte").map(String::as_str),
        Some("2025-01-19T08:59:41.000Z")
    );
    assert_eq!(
        query.get("created_at_lte").map(String::as_str),
        Some("2025-02-20T08:59:41.000Z")
    );
}

#[tokio::test]
async fn a_renewed_subscription_is_renewed_with_the_payment_of_the_new_period_as_the_charge() {
    let server = dodo_listing_subscription_payments().await;
    assert_eq!(
        events_with(&server, "subscription.renewed.json").await,
        vec![PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: SUBSCRIPTION.into(),
            period: BillingPeriod::new(time("2025-02-20T08:59:41Z"), time("2025-03-20T08:59:41Z"))
                .unwrap(),
            amount: usd(1900),
            charge_ref: Some(RENEWAL_CHARGE.into()),
            occurred_at: time("2025-02-20T09:00:12.4Z"),
        }]
    );
}

#[tokio::test]
async fn a_period_without_a_payment_names_no_charge() {
    // A free trial: the subscription is active, nothing was charged.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/payments"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(r#"{"items":[]}"#, "application/json"),
        )
        .mount(&server)
        .await;
    let events = events_with(&server, "subscription.active.json").await;
    assert!(
        matches!(
            &events[..],
            [PaymentEvent::SubscriptionActivated {
                charge_ref: None,
                ..
            }]
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_period_whose_payments_cannot_be_read_is_refused_so_that_dodo_retries() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/payments"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let result = gateway(&server.uri())
        .verify_webhook(&signed_webhook("subscription.renewed.json"))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_subscription_on_hold_is_past_due_and_one_that_failed_to_start_fails_its_order() {
    assert_eq!(
        events_of("subscription.on_hold.json").await,
        vec![PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: "sub_6Kl9nO2pD5bG8zFr".into(),
            occurred_at: time("2025-03-20T09:00:20Z"),
        }]
    );
    let failed = events_of("subscription.failed.json").await;
    assert!(
        matches!(&failed[..], [PaymentEvent::PaymentFailed { order, .. }] if order.order_id == order_id("ord_01JHDODOS1"))
    );
}

#[tokio::test]
async fn a_cancellation_at_the_next_billing_date_is_scheduled_and_an_immediate_one_ends_it() {
    assert_eq!(
        events_of("subscription.cancelled.at_period_end.json").await,
        vec![PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: "sub_6Kl9nO2pD5bG8zFr".into(),
            occurred_at: time("2025-02-25T14:10:00Z"),
        }]
    );
    assert_eq!(
        events_of("subscription.cancelled.json").await,
        vec![PaymentEvent::SubscriptionCanceled {
            provider_subscription_id: "sub_6Kl9nO2pD5bG8zFr".into(),
            occurred_at: time("2025-02-26T16:45:30Z"),
        }]
    );
}

#[tokio::test]
async fn an_expired_subscription_expires() {
    assert_eq!(
        events_of("subscription.expired.json").await,
        vec![PaymentEvent::SubscriptionExpired {
            provider_subscription_id: "sub_6Kl9nO2pD5bG8zFr".into(),
            occurred_at: time("2025-03-20T09:00:00.5Z"),
        }]
    );
}

async fn dodo_serving_payment(id: &str, fixture_name: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/payments/{id}")))
        .and(bearer_token(API_KEY))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(fixture(fixture_name), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_refund_of_a_one_time_payment_is_one_refund_of_our_order() {
    let server =
        dodo_serving_payment("pay_2Gh5jK8lZ1xC4vBn", "payment.refunded.response.json").await;
    assert_eq!(
        events_with(&server, "refund.succeeded.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: order_id("ord_01JHDODO01"),
                provider_reference: Some("cks_0Nf3xQk7Lm2PzR9s".into())
            }),
            // The refund carries its own amount, not the payment's running total.
            refund: RefundReport::One {
                refund_id: "ref_6Lm0oP3qE6cH9aGs".into(),
                amount: usd(300),
            },
            occurred_at: time("2025-01-18T12:00:05.7Z"),
        }]
    );
}

#[tokio::test]
async fn a_refund_of_a_renewal_names_the_payment_its_renewal_event_carried() {
    let server = dodo_serving_payment(RENEWAL_CHARGE, "payment.renewal.response.json").await;
    assert_eq!(
        events_with(&server, "refund.succeeded.renewal.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(SUBSCRIPTION.into()),
                charge_ref: RENEWAL_CHARGE.into(),
            },
            refund: RefundReport::One {
                refund_id: "ref_8Np2rS5tG8eJ1cIu".into(),
                amount: usd(950),
            },
            occurred_at: time("2025-02-22T10:00:05.3Z"),
        }]
    );
}

#[tokio::test]
async fn a_refund_of_a_payment_with_tax_on_top_is_counted_on_the_price_basis() {
    // 1199 charged for a 999 price (200 tax): refunding all of it refunds the whole price.
    let mut payment: serde_json::Value =
        serde_json::from_slice(&fixture("payment.refunded.response.json")).unwrap();
    payment["total_amount"] = 1199.into();
    payment["tax"] = 200.into();
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/payments/pay_2Gh5jK8lZ1xC4vBn"))
        .respond_with(ResponseTemplate::new(200).set_body_json(payment))
        .mount(&server)
        .await;
    let mut refund: serde_json::Value =
        serde_json::from_slice(&fixture("refund.succeeded.json")).unwrap();
    refund["data"]["amount"] = 1199.into();
    let body = serde_json::to_vec(&refund).unwrap();
    let sig = signature(KEY, MSG_ID, NOW_S, &body);
    let request = webhook(
        body,
        &[
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &NOW_S.to_string()),
            ("webhook-signature", &sig),
        ],
    );
    let events = gateway(&server.uri())
        .verify_webhook(&request)
        .await
        .unwrap()
        .events;
    assert!(
        matches!(&events[..], [PaymentEvent::Refunded { refund: RefundReport::One { amount, .. }, .. }] if *amount == usd(999)),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_lost_dispute_takes_back_the_whole_disputed_payment() {
    let server = dodo_serving_payment(RENEWAL_CHARGE, "payment.renewal.response.json").await;
    assert_eq!(
        events_with(&server, "dispute.lost.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(SUBSCRIPTION.into()),
                charge_ref: RENEWAL_CHARGE.into(),
            },
            refund: RefundReport::DisputeLost {
                dispute_id: "dsp_3Kd8fW2qZ7yB5xVc".into(),
            },
            occurred_at: time("2025-03-10T15:20:00Z"),
        }]
    );
}

#[tokio::test]
async fn a_refund_whose_payment_cannot_be_read_is_refused_so_that_dodo_retries() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/payments/pay_2Gh5jK8lZ1xC4vBn"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let result = gateway(&server.uri())
        .verify_webhook(&signed_webhook("refund.succeeded.json"))
        .await;
    assert!(matches!(result, Err(WebhookError::Malformed(_))));
}

#[tokio::test]
async fn an_event_type_tally_does_not_handle_verifies_with_no_events() {
    let verified = gateway("http://unused.invalid")
        .verify_webhook(&signed_webhook("license_key.created.json"))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "license_key.created");
    assert!(verified.events.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Settings and acknowledgements

#[test]
fn test_mode_picks_dodos_test_api_and_settings_never_print_secrets() {
    let settings: MorBSettings = serde_json::from_value(serde_json::json!({
        "apiKey": API_KEY, "webhookSecret": WEBHOOK_SECRET, "testMode": true}))
    .unwrap();
    assert_eq!(settings.http().base_url, "https://test.dodopayments.com");
    let live: MorBSettings = serde_json::from_value(
        serde_json::json!({"apiKey": API_KEY, "webhookSecret": WEBHOOK_SECRET}),
    )
    .unwrap();
    assert_eq!(live.http().base_url, "https://live.dodopayments.com");
    let printed = format!("{settings:?}");
    assert!(
        !printed.contains(API_KEY) && !printed.contains("whsec_"),
        "{printed}"
    );
    let unknown = serde_json::from_value::<MorBSettings>(serde_json::json!({
        "apiKey": API_KEY, "webhookSecret": WEBHOOK_SECRET, "environment": "test_mode"}));
    assert!(unknown.is_err());
}

#[test]
fn a_webhook_secret_that_is_not_base64_is_a_configuration_error() {
    let context = support::context(
        &gateways::HttpSettings::new("http://unused.invalid"),
        0,
        false,
    );
    let settings = MorBSettings::new(API_KEY, "whsec_***", None);
    let error = MorBGateway::new(&settings, context).unwrap_err();
    assert_eq!(error.field, "webhookSecret");
    assert_eq!(
        unb64("dGFsbHktdGVzdC1zdGFuZGFyZC13ZWJob29rcy1rZXk=").unwrap(),
        KEY
    );
}

#[tokio::test]
async fn only_an_on_demand_product_keeps_methods_and_it_must_be_an_id() {
    let context = || {
        support::context(
            &gateways::HttpSettings::new("http://unused.invalid"),
            0,
            false,
        )
    };
    let mut settings = MorBSettings::new(API_KEY, WEBHOOK_SECRET, None);
    let without = MorBGateway::new(&settings, context()).unwrap();
    assert!(!without.saves_methods());
    let mut consented = checkout_request(plan("credits", "5.00", Some("pdt_pack")), "ord_keep");
    consented.save_method = true;
    assert!(matches!(
        without.create_checkout(&consented).await,
        Err(GatewayError::Rejected(_))
    ));
    settings.on_demand_product_id = Some("pdt_on_demand".into());
    assert!(
        MorBGateway::new(&settings, context())
            .unwrap()
            .saves_methods()
    );
    settings.on_demand_product_id = Some("pdt/../refunds".into());
    let error = MorBGateway::new(&settings, context()).unwrap_err();
    assert_eq!(error.field, "onDemandProductId");
}

#[test]
fn accepted_webhooks_get_200_and_refused_ones_400_with_a_short_reason() {
    let gateway = gateway("http://unused.invalid");
    assert_eq!(gateway.provider(), ProviderId::MorB);
    assert_eq!(
        gateway.webhook_ack(&AckFor::Accepted).verdict,
        application::ports::AckVerdict::Accepted
    );
    let refused = gateway.webhook_ack(&AckFor::Refused(WebhookError::Stale));
    assert_eq!(refused.verdict, application::ports::AckVerdict::Refused);
    assert_eq!(refused.body, "timestamp outside the tolerance window");
}

// ---------------------------------------------------------------------------------------------
// Refunds through Dodo's API

const SESSION: &str = "cks_0Nf3xQk7Lm2PzR9s";
const PAYMENT: &str = "pay_2Gh5jK8lZ1xC4vBn";

fn refund_request(refund_id: &str, amount: i64) -> RefundRequest {
    RefundRequest {
        payment: PaymentRef {
            order_id: OrderId::new("ord_01JHDODO01").unwrap(),
            provider_reference: Some(SESSION.into()),
        },
        refund_id: refund_id.into(),
        amount: usd(amount),
        paid: usd(999),
        reason: "requested by the buyer".into(),
        notify_url: "https://tally.example/api/payment/webhook/mor_b".into(),
    }
}

/// The paid lifetime order's payment, with `refunds` replaced.
fn paid_payment(refunds: serde_json::Value) -> serde_json::Value {
    let mut payment: serde_json::Value =
        serde_json::from_slice(&fixture("payment.refunded.response.json")).unwrap();
    payment["refunds"] = refunds;
    payment
}

fn dodo_refund(id: &str, status: &str, amount: i64) -> serde_json::Value {
    serde_json::json!({
        "business_id": "bus_5sQ8vN2kL0pXyT7h", "created_at": "2025-01-19T09:00:00Z",
        "customer": { "customer_id": "cus_8Rw1tY4uI6oP2aSd", "email": "buyer@example.com", "name": "Ada Buyer" },
        "is_partial": true, "metadata": {}, "payment_id": PAYMENT, "refund_id": id,
        "status": status, "amount": amount, "currency": "USD", "reason": "requested by the buyer"
    })
}

/// Dodo with the order's session, its payment `payment`, and `POST /refunds` answering
/// `answer` (`expected` times).
async fn dodo_refunding(
    payment: serde_json::Value,
    answer: ResponseTemplate,
    expected: u64,
) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/checkouts/{SESSION}")))
        .and(bearer_token(API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": SESSION, "created_at": "2025-01-15T10:29:00Z",
            "payment_id": PAYMENT, "payment_status": "succeeded"})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/payments/{PAYMENT}")))
        .and(bearer_token(API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(payment))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/refunds"))
        .and(bearer_token(API_KEY))
        .respond_with(answer)
        .expect(expected)
        .mount(&server)
        .await;
    server
}

async fn refund_body(server: &MockServer) -> serde_json::Value {
    let requests = server.received_requests().await.unwrap();
    let posted: Vec<_> = requests
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .collect();
    assert_eq!(posted.len(), 1);
    assert_eq!(
        posted[0]
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    serde_json::from_slice(&posted[0].body).unwrap()
}

#[tokio::test]
async fn a_partial_refund_names_the_product_and_amount_and_carries_our_refund_id() {
    let server = dodo_refunding(
        paid_payment(serde_json::json!([])),
        ResponseTemplate::new(200).set_body_json(dodo_refund("ref_New0000000001", "pending", 300)),
        1,
    )
    .await;
    let started = gateway(&server.uri())
        .refund(&refund_request("rf_ord_01JHDODO01_300", 300))
        .await
        .unwrap();
    assert_eq!(
        started,
        RefundStarted {
            provider_refund_id: Some("ref_New0000000001".into()),
            state: RefundState::Pending,
        }
    );
    assert_eq!(
        refund_body(&server).await,
        serde_json::json!({
            "payment_id": PAYMENT,
            "items": [{ "item_id": "pdt_Lifetime0USD", "amount": 300, "tax_inclusive": true }],
            "reason": "requested by the buyer",
            "metadata": { "tallyRefundId": "rf_ord_01JHDODO01_300", "orderId": "ord_01JHDODO01" }
        })
    );
}

#[tokio::test]
async fn the_whole_unrefunded_price_is_a_full_refund_and_a_succeeded_answer_is_done() {
    let server = dodo_refunding(
        paid_payment(serde_json::json!([])),
        ResponseTemplate::new(200).set_body_json(dodo_refund(
            "ref_Full000000001",
            "succeeded",
            999,
        )),
        1,
    )
    .await;
    let started = gateway(&server.uri())
        .refund(&refund_request("rf_full", 999))
        .await
        .unwrap();
    assert_eq!(
        started.provider_refund_id.as_deref(),
        Some("ref_Full000000001")
    );
    assert_eq!(started.state, RefundState::Succeeded);
    let body = refund_body(&server).await;
    assert_eq!(body.get("items"), None, "{body}");
    assert_eq!(body["payment_id"], PAYMENT);
}

#[tokio::test]
async fn the_rest_after_an_earlier_refund_is_partial() {
    // The fixture's payment already has 500 refunded (200 + 300; the 100 failed).
    let server = dodo_refunding(
        fixture_json("payment.refunded.response.json"),
        ResponseTemplate::new(200).set_body_json(dodo_refund(
            "ref_Rest000000001",
            "succeeded",
            499,
        )),
        1,
    )
    .await;
    gateway(&server.uri())
        .refund(&refund_request("rf_rest", 499))
        .await
        .unwrap();
    assert_eq!(
        refund_body(&server).await["items"],
        serde_json::json!([{ "item_id": "pdt_Lifetime0USD", "amount": 499, "tax_inclusive": true }])
    );
}

fn fixture_json(name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

#[tokio::test]
async fn with_tax_on_top_the_amount_asked_is_what_was_charged_for_that_part_of_the_price() {
    // 1199 charged for the 999 price: 500 of the price is 601 (600.1 rounded up) of the charge,
    // which Dodo's refund webhook maps back onto exactly 500.
    let mut payment = paid_payment(serde_json::json!([]));
    payment["total_amount"] = 1199.into();
    payment["tax"] = 200.into();
    let server = dodo_refunding(
        payment,
        ResponseTemplate::new(200).set_body_json(dodo_refund("ref_Tax0000000001", "pending", 601)),
        1,
    )
    .await;
    gateway(&server.uri())
        .refund(&refund_request("rf_tax", 500))
        .await
        .unwrap();
    assert_eq!(refund_body(&server).await["items"][0]["amount"], 601);
}

#[tokio::test]
async fn a_refund_dodo_already_has_for_our_refund_id_is_answered_without_asking_again() {
    let mut earlier = dodo_refund("ref_Earlier000001", "succeeded", 300);
    earlier["metadata"] =
        serde_json::json!({ "tallyRefundId": "rf_again", "orderId": "ord_01JHDODO01" });
    let server = dodo_refunding(
        paid_payment(serde_json::json!([earlier])),
        ResponseTemplate::new(200).set_body_json(dodo_refund("ref_Twice00000001", "pending", 300)),
        0,
    )
    .await;
    let started = gateway(&server.uri())
        .refund(&refund_request("rf_again", 300))
        .await
        .unwrap();
    assert_eq!(
        started,
        RefundStarted {
            provider_refund_id: Some("ref_Earlier000001".into()),
            state: RefundState::Succeeded,
        }
    );
}

#[tokio::test]
async fn a_refund_dodo_refuses_or_fails_is_reported_so() {
    let refused = dodo_refunding(
        paid_payment(serde_json::json!([])),
        ResponseTemplate::new(422).set_body_json(serde_json::json!({
            "code": "REFUND_AMOUNT_EXCEEDED", "message": "Refund amount exceeds the refundable amount"})),
        1,
    )
    .await;
    match gateway(&refused.uri())
        .refund(&refund_request("rf_x", 300))
        .await
    {
        Err(GatewayError::Rejected(message)) => {
            assert!(message.contains("REFUND_AMOUNT_EXCEEDED"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let failed = dodo_refunding(
        paid_payment(serde_json::json!([])),
        ResponseTemplate::new(200).set_body_json(dodo_refund("ref_Failed0000001", "failed", 300)),
        1,
    )
    .await;
    let started = gateway(&failed.uri())
        .refund(&refund_request("rf_y", 300))
        .await
        .unwrap();
    assert_eq!(
        started.provider_refund_id.as_deref(),
        Some("ref_Failed0000001")
    );
    assert!(matches!(started.state, RefundState::Failed(_)));
}

#[tokio::test]
async fn nothing_is_refunded_for_another_orders_payment_an_unpaid_one_too_much_or_no_product() {
    let mut other_order = paid_payment(serde_json::json!([]));
    other_order["metadata"]["orderId"] = "ord_someone_else".into();
    let mut unpaid = paid_payment(serde_json::json!([]));
    unpaid["status"] = "processing".into();
    let mut no_product = paid_payment(serde_json::json!([]));
    no_product["product_cart"] = serde_json::json!([{ "product_id": null, "quantity": 1 }]);
    for (payment, amount) in [
        (no_product, 300),
        (other_order, 300),
        (unpaid, 300),
        (paid_payment(serde_json::json!([])), 1000),
        (paid_payment(serde_json::json!([])), 0),
    ] {
        let server = dodo_refunding(
            payment,
            ResponseTemplate::new(200).set_body_json(dodo_refund("ref_No", "succeeded", 1)),
            0,
        )
        .await;
        let result = gateway(&server.uri())
            .refund(&refund_request("rf_no", amount))
            .await;
        assert!(
            matches!(result, Err(GatewayError::Rejected(_))),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn a_checkout_reference_that_is_not_an_id_never_reaches_dodo() {
    let server = MockServer::start().await;
    let mut request = refund_request("rf_z", 300);
    request.payment.provider_reference = Some("../payments/pay_1?x=".into());
    let result = gateway(&server.uri()).refund(&request).await;
    assert!(
        matches!(result, Err(GatewayError::Rejected(_))),
        "{result:?}"
    );
    request.payment.provider_reference = None;
    let result = gateway(&server.uri()).refund(&request).await;
    assert!(
        matches!(result, Err(GatewayError::Rejected(_))),
        "{result:?}"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Merchant isolation and the timestamp window's edges

fn gateway_of_business(base_url: &str, business_id: Option<&str>) -> MorBGateway {
    let mut settings = MorBSettings::new(API_KEY, WEBHOOK_SECRET, Some(base_url.to_owned()));
    settings.business_id = business_id.map(str::to_owned);
    let context = support::context(&settings.http(), NOW_S * 1000, false);
    MorBGateway::new(&settings, context).unwrap()
}

#[tokio::test]
async fn another_business_refund_is_foreign_refunds_nothing_and_reads_nothing_from_dodo() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let verified = gateway_of_business(&server.uri(), Some("bus_Ours00000000000"))
        .verify_webhook(&signed_webhook("refund.succeeded.json"))
        .await
        .unwrap();
    assert!(verified.events.is_empty());
    let why = verified
        .foreign
        .expect("another business's refund is foreign");
    assert!(why.contains("bus_5sQ8vN2kL0pXyT7h"), "{why}");
    let payment = gateway_of_business(&server.uri(), Some("bus_Ours00000000000"))
        .verify_webhook(&signed_webhook("payment.succeeded.json"))
        .await
        .unwrap();
    assert!(payment.events.is_empty() && payment.foreign.is_some());
}

#[tokio::test]
async fn our_business_events_are_ours_and_without_a_business_id_every_business_is() {
    for business in [Some("bus_5sQ8vN2kL0pXyT7h"), None] {
        let verified = gateway_of_business("http://unused.invalid", business)
            .verify_webhook(&signed_webhook("payment.succeeded.json"))
            .await
            .unwrap();
        assert_eq!(verified.foreign, None);
        assert_eq!(verified.events.len(), 1, "{business:?}");
    }
    let mut body = fixture_json("payment.succeeded.json");
    body.as_object_mut().unwrap().remove("business_id");
    let body = serde_json::to_vec(&body).unwrap();
    let sig = signature(KEY, MSG_ID, NOW_S, &body);
    let request = webhook(
        body,
        &[
            ("webhook-id", MSG_ID),
            ("webhook-timestamp", &NOW_S.to_string()),
            ("webhook-signature", &sig),
        ],
    );
    let verified = gateway_of_business("http://unused.invalid", Some("bus_5sQ8vN2kL0pXyT7h"))
        .verify_webhook(&request)
        .await
        .unwrap();
    assert!(
        verified.foreign.is_some(),
        "an event naming no business is not shown to be ours"
    );
}

#[test]
fn a_business_id_that_is_not_an_id_is_a_configuration_error() {
    let mut settings = MorBSettings::new(API_KEY, WEBHOOK_SECRET, None);
    settings.business_id = Some("bus 1/..".into());
    let context = support::context(&settings.http(), 0, false);
    assert_eq!(
        MorBGateway::new(&settings, context).unwrap_err().field,
        "businessId"
    );
    let read: MorBSettings = serde_json::from_value(serde_json::json!({
        "apiKey": API_KEY, "webhookSecret": WEBHOOK_SECRET, "businessId": "bus_1"}))
    .unwrap();
    assert_eq!(read.business_id.as_deref(), Some("bus_1"));
}

#[tokio::test]
async fn five_minutes_either_way_is_accepted_to_the_second_as_standardwebhooks_floors_now() {
    let request = signed_webhook("payment.succeeded.json");
    let at = |now_ms: i64| {
        let settings = MorBSettings::new(API_KEY, WEBHOOK_SECRET, None);
        MorBGateway::new(&settings, support::context(&settings.http(), now_ms, false)).unwrap()
    };
    // `now - t > 300` is too old and `t > now + 300` too new, with now in whole seconds.
    for now_ms in [
        (NOW_S + 300) * 1000,
        (NOW_S + 300) * 1000 + 999,
        (NOW_S - 300) * 1000,
    ] {
        assert!(
            at(now_ms).verify_webhook(&request).await.is_ok(),
            "{now_ms}"
        );
    }
    for now_ms in [(NOW_S + 301) * 1000, (NOW_S - 301) * 1000 + 999] {
        assert_eq!(
            at(now_ms).verify_webhook(&request).await.unwrap_err(),
            WebhookError::Stale,
            "{now_ms}"
        );
    }
}

// --- Credential check ------------------------------------------------------------------------

#[tokio::test]
async fn a_credential_check_lists_one_product_with_the_bearer_key() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/products"))
        .and(bearer_token(API_KEY))
        .and(query_param("page_size", "1"))
        .and(query_param("page_number", "0"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            r#"{"items":[{"product_id":"pdt_1","name":"Pro","is_recurring":true}]}"#,
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;
    let check = gateway(&server.uri()).check_credentials().await.unwrap();
    // Dodo's answer names no mode; the settings name no test mode.
    assert_eq!(check.mode, CredentialMode::Live);
    assert!(check.detail.contains("/products"), "{check:?}");
}

#[tokio::test]
async fn a_credential_check_reports_dodos_refusal_without_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/products"))
        .respond_with(ResponseTemplate::new(401).set_body_raw(
            r#"{"code":"UNAUTHORIZED","message":"Invalid API key"}"#,
            "application/json",
        ))
        .mount(&server)
        .await;
    let check = gateway(&server.uri()).check_credentials().await;
    let Err(GatewayError::Rejected(why)) = check else {
        panic!("expected a refusal, got {check:?}");
    };
    assert!(
        why.contains("HTTP 401") && why.contains("UNAUTHORIZED") && why.contains("Invalid API key"),
        "{why}"
    );
    assert!(!why.contains(API_KEY), "{why}");
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
fn test_mode_is_the_flag_or_the_test_host() {
    let live = MorBSettings::new(API_KEY, WEBHOOK_SECRET, None);
    assert_eq!(live.test_mode(), None);
    let mut flag = MorBSettings::new(API_KEY, WEBHOOK_SECRET, None);
    flag.test_mode = true;
    assert_eq!(flag.test_mode().unwrap().field, "testMode");
    let host = MorBSettings::new(
        API_KEY,
        WEBHOOK_SECRET,
        Some("https://test.dodopayments.com".into()),
    );
    assert_eq!(host.test_mode().unwrap().field, "baseUrl");
}

// ---------------------------------------------------------------------------------------------
// Forgetting a saved method

fn on_demand_gateway(base_url: &str) -> MorBGateway {
    let mut settings = MorBSettings::new(API_KEY, WEBHOOK_SECRET, Some(base_url.to_owned()));
    settings.on_demand_product_id = Some("pdt_on_demand".into());
    let context = support::context(&settings.http(), NOW_S * 1000, false);
    MorBGateway::new(&settings, context).unwrap()
}

fn on_demand_method() -> application::ports::SavedMethod {
    application::ports::SavedMethod {
        customer_ref: "cus_8Vb2nM4kQ7wE1rTy".into(),
        method_ref: SUBSCRIPTION.into(),
        brand: Some("visa".into()),
        last4: Some("4242".into()),
        wallet_account: None,
    }
}

#[tokio::test]
async fn forgetting_a_method_ends_its_on_demand_subscription_at_once() {
    let server = MockServer::start().await;
    let mut subscription: serde_json::Value =
        serde_json::from_slice(&fixture("subscription.cancelled.json")).unwrap();
    Mock::given(method("PATCH"))
        .and(path(format!("/subscriptions/{SUBSCRIPTION}")))
        .and(bearer_token(API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(subscription["data"].take()))
        .expect(1)
        .mount(&server)
        .await;
    on_demand_gateway(&server.uri())
        .forget_saved_method(&on_demand_method())
        .await
        .unwrap();
    assert_eq!(
        only_json_body(&server).await,
        serde_json::json!({"status": "cancelled"})
    );
}

#[tokio::test]
async fn without_an_on_demand_product_no_method_is_forgotten_and_nothing_is_sent() {
    let server = MockServer::start().await;
    assert!(matches!(
        gateway(&server.uri())
            .forget_saved_method(&on_demand_method())
            .await,
        Err(GatewayError::NotSupported)
    ));
    assert!(server.received_requests().await.unwrap().is_empty());
}
