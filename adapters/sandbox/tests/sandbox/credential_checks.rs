//! Every gateway's credential check (`tally check-config --online`) against the sandbox over
//! real HTTP: the sandbox accepts its own published credentials on the same read the real
//! provider answers, and refuses a wrong key, secret or signature as the real provider does.

use std::sync::Arc;

use application::ports::{CredentialMode, GatewayError, PaymentGateway};
use domain::ProviderId;
use gateways::GatewayContext;
use gateways::shared::{HttpSettings, ProviderHttp};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Route, Server};
use sandbox::{CREDENTIALS, Sandbox};

use crate::support::SystemClock;
use serde_json::{Value, json};

/// A sandbox served on a free port.
async fn serve_sandbox() -> Sandbox {
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let address = acceptor.local_addr()[0].as_socket_addr().copied().unwrap();
    let sandbox = Sandbox::new(&format!("http://{address}"), Arc::new(SystemClock));
    let routes = Route::new().nest("/sandbox", sandbox.routes());
    tokio::spawn(Server::new_with_acceptor(acceptor).run(routes));
    sandbox
}

/// The sandbox's own settings table of `provider`, as `tally serve` hands it to the gateway.
fn sandbox_settings(sandbox: &Sandbox, provider: ProviderId) -> Value {
    let base = sandbox.api_base_url(provider);
    match provider {
        ProviderId::WalletQr => sandbox::wallet_qr::gateway_settings(&base),
        ProviderId::WalletWeb => sandbox::wallet_web::gateway_settings(&base),
        ProviderId::CardGateway => sandbox::card_gateway::gateway_settings(&base),
        ProviderId::WalletGlobal => sandbox::wallet_global::gateway_settings(&base),
        ProviderId::MorA => sandbox::mor_a::gateway_settings(&base),
        ProviderId::MorB => sandbox::mor_b::gateway_settings(&base),
        ProviderId::MorC => sandbox::mor_c::gateway_settings(&base),
    }
}

fn context(http: &HttpSettings) -> GatewayContext {
    GatewayContext {
        http: ProviderHttp::new(http).unwrap(),
        clock: Arc::new(SystemClock),
        sandbox: false,
    }
}

/// The gateway of `provider` built from the settings table `table`.
fn gateway(provider: ProviderId, table: Value) -> Arc<dyn PaymentGateway> {
    macro_rules! build {
        ($module:ident, $settings:ident, $gateway:ident) => {{
            let settings: gateways::$module::$settings = serde_json::from_value(table).unwrap();
            let gateway =
                gateways::$module::$gateway::new(&settings, context(&settings.http())).unwrap();
            Arc::new(gateway) as Arc<dyn PaymentGateway>
        }};
    }
    match provider {
        ProviderId::WalletQr => build!(wallet_qr, WalletQrSettings, WalletQrGateway),
        ProviderId::WalletWeb => build!(wallet_web, WalletWebSettings, WalletWebGateway),
        ProviderId::CardGateway => {
            build!(card_gateway, CardGatewaySettings, CardGatewayGateway)
        }
        ProviderId::WalletGlobal => {
            build!(wallet_global, WalletGlobalSettings, WalletGlobalGateway)
        }
        ProviderId::MorA => build!(mor_a, MorASettings, MorAGateway),
        ProviderId::MorB => build!(mor_b, MorBSettings, MorBGateway),
        ProviderId::MorC => build!(mor_c, MorCSettings, MorCGateway),
    }
}

/// The setting of `provider`'s table to spoil, and the wrong value: a key, secret or signing
/// key the sandbox does not know (the sandbox's own webhook key signs with another key than
/// the merchant's).
fn wrong_credential(provider: ProviderId) -> (&'static str, Value) {
    let other_key = json!(CREDENTIALS.provider_private_pem);
    match provider {
        ProviderId::WalletQr => ("merchantPrivateKey", other_key),
        ProviderId::WalletWeb => ("appPrivateKey", other_key),
        ProviderId::CardGateway => ("secretKey", json!("sk_test_not_the_sandbox_key")),
        ProviderId::WalletGlobal => ("clientSecret", json!("not-the-sandbox-secret")),
        ProviderId::MorA => ("apiKey", json!("creem_not_the_sandbox_key")),
        ProviderId::MorB => ("apiKey", json!("not_the_sandbox_key")),
        ProviderId::MorC => ("privateKey", other_key),
    }
}

#[tokio::test]
async fn every_gateway_checks_its_credentials_against_the_sandbox_in_test_mode() {
    let sandbox = serve_sandbox().await;
    for provider in ProviderId::ALL {
        let check = gateway(provider, sandbox_settings(&sandbox, provider))
            .check_credentials()
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        // Stripe and Creem say the mode in their answers, Waffo's `mode` setting says it; the
        // others' tables point at the sandbox rather than at a provider's test host, and WeChat
        // Pay has no test mode.
        let expected = match provider {
            ProviderId::CardGateway | ProviderId::MorA | ProviderId::MorC => CredentialMode::Test,
            ProviderId::WalletQr
            | ProviderId::WalletWeb
            | ProviderId::WalletGlobal
            | ProviderId::MorB => CredentialMode::Live,
        };
        assert_eq!(check.mode, expected, "{provider}: {check:?}");
        assert!(!check.detail.is_empty(), "{provider}");
    }
}

#[tokio::test]
async fn the_sandbox_refuses_a_wrong_key_secret_or_signature_as_each_provider_does() {
    let sandbox = serve_sandbox().await;
    for provider in ProviderId::ALL {
        let (field, wrong) = wrong_credential(provider);
        let mut table = sandbox_settings(&sandbox, provider);
        table[field] = wrong.clone();
        let check = gateway(provider, table).check_credentials().await;
        let Err(GatewayError::Rejected(why)) = check else {
            panic!("{provider}: expected a refusal, got {check:?}");
        };
        if let Some(wrong) = wrong.as_str() {
            assert!(!why.contains(wrong), "{provider}: {why}");
        }
    }
}

#[tokio::test]
async fn waffo_pancakes_check_refuses_a_store_that_is_not_the_merchants() {
    let sandbox = serve_sandbox().await;
    let mut table = sandbox_settings(&sandbox, ProviderId::MorC);
    table["storeId"] = json!("STO_someoneElse000000000000");
    let check = gateway(ProviderId::MorC, table).check_credentials().await;
    assert!(
        matches!(&check, Err(GatewayError::Rejected(why)) if why.contains("storeId")),
        "{check:?}"
    );
}

#[tokio::test]
async fn a_sandbox_that_is_not_there_is_unreachable_for_every_gateway() {
    let sandbox = Sandbox::new("http://127.0.0.1:9", Arc::new(SystemClock));
    for provider in ProviderId::ALL {
        let check = gateway(provider, sandbox_settings(&sandbox, provider))
            .check_credentials()
            .await;
        assert!(
            matches!(check, Err(GatewayError::Unreachable(_))),
            "{provider}: {check:?}"
        );
    }
}
