//! Administrators' changes to the host's webhook endpoints (issue 18), each followed by its
//! audit entry: create, update, delete, rotate the secret, deliver again. The endpoints live
//! behind their own port ([`crate::ports::WebhookStore`]), so the entry is its own write after
//! the action's: a crash between the two leaves an action without its entry, never an entry
//! without its action. Secrets are never in an entry.

use std::collections::BTreeMap;

use super::super::webhook_endpoints::{
    CreatedEndpoint, EndpointUpdate, WebhookEndpointError, Webhooks,
};
use crate::accounts::User;
use crate::ports::{
    AuditAction, AuditFacts, AuditValue, Clock, DeliveryRecord, IdGenerator, NewAudit,
    RedeliveryTarget, SecretHasher, Store, WebhookEndpoint,
};
use crate::service::Service;

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

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    async fn audit_endpoint(
        &self,
        admin: &User,
        action: AuditAction,
        object: (&'static str, &str),
        before: Option<AuditFacts>,
        after: Option<AuditFacts>,
    ) -> Result<(), WebhookEndpointError> {
        let entry = NewAudit {
            admin_id: admin.id.clone(),
            action,
            object_kind: object.0,
            object_id: object.1.to_owned(),
            before,
            after,
            at: self.clock.now(),
        };
        self.store.record_audit(&entry).await?;
        Ok(())
    }

    async fn endpoint_before(&self, hooks: &Webhooks, id: &str) -> Option<AuditFacts> {
        let all = hooks.list_endpoints().await.ok()?;
        all.iter().find(|e| e.id == id).map(endpoint_facts)
    }

    /// [`Webhooks::create_endpoint`] by `admin`, audited (`webhook_endpoint.created`).
    ///
    /// # Errors
    /// As [`Webhooks::create_endpoint`].
    pub async fn create_endpoint_by(
        &self,
        admin: &User,
        hooks: &Webhooks,
        url: &str,
        event_types: &[String],
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        let created = hooks.create_endpoint(url, event_types).await?;
        let after = Some(endpoint_facts(&created.endpoint));
        let object = ("webhook_endpoint", created.endpoint.id.as_str());
        self.audit_endpoint(
            admin,
            AuditAction::WebhookEndpointCreated,
            object,
            None,
            after,
        )
        .await?;
        Ok(created)
    }

    /// [`Webhooks::update_endpoint`] by `admin`, audited with the endpoint before and after
    /// (`webhook_endpoint.updated`).
    ///
    /// # Errors
    /// As [`Webhooks::update_endpoint`].
    pub async fn update_endpoint_by(
        &self,
        admin: &User,
        hooks: &Webhooks,
        id: &str,
        update: &EndpointUpdate,
    ) -> Result<WebhookEndpoint, WebhookEndpointError> {
        let before = self.endpoint_before(hooks, id).await;
        let updated = hooks.update_endpoint(id, update).await?;
        let after = Some(endpoint_facts(&updated));
        let object = ("webhook_endpoint", id);
        self.audit_endpoint(
            admin,
            AuditAction::WebhookEndpointUpdated,
            object,
            before,
            after,
        )
        .await?;
        Ok(updated)
    }

    /// [`Webhooks::delete_endpoint`] by `admin`, audited with the endpoint as it was
    /// (`webhook_endpoint.deleted`).
    ///
    /// # Errors
    /// As [`Webhooks::delete_endpoint`].
    pub async fn delete_endpoint_by(
        &self,
        admin: &User,
        hooks: &Webhooks,
        id: &str,
    ) -> Result<(), WebhookEndpointError> {
        let before = self.endpoint_before(hooks, id).await;
        hooks.delete_endpoint(id).await?;
        let object = ("webhook_endpoint", id);
        self.audit_endpoint(
            admin,
            AuditAction::WebhookEndpointDeleted,
            object,
            before,
            None,
        )
        .await
    }

    /// [`Webhooks::rotate_secret`] by `admin`, audited without either secret
    /// (`webhook_endpoint.rotated`).
    ///
    /// # Errors
    /// As [`Webhooks::rotate_secret`].
    pub async fn rotate_secret_by(
        &self,
        admin: &User,
        hooks: &Webhooks,
        id: &str,
    ) -> Result<CreatedEndpoint, WebhookEndpointError> {
        let rotated = hooks.rotate_secret(id).await?;
        let object = ("webhook_endpoint", id);
        self.audit_endpoint(
            admin,
            AuditAction::WebhookEndpointRotated,
            object,
            None,
            None,
        )
        .await?;
        Ok(rotated)
    }

    /// [`Webhooks::redeliver`] by `admin`, audited with the delivery scheduled again
    /// (`webhook_delivery.redelivered`).
    ///
    /// # Errors
    /// As [`Webhooks::redeliver`].
    pub async fn redeliver_by(
        &self,
        admin: &User,
        hooks: &Webhooks,
        endpoint_id: &str,
        target: &RedeliveryTarget,
    ) -> Result<DeliveryRecord, WebhookEndpointError> {
        let delivery = hooks.redeliver(endpoint_id, target).await?;
        let after = BTreeMap::from([
            (
                "endpointId".to_owned(),
                AuditValue::Text(endpoint_id.to_owned()),
            ),
            (
                "eventId".to_owned(),
                AuditValue::Text(delivery.event_id.clone()),
            ),
        ]);
        let object = ("webhook_delivery", delivery.id.as_str());
        self.audit_endpoint(
            admin,
            AuditAction::WebhookRedelivered,
            object,
            None,
            Some(after),
        )
        .await?;
        Ok(delivery)
    }
}
