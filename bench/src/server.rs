//! The service under test: the release `tally` binary run as a child process, one per backend
//! and group-commit mode, and the `tally admin create-user` command.
//!
//! The child gets `BIND_ADDR` on a free loopback port, `DATABASE_URL`, `MIGRATE_ON_START=true`,
//! `APP_ENV=development`, `LOG_FORMAT=json`, `RUST_LOG=warn`, `SQLITE_SYNCHRONOUS` and
//! `TALLY_GROUP_COMMIT=on|off`, and `--config` pointing at a copy of `config/` whose
//! `tally.toml` only sets `[http] trustForwardedFor = true` (so that the benchmark can create
//! thousands of orders from distinct `X-Forwarded-For` clients under the initiate rate limit).
//! Its logs go to `target/bench/tally-<backend>-<mode>.log`. It is stopped with SIGTERM at the
//! end, and killed if the benchmark fails or panics first (`kill_on_drop`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// The longest start-up waited for.
const STARTUP_LIMIT: Duration = Duration::from_secs(120);
/// The longest a graceful stop is waited for (the service drains for up to 10 s).
const STOP_LIMIT: Duration = Duration::from_secs(20);

/// How to run one instance.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `tally` binary.
    pub binary: PathBuf,
    /// The configuration directory.
    pub config_dir: PathBuf,
    /// `DATABASE_URL`.
    pub database_url: String,
    /// `TALLY_GROUP_COMMIT`.
    pub group_commit: bool,
    /// Where its output goes.
    pub log: PathBuf,
}

impl Launch {
    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        for var in ["APP_BASE_URL", "PRICING_MODE", "HOST_JWT_SECRET"] {
            command.env_remove(var);
        }
        command
            .env("DATABASE_URL", &self.database_url)
            .env("MIGRATE_ON_START", "true")
            .env("APP_ENV", "development")
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "warn")
            .env("SQLITE_SYNCHRONOUS", crate::database::sqlite_synchronous())
            .env(
                "TALLY_GROUP_COMMIT",
                if self.group_commit { "on" } else { "off" },
            );
        command
    }
}

/// A running `tally serve`.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Its process id.
    pub pid: u32,
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// From spawning to the first `/readyz` 200.
    pub startup: Duration,
    log: PathBuf,
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

fn log_file(path: &Path) -> anyhow::Result<(Stdio, Stdio)> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the log {}", path.display()))?;
    let copy = file.try_clone()?;
    Ok((Stdio::from(file), Stdio::from(copy)))
}

/// The last lines of a log, to explain a failure.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

impl Server {
    /// Spawn `tally serve` and wait until `/readyz` answers 200.
    ///
    /// # Errors
    /// It cannot be spawned, exits, or is not ready within two minutes.
    pub async fn start(launch: &Launch) -> anyhow::Result<Self> {
        let port = free_port()?;
        let (out, err) = log_file(&launch.log)?;
        let mut command = launch.command();
        command
            .arg("serve")
            .arg("--config")
            .arg(&launch.config_dir)
            .env("BIND_ADDR", format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        let began = Instant::now();
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", launch.binary.display()))?;
        let pid = child.id().context("the child has no pid")?;
        let base_url = format!("http://127.0.0.1:{port}");
        let probe = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let ready = format!("{base_url}/readyz");
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "tally exited with {status} before it was ready; log {}:\n{}",
                    launch.log.display(),
                    tail(&launch.log)
                );
            }
            if let Ok(answer) = probe.get(&ready).send().await
                && answer.status().is_success()
            {
                break;
            }
            if began.elapsed() > STARTUP_LIMIT {
                bail!("tally was not ready after {STARTUP_LIMIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(Self {
            child,
            pid,
            base_url,
            startup: began.elapsed(),
            log: launch.log.clone(),
        })
    }

    /// Resident memory now (`VmRSS`), in KiB.
    ///
    /// # Errors
    /// `/proc/<pid>/status` cannot be read.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        rss_kib(self.pid)
    }

    /// Stop with SIGTERM and wait for the drain; kill after [`STOP_LIMIT`].
    ///
    /// # Errors
    /// The process cannot be signalled or waited for.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let signalled = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status()
            .await
            .is_ok_and(|s| s.success());
        if signalled && let Ok(status) = tokio::time::timeout(STOP_LIMIT, self.child.wait()).await {
            let status = status?;
            if !status.success() {
                eprintln!(
                    "  tally exited with {status} on SIGTERM; log {}:\n{}",
                    self.log.display(),
                    tail(&self.log)
                );
            }
            return Ok(());
        }
        self.child.kill().await.context("killing tally")
    }
}

/// `VmRSS` of `pid`, in KiB.
///
/// # Errors
/// `/proc/<pid>/status` cannot be read or has no `VmRSS`.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/<pid>/status")
}

/// `tally admin create-user --email <email> --admin` with `TALLY_PASSWORD`.
///
/// # Errors
/// The command fails or takes over a minute.
pub async fn create_admin(launch: &Launch, email: &str, password: &str) -> anyhow::Result<()> {
    let mut command = launch.command();
    command
        .args([
            "admin",
            "create-user",
            "--email",
            email,
            "--admin",
            "--config",
        ])
        .arg(&launch.config_dir)
        .env("TALLY_PASSWORD", password)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .context("tally admin create-user took over a minute")??;
    if !output.status.success() {
        bail!(
            "tally admin create-user failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Samples a process's resident memory every 100 ms, keeping the largest.
pub struct RssSampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<u64>,
}

impl RssSampler {
    /// Start sampling `pid`.
    #[must_use]
    pub fn start(pid: u32) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut peak = 0;
            loop {
                peak = peak.max(rss_kib(pid).unwrap_or(0));
                tokio::select! {
                    _ = stopped.changed() => return peak,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        });
        Self { stop, task }
    }

    /// Stop; the largest `VmRSS` seen, in KiB.
    pub async fn finish(self) -> u64 {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or(0)
    }
}
