//! The webhook inbox and the single transaction of a payment event (CORRECTNESS.md invariant 5):
//! the inbox row, the order transition, the subscription change, the grant and the clawback
//! commit together or not at all, and with them the host events that tell of them (`outbox`,
//! invariant 13).

use application::pagination::{Page, PageRequest};
use application::ports::{
    EntitlementRules, EventAudit, InboxEntry, InboxFilter, LedgerEffect, MismatchNotice,
    OrderChange, OrderRecord, PaymentEventCommand, PaymentEventOutcome, PaymentEventStore,
    RecordedEvent, StoreError, SubscriptionChange,
};
use async_trait::async_trait;
use domain::{
    EventOutcome, Order, OrderParts, OrderStatus, PlanType, Subscription, SubscriptionAccess,
    Timestamp, UserId,
};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, FromQueryResult};

use crate::SeaOrmStore;
use crate::entitlements_told::{self, Replaced};
use crate::ledger::{self, NewGrant};
use crate::outbox::{self, Outbox};
use crate::retry::Fail;
use crate::sql::{self, End};
use crate::{orders, refunds, subscriptions};

/// A `webhook_inbox` row.
#[derive(Debug, FromQueryResult)]
pub(crate) struct InboxRow {
    id: i64,
    provider: String,
    event_id: String,
    event_type: String,
    payload: String,
    outcome: String,
    detail: Option<String>,
    received_at: i64,
}

impl InboxRow {
    pub(crate) fn into_domain(self) -> Result<RecordedEvent, StoreError> {
        let provider = self
            .provider
            .parse()
            .map_err(|e| crate::rows::corrupt("webhook_inbox", &self.event_id, e))?;
        let outcome = EventOutcome::parse(&self.outcome).ok_or_else(|| {
            let why = format!("unknown outcome {}", self.outcome);
            crate::rows::corrupt("webhook_inbox", &self.event_id, why)
        })?;
        Ok(RecordedEvent {
            id: self.id,
            entry: InboxEntry {
                provider,
                event_id: self.event_id,
                event_type: self.event_type,
                payload: self.payload,
                outcome,
                detail: self.detail,
                received_at: Timestamp::from_unix_millis(self.received_at),
                user_id: None,
            },
        })
    }
}

/// Insert the inbox row; false when `(provider, event_id)` was seen before.
async fn insert_inbox<C: ConnectionTrait>(conn: &C, e: &InboxEntry) -> Result<bool, DbErr> {
    let sql = "INSERT INTO webhook_inbox (provider, event_id, event_type, payload, outcome, detail, \
               received_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING";
    let values = vec![
        e.provider.as_str().into(),
        e.event_id.as_str().into(),
        e.event_type.as_str().into(),
        e.payload.as_str().into(),
        e.outcome.code().into(),
        e.detail.clone().into(),
        e.received_at.unix_millis().into(),
    ];
    Ok(sql::execute(conn, sql, values).await? == 1)
}

fn conflict(why: &str) -> Fail {
    Fail::Store(StoreError::Conflict(why.to_owned()))
}

/// Whether `a` and `b` grant the same access on the same plan (so the subscription's change
/// changes nothing in its user's entitlements, now or later): same plan, status and renewal
/// intent, and the same period end unless access lasts as long as it renews (a renewal).
fn same_access(a: &Subscription, b: &Subscription) -> bool {
    a.plan_id() == b.plan_id()
        && a.status() == b.status()
        && a.renewal() == b.renewal()
        && (a.access(0) == SubscriptionAccess::WhileItRenews
            || a.current_period().end() == b.current_period().end())
}

/// The subscription as `change` writes it.
fn subscribed(change: &SubscriptionChange) -> &Subscription {
    match change {
        SubscriptionChange::Create(s, _) => s,
        SubscriptionChange::Update { subscription, .. } => subscription,
    }
}

/// Apply a subscription change and collect what it tells the host; returns whether the change
/// may have changed its user's entitlements, and the state it replaced (`None` for a
/// subscription it created).
async fn apply_subscription(
    tx: &DatabaseTransaction,
    change: &SubscriptionChange,
    now: Timestamp,
    cause: &str,
    outbox: &mut Outbox,
) -> Result<(bool, Option<Subscription>), Fail> {
    match change {
        SubscriptionChange::Create(s, order) => {
            if !subscriptions::create(tx, s, order.as_ref(), now).await? {
                let id = s.provider_subscription_id();
                return Err(conflict(&format!("subscription {id} exists")));
            }
            outbox.extend(outbox::subscription_changed(None, s, cause, now));
            Ok((true, None))
        }
        SubscriptionChange::Update {
            subscription,
            expected_last_event_at,
        } => {
            // The compare-and-set hands back the state it replaced, read under its lock in the
            // same statement (PostgreSQL): what the events tell the change from.
            let expected = *expected_last_event_at;
            let Some(before) = subscriptions::replace(tx, subscription, expected, now).await?
            else {
                let id = subscription.id();
                return Err(conflict(&format!(
                    "subscription {id} changed since it was read"
                )));
            };
            let told = outbox::subscription_changed(Some(&before), subscription, cause, now);
            outbox.extend(told);
            Ok((!same_access(&before, subscription), Some(before)))
        }
    }
}

/// `record` as it was with `status` (the order's other parts do not change with a transition).
fn with_status(record: &OrderRecord, status: OrderStatus) -> OrderRecord {
    let order = &record.order;
    OrderRecord {
        order: Order::restore(OrderParts {
            id: order.id().clone(),
            user_id: order.user_id().clone(),
            provider: order.provider(),
            plan: order.plan().clone(),
            status,
            created_at: order.created_at(),
            expires_at: order.expires_at(),
            returns: order.returns().clone(),
        }),
        ..record.clone()
    }
}

/// Apply an order change (compare-and-set on its version) and collect what it tells the host;
/// returns the order as changed.
async fn apply_order(
    tx: &DatabaseTransaction,
    change: &OrderChange,
    now: Timestamp,
    cause: &str,
    outbox: &mut Outbox,
) -> Result<OrderRecord, Fail> {
    let mismatch = change.mismatch.as_deref();
    let id = &change.order_id;
    let version = change.expected_version;
    let Some(after) =
        orders::transition_versioned(tx, id, version, &change.status, mismatch, now).await?
    else {
        if orders::find(tx, id.as_str()).await?.is_none() {
            return Err(Fail::Store(StoreError::NotFound));
        }
        return Err(conflict(&format!("order {id} changed since it was read")));
    };
    // The version matched, so the change replaced the state it was decided from: `previous`.
    let before = with_status(&after, change.previous.clone());
    if let Some(event) = outbox::order_changed(&before, &after, cause, now) {
        outbox.push(event);
    }
    Ok(after)
}

/// The user whose entitlements the command may change: the subscription's when its access
/// moved (`subscription_moved`), or a one-time order's when its status moves (credits packs,
/// renewals and unmoved orders change no access).
fn entitlements_user(
    c: &PaymentEventCommand,
    order: Option<&OrderRecord>,
    subscription_moved: bool,
) -> Option<UserId> {
    match &c.subscription {
        Some(SubscriptionChange::Create(s, _)) if subscription_moved => {
            return Some(s.user_id().clone());
        }
        Some(SubscriptionChange::Update { subscription, .. }) if subscription_moved => {
            return Some(subscription.user_id().clone());
        }
        _ => {}
    }
    let (change, order) = (c.order.as_ref()?, order?);
    let moved = change.previous.code() != change.status.code();
    (moved && order.order.plan().plan_type == PlanType::OneTime)
        .then(|| order.order.user_id().clone())
}

async fn apply(
    tx: &DatabaseTransaction,
    c: &PaymentEventCommand,
    rules: Option<&EntitlementRules>,
    audit: Option<&EventAudit>,
) -> Result<End<PaymentEventOutcome>, Fail> {
    // The inbox row first: a duplicate delivery stops here (PostgreSQL makes a concurrent
    // duplicate wait for the first one's commit, then do nothing).
    if !insert_inbox(tx, &c.inbox).await? {
        return Ok(End::Rollback(PaymentEventOutcome::Duplicate));
    }
    let now = c.inbox.received_at;
    let cause = format!("{}|{}", c.inbox.provider.as_str(), c.inbox.event_id);
    let mut outbox = Outbox::default();
    // What the changes replaced: a user with no stored entitlements record is told what they
    // held before the change as `previous`.
    let mut replaced = Replaced::default();
    let order = match &c.order {
        Some(change) => {
            let after = apply_order(tx, change, now, &cause, &mut outbox).await?;
            replaced.order = Some(with_status(&after, change.previous.clone()).order);
            Some(after)
        }
        None => None,
    };
    let subscription_moved = match &c.subscription {
        Some(change) => {
            let (moved, before) = apply_subscription(tx, change, now, &cause, &mut outbox).await?;
            replaced.subscription = Some((subscribed(change).id().clone(), before));
            moved
        }
        None => false,
    };
    if let Some(refund) = &c.refund
        && !refunds::keep(tx, refund).await?
    {
        return Err(conflict("the refund report was kept before"));
    }
    if let Some(change) = &c.charge {
        refunds::apply_charge(tx, change).await?;
    }
    let mut effects = Vec::new();
    if let Some(grant) = &c.grant {
        // A grant written now writes the events collected so far with its lot, and its own.
        effects.push(ledger::grant(tx, &NewGrant::of(grant), &mut outbox).await?);
    }
    for clawback in &c.clawbacks {
        let effect = ledger::clawback(tx, clawback).await?;
        if let LedgerEffect::Written(t) = &effect {
            outbox.extend(outbox::credits_changed(t));
        }
        effects.push(effect);
    }
    let user = entitlements_user(c, order.as_ref(), subscription_moved);
    if let (Some(rules), Some(user)) = (rules, user) {
        entitlements_told::tell_changes(tx, &user, rules, now, &replaced, &mut outbox).await?;
    }
    if c.inbox.outcome == EventOutcome::Mismatch && audit.is_none_or(tells_mismatch) {
        outbox.push(mismatch_event(c, order.as_ref()));
    }
    write_audit(tx, audit).await?;
    outbox.write(tx).await?;
    Ok(End::Commit(PaymentEventOutcome::Applied {
        ledger: effects,
    }))
}

/// The `payment.mismatch` of a payment event recorded with that outcome.
fn mismatch_event(c: &PaymentEventCommand, order: Option<&OrderRecord>) -> outbox::NewEvent {
    let user = match &c.subscription {
        Some(SubscriptionChange::Create(s, _)) => Some(s.user_id().clone()),
        Some(SubscriptionChange::Update { subscription, .. }) => {
            Some(subscription.user_id().clone())
        }
        None => c.grant.as_ref().map(|g| g.user_id.clone()),
    }
    .or_else(|| c.inbox.user_id.clone());
    outbox::mismatch(outbox::Mismatch {
        provider: c.inbox.provider.as_str(),
        event_id: &c.inbox.event_id,
        event_type: &c.inbox.event_type,
        detail: c.inbox.detail.as_deref(),
        order,
        user,
        at: c.inbox.received_at,
    })
}

/// Record an event that changes nothing; one recorded as a mismatch is told to the operator in
/// the same transaction.
async fn record(
    db: &DatabaseConnection,
    turn: Option<&crate::WriteTurn>,
    entry: &InboxEntry,
) -> Result<bool, Fail> {
    if entry.outcome != EventOutcome::Mismatch {
        return Ok(insert_inbox(db, entry).await?);
    }
    let (_turn, tx) = crate::begin_in_turn(db, turn).await?;
    let body = async {
        if !insert_inbox(&tx, entry).await? {
            return Ok(End::Rollback(false));
        }
        let event = outbox::mismatch(outbox::Mismatch {
            provider: entry.provider.as_str(),
            event_id: &entry.event_id,
            event_type: &entry.event_type,
            detail: entry.detail.as_deref(),
            order: None,
            user: entry.user_id.clone(),
            at: entry.received_at,
        });
        Outbox::write_one(&tx, event).await?;
        Ok(End::Commit(true))
    }
    .await;
    sql::finish(tx, body).await
}

#[async_trait]
impl PaymentEventStore for SeaOrmStore {
    async fn apply_payment_event(
        &self,
        command: &PaymentEventCommand,
    ) -> Result<PaymentEventOutcome, StoreError> {
        let rules = self.entitlement_rules();
        self.retry
            .run("apply_payment_event", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = apply(&tx, command, rules.as_deref(), None).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn list_events(
        &self,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<RecordedEvent>, StoreError> {
        // Each filter is `($n IS NULL OR column = $n)`, so one statement serves every mix; the
        // indexes of step 6 ((provider, id) and (outcome, id)) keep a filtered page cheap.
        let condition = "($1 IS NULL OR provider = $1) AND ($2 IS NULL OR outcome = $2)";
        let count = format!("SELECT COUNT(*) AS total FROM webhook_inbox WHERE {condition}");
        let items = format!(
            "SELECT id, provider, event_id, event_type, payload, outcome, detail, received_at \
             FROM webhook_inbox WHERE {condition} ORDER BY id DESC LIMIT $3 OFFSET $4"
        );
        let filters = vec![
            filter.provider.map(|p| p.as_str().to_owned()).into(),
            filter.outcome.map(|o| o.code()).into(),
        ];
        let mut item_values = filters.clone();
        item_values.push(i64::from(page.limit()).into());
        item_values.push(i64::try_from(page.offset()).unwrap_or(i64::MAX).into());
        let (total, rows) = self
            .retry
            .run("list_events", || {
                sql::page::<InboxRow>(
                    &self.db,
                    &count,
                    filters.clone(),
                    &items,
                    item_values.clone(),
                )
            })
            .await?;
        let items = rows
            .into_iter()
            .map(InboxRow::into_domain)
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items,
            request: page,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn record_event(&self, entry: &InboxEntry) -> Result<bool, StoreError> {
        self.retry
            .run("record_event", || {
                record(&self.db, self.turn.as_ref(), entry)
            })
            .await
    }
}

/// Whether a mismatch the event comes to is told (not when a replay's original told it).
fn tells_mismatch(audit: &EventAudit) -> bool {
    audit.mismatch == MismatchNotice::Tell
}

/// The audit entry of the administrator's action an event carries, if any: it commits with the
/// event (issue 18).
async fn write_audit(tx: &DatabaseTransaction, audit: Option<&EventAudit>) -> Result<(), Fail> {
    if let Some(audit) = audit {
        crate::admin::insert_audit(tx, &audit.entry).await?;
    }
    Ok(())
}

/// Record `entry` with an administrator's action: the inbox row, its `payment.mismatch` under
/// [`MismatchNotice::Tell`], and the audit entry, or nothing when the row exists.
async fn record_audited_in(
    tx: &DatabaseTransaction,
    entry: &InboxEntry,
    audit: &EventAudit,
) -> Result<End<bool>, Fail> {
    if !insert_inbox(tx, entry).await? {
        return Ok(End::Rollback(false));
    }
    if entry.outcome == EventOutcome::Mismatch && tells_mismatch(audit) {
        let event = outbox::mismatch(outbox::Mismatch {
            provider: entry.provider.as_str(),
            event_id: &entry.event_id,
            event_type: &entry.event_type,
            detail: entry.detail.as_deref(),
            order: None,
            user: entry.user_id.clone(),
            at: entry.received_at,
        });
        Outbox::write_one(tx, event).await?;
    }
    crate::admin::insert_audit(tx, &audit.entry).await?;
    Ok(End::Commit(true))
}

impl SeaOrmStore {
    /// [`application::ports::AdminConsoleStore::apply_payment_event_audited`]: the payment
    /// event's transaction, with the action's audit entry in it.
    pub(crate) async fn apply_audited(
        &self,
        command: &PaymentEventCommand,
        audit: &EventAudit,
    ) -> Result<PaymentEventOutcome, StoreError> {
        let rules = self.entitlement_rules();
        self.retry
            .run("apply_payment_event_audited", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = apply(&tx, command, rules.as_deref(), Some(audit)).await;
                sql::finish(tx, body).await
            })
            .await
    }

    /// [`application::ports::AdminConsoleStore::record_event_audited`].
    pub(crate) async fn record_audited(
        &self,
        entry: &InboxEntry,
        audit: &EventAudit,
    ) -> Result<bool, StoreError> {
        self.retry
            .run("record_event_audited", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = record_audited_in(&tx, entry, audit).await;
                sql::finish(tx, body).await
            })
            .await
    }
}
