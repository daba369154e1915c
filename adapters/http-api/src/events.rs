//! `GET /api/events`: the catch-up feed of host events (issue 17). Administrators (signed in)
//! and service API keys with scope `events:read` read, oldest first, the events after a
//! cursor; the envelopes are exactly those delivered to webhook endpoints.

use std::sync::Arc;

use application::authorization::{self, Permission};
use application::ports::StoredEvent;
use application::use_cases::event_feed::{FeedError, FeedPage, FeedQuery, MAX_FEED_TYPES};
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};
use serde_json::Value;

use crate::AppState;
use crate::auth::{Credential, denied};
use crate::problem::{Code, Problem, api_response};

/// One event: the Standard Webhooks payload, exactly as webhook endpoints receive it.
#[derive(Debug, Clone, Object)]
pub struct EventEnvelope {
    /// `evt_…`, unique; the `webhook-id` of its deliveries.
    pub id: String,
    /// The event type (`order.paid`, `credits.granted`, …; see `docs/events.md`).
    #[oai(rename = "type")]
    pub kind: String,
    /// When the change happened (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
    /// `userId`, `hostSubject` for users of a host application, and the object the event is
    /// about (`order`, `subscription`, `transaction`, …) with the API's field names.
    pub data: Value,
}

impl EventEnvelope {
    /// The envelope of a stored event (its payload is the JSON written with the change).
    fn of(event: &StoredEvent) -> Result<Self, Problem> {
        let parsed: Value = serde_json::from_str(&event.payload).map_err(|e| {
            // The store wrote it; a payload that is not JSON is a corrupt row, not bad input.
            tracing::error!(event = %event.event_id, error = %e, "unreadable event payload");
            Problem::new(Code::InternalError, "an event could not be read")
        })?;
        let text = |name: &str| parsed[name].as_str().unwrap_or_default().to_owned();
        Ok(Self {
            id: text("id"),
            kind: text("type"),
            timestamp: text("timestamp"),
            data: parsed["data"].clone(),
        })
    }
}

/// A page of the feed.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct EventPage {
    /// The events, oldest first.
    pub data: Vec<EventEnvelope>,
    /// Pass as `after` to read on; absent when this page is empty and nothing more was looked
    /// at (read again later with the same cursor). Opaque.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
    /// Whether more events could be read right away. With `type`, a page can hold fewer events
    /// than `limit`, even none, and still have more: follow `nextCursor` while this is true.
    pub has_more: bool,
}

impl EventPage {
    fn of(page: &FeedPage) -> Result<Self, Problem> {
        Ok(Self {
            data: page
                .events
                .iter()
                .map(EventEnvelope::of)
                .collect::<Result<_, _>>()?,
            next_cursor: page.next_cursor.clone(),
            has_more: page.has_more,
        })
    }
}

api_response! {
    /// `GET /api/events`.
    pub enum EventsResponse {
        /// The events after the cursor, oldest first.
        200 Ok(Json<EventPage>),
    }
    problems {
        /// `invalid_cursor`: `after` is not a cursor this feed returned; `invalid_pagination`:
        /// `limit` is not an integer from 1 to 500.
        400 BadRequest,
        /// `unauthorized`: no valid session or API key.
        401 Unauthorized,
        /// `forbidden`: neither an administrator nor an API key with scope `events:read`.
        /// Also `forbidden`: an API key bound to one account.
        403 Forbidden,
        /// `unknown_event_type`: `type` names a type Tally does not know.
        422 UnprocessableEntity,
    }
}

/// The host events feed.
pub(crate) struct EventsApi {
    state: Arc<AppState>,
}

impl EventsApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the events endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// What happened, for the host application to catch up on.
    Events,
}

fn feed_problem(e: FeedError) -> Problem {
    match e {
        FeedError::InvalidCursor => Problem::new(Code::InvalidCursor, e.to_string()),
        FeedError::InvalidLimit => Problem::new(Code::InvalidPagination, e.to_string()),
        FeedError::UnknownType(_) => Problem::new(Code::UnknownEventType, e.to_string()),
        FeedError::Infra(infra) => infra.into(),
    }
}

impl EventsApi {
    /// Administrators and API keys with `events:read` may read the feed.
    async fn reader(&self, credential: &Credential) -> Result<(), Problem> {
        let principal = self.state.principal(credential).await?;
        authorization::authorize(&principal, Permission::ReadEvents).map_err(denied)
    }
}

#[OpenApi(tag = "Tag::Events")]
impl EventsApi {
    /// The events after a cursor, oldest first: replay what the application missed. Events are
    /// kept for `events.retentionDays` (default 30); a cursor that old resumes at the oldest
    /// kept event.
    #[oai(path = "/api/events", method = "get")]
    async fn events(
        &self,
        credential: Credential,
        /// The `nextCursor` of the last page read; absent reads from the oldest kept event.
        after: Query<Option<String>>,
        /// Page size, 1 to 500 (default 100).
        limit: Query<Option<String>>,
        /// Only these types: repeat the parameter or give a comma-separated list.
        #[oai(name = "type")]
        types: Query<Option<Vec<String>>>,
    ) -> EventsResponse {
        let result = async {
            self.reader(&credential).await?;
            let limit = limit
                .0
                .map(|raw| {
                    raw.trim().parse::<i64>().map_err(|_| {
                        Problem::new(Code::InvalidPagination, "limit must be an integer")
                    })
                })
                .transpose()?;
            let mut types = types.0.unwrap_or_default();
            types.truncate(MAX_FEED_TYPES + 1);
            let query = FeedQuery {
                after: after.0.map(|a| a.chars().take(64).collect()),
                limit,
                types,
            };
            let page = self
                .state
                .ports
                .host_events
                .read_events(&query)
                .await
                .map_err(feed_problem)?;
            EventPage::of(&page)
        };
        match result.await {
            Ok(page) => EventsResponse::Ok(Json(page)),
            Err(problem) => problem.into(),
        }
    }
}
