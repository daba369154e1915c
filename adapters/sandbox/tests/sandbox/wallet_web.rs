//! End to end over real HTTP: the real Alipay gateway's signed page-pay URL is opened on the
//! sandbox's Alipay, the sandbox's notifications reach a receiver that verifies them with the
//! same gateway, and query and close go through the sandbox's `gateway.do`. This proves that
//! the request signatures, answer signatures and notification signatures of the two sides
//! interoperate.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    CheckoutRequest, CheckoutTarget, GatewayError, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, RefundReport, RefundRequest, RefundStarted, RefundState, VerifiedWebhook,
    WebhookError, WebhookRequest,
};
use application::testing::FixedClock;
use domain::{OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId, Timestamp, UserId};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use gateways::shared::signing::{public_key, rsa_sha256_verify, unb64};
use gateways::wallet_web::WalletWebGateway;
use gateways::wallet_web::transformers::notification_sign_content;
use sandbox::{CREDENTIALS, Sandbox, SimStatus};

use crate::support::{self, Receiver, cny};

/// 2026-01-01T00:00:00Z.
const NOW_MS: i64 = 1_767_225_600_000;

struct App {
    base: String,
    sandbox: Sandbox,
    gateway: WalletWebGateway,
    received: Arc<Receiver>,
    browser: reqwest::Client,
}

async fn spawn() -> App {
    let served = support::serve(Arc::new(FixedClock::at(NOW_MS)), "/webhook", |sandbox| {
        Arc::new(gateway(sandbox))
    })
    .await;
    App {
        gateway: gateway(&served.sandbox),
        base: served.base,
        sandbox: served.sandbox,
        received: served.receiver,
        browser: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    }
}

fn gateway(sandbox: &Sandbox) -> WalletWebGateway {
    let settings = gateway_settings(&sandbox.api_base_url(ProviderId::WalletWeb));
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(FixedClock::at(NOW_MS)),
        sandbox: true,
    };
    WalletWebGateway::new(&settings, context).unwrap()
}

fn checkout(app: &App, order: &str) -> CheckoutRequest {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: "Pro / lifetime".into(),
            ..PlanText::default()
        },
    );
    let plan = Plan::from_draft(&PlanDraft {
        id: "pro-lifetime".into(),
        provider: Some("wallet_web".into()),
        amount: Some("9.90".parse().unwrap()),
        currency: Some("CNY".into()),
        months: Some(999_999),
        duration_type: Some("one_time".into()),
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
        success_url: format!("{}/payment/success?orderId={order}", app.base),
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

async fn page_pay_url(app: &App, order: &str) -> String {
    let created = app
        .gateway
        .create_checkout(&checkout(app, order))
        .await
        .unwrap();
    let CheckoutTarget::Redirect(url) = created.target else {
        panic!("expected a redirect, got {:?}", created.target);
    };
    url
}

/// Open the page-pay URL as the browser does; return the sandbox payment id of the cashier.
async fn open_cashier(app: &App, url: &str) -> String {
    let answer = app.browser.get(url).send().await.unwrap();
    assert_eq!(answer.status(), 302, "{:?}", answer.text().await);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let prefix = format!("{}/sandbox/checkout/", app.base);
    location.strip_prefix(&prefix).unwrap().to_owned()
}

fn take_received(app: &App) -> Vec<Result<VerifiedWebhook, WebhookError>> {
    app.received.take()
}

fn single_event(app: &App) -> (String, PaymentEvent) {
    let received = take_received(app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    let [event] = verified.events.as_slice() else {
        panic!("expected one event, got {:?}", verified.events);
    };
    (verified.event_type.clone(), event.clone())
}

#[tokio::test]
async fn a_paid_page_pay_checkout_is_notified_verified_and_queried_as_paid_with_the_exact_amount() {
    let app = spawn().await;
    let order = "ord_e2e_paid_0001";
    let url = page_pay_url(&app, order).await;
    assert!(url.starts_with(&format!("{}/sandbox/wallet_web/gateway.do?", app.base)));
    // Page pay creates the trade only when the buyer opens the cashier.
    assert_eq!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );
    let id = open_cashier(&app, &url).await;
    let payment = app.sandbox.hub().payment(&id).unwrap();
    assert_eq!(
        (payment.order_id.as_str(), payment.amount_minor),
        (order, 990)
    );
    assert_eq!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );

    let answer: serde_json::Value = app
        .browser
        .post(format!("{}/sandbox/api/payments/{id}/pay", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (event_type, event) = single_event(&app);
    assert_eq!(event_type, "trade_status_sync.TRADE_SUCCESS");
    let PaymentEvent::PaymentSucceeded {
        order: locator,
        amount,
        occurred_at,
    } = event
    else {
        panic!("expected a payment, got {event:?}");
    };
    assert_eq!(locator.order_id, Some(OrderId::new(order).unwrap()));
    assert_eq!((amount, occurred_at.unix_millis()), (cny(990), NOW_MS));
    assert_eq!(app.sandbox.hub().deliveries()[0].answer, "success");
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
    assert_return_is_signed(&app, answer["redirect"].as_str().unwrap(), order);
}

/// The browser returns to `return_url` with Alipay's signed synchronous parameters.
fn assert_return_is_signed(app: &App, redirect: &str, order: &str) {
    let (url, query) = redirect.split_once('?').unwrap();
    assert_eq!(url, format!("{}/payment/success", app.base));
    let params: BTreeMap<String, String> =
        serde_urlencoded::from_str::<Vec<(String, String)>>(query)
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(params["orderId"], order);
    assert_eq!(params["out_trade_no"], order);
    assert_eq!(params["total_amount"], "9.90");
    assert_eq!(params["method"], "alipay.trade.page.pay.return");
    let mut signed = params.clone();
    signed.remove("orderId");
    let content = notification_sign_content(&signed);
    assert!(rsa_sha256_verify(
        &public_key(CREDENTIALS.provider_public_pem).unwrap(),
        content.as_bytes(),
        &unb64(&params["sign"]).unwrap()
    ));
}

#[tokio::test]
async fn partial_and_full_refunds_are_notified_with_the_total_refunded_so_far() {
    let app = spawn().await;
    let order = "ord_e2e_refund_01";
    let id = open_cashier(&app, &page_pay_url(&app, order).await).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    take_received(&app);
    for (refund, total) in [(495, 495), (495, 990)] {
        app.sandbox.hub().refund_payment(&id, refund).await.unwrap();
        let (event_type, event) = single_event(&app);
        assert_eq!(event_type, "trade_status_sync.refund");
        assert!(
            matches!(&event, PaymentEvent::Refunded { refund: application::ports::RefundReport::Total(total_refunded), .. } if *total_refunded == cny(total)),
            "{event:?}"
        );
    }
    assert!(matches!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Failed { .. }
    ));
}

#[tokio::test]
async fn a_declined_payment_is_notified_as_trade_closed_and_queries_as_failed() {
    let app = spawn().await;
    let order = "ord_e2e_declined1";
    let id = open_cashier(&app, &page_pay_url(&app, order).await).await;
    app.sandbox.hub().decline_payment(&id).await.unwrap();
    let (event_type, event) = single_event(&app);
    assert_eq!(event_type, "trade_status_sync.TRADE_CLOSED");
    assert!(matches!(event, PaymentEvent::PaymentFailed { .. }));
    assert!(matches!(
        app.gateway
            .query_payment(&payment_ref(order))
            .await
            .unwrap(),
        PaymentStatus::Failed { .. }
    ));
}

#[tokio::test]
async fn closing_works_before_and_after_the_buyer_opens_the_cashier() {
    let app = spawn().await;
    let never_opened = "ord_e2e_neveropen";
    page_pay_url(&app, never_opened).await;
    app.gateway
        .close_payment(&payment_ref(never_opened))
        .await
        .unwrap();

    let order = "ord_e2e_closed_01";
    let url = page_pay_url(&app, order).await;
    let id = open_cashier(&app, &url).await;
    assert_eq!(open_cashier(&app, &url).await, id);
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
    let reopened = app.browser.get(&url).send().await.unwrap();
    assert_eq!(reopened.status(), 400);
    assert!(
        reopened
            .text()
            .await
            .unwrap()
            .contains("ACQ.TRADE_HAS_CLOSE")
    );

    let paid = "ord_e2e_closepaid";
    let paid_id = open_cashier(&app, &page_pay_url(&app, paid).await).await;
    app.sandbox.hub().complete_payment(&paid_id).await.unwrap();
    let result = app.gateway.close_payment(&payment_ref(paid)).await;
    assert!(
        matches!(&result, Err(GatewayError::Rejected(m)) if m.contains("ACQ.TRADE_STATUS_ERROR")),
        "{result:?}"
    );
}

#[tokio::test]
async fn the_sandbox_refuses_a_tampered_url_or_a_call_signed_with_another_key() {
    let app = spawn().await;
    let url = page_pay_url(&app, "ord_e2e_tampered1").await;
    let tampered = url.replace("9.90", "0.01");
    assert_ne!(tampered, url);
    let answer = app.browser.get(&tampered).send().await.unwrap();
    assert_eq!(answer.status(), 400);
    assert!(
        answer
            .text()
            .await
            .unwrap()
            .contains("isv.invalid-signature")
    );
    assert!(app.sandbox.hub().payments().is_empty());

    let mut settings = gateway_settings(&app.sandbox.api_base_url(ProviderId::WalletWeb));
    settings.app_private_key =
        serde_json::from_value(serde_json::json!(CREDENTIALS.provider_private_pem)).unwrap();
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(FixedClock::at(NOW_MS)),
        sandbox: true,
    };
    let wrong_key = WalletWebGateway::new(&settings, context).unwrap();
    let result = wrong_key
        .query_payment(&payment_ref("ord_e2e_tampered1"))
        .await;
    assert!(
        matches!(&result, Err(GatewayError::Rejected(m)) if m.contains("isv.invalid-signature")),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_page_pay_url_past_its_time_expire_is_refused_by_the_cashier() {
    let app = spawn().await;
    let mut request = checkout(&app, "ord_e2e_expired01");
    request.expires_at = Timestamp::from_unix_millis(NOW_MS - 1_000);
    let CheckoutTarget::Redirect(url) = app.gateway.create_checkout(&request).await.unwrap().target
    else {
        panic!("expected a redirect");
    };
    let answer = app.browser.get(&url).send().await.unwrap();
    assert_eq!(answer.status(), 400);
    assert!(answer.text().await.unwrap().contains("ACQ.TRADE_HAS_CLOSE"));
}

#[tokio::test]
async fn a_notification_whose_form_was_altered_is_refused_with_fail() {
    let app = spawn().await;
    let id = open_cashier(&app, &page_pay_url(&app, "ord_e2e_altered01").await).await;
    let payment = app.sandbox.hub().payment(&id).unwrap();
    let simulator = app.sandbox.hub().simulator(ProviderId::WalletWeb).unwrap();
    let webhook = simulator
        .webhooks(app.sandbox.hub(), &sandbox::SimEvent::Paid(payment))
        .remove(0);
    let altered = String::from_utf8(webhook.body)
        .unwrap()
        .replace("total_amount=9.90", "total_amount=0.01");
    let answer = app
        .browser
        .post(format!("{}/webhook", app.base))
        .header("content-type", webhook.content_type)
        .body(altered)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.text().await.unwrap(), "fail");
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
async fn a_refund_through_the_gateway_refunds_once_per_out_request_no_and_is_notified_as_a_total() {
    let app = spawn().await;
    let order = "ord_e2e_api_refund_1";
    let id = open_cashier(&app, &page_pay_url(&app, order).await).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    let (_, paid) = single_event(&app);
    assert!(matches!(paid, PaymentEvent::PaymentSucceeded { .. }));

    let first = refund_request(&app, order, 400, 0);
    let started = app.gateway.refund(&first).await.unwrap();
    assert_eq!(
        started,
        RefundStarted {
            provider_refund_id: Some(first.refund_id.clone()),
            state: RefundState::Succeeded,
        }
    );
    let (event_type, event) = single_event(&app);
    assert_eq!(event_type, "trade_status_sync.refund");
    assert!(
        matches!(&event, PaymentEvent::Refunded { refund: RefundReport::Total(total), .. } if *total == cny(400)),
        "{event:?}"
    );
    let delivery = app.sandbox.hub().deliveries().pop().unwrap();
    let body = String::from_utf8(delivery.webhook.unwrap().body).unwrap();
    assert!(
        body.contains(&format!("out_biz_no={}", first.refund_id)),
        "{body}"
    );

    // The same request again: Alipay moves no money (fund_change N) and sends nothing.
    let again = app.gateway.refund(&first).await.unwrap();
    assert_eq!(again.state, RefundState::Pending);
    assert!(take_received(&app).is_empty());
    assert_eq!(app.sandbox.hub().payment(&id).unwrap().refunded_minor, 400);
    // The same out_request_no with another amount, and more than is left, are refused.
    let mut changed = first.clone();
    changed.amount = cny(300);
    assert!(matches!(
        app.gateway.refund(&changed).await,
        Err(GatewayError::Rejected(_))
    ));
    assert!(matches!(
        app.gateway
            .refund(&refund_request(&app, order, 591, 400))
            .await,
        Err(GatewayError::Rejected(_))
    ));

    // The rest: the notification reports the running total, the whole price.
    let rest = app
        .gateway
        .refund(&refund_request(&app, order, 590, 400))
        .await
        .unwrap();
    assert_eq!(rest.state, RefundState::Succeeded);
    let (_, event) = single_event(&app);
    assert!(
        matches!(&event, PaymentEvent::Refunded { refund: RefundReport::Total(total), .. } if *total == cny(990)),
        "{event:?}"
    );
}

#[tokio::test]
async fn the_sandboxs_notifications_name_the_configured_app_and_seller() {
    let app = spawn().await;
    let order = "ord_e2e_seller_01";
    let id = open_cashier(&app, &page_pay_url(&app, order).await).await;
    app.sandbox.hub().complete_payment(&id).await.unwrap();
    let received = take_received(&app);
    let [Ok(verified)] = received.as_slice() else {
        panic!("expected one verified notification, got {received:?}");
    };
    assert_eq!((verified.events.len(), &verified.foreign), (1, &None));
    // A gateway configured for another seller acknowledges the same notification as foreign.
    let mut settings = serde_json::json!({
        "appId": CREDENTIALS.app_id,
        "appPrivateKey": CREDENTIALS.merchant_private_pem,
        "alipayPublicKey": CREDENTIALS.provider_public_pem,
        "sellerId": "2088000000000999",
    });
    settings["baseUrl"] = serde_json::json!(app.sandbox.api_base_url(ProviderId::WalletWeb));
    let settings: gateways::wallet_web::WalletWebSettings =
        serde_json::from_value(settings).unwrap();
    let other_seller = WalletWebGateway::new(
        &settings,
        GatewayContext {
            http: ProviderHttp::new(&settings.http()).unwrap(),
            clock: Arc::new(FixedClock::at(NOW_MS)),
            sandbox: true,
        },
    )
    .unwrap();
    let delivery = app.sandbox.hub().deliveries().pop().unwrap();
    let webhook = delivery.webhook.unwrap();
    let verified = other_seller
        .verify_webhook(&WebhookRequest {
            headers: BTreeMap::new(),
            body: webhook.body,
        })
        .await
        .unwrap();
    assert!(verified.events.is_empty());
    assert!(verified.foreign.unwrap().contains("seller_id"));
}

/// The sandbox's `[providers.wallet_web]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::wallet_web::WalletWebSettings {
    serde_json::from_value(sandbox::wallet_web::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}
