//! Build the seven gateways: each provider with a `[providers.<id>]` table talks to its real API
//! (or its test mode); a provider without one talks to the local sandbox, which
//! `APP_ENV=production` refuses.

use std::sync::Arc;

use anyhow::{Context, bail};
use application::ports::{Clock, Gateways, PaymentGateway};
use domain::{AppEnvironment, ProviderId};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use sandbox::Sandbox;

use crate::settings::Settings;

/// Which providers run on the sandbox.
#[derive(Debug, Clone, Default)]
pub struct ProviderReport {
    /// Providers wired to the local sandbox.
    pub sandboxed: Vec<ProviderId>,
}

macro_rules! build {
    ($table:expr, $sandbox:expr, $clock:expr, $module:ident, $settings:ident, $gateway:ident, $id:expr) => {{
        let (settings, on_sandbox) = match $table {
            Some(table) => {
                let settings: gateways::$module::$settings = table
                    .clone()
                    .try_into()
                    .with_context(|| format!("providers.{}", $id.as_str()))?;
                (settings, false)
            }
            None => (
                sandbox::$module::gateway_settings(&$sandbox.api_base_url($id)),
                true,
            ),
        };
        let http = ProviderHttp::new(&settings.http())
            .with_context(|| format!("providers.{}", $id.as_str()))?;
        let context = GatewayContext {
            http,
            clock: $clock.clone(),
            sandbox: on_sandbox,
        };
        let gateway = gateways::$module::$gateway::new(&settings, context)
            .with_context(|| format!("providers.{}", $id.as_str()))?;
        (Arc::new(gateway) as Arc<dyn PaymentGateway>, on_sandbox)
    }};
}

/// The gateways of every provider.
///
/// # Errors
/// A provider table that does not fit its settings, unusable keys, or (in production) a
/// provider without settings.
pub fn build_gateways(
    settings: &Settings,
    sandbox: &Sandbox,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<(Gateways, ProviderReport)> {
    let mut gateways = Gateways::new();
    let mut report = ProviderReport::default();
    for provider in ProviderId::ALL {
        let table = settings.providers.get(&provider);
        let (gateway, on_sandbox) = match provider {
            ProviderId::WalletQr => build!(
                table,
                sandbox,
                clock,
                wallet_qr,
                WalletQrSettings,
                WalletQrGateway,
                provider
            ),
            ProviderId::WalletWeb => build!(
                table,
                sandbox,
                clock,
                wallet_web,
                WalletWebSettings,
                WalletWebGateway,
                provider
            ),
            ProviderId::CardGateway => build!(
                table,
                sandbox,
                clock,
                card_gateway,
                CardGatewaySettings,
                CardGatewayGateway,
                provider
            ),
            ProviderId::WalletGlobal => build!(
                table,
                sandbox,
                clock,
                wallet_global,
                WalletGlobalSettings,
                WalletGlobalGateway,
                provider
            ),
            ProviderId::MorA => build!(
                table,
                sandbox,
                clock,
                mor_a,
                MorASettings,
                MorAGateway,
                provider
            ),
            ProviderId::MorB => build!(
                table,
                sandbox,
                clock,
                mor_b,
                MorBSettings,
                MorBGateway,
                provider
            ),
            ProviderId::MorC => build!(
                table,
                sandbox,
                clock,
                mor_c,
                MorCSettings,
                MorCGateway,
                provider
            ),
        };
        if on_sandbox {
            if settings.environment == AppEnvironment::Production {
                bail!(
                    "providers.{provider}: APP_ENV=production refuses to run a provider on the sandbox; configure [providers.{provider}] in tally.toml"
                );
            }
            report.sandboxed.push(provider);
        }
        gateways = gateways.with(gateway);
    }
    Ok((gateways, report))
}
