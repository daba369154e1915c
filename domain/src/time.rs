//! Points in time as whole milliseconds since the Unix epoch (UTC).
//!
//! The domain never reads a clock: callers pass `now` in, so every rule is deterministic.
//! Calendar arithmetic (adding months) uses the proleptic Gregorian calendar in UTC, with
//! Howard Hinnant's `days_from_civil` / `civil_from_days` algorithms.

use std::fmt;

/// Milliseconds in a day (UTC has no leap seconds in Unix time).
const MS_PER_DAY: i64 = 86_400_000;

/// A point in time, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    #[must_use]
    pub const fn from_unix_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// This instant moved forward by `millis`, saturating at the far future instead of wrapping.
    #[must_use]
    pub const fn plus_millis(self, millis: i64) -> Self {
        Self(self.0.saturating_add(millis))
    }

    /// This instant moved forward by whole days, saturating.
    #[must_use]
    pub const fn plus_days(self, days: i64) -> Self {
        self.plus_millis(days.saturating_mul(MS_PER_DAY))
    }

    /// This instant moved forward by whole calendar months (UTC): the same day of the month and
    /// time of day, the day clamped to the target month's last day (31 January + 1 month is
    /// 28 or 29 February). Saturates at the far future.
    #[must_use]
    pub fn plus_calendar_months(self, months: u32) -> Self {
        let days = self.0.div_euclid(MS_PER_DAY);
        let time_of_day_ms = self.0.rem_euclid(MS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let Some(total) = (year.checked_mul(12))
            .and_then(|t| t.checked_add(i64::from(month) - 1))
            .and_then(|t| t.checked_add(i64::from(months)))
        else {
            return Self(i64::MAX);
        };
        let target_year = total.div_euclid(12);
        let target_month = u32::try_from(total.rem_euclid(12) + 1).unwrap_or(12);
        let target_day = day.min(days_in_month(target_year, target_month));
        let target_days = days_from_civil(target_year, target_month, target_day);
        Self(
            target_days
                .saturating_mul(MS_PER_DAY)
                .saturating_add(time_of_day_ms),
        )
    }
}

/// The day of the month (1-31, UTC) of `at`.
pub(crate) fn day_of_month(at: Timestamp) -> u32 {
    civil_from_days(at.0.div_euclid(MS_PER_DAY)).2
}

/// Days since 1970-01-01 of the civil date `year`-`month`-`day` (Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = i64::from(if month > 2 { month - 3 } else { month + 9 });
    let day_of_year = (153 * month_index + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era.saturating_mul(146_097)
        .saturating_add(day_of_era)
        .saturating_sub(719_468)
}

/// The civil date (year, month 1-12, day 1-31) of `days` since 1970-01-01 (Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // Both are small and positive by construction (day 1-31, month 1-12).
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

const fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

const fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant of a UTC civil date and time of day.
    fn utc(year: i64, month: u32, day: u32, time_of_day_ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(days_from_civil(year, month, day) * MS_PER_DAY + time_of_day_ms)
    }

    #[test]
    fn civil_dates_round_trip_through_day_numbers() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for days in (-800_000..800_000).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn adding_months_keeps_the_day_and_time_of_day() {
        let start = utc(2026, 11, 24, 19 * 3_600_000 + 41 * 60_000 + 7);
        assert_eq!(
            start.plus_calendar_months(12),
            utc(2027, 11, 24, 19 * 3_600_000 + 41 * 60_000 + 7)
        );
        assert_eq!(
            start.plus_calendar_months(1),
            utc(2026, 12, 24, start.0 % MS_PER_DAY)
        );
        assert_eq!(
            start.plus_calendar_months(2),
            utc(2027, 1, 24, start.0 % MS_PER_DAY)
        );
        assert_eq!(
            utc(2026, 3, 15, 0).plus_calendar_months(0),
            utc(2026, 3, 15, 0)
        );
    }

    #[test]
    fn the_day_is_clamped_to_the_end_of_a_shorter_month() {
        assert_eq!(
            utc(2026, 1, 31, 5).plus_calendar_months(1),
            utc(2026, 2, 28, 5)
        );
        assert_eq!(
            utc(2028, 1, 31, 5).plus_calendar_months(1),
            utc(2028, 2, 29, 5)
        );
        assert_eq!(
            utc(2026, 3, 31, 0).plus_calendar_months(1),
            utc(2026, 4, 30, 0)
        );
        assert_eq!(
            utc(2026, 8, 31, 0).plus_calendar_months(6),
            utc(2027, 2, 28, 0)
        );
    }

    #[test]
    fn leap_days_follow_the_gregorian_rules() {
        assert_eq!(
            utc(2024, 2, 29, 0).plus_calendar_months(12),
            utc(2025, 2, 28, 0)
        );
        assert_eq!(
            utc(2024, 2, 29, 0).plus_calendar_months(48),
            utc(2028, 2, 29, 0)
        );
        assert_eq!(
            utc(2096, 2, 29, 0).plus_calendar_months(48),
            utc(2100, 2, 28, 0)
        );
        assert_eq!(
            utc(1996, 2, 29, 0).plus_calendar_months(48),
            utc(2000, 2, 29, 0)
        );
        assert_eq!(
            utc(2026, 2, 28, 0).plus_calendar_months(1),
            utc(2026, 3, 28, 0)
        );
    }

    #[test]
    fn instants_before_the_epoch_and_far_in_the_future_are_handled() {
        assert_eq!(
            utc(1969, 12, 31, 1).plus_calendar_months(1),
            utc(1970, 1, 31, 1)
        );
        let far = Timestamp::from_unix_millis(i64::MAX - 1);
        assert!(far.plus_calendar_months(1_200) >= far);
    }
}
