//! A small client for the reliability suite: the HTTP calls its tests make, against an in-process
//! app or a `tally serve` process alike, and the ledger checks every test ends with.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// The password of every account the suite creates.
pub const PASSWORD: &str = "correct horse battery";
/// The longest any single request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest page the transaction list serves.
const PAGE_LIMIT: u32 = 100;
/// The most pages read of one ledger (a bound: 100 000 transactions).
const MAX_PAGES: u32 = 1_000;
/// How often a state is polled before a test gives up (100 ms apart).
const MAX_POLLS: u32 = 150;

/// Makes each initiation's idempotency key new.
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// One answer: status, body (JSON, or the text as a JSON string), and the headers tests read.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub content_type: String,
    pub replayed: bool,
}

impl Reply {
    /// Whether this is an RFC 9457 problem with `code`.
    pub fn is_problem(&self, code: &str) -> bool {
        self.content_type.starts_with("application/problem+json") && self.body["code"] == code
    }

    /// The problem code, if this is a problem.
    pub fn problem_code(&self) -> Option<&str> {
        self.content_type
            .starts_with("application/problem+json")
            .then(|| self.body["code"].as_str())
            .flatten()
    }
}

/// A signed-in account.
#[derive(Debug, Clone)]
pub struct Account {
    pub token: String,
    pub user_id: String,
}

/// The HTTP API of one Tally (or of the load balancer in front of several).
#[derive(Debug, Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
}

/// A client with the suite's timeout, no redirects, and `pool` idle connections per host.
pub fn client(pool: usize) -> reqwest::Client {
    gateways::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(pool)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client")
}

impl Api {
    pub fn new(base: &str) -> Self {
        Self {
            client: client(64),
            base: base.trim_end_matches('/').to_owned(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Send `request` and read the answer; `Err` only for transport failures and timeouts.
    pub async fn try_send(&self, request: reqwest::RequestBuilder) -> Result<Reply, String> {
        let response = request.send().await.map_err(|e| error_chain(&e))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let content_type = header("content-type");
        let replayed = header("idempotency-replayed") == "true";
        let text = response.text().await.map_err(|e| error_chain(&e))?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Reply {
            status,
            body,
            content_type,
            replayed,
        })
    }

    /// Send `request`; a transport failure fails the test.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        self.try_send(request)
            .await
            .unwrap_or_else(|e| panic!("request to {} failed: {e}", self.base))
    }

    pub async fn get(&self, auth: &str, path: &str) -> Reply {
        self.send(self.client.get(self.url(path)).bearer_auth(auth))
            .await
    }

    pub async fn post(&self, auth: &str, path: &str, body: &Value, key: Option<&str>) -> Reply {
        let mut request = self.client.post(self.url(path)).json(body);
        if !auth.is_empty() {
            request = request.bearer_auth(auth);
        }
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        self.send(request).await
    }

    pub async fn register(&self, email: &str) -> Account {
        let reply = self
            .post(
                "",
                "/api/auth/register",
                &json!({"email": email, "password": PASSWORD}),
                None,
            )
            .await;
        assert_eq!(reply.status, 201, "register {email}: {reply:?}");
        account(&reply.body)
    }

    pub async fn login(&self, email: &str) -> Account {
        let reply = self
            .post(
                "",
                "/api/auth/login",
                &json!({"email": email, "password": PASSWORD}),
                None,
            )
            .await;
        assert_eq!(reply.status, 200, "login {email}: {reply:?}");
        account(&reply.body)
    }

    /// A service API key that may spend and read any user's credits (`admin` is an admin's
    /// session token).
    pub async fn create_api_key(&self, admin: &str) -> String {
        let reply = self
            .post(
                admin,
                "/api/admin/api-keys",
                &json!({"name": "reliability", "scopes": ["credits:consume", "credits:read"]}),
                None,
            )
            .await;
        assert_eq!(reply.status, 201, "api key: {reply:?}");
        reply.body["secret"].as_str().expect("secret").to_owned()
    }

    /// Start buying `plan`; returns the order id.
    pub async fn initiate(&self, token: &str, plan: &str, provider: &str) -> String {
        let body = json!({"planId": plan, "provider": provider});
        let key = format!("buy-{plan}-{}", NEXT_KEY.fetch_add(1, Ordering::Relaxed));
        let reply = self
            .post(token, "/api/payment/initiate", &body, Some(&key))
            .await;
        assert_eq!(reply.status, 201, "initiate {plan}: {reply:?}");
        // The buyer's browser opens the checkout; Alipay's page pay starts the trade only then.
        if let Some(url) = reply.body["paymentUrl"].as_str() {
            let page = self.send(self.client.get(url)).await;
            assert!(page.status < 400, "checkout page of {plan}: {page:?}");
        }
        reply.body["orderId"].as_str().expect("order id").to_owned()
    }

    /// Buy `plan` through `provider`, pay it on the sandbox's checkout and wait until the order
    /// is paid (its credits granted); returns the order id.
    pub async fn buy_and_pay(&self, token: &str, plan: &str, provider: &str) -> String {
        let order = self.initiate(token, plan, provider).await;
        self.pay(&order).await;
        self.wait_for_status(token, &order, "paid").await;
        order
    }

    pub async fn order(&self, token: &str, order_id: &str) -> Reply {
        self.get(token, &format!("/api/payment/query/{order_id}"))
            .await
    }

    pub async fn order_status(&self, token: &str, order_id: &str) -> String {
        let reply = self.order(token, order_id).await;
        assert_eq!(reply.status, 200, "order {order_id}: {reply:?}");
        reply.body["status"].as_str().unwrap_or_default().to_owned()
    }

    /// Wait until the order is `status` (at most 15 s).
    pub async fn wait_for_status(&self, token: &str, order_id: &str, status: &str) {
        let mut last = String::new();
        for _ in 0..MAX_POLLS {
            last = self.order_status(token, order_id).await;
            if last == status {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("order {order_id} never became {status}: it is {last}");
    }

    /// The available balance in hundredths; `auth` is the owner's token, or an API key with
    /// `user_id` set.
    pub async fn balance(&self, auth: &str, user_id: Option<&str>) -> i64 {
        let path = user_id.map_or_else(
            || "/api/credits/balance".to_owned(),
            |u| format!("/api/credits/balance?userId={u}"),
        );
        let reply = self.get(auth, &path).await;
        assert_eq!(reply.status, 200, "balance: {reply:?}");
        reply.body["balanceHundredths"].as_i64().expect("balance")
    }

    /// Every credit transaction of the account, oldest first.
    pub async fn ledger(&self, auth: &str, user_id: Option<&str>) -> Vec<Value> {
        let mut items = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut path = format!("/api/credits/transactions?page={page}&limit={PAGE_LIMIT}");
            if let Some(user) = user_id {
                path.push_str(&format!("&userId={user}"));
            }
            let reply = self.get(auth, &path).await;
            assert_eq!(reply.status, 200, "transactions: {reply:?}");
            let batch = reply.body["items"].as_array().cloned().unwrap_or_default();
            let done = u64::from(page) >= reply.body["totalPages"].as_u64().unwrap_or(0);
            items.extend(batch);
            if done {
                break;
            }
        }
        items.sort_by_key(|t| t["id"].as_i64());
        items
    }

    /// The sandbox's payment for our order.
    pub async fn sandbox_payment(&self, order_id: &str) -> Value {
        let request = self
            .client
            .get(self.url("/sandbox/api/payments"))
            .query(&[("orderId", order_id)]);
        let reply = self.send(request).await;
        reply.body[0].clone()
    }

    /// Press `action` (`pay`, `decline`, `refund`, `redeliver`) on the sandbox's payment.
    pub async fn sandbox_action(&self, payment_id: &str, action: &str, body: &Value) -> Reply {
        let path = format!("/sandbox/api/payments/{payment_id}/{action}");
        self.send(self.client.post(self.url(&path)).json(body))
            .await
    }

    /// Pay our order in the sandbox: the provider's webhooks go out before this returns.
    pub async fn pay(&self, order_id: &str) {
        let payment = self.sandbox_payment(order_id).await;
        let id = payment["id"].as_str().expect("sandbox payment").to_owned();
        let reply = self.sandbox_action(&id, "pay", &json!({})).await;
        assert_eq!(reply.status, 200, "sandbox pay {order_id}: {reply:?}");
    }

    /// Spend credits for one use of `feature`.
    pub async fn try_consume(
        &self,
        api_key: &str,
        user_id: &str,
        feature: &str,
        key: &str,
    ) -> Result<Reply, String> {
        let request = self
            .client
            .post(self.url("/api/credits/consume"))
            .bearer_auth(api_key)
            .header("idempotency-key", key)
            .json(&json!({"userId": user_id, "feature": feature}));
        self.try_send(request).await
    }

    /// `/metrics`, as `name{labels} value` lines.
    pub async fn metrics(&self) -> String {
        let reply = self.send(self.client.get(self.url("/metrics"))).await;
        reply.body.as_str().unwrap_or_default().to_owned()
    }
}

/// `error: cause: cause of cause`, so that a refused connection can be told from a cut one.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn account(body: &Value) -> Account {
    Account {
        token: body["token"].as_str().expect("token").to_owned(),
        user_id: body["user"]["id"].as_str().expect("user id").to_owned(),
    }
}

/// The value of counter `name` with every label in `labels`, summed over other labels.
pub fn counter(metrics: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .filter(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// What a ledger says, checked against the balance (invariants 1 and 2 of CORRECTNESS.md): every
/// transaction's `balanceAfter` is the running sum of amounts, never negative, and the last
/// equals the balance.
pub fn assert_ledger_explains_balance(ledger: &[Value], balance_hundredths: i64) {
    assert!(
        balance_hundredths >= 0,
        "negative balance {balance_hundredths}"
    );
    let mut running = 0_i64;
    for transaction in ledger {
        running += transaction["amountHundredths"].as_i64().expect("amount");
        let after = transaction["balanceAfterHundredths"]
            .as_i64()
            .expect("after");
        assert!(after >= 0, "a negative balance after {transaction}");
        assert_eq!(
            after, running,
            "balanceAfter is not the running sum at {transaction}"
        );
    }
    assert_eq!(
        running, balance_hundredths,
        "the ledger sums to the balance"
    );
}

/// The ids of the consumption transactions.
pub fn consumption_ids(ledger: &[Value]) -> std::collections::BTreeSet<i64> {
    ledger
        .iter()
        .filter(|t| t["type"] == "consumption")
        .filter_map(|t| t["id"].as_i64())
        .collect()
}

/// How many transactions of each type.
pub fn types(ledger: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for transaction in ledger {
        let kind = transaction["type"].as_str().unwrap_or("?").to_owned();
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}
