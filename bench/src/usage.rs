//! Consume with tokens by kind: N clients spending their own accounts (the ordinary consume
//! point's users) on a model the price book prices by kind ([`PRICED_MODEL`]), with a usage
//! breakdown, against the same clients spending on a model without an entry with one token
//! count (the per-kilotoken rule). The difference is what pricing by kind costs: reading the
//! breakdown, the price-book lookup and exact arithmetic, and the ledger's three more columns.
//! The two alternate, round after round, so that both meet the same background.

use serde::Serialize;
use serde_json::json;

use crate::api::Api;
use crate::consume;
use crate::paired::{LEVELS, Names, ROUNDS};
use crate::report::BackendReport;
use crate::run::{Ctx, progress};
use crate::stats::Summary;

/// The model the bench's `credits.toml` gives a price-book entry ([`PRICE_BOOK`]).
pub const PRICED_MODEL: &str = "bench-priced";
/// What the benchmark appends to its copy of `config/credits.toml`.
pub const PRICE_BOOK: &str = "\n# Written by tally-bench: one model priced by token kind.\n\
     [[priceBook.entries]]\nmodel = \"bench-priced\"\neffectiveFrom = \"2000-01-01\"\n\
     input = 250\noutput = 1000\ncacheRead = 125\n\
     cost = { input = 2.5, output = 10, cacheRead = 1.25 }\n";
/// The model without an entry, priced per token by `dynamicChatCostPerKiloToken`.
const PLAIN_MODEL: &str = "gpt-4o";
/// The breakdown point's required share of the per-token one.
const NEED: f64 = 0.95;

/// One round at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct UsageRow {
    /// Group-commit mode.
    pub mode: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Which alternation.
    pub round: usize,
    /// Every client spending with one token count.
    pub tokens: Summary,
    /// Every client spending with tokens by kind.
    pub by_kind: Summary,
}

/// Measure every level in `mode`, alternating the two, with `users` spending their own
/// accounts through `api_key`.
pub async fn points(
    ctx: &Ctx,
    api: &Api,
    (api_key, users): (&str, &[String]),
    mode: &str,
) -> Vec<UsageRow> {
    let plain: Vec<String> = users
        .iter()
        .map(|u| json!({"userId": u, "model": PLAIN_MODEL, "tokens": 1500}).to_string())
        .collect();
    let by_kind: Vec<String> = users
        .iter()
        .map(|u| {
            json!({"userId": u, "model": PRICED_MODEL, "usage": {"inputTokens": 300,
                "outputTokens": 200, "cacheReadTokens": 1000}})
            .to_string()
        })
        .collect();
    let mut rows = Vec::new();
    for clients in LEVELS {
        for round in 0..ROUNDS {
            let spec = ctx.plan.spec(clients);
            let tag = format!("usage-{mode}-{clients}-{round}");
            let tokens = consume::run_bodies(api, api_key, &plain, &format!("{tag}-t"), spec).await;
            progress(
                &format!("per-token consume {mode} {clients} clients, round {round}"),
                &tokens,
            );
            let kinds =
                consume::run_bodies(api, api_key, &by_kind, &format!("{tag}-k"), spec).await;
            progress(
                &format!("consume by token kind {mode} {clients} clients, round {round}"),
                &kinds,
            );
            rows.push(UsageRow {
                mode: mode.to_owned(),
                clients,
                round,
                tokens,
                by_kind: kinds,
            });
        }
    }
    rows
}

crate::paired::paired_row!(UsageRow, tokens, by_kind);

fn names() -> Names<'static> {
    Names {
        intro: "Tokens by kind: `POST /api/credits/consume` with a usage breakdown on a model the \
                price book prices by kind, against the same clients spending with one token \
                count on a model priced per kilotoken (each on their own account; rounds \
                alternate).",
        base: "per token",
        compared: "by kind",
        need: NEED,
        target: &|clients| {
            format!(
                "consume with a usage breakdown at {clients} clients within 5% of per-token consume"
            )
        },
    }
}

/// The table of `b`'s usage points.
#[must_use]
pub fn table(b: &BackendReport) -> String {
    crate::paired::table(&b.usage, &names())
}

/// The target: consume with a usage breakdown within 5% of per-token consume, per mode and
/// client count.
#[must_use]
pub fn targets(b: &BackendReport) -> Vec<crate::report::Target> {
    crate::paired::targets(&b.usage, &b.backend, &names())
}
