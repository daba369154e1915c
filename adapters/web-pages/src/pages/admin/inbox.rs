//! `/admin/webhooks`: the webhook inbox as Tally recorded it — every provider event with its
//! outcome (applied, duplicate, mismatch, unknown order, foreign merchant, stale, …), the detail
//! for admins and the raw body — filtered by provider and outcome, newest first, a page at a
//! time. Each event has a Replay button: `POST …/{id}/confirm` says what a replay does and
//! `POST …/{id}/replay` replays it through the pipeline
//! ([`application::use_cases::admin_console::ReplayError`]), both with the CSRF token.

use std::sync::Arc;

use std::collections::BTreeMap;

use application::ports::{InboxFilter, RecordedEvent};
use application::use_cases::admin_console::ReplayError;
use domain::{EventOutcome, ProviderId};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::pages::provider_key;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

const PATH: &str = "/admin/webhooks";

/// `GET /admin/webhooks?provider=&outcome=&cursor=`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let provider = match v.query("provider").filter(|p| !p.is_empty()) {
        Some(code) => Some(
            code.parse::<ProviderId>()
                .map_err(|_| PageError::BadRequest)?,
        ),
        None => None,
    };
    let outcome = match v.query("outcome").filter(|o| !o.is_empty()) {
        Some(code) => Some(EventOutcome::parse(code).ok_or(PageError::BadRequest)?),
        None => None,
    };
    let filter = InboxFilter { provider, outcome };
    let page = state
        .ports
        .admin
        .webhook_inbox(&filter, &console::page_after(&v))
        .await
        .map_err(console::list_error)?;
    let filters = [
        ("provider", v.query("provider")),
        ("outcome", outcome.map(EventOutcome::code)),
    ];
    let body = html! {
        (console::sections(&v, PATH))
        section.page-intro {
            h1 { (v.t("console.inbox_title")) }
            p.muted { (v.t("console.inbox_lead")) }
        }
        (console::notice(&v, &["replayed"]))
        (filter_form(&v, &filter))
        section.card.section-card {
            @if page.items.is_empty() {
                p.muted { (v.t("console.inbox_empty")) }
            } @else {
                div.table-wrap { (event_table(&v, &page.items)) }
            }
            (console::pager(&v, PATH, &filters, page.next_cursor.as_deref()))
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("console.inbox_title"),
        Nav::Admin,
        body,
    ))
}

fn filter_form(v: &Visitor, filter: &InboxFilter) -> Markup {
    let providers: Vec<(String, String)> = ProviderId::ALL
        .iter()
        .map(|p| (p.as_str().to_owned(), v.t(provider_key(*p)).to_owned()))
        .collect();
    let outcomes: Vec<(String, String)> = EventOutcome::ALL
        .iter()
        .map(|o| (o.code().to_owned(), o.code().to_owned()))
        .collect();
    html! {
        form.card.section-card.filter-bar method="get" action=(PATH) role="search" {
            (console::select(v, "provider", "console.col_provider", &providers,
                filter.provider.map(ProviderId::as_str)))
            (console::select(v, "outcome", "console.col_outcome", &outcomes,
                filter.outcome.map(EventOutcome::code)))
            div.form-actions {
                button.btn.btn-secondary type="submit" data-testid="filter" {
                    (v.t("console.filter"))
                }
            }
        }
    }
}

fn outcome_badge(outcome: EventOutcome) -> Markup {
    let tone = match outcome {
        EventOutcome::Applied => "badge-success",
        EventOutcome::Duplicate | EventOutcome::DuplicateState | EventOutcome::Ignored => {
            "badge-neutral"
        }
        EventOutcome::Mismatch | EventOutcome::ForeignMerchant | EventOutcome::RefundRefused => {
            "badge-danger"
        }
        _ => "badge-warning",
    };
    html! { span.badge.(tone) data-outcome=(outcome.code()) { (outcome.code()) } }
}

fn event_table(v: &Visitor, events: &[RecordedEvent]) -> Markup {
    html! {
        table.table.table-stack data-testid="inbox" {
            thead { tr {
                th scope="col" { (v.t("console.col_received")) }
                th scope="col" { (v.t("console.col_provider")) }
                th scope="col" { (v.t("console.col_event")) }
                th scope="col" { (v.t("console.col_outcome")) }
                th scope="col" { (v.t("console.col_detail")) }
            } }
            tbody {
                @for event in events {
                    @let entry = &event.entry;
                    tr data-event-id=(entry.event_id) {
                        td data-label=(v.t("console.col_received")) {
                            span.nowrap { (format::date_time(entry.received_at, v.lang)) }
                        }
                        td data-label=(v.t("console.col_provider")) {
                            span { (v.t(provider_key(entry.provider))) }
                        }
                        td data-label=(v.t("console.col_event")) {
                            span {
                                span.cell-title { (entry.event_type) }
                                span.cell-sub { code { (entry.event_id) } }
                            }
                        }
                        td data-label=(v.t("console.col_outcome")) {
                            span { (outcome_badge(entry.outcome)) }
                        }
                        td data-label=(v.t("console.col_detail")) {
                            div {
                                @if let Some(detail) = &entry.detail { p.cell-sub { (detail) } }
                                details.raw-body {
                                    summary { (v.t("console.raw_body")) }
                                    pre { code { (entry.payload) } }
                                }
                                // Events learnt by reconciliation have no body to replay.
                                @if !entry.payload.is_empty() { (replay_button(v, event)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The Replay button of one event: it asks for a confirmation first.
fn replay_button(v: &Visitor, event: &RecordedEvent) -> Markup {
    let entry = &event.entry;
    html! {
        form.inline-form method="post" action={(PATH) "/" (event.id) "/confirm"} {
            (csrf_field(v))
            input type="hidden" name="eventId" value=(entry.event_id);
            input type="hidden" name="outcome" value=(entry.outcome.code());
            input type="hidden" name="provider" value=(entry.provider.as_str());
            button.btn.btn-sm.btn-secondary type="submit" data-testid="replay" {
                (v.t("console.replay"))
            }
        }
    }
}

type Fields = BTreeMap<String, String>;

fn field<'a>(fields: &'a Fields, name: &str) -> &'a str {
    fields.get(name).map_or("", |v| v.trim())
}

/// `POST /admin/webhooks/{id}/{step}`: `confirm` or `replay`.
pub(crate) async fn step(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    let step = request
        .raw_path_param("step")
        .unwrap_or_default()
        .to_owned();
    match step.as_str() {
        "confirm" => confirm(state, v, request).await,
        "replay" => replay(state, v, request).await,
        _ => Err(PageError::NotFound),
    }
}

/// `POST /admin/webhooks/{id}/confirm`: what a replay does, and Confirm.
async fn confirm(_state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let fields: Fields = read_form(&v, &mut request).await?;
    gate(&v)?;
    let id: i64 = request
        .raw_path_param("id")
        .and_then(|id| id.parse().ok())
        .ok_or(PageError::NotFound)?;
    let provider = field(&fields, "provider")
        .parse::<ProviderId>()
        .map_err(|_| PageError::BadRequest)?;
    let question = v.tf(
        "console.confirm_replay",
        &[
            ("provider", v.t(provider_key(provider))),
            ("event", field(&fields, "eventId")),
            ("outcome", field(&fields, "outcome")),
        ],
    );
    let body = html! {
        (console::sections(&v, PATH))
        section.card.section-card.confirm-card data-testid="confirm" {
            h1 { (v.t("console.confirm_title")) }
            p.lead { (question) }
            form.stack method="post" action={(PATH) "/" (id) "/replay"} {
                (csrf_field(&v))
                div.form-actions {
                    a.btn.btn-ghost href=(PATH) { (v.t("console.replay_back")) }
                    button.btn.btn-primary type="submit" data-testid="confirm-action" {
                        (v.t("console.confirm_do"))
                    }
                }
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("console.confirm_title"),
        Nav::Admin,
        body,
    ))
}

/// `POST /admin/webhooks/{id}/replay`: replay the confirmed event, then back to the inbox.
async fn replay(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let _: Fields = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let id: i64 = request
        .raw_path_param("id")
        .and_then(|id| id.parse().ok())
        .ok_or(PageError::NotFound)?;
    match state.ports.admin.replay_webhook_event(&admin, id).await {
        Ok(_) => Ok(redirect(&format!("{PATH}?notice=replayed"))),
        Err(ReplayError::NotFound) => Err(PageError::NotFound),
        Err(ReplayError::Infra(e)) => Err(e.into()),
        Err(e) => Ok(refused(&v, &e.to_string())),
    }
}

fn refused(v: &Visitor, reason: &str) -> poem::Response {
    let body: Markup = html! {
        (console::sections(v, PATH))
        section.card.section-card data-testid="refused" {
            h1 { (v.t("console.refused_title")) }
            div.alert.alert-danger role="alert" { (reason) }
            a.btn.btn-secondary href=(PATH) { (v.t("console.replay_back")) }
        }
    };
    layout::page(
        v,
        StatusCode::UNPROCESSABLE_ENTITY,
        v.t("console.refused_title"),
        Nav::Admin,
        body,
    )
}
