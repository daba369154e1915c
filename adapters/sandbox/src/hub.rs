//! The sandbox's state: simulated payments, subscriptions and saved payment methods, and
//! webhook delivery.

mod methods;
mod store;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use application::ports::Clock;
use domain::{Currency, ProviderId};
use serde::Serialize;

use crate::simulator::Simulator;

use store::{BoundedMap, Payments};

pub use methods::{SimBehaviour, SimMethod};

/// The most payments the sandbox keeps (the oldest created are dropped first); it is a
/// development tool. A thousand checkouts a minute stay for ten minutes.
const MAX_PAYMENTS: usize = 10_000;
/// The most saved payment methods it keeps (the oldest saved are dropped first).
const MAX_METHODS: usize = 10_000;
/// The most subscriptions it keeps (the oldest started are dropped first).
const MAX_SUBSCRIPTIONS: usize = 10_000;
/// The most webhook deliveries it remembers (the oldest are forgotten first); each keeps its
/// request, a few kilobytes, so that it can be sent again.
const MAX_DELIVERIES: usize = 1_000;
/// The longest billing interval a test may give a subscription it starts, in months.
const MAX_INTERVAL_MONTHS: u32 = 12;
/// How long a webhook delivery may take.
const DELIVERY_TIMEOUT_MS: u64 = 10_000;

/// Why a sandbox action failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// No such payment or subscription.
    #[error("not found")]
    NotFound,
    /// The action does not fit the current state.
    #[error("{0}")]
    Conflict(String),
}

/// A callback or redirect URL that is not the service's own: the sandbox only ever sends
/// webhooks and browsers back to the service it belongs to, so that nobody holding the
/// (published) sandbox keys can make the server post to, or redirect to, an address of their
/// choosing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be a URL of this service ({base}/...)")]
pub struct ForeignUrl {
    /// The field, as the provider's API spells it.
    pub field: &'static str,
    /// The service's base URL.
    pub base: String,
}

/// What a payment buys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum SimKind {
    /// A single payment.
    OneTime,
    /// The first payment of a subscription billed every `interval_months`.
    Subscription {
        /// Billing period in months.
        interval_months: u32,
        /// The provider-side plan or price id, if the gateway sent one.
        plan_ref: Option<String>,
    },
}

/// Where a simulated payment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SimStatus {
    /// Waiting for the buyer.
    Open,
    /// Approved by the buyer, waiting for the merchant's capture (PayPal).
    Approved,
    /// Paid.
    Paid,
    /// The payment failed.
    Declined,
    /// The buyer cancelled, or the merchant closed it.
    Canceled,
}

/// A simulated payment (a checkout session, order, trade or transaction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimPayment {
    /// The provider's id for it.
    pub id: String,
    /// Provider.
    #[serde(serialize_with = "provider_id")]
    pub provider: ProviderId,
    /// Tally's order id (the provider's reference field).
    pub order_id: String,
    /// Amount in minor units.
    pub amount_minor: i64,
    /// Currency.
    #[serde(serialize_with = "currency_code")]
    pub currency: Currency,
    /// What it buys.
    pub kind: SimKind,
    /// Where it is.
    pub status: SimStatus,
    /// Where the browser goes after paying.
    pub success_url: String,
    /// Where the browser goes after cancelling.
    pub cancel_url: String,
    /// Where webhooks go.
    pub notify_url: String,
    /// Refunded so far, minor units.
    pub refunded_minor: i64,
    /// The subscription it started, once paid.
    pub subscription_id: Option<String>,
    /// Created, ms since the epoch.
    pub created_at_ms: i64,
    /// Provider-specific values the simulator keeps (product id, customer email, …).
    pub extra: BTreeMap<String, String>,
}

/// Where a simulated subscription is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SimSubscriptionStatus {
    /// Renewing.
    Active,
    /// Ends at the period's end.
    CancelScheduled,
    /// Ended.
    Canceled,
}

/// A simulated subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimSubscription {
    /// The provider's id for it.
    pub id: String,
    /// Provider.
    #[serde(serialize_with = "provider_id")]
    pub provider: ProviderId,
    /// The payment that started it.
    pub payment_id: String,
    /// Tally's order id.
    pub order_id: String,
    /// Current period start, ms.
    pub period_start_ms: i64,
    /// Current period end, ms.
    pub period_end_ms: i64,
    /// The first period's start: every period ends a whole number of intervals after it.
    pub anchor_ms: i64,
    /// Billing period in months.
    pub interval_months: u32,
    /// Where it is.
    pub status: SimSubscriptionStatus,
    /// Amount per period, minor units.
    pub amount_minor: i64,
    /// Currency.
    #[serde(serialize_with = "currency_code")]
    pub currency: Currency,
    /// Where webhooks go.
    pub notify_url: String,
    /// How many renewals so far.
    pub renewals: u32,
    /// Every charge so far, the first period's first: what refunds of a subscription name.
    pub charges: Vec<SimCharge>,
}

/// One paid period of a subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimCharge {
    /// The provider's id for the charge (Stripe invoice, PayPal sale, Creem transaction, Dodo
    /// payment, Waffo payment), sent in the activation or renewal webhook.
    pub id: String,
    /// The period it paid, ms.
    pub period_start_ms: i64,
    /// Its end, ms.
    pub period_end_ms: i64,
    /// Amount, minor units.
    pub amount_minor: i64,
    /// Refunded so far, minor units.
    pub refunded_minor: i64,
}

/// Something that happened at the simulated provider, to be told to Tally by webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimEvent {
    /// A payment (one-time, credits, or a subscription's first) succeeded.
    Paid(SimPayment),
    /// A payment was approved by the buyer and awaits capture (PayPal).
    Approved(SimPayment),
    /// A payment failed.
    Declined(SimPayment),
    /// A subscription started with its first payment.
    SubscriptionStarted(SimPayment, SimSubscription),
    /// A subscription renewed; the string is the renewal invoice or transaction id.
    Renewed(SimSubscription, String),
    /// The renewal of a subscription's next period failed (the card was declined): the
    /// provider keeps retrying and the subscription is past due; its paid period does not move.
    RenewalFailed(SimSubscription),
    /// A subscription will end at its period's end.
    SubscriptionCancelScheduled(SimSubscription),
    /// A subscription ended.
    SubscriptionCanceled(SimSubscription),
    /// A subscription's charge was refunded by `amount_minor` (the charge carries the new
    /// total), or a dispute of it was lost (`dispute` set: the whole charge went back).
    ChargeRefunded {
        /// The subscription.
        subscription: SimSubscription,
        /// The charge after the refund.
        charge: SimCharge,
        /// The refund's (or dispute's) id.
        refund_id: String,
        /// This refund's amount.
        amount_minor: i64,
        /// Whether this is a lost dispute rather than a refund.
        dispute: bool,
    },
    /// A payment was refunded by `amount_minor` (the payment carries the new total).
    Refunded {
        /// The payment after the refund.
        payment: SimPayment,
        /// The refund's id.
        refund_id: String,
        /// This refund's amount.
        amount_minor: i64,
    },
}

/// What a subscription bills from a renewal on, when the price changed at the provider; each
/// part left `None` stays as it was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimPrice {
    /// The new amount per period, minor units.
    pub amount_minor: Option<i64>,
    /// The new currency.
    pub currency: Option<Currency>,
}

/// A signed webhook request, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimWebhook {
    /// Headers (signature, timestamp, ids).
    pub headers: Vec<(String, String)>,
    /// Content type of the body.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

/// A delivery attempt, for the dashboard and tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// Provider.
    #[serde(serialize_with = "provider_id")]
    pub provider: ProviderId,
    /// Where it went.
    pub url: String,
    /// The HTTP status Tally answered, or `None` when it was dropped or unreachable.
    pub status: Option<u16>,
    /// What Tally answered (first 200 characters).
    pub answer: String,
    /// The payment the webhook was about.
    pub payment_id: Option<String>,
    /// The request, kept so it can be delivered again byte for byte.
    #[serde(skip)]
    pub webhook: Option<SimWebhook>,
}

#[derive(Debug)]
struct State {
    payments: Payments,
    subscriptions: BoundedMap<SimSubscription>,
    methods: BoundedMap<SimMethod>,
    /// The latest deliveries, oldest first.
    deliveries: VecDeque<Delivery>,
    drop_webhooks: u32,
    counter: u64,
}

impl State {
    fn new() -> Self {
        Self {
            payments: Payments::new(MAX_PAYMENTS),
            subscriptions: BoundedMap::new(MAX_SUBSCRIPTIONS),
            methods: BoundedMap::new(MAX_METHODS),
            deliveries: VecDeque::new(),
            drop_webhooks: 0,
            counter: 0,
        }
    }

    fn record(&mut self, delivery: Delivery) {
        if self.deliveries.len() >= MAX_DELIVERIES {
            self.deliveries.pop_front();
        }
        self.deliveries.push_back(delivery);
    }
}

/// The sandbox's state and webhook sender.
pub struct Hub {
    state: Mutex<State>,
    http: reqwest::Client,
    public_base_url: String,
    clock: Arc<dyn Clock>,
    simulators: Mutex<BTreeMap<ProviderId, Arc<dyn Simulator>>>,
    started: OnceLock<()>,
    /// The merchant's name the hosted checkout shows (the operator's branding).
    merchant_name: Mutex<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Hub {
    /// An empty hub reachable at `public_base_url`.
    #[must_use]
    pub fn new(public_base_url: &str, clock: Arc<dyn Clock>) -> Self {
        signing::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(DELIVERY_TIMEOUT_MS))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self {
            state: Mutex::new(State::new()),
            http,
            public_base_url: public_base_url.trim_end_matches('/').to_owned(),
            clock,
            simulators: Mutex::new(BTreeMap::new()),
            started: OnceLock::new(),
            merchant_name: Mutex::new("Tally".to_owned()),
        }
    }

    pub(crate) fn register(&self, simulator: Arc<dyn Simulator>) {
        lock(&self.state)
            .payments
            .index(simulator.provider(), simulator.lookup_keys());
        lock(&self.simulators).insert(simulator.provider(), simulator);
        let _ = self.started.set(());
    }

    /// The simulator of `provider`.
    #[must_use]
    pub fn simulator(&self, provider: ProviderId) -> Option<Arc<dyn Simulator>> {
        lock(&self.simulators).get(&provider).cloned()
    }

    pub(crate) fn simulators(&self) -> Vec<Arc<dyn Simulator>> {
        lock(&self.simulators).values().cloned().collect()
    }

    /// The public base URL (without `/sandbox`).
    #[must_use]
    pub fn public_base_url(&self) -> &str {
        &self.public_base_url
    }

    /// The merchant's name the hosted checkout shows.
    #[must_use]
    pub fn merchant_name(&self) -> String {
        lock(&self.merchant_name).clone()
    }

    /// Show `name` as the merchant on the hosted checkout (the operator's branding).
    pub fn set_merchant_name(&self, name: &str) {
        *lock(&self.merchant_name) = name.to_owned();
    }

    /// The hosted checkout page of a payment.
    #[must_use]
    pub fn checkout_url(&self, payment_id: &str) -> String {
        format!("{}/sandbox/checkout/{payment_id}", self.public_base_url)
    }

    /// Now, in milliseconds.
    #[must_use]
    pub fn now_ms(&self) -> i64 {
        self.clock.now().unix_millis()
    }

    /// A new id such as `cs_sandbox_7`.
    #[must_use]
    pub fn new_id(&self, prefix: &str) -> String {
        let mut state = lock(&self.state);
        state.counter += 1;
        format!("{prefix}{}{}", self.now_ms(), state.counter)
    }

    /// Whether `url` is empty (no callback) or lies under the public base URL: same scheme, host
    /// and port, no user info, and a path under the base's path.
    #[must_use]
    pub fn is_own_url(&self, url: &str) -> bool {
        if url.is_empty() {
            return true;
        }
        let (Ok(base), Ok(url)) = (
            reqwest::Url::parse(&self.public_base_url),
            reqwest::Url::parse(url),
        ) else {
            return false;
        };
        let base_path = base.path().trim_end_matches('/');
        url.scheme() == base.scheme()
            && url.host_str() == base.host_str()
            && url.port_or_known_default() == base.port_or_known_default()
            && url.username().is_empty()
            && url.password().is_none()
            && (url.path() == base_path
                || url.path().starts_with(&format!("{base_path}/"))
                || (base_path.is_empty() && url.path() == "/"))
    }

    /// `url` for `field`, if it is the service's own (see [`Hub::is_own_url`]).
    ///
    /// # Errors
    /// [`ForeignUrl`] naming the field.
    pub fn own_url(&self, field: &'static str, url: &str) -> Result<(), ForeignUrl> {
        if self.is_own_url(url) {
            Ok(())
        } else {
            Err(ForeignUrl {
                field,
                base: self.public_base_url.clone(),
            })
        }
    }

    /// Store a new payment, once its success, cancel and webhook URLs are the service's own.
    ///
    /// # Errors
    /// [`ForeignUrl`] naming the first foreign URL, under the `fields` names the provider's API
    /// gives them (success, cancel, notify); nothing is stored.
    pub fn insert_payment(
        &self,
        payment: SimPayment,
        fields: [&'static str; 3],
    ) -> Result<(), ForeignUrl> {
        self.own_url(fields[0], &payment.success_url)?;
        self.own_url(fields[1], &payment.cancel_url)?;
        self.own_url(fields[2], &payment.notify_url)?;
        lock(&self.state).payments.insert(payment);
        Ok(())
    }

    /// A payment by id.
    #[must_use]
    pub fn payment(&self, id: &str) -> Option<SimPayment> {
        lock(&self.state).payments.get(id).cloned()
    }

    /// The newest payment of `provider` for Tally's order `order_id`.
    #[must_use]
    pub fn payment_for_order(&self, provider: ProviderId, order_id: &str) -> Option<SimPayment> {
        lock(&self.state)
            .payments
            .newest_for_order(provider, order_id)
            .cloned()
    }

    /// Every payment for Tally's order `order_id`, newest first.
    #[must_use]
    pub fn payments_for_order(&self, order_id: &str) -> Vec<SimPayment> {
        let mut all: Vec<SimPayment> = lock(&self.state)
            .payments
            .for_order(order_id)
            .cloned()
            .collect();
        all.reverse();
        all.sort_by_key(|p| std::cmp::Reverse(p.created_at_ms));
        all
    }

    /// The payment of `provider` that last took `value` under `extra[name]`; `name` MUST be one
    /// of the provider simulator's [`Simulator::lookup_keys`].
    #[must_use]
    pub fn payment_by(
        &self,
        provider: ProviderId,
        name: &'static str,
        value: &str,
    ) -> Option<SimPayment> {
        lock(&self.state)
            .payments
            .looked_up(provider, name, value)
            .cloned()
    }

    /// How many payments the sandbox keeps now.
    #[must_use]
    pub fn payment_count(&self) -> usize {
        lock(&self.state).payments.len()
    }

    /// Every payment, newest first.
    #[must_use]
    pub fn payments(&self) -> Vec<SimPayment> {
        let mut all: Vec<SimPayment> = lock(&self.state).payments.newest_first().cloned().collect();
        // Created in the order they were stored, unless a simulator dated one otherwise.
        all.sort_by_key(|p| std::cmp::Reverse(p.created_at_ms));
        all
    }

    /// Change a payment.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], or what `change` returns.
    pub fn update_payment<T>(
        &self,
        id: &str,
        change: impl FnOnce(&mut SimPayment) -> Result<T, SandboxError>,
    ) -> Result<T, SandboxError> {
        lock(&self.state)
            .payments
            .update(id, change)
            .unwrap_or(Err(SandboxError::NotFound))
    }

    /// A subscription by id.
    #[must_use]
    pub fn subscription(&self, id: &str) -> Option<SimSubscription> {
        lock(&self.state).subscriptions.get(id).cloned()
    }

    /// Every subscription, newest first.
    #[must_use]
    pub fn subscriptions(&self) -> Vec<SimSubscription> {
        lock(&self.state)
            .subscriptions
            .newest_first()
            .cloned()
            .collect()
    }

    /// Change a subscription.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], or what `change` returns.
    pub fn update_subscription<T>(
        &self,
        id: &str,
        change: impl FnOnce(&mut SimSubscription) -> Result<T, SandboxError>,
    ) -> Result<T, SandboxError> {
        let mut state = lock(&self.state);
        let subscription = state
            .subscriptions
            .get_mut(id)
            .ok_or(SandboxError::NotFound)?;
        change(subscription)
    }

    /// The latest delivery attempts (at most a thousand), oldest first.
    #[must_use]
    pub fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.state).deliveries.iter().cloned().collect()
    }

    /// Drop the next `count` webhooks instead of sending them (to test reconciliation).
    pub fn drop_next_webhooks(&self, count: u32) {
        lock(&self.state).drop_webhooks = count;
    }

    /// Mark a payment paid (starting its subscription, if it is one) and send the webhooks.
    ///
    /// # Errors
    /// Unknown payment, or not open or approved.
    pub async fn complete_payment(&self, id: &str) -> Result<SimPayment, SandboxError> {
        let now = self.now_ms();
        let payment = self.update_payment(id, |p| match p.status {
            SimStatus::Open | SimStatus::Approved => {
                p.status = SimStatus::Paid;
                Ok(p.clone())
            }
            other => Err(SandboxError::Conflict(format!("payment is {other:?}"))),
        })?;
        let event = match &payment.kind {
            SimKind::OneTime => SimEvent::Paid(payment.clone()),
            SimKind::Subscription {
                interval_months, ..
            } => {
                let subscription = SimSubscription {
                    id: self.new_id("sub_sandbox_"),
                    provider: payment.provider,
                    payment_id: payment.id.clone(),
                    order_id: payment.order_id.clone(),
                    period_start_ms: now,
                    period_end_ms: add_months(now, *interval_months),
                    anchor_ms: now,
                    interval_months: *interval_months,
                    status: SimSubscriptionStatus::Active,
                    amount_minor: payment.amount_minor,
                    currency: payment.currency,
                    notify_url: payment.notify_url.clone(),
                    renewals: 0,
                    charges: vec![SimCharge {
                        id: self.new_id(charge_prefix(payment.provider)),
                        period_start_ms: now,
                        period_end_ms: add_months(now, *interval_months),
                        amount_minor: payment.amount_minor,
                        refunded_minor: 0,
                    }],
                };
                // The oldest subscription may be dropped to make room: see `store`.
                let _oldest = lock(&self.state)
                    .subscriptions
                    .insert(subscription.id.clone(), subscription.clone());
                self.update_payment(id, |p| {
                    p.subscription_id = Some(subscription.id.clone());
                    Ok(())
                })?;
                SimEvent::SubscriptionStarted(payment.clone(), subscription)
            }
        };
        self.dispatch(payment.provider, &payment.notify_url, &event)
            .await;
        Ok(self.payment(id).unwrap_or(payment))
    }

    /// The provider bills an open payment as the first payment of a subscription
    /// of `amount_minor` every `interval_months`, whatever the checkout was opened for, and
    /// sends the subscription's activation webhooks: a product misconfigured as recurring at
    /// the provider, or a price changed there. The subscription names the payment's order, as
    /// the provider's activation of that checkout does.
    ///
    /// # Errors
    /// Unknown payment, not open, or an amount or interval out of range.
    pub async fn complete_as_subscription(
        &self,
        id: &str,
        amount_minor: i64,
        interval_months: u32,
    ) -> Result<SimPayment, SandboxError> {
        if amount_minor <= 0 || !(1..=MAX_INTERVAL_MONTHS).contains(&interval_months) {
            return Err(SandboxError::Conflict(
                "amount or interval out of range".into(),
            ));
        }
        let provider = self.payment(id).ok_or(SandboxError::NotFound)?.provider;
        let simulator = self.simulator(provider).ok_or(SandboxError::NotFound)?;
        self.update_payment(id, |p| match p.status {
            SimStatus::Open => {
                p.amount_minor = amount_minor;
                p.kind = SimKind::Subscription {
                    interval_months,
                    plan_ref: None,
                };
                simulator.sold_as_subscription(p);
                Ok(())
            }
            other => Err(SandboxError::Conflict(format!("payment is {other:?}"))),
        })?;
        simulator.pay(self, id).await?;
        self.payment(id).ok_or(SandboxError::NotFound)
    }

    /// The buyer's payment failed.
    ///
    /// # Errors
    /// Unknown payment, or not open.
    pub async fn decline_payment(&self, id: &str) -> Result<SimPayment, SandboxError> {
        let payment = self.set_status(id, SimStatus::Declined)?;
        self.dispatch(
            payment.provider,
            &payment.notify_url,
            &SimEvent::Declined(payment.clone()),
        )
        .await;
        Ok(payment)
    }

    /// The buyer cancelled, or the merchant closed the payment. No webhook.
    ///
    /// # Errors
    /// Unknown payment, or not open.
    pub fn cancel_payment(&self, id: &str) -> Result<SimPayment, SandboxError> {
        self.set_status(id, SimStatus::Canceled)
    }

    /// Move an open (or approved) payment to `status`.
    ///
    /// # Errors
    /// Unknown payment, or already finished.
    pub fn set_status(&self, id: &str, status: SimStatus) -> Result<SimPayment, SandboxError> {
        self.update_payment(id, |p| match p.status {
            SimStatus::Open | SimStatus::Approved => {
                p.status = status;
                Ok(p.clone())
            }
            other => Err(SandboxError::Conflict(format!("payment is {other:?}"))),
        })
    }

    /// Bill the next period of a subscription and send the renewal webhooks.
    ///
    /// # Errors
    /// Unknown subscription, or not active.
    pub async fn renew_subscription(&self, id: &str) -> Result<SimSubscription, SandboxError> {
        self.renew_subscription_at(id, SimPrice::default()).await
    }

    /// Bill the next period of a subscription at `price` and send the renewal webhooks: the
    /// price changed at the provider (another price of the product, a misconfigured plan), so
    /// this period and the later ones bill the new amount and currency, as a real provider's
    /// renewal then does. An empty `price` keeps the subscription's own.
    ///
    /// # Errors
    /// Unknown subscription, or not active; a price of zero or less.
    pub async fn renew_subscription_at(
        &self,
        id: &str,
        price: SimPrice,
    ) -> Result<SimSubscription, SandboxError> {
        if price.amount_minor.is_some_and(|a| a <= 0) {
            return Err(SandboxError::Conflict("amount out of range".into()));
        }
        let subscription = self.update_subscription(id, |s| {
            if s.status == SimSubscriptionStatus::Canceled {
                return Err(SandboxError::Conflict("subscription is canceled".into()));
            }
            s.amount_minor = price.amount_minor.unwrap_or(s.amount_minor);
            s.currency = price.currency.unwrap_or(s.currency);
            s.renewals += 1;
            // Counted from the anchor, not from the last end, so that a period that had to end
            // on a short month's last day does not move every later one (31 Jan, 28 Feb, 31 Mar).
            s.period_start_ms = s.period_end_ms;
            s.period_end_ms = add_months(
                s.anchor_ms,
                s.interval_months
                    .saturating_mul(s.renewals.saturating_add(1)),
            );
            Ok(s.clone())
        })?;
        let invoice = self.new_id(charge_prefix(subscription.provider));
        let subscription = self.update_subscription(id, |s| {
            s.charges.push(SimCharge {
                id: invoice.clone(),
                period_start_ms: s.period_start_ms,
                period_end_ms: s.period_end_ms,
                amount_minor: s.amount_minor,
                refunded_minor: 0,
            });
            Ok(s.clone())
        })?;
        self.dispatch(
            subscription.provider,
            &subscription.notify_url,
            &SimEvent::Renewed(subscription.clone(), invoice),
        )
        .await;
        Ok(subscription)
    }

    /// Fail the renewal of a subscription's next period (the buyer's card is declined when the
    /// paid period ends) and send the provider's past-due webhooks. The paid period stays: the
    /// provider retries, and a later successful `renew` bills the period that failed here.
    ///
    /// # Errors
    /// Unknown subscription, or canceled.
    pub async fn fail_renewal(&self, id: &str) -> Result<SimSubscription, SandboxError> {
        let subscription = self.subscription(id).ok_or(SandboxError::NotFound)?;
        if subscription.status == SimSubscriptionStatus::Canceled {
            return Err(SandboxError::Conflict("subscription is canceled".into()));
        }
        self.dispatch(
            subscription.provider,
            &subscription.notify_url,
            &SimEvent::RenewalFailed(subscription.clone()),
        )
        .await;
        Ok(subscription)
    }

    /// Cancel a subscription at period end (`at_period_end`) or now, and send the webhooks.
    ///
    /// # Errors
    /// Unknown subscription, or already canceled.
    pub async fn cancel_subscription(
        &self,
        id: &str,
        at_period_end: bool,
    ) -> Result<SimSubscription, SandboxError> {
        let subscription = self.update_subscription(id, |s| {
            if s.status == SimSubscriptionStatus::Canceled {
                return Err(SandboxError::Conflict("subscription is canceled".into()));
            }
            s.status = if at_period_end {
                SimSubscriptionStatus::CancelScheduled
            } else {
                SimSubscriptionStatus::Canceled
            };
            Ok(s.clone())
        })?;
        let event = if at_period_end {
            SimEvent::SubscriptionCancelScheduled(subscription.clone())
        } else {
            SimEvent::SubscriptionCanceled(subscription.clone())
        };
        self.dispatch(subscription.provider, &subscription.notify_url, &event)
            .await;
        Ok(subscription)
    }

    /// Refund `amount_minor` of a paid payment and send the webhooks.
    ///
    /// # Errors
    /// Unknown payment, not paid, or more than is left to refund.
    pub async fn refund_payment(
        &self,
        id: &str,
        amount_minor: i64,
    ) -> Result<SimPayment, SandboxError> {
        let payment = self.update_payment(id, |p| {
            if p.status != SimStatus::Paid {
                return Err(SandboxError::Conflict(
                    "only paid payments can be refunded".into(),
                ));
            }
            if amount_minor <= 0 || p.refunded_minor + amount_minor > p.amount_minor {
                return Err(SandboxError::Conflict("refund amount out of range".into()));
            }
            p.refunded_minor += amount_minor;
            Ok(p.clone())
        })?;
        let event = SimEvent::Refunded {
            payment: payment.clone(),
            refund_id: self.new_id("re_sandbox_"),
            amount_minor,
        };
        self.dispatch(payment.provider, &payment.notify_url, &event)
            .await;
        Ok(payment)
    }

    /// Refund `amount_minor` of a subscription's charge `charge_id` (its latest when `None`),
    /// or lose a dispute of it (`dispute`: the whole charge), and send the webhooks.
    ///
    /// # Errors
    /// Unknown subscription or charge, or more than is left to refund.
    pub async fn refund_subscription_charge(
        &self,
        subscription_id: &str,
        charge_id: Option<&str>,
        amount_minor: Option<i64>,
        dispute: bool,
    ) -> Result<SimSubscription, SandboxError> {
        let mut refunded = None;
        let subscription = self.update_subscription(subscription_id, |s| {
            let charge = match charge_id {
                Some(id) => s.charges.iter_mut().find(|c| c.id == id),
                None => s.charges.last_mut(),
            }
            .ok_or(SandboxError::NotFound)?;
            let left = charge.amount_minor - charge.refunded_minor;
            let amount = if dispute {
                left
            } else {
                amount_minor.unwrap_or(left)
            };
            if amount <= 0 || amount > left {
                return Err(SandboxError::Conflict("refund amount out of range".into()));
            }
            charge.refunded_minor += amount;
            refunded = Some((charge.clone(), amount));
            Ok(s.clone())
        })?;
        let Some((charge, amount_minor)) = refunded else {
            return Err(SandboxError::NotFound);
        };
        let prefix = if dispute {
            "dp_sandbox_"
        } else {
            "re_sandbox_"
        };
        let event = SimEvent::ChargeRefunded {
            subscription: subscription.clone(),
            charge,
            refund_id: self.new_id(prefix),
            amount_minor,
            dispute,
        };
        self.dispatch(subscription.provider, &subscription.notify_url, &event)
            .await;
        Ok(subscription)
    }

    /// Send the webhooks `provider` sends for `event` to `url`, in order.
    pub async fn dispatch(&self, provider: ProviderId, url: &str, event: &SimEvent) {
        let Some(simulator) = self.simulator(provider) else {
            return;
        };
        let webhooks = simulator.webhooks(self, event);
        self.deliver(provider, url, webhooks, event.payment_id())
            .await;
    }

    /// Send `webhooks` of `provider` to `url`, in order, recorded as about `payment_id`: what
    /// [`Hub::dispatch`] does once a simulator has built them (a simulator's own API sends the
    /// events its provider sends for a call, e.g. a Stripe subscription update, through this).
    pub async fn deliver(
        &self,
        provider: ProviderId,
        url: &str,
        webhooks: Vec<SimWebhook>,
        payment_id: Option<String>,
    ) {
        for webhook in webhooks {
            let dropped = {
                let mut state = lock(&self.state);
                let drop = state.drop_webhooks > 0;
                state.drop_webhooks = state.drop_webhooks.saturating_sub(1);
                drop
            };
            let refusal = if dropped {
                Some("dropped on purpose")
            } else if !self.is_own_url(url) || url.is_empty() {
                // Defence in depth: payments are checked when stored, but nothing reaches
                // another address even if a simulator forgets.
                Some("not sent: not a URL of this service")
            } else {
                None
            };
            let mut delivery = if let Some(answer) = refusal {
                Delivery {
                    provider,
                    url: url.to_owned(),
                    status: None,
                    answer: answer.into(),
                    payment_id: None,
                    webhook: None,
                }
            } else {
                send(&self.http, provider, url, webhook.clone()).await
            };
            delivery.payment_id = payment_id.clone();
            delivery.webhook = Some(webhook);
            lock(&self.state).record(delivery);
        }
    }
}

fn provider_id<S: serde::Serializer>(p: &ProviderId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

fn currency_code<S: serde::Serializer>(c: &Currency, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.code())
}

impl Hub {
    /// Deliver every webhook sent so far about `payment_id` again, byte for byte, `times` times,
    /// all at once (to test duplicate and concurrent delivery). Returns the HTTP statuses.
    pub async fn redeliver(&self, payment_id: &str, times: u32) -> Vec<Option<u16>> {
        let sent: Vec<Delivery> = lock(&self.state)
            .deliveries
            .iter()
            .filter(|d| d.payment_id.as_deref() == Some(payment_id))
            .cloned()
            .collect();
        let mut attempts = Vec::new();
        for _ in 0..times.min(20) {
            for d in &sent {
                if let Some(webhook) = d.webhook.clone() {
                    let (http, provider, url) = (self.http.clone(), d.provider, d.url.clone());
                    attempts.push(tokio::spawn(async move {
                        send(&http, provider, &url, webhook).await
                    }));
                }
            }
        }
        let mut statuses = Vec::with_capacity(attempts.len());
        for handle in attempts {
            statuses.push(handle.await.ok().and_then(|d| d.status));
        }
        statuses
    }
}

impl SimEvent {
    /// The payment the event is about, when it is about one.
    #[must_use]
    pub fn payment_id(&self) -> Option<String> {
        match self {
            SimEvent::Paid(p)
            | SimEvent::Approved(p)
            | SimEvent::Declined(p)
            | SimEvent::SubscriptionStarted(p, _) => Some(p.id.clone()),
            SimEvent::Refunded { payment, .. } => Some(payment.id.clone()),
            SimEvent::Renewed(s, _)
            | SimEvent::ChargeRefunded {
                subscription: s, ..
            }
            | SimEvent::RenewalFailed(s)
            | SimEvent::SubscriptionCancelScheduled(s)
            | SimEvent::SubscriptionCanceled(s) => Some(s.payment_id.clone()),
        }
    }
}

/// The id prefix of a provider's charge of a subscription period, as the provider spells its ids.
fn charge_prefix(provider: ProviderId) -> &'static str {
    match provider {
        ProviderId::CardGateway => "in_sandbox_",
        ProviderId::WalletGlobal => "SALE-SANDBOX-",
        ProviderId::MorA => "tran_sandbox_",
        ProviderId::MorB => "pay_sandbox_",
        ProviderId::MorC | ProviderId::WalletQr | ProviderId::WalletWeb => "pmt_sandbox_",
    }
}

/// Post one webhook and record what Tally answered.
async fn send(
    http: &reqwest::Client,
    provider: ProviderId,
    url: &str,
    webhook: SimWebhook,
) -> Delivery {
    let mut request = http
        .post(url)
        .header("content-type", webhook.content_type)
        .body(webhook.body);
    for (name, value) in webhook.headers {
        request = request.header(name, value);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let answer: String = response
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect();
            Delivery {
                provider,
                url: url.to_owned(),
                status: Some(status),
                answer,
                payment_id: None,
                webhook: None,
            }
        }
        Err(e) => Delivery {
            provider,
            url: url.to_owned(),
            status: None,
            answer: format!("unreachable: {e}").chars().take(200).collect(),
            payment_id: None,
            webhook: None,
        },
    }
}

/// `ms` plus `months` calendar months in UTC, as providers bill: the domain's own calendar
/// arithmetic (the same day of the month and time of day, or the month's last day when it is
/// shorter; saturating past its range).
#[must_use]
pub fn add_months(ms: i64, months: u32) -> i64 {
    domain::Timestamp::from_unix_millis(ms)
        .plus_calendar_months(months)
        .unix_millis()
}

#[cfg(test)]
mod calendar_tests {
    use super::add_months;

    fn ms(date: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(date)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn months_are_calendar_months() {
        // A yearly plan bought on 24 Nov 2026 renews on 24 Nov 2027, not 19 Nov.
        assert_eq!(
            add_months(ms("2026-11-24T10:00:00Z"), 12),
            ms("2027-11-24T10:00:00Z")
        );
        assert_eq!(
            add_months(ms("2027-01-31T08:30:00Z"), 1),
            ms("2027-02-28T08:30:00Z")
        );
        assert_eq!(
            add_months(ms("2028-01-31T08:30:00Z"), 1),
            ms("2028-02-29T08:30:00Z"),
            "leap year"
        );
        assert_eq!(
            add_months(ms("2027-01-31T00:00:00Z"), 2),
            ms("2027-03-31T00:00:00Z"),
            "counted from the anchor, the short month does not stick"
        );
        assert_eq!(add_months(i64::MAX - 1, 1), i64::MAX);
    }
}

#[cfg(test)]
mod own_url_tests {
    use super::*;

    struct Epoch;

    impl Clock for Epoch {
        fn now(&self) -> domain::Timestamp {
            domain::Timestamp::from_unix_millis(0)
        }
    }

    #[test]
    fn only_urls_of_the_service_itself_are_its_own() {
        let hub = Hub::new("http://127.0.0.1:8080", Arc::new(Epoch));
        for own in [
            "",
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/api/payment/webhook/card_gateway",
            "http://127.0.0.1:8080/payment-success?orderId=ord_1",
        ] {
            assert!(hub.is_own_url(own), "{own}");
        }
        for foreign in [
            "http://127.0.0.1:8081/api/payment/webhook/card_gateway",
            "https://127.0.0.1:8080/",
            "http://127.0.0.1:8080@evil.example/",
            "http://user:pw@127.0.0.1:8080/",
            "http://127.0.0.1:8080.evil.example/",
            "http://localhost:8080/",
            "//evil.example/",
            "/relative",
            "javascript:alert(1)",
        ] {
            assert!(!hub.is_own_url(foreign), "{foreign}");
        }
        let under_path = Hub::new("https://example.com/billing", Arc::new(Epoch));
        assert!(under_path.is_own_url("https://example.com/billing/api/x"));
        assert!(!under_path.is_own_url("https://example.com/billingx/api"));
        assert!(!under_path.is_own_url("https://example.com/other"));
        assert_eq!(
            hub.own_url("success_url", "https://evil.example/")
                .unwrap_err()
                .to_string(),
            "success_url must be a URL of this service (http://127.0.0.1:8080/...)"
        );
    }
}

#[cfg(test)]
mod test_control_tests {
    use super::*;

    struct Epoch;

    impl Clock for Epoch {
        fn now(&self) -> domain::Timestamp {
            domain::Timestamp::from_unix_millis(1_795_000_000_000)
        }
    }

    /// A provider that sends nothing and remembers what it was asked to tell.
    #[derive(Default)]
    struct Recorder {
        told: Mutex<Vec<SimEvent>>,
    }

    #[async_trait::async_trait]
    impl Simulator for Recorder {
        fn provider(&self) -> ProviderId {
            ProviderId::CardGateway
        }

        fn api(&self, _hub: Arc<Hub>) -> poem::Route {
            poem::Route::new()
        }

        fn webhooks(&self, _hub: &Hub, event: &SimEvent) -> Vec<SimWebhook> {
            lock(&self.told).push(event.clone());
            Vec::new()
        }

        fn sold_as_subscription(&self, payment: &mut SimPayment) {
            payment
                .extra
                .insert("sold".into(), "as subscription".into());
        }
    }

    fn open_payment(hub: &Hub, id: &str) {
        let payment = SimPayment {
            id: id.into(),
            provider: ProviderId::CardGateway,
            order_id: "ord_1".into(),
            amount_minor: 499,
            currency: Currency::Usd,
            kind: SimKind::OneTime,
            status: SimStatus::Open,
            success_url: String::new(),
            cancel_url: String::new(),
            notify_url: String::new(),
            refunded_minor: 0,
            subscription_id: None,
            created_at_ms: hub.now_ms(),
            extra: BTreeMap::new(),
        };
        hub.insert_payment(payment, ["success", "cancel", "notify"])
            .expect("own URLs");
    }

    fn hub_with_recorder() -> (Hub, Arc<Recorder>) {
        let hub = Hub::new("http://127.0.0.1:8080", Arc::new(Epoch));
        let recorder = Arc::new(Recorder::default());
        hub.register(recorder.clone());
        (hub, recorder)
    }

    #[tokio::test]
    async fn a_one_time_checkout_billed_as_a_subscription_starts_one_naming_its_order() {
        let (hub, recorder) = hub_with_recorder();
        open_payment(&hub, "cs_1");
        let paid = hub.complete_as_subscription("cs_1", 1, 3).await.unwrap();
        assert_eq!(paid.status, SimStatus::Paid);
        assert_eq!(paid.amount_minor, 1);
        assert_eq!(
            paid.extra.get("sold").map(String::as_str),
            Some("as subscription")
        );
        let subscription = hub
            .subscription(paid.subscription_id.as_deref().expect("a subscription"))
            .expect("kept");
        assert_eq!(subscription.order_id, "ord_1");
        assert_eq!(subscription.amount_minor, 1);
        assert_eq!(subscription.interval_months, 3);
        assert_eq!(subscription.charges.len(), 1);
        assert_eq!(subscription.charges[0].amount_minor, 1);
        let told = lock(&recorder.told).clone();
        assert!(
            matches!(told.as_slice(), [SimEvent::SubscriptionStarted(p, s)] if p.id == "cs_1" && s.id == subscription.id),
            "{told:?}"
        );
        assert_eq!(
            hub.complete_as_subscription("cs_1", 1, 1).await,
            Err(SandboxError::Conflict("payment is Paid".into())),
            "only an open checkout"
        );
    }

    #[tokio::test]
    async fn a_subscription_is_billed_only_a_positive_amount_and_a_sane_interval() {
        let (hub, recorder) = hub_with_recorder();
        open_payment(&hub, "cs_2");
        for (amount, months) in [(0, 1), (-5, 1), (1, 0), (1, 13)] {
            assert!(
                matches!(
                    hub.complete_as_subscription("cs_2", amount, months).await,
                    Err(SandboxError::Conflict(_))
                ),
                "{amount} every {months}"
            );
        }
        assert_eq!(
            hub.complete_as_subscription("nope", 1, 1).await,
            Err(SandboxError::NotFound)
        );
        assert_eq!(hub.payment("cs_2").map(|p| p.status), Some(SimStatus::Open));
        assert!(lock(&recorder.told).is_empty(), "nothing sent");
    }

    #[tokio::test]
    async fn a_renewal_at_a_changed_price_bills_it_from_then_on() {
        let (hub, recorder) = hub_with_recorder();
        open_payment(&hub, "cs_3");
        let paid = hub.complete_as_subscription("cs_3", 999, 1).await.unwrap();
        let id = paid.subscription_id.expect("a subscription");
        let cheap = SimPrice {
            amount_minor: Some(1),
            currency: None,
        };
        let renewed = hub.renew_subscription_at(&id, cheap).await.unwrap();
        assert_eq!((renewed.amount_minor, renewed.currency), (1, Currency::Usd));
        let euros = SimPrice {
            amount_minor: Some(999),
            currency: Some(Currency::Eur),
        };
        let renewed = hub.renew_subscription_at(&id, euros).await.unwrap();
        assert_eq!(
            (renewed.amount_minor, renewed.currency),
            (999, Currency::Eur)
        );
        let same = hub.renew_subscription(&id).await.unwrap();
        assert_eq!((same.amount_minor, same.currency), (999, Currency::Eur));
        let billed: Vec<i64> = same.charges.iter().map(|c| c.amount_minor).collect();
        assert_eq!(billed, [999, 1, 999, 999]);
        assert_eq!(same.renewals, 3);
        let renewals: Vec<(i64, Currency)> = lock(&recorder.told)
            .iter()
            .filter_map(|e| match e {
                SimEvent::Renewed(s, charge) => {
                    let c = s.charges.iter().find(|c| &c.id == charge)?;
                    Some((c.amount_minor, s.currency))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            renewals,
            [
                (1, Currency::Usd),
                (999, Currency::Eur),
                (999, Currency::Eur)
            ]
        );
        let free = SimPrice {
            amount_minor: Some(0),
            currency: None,
        };
        assert!(matches!(
            hub.renew_subscription_at(&id, free).await,
            Err(SandboxError::Conflict(_))
        ));
    }

    #[tokio::test]
    async fn a_failed_renewal_tells_the_service_and_bills_nothing() {
        let (hub, recorder) = hub_with_recorder();
        open_payment(&hub, "cs_4");
        let paid = hub.complete_as_subscription("cs_4", 999, 1).await.unwrap();
        let id = paid.subscription_id.expect("a subscription");
        let before = hub.subscription(&id).unwrap();
        let failed = hub.fail_renewal(&id).await.unwrap();
        assert_eq!(failed, before, "the paid period and the charges stay");
        assert!(matches!(
            lock(&recorder.told).last(),
            Some(SimEvent::RenewalFailed(s)) if s.id == id
        ));
        assert_eq!(hub.fail_renewal("nope").await, Err(SandboxError::NotFound));
        hub.cancel_subscription(&id, false).await.unwrap();
        assert!(matches!(
            hub.fail_renewal(&id).await,
            Err(SandboxError::Conflict(_))
        ));
    }
}
