//! The service's HTTP API as the benchmark calls it (see `docs/openapi.json`).
//!
//! One `reqwest` client with keep-alive connections (one per concurrent worker), `TCP_NODELAY`
//! and a 10 s timeout on every request. Calls that would hit a per-client rate limit
//! (registration, sign-in, initiate) carry an `X-Forwarded-For` address of their own, which the
//! benchmark's `tally.toml` tells the service to trust.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::{Client, Response};
use serde_json::{Value, json};

/// The timeout of every request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of one running service.
#[derive(Debug, Clone)]
pub struct Api {
    /// The shared connection pool.
    pub http: Client,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

/// Fail unless the answer has the status `expected`; the body says why.
async fn expect(answer: Response, expected: u16, what: &str) -> anyhow::Result<Value> {
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap_or_default();
    if status != expected {
        bail!(
            "{what}: HTTP {status}: {}",
            text.chars().take(300).collect::<String>()
        );
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn text(value: &Value, field: &str) -> anyhow::Result<String> {
    value[field]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("the answer has no {field}: {value}"))
}

/// How many rate-limited calls were made so far (each gets its own client address).
static CLIENTS: AtomicU64 = AtomicU64::new(1);

/// A client address of its own for a rate-limited call (`X-Forwarded-For`).
fn forwarded() -> String {
    let n = CLIENTS.fetch_add(1, Ordering::Relaxed);
    format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

impl Api {
    /// A client of the service at `base`.
    ///
    /// # Errors
    /// The client cannot be built.
    pub fn new(base: &str) -> anyhow::Result<Self> {
        let http = Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1024)
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            base: base.to_owned(),
        })
    }

    /// Sign in: the session token.
    ///
    /// # Errors
    /// Refused, or the service is unreachable.
    pub async fn login(&self, email: &str, password: &str) -> anyhow::Result<String> {
        let answer = self
            .http
            .post(format!("{}/api/auth/login", self.base))
            .header("x-forwarded-for", forwarded())
            .json(&json!({ "email": email, "password": password }))
            .send()
            .await?;
        text(&expect(answer, 200, "login").await?, "token")
    }

    /// Register: `(session token, user id)`.
    ///
    /// # Errors
    /// Refused, or the service is unreachable.
    pub async fn register(&self, email: &str, password: &str) -> anyhow::Result<(String, String)> {
        let answer = self
            .http
            .post(format!("{}/api/auth/register", self.base))
            .header("x-forwarded-for", forwarded())
            .json(&json!({ "email": email, "password": password }))
            .send()
            .await?;
        let session = expect(answer, 201, "register").await?;
        Ok((text(&session, "token")?, text(&session["user"], "id")?))
    }

    /// A service API key with scopes `credits:consume` and `billing:write` (spending and buying
    /// for a user), made by the administrator `admin_token`.
    ///
    /// # Errors
    /// Refused, or the service is unreachable.
    pub async fn create_api_key(&self, admin_token: &str) -> anyhow::Result<String> {
        let answer = self
            .http
            .post(format!("{}/api/admin/api-keys", self.base))
            .bearer_auth(admin_token)
            .json(&json!({ "name": "tally-bench", "scopes": ["credits:consume", "billing:write"] }))
            .send()
            .await?;
        text(&expect(answer, 201, "create API key").await?, "secret")
    }

    /// Start a payment of `plan` through `provider` for `user`, by the service API key
    /// `api_key` acting for them (`?userId=`, as a host app's backend does): the order id.
    ///
    /// # Errors
    /// Refused, or the service is unreachable.
    pub async fn initiate_for(
        &self,
        api_key: &str,
        user: &str,
        (plan, provider): (&str, &str),
        key: &str,
    ) -> anyhow::Result<String> {
        let answer = self
            .http
            .post(format!("{}/api/payment/initiate", self.base))
            .query(&[("userId", user)])
            .bearer_auth(api_key)
            .header("idempotency-key", key)
            .header("x-forwarded-for", forwarded())
            .json(&json!({ "planId": plan, "provider": provider }))
            .send()
            .await?;
        text(&expect(answer, 201, "initiate").await?, "orderId")
    }

    /// `POST /api/credits/consume` with a prepared JSON body; success is 201 and a fresh spend.
    ///
    /// # Errors
    /// Any other answer.
    pub async fn consume(&self, api_key: &str, body: &str, key: &str) -> anyhow::Result<()> {
        let answer = self
            .http
            .post(format!("{}/api/credits/consume", self.base))
            .bearer_auth(api_key)
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await?;
        let status = answer.status().as_u16();
        if status != 201 || answer.headers().contains_key("idempotency-replayed") {
            let body = answer.text().await.unwrap_or_default();
            bail!(
                "consume: HTTP {status}: {}",
                body.chars().take(200).collect::<String>()
            );
        }
        // Read the body so that the connection goes back to the pool.
        answer.bytes().await?;
        Ok(())
    }

    /// `GET path` (with a session token when given); success is a 200.
    ///
    /// # Errors
    /// Any other answer.
    pub async fn get_ok(&self, path: &str, token: Option<&str>) -> anyhow::Result<()> {
        let status = self.get_status(path, token).await?;
        if status != 200 {
            bail!("GET {path}: HTTP {status}");
        }
        Ok(())
    }

    /// `GET path`: its status, with the body read.
    ///
    /// # Errors
    /// The service is unreachable.
    pub async fn get_status(&self, path: &str, token: Option<&str>) -> anyhow::Result<u16> {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await?;
        let status = answer.status().as_u16();
        answer.bytes().await?;
        Ok(status)
    }

    /// `GET path` as JSON.
    ///
    /// # Errors
    /// Not a 200 with JSON.
    pub async fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let answer = self.http.get(format!("{}{path}", self.base)).send().await?;
        expect(answer, 200, path).await
    }

    /// POST `body` to `path` as the administrator `token`, expecting 201: the answer.
    ///
    /// # Errors
    /// Refused, or the service is unreachable.
    pub async fn post_json(&self, path: &str, token: &str, body: &Value) -> anyhow::Result<Value> {
        let answer = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .json(body)
            .send()
            .await?;
        expect(answer, 201, path).await
    }
}
