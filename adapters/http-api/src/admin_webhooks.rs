//! The host application's webhook endpoints under `/api/admin/webhook-endpoints`
//! (administrators only): create (the secret is in that answer only), list, update, delete,
//! rotate the secret, list deliveries, redeliver.
//!
//! A URL the target policy refuses is a 422 `invalid_webhook_url`; an unknown event type a 422
//! `unknown_event_type`. Secrets never appear in a list or in an error.

use std::sync::Arc;

use application::accounts::User;
use application::pagination::Page;
use application::ports::{DeliveryRecord, RedeliveryTarget, WebhookEndpoint};
use application::use_cases::webhook_endpoints::{
    CreatedEndpoint, EndpointUpdate, WebhookEndpointError,
};
use domain::WebhookEndpointId;
use domain::delivery::DeliveryStatus;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::Credential;
use crate::dto::{PageInfo, page_request, parse_id, timestamp};
use crate::problem::{Code, Problem, api_response};

/// A new endpoint.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreateWebhookEndpointBody {
    /// Where events are POSTed: https and public in production (http and loopback are
    /// accepted in development).
    #[oai(validator(max_length = 2048))]
    pub url: String,
    /// Event types to receive (`order.paid`, …); empty or absent means every type except the
    /// opt-in consumption types (`credits.consumed`, `credits.reserved`, `credits.settled`,
    /// `credits.released`), which are sent (and written) only to an endpoint that names them.
    #[oai(default, validator(max_items = 64))]
    pub event_types: Vec<String>,
}

/// A change to an endpoint; absent fields are kept.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UpdateWebhookEndpointBody {
    /// A new URL (checked as at creation).
    #[oai(validator(max_length = 2048), skip_serializing_if_is_none)]
    pub url: Option<String>,
    /// New event types; empty means every type except the opt-in consumption types.
    #[oai(validator(max_items = 64), skip_serializing_if_is_none)]
    pub event_types: Option<Vec<String>>,
    /// Enable or disable (enabling clears an automatic disabling; disabling abandons the open
    /// deliveries).
    #[oai(skip_serializing_if_is_none)]
    pub enabled: Option<bool>,
}

/// Which event to deliver again.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct RedeliverEventBody {
    /// The event's id (`evt_…`, the `webhook-id`).
    #[oai(validator(max_length = 64))]
    pub event_id: String,
}

/// An endpoint as listed (never its secret).
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebhookEndpointView {
    /// `we_…`.
    pub id: String,
    /// Where events are POSTed.
    pub url: String,
    /// The types it receives; empty means every type.
    pub event_types: Vec<String>,
    /// Whether deliveries are made.
    pub enabled: bool,
    /// Why it was disabled automatically.
    #[oai(skip_serializing_if_is_none)]
    pub disabled_reason: Option<String>,
    /// Since when every delivery has failed (absent when the last attempt succeeded).
    #[oai(skip_serializing_if_is_none)]
    pub failing_since: Option<String>,
    /// Until when the secret replaced by the last rotation is still used.
    #[oai(skip_serializing_if_is_none)]
    pub previous_secret_expires_at: Option<String>,
    /// Created.
    pub created_at: String,
    /// Last changed.
    pub updated_at: String,
}

impl From<&WebhookEndpoint> for WebhookEndpointView {
    fn from(e: &WebhookEndpoint) -> Self {
        Self {
            id: e.id.clone(),
            url: e.url.clone(),
            event_types: e.event_types.iter().map(|k| k.code().to_owned()).collect(),
            enabled: e.enabled,
            disabled_reason: e.disabled_reason.clone(),
            failing_since: e.failing_since.map(timestamp),
            previous_secret_expires_at: e
                .previous_secret
                .as_ref()
                .map(|(_, until)| timestamp(*until)),
            created_at: timestamp(e.created_at),
            updated_at: timestamp(e.updated_at),
        }
    }
}

/// An endpoint with its secret: shown at creation and rotation only.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CreatedWebhookEndpointView {
    /// The endpoint.
    #[oai(flatten)]
    pub endpoint: WebhookEndpointView,
    /// The signing secret (`whsec_…`): store it now, it is never shown again.
    pub secret: String,
}

impl From<&CreatedEndpoint> for CreatedWebhookEndpointView {
    fn from(created: &CreatedEndpoint) -> Self {
        Self {
            endpoint: (&created.endpoint).into(),
            secret: created.secret.expose().to_owned(),
        }
    }
}

/// Every endpoint.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebhookEndpointList {
    /// Oldest first.
    pub endpoints: Vec<WebhookEndpointView>,
}

/// One delivery of an event to an endpoint.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebhookDeliveryView {
    /// `wd_…`.
    pub id: String,
    /// The event's id (the `webhook-id`).
    pub event_id: String,
    /// The event's type.
    pub event_type: String,
    /// `pending`, `failed` (another attempt is scheduled), `succeeded` or `abandoned`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// When the next attempt is due.
    #[oai(skip_serializing_if_is_none)]
    pub next_attempt_at: Option<String>,
    /// The last attempt's HTTP status.
    #[oai(skip_serializing_if_is_none)]
    pub last_status_code: Option<u16>,
    /// The last attempt's duration, in milliseconds.
    #[oai(skip_serializing_if_is_none)]
    pub last_latency_ms: Option<i64>,
    /// Why the last attempt failed.
    #[oai(skip_serializing_if_is_none)]
    pub last_error: Option<String>,
    /// Created.
    pub created_at: String,
    /// Last changed.
    pub updated_at: String,
}

impl From<&DeliveryRecord> for WebhookDeliveryView {
    fn from(d: &DeliveryRecord) -> Self {
        Self {
            id: d.id.clone(),
            event_id: d.event_id.clone(),
            event_type: d.event_type.clone(),
            status: d.status.as_str().to_owned(),
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at.map(timestamp),
            last_status_code: d.last_status_code,
            last_latency_ms: d.last_latency_ms,
            last_error: d.last_error.clone(),
            created_at: timestamp(d.created_at),
            updated_at: timestamp(d.updated_at),
        }
    }
}

/// A page of deliveries.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct WebhookDeliveryPage {
    /// Newest first.
    pub deliveries: Vec<WebhookDeliveryView>,
    /// Where this page sits.
    pub pagination: PageInfo,
}

impl From<&Page<DeliveryRecord>> for WebhookDeliveryPage {
    fn from(page: &Page<DeliveryRecord>) -> Self {
        Self {
            deliveries: page.items.iter().map(WebhookDeliveryView::from).collect(),
            pagination: page.into(),
        }
    }
}

api_response! {
    /// `POST /api/admin/webhook-endpoints` and `POST …/{id}/rotate-secret`.
    pub enum CreateWebhookEndpointResponse {
        /// Created; `secret` is shown this once.
        201 Created(Json<CreatedWebhookEndpointView>),
        /// Rotated; the new `secret` is shown this once, the old one is still used for a day.
        200 Rotated(Json<CreatedWebhookEndpointView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `webhook_endpoint_not_found` (rotation).
        404 NotFound,
        /// `too_many_webhook_endpoints`.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `invalid_webhook_url` or `unknown_event_type`.
        422 Unprocessable,
    }
}

api_response! {
    /// `GET /api/admin/webhook-endpoints`.
    pub enum ListWebhookEndpointsResponse {
        /// Every endpoint, without secrets.
        200 Ok(Json<WebhookEndpointList>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
    }
}

api_response! {
    /// `PATCH /api/admin/webhook-endpoints/{id}`.
    pub enum UpdateWebhookEndpointResponse {
        /// The endpoint as stored now.
        200 Ok(Json<WebhookEndpointView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `webhook_endpoint_not_found`.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `invalid_webhook_url` or `unknown_event_type`.
        422 Unprocessable,
    }
}

api_response! {
    /// `DELETE /api/admin/webhook-endpoints/{id}`.
    pub enum DeleteWebhookEndpointResponse {
        /// Deleted, with its deliveries.
        204 Deleted,
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `webhook_endpoint_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `GET /api/admin/webhook-endpoints/{id}/deliveries`.
    pub enum ListWebhookDeliveriesResponse {
        /// A page of deliveries, newest first.
        200 Ok(Json<WebhookDeliveryPage>),
    }
    problems {
        /// `invalid_pagination`, or `validation_failed` for an unknown status.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `webhook_endpoint_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `POST …/{id}/deliveries/{deliveryId}/redeliver` and `POST …/{id}/redeliver`.
    pub enum RedeliverResponse {
        /// Scheduled now, with a fresh retry schedule.
        202 Accepted(Json<WebhookDeliveryView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `webhook_endpoint_not_found` or `webhook_delivery_not_found`.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
    }
}

/// The webhook endpoint administration.
pub(crate) struct AdminWebhooksApi {
    state: Arc<AppState>,
}

impl AdminWebhooksApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of these endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Webhook endpoints of the host application and their deliveries (administrators only).
    Webhooks,
}

impl AdminWebhooksApi {
    /// The acting administrator, once delivery is known to be wired, for an audited change.
    async fn admin_webhooks(&self, credential: &Credential) -> Result<User, Problem> {
        let admin = self.state.admin(credential).await?;
        self.wired()?;
        Ok(admin)
    }

    /// The signed-in administrator's access to the webhooks, when `tally serve` wired them.
    async fn webhooks(&self, credential: &Credential) -> Result<(), Problem> {
        self.state.admin(credential).await?;
        self.wired()
    }

    /// Whether delivery is wired, or the problem saying it is not.
    fn wired(&self) -> Result<(), Problem> {
        if self.state.ports.host_events.delivery_configured() {
            Ok(())
        } else {
            Err(not_configured())
        }
    }
}

/// 503: this process has no webhook delivery.
fn not_configured() -> Problem {
    Problem::new(
        Code::ServiceUnavailable,
        "webhook delivery is not configured",
    )
}

/// An endpoint id from the path, parsed once, here: a malformed one is answered like an
/// unknown one (404 `webhook_endpoint_not_found`).
fn endpoint_id(raw: &str) -> Result<WebhookEndpointId, Problem> {
    parse_id(raw, WebhookEndpointId::new, || {
        endpoint_problem(WebhookEndpointError::NotFound)
    })
}

fn endpoint_problem(e: WebhookEndpointError) -> Problem {
    match e {
        WebhookEndpointError::InvalidUrl(refusal) => {
            Problem::new(Code::InvalidWebhookUrl, refusal.to_string())
        }
        WebhookEndpointError::UnknownEventType(_) => {
            Problem::new(Code::UnknownEventType, e.to_string())
        }
        WebhookEndpointError::TooMany => Problem::new(Code::TooManyWebhookEndpoints, e.to_string()),
        WebhookEndpointError::NotFound => {
            Problem::new(Code::WebhookEndpointNotFound, e.to_string())
        }
        WebhookEndpointError::DeliveryNotFound => {
            Problem::new(Code::WebhookDeliveryNotFound, e.to_string())
        }
        WebhookEndpointError::NotConfigured => not_configured(),
        WebhookEndpointError::Infra(infra) => infra.into(),
    }
}

fn delivery_status(raw: Option<&str>) -> Result<Option<DeliveryStatus>, Problem> {
    raw.map(|name| {
        DeliveryStatus::parse(name.trim()).ok_or_else(|| {
            Problem::new(
                Code::BadRequest,
                "status must be pending, failed, succeeded or abandoned",
            )
        })
    })
    .transpose()
}

#[OpenApi(tag = "Tag::Webhooks")]
impl AdminWebhooksApi {
    /// Register an endpoint; its signing secret is in this response only.
    #[oai(path = "/api/admin/webhook-endpoints", method = "post")]
    async fn create_endpoint(
        &self,
        credential: Credential,
        body: Json<CreateWebhookEndpointBody>,
    ) -> CreateWebhookEndpointResponse {
        let result = async {
            let admin = self.admin_webhooks(&credential).await?;
            self.state
                .ports
                .host_events
                .create_endpoint(&admin, &body.0.url, &body.0.event_types)
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(created) => CreateWebhookEndpointResponse::Created(Json((&created).into())),
            Err(problem) => problem.into(),
        }
    }

    /// Every endpoint, oldest first, without secrets.
    #[oai(path = "/api/admin/webhook-endpoints", method = "get")]
    async fn list_endpoints(&self, credential: Credential) -> ListWebhookEndpointsResponse {
        let result = async {
            self.webhooks(&credential).await?;
            self.state
                .ports
                .host_events
                .list_endpoints()
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(endpoints) => ListWebhookEndpointsResponse::Ok(Json(WebhookEndpointList {
                endpoints: endpoints.iter().map(WebhookEndpointView::from).collect(),
            })),
            Err(problem) => problem.into(),
        }
    }

    /// Change an endpoint's URL, event types or enabled state.
    #[oai(path = "/api/admin/webhook-endpoints/:id", method = "patch")]
    async fn update_endpoint(
        &self,
        credential: Credential,
        /// The endpoint id.
        id: Path<String>,
        body: Json<UpdateWebhookEndpointBody>,
    ) -> UpdateWebhookEndpointResponse {
        let result = async {
            let admin = self.admin_webhooks(&credential).await?;
            let update = EndpointUpdate {
                url: body.0.url,
                event_types: body.0.event_types,
                enabled: body.0.enabled,
            };
            self.state
                .ports
                .host_events
                .update_endpoint(&admin, &id.0, &update)
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(endpoint) => UpdateWebhookEndpointResponse::Ok(Json((&endpoint).into())),
            Err(problem) => problem.into(),
        }
    }

    /// Delete an endpoint and its deliveries.
    #[oai(path = "/api/admin/webhook-endpoints/:id", method = "delete")]
    async fn delete_endpoint(
        &self,
        credential: Credential,
        /// The endpoint id.
        id: Path<String>,
    ) -> DeleteWebhookEndpointResponse {
        let result = async {
            let admin = self.admin_webhooks(&credential).await?;
            let id = endpoint_id(&id.0)?;
            self.state
                .ports
                .host_events
                .delete_endpoint(&admin, &id)
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(()) => DeleteWebhookEndpointResponse::Deleted,
            Err(problem) => problem.into(),
        }
    }

    /// Give an endpoint a new secret; the old one stays valid for a day and both signatures
    /// are sent meanwhile.
    #[oai(
        path = "/api/admin/webhook-endpoints/:id/rotate-secret",
        method = "post"
    )]
    async fn rotate_secret(
        &self,
        credential: Credential,
        /// The endpoint id.
        id: Path<String>,
    ) -> CreateWebhookEndpointResponse {
        let result = async {
            let admin = self.admin_webhooks(&credential).await?;
            let id = endpoint_id(&id.0)?;
            self.state
                .ports
                .host_events
                .rotate_secret(&admin, &id)
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(rotated) => CreateWebhookEndpointResponse::Rotated(Json((&rotated).into())),
            Err(problem) => problem.into(),
        }
    }

    /// An endpoint's deliveries, newest first: status, last status code and latency, attempts
    /// and the next attempt.
    #[oai(path = "/api/admin/webhook-endpoints/:id/deliveries", method = "get")]
    async fn list_deliveries(
        &self,
        credential: Credential,
        /// The endpoint id.
        id: Path<String>,
        /// Only deliveries in this status.
        status: Query<Option<String>>,
        /// Page number, from 1.
        page: Query<Option<String>>,
        /// Page size, 1 to 100.
        limit: Query<Option<String>>,
    ) -> ListWebhookDeliveriesResponse {
        let result = async {
            self.webhooks(&credential).await?;
            let page = page_request(page.0.as_deref(), limit.0.as_deref())?;
            let status = delivery_status(status.0.as_deref())?;
            let id = endpoint_id(&id.0)?;
            self.state
                .ports
                .host_events
                .list_deliveries(&id, status, page)
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(page) => ListWebhookDeliveriesResponse::Ok(Json((&page).into())),
            Err(problem) => problem.into(),
        }
    }

    /// Deliver one delivery again, now, with a fresh retry schedule.
    #[oai(
        path = "/api/admin/webhook-endpoints/:id/deliveries/:deliveryId/redeliver",
        method = "post"
    )]
    async fn redeliver(
        &self,
        credential: Credential,
        /// The endpoint id.
        id: Path<String>,
        /// The delivery id.
        #[oai(name = "deliveryId")]
        delivery_id: Path<String>,
    ) -> RedeliverResponse {
        let target = RedeliveryTarget::Delivery(delivery_id.0);
        self.schedule_again(&credential, &id.0, &target).await
    }

    /// Deliver an event to the endpoint again (or for the first time: an event from before it
    /// was registered, or from while it was disabled), now.
    #[oai(path = "/api/admin/webhook-endpoints/:id/redeliver", method = "post")]
    async fn redeliver_event(
        &self,
        credential: Credential,
        /// The endpoint id.
        id: Path<String>,
        body: Json<RedeliverEventBody>,
    ) -> RedeliverResponse {
        let target = RedeliveryTarget::Event(body.0.event_id);
        self.schedule_again(&credential, &id.0, &target).await
    }
}

impl AdminWebhooksApi {
    async fn schedule_again(
        &self,
        credential: &Credential,
        raw_id: &str,
        target: &RedeliveryTarget,
    ) -> RedeliverResponse {
        let result = async {
            let admin = self.admin_webhooks(credential).await?;
            let endpoint_id = endpoint_id(raw_id)?;
            self.state
                .ports
                .host_events
                .redeliver(&admin, &endpoint_id, target)
                .await
                .map_err(endpoint_problem)
        };
        match result.await {
            Ok(delivery) => RedeliverResponse::Accepted(Json((&delivery).into())),
            Err(problem) => problem.into(),
        }
    }
}
