//! One backend's run, in two phases on one database:
//!
//! 1. `TALLY_GROUP_COMMIT=off` on a fresh database (start-up includes the migrations): setup
//!    (administrator, API key, funded users); at each client count and on one hot account, the
//!    database's own limit (the service idle) immediately followed by consume over HTTP; the
//!    two-statement core; webhooks.
//! 2. `TALLY_GROUP_COMMIT=on`, restarted on the same database: consume and webhooks again, then
//!    the reads as the ledger grows (inserted only now, so that both consume phases met the same
//!    table sizes) and the pricing page.
//!
//! Resident memory is read idle after each start, sampled under load, and read again after.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sandbox::Sandbox;

use crate::api::Api;
use crate::database::{Backend, POOL_SIZE, Pool, Provisioned};
use crate::dblimit::{self, Shape};
use crate::load::Spec;
use crate::report::{BackendReport, DbRow, GROUPED, HttpRow, MemoryRow, PER_TRANSACTION, Startup};
use crate::server::{Launch, RssSampler, Server};
use crate::stats::Summary;
use crate::{consume, cpu, deliveries, reads, webhooks};

/// The client count the targets are judged at (and the hot-account variant runs at).
pub const TARGET_CLIENTS: usize = 32;
/// Users funded for consumption (one per client at the largest client count).
const USERS: usize = 128;
/// How long the service idles before its resident memory is read, idle and after a load:
/// longer than the 10 s over which the `tally` binary's allocator (jemalloc) gives freed pages
/// back, so that what is read is what the service holds, not garbage not yet returned.
const IDLE_SETTLE: Duration = Duration::from_secs(12);

/// How much to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Unmeasured time before each load point.
    pub warmup: Duration,
    /// Measured time of each load point.
    pub measure: Duration,
    /// Client counts.
    pub levels: Vec<usize>,
    /// Webhooks per point.
    pub webhooks_per_point: usize,
    /// Ledger sizes of the growth reads.
    pub sizes: Vec<i64>,
    /// Sequential requests per read figure.
    pub read_samples: usize,
    /// Host events delivered in the delivery figure.
    pub delivery_events: usize,
    /// The admin console's figures (`None`: skipped).
    pub admin_console: Option<crate::admin_console::AdminPlan>,
    /// Measure only the admin console's figures.
    pub admin_console_only: bool,
    /// Measure only ingestion (database limit, consume, webhooks): no event delivery, reads
    /// or pricing page.
    pub ingestion_only: bool,
    /// Only consume with and without spend limits.
    pub limits_only: bool,
    /// Only consume with tokens by kind against consume with one token count.
    pub usage_only: bool,
}

impl Plan {
    pub(crate) fn spec(&self, workers: usize) -> Spec {
        Spec {
            workers,
            warmup: self.warmup,
            measure: self.measure,
        }
    }
}

/// What every backend's run shares.
pub struct Ctx {
    /// The `tally` binary.
    pub binary: PathBuf,
    /// The configuration directory for the service.
    pub config_dir: PathBuf,
    /// `target/bench`.
    pub out: PathBuf,
    /// How much.
    pub plan: Plan,
    /// The bench's own sandbox simulators (they sign the webhooks).
    pub sandbox: Sandbox,
    /// The PostgreSQL server to create databases on.
    pub postgres_url: Option<String>,
    /// Kernel clock ticks per second (CPU accounting).
    pub ticks: f64,
}

/// What phase 1 set up for phase 2.
struct Setup {
    admin_token: String,
    api_key: String,
    users: Vec<String>,
    hot: Vec<String>,
    members: Vec<String>,
    limit_keys: crate::limits::Keys,
}

impl Setup {
    fn spenders(&self) -> crate::team::Spenders<'_> {
        crate::team::Spenders {
            personal: &self.hot,
            members: &self.members,
            api_key: &self.api_key,
        }
    }
}

/// Print one figure as it is measured.
pub(crate) fn progress(label: &str, s: &Summary) {
    eprintln!(
        "  {label}: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, {} errors{}",
        s.per_second,
        s.p50_ms,
        s.p99_ms,
        s.p999_ms,
        s.errors,
        s.first_error
            .as_deref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default()
    );
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// Run everything on `backend`; failures are recorded in the report, never thrown.
pub async fn backend(ctx: &Ctx, backend: Backend, run_id: &str) -> BackendReport {
    let mut report = BackendReport {
        backend: backend.name().to_owned(),
        ..BackendReport::default()
    };
    let dir = match tempfile::Builder::new().prefix("db-").tempdir_in(&ctx.out) {
        Ok(dir) => dir,
        Err(e) => {
            report.problems.push(format!("temporary directory: {e}"));
            return report;
        }
    };
    let db = match backend {
        Backend::Sqlite => Ok(Provisioned::sqlite(dir.path())),
        Backend::Postgres => match &ctx.postgres_url {
            Some(url) => Provisioned::postgres(url, &format!("tally_bench_{run_id}")).await,
            None => Err(anyhow::anyhow!("no PostgreSQL URL")),
        },
    };
    match db {
        Ok(db) => {
            eprintln!("{}: database {}", backend.name(), db.label);
            report.database.clone_from(&db.label);
            if let Err(e) = phases(ctx, &db, &mut report).await {
                eprintln!("{}: stopped: {e:#}", backend.name());
                report.problems.push(format!("{e:#}"));
            }
            if let Err(e) = db.remove().await {
                eprintln!("{}: could not drop the database: {e:#}", backend.name());
            }
        }
        Err(e) => report.problems.push(format!("provisioning: {e:#}")),
    }
    report
}

/// How to run the instance of `mode` on `db`.
pub(crate) fn launch(ctx: &Ctx, db: &Provisioned, mode: &str) -> Launch {
    Launch {
        binary: ctx.binary.clone(),
        config_dir: ctx.config_dir.clone(),
        database_url: db.url.clone(),
        group_commit: mode == GROUPED,
        log: ctx
            .out
            .join(format!("tally-{}-{mode}.log", db.backend.name())),
    }
}

async fn phases(ctx: &Ctx, db: &Provisioned, report: &mut BackendReport) -> anyhow::Result<()> {
    if ctx.plan.admin_console_only {
        return crate::admin_console::standalone(ctx, db, report).await;
    }
    if ctx.plan.limits_only || ctx.plan.usage_only {
        return alone(ctx, db, report).await;
    }
    let launch1 = launch(ctx, db, PER_TRANSACTION);
    let server = Server::start(&launch1).await?;
    eprintln!(
        "{}: per-transaction instance ready in {:.0} ms",
        db.backend.name(),
        server.startup.as_secs_f64() * 1000.0
    );
    report.startup.push(Startup {
        mode: PER_TRANSACTION.to_owned(),
        database: "fresh database, migrations applied".to_owned(),
        ms: server.startup.as_secs_f64() * 1000.0,
    });
    let api = Api::new(&server.base_url)?;
    let pool = db.pool().await?;
    report.version = pool.version().await?;
    let setup = setup(&launch1, &api, &pool).await?;
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle = server.rss_kib()?;
    let sampler = RssSampler::start(server.pid);
    paired_points(ctx, db, (&pool, &api, server.pid), &setup, report).await?;
    let team = crate::team::points(ctx, &api, &setup.spenders(), PER_TRANSACTION).await;
    report.team.extend(team);
    let limited = crate::limits::points(ctx, &api, &setup.limit_keys, PER_TRANSACTION).await;
    report.limits.extend(limited);
    if !ctx.plan.ingestion_only {
        let spenders = (setup.api_key.as_str(), setup.users.as_slice());
        let usage = crate::usage::points(ctx, &api, spenders, PER_TRANSACTION).await;
        report.usage.extend(usage);
    }
    webhook_points(ctx, (&api, &setup), &pool, PER_TRANSACTION, report).await;
    if !ctx.plan.ingestion_only {
        delivery_point(ctx, &api, &pool, &setup, report).await;
    }
    let peak = sampler.finish().await;
    tokio::time::sleep(IDLE_SETTLE).await;
    report.memory.push(MemoryRow {
        mode: PER_TRANSACTION.to_owned(),
        idle_mb: mib(idle),
        peak_load_mb: mib(peak),
        idle_after_load_mb: mib(server.rss_kib()?),
    });
    server.stop().await?;
    grouped_phase(ctx, db, &pool, &setup, report).await?;
    pool.close().await;
    Ok(())
}

/// Consume with and without limits (`--limits-only`), or with tokens by kind and with one
/// token count (`--usage-only`), in each mode, and nothing else.
async fn alone(ctx: &Ctx, db: &Provisioned, report: &mut BackendReport) -> anyhow::Result<()> {
    let launch1 = launch(ctx, db, PER_TRANSACTION);
    let server = Server::start(&launch1).await?;
    let api = Api::new(&server.base_url)?;
    let pool = db.pool().await?;
    report.version = pool.version().await?;
    let setup = setup(&launch1, &api, &pool).await?;
    alone_points(ctx, &api, &setup, PER_TRANSACTION, report).await;
    server.stop().await?;
    let server = Server::start(&launch(ctx, db, GROUPED)).await?;
    let api = Api::new(&server.base_url)?;
    alone_points(ctx, &api, &setup, GROUPED, report).await;
    server.stop().await?;
    pool.close().await;
    Ok(())
}

/// The points of [`alone`] in `mode`.
async fn alone_points(ctx: &Ctx, api: &Api, setup: &Setup, mode: &str, report: &mut BackendReport) {
    if ctx.plan.limits_only {
        let limited = crate::limits::points(ctx, api, &setup.limit_keys, mode).await;
        report.limits.extend(limited);
    } else {
        let spenders = (setup.api_key.as_str(), setup.users.as_slice());
        report
            .usage
            .extend(crate::usage::points(ctx, api, spenders, mode).await);
    }
}

async fn grouped_phase(
    ctx: &Ctx,
    db: &Provisioned,
    pool: &Pool,
    setup: &Setup,
    report: &mut BackendReport,
) -> anyhow::Result<()> {
    let server = Server::start(&launch(ctx, db, GROUPED)).await?;
    report.startup.push(Startup {
        mode: GROUPED.to_owned(),
        database: "restart on the populated database".to_owned(),
        ms: server.startup.as_secs_f64() * 1000.0,
    });
    let api = Api::new(&server.base_url)?;
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle = server.rss_kib()?;
    let sampler = RssSampler::start(server.pid);
    for point in consume_levels(&ctx.plan) {
        let row = http_point(ctx, (&api, server.pid), setup, GROUPED, point).await;
        report.consume.push(row);
    }
    let team = crate::team::points(ctx, &api, &setup.spenders(), GROUPED).await;
    report.team.extend(team);
    let limited = crate::limits::points(ctx, &api, &setup.limit_keys, GROUPED).await;
    report.limits.extend(limited);
    if !ctx.plan.ingestion_only {
        let spenders = (setup.api_key.as_str(), setup.users.as_slice());
        let usage = crate::usage::points(ctx, &api, spenders, GROUPED).await;
        report.usage.extend(usage);
    }
    team_ledger(pool, report).await;
    webhook_points(ctx, (&api, setup), pool, GROUPED, report).await;
    let peak = sampler.finish().await;
    let plan = &ctx.plan;
    if !plan.ingestion_only {
        after_ingestion(ctx, pool, setup, &api, report).await;
    }
    tokio::time::sleep(IDLE_SETTLE).await;
    report.memory.push(MemoryRow {
        mode: GROUPED.to_owned(),
        idle_mb: mib(idle),
        peak_load_mb: mib(peak),
        idle_after_load_mb: mib(server.rss_kib()?),
    });
    server.stop().await
}

/// After both modes spent the team's pool: its ledger adds up.
async fn team_ledger(pool: &Pool, report: &mut BackendReport) {
    if let Err(e) = store::bench::check_ledger(pool, crate::team::TEAM).await {
        report.problems.push(format!("the team's ledger: {e:#}"));
    }
}

/// The grouped phase's figures after ingestion: the admin console, the reads as the ledger
/// grows, the pricing page.
async fn after_ingestion(
    ctx: &Ctx,
    pool: &Pool,
    setup: &Setup,
    api: &Api,
    report: &mut BackendReport,
) {
    let plan = &ctx.plan;
    if let Some(admin) = plan.admin_console {
        // Before the growth reads, so that the small size meets a ledger of its own size.
        let measured =
            crate::admin_console::run(api, pool, &setup.admin_token, admin, crate::now_ms());
        match measured.await {
            Ok(rows) => report.admin_console = rows,
            Err(e) => report.problems.push(format!("admin console: {e:#}")),
        }
    }
    match reads::growth(api, pool, &plan.sizes, plan.read_samples, crate::now_ms).await {
        Ok((rows, seeded)) => {
            report.growth = rows;
            report.seeded = seeded;
        }
        Err(e) => report
            .problems
            .push(format!("reads as the ledger grows: {e:#}")),
    }
    match reads::pricing(api, plan.read_samples).await {
        Ok(page) => report.pages = Some(page),
        Err(e) => report.problems.push(format!("pricing page: {e:#}")),
    }
}

/// The administrator (CLI), its session and API key (HTTP), and the funded users (SQL).
async fn setup(launch: &Launch, api: &Api, pool: &Pool) -> anyhow::Result<Setup> {
    let email = "bench-admin@bench.example.com";
    crate::server::create_admin(launch, email, crate::PASSWORD).await?;
    let token = api.login(email, crate::PASSWORD).await?;
    let api_key = api.create_api_key(&token).await?;
    let users: Vec<String> = (0..USERS).map(|i| format!("bench-u-{i:03}")).collect();
    let hot = vec!["bench-hot".to_owned()];
    let limited = [
        crate::limits::FREE.to_owned(),
        crate::limits::CAPPED.to_owned(),
    ];
    let all: Vec<String> = users.iter().chain(&hot).chain(&limited).cloned().collect();
    let members: Vec<String> = (0..crate::team::MEMBERS)
        .map(|i| format!("bench-m-{i:03}"))
        .collect();
    let now = crate::now_ms();
    store::bench::create_users(pool, &all, now)
        .await
        .context("creating users")?;
    store::bench::fund(pool, &all, now)
        .await
        .context("funding users")?;
    store::bench::create_users(pool, &members, now)
        .await
        .context("creating the team's members")?;
    store::bench::create_team(
        pool,
        crate::team::TEAM,
        &members,
        crate::team::MEMBER_LIMIT,
        now,
    )
    .await
    .context("creating the team")?;
    let limit_keys = crate::limits::prepare(api, &token)
        .await
        .context("the accounts with and without limits")?;
    Ok(Setup {
        limit_keys,
        admin_token: token,
        api_key,
        users,
        hot,
        members,
    })
}

/// One point of the database's own limit.
#[derive(Debug, Clone, Copy)]
struct DbPoint {
    shape: Shape,
    clients: usize,
    hot: bool,
    connections: u32,
}

async fn db_point(ctx: &Ctx, (pool, pid): (&Pool, u32), setup: &Setup, p: DbPoint) -> DbRow {
    let who = Arc::new(if p.hot {
        setup.hot.clone()
    } else {
        setup.users.clone()
    });
    let tag = format!("db-{:?}-{}-{}-{}", p.shape, p.clients, p.hot, p.connections);
    let spec = ctx.plan.spec(p.clients);
    let cpu = cpu::watch(Some(pid), spec, ctx.ticks);
    let summary = dblimit::run(pool, p.shape, who, tag, spec, crate::now_ms).await;
    progress(
        &format!(
            "DB limit {:?} {} workers, {} connections{}",
            p.shape,
            p.clients,
            p.connections,
            if p.hot { ", one account" } else { "" }
        ),
        &summary,
    );
    DbRow {
        shape: p.shape,
        clients: p.clients,
        hot: p.hot,
        connections: p.connections,
        summary,
        cpu: cpu::finish(cpu).await,
    }
}

async fn http_point(
    ctx: &Ctx,
    (api, pid): (&Api, u32),
    setup: &Setup,
    mode: &str,
    (clients, hot): (usize, bool),
) -> HttpRow {
    let users = if hot { &setup.hot } else { &setup.users };
    let tag = format!("http-{mode}-{clients}-{hot}");
    let spec = ctx.plan.spec(clients);
    let cpu = cpu::watch(Some(pid), spec, ctx.ticks);
    let summary = consume::run(api, &setup.api_key, users, None, &tag, spec).await;
    progress(
        &format!(
            "HTTP consume {mode} {clients} clients{}",
            if hot { " one account" } else { "" }
        ),
        &summary,
    );
    HttpRow {
        mode: mode.to_owned(),
        clients,
        hot,
        summary,
        cpu: cpu::finish(cpu).await,
    }
}

/// The consume points: every client count, then the hot account at [`TARGET_CLIENTS`].
fn consume_levels(plan: &Plan) -> Vec<(usize, bool)> {
    let mut points: Vec<(usize, bool)> = plan.levels.iter().map(|&c| (c, false)).collect();
    points.push((TARGET_CLIENTS, true));
    points
}

/// The database's own limit and consume over HTTP one transaction per request, each HTTP point
/// right after the database point it is compared with (so that both meet the same background
/// load); then the two-statement core and (SQLite) the store's transaction through a single
/// connection.
async fn paired_points(
    ctx: &Ctx,
    db: &Provisioned,
    (pool, api, pid): (&Pool, &Api, u32),
    setup: &Setup,
    report: &mut BackendReport,
) -> anyhow::Result<()> {
    let store = |clients, hot, connections| DbPoint {
        shape: Shape::Store,
        clients,
        hot,
        connections,
    };
    for (clients, hot) in consume_levels(&ctx.plan) {
        let limit = db_point(ctx, (pool, pid), setup, store(clients, hot, POOL_SIZE)).await;
        report.db_limit.push(limit);
        let http = http_point(ctx, (api, pid), setup, PER_TRANSACTION, (clients, hot)).await;
        report.consume.push(http);
    }
    let core = DbPoint {
        shape: Shape::Core,
        ..store(TARGET_CLIENTS, false, POOL_SIZE)
    };
    report
        .db_limit
        .push(db_point(ctx, (pool, pid), setup, core).await);
    if db.backend == Backend::Sqlite {
        let single = db.pool_of(1).await?;
        let point = store(TARGET_CLIENTS, false, 1);
        report
            .db_limit
            .push(db_point(ctx, (&single, pid), setup, point).await);
        single.close().await;
    }
    Ok(())
}

/// Host events delivered to a local receiver (`deliveries`).
async fn delivery_point(
    ctx: &Ctx,
    api: &Api,
    pool: &Pool,
    setup: &Setup,
    report: &mut BackendReport,
) {
    let events = ctx.plan.delivery_events;
    match deliveries::run(api, &setup.admin_token, pool, events).await {
        Ok(row) => {
            eprintln!(
                "  event delivery: {} events in {:.2} s = {:.0}/s at {} concurrent deliveries, {} extra requests",
                row.events, row.seconds, row.per_second, row.concurrency, row.extra_requests
            );
            report.deliveries.push(row);
        }
        Err(e) => report.problems.push(format!("event delivery: {e:#}")),
    }
}

async fn webhook_points(
    ctx: &Ctx,
    (api, setup): (&Api, &Setup),
    pool: &Pool,
    mode: &str,
    report: &mut BackendReport,
) {
    let run = webhooks::Run {
        api,
        pool,
        api_key: &setup.api_key,
        sandbox: &ctx.sandbox,
        mode,
        per_point: ctx.plan.webhooks_per_point,
    };
    match run.measure().await {
        Ok((rows, verification)) => {
            for row in &rows {
                progress(
                    &format!(
                        "webhooks {mode} {} {} clients, buyers: {}",
                        row.provider, row.clients, row.buyers
                    ),
                    &row.summary,
                );
            }
            report.webhooks.extend(rows);
            report.webhook_checks.push(verification);
        }
        Err(e) => report.problems.push(format!("webhooks ({mode}): {e:#}")),
    }
}
