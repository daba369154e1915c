//! Charts drawn on the server as inline SVG (no script, no CDN, nothing the CSP would refuse):
//! columns for series over time, horizontal bars for shares. Each chart is a `<figure>` with its
//! `<figcaption>`, an `<svg role="img">` whose `aria-label` says what it shows, a legend, and a
//! table of the same numbers beside it for screen readers and for reading exact values.
//!
//! Geometry is integer arithmetic on a fixed `viewBox` (the SVG scales to its box); colours are
//! SVG presentation attributes, which the Content-Security-Policy allows, unlike `style`.

use maud::{Markup, html};

/// The drawing's coordinate box.
const WIDTH: i64 = 480;
const HEIGHT: i64 = 220;
/// Room for the value axis's labels on the left and the time axis's under the plot.
const LEFT: i64 = 76;
const RIGHT: i64 = 8;
const TOP: i64 = 12;
const BOTTOM: i64 = 30;

/// Series colours: distinguishable, and each at least 3:1 against white.
const PALETTE: [&str; 6] = [
    "#2563eb", "#dc2626", "#15803d", "#9333ea", "#c2410c", "#0e7490",
];

/// One named series of integer values, one per category.
pub(crate) struct Series {
    /// Its name in the legend and the table's heading.
    pub(crate) name: String,
    /// Its values, in the chart's unit (minor units, hundredths of credits, counts).
    pub(crate) values: Vec<i64>,
}

/// A chart of one or more series over the same categories (days, months, features).
pub(crate) struct Chart<'a> {
    /// `data-testid` of the figure.
    pub(crate) id: &'a str,
    /// The caption.
    pub(crate) title: String,
    /// The first column's heading in the table (what a category is: day, month, feature).
    pub(crate) category_heading: String,
    /// One label per category.
    pub(crate) categories: Vec<String>,
    /// The series, drawn side by side in each category.
    pub(crate) series: Vec<Series>,
    /// How a value is written (axis labels and table).
    pub(crate) format: &'a dyn Fn(i64) -> String,
    /// What the table says when every value is zero.
    pub(crate) empty: String,
}

impl Chart<'_> {
    fn largest(&self) -> i64 {
        self.series
            .iter()
            .flat_map(|s| s.values.iter().copied())
            .max()
            .unwrap_or(0)
            .max(0)
    }

    /// What the picture shows, for the `aria-label`: its title, and each series' total.
    fn summary(&self) -> String {
        let totals: Vec<String> = self
            .series
            .iter()
            .map(|s| {
                let total = s.values.iter().copied().fold(0_i64, i64::saturating_add);
                format!("{}: {}", s.name, (self.format)(total))
            })
            .collect();
        format!("{} — {}", self.title, totals.join("; "))
    }
}

/// The smallest 1, 2 or 5 times a power of ten at or above `value` (at least 1): the axis's top.
fn nice_ceiling(value: i64) -> i64 {
    let mut step: i64 = 1;
    loop {
        for factor in [1, 2, 5] {
            let top = step.saturating_mul(factor);
            if top >= value || top == i64::MAX {
                return top;
            }
        }
        step = step.saturating_mul(10);
    }
}

/// `value` of `top` scaled to `span` (integer, no overflow: widened to i128).
fn scaled(value: i64, top: i64, span: i64) -> i64 {
    if top <= 0 {
        return 0;
    }
    let out = i128::from(value.max(0)) * i128::from(span) / i128::from(top);
    i64::try_from(out).unwrap_or(span)
}

/// Column chart: each category a group of one column per series, a value axis with three
/// gridlines, and every `label_every`-th category labelled under the plot.
pub(crate) fn columns(chart: &Chart<'_>, label_every: usize) -> Markup {
    let top = nice_ceiling(chart.largest());
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let count = i64::try_from(chart.categories.len().max(1)).unwrap_or(1);
    let group_w = plot_w / count;
    let per_series = i64::try_from(chart.series.len().max(1)).unwrap_or(1);
    let bar_w = ((group_w - 2) / per_series).max(1);
    let bars = html! {
        @for (index, label) in chart.categories.iter().enumerate() {
            @let x0 = LEFT + group_w * i64::try_from(index).unwrap_or(0) + 1;
            @for (n, series) in chart.series.iter().enumerate() {
                @let value = series.values.get(index).copied().unwrap_or(0);
                @let h = scaled(value, top, plot_h);
                @let x = x0 + bar_w * i64::try_from(n).unwrap_or(0);
                rect x=(x) y=(TOP + plot_h - h) width=(bar_w) height=(h)
                    fill=(PALETTE[n % PALETTE.len()]) {
                    title { (label) " · " (series.name) ": " ((chart.format)(value)) }
                }
            }
            @if label_every > 0 && index % label_every == 0 {
                text x=(x0 + group_w / 2) y=(HEIGHT - 8) text-anchor="middle" font-size="13"
                    fill="#475569" { (label) }
            }
        }
    };
    figure(chart, html! { (value_axis(chart, top)) (bars) })
}

/// Horizontal bars: one row per category (a feature, a model), one bar per series.
pub(crate) fn bars(chart: &Chart<'_>) -> Markup {
    let top = nice_ceiling(chart.largest());
    let label_w: i64 = 160;
    let row_h: i64 = 28;
    let count = i64::try_from(chart.categories.len()).unwrap_or(0);
    let height = (count * row_h).max(row_h) + 8;
    let span = WIDTH - label_w - 96;
    let rows = html! {
        @for (index, label) in chart.categories.iter().enumerate() {
            @let y = 4 + row_h * i64::try_from(index).unwrap_or(0);
            @let value = chart.series.first().and_then(|s| s.values.get(index)).copied()
                .unwrap_or(0);
            @let w = scaled(value, top, span).max(1);
            text x=(label_w - 8) y=(y + 18) text-anchor="end" font-size="13" fill="#0f172a" {
                (shortened(label, 20))
            }
            rect x=(label_w) y=(y + 4) width=(w) height=(row_h - 8)
                fill=(PALETTE[index % PALETTE.len()]) {
                title { (label) ": " ((chart.format)(value)) }
            }
            text x=(label_w + w + 6) y=(y + 18) font-size="13" fill="#334155" {
                ((chart.format)(value))
            }
        }
    };
    let view_box = format!("0 0 {WIDTH} {height}");
    figure_with(chart, &view_box, rows)
}

fn shortened(label: &str, max: usize) -> String {
    if label.chars().count() <= max {
        return label.to_owned();
    }
    let mut out: String = label.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The value axis: gridlines at 0, half and the top, labelled.
fn value_axis(chart: &Chart<'_>, top: i64) -> Markup {
    let plot_h = HEIGHT - TOP - BOTTOM;
    html! {
        @for tick in [0, top / 2, top] {
            @let y = TOP + plot_h - scaled(tick, top, plot_h);
            line x1=(LEFT) x2=(WIDTH - RIGHT) y1=(y) y2=(y) stroke="#e2e8f0" stroke-width="1" {}
            text x=(LEFT - 6) y=(y + 4) text-anchor="end" font-size="13" fill="#475569" {
                ((chart.format)(tick))
            }
        }
    }
}

fn figure(chart: &Chart<'_>, drawing: Markup) -> Markup {
    let view_box = format!("0 0 {WIDTH} {HEIGHT}");
    figure_with(chart, &view_box, drawing)
}

fn figure_with(chart: &Chart<'_>, view_box: &str, drawing: Markup) -> Markup {
    if chart.largest() == 0 {
        // Nothing to draw: the caption and one sentence, not an empty plot.
        return html! {
            figure.chart data-testid=(chart.id) {
                figcaption.chart-title { (chart.title) }
                p.muted { (chart.empty) }
            }
        };
    }
    html! {
        figure.chart data-testid=(chart.id) {
            figcaption.chart-title { (chart.title) }
            div.chart-layout {
                div.chart-drawing {
                    svg xmlns="http://www.w3.org/2000/svg" viewBox=(view_box) width="100%"
                        role="img" aria-label=(chart.summary()) focusable="false" {
                        (drawing)
                    }
                    @if chart.series.len() > 1 {
                        ul.chart-legend {
                            @for (n, series) in chart.series.iter().enumerate() {
                                li {
                                    svg width="12" height="12" viewBox="0 0 12 12"
                                        aria-hidden="true" focusable="false" {
                                        rect width="12" height="12" rx="2"
                                            fill=(PALETTE[n % PALETTE.len()]) {}
                                    }
                                    " " (series.name)
                                }
                            }
                        }
                    }
                }
                div.chart-numbers { (numbers(chart)) }
            }
        }
    }
}

/// The chart's numbers as a table: one row per category that has a value.
fn numbers(chart: &Chart<'_>) -> Markup {
    html! {
        table.table.chart-table {
            caption.sr-only { (chart.title) }
            thead { tr {
                th scope="col" { (chart.category_heading) }
                @for series in &chart.series { th.num scope="col" { (series.name) } }
            } }
            tbody {
                @for (index, label) in chart.categories.iter().enumerate() {
                    @if chart.series.iter().any(|s| s.values.get(index).is_some_and(|v| *v != 0)) {
                        tr {
                            th scope="row" { (label) }
                            @for series in &chart.series {
                                td.num.nowrap {
                                    ((chart.format)(series.values.get(index).copied().unwrap_or(0)))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(value: i64) -> String {
        value.to_string()
    }

    fn chart<'a>(format: &'a dyn Fn(i64) -> String, values: Vec<i64>) -> Chart<'a> {
        Chart {
            id: "c",
            title: "Things".into(),
            category_heading: "Day".into(),
            categories: vec!["a".into(), "b".into(), "c".into()],
            series: vec![Series {
                name: "count".into(),
                values,
            }],
            format,
            empty: "nothing".into(),
        }
    }

    #[test]
    fn axis_tops_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(7), 10);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(4_100), 5_000);
        assert_eq!(nice_ceiling(i64::MAX), i64::MAX);
        assert_eq!(scaled(50, 100, 200), 100);
        assert_eq!(scaled(i64::MAX, i64::MAX, 200), 200);
    }

    #[test]
    fn a_chart_is_a_labelled_figure_with_its_numbers_in_a_table() {
        let html = columns(&chart(&plain, vec![3, 0, 5]), 1).into_string();
        assert!(html.contains("<figure class=\"chart\" data-testid=\"c\">"));
        assert!(html.contains("role=\"img\" aria-label=\"Things — count: 8\""));
        assert!(html.contains("<th scope=\"row\">a</th><td class=\"num nowrap\">3</td>"));
        // A category with nothing in it stays out of the table, not out of the picture.
        assert!(!html.contains("<th scope=\"row\">b</th>"));
        assert_eq!(html.matches("<rect").count(), 3);
        let shares = bars(&chart(&plain, vec![40, 10, 0])).into_string();
        // One bar per category on a scale up to 50 (224 units): 40 is 179 units long.
        assert_eq!(shares.matches("<rect").count(), 3);
        assert!(shares.contains("width=\"179\""), "{shares}");
        assert!(shares.contains("<title>a: 40</title>"));
        let empty = bars(&chart(&plain, vec![0, 0, 0])).into_string();
        assert!(empty.contains("nothing") && !empty.contains("<table"));
    }
}
