//! The admin console's reads as the customer base grows: the customer search
//! (`GET /api/admin/users?query=`) and a customer's page (`GET /api/admin/users/{id}` followed by
//! the first page of `GET /api/admin/users/{id}/transactions`), timed over HTTP as the
//! administrator at 1 thousand customers (10 thousand of their ledger rows), then again after the
//! same database has grown to 100 thousand customers and 1 million ledger rows.
//!
//! The customers are written by the store's bulk seeding (`store::bench::seed_customers`:
//! `generate_series` on PostgreSQL, a recursive CTE on SQLite, 10 000 customers per statement),
//! keeping the ledger's invariants: each customer has an admin grant, nine consumptions of 5
//! credits, the grant's lot holding what is left, and a balance row that adds up.
//!
//! Customer `n` (1-based) has the id `adm-{1000000 + n}` and the e-mail
//! `customer{1000000 + n}@bench.example.com`, so the searched prefix `Customer1000k` (k = 0..9,
//! typed in another case than stored) matches about a hundred customers at both sizes: the two
//! sizes answer the same page size from an index range, and only the table around it grows.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail, ensure};
use serde::Serialize;
use serde_json::Value;
use store::bench::{ROWS_PER_CUSTOMER, customer_id, seed_customers, users_and_ledger_rows};

use crate::api::Api;
use crate::database::Pool;
use crate::load;
use crate::report::{BackendReport, Target, rows_label};
use crate::stats::Summary;

/// The figure names.
pub const SEARCH: &str = "customer search";
/// A customer's page: the overview and the first transactions page.
pub const PAGE: &str = "customer page";
/// The customer counts measured: the small base, then the large one.
pub const SIZES: [i64; 2] = [1_000, 100_000];
/// Unmeasured requests before each series.
const WARMUP: usize = 20;
/// The judged ratio of the large size's median to the small one's.
const LIMIT_RATIO: f64 = 1.5;

/// How much of the admin console to measure.
#[derive(Debug, Clone, Copy)]
pub struct AdminPlan {
    /// Sequential samples per figure and size.
    pub samples: usize,
}

/// One figure at one customer count.
#[derive(Debug, Clone, Serialize)]
pub struct AdminRow {
    /// Seeded customers when measured.
    pub customers: i64,
    /// Every row of `users` then (the benchmark's own users included).
    pub users_total: i64,
    /// Every row of `credit_transactions` then.
    pub ledger_rows_total: i64,
    /// [`SEARCH`] or [`PAGE`].
    pub figure: String,
    /// Its latencies (sequential requests; a page sample is both of its requests).
    pub summary: Summary,
    /// Seconds the bulk insert up to this size took.
    pub seed_seconds: f64,
}

/// `GET path` as `token`: the JSON of a 200.
async fn get_json(api: &Api, path: &str, token: &str) -> anyhow::Result<Value> {
    let answer = api
        .http
        .get(format!("{}{path}", api.base))
        .bearer_auth(token)
        .send()
        .await?;
    let status = answer.status().as_u16();
    let text = answer.text().await?;
    if status != 200 {
        bail!(
            "GET {path}: HTTP {status}: {}",
            text.chars().take(300).collect::<String>()
        );
    }
    serde_json::from_str(&text).with_context(|| format!("GET {path}: not JSON"))
}

fn search_path(k: usize) -> String {
    format!("/api/admin/users?query=Customer1000{}", k % 10)
}

/// The customer of sample `s` at `customers` customers: spread over the whole base.
fn sampled(s: usize, customers: i64) -> String {
    let s = i64::try_from(s).unwrap_or(0);
    customer_id(1 + (s * 7_919 + 13) % customers.max(1))
}

/// Check once that the measured requests answer what the console shows, not an empty page.
async fn verify(api: &Api, token: &str, customers: i64) -> anyhow::Result<()> {
    let found = get_json(api, &search_path(4), token).await?;
    let items = found["items"].as_array().map_or(0, Vec::len);
    ensure!(
        items == 20 && found["nextCursor"].is_string(),
        "the search for Customer10004 found {items} customers on its first page, not 20 and more"
    );
    let id = sampled(0, customers);
    let page = get_json(api, &format!("/api/admin/users/{id}"), token).await?;
    ensure!(
        page["user"]["id"] == id.as_str(),
        "the page of {id} is about {}",
        page["user"]["id"]
    );
    let ledger = get_json(api, &format!("/api/admin/users/{id}/transactions"), token).await?;
    let rows = ledger["items"].as_array().map_or(0, Vec::len);
    ensure!(
        i64::try_from(rows).ok() == Some(ROWS_PER_CUSTOMER),
        "the ledger of {id} shows {rows} rows, not {ROWS_PER_CUSTOMER}"
    );
    Ok(())
}

/// Time both figures at the current size.
async fn measure(
    api: &Api,
    token: &str,
    customers: i64,
    samples: usize,
) -> anyhow::Result<[Summary; 2]> {
    verify(api, token, customers).await?;
    let next = AtomicUsize::new(0);
    let search = load::sequential(WARMUP, samples, || {
        let path = search_path(next.fetch_add(1, Ordering::Relaxed));
        async move { api.get_ok(&path, Some(token)).await }
    })
    .await;
    let next = AtomicUsize::new(0);
    let page = load::sequential(WARMUP, samples, || {
        let id = sampled(next.fetch_add(1, Ordering::Relaxed), customers);
        async move {
            api.get_ok(&format!("/api/admin/users/{id}"), Some(token))
                .await?;
            api.get_ok(
                &format!("/api/admin/users/{id}/transactions?limit=20"),
                Some(token),
            )
            .await
        }
    })
    .await;
    Ok([search, page])
}

/// Seed each size in turn on the running service's database and time both figures there, as
/// the administrator `token`.
///
/// # Errors
/// The bulk insert fails or does not add up, or a measured request answers other than the
/// console would.
pub async fn run(
    api: &Api,
    pool: &Pool,
    token: &str,
    plan: AdminPlan,
    now_ms: i64,
) -> anyhow::Result<Vec<AdminRow>> {
    let base_ms = now_ms - 200 * SIZES[1] - 60_000;
    let mut have = 0;
    let mut rows = Vec::new();
    for customers in SIZES {
        let seed_seconds = seed_customers(pool, have, customers, base_ms).await?;
        have = customers;
        let (users_total, ledger_rows_total) = users_and_ledger_rows(pool).await?;
        eprintln!(
            "  admin console: {customers} customers seeded in {seed_seconds:.1} s \
             ({users_total} users, {ledger_rows_total} ledger rows)"
        );
        let figures = measure(api, token, customers, plan.samples).await?;
        for (figure, summary) in [SEARCH, PAGE].into_iter().zip(figures) {
            crate::run::progress(&format!("{figure} at {}", rows_label(customers)), &summary);
            rows.push(AdminRow {
                customers,
                users_total,
                ledger_rows_total,
                figure: figure.to_owned(),
                summary,
                seed_seconds,
            });
        }
    }
    Ok(rows)
}

/// `--admin-console-only`: start the service on the fresh database, create the administrator
/// (CLI) and sign in (HTTP), measure only these figures, and stop it.
///
/// # Errors
/// The service does not start, or the administrator cannot sign in; a failed measurement is
/// recorded in `report` instead.
pub async fn standalone(
    ctx: &crate::run::Ctx,
    db: &crate::database::Provisioned,
    report: &mut BackendReport,
) -> anyhow::Result<()> {
    let launch = crate::run::launch(ctx, db, crate::report::PER_TRANSACTION);
    let server = crate::server::Server::start(&launch).await?;
    let api = Api::new(&server.base_url)?;
    let pool = db.pool().await?;
    report.version = pool.version().await?;
    let email = "bench-admin@bench.example.com";
    crate::server::create_admin(&launch, email, crate::PASSWORD).await?;
    let token = api.login(email, crate::PASSWORD).await?;
    let plan = ctx.plan.admin_console.unwrap_or(AdminPlan { samples: 300 });
    match run(&api, &pool, &token, plan, crate::now_ms()).await {
        Ok(rows) => report.admin_console = rows,
        Err(e) => report.problems.push(format!("admin console: {e:#}")),
    }
    pool.close().await;
    server.stop().await
}

fn find<'a>(b: &'a BackendReport, customers: i64, figure: &str) -> Option<&'a AdminRow> {
    b.admin_console
        .iter()
        .find(|r| r.customers == customers && r.figure == figure)
}

/// The targets: each figure's median at 100 thousand customers within 1.5x of 1 thousand.
#[must_use]
pub fn targets(b: &BackendReport) -> Vec<Target> {
    if b.admin_console.is_empty() {
        return Vec::new();
    }
    let [small, large] = SIZES;
    [SEARCH, PAGE]
        .iter()
        .map(|figure| {
            let (text, met) = match (find(b, small, figure), find(b, large, figure)) {
                (Some(s), Some(l))
                    if s.summary.ok > 0 && l.summary.ok > 0 && s.summary.p50_ms > 0.0 =>
                {
                    let ratio = l.summary.p50_ms / s.summary.p50_ms;
                    (
                        format!(
                            "median {:.3} ms at {} customers vs {:.3} ms at {} = {ratio:.2}x",
                            l.summary.p50_ms,
                            rows_label(large),
                            s.summary.p50_ms,
                            rows_label(small)
                        ),
                        Some(ratio <= LIMIT_RATIO),
                    )
                }
                _ => ("not measured".to_owned(), None),
            };
            Target {
                target: format!(
                    "admin {figure} at {} customers / {} ledger rows within 1.5x of {} customers",
                    rows_label(large),
                    rows_label(large * ROWS_PER_CUSTOMER),
                    rows_label(small)
                ),
                backend: b.backend.clone(),
                mode: "reads".to_owned(),
                figure: text,
                met,
            }
        })
        .collect()
}

fn ratio(small: f64, large: f64) -> String {
    if small > 0.0 {
        format!("{:.2}x", large / small)
    } else {
        "–".to_owned()
    }
}

/// The Markdown table of `b`'s admin console figures (empty when not measured).
#[must_use]
pub fn table(b: &BackendReport) -> String {
    if b.admin_console.is_empty() {
        return String::new();
    }
    let [small, large] = SIZES;
    let mut md = format!(
        "Admin console as the customer base grows (one client, ms; a page is the overview and \
         the first 20 transactions):\n\n| read | p50 at {0} | p99 at {0} | p50 at {1} | p99 at \
         {1} | ratio of p50s | ratio of p99s | within 1.5x |\n|---|---|---|---|---|---|---|---|\n",
        rows_label(small),
        rows_label(large)
    );
    for figure in [SEARCH, PAGE] {
        let (Some(s), Some(l)) = (find(b, small, figure), find(b, large, figure)) else {
            continue;
        };
        let (s, l) = (&s.summary, &l.summary);
        let within = s.p50_ms > 0.0 && l.p50_ms <= LIMIT_RATIO * s.p50_ms;
        let _ = writeln!(
            md,
            "| {figure} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} |",
            s.p50_ms,
            s.p99_ms,
            l.p50_ms,
            l.p99_ms,
            ratio(s.p50_ms, l.p50_ms),
            ratio(s.p99_ms, l.p99_ms),
            if within { "yes" } else { "no" }
        );
    }
    for size in SIZES {
        if let Some(r) = find(b, size, SEARCH) {
            let _ = write!(
                md,
                "\nAt {} customers: {} users and {} ledger rows in the database (seeded in \
                 {:.1} s).",
                rows_label(size),
                r.users_total,
                r.ledger_rows_total,
                r.seed_seconds
            );
        }
    }
    md.push_str("\n\n");
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_customers_stay_inside_the_base() {
        for customers in SIZES {
            for s in 0..1_000 {
                let id = sampled(s, customers);
                let n: i64 = id["adm-".len()..].parse().unwrap_or(0) - 1_000_000;
                assert!((1..=customers).contains(&n), "{id} outside 1..={customers}");
            }
        }
        assert_eq!(customer_id(1), "adm-1000001");
        assert_eq!(search_path(14), "/api/admin/users?query=Customer10004");
    }
}
