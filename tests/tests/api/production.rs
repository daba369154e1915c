//! `APP_ENV=production` as operators run it (issue 13): only the providers with settings are
//! live, the others are off (not listed, not sold, webhook path 404), there is no sandbox, and a
//! catalog that sells through a provider that is off is refused at start, as is a live provider
//! on test-mode credentials.
//!
//! The live provider is Dodo Payments (`mor_b`), pointed at a sandbox of its own on another port
//! that stands in for Dodo's API: the production app talks to it exactly as it would to Dodo
//! (live mode: no sandbox-only fields), and its signed webhooks come back to the app. (Dodo's
//! answers and webhooks name no live or test mode, so the sandbox can stand in for a live Dodo;
//! the card gateway's sandbox answers as a Stripe test account, which production refuses.)

use std::sync::Arc;

use bootstrap::app::Application;
use bootstrap::seams::SystemClock;
use domain::{AppEnvironment, ProviderId};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Route, Server};
use sandbox::{CREDENTIALS, Sandbox};
use tests::{config_dir, spawn_app_from, test_settings};

/// A catalog of one Dodo credits pack, with the shipped consumption rules.
fn dodo_only_catalog() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("payment.toml"),
        r#"
[plans.credits_dodo_500]
provider = "mor_b"
amount = 4.99
currency = "USD"
duration = { type = "credits", credits = 500 }
morBProductId = "pdt_credits_500"

[plans.credits_dodo_500.i18n.en]
name = "500 credits"
"#,
    )
    .unwrap();
    std::fs::copy(
        config_dir().join("credits.toml"),
        dir.path().join("credits.toml"),
    )
    .unwrap();
    dir
}

/// Dodo's settings table as the sandbox publishes it, pointed at `api_base`.
fn dodo_table(api_base: &str) -> toml::Table {
    toml::Table::try_from(sandbox::mor_b::gateway_settings(api_base)).unwrap()
}

/// The card gateway's settings table with secret key `secret_key`, pointed at `api_base`.
fn card_table(secret_key: &str, api_base: &str) -> toml::Table {
    let mut table = toml::Table::new();
    table.insert("secretKey".into(), secret_key.into());
    table.insert("webhookSecret".into(), CREDENTIALS.hmac_secret.into());
    table.insert("baseUrl".into(), api_base.into());
    table
}

#[tokio::test]
async fn production_with_one_live_provider_starts_sells_and_serves_no_sandbox() {
    // Bind the stand-in provider first, so the app's settings can name its address.
    let provider = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let provider_base = format!(
        "http://{}",
        provider.local_addr()[0].as_socket_addr().unwrap()
    );
    let catalog = dodo_only_catalog();
    let app = spawn_app_from(catalog.path(), |settings| {
        settings.environment = AppEnvironment::Production;
        settings.providers.insert(
            ProviderId::MorB,
            dodo_table(&format!("{provider_base}/sandbox/mor_b")),
        );
    })
    .await;
    // The stand-in belongs to the app: its webhooks and redirects go to the app's address.
    let dodo = Sandbox::new(&app.address, Arc::new(SystemClock));
    tokio::spawn(
        Server::new_with_acceptor(provider).run(Route::new().nest("/sandbox", dodo.routes())),
    );

    let sandbox = app.client.get(app.url("/sandbox")).send().await.unwrap();
    assert_eq!(sandbox.status(), 404, "no sandbox in production");
    let plans: serde_json::Value = app
        .client
        .get(app.url("/api/plans"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = plans["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["credits_dodo_500"]);
    let off = app
        .client
        .post(app.url("/api/payment/webhook/wallet_qr"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(off.status(), 404, "a provider that is off has no webhook");

    let token = app.register("buyer@example.com").await;
    let (status, started) = app
        .initiate(&token, "credits_dodo_500", "mor_b", Some("buy-1"))
        .await;
    assert_eq!(status, 201, "{started}");
    let order_id = started["orderId"].as_str().unwrap();
    let payment = dodo
        .hub()
        .payment_for_order(ProviderId::MorB, order_id)
        .expect("the provider has the checkout session");
    assert_eq!(
        payment.amount_minor, 499,
        "production prices, not development ones"
    );
    dodo.hub().complete_payment(&payment.id).await.unwrap();
    let paid = app.wait_for_status(&token, order_id, "paid").await;
    assert_eq!(paid["status"], "paid");
    assert_eq!(app.balance_hundredths(&token).await, 50_000);
}

#[tokio::test]
async fn production_refuses_the_shipped_catalog_with_only_the_card_gateway_live() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings(dir.path());
    settings.environment = AppEnvironment::Production;
    settings.providers.insert(
        ProviderId::CardGateway,
        card_table("sk_live_unused", "http://127.0.0.1:9/sandbox/card_gateway"),
    );
    let catalog = bootstrap::catalog::load(&config_dir()).unwrap();
    let refused = Application::build(settings.clone(), catalog.clone())
        .await
        .err()
        .expect("refused");
    let message = format!("{refused:#}");
    let stranded: Vec<_> = catalog
        .plans()
        .iter()
        .filter(|p| p.provider() != ProviderId::CardGateway)
        .collect();
    assert!(
        stranded.len() > 5,
        "the shipped catalog sells through every provider"
    );
    for plan in stranded {
        assert!(
            message.contains(&format!("{} ({})", plan.id(), plan.provider())),
            "{message} names {}",
            plan.id()
        );
    }
    assert!(!message.contains("credits_card_500"), "{message}");

    settings.providers.clear();
    let none = Application::build(settings, catalog)
        .await
        .err()
        .expect("refused");
    assert!(
        format!("{none:#}").contains("at least one live provider"),
        "{none:#}"
    );
}

#[tokio::test]
async fn production_refuses_to_start_on_test_mode_credentials_naming_provider_and_setting() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = bootstrap::catalog::load(dodo_only_catalog().path()).unwrap();
    let mut settings = test_settings(dir.path());
    settings.environment = AppEnvironment::Production;
    let mut dodo = dodo_table("http://127.0.0.1:9/sandbox/mor_b");
    dodo.insert("testMode".into(), true.into());
    settings.providers.insert(ProviderId::MorB, dodo);
    let refused = Application::build(settings.clone(), catalog.clone())
        .await
        .err()
        .expect("refused");
    let message = format!("{refused:#}");
    assert!(
        message.contains("test-mode credentials") && message.contains("providers.mor_b.testMode"),
        "{message}"
    );
    // The card gateway's sandbox key is a test-mode key too: both are named in one message.
    settings.providers.insert(
        ProviderId::CardGateway,
        card_table(
            CREDENTIALS.api_key,
            "http://127.0.0.1:9/sandbox/card_gateway",
        ),
    );
    let both = Application::build(settings.clone(), catalog.clone())
        .await
        .err()
        .expect("refused");
    let both = format!("{both:#}");
    assert!(
        both.contains("providers.card_gateway.secretKey")
            && both.contains("providers.mor_b.testMode"),
        "{both}"
    );
    assert!(!both.contains(CREDENTIALS.api_key), "{both}");
    // Development runs on them.
    settings.environment = AppEnvironment::Development;
    settings.app_base_url = None;
    assert!(
        Application::build(settings, catalog).await.is_ok(),
        "development accepts test-mode credentials"
    );
}
