//! End to end over real HTTP: the Stripe gateway talks to the simulated Stripe, the buyer pays on
//! the sandbox, and the sandbox's signed webhooks come back to a receiver that verifies them with
//! the real gateway. Proves that signing and verification, encodings and mappings interoperate.

mod top_up;

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    CheckoutRequest, CheckoutTarget, Clock, GatewayError, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, RefundReport, RefundRequest, RefundState, RefundedCharge, WebhookError,
    WebhookRequest,
};
use domain::{
    BillingPeriod, Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::card_gateway::{CardGatewayGateway, CardGatewaySettings};
use gateways::shared::ProviderHttp;
use sandbox::hub::SimSubscriptionStatus;
use sandbox::{CREDENTIALS, SimStatus};

use crate::support::{self, Served, SystemClock, usd};

type World = Served<CardGatewayGateway>;

fn gateway_for(settings: &CardGatewaySettings) -> Arc<CardGatewayGateway> {
    let context = GatewayContext {
        http: ProviderHttp::new(&settings.http()).unwrap(),
        clock: Arc::new(SystemClock),
        sandbox: true,
    };
    Arc::new(CardGatewayGateway::new(settings, context).unwrap())
}

/// A server on a free port with the sandbox at `/sandbox` and Tally's webhook endpoint.
async fn world_with_webhook_secret(webhook_secret: &str) -> World {
    support::serve(
        Arc::new(SystemClock),
        "/api/payment/webhook/card_gateway",
        |sandbox| {
            let mut settings = gateway_settings(&sandbox.api_base_url(ProviderId::CardGateway));
            if webhook_secret != CREDENTIALS.hmac_secret {
                settings = CardGatewaySettings::new(
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
    world_with_webhook_secret(CREDENTIALS.hmac_secret).await
}

fn plan(kind: &str, amount: &str, currency: &str, price_id: Option<&str>) -> Plan {
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
            notify_url: format!("{}/api/payment/webhook/card_gateway", self.base),
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
            panic!("Stripe redirects")
        };
        (checkout.provider_reference.unwrap(), url)
    }

    /// The buyer presses Pay on the hosted page; where the browser goes next.
    async fn pay(&self, session_id: &str) -> String {
        let hub = self.sandbox.hub();
        hub.simulator(ProviderId::CardGateway)
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

fn seconds(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms.div_euclid(1000) * 1000)
}

#[tokio::test]
async fn a_one_time_purchase_is_paid_by_a_verified_webhook_queried_as_paid_and_refunded_cumulatively()
 {
    let world = world().await;
    let (session_id, url) = world
        .checkout(
            plan("one_time", "9.99", "USD", Some("price_sandbox_lifetime")),
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
        format!("{}/payment-success?orderId=ord_e2e_once", world.base)
    );
    let events = world.take_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "checkout.session.completed");
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

    let refunds: Vec<Money> = world
        .take_events()
        .into_iter()
        .flat_map(|(_, events)| events)
        .map(|event| match event {
            PaymentEvent::Refunded {
                charge: RefundedCharge::Order(order),
                refund: RefundReport::Total(total_refunded),
                ..
            } => {
                assert_eq!(
                    order.order_id.as_ref().map(OrderId::as_str),
                    Some("ord_e2e_once")
                );
                total_refunded
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(refunds, vec![usd(300), usd(500)]);
}

#[tokio::test]
async fn a_credits_pack_in_a_zero_decimal_currency_is_paid_its_exact_amount() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(plan("credits", "500", "JPY", None), "ord_e2e_credits")
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
    assert_eq!(*amount, Money::from_minor(500, Currency::Jpy).unwrap());
}

#[tokio::test]
async fn a_subscription_activates_renews_and_is_cancelled_at_period_end_through_the_gateway() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", Some("price_sandbox_pro")),
            "ord_e2e_sub",
        )
        .await;

    world.pay(&session_id).await;

    let hub = world.sandbox.hub();
    let subscription_id = hub.payment(&session_id).unwrap().subscription_id.unwrap();
    let started = hub.subscription(&subscription_id).unwrap();
    let events = world.take_events();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["checkout.session.completed", "invoice.paid"]);
    assert!(events[0].1.is_empty(), "the session waits for its invoice");
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
    assert_eq!(
        *period,
        BillingPeriod::new(
            seconds(started.period_start_ms),
            seconds(started.period_end_ms)
        )
        .unwrap()
    );

    let renewed = hub.renew_subscription(&subscription_id).await.unwrap();
    let events = world.take_events();
    let [
        PaymentEvent::SubscriptionRenewed {
            provider_subscription_id,
            period,
            amount,
            ..
        },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(provider_subscription_id, &subscription_id);
    assert_eq!(period.start(), seconds(started.period_end_ms));
    assert_eq!(
        *period,
        BillingPeriod::new(
            seconds(renewed.period_start_ms),
            seconds(renewed.period_end_ms)
        )
        .unwrap()
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
    assert_eq!(events[0].0, "customer.subscription.updated");
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
    /// Press a dashboard button of a subscription through the sandbox's JSON API.
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
            "{action}: {}",
            response.status()
        );
    }
}

/// The `charge_ref` of the one activation or renewal among `events`.
fn charge_ref_of(events: &[(String, Vec<PaymentEvent>)]) -> String {
    let refs: Vec<&String> = events
        .iter()
        .flat_map(|(_, events)| events)
        .filter_map(|event| match event {
            PaymentEvent::SubscriptionActivated { charge_ref, .. }
            | PaymentEvent::SubscriptionRenewed { charge_ref, .. } => charge_ref.as_ref(),
            _ => None,
        })
        .collect();
    assert_eq!(refs.len(), 1, "{events:?}");
    refs[0].clone()
}

/// The refunds among `events`, with the webhook types that carried them.
fn refunds_of(
    events: Vec<(String, Vec<PaymentEvent>)>,
) -> Vec<(String, RefundedCharge, RefundReport)> {
    events
        .into_iter()
        .flat_map(|(event_type, events)| events.into_iter().map(move |e| (event_type.clone(), e)))
        .map(|(event_type, event)| match event {
            PaymentEvent::Refunded { charge, refund, .. } => (event_type, charge, refund),
            other => panic!("expected a refund, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn refunds_and_a_lost_dispute_of_subscription_charges_name_the_invoices_their_periods_carried()
 {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", Some("price_sandbox_pro")),
            "ord_e2e_sub_refund",
        )
        .await;
    world.pay(&session_id).await;
    let hub = world.sandbox.hub();
    let subscription_id = hub.payment(&session_id).unwrap().subscription_id.unwrap();
    let first_ref = charge_ref_of(&world.take_events());
    hub.renew_subscription(&subscription_id).await.unwrap();
    let renewal_ref = charge_ref_of(&world.take_events());
    let charges = hub.subscription(&subscription_id).unwrap().charges;
    assert_eq!(
        (first_ref.as_str(), renewal_ref.as_str()),
        (charges[0].id.as_str(), charges[1].id.as_str()),
        "the invoices are the charges the sandbox keeps"
    );
    let renewal = RefundedCharge::SubscriptionCharge {
        provider_subscription_id: Some(subscription_id.clone()),
        charge_ref: renewal_ref.clone(),
    };

    // Part of the renewal, then the rest (the latest charge when none is named).
    world
        .subscription_action(
            &subscription_id,
            "refund",
            serde_json::json!({ "amountMinor": 500 }),
        )
        .await;
    world
        .subscription_action(&subscription_id, "refund", serde_json::json!({}))
        .await;
    assert_eq!(
        refunds_of(world.take_events()),
        vec![
            (
                "charge.refunded".into(),
                renewal.clone(),
                RefundReport::Total(usd(500))
            ),
            (
                "charge.refunded".into(),
                renewal,
                RefundReport::Total(usd(1900))
            ),
        ]
    );

    // A chargeback of the first period's charge, lost.
    world
        .subscription_action(
            &subscription_id,
            "dispute",
            serde_json::json!({ "chargeId": first_ref }),
        )
        .await;
    let events = world.take_events();
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["charge.dispute.created", "charge.dispute.closed"]);
    let [(_, charge, RefundReport::DisputeLost { dispute_id })] = &refunds_of(events)[..] else {
        panic!("one lost dispute")
    };
    assert!(dispute_id.starts_with("dp_"), "{dispute_id}");
    assert_eq!(
        *charge,
        RefundedCharge::SubscriptionCharge {
            provider_subscription_id: Some(subscription_id.clone()),
            charge_ref: first_ref.clone(),
        }
    );

    // Refunding the subscription's payment refunds its first invoice's charge.
    hub.refund_payment(&session_id, 300).await.unwrap();
    assert_eq!(
        refunds_of(world.take_events()),
        vec![(
            "charge.refunded".into(),
            RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(subscription_id),
                charge_ref: first_ref,
            },
            RefundReport::Total(usd(300)),
        )]
    );
}

#[tokio::test]
async fn closing_an_unpaid_payment_expires_the_session_and_fails_the_order() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_close")
        .await;
    let reference = PaymentRef {
        order_id: OrderId::new("ord_e2e_close").unwrap(),
        provider_reference: Some(session_id.clone()),
    };
    assert_eq!(
        world.gateway.query_payment(&reference).await.unwrap(),
        PaymentStatus::Pending
    );

    world.gateway.close_payment(&reference).await.unwrap();

    assert_eq!(
        world.sandbox.hub().payment(&session_id).unwrap().status,
        SimStatus::Canceled
    );
    let events = world.take_events();
    assert_eq!(events[0].0, "checkout.session.expired");
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::PaymentFailed { order, .. }] if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_e2e_close"))
    );
    assert!(matches!(
        world.gateway.query_payment(&reference).await.unwrap(),
        PaymentStatus::Failed { .. }
    ));
    let again = world.gateway.close_payment(&reference).await.unwrap_err();
    assert!(matches!(again, GatewayError::Rejected(m) if m.contains("open")));
}

#[tokio::test]
async fn a_declined_payment_fails_the_order_by_webhook() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_declined")
        .await;

    world
        .sandbox
        .hub()
        .decline_payment(&session_id)
        .await
        .unwrap();

    let events = world.take_events();
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::PaymentFailed { order, .. }] if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_e2e_declined"))
    );
}

#[tokio::test]
async fn the_same_order_checked_out_twice_gets_the_same_session() {
    let world = world().await;
    let first = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_twice")
        .await;
    let second = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_twice")
        .await;
    assert_eq!(first, second);
}

#[tokio::test]
async fn a_wrong_api_key_is_refused_by_the_sandbox_as_stripe_refuses_it() {
    let world = world().await;
    let settings = CardGatewaySettings::new(
        "sk_test_wrong_key",
        CREDENTIALS.hmac_secret,
        Some(world.sandbox.api_base_url(ProviderId::CardGateway)),
    );
    let error = gateway_for(&settings)
        .create_checkout(
            &world.checkout_request(plan("one_time", "9.99", "USD", None), "ord_e2e_key"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, GatewayError::Rejected(m) if m.contains("401") && m.contains("Invalid API Key"))
    );
}

#[tokio::test]
async fn webhooks_are_refused_by_a_gateway_holding_another_signing_secret() {
    let world = world_with_webhook_secret("whsec_not_the_sandbox_secret").await;
    let (session_id, _) = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_secret")
        .await;

    world.pay(&session_id).await;

    assert_eq!(world.receiver.refused(), vec![WebhookError::BadSignature]);
    let deliveries = world.sandbox.hub().deliveries();
    assert_eq!(deliveries.last().unwrap().status, Some(400));
}

#[tokio::test]
async fn the_simulated_stripe_checks_encodings_and_limits_and_answers_in_stripes_error_shape() {
    let world = world().await;
    let sessions = format!(
        "{}/v1/checkout/sessions",
        world.sandbox.api_base_url(ProviderId::CardGateway)
    );
    let client = reqwest::Client::new();

    let json = client
        .post(&sessions)
        .bearer_auth(CREDENTIALS.api_key)
        .json(&serde_json::json!({"mode": "payment"}))
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), 400);
    let body: serde_json::Value = json.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");

    let three_days = (SystemClock.now().unix_millis() / 1000 + 3 * 86_400).to_string();
    let form = [
        ("mode", "payment"),
        ("line_items[0][quantity]", "1"),
        ("line_items[0][price_data][currency]", "usd"),
        ("line_items[0][price_data][unit_amount]", "999"),
        ("line_items[0][price_data][product_data][name]", "Pro"),
        ("success_url", "https://tally.example/ok"),
        ("client_reference_id", "ord_e2e_limits"),
        ("expires_at", three_days.as_str()),
    ];
    let too_late = client
        .post(&sessions)
        .bearer_auth(CREDENTIALS.api_key)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(too_late.status(), 400);
    let body: serde_json::Value = too_late.json().await.unwrap();
    assert_eq!(body["error"]["param"], "expires_at");

    let unknown = client
        .get(format!("{sessions}/cs_sandbox_nope"))
        .bearer_auth(CREDENTIALS.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let body: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["code"], "resource_missing");
}

#[tokio::test]
async fn the_sandbox_sends_webhooks_and_browsers_only_to_the_service_it_belongs_to() {
    let w = world().await;
    let credits = plan("credits", "5.00", "USD", None);
    for (field, foreign) in [
        ("notify", "http://169.254.169.254/latest/meta-data"),
        (
            "notify",
            "http://127.0.0.1:1/api/payment/webhook/card_gateway",
        ),
        ("success", "https://evil.example/phish"),
        ("cancel", "https://evil.example/phish"),
    ] {
        let mut request = w.checkout_request(credits.clone(), "ord_foreign");
        let target = match field {
            "notify" => &mut request.notify_url,
            "success" => &mut request.success_url,
            _ => &mut request.cancel_url,
        };
        *target = foreign.to_owned();
        let refused = w.gateway.create_checkout(&request).await;
        assert!(refused.is_err(), "{field} {foreign}: {refused:?}");
    }
    assert!(
        w.sandbox.hub().payments().is_empty(),
        "nothing with a foreign URL is stored, so nothing is ever sent there"
    );
    let (session_id, _) = w.checkout(credits, "ord_own").await;
    assert!(w.pay(&session_id).await.starts_with(&w.base));
}

fn refund_request(
    world: &World,
    session_id: &str,
    order_id: &str,
    refund_id: &str,
    minor: i64,
) -> RefundRequest {
    RefundRequest {
        payment: PaymentRef {
            order_id: OrderId::new(order_id).unwrap(),
            provider_reference: Some(session_id.to_owned()),
        },
        refund_id: refund_id.to_owned(),
        amount: usd(minor),
        paid: usd(999),
        reason: "requested by the buyer".into(),
        notify_url: format!("{}/api/payment/webhook/card_gateway", world.base),
    }
}

#[tokio::test]
async fn a_refund_through_the_gateway_refunds_once_per_idempotency_key_and_sends_charge_refunded() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_refund")
        .await;
    world.pay(&session_id).await;
    world.take_events();

    let first = refund_request(&world, &session_id, "ord_e2e_refund", "rf_1", 300);
    let started = world.gateway.refund(&first).await.unwrap();
    assert_eq!(started.state, RefundState::Succeeded);
    let refund_id = started.provider_refund_id.clone().unwrap();
    assert!(refund_id.starts_with("re_"), "{refund_id}");
    let events = world.take_events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "charge.refunded");
    let [
        PaymentEvent::Refunded {
            charge: RefundedCharge::Order(order),
            refund: RefundReport::Total(total),
            ..
        },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        order.order_id.as_ref().map(OrderId::as_str),
        Some("ord_e2e_refund")
    );
    assert_eq!(*total, usd(300));

    // The same idempotency key again: the same refund, nothing refunded twice, no webhook.
    let again = world.gateway.refund(&first).await.unwrap();
    assert_eq!(again, started);
    assert!(world.take_events().is_empty());
    assert_eq!(
        world
            .sandbox
            .hub()
            .payment(&session_id)
            .unwrap()
            .refunded_minor,
        300
    );

    let second = refund_request(&world, &session_id, "ord_e2e_refund", "rf_2", 699);
    let started = world.gateway.refund(&second).await.unwrap();
    assert_ne!(
        started.provider_refund_id.as_deref(),
        Some(refund_id.as_str())
    );
    let events = world.take_events();
    let [
        PaymentEvent::Refunded {
            refund: RefundReport::Total(total),
            ..
        },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(*total, usd(999));

    let too_much = refund_request(&world, &session_id, "ord_e2e_refund", "rf_3", 1);
    assert!(matches!(
        world.gateway.refund(&too_much).await,
        Err(GatewayError::Rejected(m)) if m.contains("greater than unrefunded")
    ));
}

#[tokio::test]
async fn a_refund_of_a_subscriptions_first_payment_goes_through_its_first_invoice() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", Some("price_sandbox_pro")),
            "ord_e2e_sub_refund",
        )
        .await;
    world.pay(&session_id).await;
    let events = world.take_events();
    let first_invoice = charge_ref_of(&events);

    let request = refund_request(&world, &session_id, "ord_e2e_sub_refund", "rf_sub_1", 500);
    let started = world.gateway.refund(&request).await.unwrap();
    assert_eq!(started.state, RefundState::Succeeded);
    let events = world.take_events();
    let [
        PaymentEvent::Refunded {
            charge: RefundedCharge::SubscriptionCharge { charge_ref, .. },
            refund: RefundReport::Total(total),
            ..
        },
    ] = &events[0].1[..]
    else {
        panic!("{events:?}")
    };
    assert_eq!(charge_ref, &first_invoice);
    assert_eq!(*total, usd(500));
}

#[tokio::test]
async fn sandbox_events_are_test_mode_events_and_foreign_to_a_live_key() {
    let world = world().await;
    let (session_id, _) = world
        .checkout(plan("one_time", "9.99", "USD", None), "ord_e2e_mode")
        .await;
    world.pay(&session_id).await;
    let ours = world.take_events();
    assert_eq!(ours.len(), 1);
    assert_eq!(
        ours[0].1.len(),
        1,
        "a test-mode key takes the sandbox's test-mode events"
    );

    // The same delivery, verified by a gateway holding a live-mode key.
    let webhook = world
        .sandbox
        .hub()
        .deliveries()
        .pop()
        .unwrap()
        .webhook
        .unwrap();
    let live = gateway_for(&CardGatewaySettings::new(
        "sk_live_tally_0000000000000000",
        CREDENTIALS.hmac_secret,
        None,
    ));
    let headers = webhook
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    let verified = live
        .verify_webhook(&WebhookRequest {
            headers,
            body: webhook.body,
        })
        .await
        .unwrap();
    assert!(verified.foreign.is_some());
    assert!(verified.events.is_empty());
}

/// The sandbox's `[providers.card_gateway]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::card_gateway::CardGatewaySettings {
    serde_json::from_value(sandbox::card_gateway::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}

#[tokio::test]
async fn a_subscription_cancelled_now_through_the_gateway_ends_with_customer_subscription_deleted()
{
    let world = world().await;
    let (session_id, _) = world
        .checkout(
            plan("recurring", "19", "USD", Some("price_sandbox_pro")),
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
    assert_eq!(events[0].0, "customer.subscription.deleted");
    assert!(
        matches!(&events[0].1[..], [PaymentEvent::SubscriptionCanceled { provider_subscription_id, .. }] if provider_subscription_id == &subscription_id)
    );
    assert!(
        world
            .gateway
            .cancel_subscription_now(&subscription_id)
            .await
            .is_err(),
        "a canceled subscription cannot be canceled again"
    );
    assert!(
        world
            .gateway
            .cancel_subscription_now("sub_sandbox_unknown")
            .await
            .is_err()
    );
}
