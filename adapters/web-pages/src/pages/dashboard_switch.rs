//! The dashboard's plan switching (issue 19): for each live subscription, a form to switch to
//! another plan where its provider has a plan-change API (Stripe), and otherwise a form to
//! switch at the period's end (cancelled then, the new plan started with a new checkout); a
//! button to resume one scheduled to end where the provider can undo a cancellation. A switch
//! waiting for the provider's confirmation, and a switch scheduled for the period's end (with
//! "Keep current plan" and "Don't switch"), are shown as such; when a subscription with a
//! scheduled switch has ended, "Start `<plan>`" opens the new plan's checkout in one click.

use std::sync::Arc;

use application::accounts::User;
use application::use_cases::change_plan::ChangePlanError;
use application::use_cases::report_status::StatusReport;
use domain::{
    Money, Plan, PlanId, RenewalIntent, ScheduledSwitch, Subscription, SubscriptionId,
    switch_support,
};
use maud::{Markup, html};
use poem::Request;
use serde::Deserialize;

use super::dashboard_account::back;
use super::{PlanNames, parse_id, require_user};
use crate::format;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

/// The plans each live subscription can switch to, loaded before the page renders.
pub(crate) struct SwitchChoices(Vec<(Subscription, Vec<(Plan, Money)>)>);

impl SwitchChoices {
    /// No choices: the user does not manage the account's billing.
    pub(crate) fn none() -> Self {
        Self(Vec::new())
    }

    /// The choices of every live subscription in `report`.
    ///
    /// # Errors
    /// The dynamic plan table cannot be read.
    pub(crate) async fn load(state: &PageState, report: &StatusReport) -> Result<Self, PageError> {
        let mut choices = Vec::new();
        for held in &report.subscriptions {
            let subscription = &held.subscription;
            if !subscription.is_live() {
                continue;
            }
            let environment = state.ports.plans.environment();
            let payments = &state.ports.payments;
            let options = if switch_support(subscription.provider()).change_plan {
                payments.switch_options(subscription).await?
            } else {
                payments.period_end_switch_options(subscription).await?
            };
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
        section.card.section-card #plan-switch data-testid="plan-switch" {
            h2 { (v.t("switch.title")) }
            div.held-list {
                @for (subscription, options) in &choices.0 {
                    div.held-item data-testid="switch-item" {
                        p.plan-line { strong { (names.name(subscription.plan_id())) } }
                        (pending(v, subscription, names))
                        @if let Some(switch) = subscription.scheduled_switch() {
                            (scheduled(v, subscription, switch, names))
                        } @else {
                            (actions(v, subscription, options, names))
                        }
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
        return at_period_end(v, subscription, options, names);
    }
    if options.is_empty() {
        return html! { p.muted { (v.t("switch.no_options")) } };
    }
    html! {
        form.stack method="post" action="/dashboard/subscription/change-plan" data-busy {
            (super::dashboard_account::form_fields(v))
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
        p.muted { (v.t(explain_key(subscription.provider()))) }
        @if options.iter().any(|(plan, _)| other_interval(subscription, plan)) {
            p.muted data-testid="switch-interval-explain" { (v.t("switch.explain_interval")) }
        }
    }
}

/// Whether `plan` bills another interval than `subscription` (monthly ↔ yearly): where the
/// provider allows that switch, it starts a new billing period at once.
fn other_interval(subscription: &Subscription, plan: &Plan) -> bool {
    let Some(terms) = subscription.sold_terms() else {
        return false;
    };
    matches!(plan.duration(), Some(domain::Duration::Months(m)) if m != terms.interval())
}

/// How a switch proceeds at `provider`: PayPal asks the subscriber to approve it there and bills
/// the new price from the next cycle; the others switch at once.
fn explain_key(provider: domain::ProviderId) -> &'static str {
    match provider {
        domain::ProviderId::WalletGlobal => "switch.explain_approval",
        domain::ProviderId::WalletQr
        | domain::ProviderId::WalletWeb
        | domain::ProviderId::CardGateway
        | domain::ProviderId::MorA
        | domain::ProviderId::MorB
        | domain::ProviderId::MorC => "switch.explain",
    }
}

/// The switch at the period's end, for a provider without a plan-change API.
fn at_period_end(
    v: &Visitor,
    subscription: &Subscription,
    options: &[(Plan, Money)],
    names: &PlanNames,
) -> Markup {
    let starts = format::day(subscription.current_period().end(), v.lang);
    let explain = v.tf("switch.period_end_explain", &[("date", format::SLOT)]);
    html! {
        p.muted data-testid="switch-at-period-end" { (v.t("switch.at_period_end")) }
        @if !options.is_empty() {
            form.stack method="post" action="/dashboard/subscription/change-plan" data-busy {
                (super::dashboard_account::form_fields(v))
                input type="hidden" name="subscriptionId" value=(subscription.id());
                input type="hidden" name="when" value="period_end";
                div.field {
                    label for={ "switch-later-" (subscription.id()) } { (v.t("switch.choose")) }
                    select id={ "switch-later-" (subscription.id()) } name="planId"
                        data-testid="switch-later-choice" {
                        @for (plan, price) in options {
                            option value=(plan.id()) {
                                (names.name(plan.id())) " · " (format::money(*price, v.lang))
                            }
                        }
                    }
                }
                div.actions {
                    button.btn.btn-primary type="submit" data-testid="switch-at-period-end-button" {
                        (v.t("switch.period_end_button"))
                    }
                }
            }
            p.muted { (format::with_slot(&explain, &starts)) }
        }
    }
}

/// A switch scheduled for the period's end: when, and the ways back.
fn scheduled(
    v: &Visitor,
    subscription: &Subscription,
    switch: &ScheduledSwitch,
    names: &PlanNames,
) -> Markup {
    let plan = names.name(switch.plan_id());
    let text = v.tf(
        "switch.scheduled",
        &[("plan", &plan), ("date", format::SLOT)],
    );
    let starts = format::day(subscription.current_period().end(), v.lang);
    html! {
        p.alert.alert-info role="status" data-testid="switch-scheduled" {
            (format::with_slot(&text, &starts))
        }
        div.actions {
            @if switch_support(subscription.provider()).resume {
                form method="post" action="/dashboard/subscription/resume" data-busy {
                    (super::dashboard_account::form_fields(v))
                    input type="hidden" name="subscriptionId" value=(subscription.id());
                    button.btn.btn-primary type="submit" data-testid="resume-subscription" {
                        (v.t("switch.keep_button"))
                    }
                }
            }
            form method="post" action="/dashboard/subscription/withdraw-switch" data-busy {
                (super::dashboard_account::form_fields(v))
                input type="hidden" name="subscriptionId" value=(subscription.id());
                button.btn.btn-secondary type="submit" data-testid="withdraw-switch" {
                    (v.t("switch.withdraw_button"))
                }
            }
        }
    }
}

/// "Start <plan>": the subscriber's ended subscription had a switch scheduled and nothing live
/// replaced it; one click opens the new plan's checkout through the same provider (a new
/// purchase, which the buyer confirms there).
pub(crate) fn start_section(v: &Visitor, report: &StatusReport, names: &PlanNames) -> Markup {
    let live = report
        .subscriptions
        .iter()
        .any(|h| h.subscription.is_live());
    let Some(ended) = report
        .subscription
        .as_ref()
        .filter(|s| !s.is_live() && !live)
    else {
        return html! {};
    };
    let Some(switch) = ended.scheduled_switch() else {
        return html! {};
    };
    let plan = names.name(switch.plan_id());
    let old = names.name(ended.plan_id());
    html! {
        section.card.section-card data-testid="scheduled-plan" {
            h2 { (v.t("switch.start_title")) }
            p { (v.tf("switch.start_text", &[("plan", &plan), ("old", &old)])) }
            form method="post" action="/pricing/buy" data-busy {
                (super::dashboard_account::form_fields(v))
                input type="hidden" name="planId" value=(switch.plan_id());
                input type="hidden" name="provider" value=(ended.provider().as_str());
                button.btn.btn-primary type="submit" data-testid="start-scheduled-plan" {
                    (v.tf("switch.start_button", &[("plan", &plan)]))
                }
            }
        }
    }
}

fn resume_form(v: &Visitor, subscription: &Subscription) -> Markup {
    html! {
        form method="post" action="/dashboard/subscription/resume" data-busy {
            (super::dashboard_account::form_fields(v))
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
        Some("plan_change_declined") => ("alert-warning", "switch.notice_declined"),
        Some("subscription_resumed") => ("alert-success", "switch.notice_resumed"),
        Some("switch_scheduled") => ("alert-success", "switch.notice_scheduled"),
        Some("switch_withdrawn") => ("alert-success", "switch.notice_withdrawn"),
        Some("change_in_progress") => ("alert-warning", "switch.notice_in_progress"),
        Some("not_switchable") => ("alert-warning", "switch.notice_not_switchable"),
        Some("switch_failed") => ("alert-danger", "switch.notice_failed"),
        _ => return super::dashboard_team_forms::notice(v),
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

#[derive(Debug, Deserialize)]
pub(crate) struct SwitchForm {
    #[serde(rename = "subscriptionId", default)]
    subscription_id: String,
    #[serde(rename = "planId", default)]
    plan_id: String,
    /// `period_end` for a switch at the period's end; anything else switches now.
    #[serde(default)]
    when: String,
    /// The team shown, to come back to; empty for the user's own account.
    #[serde(rename = "accountId", default)]
    account_id: String,
}

/// `POST /dashboard/subscription/change-plan` and `POST /dashboard/subscription/resume` (the
/// cancel action has its own, static, route).
pub(crate) async fn act(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    match request.uri().path().rsplit('/').next() {
        Some("change-plan") => change_plan(state, v, request).await,
        Some("resume") => resume(state, v, request).await,
        Some("withdraw-switch") => withdraw_switch(state, v, request).await,
        _ => Err(PageError::NotFound),
    }
}

/// `POST /dashboard/subscription/change-plan`.
async fn change_plan(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: SwitchForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let id = form_subscription(&form)?;
    let owned = application::authorization::Owned::Subscription(&id);
    super::dashboard_account::portal_may_act_on(&state, &v, &user, owned).await?;
    let Some(plan) = parse_id(&form.plan_id, PlanId::new) else {
        let unknown = ChangePlanError::PlanNotFound(form.plan_id.clone());
        let notice = refused(&user, unknown)?;
        return Ok(redirect(&back(&form.account_id, notice)));
    };
    if form.when == "period_end" {
        let notice = match state
            .ports
            .payments
            .schedule_plan_switch(&user, &id, &plan)
            .await
        {
            Ok(_) => "switch_scheduled",
            Err(e) => refused(&user, e)?,
        };
        return Ok(redirect(&back(&form.account_id, notice)));
    }
    let outcome = state.ports.payments.change_plan(&user, &id, &plan).await;
    let notice = match outcome {
        Ok(done) => match done.approval_url {
            Some(url) => return Ok(redirect(&url)),
            None if done.subscription.plan_id() == done.change.plan_id() => "plan_changed",
            None => "plan_change_pending",
        },
        Err(e) => refused(&user, e)?,
    };
    Ok(redirect(&back(&form.account_id, notice)))
}

/// `POST /dashboard/subscription/resume`.
async fn resume(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: SwitchForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let id = form_subscription(&form)?;
    let owned = application::authorization::Owned::Subscription(&id);
    super::dashboard_account::portal_may_act_on(&state, &v, &user, owned).await?;
    let notice = match state.ports.payments.resume_subscription(&user, &id).await {
        Ok(_) => "subscription_resumed",
        Err(e) => refused(&user, e)?,
    };
    Ok(redirect(&back(&form.account_id, notice)))
}

/// `POST /dashboard/subscription/withdraw-switch`.
async fn withdraw_switch(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: SwitchForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let id = form_subscription(&form)?;
    let owned = application::authorization::Owned::Subscription(&id);
    super::dashboard_account::portal_may_act_on(&state, &v, &user, owned).await?;
    let notice = match state
        .ports
        .payments
        .cancel_scheduled_switch(&user, &id)
        .await
    {
        Ok(_) => "switch_withdrawn",
        Err(e) => refused(&user, e)?,
    };
    Ok(redirect(&back(&form.account_id, notice)))
}

/// The subscription a form names; a malformed id is not found, as [`refused`] answers an
/// unknown one.
fn form_subscription(form: &SwitchForm) -> Result<SubscriptionId, PageError> {
    parse_id(&form.subscription_id, SubscriptionId::new).ok_or(PageError::NotFound)
}

/// The notice a refused switch or resume shows; someone else's subscription is not found.
fn refused(user: &User, e: ChangePlanError) -> Result<&'static str, PageError> {
    match e {
        ChangePlanError::NotFound | ChangePlanError::NotOwner => Err(PageError::NotFound),
        ChangePlanError::Refused(_)
        | ChangePlanError::NotSwitchable(_)
        | ChangePlanError::PlanNotFound(_)
        | ChangePlanError::NotAvailable(_) => Ok("not_switchable"),
        ChangePlanError::InProgress(_) => Ok("change_in_progress"),
        ChangePlanError::Gateway(reason) => {
            tracing::warn!(user = %user.id, %reason, "page: plan switch failed at the provider");
            Ok("switch_failed")
        }
        ChangePlanError::Infra(e) => Err(e.into()),
    }
}
