//! [`HostEventsService`]: the host events feed and the webhook endpoints they are delivered to.

use async_trait::async_trait;
use domain::WebhookEndpointId;
use domain::delivery::DeliveryStatus;

use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{
    Clock, DeliveryRecord, IdGenerator, RedeliveryTarget, SecretHasher, Store, WebhookEndpoint,
};
use crate::service::Service;
use crate::use_cases::event_feed::{FeedError, FeedPage, FeedQuery};
use crate::use_cases::webhook_endpoints::{
    CreatedEndpoint, EndpointUpdate, WebhookEndpointError, Webhooks,
};

/// The host events feed and the webhook endpoints.
///
/// Every endpoint method answers [`WebhookEndpointError::NotConfigured`] while delivery is not
/// wired ([`HostEventsService::delivery_configured`]); the `…_by` methods take the acting
/// administrator and write an audit entry.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait HostEventsService: Send + Sync + 'static {
    /// The host events after `query.after`, oldest first (see [`Service::read_events`]).
    async fn read_events(&self, query: &FeedQuery) -> Result<FeedPage, FeedError>;

    /// Whether webhook delivery is wired in this process.
    fn delivery_configured(&self) -> bool;

    /// Register an endpoint; its secret is in the answer only (see
    /// [`Service::create_endpoint_by`]).
    async fn create_endpoint_by(
        &self,
        admin: &User,
        url: &str,
        event_types: &[String],
    ) -> Result<CreatedEndpoint, WebhookEndpointError>;

    /// Every endpoint (see [`Webhooks::list_endpoints`]).
    async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, WebhookEndpointError>;

    /// Change an endpoint (see [`Service::update_endpoint_by`]). `id` stays text: the update is
    /// checked before the id is looked up, so a malformed id must answer a bad update exactly as
    /// an unknown id does.
    async fn update_endpoint_by(
        &self,
        admin: &User,
        id: &str,
        update: &EndpointUpdate,
    ) -> Result<WebhookEndpoint, WebhookEndpointError>;

    /// Remove an endpoint (see [`Service::delete_endpoint_by`]).
    async fn delete_endpoint_by(
        &self,
        admin: &User,
        id: &WebhookEndpointId,
    ) -> Result<(), WebhookEndpointError>;

    /// Give an endpoint a new secret, the old one kept for a while (see
    /// [`Service::rotate_secret_by`]).
    async fn rotate_secret_by(
        &self,
        admin: &User,
        id: &WebhookEndpointId,
    ) -> Result<CreatedEndpoint, WebhookEndpointError>;

    /// An endpoint's deliveries, newest first (see [`Webhooks::list_deliveries`]).
    async fn list_deliveries(
        &self,
        endpoint_id: &WebhookEndpointId,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Page<DeliveryRecord>, WebhookEndpointError>;

    /// Send an event to an endpoint again (see [`Service::redeliver_by`]).
    async fn redeliver_by(
        &self,
        admin: &User,
        endpoint_id: &WebhookEndpointId,
        target: &RedeliveryTarget,
    ) -> Result<DeliveryRecord, WebhookEndpointError>;
}

impl<S, C, I, H> Service<S, C, I, H> {
    /// The delivery wiring, or [`WebhookEndpointError::NotConfigured`].
    fn wired(&self) -> Result<&Webhooks, WebhookEndpointError> {
        self.webhooks
            .as_deref()
            .ok_or(WebhookEndpointError::NotConfigured)
    }
}

#[async_trait]
impl<S, C, I, H> HostEventsService for Service<S, C, I, H>
where
    S: Store,
    C: Clock,
    I: IdGenerator,
    H: SecretHasher,
{
    async fn read_events(&self, query: &FeedQuery) -> Result<FeedPage, FeedError> {
        Service::read_events(self, query).await
    }

    fn delivery_configured(&self) -> bool {
        self.webhooks.is_some()
    }

    async fn create_endpoint_by(
        &self,
        admin: &User,
        url: &str,
        event_types: &[String],
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        Service::create_endpoint_by(self, admin, self.wired()?, url, event_types).await
    }

    async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, WebhookEndpointError> {
        self.wired()?.list_endpoints().await
    }

    async fn update_endpoint_by(
        &self,
        admin: &User,
        id: &str,
        update: &EndpointUpdate,
    ) -> Result<WebhookEndpoint, WebhookEndpointError> {
        Service::update_endpoint_by(self, admin, self.wired()?, id, update).await
    }

    async fn delete_endpoint_by(
        &self,
        admin: &User,
        id: &WebhookEndpointId,
    ) -> Result<(), WebhookEndpointError> {
        Service::delete_endpoint_by(self, admin, self.wired()?, id).await
    }

    async fn rotate_secret_by(
        &self,
        admin: &User,
        id: &WebhookEndpointId,
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        Service::rotate_secret_by(self, admin, self.wired()?, id).await
    }

    async fn list_deliveries(
        &self,
        endpoint_id: &WebhookEndpointId,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Page<DeliveryRecord>, WebhookEndpointError> {
        self.wired()?
            .list_deliveries(endpoint_id, status, page)
            .await
    }

    async fn redeliver_by(
        &self,
        admin: &User,
        endpoint_id: &WebhookEndpointId,
        target: &RedeliveryTarget,
    ) -> Result<DeliveryRecord, WebhookEndpointError> {
        Service::redeliver_by(self, admin, self.wired()?, endpoint_id, target).await
    }
}
