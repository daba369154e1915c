//! Host events as JSON: the Standard Webhooks envelope
//! `{"id": "evt_…", "type": "order.paid", "timestamp": RFC 3339, "data": {…}}`, whose `data`
//! shows orders, subscriptions, transactions and reservations with the API's own views. The
//! wiring gives it to the store, which keeps the bytes it renders.

use application::host_events::{HostEvent, HostEventData, LimitTold, MismatchTold, ThresholdTold};
use application::ports::HostEventEncoder;
use domain::{Money, Order, OrderStatus};
use poem_openapi::types::ToJSON;
use serde_json::{Map, Value, json};

use crate::credits::TransactionView;
use crate::dto::{OrderView, ReservationView, SubscriptionView, major_units, timestamp};
use crate::entitlements::entitlements_json;
use crate::i18n::Language;

/// The JSON encoder of host events.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostEventJson;

impl HostEventEncoder for HostEventJson {
    fn encode(&self, event: &HostEvent, event_id: &str, host_subject: Option<&str>) -> String {
        let mut data = Map::new();
        let user = event.user.as_ref().map(|u| u.as_str());
        data.insert("userId".into(), json!(user));
        // The account the event is about: the ledger's, a member's, an order's, a
        // subscription's or the one whose entitlements changed, else the user's personal
        // account.
        let account = event
            .data
            .account()
            .map(ToString::to_string)
            .or_else(|| user.map(str::to_owned));
        data.insert("accountId".into(), json!(account));
        if let Some(member) = event.data.member() {
            data.insert("memberId".into(), json!(member.as_str()));
        }
        if let Some(subject) = host_subject {
            data.insert("hostSubject".into(), json!(subject));
        }
        fill(&mut data, &event.data);
        json!({
            "id": event_id,
            "type": event.kind.code(),
            "timestamp": timestamp(event.occurred_at),
            "data": data,
        })
        .to_string()
    }
}

fn view(value: &impl ToJSON) -> Value {
    value.to_json().unwrap_or(Value::Null)
}

fn money(prefix: &str, amount: Money, into: &mut Map<String, Value>) {
    into.insert(prefix.to_owned(), json!(major_units(amount)));
    into.insert(format!("{prefix}Minor"), json!(amount.amount_minor()));
}

fn transaction(t: &application::ports::CreditTransaction) -> Value {
    view(&TransactionView::new(t, Language::English))
}

/// `data`'s fields besides the user's.
fn fill(data: &mut Map<String, Value>, what: &HostEventData) {
    match what {
        HostEventData::Order(order) => {
            data.insert("order".into(), view(&OrderView::of(order)));
            if let OrderStatus::Failed { reason } = order.status() {
                data.insert("reason".into(), json!(reason));
            }
        }
        HostEventData::OrderRefunded {
            order,
            amount,
            refunded_total,
        } => refunded(data, order, *amount, *refunded_total),
        HostEventData::Subscription {
            subscription,
            access,
        } => {
            let shown = SubscriptionView::new(subscription, *access);
            data.insert("subscription".into(), view(&shown));
        }
        HostEventData::Transaction(t) => {
            data.insert("transaction".into(), transaction(t));
        }
        HostEventData::Balance {
            balance,
            threshold,
            transaction: spend,
        } => crossing(data, *balance, *threshold, spend),
        HostEventData::Threshold {
            threshold,
            balance,
            transaction: posting,
        } => threshold_crossed(data, threshold, *balance, posting),
        HostEventData::Reservation {
            reservation,
            transaction: written,
        } => reservation_step(data, reservation, written.as_ref()),
        HostEventData::Mismatch(told) => mismatch(data, told),
        HostEventData::LimitReached {
            limit,
            transaction: spend,
        } => {
            data.insert("limit".into(), limit_told(limit, &spend.account_id));
            data.insert("transaction".into(), transaction(spend));
        }
        HostEventData::LimitReset { limit, account } => {
            data.insert("limit".into(), limit_told(limit, account));
        }
        HostEventData::Member {
            member,
            previous_role,
            by,
        } => member_changed(data, member, *previous_role, by),
        HostEventData::SeatsExceeded {
            seats, members, by, ..
        } => seats_exceeded(data, *seats, *members, by.as_ref()),
        HostEventData::PromoRedeemed { .. } => promo_redeemed(data, what),
        HostEventData::TopUp(_) | HostEventData::TopUpDisabled { .. } => top_up(data, what),
        HostEventData::Entitlements {
            entitlements,
            previous,
            ..
        } => {
            for (name, held) in [("entitlements", entitlements), ("previous", previous)] {
                data.insert(name.into(), view(&entitlements_json(held)));
            }
        }
    }
}

/// A reservation's step: the reservation after it, and the transaction it wrote, if any.
fn reservation_step(
    data: &mut Map<String, Value>,
    reservation: &application::ports::Reservation,
    written: Option<&application::ports::CreditTransaction>,
) {
    let shown = view(&ReservationView::from(reservation));
    data.insert("reservation".into(), shown);
    if let Some(t) = written {
        data.insert("transaction".into(), transaction(t));
    }
}

/// A refund of `order`: this time's amount, the total, and whether it was full.
fn refunded(data: &mut Map<String, Value>, order: &Order, amount: Money, refunded_total: Money) {
    let mut refund = Map::new();
    money("amount", amount, &mut refund);
    money("refundedTotal", refunded_total, &mut refund);
    refund.insert("currency".into(), json!(refunded_total.currency().code()));
    let full = matches!(order.status(), OrderStatus::Refunded { .. });
    refund.insert("full".into(), json!(full));
    data.insert("order".into(), view(&OrderView::of(order)));
    data.insert("refund".into(), Value::Object(refund));
}

/// A balance crossing: the balance after the spend, the threshold crossed, and the spend.
fn crossing(
    data: &mut Map<String, Value>,
    balance: domain::Credits,
    threshold: Option<domain::Credits>,
    spend: &application::ports::CreditTransaction,
) {
    data.insert("balance".into(), json!(balance.to_string()));
    data.insert("balanceHundredths".into(), json!(balance.hundredths()));
    if let Some(threshold) = threshold {
        data.insert("threshold".into(), json!(threshold.to_string()));
        data.insert("thresholdHundredths".into(), json!(threshold.hundredths()));
    }
    data.insert("transaction".into(), transaction(spend));
}

/// A crossing of one of the account's thresholds: the threshold, the balance after the posting,
/// and the posting.
fn threshold_crossed(
    data: &mut Map<String, Value>,
    threshold: &ThresholdTold,
    balance: domain::Credits,
    posting: &application::ports::CreditTransaction,
) {
    data.insert(
        "threshold".into(),
        threshold_told(threshold, &posting.account_id),
    );
    crossing(data, balance, None, posting);
}

/// A balance threshold as `credits.threshold_crossed` and `credits.recovered` tell it: how it
/// is set (as `GET /api/thresholds` shows it) and the level it sat at when crossed.
fn threshold_told(told: &ThresholdTold, account: &domain::AccountId) -> Value {
    let mut shown = json!({
        "id": told.id.to_string(),
        "accountId": account.to_string(),
        "level": told.at.to_string(),
        "levelHundredths": told.at.hundredths(),
    });
    match &told.level {
        domain::ThresholdLevel::Credits(c) => {
            shown["credits"] = json!(c.to_string());
            shown["creditsHundredths"] = json!(c.hundredths());
        }
        domain::ThresholdLevel::PercentOfGrant(p) => {
            shown["percentOfGrant"] = json!(p);
        }
        domain::ThresholdLevel::PercentOfLimit { limit, percent } => {
            shown["percentOfLimit"] = json!(percent);
            shown["limitId"] = json!(limit.as_str());
        }
    }
    shown
}

/// A spend limit as `limit.reached` tells it: as `GET /api/limits` shows one, after the spend.
fn limit_told(told: &LimitTold, account: &domain::AccountId) -> Value {
    let limit = &told.limit;
    let left = limit
        .credits
        .checked_sub(told.used)
        .unwrap_or(domain::Credits::ZERO);
    let mut shown = json!({
        "id": told.id.to_string(),
        "accountId": account.to_string(),
        "window": limit.window.code(),
        "enforcement": limit.enforcement.code(),
        "credits": limit.credits.to_string(),
        "creditsHundredths": limit.credits.hundredths(),
        "used": told.used.to_string(),
        "usedHundredths": told.used.hundredths(),
        "left": left.to_string(),
        "leftHundredths": left.hundredths(),
        "resetsAt": timestamp(told.resets_at),
        "createdAt": timestamp(told.created_at),
    });
    let scope = &told.scope;
    if let Some(feature) = &scope.feature {
        shown["feature"] = json!(feature);
    }
    if let Some(model) = &scope.model {
        shown["model"] = json!(model);
    }
    if let Some(key) = &scope.api_key {
        shown["apiKeyId"] = json!(key);
    }
    if let Some(member) = &scope.member {
        shown["memberId"] = json!(member.as_str());
    }
    if let Some(hours) = limit.window.rolling_hours() {
        shown["rollingHours"] = json!(hours);
    }
    shown
}

/// A member change: the member's role now (as it was, for a removal), before, and who acted.
fn member_changed(
    data: &mut Map<String, Value>,
    member: &application::ports::Member,
    previous: Option<domain::MemberRole>,
    by: &domain::UserId,
) {
    data.insert("role".into(), json!(member.role.code()));
    if let Some(previous) = previous {
        data.insert("previousRole".into(), json!(previous.code()));
    }
    data.insert("by".into(), json!(by.as_str()));
}

/// `account.seats_exceeded`: the cap, the members, who asked for the refused addition (`null`
/// when the team's seats went down below its members), and which of the two it was.
fn seats_exceeded(
    data: &mut Map<String, Value>,
    seats: u64,
    members: u64,
    by: Option<&domain::UserId>,
) {
    data.insert("seats".into(), json!(seats));
    data.insert("members".into(), json!(members));
    data.insert("by".into(), json!(by.map(domain::UserId::as_str)));
    let cause = if by.is_some() {
        "addition_refused"
    } else {
        "seats_reduced"
    };
    data.insert("cause".into(), json!(cause));
}

/// An `auto_top_up.*` event's account, and the top-up as it stands (or why the rule was turned
/// off).
fn top_up(data: &mut Map<String, Value>, what: &HostEventData) {
    match what {
        HostEventData::TopUp(top_up) => {
            data.insert("accountId".into(), json!(top_up.account_id.as_str()));
            let shown = crate::auto_top_up::TopUpView::from(top_up);
            data.insert("topUp".into(), view(&shown));
        }
        HostEventData::TopUpDisabled { account, reason } => {
            data.insert("accountId".into(), json!(account.as_str()));
            data.insert("reason".into(), json!(reason.code()));
        }
        _ => {}
    }
}

/// `promo_code.redeemed`'s code, redemption, credits, their category and expiry.
fn promo_redeemed(data: &mut Map<String, Value>, what: &HostEventData) {
    let HostEventData::PromoRedeemed {
        code,
        redemption,
        category,
        expires_at,
    } = what
    else {
        return;
    };
    data.insert("code".into(), json!(code.as_str()));
    data.insert("redemptionId".into(), json!(redemption.id));
    data.insert("credits".into(), json!(redemption.credits.to_string()));
    data.insert("category".into(), json!(category.code()));
    data.insert("expiresAt".into(), json!(expires_at.map(timestamp)));
}

fn mismatch(data: &mut Map<String, Value>, told: &MismatchTold) {
    data.insert("provider".into(), json!(told.provider.as_str()));
    data.insert("providerEventId".into(), json!(told.event_id));
    data.insert("providerEventType".into(), json!(told.event_type));
    data.insert("detail".into(), json!(told.detail));
    if let Some(order) = &told.order {
        data.insert("order".into(), view(&OrderView::of(order)));
    }
}
