//! [`PlansService`]: the plan catalogue as buyers see it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use domain::{AppEnvironment, Locale, PlanId};

use crate::ports::{Clock, IdGenerator, SecretHasher, Store, StoredPlan};
use crate::service::Service;
use crate::use_cases::InfraError;
use crate::use_cases::plans::{Audience, PricingMode, list_plans, static_listing};

/// The plan catalogue as buyers see it.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait PlansService: Send + Sync + 'static {
    /// The plans of the live pricing mode that are on sale in `locale` (or in any language),
    /// in listing order: hidden plans and plans of a provider without a gateway left out.
    ///
    /// # Errors
    /// The dynamic plans cannot be read.
    async fn public_plans<'a>(
        &self,
        locale: Option<&'a Locale>,
    ) -> Result<Vec<StoredPlan>, InfraError>;

    /// Every plan's display name in `locale`, from the static catalogue and the dynamic table
    /// (the live mode's wins), for purchases whose plan has since changed mode or vanished.
    ///
    /// # Errors
    /// The dynamic plans cannot be read.
    async fn plan_names(&self, locale: &Locale) -> Result<BTreeMap<PlanId, String>, InfraError>;

    /// Which of a plan's prices apply (`APP_ENV`).
    fn environment(&self) -> AppEnvironment;

    /// Where plans come from (`PRICING_MODE`).
    fn pricing_mode(&self) -> PricingMode;
}

#[async_trait]
impl<S, C, I, H> PlansService for Service<S, C, I, H>
where
    S: Store,
    C: Clock,
    I: IdGenerator,
    H: SecretHasher,
{
    async fn public_plans<'a>(
        &self,
        locale: Option<&'a Locale>,
    ) -> Result<Vec<StoredPlan>, InfraError> {
        list_plans(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.gateways,
            &self.store,
            Audience::Public,
            locale,
        )
        .await
    }

    async fn plan_names(&self, locale: &Locale) -> Result<BTreeMap<PlanId, String>, InfraError> {
        let dynamic = self.store.list_plans().await?;
        let statics = static_listing(&self.config.catalog);
        let (first, second) = match self.config.pricing_mode {
            PricingMode::Static => (dynamic, statics),
            PricingMode::Dynamic => (statics, dynamic),
        };
        let mut names = BTreeMap::new();
        for stored in first.into_iter().chain(second) {
            let name = stored.plan.text_for(locale).name.clone();
            names.insert(stored.plan.id().clone(), name);
        }
        Ok(names)
    }

    fn environment(&self) -> AppEnvironment {
        self.config.environment
    }

    fn pricing_mode(&self) -> PricingMode {
        self.config.pricing_mode
    }
}
