//! Cancel a payment: a pending order is cancelled (and closed at the provider where the protocol
//! allows); a subscription order's subscription is cancelled at period end through its
//! provider; a paid one-time or credits order is not cancellable.

use domain::{
    OrderId, OrderStatus, PlanType, Subscription, SubscriptionEvent, Timestamp, Transition,
};

use super::InfraError;
use super::query_payment::QueryPaymentError;
use crate::accounts::User;
use crate::host_events;
use crate::ports::{
    Clock, EventAudit, GatewayError, IdGenerator, InboxEntry, OrderRecord, PaymentEventCommand,
    SecretHasher, Store, StoreError, SubscriptionChange,
};
use crate::ports::{OrderChange, Writes};
use crate::service::Service;

/// Builds an administrator's entry for a cancellation from the subscription before and after.
pub(crate) type CancelAudit<'a> = dyn Fn(&Subscription, &Subscription) -> EventAudit + Sync + 'a;

/// Whether the provider closed its side of a cancelled order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderClose {
    /// The provider's checkout is closed.
    Closed,
    /// The protocol has no close (the checkout lapses by itself).
    NotSupported,
    /// The provider could not be told; a payment that still arrives is recorded as a late
    /// payment on the cancelled order, for an admin.
    Failed(String),
}

/// What cancelling did.
#[derive(Debug, Clone)]
pub enum CancelOutcome {
    /// The pending order is cancelled (now or before), and what the provider did.
    OrderCancelled(OrderRecord, ProviderClose),
    /// The subscription ends at the end of its current period.
    SubscriptionEndsAtPeriodEnd(OrderRecord, Subscription),
}

/// Why a payment could not be cancelled.
#[derive(Debug, thiserror::Error)]
pub enum CancelPaymentError {
    /// No such order of this user.
    #[error("order not found")]
    NotFound,
    /// The order is paid (one-time or credits), failed or expired.
    #[error("order is {0} and cannot be cancelled")]
    NotCancellable(&'static str),
    /// The order's subscription belongs to a team whose billing the buyer no longer manages
    /// (they were made a plain member, or left).
    #[error("only the owners and admins of the account the subscription belongs to end it")]
    NotOwner,
    /// The provider could not be told; nothing changed, the caller may retry.
    #[error("payment provider failed: {0}")]
    Gateway(String),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<QueryPaymentError> for CancelPaymentError {
    fn from(e: QueryPaymentError) -> Self {
        match e {
            QueryPaymentError::NotFound => CancelPaymentError::NotFound,
            QueryPaymentError::Infra(i) => CancelPaymentError::Infra(i),
        }
    }
}

impl From<StoreError> for CancelPaymentError {
    fn from(e: StoreError) -> Self {
        CancelPaymentError::Infra(e.into())
    }
}

/// The write that schedules `before`'s end (`after`), asked by `by` through `record`. Its inbox
/// id names the state it replaces, so cancelling again after a resume is a write of its own,
/// and asking twice in one state is a duplicate.
fn cancel_command(
    record: &OrderRecord,
    before: &Subscription,
    after: &Subscription,
    now: Timestamp,
    by: &str,
) -> PaymentEventCommand {
    let replaced = before.last_event_at().unix_millis();
    PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: InboxEntry {
            provider: before.provider(),
            event_id: format!("tally:cancel-at-period-end:{}:{replaced}", before.id()),
            event_type: "tally.subscription.cancel_requested".into(),
            payload: String::new(),
            outcome: domain::EventOutcome::Applied,
            detail: Some(format!(
                "requested by {by} through order {}",
                record.order.id()
            )),
            received_at: now,
            user_id: Some(before.user_id().clone()),
        },
        order: None,
        subscription: Some(SubscriptionChange::Update {
            before: before.clone(),
            subscription: after.clone(),
        }),
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Cancel the caller's order `order_id`.
    ///
    /// # Errors
    /// See [`CancelPaymentError`].
    #[tracing::instrument(skip_all, fields(user_id = %user.id, order_id = %order_id))]
    pub async fn cancel_payment(
        &self,
        user: &User,
        order_id: &OrderId,
    ) -> Result<CancelOutcome, CancelPaymentError> {
        let record = self.own_order(user, order_id).await?;
        match (record.order.status(), record.order.plan().plan_type) {
            (OrderStatus::Pending, _) => self.cancel_pending(record).await,
            (OrderStatus::Cancelled, _) => {
                Ok(CancelOutcome::OrderCancelled(record, ProviderClose::Closed))
            }
            (OrderStatus::Paid { .. }, PlanType::Recurring) => {
                if !self
                    .manages_billing_of(&user.id, record.order.account_id())
                    .await?
                {
                    return Err(CancelPaymentError::NotOwner);
                }
                self.cancel_subscription(record).await
            }
            (status, _) => Err(CancelPaymentError::NotCancellable(status.code())),
        }
    }

    async fn cancel_pending(
        &self,
        record: OrderRecord,
    ) -> Result<CancelOutcome, CancelPaymentError> {
        let order = &record.order;
        // Our own state becomes final first: closing at the provider makes some providers send
        // an "expired" or "closed" event, which must then find a cancelled order, not race it.
        let mut cancelled = order.clone();
        if cancelled.cancel() == Ok(Transition::Applied) {
            let now = self.clock.now();
            let cause = cancelled.status().code();
            let told = host_events::order_changed(order, &cancelled, cause, now);
            match self
                .store
                .transition_order(
                    OrderChange::new(order, record.version, cancelled.clone()),
                    now,
                    told.as_slice(),
                )
                .await
            {
                Ok(()) => self.metrics.order_moved(cancelled.status()),
                // Paid or expired meanwhile: report the state it is really in.
                Err(StoreError::Conflict(_)) => return self.refreshed_state(&record).await,
                Err(e) => return Err(e.into()),
            }
        }
        let closed = match self.gateways.get(order.provider()) {
            None => ProviderClose::NotSupported,
            Some(gateway) => match gateway.close_payment(&record.payment_ref()).await {
                Ok(()) => ProviderClose::Closed,
                Err(GatewayError::NotSupported) => ProviderClose::NotSupported,
                Err(e) => ProviderClose::Failed(e.to_string()),
            },
        };
        let fresh = self
            .store
            .find_order(order.id())
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(CancelOutcome::OrderCancelled(fresh, closed))
    }

    async fn refreshed_state(
        &self,
        record: &OrderRecord,
    ) -> Result<CancelOutcome, CancelPaymentError> {
        let fresh = self
            .store
            .find_order(record.order.id())
            .await?
            .ok_or(StoreError::NotFound)?;
        match fresh.order.status() {
            OrderStatus::Cancelled => {
                Ok(CancelOutcome::OrderCancelled(fresh, ProviderClose::Closed))
            }
            other => Err(CancelPaymentError::NotCancellable(other.code())),
        }
    }

    /// Cancel the subscription `record` started at the end of its period, through its
    /// provider (the subscriber's cancel).
    pub(crate) async fn cancel_subscription(
        &self,
        record: OrderRecord,
    ) -> Result<CancelOutcome, CancelPaymentError> {
        self.cancel_subscription_audited(record, None).await
    }

    /// [`Self::cancel_subscription`], by an administrator when `audit` builds their entry from
    /// the subscription before and after: it is written in the transaction that schedules the
    /// end, and not at all when nothing was written (already scheduled, or changed meanwhile).
    pub(crate) async fn cancel_subscription_audited(
        &self,
        record: OrderRecord,
        audit: Option<&CancelAudit<'_>>,
    ) -> Result<CancelOutcome, CancelPaymentError> {
        let subscription = self
            .store
            .find_subscription_by_order(record.order.id())
            .await?
            .ok_or(CancelPaymentError::NotCancellable("paid"))?;
        let gateway = self
            .gateways
            .get(subscription.provider())
            .ok_or_else(|| CancelPaymentError::Gateway("provider is not configured".into()))?;
        gateway
            .cancel_subscription(subscription.provider_subscription_id())
            .await
            .map_err(|e| CancelPaymentError::Gateway(e.to_string()))?;
        let now = self.clock.now().max(subscription.last_event_at());
        let mut updated = subscription.clone();
        match updated.apply(SubscriptionEvent::CancelScheduled, now) {
            Ok(Transition::Applied) => {}
            Ok(Transition::AlreadyDone) => {
                return Ok(CancelOutcome::SubscriptionEndsAtPeriodEnd(
                    record,
                    subscription,
                ));
            }
            Err(_) => {
                return Err(CancelPaymentError::NotCancellable(
                    subscription.status().code(),
                ));
            }
        }
        let by = if audit.is_some() {
            "an administrator"
        } else {
            "the subscriber"
        };
        let command = cancel_command(&record, &subscription, &updated, self.clock.now(), by);
        let audit = audit.map(|audit| audit(&subscription, &updated));
        let applied = self.write_payment_event(&command, audit).await;
        match applied {
            Ok(_) | Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let current = self
            .store
            .find_subscription(subscription.id())
            .await?
            .unwrap_or(updated);
        Ok(CancelOutcome::SubscriptionEndsAtPeriodEnd(record, current))
    }
}
