//! An account's spend over the last 30 days, per UTC day, by feature and by model: what the
//! dashboard's credits tab charts.
//!
//! Each chart shows the few names that spent the most over the whole period as their own
//! series and folds the rest into one "other" series, so a chart stays readable however many
//! features or models an account uses. A day whose releases outweigh its holds counts zero.

use std::collections::BTreeMap;

use domain::{AccountId, CreditsTotal, Timestamp};

use super::InfraError;
use crate::ports::{
    Clock, ConsumptionDimension, DAY_MS, IdGenerator, ReportWindow, SecretHasher, SpendDay, Store,
};
use crate::service::Service;

/// The days charted, today included.
pub const SPEND_CHART_DAYS: usize = 30;
/// The names shown as their own series; the rest are one "other" series.
pub const SPEND_CHART_SERIES: usize = 4;

/// Whose spend a series shows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SeriesName {
    /// One feature or model.
    Named(String),
    /// Spends that named no feature (or no model).
    Unnamed,
    /// Every name past the largest [`SPEND_CHART_SERIES`], together.
    Other,
}

/// One series: what it spent on each charted day, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendSeries {
    /// Whose.
    pub name: SeriesName,
    /// One value per day of [`SpendChart::first_day`] onwards.
    pub per_day: Vec<CreditsTotal>,
}

/// An account's spend over [`SPEND_CHART_DAYS`] days.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendChart {
    /// The first day charted (days since 1970-01-01, UTC).
    pub first_day: i64,
    /// By feature, largest spender first, "other" last.
    pub by_feature: Vec<SpendSeries>,
    /// By model, the same way.
    pub by_model: Vec<SpendSeries>,
}

impl SpendChart {
    /// Whether nothing was spent in the period.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_feature.is_empty()
    }
}

/// The series of `rows` (one dimension's) over the days from `first_day`.
#[must_use]
pub fn series_of(rows: &[SpendDay], first_day: i64) -> Vec<SpendSeries> {
    let mut per_name: BTreeMap<SeriesName, Vec<i128>> = BTreeMap::new();
    for row in rows {
        let Some(index) = usize::try_from(row.day - first_day)
            .ok()
            .filter(|i| *i < SPEND_CHART_DAYS)
        else {
            continue;
        };
        let name = row
            .name
            .clone()
            .map_or(SeriesName::Unnamed, SeriesName::Named);
        let days = per_name
            .entry(name)
            .or_insert_with(|| vec![0; SPEND_CHART_DAYS]);
        days[index] += row.spent.hundredths();
    }
    let mut ranked: Vec<(SeriesName, Vec<i128>)> = per_name
        .into_iter()
        .filter(|(_, days)| days.iter().any(|d| *d > 0))
        .collect();
    ranked.sort_by(|a, b| {
        let total = |days: &[i128]| days.iter().sum::<i128>();
        total(&b.1).cmp(&total(&a.1)).then_with(|| a.0.cmp(&b.0))
    });
    let rest = ranked.split_off(ranked.len().min(SPEND_CHART_SERIES));
    if !rest.is_empty() {
        let mut other = vec![0; SPEND_CHART_DAYS];
        for (_, days) in rest {
            for (sum, day) in other.iter_mut().zip(days) {
                *sum += day;
            }
        }
        ranked.push((SeriesName::Other, other));
    }
    ranked
        .into_iter()
        .map(|(name, days)| SpendSeries {
            name,
            per_day: days
                .into_iter()
                .map(CreditsTotal::from_hundredths)
                .collect(),
        })
        .collect()
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// What `account` spent per day over the last [`SPEND_CHART_DAYS`] days (today included),
    /// by feature and by model (the caller has settled that the request acts in the account).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn spend_chart(&self, account: &AccountId) -> Result<SpendChart, InfraError> {
        let today = self.clock.now().unix_millis().div_euclid(DAY_MS);
        let days = i64::try_from(SPEND_CHART_DAYS).unwrap_or(30);
        let first_day = today - days + 1;
        let window = ReportWindow {
            from: Timestamp::from_unix_millis(first_day * DAY_MS),
            until: Timestamp::from_unix_millis((today + 1) * DAY_MS),
        };
        let store = &self.store;
        let features =
            (store.account_spend_by_day(account, ConsumptionDimension::Feature, window)).await?;
        let models =
            (store.account_spend_by_day(account, ConsumptionDimension::Model, window)).await?;
        Ok(SpendChart {
            first_day,
            by_feature: series_of(&features, first_day),
            by_model: series_of(&models, first_day),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(day: i64, name: Option<&str>, hundredths: i128) -> SpendDay {
        SpendDay {
            day,
            name: name.map(str::to_owned),
            spent: CreditsTotal::from_hundredths(hundredths),
        }
    }

    fn values(series: &SpendSeries) -> Vec<i128> {
        series.per_day.iter().map(|c| c.hundredths()).collect()
    }

    #[test]
    fn the_largest_spenders_get_a_series_and_the_rest_are_other() {
        let first = 100;
        let rows = [
            row(100, Some("chat"), 500),
            row(101, Some("chat"), 700),
            row(100, Some("image"), 1_000),
            row(129, None, 50),
            row(105, Some("tts"), 40),
            row(106, Some("ocr"), 30),
            row(107, Some("video"), 20),
            // Outside the 30 days; a day whose releases outweighed its holds.
            row(99, Some("chat"), 10_000),
            row(130, Some("chat"), 10_000),
            row(110, Some("image"), 0),
        ];
        let series = series_of(&rows, first);
        let names: Vec<&SeriesName> = series.iter().map(|s| &s.name).collect();
        assert_eq!(
            names,
            [
                &SeriesName::Named("chat".into()),
                &SeriesName::Named("image".into()),
                &SeriesName::Unnamed,
                &SeriesName::Named("tts".into()),
                &SeriesName::Other,
            ]
        );
        assert!(series.iter().all(|s| s.per_day.len() == SPEND_CHART_DAYS));
        assert_eq!(values(&series[0])[..2], [500, 700]);
        assert_eq!(values(&series[1])[10], 0);
        assert_eq!(values(&series[2])[29], 50);
        assert_eq!(values(&series[4])[6..8], [30, 20]);
        assert!(series_of(&[], first).is_empty());
        assert!(series_of(&[row(110, Some("x"), 0)], first).is_empty());
    }
}
