//! End to end over real HTTP: the real Creem gateway creates checkouts, queries and cancels at the
//! sandbox, and verifies the webhooks the sandbox signs, as it would with Creem.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::{
    CheckoutRequest, CheckoutTarget, Clock, GatewayError, PaymentEvent, PaymentGateway, PaymentRef,
    PaymentStatus, RefundReport, RefundedCharge, VerifiedWebhook, WebhookError, WebhookRequest,
};
use domain::{
    BillingPeriod, Money, OrderId, Plan, PlanDraft, PlanSnapshot, PlanText, ProviderId,
    ProviderRefs, Timestamp, UserId,
};
use gateways::GatewayContext;
use gateways::mor_a::{MorAGateway, MorASettings};
use gateways::shared::ProviderHttp;
use sandbox::CREDENTIALS;
use sandbox::hub::SimSubscriptionStatus;

use crate::support::{self, Served, SystemClock, usd};

type Harness = Served<MorAGateway>;

fn connect(settings: &MorASettings, clock: Arc<dyn Clock>) -> MorAGateway {
    let http = ProviderHttp::new(&settings.http()).unwrap();
    MorAGateway::new(
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
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    support::serve(clock.clone(), "/webhook", |sandbox| {
        let settings = gateway_settings(&sandbox.api_base_url(ProviderId::MorA));
        Arc::new(connect(&settings, clock))
    })
    .await
}

impl Harness {
    /// The webhooks verified since the last call.
    fn take_verified(&self) -> Vec<VerifiedWebhook> {
        self.receiver.take_accepted()
    }

    /// The events of the webhooks verified since the last call.
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
            expires_at: Timestamp::from_unix_millis(i64::MAX / 2),
            save_method: false,
        }
    }

    /// Refund `amounts` one after the other; the running totals the webhooks reported.
    async fn refund(&self, payment_id: &str, order_id: &str, amounts: &[i64]) -> Vec<Money> {
        for amount in amounts {
            self.sandbox
                .hub()
                .refund_payment(payment_id, *amount)
                .await
                .unwrap();
        }
        let events = self.take_events();
        events
            .into_iter()
            .map(|event| match event {
                PaymentEvent::Refunded {
                    refund: application::ports::RefundReport::Total(total_refunded),
                    charge: application::ports::RefundedCharge::Order(order),
                    ..
                } => {
                    assert_eq!(order.order_id.as_ref().map(OrderId::as_str), Some(order_id));
                    total_refunded
                }
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
            [
                "checkout.completed",
                "subscription.active",
                "subscription.paid"
            ]
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

    /// `POST /sandbox/api/subscriptions/{id}/{action}` with `body`, as the dashboard's API does;
    /// the refunds and lost disputes the webhooks it caused mean.
    async fn subscription_action(
        &self,
        id: &str,
        action: &str,
        body: serde_json::Value,
    ) -> Vec<(String, RefundedCharge, RefundReport)> {
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
        self.take_verified()
            .into_iter()
            .flat_map(|w| {
                let event_type = w.event_type;
                w.events.into_iter().map(move |e| (event_type.clone(), e))
            })
            .map(|(event_type, event)| match event {
                PaymentEvent::Refunded { charge, refund, .. } => (event_type, charge, refund),
                other => panic!("expected a refund, got {other:?}"),
            })
            .collect()
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

    /// Create a checkout through the gateway; its checkout id.
    async fn checkout(&self, plan: &Plan, order_id: &str) -> String {
        let checkout = self
            .gateway
            .create_checkout(&self.request(plan, order_id))
            .await
            .unwrap();
        let reference = checkout.provider_reference.unwrap();
        assert_eq!(
            checkout.target,
            CheckoutTarget::Redirect(self.sandbox.hub().checkout_url(&reference))
        );
        reference
    }
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

fn order_of(event: &PaymentEvent) -> Option<&OrderId> {
    match event {
        PaymentEvent::PaymentSucceeded { order, .. }
        | PaymentEvent::SubscriptionActivated { order, .. }
        | PaymentEvent::Refunded {
            charge: application::ports::RefundedCharge::Order(order),
            ..
        } => order.order_id.as_ref(),
        _ => None,
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
    let lifetime = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let checkout_id = h.checkout(&lifetime, "ord_onetime_1").await;
    assert_eq!(
        h.gateway
            .query_payment(&PaymentRef {
                order_id: OrderId::new("ord_onetime_1").unwrap(),
                provider_reference: Some(checkout_id.clone())
            })
            .await
            .unwrap(),
        PaymentStatus::Pending
    );

    h.sandbox
        .hub()
        .complete_payment(&checkout_id)
        .await
        .unwrap();
    let verified = h.take_verified();
    assert_eq!(verified.len(), 1);
    assert_eq!(verified[0].event_type, "checkout.completed");
    match &verified[0].events[..] {
        [PaymentEvent::PaymentSucceeded { order, amount, .. }] => {
            assert_eq!(
                order.order_id.as_ref().map(OrderId::as_str),
                Some("ord_onetime_1")
            );
            assert_eq!(
                order.provider_reference.as_deref(),
                Some(checkout_id.as_str())
            );
            assert_eq!(*amount, usd(19_900));
        }
        other => panic!("expected one payment, got {other:?}"),
    }

    let payment = PaymentRef {
        order_id: OrderId::new("ord_onetime_1").unwrap(),
        provider_reference: Some(checkout_id.clone()),
    };
    match h.gateway.query_payment(&payment).await.unwrap() {
        PaymentStatus::Succeeded { amount, .. } => assert_eq!(amount, usd(19_900)),
        other => panic!("expected a paid checkout, got {other:?}"),
    }

    let totals = h
        .refund(&checkout_id, "ord_onetime_1", &[5_000, 14_900])
        .await;
    assert_eq!(totals, vec![usd(5_000), usd(19_900)]);
}

#[tokio::test]
async fn a_credits_purchase_reports_its_exact_price_for_our_order() {
    let h = start().await;
    let credits = plan("credits_100", "credits", "4.99", None, Some("100"));
    let checkout_id = h.checkout(&credits, "ord_credits_1").await;
    h.sandbox
        .hub()
        .complete_payment(&checkout_id)
        .await
        .unwrap();
    match &h.take_events()[..] {
        [event @ PaymentEvent::PaymentSucceeded { amount, .. }] => {
            assert_eq!(*amount, usd(499));
            assert_eq!(order_of(event).map(OrderId::as_str), Some("ord_credits_1"));
        }
        other => panic!("expected one payment, got {other:?}"),
    }
}

#[tokio::test]
async fn a_subscription_activates_renews_and_is_cancelled_at_its_period_end_through_the_gateway() {
    let h = start().await;
    let monthly = plan("pro_monthly", "recurring", "9.90", Some(1), None);
    let (_, subscription_id, first) = h.subscribe(&monthly, "ord_sub_1").await;
    h.renew(&subscription_id, first, usd(990)).await;
    h.cancel(&subscription_id).await;
}

#[tokio::test]
async fn the_sandbox_refuses_a_gateway_with_the_wrong_api_key_as_creem_would() {
    let h = start().await;
    let mut settings = gateway_settings(&h.sandbox.api_base_url(ProviderId::MorA));
    settings.api_key = MorASettings::new("sk_wrong", CREDENTIALS.hmac_secret).api_key;
    let gateway = connect(&settings, Arc::new(SystemClock));
    let lifetime = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    match gateway
        .create_checkout(&h.request(&lifetime, "ord_denied"))
        .await
    {
        Err(GatewayError::Rejected(message)) => {
            assert!(message.contains("Invalid API key"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(h.sandbox.hub().payments().is_empty());
}

#[tokio::test]
async fn a_declined_card_sends_nothing_and_leaves_the_checkout_pending() {
    let h = start().await;
    let lifetime = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let checkout_id = h.checkout(&lifetime, "ord_declined").await;
    h.sandbox.hub().decline_payment(&checkout_id).await.unwrap();
    assert!(h.take_verified().is_empty());
    let payment = PaymentRef {
        order_id: OrderId::new("ord_declined").unwrap(),
        provider_reference: Some(checkout_id),
    };
    assert_eq!(
        h.gateway.query_payment(&payment).await.unwrap(),
        PaymentStatus::Pending
    );
}

#[tokio::test]
async fn refunds_and_a_chargeback_of_subscription_charges_name_the_transactions_paid_events_carried()
 {
    let h = start().await;
    let monthly = plan("pro_monthly", "recurring", "9.90", Some(1), None);
    let checkout_id = h.checkout(&monthly, "ord_sub_refund").await;
    let hub = h.sandbox.hub();
    hub.complete_payment(&checkout_id).await.unwrap();
    let subscription_id = hub.payment(&checkout_id).unwrap().subscription_id.unwrap();
    let first_charge = hub.subscription(&subscription_id).unwrap().charges[0]
        .id
        .clone();
    let activated: Vec<Option<String>> = h
        .take_events()
        .into_iter()
        .filter_map(|event| match event {
            PaymentEvent::SubscriptionActivated { charge_ref, .. } => Some(charge_ref),
            _ => None,
        })
        .collect();
    assert_eq!(activated, vec![Some(first_charge.clone())]);

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

    // The renewal (the latest charge) refunded in part, then the rest: Creem reports the
    // transaction's running refunded total each time.
    let renewal = RefundedCharge::SubscriptionCharge {
        provider_subscription_id: Some(subscription_id.clone()),
        charge_ref: renewal_charge.clone(),
    };
    let partial = h
        .subscription_action(
            &subscription_id,
            "refund",
            serde_json::json!({ "amountMinor": 400 }),
        )
        .await;
    assert_eq!(
        partial,
        vec![(
            "refund.created".to_owned(),
            renewal.clone(),
            RefundReport::Total(usd(400))
        )]
    );
    let rest = h
        .subscription_action(
            &subscription_id,
            "refund",
            serde_json::json!({ "chargeId": renewal_charge }),
        )
        .await;
    assert_eq!(
        rest,
        vec![(
            "refund.created".to_owned(),
            renewal,
            RefundReport::Total(usd(990))
        )]
    );

    // Creem has no lost-dispute event: `dispute.created` comes with the charge taken back.
    let chargeback = h
        .subscription_action(
            &subscription_id,
            "dispute",
            serde_json::json!({ "chargeId": first_charge }),
        )
        .await;
    assert_eq!(
        chargeback,
        vec![(
            "dispute.created".to_owned(),
            RefundedCharge::SubscriptionCharge {
                provider_subscription_id: Some(subscription_id.clone()),
                charge_ref: first_charge,
            },
            RefundReport::Total(usd(990))
        )]
    );
}

/// The last webhook the sandbox sent, as the gateway receives it.
fn last_webhook(h: &Harness) -> (WebhookRequest, serde_json::Value) {
    let webhook = h
        .sandbox
        .hub()
        .deliveries()
        .pop()
        .and_then(|d| d.webhook)
        .unwrap();
    let headers: BTreeMap<String, String> = webhook
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    let body: serde_json::Value = serde_json::from_slice(&webhook.body).unwrap();
    (
        WebhookRequest {
            headers,
            body: webhook.body,
        },
        body,
    )
}

#[tokio::test]
async fn sandbox_webhooks_verify_by_standard_webhooks_and_by_creem_signature_alone() {
    let h = start().await;
    let lifetime = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let checkout_id = h.checkout(&lifetime, "ord_signatures").await;
    h.sandbox
        .hub()
        .complete_payment(&checkout_id)
        .await
        .unwrap();
    assert_eq!(h.take_events().len(), 1);
    let (request, _) = last_webhook(&h);
    for name in [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "creem-signature",
    ] {
        assert!(request.headers.contains_key(name), "{name}");
    }

    // Standard Webhooks decides when its headers are there: a broken one is refused.
    let mut broken = request.clone();
    broken
        .headers
        .insert("webhook-id".to_owned(), "msg_other".to_owned());
    assert_eq!(
        h.gateway.verify_webhook(&broken).await.unwrap_err(),
        WebhookError::BadSignature
    );
    // Without them, `creem-signature` alone verifies the same body.
    let mut legacy = request.clone();
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        legacy.headers.remove(name);
    }
    let verified = h.gateway.verify_webhook(&legacy).await.unwrap();
    assert_eq!(verified.event_type, "checkout.completed");
    assert_eq!(verified.events.len(), 1);
}

#[tokio::test]
async fn a_refund_naming_its_checkout_by_id_is_resolved_through_the_sandboxs_api() {
    let h = start().await;
    let lifetime = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let checkout_id = h.checkout(&lifetime, "ord_refund_by_id").await;
    let hub = h.sandbox.hub();
    hub.complete_payment(&checkout_id).await.unwrap();
    h.take_events();
    hub.refund_payment(&checkout_id, 900).await.unwrap();
    let (_, body) = last_webhook(&h);
    assert_eq!(body["eventType"], "refund.created");
    assert_eq!(body["object"]["checkout"], serde_json::json!(checkout_id));
    match &h.take_events()[..] {
        [
            PaymentEvent::Refunded {
                charge: RefundedCharge::Order(order),
                refund: RefundReport::Total(total),
                ..
            },
        ] => {
            assert_eq!(
                order.order_id.as_ref().map(OrderId::as_str),
                Some("ord_refund_by_id")
            );
            assert_eq!(*total, usd(900));
        }
        other => panic!("expected a refund, got {other:?}"),
    }
}

#[tokio::test]
async fn a_renewal_naming_its_product_by_id_reads_its_amount_from_the_sandboxs_transaction() {
    let h = start().await;
    let monthly = plan("pro_monthly", "recurring", "9.90", Some(1), None);
    let (_, subscription_id, first) = h.subscribe(&monthly, "ord_sub_by_id").await;
    h.renew(&subscription_id, first, usd(990)).await;
    let (_, body) = last_webhook(&h);
    assert_eq!(body["eventType"], "subscription.paid");
    assert!(body["object"]["product"].is_string());
    assert!(body["object"].get("last_transaction").is_none());
}

#[tokio::test]
async fn sandbox_events_are_test_mode_events_and_foreign_to_a_live_key() {
    let h = start().await;
    let lifetime = plan("lifetime", "one_time", "199.00", Some(999_999), None);
    let checkout_id = h.checkout(&lifetime, "ord_mode").await;
    h.sandbox
        .hub()
        .complete_payment(&checkout_id)
        .await
        .unwrap();
    assert_eq!(h.take_events().len(), 1);
    let (request, body) = last_webhook(&h);
    assert_eq!(body["object"]["mode"], "test");

    let mut live = MorASettings::new("creem_live_key", CREDENTIALS.creem_webhook_secret);
    live.base_url = Some(h.sandbox.api_base_url(ProviderId::MorA));
    let live = MorAGateway::new(
        &live,
        GatewayContext {
            http: ProviderHttp::new(&live.http()).unwrap(),
            clock: Arc::new(SystemClock),
            sandbox: false,
        },
    )
    .unwrap();
    let verified = live.verify_webhook(&request).await.unwrap();
    assert!(verified.foreign.is_some());
    assert!(verified.events.is_empty());
}

#[tokio::test]
async fn creem_has_no_refund_api_so_the_gateway_refuses_a_refund_without_calling_the_sandbox() {
    let h = start().await;
    let request = application::ports::RefundRequest {
        payment: PaymentRef {
            order_id: OrderId::new("ord_no_refund").unwrap(),
            provider_reference: Some("ch_sandbox_1".into()),
        },
        refund_id: "rf_1".into(),
        amount: usd(100),
        paid: usd(19_900),
        reason: "requested by the buyer".into(),
        notify_url: format!("{}/webhook", h.base),
    };
    assert!(matches!(
        h.gateway.refund(&request).await,
        Err(GatewayError::NotSupported)
    ));
}

/// The sandbox's `[providers.mor_a]` table as the gateway's settings.
fn gateway_settings(api_base_url: &str) -> gateways::mor_a::MorASettings {
    serde_json::from_value(sandbox::mor_a::gateway_settings(api_base_url))
        .expect("the sandbox's settings table fits the gateway")
}

#[tokio::test]
async fn a_subscription_cancelled_now_through_the_gateway_ends_with_subscription_canceled() {
    let h = start().await;
    let monthly = plan("pro_monthly", "recurring", "9.90", Some(1), None);
    let (_, subscription_id, _) = h.subscribe(&monthly, "ord_sub_now").await;
    h.take_events();
    h.gateway
        .cancel_subscription_now(&subscription_id)
        .await
        .unwrap();
    let status = h
        .sandbox
        .hub()
        .subscription(&subscription_id)
        .unwrap()
        .status;
    assert_eq!(status, SimSubscriptionStatus::Canceled);
    assert_eq!(
        lifecycle(&h.take_events()),
        [("canceled", subscription_id.clone())]
    );
}
