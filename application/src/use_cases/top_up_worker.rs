//! The automatic top-up worker, and what a top-up's order does to it.
//!
//! A pass claims the top-ups that spends asked for, decides each charge
//! ([`domain::decide_charge`]: the rule still on, a method, no cool-off, the monthly caps, the
//! customer's ceiling), starts it with its order under a compare-and-set on the rule, and sends
//! it to the provider off-session with the top-up's id as the idempotency key. Credits never
//! come from here: only the provider's payment event pays the order, through the same checks
//! as any payment, and [`Service::top_up_effects`] settles the top-up in that same write. A
//! charge no event settled by its retry time is sent again with the same key.

use std::sync::Arc;

use domain::{
    AccountId, AfterDecline, CeilingFacts, Credits, DisabledReason, NoTopUp, Order, OrderId,
    OrderStatusKind, Plan, PlanSnapshot, PlanType, Timestamp, TopUpStatus,
};

use super::InfraError;
use super::plans::find_plan;
use crate::host_events::{self, HostEvent};
use crate::ports::{
    AutoTopUpRecord, ChangeSet, CheckoutRecord, CheckoutTarget, Clock, GatewayError, IdGenerator,
    OffSessionCharge, OffSessionOutcome, OrderChange, OrderRecord, PaymentGateway, RuleEffect,
    SecretHasher, StartTopUp, Store, StoreError, TopUpRecord, TopUpWrite,
};
use crate::service::Service;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TopUpPass {
    /// Charges sent to the provider (their credits come with its payment event).
    pub charged: u32,
    /// Top-ups refused before charging (a cap, the ceiling, the rule off, no method).
    pub refused: u32,
    /// Charges the provider declined.
    pub declined: u32,
    /// Charges that need the buyer: they were sent a checkout to finish.
    pub authentication: u32,
    /// Charges sent again because no event settled them.
    pub retried: u32,
}

/// A claimed top-up with what its charge needs.
struct Charge {
    top_up: TopUpRecord,
    record: AutoTopUpRecord,
    plan: Plan,
    gateway: Arc<dyn PaymentGateway>,
}

/// `top_up` as it stands after moving to `to` at `now`.
fn moved(
    top_up: &TopUpRecord,
    to: TopUpStatus,
    reason: Option<String>,
    now: Timestamp,
) -> TopUpRecord {
    TopUpRecord {
        status: to,
        reason: reason.or_else(|| top_up.reason.clone()),
        updated_at: now,
        ..top_up.clone()
    }
}

/// A top-up's move to `to`: the write, and what it tells.
fn settle(
    top_up: &TopUpRecord,
    to: TopUpStatus,
    reason: Option<String>,
    rule: RuleEffect,
    now: Timestamp,
) -> (TopUpWrite, Vec<HostEvent>) {
    let after = moved(top_up, to, reason.clone(), now);
    let write = TopUpWrite::Settle {
        id: top_up.id.clone(),
        account: top_up.account_id.clone(),
        to,
        reason,
        action_url: after.action_url.clone(),
        rule,
    };
    (
        write,
        host_events::top_up_moved(&after).into_iter().collect(),
    )
}

/// The cool-off a refusal before charging sets: until the month ends for a monthly cap (no
/// spend asks again before a charge could go out), none otherwise.
fn refusal_effect(no: NoTopUp, now: Timestamp) -> RuleEffect {
    match no {
        NoTopUp::MonthlyCap | NoTopUp::OperatorCap | NoTopUp::Ceiling => RuleEffect::CoolOff {
            until: domain::next_month(now),
            give_back: None,
        },
        _ => RuleEffect::Keep,
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// One pass of the worker: charge the top-ups spends asked for, send again those no event
    /// settled.
    ///
    /// # Errors
    /// Storage failures (the claimed top-ups are taken up again when their claim lapses).
    #[tracing::instrument(skip_all)]
    pub async fn run_top_ups(&self) -> Result<TopUpPass, InfraError> {
        let now = self.clock.now();
        let settings = self.top_ups;
        let times = (settings.lease_ms, settings.charge_retry_ms);
        let claimed = self.store.claim_top_ups(now, times, settings.batch).await?;
        let mut pass = TopUpPass::default();
        for top_up in claimed {
            let retry = top_up.status == TopUpStatus::Charging;
            match self.prepare(top_up).await? {
                Ok(charge) if retry => self.charge_again(charge, &mut pass).await?,
                Ok(charge) => self.start_charge(charge, &mut pass).await?,
                Err(refused) => {
                    self.apply_top_up(refused, None).await?;
                    pass.refused += 1;
                }
            }
        }
        Ok(pass)
    }

    /// What a claimed top-up's charge needs, or the write that refuses it (the rule gone, the
    /// pack no longer a credits pack on sale, no method at the pack's provider).
    async fn prepare(
        &self,
        top_up: TopUpRecord,
    ) -> Result<Result<Charge, (TopUpWrite, Vec<HostEvent>)>, InfraError> {
        let now = self.clock.now();
        let refuse = |top_up: &TopUpRecord, no: NoTopUp| {
            settle(
                top_up,
                TopUpStatus::Failed,
                Some(no.code().into()),
                RuleEffect::Keep,
                now,
            )
        };
        let Some(record) = self.store.auto_top_up(&top_up.account_id).await? else {
            return Ok(Err(refuse(&top_up, NoTopUp::Off)));
        };
        let plan = find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            &top_up.plan_id,
        )
        .await?
        .filter(|p| p.plan_type() == PlanType::Credits);
        let gateway = plan.as_ref().and_then(|p| self.gateways.get(p.provider()));
        let method_here = record
            .method
            .as_ref()
            .zip(plan.as_ref())
            .is_some_and(|(m, p)| m.provider == p.provider());
        match (plan, gateway) {
            (Some(plan), Some(gateway)) if method_here && gateway.saves_methods() => {
                Ok(Ok(Charge {
                    gateway: gateway.clone(),
                    top_up,
                    record,
                    plan,
                }))
            }
            _ => Ok(Err(refuse(&top_up, NoTopUp::NoMethod))),
        }
    }

    /// The customer's monthly ceiling and what this month's top-ups bought, if the account
    /// has a ceiling.
    async fn top_up_ceiling(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Option<CeilingFacts>, InfraError> {
        let limits = self.store.spend_limits(account, now).await?;
        let Some(ceiling) = domain::monthly_ceiling(limits.iter().map(|l| (&l.scope, &l.limit)))
        else {
            return Ok(None);
        };
        let month = domain::LimitWindow::Month.start_of(now);
        let bought = self.store.top_ups(account, 1000).await?;
        let topped_up = bought
            .iter()
            .filter(|t| t.created_at >= month && t.status != TopUpStatus::Failed)
            .filter_map(|t| t.credits)
            .fold(Credits::ZERO, |sum, c| {
                sum.checked_add(c).unwrap_or(Credits::MAX)
            });
        Ok(Some(CeilingFacts { ceiling, topped_up }))
    }

    /// Decide a requested top-up's charge; start it with its order and send it, or refuse it.
    async fn start_charge(&self, charge: Charge, pass: &mut TopUpPass) -> Result<(), InfraError> {
        let now = self.clock.now();
        let price = charge.plan.price_in(self.config.environment);
        let credits = charge.plan.credits().unwrap_or(Credits::ZERO);
        let ceiling = self.top_up_ceiling(&charge.top_up.account_id, now).await?;
        let (rule, state) = (&charge.record.rule, charge.record.state);
        let rails = self.top_ups.rails;
        if let Err(no) = domain::decide_charge(rule, state, rails, price, credits, ceiling, now) {
            let refused = settle(
                &charge.top_up,
                TopUpStatus::Failed,
                Some(no.code().into()),
                refusal_effect(no, now),
                now,
            );
            pass.refused += 1;
            return self.apply_top_up(refused, None).await;
        }
        let Some(method) = &charge.record.method else {
            return Ok(());
        };
        let id =
            OrderId::new(self.ids.new_id("ord")).map_err(|e| InfraError::Unexpected(e.into()))?;
        let order = Order::place(
            id,
            method.consented_by.clone(),
            charge.plan.provider(),
            PlanSnapshot::of(&charge.plan, price),
            now,
            self.config.order_lifetime_ms,
        )
        .for_account(charge.top_up.account_id.clone())
        .saving_method(true);
        let counted = state.as_of(now);
        let start = StartTopUp {
            top_up: charge.top_up.clone(),
            expected_version: charge.record.version,
            state: domain::TopUpState {
                month_count: counted.month_count.saturating_add(1),
                month_amount: counted.month_amount.saturating_add(price.amount_minor()),
                ..counted
            },
            retry_at: now.plus_millis(self.top_ups.charge_retry_ms),
            order: order.clone(),
            told: Vec::new(),
        };
        // A rule changed meanwhile leaves the top-up requested: its claim lapses and the next
        // pass decides it again.
        if !self.store.start_top_up(&start).await? {
            return Ok(());
        }
        self.metrics.order_moved(order.status());
        pass.charged += 1;
        let charging = TopUpRecord {
            status: TopUpStatus::Charging,
            order_id: Some(order.id().clone()),
            amount: Some(price),
            credits: Some(credits),
            ..charge.top_up.clone()
        };
        let placed = (&order, OrderRecord::FIRST_VERSION);
        self.send_charge(&charge, &charging, placed, pass).await
    }

    /// Send a charge no event settled by its retry time again, with the same idempotency key,
    /// while its order still waits; an order that stopped waiting without a payment fails it.
    async fn charge_again(&self, charge: Charge, pass: &mut TopUpPass) -> Result<(), InfraError> {
        let Some(order_id) = charge.top_up.order_id.clone() else {
            return Ok(());
        };
        let Some(record) = self.store.find_order(&order_id).await? else {
            return Ok(());
        };
        match record.order.status().kind() {
            OrderStatusKind::Pending => {
                pass.retried += 1;
                let waiting = (&record.order, record.version);
                self.send_charge(&charge, &charge.top_up, waiting, pass)
                    .await
            }
            OrderStatusKind::Paid => Ok(()),
            _ => {
                let now = self.clock.now();
                let reason = Some(format!("order {}", record.order.status().code()));
                let effect = self.decline_effect(&charge.top_up, &charge.record, now);
                let failed = settle(&charge.top_up, TopUpStatus::Failed, reason, effect, now);
                self.apply_top_up(with_disabled(failed, effect, now), None)
                    .await
            }
        }
    }

    /// Send `charging`'s charge of `order` to the provider and act on its answer.
    async fn send_charge(
        &self,
        charge: &Charge,
        charging: &TopUpRecord,
        (order, version): (&Order, i64),
        pass: &mut TopUpPass,
    ) -> Result<(), InfraError> {
        let Some(method) = &charge.record.method else {
            return Ok(());
        };
        let request = OffSessionCharge {
            order_id: order.id().clone(),
            user_id: order.user_id().clone(),
            amount: order.plan().price,
            method: method.method.clone(),
            idempotency_key: charging.id.clone(),
            description: format!("Automatic top-up: {}", order.plan().plan_id),
            notify_url: self.config.callbacks.webhook(order.provider()),
        };
        match charge.gateway.charge_saved_method(&request).await {
            Ok(OffSessionOutcome::Accepted { provider_reference }) => {
                if let Some(reference) = provider_reference {
                    self.store
                        .keep_charge_reference(order.id(), &reference)
                        .await?;
                }
                Ok(())
            }
            Ok(OffSessionOutcome::Declined { reason }) => {
                pass.declined += 1;
                self.top_up_declined(charge, charging, (order, version), reason)
                    .await
            }
            Ok(OffSessionOutcome::AuthenticationRequired) => {
                pass.authentication += 1;
                self.top_up_needs_buyer(charge, charging, (order, version))
                    .await
            }
            Err(e @ (GatewayError::Unreachable(_) | GatewayError::BadResponse(_))) => {
                // Perhaps charged: the provider's event settles it, else the retry sends it
                // again under the same key.
                tracing::warn!(top_up = %charging.id, error = %e, "top-up charge unanswered; sent again later");
                Ok(())
            }
            Err(e) => {
                pass.declined += 1;
                self.top_up_declined(charge, charging, (order, version), e.to_string())
                    .await
            }
        }
    }

    /// What a decline does to the rule: the cool-off or the rule turned off, giving back what
    /// the charge counted.
    fn decline_effect(
        &self,
        top_up: &TopUpRecord,
        record: &AutoTopUpRecord,
        now: Timestamp,
    ) -> RuleEffect {
        RuleEffect::Declined {
            after: domain::decide_decline(record.state.declines, self.top_ups.rails, now),
            give_back: top_up.amount.map_or(0, |a| a.amount_minor()),
        }
    }

    /// The provider declined: the order fails and the top-up with it, in one write.
    async fn top_up_declined(
        &self,
        charge: &Charge,
        charging: &TopUpRecord,
        (order, version): (&Order, i64),
        reason: String,
    ) -> Result<(), InfraError> {
        let now = self.clock.now();
        let mut failed = order.clone();
        if failed.mark_failed(reason.clone()).is_err() {
            return Ok(());
        }
        let effect = self.decline_effect(charging, &charge.record, now);
        let settled = settle(charging, TopUpStatus::Failed, Some(reason), effect, now);
        let change = OrderChange::new(order, version, failed);
        self.apply_top_up(with_disabled(settled, effect, now), Some(change))
            .await
    }

    /// The charge needs the buyer: a checkout of the same order (saving the method again) is
    /// where they finish it; the rule cools off meanwhile.
    async fn top_up_needs_buyer(
        &self,
        charge: &Charge,
        charging: &TopUpRecord,
        (order, version): (&Order, i64),
    ) -> Result<(), InfraError> {
        let contact = self.store.find_buyer_contact(order.user_id()).await?;
        let request = self.checkout_request(order, charge.plan.clone(), contact);
        let checkout = match charge.gateway.create_checkout(&request).await {
            Ok(checkout) => checkout,
            Err(e) => {
                let reason = format!("authentication required; no checkout: {e}");
                return self
                    .top_up_declined(charge, charging, (order, version), reason)
                    .await;
            }
        };
        let url = match &checkout.target {
            CheckoutTarget::Redirect(url) | CheckoutTarget::QrCode(url) => url.clone(),
        };
        let now = self.clock.now();
        let record = CheckoutRecord {
            provider_reference: checkout.provider_reference,
            target: checkout.target,
        };
        self.store.attach_checkout(order.id(), &record, now).await?;
        let waiting = TopUpRecord {
            action_url: Some(url),
            ..charging.clone()
        };
        let effect = RuleEffect::CoolOff {
            until: now.plus_millis(self.top_ups.rails.cool_off_ms),
            give_back: None,
        };
        let reason = Some("authentication_required".to_owned());
        let moved = settle(
            &waiting,
            TopUpStatus::AuthenticationRequired,
            reason,
            effect,
            now,
        );
        self.apply_top_up(moved, None).await
    }

    /// Apply a top-up's write with its order's change, if any (a conflict: a provider event
    /// moved the order first and settled the top-up with it).
    async fn apply_top_up(
        &self,
        (write, told): (TopUpWrite, Vec<HostEvent>),
        order: Option<OrderChange>,
    ) -> Result<(), InfraError> {
        let now = self.clock.now();
        let mut set = ChangeSet::at(now);
        if let Some(change) = &order {
            set.told.extend(host_events::order_changed(
                &change.before,
                &change.after,
                change.after.status().code(),
                now,
            ));
        }
        set.told.extend(told);
        set.order = order;
        set.top_up = Some(write);
        match self.store.apply(set).await {
            Ok(_) => Ok(()),
            Err(e) => match e.into_store_error() {
                StoreError::Conflict(_) => Ok(()),
                other => Err(other.into()),
            },
        }
    }

    /// What a change of a credits order does to the top-up it pays, if any: paid, it succeeds
    /// (declines in a row forgotten); failed, expired or cancelled while its charge waited, it
    /// fails (a decline, unless the buyer only did not finish authenticating); refunded or
    /// disputed, the account's automatic top-up is turned off until its owner turns it on.
    ///
    /// # Errors
    /// Storage.
    pub(crate) async fn top_up_effects(
        &self,
        change: &OrderChange,
        now: Timestamp,
    ) -> Result<Option<(TopUpWrite, Vec<HostEvent>)>, StoreError> {
        let (before, after) = (change.before.status().kind(), change.after.status().kind());
        if change.after.plan().plan_type != PlanType::Credits || before == after {
            return Ok(None);
        }
        let Some(top_up) = self.store.top_up_of_order(change.after.id()).await? else {
            return Ok(None);
        };
        let account = &top_up.account_id;
        Ok(match after {
            OrderStatusKind::Paid if top_up.status.awaits_payment() => Some(settle(
                &top_up,
                TopUpStatus::Succeeded,
                None,
                RuleEffect::Reset,
                now,
            )),
            OrderStatusKind::Failed | OrderStatusKind::Expired | OrderStatusKind::Cancelled
                if top_up.status.awaits_payment() =>
            {
                let reason = match change.after.status() {
                    domain::OrderStatus::Failed { reason } => reason.clone(),
                    other => format!("order {}", other.code()),
                };
                if top_up.status == TopUpStatus::AuthenticationRequired {
                    let settled = settle(
                        &top_up,
                        TopUpStatus::Failed,
                        Some(reason),
                        RuleEffect::Keep,
                        now,
                    );
                    return Ok(Some(settled));
                }
                let Some(record) = self.store.auto_top_up(account).await? else {
                    return Ok(None);
                };
                let effect = self.decline_effect(&top_up, &record, now);
                let settled = settle(&top_up, TopUpStatus::Failed, Some(reason), effect, now);
                Some(with_disabled(settled, effect, now))
            }
            OrderStatusKind::Refunded | OrderStatusKind::PartiallyRefunded => {
                let reason = DisabledReason::Refunded;
                let write = TopUpWrite::Disable {
                    account: account.clone(),
                    reason,
                };
                Some((
                    write,
                    vec![host_events::top_up_disabled(account, reason, now)],
                ))
            }
            _ => None,
        })
    }
}

/// `settled` with `auto_top_up.disabled` when `effect` turns the rule off.
fn with_disabled(
    (write, mut told): (TopUpWrite, Vec<HostEvent>),
    effect: RuleEffect,
    now: Timestamp,
) -> (TopUpWrite, Vec<HostEvent>) {
    if let (
        RuleEffect::Declined {
            after: AfterDecline::Disable { .. },
            ..
        },
        TopUpWrite::Settle { account, .. },
    ) = (effect, &write)
    {
        told.push(host_events::top_up_disabled(
            account,
            DisabledReason::Declines,
            now,
        ));
    }
    (write, told)
}
