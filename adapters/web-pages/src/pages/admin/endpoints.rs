//! `/admin/webhook-endpoints`: where Tally sends host events — add an endpoint (its signing
//! secret shown once), enable or disable it, rotate its secret (the new one shown once; the old
//! one keeps signing for a day), delete it, and per endpoint its deliveries with "send again".
//!
//! With webhook delivery not wired (`tally serve` always wires it; a bare service may not) the
//! page says so instead of offering forms that cannot work.

use std::sync::Arc;

use application::host_events::HostEventKind;
use application::pagination::PageRequest;
use application::ports::{DeliveryRecord, RedeliveryTarget, WebhookEndpoint};
use application::use_cases::webhook_endpoints::{
    CreatedEndpoint, EndpointUpdate, WebhookEndpointError,
};
use domain::WebhookEndpointId;
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::pages::parse_id;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

const PATH: &str = "/admin/webhook-endpoints";

/// Webhook delivery is wired in this process, else the page's actions do not exist (404).
fn require_delivery(state: &PageState) -> Result<(), PageError> {
    if state.ports.host_events.delivery_configured() {
        Ok(())
    } else {
        Err(PageError::NotFound)
    }
}

/// The endpoint id in the path, parsed once, here: a malformed one is answered like an unknown
/// one (404).
fn endpoint_id(request: &Request) -> Result<WebhookEndpointId, PageError> {
    let raw = request.raw_path_param("id").unwrap_or_default();
    parse_id(raw, WebhookEndpointId::new).ok_or(PageError::NotFound)
}

fn endpoint_error(e: WebhookEndpointError) -> PageError {
    match e {
        WebhookEndpointError::NotFound
        | WebhookEndpointError::DeliveryNotFound
        | WebhookEndpointError::NotConfigured => PageError::NotFound,
        WebhookEndpointError::Infra(infra) => infra.into(),
        _ => PageError::BadRequest,
    }
}

/// `GET /admin/webhook-endpoints`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    render(&state, &v, None, None, StatusCode::OK).await
}

/// `POST /admin/webhook-endpoints`: add an endpoint and show its secret once.
pub(crate) async fn create(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let fields: Vec<(String, String)> = read_form(&v, &mut request).await?;
    gate(&v)?;
    require_delivery(&state)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let ports = &state.ports;
    let url = fields
        .iter()
        .find(|(k, _)| k == "url")
        .map_or("", |(_, value)| value.as_str());
    let types: Vec<String> = fields
        .iter()
        .filter(|(k, _)| k == "type")
        .map(|(_, value)| value.clone())
        .collect();
    match ports.host_events.create_endpoint(&admin, url, &types).await {
        Ok(created) => {
            let shown = (v.t("console.endpoint_created"), created);
            render(&state, &v, Some(shown), None, StatusCode::CREATED).await
        }
        Err(e @ (WebhookEndpointError::InvalidUrl(_) | WebhookEndpointError::TooMany)) => {
            let error = v.tf("console.endpoint_refused", &[("reason", &e.to_string())]);
            render(
                &state,
                &v,
                None,
                Some(&error),
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
        Err(e) => Err(endpoint_error(e)),
    }
}

/// `POST /admin/webhook-endpoints/{id}/{enable|disable|rotate|delete}`.
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    gate(&v)?;
    require_delivery(&state)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let ports = &state.ports;
    let id = endpoint_id(&request)?;
    let action = request.raw_path_param("action").unwrap_or_default();
    let enabled = |on: bool| EndpointUpdate {
        enabled: Some(on),
        ..EndpointUpdate::default()
    };
    let notice = match action {
        "enable" => ports
            .host_events
            .update_endpoint(&admin, id.as_str(), &enabled(true))
            .await
            .map(|_| "enabled"),
        "disable" => ports
            .host_events
            .update_endpoint(&admin, id.as_str(), &enabled(false))
            .await
            .map(|_| "disabled"),
        "delete" => ports
            .host_events
            .delete_endpoint(&admin, &id)
            .await
            .map(|()| "deleted"),
        "rotate" => {
            let rotated = ports
                .host_events
                .rotate_secret(&admin, &id)
                .await
                .map_err(endpoint_error)?;
            let shown = (v.t("console.endpoint_rotated"), rotated);
            return render(&state, &v, Some(shown), None, StatusCode::OK).await;
        }
        _ => return Err(PageError::NotFound),
    }
    .map_err(endpoint_error)?;
    Ok(redirect(&format!("{PATH}?notice=endpoint_{notice}")))
}

async fn render(
    state: &PageState,
    v: &Visitor,
    secret: Option<(&str, CreatedEndpoint)>,
    error: Option<&str>,
    status: StatusCode,
) -> PageResult {
    let configured = state.ports.host_events.delivery_configured();
    let endpoints = if configured {
        state
            .ports
            .host_events
            .list_endpoints()
            .await
            .map_err(endpoint_error)?
    } else {
        Vec::new()
    };
    let body = html! {
        (console::sections(v, PATH))
        section.page-intro {
            h1 { (v.t("console.endpoints_title")) }
            p.muted { (v.t("console.endpoints_lead")) }
        }
        (console::notice(v, &["endpoint_enabled", "endpoint_disabled", "endpoint_deleted"]))
        @if !configured {
            div.alert.alert-warning { (v.t("console.endpoints_off")) }
        } @else {
            @if let Some((said, shown)) = &secret { (secret_once(v, said, shown)) }
            section.card.section-card {
                h2 { (v.t("console.endpoints_new")) }
                (create_form(v, error))
            }
            section.card.section-card {
                h2 { (v.t("console.endpoints_list")) }
                @if endpoints.is_empty() {
                    p.muted { (v.t("console.endpoints_empty")) }
                } @else {
                    div.table-wrap { (endpoint_table(v, &endpoints)) }
                }
            }
        }
    };
    Ok(layout::page(
        v,
        status,
        v.t("console.endpoints_title"),
        Nav::Admin,
        body,
    ))
}

fn secret_once(v: &Visitor, said: &str, shown: &CreatedEndpoint) -> Markup {
    html! {
        div.alert.alert-success role="status" data-testid="endpoint-secret" {
            p { strong { (said) } " " code { (shown.endpoint.url) } }
            p { (v.t("console.keys_secret_once")) }
            p { code.secret data-testid="endpoint-secret-value" { (shown.secret.expose()) } }
        }
    }
}

fn create_form(v: &Visitor, error: Option<&str>) -> Markup {
    html! {
        form.stack method="post" action=(PATH) data-busy {
            (csrf_field(v))
            @if let Some(error) = error { div.alert.alert-danger role="alert" { (error) } }
            div.field {
                label for="endpoint-url" { (v.t("console.endpoint_url")) }
                input #endpoint-url type="url" name="url" required maxlength="2048"
                    placeholder="https://example.com/webhooks/tally" data-testid="endpoint-url";
            }
            details {
                summary { (v.t("console.endpoint_types")) }
                p.hint { (v.t("console.endpoint_types_hint")) }
                div.checks {
                    @for kind in HostEventKind::ALL {
                        label.check {
                            input type="checkbox" name="type" value=(kind.code());
                            " " code { (kind.code()) }
                        }
                    }
                }
            }
            div.form-actions {
                button.btn.btn-primary type="submit" data-testid="add-endpoint" {
                    (v.t("console.endpoint_add"))
                }
            }
        }
    }
}

fn endpoint_table(v: &Visitor, endpoints: &[WebhookEndpoint]) -> Markup {
    html! {
        table.table.table-stack data-testid="endpoints" {
            thead { tr {
                th scope="col" { (v.t("console.endpoint_url")) }
                th scope="col" { (v.t("console.endpoint_types")) }
                th scope="col" { (v.t("console.col_status")) }
                th scope="col" { span.sr-only { (v.t("console.col_actions")) } }
            } }
            tbody {
                @for endpoint in endpoints { (endpoint_row(v, endpoint)) }
            }
        }
    }
}

fn endpoint_row(v: &Visitor, endpoint: &WebhookEndpoint) -> Markup {
    let types: Vec<&str> = endpoint.event_types.iter().map(|k| k.code()).collect();
    let action = |what: &str| format!("{PATH}/{}/{what}", endpoint.id);
    html! {
        tr data-endpoint-id=(endpoint.id) {
            td data-label=(v.t("console.endpoint_url")) {
                span { a href={(PATH) "/" (endpoint.id)} { code { (endpoint.url) } } }
            }
            td data-label=(v.t("console.endpoint_types")) {
                span {
                    @if types.is_empty() { (v.t("console.endpoint_all_types")) }
                    @else { (types.join(", ")) }
                }
            }
            td data-label=(v.t("console.col_status")) {
                span {
                    @if endpoint.enabled {
                        span.badge.badge-success { (v.t("console.endpoint_enabled")) }
                    } @else {
                        span.badge.badge-neutral { (v.t("console.endpoint_disabled")) }
                        @if let Some(reason) = &endpoint.disabled_reason {
                            span.cell-sub { (reason) }
                        }
                    }
                }
            }
            td.actions-cell {
                a.btn.btn-secondary.btn-sm href={(PATH) "/" (endpoint.id)} {
                    (v.t("console.endpoint_deliveries"))
                }
                @if endpoint.enabled {
                    (post_button(v, &action("disable"), "console.endpoint_disable", None))
                } @else {
                    (post_button(v, &action("enable"), "console.endpoint_enable", None))
                }
                (post_button(v, &action("rotate"), "console.endpoint_rotate",
                    Some("console.endpoint_confirm_rotate")))
                (post_button(v, &action("delete"), "console.endpoint_delete",
                    Some("console.endpoint_confirm_delete")))
            }
        }
    }
}

fn post_button(v: &Visitor, action: &str, label: &str, confirm: Option<&str>) -> Markup {
    html! {
        form.inline-form method="post" action=(action) data-confirm=[confirm.map(|k| v.t(k))] {
            (csrf_field(v))
            button.btn.btn-sm.btn-ghost type="submit" { (v.t(label)) }
        }
    }
}

/// `GET /admin/webhook-endpoints/{id}?page=`: an endpoint's deliveries, newest first.
pub(crate) async fn deliveries(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    gate(&v)?;
    require_delivery(&state)?;
    let id = endpoint_id(&request)?;
    let hooks = &state.ports.host_events;
    let endpoint = hooks
        .list_endpoints()
        .await
        .map_err(endpoint_error)?
        .into_iter()
        .find(|e| e.id == id.as_str())
        .ok_or(PageError::NotFound)?;
    let number = v.page_number("page");
    let page = PageRequest::new(Some(number), Some(25)).map_err(|_| PageError::BadRequest)?;
    let list = hooks
        .list_deliveries(&id, None, page)
        .await
        .map_err(endpoint_error)?;
    let pages = i64::try_from(list.total_pages()).unwrap_or(i64::MAX);
    let body = html! {
        (console::sections(&v, PATH))
        nav.breadcrumb { a href=(PATH) { "← " (v.t("console.endpoints_title")) } }
        section.page-intro {
            h1 { (v.t("console.endpoint_deliveries")) }
            p.muted { code { (endpoint.url) } }
        }
        (console::notice(&v, &["redelivered"]))
        section.card.section-card {
            @if list.items.is_empty() {
                p.muted { (v.t("console.deliveries_empty")) }
            } @else {
                div.table-wrap { (delivery_table(&v, id.as_str(), &list.items)) }
            }
            nav.pager {
                @if number > 1 {
                    a.btn.btn-ghost.btn-sm href={"?page=" (number - 1)} { "← " (v.t("console.previous_page")) }
                }
                @if number < pages {
                    a.btn.btn-secondary.btn-sm href={"?page=" (number + 1)} rel="next" { (v.t("console.next_page")) " →" }
                }
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("console.endpoint_deliveries"),
        Nav::Admin,
        body,
    ))
}

fn delivery_table(v: &Visitor, endpoint_id: &str, items: &[DeliveryRecord]) -> Markup {
    html! {
        table.table.table-stack data-testid="deliveries" {
            thead { tr {
                th scope="col" { (v.t("console.col_event")) }
                th scope="col" { (v.t("console.col_status")) }
                th.num scope="col" { (v.t("console.delivery_attempts")) }
                th scope="col" { (v.t("console.delivery_last")) }
                th scope="col" { span.sr-only { (v.t("console.col_actions")) } }
            } }
            tbody {
                @for d in items {
                    tr {
                        td data-label=(v.t("console.col_event")) {
                            span {
                                span.cell-title { (d.event_type) }
                                span.cell-sub { code { (d.event_id) } " · " (format::date_time(d.created_at, v.lang)) }
                            }
                        }
                        td data-label=(v.t("console.col_status")) { span { code { (d.status.as_str()) } } }
                        td.num data-label=(v.t("console.delivery_attempts")) { span { (d.attempts) } }
                        td data-label=(v.t("console.delivery_last")) {
                            span {
                                @if let Some(code) = d.last_status_code { "HTTP " (code) " " }
                                @if let Some(ms) = d.last_latency_ms { "· " (ms) " ms " }
                                @if let Some(error) = &d.last_error { span.cell-sub { (error) } }
                            }
                        }
                        td.actions-cell {
                            (post_button(v, &format!("{PATH}/{endpoint_id}/deliveries/{}/redeliver", d.id),
                                "console.delivery_redeliver", None))
                        }
                    }
                }
            }
        }
    }
}

/// `POST /admin/webhook-endpoints/{id}/deliveries/{delivery}/redeliver`.
pub(crate) async fn redeliver(
    state: Arc<PageState>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    gate(&v)?;
    require_delivery(&state)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let id = endpoint_id(&request)?;
    let delivery = request
        .raw_path_param("delivery")
        .unwrap_or_default()
        .to_owned();
    state
        .ports
        .host_events
        .redeliver(&admin, &id, &RedeliveryTarget::Delivery(delivery))
        .await
        .map_err(endpoint_error)?;
    Ok(redirect(&format!("{PATH}/{id}?notice=redelivered")))
}
