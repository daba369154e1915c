use proptest::prelude::*;

use super::*;
use crate::ids::{PlanId, SubscriptionId, UserId};
use crate::money::{Currency, Money};
use crate::order::PlanSnapshot;
use crate::plan::{Duration, PlanType};
use crate::plan_change::{PlanChangedDecision, PlanChangedFacts, decide_plan_changed, plan_change};
use crate::provider::ProviderId;
use crate::subscription::{
    RenewalIntent, SoldTerms, Subscription, SubscriptionEvent, SubscriptionParts,
    SubscriptionStatus,
};

const MONTH_MS: i64 = 30 * 86_400_000;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn credits(whole: i64) -> Credits {
    Credits::from_whole(whole).unwrap()
}

fn usd(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Usd).unwrap()
}

fn month(n: i64) -> BillingPeriod {
    BillingPeriod::new(t(n * MONTH_MS), t((n + 1) * MONTH_MS)).unwrap()
}

/// A monthly plan at `price` minor units granting `whole` credits a month (none for 0).
fn plan(price: i64, whole: i64) -> PlanSnapshot {
    PlanSnapshot {
        bonus: None,
        plan_id: PlanId::new(format!("plan_{price}_{whole}")).unwrap(),
        plan_type: PlanType::Recurring,
        price: usd(price),
        credits: (whole > 0).then(|| credits(whole)),
        duration: Duration::from_months_value(1),
        entitlements: None,
    }
}

fn subscribed(to: &PlanSnapshot) -> Subscription {
    Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: UserId::new("u1").unwrap(),
        account: None,
        plan_id: to.plan_id.clone(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_1".into(),
        status: SubscriptionStatus::Active,
        current_period: month(0),
        renewal: RenewalIntent::Renews,
        last_event_at: t(1),
        sold_terms: Some(SoldTerms::of_order(to).unwrap()),
    })
}

#[test]
fn the_period_keeps_its_own_lot_and_the_changes_asked_within_it() {
    let changes = [
        (t(MONTH_MS - 1), credits(5)),
        (t(MONTH_MS), credits(7)),
        (t(10), credits(3)),
    ];
    let granted = PeriodGrants::of(month(0), Some(credits(100)), &changes);
    assert_eq!(granted.total(), credits(108));
    let sources: Vec<_> = granted.lots().iter().map(|l| l.source).collect();
    assert_eq!(
        sources,
        [
            PeriodLotSource::Period,
            PeriodLotSource::Change(t(10)),
            PeriodLotSource::Change(t(MONTH_MS - 1)),
        ]
    );
}

#[test]
fn a_plan_grants_only_what_it_exceeds_the_period_by() {
    let granted = PeriodGrants::of(month(0), Some(credits(1000)), &[]);
    // Back up to a plan the period already held: nothing.
    assert_eq!(granted.still_due(credits(1000), Credits::ZERO), None);
    assert_eq!(
        granted.still_due(credits(1500), Credits::ZERO),
        Some(credits(500))
    );
    // The plan held counts as granted even where the period's own lot was not.
    let none = PeriodGrants::none(month(0));
    assert_eq!(
        none.still_due(credits(1500), credits(1000)),
        Some(credits(500))
    );
}

#[test]
fn each_lot_gives_back_the_share_of_its_own_span_after_an_early_end() {
    let half = t(MONTH_MS / 2);
    let granted = PeriodGrants::of(month(0), Some(credits(1000)), &[(half, credits(600))]);
    let quarter_left = t(3 * MONTH_MS / 4);
    assert_eq!(
        granted.unused_after(quarter_left),
        [
            (PeriodLotSource::Period, credits(250)),
            (PeriodLotSource::Change(half), credits(300)),
        ]
    );
    assert!(granted.unused_after(t(MONTH_MS)).is_empty());
}

/// A switch by price `price` to a plan of `whole` credits, or a renewal into the next month.
#[derive(Debug, Clone)]
enum Step {
    Switch { price: i64, whole: i64 },
    Renew,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1..5_000i64, 0..3_000i64).prop_map(|(price, whole)| Step::Switch { price, whole }),
        1 => Just(Step::Renew),
    ]
}

/// What one period was granted and the most generous plan it held.
struct Period {
    grants: PeriodGrants,
    changes: Vec<(Timestamp, Credits)>,
    most: Credits,
}

impl Period {
    fn start(period: BillingPeriod, terms: &SoldTerms) -> Self {
        let own = terms.credits_per_period();
        Self {
            grants: PeriodGrants::of(period, own, &[]),
            changes: Vec::new(),
            most: own.unwrap_or_default(),
        }
    }
}

/// Ask the switch, confirm it with the provider's event, and keep the lot it grants.
fn switch(s: &mut Subscription, p: &mut Period, to: &PlanSnapshot, at: Timestamp) {
    let Ok(change) = plan_change(s, to, at) else {
        return; // the same plan: nothing to ask
    };
    s.ask_plan_change(change);
    let facts = PlanChangedFacts {
        price: to.price,
        interval_months: Some(1),
        occurred_at: at,
    };
    let PlanChangedDecision::Apply {
        subscription,
        credits,
        ..
    } = decide_plan_changed(s, &facts, &p.grants)
    else {
        panic!("a confirmed switch applies");
    };
    *s = subscription;
    p.most = p.most.max(to.credits.unwrap_or_default());
    if let Some(up) = credits {
        p.changes.push((at, up.amount));
        let own = p
            .grants
            .lots()
            .first()
            .and_then(|l| (l.source == PeriodLotSource::Period).then_some(l.amount));
        p.grants = PeriodGrants::of(p.grants.period(), own, &p.changes);
    }
}

proptest! {
    /// Whatever the subscriber switches to and back within a period, the period is granted at
    /// most the credits of the most generous plan it held in it, and its lots add up to that.
    #[test]
    fn no_sequence_of_switches_and_renewals_grants_more_than_the_most_generous_plan(
        first in (1..5_000i64, 0..3_000i64),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let start = plan(first.0, first.1);
        let mut s = subscribed(&start);
        let mut n = 0;
        let mut p = Period::start(month(0), &s.sold_terms().unwrap());
        let mut at = 10;
        for step in steps {
            match step {
                Step::Switch { price, whole } => {
                    at += 1_000;
                    switch(&mut s, &mut p, &plan(price, whole), t(n * MONTH_MS + at));
                }
                Step::Renew => {
                    prop_assert!(p.grants.total() <= p.most, "{} > {}", p.grants.total(), p.most);
                    n += 1;
                    at = 10;
                    s.apply(SubscriptionEvent::Renewed(month(n)), t(n * MONTH_MS + 1)).unwrap();
                    p = Period::start(month(n), &s.sold_terms().unwrap());
                }
            }
            let sum = p.grants.lots().iter().fold(Credits::ZERO, |a, l| a.checked_add(l.amount).unwrap());
            prop_assert_eq!(sum, p.grants.total());
        }
        prop_assert!(p.grants.total() <= p.most, "{} > {}", p.grants.total(), p.most);
    }
}
