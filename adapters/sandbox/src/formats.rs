//! The few wire spellings the simulators write and read themselves: Beijing wall-clock times
//! (WeChat Pay, Alipay) and display amounts (Pancake). The sandbox keeps its own copies rather
//! than borrowing the gateways' parsers, so a mistake in a gateway's parsing is not mirrored by
//! the simulator that tests it.

use chrono::{DateTime, FixedOffset, NaiveDateTime, TimeZone};
use domain::{Currency, Money, Timestamp};

/// China Standard Time, UTC+8, in seconds.
const BEIJING_OFFSET_S: i32 = 8 * 3600;

fn in_beijing(at: Timestamp) -> Option<DateTime<FixedOffset>> {
    let offset = FixedOffset::east_opt(BEIJING_OFFSET_S)?;
    Some(DateTime::from_timestamp_millis(at.unix_millis())?.with_timezone(&offset))
}

/// `yyyy-MM-dd HH:mm:ss` in Beijing time (Alipay); empty for a time chrono cannot hold.
#[must_use]
pub fn beijing_time(at: Timestamp) -> String {
    in_beijing(at)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// RFC 3339 with the `+08:00` offset, whole seconds (WeChat Pay); empty for a time chrono
/// cannot hold.
#[must_use]
pub fn beijing_rfc3339(at: Timestamp) -> String {
    in_beijing(at)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%:z").to_string())
        .unwrap_or_default()
}

/// Parse `yyyy-MM-dd HH:mm:ss` (optionally with fractional seconds), Beijing time.
#[must_use]
pub fn parse_beijing_time(text: &str) -> Option<Timestamp> {
    let local = NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S%.f").ok()?;
    let at = FixedOffset::east_opt(BEIJING_OFFSET_S)?
        .from_local_datetime(&local)
        .single()?;
    Some(Timestamp::from_unix_millis(at.timestamp_millis()))
}

/// An amount as a display decimal with the currency's digits: `"9.99"`, `"1000"` (JPY).
#[must_use]
pub fn display_amount(amount: Money) -> String {
    let minor = amount.amount_minor();
    let exponent = amount.currency().exponent();
    if exponent == 0 {
        return minor.to_string();
    }
    let scale = 10_i64.pow(exponent);
    let width = usize::try_from(exponent).unwrap_or(2);
    format!("{}.{:0width$}", minor / scale, minor % scale)
}

/// A non-negative display decimal as [`Money`]: `"9.99"`, `"9.9"` and `"9.990"` are 999 cents;
/// signs, exponents, spaces and more significant decimals than the currency has are refused.
#[must_use]
pub fn parse_display(text: &str, currency: Currency) -> Option<Money> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || whole.len() > 15 {
        return None;
    }
    let exponent = usize::try_from(currency.exponent()).ok()?;
    let significant = fraction.trim_end_matches('0');
    if significant.len() > exponent {
        return None;
    }
    let padded = format!("{whole}{significant:0<exponent$}");
    Money::from_minor(padded.parse().ok()?, currency).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beijing_times_are_eight_hours_ahead_and_round_trip() {
        let at = Timestamp::from_unix_millis(1_700_000_000_000);
        assert_eq!(beijing_time(at), "2023-11-15 06:13:20");
        assert_eq!(beijing_rfc3339(at), "2023-11-15T06:13:20+08:00");
        assert_eq!(parse_beijing_time("2023-11-15 06:13:20"), Some(at));
        assert_eq!(parse_beijing_time("2023-11-15T06:13:20"), None);
    }

    #[test]
    fn display_amounts_round_trip_and_refuse_what_is_not_plain() {
        let cents = |m: i64| Money::from_minor(m, Currency::Usd).unwrap();
        assert_eq!(display_amount(cents(999)), "9.99");
        assert_eq!(display_amount(cents(5)), "0.05");
        assert_eq!(parse_display("9.99", Currency::Usd), Some(cents(999)));
        assert_eq!(parse_display("9.9", Currency::Usd), Some(cents(990)));
        assert_eq!(parse_display("9.990", Currency::Usd), Some(cents(999)));
        for bad in ["9.999", "-1", "1e3", " 9", "", ".5", "9.9.9"] {
            assert_eq!(parse_display(bad, Currency::Usd), None, "{bad}");
        }
    }
}
