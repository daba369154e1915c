//! `/admin/pricing` (administrators only; anyone else signed in gets 403): the dynamic plans
//! with create, edit, hide, delete and reorder, "Import from config", and which
//! `PRICING_MODE` is live. With `PRICING_MODE=static` the page still works and says that
//! `/pricing` shows the static catalog.

pub(crate) mod accounts;
pub(crate) mod api_keys;
pub(crate) mod audit;
pub(crate) mod charts;
pub(crate) mod console;
pub(crate) mod customers;
pub(crate) mod endpoints;
mod form;
pub(crate) mod inbox;
pub(crate) mod orders;
pub(crate) mod overview;
pub(crate) mod promo_codes;

use std::collections::BTreeMap;
use std::sync::Arc;

use application::ports::StoredPlan;
use application::use_cases::manage_plans::ManagePlansError;
use application::use_cases::plans::PricingMode;
use domain::plan::Prominence;
use domain::{Locale, PlanId, Visibility};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;

use self::form::{FieldErrors, PlanForm};
use super::{parse_id, plan_type_key, provider_key};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect, sign_in_then};

/// Anyone but an administrator stops here: a sign-in for visitors, 403 for users.
pub(crate) fn gate(v: &Visitor) -> Result<(), PageError> {
    match &v.user {
        None => Err(PageError::SignInRequired(sign_in_then(&v.here()))),
        Some(_) if !v.is_admin() => Err(PageError::Forbidden),
        Some(_) => Ok(()),
    }
}

async fn dynamic_plans(state: &PageState) -> Result<Vec<StoredPlan>, PageError> {
    Ok(state.ports.admin.admin_plans().await?)
}

fn manage_error(e: ManagePlansError) -> PageError {
    match e {
        ManagePlansError::NotFound => PageError::NotFound,
        ManagePlansError::Infra(infra) => infra.into(),
        ManagePlansError::Invalid(_) | ManagePlansError::Exists => PageError::BadRequest,
    }
}

/// `GET /admin/pricing`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    let plans = dynamic_plans(&state).await?;
    let mode = state.ports.plans.pricing_mode();
    let body = html! {
        (console::sections(&v, "/admin/pricing"))
        section.page-intro.with-actions {
            div {
                h1 { (v.t("admin.title")) }
                p.muted { (v.t("admin.lead")) }
            }
            div.actions {
                form method="post" action="/admin/pricing/import" data-busy {
                    (csrf_field(&v))
                    button.btn.btn-secondary type="submit" data-testid="import" {
                        (v.t("admin.import"))
                    }
                }
                a.btn.btn-primary href="/admin/pricing/new" data-testid="new-plan" {
                    (v.t("admin.new_plan"))
                }
            }
        }
        (mode_banner(&v, mode))
        (notice(&v))
        section.card.section-card {
            @if plans.is_empty() {
                div.empty-state {
                    p { (v.t("admin.empty")) }
                }
            } @else {
                div.table-wrap { (plan_table(&v, &plans)) }
                (reorder_form(&v))
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("admin.title"),
        Nav::Admin,
        body,
    ))
}

fn mode_banner(v: &Visitor, mode: PricingMode) -> Markup {
    let (tone, key) = match mode {
        PricingMode::Dynamic => ("alert-info", "admin.mode_dynamic"),
        PricingMode::Static => ("alert-warning", "admin.mode_static"),
    };
    html! {
        div.alert.(tone) data-testid="pricing-mode" {
            strong { "PRICING_MODE = " code { (mode.as_str()) } }
            " — " (v.t(key))
        }
    }
}

fn notice(v: &Visitor) -> Markup {
    let key = match v.query("notice") {
        Some("created") => "admin.notice_created",
        Some("updated") => "admin.notice_updated",
        Some("deleted") => "admin.notice_deleted",
        Some("hidden") => "admin.notice_hidden",
        Some("shown") => "admin.notice_shown",
        Some("moved") => "admin.notice_moved",
        Some("imported") => {
            let created = v.query("created").unwrap_or("0");
            let updated = v.query("updated").unwrap_or("0");
            let text = v.tf(
                "admin.notice_imported",
                &[("created", created), ("updated", updated)],
            );
            return html! { div.alert.alert-success role="status" data-testid="notice" { (text) } };
        }
        _ => return html! {},
    };
    html! { div.alert.alert-success role="status" data-testid="notice" { (v.t(key)) } }
}

fn plan_table(v: &Visitor, plans: &[StoredPlan]) -> Markup {
    html! {
        table.table.admin-table data-testid="admin-plans" {
            thead { tr {
                th scope="col" { (v.t("admin.col_order")) }
                th scope="col" { (v.t("admin.col_plan")) }
                th scope="col" { (v.t("admin.col_type")) }
                th.num scope="col" { (v.t("admin.col_price")) }
                th scope="col" { (v.t("admin.col_locales")) }
                th scope="col" { (v.t("admin.col_status")) }
                th scope="col" { span.sr-only { (v.t("admin.col_actions")) } }
            } }
            tbody {
                @for (index, stored) in plans.iter().enumerate() {
                    (plan_row(v, stored, index + 1))
                }
            }
        }
    }
}

fn plan_row(v: &Visitor, stored: &StoredPlan, position: usize) -> Markup {
    let plan = &stored.plan;
    let id = plan.id().as_str();
    let action = |what: &str| format!("/admin/pricing/plans/{id}/{what}");
    let hidden = plan.visibility() == Visibility::Hidden;
    let locales: Vec<&str> = stored.listing.locales.iter().map(Locale::as_str).collect();
    html! {
        tr data-plan-id=(id) {
            td.order-cell {
                input.position-input type="number" form="reorder" name={"position." (id)}
                    value=(position) min="1" max="9999" inputmode="numeric"
                    aria-label=(v.tf("admin.position_of", &[("id", id)]))
                    data-testid={"position-" (id)};
            }
            td {
                span.cell-title { (plan.text_for(&v.lang.locale()).name) }
                span.cell-sub { code { (id) } " · " (v.t(provider_key(plan.provider()))) }
            }
            td { (v.t(plan_type_key(plan.plan_type()))) }
            td.num.nowrap {
                @if let Some(original) = plan.original_price() {
                    del.price-was { (format::money(original, v.lang)) } " "
                }
                (format::money(plan.price(), v.lang))
            }
            td.nowrap {
                @if locales.is_empty() {
                    span.muted { (v.t("admin.all_locales")) }
                } @else {
                    (locales.join(", "))
                }
            }
            td {
                @if hidden { span.badge.badge-neutral { (v.t("admin.hidden")) } }
                @else { span.badge.badge-success { (v.t("admin.listed")) } }
                @if plan.prominence() == Prominence::Recommended {
                    " " span.badge.badge-primary { (v.t("admin.recommended")) }
                }
            }
            td.actions-cell {
                a.btn.btn-secondary.btn-sm href={"/admin/pricing/plans/" (id) "/edit"} {
                    (v.t("admin.edit"))
                }
                @if hidden {
                    (row_action(v, &action("unhide"), "admin.show", "btn-ghost", None))
                } @else {
                    (row_action(v, &action("hide"), "admin.hide", "btn-ghost", None))
                }
                (row_action(v, &action("delete"), "admin.delete", "btn-danger-ghost",
                    Some("admin.confirm_delete")))
            }
        }
    }
}

/// The one form every position field belongs to (`form="reorder"`): the whole new order is
/// sent in one request.
fn reorder_form(v: &Visitor) -> Markup {
    html! {
        form #reorder.reorder-form method="post" action="/admin/pricing/reorder" {
            (csrf_field(v))
            p.hint { (v.t("admin.reorder_hint")) }
            button.btn.btn-secondary.btn-sm type="submit" data-testid="save-order" {
                (v.t("admin.save_order"))
            }
        }
    }
}

fn row_action(
    v: &Visitor,
    action: &str,
    label: &str,
    variant: &str,
    confirm: Option<&str>,
) -> Markup {
    html! {
        form.inline-form method="post" action=(action) data-confirm=[confirm.map(|k| v.t(k))] {
            (csrf_field(v))
            button.btn.btn-sm.(variant) type="submit" { (v.t(label)) }
        }
    }
}

/// `GET /admin/pricing/new`.
pub(crate) async fn new_form(_state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    Ok(form_page(
        &v,
        &PlanForm::blank(),
        &FieldErrors::new(),
        None,
        StatusCode::OK,
    ))
}

/// `GET /admin/pricing/plans/{id}/edit`.
pub(crate) async fn edit_form(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    gate(&v)?;
    let id = request.raw_path_param("id").unwrap_or_default();
    let stored = find(&state, id).await?;
    Ok(form_page(
        &v,
        &PlanForm::from_stored(&stored),
        &FieldErrors::new(),
        Some(id),
        StatusCode::OK,
    ))
}

async fn find(state: &PageState, id: &str) -> Result<StoredPlan, PageError> {
    dynamic_plans(state)
        .await?
        .into_iter()
        .find(|p| p.plan.id().as_str() == id)
        .ok_or(PageError::NotFound)
}

fn form_page(
    v: &Visitor,
    plan: &PlanForm,
    errors: &FieldErrors,
    editing: Option<&str>,
    status: StatusCode,
) -> poem::Response {
    let (title, action) = match editing {
        Some(id) => (
            v.tf("admin.edit_title", &[("id", id)]),
            format!("/admin/pricing/plans/{id}"),
        ),
        None => (
            v.t("admin.new_title").to_owned(),
            "/admin/pricing".to_owned(),
        ),
    };
    let body = html! {
        nav.breadcrumb { a href="/admin/pricing" { "← " (v.t("admin.back")) } }
        section.page-intro { h1 { (title) } }
        section.card.section-card { (form::render(v, plan, errors, &action, editing.is_some())) }
    };
    layout::page(v, status, &title, Nav::Admin, body)
}

/// `POST /admin/pricing`: create a plan.
pub(crate) async fn create(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let values: BTreeMap<String, String> = read_form(&v, &mut request).await?;
    gate(&v)?;
    let plan = PlanForm::submitted(values);
    let plans = dynamic_plans(&state).await?;
    let next_order = plans
        .iter()
        .map(|p| p.listing.sort_order)
        .max()
        .map_or(0, |m| m.saturating_add(1));
    let input = match plan.to_input(v.lang, None, next_order) {
        Ok(input) => input,
        Err(errors) => {
            return Ok(form_page(
                &v,
                &plan,
                &errors,
                None,
                StatusCode::UNPROCESSABLE_ENTITY,
            ));
        }
    };
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    match state.ports.admin.create_plan(&admin, &input).await {
        Ok(_) => Ok(redirect("/admin/pricing?notice=created")),
        Err(ManagePlansError::Exists) => {
            let errors = single_error("id", v.t("admin.error.exists"));
            Ok(form_page(
                &v,
                &plan,
                &errors,
                None,
                StatusCode::UNPROCESSABLE_ENTITY,
            ))
        }
        Err(ManagePlansError::Invalid(list)) => {
            let errors = raw_errors(list);
            Ok(form_page(
                &v,
                &plan,
                &errors,
                None,
                StatusCode::UNPROCESSABLE_ENTITY,
            ))
        }
        Err(e) => Err(manage_error(e)),
    }
}

/// `POST /admin/pricing/plans/{id}`: replace a plan (its id and position stay).
pub(crate) async fn update(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let mut values: BTreeMap<String, String> = read_form(&v, &mut request).await?;
    gate(&v)?;
    let id = request.raw_path_param("id").unwrap_or_default().to_owned();
    let stored = find(&state, &id).await?;
    values.insert("id".into(), id.clone());
    let plan = PlanForm::submitted(values);
    let input = match plan.to_input(v.lang, Some(&stored), stored.listing.sort_order) {
        Ok(input) => input,
        Err(errors) => {
            return Ok(form_page(
                &v,
                &plan,
                &errors,
                Some(&id),
                StatusCode::UNPROCESSABLE_ENTITY,
            ));
        }
    };
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    match state.ports.admin.update_plan(&admin, &id, &input).await {
        Ok(_) => Ok(redirect("/admin/pricing?notice=updated")),
        Err(ManagePlansError::Invalid(list)) => Ok(form_page(
            &v,
            &plan,
            &raw_errors(list),
            Some(&id),
            StatusCode::UNPROCESSABLE_ENTITY,
        )),
        Err(e) => Err(manage_error(e)),
    }
}

fn single_error(field: &str, message: &str) -> FieldErrors {
    let mut errors = FieldErrors::new();
    errors.insert(field.to_owned(), vec![message.to_owned()]);
    errors
}

/// Errors the use case found that the form's own checks did not (shown as the use case words them).
fn raw_errors(list: Vec<application::use_cases::manage_plans::FieldError>) -> FieldErrors {
    let mut errors = FieldErrors::new();
    for e in list {
        errors.entry(e.field).or_default().push(e.message);
    }
    errors
}

/// `POST /admin/pricing/plans/{id}/{hide|unhide|delete|up|down}`.
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    gate(&v)?;
    let raw = request.raw_path_param("id").unwrap_or_default();
    // A malformed id is not one of the dynamic plans.
    let id = parse_id(raw, PlanId::new).ok_or(PageError::NotFound)?;
    let action = request
        .raw_path_param("action")
        .unwrap_or_default()
        .to_owned();
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let ports = &state.ports;
    let notice = match action.as_str() {
        "hide" => ports
            .admin
            .set_plan_hidden(&admin, &id, true)
            .await
            .map(|_| "hidden"),
        "unhide" => ports
            .admin
            .set_plan_hidden(&admin, &id, false)
            .await
            .map(|_| "shown"),
        "delete" => ports
            .admin
            .delete_plan(&admin, &id)
            .await
            .map(|()| "deleted"),
        "up" | "down" => {
            let ids = moved(&dynamic_plans(&state).await?, &id, action == "up")
                .ok_or(PageError::NotFound)?;
            ports
                .admin
                .reorder_plans(&admin, &ids)
                .await
                .map(|()| "moved")
        }
        _ => return Err(PageError::NotFound),
    };
    Ok(redirect(&format!(
        "/admin/pricing?notice={}",
        notice.map_err(manage_error)?
    )))
}

/// `POST /admin/pricing/reorder`: every plan's new position (`position.<id>` = 1, 2, …) in one
/// request; a plan given a new position takes that place, the others keep their relative order.
pub(crate) async fn reorder(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let fields: Vec<(String, String)> = read_form(&v, &mut request).await?;
    gate(&v)?;
    let plans = dynamic_plans(&state).await?;
    let ids = reordered(&plans, &fields).ok_or(PageError::BadRequest)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    state
        .ports
        .admin
        .reorder_plans(&admin, &ids)
        .await
        .map_err(manage_error)?;
    Ok(redirect("/admin/pricing?notice=moved"))
}

/// Every plan id in the order the admin meant; `None` when a position is not a whole number
/// from 1 to 9999 or names no plan.
///
/// A plan whose submitted position differs from its current place was moved: it takes that
/// place (the nearest free one after it when two moved plans ask for the same, the last one
/// past the end). The plans the admin left alone fill the remaining places by their submitted
/// position, then their current place. So typing 1 for a plan makes it first, although
/// another plan still shows 1.
fn reordered(plans: &[StoredPlan], fields: &[(String, String)]) -> Option<Vec<PlanId>> {
    let mut placed: Vec<(u32, usize, PlanId)> = plans
        .iter()
        .enumerate()
        .map(|(index, p)| (current_position(index), index, p.plan.id().clone()))
        .collect();
    for (name, value) in fields {
        let Some(id) = name.strip_prefix("position.") else {
            continue;
        };
        let position: u32 = value
            .trim()
            .parse()
            .ok()
            .filter(|p| (1..=9999).contains(p))?;
        placed.iter_mut().find(|(_, _, i)| i.as_str() == id)?.0 = position;
    }
    placed.sort();
    let (moved, kept): (Vec<_>, Vec<_>) = placed
        .into_iter()
        .partition(|(position, index, _)| *position != current_position(*index));
    let mut slots: Vec<Option<PlanId>> = vec![None; plans.len()];
    for (position, _, id) in moved {
        let wanted = usize::try_from(position)
            .unwrap_or(usize::MAX)
            .saturating_sub(1);
        let free = (wanted..slots.len())
            .find(|s| slots.get(*s).is_some_and(Option::is_none))
            .or_else(|| slots.iter().rposition(Option::is_none))?;
        *slots.get_mut(free)? = Some(id);
    }
    let mut rest = kept.into_iter().map(|(_, _, id)| id);
    Some(
        slots
            .into_iter()
            .filter_map(|slot| slot.or_else(|| rest.next()))
            .collect(),
    )
}

/// The position a plan at `index` of the listing shows in the Order column.
fn current_position(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

/// Every plan id in listing order with `id` swapped with its neighbour (`None`: unknown id).
fn moved(plans: &[StoredPlan], id: &PlanId, up: bool) -> Option<Vec<PlanId>> {
    let mut ids: Vec<PlanId> = plans.iter().map(|p| p.plan.id().clone()).collect();
    let at = ids.iter().position(|i| i == id)?;
    let other = if up {
        at.checked_sub(1)
    } else {
        Some(at + 1).filter(|o| *o < ids.len())
    };
    if let Some(other) = other {
        ids.swap(at, other);
    }
    Some(ids)
}

/// `POST /admin/pricing/import`: copy the static catalog into the dynamic table.
pub(crate) async fn import(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let report = state
        .ports
        .admin
        .import_static_plans(&admin)
        .await
        .map_err(manage_error)?;
    Ok(redirect(&format!(
        "/admin/pricing?notice=imported&created={}&updated={}",
        report.created, report.updated
    )))
}
