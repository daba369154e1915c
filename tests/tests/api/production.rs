//! `APP_ENV=production` as operators run it (issue 13): only the providers with settings are
//! live, the others are off (not listed, not sold, webhook path 404), there is no sandbox, and a
//! catalog that sells through a provider that is off is refused at start.
//!
//! The live provider is the card gateway, pointed at a sandbox of its own on another port that
//! stands in for Stripe's API: the production app talks to it exactly as it would to Stripe
//! (live mode: no sandbox-only fields), and its signed webhooks come back to the app.

use std::sync::Arc;

use bootstrap::app::Application;
use bootstrap::seams::SystemClock;
use domain::{AppEnvironment, ProviderId};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Route, Server};
use sandbox::{CREDENTIALS, Sandbox};
use tests::{config_dir, spawn_app_from, test_settings};

/// A catalog of one card-gateway credits pack, with the shipped consumption rules.
fn card_only_catalog() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("payment.toml"),
        r#"
[plans.credits_card_500]
provider = "card_gateway"
amount = 4.99
currency = "USD"
duration = { type = "credits", credits = 500 }

[plans.credits_card_500.i18n.en]
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

/// The card gateway's settings table, pointed at `api_base`.
fn card_table(api_base: &str) -> toml::Table {
    let mut table = toml::Table::new();
    table.insert("secretKey".into(), CREDENTIALS.api_key.into());
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
    let catalog = card_only_catalog();
    let app = spawn_app_from(catalog.path(), |settings| {
        settings.environment = AppEnvironment::Production;
        settings.providers.insert(
            ProviderId::CardGateway,
            card_table(&format!("{provider_base}/sandbox/card_gateway")),
        );
    })
    .await;
    // The stand-in belongs to the app: its webhooks and redirects go to the app's address.
    let stripe = Sandbox::new(&app.address, Arc::new(SystemClock));
    tokio::spawn(
        Server::new_with_acceptor(provider).run(Route::new().nest("/sandbox", stripe.routes())),
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
    assert_eq!(ids, ["credits_card_500"]);
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
        .initiate(&token, "credits_card_500", "card_gateway", Some("buy-1"))
        .await;
    assert_eq!(status, 201, "{started}");
    let order_id = started["orderId"].as_str().unwrap();
    let payment = stripe
        .hub()
        .payment_for_order(ProviderId::CardGateway, order_id)
        .expect("the provider has the checkout session");
    assert_eq!(
        payment.amount_minor, 499,
        "production prices, not development ones"
    );
    stripe.hub().complete_payment(&payment.id).await.unwrap();
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
        card_table("http://127.0.0.1:9/sandbox/card_gateway"),
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
