//! Serve the pages over the application's in-memory fakes, to look at them while designing:
//! `cargo run -p web-pages --example preview -- 127.0.0.1:8090`, then open `/pricing`.
//!
//! It seeds a small catalog (static mode), an administrator `admin@example.com` and a user
//! `user@example.com`, both with the password `preview-password`. Payments go to fake
//! gateways whose checkout pages do not exist; the JSON API is not served.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::Role;
use application::inbound::Ports;
use application::ports::Gateways;
use application::service::{Service, ServiceConfig};
use application::testing::{FakeGateway, FixedClock, InMemoryStore, PlainHasher, SequentialIds};
use application::use_cases::plans::PricingMode;
use domain::consumption::ConsumptionSettings;
use domain::{
    AppEnvironment, ConsumptionMode, ConsumptionRules, Credits, Multiplier, Plan, PlanDraft,
    PlanText, ProviderId, ProviderRefs, UnknownModelPolicy,
};
use poem::Server;
use poem::listener::TcpListener;
use web_pages::PageSettings;

const PASSWORD: &str = "preview-password";

fn text(name: &str, description: &str, duration: &str, features: &[&str]) -> PlanText {
    PlanText {
        name: name.into(),
        description: description.into(),
        duration: duration.into(),
        features: features.iter().map(|f| (*f).to_owned()).collect(),
    }
}

fn plan(
    id: &str,
    provider: &str,
    kind: &str,
    amount: &str,
    currency: &str,
    en: PlanText,
) -> PlanDraft {
    let mut i18n = BTreeMap::new();
    i18n.insert("en".to_owned(), en);
    PlanDraft {
        id: id.into(),
        provider: Some(provider.into()),
        amount: amount.parse().ok(),
        currency: Some(currency.into()),
        months: match kind {
            "one_time" => Some(999_999),
            "recurring" => Some(1),
            _ => None,
        },
        duration_type: Some(kind.into()),
        credits: (kind == "credits").then(|| "1000".parse().ok()).flatten(),
        provider_refs: ProviderRefs::default().with(ProviderId::CardGateway, "price_preview"),
        i18n,
        ..PlanDraft::default()
    }
}

/// The recommended plan, discounted and translated.
fn pro_monthly() -> PlanDraft {
    let features = [
        "**All** Pro features",
        "1,000 credits every month",
        "Email support",
    ];
    let mut pro = plan(
        "pro_monthly",
        "card_gateway",
        "recurring",
        "9.99",
        "USD",
        text(
            "Pro Monthly",
            "Everything in Pro, billed every month.",
            "month",
            &features,
        ),
    );
    pro.recommended = true;
    pro.original_amount = "12.99".parse().ok();
    pro.i18n.insert(
        "zh-CN".into(),
        text(
            "专业版月付",
            "专业版全部功能，按月付费。",
            "月",
            &["全部专业版功能", "每月 1000 积分", "邮件支持"],
        ),
    );
    pro
}

fn catalog() -> Result<Vec<Plan>, domain::PlanErrors> {
    let pro = pro_monthly();
    let starter = plan(
        "starter_monthly",
        "card_gateway",
        "recurring",
        "4.99",
        "USD",
        text(
            "Starter Monthly",
            "For side projects.",
            "month",
            &["3 projects", "Community support"],
        ),
    );
    let lifetime = plan(
        "lifetime_card",
        "card_gateway",
        "one_time",
        "199",
        "USD",
        text(
            "Lifetime",
            "Pay once, keep every feature.",
            "lifetime",
            &["All features forever", "Priority support"],
        ),
    );
    let credits = plan(
        "credits_1000",
        "card_gateway",
        "credits",
        "10",
        "USD",
        text(
            "1,000 credits",
            "A pack of credits for AI usage.",
            "one-time pack",
            &["Never expires", "Use on any model"],
        ),
    );
    let qr = plan(
        "credits_cn_qr",
        "wallet_qr",
        "credits",
        "68",
        "CNY",
        text(
            "1,000 credits (QR)",
            "Pay by scanning a QR code.",
            "one-time pack",
            &["Never expires"],
        ),
    );
    [pro, starter, lifetime, credits, qr]
        .iter()
        .map(Plan::from_draft)
        .collect()
}

fn config() -> Result<ServiceConfig, Box<dyn std::error::Error>> {
    let consumption = ConsumptionRules::new(ConsumptionSettings {
        mode: ConsumptionMode::Dynamic,
        fixed_costs: BTreeMap::new(),
        cost_per_kilo_token: Credits::from_whole(1)?,
        model_multipliers: BTreeMap::new(),
        default_multiplier: Multiplier::ONE,
        unknown_model: UnknownModelPolicy::Refuse,
    })?;
    Ok(ServiceConfig {
        pricing_mode: PricingMode::Static,
        environment: AppEnvironment::Production,
        catalog: catalog().map_err(|e| e.to_string())?,
        consumption,
        callbacks: {
            let (success, cancel) = web_pages::result_page_prefixes("http://127.0.0.1:8090");
            application::callbacks::CallbackUrls::new(
                success,
                cancel,
                "http://127.0.0.1:8090/api/payment/webhook/".into(),
            )
        },
        order_lifetime_ms: 3_600_000,
        session_lifetime_ms: 86_400_000,
        reservation_lifetime_ms: 600_000,
        webhook_conflict_retries: 5,
        renewal_clock_tolerance_ms: application::service::DEFAULT_RENEWAL_CLOCK_TOLERANCE_MS,
        allow_several_subscriptions: false,
        past_due_grace_ms: application::service::DEFAULT_PAST_DUE_GRACE_MS,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".into());
    let gateways = ProviderId::ALL.into_iter().fold(Gateways::new(), |g, p| {
        g.with(Arc::new(FakeGateway::new(p)))
    });
    let service = Arc::new(Service::new(
        InMemoryStore::new(),
        FixedClock::at(1_800_000_000_000),
        SequentialIds::default(),
        PlainHasher,
        gateways,
        config()?,
    ));
    service
        .register(
            "admin@example.com",
            PASSWORD.into(),
            Role::Admin,
            &application::testing::client_of("admin@example.com"),
        )
        .await?;
    service
        .register(
            "user@example.com",
            PASSWORD.into(),
            Role::User,
            &application::testing::client_of("user@example.com"),
        )
        .await?;
    let settings = PageSettings {
        secure_cookies: false,
        sandbox_notice: true,
        trust_forwarded_for: false,
        public_base_url: None,
    };
    println!("serving the pages on http://{address}");
    Server::new(TcpListener::bind(address))
        .run(web_pages::routes(Ports::new(service), settings))
        .await?;
    Ok(())
}
