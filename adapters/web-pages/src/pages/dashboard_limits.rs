//! The spend limits of the account shown, on the dashboard's credits tab: each with what its
//! current window counted as a meter, what it counts (a feature, an API key) and when it
//! resets; for the account's owners and admins (on a personal account, its user), a form to add
//! one and a button to remove each (`POST /dashboard/limits/{add,remove}`), through the same
//! use cases as `/api/limits`.

use std::sync::Arc;

use application::accounts::User;
use application::use_cases::spend_limits::{LimitDraft, LimitsError, ShownLimit};
use domain::{AccountId, Enforcement, SpendLimitId};
use maud::{Markup, html};
use poem::Request;
use serde::Deserialize;

use super::require_user;
use crate::format;
use crate::layout::csrf_field;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect, with_query};

/// What the forms post.
#[derive(Debug, Deserialize)]
pub(crate) struct LimitForm {
    /// The team shown; empty for the user's own account.
    #[serde(rename = "accountId", default)]
    account_id: String,
    #[serde(rename = "limitId", default)]
    limit_id: String,
    #[serde(default)]
    credits: String,
    #[serde(default)]
    window: String,
    #[serde(rename = "rollingHours", default)]
    rolling_hours: String,
    #[serde(default)]
    feature: String,
    #[serde(default)]
    enforcement: String,
}

/// `POST /dashboard/limits/{add,remove}`: back to the credits tab with a notice.
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let action = request.uri().path().rsplit('/').next().unwrap_or_default();
    let action = action.to_owned();
    let form: LimitForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let account = match form.account_id.trim() {
        "" => AccountId::personal(&user.id),
        id => AccountId::new(id).map_err(|_| PageError::BadRequest)?,
    };
    let done = match action.as_str() {
        "add" => add(&state, &user, &account, &form).await,
        "remove" => {
            let id = SpendLimitId::new(form.limit_id.trim()).map_err(|_| PageError::BadRequest)?;
            (state.ports.credits)
                .remove_spend_limit(&user.id, &account, &id)
                .await
                .map(|()| "limit_removed")
        }
        _ => return Err(PageError::NotFound),
    };
    let notice = match done {
        Ok(notice) => notice,
        Err(LimitsError::Invalid { .. }) => "limit_invalid",
        Err(LimitsError::NotAllowed) => "limit_not_allowed",
        Err(LimitsError::TooMany(_)) => "limit_too_many",
        Err(LimitsError::NotFound | LimitsError::NoSuchKey | LimitsError::AccountNotFound) => {
            "limit_gone"
        }
        Err(LimitsError::Infra(infra)) => return Err(infra.into()),
    };
    let mut pairs = vec![("tab".to_owned(), "credits".to_owned())];
    if account.owner().is_none() {
        pairs.push(("account".to_owned(), account.to_string()));
    }
    pairs.push(("notice".to_owned(), notice.to_owned()));
    Ok(redirect(&with_query("/dashboard", pairs.iter())))
}

async fn add(
    state: &PageState,
    user: &User,
    account: &AccountId,
    form: &LimitForm,
) -> Result<&'static str, LimitsError> {
    let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let rolling_hours = match text(&form.rolling_hours) {
        None => None,
        Some(hours) => Some(hours.parse::<u32>().map_err(|_| LimitsError::Invalid {
            field: "rollingHours",
            message: "is a whole number of hours".to_owned(),
        })?),
    };
    let window = form.window.trim().to_owned();
    let draft = LimitDraft {
        feature: text(&form.feature),
        api_key_id: None,
        // Hours apply to a rolling window alone; the form keeps the field for every window.
        rolling_hours: rolling_hours.filter(|_| window == "rolling"),
        window,
        credits: form.credits.clone(),
        enforcement: text(&form.enforcement),
    };
    (state.ports.credits)
        .add_spend_limit(&user.id, account, draft)
        .await
        .map(|_| "limit_added")
}

/// The limits of `account` with their usage now.
pub(crate) async fn load(
    state: &PageState,
    account: &AccountId,
) -> Result<Vec<ShownLimit>, PageError> {
    match state.ports.credits.spend_limits(account).await {
        Ok(limits) => Ok(limits),
        Err(LimitsError::Infra(infra)) => Err(infra.into()),
        Err(_) => Err(PageError::Unexpected),
    }
}

/// The notice of a limit form's answer, if the page was reached with one.
pub(crate) fn notice(v: &Visitor) -> Markup {
    let (tone, key) = match v.query("notice") {
        Some("limit_added") => ("alert-success", "limits.notice_added"),
        Some("limit_removed") => ("alert-success", "limits.notice_removed"),
        Some("limit_invalid") => ("alert-danger", "limits.notice_invalid"),
        Some("limit_not_allowed") => ("alert-warning", "limits.notice_not_allowed"),
        Some("limit_too_many") => ("alert-warning", "limits.notice_too_many"),
        Some("limit_gone") => ("alert-warning", "limits.notice_gone"),
        _ => return html! {},
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

/// The section: the account's limits, and for those who manage its billing (`manages`) the
/// form to add one and a remove button on each; nothing for others when it has none.
pub(crate) fn section(
    v: &Visitor,
    limits: &[ShownLimit],
    (account, manages): (&AccountId, bool),
) -> Markup {
    if limits.is_empty() && !manages {
        return html! {};
    }
    let team = account.owner().is_none().then(|| account.to_string());
    html! {
        section.card.section-card data-testid="spend-limits" {
            h2 { (v.t("limits.title")) }
            p.muted { (v.t("limits.lead")) }
            @if !limits.is_empty() {
                ul.limit-list {
                    @for shown in limits { (row(v, shown, manages.then_some(team.as_deref()))) }
                }
            }
            @if manages { (add_form(v, team.as_deref())) }
        }
    }
}

/// "Add a limit": credits, window (with hours for a rolling one), an optional feature, hard or
/// soft.
fn add_form(v: &Visitor, team: Option<&str>) -> Markup {
    html! {
        form.stack.limit-form method="post" action="/dashboard/limits/add" data-busy
            data-testid="add-limit" {
            (csrf_field(v))
            @if let Some(team) = team { input type="hidden" name="accountId" value=(team); }
            h3 { (v.t("limits.add_title")) }
            div.form-grid {
                div.field {
                    label for="limit-credits" { (v.t("limits.credits")) }
                    input #limit-credits type="text" name="credits" inputmode="decimal" required
                        placeholder="100";
                }
                div.field {
                    label for="limit-window" { (v.t("limits.window")) }
                    select #limit-window name="window" {
                        @for code in ["hour", "day", "week", "month", "rolling"] {
                            option value=(code) selected[code == "day"] {
                                (v.t(&format!("limits.window_{code}")))
                            }
                        }
                    }
                }
                div.field {
                    label for="limit-hours" { (v.t("limits.rolling_hours")) }
                    input #limit-hours type="number" name="rollingHours" min="1" max="744"
                        placeholder="5";
                }
                div.field {
                    label for="limit-feature" { (v.t("limits.feature_field")) }
                    input #limit-feature type="text" name="feature" maxlength="64";
                }
                div.field {
                    label for="limit-enforcement" { (v.t("limits.enforcement")) }
                    select #limit-enforcement name="enforcement" {
                        option value="hard" selected { (v.t("limits.hard")) }
                        option value="soft" { (v.t("limits.soft")) }
                    }
                }
            }
            div.actions {
                button.btn.btn-primary type="submit" data-testid="add-limit-button" {
                    (v.t("limits.add_button"))
                }
            }
        }
    }
}

/// "Remove" for one limit.
fn remove_form(v: &Visitor, shown: &ShownLimit, team: Option<&str>) -> Markup {
    html! {
        form.inline-form method="post" action="/dashboard/limits/remove" data-busy
            data-confirm=(v.t("limits.confirm_remove")) {
            (csrf_field(v))
            @if let Some(team) = team { input type="hidden" name="accountId" value=(team); }
            input type="hidden" name="limitId" value=(shown.record.id);
            button.btn.btn-danger-ghost.btn-sm type="submit" data-testid="remove-limit" {
                (v.t("limits.remove"))
            }
        }
    }
}

/// One limit; `removable`: for a manager, with its remove button (and the team it is on).
fn row(v: &Visitor, shown: &ShownLimit, removable: Option<Option<&str>>) -> Markup {
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
                span.limit-tags {
                    span class=(format!("badge {tone}")) { (v.t(enforcement)) }
                    @if let Some(team) = removable { (remove_form(v, shown, team)) }
                }
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
