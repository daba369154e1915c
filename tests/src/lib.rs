//! Support for Tally's black-box tests: every test module compiles into the one `api` test
//! binary under `tests/api/`.
//!
//! [`spawn_app`] starts the real `tally` application on `127.0.0.1:0` with a fresh SQLite file,
//! the shipped catalog, and every provider on the sandbox, exactly as `tally serve` wires it;
//! tests talk to it over HTTP only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bootstrap::app::Application;
use bootstrap::settings::{self, Settings};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A running application and an HTTP client for it.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub address: String,
    /// A client without cookies; tests pass bearer tokens.
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    settings: Settings,
    clock: bootstrap::seams::AppClock,
    _dir: tempfile::TempDir,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The workspace's `config/` directory.
#[must_use]
pub fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config")
}

/// Settings for a test app: port 0, a fresh SQLite file in `dir`, a fast reconciler.
///
/// # Panics
/// When the shipped settings do not load (a test failure).
#[must_use]
pub fn test_settings(dir: &Path) -> Settings {
    let mut env = BTreeMap::new();
    env.insert("BIND_ADDR".to_owned(), "127.0.0.1:0".to_owned());
    env.insert(
        "DATABASE_URL".to_owned(),
        format!("sqlite://{}/tally.db", dir.display()),
    );
    let mut settings = settings::load(&config_dir(), &env).expect("shipped settings load");
    settings.reconciler.enabled = false;
    settings
}

/// Start the application with `settings` changed by `adjust`.
///
/// # Panics
/// When the application does not start (a test failure).
pub async fn spawn_app_with(adjust: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_app_from(&config_dir(), adjust).await
}

/// Start the application with the catalog of `catalog_dir` (`payment.toml` and `credits.toml`)
/// and the shipped settings changed by `adjust`.
///
/// # Panics
/// When the catalog does not load or the application does not start (a test failure).
pub async fn spawn_app_from(catalog_dir: &Path, adjust: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(dir.path());
    adjust(&mut settings);
    let catalog = bootstrap::catalog::load(catalog_dir).expect("the catalog loads");
    let app = Application::build(settings.clone(), catalog)
        .await
        .expect("application builds");
    let address = app.base_url().to_owned();
    let clock = app.clock();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    TestApp {
        address,
        client,
        stop: Some(stop),
        settings,
        clock,
        _dir: dir,
    }
}

/// A catalog directory: the shipped `payment.toml` with the plan tables of `extra_plans`
/// appended, and the shipped `credits.toml` (for plans the shipped catalog does not sell).
///
/// # Panics
/// When the files cannot be copied or written (a test failure).
#[must_use]
pub fn catalog_with(extra_plans: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let shipped = std::fs::read_to_string(config_dir().join("payment.toml")).expect("payment.toml");
    std::fs::write(
        dir.path().join("payment.toml"),
        format!("{shipped}\n{extra_plans}"),
    )
    .expect("write payment.toml");
    std::fs::copy(
        config_dir().join("credits.toml"),
        dir.path().join("credits.toml"),
    )
    .expect("copy credits.toml");
    dir
}

/// Start the application as `tally serve` would, on port 0.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// The password of the administrator [`spawn_app_with_admin`] creates.
pub const ADMIN_PASSWORD: &str = "correct horse battery";

/// Start the application with `settings` changed by `adjust` and an administrator
/// (`admin@example.com`, made as an operator would, straight in the store): the app and the
/// administrator's session token.
///
/// # Panics
/// When the application does not start or the administrator cannot sign in (a test failure).
pub async fn spawn_app_with_admin(adjust: impl FnOnce(&mut Settings)) -> (TestApp, String) {
    let mut settings = None;
    let app = spawn_app_with(|s| {
        adjust(s);
        settings = Some(s.clone());
    })
    .await;
    let store = bootstrap::app::connect_store(&settings.expect("settings"))
        .await
        .expect("store");
    let role = application::accounts::Role::Admin;
    bootstrap::app::create_user(&store, "admin@example.com", ADMIN_PASSWORD.into(), role)
        .await
        .expect("admin");
    let body = json!({"email": "admin@example.com", "password": ADMIN_PASSWORD});
    let (status, signed_in) = app.post("", "/api/auth/login", &body, None).await;
    assert_eq!(status, 200, "{signed_in}");
    let token = signed_in["token"].as_str().expect("token").to_owned();
    (app, token)
}

impl TestApp {
    /// `address` + `path`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// Allow the user signed in with `token` the hidden plan `plan`, as an operator would (an
    /// administrator made straight in the store, then `PUT
    /// /api/admin/users/{id}/plan-allowances/{plan}`): a customer kept on a legacy price.
    ///
    /// # Panics
    /// When any step fails (a test failure).
    pub async fn allow_plan(&self, token: &str, plan: &str) {
        let (status, me) = self.get(token, "/api/auth/me").await;
        assert_eq!(status, 200, "{me}");
        let user = me["id"].as_str().expect("user id").to_owned();
        let email = "plan-allowances@example.com";
        let store = bootstrap::app::connect_store(&self.settings)
            .await
            .expect("store");
        let role = application::accounts::Role::Admin;
        // Made once per app; a second call finds it made.
        let _ = bootstrap::app::create_user(&store, email, ADMIN_PASSWORD.into(), role).await;
        let body = json!({"email": email, "password": ADMIN_PASSWORD});
        let (status, signed_in) = self.post("", "/api/auth/login", &body, None).await;
        assert_eq!(status, 200, "{signed_in}");
        let admin = signed_in["token"].as_str().expect("token");
        let path = format!("/api/admin/users/{user}/plan-allowances/{plan}");
        let response = (self.client.put(self.url(&path)))
            .bearer_auth(admin)
            .send()
            .await
            .expect("allow plan");
        assert_eq!(response.status(), 200, "allow {plan}");
    }

    /// Register a user and return its bearer token.
    ///
    /// # Panics
    /// When registration fails.
    pub async fn register(&self, email: &str) -> String {
        let response = self
            .client
            .post(self.url("/api/auth/register"))
            .json(&json!({"email": email, "password": "correct horse battery"}))
            .send()
            .await
            .expect("register");
        assert_eq!(response.status(), 201, "register");
        let body: Value = response.json().await.expect("json");
        body["token"].as_str().expect("token").to_owned()
    }

    /// A registered user: its id and session token.
    ///
    /// # Panics
    /// When registration fails.
    pub async fn user(&self, email: &str) -> (String, String) {
        let token = self.register(email).await;
        let (status, me) = self.get(&token, "/api/auth/me").await;
        assert_eq!(status, 200, "{me}");
        (me["id"].as_str().expect("id").to_owned(), token)
    }

    /// A new service API key with `scopes`, made by the administrator `admin`: its secret.
    ///
    /// # Panics
    /// When the key is not created.
    pub async fn api_key(&self, admin: &str, scopes: &[&str]) -> String {
        let body = json!({"name": "host backend", "scopes": scopes});
        let (status, key) = self.post(admin, "/api/admin/api-keys", &body, None).await;
        assert_eq!(status, 201, "{key}");
        key["secret"].as_str().expect("secret").to_owned()
    }

    /// Move the application's clock forward by `ms` (to cross a window's reset).
    pub fn advance_clock(&self, ms: i64) {
        self.clock.advance(ms);
    }

    /// GET `path` with a bearer token, as JSON.
    ///
    /// # Panics
    /// On transport errors.
    pub async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("get");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// DELETE `path` with a bearer token; the body as JSON (`Null` when there is none).
    ///
    /// # Panics
    /// On transport errors.
    pub async fn delete(&self, token: &str, path: &str) -> (u16, Value) {
        let response = self
            .client
            .delete(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("delete");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// POST JSON to `path` with a bearer token and an optional idempotency key.
    ///
    /// # Panics
    /// On transport errors.
    pub async fn post(
        &self,
        token: &str,
        path: &str,
        body: &Value,
        key: Option<&str>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .post(self.url(path))
            .bearer_auth(token)
            .json(body);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await.expect("post");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Start a payment as a well-behaved client: on 429 it waits as `Retry-After` says, then
    /// retries (initiation is rate limited per client). Returns the status and body.
    ///
    /// # Panics
    /// On transport errors.
    pub async fn initiate(
        &self,
        token: &str,
        plan: &str,
        provider: &str,
        key: Option<&str>,
    ) -> (u16, Value) {
        let body = json!({"planId": plan, "provider": provider});
        let mut answer = self.post(token, "/api/payment/initiate", &body, key).await;
        for _ in 0..10 {
            if answer.0 != 429 {
                break;
            }
            let wait_s = answer.1["retryAfterSeconds"].as_u64().unwrap_or(1).min(10);
            tokio::time::sleep(Duration::from_secs(wait_s)).await;
            answer = self.post(token, "/api/payment/initiate", &body, key).await;
        }
        answer
    }

    /// Start a purchase (under `key`, when given) and open its checkout as the buyer's browser
    /// would (Alipay creates its trade only then). Returns the order id and the initiate answer.
    ///
    /// # Panics
    /// When initiation is not 201 or the checkout does not open.
    pub async fn open_checkout(
        &self,
        token: &str,
        plan: &str,
        provider: &str,
        key: Option<&str>,
    ) -> (String, Value) {
        let (status, started) = self.initiate(token, plan, provider, key).await;
        assert_eq!(status, 201, "initiate {plan}: {started}");
        let opened = self
            .client
            .get(checkout_url(&started))
            .send()
            .await
            .expect("open checkout");
        assert!(
            opened.status().is_success() || opened.status().is_redirection(),
            "{plan}: {}",
            opened.status()
        );
        let order = started["orderId"].as_str().expect("order id").to_owned();
        (order, started)
    }

    /// The signed-in user's balance, in hundredths.
    ///
    /// # Panics
    /// When the answer has no balance.
    pub async fn balance_hundredths(&self, token: &str) -> i64 {
        self.get(token, "/api/credits/balance").await.1["balanceHundredths"]
            .as_i64()
            .expect("balance")
    }

    /// The sandbox payment of our order `order_id`.
    ///
    /// # Panics
    /// When the sandbox does not know the order.
    pub async fn sandbox_payment(&self, order_id: &str) -> Value {
        let response = self
            .client
            .get(self.url("/sandbox/api/payments"))
            .query(&[("orderId", order_id)])
            .send()
            .await
            .expect("sandbox");
        let payments: Value = response.json().await.expect("json");
        payments
            .as_array()
            .and_then(|a| a.first())
            .cloned()
            .unwrap_or_else(|| panic!("no sandbox payment for {order_id}"))
    }

    /// Press a button in the sandbox for our order: `pay`, `decline`, `cancel` or `refund`.
    ///
    /// # Panics
    /// When the sandbox refuses.
    pub async fn sandbox_action(&self, order_id: &str, action: &str, body: &Value) -> Value {
        let payment = self.sandbox_payment(order_id).await;
        let id = payment["id"].as_str().expect("payment id");
        let response = self
            .client
            .post(self.url(&format!("/sandbox/api/payments/{id}/{action}")))
            .json(body)
            .send()
            .await
            .expect("sandbox action");
        assert!(
            response.status().is_success(),
            "sandbox {action}: {}",
            response.status()
        );
        response.json().await.expect("json")
    }

    /// Wait until the order has `status`, polling the query endpoint (at most 10 s).
    ///
    /// # Panics
    /// When it does not get there.
    pub async fn wait_for_status(&self, token: &str, order_id: &str, status: &str) -> Value {
        let mut last = Value::Null;
        for _ in 0..100 {
            let (_, order) = self
                .get(token, &format!("/api/payment/query/{order_id}"))
                .await;
            if order["status"] == status {
                return order;
            }
            last = order;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("order {order_id} never became {status}: {last}");
    }
}

/// Where an initiate answer sends the buyer: the hosted checkout, or the QR code's page.
#[must_use]
pub fn checkout_url(started: &Value) -> &str {
    started["paymentUrl"]
        .as_str()
        .or(started["qrCodeUrl"].as_str())
        .unwrap_or_default()
}
