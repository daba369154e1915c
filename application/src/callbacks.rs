//! Where a provider sends the buyer back and posts its webhooks. The addresses belong to the
//! HTTP adapters (their routes); the wiring builds them from the adapters' own route constants
//! and hands them to the service as a value, so no use case spells a path.

use domain::{OrderId, ProviderId};

/// The callback addresses of one deployment: each is a prefix the order id or provider id
/// completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackUrls {
    success_before_order: String,
    cancel_before_order: String,
    webhook_before_provider: String,
    plan_change_returns: Option<(String, String)>,
}

impl CallbackUrls {
    /// Addresses completed by appending: `success_before_order` + an order id is the page the
    /// buyer returns to after paying, `cancel_before_order` + an order id the one after giving
    /// up, `webhook_before_provider` + a provider id where that provider posts its events.
    #[must_use]
    pub fn new(
        success_before_order: String,
        cancel_before_order: String,
        webhook_before_provider: String,
    ) -> Self {
        Self {
            success_before_order,
            cancel_before_order,
            webhook_before_provider,
            plan_change_returns: None,
        }
    }

    /// The same addresses, with the pages a subscriber returns to from approving a plan change
    /// at the provider (`approved`) or declining it there (`declined`).
    #[must_use]
    pub fn with_plan_change_returns(mut self, approved: String, declined: String) -> Self {
        self.plan_change_returns = Some((approved, declined));
        self
    }

    /// Where a subscriber returns after approving a plan change at the provider.
    #[must_use]
    pub fn plan_change_approved(&self) -> Option<String> {
        self.plan_change_returns.as_ref().map(|(a, _)| a.clone())
    }

    /// Where a subscriber returns after declining a plan change at the provider.
    #[must_use]
    pub fn plan_change_declined(&self) -> Option<String> {
        self.plan_change_returns.as_ref().map(|(_, d)| d.clone())
    }

    /// Where the buyer returns after paying for `order`.
    #[must_use]
    pub fn success(&self, order: &OrderId) -> String {
        format!("{}{order}", self.success_before_order)
    }

    /// Where the buyer returns after giving up on `order`.
    #[must_use]
    pub fn cancel(&self, order: &OrderId) -> String {
        format!("{}{order}", self.cancel_before_order)
    }

    /// Where `provider` posts its webhooks.
    #[must_use]
    pub fn webhook(&self, provider: ProviderId) -> String {
        format!("{}{}", self.webhook_before_provider, provider.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_is_its_prefix_completed_by_the_id() {
        let urls = CallbackUrls::new("s?o=".into(), "c?o=".into(), "w/".into());
        let order = OrderId::new("ord_1".to_owned()).unwrap();
        assert_eq!(urls.success(&order), "s?o=ord_1");
        assert_eq!(urls.cancel(&order), "c?o=ord_1");
        assert_eq!(urls.webhook(ProviderId::MorA), "w/mor_a");
    }
}
