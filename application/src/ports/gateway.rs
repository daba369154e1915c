//! The payment gateway port: one narrow trait that each of the seven providers implements.
//!
//! A gateway speaks its provider's wire protocol; the use cases only see the normalized types
//! here. Provider status enums map into [`PaymentStatus`] exhaustively, unknown = `Pending`;
//! only an explicit success or failure is terminal.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use domain::{
    BillingPeriod, ChangeDirection, Money, NewPeriodLine, OrderId, Plan, PlanSnapshot, ProviderId,
    Timestamp, UserId,
};

use crate::ports::store::CheckoutTarget;

/// Why a gateway call failed.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The provider refused the request (bad credentials, unknown price, invalid amount, …).
    #[error("provider refused the request: {0}")]
    Rejected(String),
    /// The provider could not be reached or timed out.
    #[error("provider unreachable: {0}")]
    Unreachable(String),
    /// The provider answered something we cannot read.
    #[error("unexpected provider response: {0}")]
    BadResponse(String),
    /// The operation does not exist in this provider's protocol.
    #[error("not supported by this provider")]
    NotSupported,
}

impl GatewayError {
    /// The error's kind without its text, for logs that must not carry what the provider said.
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Rejected(_) => "rejected",
            Self::Unreachable(_) => "unreachable",
            Self::BadResponse(_) => "bad_response",
            Self::NotSupported => "not_supported",
        }
    }
}

/// Why a webhook was refused before anything changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// A signature header is missing or malformed.
    #[error("signature missing or malformed")]
    MissingSignature,
    /// The signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// The timestamp is outside the tolerance window.
    #[error("timestamp outside the tolerance window")]
    Stale,
    /// The body cannot be decrypted or parsed.
    #[error("payload cannot be read: {0}")]
    Malformed(String),
}

/// Ask for a checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRequest {
    /// Our order id, sent as the provider's reference.
    pub order_id: OrderId,
    /// The buyer.
    pub user_id: UserId,
    /// The buyer's e-mail address, where the provider wants one (never a `.invalid`
    /// placeholder).
    pub customer_email: Option<String>,
    /// The buyer's name, for the providers that take one.
    pub customer_name: Option<String>,
    /// The plan as bought.
    pub snapshot: PlanSnapshot,
    /// The plan's current definition (provider ids, texts).
    pub plan: Plan,
    /// Where the provider sends the buyer after paying.
    pub success_url: String,
    /// Where the provider sends the buyer after cancelling.
    pub cancel_url: String,
    /// Where the provider posts webhooks.
    pub notify_url: String,
    /// When our order expires.
    pub expires_at: Timestamp,
    /// The buyer consented to keep the payment method for automatic top-ups: the provider is
    /// asked to save it for charges the merchant starts later, off-session, and the paid event
    /// reports it ([`PaymentEvent::PaymentMethodSaved`]).
    pub save_method: bool,
}

/// A payment method the provider saved for off-session charges, as its event reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedMethod {
    /// The provider's customer the method belongs to (Stripe `cus_…`).
    pub customer_ref: String,
    /// The provider's id of the method (Stripe `pm_…`).
    pub method_ref: String,
    /// A card's brand (`visa`), for showing.
    pub brand: Option<String>,
    /// A card's last four digits, for showing.
    pub last4: Option<String>,
    /// A wallet's account (an e-mail address), for showing.
    pub wallet_account: Option<String>,
}

/// A charge of a saved method that the merchant starts, without the buyer present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffSessionCharge {
    /// Our order for it, sent in the provider's metadata as for any checkout, so that the
    /// provider's payment event pays that order through the usual checks.
    pub order_id: OrderId,
    /// The account's owner the order is for.
    pub user_id: UserId,
    /// What to charge.
    pub amount: Money,
    /// The saved method.
    pub method: SavedMethod,
    /// The provider's idempotency key: the top-up's id, so that a retried call charges once.
    pub idempotency_key: String,
    /// What the buyer's statement says.
    pub description: String,
    /// Where the provider posts webhooks.
    pub notify_url: String,
}

/// What the provider answered an off-session charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffSessionOutcome {
    /// Accepted: succeeded or still processing. Either way, credits come only with the
    /// provider's payment event.
    Accepted {
        /// The provider's id of the charge (Stripe `pi_…`), kept on the order: its refunds
        /// name it.
        provider_reference: Option<String>,
    },
    /// Declined; nothing was charged.
    Declined {
        /// Why, as the provider says (never a secret).
        reason: String,
    },
    /// The buyer must authenticate (3-D Secure): the provider's attempt was cancelled, and
    /// the buyer is sent to a checkout of the same order instead.
    AuthenticationRequired,
}

/// A created checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// The provider's id for it.
    pub provider_reference: Option<String>,
    /// Where the buyer pays.
    pub target: CheckoutTarget,
}

/// A payment's state at the provider, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentStatus {
    /// Not paid yet (also every provider state we do not know).
    Pending,
    /// Paid.
    Succeeded {
        /// What was paid.
        amount: Money,
        /// When.
        paid_at: Timestamp,
    },
    /// Failed or closed without payment.
    Failed {
        /// Why.
        reason: String,
    },
}

/// The headers and raw body of a webhook call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// Headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The raw body.
    pub body: Vec<u8>,
}

/// A webhook the inbox recorded after verifying it, read again for a replay
/// ([`PaymentGateway::parse_recorded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedWebhook {
    /// The recorded event id (without the suffix of a webhook's later events), for providers
    /// that send it in a header rather than in the body.
    pub event_id: String,
    /// The raw body as recorded.
    pub body: Vec<u8>,
    /// When it was received, for providers whose event time is the signature's time.
    pub received_at: Timestamp,
}

/// A verified webhook: its id and type, and what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedWebhook {
    /// The provider's event id (deduplication key).
    pub event_id: String,
    /// The provider's event type.
    pub event_type: String,
    /// What it means; empty for event types Tally does not handle.
    pub events: Vec<PaymentEvent>,
    /// `Some(why)` when the webhook is validly signed but names another merchant, app, store or
    /// mode than the configured ones (a platform key signs every merchant's webhooks at some
    /// providers): it is acknowledged, recorded as `foreign_merchant`, and changes nothing.
    /// `events` is then empty.
    pub foreign: Option<String>,
}

/// Identifies our order in a provider event: our id, the provider's reference, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLocator {
    /// Our order id, from the provider's reference or metadata field.
    pub order_id: Option<OrderId>,
    /// The provider's payment reference.
    pub provider_reference: Option<String>,
}

/// A normalized provider event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentEvent {
    /// A one-time or credits payment, or a subscription's first payment, succeeded.
    PaymentSucceeded {
        /// Which order.
        order: OrderLocator,
        /// What was paid.
        amount: Money,
        /// When.
        occurred_at: Timestamp,
    },
    /// The buyer approved a payment that moves no money until the merchant captures it (PayPal
    /// `CHECKOUT.ORDER.APPROVED`). The service captures it through [`PaymentGateway::capture`]
    /// only for its own pending order of this provider, with the same provider reference and a
    /// price of `amount`, then applies what the capture came to as
    /// [`PaymentEvent::PaymentSucceeded`] or [`PaymentEvent::PaymentFailed`]. Any other approval
    /// is recorded and not captured, so that the provider's approval lapses.
    PaymentApproved {
        /// Which order (our id from the provider's reference field, and the provider's id).
        order: OrderLocator,
        /// What the buyer approved.
        amount: Money,
        /// When.
        occurred_at: Timestamp,
    },
    /// The provider saved the payment method of an order's payment for later off-session
    /// charges (the buyer consented on that order). Kept only for an order that asked for it.
    PaymentMethodSaved {
        /// Which order.
        order: OrderLocator,
        /// The method.
        method: SavedMethod,
        /// When.
        occurred_at: Timestamp,
    },
    /// A payment failed.
    PaymentFailed {
        /// Which order.
        order: OrderLocator,
        /// Why.
        reason: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription started.
    SubscriptionActivated {
        /// The order that started it.
        order: OrderLocator,
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// The first paid period.
        period: BillingPeriod,
        /// What the first period paid, when the provider's activation event says (it must then
        /// be the order's price in its currency); `None` when the event carries no amount.
        amount: Option<Money>,
        /// The provider's id for the first period's charge (Stripe invoice, PayPal sale, Creem
        /// transaction or order, Dodo payment, Waffo payment), which its refunds name.
        charge_ref: Option<String>,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription was paid for a new period.
    SubscriptionRenewed {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// The new period.
        period: BillingPeriod,
        /// What was paid.
        amount: Money,
        /// The provider's id for this period's charge, which its refunds name.
        charge_ref: Option<String>,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription's renewal payment failed.
    SubscriptionPastDue {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription will end at its period's end.
    SubscriptionCancelScheduled {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A scheduled cancellation was withdrawn: the subscription renews again.
    SubscriptionCancelWithdrawn {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription now bills another price (the provider applied a plan change): checked
    /// against the change the subscriber asked for (`domain::decide_plan_changed`).
    SubscriptionPlanChanged {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// The price per period it bills from now on.
        price: Money,
        /// The billing interval in months, when the event says.
        interval_months: Option<u32>,
        /// When.
        occurred_at: Timestamp,
    },
    /// The subscriber approved, at the provider, moving the subscription to another of the
    /// provider's plans, billed from the next period with nothing charged now (PayPal's revise:
    /// `BILLING.SUBSCRIPTION.UPDATED`, or a renewal's sale showing the plan it bills, reported
    /// before the renewal). Checked against the change the subscriber asked for,
    /// `provider_plan_id` against the asked plan's (`domain::decide_plan_revised`); it grants
    /// nothing at once.
    SubscriptionPlanRevised {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// The provider's id of the plan the subscription is on now.
        provider_plan_id: String,
        /// The price per period that plan bills.
        price: Money,
        /// Its billing interval in months, when the provider says.
        interval_months: Option<u32>,
        /// When.
        occurred_at: Timestamp,
    },
    /// The provider invoiced a plan change at once (Stripe `invoice.paid` with
    /// `billing_reason=subscription_update`): a proration within the period, or the first
    /// period of a new billing interval (`domain::decide_change_invoice`).
    SubscriptionChangeInvoiced {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// What the invoice charged.
        paid: Money,
        /// Its line billing a whole new period at the new price, when the change started one.
        new_period: Option<NewPeriodLine>,
        /// When the change it bills was asked, as Tally marked it on the subscription.
        change_requested_at: Option<Timestamp>,
        /// The provider's id for the charge (the invoice), which its refunds name.
        charge_ref: Option<String>,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription ended.
    SubscriptionCanceled {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A subscription ran out.
    SubscriptionExpired {
        /// The provider's subscription id.
        provider_subscription_id: String,
        /// When.
        occurred_at: Timestamp,
    },
    /// A payment was refunded, fully or in part, or a dispute of it was lost.
    Refunded {
        /// Which payment.
        charge: RefundedCharge,
        /// How much, as the provider tells it.
        refund: RefundReport,
        /// When.
        occurred_at: Timestamp,
    },
}

/// Which payment a refund or dispute takes money back from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundedCharge {
    /// An order's payment (one-time, credits, or a subscription's first payment named by order).
    Order(OrderLocator),
    /// One of a subscription's charges, by the provider's id for that charge (the `charge_ref`
    /// of its activation or renewal event).
    SubscriptionCharge {
        /// The provider's subscription id, when the refund names it.
        provider_subscription_id: Option<String>,
        /// The provider's id for the refunded charge.
        charge_ref: String,
    },
}

/// How much a refund takes back, in the form the provider reports it. Each form is applied
/// once however often it is delivered, and in any order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundReport {
    /// The provider's running total refunded for the payment, this refund included.
    Total(Money),
    /// One refund's own amount, with the provider's id for that refund; refunds of one payment
    /// add up, each once.
    One {
        /// The provider's refund id.
        refund_id: String,
        /// This refund's amount.
        amount: Money,
    },
    /// A dispute (chargeback) the merchant lost: the whole payment is taken back.
    DisputeLost {
        /// The provider's dispute id.
        dispute_id: String,
    },
}

/// Which payment at the provider: our order id and the provider's reference when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRef {
    /// Our order id.
    pub order_id: OrderId,
    /// The provider's id for the payment, from the checkout.
    pub provider_reference: Option<String>,
}

/// Ask the provider to refund part or all of an order's payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    /// The payment, as the provider knows it.
    pub payment: PaymentRef,
    /// Our id for this refund, unique per order and amount: the provider's idempotency key or
    /// refund number (`out_refund_no`, `out_request_no`, `PayPal-Request-Id`, …).
    pub refund_id: String,
    /// What to refund now.
    pub amount: Money,
    /// What the order paid (WeChat Pay and Alipay want the total).
    pub paid: Money,
    /// Why, in words the provider may show the buyer.
    pub reason: String,
    /// Where the provider posts the refund's notification, when the API takes one (WeChat Pay).
    pub notify_url: String,
}

/// Where a refund stands at the provider right after it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundState {
    /// Accepted; the provider's refund event (or a later query) completes it.
    Pending,
    /// Done: the service applies it at once, under the provider's refund id.
    Succeeded,
    /// Refused or failed at the provider.
    Failed(String),
}

/// A refund the provider accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundStarted {
    /// The provider's id for the refund, when it gives one (the id its refund events carry).
    pub provider_refund_id: Option<String>,
    /// Where it stands.
    pub state: RefundState,
}

/// Ask the provider to bill a live subscription another of our recurring plans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanChangeRequest {
    /// The provider's subscription id.
    pub provider_subscription_id: String,
    /// The plan switched to, as sold now (its price in the subscription's environment).
    pub snapshot: PlanSnapshot,
    /// Its current definition (provider price and product ids).
    pub plan: Plan,
    /// Upgrade (prorated now where the provider prorates) or downgrade (from the next period).
    pub direction: ChangeDirection,
    /// Unique per request: the provider's idempotency key where it takes one.
    pub idempotency_key: String,
    /// When the subscriber asked (the change's key): Stripe keeps it on the subscription as
    /// `metadata[planChangeAt]`, so the change's invoice names the change it bills.
    pub requested_at: Timestamp,
    /// Where a provider that asks the subscriber to approve the change (PayPal) sends them back
    /// after approving; built from the deployment's callback addresses, never from a caller's
    /// input. `None` when the wiring configured none.
    pub return_url: Option<String>,
    /// Where it sends them when they decline; as `return_url`.
    pub cancel_url: Option<String>,
}

/// What the provider did with a plan change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanChangeStarted {
    /// Accepted: its subscription-updated event confirms it.
    Accepted,
    /// The buyer must approve it at the provider first (PayPal revise): send them to `url`.
    ApprovalNeeded {
        /// The provider's approval page.
        url: String,
    },
}

/// The webhook outcome an acknowledgement is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckFor {
    /// Verified and processed (or a harmless duplicate).
    Accepted,
    /// Refused before anything changed.
    Refused(WebhookError),
}

/// Whether the provider is told its webhook delivery was taken. The HTTP adapter turns it into
/// a status; what a provider does with a refusal (resend, give up) is the provider's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckVerdict {
    /// Taken (processed, or a harmless duplicate): the provider stops resending.
    Accepted,
    /// Refused as unreadable or not for us; nothing changed.
    Refused,
    /// Refused because the signature is missing, wrong or stale (a provider that tells the two
    /// refusals apart, WeChat Pay, wants to know); nothing changed.
    Unauthenticated,
}

/// How to answer the provider's webhook call: the verdict, and the body in the media type the
/// provider reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAck {
    /// Taken or refused.
    pub verdict: AckVerdict,
    /// The body's media type (`text/plain`, `application/json`).
    pub content_type: &'static str,
    /// The body the provider reads.
    pub body: String,
}

/// Which of a provider's environments a set of credentials belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialMode {
    /// The provider's test, sandbox or developer environment: nothing it takes is real money.
    Test,
    /// The provider's live environment.
    Live,
}

impl CredentialMode {
    /// How reports spell it: `test` or `live`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            CredentialMode::Test => "test",
            CredentialMode::Live => "live",
        }
    }
}

/// The provider accepted the configured credentials on a read that changes nothing
/// ([`PaymentGateway::check_credentials`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialCheck {
    /// The environment the credentials belong to: as the provider's answer says where it says,
    /// else as the configured API address tells.
    pub mode: CredentialMode,
    /// What answered, in a few words for the operator (the call made, what it proved); never a
    /// secret.
    pub detail: String,
}

/// One payment provider.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait PaymentGateway: Send + Sync + 'static {
    /// Which provider this is.
    fn provider(&self) -> ProviderId;

    /// Whether this gateway talks to the local sandbox rather than the real provider.
    fn is_sandbox(&self) -> bool;

    /// Create a checkout for a one-time, credits or subscription order.
    ///
    /// # Errors
    /// [`GatewayError`]; the caller marks the order failed.
    async fn create_checkout(&self, request: &CheckoutRequest) -> Result<Checkout, GatewayError>;

    /// Ask the provider for an order's payment state.
    ///
    /// # Errors
    /// [`GatewayError`].
    async fn query_payment(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError>;

    /// Close an unpaid order at the provider, where the protocol allows.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the protocol has no close; other failures.
    async fn close_payment(&self, payment: &PaymentRef) -> Result<(), GatewayError>;

    /// Cancel a subscription at the end of its current period.
    ///
    /// # Errors
    /// [`GatewayError`].
    async fn cancel_subscription(&self, provider_subscription_id: &str)
    -> Result<(), GatewayError>;

    /// End a live subscription now, through the provider's immediate-cancel API (an
    /// administrator's "cancel now"). The subscription ends when the provider's ended event
    /// arrives and is checked like any other.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the provider cannot end one at once, or Tally does
    /// not call it (the default); other failures.
    async fn cancel_subscription_now(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let _ = provider_subscription_id;
        Err(GatewayError::NotSupported)
    }

    /// Switch a live subscription to another plan through the provider's own plan-change API.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the provider has none (the default); other failures.
    async fn change_subscription_plan(
        &self,
        request: &PlanChangeRequest,
    ) -> Result<PlanChangeStarted, GatewayError> {
        let _ = request;
        Err(GatewayError::NotSupported)
    }

    /// Withdraw a scheduled cancellation: the subscription renews again.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the provider cannot undo a cancellation (the
    /// default); other failures.
    async fn resume_subscription(
        &self,
        provider_subscription_id: &str,
    ) -> Result<(), GatewayError> {
        let _ = provider_subscription_id;
        Err(GatewayError::NotSupported)
    }

    /// Refund part or all of an order's payment through the provider's refund API, idempotent
    /// per `refund_id`.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the provider's API has no refund (the default);
    /// other failures.
    async fn refund(&self, request: &RefundRequest) -> Result<RefundStarted, GatewayError> {
        let _ = request;
        Err(GatewayError::NotSupported)
    }

    /// Capture a payment the buyer approved (PayPal orders), idempotently per order: every path
    /// that captures an order uses the same idempotency key, so the provider captures once. The
    /// service calls it only for its own pending order (see [`PaymentEvent::PaymentApproved`]).
    /// `Pending` when the capture is held or the buyer has not approved yet.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where payments need no capture (the default);
    /// [`GatewayError::Rejected`] when the provider refuses (not approved, lapsed, voided);
    /// other failures (retrying is safe).
    async fn capture(&self, payment: &PaymentRef) -> Result<PaymentStatus, GatewayError> {
        let _ = payment;
        Err(GatewayError::NotSupported)
    }

    /// Whether this provider saves payment methods for charges the merchant starts later
    /// (automatic top-up).
    fn saves_methods(&self) -> bool {
        false
    }

    /// Charge a saved method off-session, idempotently per `charge.idempotency_key`.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the provider cannot (the default); other failures
    /// (retrying with the same key is safe).
    async fn charge_saved_method(
        &self,
        charge: &OffSessionCharge,
    ) -> Result<OffSessionOutcome, GatewayError> {
        let _ = charge;
        Err(GatewayError::NotSupported)
    }

    /// Make the provider forget a saved method, so that it can no longer be charged there
    /// (Tally's own removal is authoritative; this only asks the provider to follow it). A
    /// method the provider no longer knows counts as forgotten.
    ///
    /// # Errors
    /// [`GatewayError::NotSupported`] where the provider cannot (the default); other failures
    /// (retrying is safe).
    async fn forget_saved_method(&self, method: &SavedMethod) -> Result<(), GatewayError> {
        let _ = method;
        Err(GatewayError::NotSupported)
    }

    /// Verify a webhook exactly as the provider signs it and parse it into normalized events.
    ///
    /// # Errors
    /// [`WebhookError`]; nothing may change for a refused webhook.
    async fn verify_webhook(
        &self,
        request: &WebhookRequest,
    ) -> Result<VerifiedWebhook, WebhookError>;

    /// Parse the body of a webhook that [`PaymentGateway::verify_webhook`] verified earlier and
    /// the inbox recorded (an administrator's replay): the same parsing, checks of the merchant
    /// and provider look-ups as a live delivery, without the signature and its timestamp
    /// window (a recorded event is older than any provider's tolerance).
    ///
    /// # Errors
    /// [`WebhookError::Malformed`] when the body cannot be read; the default refuses every body
    /// (a gateway that cannot replay).
    async fn parse_recorded(
        &self,
        recorded: &RecordedWebhook,
    ) -> Result<VerifiedWebhook, WebhookError> {
        let _ = recorded;
        Err(WebhookError::Malformed(
            "this provider's recorded events cannot be replayed".into(),
        ))
    }

    /// The answer the provider expects for a webhook that was accepted or refused.
    fn webhook_ack(&self, outcome: &AckFor) -> WebhookAck;

    /// Make one authenticated call that changes nothing at the provider (a balance, a product
    /// list, an access token, a look-up of an order that does not exist) to learn whether it
    /// accepts the configured credentials: `tally check-config --online`.
    ///
    /// # Errors
    /// [`GatewayError::Rejected`] when the provider refuses the credentials or the signature,
    /// with its error code and message (never a secret); [`GatewayError::Unreachable`] when it
    /// cannot be reached; [`GatewayError::BadResponse`] for an answer that proves neither;
    /// [`GatewayError::NotSupported`] for a gateway that cannot check (the default).
    async fn check_credentials(&self) -> Result<CredentialCheck, GatewayError> {
        Err(GatewayError::NotSupported)
    }
}

/// The gateways by provider.
#[derive(Clone, Default)]
pub struct Gateways(BTreeMap<ProviderId, Arc<dyn PaymentGateway>>);

impl Gateways {
    /// An empty registry.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a gateway under its provider, replacing any earlier one.
    #[must_use]
    pub fn with(mut self, gateway: Arc<dyn PaymentGateway>) -> Self {
        self.0.insert(gateway.provider(), gateway);
        self
    }

    /// The gateway of `provider`.
    #[must_use]
    pub fn get(&self, provider: ProviderId) -> Option<&Arc<dyn PaymentGateway>> {
        self.0.get(&provider)
    }

    /// Providers that have a gateway.
    pub fn providers(&self) -> impl Iterator<Item = ProviderId> + '_ {
        self.0.keys().copied()
    }
}

impl std::fmt::Debug for Gateways {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}
