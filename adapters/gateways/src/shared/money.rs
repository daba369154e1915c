//! Money to and from the providers' two amount formats: integer minor units with a currency code
//! (Stripe, Creem, Dodo, WeChat Pay), and decimal strings in major units (PayPal, Alipay, Waffo
//! Pancake: `"9.99"`, JPY `"1000"`), converted exactly through the currency's exponent. Each
//! provider keeps only its own rules on top (which spellings it accepts, its currencies, its
//! bounds).

use std::str::FromStr;

use domain::{Currency, Money};

/// Why decimal digits are not an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecimalError {
    /// Something other than ASCII digits.
    Malformed,
    /// More significant fraction digits than the currency has.
    TooPrecise,
    /// Does not fit in 64-bit minor units.
    TooLarge,
}

/// A currency code, in any case, as [`Currency`].
///
/// # Errors
/// A code Tally does not know, as text.
pub fn currency(code: &str) -> Result<Currency, String> {
    Currency::from_str(&code.to_ascii_uppercase()).map_err(|e| e.to_string())
}

/// Money from an integer amount in minor units and a currency code (any case).
///
/// # Errors
/// A currency Tally does not know, or a negative amount, as text.
pub fn from_minor(amount_minor: i64, currency_code: &str) -> Result<Money, String> {
    Money::from_minor(amount_minor, currency(currency_code)?).map_err(|e| e.to_string())
}

/// `money` as a decimal string in major units with exactly the currency's decimal places:
/// `999 USD` is `"9.99"`, `5 USD` is `"0.05"`, `1000 JPY` is `"1000"`.
#[must_use]
pub fn to_decimal(money: Money) -> String {
    let minor = money.amount_minor();
    let exponent = money.currency().exponent();
    if exponent == 0 {
        return minor.to_string();
    }
    let scale = 10_i64.pow(exponent);
    let width = usize::try_from(exponent).unwrap_or(2);
    format!("{}.{:0width$}", minor / scale, minor % scale)
}

/// The minor units of a decimal amount given as its `whole` and `fraction` digits (either may
/// be empty) in a currency with `exponent` decimal places: `("9", "99")` and `("9", "990")` at
/// exponent 2 are 999. How a provider's text splits into the two, and which spellings it
/// accepts, is the provider's rule.
///
/// # Errors
/// Checked in this order: [`DecimalError::Malformed`] for anything but ASCII digits,
/// [`DecimalError::TooPrecise`] for more significant fraction digits than `exponent`,
/// [`DecimalError::TooLarge`] beyond `i64`.
pub fn decimal_minor(whole: &str, fraction: &str, exponent: u32) -> Result<i64, DecimalError> {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return Err(DecimalError::Malformed);
    }
    let exponent = usize::try_from(exponent).map_err(|_| DecimalError::TooLarge)?;
    if fraction.trim_end_matches('0').len() > exponent {
        return Err(DecimalError::TooPrecise);
    }
    let padded = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(exponent);
    let mut minor: i64 = 0;
    for digit in whole.bytes().chain(padded) {
        minor = minor
            .checked_mul(10)
            .and_then(|m| m.checked_add(i64::from(digit - b'0')))
            .ok_or(DecimalError::TooLarge)?;
    }
    Ok(minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn money(minor: i64, currency: Currency) -> Money {
        Money::from_minor(minor, currency).unwrap()
    }

    #[test]
    fn minor_units_and_codes_in_any_case_become_money_and_unknown_codes_are_refused() {
        assert_eq!(from_minor(999, "usd"), Ok(money(999, Currency::Usd)));
        assert_eq!(from_minor(999, "USD"), Ok(money(999, Currency::Usd)));
        assert!(from_minor(999, "xyz").is_err());
        assert!(from_minor(-1, "usd").is_err());
    }

    #[test]
    fn money_becomes_a_decimal_string_with_the_currency_decimal_places() {
        assert_eq!(to_decimal(money(999, Currency::Usd)), "9.99");
        assert_eq!(to_decimal(money(5, Currency::Usd)), "0.05");
        assert_eq!(to_decimal(money(1000, Currency::Jpy)), "1000");
        assert_eq!(to_decimal(money(0, Currency::Cny)), "0.00");
    }

    #[test]
    fn decimal_digits_become_exact_minor_units() {
        assert_eq!(decimal_minor("9", "99", 2), Ok(999));
        assert_eq!(decimal_minor("9", "990", 2), Ok(999));
        assert_eq!(decimal_minor("", "5", 2), Ok(50));
        assert_eq!(decimal_minor("1000", "", 0), Ok(1000));
        assert_eq!(decimal_minor("9", "-9", 2), Err(DecimalError::Malformed));
        assert_eq!(decimal_minor("9", "999", 2), Err(DecimalError::TooPrecise));
        assert_eq!(
            decimal_minor("99999999999999999999", "", 2),
            Err(DecimalError::TooLarge)
        );
    }

    #[test]
    fn every_amount_round_trips_through_its_decimal_string() {
        for (minor, currency) in [
            (0, Currency::Usd),
            (1, Currency::Usd),
            (123_456, Currency::Jpy),
        ] {
            let text = to_decimal(money(minor, currency));
            let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
            assert_eq!(
                decimal_minor(whole, fraction, currency.exponent()),
                Ok(minor)
            );
        }
    }
}
