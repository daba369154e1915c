//! The database of one run: a fresh SQLite file or a fresh PostgreSQL database (dropped
//! afterwards), and the benchmark's own sqlx pool on it, opened with the service's settings.
//!
//! The service's defaults (`store::StoreSettings::new`): 8 connections, 5 s acquire and busy
//! timeouts, and on SQLite WAL, `synchronous=FULL` (or `SQLITE_SYNCHRONOUS`), foreign keys on.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use sea_orm::sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::sqlx::{self, Connection};
use serde::Serialize;

/// The service's pool size.
pub const POOL_SIZE: u32 = 8;
/// The service's acquire and busy timeouts.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Which database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The embedded default.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// Its name in the report.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// `SQLITE_SYNCHRONOUS` as the service reads it (`full` unless `normal`).
#[must_use]
pub fn sqlite_synchronous() -> &'static str {
    match std::env::var("SQLITE_SYNCHRONOUS").as_deref() {
        Ok("normal") => "normal",
        _ => "full",
    }
}

/// A provisioned database: the URL the service gets, and how to remove it.
#[derive(Debug)]
pub struct Provisioned {
    /// Which backend.
    pub backend: Backend,
    /// `DATABASE_URL` for `tally serve`.
    pub url: String,
    /// A name safe to print (no password).
    pub label: String,
    /// The PostgreSQL server URL the database was created through, to drop it.
    admin_url: Option<String>,
    /// The PostgreSQL database name.
    name: String,
}

impl Provisioned {
    /// A SQLite file in `dir` (the directory is removed by its owner).
    #[must_use]
    pub fn sqlite(dir: &Path) -> Self {
        let file = dir.join("tally-bench.db");
        Self {
            backend: Backend::Sqlite,
            url: format!("sqlite://{}", file.display()),
            label: file.display().to_string(),
            admin_url: None,
            name: String::new(),
        }
    }

    /// A new, empty PostgreSQL database created through `admin_url` (a role with CREATEDB).
    ///
    /// # Errors
    /// The server is unreachable or refuses.
    pub async fn postgres(admin_url: &str, name: &str) -> anyhow::Result<Self> {
        let mut url = reqwest::Url::parse(admin_url).context("parsing the PostgreSQL URL")?;
        let mut admin = PgConnection::connect(admin_url)
            .await
            .context("connecting to PostgreSQL (TEST_DATABASE_URL / --database-url)")?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .with_context(|| format!("CREATE DATABASE {name}"))?;
        let _ = admin.close().await;
        url.set_path(&format!("/{name}"));
        let host = url.host_str().unwrap_or("?").to_owned();
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        Ok(Self {
            backend: Backend::Postgres,
            url: url.to_string(),
            label: format!("postgres://{host}{port}/{name}"),
            admin_url: Some(admin_url.to_owned()),
            name: name.to_owned(),
        })
    }

    /// Drop the PostgreSQL database (nothing for SQLite, whose directory goes with its owner).
    ///
    /// # Errors
    /// The server refuses.
    pub async fn remove(&self) -> anyhow::Result<()> {
        let Some(admin_url) = &self.admin_url else {
            return Ok(());
        };
        let mut admin = PgConnection::connect(admin_url).await?;
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut admin)
            .await
            .with_context(|| format!("dropping database {}", self.name))?;
        let _ = admin.close().await;
        Ok(())
    }

    /// The benchmark's pool on this database, with the service's pool size and settings.
    ///
    /// # Errors
    /// The database is unreachable.
    pub async fn pool(&self) -> anyhow::Result<Pool> {
        self.pool_of(POOL_SIZE).await
    }

    /// A pool of `size` connections, otherwise as [`Provisioned::pool`].
    ///
    /// # Errors
    /// The database is unreachable.
    pub async fn pool_of(&self, size: u32) -> anyhow::Result<Pool> {
        match self.backend {
            Backend::Sqlite => {
                let synchronous = match sqlite_synchronous() {
                    "normal" => SqliteSynchronous::Normal,
                    _ => SqliteSynchronous::Full,
                };
                let options = SqliteConnectOptions::from_str(&self.url)?
                    .foreign_keys(true)
                    .busy_timeout(TIMEOUT)
                    .synchronous(synchronous)
                    .journal_mode(SqliteJournalMode::Wal);
                let pool = SqlitePoolOptions::new()
                    .max_connections(size)
                    .acquire_timeout(TIMEOUT)
                    .connect_with(options)
                    .await
                    .context("opening the SQLite file")?;
                Ok(Pool::Sqlite(pool))
            }
            Backend::Postgres => {
                let pool = PgPoolOptions::new()
                    .max_connections(size)
                    .acquire_timeout(TIMEOUT)
                    .connect(&self.url)
                    .await
                    .context("connecting to the benchmark database")?;
                Ok(Pool::Postgres(pool))
            }
        }
    }
}

/// A bound value.
#[derive(Debug, Clone)]
pub enum Val {
    /// An integer.
    I(i64),
    /// Text.
    T(String),
}

/// Bind `values` to a sqlx query, for either backend.
macro_rules! bind_all {
    ($query:expr, $values:expr) => {{
        let mut query = $query;
        for value in $values {
            query = match value {
                Val::I(n) => query.bind(*n),
                Val::T(s) => query.bind(s.clone()),
            };
        }
        query
    }};
}

/// The benchmark's pool.
#[derive(Debug, Clone)]
pub enum Pool {
    /// SQLite.
    Sqlite(SqlitePool),
    /// PostgreSQL.
    Postgres(PgPool),
}

impl Pool {
    /// Which backend.
    #[must_use]
    pub fn backend(&self) -> Backend {
        match self {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// Run one statement; the number of rows it changed.
    ///
    /// # Errors
    /// The database refuses.
    pub async fn execute(&self, sql: &'static str, values: &[Val]) -> anyhow::Result<u64> {
        let done = match self {
            Pool::Sqlite(p) => bind_all!(sqlx::query(sql), values)
                .execute(p)
                .await?
                .rows_affected(),
            Pool::Postgres(p) => bind_all!(sqlx::query(sql), values)
                .execute(p)
                .await?
                .rows_affected(),
        };
        Ok(done)
    }

    /// The integer in the first column of the first row (`None` without a row).
    ///
    /// # Errors
    /// The database refuses.
    pub async fn scalar(&self, sql: &'static str, values: &[Val]) -> anyhow::Result<Option<i64>> {
        let value = match self {
            Pool::Sqlite(p) => {
                bind_all!(sqlx::query_scalar::<_, i64>(sql), values)
                    .fetch_optional(p)
                    .await?
            }
            Pool::Postgres(p) => {
                bind_all!(sqlx::query_scalar::<_, i64>(sql), values)
                    .fetch_optional(p)
                    .await?
            }
        };
        Ok(value)
    }

    /// The database's version string.
    ///
    /// # Errors
    /// The database refuses.
    pub async fn version(&self) -> anyhow::Result<String> {
        Ok(match self {
            Pool::Sqlite(p) => {
                let v: String = sqlx::query_scalar("SELECT sqlite_version()")
                    .fetch_one(p)
                    .await?;
                format!("SQLite {v}")
            }
            Pool::Postgres(p) => sqlx::query_scalar("SHOW server_version")
                .fetch_one(p)
                .await
                .map(|v: String| format!("PostgreSQL {v}"))?,
        })
    }

    /// Close the pool.
    pub async fn close(&self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

/// Refuse a database URL that is neither SQLite nor PostgreSQL.
///
/// # Errors
/// Not a `postgres://` URL.
pub fn check_postgres_url(url: &str) -> anyhow::Result<()> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        bail!("--database-url must be a postgres:// URL");
    }
    Ok(())
}
