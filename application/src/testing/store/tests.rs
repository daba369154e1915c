//! The in-memory store's subscription compare-and-set keeps a switch claim as the SQL store
//! does (`adapters/store/tests/store/switch_claims.rs` is the reference).

use domain::{
    BillingPeriod, ChangeDirection, Currency, Duration, EventOutcome, Money, PlanChange, PlanId,
    ProviderId, RenewalIntent, ScheduledSwitch, SoldTerms, Subscription, SubscriptionEvent,
    SubscriptionId, SubscriptionParts, SubscriptionStatus, Timestamp, UserId,
};

use super::InMemoryStore;
use crate::ports::Writes;
use crate::ports::{
    InboxEntry, PaymentEventCommand, PaymentEventOutcome, StoreError, SubscriptionChange,
    SubscriptionRepository,
};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn monthly(minor: i64) -> SoldTerms {
    let Some(Duration::Months(month)) = Duration::from_months_value(1) else {
        unreachable!("one month is a finite interval")
    };
    SoldTerms::new(
        Money::from_minor(minor, Currency::Usd).unwrap(),
        month,
        None,
    )
}

fn subscription() -> Subscription {
    Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: UserId::new("u1").unwrap(),
        account: None,
        plan_id: PlanId::new("basic").unwrap(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_1".into(),
        status: SubscriptionStatus::Active,
        current_period: BillingPeriod::new(t(1000), t(2000)).unwrap(),
        renewal: RenewalIntent::Renews,
        last_event_at: t(40),
        sold_terms: Some(monthly(999)),
    })
}

fn command(event_id: &str, change: SubscriptionChange) -> PaymentEventCommand {
    PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: InboxEntry {
            provider: ProviderId::CardGateway,
            event_id: event_id.into(),
            event_type: "test".into(),
            payload: String::new(),
            outcome: EventOutcome::Applied,
            detail: None,
            received_at: t(100),
            user_id: None,
        },
        order: None,
        subscription: Some(change),
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    }
}

fn update(event_id: &str, read: &Subscription, after: &Subscription) -> PaymentEventCommand {
    command(
        event_id,
        SubscriptionChange::Update {
            before: read.clone(),
            subscription: after.clone(),
        },
    )
}

/// An event read before a claim was written and written after it (same `last_event_at`) is
/// refused; decided again from a fresh read, it applies and keeps the claim. Both kinds of claim.
#[tokio::test]
async fn an_event_read_before_a_claim_does_not_clear_it() {
    let store = InMemoryStore::new();
    let s = subscription();
    let create = command("created", SubscriptionChange::Create(s.clone(), None));
    store.apply_payment_event(&create).await.unwrap();
    let change = PlanChange::new(
        PlanId::new("pro").unwrap(),
        monthly(1999),
        ChangeDirection::Upgrade,
        t(100),
    );
    let switch = ScheduledSwitch::new(PlanId::new("team").unwrap(), t(100));
    for (round, kind) in ["change", "switch"].into_iter().enumerate() {
        let stale = store.find_subscription(s.id()).await.unwrap().unwrap();
        let mut claimed = stale.clone();
        if kind == "change" {
            claimed.ask_plan_change(change.clone());
        } else {
            claimed.schedule_switch(switch.clone());
        }
        let claim = update(&format!("claim-{kind}"), &stale, &claimed);
        store.apply_payment_event(&claim).await.unwrap();
        let at = t(200 + i64::try_from(round).unwrap() * 100);
        let mut ending = stale.clone();
        ending
            .apply(SubscriptionEvent::CancelScheduled, at)
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
        let mut ending = read.clone();
        ending
            .apply(SubscriptionEvent::CancelScheduled, at)
            .unwrap();
        let retried = update(&format!("evt-{kind}"), &read, &ending);
        assert!(matches!(
            store.apply_payment_event(&retried).await,
            Ok(PaymentEventOutcome::Applied { .. })
        ));
        let read = store.find_subscription(s.id()).await.unwrap().unwrap();
        assert_eq!(read, ending, "{kind}: applied with the claim kept");
        assert_eq!(read.pending_change(), claimed.pending_change());
        assert_eq!(read.scheduled_switch(), claimed.scheduled_switch());
        // Settled by a write that read the claim: cleared.
        let mut settled = read.clone();
        settled.drop_plan_change();
        settled.drop_scheduled_switch();
        settled
            .apply(SubscriptionEvent::CancelWithdrawn, at.plus_millis(50))
            .unwrap();
        let settle = update(&format!("settle-{kind}"), &read, &settled);
        store.apply_payment_event(&settle).await.unwrap();
        let read = store.find_subscription(s.id()).await.unwrap().unwrap();
        assert_eq!(read, settled);
        assert_eq!(read.pending_change_as_read(), None);
        assert_eq!(read.scheduled_switch_as_read(), None);
    }
}

/// A writer that writes again after its own write, without reading back, expects the claim it
/// wrote only once it says so ([`Subscription::as_stored`]).
#[tokio::test]
async fn a_second_write_expects_the_claim_the_first_one_wrote() {
    let store = InMemoryStore::new();
    let s = subscription();
    let create = command("created", SubscriptionChange::Create(s.clone(), None));
    store.apply_payment_event(&create).await.unwrap();
    let mut claimed = s.clone();
    claimed.schedule_switch(ScheduledSwitch::new(PlanId::new("team").unwrap(), t(100)));
    store
        .apply_payment_event(&update("claim", &s, &claimed))
        .await
        .unwrap();
    let mut ending = claimed.clone();
    ending
        .apply(SubscriptionEvent::CancelScheduled, t(120))
        .unwrap();
    assert!(matches!(
        store
            .apply_payment_event(&update("cancel", &claimed, &ending))
            .await,
        Err(StoreError::Conflict(_))
    ));
    let ending = ending.as_stored();
    assert!(matches!(
        store
            .apply_payment_event(&update("cancel", &claimed, &ending))
            .await,
        Ok(PaymentEventOutcome::Applied { .. })
    ));
    let read = store.find_subscription(s.id()).await.unwrap().unwrap();
    assert_eq!(read, ending);
}
