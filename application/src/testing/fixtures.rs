//! A small catalog and a service configuration for tests of the use cases, in memory or on a
//! real store: `credits-100` (10 USD, 100 credits), `lifetime` (99 USD), `pro-monthly` (9.99 USD
//! a month, 50 credits a period) on card_gateway, and `qr-credits` (1 CNY, 10 credits) on
//! wallet_qr.
// Test fixtures: the module doc says what each builds, and they panic on a fixture typo by design.
#![allow(missing_docs, clippy::missing_panics_doc)]

use std::collections::BTreeMap;

use domain::consumption::ConsumptionSettings;
use domain::{
    AppEnvironment, ConsumptionMode, ConsumptionRules, Credits, FeatureName, ModelName, Multiplier,
    Plan, PlanDraft, PlanText, ProviderId, ProviderRefs, UnknownModelPolicy,
};

use crate::service::ServiceConfig;
use crate::use_cases::plans::PricingMode;

pub fn plan(
    id: &str,
    provider: &str,
    kind: &str,
    amount: &str,
    currency: &str,
    credits: Option<&str>,
) -> Plan {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: id.to_owned(),
            ..PlanText::default()
        },
    );
    Plan::from_draft(&PlanDraft {
        id: id.into(),
        provider: Some(provider.into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some(currency.into()),
        months: match kind {
            "one_time" => Some(999_999),
            "recurring" => Some(1),
            _ => None,
        },
        duration_type: Some(kind.into()),
        credits: credits.map(|c| c.parse().unwrap()),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, "price_x"),
        i18n,
        ..PlanDraft::default()
    })
    .unwrap()
}

pub fn catalog() -> Vec<Plan> {
    vec![
        plan(
            "credits-100",
            "card_gateway",
            "credits",
            "10",
            "USD",
            Some("100"),
        ),
        plan("lifetime", "card_gateway", "one_time", "99", "USD", None),
        plan(
            "pro-monthly",
            "card_gateway",
            "recurring",
            "9.99",
            "USD",
            Some("50"),
        ),
        plan("qr-credits", "wallet_qr", "credits", "1", "CNY", Some("10")),
    ]
}

fn rules() -> ConsumptionRules {
    let mut fixed_costs = BTreeMap::new();
    fixed_costs.insert(
        FeatureName::new("chat").unwrap(),
        Credits::from_whole(1).unwrap(),
    );
    fixed_costs.insert(
        FeatureName::new("image").unwrap(),
        Credits::from_whole(5).unwrap(),
    );
    let mut model_multipliers = BTreeMap::new();
    model_multipliers.insert(
        ModelName::new("big").unwrap(),
        Multiplier::from_ten_thousandths(20_000).unwrap(),
    );
    ConsumptionRules::new(ConsumptionSettings {
        mode: ConsumptionMode::Dynamic,
        fixed_costs,
        cost_per_kilo_token: Credits::from_whole(1).unwrap(),
        model_multipliers,
        default_multiplier: Multiplier::ONE,
        unknown_model: UnknownModelPolicy::Refuse,
    })
    .unwrap()
}

/// The callback addresses under `base_url`, spelled as the HTTP adapters route them.
pub fn callback_urls(base_url: &str) -> crate::callbacks::CallbackUrls {
    crate::callbacks::CallbackUrls::new(
        format!("{base_url}/payment-success?orderId="),
        format!("{base_url}/payment-cancel?orderId="),
        format!("{base_url}/api/payment/webhook/"),
    )
}

pub fn config() -> ServiceConfig {
    ServiceConfig {
        pricing_mode: PricingMode::Static,
        environment: AppEnvironment::Production,
        catalog: catalog(),
        consumption: rules(),
        callbacks: callback_urls("http://tally.test"),
        order_lifetime_ms: 3_600_000,
        session_lifetime_ms: 86_400_000,
        reservation_lifetime_ms: 600_000,
        webhook_conflict_retries: 5,
        renewal_clock_tolerance_ms: crate::service::DEFAULT_RENEWAL_CLOCK_TOLERANCE_MS,
        allow_several_subscriptions: false,
        past_due_grace_ms: crate::service::DEFAULT_PAST_DUE_GRACE_MS,
    }
}
