//! What every gateway shares: the HTTP client, signing primitives, and its context.

pub mod http;
pub mod signing;

use std::sync::Arc;

use application::ports::Clock;

pub use http::{HttpSettings, ProviderHttp};

/// Install the process-wide TLS crypto provider (ring) once, before the first HTTPS client.
/// Safe to call more than once.
pub fn install_crypto_provider() {
    // Err only means a provider is installed already, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

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

impl std::fmt::Debug for GatewayContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayContext")
            .field("http", &self.http)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}
