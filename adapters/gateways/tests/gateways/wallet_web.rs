//! The Alipay PC website payment gateway against wiremock and against fixtures computed
//! independently (Python `cryptography` and `openssl dgst`, see
//! `fixtures/wallet_web/generate.py`).

use std::collections::BTreeMap;

use crate::support::{self, cny};
use application::ports::{
    AckFor, CheckoutRequest, CheckoutTarget, CredentialMode, GatewayError, PaymentEvent,
    PaymentGateway, PaymentRef, PaymentStatus, WebhookError, WebhookRequest,
};
use domain::{
    Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanType, Timestamp, UserId,
};
use gateways::shared::signing::{
    b64, private_key, public_key, public_key_base64, rsa_sha256_sign, rsa_sha256_verify, unb64,
};
use gateways::wallet_web::transformers;
use gateways::wallet_web::{WalletWebGateway, WalletWebSettings};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const APP_PRIVATE: &str = include_str!("../../../sandbox/keys/merchant_private.pem");
const APP_PUBLIC: &str = include_str!("../../../sandbox/keys/merchant_public.pem");
const ALIPAY_PRIVATE: &str = include_str!("../../../sandbox/keys/provider_private.pem");
const ALIPAY_PUBLIC: &str = include_str!("../../../sandbox/keys/provider_public.pem");
const PAGE_PAY: &str = include_str!("../../fixtures/wallet_web/page_pay.json");
const NOTIFY_SUCCESS: &str = include_str!("../../fixtures/wallet_web/notify_trade_success.form");
const NOTIFY_CLOSED: &str = include_str!("../../fixtures/wallet_web/notify_trade_closed.form");
const NOTIFY_REFUND_PARTIAL: &str =
    include_str!("../../fixtures/wallet_web/notify_refund_partial.form");
const NOTIFY_REFUND_FULL: &str = include_str!("../../fixtures/wallet_web/notify_refund_full.form");
const NOTIFY_WAIT: &str = include_str!("../../fixtures/wallet_web/notify_wait_buyer_pay.form");
const QUERY_SUCCESS: &str = include_str!("../../fixtures/wallet_web/query_trade_success.json");
const QUERY_CLOSED: &str = include_str!("../../fixtures/wallet_web/query_trade_closed.json");
const QUERY_WAIT: &str = include_str!("../../fixtures/wallet_web/query_wait_buyer_pay.json");
const QUERY_NOT_EXIST: &str = include_str!("../../fixtures/wallet_web/query_trade_not_exist.json");
const CLOSE_SUCCESS: &str = include_str!("../../fixtures/wallet_web/close_success.json");
const CLOSE_NOT_EXIST: &str = include_str!("../../fixtures/wallet_web/close_trade_not_exist.json");
const CLOSE_STATUS_ERROR: &str = include_str!("../../fixtures/wallet_web/close_status_error.json");
const APP_ID: &str = "wx_sandbox_tally";
const ORDER: &str = "ord_000000000001";
/// 2026-01-01T00:00:00Z = 08:00 in Beijing.
const NOW_MS: i64 = 1_767_225_600_000;
/// 2026-01-01 08:05:00 in Beijing.
const PAID_MS: i64 = 1_767_225_900_000;

fn settings_json(base_url: &str) -> Value {
    json!({
        "appId": APP_ID,
        "appPrivateKey": APP_PRIVATE,
        "alipayPublicKey": ALIPAY_PUBLIC,
        "baseUrl": base_url,
    })
}

fn gateway_with(settings: Value) -> WalletWebGateway {
    let settings: WalletWebSettings = serde_json::from_value(settings).unwrap();
    let context = support::context(&settings.http(), NOW_MS, false);
    WalletWebGateway::new(&settings, context).unwrap()
}

fn gateway(base_url: &str) -> WalletWebGateway {
    gateway_with(settings_json(base_url))
}

fn checkout_request(currency: &str) -> CheckoutRequest {
    let i18n = support::english("Pro lifetime");
    let plan = Plan::from_draft(&PlanDraft {
        id: "pro-lifetime".into(),
        provider: Some(
            if currency == "CNY" {
                "wallet_web"
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
    .unwrap();
    CheckoutRequest {
        save_method: false,
        order_id: OrderId::new(ORDER).unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        customer_email: None,
        customer_name: None,
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: "https://tally.example/payment/success?orderId=ord_000000000001".into(),
        cancel_url: "https://tally.example/payment/cancel".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_web".into(),
        expires_at: Timestamp::from_unix_millis(NOW_MS + 30 * 60_000),
    }
}

fn payment_ref() -> PaymentRef {
    PaymentRef {
        order_id: OrderId::new(ORDER).unwrap(),
        provider_reference: None,
    }
}

fn form(body: &str) -> BTreeMap<String, String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(body)
        .unwrap()
        .into_iter()
        .collect()
}

fn notify(body: &str) -> WebhookRequest {
    let mut headers = BTreeMap::new();
    headers.insert(
        "content-type".to_owned(),
        "application/x-www-form-urlencoded; charset=utf-8".to_owned(),
    );
    WebhookRequest {
        headers,
        body: body.as_bytes().to_vec(),
    }
}

/// `params` signed as Alipay signs notifications, with `key_pem`.
fn signed_notify(mut params: BTreeMap<String, String>, key_pem: &str) -> WebhookRequest {
    let content = transformers::notification_sign_content(&params);
    let sign = b64(&rsa_sha256_sign(
        &private_key(key_pem).unwrap(),
        content.as_bytes(),
    ));
    params.insert("sign".into(), sign);
    notify(&serde_urlencoded::to_string(&params).unwrap())
}

/// Run one gateway call against a gateway.do that answers `body`; return the form sent.
async fn with_answer<T>(
    body: &str,
    call: impl AsyncFnOnce(&WalletWebGateway) -> T,
) -> (T, BTreeMap<String, String>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/gateway.do"))
        .and(header(
            "content-type",
            "application/x-www-form-urlencoded;charset=utf-8",
        ))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/html;charset=utf-8")
                .set_body_string(body),
        )
        .expect(1)
        .mount(&server)
        .await;
    let result = call(&gateway(&server.uri())).await;
    let requests = server.received_requests().await.unwrap();
    let sent = form(std::str::from_utf8(&requests[0].body).unwrap());
    (result, sent)
}

fn assert_signed_call(sent: &BTreeMap<String, String>, method: &str) {
    assert_eq!(sent["method"], method);
    assert_eq!(sent["app_id"], APP_ID);
    assert_eq!(sent["sign_type"], "RSA2");
    assert_eq!(sent["charset"], "utf-8");
    assert_eq!(sent["timestamp"], "2026-01-01 08:00:00");
    assert_eq!(
        sent["biz_content"],
        r#"{"out_trade_no":"ord_000000000001"}"#
    );
    let content = transformers::request_sign_content(sent);
    assert!(rsa_sha256_verify(
        &public_key(APP_PUBLIC).unwrap(),
        content.as_bytes(),
        &unb64(&sent["sign"]).unwrap()
    ));
}

#[tokio::test]
async fn the_page_pay_url_carries_the_documented_parameters_signed_as_computed_with_openssl() {
    let checkout = gateway("https://openapi.alipay.com")
        .create_checkout(&checkout_request("CNY"))
        .await
        .unwrap();
    let CheckoutTarget::Redirect(url) = checkout.target else {
        panic!("expected a redirect");
    };
    let (gateway_url, query) = url.split_once('?').unwrap();
    assert_eq!(gateway_url, "https://openapi.alipay.com/gateway.do");
    let expected: Value = serde_json::from_str(PAGE_PAY).unwrap();
    let expected: BTreeMap<String, String> = expected["params"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(form(query), expected);
}

#[tokio::test]
async fn query_payment_sends_a_signed_trade_query_and_maps_each_trade_status() {
    let (status, sent) = with_answer(QUERY_SUCCESS, async |g| {
        g.query_payment(&payment_ref()).await
    })
    .await;
    assert_signed_call(&sent, "alipay.trade.query");
    assert_eq!(
        status.unwrap(),
        PaymentStatus::Succeeded {
            amount: cny(990),
            paid_at: Timestamp::from_unix_millis(PAID_MS),
        }
    );
    let (status, _) = with_answer(QUERY_CLOSED, async |g| {
        g.query_payment(&payment_ref()).await
    })
    .await;
    assert!(matches!(status.unwrap(), PaymentStatus::Failed { .. }));
    for body in [QUERY_WAIT, QUERY_NOT_EXIST] {
        let (status, _) = with_answer(body, async |g| g.query_payment(&payment_ref()).await).await;
        assert_eq!(status.unwrap(), PaymentStatus::Pending);
    }
}

#[tokio::test]
async fn query_payment_refuses_answers_that_are_tampered_or_unsigned() {
    let tampered = QUERY_SUCCESS.replace(r#""total_amount":"9.90""#, r#""total_amount":"0.01""#);
    let (status, _) = with_answer(&tampered, async |g| g.query_payment(&payment_ref()).await).await;
    assert!(
        matches!(status, Err(GatewayError::BadResponse(_))),
        "{status:?}"
    );
    let unsigned = &QUERY_SUCCESS[..QUERY_SUCCESS.find(r#","sign""#).unwrap()];
    let unsigned = format!("{unsigned}}}");
    let (status, _) = with_answer(&unsigned, async |g| g.query_payment(&payment_ref()).await).await;
    assert!(
        matches!(status, Err(GatewayError::BadResponse(_))),
        "{status:?}"
    );
    let garbage = "<html>busy</html>";
    let (status, _) = with_answer(garbage, async |g| g.query_payment(&payment_ref()).await).await;
    assert!(
        matches!(status, Err(GatewayError::BadResponse(_))),
        "{status:?}"
    );
}

#[tokio::test]
async fn close_payment_closes_the_trade_and_accepts_a_trade_that_does_not_exist_yet() {
    let (result, sent) = with_answer(CLOSE_SUCCESS, async |g| {
        g.close_payment(&payment_ref()).await
    })
    .await;
    assert_signed_call(&sent, "alipay.trade.close");
    result.unwrap();
    let (result, _) = with_answer(CLOSE_NOT_EXIST, async |g| {
        g.close_payment(&payment_ref()).await
    })
    .await;
    result.unwrap();
    let (result, _) = with_answer(CLOSE_STATUS_ERROR, async |g| {
        g.close_payment(&payment_ref()).await
    })
    .await;
    let Err(GatewayError::Rejected(message)) = result else {
        panic!("expected a rejection, got {result:?}");
    };
    assert!(message.contains("ACQ.TRADE_STATUS_ERROR"), "{message}");
}

#[tokio::test]
async fn subscriptions_other_currencies_and_order_ids_alipay_refuses_are_not_sent() {
    let gateway = gateway("https://openapi.alipay.com");
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
    let mut hyphen = checkout_request("CNY");
    hyphen.order_id = OrderId::new("ord-1").unwrap();
    assert!(matches!(
        gateway.create_checkout(&hyphen).await,
        Err(GatewayError::Rejected(_))
    ));
}

#[tokio::test]
async fn a_trade_success_notification_becomes_a_payment_of_the_exact_amount() {
    let verified = gateway("http://unused")
        .verify_webhook(&notify(NOTIFY_SUCCESS))
        .await
        .unwrap();
    assert_eq!(verified.event_id, "2026010100222080501000000001");
    assert_eq!(verified.event_type, "trade_status_sync.TRADE_SUCCESS");
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
    assert_eq!(occurred_at.unix_millis(), PAID_MS);
}

#[tokio::test]
async fn a_trade_closed_notification_becomes_a_failed_payment() {
    let verified = gateway("http://unused")
        .verify_webhook(&notify(NOTIFY_CLOSED))
        .await
        .unwrap();
    assert!(matches!(
        verified.events.as_slice(),
        [PaymentEvent::PaymentFailed { .. }]
    ));
}

#[tokio::test]
async fn refund_notifications_become_refunds_of_the_total_refunded_so_far() {
    let gateway = gateway("http://unused");
    for (body, fen, at_ms) in [
        (NOTIFY_REFUND_PARTIAL, 495, 1_767_229_200_125),
        (NOTIFY_REFUND_FULL, 990, 1_767_229_800_000),
    ] {
        let verified = gateway.verify_webhook(&notify(body)).await.unwrap();
        assert_eq!(verified.event_type, "trade_status_sync.refund");
        let [
            PaymentEvent::Refunded {
                charge: application::ports::RefundedCharge::Order(order),
                refund: application::ports::RefundReport::Total(total_refunded),
                occurred_at,
            },
        ] = verified.events.as_slice()
        else {
            panic!("expected one refund, got {:?}", verified.events);
        };
        assert_eq!(order.order_id, Some(OrderId::new(ORDER).unwrap()));
        assert_eq!(*total_refunded, cny(fen));
        assert_eq!(occurred_at.unix_millis(), at_ms);
    }
}

#[tokio::test]
async fn notifications_tally_does_not_act_on_verify_and_carry_no_events() {
    let verified = gateway("http://unused")
        .verify_webhook(&notify(NOTIFY_WAIT))
        .await
        .unwrap();
    assert_eq!(verified.event_type, "trade_status_sync.WAIT_BUYER_PAY");
    assert!(verified.events.is_empty());
}

#[tokio::test]
async fn a_tampered_form_or_a_signature_by_another_key_is_refused() {
    let gateway = gateway("http://unused");
    let tampered = NOTIFY_SUCCESS.replace("total_amount=9.90", "total_amount=0.01");
    assert_eq!(
        gateway.verify_webhook(&notify(&tampered)).await,
        Err(WebhookError::BadSignature)
    );
    let mut params = form(NOTIFY_SUCCESS);
    params.remove("sign");
    assert_eq!(
        gateway
            .verify_webhook(&signed_notify(params, APP_PRIVATE))
            .await,
        Err(WebhookError::BadSignature)
    );
}

#[tokio::test]
async fn a_missing_or_malformed_sign_is_refused() {
    let gateway = gateway("http://unused");
    let mut params = form(NOTIFY_SUCCESS);
    params.remove("sign");
    let unsigned = serde_urlencoded::to_string(&params).unwrap();
    assert_eq!(
        gateway.verify_webhook(&notify(&unsigned)).await,
        Err(WebhookError::MissingSignature)
    );
    params.insert("sign".into(), "not*base64".into());
    let malformed = serde_urlencoded::to_string(&params).unwrap();
    assert_eq!(
        gateway.verify_webhook(&notify(&malformed)).await,
        Err(WebhookError::MissingSignature)
    );
    let duplicated = format!("{NOTIFY_SUCCESS}&sign=abcd");
    assert_eq!(
        gateway.verify_webhook(&notify(&duplicated)).await,
        Err(WebhookError::MissingSignature)
    );
}

#[tokio::test]
async fn a_signed_notification_for_another_app_is_foreign_and_one_without_notify_id_is_refused() {
    let gateway = gateway("http://unused");
    let mut params = form(NOTIFY_SUCCESS);
    params.remove("sign");
    params.insert("app_id".into(), "2021000000000000".into());
    let verified = gateway
        .verify_webhook(&signed_notify(params.clone(), ALIPAY_PRIVATE))
        .await
        .unwrap();
    assert!(verified.events.is_empty());
    assert!(verified.foreign.unwrap().contains("app_id"));
    let mut no_app = params.clone();
    no_app.remove("app_id");
    let verified = gateway
        .verify_webhook(&signed_notify(no_app, ALIPAY_PRIVATE))
        .await
        .unwrap();
    assert!(verified.events.is_empty() && verified.foreign.is_some());
    params.insert("app_id".into(), APP_ID.into());
    params.remove("notify_id");
    assert!(matches!(
        gateway
            .verify_webhook(&signed_notify(params, ALIPAY_PRIVATE))
            .await,
        Err(WebhookError::Malformed(_))
    ));
}

#[test]
fn the_acknowledgement_is_the_plain_word_alipay_expects() {
    let gateway = gateway("http://unused");
    let accepted = gateway.webhook_ack(&AckFor::Accepted);
    assert_eq!(
        (accepted.verdict, accepted.body.as_str()),
        (application::ports::AckVerdict::Accepted, "success")
    );
    let refused = gateway.webhook_ack(&AckFor::Refused(WebhookError::BadSignature));
    assert_eq!(
        (refused.verdict, refused.body.as_str()),
        (application::ports::AckVerdict::Refused, "fail")
    );
}

#[test]
fn settings_take_bare_base64_or_pem_keys_and_never_show_the_private_key() {
    let bare = public_key_base64(&public_key(ALIPAY_PUBLIC).unwrap());
    let mut json = settings_json("http://x");
    json["alipayPublicKey"] = json!(bare);
    let settings: WalletWebSettings = serde_json::from_value(json).unwrap();
    assert!(!format!("{settings:?}").contains("PRIVATE KEY"));
    assert_eq!(settings.http().base_url, "http://x");
    let context = support::context(&settings.http(), NOW_MS, true);
    let gateway = WalletWebGateway::new(&settings, context).unwrap();
    assert!(gateway.is_sandbox());
    let mut defaults = settings_json("http://x");
    defaults.as_object_mut().unwrap().remove("baseUrl");
    let defaults: WalletWebSettings = serde_json::from_value(defaults).unwrap();
    assert_eq!(defaults.http().base_url, "https://openapi.alipay.com");
    let mut unknown = settings_json("http://x");
    unknown["signType"] = json!("RSA");
    assert!(serde_json::from_value::<WalletWebSettings>(unknown).is_err());
}

#[test]
fn unreadable_keys_are_configuration_errors_naming_the_field_and_not_the_value() {
    for (field, value) in [
        ("appPrivateKey", "TUlJc2VjcmV0"),
        ("alipayPublicKey", "TUlJc2VjcmV0"),
        ("appId", ""),
    ] {
        let mut json = settings_json("http://x");
        json[field] = json!(value);
        let settings: WalletWebSettings = serde_json::from_value(json).unwrap();
        let context = support::context(&settings.http(), NOW_MS, false);
        let error = WalletWebGateway::new(&settings, context).unwrap_err();
        assert_eq!(error.field, field);
        assert!(!error.to_string().contains("TUlJc2VjcmV0"));
    }
}

// ---------------------------------------------------------------------------------------------
// seller_id and alipay.trade.refund (issue 15).

/// The seller of the fixture notifications (Alipay's documented example).
const FIXTURE_SELLER: &str = "2088102177649450";

fn gateway_of_seller(seller_id: &str) -> WalletWebGateway {
    let mut settings = settings_json("http://unused");
    settings["sellerId"] = json!(seller_id);
    gateway_with(settings)
}

#[tokio::test]
async fn a_configured_seller_id_makes_another_sellers_notifications_foreign() {
    let ours = gateway_of_seller(FIXTURE_SELLER)
        .verify_webhook(&notify(NOTIFY_SUCCESS))
        .await
        .unwrap();
    assert_eq!((ours.events.len(), ours.foreign), (1, None));
    let theirs = gateway_of_seller("2088000000000999")
        .verify_webhook(&notify(NOTIFY_SUCCESS))
        .await
        .unwrap();
    assert!(theirs.events.is_empty());
    assert!(theirs.foreign.unwrap().contains("seller_id"));
    let refund = gateway_of_seller("2088000000000999")
        .verify_webhook(&notify(NOTIFY_REFUND_PARTIAL))
        .await
        .unwrap();
    assert!(refund.events.is_empty() && refund.foreign.is_some());
    // Without a seller_id setting, the seller is not checked.
    let unchecked = gateway("http://unused")
        .verify_webhook(&notify(NOTIFY_SUCCESS))
        .await
        .unwrap();
    assert_eq!((unchecked.events.len(), unchecked.foreign), (1, None));
    // Configured, a notification naming no seller is not proven ours.
    let mut params = form(NOTIFY_SUCCESS);
    params.remove("sign");
    params.remove("seller_id");
    let anonymous = gateway_of_seller(FIXTURE_SELLER)
        .verify_webhook(&signed_notify(params, ALIPAY_PRIVATE))
        .await
        .unwrap();
    assert!(anonymous.events.is_empty() && anonymous.foreign.is_some());
}

/// `{"alipay_trade_refund_response": response, "sign": …}` signed with Alipay's key.
fn refund_answer(response: &Value) -> String {
    let raw = response.to_string();
    let sign = b64(&rsa_sha256_sign(
        &private_key(ALIPAY_PRIVATE).unwrap(),
        raw.as_bytes(),
    ));
    format!(r#"{{"alipay_trade_refund_response":{raw},"sign":"{sign}"}}"#)
}

fn refund_response(fund_change: &str, refund_fee: &str) -> Value {
    json!({
        "code": "10000", "msg": "Success", "trade_no": "2026010122001400000000000001",
        "out_trade_no": ORDER, "buyer_logon_id": "159****5620", "fund_change": fund_change,
        "refund_fee": refund_fee, "gmt_refund_pay": "2026-01-01 08:00:01",
        "buyer_user_id": "2088101117955611"
    })
}

fn refund_request(fen: i64) -> application::ports::RefundRequest {
    application::ports::RefundRequest {
        payment: payment_ref(),
        refund_id: format!("rf_{ORDER}_{fen}"),
        amount: cny(fen),
        paid: cny(990),
        reason: "customer asked".into(),
        notify_url: "https://tally.example/api/payment/webhook/wallet_web".into(),
    }
}

#[tokio::test]
async fn a_refund_sends_a_signed_trade_refund_with_our_out_request_no() {
    let (result, sent) = with_answer(&refund_answer(&refund_response("Y", "4.00")), async |g| {
        g.refund(&refund_request(400)).await
    })
    .await;
    assert_eq!(
        result.unwrap(),
        application::ports::RefundStarted {
            provider_refund_id: Some(format!("rf_{ORDER}_400")),
            state: application::ports::RefundState::Succeeded,
        }
    );
    assert_eq!(sent["method"], "alipay.trade.refund");
    assert_eq!(sent["app_id"], APP_ID);
    assert_eq!(sent["sign_type"], "RSA2");
    let content: Value = serde_json::from_str(&sent["biz_content"]).unwrap();
    assert_eq!(
        content,
        json!({
            "out_trade_no": ORDER,
            "refund_amount": "4.00",
            "out_request_no": format!("rf_{ORDER}_400"),
            "refund_reason": "customer asked"
        })
    );
    let sign_content = transformers::request_sign_content(&sent);
    assert!(rsa_sha256_verify(
        &public_key(APP_PUBLIC).unwrap(),
        sign_content.as_bytes(),
        &unb64(&sent["sign"]).unwrap()
    ));
}

#[tokio::test]
async fn refund_answers_map_fund_change_and_errors() {
    use application::ports::RefundState;
    let error = |code: &str, sub_code: &str| {
        refund_answer(
            &json!({ "code": code, "msg": "Business Failed", "sub_code": sub_code,
            "sub_msg": "交易状态不合法" }),
        )
    };
    let mut other_order = refund_response("Y", "4.00");
    other_order["out_trade_no"] = json!("ord_other_000001");
    let unsigned = format!(
        r#"{{"alipay_trade_refund_response":{}}}"#,
        refund_response("Y", "4.00")
    );
    let cases: Vec<(String, &str)> = vec![
        (refund_answer(&refund_response("Y", "9.90")), "succeeded"),
        (refund_answer(&refund_response("N", "4.00")), "pending"),
        (refund_answer(&refund_response("Y", "3.99")), "bad"),
        (refund_answer(&other_order), "bad"),
        (unsigned, "bad"),
        (error("40004", "ACQ.TRADE_STATUS_ERROR"), "rejected"),
        (error("20000", "ACQ.SYSTEM_ERROR"), "unreachable"),
    ];
    for (body, expected) in cases {
        let (result, _) = with_answer(&body, async |g| g.refund(&refund_request(400)).await).await;
        match (expected, &result) {
            ("succeeded", Ok(s)) if s.state == RefundState::Succeeded => {}
            ("pending", Ok(s)) if s.state == RefundState::Pending => {}
            ("bad", Err(GatewayError::BadResponse(_)))
            | ("rejected", Err(GatewayError::Rejected(_)))
            | ("unreachable", Err(GatewayError::Unreachable(_))) => {}
            _ => panic!("{expected}: {result:?}"),
        }
    }
}

#[tokio::test]
async fn refunds_alipay_would_refuse_are_not_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&server)
        .await;
    let gateway = gateway(&server.uri());
    let mut bad_id = refund_request(400);
    bad_id.refund_id = "rf&method=alipay.trade.close".into();
    let mut usd = refund_request(400);
    usd.amount = Money::from_minor(400, Currency::Usd).unwrap();
    for request in [bad_id, usd, refund_request(991)] {
        assert!(matches!(
            gateway.refund(&request).await,
            Err(GatewayError::Rejected(_))
        ));
    }
}

#[tokio::test]
async fn a_credential_check_queries_a_trade_that_does_not_exist_and_trade_not_exist_accepts() {
    let (check, sent) = with_answer(QUERY_NOT_EXIST, async |g| g.check_credentials().await).await;
    let check = check.unwrap();
    assert_eq!(
        check.mode,
        CredentialMode::Live,
        "not Alipay's sandbox host"
    );
    assert!(check.detail.contains("ACQ.TRADE_NOT_EXIST"), "{check:?}");
    assert_eq!(sent["method"], "alipay.trade.query");
    assert_eq!(sent["app_id"], APP_ID);
    assert!(sent.contains_key("sign"), "{sent:?}");
    let content: Value = serde_json::from_str(&sent["biz_content"]).unwrap();
    assert_eq!(content["out_trade_no"], "tally_credential_check");
}

#[tokio::test]
async fn a_credential_check_reports_alipays_refusal_of_the_app_or_signature() {
    for sub_code in ["isv.invalid-signature", "isv.invalid-app-id"] {
        let refusal = format!(
            r#"{{"alipay_trade_query_response":{{"code":"40002","msg":"Invalid Arguments","sub_code":"{sub_code}","sub_msg":"refused"}}}}"#
        );
        let (check, _) = with_answer(&refusal, async |g| g.check_credentials().await).await;
        match check {
            Err(GatewayError::Rejected(why)) => {
                assert!(why.contains("40002") && why.contains(sub_code), "{why}");
                assert!(!why.contains("PRIVATE"), "{why}");
            }
            other => panic!("{sub_code}: {other:?}"),
        }
    }
    // A trade-not-exist answer signed by another key proves a wrong Alipay public key.
    let forged = QUERY_NOT_EXIST.replace("交易不存在", "trade missing");
    let (check, _) = with_answer(&forged, async |g| g.check_credentials().await).await;
    assert!(
        matches!(check, Err(GatewayError::BadResponse(_))),
        "{check:?}"
    );
}

#[tokio::test]
async fn a_credential_check_of_an_unreachable_gateway_is_unreachable() {
    let check = gateway("http://127.0.0.1:9").check_credentials().await;
    assert!(
        matches!(check, Err(GatewayError::Unreachable(_))),
        "{check:?}"
    );
}

#[test]
fn only_the_alipay_sandbox_gateway_is_test_mode() {
    let settings = |base_url: Value| {
        let mut json = settings_json("https://openapi.alipay.com");
        json["baseUrl"] = base_url;
        serde_json::from_value::<WalletWebSettings>(json).unwrap()
    };
    for sandbox in [
        "https://openapi-sandbox.dl.alipaydev.com",
        "https://openapi.alipaydev.com/",
    ] {
        let setting = settings(json!(sandbox)).test_mode().expect(sandbox);
        assert_eq!(setting.field, "baseUrl");
    }
    for live in [json!("https://openapi.alipay.com"), Value::Null] {
        assert_eq!(settings(live.clone()).test_mode(), None, "{live}");
    }
}
