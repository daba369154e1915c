//! Webhooks over HTTP with real signatures: `card_gateway` (Stripe's HMAC-SHA256
//! `Stripe-Signature`) and `wallet_qr` (WeChat Pay APIv3: RSA-SHA256 signature over an
//! AES-256-GCM sealed resource).
//!
//! For each point, pending orders are created through `POST /api/payment/initiate` (credits
//! packs `credits_card_500` and `credits_cn_qr_1000`), which makes the service's sandbox open a
//! checkout for each. The benchmark reads those checkouts back (`GET /sandbox/api/payments`) and
//! has its own copy of the sandbox simulators sign the "payment succeeded" notification for
//! each, exactly as the provider would (signing happens before the clock starts). The signed
//! webhooks are then posted to `/api/payment/webhook/<provider>` by N concurrent clients.
//! Afterwards every order must be paid and granted exactly once, also after a second delivery
//! of some of them, and the buyer's ledger must add up.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use domain::{Currency, ProviderId};
use sandbox::{Sandbox, SimEvent, SimKind, SimPayment, SimStatus, SimWebhook};
use serde::Serialize;
use serde_json::Value;

use crate::api::Api;
use crate::database::Pool;
use crate::load;
use crate::stats::Summary;

/// The credits pack bought through each benchmarked provider.
pub const PROVIDERS: [(&str, &str); 2] = [
    ("card_gateway", "credits_card_500"),
    ("wallet_qr", "credits_cn_qr_1000"),
];
/// Concurrent clients of the webhook points.
pub const CLIENTS: [usize; 2] = [8, 32];
/// Concurrent initiate calls while preparing orders.
const SETUP_CLIENTS: usize = 8;
/// Webhooks delivered a second time per point, to check that a duplicate grants nothing.
const DUPLICATES: usize = 20;

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct WebhookRow {
    /// `per_transaction` or `grouped`.
    pub mode: String,
    /// Provider id.
    pub provider: String,
    /// Concurrent clients.
    pub clients: usize,
    /// What it came to.
    pub summary: Summary,
}

/// What the database says after the webhooks of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// `per_transaction` or `grouped`.
    pub mode: String,
    /// Webhooks answered with a 2xx (first deliveries).
    pub delivered: u64,
    /// Orders of the buyer now paid.
    pub paid_orders: i64,
    /// Order grants of the buyer.
    pub grants: i64,
    /// Distinct orders among those grants.
    pub granted_orders: i64,
    /// Webhooks delivered a second time.
    pub redelivered: usize,
    /// Paid = grants = distinct = delivered, also after the second deliveries.
    pub granted_once: bool,
    /// The buyer's balance equals the sum of its transactions.
    pub ledger_consistent: bool,
}

/// Create `count` pending orders of `plan` through `provider` for the buyer `token`.
async fn create_orders(
    api: &Api,
    token: &str,
    (provider, plan): (&str, &str),
    count: usize,
    tag: &str,
) -> anyhow::Result<Vec<String>> {
    let ids = Arc::new(Mutex::new(Vec::with_capacity(count)));
    let (api2, token, tag, ids2) = (
        api.clone(),
        Arc::new(token.to_owned()),
        Arc::new(format!("{tag}-{provider}")),
        ids.clone(),
    );
    let (provider, plan) = (provider.to_owned(), plan.to_owned());
    let summary = load::drain(SETUP_CLIENTS, count, move |job| {
        let (api, token, tag, ids) = (api2.clone(), token.clone(), tag.clone(), ids2.clone());
        let (provider, plan) = (provider.clone(), plan.clone());
        async move {
            let key = format!("{tag}-{job}");
            let id = api.initiate(&token, &plan, &provider, &key).await?;
            ids.lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(id);
            Ok(())
        }
    })
    .await;
    if summary.errors > 0 {
        bail!(
            "{} of {count} initiates failed: {}",
            summary.errors,
            summary.first_error.unwrap_or_default()
        );
    }
    let ids = ids.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    Ok(ids)
}

/// A sandbox payment as `GET /sandbox/api/payments` shows it, marked paid.
fn paid(value: &Value) -> anyhow::Result<SimPayment> {
    let text = |field: &str| -> anyhow::Result<String> {
        value[field]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("sandbox payment without {field}"))
    };
    let extra = value["extra"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Ok(SimPayment {
        id: text("id")?,
        provider: ProviderId::from_str(&text("provider")?)
            .map_err(|_| anyhow::anyhow!("unknown provider"))?,
        order_id: text("orderId")?,
        amount_minor: value["amountMinor"].as_i64().context("no amountMinor")?,
        currency: Currency::from_str(&text("currency")?)
            .map_err(|_| anyhow::anyhow!("unknown currency"))?,
        kind: SimKind::OneTime,
        status: SimStatus::Paid,
        success_url: text("successUrl")?,
        cancel_url: text("cancelUrl")?,
        notify_url: text("notifyUrl")?,
        refunded_minor: 0,
        subscription_id: None,
        created_at_ms: value["createdAtMs"].as_i64().unwrap_or_default(),
        extra,
    })
}

/// The signed "paid" notification of each order, signed by the bench's own sandbox simulator.
fn sign_all(
    sandbox: &Sandbox,
    checkouts: &HashMap<String, Value>,
    orders: &[String],
) -> anyhow::Result<Vec<SimWebhook>> {
    orders
        .iter()
        .map(|order| {
            let payment = paid(checkouts.get(order).context("no sandbox checkout")?)?;
            let simulator = sandbox
                .hub()
                .simulator(payment.provider)
                .context("no simulator")?;
            simulator
                .webhooks(sandbox.hub(), &SimEvent::Paid(payment))
                .into_iter()
                .next()
                .context("the simulator made no webhook")
        })
        .collect()
}

/// Deliver one signed webhook; success is a 2xx.
async fn deliver(api: &Api, provider: &str, hook: &SimWebhook) -> anyhow::Result<()> {
    let mut request = api
        .http
        .post(format!("{}/api/payment/webhook/{provider}", api.base))
        .header("content-type", hook.content_type.as_str())
        .body(hook.body.clone());
    for (name, value) in &hook.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let answer = request.send().await?;
    let status = answer.status();
    let body = answer.bytes().await?;
    if !status.is_success() {
        bail!(
            "webhook {provider}: HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
    }
    Ok(())
}

/// One mode's webhook points (`per_point` webhooks each) and their verification.
pub struct Run<'a> {
    /// The service.
    pub api: &'a Api,
    /// The benchmark's pool on the service's database.
    pub pool: &'a Pool,
    /// The bench's own simulators.
    pub sandbox: &'a Sandbox,
    /// `per_transaction` or `grouped`.
    pub mode: &'a str,
    /// Webhooks per point.
    pub per_point: usize,
}

impl Run<'_> {
    /// Register a buyer, create the orders, measure every point, verify.
    ///
    /// # Errors
    /// Setup or verification queries fail.
    pub async fn measure(&self) -> anyhow::Result<(Vec<WebhookRow>, Verification)> {
        let email = format!("buyer-{}@bench.example.com", self.mode);
        let (token, buyer) = self.api.register(&email, crate::PASSWORD).await?;
        let mut points = Vec::new();
        for provider in PROVIDERS {
            for clients in CLIENTS {
                let tag = format!("wh-{}-{clients}", self.mode);
                let orders =
                    create_orders(self.api, &token, provider, self.per_point, &tag).await?;
                points.push((provider.0, clients, orders));
            }
        }
        let checkouts: HashMap<String, Value> = self
            .api
            .get_json("/sandbox/api/payments")
            .await?
            .as_array()
            .context("sandbox payments are not a list")?
            .iter()
            .filter_map(|p| Some((p["orderId"].as_str()?.to_owned(), p.clone())))
            .collect();
        let mut rows = Vec::new();
        let mut delivered = 0;
        let mut duplicates = Vec::new();
        for (provider, clients, orders) in points {
            let hooks = Arc::new(sign_all(self.sandbox, &checkouts, &orders)?);
            eprintln!("  webhooks {provider} x{clients}: {} signed", hooks.len());
            let summary = post_all(self.api, provider, clients, hooks.clone()).await;
            delivered += summary.ok;
            for hook in hooks.iter().take(DUPLICATES) {
                duplicates.push((provider, hook.clone()));
            }
            rows.push(WebhookRow {
                mode: self.mode.to_owned(),
                provider: provider.to_owned(),
                clients,
                summary,
            });
        }
        let verification = self.verify(&buyer, delivered, &duplicates).await?;
        Ok((rows, verification))
    }

    /// Check the orders and grants of `buyer`, deliver `duplicates` again, check again.
    async fn verify(
        &self,
        buyer: &str,
        delivered: u64,
        duplicates: &[(&str, SimWebhook)],
    ) -> anyhow::Result<Verification> {
        let before = self.counts(buyer).await?;
        for (provider, hook) in duplicates {
            if let Err(e) = deliver(self.api, provider, hook).await {
                eprintln!("  a duplicate webhook was refused: {e:#}");
            }
        }
        let after = self.counts(buyer).await?;
        let expected = i64::try_from(delivered).unwrap_or(i64::MAX);
        let (paid, grants, distinct) = after;
        Ok(Verification {
            mode: self.mode.to_owned(),
            delivered,
            paid_orders: paid,
            grants,
            granted_orders: distinct,
            redelivered: duplicates.len(),
            granted_once: before == after
                && paid == expected
                && grants == expected
                && distinct == expected,
            ledger_consistent: store::bench::check_ledger(self.pool, buyer).await.is_ok(),
        })
    }

    async fn counts(&self, buyer: &str) -> anyhow::Result<(i64, i64, i64)> {
        store::bench::order_grants(self.pool, buyer).await
    }
}

/// Post every signed webhook once with `clients` concurrent clients.
async fn post_all(
    api: &Api,
    provider: &'static str,
    clients: usize,
    hooks: Arc<Vec<SimWebhook>>,
) -> Summary {
    let api = api.clone();
    let jobs = hooks.len();
    load::drain(clients, jobs, move |job| {
        let (api, hooks) = (api.clone(), hooks.clone());
        async move { deliver(&api, provider, &hooks[job]).await }
    })
    .await
}
