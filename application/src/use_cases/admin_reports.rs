//! The administrators' overview (issue 18): the numbers behind its charts — revenue per day per currency
//! (paid minus refunded), credits granted and consumed per day, subscriptions started and ended
//! per month, and consumption by feature and by model.
//!
//! Day series cover the last [`OVERVIEW_DAYS`] UTC days (today included), every day present
//! (zero when nothing happened); the month series covers the last [`OVERVIEW_MONTHS`] calendar
//! months (this one included). Each series is read from the store over its window only.

use domain::{CreditsTotal, Currency, Timestamp};

use super::InfraError;
use crate::ports::{
    Clock, ConsumptionDimension, ConsumptionShare, DAY_MS, IdGenerator, ReportWindow, RevenueDay,
    SecretHasher, Store, StoreError, SubscriptionsDay,
};
use crate::service::Service;

/// Days in the daily charts.
pub const OVERVIEW_DAYS: i64 = 30;
/// Months in the monthly chart.
pub const OVERVIEW_MONTHS: u32 = 12;
/// Features (and models) listed in the consumption charts.
pub const OVERVIEW_TOP: u32 = 8;

/// One currency's revenue per day, every day of the window present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevenueSeries {
    /// The currency.
    pub currency: Currency,
    /// Paid, refunded and net per day, oldest first.
    pub days: Vec<RevenuePoint>,
}

/// Revenue on one day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevenuePoint {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    /// Paid that day, minor units.
    pub paid_minor: i64,
    /// Refunded of that day's payments, minor units.
    pub refunded_minor: i64,
}

impl RevenuePoint {
    /// Paid minus refunded.
    #[must_use]
    pub const fn net_minor(&self) -> i64 {
        self.paid_minor.saturating_sub(self.refunded_minor)
    }
}

/// Credits granted and consumed on one day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditsPoint {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    /// Granted.
    pub granted: CreditsTotal,
    /// Consumed.
    pub consumed: CreditsTotal,
}

/// Subscriptions started and ended in one calendar month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionsMonth {
    /// The year.
    pub year: i64,
    /// The month, 1–12.
    pub month: u32,
    /// Started.
    pub started: u64,
    /// Ended.
    pub ended: u64,
}

/// One chart's figures, or the fact that they could not be read: the overview shows every
/// other chart, so one bad row takes down one chart at most, never the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Figures<T> {
    /// Read.
    Read(T),
    /// The store could not read them (the cause is logged where it was read).
    Unreadable,
}

impl<T> Figures<T> {
    /// The figures of a store read, logging why not.
    fn of(read: Result<T, StoreError>, report: &'static str) -> Self {
        match read {
            Ok(figures) => Figures::Read(figures),
            Err(error) => {
                tracing::error!(report, error = %error, "an overview report could not be read");
                Figures::Unreadable
            }
        }
    }
}

/// Everything the administrators' overview charts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminOverview {
    /// The daily charts' window.
    pub days: ReportWindow,
    /// The monthly chart's window.
    pub months: ReportWindow,
    /// One series per currency that had payments, by currency code.
    pub revenue: Figures<Vec<RevenueSeries>>,
    /// Credits per day.
    pub credits: Figures<Vec<CreditsPoint>>,
    /// Subscriptions per month, oldest first.
    pub subscriptions: Figures<Vec<SubscriptionsMonth>>,
    /// The features that consumed most in the daily window.
    pub by_feature: Figures<Vec<ConsumptionShare>>,
    /// The models that consumed most in the daily window.
    pub by_model: Figures<Vec<ConsumptionShare>>,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The overview's series, over the daily and monthly windows ending today; a report the
    /// store cannot read is [`Figures::Unreadable`] and the others are still shown.
    ///
    /// # Errors
    /// None today (kept for adapters that may refuse the whole overview).
    #[tracing::instrument(skip_all)]
    pub async fn admin_overview(&self) -> Result<AdminOverview, InfraError> {
        let today = self.clock.now().unix_millis().div_euclid(DAY_MS);
        let days = ReportWindow {
            from: Timestamp::from_unix_millis((today - OVERVIEW_DAYS + 1) * DAY_MS),
            until: Timestamp::from_unix_millis((today + 1) * DAY_MS),
        };
        let (year, month, _) = civil_from_days(today);
        let first = month_back(year, month, OVERVIEW_MONTHS - 1);
        let months = ReportWindow {
            from: Timestamp::from_unix_millis(days_from_civil(first.0, first.1, 1) * DAY_MS),
            until: days.until,
        };
        let store = &self.store;
        let revenue = store.revenue_by_day(days).await;
        let credits = store.credits_by_day(days).await;
        let started_ended = store.subscriptions_by_day(months).await;
        let by_feature = store
            .consumption_by(ConsumptionDimension::Feature, days, OVERVIEW_TOP)
            .await;
        let by_model = store
            .consumption_by(ConsumptionDimension::Model, days, OVERVIEW_TOP)
            .await;
        Ok(AdminOverview {
            days,
            months,
            revenue: Figures::of(revenue.map(|r| revenue_series(&r, days)), "revenue"),
            credits: Figures::of(credits.map(|r| credit_series(&r, days)), "credits"),
            subscriptions: Figures::of(
                started_ended.map(|r| subscription_months(&r, year, month)),
                "subscriptions",
            ),
            by_feature: Figures::of(by_feature, "consumption by feature"),
            by_model: Figures::of(by_model, "consumption by model"),
        })
    }
}

/// Subscriptions started and ended per month, the [`OVERVIEW_MONTHS`] ending with (`year`,
/// `month`), oldest first.
fn subscription_months(
    started_ended: &[SubscriptionsDay],
    year: i64,
    month: u32,
) -> Vec<SubscriptionsMonth> {
    let mut subscriptions: Vec<SubscriptionsMonth> = (0..OVERVIEW_MONTHS)
        .rev()
        .map(|back| {
            let (year, month) = month_back(year, month, back);
            SubscriptionsMonth {
                year,
                month,
                started: 0,
                ended: 0,
            }
        })
        .collect();
    for day in started_ended {
        let (y, m, _) = civil_from_days(day.day);
        if let Some(slot) = subscriptions
            .iter_mut()
            .find(|s| s.year == y && s.month == m)
        {
            slot.started = slot.started.saturating_add(day.started);
            slot.ended = slot.ended.saturating_add(day.ended);
        }
    }
    subscriptions
}

/// The day numbers of `window` (whole days), oldest first.
fn day_numbers(window: ReportWindow) -> impl Iterator<Item = i64> {
    window.from.unix_millis().div_euclid(DAY_MS)..window.until.unix_millis().div_euclid(DAY_MS)
}

/// One series per currency, every day of `window` present.
fn revenue_series(rows: &[RevenueDay], window: ReportWindow) -> Vec<RevenueSeries> {
    let mut currencies: Vec<Currency> = rows.iter().map(|r| r.currency).collect();
    currencies.sort_by_key(|c| c.code());
    currencies.dedup();
    currencies
        .into_iter()
        .map(|currency| RevenueSeries {
            currency,
            days: day_numbers(window)
                .map(|day| {
                    let found = rows.iter().find(|r| r.day == day && r.currency == currency);
                    RevenuePoint {
                        day,
                        paid_minor: found.map_or(0, |r| r.paid_minor),
                        refunded_minor: found.map_or(0, |r| r.refunded_minor),
                    }
                })
                .collect(),
        })
        .collect()
}

/// Credits per day, every day of `window` present.
fn credit_series(rows: &[crate::ports::CreditsDay], window: ReportWindow) -> Vec<CreditsPoint> {
    day_numbers(window)
        .map(|day| {
            let found = rows.iter().find(|r| r.day == day);
            CreditsPoint {
                day,
                granted: found.map_or(CreditsTotal::ZERO, |r| r.granted),
                consumed: found.map_or(CreditsTotal::ZERO, |r| r.consumed),
            }
        })
        .collect()
}

/// The month `back` months before (`year`, `month`).
fn month_back(year: i64, month: u32, back: u32) -> (i64, u32) {
    let index = year * 12 + i64::from(month) - 1 - i64::from(back);
    let month = u32::try_from(index.rem_euclid(12)).unwrap_or(0) + 1;
    (index.div_euclid(12), month)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
#[must_use]
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month 1–12, day 1–31) of a day number (H. Hinnant's `civil_from_days`).
#[must_use]
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip_through_day_numbers() {
        for (y, m, d) in [(1970, 1, 1), (2000, 2, 29), (2026, 11, 25), (2024, 12, 31)] {
            assert_eq!(civil_from_days(days_from_civil(y, m, d)), (y, m, d));
        }
        assert_eq!(days_from_civil(1970, 1, 2), 1);
    }

    #[test]
    fn months_back_cross_years() {
        assert_eq!(month_back(2026, 3, 0), (2026, 3));
        assert_eq!(month_back(2026, 3, 3), (2025, 12));
        assert_eq!(month_back(2026, 1, 12), (2025, 1));
    }
}
