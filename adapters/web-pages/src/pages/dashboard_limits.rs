//! The spend limits of the account shown, on the dashboard's credits tab: each with what its
//! current window counted as a bar, what it counts (a feature, an API key) and when it resets.
//! Limits are made and removed through `/api/limits` (the account's owners and admins) and by
//! an operator.

use application::use_cases::spend_limits::ShownLimit;
use domain::Enforcement;
use maud::{Markup, html};

use crate::format;
use crate::state::Visitor;

/// The section, or nothing when the account has no limits.
pub(crate) fn section(v: &Visitor, limits: &[ShownLimit]) -> Markup {
    if limits.is_empty() {
        return html! {};
    }
    html! {
        section.card.section-card data-testid="spend-limits" {
            h2 { (v.t("limits.title")) }
            p.muted { (v.t("limits.lead")) }
            ul.limit-list {
                @for shown in limits { (row(v, shown)) }
            }
        }
    }
}

fn row(v: &Visitor, shown: &ShownLimit) -> Markup {
    let (record, standing) = (&shown.record, &shown.standing);
    let limit = &record.limit;
    let hours = limit.window.rolling_hours().map(|h| h.to_string());
    let window = match &hours {
        Some(hours) => v.tf("limits.per_rolling", &[("hours", hours)]),
        None => v
            .t(&format!("limits.per_{}", limit.window.code()))
            .to_owned(),
    };
    let used = v.tf(
        "limits.used_of",
        &[
            ("used", &format::credits(standing.used)),
            ("limit", &format::credits(limit.credits)),
            ("window", &window),
        ],
    );
    let max = limit.credits.hundredths();
    let (tone, enforcement) = match limit.enforcement {
        Enforcement::Hard => ("badge-primary", "limits.hard"),
        Enforcement::Soft => ("badge-warning", "limits.soft"),
    };
    html! {
        li.limit-row data-testid="spend-limit" {
            div.limit-head {
                span.cell-title { (used) }
                span class=(format!("badge {tone}")) { (v.t(enforcement)) }
            }
            // A native meter: the page's content security policy allows no inline styles, and
            // it is read out as a value of a range. Past 80% of the limit it shows as nearly
            // used up.
            meter.usage-bar min="0" max=(max) low=(max * 4 / 5) high=(max * 4 / 5) optimum="0"
                value=(standing.used.hundredths().min(max)) aria-label=(used) {
                (used)
            }
            span.cell-sub {
                @if let Some(feature) = &record.feature {
                    (v.tf("limits.feature", &[("feature", feature)])) " · "
                }
                @if let Some(key) = &record.api_key_id {
                    (v.tf("limits.key", &[("key", key)])) " · "
                }
                (v.tf("teams.resets", &[("date", &format::date_time(standing.resets_at, v.lang))]))
            }
        }
    }
}
