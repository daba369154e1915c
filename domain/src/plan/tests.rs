use super::*;

fn en(name: &str) -> BTreeMap<String, PlanText> {
    let mut m = BTreeMap::new();
    m.insert(
        "en".to_owned(),
        PlanText {
            name: name.into(),
            ..PlanText::default()
        },
    );
    m
}

fn draft(provider: &str, kind: &str, currency: &str) -> PlanDraft {
    PlanDraft {
        id: "pro".into(),
        provider: Some(provider.into()),
        amount: Some("9.99".parse().unwrap()),
        currency: Some(currency.into()),
        months: if kind == "credits" {
            None
        } else if kind == "one_time" {
            Some(LIFETIME_MONTHS)
        } else {
            Some(1)
        },
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "100".parse().unwrap()),
        provider_refs: ProviderRefs::default()
            .with(ProviderId::CardGateway, "price_1")
            .with(ProviderId::WalletGlobal, "P-1")
            .with(ProviderId::MorA, "prod_a")
            .with(ProviderId::MorB, "pdt_b")
            .with(ProviderId::MorC, "PROD_c"),
        i18n: en("Pro"),
        ..PlanDraft::default()
    }
}

fn only_error(d: &PlanDraft) -> (String, PlanProblem) {
    let errors = Plan::from_draft(d).expect_err("draft should be refused").0;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].plan_id, d.id);
    (errors[0].field.clone(), errors[0].problem.clone())
}

#[test]
fn a_valid_plan_for_every_provider_and_supported_type_is_accepted() {
    for p in ProviderId::ALL {
        for t in p.plan_types() {
            let currency = if matches!(p, ProviderId::WalletQr | ProviderId::WalletWeb) {
                "CNY"
            } else {
                "USD"
            };
            let plan = Plan::from_draft(&draft(p.as_str(), t.as_str(), currency)).unwrap();
            assert_eq!(plan.plan_type(), *t);
            assert_eq!(Plan::from_draft(&plan.to_draft()).unwrap(), plan);
        }
    }
}

#[test]
fn provider_product_ids_are_required_where_the_protocol_needs_them() {
    let cases = [
        ("mor_a", "one_time", "morAProductId"),
        ("mor_b", "credits", "morBProductId"),
        ("mor_c", "recurring", "morCProductId"),
        ("card_gateway", "recurring", "cardGatewayPriceId"),
        ("wallet_global", "recurring", "walletGlobalPlanId"),
    ];
    for (provider, kind, field) in cases {
        let mut d = draft(provider, kind, "USD");
        d.provider_refs = ProviderRefs::default();
        assert_eq!(
            only_error(&d),
            (field.to_owned(), PlanProblem::Missing),
            "{provider}"
        );
    }
    let mut d = draft("card_gateway", "one_time", "USD");
    d.provider_refs = ProviderRefs::default();
    assert!(
        Plan::from_draft(&d).is_ok(),
        "one-time card plans use an ad-hoc price"
    );
}

#[test]
fn wallets_refuse_subscriptions_and_non_cny() {
    let (field, problem) = only_error(&draft("wallet_qr", "recurring", "CNY"));
    assert_eq!(field, "duration.type");
    assert!(matches!(
        problem,
        PlanProblem::Capability(CapabilityError::PlanTypeNotSupported { .. })
    ));
    let (field, _) = only_error(&draft("wallet_web", "one_time", "USD"));
    assert_eq!(field, "currency");
}

#[test]
fn mor_c_refuses_cny_subscriptions_only() {
    let (field, problem) = only_error(&draft("mor_c", "recurring", "CNY"));
    assert_eq!(field, "currency");
    assert!(matches!(
        problem,
        PlanProblem::Capability(CapabilityError::CurrencyNotSupported { .. })
    ));
    assert!(Plan::from_draft(&draft("mor_c", "credits", "CNY")).is_ok());
}

#[test]
fn credits_plans_need_positive_credits() {
    let mut d = draft("card_gateway", "credits", "USD");
    d.credits = None;
    assert_eq!(
        only_error(&d),
        ("duration.credits".into(), PlanProblem::Missing)
    );
    d.credits = Some(Decimal::ZERO);
    assert_eq!(
        only_error(&d),
        ("duration.credits".into(), PlanProblem::NotPositive)
    );
    d.credits = Some("-5".parse().unwrap());
    assert_eq!(only_error(&d).0, "duration.credits");
}

#[test]
fn a_packs_bonus_is_part_of_its_credits_with_its_own_expiry() {
    let mut d = draft("card_gateway", "credits", "USD");
    d.bonus_credits = Some("10".parse().unwrap());
    d.bonus_expires_in_days = Some(30);
    let plan = Plan::from_draft(&d).unwrap();
    let bonus = plan.bonus().unwrap();
    assert_eq!(bonus.credits, Credits::from_whole(10).unwrap());
    assert_eq!(bonus.expires_in_days, Some(30));
    assert_eq!(Plan::from_draft(&plan.to_draft()).unwrap(), plan);
    let field = "duration.bonusCredits";
    for too_much in ["100", "150"] {
        d.bonus_credits = Some(too_much.parse().unwrap());
        assert_eq!(
            only_error(&d).0,
            field,
            "{too_much} of 100 leaves nothing paid"
        );
    }
    d.bonus_credits = Some(Decimal::ZERO);
    assert_eq!(only_error(&d), (field.into(), PlanProblem::NotPositive));
    d.bonus_credits = None;
    assert_eq!(
        only_error(&d).0,
        "duration.bonusExpiresInDays",
        "an expiry needs a bonus"
    );
    d.bonus_credits = Some("10".parse().unwrap());
    d.bonus_expires_in_days = Some(0);
    assert_eq!(only_error(&d).0, "duration.bonusExpiresInDays");
    let mut monthly = draft("card_gateway", "recurring", "USD");
    monthly.bonus_credits = Some("10".parse().unwrap());
    assert_eq!(
        only_error(&monthly),
        (
            field.into(),
            PlanProblem::NotAllowedFor(PlanType::Recurring)
        )
    );
}

#[test]
fn amounts_must_be_positive_and_original_at_least_amount() {
    let mut d = draft("card_gateway", "one_time", "USD");
    d.amount = Some(Decimal::ZERO);
    assert_eq!(only_error(&d), ("amount".into(), PlanProblem::NotPositive));
    d.amount = Some("-1".parse().unwrap());
    assert_eq!(only_error(&d).0, "amount");
    d.amount = Some("1.001".parse().unwrap());
    assert_eq!(only_error(&d).0, "amount");
    d.amount = Some("10".parse().unwrap());
    d.original_amount = Some("9".parse().unwrap());
    assert_eq!(
        only_error(&d),
        ("originalAmount".into(), PlanProblem::BelowAmount)
    );
}

#[test]
fn development_price_applies_only_in_development_and_not_above_amount() {
    let mut d = draft("wallet_qr", "one_time", "CNY");
    d.development_amount = Some("0.01".parse().unwrap());
    let plan = Plan::from_draft(&d).unwrap();
    assert_eq!(plan.price_in(AppEnvironment::Development).amount_minor(), 1);
    assert_eq!(
        plan.price_in(AppEnvironment::Production).amount_minor(),
        999
    );
    d.development_amount = Some("20".parse().unwrap());
    assert_eq!(
        only_error(&d),
        ("developmentAmount".into(), PlanProblem::AboveAmount)
    );
}

#[test]
fn lifetime_is_999999_and_other_month_counts_are_bounded() {
    let mut d = draft("card_gateway", "one_time", "USD");
    assert_eq!(
        Plan::from_draft(&d).unwrap().duration(),
        Some(Duration::Lifetime)
    );
    d.months = Some(99_999);
    assert!(matches!(
        only_error(&d).1,
        PlanProblem::MonthsOutOfRange { .. }
    ));
    d.months = None;
    assert_eq!(
        only_error(&d),
        ("duration.months".into(), PlanProblem::Missing)
    );
    let mut r = draft("card_gateway", "recurring", "USD");
    r.months = Some(LIFETIME_MONTHS);
    assert_eq!(
        only_error(&r),
        ("duration.months".into(), PlanProblem::LifetimeSubscription)
    );
    r.months = Some(0);
    assert!(matches!(
        only_error(&r).1,
        PlanProblem::MonthsOutOfRange { .. }
    ));
}

#[test]
fn an_en_text_with_a_name_is_required() {
    let mut d = draft("card_gateway", "one_time", "USD");
    d.i18n = en("  ");
    assert_eq!(
        only_error(&d),
        ("i18n.en.name".into(), PlanProblem::Missing)
    );
    d.i18n.clear();
    d.i18n.insert(
        "zh-CN".into(),
        PlanText {
            name: "专业版".into(),
            ..PlanText::default()
        },
    );
    assert_eq!(only_error(&d), ("i18n.en".into(), PlanProblem::Missing));
}

#[test]
fn every_violation_is_reported_at_once() {
    let d = PlanDraft {
        id: "Bad Id".into(),
        ..PlanDraft::default()
    };
    let fields: Vec<String> = Plan::from_draft(&d)
        .unwrap_err()
        .0
        .into_iter()
        .map(|e| e.field)
        .collect();
    for f in [
        "id",
        "provider",
        "currency",
        "duration.type",
        "amount",
        "i18n.en",
    ] {
        assert!(
            fields.contains(&f.to_owned()),
            "{f} missing from {fields:?}"
        );
    }
}

#[test]
fn texts_fall_back_to_the_language_then_to_english() {
    let mut d = draft("card_gateway", "one_time", "USD");
    d.i18n.insert(
        "zh-CN".into(),
        PlanText {
            name: "专业版".into(),
            ..PlanText::default()
        },
    );
    let plan = Plan::from_draft(&d).unwrap();
    assert_eq!(
        plan.text_for(&Locale::parse("zh-CN").unwrap()).name,
        "专业版"
    );
    assert_eq!(
        plan.text_for(&Locale::parse("zh-TW").unwrap()).name,
        "专业版"
    );
    assert_eq!(plan.text_for(&Locale::parse("fr").unwrap()).name, "Pro");
}

#[test]
fn stored_month_values_round_trip() {
    for d in [Duration::Lifetime, Duration::from_months_value(12).unwrap()] {
        assert_eq!(Duration::from_months_value(d.months_value()), Some(d));
    }
    assert_eq!(Duration::from_months_value(0), None);
    assert_eq!(Duration::from_months_value(1201), None);
}

#[test]
fn entitlements_are_validated_kept_and_round_trip() {
    use crate::entitlements::{EntitlementDraft, EntitlementKey, EntitlementValue};
    let mut d = draft("card_gateway", "recurring", "USD");
    d.entitlements
        .insert("seats".into(), EntitlementDraft::Integer(5));
    d.entitlements
        .insert("export".into(), EntitlementDraft::Flag(true));
    let plan = Plan::from_draft(&d).unwrap();
    let seats = EntitlementKey::new("seats").unwrap();
    assert_eq!(
        plan.entitlements().get(&seats),
        Some(EntitlementValue::Limit(5))
    );
    assert_eq!(Plan::from_draft(&plan.to_draft()).unwrap(), plan);

    d.entitlements
        .insert("Bad".into(), EntitlementDraft::Flag(true));
    assert_eq!(only_error(&d).0, "entitlements.Bad");
    d.entitlements.remove("Bad");
    d.entitlements
        .insert("seats".into(), EntitlementDraft::Integer(-2));
    assert_eq!(only_error(&d).0, "entitlements.seats");

    let mut pack = draft("card_gateway", "credits", "USD");
    pack.entitlements
        .insert("export".into(), EntitlementDraft::Flag(true));
    assert_eq!(
        only_error(&pack),
        (
            "entitlements".to_owned(),
            PlanProblem::NotAllowedFor(PlanType::Credits)
        )
    );
}
