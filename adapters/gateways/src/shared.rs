//! What every gateway shares: the HTTP client (which logs each provider call), signing
//! primitives, conversions of money and time to and from wire formats, the renewal charge
//! heuristic, small wire-text helpers, and the gateway's context. A provider module keeps only
//! what differs.

pub mod http;
pub mod money;
pub mod period;
pub mod secret;
pub mod signing;
pub mod time;
pub mod wire;

use std::sync::Arc;

use application::ports::Clock;

pub use http::{HttpSettings, ProviderHttp};
pub use secret::Secret;

pub use ::signing::install_crypto_provider;

/// A provider setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{provider}: {field}: {problem}")]
pub struct ConfigError {
    /// The provider id.
    pub provider: &'static str,
    /// The setting, as spelled in `tally.toml`.
    pub field: &'static str,
    /// What is wrong (never the secret's value).
    pub problem: String,
}

impl ConfigError {
    /// `provider`'s setting `field` cannot be used, because of `problem` (never the value).
    #[must_use]
    pub fn new(provider: &'static str, field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            provider,
            field,
            problem: problem.into(),
        }
    }

    /// `value`, trimmed, when it is not empty; else `field` "is required".
    ///
    /// # Errors
    /// An empty or blank `value`.
    pub fn required(
        provider: &'static str,
        field: &'static str,
        value: &str,
    ) -> Result<String, Self> {
        let value = value.trim();
        if value.is_empty() {
            return Err(Self::new(provider, field, "is required"));
        }
        Ok(value.to_owned())
    }
}

/// The setting that makes a provider's credentials test-mode ones: a production deployment on
/// them takes no money while looking healthy. Each provider's settings say it about themselves
/// (`test_mode()`), so that no one else needs to know a provider's key prefixes or hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestModeSetting {
    /// The setting, as spelled in `tally.toml`.
    pub field: &'static str,
    /// What about it means test mode (never the secret's value).
    pub reason: &'static str,
}

impl TestModeSetting {
    /// `field` makes the credentials test-mode ones, because of `reason`.
    #[must_use]
    pub const fn new(field: &'static str, reason: &'static str) -> Self {
        Self { field, reason }
    }
}

/// Whether `url`'s host is `host` or one of its subdomains (a base URL naming a provider's
/// test host).
#[must_use]
pub fn names_host(url: &str, host: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .is_some_and(|h| h == host || h.ends_with(&format!(".{host}")))
}

/// What a gateway needs besides its own settings.
#[derive(Clone)]
pub struct GatewayContext {
    /// The provider's API over HTTP.
    pub http: ProviderHttp,
    /// The clock (webhook timestamp tolerance, request timestamps).
    pub clock: Arc<dyn Clock>,
    /// Whether the base URL is the local sandbox.
    pub sandbox: bool,
}

impl GatewayContext {
    /// The same context, its HTTP calls logged as `provider`'s.
    #[must_use]
    pub fn for_provider(self, provider: domain::ProviderId) -> Self {
        Self {
            http: self.http.for_provider(provider),
            ..self
        }
    }
}

impl std::fmt::Debug for GatewayContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayContext")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}
