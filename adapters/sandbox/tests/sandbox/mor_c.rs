//! End to end over real HTTP: the real Waffo Pancake gateway signs its requests to the sandbox,
//! which verifies them with the merchant public key, and verifies the webhooks the sandbox signs
//! with the platform key, as it would with Pancake.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use application::ports::{
    CheckoutRequest, CheckoutTarget, Clock, GatewayError, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, RefundReport, RefundedCharge, VerifiedWebhook,
};
use domain::{
    BillingPeriod, Currency, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::mor_c::{MorCGateway, MorCSettings, PancakeMode};
use gateways::shared::ProviderHttp;
use gateways::shared::signing::{b64, private_key, rsa_sha256_sign};
use sandbox::hub::SimSubscriptionStatus;

use crate::support::{self, Served};
use sandbox::CREDENTIALS;

/// Real time shifted by an offset (zero for the honest gateway).
struct SystemClock(i64);

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "an end-to-end test runs on the real clock, like the sandbox"
    )]
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        Timestamp::from_unix_millis(i64::try_from(ms).unwrap_or(i64::MAX).saturating_add(self.0))
    }
}

type Harness = Served<MorCGateway>;

fn connect(settings: &MorCSettings, clock: Arc<dyn Clock>) -> MorCGateway {
    let http = ProviderHttp::new(&settings.http()).unwrap();
    MorCGateway::new(
        settings,
        GatewayContext {
            http,
            clock,
            sandbox: true,
        },
    )
    .unwrap()
}

async fn start() -> Harness {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock(0));
    support::serve(clock.clone(), "/webhook", |sandbox| {
        let settings = gateway_settings(&sandbox.api_base_url(ProviderId::MorC));
        Arc::new(connect(&settings, clock))
    })
    .await
}

impl Harness {
    fn take_verified(&self) -> Vec<VerifiedWebhook> {
        self.receiver.take_accepted()
    }

    fn take_events(&self) -> Vec<PaymentEvent> {
        self.take_verified()
            .into_iter()
            .flat_map(|w| w.events)
            .collect()
    }

    fn request(&self, plan: &Plan, order_id: &str) -> CheckoutRequest {
        CheckoutRequest {
            order_id: OrderId::new(order_id).unwrap(),
            user_id: UserId::new("user_1").unwrap(),
            customer_email: Some("buyer@example.com".into()),
            customer_name: None,
            snapshot: PlanSnapshot::of(plan, plan.price()),
            plan: plan.clone(),
            success_url: format!("{}/payment/success", self.base),
            cancel_url: format!("{}/payment/cancel", self.base),
            notify_url: format!("{}/webhook", self.base),
            expires_at: SystemClock(1_800_000).now(),
            save_method: false,
        }
    }

    /// Refund `amounts` one after the other; each refund's own amount, as the webhooks
    /// reported it (Pancake's refund events carry the refund's figure, each under its id).
    async fn refund(&self, payment_id: &str, order_id: &str, amounts: &[i64]) -> Vec<Money> {
        for amount in amounts {
            self.sandbox
                .hub()
                .refund_payment(payment_id, *amount)
                .await
                .unwrap();
        }
        let events = self.take_events();
        let mut ids = Vec::new();
        events
            .into_iter()
            .map(|event| match event {
                PaymentEvent::Refunded {
                    refund: RefundReport::One { refund_id, amount },
                    charge: RefundedCharge::Order(order),
                    ..
                } => {
                    assert_eq!(order.order_id.as_ref().map(OrderId::as_str), Some(order_id));
                    assert!(!ids.contains(&refund_id), "{refund_id} reported twice");
                    ids.push(refund_id);
                    amount
                }
                other => panic!("expected a refund, got {other:?}"),
            })
            .collect()
    }

    /// `POST /sandbox/api/subscriptions/{id}/{action}` with `body`, as the dashboard's API does;
    /// the refunds the webhooks it caused mean.
    async fn subscription_action(
        &self,
        id: &str,
        action: &str,
        body: serde_json::Value,
    ) -> Vec<(RefundedCharge, RefundReport)> {
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
        self.take_events()
            .into_iter()
            .map(|event| match event {
                PaymentEvent::Refunded { charge, refund, .. } => (charge, refund),
                other => panic!("expected a refund, got {other:?}"),
            })
            .collect()
    }

    /// Pay a subscription's checkout; its checkout id, subscription id and first period, once
    /// the activation event checks out.
    async fn subscribe(&self, plan: &Plan, order_id: &str) -> (String, String, BillingPeriod) {
        let checkout_id = self.checkout(plan, order_id).await;
        let hub = self.sandbox.hub();
        hub.complete_payment(&checkout_id).await.unwrap();
        let subscription_id = hub.payment(&checkout_id).unwrap().subscription_id.unwrap();
        let first = hub.subscription(&subscription_id).unwrap();
        let expected = BillingPeriod::new(
            Timestamp::from_unix_millis(first.period_start_ms),
            Timestamp::from_unix_millis(first.period_end_ms),
        )
        .unwrap();
        let verified = self.take_verified();
        let types: Vec<&str> = verified.iter().map(|w| w.event_type.as_str()).collect();
        assert_eq!(
            types,
            ["subscription.activated", "subscription.payment_succeeded"]
        );
        match &verified
            .into_iter()
            .flat_map(|w| w.events)
            .collect::<Vec<_>>()[..]
        {
            [
                PaymentEvent::SubscriptionActivated {
                    order,
                    provider_subscription_id,
                    period,
                    ..
                },
            ] => {
                assert_eq!(order.order_id.as_ref().map(OrderId::as_str), Some(order_id));
                assert_eq!(provider_subscription_id, &subscription_id);
                assert_eq!(*period, expected);
            }
            other => panic!("expected an activation, got {other:?}"),
        }
        (checkout_id, subscription_id, expected)
    }

    /// Bill the next period at the hub; checks the renewal event follows `previous`.
    async fn renew(&self, subscription_id: &str, previous: BillingPeriod, price: Money) {
        let renewed = self
            .sandbox
            .hub()
            .renew_subscription(subscription_id)
            .await
            .unwrap();
        match &self.take_events()[..] {
            [
                PaymentEvent::SubscriptionRenewed {
                    provider_subscription_id,
                    period,
                    amount,
                    ..
                },
            ] => {
                assert_eq!(provider_subscription_id, subscription_id);
                assert_eq!(period.start(), previous.end());
                assert_eq!(period.end().unix_millis(), renewed.period_end_ms);
                assert_eq!(*amount, price);
            }
            other => panic!("expected a renewal, got {other:?}"),
        }
    }

    /// Cancel through the gateway (scheduled), then end it at the hub; checks both events.
    async fn cancel(&self, subscription_id: &str) {
        self.gateway
            .cancel_subscription(subscription_id)
            .await
            .unwrap();
        let status = self
            .sandbox
            .hub()
            .subscription(subscription_id)
            .unwrap()
            .status;
        assert_eq!(status, SimSubscriptionStatus::CancelScheduled);
        let scheduled = lifecycle(&self.take_events());
        assert_eq!(
            scheduled,
            [("cancel_scheduled", subscription_id.to_owned())]
        );
        let hub = self.sandbox.hub();
        hub.cancel_subscription(subscription_id, false)
            .await
            .unwrap();
        assert_eq!(
            lifecycle(&self.take_events()),
            [("canceled", subscription_id.to_owned())]
        );
    }

    async fn checkout(&self, plan: &Plan, order_id: &str) -> String {
        let checkout = self
            .gateway
            .create_checkout(&self.request(plan, order_id))
            .await
            .unwrap();
        let session_id = checkout.provider_reference.unwrap();
        assert_eq!(
            checkout.target,
            CheckoutTarget::Redirect(self.sandbox.hub().checkout_url(&session_id))
        );
        session_id
    }
}

fn plan(id: &str, duration_type: &str, amount: &str, currency: &str, months: Option<i64>) -> Plan {
    let text = PlanText {
        name: id.into(),
        description: "test plan".into(),
        duration: "month".into(),
        features: vec![],
    };
    let draft = PlanDraft {
        id: id.into(),
        provider: Some("mor_c".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months,
        duration_type: Some(duration_type.into()),
        credits: (duration_type == "credits").then(|| "1200".parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::MorC, format!("PROD_{id}")),
        i18n: BTreeMap::from([("en".to_owned(), text)]),
        ..PlanDraft::default()
    };
    Plan::from_draft(&draft).unwrap()
}

fn money(minor: i64, currency: Currency) -> Money {
    Money::from_minor(minor, currency).unwrap()
}

fn payment_ref(order_id: &str, session_id: &str) -> PaymentRef {
    PaymentRef {
        order_id: OrderId::new(order_id).unwrap(),
        provider_reference: Some(session_id.to_owned()),
    }
}

/// Each lifecycle event's kind and subscription id, for compact assertions.
fn lifecycle(events: &[PaymentEvent]) -> Vec<(&'static str, String)> {
    events
        .iter()
        .map(|event| match event {
            PaymentEvent::SubscriptionCancelScheduled {
                provider_subscription_id,
                ..
            } => ("cancel_scheduled", provider_subscription_id.clone()),
            PaymentEvent::SubscriptionCanceled {
                provider_subscription_id,
                ..
            } => ("canceled", provider_subscription_id.clone()),
            other => panic!("expected a lifecycle event, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn a_one_time_purchase_is_paid_reported_queried_and_refunded_through_the_sandbox() {
    let h = start().await;
    let lifetime = plan("lifetime_cny", "one_time", "1299.00", "CNY", Some(999_999));
    let session_id = h.checkout(&lifetime, "ord_onetime_1").await;
    assert_eq!(
        h.gateway
            .query_payment(&payment_ref("ord_onetime_1", &session_id))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );

    h.sandbox.hub().complete_payment(&session_id).await.unwrap();
    let verified = h.take_verified();
    assert_eq!(
        verified
            .iter()
            .map(|w| w.event_type.as_str())
            .collect::<Vec<_>>(),
        ["order.completed"]
    );
    match &verified[0].events[..] {
        [PaymentEvent::PaymentSucceeded { order, amount, .. }] => {
            assert_eq!(
                order.order_id.as_ref().map(OrderId::as_str),
                Some("ord_onetime_1")
            );
            assert_eq!(*amount, money(129_900, Currency::Cny));
        }
        other => panic!("expected one payment, got {other:?}"),
    }
    match h
        .gateway
        .query_payment(&payment_ref("ord_onetime_1", &session_id))
        .await
        .unwrap()
    {
        PaymentStatus::Succeeded { amount, .. } => {
            assert_eq!(amount, money(129_900, Currency::Cny))
        }
        other => panic!("expected a paid order, got {other:?}"),
    }

    let refunds = h
        .refund(&session_id, "ord_onetime_1", &[29_900, 100_000])
        .await;
    assert_eq!(
        refunds,
        vec![money(29_900, Currency::Cny), money(100_000, Currency::Cny)]
    );
}

#[tokio::test]
async fn a_credits_purchase_in_yen_reports_its_exact_price_for_our_order() {
    let h = start().await;
    let credits = plan("credits_jpy", "credits", "1500", "JPY", None);
    let session_id = h.checkout(&credits, "ord_credits_1").await;
    h.sandbox.hub().complete_payment(&session_id).await.unwrap();
    match &h.take_events()[..] {
        [PaymentEvent::PaymentSucceeded { order, amount, .. }] => {
            assert_eq!(
                order.order_id.as_ref().map(OrderId::as_str),
                Some("ord_credits_1")
            );
            assert_eq!(*amount, money(1500, Currency::Jpy));
        }
        other => panic!("expected one payment, got {other:?}"),
    }
}

#[tokio::test]
async fn a_subscription_activates_renews_and_is_cancelled_at_its_period_end_through_the_gateway() {
    let h = start().await;
    let quarterly = plan("pro_quarterly", "recurring", "26.97", "EUR", Some(3));
    let (session_id, subscription_id, first) = h.subscribe(&quarterly, "ord_sub_1").await;
    h.renew(&subscription_id, first, money(2697, Currency::Eur))
        .await;
    h.cancel(&subscription_id).await;
    let paid = h
        .gateway
        .query_payment(&payment_ref("ord_sub_1", &session_id))
        .await
        .unwrap();
    match paid {
        PaymentStatus::Succeeded { amount, .. } => assert_eq!(amount, money(2697, Currency::Eur)),
        other => panic!("a paid subscription stays paid, got {other:?}"),
    }
}

#[tokio::test]
async fn the_sandbox_refuses_a_request_signed_with_another_key_as_pancake_would() {
    let h = start().await;
    let mut settings = gateway_settings(&h.sandbox.api_base_url(ProviderId::MorC));
    settings.private_key = MorCSettings::new(
        "MER_x",
        CREDENTIALS.provider_private_pem,
        "",
        "STO_x",
        PancakeMode::Test,
    )
    .private_key;
    let gateway = connect(&settings, Arc::new(SystemClock(0)));
    let lifetime = plan("lifetime", "one_time", "99.00", "USD", Some(999_999));
    match gateway
        .create_checkout(&h.request(&lifetime, "ord_forged"))
        .await
    {
        Err(GatewayError::Rejected(message)) => {
            assert!(message.contains("Invalid signature"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(h.sandbox.hub().payments().is_empty());
}

#[tokio::test]
async fn the_sandbox_refuses_a_request_stamped_ten_minutes_ago() {
    let h = start().await;
    let settings = gateway_settings(&h.sandbox.api_base_url(ProviderId::MorC));
    let gateway = connect(&settings, Arc::new(SystemClock(-600_000)));
    let lifetime = plan("lifetime", "one_time", "99.00", "USD", Some(999_999));
    match gateway
        .create_checkout(&h.request(&lifetime, "ord_late"))
        .await
    {
        Err(GatewayError::Rejected(message)) => {
            assert!(message.contains("X-Timestamp"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_declined_card_sends_nothing_and_leaves_the_order_pending() {
    let h = start().await;
    let lifetime = plan("lifetime", "one_time", "99.00", "USD", Some(999_999));
    let session_id = h.checkout(&lifetime, "ord_declined").await;
    h.sandbox.hub().decline_payment(&session_id).await.unwrap();
    assert!(h.take_verified().is_empty());
    assert_eq!(
        h.gateway
            .query_payment(&payment_ref("ord_declined", &session_id))
            .await
            .unwrap(),
        PaymentStatus::Pending
    );
}

#[tokio::test]
async fn refunds_of_a_renewal_name_the_payment_its_renewal_carried_and_a_dispute_sends_nothing() {
    let h = start().await;
    let quarterly = plan("pro_quarterly", "recurring", "26.97", "EUR", Some(3));
    let checkout_id = h.checkout(&quarterly, "ord_sub_refund").await;
    let hub = h.sandbox.hub();
    hub.complete_payment(&checkout_id).await.unwrap();
    let subscription_id = hub.payment(&checkout_id).unwrap().subscription_id.unwrap();
    let first_charge = hub.subscription(&subscription_id).unwrap().charges[0]
        .id
        .clone();
    match &h.take_events()[..] {
        [PaymentEvent::SubscriptionActivated { charge_ref, .. }] => {
            assert_eq!(charge_ref.as_deref(), Some(first_charge.as_str()));
        }
        other => panic!("expected an activation, got {other:?}"),
    }

    hub.renew_subscription(&subscription_id).await.unwrap();
    let renewal_charge = hub.subscription(&subscription_id).unwrap().charges[1]
        .id
        .clone();
    match &h.take_events()[..] {
        [PaymentEvent::SubscriptionRenewed { charge_ref, .. }] => {
            assert_eq!(charge_ref.as_deref(), Some(renewal_charge.as_str()));
        }
        other => panic!("expected a renewal, got {other:?}"),
    }

    let renewal = RefundedCharge::SubscriptionCharge {
        provider_subscription_id: Some(subscription_id.clone()),
        charge_ref: renewal_charge.clone(),
    };
    let mut reported = h
        .subscription_action(
            &subscription_id,
            "refund",
            serde_json::json!({ "amountMinor": 1000 }),
        )
        .await;
    reported.extend(
        h.subscription_action(
            &subscription_id,
            "refund",
            serde_json::json!({ "chargeId": renewal_charge }),
        )
        .await,
    );
    let amounts: Vec<(RefundedCharge, Money)> = reported
        .iter()
        .map(|(charge, report)| match report {
            RefundReport::One { amount, .. } => (charge.clone(), *amount),
            other => panic!("Pancake reports each refund's own amount, got {other:?}"),
        })
        .collect();
    assert_eq!(
        amounts,
        vec![
            (renewal.clone(), money(1000, Currency::Eur)),
            (renewal, money(1697, Currency::Eur))
        ]
    );
    assert!(
        matches!((&reported[0].1, &reported[1].1), (RefundReport::One { refund_id: a, .. }, RefundReport::One { refund_id: b, .. }) if a != b)
    );

    // Pancake has no dispute webhook: a lost dispute in the sandbox sends nothing.
    let disputed = h
        .subscription_action(
            &subscription_id,
            "dispute",
            serde_json::json!({ "chargeId": first_charge }),
        )
        .await;
    assert_eq!(disputed, vec![]);
    assert!(h.take_verified().is_empty());
}

/// A webhook exactly as Pancake would send another store's (or the other mode's) event: the
/// same platform key signs every merchant's webhooks.
fn platform_signed(event: &serde_json::Value) -> (String, Vec<u8>) {
    let body = serde_json::to_vec(event).unwrap();
    let t = SystemClock(0).now().unix_millis();
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(&body);
    let key = private_key(CREDENTIALS.provider_private_pem).unwrap();
    (
        format!("t={t},v1={}", b64(&rsa_sha256_sign(&key, &message))),
        body,
    )
}

#[tokio::test]
async fn another_stores_or_the_other_modes_webhooks_for_our_order_are_foreign_and_change_nothing() {
    let h = start().await;
    let lifetime = plan("lifetime", "one_time", "99.00", "USD", Some(999_999));
    let session_id = h.checkout(&lifetime, "ord_isolated").await;
    h.sandbox.hub().complete_payment(&session_id).await.unwrap();
    // The sandbox's own webhook carries the configured store and mode: it is ours.
    let ours = h.take_verified();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].foreign, None);
    assert!(matches!(
        &ours[0].events[..],
        [PaymentEvent::PaymentSucceeded { order, .. }] if order.order_id.as_ref().map(OrderId::as_str) == Some("ord_isolated")
    ));

    let data = serde_json::json!({
        "orderId": "ORD_foreign0000000000000",
        "orderStatus": "completed",
        "orderMerchantExternalId": "ord_isolated",
        "orderMetadata": { "orderId": "ord_isolated" },
        "currency": "USD",
        "amount": "99.00",
        "refundedAmount": "99.00",
        "paymentId": "PAY_foreign0000000000000",
    });
    for (event_type, store, mode) in [
        ("order.completed", "STO_someoneElse000000000", "test"),
        ("refund.succeeded", "STO_someoneElse000000000", "test"),
        ("refund.succeeded", sandbox::mor_c::SANDBOX_STORE_ID, "prod"),
    ] {
        let (signature, body) = platform_signed(&serde_json::json!({
            "id": format!("dlv_foreign_{event_type}_{mode}"),
            "timestamp": "2026-04-01T00:00:00.000Z",
            "eventType": event_type,
            "eventId": "PAY_foreign0000000000000",
            "storeId": store,
            "storeName": "Someone else",
            "mode": mode,
            "data": data,
        }));
        let response = reqwest::Client::new()
            .post(format!("{}/webhook", h.base))
            .header("x-waffo-signature", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        // Acknowledged, so Pancake does not retry it.
        assert_eq!(response.status(), 200, "{event_type} {store} {mode}");
        let verified = h.take_verified();
        assert_eq!(verified.len(), 1);
        assert!(
            verified[0].foreign.is_some(),
            "{event_type} for {store} in {mode} was taken as ours"
        );
        assert!(verified[0].events.is_empty());
    }
}

/// The sandbox's `[providers.mor_c]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::mor_c::MorCSettings {
    serde_json::from_value(sandbox::mor_c::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}
