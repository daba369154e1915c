//! Read latencies: the balance and transaction pages as the ledger grows, and the pricing page.
//!
//! Each read is timed sequentially (one client), after a warm-up, over HTTP with the user's own
//! session token, so the figures are the cost of one request rather than of a queue.

use serde::Serialize;

use crate::api::Api;
use crate::database::Pool;
use crate::load;
use crate::stats::Summary;

/// The reads measured at each ledger size.
pub const ENDPOINTS: [(&str, &str); 3] = [
    ("balance", "/api/credits/balance"),
    (
        "transactions page 1",
        "/api/credits/transactions?page=1&limit=20",
    ),
    (
        "transactions page 50",
        "/api/credits/transactions?page=50&limit=20",
    ),
];
/// Unmeasured requests before each read series.
const WARMUP: usize = 20;

/// One read at one ledger size.
#[derive(Debug, Clone, Serialize)]
pub struct GrowthRow {
    /// Ledger rows of the user.
    pub rows: i64,
    /// What was read.
    pub endpoint: String,
    /// Its latencies (sequential requests).
    pub summary: Summary,
}

/// How long a ledger took to insert.
#[derive(Debug, Clone, Serialize)]
pub struct Seeded {
    /// Rows.
    pub rows: i64,
    /// Seconds.
    pub seconds: f64,
}

/// For each size: register a user, give it a ledger of that many rows, time the reads.
///
/// # Errors
/// Registration or the bulk insert fails, or a ledger does not add up.
pub async fn growth(
    api: &Api,
    pool: &Pool,
    sizes: &[i64],
    samples: usize,
    now_ms: fn() -> i64,
) -> anyhow::Result<(Vec<GrowthRow>, Vec<Seeded>)> {
    let mut users = Vec::new();
    let mut seeded = Vec::new();
    for &rows in sizes {
        let email = format!("growth-{rows}@bench.example.com");
        let (token, user) = api.register(&email, crate::PASSWORD).await?;
        let seconds = store::bench::history(pool, &user, rows, now_ms()).await?;
        store::bench::check_ledger(pool, &user).await?;
        eprintln!("  ledger of {rows} rows inserted in {seconds:.1} s");
        seeded.push(Seeded { rows, seconds });
        users.push((rows, token));
    }
    let mut measured = Vec::new();
    for (rows, token) in &users {
        for (name, path) in ENDPOINTS {
            let summary = load::sequential(WARMUP, samples, || api.get_ok(path, Some(token))).await;
            measured.push(GrowthRow {
                rows: *rows,
                endpoint: name.to_owned(),
                summary,
            });
        }
    }
    Ok((measured, seeded))
}

/// The pricing page's render time.
#[derive(Debug, Clone, Serialize)]
pub struct PageRow {
    /// What was measured.
    pub path: String,
    /// Why it is not `/pricing`, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its latencies (sequential requests).
    pub summary: Summary,
}

/// Time `GET /pricing`, or `GET /api/plans` when this build does not serve the page.
///
/// # Errors
/// The service is unreachable.
pub async fn pricing(api: &Api, samples: usize) -> anyhow::Result<PageRow> {
    let status = api.get_status("/pricing", None).await?;
    let (path, note) = if status == 200 {
        ("/pricing", None)
    } else {
        (
            "/api/plans",
            Some(format!(
                "GET /pricing answered {status}: this build serves no pricing page, so GET \
                 /api/plans (the same catalogue as JSON) was measured instead"
            )),
        )
    };
    let summary = load::sequential(WARMUP, samples, || api.get_ok(path, None)).await;
    Ok(PageRow {
        path: path.to_owned(),
        note,
        summary,
    })
}
