//! Prices, credit amounts and dates as a reader of each language expects them.
//!
//! Prices use the currency's symbol as CLDR gives it for the language (`$9.99` but `US$9.99` in
//! zh-CN, `¥68.00` in zh-CN but `CN¥68.00` in English), the currency's own decimal places and
//! thousands separators, and a true minus sign (`−`) when negative. Credits always carry two
//! decimals. Dates and times are sent in UTC inside `<time datetime>`; `app.js` rewrites them
//! into the reader's time zone, and without script the UTC text (saying "UTC") stays.

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};
use domain::{CreditDelta, Credits, Currency, Money, Timestamp};
use maud::{Markup, html};

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

/// `1234567` as `1,234,567` (with `group` as the separator).
fn group_thousands(whole: u64, group: char) -> String {
    let digits = whole.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(group);
        }
        out.push(c);
    }
    out
}

/// The minus sign every negative amount carries (U+2212, not a hyphen).
const MINUS: char = '\u{2212}';

/// A price: `$9.99`, `€1,299.00`, `¥1,500` (JPY has no minor unit: the currency's exponent from
/// the domain decides the decimals). The one format of money on
/// every page.
pub(crate) fn money(amount: Money, lang: Lang) -> String {
    let currency = amount.currency();
    let minor = amount.amount_minor().unsigned_abs();
    // Money is never negative in the domain; the sign is kept so a change there reads right.
    let sign = if amount.amount_minor() < 0 {
        MINUS.to_string()
    } else {
        String::new()
    };
    let symbol = symbol(currency, lang);
    format!("{sign}{symbol}{}", decimal(minor, currency.exponent()))
}

/// A whole count with thousands separators: `1,234,567`.
pub(crate) fn count(n: u64) -> String {
    decimal(n, 0)
}

/// A credit amount, always with two decimals (credits are kept in hundredths): `1,000.00`,
/// `12.50`. The one format of credits on every page, so `5.00` never stands beside `2.50`.
pub(crate) fn credits(amount: Credits) -> String {
    decimal(amount.hundredths().unsigned_abs(), CREDIT_EXPONENT)
}

/// Hundredths of a credit that may exceed any one balance (a report's total): `2,000,000.00`.
pub(crate) fn credit_hundredths(hundredths: u64) -> String {
    decimal(hundredths, CREDIT_EXPONENT)
}

/// A signed change of credits: `+1,000.00`, `−12.50`.
pub(crate) fn credit_delta(delta: CreditDelta) -> String {
    let sign = if delta.is_decrease() { MINUS } else { '+' };
    format!("{sign}{}", credits(delta.magnitude()))
}

/// Credits are counted in hundredths.
const CREDIT_EXPONENT: u32 = 2;

/// `value` minor units with `exponent` decimals, grouped in thousands: `1,234.50`. English and
/// Chinese (CLDR `en`, `zh-Hans`) write numbers alike; only the currency symbol differs.
fn decimal(value: u64, exponent: u32) -> String {
    let (group, point) = (',', '.');
    let scale = 10_u64.pow(exponent);
    let whole = group_thousands(value / scale, group);
    if exponent == 0 {
        return whole;
    }
    let fraction = value % scale;
    let width = exponent as usize;
    format!("{whole}{point}{fraction:0width$}")
}

const MONTHS_EN: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn utc(at: Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(at.unix_millis())
}

/// A day in UTC as text: `Nov 1, 2026` or `2026年11月1日` (for attributes and places where no
/// element fits; pages show [`day`], which the reader's browser puts in the reader's zone).
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

/// A moment in UTC as text (pages show [`moment`]): `Nov 1, 2026, 14:05 UTC` or `2026年11月1日 14:05 UTC`.
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

/// A day as `<time datetime="2026-11-01T14:05:00Z" data-format="date">Nov 1, 2026</time>`:
/// UTC as sent, rewritten by `app.js` into the day in the reader's own time zone.
pub(crate) fn day(at: Timestamp, lang: Lang) -> Markup {
    time_element(at, "date", &date(at, lang))
}

/// A moment as `<time … data-format="datetime">Nov 1, 2026, 14:05 UTC</time>`: UTC (and says
/// so) as sent, rewritten by `app.js` into the reader's time zone, with its name.
pub(crate) fn moment(at: Timestamp, lang: Lang) -> Markup {
    time_element(at, "datetime", &date_time(at, lang))
}

fn time_element(at: Timestamp, kind: &str, text: &str) -> Markup {
    let Some(t) = utc(at) else {
        return html! { (text) };
    };
    let machine = t.to_rfc3339_opts(SecondsFormat::Secs, true);
    html! { time datetime=(machine) data-format=(kind) { (text) } }
}

/// Where a sentence from the catalog takes an element: pass `SLOT` as the placeholder's value
/// to `Visitor::tf`, then [`with_slot`] puts the element there.
pub(crate) const SLOT: &str = "\u{e000}";

/// `sentence` (made with [`SLOT`] as one placeholder's value) with `element` in its place;
/// the text around it escaped as usual.
pub(crate) fn with_slot(sentence: &str, element: &Markup) -> Markup {
    match sentence.split_once(SLOT) {
        Some((before, after)) => html! { (before) (element) (after) },
        None => html! { (sentence) },
    }
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
        assert_eq!(money(m(150_000, Currency::Krw), Lang::En), "₩150,000");
        assert_eq!(
            money(m(123_456_705, Currency::Gbp), Lang::En),
            "£1,234,567.05"
        );
        assert_eq!(money(m(1, Currency::Cny), Lang::ZhCn), "¥0.01");
    }

    #[test]
    fn credits_always_carry_two_decimals_and_a_true_minus() {
        let whole = Credits::from_whole(1000).unwrap();
        assert_eq!(credits(whole), "1,000.00");
        assert_eq!(credits(Credits::from_hundredths(1250).unwrap()), "12.50");
        let spent = CreditDelta::from_hundredths(-250).unwrap();
        assert_eq!(credit_delta(spent), "\u{2212}2.50");
        let spent_whole = CreditDelta::from_hundredths(-500).unwrap();
        assert_eq!(credit_delta(spent_whole), "\u{2212}5.00");
        let granted = CreditDelta::from_hundredths(50_000).unwrap();
        assert_eq!(credit_delta(granted), "+500.00");
    }

    #[test]
    fn dates_are_written_per_language_in_utc_time_elements() {
        let at = Timestamp::from_unix_millis(1_793_541_900_000);
        assert_eq!(date(at, Lang::En), "Nov 1, 2026");
        assert_eq!(date(at, Lang::ZhCn), "2026年11月1日");
        assert_eq!(date_time(at, Lang::En), "Nov 1, 2026, 14:05 UTC");
        assert_eq!(
            moment(at, Lang::ZhCn).into_string(),
            "<time datetime=\"2026-11-01T14:05:00Z\" data-format=\"datetime\">\
             2026年11月1日 14:05 UTC</time>"
        );
        assert_eq!(
            day(at, Lang::En).into_string(),
            "<time datetime=\"2026-11-01T14:05:00Z\" data-format=\"date\">Nov 1, 2026</time>"
        );
    }

    #[test]
    fn a_sentence_takes_an_element_in_its_slot() {
        let sentence = format!("Renews on {SLOT} <soon>");
        let element = html! { b { "Dec 1" } };
        assert_eq!(
            with_slot(&sentence, &element).into_string(),
            "Renews on <b>Dec 1</b> &lt;soon&gt;"
        );
        assert_eq!(with_slot("plain", &element).into_string(), "plain");
    }
}
