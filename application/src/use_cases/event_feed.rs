//! The catch-up feed of host events (issue 17). An application that was down
//! reads, oldest first, every event after the last one it saw, and keeps the returned cursor.
//!
//! The cursor is the outbox row id, shown as an opaque string; one above every id the store
//! has handed out (`HostEventLog::issued_through`) was never issued and is refused, which holds
//! with several instances (they share the store) and after a purge (the high-water mark stays).
//! The store never returns an event while one with a smaller id may still commit
//! (`HostEventLog::events_after`), so following `nextCursor` never skips an event; events are
//! kept for a configured time ([`Service::purge_events`]), so a cursor older than that resumes
//! at the oldest kept event.

use domain::Timestamp;

use super::InfraError;
use crate::host_events::HostEventKind;
use crate::ports::{Clock, EventsRead, IdGenerator, SecretHasher, Store, StoredEvent};
use crate::service::Service;

/// The page size when the caller gives none.
pub const DEFAULT_FEED_LIMIT: u32 = 100;
/// The largest page size.
pub const MAX_FEED_LIMIT: u32 = 500;
/// The most `type` filters one request may name (there are fewer types than this).
pub const MAX_FEED_TYPES: usize = 32;
/// The most events one retention statement (one short transaction) deletes.
pub const PURGE_BATCH: u32 = 1_000;
/// The most statements one retention pass runs: with a pass every 30 seconds, up to 100,000
/// events, so a service writing a few thousand events a second sustained still keeps up.
pub const PURGE_BATCHES_PER_PASS: u32 = 100;

/// What a reader asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedQuery {
    /// The cursor returned with the last page read (`nextCursor`); `None` starts at the oldest
    /// kept event.
    pub after: Option<String>,
    /// The page size (default [`DEFAULT_FEED_LIMIT`], at most [`MAX_FEED_LIMIT`]).
    pub limit: Option<i64>,
    /// Type codes to keep, each possibly a comma-separated list; empty keeps every type.
    pub types: Vec<String>,
}

/// A page of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPage {
    /// The events, oldest first.
    pub events: Vec<StoredEvent>,
    /// Where the next read starts: after the last event of this page, or after the last event
    /// the read looked at when it stopped looking early; `None` when the page is empty and
    /// nothing more was looked at (read again later with the same cursor).
    pub next_cursor: Option<String>,
    /// Whether more events were already readable after this page (or the read stopped looking
    /// early, so a page can be short, even empty, and still have more after it).
    pub has_more: bool,
}

/// Why a feed read was refused.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// `after` is not a cursor this feed returned.
    #[error("after is not a cursor returned by this feed")]
    InvalidCursor,
    /// `limit` is out of range.
    #[error("limit must be between 1 and {MAX_FEED_LIMIT}")]
    InvalidLimit,
    /// `type` names a type Tally does not know (or too many types).
    #[error("unknown event type {0:?}")]
    UnknownType(String),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Parse a cursor: the decimal id of the last event seen.
fn cursor(raw: &str) -> Result<i64, FeedError> {
    let valid = !raw.is_empty() && raw.len() <= 19 && raw.bytes().all(|b| b.is_ascii_digit());
    if !valid {
        return Err(FeedError::InvalidCursor);
    }
    raw.parse().map_err(|_| FeedError::InvalidCursor)
}

/// The types named by `raw` (repeated values, each possibly a comma list), without repeats.
fn kinds(raw: &[String]) -> Result<Vec<HostEventKind>, FeedError> {
    let mut kinds = Vec::new();
    for code in raw.iter().flat_map(|value| value.split(',')) {
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        let kind = HostEventKind::parse(code)
            .ok_or_else(|| FeedError::UnknownType(code.chars().take(64).collect()))?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
        if kinds.len() > MAX_FEED_TYPES {
            return Err(FeedError::UnknownType(code.chars().take(64).collect()));
        }
    }
    Ok(kinds)
}

fn limit(raw: Option<i64>) -> Result<u32, FeedError> {
    let limit = raw.unwrap_or(i64::from(DEFAULT_FEED_LIMIT));
    u32::try_from(limit)
        .ok()
        .filter(|l| (1..=MAX_FEED_LIMIT).contains(l))
        .ok_or(FeedError::InvalidLimit)
}

/// The page a read of `limit + 1` events makes: `limit` of them, the cursor after the last, and
/// whether more are readable now. A read that stopped looking early (a store without an index by
/// type) moves the cursor past everything it looked at, found or not, and says there is more.
fn page(read: EventsRead, limit: u32) -> FeedPage {
    let mut events = read.events;
    let found_more = events.len() > limit as usize;
    events.truncate(limit as usize);
    let last = events.last().map(|e| e.id);
    let (next, has_more) = match read.looked_through {
        // Every event of such a read lies within what it looked at.
        Some(looked) if !found_more => (Some(looked), true),
        _ => (last, found_more),
    };
    FeedPage {
        events,
        next_cursor: next.map(|id| id.to_string()),
        has_more,
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The host events after `query.after`, oldest first. Who may read is
    /// [`crate::authorization::Permission::ReadEvents`] (administrators, and API keys with
    /// `events:read`), checked by the caller before it asks.
    ///
    /// # Errors
    /// See [`FeedError`].
    #[tracing::instrument(skip_all)]
    pub async fn read_events(&self, query: &FeedQuery) -> Result<FeedPage, FeedError> {
        let after = query.after.as_deref().map(cursor).transpose()?;
        let limit = limit(query.limit)?;
        let kinds = kinds(&query.types)?;
        if let Some(after) = after {
            // A cursor beyond every id the log has handed out was never issued by this feed: a
            // reader keeping it would wait at a place no event will reach for years.
            let issued = self
                .store
                .issued_through()
                .await
                .map_err(InfraError::from)?;
            if after > issued {
                return Err(FeedError::InvalidCursor);
            }
        }
        // One more than asked tells whether more is readable now.
        let read = self
            .store
            .events_after(after, limit + 1, &kinds)
            .await
            .map_err(InfraError::from)?;
        Ok(page(read, limit))
    }

    /// Delete the events older than `retention_ms` before now, a batch of [`PURGE_BATCH`] per
    /// transaction and at most [`PURGE_BATCHES_PER_PASS`] batches (the background loop calls this
    /// after each reconciliation pass); returns how many.
    ///
    /// # Errors
    /// Infrastructure (what earlier batches deleted stays deleted).
    #[tracing::instrument(skip_all, fields(retention_ms = retention_ms))]
    pub async fn purge_events(&self, retention_ms: i64) -> Result<u32, InfraError> {
        let before: Timestamp = self.clock.now().plus_millis(-retention_ms.max(0));
        let mut total = 0_u32;
        for _ in 0..PURGE_BATCHES_PER_PASS {
            let purged = self.store.purge_events(before, PURGE_BATCH).await?;
            total = total.saturating_add(purged);
            if purged < PURGE_BATCH {
                break;
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use domain::{Timestamp, UserId};

    use super::*;
    use crate::ports::Gateways;
    use crate::testing::{FixedClock, InMemoryStore, PlainHasher, SequentialIds, fixtures};

    type FeedService = Service<InMemoryStore, FixedClock, SequentialIds, PlainHasher>;

    fn service() -> FeedService {
        Service::new(
            InMemoryStore::new(),
            FixedClock::at(1_800_000_000_000),
            SequentialIds::default(),
            PlainHasher,
            Gateways::new(),
            fixtures::config(),
        )
    }

    fn event(kind: HostEventKind, at: i64) -> StoredEvent {
        StoredEvent {
            id: 0,
            event_id: format!("evt_{at}"),
            kind,
            user_id: Some(UserId::new("usr_1").unwrap()),
            payload: "{}".into(),
            occurred_at: Timestamp::from_unix_millis(at),
        }
    }

    #[test]
    fn cursors_limits_and_types_are_checked() {
        assert_eq!(cursor("42").unwrap(), 42);
        for bad in ["", "-1", "1.5", "abc", "99999999999999999999", " 1", "0x10"] {
            assert!(
                matches!(cursor(bad), Err(FeedError::InvalidCursor)),
                "{bad}"
            );
        }
        assert_eq!(limit(None).unwrap(), DEFAULT_FEED_LIMIT);
        assert_eq!(limit(Some(500)).unwrap(), 500);
        for bad in [0, -1, 501] {
            assert!(matches!(limit(Some(bad)), Err(FeedError::InvalidLimit)));
        }
        let parsed = kinds(&["order.paid,credits.granted".into(), "order.paid".into()]).unwrap();
        assert_eq!(
            parsed,
            vec![HostEventKind::OrderPaid, HostEventKind::CreditsGranted]
        );
        assert!(matches!(
            kinds(&["order.shipped".into()]),
            Err(FeedError::UnknownType(t)) if t == "order.shipped"
        ));
        assert!(kinds(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_read_that_stopped_looking_early_moves_the_cursor_past_what_it_looked_at() {
        let at = |id: i64| StoredEvent {
            id,
            ..event(HostEventKind::OrderPaid, id)
        };
        // Nothing of the types asked for among the events looked at: an empty page with more.
        let empty = page(
            EventsRead {
                events: vec![],
                looked_through: Some(5_000),
            },
            10,
        );
        assert!(empty.events.is_empty() && empty.has_more);
        assert_eq!(empty.next_cursor.as_deref(), Some("5000"));
        // A short page: the cursor moves past what was looked at, not only what was found.
        let short = page(
            EventsRead {
                events: vec![at(7), at(9)],
                looked_through: Some(5_007),
            },
            10,
        );
        assert_eq!((short.events.len(), short.has_more), (2, true));
        assert_eq!(short.next_cursor.as_deref(), Some("5007"));
        // More found than asked: the cursor stays on the last event returned.
        let full = page(
            EventsRead {
                events: vec![at(1), at(2), at(3)],
                looked_through: Some(9_000),
            },
            2,
        );
        assert_eq!((full.events.len(), full.has_more), (2, true));
        assert_eq!(full.next_cursor.as_deref(), Some("2"));
        // A read that looked as far as it needed: the cursor after the last event, or none.
        let done = page(
            EventsRead {
                events: vec![at(4)],
                looked_through: None,
            },
            2,
        );
        assert_eq!(
            (done.next_cursor.as_deref(), done.has_more),
            (Some("4"), false)
        );
        let nothing = page(EventsRead::default(), 2);
        assert_eq!((nothing.next_cursor, nothing.has_more), (None, false));
    }

    #[tokio::test]
    async fn the_feed_pages_by_cursor_without_gaps_or_repeats() {
        let service = service();
        let store = service.store();
        for at in 1..=5 {
            store.push_host_event(event(HostEventKind::OrderPaid, at));
        }
        store.push_host_event(event(HostEventKind::CreditsGranted, 6));
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let query = FeedQuery {
                after: after.clone(),
                limit: Some(2),
                types: vec![],
            };
            let page = service.read_events(&query).await.unwrap();
            seen.extend(page.events.iter().map(|e| e.id));
            match page.next_cursor {
                Some(next) => after = Some(next),
                None => break,
            }
            if !page.has_more {
                break;
            }
        }
        assert_eq!(seen, vec![1, 2, 3, 4, 5, 6]);
        let granted = FeedQuery {
            types: vec!["credits.granted".into()],
            ..FeedQuery::default()
        };
        let page = service.read_events(&granted).await.unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.next_cursor.as_deref(), Some("6"));
        assert!(!page.has_more);
    }

    #[tokio::test]
    async fn a_cursor_beyond_every_id_handed_out_is_refused_even_after_a_purge() {
        let service = service();
        let store = service.store();
        let read = |after: &str| FeedQuery {
            after: Some(after.to_owned()),
            ..FeedQuery::default()
        };
        assert!(matches!(
            service.read_events(&read("1")).await,
            Err(FeedError::InvalidCursor)
        ));
        for at in 1..=3 {
            store.push_host_event(event(HostEventKind::OrderPaid, at));
        }
        for forged in ["4", "9223372036854775807"] {
            assert!(matches!(
                service.read_events(&read(forged)).await,
                Err(FeedError::InvalidCursor)
            ));
        }
        let last = service.read_events(&read("3")).await.unwrap();
        assert!(last.events.is_empty() && !last.has_more);
        // Every event purged: the cursors the feed issued stay valid.
        service.purge_events(0).await.unwrap();
        assert!(service.read_events(&read("3")).await.is_ok());
        assert!(service.read_events(&read("0")).await.is_ok());
    }

    #[tokio::test]
    async fn a_pass_purges_every_batch_of_expired_events_and_keeps_the_young_ones() {
        let service = service();
        let store = service.store();
        let retention = 1_000;
        let now = 1_800_000_000_000;
        let old = i64::from(PURGE_BATCH) * 5 / 2;
        for at in 0..old {
            store.push_host_event(event(HostEventKind::OrderPaid, at));
        }
        for at in now - 10..now {
            store.push_host_event(event(HostEventKind::CreditsGranted, at));
        }
        let purged = service.purge_events(retention).await.unwrap();
        assert_eq!(i64::from(purged), old, "several batches in one pass");
        assert_eq!(service.purge_events(retention).await.unwrap(), 0);
        let page = service.read_events(&FeedQuery::default()).await.unwrap();
        assert_eq!(page.events.len(), 10, "the young events stay");
    }
}
