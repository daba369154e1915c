//! Build the gateways. A provider with a `[providers.<id>]` table is *live*: it talks to its real
//! API (or its test mode). A provider without one is *sandboxed* in development (it talks to the
//! local sandbox) and *off* in production (no gateway: its plans are neither listed nor sold and
//! its webhook path answers 404). Production needs at least one live provider, refuses a live
//! provider on test-mode credentials (each gateway's settings say which setting makes them so:
//! `test_mode()`), and refuses a static catalog that sells through a provider that is off.

use std::sync::Arc;

use anyhow::{Context, bail};
use application::ports::{Clock, Gateways, PaymentGateway};
use application::use_cases::plans::PricingMode;
use domain::{AppEnvironment, Plan, ProviderId};
use gateways::GatewayContext;
use gateways::shared::ProviderHttp;
use gateways::shared::TestModeSetting;
use sandbox::Sandbox;

use crate::settings::Settings;

/// Whether a live `provider` refuses a plain-http callback URL in its API calls (WeChat Pay's
/// `notify_url` must be https), so that Tally refuses to start rather than fail every checkout.
const fn needs_https_callbacks(provider: ProviderId) -> bool {
    match provider {
        ProviderId::WalletQr => true,
        ProviderId::WalletWeb
        | ProviderId::CardGateway
        | ProviderId::WalletGlobal
        | ProviderId::MorA
        | ProviderId::MorB
        | ProviderId::MorC => false,
    }
}

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
    /// provider and no live provider on test-mode credentials (a deployment on test keys takes
    /// no money while looking healthy, so it is refused, not warned about), and with
    /// `PRICING_MODE=static` no plan of the static catalog may be sold through a provider that
    /// is off (with `dynamic` that catalog is not sold).
    ///
    /// # Errors
    /// One message naming the problem: no live provider, every test-mode provider and setting,
    /// or every stranded plan and its provider, so that the operator fixes it in one pass.
    pub fn check(&self, settings: &Settings, static_catalog: &[Plan]) -> Result<(), String> {
        if settings.environment == AppEnvironment::Production && self.live.is_empty() {
            return Err(
                "APP_ENV=production needs at least one live provider: add a \
                 [providers.<id>] table to tally.toml (docs/providers/<id>.md lists each \
                 provider's settings)"
                    .to_owned(),
            );
        }
        if settings.environment == AppEnvironment::Production {
            let test_mode = self.test_mode_settings(settings);
            if !test_mode.is_empty() {
                return Err(format!(
                    "APP_ENV=production refuses test-mode credentials, which take no money \
                     while everything looks healthy: {}; configure the provider's live \
                     credentials (docs/operations.md, \"Test and live keys\")",
                    test_mode.join("; ")
                ));
            }
        }
        let https = settings
            .app_base_url
            .as_deref()
            .is_some_and(|url| url.starts_with("https://"));
        let needs_https: Vec<&str> = self
            .live
            .iter()
            .filter(|p| needs_https_callbacks(**p))
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

impl ProviderReport {
    /// Every live provider whose settings are test-mode credentials, as
    /// `providers.<id>.<setting> <why>`; each gateway says it of its own settings. A table
    /// that does not fit its settings is left to [`build_gateways`], which names the problem.
    #[must_use]
    pub fn test_mode_settings(&self, settings: &Settings) -> Vec<String> {
        self.live
            .iter()
            .filter_map(|&provider| {
                let table = settings.providers.get(&provider)?;
                let setting = test_mode_of(provider, table)?;
                Some(format!(
                    "providers.{provider}.{} {}",
                    setting.field, setting.reason
                ))
            })
            .collect()
    }
}

/// The setting of `provider`'s table that makes it test-mode credentials, if any.
fn test_mode_of(provider: ProviderId, table: &toml::Table) -> Option<TestModeSetting> {
    fn read<T: serde::de::DeserializeOwned>(table: &toml::Table) -> Option<T> {
        table.clone().try_into().ok()
    }
    match provider {
        ProviderId::WalletQr => read::<gateways::wallet_qr::WalletQrSettings>(table)?.test_mode(),
        ProviderId::WalletWeb => {
            read::<gateways::wallet_web::WalletWebSettings>(table)?.test_mode()
        }
        ProviderId::CardGateway => {
            read::<gateways::card_gateway::CardGatewaySettings>(table)?.test_mode()
        }
        ProviderId::WalletGlobal => {
            read::<gateways::wallet_global::WalletGlobalSettings>(table)?.test_mode()
        }
        ProviderId::MorA => read::<gateways::mor_a::MorASettings>(table)?.test_mode(),
        ProviderId::MorB => read::<gateways::mor_b::MorBSettings>(table)?.test_mode(),
        ProviderId::MorC => read::<gateways::mor_c::MorCSettings>(table)?.test_mode(),
    }
}

macro_rules! build {
    ($ctx:expr, $module:ident, $settings:ident, $gateway:ident) => {{
        let (table, sandbox, clock, id): (_, Option<&Sandbox>, _, ProviderId) = $ctx;
        let (settings, on_sandbox): (gateways::$module::$settings, bool) = match (table, sandbox) {
            (Some(table), _) => (
                table
                    .clone()
                    .try_into()
                    .with_context(|| format!("providers.{}", id.as_str()))?,
                false,
            ),
            // The sandbox hands out its settings as the table an operator would write.
            (None, Some(sandbox)) => (
                serde_json::from_value(sandbox::$module::gateway_settings(
                    &sandbox.api_base_url(id),
                ))
                .with_context(|| format!("the sandbox's providers.{}", id.as_str()))?,
                true,
            ),
            (None, None) => bail!("providers.{}: no settings table", id.as_str()),
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
        let (gateway, on_sandbox) = build_gateway(provider, table, Some(sandbox), clock)?;
        if on_sandbox && settings.environment == AppEnvironment::Production {
            // Unreachable through `ProviderReport::of`; kept so that no future path can wire
            // the sandbox into production.
            bail!("providers.{provider}: APP_ENV=production never runs a provider on the sandbox");
        }
        gateways = gateways.with(gateway);
    }
    Ok((gateways, report))
}

/// The gateway of live `provider`, from its settings table (`tally check-config --online`).
///
/// # Errors
/// A table that does not fit the provider's settings, or unusable keys.
pub fn build_live_gateway(
    provider: ProviderId,
    table: &toml::Table,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<Arc<dyn PaymentGateway>> {
    build_gateway(provider, Some(table), None, clock).map(|(gateway, _)| gateway)
}

/// The gateway of `provider`: from its settings table when it has one, else pointed at the
/// sandbox; and whether it is the sandbox's.
fn build_gateway(
    provider: ProviderId,
    table: Option<&toml::Table>,
    sandbox: Option<&Sandbox>,
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
