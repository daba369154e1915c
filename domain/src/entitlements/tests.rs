use super::*;
use crate::credits::Credits;
use crate::ids::UserId;
use crate::money::{Currency, Money};
use crate::order::{OrderParts, OrderStatus, PlanSnapshot};
use crate::plan::{Duration, PlanType};
use crate::provider::ProviderId;
use crate::subscription::{BillingPeriod, RenewalIntent, SubscriptionParts, SubscriptionStatus};

const DAY_MS: i64 = 86_400_000;

fn key(k: &str) -> EntitlementKey {
    EntitlementKey::new(k).unwrap()
}

fn set(pairs: &[(&str, EntitlementValue)]) -> Entitlements {
    Entitlements::from_pairs(pairs.iter().map(|(k, v)| (key(k), *v)))
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn holding(source: &str, until: HeldUntil, entitlements: Entitlements) -> Holding {
    Holding {
        source: GrantSource::Order(OrderId::new(source).unwrap()),
        plan_id: PlanId::new(format!("plan-{source}")).unwrap(),
        until,
        entitlements,
    }
}

fn subscription(
    status: SubscriptionStatus,
    renewal: RenewalIntent,
    period_end: i64,
) -> Subscription {
    Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("sub-1").unwrap(),
        user_id: UserId::new("u1").unwrap(),
        account: None,
        plan_id: PlanId::new("pro-monthly").unwrap(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_provider_1".into(),
        status,
        current_period: BillingPeriod::new(at(period_end - 30 * DAY_MS), at(period_end)).unwrap(),
        renewal,
        last_event_at: at(period_end - 30 * DAY_MS),
        sold_terms: None,
    })
}

fn one_time_order(months: Option<Duration>, plan_type: PlanType, paid_at: i64) -> Order {
    Order::restore(OrderParts {
        id: OrderId::new("order-1").unwrap(),
        user_id: UserId::new("u1").unwrap(),
        account: None,
        provider: ProviderId::CardGateway,
        plan: PlanSnapshot {
            bonus: None,
            plan_id: PlanId::new("pass").unwrap(),
            plan_type,
            price: Money::from_minor(500, Currency::Usd).unwrap(),
            credits: (plan_type == PlanType::Credits).then(|| Credits::from_whole(10).unwrap()),
            duration: months,
            entitlements: Some(set(&[("export", EntitlementValue::Enabled)])),
        },
        status: OrderStatus::Paid {
            paid_at: at(paid_at),
        },
        created_at: at(paid_at),
        expires_at: at(paid_at + DAY_MS),
        returns: crate::ReturnUrls::default(),
        save_method: false,
    })
}

#[test]
fn keys_follow_the_documented_pattern() {
    for ok in [
        "a",
        "seats",
        "ai.models:gpt-4o",
        "export_pdf",
        &"x".repeat(64),
    ] {
        assert!(EntitlementKey::new(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "Seats",
        "1seats",
        "_x",
        "a b",
        "a/b",
        "ä",
        &"x".repeat(65),
    ] {
        assert_eq!(EntitlementKey::new(bad), Err(EntitlementKeyError), "{bad}");
    }
}

#[test]
fn only_true_and_non_negative_integers_are_values() {
    assert_eq!(
        EntitlementDraft::Flag(true).validate(),
        Ok(EntitlementValue::Enabled)
    );
    assert_eq!(
        EntitlementDraft::Integer(0).validate(),
        Ok(EntitlementValue::Limit(0))
    );
    assert_eq!(
        EntitlementDraft::Integer(5).validate(),
        Ok(EntitlementValue::Limit(5))
    );
    assert_eq!(
        EntitlementDraft::Flag(false).validate(),
        Err(EntitlementValueError::False)
    );
    assert_eq!(
        EntitlementDraft::Integer(-1).validate(),
        Err(EntitlementValueError::Negative(-1))
    );
    assert!(
        EntitlementDraft::Unsupported("a string".into())
            .validate()
            .is_err()
    );
}

#[test]
fn drafts_report_every_bad_key_and_value_and_round_trip() {
    let mut drafts = BTreeMap::new();
    drafts.insert("seats".to_owned(), EntitlementDraft::Integer(3));
    drafts.insert("Bad Key".to_owned(), EntitlementDraft::Flag(true));
    drafts.insert("off".to_owned(), EntitlementDraft::Flag(false));
    let errors = Entitlements::from_drafts(&drafts).unwrap_err();
    let keys: Vec<_> = errors.iter().map(|(k, _)| k.clone().unwrap()).collect();
    assert_eq!(keys, vec!["Bad Key".to_owned(), "off".to_owned()]);

    drafts.remove("Bad Key");
    drafts.remove("off");
    drafts.insert("export".to_owned(), EntitlementDraft::Flag(true));
    let valid = Entitlements::from_drafts(&drafts).unwrap();
    assert_eq!(valid.get(&key("seats")), Some(EntitlementValue::Limit(3)));
    assert_eq!(
        Entitlements::from_drafts(&valid.to_drafts()).unwrap(),
        valid
    );

    let many: BTreeMap<String, EntitlementDraft> = (0..=MAX_ENTITLEMENTS)
        .map(|i| (format!("k{i}"), EntitlementDraft::Flag(true)))
        .collect();
    assert_eq!(Entitlements::from_drafts(&many).unwrap_err().len(), 1);
}

#[test]
fn the_union_takes_true_over_absent_and_the_largest_number() {
    let a = holding(
        "a",
        HeldUntil::At(at(1_000)),
        set(&[
            ("export", EntitlementValue::Enabled),
            ("seats", EntitlementValue::Limit(3)),
            ("sso", EntitlementValue::Enabled),
        ]),
    );
    let b = holding(
        "b",
        HeldUntil::At(at(2_000)),
        set(&[
            ("seats", EntitlementValue::Limit(10)),
            ("projects", EntitlementValue::Limit(0)),
            ("sso", EntitlementValue::Limit(2)),
        ]),
    );
    let effective = effective_entitlements(&[a, b]);
    let e = &effective.entitlements;
    assert_eq!(e.get(&key("export")), Some(EntitlementValue::Enabled));
    assert_eq!(e.get(&key("seats")), Some(EntitlementValue::Limit(10)));
    assert_eq!(e.get(&key("projects")), Some(EntitlementValue::Limit(0)));
    // A number is the more specific statement: it wins over `true`.
    assert_eq!(e.get(&key("sso")), Some(EntitlementValue::Limit(2)));
    assert_eq!(e.get(&key("absent")), None);
    let source_of = |k: &str| {
        effective
            .grants
            .iter()
            .find(|g| g.key.as_str() == k)
            .map(|g| g.source.clone())
            .unwrap()
    };
    let order = |id: &str| GrantSource::Order(OrderId::new(id).unwrap());
    assert_eq!(source_of("export"), order("a"));
    assert_eq!(source_of("seats"), order("b"));
    assert_eq!(effective.grants.len(), 4);
}

#[test]
fn the_union_is_the_same_in_any_order_and_names_the_longest_lasting_purchase_on_a_tie() {
    let short = holding(
        "short",
        HeldUntil::At(at(1_000)),
        set(&[("seats", EntitlementValue::Limit(5))]),
    );
    let long = holding(
        "long",
        HeldUntil::At(at(9_000)),
        set(&[("seats", EntitlementValue::Limit(5))]),
    );
    let lifetime = holding(
        "life",
        HeldUntil::Open,
        set(&[("seats", EntitlementValue::Limit(5))]),
    );
    for holdings in [
        vec![short.clone(), long.clone()],
        vec![long.clone(), short.clone()],
    ] {
        let grant = &effective_entitlements(&holdings).grants[0];
        assert_eq!(
            grant.source,
            GrantSource::Order(OrderId::new("long").unwrap())
        );
        assert_eq!(grant.until.ends_at(), Some(at(9_000)));
    }
    let grant = &effective_entitlements(&[short, long, lifetime]).grants[0];
    assert_eq!(
        grant.source,
        GrantSource::Order(OrderId::new("life").unwrap())
    );
    assert_eq!(grant.until, HeldUntil::Open);
    assert_eq!(
        effective_entitlements(&[]),
        EffectiveEntitlements::default()
    );
}

#[test]
fn a_pass_grants_until_its_months_end_and_nothing_after() {
    let paid_at = at(0).unix_millis();
    let order = one_time_order(
        Some(Duration::from_months_value(1).unwrap()),
        PlanType::OneTime,
        paid_at,
    );
    let end = at(paid_at).plus_calendar_months(1);
    let entitlements = order.plan().entitlements.clone().unwrap();
    let held = Holding::of_order(&order, entitlements.clone(), at(end.unix_millis() - 1)).unwrap();
    assert_eq!(held.until, HeldUntil::At(end));
    assert!(Holding::of_order(&order, entitlements.clone(), end).is_none());

    let lifetime = one_time_order(Some(Duration::Lifetime), PlanType::OneTime, paid_at);
    let held = Holding::of_order(&lifetime, entitlements.clone(), at(i64::MAX / 2)).unwrap();
    assert_eq!(held.until, HeldUntil::Open);

    let credits_pack = one_time_order(None, PlanType::Credits, paid_at);
    assert!(Holding::of_order(&credits_pack, entitlements, at(1)).is_none());
}

#[test]
fn a_past_due_subscription_grants_during_its_grace_only() {
    let period_end = 100 * DAY_MS;
    let grace_ms = 3 * DAY_MS;
    let past_due = subscription(
        SubscriptionStatus::PastDue,
        RenewalIntent::Renews,
        period_end,
    );
    let e = set(&[("seats", EntitlementValue::Limit(5))]);
    let within = Holding::of_subscription(&past_due, e.clone(), grace_ms, at(period_end + DAY_MS));
    assert_eq!(
        within.unwrap().until,
        HeldUntil::At(at(period_end + grace_ms))
    );
    assert!(
        Holding::of_subscription(&past_due, e.clone(), grace_ms, at(period_end + grace_ms))
            .is_none()
    );

    let active = subscription(
        SubscriptionStatus::Active,
        RenewalIntent::Renews,
        period_end,
    );
    let held = Holding::of_subscription(&active, e.clone(), grace_ms, at(period_end + 50 * DAY_MS));
    assert_eq!(held.unwrap().until, HeldUntil::Open);

    let canceled = subscription(
        SubscriptionStatus::Canceled,
        RenewalIntent::Renews,
        period_end,
    );
    assert!(Holding::of_subscription(&canceled, e.clone(), grace_ms, at(period_end - 1)).is_some());
    assert!(Holding::of_subscription(&canceled, e.clone(), grace_ms, at(period_end)).is_none());

    let expired = subscription(
        SubscriptionStatus::Expired,
        RenewalIntent::Renews,
        period_end,
    );
    assert!(Holding::of_subscription(&expired, e, grace_ms, at(0)).is_none());
}
