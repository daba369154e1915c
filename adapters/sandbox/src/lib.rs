//! The provider sandbox: a local stand-in for all seven payment providers, so that a newcomer
//! can buy every plan end to end on one machine and tests exercise the real gateway code.
//!
//! Mounted at `/sandbox` inside `tally serve` when a provider has no credentials. Each provider
//! has a [`Simulator`] serving the subset of its API that the gateway calls, at
//! `/sandbox/<provider id>/…`, checking request signatures and encodings as the real provider
//! would, and signing its webhooks as the real provider does. The [`Hub`] keeps the simulated
//! payments and subscriptions and delivers webhooks; the hosted checkout page
//! (`/sandbox/checkout/{id}`, a QR code for `wallet_qr`) offers Pay, Decline and Cancel; the
//! dashboard (`/sandbox`) renews subscriptions and refunds payments. `/sandbox/api/…` drives the
//! same actions as JSON for tests, and sets what a saved payment method's off-session charges
//! do (automatic top-up).

pub mod credentials;
pub mod formats;
pub mod hub;
mod pages;
pub mod simulator;

#[cfg(feature = "card_gateway")]
pub mod card_gateway;
#[cfg(feature = "mor_a")]
pub mod mor_a;
#[cfg(feature = "mor_b")]
pub mod mor_b;
#[cfg(feature = "mor_c")]
pub mod mor_c;
#[cfg(feature = "wallet_global")]
pub mod wallet_global;
#[cfg(feature = "wallet_qr")]
pub mod wallet_qr;
#[cfg(feature = "wallet_web")]
pub mod wallet_web;

/// The skeleton of the next provider's simulator, compiled and tested with the crate's tests.
#[cfg(test)]
pub mod template;

use std::sync::Arc;

use application::ports::Clock;
use domain::ProviderId;

pub use credentials::{CREDENTIALS, SandboxCredentials};
pub use hub::{
    ForeignUrl, Hub, SimBehaviour, SimCharge, SimEvent, SimKind, SimMethod, SimPayment, SimPrice,
    SimStatus, SimSubscription, SimSubscriptionStatus, SimWebhook,
};
pub use simulator::Simulator;

/// The sandbox: its hub and the simulators of the enabled providers.
#[derive(Clone)]
pub struct Sandbox {
    hub: Arc<Hub>,
}

impl Sandbox {
    /// A sandbox whose pages and APIs are reachable at `{public_base_url}/sandbox`.
    #[must_use]
    pub fn new(public_base_url: &str, clock: Arc<dyn Clock>) -> Self {
        let hub = Arc::new(Hub::new(public_base_url, clock));
        for simulator in simulators() {
            hub.register(simulator);
        }
        Self { hub }
    }

    /// The hub (tests drive it directly).
    #[must_use]
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// The base URL a gateway for `provider` must use to talk to this sandbox.
    #[must_use]
    pub fn api_base_url(&self, provider: ProviderId) -> String {
        format!(
            "{}/sandbox/{}",
            self.hub.public_base_url(),
            provider.as_str()
        )
    }

    /// Every sandbox route, to be nested at `/sandbox`.
    #[must_use]
    pub fn routes(&self) -> poem::endpoint::BoxEndpoint<'static, poem::Response> {
        pages::routes(self.hub.clone())
    }
}

/// The simulators of the enabled providers.
#[allow(
    unused_mut,
    clippy::vec_init_then_push,
    reason = "every provider feature may be off"
)]
fn simulators() -> Vec<Arc<dyn Simulator>> {
    let mut all: Vec<Arc<dyn Simulator>> = Vec::new();
    #[cfg(feature = "wallet_qr")]
    all.push(Arc::new(wallet_qr::WalletQrSimulator));
    #[cfg(feature = "wallet_web")]
    all.push(Arc::new(wallet_web::WalletWebSimulator));
    #[cfg(feature = "card_gateway")]
    all.push(Arc::new(card_gateway::CardGatewaySimulator));
    #[cfg(feature = "wallet_global")]
    all.push(Arc::new(wallet_global::WalletGlobalSimulator));
    #[cfg(feature = "mor_a")]
    all.push(Arc::new(mor_a::MorASimulator));
    #[cfg(feature = "mor_b")]
    all.push(Arc::new(mor_b::MorBSimulator));
    #[cfg(feature = "mor_c")]
    all.push(Arc::new(mor_c::MorCSimulator));
    all
}
