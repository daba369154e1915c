//! Service settings: `config/tally.toml`, overridden by environment variables.
//!
//! Every setting has a default that runs the embedded service (SQLite under `./data/`, the
//! provider sandbox). A bad value stops start-up with a message naming the setting. Secrets in
//! the file may be written as `${ENV_VAR}` so they never live in it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use application::use_cases::plans::PricingMode;
use application::use_cases::reconcile::ReconcileSettings;
use domain::{AppEnvironment, Credits, ProviderId};
use serde::Deserialize;
use store::{GroupCommit, PreparedStatements, SqliteSynchronous, StoreSettings};

use crate::host_tokens::{self, HostJwtFile, HostJwtSettings};

/// The default SQLite database, relative to the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/tally.db";

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("setting {setting}: {problem}")]
pub struct SettingsError {
    /// The setting's name (environment variable, or `tally.toml` key).
    pub setting: String,
    /// What is wrong.
    pub problem: String,
}

/// The environment variable `name` as a number within `range`, if it is set; `what` names the
/// number in the error.
fn ranged<T>(
    env: &dyn Env,
    name: &str,
    what: &str,
    range: std::ops::RangeInclusive<T>,
) -> Result<Option<T>, SettingsError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let Some(raw) = env.get(name) else {
        return Ok(None);
    };
    raw.parse::<T>()
        .ok()
        .filter(|n| range.contains(n))
        .map(Some)
        .ok_or_else(|| {
            bad(
                name,
                format!(
                    "{raw:?} is not {what} from {} to {}",
                    range.start(),
                    range.end()
                ),
            )
        })
}

fn bad(setting: &str, problem: impl Into<String>) -> SettingsError {
    SettingsError {
        setting: setting.to_owned(),
        problem: problem.into(),
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable.
    Pretty,
}

/// The background reconciler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcilerSettings {
    /// Whether `tally serve` runs it.
    pub enabled: bool,
    /// Pause between passes.
    pub interval_ms: u64,
    /// What one pass looks at.
    pub pass: ReconcileSettings,
}

/// Everything `tally serve` needs to know.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `BIND_ADDR`.
    pub bind_addr: SocketAddr,
    /// `DATABASE_URL` and the pool.
    pub database: StoreSettings,
    /// Whether `serve` applies pending migrations (always on SQLite; `MIGRATE_ON_START` on PostgreSQL).
    pub migrate_on_start: bool,
    /// `APP_BASE_URL`; `None` means `http://` + the bound address.
    pub app_base_url: Option<String>,
    /// `APP_ENV`.
    pub environment: AppEnvironment,
    /// `PRICING_MODE`.
    pub pricing_mode: PricingMode,
    /// `LOG_FORMAT`.
    pub log_format: LogFormat,
    /// How long a pending order waits for payment.
    pub order_lifetime_ms: i64,
    /// How long a sign-in session lasts.
    pub session_lifetime_ms: i64,
    /// How long an unsettled reservation holds credits.
    pub reservation_lifetime_ms: i64,
    /// Whether session cookies are `Secure` (on outside development).
    pub secure_cookies: bool,
    /// Trust `X-Forwarded-For` for rate limiting (behind a proxy).
    pub trust_forwarded_for: bool,
    /// `[signup]`: the sign-up rate limits per client address and per e-mail domain.
    pub sign_up: crate::sign_up::SignUpRates,
    /// `[hostJwt]` and `HOST_JWT_SECRET`: accept JWTs from a host application when a key
    /// source is set.
    pub host_jwt: Option<HostJwtSettings>,
    /// The reconciler.
    pub reconciler: ReconcilerSettings,
    /// `[subscriptions] renewalClockToleranceSeconds`: how far a renewal's period may start
    /// before the end of the period already paid (providers' clocks differ).
    pub renewal_clock_tolerance_ms: i64,
    /// `[subscriptions] allowSeveral`: whether a user may hold several live subscriptions.
    pub allow_several_subscriptions: bool,
    /// `[subscriptions] pastDueGraceDays`: how long a past-due subscription keeps access after
    /// its failed renewal.
    pub past_due_grace_ms: i64,
    /// Provider settings tables by provider; a provider without one runs on the sandbox.
    pub providers: BTreeMap<ProviderId, toml::Table>,
    /// `[events] retentionDays`: how long host events stay in the outbox and the feed.
    pub event_retention_ms: i64,
    /// `[events] lowBalanceThreshold`: the balance (in credits) below which a spend tells
    /// `credits.low_balance`; unset, only `credits.depleted` is told.
    pub low_balance_threshold: Option<Credits>,
    /// `[webhooks]`: delivery of host events to webhook endpoints.
    pub webhooks: crate::webhooks::WebhookSettings,
    /// `[telemetry] otlpEndpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`: the OTLP collector's base URL
    /// (`http://localhost:4318`) the spans are exported to; `None` exports nothing.
    pub otlp_endpoint: Option<String>,
    /// `[hostApp]` and `TALLY_RETURN_SECRET`: where buyers may return to, and the secret that
    /// signs their return links.
    pub host_app: crate::host_app::HostAppSettings,
    /// `[branding]`: the name, logo, colour and contacts every page shows.
    pub branding: web_pages::Branding,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileSettings {
    bind_addr: Option<String>,
    database_url: Option<String>,
    app_base_url: Option<String>,
    app_env: Option<String>,
    pricing_mode: Option<String>,
    log_format: Option<String>,
    #[serde(default)]
    database: DatabaseFile,
    #[serde(default)]
    lifetimes: LifetimesFile,
    #[serde(default)]
    http: HttpFile,
    #[serde(default)]
    reconciler: ReconcilerFile,
    #[serde(default)]
    subscriptions: SubscriptionsFile,
    #[serde(default)]
    signup: crate::sign_up::SignUpFile,
    #[serde(default)]
    providers: BTreeMap<String, toml::Table>,
    #[serde(default)]
    host_jwt: HostJwtFile,
    #[serde(default)]
    events: EventsFile,
    #[serde(default)]
    webhooks: crate::webhooks::WebhooksFile,
    #[serde(default)]
    telemetry: TelemetryFile,
    #[serde(default)]
    host_app: crate::host_app::HostAppFile,
    #[serde(default)]
    branding: crate::host_app::BrandingFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TelemetryFile {
    otlp_endpoint: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventsFile {
    retention_days: Option<u32>,
    low_balance_threshold: Option<rust_decimal::Decimal>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DatabaseFile {
    direct_url: Option<String>,
    prepared_statements: Option<bool>,
    max_connections: Option<u32>,
    sqlite_synchronous: Option<String>,
    busy_timeout_ms: Option<u64>,
    acquire_timeout_ms: Option<u64>,
    retry_attempts: Option<u32>,
    migrate_on_start: Option<bool>,
    group_commit: Option<String>,
    api_key_cache_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LifetimesFile {
    order_minutes: Option<u32>,
    session_hours: Option<u32>,
    reservation_minutes: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpFile {
    secure_cookies: Option<bool>,
    trust_forwarded_for: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionsFile {
    renewal_clock_tolerance_seconds: Option<u32>,
    allow_several: Option<bool>,
    past_due_grace_days: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReconcilerFile {
    enabled: Option<bool>,
    interval_seconds: Option<u32>,
    pending_after_seconds: Option<u32>,
    batch: Option<u32>,
    lease_seconds: Option<u32>,
}

/// Where environment variables come from (the process, or a map in tests).
pub trait Env {
    /// The variable's value, if set and not empty.
    fn get(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Env for BTreeMap<String, String> {
    fn get(&self, name: &str) -> Option<String> {
        BTreeMap::get(self, name).cloned()
    }
}

/// Load `dir/tally.toml` (optional) and apply `env`.
///
/// # Errors
/// The first setting that cannot be used, named.
pub fn load(dir: &Path, env: &dyn Env) -> Result<Settings, SettingsError> {
    let path = dir.join("tally.toml");
    let file: FileSettings = match std::fs::read_to_string(&path) {
        Ok(text) => {
            toml::from_str(&text).map_err(|e| bad(&path.display().to_string(), e.to_string()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileSettings::default(),
        Err(e) => return Err(bad(&path.display().to_string(), e.to_string())),
    };
    resolve(file, env)
}

fn pick(env: &dyn Env, var: &str, file: Option<String>) -> Option<String> {
    env.get(var).or(file)
}

fn resolve(file: FileSettings, env: &dyn Env) -> Result<Settings, SettingsError> {
    let bind_addr =
        pick(env, "BIND_ADDR", file.bind_addr).unwrap_or_else(|| "127.0.0.1:8080".into());
    let bind_addr = bind_addr
        .parse()
        .map_err(|_| bad("BIND_ADDR", format!("{bind_addr:?} is not host:port")))?;
    let environment = environment(pick(env, "APP_ENV", file.app_env).as_deref())?;
    let pricing = pick(env, "PRICING_MODE", file.pricing_mode).unwrap_or_else(|| "static".into());
    let pricing_mode = PricingMode::parse(&pricing).ok_or_else(|| {
        bad(
            "PRICING_MODE",
            format!("{pricing:?} is not static or dynamic"),
        )
    })?;
    let log_format = log_format(pick(env, "LOG_FORMAT", file.log_format).as_deref())?;
    let app_base_url = base_url(pick(env, "APP_BASE_URL", file.app_base_url))?;
    let (database, migrate_on_start) = database(
        &file.database,
        env,
        pick(env, "DATABASE_URL", file.database_url),
    )?;
    let secure_cookies = file
        .http
        .secure_cookies
        .unwrap_or(environment == AppEnvironment::Production);
    if environment == AppEnvironment::Production {
        production_guards(app_base_url.as_deref(), secure_cookies)?;
    }
    let (order_lifetime_ms, session_lifetime_ms, reservation_lifetime_ms) =
        lifetimes(&file.lifetimes)?;
    Ok(Settings {
        bind_addr,
        database,
        migrate_on_start,
        app_base_url,
        environment,
        pricing_mode,
        log_format,
        order_lifetime_ms,
        session_lifetime_ms,
        reservation_lifetime_ms,
        secure_cookies,
        trust_forwarded_for: file.http.trust_forwarded_for.unwrap_or(false),
        sign_up: crate::sign_up::resolve(&file.signup)?,
        host_jwt: host_tokens::resolve(file.host_jwt, env, environment)?,
        reconciler: reconciler(&file.reconciler)?,
        renewal_clock_tolerance_ms: renewal_tolerance(&file.subscriptions)?,
        allow_several_subscriptions: file.subscriptions.allow_several.unwrap_or(false),
        past_due_grace_ms: past_due_grace(&file.subscriptions)?,
        providers: providers(file.providers, env)?,
        event_retention_ms: event_retention(&file.events)?,
        low_balance_threshold: low_balance_threshold(&file.events)?,
        webhooks: crate::webhooks::resolve(&file.webhooks, environment)?,
        otlp_endpoint: otlp_endpoint(pick(
            env,
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            file.telemetry.otlp_endpoint,
        ))?,
        host_app: crate::host_app::resolve(file.host_app, env, environment)?,
        branding: crate::host_app::branding(file.branding, environment)?,
    })
}

/// `APP_ENV`: development unless it says production.
fn environment(raw: Option<&str>) -> Result<AppEnvironment, SettingsError> {
    match raw.unwrap_or("development") {
        "development" => Ok(AppEnvironment::Development),
        "production" => Ok(AppEnvironment::Production),
        other => Err(bad(
            "APP_ENV",
            format!("{other:?} is not development or production"),
        )),
    }
}

/// `LOG_FORMAT`: pretty unless it says json.
fn log_format(raw: Option<&str>) -> Result<LogFormat, SettingsError> {
    match raw.unwrap_or("pretty") {
        "json" => Ok(LogFormat::Json),
        "pretty" => Ok(LogFormat::Pretty),
        other => Err(bad(
            "LOG_FORMAT",
            format!("{other:?} is not json or pretty"),
        )),
    }
}

/// `APP_BASE_URL` without its trailing slashes; an http or https URL.
fn base_url(raw: Option<String>) -> Result<Option<String>, SettingsError> {
    let url = raw.map(|u| u.trim_end_matches('/').to_owned());
    if let Some(url) = &url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(bad("APP_BASE_URL", "must start with http:// or https://"));
    }
    Ok(url)
}

/// `[telemetry] otlpEndpoint`: an http or https URL; empty means none.
fn otlp_endpoint(raw: Option<String>) -> Result<Option<String>, SettingsError> {
    let Some(url) = raw.filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(bad(
            "telemetry.otlpEndpoint",
            "must be an http:// or https:// URL (OTLP over HTTP)",
        ));
    }
    Ok(Some(url.trim_end_matches('/').to_owned()))
}

/// `[lifetimes]`: how long orders, sessions and reservations last, in milliseconds.
fn lifetimes(lifetimes: &LifetimesFile) -> Result<(i64, i64, i64), SettingsError> {
    let order = minutes(
        lifetimes.order_minutes.unwrap_or(60),
        "lifetimes.orderMinutes",
    )?;
    let session = minutes(
        lifetimes
            .session_hours
            .unwrap_or(24 * 30)
            .saturating_mul(60),
        "lifetimes.sessionHours",
    )?;
    let reservation = minutes(
        lifetimes.reservation_minutes.unwrap_or(15),
        "lifetimes.reservationMinutes",
    )?;
    Ok((order, session, reservation))
}

/// What `APP_ENV=production` insists on: a public https base URL (providers call back to it and
/// buyers return to it) and `Secure` session cookies.
fn production_guards(base_url: Option<&str>, secure_cookies: bool) -> Result<(), SettingsError> {
    match base_url {
        None => {
            return Err(bad(
                "APP_BASE_URL",
                "must be set in production to the service's public https URL",
            ));
        }
        Some(url) if !url.starts_with("https://") => {
            return Err(bad("APP_BASE_URL", "must be an https:// URL in production"));
        }
        Some(_) => {}
    }
    if !secure_cookies {
        return Err(bad(
            "http.secureCookies",
            "must be true in production (session cookies only over https)",
        ));
    }
    Ok(())
}

fn minutes(value: u32, setting: &str) -> Result<i64, SettingsError> {
    if value == 0 {
        return Err(bad(setting, "must be at least 1"));
    }
    Ok(i64::from(value) * 60_000)
}

fn database(
    file: &DatabaseFile,
    env: &dyn Env,
    url: Option<String>,
) -> Result<(StoreSettings, bool), SettingsError> {
    let url = url.unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
    if !(url.starts_with("sqlite:")
        || url.starts_with("postgres://")
        || url.starts_with("postgresql://"))
    {
        return Err(bad("DATABASE_URL", "must be a sqlite: or postgres:// URL"));
    }
    let mut settings = StoreSettings::new(url);
    settings.direct_url = direct_url(
        pick(env, "DATABASE_DIRECT_URL", file.direct_url.clone()),
        settings.is_sqlite(),
    )?;
    settings.prepared_statements = prepared_statements(file, env)?;
    if let Some(n) = file.max_connections {
        settings.max_connections = n.clamp(1, 500);
    }
    let synchronous = pick(env, "SQLITE_SYNCHRONOUS", file.sqlite_synchronous.clone());
    settings.sqlite_synchronous = sqlite_synchronous(synchronous.as_deref())?;
    settings.busy_timeout_ms = file.busy_timeout_ms.unwrap_or(settings.busy_timeout_ms);
    settings.acquire_timeout_ms = file
        .acquire_timeout_ms
        .unwrap_or(settings.acquire_timeout_ms);
    settings.retry_attempts = file
        .retry_attempts
        .unwrap_or(settings.retry_attempts)
        .clamp(1, 20);
    settings.api_key_cache_ms = match env.get("TALLY_API_KEY_CACHE_MS") {
        Some(raw) => raw.parse::<u64>().map_err(|_| {
            bad(
                "TALLY_API_KEY_CACHE_MS",
                format!("{raw:?} is not a number of milliseconds"),
            )
        })?,
        None => file.api_key_cache_ms.unwrap_or(settings.api_key_cache_ms),
    }
    .min(60_000);
    settings.group_commit = group_commit(file, env, settings.is_sqlite())?;
    let migrate = true_or_false(
        env,
        "MIGRATE_ON_START",
        file.migrate_on_start.unwrap_or(false),
    )?;
    let is_sqlite = settings.is_sqlite();
    Ok((settings, migrate || is_sqlite))
}

/// `DATABASE_DIRECT_URL` (`[database] directUrl`): a PostgreSQL URL past the connection
/// pooler, for migrations; only with a PostgreSQL `DATABASE_URL`.
fn direct_url(raw: Option<String>, is_sqlite: bool) -> Result<Option<String>, SettingsError> {
    let Some(url) = raw.filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(bad("DATABASE_DIRECT_URL", "must be a postgres:// URL"));
    }
    if is_sqlite {
        return Err(bad(
            "DATABASE_DIRECT_URL",
            "is for PostgreSQL behind a connection pooler; DATABASE_URL names SQLite",
        ));
    }
    Ok(Some(url))
}

/// `DATABASE_PREPARED_STATEMENTS` (`[database] preparedStatements`): kept unless it says false
/// (behind a transaction pooler).
fn prepared_statements(
    file: &DatabaseFile,
    env: &dyn Env,
) -> Result<PreparedStatements, SettingsError> {
    let kept = true_or_false(
        env,
        "DATABASE_PREPARED_STATEMENTS",
        file.prepared_statements.unwrap_or(true),
    )?;
    Ok(if kept {
        PreparedStatements::Kept
    } else {
        PreparedStatements::Off
    })
}

/// `SQLITE_SYNCHRONOUS`: full unless it says normal.
fn sqlite_synchronous(raw: Option<&str>) -> Result<SqliteSynchronous, SettingsError> {
    match raw {
        None | Some("full") => Ok(SqliteSynchronous::Full),
        Some("normal") => Ok(SqliteSynchronous::Normal),
        Some(other) => Err(bad(
            "SQLITE_SYNCHRONOUS",
            format!("{other:?} is not full or normal"),
        )),
    }
}

/// The environment variable `name` as a flag (`true`/`1` or `false`/`0`), else `default`.
fn true_or_false(env: &dyn Env, name: &str, default: bool) -> Result<bool, SettingsError> {
    match env.get(name).as_deref() {
        None => Ok(default),
        Some("true" | "1") => Ok(true),
        Some("false" | "0") => Ok(false),
        Some(other) => Err(bad(name, format!("{other:?} is not true or false"))),
    }
}

/// A switch named `name` that is on unless `value` says `off`.
fn on_or_off(name: &str, value: Option<String>) -> Result<bool, SettingsError> {
    match value.as_deref() {
        None | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(bad(name, format!("{other:?} is not on or off"))),
    }
}

/// Group commit: on unless `TALLY_GROUP_COMMIT` says off, with its writers and refill wait.
fn group_commit(
    file: &DatabaseFile,
    env: &dyn Env,
    is_sqlite: bool,
) -> Result<GroupCommit, SettingsError> {
    // Group commit wins on both databases at 32 clients and more, and on hot accounts
    // (docs/performance.md): on by default.
    let grouped = on_or_off(
        "TALLY_GROUP_COMMIT",
        pick(env, "TALLY_GROUP_COMMIT", file.group_commit.clone()),
    )?;
    let mut group_commit = if grouped {
        GroupCommit::on()
    } else {
        GroupCommit::off()
    };
    if let Some(writers) = ranged(
        env,
        "TALLY_GROUP_COMMIT_WRITERS",
        "a number",
        1..=GroupCommit::MAX_WRITERS,
    )? {
        group_commit.writers = writers;
    }
    // PostgreSQL: a group costs a round trip or two and a flush whatever its size, so one group
    // of every waiting caller beats two of half (store probe: about 1.3x at 32 clients, more on
    // a hot account); SQLite's in-process groups gain nothing from waiting.
    if !is_sqlite {
        group_commit.refill_us = 500;
    }
    // A lone request is written at once rather than handed to the writer (the hop costs it
    // latency and buys nothing when there is no company): on unless said off.
    group_commit.direct_when_idle = on_or_off(
        "TALLY_GROUP_COMMIT_DIRECT",
        env.get("TALLY_GROUP_COMMIT_DIRECT"),
    )?;
    if let Some(refill_us) = ranged(
        env,
        "TALLY_GROUP_COMMIT_REFILL_US",
        "a number of microseconds",
        0..=GroupCommit::MAX_WAIT_US,
    )? {
        group_commit.refill_us = refill_us;
    }
    Ok(group_commit)
}

/// At most a day: a wider window would let a renewal overlap the period already paid.
fn renewal_tolerance(file: &SubscriptionsFile) -> Result<i64, SettingsError> {
    match file.renewal_clock_tolerance_seconds {
        None => Ok(application::service::DEFAULT_RENEWAL_CLOCK_TOLERANCE_MS),
        Some(seconds) if seconds <= 86_400 => Ok(i64::from(seconds) * 1000),
        Some(_) => Err(bad(
            "subscriptions.renewalClockToleranceSeconds",
            "must be at most 86400 (one day)",
        )),
    }
}

/// The most days a past-due subscription may keep access: past that, a failed renewal would
/// leave access open for longer than any provider retries.
const MAX_PAST_DUE_GRACE_DAYS: u32 = 90;

fn past_due_grace(file: &SubscriptionsFile) -> Result<i64, SettingsError> {
    match file.past_due_grace_days {
        None => Ok(application::service::DEFAULT_PAST_DUE_GRACE_MS),
        Some(days) if days <= MAX_PAST_DUE_GRACE_DAYS => Ok(i64::from(days) * 86_400_000),
        Some(_) => Err(bad("subscriptions.pastDueGraceDays", "must be at most 90")),
    }
}

/// How long host events are kept when `events.retentionDays` is not set.
const DEFAULT_EVENT_RETENTION_DAYS: u32 = 30;
/// The longest retention: a bound on the outbox's size.
const MAX_EVENT_RETENTION_DAYS: u32 = 3_650;

fn event_retention(file: &EventsFile) -> Result<i64, SettingsError> {
    match file.retention_days.unwrap_or(DEFAULT_EVENT_RETENTION_DAYS) {
        days @ 1..=MAX_EVENT_RETENTION_DAYS => Ok(i64::from(days) * 86_400_000),
        _ => Err(bad(
            "events.retentionDays",
            format!("must be between 1 and {MAX_EVENT_RETENTION_DAYS}"),
        )),
    }
}

fn low_balance_threshold(file: &EventsFile) -> Result<Option<Credits>, SettingsError> {
    let Some(credits) = file.low_balance_threshold else {
        return Ok(None);
    };
    match Credits::from_decimal(credits) {
        Ok(threshold) if !threshold.is_zero() => Ok(Some(threshold)),
        _ => Err(bad(
            "events.lowBalanceThreshold",
            "must be a positive number of credits with at most two decimals",
        )),
    }
}

fn reconciler(file: &ReconcilerFile) -> Result<ReconcilerSettings, SettingsError> {
    let seconds = |v: Option<u32>, default: u32, name: &str| -> Result<i64, SettingsError> {
        let v = v.unwrap_or(default);
        if v == 0 {
            return Err(bad(name, "must be at least 1"));
        }
        Ok(i64::from(v) * 1000)
    };
    Ok(ReconcilerSettings {
        enabled: file.enabled.unwrap_or(true),
        interval_ms: seconds(file.interval_seconds, 30, "reconciler.intervalSeconds")?
            .unsigned_abs(),
        pass: ReconcileSettings {
            pending_after_ms: seconds(
                file.pending_after_seconds,
                120,
                "reconciler.pendingAfterSeconds",
            )?,
            batch: file.batch.unwrap_or(100).clamp(1, 10_000),
            lease_ms: seconds(file.lease_seconds, 60, "reconciler.leaseSeconds")?,
        },
    })
}

/// Provider tables with `${VAR}` values replaced from the environment.
fn providers(
    tables: BTreeMap<String, toml::Table>,
    env: &dyn Env,
) -> Result<BTreeMap<ProviderId, toml::Table>, SettingsError> {
    let mut out = BTreeMap::new();
    for (id, mut table) in tables {
        let provider: ProviderId = id
            .parse()
            .map_err(|_| bad(&format!("providers.{id}"), "is not a provider id"))?;
        for (key, value) in &mut table {
            if let toml::Value::String(text) = value
                && let Some(var) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}'))
            {
                let setting = format!("providers.{id}.{key}");
                *text = env.get(var).ok_or_else(|| {
                    bad(&setting, format!("environment variable {var} is not set"))
                })?;
            }
        }
        out.insert(provider, table);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn defaults_run_the_embedded_service() {
        let s = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(s.bind_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(s.database.url, DEFAULT_DATABASE_URL);
        assert!(s.migrate_on_start);
        assert!(
            s.database.group_commit.enabled,
            "group commit is on by default on SQLite"
        );
        assert_eq!(s.environment, AppEnvironment::Development);
        assert_eq!(s.pricing_mode, PricingMode::Static);
        assert!(s.providers.is_empty());
    }

    #[test]
    fn otlp_export_is_off_unless_an_http_endpoint_is_given() {
        let off = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(off.otlp_endpoint, None);
        let file = FileSettings {
            telemetry: TelemetryFile {
                otlp_endpoint: Some("http://collector:4318/".into()),
            },
            ..FileSettings::default()
        };
        let on = resolve(file, &env(&[])).unwrap();
        assert_eq!(on.otlp_endpoint.as_deref(), Some("http://collector:4318"));
        let from_env = resolve(
            FileSettings::default(),
            &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example")]),
        )
        .unwrap();
        assert_eq!(
            from_env.otlp_endpoint.as_deref(),
            Some("https://otel.example")
        );
        let grpc = resolve(
            FileSettings::default(),
            &env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://collector:4317")]),
        );
        assert!(
            grpc.unwrap_err()
                .to_string()
                .contains("telemetry.otlpEndpoint")
        );
    }

    #[test]
    fn environment_variables_override_and_bad_values_are_named() {
        let s = resolve(
            FileSettings::default(),
            &env(&[
                ("DATABASE_URL", "postgres://a@b/c"),
                ("PRICING_MODE", "dynamic"),
            ]),
        )
        .unwrap();
        assert!(!s.migrate_on_start, "PostgreSQL migrates only when asked");
        assert!(
            s.database.group_commit.enabled,
            "group commit is on by default on PostgreSQL too"
        );
        assert_eq!(s.database.group_commit.refill_us, 500, "PostgreSQL refills");
        let sqlite = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(sqlite.database.group_commit.refill_us, 0, "SQLite does not");
        let tuned = resolve(
            FileSettings::default(),
            &env(&[
                ("TALLY_GROUP_COMMIT_REFILL_US", "250"),
                ("TALLY_GROUP_COMMIT_WRITERS", "2"),
                ("TALLY_GROUP_COMMIT_DIRECT", "off"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (
                tuned.database.group_commit.refill_us,
                tuned.database.group_commit.writers,
                tuned.database.group_commit.direct_when_idle,
            ),
            (250, 2, false)
        );
        assert!(
            sqlite.database.group_commit.direct_when_idle,
            "on unless off"
        );
        assert_eq!(s.pricing_mode, PricingMode::Dynamic);
        for (var, value) in [
            ("BIND_ADDR", "nope"),
            ("APP_ENV", "staging"),
            ("PRICING_MODE", "x"),
            ("LOG_FORMAT", "xml"),
            ("DATABASE_URL", "mysql://x"),
            ("APP_BASE_URL", "ftp://x"),
            ("SQLITE_SYNCHRONOUS", "off"),
            ("TALLY_GROUP_COMMIT_REFILL_US", "2000000"),
            ("TALLY_GROUP_COMMIT_REFILL_US", "soon"),
            ("TALLY_GROUP_COMMIT_WRITERS", "0"),
            ("TALLY_GROUP_COMMIT_DIRECT", "sometimes"),
        ] {
            let err = resolve(FileSettings::default(), &env(&[(var, value)])).unwrap_err();
            assert_eq!(err.setting, var);
        }
    }

    #[test]
    fn a_pooled_database_takes_a_direct_url_and_prepared_statements_off() {
        let s = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(s.database.direct_url, None);
        assert_eq!(s.database.prepared_statements, PreparedStatements::Kept);
        let pooled = [
            ("DATABASE_URL", "postgres://t:pw@pooler:6543/t"),
            ("DATABASE_DIRECT_URL", "postgres://t:pw@db:5432/t"),
            ("DATABASE_PREPARED_STATEMENTS", "false"),
        ];
        let s = resolve(FileSettings::default(), &env(&pooled)).unwrap();
        assert_eq!(
            s.database.direct_url.as_deref(),
            Some("postgres://t:pw@db:5432/t")
        );
        assert_eq!(s.database.prepared_statements, PreparedStatements::Off);
        let file: FileSettings = toml::from_str(
            "databaseUrl = \"postgres://t@pooler/t\"\n[database]\n\
             directUrl = \"postgresql://t@db/t\"\npreparedStatements = false\n",
        )
        .unwrap();
        let s = resolve(file, &env(&[])).unwrap();
        assert_eq!(
            s.database.direct_url.as_deref(),
            Some("postgresql://t@db/t")
        );
        assert_eq!(s.database.prepared_statements, PreparedStatements::Off);
        let file: FileSettings =
            toml::from_str("[database]\npreparedStatements = false\n").unwrap();
        let overridden = resolve(file, &env(&[("DATABASE_PREPARED_STATEMENTS", "true")]));
        assert_eq!(
            overridden.unwrap().database.prepared_statements,
            PreparedStatements::Kept,
            "the environment wins"
        );
        for pairs in [
            vec![("DATABASE_PREPARED_STATEMENTS", "no")],
            vec![
                ("DATABASE_URL", "postgres://t@pooler/t"),
                ("DATABASE_DIRECT_URL", "mysql://t@db/t"),
            ],
            vec![("DATABASE_DIRECT_URL", "postgres://t@db/t")],
        ] {
            let err = resolve(FileSettings::default(), &env(&pairs)).unwrap_err();
            assert_eq!(err.setting, pairs.last().unwrap().0, "{err}");
        }
    }

    #[test]
    fn the_renewal_clock_tolerance_is_an_hour_unless_set_and_at_most_a_day() {
        let s = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(s.renewal_clock_tolerance_ms, 3_600_000);
        let file: FileSettings =
            toml::from_str("[subscriptions]\nrenewalClockToleranceSeconds = 60\n").unwrap();
        assert_eq!(
            resolve(file, &env(&[])).unwrap().renewal_clock_tolerance_ms,
            60_000
        );
        let file: FileSettings =
            toml::from_str("[subscriptions]\nrenewalClockToleranceSeconds = 90000\n").unwrap();
        assert_eq!(
            resolve(file, &env(&[])).unwrap_err().setting,
            "subscriptions.renewalClockToleranceSeconds"
        );
    }

    #[test]
    fn a_low_balance_threshold_is_a_positive_amount_of_credits_or_unset() {
        let s = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(s.low_balance_threshold, None);
        for (text, hundredths) in [("10", 1000), ("2.5", 250), ("\"0.25\"", 25)] {
            let file: FileSettings =
                toml::from_str(&format!("[events]\nlowBalanceThreshold = {text}\n")).unwrap();
            let s = resolve(file, &env(&[])).unwrap();
            assert_eq!(
                s.low_balance_threshold.map(Credits::hundredths),
                Some(hundredths),
                "{text}"
            );
        }
        for text in ["0", "-5", "0.001"] {
            let file: FileSettings =
                toml::from_str(&format!("[events]\nlowBalanceThreshold = {text}\n")).unwrap();
            assert_eq!(
                resolve(file, &env(&[])).unwrap_err().setting,
                "events.lowBalanceThreshold",
                "{text}"
            );
        }
    }

    #[test]
    fn one_subscription_and_a_week_of_past_due_grace_unless_set() {
        let s = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert!(!s.allow_several_subscriptions);
        assert_eq!(s.past_due_grace_ms, 7 * 86_400_000);
        let file: FileSettings =
            toml::from_str("[subscriptions]\nallowSeveral = true\npastDueGraceDays = 0\n").unwrap();
        let s = resolve(file, &env(&[])).unwrap();
        assert!(s.allow_several_subscriptions);
        assert_eq!(s.past_due_grace_ms, 0);
        let file: FileSettings =
            toml::from_str("[subscriptions]\npastDueGraceDays = 91\n").unwrap();
        assert_eq!(
            resolve(file, &env(&[])).unwrap_err().setting,
            "subscriptions.pastDueGraceDays"
        );
    }

    #[test]
    fn host_events_are_kept_thirty_days_unless_set_and_never_zero() {
        let s = resolve(FileSettings::default(), &env(&[])).unwrap();
        assert_eq!(s.event_retention_ms, 30 * 86_400_000);
        let file: FileSettings = toml::from_str("[events]\nretentionDays = 7\n").unwrap();
        assert_eq!(
            resolve(file, &env(&[])).unwrap().event_retention_ms,
            7 * 86_400_000
        );
        for bad in ["0", "3651"] {
            let text = format!("[events]\nretentionDays = {bad}\n");
            let file: FileSettings = toml::from_str(&text).unwrap();
            assert_eq!(
                resolve(file, &env(&[])).unwrap_err().setting,
                "events.retentionDays"
            );
        }
    }

    #[test]
    fn production_needs_an_https_base_url_and_secure_cookies() {
        let https = [
            ("APP_ENV", "production"),
            ("APP_BASE_URL", "https://pay.example.com"),
        ];
        let s = resolve(FileSettings::default(), &env(&https)).unwrap();
        assert!(s.secure_cookies, "secure cookies by default in production");
        for (pairs, setting) in [
            (vec![("APP_ENV", "production")], "APP_BASE_URL"),
            (
                vec![
                    ("APP_ENV", "production"),
                    ("APP_BASE_URL", "http://pay.example.com"),
                ],
                "APP_BASE_URL",
            ),
        ] {
            let err = resolve(FileSettings::default(), &env(&pairs)).unwrap_err();
            assert_eq!(err.setting, setting, "{err}");
        }
        let file: FileSettings = toml::from_str("[http]\nsecureCookies = false\n").unwrap();
        let err = resolve(file, &env(&https)).unwrap_err();
        assert_eq!(err.setting, "http.secureCookies");
        let file: FileSettings = toml::from_str("[http]\nsecureCookies = false\n").unwrap();
        assert!(
            resolve(file, &env(&[])).is_ok(),
            "development may use plain http"
        );
    }

    #[test]
    fn provider_secrets_come_from_the_environment() {
        let file: FileSettings =
            toml::from_str("[providers.card_gateway]\nsecretKey = \"${STRIPE_KEY}\"\n").unwrap();
        let err = resolve(file, &env(&[])).unwrap_err();
        assert_eq!(err.setting, "providers.card_gateway.secretKey");
        let file: FileSettings =
            toml::from_str("[providers.card_gateway]\nsecretKey = \"${STRIPE_KEY}\"\n").unwrap();
        let s = resolve(file, &env(&[("STRIPE_KEY", "sk_test")])).unwrap();
        assert_eq!(
            s.providers[&ProviderId::CardGateway]["secretKey"].as_str(),
            Some("sk_test")
        );
        let file: FileSettings = toml::from_str("[providers.stripe]\n").unwrap();
        assert_eq!(
            resolve(file, &env(&[])).unwrap_err().setting,
            "providers.stripe"
        );
    }
}
