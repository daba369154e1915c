use super::*;
use crate::credits::Credits;
use crate::ids::{SubscriptionId, UserId};
use crate::money::{Currency, Money};
use crate::plan::Duration;
use crate::plan_change::{ChangeDirection, PlanChange};
use crate::provider::ProviderId;
use crate::subscription::{BillingPeriod, SubscriptionEvent, SubscriptionParts};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn snapshot(id: &str, minor: i64, currency: Currency, months: i64) -> PlanSnapshot {
    PlanSnapshot {
        bonus: None,
        plan_id: PlanId::new(id).unwrap(),
        plan_type: PlanType::Recurring,
        price: Money::from_minor(minor, currency).unwrap(),
        credits: Some(Credits::from_whole(100).unwrap()),
        duration: Duration::from_months_value(months),
        entitlements: None,
    }
}

fn monthly() -> Subscription {
    let target = snapshot("basic", 1000, Currency::Usd, 1);
    Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: UserId::new("u1").unwrap(),
        account: None,
        plan_id: PlanId::new("basic").unwrap(),
        provider: ProviderId::MorC,
        provider_subscription_id: "order_1".into(),
        status: SubscriptionStatus::Active,
        current_period: BillingPeriod::new(t(0), t(1_000_000)).unwrap(),
        renewal: RenewalIntent::Renews,
        last_event_at: t(10),
        sold_terms: Some(SoldTerms::of_order(&target).unwrap()),
    })
}

#[test]
fn a_switch_at_period_end_takes_another_recurring_plan_in_the_same_currency_any_interval() {
    let s = monthly();
    let yearly = snapshot("pro_yearly", 9990, Currency::Usd, 12);
    let scheduled = schedule_switch(&s, &yearly, t(50)).unwrap();
    assert_eq!(scheduled.switch.plan_id().as_str(), "pro_yearly");
    assert_eq!(scheduled.switch.requested_at(), t(50));
    // 99.90 a year is less than 10.00 a month.
    assert_eq!(scheduled.direction, ChangeDirection::Downgrade);
    let dearer = snapshot("pro", 2000, Currency::Usd, 1);
    assert_eq!(
        schedule_switch(&s, &dearer, t(50)).unwrap().direction,
        ChangeDirection::Upgrade
    );
    assert_eq!(
        schedule_switch(&s, &snapshot("basic", 1000, Currency::Usd, 1), t(50)),
        Err(PlanChangeRefusal::SamePlan)
    );
    assert_eq!(
        schedule_switch(&s, &snapshot("pro_eur", 900, Currency::Eur, 1), t(50))
            .unwrap_err()
            .code(),
        "different_currency"
    );
    let mut pack = snapshot("pack", 500, Currency::Usd, 1);
    pack.plan_type = PlanType::Credits;
    assert_eq!(
        schedule_switch(&s, &pack, t(50)).unwrap_err().code(),
        "different_plan_type"
    );
}

#[test]
fn an_ended_or_past_due_subscription_cannot_schedule_but_one_ending_can() {
    let target = snapshot("pro", 2000, Currency::Usd, 1);
    let mut ending = monthly();
    ending
        .apply(SubscriptionEvent::CancelScheduled, t(20))
        .unwrap();
    assert!(schedule_switch(&ending, &target, t(30)).is_ok());
    let mut past_due = monthly();
    past_due.apply(SubscriptionEvent::PastDue, t(20)).unwrap();
    assert_eq!(
        schedule_switch(&past_due, &target, t(30)),
        Err(PlanChangeRefusal::NotLive("past_due"))
    );
    let mut ended = monthly();
    ended.apply(SubscriptionEvent::Canceled, t(20)).unwrap();
    assert_eq!(
        schedule_switch(&ended, &target, t(30)),
        Err(PlanChangeRefusal::NotLive("canceled"))
    );
}

#[test]
fn a_claim_holds_off_other_switches_until_it_settles_or_goes_stale() {
    let mut s = monthly();
    assert_eq!(check_no_change_in_progress(&s, t(100)), Ok(()));
    s.schedule_switch(ScheduledSwitch::new(PlanId::new("pro").unwrap(), t(100)));
    // Claimed, the provider not told yet: held for CLAIM_HOLD_MS, then abandoned.
    assert_eq!(
        check_no_change_in_progress(&s, t(101)),
        Err(ChangeInProgress)
    );
    assert_eq!(
        check_no_change_in_progress(&s, t(100 + CLAIM_HOLD_MS)),
        Ok(())
    );
    // Settled (the subscription ends at its period's end): held until withdrawn.
    s.apply(SubscriptionEvent::CancelScheduled, t(200)).unwrap();
    assert_eq!(
        check_no_change_in_progress(&s, t(100 + 10 * CLAIM_HOLD_MS)),
        Err(ChangeInProgress)
    );
    s.drop_scheduled_switch();
    assert_eq!(check_no_change_in_progress(&s, t(300)), Ok(()));

    let mut asked = monthly();
    let terms = SoldTerms::of_order(&snapshot("pro", 2000, Currency::Usd, 1)).unwrap();
    let change = PlanChange::new(
        PlanId::new("pro").unwrap(),
        terms,
        ChangeDirection::Upgrade,
        t(100),
    );
    asked.ask_plan_change(change);
    assert_eq!(
        check_no_change_in_progress(&asked, t(150)),
        Err(ChangeInProgress)
    );
    assert_eq!(
        check_no_change_in_progress(&asked, t(100 + CLAIM_HOLD_MS)),
        Ok(())
    );
}

#[test]
fn resuming_clears_the_scheduled_switch() {
    let mut s = monthly();
    s.schedule_switch(ScheduledSwitch::new(PlanId::new("pro").unwrap(), t(20)));
    s.apply(SubscriptionEvent::CancelScheduled, t(30)).unwrap();
    assert!(s.scheduled_switch().is_some());
    // A renewal or an end keeps it: the end is when the new plan starts.
    let mut ended = s.clone();
    ended.apply(SubscriptionEvent::Canceled, t(40)).unwrap();
    assert_eq!(ended.scheduled_switch(), s.scheduled_switch());
    s.apply(SubscriptionEvent::CancelWithdrawn, t(40)).unwrap();
    assert_eq!(s.scheduled_switch(), None);
}

#[test]
fn a_write_never_replaces_one_claim_by_another() {
    let free = monthly();
    let switch = |plan: &str, at: i64| ScheduledSwitch::new(PlanId::new(plan).unwrap(), t(at));
    let mut first = free.clone();
    first.schedule_switch(switch("pro", 1));
    let mut second = free.clone();
    second.schedule_switch(switch("team", 2));
    // Claiming where none is, keeping it and clearing it are writes a store takes.
    assert!(!first.overwrites_claim_of(&free));
    assert!(!first.overwrites_claim_of(&first));
    assert!(!free.overwrites_claim_of(&first));
    // Both requests read `free`; the second write finds the first's claim.
    assert!(second.overwrites_claim_of(&first));
    let mut same_plan_later = free.clone();
    same_plan_later.schedule_switch(switch("pro", 3));
    assert!(same_plan_later.overwrites_claim_of(&first));
    // A plan change over a scheduled switch is another claim too.
    let terms = SoldTerms::of_order(&snapshot("pro", 2000, Currency::Usd, 1)).unwrap();
    let mut change = free;
    change.ask_plan_change(PlanChange::new(
        PlanId::new("pro").unwrap(),
        terms,
        ChangeDirection::Upgrade,
        t(4),
    ));
    assert!(change.overwrites_claim_of(&first));
    assert!(first.overwrites_claim_of(&change));
}
