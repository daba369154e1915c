//! End to end over real HTTP: the PayPal gateway against the PayPal simulator, with the
//! simulator's webhooks delivered to a receiver that runs the real gateway's `verify_webhook`
//! (which calls back into the simulator's `verify-webhook-signature`).

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    CheckoutRequest, CheckoutTarget, Clock, GatewayError, OrderLocator, PaymentEvent,
    PaymentGateway, PaymentRef, PaymentStatus, RefundReport, RefundRequest, RefundState,
    RefundedCharge, WebhookError, WebhookRequest,
};
use domain::{
    BillingPeriod, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::shared::http::ProviderHttp;
use gateways::wallet_global::{WalletGlobalGateway, WalletGlobalSettings};
use sandbox::{CREDENTIALS, Sandbox, SimEvent, SimPayment, SimStatus, SimWebhook};
use serde_json::{Value, json};

use crate::support::{self, Receiver, SystemClock, usd};

mod top_up;

struct World {
    base: String,
    sandbox: Sandbox,
    gateway: Arc<WalletGlobalGateway>,
    /// What the webhook receiver saw: each delivery's verification result.
    inbox: Arc<Receiver>,
    http: reqwest::Client,
}

fn gateway(settings: &WalletGlobalSettings) -> WalletGlobalGateway {
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(SystemClock),
        sandbox: true,
    };
    WalletGlobalGateway::new(settings, context).unwrap()
}

/// The sandbox and a webhook receiver on one real server on 127.0.0.1.
async fn world() -> World {
    let served = support::serve(
        Arc::new(SystemClock),
        "/api/payment/webhook/wallet_global",
        |sandbox| {
            Arc::new(gateway(&gateway_settings(
                &sandbox.api_base_url(ProviderId::WalletGlobal),
            )))
        },
    )
    .await;
    World {
        base: served.base,
        sandbox: served.sandbox,
        gateway: served.gateway,
        inbox: served.receiver,
        http: reqwest::Client::new(),
    }
}

fn plan(kind: &str, amount: &str) -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: format!("{kind} plan"),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: format!("{kind}-plan"),
        provider: Some("wallet_global".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("USD".into()),
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

impl World {
    fn checkout_request(&self, order: &str, plan: Plan) -> CheckoutRequest {
        CheckoutRequest {
            order_id: OrderId::new(order).unwrap(),
            user_id: UserId::new("user_1").unwrap(),
            customer_email: Some("buyer@example.com".into()),
            customer_name: None,
            snapshot: PlanSnapshot::of(&plan, plan.price()),
            plan,
            success_url: format!("{}/payment/success?orderId={order}", self.base),
            cancel_url: format!("{}/payment/cancel?orderId={order}", self.base),
            notify_url: format!("{}/api/payment/webhook/wallet_global", self.base),
            expires_at: SystemClock.now().plus_millis(1_800_000),
            save_method: false,
        }
    }

    /// Create a checkout; the PayPal id.
    async fn checkout(&self, request: &CheckoutRequest) -> String {
        let checkout = self.gateway.create_checkout(request).await.unwrap();
        let id = checkout.provider_reference.unwrap();
        assert_eq!(
            checkout.target,
            CheckoutTarget::Redirect(format!("{}/sandbox/checkout/{id}", self.base))
        );
        id
    }

    /// Press a button of the hosted page (or the dashboard) through the sandbox's JSON API.
    async fn action(&self, what: &str, id: &str, action: &str, body: Value) -> Value {
        let url = format!("{}/sandbox/api/{what}/{id}/{action}", self.base);
        let response = self.http.post(url).json(&body).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "{action}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    fn payment(&self, id: &str) -> SimPayment {
        self.sandbox.hub().payment(id).unwrap()
    }

    /// The buyer approves; Tally captures, as the service does once it has checked the order.
    async fn pay_and_capture(&self, request: &CheckoutRequest, id: &str) {
        self.action("payments", id, "pay", json!({})).await;
        let payment = PaymentRef {
            order_id: request.order_id.clone(),
            provider_reference: Some(id.to_owned()),
        };
        let status = PaymentGateway::capture(self.gateway.as_ref(), &payment)
            .await
            .unwrap();
        assert!(
            matches!(status, PaymentStatus::Succeeded { .. }),
            "{status:?}"
        );
    }

    /// Every verified delivery so far, as (event type, events); fails on a refused one.
    fn deliveries(&self) -> Vec<(String, Vec<PaymentEvent>)> {
        self.inbox
            .all()
            .into_iter()
            .map(|r| {
                r.map(|v| (v.event_type, v.events))
                    .unwrap_or_else(|e| panic!("a webhook was refused: {e}"))
            })
            .collect()
    }

    fn events_of(&self, event_type: &str) -> Vec<Vec<PaymentEvent>> {
        self.deliveries()
            .into_iter()
            .filter(|(t, _)| t == event_type)
            .map(|(_, e)| e)
            .collect()
    }
}

fn paid(order: &str, paypal_id: &str, amount: Money) -> impl Fn(&PaymentEvent) -> bool {
    let locator = OrderLocator {
        order_id: Some(OrderId::new(order).unwrap()),
        provider_reference: Some(paypal_id.to_owned()),
    };
    move |event| matches!(event, PaymentEvent::PaymentSucceeded { order, amount: a, .. } if *order == locator && *a == amount)
}

fn approved(order: &str, paypal_id: &str, amount: Money) -> PaymentEvent {
    PaymentEvent::PaymentApproved {
        order: OrderLocator {
            order_id: Some(OrderId::new(order).unwrap()),
            provider_reference: Some(paypal_id.to_owned()),
        },
        amount,
        occurred_at: Timestamp::from_unix_millis(0),
    }
}

/// The approval events delivered so far, with their times zeroed.
fn approvals(w: &World) -> Vec<Vec<PaymentEvent>> {
    w.events_of("CHECKOUT.ORDER.APPROVED")
        .into_iter()
        .map(|events| {
            events
                .into_iter()
                .map(|e| match e {
                    PaymentEvent::PaymentApproved { order, amount, .. } => {
                        PaymentEvent::PaymentApproved {
                            order,
                            amount,
                            occurred_at: Timestamp::from_unix_millis(0),
                        }
                    }
                    other => other,
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_reported_not_captured_and_the_return_and_the_service_capture_once() {
    let w = Arc::new(world().await);
    let request = w.checkout_request("ord_e2e_once", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    assert_eq!(w.payment(&id).amount_minor, 1799);

    let answer = w.action("payments", &id, "pay", json!({})).await;
    assert_eq!(
        answer["redirect"],
        format!(
            "{}/payment/success?orderId=ord_e2e_once&token={id}&PayerID=SANDBOXPAYER1",
            w.base
        )
    );
    // The approval webhook reports the approval and captures nothing.
    assert_eq!(
        approvals(&w),
        vec![vec![approved("ord_e2e_once", &id, usd(1799))]]
    );
    assert_eq!(w.payment(&id).status, SimStatus::Approved);
    assert_eq!(w.payment(&id).extra.get("captures"), None);

    // The buyer's return and the service (after checking the approval) capture at once.
    let payment = PaymentRef {
        order_id: request.order_id.clone(),
        provider_reference: Some(id.clone()),
    };
    let (from_return_url, from_webhook) = tokio::join!(
        PaymentGateway::capture(w.gateway.as_ref(), &payment),
        PaymentGateway::capture(w.gateway.as_ref(), &payment)
    );
    for status in [from_return_url.unwrap(), from_webhook.unwrap()] {
        assert!(
            matches!(status, PaymentStatus::Succeeded { amount, .. } if amount == usd(1799)),
            "{status:?}"
        );
    }
    let payment = w.payment(&id);
    assert_eq!(payment.status, SimStatus::Paid);
    assert_eq!(
        payment.extra.get("captures").map(String::as_str),
        Some("1"),
        "one capture at PayPal"
    );
    let completed = w.events_of("PAYMENT.CAPTURE.COMPLETED");
    let is_paid = paid("ord_e2e_once", &id, usd(1799));
    assert_eq!(completed.len(), 1);
    assert!(
        matches!(completed[0].as_slice(), [event] if is_paid(event)),
        "{completed:?}"
    );
    assert_eq!(w.deliveries().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_nobody_captures_moves_no_money() {
    // Tally cancelled the order, then the buyer approved it at PayPal: the webhook only reports
    // the approval (the service refuses to capture it), and PayPal keeps the order approved,
    // uncaptured, until it lapses.
    let w = world().await;
    let request = w.checkout_request("ord_e2e_cancelled", plan("one_time", "49"));
    let id = w.checkout(&request).await;
    w.action("payments", &id, "pay", json!({})).await;
    assert_eq!(
        approvals(&w),
        vec![vec![approved("ord_e2e_cancelled", &id, usd(4900))]]
    );
    let payment = w.payment(&id);
    assert_eq!(payment.status, SimStatus::Approved);
    assert_eq!(payment.extra.get("captures"), None);
    assert!(w.events_of("PAYMENT.CAPTURE.COMPLETED").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_captures_an_approved_order_whose_webhook_was_lost() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_lost", plan("one_time", "49"));
    let id = w.checkout(&request).await;
    w.sandbox.hub().drop_next_webhooks(1);
    w.action("payments", &id, "pay", json!({})).await;
    assert_eq!(w.payment(&id).status, SimStatus::Approved);
    assert!(w.deliveries().is_empty());

    let payment = PaymentRef {
        order_id: request.order_id.clone(),
        provider_reference: Some(id.clone()),
    };
    let status = w.gateway.query_payment(&payment).await.unwrap();
    assert!(
        matches!(status, PaymentStatus::Succeeded { amount, .. } if amount == usd(4900)),
        "{status:?}"
    );
    assert_eq!(w.payment(&id).status, SimStatus::Paid);
    assert_eq!(w.events_of("PAYMENT.CAPTURE.COMPLETED").len(), 1);
    // Asking again reads the capture and captures nothing more.
    assert!(matches!(
        w.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Succeeded { .. }
    ));
    assert_eq!(
        w.payment(&id).extra.get("captures").map(String::as_str),
        Some("1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_the_same_order_twice_returns_the_same_paypal_order() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_twice", plan("credits", "17.99"));
    assert_eq!(w.checkout(&request).await, w.checkout(&request).await);
}

fn activation(events: &[PaymentEvent]) -> (String, BillingPeriod) {
    match events {
        [
            PaymentEvent::SubscriptionActivated {
                order,
                provider_subscription_id,
                period,
                ..
            },
        ] => {
            assert_eq!(
                order.order_id.as_ref().map(OrderId::as_str),
                Some("ord_e2e_sub")
            );
            assert_eq!(
                order.provider_reference.as_deref(),
                Some(provider_subscription_id.as_str())
            );
            (provider_subscription_id.clone(), *period)
        }
        other => panic!("expected an activation, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_is_activated_renewed_and_cancelled() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_sub", plan("recurring", "9.99"));
    let id = w.checkout(&request).await;
    assert!(id.starts_with("I-"), "{id}");
    let answer = w.action("payments", &id, "pay", json!({})).await;
    assert!(
        answer["redirect"]
            .as_str()
            .unwrap()
            .contains(&format!("subscription_id={id}"))
    );

    // ACTIVATED and the first sale both activate the same period.
    let (activated_id, first) = activation(&w.events_of("BILLING.SUBSCRIPTION.ACTIVATED")[0]);
    let (sale_id, sale_period) = activation(&w.events_of("PAYMENT.SALE.COMPLETED")[0]);
    assert_eq!(
        (activated_id.as_str(), sale_id.as_str()),
        (id.as_str(), id.as_str())
    );
    assert_eq!(sale_period, first);

    let simulated = w.payment(&id).subscription_id.unwrap();
    w.action("subscriptions", &simulated, "renew", json!({}))
        .await;
    let sales = w.events_of("PAYMENT.SALE.COMPLETED");
    assert_eq!(sales.len(), 2);
    // A renewal's sale first tells the plan PayPal bills (a lost revision's update made good),
    // then the renewal.
    match sales[1].as_slice() {
        [
            PaymentEvent::SubscriptionPlanRevised {
                provider_plan_id,
                price,
                interval_months,
                ..
            },
            PaymentEvent::SubscriptionRenewed {
                provider_subscription_id,
                period,
                amount,
                ..
            },
        ] => {
            assert_eq!(provider_plan_id, "P-5ML4271244454362WXNWU5NQ");
            assert_eq!((*price, *interval_months), (usd(999), Some(1)));
            assert_eq!(provider_subscription_id, &id);
            assert_eq!(*amount, usd(999));
            assert_eq!(period.start(), first.end());
            assert!(period.end() > first.end());
        }
        other => panic!("expected a renewal, got {other:?}"),
    }

    w.gateway.cancel_subscription(&id).await.unwrap();
    let cancelled = w.events_of("BILLING.SUBSCRIPTION.CANCELLED");
    assert!(
        matches!(cancelled[0].as_slice(), [PaymentEvent::SubscriptionCanceled { provider_subscription_id, .. }] if *provider_subscription_id == id)
    );
    w.gateway.cancel_subscription(&id).await.unwrap();
    // PayPal's cancel is immediate: "cancel now" is the same call, and succeeds again.
    w.gateway.cancel_subscription_now(&id).await.unwrap();
    let payment = PaymentRef {
        order_id: request.order_id.clone(),
        provider_reference: Some(id.clone()),
    };
    assert!(
        matches!(w.gateway.query_payment(&payment).await.unwrap(), PaymentStatus::Succeeded { amount, .. } if amount == usd(999))
    );
}

/// The `charge_ref` of each activation and renewal among `deliveries`.
fn charge_refs(deliveries: &[Vec<PaymentEvent>]) -> Vec<Option<String>> {
    deliveries
        .iter()
        .flatten()
        .filter_map(|event| match event {
            PaymentEvent::SubscriptionActivated { charge_ref, .. }
            | PaymentEvent::SubscriptionRenewed { charge_ref, .. } => Some(charge_ref.clone()),
            _ => None,
        })
        .collect()
}

/// The refunds among `deliveries`.
fn refunds(deliveries: Vec<Vec<PaymentEvent>>) -> Vec<(RefundedCharge, RefundReport)> {
    deliveries
        .into_iter()
        .flatten()
        .map(|event| match event {
            PaymentEvent::Refunded { charge, refund, .. } => (charge, refund),
            other => panic!("expected a refund, got {other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_and_a_lost_dispute_of_subscription_sales_name_the_sales_their_periods_carried() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_sub", plan("recurring", "9.99"));
    let id = w.checkout(&request).await;
    w.action("payments", &id, "pay", json!({})).await;
    let simulated = w.payment(&id).subscription_id.unwrap();
    w.action("subscriptions", &simulated, "renew", json!({}))
        .await;
    let charges = w.sandbox.hub().subscription(&simulated).unwrap().charges;
    let (first_sale, renewal_sale) = (charges[0].id.clone(), charges[1].id.clone());
    // `ACTIVATED` names no sale; the sales name themselves.
    assert_eq!(
        charge_refs(&w.events_of("BILLING.SUBSCRIPTION.ACTIVATED")),
        vec![None]
    );
    assert_eq!(
        charge_refs(&w.events_of("PAYMENT.SALE.COMPLETED")),
        vec![Some(first_sale.clone()), Some(renewal_sale.clone())]
    );

    // Part of the renewal, then the rest: each refund is its own amount, by its own id.
    w.action(
        "subscriptions",
        &simulated,
        "refund",
        json!({ "amountMinor": 500 }),
    )
    .await;
    w.action("subscriptions", &simulated, "refund", json!({}))
        .await;
    let renewal = RefundedCharge::SubscriptionCharge {
        provider_subscription_id: None,
        charge_ref: renewal_sale,
    };
    let refunded = refunds(w.events_of("PAYMENT.SALE.REFUNDED"));
    let (amounts, ids): (Vec<(RefundedCharge, Money)>, Vec<String>) = refunded
        .iter()
        .map(|(charge, refund)| match refund {
            RefundReport::One { refund_id, amount } => {
                ((charge.clone(), *amount), refund_id.clone())
            }
            other => panic!("expected one refund's amount, got {other:?}"),
        })
        .unzip();
    assert_eq!(
        amounts,
        vec![(renewal.clone(), usd(500)), (renewal, usd(499))]
    );
    assert_ne!(ids[0], ids[1], "two refunds, two ids");

    // A chargeback of the first sale, resolved for the buyer.
    w.action(
        "subscriptions",
        &simulated,
        "dispute",
        json!({ "chargeId": first_sale }),
    )
    .await;
    assert_eq!(w.events_of("CUSTOMER.DISPUTE.CREATED"), vec![vec![]]);
    let lost = refunds(w.events_of("CUSTOMER.DISPUTE.RESOLVED"));
    let [(charge, RefundReport::DisputeLost { dispute_id })] = &lost[..] else {
        panic!("one lost dispute: {lost:?}")
    };
    assert!(dispute_id.starts_with("PP-D-"), "{dispute_id}");
    assert_eq!(
        *charge,
        RefundedCharge::SubscriptionCharge {
            provider_subscription_id: Some(id.clone()),
            charge_ref: first_sale.clone(),
        }
    );

    // Refunding the subscription's payment refunds its first sale.
    w.action("payments", &id, "refund", json!({ "amountMinor": 100 }))
        .await;
    let refunded = refunds(w.events_of("PAYMENT.SALE.REFUNDED"));
    assert!(
        matches!(refunded.last(), Some((RefundedCharge::SubscriptionCharge { charge_ref, .. }, RefundReport::One { amount, .. })) if *charge_ref == first_sale && *amount == usd(100)),
        "{refunded:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_report_the_total_refunded_so_far() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_refund", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    w.pay_and_capture(&request, &id).await;
    assert_eq!(w.payment(&id).status, SimStatus::Paid);

    w.action("payments", &id, "refund", json!({ "amountMinor": 500 }))
        .await;
    w.action("payments", &id, "refund", json!({ "amountMinor": 300 }))
        .await;
    let totals: Vec<(OrderLocator, Money)> = w
        .events_of("PAYMENT.CAPTURE.REFUNDED")
        .into_iter()
        .map(|events| match events.as_slice() {
            [
                PaymentEvent::Refunded {
                    charge: RefundedCharge::Order(order),
                    refund: RefundReport::Total(total_refunded),
                    ..
                },
            ] => (order.clone(), *total_refunded),
            other => panic!("expected a refund, got {other:?}"),
        })
        .collect();
    let order = OrderLocator {
        order_id: Some(request.order_id.clone()),
        provider_reference: Some(id.clone()),
    };
    assert_eq!(totals, vec![(order.clone(), usd(500)), (order, usd(800))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_payment_is_reported_failed() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_declined", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    w.action("payments", &id, "decline", json!({})).await;
    let denied = w.events_of("PAYMENT.CAPTURE.DENIED");
    assert!(
        matches!(denied[0].as_slice(), [PaymentEvent::PaymentFailed { order, .. }] if order.order_id == Some(request.order_id.clone())),
        "{denied:?}"
    );
}

fn delivery(webhook: &SimWebhook) -> WebhookRequest {
    WebhookRequest {
        headers: webhook.headers.iter().cloned().collect(),
        body: webhook.body.clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_webhooks_the_simulator_really_sent_unchanged_verify() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_forged", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    let hub = w.sandbox.hub();
    let simulator = hub.simulator(ProviderId::WalletGlobal).unwrap();
    let genuine = simulator
        .webhooks(hub, &SimEvent::Declined(w.payment(&id)))
        .remove(0);
    assert!(w.gateway.verify_webhook(&delivery(&genuine)).await.is_ok());

    let mut altered_body = genuine.clone();
    altered_body.body = String::from_utf8(genuine.body.clone())
        .unwrap()
        .replace("17.99", "0.01")
        .into_bytes();
    assert_eq!(
        w.gateway
            .verify_webhook(&delivery(&altered_body))
            .await
            .unwrap_err(),
        WebhookError::BadSignature
    );

    let mut altered_id = delivery(&genuine);
    altered_id
        .headers
        .insert("paypal-transmission-id".into(), format!("{id}.T1"));
    assert_eq!(
        w.gateway.verify_webhook(&altered_id).await.unwrap_err(),
        WebhookError::BadSignature
    );

    let mut forged = delivery(&genuine);
    forged
        .headers
        .insert("paypal-transmission-sig".into(), "Zm9yZ2Vk".into());
    assert_eq!(
        w.gateway.verify_webhook(&forged).await.unwrap_err(),
        WebhookError::BadSignature
    );

    let mut stale = delivery(&genuine);
    stale.headers.insert(
        "paypal-transmission-time".into(),
        "2020-04-23T16:33:33Z".into(),
    );
    assert_eq!(
        w.gateway.verify_webhook(&stale).await.unwrap_err(),
        WebhookError::Stale
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_refuses_wrong_client_credentials_and_calls_without_a_token() {
    let w = world().await;
    let api = w.sandbox.api_base_url(ProviderId::WalletGlobal);
    let wrong = WalletGlobalSettings::new(
        Some(api.clone()),
        CREDENTIALS.paypal_client_id,
        "not-the-secret",
        CREDENTIALS.paypal_webhook_id,
    );
    let error = gateway(&wrong)
        .create_checkout(&w.checkout_request("ord_e2e_auth", plan("credits", "17.99")))
        .await
        .unwrap_err();
    assert!(matches!(error, GatewayError::Rejected(_)), "{error:?}");
    let anonymous = w
        .http
        .post(format!("{api}/v2/checkout/orders"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_through_the_api_refunds_once_per_request_id_and_sends_its_refund_webhook() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_api_refund", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    w.pay_and_capture(&request, &id).await;
    let refund = |refund_id: &str, minor: i64| RefundRequest {
        payment: PaymentRef {
            order_id: request.order_id.clone(),
            provider_reference: Some(id.clone()),
        },
        refund_id: refund_id.to_owned(),
        amount: usd(minor),
        paid: usd(1799),
        reason: "Requested by the customer".into(),
        notify_url: String::new(),
    };
    let first = w
        .gateway
        .refund(&refund("rf_ord_e2e_api_refund_500", 500))
        .await
        .unwrap();
    assert_eq!(first.state, RefundState::Succeeded);
    let again = w
        .gateway
        .refund(&refund("rf_ord_e2e_api_refund_500", 500))
        .await
        .unwrap();
    assert_eq!(
        again, first,
        "the same PayPal-Request-Id answers the same refund"
    );
    assert_eq!(w.payment(&id).refunded_minor, 500);
    let order = OrderLocator {
        order_id: Some(request.order_id.clone()),
        provider_reference: Some(id.clone()),
    };
    let delivered = w.events_of("PAYMENT.CAPTURE.REFUNDED");
    assert_eq!(
        delivered
            .iter()
            .map(|events| match events.as_slice() {
                [PaymentEvent::Refunded { charge, refund, .. }] => (charge.clone(), refund.clone()),
                other => panic!("expected a refund, got {other:?}"),
            })
            .collect::<Vec<_>>(),
        vec![(RefundedCharge::Order(order), RefundReport::Total(usd(500)))]
    );
    // The webhook's resource is the refund the API answered.
    let hub = w.sandbox.hub();
    let webhook = hub
        .simulator(ProviderId::WalletGlobal)
        .unwrap()
        .webhooks(
            hub,
            &SimEvent::Refunded {
                payment: w.payment(&id),
                refund_id: "re_other".into(),
                amount_minor: 500,
            },
        )
        .remove(0);
    let body: Value = serde_json::from_slice(&webhook.body).unwrap();
    assert_eq!(
        Some(body["resource"]["id"].as_str().unwrap()),
        first.provider_refund_id.as_deref()
    );
    // More than is left is refused, and refunds nothing.
    let error = w
        .gateway
        .refund(&refund("rf_ord_e2e_api_refund_99999", 1300))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, GatewayError::Rejected(text) if text.contains("REFUND_AMOUNT_EXCEEDED")),
        "{error:?}"
    );
    assert_eq!(w.payment(&id).refunded_minor, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_merchants_events_are_ours_and_foreign_to_a_gateway_of_another_merchant() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_merchant", plan("credits", "17.99"));
    let id = w.checkout(&request).await;
    w.pay_and_capture(&request, &id).await;
    let others = gateway(
        &gateway_settings(&w.sandbox.api_base_url(ProviderId::WalletGlobal))
            .for_merchant("OTHERMERCHANT1"),
    );
    let hub = w.sandbox.hub();
    let simulator = hub.simulator(ProviderId::WalletGlobal).unwrap();
    let payment = w.payment(&id);
    for event in [SimEvent::Approved(payment.clone()), SimEvent::Paid(payment)] {
        let webhook = simulator.webhooks(hub, &event).remove(0);
        let ours = w.gateway.verify_webhook(&delivery(&webhook)).await.unwrap();
        assert_eq!(ours.foreign, None);
        assert_eq!(ours.events.len(), 1, "{:?}", ours.events);
        let theirs = others.verify_webhook(&delivery(&webhook)).await.unwrap();
        assert_eq!(theirs.events, vec![]);
        let why = theirs.foreign.expect("foreign");
        assert!(why.contains(CREDENTIALS.paypal_merchant_id), "{why}");
    }
}

/// The sandbox's `[providers.wallet_global]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::wallet_global::WalletGlobalSettings {
    serde_json::from_value(sandbox::wallet_global::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revise_is_approved_on_the_simulators_page_and_told_by_a_signed_update() {
    let w = world().await;
    let request = w.checkout_request("ord_e2e_revise", plan("recurring", "9.99"));
    let id = w.checkout(&request).await;
    w.action("payments", &id, "pay", json!({})).await;

    let pro_plus = Plan::from_draft(&PlanDraft {
        id: "pro-plus".into(),
        provider: Some("wallet_global".into()),
        amount: Some("19.99".parse().unwrap()),
        currency: Some("USD".into()),
        months: Some(1),
        duration_type: Some("recurring".into()),
        provider_refs: ProviderRefs::default()
            .with(ProviderId::WalletGlobal, "P-7GL4271244454362WXNWU5NQ"),
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
    let change = application::ports::PlanChangeRequest {
        provider_subscription_id: id.clone(),
        snapshot: PlanSnapshot::of(&pro_plus, pro_plus.price()),
        plan: pro_plus,
        direction: domain::ChangeDirection::Upgrade,
        idempotency_key: "tally-plan-change-e2e".into(),
        requested_at: SystemClock.now(),
        return_url: Some(format!("{}/dashboard?notice=plan_change_pending", w.base)),
        cancel_url: Some(format!("{}/dashboard?notice=plan_change_declined", w.base)),
    };
    let started = w.gateway.change_subscription_plan(&change).await.unwrap();
    let application::ports::PlanChangeStarted::ApprovalNeeded { url } = started else {
        panic!("expected an approval, got {started:?}");
    };
    // The same request again answers the same revision.
    assert_eq!(
        w.gateway.change_subscription_plan(&change).await.unwrap(),
        application::ports::PlanChangeStarted::ApprovalNeeded { url: url.clone() }
    );
    assert!(w.events_of("BILLING.SUBSCRIPTION.UPDATED").is_empty());
    let (page, query) = url.split_once('?').unwrap();
    let approved = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{page}/approve?{query}"))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 303);
    match w.events_of("BILLING.SUBSCRIPTION.UPDATED")[0].as_slice() {
        [
            PaymentEvent::SubscriptionPlanRevised {
                provider_subscription_id,
                provider_plan_id,
                price,
                interval_months,
                ..
            },
        ] => {
            assert_eq!(provider_subscription_id, &id);
            assert_eq!(provider_plan_id, "P-7GL4271244454362WXNWU5NQ");
            assert_eq!((*price, *interval_months), (usd(1999), Some(1)));
        }
        other => panic!("expected a revision, got {other:?}"),
    }
}
