//! What a user owns (issue 14): one live subscription unless several are allowed, no second
//! purchase of a one-time plan whose access still runs, finite one-time access in calendar
//! months, past-due access for a grace period only, and a status that shows all of it.

use domain::{AccessEnd, EventOutcome, OrderId, Plan, ProviderId, SubscriptionAccess, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::service::ServiceConfig;
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};

const DAY_MS: i64 = 86_400_000;
/// 2027-01-15T08:00:01Z (when [`paid`] says the payment landed) plus 12 calendar months is
/// 2028-01-15T08:00:01Z: 365 days later, not 12 × 30.
const TWELVE_CALENDAR_MONTHS_MS: i64 = 365 * DAY_MS;

fn with_pass(mut config: ServiceConfig) -> ServiceConfig {
    let mut draft = plan("pass-12", "card_gateway", "one_time", "49", "USD", None).to_draft();
    draft.months = Some(12);
    config.catalog.push(Plan::from_draft(&draft).unwrap());
    config
}

async fn initiate(h: &Harness, user: &User, plan: &str) -> Result<OrderId, InitiatePaymentError> {
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let started = h.service.initiate_payment(request).await?;
    Ok(started.order.order.id().clone())
}

async fn deliver(h: &Harness, event_id: &str, event: PaymentEvent) -> Vec<EventOutcome> {
    let handled = h.deliver(ProviderId::CardGateway, event_id, vec![event]);
    handled.await.unwrap().outcomes().to_vec()
}

fn at_day(days: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS).plus_days(days)
}

/// Start and activate a `pro-monthly` subscription (period days 0 to 30) named `sub`.
async fn subscribe(h: &Harness, user: &User, sub: &str) -> OrderId {
    let id = initiate(h, user, "pro-monthly").await.unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: sub.into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 10),
    };
    assert_eq!(
        deliver(h, &format!("act-{sub}"), activated).await,
        [EventOutcome::Applied]
    );
    id
}

async fn buy(h: &Harness, user: &User, plan: &str, amount_minor: i64) -> OrderId {
    let id = initiate(h, user, plan).await.unwrap();
    let outcomes = deliver(h, &format!("paid-{id}"), paid(&id, usd(amount_minor))).await;
    assert_eq!(outcomes, [EventOutcome::Applied]);
    id
}

async fn has_access(h: &Harness, user: &User) -> bool {
    let status = h.service.report_status(user).await.unwrap();
    status.has_access(h.service.clock().now())
}

#[tokio::test]
async fn a_second_subscription_is_refused_while_one_is_live() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    subscribe(&h, &user, "sub_1").await;
    let refused = initiate(&h, &user, "pro-monthly").await.unwrap_err();
    let InitiatePaymentError::AlreadySubscribed {
        subscription_id,
        plan_id,
    } = refused
    else {
        panic!("expected AlreadySubscribed, got {refused:?}");
    };
    assert_eq!(plan_id.as_str(), "pro-monthly");
    let status = h.service.report_status(&user).await.unwrap();
    assert_eq!(*status.subscriptions[0].subscription.id(), subscription_id);
    // Scheduled to cancel is still live; past due too.
    for (event_id, event) in [
        (
            "cancel-scheduled",
            PaymentEvent::SubscriptionCancelScheduled {
                provider_subscription_id: "sub_1".into(),
                occurred_at: at_day(1),
            },
        ),
        (
            "past-due",
            PaymentEvent::SubscriptionPastDue {
                provider_subscription_id: "sub_1".into(),
                occurred_at: at_day(2),
            },
        ),
    ] {
        assert_eq!(deliver(&h, event_id, event).await, [EventOutcome::Applied]);
        let again = initiate(&h, &user, "pro-monthly").await;
        assert!(
            matches!(again, Err(InitiatePaymentError::AlreadySubscribed { .. })),
            "{event_id}: {again:?}"
        );
    }
    // Once canceled, a new one may start; credit packs were never refused.
    let canceled = PaymentEvent::SubscriptionCanceled {
        provider_subscription_id: "sub_1".into(),
        occurred_at: at_day(3),
    };
    assert_eq!(
        deliver(&h, "canceled", canceled).await,
        [EventOutcome::Applied]
    );
    initiate(&h, &user, "credits-100").await.unwrap();
    initiate(&h, &user, "pro-monthly").await.unwrap();
}

#[tokio::test]
async fn with_several_allowed_a_user_holds_two_subscriptions_and_the_status_shows_both() {
    let mut config = config();
    config.allow_several_subscriptions = true;
    let h = Harness::with(config, |_| None);
    let user = h.user("a@example.com").await;
    subscribe(&h, &user, "sub_1").await;
    subscribe(&h, &user, "sub_2").await;
    let status = h.service.report_status(&user).await.unwrap();
    let mut held: Vec<&str> = status
        .subscriptions
        .iter()
        .map(|s| s.subscription.provider_subscription_id())
        .collect();
    held.sort_unstable();
    assert_eq!(held, ["sub_1", "sub_2"]);
    assert!(
        status
            .subscriptions
            .iter()
            .all(|s| s.access == SubscriptionAccess::WhileItRenews)
    );
    assert_eq!(
        status.subscription.as_ref(),
        Some(&status.subscriptions[0].subscription),
        "the single field stays the first one"
    );
}

#[tokio::test]
async fn an_owned_lifetime_plan_cannot_be_bought_again_but_credit_packs_can() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let lifetime = buy(&h, &user, "lifetime", 9_900).await;
    let refused = initiate(&h, &user, "lifetime").await.unwrap_err();
    assert!(
        matches!(
            &refused,
            InitiatePaymentError::AlreadyOwned { order_id, ends: AccessEnd::Lifetime, .. }
                if order_id == &lifetime
        ),
        "{refused:?}"
    );
    buy(&h, &user, "credits-100", 1_000).await;
    buy(&h, &user, "credits-100", 1_000).await;
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap(),
        credits(200)
    );
    // Another user may buy it.
    let other = h.user("b@example.com").await;
    initiate(&h, &other, "lifetime").await.unwrap();
}

#[tokio::test]
async fn a_twelve_month_pass_grants_access_for_twelve_calendar_months_and_not_after() {
    let h = Harness::with(with_pass(config()), |_| None);
    let user = h.user("a@example.com").await;
    let pass = buy(&h, &user, "pass-12", 4_900).await;
    let paid_at = START_MS + 1_000;
    let ends = Timestamp::from_unix_millis(paid_at + TWELVE_CALENDAR_MONTHS_MS);
    let status = h.service.report_status(&user).await.unwrap();
    assert_eq!(status.one_time_access.len(), 1);
    assert_eq!(status.one_time_access[0].order_id, pass);
    assert_eq!(status.one_time_access[0].ends, AccessEnd::At(ends));
    assert!(status.lifetime_order.is_none(), "a pass is not lifetime");
    assert!(has_access(&h, &user).await);
    assert!(matches!(
        initiate(&h, &user, "pass-12").await,
        Err(InitiatePaymentError::AlreadyOwned { .. })
    ));
    // 360 days (twelve 30-day months) in: still running.
    h.service.clock().advance_ms(1_000 + 360 * DAY_MS);
    assert!(has_access(&h, &user).await);
    let clock_now = h.service.clock().now().unix_millis();
    h.service
        .clock()
        .advance_ms(ends.unix_millis() - 1 - clock_now);
    assert!(has_access(&h, &user).await, "the last millisecond");
    h.service.clock().advance_ms(1);
    assert!(!has_access(&h, &user).await);
    let status = h.service.report_status(&user).await.unwrap();
    assert!(status.one_time_access.is_empty());
    // Ended, it can be bought again.
    initiate(&h, &user, "pass-12").await.unwrap();
}

#[tokio::test]
async fn past_due_keeps_access_for_the_grace_after_the_failed_renewal_then_not() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    subscribe(&h, &user, "sub_1").await;
    let past_due = PaymentEvent::SubscriptionPastDue {
        provider_subscription_id: "sub_1".into(),
        occurred_at: at_day(30),
    };
    assert_eq!(
        deliver(&h, "past-due", past_due).await,
        [EventOutcome::Applied]
    );
    let grace_ends = at_day(30 + 7);
    let status = h.service.report_status(&user).await.unwrap();
    assert_eq!(
        status.subscriptions[0].access,
        SubscriptionAccess::Until(grace_ends)
    );
    h.service.clock().advance_ms(37 * DAY_MS - 1);
    assert!(has_access(&h, &user).await, "within the grace");
    h.service.clock().advance_ms(1);
    assert!(!has_access(&h, &user).await, "the grace is over");
    // Still live (the provider may recover it): a second subscription stays refused.
    assert!(matches!(
        initiate(&h, &user, "pro-monthly").await,
        Err(InitiatePaymentError::AlreadySubscribed { .. })
    ));
    // A paid renewal restores access.
    let renewed = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(37, 67),
        amount: usd(999),
        charge_ref: None,
        occurred_at: at_day(37),
    };
    assert_eq!(
        deliver(&h, "renewed", renewed).await,
        [EventOutcome::Applied]
    );
    assert!(has_access(&h, &user).await);
}

#[tokio::test]
async fn a_credit_pack_valid_for_a_month_expires_a_calendar_month_after_payment() {
    let mut config = config();
    let mut draft = plan(
        "credits-month",
        "card_gateway",
        "credits",
        "5",
        "USD",
        Some("40"),
    )
    .to_draft();
    draft.months = Some(1);
    config.catalog.push(Plan::from_draft(&draft).unwrap());
    let h = Harness::with(config, |_| None);
    let user = h.user("a@example.com").await;
    buy(&h, &user, "credits-month", 500).await;
    // Paid 2027-01-15T08:00:01Z: valid to 2027-02-15T08:00:01Z, 31 days on (not 30).
    let paid_at = Timestamp::from_unix_millis(START_MS + 1_000);
    let store = h.service.store();
    store
        .expire_grants(paid_at.plus_days(30), 10)
        .await
        .unwrap();
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap(),
        credits(40)
    );
    let just_before = paid_at.plus_days(31).plus_millis(-1);
    store.expire_grants(just_before, 10).await.unwrap();
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap(),
        credits(40)
    );
    store
        .expire_grants(paid_at.plus_days(31), 10)
        .await
        .unwrap();
    assert_eq!(
        h.service
            .balance(&domain::AccountId::personal(&user.id))
            .await
            .unwrap(),
        credits(0)
    );
}

#[tokio::test]
async fn a_retry_with_the_same_key_replays_its_order_even_once_the_subscription_is_live() {
    let h = Harness::new();
    let user = h.user("a@example.com").await;
    let request = |key: &str| InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("pro-monthly").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: Some(domain::IdempotencyKey::new(key).unwrap()),
        returns: Default::default(),
    };
    let first = h.service.initiate_payment(request("buy-1")).await.unwrap();
    let id = first.order.order.id().clone();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 10),
    };
    assert_eq!(deliver(&h, "act", activated).await, [EventOutcome::Applied]);
    let retry = h.service.initiate_payment(request("buy-1")).await.unwrap();
    assert_eq!(
        *retry.order.order.id(),
        id,
        "the retry replays the first order"
    );
    assert_eq!(retry.replay, Replay::Replayed);
    let fresh = h
        .service
        .initiate_payment(request("buy-2"))
        .await
        .unwrap_err();
    assert!(
        matches!(fresh, InitiatePaymentError::AlreadySubscribed { .. }),
        "{fresh:?}"
    );
}
