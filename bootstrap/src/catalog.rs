//! The static catalog: plans from `payment.toml` and consumption rules from `credits.toml`.
//!
//! [`load`] reads both files of a configuration directory and validates them as a whole. It never
//! stops at the first problem: every syntax error, type error, unknown field and broken rule of
//! every plan is reported, each naming the file, the line, the plan id and the field, so that an
//! operator fixes a catalog in one pass.
//!
//! Money never passes through a float: numbers are taken from the TOML source text digit for
//! digit (see the `toml_source` module), so `amount = 9.99` is exactly 9.99.
//!
//! Plans keep the order of `payment.toml`, which is the order the pricing page lists them in.

mod auto_top_up;
mod credits;
mod new_accounts;
mod payment;
mod price_book;
mod signup;
mod toml_source;

use std::collections::BTreeSet;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use domain::consumption::ConsumptionRules;
use domain::{AppEnvironment, Plan, PlanId, ProviderRefs};

/// The file of static plans, in the configuration directory.
pub const PAYMENT_FILE: &str = "payment.toml";
/// The file of consumption rules, in the configuration directory.
pub const CREDITS_FILE: &str = "credits.toml";
/// The largest configuration file read: far above any real catalog, small enough to parse fast.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// The most plans a catalog may declare.
pub const MAX_PLANS: usize = 1_000;

/// A validated catalog: every plan and the consumption rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    plans: Vec<Plan>,
    consumption: ConsumptionRules,
    signup_grant: Option<signup::SignupCredits>,
    new_account_ceiling: Option<domain::Credits>,
    /// The operator's rails around automatic top-up (`[autoTopUp]`).
    top_up_rails: domain::TopUpRails,
}

impl Catalog {
    /// Every plan, in `payment.toml` order, hidden ones included.
    #[must_use]
    pub fn plans(&self) -> &[Plan] {
        &self.plans
    }

    /// The plan with this id.
    #[must_use]
    pub fn plan(&self, id: &PlanId) -> Option<&Plan> {
        self.plans.iter().find(|p| p.id() == id)
    }

    /// The consumption rules.
    #[must_use]
    pub fn consumption(&self) -> &ConsumptionRules {
        &self.consumption
    }

    /// The monthly credit ceiling every new account opens with (`[newAccounts]
    /// monthlyCeiling` in `credits.toml`), if any.
    #[must_use]
    pub fn new_account_ceiling(&self) -> Option<domain::Credits> {
        self.new_account_ceiling
    }

    /// The operator's rails around automatic top-up (`[autoTopUp]` in `credits.toml`).
    #[must_use]
    pub fn top_up_rails(&self) -> domain::TopUpRails {
        self.top_up_rails
    }

    /// The credits a new user is given (`[signupGrant]` in `credits.toml`), if any.
    #[must_use]
    pub fn signup_grant(&self) -> Option<application::ports::SignupGrant> {
        self.signup_grant.map(|credits| credits.grant)
    }

    /// Who may be given sign-up credits (`[signupGrant] requireVerifiedEmail`, default: only
    /// a verified e-mail address).
    #[must_use]
    pub fn signup_credits_for(&self) -> application::sign_up::SignupCreditsFor {
        self.signup_grant.map_or(
            application::sign_up::SignupCreditsFor::VerifiedEmail,
            |credits| credits.credits_for,
        )
    }
}

/// One problem in a configuration file.
///
/// Displays as `config/payment.toml:12: plan "pro_monthly": amount must be greater than zero`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as the path was given.
    pub file: String,
    /// The 1-based line the problem is on or nearest to, when known.
    pub line: Option<usize>,
    /// The plan the problem is in, for `payment.toml`.
    pub plan_id: Option<String>,
    /// The field or key, spelled as in the file (`duration.months`, `modelMultipliers.gpt-4o`).
    pub field: Option<String>,
    /// What is wrong, as a predicate of the field (`must be greater than zero`).
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(plan_id) = &self.plan_id {
            write!(f, "plan {plan_id:?}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field} ")?;
        }
        f.write_str(&self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// Where a catalog came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogSource {
    /// `payment.toml` and `credits.toml` of the configuration directory.
    Directory,
    /// The sample catalog built into the binary (development without a configuration
    /// directory).
    BuiltInSample,
}

/// The sample `payment.toml` shipped in the checkout's `config/`, built into the binary.
const SAMPLE_PAYMENT: &str = include_str!("../../config/payment.toml");
/// The sample `credits.toml` shipped in the checkout's `config/`, built into the binary.
const SAMPLE_CREDITS: &str = include_str!("../../config/credits.toml");

/// Read and validate `payment.toml` and `credits.toml` in `dir`.
///
/// # Errors
/// Every problem found in either file, in file order; never an empty list.
pub fn load(dir: &Path) -> Result<Catalog, Vec<ConfigError>> {
    let payment = read_file(&dir.join(PAYMENT_FILE));
    let credits = read_file(&dir.join(CREDITS_FILE));
    parse(payment, credits)
}

/// The catalog for `tally serve` and `tally check-config`: the directory's, or, in development
/// when `dir` does not exist at all, the sample catalog built into the binary, so a binary
/// started outside the checkout runs. Production always needs the directory.
///
/// # Errors
/// As [`load`].
pub fn load_for(
    dir: &Path,
    environment: AppEnvironment,
) -> Result<(Catalog, CatalogSource), Vec<ConfigError>> {
    if environment == AppEnvironment::Development && !dir.exists() {
        return sample().map(|catalog| (catalog, CatalogSource::BuiltInSample));
    }
    load(dir).map(|catalog| (catalog, CatalogSource::Directory))
}

/// The sample catalog built into the binary.
///
/// # Errors
/// Never for a binary whose tests pass (the sample is the checkout's `config/`).
pub fn sample() -> Result<Catalog, Vec<ConfigError>> {
    let file = |name: &str, text: &str| Ok((format!("(built-in sample) {name}"), text.to_owned()));
    parse(
        file(PAYMENT_FILE, SAMPLE_PAYMENT),
        file(CREDITS_FILE, SAMPLE_CREDITS),
    )
}

/// The provider-side ids of the built-in sample catalog that `plans` still use, one message
/// per use: such an id names nothing at a real provider, so a production catalog must replace
/// every one with the id from the provider's dashboard.
#[must_use]
pub fn sample_ids_in(plans: &[Plan]) -> Vec<String> {
    let Ok(sample) = sample() else {
        return Vec::new();
    };
    let shipped: BTreeSet<(&str, &str)> = sample
        .plans()
        .iter()
        .flat_map(|plan| ref_fields(plan.provider_refs()))
        .collect();
    let mut found = Vec::new();
    for plan in plans {
        for (field, value) in ref_fields(plan.provider_refs()) {
            if shipped.contains(&(field, value)) {
                found.push(format!(
                    "plan {:?}: {field} {value:?} is the shipped sample's placeholder; replace it \
                     with the id from your provider's dashboard",
                    plan.id().as_str()
                ));
            }
        }
    }
    found
}

/// A plan's provider-side ids, each with its `payment.toml` field name.
pub(crate) fn ref_fields(refs: &ProviderRefs) -> impl Iterator<Item = (&'static str, &str)> {
    refs.fields().map(|(r, id)| (r.field, id))
}

type FileText = Result<(String, String), Vec<ConfigError>>;

/// Validate the two files' texts as one catalog.
fn parse(payment: FileText, credits: FileText) -> Result<Catalog, Vec<ConfigError>> {
    let plans = payment
        .and_then(|(name, text)| payment::load_plans(&toml_source::SourceFile::new(&name, &text)))
        .map_err(in_file_order);
    let consumption = credits
        .and_then(|(name, text)| {
            let file = toml_source::SourceFile::new(&name, &text);
            let rules = credits::load_rules(&file);
            let signup = signup::load_signup_grant(&file);
            let ceiling = new_accounts::load_ceiling(&file);
            let book = price_book::load_price_book(&file);
            let rails = auto_top_up::load_rails(&file);
            match (rules, signup, ceiling, book, rails) {
                (Ok(rules), Ok(signup), Ok(ceiling), Ok(book), Ok(rails)) => {
                    Ok((rules.with_price_book(book), signup, (ceiling, rails)))
                }
                (rules, signup, ceiling, book, rails) => Err(rules
                    .err()
                    .into_iter()
                    .chain(signup.err())
                    .chain(ceiling.err())
                    .chain(book.err())
                    .chain(rails.err())
                    .flatten()
                    .collect()),
            }
        })
        .map_err(in_file_order);
    match (plans, consumption) {
        (Ok(plans), Ok((consumption, signup_grant, (new_account_ceiling, top_up_rails)))) => {
            Ok(Catalog {
                plans,
                consumption,
                signup_grant,
                new_account_ceiling,
                top_up_rails,
            })
        }
        (plans, consumption) => Err(plans
            .err()
            .into_iter()
            .chain(consumption.err())
            .flatten()
            .collect()),
    }
}

/// One file's errors sorted by line, so that they read top to bottom; the sort is stable, so
/// errors on one line keep the order they were found in.
fn in_file_order(mut errors: Vec<ConfigError>) -> Vec<ConfigError> {
    errors.sort_by_key(|e| e.line);
    errors
}

/// The file's display name and its text, at most [`MAX_FILE_BYTES`] of UTF-8.
fn read_file(path: &Path) -> FileText {
    let name = path.display().to_string();
    let fail = |problem: String| {
        vec![ConfigError {
            file: name.clone(),
            line: None,
            plan_id: None,
            field: None,
            problem,
        }]
    };
    let file = File::open(path).map_err(|e| fail(describe_io_error(&e)))?;
    // Read one byte past the limit, so that a file that grows after a size check is still caught.
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(describe_io_error(&e)))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!(
            "is larger than the limit of {MAX_FILE_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| fail("is not valid UTF-8".to_owned()))?;
    Ok((name, text))
}

fn describe_io_error(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "does not exist".to_owned(),
        io::ErrorKind::PermissionDenied => "cannot be read: permission denied".to_owned(),
        _ => format!("cannot be read: {error}"),
    }
}
