//! Saved payment methods: what a provider keeps when a buyer consents to charges the merchant
//! starts later (a Stripe card attached to a Customer, a PayPal account in PayPal's vault), with
//! the behaviour a test gives the method's next charges; and the two hub operations those
//! charges need: storing a payment once per idempotency key, and holding a webhook back until a
//! test redelivers it.

use domain::ProviderId;
use serde::Serialize;

use super::{Delivery, ForeignUrl, Hub, SandboxError, SimPayment, SimWebhook, lock, provider_id};

/// What a saved method's off-session charges do, from when a test sets it until it is set
/// again (`POST /sandbox/api/payment-methods/{id}/behaviour`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SimBehaviour {
    /// Paid at once; the payment webhook follows.
    #[default]
    Succeed,
    /// Declined by the issuer (`card_declined`); the failure webhook follows.
    Decline,
    /// The issuer wants the buyer present (3-D Secure): refused off-session.
    AuthenticationRequired,
    /// Accepted as processing; paid or failed only when a test settles it.
    Slow,
    /// Paid; the payment webhook is delivered twice.
    DuplicateWebhook,
    /// Paid; the payment webhook is held back until a test redelivers it.
    LateWebhook,
}

impl SimBehaviour {
    /// Every behaviour.
    pub const ALL: [SimBehaviour; 6] = [
        SimBehaviour::Succeed,
        SimBehaviour::Decline,
        SimBehaviour::AuthenticationRequired,
        SimBehaviour::Slow,
        SimBehaviour::DuplicateWebhook,
        SimBehaviour::LateWebhook,
    ];

    /// Its name in the sandbox's API (`authentication_required`).
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            SimBehaviour::Succeed => "succeed",
            SimBehaviour::Decline => "decline",
            SimBehaviour::AuthenticationRequired => "authentication_required",
            SimBehaviour::Slow => "slow",
            SimBehaviour::DuplicateWebhook => "duplicate_webhook",
            SimBehaviour::LateWebhook => "late_webhook",
        }
    }

    /// The behaviour a name names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.code() == code)
    }
}

/// A payment method a provider saved for charges the merchant starts later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimMethod {
    /// The provider's id for it (`pm_…`).
    pub id: String,
    /// Provider.
    #[serde(serialize_with = "provider_id")]
    pub provider: ProviderId,
    /// The provider's customer it belongs to (`cus_…`).
    pub customer_id: String,
    /// A card's brand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brand: Option<String>,
    /// A card's last four digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last4: Option<String>,
    /// A wallet's account (the e-mail address of a PayPal account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wallet_account: Option<String>,
    /// Tally's order whose checkout saved it.
    pub order_id: String,
    /// The checkout that saved it.
    pub payment_id: String,
    /// What its next off-session charges do.
    pub next: SimBehaviour,
    /// The provider forgot it at the merchant's request (Stripe detached it, PayPal deleted its
    /// payment token, Dodo's on-demand subscription was cancelled), ms since the epoch: it can
    /// no longer be charged. `null` while it can.
    pub forgotten_at_ms: Option<i64>,
    /// Saved, ms since the epoch.
    pub created_at_ms: i64,
}

impl SimMethod {
    /// Whether the provider forgot it.
    #[must_use]
    pub fn forgotten(&self) -> bool {
        self.forgotten_at_ms.is_some()
    }
}

impl Hub {
    /// Keep a saved method (replacing the one of the same id).
    pub fn save_method(&self, method: SimMethod) {
        // The oldest method may be dropped to make room: see `store`.
        let _oldest = lock(&self.state).methods.insert(method.id.clone(), method);
    }

    /// A saved method by id.
    #[must_use]
    pub fn method(&self, id: &str) -> Option<SimMethod> {
        lock(&self.state).methods.get(id).cloned()
    }

    /// Every saved method, newest first.
    #[must_use]
    pub fn methods(&self) -> Vec<SimMethod> {
        lock(&self.state).methods.newest_first().cloned().collect()
    }

    /// The methods `order_id`'s checkouts saved, newest first.
    #[must_use]
    pub fn methods_for_order(&self, order_id: &str) -> Vec<SimMethod> {
        lock(&self.state)
            .methods
            .newest_first()
            .filter(|m| m.order_id == order_id)
            .cloned()
            .collect()
    }

    /// Set what a saved method's next off-session charges do.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`] for an unknown method.
    pub fn set_method_behaviour(
        &self,
        id: &str,
        next: SimBehaviour,
    ) -> Result<SimMethod, SandboxError> {
        let mut state = lock(&self.state);
        let method = state.methods.get_mut(id).ok_or(SandboxError::NotFound)?;
        method.next = next;
        Ok(method.clone())
    }

    /// Forget a saved method of `provider` at the merchant's request: its off-session charges
    /// are refused from now on. The method as it was before, so that a simulator can answer a
    /// method forgotten already the way its provider does.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`] for a method unknown or of another provider.
    pub fn forget_method(&self, provider: ProviderId, id: &str) -> Result<SimMethod, SandboxError> {
        let now_ms = self.now_ms();
        let mut state = lock(&self.state);
        let method = state
            .methods
            .get_mut(id)
            .filter(|m| m.provider == provider)
            .ok_or(SandboxError::NotFound)?;
        let before = method.clone();
        method.forgotten_at_ms = method.forgotten_at_ms.or(Some(now_ms));
        Ok(before)
    }

    /// Store a new payment, once its URLs are the service's own (see [`Hub::insert_payment`]),
    /// unless a payment of the same provider already took the value of `key` (a name among the
    /// simulator's [`crate::Simulator::lookup_keys`], and the value `payment.extra` carries
    /// under it): then that payment, and nothing is stored. Checked and stored under one lock, so
    /// that the same idempotency key sent twice at once stores one payment.
    ///
    /// # Errors
    /// [`ForeignUrl`] naming the first foreign URL; nothing is stored.
    pub fn insert_payment_once(
        &self,
        payment: SimPayment,
        fields: [&'static str; 3],
        key: (&'static str, &str),
    ) -> Result<Option<SimPayment>, ForeignUrl> {
        self.own_url(fields[0], &payment.success_url)?;
        self.own_url(fields[1], &payment.cancel_url)?;
        self.own_url(fields[2], &payment.notify_url)?;
        let mut state = lock(&self.state);
        let (name, value) = key;
        if let Some(existing) = state.payments.looked_up(payment.provider, name, value) {
            return Ok(Some(existing.clone()));
        }
        state.payments.insert(payment);
        Ok(None)
    }

    /// Record `webhooks` of `provider` for `url` about `payment_id` without sending them (a
    /// provider's late delivery): [`Hub::redeliver`] sends them, byte for byte.
    pub fn hold(
        &self,
        provider: ProviderId,
        url: &str,
        webhooks: Vec<SimWebhook>,
        payment_id: &str,
        why: &str,
    ) {
        let mut state = lock(&self.state);
        for webhook in webhooks {
            state.record(Delivery {
                provider,
                url: url.to_owned(),
                status: None,
                answer: why.chars().take(200).collect(),
                payment_id: Some(payment_id.to_owned()),
                webhook: Some(webhook),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_behaviour_is_named_and_read_back_by_its_name() {
        for behaviour in SimBehaviour::ALL {
            assert_eq!(SimBehaviour::parse(behaviour.code()), Some(behaviour));
        }
        assert_eq!(SimBehaviour::parse("explode"), None);
        assert_eq!(SimBehaviour::default(), SimBehaviour::Succeed);
    }
}
