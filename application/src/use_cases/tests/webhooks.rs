//! The webhook pipeline: one grant per payment, mismatches, stale events, subscriptions,
//! refunds and reconciliation.

use domain::{
    EventOutcome, OrderId, OrderStatus, OrderStatusKind, ProviderId, SubscriptionStatus, Timestamp,
    TransactionKind,
};

use super::harness::*;
use crate::accounts::User;
use crate::pagination::PageRequest;
use crate::ports::*;
use crate::use_cases::handle_webhook::HandleWebhookError;
use crate::use_cases::initiate_payment::InitiatePayment;
use crate::use_cases::reconcile::ReconcileSettings;

async fn order(h: &Harness, user: &User, plan: &str) -> OrderId {
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    h.service
        .initiate_payment(request)
        .await
        .unwrap()
        .order
        .order
        .id()
        .clone()
}

async fn balance(h: &Harness, user: &User) -> i64 {
    h.service
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap()
        .hundredths()
}

fn grants(h: &Harness) -> usize {
    h.service
        .store()
        .all_transactions()
        .iter()
        .filter(|t| t.kind.creates_lot())
        .count()
}

#[tokio::test]
async fn a_paid_credits_order_grants_its_credits_exactly_once() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let first = h
        .deliver(ProviderId::CardGateway, "evt_1", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(first.ack.verdict, crate::ports::AckVerdict::Accepted);
    assert_eq!(first.outcomes(), [EventOutcome::Applied]);
    assert_eq!(first.order_statuses, vec![OrderStatusKind::Paid]);
    assert_eq!(first.credits_granted, credits(100));
    // The same event again, and a different event for the same payment.
    let again = h
        .deliver(ProviderId::CardGateway, "evt_1", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(again.outcomes(), [EventOutcome::Duplicate]);
    let other = h
        .deliver(ProviderId::CardGateway, "evt_2", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(other.credits_granted, domain::Credits::ZERO);
    assert_eq!(balance(&h, &user).await, 10_000);
    assert_eq!(grants(&h), 1);
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert!(matches!(record.order.status(), OrderStatus::Paid { .. }));
}

#[tokio::test]
async fn a_refused_signature_changes_nothing() {
    let h = Harness::new();
    let mut headers = std::collections::BTreeMap::new();
    headers.insert(
        crate::testing::FAKE_SIGNATURE_HEADER.to_owned(),
        "forged".to_owned(),
    );
    let err = h
        .service
        .handle_webhook(
            Some(domain::ProviderId::CardGateway),
            WebhookRequest {
                headers,
                body: b"{}".to_vec(),
            },
        )
        .await
        .unwrap_err();
    let HandleWebhookError::Rejected { ack, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(ack.verdict, crate::ports::AckVerdict::Refused);
    assert!(h.service.store().inbox().is_empty());
    assert!(matches!(
        h.service
            .handle_webhook(
                "paypal".parse().ok(),
                WebhookRequest {
                    headers: Default::default(),
                    body: vec![]
                }
            )
            .await,
        Err(HandleWebhookError::UnknownProvider)
    ));
}

#[tokio::test]
async fn an_amount_mismatch_is_recorded_and_grants_nothing() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    h.deliver(ProviderId::CardGateway, "evt_1", vec![paid(&id, usd(1))])
        .await
        .unwrap();
    assert_eq!(balance(&h, &user).await, 0);
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Pending);
    assert!(record.mismatch.unwrap().contains("0.01 USD"));
    assert_eq!(h.service.store().inbox()[0].outcome, EventOutcome::Mismatch);
}

#[tokio::test]
async fn an_event_for_another_providers_order_changes_nothing() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    h.deliver(ProviderId::MorA, "evt_x", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(balance(&h, &user).await, 0);
    assert_eq!(
        h.service.store().inbox()[0].outcome,
        EventOutcome::UnknownOrder
    );
}

#[tokio::test]
async fn subscriptions_grant_each_paid_period_once_and_ignore_stale_events() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "pro-monthly").await;
    let at = |ms: i64| Timestamp::from_unix_millis(START_MS + ms);
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: None,
        charge_ref: None,
        occurred_at: at(10),
    };
    h.deliver(ProviderId::CardGateway, "e1", vec![activated.clone()])
        .await
        .unwrap();
    h.deliver(ProviderId::CardGateway, "e1-again", vec![activated])
        .await
        .unwrap();
    assert_eq!(balance(&h, &user).await, 5_000);
    let renewed = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(30, 60),
        amount: usd(999),
        charge_ref: None,
        occurred_at: at(100),
    };
    h.deliver(ProviderId::CardGateway, "e2", vec![renewed.clone()])
        .await
        .unwrap();
    h.deliver(ProviderId::CardGateway, "e2-other-id", vec![renewed])
        .await
        .unwrap();
    assert_eq!(grants(&h), 2);
    // A cancellation from before the renewal arrives late: stored, ignored.
    let stale = PaymentEvent::SubscriptionCanceled {
        provider_subscription_id: "sub_1".into(),
        occurred_at: at(50),
    };
    h.deliver(ProviderId::CardGateway, "e0", vec![stale])
        .await
        .unwrap();
    let status = h.service.report_status(&user).await.unwrap();
    let sub = status.subscription.unwrap();
    assert_eq!(sub.status(), SubscriptionStatus::Active);
    assert_eq!(sub.current_period(), period(30, 60));
    assert_eq!(
        h.service.store().inbox().last().unwrap().outcome,
        EventOutcome::Stale
    );
    let order = h.service.query_payment(&user, &id).await.unwrap();
    assert!(matches!(order.order.status(), OrderStatus::Paid { .. }));
}

#[tokio::test]
async fn a_refund_claws_back_the_unspent_share_and_records_what_was_spent() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    h.deliver(ProviderId::CardGateway, "paid", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    let at = Timestamp::from_unix_millis(START_MS + 9);
    // Half refunded: half of the 100 credits come back out.
    let half = PaymentEvent::Refunded {
        charge: crate::ports::RefundedCharge::Order(by_id(&id)),
        refund: crate::ports::RefundReport::Total(usd(500)),
        occurred_at: at,
    };
    h.deliver(ProviderId::CardGateway, "r1", vec![half.clone()])
        .await
        .unwrap();
    h.deliver(ProviderId::CardGateway, "r1-dup", vec![half])
        .await
        .unwrap();
    assert_eq!(balance(&h, &user).await, 5_000);
    let full = PaymentEvent::Refunded {
        charge: crate::ports::RefundedCharge::Order(by_id(&id)),
        refund: crate::ports::RefundReport::Total(usd(1000)),
        occurred_at: at,
    };
    h.deliver(ProviderId::CardGateway, "r2", vec![full])
        .await
        .unwrap();
    assert_eq!(balance(&h, &user).await, 0);
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert!(matches!(
        record.order.status(),
        OrderStatus::Refunded { .. }
    ));
    let history = h
        .service
        .transaction_history(
            &domain::AccountId::personal(&user.id),
            PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    let clawbacks = history
        .items
        .iter()
        .filter(|t| t.kind == TransactionKind::RefundClawback)
        .count();
    assert_eq!(clawbacks, 2);
}

#[tokio::test]
async fn the_reconciler_completes_an_order_whose_webhook_was_lost_and_expires_abandoned_ones() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let lost = order(&h, &user, "credits-100").await;
    let abandoned = order(&h, &user, "lifetime").await;
    h.fake(ProviderId::CardGateway).set_status(
        &lost,
        PaymentStatus::Succeeded {
            amount: usd(1000),
            paid_at: Timestamp::from_unix_millis(START_MS + 1),
        },
    );
    let settings = ReconcileSettings {
        pending_after_ms: 60_000,
        batch: 10,
        lease_ms: 30_000,
    };
    // Too early: nothing is due.
    assert_eq!(h.service.reconcile(settings).await.unwrap().checked, 0);
    h.service.clock().advance_ms(120_000);
    let report = h.service.reconcile(settings).await.unwrap();
    assert_eq!((report.checked, report.resolved), (2, 1));
    assert_eq!(balance(&h, &user).await, 10_000);
    // A second pass finds nothing new and grants nothing twice.
    h.service.reconcile(settings).await.unwrap();
    assert_eq!(grants(&h), 1);
    h.service.clock().advance_ms(4_000_000);
    let report = h.service.reconcile(settings).await.unwrap();
    assert_eq!(report.expired, 1);
    let record = h.service.query_payment(&user, &abandoned).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Expired);
}

#[tokio::test]
async fn a_withdrawn_cancellation_makes_the_subscription_renew_again() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "pro-monthly").await;
    let at = |ms: i64| Timestamp::from_unix_millis(START_MS + ms);
    let sub = || "sub_w".to_owned();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: sub(),
        period: period(0, 30),
        amount: None,
        charge_ref: None,
        occurred_at: at(10),
    };
    h.deliver(ProviderId::CardGateway, "w1", vec![activated])
        .await
        .unwrap();
    let scheduled = PaymentEvent::SubscriptionCancelScheduled {
        provider_subscription_id: sub(),
        occurred_at: at(20),
    };
    h.deliver(ProviderId::CardGateway, "w2", vec![scheduled])
        .await
        .unwrap();
    let renewal = async || {
        h.service
            .report_status(&user)
            .await
            .unwrap()
            .subscription
            .unwrap()
            .renewal()
    };
    assert_eq!(renewal().await, domain::RenewalIntent::EndsAtPeriodEnd);
    let withdrawn = PaymentEvent::SubscriptionCancelWithdrawn {
        provider_subscription_id: sub(),
        occurred_at: at(30),
    };
    h.deliver(ProviderId::CardGateway, "w3", vec![withdrawn])
        .await
        .unwrap();
    assert_eq!(renewal().await, domain::RenewalIntent::Renews);
}

#[tokio::test]
async fn a_validly_signed_event_for_another_merchant_is_acknowledged_recorded_and_changes_nothing()
{
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    h.fake(ProviderId::CardGateway).prepare_webhook(
        "sig-foreign",
        VerifiedWebhook {
            event_id: "evt_foreign".into(),
            event_type: "checkout.session.completed".into(),
            events: Vec::new(),
            foreign: Some("livemode true, the key is a test key".into()),
        },
    );
    let mut headers = std::collections::BTreeMap::new();
    headers.insert(
        crate::testing::FAKE_SIGNATURE_HEADER.to_owned(),
        "sig-foreign".to_owned(),
    );
    let request = WebhookRequest {
        headers,
        body: b"{}".to_vec(),
    };
    let handled = h
        .service
        .handle_webhook(Some(domain::ProviderId::CardGateway), request.clone())
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::ForeignMerchant]);
    assert_eq!(handled.ack.verdict, crate::ports::AckVerdict::Accepted);
    let again = h
        .service
        .handle_webhook(Some(domain::ProviderId::CardGateway), request)
        .await
        .unwrap();
    assert_eq!(again.outcomes(), [EventOutcome::Duplicate]);
    let entry = h.service.store().inbox().last().cloned().unwrap();
    assert_eq!(entry.outcome, EventOutcome::ForeignMerchant);
    assert!(entry.detail.unwrap().contains("livemode"));
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Pending);
    assert_eq!(balance(&h, &user).await, 0);
}

/// The buyer approved `id`'s payment at the provider (the fake names it `ref_<order>`).
fn approved(id: &OrderId, amount: domain::Money) -> PaymentEvent {
    PaymentEvent::PaymentApproved {
        order: OrderLocator {
            order_id: Some(id.clone()),
            provider_reference: Some(format!("ref_{id}")),
        },
        amount,
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    }
}

/// What the fake's capture of a 10.00 USD order answers.
fn captured() -> PaymentStatus {
    PaymentStatus::Succeeded {
        amount: usd(1000),
        paid_at: Timestamp::from_unix_millis(START_MS + 2_000),
    }
}

#[tokio::test]
async fn an_approval_of_our_pending_order_is_captured_and_paid_once() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let fake = h.fake(ProviderId::CardGateway);
    fake.answer_capture(&id, captured());
    let first = h
        .deliver(
            ProviderId::CardGateway,
            "evt_ok",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(first.outcomes(), [EventOutcome::Applied]);
    assert_eq!(first.order_statuses, vec![OrderStatusKind::Paid]);
    assert_eq!(first.credits_granted, credits(100));
    let captures = fake.captures();
    assert_eq!(captures.len(), 1);
    assert_eq!(captures[0].order_id, id);
    assert_eq!(captures[0].provider_reference, Some(format!("ref_{id}")));
    // Redelivered, and approved again under another event id: nothing is captured again.
    let again = h
        .deliver(
            ProviderId::CardGateway,
            "evt_ok",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(again.outcomes(), [EventOutcome::Duplicate]);
    let other = h
        .deliver(
            ProviderId::CardGateway,
            "evt_ok2",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(other.outcomes(), [EventOutcome::DuplicateState]);
    assert_eq!(fake.captures().len(), 1);
    assert_eq!(balance(&h, &user).await, 10_000);
    assert_eq!(grants(&h), 1);
}

#[tokio::test]
async fn an_approval_of_a_cancelled_order_is_not_captured() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    h.service.cancel_payment(&user, &id).await.unwrap();
    let fake = h.fake(ProviderId::CardGateway);
    fake.answer_capture(&id, captured());
    let handled = h
        .deliver(
            ProviderId::CardGateway,
            "evt_late",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::Ignored]);
    assert!(fake.captures().is_empty());
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Cancelled);
    assert_eq!(balance(&h, &user).await, 0);
    let inbox = h.service.store().inbox();
    let detail = inbox.last().unwrap().detail.clone().unwrap();
    assert!(detail.contains("not captured"), "{detail}");
}

#[tokio::test]
async fn an_approval_of_an_unknown_or_foreign_order_is_not_captured() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let fake = h.fake(ProviderId::CardGateway);
    fake.answer_capture(&id, captured());
    let unknown = OrderId::new("ord_not_ours").unwrap();
    let handled = h
        .deliver(
            ProviderId::CardGateway,
            "evt_u",
            vec![approved(&unknown, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::UnknownOrder]);
    // Our order id in the reference field of another provider order (another integration).
    let foreign = PaymentEvent::PaymentApproved {
        order: OrderLocator {
            order_id: Some(id.clone()),
            provider_reference: Some("SOMEONE-ELSES-ORDER".into()),
        },
        amount: usd(1000),
        occurred_at: Timestamp::from_unix_millis(START_MS + 1_000),
    };
    let handled = h
        .deliver(ProviderId::CardGateway, "evt_f", vec![foreign])
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::UnknownOrder]);
    // Another provider's approval never touches this provider's order.
    let handled = h
        .deliver(
            ProviderId::WalletGlobal,
            "evt_p",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::UnknownOrder]);
    // Another amount.
    let handled = h
        .deliver(
            ProviderId::CardGateway,
            "evt_m",
            vec![approved(&id, usd(999))],
        )
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::Mismatch]);
    assert!(fake.captures().is_empty());
    assert!(h.fake(ProviderId::WalletGlobal).captures().is_empty());
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Pending);
}

#[tokio::test]
async fn a_held_or_refused_capture_leaves_the_order_pending() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let fake = h.fake(ProviderId::CardGateway);
    fake.answer_capture(&id, PaymentStatus::Pending);
    let handled = h
        .deliver(
            ProviderId::CardGateway,
            "evt_h",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::Ignored]);
    assert_eq!(fake.captures().len(), 1);
    let record = h.service.query_payment(&user, &id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Pending);
}

#[tokio::test]
async fn the_buyers_return_captures_their_own_pending_order() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let stranger = h.user("b@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let fake = h.fake(ProviderId::CardGateway);
    // Not approved yet (the provider refuses the capture): still pending.
    let record = h.service.confirm_payment(&user, &id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Pending);
    assert!(matches!(
        h.service.confirm_payment(&stranger, &id).await,
        Err(crate::use_cases::query_payment::QueryPaymentError::NotFound)
    ));
    assert_eq!(fake.captures().len(), 1);
    fake.answer_capture(&id, captured());
    let record = h.service.confirm_payment(&user, &id).await.unwrap();
    assert!(matches!(record.order.status(), OrderStatus::Paid { .. }));
    assert_eq!(balance(&h, &user).await, 10_000);
    // Paid: a second return captures nothing, and the approval webhook after it neither.
    h.service.confirm_payment(&user, &id).await.unwrap();
    let late = h
        .deliver(
            ProviderId::CardGateway,
            "evt_a",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(late.outcomes(), [EventOutcome::DuplicateState]);
    assert_eq!(fake.captures().len(), 2);
    assert_eq!(grants(&h), 1);
}

#[tokio::test]
async fn an_approval_whose_capture_cannot_reach_the_provider_is_refused_for_redelivery() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let fake = h.fake(ProviderId::CardGateway);
    fake.answer_capture(&id, captured());
    fake.captures_unreachable(true);
    let refused = h
        .deliver(
            ProviderId::CardGateway,
            "evt_down",
            vec![approved(&id, usd(1000))],
        )
        .await;
    assert!(
        matches!(refused, Err(HandleWebhookError::ProviderUnavailable(_))),
        "{refused:?}"
    );
    // Nothing was recorded, so the provider's redelivery is handled in full.
    assert!(h.service.store().inbox().is_empty());
    fake.captures_unreachable(false);
    let redelivered = h
        .deliver(
            ProviderId::CardGateway,
            "evt_down",
            vec![approved(&id, usd(1000))],
        )
        .await
        .unwrap();
    assert_eq!(redelivered.outcomes(), [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, 10_000);
}
