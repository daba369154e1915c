//! Administrators' changes to the host's webhook endpoints, each stored with its audit entry:
//! create, update, delete, rotate the secret, deliver again. Every change takes the acting
//! administrator: there is no way to make one without an entry. The endpoints' own
//! port writes the change and the entry in one transaction
//! ([`crate::ports::WebhookStore::write_endpoint`]), the entry built from what the
//! change did (the endpoint before and after, read in that transaction): an action is never
//! stored without its entry, nor an entry without its action, and a refused change (no such
//! endpoint, the cap reached) writes none. Secrets are never in an entry.

use std::collections::BTreeMap;

use domain::delivery::DeliveryStatus;
use domain::{Timestamp, WebhookEndpointId};

use super::super::InfraError;
use super::super::webhook_endpoints::{
    CreatedEndpoint, EndpointUpdate, WebhookEndpointError, Webhooks,
};
use crate::accounts::User;
use crate::pagination::{Page, PageRequest};
use crate::ports::{
    AuditAction, AuditFacts, AuditValue, Clock, DeliveryRecord, EndpointWrite, EndpointWritten,
    IdGenerator, NewAudit, RedeliveryTarget, SecretHasher, Store, WebhookEndpoint,
};
use crate::service::Service;

/// The object kind of an endpoint's entries.
const ENDPOINT: &str = "webhook_endpoint";

/// What an entry tells of an endpoint: its URL, types and state, never its secret.
fn endpoint_facts(e: &WebhookEndpoint) -> AuditFacts {
    let types: Vec<&str> = e.event_types.iter().map(|t| t.code()).collect();
    BTreeMap::from([
        ("url".to_owned(), AuditValue::Text(e.url.clone())),
        ("eventTypes".to_owned(), AuditValue::Text(types.join(","))),
        (
            "enabled".to_owned(),
            AuditValue::Text(e.enabled.to_string()),
        ),
    ])
}

/// The entry of `admin`'s change at `at`, from what it did.
fn endpoint_entry(admin: &User, at: Timestamp, written: &EndpointWritten) -> NewAudit {
    let facts = |e: &WebhookEndpoint| Some(endpoint_facts(e));
    let (action, object_kind, object_id, before, after) = match written {
        EndpointWritten::Created(e) => (
            AuditAction::WebhookEndpointCreated,
            ENDPOINT,
            &e.id,
            None,
            facts(e),
        ),
        EndpointWritten::Updated { before, after } => (
            AuditAction::WebhookEndpointUpdated,
            ENDPOINT,
            &after.id,
            facts(before),
            facts(after),
        ),
        EndpointWritten::Deleted(e) => (
            AuditAction::WebhookEndpointDeleted,
            ENDPOINT,
            &e.id,
            facts(e),
            None,
        ),
        EndpointWritten::Rotated(e) => (
            AuditAction::WebhookEndpointRotated,
            ENDPOINT,
            &e.id,
            None,
            None,
        ),
        EndpointWritten::Redelivered(d) => (
            AuditAction::WebhookRedelivered,
            "webhook_delivery",
            &d.id,
            None,
            Some(BTreeMap::from([
                (
                    "endpointId".to_owned(),
                    AuditValue::Text(d.endpoint_id.clone()),
                ),
                ("eventId".to_owned(), AuditValue::Text(d.event_id.clone())),
            ])),
        ),
    };
    NewAudit {
        admin_id: admin.id.clone(),
        action,
        object_kind,
        object_id: object_id.clone(),
        before,
        after,
        at,
    }
}

/// A store answer that names another write than the one asked (a broken adapter).
fn unexpected(written: &EndpointWritten) -> WebhookEndpointError {
    let what = format!("the store answered {written:?} to another write");
    WebhookEndpointError::Infra(InfraError::Unexpected(anyhow::anyhow!(what)))
}

impl<S, C, I, H> Service<S, C, I, H> {
    /// Whether webhook delivery is wired in this process.
    pub fn delivery_configured(&self) -> bool {
        self.webhooks.is_some()
    }

    /// The delivery wiring, or [`WebhookEndpointError::NotConfigured`].
    fn wired(&self) -> Result<&Webhooks, WebhookEndpointError> {
        self.webhooks
            .as_deref()
            .ok_or(WebhookEndpointError::NotConfigured)
    }

    /// Every endpoint (see [`Webhooks::list_endpoints`]).
    ///
    /// # Errors
    /// Delivery is not wired, infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn list_endpoints(&self) -> Result<Vec<WebhookEndpoint>, WebhookEndpointError> {
        self.wired()?.list_endpoints().await
    }

    /// An endpoint's deliveries, newest first (see [`Webhooks::list_deliveries`]).
    ///
    /// # Errors
    /// Delivery is not wired, no such endpoint, infrastructure.
    #[tracing::instrument(skip_all, fields(endpoint_id = %endpoint_id))]
    pub async fn list_deliveries(
        &self,
        endpoint_id: &WebhookEndpointId,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Page<DeliveryRecord>, WebhookEndpointError> {
        self.wired()?
            .list_deliveries(endpoint_id, status, page)
            .await
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Store `write` with `admin`'s entry, in one transaction; `None` when it was refused.
    async fn write_endpoint(
        &self,
        admin: &User,
        hooks: &Webhooks,
        write: EndpointWrite<'_>,
    ) -> Result<Option<EndpointWritten>, WebhookEndpointError> {
        let at = self.clock.now();
        let audit = move |written: &EndpointWritten| endpoint_entry(admin, at, written);
        Ok(hooks.store.write_endpoint(write, &audit).await?)
    }

    /// `admin` registers an endpoint (enabled), which receives events from now on; its secret
    /// is in the answer only. Audited (`webhook_endpoint.created`).
    ///
    /// # Errors
    /// Delivery not wired, a refused URL, an unknown type, too many endpoints (the store counts
    /// them in the insert's own transaction), infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id))]
    pub async fn create_endpoint(
        &self,
        admin: &User,
        url: &str,
        event_types: &[String],
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        let hooks = self.wired()?;
        let new = hooks.new_endpoint(url, event_types).await?;
        let write = EndpointWrite::Create(&new.endpoint);
        match self.write_endpoint(admin, hooks, write).await? {
            Some(EndpointWritten::Created(endpoint)) => Ok(CreatedEndpoint {
                endpoint,
                secret: new.secret,
            }),
            Some(other) => Err(unexpected(&other)),
            None => Err(WebhookEndpointError::TooMany),
        }
    }

    /// `admin` changes an endpoint's URL, types or enabled state, audited with the endpoint
    /// before and after (`webhook_endpoint.updated`). `id` stays text: the update is checked
    /// before the id is looked up.
    ///
    /// # Errors
    /// Delivery not wired, a refused URL, an unknown type, no such endpoint, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, endpoint_id = id))]
    pub async fn update_endpoint(
        &self,
        admin: &User,
        id: &str,
        update: &EndpointUpdate,
    ) -> Result<WebhookEndpoint, WebhookEndpointError> {
        let hooks = self.wired()?;
        let change = hooks.endpoint_change(update).await?;
        let write = EndpointWrite::Update {
            id,
            change: &change,
            now: hooks.now(),
        };
        match self.write_endpoint(admin, hooks, write).await? {
            Some(EndpointWritten::Updated { after, .. }) => Ok(after),
            Some(other) => Err(unexpected(&other)),
            None => Err(WebhookEndpointError::NotFound),
        }
    }

    /// `admin` deletes an endpoint and its deliveries, audited with the endpoint as it was
    /// (`webhook_endpoint.deleted`).
    ///
    /// # Errors
    /// Delivery not wired, no such endpoint, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, endpoint_id = %id))]
    pub async fn delete_endpoint(
        &self,
        admin: &User,
        id: &WebhookEndpointId,
    ) -> Result<(), WebhookEndpointError> {
        let hooks = self.wired()?;
        match self
            .write_endpoint(admin, hooks, EndpointWrite::Delete(id.as_str()))
            .await?
        {
            Some(EndpointWritten::Deleted(_)) => Ok(()),
            Some(other) => Err(unexpected(&other)),
            None => Err(WebhookEndpointError::NotFound),
        }
    }

    /// `admin` gives an endpoint a new secret; the old one stays valid (both signatures are
    /// sent) for a day ([`PREVIOUS_SECRET_VALIDITY_MS`]). Audited without either secret
    /// (`webhook_endpoint.rotated`).
    ///
    /// [`PREVIOUS_SECRET_VALIDITY_MS`]: crate::use_cases::webhook_endpoints::PREVIOUS_SECRET_VALIDITY_MS
    ///
    /// # Errors
    /// Delivery not wired, no such endpoint, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, endpoint_id = %id))]
    pub async fn rotate_secret(
        &self,
        admin: &User,
        id: &WebhookEndpointId,
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        let hooks = self.wired()?;
        let rotation = hooks.new_rotation();
        let write = EndpointWrite::Rotate {
            id: id.as_str(),
            secret: &rotation.secret,
            previous_until: rotation.previous_until,
            now: rotation.now,
        };
        match self.write_endpoint(admin, hooks, write).await? {
            Some(EndpointWritten::Rotated(endpoint)) => Ok(CreatedEndpoint {
                endpoint,
                secret: rotation.secret,
            }),
            Some(other) => Err(unexpected(&other)),
            None => Err(WebhookEndpointError::NotFound),
        }
    }

    /// `admin` schedules a delivery (or an event) to the endpoint again, now, with a fresh
    /// schedule; audited with the delivery scheduled again (`webhook_delivery.redelivered`).
    ///
    /// # Errors
    /// Delivery not wired, no such endpoint, delivery or event; infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, endpoint_id = %endpoint_id))]
    pub async fn redeliver(
        &self,
        admin: &User,
        endpoint_id: &WebhookEndpointId,
        target: &RedeliveryTarget,
    ) -> Result<DeliveryRecord, WebhookEndpointError> {
        let hooks = self.wired()?;
        if hooks
            .store
            .find_endpoint(endpoint_id.as_str())
            .await?
            .is_none()
        {
            return Err(WebhookEndpointError::NotFound);
        }
        let write = EndpointWrite::Redeliver {
            endpoint_id: endpoint_id.as_str(),
            target,
            now: hooks.now(),
        };
        match self.write_endpoint(admin, hooks, write).await? {
            Some(EndpointWritten::Redelivered(delivery)) => Ok(delivery),
            Some(other) => Err(unexpected(&other)),
            None => Err(WebhookEndpointError::DeliveryNotFound),
        }
    }
}
