//! The Creem gateway against a wiremock Creem and recorded webhook payloads (`fixtures/mor_a`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::{self, eur, usd};
use application::ports::{
    AckFor, CheckoutRequest, CheckoutTarget, CredentialMode, GatewayError, OrderLocator,
    PaymentEvent, PaymentGateway, PaymentRef, PaymentStatus, RefundReport, RefundedCharge,
    WebhookError, WebhookRequest,
};
use application::testing::FixedClock;
use domain::{
    BillingPeriod, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId, ProviderRefs,
    Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::mor_a::{MorAGateway, MorASettings, PRODUCTION_BASE_URL, TEST_BASE_URL};
use gateways::shared::ProviderHttp;
use gateways::shared::signing::{hex, hmac_sha256};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const NOW_MS: i64 = 1_728_734_400_000;
const API_KEY: &str = "creem_test_abc123";
const SECRET: &str = "whsec_creem_test";
/// The transaction that paid the first period in the fixtures (`subscription_paid_first.json`).
const FIRST_CHARGE: &str = "tran_5yMaWzAl3jxuGJMCOrYWwk";
/// The transaction that paid the renewal in the fixtures (`subscription_paid_renewal.json`).
const RENEWAL_CHARGE: &str = "tran_7zNbXaBm4kyvHKNDPsZXxl";
const SUBSCRIPTION: &str = "sub_6pC2lNB6joCRQIZ1aMrTpi";

fn settings(base_url: &str) -> MorASettings {
    let mut settings = MorASettings::new(API_KEY, SECRET);
    settings.base_url = Some(base_url.to_owned());
    settings
}

fn gateway_with(settings: &MorASettings, sandbox: bool) -> MorAGateway {
    let context = support::context(&settings.http(), NOW_MS, sandbox);
    MorAGateway::new(settings, context).unwrap()
}

fn gateway(base_url: &str) -> MorAGateway {
    gateway_with(&settings(base_url), false)
}

fn plan(
    id: &str,
    duration_type: &str,
    amount: &str,
    months: Option<i64>,
    credits: Option<&str>,
) -> Plan {
    let text = PlanText {
        name: id.into(),
        description: "test plan".into(),
        duration: "month".into(),
        features: vec![],
    };
    let draft = PlanDraft {
        id: id.into(),
        provider: Some("mor_a".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("USD".into()),
        months,
        duration_type: Some(duration_type.into()),
        credits: credits.map(|c| c.parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::MorA, format!("prod_{id}")),
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
        notify_url: "https://app.example/api/payment/webhook/mor_a".into(),
        expires_at: Timestamp::from_unix_millis(NOW_MS + 1_800_000),
    }
}

fn at(text: &str) -> Timestamp {
    Timestamp::from_unix_millis(
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis(),
    )
}

fn order(id: &str, reference: Option<&str>) -> OrderLocator {
    OrderLocator {
        order_id: Some(OrderId::new(id).unwrap()),
        provider_reference: reference.map(str::to_owned),
    }
}

fn fixture(name: &str) -> Vec<u8> {
    support::fixture("mor_a", name)
}

fn signed(body: Vec<u8>, secret: &str) -> WebhookRequest {
    let signature = hex(&hmac_sha256(secret.as_bytes(), &body));
    WebhookRequest {
        headers: BTreeMap::from([("creem-signature".to_owned(), signature)]),
        body,
    }
}

async fn events_of(name: &str) -> Vec<PaymentEvent> {
    let gateway = gateway(PRODUCTION_BASE_URL);
    gateway
        .verify_webhook(&signed(fixture(name), SECRET))
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn a_checkout_posts_the_product_and_our_order_id_with_the_api_key_and_redirects() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkouts"))
        .and(header("x-api-key", API_KEY))
        .and(body_json(json!({
            "product_id": "prod_lifetime",
            "request_id": "ord_01J9ZK4M2QW",
            "success_url": "https://app.example/payment/success",
            "customer": { "email": "buyer@example.com" },
            "metadata": { "orderId": "ord_01J9ZK4M2QW", "amountMinor": "19900", "currency": "USD" }
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "ch_1", "object": "checkout", "mode": "test", "status": "pending",
            "product": "prod_lifetime", "request_id": "ord_01J9ZK4M2QW",
            "checkout_url": "https://checkout.creem.io/ch_1"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let plan = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let checkout = gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await
        .unwrap();
    assert_eq!(checkout.provider_reference.as_deref(), Some("ch_1"));
    assert_eq!(
        checkout.target,
        CheckoutTarget::Redirect("https://checkout.creem.io/ch_1".into())
    );
}

#[tokio::test]
async fn a_subscription_checkout_tells_the_sandbox_its_interval_and_webhook_url() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkouts"))
        .and(body_partial_json(json!({
            "product_id": "prod_pro_monthly",
            "metadata": {
                "orderId": "ord_01J9ZK4M2QW",
                "amountMinor": "990",
                "currency": "USD",
                "intervalMonths": "1",
                "notifyUrl": "https://app.example/api/payment/webhook/mor_a"
            }
        })))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({ "id": "ch_2", "checkout_url": "http://localhost/c/ch_2" })),
        )
        .expect(1)
        .mount(&server)
        .await;
    let plan = plan("pro_monthly", "recurring", "9.90", Some(1), None);
    let gateway = gateway_with(&settings(&server.uri()), true);
    let checkout = gateway
        .create_checkout(&checkout_request(&plan))
        .await
        .unwrap();
    assert_eq!(checkout.provider_reference.as_deref(), Some("ch_2"));
}

#[tokio::test]
async fn the_real_creem_is_not_told_the_webhook_url() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkouts"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({ "id": "ch_3", "checkout_url": "https://checkout.creem.io/ch_3" }),
        ))
        .mount(&server)
        .await;
    let plan = plan("credits_100", "credits", "5.00", None, Some("100"));
    gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await
        .unwrap();
    let sent = &server.received_requests().await.unwrap()[0];
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(
        body["metadata"],
        json!({ "orderId": "ord_01J9ZK4M2QW", "amountMinor": "500", "currency": "USD" })
    );
}

#[tokio::test]
async fn a_refused_checkout_is_rejected_with_creems_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkouts"))
        .respond_with(ResponseTemplate::new(403).set_body_json(
            json!({ "statusCode": 403, "message": ["Invalid API key"], "error": "Forbidden" }),
        ))
        .mount(&server)
        .await;
    let plan = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    match gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await
    {
        Err(GatewayError::Rejected(message)) => {
            assert!(message.contains("Invalid API key"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_checkout_answer_without_a_url_is_a_bad_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/checkouts"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "id": "ch_4" })))
        .mount(&server)
        .await;
    let plan = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let result = gateway(&server.uri())
        .create_checkout(&checkout_request(&plan))
        .await;
    assert!(
        matches!(result, Err(GatewayError::BadResponse(_))),
        "{result:?}"
    );
}

fn payment(reference: Option<&str>) -> PaymentRef {
    PaymentRef {
        order_id: OrderId::new("ord_01J9ZK4M2QW").unwrap(),
        provider_reference: reference.map(str::to_owned),
    }
}

async fn query_with(checkout: Value) -> Result<PaymentStatus, GatewayError> {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/checkouts"))
        .and(query_param("checkout_id", "ch_1"))
        .and(header("x-api-key", API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(checkout))
        .expect(1)
        .mount(&server)
        .await;
    gateway(&server.uri())
        .query_payment(&payment(Some("ch_1")))
        .await
}

#[tokio::test]
async fn a_completed_checkout_queries_as_succeeded_with_the_order_amount() {
    let status = query_with(json!({
        "id": "ch_1", "status": "completed", "request_id": "ord_01J9ZK4M2QW",
        "order": {
            "id": "ord_x",
            "amount": 19900,
            "currency": "USD",
            "status": "paid",
            "type": "onetime",
            "created_at": "2024-10-12T11:58:33.097Z",
            "updated_at": "2024-10-12T11:58:40.000Z"
        }
    }))
    .await
    .unwrap();
    assert_eq!(
        status,
        PaymentStatus::Succeeded {
            amount: usd(19900),
            paid_at: at("2024-10-12T11:58:40.000Z")
        }
    );
}

#[tokio::test]
async fn an_expired_checkout_queries_as_failed_and_an_open_one_as_pending() {
    let expired = query_with(json!({ "id": "ch_1", "status": "expired" }))
        .await
        .unwrap();
    assert!(
        matches!(expired, PaymentStatus::Failed { .. }),
        "{expired:?}"
    );
    let open = query_with(json!({ "id": "ch_1", "status": "processing" }))
        .await
        .unwrap();
    assert_eq!(open, PaymentStatus::Pending);
}

#[tokio::test]
async fn a_payment_without_a_checkout_id_cannot_be_queried_and_checkouts_cannot_be_closed() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    assert!(matches!(
        gateway.query_payment(&payment(None)).await,
        Err(GatewayError::NotSupported)
    ));
    assert!(matches!(
        gateway.close_payment(&payment(Some("ch_1"))).await,
        Err(GatewayError::NotSupported)
    ));
}

#[tokio::test]
async fn cancelling_a_subscription_schedules_it_for_the_end_of_the_paid_period() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/subscriptions/sub_6pC2lNB6joCRQIZ1aMrTpi/cancel"))
        .and(header("x-api-key", API_KEY))
        .and(body_json(
            json!({ "mode": "scheduled", "onExecute": "cancel" }),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({ "id": "sub_6pC2lNB6joCRQIZ1aMrTpi", "status": "scheduled_cancel" }),
        ))
        .expect(1)
        .mount(&server)
        .await;
    gateway(&server.uri())
        .cancel_subscription("sub_6pC2lNB6joCRQIZ1aMrTpi")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_subscription_id_that_could_escape_the_url_path_is_refused_without_a_call() {
    let server = MockServer::start().await;
    let result = gateway(&server.uri())
        .cancel_subscription("../v1/products")
        .await;
    assert!(matches!(result, Err(GatewayError::Rejected(_))));
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_webhook_verifies_against_an_hmac_computed_by_openssl() {
    // printf '%s' "$BODY" | openssl dgst -sha256 -hmac 'whsec_creem_test'
    let body = concat!(
        r#"{"id":"evt_vector","eventType":"subscription.active","#,
        r#""created_at":1728734325927,"object":{"id":"sub_1"}}"#
    )
    .as_bytes();
    let request = WebhookRequest {
        headers: BTreeMap::from([(
            "creem-signature".to_owned(),
            "abd3182bc81a4e196e8253018047f197c1df0f889e081f1da0e8af2a06806b11".to_owned(),
        )]),
        body: body.to_vec(),
    };
    let verified = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&request)
        .await
        .unwrap();
    assert_eq!(verified.event_id, "evt_vector");
    assert_eq!(verified.event_type, "subscription.active");
    assert!(verified.events.is_empty());
}

#[tokio::test]
async fn a_tampered_body_is_refused() {
    let mut request = signed(fixture("checkout_completed_onetime.json"), SECRET);
    let at = request.body.iter().position(|b| *b == b'9').unwrap();
    request.body[at] = b'1';
    let result = gateway(PRODUCTION_BASE_URL).verify_webhook(&request).await;
    assert_eq!(result, Err(WebhookError::BadSignature));
}

#[tokio::test]
async fn a_webhook_signed_with_another_secret_is_refused() {
    let request = signed(
        fixture("checkout_completed_onetime.json"),
        "whsec_someone_else",
    );
    let result = gateway(PRODUCTION_BASE_URL).verify_webhook(&request).await;
    assert_eq!(result, Err(WebhookError::BadSignature));
}

#[tokio::test]
async fn a_missing_or_malformed_signature_header_is_refused() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    let body = fixture("checkout_completed_onetime.json");
    let unsigned = WebhookRequest {
        headers: BTreeMap::new(),
        body: body.clone(),
    };
    assert_eq!(
        gateway.verify_webhook(&unsigned).await,
        Err(WebhookError::MissingSignature)
    );
    let not_hex = WebhookRequest {
        headers: BTreeMap::from([("creem-signature".to_owned(), "zz-not-hex".to_owned())]),
        body,
    };
    assert_eq!(
        gateway.verify_webhook(&not_hex).await,
        Err(WebhookError::MissingSignature)
    );
}

#[tokio::test]
async fn a_signed_body_that_is_not_an_event_is_malformed() {
    let result = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(b"[1,2,3]".to_vec(), SECRET))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_completed_one_time_checkout_is_a_payment_of_the_order_amount_for_our_order() {
    let verified = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(fixture("checkout_completed_onetime.json"), SECRET))
        .await
        .unwrap();
    assert_eq!(verified.event_id, "evt_5WHHcZPv7VS0YUsberIuOz");
    assert_eq!(verified.event_type, "checkout.completed");
    assert_eq!(
        verified.events,
        vec![PaymentEvent::PaymentSucceeded {
            order: order("ord_01J9ZK4M2QW", Some("ch_4l0N34kxo16AhRKUHFUuXr")),
            amount: usd(19900),
            occurred_at: Timestamp::from_unix_millis(1_728_734_325_927),
        }]
    );
}

#[tokio::test]
async fn a_completed_subscription_checkout_without_its_period_waits_for_the_first_paid_event() {
    assert_eq!(
        events_of("checkout_completed_subscription.json").await,
        vec![]
    );
}

#[tokio::test]
async fn a_completed_subscription_checkout_with_its_period_activates_the_subscription() {
    assert_eq!(
        events_of("checkout_completed_subscription_with_period.json").await,
        vec![PaymentEvent::SubscriptionActivated {
            order: order("ord_01J9ZK4M2QX", Some("ch_5m1N34kxo16AhRKUHFUuYs")),
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            period: BillingPeriod::new(
                at("2024-10-12T11:58:38.000Z"),
                at("2024-11-12T11:58:38.000Z")
            )
            .unwrap(),
            amount: Some(eur(1000)),
            // `order.transaction`: the first period's charge.
            charge_ref: Some(FIRST_CHARGE.into()),
            occurred_at: Timestamp::from_unix_millis(1_728_734_325_927),
        }]
    );
}

#[tokio::test]
async fn the_first_paid_subscription_event_activates_it_for_the_order_in_its_metadata() {
    assert_eq!(
        events_of("subscription_paid_first.json").await,
        vec![PaymentEvent::SubscriptionActivated {
            order: order("ord_01J9ZK4M2QX", None),
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            period: BillingPeriod::new(
                at("2024-10-12T11:58:38.000Z"),
                at("2024-11-12T11:58:38.000Z")
            )
            .unwrap(),
            amount: Some(eur(1000)),
            // `last_transaction_id`: the charge that paid the first period.
            charge_ref: Some(FIRST_CHARGE.into()),
            occurred_at: Timestamp::from_unix_millis(1_728_734_327_355),
        }]
    );
}

#[tokio::test]
async fn a_later_paid_subscription_event_renews_it_for_the_next_period() {
    assert_eq!(
        events_of("subscription_paid_renewal.json").await,
        vec![PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            period: BillingPeriod::new(
                at("2024-11-12T11:58:38.000Z"),
                at("2024-12-12T11:58:38.000Z")
            )
            .unwrap(),
            amount: eur(1000),
            charge_ref: Some(RENEWAL_CHARGE.into()),
            occurred_at: Timestamp::from_unix_millis(1_731_412_727_355),
        }]
    );
}

#[tokio::test]
async fn a_scheduled_cancellation_keeps_the_subscription_to_its_period_end() {
    assert_eq!(
        events_of("subscription_scheduled_cancel.json").await,
        vec![PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            occurred_at: Timestamp::from_unix_millis(1_728_834_337_932),
        }]
    );
}

#[tokio::test]
async fn a_canceled_subscription_ends() {
    assert_eq!(
        events_of("subscription_canceled.json").await,
        vec![PaymentEvent::SubscriptionCanceled {
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            occurred_at: Timestamp::from_unix_millis(1_731_412_718_500),
        }]
    );
}

#[tokio::test]
async fn an_expired_period_that_creem_still_retries_is_past_due() {
    assert_eq!(
        events_of("subscription_expired.json").await,
        vec![PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            occurred_at: Timestamp::from_unix_millis(1_731_412_800_000),
        }]
    );
}

#[tokio::test]
async fn an_expired_and_canceled_subscription_has_expired() {
    let mut event: Value = serde_json::from_slice(&fixture("subscription_expired.json")).unwrap();
    event["object"]["status"] = json!("canceled");
    let body = serde_json::to_vec(&event).unwrap();
    let events = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(body, SECRET))
        .await
        .unwrap()
        .events;
    assert_eq!(
        events,
        vec![PaymentEvent::SubscriptionExpired {
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            occurred_at: Timestamp::from_unix_millis(1_731_412_800_000),
        }]
    );
}

#[tokio::test]
async fn a_failed_renewal_is_past_due() {
    assert_eq!(
        events_of("subscription_past_due.json").await,
        vec![PaymentEvent::SubscriptionPastDue {
            provider_subscription_id: "sub_6pC2lNB6joCRQIZ1aMrTpi".into(),
            occurred_at: Timestamp::from_unix_millis(1_731_412_900_000),
        }]
    );
}

fn subscription_charge(charge_ref: &str) -> RefundedCharge {
    RefundedCharge::SubscriptionCharge {
        provider_subscription_id: Some(SUBSCRIPTION.into()),
        charge_ref: charge_ref.into(),
    }
}

#[tokio::test]
async fn a_full_refund_of_the_first_period_names_its_transaction_and_refunds_the_whole_price() {
    assert_eq!(
        events_of("refund_created.json").await,
        vec![PaymentEvent::Refunded {
            charge: subscription_charge(FIRST_CHARGE),
            refund: RefundReport::Total(eur(1000)),
            occurred_at: Timestamp::from_unix_millis(1_728_734_351_631),
        }]
    );
}

#[tokio::test]
async fn a_partial_refund_reports_the_running_total_on_the_price_basis() {
    assert_eq!(
        events_of("refund_created_partial.json").await,
        vec![PaymentEvent::Refunded {
            charge: subscription_charge(FIRST_CHARGE),
            refund: RefundReport::Total(eur(500)),
            occurred_at: Timestamp::from_unix_millis(1_728_734_351_631),
        }]
    );
}

#[tokio::test]
async fn a_refund_of_a_renewal_names_the_transaction_its_renewal_event_carried() {
    let renewal = events_of("subscription_paid_renewal.json").await;
    let Some(PaymentEvent::SubscriptionRenewed {
        charge_ref: Some(renewed_charge),
        ..
    }) = renewal.first()
    else {
        panic!("expected a renewal with its charge, got {renewal:?}");
    };
    assert_eq!(
        events_of("refund_created_renewal_partial.json").await,
        vec![PaymentEvent::Refunded {
            charge: subscription_charge(renewed_charge),
            refund: RefundReport::Total(eur(500)),
            occurred_at: Timestamp::from_unix_millis(1_731_499_200_000),
        }]
    );
}

#[tokio::test]
async fn a_refund_whose_transaction_has_no_running_total_is_reported_as_one_refund() {
    assert_eq!(
        events_of("refund_created_without_running_total.json").await,
        vec![PaymentEvent::Refunded {
            charge: subscription_charge(RENEWAL_CHARGE),
            refund: RefundReport::One {
                refund_id: "ref_6GE2QT".into(),
                amount: eur(500),
            },
            occurred_at: Timestamp::from_unix_millis(1_731_585_600_000),
        }]
    );
}

#[tokio::test]
async fn a_refund_of_a_one_time_payment_names_our_order() {
    assert_eq!(
        events_of("refund_created_onetime.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order(
                "ord_01J9ZK4M2QW",
                Some("ch_4l0N34kxo16AhRKUHFUuXr")
            )),
            refund: RefundReport::Total(usd(5000)),
            occurred_at: Timestamp::from_unix_millis(1_728_734_351_631),
        }]
    );
}

#[tokio::test]
async fn a_chargeback_takes_back_what_the_disputed_transaction_reports_refunded() {
    // Creem has no lost-dispute event: it refunds the charge when the dispute is opened.
    assert_eq!(
        events_of("dispute_created.json").await,
        vec![PaymentEvent::Refunded {
            charge: subscription_charge(RENEWAL_CHARGE),
            refund: RefundReport::Total(eur(1000)),
            occurred_at: Timestamp::from_unix_millis(1_731_672_000_000),
        }]
    );
}

#[tokio::test]
async fn a_dispute_that_took_nothing_back_means_nothing() {
    let mut event: Value = serde_json::from_slice(&fixture("dispute_created.json")).unwrap();
    event["object"]["transaction"]["refunded_amount"] = json!(0);
    event["object"]["transaction"]["status"] = json!("paid");
    let events = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(serde_json::to_vec(&event).unwrap(), SECRET))
        .await
        .unwrap()
        .events;
    assert_eq!(events, vec![]);
}

#[tokio::test]
async fn events_tally_does_not_handle_verify_and_mean_nothing() {
    assert_eq!(events_of("subscription_active.json").await, vec![]);
    let body =
        br#"{"id":"evt_new","eventType":"something.new","created_at":1,"object":{"weird":true}}"#;
    let body = body.to_vec();
    let verified = gateway(PRODUCTION_BASE_URL)
        .verify_webhook(&signed(body, SECRET))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "something.new");
    assert!(verified.events.is_empty());
}

#[test]
fn creem_gets_a_200_for_an_accepted_webhook_and_a_400_for_a_refused_one() {
    let gateway = gateway(PRODUCTION_BASE_URL);
    assert_eq!(
        gateway.webhook_ack(&AckFor::Accepted).verdict,
        application::ports::AckVerdict::Accepted
    );
    assert_eq!(
        gateway
            .webhook_ack(&AckFor::Refused(WebhookError::BadSignature))
            .verdict,
        application::ports::AckVerdict::Refused
    );
}

#[test]
fn settings_read_camel_case_and_pick_the_test_host_in_test_mode() {
    let settings: MorASettings = serde_json::from_value(json!({
        "apiKey": "creem_test_k",
        "webhookSecret": "s",
        "testMode": true,
        "timeoutMs": 5000
    }))
    .unwrap();
    assert_eq!(settings.http().base_url, TEST_BASE_URL);
    assert_eq!(settings.http().timeout_ms, 5000);
    let live: MorASettings =
        serde_json::from_value(json!({ "apiKey": "creem_k", "webhookSecret": "s" })).unwrap();
    assert_eq!(live.http().base_url, PRODUCTION_BASE_URL);
    let unknown = serde_json::from_value::<MorASettings>(
        json!({ "apiKey": "k", "webhookSecret": "s", "apikey": "x" }),
    );
    assert!(unknown.is_err());
}

#[test]
fn settings_never_print_their_secrets() {
    let text = format!("{:?}", settings("http://localhost"));
    assert!(!text.contains(API_KEY) && !text.contains(SECRET), "{text}");
}

#[test]
fn a_test_key_against_the_live_host_and_an_empty_secret_are_configuration_errors() {
    let clock = Arc::new(FixedClock::at(NOW_MS));
    let context = |s: &MorASettings| GatewayContext {
        http: ProviderHttp::new(&s.http()).unwrap(),
        clock: clock.clone(),
        sandbox: false,
    };
    let live = MorASettings::new(API_KEY, SECRET);
    let error = MorAGateway::new(&live, context(&live)).unwrap_err();
    assert_eq!(error.field, "apiKey");
    assert!(!error.to_string().contains(API_KEY));
    let empty = MorASettings::new("creem_k", "");
    assert_eq!(
        MorAGateway::new(&empty, context(&empty)).unwrap_err().field,
        "webhookSecret"
    );
}

// ---- Standard Webhooks ------------------------------------------------------------------------

/// A Standard Webhooks secret: `whsec_` + base64 of the key bytes.
const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn standard_gateway(now_ms: i64) -> MorAGateway {
    let mut settings = MorASettings::new(API_KEY, STANDARD_SECRET);
    settings.base_url = Some(PRODUCTION_BASE_URL.to_owned());
    let context = support::context(&settings.http(), now_ms, false);
    MorAGateway::new(&settings, context).unwrap()
}

/// Headers as Standard Webhooks signs them, computed here from the specification.
fn standard_signed(body: Vec<u8>, id: &str, timestamp_s: i64) -> WebhookRequest {
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD
        .decode(STANDARD_SECRET.trim_start_matches("whsec_"))
        .unwrap();
    let mut message = format!("{id}.{timestamp_s}.").into_bytes();
    message.extend_from_slice(&body);
    let signature = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(&key, &message));
    WebhookRequest {
        headers: BTreeMap::from([
            ("webhook-id".to_owned(), id.to_owned()),
            ("webhook-timestamp".to_owned(), timestamp_s.to_string()),
            ("webhook-signature".to_owned(), format!("v1,{signature}")),
        ]),
        body,
    }
}

#[tokio::test]
async fn the_standard_webhooks_librarys_own_vector_verifies() {
    // standardwebhooks' test vector: this id, time and body signed with STANDARD_SECRET.
    let request = WebhookRequest {
        headers: BTreeMap::from([
            (
                "webhook-id".to_owned(),
                "msg_p5jXN8AQM9LWM0D4loKWxJek".to_owned(),
            ),
            ("webhook-timestamp".to_owned(), "1614265330".to_owned()),
            (
                "webhook-signature".to_owned(),
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".to_owned(),
            ),
        ]),
        body: br#"{"test": 2432232314}"#.to_vec(),
    };
    let gateway = standard_gateway(1_614_265_330_000);
    // Verified: only then is the body read, and this one is not a Creem event.
    assert!(matches!(
        gateway.verify_webhook(&request).await,
        Err(WebhookError::Malformed(_))
    ));
    let mut tampered = request.clone();
    tampered.body = br#"{"test": 2432232315}"#.to_vec();
    assert_eq!(
        gateway.verify_webhook(&tampered).await.unwrap_err(),
        WebhookError::BadSignature
    );
}

#[tokio::test]
async fn a_creem_event_signed_with_standard_webhooks_headers_verifies_and_is_parsed() {
    let request = standard_signed(
        fixture("checkout_completed_onetime.json"),
        "msg_1",
        NOW_MS / 1000,
    );
    let verified = standard_gateway(NOW_MS)
        .verify_webhook(&request)
        .await
        .unwrap();
    assert_eq!(verified.event_type, "checkout.completed");
    assert_eq!(verified.events.len(), 1);
}

#[tokio::test]
async fn standard_webhooks_headers_are_checked_first_and_creem_signature_serves_without_them() {
    let body = fixture("checkout_completed_onetime.json");
    let gateway = standard_gateway(NOW_MS);
    // `creem-signature` alone: the HMAC of the body under the secret string.
    let legacy = signed(body.clone(), STANDARD_SECRET);
    assert!(gateway.verify_webhook(&legacy).await.is_ok());
    // Both: a valid `creem-signature` does not rescue a Standard Webhooks signature that fails.
    let mut both = standard_signed(body.clone(), "msg_1", NOW_MS / 1000);
    both.headers.insert(
        "webhook-signature".to_owned(),
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".to_owned(),
    );
    both.headers.extend(legacy.headers.clone());
    assert_eq!(
        gateway.verify_webhook(&both).await.unwrap_err(),
        WebhookError::BadSignature
    );
    // Only some of the Standard Webhooks headers: `creem-signature` decides.
    let mut partial = legacy.clone();
    partial
        .headers
        .insert("webhook-id".to_owned(), "msg_1".to_owned());
    assert!(gateway.verify_webhook(&partial).await.is_ok());
}

#[tokio::test]
async fn a_standard_webhooks_timestamp_may_be_five_minutes_off_either_way_and_no_more() {
    let body = fixture("checkout_completed_onetime.json");
    let now_s = NOW_MS / 1000;
    let gateway = standard_gateway(NOW_MS);
    for (offset, ok) in [(-300, true), (300, true), (-301, false), (301, false)] {
        let request = standard_signed(body.clone(), "msg_1", now_s + offset);
        let result = gateway.verify_webhook(&request).await;
        if ok {
            assert!(result.is_ok(), "{offset}: {result:?}");
        } else {
            assert_eq!(result.unwrap_err(), WebhookError::Stale, "{offset}");
        }
    }
}

// ---- merchant isolation: mode ----------------------------------------------------------------

fn with_mode(name: &str, mode: &str) -> Vec<u8> {
    let mut event: Value = serde_json::from_slice(&fixture(name)).unwrap();
    event["object"]["mode"] = json!(mode);
    serde_json::to_vec(&event).unwrap()
}

fn keyed_gateway(api_key: &str) -> MorAGateway {
    let mut settings = MorASettings::new(api_key, SECRET);
    settings.base_url = Some("http://unused.invalid".to_owned());
    gateway_with(&settings, false)
}

#[tokio::test]
async fn an_event_of_the_other_environment_than_the_key_is_foreign_and_changes_nothing() {
    let test = keyed_gateway(API_KEY);
    for mode in ["test", "sandbox"] {
        let ours = test
            .verify_webhook(&signed(
                with_mode("refund_created_onetime.json", mode),
                SECRET,
            ))
            .await
            .unwrap();
        assert_eq!(ours.foreign, None, "{mode}");
        assert_eq!(ours.events.len(), 1);
    }
    let live_event = test
        .verify_webhook(&signed(
            with_mode("refund_created_onetime.json", "prod"),
            SECRET,
        ))
        .await
        .unwrap();
    assert!(live_event.foreign.unwrap().contains("prod"));
    assert!(live_event.events.is_empty());
    assert_eq!(live_event.event_id, "evt_A5iXwNLYkMrJa6FUhlXmTZ");
    assert_eq!(live_event.event_type, "refund.created");

    let live = keyed_gateway("creem_live_key_1");
    let ours = live
        .verify_webhook(&signed(
            with_mode("refund_created_onetime.json", "prod"),
            SECRET,
        ))
        .await
        .unwrap();
    assert_eq!(ours.foreign, None);
    let test_event = live
        .verify_webhook(&signed(
            with_mode("refund_created_onetime.json", "test"),
            SECRET,
        ))
        .await
        .unwrap();
    assert!(test_event.foreign.is_some());
    assert!(test_event.events.is_empty());
}

#[tokio::test]
async fn a_foreign_event_is_not_resolved_through_creems_api() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let mut event: Value = serde_json::from_slice(&fixture("refund_created_onetime.json")).unwrap();
    event["object"]["checkout"] = json!("ch_4l0N34kxo16AhRKUHFUuXr");
    event["object"]["mode"] = json!("prod");
    let verified = gateway(&server.uri())
        .verify_webhook(&signed(serde_json::to_vec(&event).unwrap(), SECRET))
        .await
        .unwrap();
    assert!(verified.foreign.is_some());
}

// ---- objects given as ids, read from Creem's API ---------------------------------------------

async fn creem_serving(route: &str, query: (&str, &str), status: u16, answer: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(route))
        .and(query_param(query.0, query.1))
        .and(header("x-api-key", API_KEY))
        .respond_with(ResponseTemplate::new(status).set_body_json(answer))
        .expect(1)
        .mount(&server)
        .await;
    server
}

async fn verified_through(
    server: &MockServer,
    event: &Value,
) -> Result<Vec<PaymentEvent>, WebhookError> {
    gateway(&server.uri())
        .verify_webhook(&signed(serde_json::to_vec(event).unwrap(), SECRET))
        .await
        .map(|v| v.events)
}

#[tokio::test]
async fn a_refund_whose_checkout_is_an_id_reads_the_checkout_to_find_our_order() {
    let mut event: Value = serde_json::from_slice(&fixture("refund_created_onetime.json")).unwrap();
    event["object"]["checkout"] = json!("ch_4l0N34kxo16AhRKUHFUuXr");
    let server = creem_serving(
        "/v1/checkouts",
        ("checkout_id", "ch_4l0N34kxo16AhRKUHFUuXr"),
        200,
        json!({"id": "ch_4l0N34kxo16AhRKUHFUuXr", "object": "checkout", "mode": "test",
               "status": "completed", "product": "prod_1", "request_id": "ord_01J9ZK4M2QW",
               "metadata": {"orderId": "ord_01J9ZK4M2QW"}}),
    )
    .await;
    // The transaction names no subscription: it is read too, and says none.
    Mock::given(method("GET"))
        .and(path("/v1/transactions"))
        .and(query_param("transaction_id", "tran_8aOcYbCn5lzwILOEQtAYym"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "tran_8aOcYbCn5lzwILOEQtAYym", "object": "transaction", "mode": "test",
            "amount": 19900, "currency": "USD", "type": "payment", "status": "partialRefund",
            "refunded_amount": 5000, "order": "ord_4aDwWXjMLpes4Kj4XqNnUA",
            "created_at": 1728734327109_i64})))
        .expect(1)
        .mount(&server)
        .await;
    assert_eq!(
        verified_through(&server, &event).await.unwrap(),
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order(
                "ord_01J9ZK4M2QW",
                Some("ch_4l0N34kxo16AhRKUHFUuXr")
            )),
            refund: RefundReport::Total(usd(5000)),
            occurred_at: Timestamp::from_unix_millis(1_728_734_351_631),
        }]
    );
}

#[tokio::test]
async fn a_checkout_id_creem_cannot_find_still_names_the_order_by_its_reference() {
    let mut event: Value = serde_json::from_slice(&fixture("refund_created_onetime.json")).unwrap();
    event["object"]["checkout"] = json!("ch_4l0N34kxo16AhRKUHFUuXr");
    event["object"]["transaction"]["subscription"] = json!(null);
    event["object"]["transaction"]
        .as_object_mut()
        .unwrap()
        .remove("id");
    let server = creem_serving(
        "/v1/checkouts",
        ("checkout_id", "ch_4l0N34kxo16AhRKUHFUuXr"),
        404,
        json!({"status": 404, "error": "Not Found", "message": ["Checkout not found"]}),
    )
    .await;
    let events = verified_through(&server, &event).await.unwrap();
    let [
        PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            ..
        },
    ] = &events[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(order.order_id, None);
    assert_eq!(
        order.provider_reference.as_deref(),
        Some("ch_4l0N34kxo16AhRKUHFUuXr")
    );
}

#[tokio::test]
async fn a_refund_without_a_checkout_reads_its_transaction_to_find_the_subscription_charge() {
    let mut event: Value = serde_json::from_slice(&fixture("refund_created.json")).unwrap();
    let object = event["object"].as_object_mut().unwrap();
    object.remove("checkout");
    object.remove("subscription");
    object["transaction"]
        .as_object_mut()
        .unwrap()
        .remove("subscription");
    let server = creem_serving(
        "/v1/transactions",
        ("transaction_id", FIRST_CHARGE),
        200,
        json!({"id": FIRST_CHARGE, "object": "transaction", "mode": "test", "amount": 1000,
               "amount_paid": 1210, "currency": "EUR", "type": "invoice", "status": "refunded",
               "refunded_amount": 1210, "subscription": SUBSCRIPTION,
               "created_at": 1728734327109_i64}),
    )
    .await;
    let events = verified_through(&server, &event).await.unwrap();
    let [PaymentEvent::Refunded { charge, refund, .. }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(charge, &subscription_charge(FIRST_CHARGE));
    assert_eq!(refund, &RefundReport::Total(eur(1000)));
}

#[tokio::test]
async fn a_renewal_with_its_product_as_an_id_and_no_transaction_reads_the_transaction() {
    let mut event: Value =
        serde_json::from_slice(&fixture("subscription_paid_renewal.json")).unwrap();
    event["object"]["product"] = json!("prod_d1AY2Sadk9YAvLI0pj97f");
    let server = creem_serving(
        "/v1/transactions",
        ("transaction_id", RENEWAL_CHARGE),
        200,
        json!({"id": RENEWAL_CHARGE, "object": "transaction", "mode": "test", "amount": 900,
               "amount_paid": 1089, "currency": "EUR", "type": "invoice", "status": "paid",
               "subscription": SUBSCRIPTION, "created_at": 1731412727109_i64}),
    )
    .await;
    let events = verified_through(&server, &event).await.unwrap();
    let [
        PaymentEvent::SubscriptionRenewed {
            amount, charge_ref, ..
        },
    ] = &events[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(*amount, eur(900));
    assert_eq!(charge_ref.as_deref(), Some(RENEWAL_CHARGE));
}

#[tokio::test]
async fn a_renewal_naming_neither_transaction_nor_priced_product_reads_the_product() {
    let mut event: Value =
        serde_json::from_slice(&fixture("subscription_paid_renewal.json")).unwrap();
    event["object"]["product"] = json!("prod_d1AY2Sadk9YAvLI0pj97f");
    event["object"]
        .as_object_mut()
        .unwrap()
        .remove("last_transaction_id");
    let server = creem_serving(
        "/v1/products",
        ("product_id", "prod_d1AY2Sadk9YAvLI0pj97f"),
        200,
        json!({"id": "prod_d1AY2Sadk9YAvLI0pj97f", "object": "product", "mode": "test",
               "name": "Monthly", "price": 1000, "currency": "EUR",
               "billing_type": "recurring", "billing_period": "every-month"}),
    )
    .await;
    let events = verified_through(&server, &event).await.unwrap();
    let [PaymentEvent::SubscriptionRenewed { amount, .. }] = &events[..] else {
        panic!("{events:?}")
    };
    assert_eq!(*amount, eur(1000));
}

#[tokio::test]
async fn a_lookup_creem_cannot_answer_refuses_the_webhook_so_that_creem_retries() {
    let mut event: Value =
        serde_json::from_slice(&fixture("subscription_paid_renewal.json")).unwrap();
    event["object"]["product"] = json!("prod_d1AY2Sadk9YAvLI0pj97f");
    for status in [500, 429] {
        let server = creem_serving(
            "/v1/transactions",
            ("transaction_id", RENEWAL_CHARGE),
            status,
            json!({}),
        )
        .await;
        assert!(matches!(
            verified_through(&server, &event).await,
            Err(WebhookError::Malformed(_))
        ));
    }
}

#[tokio::test]
async fn creems_api_has_no_refund_so_a_refund_is_not_supported() {
    use application::ports::RefundRequest;
    let request = RefundRequest {
        payment: payment(Some("ch_1")),
        refund_id: "rf_1".into(),
        amount: usd(100),
        paid: usd(19900),
        reason: "requested by the buyer".into(),
        notify_url: "https://app.example/api/payment/webhook/mor_a".into(),
    };
    assert!(matches!(
        gateway("http://unused.invalid").refund(&request).await,
        Err(GatewayError::NotSupported)
    ));
}

#[tokio::test]
async fn events_that_carry_what_tally_needs_make_no_lookup() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let gateway = gateway(&server.uri());
    for name in [
        "checkout_completed_onetime.json",
        "subscription_paid_first.json",
        "subscription_paid_renewal.json",
        "refund_created.json",
        "refund_created_onetime.json",
        "refund_created_renewal_partial.json",
        "dispute_created.json",
    ] {
        let verified = gateway
            .verify_webhook(&signed(fixture(name), SECRET))
            .await
            .unwrap();
        assert!(!verified.events.is_empty(), "{name}");
    }
}

// --- Credential check ------------------------------------------------------------------------

/// A Creem answering the product search with `status` and `body` for `API_KEY`.
async fn creem_products(status: u16, body: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/products/search"))
        .and(header("x-api-key", API_KEY))
        .and(query_param("page_size", "1"))
        .respond_with(ResponseTemplate::new(status).set_body_json(body))
        .expect(1)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_credential_check_searches_one_product_and_reports_its_mode() {
    let page = |items: Value| {
        json!({ "items": items, "pagination": { "total_records": 1, "total_pages": 1,
            "current_page": 1, "next_page": null, "prev_page": null } })
    };
    let cases = [
        (
            json!([{ "id": "prod_1", "mode": "live" }]),
            CredentialMode::Live,
        ),
        (
            json!([{ "id": "prod_1", "mode": "test" }]),
            CredentialMode::Test,
        ),
        // No product yet: the test-mode key says.
        (json!([]), CredentialMode::Test),
    ];
    for (items, mode) in cases {
        let server = creem_products(200, page(items.clone())).await;
        let check = gateway(&server.uri()).check_credentials().await.unwrap();
        assert_eq!(check.mode, mode, "{items}");
        assert!(check.detail.contains("/v1/products/search"), "{check:?}");
    }
}

#[tokio::test]
async fn a_credential_check_reports_creems_refusal_without_the_key() {
    let server = creem_products(
        403,
        json!({ "status": 403, "error": "Forbidden", "message": ["Invalid API key"] }),
    )
    .await;
    let check = gateway(&server.uri()).check_credentials().await;
    let Err(GatewayError::Rejected(why)) = check else {
        panic!("expected a refusal, got {check:?}");
    };
    assert!(
        why.contains("HTTP 403") && why.contains("Forbidden") && why.contains("Invalid API key"),
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
fn test_mode_is_the_flag_a_test_key_or_the_test_host() {
    let mut live = MorASettings::new("creem_live_key", SECRET);
    assert_eq!(live.test_mode(), None);
    live.base_url = Some(PRODUCTION_BASE_URL.into());
    assert_eq!(live.test_mode(), None);
    let mut flag = MorASettings::new("creem_live_key", SECRET);
    flag.test_mode = true;
    assert_eq!(flag.test_mode().unwrap().field, "testMode");
    let key = MorASettings::new(API_KEY, SECRET);
    assert_eq!(key.test_mode().unwrap().field, "apiKey");
    let mut host = MorASettings::new("creem_live_key", SECRET);
    host.base_url = Some(TEST_BASE_URL.into());
    assert_eq!(host.test_mode().unwrap().field, "baseUrl");
}
