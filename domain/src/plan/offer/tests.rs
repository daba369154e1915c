use std::collections::BTreeMap;

use super::*;
use crate::plan::{PlanDraft, PlanProblem, PlanText, ProviderRefs};
use crate::provider::ProviderId;

fn plan(
    id: &str,
    group: Option<&str>,
    provider: &str,
    amount: &str,
    currency: &str,
    months: i64,
) -> Plan {
    let recurring = months != crate::plan::LIFETIME_MONTHS;
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: id.to_owned(),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: id.to_owned(),
        provider: Some(provider.to_owned()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.to_owned()),
        months: Some(months),
        duration_type: Some(if recurring { "recurring" } else { "one_time" }.to_owned()),
        provider_refs: ProviderRefs::default()
            .with(ProviderId::CardGateway, "price_1")
            .with(ProviderId::WalletGlobal, "P-1")
            .with(ProviderId::MorA, "prod_a"),
        i18n,
        group: group.map(str::to_owned),
        ..PlanDraft::default()
    })
    .unwrap()
}

#[test]
fn group_slugs_are_short_lower_case_words() {
    for good in ["pro", "team-2025", "a", "9lives", "pro_plus"] {
        assert_eq!(PlanGroup::new(good).unwrap().as_str(), good);
    }
    let too_long = "x".repeat(MAX_GROUP_CHARS + 1);
    for bad in [
        "",
        "Pro",
        "-pro",
        "_pro",
        "pro plus",
        "pro/plus",
        "über",
        too_long.as_str(),
    ] {
        assert_eq!(PlanGroup::new(bad), Err(PlanGroupError), "{bad:?}");
    }
}

#[test]
fn a_plan_with_a_bad_group_is_refused_naming_the_field() {
    let mut draft = plan("pro_monthly", None, "card_gateway", "9.99", "USD", 1).to_draft();
    draft.group = Some("Not A Slug".to_owned());
    let errors = Plan::from_draft(&draft).unwrap_err().0;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "group");
    assert!(matches!(errors[0].problem, PlanProblem::Invalid(_)));
}

#[test]
fn the_group_survives_the_draft_round_trip() {
    let p = plan("pro_monthly", Some("pro"), "card_gateway", "9.99", "USD", 1);
    assert_eq!(p.group().map(PlanGroup::as_str), Some("pro"));
    assert_eq!(Plan::from_draft(&p.to_draft()).unwrap(), p);
    let single = plan("solo", None, "card_gateway", "9.99", "USD", 1);
    assert_eq!(single.group(), None);
    assert_eq!(single.to_draft().group, None);
}

#[test]
fn the_interval_follows_the_type_and_months() {
    let cases = [
        (PlanType::Recurring, Some(1), PlanInterval::Month, "month"),
        (
            PlanType::Recurring,
            Some(3),
            PlanInterval::Quarter,
            "quarter",
        ),
        (
            PlanType::Recurring,
            Some(6),
            PlanInterval::HalfYear,
            "half_year",
        ),
        (PlanType::Recurring, Some(12), PlanInterval::Year, "year"),
        (
            PlanType::Recurring,
            Some(2),
            PlanInterval::Months(2),
            "months",
        ),
        (
            PlanType::OneTime,
            Some(crate::plan::LIFETIME_MONTHS),
            PlanInterval::Lifetime,
            "lifetime",
        ),
        (
            PlanType::OneTime,
            Some(6),
            PlanInterval::OneTime,
            "one_time",
        ),
        (
            PlanType::Credits,
            Some(12),
            PlanInterval::OneTime,
            "one_time",
        ),
        (PlanType::Credits, None, PlanInterval::OneTime, "one_time"),
    ];
    for (plan_type, months, interval, code) in cases {
        let duration = months.and_then(Duration::from_months_value);
        assert_eq!(
            PlanInterval::of(plan_type, duration),
            interval,
            "{plan_type} {months:?}"
        );
        assert_eq!(interval.code(), code);
    }
    assert_eq!(PlanInterval::Months(2).billing_months(), Some(2));
    assert_eq!(PlanInterval::Lifetime.billing_months(), None);
}

#[test]
fn the_yearly_saving_is_computed_in_whole_percent_rounded_down() {
    let monthly = plan("m", None, "card_gateway", "9.99", "USD", 1);
    let yearly = plan("y", None, "card_gateway", "99.90", "USD", 12);
    // 12 × 9.99 = 119.88; 99.90 is 16.67 % less.
    assert_eq!(saving_percent(&monthly, &yearly), Some(16));
    let exact = plan("y2", None, "card_gateway", "96.00", "USD", 12);
    let ten = plan("m2", None, "card_gateway", "10.00", "USD", 1);
    assert_eq!(saving_percent(&ten, &exact), Some(20));
    let quarterly = plan("q", None, "card_gateway", "27.00", "USD", 3);
    assert_eq!(saving_percent(&ten, &quarterly), Some(10));
}

#[test]
fn no_saving_is_claimed_when_there_is_none_or_prices_cannot_be_compared() {
    let monthly = plan("m", None, "card_gateway", "10.00", "USD", 1);
    let dearer = plan("y", None, "card_gateway", "120.00", "USD", 12);
    assert_eq!(saving_percent(&monthly, &dearer), None);
    let tiny = plan("y2", None, "card_gateway", "119.99", "USD", 12);
    assert_eq!(
        saving_percent(&monthly, &tiny),
        None,
        "under 1 % is no saving"
    );
    let euros = plan("e", None, "mor_a", "90.00", "EUR", 12);
    assert_eq!(saving_percent(&monthly, &euros), None);
    let lifetime = plan(
        "l",
        None,
        "card_gateway",
        "10.00",
        "USD",
        crate::plan::LIFETIME_MONTHS,
    );
    assert_eq!(saving_percent(&monthly, &lifetime), None);
}

#[test]
fn plans_are_grouped_into_offers_in_listing_order() {
    let plans = [
        plan("pro_monthly", Some("pro"), "card_gateway", "9.99", "USD", 1),
        plan("solo", None, "card_gateway", "5.00", "USD", 1),
        plan("pro_paypal", Some("pro"), "wallet_global", "9.99", "USD", 1),
        plan(
            "pro_yearly",
            Some("pro"),
            "card_gateway",
            "99.90",
            "USD",
            12,
        ),
        plan("pro_eur", Some("pro"), "mor_a", "9.49", "EUR", 1),
    ];
    let offers = group_offers(&plans);
    assert_eq!(offers.len(), 2);
    assert_eq!(
        offers[0].key(),
        &OfferKey::Group(PlanGroup::new("pro").unwrap())
    );
    assert_eq!(offers[0].plans().len(), 4);
    assert_eq!(offers[0].key().anchor(), "group-pro");
    assert_eq!(offers[1].key().anchor(), "plan-solo");
    assert_eq!(
        offers[0].intervals(),
        [PlanInterval::Month, PlanInterval::Year]
    );
    assert_eq!(
        offers[0].currencies(PlanInterval::Month),
        [Currency::Usd, Currency::Eur]
    );
    assert_eq!(
        offers[0].saving_percent(PlanInterval::Month, PlanInterval::Year, Currency::Usd),
        Some(16)
    );
    assert_eq!(
        offers[0].saving_percent(PlanInterval::Month, PlanInterval::Year, Currency::Eur),
        None
    );
}

#[test]
fn a_card_shows_the_preferred_currency_else_the_offers_default() {
    let plans = [
        plan("pro_monthly", Some("pro"), "card_gateway", "9.99", "USD", 1),
        plan("pro_paypal", Some("pro"), "wallet_global", "9.99", "USD", 1),
        plan("pro_eur", Some("pro"), "mor_a", "9.49", "EUR", 1),
        plan(
            "pro_yearly",
            Some("pro"),
            "card_gateway",
            "99.90",
            "USD",
            12,
        ),
    ];
    let offers = group_offers(&plans);
    let pro = &offers[0];
    let ids = |choice: &OfferChoice<'_>| -> Vec<String> {
        choice.methods.iter().map(|p| p.id().to_string()).collect()
    };
    let usd = pro.choose(Some(PlanInterval::Month), &[Currency::Usd]);
    assert_eq!(
        (usd.interval, usd.currency),
        (PlanInterval::Month, Currency::Usd)
    );
    assert_eq!(ids(&usd), ["pro_monthly", "pro_paypal"]);
    let eur = pro.choose(Some(PlanInterval::Month), &[Currency::Eur, Currency::Usd]);
    assert_eq!(
        (eur.currency, ids(&eur)),
        (Currency::Eur, vec!["pro_eur".to_owned()])
    );
    // No CNY price: the offer's default (its first plan's currency).
    let cny = pro.choose(Some(PlanInterval::Month), &[Currency::Cny]);
    assert_eq!(cny.currency, Currency::Usd);
    // Yearly exists only in USD, so a euro reader sees USD there.
    let yearly = pro.choose(Some(PlanInterval::Year), &[Currency::Eur]);
    assert_eq!(
        (yearly.currency, ids(&yearly)),
        (Currency::Usd, vec!["pro_yearly".to_owned()])
    );
    // An interval the offer lacks falls back to its shortest.
    let quarter = pro.choose(Some(PlanInterval::Quarter), &[]);
    assert_eq!(quarter.interval, PlanInterval::Month);
}

#[test]
fn a_locale_suggests_its_currency() {
    let cases = [
        ("en", Some(Currency::Usd)),
        ("en-GB", Some(Currency::Gbp)),
        ("zh-CN", Some(Currency::Cny)),
        ("zh", Some(Currency::Cny)),
        ("zh-HK", Some(Currency::Hkd)),
        ("ja", Some(Currency::Jpy)),
        ("de-DE", Some(Currency::Eur)),
        ("fr", Some(Currency::Eur)),
        ("sw", None),
    ];
    for (tag, currency) in cases {
        assert_eq!(
            currency_for_locale(&Locale::parse(tag).unwrap()),
            currency,
            "{tag}"
        );
    }
}

fn catalog() -> Vec<Plan> {
    vec![
        plan("pro_monthly", Some("pro"), "card_gateway", "9.99", "USD", 1),
        plan("pro_paypal", Some("pro"), "wallet_global", "9.99", "USD", 1),
        plan("pro_eur", Some("pro"), "mor_a", "9.49", "EUR", 1),
        plan(
            "pro_yearly",
            Some("pro"),
            "card_gateway",
            "99.90",
            "USD",
            12,
        ),
        plan("team_yearly", None, "card_gateway", "199.00", "USD", 12),
    ]
}

fn card_ids(cards: &[OfferCard<'_, '_>]) -> Vec<(String, PlanInterval, Vec<String>)> {
    cards
        .iter()
        .map(|c| {
            (
                c.offer.key().anchor(),
                c.choice.interval,
                c.choice
                    .methods
                    .iter()
                    .map(|p| p.id().to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn a_page_at_one_interval_shows_only_the_offers_sold_at_it() {
    let plans = catalog();
    let offers = group_offers(&plans);
    let english = CurrencyChoice::new(None, &Locale::parse("en").unwrap());
    let monthly = english.cards(&offers, Some(PlanInterval::Month));
    assert_eq!(
        card_ids(&monthly),
        [(
            "group-pro".to_owned(),
            PlanInterval::Month,
            vec!["pro_monthly".to_owned(), "pro_paypal".to_owned()]
        )]
    );
    assert_eq!(english.cards(&offers, Some(PlanInterval::Year)).len(), 2);
    assert_eq!(
        english.sold_intervals(&offers),
        [PlanInterval::Month, PlanInterval::Year]
    );
    assert_eq!(
        english.default_interval(&offers, None),
        Some(PlanInterval::Month)
    );
    assert_eq!(
        english.default_interval(&offers, Some(PlanInterval::Quarter)),
        Some(PlanInterval::Month),
        "an interval nothing is sold at is not kept"
    );
    // Asking for euros shows only what is priced in euros, at the intervals sold in them.
    let euros = CurrencyChoice::new(Some(Currency::Eur), &Locale::parse("en").unwrap());
    assert_eq!(euros.sold_intervals(&offers), [PlanInterval::Month]);
    assert!(euros.cards(&offers, Some(PlanInterval::Year)).is_empty());
}

#[test]
fn the_listing_has_one_card_per_offer_and_interval() {
    let plans = catalog();
    let offers = group_offers(&plans);
    let german = CurrencyChoice::new(None, &Locale::parse("de").unwrap());
    let all = german.cards_per_interval(&offers, None);
    assert_eq!(
        card_ids(&all),
        [
            (
                "group-pro".to_owned(),
                PlanInterval::Month,
                vec!["pro_eur".to_owned()]
            ),
            (
                "group-pro".to_owned(),
                PlanInterval::Year,
                vec!["pro_yearly".to_owned()]
            ),
            (
                "plan-team_yearly".to_owned(),
                PlanInterval::Year,
                vec!["team_yearly".to_owned()]
            ),
        ]
    );
    let yearly = german.cards_per_interval(&offers, Some(PlanInterval::Year));
    assert_eq!(yearly.len(), 2);
    assert_eq!(yearly, german.cards(&offers, Some(PlanInterval::Year)));
}

#[test]
fn what_the_reader_holds_is_found_at_the_cards_interval_in_any_currency() {
    let plans = catalog();
    let offers = group_offers(&plans);
    let english = CurrencyChoice::new(None, &Locale::parse("en").unwrap());
    let holdings = Holdings::new([PlanId::new("pro_eur").unwrap()], []);
    let cards = english.cards_per_interval(&offers, None);
    let held: Vec<Held> = cards.iter().map(|c| holdings.of(c)).collect();
    assert_eq!(held, [Held::Current, Held::Nothing, Held::Nothing]);
    let owner = Holdings::new([], [PlanId::new("team_yearly").unwrap()]);
    assert_eq!(owner.of(&cards[2]), Held::Owned);
    assert_eq!(Holdings::default().of(&cards[0]), Held::Nothing);
}

#[test]
fn every_interval_has_a_slug_that_names_it_again() {
    for interval in [
        PlanInterval::Month,
        PlanInterval::Quarter,
        PlanInterval::HalfYear,
        PlanInterval::Year,
        PlanInterval::Months(2),
        PlanInterval::Months(11),
        PlanInterval::Lifetime,
        PlanInterval::OneTime,
    ] {
        assert_eq!(PlanInterval::from_slug(&interval.slug()), Some(interval));
    }
    assert_eq!(PlanInterval::Months(7).slug(), "months-7");
    assert_eq!(
        PlanInterval::from_slug("months-3"),
        Some(PlanInterval::Quarter)
    );
    for bad in [
        "",
        "months",
        "months-0",
        "months-13",
        "months-x",
        "weekly",
        "Month",
    ] {
        assert_eq!(PlanInterval::from_slug(bad), None, "{bad:?}");
    }
}
