//! `/pricing`: the live pricing mode's plans in three tabs (subscriptions, one-time, credit
//! packs), and `POST /pricing/buy`, which starts the payment and sends the browser to the
//! provider (or to the QR page for `wallet_qr`).
//!
//! The tabs are links (`?tab=credits`) that work without JavaScript; the script only switches
//! them in place. Hidden plans and plans not shown in the reader's locale are never rendered.

use std::sync::Arc;

use application::ports::{CheckoutTarget, Clock, IdGenerator, SecretHasher, Store, StoredPlan};
use application::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};
use application::use_cases::plans::{Audience, list_plans};
use domain::plan::Prominence;
use domain::{AppEnvironment, Credits, Plan, PlanType};
use maud::{Markup, PreEscaped, html};
use poem::Request;
use poem::http::StatusCode;
use serde::Deserialize;

use super::{message_panel, provider_key, require_user};
use crate::format;
use crate::layout::{self, Nav, csrf_field};
use crate::markdown::render_inline;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect, sign_in_then};

/// The pricing tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tab {
    /// Recurring plans.
    Subscriptions,
    /// One-time (lifetime or fixed-term) plans.
    OneTime,
    /// Credit packs.
    Credits,
}

impl Tab {
    const ALL: [Tab; 3] = [Tab::Subscriptions, Tab::OneTime, Tab::Credits];

    /// The `?tab=` value.
    pub(crate) const fn slug(self) -> &'static str {
        match self {
            Tab::Subscriptions => "subscriptions",
            Tab::OneTime => "one-time",
            Tab::Credits => "credits",
        }
    }

    const fn label_key(self) -> &'static str {
        match self {
            Tab::Subscriptions => "pricing.tab_subscriptions",
            Tab::OneTime => "pricing.tab_one_time",
            Tab::Credits => "pricing.tab_credits",
        }
    }

    /// The tab a plan type is listed under.
    pub(crate) const fn of(plan_type: PlanType) -> Tab {
        match plan_type {
            PlanType::Recurring => Tab::Subscriptions,
            PlanType::OneTime => Tab::OneTime,
            PlanType::Credits => Tab::Credits,
        }
    }

    fn parse(slug: &str) -> Option<Tab> {
        Tab::ALL.into_iter().find(|t| t.slug() == slug)
    }
}

/// `POST /pricing/buy`.
#[derive(Debug, Deserialize)]
pub(crate) struct BuyForm {
    #[serde(rename = "planId", default)]
    plan_id: String,
    #[serde(default)]
    provider: String,
}

/// `GET /pricing`.
pub(crate) async fn show<S: Store, C: Clock, I: IdGenerator, H: SecretHasher>(
    state: Arc<PageState<S, C, I, H>>,
    v: Visitor,
    _request: Request,
) -> PageResult {
    let config = state.service.config();
    let locale = v.lang.locale();
    let plans = list_plans(
        config.pricing_mode,
        &config.catalog,
        state.service.gateways(),
        state.service.store(),
        Audience::Public,
        Some(&locale),
    )
    .await?;
    let count = |tab: Tab| {
        plans
            .iter()
            .filter(|p| Tab::of(p.plan.plan_type()) == tab)
            .count()
    };
    let selected = v
        .query("tab")
        .and_then(Tab::parse)
        .or_else(|| Tab::ALL.into_iter().find(|t| count(*t) > 0))
        .unwrap_or(Tab::Subscriptions);
    let development = config.environment == AppEnvironment::Development;
    let body = html! {
        section.page-intro.center {
            h1 { (v.t("pricing.title")) }
            p.lead { (v.t("pricing.lead")) }
        }
        div.tabs-wrap {
            div.tabs role="tablist" aria-label=(v.t("pricing.tabs_label")) data-tabs {
                @for tab in Tab::ALL {
                    (tab_link(&v, tab, tab == selected, count(tab)))
                }
            }
        }
        @for tab in Tab::ALL {
            section.tab-panel id={"panel-" (tab.slug())} role="tabpanel"
                aria-labelledby={"tab-" (tab.slug())} data-panel=(tab.slug())
                hidden[tab != selected] {
                (plan_grid(&v, tab, &plans, development))
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("pricing.title"),
        Nav::Pricing,
        body,
    ))
}

fn tab_link(v: &Visitor, tab: Tab, selected: bool, count: usize) -> Markup {
    html! {
        a.tab id={"tab-" (tab.slug())} role="tab" href={"/pricing?tab=" (tab.slug())}
            aria-selected=(if selected { "true" } else { "false" })
            aria-controls={"panel-" (tab.slug())} data-tab=(tab.slug())
            tabindex=(if selected { "0" } else { "-1" }) {
            (v.t(tab.label_key()))
            span.tab-count { (count) }
        }
    }
}

fn plan_grid(v: &Visitor, tab: Tab, plans: &[StoredPlan], development: bool) -> Markup {
    let in_tab: Vec<&Plan> = plans
        .iter()
        .map(|p| &p.plan)
        .filter(|p| Tab::of(p.plan_type()) == tab)
        .collect();
    html! {
        @if in_tab.is_empty() {
            div.empty-state { p { (v.t("pricing.empty")) } }
        } @else {
            div.plan-grid {
                @for plan in in_tab {
                    (plan_card(v, plan, tab, development))
                }
            }
        }
    }
}

fn plan_card(v: &Visitor, plan: &Plan, tab: Tab, development: bool) -> Markup {
    let text = plan.text_for(&v.lang.locale());
    let recommended = plan.prominence() == Prominence::Recommended;
    html! {
        article.plan-card.is-recommended[recommended] id={"plan-" (plan.id())}
            data-plan-id=(plan.id()) {
            @if recommended {
                span.badge.badge-primary.plan-ribbon { (v.t("pricing.recommended")) }
            }
            header.plan-head {
                h2.plan-name { (text.name) }
                p.plan-provider { (v.t(provider_key(plan.provider()))) }
            }
            @if !text.description.is_empty() {
                p.plan-description { (text.description) }
            }
            (price_block(v, plan, &text.duration))
            @if let (Some(dev), true) = (plan.development_price(), development) {
                p.dev-price {
                    (v.tf("pricing.development_price", &[("price", &format::money(dev, v.lang))]))
                }
            }
            @if !text.features.is_empty() {
                ul.features {
                    @for feature in &text.features {
                        li { (PreEscaped(render_inline(feature))) }
                    }
                }
            }
            div.plan-action { (buy_action(v, plan, tab)) }
        }
    }
}

fn price_block(v: &Visitor, plan: &Plan, duration_label: &str) -> Markup {
    html! {
        div.price {
            @if let Some(original) = plan.original_price() {
                del.price-was data-testid="original-price" {
                    span.sr-only { (v.t("pricing.original_price")) " " }
                    (format::money(original, v.lang))
                }
            }
            span.price-now data-testid="price" { (format::money(plan.price(), v.lang)) }
            @if !duration_label.is_empty() {
                span.price-period { "/ " (duration_label) }
            }
        }
        @if let Some(credits) = plan.credits() {
            p.plan-credits { (credits_line(v, plan, credits, duration_label)) }
        }
    }
}

/// "1,000 credits", or for a subscription "Includes 1,000 credits every month".
fn credits_line(v: &Visitor, plan: &Plan, credits: Credits, duration_label: &str) -> String {
    let amount = format::credits(credits);
    match (plan.plan_type(), duration_label.is_empty()) {
        (PlanType::Recurring, false) => v.tf(
            "pricing.credits_per_duration",
            &[("amount", &amount), ("duration", duration_label)],
        ),
        (PlanType::Recurring, true) => v.tf("pricing.credits_per_period", &[("amount", &amount)]),
        _ => v.tf("credits.amount", &[("amount", &amount)]),
    }
}

fn buy_action(v: &Visitor, plan: &Plan, tab: Tab) -> Markup {
    let label = match plan.plan_type() {
        PlanType::Recurring => "pricing.subscribe",
        PlanType::OneTime => "pricing.buy",
        PlanType::Credits => "pricing.buy_credits",
    };
    let variant = if plan.prominence() == Prominence::Recommended {
        "btn-primary"
    } else {
        "btn-secondary"
    };
    html! {
        @if v.user.is_some() {
            form method="post" action="/pricing/buy" data-busy {
                (csrf_field(v))
                input type="hidden" name="planId" value=(plan.id());
                input type="hidden" name="provider" value=(plan.provider().as_str());
                button.btn.btn-block.(variant) type="submit" data-testid="buy" { (v.t(label)) }
            }
        } @else {
            a.btn.btn-block.(variant) data-testid="buy"
                href=(sign_in_then(&format!("/pricing?tab={}#plan-{}", tab.slug(), plan.id()))) {
                (v.t(label))
            }
            p.sign-in-note { (v.t("pricing.sign_in_to_buy")) }
        }
    }
}

/// `POST /pricing/buy`: start the payment, then go where the buyer pays.
pub(crate) async fn buy<S: Store, C: Clock, I: IdGenerator, H: SecretHasher>(
    state: Arc<PageState<S, C, I, H>>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    let form: BuyForm = read_form(&v, &mut request).await?;
    let user = require_user(&v).map_err(|_| PageError::SignInRequired(sign_in_then("/pricing")))?;
    let started = state
        .service
        .initiate_payment(InitiatePayment {
            user,
            plan_id: form.plan_id,
            provider: form.provider,
            idempotency_key: None,
        })
        .await;
    let record = match started {
        Ok(started) => started.order,
        Err(e) => return buy_failed(&v, e),
    };
    let order_id = record.order.id().as_str();
    Ok(match record.checkout.map(|c| c.target) {
        Some(CheckoutTarget::Redirect(url)) => redirect(&url),
        Some(CheckoutTarget::QrCode(_)) => redirect(&format!("/pay/qr/{order_id}")),
        None => redirect(&format!("/payment-success?orderId={order_id}")),
    })
}

fn buy_failed(v: &Visitor, error: InitiatePaymentError) -> PageResult {
    let (status, title, text) = match error {
        InitiatePaymentError::Infra(e) => return Err(e.into()),
        InitiatePaymentError::Gateway { reason, .. } => {
            tracing::warn!(%reason, "page: checkout could not start");
            (
                StatusCode::BAD_GATEWAY,
                "pricing.provider_failed_title",
                "pricing.provider_failed_text",
            )
        }
        InitiatePaymentError::AlreadySubscribed { .. } => {
            return Ok(already_held(
                v,
                "pricing.already_subscribed_title",
                "pricing.already_subscribed_text",
            ));
        }
        InitiatePaymentError::AlreadyOwned { .. } => {
            return Ok(already_held(
                v,
                "pricing.already_owned_title",
                "pricing.already_owned_text",
            ));
        }
        other => {
            tracing::info!(error = %other, "page: plan cannot be bought");
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                "pricing.unavailable_title",
                "pricing.unavailable_text",
            )
        }
    };
    let actions = html! { a.btn.btn-primary href="/pricing" { (v.t("pricing.back")) } };
    let body = message_panel(v.t(title), v.t(text), actions);
    Ok(layout::page(v, status, v.t(title), Nav::Pricing, body))
}

/// The buyer already holds what they tried to buy: a 409 page pointing at the dashboard, where
/// it is shown.
fn already_held(v: &Visitor, title_key: &str, text_key: &str) -> poem::Response {
    let title = v.t(title_key);
    let actions = html! {
        a.btn.btn-primary href="/dashboard" { (v.t("pricing.dashboard_link")) }
        " "
        a.btn.btn-secondary href="/pricing" { (v.t("pricing.back")) }
    };
    let body = message_panel(title, v.t(text_key), actions);
    layout::page(v, StatusCode::CONFLICT, title, Nav::Pricing, body)
}
