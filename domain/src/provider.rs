//! The seven payment providers and the capability matrix of spec section 2.1, as data.

use std::fmt;
use std::str::FromStr;

use crate::money::Currency;
use crate::plan::PlanType;

/// A payment provider, by the spec's neutral id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProviderId {
    /// China-market wallet with QR-code payment (WeChat Pay APIv3 Native).
    WalletQr,
    /// China-market web wallet (Alipay page pay).
    WalletWeb,
    /// Global card gateway (Stripe Checkout).
    CardGateway,
    /// Global wallet (PayPal Orders v2 and Subscriptions).
    WalletGlobal,
    /// Merchant of Record A (Creem).
    MorA,
    /// Merchant of Record B (Dodo Payments).
    MorB,
    /// Merchant of Record C (Waffo Pancake).
    MorC,
}

/// Whether a provider offers a sandbox or test mode for trying payments without real money.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestMode {
    /// The provider has a sandbox or test mode.
    Available,
    /// No test mode: testing uses real payments of the smallest amount (0.01 CNY).
    RealPaymentsOnly,
    /// The spec does not say; consult the provider's documentation.
    Unspecified,
}

/// Which currencies a provider accepts for which plan types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrencyRule {
    /// Only this currency, for every plan type.
    Only(Currency),
    /// Any currency Tally supports.
    Any,
    /// Any currency, except this one for subscriptions.
    AnyButNotForSubscriptions(Currency),
}

/// What a provider's catalog reference names on the provider's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefKind {
    /// A price (Stripe's `price_…`): the amount and interval live at the provider.
    PriceId,
    /// A billing plan (PayPal's `P-…`), needed to start a subscription.
    PlanId,
    /// A product (the merchants of record): the provider's own catalog entry.
    ProductId,
}

/// When a plan must carry its provider's reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefNeed {
    /// Every plan sold through the provider.
    EveryPlan,
    /// Only recurring plans; one-time and credits plans are priced per order.
    Subscriptions,
}

/// The catalog reference one provider takes, and its names at every edge
/// ([`ProviderId::reference`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RefField {
    /// The provider.
    pub provider: ProviderId,
    /// What the id names.
    pub kind: RefKind,
    /// The field as catalogs, the API and the store's plan document spell it (camelCase).
    pub field: &'static str,
    /// The same field in snake case, as Rust fields and i18n keys spell it.
    pub key: &'static str,
    /// When a plan needs it.
    pub need: RefNeed,
}

impl RefField {
    /// The reference of every provider that takes one, in the spec's order of providers.
    pub fn all() -> impl Iterator<Item = RefField> {
        ProviderId::ALL
            .into_iter()
            .filter_map(ProviderId::reference)
    }
}

/// Why a provider cannot take a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// The provider does not sell this plan type.
    #[error("{provider} does not support {plan_type} plans")]
    PlanTypeNotSupported {
        /// The provider.
        provider: ProviderId,
        /// The refused plan type.
        plan_type: PlanType,
    },
    /// The provider does not take this currency for this plan type.
    #[error("{provider} does not accept {currency} for {plan_type} plans")]
    CurrencyNotSupported {
        /// The provider.
        provider: ProviderId,
        /// The refused currency.
        currency: Currency,
        /// The plan type it was refused for.
        plan_type: PlanType,
    },
}

/// The error for a provider id that is not one of the seven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {0:?}")]
pub struct UnknownProvider(pub String);

impl ProviderId {
    /// Every provider, in the spec's order.
    pub const ALL: [ProviderId; 7] = [
        ProviderId::WalletQr,
        ProviderId::WalletWeb,
        ProviderId::CardGateway,
        ProviderId::WalletGlobal,
        ProviderId::MorA,
        ProviderId::MorB,
        ProviderId::MorC,
    ];

    /// The id exactly as the spec spells it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            ProviderId::WalletQr => "wallet_qr",
            ProviderId::WalletWeb => "wallet_web",
            ProviderId::CardGateway => "card_gateway",
            ProviderId::WalletGlobal => "wallet_global",
            ProviderId::MorA => "mor_a",
            ProviderId::MorB => "mor_b",
            ProviderId::MorC => "mor_c",
        }
    }

    /// The plan types this provider sells (spec 2.1).
    #[must_use]
    pub const fn plan_types(self) -> &'static [PlanType] {
        match self {
            ProviderId::WalletQr | ProviderId::WalletWeb => &[PlanType::OneTime, PlanType::Credits],
            ProviderId::CardGateway
            | ProviderId::WalletGlobal
            | ProviderId::MorA
            | ProviderId::MorB
            | ProviderId::MorC => &[PlanType::OneTime, PlanType::Recurring, PlanType::Credits],
        }
    }

    /// The provider's currency rule (spec 2.1 and section 8).
    #[must_use]
    pub const fn currency_rule(self) -> CurrencyRule {
        match self {
            ProviderId::WalletQr | ProviderId::WalletWeb => CurrencyRule::Only(Currency::Cny),
            ProviderId::MorC => CurrencyRule::AnyButNotForSubscriptions(Currency::Cny),
            ProviderId::CardGateway
            | ProviderId::WalletGlobal
            | ProviderId::MorA
            | ProviderId::MorB => CurrencyRule::Any,
        }
    }

    /// Whether the provider has a sandbox or test mode (spec 2.1).
    #[must_use]
    pub const fn test_mode(self) -> TestMode {
        match self {
            ProviderId::CardGateway | ProviderId::MorA => TestMode::Available,
            ProviderId::WalletQr => TestMode::RealPaymentsOnly,
            ProviderId::WalletWeb
            | ProviderId::WalletGlobal
            | ProviderId::MorB
            | ProviderId::MorC => TestMode::Unspecified,
        }
    }

    /// Whether checkout for this provider is shown as a QR code rather than a redirect.
    #[must_use]
    pub const fn pays_by_qr_code(self) -> bool {
        match self {
            ProviderId::WalletQr => true,
            ProviderId::WalletWeb
            | ProviderId::CardGateway
            | ProviderId::WalletGlobal
            | ProviderId::MorA
            | ProviderId::MorB
            | ProviderId::MorC => false,
        }
    }

    /// The catalog reference a plan sold through this provider carries, if the provider takes
    /// one: what kind of id it is, how every edge names its field, and when a plan needs it.
    /// This is the one table of those names; the catalog, the admin API and form, the store's
    /// plan document and the i18n labels all read it.
    #[must_use]
    pub const fn reference(self) -> Option<RefField> {
        let (kind, field, key, need) = match self {
            // The Chinese wallets are paid per order; there is nothing to refer to.
            ProviderId::WalletQr | ProviderId::WalletWeb => return None,
            ProviderId::CardGateway => (
                RefKind::PriceId,
                "cardGatewayPriceId",
                "card_gateway_price_id",
                RefNeed::Subscriptions,
            ),
            ProviderId::WalletGlobal => (
                RefKind::PlanId,
                "walletGlobalPlanId",
                "wallet_global_plan_id",
                RefNeed::Subscriptions,
            ),
            ProviderId::MorA => (
                RefKind::ProductId,
                "morAProductId",
                "mor_a_product_id",
                RefNeed::EveryPlan,
            ),
            ProviderId::MorB => (
                RefKind::ProductId,
                "morBProductId",
                "mor_b_product_id",
                RefNeed::EveryPlan,
            ),
            ProviderId::MorC => (
                RefKind::ProductId,
                "morCProductId",
                "mor_c_product_id",
                RefNeed::EveryPlan,
            ),
        };
        Some(RefField {
            provider: self,
            kind,
            field,
            key,
            need,
        })
    }

    /// Check that this provider can sell a plan of `plan_type` priced in `currency`.
    ///
    /// # Errors
    /// The plan type or the currency is not supported by this provider.
    pub fn supports(self, plan_type: PlanType, currency: Currency) -> Result<(), CapabilityError> {
        if !self.plan_types().contains(&plan_type) {
            return Err(CapabilityError::PlanTypeNotSupported {
                provider: self,
                plan_type,
            });
        }
        let accepted = match self.currency_rule() {
            CurrencyRule::Any => true,
            CurrencyRule::Only(only) => currency == only,
            CurrencyRule::AnyButNotForSubscriptions(refused) => {
                !(plan_type == PlanType::Recurring && currency == refused)
            }
        };
        if accepted {
            Ok(())
        } else {
            Err(CapabilityError::CurrencyNotSupported {
                provider: self,
                currency,
                plan_type,
            })
        }
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderId {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderId::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProvider(s.chars().take(32).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_spelled_as_the_spec_spells_them() {
        let ids: Vec<&str> = ProviderId::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            ids,
            [
                "wallet_qr",
                "wallet_web",
                "card_gateway",
                "wallet_global",
                "mor_a",
                "mor_b",
                "mor_c"
            ]
        );
        for p in ProviderId::ALL {
            assert_eq!(p.as_str().parse::<ProviderId>(), Ok(p));
        }
        assert!("stripe".parse::<ProviderId>().is_err());
    }

    #[test]
    fn the_capability_matrix_matches_spec_section_2_1() {
        use Currency::*;
        use PlanType::*;
        for wallet in [ProviderId::WalletQr, ProviderId::WalletWeb] {
            assert!(wallet.supports(OneTime, Cny).is_ok());
            assert!(wallet.supports(Credits, Cny).is_ok());
            assert!(matches!(
                wallet.supports(Recurring, Cny),
                Err(CapabilityError::PlanTypeNotSupported { .. })
            ));
            assert!(matches!(
                wallet.supports(OneTime, Usd),
                Err(CapabilityError::CurrencyNotSupported { .. })
            ));
        }
        for global in [
            ProviderId::CardGateway,
            ProviderId::WalletGlobal,
            ProviderId::MorA,
            ProviderId::MorB,
        ] {
            for t in [OneTime, Recurring, Credits] {
                for c in [Usd, Eur, Cny, Jpy] {
                    assert!(global.supports(t, c).is_ok(), "{global} {t} {c}");
                }
            }
        }
        assert!(ProviderId::MorC.supports(OneTime, Cny).is_ok());
        assert!(ProviderId::MorC.supports(Credits, Cny).is_ok());
        assert!(ProviderId::MorC.supports(Recurring, Usd).is_ok());
        assert!(matches!(
            ProviderId::MorC.supports(Recurring, Cny),
            Err(CapabilityError::CurrencyNotSupported { .. })
        ));
    }

    #[test]
    fn every_reference_is_named_after_its_provider_and_kind() {
        for r in RefField::all() {
            let kind = match r.kind {
                RefKind::PriceId => "price_id",
                RefKind::PlanId => "plan_id",
                RefKind::ProductId => "product_id",
            };
            assert_eq!(r.key, format!("{}_{kind}", r.provider.as_str()));
            let mut camel = String::new();
            let mut upper = false;
            for c in r.key.chars() {
                if c == '_' {
                    upper = true;
                } else if upper {
                    camel.extend(c.to_uppercase());
                    upper = false;
                } else {
                    camel.push(c);
                }
            }
            assert_eq!(r.field, camel);
        }
        assert_eq!(RefField::all().count(), 5);
    }

    #[test]
    fn test_modes_follow_the_spec() {
        assert_eq!(ProviderId::CardGateway.test_mode(), TestMode::Available);
        assert_eq!(ProviderId::MorA.test_mode(), TestMode::Available);
        assert_eq!(ProviderId::WalletQr.test_mode(), TestMode::RealPaymentsOnly);
    }
}
