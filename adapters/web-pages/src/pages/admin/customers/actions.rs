//! A customer's actions, each in two steps: `POST …/confirm` shows what will happen and a
//! Confirm button (the idempotency key is made here, once), `POST …/apply` does it and returns to
//! the customer's page with a notice. Grants and debits, refunds and cancellations are the
//! admin console's use cases; this module only reads the forms and renders.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use application::accounts::User;
use application::use_cases::admin_console::{
    AdjustCredits, AdjustCreditsError, AdminCancelError, PlanAllowanceError,
};
use application::use_cases::refund_order::{RefundOrder, RefundOrderError};
use chrono::NaiveDate;
use domain::{IdempotencyKey, OrderId, PlanId, SubscriptionId, Timestamp, UserId};
use maud::{Markup, html};
use poem::Request;
use poem::http::StatusCode;
use rust_decimal::Decimal;

use super::PATH;
use crate::layout::{self, Nav, csrf_field};
use crate::pages::admin::{console, gate};
use crate::pages::parse_id;
use crate::state::{PageError, PageResult, PageState, Visitor, read_form, redirect};

type Fields = BTreeMap<String, String>;

fn field<'a>(fields: &'a Fields, name: &str) -> &'a str {
    fields.get(name).map_or("", |v| v.trim())
}

/// `2026-12-31` as the end of that UTC day; `None` for an empty field.
fn expiry(text: &str) -> Result<Option<Timestamp>, ()> {
    if text.is_empty() {
        return Ok(None);
    }
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| ())?;
    let end = date.and_hms_opt(23, 59, 59).ok_or(())?.and_utc();
    Ok(Some(Timestamp::from_unix_millis(end.timestamp_millis())))
}

/// What the confirmation asks, and the fields the Confirm form carries on.
fn question(v: &Visitor, fields: &Fields) -> Result<(String, Vec<&'static str>), PageError> {
    Ok(match field(fields, "action") {
        "credits" => {
            let amount =
                Decimal::from_str(field(fields, "amount")).map_err(|_| PageError::BadRequest)?;
            let key = if amount.is_sign_negative() {
                "console.confirm_debit"
            } else {
                "console.confirm_grant"
            };
            let text = v.tf(
                key,
                &[
                    ("amount", &amount.abs().to_string()),
                    ("reason", field(fields, "reason")),
                ],
            );
            (
                text,
                vec!["amount", "reason", "expiresOn", "category", "priority"],
            )
        }
        "refund" => {
            let text = v.tf(
                "console.confirm_refund",
                &[("order", field(fields, "orderId"))],
            );
            (text, vec!["orderId"])
        }
        "cancel" => {
            let text = v.tf(
                "console.confirm_cancel",
                &[("subscription", field(fields, "subscriptionId"))],
            );
            (text, vec!["subscriptionId"])
        }
        "cancel_now" => {
            let text = v.tf(
                "console.confirm_cancel_now",
                &[("subscription", field(fields, "subscriptionId"))],
            );
            (text, vec!["subscriptionId"])
        }
        action @ ("allow_plan" | "remove_allowance") => {
            let key = if action == "allow_plan" {
                "console.confirm_allow"
            } else {
                "console.confirm_remove_allowance"
            };
            (
                v.tf(key, &[("plan", field(fields, "planId"))]),
                vec!["planId"],
            )
        }
        _ => return Err(PageError::BadRequest),
    })
}

/// `POST /admin/customers/{id}/confirm`: what the action will do, and Confirm.
pub(crate) async fn confirm(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let fields: Fields = read_form(&v, &mut request).await?;
    gate(&v)?;
    let id = request.raw_path_param("id").unwrap_or_default().to_owned();
    let key = state.ports.admin.new_action_key();
    let (question, kept) = question(&v, &fields)?;
    let body = html! {
        (console::sections(&v, PATH))
        section.card.section-card.confirm-card data-testid="confirm" {
            h1 { (v.t("console.confirm_title")) }
            p.lead { (question) }
            form.stack method="post" action={(PATH) "/" (id) "/apply"} {
                (csrf_field(&v))
                input type="hidden" name="action" value=(field(&fields, "action"));
                input type="hidden" name="key" value=(key);
                @for name in kept {
                    input type="hidden" name=(name) value=(field(&fields, name));
                }
                @if field(&fields, "action") == "refund" {
                    div.field {
                        label for="refund-reason" { (v.t("console.refund_reason")) }
                        input #refund-reason type="text" name="reason" maxlength="200";
                    }
                }
                div.form-actions {
                    a.btn.btn-ghost href={(PATH) "/" (id)} { (v.t("console.confirm_back")) }
                    button.btn.btn-primary type="submit" data-testid="confirm-action" {
                        (v.t("console.confirm_do"))
                    }
                }
            }
        }
    };
    Ok(layout::page(
        &v,
        StatusCode::OK,
        v.t("console.confirm_title"),
        Nav::Admin,
        body,
    ))
}

/// The adjustment a confirmed credits form asks of customer `id`'s personal account.
fn adjustment(fields: &Fields, admin: User, id: &str) -> Result<AdjustCredits, PageError> {
    let amount = Decimal::from_str(field(fields, "amount")).map_err(|_| PageError::BadRequest)?;
    let expires_at = expiry(field(fields, "expiresOn")).map_err(|()| PageError::BadRequest)?;
    let idempotency_key =
        IdempotencyKey::new(field(fields, "key")).map_err(|_| PageError::BadRequest)?;
    // A malformed id names nobody, as the use case answers an unknown user.
    let user_id = parse_id(id, UserId::new).ok_or(PageError::NotFound)?;
    let priority = match field(fields, "priority").trim() {
        "" => None,
        text => Some(text.parse().map_err(|_| PageError::BadRequest)?),
    };
    Ok(AdjustCredits {
        admin,
        account_id: domain::AccountId::personal(&user_id),
        amount,
        reason: field(fields, "reason").to_owned(),
        expires_at,
        // What a grant's credits are; a debit has none (the form's default is ignored).
        category: domain::GrantCategory::parse(field(fields, "category"))
            .filter(|_| amount.is_sign_positive()),
        priority: priority.filter(|_| amount.is_sign_positive()),
        idempotency_key,
    })
}

/// `POST /admin/customers/{id}/apply`: do the confirmed action.
pub(crate) async fn apply(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let fields: Fields = read_form(&v, &mut request).await?;
    gate(&v)?;
    let admin = v.user.clone().ok_or(PageError::Forbidden)?;
    let id = request.raw_path_param("id").unwrap_or_default().to_owned();
    let back = format!("{PATH}/{id}");
    let ports = &state.ports;
    let outcome: Result<&str, String> = match field(&fields, "action") {
        "credits" => {
            let request = adjustment(&fields, admin, &id)?;
            let amount = request.amount;
            match ports.admin.adjust_credits(&request).await {
                Ok(_) if amount.is_sign_negative() => Ok("debited"),
                Ok(_) => Ok("granted"),
                Err(AdjustCreditsError::UserNotFound | AdjustCreditsError::AccountNotFound) => {
                    return Err(PageError::NotFound);
                }
                Err(AdjustCreditsError::Infra(e)) => return Err(e.into()),
                Err(e) => Err(e.to_string()),
            }
        }
        "refund" => {
            // A malformed id is not found, as the use case answers an unknown order.
            let order_id =
                parse_id(field(&fields, "orderId"), OrderId::new).ok_or(PageError::NotFound)?;
            let request = RefundOrder {
                order_id,
                amount: None,
                reason: field(&fields, "reason").to_owned(),
            };
            match ports.admin.refund_order(&admin, &request).await {
                Ok(_) => Ok("refunded"),
                Err(RefundOrderError::NotFound) => return Err(PageError::NotFound),
                Err(RefundOrderError::Infra(e)) => return Err(e.into()),
                Err(e) => Err(e.to_string()),
            }
        }
        action @ ("cancel" | "cancel_now") => {
            let subscription = field(&fields, "subscriptionId");
            cancel(&state, &admin, subscription, action == "cancel_now").await?
        }
        action @ ("allow_plan" | "remove_allowance") => {
            let remove = action == "remove_allowance";
            allowance(&state, &admin, (&id, field(&fields, "planId")), remove).await?
        }
        _ => return Err(PageError::BadRequest),
    };
    match outcome {
        Ok(notice) => Ok(redirect(&format!("{back}?notice={notice}"))),
        Err(reason) => Ok(refused(&v, &back, &reason)),
    }
}

/// Cancel `subscription` at period end or (`now`) through the provider's immediate cancel: the
/// notice, or why it was refused.
async fn cancel(
    state: &PageState,
    admin: &User,
    subscription: &str,
    now: bool,
) -> Result<Result<&'static str, String>, PageError> {
    // A malformed id is not found, as the use case answers an unknown one.
    let subscription = &parse_id(subscription, SubscriptionId::new).ok_or(PageError::NotFound)?;
    let ports = &state.ports;
    let result = if now {
        ports
            .admin
            .cancel_subscription_now_for_customer(admin, subscription)
            .await
            .map(|_| "cancel_requested")
    } else {
        ports
            .admin
            .cancel_subscription_for_customer(admin, subscription)
            .await
            .map(|_| "canceled")
    };
    match result {
        Ok(notice) => Ok(Ok(notice)),
        Err(AdminCancelError::NotFound) => Err(PageError::NotFound),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Allow the customer `user` the plan `plan`, or (`remove`) withdraw it: the notice, or why it
/// was refused (an unknown plan is said, an unknown customer is not found).
async fn allowance(
    state: &PageState,
    admin: &User,
    (user, plan): (&str, &str),
    remove: bool,
) -> Result<Result<&'static str, String>, PageError> {
    let user = parse_id(user, UserId::new).ok_or(PageError::NotFound)?;
    let Ok(plan) = PlanId::new(plan) else {
        return Ok(Err(PlanAllowanceError::PlanNotFound.to_string()));
    };
    let admin_port = &state.ports.admin;
    let result = if remove {
        (admin_port.remove_plan_allowance(admin, &user, &plan).await).map(|()| "allowance_removed")
    } else {
        (admin_port.allow_plan(admin, &user, &plan).await).map(|_| "allowed")
    };
    match result {
        Ok(notice) => Ok(Ok(notice)),
        Err(PlanAllowanceError::UserNotFound) => Err(PageError::NotFound),
        Err(PlanAllowanceError::Infra(e)) => Err(e.into()),
        Err(e) => Ok(Err(e.to_string())),
    }
}

fn refused(v: &Visitor, back: &str, reason: &str) -> poem::Response {
    let body: Markup = html! {
        (console::sections(v, PATH))
        section.card.section-card data-testid="refused" {
            h1 { (v.t("console.refused_title")) }
            div.alert.alert-danger role="alert" { (reason) }
            a.btn.btn-secondary href=(back) { (v.t("console.confirm_back")) }
        }
    };
    layout::page(
        v,
        StatusCode::UNPROCESSABLE_ENTITY,
        v.t("console.refused_title"),
        Nav::Admin,
        body,
    )
}
