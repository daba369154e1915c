//! The spend limits of an account: each with what its current window counted as a meter, what
//! it counts (a feature, a model, an API key, a member) and when it resets, with a form to add one and a button to
//! remove each for those who may. Shown on the dashboard's credits tab, where the account's
//! owners and admins (on a personal account, its user) change them
//! (`POST /dashboard/limits/{add,remove}`, the use cases of `/api/limits`), and on the admin
//! console's customer and team pages, where an administrator does
//! (`POST /admin/limits/{add,remove}`, the audited use cases of
//! `/api/admin/accounts/{accountId}/limits`).

use std::sync::Arc;

use application::accounts::User;
use application::ports::Member;
use application::use_cases::spend_limits::{LimitDraft, LimitsError, ShownLimit};
use domain::{AccountId, Enforcement, SpendLimitId, UserId};
use maud::{Markup, html};
use poem::Request;
use serde::Deserialize;

use super::admin::gate;
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
    model: String,
    #[serde(default)]
    member: String,
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
    v.within_portal(&account)?;
    let credits = &state.ports.credits;
    let done = match action.as_str() {
        "add" => match draft_of(&form) {
            Ok(draft) => credits.add_spend_limit(&user.id, &account, draft).await,
            Err(e) => Err(e),
        }
        .map(|_| "limit_added"),
        "remove" => {
            let id = limit_id(&form)?;
            (credits.remove_spend_limit(&user.id, &account, &id).await).map(|()| "limit_removed")
        }
        _ => return Err(PageError::NotFound),
    };
    let mut pairs = vec![("tab".to_owned(), "credits".to_owned())];
    if account.owner().is_none() {
        pairs.push(("account".to_owned(), account.to_string()));
    }
    pairs.push(("notice".to_owned(), outcome(done)?.to_owned()));
    Ok(redirect(&with_query("/dashboard", pairs.iter())))
}

/// `POST /admin/limits/{add,remove}` (administrators): back to the console's page of the
/// account (its user's for a personal account, the team's otherwise) with a notice.
pub(crate) async fn admin_act(
    state: Arc<PageState>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    gate(&v)?;
    let action = request.uri().path().rsplit('/').next().unwrap_or_default();
    let action = action.to_owned();
    let form: LimitForm = read_form(&v, &mut request).await?;
    let admin = require_user(&v)?;
    let account = AccountId::new(form.account_id.trim()).map_err(|_| PageError::BadRequest)?;
    let port = &state.ports.admin;
    let done = match action.as_str() {
        "add" => match draft_of(&form) {
            Ok(draft) => port.add_customer_limit(&admin, &account, draft).await,
            Err(e) => Err(e),
        }
        .map(|_| "limit_added"),
        "remove" => {
            let id = limit_id(&form)?;
            (port.remove_customer_limit(&admin, &account, &id).await).map(|()| "limit_removed")
        }
        _ => return Err(PageError::NotFound),
    };
    let page = match account.owner() {
        Some(user) => format!("/admin/customers/{user}"),
        None => format!("/admin/accounts/{account}"),
    };
    let notice = [("notice".to_owned(), outcome(done)?.to_owned())];
    Ok(redirect(&with_query(&page, notice.iter())))
}

fn limit_id(form: &LimitForm) -> Result<SpendLimitId, PageError> {
    SpendLimitId::new(form.limit_id.trim()).map_err(|_| PageError::BadRequest)
}

/// The notice of a form's answer.
fn outcome(done: Result<&'static str, LimitsError>) -> Result<&'static str, PageError> {
    Ok(match done {
        Ok(notice) => notice,
        Err(LimitsError::Invalid { .. }) => "limit_invalid",
        Err(LimitsError::NotAllowed) => "limit_not_allowed",
        Err(LimitsError::TooMany(_)) => "limit_too_many",
        Err(
            LimitsError::NotFound
            | LimitsError::NoSuchKey
            | LimitsError::NoSuchMember
            | LimitsError::AccountNotFound,
        ) => "limit_gone",
        Err(LimitsError::Infra(infra)) => return Err(infra.into()),
    })
}

/// The limit the add form describes.
fn draft_of(form: &LimitForm) -> Result<LimitDraft, LimitsError> {
    let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let rolling_hours = match text(&form.rolling_hours) {
        None => None,
        Some(hours) => Some(hours.parse::<u32>().map_err(|_| LimitsError::Invalid {
            field: "rollingHours",
            message: "is a whole number of hours".to_owned(),
        })?),
    };
    let window = form.window.trim().to_owned();
    Ok(LimitDraft {
        feature: text(&form.feature),
        model: text(&form.model),
        api_key_id: None,
        member_id: text(&form.member),
        // Hours apply to a rolling window alone; the form keeps the field for every window.
        rolling_hours: rolling_hours.filter(|_| window == "rolling"),
        window,
        credits: form.credits.clone(),
        enforcement: text(&form.enforcement),
    })
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

/// The members of `account` when it is a team (`user` is one of them), none for a personal
/// account.
pub(crate) async fn members(
    state: &PageState,
    user: &User,
    account: &AccountId,
) -> Result<Vec<Member>, PageError> {
    if account.owner().is_some() {
        return Ok(Vec::new());
    }
    (state.ports.accounts)
        .team_members(&user.id, account)
        .await
        .map_err(super::dashboard_teams::page_error)
}

/// The limits of `account` with their usage now, as an administrator reads them.
pub(crate) async fn load_for_console(
    state: &PageState,
    account: &AccountId,
) -> Result<Vec<ShownLimit>, PageError> {
    match state.ports.admin.customer_limits(account).await {
        Ok(limits) => Ok(limits),
        Err(LimitsError::Infra(infra)) => Err(infra.into()),
        Err(_) => Err(PageError::NotFound),
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

/// The credits tab's part: the notice of a limit form's answer, and the section.
pub(crate) fn on_dashboard(
    v: &Visitor,
    limits: (&[ShownLimit], &[Member]),
    (account, manages): (&AccountId, bool),
) -> Markup {
    html! {
        (notice(v))
        (section(v, limits, (account, manages), Audience::Dashboard))
    }
}

/// Whose page the limits are on, and so where their forms post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Audience {
    /// The dashboard: the account's own people.
    Dashboard,
    /// The admin console: an administrator.
    Console,
}

/// Where the forms post (`{base}/add`, `{base}/remove`) and the account they name (`None`: the
/// user's own, on the dashboard).
#[derive(Debug, Clone, Copy)]
struct Forms<'a> {
    base: &'static str,
    account: Option<&'a str>,
}

/// How a member is named on the page: their e-mail address, else their id.
fn member_label<'m>(members: &'m [Member], id: &'m UserId) -> &'m str {
    members
        .iter()
        .find(|m| &m.user_id == id)
        .and_then(|m| m.email.as_deref())
        .unwrap_or(id.as_str())
}

/// The section: the account's limits, and for those who may change them (`manages`) the form
/// to add one and a remove button on each; nothing for others when it has none. A team's
/// `members` name the member limits and are offered by the form.
pub(crate) fn section(
    v: &Visitor,
    (limits, members): (&[ShownLimit], &[Member]),
    (account, manages): (&AccountId, bool),
    audience: Audience,
) -> Markup {
    if limits.is_empty() && !manages {
        return html! {};
    }
    let named = account.to_string();
    let (forms, lead) = match audience {
        Audience::Dashboard => {
            let team = account.owner().is_none().then_some(named.as_str());
            (("/dashboard/limits", team), "limits.lead")
        }
        Audience::Console => (
            ("/admin/limits", Some(named.as_str())),
            "limits.console_lead",
        ),
    };
    let forms = Forms {
        base: forms.0,
        account: forms.1,
    };
    html! {
        section.card.section-card data-testid="spend-limits" {
            h2 { (v.t("limits.title")) }
            p.muted { (v.t(lead)) }
            @if !limits.is_empty() {
                ul.limit-list {
                    @for shown in limits { (row(v, shown, members, manages.then_some(forms))) }
                }
            }
            @if manages { (add_form(v, forms, members)) }
        }
    }
}

/// "Add a limit": credits, window (with hours for a rolling one), an optional feature and
/// model, on a team an optional member, hard or soft.
fn add_form(v: &Visitor, forms: Forms<'_>, members: &[Member]) -> Markup {
    html! {
        form.stack.limit-form method="post" action=(format!("{}/add", forms.base)) data-busy
            data-testid="add-limit" {
            (csrf_field(v))
            @if let Some(account) = forms.account {
                input type="hidden" name="accountId" value=(account);
            }
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
                    label for="limit-model" { (v.t("limits.model_field")) }
                    input #limit-model type="text" name="model" maxlength="64";
                }
                @if !members.is_empty() {
                    div.field {
                        label for="limit-member" { (v.t("limits.member_field")) }
                        select #limit-member name="member" data-testid="limit-member" {
                            option value="" selected { (v.t("limits.every_member")) }
                            @for m in members {
                                option value=(m.user_id) { (member_label(members, &m.user_id)) }
                            }
                        }
                    }
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
fn remove_form(v: &Visitor, shown: &ShownLimit, forms: Forms<'_>) -> Markup {
    html! {
        form.inline-form method="post" action=(format!("{}/remove", forms.base)) data-busy
            data-confirm=(v.t("limits.confirm_remove")) {
            (csrf_field(v))
            @if let Some(account) = forms.account {
                input type="hidden" name="accountId" value=(account);
            }
            input type="hidden" name="limitId" value=(shown.record.id);
            button.btn.btn-danger-ghost.btn-sm type="submit" data-testid="remove-limit" {
                (v.t("limits.remove"))
            }
        }
    }
}

/// One limit; `removable`: for a manager, with its remove button posting there.
fn row(
    v: &Visitor,
    shown: &ShownLimit,
    members: &[Member],
    removable: Option<Forms<'_>>,
) -> Markup {
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
                    @if let Some(forms) = removable { (remove_form(v, shown, forms)) }
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
                @if let Some(feature) = &record.scope.feature {
                    (v.tf("limits.feature", &[("feature", feature)])) " · "
                }
                @if let Some(model) = &record.scope.model {
                    (v.tf("limits.model", &[("model", model)])) " · "
                }
                @if let Some(key) = &record.scope.api_key {
                    (v.tf("limits.key", &[("key", key)])) " · "
                }
                @if let Some(member) = &record.scope.member {
                    (v.tf("limits.member", &[("member", member_label(members, member))])) " · "
                }
                (v.tf("teams.resets", &[("date", &format::date_time(standing.resets_at, v.lang))]))
            }
        }
    }
}
