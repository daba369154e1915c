//! Automatic top-up, as an account's owners and admins set it: the rule (threshold, pack,
//! monthly caps), the saved payment method it charges, and the history of its top-ups. The
//! charges themselves are the worker's ([`super::top_up_worker`]).

use domain::{
    AccountId, Credits, PlanId, PlanType, ProviderId, TopUpRails, TopUpRule, UserId, Visibility,
};

use super::InfraError;
use super::plans::find_plan;
use crate::ports::{
    AutoTopUpRecord, ChangeSet, Clock, IdGenerator, PutAutoTopUp, PutAutoTopUpError,
    SavedMethodRecord, SecretHasher, Store, StoreError, TopUpRecord, TopUpWrite,
};
use crate::service::Service;

/// How many of an account's top-ups the overview lists.
pub const TOP_UP_HISTORY: u32 = 20;

/// The worker's and the rails' settings (`[autoTopUp]` in `config/credits.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopUpSettings {
    /// The operator's rails: cool-off, declines in a row, top-ups per account and month.
    pub rails: TopUpRails,
    /// How long a claim keeps other instances off a top-up.
    pub lease_ms: i64,
    /// How long a charge waits for its provider's event before the worker sends it again
    /// (with the same idempotency key, so the provider charges once).
    pub charge_retry_ms: i64,
    /// The most top-ups one pass charges.
    pub batch: u32,
}

impl Default for TopUpSettings {
    fn default() -> Self {
        Self {
            rails: TopUpRails::default(),
            lease_ms: 60_000,
            charge_retry_ms: 600_000,
            batch: 20,
        }
    }
}

/// An owner's rule.
#[derive(Debug, Clone)]
pub struct SetAutoTopUp {
    /// Who sets it.
    pub user: UserId,
    /// The account (the user's personal account, or a team).
    pub account: AccountId,
    /// On or off.
    pub enabled: bool,
    /// Below this balance a spend asks for a top-up.
    pub threshold: Credits,
    /// The credits pack bought.
    pub plan_id: PlanId,
    /// The most top-ups per calendar month (1 to 1,000).
    pub max_per_month: u32,
    /// The most money per calendar month in the pack's currency (minor units), if capped.
    pub max_amount_per_month: Option<i64>,
    /// The saved method to charge (`None`: the one attached, else the newest saved).
    pub method_id: Option<String>,
}

/// An account's automatic top-up as its owners see it.
#[derive(Debug, Clone)]
pub struct AutoTopUpOverview {
    /// The account.
    pub account: AccountId,
    /// Its rule, if it has one.
    pub record: Option<AutoTopUpRecord>,
    /// Its saved methods that may still be charged, newest first.
    pub methods: Vec<SavedMethodRecord>,
    /// Its latest top-ups, newest first.
    pub history: Vec<TopUpRecord>,
    /// The operator's rails.
    pub rails: TopUpRails,
    /// When it was read (the month its counts are of).
    pub now: domain::Timestamp,
}

/// Why a rule was not set or a method not removed.
#[derive(Debug, thiserror::Error)]
pub enum AutoTopUpError {
    /// Not a member of the account (or no such account).
    #[error("no such account for this user")]
    AccountNotFound,
    /// A member who does not manage the account's billing.
    #[error("only an account's owners and admins manage its automatic top-up")]
    NotBillingManager,
    /// The rule is not a valid one.
    #[error("{0}")]
    Invalid(String),
    /// The plan cannot be bought automatically.
    #[error("{0}")]
    PlanNotAllowed(String),
    /// No such saved method on the account, or it was removed.
    #[error("no such saved payment method on this account")]
    MethodNotFound,
    /// The rule changed meanwhile (try again).
    #[error("the automatic top-up changed meanwhile")]
    Conflict,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for AutoTopUpError {
    fn from(e: StoreError) -> Self {
        AutoTopUpError::Infra(e.into())
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The account `user` manages the billing of: their personal account, or a team in which
    /// they are an owner or admin.
    async fn top_up_account(
        &self,
        user: &UserId,
        account: &AccountId,
    ) -> Result<AccountId, AutoTopUpError> {
        let account = account.clone();
        match self.role_in(user, &account).await? {
            None => Err(AutoTopUpError::AccountNotFound),
            Some(role) if !role.manages_billing() => Err(AutoTopUpError::NotBillingManager),
            Some(_) => Ok(account),
        }
    }

    /// The automatic top-up of an account `user` manages.
    ///
    /// # Errors
    /// [`AutoTopUpError::AccountNotFound`], [`AutoTopUpError::NotBillingManager`]; storage.
    #[tracing::instrument(skip_all, fields(user_id = %user, account_id = %account))]
    pub async fn auto_top_up(
        &self,
        user: &UserId,
        account: &AccountId,
    ) -> Result<AutoTopUpOverview, AutoTopUpError> {
        let account = self.top_up_account(user, account).await?;
        Ok(self.top_up_overview(&account).await?)
    }

    /// The automatic top-up of `account`, for an administrator (the caller checked) or its
    /// owners.
    ///
    /// # Errors
    /// Storage.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn top_up_overview(
        &self,
        account: &AccountId,
    ) -> Result<AutoTopUpOverview, InfraError> {
        let record = self.store.auto_top_up(account).await?;
        let mut methods = self.store.saved_methods(account).await?;
        methods.retain(|m| m.removed_at.is_none());
        let history = self.store.top_ups(account, TOP_UP_HISTORY).await?;
        Ok(AutoTopUpOverview {
            account: account.clone(),
            record,
            methods,
            history,
            rails: self.top_ups.rails,
            now: self.clock.now(),
        })
    }

    /// Set an account's rule: the pack must be a credits pack sold through a provider that
    /// charges saved methods, and the method one of the account's at that provider.
    ///
    /// # Errors
    /// See [`AutoTopUpError`].
    #[tracing::instrument(skip_all, fields(user_id = %set.user))]
    pub async fn set_auto_top_up(
        &self,
        set: SetAutoTopUp,
    ) -> Result<AutoTopUpOverview, AutoTopUpError> {
        let account = self.top_up_account(&set.user, &set.account).await?;
        check_caps(&set)?;
        let provider = self.top_up_provider(&set.plan_id).await?;
        let methods = self.store.saved_methods(&account).await?;
        let method = chosen_method(&methods, set.method_id.as_deref(), provider)?;
        let rule = TopUpRule {
            enabled: set.enabled,
            threshold: set.threshold,
            plan: set.plan_id.clone(),
            max_per_month: set.max_per_month,
            max_amount_per_month: set.max_amount_per_month,
        };
        let current = self.store.auto_top_up(&account).await?;
        let put = PutAutoTopUp {
            account_id: account.clone(),
            rule,
            method_id: method.map(|m| m.id.clone()),
            by: set.user.clone(),
            at: self.clock.now(),
            expected_version: current.map(|c| c.version),
        };
        match self.store.put_auto_top_up(&put).await {
            Ok(_) => Ok(self.top_up_overview(&account).await?),
            Err(PutAutoTopUpError::Conflict) => Err(AutoTopUpError::Conflict),
            Err(PutAutoTopUpError::NoSuchMethod) => Err(AutoTopUpError::MethodNotFound),
            Err(PutAutoTopUpError::Store(e)) => Err(e.into()),
        }
    }

    /// The provider a pack is sold through, if it may be bought automatically.
    async fn top_up_provider(&self, plan_id: &PlanId) -> Result<ProviderId, AutoTopUpError> {
        let plan = find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            plan_id,
        )
        .await?
        .ok_or_else(|| AutoTopUpError::PlanNotAllowed(format!("plan {plan_id} not found")))?;
        if plan.plan_type() != PlanType::Credits || plan.visibility() != Visibility::Listed {
            return Err(AutoTopUpError::PlanNotAllowed(format!(
                "{plan_id} is not a credits pack on sale"
            )));
        }
        let provider = plan.provider();
        if !self
            .gateways
            .get(provider)
            .is_some_and(|g| g.saves_methods())
        {
            return Err(AutoTopUpError::PlanNotAllowed(format!(
                "{plan_id} is sold through {provider}, which does not charge saved methods"
            )));
        }
        Ok(provider)
    }

    /// Remove one of an account's saved methods: it is never charged again, and a rule that
    /// charges it is turned off (`auto_top_up.disabled`). Once that is stored, the method's
    /// provider is asked to forget it too ([`crate::ports::PaymentGateway::forget_saved_method`]);
    /// its failure is logged and does not fail the removal.
    ///
    /// # Errors
    /// [`AutoTopUpError::MethodNotFound`]; as [`Service::auto_top_up`].
    #[tracing::instrument(skip_all, fields(user_id = %user, account_id = %account))]
    pub async fn remove_payment_method(
        &self,
        user: &UserId,
        account: &AccountId,
        method_id: &str,
    ) -> Result<AutoTopUpOverview, AutoTopUpError> {
        let account = self.top_up_account(user, account).await?;
        let methods = self.store.saved_methods(&account).await?;
        let Some(removed) = methods
            .into_iter()
            .find(|m| m.id == method_id && m.removed_at.is_none())
        else {
            return Err(AutoTopUpError::MethodNotFound);
        };
        let now = self.clock.now();
        let mut set = ChangeSet::at(now);
        set.top_up = Some(TopUpWrite::RemoveMethod {
            account: account.clone(),
            id: method_id.to_owned(),
        });
        let rule = self.store.auto_top_up(&account).await?;
        let charged = rule.as_ref().is_some_and(|r| {
            r.rule.enabled && r.method.as_ref().is_some_and(|m| m.id == method_id)
        });
        if charged {
            let reason = domain::DisabledReason::MethodRemoved;
            set.told
                .push(crate::host_events::top_up_disabled(&account, reason, now));
        }
        self.store
            .apply(set)
            .await
            .map_err(|e| InfraError::from(e.into_store_error()))?;
        self.forget_at_provider(&removed).await;
        Ok(self.top_up_overview(&account).await?)
    }

    /// Ask the method's provider to forget a method Tally removed. Tally's removal stands
    /// whatever the provider answers (the method is never charged again), so a failure is
    /// only logged: the owner's removal does not fail because the provider is down.
    async fn forget_at_provider(&self, removed: &SavedMethodRecord) {
        let Some(gateway) = self.gateways.get(removed.provider) else {
            tracing::warn!(
                provider = %removed.provider,
                method_id = %removed.id,
                "removed payment method not forgotten: no gateway for its provider"
            );
            return;
        };
        if let Err(e) = gateway.forget_saved_method(&removed.method).await {
            tracing::warn!(
                provider = %removed.provider,
                method_id = %removed.id,
                error_kind = e.kind(),
                "removed payment method not forgotten by its provider"
            );
        }
    }
}

/// Refuse caps outside their bounds.
fn check_caps(set: &SetAutoTopUp) -> Result<(), AutoTopUpError> {
    if set.threshold.is_zero() {
        return Err(AutoTopUpError::Invalid(
            "threshold must be above zero".into(),
        ));
    }
    if !(1..=domain::top_up::MAX_TOP_UPS_PER_MONTH).contains(&set.max_per_month) {
        return Err(AutoTopUpError::Invalid(format!(
            "maxPerMonth must be from 1 to {}",
            domain::top_up::MAX_TOP_UPS_PER_MONTH
        )));
    }
    if set.max_amount_per_month.is_some_and(|a| a <= 0) {
        return Err(AutoTopUpError::Invalid(
            "maxAmountPerMonth must be above zero".into(),
        ));
    }
    Ok(())
}

/// The method a rule charges: the one named (the account's, not removed, at `provider`), else
/// the newest saved at `provider`, else none yet (a purchase that saves one attaches it).
fn chosen_method<'a>(
    methods: &'a [SavedMethodRecord],
    named: Option<&str>,
    provider: ProviderId,
) -> Result<Option<&'a SavedMethodRecord>, AutoTopUpError> {
    let usable = |m: &&SavedMethodRecord| m.removed_at.is_none() && m.provider == provider;
    match named {
        Some(id) => methods
            .iter()
            .filter(usable)
            .find(|m| m.id == id)
            .map(Some)
            .ok_or(AutoTopUpError::MethodNotFound),
        None => Ok(methods.iter().find(usable)),
    }
}
