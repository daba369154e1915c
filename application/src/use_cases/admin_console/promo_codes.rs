//! Administrators' promo codes: creating one (`promo_code.created`) and switching one off or on
//! again (`promo_code.updated`), each audited in the write's own transaction, and a code's
//! latest redemptions.

use std::collections::BTreeMap;

use domain::{Credits, GrantCategory, PlanId, PromoCode, PromoTerms, PromoTermsError, Timestamp};

use super::audited::{Entry, text};
use crate::accounts::User;
use crate::ports::{
    AdminWrite, AuditAction, AuditFacts, AuditValue, Clock, IdGenerator, RedemptionRecord,
    SecretHasher, Store, StoreError, StoredPromoCode,
};
use crate::service::Service;
use crate::use_cases::InfraError;

/// A code to create, as an administrator describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromoDraft {
    /// The code users type (case-insensitive).
    pub code: String,
    /// Credits per redemption (decimal text, up to two places).
    pub credits: String,
    /// `paid`, `promotional` (default), `bonus` or `compensation`.
    pub category: Option<String>,
    /// Days after a redemption when its credits expire (none: they do not).
    pub expires_after_days: Option<u32>,
    /// From when it can be redeemed.
    pub valid_from: Option<Timestamp>,
    /// Until when (exclusive).
    pub valid_until: Option<Timestamp>,
    /// The most redemptions in total.
    pub max_redemptions: Option<u32>,
    /// The most per user (default 1).
    pub per_user: Option<u32>,
    /// Only users who never paid an order.
    pub new_users_only: bool,
    /// Only holders of this plan.
    pub plan_id: Option<String>,
}

/// Why an administrator's promo code request was refused.
#[derive(Debug, thiserror::Error)]
pub enum PromoAdminError {
    /// A field is out of form.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A code with this text exists.
    #[error("a promo code with this code exists")]
    Exists,
    /// No such code.
    #[error("promo code not found")]
    NotFound,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for PromoAdminError {
    fn from(e: StoreError) -> Self {
        PromoAdminError::Infra(e.into())
    }
}

fn invalid(field: &'static str, message: impl ToString) -> PromoAdminError {
    PromoAdminError::Invalid {
        field,
        message: message.to_string(),
    }
}

/// The code and terms a draft describes (the plan it names is checked against the catalogue
/// by the caller).
///
/// # Errors
/// [`PromoAdminError::Invalid`] naming the field.
pub fn parse_promo_draft(draft: &PromoDraft) -> Result<(PromoCode, PromoTerms), PromoAdminError> {
    let code = PromoCode::parse(&draft.code).map_err(|e| invalid("code", e))?;
    let credits = draft
        .credits
        .trim()
        .parse::<rust_decimal::Decimal>()
        .ok()
        .and_then(|d| Credits::from_decimal(d).ok())
        .ok_or_else(|| {
            invalid(
                "credits",
                "must be a positive number of credits with at most two decimal places",
            )
        })?;
    let category = match draft.category.as_deref() {
        None => GrantCategory::Promotional,
        Some(c) => GrantCategory::parse(c)
            .ok_or_else(|| invalid("category", "is paid, promotional, bonus or compensation"))?,
    };
    let plan = draft
        .plan_id
        .as_deref()
        .map(PlanId::new)
        .transpose()
        .map_err(|e| invalid("planId", e))?;
    let terms = PromoTerms {
        credits,
        category,
        expires_after_days: draft.expires_after_days,
        valid_from: draft.valid_from,
        valid_until: draft.valid_until,
        max_redemptions: draft.max_redemptions,
        per_user: draft.per_user.unwrap_or(1),
        new_users_only: draft.new_users_only,
        plan,
    };
    terms.check().map_err(|e| {
        let field = match e {
            PromoTermsError::ZeroCredits => "credits",
            PromoTermsError::Window => "validUntil",
            PromoTermsError::ZeroTotal => "maxRedemptions",
            PromoTermsError::PerUser => "perUser",
            PromoTermsError::Expiry => "expiresAfterDays",
        };
        invalid(field, e)
    })?;
    Ok((code, terms))
}

/// What the audit log keeps of a code.
fn promo_facts(p: &StoredPromoCode) -> AuditFacts {
    let t = &p.terms;
    let mut facts = BTreeMap::from([
        ("code".to_owned(), text(&p.code)),
        ("credits".to_owned(), text(t.credits)),
        ("category".to_owned(), text(t.category.code())),
        (
            "perUser".to_owned(),
            AuditValue::Integer(i64::from(t.per_user)),
        ),
        ("active".to_owned(), text(p.active)),
    ]);
    let optional = [
        ("maxRedemptions", t.max_redemptions.map(i64::from)),
        ("expiresAfterDays", t.expires_after_days.map(i64::from)),
        ("validFrom", t.valid_from.map(Timestamp::unix_millis)),
        ("validUntil", t.valid_until.map(Timestamp::unix_millis)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            facts.insert(name.to_owned(), AuditValue::Integer(value));
        }
    }
    if t.new_users_only {
        facts.insert("newUsersOnly".to_owned(), text(true));
    }
    if let Some(plan) = &t.plan {
        facts.insert("planId".to_owned(), text(plan));
    }
    facts
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// `admin` creates a promo code, audited (`promo_code.created`).
    ///
    /// # Errors
    /// [`PromoAdminError::Invalid`] (also a plan the catalogue does not have),
    /// [`PromoAdminError::Exists`], infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id))]
    pub async fn create_promo_code(
        &self,
        admin: &User,
        draft: &PromoDraft,
    ) -> Result<StoredPromoCode, PromoAdminError> {
        let (code, terms) = parse_promo_draft(draft)?;
        if let Some(plan) = &terms.plan
            && crate::use_cases::plans::find_plan(
                self.config.pricing_mode,
                &self.config.catalog,
                &self.store,
                plan,
            )
            .await?
            .is_none()
        {
            return Err(invalid("planId", "no plan has this id"));
        }
        let stored = StoredPromoCode {
            id: self.ids.new_id("promo"),
            code,
            terms,
            active: true,
            redeemed: 0,
            created_by: admin.id.clone(),
            created_at: self.clock.now(),
        };
        let entry = Entry {
            admin,
            action: AuditAction::PromoCodeCreated,
            object_kind: "promo_code",
            object_id: stored.id.clone(),
            before: None,
            after: Some(promo_facts(&stored)),
        };
        match self
            .write_audited(AdminWrite::CreatePromoCode(&stored), entry)
            .await
        {
            Ok(()) => Ok(stored),
            Err(StoreError::Conflict(_)) => Err(PromoAdminError::Exists),
            Err(e) => Err(e.into()),
        }
    }

    /// `admin` switches promo code `id` off (`active = false`: no more redemptions) or on
    /// again, audited (`promo_code.updated`).
    ///
    /// # Errors
    /// [`PromoAdminError::NotFound`], infrastructure.
    #[tracing::instrument(skip_all, fields(admin_id = %admin.id, promo_code_id = id))]
    pub async fn set_promo_code_active(
        &self,
        admin: &User,
        id: &str,
        active: bool,
    ) -> Result<StoredPromoCode, PromoAdminError> {
        let before = self
            .store
            .promo_code_by_id(id)
            .await?
            .ok_or(PromoAdminError::NotFound)?;
        let after = StoredPromoCode {
            active,
            ..before.clone()
        };
        let entry = Entry {
            admin,
            action: AuditAction::PromoCodeUpdated,
            object_kind: "promo_code",
            object_id: id.to_owned(),
            before: Some(BTreeMap::from([("active".to_owned(), text(before.active))])),
            after: Some(BTreeMap::from([("active".to_owned(), text(active))])),
        };
        match self
            .write_audited(AdminWrite::SetPromoCodeActive(id, active), entry)
            .await
        {
            Ok(()) => Ok(self.store.promo_code_by_id(id).await?.unwrap_or(after)),
            Err(StoreError::NotFound) => Err(PromoAdminError::NotFound),
            Err(e) => Err(e.into()),
        }
    }

    /// Promo code `id` and its latest redemptions (up to 100), newest first.
    ///
    /// # Errors
    /// [`PromoAdminError::NotFound`], infrastructure.
    #[tracing::instrument(skip_all, fields(promo_code_id = id))]
    pub async fn promo_code_detail(
        &self,
        id: &str,
    ) -> Result<(StoredPromoCode, Vec<RedemptionRecord>), PromoAdminError> {
        let code = self
            .store
            .promo_code_by_id(id)
            .await?
            .ok_or(PromoAdminError::NotFound)?;
        let redemptions = self.store.redemptions(id, 100).await?;
        Ok((code, redemptions))
    }
}
