//! Credits: exact fixed-point amounts with two fraction digits, stored as integer hundredths.
//!
//! This is the spec's "safe-number helper": every operation is checked, so credit arithmetic can
//! never produce NaN, Infinity, a silent wrap or a negative balance.

use std::fmt;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

/// Hundredths in one whole credit.
pub const HUNDREDTHS_PER_CREDIT: i64 = 100;

/// The largest amount of credits Tally represents: one trillion credits, far beyond any real
/// balance, and small enough that every sum of two amounts fits in `i64` hundredths.
pub const MAX_CREDITS_HUNDREDTHS: i64 = 1_000_000_000_000 * HUNDREDTHS_PER_CREDIT;

/// Why a credits amount or operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreditsError {
    /// The amount is below zero where only non-negative amounts are allowed.
    #[error("credits must not be negative")]
    Negative,
    /// The amount has more than two fraction digits.
    #[error("credits have at most two decimal places")]
    TooPrecise,
    /// The amount exceeds the largest representable amount.
    #[error("credits amount is too large")]
    TooLarge,
    /// A subtraction would take the amount below zero.
    #[error("insufficient credits: requested {requested}, available {available}")]
    Insufficient {
        /// What the operation needed.
        requested: Credits,
        /// What there was.
        available: Credits,
    },
}

/// A non-negative amount of credits, in hundredths of a credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Credits(i64);

impl Credits {
    /// No credits.
    pub const ZERO: Credits = Credits(0);

    /// The largest amount the ledger holds ([`MAX_CREDITS_HUNDREDTHS`]).
    pub const MAX: Credits = Credits(MAX_CREDITS_HUNDREDTHS);

    /// The smallest amount above zero: one hundredth of a credit.
    pub const SMALLEST: Credits = Credits(1);

    /// Credits from integer hundredths.
    ///
    /// # Errors
    /// Negative amounts and amounts above [`MAX_CREDITS_HUNDREDTHS`].
    pub fn from_hundredths(hundredths: i64) -> Result<Self, CreditsError> {
        if hundredths < 0 {
            return Err(CreditsError::Negative);
        }
        if hundredths > MAX_CREDITS_HUNDREDTHS {
            return Err(CreditsError::TooLarge);
        }
        Ok(Self(hundredths))
    }

    /// Whole credits.
    ///
    /// # Errors
    /// As [`Credits::from_hundredths`].
    pub fn from_whole(credits: i64) -> Result<Self, CreditsError> {
        let hundredths = credits
            .checked_mul(HUNDREDTHS_PER_CREDIT)
            .ok_or(CreditsError::TooLarge)?;
        Self::from_hundredths(hundredths)
    }

    /// A positive amount written as text (`"100"`, `"12.5"`): `None` for anything else (not a
    /// number, zero or less, more than two fraction digits, too large).
    #[must_use]
    pub fn parse_positive(text: &str) -> Option<Self> {
        text.trim()
            .parse::<Decimal>()
            .ok()
            .and_then(|d| Self::from_decimal(d).ok())
            .filter(|c| !c.is_zero())
    }

    /// Credits from a decimal such as a configured `2.5`.
    ///
    /// # Errors
    /// Negative, more than two fraction digits, or too large.
    pub fn from_decimal(amount: Decimal) -> Result<Self, CreditsError> {
        if amount.is_sign_negative() && !amount.is_zero() {
            return Err(CreditsError::Negative);
        }
        let normalized = amount.normalize();
        if normalized.scale() > 2 {
            return Err(CreditsError::TooPrecise);
        }
        let hundredths = normalized
            .checked_mul(Decimal::from(HUNDREDTHS_PER_CREDIT))
            .and_then(|d| d.to_i64())
            .ok_or(CreditsError::TooLarge)?;
        Self::from_hundredths(hundredths)
    }

    /// The amount in hundredths of a credit.
    #[must_use]
    pub const fn hundredths(self) -> i64 {
        self.0
    }

    /// The exact amount as a decimal with two fraction digits.
    #[must_use]
    pub fn to_decimal(self) -> Decimal {
        Decimal::new(self.0, 2)
    }

    /// Whether this is zero credits.
    #[must_use]
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// The sum of two amounts.
    ///
    /// # Errors
    /// [`CreditsError::TooLarge`] when the sum exceeds the largest amount.
    pub fn checked_add(self, other: Credits) -> Result<Credits, CreditsError> {
        Self::from_hundredths(self.0 + other.0)
    }

    /// This amount less `other`.
    ///
    /// # Errors
    /// [`CreditsError::Insufficient`] when `other` is larger than this amount.
    pub fn checked_sub(self, other: Credits) -> Result<Credits, CreditsError> {
        if other.0 > self.0 {
            return Err(CreditsError::Insufficient {
                requested: other,
                available: self,
            });
        }
        Ok(Credits(self.0 - other.0))
    }

    /// The smaller of two amounts.
    #[must_use]
    pub fn min(self, other: Credits) -> Credits {
        Credits(self.0.min(other.0))
    }

    /// This amount as an increase of a balance.
    #[must_use]
    pub const fn as_increase(self) -> CreditDelta {
        CreditDelta(self.0)
    }

    /// This amount as a decrease of a balance.
    #[must_use]
    pub const fn as_decrease(self) -> CreditDelta {
        CreditDelta(-self.0)
    }

    /// Apply a signed change to this balance.
    ///
    /// # Errors
    /// [`CreditsError::Insufficient`] when the result would be negative, or
    /// [`CreditsError::TooLarge`] when it would exceed the largest amount.
    pub fn apply(self, delta: CreditDelta) -> Result<Credits, CreditsError> {
        if delta.0 >= 0 {
            self.checked_add(Credits(delta.0))
        } else {
            self.checked_sub(Credits(-delta.0))
        }
    }
}

impl fmt::Display for Credits {
    /// Two fraction digits: `12.50`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:02}",
            self.0 / HUNDREDTHS_PER_CREDIT,
            self.0 % HUNDREDTHS_PER_CREDIT
        )
    }
}

/// A signed change of a credit balance, in hundredths: positive adds, negative removes.
///
/// Its magnitude is always a valid [`Credits`] amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CreditDelta(i64);

impl CreditDelta {
    /// A change from signed hundredths.
    ///
    /// # Errors
    /// [`CreditsError::TooLarge`] when the magnitude exceeds the largest amount.
    pub fn from_hundredths(hundredths: i64) -> Result<Self, CreditsError> {
        if hundredths
            .checked_abs()
            .is_none_or(|m| m > MAX_CREDITS_HUNDREDTHS)
        {
            return Err(CreditsError::TooLarge);
        }
        Ok(Self(hundredths))
    }

    /// The change in signed hundredths.
    #[must_use]
    pub const fn hundredths(self) -> i64 {
        self.0
    }

    /// The size of the change, without its sign.
    #[must_use]
    pub const fn magnitude(self) -> Credits {
        Credits(self.0.abs())
    }

    /// Whether the change removes credits.
    #[must_use]
    pub const fn is_decrease(self) -> bool {
        self.0 < 0
    }
}

impl fmt::Display for CreditDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "+" };
        write!(f, "{sign}{}", self.magnitude())
    }
}

/// A sum of many credit amounts (a report's day, a feature's share), in hundredths: wide enough
/// (`i128`) that no sum of amounts a ledger can hold overflows it, and never negative. Unlike
/// [`Credits`] it is not bounded by the largest balance: a day may grant more than any one
/// balance holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CreditsTotal(i128);

impl CreditsTotal {
    /// Nothing.
    pub const ZERO: CreditsTotal = CreditsTotal(0);

    /// A total from hundredths; a negative sum (more returned than held, say) counts as zero.
    #[must_use]
    pub fn from_hundredths(hundredths: i128) -> Self {
        Self(hundredths.max(0))
    }

    /// The total in hundredths.
    #[must_use]
    pub const fn hundredths(self) -> i128 {
        self.0
    }

    /// The total in `i64` hundredths, [`i64::MAX`] when it is larger (for a chart's scale).
    #[must_use]
    pub fn saturating_hundredths(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// The sum of two totals, [`i128::MAX`] hundredths at most.
    #[must_use]
    pub const fn saturating_add(self, other: CreditsTotal) -> CreditsTotal {
        CreditsTotal(self.0.saturating_add(other.0))
    }
}

impl From<Credits> for CreditsTotal {
    fn from(amount: Credits) -> Self {
        Self(i128::from(amount.0))
    }
}

impl fmt::Display for CreditsTotal {
    /// Two fraction digits: `12.50`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = i128::from(HUNDREDTHS_PER_CREDIT);
        write!(f, "{}.{:02}", self.0 / per, self.0 % per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_total_holds_sums_beyond_the_largest_balance_and_saturates_for_display() {
        let most = Credits::from_hundredths(MAX_CREDITS_HUNDREDTHS).unwrap();
        let twice = CreditsTotal::from(most).saturating_add(CreditsTotal::from(most));
        assert_eq!(twice.hundredths(), 2 * i128::from(MAX_CREDITS_HUNDREDTHS));
        assert_eq!(twice.to_string(), "2000000000000.00");
        let huge = CreditsTotal::from_hundredths(i128::from(i64::MAX) * 3);
        assert_eq!(huge.saturating_hundredths(), i64::MAX);
        assert_eq!(CreditsTotal::from_hundredths(-5), CreditsTotal::ZERO);
        assert_eq!(
            CreditsTotal::from_hundredths(i128::MAX).saturating_add(twice),
            CreditsTotal::from_hundredths(i128::MAX)
        );
    }

    #[test]
    fn parses_two_fraction_digits_exactly() {
        assert_eq!(
            Credits::from_decimal("2.5".parse().unwrap())
                .unwrap()
                .hundredths(),
            250
        );
        assert_eq!(
            Credits::from_decimal("0.01".parse().unwrap())
                .unwrap()
                .hundredths(),
            1
        );
        assert_eq!(
            Credits::from_decimal("1.001".parse().unwrap()),
            Err(CreditsError::TooPrecise)
        );
        assert_eq!(
            Credits::from_decimal("-1".parse().unwrap()),
            Err(CreditsError::Negative)
        );
        assert_eq!(
            Credits::from_decimal("1000000000000.01".parse().unwrap()),
            Err(CreditsError::TooLarge)
        );
    }

    #[test]
    fn subtraction_below_zero_is_insufficient_not_a_wrap() {
        let five = Credits::from_whole(5).unwrap();
        let six = Credits::from_whole(6).unwrap();
        assert_eq!(
            five.checked_sub(six),
            Err(CreditsError::Insufficient {
                requested: six,
                available: five
            })
        );
        assert_eq!(
            five.apply(six.as_decrease()).unwrap_err(),
            CreditsError::Insufficient {
                requested: six,
                available: five
            }
        );
    }

    #[test]
    fn addition_past_the_maximum_is_an_error() {
        let max = Credits::from_hundredths(MAX_CREDITS_HUNDREDTHS).unwrap();
        assert_eq!(
            max.checked_add(Credits::from_hundredths(1).unwrap()),
            Err(CreditsError::TooLarge)
        );
        assert_eq!(Credits::from_whole(i64::MAX), Err(CreditsError::TooLarge));
        assert_eq!(
            CreditDelta::from_hundredths(i64::MIN),
            Err(CreditsError::TooLarge)
        );
    }

    #[test]
    fn prints_two_fraction_digits() {
        assert_eq!(Credits::from_hundredths(1250).unwrap().to_string(), "12.50");
        assert_eq!(Credits::from_hundredths(7).unwrap().to_string(), "0.07");
        assert_eq!(
            Credits::from_hundredths(7)
                .unwrap()
                .as_decrease()
                .to_string(),
            "-0.07"
        );
    }

    proptest! {
        #[test]
        fn add_then_subtract_returns_the_start(a in 0..=MAX_CREDITS_HUNDREDTHS, b in 0..=MAX_CREDITS_HUNDREDTHS) {
            let a = Credits::from_hundredths(a).unwrap();
            let b = Credits::from_hundredths(b).unwrap();
            match a.checked_add(b) {
                Ok(sum) => prop_assert_eq!(sum.checked_sub(b).unwrap(), a),
                Err(e) => prop_assert_eq!(e, CreditsError::TooLarge),
            }
        }

        #[test]
        fn decimal_round_trip_is_exact(h in 0..=MAX_CREDITS_HUNDREDTHS) {
            let c = Credits::from_hundredths(h).unwrap();
            prop_assert_eq!(Credits::from_decimal(c.to_decimal()).unwrap(), c);
            prop_assert_eq!(Credits::from_decimal(c.to_string().parse().unwrap()).unwrap(), c);
        }
    }
}
