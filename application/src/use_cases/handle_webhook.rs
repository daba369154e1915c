//! Handle a provider webhook: verify, then apply each normalized event in one database
//! transaction (CORRECTNESS.md invariants 3 to 7).
//!
//! The pipeline: raw bytes and headers → the gateway's verification (a refused webhook changes
//! nothing) → for each event, read the order or subscription, decide with the domain state
//! machines, and hand the store one [`PaymentEventCommand`]: inbox row, order transition,
//! subscription change, grant, clawback. A duplicate inbox row makes it a no-op; a concurrent
//! change of the same order or subscription makes the store refuse it, and the event is
//! re-read and re-decided, a bounded number of times.

use domain::ledger::refund_share;
use domain::{
    BillingPeriod, Duration, Money, Order, OrderStatus, PlanType, ProviderId, RenewalIntent,
    RenewalRefusal, SoldTerms, SoldTermsMismatch, Subscription, SubscriptionEvent, SubscriptionId,
    SubscriptionStatus, Timestamp, Transition, check_activation,
};

use super::InfraError;
use crate::ports::{
    AckFor, ClawbackCommand, Clock, GrantCommand, GrantSource, IdGenerator, InboxEntry,
    LedgerEffect, OrderChange, OrderLocator, OrderRecord, PaymentEvent, PaymentEventCommand,
    PaymentEventOutcome, SecretHasher, Store, StoreError, SubscriptionChange, WebhookAck,
    WebhookError, WebhookRequest,
};
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
        self.outcomes.push(result.outcome);
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
#[derive(Debug, Default)]
struct EventResult {
    outcome: String,
    order_status: Option<&'static str>,
    granted: domain::Credits,
    clawed_back: domain::Credits,
}

impl EventResult {
    fn of(command: &PaymentEventCommand, outcome: PaymentEventOutcome) -> Self {
        let PaymentEventOutcome::Applied { ledger } = outcome else {
            return Self {
                outcome: "duplicate".into(),
                ..Self::default()
            };
        };
        let mut result = Self {
            outcome: command.inbox.outcome.clone(),
            order_status: command
                .order
                .as_ref()
                .filter(|o| o.status.code() != o.expected)
                .map(|o| o.status.code()),
            ..Self::default()
        };
        for effect in ledger {
            if let LedgerEffect::Written(tx) = effect {
                let magnitude = tx.amount.magnitude();
                if tx.amount.is_decrease() {
                    result.clawed_back = result
                        .clawed_back
                        .checked_add(magnitude)
                        .unwrap_or(result.clawed_back);
                } else {
                    result.granted = result
                        .granted
                        .checked_add(magnitude)
                        .unwrap_or(result.granted);
                }
            }
        }
        result
    }
}

/// What to do with one event.
enum Decision {
    /// Apply this command.
    Apply(PaymentEventCommand),
    /// Record the event with this outcome; change nothing else.
    Record(&'static str, Option<String>),
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
    fn entry(&self, outcome: &str, detail: Option<String>) -> InboxEntry {
        InboxEntry {
            provider: self.provider,
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            payload: self.payload.clone(),
            outcome: outcome.to_owned(),
            detail,
            received_at: self.now,
        }
    }

    fn command(&self, outcome: &str, detail: Option<String>) -> PaymentEventCommand {
        PaymentEventCommand {
            inbox: self.entry(outcome, detail),
            order: None,
            subscription: None,
            grant: None,
            clawback: None,
        }
    }
}

fn payload_text(body: &[u8]) -> String {
    let end = body.len().min(MAX_STORED_PAYLOAD_BYTES);
    String::from_utf8_lossy(&body[..end]).into_owned()
}

/// When credits granted at `from` by a plan of `duration` expire.
fn credits_expiry(duration: Option<Duration>, from: Timestamp) -> Option<Timestamp> {
    match duration {
        Some(Duration::Months(m)) => Some(from.plus_calendar_months(m.get())),
        Some(Duration::Lifetime) | None => None,
    }
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
        if verified.events.is_empty() {
            let entry = received(verified.event_id.clone())
                .entry("ignored", Some("event type not handled".into()));
            let fresh = self.store.record_event(&entry).await?;
            handled
                .outcomes
                .push(if fresh { "ignored" } else { "duplicate" }.to_owned());
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

    /// Decide and apply one event, re-deciding after a concurrent change.
    async fn apply_event(
        &self,
        received: &Received,
        event: &PaymentEvent,
    ) -> Result<EventResult, HandleWebhookError> {
        let attempts = self.config.webhook_conflict_retries.max(1);
        for attempt in 1..=attempts {
            let command = match self.decide(received, event).await? {
                Decision::Record(outcome, detail) => {
                    let fresh = self
                        .store
                        .record_event(&received.entry(outcome, detail))
                        .await?;
                    let outcome = if fresh { outcome } else { "duplicate" };
                    return Ok(EventResult {
                        outcome: outcome.to_owned(),
                        ..EventResult::default()
                    });
                }
                Decision::Apply(command) => command,
            };
            match self.store.apply_payment_event(&command).await {
                Ok(outcome) => return Ok(EventResult::of(&command, outcome)),
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
            } => {
                let Some(record) = self.locate(r.provider, order).await? else {
                    return Ok(unknown_order());
                };
                Ok(decide_paid(r, &record, *amount, *occurred_at))
            }
            PaymentEvent::PaymentFailed { order, reason, .. } => {
                let Some(record) = self.locate(r.provider, order).await? else {
                    return Ok(unknown_order());
                };
                Ok(decide_failed(r, &record, reason))
            }
            PaymentEvent::SubscriptionActivated {
                order,
                provider_subscription_id,
                period,
                amount,
                occurred_at,
                ..
            } => {
                let activation = Activation {
                    order,
                    provider_subscription_id,
                    period: *period,
                    amount: *amount,
                    occurred_at: *occurred_at,
                };
                self.decide_activation(r, &activation).await
            }
            PaymentEvent::SubscriptionRenewed {
                provider_subscription_id,
                period,
                amount,
                occurred_at,
                ..
            } => {
                self.decide_renewal(r, provider_subscription_id, *period, *amount, *occurred_at)
                    .await
            }
            PaymentEvent::SubscriptionPastDue { .. }
            | PaymentEvent::SubscriptionCancelScheduled { .. }
            | PaymentEvent::SubscriptionCancelWithdrawn { .. }
            | PaymentEvent::SubscriptionCanceled { .. }
            | PaymentEvent::SubscriptionExpired { .. } => {
                let Some((id, change, occurred_at)) = lifecycle_change(event) else {
                    return Ok(Decision::Record("ignored", None));
                };
                self.decide_lifecycle(r, id, change, occurred_at).await
            }
            PaymentEvent::Refunded {
                charge: crate::ports::RefundedCharge::Order(order),
                refund: crate::ports::RefundReport::Total(total_refunded),
                ..
            } => {
                let Some(record) = self.locate(r.provider, order).await? else {
                    return Ok(unknown_order());
                };
                Ok(decide_refund(r, &record, *total_refunded))
            }
            PaymentEvent::Refunded { .. } => Ok(Decision::Record("ignored", None)),
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
        Ok(found.filter(|r| r.order.provider == provider))
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
        let terms = match check_activation(&record.order.plan, activation.amount) {
            Ok(terms) => terms,
            Err(mismatch) => return Ok(mismatch_on_order(r, &record.order, &mismatch)),
        };
        let existing = self
            .store
            .find_subscription_by_provider_id(r.provider, activation.provider_subscription_id)
            .await?;
        let (mut command, subscription) = match existing {
            Some(current) => match activate_existing(&current, activation) {
                Ok(next) => (update(r, &current, &next), next),
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
            command = with_order(command, &record.order, order.status, None);
        }
        // Credits come from what the subscription was sold at (a subscription stored before
        // terms were kept takes them from this order, which has just been checked).
        let sold = subscription.sold_terms.unwrap_or(terms);
        command.grant = sold
            .credits_per_period()
            .map(|amount| period_grant(&subscription, activation.period, amount, r.now));
        Ok(Decision::Apply(command))
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
            order.status,
            OrderStatus::Pending | OrderStatus::Paid { .. }
        ) {
            let detail = format!("subscription activation for a {} order", order.status);
            return Ok(Some(Decision::Apply(with_order(
                r.command("late_payment", Some(detail.clone())),
                order,
                order.status.clone(),
                Some(detail),
            ))));
        }
        if let Some(started) = self.store.find_subscription_by_order(&order.id).await? {
            let detail = format!(
                "order already started subscription {}",
                started
                    .provider_subscription_id
                    .chars()
                    .take(128)
                    .collect::<String>()
            );
            return Ok(Some(Decision::Record("mismatch", Some(detail))));
        }
        Ok(None)
    }

    /// A renewal: it must pay what was sold for the period after the one already paid; its
    /// credits are the sold terms', never a plan's as edited since.
    async fn decide_renewal(
        &self,
        r: &Received,
        provider_subscription_id: &str,
        period: BillingPeriod,
        amount: Money,
        occurred_at: Timestamp,
    ) -> Result<Decision, HandleWebhookError> {
        let Some(current) = self.find_subscription(r, provider_subscription_id).await? else {
            return Ok(unknown_subscription(provider_subscription_id));
        };
        let tolerance_ms = self.config.renewal_clock_tolerance_ms;
        if let Err(refusal) = current.check_renewal(amount, period, tolerance_ms) {
            return Ok(refused_renewal(&refusal));
        }
        let mut next = current.clone();
        match next.apply(SubscriptionEvent::Renewed(period), occurred_at) {
            Ok(Transition::Applied) => {}
            Ok(Transition::AlreadyDone) => return Ok(Decision::Record("duplicate_state", None)),
            Err(e) => return Ok(Decision::Record("stale", Some(e.to_string()))),
        }
        let mut command = update(r, &current, &next);
        command.grant = current
            .sold_terms
            .and_then(|terms| terms.credits_per_period())
            .map(|amount| period_grant(&next, period, amount, r.now));
        Ok(Decision::Apply(command))
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
            Ok(Transition::AlreadyDone) => return Ok(Decision::Record("duplicate_state", None)),
            Err(e) => return Ok(Decision::Record("stale", Some(e.to_string()))),
        }
        Ok(Decision::Apply(update(r, &current, &next)))
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

/// What an activation event says.
struct Activation<'a> {
    order: &'a OrderLocator,
    provider_subscription_id: &'a str,
    period: BillingPeriod,
    amount: Option<Money>,
    occurred_at: Timestamp,
}

/// An activation for a subscription already stored (the same payment told twice, or the
/// provider's second event for it): the subscription moved along, or the outcome to record.
fn activate_existing(
    current: &Subscription,
    activation: &Activation<'_>,
) -> Result<Subscription, (&'static str, Option<String>)> {
    let mut next = current.clone();
    match next.apply(
        SubscriptionEvent::Activated(activation.period),
        activation.occurred_at,
    ) {
        Ok(Transition::Applied) => Ok(next),
        // Already active for this period: granting again could only duplicate.
        Ok(Transition::AlreadyDone) => Err(("duplicate_state", None)),
        Err(e) => Err(("stale", Some(e.to_string()))),
    }
}

/// The command that replaces `current` with `next` (compare-and-set on its last event).
fn update(r: &Received, current: &Subscription, next: &Subscription) -> PaymentEventCommand {
    let mut command = r.command("applied", None);
    command.subscription = Some(SubscriptionChange::Update {
        subscription: next.clone(),
        expected_last_event_at: current.last_event_at,
    });
    command
}

/// A new subscription for `record`'s order, keeping the terms it was sold at.
fn activate_new(
    r: &Received,
    record: &OrderRecord,
    activation: &Activation<'_>,
    terms: SoldTerms,
    id: SubscriptionId,
) -> (PaymentEventCommand, Subscription) {
    let created = Subscription {
        id,
        user_id: record.order.user_id.clone(),
        plan_id: record.order.plan.plan_id.clone(),
        provider: r.provider,
        provider_subscription_id: activation.provider_subscription_id.to_owned(),
        status: SubscriptionStatus::Active,
        current_period: activation.period,
        renewal: RenewalIntent::Renews,
        last_event_at: activation.occurred_at,
        sold_terms: Some(terms),
    };
    let mut command = r.command("applied", None);
    command.subscription = Some(SubscriptionChange::Create(
        created.clone(),
        Some(record.order.id.clone()),
    ));
    (command, created)
}

/// A verified payment that does not match its order: recorded on the order and in the inbox;
/// the order keeps its status, nothing is granted.
fn mismatch_on_order(r: &Received, order: &Order, mismatch: &SoldTermsMismatch) -> Decision {
    let detail = mismatch.to_string();
    Decision::Apply(with_order(
        r.command("mismatch", Some(detail.clone())),
        order,
        order.status.clone(),
        Some(detail),
    ))
}

/// The inbox outcome of a renewal that grants nothing.
fn refused_renewal(refusal: &RenewalRefusal) -> Decision {
    let outcome = match refusal {
        RenewalRefusal::Mismatch(_) => "mismatch",
        RenewalRefusal::AlreadyPaid => "duplicate_state",
        RenewalRefusal::Overlaps { .. } => "stale",
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
        "unknown_subscription",
        Some(provider_subscription_id.chars().take(128).collect()),
    )
}

fn unknown_order() -> Decision {
    Decision::Record("unknown_order", None)
}

fn with_order(
    mut command: PaymentEventCommand,
    before: &Order,
    status: OrderStatus,
    mismatch: Option<String>,
) -> PaymentEventCommand {
    command.order = Some(OrderChange {
        order_id: before.id.clone(),
        expected: before.status.code(),
        status,
        mismatch,
    });
    command
}

fn period_grant(
    subscription: &Subscription,
    period: BillingPeriod,
    amount: domain::Credits,
    now: Timestamp,
) -> GrantCommand {
    GrantCommand {
        user_id: subscription.user_id.clone(),
        amount,
        source: GrantSource::SubscriptionPeriod(subscription.id.clone(), period),
        // A subscription's credits are that period's allowance.
        expires_at: Some(period.end()),
        now,
    }
}

/// A payment failed: the order fails, if it still can.
fn decide_failed(r: &Received, record: &OrderRecord, reason: &str) -> Decision {
    let mut order = record.order.clone();
    match order.mark_failed(reason.to_owned()) {
        Ok(Transition::Applied) => Decision::Apply(with_order(
            r.command("applied", None),
            &record.order,
            order.status,
            None,
        )),
        _ => Decision::Record("ignored", Some(format!("order is {}", record.order.status))),
    }
}

/// A payment succeeded: check it against the order, mark it paid, grant credits once.
fn decide_paid(
    r: &Received,
    record: &OrderRecord,
    amount: Money,
    occurred_at: Timestamp,
) -> Decision {
    let order = &record.order;
    if amount != order.plan.price {
        let detail = format!("paid {amount}, order price {}", order.plan.price);
        let command = with_order(
            r.command("mismatch", Some(detail.clone())),
            order,
            order.status.clone(),
            Some(detail),
        );
        return Decision::Apply(command);
    }
    let mut next = order.clone();
    match next.mark_paid(occurred_at) {
        Ok(Transition::Applied) => {}
        Ok(Transition::AlreadyDone) if order.plan.plan_type != PlanType::Credits => {
            return Decision::Record("duplicate_state", None);
        }
        Ok(Transition::AlreadyDone) => {}
        Err(_) => {
            let detail = format!("payment received for a {} order", order.status);
            let command = with_order(
                r.command("late_payment", Some(detail.clone())),
                order,
                order.status.clone(),
                Some(detail),
            );
            return Decision::Apply(command);
        }
    }
    let mut command = r.command("applied", None);
    if next.status != order.status {
        command = with_order(command, order, next.status.clone(), None);
    }
    if order.plan.plan_type == PlanType::Credits {
        command.grant = order.plan.credits.map(|credits| GrantCommand {
            user_id: order.user_id.clone(),
            amount: credits,
            source: GrantSource::Order(order.id.clone()),
            expires_at: credits_expiry(order.plan.duration, occurred_at),
            now: r.now,
        });
    }
    Decision::Apply(command)
}

/// A refund: move the order along the refund path and take back the refunded share of its
/// credits (never more than is unspent; the store records the shortfall).
fn decide_refund(r: &Received, record: &OrderRecord, total_refunded: Money) -> Decision {
    let order = &record.order;
    let already = match &order.status {
        OrderStatus::PartiallyRefunded { refunded, .. } => refunded.amount_minor(),
        _ => 0,
    };
    let mut next = order.clone();
    match next.refund(total_refunded) {
        Ok(Transition::Applied) => {}
        Ok(Transition::AlreadyDone) => return Decision::Record("duplicate_state", None),
        Err(e) => return Decision::Record("refund_refused", Some(e.to_string())),
    }
    let mut command = with_order(r.command("applied", None), order, next.status.clone(), None);
    if let (PlanType::Credits, Some(credits)) = (order.plan.plan_type, order.plan.credits) {
        let delta = total_refunded.amount_minor() - already;
        command.clawback = Some(ClawbackCommand {
            user_id: order.user_id.clone(),
            order_id: order.id.clone(),
            wanted: refund_share(credits, delta, order.plan.price.amount_minor()),
            now: r.now,
        });
    }
    Decision::Apply(command)
}
