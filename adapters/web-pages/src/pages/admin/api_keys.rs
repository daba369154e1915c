//! `/admin/api-keys`: the service API keys — create one (its secret is shown on the answer to
//! the form, once, and never again), see each key's prefix, scopes and state, revoke one.

use std::sync::Arc;

use application::accounts::{ApiKey, Scope};
use application::use_cases::api_keys::{ApiKeyError, CreatedApiKey};
use domain::ApiKeyId;
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::pages::parse_id;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

const PATH: &str = "/admin/api-keys";

/// `GET /admin/api-keys`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    render(&state, &v, None, None, StatusCode::OK).await
}

/// `POST /admin/api-keys`: create a key and show its secret once.
pub(crate) async fn create(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let fields: Vec<(String, String)> = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let name = fields
        .iter()
        .find(|(k, _)| k == "name")
        .map_or("", |(_, value)| value.as_str());
    let scopes: Vec<String> = fields
        .iter()
        .filter(|(k, _)| k == "scope")
        .map(|(_, value)| value.clone())
        .collect();
    let account = fields
        .iter()
        .find(|(k, _)| k == "account")
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty());
    match state
        .ports
        .admin
        .create_api_key(&admin, name, &scopes, account)
        .await
    {
        Ok(created) => render(&state, &v, Some(&created), None, StatusCode::CREATED).await,
        Err(ApiKeyError::Invalid(_)) => {
            let error = v.t("console.keys_invalid");
            render(
                &state,
                &v,
                None,
                Some(error),
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
        Err(ApiKeyError::NotFound) => Err(PageError::NotFound),
        Err(ApiKeyError::Infra(e)) => Err(e.into()),
    }
}

/// `POST /admin/api-keys/{id}/revoke`.
pub(crate) async fn revoke(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    // A malformed id is answered like an unknown one.
    let raw = request.raw_path_param("id").unwrap_or_default();
    let id = parse_id(raw, ApiKeyId::new).ok_or(PageError::NotFound)?;
    match state.ports.admin.revoke_api_key(&admin, &id).await {
        Ok(()) => Ok(redirect(&format!("{PATH}?notice=key_revoked"))),
        Err(ApiKeyError::NotFound | ApiKeyError::Invalid(_)) => Err(PageError::NotFound),
        Err(ApiKeyError::Infra(e)) => Err(e.into()),
    }
}

async fn render(
    state: &PageState,
    v: &Visitor,
    created: Option<&CreatedApiKey>,
    error: Option<&str>,
    status: StatusCode,
) -> PageResult {
    let keys = state
        .ports
        .admin
        .list_api_keys()
        .await
        .map_err(|e| match e {
            ApiKeyError::Infra(infra) => PageError::from(infra),
            ApiKeyError::NotFound | ApiKeyError::Invalid(_) => PageError::NotFound,
        })?;
    let body = html! {
        (console::sections(v, PATH))
        section.page-intro {
            h1 { (v.t("console.keys_title")) }
            p.muted { (v.t("console.keys_lead")) }
        }
        (console::notice(v, &["key_revoked"]))
        @if let Some(created) = created { (secret_once(v, created)) }
        section.card.section-card {
            h2 { (v.t("console.keys_new")) }
            (create_form(v, error))
        }
        section.card.section-card {
            h2 { (v.t("console.keys_list")) }
            @if keys.is_empty() {
                p.muted { (v.t("console.keys_empty")) }
            } @else {
                div.table-wrap { (key_table(v, &keys)) }
            }
        }
    };
    Ok(layout::page(
        v,
        status,
        v.t("console.keys_title"),
        Nav::Admin,
        body,
    ))
}

fn secret_once(v: &Visitor, created: &CreatedApiKey) -> Markup {
    html! {
        div.alert.alert-success role="status" data-testid="new-key" {
            p { strong { (v.tf("console.keys_created", &[("name", &created.key.name)])) } }
            p { (v.t("console.keys_secret_once")) }
            p { code.secret data-testid="new-key-secret" { (created.secret) } }
        }
    }
}

fn create_form(v: &Visitor, error: Option<&str>) -> Markup {
    html! {
        form.stack method="post" action=(PATH) data-busy {
            (csrf_field(v))
            @if let Some(error) = error {
                div.alert.alert-danger role="alert" { (error) }
            }
            div.field {
                label for="key-name" { (v.t("console.keys_name")) }
                input #key-name type="text" name="name" required maxlength="100"
                    autocomplete="off" data-testid="key-name";
            }
            div.field {
                label for="key-account" { (v.t("console.keys_account")) }
                input #key-account type="text" name="account" maxlength="64"
                    autocomplete="off" aria-describedby="key-account-hint"
                    data-testid="key-account";
                p.hint #key-account-hint { (v.t("console.keys_account_hint")) }
            }
            fieldset.checks {
                legend { (v.t("console.keys_scopes")) }
                @for scope in Scope::ALL {
                    label.check {
                        input type="checkbox" name="scope" value=(scope.code())
                            data-testid={"scope-" (scope.code())};
                        " " code { (scope.code()) }
                    }
                }
            }
            div.form-actions {
                button.btn.btn-primary type="submit" data-testid="create-key" {
                    (v.t("console.keys_create"))
                }
            }
        }
    }
}

fn key_table(v: &Visitor, keys: &[ApiKey]) -> Markup {
    html! {
        table.table.table-stack data-testid="api-keys" {
            thead { tr {
                th scope="col" { (v.t("console.keys_name")) }
                th scope="col" { (v.t("console.keys_prefix")) }
                th scope="col" { (v.t("console.keys_scopes")) }
                th scope="col" { (v.t("console.keys_account_col")) }
                th scope="col" { (v.t("console.col_created")) }
                th scope="col" { (v.t("console.col_status")) }
                th scope="col" { span.sr-only { (v.t("console.col_actions")) } }
            } }
            tbody {
                @for key in keys {
                    tr data-key-id=(key.id) {
                        td data-label=(v.t("console.keys_name")) { span { (key.name) } }
                        td data-label=(v.t("console.keys_prefix")) { code { (key.prefix) "…" } }
                        td data-label=(v.t("console.keys_scopes")) {
                            span { (key.scopes.iter().map(|s| s.code()).collect::<Vec<_>>().join(", ")) }
                        }
                        td data-label=(v.t("console.keys_account_col")) {
                            @match &key.account {
                                Some(account) => code { (account) },
                                None => span.muted { (v.t("console.keys_all_users")) },
                            }
                        }
                        td data-label=(v.t("console.col_created")) {
                            span { (format::date_time(key.created_at, v.lang)) }
                        }
                        td data-label=(v.t("console.col_status")) {
                            @if key.revoked_at.is_some() {
                                span.badge.badge-neutral { (v.t("console.keys_revoked")) }
                            } @else {
                                span.badge.badge-success { (v.t("console.keys_active")) }
                            }
                        }
                        td.actions-cell {
                            @if key.revoked_at.is_none() {
                                form.inline-form method="post"
                                    action={(PATH) "/" (key.id) "/revoke"}
                                    data-confirm=(v.t("console.keys_confirm_revoke")) {
                                    (csrf_field(v))
                                    button.btn.btn-sm.btn-danger-ghost type="submit"
                                        data-testid="revoke-key" {
                                        (v.t("console.keys_revoke"))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
