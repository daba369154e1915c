//! Currencies and money as integer minor units.
//!
//! A configured price such as `9.99` becomes `999` minor units of its currency once, at the edge,
//! through [`Money::from_decimal`]; nothing downstream ever sees a fraction or a float.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

/// An ISO 4217 currency that Tally can price in, with its minor-unit exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Currency {
    /// Chinese yuan renminbi (2 decimals).
    Cny,
    /// US dollar (2 decimals).
    Usd,
    /// Euro (2 decimals).
    Eur,
    /// Pound sterling (2 decimals).
    Gbp,
    /// Japanese yen (0 decimals).
    Jpy,
    /// Hong Kong dollar (2 decimals).
    Hkd,
    /// Singapore dollar (2 decimals).
    Sgd,
    /// Australian dollar (2 decimals).
    Aud,
    /// Canadian dollar (2 decimals).
    Cad,
    /// Korean won (0 decimals).
    Krw,
}

impl Currency {
    /// Every supported currency.
    pub const ALL: [Currency; 10] = [
        Currency::Cny,
        Currency::Usd,
        Currency::Eur,
        Currency::Gbp,
        Currency::Jpy,
        Currency::Hkd,
        Currency::Sgd,
        Currency::Aud,
        Currency::Cad,
        Currency::Krw,
    ];

    /// The ISO 4217 alphabetic code, upper case.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Currency::Cny => "CNY",
            Currency::Usd => "USD",
            Currency::Eur => "EUR",
            Currency::Gbp => "GBP",
            Currency::Jpy => "JPY",
            Currency::Hkd => "HKD",
            Currency::Sgd => "SGD",
            Currency::Aud => "AUD",
            Currency::Cad => "CAD",
            Currency::Krw => "KRW",
        }
    }

    /// How many decimal digits the currency's minor unit has (ISO 4217 exponent).
    #[must_use]
    pub const fn exponent(self) -> u32 {
        match self {
            Currency::Jpy | Currency::Krw => 0,
            _ => 2,
        }
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl FromStr for Currency {
    type Err = MoneyError;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        Currency::ALL
            .into_iter()
            .find(|c| c.code() == code)
            .ok_or_else(|| MoneyError::UnknownCurrency(code.chars().take(16).collect()))
    }
}

/// Why an amount of money was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// The code is not an ISO 4217 currency Tally supports.
    #[error("unknown currency code {0:?}")]
    UnknownCurrency(String),
    /// The amount is below zero.
    #[error("amount must not be negative")]
    Negative,
    /// The amount has more fraction digits than the currency's minor unit.
    #[error("{currency} has {exponent} decimal places, the amount has more")]
    TooPrecise {
        /// The currency of the amount.
        currency: Currency,
        /// The currency's number of decimal places.
        exponent: u32,
    },
    /// The amount does not fit in 64-bit minor units.
    #[error("amount is too large")]
    TooLarge,
    /// Two amounts in different currencies were combined.
    #[error("currencies differ: {0} and {1}")]
    CurrencyMismatch(Currency, Currency),
}

/// A non-negative amount of money in integer minor units of one currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Money {
    amount_minor: i64,
    currency: Currency,
}

impl Money {
    /// Nothing, in `currency`.
    #[must_use]
    pub const fn zero(currency: Currency) -> Self {
        Self {
            amount_minor: 0,
            currency,
        }
    }

    /// Money from integer minor units (cents, fen, yen).
    ///
    /// # Errors
    /// [`MoneyError::Negative`] when `amount_minor` is below zero.
    pub fn from_minor(amount_minor: i64, currency: Currency) -> Result<Self, MoneyError> {
        if amount_minor < 0 {
            return Err(MoneyError::Negative);
        }
        Ok(Self {
            amount_minor,
            currency,
        })
    }

    /// Money from a decimal amount in major units, such as a configured `9.99`.
    ///
    /// # Errors
    /// Negative amounts, amounts with more fraction digits than the currency has, and amounts
    /// that do not fit in `i64` minor units.
    pub fn from_decimal(amount: Decimal, currency: Currency) -> Result<Self, MoneyError> {
        if amount.is_sign_negative() && !amount.is_zero() {
            return Err(MoneyError::Negative);
        }
        let exponent = currency.exponent();
        let normalized = amount.normalize();
        if normalized.scale() > exponent {
            return Err(MoneyError::TooPrecise { currency, exponent });
        }
        let scaled = normalized
            .checked_mul(Decimal::from(10_i64.pow(exponent)))
            .ok_or(MoneyError::TooLarge)?;
        // `scaled` has no fraction left: the scale check above guarantees it.
        let amount_minor = scaled.to_i64().ok_or(MoneyError::TooLarge)?;
        Ok(Self {
            amount_minor,
            currency,
        })
    }

    /// The amount in integer minor units.
    #[must_use]
    pub const fn amount_minor(&self) -> i64 {
        self.amount_minor
    }

    /// The currency.
    #[must_use]
    pub const fn currency(&self) -> Currency {
        self.currency
    }

    /// The amount in major units, exact.
    #[must_use]
    pub fn to_decimal(&self) -> Decimal {
        Decimal::new(self.amount_minor, self.currency.exponent())
    }

    /// Whether the amount is zero.
    #[must_use]
    pub const fn is_zero(&self) -> bool {
        self.amount_minor == 0
    }

    /// The sum of two amounts of the same currency.
    ///
    /// # Errors
    /// Different currencies, or a sum that overflows.
    pub fn checked_add(&self, other: &Money) -> Result<Money, MoneyError> {
        self.same_currency(other)?;
        let amount_minor = self
            .amount_minor
            .checked_add(other.amount_minor)
            .ok_or(MoneyError::TooLarge)?;
        Ok(Money {
            amount_minor,
            currency: self.currency,
        })
    }

    fn same_currency(&self, other: &Money) -> Result<(), MoneyError> {
        if self.currency == other.currency {
            Ok(())
        } else {
            Err(MoneyError::CurrencyMismatch(self.currency, other.currency))
        }
    }
}

impl fmt::Display for Money {
    /// `9.99 USD`, `100 JPY`: the exact amount with the currency's decimal places.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let decimal = self.to_decimal();
        write!(
            f,
            "{decimal:.prec$} {}",
            self.currency,
            prec = self.currency.exponent() as usize
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn parses_major_units_into_minor_units() {
        assert_eq!(
            Money::from_decimal(dec("9.99"), Currency::Usd)
                .unwrap()
                .amount_minor(),
            999
        );
        assert_eq!(
            Money::from_decimal(dec("0.01"), Currency::Cny)
                .unwrap()
                .amount_minor(),
            1
        );
        assert_eq!(
            Money::from_decimal(dec("1500"), Currency::Jpy)
                .unwrap()
                .amount_minor(),
            1500
        );
        assert_eq!(
            Money::from_decimal(dec("12.50"), Currency::Eur)
                .unwrap()
                .amount_minor(),
            1250
        );
        assert_eq!(
            Money::from_decimal(dec("100.000"), Currency::Jpy)
                .unwrap()
                .amount_minor(),
            100
        );
    }

    #[test]
    fn refuses_negative_too_precise_and_too_large_amounts() {
        assert_eq!(
            Money::from_decimal(dec("-1"), Currency::Usd),
            Err(MoneyError::Negative)
        );
        assert!(matches!(
            Money::from_decimal(dec("1.001"), Currency::Usd),
            Err(MoneyError::TooPrecise { exponent: 2, .. })
        ));
        assert!(matches!(
            Money::from_decimal(dec("1.5"), Currency::Jpy),
            Err(MoneyError::TooPrecise { exponent: 0, .. })
        ));
        assert_eq!(
            Money::from_decimal(dec("92233720368547758.08"), Currency::Usd),
            Err(MoneyError::TooLarge)
        );
        assert_eq!(
            Money::from_minor(-1, Currency::Usd),
            Err(MoneyError::Negative)
        );
    }

    #[test]
    fn prints_with_the_currency_decimal_places() {
        assert_eq!(
            Money::from_minor(999, Currency::Usd).unwrap().to_string(),
            "9.99 USD"
        );
        assert_eq!(
            Money::from_minor(1000, Currency::Cny).unwrap().to_string(),
            "10.00 CNY"
        );
        assert_eq!(
            Money::from_minor(1500, Currency::Jpy).unwrap().to_string(),
            "1500 JPY"
        );
    }

    #[test]
    fn currency_codes_round_trip_and_unknown_codes_are_refused() {
        for c in Currency::ALL {
            assert_eq!(c.code().parse::<Currency>(), Ok(c));
        }
        assert!("usd".parse::<Currency>().is_err());
        assert!("XXX".parse::<Currency>().is_err());
    }

    #[test]
    fn adding_different_currencies_is_an_error() {
        let usd = Money::from_minor(1, Currency::Usd).unwrap();
        let eur = Money::from_minor(1, Currency::Eur).unwrap();
        assert_eq!(
            usd.checked_add(&eur),
            Err(MoneyError::CurrencyMismatch(Currency::Usd, Currency::Eur))
        );
        let max = Money::from_minor(i64::MAX, Currency::Usd).unwrap();
        assert_eq!(max.checked_add(&usd), Err(MoneyError::TooLarge));
    }

    proptest! {
        #[test]
        fn money_parses_and_prints_back_to_the_same_value(minor in 0_i64..=i64::MAX, idx in 0_usize..Currency::ALL.len()) {
            let currency = Currency::ALL[idx];
            let money = Money::from_minor(minor, currency).unwrap();
            let printed = money.to_string();
            let (amount, code) = printed.split_once(' ').unwrap();
            let reparsed = Money::from_decimal(amount.parse().unwrap(), code.parse().unwrap()).unwrap();
            prop_assert_eq!(reparsed, money);
            prop_assert_eq!(Money::from_decimal(money.to_decimal(), currency).unwrap(), money);
        }
    }
}
