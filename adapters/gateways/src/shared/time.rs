//! Time to and from the providers' wire formats: unix seconds (Stripe, request signatures and
//! webhook timestamps), unix milliseconds, RFC 3339 text in any offset, and Beijing time for the
//! two Chinese wallets. Each provider keeps only its own spelling on top.

use chrono::{DateTime, FixedOffset, TimeZone};
use domain::Timestamp;

/// Beijing time's offset from UTC, in seconds (UTC+8, no daylight saving).
const BEIJING_OFFSET_S: i32 = 8 * 3600;

/// A time given in seconds since the epoch.
#[must_use]
pub const fn from_unix_seconds(seconds: i64) -> Timestamp {
    Timestamp::from_unix_millis(seconds.saturating_mul(1000))
}

/// `at` in whole seconds since the epoch (rounded down, also before 1970).
#[must_use]
pub const fn unix_seconds(at: Timestamp) -> i64 {
    at.unix_millis().div_euclid(1000)
}

/// A chrono time as a [`Timestamp`] (to the millisecond).
#[must_use]
pub fn from_chrono<Tz: TimeZone>(at: &DateTime<Tz>) -> Timestamp {
    Timestamp::from_unix_millis(at.timestamp_millis())
}

/// An RFC 3339 time in any offset (`2024-05-01T10:00:00Z`, `…10:00:00.123-07:00`), exactly as
/// given (a provider that tolerates surrounding spaces trims first).
#[must_use]
pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| from_chrono(&t))
}

/// `at` as RFC 3339 in UTC with milliseconds (`2024-05-01T10:00:00.000Z`); empty for a time
/// outside chrono's range.
#[must_use]
pub fn to_rfc3339(at: Timestamp) -> String {
    DateTime::from_timestamp_millis(at.unix_millis())
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// `at` in Beijing time, to be formatted as a provider writes it.
///
/// # Errors
/// A time outside chrono's range, as text.
pub fn in_beijing(at: Timestamp) -> Result<DateTime<FixedOffset>, &'static str> {
    let offset = FixedOffset::east_opt(BEIJING_OFFSET_S).ok_or("bad time zone offset")?;
    let utc = DateTime::from_timestamp_millis(at.unix_millis()).ok_or("time out of range")?;
    Ok(utc.with_timezone(&offset))
}

/// A Beijing wall-clock time as a [`Timestamp`].
#[must_use]
pub fn from_beijing(local: &chrono::NaiveDateTime) -> Option<Timestamp> {
    let offset = FixedOffset::east_opt(BEIJING_OFFSET_S)?;
    let at = offset.from_local_datetime(local).single()?;
    Some(from_chrono(&at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_down_to_whole_seconds_also_before_the_epoch() {
        assert_eq!(
            from_unix_seconds(1_700_000_000).unix_millis(),
            1_700_000_000_000
        );
        assert_eq!(unix_seconds(Timestamp::from_unix_millis(1_999)), 1);
        assert_eq!(unix_seconds(Timestamp::from_unix_millis(-1)), -1);
    }

    #[test]
    fn rfc3339_times_are_read_in_any_offset_and_nothing_else() {
        let utc = parse_rfc3339("2024-05-01T10:00:00Z").unwrap();
        assert_eq!(parse_rfc3339("2024-05-01T18:00:00+08:00"), Some(utc));
        assert_eq!(
            parse_rfc3339("2024-05-01T10:00:00.123Z")
                .unwrap()
                .unix_millis(),
            utc.unix_millis() + 123
        );
        assert_eq!(parse_rfc3339(" 2024-05-01T10:00:00Z"), None);
        assert_eq!(parse_rfc3339("2024-05-01"), None);
        assert_eq!(to_rfc3339(utc), "2024-05-01T10:00:00.000Z");
        assert_eq!(parse_rfc3339(&to_rfc3339(utc)), Some(utc));
    }

    #[test]
    fn beijing_time_is_eight_hours_ahead_of_utc_both_ways() {
        let at = parse_rfc3339("2024-05-01T10:00:00Z").unwrap();
        let local = in_beijing(at).unwrap();
        assert_eq!(
            local.format("%Y-%m-%d %H:%M:%S").to_string(),
            "2024-05-01 18:00:00"
        );
        assert_eq!(from_beijing(&local.naive_local()), Some(at));
    }
}
