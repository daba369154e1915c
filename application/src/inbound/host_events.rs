//! [`HostEventsService`]: the host events feed and the webhook endpoints they are delivered to.

use domain::WebhookEndpointId;
use domain::delivery::DeliveryStatus;

use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{DeliveryRecord, RedeliveryTarget, WebhookEndpoint};
#[cfg(doc)]
use crate::service::Service;
use crate::use_cases::event_feed::{FeedError, FeedPage, FeedQuery};
use crate::use_cases::webhook_endpoints::{CreatedEndpoint, EndpointUpdate, WebhookEndpointError};

inbound_port! {
    /// The host events feed and the webhook endpoints.
    ///
    /// Every endpoint method answers [`WebhookEndpointError::NotConfigured`] while delivery is not
    /// wired ([`HostEventsService::delivery_configured`]); every change takes the acting
    /// administrator and writes an audit entry with it.
    #[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
    #[async_trait::async_trait]
    pub trait HostEventsService {
        /// The host events after `query.after`, oldest first (see [`Service::read_events`]).
        async fn read_events(&self, query: &FeedQuery) -> Result<FeedPage, FeedError>;

        /// Whether webhook delivery is wired in this process.
        fn delivery_configured(&self) -> bool;

        /// Register an endpoint; its secret is in the answer only (see
        /// [`Service::create_endpoint`]).
        async fn create_endpoint(
            &self,
            admin: &User,
            url: &str,
            event_types: &[String],
        ) -> Result<CreatedEndpoint, WebhookEndpointError>;

        /// Every endpoint (see [`Service::list_endpoints`]).
        async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, WebhookEndpointError>;

        /// Change an endpoint (see [`Service::update_endpoint`]). `id` stays text: the update
        /// is checked before the id is looked up, so a malformed id must answer a bad update
        /// exactly as an unknown id does.
        async fn update_endpoint(
            &self,
            admin: &User,
            id: &str,
            update: &EndpointUpdate,
        ) -> Result<WebhookEndpoint, WebhookEndpointError>;

        /// Remove an endpoint (see [`Service::delete_endpoint`]).
        async fn delete_endpoint(
            &self,
            admin: &User,
            id: &WebhookEndpointId,
        ) -> Result<(), WebhookEndpointError>;

        /// Give an endpoint a new secret, the old one kept for a while (see
        /// [`Service::rotate_secret`]).
        async fn rotate_secret(
            &self,
            admin: &User,
            id: &WebhookEndpointId,
        ) -> Result<CreatedEndpoint, WebhookEndpointError>;

        /// An endpoint's deliveries, newest first (see [`Service::list_deliveries`]).
        async fn list_deliveries(
            &self,
            endpoint_id: &WebhookEndpointId,
            status: Option<DeliveryStatus>,
            page: PageRequest,
        ) -> Result<Page<DeliveryRecord>, WebhookEndpointError>;

        /// Send an event to an endpoint again (see [`Service::redeliver`]).
        async fn redeliver(
            &self,
            admin: &User,
            endpoint_id: &WebhookEndpointId,
            target: &RedeliveryTarget,
        ) -> Result<DeliveryRecord, WebhookEndpointError>;
    }
}
