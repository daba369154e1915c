//! Administrators' changes to plans, plan allowances and API keys, each stored with its audit
//! entry. Every change takes the acting administrator: there is no way to make one without an
//! entry. The checks live with the plans and keys (`manage_plans`, `api_keys`); the methods here
//! run them and hand the write and its entry to the store together
//! ([`crate::ports::AdminConsoleStore::write_audited`]): one transaction, so an action is never
//! stored without its entry nor an entry without its action.

use std::collections::BTreeMap;

use super::super::api_keys::{ApiKeyError, CreatedApiKey};
use super::super::manage_plans::{ManagePlansError, PlanInput, replacement, validate};
use crate::accounts::User;
use crate::ports::Writes;
use crate::ports::{
    AdminWrite, AuditAction, AuditFacts, AuditValue, Clock, IdGenerator, NewAudit, PlanAllowance,
    SecretHasher, Store, StoreError, StoredPlan,
};
use crate::service::Service;

pub(super) fn text(value: impl ToString) -> AuditValue {
    AuditValue::Text(value.to_string())
}

fn plan_facts(p: &StoredPlan) -> AuditFacts {
    let plan = &p.plan;
    BTreeMap::from([
        ("provider".to_owned(), text(plan.provider())),
        (
            "priceMinor".to_owned(),
            AuditValue::Integer(plan.price().amount_minor()),
        ),
        ("currency".to_owned(), text(plan.price().currency().code())),
        (
            "visibility".to_owned(),
            text(format!("{:?}", plan.visibility())),
        ),
    ])
}

/// An audit entry about to be written.
pub(super) struct Entry<'a> {
    pub(super) admin: &'a User,
    pub(super) action: AuditAction,
    pub(super) object_kind: &'static str,
    pub(super) object_id: String,
    pub(super) before: Option<AuditFacts>,
    pub(super) after: Option<AuditFacts>,
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Store `write` with `entry`, in one transaction.
    pub(super) async fn write_audited(
        &self,
        write: AdminWrite<'_>,
        entry: Entry<'_>,
    ) -> Result<(), StoreError> {
        let audit = NewAudit {
            admin_id: entry.admin.id.clone(),
            action: entry.action,
            object_kind: entry.object_kind,
            object_id: entry.object_id,
            before: entry.before,
            after: entry.after,
            at: self.clock.now(),
        };
        self.store.write_admin(write, &audit).await
    }

    async fn stored_plan(&self, id: &domain::PlanId) -> Option<StoredPlan> {
        self.store.find_plan(id).await.ok().flatten()
    }

    /// Store `plan` over its current version, audited with both (`plan.updated`).
    async fn write_plan_update(
        &self,
        admin: &User,
        plan: StoredPlan,
    ) -> Result<StoredPlan, ManagePlansError> {
        let id = plan.plan.id().to_string();
        let before = self.stored_plan(plan.plan.id()).await;
        let entry = Entry {
            admin,
            action: AuditAction::PlanUpdated,
            object_kind: "plan",
            object_id: id,
            before: before.as_ref().map(plan_facts),
            after: Some(plan_facts(&plan)),
        };
        self.write_audited(AdminWrite::UpdatePlan(&plan), entry)
            .await?;
        Ok(plan)
    }

    /// `admin` adds a dynamic plan, audited (`plan.created`).
    ///
    /// # Errors
    /// Invalid input, an existing id, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id))]
    pub async fn create_plan(
        &self,
        admin: &User,
        input: &PlanInput,
    ) -> Result<StoredPlan, ManagePlansError> {
        let plan = validate(input)?;
        let entry = Entry {
            admin,
            action: AuditAction::PlanCreated,
            object_kind: "plan",
            object_id: plan.plan.id().to_string(),
            before: None,
            after: Some(plan_facts(&plan)),
        };
        self.write_audited(AdminWrite::CreatePlan(&plan), entry)
            .await?;
        Ok(plan)
    }

    /// `admin` replaces dynamic plan `id` (the id in the input must match), audited with the
    /// plan before and after (`plan.updated`).
    ///
    /// # Errors
    /// Invalid input, unknown plan, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, plan_id = id))]
    pub async fn update_plan(
        &self,
        admin: &User,
        id: &str,
        input: &PlanInput,
    ) -> Result<StoredPlan, ManagePlansError> {
        let plan = replacement(id, input)?;
        self.write_plan_update(admin, plan).await
    }

    /// `admin` hides or lists a dynamic plan, audited with the plan before and after
    /// (`plan.updated`).
    ///
    /// # Errors
    /// Unknown plan, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, plan_id = %id, hidden = hidden))]
    pub async fn set_plan_hidden(
        &self,
        admin: &User,
        id: &domain::PlanId,
        hidden: bool,
    ) -> Result<StoredPlan, ManagePlansError> {
        let plan = self.hidden_plan(id, hidden).await?;
        self.write_plan_update(admin, plan).await
    }

    /// `admin` deletes a dynamic plan (orders keep their snapshot), audited with the plan as it
    /// was (`plan.deleted`).
    ///
    /// # Errors
    /// Unknown plan, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, plan_id = %id))]
    pub async fn delete_plan(
        &self,
        admin: &User,
        id: &domain::PlanId,
    ) -> Result<(), ManagePlansError> {
        let before = self.stored_plan(id).await;
        let entry = Entry {
            admin,
            action: AuditAction::PlanDeleted,
            object_kind: "plan",
            object_id: id.to_string(),
            before: before.as_ref().map(plan_facts),
            after: None,
        };
        self.write_audited(AdminWrite::DeletePlan(id), entry)
            .await?;
        Ok(())
    }

    /// `admin` puts dynamic plans in this order, audited with the new order
    /// (`plans.reordered`).
    ///
    /// # Errors
    /// An unknown id (nothing changes), infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, plans = ids.len()))]
    pub async fn reorder_plans(
        &self,
        admin: &User,
        ids: &[domain::PlanId],
    ) -> Result<(), ManagePlansError> {
        let order: Vec<&str> = ids.iter().map(domain::PlanId::as_str).collect();
        let after = BTreeMap::from([("order".to_owned(), text(order.join(",")))]);
        let entry = Entry {
            admin,
            action: AuditAction::PlansReordered,
            object_kind: "plans",
            object_id: "*".to_owned(),
            before: None,
            after: Some(after),
        };
        self.write_audited(AdminWrite::ReorderPlans(ids), entry)
            .await?;
        Ok(())
    }

    /// `admin` creates a key named `name` with `scopes`, owned by `admin` and bound to
    /// `account` when one is named, audited with its name, scopes and account, never its secret
    /// (`api_key.created`).
    ///
    /// # Errors
    /// A name that is empty or over 100 characters, no or unknown scopes, an unknown account or
    /// an app-wide scope on a bound key, infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id))]
    pub async fn create_api_key(
        &self,
        admin: &User,
        name: &str,
        scopes: &[String],
        account: Option<&str>,
    ) -> Result<CreatedApiKey, ApiKeyError> {
        let created = self.new_api_key(admin, name, scopes, account).await?;
        let key = &created.key;
        let scopes: Vec<String> = key.scopes.iter().map(|s| format!("{s:?}")).collect();
        let mut after = BTreeMap::from([
            ("name".to_owned(), text(&key.name)),
            ("prefix".to_owned(), text(&key.prefix)),
            ("scopes".to_owned(), text(scopes.join(","))),
        ]);
        if let Some(account) = &key.account {
            after.insert("account".to_owned(), text(account.as_str()));
        }
        let entry = Entry {
            admin,
            action: AuditAction::ApiKeyCreated,
            object_kind: "api_key",
            object_id: key.id.clone(),
            before: None,
            after: Some(after),
        };
        let hash = self.hasher.hash_token(&created.secret);
        self.write_audited(AdminWrite::CreateApiKey(key, &hash), entry)
            .await?;
        Ok(created)
    }

    /// `admin` revokes a key, which stops working at once, audited (`api_key.revoked`).
    ///
    /// # Errors
    /// [`ApiKeyError::NotFound`], infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, api_key_id = %id))]
    pub async fn revoke_api_key(
        &self,
        admin: &User,
        id: &domain::ApiKeyId,
    ) -> Result<(), ApiKeyError> {
        let entry = Entry {
            admin,
            action: AuditAction::ApiKeyRevoked,
            object_kind: "api_key",
            object_id: id.to_string(),
            before: None,
            after: None,
        };
        Ok(self
            .write_audited(AdminWrite::RevokeApiKey(id.as_str()), entry)
            .await?)
    }
}

/// Why a plan allowance could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum PlanAllowanceError {
    /// No such user.
    #[error("user not found")]
    UserNotFound,
    /// No such plan in the live pricing mode.
    #[error("plan not found")]
    PlanNotFound,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] crate::use_cases::InfraError),
}

impl From<StoreError> for PlanAllowanceError {
    fn from(e: StoreError) -> Self {
        Self::Infra(e.into())
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The plans an administrator allowed `user` (hidden plans they may buy or switch to).
    ///
    /// # Errors
    /// [`PlanAllowanceError::UserNotFound`], or the store cannot be read.
    #[tracing::instrument(skip_all, fields(user_id = %user))]
    pub async fn plan_allowances(
        &self,
        user: &domain::UserId,
    ) -> Result<Vec<PlanAllowance>, PlanAllowanceError> {
        self.known_customer(user).await?;
        Ok(self.store.plan_allowances(user).await?)
    }

    /// Allow `user` the plan `plan` by `admin`, audited (`plan.allowed`): a hidden plan is then
    /// for sale to that user (a purchase or a switch target). Allowing it again changes nothing.
    ///
    /// # Errors
    /// No such user or plan, or the store cannot be written.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, user_id = %user, plan_id = %plan))]
    pub async fn allow_plan(
        &self,
        admin: &User,
        user: &domain::UserId,
        plan: &domain::PlanId,
    ) -> Result<PlanAllowance, PlanAllowanceError> {
        self.allowance_target(user, plan).await?;
        let allowance = PlanAllowance {
            user_id: user.clone(),
            plan_id: plan.clone(),
            allowed_by: admin.id.clone(),
            allowed_at: self.clock.now(),
        };
        let after = BTreeMap::from([("planId".to_owned(), text(plan))]);
        let entry = Entry {
            admin,
            action: AuditAction::PlanAllowed,
            object_kind: "user",
            object_id: user.to_string(),
            before: None,
            after: Some(after),
        };
        self.write_audited(AdminWrite::AllowPlan(&allowance), entry)
            .await?;
        let kept = self.store.plan_allowances(user).await?;
        Ok(kept
            .into_iter()
            .find(|a| &a.plan_id == plan)
            .unwrap_or(allowance))
    }

    /// Withdraw `user`'s allowance of `plan` by `admin`, audited (`plan.allowance_removed`).
    /// Subscriptions and access already bought stay.
    ///
    /// # Errors
    /// No such user, or the store cannot be written.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, user_id = %user, plan_id = %plan))]
    pub async fn remove_plan_allowance(
        &self,
        admin: &User,
        user: &domain::UserId,
        plan: &domain::PlanId,
    ) -> Result<(), PlanAllowanceError> {
        self.known_customer(user).await?;
        let before = BTreeMap::from([("planId".to_owned(), text(plan))]);
        let entry = Entry {
            admin,
            action: AuditAction::PlanAllowanceRemoved,
            object_kind: "user",
            object_id: user.to_string(),
            before: Some(before),
            after: None,
        };
        self.write_audited(AdminWrite::RemovePlanAllowance(user, plan), entry)
            .await?;
        Ok(())
    }

    /// A customer an allowance names must exist.
    async fn known_customer(&self, user: &domain::UserId) -> Result<(), PlanAllowanceError> {
        self.store
            .find_user(user)
            .await?
            .map(drop)
            .ok_or(PlanAllowanceError::UserNotFound)
    }

    /// The user and plan of an allowance must both exist.
    async fn allowance_target(
        &self,
        user: &domain::UserId,
        plan: &domain::PlanId,
    ) -> Result<(), PlanAllowanceError> {
        self.known_customer(user).await?;
        crate::use_cases::plans::find_plan(
            self.config.pricing_mode,
            &self.config.catalog,
            &self.store,
            plan,
        )
        .await?
        .ok_or(PlanAllowanceError::PlanNotFound)?;
        Ok(())
    }
}
