//! Handle a provider webhook: verify, then apply each normalized event in one database
//! transaction (CORRECTNESS.md invariants 3 to 7).
//!
//! The pipeline: raw bytes and headers → the gateway's verification (a refused webhook changes
//! nothing) → for each event, read the order or subscription, decide with the domain state
//! machines, and hand the store one [`PaymentEventCommand`]: inbox row, order transition,
//! subscription change, grant, clawback. A duplicate inbox row makes it a no-op; a concurrent
//! change of the same order or subscription makes the store refuse it, and the event is
//! re-read and re-decided, a bounded number of times.

use domain::{
    BillingPeriod, Credits, EventOutcome, FailureDecision, KeptRefund, Money, OrderStatus,
    PaymentDecision, PlanType, ProviderId, RenewalRefusal, SoldTerms, SoldTermsMismatch,
    Subscription, SubscriptionEvent, SubscriptionId, Timestamp, Transition, check_activation,
    decide_failure, decide_payment, refund_step,
};

use super::InfraError;
use crate::ports::{
    AckFor, ChargeChange, ClawbackCommand, Clock, GatewayError, GrantCommand, GrantSource,
    IdGenerator, InboxEntry, LedgerEffect, OrderChange, OrderLocator, OrderRecord, PaymentEvent,
    PaymentEventCommand, PaymentEventOutcome, PaymentStatus, RefundTarget, SecretHasher, Store,
    StoreError, SubscriptionChange, SubscriptionCharge, WebhookAck, WebhookError, WebhookRequest,
};

mod refunds;
use crate::service::Service;

/// The largest webhook body kept in the inbox, in bytes.
pub const MAX_STORED_PAYLOAD_BYTES: usize = 256 * 1024;

/// Why a webhook was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum HandleWebhookError {
    /// Not a provider id, or the provider is not configured.
    #[error("unknown provider")]
    UnknownProvider,
    /// Verification failed; nothing changed. `ack` is the answer the provider expects.
    #[error("webhook refused: {reason}")]
    Rejected {
        /// Why.
        reason: WebhookError,
        /// What to answer.
        ack: WebhookAck,
    },
    /// The provider could not be asked what the event needs (a PayPal capture after an
    /// approval failed for now): nothing changed; refusing the webhook makes the provider send
    /// it again.
    #[error("the provider could not be reached: {0}")]
    ProviderUnavailable(String),
    /// Infrastructure (the provider retries later).
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for HandleWebhookError {
    fn from(e: StoreError) -> Self {
        HandleWebhookError::Infra(e.into())
    }
}

/// What a handled webhook did, for the answer and for metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookHandled {
    /// The answer the provider expects.
    pub ack: WebhookAck,
    /// What each event came to: `applied`, `duplicate`, `ignored`, `stale`, `mismatch`, …
    pub outcomes: Vec<String>,
    /// The status codes orders moved to.
    pub order_statuses: Vec<&'static str>,
    /// Credits granted by these events.
    pub credits_granted: domain::Credits,
    /// Credits taken back by refunds.
    pub credits_clawed_back: domain::Credits,
}

impl WebhookHandled {
    fn add(&mut self, result: EventResult) {
        self.outcomes.push(result.outcome.code().to_owned());
        self.order_statuses.extend(result.order_status);
        self.credits_granted = self
            .credits_granted
            .checked_add(result.granted)
            .unwrap_or(self.credits_granted);
        self.credits_clawed_back = self
            .credits_clawed_back
            .checked_add(result.clawed_back)
            .unwrap_or(self.credits_clawed_back);
    }
}

/// What one event came to.
#[derive(Debug)]
struct EventResult {
    outcome: EventOutcome,
    order_status: Option<&'static str>,
    granted: domain::Credits,
    clawed_back: domain::Credits,
}

impl EventResult {
    fn only(outcome: EventOutcome) -> Self {
        Self {
            outcome,
            order_status: None,
            granted: domain::Credits::ZERO,
            clawed_back: domain::Credits::ZERO,
        }
    }

    fn of(change: &Change, outcome: PaymentEventOutcome) -> Self {
        let PaymentEventOutcome::Applied { ledger } = outcome else {
            return Self::only(EventOutcome::Duplicate);
        };
        let mut result = Self::only(change.outcome);
        result.order_status = change.moved_to;
        for effect in ledger {
            if let LedgerEffect::Written(tx) = effect {
                let magnitude = tx.amount.magnitude();
                let sum = if tx.amount.is_decrease() {
                    &mut result.clawed_back
                } else {
                    &mut result.granted
                };
                *sum = sum.checked_add(magnitude).unwrap_or(*sum);
            }
        }
        result
    }
}

/// What to do with one event.
enum Decision {
    /// Apply this change.
    Apply(Change),
    /// Record the event with this outcome; change nothing else.
    Record(EventOutcome, Option<String>),
}

/// A command under construction, with the outcome it stands for.
struct Change {
    outcome: EventOutcome,
    command: PaymentEventCommand,
    /// The status the order moves to, when it moves.
    moved_to: Option<&'static str>,
}

impl Change {
    /// Move (or touch) `before`'s order to `status`, if it still has the version read.
    fn order(
        mut self,
        before: &OrderRecord,
        status: OrderStatus,
        mismatch: Option<String>,
    ) -> Self {
        if status.code() != before.order.status().code() {
            self.moved_to = Some(status.code());
        }
        self.command.order = Some(OrderChange {
            order_id: before.order.id().clone(),
            expected_version: before.version,
            status,
            mismatch,
        });
        self
    }

    fn apply(self) -> Decision {
        Decision::Apply(self)
    }
}

/// The inbox facts shared by the decisions of one event.
struct Received {
    provider: ProviderId,
    event_id: String,
    event_type: String,
    payload: String,
    now: Timestamp,
}

impl Received {
    fn entry(&self, outcome: EventOutcome, detail: Option<String>) -> InboxEntry {
        InboxEntry {
            provider: self.provider,
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            payload: self.payload.clone(),
            outcome: outcome.code().to_owned(),
            detail,
            received_at: self.now,
        }
    }

    fn change(&self, outcome: EventOutcome, detail: Option<String>) -> Change {
        Change {
            outcome,
            command: PaymentEventCommand {
                inbox: self.entry(outcome, detail),
                order: None,
                subscription: None,
                grant: None,
                clawback: None,
                charge: None,
                refund: None,
            },
            moved_to: None,
        }
    }
}

fn payload_text(body: &[u8]) -> String {
    let end = body.len().min(MAX_STORED_PAYLOAD_BYTES);
    String::from_utf8_lossy(&body[..end]).into_owned()
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Handle `POST /api/payment/webhook/:provider`.
    ///
    /// # Errors
    /// See [`HandleWebhookError`].
    pub async fn handle_webhook(
        &self,
        provider: &str,
        request: WebhookRequest,
    ) -> Result<WebhookHandled, HandleWebhookError> {
        let provider: ProviderId = provider
            .parse()
            .map_err(|_| HandleWebhookError::UnknownProvider)?;
        let gateway = self
            .gateways
            .get(provider)
            .ok_or(HandleWebhookError::UnknownProvider)?
            .clone();
        let verified = match gateway.verify_webhook(&request).await {
            Ok(v) => v,
            Err(reason) => {
                let ack = gateway.webhook_ack(&AckFor::Refused(reason.clone()));
                return Err(HandleWebhookError::Rejected { reason, ack });
            }
        };
        let payload = payload_text(&request.body);
        let now = self.clock.now();
        let received = |event_id: String| Received {
            provider,
            event_id,
            event_type: verified.event_type.clone(),
            payload: payload.clone(),
            now,
        };
        let mut handled = WebhookHandled {
            ack: gateway.webhook_ack(&AckFor::Accepted),
            outcomes: Vec::new(),
            order_statuses: Vec::new(),
            credits_granted: domain::Credits::ZERO,
            credits_clawed_back: domain::Credits::ZERO,
        };
        // A webhook for another merchant, or of a type Tally does not act on: recorded once.
        let unapplied = match &verified.foreign {
            Some(why) => Some((EventOutcome::ForeignMerchant, why.clone())),
            None if verified.events.is_empty() => {
                Some((EventOutcome::Ignored, "event type not handled".to_owned()))
            }
            None => None,
        };
        if let Some((outcome, detail)) = unapplied {
            let received = received(verified.event_id.clone());
            handled.add(self.record_only(&received, outcome, Some(detail)).await?);
            return Ok(handled);
        }
        for (index, event) in verified.events.iter().enumerate() {
            // One inbox row per event; a webhook carrying several events gets suffixed ids.
            let event_id = if index == 0 {
                verified.event_id.clone()
            } else {
                format!("{}#{index}", verified.event_id)
            };
            let result = self.apply_event(&received(event_id), event).await?;
            handled.add(result);
        }
        Ok(handled)
    }

    /// Apply an event learnt by asking the provider (reconciliation) through the webhook path.
    pub(super) async fn apply_reconciled(
        &self,
        provider: ProviderId,
        event_id: String,
        event: &PaymentEvent,
    ) -> Result<(), HandleWebhookError> {
        let received = Received {
            provider,
            event_id,
            event_type: "tally.reconcile".into(),
            payload: String::new(),
            now: self.clock.now(),
        };
        self.apply_event(&received, event).await.map(|_| ())
    }

    /// Decide and apply one event, re-deciding after a concurrent change; an approval is
    /// captured first when it is for our own pending order.
    async fn apply_event(
        &self,
        received: &Received,
        event: &PaymentEvent,
    ) -> Result<EventResult, HandleWebhookError> {
        match event {
            PaymentEvent::PaymentApproved { order, amount, .. } => {
                self.apply_approval(received, order, *amount).await
            }
            _ => self.apply_decided(received, event).await,
        }
    }

    /// An approved payment: capture it only when it is for this provider's pending order with
    /// the same provider reference and price, then apply what the capture came to. Anything
    /// else is recorded, and nothing is captured.
    async fn apply_approval(
        &self,
        received: &Received,
        locator: &OrderLocator,
        amount: Money,
    ) -> Result<EventResult, HandleWebhookError> {
        let Some(record) = self.locate(received.provider, locator).await? else {
            return self
                .record_only(received, EventOutcome::UnknownOrder, None)
                .await;
        };
        if let Some((outcome, detail)) = approval_refusal(&record, locator, amount) {
            return self.record_only(received, outcome, Some(detail)).await;
        }
        match self.capture_order(&record).await {
            Ok(Captured::Event(event)) => self.apply_decided(received, &event).await,
            Ok(Captured::Nothing(detail)) => {
                self.record_only(received, EventOutcome::Ignored, Some(detail))
                    .await
            }
            // Transient: refuse the webhook so that the provider delivers it again.
            Err(e) => Err(HandleWebhookError::ProviderUnavailable(format!(
                "capture failed: {e}"
            ))),
        }
    }

    /// Capture `record`'s approved payment through its gateway (the same idempotency key on
    /// every path): the event the capture came to, or why there is none. The caller has
    /// checked that the order is ours and pending.
    ///
    /// # Errors
    /// A transient gateway failure (retrying is safe).
    pub(super) async fn capture_order(
        &self,
        record: &OrderRecord,
    ) -> Result<Captured, GatewayError> {
        let gateway = self
            .gateways
            .get(record.order.provider())
            .ok_or(GatewayError::NotSupported)?;
        let payment = record.payment_ref();
        let order = OrderLocator {
            order_id: Some(record.order.id().clone()),
            provider_reference: payment.provider_reference.clone(),
        };
        Ok(match gateway.capture(&payment).await {
            Ok(PaymentStatus::Succeeded { amount, paid_at }) => {
                Captured::Event(PaymentEvent::PaymentSucceeded {
                    order,
                    amount,
                    occurred_at: paid_at,
                })
            }
            Ok(PaymentStatus::Failed { reason }) => Captured::Event(PaymentEvent::PaymentFailed {
                order,
                reason,
                occurred_at: self.clock.now(),
            }),
            Ok(PaymentStatus::Pending) => {
                Captured::Nothing("capture pending at the provider".into())
            }
            Err(GatewayError::Rejected(why)) => {
                Captured::Nothing(format!("capture refused: {why}"))
            }
            Err(GatewayError::NotSupported) => {
                Captured::Nothing("the provider has no capture".into())
            }
            Err(e) => return Err(e),
        })
    }

    /// Record `outcome` for the event and change nothing else (a repeat is a duplicate).
    async fn record_only(
        &self,
        received: &Received,
        outcome: EventOutcome,
        detail: Option<String>,
    ) -> Result<EventResult, HandleWebhookError> {
        let fresh = self
            .store
            .record_event(&received.entry(outcome, detail))
            .await?;
        let outcome = if fresh {
            outcome
        } else {
            EventOutcome::Duplicate
        };
        Ok(EventResult::only(outcome))
    }

    /// Decide and apply one settled event, re-deciding after a concurrent change.
    async fn apply_decided(
        &self,
        received: &Received,
        event: &PaymentEvent,
    ) -> Result<EventResult, HandleWebhookError> {
        let attempts = self.config.webhook_conflict_retries.max(1);
        for attempt in 1..=attempts {
            let change = match self.decide(received, event).await? {
                Decision::Record(outcome, detail) => {
                    return self.record_only(received, outcome, detail).await;
                }
                Decision::Apply(change) => change,
            };
            match self.store.apply_payment_event(&change.command).await {
                Ok(outcome) => return Ok(EventResult::of(&change, outcome)),
                Err(StoreError::Conflict(_)) if attempt < attempts => {}
                Err(StoreError::Conflict(what)) => {
                    return Err(InfraError::Unavailable(anyhow::anyhow!(
                        "webhook kept conflicting: {what}"
                    ))
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(InfraError::Unavailable(anyhow::anyhow!("webhook retries exhausted")).into())
    }

    async fn decide(
        &self,
        r: &Received,
        event: &PaymentEvent,
    ) -> Result<Decision, HandleWebhookError> {
        match event {
            PaymentEvent::PaymentSucceeded {
                order,
                amount,
                occurred_at,
            } => self.decide_paid(r, order, *amount, *occurred_at).await,
            PaymentEvent::PaymentFailed { order, reason, .. } => {
                let record = self.locate(r.provider, order).await?;
                Ok(record.map_or_else(unknown_order, |o| decide_failed(r, &o, reason)))
            }
            PaymentEvent::SubscriptionActivated {
                order,
                provider_subscription_id,
                period,
                amount,
                charge_ref,
                occurred_at,
            } => {
                let activation = Activation {
                    order,
                    provider_subscription_id,
                    period: *period,
                    amount: *amount,
                    charge_ref: charge_ref.as_deref(),
                    occurred_at: *occurred_at,
                };
                self.decide_activation(r, &activation).await
            }
            PaymentEvent::SubscriptionRenewed {
                provider_subscription_id,
                period,
                amount,
                charge_ref,
                occurred_at,
            } => {
                let renewal = Renewal {
                    provider_subscription_id,
                    period: *period,
                    amount: *amount,
                    charge_ref: charge_ref.as_deref(),
                    occurred_at: *occurred_at,
                };
                self.decide_renewal(r, &renewal).await
            }
            PaymentEvent::SubscriptionPastDue { .. }
            | PaymentEvent::SubscriptionCancelScheduled { .. }
            | PaymentEvent::SubscriptionCancelWithdrawn { .. }
            | PaymentEvent::SubscriptionCanceled { .. }
            | PaymentEvent::SubscriptionExpired { .. } => {
                let Some((id, change, occurred_at)) = lifecycle_change(event) else {
                    return Ok(Decision::Record(EventOutcome::Ignored, None));
                };
                self.decide_lifecycle(r, id, change, occurred_at).await
            }
            PaymentEvent::Refunded { charge, refund, .. } => {
                self.decide_refund(r, charge, refund).await
            }
            // Captured (or refused) by `apply_approval` before anything is decided.
            PaymentEvent::PaymentApproved { .. } => Ok(Decision::Record(
                EventOutcome::Ignored,
                Some("an approval is settled by capturing it".into()),
            )),
        }
    }

    async fn locate(
        &self,
        provider: ProviderId,
        locator: &OrderLocator,
    ) -> Result<Option<OrderRecord>, StoreError> {
        let by_id = match &locator.order_id {
            Some(id) => self.store.find_order(id).await?,
            None => None,
        };
        let found = match (by_id, &locator.provider_reference) {
            (Some(r), _) => Some(r),
            (None, Some(reference)) => {
                self.store
                    .find_order_by_reference(provider, reference)
                    .await?
            }
            (None, None) => None,
        };
        // An event of one provider never touches another provider's order.
        Ok(found.filter(|r| r.order.provider() == provider))
    }

    /// A payment succeeded: check it against the order, mark it paid, grant credits once, and
    /// apply the refunds that arrived before it.
    async fn decide_paid(
        &self,
        r: &Received,
        locator: &OrderLocator,
        amount: Money,
        occurred_at: Timestamp,
    ) -> Result<Decision, HandleWebhookError> {
        let Some(record) = self.locate(r.provider, locator).await? else {
            return Ok(unknown_order());
        };
        // Keeping a refund against a pending order bumps its version; an order still at version
        // 0 has none kept, and the common payment skips the read.
        let kept = if *record.order.status() == OrderStatus::Pending && record.version > 0 {
            let target = RefundTarget::Order(record.order.id().clone());
            kept_amounts(&self.store.refunds_of(r.provider, &target).await?)
        } else {
            Vec::new()
        };
        Ok(decide_paid(r, &record, amount, occurred_at, &kept))
    }

    /// A subscription's first payment: it must match a recurring order of this provider (and
    /// its price, when the event carries the amount); the subscription keeps what was sold.
    async fn decide_activation(
        &self,
        r: &Received,
        activation: &Activation<'_>,
    ) -> Result<Decision, HandleWebhookError> {
        let Some(record) = self.locate(r.provider, activation.order).await? else {
            return Ok(unknown_order());
        };
        let record = &record;
        let terms = match check_activation(record.order.plan(), activation.amount) {
            Ok(terms) => terms,
            Err(mismatch) => return Ok(mismatch_on_order(r, record, &mismatch)),
        };
        let existing = self
            .store
            .find_subscription_by_provider_id(r.provider, activation.provider_subscription_id)
            .await?;
        let (mut change, subscription) = match existing {
            Some(current) => match activate_existing(&current, activation) {
                Ok(next) => (update(r, &current, &next), next),
                Err((EventOutcome::DuplicateState, _)) if activation.charge_ref.is_some() => {
                    return Ok(name_first_charge(r, &current, record, activation));
                }
                Err((outcome, detail)) => return Ok(Decision::Record(outcome, detail)),
            },
            None => {
                if let Some(refusal) = self.refuse_new_activation(r, record).await? {
                    return Ok(refusal);
                }
                let id = SubscriptionId::new(self.ids.new_id("sub"))
                    .map_err(|e| InfraError::Unexpected(e.into()))?;
                activate_new(r, record, activation, terms, id)
            }
        };
        let mut order = record.order.clone();
        if order.mark_paid(activation.occurred_at) == Ok(Transition::Applied) {
            change = change.order(record, order.status().clone(), None);
        }
        // Credits come from what the subscription was sold at (a subscription stored before
        // terms were kept takes them from this order, which has just been checked).
        let sold = subscription.sold_terms().unwrap_or(terms);
        let paid = PaidPeriod {
            period: activation.period,
            amount: activation.amount.unwrap_or(sold.price()),
            charge_ref: activation.charge_ref,
            order: Some(record.order.id().clone()),
            paid_at: activation.occurred_at,
        };
        self.grant_period(r, change, &subscription, sold, paid)
            .await
            .map(Change::apply)
    }

    /// Why a provider subscription not seen before may not start from this order: the order
    /// is no longer waiting for payment (failed, expired, cancelled, refunded: recorded as a
    /// late payment on the order), or it already started another subscription (paid orders
    /// stay allowed, since the reconciler may mark an order paid before its activation).
    async fn refuse_new_activation(
        &self,
        r: &Received,
        record: &OrderRecord,
    ) -> Result<Option<Decision>, HandleWebhookError> {
        let order = &record.order;
        if !matches!(
            order.status(),
            OrderStatus::Pending | OrderStatus::Paid { .. }
        ) {
            let detail = format!("subscription activation for a {} order", order.status());
            let change = r
                .change(EventOutcome::LatePayment, Some(detail.clone()))
                .order(record, order.status().clone(), Some(detail));
            return Ok(Some(change.apply()));
        }
        if let Some(started) = self.store.find_subscription_by_order(order.id()).await? {
            let detail = format!(
                "order already started subscription {}",
                started
                    .provider_subscription_id()
                    .chars()
                    .take(128)
                    .collect::<String>()
            );
            return Ok(Some(Decision::Record(EventOutcome::Mismatch, Some(detail))));
        }
        Ok(None)
    }

    /// A renewal: it must pay what was sold for the period after the one already paid; its
    /// credits are the sold terms', never a plan's as edited since.
    async fn decide_renewal(
        &self,
        r: &Received,
        renewal: &Renewal<'_>,
    ) -> Result<Decision, HandleWebhookError> {
        let id = renewal.provider_subscription_id;
        let Some(current) = self.find_subscription(r, id).await? else {
            return Ok(unknown_subscription(id));
        };
        let tolerance_ms = self.config.renewal_clock_tolerance_ms;
        let mut next = current.clone();
        let mut moved = None;
        match current.check_renewal(renewal.amount, renewal.period, tolerance_ms) {
            Ok(()) => {}
            Err(RenewalRefusal::Mismatch(mismatch)) if current.sold_terms().is_some() => {
                // A provider-side price change to another recurring plan of ours moves the
                // terms to that plan; any other price is a mismatch.
                let Some((plan, terms)) = self.plan_priced(r.provider, renewal.amount).await?
                else {
                    return Ok(refused_renewal(&RenewalRefusal::Mismatch(mismatch)));
                };
                next.move_to_terms(plan, terms);
                if let Err(refusal) =
                    next.check_renewal(renewal.amount, renewal.period, tolerance_ms)
                {
                    return Ok(refused_renewal(&refusal));
                }
                moved = Some(format!(
                    "price changed at the provider: plan {} ({mismatch}) → {} at {}",
                    current.plan_id(),
                    next.plan_id(),
                    renewal.amount
                ));
            }
            Err(refusal) => return Ok(refused_renewal(&refusal)),
        }
        let Some(terms) = next.sold_terms() else {
            return Ok(Decision::Record(
                EventOutcome::Mismatch,
                Some("subscription has no sold terms".into()),
            ));
        };
        match next.apply(
            SubscriptionEvent::Renewed(renewal.period),
            renewal.occurred_at,
        ) {
            Ok(Transition::Applied) => {}
            Ok(Transition::AlreadyDone) => {
                return Ok(Decision::Record(EventOutcome::DuplicateState, None));
            }
            Err(e) => return Ok(Decision::Record(EventOutcome::Stale, Some(e.to_string()))),
        }
        let paid = PaidPeriod {
            period: renewal.period,
            amount: renewal.amount,
            charge_ref: renewal.charge_ref,
            order: None,
            paid_at: renewal.occurred_at,
        };
        let mut change = update(r, &current, &next);
        change.command.inbox.detail = moved;
        self.grant_period(r, change, &next, terms, paid)
            .await
            .map(Change::apply)
    }

    /// The one recurring plan of ours at `provider` whose price (in this environment) is
    /// `paid`, and the terms it sells; `None` when there is none or more than one.
    async fn plan_priced(
        &self,
        provider: ProviderId,
        paid: Money,
    ) -> Result<Option<(domain::PlanId, SoldTerms)>, HandleWebhookError> {
        let plans = super::plans::list_plans(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.gateways,
            &self.store,
            super::plans::Audience::Admin,
            None,
        )
        .await?;
        let mut candidates = plans.into_iter().map(|p| p.plan).filter(|plan| {
            plan.provider() == provider
                && plan.plan_type() == PlanType::Recurring
                && plan.price_in(self.config.environment) == paid
        });
        let (Some(plan), None) = (candidates.next(), candidates.next()) else {
            return Ok(None);
        };
        let snapshot = domain::PlanSnapshot::of(&plan, paid);
        Ok(SoldTerms::of_order(&snapshot)
            .ok()
            .map(|terms| (plan.id().clone(), terms)))
    }

    /// Record a paid period as a charge, grant its credits, and apply the refunds of that charge
    /// that arrived before it.
    async fn grant_period(
        &self,
        r: &Received,
        mut change: Change,
        subscription: &Subscription,
        terms: SoldTerms,
        paid: PaidPeriod<'_>,
    ) -> Result<Change, HandleWebhookError> {
        let credits = terms.credits_per_period();
        change.command.grant =
            credits.map(|amount| period_grant(subscription, paid.period, amount, r.now));
        let kept = match paid.charge_ref {
            Some(charge_ref) => {
                let target = RefundTarget::Charge(charge_ref.to_owned());
                kept_amounts(&self.store.refunds_of(r.provider, &target).await?)
            }
            None => Vec::new(),
        };
        let zero = Money::zero(paid.amount.currency());
        let step = refund_step(paid.amount, credits, zero, &kept);
        if let Some(step) = &step {
            change.command.clawback = Some(ClawbackCommand {
                user_id: subscription.user_id().clone(),
                source: GrantSource::SubscriptionPeriod(subscription.id().clone(), paid.period),
                wanted: step.clawback,
                now: r.now,
            });
        }
        change.command.charge = Some(ChargeChange::Record(SubscriptionCharge {
            subscription_id: subscription.id().clone(),
            user_id: subscription.user_id().clone(),
            provider: r.provider,
            charge_ref: paid.charge_ref.map(str::to_owned),
            order_id: paid.order,
            period: paid.period,
            amount: paid.amount,
            credits,
            refunded: step.map_or(zero, |s| s.after),
            paid_at: paid.paid_at,
        }));
        Ok(change)
    }

    /// A lifecycle event without a payment: past due, cancellation, expiry.
    async fn decide_lifecycle(
        &self,
        r: &Received,
        provider_subscription_id: &str,
        event: SubscriptionEvent,
        occurred_at: Timestamp,
    ) -> Result<Decision, HandleWebhookError> {
        let Some(current) = self.find_subscription(r, provider_subscription_id).await? else {
            return Ok(unknown_subscription(provider_subscription_id));
        };
        let mut next = current.clone();
        match next.apply(event, occurred_at) {
            Ok(Transition::Applied) => {}
            Ok(Transition::AlreadyDone) => {
                return Ok(Decision::Record(EventOutcome::DuplicateState, None));
            }
            Err(e) => return Ok(Decision::Record(EventOutcome::Stale, Some(e.to_string()))),
        }
        Ok(update(r, &current, &next).apply())
    }

    async fn find_subscription(
        &self,
        r: &Received,
        provider_subscription_id: &str,
    ) -> Result<Option<Subscription>, StoreError> {
        self.store
            .find_subscription_by_provider_id(r.provider, provider_subscription_id)
            .await
    }
}

/// What capturing an approved payment came to.
pub(super) enum Captured {
    /// The capture settled: apply this event.
    Event(PaymentEvent),
    /// Nothing to apply (held, refused, or no capture at this provider), and why.
    Nothing(String),
}

/// Why an approval must not be captured: `None` for this provider's pending order with the
/// same provider reference and price.
fn approval_refusal(
    record: &OrderRecord,
    locator: &OrderLocator,
    amount: Money,
) -> Option<(EventOutcome, String)> {
    let order = &record.order;
    let ours = record.payment_ref().provider_reference;
    if let Some(named) = &locator.provider_reference
        && ours.as_deref() != Some(named.as_str())
    {
        let named: String = named.chars().take(64).collect();
        return Some((
            EventOutcome::UnknownOrder,
            format!("approval of provider order {named}, not this order's; not captured"),
        ));
    }
    match order.status() {
        OrderStatus::Pending => {}
        OrderStatus::Paid { .. }
        | OrderStatus::PartiallyRefunded { .. }
        | OrderStatus::Refunded { .. } => {
            return Some((
                EventOutcome::DuplicateState,
                format!("order is {}", order.status()),
            ));
        }
        other => {
            return Some((
                EventOutcome::Ignored,
                format!("approval of a {other} order; not captured"),
            ));
        }
    }
    if amount != order.plan().price {
        return Some((
            EventOutcome::Mismatch,
            format!(
                "approved {amount}, order price {}; not captured",
                order.plan().price
            ),
        ));
    }
    None
}

/// What an activation event says.
struct Activation<'a> {
    order: &'a OrderLocator,
    provider_subscription_id: &'a str,
    period: BillingPeriod,
    amount: Option<Money>,
    charge_ref: Option<&'a str>,
    occurred_at: Timestamp,
}

/// What a renewal event says.
struct Renewal<'a> {
    provider_subscription_id: &'a str,
    period: BillingPeriod,
    amount: Money,
    charge_ref: Option<&'a str>,
    occurred_at: Timestamp,
}

/// A period just paid, as its charge is recorded.
struct PaidPeriod<'a> {
    period: BillingPeriod,
    amount: Money,
    charge_ref: Option<&'a str>,
    order: Option<domain::OrderId>,
    paid_at: Timestamp,
}

/// The amounts of refund reports, for the domain's sums.
fn kept_amounts(records: &[crate::ports::RefundRecord]) -> Vec<KeptRefund> {
    records.iter().map(|r| r.refund).collect()
}

/// An activation for a subscription already stored (the same payment told twice, or the
/// provider's second event for it): the subscription moved along, or the outcome to record.
fn activate_existing(
    current: &Subscription,
    activation: &Activation<'_>,
) -> Result<Subscription, (EventOutcome, Option<String>)> {
    let mut next = current.clone();
    match next.apply(
        SubscriptionEvent::Activated(activation.period),
        activation.occurred_at,
    ) {
        Ok(Transition::Applied) => Ok(next),
        // Already active for this period: granting again could only duplicate.
        Ok(Transition::AlreadyDone) => Err((EventOutcome::DuplicateState, None)),
        Err(e) => Err((EventOutcome::Stale, Some(e.to_string()))),
    }
}

/// A second activation for the period already active that names the provider's charge id the
/// first did not (PayPal: `BILLING.SUBSCRIPTION.ACTIVATED`, then the first sale): nothing is
/// granted again; the period's charge learns its id, so that refunds of it are found.
fn name_first_charge(
    r: &Received,
    current: &Subscription,
    record: &OrderRecord,
    activation: &Activation<'_>,
) -> Decision {
    let Some(terms) = current.sold_terms() else {
        return Decision::Record(EventOutcome::DuplicateState, None);
    };
    let mut change = r.change(EventOutcome::DuplicateState, None);
    change.command.charge = Some(ChargeChange::Record(SubscriptionCharge {
        subscription_id: current.id().clone(),
        user_id: current.user_id().clone(),
        provider: r.provider,
        charge_ref: activation.charge_ref.map(str::to_owned),
        order_id: Some(record.order.id().clone()),
        period: activation.period,
        amount: activation.amount.unwrap_or(terms.price()),
        credits: terms.credits_per_period(),
        refunded: Money::zero(terms.price().currency()),
        paid_at: activation.occurred_at,
    }));
    change.apply()
}

/// The change that replaces `current` with `next` (compare-and-set on its last event).
fn update(r: &Received, current: &Subscription, next: &Subscription) -> Change {
    let mut change = r.change(EventOutcome::Applied, None);
    change.command.subscription = Some(SubscriptionChange::Update {
        subscription: next.clone(),
        expected_last_event_at: current.last_event_at(),
    });
    change
}

/// A new subscription for `record`'s order, keeping the terms it was sold at.
fn activate_new(
    r: &Received,
    record: &OrderRecord,
    activation: &Activation<'_>,
    terms: SoldTerms,
    id: SubscriptionId,
) -> (Change, Subscription) {
    let created = Subscription::start(
        id,
        record.order.user_id().clone(),
        record.order.plan().plan_id.clone(),
        r.provider,
        activation.provider_subscription_id.to_owned(),
        activation.period,
        terms,
        activation.occurred_at,
    );
    let mut change = r.change(EventOutcome::Applied, None);
    change.command.subscription = Some(SubscriptionChange::Create(
        created.clone(),
        Some(record.order.id().clone()),
    ));
    (change, created)
}

/// A verified payment that does not match its order: recorded on the order and in the inbox;
/// the order keeps its status, nothing is granted.
fn mismatch_on_order(r: &Received, record: &OrderRecord, mismatch: &SoldTermsMismatch) -> Decision {
    let detail = mismatch.to_string();
    r.change(EventOutcome::Mismatch, Some(detail.clone()))
        .order(record, record.order.status().clone(), Some(detail))
        .apply()
}

/// The inbox outcome of a renewal that grants nothing.
fn refused_renewal(refusal: &RenewalRefusal) -> Decision {
    let outcome = match refusal {
        RenewalRefusal::Mismatch(_) => EventOutcome::Mismatch,
        RenewalRefusal::AlreadyPaid => EventOutcome::DuplicateState,
        RenewalRefusal::Overlaps { .. } => EventOutcome::Stale,
    };
    Decision::Record(outcome, Some(refusal.to_string()))
}

/// The subscription and lifecycle change a payment-less subscription event stands for.
fn lifecycle_change(event: &PaymentEvent) -> Option<(&str, SubscriptionEvent, Timestamp)> {
    let (id, change, at) = match event {
        PaymentEvent::SubscriptionPastDue {
            provider_subscription_id,
            occurred_at,
        } => (
            provider_subscription_id,
            SubscriptionEvent::PastDue,
            occurred_at,
        ),
        PaymentEvent::SubscriptionCancelScheduled {
            provider_subscription_id,
            occurred_at,
        } => (
            provider_subscription_id,
            SubscriptionEvent::CancelScheduled,
            occurred_at,
        ),
        PaymentEvent::SubscriptionCancelWithdrawn {
            provider_subscription_id,
            occurred_at,
        } => (
            provider_subscription_id,
            SubscriptionEvent::CancelWithdrawn,
            occurred_at,
        ),
        PaymentEvent::SubscriptionCanceled {
            provider_subscription_id,
            occurred_at,
        } => (
            provider_subscription_id,
            SubscriptionEvent::Canceled,
            occurred_at,
        ),
        PaymentEvent::SubscriptionExpired {
            provider_subscription_id,
            occurred_at,
        } => (
            provider_subscription_id,
            SubscriptionEvent::Expired,
            occurred_at,
        ),
        _ => return None,
    };
    Some((id.as_str(), change, *at))
}

fn unknown_subscription(provider_subscription_id: &str) -> Decision {
    Decision::Record(
        EventOutcome::UnknownSubscription,
        Some(provider_subscription_id.chars().take(128).collect()),
    )
}

fn unknown_order() -> Decision {
    Decision::Record(EventOutcome::UnknownOrder, None)
}

fn period_grant(
    subscription: &Subscription,
    period: BillingPeriod,
    amount: Credits,
    now: Timestamp,
) -> GrantCommand {
    GrantCommand {
        user_id: subscription.user_id().clone(),
        amount,
        source: GrantSource::SubscriptionPeriod(subscription.id().clone(), period),
        // A subscription's credits are that period's allowance.
        expires_at: Some(period.end()),
        now,
    }
}

/// A payment failed: the order fails, if it still can (`domain::decide_failure`).
fn decide_failed(r: &Received, record: &OrderRecord, reason: &str) -> Decision {
    match decide_failure(&record.order, reason) {
        FailureDecision::Failed(next) => r
            .change(EventOutcome::Applied, None)
            .order(record, next.status().clone(), None)
            .apply(),
        FailureDecision::Ignored(why) => Decision::Record(EventOutcome::Ignored, Some(why)),
    }
}

/// A payment succeeded (`domain::decide_payment`): the command that marks the order paid,
/// grants its credits once, and takes back what refunds `kept` before the payment add up to.
fn decide_paid(
    r: &Received,
    record: &OrderRecord,
    amount: Money,
    occurred_at: Timestamp,
    kept: &[KeptRefund],
) -> Decision {
    let order = &record.order;
    let on_order = |outcome, detail: String| {
        r.change(outcome, Some(detail.clone()))
            .order(record, order.status().clone(), Some(detail))
            .apply()
    };
    let (next, grant, clawback) = match decide_payment(order, amount, occurred_at, kept) {
        PaymentDecision::Mismatch(detail) => return on_order(EventOutcome::Mismatch, detail),
        PaymentDecision::Late(detail) => return on_order(EventOutcome::LatePayment, detail),
        PaymentDecision::AlreadyPaid => {
            return Decision::Record(EventOutcome::DuplicateState, None);
        }
        PaymentDecision::Paid {
            order,
            grant,
            clawback,
        } => (order, grant, clawback),
    };
    let source = GrantSource::Order(order.id().clone());
    let mut change = r.change(EventOutcome::Applied, None);
    change.command.grant = grant.map(|g| GrantCommand {
        user_id: order.user_id().clone(),
        amount: g.credits,
        source: source.clone(),
        expires_at: g.expires_at,
        now: r.now,
    });
    change.command.clawback = clawback.map(|wanted| ClawbackCommand {
        user_id: order.user_id().clone(),
        source,
        wanted,
        now: r.now,
    });
    if let Some(next) = next {
        change = change.order(record, next.status().clone(), None);
    }
    change.apply()
}
