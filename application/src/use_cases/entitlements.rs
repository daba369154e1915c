//! What a user is entitled to now (on its own, and as part of the status report): the union of what every purchase granting access now was sold with.
//!
//! The purchases are exactly those of the status report ([`Service::report_status`]): live
//! subscriptions (a past-due one while its grace runs), one-time passes still running, lifetime
//! purchases. Each grants the entitlements kept in its order's plan snapshot (a subscription:
//! the order that started it), so editing or deleting a plan later changes nothing already sold.
//! Two cases fall back to the plan as it is now (and grant nothing if it is gone): an order
//! stored before orders kept entitlements, and a subscription the provider moved to another
//! plan of ours, whose order snapshot is of the plan it left.

use std::collections::BTreeMap;

use domain::entitlements::{EffectiveEntitlements, Entitlements, Holding, effective_entitlements};
use domain::{AccountId, Order, OrderId, PlanId, Subscription, Timestamp};

use super::InfraError;
use super::plans::find_plan;
use super::report_status::StatusReport;
use crate::accounts::User;
use crate::host_events::{self, HostEvent};
use crate::ports::Writes;
use crate::ports::{
    Clock, EntitlementBasis, EntitlementsTold, EntitlementsWrite, IdGenerator, OrderChange,
    SecretHasher, Store, StoreError, SubscriptionChange,
};
use crate::service::Service;

/// Live plans' entitlements, looked up once per plan per report.
type LivePlans = BTreeMap<PlanId, Entitlements>;

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The effective entitlements of `user` now, and the purchase granting each key.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(user_id = %user.id))]
    pub async fn report_entitlements(
        &self,
        user: &User,
    ) -> Result<EffectiveEntitlements, InfraError> {
        let status = self.report_status(user).await?;
        self.entitlements_of(&status).await
    }

    /// The effective entitlements of the purchases in `status`, at the service clock's now:
    /// worked out by the same function as the entitlements a write keeps ([`Self::effective_at`]).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all)]
    pub async fn entitlements_of(
        &self,
        status: &StatusReport,
    ) -> Result<EffectiveEntitlements, InfraError> {
        let mut purchases = Purchases::of(Vec::new(), Vec::new());
        for held in &status.subscriptions {
            let subscription = held.subscription.clone();
            let origin = self.store.subscription_order(subscription.id()).await?;
            let origin_id = origin.map(|record| {
                let id = record.order.id().clone();
                purchases.orders.insert(id.clone(), record.order);
                id
            });
            purchases.subscriptions.push((subscription, origin_id));
        }
        for access in &status.one_time_access {
            if let Some(record) = self.store.find_order(&access.order_id).await? {
                purchases
                    .orders
                    .insert(access.order_id.clone(), record.order);
            }
        }
        let now = self.clock.now();
        let (held, _) = self
            .effective_at(&purchases, &mut LivePlans::new(), now)
            .await?;
        Ok(held)
    }

    /// The entitlements of plan `id` as it is now in the live pricing mode; none once the plan
    /// is gone.
    async fn live_entitlements(
        &self,
        live: &mut LivePlans,
        id: &PlanId,
    ) -> Result<Entitlements, InfraError> {
        if let Some(known) = live.get(id) {
            return Ok(known.clone());
        }
        let config = &self.config;
        let plan = find_plan(config.pricing_mode, &config.catalog, &self.store, id).await?;
        let entitlements = plan.map(|p| p.entitlements().clone()).unwrap_or_default();
        live.insert(id.clone(), entitlements.clone());
        Ok(entitlements)
    }

    /// What to keep of `account`'s entitlements at `now` after `change` (a payment event's
    /// order and subscription changes; none for the passing of time), worked out from `basis`,
    /// and the `entitlements.changed` it tells when they differ from what the host was last told
    /// (an account never told anything is compared with what it held before the change).
    ///
    /// # Errors
    /// Infrastructure only.
    pub(crate) async fn entitlements_after(
        &self,
        account: &AccountId,
        basis: EntitlementBasis,
        change: Changed<'_>,
        now: Timestamp,
    ) -> Result<EntitlementsTold, InfraError> {
        let before = Purchases::of(basis.subscriptions, basis.orders);
        let mut after = before.with(change);
        // A subscription the change creates names an order the read could not link to it yet.
        for origin in after.unlinked_origins() {
            if let Some(record) = self.store.find_order(&origin).await? {
                after.orders.insert(origin, record.order);
            }
        }
        let mut live = LivePlans::new();
        let (held, next) = self.effective_at(&after, &mut live, now).await?;
        let (previous, expected_version) = match basis.told {
            Some(told) => (told.entitlements, Some(told.version)),
            None => {
                let (before, _) = self.effective_at(&before, &mut live, now).await?;
                (before.entitlements, None)
            }
        };
        let mut events = Vec::new();
        if held.entitlements != previous {
            events.push(host_events::entitlements_changed(
                account,
                &previous,
                &held.entitlements,
                now,
            ));
            events.extend(
                self.seats_told(account, &previous, &held.entitlements, now)
                    .await?,
            );
        }
        Ok(EntitlementsTold {
            write: EntitlementsWrite {
                account: account.clone(),
                expected_version,
                entitlements: held.entitlements,
                next_change_at: next,
                at: now,
            },
            events,
        })
    }

    /// `account.seats_exceeded` when a change of a team's entitlements from `previous` to
    /// `now` left it fewer seats than its members (counted as they are read; nobody is removed,
    /// and an addition counts them again under the team's lock).
    async fn seats_told(
        &self,
        account: &AccountId,
        previous: &Entitlements,
        now_held: &Entitlements,
        now: Timestamp,
    ) -> Result<Option<HostEvent>, InfraError> {
        if !account.is_team() || domain::seat_cap(now_held).is_none() {
            return Ok(None);
        }
        let members = u64::try_from(self.store.members(account).await?.len()).unwrap_or(u64::MAX);
        Ok(domain::seats_reduced_below(previous, now_held, members)
            .map(|seats| host_events::seats_reduced(account, seats, members, now)))
    }

    /// The effective entitlements `purchases` grant at `now`, and the earliest moment after
    /// `now` one of them stops granting access by the passing of time.
    async fn effective_at(
        &self,
        purchases: &Purchases,
        live: &mut LivePlans,
        now: Timestamp,
    ) -> Result<(EffectiveEntitlements, Option<Timestamp>), InfraError> {
        let grace = self.config.past_due_grace_ms;
        let mut holdings = Vec::new();
        for (subscription, origin) in &purchases.subscriptions {
            // What the order that started it sold, when it sold the plan it is on now.
            let sold = origin
                .as_ref()
                .and_then(|id| purchases.orders.get(id))
                .filter(|order| &order.plan().plan_id == subscription.plan_id())
                .and_then(|order| order.plan().entitlements.clone());
            let entitlements = match sold {
                Some(sold) => sold,
                None => self.live_entitlements(live, subscription.plan_id()).await?,
            };
            holdings.extend(Holding::of_subscription(
                subscription,
                entitlements,
                grace,
                now,
            ));
        }
        for order in purchases.orders.values() {
            if order.one_time_access().is_none() {
                continue;
            }
            let entitlements = match &order.plan().entitlements {
                Some(sold) => sold.clone(),
                None => self.live_entitlements(live, &order.plan().plan_id).await?,
            };
            holdings.extend(Holding::of_order(order, entitlements, now));
        }
        let next = holdings
            .iter()
            .filter_map(|h| h.until.ends_at())
            .min_by_key(|end| end.unix_millis());
        Ok((effective_entitlements(&holdings), next))
    }

    /// Tell `entitlements.changed` for up to `limit` accounts a purchase of which stopped
    /// granting access by the passing of time at or before `now`, each in a write of its own;
    /// returns how many accounts' entitlements changed. An account another instance (or a
    /// payment event) worked out first is left to it: each change is told once, however many
    /// instances run this.
    ///
    /// # Errors
    /// Infrastructure only.
    pub(crate) async fn tell_entitlement_lapses(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<u32, InfraError> {
        let mut changed = 0;
        for account in self.store.entitlements_due(now, limit).await? {
            let basis = self.store.entitlement_basis(&account).await?;
            let told = self.entitlements_after(&account, basis, None, now).await?;
            let tells = !told.events.is_empty();
            match self.store.write_entitlements(told).await {
                Ok(()) => changed += u32::from(tells),
                Err(StoreError::Conflict(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(changed)
    }
}

/// A payment event's order and subscription changes, as [`Service::entitlements_after`] applies
/// them to what was read.
pub(crate) type Changed<'a> = Option<(Option<&'a OrderChange>, Option<&'a SubscriptionChange>)>;

/// A user's purchases that may grant access: every subscription with the id of the order that
/// started it, and the orders that may grant access, by id.
struct Purchases {
    subscriptions: Vec<(Subscription, Option<OrderId>)>,
    orders: BTreeMap<OrderId, Order>,
}

impl Purchases {
    fn of(subscriptions: Vec<(Subscription, Option<OrderId>)>, orders: Vec<Order>) -> Self {
        let orders = orders.into_iter().map(|o| (o.id().clone(), o)).collect();
        Self {
            subscriptions,
            orders,
        }
    }

    /// The orders that started a subscription here and are not held here.
    fn unlinked_origins(&self) -> Vec<OrderId> {
        (self.subscriptions.iter())
            .filter_map(|(_, origin)| origin.clone())
            .filter(|origin| !self.orders.contains_key(origin))
            .collect()
    }

    /// These purchases with `change` applied.
    fn with(&self, change: Changed<'_>) -> Self {
        let mut after = Self {
            subscriptions: self.subscriptions.clone(),
            orders: self.orders.clone(),
        };
        let Some((order, subscription)) = change else {
            return after;
        };
        if let Some(change) = order {
            let order = &change.after;
            after.orders.insert(order.id().clone(), order.clone());
        }
        match subscription {
            Some(SubscriptionChange::Create(s, origin)) => {
                after.subscriptions.retain(|(held, _)| held.id() != s.id());
                after.subscriptions.push((s.clone(), origin.clone()));
            }
            Some(SubscriptionChange::Update { subscription, .. }) => {
                for (held, _) in &mut after.subscriptions {
                    if held.id() == subscription.id() {
                        *held = subscription.clone();
                    }
                }
            }
            None => {}
        }
        after
    }
}
