//! The database of one run: a fresh SQLite file or a fresh PostgreSQL database (dropped
//! afterwards), and the benchmark's own pool on it (`store::bench::Pool`), opened with the
//! service's settings.
//!
//! The service's defaults (`store::StoreSettings::new`): 8 connections, 5 s acquire and busy
//! timeouts, and on SQLite WAL, `synchronous=FULL` (or `SQLITE_SYNCHRONOUS`), foreign keys on.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
pub use store::bench::Pool;

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
        store::bench::create_database(admin_url, name).await?;
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
        store::bench::drop_database(admin_url, &self.name).await
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
                let normal = sqlite_synchronous() == "normal";
                Pool::sqlite(&self.url, size, TIMEOUT, normal).await
            }
            Backend::Postgres => Pool::postgres(&self.url, size, TIMEOUT).await,
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
