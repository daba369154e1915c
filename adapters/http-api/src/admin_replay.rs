//! `POST /api/admin/webhook-events/{id}/replay`: an administrator replays one recorded provider
//! event through the webhook pipeline (issue 18; see
//! `application::use_cases::admin_console::replay`). An event that was applied answers
//! `duplicate` and changes nothing; any other is decided again now.

use std::sync::Arc;

use application::use_cases::admin_console::{ReplayError, Replayed};
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::admin_console::WebhookEventView;
use crate::auth::Credential;
use crate::problem::{Code, Problem, api_response};

/// What a replay came to.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct ReplayedEventView {
    /// The recorded event, as it was recorded (its row does not change).
    pub event: WebhookEventView,
    /// `duplicate` for an event that was applied (nothing changed); else what the pipeline
    /// decided now: `applied`, `mismatch`, `unknown_order`, `duplicate_state`, …
    pub outcome: String,
    /// The inbox event id the replay was recorded under (`<eventId>#replay-rp_…`); absent for
    /// a duplicate.
    #[oai(skip_serializing_if_is_none)]
    pub replayed_as: Option<String>,
}

impl From<&Replayed> for ReplayedEventView {
    fn from(r: &Replayed) -> Self {
        Self {
            event: (&r.recorded).into(),
            outcome: r.outcome.clone(),
            replayed_as: r.replayed_as.clone(),
        }
    }
}

api_response! {
    /// `POST /api/admin/webhook-events/{id}/replay`.
    pub enum ReplayResponse {
        /// Replayed (or a duplicate of an applied event).
        200 Ok(Json<ReplayedEventView>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `webhook_event_not_found`.
        404 NotFound,
        /// `not_replayable` (provider not configured, no body, body unreadable) or
        /// `provider_unavailable` (a look-up the event needs failed; try again later).
        422 Unprocessable,
    }
}

/// Replay of recorded provider events.
pub(crate) struct AdminReplayApi {
    state: Arc<AppState>,
}

impl AdminReplayApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of these endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Customers, orders, ledgers and the audit log (administrators only).
    AdminConsole,
}

fn replay_problem(e: ReplayError) -> Problem {
    match e {
        ReplayError::NotFound => Problem::new(Code::WebhookEventNotFound, e.to_string()),
        ReplayError::NotReplayable(_) => Problem::new(Code::NotReplayable, e.to_string()),
        ReplayError::ProviderUnavailable(_) => {
            Problem::new(Code::ProviderUnavailable, e.to_string())
        }
        ReplayError::Infra(infra) => infra.into(),
    }
}

#[OpenApi(tag = "Tag::AdminConsole")]
impl AdminReplayApi {
    /// Replay one recorded provider event through the webhook pipeline: the same decision and
    /// checks as a live delivery, without the signature (checked when it was recorded). An
    /// applied event is a `duplicate`; a mismatch or unknown order is decided again (after a
    /// plan was fixed, or the order arrived late). Written to the audit log.
    #[oai(path = "/api/admin/webhook-events/:id/replay", method = "post")]
    async fn replay_webhook_event(
        &self,
        credential: Credential,
        /// The inbox row id.
        id: Path<String>,
    ) -> ReplayResponse {
        let result = async {
            let admin = self.state.admin(&credential).await?;
            let id =
                id.0.trim()
                    .parse::<i64>()
                    .map_err(|_| replay_problem(ReplayError::NotFound))?;
            self.state
                .ports
                .admin
                .replay_webhook_event(&admin, id)
                .await
                .map_err(replay_problem)
        };
        match result.await {
            Ok(replayed) => ReplayResponse::Ok(Json((&replayed).into())),
            Err(problem) => problem.into(),
        }
    }
}
