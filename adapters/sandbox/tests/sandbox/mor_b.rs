//! End to end over real HTTP: the Dodo Payments gateway talks to the simulated Dodo, the buyer pays on
//! the sandbox, and the sandbox's signed webhooks come back to a receiver that verifies them with
//! the real gateway. Proves that signing and verification, encodings and mappings interoperate.

mod top_up;

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    CheckoutRequest, CheckoutTarget, Clock, GatewayError, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, RefundReport, RefundRequest, RefundState, RefundedCharge, WebhookError,
};
use domain::{
    BillingPeriod, Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::mor_b::{MorBGateway, MorBSettings};
use gateways::shared::ProviderHttp;
use gateways::shared::signing::{b64, hmac_sha256, unb64};
use sandbox::hub::SimSubscriptionStatus;

use crate::support::{self, Served, SystemClock, usd};
use sandbox::CREDENTIALS;

type World = Served<MorBGateway>;

fn gateway_for(settings: &MorBSettings) -> Arc<MorBGateway> {
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(SystemClock),
        sandbox: true,
    };
    Arc::new(MorBGateway::new(settings, context).unwrap())
}

/// A server on a free port with the sandbox at `/sandbox` and Tally's webhook endpoint.
async fn world_with_webhook_secret(webhook_secret: &str) -> World {
    support::serve(
        Arc::new(SystemClock),
        "/api/payment/webhook/mor_b",
        |sandbox| {
            let mut settings = gateway_settings(&sandbox.api_base_url(ProviderId::MorB));
            if webhook_secret != CREDENTIALS.standard_webhooks_secret {
                settings = MorBSettings::new(
                    CREDENTIALS.api_key,
                    webhook_secret,
                    settings.base_url.clone(),
                );
            }
            gateway_for(&settings)
        },
    )
    .await
}

async fn world() -> World {
    world_with_webhook_secret(CREDENTIALS.standard_webhooks_secret).await
}

fn plan(kind: &str, amount: &str, currency: &str, product_id: &str) -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: format!("{kind} plan"),
            ..PlanText::default()
        },
    );
    let draft = PlanDraft {
        id: format!("{kind}-plan"),
        provider: Some("mor_b".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months: match kind {
            "credits" => None,
            "one_time" => Some(999_999),
            _ => Some(1),
        },
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "500".parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::MorB, product_id),
        i18n,
        ..PlanDraft::default()
    };
    Plan::from_draft(&draft).unwrap()
}

impl World {
    fn checkout_request(&self, plan: Plan, order_id: &str) -> CheckoutRequest {
        CheckoutRequest {
            order_id: OrderId::new(order_id).unwrap(),
            user_id: UserId::new("usr_e2e").unwrap(),
            customer_email: Some("buyer@example.com".into()),
            customer_name: None,
            snapshot: PlanSnapshot::of(&plan, plan.price()),
            plan,
            success_url: format!("{}/payment-success?orderId={order_id}", self.base),
            cancel_url: format!("{}/payment-cancel?orderId={order_id}", self.base),
            notify_url: format!("{}/api/payment/webhook/mor_b", self.base),
            expires_at: SystemClock.now().plus_millis(2 * 3_600_000),
            save_method: false,
        }
    }

    /// Checkout through the gateway; the session id and the hosted page.
    async fn checkout(&self, plan: Plan, order_id: &str) -> (String, String) {
        let checkout = self
            .gateway
            .create_checkout(&self.checkout_request(plan, order_id))
            .await
            .unwrap();
        let CheckoutTarget::Redirect(url) = checkout.target else {
            panic!("Dodo redirects")
        };
        (checkout.provider_reference.unwrap(), url)
    }

    /// The buyer presses Pay on the hosted page; where the browser goes next.
    async fn pay(&self, session_id: &str) -> String {
        let hub = self.sandbox.hub();
        hub.simulator(ProviderId::MorB)
            .unwrap()
            .pay(hub, session_id)
            .await
            .unwrap()
    }

    /// The events of the webhooks accepted since the last call.
    fn take_events(&self) -> Vec<(String, Vec<PaymentEvent>)> {
        self.receiver
            .take_accepted()
            .into_iter()
            .map(|v| (v.event_type, v.events))
            .collect()
    }
}

#[tokio::test]
async fn a_one_time_purchase_is_paid_by_a_verified_webhook_queried_as_paid_and_refunded_cumulatively()
 {
    let world = world().await;
    let (session_id, url) = world
        .checkout(
            plan("one_time", "9.99", "USD", "pdt_sandbox_lifetime"),
            "ord_e2e_once",
        )
        .await;
    assert_eq!(url, world.sandbox.hub().checkout_url(&session_id));
    let sim = world.sandbox.hub().payment(&session_id).unwrap();
    assert_eq!(
        (sim.order_id.as_str(), sim.amount_minor, sim.currency),
        ("ord_e2e_once", 999, Currency::Usd)
    );

    let redirect = world.pay(&session_id).await;

    assert_eq!(
        redirect,
        format!(
            "{}/payment-success?orderId=ord_e2e_once&session_id={session_id}&status=success",
            world.base
        )
    );
    let events = world.take_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "payment.succeeded");
    let [PaymentEvent::PaymentSucceeded { order, amount, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        order.order_id.as_ref().map(OrderId::as_str),
        Some("ord_e2e_once")
    );
    assert_eq!(
        order.provider_reference.as_deref(),
        Some(session_id.as_str())
    );
    assert_eq!(*amount, usd(999));
    let reference = PaymentRef {
        order_id: OrderId::new("ord_e2e_once").unwrap(),
        provider_reference: Some(session_id.clone()),
    };
    assert!(
        matches!(world.gateway.query_payment(&reference).await.unwrap(), PaymentStatus::Succeeded { amount, .. } if amount == usd(999))
    );

    // Each refund webhook makes the gateway read the payment back from the sandbox.
    world
        .sandbox
        .hub()
        .refund_payment(&session_id, 300)
        .await
        .unwrap();
    world
        .sandbox
        .hub()
        .refund_payment(&session_id, 200)
        .await
        .unwrap();

    // Dodo's refund carries its own amount: one refund each, under its own id.
    let refunds: Vec<(String, Money)> = world
        .take_events()
        .into_iter()
        .flat_map(|(_, events)| events)
        .map(|event| match event {
            PaymentEvent::Refunded {
                charge: RefundedCharge::Order(order),
                refund: RefundReport::One { refund_id, amount },
                ..
            } => {
                assert_eq!(
                    order.order_id.as_ref().map(OrderId::as_str),
                    Some("ord_e2e_once")
                );
                (refund_id, amount)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        refunds.iter().map(|(_, a)| *a).collect::<Vec<_>>(),
        vec![usd(300), usd(200)]
    );
    assert_ne!(refunds[0].0, refunds[1].0);
}

#[tokio::test]
async fn a_credits_pack_is_paid_its_exact_amount() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("credits", "49", "EUR", "pdt_sandbox_credits"),
            "ord_e2e_credits",
        )
        .await;

    world.pay(&session_id).await;

    let events = world.take_events();
    let [PaymentEvent::PaymentSucceeded { order, amount, .. }] = &events[0].1[..] else {
        panic!("{events:?}")
    };
    assert_eq!(
        order.order_id.as_ref().map(OrderId::as_str),
        Some("ord_e2e_credits")
    );
    assert_eq!(*amount, Money::from_minor(4900, Currency::Eur).unwrap());
}

#[tokio::test]
async fn a_subscription_activates_renews_and_is_cancelled_at_period_end_through_the_gateway() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", "pdt_sandbox_pro"),
            "ord_e2e_sub",
        )
        .await;

    world.pay(&session_id).await;

    let hub = world.sandbox.hub();
    let subscription_id = hub.payment(&session_id).unwrap().subscription_id.unwrap();
    let started = hub.subscription(&subscription_id).unwrap();
    let events = world.take_events();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["payment.succeeded", "subscription.active"]);
    assert!(
        events[0].1.is_empty(),
        "a subscription's charge is reported by the subscription events"
    );
    let [
        PaymentEvent::SubscriptionActivated {
            order,
            provider_subscription_id,
            period,
            ..
        },
    ] = &events[1].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        order.order_id.as_ref().map(OrderId::as_str),
        Some("ord_e2e_sub")
    );
    assert_eq!(provider_subscription_id, &subscription_id);
    let exact = |ms| Timestamp::from_unix_millis(ms);
    assert_eq!(
        *period,
        BillingPeriod::new(exact(started.period_start_ms), exact(started.period_end_ms)).unwrap()
    );

    let renewed = hub.renew_subscription(&subscription_id).await.unwrap();
    let events = world.take_events();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["payment.succeeded", "subscription.renewed"]);
    let [
        PaymentEvent::SubscriptionRenewed {
            provider_subscription_id,
            period,
            amount,
            ..
        },
    ] = &events[1].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(provider_subscription_id, &subscription_id);
    assert_eq!(period.start(), exact(started.period_end_ms));
    assert_eq!(
        *period,
        BillingPeriod::new(exact(renewed.period_start_ms), exact(renewed.period_end_ms)).unwrap()
    );
    assert_eq!(*amount, usd(1900));

    world
        .gateway
        .cancel_subscription(&subscription_id)
        .await
        .unwrap();

    assert_eq!(
        hub.subscription(&subscription_id).unwrap().status,
        SimSubscriptionStatus::CancelScheduled
    );
    let events = world.take_events();
    assert_eq!(events[0].0, "subscription.cancelled");
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::SubscriptionCancelScheduled { provider_subscription_id, .. }] if provider_subscription_id == &subscription_id)
    );

    hub.cancel_subscription(&subscription_id, false)
        .await
        .unwrap();
    let events = world.take_events();
    assert!(matches!(
        &events[0].1[..],
        [PaymentEvent::SubscriptionCanceled { .. }]
    ));
}

impl World {
    /// `POST /sandbox/api/subscriptions/{id}/{action}` with `body`, as the dashboard's API does.
    async fn subscription_action(&self, id: &str, action: &str, body: serde_json::Value) {
        let response = reqwest::Client::new()
            .post(format!(
                "{}/sandbox/api/subscriptions/{id}/{action}",
                self.base
            ))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{}",
            response.text().await.unwrap()
        );
    }
}

/// The refunds and lost disputes among `events`: the charge and the report of each.
fn refunds_of(events: Vec<(String, Vec<PaymentEvent>)>) -> Vec<(RefundedCharge, RefundReport)> {
    events
        .into_iter()
        .flat_map(|(_, events)| events)
        .map(|event| match event {
            PaymentEvent::Refunded { charge, refund, .. } => (charge, refund),
            other => panic!("expected a refund, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn refunds_and_a_lost_dispute_of_subscription_charges_name_the_charges_activation_and_renewal_carried()
 {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", "pdt_sandbox_pro"),
            "ord_e2e_sub_refund",
        )
        .await;
    world.pay(&session_id).await;
    let hub = world.sandbox.hub();
    let subscription_id = hub.payment(&session_id).unwrap().subscription_id.unwrap();
    let first_charge = hub.subscription(&subscription_id).unwrap().charges[0]
        .id
        .clone();
    let activated = world
        .take_events()
        .into_iter()
        .flat_map(|(_, events)| events)
        .find_map(|event| match event {
            PaymentEvent::SubscriptionActivated { charge_ref, .. } => Some(charge_ref),
            _ => None,
        });
    assert_eq!(activated, Some(Some(first_charge.clone())));

    hub.renew_subscription(&subscription_id).await.unwrap();
    let renewal_charge = hub.subscription(&subscription_id).unwrap().charges[1]
        .id
        .clone();
    let renewed = world
        .take_events()
        .into_iter()
        .flat_map(|(_, events)| events)
        .find_map(|event| match event {
            PaymentEvent::SubscriptionRenewed { charge_ref, .. } => Some(charge_ref),
            _ => None,
        });
    assert_eq!(renewed, Some(Some(renewal_charge.clone())));

    // The renewal (the latest charge) refunded in part, then the rest.
    world
        .subscription_action(
            &subscription_id,
            "refund",
            serde_json::json!({ "amountMinor": 700 }),
        )
        .await;
    world
        .subscription_action(&subscription_id, "refund", serde_json::json!({}))
        .await;
    let renewal = RefundedCharge::SubscriptionCharge {
        provider_subscription_id: Some(subscription_id.clone()),
        charge_ref: renewal_charge.clone(),
    };
    let refunds = refunds_of(world.take_events());
    let amounts: Vec<(RefundedCharge, Money)> = refunds
        .iter()
        .map(|(charge, report)| match report {
            RefundReport::One { amount, .. } => (charge.clone(), *amount),
            other => panic!("Dodo reports each refund's own amount, got {other:?}"),
        })
        .collect();
    assert_eq!(
        amounts,
        vec![(renewal.clone(), usd(700)), (renewal.clone(), usd(1200))]
    );
    assert!(
        matches!((&refunds[0].1, &refunds[1].1), (RefundReport::One { refund_id: a, .. }, RefundReport::One { refund_id: b, .. }) if a != b)
    );

    // A dispute of the first charge, lost: `dispute.opened` means nothing, `dispute.lost` takes
    // the whole charge back.
    world
        .subscription_action(
            &subscription_id,
            "dispute",
            serde_json::json!({ "chargeId": first_charge }),
        )
        .await;
    let events = world.take_events();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["dispute.opened", "dispute.lost"]);
    match &refunds_of(events)[..] {
        [(charge, RefundReport::DisputeLost { dispute_id })] => {
            assert_eq!(
                *charge,
                RefundedCharge::SubscriptionCharge {
                    provider_subscription_id: Some(subscription_id.clone()),
                    charge_ref: first_charge,
                }
            );
            assert!(dispute_id.starts_with("dp_sandbox_"), "{dispute_id}");
        }
        other => panic!("expected one lost dispute, got {other:?}"),
    }
}

#[tokio::test]
async fn a_declined_payment_fails_the_order_by_webhook_and_by_query() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("one_time", "9.99", "USD", "pdt_sandbox_lifetime"),
            "ord_e2e_declined",
        )
        .await;
    let reference = PaymentRef {
        order_id: OrderId::new("ord_e2e_declined").unwrap(),
        provider_reference: Some(session_id.clone()),
    };
    assert_eq!(
        world.gateway.query_payment(&reference).await.unwrap(),
        PaymentStatus::Pending
    );

    world
        .sandbox
        .hub()
        .decline_payment(&session_id)
        .await
        .unwrap();

    let events = world.take_events();
    assert_eq!(events[0].0, "payment.failed");
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::PaymentFailed { order, .. }] if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_e2e_declined"))
    );
    assert!(matches!(
        world.gateway.query_payment(&reference).await.unwrap(),
        PaymentStatus::Failed { .. }
    ));
    let close = world.gateway.close_payment(&reference).await;
    assert!(matches!(close, Err(GatewayError::NotSupported)));
}

#[tokio::test]
async fn a_wrong_api_key_is_refused_by_the_sandbox_as_dodo_refuses_it() {
    let world = world().await;
    let settings = MorBSettings::new(
        "wrong-key",
        CREDENTIALS.standard_webhooks_secret,
        Some(world.sandbox.api_base_url(ProviderId::MorB)),
    );
    let request = world.checkout_request(
        plan("one_time", "9.99", "USD", "pdt_sandbox_lifetime"),
        "ord_e2e_key",
    );
    let error = gateway_for(&settings)
        .create_checkout(&request)
        .await
        .unwrap_err();
    assert!(
        matches!(error, GatewayError::Rejected(m) if m.contains("401") && m.contains("UNAUTHORIZED"))
    );
}

#[tokio::test]
async fn webhooks_are_refused_by_a_gateway_holding_another_signing_secret() {
    // base64 of "another-standard-webhooks-secret".
    let world =
        world_with_webhook_secret("whsec_YW5vdGhlci1zdGFuZGFyZC13ZWJob29rcy1zZWNyZXQ=").await;
    let (session_id, _) = world
        .checkout(
            plan("one_time", "9.99", "USD", "pdt_sandbox_lifetime"),
            "ord_e2e_secret",
        )
        .await;

    world.pay(&session_id).await;

    assert_eq!(world.receiver.refused(), vec![WebhookError::BadSignature]);
    assert_eq!(
        world.sandbox.hub().deliveries().last().unwrap().status,
        Some(400)
    );
}

#[tokio::test]
async fn the_simulated_dodo_checks_encodings_and_answers_in_dodos_error_shape() {
    let world = world().await;
    let api = world.sandbox.api_base_url(ProviderId::MorB);
    let client = reqwest::Client::new();

    let form = client
        .post(format!("{api}/checkouts"))
        .bearer_auth(CREDENTIALS.api_key)
        .form(&[("product_cart", "pdt_1")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);

    let no_price = serde_json::json!({"product_cart": [{"product_id": "pdt_1", "quantity": 1}], "metadata": {"orderId": "ord_1"}});
    let refused = client
        .post(format!("{api}/checkouts"))
        .bearer_auth(CREDENTIALS.api_key)
        .json(&no_price)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "INVALID_REQUEST_BODY");
    assert!(body["message"].as_str().unwrap().contains("amountMinor"));

    let unknown = client
        .get(format!("{api}/payments/pay_nope"))
        .bearer_auth(CREDENTIALS.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let body: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(body["code"], "NOT_FOUND");
}

fn refund_request(order_id: &str, session_id: &str, refund_id: &str, amount: i64) -> RefundRequest {
    RefundRequest {
        payment: PaymentRef {
            order_id: OrderId::new(order_id).unwrap(),
            provider_reference: Some(session_id.to_owned()),
        },
        refund_id: refund_id.to_owned(),
        amount: usd(amount),
        paid: usd(999),
        reason: "requested by the buyer".into(),
        notify_url: String::new(),
    }
}

#[tokio::test]
async fn a_refund_through_dodos_api_sends_the_refund_webhook_under_the_refund_id_it_answered() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("one_time", "9.99", "USD", "pdt_sandbox_lifetime"),
            "ord_e2e_refund",
        )
        .await;
    world.pay(&session_id).await;
    world.take_events();

    let mut reported = Vec::new();
    for (refund_id, amount) in [("rf_e2e_300", 300), ("rf_e2e_rest", 699)] {
        let started = world
            .gateway
            .refund(&refund_request(
                "ord_e2e_refund",
                &session_id,
                refund_id,
                amount,
            ))
            .await
            .unwrap();
        assert_eq!(started.state, RefundState::Succeeded);
        let events = world.take_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, "refund.succeeded");
        match &events[0].1[..] {
            [
                PaymentEvent::Refunded {
                    charge: RefundedCharge::Order(order),
                    refund:
                        RefundReport::One {
                            refund_id,
                            amount: refunded,
                        },
                    ..
                },
            ] => {
                assert_eq!(
                    order.order_id.as_ref().map(OrderId::as_str),
                    Some("ord_e2e_refund")
                );
                // The id the service applies the refund under is the webhook's: a duplicate.
                assert_eq!(started.provider_refund_id.as_ref(), Some(refund_id));
                assert_eq!(*refunded, usd(amount));
                reported.push(refund_id.clone());
            }
            other => panic!("expected one refund, got {other:?}"),
        }
    }
    assert_ne!(reported[0], reported[1]);
    assert_eq!(
        world
            .sandbox
            .hub()
            .payment(&session_id)
            .unwrap()
            .refunded_minor,
        999
    );

    // Asked again under the same refund id (a retry): Dodo takes no idempotency key, so the
    // gateway finds the refund by its metadata and answers it; nothing is refunded twice.
    let again = world
        .gateway
        .refund(&refund_request(
            "ord_e2e_refund",
            &session_id,
            "rf_e2e_300",
            300,
        ))
        .await
        .unwrap();
    assert_eq!(again.provider_refund_id.as_ref(), Some(&reported[0]));
    assert!(world.take_events().is_empty());
    assert_eq!(
        world
            .sandbox
            .hub()
            .payment(&session_id)
            .unwrap()
            .refunded_minor,
        999
    );

    // Beyond what is left, Dodo refuses.
    let over = world
        .gateway
        .refund(&refund_request(
            "ord_e2e_refund",
            &session_id,
            "rf_e2e_more",
            1,
        ))
        .await;
    assert!(matches!(over, Err(GatewayError::Rejected(_))), "{over:?}");
}

#[tokio::test]
async fn a_refund_of_a_subscriptions_first_payment_names_the_charge_its_activation_carried() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", "pdt_sandbox_pro"),
            "ord_e2e_sub_refund",
        )
        .await;
    world.pay(&session_id).await;
    let hub = world.sandbox.hub();
    let subscription_id = hub.payment(&session_id).unwrap().subscription_id.unwrap();
    let first_charge = hub.subscription(&subscription_id).unwrap().charges[0]
        .id
        .clone();
    world.take_events();

    let mut request = refund_request("ord_e2e_sub_refund", &session_id, "rf_e2e_sub", 500);
    request.paid = usd(1900);
    let started = world.gateway.refund(&request).await.unwrap();
    assert_eq!(
        refunds_of(world.take_events()),
        vec![(
            RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(subscription_id.clone()),
                charge_ref: first_charge,
            },
            RefundReport::One {
                refund_id: started.provider_refund_id.unwrap(),
                amount: usd(500),
            }
        )]
    );
}

#[tokio::test]
async fn a_validly_signed_webhook_of_another_business_is_foreign_and_changes_nothing() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("one_time", "9.99", "USD", "pdt_sandbox_lifetime"),
            "ord_e2e_foreign",
        )
        .await;
    world.pay(&session_id).await;
    // The sandbox's own webhook names the configured business: ours.
    let ours = world.receiver.drain_accepted();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].foreign, None);

    let payment = world
        .sandbox
        .hub()
        .payment(&session_id)
        .and_then(|p| p.extra.get("paymentId").cloned())
        .unwrap();
    let body = serde_json::to_vec(&serde_json::json!({
        "business_id": "bus_SomeoneElse000",
        "type": "refund.succeeded",
        "timestamp": "2025-01-18T12:00:05Z",
        "data": {
            "payload_type": "Refund", "business_id": "bus_SomeoneElse000", "payment_id": payment,
            "refund_id": "ref_Foreign0000001", "status": "succeeded", "amount": 999,
            "currency": "USD", "is_partial": false, "metadata": {},
            "created_at": "2025-01-18T12:00:01Z"
        }
    }))
    .unwrap();
    // Signed with the endpoint's own secret, as a shared endpoint would receive it.
    let secret = CREDENTIALS.standard_webhooks_secret;
    let key = unb64(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let t = SystemClock.now().unix_millis() / 1000;
    let mut message = format!("msg_foreign.{t}.").into_bytes();
    message.extend_from_slice(&body);
    let response = reqwest::Client::new()
        .post(format!("{}/api/payment/webhook/mor_b", world.base))
        .header("content-type", "application/json")
        .header("webhook-id", "msg_foreign")
        .header("webhook-timestamp", t.to_string())
        .header(
            "webhook-signature",
            format!("v1,{}", b64(&hmac_sha256(&key, &message))),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let verified = world.receiver.drain_accepted();
    assert_eq!(verified.len(), 1);
    assert!(verified[0].foreign.is_some());
    assert!(verified[0].events.is_empty());
    assert_eq!(
        world
            .sandbox
            .hub()
            .payment(&session_id)
            .unwrap()
            .refunded_minor,
        0
    );
}

/// The sandbox's `[providers.mor_b]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::mor_b::MorBSettings {
    serde_json::from_value(sandbox::mor_b::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}

#[tokio::test]
async fn a_subscription_cancelled_now_through_the_gateway_ends_with_subscription_cancelled() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", "pdt_sandbox_pro"),
            "ord_e2e_now",
        )
        .await;
    world.pay(&session_id).await;
    let hub = world.sandbox.hub();
    let subscription_id = hub.payment(&session_id).unwrap().subscription_id.unwrap();
    world.take_events();
    world
        .gateway
        .cancel_subscription_now(&subscription_id)
        .await
        .unwrap();
    assert_eq!(
        hub.subscription(&subscription_id).unwrap().status,
        SimSubscriptionStatus::Canceled
    );
    let events = world.take_events();
    assert_eq!(events[0].0, "subscription.cancelled");
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::SubscriptionCanceled { provider_subscription_id, .. }] if provider_subscription_id == &subscription_id),
        "{events:?}"
    );
}
