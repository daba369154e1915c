//! List plans (static catalog or dynamic table, by `PRICING_MODE`) and resolve one plan.

use std::collections::BTreeMap;

use domain::{AppEnvironment, Locale, Plan, PlanId, Visibility};

use super::InfraError;
use crate::ports::{
    Clock, Gateways, IdGenerator, Listing, PlanRepository, SecretHasher, Store, StoredPlan,
};
use crate::service::Service;

/// Where `/pricing` and purchases take plans from (`PRICING_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PricingMode {
    /// `static` (default): plans from `config/payment.toml`.
    Static,
    /// `dynamic`: plans from the `pricing_plan` table, managed at `/admin/pricing`.
    Dynamic,
}

impl PricingMode {
    /// The setting's spelling.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            PricingMode::Static => "static",
            PricingMode::Dynamic => "dynamic",
        }
    }

    /// Parse the setting.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "static" => Some(PricingMode::Static),
            "dynamic" => Some(PricingMode::Dynamic),
            _ => None,
        }
    }
}

/// Which plans a listing includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Visitors of `/pricing`: hidden plans, plans not shown in the locale and plans of a
    /// provider without a gateway (off in production) are left out.
    Public,
    /// Administrators: everything.
    Admin,
}

/// The plans of the live pricing mode, in listing order, filtered for `audience` and `locale`.
///
/// # Errors
/// The dynamic table cannot be read.
pub async fn list_plans(
    mode: PricingMode,
    catalog: &[Plan],
    gateways: &Gateways,
    store: &impl PlanRepository,
    audience: Audience,
    locale: Option<&Locale>,
) -> Result<Vec<StoredPlan>, InfraError> {
    let plans = match mode {
        PricingMode::Static => static_listing(catalog),
        PricingMode::Dynamic => store.list_plans().await?,
    };
    Ok(plans
        .into_iter()
        .filter(|p| {
            audience == Audience::Admin
                || (gateways.get(p.plan.provider()).is_some() && is_listed(p, locale))
        })
        .collect())
}

/// The static catalog as listings, in file order.
#[must_use]
pub fn static_listing(catalog: &[Plan]) -> Vec<StoredPlan> {
    catalog
        .iter()
        .enumerate()
        .map(|(i, plan)| StoredPlan {
            plan: plan.clone(),
            listing: Listing {
                sort_order: i32::try_from(i).unwrap_or(i32::MAX),
                locales: Vec::new(),
            },
        })
        .collect()
}

fn is_listed(plan: &StoredPlan, locale: Option<&Locale>) -> bool {
    if plan.plan.visibility() == Visibility::Hidden {
        return false;
    }
    match locale {
        Some(locale) if !plan.listing.locales.is_empty() => plan
            .listing
            .locales
            .iter()
            .any(|l| l == locale || l.language() == locale.language()),
        _ => true,
    }
}

/// The plan `id` of the live pricing mode, hidden or not (hidden plans stay purchasable by id).
///
/// # Errors
/// The dynamic table cannot be read.
pub async fn find_plan(
    mode: PricingMode,
    catalog: &[Plan],
    store: &impl PlanRepository,
    id: &PlanId,
) -> Result<Option<Plan>, InfraError> {
    match mode {
        PricingMode::Static => Ok(catalog.iter().find(|p| p.id() == id).cloned()),
        PricingMode::Dynamic => Ok(store.find_plan(id).await?.map(|p| p.plan)),
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The plans of the live pricing mode that are on sale in `locale` (or in any language),
    /// in listing order: hidden plans and plans of a provider without a gateway left out.
    ///
    /// # Errors
    /// The dynamic plans cannot be read.
    #[tracing::instrument(skip_all)]
    pub async fn public_plans(
        &self,
        locale: Option<&Locale>,
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

    /// Every plan's display name in `locale`, from the static catalogue and the dynamic table
    /// (the live mode's wins), for purchases whose plan has since changed mode or vanished.
    ///
    /// # Errors
    /// The dynamic plans cannot be read.
    #[tracing::instrument(skip_all)]
    pub async fn plan_names(
        &self,
        locale: &Locale,
    ) -> Result<BTreeMap<PlanId, String>, InfraError> {
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

    /// Which of a plan's prices apply (`APP_ENV`).
    pub fn environment(&self) -> AppEnvironment {
        self.config.environment
    }

    /// Whether `provider`'s gateway here keeps payment methods for automatic top-up (a buyer of
    /// its credits packs may consent to saving theirs).
    #[must_use]
    pub fn saves_methods(&self, provider: domain::ProviderId) -> bool {
        self.gateways
            .get(provider)
            .is_some_and(|g| g.saves_methods())
    }

    /// Where plans come from (`PRICING_MODE`).
    pub fn pricing_mode(&self) -> PricingMode {
        self.config.pricing_mode
    }
}
