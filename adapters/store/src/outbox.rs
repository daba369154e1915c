//! The transactional outbox of host events (CORRECTNESS.md invariant 13): where the events a
//! write tells are stored, always inside that write's transaction, and the reads of the
//! catch-up feed.
//!
//! A transaction body collects the events it was given or that its ledger writes tell
//! (`application::host_events` decides which) into an [`Outbox`] and calls [`Outbox::write`]
//! before it commits: one multi-row `INSERT` for every event of the transaction, nothing at all
//! when it changed nothing. The store keeps the bytes the wiring's
//! [`HostEventEncoder`] renders, and the id each event derives from the fact it tells
//! ([`HostEvent::event_id`]): writing the same fact twice is a no-op
//! (`ON CONFLICT DO NOTHING`), new ids append to the `event_id` index, and the store needs no
//! source of randomness.
//!
//! Visibility (PostgreSQL): transactions commit in any order, so [`events_after`] returns only
//! rows whose writing transaction (`txid`) is older than every transaction still running, and
//! an id begins with its transaction's id (`txid << 20`, migration step 18), so every event a
//! running transaction can still commit has a larger id than any row returned: a reader never
//! moves its cursor past an event that commits later. SQLite has one writer at a time, so id
//! order is commit order there.

use application::host_events::{HostEvent, HostEventKind};
use application::ports::{
    EntitlementBasis, EventsRead, HOST_USER_ID_PREFIX, HostEventEncoder, HostEventLog,
    MAX_EVENTS_PER_READ, StoreError, StoredEvent,
};
use async_trait::async_trait;
use domain::{AccountId, Timestamp, UserId};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, Value};

use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql;
use crate::{SeaOrmStore, entitlements_told};

/// The events one transaction collected, written together by [`Outbox::write`].
#[derive(Debug, Default)]
pub(crate) struct Outbox(Vec<HostEvent>);

impl From<Vec<HostEvent>> for Outbox {
    fn from(events: Vec<HostEvent>) -> Self {
        Outbox(events)
    }
}

impl IntoIterator for Outbox {
    type Item = HostEvent;
    type IntoIter = std::vec::IntoIter<HostEvent>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl Outbox {
    /// Add an event.
    pub(crate) fn push(&mut self, event: HostEvent) {
        self.0.push(event);
    }

    /// Add every event of `events`.
    pub(crate) fn extend(&mut self, events: impl IntoIterator<Item = HostEvent>) {
        self.0.extend(events);
    }

    /// Write every collected event in one statement, inside the caller's transaction, rendered
    /// by `encoder`; nothing when there is none.
    pub(crate) async fn write<C: ConnectionTrait>(
        self,
        conn: &C,
        encoder: &dyn HostEventEncoder,
    ) -> Result<(), DbErr> {
        match self.statement(conn, encoder).await? {
            Some((sql, values)) => sql::execute(conn, &sql, values).await.map(drop),
            None => Ok(()),
        }
    }

    /// The one `INSERT` of every collected event and its values; `None` when there is none.
    async fn statement<C: ConnectionTrait>(
        self,
        conn: &C,
        encoder: &dyn HostEventEncoder,
    ) -> Result<Option<(String, Vec<Value>)>, DbErr> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let subjects = host_subjects(conn, &self.0).await?;
        let mut placeholders = Vec::with_capacity(self.0.len());
        let mut values: Vec<Value> = Vec::with_capacity(self.0.len() * 5);
        for (i, event) in self.0.into_iter().enumerate() {
            let n = 1 + i * 5;
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
                .map(|(_, subject)| subject.as_str());
            let event_id = event.event_id();
            let payload = encoder.encode(&event, &event_id, subject);
            let user = event.user.as_ref().map(|u| u.as_str().to_owned());
            values.extend([
                event_id.into(),
                event.kind.code().into(),
                user.into(),
                payload.into(),
                event.occurred_at.unix_millis().into(),
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
        event: HostEvent,
        encoder: &dyn HostEventEncoder,
    ) -> Result<(), DbErr> {
        Outbox(vec![event]).write(conn, encoder).await
    }
}

/// `(user id, host subject)` of the events' users that sign in through a host application.
async fn host_subjects<C: ConnectionTrait>(
    conn: &C,
    events: &[HostEvent],
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

    async fn entitlement_basis(&self, account: &AccountId) -> Result<EntitlementBasis, StoreError> {
        self.retry
            .run("entitlement_basis", || {
                entitlements_told::basis(&self.db, account)
            })
            .await
    }

    async fn entitlements_due(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<AccountId>, StoreError> {
        self.retry
            .run("entitlements_due", || {
                entitlements_told::due(&self.db, now, limit)
            })
            .await
    }
}
