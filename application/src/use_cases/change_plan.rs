//! Switch a live subscription to another recurring plan, or resume one scheduled to end (issue
//! 19).
//!
//! A switch is asked of the provider through its own plan-change API; the subscription's plan and
//! sold terms follow the provider's event, not the request (`domain::plan_change`). The request
//! keeps the change asked for on the subscription *before* the provider is asked, so that the
//! provider's event, which may arrive before the provider's answer, finds it; a refused request
//! drops it again. A provider without a plan-change API refuses with
//! [`ChangePlanError::NotSwitchable`]: there the switch is made at the period's end instead
//! (the `scheduled` module). Only one switch of a subscription is in progress at a time: the change kept
//! before the provider is asked is a claim the store never replaces by another, so of two
//! concurrent requests only one reaches the provider.

mod scheduled;

pub use scheduled::PlanSwitchScheduled;

use domain::{
    ChangeInProgress, EventOutcome, Plan, PlanChange, PlanChangeRefusal, PlanId, PlanNotAvailable,
    PlanSnapshot, Subscription, SubscriptionEvent, SubscriptionId, SwitchKind, Transition,
    check_resume, plan_change, switch_support,
};

use super::InfraError;
use super::plans::{Audience, find_plan, list_plans};
use crate::accounts::User;
use crate::ports::{
    Clock, GatewayError, IdGenerator, InboxEntry, PaymentEventCommand, PaymentEventOutcome,
    PaymentGateway, PlanChangeRequest, PlanChangeStarted, SecretHasher, Store, StoreError,
    SubscriptionChange,
};
use crate::service::Service;

/// Why a switch or a resume was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum ChangePlanError {
    /// No such subscription.
    #[error("subscription not found")]
    NotFound,
    /// The subscription is someone else's.
    #[error("subscription belongs to another user")]
    NotOwner,
    /// No such plan.
    #[error("plan {0} not found")]
    PlanNotFound(String),
    /// The plan is hidden and not offered to this subscriber.
    #[error(transparent)]
    NotAvailable(#[from] PlanNotAvailable),
    /// The subscription or the plan does not allow it (see the domain's refusal).
    #[error(transparent)]
    Refused(#[from] PlanChangeRefusal),
    /// The provider has no plan-change (or resume) API, or the plan is sold through another
    /// provider: the switch must wait for the period's end.
    #[error("{0}")]
    NotSwitchable(String),
    /// Another switch of the subscription is in progress or scheduled (one at a time): nothing
    /// was asked of the provider.
    #[error(transparent)]
    InProgress(#[from] ChangeInProgress),
    /// The provider could not be told; nothing changed, the caller may retry.
    #[error("payment provider failed: {0}")]
    Gateway(String),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

/// Another switch of the subscription is in progress or scheduled.
const fn in_progress() -> ChangePlanError {
    ChangePlanError::InProgress(ChangeInProgress)
}

impl From<StoreError> for ChangePlanError {
    fn from(e: StoreError) -> Self {
        ChangePlanError::Infra(e.into())
    }
}

/// What a switch did.
#[derive(Debug, Clone)]
pub struct PlanChangeOutcome {
    /// The subscription as it is now: on the new plan when the provider's event already
    /// confirmed the change, otherwise with the change pending.
    pub subscription: Subscription,
    /// The change asked for.
    pub change: PlanChange,
    /// How the change is told, from the terms the subscription billed when it was asked.
    pub kind: SwitchKind,
    /// Where the buyer approves the change at the provider, when it needs that.
    pub approval_url: Option<String>,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Switch the caller's subscription `subscription_id` to plan `plan_id`.
    ///
    /// # Errors
    /// See [`ChangePlanError`].
    #[tracing::instrument(
        skip_all,
        fields(
            user_id = %user.id,
            subscription_id = %subscription_id,
            plan_id = %plan_id,
        )
    )]
    pub async fn change_plan(
        &self,
        user: &User,
        subscription_id: &SubscriptionId,
        plan_id: &PlanId,
    ) -> Result<PlanChangeOutcome, ChangePlanError> {
        let current = self.own_subscription(user, subscription_id).await?;
        domain::check_no_change_in_progress(&current, self.clock.now())?;
        let (snapshot, plan) = self.switch_target(&current, plan_id).await?;
        let change = plan_change(&current, &snapshot, self.clock.now())?;
        if !switch_support(current.provider()).change_plan {
            return Err(not_switchable(&current));
        }
        let gateway = self.subscription_gateway(&current)?;
        let current = self.release_stale_claim(current).await?;
        let asked = self.keep_change(&current, &change).await?;
        let request = PlanChangeRequest {
            provider_subscription_id: current.provider_subscription_id().to_owned(),
            snapshot,
            plan,
            direction: change.direction(),
            idempotency_key: format!(
                "tally-plan-change-{}-{}",
                current.id(),
                change.requested_at().unix_millis()
            ),
            requested_at: change.requested_at(),
            return_url: self.config.callbacks.plan_change_approved(),
            cancel_url: self.config.callbacks.plan_change_declined(),
        };
        let approval_url = match gateway.change_subscription_plan(&request).await {
            Ok(PlanChangeStarted::Accepted) => None,
            Ok(PlanChangeStarted::ApprovalNeeded { url }) => Some(url),
            Err(e) => {
                self.drop_change(&asked, &change).await?;
                return Err(match e {
                    GatewayError::NotSupported => not_switchable(&current),
                    other => ChangePlanError::Gateway(other.to_string()),
                });
            }
        };
        let subscription = self.fresh(&asked).await?;
        Ok(PlanChangeOutcome {
            subscription,
            kind: change.kind(current.sold_terms().as_ref()),
            change,
            approval_url,
        })
    }

    /// Withdraw the scheduled cancellation of the caller's subscription `subscription_id`.
    ///
    /// # Errors
    /// See [`ChangePlanError`].
    #[tracing::instrument(skip_all, fields(user_id = %user.id, subscription_id = %subscription_id))]
    pub async fn resume_subscription(
        &self,
        user: &User,
        subscription_id: &SubscriptionId,
    ) -> Result<Subscription, ChangePlanError> {
        let current = self.own_subscription(user, subscription_id).await?;
        check_resume(&current)?;
        let cannot = || {
            ChangePlanError::NotSwitchable(format!(
                "{} cannot undo a scheduled cancellation",
                current.provider()
            ))
        };
        if !switch_support(current.provider()).resume {
            return Err(cannot());
        }
        let gateway = self.subscription_gateway(&current)?;
        match gateway
            .resume_subscription(current.provider_subscription_id())
            .await
        {
            Ok(()) => {}
            Err(GatewayError::NotSupported) => return Err(cannot()),
            Err(e) => return Err(ChangePlanError::Gateway(e.to_string())),
        }
        // The provider's own event may have applied it already; if not, apply it now.
        let fresh = self.fresh(&current).await?;
        let mut resumed = fresh.clone();
        let at = self.clock.now().max(fresh.last_event_at());
        if resumed.apply(SubscriptionEvent::CancelWithdrawn, at) != Ok(Transition::Applied) {
            return Ok(fresh);
        }
        let command = self.request_command(
            &fresh,
            &resumed,
            format!("tally:resume:{}:{}", fresh.id(), at.unix_millis()),
            "tally.subscription.resume_requested",
            "resumed by the subscriber".into(),
        );
        match self.write_payment_event(&command, None).await {
            Ok(_) | Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.fresh(&resumed).await
    }

    /// The listed plans `current` can switch to now (same provider, recurring, same currency and
    /// interval, another plan), in listing order; empty when its provider cannot switch.
    ///
    /// # Errors
    /// The dynamic plan table cannot be read.
    #[tracing::instrument(skip_all, fields(subscription_id = %current.id()))]
    pub async fn switch_options(&self, current: &Subscription) -> Result<Vec<Plan>, InfraError> {
        if !switch_support(current.provider()).change_plan {
            return Ok(Vec::new());
        }
        let listed = list_plans(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.gateways,
            &self.store,
            Audience::Public,
            None,
        )
        .await?;
        let now = self.clock.now();
        Ok(listed
            .into_iter()
            .map(|stored| stored.plan)
            .filter(|plan| {
                let snapshot = PlanSnapshot::of(plan, plan.price_in(self.config.environment));
                plan.provider() == current.provider()
                    && plan_change(current, &snapshot, now).is_ok()
            })
            .collect())
    }

    /// The caller's subscription `id`.
    async fn own_subscription(
        &self,
        user: &User,
        id: &SubscriptionId,
    ) -> Result<Subscription, ChangePlanError> {
        let subscription = self
            .store
            .find_subscription(id)
            .await?
            .ok_or(ChangePlanError::NotFound)?;
        if !self
            .manages_billing_of(&user.id, subscription.account_id())
            .await?
        {
            return Err(ChangePlanError::NotOwner);
        }
        Ok(subscription)
    }

    /// The plan switched to, as sold now, and its definition; it must be sold through the
    /// subscription's provider.
    async fn switch_target(
        &self,
        current: &Subscription,
        id: &PlanId,
    ) -> Result<(PlanSnapshot, Plan), ChangePlanError> {
        let plan = find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            id,
        )
        .await?
        .ok_or_else(|| ChangePlanError::PlanNotFound(id.as_str().to_owned()))?;
        if plan.provider() != current.provider() {
            return Err(ChangePlanError::NotSwitchable(format!(
                "plan {} is sold through {}, the subscription is billed by {}",
                plan.id(),
                plan.provider(),
                current.provider()
            )));
        }
        self.check_offered::<ChangePlanError>(current.user_id(), current.account_id(), &plan)
            .await?;
        let snapshot = PlanSnapshot::of(&plan, plan.price_in(self.config.environment));
        Ok((snapshot, plan))
    }

    fn subscription_gateway(
        &self,
        current: &Subscription,
    ) -> Result<std::sync::Arc<dyn PaymentGateway>, ChangePlanError> {
        self.gateways
            .get(current.provider())
            .cloned()
            .ok_or_else(|| ChangePlanError::Gateway("provider is not configured".into()))
    }

    /// Keep `change` on the subscription (compare-and-set), before the provider is asked.
    async fn keep_change(
        &self,
        current: &Subscription,
        change: &PlanChange,
    ) -> Result<Subscription, ChangePlanError> {
        let mut asked = current.clone();
        asked.ask_plan_change(change.clone());
        let command = self.request_command(
            current,
            &asked,
            format!(
                "tally:plan-change:{}:{}",
                current.id(),
                change.requested_at().unix_millis()
            ),
            "tally.subscription.plan_change_requested",
            format!(
                "{} to plan {} asked by the subscriber",
                change.direction().code(),
                change.plan_id()
            ),
        );
        match self.write_payment_event(&command, None).await {
            Ok(PaymentEventOutcome::Applied { .. }) => Ok(asked),
            // The same request id (same subscription and millisecond) committed first.
            Ok(PaymentEventOutcome::Duplicate) => Err(in_progress()),
            // Another request's claim, or another event, moved the subscription meanwhile:
            // nothing was asked of the provider.
            Err(StoreError::Conflict(what)) => {
                let fresh = self.fresh(current).await?;
                domain::check_no_change_in_progress(&fresh, self.clock.now())?;
                if fresh.plan_id() == change.plan_id() {
                    // Another request's switch to this plan was confirmed meanwhile.
                    return Err(PlanChangeRefusal::SamePlan.into());
                }
                Err(InfraError::Unavailable(anyhow::anyhow!(
                    "subscription changed while a plan change was asked: {what}"
                ))
                .into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The provider refused `change`: forget it, unless something else replaced it meanwhile.
    async fn drop_change(
        &self,
        asked: &Subscription,
        change: &PlanChange,
    ) -> Result<(), ChangePlanError> {
        let fresh = self.fresh(asked).await?;
        if fresh.pending_change() != Some(change) {
            return Ok(());
        }
        let mut dropped = fresh.clone();
        dropped.drop_plan_change();
        let command = self.request_command(
            &fresh,
            &dropped,
            format!(
                "tally:plan-change-refused:{}:{}",
                fresh.id(),
                change.requested_at().unix_millis()
            ),
            "tally.subscription.plan_change_refused",
            format!(
                "the provider refused the change to plan {}",
                change.plan_id()
            ),
        );
        match self.write_payment_event(&command, None).await {
            Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `known` as stored now.
    async fn fresh(&self, known: &Subscription) -> Result<Subscription, ChangePlanError> {
        Ok(self
            .store
            .find_subscription(known.id())
            .await?
            .unwrap_or_else(|| known.clone()))
    }

    /// The one-transaction command of a subscriber's request: `before` replaced by `after`
    /// under compare-and-set, with an inbox row saying what was asked.
    fn request_command(
        &self,
        before: &Subscription,
        after: &Subscription,
        event_id: String,
        event_type: &str,
        detail: String,
    ) -> PaymentEventCommand {
        PaymentEventCommand {
            top_up: None,
            bonus: None,
            inbox: InboxEntry {
                provider: before.provider(),
                event_id,
                event_type: event_type.to_owned(),
                payload: String::new(),
                outcome: EventOutcome::Applied,
                detail: Some(detail),
                received_at: self.clock.now(),
                user_id: None,
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
}

fn not_switchable(current: &Subscription) -> ChangePlanError {
    ChangePlanError::NotSwitchable(format!(
        "{} has no plan change: switch at the period's end (`\"when\": \"period_end\"`)",
        current.provider()
    ))
}
