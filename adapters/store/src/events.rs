//! The webhook inbox and the single transaction of a payment event (CORRECTNESS.md invariant 5):
//! the inbox row, the order transition, the subscription change, the grant and the clawback
//! commit together or not at all.

use application::pagination::{Page, PageRequest};
use application::ports::{
    InboxEntry, InboxFilter, PaymentEventCommand, PaymentEventOutcome, PaymentEventStore,
    RecordedEvent, StoreError, SubscriptionChange,
};
use async_trait::async_trait;
use domain::Timestamp;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr, FromQueryResult};

use crate::SeaOrmStore;
use crate::ledger::{self, NewGrant};
use crate::retry::Fail;
use crate::sql::{self, End};
use crate::{orders, refunds, subscriptions};

/// A `webhook_inbox` row.
#[derive(Debug, FromQueryResult)]
struct InboxRow {
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
    fn into_domain(self) -> Result<RecordedEvent, StoreError> {
        let provider = self
            .provider
            .parse()
            .map_err(|e| crate::rows::corrupt("webhook_inbox", &self.event_id, e))?;
        Ok(RecordedEvent {
            id: self.id,
            entry: InboxEntry {
                provider,
                event_id: self.event_id,
                event_type: self.event_type,
                payload: self.payload,
                outcome: self.outcome,
                detail: self.detail,
                received_at: Timestamp::from_unix_millis(self.received_at),
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
        e.outcome.as_str().into(),
        e.detail.clone().into(),
        e.received_at.unix_millis().into(),
    ];
    Ok(sql::execute(conn, sql, values).await? == 1)
}

fn conflict(why: &str) -> Fail {
    Fail::Store(StoreError::Conflict(why.to_owned()))
}

async fn apply_subscription(
    tx: &DatabaseTransaction,
    change: &SubscriptionChange,
    now: Timestamp,
) -> Result<(), Fail> {
    let applied = match change {
        SubscriptionChange::Create(s, order) => {
            subscriptions::create(tx, s, order.as_ref(), now).await?
        }
        SubscriptionChange::Update {
            subscription,
            expected_last_event_at,
        } => subscriptions::update(tx, subscription, *expected_last_event_at, now).await?,
    };
    if applied {
        return Ok(());
    }
    Err(match change {
        SubscriptionChange::Create(s, _) => conflict(&format!(
            "subscription {} exists",
            s.provider_subscription_id()
        )),
        SubscriptionChange::Update { subscription, .. } => conflict(&format!(
            "subscription {} changed since it was read",
            subscription.id()
        )),
    })
}

async fn apply(
    tx: &DatabaseTransaction,
    c: &PaymentEventCommand,
) -> Result<End<PaymentEventOutcome>, Fail> {
    // The inbox row first: a duplicate delivery stops here (PostgreSQL makes a concurrent
    // duplicate wait for the first one's commit, then do nothing).
    if !insert_inbox(tx, &c.inbox).await? {
        return Ok(End::Rollback(PaymentEventOutcome::Duplicate));
    }
    let now = c.inbox.received_at;
    if let Some(change) = &c.order {
        let mismatch = change.mismatch.as_deref();
        if orders::transition_versioned(
            tx,
            &change.order_id,
            change.expected_version,
            &change.status,
            mismatch,
            now,
        )
        .await?
            == 0
        {
            if !orders::order_exists(tx, &change.order_id).await? {
                return Err(Fail::Store(StoreError::NotFound));
            }
            return Err(conflict(&format!(
                "order {} changed since it was read",
                change.order_id
            )));
        }
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
    let mut effects = Vec::new();
    if let Some(grant) = &c.grant {
        effects.push(ledger::grant(tx, &NewGrant::of(grant)).await?);
    }
    if let Some(clawback) = &c.clawback {
        effects.push(ledger::clawback(tx, clawback).await?);
    }
    Ok(End::Commit(PaymentEventOutcome::Applied {
        ledger: effects,
    }))
}

#[async_trait]
impl PaymentEventStore for SeaOrmStore {
    async fn apply_payment_event(
        &self,
        command: &PaymentEventCommand,
    ) -> Result<PaymentEventOutcome, StoreError> {
        self.retry
            .run("apply_payment_event", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = apply(&tx, command).await;
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
            filter.outcome.clone().into(),
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
            .run("record_event", || async {
                Ok(insert_inbox(&self.db, entry).await?)
            })
            .await
    }
}
