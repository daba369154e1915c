//! Managing the host application's webhook endpoints: the checks of a new endpoint and of a
//! change (the secret of a new one is shown once), the list of endpoints and of an endpoint's
//! deliveries. An administrator's create, update, delete, secret rotation and redelivery are
//! written with their audit entry (`admin_console::endpoints`).
//!
//! [`Webhooks`] holds the ports delivery needs; the service carries it when `tally serve` wires
//! it ([`crate::service::Service::with_webhooks`]). Every URL is checked against the operator's
//! target policy here, at registration, and again by the sender before every attempt.

use std::sync::Arc;

use domain::delivery::{DeliveryStatus, EndpointHealth, RetrySchedule, TargetRefusal};
use domain::{Timestamp, WebhookEndpointId};

use super::InfraError;
use crate::host_events::HostEventKind;
use crate::pagination::{Page, PageRequest};
use crate::ports::{
    Clock, DeliveryRecord, EndpointChange, HostEventLog, IdGenerator, MAX_ENDPOINTS,
    WebhookEndpoint, WebhookSecret, WebhookSender, WebhookStore,
};

/// How long the secret replaced by a rotation stays valid: a day.
pub const PREVIOUS_SECRET_VALIDITY_MS: i64 = 86_400_000;
/// The longest endpoint URL.
pub const MAX_URL_LENGTH: usize = 2_048;

/// How deliveries are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverySettings {
    /// When failed attempts are retried.
    pub schedule: RetrySchedule,
    /// When an endpoint that keeps failing is disabled.
    pub health: EndpointHealth,
    /// How long a claimed delivery is left to the instance that claimed it (longer than the
    /// request timeout).
    pub lease_ms: i64,
    /// The most deliveries one claim takes (the worker asks for as many as it has free
    /// permits, up to this).
    pub batch: u32,
}

/// The ports and settings of webhook delivery.
pub struct Webhooks {
    pub(crate) store: Arc<dyn WebhookStore>,
    pub(crate) events: Arc<dyn HostEventLog>,
    pub(crate) sender: Arc<dyn WebhookSender>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) ids: Arc<dyn IdGenerator>,
    pub(crate) settings: DeliverySettings,
}

/// A new endpoint and its secret, shown this once.
#[derive(Debug, Clone)]
pub struct CreatedEndpoint {
    /// The endpoint.
    pub endpoint: WebhookEndpoint,
    /// Its secret.
    pub secret: WebhookSecret,
}

/// A secret rotation about to be stored.
pub(crate) struct Rotation {
    /// The new secret.
    pub(crate) secret: WebhookSecret,
    /// Until when the replaced secret stays valid.
    pub(crate) previous_until: Timestamp,
    /// Now.
    pub(crate) now: Timestamp,
}

/// What an administrator asks to change; `None` keeps the field.
#[derive(Debug, Clone, Default)]
pub struct EndpointUpdate {
    /// A new URL.
    pub url: Option<String>,
    /// New types (codes).
    pub event_types: Option<Vec<String>>,
    /// Enable or disable.
    pub enabled: Option<bool>,
}

/// Why an endpoint operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhookEndpointError {
    /// The URL breaks the target policy.
    #[error("{0}")]
    InvalidUrl(TargetRefusal),
    /// An event type Tally does not know.
    #[error("unknown event type {0:?}")]
    UnknownEventType(String),
    /// [`MAX_ENDPOINTS`] exist already.
    #[error("at most {MAX_ENDPOINTS} webhook endpoints")]
    TooMany,
    /// No such endpoint.
    #[error("no such webhook endpoint")]
    NotFound,
    /// No such delivery or event.
    #[error("no such delivery or event")]
    DeliveryNotFound,
    /// Webhook delivery is not wired in this process (`tally serve` wires it).
    #[error("webhook delivery is not configured")]
    NotConfigured,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for WebhookEndpointError {
    fn from(e: crate::ports::StoreError) -> Self {
        Self::Infra(e.into())
    }
}

/// The types an endpoint asks for, validated; duplicates dropped, order kept.
///
/// # Errors
/// The first unknown code.
pub fn parse_event_types(codes: &[String]) -> Result<Vec<HostEventKind>, WebhookEndpointError> {
    let mut kinds = Vec::new();
    for code in codes {
        let kind = HostEventKind::parse(code.trim()).ok_or_else(|| {
            WebhookEndpointError::UnknownEventType(code.chars().take(64).collect())
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// Whether an endpoint subscribed to `types` receives events of `kind`: every type that is not
/// opt-in ([`HostEventKind::is_opt_in`]) when `types` is empty, else the listed ones.
#[must_use]
pub fn subscribes(types: &[HostEventKind], kind: HostEventKind) -> bool {
    if types.is_empty() {
        !kind.is_opt_in()
    } else {
        types.contains(&kind)
    }
}

impl Webhooks {
    /// Wire delivery.
    #[must_use]
    pub fn new(
        store: Arc<dyn WebhookStore>,
        events: Arc<dyn HostEventLog>,
        sender: Arc<dyn WebhookSender>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        settings: DeliverySettings,
    ) -> Self {
        Self {
            store,
            events,
            sender,
            clock,
            ids,
            settings,
        }
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> &DeliverySettings {
        &self.settings
    }

    async fn check_url(&self, url: &str) -> Result<String, WebhookEndpointError> {
        let url = url.trim();
        if url.is_empty() || url.len() > MAX_URL_LENGTH {
            return Err(WebhookEndpointError::InvalidUrl(TargetRefusal::Malformed));
        }
        self.sender
            .check_target(url)
            .await
            .map_err(WebhookEndpointError::InvalidUrl)?;
        Ok(url.to_owned())
    }

    /// A new endpoint for `url` and `event_types`, checked, with its new secret; not stored.
    pub(crate) async fn new_endpoint(
        &self,
        url: &str,
        event_types: &[String],
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        let event_types = parse_event_types(event_types)?;
        let url = self.check_url(url).await?;
        let now = self.clock.now();
        let secret = self.sender.new_secret();
        let endpoint = WebhookEndpoint {
            id: self.ids.new_id("we"),
            url,
            event_types,
            enabled: true,
            disabled_reason: None,
            secret: secret.clone(),
            previous_secret: None,
            cursor: 0,
            failing_since: None,
            created_at: now,
            updated_at: now,
        };
        Ok(CreatedEndpoint { endpoint, secret })
    }

    /// Every endpoint, oldest first.
    ///
    /// # Errors
    /// Infrastructure.
    pub async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, WebhookEndpointError> {
        Ok(self.store.list_endpoints().await?)
    }

    /// `update` checked: the change to store.
    pub(crate) async fn endpoint_change(
        &self,
        update: &EndpointUpdate,
    ) -> Result<EndpointChange, WebhookEndpointError> {
        let event_types = update
            .event_types
            .as_deref()
            .map(parse_event_types)
            .transpose()?;
        let url = match &update.url {
            Some(url) => Some(self.check_url(url).await?),
            None => None,
        };
        Ok(EndpointChange {
            url,
            event_types,
            enabled: update.enabled,
        })
    }

    /// A new secret, and until when the one it replaces stays valid.
    pub(crate) fn new_rotation(&self) -> Rotation {
        let now = self.clock.now();
        Rotation {
            secret: self.sender.new_secret(),
            previous_until: now.plus_millis(PREVIOUS_SECRET_VALIDITY_MS),
            now,
        }
    }

    /// An endpoint's deliveries, newest first.
    ///
    /// # Errors
    /// No such endpoint, infrastructure.
    pub async fn list_deliveries(
        &self,
        endpoint_id: &WebhookEndpointId,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Page<DeliveryRecord>, WebhookEndpointError> {
        if self
            .store
            .find_endpoint(endpoint_id.as_str())
            .await?
            .is_none()
        {
            return Err(WebhookEndpointError::NotFound);
        }
        Ok(self
            .store
            .list_deliveries(endpoint_id.as_str(), status, page)
            .await?)
    }

    /// Now, from the clock port.
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }
}
