//! End to end over real HTTP: the real WeChat Pay gateway talks to the sandbox's WeChat Pay,
//! and the sandbox's notifications reach a receiver that verifies them with the same gateway.
//! This proves that the request signatures, answer signatures, notification signatures and
//! resource encryption of the two sides interoperate.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    CheckoutRequest, CheckoutTarget, GatewayError, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, RefundReport, RefundRequest, RefundState, RefundedCharge, VerifiedWebhook,
    WebhookError, WebhookRequest,
};
use application::testing::FixedClock;
use domain::{
    Currency, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use gateways::wallet_qr::WalletQrGateway;
use gateways::wallet_qr::WalletQrSettings;

use crate::support::{self, Receiver, cny};
use sandbox::{CREDENTIALS, Sandbox, SimStatus};

/// 2026-01-01T00:00:00Z.
const NOW_MS: i64 = 1_767_225_600_000;

struct App {
    base: String,
    sandbox: Sandbox,
    gateway: WalletQrGateway,
    received: Arc<Receiver>,
}

async fn spawn() -> App {
    spawn_with(gateway_settings).await
}

/// The sandbox and a receiver, both gateways configured by `settings`.
async fn spawn_with(settings: fn(&str) -> WalletQrSettings) -> App {
    let served = support::serve(Arc::new(FixedClock::at(NOW_MS)), "/webhook", |sandbox| {
        Arc::new(gateway_of(sandbox, NOW_MS, settings))
    })
    .await;
    App {
        gateway: gateway_of(&served.sandbox, NOW_MS, settings),
        base: served.base,
        sandbox: served.sandbox,
        received: served.receiver,
    }
}

/// The gateway configured for `sandbox`, with its own clock at `now_ms`.
fn gateway(sandbox: &Sandbox, now_ms: i64) -> WalletQrGateway {
    gateway_of(sandbox, now_ms, gateway_settings)
}

fn gateway_of(
    sandbox: &Sandbox,
    now_ms: i64,
    settings: fn(&str) -> WalletQrSettings,
) -> WalletQrGateway {
    let settings = settings(&sandbox.api_base_url(ProviderId::WalletQr));
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(FixedClock::at(now_ms)),
        sandbox: true,
    };
    WalletQrGateway::new(&settings, context).unwrap()
}

fn checkout(app: &App, order: &str) -> CheckoutRequest {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: "Credits 100".into(),
            ..PlanText::default()
        },
    );
    let plan = Plan::from_draft(&PlanDraft {
        id: "credits-100".into(),
        provider: Some("wallet_qr".into()),
        amount: Some("9.90".parse().unwrap()),
        currency: Some("CNY".into()),
        duration_type: Some("credits".into()),
        credits: Some("100".parse().unwrap()),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap();
    CheckoutRequest {
        order_id: OrderId::new(order).unwrap(),
        user_id: UserId::new("usr_1").unwrap(),
        customer_email: None,
        customer_name: None,
        snapshot: PlanSnapshot::of(&plan, plan.price()),
        plan,
        success_url: format!("{}/payment/success", app.base),
        cancel_url: format!("{}/payment/cancel", app.base),
        notify_url: format!("{}/webhook", app.base),
        expires_at: Timestamp::from_unix_millis(NOW_MS + 30 * 60_000),
        save_method: false,
    }
}

fn payment_ref(order: &str) -> PaymentRef {
    PaymentRef {
        order_id: OrderId::new(order).unwrap(),
        provider_reference: None,
    }
}

/// Create a checkout and return the sandbox payment id behind its QR code.
async fn open_checkout(app: &App, order: &str) -> String {
    let created = app
        .gateway
        .create_checkout(&checkout(app, order))
        .await
        .unwrap();
    let CheckoutTarget::QrCode(code_url) = created.target else {
        panic!("expected a QR code, got {:?}", created.target);
    };
    let prefix = format!("{}/sandbox/checkout/", app.base);
    code_url.strip_prefix(&prefix).unwrap().to_owned()
}

fn take_received(app: &App) -> Vec<Result<VerifiedWebhook, WebhookError>> {
    app.received.take()
}

#[tokio::test]
async fn a_paid_qr_checkout_is_notified_verified_and_queried_as_paid_with_the_exact_amount() {
    let app = spawn().await;
    let order = "ord_e2e_paid_0001";
    let id = open_checkout(&app, order).await;
    let payment = app.sandbox.hub().payment(&id).unwrap();
    assert_eq!(
        (payment.order_id.as_str(), payment.amount_minor),
        (order, 990)
    );
    assert_eq!(payment.currency, Currency::Cny);
    assert_eq!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );

    // The buyer presses Pay on the hosted page (through the sandbox's JSON action).
    let answer = reqwest::Client::new()
        .post(format!("{}/sandbox/api/payments/{id}/pay", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert_eq!(verified.event_type, "TRANSACTION.SUCCESS");
    let [
        PaymentEvent::PaymentSucceeded {
            order: locator,
            amount,
            occurred_at,
        },
    ] = verified.events.as_slice()
    else {
        panic!("expected a payment, got {:?}", verified.events);
    };
    assert_eq!(locator.order_id, Some(OrderId::new(order).unwrap()));
    assert_eq!(*amount, cny(990));
    assert_eq!(occurred_at.unix_millis(), NOW_MS);
    let deliveries = app.sandbox.hub().deliveries();
    assert_eq!(deliveries[0].status, Some(200));
    assert_eq!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Succeeded {
            amount: cny(990),
            paid_at: Timestamp::from_unix_millis(NOW_MS),
        }
    );
}

/// The refund of a verified `REFUND.SUCCESS` notification: its order id and report.
fn refund_of(verified: &VerifiedWebhook) -> (Option<OrderId>, RefundReport) {
    assert_eq!(verified.event_type, "REFUND.SUCCESS");
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
    (order.order_id.clone(), refund.clone())
}

#[tokio::test]
async fn a_refund_is_notified_and_verified_as_one_refund_of_its_amount() {
    let app = spawn().await;
    let order = "ord_e2e_refund_01";
    let id = open_checkout(&app, order).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    take_received(&app);
    app.sandbox.hub().refund_payment(&id, 990).await.unwrap();
    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    let (order_id, refund) = refund_of(verified);
    assert_eq!(order_id, Some(OrderId::new(order).unwrap()));
    assert!(
        matches!(&refund, RefundReport::One { amount, .. } if *amount == cny(990)),
        "{refund:?}"
    );
    // REFUND is not a state Tally's status can express; it stays non-terminal.
    assert_eq!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );
}

#[tokio::test]
async fn two_partial_refunds_are_two_refunds_of_their_own_amounts_under_distinct_refund_ids() {
    let app = spawn().await;
    let order = "ord_e2e_refund_02";
    let id = open_checkout(&app, order).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    take_received(&app);
    // Two equal halves: as running totals both would read 4.95 and the second would look like
    // a resend; as single refunds with their own ids they add up to the whole 9.90.
    let mut reports = Vec::new();
    for _ in 0..2 {
        app.sandbox.hub().refund_payment(&id, 495).await.unwrap();
        let received = take_received(&app);
        let [Ok(verified)] = received.as_slice() else {
            panic!("expected one verified notification, got {received:?}");
        };
        let (order_id, refund) = refund_of(verified);
        assert_eq!(order_id, Some(OrderId::new(order).unwrap()));
        reports.push(refund);
    }
    let [
        RefundReport::One {
            refund_id: first_id,
            amount: first,
        },
        RefundReport::One {
            refund_id: second_id,
            amount: second,
        },
    ] = reports.as_slice()
    else {
        panic!("expected two single refunds, got {reports:?}");
    };
    assert_ne!(first_id, second_id);
    for refund_id in [first_id, second_id] {
        // WeChat Pay's refund_id (digits), not the dashboard's out_refund_no.
        assert!(
            refund_id.starts_with("503") && refund_id.chars().all(|c| c.is_ascii_digit()),
            "{refund_id}"
        );
    }
    assert_eq!((*first, *second), (cny(495), cny(495)));
    assert_eq!(first.amount_minor() + second.amount_minor(), 990);
    assert_eq!(app.sandbox.hub().payment(&id).unwrap().refunded_minor, 990);
}

#[tokio::test]
async fn a_declined_qr_payment_sends_no_notification_and_queries_as_failed() {
    let app = spawn().await;
    let order = "ord_e2e_declined1";
    let id = open_checkout(&app, order).await;
    app.sandbox.hub().decline_payment(&id).await.unwrap();
    assert!(take_received(&app).is_empty());
    assert!(app.sandbox.hub().deliveries().is_empty());
    assert!(matches!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Failed { .. }
    ));
}

#[tokio::test]
async fn closing_an_open_order_fails_it_and_repeating_checkout_or_close_is_harmless() {
    let app = spawn().await;
    let order = "ord_e2e_closed_01";
    let id = open_checkout(&app, order).await;
    assert_eq!(open_checkout(&app, order).await, id);
    app.gateway
        .close_payment(&payment_ref(order))
        .await
        .unwrap();
    assert_eq!(
        app.sandbox.hub().payment(&id).unwrap().status,
        SimStatus::Canceled
    );
    assert!(matches!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Failed { .. }
    ));
    app.gateway
        .close_payment(&payment_ref(order))
        .await
        .unwrap();
    assert!(matches!(
        app.gateway.create_checkout(&checkout(&app, order)).await,
        Err(GatewayError::Rejected(_))
    ));
    // Never created at WeChat Pay: pending until Tally's own expiry.
    assert_eq!(
        app.gateway
            .query_payment(&payment_ref("ord_e2e_unknown01"))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );
}

#[tokio::test]
async fn the_sandbox_refuses_unsigned_or_wrongly_signed_requests_in_wechat_pays_format() {
    let app = spawn().await;
    let url = format!(
        "{}/v3/pay/transactions/native",
        app.sandbox.api_base_url(ProviderId::WalletQr)
    );
    let answer = reqwest::Client::new()
        .post(&url)
        .header(
            "authorization",
            "WECHATPAY2-SHA256-RSA2048 mchid=\"1900000109\"",
        )
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["code"], "SIGN_ERROR");

    let mut settings = gateway_settings(&app.sandbox.api_base_url(ProviderId::WalletQr));
    settings.merchant_private_key =
        serde_json::from_value(serde_json::json!(CREDENTIALS.provider_private_pem)).unwrap();
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(FixedClock::at(NOW_MS)),
        sandbox: true,
    };
    let wrong_key = WalletQrGateway::new(&settings, context).unwrap();
    let result = wrong_key
        .create_checkout(&checkout(&app, "ord_e2e_wrongkey1"))
        .await;
    assert!(
        matches!(&result, Err(GatewayError::Rejected(m)) if m.contains("SIGN_ERROR")),
        "{result:?}"
    );

    let late_clock = gateway(&app.sandbox, NOW_MS + 10 * 60_000);
    let result = late_clock
        .create_checkout(&checkout(&app, "ord_e2e_lateclock"))
        .await;
    assert!(
        matches!(&result, Err(GatewayError::Rejected(m)) if m.contains("SIGN_ERROR")),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_notification_signed_for_another_serial_is_refused_by_the_receiver() {
    let app = spawn().await;
    let order = "ord_e2e_serial_01";
    let id = open_checkout(&app, order).await;
    let payment = app.sandbox.hub().payment(&id).unwrap();
    let simulator = app.sandbox.hub().simulator(ProviderId::WalletQr).unwrap();
    let mut webhook = simulator
        .webhooks(app.sandbox.hub(), &sandbox::SimEvent::Paid(payment))
        .remove(0);
    for (name, value) in &mut webhook.headers {
        if name.eq_ignore_ascii_case("wechatpay-serial") {
            *value = "PUB_KEY_ID_SOMEONE_ELSE".into();
        }
    }
    let mut request = reqwest::Client::new()
        .post(format!("{}/webhook", app.base))
        .header("content-type", webhook.content_type)
        .body(webhook.body);
    for (name, value) in webhook.headers {
        request = request.header(name, value);
    }
    let answer = request.send().await.unwrap();
    assert_eq!(answer.status(), 401);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["code"], "FAIL");
    assert_eq!(take_received(&app), vec![Err(WebhookError::BadSignature)]);
}

fn refund_request(app: &App, order: &str, fen: i64, refunded_before: i64) -> RefundRequest {
    RefundRequest {
        payment: payment_ref(order),
        refund_id: format!("rf_{order}_{}", refunded_before + fen),
        amount: cny(fen),
        paid: cny(990),
        reason: "customer asked".into(),
        notify_url: format!("{}/webhook", app.base),
    }
}

#[tokio::test]
async fn a_refund_through_the_gateway_is_notified_under_the_refund_id_the_api_answered() {
    let app = spawn().await;
    let order = "ord_e2e_api_refund_1";
    let id = open_checkout(&app, order).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    take_received(&app);

    let first = refund_request(&app, order, 400, 0);
    let started = app.gateway.refund(&first).await.unwrap();
    assert_eq!(started.state, RefundState::Pending);
    let wechat_id = started.provider_refund_id.clone().unwrap();
    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert_eq!(verified.foreign, None);
    let (order_id, refund) = refund_of(verified);
    assert_eq!(order_id, Some(OrderId::new(order).unwrap()));
    assert_eq!(
        refund,
        RefundReport::One {
            refund_id: wechat_id.clone(),
            amount: cny(400),
        }
    );
    // The notification went to the refund's notify_url and names our out_refund_no.
    let delivery = app.sandbox.hub().deliveries().pop().unwrap();
    assert_eq!(delivery.url, format!("{}/webhook", app.base));
    let envelope: serde_json::Value =
        serde_json::from_slice(&delivery.webhook.unwrap().body).unwrap();
    let resource = &envelope["resource"];
    let plain = gateways::shared::signing::aes_256_gcm_decrypt(
        CREDENTIALS.wechat_api_v3_key.as_bytes(),
        resource["nonce"].as_str().unwrap().as_bytes(),
        resource["associated_data"].as_str().unwrap().as_bytes(),
        &gateways::shared::signing::unb64(resource["ciphertext"].as_str().unwrap()).unwrap(),
    )
    .unwrap()
    .unwrap();
    let plain: serde_json::Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(plain["out_refund_no"], first.refund_id.as_str());
    assert_eq!(plain["refund_id"], wechat_id.as_str());

    // The same out_refund_no again: the same refund, done by now; nothing more is refunded.
    let again = app.gateway.refund(&first).await.unwrap();
    assert_eq!(
        (again.provider_refund_id.as_deref(), again.state),
        (Some(wechat_id.as_str()), RefundState::Succeeded)
    );
    assert!(take_received(&app).is_empty());
    assert_eq!(app.sandbox.hub().payment(&id).unwrap().refunded_minor, 400);
    // Another amount under the same number, and more than is left, are refused.
    let mut changed = first.clone();
    changed.amount = cny(300);
    assert!(matches!(
        app.gateway.refund(&changed).await,
        Err(GatewayError::Rejected(m)) if m.contains("INVALID_REQUEST")
    ));
    assert!(matches!(
        app.gateway
            .refund(&refund_request(&app, order, 591, 400))
            .await,
        Err(GatewayError::Rejected(_))
    ));
    // The rest is a second refund under its own id.
    let rest = app
        .gateway
        .refund(&refund_request(&app, order, 590, 400))
        .await
        .unwrap();
    let rest_id = rest.provider_refund_id.unwrap();
    assert_ne!(rest_id, wechat_id);
    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert_eq!(
        refund_of(verified).1,
        RefundReport::One {
            refund_id: rest_id,
            amount: cny(590),
        }
    );
}

#[tokio::test]
async fn a_refund_of_an_unpaid_order_is_refused() {
    let app = spawn().await;
    let order = "ord_e2e_api_refund_2";
    open_checkout(&app, order).await;
    let result = app
        .gateway
        .refund(&refund_request(&app, order, 400, 0))
        .await;
    assert!(
        matches!(&result, Err(GatewayError::Rejected(m)) if m.contains("TRADE_STATE_ERROR")),
        "{result:?}"
    );
    assert!(take_received(&app).is_empty());
}

#[tokio::test]
async fn a_merchant_in_certificate_mode_pays_refunds_and_verifies_by_the_platform_certificate() {
    let app = spawn_with(gateway_settings_certificate_mode).await;
    let order = "ord_e2e_cert_mode_1";
    // The answer to the order is signed by the platform certificate, which the gateway
    // downloads from /v3/certificates and decrypts with the APIv3 key.
    let id = open_checkout(&app, order).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert_eq!(verified.events.len(), 1);
    let delivery = app.sandbox.hub().deliveries().pop().unwrap();
    let serial = delivery
        .webhook
        .unwrap()
        .headers
        .into_iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("wechatpay-serial"))
        .unwrap()
        .1;
    assert_eq!(serial, CREDENTIALS.wechat_platform_cert_serial);
    assert!(matches!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Succeeded { .. }
    ));
    app.gateway
        .refund(&refund_request(&app, order, 990, 0))
        .await
        .unwrap();
    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert!(
        matches!(refund_of(verified).1, RefundReport::One { amount, .. } if amount == cny(990))
    );
    // A public-key merchant does not trust the certificate's signature.
    let public_key_merchant = gateway(&app.sandbox, NOW_MS);
    let payment = app.sandbox.hub().payment(&id).unwrap();
    let simulator = app.sandbox.hub().simulator(ProviderId::WalletQr).unwrap();
    let webhook = simulator
        .webhooks(app.sandbox.hub(), &sandbox::SimEvent::Paid(payment))
        .remove(0);
    let request = WebhookRequest {
        headers: webhook
            .headers
            .into_iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v))
            .collect(),
        body: webhook.body,
    };
    assert_eq!(
        public_key_merchant.verify_webhook(&request).await,
        Err(WebhookError::BadSignature)
    );
}

/// Issue 15 point 4, end to end: the sandbox's notification, genuinely signed, verifies for a
/// gateway of another app or another merchant only as `foreign`, with no events.
#[tokio::test]
async fn the_sandboxs_notification_is_foreign_to_a_gateway_of_another_app_or_merchant() {
    let app = spawn().await;
    let order = "ord_e2e_foreign_01";
    let id = open_checkout(&app, order).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    let received = take_received(&app);
    let [Ok(ours)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert_eq!((ours.events.len(), &ours.foreign), (1, &None));
    let webhook = app
        .sandbox
        .hub()
        .deliveries()
        .pop()
        .unwrap()
        .webhook
        .unwrap();
    let request = WebhookRequest {
        headers: webhook
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect(),
        body: webhook.body,
    };
    fn other_app(base: &str) -> WalletQrSettings {
        WalletQrSettings {
            app_id: "wx_another_app".into(),
            ..gateway_settings(base)
        }
    }
    fn other_merchant(base: &str) -> WalletQrSettings {
        WalletQrSettings {
            mch_id: "1900000999".into(),
            ..gateway_settings(base)
        }
    }
    for (settings, named) in [
        (other_app as fn(&str) -> WalletQrSettings, "appid"),
        (other_merchant, "mchid"),
    ] {
        let gateway = gateway_of(&app.sandbox, NOW_MS, settings);
        let verified = gateway.verify_webhook(&request).await.unwrap();
        assert!(verified.events.is_empty(), "{named}");
        let why = verified.foreign.expect("foreign");
        assert!(why.contains(named), "{named}: {why}");
    }
}

/// The sandbox's `[providers.wallet_qr]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::wallet_qr::WalletQrSettings {
    serde_json::from_value(sandbox::wallet_qr::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}

/// The sandbox's certificate-mode `[providers.wallet_qr]` table
/// (`sandbox::wallet_qr::gateway_settings_certificate_mode`) as the gateway's settings.
fn gateway_settings_certificate_mode(api_base_url: &str) -> gateways::wallet_qr::WalletQrSettings {
    serde_json::from_value(sandbox::wallet_qr::gateway_settings_certificate_mode(
        api_base_url,
    ))
    .expect("the sandbox's settings table fits the gateway")
}
