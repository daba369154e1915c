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
use domain::{PlanId, Subscription};

use super::InfraError;
use super::plans::{PricingMode, find_plan};
use super::report_status::StatusReport;
use crate::accounts::User;
use crate::ports::{self, Clock, EntitlementRules, IdGenerator, SecretHasher, Store};
use crate::service::{Service, ServiceConfig};

/// Live plans' entitlements, looked up once per plan per report.
type LivePlans = BTreeMap<PlanId, Entitlements>;

/// The rules the store works entitlements out by when it tells `entitlements.changed`: the
/// same as [`Service::report_entitlements`] (the past-due grace, and the catalog's plans in
/// static pricing or the stored plans in dynamic pricing for purchases without entitlements of
/// their own).
#[must_use]
pub fn entitlement_rules(config: &ServiceConfig) -> EntitlementRules {
    let live_plans = match config.pricing_mode {
        PricingMode::Static => ports::LivePlans::Catalog(
            config
                .catalog
                .iter()
                .map(|plan| (plan.id().clone(), plan.entitlements().clone()))
                .collect(),
        ),
        PricingMode::Dynamic => ports::LivePlans::Stored,
    };
    EntitlementRules {
        past_due_grace_ms: config.past_due_grace_ms,
        live_plans,
    }
}

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

    /// The effective entitlements of the purchases in `status`, at the service clock's now.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all)]
    pub async fn entitlements_of(
        &self,
        status: &StatusReport,
    ) -> Result<EffectiveEntitlements, InfraError> {
        let now = self.clock.now();
        let mut live = LivePlans::new();
        let mut holdings = Vec::new();
        for held in &status.subscriptions {
            let subscription = &held.subscription;
            let entitlements = match self.sold_to_subscription(subscription).await? {
                Some(sold) => sold,
                None => {
                    self.live_entitlements(&mut live, subscription.plan_id())
                        .await?
                }
            };
            holdings.extend(Holding::of_subscription(
                subscription,
                entitlements,
                status.past_due_grace_ms,
                now,
            ));
        }
        for access in &status.one_time_access {
            let Some(record) = self.store.find_order(&access.order_id).await? else {
                continue;
            };
            let entitlements = match &record.order.plan().entitlements {
                Some(sold) => sold.clone(),
                None => self.live_entitlements(&mut live, &access.plan_id).await?,
            };
            holdings.extend(Holding::of_order(&record.order, entitlements, now));
        }
        Ok(effective_entitlements(&holdings))
    }

    /// The entitlements kept in the snapshot of the order that started `subscription`, when
    /// that order is of the plan the subscription is on now.
    async fn sold_to_subscription(
        &self,
        subscription: &Subscription,
    ) -> Result<Option<Entitlements>, InfraError> {
        let order = self.store.subscription_order(subscription.id()).await?;
        Ok(order.and_then(|record| {
            let plan = record.order.plan();
            (&plan.plan_id == subscription.plan_id())
                .then(|| plan.entitlements.clone())
                .flatten()
        }))
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
}
