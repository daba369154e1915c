//! The dashboard credits tab's spend chart: what the account spent per day over the last 30
//! days, by feature and by model, drawn on the server as the admin console's charts are (inline
//! SVG with the numbers in a table beside it). Absent while the account has spent nothing in
//! that time.

use application::use_cases::admin_reports::civil_from_days;
use application::use_cases::spend_chart::{SeriesName, SpendChart, SpendSeries};
use domain::AccountId;
use maud::{Markup, html};

use super::admin::charts::{self, Chart, Series};
use crate::format;
use crate::state::{PageError, PageState, Visitor};

/// The chart of `account`'s spend.
pub(crate) async fn load(state: &PageState, account: &AccountId) -> Result<SpendChart, PageError> {
    Ok(state.ports.credits.spend_chart(account).await?)
}

/// The section with the two charts, or nothing when nothing was spent.
pub(crate) fn section(v: &Visitor, chart: &SpendChart) -> Markup {
    if chart.is_empty() {
        return html! {};
    }
    html! {
        section.card.section-card data-testid="spend-chart" {
            h2 { (v.t("spend.title")) }
            div.chart-grid {
                (drawn(v, chart, ("spend-by-feature", "spend.by_feature", "spend.no_feature"),
                    &chart.by_feature))
                (drawn(v, chart, ("spend-by-model", "spend.by_model", "spend.no_model"),
                    &chart.by_model))
            }
        }
    }
}

/// One chart: its test id, its title's key, the key naming spends without a feature (or model).
fn drawn(
    v: &Visitor,
    chart: &SpendChart,
    (id, title, unnamed): (&str, &str, &str),
    series: &[SpendSeries],
) -> Markup {
    let days = series.first().map_or(0, |s| s.per_day.len());
    charts::columns(
        &Chart {
            id,
            title: v.t(title).to_owned(),
            category_heading: v.t("console.col_day").to_owned(),
            categories: (0..days)
                .map(|i| day_label(chart.first_day + i64::try_from(i).unwrap_or(0)))
                .collect(),
            series: series
                .iter()
                .map(|s| Series {
                    name: match &s.name {
                        SeriesName::Named(name) => name.clone(),
                        SeriesName::Unnamed => v.t(unnamed).to_owned(),
                        SeriesName::Other => v.t("spend.other").to_owned(),
                    },
                    values: s
                        .per_day
                        .iter()
                        .map(|c| c.saturating_hundredths())
                        .collect(),
                })
                .collect(),
            format: &|hundredths| format::credit_hundredths(hundredths.max(0).unsigned_abs()),
            empty: v.t("spend.none").to_owned(),
        },
        5,
    )
}

/// `MM-DD` of a day since 1970-01-01.
fn day_label(day: i64) -> String {
    let (_, month, day) = civil_from_days(day);
    format!("{month:02}-{day:02}")
}
