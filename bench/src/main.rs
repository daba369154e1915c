//! `tally-bench` (`just bench`): the benchmark of issue 7.
//!
//! It builds and starts the release `tally` binary itself, once per backend (the embedded SQLite
//! default, and PostgreSQL when `TEST_DATABASE_URL` or `--database-url` names a server whose role
//! may create databases) and group-commit mode, and measures in one invocation:
//!
//! 1. the database's own limit: the store's consume transaction issued straight through sqlx at
//!    the service's pool size and durability settings ([`dblimit`]);
//! 2. consume over HTTP at 1, 8, 32 and 128 clients, one transaction per request and with group
//!    commit, against that limit, and from a team's pool (members with limits) against one
//!    personal account at 32 and 128 clients ([`consume`], [`team`]);
//! 3. really signed webhooks: `card_gateway` (HMAC) and `wallet_qr` (RSA + AES-GCM)
//!    ([`webhooks`]);
//! 4. balance and transaction pages at 10 thousand and 1 million ledger rows ([`reads`]);
//! 5. the pricing page, resident memory idle and under load, start-up time;
//! 6. the admin console's customer search and customer page at 1 thousand and 100 thousand
//!    customers (1 million ledger rows) ([`admin_console`]; `--no-admin-console` skips it,
//!    `--admin-console-only` runs nothing else).
//!
//! It writes `target/bench/report.json` and `target/bench/report.md`, prints the Markdown, and
//! judges the issue's targets (MET / NOT MET). Setup that the API cannot do (funding users, a
//! million ledger rows) is written with SQL straight into the service's database by
//! `store::bench`.
//! The benchmark is a tool, not a test: nothing here runs under `cargo test` but two unit tests.

#![allow(
    clippy::float_arithmetic,
    reason = "a benchmark computes rates, ratios and percentages"
)]

mod admin_console;
mod api;
mod consume;
mod cpu;
mod database;
mod dblimit;
mod deliveries;
mod limits;
mod load;
mod machine;
mod paired;
mod reads;
mod report;
mod run;
mod server;
mod stats;
mod tables;
mod team;
mod usage;
mod webhooks;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, ensure};
use clap::Parser;

use crate::database::Backend;
use crate::report::{Report, Settings};
use crate::run::{Ctx, Plan};

/// The password of every user the benchmark signs in as.
pub(crate) const PASSWORD: &str = "bench-password-0123456789";

/// Which backends to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Which {
    Sqlite,
    Postgres,
    Both,
}

/// Tally's benchmark: starts `tally serve` and measures it against the database's own limit.
#[derive(Debug, Parser)]
#[command(name = "tally-bench")]
struct Args {
    /// Which databases to run on (PostgreSQL is skipped with a note when no URL is given)
    #[arg(long, value_enum, default_value = "both")]
    backend: Which,
    /// 2 s per load point, fewer webhooks and reads (the 1M-row ledger is still built)
    #[arg(long)]
    quick: bool,
    /// PostgreSQL server URL whose role may CREATE DATABASE [default: $TEST_DATABASE_URL]
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// Use this tally binary instead of building target/release/tally
    #[arg(long, value_name = "PATH")]
    tally_bin: Option<PathBuf>,
    /// Measured seconds per load point (default 10, or 2 with --quick; at most 120)
    #[arg(long, value_name = "SECONDS")]
    seconds: Option<u64>,
    /// Rows of the large ledger (default 1000000; at most 10000000)
    #[arg(long, value_name = "ROWS")]
    large_rows: Option<i64>,
    /// Do not rewrite docs/performance.md (a run without --quick rewrites it by default)
    #[arg(long)]
    no_docs: bool,
    /// Skip the admin console's figures (customer search and page at 1k and 100k customers)
    #[arg(long, conflicts_with = "admin_console_only")]
    no_admin_console: bool,
    /// Measure only the admin console's figures (never rewrites docs/performance.md)
    #[arg(long)]
    admin_console_only: bool,
    /// Measure only ingestion: the database's limit, consume over HTTP and signed webhooks, in
    /// both modes (no event delivery, reads, pricing page or admin console; never rewrites
    /// docs/performance.md). For before/after comparisons of the write paths.
    #[arg(long, conflicts_with_all = ["admin_console_only", "no_admin_console"])]
    ingestion_only: bool,
    /// Measure only consume with spend limits against consume without, in both modes (never
    /// rewrites docs/performance.md). For before/after comparisons of the limits' path.
    #[arg(long, conflicts_with_all = ["admin_console_only", "ingestion_only"])]
    limits_only: bool,
    /// Measure only consume with tokens by kind against consume with one token count, in both
    /// modes (never rewrites docs/performance.md). For before/after comparisons of pricing.
    #[arg(long, conflicts_with_all = ["admin_console_only", "ingestion_only", "limits_only"])]
    usage_only: bool,
    /// Signed webhooks per webhook point (default 1000, or 100 with --quick; at most 20000)
    #[arg(long, value_name = "COUNT")]
    webhooks_per_point: Option<usize>,
}

impl Args {
    fn plan(&self) -> Plan {
        let seconds = self.seconds.unwrap_or(if self.quick { 2 } else { 10 });
        Plan {
            warmup: Duration::from_millis(if self.quick { 500 } else { 1000 }),
            measure: Duration::from_secs(seconds.clamp(1, 120)),
            levels: vec![1, 8, 32, 128],
            webhooks_per_point: self
                .webhooks_per_point
                .unwrap_or(if self.quick { 100 } else { 1000 })
                .clamp(1, 20_000),
            sizes: vec![
                10_000,
                self.large_rows
                    .unwrap_or(1_000_000)
                    .clamp(10_001, 10_000_000),
            ],
            read_samples: if self.quick { 100 } else { 300 },
            delivery_events: if self.quick { 2_000 } else { 20_000 },
            admin_console: (!self.no_admin_console && !self.ingestion_only).then_some(
                admin_console::AdminPlan {
                    samples: if self.quick { 100 } else { 300 },
                },
            ),
            admin_console_only: self.admin_console_only,
            ingestion_only: self.ingestion_only,
            limits_only: self.limits_only,
            usage_only: self.usage_only,
        }
    }
}

/// Now, in milliseconds since the epoch: the timestamps of the rows the benchmark writes.
#[allow(
    clippy::disallowed_methods,
    reason = "the benchmark is a tool outside the service's ports; it stamps its rows with the wall clock"
)]
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[allow(
    clippy::disallowed_methods,
    reason = "the report is dated with the wall clock"
)]
fn today() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn main() -> ExitCode {
    let args = Args::parse();
    gateways::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// `--tally-bin`, or `cargo build --release -p bootstrap --bin tally` and its output.
async fn tally_binary(args: &Args, root: &Path) -> anyhow::Result<PathBuf> {
    if let Some(path) = &args.tally_bin {
        ensure!(
            path.is_file(),
            "--tally-bin {} is not a file",
            path.display()
        );
        return Ok(path.clone());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building the service: cargo build --release -p bootstrap --bin tally");
    let mut command = tokio::process::Command::new(cargo);
    // `cargo run` gives this process its package's CARGO_MANIFEST_DIR, CARGO_PKG_* and such;
    // some build scripts (ring's) rerun when those change, so a nested build that inherited them
    // would rebuild half the tree, and the next plain build would rebuild it back.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_BIN_NAME",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*name)
        {
            command.env_remove(&*name);
        }
    }
    let status = command
        .args(["build", "--release", "-p", "bootstrap", "--bin", "tally"])
        .current_dir(root)
        .status()
        .await
        .context("running cargo build")?;
    ensure!(status.success(), "cargo build of tally failed ({status})");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(target.join("release").join("tally"))
}

/// Whether `binary` contains `needle` (does this build read `TALLY_GROUP_COMMIT` at all?).
fn mentions(binary: &Path, needle: &[u8]) -> bool {
    std::fs::read(binary).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

/// A copy of `config/` whose `tally.toml` trusts `X-Forwarded-For` (see `server`) and, unless
/// the run measures only ingestion, sets up host event delivery for the delivery figure (an
/// ingestion-only run writes no `[webhooks]` table, so that a `tally` from before host events,
/// which refuses it, can be measured too).
fn config_dir(root: &Path, out: &Path, args: &Args) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("config-").tempdir_in(out)?;
    for file in ["payment.toml", "credits.toml"] {
        std::fs::copy(root.join("config").join(file), dir.path().join(file))
            .with_context(|| format!("copying config/{file}"))?;
    }
    // The model priced by token kind, for the usage points (not for a partial run that may
    // measure a `tally` from before the price book, which refuses the table).
    if args.usage_only || !(args.ingestion_only || args.limits_only) {
        let credits = dir.path().join("credits.toml");
        let mut text = std::fs::read_to_string(&credits)?;
        text.push_str(usage::PRICE_BOOK);
        std::fs::write(&credits, text)?;
    }
    let delivery = !args.ingestion_only;
    let mut settings = String::from(
        "# Written by tally-bench: rate limits keyed by X-Forwarded-For, so that the benchmark\n\
         # can create thousands of orders; everything else is the default.\n\
         [http]\ntrustForwardedFor = true\n\n\
         # Its buyers all sign up in one e-mail domain: no per-domain sign-up limit in the way.\n\
         [signup]\nperDomainBurst = 1000000\nperDomainPerHour = 1000000\n",
    );
    if delivery {
        settings.push_str(
            "\n# Host event delivery at the benchmark's concurrency, polled often (the events \
             arrive in\n# one burst).\n[webhooks]\nconcurrency = 32\npollIntervalMs = 50\n",
        );
    }
    std::fs::write(dir.path().join("tally.toml"), settings)?;
    Ok(dir)
}

async fn bench(args: Args) -> anyhow::Result<()> {
    let root = workspace_root();
    let out = root.join("target").join("bench");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let binary = tally_binary(&args, &root).await?;
    let group_commit_in_binary = mentions(&binary, b"TALLY_GROUP_COMMIT");
    let config = config_dir(&root, &out, &args)?;
    let plan = args.plan();
    let postgres_url = args.database_url.clone().or_else(|| {
        std::env::var("TEST_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
    });
    if let Some(url) = &postgres_url {
        database::check_postgres_url(url)?;
    }
    let mut notes = Vec::new();
    if !group_commit_in_binary {
        notes.push(
            "This tally binary never reads TALLY_GROUP_COMMIT: group commit is not wired to \
             `tally serve` yet, so the grouped columns ran the same code as the per-transaction \
             ones (any difference between them is noise)."
                .to_owned(),
        );
    }
    let mut backends = Vec::new();
    if args.backend != Which::Postgres {
        backends.push(Backend::Sqlite);
    }
    if args.backend != Which::Sqlite {
        if postgres_url.is_some() {
            backends.push(Backend::Postgres);
        } else {
            notes.push(
                "PostgreSQL skipped: set TEST_DATABASE_URL or pass --database-url (a role with \
                 CREATEDB; the benchmark creates and drops its own database)."
                    .to_owned(),
            );
        }
    }
    let ctx = Ctx {
        binary,
        config_dir: config.path().to_path_buf(),
        out: out.clone(),
        plan,
        sandbox: sandbox::Sandbox::new("http://127.0.0.1", Arc::new(BenchClock)),
        postgres_url,
        ticks: cpu::ticks_per_second(),
    };
    let run_id = format!("{}_{}", std::process::id(), now_ms());
    let load_start = machine::load_average();
    let mut reports = Vec::new();
    for backend in backends {
        reports.push(run::backend(&ctx, backend, &run_id).await);
    }
    let mut report = assemble(&args, &ctx, &out, reports, notes, group_commit_in_binary);
    report.load_average_start = load_start;
    keep_measured_targets(&args, &mut report);
    write(&report, &out)?;
    let partial =
        args.admin_console_only || args.ingestion_only || args.limits_only || args.usage_only;
    if !args.quick && !args.no_docs && !partial {
        write_docs(&root.join("docs").join("performance.md"), &report)?;
    }
    Ok(())
}

/// Drop the targets a partial run (`--admin-console-only`, `--ingestion-only`) did not
/// measure: listing them would only say so.
fn keep_measured_targets(args: &Args, report: &mut Report) {
    if args.admin_console_only {
        report.targets.retain(|t| t.target.starts_with("admin "));
    }
    if args.ingestion_only {
        report
            .targets
            .retain(|t| t.target.contains("consume") || t.target.starts_with("p99"));
    }
    if args.limits_only {
        report
            .targets
            .retain(|t| t.target.contains("limit and a key limit"));
    }
    if args.usage_only {
        report
            .targets
            .retain(|t| t.target.contains("usage breakdown"));
    }
}

/// The line of `docs/performance.md` after which hand-written sections (before/after
/// comparisons made with `--ingestion-only`) follow; a full run keeps them.
const KEPT_MARKER: &str = "<!-- Kept by the benchmark: sections below are not regenerated. -->";

/// Rewrite `docs/performance.md`: the preamble, this run's report, then whatever followed
/// [`KEPT_MARKER`] in the file before.
fn write_docs(docs: &Path, report: &Report) -> anyhow::Result<()> {
    let before = std::fs::read_to_string(docs).unwrap_or_default();
    let kept = before
        .find(KEPT_MARKER)
        .map_or_else(String::new, |at| format!("\n{}", &before[at..]));
    let text = format!(
        "{}\n{}{kept}",
        PERFORMANCE_PREAMBLE,
        report::markdown(report)
    );
    std::fs::write(docs, text).with_context(|| format!("writing {}", docs.display()))?;
    eprintln!("wrote {}", docs.display());
    Ok(())
}

/// The top of `docs/performance.md`; the latest run's report follows it.
const PERFORMANCE_PREAMBLE: &str = "# Performance

Written by the benchmark (`just bench`, the `bench` crate) at the end of every full run; the
report below is the latest one, with the machine it ran on. Reproduce it with:

```bash
eval \"$(.ci/start-postgres 5433)\"   # a throwaway PostgreSQL (or set TEST_DATABASE_URL to a role with CREATEDB)
just bench                           # = cargo run --release -p bench --bin tally-bench
```

`--quick` (2 s per point) and `--backend sqlite|postgres` give a faster, noisier look without
touching this file; `target/bench/report.json` holds every figure of the last run.
`--ingestion-only` measures only the database's limit, consume and signed webhooks (it also
runs against a `tally` from before host events, for before/after comparisons such as the one
at the end of this file), `--limits-only` measures only consume with spend limits against
consume without, `--usage-only` only consume with tokens by kind against consume with one token
count, and `--webhooks-per-point N` sets how many webhooks each point posts.
A full run rewrites this file but keeps what follows its `<!-- Kept by the benchmark … -->` line.

What it does, in one invocation per database (the embedded SQLite default, then PostgreSQL):
it builds and starts the release `tally serve`, creates an administrator and an API key through
the CLI and the API, funds 129 users with SQL, and then measures

1. **the database's own limit**: the store's exact consume transaction (key lookup, conditional
   decrement, ledger insert, lot draw-down) issued straight through sqlx by N workers at the
   service's pool size (8) and durability (`synchronous=FULL` on SQLite), right before
2. **consume over HTTP** (`POST /api/credits/consume`, API key, Idempotency-Key) by N closed-loop
   clients, N = 1, 8, 32, 128, plus 32 clients on one account: one transaction per request
   (`TALLY_GROUP_COMMIT=off`), then the service restarted with group commit on;
3. **signed webhooks**: `card_gateway` (HMAC-SHA256) and `wallet_qr` (RSA-SHA256 signature over
   an AES-256-GCM encrypted resource), each for its own pending order, some delivered twice, and
   afterwards a check that every order was granted exactly once and the ledger adds up;
4. **reads as the ledger grows**: balance and transaction pages 1 and 50 at 10 thousand and
   1 million ledger rows on one account;
5. **the pricing page**, resident memory (idle, peak under load, idle after) and start-up time;
6. **the admin console as the customer base grows**: the customer search and a customer's page
   (overview and first transactions page) as the administrator at 1 thousand customers, then at
   100 thousand customers with 1 million ledger rows, seeded with bulk SQL
   (`--no-admin-console` skips it, `--admin-console-only` runs only it).

Every figure is from a 2-core machine shared by the service, the database and the benchmark's
own clients, so CPU time spent in one is taken from the others: the CPU table shows where it
went. The targets are those of issue 7; each is printed MET or NOT MET as measured.

";

fn assemble(
    args: &Args,
    ctx: &Ctx,
    out: &Path,
    backends: Vec<report::BackendReport>,
    mut notes: Vec<String>,
    group_commit_in_binary: bool,
) -> Report {
    let plan = &ctx.plan;
    for b in &backends {
        if let (Some(p), Some(g)) = (
            b.http(report::PER_TRANSACTION, run::TARGET_CLIENTS, false),
            b.http(report::GROUPED, run::TARGET_CLIENTS, false),
        ) {
            notes.push(format!(
                "{}: at {} clients group commit gives {:.0} req/s against {:.0} one transaction \
                 per request ({:.2}x): {}.",
                b.backend,
                run::TARGET_CLIENTS,
                g.per_second,
                p.per_second,
                g.per_second / p.per_second.max(1e-9),
                if g.per_second > p.per_second * 1.05 {
                    "grouping wins here"
                } else {
                    "grouping does not win here"
                }
            ));
        }
    }
    let mut command = String::from("just bench");
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if !raw.is_empty() {
        command = format!(
            "cargo run --release -p bench --bin tally-bench -- {}",
            raw.join(" ")
        );
    }
    Report {
        date: today(),
        command,
        load_average_start: String::new(),
        load_average_end: machine::load_average(),
        quick: args.quick,
        machine: machine::describe(out),
        settings: Settings {
            point_seconds: plan.measure.as_secs_f64(),
            warmup_seconds: plan.warmup.as_secs_f64(),
            clients: plan.levels.clone(),
            webhooks_per_point: plan.webhooks_per_point,
            ledger_sizes: plan.sizes.clone(),
            read_samples: plan.read_samples,
            pool_size: database::POOL_SIZE,
            sqlite_synchronous: database::sqlite_synchronous().to_owned(),
        },
        group_commit_in_binary,
        targets: report::targets(&backends, &plan.sizes),
        backends,
        notes,
    }
}

fn write(report: &Report, out: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(out.join("report.json"), json).context("writing report.json")?;
    let md = report::markdown(report);
    std::fs::write(out.join("report.md"), &md).context("writing report.md")?;
    println!("{md}");
    eprintln!(
        "wrote {} and {}",
        out.join("report.json").display(),
        out.join("report.md").display()
    );
    Ok(())
}

/// The wall clock for the bench's sandbox simulators (webhook timestamps must be current).
struct BenchClock;

impl application::ports::Clock for BenchClock {
    fn now(&self) -> domain::Timestamp {
        domain::Timestamp::from_unix_millis(now_ms())
    }
}
