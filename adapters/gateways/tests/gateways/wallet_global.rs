//! The PayPal gateway (`wallet_global`) against a wiremock PayPal: OAuth, Orders v2, the
//! idempotent capture, Subscriptions v1, `verify-webhook-signature`, and the mapping of every
//! handled webhook event from recorded payloads in `fixtures/wallet_global/`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::{self, usd};
use application::ports::{
    AckFor, Checkout, CheckoutRequest, CheckoutTarget, CredentialMode, GatewayError, OrderLocator,
    PaymentEvent, PaymentGateway, PaymentRef, PaymentStatus, RefundReport, RefundRequest,
    RefundStarted, RefundState, RefundedCharge, WebhookError, WebhookRequest,
};
use application::testing::FixedClock;
use domain::{
    BillingPeriod, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::shared::http::ProviderHttp;
use gateways::shared::signing::b64;
use gateways::wallet_global::{
    CaptureOutcome, LIVE_BASE_URL, SANDBOX_BASE_URL, WalletGlobalGateway, WalletGlobalSettings,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, body_string, header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

mod vault;

/// 2024-05-01T10:00:00Z.
const NOW_MS: i64 = 1_714_557_600_000;
const TRANSMISSION_TIME: &str = "2024-05-01T09:59:59Z";
const CLIENT_ID: &str = "AZtally-client-id";
const CLIENT_SECRET: &str = "EHtally-client-secret";
const WEBHOOK_ID: &str = "8PT597110X687430LKGECATA";
const TOKEN: &str = "A21AAJtSdh1lInhuRhSzhQrp35cEQ1Ew9imFtfvQmLCMDsBGdtCClFfWOp9p5pV4p1mkaA5Ota7KvHo7lleeyWF1nE0snjKBA";
const PAYPAL_ORDER: &str = "5O190127TN364715T";
const ORDER: &str = "ord_01HZX3Q9";
const SUBSCRIPTION: &str = "I-BW452GLLEP1G";
/// The sale of `payment_sale_completed.json`: the period's `charge_ref`.
const SALE: &str = "9T2590785R617035G";

fn fixture(name: &str) -> String {
    String::from_utf8(support::fixture("wallet_global", name)).unwrap()
}

fn json_reply(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture(name), "application/json")
}

fn at(rfc3339: &str) -> Timestamp {
    gateways::wallet_global::transformers::parse_time(rfc3339).expect("test time")
}

fn order_id() -> OrderId {
    OrderId::new(ORDER).unwrap()
}

struct Harness {
    server: MockServer,
    gateway: WalletGlobalGateway,
    clock: Arc<FixedClock>,
}

/// A gateway pointed at a fresh wiremock PayPal that hands out tokens.
async fn harness() -> Harness {
    harness_for(false).await
}

/// The same, as if PayPal were the local sandbox (`sandbox`) or not.
async fn harness_for(sandbox: bool) -> Harness {
    harness_with(sandbox, None).await
}

/// The same, checking webhooks against merchant `merchant_id` when given.
async fn harness_with(sandbox: bool, merchant_id: Option<&str>) -> Harness {
    let server = MockServer::start().await;
    let basic = format!(
        "Basic {}",
        b64(format!("{CLIENT_ID}:{CLIENT_SECRET}").as_bytes())
    );
    Mock::given(method("POST"))
        .and(path("/v1/oauth2/token"))
        .and(header("authorization", basic.as_str()))
        .and(body_string("grant_type=client_credentials"))
        .respond_with(json_reply(200, "api/token.json"))
        .mount(&server)
        .await;
    let mut settings =
        WalletGlobalSettings::new(Some(server.uri()), CLIENT_ID, CLIENT_SECRET, WEBHOOK_ID);
    if let Some(merchant) = merchant_id {
        settings = settings.for_merchant(merchant);
    }
    let clock = Arc::new(FixedClock::at(NOW_MS));
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: clock.clone(),
        sandbox,
    };
    let gateway = WalletGlobalGateway::new(&settings, context).unwrap();
    Harness {
        server,
        gateway,
        clock,
    }
}

impl Harness {
    async fn requests_to(&self, wanted: &str) -> Vec<Request> {
        let all = self.server.received_requests().await.unwrap_or_default();
        all.into_iter().filter(|r| r.url.path() == wanted).collect()
    }

    async fn answer(&self, verb: &str, at_path: &str, status: u16, name: &str) {
        Mock::given(method(verb))
            .and(path(at_path))
            .respond_with(json_reply(status, name))
            .mount(&self.server)
            .await;
    }

    async fn paypal_verifies(&self, verdict: &str) {
        let name = if verdict == "SUCCESS" {
            "api/verify_success.json"
        } else {
            "api/verify_failure.json"
        };
        Mock::given(method("POST"))
            .and(path("/v1/notifications/verify-webhook-signature"))
            .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
            .and(body_partial_json(json!({ "webhook_id": WEBHOOK_ID })))
            .respond_with(json_reply(200, name))
            .mount(&self.server)
            .await;
    }

    /// Deliver a recorded webhook that PayPal vouches for; its events.
    async fn events_of(&self, webhook: &str) -> Vec<PaymentEvent> {
        let verified = self
            .gateway
            .verify_webhook(&delivery(&fixture(webhook), TRANSMISSION_TIME))
            .await;
        let verified = verified.unwrap_or_else(|e| panic!("{webhook}: {e}"));
        let envelope: Value = serde_json::from_str(&fixture(webhook)).unwrap();
        assert_eq!(verified.event_id, envelope["id"].as_str().unwrap());
        assert_eq!(
            verified.event_type,
            envelope["event_type"].as_str().unwrap()
        );
        verified.events
    }
}

fn delivery(body: &str, transmission_time: &str) -> WebhookRequest {
    let headers: BTreeMap<String, String> = [
        ("paypal-auth-algo", "SHA256withRSA"),
        ("paypal-cert-url", "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270"),
        ("paypal-transmission-id", "2c8e8ff0-8580-11ea-a15c-19af8ae2b18b"),
        ("paypal-transmission-sig", "PYtJo8DajIBjPIFrgyDJtM9Ux1TrPjN+gpxYrj7czoAHDbQcfpoC9hsjtyXP0wRcHAacR0SDLeHDM0LE7Rnaqw=="),
        ("paypal-transmission-time", transmission_time),
        ("content-type", "application/json"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    WebhookRequest {
        headers,
        body: body.as_bytes().to_vec(),
    }
}

fn plan(kind: &str, amount: &str, currency: &str) -> Plan {
    let i18n = support::english("2,000 credits (PayPal)");
    Plan::from_draft(&PlanDraft {
        id: format!("{kind}-plan"),
        provider: Some("wallet_global".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months: Some(if kind == "recurring" { 1 } else { 12 }),
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "2000".parse().unwrap()),
        provider_refs: ProviderRefs::default()
            .with(ProviderId::WalletGlobal, "P-5ML4271244454362WXNWU5NQ"),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

fn checkout_request(plan: Plan) -> CheckoutRequest {
    CheckoutRequest {
        save_method: false,
        order_id: order_id(),
        user_id: UserId::new("user_1").unwrap(),
        customer_email: Some("buyer@example.com".into()),
        customer_name: None,
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: "https://tally.example/payment/success?orderId=ord_01HZX3Q9".into(),
        cancel_url: "https://tally.example/payment/cancel?orderId=ord_01HZX3Q9".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_global".into(),
        expires_at: Timestamp::from_unix_millis(NOW_MS + 1_800_000),
    }
}

fn request_id(request: &Request) -> Option<String> {
    request
        .headers
        .get("paypal-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn order_locator() -> OrderLocator {
    OrderLocator {
        order_id: Some(order_id()),
        provider_reference: Some(PAYPAL_ORDER.into()),
    }
}

// --- OAuth ----------------------------------------------------------------------------------

#[tokio::test]
async fn an_access_token_is_fetched_with_basic_auth_and_reused_until_it_nearly_expires() {
    let h = harness().await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_payer_action_required.json",
    )
    .await;
    let payment = PaymentRef {
        order_id: order_id(),
        provider_reference: Some(PAYPAL_ORDER.into()),
    };
    assert_eq!(
        h.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Pending
    );
    assert_eq!(
        h.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Pending
    );
    assert_eq!(
        h.requests_to("/v1/oauth2/token").await.len(),
        1,
        "the second call reuses the token"
    );
    let orders = h.requests_to("/v2/checkout/orders/5O190127TN364715T").await;
    assert!(
        orders
            .iter()
            .all(|r| r.headers.get("authorization").unwrap() == format!("Bearer {TOKEN}").as_str())
    );

    // expires_in is 32400 s; the token is refreshed a minute before that.
    h.clock.advance_ms(32_400_000 - 60_000);
    h.gateway.query_payment(&payment).await.unwrap();
    assert_eq!(h.requests_to("/v1/oauth2/token").await.len(), 2);
}

#[tokio::test]
async fn a_refused_token_is_dropped_and_the_call_retried_once_with_a_new_one() {
    let h = harness().await;
    Mock::given(method("GET"))
        .and(path("/v2/checkout/orders/5O190127TN364715T"))
        .respond_with(ResponseTemplate::new(401))
        .up_to_n_times(1)
        .mount(&h.server)
        .await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_voided.json",
    )
    .await;
    let payment = PaymentRef {
        order_id: order_id(),
        provider_reference: Some(PAYPAL_ORDER.into()),
    };
    let status = h.gateway.query_payment(&payment).await.unwrap();
    assert!(matches!(status, PaymentStatus::Failed { .. }), "{status:?}");
    assert_eq!(h.requests_to("/v1/oauth2/token").await.len(), 2);
}

#[tokio::test]
async fn wrong_client_credentials_are_reported_without_any_secret() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/oauth2/token"))
        .respond_with(ResponseTemplate::new(401).set_body_raw(
            r#"{"error":"invalid_client","error_description":"Client Authentication failed"}"#,
            "application/json",
        ))
        .mount(&server)
        .await;
    let settings =
        WalletGlobalSettings::new(Some(server.uri()), CLIENT_ID, CLIENT_SECRET, WEBHOOK_ID);
    let context = support::context(&settings.http(), NOW_MS, false);
    let gateway = WalletGlobalGateway::new(&settings, context).unwrap();
    let error = gateway
        .create_checkout(&checkout_request(plan("credits", "17.99", "USD")))
        .await
        .unwrap_err();
    let GatewayError::Rejected(text) = error else {
        panic!("expected a rejection")
    };
    assert!(
        !text.contains(CLIENT_SECRET) && !text.contains(CLIENT_ID),
        "{text}"
    );
}

// --- Orders ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_credits_checkout_creates_a_paypal_order_and_redirects_to_its_payer_action_link() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header("paypal-request-id", ORDER))
        .and(header("prefer", "return=representation"))
        .and(body_partial_json(json!({
            "intent": "CAPTURE",
            "purchase_units": [{
                "reference_id": ORDER, "custom_id": ORDER, "invoice_id": ORDER,
                "description": "2,000 credits (PayPal)",
                "amount": { "currency_code": "USD", "value": "17.99" }
            }],
            "payment_source": { "paypal": { "experience_context": {
                "return_url": "https://tally.example/payment/success?orderId=ord_01HZX3Q9",
                "cancel_url": "https://tally.example/payment/cancel?orderId=ord_01HZX3Q9",
                "user_action": "PAY_NOW", "shipping_preference": "NO_SHIPPING"
            }}}
        })))
        .respond_with(json_reply(201, "api/order_created.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let checkout = h
        .gateway
        .create_checkout(&checkout_request(plan("credits", "17.99", "USD")))
        .await
        .unwrap();
    assert_eq!(
        checkout,
        Checkout {
            provider_reference: Some(PAYPAL_ORDER.into()),
            target: CheckoutTarget::Redirect(
                "https://www.paypal.com/checkoutnow?token=5O190127TN364715T".into()
            ),
        }
    );
}

#[tokio::test]
async fn a_zero_decimal_currency_is_sent_without_decimals() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders"))
        .and(body_partial_json(json!({ "purchase_units": [{ "amount": { "currency_code": "JPY", "value": "1000" } }] })))
        .respond_with(json_reply(201, "api/order_created.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    h.gateway
        .create_checkout(&checkout_request(plan("one_time", "1000", "JPY")))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_refused_order_reports_paypal_error_name_and_issue() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders",
        422,
        "api/error_order_not_approved.json",
    )
    .await;
    let error = h
        .gateway
        .create_checkout(&checkout_request(plan("credits", "17.99", "USD")))
        .await
        .unwrap_err();
    let GatewayError::Rejected(text) = error else {
        panic!("expected a rejection")
    };
    assert_eq!(
        text,
        "HTTP 422 UNPROCESSABLE_ENTITY ORDER_NOT_APPROVED (debug id a1b2c3d4e5f60)"
    );
}

#[tokio::test]
async fn two_concurrent_captures_send_one_request_id_and_report_the_same_capture() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders/5O190127TN364715T/capture"))
        .and(header("paypal-request-id", "capture-ord_01HZX3Q9"))
        .and(header("content-type", "application/json"))
        .respond_with(json_reply(201, "api/order_captured.json"))
        .expect(2)
        .mount(&h.server)
        .await;
    let id = order_id();
    let (first, second) = tokio::join!(
        h.gateway.capture_order(PAYPAL_ORDER, &id),
        h.gateway.capture_order(PAYPAL_ORDER, &id)
    );
    let expected = CaptureOutcome::Completed {
        capture_id: "3C679366HH908993F".into(),
        amount: usd(1799),
        captured_at: at("2024-05-01T09:59:30Z"),
    };
    assert_eq!(first.unwrap(), expected);
    assert_eq!(second.unwrap(), expected);
    let ids: Vec<_> = h
        .requests_to("/v2/checkout/orders/5O190127TN364715T/capture")
        .await
        .iter()
        .map(request_id)
        .collect();
    assert_eq!(ids, vec![Some("capture-ord_01HZX3Q9".to_owned()); 2]);
}

#[tokio::test]
async fn an_order_already_captured_counts_as_captured_once_the_order_is_read_back() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders/5O190127TN364715T/capture",
        422,
        "api/error_order_already_captured.json",
    )
    .await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_captured.json",
    )
    .await;
    let outcome = h
        .gateway
        .capture_order(PAYPAL_ORDER, &order_id())
        .await
        .unwrap();
    assert!(
        matches!(outcome, CaptureOutcome::Completed { amount, .. } if amount == usd(1799)),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn capturing_an_order_the_buyer_has_not_approved_is_refused() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders/5O190127TN364715T/capture",
        422,
        "api/error_order_not_approved.json",
    )
    .await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_payer_action_required.json",
    )
    .await;
    let error = h
        .gateway
        .capture_order(PAYPAL_ORDER, &order_id())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(text) if text.contains("ORDER_NOT_APPROVED")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_declined_capture_is_reported_as_declined() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders/5O190127TN364715T/capture",
        201,
        "api/order_capture_declined.json",
    )
    .await;
    let outcome = h
        .gateway
        .capture_order(PAYPAL_ORDER, &order_id())
        .await
        .unwrap();
    assert!(
        matches!(outcome, CaptureOutcome::Declined { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_capture_paypal_cannot_answer_is_an_error_that_is_safe_to_retry() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders/5O190127TN364715T/capture"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&h.server)
        .await;
    let error = h
        .gateway
        .capture_order(PAYPAL_ORDER, &order_id())
        .await
        .unwrap_err();
    assert!(matches!(error, GatewayError::Unreachable(_)), "{error:?}");
}

#[tokio::test]
async fn querying_an_approved_order_captures_it() {
    let h = harness().await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_approved.json",
    )
    .await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders/5O190127TN364715T/capture"))
        .and(header("paypal-request-id", "capture-ord_01HZX3Q9"))
        .respond_with(json_reply(201, "api/order_captured.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let payment = PaymentRef {
        order_id: order_id(),
        provider_reference: Some(PAYPAL_ORDER.into()),
    };
    assert_eq!(
        h.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Succeeded {
            amount: usd(1799),
            paid_at: at("2024-05-01T09:59:30Z")
        }
    );
}

#[tokio::test]
async fn querying_reports_captured_voided_and_unapproved_orders() {
    type Check = fn(&PaymentStatus) -> bool;
    let cases: [(&str, Check); 4] = [
        ("api/order_captured.json", |s| {
            *s == PaymentStatus::Succeeded {
                amount: usd(1799),
                paid_at: at("2024-05-01T09:59:30Z"),
            }
        }),
        ("api/order_capture_declined.json", |s| {
            matches!(s, PaymentStatus::Failed { .. })
        }),
        ("api/order_voided.json", |s| {
            matches!(s, PaymentStatus::Failed { .. })
        }),
        ("api/order_payer_action_required.json", |s| {
            *s == PaymentStatus::Pending
        }),
    ];
    for (name, expected) in cases {
        let h = harness().await;
        h.answer("GET", "/v2/checkout/orders/5O190127TN364715T", 200, name)
            .await;
        let payment = PaymentRef {
            order_id: order_id(),
            provider_reference: Some(PAYPAL_ORDER.into()),
        };
        let status = h.gateway.query_payment(&payment).await.unwrap();
        assert!(expected(&status), "{name}: {status:?}");
        assert!(
            h.requests_to("/v2/checkout/orders/5O190127TN364715T/capture")
                .await
                .is_empty(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn querying_without_a_paypal_id_is_pending_and_calls_nothing() {
    let h = harness().await;
    let payment = PaymentRef {
        order_id: order_id(),
        provider_reference: None,
    };
    assert_eq!(
        h.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Pending
    );
    assert!(
        h.server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn closing_an_order_is_not_supported_because_paypal_orders_lapse_by_themselves() {
    let h = harness().await;
    let payment = PaymentRef {
        order_id: order_id(),
        provider_reference: Some(PAYPAL_ORDER.into()),
    };
    assert!(matches!(
        h.gateway.close_payment(&payment).await,
        Err(GatewayError::NotSupported)
    ));
}

// --- Subscriptions --------------------------------------------------------------------------

#[tokio::test]
async fn a_subscription_checkout_creates_a_paypal_subscription_for_the_plan_id() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v1/billing/subscriptions"))
        .and(header("paypal-request-id", ORDER))
        .and(body_partial_json(json!({
            "plan_id": "P-5ML4271244454362WXNWU5NQ",
            "custom_id": ORDER,
            "subscriber": { "email_address": "buyer@example.com" },
            "application_context": {
                "user_action": "SUBSCRIBE_NOW",
                "return_url": "https://tally.example/payment/success?orderId=ord_01HZX3Q9",
                "cancel_url": "https://tally.example/payment/cancel?orderId=ord_01HZX3Q9"
            }
        })))
        .respond_with(json_reply(201, "api/subscription_created.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let checkout = h
        .gateway
        .create_checkout(&checkout_request(plan("recurring", "9.99", "USD")))
        .await
        .unwrap();
    assert_eq!(checkout.provider_reference.as_deref(), Some(SUBSCRIPTION));
    assert_eq!(
        checkout.target,
        CheckoutTarget::Redirect(
            "https://www.paypal.com/webapps/billing/subscriptions?ba_token=BA-2M539689T3856352J"
                .into()
        )
    );
}

#[tokio::test]
async fn only_the_local_sandbox_is_told_the_plan_price_and_interval() {
    for sandbox in [false, true] {
        let h = harness_for(sandbox).await;
        h.answer(
            "POST",
            "/v1/billing/subscriptions",
            201,
            "api/subscription_created.json",
        )
        .await;
        h.gateway
            .create_checkout(&checkout_request(plan("recurring", "9.99", "USD")))
            .await
            .unwrap();
        let sent: Value =
            serde_json::from_slice(&h.requests_to("/v1/billing/subscriptions").await[0].body)
                .unwrap();
        let expected = sandbox.then(|| {
            json!({ "billing_cycles": [{
                "sequence": 1, "total_cycles": 0,
                "pricing_scheme": { "fixed_price": { "currency_code": "USD", "value": "9.99" } },
                "frequency": { "interval_unit": "MONTH", "interval_count": 1 }
            }]})
        });
        assert_eq!(sent.get("plan").cloned(), expected, "sandbox: {sandbox}");
        assert_eq!(h.gateway.is_sandbox(), sandbox);
    }
}

#[tokio::test]
async fn querying_a_subscription_reports_its_first_payment() {
    let h = harness().await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_first_payment.json",
    )
    .await;
    let payment = PaymentRef {
        order_id: order_id(),
        provider_reference: Some(SUBSCRIPTION.into()),
    };
    assert_eq!(
        h.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Succeeded {
            amount: usd(999),
            paid_at: at("2024-05-01T09:59:10Z")
        }
    );
}

#[tokio::test]
async fn cancelling_a_subscription_posts_a_reason_and_takes_204_as_done() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v1/billing/subscriptions/I-BW452GLLEP1G/cancel"))
        .and(body_partial_json(
            json!({ "reason": "Cancelled by the subscriber" }),
        ))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&h.server)
        .await;
    h.gateway.cancel_subscription(SUBSCRIPTION).await.unwrap();
}

#[tokio::test]
async fn cancelling_a_subscription_that_is_already_cancelled_succeeds() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v1/billing/subscriptions/I-BW452GLLEP1G/cancel",
        422,
        "api/error_subscription_status_invalid.json",
    )
    .await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_cancelled.json",
    )
    .await;
    h.gateway.cancel_subscription(SUBSCRIPTION).await.unwrap();
}

#[tokio::test]
async fn cancelling_an_unknown_or_unsafe_subscription_id_fails() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v1/billing/subscriptions/I-UNKNOWN/cancel"))
        .respond_with(ResponseTemplate::new(404).set_body_raw(
            r#"{"name":"RESOURCE_NOT_FOUND","debug_id":"d1"}"#,
            "application/json",
        ))
        .mount(&h.server)
        .await;
    assert!(matches!(
        h.gateway.cancel_subscription("I-UNKNOWN").await,
        Err(GatewayError::Rejected(_))
    ));
    assert!(matches!(
        h.gateway.cancel_subscription("../v1/oauth2").await,
        Err(GatewayError::Rejected(_))
    ));
}

// --- Webhook verification -------------------------------------------------------------------

#[tokio::test]
async fn paypal_is_asked_to_verify_the_headers_the_webhook_id_and_the_raw_event() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.events_of("webhooks/customer_dispute_created.json").await;
    let calls = h
        .requests_to("/v1/notifications/verify-webhook-signature")
        .await;
    assert_eq!(calls.len(), 1);
    let sent: Value = serde_json::from_slice(&calls[0].body).unwrap();
    let raw = fixture("webhooks/customer_dispute_created.json");
    assert_eq!(sent["auth_algo"], "SHA256withRSA");
    assert_eq!(
        sent["cert_url"],
        "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270"
    );
    assert_eq!(
        sent["transmission_id"],
        "2c8e8ff0-8580-11ea-a15c-19af8ae2b18b"
    );
    assert!(
        sent["transmission_sig"]
            .as_str()
            .unwrap()
            .starts_with("PYtJo8Daj")
    );
    assert_eq!(sent["transmission_time"], TRANSMISSION_TIME);
    assert_eq!(sent["webhook_id"], WEBHOOK_ID);
    assert_eq!(
        sent["webhook_event"],
        serde_json::from_str::<Value>(&raw).unwrap()
    );
    let text = String::from_utf8(calls[0].body.clone()).unwrap();
    assert!(
        text.contains(raw.trim()),
        "the event is forwarded byte for byte"
    );
}

#[tokio::test]
async fn a_webhook_paypal_does_not_verify_is_refused_as_a_bad_signature() {
    let h = harness().await;
    h.paypal_verifies("FAILURE").await;
    let result = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/payment_capture_completed.json"),
            TRANSMISSION_TIME,
        ))
        .await;
    assert_eq!(result.unwrap_err(), WebhookError::BadSignature);
}

#[tokio::test]
async fn a_webhook_missing_any_transmission_header_is_refused_without_calling_paypal() {
    let h = harness().await;
    for missing in [
        "paypal-transmission-id",
        "paypal-transmission-time",
        "paypal-transmission-sig",
        "paypal-cert-url",
        "paypal-auth-algo",
    ] {
        let mut request = delivery(
            &fixture("webhooks/payment_capture_completed.json"),
            TRANSMISSION_TIME,
        );
        request.headers.remove(missing);
        assert_eq!(
            h.gateway.verify_webhook(&request).await.unwrap_err(),
            WebhookError::MissingSignature,
            "{missing}"
        );
    }
    let unreadable_time = delivery(
        &fixture("webhooks/payment_capture_completed.json"),
        "yesterday",
    );
    assert_eq!(
        h.gateway
            .verify_webhook(&unreadable_time)
            .await
            .unwrap_err(),
        WebhookError::MissingSignature
    );
    assert!(
        h.server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn a_transmission_more_than_five_minutes_off_is_stale_and_paypal_is_not_asked() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let body = fixture("webhooks/payment_capture_completed.json");
    for time in ["2024-05-01T09:54:59Z", "2024-05-01T10:05:01Z"] {
        assert_eq!(
            h.gateway
                .verify_webhook(&delivery(&body, time))
                .await
                .unwrap_err(),
            WebhookError::Stale,
            "{time}"
        );
    }
    assert!(
        h.server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
    for time in ["2024-05-01T09:55:00Z", "2024-05-01T10:05:00Z"] {
        assert!(
            h.gateway
                .verify_webhook(&delivery(&body, time))
                .await
                .is_ok(),
            "{time} is inside the window"
        );
    }
}

#[tokio::test]
async fn a_verification_paypal_cannot_answer_refuses_the_webhook_so_that_paypal_redelivers_it() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v1/notifications/verify-webhook-signature"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&h.server)
        .await;
    let result = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/payment_capture_completed.json"),
            TRANSMISSION_TIME,
        ))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_body_that_is_not_a_paypal_event_is_refused_before_paypal_is_asked() {
    let h = harness().await;
    for body in ["not json", "{\"hello\":1}", "[]"] {
        let result = h
            .gateway
            .verify_webhook(&delivery(body, TRANSMISSION_TIME))
            .await;
        assert!(
            matches!(result, Err(WebhookError::Malformed(_))),
            "{body}: {result:?}"
        );
    }
    assert!(
        h.requests_to("/v1/notifications/verify-webhook-signature")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn webhooks_are_acknowledged_with_200_and_refused_with_400() {
    let h = harness().await;
    assert_eq!(
        h.gateway.webhook_ack(&AckFor::Accepted).verdict,
        application::ports::AckVerdict::Accepted
    );
    assert_eq!(
        h.gateway
            .webhook_ack(&AckFor::Refused(WebhookError::BadSignature))
            .verdict,
        application::ports::AckVerdict::Refused
    );
}

// --- Event mapping --------------------------------------------------------------------------

#[tokio::test]
async fn an_approved_order_is_reported_as_approved_and_not_captured_by_the_webhook() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders/5O190127TN364715T/capture"))
        .respond_with(json_reply(201, "api/order_captured.json"))
        .expect(0)
        .mount(&h.server)
        .await;
    assert_eq!(
        h.events_of("webhooks/checkout_order_approved.json").await,
        vec![PaymentEvent::PaymentApproved {
            order: order_locator(),
            amount: usd(1799),
            occurred_at: at("2024-05-01T09:59:20Z")
        }]
    );
}

#[tokio::test]
async fn an_approval_without_our_order_id_or_a_readable_amount_is_not_an_approval_of_ours() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let mut event: Value =
        serde_json::from_str(&fixture("webhooks/checkout_order_approved.json")).unwrap();
    let unit = &mut event["resource"]["purchase_units"][0];
    unit["custom_id"] = json!("not an order id!");
    unit["reference_id"] = json!("not ours either");
    let verified = h
        .gateway
        .verify_webhook(&delivery(&event.to_string(), TRANSMISSION_TIME))
        .await
        .unwrap();
    assert_eq!(verified.events, vec![]);
    let mut event: Value =
        serde_json::from_str(&fixture("webhooks/checkout_order_approved.json")).unwrap();
    event["resource"]["purchase_units"][0]["amount"]["value"] = json!("17.999");
    let result = h
        .gateway
        .verify_webhook(&delivery(&event.to_string(), TRANSMISSION_TIME))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
    assert!(
        h.requests_to("/v2/checkout/orders/5O190127TN364715T/capture")
            .await
            .is_empty()
    );
}

fn paypal_order() -> PaymentRef {
    PaymentRef {
        order_id: order_id(),
        provider_reference: Some(PAYPAL_ORDER.into()),
    }
}

#[tokio::test]
async fn the_port_capture_captures_the_stored_paypal_order_under_the_one_request_id() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders/5O190127TN364715T/capture"))
        .and(header("paypal-request-id", "capture-ord_01HZX3Q9"))
        .respond_with(json_reply(201, "api/order_captured.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    assert_eq!(
        PaymentGateway::capture(&h.gateway, &paypal_order())
            .await
            .unwrap(),
        PaymentStatus::Succeeded {
            amount: usd(1799),
            paid_at: at("2024-05-01T09:59:30Z")
        }
    );
}

#[tokio::test]
async fn the_port_capture_reports_a_capture_another_path_made_first() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders/5O190127TN364715T/capture",
        422,
        "api/error_order_already_captured.json",
    )
    .await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_captured.json",
    )
    .await;
    let status = PaymentGateway::capture(&h.gateway, &paypal_order())
        .await
        .unwrap();
    assert!(
        matches!(status, PaymentStatus::Succeeded { amount, .. } if amount == usd(1799)),
        "{status:?}"
    );
}

#[tokio::test]
async fn the_port_capture_of_a_lapsed_order_is_refused_and_of_an_unreachable_paypal_is_retryable() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v2/checkout/orders/5O190127TN364715T/capture",
        422,
        "api/error_order_not_approved.json",
    )
    .await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_voided.json",
    )
    .await;
    let error = PaymentGateway::capture(&h.gateway, &paypal_order())
        .await
        .unwrap_err();
    assert!(matches!(error, GatewayError::Rejected(_)), "{error:?}");
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v2/checkout/orders/5O190127TN364715T/capture"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&h.server)
        .await;
    let error = PaymentGateway::capture(&h.gateway, &paypal_order())
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            GatewayError::Unreachable(_) | GatewayError::BadResponse(_)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_port_capture_refuses_subscriptions_missing_and_unsafe_ids_without_calling_paypal() {
    let h = harness().await;
    let with = |reference: Option<&str>| PaymentRef {
        order_id: order_id(),
        provider_reference: reference.map(str::to_owned),
    };
    let subscription = PaymentGateway::capture(&h.gateway, &with(Some("I-BW452GLLEP1G"))).await;
    assert!(
        matches!(subscription, Err(GatewayError::NotSupported)),
        "{subscription:?}"
    );
    for reference in [None, Some("../v1/oauth2/token"), Some("a/b"), Some("")] {
        let result = PaymentGateway::capture(&h.gateway, &with(reference)).await;
        assert!(
            matches!(result, Err(GatewayError::Rejected(_))),
            "{reference:?}: {result:?}"
        );
    }
    assert!(
        h.server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn a_completed_capture_is_a_payment_of_its_amount_for_its_custom_id() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    assert_eq!(
        h.events_of("webhooks/payment_capture_completed.json").await,
        vec![PaymentEvent::PaymentSucceeded {
            order: order_locator(),
            amount: usd(1799),
            occurred_at: at("2024-05-01T09:59:30Z")
        }]
    );
}

#[tokio::test]
async fn denied_and_declined_captures_are_failed_payments() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    for webhook in [
        "webhooks/payment_capture_denied.json",
        "webhooks/payment_capture_declined.json",
    ] {
        let events = h.events_of(webhook).await;
        assert!(
            matches!(events.as_slice(), [PaymentEvent::PaymentFailed { order, .. }] if *order == order_locator()),
            "{webhook}: {events:?}"
        );
    }
}

#[tokio::test]
async fn a_refund_reports_the_cumulative_total_for_its_custom_id() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    assert_eq!(
        h.events_of("webhooks/payment_capture_refunded_with_custom_id.json")
            .await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(OrderLocator {
                order_id: Some(order_id()),
                provider_reference: None
            }),
            refund: RefundReport::Total(usd(800)),
            occurred_at: at("2024-05-01T09:59:58Z"),
        }]
    );
}

#[tokio::test]
async fn a_refund_without_custom_id_finds_its_order_through_the_refunded_capture() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    Mock::given(method("GET"))
        .and(path("/v2/payments/captures/3C679366HH908993F"))
        .respond_with(json_reply(200, "api/capture.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    assert_eq!(
        h.events_of("webhooks/payment_capture_refunded.json").await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order_locator()),
            refund: RefundReport::Total(usd(800)),
            occurred_at: at("2024-05-01T09:59:58Z")
        }]
    );
}

fn first_period() -> BillingPeriod {
    BillingPeriod::new(at("2024-05-01T09:59:10Z"), at("2024-06-01T10:00:00Z")).unwrap()
}

fn subscription_order() -> OrderLocator {
    OrderLocator {
        order_id: Some(OrderId::new("ord_01HZX3QA").unwrap()),
        provider_reference: Some(SUBSCRIPTION.into()),
    }
}

#[tokio::test]
async fn an_activated_subscription_with_its_first_payment_starts_the_paid_period() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    assert_eq!(
        h.events_of("webhooks/billing_subscription_activated.json")
            .await,
        vec![PaymentEvent::SubscriptionActivated {
            order: subscription_order(),
            provider_subscription_id: SUBSCRIPTION.into(),
            period: first_period(),
            // The first payment as PayPal shows it (`billing_info.last_payment`), checked
            // against the order.
            amount: Some(usd(999)),
            charge_ref: None,
            occurred_at: at("2024-05-01T09:59:12Z"),
        }]
    );
}

#[tokio::test]
async fn an_activation_before_the_first_payment_waits_for_the_sale() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    assert_eq!(
        h.events_of("webhooks/billing_subscription_activated_before_payment.json")
            .await,
        vec![]
    );
}

#[tokio::test]
async fn the_first_sale_of_a_subscription_activates_it() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_first_payment.json",
    )
    .await;
    assert_eq!(
        h.events_of("webhooks/payment_sale_completed.json").await,
        vec![PaymentEvent::SubscriptionActivated {
            order: subscription_order(),
            provider_subscription_id: SUBSCRIPTION.into(),
            period: first_period(),
            // The sale's amount, checked against the order.
            amount: Some(usd(999)),
            charge_ref: Some(SALE.into()),
            occurred_at: at("2024-05-01T09:59:50Z"),
        }]
    );
}

#[tokio::test]
async fn a_later_sale_renews_the_subscription_for_the_period_paypal_reports() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_renewed.json",
    )
    .await;
    assert_eq!(
        h.events_of("webhooks/payment_sale_completed.json").await,
        vec![PaymentEvent::SubscriptionRenewed {
            provider_subscription_id: SUBSCRIPTION.into(),
            period: BillingPeriod::new(at("2024-06-01T10:00:05Z"), at("2024-07-01T10:00:00Z"))
                .unwrap(),
            amount: usd(999),
            charge_ref: Some(SALE.into()),
            occurred_at: at("2024-05-01T09:59:50Z"),
        }]
    );
}

#[tokio::test]
async fn a_sale_the_subscription_does_not_show_yet_is_refused_so_that_paypal_redelivers_it() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_first_payment.json",
    )
    .await;
    // The second month's sale, while PayPal's subscription still shows the first payment: read
    // now, it would look like the first sale again and the renewal would be lost.
    let body = fixture("webhooks/payment_sale_completed.json")
        .replace("2024-05-01T09:59:10Z", "2024-06-01T10:00:05Z");
    let result = h
        .gateway
        .verify_webhook(&delivery(&body, TRANSMISSION_TIME))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_sale_outside_any_subscription_is_ignored_without_calling_paypal() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    assert_eq!(
        h.events_of("webhooks/payment_sale_completed_without_agreement.json")
            .await,
        vec![]
    );
    assert!(
        h.requests_to("/v1/billing/subscriptions/I-BW452GLLEP1G")
            .await
            .is_empty()
    );
}

fn sale_charge(provider_subscription_id: Option<&str>) -> RefundedCharge {
    RefundedCharge::SubscriptionCharge {
        provider_subscription_id: provider_subscription_id.map(str::to_owned),
        charge_ref: SALE.into(),
    }
}

#[tokio::test]
async fn a_refunded_sale_is_that_refund_s_own_amount_for_the_sale_its_renewal_named() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    // PayPal's v1 refund carries this refund's amount (written negative) and no running total.
    assert_eq!(
        h.events_of("webhooks/payment_sale_refunded.json").await,
        vec![PaymentEvent::Refunded {
            charge: sale_charge(None),
            refund: RefundReport::One {
                refund_id: "6YX43824R4443062K".into(),
                amount: usd(499),
            },
            occurred_at: at("2024-05-01T09:59:58Z"),
        }]
    );
    assert!(
        h.requests_to("/v1/payments/refund/6YX43824R4443062K")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_reversed_sale_that_does_not_name_its_sale_is_read_back_to_find_it() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    Mock::given(method("GET"))
        .and(path("/v1/payments/refund/77689802DL785834G"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(json_reply(200, "api/sale_reversal.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    assert_eq!(
        h.events_of("webhooks/payment_sale_reversed.json").await,
        vec![PaymentEvent::Refunded {
            charge: sale_charge(None),
            refund: RefundReport::One {
                refund_id: "77689802DL785834G".into(),
                amount: usd(999),
            },
            occurred_at: at("2024-05-01T09:59:58Z"),
        }]
    );
}

#[tokio::test]
async fn a_dispute_lost_on_a_subscription_sale_takes_the_sale_back() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    // A sale id is no capture: PayPal's captures API does not know it.
    h.answer(
        "GET",
        "/v2/payments/captures/9T2590785R617035G",
        404,
        "api/error_resource_not_found.json",
    )
    .await;
    h.answer(
        "GET",
        "/v1/payments/sale/9T2590785R617035G",
        200,
        "api/sale.json",
    )
    .await;
    assert_eq!(
        h.events_of("webhooks/customer_dispute_resolved_sale_lost.json")
            .await,
        vec![PaymentEvent::Refunded {
            charge: sale_charge(Some(SUBSCRIPTION)),
            refund: RefundReport::DisputeLost {
                dispute_id: "PP-D-27811".into()
            },
            occurred_at: at("2024-05-01T09:59:58Z"),
        }]
    );
}

#[tokio::test]
async fn a_dispute_lost_on_an_order_capture_takes_the_order_payment_back_and_a_won_one_nothing() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v2/payments/captures/3C679366HH908993F",
        200,
        "api/capture.json",
    )
    .await;
    assert_eq!(
        h.events_of("webhooks/customer_dispute_resolved_capture_lost.json")
            .await,
        vec![PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order_locator()),
            refund: RefundReport::DisputeLost {
                dispute_id: "PP-D-27803".into()
            },
            occurred_at: at("2024-05-01T09:59:58Z"),
        }]
    );
    assert!(
        h.requests_to("/v1/payments/sale/3C679366HH908993F")
            .await
            .is_empty()
    );
    // Resolved for the seller: nothing goes back, and nothing more is read.
    assert_eq!(
        h.events_of("webhooks/customer_dispute_resolved_won.json")
            .await,
        vec![]
    );
    assert_eq!(
        h.requests_to("/v2/payments/captures/3C679366HH908993F")
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn a_disputed_transaction_paypal_cannot_look_up_now_refuses_the_webhook_for_redelivery() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    Mock::given(method("GET"))
        .and(path("/v2/payments/captures/9T2590785R617035G"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&h.server)
        .await;
    let result = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/customer_dispute_resolved_sale_lost.json"),
            TRANSMISSION_TIME,
        ))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn subscription_lifecycle_events_map_to_past_due_canceled_and_expired() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let id = || SUBSCRIPTION.to_owned();
    let time = at("2024-05-01T09:59:58Z");
    let cases = [
        (
            "webhooks/billing_subscription_payment_failed.json",
            PaymentEvent::SubscriptionPastDue {
                provider_subscription_id: id(),
                occurred_at: time,
            },
        ),
        (
            "webhooks/billing_subscription_suspended.json",
            PaymentEvent::SubscriptionPastDue {
                provider_subscription_id: id(),
                occurred_at: time,
            },
        ),
        (
            "webhooks/billing_subscription_cancelled.json",
            PaymentEvent::SubscriptionCanceled {
                provider_subscription_id: id(),
                occurred_at: time,
            },
        ),
        (
            "webhooks/billing_subscription_expired.json",
            PaymentEvent::SubscriptionExpired {
                provider_subscription_id: id(),
                occurred_at: time,
            },
        ),
    ];
    for (webhook, expected) in cases {
        assert_eq!(h.events_of(webhook).await, vec![expected], "{webhook}");
    }
}

#[tokio::test]
async fn event_types_tally_does_not_handle_have_no_events() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    for webhook in [
        "webhooks/customer_dispute_created.json",
        "webhooks/payment_capture_pending.json",
    ] {
        assert_eq!(h.events_of(webhook).await, vec![], "{webhook}");
    }
}

#[tokio::test]
async fn a_handled_event_with_an_unreadable_amount_is_refused_as_malformed() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let body =
        fixture("webhooks/payment_capture_completed.json").replacen("\"17.99\"", "\"17.9.9\"", 1);
    let result = h
        .gateway
        .verify_webhook(&delivery(&body, TRANSMISSION_TIME))
        .await;
    assert!(
        matches!(result, Err(WebhookError::Malformed(_))),
        "{result:?}"
    );
}

// --- Settings -------------------------------------------------------------------------------

fn settings_from(value: Value) -> Result<WalletGlobalSettings, serde_json::Error> {
    serde_json::from_value(value)
}

#[test]
fn settings_default_to_paypal_live_and_switch_to_paypal_sandbox() {
    let live =
        settings_from(json!({ "clientId": "id", "clientSecret": "secret", "webhookId": "WH-1" }))
            .unwrap();
    assert_eq!(live.http().base_url, LIVE_BASE_URL);
    assert_eq!(live.http().timeout_ms, 10_000);
    let sandbox =
        settings_from(json!({ "clientId": "id", "clientSecret": "secret", "webhookId": "WH-1", "sandbox": true, "timeoutMs": 5000 })).unwrap();
    assert_eq!(sandbox.http().base_url, SANDBOX_BASE_URL);
    assert_eq!(sandbox.http().timeout_ms, 5000);
    let local = settings_from(json!({ "clientId": "id", "clientSecret": "secret", "webhookId": "WH-1", "baseUrl": "http://127.0.0.1:8080/sandbox/wallet_global/" })).unwrap();
    assert_eq!(
        local.http().base_url,
        "http://127.0.0.1:8080/sandbox/wallet_global"
    );
}

#[test]
fn settings_refuse_unknown_fields_and_unusable_values() {
    assert!(
        settings_from(
            json!({ "clientId": "id", "clientSecret": "s", "webhookId": "WH-1", "secret": "x" })
        )
        .is_err()
    );
    assert!(settings_from(json!({ "clientId": "id", "webhookId": "WH-1" })).is_err());
    let with_merchant = settings_from(
        json!({ "clientId": "id", "clientSecret": "s", "webhookId": "WH-1", "merchantId": "C7CYMKZDG8D6E" }),
    )
    .unwrap();
    assert_eq!(with_merchant.merchant_id.as_deref(), Some("C7CYMKZDG8D6E"));
    let context = || {
        support::context(
            &gateways::HttpSettings::new("http://127.0.0.1:9"),
            NOW_MS,
            false,
        )
    };
    let cases = [
        (
            json!({ "clientId": " ", "clientSecret": "s", "webhookId": "WH-1" }),
            "clientId",
        ),
        (
            json!({ "clientId": "id", "clientSecret": "", "webhookId": "WH-1" }),
            "clientSecret",
        ),
        (
            json!({ "clientId": "id", "clientSecret": "s", "webhookId": "" }),
            "webhookId",
        ),
        (
            json!({ "clientId": "id", "clientSecret": "s", "webhookId": "WH-1", "baseUrl": "ftp://x" }),
            "baseUrl",
        ),
        (
            json!({ "clientId": "id", "clientSecret": "s", "webhookId": "WH-1", "timeoutMs": 0 }),
            "timeoutMs",
        ),
        (
            json!({ "clientId": "id", "clientSecret": "s", "webhookId": "WH-1", "merchantId": "C7C/YM" }),
            "merchantId",
        ),
    ];
    for (value, field) in cases {
        let error =
            WalletGlobalGateway::new(&settings_from(value).unwrap(), context()).unwrap_err();
        assert_eq!(error.field, field);
        assert_eq!(error.provider, "wallet_global");
    }
}

#[test]
fn settings_never_print_the_client_secret() {
    let settings = settings_from(
        json!({ "clientId": "id", "clientSecret": "very-secret-value", "webhookId": "WH-1" }),
    )
    .unwrap();
    let printed = format!("{settings:?}");
    assert!(
        !printed.contains("very-secret-value") && printed.contains("[redacted]"),
        "{printed}"
    );
}

// --- Merchant isolation ---------------------------------------------------------------------

/// The merchant of the recorded webhooks (`payee` / `seller`).
const MERCHANT: &str = "C7CYMKZDG8D6E";

#[tokio::test]
async fn an_event_naming_another_merchant_is_foreign_and_is_neither_captured_nor_read_further() {
    let h = harness_with(false, Some("OTHERMERCHANT1")).await;
    h.paypal_verifies("SUCCESS").await;
    for webhook in [
        "webhooks/checkout_order_approved.json",
        "webhooks/customer_dispute_resolved_capture_lost.json",
    ] {
        let verified = h
            .gateway
            .verify_webhook(&delivery(&fixture(webhook), TRANSMISSION_TIME))
            .await
            .unwrap();
        assert_eq!(verified.events, vec![], "{webhook}");
        let why = verified
            .foreign
            .unwrap_or_else(|| panic!("{webhook} is not foreign"));
        assert!(why.contains(MERCHANT), "{why}");
    }
    let mut capture: Value =
        serde_json::from_str(&fixture("webhooks/payment_capture_completed.json")).unwrap();
    capture["resource"]["payee"] = json!({ "merchant_id": MERCHANT });
    let verified = h
        .gateway
        .verify_webhook(&delivery(&capture.to_string(), TRANSMISSION_TIME))
        .await
        .unwrap();
    assert!(verified.foreign.is_some());
    // Only PayPal's verification was called: nothing was captured or looked up.
    let paths: Vec<String> = h
        .server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| r.url.path().to_owned())
        .filter(|p| p != "/v1/oauth2/token")
        .collect();
    assert!(
        paths
            .iter()
            .all(|p| p == "/v1/notifications/verify-webhook-signature"),
        "{paths:?}"
    );
}

#[tokio::test]
async fn events_of_our_merchant_or_naming_none_are_ours() {
    let h = harness_with(false, Some(MERCHANT)).await;
    h.paypal_verifies("SUCCESS").await;
    let verified = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/checkout_order_approved.json"),
            TRANSMISSION_TIME,
        ))
        .await
        .unwrap();
    assert_eq!(verified.foreign, None);
    assert!(matches!(
        verified.events.as_slice(),
        [PaymentEvent::PaymentApproved { .. }]
    ));
    // A subscription event names no merchant: the webhook id PayPal verified is the check.
    let verified = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/billing_subscription_cancelled.json"),
            TRANSMISSION_TIME,
        ))
        .await
        .unwrap();
    assert_eq!(verified.foreign, None);
    // Without a configured merchant id, nothing is compared.
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let verified = h
        .gateway
        .verify_webhook(&delivery(
            &fixture("webhooks/checkout_order_approved.json"),
            TRANSMISSION_TIME,
        ))
        .await
        .unwrap();
    assert_eq!(verified.foreign, None);
}

// --- Refunds --------------------------------------------------------------------------------

fn refund_request(amount: Money, refund_id: &str) -> RefundRequest {
    RefundRequest {
        payment: paypal_order(),
        refund_id: refund_id.into(),
        amount,
        paid: usd(1799),
        reason: "Defective product".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_global".into(),
    }
}

#[tokio::test]
async fn a_refund_finds_the_capture_through_the_order_and_posts_the_amount_under_our_refund_id() {
    let h = harness().await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_captured.json",
    )
    .await;
    Mock::given(method("POST"))
        .and(path("/v2/payments/captures/3C679366HH908993F/refund"))
        .and(header("paypal-request-id", "rf_ord_01HZX3Q9_500"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header("content-type", "application/json"))
        .respond_with(json_reply(201, "api/refund_completed.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let started = h
        .gateway
        .refund(&refund_request(usd(500), "rf_ord_01HZX3Q9_500"))
        .await
        .unwrap();
    assert_eq!(
        started,
        RefundStarted {
            provider_refund_id: Some("1Y107995YT783435V".into()),
            state: RefundState::Succeeded,
        }
    );
    let sent = h
        .requests_to("/v2/payments/captures/3C679366HH908993F/refund")
        .await;
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "amount": { "currency_code": "USD", "value": "5.00" },
            "custom_id": "ord_01HZX3Q9",
            "note_to_payer": "Defective product",
        })
    );
}

#[tokio::test]
async fn a_refund_answer_maps_pending_failed_and_refused_refunds() {
    let h = harness().await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_captured.json",
    )
    .await;
    Mock::given(method("POST"))
        .and(path("/v2/payments/captures/3C679366HH908993F/refund"))
        .and(header("paypal-request-id", "rf_pending"))
        .respond_with(json_reply(201, "api/refund_pending_echeck.json"))
        .mount(&h.server)
        .await;
    let mut failed: Value =
        serde_json::from_str(&fixture("api/refund_pending_echeck.json")).unwrap();
    failed["status"] = json!("FAILED");
    Mock::given(method("POST"))
        .and(path("/v2/payments/captures/3C679366HH908993F/refund"))
        .and(header("paypal-request-id", "rf_failed"))
        .respond_with(ResponseTemplate::new(201).set_body_json(failed))
        .mount(&h.server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v2/payments/captures/3C679366HH908993F/refund"))
        .and(header("paypal-request-id", "rf_too_much"))
        .respond_with(json_reply(422, "api/error_refund_amount_exceeded.json"))
        .mount(&h.server)
        .await;
    let pending = h
        .gateway
        .refund(&refund_request(usd(500), "rf_pending"))
        .await
        .unwrap();
    assert_eq!(pending.state, RefundState::Pending);
    assert_eq!(
        pending.provider_refund_id.as_deref(),
        Some("1JU08902781691411")
    );
    let failed = h
        .gateway
        .refund(&refund_request(usd(500), "rf_failed"))
        .await
        .unwrap();
    assert_eq!(
        failed.state,
        RefundState::Failed("refund failed (ECHECK)".into())
    );
    let refused = h
        .gateway
        .refund(&refund_request(usd(5000), "rf_too_much"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, GatewayError::Rejected(text) if text.contains("REFUND_AMOUNT_EXCEEDED")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_order_without_a_capture_or_a_subscription_is_not_refunded_through_the_api() {
    let h = harness().await;
    h.answer(
        "GET",
        "/v2/checkout/orders/5O190127TN364715T",
        200,
        "api/order_approved.json",
    )
    .await;
    let error = h
        .gateway
        .refund(&refund_request(usd(500), "rf_1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(text) if text.contains("no capture")),
        "{error:?}"
    );
    let mut subscription = refund_request(usd(500), "rf_2");
    subscription.payment.provider_reference = Some(SUBSCRIPTION.into());
    let error = h.gateway.refund(&subscription).await.unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(text) if text.contains("dashboard")),
        "{error:?}"
    );
    let mut unsafe_id = refund_request(usd(500), "rf_3");
    unsafe_id.payment.provider_reference = Some("../v1/oauth2/token".into());
    assert!(matches!(
        h.gateway.refund(&unsafe_id).await,
        Err(GatewayError::Rejected(_))
    ));
    assert!(
        h.requests_to("/v2/payments/captures/3C679366HH908993F/refund")
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_recorded_event_replays_without_asking_paypal_to_verify_it_again() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    let body = fixture("webhooks/customer_dispute_created.json");
    let live = h
        .gateway
        .verify_webhook(&delivery(&body, TRANSMISSION_TIME))
        .await
        .unwrap();
    let recorded = application::ports::RecordedWebhook {
        event_id: live.event_id.clone(),
        body: body.clone().into_bytes(),
        received_at: Timestamp::from_unix_millis(NOW_MS),
    };
    assert_eq!(h.gateway.parse_recorded(&recorded).await.unwrap(), live);
    let verifications = h
        .requests_to("/v1/notifications/verify-webhook-signature")
        .await;
    assert_eq!(
        verifications.len(),
        1,
        "only the live delivery was verified"
    );
    let unreadable = application::ports::RecordedWebhook {
        body: b"{}".to_vec(),
        ..recorded.clone()
    };
    assert!(matches!(
        h.gateway.parse_recorded(&unreadable).await,
        Err(WebhookError::Malformed(_))
    ));
}

// --- Plan changes (revise) --------------------------------------------------------------------

/// A switch of the subscription to `pro-plus` (19.99 a month, PayPal plan
/// `P-7GL4271244454362WXNWU5NQ`).
fn revise_request() -> application::ports::PlanChangeRequest {
    let mut draft_plan = plan("recurring", "19.99", "USD");
    let refs = draft_plan
        .provider_refs()
        .clone()
        .with(ProviderId::WalletGlobal, "P-7GL4271244454362WXNWU5NQ");
    draft_plan = Plan::from_draft(&PlanDraft {
        id: "pro-plus".into(),
        provider: Some("wallet_global".into()),
        amount: Some("19.99".parse().unwrap()),
        currency: Some("USD".into()),
        months: Some(1),
        duration_type: Some("recurring".into()),
        provider_refs: refs,
        i18n: BTreeMap::from([(
            "en".to_owned(),
            PlanText {
                name: "Pro Plus".into(),
                ..PlanText::default()
            },
        )]),
        ..PlanDraft::default()
    })
    .unwrap();
    application::ports::PlanChangeRequest {
        provider_subscription_id: SUBSCRIPTION.into(),
        snapshot: PlanSnapshot::of(&draft_plan, draft_plan.price()),
        plan: draft_plan,
        direction: domain::ChangeDirection::Upgrade,
        idempotency_key: "tally-plan-change-sub_1-1714557600000".into(),
        requested_at: Timestamp::from_unix_millis(NOW_MS),
        return_url: Some("https://tally.example/dashboard?notice=plan_change_pending".into()),
        cancel_url: Some("https://tally.example/dashboard?notice=plan_change_declined".into()),
    }
}

#[tokio::test]
async fn a_plan_change_revises_the_subscription_and_sends_the_subscriber_to_paypal_to_approve() {
    let h = harness().await;
    Mock::given(method("POST"))
        .and(path("/v1/billing/subscriptions/I-BW452GLLEP1G/revise"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header(
            "paypal-request-id",
            "tally-plan-change-sub_1-1714557600000",
        ))
        .respond_with(json_reply(200, "api/subscription_revised.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let started = h
        .gateway
        .change_subscription_plan(&revise_request())
        .await
        .unwrap();
    assert_eq!(
        started,
        application::ports::PlanChangeStarted::ApprovalNeeded {
            url: "https://www.paypal.com/webapps/billing/subscriptions/update?ba_token=BA-2M539689T3856352J".into()
        }
    );
    let sent: Value = serde_json::from_slice(
        &h.requests_to("/v1/billing/subscriptions/I-BW452GLLEP1G/revise")
            .await[0]
            .body,
    )
    .unwrap();
    // Exactly PayPal's revise: the new plan and the return pages, no price (live PayPal reads
    // it from the plan).
    assert_eq!(
        sent,
        json!({
            "plan_id": "P-7GL4271244454362WXNWU5NQ",
            "application_context": {
                "shipping_preference": "NO_SHIPPING",
                "return_url": "https://tally.example/dashboard?notice=plan_change_pending",
                "cancel_url": "https://tally.example/dashboard?notice=plan_change_declined"
            }
        })
    );
}

#[tokio::test]
async fn only_the_local_sandbox_is_told_the_revised_plans_price() {
    let h = harness_for(true).await;
    h.answer(
        "POST",
        "/v1/billing/subscriptions/I-BW452GLLEP1G/revise",
        200,
        "api/subscription_revised.json",
    )
    .await;
    h.gateway
        .change_subscription_plan(&revise_request())
        .await
        .unwrap();
    let sent: Value = serde_json::from_slice(
        &h.requests_to("/v1/billing/subscriptions/I-BW452GLLEP1G/revise")
            .await[0]
            .body,
    )
    .unwrap();
    assert_eq!(
        sent["plan"]["billing_cycles"][0]["pricing_scheme"]["fixed_price"],
        json!({ "currency_code": "USD", "value": "19.99" })
    );
}

#[tokio::test]
async fn an_approval_link_off_paypal_is_refused_and_nobody_is_sent_there() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v1/billing/subscriptions/I-BW452GLLEP1G/revise",
        200,
        "api/subscription_revised_foreign_link.json",
    )
    .await;
    let refused = h
        .gateway
        .change_subscription_plan(&revise_request())
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, GatewayError::BadResponse(why) if why.contains("not a paypal page")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_revise_paypal_refuses_or_a_plan_without_a_paypal_plan_id_is_rejected() {
    let h = harness().await;
    h.answer(
        "POST",
        "/v1/billing/subscriptions/I-BW452GLLEP1G/revise",
        422,
        "api/error_subscription_status_invalid.json",
    )
    .await;
    let refused = h
        .gateway
        .change_subscription_plan(&revise_request())
        .await
        .unwrap_err();
    assert!(matches!(refused, GatewayError::Rejected(_)), "{refused:?}");

    let mut request = revise_request();
    request.provider_subscription_id = "../v1/oauth2/token".into();
    assert!(matches!(
        h.gateway.change_subscription_plan(&request).await,
        Err(GatewayError::Rejected(_))
    ));
}

#[tokio::test]
async fn an_updated_subscription_is_read_back_with_its_plan_and_reported_as_revised() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    Mock::given(method("GET"))
        .and(path("/v1/billing/subscriptions/I-BW452GLLEP1G"))
        .and(wiremock::matchers::query_param("fields", "plan"))
        .respond_with(json_reply(200, "api/subscription_revised_with_plan.json"))
        .expect(1)
        .mount(&h.server)
        .await;
    let events = h
        .events_of("webhooks/billing_subscription_updated.json")
        .await;
    assert_eq!(
        events,
        vec![PaymentEvent::SubscriptionPlanRevised {
            provider_subscription_id: SUBSCRIPTION.into(),
            provider_plan_id: "P-7GL4271244454362WXNWU5NQ".into(),
            price: usd(1999),
            interval_months: Some(1),
            occurred_at: at("2024-05-01T09:59:58Z"),
        }]
    );
}

#[tokio::test]
async fn without_inline_plan_details_the_plan_itself_is_read() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_revised_without_plan.json",
    )
    .await;
    h.answer(
        "GET",
        "/v1/billing/plans/P-7GL4271244454362WXNWU5NQ",
        200,
        "api/plan_pro_plus.json",
    )
    .await;
    let events = h
        .events_of("webhooks/billing_subscription_updated.json")
        .await;
    let [PaymentEvent::SubscriptionPlanRevised { price, .. }] = events.as_slice() else {
        panic!("{events:?}");
    };
    assert_eq!(*price, usd(1999));
}

#[tokio::test]
async fn an_update_of_an_ended_subscription_reports_nothing() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_cancelled.json",
    )
    .await;
    assert_eq!(
        h.events_of("webhooks/billing_subscription_updated.json")
            .await,
        Vec::new()
    );
}

#[tokio::test]
async fn a_checkout_whose_approval_link_is_off_paypal_is_refused() {
    for (kind, at_path, name) in [
        ("credits", "/v2/checkout/orders", "api/order_created.json"),
        (
            "recurring",
            "/v1/billing/subscriptions",
            "api/subscription_created.json",
        ),
    ] {
        let h = harness().await;
        let foreign = fixture(name).replace(
            "https://www.paypal.com/",
            "https://www.paypal.com.evil.example/",
        );
        Mock::given(method("POST"))
            .and(path(at_path))
            .respond_with(ResponseTemplate::new(201).set_body_raw(foreign, "application/json"))
            .mount(&h.server)
            .await;
        let refused = h
            .gateway
            .create_checkout(&checkout_request(plan(kind, "17.99", "USD")))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, GatewayError::BadResponse(why) if why.contains("not a paypal page")),
            "{kind}: {refused:?}"
        );
    }
}

#[tokio::test]
async fn a_renewal_under_a_revised_plan_reports_the_revision_before_the_renewal() {
    let h = harness().await;
    h.paypal_verifies("SUCCESS").await;
    h.answer(
        "GET",
        "/v1/billing/subscriptions/I-BW452GLLEP1G",
        200,
        "api/subscription_revised_with_plan.json",
    )
    .await;
    let events = h.events_of("webhooks/payment_sale_completed.json").await;
    assert_eq!(
        events,
        vec![
            PaymentEvent::SubscriptionPlanRevised {
                provider_subscription_id: SUBSCRIPTION.into(),
                provider_plan_id: "P-7GL4271244454362WXNWU5NQ".into(),
                price: usd(1999),
                interval_months: Some(1),
                occurred_at: at("2024-05-01T09:59:50Z"),
            },
            PaymentEvent::SubscriptionRenewed {
                provider_subscription_id: SUBSCRIPTION.into(),
                period: BillingPeriod::new(at("2024-06-01T10:00:05Z"), at("2024-07-01T10:00:00Z"))
                    .unwrap(),
                amount: usd(999),
                charge_ref: Some(SALE.into()),
                occurred_at: at("2024-05-01T09:59:50Z"),
            },
        ]
    );
}

// --- Credential check ------------------------------------------------------------------------

#[tokio::test]
async fn a_credential_check_asks_for_a_fresh_token_even_with_one_cached() {
    let harness = harness().await;
    let first = harness.gateway.check_credentials().await.unwrap();
    assert_eq!(
        first.mode,
        CredentialMode::Live,
        "not PayPal's sandbox host"
    );
    assert!(first.detail.contains("/v1/oauth2/token"), "{first:?}");
    harness.gateway.check_credentials().await.unwrap();
    assert_eq!(harness.requests_to("/v1/oauth2/token").await.len(), 2);
}

#[tokio::test]
async fn a_credential_check_reports_paypals_oauth_error_without_any_secret() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/oauth2/token"))
        .respond_with(ResponseTemplate::new(401).set_body_raw(
            r#"{"error":"invalid_client","error_description":"Client Authentication failed"}"#,
            "application/json",
        ))
        .mount(&server)
        .await;
    let settings =
        WalletGlobalSettings::new(Some(server.uri()), CLIENT_ID, CLIENT_SECRET, WEBHOOK_ID);
    let context = support::context(&settings.http(), NOW_MS, false);
    let check = WalletGlobalGateway::new(&settings, context)
        .unwrap()
        .check_credentials()
        .await;
    let Err(GatewayError::Rejected(why)) = check else {
        panic!("expected a refusal, got {check:?}");
    };
    assert!(
        why.contains("HTTP 401")
            && why.contains("invalid_client")
            && why.contains("Client Authentication failed"),
        "{why}"
    );
    assert!(
        !why.contains(CLIENT_SECRET) && !why.contains(CLIENT_ID),
        "{why}"
    );
}

#[tokio::test]
async fn a_credential_check_of_an_unreachable_api_is_unreachable() {
    let settings = WalletGlobalSettings::new(
        Some("http://127.0.0.1:9".into()),
        CLIENT_ID,
        CLIENT_SECRET,
        WEBHOOK_ID,
    );
    let context = support::context(&settings.http(), NOW_MS, false);
    let check = WalletGlobalGateway::new(&settings, context)
        .unwrap()
        .check_credentials()
        .await;
    assert!(
        matches!(check, Err(GatewayError::Unreachable(_))),
        "{check:?}"
    );
}

#[test]
fn sandbox_true_or_the_sandbox_host_is_test_mode() {
    let mut settings = WalletGlobalSettings::new(None, CLIENT_ID, CLIENT_SECRET, WEBHOOK_ID);
    assert_eq!(settings.test_mode(), None);
    settings.sandbox = true;
    assert_eq!(settings.test_mode().unwrap().field, "sandbox");
    let on_host = WalletGlobalSettings::new(
        Some("https://api-m.sandbox.paypal.com".into()),
        CLIENT_ID,
        CLIENT_SECRET,
        WEBHOOK_ID,
    );
    assert_eq!(on_host.test_mode().unwrap().field, "baseUrl");
}
