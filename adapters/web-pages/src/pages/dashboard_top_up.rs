//! Automatic top-up on the dashboard's credits tab, for the account's owners and admins (on a
//! personal account, its user): the rule (on or off, threshold, pack, monthly cap) and why Tally
//! turned it off, the saved card (brand and last four) with a remove button, a "save a card"
//! purchase of the chosen pack with the buyer's consent, and the latest top-ups. The forms post
//! to `/dashboard/auto-top-up/{save,remove}`, the use cases of `/api/auto-top-up`; saving a
//! card posts to `/pricing/buy` with `saveForAutoTopUp`. The admin console shows the same
//! status read-only (`status`).

use std::sync::Arc;

use application::use_cases::auto_top_up::{AutoTopUpError, AutoTopUpOverview, SetAutoTopUp};
use domain::{AccountId, Credits, PlanId, PlanType, TopUpStatus};
use maud::{Markup, html};
use poem::Request;
use serde::Deserialize;

use super::require_user;
use crate::format;
use crate::layout::csrf_field;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect, with_query};

/// What the forms post.
#[derive(Debug, Deserialize)]
pub(crate) struct TopUpForm {
    /// The team shown; empty for the user's own account.
    #[serde(rename = "accountId", default)]
    account_id: String,
    /// A ticked box.
    #[serde(default)]
    enabled: Option<String>,
    #[serde(default)]
    threshold: String,
    #[serde(rename = "planId", default)]
    plan_id: String,
    #[serde(rename = "maxPerMonth", default)]
    max_per_month: String,
    #[serde(rename = "methodId", default)]
    method_id: String,
}

/// A credits pack the rule may buy: its id, name, price and provider.
pub(crate) struct Pack {
    id: PlanId,
    label: String,
    provider: domain::ProviderId,
}

/// `POST /dashboard/auto-top-up/{save,remove}`: back to the credits tab with a notice.
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let action = request.uri().path().rsplit('/').next().unwrap_or_default();
    let action = action.to_owned();
    let form: TopUpForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let account = match form.account_id.trim() {
        "" => AccountId::personal(&user.id),
        id => AccountId::new(id).map_err(|_| PageError::BadRequest)?,
    };
    v.within_portal(&account)?;
    let payments = &state.ports.payments;
    let done = match action.as_str() {
        "save" => match rule_of(&form, &user.id, &account) {
            Some(set) => payments.set_auto_top_up(set).await.map(|_| "top_up_saved"),
            None => Ok("top_up_invalid"),
        },
        "remove" => payments
            .remove_payment_method(&user.id, &account, form.method_id.trim())
            .await
            .map(|_| "top_up_method_removed"),
        _ => return Err(PageError::NotFound),
    };
    let notice = match done {
        Ok(notice) => notice,
        Err(AutoTopUpError::Invalid(_) | AutoTopUpError::PlanNotAllowed(_)) => "top_up_invalid",
        Err(AutoTopUpError::Conflict) => "top_up_conflict",
        Err(AutoTopUpError::MethodNotFound) => "top_up_invalid",
        Err(AutoTopUpError::AccountNotFound) => return Err(PageError::NotFound),
        Err(AutoTopUpError::NotBillingManager) => return Err(PageError::Forbidden),
        Err(AutoTopUpError::Infra(infra)) => return Err(infra.into()),
    };
    let mut pairs = vec![("tab".to_owned(), "credits".to_owned())];
    if account.owner().is_none() {
        pairs.push(("account".to_owned(), account.to_string()));
    }
    pairs.push(("notice".to_owned(), notice.to_owned()));
    Ok(redirect(&with_query("/dashboard", pairs.iter())))
}

/// The rule the save form states, if its numbers read.
fn rule_of(form: &TopUpForm, user: &domain::UserId, account: &AccountId) -> Option<SetAutoTopUp> {
    let threshold = Credits::parse_positive(&form.threshold)?;
    let max_per_month = match form.max_per_month.trim() {
        "" => 5,
        n => n.parse().ok()?,
    };
    Some(SetAutoTopUp {
        user: user.clone(),
        account: account.clone(),
        enabled: form.enabled.is_some(),
        threshold,
        plan_id: PlanId::new(form.plan_id.trim()).ok()?,
        max_per_month,
        max_amount_per_month: None,
        method_id: Some(form.method_id.trim().to_owned()).filter(|m| !m.is_empty()),
    })
}

/// The account's automatic top-up and the packs it may buy, for a user who manages its
/// billing; `None` for anyone else.
pub(crate) async fn load(
    state: &PageState,
    v: &Visitor,
    user: &domain::UserId,
    account: &AccountId,
) -> Result<Option<(AutoTopUpOverview, Vec<Pack>)>, PageError> {
    let overview = match state.ports.payments.auto_top_up(user, account).await {
        Ok(overview) => overview,
        Err(AutoTopUpError::NotBillingManager | AutoTopUpError::AccountNotFound) => {
            return Ok(None);
        }
        Err(AutoTopUpError::Infra(infra)) => return Err(infra.into()),
        Err(_) => return Err(PageError::BadRequest),
    };
    let plans = state
        .ports
        .plans
        .public_plans(Some(&v.lang.locale()))
        .await?;
    let packs = plans
        .iter()
        .map(|p| &p.plan)
        .filter(|p| {
            p.plan_type() == PlanType::Credits && state.ports.plans.saves_methods(p.provider())
        })
        .map(|p| Pack {
            id: p.id().clone(),
            label: format!(
                "{} · {}",
                p.text_for(&v.lang.locale()).name,
                format::money(p.price(), v.lang)
            ),
            provider: p.provider(),
        })
        .collect();
    Ok(Some((overview, packs)))
}

/// The notice of a form's answer, if the page was reached with one.
fn notice(v: &Visitor) -> Markup {
    let (tone, key) = match v.query("notice") {
        Some("top_up_saved") => ("alert-success", "top_up.notice_saved"),
        Some("top_up_method_removed") => ("alert-success", "top_up.notice_removed"),
        Some("top_up_invalid") => ("alert-danger", "top_up.notice_invalid"),
        Some("top_up_conflict") => ("alert-warning", "top_up.notice_conflict"),
        _ => return html! {},
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

/// The section on the dashboard: status, the rule's form, the saved card, the history.
pub(crate) fn section(v: &Visitor, (overview, packs): &(AutoTopUpOverview, Vec<Pack>)) -> Markup {
    if packs.is_empty() && overview.record.is_none() {
        return html! {};
    }
    let team = overview
        .account
        .owner()
        .is_none()
        .then(|| overview.account.to_string());
    html! {
        (notice(v))
        section.card.section-card data-testid="auto-top-up" {
            h2 { (v.t("top_up.title")) }
            p.muted { (v.t("top_up.lead")) }
            (status(v, overview, packs))
            (rule_form(v, overview, packs, team.as_deref()))
            (methods(v, overview, packs, team.as_deref()))
            (history(v, overview))
        }
    }
}

/// Whether it is on, and why Tally turned it off or holds it; the pack by its name among
/// `packs` when it is one of them.
pub(crate) fn status(v: &Visitor, overview: &AutoTopUpOverview, packs: &[Pack]) -> Markup {
    let Some(record) = &overview.record else {
        return html! { p data-testid="top-up-status" { (v.t("top_up.status_none")) } };
    };
    let state = record.state.as_of(overview.now);
    let pack = packs
        .iter()
        .find(|p| p.id == record.rule.plan)
        .map_or(record.rule.plan.as_str(), |p| p.label.as_str());
    html! {
        p data-testid="top-up-status" {
            @if record.rule.enabled {
                span.badge.badge-success { (v.t("top_up.status_on")) }
                " " (v.tf("top_up.rule_text", &[
                    ("threshold", &record.rule.threshold.to_string()),
                    ("plan", pack),
                ]))
            } @else {
                span.badge { (v.t("top_up.status_off")) }
            }
            @if let Some(reason) = record.disabled_reason {
                " " span.muted { (v.t(&format!("top_up.disabled_{}", reason.code()))) }
            }
            @if let Some(until) = state.cool_off_until.filter(|u| *u > overview.now) {
                " " span.muted { (v.tf("top_up.cooling_until", &[("time", &format::date_time(until, v.lang))])) }
            }
            " " span.muted { (v.tf("top_up.month_count", &[
                ("count", &state.month_count.to_string()),
                ("max", &record.rule.max_per_month.to_string()),
            ])) }
        }
    }
}

fn rule_form(
    v: &Visitor,
    overview: &AutoTopUpOverview,
    packs: &[Pack],
    team: Option<&str>,
) -> Markup {
    let rule = overview.record.as_ref().map(|r| &r.rule);
    html! {
        form.stack.top-up-form method="post" action="/dashboard/auto-top-up/save" data-busy
            data-testid="top-up-rule" {
            (csrf_field(v))
            @if let Some(team) = team { input type="hidden" name="accountId" value=(team); }
            div.form-grid {
                div.field {
                    label for="top-up-threshold" { (v.t("top_up.threshold")) }
                    input #top-up-threshold type="text" name="threshold" inputmode="decimal" required
                        value=[rule.map(|r| r.threshold.to_string())] placeholder="100";
                }
                div.field {
                    label for="top-up-plan" { (v.t("top_up.pack")) }
                    select #top-up-plan name="planId" {
                        @for pack in packs {
                            option value=(pack.id) selected[rule.is_some_and(|r| r.plan == pack.id)] { (pack.label) }
                        }
                    }
                }
                div.field {
                    label for="top-up-max" { (v.t("top_up.max_per_month")) }
                    input #top-up-max type="number" name="maxPerMonth" min="1" max="1000"
                        value=(rule.map_or(5, |r| r.max_per_month));
                }
            }
            label.check {
                input type="checkbox" name="enabled" value="on" checked[rule.is_none_or(|r| r.enabled)];
                " " (v.t("top_up.enabled"))
            }
            button.btn.btn-primary type="submit" data-testid="save-top-up" { (v.t("top_up.save")) }
        }
    }
}

fn methods(
    v: &Visitor,
    overview: &AutoTopUpOverview,
    packs: &[Pack],
    team: Option<&str>,
) -> Markup {
    let attached = overview
        .record
        .as_ref()
        .and_then(|r| r.method.as_ref())
        .map(|m| m.id.as_str());
    let chosen = overview
        .record
        .as_ref()
        .and_then(|r| packs.iter().find(|p| p.id == r.rule.plan))
        .or_else(|| packs.first());
    html! {
        h3 { (v.t("top_up.methods")) }
        @if overview.methods.is_empty() {
            p.muted data-testid="no-saved-method" { (v.t("top_up.no_method")) }
        }
        ul.method-list {
            @for m in &overview.methods {
                li data-testid="saved-method" {
                    strong { (brand(m)) }
                    @if let Some(last4) = &m.method.last4 { " •••• " (last4) }
                    @if let Some(wallet) = &m.method.wallet_account { " · " (wallet) }
                    @if attached == Some(m.id.as_str()) { " " span.badge.badge-success { (v.t("top_up.charged")) } }
                    form.inline-form method="post" action="/dashboard/auto-top-up/remove" data-busy {
                        (csrf_field(v))
                        @if let Some(team) = team { input type="hidden" name="accountId" value=(team); }
                        input type="hidden" name="methodId" value=(m.id);
                        button.btn.btn-secondary.btn-sm type="submit" data-testid="remove-method" { (v.t("top_up.remove")) }
                    }
                }
            }
        }
        @if let Some(pack) = chosen {
            form.save-card-form method="post" action="/pricing/buy" data-busy data-testid="save-card" {
                (csrf_field(v))
                input type="hidden" name="planId" value=(pack.id);
                input type="hidden" name="provider" value=(pack.provider.as_str());
                input type="hidden" name="saveForAutoTopUp" value="on";
                @if let Some(team) = team { input type="hidden" name="accountId" value=(team); }
                button.btn.btn-secondary.btn-block type="submit" { (v.tf("top_up.save_card", &[("pack", &pack.label)])) }
            }
            p.muted.small { (v.t("top_up.consent")) }
        }
    }
}

fn history(v: &Visitor, overview: &AutoTopUpOverview) -> Markup {
    if overview.history.is_empty() {
        return html! {};
    }
    html! {
        h3 { (v.t("top_up.history")) }
        div.table-wrap {
            table.table.table-stack data-testid="top-up-history" {
                thead { tr {
                    th scope="col" { (v.t("dashboard.col_date")) }
                    th scope="col" { (v.t("top_up.col_status")) }
                    th.num scope="col" { (v.t("top_up.col_amount")) }
                } }
                tbody {
                    @for t in &overview.history {
                        tr {
                            td data-label=(v.t("dashboard.col_date")) { (format::date_time(t.created_at, v.lang)) }
                            td data-label=(v.t("top_up.col_status")) {
                                (v.t(&format!("top_up.status_{}", t.status.code())))
                                @if let Some(url) = t.action_url.as_ref().filter(|_| t.status == TopUpStatus::AuthenticationRequired) {
                                    " " a href=(url) rel="noopener" { (v.t("top_up.finish")) }
                                } @else if let Some(reason) = &t.reason {
                                    " " span.muted { "(" (reason) ")" }
                                }
                            }
                            td.num data-label=(v.t("top_up.col_amount")) {
                                @if let Some(amount) = t.amount { (format::money(amount, v.lang)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The console's read-only view of an account's automatic top-up (nothing when it has none):
/// its status, the card it charges and the latest top-ups.
pub(crate) async fn console_section(
    state: &PageState,
    v: &Visitor,
    account: &AccountId,
) -> Result<Markup, PageError> {
    let overview = state.ports.payments.top_up_overview(account).await?;
    if overview.record.is_none() && overview.methods.is_empty() {
        return Ok(html! {});
    }
    let card = overview.record.as_ref().and_then(|r| r.method.as_ref());
    Ok(html! {
        section.card.section-card data-testid="console-auto-top-up" {
            h2 { (v.t("top_up.title")) }
            (status(v, &overview, &[]))
            @if let Some(m) = card {
                p { (v.t("top_up.methods")) ": "
                    strong { (brand(m)) }
                    @if let Some(last4) = &m.method.last4 { " •••• " (last4) }
                    @if let Some(wallet) = &m.method.wallet_account { " · " (wallet) }
                }
            }
            (history(v, &overview))
        }
    })
}

/// A saved method's brand as people write it (`visa` → `Visa`, `paypal` → `PayPal`), else its
/// provider.
fn brand(m: &application::ports::SavedMethodRecord) -> String {
    match &m.method.brand {
        Some(brand) if brand == "paypal" => "PayPal".to_owned(),
        Some(brand) => {
            let mut chars = brand.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        }
        None => m.provider.as_str().to_owned(),
    }
}
