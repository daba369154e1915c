//! The complete status of a user: credits, every subscription they
//! hold and every one-time purchase whose access still runs.

use domain::plan::Holdings;
use domain::{
    AccessEnd, AccountId, Credits, Duration, OrderId, PlanId, Subscription, SubscriptionAccess,
    SubscriptionStatus, Timestamp,
};

use super::InfraError;
use crate::accounts::User;
use crate::pagination::PageRequest;
use crate::ports::{Clock, IdGenerator, OrderRecord, Reservation, SecretHasher, Store};
use crate::service::Service;

/// How many pages of a user's orders are scanned for one-time access (a bound on the work).
const MAX_ORDER_PAGES_SCANNED: u32 = 10;
/// Orders per scanned page.
const ORDERS_PER_PAGE: i64 = 100;

/// A user's status.
#[derive(Debug, Clone)]
pub struct StatusReport {
    /// Available credits (held credits already deducted).
    pub balance: Credits,
    /// The available credits by what they are (`domain::ledger::available_by_category`):
    /// every category, zero when it has none.
    pub by_category: std::collections::BTreeMap<domain::GrantCategory, Credits>,
    /// The first subscription of [`StatusReport::subscriptions`], else the newest one not
    /// expired (a canceled one whose paid time is over), as before several could be held.
    pub subscription: Option<Subscription>,
    /// Every subscription the user holds: live (trialing, active, past due, scheduled to
    /// cancel) or canceled with paid time left; newest event first.
    pub subscriptions: Vec<HeldSubscription>,
    /// The paid one-time order that grants lifetime access, if any.
    pub lifetime_order: Option<OrderRecord>,
    /// Every paid one-time purchase whose access still runs, newest first.
    pub one_time_access: Vec<OneTimeAccess>,
    /// Credits held by pending reservations.
    pub pending_reservations: Vec<Reservation>,
    /// How long a past-due subscription keeps access after its failed renewal (the setting the
    /// report was made with).
    pub past_due_grace_ms: i64,
    /// When the report was made: the "now" its access answers are for (so a caller never
    /// reads the clock a second time and gets an answer for another instant).
    pub as_of: Timestamp,
}

/// A subscription and how long it grants access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSubscription {
    /// The subscription.
    pub subscription: Subscription,
    /// Its access, past-due grace included.
    pub access: SubscriptionAccess,
}

/// A one-time purchase whose access still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneTimeAccess {
    /// The paid order.
    pub order_id: OrderId,
    /// The plan bought.
    pub plan_id: PlanId,
    /// When access ends.
    pub ends: AccessEnd,
}

impl StatusReport {
    /// What a pricing page marks as held: the plans of live subscriptions ("Current plan") and
    /// of one-time purchases whose access still runs ("Owned").
    #[must_use]
    pub fn holdings(&self) -> Holdings {
        Holdings::new(
            self.subscriptions
                .iter()
                .filter(|held| held.subscription.is_live())
                .map(|held| held.subscription.plan_id().clone()),
            self.one_time_access
                .iter()
                .map(|access| access.plan_id.clone()),
        )
    }

    /// How long `subscription` grants access, with this report's past-due grace.
    #[must_use]
    pub fn access_of(&self, subscription: &Subscription) -> SubscriptionAccess {
        subscription.access(self.past_due_grace_ms)
    }

    /// Whether the user has access now: a subscription or a one-time purchase grants it.
    #[must_use]
    pub fn has_access(&self, now: Timestamp) -> bool {
        self.one_time_access.iter().any(|a| a.ends.is_open_at(now))
            || self
                .subscriptions
                .iter()
                .any(|held| held.access.is_open_at(now))
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Credits, subscriptions, one-time access and pending reservations of `user`'s personal
    /// account.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(user_id = %user.id))]
    pub async fn report_status(&self, user: &User) -> Result<StatusReport, InfraError> {
        self.report_account_status(&AccountId::personal(&user.id))
            .await
    }

    /// Credits, subscriptions, one-time access and pending reservations of `account` (the
    /// caller checked who may read it).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn report_account_status(
        &self,
        account: &AccountId,
    ) -> Result<StatusReport, InfraError> {
        let now = self.clock.now();
        let balance = self.store.balance(account).await?;
        let all = self.store.list_subscriptions(account).await?;
        let grace_ms = self.config.past_due_grace_ms;
        let subscriptions: Vec<HeldSubscription> = all
            .iter()
            .filter(|s| s.is_live() || s.grants_access_at(now, grace_ms))
            .map(|s| HeldSubscription {
                subscription: s.clone(),
                access: s.access(grace_ms),
            })
            .collect();
        let subscription = subscriptions
            .first()
            .map(|held| held.subscription.clone())
            .or_else(|| {
                all.into_iter()
                    .find(|s| s.status() != SubscriptionStatus::Expired)
            });
        let pending_reservations = self.store.pending_reservations(account).await?;
        let held = pending_reservations
            .iter()
            .try_fold(Credits::ZERO, |sum, r| sum.checked_add(r.held))
            .map_err(|e| InfraError::Unexpected(e.into()))?;
        let lots = self.store.grant_lots(account).await?;
        let order = self.config.consumption.spend_order();
        let by_category = domain::ledger::available_by_category(order, &lots, held, balance);
        let owned = self.one_time_orders(account, now).await?;
        let lifetime_order = owned
            .iter()
            .find(|r| r.order.plan().duration == Some(Duration::Lifetime))
            .cloned();
        let one_time_access = owned
            .iter()
            .filter_map(|r| {
                Some(OneTimeAccess {
                    order_id: r.order.id().clone(),
                    plan_id: r.order.plan().plan_id.clone(),
                    ends: r.order.one_time_access()?,
                })
            })
            .collect();
        Ok(StatusReport {
            balance,
            by_category,
            subscription,
            subscriptions,
            lifetime_order,
            one_time_access,
            pending_reservations,
            past_due_grace_ms: grace_ms,
            as_of: now,
        })
    }

    /// The account's paid one-time orders whose access runs at `now`, newest first (the newest
    /// [`MAX_ORDER_PAGES_SCANNED`] pages of orders are looked at).
    pub(crate) async fn one_time_orders(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Vec<OrderRecord>, InfraError> {
        let mut found = Vec::new();
        for page_number in 1..=MAX_ORDER_PAGES_SCANNED {
            let page = PageRequest::new(Some(i64::from(page_number)), Some(ORDERS_PER_PAGE))
                .map_err(|e| InfraError::Unexpected(e.into()))?;
            let orders = self.store.list_orders(account, page).await?;
            found.extend(
                orders
                    .items
                    .iter()
                    .filter(|r| r.order.grants_access_at(now))
                    .cloned(),
            );
            if u64::from(page_number) >= orders.total_pages() {
                break;
            }
        }
        Ok(found)
    }
}
