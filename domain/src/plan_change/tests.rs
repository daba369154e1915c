use super::*;
use crate::ids::{SubscriptionId, UserId};
use crate::money::Currency;
use crate::plan::Duration;
use crate::provider::ProviderId;
use crate::subscription::{SubscriptionEvent, SubscriptionParts};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn money(minor: i64, currency: Currency) -> Money {
    Money::from_minor(minor, currency).unwrap()
}

fn credits(whole: i64) -> Credits {
    Credits::from_whole(whole).unwrap()
}

fn terms(price: i64, months: i64, whole: i64) -> SoldTerms {
    let Some(Duration::Months(interval)) = Duration::from_months_value(months) else {
        unreachable!()
    };
    SoldTerms::new(money(price, Currency::Usd), interval, Some(credits(whole)))
}

fn snapshot(id: &str, price: Money, months: i64, whole: i64) -> PlanSnapshot {
    PlanSnapshot {
        bonus: None,
        plan_id: PlanId::new(id).unwrap(),
        plan_type: PlanType::Recurring,
        price,
        credits: Some(credits(whole)),
        duration: Duration::from_months_value(months),
        entitlements: None,
    }
}

fn basic() -> Subscription {
    Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: UserId::new("u1").unwrap(),
        account: None,
        plan_id: PlanId::new("basic").unwrap(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_1".into(),
        status: SubscriptionStatus::Active,
        current_period: BillingPeriod::new(t(0), t(1000)).unwrap(),
        renewal: RenewalIntent::Renews,
        last_event_at: t(10),
        sold_terms: Some(terms(1000, 1, 100)),
    })
}

/// What `s`'s current period was granted: its own lot, with its plan's credits.
fn granted(s: &Subscription) -> PeriodGrants {
    let own = s.sold_terms().and_then(|t| t.credits_per_period());
    PeriodGrants::of(s.current_period(), own, &[])
}

fn facts(price: i64, months: Option<u32>, at: i64) -> PlanChangedFacts {
    PlanChangedFacts {
        price: money(price, Currency::Usd),
        interval_months: months,
        occurred_at: t(at),
    }
}

#[test]
fn the_price_per_month_decides_the_direction_then_the_credits() {
    let monthly = terms(1000, 1, 100);
    assert_eq!(
        ChangeDirection::between(&monthly, &terms(2000, 1, 100)),
        ChangeDirection::Upgrade
    );
    // A yearly plan at ten months' price costs less per month.
    assert_eq!(
        ChangeDirection::between(&monthly, &terms(10_000, 12, 1200)),
        ChangeDirection::Downgrade
    );
    assert_eq!(
        ChangeDirection::between(&monthly, &terms(1000, 1, 150)),
        ChangeDirection::Upgrade
    );
    assert_eq!(
        ChangeDirection::between(&monthly, &terms(1000, 1, 100)),
        ChangeDirection::Downgrade
    );
}

#[test]
fn a_switch_needs_an_active_renewing_subscription_and_another_recurring_plan_in_its_currency() {
    let s = basic();
    let pro = snapshot("pro", money(2000, Currency::Usd), 1, 300);
    let change = plan_change(&s, &pro, t(50)).unwrap();
    assert_eq!(change.plan_id().as_str(), "pro");
    assert_eq!(change.direction(), ChangeDirection::Upgrade);
    assert_eq!(change.requested_at(), t(50));

    let same = snapshot("basic", money(1000, Currency::Usd), 1, 100);
    assert_eq!(
        plan_change(&s, &same, t(50)),
        Err(PlanChangeRefusal::SamePlan)
    );

    let mut pack = snapshot("pack", money(500, Currency::Usd), 1, 10);
    pack.plan_type = PlanType::Credits;
    assert_eq!(
        plan_change(&s, &pack, t(50)).unwrap_err().code(),
        "different_plan_type"
    );

    let euros = snapshot("pro-eur", money(2000, Currency::Eur), 1, 300);
    assert_eq!(
        plan_change(&s, &euros, t(50)).unwrap_err().code(),
        "different_currency"
    );

    // Stripe's interval change is followed (its invoice starts the new period); Dodo's is not.
    let yearly = snapshot("pro-yearly", money(10_000, Currency::Usd), 12, 1200);
    assert_eq!(
        plan_change(&s, &yearly, t(50))
            .unwrap()
            .terms()
            .interval()
            .get(),
        12
    );
    let mut parts = s.clone();
    parts = Subscription::restore(SubscriptionParts {
        id: parts.id().clone(),
        user_id: parts.user_id().clone(),
        account: Some(parts.account_id().clone()),
        plan_id: parts.plan_id().clone(),
        provider: ProviderId::MorB,
        provider_subscription_id: "sub_dodo".into(),
        status: parts.status(),
        current_period: parts.current_period(),
        renewal: parts.renewal(),
        last_event_at: parts.last_event_at(),
        sold_terms: parts.sold_terms(),
    });
    assert_eq!(
        plan_change(&parts, &yearly, t(50)).unwrap_err().code(),
        "different_interval"
    );

    let mut ending = s.clone();
    ending
        .apply(SubscriptionEvent::CancelScheduled, t(20))
        .unwrap();
    assert_eq!(
        plan_change(&ending, &pro, t(50)),
        Err(PlanChangeRefusal::NotLive("scheduled to end"))
    );
    let mut ended = s;
    ended.apply(SubscriptionEvent::Canceled, t(20)).unwrap();
    assert_eq!(
        plan_change(&ended, &pro, t(50)).unwrap_err().code(),
        "subscription_not_live"
    );
}

#[test]
fn an_upgrade_confirmed_by_the_provider_moves_the_plan_and_grants_the_difference_once() {
    let mut s = basic();
    let pro = snapshot("pro", money(2000, Currency::Usd), 1, 300);
    s.ask_plan_change(plan_change(&s, &pro, t(50)).unwrap());
    // Asking changes nothing the subscription bills.
    assert_eq!(s.plan_id().as_str(), "basic");
    assert_eq!(s.sold_terms(), Some(terms(1000, 1, 100)));

    let PlanChangedDecision::Apply {
        subscription,
        credits,
        change,
    } = decide_plan_changed(&s, &facts(2000, Some(1), 60), &granted(&s))
    else {
        panic!("expected the change to apply")
    };
    assert_eq!(change.direction(), ChangeDirection::Upgrade);
    assert_eq!(subscription.plan_id().as_str(), "pro");
    assert_eq!(subscription.sold_terms(), Some(terms(2000, 1, 300)));
    assert_eq!(subscription.pending_change(), None);
    assert_eq!(subscription.current_period(), s.current_period());
    assert_eq!(subscription.last_event_at(), t(60));
    let credits = credits.unwrap();
    assert_eq!(credits.amount, self::credits(200));
    assert_eq!(credits.period, BillingPeriod::new(t(50), t(1000)).unwrap());

    // The same event again finds the change done.
    assert_eq!(
        decide_plan_changed(
            &subscription,
            &facts(2000, Some(1), 60),
            &granted(&subscription)
        ),
        PlanChangedDecision::AlreadyDone
    );
}

#[test]
fn a_downgrade_moves_the_plan_and_grants_nothing_now() {
    let mut s = basic();
    let lite = snapshot("lite", money(500, Currency::Usd), 1, 40);
    s.ask_plan_change(plan_change(&s, &lite, t(50)).unwrap());
    let PlanChangedDecision::Apply {
        subscription,
        credits,
        change,
    } = decide_plan_changed(&s, &facts(500, None, 60), &granted(&s))
    else {
        panic!("expected the change to apply")
    };
    assert_eq!(change.direction(), ChangeDirection::Downgrade);
    assert_eq!(subscription.plan_id().as_str(), "lite");
    assert_eq!(credits, None);
}

#[test]
fn an_event_billing_anything_but_the_asked_plan_is_a_mismatch_and_changes_nothing() {
    let s = basic();
    // No change asked: another price is a mismatch, the same price a repeat.
    assert!(matches!(
        decide_plan_changed(&s, &facts(2000, Some(1), 60), &granted(&s)),
        PlanChangedDecision::Mismatch(_)
    ));
    assert_eq!(
        decide_plan_changed(&s, &facts(1000, Some(1), 60), &granted(&s)),
        PlanChangedDecision::AlreadyDone
    );

    let mut asked = s;
    let pro = snapshot("pro", money(2000, Currency::Usd), 1, 300);
    asked.ask_plan_change(plan_change(&asked, &pro, t(50)).unwrap());
    for hostile in [
        facts(1, Some(1), 60),
        facts(2000, Some(12), 60),
        PlanChangedFacts {
            price: money(2000, Currency::Eur),
            interval_months: Some(1),
            occurred_at: t(60),
        },
    ] {
        let decision = decide_plan_changed(&asked, &hostile, &granted(&asked));
        assert!(
            matches!(decision, PlanChangedDecision::Mismatch(_)),
            "{decision:?}"
        );
        assert_eq!(decision.outcome(), EventOutcome::Mismatch);
    }
}

#[test]
fn a_resume_needs_a_live_subscription_scheduled_to_end() {
    let mut s = basic();
    assert_eq!(check_resume(&s), Err(PlanChangeRefusal::NotScheduledToEnd));
    s.apply(SubscriptionEvent::CancelScheduled, t(20)).unwrap();
    assert_eq!(check_resume(&s), Ok(()));
    s.apply(SubscriptionEvent::Canceled, t(30)).unwrap();
    assert_eq!(
        check_resume(&s).unwrap_err().code(),
        "subscription_not_live"
    );
}

#[test]
fn stripe_dodo_creem_and_paypal_switch_and_only_stripe_and_dodo_resume() {
    let support = |p| {
        let s = switch_support(p);
        (s.change_plan, s.resume)
    };
    assert_eq!(support(ProviderId::CardGateway), (true, true));
    assert_eq!(support(ProviderId::MorB), (true, true));
    assert_eq!(support(ProviderId::MorA), (true, false));
    assert_eq!(support(ProviderId::MorC), (false, false));
    assert_eq!(support(ProviderId::WalletGlobal), (true, false));
}
