//! Consume with spend limits: N clients spending one personal account that carries a daily
//! account limit and a daily limit on the API key they spend with (both hard, checked on every
//! spend, never reached), against the same N clients spending another personal account without
//! limits through a key bound to it alike. Both put every client on one balance row and
//! authenticate the same way, so the difference is what the limits cost: reading them and
//! their buckets under the balance row's lock and writing the two counts, on the one-at-a-time
//! path (an account with limits leaves the grouped commit). The two alternate, round after
//! round, so that both meet the same background.

use anyhow::Context;
use serde::Serialize;
use serde_json::json;

use crate::api::Api;
use crate::consume;
use crate::paired::{LEVELS, Names, ROUNDS};
use crate::report::BackendReport;
use crate::run::{Ctx, progress};
use crate::stats::Summary;

/// The account with limits.
pub const CAPPED: &str = "bench-capped";
/// The account without.
pub const FREE: &str = "bench-free";
/// Each limit, in credits: checked on every spend, never reached.
const LIMIT_CREDITS: &str = "1000000000";
/// The limited point's required share of the free one.
const NEED: f64 = 0.9;

/// One round at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct LimitsRow {
    /// Group-commit mode.
    pub mode: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Which alternation.
    pub round: usize,
    /// Every client spending the account without limits.
    pub free: Summary,
    /// Every client spending the account with an account limit and a key limit.
    pub limited: Summary,
}

/// The keys the two accounts are spent with, each bound to its account.
pub struct Keys {
    /// The secret of the key bound to [`FREE`].
    pub free: String,
    /// The secret of the key bound to [`CAPPED`], which carries a limit.
    pub capped: String,
}

/// Bind a key to each account (both users already made and funded) and give [`CAPPED`] its
/// two limits, through the administrator's API.
///
/// # Errors
/// Refused, or the service is unreachable.
pub async fn prepare(api: &Api, admin_token: &str) -> anyhow::Result<Keys> {
    let mut secrets = Vec::new();
    let mut capped_key = String::new();
    for account in [FREE, CAPPED] {
        let body = json!({
            "name": format!("bench {account}"),
            "scopes": ["credits:consume"],
            "accountId": account,
        });
        let key = api
            .post_json("/api/admin/api-keys", admin_token, &body)
            .await?;
        let secret = key["secret"].as_str().context("the key's secret")?;
        secrets.push(secret.to_owned());
        if account == CAPPED {
            capped_key = key["id"].as_str().context("the key's id")?.to_owned();
        }
    }
    let path = format!("/api/admin/accounts/{CAPPED}/limits");
    for extra in [json!({}), json!({"apiKeyId": capped_key})] {
        let mut body = json!({"credits": LIMIT_CREDITS, "window": "day"});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        api.post_json(&path, admin_token, &body).await?;
    }
    let capped = secrets.pop().context("the capped account's key")?;
    let free = secrets.pop().context("the free account's key")?;
    Ok(Keys { free, capped })
}

/// Measure every level in `mode`, alternating the two.
pub async fn points(ctx: &Ctx, api: &Api, keys: &Keys, mode: &str) -> Vec<LimitsRow> {
    let mut rows = Vec::new();
    for clients in LEVELS {
        for round in 0..ROUNDS {
            let spec = ctx.plan.spec(clients);
            let tag = format!("limits-{mode}-{clients}-{round}");
            let free = [FREE.to_owned()];
            let free = consume::run(api, &keys.free, &free, None, &format!("{tag}-f"), spec).await;
            progress(
                &format!("no limits {mode} {clients} clients, round {round}"),
                &free,
            );
            let capped = [CAPPED.to_owned()];
            let limited =
                consume::run(api, &keys.capped, &capped, None, &format!("{tag}-l"), spec).await;
            progress(
                &format!("account and key limits {mode} {clients} clients, round {round}"),
                &limited,
            );
            rows.push(LimitsRow {
                mode: mode.to_owned(),
                clients,
                round,
                free,
                limited,
            });
        }
    }
    rows
}

crate::paired::paired_row!(LimitsRow, free, limited);

fn names() -> Names<'static> {
    Names {
        intro: "Spend limits: `POST /api/credits/consume` on one personal account with a daily \
                account limit and a daily limit on the key spending it (both checked on every \
                spend, never reached), against the same clients on another personal account \
                without limits (both one balance row, each spent through a key bound to it; \
                rounds alternate).",
        base: "no limits",
        compared: "limits",
        need: NEED,
        target: &|clients| {
            format!(
                "consume with an account limit and a key limit at {clients} clients within 10% \
                 of consume without limits"
            )
        },
    }
}

/// The table of `b`'s limit points.
#[must_use]
pub fn table(b: &BackendReport) -> String {
    crate::paired::table(&b.limits, &names())
}

/// The target: consume with an account limit and a key limit within 10% of consume without,
/// per mode and client count.
#[must_use]
pub fn targets(b: &BackendReport) -> Vec<crate::report::Target> {
    crate::paired::targets(&b.limits, &b.backend, &names())
}
