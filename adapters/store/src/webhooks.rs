//! Webhook endpoints and deliveries (`WebhookStore`).
//!
//! Several instances share the work: a fan-out locks its endpoint row only if its cursor is
//! still the one read (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so a busy endpoint is skipped,
//! not waited for), and deliveries are claimed with `SKIP LOCKED` under a lease
//! (`locked_until`) that doubles as the claim's token: an attempt is recorded only while the
//! delivery is still held under the same lease. One (endpoint, event) is one delivery, whose id
//! is `wd_<endpoint id>_<events.id>`.

mod audited;

use application::host_events::HostEventKind;
use application::pagination::{Page, PageRequest};
use application::ports::{
    AttemptRecord, ClaimedDelivery, DeliveryRecord, EndpointAudit, EndpointChange, EndpointWrite,
    EndpointWritten, MAX_ENDPOINTS, RedeliveryTarget, StoreError, WebhookEndpoint, WebhookSecret,
    WebhookStore,
};
use async_trait::async_trait;
use domain::Timestamp;
use domain::delivery::DeliveryStatus;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, FromQueryResult, Value};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::sql::{self, End};

const ENDPOINT_COLUMNS: &str = "id, url, event_types, enabled, disabled_reason, secret, \
    previous_secret, previous_secret_until, dispatch_cursor, failing_since, created_at, updated_at";

const DELIVERY_COLUMNS: &str = "d.id, d.endpoint_id, ev.event_id, ev.event_type, d.status, \
    d.attempts, d.next_attempt_at, d.last_status_code, d.last_latency_ms, d.last_error, \
    d.created_at, d.updated_at";

/// Inserted per statement when fanning out.
const INSERT_CHUNK: usize = 100;

/// The reason recorded on deliveries abandoned because their endpoint was disabled.
const ABANDONED_DISABLED: &str = "endpoint disabled";

#[derive(Debug, FromQueryResult)]
struct EndpointRow {
    id: String,
    url: String,
    event_types: String,
    enabled: bool,
    disabled_reason: Option<String>,
    secret: String,
    previous_secret: Option<String>,
    previous_secret_until: Option<i64>,
    dispatch_cursor: i64,
    failing_since: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl EndpointRow {
    fn into_domain(self) -> Result<WebhookEndpoint, StoreError> {
        let event_types = split_types(&self.event_types).map_err(|code| {
            StoreError::Corrupt(format!("webhook_endpoints {:?}: type {code:?}", self.id))
        })?;
        let previous_secret = match (self.previous_secret, self.previous_secret_until) {
            (Some(secret), Some(until)) => Some((
                WebhookSecret::new(secret),
                Timestamp::from_unix_millis(until),
            )),
            _ => None,
        };
        Ok(WebhookEndpoint {
            id: self.id,
            url: self.url,
            event_types,
            enabled: self.enabled,
            disabled_reason: self.disabled_reason,
            secret: WebhookSecret::new(self.secret),
            previous_secret,
            cursor: self.dispatch_cursor,
            failing_since: self.failing_since.map(Timestamp::from_unix_millis),
            created_at: Timestamp::from_unix_millis(self.created_at),
            updated_at: Timestamp::from_unix_millis(self.updated_at),
        })
    }
}

#[derive(Debug, FromQueryResult)]
struct DeliveryRow {
    id: String,
    endpoint_id: String,
    event_id: String,
    event_type: String,
    status: String,
    attempts: i32,
    next_attempt_at: Option<i64>,
    last_status_code: Option<i32>,
    last_latency_ms: Option<i64>,
    last_error: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl DeliveryRow {
    fn into_domain(self) -> Result<DeliveryRecord, StoreError> {
        let corrupt =
            |what: &str| StoreError::Corrupt(format!("webhook_deliveries {:?}: {what}", self.id));
        let status = DeliveryStatus::parse(&self.status).ok_or_else(|| corrupt("status"))?;
        let attempts = u32::try_from(self.attempts).map_err(|_| corrupt("attempts"))?;
        let last_status_code = self
            .last_status_code
            .map(u16::try_from)
            .transpose()
            .map_err(|_| corrupt("status code"))?;
        Ok(DeliveryRecord {
            id: self.id,
            endpoint_id: self.endpoint_id,
            event_id: self.event_id,
            event_type: self.event_type,
            status,
            attempts,
            next_attempt_at: self.next_attempt_at.map(Timestamp::from_unix_millis),
            last_status_code,
            last_latency_ms: self.last_latency_ms,
            last_error: self.last_error,
            created_at: Timestamp::from_unix_millis(self.created_at),
            updated_at: Timestamp::from_unix_millis(self.updated_at),
        })
    }
}

#[derive(Debug, FromQueryResult)]
struct ClaimRow {
    id: String,
    endpoint_id: String,
    url: String,
    secret: String,
    previous_secret: Option<String>,
    previous_secret_until: Option<i64>,
    event_id: String,
    payload: String,
    attempts: i32,
    failing_since: Option<i64>,
}

#[derive(Debug, FromQueryResult)]
struct IdRow {
    id: String,
}

/// The types of a stored list; `Err` names an unknown code.
fn split_types(stored: &str) -> Result<Vec<HostEventKind>, String> {
    stored
        .split(',')
        .filter(|code| !code.is_empty())
        .map(|code| HostEventKind::parse(code).ok_or_else(|| code.to_owned()))
        .collect()
}

fn join_types(types: &[HostEventKind]) -> String {
    types
        .iter()
        .map(|kind| kind.code())
        .collect::<Vec<_>>()
        .join(",")
}

/// The id of the one delivery of an event (its `events.id`) to an endpoint.
fn delivery_id(endpoint_id: &str, event_row: i64) -> String {
    format!("wd_{endpoint_id}_{event_row}")
}

/// ` FOR UPDATE SKIP LOCKED` on PostgreSQL; nothing on SQLite (one writer at a time).
fn skip_locked(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => " FOR UPDATE SKIP LOCKED",
        _ => "",
    }
}

/// `$from, $from+1, …` for `count` values.
fn placeholders(from: usize, count: usize) -> String {
    (from..from + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Abandon an endpoint's open deliveries (it was disabled).
async fn abandon_open(
    tx: &DatabaseTransaction,
    endpoint_id: &str,
    now: Timestamp,
) -> Result<u64, Fail> {
    Ok(sql::execute(
        tx,
        "UPDATE webhook_deliveries SET status = $4, next_attempt_at = NULL, \
         locked_until = NULL, last_error = $3, updated_at = $2 \
         WHERE endpoint_id = $1 AND status IN ($5, $6)",
        vec![
            endpoint_id.into(),
            now.unix_millis().into(),
            ABANDONED_DISABLED.into(),
            DeliveryStatus::Abandoned.as_str().into(),
            DeliveryStatus::Pending.as_str().into(),
            DeliveryStatus::Failed.as_str().into(),
        ],
    )
    .await?)
}

async fn find_endpoint_in<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    lock: &str,
) -> Result<Option<EndpointRow>, Fail> {
    let query = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1{lock}");
    Ok(sql::one(conn, &query, vec![id.into()]).await?)
}

async fn update_in(
    tx: &DatabaseTransaction,
    id: &str,
    change: &EndpointChange,
    now: Timestamp,
) -> Result<End<Option<EndpointRow>>, Fail> {
    let Some(current) = find_endpoint_in(tx, id, sql::for_update(tx)).await? else {
        return Ok(End::Rollback(None));
    };
    let url = change.url.clone().unwrap_or(current.url);
    let types = change
        .event_types
        .as_deref()
        .map_or(current.event_types, join_types);
    let enabled = change.enabled.unwrap_or(current.enabled);
    // Enabling starts afresh; an administrator's disabling has no automatic reason.
    let (reason, failing_since) = match change.enabled {
        Some(_) => (None, None),
        None => (current.disabled_reason, current.failing_since),
    };
    let query = format!(
        "UPDATE webhook_endpoints SET url = $2, event_types = $3, enabled = $4, \
         disabled_reason = $5, failing_since = $6, updated_at = $7 WHERE id = $1 \
         RETURNING {ENDPOINT_COLUMNS}"
    );
    let values = vec![
        id.into(),
        url.into(),
        types.into(),
        enabled.into(),
        reason.into(),
        failing_since.into(),
        now.unix_millis().into(),
    ];
    let row: Option<EndpointRow> = sql::one(tx, &query, values).await?;
    if !enabled {
        abandon_open(tx, id, now).await?;
    }
    Ok(End::Commit(row))
}

async fn fan_out_in(
    tx: &DatabaseTransaction,
    endpoint_id: &str,
    from: i64,
    to: i64,
    events: &[(String, i64)],
    now: Timestamp,
) -> Result<End<Option<u32>>, Fail> {
    let lock = skip_locked(tx.get_database_backend());
    let query = format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND dispatch_cursor = $2{lock}"
    );
    let held: Option<EndpointRow> =
        sql::one(tx, &query, vec![endpoint_id.into(), from.into()]).await?;
    let Some(endpoint) = held else {
        return Ok(End::Rollback(None));
    };
    let mut created = 0_u64;
    if endpoint.enabled {
        for chunk in events.chunks(INSERT_CHUNK) {
            created += insert_deliveries(tx, endpoint_id, chunk, now).await?;
        }
    }
    sql::execute(
        tx,
        "UPDATE webhook_endpoints SET dispatch_cursor = $2 WHERE id = $1",
        vec![endpoint_id.into(), to.max(from).into()],
    )
    .await?;
    Ok(End::Commit(Some(
        u32::try_from(created).unwrap_or(u32::MAX),
    )))
}

/// One multi-row insert of pending deliveries, due now; existing ones are kept.
async fn insert_deliveries(
    tx: &DatabaseTransaction,
    endpoint_id: &str,
    events: &[(String, i64)],
    now: Timestamp,
) -> Result<u64, Fail> {
    let mut values: Vec<Value> = vec![
        endpoint_id.into(),
        now.unix_millis().into(),
        DeliveryStatus::Pending.as_str().into(),
    ];
    let mut rows = Vec::with_capacity(events.len());
    for (_, event_row) in events {
        let n = values.len();
        values.push(delivery_id(endpoint_id, *event_row).into());
        values.push((*event_row).into());
        rows.push(format!("(${}, $1, ${}, $3, 0, $2, $2, $2)", n + 1, n + 2));
    }
    let query = format!(
        "INSERT INTO webhook_deliveries (id, endpoint_id, event_row, status, attempts, \
         next_attempt_at, created_at, updated_at) VALUES {} \
         ON CONFLICT (endpoint_id, event_row) DO NOTHING",
        rows.join(", ")
    );
    Ok(sql::execute(tx, &query, values).await?)
}

async fn claim_in(
    tx: &DatabaseTransaction,
    now: Timestamp,
    limit: u32,
    lease_until: Timestamp,
) -> Result<End<Vec<ClaimRow>>, Fail> {
    let lock = match tx.get_database_backend() {
        DbBackend::Postgres => " FOR UPDATE OF d SKIP LOCKED",
        _ => "",
    };
    let query = format!(
        "UPDATE webhook_deliveries SET locked_until = $3 WHERE id IN (SELECT d.id \
         FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
         WHERE d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= $1 \
         AND (d.locked_until IS NULL OR d.locked_until < $1) AND e.enabled \
         ORDER BY d.next_attempt_at, d.id LIMIT $2{lock}) RETURNING id"
    );
    let values = vec![
        now.unix_millis().into(),
        i64::from(limit).into(),
        lease_until.unix_millis().into(),
    ];
    let ids: Vec<IdRow> = sql::all(tx, &query, values).await?;
    if ids.is_empty() {
        return Ok(End::Commit(Vec::new()));
    }
    let query = format!(
        "SELECT d.id, d.endpoint_id, e.url, e.secret, e.previous_secret, e.previous_secret_until, \
         ev.event_id, ev.payload, d.attempts, e.failing_since FROM webhook_deliveries d \
         JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN events ev ON ev.id = d.event_row \
         WHERE d.id IN ({}) ORDER BY d.next_attempt_at, d.id",
        placeholders(1, ids.len())
    );
    let values = ids.into_iter().map(|row| row.id.into()).collect();
    Ok(End::Commit(sql::all(tx, &query, values).await?))
}

fn claimed(
    row: ClaimRow,
    now: Timestamp,
    lease_until: Timestamp,
) -> Result<ClaimedDelivery, StoreError> {
    let attempts = u32::try_from(row.attempts)
        .map_err(|_| StoreError::Corrupt(format!("webhook_deliveries {:?}: attempts", row.id)))?;
    let mut secrets = vec![WebhookSecret::new(row.secret)];
    if let (Some(previous), Some(until)) = (row.previous_secret, row.previous_secret_until)
        && until > now.unix_millis()
    {
        secrets.push(WebhookSecret::new(previous));
    }
    Ok(ClaimedDelivery {
        id: row.id,
        endpoint_id: row.endpoint_id,
        url: row.url,
        secrets,
        event_id: row.event_id,
        payload: row.payload,
        attempts,
        failing_since: row.failing_since.map(Timestamp::from_unix_millis),
        lease_until,
    })
}

async fn record_in(tx: &DatabaseTransaction, record: &AttemptRecord) -> Result<End<()>, Fail> {
    let at = record.at.unix_millis();
    let changed = sql::execute(
        tx,
        "UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5, \
         locked_until = NULL, last_status_code = $6, last_latency_ms = $7, last_error = $8, \
         updated_at = $9 WHERE id = $1 AND locked_until = $2",
        vec![
            record.delivery_id.as_str().into(),
            record.lease_until.unix_millis().into(),
            record.status.as_str().into(),
            i64::from(record.attempts).into(),
            record.next_attempt_at.map(Timestamp::unix_millis).into(),
            record.status_code.map(i32::from).into(),
            record.latency_ms.into(),
            record.error.clone().into(),
            at.into(),
        ],
    )
    .await?;
    if changed == 0 {
        return Ok(End::Rollback(()));
    }
    if record.status == DeliveryStatus::Succeeded {
        sql::execute(
            tx,
            "UPDATE webhook_endpoints SET failing_since = NULL \
             WHERE id = $1 AND failing_since IS NOT NULL",
            vec![record.endpoint_id.as_str().into()],
        )
        .await?;
        return Ok(End::Commit(()));
    }
    sql::execute(
        tx,
        "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, $2) WHERE id = $1",
        vec![record.endpoint_id.as_str().into(), at.into()],
    )
    .await?;
    if let Some(reason) = &record.disable {
        sql::execute(
            tx,
            "UPDATE webhook_endpoints SET enabled = FALSE, disabled_reason = $2, updated_at = $3 \
             WHERE id = $1 AND enabled",
            vec![
                record.endpoint_id.as_str().into(),
                reason.as_str().into(),
                at.into(),
            ],
        )
        .await?;
        abandon_open(tx, &record.endpoint_id, record.at).await?;
    }
    Ok(End::Commit(()))
}

async fn redeliver_in(
    tx: &DatabaseTransaction,
    endpoint_id: &str,
    target: &RedeliveryTarget,
    now: Timestamp,
) -> Result<End<Option<String>>, Fail> {
    let now_ms = now.unix_millis();
    match target {
        RedeliveryTarget::Delivery(id) => {
            let row: Option<IdRow> = sql::one(
                tx,
                "UPDATE webhook_deliveries SET status = $4, attempts = 0, \
                 next_attempt_at = $3, locked_until = NULL, updated_at = $3 \
                 WHERE id = $1 AND endpoint_id = $2 RETURNING id",
                vec![
                    id.as_str().into(),
                    endpoint_id.into(),
                    now_ms.into(),
                    DeliveryStatus::Pending.as_str().into(),
                ],
            )
            .await?;
            Ok(End::Commit(row.map(|r| r.id)))
        }
        RedeliveryTarget::Event(event_id) => {
            let Some(event_row) = sql::one_i64(
                tx,
                "SELECT id FROM events WHERE event_id = $1",
                vec![event_id.as_str().into()],
                "id",
            )
            .await?
            else {
                return Ok(End::Rollback(None));
            };
            let id = delivery_id(endpoint_id, event_row);
            sql::execute(
                tx,
                "INSERT INTO webhook_deliveries (id, endpoint_id, event_row, status, attempts, \
                 next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $5, 0, $4, $4, $4) \
                 ON CONFLICT (endpoint_id, event_row) DO UPDATE SET status = $5, attempts = 0, \
                 next_attempt_at = $4, locked_until = NULL, updated_at = $4",
                vec![
                    id.as_str().into(),
                    endpoint_id.into(),
                    event_row.into(),
                    now_ms.into(),
                    DeliveryStatus::Pending.as_str().into(),
                ],
            )
            .await?;
            Ok(End::Commit(Some(id)))
        }
    }
}

impl SeaOrmStore {
    async fn find_delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
        self.retry
            .run("find_delivery", || audited::delivery_in(&self.db, id))
            .await
    }
}

/// The key of the PostgreSQL advisory lock that serialises endpoint creation (the count and the
/// insert of [`insert_endpoint_capped`]); `"tallyWHE"` in ASCII.
const ENDPOINT_CAP_LOCK: i64 = 0x7461_6c6c_7957_4845;

/// Insert `endpoint` unless [`MAX_ENDPOINTS`] exist already, in the caller's write transaction:
/// PostgreSQL holds a transaction-scoped advisory lock across the count and the insert, SQLite's
/// `BEGIN IMMEDIATE` holds the write lock, so concurrent creates cannot exceed the cap.
async fn insert_endpoint_capped(
    tx: &DatabaseTransaction,
    endpoint: &WebhookEndpoint,
) -> Result<End<Option<EndpointRow>>, Fail> {
    let postgres = tx.get_database_backend() == DbBackend::Postgres;
    if postgres {
        let lock = "SELECT pg_advisory_xact_lock($1)";
        sql::execute(tx, lock, vec![ENDPOINT_CAP_LOCK.into()]).await?;
    }
    let count = "SELECT COUNT(*) AS total FROM webhook_endpoints";
    let existing = sql::one_i64(tx, count, vec![], "total").await?.unwrap_or(0);
    if existing >= i64::from(MAX_ENDPOINTS) {
        return Ok(End::Rollback(None));
    }
    // The cursor starts after the newest event every reader may see (the outbox's own
    // visibility rule on PostgreSQL): an event whose transaction is still running has a
    // larger id (ids follow transaction order, migration step 18), so it reaches the new
    // endpoint however late it commits.
    let visible = if postgres {
        " WHERE txid < pg_snapshot_xmin(pg_current_snapshot())"
    } else {
        ""
    };
    let query = format!(
        "INSERT INTO webhook_endpoints (id, url, event_types, enabled, secret, dispatch_cursor, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, $5, \
         (SELECT COALESCE(MAX(id), 0) FROM events{visible}), $6, $6) RETURNING {ENDPOINT_COLUMNS}"
    );
    let values = vec![
        endpoint.id.as_str().into(),
        endpoint.url.as_str().into(),
        join_types(&endpoint.event_types).into(),
        endpoint.enabled.into(),
        endpoint.secret.expose().into(),
        endpoint.created_at.unix_millis().into(),
    ];
    let row: Option<EndpointRow> = sql::one(tx, &query, values).await?;
    Ok(End::Commit(Some(
        row.ok_or(Fail::Store(StoreError::NotFound))?,
    )))
}

#[async_trait]
impl WebhookStore for SeaOrmStore {
    async fn create_endpoint(
        &self,
        endpoint: &WebhookEndpoint,
    ) -> Result<Option<WebhookEndpoint>, StoreError> {
        let row = self
            .retry
            .run("create_endpoint", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = insert_endpoint_capped(&tx, endpoint).await;
                sql::finish(tx, body).await
            })
            .await?;
        self.opt_in.forget();
        row.map(EndpointRow::into_domain).transpose()
    }

    async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let query = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY created_at, id LIMIT {MAX_ENDPOINTS}"
        );
        let rows: Vec<EndpointRow> = self.fetch_all("list_endpoints", &query, vec![]).await?;
        rows.into_iter().map(EndpointRow::into_domain).collect()
    }

    async fn find_endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError> {
        let row = self
            .retry
            .run("find_endpoint", || find_endpoint_in(&self.db, id, ""))
            .await?;
        row.map(EndpointRow::into_domain).transpose()
    }

    async fn update_endpoint(
        &self,
        id: &str,
        change: &EndpointChange,
        now: Timestamp,
    ) -> Result<Option<WebhookEndpoint>, StoreError> {
        let row = self
            .retry
            .run("update_endpoint", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = update_in(&tx, id, change, now).await;
                sql::finish(tx, body).await
            })
            .await?;
        self.opt_in.forget();
        row.map(EndpointRow::into_domain).transpose()
    }

    async fn delete_endpoint(&self, id: &str) -> Result<bool, StoreError> {
        let deleted = self
            .run_execute(
                "delete_endpoint",
                "DELETE FROM webhook_endpoints WHERE id = $1",
                vec![id.into()],
            )
            .await?;
        self.opt_in.forget();
        Ok(deleted > 0)
    }

    async fn rotate_secret(
        &self,
        id: &str,
        secret: &WebhookSecret,
        previous_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<WebhookEndpoint>, StoreError> {
        let row = self
            .retry
            .run("rotate_secret", || {
                audited::rotate_in(&self.db, id, secret, previous_until, now)
            })
            .await?;
        row.map(EndpointRow::into_domain).transpose()
    }

    async fn fan_out(
        &self,
        endpoint_id: &str,
        from: i64,
        to: i64,
        events: &[(String, i64)],
        now: Timestamp,
    ) -> Result<Option<u32>, StoreError> {
        self.retry
            .run("fan_out", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = fan_out_in(&tx, endpoint_id, from, to, events, now).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        let lease_until = now.plus_millis(lease_ms);
        let rows = self
            .retry
            .run("claim_deliveries", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = claim_in(&tx, now, limit, lease_until).await;
                sql::finish(tx, body).await
            })
            .await?;
        rows.into_iter()
            .map(|row| claimed(row, now, lease_until))
            .collect()
    }

    async fn record_attempt(&self, record: &AttemptRecord) -> Result<(), StoreError> {
        self.retry
            .run("record_attempt", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = record_in(&tx, record).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn list_deliveries(
        &self,
        endpoint_id: &str,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Page<DeliveryRecord>, StoreError> {
        let filter = "d.endpoint_id = $1 AND ($2 = '' OR d.status = $2)";
        let count = format!("SELECT COUNT(*) AS total FROM webhook_deliveries d WHERE {filter}");
        let items = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_row \
             WHERE {filter} ORDER BY d.created_at DESC, d.event_row DESC LIMIT $3 OFFSET $4"
        );
        let status = status.map_or("", DeliveryStatus::as_str);
        let base: Vec<Value> = vec![endpoint_id.into(), status.into()];
        let mut item_values = base.clone();
        item_values.push(i64::from(page.limit()).into());
        item_values.push(i64::try_from(page.offset()).unwrap_or(i64::MAX).into());
        let (total, rows) = self
            .retry
            .run("list_deliveries", || {
                sql::page::<DeliveryRow>(
                    &self.db,
                    &count,
                    base.clone(),
                    &items,
                    item_values.clone(),
                )
            })
            .await?;
        Ok(Page {
            items: rows
                .into_iter()
                .map(DeliveryRow::into_domain)
                .collect::<Result<_, _>>()?,
            request: page,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn redeliver(
        &self,
        endpoint_id: &str,
        target: &RedeliveryTarget,
        now: Timestamp,
    ) -> Result<Option<DeliveryRecord>, StoreError> {
        let id = self
            .retry
            .run("redeliver", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = redeliver_in(&tx, endpoint_id, target, now).await;
                sql::finish(tx, body).await
            })
            .await?;
        match id {
            Some(id) => self.find_delivery(&id).await,
            None => Ok(None),
        }
    }

    async fn write_endpoint(
        &self,
        write: EndpointWrite<'_>,
        audit: &EndpointAudit<'_>,
    ) -> Result<Option<EndpointWritten>, StoreError> {
        self.endpoint_write(write, audit).await
    }
}
