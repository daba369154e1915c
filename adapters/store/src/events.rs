//! The webhook inbox, and the parts of a change set that move orders and subscriptions by
//! compare-and-set (`crate::apply` runs them with the rest of the set in one transaction:
//! CORRECTNESS.md invariant 5).

use application::pagination::{Page, PageRequest};
use application::ports::{
    InboxEntry, InboxFilter, OrderChange, PaymentEventStore, RecordedEvent, StoreError,
    SubscriptionChange,
};
use async_trait::async_trait;
use domain::{EventOutcome, Timestamp};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr, FromQueryResult};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::sql;
use crate::{orders, subscriptions};

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
pub(crate) async fn insert_inbox<C: ConnectionTrait>(
    conn: &C,
    e: &InboxEntry,
) -> Result<bool, DbErr> {
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

pub(crate) fn conflict(why: &str) -> Fail {
    Fail::Store(StoreError::Conflict(why.to_owned()))
}

/// Apply a subscription change: create, or compare-and-set on the state it replaces.
pub(crate) async fn apply_subscription(
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
pub(crate) async fn apply_order(
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

#[async_trait]
impl PaymentEventStore for SeaOrmStore {
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
}
