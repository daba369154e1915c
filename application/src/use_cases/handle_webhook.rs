//! Handle a provider webhook: verify, then apply each normalized event in one database
//! transaction (CORRECTNESS.md invariants 3 to 7).
//!
//! The pipeline: raw bytes and headers → the gateway's verification (a refused webhook changes
//! nothing) → for each event, read the order or subscription, decide with the domain state
//! machines, and hand the store one [`PaymentEventCommand`]: inbox row, order transition,
//! subscription change, grant, clawback. A duplicate inbox row makes it a no-op; a concurrent
//! change of the same order or subscription makes the store refuse it, and the event is
//! re-read and re-decided, a bounded number of times.

use std::sync::Arc;

use domain::{
    ActivationDecision, ActivationFacts, ActivationTarget, BillingPeriod, EventOutcome,
    FailureDecision, KeptRefund, LifecycleDecision, Money, Order, OrderStatus, OrderStatusKind,
    PaymentDecision, PeriodCharge, PlanType, PriceChange, ProviderId, RenewalDecision,
    RenewalFacts, SoldTerms, SoldTermsMismatch, Subscription, SubscriptionEvent, SubscriptionId,
    Timestamp, UserId, decide_activation, decide_failure, decide_lifecycle, decide_payment,
    decide_renewal,
};

use super::{InfraError, noted};
use crate::host_events;
use crate::ports::{
    AckFor, ChargeChange, ClawbackCommand, Clock, EventAudit, GatewayError, GrantCommand,
    GrantSource, IdGenerator, InboxEntry, LedgerEffect, MismatchNotice, OrderChange, OrderLocator,
    OrderRecord, PaymentEvent, PaymentEventCommand, PaymentEventOutcome, PaymentStatus,
    RefundTarget, SecretHasher, Store, StoreError, SubscriptionChange, SubscriptionCharge,
    VerifiedWebhook, WebhookAck, WebhookError, WebhookRequest, WebhookResult,
};

mod change_invoices;
mod plan_changes;
mod refunds;
use crate::ports::Writes;
use crate::service::Service;

/// How many times a payment event's write is worked out again when its user's entitlements
/// moved since they were read.
const ENTITLEMENT_ATTEMPTS: u32 = 5;

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
    /// The states orders moved to.
    pub order_statuses: Vec<OrderStatusKind>,
    /// What each event came to (counted by [`Service::handle_webhook`]).
    results: Vec<EventOutcome>,
    /// Credits granted by these events.
    pub credits_granted: domain::Credits,
    /// Credits taken back by refunds.
    pub credits_clawed_back: domain::Credits,
}

impl WebhookHandled {
    /// What each event came to: `applied`, `duplicate`, `ignored`, `stale`, `mismatch`, …
    #[must_use]
    pub fn outcomes(&self) -> &[EventOutcome] {
        &self.results
    }

    fn add(&mut self, result: EventResult) {
        self.results.push(result.outcome);
        self.order_statuses
            .extend(result.order_status.as_ref().map(OrderStatus::kind));
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
    order_status: Option<OrderStatus>,
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
        result.order_status = change.moved_to.clone();
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
    /// Record the event with this outcome, naming the user whose order or subscription it is
    /// about (told with a `payment.mismatch`); change nothing else.
    RecordFor(EventOutcome, Option<String>, UserId),
}

/// A command under construction, with the outcome it stands for.
struct Change {
    outcome: EventOutcome,
    command: PaymentEventCommand,
    /// The status the order moves to, when it moves.
    moved_to: Option<OrderStatus>,
}

impl Change {
    /// Replace `before`'s order by `after` (or touch it, when they are the same), if it still
    /// has the version read.
    fn order(mut self, before: &OrderRecord, after: &Order, mismatch: Option<String>) -> Self {
        if after.status().kind() != before.order.status().kind() {
            self.moved_to = Some(after.status().clone());
        }
        self.command.order = Some(OrderChange {
            before: before.order.clone(),
            expected_version: before.version,
            after: after.clone(),
            mismatch,
        });
        self
    }

    fn apply(self) -> Decision {
        Decision::Apply(self)
    }
}

/// Builds the audit entry of an administrator's action that an event's write carries (a
/// replay, a refund Tally applies itself) from what the event came to: its outcome, and the
/// status its order moves to (`None` when the order does not move).
pub(crate) type EventAuditFor =
    dyn Fn(EventOutcome, Option<&OrderStatus>) -> EventAudit + Send + Sync;

/// The inbox facts shared by the decisions of one event.
struct Received {
    provider: ProviderId,
    event_id: String,
    event_type: String,
    payload: String,
    now: Timestamp,
    /// The administrator's action the event's write carries, if any (issue 18).
    audit: Option<Arc<EventAuditFor>>,
}

impl Received {
    fn entry(&self, outcome: EventOutcome, detail: Option<String>) -> InboxEntry {
        InboxEntry {
            provider: self.provider,
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            payload: self.payload.clone(),
            outcome,
            detail,
            received_at: self.now,
            user_id: None,
        }
    }

    fn change(&self, outcome: EventOutcome, detail: Option<String>) -> Change {
        Change {
            outcome,
            command: PaymentEventCommand {
                top_up: None,
                bonus: None,
                inbox: self.entry(outcome, detail),
                order: None,
                subscription: None,
                grant: None,
                clawbacks: Vec::new(),
                charge: None,
                refund: None,
                told: Vec::new(),
                entitlements: None,
                audit: None,
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
    /// Handle a webhook delivery addressed to `provider` (parsed once, by the edge; `None` when
    /// the address names no provider), counting how each event ended
    /// ([`crate::ports::Metrics::webhook`]).
    ///
    /// # Errors
    /// See [`HandleWebhookError`].
    #[tracing::instrument(
        skip_all,
        fields(
            provider = known.map_or("unknown", ProviderId::as_str),
            event_id = tracing::field::Empty,
        )
    )]
    pub async fn handle_webhook(
        &self,
        known: Option<ProviderId>,
        request: WebhookRequest,
    ) -> Result<WebhookHandled, HandleWebhookError> {
        let handled = self.verify_and_apply(known, request).await;
        let failed = |result| self.metrics.webhook(known, result);
        match &handled {
            Ok(handled) => {
                for outcome in &handled.results {
                    self.metrics.webhook(known, WebhookResult::Event(*outcome));
                }
            }
            Err(HandleWebhookError::Rejected { .. }) => failed(WebhookResult::Rejected),
            Err(HandleWebhookError::UnknownProvider) => failed(WebhookResult::UnknownProvider),
            Err(HandleWebhookError::ProviderUnavailable(_)) => {
                failed(WebhookResult::ProviderUnavailable);
            }
            Err(HandleWebhookError::Infra(_)) => failed(WebhookResult::Error),
        }
        handled
    }

    async fn verify_and_apply(
        &self,
        provider: Option<ProviderId>,
        request: WebhookRequest,
    ) -> Result<WebhookHandled, HandleWebhookError> {
        let provider = provider.ok_or(HandleWebhookError::UnknownProvider)?;
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
        let base = verified.event_id.clone();
        // The event's id is known only now, after the signature check and parsing.
        tracing::Span::current().record("event_id", base.as_str());
        // One inbox row per event; a webhook carrying several events gets suffixed ids.
        let event_id = |index: usize| {
            if index == 0 {
                base.clone()
            } else {
                format!("{base}#{index}")
            }
        };
        let ack = gateway.webhook_ack(&AckFor::Accepted);
        let payload = payload_text(&request.body);
        self.apply_verified(provider, &verified, payload, ack, &event_id, None)
            .await
    }

    /// Record and apply a verified webhook (a live delivery, or a recorded one read again for
    /// a replay), naming the inbox row of its `index`-th event `event_id(index)`.
    pub(super) async fn apply_verified(
        &self,
        provider: ProviderId,
        verified: &VerifiedWebhook,
        payload: String,
        ack: WebhookAck,
        event_id: &(dyn Fn(usize) -> String + Sync),
        audit: Option<Arc<EventAuditFor>>,
    ) -> Result<WebhookHandled, HandleWebhookError> {
        let now = self.clock.now();
        let received = |event_id: String| Received {
            provider,
            event_id,
            event_type: verified.event_type.clone(),
            payload: payload.clone(),
            now,
            audit: audit.clone(),
        };
        let mut handled = WebhookHandled {
            ack,
            order_statuses: Vec::new(),
            results: Vec::new(),
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
            let received = received(event_id(0));
            handled.add(self.record_only(&received, outcome, Some(detail)).await?);
            return Ok(handled);
        }
        for (index, event) in verified.events.iter().enumerate() {
            let result = self.apply_event(&received(event_id(index)), event).await?;
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
        self.apply_reconciled_audited(provider, event_id, event, None)
            .await
    }

    /// [`Self::apply_reconciled`], carrying an administrator's action whose entry commits with
    /// the event's write (`audit`).
    pub(super) async fn apply_reconciled_audited(
        &self,
        provider: ProviderId,
        event_id: String,
        event: &PaymentEvent,
        audit: Option<Arc<EventAuditFor>>,
    ) -> Result<(), HandleWebhookError> {
        let received = Received {
            provider,
            event_id,
            event_type: "tally.reconcile".into(),
            payload: String::new(),
            now: self.clock.now(),
            audit,
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
        let result = match event {
            PaymentEvent::PaymentApproved { order, amount, .. } => {
                self.apply_approval(received, order, *amount).await
            }
            _ => self.apply_decided(received, event).await,
        }?;
        // Counted here, so that what the reconciler applies counts as what webhooks do.
        if let Some(status) = &result.order_status {
            self.metrics.order_moved(status);
        }
        if !result.granted.is_zero() {
            self.metrics.credits_granted(result.granted);
        }
        if !result.clawed_back.is_zero() {
            self.metrics.credits_clawed_back(result.clawed_back);
        }
        Ok(result)
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
            let user = Some(record.order.user_id().clone());
            return self.record_for(received, outcome, Some(detail), user).await;
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
        self.record_for(received, outcome, detail, None).await
    }

    /// [`Self::record_only`], naming the user the event is about when known.
    async fn record_for(
        &self,
        received: &Received,
        outcome: EventOutcome,
        detail: Option<String>,
        user: Option<UserId>,
    ) -> Result<EventResult, HandleWebhookError> {
        let mut entry = received.entry(outcome, detail);
        entry.user_id = user;
        let audit = received.audit.as_ref().map(|audit| audit(outcome, None));
        let fresh = self.write_recorded_event(&entry, audit).await?;
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
                Decision::RecordFor(outcome, detail, user) => {
                    return self.record_for(received, outcome, detail, Some(user)).await;
                }
                Decision::Apply(change) => change,
            };
            let change = self.with_top_up(change, received.now).await?;
            match self.store_change(received, &change).await {
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

    /// Apply `change`, with the entry of the administrator's action `received` carries.
    async fn store_change(
        &self,
        received: &Received,
        change: &Change,
    ) -> Result<PaymentEventOutcome, StoreError> {
        let audit =
            (received.audit.as_ref()).map(|audit| audit(change.outcome, change.moved_to.as_ref()));
        self.write_payment_event(&change.command, audit).await
    }

    /// Write a payment event's `command` with what it tells, decided here from its states
    /// before and after ([`host_events::payment_event_told`]), the entitlements of the account
    /// whose access it moves (the buyer's personal account or a team), worked out with it, and
    /// the audit entry of the administrator's action that carries it, if any. A write refused
    /// because that account's entitlements moved since they were read (another change of its
    /// purchases) is worked out again, a bounded number of times; any other conflict is the
    /// caller's.
    pub(crate) async fn write_payment_event(
        &self,
        command: &PaymentEventCommand,
        audit: Option<EventAudit>,
    ) -> Result<PaymentEventOutcome, StoreError> {
        let mut command = command.clone();
        let notice = audit.as_ref().map_or(MismatchNotice::Tell, |a| a.mismatch);
        let grace = self.config.past_due_grace_ms;
        let moved = host_events::payment_event_told(&mut command, grace, notice);
        command.audit = audit.map(|a| a.entry);
        let Some(account) = moved else {
            return noted(
                &*self.metrics,
                self.store.apply_payment_event(&command).await,
            );
        };
        let now = command.inbox.received_at;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let basis = self.store.entitlement_basis(&account).await?;
            let change = Some((command.order.as_ref(), command.subscription.as_ref()));
            let told = (self.entitlements_after(&account, basis, change, now).await)
                .map_err(InfraError::into_store_error)?;
            let expected = told.write.expected_version;
            command.entitlements = Some(told);
            match noted(
                &*self.metrics,
                self.store.apply_payment_event(&command).await,
            ) {
                Err(StoreError::Conflict(why)) if attempt < ENTITLEMENT_ATTEMPTS => {
                    let read = self.store.entitlement_basis(&account).await?;
                    if read.told.map(|t| t.version) == expected {
                        return Err(StoreError::Conflict(why));
                    }
                }
                other => return other,
            }
        }
    }

    /// Record `entry` alone, with what it tells and the audit entry of the administrator's
    /// action that carries it, if any; false when it was recorded before.
    pub(crate) async fn write_recorded_event(
        &self,
        entry: &InboxEntry,
        audit: Option<EventAudit>,
    ) -> Result<bool, StoreError> {
        let notice = audit.as_ref().map_or(MismatchNotice::Tell, |a| a.mismatch);
        let told = host_events::recorded_event_told(entry, notice);
        let audit = audit.map(|a| a.entry);
        self.store.record_event(entry, &told, audit.as_ref()).await
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
            PaymentEvent::SubscriptionPlanChanged { .. }
            | PaymentEvent::SubscriptionChangeInvoiced { .. }
            | PaymentEvent::SubscriptionPlanRevised { .. } => self.plan_event(r, event).await,
            PaymentEvent::PaymentApproved { .. } => Ok(approval_not_decided()),
            PaymentEvent::PaymentMethodSaved { .. } => self.decide_method_saved(r, event).await,
        }
    }

    /// A payment method the provider saved on an order's payment (see [`method_saved`]).
    async fn decide_method_saved(
        &self,
        r: &Received,
        event: &PaymentEvent,
    ) -> Result<Decision, HandleWebhookError> {
        let PaymentEvent::PaymentMethodSaved { order, method, .. } = event else {
            return Ok(Decision::Record(EventOutcome::Ignored, None));
        };
        let record = self.locate(r.provider, order).await?;
        Ok(record.map_or_else(unknown_order, |o| method_saved(r, &o, method)))
    }

    /// `change` with what its order's move does to the automatic top-up that order pays, if
    /// any, in the same write.
    async fn with_top_up(
        &self,
        mut change: Change,
        now: Timestamp,
    ) -> Result<Change, HandleWebhookError> {
        let Some(order) = &change.command.order else {
            return Ok(change);
        };
        if change.command.top_up.is_none()
            && let Some((write, told)) = self.top_up_effects(order, now).await?
        {
            change.command.top_up = Some(crate::ports::TopUpChange { write, told });
        }
        Ok(change)
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

    /// A subscription's first payment (`domain::decide_activation`): load the order, the
    /// subscription and the refunds kept against the first charge; the domain decides.
    async fn decide_activation(
        &self,
        r: &Received,
        activation: &Activation<'_>,
    ) -> Result<Decision, HandleWebhookError> {
        let Some(record) = self.locate(r.provider, activation.order).await? else {
            return Ok(unknown_order());
        };
        let order = &record.order;
        let facts = ActivationFacts {
            provider_subscription_id: activation.provider_subscription_id,
            period: activation.period,
            amount: activation.amount,
            names_charge: activation.charge_ref.is_some(),
            occurred_at: activation.occurred_at,
        };
        let existing = self
            .find_subscription(r, activation.provider_subscription_id)
            .await?;
        let started_by_order = match &existing {
            Some(_) => None,
            None => self.store.find_subscription_by_order(order.id()).await?,
        };
        let target = match &existing {
            Some(current) => ActivationTarget::Existing(current),
            None => ActivationTarget::New {
                new_id: SubscriptionId::new(self.ids.new_id("sub"))
                    .map_err(|e| InfraError::Unexpected(e.into()))?,
                started_by_order: started_by_order.as_ref(),
            },
        };
        let kept = self.kept_for_charge(r, activation.charge_ref).await?;
        let decision = decide_activation(order, target, &facts, &kept);
        Ok(activation_change(
            r,
            &record,
            existing.as_ref(),
            decision,
            activation.charge_ref,
        ))
    }

    /// A renewal (`domain::decide_renewal`): load the subscription and the refunds kept against
    /// the charge, and the plan of ours priced at what it paid when the domain asks for it.
    async fn decide_renewal(
        &self,
        r: &Received,
        renewal: &Renewal<'_>,
    ) -> Result<Decision, HandleWebhookError> {
        let id = renewal.provider_subscription_id;
        let Some(current) = self.find_subscription(r, id).await? else {
            return Ok(unknown_subscription(id));
        };
        let facts = RenewalFacts {
            period: renewal.period,
            amount: renewal.amount,
            occurred_at: renewal.occurred_at,
        };
        let tolerance_ms = self.config.renewal_clock_tolerance_ms;
        let kept = self.kept_for_charge(r, renewal.charge_ref).await?;
        let mut price_change = PriceChange::NotLookedUp;
        loop {
            let decision = decide_renewal(&current, &facts, tolerance_ms, &price_change, &kept);
            let RenewalDecision::LookUpPlanPricedAt(paid) = decision else {
                return Ok(renewal_change(r, &current, decision, renewal.charge_ref));
            };
            price_change = self
                .plan_priced(r.provider, paid)
                .await?
                .map_or(PriceChange::NoPlan, |(plan, terms)| {
                    PriceChange::To(plan, terms)
                });
        }
    }

    /// The refund reports kept against a provider charge that has not been recorded yet.
    async fn kept_for_charge(
        &self,
        r: &Received,
        charge_ref: Option<&str>,
    ) -> Result<Vec<KeptRefund>, StoreError> {
        let Some(charge_ref) = charge_ref else {
            return Ok(Vec::new());
        };
        let target = RefundTarget::Charge(charge_ref.to_owned());
        Ok(kept_amounts(
            &self.store.refunds_of(r.provider, &target).await?,
        ))
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

    /// A lifecycle event without a payment: past due, cancellation, expiry
    /// (`domain::decide_lifecycle`).
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
        Ok(match decide_lifecycle(&current, event, occurred_at) {
            LifecycleDecision::Update(next) => update(r, &current, &next).apply(),
            other @ LifecycleDecision::AlreadyDone => Decision::Record(other.outcome(), None),
            LifecycleDecision::Stale(why) => Decision::Record(EventOutcome::Stale, Some(why)),
        })
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

/// The amounts of refund reports, for the domain's sums.
fn kept_amounts(records: &[crate::ports::RefundRecord]) -> Vec<KeptRefund> {
    records.iter().map(|r| r.refund).collect()
}

/// The change that replaces `current` with `next` (compare-and-set on its last event).
fn update(r: &Received, current: &Subscription, next: &Subscription) -> Change {
    let mut change = r.change(EventOutcome::Applied, None);
    change.command.subscription = Some(SubscriptionChange::Update {
        before: current.clone(),
        subscription: next.clone(),
    });
    change
}

/// A verified payment that does not match its order: recorded on the order and in the inbox;
/// the order keeps its status, nothing is granted.
fn mismatch_on_order(r: &Received, record: &OrderRecord, detail: &str) -> Decision {
    on_order(r, record, EventOutcome::Mismatch, detail.to_owned())
}

/// An event recorded on its order (a mismatch, a late payment): the order keeps its status,
/// nothing is granted.
fn on_order(r: &Received, record: &OrderRecord, outcome: EventOutcome, detail: String) -> Decision {
    r.change(outcome, Some(detail.clone()))
        .order(record, &record.order, Some(detail))
        .apply()
}

/// The command an activation decision comes to.
fn activation_change(
    r: &Received,
    record: &OrderRecord,
    existing: Option<&Subscription>,
    decision: ActivationDecision,
    charge_ref: Option<&str>,
) -> Decision {
    let outcome = decision.outcome();
    let (subscription, created, order, charge) = match decision {
        ActivationDecision::Mismatch(m) => return mismatch_on_order(r, record, &m.to_string()),
        ActivationDecision::Late(detail) => return on_order(r, record, outcome, detail),
        ActivationDecision::OrderTaken(detail) | ActivationDecision::Stale(detail) => {
            return Decision::Record(outcome, Some(detail));
        }
        ActivationDecision::AlreadyActive { charge: None } => {
            return Decision::Record(outcome, None);
        }
        ActivationDecision::AlreadyActive {
            charge: Some(charge),
        } => {
            let Some(current) = existing else {
                return Decision::Record(outcome, None);
            };
            let mut change = r.change(outcome, None);
            let order_id = Some(record.order.id().clone());
            change.command.charge = Some(charge_record(r, current, &charge, charge_ref, order_id));
            return change.apply();
        }
        ActivationDecision::Activate {
            subscription,
            created,
            order,
            charge,
        } => (subscription, created, order, charge),
    };
    let mut change = match existing {
        Some(current) if !created => update(r, current, &subscription),
        _ => {
            let mut change = r.change(outcome, None);
            change.command.subscription = Some(SubscriptionChange::Create(
                subscription.clone(),
                Some(record.order.id().clone()),
            ));
            change
        }
    };
    if let Some(order) = order {
        change = change.order(record, &order, None);
    }
    let order_id = Some(record.order.id().clone());
    period_paid(r, change, &subscription, &charge, charge_ref, order_id).apply()
}

/// The command a renewal decision comes to.
fn renewal_change(
    r: &Received,
    current: &Subscription,
    decision: RenewalDecision,
    charge_ref: Option<&str>,
) -> Decision {
    let outcome = decision.outcome().unwrap_or(EventOutcome::Mismatch);
    match decision {
        RenewalDecision::Renew {
            subscription,
            moved,
            charge,
        } => {
            let mut change = update(r, current, &subscription);
            change.command.inbox.detail = moved;
            period_paid(r, change, &subscription, &charge, charge_ref, None).apply()
        }
        RenewalDecision::Refused(refusal) => Decision::RecordFor(
            outcome,
            Some(refusal.to_string()),
            current.user_id().clone(),
        ),
        RenewalDecision::Stale(why) => Decision::Record(outcome, Some(why)),
        RenewalDecision::NoTerms => Decision::RecordFor(
            outcome,
            Some(SoldTermsMismatch::Unknown.to_string()),
            current.user_id().clone(),
        ),
        RenewalDecision::AlreadyDone | RenewalDecision::LookUpPlanPricedAt(_) => {
            Decision::Record(outcome, None)
        }
    }
}

/// A paid period on `change`: its charge recorded, its credits granted (a subscription's
/// credits are that period's allowance, expiring with it) and what refunds kept before it
/// take back.
fn period_paid(
    r: &Received,
    mut change: Change,
    subscription: &Subscription,
    charge: &PeriodCharge,
    charge_ref: Option<&str>,
    order_id: Option<domain::OrderId>,
) -> Change {
    let source = GrantSource::SubscriptionPeriod(subscription.id().clone(), charge.period);
    change.command.grant = charge.credits.map(|amount| GrantCommand {
        account_id: subscription.account_id().clone(),
        amount,
        source: source.clone(),
        expires_at: Some(charge.period.end()),
        now: r.now,
    });
    change.command.clawbacks = Vec::from_iter(charge.clawback.map(|wanted| ClawbackCommand {
        account_id: subscription.account_id().clone(),
        source,
        wanted,
        now: r.now,
    }));
    change.command.charge = Some(charge_record(r, subscription, charge, charge_ref, order_id));
    change
}

/// The stored charge of a paid period.
fn charge_record(
    r: &Received,
    subscription: &Subscription,
    charge: &PeriodCharge,
    charge_ref: Option<&str>,
    order_id: Option<domain::OrderId>,
) -> ChargeChange {
    ChargeChange::Record(SubscriptionCharge {
        subscription_id: subscription.id().clone(),
        user_id: subscription.user_id().clone(),
        account_id: subscription.account_id().clone(),
        provider: r.provider,
        charge_ref: charge_ref.map(str::to_owned),
        order_id,
        period: charge.period,
        amount: charge.amount,
        credits: charge.credits,
        refunded: charge.refunded,
        paid_at: charge.paid_at,
        plan_change_at: None,
    })
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

/// A payment method the provider saved on `record`'s payment: kept for the order's account only
/// when the buyer consented on that order and it is paid.
fn method_saved(
    r: &Received,
    record: &OrderRecord,
    method: &crate::ports::SavedMethod,
) -> Decision {
    let order = &record.order;
    if !order.save_method() {
        let why = "the buyer did not consent to saving the method on this order";
        return Decision::Record(EventOutcome::Ignored, Some(why.into()));
    }
    if order.status().kind() != domain::OrderStatusKind::Paid {
        let why = "a method is kept only with a paid order";
        return Decision::Record(EventOutcome::Ignored, Some(why.into()));
    }
    let mut change = r.change(EventOutcome::Applied, None);
    let saved = crate::ports::TopUpWrite::MethodSaved(crate::ports::SavedMethodRecord {
        id: format!("spm_{}", order.id()),
        account_id: order.account_id().clone(),
        provider: order.provider(),
        method: method.clone(),
        order_id: order.id().clone(),
        consented_by: order.user_id().clone(),
        consented_at: order.created_at(),
        created_at: r.now,
        removed_at: None,
    });
    change.command.top_up = Some(crate::ports::TopUpChange {
        write: saved,
        told: Vec::new(),
    });
    change.apply()
}

fn unknown_order() -> Decision {
    Decision::Record(EventOutcome::UnknownOrder, None)
}

/// A payment failed: the order fails, if it still can (`domain::decide_failure`).
fn decide_failed(r: &Received, record: &OrderRecord, reason: &str) -> Decision {
    match decide_failure(&record.order, reason) {
        FailureDecision::Failed(next) => r
            .change(EventOutcome::Applied, None)
            .order(record, &next, None)
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
            .order(record, order, Some(detail))
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
    let mut change = r.change(EventOutcome::Applied, None);
    let to = order.account_id();
    change.command.grant = grant.map(|g| GrantCommand {
        account_id: to.clone(),
        amount: g.credits,
        source: GrantSource::Order(order.id().clone()),
        expires_at: g.expires_at,
        now: r.now,
    });
    change.command.bonus = grant
        .and_then(|g| g.bonus)
        .map(|(amount, expires_at)| GrantCommand {
            account_id: to.clone(),
            amount,
            source: GrantSource::OrderBonus(order.id().clone()),
            expires_at,
            now: r.now,
        });
    change.command.clawbacks = clawback.map_or_else(Vec::new, |back| {
        refunds::order_clawbacks(order.id(), to, back, r.now)
    });
    if let Some(next) = next {
        change = change.order(record, &next, None);
    }
    change.apply()
}

/// An approval is captured (or refused) by `apply_approval` before anything is decided: reaching
/// the decision records it as ignored.
fn approval_not_decided() -> Decision {
    Decision::Record(
        EventOutcome::Ignored,
        Some("an approval is settled by capturing it".into()),
    )
}
