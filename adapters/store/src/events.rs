//! The webhook inbox and the single transaction of a payment event (CORRECTNESS.md invariant 5):
//! the inbox row, the order transition, the subscription change, the grant and the clawback
//! commit together or not at all, and with them the host events that tell of them (`outbox`,
//! invariant 13) and the audit entry of an administrator's action that carries the event. What
//! the changes tell was decided by the application from the states before and after; the store
//! writes it, adding the events of the ledger entries it writes.

use application::host_events::{self, HostEvent};
use application::pagination::{Page, PageRequest};
use application::ports::{
    InboxEntry, InboxFilter, LedgerEffect, NewAudit, OrderChange, PaymentEventCommand,
    PaymentEventOutcome, PaymentEventStore, RecordedEvent, StoreError, SubscriptionChange,
};
use async_trait::async_trait;
use domain::{EventOutcome, Timestamp};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, FromQueryResult};

use crate::entitlements_told;
use crate::ledger::{self, NewGrant};
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::sql::{self, End};
use crate::{Enc, SeaOrmStore};
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

/// Apply a subscription change: create, or compare-and-set on the state it replaces.
async fn apply_subscription(
    tx: &DatabaseTransaction,
    change: &SubscriptionChange,
    now: Timestamp,
) -> Result<(), Fail> {
    match change {
        SubscriptionChange::Create(s, order) => {
            if !subscriptions::create(tx, s, order.as_ref(), now).await? {
                let id = s.provider_subscription_id();
                return Err(conflict(&format!("subscription {id} exists")));
            }
        }
        SubscriptionChange::Update {
            before,
            subscription,
        } => {
            let expected = before.last_event_at();
            if !subscriptions::update(tx, subscription, expected, now).await? {
                let id = subscription.id();
                return Err(conflict(&format!(
                    "subscription {id} changed since it was read"
                )));
            }
        }
    }
    Ok(())
}

/// Apply an order change (compare-and-set on its version).
async fn apply_order(
    tx: &DatabaseTransaction,
    change: &OrderChange,
    now: Timestamp,
) -> Result<(), Fail> {
    let mismatch = change.mismatch.as_deref();
    let id = change.after.id();
    let version = change.expected_version;
    let status = change.after.status();
    if orders::transition(tx, id, version, status, mismatch, now).await? == 0 {
        if orders::find(tx, id.as_str()).await?.is_none() {
            return Err(Fail::Store(StoreError::NotFound));
        }
        return Err(conflict(&format!("order {id} changed since it was read")));
    }
    Ok(())
}

async fn apply(
    tx: &DatabaseTransaction,
    c: &PaymentEventCommand,
    events: &Enc,
) -> Result<End<PaymentEventOutcome>, Fail> {
    // The inbox row first: a duplicate delivery stops here (PostgreSQL makes a concurrent
    // duplicate wait for the first one's commit, then do nothing).
    if !insert_inbox(tx, &c.inbox).await? {
        return Ok(End::Rollback(PaymentEventOutcome::Duplicate));
    }
    let now = c.inbox.received_at;
    if let Some(change) = &c.order {
        apply_order(tx, change, now).await?;
    }
    if let Some(change) = &c.subscription {
        apply_subscription(tx, change, now).await?;
    }
    if let Some(refund) = &c.refund
        && !refunds::keep(tx, refund).await?
    {
        return Err(conflict("the refund report was kept before"));
    }
    if let Some(change) = &c.charge {
        refunds::apply_charge(tx, change).await?;
    }
    let mut outbox = Outbox::default();
    outbox.extend(c.told.iter().cloned());
    let mut effects = Vec::new();
    if let Some(grant) = &c.grant {
        // A grant written now adds its own event to the transaction's.
        effects.push(ledger::grant(tx, &NewGrant::of(grant), &mut outbox).await?);
    }
    for clawback in &c.clawbacks {
        let effect = ledger::clawback(tx, clawback).await?;
        if let LedgerEffect::Written(t) = &effect {
            outbox.extend(host_events::credits_changed(t));
        }
        effects.push(effect);
    }
    if let Some(told) = &c.entitlements {
        entitlements_told::write(tx, &told.write).await?;
        outbox.extend(told.event.clone());
    }
    if let Some(entry) = &c.audit {
        crate::admin::insert_audit(tx, entry).await?;
    }
    outbox.write(tx, events).await?;
    Ok(End::Commit(PaymentEventOutcome::Applied {
        ledger: effects,
    }))
}

/// Record an event that changes nothing, with the events it tells and the audit entry it
/// carries: all of them or, when its row exists, none.
async fn record(
    db: &DatabaseConnection,
    turn: Option<&crate::WriteTurn>,
    recorded: Recorded<'_>,
) -> Result<bool, Fail> {
    let Recorded(entry, told, audit, events) = recorded;
    if told.is_empty() && audit.is_none() {
        return Ok(insert_inbox(db, entry).await?);
    }
    let (_turn, tx) = crate::begin_in_turn(db, turn).await?;
    let body = async {
        if !insert_inbox(&tx, entry).await? {
            return Ok(End::Rollback(false));
        }
        let mut outbox = Outbox::default();
        outbox.extend(told.iter().cloned());
        outbox.write(&tx, events).await?;
        if let Some(entry) = audit {
            crate::admin::insert_audit(&tx, entry).await?;
        }
        Ok(End::Commit(true))
    }
    .await;
    sql::finish(tx, body).await
}

/// What [`record`] writes: the inbox row, the events it tells, the audit entry it carries, and
/// how the events are rendered.
#[derive(Clone, Copy)]
struct Recorded<'a>(
    &'a InboxEntry,
    &'a [HostEvent],
    Option<&'a NewAudit>,
    &'a Enc,
);

#[async_trait]
impl PaymentEventStore for SeaOrmStore {
    async fn apply_payment_event(
        &self,
        command: &PaymentEventCommand,
    ) -> Result<PaymentEventOutcome, StoreError> {
        self.retry
            .run("apply_payment_event", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = apply(&tx, command, &*self.events).await;
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

    async fn record_event(
        &self,
        entry: &InboxEntry,
        told: &[HostEvent],
        audit: Option<&NewAudit>,
    ) -> Result<bool, StoreError> {
        let recorded = Recorded(entry, told, audit, &*self.events);
        self.retry
            .run("record_event", || {
                record(&self.db, self.turn.as_ref(), recorded)
            })
            .await
    }
}
