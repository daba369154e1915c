//! The benchmark's own pool on the run's database, and the PostgreSQL database's lifecycle.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sea_orm::sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::sqlx::{self, Connection};

/// A bound value.
#[derive(Debug, Clone)]
pub(super) enum Val {
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

/// A connection pool on SQLite or PostgreSQL.
#[derive(Debug, Clone)]
pub(super) enum Backend {
    /// SQLite.
    Sqlite(SqlitePool),
    /// PostgreSQL.
    Postgres(PgPool),
}

/// The benchmark's pool.
#[derive(Debug, Clone)]
pub struct Pool(pub(super) Backend);

impl Pool {
    /// A pool of `size` connections on the SQLite file at `url`, as the service opens it: WAL,
    /// foreign keys on, `timeout` to acquire a connection and as the busy timeout, and
    /// `synchronous=FULL` unless `normal`.
    ///
    /// # Errors
    /// The URL is not SQLite's, or the file cannot be opened.
    pub async fn sqlite(
        url: &str,
        size: u32,
        timeout: Duration,
        normal: bool,
    ) -> anyhow::Result<Self> {
        let synchronous = if normal {
            SqliteSynchronous::Normal
        } else {
            SqliteSynchronous::Full
        };
        let options = SqliteConnectOptions::from_str(url)?
            .foreign_keys(true)
            .busy_timeout(timeout)
            .synchronous(synchronous)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new()
            .max_connections(size)
            .acquire_timeout(timeout)
            .connect_with(options)
            .await
            .context("opening the SQLite file")?;
        Ok(Self(Backend::Sqlite(pool)))
    }

    /// A pool of `size` connections on the PostgreSQL database at `url`.
    ///
    /// # Errors
    /// The database is unreachable.
    pub async fn postgres(url: &str, size: u32, timeout: Duration) -> anyhow::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(timeout)
            .connect(url)
            .await
            .context("connecting to the benchmark database")?;
        Ok(Self(Backend::Postgres(pool)))
    }

    /// Whether it is PostgreSQL's.
    #[must_use]
    pub fn is_postgres(&self) -> bool {
        matches!(self.0, Backend::Postgres(_))
    }

    /// Run one statement; the number of rows it changed.
    pub(super) async fn execute(&self, sql: &'static str, values: &[Val]) -> anyhow::Result<u64> {
        let done = match &self.0 {
            Backend::Sqlite(p) => bind_all!(sqlx::query(sql), values)
                .execute(p)
                .await?
                .rows_affected(),
            Backend::Postgres(p) => bind_all!(sqlx::query(sql), values)
                .execute(p)
                .await?
                .rows_affected(),
        };
        Ok(done)
    }

    /// The integer in the first column of the first row (`None` without a row).
    pub(super) async fn scalar(
        &self,
        sql: &'static str,
        values: &[Val],
    ) -> anyhow::Result<Option<i64>> {
        let value = match &self.0 {
            Backend::Sqlite(p) => {
                bind_all!(sqlx::query_scalar::<_, i64>(sql), values)
                    .fetch_optional(p)
                    .await?
            }
            Backend::Postgres(p) => {
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
        Ok(match &self.0 {
            Backend::Sqlite(p) => {
                let v: String = sqlx::query_scalar("SELECT sqlite_version()")
                    .fetch_one(p)
                    .await?;
                format!("SQLite {v}")
            }
            Backend::Postgres(p) => sqlx::query_scalar("SHOW server_version")
                .fetch_one(p)
                .await
                .map(|v: String| format!("PostgreSQL {v}"))?,
        })
    }

    /// Close the pool.
    pub async fn close(&self) {
        match &self.0 {
            Backend::Sqlite(p) => p.close().await,
            Backend::Postgres(p) => p.close().await,
        }
    }
}

/// Create the empty PostgreSQL database `name` through `admin_url` (a role with CREATEDB).
///
/// # Errors
/// The server is unreachable or refuses.
pub async fn create_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let mut admin = PgConnection::connect(admin_url)
        .await
        .context("connecting to PostgreSQL (TEST_DATABASE_URL / --database-url)")?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .with_context(|| format!("CREATE DATABASE {name}"))?;
    let _ = admin.close().await;
    Ok(())
}

/// Drop the PostgreSQL database `name` through `admin_url`, even with connections open.
///
/// # Errors
/// The server is unreachable or refuses.
pub async fn drop_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let mut admin = PgConnection::connect(admin_url).await?;
    let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .with_context(|| format!("dropping database {name}"))?;
    let _ = admin.close().await;
    Ok(())
}
