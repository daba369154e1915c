//! The canonical service: wires the ports into the use cases.
//!
//! `Service` is generic over the store, clock, id generator and secret hasher (one
//! implementation per binary) and holds the gateways by provider (`dyn`, chosen at runtime).
//! The driving adapters never see it: they hold its inbound ports ([`crate::inbound::Ports`]).

use domain::{AppEnvironment, ConsumptionRules, Plan};

use std::sync::Arc;

use crate::ports::{
    Clock, Gateways, HostTokenVerifier, IdGenerator, Metrics, NoMetrics, SecretHasher, Store,
};
use crate::use_cases::plans::PricingMode;

/// Settings the use cases read.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// `PRICING_MODE`.
    pub pricing_mode: PricingMode,
    /// `APP_ENV`: which plan price applies.
    pub environment: AppEnvironment,
    /// The static catalog (`config/payment.toml`).
    pub catalog: Vec<Plan>,
    /// The consumption rules (`config/credits.toml`).
    pub consumption: ConsumptionRules,
    /// Where providers send the buyer back and post webhooks (built by the wiring from the
    /// HTTP adapters' routes under `APP_BASE_URL`).
    pub callbacks: crate::callbacks::CallbackUrls,
    /// How long a pending order waits for payment before it expires.
    pub order_lifetime_ms: i64,
    /// How long a sign-in session lasts.
    pub session_lifetime_ms: i64,
    /// How long an unsettled credit reservation holds credits.
    pub reservation_lifetime_ms: i64,
    /// How many times a webhook's transaction is recomputed after a concurrent change.
    pub webhook_conflict_retries: u32,
    /// How far a renewal's period may start before the end of the period already paid (providers'
    /// clocks drift); further back, it overlaps a granted period and grants nothing.
    pub renewal_clock_tolerance_ms: i64,
    /// Whether a user may hold several live subscriptions at once (`[subscriptions]
    /// allowSeveral`); by default initiating a second one is refused with `AlreadySubscribed`.
    pub allow_several_subscriptions: bool,
    /// How long a past-due subscription keeps access after its failed renewal (the end of its
    /// paid period).
    pub past_due_grace_ms: i64,
}

/// The default [`ServiceConfig::renewal_clock_tolerance_ms`]: one hour.
pub const DEFAULT_RENEWAL_CLOCK_TOLERANCE_MS: i64 = 3_600_000;
/// The default [`ServiceConfig::past_due_grace_ms`]: seven days.
pub const DEFAULT_PAST_DUE_GRACE_MS: i64 = 7 * 86_400_000;

/// The service: ports plus settings.
pub struct Service<S, C, I, H> {
    pub(crate) store: S,
    pub(crate) clock: C,
    pub(crate) ids: I,
    pub(crate) hasher: H,
    pub(crate) gateways: Gateways,
    pub(crate) config: ServiceConfig,
    pub(crate) host_tokens: Option<Arc<dyn HostTokenVerifier>>,
    /// Where the use cases count what they did (nothing by default).
    pub(crate) metrics: Arc<dyn Metrics>,
    /// The balance below which spends tell `credits.low_balance` (none by default).
    pub(crate) low_balance_below: Option<domain::Credits>,
    pub(crate) webhooks: Option<Arc<crate::use_cases::webhook_endpoints::Webhooks>>,
    /// The sign-up abuse policy and its rate limits' counts (one per service, so every
    /// driving adapter shares them).
    pub(crate) sign_ups: crate::sign_up::SignUpLimiter,
    /// Each user's promo code redemptions: 20 an hour, 10 at once, so that codes cannot be
    /// found by guessing.
    pub(crate) promo_attempts: crate::sign_up::AttemptLimiter,
    /// Where buyers may be sent back to in the host application, and the signer of the return
    /// tokens (none by default: no return URL is allowed, no page works without a session).
    pub(crate) host_app: HostApp,
    /// The automatic top-up worker's settings and the operator's rails.
    pub(crate) top_ups: crate::use_cases::auto_top_up::TopUpSettings,
}

/// The host application's side of checkouts and the customer portal.
#[derive(Clone, Default)]
pub struct HostApp {
    /// The origins a `successUrl`, `cancelUrl` or portal `returnUrl` may point to.
    pub return_origins: domain::ReturnOrigins,
    /// Signs the return tokens of checkouts (the server's secret).
    pub signer: Option<Arc<dyn crate::ports::MessageSigner>>,
}

impl std::fmt::Debug for HostApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostApp")
            .field("return_origins", &self.return_origins)
            .field("signer", &self.signer.is_some())
            .finish()
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Wire a service.
    pub fn new(
        store: S,
        clock: C,
        ids: I,
        hasher: H,
        gateways: Gateways,
        config: ServiceConfig,
    ) -> Self {
        Self {
            store,
            clock,
            ids,
            hasher,
            gateways,
            config,
            host_tokens: None,
            metrics: Arc::new(NoMetrics),
            low_balance_below: None,
            webhooks: None,
            sign_ups: crate::sign_up::SignUpLimiter::new(crate::sign_up::SignUpPolicy::default()),
            promo_attempts: crate::sign_up::AttemptLimiter::new(crate::sign_up::SignUpRate {
                per_hour: std::num::NonZeroU32::new(20).unwrap_or(std::num::NonZeroU32::MIN),
                burst: std::num::NonZeroU32::new(10).unwrap_or(std::num::NonZeroU32::MIN),
            }),
            host_app: HostApp::default(),
            top_ups: crate::use_cases::auto_top_up::TopUpSettings::default(),
        }
    }

    /// Run automatic top-ups under `settings` (the defaults otherwise).
    #[must_use]
    pub fn with_top_up_settings(
        mut self,
        settings: crate::use_cases::auto_top_up::TopUpSettings,
    ) -> Self {
        self.top_ups = settings;
        self
    }

    /// The automatic top-up worker's settings (its poll interval is the caller's).
    #[must_use]
    pub fn top_up_settings(&self) -> crate::use_cases::auto_top_up::TopUpSettings {
        self.top_ups
    }

    /// Send buyers back to the host application's allowed origins, with return tokens signed
    /// by `host_app.signer`.
    #[must_use]
    pub fn with_host_app(mut self, host_app: HostApp) -> Self {
        self.host_app = host_app;
        self
    }

    /// Create accounts under `policy` (the default is [`crate::sign_up::SignUpPolicy`]'s).
    #[must_use]
    pub fn with_sign_up_policy(mut self, policy: crate::sign_up::SignUpPolicy) -> Self {
        self.sign_ups = crate::sign_up::SignUpLimiter::new(policy);
        self
    }

    /// Tell `credits.low_balance` when a spend takes a balance below `threshold`.
    #[must_use]
    pub fn with_low_balance_threshold(mut self, threshold: Option<domain::Credits>) -> Self {
        self.low_balance_below = threshold;
        self
    }

    /// Count what the use cases do through `metrics` (see [`Metrics`]).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<dyn Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Also accept a host application's tokens as sign-in.
    #[must_use]
    pub fn with_host_tokens(mut self, verifier: Arc<dyn HostTokenVerifier>) -> Self {
        self.host_tokens = Some(verifier);
        self
    }

    /// Also deliver host events to webhook endpoints (and manage them).
    #[must_use]
    pub fn with_webhooks(
        mut self,
        webhooks: Arc<crate::use_cases::webhook_endpoints::Webhooks>,
    ) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// Webhook endpoints and delivery, when wired.
    pub fn webhooks(&self) -> Option<&Arc<crate::use_cases::webhook_endpoints::Webhooks>> {
        self.webhooks.as_ref()
    }

    /// The store (for readiness checks and background workers).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    /// The gateways.
    pub fn gateways(&self) -> &Gateways {
        &self.gateways
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The id generator (for adapters that need a fresh secret, such as a CSRF cookie).
    pub fn ids(&self) -> &I {
        &self.ids
    }

    /// Now, by the service's clock (session lifetimes, throttles, request times).
    pub fn now(&self) -> domain::Timestamp {
        self.clock.now()
    }

    /// A new URL-safe secret of at least 128 bits (a form's anti-forgery secret).
    pub fn new_secret(&self) -> String {
        self.ids.new_secret()
    }
}
