//! Token pricing by kind: a price book of effective-dated entries per model.
//!
//! Model providers price input, output, cache-read, cache-write and reasoning tokens apart,
//! often ten times apart. An entry gives, per kind, credits per million tokens (a kind left out
//! costs as input), and optionally the provider's own cost per kind (the cost basis, in
//! millionths of the book's cost currency per million tokens). Its credit prices are either
//! given or derived from the cost with a markup and what one credit is worth.
//!
//! A call costs `ceil(Σ tokens(kind) × price(kind) / 1,000,000)` hundredths of a credit: every
//! part is exact (integers in 128 bits), and the sum is rounded up once. Every price is above
//! zero, so a call with at least one token costs at least 0.01 credit, and the cost never
//! falls when any kind's tokens grow.
//!
//! An entry applies to usage from its `effective_from` on: usage is priced by the latest entry
//! in force when it happened ([`PriceBook::entry_at`]).

use std::collections::BTreeMap;

use crate::consumption::{ConsumptionError, MAX_TOKENS, ModelName, TokenCount};
use crate::credits::Credits;
use crate::time::Timestamp;

/// Tokens per pricing unit: prices are per million tokens.
pub const TOKENS_PER_UNIT: u64 = 1_000_000;
/// The largest price per million tokens of one kind, in hundredths of a credit (a million
/// credits per million tokens: one credit a token).
pub const MAX_PRICE_HUNDREDTHS: u64 = 100_000_000;
/// The largest provider cost per million tokens of one kind, in millionths of the cost
/// currency (a million units of it per million tokens).
pub const MAX_COST_MILLIONTHS: u64 = 1_000_000_000_000;
/// The largest markup, in basis points (×100: 10,000%).
pub const MAX_MARKUP_BASIS_POINTS: u64 = 1_000_000;
/// The most entries per model.
pub const MAX_ENTRIES_PER_MODEL: usize = 100;

/// A kind of token, as the AI SDKs report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TokenKind {
    /// Prompt tokens not read from a cache.
    Input,
    /// Completion tokens.
    Output,
    /// Prompt tokens read from the provider's cache.
    CacheRead,
    /// Prompt tokens written to the provider's cache.
    CacheWrite,
    /// Reasoning (thinking) tokens.
    Reasoning,
}

impl TokenKind {
    /// Every kind, in the order of [`TokenUsage`]'s counts.
    pub const ALL: [TokenKind; 5] = [
        TokenKind::Input,
        TokenKind::Output,
        TokenKind::CacheRead,
        TokenKind::CacheWrite,
        TokenKind::Reasoning,
    ];

    /// Its name in configuration and on the API.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            TokenKind::Input => "input",
            TokenKind::Output => "output",
            TokenKind::CacheRead => "cacheRead",
            TokenKind::CacheWrite => "cacheWrite",
            TokenKind::Reasoning => "reasoning",
        }
    }

    /// The kind named `code`.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    /// Its place in [`TokenKind::ALL`] (and in [`TokenUsage::counts`]).
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The tokens of one call by kind: each 0 to [`MAX_TOKENS`], together 1 to [`MAX_TOKENS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenUsage([u64; 5]);

impl TokenUsage {
    /// Tokens by kind, in [`TokenKind::ALL`]'s order.
    ///
    /// # Errors
    /// [`ConsumptionError::InvalidTokens`] for a negative count, or a total of zero or above
    /// [`MAX_TOKENS`].
    pub fn new(counts: [i64; 5]) -> Result<Self, ConsumptionError> {
        let mut out = [0_u64; 5];
        for (slot, count) in out.iter_mut().zip(counts) {
            *slot = u64::try_from(count).map_err(|_| ConsumptionError::InvalidTokens)?;
        }
        let total: u128 = out.iter().map(|c| u128::from(*c)).sum();
        if total == 0 || total > u128::from(MAX_TOKENS) {
            return Err(ConsumptionError::InvalidTokens);
        }
        Ok(Self(out))
    }

    /// The tokens of `kind`.
    #[must_use]
    pub const fn get(&self, kind: TokenKind) -> u64 {
        self.0[kind.index()]
    }

    /// Every kind's tokens together.
    #[must_use]
    pub fn total(&self) -> TokenCount {
        let total: u64 = self.0.iter().sum();
        // `new` keeps the total within 1..=MAX_TOKENS.
        TokenCount::new(i64::try_from(total).unwrap_or(i64::MAX))
            .unwrap_or_else(|_| unreachable!("a usage's total is 1 to MAX_TOKENS"))
    }

    /// Every kind's tokens, in [`TokenKind::ALL`]'s order.
    #[must_use]
    pub const fn counts(&self) -> [u64; 5] {
        self.0
    }
}

/// An amount per million tokens for each kind: `input` always, each other kind optionally (a
/// kind left out is charged as input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerKind {
    input: u64,
    others: [Option<u64>; 4],
}

impl PerKind {
    /// `input`, and the other kinds in [`TokenKind::ALL`]'s order after it.
    #[must_use]
    pub const fn new(input: u64, others: [Option<u64>; 4]) -> Self {
        PerKind { input, others }
    }

    /// The amount for `kind` (input's when it has none of its own).
    #[must_use]
    pub fn of(&self, kind: TokenKind) -> u64 {
        match kind {
            TokenKind::Input => self.input,
            other => self.others[other.index() - 1].unwrap_or(self.input),
        }
    }

    /// The amount set for `kind` itself, if any (`input` always has one).
    #[must_use]
    pub fn own(&self, kind: TokenKind) -> Option<u64> {
        match kind {
            TokenKind::Input => Some(self.input),
            other => self.others[other.index() - 1],
        }
    }

    /// `Σ tokens(kind) × amount(kind)` for `usage`, exactly.
    fn weigh(&self, usage: &TokenUsage) -> u128 {
        TokenKind::ALL
            .iter()
            .map(|k| u128::from(usage.get(*k)) * u128::from(self.of(*k)))
            .sum()
    }

    fn all(&self, within: impl Fn(u64) -> bool) -> bool {
        within(self.input) && self.others.iter().flatten().all(|v| within(*v))
    }
}

/// What one credit is worth in the book's cost currency, in millionths of it (`10_000`: one
/// credit is 0.01 of the currency). Needed to derive credit prices from costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditValue(u64);

impl CreditValue {
    /// # Errors
    /// [`ConsumptionError::NotPositive`] for zero; [`ConsumptionError::TooLarge`] above
    /// [`MAX_COST_MILLIONTHS`].
    pub fn new(millionths: u64) -> Result<Self, ConsumptionError> {
        match millionths {
            0 => Err(ConsumptionError::NotPositive("creditValue".into())),
            m if m > MAX_COST_MILLIONTHS => Err(ConsumptionError::TooLarge),
            m => Ok(Self(m)),
        }
    }

    /// In millionths of the cost currency.
    #[must_use]
    pub const fn millionths(self) -> u64 {
        self.0
    }
}

/// How an entry's credit prices come about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryPrices {
    /// Given, in hundredths of a credit per million tokens, with the provider's cost if known.
    Given {
        /// Credits per million tokens, in hundredths.
        credits: PerKind,
        /// The provider's cost per million tokens, in millionths of the cost currency.
        cost: Option<PerKind>,
    },
    /// Derived: the provider's cost plus `markup_basis_points` (2,000 is +20%), turned into
    /// credits at the book's credit value, each rounded up to 0.01 credit per million tokens.
    Marked {
        /// The provider's cost per million tokens, in millionths of the cost currency.
        cost: PerKind,
        /// The markup in basis points of the cost.
        markup_basis_points: u64,
    },
}

/// One effective-dated entry of a model's prices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceEntry {
    /// The model.
    pub model: ModelName,
    /// Usage from this instant on is priced by this entry (until a later one).
    pub effective_from: Timestamp,
    /// Credits per million tokens of each kind, in hundredths (derived ones included).
    pub credits: PerKind,
    /// The provider's cost per million tokens of each kind, in millionths of the cost
    /// currency, if known.
    pub cost: Option<PerKind>,
    /// The markup the credit prices were derived with, in basis points, if they were.
    pub markup_basis_points: Option<u64>,
}

impl PriceEntry {
    /// An entry for `model` from `effective_from` on.
    ///
    /// # Errors
    /// A price of zero or above [`MAX_PRICE_HUNDREDTHS`], a cost above [`MAX_COST_MILLIONTHS`],
    /// a markup above [`MAX_MARKUP_BASIS_POINTS`], or derived prices without a credit value.
    pub fn new(
        model: ModelName,
        effective_from: Timestamp,
        prices: EntryPrices,
        credit_value: Option<CreditValue>,
    ) -> Result<Self, ConsumptionError> {
        let within_cost = |v: u64| v <= MAX_COST_MILLIONTHS;
        let (credits, cost, markup) = match prices {
            EntryPrices::Given { credits, cost } => (credits, cost, None),
            EntryPrices::Marked {
                cost,
                markup_basis_points,
            } => {
                if markup_basis_points > MAX_MARKUP_BASIS_POINTS {
                    return Err(ConsumptionError::TooLarge);
                }
                let value =
                    credit_value.ok_or(ConsumptionError::NotPositive("creditValue".into()))?;
                let derive = |c: Option<u64>| c.map(|c| marked(c, markup_basis_points, value));
                let credits = PerKind {
                    input: marked(cost.input, markup_basis_points, value),
                    others: cost.others.map(derive),
                };
                (credits, Some(cost), Some(markup_basis_points))
            }
        };
        if !cost.is_none_or(|c| c.all(within_cost)) {
            return Err(ConsumptionError::TooLarge);
        }
        if !credits.all(|v| v > 0) {
            return Err(ConsumptionError::NotPositive(format!(
                "every token price of {model}"
            )));
        }
        if !credits.all(|v| v <= MAX_PRICE_HUNDREDTHS) {
            return Err(ConsumptionError::TooLarge);
        }
        Ok(PriceEntry {
            model,
            effective_from,
            credits,
            cost,
            markup_basis_points: markup,
        })
    }

    /// What `usage` costs by this entry, and its provider cost.
    ///
    /// # Errors
    /// [`ConsumptionError::TooLarge`] when the cost is beyond the largest amount (it cannot be
    /// within the bounds above, but the check is kept).
    pub fn price(&self, usage: &TokenUsage) -> Result<Priced, ConsumptionError> {
        let hundredths = self
            .credits
            .weigh(usage)
            .div_ceil(u128::from(TOKENS_PER_UNIT));
        let hundredths = i64::try_from(hundredths).map_err(|_| ConsumptionError::TooLarge)?;
        let cost = Credits::from_hundredths(hundredths).map_err(|_| ConsumptionError::TooLarge)?;
        let basis = self
            .cost
            .map(|c| c.weigh(usage).div_ceil(u128::from(TOKENS_PER_UNIT)))
            .map(|b| i64::try_from(b).map_err(|_| ConsumptionError::TooLarge))
            .transpose()?;
        Ok(Priced {
            cost,
            entry: Some(PriceRef {
                model: self.model.clone(),
                effective_from: self.effective_from,
            }),
            cost_basis_millionths: basis,
        })
    }
}

/// `cost × (1 + markup) / credit value`, in hundredths of a credit, rounded up.
fn marked(cost_millionths: u64, markup_basis_points: u64, value: CreditValue) -> u64 {
    let numerator = u128::from(cost_millionths) * u128::from(10_000 + markup_basis_points) * 100;
    let denominator = 10_000 * u128::from(value.millionths());
    // Bounded: cost ≤ 10^12, markup factor ≤ 1.01 × 10^6, ×100 → < 2^77; the result is
    // checked against MAX_PRICE_HUNDREDTHS by the caller.
    u64::try_from(numerator.div_ceil(denominator)).unwrap_or(u64::MAX)
}

/// Which entry priced a use: its model and the instant it took effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceRef {
    /// The model.
    pub model: ModelName,
    /// When the entry took effect.
    pub effective_from: Timestamp,
}

/// What a use costs, and how it was priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priced {
    /// The credits it costs.
    pub cost: Credits,
    /// The price-book entry used (`None`: the per-kilotoken or fixed rules).
    pub entry: Option<PriceRef>,
    /// The provider's cost of the use in millionths of the book's cost currency, rounded up,
    /// when the entry records it.
    pub cost_basis_millionths: Option<i64>,
}

impl Priced {
    /// A cost by the per-kilotoken or fixed rules: no entry, no cost basis.
    #[must_use]
    pub const fn by_rules(cost: Credits) -> Self {
        Priced {
            cost,
            entry: None,
            cost_basis_millionths: None,
        }
    }
}

/// Every model's price entries, each model's in the order they take effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceBook {
    models: BTreeMap<ModelName, Vec<PriceEntry>>,
}

impl PriceBook {
    /// A book of `entries`.
    ///
    /// # Errors
    /// [`ConsumptionError::DuplicatePrice`] for two entries of one model taking effect at the
    /// same instant; [`ConsumptionError::TooLarge`] past [`MAX_ENTRIES_PER_MODEL`] for a model.
    pub fn new(entries: impl IntoIterator<Item = PriceEntry>) -> Result<Self, ConsumptionError> {
        let mut models: BTreeMap<ModelName, Vec<PriceEntry>> = BTreeMap::new();
        for entry in entries {
            let of_model = models.entry(entry.model.clone()).or_default();
            if of_model
                .iter()
                .any(|e| e.effective_from == entry.effective_from)
            {
                return Err(ConsumptionError::DuplicatePrice(entry.model.to_string()));
            }
            of_model.push(entry);
            if of_model.len() > MAX_ENTRIES_PER_MODEL {
                return Err(ConsumptionError::TooLarge);
            }
        }
        for of_model in models.values_mut() {
            of_model.sort_by_key(|e| e.effective_from);
        }
        Ok(PriceBook { models })
    }

    /// The entry of `model` in force at `at`: the latest that took effect by then.
    #[must_use]
    pub fn entry_at(&self, model: &ModelName, at: Timestamp) -> Option<&PriceEntry> {
        self.models
            .get(model)?
            .iter()
            .rev()
            .find(|e| e.effective_from <= at)
    }

    /// Whether `model` has any entry (it is a known model, whatever its dates).
    #[must_use]
    pub fn knows(&self, model: &ModelName) -> bool {
        self.models.contains_key(model)
    }

    /// Every entry, by model, each model's in the order they take effect.
    pub fn entries(&self) -> impl Iterator<Item = &PriceEntry> {
        self.models.values().flatten()
    }

    /// Whether the book has no entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn model(name: &str) -> ModelName {
        ModelName::new(name).unwrap()
    }

    fn usage(counts: [i64; 5]) -> TokenUsage {
        TokenUsage::new(counts).unwrap()
    }

    /// 2.50 credits per million input, 10 output, 1.25 cache read; the rest as input.
    fn entry(from: i64) -> PriceEntry {
        PriceEntry::new(
            model("gpt-4o"),
            Timestamp::from_unix_millis(from),
            EntryPrices::Given {
                credits: PerKind::new(250, [Some(1_000), Some(125), None, None]),
                cost: Some(PerKind::new(
                    2_500_000,
                    [Some(10_000_000), None, None, None],
                )),
            },
            None,
        )
        .unwrap()
    }

    #[test]
    fn a_call_costs_the_sum_of_its_kinds_rounded_up_once() {
        let e = entry(0);
        // 100k input × 2.50/M = 0.25; 10k output × 10/M = 0.10; 400k cached × 1.25/M = 0.50;
        // 1 reasoning token as input: 0.0000025. Sum 0.8500025 → 0.86 (rounded once).
        let priced = e.price(&usage([100_000, 10_000, 400_000, 0, 1])).unwrap();
        assert_eq!(priced.cost.hundredths(), 86);
        // Cost basis: 100,001 input-priced × 2.5 + 10k × 10 + 400k cache read as input × 2.5
        // (no cache-read cost of its own), in millionths: 250,002.5 + 100,000 + 1,000,000.
        assert_eq!(priced.cost_basis_millionths, Some(1_350_003));
        assert_eq!(
            priced.entry,
            Some(PriceRef {
                model: model("gpt-4o"),
                effective_from: Timestamp::from_unix_millis(0)
            })
        );
    }

    #[test]
    fn one_token_costs_at_least_a_hundredth() {
        let priced = entry(0).price(&usage([0, 0, 1, 0, 0])).unwrap();
        assert_eq!(priced.cost.hundredths(), 1);
    }

    #[test]
    fn marked_prices_are_cost_plus_markup_at_the_credit_value() {
        // $3 per M input, $15 per M output, +20%, one credit = $0.01:
        // input 3 × 1.2 / 0.01 = 360 credits per M; output 1,800.
        let e = PriceEntry::new(
            model("claude"),
            Timestamp::from_unix_millis(0),
            EntryPrices::Marked {
                cost: PerKind::new(3_000_000, [Some(15_000_000), None, None, None]),
                markup_basis_points: 2_000,
            },
            Some(CreditValue::new(10_000).unwrap()),
        )
        .unwrap();
        assert_eq!(e.credits.of(TokenKind::Input), 36_000);
        assert_eq!(e.credits.of(TokenKind::Output), 180_000);
        assert_eq!(e.credits.of(TokenKind::Reasoning), 36_000);
        assert_eq!(e.markup_basis_points, Some(2_000));
        let without_value = PriceEntry::new(
            model("claude"),
            Timestamp::from_unix_millis(0),
            EntryPrices::Marked {
                cost: PerKind::new(3_000_000, [None; 4]),
                markup_basis_points: 0,
            },
            None,
        );
        assert!(without_value.is_err());
    }

    #[test]
    fn the_entry_in_force_when_the_usage_happened_prices_it() {
        let mut later = entry(1_000);
        later.credits = PerKind::new(500, [None; 4]);
        let book = PriceBook::new([later, entry(0)]).unwrap();
        let m = model("gpt-4o");
        assert!(book.entry_at(&m, Timestamp::from_unix_millis(-1)).is_none());
        let at = |ms| {
            book.entry_at(&m, Timestamp::from_unix_millis(ms))
                .unwrap()
                .effective_from
                .unix_millis()
        };
        assert_eq!((at(0), at(999), at(1_000), at(5_000)), (0, 0, 1_000, 1_000));
        assert!(PriceBook::new([entry(0), entry(0)]).is_err());
    }

    #[test]
    fn usage_out_of_bounds_is_refused() {
        assert!(TokenUsage::new([0; 5]).is_err());
        assert!(TokenUsage::new([-1, 5, 0, 0, 0]).is_err());
        let max = i64::try_from(MAX_TOKENS).unwrap();
        assert!(TokenUsage::new([max, 1, 0, 0, 0]).is_err());
        assert_eq!(
            TokenUsage::new([max, 0, 0, 0, 0]).unwrap().total().get(),
            MAX_TOKENS
        );
        assert!(TokenUsage::new([i64::MAX, i64::MAX, 0, 0, 0]).is_err());
    }

    #[test]
    fn zero_and_absurd_prices_are_refused() {
        let at = Timestamp::from_unix_millis(0);
        let given = |credits| EntryPrices::Given {
            credits,
            cost: None,
        };
        for credits in [
            PerKind::new(0, [None; 4]),
            PerKind::new(1, [Some(0), None, None, None]),
            PerKind::new(MAX_PRICE_HUNDREDTHS + 1, [None; 4]),
        ] {
            assert!(PriceEntry::new(model("m"), at, given(credits), None).is_err());
        }
    }

    fn prices() -> impl Strategy<Value = PerKind> {
        (
            1..=MAX_PRICE_HUNDREDTHS,
            proptest::array::uniform4(proptest::option::of(1..=MAX_PRICE_HUNDREDTHS)),
        )
            .prop_map(|(input, others)| PerKind::new(input, others))
    }

    fn counts() -> impl Strategy<Value = [i64; 5]> {
        proptest::array::uniform5(0_i64..=20_000_000).prop_filter("1 to MAX_TOKENS in all", |c| {
            let total: i64 = c.iter().sum();
            total >= 1 && u64::try_from(total).is_ok_and(|t| t <= MAX_TOKENS)
        })
    }

    proptest! {
        #[test]
        fn pricing_is_the_sum_of_its_parts_rounded_up_once(credits in prices(), c in counts()) {
            let e = PriceEntry::new(
                model("m"),
                Timestamp::from_unix_millis(0),
                EntryPrices::Given { credits, cost: None },
                None,
            ).unwrap();
            let u = usage(c);
            let cost = e.price(&u).unwrap().cost.hundredths();
            // The parts in exact decimals, summed, then rounded up once.
            let exact: rust_decimal::Decimal = TokenKind::ALL
                .iter()
                .map(|k| {
                    rust_decimal::Decimal::from(u.get(*k))
                        * rust_decimal::Decimal::from(credits.of(*k))
                        / rust_decimal::Decimal::from(TOKENS_PER_UNIT)
                })
                .sum();
            prop_assert_eq!(rust_decimal::Decimal::from(cost), exact.ceil());
            prop_assert!(cost >= 1);
        }

        #[test]
        fn pricing_never_falls_when_any_kind_grows(
            credits in prices(),
            c in counts(),
            kind in 0_usize..5,
            more in 1_i64..1_000_000,
        ) {
            let e = PriceEntry::new(
                model("m"),
                Timestamp::from_unix_millis(0),
                EntryPrices::Given { credits, cost: None },
                None,
            ).unwrap();
            let mut grown = c;
            grown[kind] += more;
            let total: i64 = grown.iter().sum();
            prop_assume!(u64::try_from(total).is_ok_and(|t| t <= MAX_TOKENS));
            let before = e.price(&usage(c)).unwrap().cost;
            let after = e.price(&usage(grown)).unwrap().cost;
            prop_assert!(after >= before);
        }
    }
}
