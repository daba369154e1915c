//! Manage dynamic plans (admin): the rules a plan must keep, the admin listing, and the import
//! from config. An administrator's create, update, hide, delete and reorder are written with
//! their audit entry (`admin_console::audited`).

use std::collections::BTreeMap;

use domain::{Locale, Plan, PlanDraft, PlanError, PlanId};

use super::InfraError;
use crate::accounts::User;
use crate::ports::{
    AuditAction, AuditValue, Clock, IdGenerator, ImportReport, Listing, NewAudit, SecretHasher,
    Store, StoreError, StoredPlan, Writes,
};
use crate::service::Service;
use crate::use_cases::plans::{Audience, PricingMode, list_plans};

/// The most locales one plan may be restricted to.
pub const MAX_LOCALES: usize = 20;

/// A plan as an admin submits it.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    /// The plan's fields.
    pub draft: PlanDraft,
    /// Position on `/pricing`.
    pub sort_order: i32,
    /// Locales it is shown in (empty: all).
    pub locales: Vec<String>,
}

/// One field an admin must correct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, as the spec spells it.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Why a plan change failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagePlansError {
    /// The plan breaks rules; every broken rule is listed.
    #[error("plan is invalid")]
    Invalid(Vec<FieldError>),
    /// No such plan.
    #[error("plan not found")]
    NotFound,
    /// A plan with this id exists.
    #[error("a plan with this id exists")]
    Exists,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for ManagePlansError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ManagePlansError::NotFound,
            StoreError::Conflict(_) => ManagePlansError::Exists,
            other => ManagePlansError::Infra(other.into()),
        }
    }
}

fn field_error(e: &PlanError) -> FieldError {
    FieldError {
        field: e.field.clone(),
        message: e.problem.to_string(),
    }
}

/// Validate an admin's plan input.
///
/// # Errors
/// Every rule the plan or its listing breaks.
pub fn validate(input: &PlanInput) -> Result<StoredPlan, ManagePlansError> {
    let mut errors = Vec::new();
    let plan = Plan::from_draft(&input.draft)
        .map_err(|e| errors.extend(e.0.iter().map(field_error)))
        .ok();
    let mut locales = Vec::new();
    for tag in &input.locales {
        match Locale::parse(tag) {
            Some(l) if !locales.contains(&l) => locales.push(l),
            Some(_) => {}
            None => errors.push(FieldError {
                field: "locales".into(),
                message: format!("{tag:?} is not a locale tag"),
            }),
        }
    }
    if locales.len() > MAX_LOCALES {
        errors.push(FieldError {
            field: "locales".into(),
            message: format!("at most {MAX_LOCALES} locales"),
        });
    }
    match plan {
        Some(plan) if errors.is_empty() => Ok(StoredPlan {
            plan,
            listing: Listing {
                sort_order: input.sort_order,
                locales,
            },
        }),
        _ => Err(ManagePlansError::Invalid(errors)),
    }
}

/// Plan `id` as `input` replaces it (the id in the input must match).
pub(crate) fn replacement(id: &str, input: &PlanInput) -> Result<StoredPlan, ManagePlansError> {
    if input.draft.id != id {
        return Err(ManagePlansError::Invalid(vec![FieldError {
            field: "id".into(),
            message: "cannot be changed".into(),
        }]));
    }
    validate(input)
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Every dynamic plan, hidden ones included, in listing order.
    ///
    /// # Errors
    /// The dynamic plans cannot be read.
    #[tracing::instrument(skip_all)]
    pub async fn admin_plans(&self) -> Result<Vec<StoredPlan>, InfraError> {
        list_plans(
            PricingMode::Dynamic,
            &self.config.catalog,
            &self.gateways,
            &self.store,
            Audience::Admin,
            None,
        )
        .await
    }

    /// Stored plan `id`, hidden or listed (not yet written).
    pub(crate) async fn hidden_plan(
        &self,
        id: &PlanId,
        hidden: bool,
    ) -> Result<StoredPlan, ManagePlansError> {
        let stored = self
            .store
            .find_plan(id)
            .await?
            .ok_or(ManagePlansError::NotFound)?;
        let mut draft = stored.plan.to_draft();
        draft.hidden = hidden;
        let plan = Plan::from_draft(&draft)
            .map_err(|e| ManagePlansError::Invalid(e.0.iter().map(field_error).collect()))?;
        Ok(StoredPlan {
            plan,
            listing: stored.listing,
        })
    }

    /// Copy the static catalog into the dynamic table (existing ids are replaced, listings
    /// kept) by `admin`, audited with the ids imported (`plans.imported`).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id))]
    pub async fn import_static_plans(
        &self,
        admin: &User,
    ) -> Result<ImportReport, ManagePlansError> {
        let catalog = &self.config.catalog;
        let ids: Vec<&str> = catalog.iter().map(|p| p.id().as_str()).collect();
        let count = i64::try_from(ids.len()).unwrap_or(i64::MAX);
        let entry = NewAudit {
            admin_id: admin.id.clone(),
            action: AuditAction::PlansImported,
            object_kind: "plan",
            object_id: "catalog".to_owned(),
            before: None,
            after: Some(BTreeMap::from([
                ("planIds".to_owned(), AuditValue::Text(ids.join(","))),
                ("count".to_owned(), AuditValue::Integer(count)),
            ])),
            at: self.clock.now(),
        };
        Ok(self.store.import_plans(catalog, &entry).await?)
    }
}
