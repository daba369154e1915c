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

mod credits;
mod payment;
mod signup;
mod toml_source;

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use domain::consumption::ConsumptionRules;
use domain::{Plan, PlanId};

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

/// Read and validate `payment.toml` and `credits.toml` in `dir`.
///
/// # Errors
/// Every problem found in either file, in file order; never an empty list.
pub fn load(dir: &Path) -> Result<Catalog, Vec<ConfigError>> {
    let plans = read_file(&dir.join(PAYMENT_FILE))
        .and_then(|(name, text)| payment::load_plans(&toml_source::SourceFile::new(&name, &text)))
        .map_err(in_file_order);
    let consumption = read_file(&dir.join(CREDITS_FILE))
        .and_then(|(name, text)| {
            let file = toml_source::SourceFile::new(&name, &text);
            let rules = credits::load_rules(&file);
            let signup = signup::load_signup_grant(&file);
            match (rules, signup) {
                (Ok(rules), Ok(signup)) => Ok((rules, signup)),
                (rules, signup) => Err(rules
                    .err()
                    .into_iter()
                    .chain(signup.err())
                    .flatten()
                    .collect()),
            }
        })
        .map_err(in_file_order);
    match (plans, consumption) {
        (Ok(plans), Ok((consumption, signup_grant))) => Ok(Catalog {
            plans,
            consumption,
            signup_grant,
        }),
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
fn read_file(path: &Path) -> Result<(String, String), Vec<ConfigError>> {
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
