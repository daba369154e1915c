//! The report: every figure of a run (`report.json`), the targets of issue 7 judged against
//! them, and the same as Markdown tables (`report.md`, also printed).

use std::fmt::Write as _;

use serde::Serialize;

use crate::cpu::CpuUse;
use crate::dblimit::Shape;
use crate::machine::Machine;
use crate::reads::{GrowthRow, PageRow, Seeded};
use crate::stats::Summary;
use crate::webhooks::{Verification, WebhookRow};

/// Mode name of one transaction per request.
pub const PER_TRANSACTION: &str = "per_transaction";
/// Mode name of group commit.
pub const GROUPED: &str = "grouped";

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// When (UTC, RFC 3339).
    pub date: String,
    /// The command line.
    pub command: String,
    /// `/proc/loadavg` (1, 5, 15 minutes) when the run started: other work on the machine.
    pub load_average_start: String,
    /// `/proc/loadavg` when it ended.
    pub load_average_end: String,
    /// `--quick`.
    pub quick: bool,
    /// Where.
    pub machine: Machine,
    /// How.
    pub settings: Settings,
    /// Whether the `tally` binary mentions `TALLY_GROUP_COMMIT` at all.
    pub group_commit_in_binary: bool,
    /// Per backend.
    pub backends: Vec<BackendReport>,
    /// Things the reader must know (skipped parts, substitutions).
    pub notes: Vec<String>,
    /// The issue's targets.
    pub targets: Vec<Target>,
}

/// The run's parameters.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Measured seconds per load point.
    pub point_seconds: f64,
    /// Unmeasured seconds before each point.
    pub warmup_seconds: f64,
    /// Client counts.
    pub clients: Vec<usize>,
    /// Webhooks per point.
    pub webhooks_per_point: usize,
    /// Ledger sizes of the growth reads.
    pub ledger_sizes: Vec<i64>,
    /// Sequential requests per read figure.
    pub read_samples: usize,
    /// Connections of the service's pool and of the benchmark's direct pool.
    pub pool_size: u32,
    /// `SQLITE_SYNCHRONOUS`.
    pub sqlite_synchronous: String,
}

/// Everything measured on one backend.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BackendReport {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// Which database (no password).
    pub database: String,
    /// Its version.
    pub version: String,
    /// Start-up times.
    pub startup: Vec<Startup>,
    /// Resident memory per instance.
    pub memory: Vec<MemoryRow>,
    /// The database's own limit.
    pub db_limit: Vec<DbRow>,
    /// Consume over HTTP.
    pub consume: Vec<HttpRow>,
    /// Consume from a team's pool against one personal account.
    pub team: Vec<crate::team::TeamRow>,
    /// Consume with an account limit and a key limit against consume without.
    pub limits: Vec<crate::limits::LimitsRow>,
    /// Consume with tokens by kind against consume with one token count.
    pub usage: Vec<crate::usage::UsageRow>,
    /// Webhooks over HTTP.
    pub webhooks: Vec<WebhookRow>,
    /// What the database said after them.
    pub webhook_checks: Vec<Verification>,
    /// Host events delivered to a local receiver.
    pub deliveries: Vec<crate::deliveries::DeliveryRow>,
    /// Reads as the ledger grows.
    pub growth: Vec<GrowthRow>,
    /// How long the large ledgers took to insert.
    pub seeded: Vec<Seeded>,
    /// The pricing page.
    pub pages: Option<PageRow>,
    /// The admin console as the customer base grows.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub admin_console: Vec<crate::admin_console::AdminRow>,
    /// Parts that failed (a failed setup stops the backend's run; a failed section does not).
    pub problems: Vec<String>,
}

/// One start-up.
#[derive(Debug, Clone, Serialize)]
pub struct Startup {
    /// Group-commit mode of the instance.
    pub mode: String,
    /// The database it met.
    pub database: String,
    /// Spawn to the first `/readyz` 200, ms.
    pub ms: f64,
}

/// Resident memory of one instance, MiB.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryRow {
    /// Group-commit mode of the instance.
    pub mode: String,
    /// Idle after start-up and setup, before any load.
    pub idle_mb: f64,
    /// The largest sampled under load (every 100 ms).
    pub peak_load_mb: f64,
    /// Idle again after the load.
    pub idle_after_load_mb: f64,
}

/// One point of the database's own limit.
#[derive(Debug, Clone, Serialize)]
pub struct DbRow {
    /// Which statements.
    pub shape: Shape,
    /// Concurrent workers.
    pub clients: usize,
    /// All workers on one account.
    pub hot: bool,
    /// Connections of the benchmark's pool (the service's size, or 1: writers serialized).
    pub connections: u32,
    /// What it came to (`per_second` = transactions/s).
    pub summary: Summary,
    /// Where the CPU went meanwhile.
    pub cpu: Option<CpuUse>,
}

/// One point of consume over HTTP.
#[derive(Debug, Clone, Serialize)]
pub struct HttpRow {
    /// [`PER_TRANSACTION`] or [`GROUPED`].
    pub mode: String,
    /// Concurrent clients.
    pub clients: usize,
    /// All clients on one account.
    pub hot: bool,
    /// What it came to.
    pub summary: Summary,
    /// Where the CPU went meanwhile.
    pub cpu: Option<CpuUse>,
}

/// One target of the issue.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is required.
    pub target: String,
    /// On which backend.
    pub backend: String,
    /// In which group-commit mode (`reads` for reads, which no mode changes).
    pub mode: String,
    /// The figures it was judged on.
    pub figure: String,
    /// Met, not met, or `None` when it could not be measured.
    pub met: Option<bool>,
}

impl BackendReport {
    /// The store-shaped database limit at `clients`.
    #[must_use]
    pub fn limit(&self, clients: usize, hot: bool) -> Option<&Summary> {
        self.db_limit
            .iter()
            .find(|r| {
                r.shape == Shape::Store
                    && r.clients == clients
                    && r.hot == hot
                    && r.connections == crate::database::POOL_SIZE
            })
            .map(|r| &r.summary)
    }

    /// Consume over HTTP in `mode` at `clients`.
    #[must_use]
    pub fn http(&self, mode: &str, clients: usize, hot: bool) -> Option<&Summary> {
        self.consume
            .iter()
            .find(|r| r.mode == mode && r.clients == clients && r.hot == hot)
            .map(|r| &r.summary)
    }

    fn read(&self, rows: i64, endpoint: &str) -> Option<&Summary> {
        self.growth
            .iter()
            .find(|r| r.rows == rows && r.endpoint == endpoint)
            .map(|r| &r.summary)
    }
}

fn target(name: &str, backend: &str, mode: &str, (figure, met): (String, Option<bool>)) -> Target {
    Target {
        target: name.to_owned(),
        backend: backend.to_owned(),
        mode: mode.to_owned(),
        figure,
        met,
    }
}

fn not_measured() -> (String, Option<bool>) {
    ("not measured".to_owned(), None)
}

/// `rps` against `need` times the limit `l`.
fn share(rps: Option<&Summary>, limit: Option<f64>, need: f64) -> (String, Option<bool>) {
    match (rps, limit) {
        (Some(h), Some(l)) if l > 0.0 => (
            format!(
                "{:.0} req/s vs limit {l:.0} tx/s = {:.0}%",
                h.per_second,
                100.0 * h.per_second / l
            ),
            Some(h.per_second >= need * l),
        ),
        _ => not_measured(),
    }
}

/// The issue's targets, judged on `backends`, in both group-commit modes where the mode matters.
#[must_use]
pub fn targets(backends: &[BackendReport], sizes: &[i64]) -> Vec<Target> {
    let mut all = Vec::new();
    for b in backends {
        let name = b.backend.as_str();
        let limit = b.limit(32, false).map(|s| s.per_second);
        for mode in [PER_TRANSACTION, GROUPED] {
            let http = b.http(mode, 32, false);
            all.push(target(
                "HTTP consume at 32 clients >= 70% of the database's per-transaction limit",
                name,
                mode,
                share(http, limit, 0.7),
            ));
            if name == "sqlite" {
                let judged = http.map_or_else(not_measured, |h| {
                    (format!("p99 {:.2} ms", h.p99_ms), Some(h.p99_ms < 20.0))
                });
                all.push(target("p99 under 20 ms at 32 clients", name, mode, judged));
            }
        }
        all.extend(crate::team::targets(b));
        all.extend(crate::limits::targets(b));
        all.extend(crate::usage::targets(b));
        all.extend(growth_targets(b, sizes));
        all.extend(crate::admin_console::targets(b));
        for m in &b.memory {
            let judged = (
                format!("{:.1} MiB VmRSS", m.idle_mb),
                Some(m.idle_mb < 50.0),
            );
            all.push(target("idle memory under 50 MB", name, &m.mode, judged));
        }
        all.push(target(
            "group commit: HTTP consume at 32 clients >= 2x the per-transaction limit",
            name,
            GROUPED,
            share(b.http(GROUPED, 32, false), limit, 2.0),
        ));
    }
    all
}

fn growth_targets(b: &BackendReport, sizes: &[i64]) -> Vec<Target> {
    let (Some(&small), Some(&large)) = (sizes.iter().min(), sizes.iter().max()) else {
        return Vec::new();
    };
    ["balance", "transactions page 1"]
        .iter()
        .map(|endpoint| {
            let judged = match (b.read(small, endpoint), b.read(large, endpoint)) {
                (Some(s), Some(l)) if s.ok > 0 && l.ok > 0 && s.p50_ms > 0.0 => (
                    format!(
                        "median {:.3} ms at {} rows vs {:.3} ms at {} rows = {:.2}x",
                        l.p50_ms,
                        rows_label(large),
                        s.p50_ms,
                        rows_label(small),
                        l.p50_ms / s.p50_ms
                    ),
                    Some(l.p50_ms <= 1.5 * s.p50_ms),
                ),
                _ => not_measured(),
            };
            let name = format!(
                "{endpoint} at {} rows within 1.5x of {} rows",
                rows_label(large),
                rows_label(small)
            );
            target(&name, &b.backend, "reads", judged)
        })
        .collect()
}

/// `10k`, `1M`, or the number.
#[must_use]
pub fn rows_label(rows: i64) -> String {
    match rows {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// The Markdown report.
#[must_use]
pub fn markdown(report: &Report) -> String {
    let mut md = String::new();
    let m = &report.machine;
    let _ = writeln!(md, "## Tally benchmark, {}\n", report.date);
    let _ = writeln!(
        md,
        "Machine: {} CPUs ({}), {} GiB memory, kernel {}, disk {}; load average (1/5/15 min) \
         {} at the start, {} at the end.  ",
        m.cpus,
        m.cpu_model,
        m.memory_gib,
        m.kernel,
        m.disk,
        report.load_average_start,
        report.load_average_end
    );
    let s = &report.settings;
    let _ = writeln!(
        md,
        "Command: `{}`; {} s measured per load point after {} s of warm-up; pool {} connections; \
         SQLite synchronous={}; {} webhooks per point; {} sequential requests per read.\n",
        report.command,
        s.point_seconds,
        s.warmup_seconds,
        s.pool_size,
        s.sqlite_synchronous,
        s.webhooks_per_point,
        s.read_samples
    );
    for note in &report.notes {
        let _ = writeln!(md, "- {note}");
    }
    md.push('\n');
    for b in &report.backends {
        md.push_str(&crate::tables::backend(b));
    }
    md.push_str(
        "### Targets\n\n| target | backend | mode | figures | result |\n|---|---|---|---|---|\n",
    );
    for t in &report.targets {
        let result = match t.met {
            Some(true) => "MET",
            Some(false) => "NOT MET",
            None => "not measured",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | **{result}** |",
            t.target, t.backend, t.mode, t.figure
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_counts_read_as_the_issue_writes_them() {
        assert_eq!(rows_label(10_000), "10k");
        assert_eq!(rows_label(1_000_000), "1M");
        assert_eq!(rows_label(1_500), "1500");
    }
}
