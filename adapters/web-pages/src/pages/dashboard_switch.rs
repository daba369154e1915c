//! The dashboard's plan switching (issue 19): for each live subscription, a form to switch to
//! another plan where its provider has a plan-change API (Stripe), a button to resume one
//! scheduled to end where the provider can undo a cancellation, and otherwise the words saying
//! how to switch there (cancel at the period's end, buy the other plan when it ends). A switch
//! waiting for the provider's confirmation is shown as such.

use std::sync::Arc;

use application::accounts::User;
use application::ports::{Clock, IdGenerator, SecretHasher, Store};
use application::use_cases::change_plan::ChangePlanError;
use application::use_cases::report_status::StatusReport;
use domain::{Money, Plan, RenewalIntent, Subscription, switch_support};
use maud::{Markup, html};
use poem::Request;
use serde::Deserialize;

use super::{PlanNames, require_user};
use crate::format;
use crate::layout::csrf_field;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

/// The plans each live subscription can switch to, loaded before the page renders.
pub(crate) struct SwitchChoices(Vec<(Subscription, Vec<(Plan, Money)>)>);

impl SwitchChoices {
    /// The choices of every live subscription in `report`.
    ///
    /// # Errors
    /// The dynamic plan table cannot be read.
    pub(crate) async fn load<S: Store, C: Clock, I: IdGenerator, H: SecretHasher>(
        state: &PageState<S, C, I, H>,
        report: &StatusReport,
    ) -> Result<Self, PageError> {
        let mut choices = Vec::new();
        for held in &report.subscriptions {
            let subscription = &held.subscription;
            if !subscription.is_live() {
                continue;
            }
            let environment = state.service.config().environment;
            let options = state.service.switch_options(subscription).await?;
            let priced = options
                .into_iter()
                .map(|plan| {
                    let price = plan.price_in(environment);
                    (plan, price)
                })
                .collect();
            choices.push((subscription.clone(), priced));
        }
        Ok(Self(choices))
    }
}

/// The "Change plan" card; nothing when no subscription is live.
pub(crate) fn section(v: &Visitor, choices: &SwitchChoices, names: &PlanNames) -> Markup {
    if choices.0.is_empty() {
        return html! {};
    }
    html! {
        section.card.section-card data-testid="plan-switch" {
            h2 { (v.t("switch.title")) }
            div.held-list {
                @for (subscription, options) in &choices.0 {
                    div.held-item data-testid="switch-item" {
                        p.plan-line { strong { (names.name(subscription.plan_id())) } }
                        (pending(v, subscription, names))
                        (actions(v, subscription, options, names))
                    }
                }
            }
        }
    }
}

fn pending(v: &Visitor, subscription: &Subscription, names: &PlanNames) -> Markup {
    let Some(change) = subscription.pending_change() else {
        return html! {};
    };
    html! {
        p.alert.alert-info role="status" data-testid="switch-pending" {
            (v.tf("switch.pending", &[("plan", &names.name(change.plan_id()))]))
        }
    }
}

fn actions(
    v: &Visitor,
    subscription: &Subscription,
    options: &[(Plan, Money)],
    names: &PlanNames,
) -> Markup {
    let support = switch_support(subscription.provider());
    if subscription.renewal() == RenewalIntent::EndsAtPeriodEnd {
        return if support.resume {
            resume_form(v, subscription)
        } else {
            html! { p.muted data-testid="resume-unavailable" { (v.t("switch.resume_unavailable")) } }
        };
    }
    if !support.change_plan {
        return html! {
            p.muted data-testid="switch-at-period-end" { (v.t("switch.at_period_end")) }
        };
    }
    if options.is_empty() {
        return html! { p.muted { (v.t("switch.no_options")) } };
    }
    html! {
        form.stack method="post" action="/dashboard/subscription/change-plan" data-busy {
            (csrf_field(v))
            input type="hidden" name="subscriptionId" value=(subscription.id());
            div.field {
                label for={ "switch-" (subscription.id()) } { (v.t("switch.choose")) }
                select id={ "switch-" (subscription.id()) } name="planId"
                    data-testid="switch-plan-choice" {
                    @for (plan, price) in options {
                        option value=(plan.id()) {
                            (names.name(plan.id())) " · " (format::money(*price, v.lang))
                        }
                    }
                }
            }
            div.actions {
                button.btn.btn-primary type="submit" data-testid="switch-plan" {
                    (v.t("switch.button"))
                }
            }
        }
        p.muted { (v.t("switch.explain")) }
    }
}

fn resume_form(v: &Visitor, subscription: &Subscription) -> Markup {
    html! {
        form method="post" action="/dashboard/subscription/resume" data-busy {
            (csrf_field(v))
            input type="hidden" name="subscriptionId" value=(subscription.id());
            button.btn.btn-primary type="submit" data-testid="resume-subscription" {
                (v.t("switch.resume_button"))
            }
        }
    }
}

/// The notice a switch or resume redirects with, if `notice` is one of theirs.
pub(crate) fn notice(v: &Visitor) -> Markup {
    let (tone, key) = match v.query("notice") {
        Some("plan_changed") => ("alert-success", "switch.notice_changed"),
        Some("plan_change_pending") => ("alert-info", "switch.notice_pending"),
        Some("subscription_resumed") => ("alert-success", "switch.notice_resumed"),
        Some("not_switchable") => ("alert-warning", "switch.notice_not_switchable"),
        Some("switch_failed") => ("alert-danger", "switch.notice_failed"),
        _ => return html! {},
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

#[derive(Debug, Deserialize)]
pub(crate) struct SwitchForm {
    #[serde(rename = "subscriptionId", default)]
    subscription_id: String,
    #[serde(rename = "planId", default)]
    plan_id: String,
}

/// `POST /dashboard/subscription/change-plan` and `POST /dashboard/subscription/resume` (the
/// cancel action has its own, static, route).
pub(crate) async fn act<S: Store, C: Clock, I: IdGenerator, H: SecretHasher>(
    state: Arc<PageState<S, C, I, H>>,
    v: Visitor,
    request: Request,
) -> PageResult {
    match request.uri().path().rsplit('/').next() {
        Some("change-plan") => change_plan(state, v, request).await,
        Some("resume") => resume(state, v, request).await,
        _ => Err(PageError::NotFound),
    }
}

/// `POST /dashboard/subscription/change-plan`.
async fn change_plan<S: Store, C: Clock, I: IdGenerator, H: SecretHasher>(
    state: Arc<PageState<S, C, I, H>>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    let form: SwitchForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let outcome = state
        .service
        .change_plan(&user, &form.subscription_id, &form.plan_id)
        .await;
    let notice = match outcome {
        Ok(done) => match done.approval_url {
            Some(url) => return Ok(redirect(&url)),
            None if done.subscription.plan_id() == done.change.plan_id() => "plan_changed",
            None => "plan_change_pending",
        },
        Err(e) => refused(&user, e)?,
    };
    Ok(redirect(&format!("/dashboard?notice={notice}")))
}

/// `POST /dashboard/subscription/resume`.
async fn resume<S: Store, C: Clock, I: IdGenerator, H: SecretHasher>(
    state: Arc<PageState<S, C, I, H>>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    let form: SwitchForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let notice = match state
        .service
        .resume_subscription(&user, &form.subscription_id)
        .await
    {
        Ok(_) => "subscription_resumed",
        Err(e) => refused(&user, e)?,
    };
    Ok(redirect(&format!("/dashboard?notice={notice}")))
}

/// The notice a refused switch or resume shows; someone else's subscription is not found.
fn refused(user: &User, e: ChangePlanError) -> Result<&'static str, PageError> {
    match e {
        ChangePlanError::NotFound | ChangePlanError::NotOwner => Err(PageError::NotFound),
        ChangePlanError::Refused(_)
        | ChangePlanError::NotSwitchable(_)
        | ChangePlanError::PlanNotFound(_) => Ok("not_switchable"),
        ChangePlanError::Gateway(reason) => {
            tracing::warn!(user = %user.id, %reason, "page: plan switch failed at the provider");
            Ok("switch_failed")
        }
        ChangePlanError::Infra(e) => Err(e.into()),
    }
}
