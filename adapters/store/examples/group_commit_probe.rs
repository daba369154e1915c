//! A quick measurement of group commit (not a timed test): consumes per second from 32
//! concurrent clients, group commit off and on, side by side.
//!
//! ```text
//! cargo run --release -p store --example group_commit_probe
//! TEST_DATABASE_URL=postgres://tally:tally@127.0.0.1:5433/tally \
//!     cargo run --release -p store --example group_commit_probe
//! ```
//!
//! Runs on a temporary SQLite file (WAL, `synchronous=FULL`) and, when `TEST_DATABASE_URL` is
//! set, on PostgreSQL (a fresh schema per run, dropped afterwards). Two workloads: every client
//! spends from its own account (`distinct`), or all spend from one account (`hot`). Each run
//! uses a fresh database. The two modes alternate for `PROBE_ROUNDS` rounds (default 3) and the
//! best rate of each is printed, which filters out moments when other work had the CPU.
//! Environment knobs: `PROBE_N` consumes per run (default 8 000), `PROBE_CLIENTS` (32),
//! `PROBE_POOL` pool size (the default 8), `PROBE_BATCH` (64), `PROBE_WAIT_US` (0), `PROBE_REFILL_US` (the default), `PROBE_WRITERS` (1),
//! `PROBE_ROUNDS` (3).

use std::time::{Duration, Instant};

use application::accounts::{Email, Role};
use application::ports::Writes;
use application::ports::{
    ConsumeCommand, GrantCommand, GrantSource, IdempotencyRecord, NewUser, UsageContext,
    UserRepository,
};
use domain::{Credits, IdempotencyKey, Timestamp, UserId};
use migrations::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database};
use store::{GroupCommit, SeaOrmStore, SqliteSynchronous, StoreSettings};
use tokio::task::JoinSet;

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// What one run is asked to do.
#[derive(Debug, Clone, Copy)]
struct Plan {
    consumes: usize,
    clients: usize,
    pool: u32,
    batch: usize,
    wait_us: u64,
    refill_us: u64,
    writers: usize,
    rounds: usize,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let plan = Plan {
        consumes: env_or("PROBE_N", 8_000),
        clients: env_or("PROBE_CLIENTS", 32),
        pool: env_or("PROBE_POOL", 8),
        batch: env_or("PROBE_BATCH", 64),
        wait_us: env_or("PROBE_WAIT_US", 0),
        refill_us: env_or("PROBE_REFILL_US", GroupCommit::on().refill_us),
        writers: env_or("PROBE_WRITERS", 1),
        rounds: env_or("PROBE_ROUNDS", 3),
    };
    println!("{plan:?}");
    println!(
        "{:<10} {:<9} {:>10} {:>10} {:>7} {:>10}",
        "backend", "workload", "off tx/s", "on tx/s", "on/off", "avg group"
    );
    let dir = tempfile::tempdir()?;
    let postgres = std::env::var("TEST_DATABASE_URL").ok();
    let mut n = 0;
    for hot in [false, true] {
        let sqlite = |group| {
            n += 1;
            let path = db_path(&dir, n);
            async move { sqlite_settings(&path, plan, group) }
        };
        compare("sqlite", hot, plan, sqlite).await?;
        if let Some(url) = &postgres {
            let pg = |group| postgres_settings(url, plan, group);
            compare("postgres", hot, plan, pg).await?;
        }
    }
    Ok(())
}

fn db_path(dir: &tempfile::TempDir, n: usize) -> String {
    dir.path()
        .join(format!("probe-{n}.db"))
        .display()
        .to_string()
}

fn sqlite_settings(path: &str, plan: Plan, group: GroupCommit) -> Result<Setup, Failure> {
    let settings = StoreSettings {
        max_connections: plan.pool,
        sqlite_synchronous: SqliteSynchronous::Full,
        group_commit: group,
        ..StoreSettings::new(format!("sqlite://{path}"))
    };
    Ok(Setup {
        settings,
        schema: None,
    })
}

async fn postgres_settings(url: &str, plan: Plan, group: GroupCommit) -> Result<Setup, Failure> {
    let schema = format!("probe_{}_{}", std::process::id(), next_schema());
    let admin = Database::connect(url).await?;
    admin
        .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
        .await?;
    let separator = if url.contains('?') { '&' } else { '?' };
    let settings = StoreSettings {
        max_connections: plan.pool,
        group_commit: group,
        ..StoreSettings::new(format!("{url}{separator}options[search_path]={schema}"))
    };
    Ok(Setup {
        settings,
        schema: Some((admin, schema)),
    })
}

/// A distinct number per call (schemas of one process).
fn next_schema() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A database for one run, and the PostgreSQL schema to drop after it.
struct Setup {
    settings: StoreSettings,
    schema: Option<(sea_orm::DatabaseConnection, String)>,
}

/// Run the workload with group commit off, then on, `rounds` times, and print the best of each.
async fn compare<F, Fut>(backend: &str, hot: bool, plan: Plan, mut setup: F) -> Result<(), Failure>
where
    F: FnMut(GroupCommit) -> Fut,
    Fut: std::future::Future<Output = Result<Setup, Failure>>,
{
    let on = GroupCommit {
        enabled: true,
        max_batch: plan.batch,
        max_wait_us: plan.wait_us,
        refill_us: plan.refill_us,
        writers: plan.writers,
        direct_when_idle: true,
    };
    let (mut off_rate, mut on_rate, mut avg) = (0, 0, 0);
    for _ in 0..plan.rounds.max(1) {
        let (rate, _) = run(setup(GroupCommit::off()).await?, hot, plan).await?;
        off_rate = off_rate.max(rate);
        let (rate, group) = run(setup(on).await?, hot, plan).await?;
        if rate > on_rate {
            (on_rate, avg) = (rate, group);
        }
    }
    let workload = if hot { "hot" } else { "distinct" };
    let ratio = on_rate * 100 / off_rate.max(1);
    let (avg_whole, avg_tenths) = (avg / 10, avg % 10);
    println!(
        "{backend:<10} {workload:<9} {off_rate:>10} {on_rate:>10} {:>3}.{:02}x {avg_whole:>8}.{avg_tenths}",
        ratio / 100,
        ratio % 100
    );
    Ok(())
}

/// One timed run on a fresh database: transactions per second and the average group size in
/// tenths.
async fn run(setup: Setup, hot: bool, plan: Plan) -> Result<(u128, u128), Failure> {
    let store = SeaOrmStore::connect(
        &setup.settings,
        std::sync::Arc::new(http_api::HostEventJson),
    )
    .await?;
    Migrator::up(store.connection(), None).await?;
    let accounts = if hot { 1 } else { plan.clients };
    let users = seed(&store, accounts, plan.consumes).await?;
    // Warm-up: one spend per client (connections, statement caches), not timed.
    spend_all(&store, &users, plan.clients, plan.clients, "warm").await?;
    let before = store.group_commit_stats().unwrap_or_default();
    let started = Instant::now();
    spend_all(&store, &users, plan.clients, plan.consumes, "run").await?;
    let elapsed = started.elapsed().max(Duration::from_micros(1));
    let after = store.group_commit_stats().unwrap_or_default();
    let groups = after.groups.saturating_sub(before.groups).max(1);
    let grouped = after.grouped.saturating_sub(before.grouped);
    store.close().await?;
    if let Some((admin, schema)) = setup.schema {
        admin
            .execute_unprepared(&format!("DROP SCHEMA {schema} CASCADE"))
            .await?;
    }
    let rate = u128::try_from(plan.consumes)? * 1_000_000 / elapsed.as_micros();
    Ok((rate, u128::from(grouped) * 10 / u128::from(groups)))
}

/// `accounts` users, each granted enough for every consume of the run.
async fn seed(
    store: &SeaOrmStore,
    accounts: usize,
    consumes: usize,
) -> Result<Vec<UserId>, Failure> {
    let mut users = Vec::with_capacity(accounts);
    let credits = i64::try_from(consumes + 1_000)? * 100;
    for i in 0..accounts {
        let id = UserId::new(format!("probe-{i}"))?;
        let user = NewUser {
            id: id.clone(),
            email: Email::parse(&format!("probe-{i}@example.com"))?,
            password_hash: None,
            role: Role::User,
            created_at: Timestamp::from_unix_millis(1),
            signup_identity: None,
        };
        store.create_user(&user).await?;
        let grant = GrantCommand {
            account_id: domain::AccountId::personal(&id),
            amount: Credits::from_hundredths(credits)?,
            source: GrantSource::Admin(format!("seed-{i}")),
            expires_at: None,
            now: Timestamp::from_unix_millis(2),
        };
        store.grant(&grant).await?;
        users.push(id);
    }
    Ok(users)
}

/// `total` consumes of 1.00 from `clients` tasks, each spending from `users[task % len]`.
async fn spend_all(
    store: &SeaOrmStore,
    users: &[UserId],
    clients: usize,
    total: usize,
    tag: &str,
) -> Result<(), Failure> {
    let mut tasks = JoinSet::new();
    for client in 0..clients {
        let store = store.clone();
        let user = users[client % users.len()].clone();
        let count = total / clients + usize::from(client < total % clients);
        let tag = format!("{tag}-{client}");
        tasks.spawn(async move {
            for i in 0..count {
                store
                    .consume(&command(&user, &format!("{tag}-{i}"))?)
                    .await?;
            }
            Ok::<(), Failure>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

fn command(user: &UserId, key: &str) -> Result<ConsumeCommand, Failure> {
    Ok(ConsumeCommand {
        account_id: domain::AccountId::personal(user),
        member_id: None,
        amount: Credits::from_hundredths(100)?,
        idempotency: IdempotencyRecord {
            key: IdempotencyKey::new(key)?,
            request_hash: "probe".into(),
        },
        context: UsageContext {
            feature: Some("probe".into()),
            ..UsageContext::default()
        },
        now: Timestamp::from_unix_millis(3),
        low_balance_below: None,
        spend_order: domain::SpendOrder::default(),
    })
}
