//! Prices, credit amounts and dates as a reader of each language expects them.
//!
//! Prices use the currency's symbol as CLDR gives it for the language (`$9.99` but `US$9.99` in
//! zh-CN, `¥68.00` in zh-CN but `CN¥68.00` in English), the currency's own decimal places and
//! thousands separators. Dates are UTC.

use chrono::{DateTime, Datelike, Timelike, Utc};
use domain::{CreditDelta, Credits, Currency, Money, Timestamp};

use crate::i18n::Lang;

/// The symbol written before an amount of `currency` for a reader of `lang`.
fn symbol(currency: Currency, lang: Lang) -> &'static str {
    match (currency, lang) {
        (Currency::Usd, Lang::En) => "$",
        (Currency::Usd, Lang::ZhCn) => "US$",
        (Currency::Cny, Lang::En) => "CN¥",
        (Currency::Cny, Lang::ZhCn) => "¥",
        (Currency::Jpy, Lang::En) => "¥",
        (Currency::Jpy, Lang::ZhCn) => "JP¥",
        (Currency::Eur, _) => "€",
        (Currency::Gbp, _) => "£",
        (Currency::Hkd, _) => "HK$",
        (Currency::Sgd, _) => "S$",
        (Currency::Aud, Lang::En) => "A$",
        (Currency::Aud, Lang::ZhCn) => "AU$",
        (Currency::Cad, _) => "CA$",
        (Currency::Krw, _) => "₩",
    }
}

/// `1234567` as `1,234,567`.
fn group_thousands(whole: u64) -> String {
    let digits = whole.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A price: `$9.99`, `€1,299.00`, `¥1,500` (JPY has no minor unit).
pub(crate) fn money(amount: Money, lang: Lang) -> String {
    let currency = amount.currency();
    let minor = amount.amount_minor().unsigned_abs();
    let sign = if amount.amount_minor() < 0 { "-" } else { "" };
    let exponent = currency.exponent();
    let scale = 10_u64.pow(exponent);
    let whole = group_thousands(minor / scale);
    let symbol = symbol(currency, lang);
    if exponent == 0 {
        format!("{sign}{symbol}{whole}")
    } else {
        let fraction = minor % scale;
        let width = exponent as usize;
        format!("{sign}{symbol}{whole}.{fraction:0width$}")
    }
}

/// A credit amount: `1,000`, or `12.50` when it has a fraction.
pub(crate) fn credits(amount: Credits) -> String {
    hundredths(amount.hundredths().unsigned_abs())
}

/// A signed change: `+1,000`, `−12.50`.
pub(crate) fn credit_delta(delta: CreditDelta) -> String {
    let sign = if delta.is_decrease() { "−" } else { "+" };
    format!("{sign}{}", credits(delta.magnitude()))
}

fn hundredths(value: u64) -> String {
    let whole = group_thousands(value / 100);
    match value % 100 {
        0 => whole,
        fraction => format!("{whole}.{fraction:02}"),
    }
}

const MONTHS_EN: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn utc(at: Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(at.unix_millis())
}

/// A day: `Nov 1, 2026` or `2026年11月1日`.
pub(crate) fn date(at: Timestamp, lang: Lang) -> String {
    let Some(t) = utc(at) else {
        return String::from("—");
    };
    match lang {
        Lang::En => {
            let month = MONTHS_EN.get(t.month0() as usize).copied().unwrap_or("?");
            format!("{month} {}, {}", t.day(), t.year())
        }
        Lang::ZhCn => format!("{}年{}月{}日", t.year(), t.month(), t.day()),
    }
}

/// A moment: `Nov 1, 2026, 14:05 UTC` or `2026年11月1日 14:05 UTC`.
pub(crate) fn date_time(at: Timestamp, lang: Lang) -> String {
    let Some(t) = utc(at) else {
        return String::from("—");
    };
    let separator = match lang {
        Lang::En => ", ",
        Lang::ZhCn => " ",
    };
    format!(
        "{}{separator}{:02}:{:02} UTC",
        date(at, lang),
        t.hour(),
        t.minute()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(minor: i64, currency: Currency) -> Money {
        Money::from_minor(minor, currency).unwrap()
    }

    #[test]
    fn prices_follow_currency_and_language() {
        assert_eq!(money(m(999, Currency::Usd), Lang::En), "$9.99");
        assert_eq!(money(m(999, Currency::Usd), Lang::ZhCn), "US$9.99");
        assert_eq!(money(m(6800, Currency::Cny), Lang::ZhCn), "¥68.00");
        assert_eq!(money(m(6800, Currency::Cny), Lang::En), "CN¥68.00");
        assert_eq!(money(m(949, Currency::Eur), Lang::En), "€9.49");
        assert_eq!(money(m(1500, Currency::Jpy), Lang::En), "¥1,500");
        assert_eq!(money(m(1500, Currency::Jpy), Lang::ZhCn), "JP¥1,500");
        assert_eq!(
            money(m(123_456_705, Currency::Gbp), Lang::En),
            "£1,234,567.05"
        );
        assert_eq!(money(m(1, Currency::Cny), Lang::ZhCn), "¥0.01");
    }

    #[test]
    fn credits_drop_an_empty_fraction() {
        assert_eq!(credits(Credits::from_whole(1000).unwrap()), "1,000");
        assert_eq!(credits(Credits::from_hundredths(1250).unwrap()), "12.50");
        let spent = CreditDelta::from_hundredths(-250).unwrap();
        assert_eq!(credit_delta(spent), "−2.50");
    }

    #[test]
    fn dates_are_written_per_language() {
        let at = Timestamp::from_unix_millis(1_793_541_900_000);
        assert_eq!(date(at, Lang::En), "Nov 1, 2026");
        assert_eq!(date(at, Lang::ZhCn), "2026年11月1日");
        assert_eq!(date_time(at, Lang::En), "Nov 1, 2026, 14:05 UTC");
    }
}
