//! `tally check-config`: validate the static catalog and show what it declares.
//!
//! On success the plans are printed as an aligned table with a summary of the consumption rules
//! and which providers are live, sandboxed or off with the settings and environment it is given
//! (`tally.toml` and `APP_ENV` …, as `tally serve` reads them); on failure every problem is
//! printed to stderr, one per line, and the exit status is
//! [`EXIT_INVALID_CONFIG`](super::EXIT_INVALID_CONFIG). A catalog `tally serve` would refuse
//! (production without a live provider, or plans sold through a provider that is off) fails the
//! same way: in production that includes a live provider on test-mode credentials.
//!
//! With `--online` ([`online`]), each live provider is then called once with its credentials
//! and what answered is reported, one line per provider.

mod online;

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use domain::consumption::ConsumptionMode;
use domain::plan::Prominence;
use domain::{AppEnvironment, Duration, Plan, UnknownModelPolicy, Visibility};

use super::{CheckConfigArgs, EXIT_INVALID_CONFIG};
use crate::catalog::{self, Catalog, CatalogSource};
use crate::providers::ProviderReport;
use crate::settings::{self, ProcessEnv};

const HEADER: [&str; 9] = [
    "ID",
    "PROVIDER",
    "TYPE",
    "PRICE",
    "ORIGINAL",
    "DEV PRICE",
    "DURATION",
    "CREDITS",
    "FLAGS",
];

/// Check the configuration in `args.dir.config`, writing the report to `out` or the problems to
/// `err`; with `args.online`, then call each live provider ([`online::run`]).
///
/// # Errors
/// Writing to `out` or `err` failed.
pub(super) fn run(
    args: &CheckConfigArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let dir = args.dir.config.display();
    let settings = settings::load(&args.dir.config, &ProcessEnv).map_err(|e| vec![e.to_string()]);
    let environment = settings
        .as_ref()
        .map_or(AppEnvironment::Development, |s| s.environment);
    let catalog = catalog::load_for(&args.dir.config, environment)
        .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>());
    let loaded = match (settings, catalog) {
        (Ok(settings), Ok((catalog, source))) => {
            let providers = ProviderReport::of(&settings);
            providers
                .check(&settings, catalog.plans())
                .map_err(|problem| vec![problem])
                .and_then(|()| host_keys(&settings))
                .and_then(|()| placeholders(&settings, &catalog))
                .map(|notes| (settings, catalog, source, providers, notes))
        }
        (settings, catalog) => Err(settings
            .err()
            .into_iter()
            .chain(catalog.err())
            .flatten()
            .collect()),
    };
    match loaded {
        Ok((settings, catalog, source, providers, notes)) => {
            let report = report(&dir.to_string(), &catalog, source, &providers, &notes);
            out.write_all(report.as_bytes())
                .context("cannot write the report to stdout")?;
            if args.online {
                return online::run(&settings, &providers, out, err);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            let mut report = String::new();
            for error in &errors {
                let _ = writeln!(report, "{error}");
            }
            let _ = writeln!(report, "{dir}: {} problems found", errors.len());
            err.write_all(report.as_bytes())
                .context("cannot write the problems to stderr")?;
            Ok(ExitCode::from(EXIT_INVALID_CONFIG))
        }
    }
}

/// The report of a valid configuration: the plans, the consumption rules, the providers, the
/// notes, and where the catalog came from.
fn report(
    dir: &str,
    catalog: &Catalog,
    source: CatalogSource,
    providers: &ProviderReport,
    notes: &[String],
) -> String {
    let mut report = format!(
        "{}\n{}\n{}\n",
        plan_table(catalog.plans()),
        consumption_summary(catalog),
        providers.summary(),
    );
    for note in notes {
        let _ = writeln!(report, "note: {note}");
    }
    let _ = match source {
        CatalogSource::Directory => writeln!(
            report,
            "{dir}: {} plans and the consumption rules are valid",
            catalog.plans().len()
        ),
        CatalogSource::BuiltInSample => writeln!(
            report,
            "{dir} does not exist: the sample catalog built into the binary ({} plans) is \
             valid, and development runs on it",
            catalog.plans().len()
        ),
    };
    report
}

/// The host application's key, loaded as `tally serve` loads it (a PEM or JWKS file that is
/// missing or unreadable is named here, not only at start).
fn host_keys(settings: &settings::Settings) -> Result<(), Vec<String>> {
    match &settings.host_jwt {
        Some(host_jwt) => crate::host_tokens::HostJwtVerifier::new(host_jwt)
            .map(drop)
            .map_err(|e| vec![e.to_string()]),
        None => Ok(()),
    }
}

/// The shipped sample's provider-side ids still in the catalog: problems in production (they
/// name nothing at a real provider), notes in development (the sandbox accepts any id).
fn placeholders(
    settings: &settings::Settings,
    catalog: &Catalog,
) -> Result<Vec<String>, Vec<String>> {
    let found = catalog::sample_ids_in(catalog.plans());
    if found.is_empty() {
        return Ok(Vec::new());
    }
    if settings.environment == AppEnvironment::Production {
        return Err(found);
    }
    Ok(vec![format!(
        "{} provider-side ids are the shipped sample's placeholders: the sandbox accepts them; \
         replace them with your providers' ids before production (APP_ENV=production tally \
         check-config lists them)",
        found.len()
    )])
}

/// The plans as an aligned text table, one row per plan.
fn plan_table(plans: &[Plan]) -> String {
    let none = || "-".to_owned();
    let rows: Vec<[String; 9]> = plans
        .iter()
        .map(|plan| {
            [
                plan.id().to_string(),
                plan.provider().to_string(),
                plan.plan_type().to_string(),
                plan.price().to_string(),
                plan.original_price().map_or_else(none, |m| m.to_string()),
                plan.development_price()
                    .map_or_else(none, |m| m.to_string()),
                plan.duration().map_or_else(none, duration_label),
                plan.credits().map_or_else(none, |c| c.to_string()),
                flags(plan),
            ]
        })
        .collect();
    let header = HEADER.map(str::to_owned);
    let mut widths = [0_usize; 9];
    for row in std::iter::once(&header).chain(&rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        table.push_str(line.trim_end());
        table.push('\n');
    }
    table
}

fn duration_label(duration: Duration) -> String {
    match duration {
        Duration::Lifetime => "lifetime".to_owned(),
        Duration::Months(months) if months.get() == 1 => "1 month".to_owned(),
        Duration::Months(months) => format!("{} months", months.get()),
    }
}

fn flags(plan: &Plan) -> String {
    let mut flags = Vec::new();
    if plan.visibility() == Visibility::Hidden {
        flags.push("hidden");
    }
    if plan.prominence() == Prominence::Recommended {
        flags.push("recommended");
    }
    if flags.is_empty() {
        "-".to_owned()
    } else {
        flags.join(",")
    }
}

/// One line describing the consumption rules.
fn consumption_summary(catalog: &Catalog) -> String {
    let settings = catalog.consumption().settings();
    let mode = match settings.mode {
        ConsumptionMode::Dynamic => format!(
            "dynamic mode, chat costs {} credits per 1000 tokens",
            settings.cost_per_kilo_token
        ),
        ConsumptionMode::Fixed => "fixed mode".to_owned(),
    };
    let fixed_costs: Vec<String> = settings
        .fixed_costs
        .iter()
        .map(|(feature, cost)| format!("{feature} {cost}"))
        .collect();
    let multipliers: Vec<String> = std::iter::once(format!(
        "default x{}",
        settings.default_multiplier.to_decimal()
    ))
    .chain(
        settings
            .model_multipliers
            .iter()
            .map(|(model, m)| format!("{model} x{}", m.to_decimal())),
    )
    .collect();
    let unknown = match settings.unknown_model {
        UnknownModelPolicy::UseDefault => "charged at the default multiplier",
        UnknownModelPolicy::Refuse => "refused",
    };
    format!(
        "consumption: {mode}; fixed costs: {}; multipliers: {}; unknown models: {unknown}",
        if fixed_costs.is_empty() {
            "none".to_owned()
        } else {
            fixed_costs.join(", ")
        },
        multipliers.join(", ")
    )
}
