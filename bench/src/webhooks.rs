//! Webhooks over HTTP with real signatures: `card_gateway` (Stripe's HMAC-SHA256
//! `Stripe-Signature`) and `wallet_qr` (WeChat Pay APIv3: RSA-SHA256 signature over an
//! AES-256-GCM sealed resource).
//!
//! For each point, pending orders are created through `POST /api/payment/initiate` (credits
//! packs `credits_card_500` and `credits_cn_qr_1000`, bought by a service API key acting for
//! the buyer, as a host app's backend does), which makes the service's sandbox open a checkout
//! for each. Each order of a point has a buyer of its own, as a day of real payments has, and
//! one more point sends every webhook for one buyer (one hot balance row). The benchmark reads those checkouts back (`GET /sandbox/api/payments`) and
//! has its own copy of the sandbox simulators sign the "payment succeeded" notification for
//! each, exactly as the provider would (signing happens before the clock starts). The signed
//! webhooks are then posted to `/api/payment/webhook/<provider>` by N concurrent clients.
//! Afterwards every order must be paid and granted exactly once, also after a second delivery
//! of some of them, and every buyer's ledger must add up.

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
/// The one-buyer point: its provider and clients.
const HOT_POINT: ((&str, &str), usize) = (PROVIDERS[0], 32);
/// Concurrent initiate calls while preparing orders.
const SETUP_CLIENTS: usize = 8;
/// Webhooks delivered a second time per point, to check that a duplicate grants nothing.
const DUPLICATES: usize = 20;

/// Whose orders a webhook point pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Buyers {
    /// A buyer per order, as a day of payments has.
    Distinct,
    /// Every order the same buyer: one hot balance row.
    One,
}

impl std::fmt::Display for Buyers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Distinct => "distinct",
            Self::One => "one",
        })
    }
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct WebhookRow {
    /// `per_transaction` or `grouped`.
    pub mode: String,
    /// Provider id.
    pub provider: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Whose orders it paid.
    pub buyers: Buyers,
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
    /// Buyers of the mode's orders.
    pub buyers: usize,
    /// Orders of those buyers now paid.
    pub paid_orders: i64,
    /// Order grants of those buyers.
    pub grants: i64,
    /// Distinct orders among those grants.
    pub granted_orders: i64,
    /// Webhooks delivered a second time.
    pub redelivered: usize,
    /// Paid = grants = distinct = delivered, also after the second deliveries.
    pub granted_once: bool,
    /// Every buyer's balance equals the sum of its transactions.
    pub ledger_consistent: bool,
}

/// Create one pending order of `plan` through `provider` for each of `buyers` (the same buyer
/// may appear many times), bought by the API key `api_key` acting for them.
async fn create_orders(
    api: &Api,
    api_key: &str,
    (provider, plan): (&str, &str),
    buyers: Vec<String>,
    tag: &str,
) -> anyhow::Result<Vec<String>> {
    let count = buyers.len();
    let ids = Arc::new(Mutex::new(Vec::with_capacity(count)));
    let through = provider.to_owned();
    let (api2, api_key, tag, ids2, buyers) = (
        api.clone(),
        Arc::new(api_key.to_owned()),
        Arc::new(format!("{tag}-{provider}")),
        ids.clone(),
        Arc::new(buyers),
    );
    let (provider, plan) = (provider.to_owned(), plan.to_owned());
    let summary = load::drain(SETUP_CLIENTS, count, move |job| {
        let (api, api_key, tag, ids) = (api2.clone(), api_key.clone(), tag.clone(), ids2.clone());
        let (provider, plan, buyers) = (provider.clone(), plan.clone(), buyers.clone());
        async move {
            let key = format!("{tag}-{job}");
            let id = api
                .initiate_for(&api_key, &buyers[job], (&plan, &provider), &key)
                .await?;
            ids.lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(id);
            Ok(())
        }
    })
    .await;
    // The sandbox's checkouts grow with every point: an initiate that slows as they do shows here.
    eprintln!(
        "  {count} initiates through {through}: p50 {:.2} ms, p99 {:.2} ms",
        summary.p50_ms, summary.p99_ms
    );
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
    /// A service API key that may buy for a user (`billing:write`).
    pub api_key: &'a str,
    /// The bench's own simulators.
    pub sandbox: &'a Sandbox,
    /// `per_transaction` or `grouped`.
    pub mode: &'a str,
    /// Webhooks per point.
    pub per_point: usize,
}

impl Run<'_> {
    /// Create the buyers and their orders, measure every point, verify.
    ///
    /// # Errors
    /// Setup or verification queries fail.
    pub async fn measure(&self) -> anyhow::Result<(Vec<WebhookRow>, Verification)> {
        let mut plan: Vec<((&str, &str), usize, Buyers)> = Vec::new();
        for provider in PROVIDERS {
            for clients in CLIENTS {
                plan.push((provider, clients, Buyers::Distinct));
            }
        }
        plan.push((HOT_POINT.0, HOT_POINT.1, Buyers::One));
        let mut buyers = Vec::new();
        let mut points = Vec::new();
        for (provider, clients, who) in plan {
            let tag = format!("wh-{}-{}-{clients}-{who}", self.mode, provider.0);
            // A user id is at most 64 characters: the buyer's is the mode's prefix and the
            // point without the mode again.
            let buyer = format!("{}{}-{clients}-{who}", self.prefix(), provider.0);
            let of_point: Vec<String> = match who {
                Buyers::One => vec![buyer],
                Buyers::Distinct => (0..self.per_point)
                    .map(|i| format!("{buyer}-{i:05}"))
                    .collect(),
            };
            store::bench::create_users(self.pool, &of_point, crate::now_ms())
                .await
                .context("creating buyers")?;
            let orders_of: Vec<String> = (0..self.per_point)
                .map(|i| of_point[i % of_point.len()].clone())
                .collect();
            let orders = create_orders(self.api, self.api_key, provider, orders_of, &tag).await?;
            buyers.extend(of_point);
            points.push((provider.0, clients, who, orders));
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
        for (provider, clients, who, orders) in points {
            let hooks = Arc::new(sign_all(self.sandbox, &checkouts, &orders)?);
            eprintln!(
                "  webhooks {provider} x{clients} (buyers: {who}): {} signed",
                hooks.len()
            );
            let summary = post_all(self.api, provider, clients, hooks.clone()).await;
            delivered += summary.ok;
            for hook in hooks.iter().take(DUPLICATES) {
                duplicates.push((provider, hook.clone()));
            }
            rows.push(WebhookRow {
                mode: self.mode.to_owned(),
                provider: provider.to_owned(),
                clients,
                buyers: who,
                summary,
            });
        }
        let verification = self.verify(&buyers, delivered, &duplicates).await?;
        Ok((rows, verification))
    }

    /// The id prefix of this mode's buyers (every buyer id of the mode starts with it).
    fn prefix(&self) -> String {
        format!("whb-{}-", self.mode)
    }

    /// Check the orders and grants of `buyers`, deliver `duplicates` again, check again.
    async fn verify(
        &self,
        buyers: &[String],
        delivered: u64,
        duplicates: &[(&str, SimWebhook)],
    ) -> anyhow::Result<Verification> {
        let before = self.counts().await?;
        for (provider, hook) in duplicates {
            if let Err(e) = deliver(self.api, provider, hook).await {
                eprintln!("  a duplicate webhook was refused: {e:#}");
            }
        }
        let after = self.counts().await?;
        let expected = i64::try_from(delivered).unwrap_or(i64::MAX);
        let (paid, grants, distinct) = after;
        let mut ledger_consistent = true;
        for buyer in buyers {
            ledger_consistent &= store::bench::check_ledger(self.pool, buyer).await.is_ok();
        }
        Ok(Verification {
            mode: self.mode.to_owned(),
            delivered,
            buyers: buyers.len(),
            paid_orders: paid,
            grants,
            granted_orders: distinct,
            redelivered: duplicates.len(),
            granted_once: before == after
                && paid == expected
                && grants == expected
                && distinct == expected,
            ledger_consistent,
        })
    }

    /// Paid orders, order grants and distinct granted orders of every buyer of this mode.
    async fn counts(&self) -> anyhow::Result<(i64, i64, i64)> {
        store::bench::order_grants_of_prefix(self.pool, &self.prefix()).await
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
