//! The machinery of the slow tests: `tally serve` processes on PostgreSQL, killed on drop; a
//! fresh database per test; a load balancer in front of several instances; a throwaway
//! PostgreSQL cluster to stop and start; and the switch that runs all of it only when asked.
//!
//! Every instance gets `APP_BASE_URL` = the load balancer, as behind a real one: the provider
//! redirects buyers and posts webhooks to the public address, and the balancer spreads them over
//! the instances. The sandbox plays the providers; its state lives in the memory of one
//! process, so the balancer sends every `/sandbox/…` request (the gateways' provider API calls
//! included) to the first instance, which the tests never kill.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use poem::listener::{Acceptor, TcpAcceptor};
use poem::{Endpoint, Request, Response, Server};
use tokio::sync::oneshot;

use super::api::{Account, Api, PASSWORD, client};

/// How long a process gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a `psql`, `initdb` or `pg_ctl` call may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Serializes the slow tests: each starts several processes on a two-core machine.
static SLOW_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether the slow tests run (`TALLY_RELIABILITY=1`); otherwise says so and returns `None`.
/// The guard keeps the slow tests one at a time.
pub async fn enabled(test: &str) -> Option<tokio::sync::MutexGuard<'static, ()>> {
    if std::env::var("TALLY_RELIABILITY").as_deref() != Ok("1") {
        println!(
            "{test}: skipped (a slow reliability test; run with TALLY_RELIABILITY=1, or `just reliability`)"
        );
        return None;
    }
    Some(SLOW_TESTS.lock().await)
}

/// `TEST_DATABASE_URL`, which the slow tests need.
pub fn test_database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .expect("TALLY_RELIABILITY=1 needs TEST_DATABASE_URL (a PostgreSQL role with CREATEDB)")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `tally` binary: `TALLY_BIN`, else `<target dir>/debug/tally`, which `just reliability`
/// and `.ci/reliability` build first (`cargo build -p bootstrap --bin tally`).
pub fn tally_binary() -> PathBuf {
    if let Ok(bin) = std::env::var("TALLY_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map_or_else(|_| workspace().join("target"), PathBuf::from);
    let bin = target.join("debug").join("tally");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p bootstrap --bin tally` first",
        bin.display()
    );
    bin
}

/// Where a test's process logs go: `target/reliability/<test>/`.
pub fn log_dir(test: &str) -> PathBuf {
    let dir = workspace().join("target").join("reliability").join(test);
    std::fs::create_dir_all(&dir).expect("log dir");
    dir
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Run `command` to completion within `TOOL_TIMEOUT`; panics with its output when it fails.
fn run(mut command: Command, what: &str) -> String {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let output = child.wait_with_output().expect("output");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(status.success(), "{what} failed ({status}): {text}");
            return text;
        }
        if started.elapsed() > TOOL_TIMEOUT {
            let _ = child.kill();
            panic!("{what} took longer than {TOOL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One fresh PostgreSQL database, dropped with the value.
pub struct Database {
    admin_url: String,
    name: String,
    /// Its URL, for `DATABASE_URL`.
    pub url: String,
}

impl Database {
    /// `CREATE DATABASE` through the role of `admin_url` (which needs `CREATEDB`).
    pub fn create(admin_url: &str, test: &str) -> Self {
        let name = format!(
            "tally_rel_{}_{}",
            std::process::id(),
            test.replace('-', "_")
        );
        let name: String = name.chars().take(60).collect();
        let base = admin_url.split('?').next().unwrap_or(admin_url);
        let url = format!(
            "{}/{name}",
            &base[..base.rfind('/').expect("a database URL")]
        );
        let database = Self {
            admin_url: admin_url.to_owned(),
            name,
            url,
        };
        if let Err(error) = database.drop_database() {
            panic!("dropping {} before the test: {error}", database.name);
        }
        psql(admin_url, &format!("CREATE DATABASE \"{}\"", database.name));
        database
    }

    /// `DROP DATABASE … WITH (FORCE)`, tried for up to five seconds: a role without
    /// `pg_signal_backend` cannot terminate a backend it does not own, such as an autovacuum
    /// worker busy on the database right after a load (seen once in CI, after every assertion of
    /// the test had passed), so that one is waited out.
    fn drop_database(&self) -> Result<(), String> {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let mut last = String::new();
        for _ in 0..25 {
            let output = Command::new("psql")
                .args([
                    self.admin_url.as_str(),
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-qAtc",
                    &sql,
                ])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("psql: {e}"))?;
            if output.status.success() {
                return Ok(());
            }
            last = String::from_utf8_lossy(&output.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(last)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // A throwaway database left behind is no failure of the test that used it.
        if let Err(error) = self.drop_database() {
            eprintln!("leaving database {} behind: {error}", self.name);
        }
    }
}

fn psql(url: &str, sql: &str) -> String {
    let mut command = Command::new("psql");
    command.args([url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql]);
    run(command, &format!("psql {sql}"))
}

/// A `--config` directory: the shipped `payment.toml` and `credits.toml`, and a `tally.toml`.
pub struct ConfigDir {
    dir: tempfile::TempDir,
}

impl ConfigDir {
    /// The shipped catalog with `tally_toml` as the service settings.
    pub fn new(tally_toml: &str) -> Self {
        let dir = tempfile::tempdir().expect("config dir");
        for file in ["payment.toml", "credits.toml"] {
            std::fs::copy(workspace().join("config").join(file), dir.path().join(file))
                .expect("copy config");
        }
        std::fs::write(dir.path().join("tally.toml"), tally_toml).expect("tally.toml");
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The service settings of the slow tests: a pool the instances can share one PostgreSQL with,
/// short waits, and no reconciler (the tests play the provider's retries themselves).
pub const TALLY_TOML: &str = "\
[database]
maxConnections = 16
acquireTimeoutMs = 2000
retryAttempts = 6

[reconciler]
enabled = false
";

/// How to start one `tally serve`.
#[derive(Debug, Clone)]
pub struct Instance {
    /// A name for its log file.
    pub name: String,
    pub port: u16,
    pub database_url: String,
    /// `APP_BASE_URL`.
    pub base_url: String,
    pub migrate: bool,
    pub config: PathBuf,
    pub logs: PathBuf,
}

/// A running `tally serve`, killed (SIGKILL) on drop.
pub struct Tally {
    spec: Instance,
    child: Option<Child>,
    starts: u32,
}

impl Tally {
    /// Start the process and wait until `/readyz` answers 200.
    pub async fn start(spec: Instance) -> Self {
        let mut tally = Self {
            spec,
            child: None,
            starts: 0,
        };
        tally.spawn();
        tally.wait_ready().await;
        tally
    }

    /// `http://127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.spec.port)
    }

    pub fn api(&self) -> Api {
        Api::new(&self.address())
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log_path = self
            .spec
            .logs
            .join(format!("{}-{}.log", self.spec.name, self.starts));
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut command = Command::new(tally_binary());
        command
            .args(["serve", "--config"])
            .arg(&self.spec.config)
            .env("BIND_ADDR", format!("127.0.0.1:{}", self.spec.port))
            .env("DATABASE_URL", &self.spec.database_url)
            .env("APP_BASE_URL", &self.spec.base_url)
            .env(
                "MIGRATE_ON_START",
                if self.spec.migrate { "true" } else { "false" },
            )
            .env("APP_ENV", "development")
            .env("LOG_FORMAT", "json")
            .env_remove("HOST_JWT_SECRET")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        self.child = Some(command.spawn().expect("tally serve starts"));
    }

    async fn wait_ready(&mut self) {
        let http = client(1);
        let url = format!("{}/readyz", self.address());
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            self.assert_running("at start");
            if let Ok(response) = http.get(&url).send().await
                && response.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{} not ready after {READY_TIMEOUT:?}: {}",
            self.spec.name,
            self.log_tail()
        );
    }

    /// Panics with the log's end when the process has exited (`when` says at which point):
    /// also after it answered ready, since a `/readyz` answered by something else on the port
    /// (picked free, then bound by another process first) must not pass for this instance.
    pub fn assert_running(&mut self, when: &str) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            panic!(
                "{} exited {when} ({status}): {}",
                self.spec.name,
                self.log_tail()
            );
        }
    }

    /// `kill -9`: no drain, no cleanup, connections cut mid-transaction.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL on Unix
            let _ = child.wait();
        }
    }

    /// Start it again on the same port, database and settings (never migrating again).
    pub async fn restart(&mut self) {
        self.kill9();
        self.spec.migrate = false;
        self.spawn();
        self.wait_ready().await;
    }

    /// The end of the current log, for failure messages.
    pub fn log_tail(&self) -> String {
        let path = self
            .spec
            .logs
            .join(format!("{}-{}.log", self.spec.name, self.starts));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What every reliability test starts from: an administrator made with the CLI (as an operator
/// does) and signed in, a service API key it creates, and a newly registered buyer.
pub async fn admin_key_and_buyer(
    api: &Api,
    config: &Path,
    database_url: &str,
) -> (String, Account) {
    create_admin(config, database_url, "admin@example.com");
    let admin = api.login("admin@example.com").await;
    let api_key = api.create_api_key(&admin.token).await;
    let buyer = api.register("buyer@example.com").await;
    (api_key, buyer)
}

/// `tally admin create-user --admin` against `database_url`, as an operator does.
pub fn create_admin(config: &Path, database_url: &str, email: &str) {
    let mut command = Command::new(tally_binary());
    command
        .args([
            "admin",
            "create-user",
            "--admin",
            "--email",
            email,
            "--config",
        ])
        .arg(config)
        .env("DATABASE_URL", database_url)
        .env("TALLY_PASSWORD", PASSWORD);
    run(command, "tally admin create-user");
}

/// A round-robin HTTP load balancer in the test process: `/sandbox/…` to one fixed backend,
/// everything else to the next of `targets`. A backend that cannot be reached is a 502, as
/// with a real balancer that has not noticed yet.
pub struct Balancer {
    pub address: String,
    state: Arc<Forward>,
    stop: Option<oneshot::Sender<()>>,
}

struct Forward {
    http: reqwest::Client,
    sandbox: String,
    targets: Mutex<Vec<String>>,
    next: AtomicUsize,
    /// Webhook requests forwarded, by backend.
    webhooks: Mutex<std::collections::BTreeMap<String, usize>>,
}

/// Headers a proxy does not pass on.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "content-length",
    "host",
    "keep-alive",
    "transfer-encoding",
    "upgrade",
];

impl Endpoint for Forward {
    type Output = Response;

    async fn call(&self, request: Request) -> poem::Result<Response> {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let target = if path.starts_with("/sandbox") {
            self.sandbox.clone()
        } else {
            let targets = self.targets.lock().unwrap_or_else(PoisonError::into_inner);
            targets[self.next.fetch_add(1, Ordering::Relaxed) % targets.len()].clone()
        };
        if path.starts_with("/api/payment/webhook/") {
            let mut counts = self.webhooks.lock().unwrap_or_else(PoisonError::into_inner);
            *counts.entry(target.clone()).or_insert(0) += 1;
        }
        let method =
            reqwest::Method::from_bytes(request.method().as_str().as_bytes()).expect("method");
        let mut forwarded = self.http.request(method, format!("{target}{path}"));
        for (name, value) in request.headers() {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                forwarded = forwarded.header(name.as_str(), value.as_bytes());
            }
        }
        let body = request.into_body().into_vec().await?;
        let Ok(answer) = forwarded.body(body).send().await else {
            return Ok(Response::builder()
                .status(poem::http::StatusCode::BAD_GATEWAY)
                .finish());
        };
        let mut response = Response::builder()
            .status(poem::http::StatusCode::from_u16(answer.status().as_u16()).expect("status"));
        for (name, value) in answer.headers() {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                response = response.header(name.as_str(), value.as_bytes());
            }
        }
        let bytes = answer.bytes().await.unwrap_or_default();
        Ok(response.body(bytes.to_vec()))
    }
}

impl Balancer {
    /// Serve on `listener`, bound before the instances started: a port picked as free and
    /// bound only later can meanwhile become one of their connections' local ports.
    pub fn start_on(listener: std::net::TcpListener, sandbox: &str, targets: Vec<String>) -> Self {
        listener.set_nonblocking(true).expect("non-blocking");
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let acceptor = TcpAcceptor::from_tokio(listener).expect("balancer acceptor");
        let address = format!(
            "http://{}",
            acceptor.local_addr()[0].as_socket_addr().expect("tcp")
        );
        let state = Arc::new(Forward {
            http: client(256),
            sandbox: sandbox.to_owned(),
            targets: Mutex::new(targets),
            next: AtomicUsize::new(0),
            webhooks: Mutex::new(std::collections::BTreeMap::new()),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let endpoint = SharedForward(state.clone());
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            let _ = Server::new_with_acceptor(acceptor)
                .run_with_graceful_shutdown(endpoint, shutdown, Some(Duration::from_secs(1)))
                .await;
        });
        Self {
            address,
            state,
            stop: Some(stop),
        }
    }

    /// Send non-sandbox traffic to `targets` from now on.
    pub fn route_to(&self, targets: Vec<String>) {
        *self
            .state
            .targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = targets;
    }

    /// Webhook requests forwarded so far, by backend address.
    pub fn webhooks_by_backend(&self) -> std::collections::BTreeMap<String, usize> {
        self.state
            .webhooks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

struct SharedForward(Arc<Forward>);

impl Endpoint for SharedForward {
    type Output = Response;

    async fn call(&self, request: Request) -> poem::Result<Response> {
        self.0.call(request).await
    }
}

/// Several instances on one fresh database behind a balancer, with an administrator, a service
/// API key and a buyer. Dropped in reverse: the balancer, the processes, then the database.
pub struct Cluster {
    pub balancer: Balancer,
    pub instances: Vec<Tally>,
    _config: ConfigDir,
    _database: Database,
    /// Through the balancer.
    pub api: Api,
    pub api_key: String,
    pub buyer: Account,
}

impl Cluster {
    /// `count` instances of `tally serve` on a new database of `TEST_DATABASE_URL`; the first
    /// migrates it.
    pub async fn start(test: &str, count: usize, tally_toml: &str) -> Self {
        let database = Database::create(&test_database_url(), test);
        let config = ConfigDir::new(tally_toml);
        let logs = log_dir(test);
        let balancer_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("balancer binds");
        let balancer_port = balancer_listener.local_addr().expect("address").port();
        let public = format!("http://127.0.0.1:{balancer_port}");
        let mut instances = Vec::new();
        // Each port is picked just before its instance binds it: picked up front, a later
        // one could meanwhile become the local port of an earlier instance's connection.
        for n in 0..count {
            let spec = Instance {
                name: format!("tally-{}", char::from(b'a' + u8::try_from(n).expect("few"))),
                port: free_port(),
                database_url: database.url.clone(),
                base_url: public.clone(),
                migrate: n == 0,
                config: config.path().to_owned(),
                logs: logs.clone(),
            };
            instances.push(Tally::start(spec).await);
        }
        let addresses: Vec<String> = instances.iter().map(Tally::address).collect();
        let balancer = Balancer::start_on(balancer_listener, &addresses[0], addresses.clone());
        let api = Api::new(&balancer.address);
        for instance in &mut instances {
            instance.assert_running("after it answered ready");
        }
        let (api_key, buyer) = admin_key_and_buyer(&api, config.path(), &database.url).await;
        for instance in &mut instances {
            instance.assert_running("during the setup requests");
        }
        Self {
            balancer,
            instances,
            _config: config,
            _database: database,
            api,
            api_key,
            buyer,
        }
    }

    /// The direct API of each instance.
    pub fn apis(&self) -> Vec<Api> {
        self.instances.iter().map(Tally::api).collect()
    }

    /// Buy `plan` for the buyer and wait until it is paid; returns the order id.
    pub async fn buy(&self, plan: &str, provider: &str) -> String {
        self.api
            .buy_and_pay(&self.buyer.token, plan, provider)
            .await
    }
}

/// A throwaway PostgreSQL cluster of its own (to stop and start under load), removed on drop.
/// Run as root, the PostgreSQL tools run as `postgres`, as in `.ci/start-postgres`.
pub struct PgCluster {
    bin: PathBuf,
    data: tempfile::TempDir,
    port: u16,
    /// `postgres://app:app@127.0.0.1:<port>/app`.
    pub url: String,
}

impl PgCluster {
    /// `initdb`, start, and create the role and database `app`.
    pub fn start() -> Self {
        let bin = std::env::var("PGBIN").map_or_else(|_| postgres_bin(), PathBuf::from);
        let data = tempfile::Builder::new()
            .prefix("tally-outage-pg.")
            .tempdir()
            .expect("pg data dir");
        if is_root() {
            let mut chown = Command::new("chown");
            chown.args(["postgres:postgres"]).arg(data.path());
            run(chown, "chown");
        }
        let mut initdb = as_postgres(&bin.join("initdb"));
        initdb.arg("-D").arg(data.path()).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-instructions",
        ]);
        run(initdb, "initdb");
        let port = free_port();
        let cluster = Self {
            bin,
            data,
            port,
            url: format!("postgres://app:app@127.0.0.1:{port}/app"),
        };
        cluster.start_server();
        let superuser = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        psql(&superuser, "CREATE ROLE app LOGIN PASSWORD 'app'");
        psql(&superuser, "CREATE DATABASE app OWNER app");
        cluster
    }

    fn pg_ctl(&self) -> Command {
        let mut command = as_postgres(&self.bin.join("pg_ctl"));
        command.arg("-D").arg(self.data.path());
        command
    }

    /// Start the server (again), waiting until it accepts connections.
    pub fn start_server(&self) {
        let mut command = self.pg_ctl();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=100",
            self.port,
            self.data.path().display()
        );
        command
            .arg("-l")
            .arg(self.data.path().join("server.log"))
            .args(["-w", "-o", &options, "start"]);
        run(command, "pg_ctl start");
    }

    /// `pg_ctl stop -m immediate`: the server goes away at once, as in a crash or a failover.
    pub fn stop_immediately(&self) {
        let mut command = self.pg_ctl();
        command.args(["-m", "immediate", "-w", "stop"]);
        run(command, "pg_ctl stop");
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let mut command = self.pg_ctl();
        command
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = command.status();
    }
}

fn postgres_bin() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dir| {
            dir.filter_map(|e| e.ok().map(|e| e.path().join("bin")))
                .collect()
        })
        .unwrap_or_default();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions
        .pop()
        .expect("PostgreSQL under /usr/lib/postgresql (or set PGBIN)")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `tool`, run as `postgres` when we are root (`initdb` refuses to run as root).
fn as_postgres(tool: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(tool);
        command
    } else {
        Command::new(tool)
    }
}
