//! `/dashboard`: everything the user holds (every subscription with its renewal or end date and
//! its own cancel button, every one-time purchase with its end) and the order history, and the independent "Credits Status" tab (`?tab=credits`) with the balance
//! and the paginated transaction history, each transaction described from its type code; the
//! "Teams" tab (`?tab=teams`, [`super::dashboard_teams`]) shows the user's teams.

use std::collections::BTreeMap;
use std::sync::Arc;

use application::accounts::User;
use application::pagination::PageRequest;
use application::ports::{CheckoutTarget, CreditTransaction, OrderRecord};
use application::use_cases::cancel_subscription::CancelSubscriptionError;
use application::use_cases::report_status::{OneTimeAccess, StatusReport};
use domain::{
    AccessEnd, CancelWhen, Credits, OrderId, OrderStatus, RenewalIntent, Subscription,
    SubscriptionAccess, SubscriptionId, SubscriptionStatus, Timestamp,
};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;
use serde::Deserialize;

use super::dashboard_account::Acting;
use super::{PlanNames, order_status_label, pagination, plan_type_key, require_user, status_tone};
use crate::format;
use crate::layout::{self, Nav};
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

/// Rows per page of orders and of transactions.
const ROWS_PER_PAGE: i64 = 10;

/// The catalog key of a transaction's description: its kind's, except that credits given as a
/// promotion or a bonus (a promo code, a sign-up grant, an operator's promotion) read as such
/// rather than as support's adjustment.
fn description_key(tx: &CreditTransaction) -> String {
    match (tx.kind, tx.context.grant_category) {
        (domain::TransactionKind::AdminAdjustment, Some(domain::GrantCategory::Promotional)) => {
            "transaction.promotional_grant".to_owned()
        }
        (domain::TransactionKind::AdminAdjustment, Some(domain::GrantCategory::Bonus)) => {
            "transaction.bonus_grant".to_owned()
        }
        (kind, _) => format!("transaction.{}", kind.code()),
    }
}

/// `POST /dashboard/subscription/cancel`.
#[derive(Debug, Deserialize)]
pub(crate) struct CancelForm {
    #[serde(rename = "subscriptionId", default)]
    subscription_id: String,
    /// The team shown, to come back to; empty for the user's own account.
    #[serde(rename = "accountId", default)]
    account_id: String,
}

/// `GET /dashboard` and `GET /dashboard?tab=credits`.
pub(crate) async fn show(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    let user = require_user(&v)?;
    let tab = v.query("tab");
    // A customer-portal session is one user's billing: it manages no team, and sees none.
    let portal = v.portal_return.is_some();
    let (credits_tab, teams_tab) = (tab == Some("credits"), tab == Some("teams") && !portal);
    let acting = Acting::load(&state, &v, &user).await?;
    let report = match acting.team() {
        Some(team) => {
            (state.ports.credits)
                .report_account_status(&team.account.id)
                .await?
        }
        None => state.ports.credits.report_status(&user).await?,
    };
    let names = PlanNames::load(&state, &v).await?;
    let shown = (&user, &acting);
    let panel = if credits_tab {
        credits_panel(&state, &v, shown, &report, &names).await?
    } else if teams_tab {
        super::dashboard_teams::panel(&state, &v, &user).await?
    } else {
        overview_panel(&state, &v, shown, &report, &names).await?
    };
    let body = html! {
        section.page-intro {
            h1 { (v.t("dashboard.title")) }
            p.muted { (v.tf("dashboard.signed_in_as", &[("email", user.email.as_str())])) }
        }
        (notice(&v))
        @if !teams_tab {
            (super::dashboard_account::switcher(&v, &acting, credits_tab.then_some("credits")))
        }
        nav.tabs.tabs-links aria-label=(v.t("dashboard.tabs_label")) {
            a.tab href=(acting.href("/dashboard"))
                aria-current=[(!credits_tab && !teams_tab).then_some("page")]
                data-testid="tab-overview" {
                (v.t("dashboard.tab_overview"))
            }
            a.tab href=(acting.href("/dashboard?tab=credits"))
                aria-current=[credits_tab.then_some("page")]
                data-testid="tab-credits" {
                (v.t("dashboard.tab_credits"))
            }
            @if !portal {
                a.tab href="/dashboard?tab=teams" aria-current=[teams_tab.then_some("page")]
                    data-testid="tab-teams" {
                    (v.t("dashboard.tab_teams"))
                }
            }
        }
        (panel)
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("dashboard.title"),
        Nav::Dashboard,
        body,
    ))
}

fn notice(v: &Visitor) -> Markup {
    let (tone, key) = match v.query("notice") {
        Some("subscription_cancelled") => ("alert-success", "dashboard.notice_cancelled"),
        Some("not_cancellable") => ("alert-warning", "dashboard.notice_not_cancellable"),
        Some("cancel_failed") => ("alert-danger", "dashboard.notice_cancel_failed"),
        _ => return super::dashboard_switch::notice(v),
    };
    html! { div.alert.(tone) role="status" data-testid="notice" { (v.t(key)) } }
}

async fn overview_panel(
    state: &PageState,
    v: &Visitor,
    (user, acting): (&User, &Acting),
    report: &StatusReport,
    names: &PlanNames,
) -> Result<Markup, PageError> {
    let page = page_request(v.page_number("orders_page"))?;
    let orders = (state.ports.payments)
        .list_orders(&acting.account_id(user), page)
        .await?;
    let manages = acting.manages_billing();
    let switch = if manages {
        super::dashboard_switch::SwitchChoices::load(state, report).await?
    } else {
        super::dashboard_switch::SwitchChoices::none()
    };
    Ok(html! {
        div.dashboard-grid {
            (subscription_card(v, report, names, acting))
            (credits_summary(v, report, acting))
        }
        @if manages {
            (super::dashboard_switch::start_section(v, report, names))
        }
        (super::dashboard_switch::section(v, &switch, names))
        section.card.section-card {
            h2 { (v.t("dashboard.orders_title")) }
            @if orders.items.is_empty() {
                div.empty-state {
                    p { (v.t("dashboard.no_orders")) }
                    @if manages {
                        a.btn.btn-secondary href=(acting.href("/pricing")) { (v.t("dashboard.see_plans")) }
                    }
                }
            } @else {
                div.table-wrap {
                    table.table.table-stack data-testid="orders" {
                        thead { tr {
                            th scope="col" { (v.t("dashboard.col_date")) }
                            th scope="col" { (v.t("dashboard.col_plan")) }
                            th scope="col" { (v.t("dashboard.col_amount")) }
                            th scope="col" { (v.t("dashboard.col_status")) }
                            th scope="col" { span.sr-only { (v.t("dashboard.col_actions")) } }
                        } }
                        tbody {
                            @for record in &orders.items { (order_row(v, record, names, user)) }
                        }
                    }
                }
                (pagination(v, &acting.href("/dashboard"), "orders_page", page.page(),
                    orders.total_pages()))
            }
        }
    })
}

fn page_request(page: i64) -> Result<PageRequest, PageError> {
    PageRequest::new(Some(page), Some(ROWS_PER_PAGE)).map_err(|_| PageError::BadRequest)
}

/// An order's row; a pending order's way back to its checkout is its buyer's alone (a team's
/// other members see the order, not the provider's link to pay it).
fn order_row(v: &Visitor, record: &OrderRecord, names: &PlanNames, viewer: &User) -> Markup {
    let order = &record.order;
    let code = order.status().code();
    let checkout = (order.user_id() == &viewer.id)
        .then(|| record.checkout.as_ref().map(|c| &c.target))
        .flatten();
    let continue_link = match (order.status(), checkout) {
        (OrderStatus::Pending, Some(CheckoutTarget::Redirect(url))) => Some(url.clone()),
        (OrderStatus::Pending, Some(CheckoutTarget::QrCode(_))) => {
            Some(format!("/pay/qr/{}", order.id()))
        }
        _ => None,
    };
    html! {
        tr {
            td.nowrap data-label=(v.t("dashboard.col_date")) {
                (format::day(order.created_at(), v.lang))
            }
            td data-label=(v.t("dashboard.col_plan")) {
                span.cell-title data-testid="order-plan" { (names.name(&order.plan().plan_id)) }
                span.cell-sub { (v.t(plan_type_key(order.plan().plan_type))) }
            }
            td.nowrap.num data-label=(v.t("dashboard.col_amount")) {
                (format::money(order.plan().price, v.lang))
            }
            td data-label=(v.t("dashboard.col_status")) {
                span.badge.(status_tone(code)) { (order_status_label(v, code)) }
            }
            td.actions-cell {
                @if let Some(link) = continue_link {
                    a.btn.btn-secondary.btn-sm href=(link) { (v.t("dashboard.continue_payment")) }
                }
            }
        }
    }
}

/// Everything the user holds: every subscription (each with its own cancel button) and every
/// one-time purchase whose access runs, with its end.
fn subscription_card(
    v: &Visitor,
    report: &StatusReport,
    names: &PlanNames,
    acting: &Acting,
) -> Markup {
    let manages = acting.manages_billing();
    let nothing_held = report.subscriptions.is_empty() && report.one_time_access.is_empty();
    html! {
        section.card.section-card data-testid="subscription" {
            h2 { (v.t("dashboard.subscription_title")) }
            div.held-list {
                @for held in &report.subscriptions {
                    div.held-item data-testid="held-subscription" {
                        (subscription_details(v, &held.subscription, (held.access, manages), names))
                    }
                }
                @for access in &report.one_time_access {
                    div.held-item data-testid="held-one-time" {
                        (one_time_details(v, access, names))
                    }
                }
            }
            @if nothing_held {
                @if let Some(subscription) = &report.subscription {
                    (subscription_details(v, subscription, (report.access_of(subscription), manages), names))
                } @else {
                    p.muted { (v.t("dashboard.no_subscription")) }
                    @if manages {
                        a.btn.btn-primary href=(acting.href("/pricing?tab=subscriptions")) {
                            (v.t("dashboard.see_plans"))
                        }
                    }
                }
            }
        }
    }
}

fn one_time_details(v: &Visitor, access: &OneTimeAccess, names: &PlanNames) -> Markup {
    html! {
        p.plan-line { strong { (names.name(&access.plan_id)) } }
        @match access.ends {
            AccessEnd::Lifetime => p { span.badge.badge-success { (v.t("dashboard.lifetime")) } },
            AccessEnd::At(end) => p data-testid="access-until" {
                (dated(v, "dashboard.access_until", end))
            },
        }
    }
}

fn subscription_details(
    v: &Visitor,
    subscription: &Subscription,
    (access, manages): (SubscriptionAccess, bool),
    names: &PlanNames,
) -> Markup {
    let code = subscription.status().code();
    let end_at = subscription.current_period().end();
    let ending = subscription.renewal() == RenewalIntent::EndsAtPeriodEnd
        || subscription.status() == SubscriptionStatus::Canceled;
    let past_due_until = match (subscription.status(), access) {
        (SubscriptionStatus::PastDue, SubscriptionAccess::Until(until)) if !ending => Some(until),
        _ => None,
    };
    html! {
        p.plan-line {
            strong data-testid="subscription-plan" { (names.name(subscription.plan_id())) }
            " "
            span.badge.(status_tone(code)) data-testid="subscription-status" {
                (v.t(&format!("subscription_status.{code}")))
            }
        }
        @if ending {
            p data-testid="subscription-renewal" { (dated(v, "dashboard.ends_on", end_at)) }
            p.muted { (v.t("dashboard.cancel_at_period_end")) }
        } @else {
            @if let Some(until) = &past_due_until {
                p data-testid="subscription-renewal" {
                    (dated(v, "dashboard.past_due_until", *until))
                }
            } @else {
                p data-testid="subscription-renewal" {
                    (dated(v, "dashboard.renews_on", end_at))
                }
            }
            @if manages { (cancel_form(v, subscription, end_at)) }
        }
    }
}

/// The catalog sentence `key` with its `{date}` as a `<time>` the reader's browser localises.
fn dated(v: &Visitor, key: &str, at: Timestamp) -> Markup {
    format::with_slot(
        &v.tf(key, &[("date", format::SLOT)]),
        &format::day(at, v.lang),
    )
}

fn cancel_form(v: &Visitor, subscription: &Subscription, end: Timestamp) -> Markup {
    html! {
        details.confirm {
            summary.btn.btn-secondary data-testid="cancel-subscription" {
                (v.t("dashboard.cancel_button"))
            }
            div.confirm-body {
                p { (dated(v, "dashboard.cancel_explain", end)) }
                form method="post" action="/dashboard/subscription/cancel" data-busy {
                    (super::dashboard_account::form_fields(v))
                    input type="hidden" name="subscriptionId" value=(subscription.id());
                    button.btn.btn-danger type="submit" data-testid="confirm-cancel" {
                        (v.t("dashboard.cancel_confirm"))
                    }
                }
            }
        }
    }
}

fn balance_stat(v: &Visitor, report: &StatusReport, test_id: Option<&str>) -> Markup {
    html! {
        p.stat {
            span.stat-value data-testid=[test_id] { (format::credits(report.balance)) }
            " "
            span.stat-unit { (v.t("credits.unit")) }
        }
    }
}

fn credits_summary(v: &Visitor, report: &StatusReport, acting: &Acting) -> Markup {
    html! {
        section.card.section-card {
            h2 { (v.t("dashboard.credits_title")) }
            (balance_stat(v, report, None))
            a.btn.btn-secondary.btn-sm href=(acting.href("/dashboard?tab=credits")) {
                (v.t("dashboard.view_credits"))
            }
        }
    }
}

async fn credits_panel(
    state: &PageState,
    v: &Visitor,
    (user, acting): (&User, &Acting),
    report: &StatusReport,
    names: &PlanNames,
) -> Result<Markup, PageError> {
    let page = page_request(v.page_number("page"))?;
    let history = state
        .ports
        .credits
        .transaction_history(&acting.account_id(user), page)
        .await?;
    let purchases = purchase_names(state, &history.items, report, names).await?;
    let account = acting.account_id(user);
    let limits = super::dashboard_limits::load(state, &account).await?;
    // A team's members name its member limits and are offered by the limit form.
    let members = super::dashboard_limits::members(state, user, &account).await?;
    let spend = super::dashboard_spend::load(state, &account).await?;
    let top_up = super::dashboard_top_up::load(state, v, &user.id, &account).await?;
    Ok(html! {
        (balance_card(v, report, acting))
        @if account.owner().is_some() {
            (super::dashboard_promo::section(v, &state.ports.credits.new_redemption_key()))
        }
        @if let Some(top_up) = &top_up { (super::dashboard_top_up::section(v, top_up)) }
        (super::dashboard_limits::on_dashboard(v, (&limits, &members), (&account, acting.manages_billing())))
        (super::dashboard_spend::section(v, &spend))
        section.card.section-card {
            h2 { (v.t("dashboard.transactions_title")) }
            @if history.items.is_empty() {
                div.empty-state { p { (v.t("dashboard.no_transactions")) } }
            } @else {
                div.table-wrap {
                    table.table.table-stack data-testid="transactions" {
                        thead { tr {
                            th scope="col" { (v.t("dashboard.col_date")) }
                            th scope="col" { (v.t("dashboard.col_description")) }
                            th.num scope="col" { (v.t("dashboard.col_change")) }
                            th.num scope="col" { (v.t("dashboard.col_balance_after")) }
                        } }
                        tbody {
                            @for tx in &history.items {
                                (transaction_row(v, tx, &purchases, acting))
                            }
                        }
                    }
                }
                (pagination(v, &acting.href("/dashboard?tab=credits"), "page", page.page(),
                    history.total_pages()))
            }
        }
    })
}

/// The plan names of what the transactions on this page came from, so a purchase or a
/// subscription's grant reads as what was bought rather than as an id.
#[derive(Default)]
struct Purchases {
    orders: BTreeMap<OrderId, String>,
    subscriptions: BTreeMap<SubscriptionId, String>,
}

impl Purchases {
    fn plan_of(&self, tx: &CreditTransaction) -> Option<&String> {
        let by_order = tx
            .context
            .order_id
            .as_ref()
            .and_then(|o| self.orders.get(o));
        let by_subscription = || {
            let id = tx.context.subscription_id.as_ref()?;
            self.subscriptions.get(id)
        };
        by_order.or_else(by_subscription)
    }
}

/// [`Purchases`] for `transactions`: orders read one each, subscriptions from `report`.
async fn purchase_names(
    state: &PageState,
    transactions: &[CreditTransaction],
    report: &StatusReport,
    names: &PlanNames,
) -> Result<Purchases, PageError> {
    let held = report.subscriptions.iter().map(|h| &h.subscription);
    let subscriptions = held
        .chain(report.subscription.as_ref())
        .map(|s| (s.id().clone(), names.name(s.plan_id())))
        .collect();
    let mut purchases = BTreeMap::new();
    for order_id in transactions
        .iter()
        .filter_map(|tx| tx.context.order_id.as_ref())
    {
        if purchases.contains_key(order_id) {
            continue;
        }
        if let Some(plan_id) = state.ports.payments.ordered_plan(order_id).await? {
            purchases.insert(order_id.clone(), names.name(&plan_id));
        }
    }
    Ok(Purchases {
        orders: purchases,
        subscriptions,
    })
}

/// The credits tab's balance: what is available, what pending holds keep, what the credits
/// are, and (for whoever manages billing) where to buy more.
fn balance_card(v: &Visitor, report: &StatusReport, acting: &Acting) -> Markup {
    let held_hundredths: i64 = report
        .pending_reservations
        .iter()
        .map(|r| r.held.hundredths())
        .sum();
    let held = Credits::from_hundredths(held_hundredths)
        .ok()
        .filter(|c| !c.is_zero());
    html! {
        section.card.balance-card data-testid="credits-status" {
            div {
                p.eyebrow { (v.t("dashboard.balance")) }
                (balance_stat(v, report, Some("credit-balance")))
                @if let Some(held) = held {
                    p.muted { (v.tf("dashboard.held", &[("amount", &format::credits(held))])) }
                }
                @if let Some(parts) = by_category(v, report) {
                    p.muted data-testid="balance-by-category" { (parts) }
                }
            }
            @if acting.manages_billing() {
                a.btn.btn-primary href=(acting.href("/pricing?tab=credits")) {
                    (v.t("dashboard.buy_credits"))
                }
            }
        }
    }
}

/// The available balance by what its credits are, when any of it was given (all paid says
/// nothing the balance does not): "Of which: 500.00 paid · 200.00 promotional".
fn by_category(v: &Visitor, report: &StatusReport) -> Option<String> {
    let given = report
        .by_category
        .iter()
        .any(|(category, credits)| !category.is_paid() && !credits.is_zero());
    if !given {
        return None;
    }
    let parts: Vec<String> = report
        .by_category
        .iter()
        .filter(|(_, credits)| !credits.is_zero())
        .map(|(category, credits)| {
            let key = format!("dashboard.category_{}", category.code());
            v.tf(&key, &[("amount", &format::credits(*credits))])
        })
        .collect();
    Some(v.tf("dashboard.by_category", &[("parts", &parts.join(" · "))]))
}

/// A call's tokens by kind, as one line of its transaction.
fn tokens_by_kind(v: &Visitor, tokens: &domain::pricing::TokenUsage) -> String {
    use domain::pricing::TokenKind;
    let n = |kind| format::count(tokens.get(kind));
    v.tf(
        "dashboard.tokens_by_kind",
        &[
            ("input", &n(TokenKind::Input)),
            ("output", &n(TokenKind::Output)),
            ("cache_read", &n(TokenKind::CacheRead)),
            ("cache_write", &n(TokenKind::CacheWrite)),
            ("reasoning", &n(TokenKind::Reasoning)),
        ],
    )
}

fn transaction_row(
    v: &Visitor,
    tx: &CreditTransaction,
    purchases: &Purchases,
    acting: &Acting,
) -> Markup {
    let spender = tx
        .member_id
        .as_ref()
        .filter(|_| acting.team().is_some())
        .map(|member| acting.member_name(member));
    let detail = [tx.context.feature.as_deref(), tx.context.model.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" · ");
    let tone = if tx.amount.is_decrease() {
        "amount-out"
    } else {
        "amount-in"
    };
    html! {
        tr data-kind=(tx.kind.code()) {
            td.nowrap data-label=(v.t("dashboard.col_date")) {
                (format::moment(tx.created_at, v.lang))
            }
            td data-label=(v.t("dashboard.col_description")) {
                span.cell-title data-testid="transaction-description" {
                    (v.t(&description_key(tx)))
                }
                @if !detail.is_empty() { span.cell-sub { (detail) } }
                @if let Some(tokens) = &tx.context.breakdown {
                    span.cell-sub data-testid="transaction-tokens" { (tokens_by_kind(v, tokens)) }
                }
                @if let Some(spender) = &spender {
                    span.cell-sub data-testid="transaction-member" {
                        (v.tf("dashboard.spent_by", &[("member", spender)]))
                    }
                }
                @if let Some(plan) = purchases.plan_of(tx) {
                    span.cell-sub data-testid="transaction-plan" { (plan) }
                }
                @if let Some(order) = &tx.context.order_id {
                    span.cell-sub.order-ref { code { (order) } }
                }
            }
            td.num.nowrap.(tone) data-label=(v.t("dashboard.col_change")) {
                (format::credit_delta(tx.amount))
            }
            td.num.nowrap data-label=(v.t("dashboard.col_balance_after")) {
                (format::credits(tx.balance_after))
            }
        }
    }
}

/// `POST /dashboard/subscription/cancel`: the subscription ends at its period's end. Decided by
/// the same use case as the API's cancel: the user's own subscription, or a team's whose billing
/// they manage; any other is not found.
pub(crate) async fn cancel_subscription(
    state: Arc<PageState>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    let form: CancelForm = read_form(&v, &mut request).await?;
    let user = require_user(&v)?;
    let id =
        super::parse_id(&form.subscription_id, SubscriptionId::new).ok_or(PageError::NotFound)?;
    let owned = application::authorization::Owned::Subscription(&id);
    super::dashboard_account::portal_may_act_on(&state, &v, &user, owned).await?;
    let cancelled = (state.ports.payments)
        .cancel_subscription_for(&user, &id, CancelWhen::PeriodEnd)
        .await;
    let notice = match cancelled {
        Ok(_) => "subscription_cancelled",
        Err(CancelSubscriptionError::NotFound | CancelSubscriptionError::NotOwner) => {
            return Err(PageError::NotFound);
        }
        Err(CancelSubscriptionError::Refused(_)) => "not_cancellable",
        Err(CancelSubscriptionError::Gateway(reason)) => {
            tracing::warn!(%reason, "page: subscription cancel failed at the provider");
            "cancel_failed"
        }
        Err(CancelSubscriptionError::Infra(e)) => return Err(e.into()),
    };
    Ok(redirect(&super::dashboard_account::back(
        &form.account_id,
        notice,
    )))
}
