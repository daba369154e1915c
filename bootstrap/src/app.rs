//! Wiring: settings and catalog in, a running service out.
//!
//! [`Application::build`] connects the store (migrating when the settings say so), builds the
//! seven gateways and the sandbox, the service, the HTTP API, and binds the listener (port 0 in
//! tests). [`Application::run_until_stopped`] serves until the shutdown signal, running the
//! reconciler in the background, and drains in-flight requests before returning.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use application::callbacks::CallbackUrls;
use application::ports::{Clock, Gateways};
use application::service::{HostApp, Service, ServiceConfig};
use http_api::{ApiSettings, Readiness};
use migrations::{Migrator, MigratorTrait};
use poem::listener::{Acceptor, Listener, TcpAcceptor, TcpListener};
use poem::{EndpointExt, Route};
use sandbox::Sandbox;
use store::SeaOrmStore;
use tokio::sync::watch;

use crate::catalog::Catalog;
use crate::host_tokens::HostJwtVerifier;
use crate::providers::{ProviderReport, build_gateways};
use crate::seams::{AppClock, Argon2Hasher, HmacSigner, RandomIds, SystemClock};
use crate::settings::Settings;

/// The service as wired for production.
pub type TallyService = Service<SeaOrmStore, AppClock, RandomIds, Argon2Hasher>;

/// How long in-flight requests get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The longest a readiness check waits for the database.
const READINESS_TIMEOUT: Duration = Duration::from_secs(2);
/// How many times a webhook's transaction is recomputed after a concurrent change.
const WEBHOOK_CONFLICT_RETRIES: u32 = 8;

/// Sends each request to the part of the service that owns its path: `/sandbox/…` to the
/// sandbox (only when a provider runs on it: never in production), `/api/…` and the health and
/// metrics endpoints to the API, the rest to the web pages (whose 404 page answers `/sandbox`
/// when there is no sandbox).
/// The API is called as a root endpoint, not nested in another router: poem's nested routers lose the parent's path
/// pattern across the API's own middleware and panic on `/api/…` paths.
struct Dispatch {
    sandbox: Option<poem::endpoint::BoxEndpoint<'static, poem::Response>>,
    api: poem::endpoint::BoxEndpoint<'static, poem::Response>,
    pages: poem::endpoint::BoxEndpoint<'static, poem::Response>,
}

/// Whether a path belongs to the JSON API (and its operational endpoints).
fn is_api_path(path: &str) -> bool {
    path == "/api"
        || path.starts_with("/api/")
        || matches!(path, "/healthz" | "/readyz" | "/metrics")
}

impl poem::Endpoint for Dispatch {
    type Output = poem::Response;

    async fn call(&self, request: poem::Request) -> poem::Result<Self::Output> {
        let path = request.uri().path();
        let sandbox = (path == "/sandbox" || path.starts_with("/sandbox/"))
            .then_some(self.sandbox.as_ref())
            .flatten();
        if let Some(sandbox) = sandbox {
            sandbox.call(request).await
        } else if is_api_path(path) {
            self.api.call(request).await
        } else {
            self.pages.call(request).await
        }
    }
}

/// A built, bound, not yet serving application.
pub struct Application {
    acceptor: TcpAcceptor,
    base_url: String,
    service: Arc<TallyService>,
    endpoint: poem::endpoint::BoxEndpoint<'static, poem::Response>,
    settings: Settings,
    providers: ProviderReport,
    clock: AppClock,
}

struct StoreReadiness(SeaOrmStore);

#[async_trait::async_trait]
impl Readiness for StoreReadiness {
    async fn ready(&self) -> bool {
        matches!(
            tokio::time::timeout(READINESS_TIMEOUT, self.0.ping()).await,
            Ok(Ok(()))
        )
    }
}

/// `store`, opening users and accounts as the catalog says: with its sign-up credits and its
/// monthly ceiling for new accounts.
fn opening_accounts(store: SeaOrmStore, catalog: &Catalog) -> SeaOrmStore {
    store
        .with_signup_grant(catalog.signup_grant())
        .with_new_account_ceiling(catalog.new_account_ceiling())
}

/// Connect to the database of `settings` and apply pending migrations when they say so.
///
/// # Errors
/// The database is unreachable or a migration fails.
pub async fn connect_store(settings: &Settings) -> anyhow::Result<SeaOrmStore> {
    if let Some(path) = settings.database.url.strip_prefix("sqlite://") {
        let file = path.split('?').next().unwrap_or_default();
        if let Some(dir) = std::path::Path::new(file)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
    }
    // Host events are stored as the API shows their objects.
    let events = std::sync::Arc::new(http_api::HostEventJson);
    let store = SeaOrmStore::connect(&settings.database, events)
        .await
        .context("connecting to DATABASE_URL")?;
    if settings.migrate_on_start {
        migrate_up(settings, &store).await?;
    }
    Ok(store)
}

/// Apply pending migrations: over `DATABASE_DIRECT_URL` when it is set (past the connection
/// pooler, on a session of their own), else over the store's pool.
///
/// # Errors
/// The direct URL is unreachable or a migration fails.
pub async fn migrate_up(settings: &Settings, store: &SeaOrmStore) -> anyhow::Result<()> {
    let direct = SeaOrmStore::connect_direct(&settings.database)
        .await
        .context("connecting to DATABASE_DIRECT_URL")?;
    let applied = Migrator::up(direct.as_ref().unwrap_or(store.connection()), None).await;
    if let Some(direct) = direct {
        // Closing a connection the migrations are done with: a failure here changes nothing.
        let _ = direct.close().await;
    }
    applied.context("applying migrations")
}

impl Application {
    /// Wire everything and bind `settings.bind_addr`.
    ///
    /// # Errors
    /// Any setting, provider or database problem, named.
    pub async fn build(settings: Settings, catalog: Catalog) -> anyhow::Result<Self> {
        let acceptor = TcpListener::bind(settings.bind_addr.to_string())
            .into_acceptor()
            .await
            .with_context(|| format!("binding BIND_ADDR {}", settings.bind_addr))?;
        let local = acceptor
            .local_addr()
            .into_iter()
            .find_map(|a| a.as_socket_addr().copied())
            .context("reading the bound address")?;
        let base_url = settings
            .app_base_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"));
        let store = opening_accounts(connect_store(&settings).await?, &catalog);
        let app_clock = AppClock::default();
        let clock: Arc<dyn Clock> = Arc::new(app_clock.clone());
        let sandbox = Sandbox::new(&base_url, clock.clone());
        let (gateways, report) = build_gateways(&settings, &sandbox, &clock)?;
        sellable(&settings, &report, &catalog)?;
        let service = Arc::new(wire_service(
            &settings,
            &catalog,
            (&store, (&clock, &app_clock)),
            gateways,
            base_url.clone(),
        )?);
        sandbox.hub().set_merchant_name(&settings.branding.name);
        let api_settings = ApiSettings {
            secure_cookies: settings.secure_cookies,
            trust_forwarded_for: settings.trust_forwarded_for,
            public_base_url: Some(base_url.clone()),
            ..ApiSettings::default()
        };
        let api = http_api::build_api(
            application::inbound::Ports::new(service.clone()),
            Arc::new(StoreReadiness(store)),
            api_settings,
        );
        let endpoint = Dispatch {
            sandbox: (!report.sandboxed.is_empty())
                .then(|| Route::new().nest("/sandbox", sandbox.routes()).boxed()),
            api: api.boxed(),
            pages: web_pages::branded_routes(
                application::inbound::Ports::new(service.clone()),
                web_pages::PageSettings {
                    secure_cookies: settings.secure_cookies,
                    sandbox_notice: !report.sandboxed.is_empty(),
                    trust_forwarded_for: settings.trust_forwarded_for,
                    public_base_url: Some(base_url.clone()),
                },
                settings.branding.clone(),
            )
            .boxed(),
        }
        // Every path, pages and sandbox too: more than 100 header fields is a 431 problem.
        .with(http_api::HeaderLimit)
        .boxed();
        Ok(Self {
            acceptor,
            base_url,
            service,
            endpoint,
            settings,
            providers: report,
            clock: app_clock,
        })
    }

    /// The application's clock (a test moves it with the `test-clock` feature).
    #[must_use]
    pub fn clock(&self) -> AppClock {
        self.clock.clone()
    }

    /// The bound port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.acceptor
            .local_addr()
            .into_iter()
            .find_map(|a| a.as_socket_addr().map(std::net::SocketAddr::port))
            .unwrap_or_default()
    }

    /// The public base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The service (for the CLI and tests).
    #[must_use]
    pub fn service(&self) -> &Arc<TallyService> {
        &self.service
    }

    /// Serve until `shutdown` completes, then drain.
    ///
    /// # Errors
    /// The server fails.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        tracing::info!("{}", self.providers.summary());
        if !self.providers.sandboxed.is_empty() {
            tracing::warn!(
                "sandboxed providers run on the local sandbox at {}/sandbox: no real money moves",
                self.base_url
            );
        }
        tracing::info!(url = %self.base_url, env = ?self.settings.environment, pricing_mode = self.settings.pricing_mode.as_str(), "tally is serving");
        let (stop_tx, stop_rx) = watch::channel(false);
        let reconciler = self.settings.reconciler;
        let worker = reconciler.enabled.then(|| {
            let retention_ms = self.settings.event_retention_ms;
            tokio::spawn(reconcile_loop(
                self.service.clone(),
                reconciler,
                retention_ms,
                stop_rx,
            ))
        });
        let top_ups = tokio::spawn(top_up_loop(self.service.clone(), stop_tx.subscribe()));
        let deliveries = match (self.settings.webhooks.enabled, self.service.webhooks()) {
            (true, Some(webhooks)) => Some(tokio::spawn(crate::webhooks::run(
                webhooks.clone(),
                self.settings.webhooks.clone(),
                stop_tx.subscribe(),
            ))),
            _ => None,
        };
        let result =
            crate::server::serve(self.acceptor, self.endpoint, shutdown, SHUTDOWN_GRACE).await;
        let _ = stop_tx.send(true);
        if let Some(worker) = worker {
            let _ = worker.await;
        }
        if let Some(deliveries) = deliveries {
            let _ = deliveries.await;
        }
        let _ = top_ups.await;
        tracing::info!("tally stopped");
        result.context("serving HTTP")
    }
}

/// Refuse to start when production has no live provider or the static catalog sells through a
/// provider that is off; with `PRICING_MODE=dynamic` such plans are only worth a warning.
///
/// # Errors
/// The report's refusal, naming every stranded plan.
fn sellable(settings: &Settings, report: &ProviderReport, catalog: &Catalog) -> anyhow::Result<()> {
    report
        .check(settings, catalog.plans())
        .map_err(anyhow::Error::msg)?;
    let stranded = report.stranded(catalog.plans());
    if !stranded.is_empty() {
        tracing::warn!(plans = ?stranded, "payment.toml has plans for providers that are off; PRICING_MODE=dynamic does not sell them");
    }
    Ok(())
}

/// How often the automatic top-up worker looks for top-ups to charge.
const TOP_UP_POLL: Duration = Duration::from_millis(500);

/// Charge the automatic top-ups spends asked for, every [`TOP_UP_POLL`], until stopped.
async fn top_up_loop(service: Arc<TallyService>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(TOP_UP_POLL) => {}
        }
        match service.run_top_ups().await {
            Ok(pass) if pass != Default::default() => tracing::info!(?pass, "automatic top-ups"),
            Ok(_) => {}
            Err(error) => tracing::warn!(error = %error, "automatic top-up pass failed; retrying"),
        }
    }
}

async fn reconcile_loop(
    service: Arc<TallyService>,
    settings: crate::settings::ReconcilerSettings,
    event_retention_ms: i64,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(Duration::from_millis(settings.interval_ms)) => {}
        }
        match service.reconcile(settings.pass).await {
            Ok(report) if report != Default::default() => {
                tracing::info!(?report, "reconciliation pass")
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(error = %error, "reconciliation pass failed; retrying next interval")
            }
        }
        // Host events past their retention go in bounded batches, one per pass.
        match service.purge_events(event_retention_ms).await {
            Ok(0) => {}
            Ok(purged) => tracing::info!(purged, "host events past their retention deleted"),
            Err(error) => tracing::warn!(error = %error, "purging old host events failed"),
        }
    }
}

/// Create a user directly in the store (the `tally admin create-user` command).
///
/// # Errors
/// Bad input, a taken address, database failures.
pub async fn create_user(
    store: &SeaOrmStore,
    email: &str,
    password: String,
    role: application::accounts::Role,
) -> anyhow::Result<application::accounts::User> {
    let now = SystemClock.now();
    let hasher = Argon2Hasher::default();
    Ok(application::use_cases::sessions::create_account(
        store, &hasher, &RandomIds, now, email, password, role,
    )
    .await?)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutdown signal received; draining");
}

/// Where providers send buyers back and post webhooks: the result pages' and the webhook
/// route's own paths under the service's base URL, and the dashboard a subscriber returns to
/// from approving (or declining) a plan change at the provider (PayPal).
fn callback_urls(base_url: &str) -> CallbackUrls {
    let (success, cancel) = web_pages::result_page_prefixes(base_url);
    let (approved, declined) = web_pages::plan_change_returns(base_url);
    CallbackUrls::new(success, cancel, http_api::webhook_url_prefix(base_url))
        .with_plan_change_returns(approved, declined)
}

/// The allowed return origins and the signer of return links: the configured secret, or a
/// random one for this process (said loudly in production, where several instances would not
/// accept each other's links).
fn host_app(settings: &Settings) -> HostApp {
    let signer = match &settings.host_app.return_secret {
        Some(secret) => HmacSigner::new(secret.clone()),
        None => {
            if settings.environment == domain::AppEnvironment::Production {
                tracing::warn!(
                    "TALLY_RETURN_SECRET is not set: checkout return links are signed with a \
                     random key of this process and stop working on restart or on another instance"
                );
            }
            HmacSigner::ephemeral()
        }
    };
    HostApp {
        return_origins: settings.host_app.return_origins.clone(),
        signer: Some(Arc::new(signer)),
    }
}

/// The service over `store`, with the settings' configuration, metrics, host tokens and event
/// delivery wired in.
fn wire_service(
    settings: &Settings,
    catalog: &Catalog,
    (store, (clock, app_clock)): (&SeaOrmStore, (&Arc<dyn Clock>, &AppClock)),
    gateways: Gateways,
    base_url: String,
) -> anyhow::Result<TallyService> {
    let config = ServiceConfig {
        pricing_mode: settings.pricing_mode,
        environment: settings.environment,
        catalog: catalog.plans().to_vec(),
        consumption: catalog.consumption().clone(),
        callbacks: callback_urls(&base_url),
        order_lifetime_ms: settings.order_lifetime_ms,
        session_lifetime_ms: settings.session_lifetime_ms,
        reservation_lifetime_ms: settings.reservation_lifetime_ms,
        webhook_conflict_retries: WEBHOOK_CONFLICT_RETRIES,
        renewal_clock_tolerance_ms: settings.renewal_clock_tolerance_ms,
        allow_several_subscriptions: settings.allow_several_subscriptions,
        past_due_grace_ms: settings.past_due_grace_ms,
    };
    let mut service = Service::new(
        store.clone(),
        app_clock.clone(),
        RandomIds,
        Argon2Hasher::default(),
        gateways,
        config,
    )
    .with_metrics(Arc::new(http_api::PrometheusMetrics))
    .with_low_balance_threshold(settings.low_balance_threshold)
    .with_sign_up_policy(settings.sign_up.policy(catalog.signup_credits_for()))
    .with_host_app(host_app(settings))
    .with_top_up_settings(application::use_cases::auto_top_up::TopUpSettings {
        rails: catalog.top_up_rails(),
        ..Default::default()
    });
    if let Some(host_jwt) = &settings.host_jwt {
        service = service.with_host_tokens(Arc::new(HostJwtVerifier::new(host_jwt)?));
    }
    let webhooks = crate::webhooks::build(
        store.clone(),
        clock.clone(),
        Arc::new(RandomIds),
        &settings.webhooks,
    )
    .context("building the webhook sender")?;
    Ok(service.with_webhooks(Arc::new(webhooks)))
}
