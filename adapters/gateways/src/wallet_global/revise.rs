//! PayPal's plan change (issue 19): `POST /v1/billing/subscriptions/{id}/revise` with the new
//! `plan_id` and the pages the subscriber returns to; PayPal answers the subscription with an
//! `approve` link, where the subscriber consents, after which the subscription is on the new plan
//! and bills its price from the next billing cycle (no proration). PayPal then sends
//! `BILLING.SUBSCRIPTION.UPDATED`; the gateway reads the subscription back with `?fields=plan`
//! (or the plan itself) for the plan id, price and interval it bills now. A renewal's
//! `PAYMENT.SALE.COMPLETED` reports the same, before the renewal, in case the update was lost.
//!
//! Sources: <https://developer.paypal.com/docs/api/subscriptions/v1/#subscriptions_revise>,
//! <https://developer.paypal.com/docs/subscriptions/customize/revise-subscriptions/>, PayPal's
//! published revise example (`subscription_revise_request`/`_response`), the `fields` parameter
//! of "show subscription details" (`last_failed_payment` and `plan`).

use application::ports::{GatewayError, PlanChangeRequest};
use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::transformers::{Amount, Link, PlanOverride};
use domain::{Money, ProviderId};

/// The registrable domain of PayPal's own pages (`www.paypal.com`, `www.sandbox.paypal.com`).
const PAYPAL_DOMAIN: &str = "paypal.com";

/// `POST /v1/billing/subscriptions/{id}/revise` body.
#[derive(Debug, Serialize)]
pub struct ReviseSubscription<'a> {
    plan_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    application_context: Option<ReviseContext<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanOverride>,
}

/// The revise's `application_context`: where the subscriber returns from the approval.
#[derive(Debug, Serialize)]
struct ReviseContext<'a> {
    shipping_preference: &'static str,
    return_url: &'a str,
    cancel_url: &'a str,
}

impl<'a> ReviseSubscription<'a> {
    /// The revise to the request's plan (its `walletGlobalPlanId`), with the return pages when
    /// the wiring configured them.
    ///
    /// # Errors
    /// [`GatewayError::Rejected`] when the plan has no `walletGlobalPlanId`.
    pub fn for_request(request: &'a PlanChangeRequest) -> Result<Self, GatewayError> {
        let plan_id = request
            .plan
            .provider_refs()
            .get(ProviderId::WalletGlobal)
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                GatewayError::Rejected(format!(
                    "plan {} has no walletGlobalPlanId",
                    request.snapshot.plan_id
                ))
            })?;
        let application_context = match (&request.return_url, &request.cancel_url) {
            (Some(return_url), Some(cancel_url)) => Some(ReviseContext {
                shipping_preference: "NO_SHIPPING",
                return_url,
                cancel_url,
            }),
            _ => None,
        };
        Ok(Self {
            plan_id,
            application_context,
            plan: None,
        })
    }

    /// Add the new plan's price and interval for the local sandbox, which has no plan catalog
    /// (PayPal's revise takes the same `plan` override).
    #[must_use]
    pub fn priced_for_sandbox(mut self, request: &PlanChangeRequest) -> Self {
        self.plan = Some(PlanOverride::for_sandbox(&request.snapshot));
        self
    }
}

/// The revise's answer: the subscription's new plan id and the links, `approve` among them.
#[derive(Debug, Clone, Deserialize)]
pub struct ReviseAnswer {
    /// The plan asked for.
    #[serde(default)]
    pub plan_id: Option<String>,
    /// `approve` (the subscriber's consent page), `self`, `edit`, ….
    #[serde(default)]
    pub links: Vec<Link>,
}

impl ReviseAnswer {
    /// The approval page, when PayPal wants the subscriber's consent (a subscription paid with
    /// PayPal does; one paid by card directly does not).
    #[must_use]
    pub fn approve_link(&self) -> Option<&str> {
        self.links
            .iter()
            .find(|l| l.rel == "approve")
            .map(|l| l.href.as_str())
    }
}

/// Whether `link` may be shown to a subscriber as PayPal's approval page: an `https` page of
/// PayPal's own domain, or a page on the very origin of the API Tally is configured to call (the
/// local sandbox, a test double). Anything else (another host, a look-alike domain, a script
/// URL) is refused, so an answer can never send the subscriber elsewhere.
#[must_use]
pub fn approval_link_allowed(link: &str, api_base_url: &str) -> bool {
    let (Ok(link), Ok(base)) = (Url::parse(link), Url::parse(api_base_url)) else {
        return false;
    };
    let Some(host) = link.host_str() else {
        return false;
    };
    if !link.username().is_empty() || link.password().is_some() {
        return false;
    }
    let paypal = link.scheme() == "https"
        && (host == PAYPAL_DOMAIN || host.ends_with(&format!(".{PAYPAL_DOMAIN}")));
    let same_origin = matches!(link.scheme(), "https" | "http")
        && link.scheme() == base.scheme()
        && Some(host) == base.host_str()
        && link.port_or_known_default() == base.port_or_known_default();
    paypal || same_origin
}

/// A plan's details (`GET /v1/billing/plans/{id}`, or a subscription's `plan` with
/// `?fields=plan`): what it bills.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PlanDetails {
    /// The plan's id (absent in a subscription's inline plan).
    #[serde(default)]
    pub id: Option<String>,
    /// Its billing cycles: trial cycles first, then the regular one.
    #[serde(default)]
    pub billing_cycles: Vec<BillingCycle>,
}

/// One billing cycle of a plan.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct BillingCycle {
    /// `TRIAL` or `REGULAR`.
    #[serde(default)]
    pub tenure_type: Option<String>,
    /// Its price.
    #[serde(default)]
    pub pricing_scheme: Option<CyclePricing>,
    /// How often it bills.
    #[serde(default)]
    pub frequency: Option<CycleFrequency>,
}

/// A cycle's `pricing_scheme`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CyclePricing {
    /// The fixed price per cycle.
    #[serde(default)]
    pub fixed_price: Option<Amount>,
}

/// A cycle's `frequency`.
#[derive(Debug, Clone, Deserialize)]
pub struct CycleFrequency {
    /// `DAY`, `WEEK`, `MONTH` or `YEAR`.
    pub interval_unit: String,
    /// How many units one cycle lasts.
    #[serde(default = "one")]
    pub interval_count: u32,
}

const fn one() -> u32 {
    1
}

impl PlanDetails {
    /// The regular cycle's price and interval in months: the cycle whose `tenure_type` is
    /// `REGULAR`, or the only cycle when none says. The interval is `0` for a plan billed in
    /// days or weeks, which no Tally plan is, so that the event is a mismatch rather than
    /// unchecked; `None` when the cycle states no frequency.
    ///
    /// # Errors
    /// Why the price cannot be read (no regular cycle, no fixed price, an unreadable amount).
    pub fn regular_terms(&self) -> Result<(Money, Option<u32>), String> {
        let regular = self
            .billing_cycles
            .iter()
            .find(|c| c.tenure_type.as_deref() == Some("REGULAR"))
            .or(match self.billing_cycles.as_slice() {
                [only] if only.tenure_type.is_none() => Some(only),
                _ => None,
            })
            .ok_or("the plan has no regular billing cycle")?;
        let price = regular
            .pricing_scheme
            .as_ref()
            .and_then(|p| p.fixed_price.as_ref())
            .ok_or("the regular cycle has no fixed price")?;
        let price = Money::try_from(price).map_err(|e| format!("the plan's price: {e}"))?;
        let months = regular
            .frequency
            .as_ref()
            .map(|f| match f.interval_unit.as_str() {
                "MONTH" => f.interval_count,
                "YEAR" => f.interval_count.saturating_mul(12),
                _ => 0,
            });
        Ok((price, months))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::Currency;

    const LIVE: &str = "https://api-m.paypal.com";

    #[test]
    fn approval_pages_are_paypal_pages_or_on_the_configured_api_origin() {
        let paypal = "https://www.paypal.com/webapps/billing/subscriptions/update?ba_token=BA-2M539689T3856352J";
        assert!(approval_link_allowed(paypal, LIVE));
        assert!(approval_link_allowed(
            "https://www.sandbox.paypal.com/webapps/billing/subscriptions/update?ba_token=BA-1",
            "https://api-m.sandbox.paypal.com"
        ));
        let local = "http://127.0.0.1:8080/sandbox/wallet_global";
        assert!(approval_link_allowed(
            "http://127.0.0.1:8080/sandbox/wallet_global/revise/I-1?ba_token=BA-1",
            local
        ));
        for foreign in [
            "https://paypal.com.evil.example/approve",
            "https://evilpaypal.com/approve",
            "http://www.paypal.com/approve",
            "https://user@www.paypal.com/approve",
            "javascript:alert(1)",
            "http://127.0.0.1:9999/sandbox/wallet_global/revise/I-1",
            "https://127.0.0.1:8080/sandbox/wallet_global/revise/I-1",
            "not a url",
        ] {
            let base = if foreign.contains("127.0.0.1") {
                local
            } else {
                LIVE
            };
            assert!(!approval_link_allowed(foreign, base), "{foreign}");
        }
    }

    #[test]
    fn the_regular_cycle_gives_the_price_and_the_interval_in_months() {
        let plan: PlanDetails = serde_json::from_value(serde_json::json!({
            "id": "P-5ML4271244454362WXNWU5NQ",
            "billing_cycles": [
                { "frequency": { "interval_unit": "MONTH", "interval_count": 1 }, "tenure_type": "TRIAL",
                  "sequence": 1, "total_cycles": 2, "pricing_scheme": { "fixed_price": { "value": "3", "currency_code": "USD" } } },
                { "frequency": { "interval_unit": "YEAR", "interval_count": 1 }, "tenure_type": "REGULAR",
                  "sequence": 2, "total_cycles": 12, "pricing_scheme": { "fixed_price": { "currency_code": "USD", "value": "100.00" } } }
            ]
        }))
        .unwrap();
        assert_eq!(
            plan.regular_terms(),
            Ok((Money::from_minor(10_000, Currency::Usd).unwrap(), Some(12)))
        );
        let weekly: PlanDetails = serde_json::from_value(serde_json::json!({
            "billing_cycles": [{ "frequency": { "interval_unit": "WEEK" },
              "pricing_scheme": { "fixed_price": { "value": "1.00", "currency_code": "USD" } } }]
        }))
        .unwrap();
        assert_eq!(weekly.regular_terms().unwrap().1, Some(0));
        assert!(PlanDetails::default().regular_terms().is_err());
    }
}
