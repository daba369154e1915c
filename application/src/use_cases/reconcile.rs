//! Reconciliation: recover lost webhooks, expire stale orders, release lapsed reservations and
//! expired grants, tell spend limits that reset. Run periodically by a background worker; safe
//! on several instances because orders are claimed (`FOR UPDATE SKIP LOCKED` on PostgreSQL)
//! and every effect goes through the same idempotent path as a webhook.

use domain::{OrderStatus, Transition};

use super::handle_webhook::HandleWebhookError;
use super::{InfraError, noted};
use crate::host_events;
use crate::ports::{
    Clock, GatewayError, IdGenerator, OrderLocator, OrderRecord, PaymentEvent, PaymentStatus,
    SecretHasher, Store, StoreError,
};
use crate::ports::{OrderChange, Writes};
use crate::service::Service;

/// Bounds of one reconciliation pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileSettings {
    /// Orders pending longer than this are asked about at their provider.
    pub pending_after_ms: i64,
    /// At most this many orders, reservations and grants per pass, each.
    pub batch: u32,
    /// How long a claimed order is left to this instance.
    pub lease_ms: i64,
}

/// What one pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReconcileReport {
    /// Orders looked at.
    pub checked: u32,
    /// Orders found paid or failed at the provider and updated.
    pub resolved: u32,
    /// Orders expired.
    pub expired: u32,
    /// Reservations released at expiry.
    pub reservations_released: u32,
    /// Grants expired.
    pub grants_expired: u32,
    /// Subscription charges whose refunds, kept before the charge landed, were applied now.
    pub kept_refunds_applied: u32,
    /// Users whose entitlements the passing of time changed, told now (`entitlements.changed`).
    pub entitlement_lapses_told: u32,
    /// Reached spend limits whose window reset with room again, told now (`limit.reset`).
    pub limit_resets_told: u32,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// One reconciliation pass.
    ///
    /// # Errors
    /// Infrastructure; provider failures for single orders are skipped (retried next pass).
    #[tracing::instrument(skip_all)]
    pub async fn reconcile(
        &self,
        settings: ReconcileSettings,
    ) -> Result<ReconcileReport, InfraError> {
        let now = self.clock.now();
        let mut report = ReconcileReport::default();
        let due = self
            .store
            .claim_pending_orders(
                now.plus_millis(-settings.pending_after_ms),
                settings.batch,
                now,
                settings.lease_ms,
            )
            .await?;
        for record in due {
            report.checked += 1;
            match self.reconcile_order(&record).await {
                Ok(Some(true)) => report.resolved += 1,
                Ok(Some(false)) => report.expired += 1,
                Ok(None) => {}
                Err(HandleWebhookError::Infra(e)) => return Err(e),
                Err(_) => {}
            }
        }
        report.reservations_released = self.store.expire_reservations(now, settings.batch).await?;
        report.grants_expired = noted(
            &*self.metrics,
            self.store.expire_grants(now, settings.batch).await,
        )?;
        report.entitlement_lapses_told = self.tell_entitlement_lapses(now, settings.batch).await?;
        report.limit_resets_told = self.store.tell_limit_resets(now, settings.batch).await?;
        report.kept_refunds_applied =
            match self.apply_unapplied_charge_refunds(settings.batch).await {
                Ok(applied) => applied,
                Err(HandleWebhookError::Infra(e)) => return Err(e),
                Err(_) => 0,
            };
        Ok(report)
    }

    /// `Some(true)` when resolved from the provider, `Some(false)` when expired, `None` otherwise.
    async fn reconcile_order(
        &self,
        record: &OrderRecord,
    ) -> Result<Option<bool>, HandleWebhookError> {
        let order = &record.order;
        let payment = record.payment_ref();
        let locator = OrderLocator {
            order_id: Some(order.id().clone()),
            provider_reference: payment.provider_reference.clone(),
        };
        let status = match self.gateways.get(order.provider()) {
            Some(gateway) => gateway.query_payment(&payment).await,
            None => Err(GatewayError::NotSupported),
        };
        let now = self.clock.now();
        let event = match status {
            Ok(PaymentStatus::Succeeded { amount, paid_at }) => PaymentEvent::PaymentSucceeded {
                order: locator,
                amount,
                occurred_at: paid_at,
            },
            Ok(PaymentStatus::Failed { reason }) => PaymentEvent::PaymentFailed {
                order: locator,
                reason,
                occurred_at: now,
            },
            Ok(PaymentStatus::Pending) | Err(_) if now >= order.expires_at() => {
                return self.expire_order(record).await;
            }
            Ok(PaymentStatus::Pending) | Err(_) => return Ok(None),
        };
        let event_id = format!(
            "tally:reconcile:{}:{}",
            order.id(),
            match &event {
                PaymentEvent::PaymentSucceeded { .. } => "paid",
                _ => "failed",
            }
        );
        self.apply_reconciled(order.provider(), event_id, &event)
            .await?;
        Ok(Some(true))
    }

    /// Expire an automatic top-up's order and settle its top-up, in one write.
    async fn expire_top_up_order(
        &self,
        change: OrderChange,
        told: Option<host_events::HostEvent>,
        (write, top_up_told): (crate::ports::TopUpWrite, Vec<host_events::HostEvent>),
        now: domain::Timestamp,
    ) -> Result<Option<bool>, HandleWebhookError> {
        let mut set = crate::ports::ChangeSet::at(now);
        set.told.extend(told);
        set.told.extend(top_up_told);
        set.order = Some(change);
        set.top_up = Some(write);
        match self
            .store
            .apply(set)
            .await
            .map_err(|e| e.into_store_error())
        {
            Ok(_) => {
                self.metrics.order_moved(&OrderStatus::Expired);
                Ok(Some(false))
            }
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn expire_order(&self, record: &OrderRecord) -> Result<Option<bool>, HandleWebhookError> {
        let order = &record.order;
        if let Some(gateway) = self.gateways.get(order.provider()) {
            // Best effort: an order the provider cannot close still expires here.
            let _ = gateway.close_payment(&record.payment_ref()).await;
        }
        let mut next = order.clone();
        if next.expire() != Ok(Transition::Applied) {
            return Ok(None);
        }
        let now = self.clock.now();
        let told = host_events::order_changed(order, &next, next.status().code(), now);
        let change = OrderChange::new(order, record.version, next.clone());
        // An automatic top-up's order fails its top-up with it (its link to finish lapses).
        if let Some(top_up) = self.top_up_effects(&change, now).await? {
            return self.expire_top_up_order(change, told, top_up, now).await;
        }
        match self
            .store
            .transition_order(change, now, told.as_slice())
            .await
        {
            Ok(()) => {
                self.metrics.order_moved(&OrderStatus::Expired);
                Ok(Some(false))
            }
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
