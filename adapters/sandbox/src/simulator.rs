//! The contract each simulated provider implements.

use std::sync::Arc;

use async_trait::async_trait;
use domain::ProviderId;

use crate::hub::{Hub, SandboxError, SimEvent, SimPayment, SimWebhook};

/// One simulated provider.
#[async_trait]
pub trait Simulator: Send + Sync + 'static {
    /// Which provider.
    fn provider(&self) -> ProviderId;

    /// The provider API endpoints the gateway calls, mounted at `/sandbox/<provider id>`. They
    /// MUST check authentication, signatures and encodings as the real provider does, and
    /// answer in its format.
    fn api(&self, hub: Arc<Hub>) -> poem::Route;

    /// The webhooks the provider sends for `event`, signed exactly as it signs them. Empty when
    /// the provider sends nothing for that event.
    fn webhooks(&self, hub: &Hub, event: &SimEvent) -> Vec<SimWebhook>;

    /// The names in [`SimPayment::extra`] this provider's API finds payments by (an idempotency
    /// key, a capture id): the hub indexes them, so that [`Hub::payment_by`] costs the same
    /// however many payments it keeps. None by default.
    fn lookup_keys(&self) -> &'static [&'static str] {
        &[]
    }

    /// A checkout opened for a one-time payment is about to be billed as a subscription (see
    /// [`Hub::complete_as_subscription`]): carry over what the provider's subscription would
    /// take from it (Stripe copies no session metadata onto a subscription, so the sandbox
    /// names the order there too). Nothing by default.
    fn sold_as_subscription(&self, _payment: &mut SimPayment) {}

    /// The buyer pressed Pay on the hosted page: complete the payment (or, for providers with a
    /// separate capture step, approve it) and return where the browser goes next.
    ///
    /// # Errors
    /// Unknown or already finished payment.
    async fn pay(&self, hub: &Hub, payment_id: &str) -> Result<String, SandboxError> {
        let payment = hub.complete_payment(payment_id).await?;
        Ok(self.success_redirect(&payment))
    }

    /// Whether the provider tells the merchant that `payment`'s card was declined (a webhook).
    /// When it tells nothing, its hosted checkout keeps the buyer on the page, open for another
    /// try, rather than sending them back to the merchant as if they had cancelled. Told by
    /// default.
    fn tells_declines(&self, _payment: &SimPayment) -> bool {
        true
    }

    /// Where the browser goes after a successful payment (the provider may add parameters).
    fn success_redirect(&self, payment: &SimPayment) -> String {
        payment.success_url.clone()
    }
}
