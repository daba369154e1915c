//! Spend limits on an account: listing them with their usage, adding and removing them.
//!
//! Anyone acting in an account reads its limits; its owners and admins (on a personal account,
//! its user) add and remove them. The store checks them in every spend's own transaction.

use domain::{
    AccountId, Credits, Enforcement, FeatureName, LimitScope, LimitStanding, ModelName, SpendLimit,
    SpendLimitId, SpendWindow, UserId,
};

use super::InfraError;
use crate::ports::{
    AddLimitError, Clock, IdGenerator, NewSpendLimit, SecretHasher, SpendLimitRecord, Store,
    StoreError,
};
use crate::service::Service;

/// A limit to add, as a caller describes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LimitDraft {
    /// The one feature it counts (`None`: every spend).
    pub feature: Option<String>,
    /// The one AI model it counts (`None`: every spend).
    pub model: Option<String>,
    /// The one API key whose spends it counts (`None`: every spend): a key bound to the account.
    pub api_key_id: Option<String>,
    /// The one member whose spends it counts (`None`: every spend): a member of the account.
    pub member_id: Option<String>,
    /// `hour`, `day`, `week`, `month` or `rolling`.
    pub window: String,
    /// The hours of a rolling window.
    pub rolling_hours: Option<u32>,
    /// The most per window, in credits (decimal text, up to two places).
    pub credits: String,
    /// `hard` (default) or `soft`.
    pub enforcement: Option<String>,
}

/// A limit with where it stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownLimit {
    /// The limit as stored.
    pub record: SpendLimitRecord,
    /// Used, left and when it resets, as of now.
    pub standing: LimitStanding,
}

/// Why a limit request was refused.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// A field is out of form.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The user's role does not allow changing the account's limits.
    #[error("only the account's owners and admins change its limits")]
    NotAllowed,
    /// The account already has as many limits as it may.
    #[error("an account carries at most {0} limits")]
    TooMany(usize),
    /// No such limit on this account.
    #[error("limit not found")]
    NotFound,
    /// No such account (an operator's request).
    #[error("account not found")]
    AccountNotFound,
    /// The draft names an API key that is not bound to the account, or is revoked.
    #[error("apiKeyId: no API key bound to this account has this id")]
    NoSuchKey,
    /// The draft names a user who is not a member of the account.
    #[error("memberId: no member of this account has this id")]
    NoSuchMember,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for LimitsError {
    fn from(e: StoreError) -> Self {
        LimitsError::Infra(e.into())
    }
}

impl From<AddLimitError> for LimitsError {
    fn from(e: AddLimitError) -> Self {
        match e {
            AddLimitError::TooMany(n) => LimitsError::TooMany(n),
            AddLimitError::NoSuchKey => LimitsError::NoSuchKey,
            AddLimitError::NoSuchMember => LimitsError::NoSuchMember,
            AddLimitError::Store(e) => e.into(),
        }
    }
}

/// The limit a draft describes.
///
/// # Errors
/// [`LimitsError::Invalid`] naming the field.
pub fn parse_draft(draft: &LimitDraft) -> Result<(LimitScope, SpendLimit), LimitsError> {
    let invalid = |field, message: &str| LimitsError::Invalid {
        field,
        message: message.to_owned(),
    };
    let credits = draft
        .credits
        .trim()
        .parse::<rust_decimal::Decimal>()
        .ok()
        .and_then(|d| Credits::from_decimal(d).ok())
        .filter(|c| !c.is_zero())
        .ok_or_else(|| {
            invalid(
                "credits",
                "must be a positive number of credits with at most two decimal places",
            )
        })?;
    let window = SpendWindow::parse(&draft.window, draft.rolling_hours).map_err(|e| {
        let field = match e {
            domain::SpendWindowError::UnknownWindow => "window",
            domain::SpendWindowError::Hours => "rollingHours",
        };
        invalid(field, &e.to_string())
    })?;
    let enforcement = match draft.enforcement.as_deref() {
        None => Enforcement::Hard,
        Some(code) => {
            Enforcement::parse(code).ok_or_else(|| invalid("enforcement", "is hard or soft"))?
        }
    };
    let feature = draft
        .feature
        .as_deref()
        .map(|f| FeatureName::new(f).map(|_| f.to_owned()))
        .transpose()
        .map_err(|e| invalid("feature", &e.to_string()))?;
    let model = draft
        .model
        .as_deref()
        .map(|m| ModelName::new(m).map(|_| m.to_owned()))
        .transpose()
        .map_err(|e| invalid("model", &e.to_string()))?;
    let member = draft
        .member_id
        .as_deref()
        .map(UserId::new)
        .transpose()
        .map_err(|e| invalid("memberId", &e.to_string()))?;
    let scope = LimitScope {
        feature,
        model,
        api_key: draft.api_key_id.clone(),
        member,
    };
    Ok((
        scope,
        SpendLimit {
            credits,
            window,
            enforcement,
        },
    ))
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The limits of `account` with their usage now, oldest first (the caller has settled that
    /// the request acts in the account).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn spend_limits(&self, account: &AccountId) -> Result<Vec<ShownLimit>, LimitsError> {
        let now = self.clock.now();
        let records = self.store.spend_limits(account, now).await?;
        Ok(records
            .into_iter()
            .map(|record| ShownLimit {
                standing: record.limit.standing(&record.buckets, now),
                record,
            })
            .collect())
    }

    /// Add a limit to `account` as `user` (an owner or admin of it; on a personal account, its
    /// user): it counts the spends from now on.
    ///
    /// # Errors
    /// [`LimitsError::Invalid`], [`LimitsError::NotAllowed`], [`LimitsError::TooMany`].
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn add_spend_limit(
        &self,
        user: &UserId,
        account: &AccountId,
        draft: LimitDraft,
    ) -> Result<ShownLimit, LimitsError> {
        let (scope, limit) = parse_draft(&draft)?;
        if !self.manages_billing_of(user, account).await? {
            return Err(LimitsError::NotAllowed);
        }
        let id = SpendLimitId::new(self.ids.new_id("lim"))
            .map_err(|e| InfraError::Unexpected(e.into()))?;
        let now = self.clock.now();
        let new = NewSpendLimit {
            id,
            account_id: account.clone(),
            scope,
            limit,
            created_by: Some(user.clone()),
            now,
        };
        let record = self.store.add_spend_limit(&new).await?;
        Ok(ShownLimit {
            standing: record.limit.standing(&record.buckets, now),
            record,
        })
    }

    /// Remove a limit of `account` as `user` (an owner or admin of it).
    ///
    /// # Errors
    /// [`LimitsError::NotAllowed`], [`LimitsError::NotFound`].
    #[tracing::instrument(skip_all, fields(account_id = %account, limit_id = %id))]
    pub async fn remove_spend_limit(
        &self,
        user: &UserId,
        account: &AccountId,
        id: &SpendLimitId,
    ) -> Result<(), LimitsError> {
        if !self.manages_billing_of(user, account).await? {
            return Err(LimitsError::NotAllowed);
        }
        if self.store.remove_spend_limit(account, id).await? {
            Ok(())
        } else {
            Err(LimitsError::NotFound)
        }
    }
}
