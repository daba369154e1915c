//! `tally check-config` and the providers' credentials: `--online` calls each live provider once
//! (here: a sandbox on a free port standing in for all seven) and reports what answered, and
//! production refuses every provider's test-mode credentials, naming provider and setting.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use bootstrap::seams::SystemClock;
use domain::ProviderId;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Route, Server};
use sandbox::{CREDENTIALS, Sandbox};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The sandbox's settings table of `provider`, its API at `base` (`{base}/sandbox/<id>`).
fn sandbox_table(provider: ProviderId, base: &str) -> Value {
    let api = format!("{base}/sandbox/{provider}");
    match provider {
        ProviderId::WalletQr => sandbox::wallet_qr::gateway_settings(&api),
        ProviderId::WalletWeb => sandbox::wallet_web::gateway_settings(&api),
        ProviderId::CardGateway => sandbox::card_gateway::gateway_settings(&api),
        ProviderId::WalletGlobal => sandbox::wallet_global::gateway_settings(&api),
        ProviderId::MorA => sandbox::mor_a::gateway_settings(&api),
        ProviderId::MorB => sandbox::mor_b::gateway_settings(&api),
        ProviderId::MorC => sandbox::mor_c::gateway_settings(&api),
    }
}

/// A config directory with the shipped catalog and a `tally.toml` of `tables`.
fn config_with(tables: &[(ProviderId, Value)]) -> TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    for file in ["payment.toml", "credits.toml"] {
        fs::copy(shipped.join(file), dir.path().join(file)).expect("catalog copied");
    }
    let mut providers = toml::Table::new();
    for (provider, table) in tables {
        let table = toml::Table::try_from(table).expect("a settings table");
        providers.insert(provider.as_str().to_owned(), table.into());
    }
    let mut root = toml::Table::new();
    root.insert("providers".to_owned(), providers.into());
    fs::write(
        dir.path().join("tally.toml"),
        toml::to_string(&root).expect("TOML"),
    )
    .expect("tally.toml written");
    dir
}

/// `tally check-config --config dir` with `args` and `env` (APP_ENV and APP_BASE_URL from `env`
/// only).
fn check_config(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("check-config")
        .arg("--config")
        .arg(dir)
        .args(args)
        .env_remove("APP_ENV")
        .env_remove("APP_BASE_URL")
        .envs(env.iter().copied())
        .output()
        .expect("tally runs")
}

/// The same, off the async runtime, so that the sandbox it calls keeps serving.
async fn check_config_online(dir: &Path, env: &[(&str, &str)]) -> Output {
    let dir = dir.to_owned();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        check_config(&dir, &["--online"], &env)
    })
    .await
    .expect("tally ran")
}

/// A sandbox served on a free port; its base URL.
async fn serve_sandbox() -> String {
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let base = format!(
        "http://{}",
        acceptor.local_addr()[0].as_socket_addr().unwrap()
    );
    let sandbox = Sandbox::new(&base, Arc::new(SystemClock));
    tokio::spawn(
        Server::new_with_acceptor(acceptor).run(Route::new().nest("/sandbox", sandbox.routes())),
    );
    base
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `online <id>: …` line of `provider`.
fn online_line(stdout: &str, provider: ProviderId) -> String {
    let prefix = format!("online {provider}: ");
    stdout
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {provider} in\n{stdout}"))
        .to_owned()
}

/// WeChat Pay needs an https notify URL whenever it is live.
const HTTPS_BASE: (&str, &str) = ("APP_BASE_URL", "https://pay.example.com");

#[tokio::test(flavor = "multi_thread")]
async fn online_calls_every_live_provider_once_and_reports_each_accepted_with_its_mode() {
    let base = serve_sandbox().await;
    let tables: Vec<(ProviderId, Value)> = ProviderId::ALL
        .iter()
        .map(|&p| (p, sandbox_table(p, &base)))
        .collect();
    let dir = config_with(&tables);
    let output = check_config_online(dir.path(), &[HTTPS_BASE]).await;
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains("providers live: wallet_qr, wallet_web, card_gateway, wallet_global, mor_a, mor_b, mor_c; sandboxed: none"),
        "{stdout}"
    );
    for provider in ProviderId::ALL {
        let line = online_line(&stdout, provider);
        assert!(line.contains(": accepted, "), "{line}");
    }
    // Stripe's balance says test mode; WeChat Pay has none.
    assert!(
        online_line(&stdout, ProviderId::CardGateway).contains("accepted, test mode"),
        "{stdout}"
    );
    assert!(
        online_line(&stdout, ProviderId::WalletQr).contains("accepted, live mode"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn online_fails_naming_refused_and_unreachable_providers_without_their_secrets() {
    let base = serve_sandbox().await;
    let mut card = sandbox_table(ProviderId::CardGateway, &base);
    card["secretKey"] = json!("sk_test_wrongKey0000000000");
    let mut paypal = sandbox_table(ProviderId::WalletGlobal, &base);
    paypal["clientSecret"] = json!("not-the-secret-0000");
    let dodo = sandbox_table(ProviderId::MorB, "http://127.0.0.1:9");
    let creem = sandbox_table(ProviderId::MorA, &base);
    let dir = config_with(&[
        (ProviderId::CardGateway, card),
        (ProviderId::WalletGlobal, paypal),
        (ProviderId::MorB, dodo),
        (ProviderId::MorA, creem),
    ]);
    let output = check_config_online(dir.path(), &[]).await;
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    let card = online_line(&stdout, ProviderId::CardGateway);
    assert!(
        card.contains("credentials refused: HTTP 401") && card.contains("Invalid API Key"),
        "{card}"
    );
    let paypal = online_line(&stdout, ProviderId::WalletGlobal);
    assert!(
        paypal.contains("credentials refused") && paypal.contains("invalid_client"),
        "{paypal}"
    );
    let dodo = online_line(&stdout, ProviderId::MorB);
    assert!(dodo.contains("unreachable"), "{dodo}");
    assert!(
        online_line(&stdout, ProviderId::MorA).contains("accepted"),
        "{stdout}"
    );
    assert!(
        stderr.contains("3 of 4 live providers") && stderr.contains("card_gateway"),
        "{stderr}"
    );
    for secret in [
        "sk_test_wrongKey0000000000",
        "not-the-secret-0000",
        CREDENTIALS.api_key,
    ] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} leaked"
        );
    }
}

#[test]
fn without_online_no_provider_is_called_and_with_no_live_provider_online_says_so() {
    // An unreachable live provider does not matter without --online.
    let dir = config_with(&[(
        ProviderId::MorB,
        sandbox_table(ProviderId::MorB, "http://127.0.0.1:9"),
    )]);
    let offline = check_config(dir.path(), &[], &[]);
    assert!(offline.status.success(), "{}", text(&offline.stderr));
    assert!(
        !text(&offline.stdout).contains("online "),
        "{}",
        text(&offline.stdout)
    );

    let sandboxed = config_with(&[]);
    let online = check_config(sandboxed.path(), &["--online"], &[]);
    assert!(online.status.success(), "{}", text(&online.stderr));
    assert!(
        text(&online.stdout).contains("online: no live provider to call"),
        "{}",
        text(&online.stdout)
    );
}

/// Production settings: APP_ENV and an https base URL.
const PRODUCTION: [(&str, &str); 2] = [("APP_ENV", "production"), HTTPS_BASE];

#[test]
fn production_refuses_each_providers_test_mode_credentials_naming_provider_and_setting() {
    let api = "https://api.example.com";
    let table = |provider| sandbox_table(provider, api);
    let edit = |provider, edits: &[(&str, Value)]| {
        let mut table = table(provider);
        for (field, value) in edits {
            match value {
                Value::Null => {
                    table.as_object_mut().unwrap().remove(*field);
                }
                value => table[*field] = value.clone(),
            }
        }
        table
    };
    let cases = [
        (
            ProviderId::CardGateway,
            edit(
                ProviderId::CardGateway,
                &[("secretKey", json!("sk_test_51Abc"))],
            ),
            "secretKey",
        ),
        (
            ProviderId::CardGateway,
            edit(
                ProviderId::CardGateway,
                &[("secretKey", json!("rk_test_51Abc"))],
            ),
            "secretKey",
        ),
        (
            ProviderId::WalletGlobal,
            edit(
                ProviderId::WalletGlobal,
                &[("sandbox", json!(true)), ("baseUrl", Value::Null)],
            ),
            "sandbox",
        ),
        (
            ProviderId::MorA,
            edit(ProviderId::MorA, &[("testMode", json!(true))]),
            "testMode",
        ),
        (
            ProviderId::MorA,
            edit(ProviderId::MorA, &[("apiKey", json!("creem_test_abc"))]),
            "apiKey",
        ),
        (
            ProviderId::MorB,
            edit(ProviderId::MorB, &[("testMode", json!(true))]),
            "testMode",
        ),
        (
            ProviderId::MorC,
            edit(ProviderId::MorC, &[("mode", json!("test"))]),
            "mode",
        ),
        (
            ProviderId::WalletWeb,
            edit(
                ProviderId::WalletWeb,
                &[("baseUrl", json!("https://openapi-sandbox.dl.alipaydev.com"))],
            ),
            "baseUrl",
        ),
    ];
    for (provider, table, field) in cases {
        let dir = config_with(&[(provider, table.clone())]);
        let refused = check_config(dir.path(), &[], &PRODUCTION);
        let stderr = text(&refused.stderr);
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{provider}.{field}: {stderr}"
        );
        let named = format!("providers.{provider}.{field} ");
        assert!(
            stderr.contains("test-mode credentials") && stderr.contains(&named),
            "{named}: {stderr}"
        );
        // Development runs on test-mode credentials.
        let dev = check_config(dir.path(), &[], &[HTTPS_BASE]);
        assert!(
            dev.status.success(),
            "{provider}.{field} in development: {}",
            text(&dev.stderr)
        );
    }
}

#[test]
fn production_takes_live_credentials_and_wechat_pay_which_has_no_test_mode() {
    let api = "https://api.example.com";
    let mut card = sandbox_table(ProviderId::CardGateway, api);
    card["secretKey"] = json!("sk_live_51Abc");
    let mut creem = sandbox_table(ProviderId::MorA, api);
    creem["apiKey"] = json!("creem_live_abc");
    let mut waffo = sandbox_table(ProviderId::MorC, api);
    waffo["mode"] = json!("prod");
    let tables = [
        (ProviderId::CardGateway, card),
        (ProviderId::MorA, creem),
        (ProviderId::MorC, waffo),
        (ProviderId::MorB, sandbox_table(ProviderId::MorB, api)),
        (
            ProviderId::WalletGlobal,
            sandbox_table(ProviderId::WalletGlobal, api),
        ),
        (
            ProviderId::WalletWeb,
            sandbox_table(ProviderId::WalletWeb, api),
        ),
        (
            ProviderId::WalletQr,
            sandbox_table(ProviderId::WalletQr, api),
        ),
    ];
    let dir = config_with(&tables);
    let output = check_config(dir.path(), &[], &PRODUCTION);
    let stderr = text(&output.stderr);
    assert!(
        !stderr.contains("test-mode credentials"),
        "live credentials refused: {stderr}"
    );
}
