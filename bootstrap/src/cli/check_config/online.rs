//! `tally check-config --online`: call each live provider once with its credentials.
//!
//! Every provider with a `[providers.<id>]` table gets its gateway built exactly as
//! `tally serve` builds it, and makes one authenticated call that changes nothing
//! ([`PaymentGateway::check_credentials`]). Sandboxed providers are not called: the sandbox is
//! not a provider. One line per live provider says what answered: accepted (and the
//! credentials' mode), credentials refused (the provider's code and message, never a secret),
//! unreachable, or an unexpected answer. Any live provider that did not accept makes the exit
//! status [`EXIT_PROVIDER_CHECK_FAILED`].

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use application::ports::{Clock, CredentialCheck, CredentialMode, GatewayError, PaymentGateway};
use domain::{AppEnvironment, ProviderId};

use super::super::{EXIT_PROVIDER_CHECK_FAILED, runtime};
use crate::providers::{ProviderReport, build_live_gateway};
use crate::seams::SystemClock;
use crate::settings::Settings;

/// What one live provider answered.
#[derive(Debug)]
enum Outcome {
    /// It accepted the credentials.
    Accepted(CredentialCheck),
    /// It accepted them, but they are test-mode ones and this is production.
    AcceptedInTestMode(CredentialCheck),
    /// The gateway could not be built from the settings.
    Unusable(String),
    /// The provider refused the credentials or the signature.
    Refused(String),
    /// The provider could not be reached.
    Unreachable(String),
    /// An answer that proves neither.
    Unexpected(String),
}

impl Outcome {
    /// The outcome of a credential check in `environment`.
    fn of(result: Result<CredentialCheck, GatewayError>, environment: AppEnvironment) -> Self {
        match result {
            Ok(check)
                if check.mode == CredentialMode::Test
                    && environment == AppEnvironment::Production =>
            {
                Outcome::AcceptedInTestMode(check)
            }
            Ok(check) => Outcome::Accepted(check),
            Err(GatewayError::Rejected(why)) => Outcome::Refused(why),
            Err(GatewayError::Unreachable(why)) => Outcome::Unreachable(why),
            Err(GatewayError::BadResponse(why)) => Outcome::Unexpected(why),
            Err(GatewayError::NotSupported) => {
                Outcome::Unexpected("this gateway cannot check its credentials".to_owned())
            }
        }
    }

    fn passed(&self) -> bool {
        matches!(self, Outcome::Accepted(_))
    }

    /// The report line's text after the provider id.
    fn describe(&self) -> String {
        match self {
            Outcome::Accepted(check) => {
                format!("accepted, {} mode ({})", check.mode.as_str(), check.detail)
            }
            Outcome::AcceptedInTestMode(check) => format!(
                "accepted, but in test mode ({}): APP_ENV=production refuses test-mode \
                 credentials",
                check.detail
            ),
            Outcome::Unusable(why) => format!("settings unusable: {why}"),
            Outcome::Refused(why) => format!("credentials refused: {why}"),
            Outcome::Unreachable(why) => format!("unreachable: {why}"),
            Outcome::Unexpected(why) => format!("unexpected answer: {why}"),
        }
    }
}

/// Call every live provider of `providers` and report to `out`; a summary of the failures to
/// `err`.
///
/// # Errors
/// The async runtime cannot start, or writing to `out` or `err` failed.
pub(super) fn run(
    settings: &Settings,
    providers: &ProviderReport,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let outcomes = runtime()?.block_on(check_all(settings, &providers.live));
    let mut report = String::new();
    if outcomes.is_empty() {
        report.push_str("online: no live provider to call (sandboxed providers are not called)\n");
    }
    for (provider, outcome) in &outcomes {
        let _ = writeln!(report, "online {provider}: {}", outcome.describe());
    }
    out.write_all(report.as_bytes())
        .context("cannot write the report to stdout")?;
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|(_, outcome)| !outcome.passed())
        .map(|(provider, _)| provider.as_str())
        .collect();
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let summary = format!(
        "{} of {} live providers did not accept their credentials: {}\n",
        failed.len(),
        outcomes.len(),
        failed.join(", ")
    );
    err.write_all(summary.as_bytes())
        .context("cannot write the problems to stderr")?;
    Ok(ExitCode::from(EXIT_PROVIDER_CHECK_FAILED))
}

/// The outcome of each of `live`, in order; one call each, one after the other (each bounded
/// by its provider's timeouts).
async fn check_all(settings: &Settings, live: &[ProviderId]) -> Vec<(ProviderId, Outcome)> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let mut outcomes = Vec::with_capacity(live.len());
    for &provider in live {
        let Some(table) = settings.providers.get(&provider) else {
            continue;
        };
        let outcome = match build_live_gateway(provider, table, &clock) {
            Ok(gateway) => check(gateway.as_ref(), settings.environment).await,
            Err(e) => Outcome::Unusable(format!("{e:#}")),
        };
        outcomes.push((provider, outcome));
    }
    outcomes
}

async fn check(gateway: &dyn PaymentGateway, environment: AppEnvironment) -> Outcome {
    Outcome::of(gateway.check_credentials().await, environment)
}
