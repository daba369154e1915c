//! Build the gateways. A provider with a `[providers.<id>]` table is *live*: it talks to its real
//! API (or its test mode). A provider without one is *sandboxed* in development (it talks to the
//! local sandbox) and *off* in production (no gateway: its plans are neither listed nor sold and
//! its webhook path answers 404). Production needs at least one live provider, and refuses a
//! static catalog that sells through a provider that is off.

use std::sync::Arc;

use anyhow::{Context, bail};
use application::ports::{Clock, Gateways, PaymentGateway};
use application::use_cases::plans::PricingMode;
use domain::{AppEnvironment, Plan, ProviderId};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use sandbox::Sandbox;

use crate::settings::Settings;

/// Live providers that refuse a plain-http callback URL in their API calls (WeChat Pay's
/// `notify_url` must be https), so that Tally refuses to start rather than fail every checkout.
const NEEDS_HTTPS_CALLBACKS: [ProviderId; 1] = [ProviderId::WalletQr];

/// How a provider runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderMode {
    /// Configured: talks to the provider's API.
    Live,
    /// Development without settings: talks to the local sandbox.
    Sandboxed,
    /// Production without settings: no gateway at all.
    Off,
}

impl ProviderMode {
    /// How the start-up log and `check-config` spell it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ProviderMode::Live => "live",
            ProviderMode::Sandboxed => "sandboxed",
            ProviderMode::Off => "off",
        }
    }
}

/// A provider with a settings table is live; without one it is off in production and sandboxed
/// in development.
fn mode_from(settings: &Settings, provider: ProviderId) -> ProviderMode {
    if settings.providers.contains_key(&provider) {
        ProviderMode::Live
    } else if settings.environment == AppEnvironment::Production {
        ProviderMode::Off
    } else {
        ProviderMode::Sandboxed
    }
}

/// Which providers are live, sandboxed and off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderReport {
    /// Providers with a settings table.
    pub live: Vec<ProviderId>,
    /// Providers wired to the local sandbox (development only).
    pub sandboxed: Vec<ProviderId>,
    /// Providers without a gateway (production only).
    pub off: Vec<ProviderId>,
}

impl ProviderReport {
    /// The mode of every provider, from the settings alone (nothing is built).
    #[must_use]
    pub fn of(settings: &Settings) -> Self {
        let mut report = Self::default();
        for provider in ProviderId::ALL {
            match mode_from(settings, provider) {
                ProviderMode::Live => report.live.push(provider),
                ProviderMode::Sandboxed => report.sandboxed.push(provider),
                ProviderMode::Off => report.off.push(provider),
            }
        }
        report
    }

    /// The mode of `provider` in this report.
    #[must_use]
    pub fn mode(&self, provider: ProviderId) -> ProviderMode {
        if self.live.contains(&provider) {
            ProviderMode::Live
        } else if self.sandboxed.contains(&provider) {
            ProviderMode::Sandboxed
        } else {
            ProviderMode::Off
        }
    }

    /// One line for the start-up log and `check-config`: `live: …; sandboxed: …; off: …`.
    #[must_use]
    pub fn summary(&self) -> String {
        let list = |ids: &[ProviderId]| {
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        format!(
            "providers live: {}; sandboxed: {}; off: {}",
            list(&self.live),
            list(&self.sandboxed),
            list(&self.off)
        )
    }

    /// The plans of `catalog` sold through a provider that is off, as `id (provider)`.
    #[must_use]
    pub fn stranded(&self, catalog: &[Plan]) -> Vec<String> {
        catalog
            .iter()
            .filter(|plan| self.mode(plan.provider()) == ProviderMode::Off)
            .map(|plan| format!("{} ({})", plan.id(), plan.provider()))
            .collect()
    }

    /// Whether the service can run with these providers: production needs at least one live
    /// provider, and with `PRICING_MODE=static` no plan of the static catalog may be sold
    /// through a provider that is off (with `dynamic` that catalog is not sold).
    ///
    /// # Errors
    /// One message naming the problem: no live provider, or every stranded plan and its
    /// provider, so that the operator fixes the catalog in one pass.
    pub fn check(&self, settings: &Settings, static_catalog: &[Plan]) -> Result<(), String> {
        if settings.environment == AppEnvironment::Production && self.live.is_empty() {
            return Err(
                "APP_ENV=production needs at least one live provider: add a \
                 [providers.<id>] table to tally.toml (docs/providers/<id>.md lists each \
                 provider's settings)"
                    .to_owned(),
            );
        }
        let https = settings
            .app_base_url
            .as_deref()
            .is_some_and(|url| url.starts_with("https://"));
        let needs_https: Vec<&str> = self
            .live
            .iter()
            .filter(|p| NEEDS_HTTPS_CALLBACKS.contains(p))
            .map(|p| p.as_str())
            .collect();
        if !https && !needs_https.is_empty() {
            return Err(format!(
                "APP_BASE_URL must be an https:// URL while {} is live: it sends webhooks only to \
                 https notify URLs",
                needs_https.join(", ")
            ));
        }
        let stranded = self.stranded(static_catalog);
        if stranded.is_empty() || settings.pricing_mode == PricingMode::Dynamic {
            return Ok(());
        }
        Err(format!(
            "payment.toml sells {} plan(s) through providers that are off in production (no \
             [providers.<id>] table): {}; remove these plans or configure their providers",
            stranded.len(),
            stranded.join(", ")
        ))
    }
}

macro_rules! build {
    ($ctx:expr, $module:ident, $settings:ident, $gateway:ident) => {{
        let (table, sandbox, clock, id) = $ctx;
        let (settings, on_sandbox): (gateways::$module::$settings, bool) = match table {
            Some(table) => (
                table
                    .clone()
                    .try_into()
                    .with_context(|| format!("providers.{}", id.as_str()))?,
                false,
            ),
            // The sandbox hands out its settings as the table an operator would write.
            None => (
                serde_json::from_value(sandbox::$module::gateway_settings(
                    &sandbox.api_base_url(id),
                ))
                .with_context(|| format!("the sandbox's providers.{}", id.as_str()))?,
                true,
            ),
        };
        let http = ProviderHttp::new(&settings.http())
            .with_context(|| format!("providers.{}", id.as_str()))?;
        let context = GatewayContext {
            http,
            clock: clock.clone(),
            sandbox: on_sandbox,
        };
        let gateway = gateways::$module::$gateway::new(&settings, context)
            .with_context(|| format!("providers.{}", id.as_str()))?;
        (Arc::new(gateway) as Arc<dyn PaymentGateway>, on_sandbox)
    }};
}

/// The gateways of every provider that is live or sandboxed (none for a provider that is off).
///
/// # Errors
/// A provider table that does not fit its settings, or unusable keys.
pub fn build_gateways(
    settings: &Settings,
    sandbox: &Sandbox,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<(Gateways, ProviderReport)> {
    let report = ProviderReport::of(settings);
    let mut gateways = Gateways::new();
    for provider in ProviderId::ALL {
        if report.mode(provider) == ProviderMode::Off {
            continue;
        }
        let table = settings.providers.get(&provider);
        let (gateway, on_sandbox) = build_gateway(provider, table, sandbox, clock)?;
        if on_sandbox && settings.environment == AppEnvironment::Production {
            // Unreachable through `ProviderReport::of`; kept so that no future path can wire
            // the sandbox into production.
            bail!("providers.{provider}: APP_ENV=production never runs a provider on the sandbox");
        }
        gateways = gateways.with(gateway);
    }
    Ok((gateways, report))
}

/// The gateway of `provider`: from its settings table when it has one, else pointed at the
/// sandbox; and whether it is the sandbox's.
fn build_gateway(
    provider: ProviderId,
    table: Option<&toml::Table>,
    sandbox: &Sandbox,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<(Arc<dyn PaymentGateway>, bool)> {
    let ctx = (table, sandbox, clock, provider);
    Ok(match provider {
        ProviderId::WalletQr => build!(ctx, wallet_qr, WalletQrSettings, WalletQrGateway),
        ProviderId::WalletWeb => build!(ctx, wallet_web, WalletWebSettings, WalletWebGateway),
        ProviderId::CardGateway => {
            build!(ctx, card_gateway, CardGatewaySettings, CardGatewayGateway)
        }
        ProviderId::WalletGlobal => {
            build!(
                ctx,
                wallet_global,
                WalletGlobalSettings,
                WalletGlobalGateway
            )
        }
        ProviderId::MorA => build!(ctx, mor_a, MorASettings, MorAGateway),
        ProviderId::MorB => build!(ctx, mor_b, MorBSettings, MorBGateway),
        ProviderId::MorC => build!(ctx, mor_c, MorCSettings, MorCGateway),
    })
}
