//! `FakeGateway`: a scriptable payment gateway for use-case and HTTP tests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use domain::{OrderId, ProviderId};

use super::lock;
use crate::ports::{
    AckFor, AckVerdict, Checkout, CheckoutRequest, CheckoutTarget, GatewayError, PaymentGateway,
    PaymentRef, PaymentStatus, PlanChangeRequest, PlanChangeStarted, RecordedWebhook,
    RefundRequest, RefundStarted, RefundState, VerifiedWebhook, WebhookAck, WebhookError,
    WebhookRequest,
};

/// The header a test puts the "signature" of a prepared webhook in.
pub const FAKE_SIGNATURE_HEADER: &str = "x-fake-signature";

#[derive(Debug, Default)]
struct Script {
    fail_checkout: Option<String>,
    statuses: BTreeMap<String, PaymentStatus>,
    webhooks: BTreeMap<String, VerifiedWebhook>,
    /// What a recorded event's body reads as now, by event id, when it reads otherwise than
    /// it did when delivered (a fixed parsing bug).
    recorded: BTreeMap<String, VerifiedWebhook>,
    checkouts: Vec<CheckoutRequest>,
    closed: Vec<OrderId>,
    cancelled_subscriptions: Vec<String>,
    /// Subscriptions ended at once ([`PaymentGateway::cancel_subscription_now`]).
    ended_now: Vec<String>,
    /// What `refund` answers; `None`: the provider has no refund API.
    refund_state: Option<RefundState>,
    refunds: Vec<RefundRequest>,
    /// What `capture` answers, by order; unscripted orders: `NotSupported`.
    capture_answers: BTreeMap<String, PaymentStatus>,
    captures: Vec<PaymentRef>,
    capture_unreachable: bool,
    /// Plan changes asked so far (issue 19).
    plan_changes: Vec<PlanChangeRequest>,
    /// Why plan changes are refused, when they are.
    refuse_plan_changes: Option<String>,
    /// Subscriptions resumed so far.
    resumed: Vec<String>,
    /// Why cancellations at the period's end are refused, when they are.
    refuse_cancellations: Option<String>,
    /// What off-session charges answer, in turn (none scripted: the gateway saves no methods).
    off_session: std::collections::VecDeque<crate::ports::OffSessionOutcome>,
    /// Off-session charges asked so far.
    charges: Vec<crate::ports::OffSessionCharge>,
    /// Saved methods the provider was asked to forget so far.
    forgotten: Vec<crate::ports::SavedMethod>,
    /// Make forgetting fail as if the provider could not be reached.
    forget_unreachable: bool,
}

/// A gateway whose answers a test scripts; it records what it was asked.
#[derive(Debug)]
pub struct FakeGateway {
    provider: ProviderId,
    script: Mutex<Script>,
}

impl FakeGateway {
    /// A fake for `provider` that creates checkouts and knows no payments.
    #[must_use]
    pub fn new(provider: ProviderId) -> Self {
        Self {
            provider,
            script: Mutex::new(Script::default()),
        }
    }

    /// Make checkout creation fail with `reason` (or succeed again with `None`).
    pub fn fail_checkouts(&self, reason: Option<&str>) {
        lock(&self.script).fail_checkout = reason.map(str::to_owned);
    }

    /// What `query_payment` answers for `order`.
    pub fn set_status(&self, order: &OrderId, status: PaymentStatus) {
        lock(&self.script)
            .statuses
            .insert(order.as_str().to_owned(), status);
    }

    /// A webhook that verifies when its request carries `signature` in [`FAKE_SIGNATURE_HEADER`].
    pub fn prepare_webhook(&self, signature: &str, webhook: VerifiedWebhook) {
        lock(&self.script)
            .webhooks
            .insert(signature.to_owned(), webhook);
    }

    /// Make the recorded event `event_id` read as `webhook` when replayed
    /// ([`PaymentGateway::parse_recorded`]), as after a fix of the provider's parsing; else a
    /// replay reads what the delivery verified as.
    pub fn prepare_recorded(&self, event_id: &str, webhook: VerifiedWebhook) {
        lock(&self.script)
            .recorded
            .insert(event_id.to_owned(), webhook);
    }

    /// Checkouts requested so far.
    #[must_use]
    pub fn checkouts(&self) -> Vec<CheckoutRequest> {
        lock(&self.script).checkouts.clone()
    }

    /// Orders closed so far.
    #[must_use]
    pub fn closed(&self) -> Vec<OrderId> {
        lock(&self.script).closed.clone()
    }

    /// What `refund` answers from now on (`None`: the provider has no refund API, the default).
    pub fn answer_refunds(&self, state: Option<RefundState>) {
        lock(&self.script).refund_state = state;
    }

    /// Refunds asked for so far.
    #[must_use]
    pub fn refunds(&self) -> Vec<RefundRequest> {
        lock(&self.script).refunds.clone()
    }

    /// What `capture` answers for `order` from now on (unscripted orders: `NotSupported`).
    pub fn answer_capture(&self, order: &OrderId, status: PaymentStatus) {
        lock(&self.script)
            .capture_answers
            .insert(order.as_str().to_owned(), status);
    }

    /// Make captures fail as if the provider could not be reached (or work again with `false`).
    pub fn captures_unreachable(&self, unreachable: bool) {
        lock(&self.script).capture_unreachable = unreachable;
    }

    /// Captures asked for so far.
    #[must_use]
    pub fn captures(&self) -> Vec<PaymentRef> {
        lock(&self.script).captures.clone()
    }

    /// Save payment methods, and answer the next off-session charges with `outcomes` in turn.
    pub fn answer_charges(&self, outcomes: &[crate::ports::OffSessionOutcome]) {
        lock(&self.script)
            .off_session
            .extend(outcomes.iter().cloned());
    }

    /// Off-session charges asked so far.
    #[must_use]
    pub fn charges(&self) -> Vec<crate::ports::OffSessionCharge> {
        lock(&self.script).charges.clone()
    }

    /// Saved methods the provider was asked to forget so far (answered or not).
    #[must_use]
    pub fn forgotten(&self) -> Vec<crate::ports::SavedMethod> {
        lock(&self.script).forgotten.clone()
    }

    /// Make forgetting a saved method fail as if the provider could not be reached (or work
    /// again with `false`).
    pub fn forget_unreachable(&self, unreachable: bool) {
        lock(&self.script).forget_unreachable = unreachable;
    }

    /// Refuse cancellations at the period's end with `reason` from now on (`None`: accept).
    pub fn refuse_cancellations(&self, reason: Option<&str>) {
        lock(&self.script).refuse_cancellations = reason.map(str::to_owned);
    }

    /// Subscriptions cancelled so far.
    #[must_use]
    pub fn cancelled_subscriptions(&self) -> Vec<String> {
        lock(&self.script).cancelled_subscriptions.clone()
    }

    /// Subscriptions ended at once so far.
    #[must_use]
    pub fn ended_now(&self) -> Vec<String> {
        lock(&self.script).ended_now.clone()
    }

    /// Refuse plan changes with `reason` (or accept them again with `None`).
    pub fn refuse_plan_changes(&self, reason: Option<&str>) {
        lock(&self.script).refuse_plan_changes = reason.map(str::to_owned);
    }

    /// Plan changes asked so far (accepted or refused).
    #[must_use]
    pub fn plan_changes(&self) -> Vec<PlanChangeRequest> {
        lock(&self.script).plan_changes.clone()
    }

    /// Subscriptions resumed so far.
    #[must_use]
    pub fn resumed(&self) -> Vec<String> {
        lock(&self.script).resumed.clone()
    }
}

#[async_trait]
impl PaymentGateway for FakeGateway {
    fn provider(&self) -> ProviderId {
        self.provider
    }

    fn is_sandbox(&self) -> bool {
        true
    }

    fn saves_methods(&self) -> bool {
        !lock(&self.script).off_session.is_empty()
    }

    async fn charge_saved_method(
        &self,
        charge: &crate::ports::OffSessionCharge,
    ) -> Result<crate::ports::OffSessionOutcome, GatewayError> {
        let mut script = lock(&self.script);
        script.charges.push(charge.clone());
        script
            .off_session
            .pop_front()
            .ok_or(GatewayError::NotSupported)
    }

    async fn forget_saved_method(
        &self,
        method: &crate::ports::SavedMethod,
    ) -> Result<(), GatewayError> {
        let mut script = lock(&self.script);
        script.forgotten.push(method.clone());
        if script.forget_unreachable {
            return Err(GatewayError::Unreachable("fake provider is down".into()));
        }
        Ok(())
    }

    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError> {
        let mut script = lock(&self.script);
        script.checkouts.push(request.clone());
        if let Some(reason) = &script.fail_checkout {
            return Err(GatewayError::Rejected(reason.clone()));
        }
        let url = format!(
            "https://fake.invalid/{}/checkout/{}",
            self.provider, request.order_id
        );
        let target = if self.provider.pays_by_qr_code() {
            CheckoutTarget::QrCode(url)
        } else {
            CheckoutTarget::Redirect(url)
        };
        Ok(Checkout {
            provider_reference: Some(format!("ref_{}", request.order_id)),
            target,
        })
    }

    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        Ok(lock(&self.script)
            .statuses
            .get(payment.order_id.as_str())
            .cloned()
            .unwrap_or(PaymentStatus::Pending))
    }

    async fn close_payment(&self, payment: &PaymentRef) -> Result<(), GatewayError> {
        lock(&self.script).closed.push(payment.order_id.clone());
        Ok(())
    }

    async fn cancel_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let mut script = lock(&self.script);
        if let Some(reason) = script.refuse_cancellations.clone() {
            return Err(GatewayError::Rejected(reason));
        }
        script
            .cancelled_subscriptions
            .push(provider_subscription_id.to_owned());
        Ok(())
    }

    async fn cancel_subscription_now(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        lock(&self.script)
            .ended_now
            .push(provider_subscription_id.to_owned());
        Ok(())
    }

    async fn change_subscription_plan(
        &self,
        request: &PlanChangeRequest,
    ) -> Result<PlanChangeStarted, GatewayError> {
        let mut script = lock(&self.script);
        script.plan_changes.push(request.clone());
        match &script.refuse_plan_changes {
            Some(reason) => Err(GatewayError::Rejected(reason.clone())),
            None => Ok(PlanChangeStarted::Accepted),
        }
    }

    async fn resume_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        lock(&self.script)
            .resumed
            .push(provider_subscription_id.to_owned());
        Ok(())
    }

    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let mut script = lock(&self.script);
        let state = script
            .refund_state
            .clone()
            .ok_or(GatewayError::NotSupported)?;
        script.refunds.push(request.clone());
        Ok(RefundStarted {
            provider_refund_id: Some(format!("fake_{}", request.refund_id)),
            state,
        })
    }

    async fn capture(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let mut script = lock(&self.script);
        script.captures.push(payment.clone());
        if script.capture_unreachable {
            return Err(GatewayError::Unreachable(
                "the fake provider is down".into(),
            ));
        }
        script
            .capture_answers
            .get(payment.order_id.as_str())
            .cloned()
            .ok_or(GatewayError::NotSupported)
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let signature = request
            .headers
            .get(FAKE_SIGNATURE_HEADER)
            .ok_or(WebhookError::MissingSignature)?;
        lock(&self.script)
            .webhooks
            .get(signature)
            .cloned()
            .ok_or(WebhookError::BadSignature)
    }

    /// The prepared reading of `recorded.event_id`, else the webhook delivered with that id.
    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let script = lock(&self.script);
        script
            .recorded
            .get(&recorded.event_id)
            .or_else(|| {
                script
                    .webhooks
                    .values()
                    .find(|w| w.event_id == recorded.event_id)
            })
            .cloned()
            .ok_or_else(|| WebhookError::Malformed("no such recorded event".into()))
    }

    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck {
        match outcome {
            AckFor::Accepted => WebhookAck {
                verdict: AckVerdict::Accepted,
                content_type: "text/plain",
                body: "ok".into(),
            },
            AckFor::Refused(e) => WebhookAck {
                verdict: AckVerdict::Refused,
                content_type: "text/plain",
                body: e.to_string(),
            },
        }
    }
}
