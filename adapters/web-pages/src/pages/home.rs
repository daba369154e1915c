//! `/`: what Tally offers, with the way to the plans and the dashboard.

use std::sync::Arc;

use maud::html;
use poem::Request;
use poem::http::StatusCode;

use crate::layout::{self, Nav};
use crate::state::{PageResult, PageState, Visitor};

/// `GET /`.
pub(crate) async fn show(_state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    let features = [
        ("home.feature_plans_title", "home.feature_plans_text"),
        (
            "home.feature_providers_title",
            "home.feature_providers_text",
        ),
        ("home.feature_credits_title", "home.feature_credits_text"),
    ];
    let body = html! {
        section.hero {
            p.eyebrow { (v.t("home.eyebrow")) }
            h1 { (v.t("home.title")) }
            p.lead { (v.t("home.lead")) }
            div.actions {
                a.btn.btn-primary.btn-lg href="/pricing" { (v.t("home.see_pricing")) }
                @if v.user.is_some() {
                    a.btn.btn-secondary.btn-lg href="/dashboard" { (v.t("home.open_dashboard")) }
                } @else {
                    a.btn.btn-secondary.btn-lg href="/signup" { (v.t("home.create_account")) }
                }
            }
        }
        section.feature-grid {
            @for (title, text) in features {
                article.card.feature {
                    h2 { (v.t(title)) }
                    p { (v.t(text)) }
                }
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("home.page_title"),
        Nav::Home,
        body,
    ))
}
