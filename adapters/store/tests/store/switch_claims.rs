//! One switch at a time (issue 19): a subscription's plan change or switch at the period's end is
//! a claim that a write never replaces by another. Two instances (two pools on one database),
//! sixteen requests at once, each claiming another plan from the same read: exactly one claim
//! commits, on a SQLite file and on PostgreSQL.

use application::ports::{
    InboxEntry, PaymentEventCommand, PaymentEventOutcome, PaymentEventStore, StoreError,
    SubscriptionChange, SubscriptionRepository,
};
use domain::{
    BillingPeriod, Currency, Duration, Money, PlanId, ProviderId, RenewalIntent, ScheduledSwitch,
    SoldTerms, Subscription, SubscriptionEvent, SubscriptionId, SubscriptionParts,
    SubscriptionStatus, UserId,
};
use store::GroupCommit;
use tokio::task::JoinSet;

use crate::support::{Backend, backend_tests, c, t, user};

fn inbox(event_id: &str) -> InboxEntry {
    InboxEntry {
        provider: ProviderId::MorC,
        event_id: event_id.into(),
        event_type: "tally.subscription.plan_switch_scheduled".into(),
        payload: String::new(),
        outcome: domain::EventOutcome::Applied,
        detail: None,
        received_at: t(100),
        user_id: None,
    }
}

fn subscription(user: &UserId) -> Subscription {
    let Some(Duration::Months(month)) = Duration::from_months_value(1) else {
        unreachable!("one month is a finite interval")
    };
    Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: user.clone(),
        plan_id: PlanId::new("basic").unwrap(),
        provider: ProviderId::MorC,
        provider_subscription_id: "order_1".into(),
        status: SubscriptionStatus::Active,
        current_period: BillingPeriod::new(t(1000), t(2000)).unwrap(),
        renewal: RenewalIntent::Renews,
        last_event_at: t(40),
        sold_terms: Some(SoldTerms::new(
            Money::from_minor(999, Currency::Usd).unwrap(),
            month,
            Some(c(5_000)),
        )),
    })
}

fn update(event_id: &str, before: &Subscription, after: &Subscription) -> PaymentEventCommand {
    PaymentEventCommand {
        inbox: inbox(event_id),
        order: None,
        subscription: Some(SubscriptionChange::Update {
            subscription: after.clone(),
            expected_last_event_at: before.last_event_at(),
        }),
        grant: None,
        clawback: None,
        charge: None,
        refund: None,
    }
}

fn claiming(s: &Subscription, plan: &str, at: i64) -> Subscription {
    let mut claimed = s.clone();
    claimed.schedule_switch(ScheduledSwitch::new(PlanId::new(plan).unwrap(), t(at)));
    claimed
}

async fn sixteen_claims_at_once_on_two_instances_commit_one(backend: Backend) {
    let Some(first) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let second = first.reconnect(GroupCommit::off()).await;
    let u = user(&first, "u1").await;
    let s = subscription(&u);
    let create = PaymentEventCommand {
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        ..update("evt_created", &s, &s)
    };
    first.apply_payment_event(&create).await.unwrap();
    let mut tasks = JoinSet::new();
    for i in 0..16_i64 {
        let store = if i % 2 == 0 {
            (*first).clone()
        } else {
            second.clone()
        };
        let command = update(
            &format!("claim-{i}"),
            &s,
            &claiming(&s, &format!("plan-{i}"), 100 + i),
        );
        tasks.spawn(async move { (i, store.apply_payment_event(&command).await) });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined.expect("task") {
            (i, Ok(PaymentEventOutcome::Applied { .. })) => winners.push(i),
            (_, Err(StoreError::Conflict(_))) => {}
            (i, other) => panic!("claim {i}: only one success and conflicts: {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one claim commits: {winners:?}");
    let stored = first.find_subscription(s.id()).await.unwrap().unwrap();
    let expected = format!("plan-{}", winners[0]);
    assert_eq!(
        stored.scheduled_switch().map(|w| w.plan_id().as_str()),
        Some(expected.as_str())
    );
    second.close().await.expect("close");
    first.cleanup().await;
}

async fn a_claim_is_kept_by_other_writes_and_cleared_by_a_resume(backend: Backend) {
    let Some(store) = backend.store(GroupCommit::off()).await else {
        return;
    };
    let u = user(&store, "u1").await;
    let s = subscription(&u);
    let create = PaymentEventCommand {
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        ..update("evt_created", &s, &s)
    };
    store.apply_payment_event(&create).await.unwrap();
    let claimed = claiming(&s, "pro", 100);
    store
        .apply_payment_event(&update("claim", &s, &claimed))
        .await
        .unwrap();
    // The request's own cancellation keeps the claim, in the same write.
    let mut ending = claimed.clone();
    ending
        .apply(SubscriptionEvent::CancelScheduled, t(120))
        .unwrap();
    store
        .apply_payment_event(&update("cancel", &claimed, &ending))
        .await
        .unwrap();
    let read = store.find_subscription(s.id()).await.unwrap().unwrap();
    assert_eq!(read, ending);
    // Another plan over it is refused; the resume clears it.
    let other = claiming(&s, "team", 130);
    let mut other_after = ending.clone();
    other_after.schedule_switch(other.scheduled_switch().unwrap().clone());
    assert!(matches!(
        store
            .apply_payment_event(&update("claim-2", &ending, &other_after))
            .await,
        Err(StoreError::Conflict(_))
    ));
    let mut resumed = ending.clone();
    resumed
        .apply(SubscriptionEvent::CancelWithdrawn, t(140))
        .unwrap();
    store
        .apply_payment_event(&update("resume", &ending, &resumed))
        .await
        .unwrap();
    let read = store.find_subscription(s.id()).await.unwrap().unwrap();
    assert_eq!(read.scheduled_switch(), None);
    assert_eq!(read.renewal(), RenewalIntent::Renews);
    store.cleanup().await;
}

backend_tests!(
    sixteen_claims_at_once_on_two_instances_commit_one,
    a_claim_is_kept_by_other_writes_and_cleared_by_a_resume,
);
