//! `/admin`: the console's overview — revenue per day per currency (paid minus refunded),
//! credits granted and consumed per day, subscriptions started and ended per month, and
//! consumption by feature and by model, each a chart with its numbers beside it.

use std::sync::Arc;

use application::ports::ConsumptionShare;
use application::use_cases::admin_reports::{
    CreditsPoint, Figures, RevenueSeries, SubscriptionsMonth, civil_from_days,
};
use domain::Money;
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::charts::{self, Chart, Series};
use super::{console, gate};
use crate::format;
use crate::i18n::Lang;
use crate::layout::{self, Nav};
use crate::state::{PageResult, PageState, Visitor};

/// `GET /admin`.
pub(crate) async fn show(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let overview = state.ports.admin.admin_overview().await?;
    let body = html! {
        (console::sections(&v, "/admin"))
        section.page-intro {
            h1 { (v.t("console.overview_title")) }
            p.muted { (v.t("console.overview_lead")) }
        }
        div.chart-grid {
            (readable(&v, "chart-revenue", "console.chart_revenue", &overview.revenue,
                |r| revenue(&v, r)))
            (readable(&v, "chart-credits", "console.chart_credits", &overview.credits,
                |c| credits_chart(&v, c)))
            (readable(&v, "chart-subscriptions", "console.chart_subscriptions",
                &overview.subscriptions, |m| subscriptions(&v, m)))
            (readable(&v, "chart-features", "console.chart_features", &overview.by_feature,
                |f| shares(&v, "chart-features", "console.chart_features", "console.col_feature", f)))
            (readable(&v, "chart-models", "console.chart_models", &overview.by_model,
                |m| shares(&v, "chart-models", "console.chart_models", "console.col_model", m)))
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("console.overview_title"),
        Nav::Admin,
        body,
    ))
}

/// A chart, or in its place a note that its figures could not be read: one report the store
/// cannot read never takes the rest of the page with it.
fn readable<T>(
    v: &Visitor,
    id: &str,
    title: &str,
    figures: &Figures<T>,
    chart: impl FnOnce(&T) -> Markup,
) -> Markup {
    match figures {
        Figures::Read(data) => chart(data),
        Figures::Unreadable => html! {
            figure.chart data-testid=(id) {
                figcaption.chart-title { (v.t(title)) }
                p.muted role="status" { (v.t("console.figures_unreadable")) }
            }
        },
    }
}

/// `11-25` for a day number.
fn day_label(day: i64) -> String {
    let (_, month, day) = civil_from_days(day);
    format!("{month:02}-{day:02}")
}

/// A chart's value in hundredths of a credit, whatever its size (a day's total may exceed the
/// largest balance; a saturated one reads as the largest `i64`).
fn credit_text(hundredths: i64) -> String {
    format::credit_hundredths(hundredths.max(0).unsigned_abs())
}

fn money_text(minor: i64, series: &RevenueSeries, lang: Lang) -> String {
    Money::from_minor(minor, series.currency)
        .map_or_else(|_| minor.to_string(), |m| format::money(m, lang))
}

fn revenue(v: &Visitor, revenue: &[RevenueSeries]) -> Markup {
    if revenue.is_empty() {
        return html! {
            figure.chart data-testid="chart-revenue" {
                figcaption.chart-title { (v.t("console.chart_revenue")) }
                p.muted { (v.t("console.no_revenue")) }
            }
        };
    }
    html! {
        @for series in revenue {
            @let format = |minor: i64| money_text(minor, series, v.lang);
            @let code = series.currency.code();
            @let id = format!("chart-revenue-{}", code.to_ascii_lowercase());
            (charts::columns(&Chart {
                id: &id,
                title: v.tf("console.chart_revenue_in", &[("currency", code)]),
                category_heading: v.t("console.col_day").to_owned(),
                categories: series.days.iter().map(|d| day_label(d.day)).collect(),
                series: vec![
                    Series {
                        name: v.t("console.series_net").to_owned(),
                        values: series.days.iter().map(|d| d.net_minor()).collect(),
                    },
                    Series {
                        name: v.t("console.series_refunded").to_owned(),
                        values: series.days.iter().map(|d| d.refunded_minor).collect(),
                    },
                ],
                format: &format,
                empty: v.t("console.no_revenue").to_owned(),
            }, 5))
        }
    }
}

fn credits_chart(v: &Visitor, points: &[CreditsPoint]) -> Markup {
    charts::columns(
        &Chart {
            id: "chart-credits",
            title: v.t("console.chart_credits").to_owned(),
            category_heading: v.t("console.col_day").to_owned(),
            categories: points.iter().map(|p| day_label(p.day)).collect(),
            series: vec![
                Series {
                    name: v.t("console.series_granted").to_owned(),
                    values: points
                        .iter()
                        .map(|p| p.granted.saturating_hundredths())
                        .collect(),
                },
                Series {
                    name: v.t("console.series_consumed").to_owned(),
                    values: points
                        .iter()
                        .map(|p| p.consumed.saturating_hundredths())
                        .collect(),
                },
            ],
            format: &credit_text,
            empty: v.t("console.no_credits").to_owned(),
        },
        5,
    )
}

fn subscriptions(v: &Visitor, months: &[SubscriptionsMonth]) -> Markup {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    charts::columns(
        &Chart {
            id: "chart-subscriptions",
            title: v.t("console.chart_subscriptions").to_owned(),
            category_heading: v.t("console.col_month").to_owned(),
            categories: months
                .iter()
                .map(|m| format!("{}-{:02}", m.year, m.month))
                .collect(),
            series: vec![
                Series {
                    name: v.t("console.series_started").to_owned(),
                    values: months.iter().map(|m| count(m.started)).collect(),
                },
                Series {
                    name: v.t("console.series_ended").to_owned(),
                    values: months.iter().map(|m| count(m.ended)).collect(),
                },
            ],
            format: &|n: i64| n.to_string(),
            empty: v.t("console.no_subscriptions").to_owned(),
        },
        2,
    )
}

fn shares(
    v: &Visitor,
    id: &str,
    title: &str,
    heading: &str,
    shares: &[ConsumptionShare],
) -> Markup {
    let unnamed = v.t("console.unnamed");
    charts::bars(&Chart {
        id,
        title: v.t(title).to_owned(),
        category_heading: v.t(heading).to_owned(),
        categories: shares
            .iter()
            .map(|s| s.name.clone().unwrap_or_else(|| unnamed.to_owned()))
            .collect(),
        series: vec![Series {
            name: v.t("console.series_consumed").to_owned(),
            values: shares
                .iter()
                .map(|s| s.consumed.saturating_hundredths())
                .collect(),
        }],
        format: &credit_text,
        empty: v.t("console.no_consumption").to_owned(),
    })
}
