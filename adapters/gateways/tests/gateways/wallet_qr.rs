//! The WeChat Pay Native gateway against wiremock and against fixtures computed independently
//! (Python `cryptography` and `openssl dgst`, see `fixtures/wallet_qr/generate.py`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::{self, cny};
use application::ports::{
    AckFor, CheckoutRequest, CheckoutTarget, CredentialMode, GatewayError, PaymentEvent,
    PaymentGateway, PaymentRef, PaymentStatus, RefundReport, RefundedCharge, WebhookError,
    WebhookRequest,
};
use application::testing::FixedClock;
use domain::{Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanType, UserId};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use gateways::shared::signing::{
    aes_256_gcm_encrypt, b64, private_key, public_key, rsa_sha256_sign, rsa_sha256_verify, unb64,
};
use gateways::wallet_qr::transformers::{self, Authorization};
use gateways::wallet_qr::{WalletQrGateway, WalletQrSettings};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const MERCHANT_PRIVATE: &str = include_str!("../../../sandbox/keys/merchant_private.pem");
const MERCHANT_PUBLIC: &str = include_str!("../../../sandbox/keys/merchant_public.pem");
const PLATFORM_PRIVATE: &str = include_str!("../../../sandbox/keys/provider_private.pem");
const PLATFORM_PUBLIC: &str = include_str!("../../../sandbox/keys/provider_public.pem");
const AUTHORIZATION_VECTORS: &str = include_str!("../../fixtures/wallet_qr/authorization.json");
const TRANSACTION_SUCCESS: &str = include_str!("../../fixtures/wallet_qr/transaction_success.json");
const REFUND_SUCCESS: &str = include_str!("../../fixtures/wallet_qr/refund_success.json");
const REFUND_ABNORMAL: &str = include_str!("../../fixtures/wallet_qr/refund_abnormal.json");
const REFUND_PARTIAL_1: &str = include_str!("../../fixtures/wallet_qr/refund_partial_1.json");
const REFUND_PARTIAL_2: &str = include_str!("../../fixtures/wallet_qr/refund_partial_2.json");
const API_V3_KEY: &str = "tallysandboxapiv3key000000000000";
const MCH_ID: &str = "1900000109";
const SERIAL: &str = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1";
const PLATFORM_KEY_ID: &str = "PUB_KEY_ID_0000000000000000000000";
const ORDER: &str = "ord_000000000001";
/// 2026-01-01T00:00:00Z = 08:00 in Beijing.
const NOW_MS: i64 = 1_767_225_600_000;
/// When the fixture notifications were signed (08:05 Beijing).
const NOTIFIED_MS: i64 = 1_767_225_900_000;

fn settings_json(base_url: &str) -> Value {
    json!({
        "appId": "wx_sandbox_tally",
        "mchId": MCH_ID,
        "merchantSerialNo": SERIAL,
        "merchantPrivateKey": MERCHANT_PRIVATE,
        "apiV3Key": API_V3_KEY,
        "platformPublicKey": PLATFORM_PUBLIC,
        "platformPublicKeyId": PLATFORM_KEY_ID,
        "baseUrl": base_url,
        "timeoutMs": 5000,
    })
}

fn gateway_with(settings: Value, now_ms: i64) -> WalletQrGateway {
    let settings: WalletQrSettings = serde_json::from_value(settings).unwrap();
    let context = support::context(&settings.http(), now_ms, false);
    WalletQrGateway::new(&settings, context).unwrap()
}

fn gateway(base_url: &str, now_ms: i64) -> WalletQrGateway {
    gateway_with(settings_json(base_url), now_ms)
}

fn plan(currency: &str) -> Plan {
    let i18n = support::english("Pro lifetime");
    Plan::from_draft(&PlanDraft {
        id: "pro-lifetime".into(),
        provider: Some(
            if currency == "CNY" {
                "wallet_qr"
            } else {
                "card_gateway"
            }
            .into(),
        ),
        amount: Some("9.90".parse().unwrap()),
        currency: Some(currency.into()),
        months: Some(999_999),
        duration_type: Some("one_time".into()),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

fn checkout_request(currency: &str) -> CheckoutRequest {
    let plan = plan(currency);
    CheckoutRequest {
        save_method: false,
        order_id: OrderId::new(ORDER).unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        customer_email: None,
        customer_name: None,
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: "https://tally.example/payment/success".into(),
        cancel_url: "https://tally.example/payment/cancel".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_qr".into(),
        expires_at: domain::Timestamp::from_unix_millis(NOW_MS + 30 * 60_000),
    }
}

fn payment_ref() -> PaymentRef {
    PaymentRef {
        order_id: OrderId::new(ORDER).unwrap(),
        provider_reference: None,
    }
}

/// An answer signed as WeChat Pay signs its answers, with `key`.
fn signed_answer(status: u16, body: &str, timestamp_s: i64, key_pem: &str) -> ResponseTemplate {
    let key = private_key(key_pem).unwrap();
    let nonce = "answernonce0001";
    let message = transformers::response_message(timestamp_s, nonce, body.as_bytes());
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json")
        .insert_header("wechatpay-timestamp", timestamp_s.to_string().as_str())
        .insert_header("wechatpay-nonce", nonce)
        .insert_header(
            "wechatpay-signature",
            b64(&rsa_sha256_sign(&key, &message)).as_str(),
        )
        .insert_header("wechatpay-serial", PLATFORM_KEY_ID)
        .set_body_string(body)
}

fn answer(status: u16, body: &str) -> ResponseTemplate {
    signed_answer(status, body, NOW_MS / 1000, PLATFORM_PRIVATE)
}

/// The `k="v"` pairs of an `Authorization` header.
fn authorization_pairs(value: &str) -> BTreeMap<String, String> {
    let pairs = value
        .strip_prefix("WECHATPAY2-SHA256-RSA2048 ")
        .expect("the WECHATPAY2-SHA256-RSA2048 scheme");
    pairs
        .split(',')
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            (k.to_owned(), v.trim_matches('"').to_owned())
        })
        .collect()
}

/// Check a recorded request's `Authorization` against the merchant public key.
fn assert_signed(request: &wiremock::Request, method: &str, path_and_query: &str) {
    let value = request
        .headers
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap();
    let pairs = authorization_pairs(value);
    assert_eq!(pairs["mchid"], MCH_ID);
    assert_eq!(pairs["serial_no"], SERIAL);
    assert_eq!(pairs["timestamp"], (NOW_MS / 1000).to_string());
    assert_eq!(pairs["nonce_str"].len(), 32);
    let body = String::from_utf8(request.body.clone()).unwrap();
    let timestamp_s: i64 = pairs["timestamp"].parse().unwrap();
    let message = transformers::request_message(
        method,
        path_and_query,
        timestamp_s,
        &pairs["nonce_str"],
        &body,
    );
    let signature = unb64(&pairs["signature"]).unwrap();
    assert!(rsa_sha256_verify(
        &public_key(MERCHANT_PUBLIC).unwrap(),
        message.as_bytes(),
        &signature
    ));
}

fn notification(fixture: &str) -> WebhookRequest {
    let value: Value = serde_json::from_str(fixture).unwrap();
    let headers = value["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    WebhookRequest {
        headers,
        body: value["body"].as_str().unwrap().as_bytes().to_vec(),
    }
}

/// `request` with its body replaced and re-signed with `key_pem`.
fn resigned(mut request: WebhookRequest, body: String, key_pem: &str) -> WebhookRequest {
    let key = private_key(key_pem).unwrap();
    let timestamp_s: i64 = request.headers["wechatpay-timestamp"].parse().unwrap();
    let nonce = request.headers["wechatpay-nonce"].clone();
    let message = transformers::response_message(timestamp_s, &nonce, body.as_bytes());
    request.headers.insert(
        "wechatpay-signature".into(),
        b64(&rsa_sha256_sign(&key, &message)),
    );
    request.body = body.into_bytes();
    request
}

/// A notification whose resource is `plaintext`, encrypted and signed here.
fn sealed_notification(event_type: &str, plaintext: &Value, aad: &str) -> WebhookRequest {
    let sealed = aes_256_gcm_encrypt(
        API_V3_KEY.as_bytes(),
        b"abcdefghijkl",
        aad.as_bytes(),
        plaintext.to_string().as_bytes(),
    )
    .unwrap();
    let body = json!({
        "id": "EV-test", "create_time": "2026-01-01T08:05:00+08:00",
        "resource_type": "encrypt-resource", "event_type": event_type, "summary": "-",
        "resource": { "original_type": aad, "algorithm": "AEAD_AES_256_GCM",
            "ciphertext": b64(&sealed), "associated_data": aad, "nonce": "abcdefghijkl" }
    });
    resigned(
        notification(TRANSACTION_SUCCESS),
        body.to_string(),
        PLATFORM_PRIVATE,
    )
}

#[test]
fn the_request_signature_and_authorization_header_match_vectors_computed_with_openssl() {
    let vectors: Value = serde_json::from_str(AUTHORIZATION_VECTORS).unwrap();
    let key = private_key(MERCHANT_PRIVATE).unwrap();
    for name in ["native", "query"] {
        let v = &vectors[name];
        let timestamp_s = v["timestamp"].as_i64().unwrap();
        let nonce = v["nonce"].as_str().unwrap();
        let message = transformers::request_message(
            v["method"].as_str().unwrap(),
            v["path"].as_str().unwrap(),
            timestamp_s,
            nonce,
            v["body"].as_str().unwrap(),
        );
        assert_eq!(message, v["message"].as_str().unwrap(), "{name}");
        let signature = b64(&rsa_sha256_sign(&key, message.as_bytes()));
        assert_eq!(signature, v["signature"].as_str().unwrap(), "{name}");
        let header = Authorization {
            mch_id: MCH_ID,
            nonce,
            signature_b64: &signature,
            timestamp_s,
            serial_no: SERIAL,
        }
        .header_value();
        assert_eq!(header, v["authorization"].as_str().unwrap(), "{name}");
    }
}

#[tokio::test]
async fn create_checkout_posts_the_documented_native_order_signed_with_the_merchant_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/pay/transactions/native"))
        .and(header("accept", "application/json"))
        .and(header("content-type", "application/json"))
        .respond_with(answer(
            200,
            r#"{"code_url":"weixin://wxpay/bizpayurl?pr=p4lpSuKzz"}"#,
        ))
        .expect(1)
        .mount(&server)
        .await;
    let checkout = gateway(&server.uri(), NOW_MS)
        .create_checkout(&checkout_request("CNY"))
        .await
        .unwrap();
    assert_eq!(
        checkout.target,
        CheckoutTarget::QrCode("weixin://wxpay/bizpayurl?pr=p4lpSuKzz".into())
    );
    let requests = server.received_requests().await.unwrap();
    let vectors: Value = serde_json::from_str(AUTHORIZATION_VECTORS).unwrap();
    let body = String::from_utf8(requests[0].body.clone()).unwrap();
    assert_eq!(body, vectors["native"]["body"].as_str().unwrap());
    assert_signed(&requests[0], "POST", "/v3/pay/transactions/native");
}

#[tokio::test]
async fn create_checkout_refuses_answers_that_are_unsigned_or_signed_with_another_key() {
    let body = r#"{"code_url":"weixin://wxpay/bizpayurl?pr=forged"}"#;
    let unsigned = ResponseTemplate::new(200).set_body_string(body);
    let wrong_key = signed_answer(200, body, NOW_MS / 1000, MERCHANT_PRIVATE);
    let stale = signed_answer(200, body, NOW_MS / 1000 - 301, PLATFORM_PRIVATE);
    for template in [unsigned, wrong_key, stale] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(template)
            .mount(&server)
            .await;
        let result = gateway(&server.uri(), NOW_MS)
            .create_checkout(&checkout_request("CNY"))
            .await;
        assert!(
            matches!(result, Err(GatewayError::BadResponse(_))),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn create_checkout_reports_wechat_pay_errors_with_their_code() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_string(r#"{"code":"PARAM_ERROR","message":"notify_url must be https"}"#),
        )
        .mount(&server)
        .await;
    let result = gateway(&server.uri(), NOW_MS)
        .create_checkout(&checkout_request("CNY"))
        .await;
    let Err(GatewayError::Rejected(message)) = result else {
        panic!("expected a rejection, got {result:?}");
    };
    assert!(message.contains("PARAM_ERROR"), "{message}");
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string(r#"{"code":"SYSTEM_ERROR"}"#))
        .mount(&server)
        .await;
    let result = gateway(&server.uri(), NOW_MS)
        .create_checkout(&checkout_request("CNY"))
        .await;
    assert!(
        matches!(result, Err(GatewayError::Unreachable(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn subscriptions_other_currencies_and_long_order_ids_are_refused_without_a_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(answer(200, r#"{"code_url":"x"}"#))
        .expect(0)
        .mount(&server)
        .await;
    let gateway = gateway(&server.uri(), NOW_MS);
    let mut recurring = checkout_request("CNY");
    recurring.snapshot.plan_type = PlanType::Recurring;
    assert!(matches!(
        gateway.create_checkout(&recurring).await,
        Err(GatewayError::NotSupported)
    ));
    assert!(matches!(
        gateway.cancel_subscription("sub_1").await,
        Err(GatewayError::NotSupported)
    ));
    assert!(matches!(
        gateway.create_checkout(&checkout_request("USD")).await,
        Err(GatewayError::Rejected(_))
    ));
    let mut long_id = checkout_request("CNY");
    long_id.order_id = OrderId::new("ord_".to_owned() + &"9".repeat(40)).unwrap();
    assert!(matches!(
        gateway.create_checkout(&long_id).await,
        Err(GatewayError::Rejected(_))
    ));
}

async fn query_with(status: u16, body: &str) -> Result<PaymentStatus, GatewayError> {
    let server = MockServer::start().await;
    let template = if status == 200 {
        answer(status, body)
    } else {
        ResponseTemplate::new(status).set_body_string(body)
    };
    Mock::given(method("GET"))
        .and(path(format!("/v3/pay/transactions/out-trade-no/{ORDER}")))
        .and(query_param("mchid", MCH_ID))
        .respond_with(template)
        .expect(1)
        .mount(&server)
        .await;
    let result = gateway(&server.uri(), NOW_MS)
        .query_payment(&payment_ref())
        .await;
    let requests = server.received_requests().await.unwrap();
    assert_signed(
        &requests[0],
        "GET",
        &format!("/v3/pay/transactions/out-trade-no/{ORDER}?mchid={MCH_ID}"),
    );
    assert!(requests[0].body.is_empty());
    result
}

fn transaction(state: &str, currency: &str) -> String {
    json!({
        "appid": "wx_sandbox_tally", "mchid": MCH_ID, "out_trade_no": ORDER,
        "transaction_id": "4200000000202601010000000001", "trade_type": "NATIVE",
        "trade_state": state, "trade_state_desc": "-", "success_time": "2026-01-01T08:05:00+08:00",
        "amount": { "total": 990, "payer_total": 990, "currency": currency, "payer_currency": currency }
    })
    .to_string()
}

#[tokio::test]
async fn query_payment_maps_each_trade_state_and_unknown_ones_to_pending() {
    assert_eq!(
        query_with(200, &transaction("SUCCESS", "CNY"))
            .await
            .unwrap(),
        PaymentStatus::Succeeded {
            amount: cny(990),
            paid_at: domain::Timestamp::from_unix_millis(NOTIFIED_MS),
        }
    );
    for state in ["NOTPAY", "USERPAYING", "REFUND", "A_STATE_FROM_THE_FUTURE"] {
        assert_eq!(
            query_with(200, &transaction(state, "CNY")).await.unwrap(),
            PaymentStatus::Pending,
            "{state}"
        );
    }
    for state in ["CLOSED", "PAYERROR", "REVOKED"] {
        assert!(
            matches!(
                query_with(200, &transaction(state, "CNY")).await.unwrap(),
                PaymentStatus::Failed { .. }
            ),
            "{state}"
        );
    }
}

#[tokio::test]
async fn query_payment_treats_an_unknown_order_as_pending_and_odd_answers_as_bad() {
    let not_found = r#"{"code":"ORDER_NOT_EXIST","message":"order does not exist"}"#;
    assert_eq!(
        query_with(404, not_found).await.unwrap(),
        PaymentStatus::Pending
    );
    assert!(matches!(
        query_with(200, &transaction("SUCCESS", "USD")).await,
        Err(GatewayError::BadResponse(_))
    ));
    let other_order = transaction("SUCCESS", "CNY").replace(ORDER, "ord_someone_else");
    assert!(matches!(
        query_with(200, &other_order).await,
        Err(GatewayError::BadResponse(_))
    ));
}

#[tokio::test]
async fn close_payment_posts_the_merchant_id_and_accepts_no_content() {
    let server = MockServer::start().await;
    let close_path = format!("/v3/pay/transactions/out-trade-no/{ORDER}/close");
    Mock::given(method("POST"))
        .and(path(close_path.as_str()))
        .respond_with(answer(204, ""))
        .expect(1)
        .mount(&server)
        .await;
    gateway(&server.uri(), NOW_MS)
        .close_payment(&payment_ref())
        .await
        .unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].body, br#"{"mchid":"1900000109"}"#);
    assert_signed(&requests[0], "POST", &close_path);
}

#[tokio::test]
async fn a_transaction_success_notification_becomes_a_payment_of_the_exact_amount() {
    let verified = gateway("http://unused", NOTIFIED_MS + 60_000)
        .verify_webhook(&notification(TRANSACTION_SUCCESS))
        .await
        .unwrap();
    assert_eq!(verified.event_id, "EV-2026010100000000001");
    assert_eq!(verified.event_type, "TRANSACTION.SUCCESS");
    let [
        PaymentEvent::PaymentSucceeded {
            order,
            amount,
            occurred_at,
        },
    ] = verified.events.as_slice()
    else {
        panic!("expected one payment, got {:?}", verified.events);
    };
    assert_eq!(order.order_id, Some(OrderId::new(ORDER).unwrap()));
    assert_eq!(*amount, cny(990));
    assert_eq!(occurred_at.unix_millis(), NOTIFIED_MS);
}

#[tokio::test]
async fn a_refund_success_notification_becomes_one_refund_of_its_amount_under_wechats_refund_id() {
    let verified = gateway("http://unused", 1_767_229_200_000)
        .verify_webhook(&notification(REFUND_SUCCESS))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "REFUND.SUCCESS");
    let [
        PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            refund: RefundReport::One { refund_id, amount },
            occurred_at,
        },
    ] = verified.events.as_slice()
    else {
        panic!("expected one refund, got {:?}", verified.events);
    };
    assert_eq!(order.order_id, Some(OrderId::new(ORDER).unwrap()));
    // WeChat Pay's refund_id, not the out_refund_no "re_000000000001".
    assert_eq!(refund_id, "50000000382026010100000000001");
    assert_eq!(*amount, cny(990));
    assert_eq!(occurred_at.unix_millis(), 1_767_229_200_000);
}

#[tokio::test]
async fn two_partial_refunds_are_two_refunds_of_their_own_list_price_amounts_with_distinct_ids() {
    let gateway = gateway("http://unused", 1_767_229_200_000);
    let mut reports = Vec::new();
    for fixture in [REFUND_PARTIAL_1, REFUND_PARTIAL_2] {
        let verified = gateway
            .verify_webhook(&notification(fixture))
            .await
            .unwrap();
        let [
            PaymentEvent::Refunded {
                charge: RefundedCharge::Order(order),
                refund,
                ..
            },
        ] = verified.events.as_slice()
        else {
            panic!("expected one refund, got {:?}", verified.events);
        };
        assert_eq!(
            order.order_id,
            Some(OrderId::new("ord_000000000002").unwrap())
        );
        reports.push(refund.clone());
    }
    // Each carries 34.00 of the 68.00 order: amount.refund, coupon share included, not the
    // buyer's 30.00 payer_refund and not a running total; together they are the whole order.
    assert_eq!(
        reports,
        vec![
            RefundReport::One {
                refund_id: "50000000382026010100000000002".into(),
                amount: cny(3400),
            },
            RefundReport::One {
                refund_id: "50000000382026010100000000003".into(),
                amount: cny(3400),
            },
        ]
    );
}

#[tokio::test]
async fn a_successful_refund_without_refund_id_or_above_the_order_total_is_refused() {
    let gateway = gateway("http://unused", NOTIFIED_MS);
    let refund = json!({
        "mchid": MCH_ID, "out_trade_no": ORDER, "transaction_id": "4200000000202601010000000001",
        "out_refund_no": "re_000000000001", "refund_status": "SUCCESS",
        "success_time": "2026-01-01T09:00:00+08:00", "user_received_account": "支付用户零钱",
        "amount": { "total": 990, "refund": 990, "payer_total": 990, "payer_refund": 990 }
    });
    let request = sealed_notification("REFUND.SUCCESS", &refund, "refund");
    assert!(matches!(
        gateway.verify_webhook(&request).await,
        Err(WebhookError::Malformed(_))
    ));
    let mut too_much = refund.clone();
    too_much["refund_id"] = json!("50000000382026010100000000001");
    too_much["amount"]["refund"] = json!(991);
    let request = sealed_notification("REFUND.SUCCESS", &too_much, "refund");
    assert!(matches!(
        gateway.verify_webhook(&request).await,
        Err(WebhookError::Malformed(_))
    ));
    let mut ours = too_much;
    ours["amount"]["refund"] = json!(990);
    let request = sealed_notification("REFUND.SUCCESS", &ours, "refund");
    assert_eq!(
        gateway.verify_webhook(&request).await.unwrap().events.len(),
        1
    );
}

#[tokio::test]
async fn notifications_of_types_tally_does_not_handle_verify_and_carry_no_events() {
    let verified = gateway("http://unused", 1_767_229_200_000)
        .verify_webhook(&notification(REFUND_ABNORMAL))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "REFUND.ABNORMAL");
    assert!(verified.events.is_empty());
}

#[tokio::test]
async fn a_tampered_body_or_a_signature_by_another_key_is_refused() {
    let gateway = gateway("http://unused", NOTIFIED_MS);
    let original = notification(TRANSACTION_SUCCESS);
    let mut tampered = original.clone();
    tampered.body = String::from_utf8(original.body.clone())
        .unwrap()
        .replace("支付成功", "支付失败")
        .into_bytes();
    assert_eq!(
        gateway.verify_webhook(&tampered).await,
        Err(WebhookError::BadSignature)
    );
    let body = String::from_utf8(original.body.clone()).unwrap();
    let wrong_key = resigned(original.clone(), body, MERCHANT_PRIVATE);
    assert_eq!(
        gateway.verify_webhook(&wrong_key).await,
        Err(WebhookError::BadSignature)
    );
    let mut other_serial = original;
    other_serial.headers.insert(
        "wechatpay-serial".into(),
        "5157F09EFDC096DE15EBE81A47057A7232F1B8E1".into(),
    );
    assert_eq!(
        gateway.verify_webhook(&other_serial).await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn stale_and_future_timestamps_are_refused() {
    let request = notification(TRANSACTION_SUCCESS);
    // wechatpay-go refuses |now - Wechatpay-Timestamp| >= 5 minutes, either way.
    for now_ms in [
        NOTIFIED_MS + 300_000,
        NOTIFIED_MS - 300_000,
        NOTIFIED_MS + 301_000,
        NOTIFIED_MS - 301_000,
    ] {
        assert_eq!(
            gateway("http://unused", now_ms)
                .verify_webhook(&request)
                .await,
            Err(WebhookError::Stale)
        );
    }
    for now_ms in [NOTIFIED_MS + 299_999, NOTIFIED_MS - 299_000] {
        assert!(
            gateway("http://unused", now_ms)
                .verify_webhook(&request)
                .await
                .is_ok()
        );
    }
}

#[tokio::test]
async fn missing_or_malformed_signature_headers_are_refused() {
    let gateway = gateway("http://unused", NOTIFIED_MS);
    let original = notification(TRANSACTION_SUCCESS);
    for name in [
        "wechatpay-timestamp",
        "wechatpay-nonce",
        "wechatpay-signature",
        "wechatpay-serial",
    ] {
        let mut request = original.clone();
        request.headers.remove(name);
        assert_eq!(
            gateway.verify_webhook(&request).await,
            Err(WebhookError::MissingSignature),
            "{name}"
        );
    }
    for (name, value) in [
        ("wechatpay-timestamp", "yesterday"),
        ("wechatpay-signature", "***"),
    ] {
        let mut request = original.clone();
        request.headers.insert(name.into(), value.into());
        assert_eq!(
            gateway.verify_webhook(&request).await,
            Err(WebhookError::MissingSignature),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_resource_that_does_not_decrypt_is_refused_even_when_the_envelope_is_signed() {
    let gateway_now = gateway("http://unused", NOTIFIED_MS);
    let original = notification(TRANSACTION_SUCCESS);
    let mut envelope: Value = serde_json::from_slice(&original.body).unwrap();
    let mut sealed = unb64(envelope["resource"]["ciphertext"].as_str().unwrap()).unwrap();
    sealed[3] ^= 0x01;
    envelope["resource"]["ciphertext"] = Value::String(b64(&sealed));
    let tampered = resigned(original.clone(), envelope.to_string(), PLATFORM_PRIVATE);
    assert!(matches!(
        gateway_now.verify_webhook(&tampered).await,
        Err(WebhookError::Malformed(_))
    ));
    let mut other_key = settings_json("http://unused");
    other_key["apiV3Key"] = json!("another32characterapiv3key000000");
    assert!(matches!(
        gateway_with(other_key, NOTIFIED_MS)
            .verify_webhook(&original)
            .await,
        Err(WebhookError::Malformed(_))
    ));
}

#[tokio::test]
async fn a_notification_for_another_merchant_or_app_is_foreign_and_one_not_in_success_is_refused() {
    let gateway = gateway("http://unused", NOTIFIED_MS);
    for (field, value) in [
        ("mchid", json!("1900000999")),
        ("appid", json!("wx_another_app")),
        ("appid", Value::Null),
    ] {
        let mut foreign: Value = serde_json::from_str(&transaction("SUCCESS", "CNY")).unwrap();
        if value.is_null() {
            foreign.as_object_mut().unwrap().remove(field);
        } else {
            foreign[field] = value;
        }
        let request = sealed_notification("TRANSACTION.SUCCESS", &foreign, "transaction");
        let verified = gateway.verify_webhook(&request).await.unwrap();
        assert!(verified.events.is_empty(), "{field}");
        assert!(
            verified.foreign.as_deref().unwrap().contains(field),
            "{field}: {:?}",
            verified.foreign
        );
    }
    let refund = json!({
        "mchid": "1900000999", "out_trade_no": ORDER, "refund_id": "50300000000000000000000000009",
        "out_refund_no": "rf_x", "refund_status": "SUCCESS",
        "success_time": "2026-01-01T08:05:00+08:00",
        "amount": { "total": 990, "refund": 990, "payer_total": 990, "payer_refund": 990 }
    });
    let request = sealed_notification("REFUND.SUCCESS", &refund, "refund");
    let verified = gateway.verify_webhook(&request).await.unwrap();
    assert!(verified.events.is_empty());
    assert!(verified.foreign.unwrap().contains("mchid"));
    let ours_refund = json!({
        "mchid": MCH_ID, "out_trade_no": ORDER, "refund_id": "50300000000000000000000000009",
        "out_refund_no": "rf_x", "refund_status": "SUCCESS",
        "success_time": "2026-01-01T08:05:00+08:00",
        "amount": { "total": 990, "refund": 990, "payer_total": 990, "payer_refund": 990 }
    });
    let request = sealed_notification("REFUND.SUCCESS", &ours_refund, "refund");
    let verified = gateway.verify_webhook(&request).await.unwrap();
    assert_eq!((verified.events.len(), verified.foreign), (1, None));
    let closed: Value = serde_json::from_str(&transaction("CLOSED", "CNY")).unwrap();
    let request = sealed_notification("TRANSACTION.SUCCESS", &closed, "transaction");
    assert!(matches!(
        gateway.verify_webhook(&request).await,
        Err(WebhookError::Malformed(_))
    ));
    let ours: Value = serde_json::from_str(&transaction("SUCCESS", "CNY")).unwrap();
    let request = sealed_notification("TRANSACTION.SUCCESS", &ours, "transaction");
    let verified = gateway.verify_webhook(&request).await.unwrap();
    assert_eq!((verified.events.len(), verified.foreign), (1, None));
}

#[test]
fn the_acknowledgement_is_empty_on_success_and_a_fail_json_otherwise() {
    let gateway = gateway("http://unused", NOW_MS);
    let accepted = gateway.webhook_ack(&AckFor::Accepted);
    assert_eq!(
        (accepted.verdict, accepted.body.as_str()),
        (application::ports::AckVerdict::Accepted, "")
    );
    let refused = gateway.webhook_ack(&AckFor::Refused(WebhookError::BadSignature));
    assert_eq!(
        refused.verdict,
        application::ports::AckVerdict::Unauthenticated
    );
    let body: Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(body["code"], "FAIL");
    assert!(body["message"].as_str().unwrap().contains("signature"));
    let malformed = gateway.webhook_ack(&AckFor::Refused(WebhookError::Malformed("x".into())));
    assert_eq!(malformed.verdict, application::ports::AckVerdict::Refused);
}

#[test]
fn settings_are_camel_case_strict_and_never_show_their_secrets() {
    let settings: WalletQrSettings = serde_json::from_value(settings_json("http://x")).unwrap();
    let debug = format!("{settings:?}");
    assert!(!debug.contains(API_V3_KEY));
    assert!(!debug.contains("PRIVATE KEY"));
    assert_eq!(settings.http().timeout_ms, 5000);
    let mut defaults = settings_json("http://x");
    defaults.as_object_mut().unwrap().remove("baseUrl");
    defaults.as_object_mut().unwrap().remove("timeoutMs");
    let defaults: WalletQrSettings = serde_json::from_value(defaults).unwrap();
    assert_eq!(defaults.http().base_url, "https://api.mch.weixin.qq.com");
    let mut unknown = settings_json("http://x");
    unknown["apiKey"] = json!("x");
    assert!(serde_json::from_value::<WalletQrSettings>(unknown).is_err());
}

#[test]
fn unreadable_keys_are_configuration_errors_naming_the_field_and_not_the_value() {
    let context = || support::context(&gateways::HttpSettings::new("http://x"), NOW_MS, false);
    for (field, value) in [
        (
            "merchantPrivateKey",
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----",
        ),
        ("platformPublicKey", "not a key"),
        ("apiV3Key", "too-short-secret"),
        ("mchId", " "),
    ] {
        let mut json = settings_json("http://x");
        json[field] = json!(value);
        let settings: WalletQrSettings = serde_json::from_value(json).unwrap();
        let error = WalletQrGateway::new(&settings, context()).unwrap_err();
        assert_eq!(error.field, field);
        assert!(!error.to_string().contains("c2VjcmV0"));
        assert!(!error.to_string().contains("too-short-secret"));
    }
}

// ---------------------------------------------------------------------------------------------
// Wechatpay-Serial on requests, refunds, platform-certificate mode (issue 15).

const CERT_PEM: &str = include_str!("../../../sandbox/keys/wechat_platform_cert.pem");
const CERT_PRIVATE: &str = include_str!("../../../sandbox/keys/wechat_platform_cert_private.pem");
const CERT_SERIAL: &str = "3775B6A45ACD588826FF00C1EB6FC7FF2F5C2CC0";

/// An answer signed with `key_pem` under `serial`.
fn answer_as(status: u16, body: &str, key_pem: &str, serial: &str) -> ResponseTemplate {
    let key = private_key(key_pem).unwrap();
    let timestamp_s = NOW_MS / 1000;
    let message = transformers::response_message(timestamp_s, "answernonce0002", body.as_bytes());
    ResponseTemplate::new(status)
        .insert_header("content-type", "application/json")
        .insert_header("wechatpay-timestamp", timestamp_s.to_string().as_str())
        .insert_header("wechatpay-nonce", "answernonce0002")
        .insert_header(
            "wechatpay-signature",
            b64(&rsa_sha256_sign(&key, &message)).as_str(),
        )
        .insert_header("wechatpay-serial", serial)
        .set_body_string(body)
}

#[tokio::test]
async fn requests_name_the_platform_public_key_in_wechatpay_serial_and_certificate_mode_none() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v3/pay/transactions/native"))
        .respond_with(answer(
            200,
            r#"{"code_url":"weixin://wxpay/bizpayurl?pr=p4lpSuKzz"}"#,
        ))
        .mount(&server)
        .await;
    gateway(&server.uri(), NOW_MS)
        .create_checkout(&checkout_request("CNY"))
        .await
        .unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[0].headers.get("wechatpay-serial").unwrap(),
        PLATFORM_KEY_ID
    );
    // Certificate mode only: wechatpayv3 names no key, WeChat Pay signs with a certificate.
    let _ = gateway_with(certificate_mode(&server.uri()), NOW_MS)
        .create_checkout(&checkout_request("CNY"))
        .await;
    let requests = server.received_requests().await.unwrap();
    let native: Vec<_> = requests
        .iter()
        .filter(|r| r.url.path() == "/v3/pay/transactions/native")
        .collect();
    assert!(native[1].headers.get("wechatpay-serial").is_none());
}

fn refund_request(amount: i64, paid: i64) -> application::ports::RefundRequest {
    application::ports::RefundRequest {
        payment: payment_ref(),
        refund_id: format!("rf_{ORDER}_{amount}"),
        amount: cny(amount),
        paid: cny(paid),
        reason: "  customer asked\n".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_qr".into(),
    }
}

fn refund_answer(status: &str, out_refund_no: &str) -> String {
    json!({
        "refund_id": "50300000000000000000000000042", "out_refund_no": out_refund_no,
        "transaction_id": "4200000000202601010000000001", "out_trade_no": ORDER,
        "channel": "ORIGINAL", "user_received_account": "支付用户零钱",
        "create_time": "2026-01-01T08:00:00+08:00", "status": status, "funds_account": "AVAILABLE",
        "amount": { "total": 990, "refund": 400, "payer_total": 990, "payer_refund": 400,
            "settlement_refund": 400, "settlement_total": 990, "discount_refund": 0, "currency": "CNY" }
    })
    .to_string()
}

#[tokio::test]
async fn a_refund_posts_the_documented_body_with_our_refund_number_and_notify_url() {
    let server = MockServer::start().await;
    let out_refund_no = format!("rf_{ORDER}_400");
    Mock::given(method("POST"))
        .and(path("/v3/refund/domestic/refunds"))
        .and(header("content-type", "application/json"))
        .and(header("wechatpay-serial", PLATFORM_KEY_ID))
        .respond_with(answer(200, &refund_answer("PROCESSING", &out_refund_no)))
        .expect(1)
        .mount(&server)
        .await;
    let started = gateway(&server.uri(), NOW_MS)
        .refund(&refund_request(400, 990))
        .await
        .unwrap();
    assert_eq!(
        started,
        application::ports::RefundStarted {
            provider_refund_id: Some("50300000000000000000000000042".into()),
            state: application::ports::RefundState::Pending,
        }
    );
    let requests = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "out_trade_no": ORDER,
            "out_refund_no": out_refund_no,
            "reason": "customer asked",
            "notify_url": "https://tally.example/api/payment/webhook/wallet_qr",
            "amount": { "refund": 400, "total": 990, "currency": "CNY" }
        })
    );
    assert_signed(&requests[0], "POST", "/v3/refund/domestic/refunds");
}

#[tokio::test]
async fn refund_answers_map_to_their_state_and_odd_answers_are_refused() {
    use application::ports::RefundState;
    let out_refund_no = format!("rf_{ORDER}_400");
    let cases: Vec<(ResponseTemplate, Result<RefundState, &str>)> = vec![
        (
            answer(200, &refund_answer("SUCCESS", &out_refund_no)),
            Ok(RefundState::Succeeded),
        ),
        (
            answer(200, &refund_answer("PROCESSING", &out_refund_no)),
            Ok(RefundState::Pending),
        ),
        (
            answer(200, &refund_answer("SOMETHING_NEW", &out_refund_no)),
            Ok(RefundState::Pending),
        ),
        (
            answer(200, &refund_answer("CLOSED", &out_refund_no)),
            Err("failed"),
        ),
        (
            answer(200, &refund_answer("ABNORMAL", &out_refund_no)),
            Err("failed"),
        ),
        (
            answer(200, &refund_answer("SUCCESS", "rf_other")),
            Err("bad"),
        ),
        (
            answer(
                200,
                &refund_answer("SUCCESS", &out_refund_no).replace("\"refund_id\"", "\"x\""),
            ),
            Err("bad"),
        ),
        (
            ResponseTemplate::new(200).set_body_string(refund_answer("SUCCESS", &out_refund_no)),
            Err("bad"),
        ),
        (
            ResponseTemplate::new(403)
                .set_body_string(r#"{"code":"NOT_ENOUGH","message":"基本账户余额不足"}"#),
            Err("rejected"),
        ),
    ];
    for (template, expected) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v3/refund/domestic/refunds"))
            .respond_with(template)
            .mount(&server)
            .await;
        let result = gateway(&server.uri(), NOW_MS)
            .refund(&refund_request(400, 990))
            .await;
        match (expected, &result) {
            (Ok(state), Ok(started)) => assert_eq!(&started.state, &state),
            (Err("failed"), Ok(started)) => {
                assert!(
                    matches!(started.state, RefundState::Failed(_)),
                    "{result:?}"
                );
            }
            (Err("bad"), Err(GatewayError::BadResponse(_))) => {}
            (Err("rejected"), Err(GatewayError::Rejected(e))) => assert!(e.contains("NOT_ENOUGH")),
            (expected, _) => panic!("expected {expected:?}, got {result:?}"),
        }
    }
}

#[tokio::test]
async fn refunds_that_cannot_be_asked_for_are_refused_without_a_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(answer(200, "{}"))
        .expect(0)
        .mount(&server)
        .await;
    let gateway = gateway(&server.uri(), NOW_MS);
    let mut bad_id = refund_request(400, 990);
    bad_id.refund_id = "rf/../x".into();
    let mut usd = refund_request(400, 990);
    usd.amount = Money::from_minor(400, Currency::Usd).unwrap();
    for request in [bad_id, usd, refund_request(991, 990)] {
        assert!(matches!(
            gateway.refund(&request).await,
            Err(GatewayError::Rejected(_))
        ));
    }
}

/// The settings of a merchant in certificate mode (no public key).
fn certificate_mode(base_url: &str) -> Value {
    let mut settings = settings_json(base_url);
    let object = settings.as_object_mut().unwrap();
    object.remove("platformPublicKey");
    object.remove("platformPublicKeyId");
    object.insert("platformCertificates".into(), json!(true));
    settings
}

/// A `/v3/certificates` answer carrying `pem` under `serial_no`, signed by `key_pem` under
/// `signed_serial`.
fn certificates_answer(
    pem: &str,
    serial_no: &str,
    key_pem: &str,
    signed_serial: &str,
) -> ResponseTemplate {
    let sealed = aes_256_gcm_encrypt(
        API_V3_KEY.as_bytes(),
        b"certnonce001",
        b"certificate",
        pem.as_bytes(),
    )
    .unwrap();
    let body = json!({ "data": [{
        "serial_no": serial_no,
        "effective_time": "2025-01-01T00:00:00+08:00",
        "expire_time": "2030-01-01T00:00:00+08:00",
        "encrypt_certificate": { "algorithm": "AEAD_AES_256_GCM", "nonce": "certnonce001",
            "associated_data": "certificate", "ciphertext": b64(&sealed) }
    }]})
    .to_string();
    let key = private_key(key_pem).unwrap();
    let timestamp_s = NOTIFIED_MS / 1000;
    let message = transformers::response_message(timestamp_s, "certnonce", body.as_bytes());
    ResponseTemplate::new(200)
        .insert_header("content-type", "application/json")
        .insert_header("wechatpay-timestamp", timestamp_s.to_string().as_str())
        .insert_header("wechatpay-nonce", "certnonce")
        .insert_header(
            "wechatpay-signature",
            b64(&rsa_sha256_sign(&key, &message)).as_str(),
        )
        .insert_header("wechatpay-serial", signed_serial)
        .set_body_string(body)
}

async fn certificates_server(template: ResponseTemplate, downloads: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v3/certificates"))
        .respond_with(template)
        .expect(downloads)
        .mount(&server)
        .await;
    server
}

/// The fixture payment notification signed by the platform certificate.
fn certificate_signed(serial: &str) -> WebhookRequest {
    let original = notification(TRANSACTION_SUCCESS);
    let body = String::from_utf8(original.body.clone()).unwrap();
    let mut request = resigned(original, body, CERT_PRIVATE);
    request
        .headers
        .insert("wechatpay-serial".into(), serial.into());
    request
}

#[tokio::test]
async fn certificate_mode_downloads_the_certificates_and_verifies_by_the_serial_named() {
    let server = certificates_server(
        certificates_answer(CERT_PEM, CERT_SERIAL, CERT_PRIVATE, CERT_SERIAL),
        1,
    )
    .await;
    let gateway = gateway_with(certificate_mode(&server.uri()), NOTIFIED_MS);
    let verified = gateway
        .verify_webhook(&certificate_signed(CERT_SERIAL))
        .await
        .unwrap();
    assert_eq!(verified.events.len(), 1);
    // Known now: no second download; lower case serials name the same certificate.
    let verified = gateway
        .verify_webhook(&certificate_signed(&CERT_SERIAL.to_ascii_lowercase()))
        .await
        .unwrap();
    assert_eq!(verified.events.len(), 1);
    // Signed by another key under the certificate's serial: refused.
    let mut forged = certificate_signed(CERT_SERIAL);
    let body = String::from_utf8(forged.body.clone()).unwrap();
    forged = resigned(forged, body, PLATFORM_PRIVATE);
    assert_eq!(
        gateway.verify_webhook(&forged).await,
        Err(WebhookError::BadSignature)
    );
    // The public key is not trusted in certificate-only mode.
    assert_eq!(
        gateway
            .verify_webhook(&notification(TRANSACTION_SUCCESS))
            .await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn an_unknown_serial_downloads_the_certificates_again_at_most_once_a_minute() {
    let server = certificates_server(
        certificates_answer(CERT_PEM, CERT_SERIAL, CERT_PRIVATE, CERT_SERIAL),
        1,
    )
    .await;
    let unknown = certificate_signed("0123456789ABCDEF");
    let gateway = gateway_with(certificate_mode(&server.uri()), NOTIFIED_MS);
    for _ in 0..3 {
        assert_eq!(
            gateway.verify_webhook(&unknown).await,
            Err(WebhookError::BadSignature)
        );
    }
    // A known serial needs no download; junk without a signature never triggers one.
    assert!(
        gateway
            .verify_webhook(&certificate_signed(CERT_SERIAL))
            .await
            .is_ok()
    );
    let mut unsigned = unknown.clone();
    unsigned.headers.remove("wechatpay-signature");
    assert_eq!(
        gateway.verify_webhook(&unsigned).await,
        Err(WebhookError::MissingSignature)
    );
}

#[tokio::test]
async fn the_refresh_window_is_one_minute_on_the_gateways_clock() {
    let server = certificates_server(
        certificates_answer(CERT_PEM, CERT_SERIAL, CERT_PRIVATE, CERT_SERIAL),
        2,
    )
    .await;
    let clock = Arc::new(FixedClock::at(NOTIFIED_MS - 30_000));
    let settings: WalletQrSettings =
        serde_json::from_value(certificate_mode(&server.uri())).unwrap();
    let gateway = WalletQrGateway::new(
        &settings,
        GatewayContext {
            http: ProviderHttp::new(&settings.http()).unwrap(),
            clock: clock.clone(),
            sandbox: false,
        },
    )
    .unwrap();
    let unknown = certificate_signed("0123456789ABCDEF");
    let _ = gateway.verify_webhook(&unknown).await; // download 1 at T-30 s
    clock.advance_ms(59_000);
    let _ = gateway.verify_webhook(&unknown).await; // 59 s later: none
    clock.advance_ms(1_000);
    let _ = gateway.verify_webhook(&unknown).await; // 60 s later: download 2
}

#[tokio::test]
async fn switching_merchants_trust_the_public_key_and_the_certificates() {
    let server = certificates_server(
        certificates_answer(CERT_PEM, CERT_SERIAL, CERT_PRIVATE, CERT_SERIAL),
        1,
    )
    .await;
    let mut both = settings_json(&server.uri());
    both["platformCertificates"] = json!(true);
    let gateway = gateway_with(both, NOTIFIED_MS);
    assert!(
        gateway
            .verify_webhook(&notification(TRANSACTION_SUCCESS))
            .await
            .is_ok()
    );
    assert!(
        gateway
            .verify_webhook(&certificate_signed(CERT_SERIAL))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn public_key_mode_never_downloads_certificates() {
    let server = certificates_server(
        certificates_answer(CERT_PEM, CERT_SERIAL, CERT_PRIVATE, CERT_SERIAL),
        0,
    )
    .await;
    let gateway = gateway(&server.uri(), NOTIFIED_MS);
    assert_eq!(
        gateway
            .verify_webhook(&certificate_signed(CERT_SERIAL))
            .await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn certificates_that_are_not_what_they_claim_or_come_unsigned_are_not_trusted() {
    for (template, serial) in [
        // The serial_no is not the certificate's own serial: a notification under the claimed
        // serial is not trusted, though the key inside did sign it.
        (
            certificates_answer(CERT_PEM, "0A0B0C", CERT_PRIVATE, "0A0B0C"),
            "0A0B0C",
        ),
        // The answer is signed by a key the list does not carry.
        (
            certificates_answer(CERT_PEM, CERT_SERIAL, PLATFORM_PRIVATE, CERT_SERIAL),
            CERT_SERIAL,
        ),
        // Not a certificate.
        (
            certificates_answer(
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----",
                CERT_SERIAL,
                CERT_PRIVATE,
                CERT_SERIAL,
            ),
            CERT_SERIAL,
        ),
    ] {
        let server = certificates_server(template, 1).await;
        let gateway = gateway_with(certificate_mode(&server.uri()), NOTIFIED_MS);
        assert_eq!(
            gateway.verify_webhook(&certificate_signed(serial)).await,
            Err(WebhookError::BadSignature),
            "{serial}"
        );
    }
}

#[tokio::test]
async fn api_answers_signed_by_a_platform_certificate_verify_in_certificate_mode() {
    let server = certificates_server(
        certificates_answer(CERT_PEM, CERT_SERIAL, CERT_PRIVATE, CERT_SERIAL),
        1,
    )
    .await;
    Mock::given(method("GET"))
        .and(path(format!("/v3/pay/transactions/out-trade-no/{ORDER}")))
        .respond_with(answer_as(
            200,
            &transaction("NOTPAY", "CNY"),
            CERT_PRIVATE,
            CERT_SERIAL,
        ))
        .mount(&server)
        .await;
    // Between the answer's and the certificate list's signing times.
    let status = gateway_with(certificate_mode(&server.uri()), NOW_MS + 150_000)
        .query_payment(&payment_ref())
        .await
        .unwrap();
    assert_eq!(status, PaymentStatus::Pending);
}

#[test]
fn a_merchant_needs_the_public_key_with_its_id_or_certificate_mode() {
    let context = || support::context(&gateways::HttpSettings::new("http://x"), NOW_MS, false);
    let build = |json: Value| {
        let settings: WalletQrSettings = serde_json::from_value(json).unwrap();
        WalletQrGateway::new(&settings, context())
    };
    let mut neither = certificate_mode("http://x");
    neither["platformCertificates"] = json!(false);
    assert_eq!(build(neither).unwrap_err().field, "platformPublicKey");
    let mut key_only = settings_json("http://x");
    key_only
        .as_object_mut()
        .unwrap()
        .remove("platformPublicKeyId");
    assert_eq!(build(key_only).unwrap_err().field, "platformPublicKeyId");
    let mut id_only = settings_json("http://x");
    id_only.as_object_mut().unwrap().remove("platformPublicKey");
    assert_eq!(build(id_only).unwrap_err().field, "platformPublicKey");
    assert!(build(certificate_mode("http://x")).is_ok());
}

#[test]
fn the_certificate_key_is_read_from_the_der_structure() {
    let (serial, spki) = transformers::certificate_key(CERT_PEM).unwrap();
    assert_eq!(serial, CERT_SERIAL);
    let from_cert = public_key(&b64(&spki)).unwrap();
    let expected = private_key(CERT_PRIVATE).unwrap().to_public_key();
    assert_eq!(from_cert, expected);
    assert!(
        transformers::certificate_key(
            "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----"
        )
        .is_none()
    );
    assert_eq!(
        transformers::normalized_serial("00ab").as_deref(),
        Some("AB")
    );
    assert_eq!(transformers::normalized_serial("PUB_KEY_ID_1"), None);
}

#[tokio::test]
async fn a_credential_check_looks_up_an_order_that_does_not_exist_and_order_not_exist_accepts() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(
            "/v3/pay/transactions/out-trade-no/tally_credential_check",
        ))
        .and(query_param("mchid", MCH_ID))
        .respond_with(answer(
            404,
            r#"{"code":"ORDER_NOT_EXIST","message":"订单不存在"}"#,
        ))
        .expect(1)
        .mount(&server)
        .await;
    let check = gateway(&server.uri(), NOW_MS)
        .check_credentials()
        .await
        .unwrap();
    assert_eq!(
        check.mode,
        CredentialMode::Live,
        "WeChat Pay has no test mode"
    );
    let requests = server.received_requests().await.unwrap();
    let authorization = requests[0].headers["authorization"].to_str().unwrap();
    assert!(
        authorization.starts_with("WECHATPAY2-SHA256-RSA2048 "),
        "{authorization}"
    );
}

#[tokio::test]
async fn a_credential_check_reports_a_refused_signature_with_wechat_pays_code() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_string(r#"{"code":"SIGN_ERROR","message":"signature does not verify"}"#),
        )
        .mount(&server)
        .await;
    let check = gateway(&server.uri(), NOW_MS).check_credentials().await;
    let Err(GatewayError::Rejected(why)) = check else {
        panic!("expected a refusal, got {check:?}");
    };
    assert!(why.contains("SIGN_ERROR"), "{why}");
    assert!(!why.contains(API_V3_KEY), "{why}");
}

#[tokio::test]
async fn a_credential_check_of_an_unreachable_api_is_unreachable() {
    let check = gateway("http://127.0.0.1:9", NOW_MS)
        .check_credentials()
        .await;
    assert!(
        matches!(check, Err(GatewayError::Unreachable(_))),
        "{check:?}"
    );
}

#[test]
fn wechat_pay_settings_are_never_test_mode() {
    let settings: WalletQrSettings =
        serde_json::from_value(settings_json("https://api.mch.weixin.qq.com")).unwrap();
    assert_eq!(settings.test_mode(), None);
}
