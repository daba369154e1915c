//! The pages around the provider's checkout: `/pay/qr/{orderId}` (the `wallet_qr` QR code),
//! `/payment-success` (captures a payment that waits for the merchant's capture, PayPal's, then
//! waits until the order is paid and shows what was bought) and `/payment-cancel` (the buyer
//! left the checkout: a still-pending order is cancelled at once, here and at the provider, so no
//! dead "continue payment" link stays behind). Both word each order status as it is: paid,
//! pending, failed or declined, cancelled, expired, refunded.
//!
//! Waiting is done by `assets/app.js`: an element with `data-poll-order` makes it poll
//! `GET /api/payment/query/{orderId}` (same origin, session cookie) every 1.5 s for at most
//! 3 minutes, and go to `data-poll-next` once the order is no longer pending. Without
//! JavaScript the page offers a refresh link.

use std::sync::Arc;

use application::accounts::User;
use application::authorization::Owned;
use application::ports::{CheckoutTarget, OrderRecord};
use application::use_cases::cancel_payment::CancelOutcome;
use application::use_cases::query_payment::QueryPaymentError;
use application::use_cases::return_from_checkout::{
    CheckoutReturn, ReturnError, ReturnPage, Returned,
};
use domain::{Duration, OrderId, OrderStatus, PlanType, SubscriptionStatus};
use maud::{Markup, PreEscaped, html};
use poem::Request;
use poem::http::StatusCode;
use qrcode::QrCode;
use qrcode::render::svg;

use super::dashboard_account::portal_may_act_on;
use super::{PlanNames, message_panel, order_status_label, parse_id, require_user, status_tone};
use crate::format;
use crate::layout::{self, Nav};
use crate::state::{PageError, PageResult, PageState, Visitor, redirect};

/// `GET /pay/qr/{orderId}`: the QR code to scan, until the order is paid.
pub(crate) async fn qr(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    let user = require_user(&v)?;
    let raw = request.raw_path_param("order_id").unwrap_or_default();
    let order_id = parse_id(raw, OrderId::new).ok_or(PageError::NotFound)?;
    portal_may_act_on(&state, &v, &user, Owned::Order(&order_id)).await?;
    let record = own_order(&state, &user, &order_id).await?;
    let success = format!("/payment-success?orderId={}", record.order.id());
    let target = record.checkout.as_ref().map(|c| &c.target);
    let (OrderStatus::Pending, Some(CheckoutTarget::QrCode(link))) =
        (record.order.status(), target)
    else {
        return Ok(redirect(&success));
    };
    let names = PlanNames::load(&state, &v).await?;
    let body = html! {
        section.narrow.card.qr-card {
            h1 { (v.t("qr.title")) }
            p.muted { (v.t("qr.lead")) }
            (order_summary(&v, &record, &names))
            div.qr-code role="img" aria-label=(v.t("qr.image_label")) data-testid="qr-code" {
                (PreEscaped(qr_svg(link)))
            }
            (waiting(&v, &record, &success))
            @if v.sandbox_notice {
                p.sandbox-hint {
                    (v.t("qr.sandbox_hint")) " "
                    a href=(link) data-testid="open-checkout" { (v.t("qr.open_checkout")) }
                }
            }
            div.actions {
                a.btn.btn-ghost href="/pricing" { (v.t("qr.choose_another")) }
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("qr.title"),
        Nav::Pricing,
        body,
    ))
}

/// The buyer is back from the checkout with a return token (`rt`): the return does the page's
/// work without a session and says where the host application wants the buyer. `None` when the
/// query carries no token; an invalid token is refused unless the reader is signed in (then
/// the page is the session's, as without a token).
async fn returned(
    state: &PageState,
    v: &Visitor,
    page: ReturnPage,
) -> Result<Option<Returned>, PageError> {
    let (Some(raw_order), Some(token)) = (v.query("orderId"), v.query("rt")) else {
        return Ok(None);
    };
    let order_id = parse_id(raw_order, OrderId::new).ok_or(PageError::ReturnLinkInvalid)?;
    let request = CheckoutReturn {
        order_id,
        token: token.to_owned(),
        page,
    };
    match state.ports.payments.return_from_checkout(request).await {
        Ok(returned) => Ok(Some(returned)),
        Err(ReturnError::InvalidToken | ReturnError::NotFound) if v.user.is_some() => Ok(None),
        Err(ReturnError::InvalidToken | ReturnError::NotFound) => Err(PageError::ReturnLinkInvalid),
        Err(ReturnError::Infra(infra)) => Err(infra.into()),
    }
}

/// `GET /payment-success?orderId=…[&rt=…]`.
pub(crate) async fn success(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    let returned = returned(&state, &v, ReturnPage::Success).await?;
    if let Some(Returned {
        host_url: Some(url),
        ..
    }) = &returned
    {
        return Ok(redirect(url));
    }
    let user = match &returned {
        Some(returned) => returned.user.clone(),
        None => require_user(&v)?,
    };
    let Some(raw) = v.query("orderId").map(str::to_owned) else {
        let actions =
            html! { a.btn.btn-primary href="/dashboard" { (v.t("payment.to_dashboard")) } };
        let body = message_panel(
            v.t("payment.no_order_title"),
            v.t("payment.no_order_text"),
            actions,
        );
        return Ok(layout::page(
            &v,
            StatusCode::OK,
            v.t("payment.no_order_title"),
            Nav::Other,
            body,
        ));
    };
    let order_id = parse_id(&raw, OrderId::new).ok_or(PageError::NotFound)?;
    // The buyer is back from the provider: a payment that waits for the merchant's capture
    // (PayPal) is captured now (the return did it already), so that this page shows the result
    // at once.
    let record = match returned {
        Some(returned) => returned.record,
        None => {
            portal_may_act_on(&state, &v, &user, Owned::Order(&order_id)).await?;
            (state.ports.payments.confirm_payment(&user, &order_id).await).map_err(page_error)?
        }
    };
    let names = PlanNames::load(&state, &v).await?;
    let body = match record.order.status() {
        OrderStatus::Pending => pending(&v, &record, &names),
        OrderStatus::Paid { .. } | OrderStatus::PartiallyRefunded { .. } => {
            paid(&state, &v, &user, &record, &names).await?
        }
        _ => not_paid(&v, &record, &names),
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("payment.success_title"),
        Nav::Other,
        body,
    ))
}

/// `GET /payment-cancel?orderId=…[&rt=…]`.
pub(crate) async fn cancel(state: Arc<PageState>, v: Visitor, _request: Request) -> PageResult {
    let record = match returned(&state, &v, ReturnPage::Cancel).await? {
        Some(Returned {
            host_url: Some(url),
            ..
        }) => return Ok(redirect(&url)),
        Some(returned) => Some(returned.record),
        None => match (&v.user, v.query("orderId")) {
            (Some(user), Some(order_id)) => left_checkout(&state, &v, user, order_id).await,
            _ => None,
        },
    };
    let names = PlanNames::load(&state, &v).await?;
    let (title, text) = record
        .as_ref()
        .map_or(("payment.cancel_title", "payment.cancel_text"), |r| {
            status_words(r.order.status())
        });
    let body = html! {
        section.narrow.card.result-card {
            div.result-icon.is-neutral aria-hidden="true" { "×" }
            h1 { (v.t(title)) }
            p.lead data-testid="cancel-message" { (v.t(text)) }
            @if let Some(record) = &record {
                (failure_reason(record))
                (order_summary(&v, record, &names))
            }
            div.actions {
                a.btn.btn-primary href="/pricing" { (v.t("payment.back_to_pricing")) }
                @if v.user.is_some() {
                    a.btn.btn-secondary href="/dashboard" { (v.t("payment.to_dashboard")) }
                }
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t(title),
        Nav::Other,
        body,
    ))
}

/// The buyer came back from the checkout through its cancel link: their own order, cancelled now
/// if it is still pending (closed at the provider where the protocol allows), in the state it is
/// really in (paid meanwhile, failed, expired).
async fn left_checkout(
    state: &PageState,
    v: &Visitor,
    user: &User,
    raw: &str,
) -> Option<OrderRecord> {
    let order_id = &parse_id(raw, OrderId::new)?;
    (portal_may_act_on(state, v, user, Owned::Order(order_id)).await).ok()?;
    let record = state
        .ports
        .payments
        .query_payment(user, order_id)
        .await
        .ok()?;
    if *record.order.status() != OrderStatus::Pending {
        return Some(record);
    }
    match state.ports.payments.cancel_payment(user, order_id).await {
        Ok(CancelOutcome::OrderCancelled(cancelled, _)) => Some(cancelled),
        _ => state
            .ports
            .payments
            .query_payment(user, order_id)
            .await
            .ok(),
    }
}

/// The title and text keys that tell what happened to an order that is not (or no longer) paid
/// for, or that turned out paid after all.
fn status_words(status: &OrderStatus) -> (&'static str, &'static str) {
    match status {
        OrderStatus::Failed { .. } => ("payment.failed_title", "payment.failed_text"),
        OrderStatus::Expired => ("payment.expired_title", "payment.expired_text"),
        OrderStatus::Refunded { .. } => ("payment.refunded_title", "payment.refunded_text"),
        OrderStatus::Paid { .. } | OrderStatus::PartiallyRefunded { .. } => {
            ("payment.paid_already_title", "payment.paid_already_text")
        }
        OrderStatus::Cancelled => ("payment.cancel_title", "payment.cancel_text"),
        OrderStatus::Pending => ("payment.not_paid_title", "payment.not_paid_text"),
    }
}

/// The provider's reason for a failed payment, as the order keeps it (words safe to show).
fn failure_reason(record: &OrderRecord) -> Markup {
    html! {
        @if let OrderStatus::Failed { reason } = record.order.status() {
            @if !reason.is_empty() {
                p.muted data-testid="failure-reason" { (reason) }
            }
        }
    }
}

async fn own_order(
    state: &PageState,
    user: &User,
    order_id: &OrderId,
) -> Result<OrderRecord, PageError> {
    state
        .ports
        .payments
        .query_payment(user, order_id)
        .await
        .map_err(page_error)
}

fn page_error(e: QueryPaymentError) -> PageError {
    match e {
        QueryPaymentError::NotFound => PageError::NotFound,
        QueryPaymentError::Infra(infra) => infra.into(),
    }
}

fn qr_svg(link: &str) -> String {
    let svg = QrCode::new(link.as_bytes())
        .map(|code| {
            code.render::<svg::Color<'_>>()
                .min_dimensions(232, 232)
                .dark_color(svg::Color("#0f172a"))
                .light_color(svg::Color("#ffffff"))
                .build()
        })
        .unwrap_or_default();
    // Inline SVG must not carry an XML declaration.
    match svg.find("<svg") {
        Some(start) => svg[start..].to_owned(),
        None => String::new(),
    }
}

fn order_summary(v: &Visitor, record: &OrderRecord, names: &PlanNames) -> Markup {
    let order = &record.order;
    let code = order.status().code();
    html! {
        dl.summary {
            div {
                dt { (v.t("payment.plan")) }
                dd data-testid="order-plan" { (names.name(&order.plan().plan_id)) }
            }
            div { dt { (v.t("payment.amount")) } dd { (format::money(order.plan().price, v.lang)) } }
            div { dt { (v.t("payment.order")) } dd { code.order-ref { (order.id()) } } }
            div {
                dt { (v.t("payment.status")) }
                dd {
                    span.badge.(status_tone(code)) data-testid="order-status" {
                        (order_status_label(v, code))
                    }
                }
            }
        }
    }
}

fn waiting(v: &Visitor, record: &OrderRecord, next: &str) -> Markup {
    let here = format!("/payment-success?orderId={}", record.order.id());
    html! {
        div.waiting data-poll-order=(record.order.id()) data-poll-next=(next)
            data-poll-done-text=(v.t("payment.redirecting")) {
            span.spinner aria-hidden="true" {}
            p role="status" aria-live="polite" data-poll-text { (v.t("payment.waiting")) }
            p.muted.poll-timeout hidden data-poll-timeout {
                (v.t("payment.poll_timeout")) " "
                a href=(here) { (v.t("payment.refresh")) }
            }
            noscript { p { a href=(here) { (v.t("payment.refresh")) } } }
        }
    }
}

fn pending(v: &Visitor, record: &OrderRecord, names: &PlanNames) -> Markup {
    let here = format!("/payment-success?orderId={}", record.order.id());
    html! {
        section.narrow.card.result-card {
            h1 { (v.t("payment.confirming_title")) }
            p.lead { (v.t("payment.confirming_text")) }
            (order_summary(v, record, names))
            (waiting(v, record, &here))
        }
    }
}

fn not_paid(v: &Visitor, record: &OrderRecord, names: &PlanNames) -> Markup {
    let (title, text) = status_words(record.order.status());
    html! {
        section.narrow.card.result-card {
            div.result-icon.is-neutral aria-hidden="true" { "!" }
            h1 { (v.t(title)) }
            p.lead data-testid="outcome-message" { (v.t(text)) }
            (failure_reason(record))
            (order_summary(v, record, names))
            div.actions {
                a.btn.btn-primary href="/pricing" { (v.t("payment.back_to_pricing")) }
                a.btn.btn-secondary href="/dashboard" { (v.t("payment.to_dashboard")) }
            }
        }
    }
}

async fn paid(
    state: &PageState,
    v: &Visitor,
    user: &User,
    record: &OrderRecord,
    names: &PlanNames,
) -> Result<Markup, PageError> {
    let snapshot = record.order.plan();
    let what = match snapshot.plan_type {
        PlanType::Credits => {
            // The buyer's own balance; a pack bought for a team shows no balance here (the
            // buyer may no longer be a member when they come back to this page).
            let own = record.order.account_id().is_personal_of(&user.id);
            let balance = if own {
                Some(
                    state
                        .ports
                        .credits
                        .balance(record.order.account_id())
                        .await?,
                )
            } else {
                None
            };
            let added = snapshot.credits.map(format::credits).unwrap_or_default();
            html! {
                p.outcome data-testid="credits-added" {
                    (v.tf("payment.credits_added", &[("amount", &added)]))
                }
                @if let Some(balance) = balance {
                    p.balance-line {
                        (v.t("payment.new_balance")) " "
                        strong data-testid="balance" { (format::credits(balance)) }
                        " " (v.t("credits.unit"))
                    }
                }
            }
        }
        PlanType::Recurring => subscription_outcome(state, v, record).await?,
        PlanType::OneTime => match snapshot.duration {
            Some(Duration::Months(months)) => html! {
                p.outcome {
                    (v.tf("payment.access_months", &[("months", &months.get().to_string())]))
                }
            },
            _ => html! { p.outcome { (v.t("payment.lifetime_access")) } },
        },
    };
    let dashboard = if snapshot.plan_type == PlanType::Credits {
        "/dashboard?tab=credits"
    } else {
        "/dashboard"
    };
    Ok(html! {
        section.narrow.card.result-card data-testid="payment-paid" {
            div.result-icon.is-success aria-hidden="true" { "✓" }
            h1 { (v.t("payment.paid_title")) }
            (what)
            (order_summary(v, record, names))
            div.actions {
                a.btn.btn-primary href=(dashboard) { (v.t("payment.to_dashboard")) }
                a.btn.btn-ghost href="/pricing" { (v.t("payment.back_to_pricing")) }
            }
        }
    })
}

async fn subscription_outcome(
    state: &PageState,
    v: &Visitor,
    record: &OrderRecord,
) -> Result<Markup, PageError> {
    let report = (state.ports.credits)
        .report_account_status(record.order.account_id())
        .await?;
    let subscription = report.subscription.filter(|s| {
        *s.plan_id() == record.order.plan().plan_id && s.status() != SubscriptionStatus::Expired
    });
    Ok(html! {
        @if let Some(subscription) = subscription {
            p.outcome {
                (format::with_slot(
                    &v.tf("payment.subscription_active", &[("date", format::SLOT)]),
                    &format::day(subscription.current_period().end(), v.lang),
                ))
            }
        } @else {
            p.outcome { (v.t("payment.subscription_starting")) }
        }
        @if let Some(credits) = record.order.plan().credits {
            p.muted {
                (v.tf("pricing.credits_per_period", &[("amount", &format::credits(credits))]))
            }
        }
    })
}
