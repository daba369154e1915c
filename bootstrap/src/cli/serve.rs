//! `tally serve`: load the catalog and settings, wire the service, serve until SIGTERM/SIGINT.

use std::process::ExitCode;

use super::{ConfigDirArgs, EXIT_INVALID_CONFIG, runtime};
use crate::app::{Application, shutdown_signal};
use crate::catalog::CatalogSource;
use crate::settings::{self, ProcessEnv};
use crate::{catalog, telemetry};
use domain::AppEnvironment;

/// Run the service.
///
/// # Errors
/// Start-up failures (database, providers, binding), named.
pub(super) fn run(args: &ConfigDirArgs) -> anyhow::Result<ExitCode> {
    let settings = match settings::load(&args.config, &ProcessEnv) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID_CONFIG));
        }
    };
    let (catalog, source) = match catalog::load_for(&args.config, settings.environment) {
        Ok(loaded) => loaded,
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            return Ok(ExitCode::from(EXIT_INVALID_CONFIG));
        }
    };
    if settings.environment == AppEnvironment::Production {
        let placeholders = catalog::sample_ids_in(catalog.plans());
        if !placeholders.is_empty() {
            for problem in placeholders {
                eprintln!("error: {problem}");
            }
            return Ok(ExitCode::from(EXIT_INVALID_CONFIG));
        }
    }
    let otlp = telemetry::init(settings.log_format, settings.otlp_endpoint.as_deref());
    if source == CatalogSource::BuiltInSample {
        tracing::warn!(
            config = %args.config.display(),
            "no configuration directory here: running on the sample catalog built into the binary \
             (development only; give --config <dir> with payment.toml and credits.toml to sell your own plans)"
        );
    }
    let served = runtime()?.block_on(async move {
        let app = Application::build(settings, catalog).await?;
        app.run_until_stopped(shutdown_signal()).await
    });
    if let Some(otlp) = otlp {
        otlp.shutdown();
    }
    served?;
    Ok(ExitCode::SUCCESS)
}
