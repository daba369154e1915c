//! `credits.toml`: the consumption settings of spec 2.4, read into [`ConsumptionRules`].
//!
//! ```toml
//! consumptionMode = "dynamic"          # or "fixed"
//! dynamicChatCostPerKiloToken = 0.5    # credits per 1000 chat tokens; required in dynamic mode
//! unknownModel = "default"             # or "refuse": what a model without a multiplier costs
//! spendOrder = "givenFirst"            # or "paidFirst": which credits a spend draws first among
//!                                      # grants of equal priority and expiry
//!
//! [fixedCosts]                         # credits per use of a feature; `chat` is required in fixed mode
//! chat = 1
//! image = 5
//!
//! [modelMultipliers]                   # `default` is required
//! default = 1
//! "gpt-4o" = 2
//! ```
//!
//! Every key is checked and every problem reported, each naming its key.

use std::collections::BTreeMap;

use domain::consumption::{
    CHAT_FEATURE, ConsumptionError, ConsumptionSettings, FeatureName, ModelName, Multiplier,
};
use domain::{
    ConsumptionMode, ConsumptionRules, Credits, CreditsError, SpendOrder, UnknownModelPolicy,
};
use toml::de::DeValue;

use super::ConfigError;
use super::toml_source::{self, SourceFile, Value};

/// The most entries of `fixedCosts` or `modelMultipliers`.
const MAX_ENTRIES: usize = 1_000;
/// The top-level keys.
const KEYS: [&str; 9] = [
    "consumptionMode",
    "spendOrder",
    "dynamicChatCostPerKiloToken",
    "unknownModel",
    "fixedCosts",
    "modelMultipliers",
    super::signup::TABLE,
    super::new_accounts::TABLE,
    super::price_book::TABLE,
];
const MULTIPLIER_PROBLEM: &str = "must be above 0 and at most 1000, with at most 4 decimal places";
const NAME_PROBLEM: &str = "is not a valid name: use 1 to 64 of A-Z a-z 0-9 . _ : / -";

/// Read and validate `credits.toml`.
pub(super) fn load_rules(file: &SourceFile<'_>) -> Result<ConsumptionRules, Vec<ConfigError>> {
    let document = file.parse().map_err(|e| vec![e])?;
    let mut reader = Reader {
        file,
        found: Found::default(),
        errors: Vec::new(),
    };
    for (key, value) in &document {
        reader.read_key(key.get_ref(), value);
    }
    match reader.settings() {
        Some(settings) if reader.errors.is_empty() => {
            let order = reader.found.spend_order.unwrap_or_default();
            // The checks above cover the domain's rules; this keeps the two from drifting apart.
            ConsumptionRules::new(settings)
                .map(|rules| rules.with_spend_order(order))
                .map_err(|e| vec![rule_error(file, &e)])
        }
        _ => {
            debug_assert!(
                !reader.errors.is_empty(),
                "a missing setting is always reported"
            );
            Err(reader.errors)
        }
    }
}

/// What has been read so far.
#[derive(Default)]
struct Found {
    mode: Option<ConsumptionMode>,
    cost_per_kilo_token: Option<Credits>,
    unknown_model: Option<UnknownModelPolicy>,
    fixed_costs: BTreeMap<FeatureName, Credits>,
    model_multipliers: BTreeMap<ModelName, Multiplier>,
    default_multiplier: Option<Multiplier>,
    spend_order: Option<SpendOrder>,
    unreadable: Vec<String>,
}

struct Reader<'f> {
    file: &'f SourceFile<'f>,
    found: Found,
    errors: Vec<ConfigError>,
}

impl Reader<'_> {
    fn fail(&mut self, line: Option<usize>, key: &str, problem: impl Into<String>) {
        let error = self.file.error(line, None, Some(key), problem);
        self.errors.push(error);
        self.found.unreadable.push(key.to_owned());
    }

    /// Convert `value`, or report why it cannot be.
    fn read<T>(
        &mut self,
        key: &str,
        value: &Value<'_>,
        convert: impl FnOnce(&DeValue<'_>) -> Result<T, String>,
    ) -> Option<T> {
        let line = self.file.line_of(value.span().start);
        convert(value.get_ref())
            .map_err(|problem| self.fail(Some(line), key, problem))
            .ok()
    }

    fn read_key(&mut self, key: &str, value: &Value<'_>) {
        match key {
            "consumptionMode" => self.found.mode = self.read(key, value, parse_mode),
            "dynamicChatCostPerKiloToken" => {
                self.found.cost_per_kilo_token = self.read(key, value, positive_credits);
            }
            "unknownModel" => self.found.unknown_model = self.read(key, value, parse_unknown_model),
            "spendOrder" => self.found.spend_order = self.read(key, value, parse_spend_order),
            "fixedCosts" => self.read_fixed_costs(value),
            "modelMultipliers" => self.read_multipliers(value),
            // Read and checked by `signup`.
            "signupGrant" => {}
            // Read and checked by `new_accounts`.
            "newAccounts" => {}
            // Read and checked by `price_book`.
            "priceBook" => {}
            other => {
                let line = self.file.line_of(value.span().start);
                let problem = format!("is not a known key (expected one of: {})", KEYS.join(", "));
                self.fail(Some(line), other, problem);
            }
        }
    }

    fn read_fixed_costs(&mut self, value: &Value<'_>) {
        for (key, name, value) in self.entries("fixedCosts", value) {
            let feature = FeatureName::new(name).map_err(|_| {
                let line = self.file.line_of(value.span().start);
                self.fail(Some(line), &key, NAME_PROBLEM);
            });
            let cost = self.read(&key, value, positive_credits);
            if let (Ok(feature), Some(cost)) = (feature, cost) {
                self.found.fixed_costs.insert(feature, cost);
            }
        }
    }

    fn read_multipliers(&mut self, value: &Value<'_>) {
        for (key, name, value) in self.entries("modelMultipliers", value) {
            let multiplier = self.read(&key, value, parse_multiplier);
            if name == "default" {
                self.found.default_multiplier = multiplier;
                continue;
            }
            let model = ModelName::new(name).map_err(|_| {
                let line = self.file.line_of(value.span().start);
                self.fail(Some(line), &key, NAME_PROBLEM);
            });
            if let (Ok(model), Some(multiplier)) = (model, multiplier) {
                self.found.model_multipliers.insert(model, multiplier);
            }
        }
    }

    /// The entries of a table, keyed `table.name`, or none after reporting why.
    fn entries<'v, 'i>(
        &mut self,
        table: &str,
        value: &'v Value<'i>,
    ) -> Vec<(String, &'v str, &'v Value<'i>)> {
        let line = Some(self.file.line_of(value.span().start));
        let entries = match toml_source::table(value.get_ref()) {
            Ok(entries) => entries,
            Err(problem) => {
                self.fail(line, table, problem);
                return Vec::new();
            }
        };
        if entries.len() > MAX_ENTRIES {
            self.fail(line, table, format!("has more than {MAX_ENTRIES} entries"));
            return Vec::new();
        }
        entries
            .iter()
            .map(|(key, value)| {
                let name: &str = key.get_ref();
                (format!("{table}.{name}"), name, value)
            })
            .collect()
    }

    /// The settings, or `None` after reporting every required setting that is missing.
    fn settings(&mut self) -> Option<ConsumptionSettings> {
        let found = std::mem::take(&mut self.found);
        let not_reported = |key: &str| {
            !found
                .unreadable
                .iter()
                .any(|u| key == u || key.starts_with(&format!("{u}.")))
        };
        let mut problems = Vec::new();
        if found.mode.is_none() && not_reported("consumptionMode") {
            problems.push(("consumptionMode", "is required: \"dynamic\" or \"fixed\""));
        }
        if found.unknown_model.is_none() && not_reported("unknownModel") {
            problems.push(("unknownModel", "is required: \"default\" or \"refuse\""));
        }
        if found.default_multiplier.is_none() && not_reported("modelMultipliers.default") {
            problems.push(("modelMultipliers.default", "is required"));
        }
        let dynamic = found.mode == Some(ConsumptionMode::Dynamic);
        if dynamic
            && found.cost_per_kilo_token.is_none()
            && not_reported("dynamicChatCostPerKiloToken")
        {
            problems.push(("dynamicChatCostPerKiloToken", "is required in dynamic mode"));
        }
        let fixed = found.mode == Some(ConsumptionMode::Fixed);
        let has_chat = found.fixed_costs.keys().any(|f| f.as_str() == CHAT_FEATURE);
        if fixed && !has_chat && not_reported("fixedCosts.chat") {
            problems.push(("fixedCosts.chat", "is required in fixed mode"));
        }
        for (key, problem) in problems {
            self.fail(None, key, problem);
        }
        Some(ConsumptionSettings {
            mode: found.mode?,
            fixed_costs: found.fixed_costs,
            // Unused in fixed mode, where it may be left out.
            cost_per_kilo_token: found.cost_per_kilo_token.unwrap_or(Credits::ZERO),
            model_multipliers: found.model_multipliers,
            default_multiplier: found.default_multiplier?,
            unknown_model: found.unknown_model?,
        })
    }
}

fn parse_mode(value: &DeValue<'_>) -> Result<ConsumptionMode, String> {
    match toml_source::string(value)?.as_str() {
        "dynamic" => Ok(ConsumptionMode::Dynamic),
        "fixed" => Ok(ConsumptionMode::Fixed),
        other => Err(format!("must be \"dynamic\" or \"fixed\", found {other:?}")),
    }
}

/// `spendOrder`: which credits a spend draws first among grants of equal priority and expiry.
fn parse_spend_order(value: &DeValue<'_>) -> Result<SpendOrder, String> {
    match toml_source::string(value)?.as_str() {
        "givenFirst" => Ok(SpendOrder::GivenFirst),
        "paidFirst" => Ok(SpendOrder::PaidFirst),
        other => Err(format!(
            "must be \"givenFirst\" or \"paidFirst\", found {other:?}"
        )),
    }
}

fn parse_unknown_model(value: &DeValue<'_>) -> Result<UnknownModelPolicy, String> {
    match toml_source::string(value)?.as_str() {
        "default" => Ok(UnknownModelPolicy::UseDefault),
        "refuse" => Ok(UnknownModelPolicy::Refuse),
        other => Err(format!(
            "must be \"default\" or \"refuse\", found {other:?}"
        )),
    }
}

fn positive_credits(value: &DeValue<'_>) -> Result<Credits, String> {
    let credits = Credits::from_decimal(toml_source::decimal(value)?).map_err(|e| match e {
        CreditsError::Negative => "must not be negative".to_owned(),
        CreditsError::TooPrecise => "must have at most two decimal places".to_owned(),
        CreditsError::TooLarge => "is too large".to_owned(),
        other => other.to_string(),
    })?;
    if credits.is_zero() {
        return Err("must be greater than zero".to_owned());
    }
    Ok(credits)
}

fn parse_multiplier(value: &DeValue<'_>) -> Result<Multiplier, String> {
    Multiplier::from_decimal(toml_source::decimal(value)?)
        .map_err(|_| MULTIPLIER_PROBLEM.to_owned())
}

/// A rule the domain refused that the checks above missed.
fn rule_error(file: &SourceFile<'_>, error: &ConsumptionError) -> ConfigError {
    match error {
        ConsumptionError::UnknownFeature(feature) => file.error(
            None,
            None,
            Some(&format!("fixedCosts.{feature}")),
            "is required in fixed mode",
        ),
        other => file.error(None, None, None, format!("is refused: {other}")),
    }
}
