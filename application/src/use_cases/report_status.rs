//! The complete status of a user: credits plus subscription (`GET /api/credits/status`).

use domain::{Credits, Duration, OrderStatus, PlanType, Subscription, SubscriptionStatus};

use super::InfraError;
use crate::accounts::User;
use crate::pagination::PageRequest;
use crate::ports::{Clock, IdGenerator, OrderRecord, Reservation, SecretHasher, Store};
use crate::service::Service;

/// How many of a user's orders are scanned for lifetime access (a bound on the work).
const MAX_ORDERS_SCANNED: u32 = 10;

/// A user's status.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// Available credits (held credits already deducted).
    pub balance: Credits,
    /// The current subscription (not expired), if any.
    pub subscription: Option<Subscription>,
    /// The paid one-time order that grants lifetime access, if any.
    pub lifetime_order: Option<OrderRecord>,
    /// Credits held by pending reservations.
    pub pending_reservations: Vec<Reservation>,
}

impl StatusReport {
    /// Whether the user has access now: a live subscription or a lifetime purchase.
    #[must_use]
    pub fn has_access(&self, now: domain::Timestamp) -> bool {
        self.lifetime_order.is_some()
            || self
                .subscription
                .as_ref()
                .is_some_and(|s| s.grants_access_at(now))
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Credits, subscription, lifetime access and pending reservations of `user`.
    ///
    /// # Errors
    /// Infrastructure only.
    pub async fn report_status(&self, user: &User) -> Result<StatusReport, InfraError> {
        let balance = self.store.balance(&user.id).await?;
        let subscription = self
            .store
            .list_subscriptions(&user.id)
            .await?
            .into_iter()
            .find(|s| s.status != SubscriptionStatus::Expired);
        let pending_reservations = self.store.pending_reservations(&user.id).await?;
        let lifetime_order = self.find_lifetime_order(user).await?;
        Ok(StatusReport {
            balance,
            subscription,
            lifetime_order,
            pending_reservations,
        })
    }

    async fn find_lifetime_order(&self, user: &User) -> Result<Option<OrderRecord>, InfraError> {
        for page_number in 1..=MAX_ORDERS_SCANNED {
            let page = PageRequest::new(Some(i64::from(page_number)), Some(100))
                .map_err(|e| InfraError::Unexpected(e.into()))?;
            let orders = self.store.list_orders(&user.id, page).await?;
            let found = orders.items.iter().find(|r| {
                r.order.plan.plan_type == PlanType::OneTime
                    && r.order.plan.duration == Some(Duration::Lifetime)
                    && matches!(
                        r.order.status,
                        OrderStatus::Paid { .. } | OrderStatus::PartiallyRefunded { .. }
                    )
            });
            if let Some(order) = found {
                return Ok(Some(order.clone()));
            }
            if u64::from(page_number) >= orders.total_pages() {
                break;
            }
        }
        Ok(None)
    }
}
