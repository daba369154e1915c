//! Subscription events are checked against what was sold (issue 14, CORRECTNESS.md invariant 10):
//! activation must name a recurring order and pay its price; a renewal must pay the sold price
//! in its currency for the period after the one paid, and grants the sold credits whatever
//! happened to the plan since.

use domain::{
    BillingPeriod, Currency, EventOutcome, Money, OrderId, OrderStatus, ProviderId, Timestamp,
    TransactionKind,
};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::initiate_payment::InitiatePayment;
use crate::use_cases::manage_plans::PlanInput;
use crate::use_cases::plans::PricingMode;

/// The credits of one `pro-monthly` period (50), in hundredths.
const PERIOD_CREDITS: i64 = 5_000;

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
    let initiated = h.service.initiate_payment(request).await.unwrap();
    initiated.order.order.id().clone()
}

async fn balance(h: &Harness, user: &User) -> i64 {
    h.service
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap()
        .hundredths()
}

fn grants(h: &Harness) -> usize {
    let transactions = h.service.store().all_transactions();
    transactions.iter().filter(|t| t.kind.creates_lot()).count()
}

fn eur(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Eur).unwrap()
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS + ms)
}

fn activated(order: &OrderId, amount: Option<Money>) -> PaymentEvent {
    PaymentEvent::SubscriptionActivated {
        order: by_id(order),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount,
        charge_ref: None,
        occurred_at: at(10),
    }
}

fn renewed(period: BillingPeriod, amount: Money, occurred_ms: i64) -> PaymentEvent {
    PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period,
        amount,
        charge_ref: None,
        occurred_at: at(occurred_ms),
    }
}

async fn deliver(h: &Harness, event_id: &str, event: PaymentEvent) -> Vec<EventOutcome> {
    let handled = h.deliver(ProviderId::CardGateway, event_id, vec![event]);
    handled.await.unwrap().outcomes().to_vec()
}

/// A user with an active `pro-monthly` subscription whose first period (days 0 to 30) granted.
async fn subscribed(h: &Harness) -> User {
    let user = h.user("a@example.com").await;
    let id = order(h, &user, "pro-monthly").await;
    let outcomes = deliver(h, "act", activated(&id, Some(usd(999)))).await;
    assert_eq!(outcomes, [EventOutcome::Applied]);
    assert_eq!(balance(h, &user).await, PERIOD_CREDITS);
    user
}

async fn current_period(h: &Harness, user: &User) -> BillingPeriod {
    let status = h.service.report_status(user).await.unwrap();
    status.subscription.unwrap().current_period()
}

async fn assert_untouched_order(h: &Harness, user: &User, id: &OrderId) {
    let record = h.service.query_payment(user, id).await.unwrap();
    assert_eq!(*record.order.status(), OrderStatus::Pending);
    assert!(record.mismatch.is_some(), "the mismatch is shown to admins");
    let status = h.service.report_status(user).await.unwrap();
    assert!(status.subscription.is_none());
    assert_eq!(balance(h, user).await, 0);
    assert_eq!(grants(h), 0);
}

#[tokio::test]
async fn an_activation_naming_a_credits_order_is_a_mismatch_and_changes_nothing() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "credits-100").await;
    let outcomes = deliver(&h, "act", activated(&id, Some(usd(1)))).await;
    assert_eq!(outcomes, [EventOutcome::Mismatch]);
    assert_untouched_order(&h, &user, &id).await;
    // Without an amount it is refused just the same: the plan type alone decides.
    let outcomes = deliver(&h, "act-2", activated(&id, None)).await;
    assert_eq!(outcomes, [EventOutcome::Mismatch]);
    assert_untouched_order(&h, &user, &id).await;
}

#[tokio::test]
async fn an_activation_paying_another_amount_or_currency_is_a_mismatch() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "pro-monthly").await;
    assert_eq!(
        deliver(&h, "cent", activated(&id, Some(usd(1)))).await,
        [EventOutcome::Mismatch]
    );
    assert_eq!(
        deliver(&h, "euro", activated(&id, Some(eur(999)))).await,
        [EventOutcome::Mismatch]
    );
    assert_untouched_order(&h, &user, &id).await;
    // The right price activates it.
    assert_eq!(
        deliver(&h, "right", activated(&id, Some(usd(999)))).await,
        [EventOutcome::Applied]
    );
    assert_eq!(balance(&h, &user).await, PERIOD_CREDITS);
}

#[tokio::test]
async fn a_renewal_paying_less_than_the_price_grants_nothing() {
    let h = Harness::new();
    let user = subscribed(&h).await;
    let outcomes = deliver(&h, "r", renewed(period(30, 60), usd(1), 100)).await;
    assert_eq!(outcomes, [EventOutcome::Mismatch]);
    assert_eq!(balance(&h, &user).await, PERIOD_CREDITS);
    assert_eq!(current_period(&h, &user).await, period(0, 30));
}

#[tokio::test]
async fn a_renewal_in_another_currency_grants_nothing() {
    let h = Harness::new();
    let user = subscribed(&h).await;
    let outcomes = deliver(&h, "r", renewed(period(30, 60), eur(999), 100)).await;
    assert_eq!(outcomes, [EventOutcome::Mismatch]);
    assert_eq!(balance(&h, &user).await, PERIOD_CREDITS);
    assert_eq!(current_period(&h, &user).await, period(0, 30));
}

#[tokio::test]
async fn a_renewal_for_a_period_before_the_subscription_began_grants_nothing() {
    let h = Harness::new();
    let user = subscribed(&h).await;
    let outcomes = deliver(&h, "r", renewed(period(-90, -60), usd(999), 100)).await;
    assert_eq!(outcomes, [EventOutcome::Stale]);
    assert_eq!(balance(&h, &user).await, PERIOD_CREDITS);
    assert_eq!(grants(&h), 1);
    assert_eq!(current_period(&h, &user).await, period(0, 30));
}

#[tokio::test]
async fn a_renewal_overlapping_a_granted_period_grants_nothing() {
    let h = Harness::new();
    let user = subscribed(&h).await;
    // Within the clock tolerance (one hour early) is the next period.
    let early = BillingPeriod::new(
        period(30, 60).start().plus_millis(-60_000),
        period(30, 60).end(),
    );
    let outcomes = deliver(&h, "r1", renewed(early.unwrap(), usd(999), 100)).await;
    assert_eq!(outcomes, [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, 2 * PERIOD_CREDITS);
    // Half a period into the one just granted is not.
    let outcomes = deliver(&h, "r2", renewed(period(45, 75), usd(999), 200)).await;
    assert_eq!(outcomes, [EventOutcome::Stale]);
    let outcomes = deliver(&h, "r3", renewed(period(15, 45), usd(999), 300)).await;
    assert_eq!(outcomes, [EventOutcome::Stale]);
    assert_eq!(balance(&h, &user).await, 2 * PERIOD_CREDITS);
    assert_eq!(grants(&h), 2);
}

#[tokio::test]
async fn a_renewal_told_twice_grants_once() {
    let h = Harness::new();
    let user = subscribed(&h).await;
    let renewal = renewed(period(30, 60), usd(999), 100);
    assert_eq!(
        deliver(&h, "r1", renewal.clone()).await,
        [EventOutcome::Applied]
    );
    assert_eq!(
        deliver(&h, "r1", renewal.clone()).await,
        [EventOutcome::Duplicate]
    );
    // The same payment under another event id, and told again later.
    assert_eq!(
        deliver(&h, "r1-other-id", renewal).await,
        [EventOutcome::DuplicateState]
    );
    let later = renewed(period(30, 60), usd(999), 500);
    assert_eq!(
        deliver(&h, "r1-later", later).await,
        [EventOutcome::DuplicateState]
    );
    assert_eq!(balance(&h, &user).await, 2 * PERIOD_CREDITS);
    assert_eq!(grants(&h), 2);
}

#[tokio::test]
async fn an_activation_told_twice_grants_once() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "pro-monthly").await;
    assert_eq!(
        deliver(&h, "a1", activated(&id, None)).await,
        [EventOutcome::Applied]
    );
    let again = deliver(&h, "a2", activated(&id, Some(usd(999)))).await;
    assert_eq!(again, [EventOutcome::DuplicateState]);
    assert_eq!(balance(&h, &user).await, PERIOD_CREDITS);
}

#[tokio::test]
async fn renewals_grant_the_credits_sold_after_the_plan_is_edited_or_deleted() {
    let mut config = config();
    config.pricing_mode = PricingMode::Dynamic;
    let h = Harness::with(config, |_| None);
    let admin = h.admin().await;
    h.service
        .import_static_plans(&h.admin().await)
        .await
        .unwrap();
    let user = subscribed(&h).await;
    let edited = PlanInput {
        draft: plan(
            "pro-monthly",
            "card_gateway",
            "recurring",
            "9.99",
            "USD",
            Some("500"),
        )
        .to_draft(),
        sort_order: 0,
        locales: Vec::new(),
    };
    h.service
        .update_plan(&admin, "pro-monthly", &edited)
        .await
        .unwrap();
    let outcomes = deliver(&h, "r1", renewed(period(30, 60), usd(999), 100)).await;
    assert_eq!(outcomes, [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, 2 * PERIOD_CREDITS);
    h.service
        .delete_plan(&admin, &plan_id("pro-monthly"))
        .await
        .unwrap();
    let outcomes = deliver(&h, "r2", renewed(period(60, 90), usd(999), 200)).await;
    assert_eq!(outcomes, [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, 3 * PERIOD_CREDITS);
    let history = h.service.store().all_transactions();
    let grants = history
        .iter()
        .filter(|t| t.kind == TransactionKind::SubscriptionGrant);
    assert_eq!(grants.count(), 3);
}

#[tokio::test]
async fn a_second_provider_subscription_naming_a_paid_order_grants_nothing() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "pro-monthly").await;
    assert_eq!(
        deliver(&h, "act", activated(&id, Some(usd(999)))).await,
        [EventOutcome::Applied]
    );
    let again = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_2".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: at(20),
    };
    assert_eq!(
        deliver(&h, "act-other", again).await,
        [EventOutcome::Mismatch]
    );
    assert_eq!(balance(&h, &user).await, PERIOD_CREDITS, "one grant");
    assert_eq!(grants(&h), 1);
    let subscriptions = h
        .service
        .store()
        .list_subscriptions(&domain::AccountId::personal(&user.id))
        .await
        .unwrap();
    assert_eq!(subscriptions.len(), 1, "no second subscription");
}

#[tokio::test]
async fn an_activation_for_a_failed_order_is_a_late_payment_and_starts_nothing() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let id = order(&h, &user, "pro-monthly").await;
    let failed = PaymentEvent::PaymentFailed {
        order: by_id(&id),
        reason: "card declined".into(),
        occurred_at: at(5),
    };
    assert_eq!(deliver(&h, "fail", failed).await, [EventOutcome::Applied]);
    assert_eq!(
        deliver(&h, "act", activated(&id, Some(usd(999)))).await,
        [EventOutcome::LatePayment]
    );
    let status = h.service.report_status(&user).await.unwrap();
    assert!(status.subscription.is_none());
    assert_eq!(balance(&h, &user).await, 0);
    assert_eq!(grants(&h), 0);
}
