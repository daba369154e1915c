//! [`PlansService`]: the plan catalogue as buyers see it.

use std::collections::BTreeMap;

use domain::{AppEnvironment, Locale, PlanId};

use crate::ports::StoredPlan;
#[cfg(doc)]
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::plans::PricingMode;

inbound_port! {
    /// The plan catalogue as buyers see it.
    #[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
    #[async_trait::async_trait]
    pub trait PlansService {
        /// The plans of the live pricing mode that are on sale in `locale` (or in any
        /// language), in listing order (see [`Service::public_plans`]).
        async fn public_plans<'a>(
            &self,
            locale: Option<&'a Locale>,
        ) -> Result<Vec<StoredPlan>, InfraError>;

        /// Every plan's display name in `locale` (see [`Service::plan_names`]).
        async fn plan_names(&self, locale: &Locale)
            -> Result<BTreeMap<PlanId, String>, InfraError>;

        /// Which of a plan's prices apply (`APP_ENV`).
        fn environment(&self) -> AppEnvironment;

        /// Whether `provider`'s gateway here keeps payment methods for automatic top-up (see
        /// [`Service::saves_methods`]).
        fn saves_methods(&self, provider: domain::ProviderId) -> bool;

        /// Where plans come from (`PRICING_MODE`).
        fn pricing_mode(&self) -> PricingMode;
    }
}
