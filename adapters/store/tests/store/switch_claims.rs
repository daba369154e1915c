//! One switch at a time (issue 19): a subscription's plan change or switch at the period's end is
//! a claim that a write never replaces by another. Two instances (two pools on one database),
//! sixteen requests at once, each claiming another plan from the same read: exactly one claim
//! commits, on a SQLite file and on PostgreSQL. A write decided from a read older than a claim
//! never clears it.

use application::ports::{
    InboxEntry, PaymentEventCommand, PaymentEventOutcome, StoreError, SubscriptionChange,
    SubscriptionRepository,
};
use domain::{
    BillingPeriod, ChangeDirection, Currency, Duration, Money, PlanChange, PlanId, ProviderId,
    RenewalIntent, ScheduledSwitch, SoldTerms, Subscription, SubscriptionEvent, SubscriptionId,
    SubscriptionParts, SubscriptionStatus, UserId,
};
use store::GroupCommit;
use tokio::task::JoinSet;

use crate::support::{Backend, backend_tests, c, t, user};
use application::ports::Writes;

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
        account: None,
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
        top_up: None,
        bonus: None,
        inbox: inbox(event_id),
        order: None,
        subscription: Some(SubscriptionChange::Update {
            before: before.clone(),
            subscription: after.clone(),
        }),
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
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
    // Written: the request writes again from what it wrote.
    let claimed = claimed.as_stored();
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

/// A provider event decided from a read made before a claim was written, and written after it:
/// same `last_event_at`, claim columns empty as it read them. Its write is refused as a lost
/// compare-and-set; decided again from a fresh read, it applies and keeps the claim. Both kinds
/// of claim: a plan change asked of the provider, and a switch at the period's end.
async fn an_event_read_before_a_claim_does_not_clear_it(backend: Backend) {
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
    let change = PlanChange::new(
        PlanId::new("pro").unwrap(),
        SoldTerms::new(
            Money::from_minor(1999, Currency::Usd).unwrap(),
            s.sold_terms().unwrap().interval(),
            Some(c(10_000)),
        ),
        ChangeDirection::Upgrade,
        t(100),
    );
    for (round, kind) in ["change", "switch"].into_iter().enumerate() {
        let stale = store.find_subscription(s.id()).await.unwrap().unwrap();
        // The change-plan request claims the subscription (the provider event has read it).
        let claimed = if kind == "change" {
            let mut asked = stale.clone();
            asked.ask_plan_change(change.clone());
            asked
        } else {
            claiming(&stale, "team", 100)
        };
        store
            .apply_payment_event(&update(&format!("claim-{kind}"), &stale, &claimed))
            .await
            .unwrap();
        // The provider's event, decided from the stale read: a scheduled cancellation.
        let at = 200 + i64::try_from(round).unwrap() * 100;
        let mut ending = stale.clone();
        ending
            .apply(SubscriptionEvent::CancelScheduled, t(at))
            .unwrap();
        let event = update(&format!("evt-{kind}"), &stale, &ending);
        assert!(
            matches!(
                store.apply_payment_event(&event).await,
                Err(StoreError::Conflict(_))
            ),
            "{kind}: the stale write is refused"
        );
        let read = store.find_subscription(s.id()).await.unwrap().unwrap();
        assert_eq!(read, claimed, "{kind}: nothing of the stale write is kept");
        // Retried from a fresh read, as the webhook path does: it applies and keeps the claim.
        let mut ending = read.clone();
        ending
            .apply(SubscriptionEvent::CancelScheduled, t(at))
            .unwrap();
        let retried = update(&format!("evt-{kind}"), &read, &ending);
        assert!(matches!(
            store.apply_payment_event(&retried).await,
            Ok(PaymentEventOutcome::Applied { .. })
        ));
        let read = store.find_subscription(s.id()).await.unwrap().unwrap();
        assert_eq!(read.renewal(), RenewalIntent::EndsAtPeriodEnd);
        assert_eq!(read.pending_change(), claimed.pending_change(), "{kind}");
        assert_eq!(
            read.scheduled_switch(),
            claimed.scheduled_switch(),
            "{kind}"
        );
        // The claim's own settlement (read with it) clears it; the subscription renews again
        // for the next round.
        let mut settled = read.clone();
        settled.drop_plan_change();
        settled.drop_scheduled_switch();
        settled
            .apply(SubscriptionEvent::CancelWithdrawn, t(at + 50))
            .unwrap();
        store
            .apply_payment_event(&update(&format!("settle-{kind}"), &read, &settled))
            .await
            .unwrap();
        let read = store.find_subscription(s.id()).await.unwrap().unwrap();
        assert_eq!(read, settled, "{kind}");
    }
    store.cleanup().await;
}

backend_tests!(
    sixteen_claims_at_once_on_two_instances_commit_one,
    a_claim_is_kept_by_other_writes_and_cleared_by_a_resume,
    an_event_read_before_a_claim_does_not_clear_it,
);
