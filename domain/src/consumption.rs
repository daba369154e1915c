//! Credit consumption rules (spec 2.4): fixed costs per feature, or per token with per-model
//! multipliers.
//!
//! Cost = tokens / 1000 × cost per kilo-token × the model's multiplier, rounded up to the credit
//! unit (0.01). All arithmetic is integer (hundredths of credits, ten-thousandths of a
//! multiplier) in 128 bits, then checked back into [`Credits`]: it cannot overflow, wrap or
//! produce NaN.

use std::collections::BTreeMap;
use std::fmt;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

use crate::credits::Credits;
use crate::ledger::SpendOrder;
use crate::pricing::{PriceBook, Priced, TokenUsage};
use crate::time::Timestamp;

/// The most tokens one consumption may report; more is treated as a caller bug.
pub const MAX_TOKENS: u64 = 100_000_000;
/// The largest multiplier.
pub const MAX_MULTIPLIER_TEN_THOUSANDTHS: u64 = 1_000 * 10_000;
/// The feature whose fixed cost a chat is charged in fixed mode.
pub const CHAT_FEATURE: &str = "chat";

/// `consumptionMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumptionMode {
    /// Every use of a feature costs its fixed price.
    Fixed,
    /// Chat costs per token (`dynamicChatCostPerKiloToken`); other features stay fixed.
    Dynamic,
}

/// What to do with a model that has no configured multiplier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownModelPolicy {
    /// Charge with the `default` multiplier.
    UseDefault,
    /// Refuse the consumption.
    Refuse,
}

/// Why a consumption rule or a cost computation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumptionError {
    /// No fixed cost is configured for the feature.
    #[error("unknown feature {0:?}")]
    UnknownFeature(String),
    /// The model has no multiplier and the policy refuses unknown models.
    #[error("unknown model {0:?}")]
    UnknownModel(String),
    /// A name is empty, too long or has characters outside `[A-Za-z0-9._:/-]`.
    #[error("invalid name {0:?}")]
    InvalidName(String),
    /// A multiplier is zero, negative, too precise or too large.
    #[error("multiplier must be above 0 and at most 1000, with at most 4 decimal places")]
    InvalidMultiplier,
    /// Zero or more than [`MAX_TOKENS`] tokens.
    #[error("tokens must be 1 to {MAX_TOKENS}")]
    InvalidTokens,
    /// A cost is zero where a positive cost is required.
    #[error("{0} must be greater than zero")]
    NotPositive(String),
    /// The cost is larger than any balance can be.
    #[error("cost is too large")]
    TooLarge,
    /// Two price-book entries of one model take effect at the same instant.
    #[error("two prices of {0} take effect at the same time")]
    DuplicatePrice(String),
}

fn valid_name(value: &str) -> bool {
    (1..=64).contains(&value.len())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-'))
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Parse a name: 1 to 64 of `A-Z a-z 0-9 . _ : / -`.
            ///
            /// # Errors
            /// [`ConsumptionError::InvalidName`].
            pub fn new(value: impl Into<String>) -> Result<Self, ConsumptionError> {
                let value = value.into();
                if valid_name(&value) {
                    Ok(Self(value))
                } else {
                    Err(ConsumptionError::InvalidName(value.chars().take(64).collect()))
                }
            }

            /// The name.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A feature with a fixed cost, such as `chat` or `image`.
    FeatureName
);
name_type!(
    /// An AI model, such as `gpt-4o`.
    ModelName
);

/// A cost multiplier with four decimal places, stored as ten-thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Multiplier(u64);

impl Multiplier {
    /// ×1.
    pub const ONE: Multiplier = Multiplier(10_000);

    /// Parse a decimal multiplier such as `1.5`.
    ///
    /// # Errors
    /// [`ConsumptionError::InvalidMultiplier`] when not in `(0, 1000]` or more precise than 4 places.
    pub fn from_decimal(value: Decimal) -> Result<Self, ConsumptionError> {
        let normalized = value.normalize();
        if normalized.scale() > 4 || normalized <= Decimal::ZERO {
            return Err(ConsumptionError::InvalidMultiplier);
        }
        let ten_thousandths = (normalized * Decimal::from(10_000))
            .to_u64()
            .ok_or(ConsumptionError::InvalidMultiplier)?;
        Self::from_ten_thousandths(ten_thousandths)
    }

    /// A multiplier from ten-thousandths (`15_000` is ×1.5).
    ///
    /// # Errors
    /// [`ConsumptionError::InvalidMultiplier`] when zero or above ×1000.
    pub fn from_ten_thousandths(value: u64) -> Result<Self, ConsumptionError> {
        if value == 0 || value > MAX_MULTIPLIER_TEN_THOUSANDTHS {
            return Err(ConsumptionError::InvalidMultiplier);
        }
        Ok(Self(value))
    }

    /// The multiplier in ten-thousandths.
    #[must_use]
    pub const fn ten_thousandths(self) -> u64 {
        self.0
    }

    /// The exact decimal value.
    #[must_use]
    pub fn to_decimal(self) -> Decimal {
        Decimal::new(i64::try_from(self.0).unwrap_or(i64::MAX), 4).normalize()
    }
}

/// A positive token count, at most [`MAX_TOKENS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenCount(u64);

impl TokenCount {
    /// Parse a token count.
    ///
    /// # Errors
    /// [`ConsumptionError::InvalidTokens`] for zero, negative or more than [`MAX_TOKENS`].
    pub fn new(tokens: i64) -> Result<Self, ConsumptionError> {
        match u64::try_from(tokens) {
            Ok(t) if (1..=MAX_TOKENS).contains(&t) => Ok(Self(t)),
            _ => Err(ConsumptionError::InvalidTokens),
        }
    }

    /// The count.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// One use to charge for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Usage {
    /// A use of a fixed-cost feature, optionally on a model whose multiplier applies.
    Feature {
        /// The feature.
        feature: FeatureName,
        /// The model used, if the feature runs on one.
        model: Option<ModelName>,
    },
    /// A chat on `model` that used `tokens` tokens.
    Chat {
        /// The model.
        model: ModelName,
        /// Tokens used (prompt plus completion).
        tokens: TokenCount,
    },
    /// A call to `model` whose tokens are known by kind.
    Tokens {
        /// The model.
        model: ModelName,
        /// Tokens by kind.
        usage: TokenUsage,
    },
}

/// The consumption configuration as loaded, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumptionSettings {
    /// `consumptionMode`.
    pub mode: ConsumptionMode,
    /// Fixed cost per feature.
    pub fixed_costs: BTreeMap<FeatureName, Credits>,
    /// `dynamicChatCostPerKiloToken`.
    pub cost_per_kilo_token: Credits,
    /// `modelMultipliers`, without `default`.
    pub model_multipliers: BTreeMap<ModelName, Multiplier>,
    /// `modelMultipliers.default`.
    pub default_multiplier: Multiplier,
    /// Whether unknown models use `default` or are refused.
    pub unknown_model: UnknownModelPolicy,
}

/// Validated consumption rules, with the price book that prices the models it lists and the
/// order spends draw grant lots in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumptionRules(ConsumptionSettings, PriceBook, SpendOrder);

impl ConsumptionRules {
    /// Validate settings.
    ///
    /// # Errors
    /// A zero fixed cost; in dynamic mode a zero cost per kilo-token; in fixed mode no `chat` cost.
    pub fn new(settings: ConsumptionSettings) -> Result<Self, ConsumptionError> {
        if let Some((feature, _)) = settings.fixed_costs.iter().find(|(_, cost)| cost.is_zero()) {
            return Err(ConsumptionError::NotPositive(format!(
                "fixed cost of {feature}"
            )));
        }
        match settings.mode {
            ConsumptionMode::Dynamic if settings.cost_per_kilo_token.is_zero() => Err(
                ConsumptionError::NotPositive("dynamicChatCostPerKiloToken".into()),
            ),
            ConsumptionMode::Fixed
                if !settings
                    .fixed_costs
                    .keys()
                    .any(|f| f.as_str() == CHAT_FEATURE) =>
            {
                Err(ConsumptionError::UnknownFeature(CHAT_FEATURE.into()))
            }
            _ => Ok(Self(settings, PriceBook::default(), SpendOrder::default())),
        }
    }

    /// The rules with `book`: a use of a model the book has an entry in force for is priced
    /// by it ([`ConsumptionRules::price`]).
    #[must_use]
    pub fn with_price_book(self, book: PriceBook) -> Self {
        Self(self.0, book, self.2)
    }

    /// The rules with spends drawing given or paid credits first among lots of equal priority
    /// and expiry (`spendOrder`).
    #[must_use]
    pub fn with_spend_order(self, order: SpendOrder) -> Self {
        Self(self.0, self.1, order)
    }

    /// The order spends draw grant lots in.
    #[must_use]
    pub fn spend_order(&self) -> SpendOrder {
        self.2
    }

    /// The price book.
    #[must_use]
    pub fn price_book(&self) -> &PriceBook {
        &self.1
    }

    /// What `usage` at `at` costs, and how it was priced: a model with a price-book entry in
    /// force at `at` by that entry (tokens given without kinds count as input), anything else
    /// by [`ConsumptionRules::cost`] (a breakdown by its total tokens).
    ///
    /// # Errors
    /// As [`ConsumptionRules::cost`].
    pub fn price(&self, usage: &Usage, at: Timestamp) -> Result<Priced, ConsumptionError> {
        let by_book = |model: &ModelName, tokens: TokenUsage| {
            self.1.entry_at(model, at).map(|entry| entry.price(&tokens))
        };
        match usage {
            Usage::Feature { .. } => self.cost(usage).map(Priced::by_rules),
            Usage::Chat { model, tokens } => {
                let as_input =
                    TokenUsage::new([i64::try_from(tokens.get()).unwrap_or(i64::MAX), 0, 0, 0, 0])?;
                by_book(model, as_input).unwrap_or_else(|| self.cost(usage).map(Priced::by_rules))
            }
            Usage::Tokens {
                model,
                usage: tokens,
            } => by_book(model, *tokens).unwrap_or_else(|| {
                let chat = Usage::Chat {
                    model: model.clone(),
                    tokens: tokens.total(),
                };
                self.cost(&chat).map(Priced::by_rules)
            }),
        }
    }

    /// The validated settings.
    #[must_use]
    pub fn settings(&self) -> &ConsumptionSettings {
        &self.0
    }

    /// The multiplier that applies to `model`.
    ///
    /// # Errors
    /// [`ConsumptionError::UnknownModel`] when the model is unknown and the policy refuses it.
    pub fn multiplier_for(&self, model: &ModelName) -> Result<Multiplier, ConsumptionError> {
        match (self.0.model_multipliers.get(model), self.0.unknown_model) {
            (Some(m), _) => Ok(*m),
            (None, UnknownModelPolicy::UseDefault) => Ok(self.0.default_multiplier),
            (None, UnknownModelPolicy::Refuse) => {
                Err(ConsumptionError::UnknownModel(model.as_str().to_owned()))
            }
        }
    }

    /// What `usage` costs.
    ///
    /// # Errors
    /// Unknown feature or (refused) model; a cost beyond the largest amount.
    pub fn cost(&self, usage: &Usage) -> Result<Credits, ConsumptionError> {
        match usage {
            Usage::Feature { feature, model } => {
                let base = self.fixed_cost(feature.as_str())?;
                let multiplier = model
                    .as_ref()
                    .map_or(Ok(Multiplier::ONE), |m| self.multiplier_for(m))?;
                scale(u128::from(base.hundredths().unsigned_abs()), multiplier, 1)
            }
            Usage::Tokens { model, usage } => self.cost(&Usage::Chat {
                model: model.clone(),
                tokens: usage.total(),
            }),
            Usage::Chat { model, tokens } => {
                let multiplier = self.multiplier_for(model)?;
                match self.0.mode {
                    ConsumptionMode::Fixed => {
                        let base = self.fixed_cost(CHAT_FEATURE)?;
                        scale(u128::from(base.hundredths().unsigned_abs()), multiplier, 1)
                    }
                    ConsumptionMode::Dynamic => {
                        let per_kilo =
                            u128::from(self.0.cost_per_kilo_token.hundredths().unsigned_abs());
                        scale(per_kilo * u128::from(tokens.get()), multiplier, 1_000)
                    }
                }
            }
        }
    }

    fn fixed_cost(&self, feature: &str) -> Result<Credits, ConsumptionError> {
        self.0
            .fixed_costs
            .iter()
            .find(|(f, _)| f.as_str() == feature)
            .map(|(_, c)| *c)
            .ok_or_else(|| ConsumptionError::UnknownFeature(feature.to_owned()))
    }
}

/// `ceil(hundredths × multiplier / divisor)` in hundredths, checked into [`Credits`].
fn scale(
    hundredths: u128,
    multiplier: Multiplier,
    divisor: u128,
) -> Result<Credits, ConsumptionError> {
    let numerator = hundredths * u128::from(multiplier.ten_thousandths());
    let denominator = divisor * 10_000;
    let cost = numerator.div_ceil(denominator);
    let cost = i64::try_from(cost).map_err(|_| ConsumptionError::TooLarge)?;
    Credits::from_hundredths(cost).map_err(|_| ConsumptionError::TooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(mode: ConsumptionMode, unknown_model: UnknownModelPolicy) -> ConsumptionRules {
        let mut fixed_costs = BTreeMap::new();
        fixed_costs.insert(
            FeatureName::new("chat").unwrap(),
            Credits::from_whole(1).unwrap(),
        );
        fixed_costs.insert(
            FeatureName::new("image").unwrap(),
            Credits::from_whole(5).unwrap(),
        );
        let mut model_multipliers = BTreeMap::new();
        model_multipliers.insert(
            ModelName::new("gpt-4o").unwrap(),
            Multiplier::from_decimal("2".parse().unwrap()).unwrap(),
        );
        model_multipliers.insert(
            ModelName::new("mini").unwrap(),
            Multiplier::from_decimal("0.25".parse().unwrap()).unwrap(),
        );
        ConsumptionRules::new(ConsumptionSettings {
            mode,
            fixed_costs,
            cost_per_kilo_token: Credits::from_decimal("0.5".parse().unwrap()).unwrap(),
            model_multipliers,
            default_multiplier: Multiplier::ONE,
            unknown_model,
        })
        .unwrap()
    }

    fn chat(model: &str, tokens: i64) -> Usage {
        Usage::Chat {
            model: ModelName::new(model).unwrap(),
            tokens: TokenCount::new(tokens).unwrap(),
        }
    }

    #[test]
    fn dynamic_cost_is_tokens_per_thousand_times_rate_times_multiplier_rounded_up() {
        let r = rules(ConsumptionMode::Dynamic, UnknownModelPolicy::UseDefault);
        // 1500 tokens × 0.5 / 1000 × 2 = 1.50
        assert_eq!(r.cost(&chat("gpt-4o", 1500)).unwrap().hundredths(), 150);
        // 1 token × 0.5 / 1000 × 0.25 = 0.000125, rounded up to 0.01
        assert_eq!(r.cost(&chat("mini", 1)).unwrap().hundredths(), 1);
        assert_eq!(r.cost(&chat("unknown", 1000)).unwrap().hundredths(), 50);
    }

    #[test]
    fn fixed_mode_charges_the_chat_cost_times_the_multiplier() {
        let r = rules(ConsumptionMode::Fixed, UnknownModelPolicy::UseDefault);
        assert_eq!(r.cost(&chat("gpt-4o", 99_999)).unwrap().hundredths(), 200);
        let image = Usage::Feature {
            feature: FeatureName::new("image").unwrap(),
            model: None,
        };
        assert_eq!(r.cost(&image).unwrap().hundredths(), 500);
        let video = Usage::Feature {
            feature: FeatureName::new("video").unwrap(),
            model: None,
        };
        assert_eq!(
            r.cost(&video),
            Err(ConsumptionError::UnknownFeature("video".into()))
        );
    }

    #[test]
    fn a_model_in_the_price_book_is_priced_by_its_entry_in_force() {
        use crate::pricing::{EntryPrices, PerKind, PriceBook, PriceEntry, TokenUsage};
        let entry = PriceEntry::new(
            ModelName::new("gpt-4o").unwrap(),
            Timestamp::from_unix_millis(1_000),
            EntryPrices::Given {
                credits: PerKind::new(1_000, [Some(4_000), None, None, None]),
                cost: None,
            },
            None,
        )
        .unwrap();
        let r = rules(ConsumptionMode::Dynamic, UnknownModelPolicy::UseDefault)
            .with_price_book(PriceBook::new([entry]).unwrap());
        let by_kind = Usage::Tokens {
            model: ModelName::new("gpt-4o").unwrap(),
            usage: TokenUsage::new([1_000_000, 500_000, 0, 0, 0]).unwrap(),
        };
        let at = Timestamp::from_unix_millis;
        // 10 credits per million input, 40 per million output: 10 + 20.
        let priced = r.price(&by_kind, at(1_000)).unwrap();
        assert_eq!(priced.cost.hundredths(), 3_000);
        assert_eq!(priced.entry.unwrap().effective_from, at(1_000));
        // Before the entry: the per-kilotoken rule on the total, 1.5M × 0.5 / 1000 × 2.
        let before = r.price(&by_kind, at(999)).unwrap();
        assert_eq!((before.cost.hundredths(), before.entry), (150_000, None));
        assert_eq!(r.cost(&by_kind).unwrap().hundredths(), 150_000);
        // Tokens without kinds on a priced model count as input.
        let plain = r.price(&chat("gpt-4o", 1_000_000), at(2_000)).unwrap();
        assert_eq!(plain.cost.hundredths(), 1_000);
        // Another model: the rules.
        let other = r.price(&chat("mini", 1_000), at(2_000)).unwrap();
        assert_eq!((other.cost.hundredths(), other.entry), (13, None));
    }

    #[test]
    fn unknown_models_are_refused_when_the_setting_says_so() {
        let r = rules(ConsumptionMode::Dynamic, UnknownModelPolicy::Refuse);
        assert_eq!(
            r.cost(&chat("unknown", 1000)),
            Err(ConsumptionError::UnknownModel("unknown".into()))
        );
    }

    #[test]
    fn negative_and_absurd_inputs_are_errors() {
        assert_eq!(TokenCount::new(0), Err(ConsumptionError::InvalidTokens));
        assert_eq!(TokenCount::new(-5), Err(ConsumptionError::InvalidTokens));
        assert_eq!(
            TokenCount::new(i64::try_from(MAX_TOKENS).unwrap() + 1),
            Err(ConsumptionError::InvalidTokens)
        );
        assert_eq!(
            Multiplier::from_decimal("0".parse().unwrap()),
            Err(ConsumptionError::InvalidMultiplier)
        );
        assert_eq!(
            Multiplier::from_decimal("-1".parse().unwrap()),
            Err(ConsumptionError::InvalidMultiplier)
        );
        assert_eq!(
            Multiplier::from_decimal("1000.0001".parse().unwrap()),
            Err(ConsumptionError::InvalidMultiplier)
        );
        assert_eq!(
            Multiplier::from_decimal("1.00001".parse().unwrap()),
            Err(ConsumptionError::InvalidMultiplier)
        );
        assert!(ModelName::new("").is_err());
        assert!(ModelName::new("a b").is_err());
    }

    proptest! {
        #[test]
        fn cost_never_decreases_as_tokens_or_multiplier_grow_and_never_overflows(
            t1 in 1_i64..=100_000_000, t2 in 1_i64..=100_000_000,
            m1 in 1_u64..=MAX_MULTIPLIER_TEN_THOUSANDTHS, m2 in 1_u64..=MAX_MULTIPLIER_TEN_THOUSANDTHS,
            per_kilo in 1_i64..=100_000_000,
        ) {
            let (tlo, thi) = (t1.min(t2), t1.max(t2));
            let (mlo, mhi) = (m1.min(m2), m1.max(m2));
            let cost = |tokens: i64, m: u64| {
                let mut model_multipliers = BTreeMap::new();
                model_multipliers.insert(ModelName::new("m").unwrap(), Multiplier::from_ten_thousandths(m).unwrap());
                let r = ConsumptionRules::new(ConsumptionSettings {
                    mode: ConsumptionMode::Dynamic,
                    fixed_costs: BTreeMap::new(),
                    cost_per_kilo_token: Credits::from_hundredths(per_kilo).unwrap(),
                    model_multipliers,
                    default_multiplier: Multiplier::ONE,
                    unknown_model: UnknownModelPolicy::Refuse,
                }).unwrap();
                r.cost(&chat("m", tokens))
            };
            let low = cost(tlo, mlo);
            let high = cost(thi, mhi);
            if let (Ok(low), Ok(high)) = (&low, &high) {
                prop_assert!(low <= high);
                prop_assert!(low.hundredths() >= 1);
            }
            if low.is_err() {
                prop_assert_eq!(high, Err(ConsumptionError::TooLarge));
            }
        }
    }
}
