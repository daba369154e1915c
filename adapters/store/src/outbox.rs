//! The transactional outbox of host events (issue 17, CORRECTNESS.md invariant 13): the one
//! place where an event is rendered to JSON and written, always inside the caller's transaction,
//! and the reads of the catch-up feed.
//!
//! A transaction body collects what it changed into an [`Outbox`] and calls [`Outbox::write`]
//! before it commits: one multi-row `INSERT` for every event of the transaction, nothing at all
//! when it changed nothing. The envelope is the Standard Webhooks payload shape,
//! `{"id": "evt_…", "type": "order.paid", "timestamp": RFC 3339, "data": {…}}`, and the objects
//! in `data` use the HTTP API's field names (`OrderView`, `SubscriptionView`, `TransactionView`).
//!
//! Event ids are derived from the fact they tell (its type and the unique thing that changed:
//! the provider event that caused it, the ledger transaction, the order) and from when it
//! happened: `evt_`, 12 hex digits of the time, 20 of a SHA-256 ([`event_id`]). Writing the same
//! fact twice is therefore a no-op (`ON CONFLICT DO NOTHING`), new ids append to the `event_id`
//! index, and the store needs no source of randomness.
//!
//! Visibility (PostgreSQL): transactions commit in any order, so [`events_after`] returns only
//! rows whose writing transaction (`txid`) is older than every transaction still running, and
//! an id begins with its transaction's id (`txid << 20`, migration step 18), so every event a
//! running transaction can still commit has a larger id than any row returned: a reader never
//! moves its cursor past an event that commits later. SQLite has one writer at a time, so id
//! order is commit order there.

use application::host_events::HostEventKind;
use std::sync::Arc;

use application::ports::{
    CreditTransaction, EntitlementRules, EventsRead, HOST_USER_ID_PREFIX, HostEventLog,
    MAX_EVENTS_PER_READ, OrderRecord, Reservation, ReservationStatus, StoreError, StoredEvent,
};
use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat};
use domain::{BalanceAlert, Money, OrderStatus, RenewalIntent, Subscription, Timestamp, UserId};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Value};
use serde_json::{Map, Value as Json, json};
use sha2::{Digest, Sha256};

use crate::opt_in::Wanted;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql;
use crate::{SeaOrmStore, entitlements_told};

/// One event to write: its type, whose, what (`data` without the user fields) and when.
#[derive(Debug, Clone)]
pub(crate) struct NewEvent {
    kind: HostEventKind,
    /// What makes this fact unique among facts of its type (its event id derives from it).
    fact: String,
    user: Option<UserId>,
    data: Map<String, Json>,
    occurred_at: Timestamp,
}

impl NewEvent {
    /// An event of `kind` telling `fact` (unique among facts of its type; its id derives from
    /// it), about `user`, with `data` besides the user fields, that happened `at`.
    pub(crate) fn new(
        kind: HostEventKind,
        fact: String,
        user: Option<UserId>,
        data: Map<String, Json>,
        occurred_at: Timestamp,
    ) -> Self {
        Self {
            kind,
            fact,
            user,
            data,
            occurred_at,
        }
    }
}

/// The events one transaction collected, written together by [`Outbox::write`].
#[derive(Debug, Default)]
pub(crate) struct Outbox(Vec<NewEvent>);

impl Outbox {
    /// Add an event.
    pub(crate) fn push(&mut self, event: NewEvent) {
        self.0.push(event);
    }

    /// Add every event of `events`.
    pub(crate) fn extend(&mut self, events: impl IntoIterator<Item = NewEvent>) {
        self.0.extend(events);
    }

    /// Write every collected event in one statement, inside the caller's transaction; nothing
    /// when there is none.
    pub(crate) async fn write<C: ConnectionTrait>(self, conn: &C) -> Result<(), DbErr> {
        match self.statement(conn, 1).await? {
            Some((sql, values)) => sql::execute(conn, &sql, values).await.map(drop),
            None => Ok(()),
        }
    }

    /// The one `INSERT` of every collected event, its placeholders numbered from `$first` (so
    /// that a caller can send it in one statement with another, as a grant does with its lot),
    /// and its values; `None` when there is none.
    pub(crate) async fn statement<C: ConnectionTrait>(
        self,
        conn: &C,
        first: usize,
    ) -> Result<Option<(String, Vec<Value>)>, DbErr> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let subjects = host_subjects(conn, &self.0).await?;
        let mut placeholders = Vec::with_capacity(self.0.len());
        let mut values: Vec<Value> = Vec::with_capacity(self.0.len() * 5);
        for (i, event) in self.0.into_iter().enumerate() {
            let n = first + i * 5;
            placeholders.push(format!(
                "(${}, ${}, ${}, ${}, ${})",
                n,
                n + 1,
                n + 2,
                n + 3,
                n + 4
            ));
            let subject = event
                .user
                .as_ref()
                .and_then(|u| subjects.iter().find(|(id, _)| id == u.as_str()))
                .map(|(_, subject)| subject.clone());
            let (code, occurred_at) = (event.kind.code(), event.occurred_at.unix_millis());
            let user = event.user.as_ref().map(|u| u.as_str().to_owned());
            let (event_id, payload) =
                envelope(event, subject).map_err(|e| DbErr::Custom(format!("event JSON: {e}")))?;
            values.extend([
                event_id.into(),
                code.into(),
                user.into(),
                payload.into(),
                occurred_at.into(),
            ]);
        }
        let sql = format!(
            "INSERT INTO events (event_id, event_type, user_id, payload, occurred_at) \
             VALUES {} ON CONFLICT (event_id) DO NOTHING",
            placeholders.join(", ")
        );
        Ok(Some((sql, values)))
    }

    /// Write one event on its own (inside the caller's transaction).
    pub(crate) async fn write_one<C: ConnectionTrait>(
        conn: &C,
        event: NewEvent,
    ) -> Result<(), DbErr> {
        Outbox(vec![event]).write(conn).await
    }
}

/// `(user id, host subject)` of the events' users that sign in through a host application.
async fn host_subjects<C: ConnectionTrait>(
    conn: &C,
    events: &[NewEvent],
) -> Result<Vec<(String, String)>, DbErr> {
    // Only a host identity's own user has a subject: its id is derived from the identity when
    // both are created together (`users::create_host_user`), so other users need no read.
    let mut users: Vec<&str> = events
        .iter()
        .filter_map(|e| e.user.as_ref().map(UserId::as_str))
        .filter(|u| u.starts_with(HOST_USER_ID_PREFIX))
        .collect();
    users.sort_unstable();
    users.dedup();
    let mut found = Vec::new();
    for user in users {
        let sql = "SELECT subject FROM host_identities WHERE user_id = $1";
        let row = sql::rows(conn, sql, vec![user.into()]).await?;
        if let Some(row) = row.first() {
            found.push((user.to_owned(), row.try_get::<String>("", "subject")?));
        }
    }
    Ok(found)
}

/// The id of the event of type `code` telling `fact` at `at`: `evt_`, then 12 hex digits of
/// `at` in milliseconds and 20 of a SHA-256 of the type and the fact.
///
/// The time comes first so that ids grow with time: each new id lands at the right-hand end of
/// the `event_id` index instead of on a random page of it (on SQLite, one page written per commit
/// instead of one per event; issue 17's outbox cost). The same fact told at the same moment (a
/// transaction run again, a change applied twice) still gets the same id, which the index turns
/// into a no-op; and every event's `at` is fixed by what caused it (the provider event's arrival,
/// the ledger transaction's time, the reconciler pass's moment), not by when it is written.
fn event_id(code: &str, fact: &str, at: Timestamp) -> String {
    use std::fmt::Write as _;
    let digest = Sha256::digest(format!("{code}\n{fact}").as_bytes());
    // 48 bits of milliseconds reach the year 10889; a time before 1970 counts as 0.
    let millis = u64::try_from(at.unix_millis()).unwrap_or(0) & 0xffff_ffff_ffff;
    let mut id = format!("evt_{millis:012x}");
    for b in &digest[..10] {
        let _ = write!(id, "{b:02x}");
    }
    id
}

/// The Standard Webhooks envelope, serialized straight from borrowed parts.
#[derive(serde::Serialize)]
struct Envelope<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    timestamp: String,
    data: &'a Map<String, Json>,
}

/// The event id and the complete JSON envelope of `event` (serializing strings, numbers and
/// maps of them does not fail; the error is passed on all the same).
fn envelope(
    event: NewEvent,
    host_subject: Option<String>,
) -> Result<(String, String), serde_json::Error> {
    let code = event.kind.code();
    let event_id = event_id(code, &event.fact, event.occurred_at);
    let mut data = Map::new();
    data.insert(
        "userId".into(),
        event
            .user
            .as_ref()
            .map_or(Json::Null, |u| Json::String(u.as_str().to_owned())),
    );
    if let Some(subject) = host_subject {
        data.insert("hostSubject".into(), Json::String(subject));
    }
    data.extend(event.data);
    let envelope = Envelope {
        id: &event_id,
        kind: code,
        timestamp: timestamp(event.occurred_at),
        data: &data,
    };
    let payload = serde_json::to_string(&envelope)?;
    Ok((event_id, payload))
}

/// A timestamp as the API shows it: RFC 3339 in UTC with milliseconds.
fn timestamp(t: Timestamp) -> String {
    DateTime::from_timestamp_millis(t.unix_millis())
        .map(|d| d.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_else(|| t.unix_millis().to_string())
}

fn money_fields(prefix: &str, money: Money, into: &mut Map<String, Json>) {
    into.insert(
        prefix.to_owned(),
        Json::String(money.to_decimal().to_string()),
    );
    into.insert(format!("{prefix}Minor"), json!(money.amount_minor()));
}

/// An order as `OrderView` shows it (an order that is told about is never pending, so it has
/// no payment URL).
fn order_view(record: &OrderRecord) -> Json {
    let order = &record.order;
    let plan = order.plan();
    let mut view = Map::new();
    view.insert("orderId".into(), json!(order.id().as_str()));
    view.insert("status".into(), json!(order.status().code()));
    view.insert("planId".into(), json!(plan.plan_id.as_str()));
    view.insert("planType".into(), json!(plan.plan_type.as_str()));
    view.insert("provider".into(), json!(order.provider().as_str()));
    money_fields("amount", plan.price, &mut view);
    view.insert("currency".into(), json!(plan.price.currency().code()));
    if let Some(credits) = plan.credits {
        view.insert("credits".into(), json!(credits.to_string()));
        view.insert("creditsHundredths".into(), json!(credits.hundredths()));
    }
    view.insert("createdAt".into(), json!(timestamp(order.created_at())));
    view.insert("expiresAt".into(), json!(timestamp(order.expires_at())));
    if let OrderStatus::Paid { paid_at }
    | OrderStatus::PartiallyRefunded { paid_at, .. }
    | OrderStatus::Refunded { paid_at } = order.status()
    {
        view.insert("paidAt".into(), json!(timestamp(*paid_at)));
    }
    Json::Object(view)
}

/// A subscription as `SubscriptionView` shows it, without `accessUntil` (which depends on the
/// service's past-due grace; the status and period say when access ends).
fn subscription_view(s: &Subscription) -> Json {
    let mut view = json!({
        "id": s.id().as_str(),
        "planId": s.plan_id().as_str(),
        "provider": s.provider().as_str(),
        "status": s.status().code(),
        "currentPeriodStart": timestamp(s.current_period().start()),
        "currentPeriodEnd": timestamp(s.current_period().end()),
        "cancelAtPeriodEnd": s.renewal() == RenewalIntent::EndsAtPeriodEnd,
    });
    // The plan a switch at the period's end starts when it ends (`subscription.ended` tells it).
    if let (Some(switch), Json::Object(fields)) = (s.scheduled_switch(), &mut view) {
        fields.insert("scheduledPlanId".into(), json!(switch.plan_id().as_str()));
    }
    view
}

/// A credit transaction as `TransactionView` shows it, without the localised description.
fn transaction_view(t: &CreditTransaction) -> Json {
    let amount = if t.amount.is_decrease() {
        format!("-{}", t.amount.magnitude())
    } else {
        t.amount.magnitude().to_string()
    };
    let mut view = Map::new();
    view.insert("id".into(), json!(t.id));
    view.insert("type".into(), json!(t.kind.code()));
    view.insert("amount".into(), json!(amount));
    view.insert("amountHundredths".into(), json!(t.amount.hundredths()));
    view.insert("balanceAfter".into(), json!(t.balance_after.to_string()));
    view.insert(
        "balanceAfterHundredths".into(),
        json!(t.balance_after.hundredths()),
    );
    let c = &t.context;
    let optional = [
        ("orderId", c.order_id.as_ref().map(|o| json!(o.as_str()))),
        (
            "reservationId",
            c.reservation_id.as_ref().map(|r| json!(r.as_str())),
        ),
        (
            "subscriptionId",
            c.subscription_id.as_ref().map(|s| json!(s.as_str())),
        ),
        ("feature", c.feature.as_ref().map(|f| json!(f))),
        ("model", c.model.as_ref().map(|m| json!(m))),
        ("tokens", c.tokens.map(|t| json!(t))),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            view.insert(name.into(), value);
        }
    }
    view.insert("createdAt".into(), json!(timestamp(t.created_at)));
    Json::Object(view)
}

fn one(name: &str, value: Json) -> Map<String, Json> {
    let mut data = Map::new();
    data.insert(name.to_owned(), value);
    data
}

/// The event an order's change tells, if any: paid, failed, cancelled, expired, or refunded (by
/// how much). `cause` names what changed it uniquely (the provider event, or the order itself
/// for a change that happens once).
pub(crate) fn order_changed(
    before: &OrderRecord,
    after: &OrderRecord,
    cause: &str,
    at: Timestamp,
) -> Option<NewEvent> {
    let (old, new) = (before.order.status(), after.order.status());
    let order = after.order.id().as_str();
    let event = |kind, fact: String, data| NewEvent {
        kind,
        fact,
        user: Some(after.order.user_id().clone()),
        data,
        occurred_at: at,
    };
    if new.code() == "paid" && old.code() != "paid" {
        let data = one("order", order_view(after));
        return Some(event(HostEventKind::OrderPaid, order.to_owned(), data));
    }
    if new.code() == "failed" && old.code() != "failed" {
        let mut data = one("order", order_view(after));
        if let OrderStatus::Failed { reason } = new {
            data.insert("reason".into(), json!(reason));
        }
        return Some(event(HostEventKind::OrderFailed, order.to_owned(), data));
    }
    // An unpaid order that stops waiting for its payment (only a pending order can).
    let stopped = match new {
        OrderStatus::Cancelled => Some(HostEventKind::OrderCancelled),
        OrderStatus::Expired => Some(HostEventKind::OrderExpired),
        _ => None,
    };
    if let Some(kind) = stopped
        && old.code() != new.code()
    {
        let data = one("order", order_view(after));
        return Some(event(kind, order.to_owned(), data));
    }
    let (Some(was), Some(now)) = (before.order.refunded(), after.order.refunded()) else {
        return None;
    };
    let refunded = now.amount_minor() - was.amount_minor();
    if refunded <= 0 {
        return None;
    }
    let mut refund = Map::new();
    money_fields(
        "amount",
        Money::from_minor(refunded, now.currency()).ok()?,
        &mut refund,
    );
    money_fields("refundedTotal", now, &mut refund);
    refund.insert("currency".into(), json!(now.currency().code()));
    refund.insert("full".into(), json!(new.code() == "refunded"));
    let mut data = one("order", order_view(after));
    data.insert("refund".into(), Json::Object(refund));
    let fact = format!("{order}|{}|{cause}", now.amount_minor());
    Some(event(HostEventKind::OrderRefunded, fact, data))
}

/// The events a subscription's change tells: `before` is `None` for a new subscription.
pub(crate) fn subscription_changed(
    before: Option<&Subscription>,
    after: &Subscription,
    cause: &str,
    at: Timestamp,
) -> Vec<NewEvent> {
    use domain::SubscriptionStatus::{Active, Canceled, Expired, PastDue};
    let ended = |s: &Subscription| matches!(s.status(), Canceled | Expired);
    let mut kinds = Vec::new();
    match before {
        None if after.is_live() => kinds.push(HostEventKind::SubscriptionActivated),
        None => {}
        Some(old) => {
            if after.status() == Active
                && after.current_period().start() > old.current_period().start()
            {
                kinds.push(HostEventKind::SubscriptionRenewed);
            }
            if after.status() == PastDue && old.status() != PastDue {
                kinds.push(HostEventKind::SubscriptionPastDue);
            }
            if after.is_live()
                && after.renewal() == RenewalIntent::EndsAtPeriodEnd
                && old.renewal() != RenewalIntent::EndsAtPeriodEnd
            {
                kinds.push(HostEventKind::SubscriptionCancelScheduled);
            }
            if after.is_live()
                && old.is_live()
                && old.renewal() == RenewalIntent::EndsAtPeriodEnd
                && after.renewal() != RenewalIntent::EndsAtPeriodEnd
            {
                kinds.push(HostEventKind::SubscriptionResumed);
            }
            if after.is_live() && after.plan_id() != old.plan_id() {
                kinds.push(HostEventKind::SubscriptionPlanChanged);
            }
            if ended(after) && !ended(old) {
                kinds.push(HostEventKind::SubscriptionEnded);
            }
        }
    }
    kinds
        .into_iter()
        .map(|kind| NewEvent {
            kind,
            fact: format!("{}|{cause}", after.id()),
            user: Some(after.user_id().clone()),
            data: one("subscription", subscription_view(after)),
            occurred_at: at,
        })
        .collect()
}

/// The event a written credit transaction tells: granted, clawed back or expired (consumption
/// and reservations tell nothing here).
pub(crate) fn credits_changed(t: &CreditTransaction) -> Option<NewEvent> {
    use domain::TransactionKind as K;
    let kind = match t.kind {
        K::PurchaseGrant | K::SubscriptionGrant => HostEventKind::CreditsGranted,
        K::AdminAdjustment if !t.amount.is_decrease() => HostEventKind::CreditsGranted,
        K::AdminAdjustment | K::RefundClawback => HostEventKind::CreditsClawedBack,
        K::Expiry => HostEventKind::CreditsExpired,
        K::Consumption | K::ReservationHold | K::ReservationSettle | K::ReservationRelease => {
            return None;
        }
    };
    Some(NewEvent {
        kind,
        fact: t.id.to_string(),
        user: Some(t.user_id.clone()),
        data: one("transaction", transaction_view(t)),
        occurred_at: t.created_at,
    })
}

/// The events of the balance crossings of a written spend (`domain::balance_alerts`):
/// `credits.low_balance` and `credits.depleted`, each carrying the spend that crossed.
pub(crate) fn balance_alerts(
    spend: &CreditTransaction,
    low_below: Option<domain::Credits>,
) -> Vec<NewEvent> {
    let after = spend.balance_after;
    let Some(before) = after.checked_add(spend.amount.magnitude()).ok() else {
        return Vec::new();
    };
    domain::balance_alerts(before, after, low_below)
        .into_iter()
        .map(|alert| {
            let kind = match alert {
                BalanceAlert::LowBalance { .. } => HostEventKind::CreditsLowBalance,
                BalanceAlert::Depleted => HostEventKind::CreditsDepleted,
            };
            let mut data = Map::new();
            data.insert("balance".into(), json!(after.to_string()));
            data.insert("balanceHundredths".into(), json!(after.hundredths()));
            if let BalanceAlert::LowBalance { threshold } = alert {
                data.insert("threshold".into(), json!(threshold.to_string()));
                data.insert("thresholdHundredths".into(), json!(threshold.hundredths()));
            }
            data.insert("transaction".into(), transaction_view(spend));
            NewEvent {
                kind,
                fact: format!("{}:{}", spend.id, kind.code()),
                user: Some(spend.user_id.clone()),
                data,
                occurred_at: spend.created_at,
            }
        })
        .collect()
}

/// A reservation as `ReservationView` shows it.
fn reservation_view(r: &Reservation) -> Json {
    let mut view = Map::new();
    view.insert("id".into(), json!(r.id.as_str()));
    view.insert("userId".into(), json!(r.user_id.as_str()));
    view.insert("status".into(), json!(r.status.code()));
    view.insert("held".into(), json!(r.held.to_string()));
    view.insert("heldHundredths".into(), json!(r.held.hundredths()));
    if let ReservationStatus::Settled { actual, charged } = r.status {
        view.insert("actual".into(), json!(actual.to_string()));
        view.insert("charged".into(), json!(charged.to_string()));
        view.insert("chargedHundredths".into(), json!(charged.hundredths()));
    }
    let c = &r.context;
    let optional = [
        ("feature", c.feature.as_ref().map(|f| json!(f))),
        ("model", c.model.as_ref().map(|m| json!(m))),
        ("tokens", c.tokens.map(|t| json!(t))),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            view.insert(name.into(), value);
        }
    }
    view.insert("createdAt".into(), json!(timestamp(r.created_at)));
    view.insert("expiresAt".into(), json!(timestamp(r.expires_at)));
    Json::Object(view)
}

/// The opt-in `credits.consumed` of a written consumption, when `wanted`.
pub(crate) fn consumed(t: &CreditTransaction, wanted: Wanted) -> Option<NewEvent> {
    let kind = HostEventKind::CreditsConsumed;
    wanted.wants(kind).then(|| NewEvent {
        kind,
        fact: t.id.to_string(),
        user: Some(t.user_id.clone()),
        data: one("transaction", transaction_view(t)),
        occurred_at: t.created_at,
    })
}

/// The opt-in event of a reservation's step, when `wanted`: `credits.reserved` (`kind`
/// [`HostEventKind::CreditsReserved`]), `credits.settled` or `credits.released` (a release or
/// a lapse), with the reservation as it is after the step and the ledger transaction the step
/// wrote (a settle of exactly the held amount writes none).
pub(crate) fn reservation_step(
    kind: HostEventKind,
    reservation: &Reservation,
    transaction: Option<&CreditTransaction>,
    at: Timestamp,
    wanted: Wanted,
) -> Option<NewEvent> {
    if !wanted.wants(kind) {
        return None;
    }
    let mut data = one("reservation", reservation_view(reservation));
    if let Some(t) = transaction {
        data.insert("transaction".into(), transaction_view(t));
    }
    Some(NewEvent {
        kind,
        fact: reservation.id.as_str().to_owned(),
        user: Some(reservation.user_id.clone()),
        data,
        occurred_at: at,
    })
}

/// What a `payment.mismatch` says: the verified provider event that did not match, for the
/// operator (no payload, nothing of the user beyond the id).
pub(crate) struct Mismatch<'a> {
    pub(crate) provider: &'a str,
    pub(crate) event_id: &'a str,
    pub(crate) event_type: &'a str,
    pub(crate) detail: Option<&'a str>,
    pub(crate) order: Option<&'a OrderRecord>,
    pub(crate) user: Option<UserId>,
    pub(crate) at: Timestamp,
}

/// The `payment.mismatch` event of a provider event recorded with outcome `mismatch`.
pub(crate) fn mismatch(m: Mismatch<'_>) -> NewEvent {
    let mut data = Map::new();
    data.insert("provider".into(), json!(m.provider));
    data.insert("providerEventId".into(), json!(m.event_id));
    data.insert("providerEventType".into(), json!(m.event_type));
    data.insert("detail".into(), json!(m.detail));
    if let Some(order) = m.order {
        data.insert("order".into(), order_view(order));
    }
    NewEvent {
        kind: HostEventKind::PaymentMismatch,
        fact: format!("{}|{}", m.provider, m.event_id),
        user: m
            .user
            .or_else(|| m.order.map(|o| o.order.user_id().clone())),
        data,
        occurred_at: m.at,
    }
}

#[derive(Debug, FromQueryResult)]
struct EventRow {
    id: i64,
    event_id: String,
    event_type: String,
    user_id: Option<String>,
    payload: String,
    occurred_at: i64,
}

impl EventRow {
    fn into_domain(self) -> Result<StoredEvent, StoreError> {
        let bad = |what: String| corrupt("events", &self.event_id, what);
        let kind = HostEventKind::parse(&self.event_type)
            .ok_or_else(|| bad(format!("unknown type {}", self.event_type)))?;
        let user_id = self
            .user_id
            .clone()
            .map(UserId::new)
            .transpose()
            .map_err(|e| bad(e.to_string()))?;
        Ok(StoredEvent {
            id: self.id,
            event_id: self.event_id,
            kind,
            user_id,
            payload: self.payload,
            occurred_at: Timestamp::from_unix_millis(self.occurred_at),
        })
    }
}

/// How many events one read filtered by type looks at on SQLite, which keeps no index by type
/// (migration step 19): the read walks the primary key from the cursor, so this bounds its work
/// (about 5,000 rows, a few MB of pages) however rare the types asked for are.
pub(crate) const FEED_SCAN_EVENTS: i64 = 5_000;

/// Up to `limit` events after `after` of one of `kinds` (any when empty), in id order, never
/// one that an older still-running transaction could precede (see the module docs). On SQLite a
/// read with `kinds` looks at no more than [`FEED_SCAN_EVENTS`] events and says how far it
/// looked when it stopped there.
pub(crate) async fn events_after<C: ConnectionTrait>(
    conn: &C,
    after: Option<i64>,
    limit: u32,
    kinds: &[HostEventKind],
) -> Result<EventsRead, Fail> {
    let after = after.unwrap_or(0);
    let mut values: Vec<Value> = vec![after.into(), i64::from(limit).into()];
    let mut condition = String::from("id > $1");
    let mut looked_through = None;
    if !kinds.is_empty() {
        let list: Vec<String> = (0..kinds.len()).map(|i| format!("${}", i + 3)).collect();
        condition.push_str(&format!(" AND event_type IN ({})", list.join(", ")));
        values.extend(kinds.iter().map(|k| Value::from(k.code())));
        if conn.get_database_backend() == DbBackend::Sqlite {
            // The window the read looks at: the next FEED_SCAN_EVENTS ids. A full window ends
            // the read at its last id; a short one reaches the end of the table. (No snapshot
            // is needed across the two statements: with one writer, every id up to the largest
            // committed one has committed, and an event written in between has a larger id.)
            let sql = format!(
                "SELECT COUNT(*) AS n, MAX(id) AS last FROM \
                 (SELECT id FROM events WHERE id > $1 ORDER BY id LIMIT {FEED_SCAN_EVENTS})"
            );
            let rows = sql::rows(conn, &sql, vec![after.into()]).await?;
            if let Some(row) = rows.first()
                && row.try_get::<i64>("", "n")? == FEED_SCAN_EVENTS
            {
                let last: i64 = row.try_get("", "last")?;
                condition.push_str(&format!(" AND id <= ${}", values.len() + 1));
                values.push(last.into());
                looked_through = Some(last);
            }
        }
    }
    if conn.get_database_backend() == DbBackend::Postgres {
        // Every transaction that could still commit a smaller id has a txid at or above the
        // snapshot's xmin; everything below it has finished.
        condition.push_str(" AND txid < pg_snapshot_xmin(pg_current_snapshot())");
    }
    let sql = format!(
        "SELECT id, event_id, event_type, user_id, payload, occurred_at FROM events \
         WHERE {condition} ORDER BY id LIMIT $2"
    );
    let rows: Vec<EventRow> = sql::all(conn, &sql, values).await?;
    let events = rows
        .into_iter()
        .map(|row| row.into_domain().map_err(Fail::Store))
        .collect::<Result<Vec<_>, _>>()?;
    // A read that found all it asked for looked as far as it needed.
    if events.len() >= limit as usize {
        looked_through = None;
    }
    Ok(EventsRead {
        events,
        looked_through,
    })
}

/// The largest id the outbox can have handed out. SQLite's `AUTOINCREMENT` keeps the largest id
/// ever used in `sqlite_sequence`, purges or not. On PostgreSQL an id is `txid << 20 | n` (step
/// 18; the plain sequence's ids before it are smaller), and every transaction that has taken a
/// txid took one below the snapshot's `xmax`, so no id written yet reaches `xmax << 20`.
pub(crate) async fn issued_through<C: ConnectionTrait>(conn: &C) -> Result<i64, DbErr> {
    let sql = match conn.get_database_backend() {
        DbBackend::Postgres => {
            "SELECT GREATEST((pg_snapshot_xmax(pg_current_snapshot())::text::bigint << 20) - 1, \
             (SELECT last_value FROM events_id_seq)) AS n"
        }
        _ => "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) AS n",
    };
    Ok(sql::one_i64(conn, sql, Vec::new(), "n").await?.unwrap_or(0))
}

/// Of the `limit` oldest events (by id: events are written in time order), delete those that
/// occurred before `before`; returns how many. The primary key is the only index this walks,
/// so `events` needs no index on `occurred_at` (one less on every event's insert); an event
/// written out of time order is deleted by a later pass, once those before it are gone.
pub(crate) async fn purge<C: ConnectionTrait>(
    conn: &C,
    before: Timestamp,
    limit: u32,
) -> Result<u64, DbErr> {
    let sql = "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT $2) \
               AND occurred_at < $1";
    let values = vec![before.unix_millis().into(), i64::from(limit).into()];
    sql::execute(conn, sql, values).await
}

#[async_trait]
impl HostEventLog for SeaOrmStore {
    async fn events_after(
        &self,
        after: Option<i64>,
        limit: u32,
        kinds: &[HostEventKind],
    ) -> Result<EventsRead, StoreError> {
        let limit = limit.clamp(1, MAX_EVENTS_PER_READ);
        self.retry
            .run("events_after", || {
                events_after(&self.db, after, limit, kinds)
            })
            .await
    }

    async fn issued_through(&self) -> Result<i64, StoreError> {
        self.retry
            .run("events_issued_through", || async {
                Ok(issued_through(&self.db).await?)
            })
            .await
    }

    async fn purge_events(&self, before: Timestamp, limit: u32) -> Result<u32, StoreError> {
        let purged = self
            .retry
            .run("purge_events", || async {
                Ok(purge(&self.db, before, limit).await?)
            })
            .await?;
        Ok(u32::try_from(purged).unwrap_or(u32::MAX))
    }

    fn configure_entitlements(&self, rules: EntitlementRules) {
        if let Ok(mut slot) = self.entitlement_rules.write() {
            *slot = Some(Arc::new(rules));
        }
    }

    async fn tell_entitlement_lapses(&self, now: Timestamp, limit: u32) -> Result<u32, StoreError> {
        let Some(rules) = self.entitlement_rules() else {
            return Ok(0);
        };
        let due = self
            .retry
            .run("entitlements_due", || {
                entitlements_told::due(&self.db, now, limit)
            })
            .await?;
        let mut changed = 0;
        for user in &due {
            let told = self
                .retry
                .run("tell_entitlement_lapse", || async {
                    let (_turn, tx) = self.begin_write().await?;
                    let body = entitlements_told::tell_lapse(&tx, user, &rules, now).await;
                    sql::finish(tx, body).await
                })
                .await?;
            changed += u32::from(told);
        }
        Ok(changed)
    }
}

impl SeaOrmStore {
    /// The entitlement rules the service configured, if it did.
    pub(crate) fn entitlement_rules(&self) -> Option<Arc<EntitlementRules>> {
        self.entitlement_rules.read().ok()?.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_derive_from_the_fact_and_the_envelope_has_the_standard_shape() {
        let event = NewEvent {
            kind: HostEventKind::OrderPaid,
            fact: "ord_1".into(),
            user: Some(UserId::new("hst_1").unwrap()),
            data: one("order", json!({"orderId": "ord_1"})),
            occurred_at: Timestamp::from_unix_millis(1_767_225_600_000),
        };
        let (id, payload) = envelope(event.clone(), Some("auth0|42".into())).unwrap();
        let (again, _) = envelope(event.clone(), None).unwrap();
        assert_eq!(id, again);
        assert!(id.starts_with("evt_") && id.len() == 36, "{id}");
        // The time leads, so ids grow with it: 2026-01-01T00:00:00Z is 0x19b76daa800 ms.
        assert!(id.starts_with("evt_019b76daa800"), "{id}");
        let later = NewEvent {
            occurred_at: Timestamp::from_unix_millis(1_767_225_600_001),
            ..event.clone()
        };
        let later_id = envelope(later, None).unwrap().0;
        assert!(
            later_id > id && later_id[16..] == id[16..],
            "{later_id} after {id}"
        );
        let other = NewEvent {
            kind: HostEventKind::OrderFailed,
            ..event.clone()
        };
        assert_ne!(envelope(other, None).unwrap().0, id);
        let parsed: Json = serde_json::from_str(&payload).unwrap();
        assert_eq!(parsed["id"], json!(id));
        assert_eq!(parsed["type"], json!("order.paid"));
        assert_eq!(parsed["timestamp"], json!("2026-01-01T00:00:00.000Z"));
        assert_eq!(parsed["data"]["userId"], json!("hst_1"));
        assert_eq!(parsed["data"]["hostSubject"], json!("auth0|42"));
        assert_eq!(parsed["data"]["order"]["orderId"], json!("ord_1"));
    }
}
