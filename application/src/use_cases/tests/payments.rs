//! Initiate, query and cancel payments.

use std::sync::Arc;

use domain::{IdempotencyKey, OrderStatus, ProviderId};

use super::harness::*;
use crate::ports::*;
use crate::use_cases::cancel_payment::{CancelOutcome, CancelPaymentError};
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};
use crate::use_cases::query_payment::QueryPaymentError;

fn request(
    user: &crate::accounts::User,
    plan: &str,
    provider: &str,
    key: Option<&str>,
) -> InitiatePayment {
    InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: provider.parse().unwrap(),
        idempotency_key: key.map(|k| IdempotencyKey::new(k).unwrap()),
        returns: Default::default(),
    }
}

#[tokio::test]
async fn initiating_creates_a_pending_order_with_a_plan_snapshot_and_a_checkout() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let started = h
        .service
        .initiate_payment(request(&user, "credits-100", "card_gateway", None))
        .await
        .unwrap();
    let order = &started.order.order;
    assert_eq!(*order.status(), OrderStatus::Pending);
    assert_eq!(order.plan().price, usd(1000));
    assert_eq!(order.plan().credits, Some(credits(100)));
    assert!(matches!(
        started.order.checkout.as_ref().unwrap().target,
        CheckoutTarget::Redirect(_)
    ));
    let asked = h.fake(ProviderId::CardGateway).checkouts();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].notify_url,
        "http://tally.test/api/payment/webhook/card_gateway"
    );
    assert!(asked[0].success_url.contains(order.id().as_str()));
}

#[tokio::test]
async fn wallet_qr_checkouts_are_qr_codes() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let started = h
        .service
        .initiate_payment(request(&user, "qr-credits", "wallet_qr", None))
        .await
        .unwrap();
    assert!(matches!(
        started.order.checkout.unwrap().target,
        CheckoutTarget::QrCode(_)
    ));
}

#[tokio::test]
async fn bad_plans_and_providers_are_refused_before_any_order_exists() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let cases = [
        ("nope", "card_gateway", "plan_not_found"),
        ("credits-100", "mor_a", "provider_mismatch"),
    ];
    for (plan, provider, expected) in cases {
        let err = h
            .service
            .initiate_payment(request(&user, plan, provider, None))
            .await
            .unwrap_err();
        let code = match err {
            InitiatePaymentError::PlanNotFound(_) => "plan_not_found",
            InitiatePaymentError::ProviderMismatch { .. } => "provider_mismatch",
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(code, expected, "{plan} {provider}");
    }
    let orders = h
        .service
        .list_orders(
            &domain::AccountId::personal(&user.id),
            crate::pagination::PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(orders.total, 0);
    assert!(h.fake(ProviderId::CardGateway).checkouts().is_empty());
}

#[tokio::test]
async fn the_same_idempotency_key_replays_and_another_body_conflicts() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let first = h
        .service
        .initiate_payment(request(&user, "credits-100", "card_gateway", Some("k1")))
        .await
        .unwrap();
    let again = h
        .service
        .initiate_payment(request(&user, "credits-100", "card_gateway", Some("k1")))
        .await
        .unwrap();
    assert_eq!(first.order.order.id(), again.order.order.id());
    assert_eq!(h.fake(ProviderId::CardGateway).checkouts().len(), 1);
    let other = h
        .service
        .initiate_payment(request(&user, "lifetime", "card_gateway", Some("k1")))
        .await
        .unwrap_err();
    assert!(matches!(other, InitiatePaymentError::IdempotencyConflict));
}

#[tokio::test]
async fn a_gateway_failure_leaves_the_order_failed_with_the_reason() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    h.fake(ProviderId::CardGateway)
        .fail_checkouts(Some("card declined"));
    let err = h
        .service
        .initiate_payment(request(&user, "credits-100", "card_gateway", Some("k")))
        .await
        .unwrap_err();
    let InitiatePaymentError::Gateway { order_id, reason } = err else {
        panic!("{err:?}")
    };
    assert!(reason.contains("card declined"));
    let order = h.service.query_payment(&user, &order_id).await.unwrap();
    assert!(matches!(order.order.status(), OrderStatus::Failed { .. }));
    // The replay of the failed request answers the same failure.
    let replay = h
        .service
        .initiate_payment(request(&user, "credits-100", "card_gateway", Some("k")))
        .await
        .unwrap_err();
    assert!(matches!(replay, InitiatePaymentError::Gateway { .. }));
}

#[tokio::test]
async fn another_users_order_is_not_found() {
    let h = Harness::new();
    let alice = h.user("alice@example.com").await;
    let bob = h.user("bob@example.com").await;
    let started = h
        .service
        .initiate_payment(request(&alice, "credits-100", "card_gateway", None))
        .await
        .unwrap();
    let err = h
        .service
        .query_payment(&bob, started.order.order.id())
        .await
        .unwrap_err();
    assert!(matches!(err, QueryPaymentError::NotFound));
}

#[tokio::test]
async fn a_pending_order_is_cancelled_and_closed_at_the_provider_and_a_paid_one_is_not_cancellable()
{
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = h
        .service
        .initiate_payment(request(&user, "credits-100", "card_gateway", None))
        .await
        .unwrap()
        .order
        .order
        .id()
        .clone();
    let CancelOutcome::OrderCancelled(record, _) =
        h.service.cancel_payment(&user, &id).await.unwrap()
    else {
        panic!()
    };
    assert_eq!(*record.order.status(), OrderStatus::Cancelled);
    assert_eq!(h.fake(ProviderId::CardGateway).closed(), vec![id.clone()]);

    let paid_id = h
        .service
        .initiate_payment(request(&user, "lifetime", "card_gateway", None))
        .await
        .unwrap()
        .order
        .order
        .id()
        .clone();
    h.deliver(
        ProviderId::CardGateway,
        "evt_paid",
        vec![paid(&paid_id, usd(9900))],
    )
    .await
    .unwrap();
    let err = h.service.cancel_payment(&user, &paid_id).await.unwrap_err();
    assert!(matches!(err, CancelPaymentError::NotCancellable("paid")));
}

#[tokio::test]
async fn cancelling_a_subscription_order_ends_the_subscription_at_period_end_through_the_provider()
{
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = h
        .service
        .initiate_payment(request(&user, "pro-monthly", "card_gateway", None))
        .await
        .unwrap()
        .order
        .order
        .id()
        .clone();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_123".into(),
        period: period(0, 30),
        amount: None,
        charge_ref: None,
        occurred_at: domain::Timestamp::from_unix_millis(START_MS + 5),
    };
    h.deliver(ProviderId::CardGateway, "evt_sub", vec![activated])
        .await
        .unwrap();
    let outcome = h.service.cancel_payment(&user, &id).await.unwrap();
    let CancelOutcome::SubscriptionEndsAtPeriodEnd(_, sub) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(sub.renewal(), domain::RenewalIntent::EndsAtPeriodEnd);
    assert_eq!(
        h.fake(ProviderId::CardGateway).cancelled_subscriptions(),
        vec!["sub_123".to_owned()]
    );
}

#[tokio::test]
async fn no_gateway_call_when_validation_fails() {
    let h = Harness::with(config(), |p| {
        (p == ProviderId::CardGateway).then(|| {
            let mut mock = MockPaymentGateway::new();
            mock.expect_provider().return_const(ProviderId::CardGateway);
            mock.expect_create_checkout().never();
            Arc::new(mock) as Arc<dyn PaymentGateway>
        })
    });
    let user = h.user("a@example.com").await;
    let err = h
        .service
        .initiate_payment(request(&user, "nope", "card_gateway", None))
        .await
        .unwrap_err();
    assert!(matches!(err, InitiatePaymentError::PlanNotFound(_)));
    let err = h
        .service
        .initiate_payment(request(&user, "credits-100", "wallet_web", None))
        .await
        .unwrap_err();
    assert!(matches!(err, InitiatePaymentError::ProviderMismatch { .. }));
}

#[tokio::test]
async fn a_placeholder_address_is_never_sent_to_a_provider() {
    let h = Harness::new();
    // A host user whose token carried no address: its account's address is the placeholder.
    let identity = crate::ports::NewHostUser {
        issuer: String::new(),
        subject: "host-user".into(),
        created_at: domain::Timestamp::from_unix_millis(START_MS),
        signup_identity: None,
        contact: crate::accounts::BuyerContact::default(),
    };
    let store = h.service.store();
    let host_user = store.find_or_create_host_user(&identity).await.unwrap();
    assert!(!host_user.email.is_deliverable());
    let request = crate::use_cases::initiate_payment::InitiatePayment {
        save_method: false,
        user: host_user,
        account: None,
        plan_id: domain::PlanId::new("credits-100").unwrap(),
        provider: domain::ProviderId::CardGateway,
        idempotency_key: None,
        returns: Default::default(),
    };
    h.service.initiate_payment(request).await.unwrap();
    let buyer = h.user("buyer@example.com").await;
    let request = crate::use_cases::initiate_payment::InitiatePayment {
        save_method: false,
        user: buyer,
        account: None,
        plan_id: domain::PlanId::new("credits-100").unwrap(),
        provider: domain::ProviderId::CardGateway,
        idempotency_key: None,
        returns: Default::default(),
    };
    h.service.initiate_payment(request).await.unwrap();
    let sent: Vec<Option<String>> = (h.fake(domain::ProviderId::CardGateway).checkouts())
        .into_iter()
        .map(|c| c.customer_email)
        .collect();
    assert_eq!(sent, [None, Some("buyer@example.com".to_owned())]);
}
