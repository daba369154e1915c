//! `/pricing`: the live pricing mode's offers in three tabs (subscriptions, one-time, credit
//! packs), and `POST /pricing/buy`, which starts the payment and sends the browser to the
//! provider (or to the QR page for `wallet_qr`).
//!
//! Plans sharing a `group` are one offer: one card per offer and billing interval, with each
//! plan's provider as a payment method of the card (`domain::plan::Offer`). A chosen currency
//! (`?currency=USD`) shows, on every tab, only the offers priced in it; without one every offer
//! shows, in the language's currency where it has it, else its default. The billing-interval
//! toggle (`?period=year`) shows only the offers sold at that interval. The tabs
//! (`?tab=credits`), the toggle and the currencies are links that work without JavaScript; the
//! script only switches tabs in place. Hidden plans and plans not shown in the reader's locale
//! are never rendered. A signed-out buyer's Buy goes through sign-in to
//! `/pricing/continue`, which shows what they chose and continues with one click.

mod account;
mod cards;

use std::sync::Arc;

use application::accounts::User;
use application::ports::{CheckoutTarget, StoredPlan};
use application::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};
use domain::plan::{CurrencyChoice, Holdings, Offer, PlanInterval, group_offers};
use domain::{AccountId, Currency, Plan, PlanId, PlanType, ProviderId};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;
use serde::Deserialize;

use super::{message_panel, require_user};
use crate::layout::{self, Nav, csrf_field};
use crate::state::{
    PageError, PageResult, PageState, Visitor, read_form, redirect, sign_in_then, with_query,
};

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
    /// The team bought for; absent for the buyer's own account.
    #[serde(rename = "accountId", default)]
    account_id: String,
    /// The buyer's consent to keep the payment method for automatic top-up (a ticked box).
    #[serde(rename = "saveForAutoTopUp", default)]
    save_for_auto_top_up: Option<String>,
}

/// What the account bought for already holds: the team chosen, else the signed-in reader's own
/// (nothing when signed out).
async fn holdings(
    state: &PageState,
    user: Option<&User>,
    buying: &account::BuyingFor,
) -> Result<Holdings, PageError> {
    Ok(match (buying.chosen(), user) {
        (Some(team), _) => (state.ports.credits)
            .report_account_status(&team.account.id)
            .await?
            .holdings(),
        (None, Some(user)) => state.ports.credits.report_status(user).await?.holdings(),
        (None, None) => Holdings::default(),
    })
}

/// The reader's choices on the page: tab, billing interval and currencies.
pub(crate) struct Choices {
    tab: Tab,
    period: Option<PlanInterval>,
    /// `?currency=` when it names a currency, then the language's currency.
    currency: CurrencyChoice,
    /// The team the reader buys for (`?account=`), kept by every link.
    account: Option<String>,
}

impl Choices {
    /// This page with `tab`, `period` and `currency` set (`None` leaves a value out).
    fn link(&self, tab: Tab, period: Option<PlanInterval>, currency: Option<Currency>) -> String {
        self.link_in(self.account.as_deref(), tab, period, currency)
    }

    /// The dashboard of the account bought for.
    fn dashboard_link(&self) -> String {
        let pairs: Vec<(String, String)> = (self.account.iter())
            .map(|a| ("account".to_owned(), a.clone()))
            .collect();
        with_query("/dashboard", pairs.iter())
    }

    /// This page as it is, buying for `account` (`None`: the reader's own).
    fn account_link(&self, account: Option<&str>) -> String {
        let currency = self.currency.asked();
        self.link_in(account, self.tab, self.period, currency)
    }

    fn link_in(
        &self,
        account: Option<&str>,
        tab: Tab,
        period: Option<PlanInterval>,
        currency: Option<Currency>,
    ) -> String {
        let mut pairs = vec![("tab".to_owned(), tab.slug().to_owned())];
        if let Some(period) = period {
            pairs.push(("period".to_owned(), period_slug(period)));
        }
        if let Some(currency) = currency {
            pairs.push(("currency".to_owned(), currency.code().to_owned()));
        }
        if let Some(account) = account {
            pairs.push(("account".to_owned(), account.to_owned()));
        }
        with_query("/pricing", pairs.iter())
    }
}

/// The `?period=` value of an interval: its code, or `months-<n>`.
pub(crate) fn period_slug(interval: PlanInterval) -> String {
    interval.slug()
}

/// `GET /pricing`.
pub(crate) async fn show(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    let plans = listed_plans(&state, &v).await?;
    let buying = account::BuyingFor::load(&state, &v).await?;
    let holdings = holdings(&state, v.user.as_ref(), &buying).await?;
    let plans: Vec<&Plan> = plans.iter().map(|p| &p.plan).collect();
    let offers_in = |tab: Tab| {
        group_offers(
            plans
                .iter()
                .copied()
                .filter(move |p| Tab::of(p.plan_type()) == tab),
        )
    };
    let mut choices = choices(&v, &offers_in(Tab::Subscriptions));
    // Each tab counts the cards it shows at the chosen interval and currency.
    let counts = Tab::ALL.map(|tab| cards::shown(&choices, tab, &offers_in(tab)).len());
    let count = |tab: Tab| {
        Tab::ALL
            .into_iter()
            .zip(counts)
            .find_map(|(t, n)| (t == tab).then_some(n))
            .unwrap_or(0)
    };
    let selected = v
        .query("tab")
        .and_then(Tab::parse)
        .or_else(|| Tab::ALL.into_iter().find(|t| count(*t) > 0))
        .unwrap_or(Tab::Subscriptions);
    choices.tab = selected;
    choices.account = buying.chosen().map(|t| t.account.id.to_string());
    let development = state.ports.plans.environment() == domain::AppEnvironment::Development;
    let context = cards::CardContext {
        v: &v,
        choices: &choices,
        holdings: &holdings,
        development,
    };
    let body = html! {
        section.page-intro.center {
            h1 { (v.t("pricing.title")) }
            p.lead { (v.t("pricing.lead")) }
        }
        (account::picker(&v, &choices, &buying))
        (cards::currency_picker(&context, &plans))
        div.tabs-wrap {
            div.tabs role="tablist" aria-label=(v.t("pricing.tabs_label")) data-tabs {
                @for tab in Tab::ALL {
                    (tab_link(&v, &choices, tab, tab == selected, count(tab)))
                }
            }
        }
        @for tab in Tab::ALL {
            section.tab-panel id={"panel-" (tab.slug())} role="tabpanel"
                aria-labelledby={"tab-" (tab.slug())} data-panel=(tab.slug())
                hidden[tab != selected] {
                @if tab == Tab::Subscriptions {
                    (cards::period_toggle(&context, &offers_in(tab)))
                }
                (cards::offer_grid(&context, tab, &offers_in(tab)))
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

/// The plans `/pricing` lists for `v`, in listing order.
async fn listed_plans(state: &PageState, v: &Visitor) -> Result<Vec<StoredPlan>, PageError> {
    Ok(state
        .ports
        .plans
        .public_plans(Some(&v.lang.locale()))
        .await?)
}

/// The reader's billing interval (`?period=`, else monthly, else the shortest sold, in the
/// asked currency when there is one) and currencies (`?currency=`, then the language's); the
/// tab is the `?tab=` one until the page settles which tab it shows.
fn choices(v: &Visitor, subscriptions: &[Offer<'_>]) -> Choices {
    let asked_currency = v.query("currency").and_then(|c| c.parse::<Currency>().ok());
    let currency = CurrencyChoice::new(asked_currency, &v.lang.locale());
    let tab = v
        .query("tab")
        .and_then(Tab::parse)
        .unwrap_or(Tab::Subscriptions);
    let asked = v.query("period").and_then(|slug| {
        currency
            .sold_intervals(subscriptions)
            .into_iter()
            .find(|i| period_slug(*i) == slug)
    });
    Choices {
        tab,
        period: currency.default_interval(subscriptions, asked),
        currency,
        account: None,
    }
}

fn tab_link(v: &Visitor, choices: &Choices, tab: Tab, selected: bool, count: usize) -> Markup {
    let asked_currency = choices.currency.asked();
    let href = if asked_currency.is_some() || tab == Tab::Subscriptions {
        choices.link(
            tab,
            choices.period.filter(|_| tab == Tab::Subscriptions),
            asked_currency,
        )
    } else {
        choices.link(tab, None, None)
    };
    html! {
        a.tab id={"tab-" (tab.slug())} role="tab" href=(href)
            aria-selected=(if selected { "true" } else { "false" })
            aria-controls={"panel-" (tab.slug())} data-tab=(tab.slug())
            tabindex=(if selected { "0" } else { "-1" }) {
            (v.t(tab.label_key()))
            span.tab-count { (count) }
        }
    }
}

/// `GET /pricing/continue?planId=…&provider=…`: after sign-up or sign-in, the purchase the
/// buyer started, with one button that posts it (with the CSRF token) to `/pricing/buy`.
pub(crate) async fn resume(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    require_user(&v)?;
    let plan_id = v.query("planId").unwrap_or_default();
    let provider = v.query("provider").unwrap_or_default();
    let plans = listed_plans(&state, &v).await?;
    let chosen = plans
        .iter()
        .map(|p| &p.plan)
        .find(|p| p.id().as_str() == plan_id && p.provider().as_str() == provider);
    let Some(plan) = chosen else {
        let actions = html! { a.btn.btn-primary href="/pricing" { (v.t("pricing.back")) } };
        let title = v.t("pricing.unavailable_title");
        let body = message_panel(title, v.t("pricing.unavailable_text"), actions);
        return Ok(layout::page(
            &v,
            StatusCode::NOT_FOUND,
            title,
            Nav::Pricing,
            body,
        ));
    };
    let development = state.ports.plans.environment() == domain::AppEnvironment::Development;
    let body = cards::resume_panel(&v, plan, development);
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("pricing.continue_title"),
        Nav::Pricing,
        body,
    ))
}

/// Where a signed-out buyer's Buy goes: sign in (or sign up), then continue with this plan and
/// provider.
pub(crate) fn continue_link(plan: &Plan) -> String {
    let pairs = [
        ("planId".to_owned(), plan.id().as_str().to_owned()),
        ("provider".to_owned(), plan.provider().as_str().to_owned()),
    ];
    sign_in_then(&with_query("/pricing/continue", pairs.iter()))
}

/// The label of the Buy button for a plan type.
pub(crate) const fn buy_label_key(plan_type: PlanType) -> &'static str {
    match plan_type {
        PlanType::Recurring => "pricing.subscribe",
        PlanType::OneTime => "pricing.buy",
        PlanType::Credits => "pricing.buy_credits",
    }
}

/// The hidden fields and CSRF token of a Buy form for `plan`.
pub(crate) fn buy_fields(v: &Visitor, plan: &Plan) -> Markup {
    html! {
        (csrf_field(v))
        input type="hidden" name="planId" value=(plan.id());
        input type="hidden" name="provider" value=(plan.provider().as_str());
        @if let Some(account) = account::form_account(v) {
            input type="hidden" name="accountId" value=(account);
        }
    }
}

/// `POST /pricing/buy`: start the payment, then go where the buyer pays.
pub(crate) async fn buy(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: BuyForm = read_form(&v, &mut request).await?;
    let user = require_user(&v).map_err(|_| PageError::SignInRequired(sign_in_then("/pricing")))?;
    // Parsed once, here: an unknown provider never reaches the use case.
    let Ok(provider) = form.provider.parse::<ProviderId>() else {
        tracing::info!("page: plan cannot be bought: unknown provider");
        return Ok(failure_page(
            &v,
            StatusCode::UNPROCESSABLE_ENTITY,
            "pricing.unavailable_title",
            "pricing.unavailable_text",
        ));
    };
    // Parsed here too: a malformed plan id is answered like an unknown one.
    let Ok(plan_id) = PlanId::new(form.plan_id.clone()) else {
        return buy_failed(&v, InitiatePaymentError::PlanNotFound(form.plan_id));
    };
    let account = match form.account_id.as_str() {
        "" => None,
        raw => Some(super::parse_id(raw, AccountId::new).ok_or(PageError::NotFound)?),
    };
    // A customer-portal session buys for the one account it was opened for alone.
    let named = account
        .clone()
        .unwrap_or_else(|| AccountId::personal(&user.id));
    v.within_portal(&named)?;
    let started = state
        .ports
        .payments
        .initiate_payment(InitiatePayment {
            user,
            account,
            plan_id,
            provider,
            idempotency_key: None,
            returns: Default::default(),
            save_method: form.save_for_auto_top_up.is_some(),
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
                ("/dashboard#plan-switch", "pricing.switch_link"),
            ));
        }
        InitiatePaymentError::AlreadyOwned { .. } => {
            return Ok(already_held(
                v,
                "pricing.already_owned_title",
                "pricing.already_owned_text",
                ("/dashboard", "pricing.dashboard_link"),
            ));
        }
        InitiatePaymentError::AccountNotFound => return Err(PageError::NotFound),
        InitiatePaymentError::NotBillingManager => (
            StatusCode::FORBIDDEN,
            "pricing.not_billing_manager_title",
            "pricing.not_billing_manager_text",
        ),
        other => {
            tracing::info!(error = %other, "page: plan cannot be bought");
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                "pricing.unavailable_title",
                "pricing.unavailable_text",
            )
        }
    };
    Ok(failure_page(v, status, title, text))
}

/// A purchase that did not start: `title` and `text` with a way back to the pricing page.
fn failure_page(v: &Visitor, status: StatusCode, title: &str, text: &str) -> poem::Response {
    let actions = html! { a.btn.btn-primary href="/pricing" { (v.t("pricing.back")) } };
    let body = message_panel(v.t(title), v.t(text), actions);
    layout::page(v, status, v.t(title), Nav::Pricing, body)
}

/// The buyer already holds what they tried to buy: a 409 page pointing at the dashboard, where
/// it is shown (`link`: the dashboard's address to go to and the key of the link's text; a
/// subscriber is taken to the dashboard's plan switch).
fn already_held(
    v: &Visitor,
    title_key: &str,
    text_key: &str,
    (href, link_key): (&str, &str),
) -> poem::Response {
    let title = v.t(title_key);
    let actions = html! {
        a.btn.btn-primary href=(href) { (v.t(link_key)) }
        " "
        a.btn.btn-secondary href="/pricing" { (v.t("pricing.back")) }
    };
    let body = message_panel(title, v.t(text_key), actions);
    layout::page(v, StatusCode::CONFLICT, title, Nav::Pricing, body)
}
