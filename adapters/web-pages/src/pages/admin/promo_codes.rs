//! `/admin/promo-codes`: the promo codes — create one (its code, credits, their category and
//! expiry, a validity window, limits in total and per user, new users only, a plan its
//! redeemers must hold), see each code's redemptions against its limit, switch one off or on
//! again. Both changes are audited (`promo_code.created`, `promo_code.updated`).

use std::sync::Arc;

use application::ports::StoredPromoCode;
use application::use_cases::admin_console::{PromoAdminError, PromoDraft};
use domain::{GrantCategory, Timestamp};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;
use serde::Deserialize;

use super::{console, gate};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

const PATH: &str = "/admin/promo-codes";

/// What the create form posts.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PromoForm {
    #[serde(default)]
    code: String,
    #[serde(default)]
    credits: String,
    #[serde(default)]
    category: String,
    #[serde(rename = "expiresAfterDays", default)]
    expires_after_days: String,
    #[serde(rename = "maxRedemptions", default)]
    max_redemptions: String,
    #[serde(rename = "perUser", default)]
    per_user: String,
    #[serde(rename = "validUntil", default)]
    valid_until: String,
    #[serde(rename = "newUsersOnly", default)]
    new_users_only: Option<String>,
    #[serde(rename = "planId", default)]
    plan_id: String,
}

/// `GET /admin/promo-codes`.
pub(crate) async fn list(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    gate(&v)?;
    render(&state, &v, None, StatusCode::OK).await
}

fn text(raw: &str) -> Option<String> {
    Some(raw.trim().to_owned()).filter(|t| !t.is_empty())
}

/// A whole number the form holds, or the field it is wrong in.
fn number(raw: &str, field: &'static str) -> Result<Option<u32>, &'static str> {
    text(raw)
        .map(|t| t.parse::<u32>().map_err(|_| field))
        .transpose()
}

/// The draft the form describes; the field in error otherwise.
fn draft_of(form: &PromoForm) -> Result<PromoDraft, &'static str> {
    let valid_until = text(&form.valid_until)
        .map(|day| {
            chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| Timestamp::from_unix_millis(t.and_utc().timestamp_millis()))
                .ok_or("validUntil")
        })
        .transpose()?;
    Ok(PromoDraft {
        code: form.code.clone(),
        credits: form.credits.clone(),
        category: text(&form.category),
        expires_after_days: number(&form.expires_after_days, "expiresAfterDays")?,
        valid_from: None,
        valid_until,
        max_redemptions: number(&form.max_redemptions, "maxRedemptions")?,
        per_user: number(&form.per_user, "perUser")?,
        new_users_only: form.new_users_only.is_some(),
        plan_id: text(&form.plan_id),
    })
}

/// `POST /admin/promo-codes`: create a code; the form again with what is wrong otherwise.
pub(crate) async fn create(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: PromoForm = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let made = match draft_of(&form) {
        Ok(draft) => state.ports.admin.create_promo_code(&admin, &draft).await,
        Err(field) => Err(PromoAdminError::Invalid {
            field,
            message: String::new(),
        }),
    };
    let error = match made {
        Ok(_) => return Ok(redirect(&format!("{PATH}?notice=promo_created"))),
        Err(PromoAdminError::Invalid { field, .. }) => {
            v.tf("console.promo_invalid", &[("field", field)])
        }
        Err(PromoAdminError::Exists) => v.t("console.promo_exists").to_owned(),
        Err(PromoAdminError::NotFound) => return Err(PageError::NotFound),
        Err(PromoAdminError::Infra(e)) => return Err(e.into()),
    };
    render(&state, &v, Some(&error), StatusCode::UNPROCESSABLE_ENTITY).await
}

/// `POST /admin/promo-codes/{id}/{disable,enable}`.
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let id = request.raw_path_param("id").unwrap_or_default().to_owned();
    let (active, notice) = match request.raw_path_param("action") {
        Some("disable") => (false, "promo_disabled"),
        Some("enable") => (true, "promo_enabled"),
        _ => return Err(PageError::NotFound),
    };
    match (state.ports.admin)
        .set_promo_code_active(&admin, &id, active)
        .await
    {
        Ok(_) => Ok(redirect(&format!("{PATH}?notice={notice}"))),
        Err(PromoAdminError::Infra(e)) => Err(e.into()),
        Err(_) => Err(PageError::NotFound),
    }
}

async fn render(
    state: &PageState,
    v: &Visitor,
    error: Option<&str>,
    status: StatusCode,
) -> PageResult {
    let codes = state.ports.admin.promo_codes().await?;
    let body = html! {
        (console::sections(v, PATH))
        section.page-intro {
            h1 { (v.t("console.promo_title")) }
            p.muted { (v.t("console.promo_lead")) }
        }
        (console::notice(v, &["promo_created", "promo_disabled", "promo_enabled"]))
        section.card.section-card {
            h2 { (v.t("console.promo_new")) }
            (create_form(v, error))
        }
        section.card.section-card {
            h2 { (v.t("console.promo_list")) }
            @if codes.is_empty() {
                p.muted { (v.t("console.promo_empty")) }
            } @else {
                div.table-wrap { (code_table(v, &codes)) }
            }
        }
    };
    Ok(layout::page(
        v,
        status,
        v.t("console.promo_title"),
        Nav::Admin,
        body,
    ))
}

fn field(v: &Visitor, (id, label): (&str, &str), input: Markup) -> Markup {
    html! {
        div.field {
            label for=(id) { (v.t(label)) }
            (input)
        }
    }
}

fn create_form(v: &Visitor, error: Option<&str>) -> Markup {
    let number = |id: &str, name: &str, min: u32, max: u32| {
        html! { input id=(id) type="number" name=(name) min=(min) max=(max); }
    };
    html! {
        form.stack method="post" action=(PATH) data-busy data-testid="create-promo" {
            (csrf_field(v))
            @if let Some(error) = error {
                div.alert.alert-danger role="alert" { (error) }
            }
            div.form-grid {
                (field(v, ("promo-code", "console.promo_code"), html! {
                    input #promo-code type="text" name="code" required minlength="3"
                        maxlength="40" autocomplete="off" data-testid="promo-code";
                }))
                (field(v, ("promo-credits", "console.promo_credits"), html! {
                    input #promo-credits type="text" name="credits" required inputmode="decimal"
                        placeholder="50" data-testid="promo-credits";
                }))
                (field(v, ("promo-category", "console.promo_category"), html! {
                    select #promo-category name="category" {
                        @for category in GrantCategory::ALL {
                            option value=(category.code())
                                selected[category == GrantCategory::Promotional] {
                                (v.t(&format!("console.category_{}", category.code())))
                            }
                        }
                    }
                }))
                (field(v, ("promo-max", "console.promo_max"),
                    number("promo-max", "maxRedemptions", 1, u32::MAX)))
                (field(v, ("promo-per-user", "console.promo_per_user"),
                    number("promo-per-user", "perUser", 1, 1000)))
                (field(v, ("promo-expiry", "console.promo_expiry"),
                    number("promo-expiry", "expiresAfterDays", 1, 3650)))
                (field(v, ("promo-until", "console.promo_until"), html! {
                    input #promo-until type="date" name="validUntil";
                }))
                (field(v, ("promo-plan", "console.promo_plan"), html! {
                    input #promo-plan type="text" name="planId" maxlength="64" autocomplete="off";
                }))
            }
            label.check {
                input type="checkbox" name="newUsersOnly" value="on";
                " " (v.t("console.promo_new_users"))
            }
            div.form-actions {
                button.btn.btn-primary type="submit" data-testid="create-promo-submit" {
                    (v.t("console.promo_create"))
                }
            }
        }
    }
}

/// Who may redeem `code`, in words: new users only, holders of a plan, until a day.
fn conditions(v: &Visitor, code: &StoredPromoCode) -> String {
    let t = &code.terms;
    let mut parts = Vec::new();
    if t.new_users_only {
        parts.push(v.t("console.promo_cond_new").to_owned());
    }
    if let Some(plan) = &t.plan {
        parts.push(v.tf("console.promo_cond_plan", &[("plan", plan.as_str())]));
    }
    if let Some(until) = t.valid_until {
        let day = format::date(until, v.lang);
        parts.push(v.tf("console.promo_cond_until", &[("date", &day)]));
    }
    if parts.is_empty() {
        v.t("console.promo_cond_anyone").to_owned()
    } else {
        parts.join(" · ")
    }
}

fn code_table(v: &Visitor, codes: &[StoredPromoCode]) -> Markup {
    html! {
        table.table.table-stack data-testid="promo-codes" {
            thead { tr {
                th scope="col" { (v.t("console.promo_code")) }
                th.num scope="col" { (v.t("console.promo_credits")) }
                th scope="col" { (v.t("console.promo_category")) }
                th.num scope="col" { (v.t("console.promo_redeemed")) }
                th scope="col" { (v.t("console.promo_who")) }
                th scope="col" { (v.t("console.col_status")) }
                th scope="col" { span.sr-only { (v.t("console.col_actions")) } }
            } }
            tbody {
                @for code in codes { (code_row(v, code)) }
            }
        }
    }
}

fn code_row(v: &Visitor, code: &StoredPromoCode) -> Markup {
    let t = &code.terms;
    let redeemed = match t.max_redemptions {
        Some(max) => format!(
            "{} / {}",
            format::count(code.redeemed.into()),
            format::count(max.into())
        ),
        None => format::count(code.redeemed.into()),
    };
    let (action, label, style) = if code.active {
        ("disable", "console.promo_disable", "btn-danger-ghost")
    } else {
        ("enable", "console.promo_enable", "btn-secondary")
    };
    html! {
        tr data-promo-code=(code.code) {
            td data-label=(v.t("console.promo_code")) { code { (code.code) } }
            td.num data-label=(v.t("console.promo_credits")) { span { (format::credits(t.credits)) } }
            td data-label=(v.t("console.promo_category")) {
                span { (v.t(&format!("console.category_{}", t.category.code()))) }
            }
            td.num data-label=(v.t("console.promo_redeemed")) { span { (redeemed) } }
            td data-label=(v.t("console.promo_who")) { span { (conditions(v, code)) } }
            td data-label=(v.t("console.col_status")) {
                @if code.active {
                    span.badge.badge-success { (v.t("console.promo_active")) }
                } @else {
                    span.badge.badge-neutral { (v.t("console.promo_inactive")) }
                }
            }
            td.actions-cell {
                form.inline-form method="post" action={(PATH) "/" (code.id) "/" (action)} {
                    (csrf_field(v))
                    button.btn.btn-sm.(style) type="submit" data-testid={"promo-" (action)} {
                        (v.t(label))
                    }
                }
            }
        }
    }
}
