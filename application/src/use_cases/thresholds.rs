//! Balance thresholds on an account: listing, adding and removing them.
//!
//! Anyone acting in an account reads its thresholds; its owners and admins (on a personal
//! account, its user) add and remove them, as for spend limits. The store tells each crossing
//! in the transaction of the posting that crosses.

use domain::{AccountId, Credits, SpendLimitId, ThresholdId, ThresholdLevel, UserId};

use super::InfraError;
use crate::ports::{
    AccountThresholds, AddThresholdError, Clock, IdGenerator, SecretHasher, Store, StoreError,
    ThresholdRecord,
};
use crate::service::Service;

/// A threshold to add, as a caller describes it: exactly one of the three levels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThresholdDraft {
    /// At this many credits (decimal text, up to two places).
    pub credits: Option<String>,
    /// At this percentage (1 to 100) of the account's last grant.
    pub percent_of_grant: Option<u32>,
    /// At this percentage (1 to 100) of the credits of the limit `limit_id`.
    pub percent_of_limit: Option<u32>,
    /// The account's limit a `percent_of_limit` is of.
    pub limit_id: Option<String>,
}

/// A threshold with where it sits now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownThreshold {
    /// The threshold as stored.
    pub record: ThresholdRecord,
    /// The balance it sits at now (`None`: a percentage on an account never granted anything).
    pub level: Option<Credits>,
    /// Whether the balance is below it now.
    pub below: bool,
}

/// Why a threshold request was refused.
#[derive(Debug, thiserror::Error)]
pub enum ThresholdsError {
    /// A field is out of form.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The user's role does not allow changing the account's thresholds.
    #[error("only the account's owners and admins change its thresholds")]
    NotAllowed,
    /// The account already has as many thresholds as it may.
    #[error("an account carries at most {0} thresholds")]
    TooMany(usize),
    /// No such threshold on this account.
    #[error("threshold not found")]
    NotFound,
    /// The draft's `limit_id` names no limit of the account.
    #[error("limitId: no limit of this account has this id")]
    NoSuchLimit,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for ThresholdsError {
    fn from(e: StoreError) -> Self {
        ThresholdsError::Infra(e.into())
    }
}

/// The level a draft describes.
///
/// # Errors
/// [`ThresholdsError::Invalid`] naming the field.
pub fn parse_threshold(draft: &ThresholdDraft) -> Result<ThresholdLevel, ThresholdsError> {
    let invalid = |field, message: String| ThresholdsError::Invalid { field, message };
    let limit = |raw: &str| SpendLimitId::new(raw).map_err(|e| invalid("limitId", e.to_string()));
    match (
        &draft.credits,
        draft.percent_of_grant,
        draft.percent_of_limit,
    ) {
        (None, None, Some(percent)) => {
            let Some(id) = draft.limit_id.as_deref() else {
                return Err(invalid(
                    "limitId",
                    "is required with percentOfLimit".to_owned(),
                ));
            };
            ThresholdLevel::percent_of_limit(limit(id)?, percent)
                .map_err(|e| invalid("percentOfLimit", e.to_string()))
        }
        _ if draft.limit_id.is_some() => Err(invalid(
            "limitId",
            "goes with percentOfLimit alone".to_owned(),
        )),
        (Some(credits), None, None) => {
            let parsed = credits
                .trim()
                .parse::<rust_decimal::Decimal>()
                .ok()
                .and_then(|d| Credits::from_decimal(d).ok())
                .ok_or_else(|| {
                    invalid(
                        "credits",
                        "must be a number of credits with at most two decimal places".to_owned(),
                    )
                })?;
            ThresholdLevel::credits(parsed).map_err(|e| invalid("credits", e.to_string()))
        }
        (None, Some(percent), None) => ThresholdLevel::percent_of_grant(percent)
            .map_err(|e| invalid("percentOfGrant", e.to_string())),
        _ => Err(invalid(
            "credits",
            "give exactly one of credits, percentOfGrant and percentOfLimit".to_owned(),
        )),
    }
}

/// Each threshold of `of` with where it sits.
fn shown(of: AccountThresholds) -> Vec<ShownThreshold> {
    let AccountThresholds {
        items,
        bases,
        balance,
    } = of;
    items
        .into_iter()
        .map(|record| {
            let level = bases.level_of(&record.level);
            ShownThreshold {
                below: level.is_some_and(|l| balance < l),
                level,
                record,
            }
        })
        .collect()
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// The thresholds of `account` with where they sit now, oldest first (the caller has
    /// settled that the request acts in the account).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn balance_thresholds(
        &self,
        account: &AccountId,
    ) -> Result<Vec<ShownThreshold>, ThresholdsError> {
        Ok(shown(self.store.balance_thresholds(account).await?))
    }

    /// Add a threshold to `account` as `user` (an owner or admin of it; on a personal account,
    /// its user): postings from now on tell its crossings.
    ///
    /// # Errors
    /// [`ThresholdsError::Invalid`], [`ThresholdsError::NotAllowed`],
    /// [`ThresholdsError::TooMany`].
    #[tracing::instrument(skip_all, fields(account_id = %account))]
    pub async fn add_balance_threshold(
        &self,
        user: &UserId,
        account: &AccountId,
        draft: ThresholdDraft,
    ) -> Result<ShownThreshold, ThresholdsError> {
        let level = parse_threshold(&draft)?;
        if !self.manages_billing_of(user, account).await? {
            return Err(ThresholdsError::NotAllowed);
        }
        let id = ThresholdId::new(self.ids.new_id("thr"))
            .map_err(|e| InfraError::Unexpected(e.into()))?;
        let new = ThresholdRecord {
            id: id.clone(),
            account_id: account.clone(),
            level,
            created_by: Some(user.clone()),
            created_at: self.clock.now(),
        };
        match self.store.add_balance_threshold(&new).await {
            Ok(_) => {}
            Err(AddThresholdError::TooMany(n)) => return Err(ThresholdsError::TooMany(n)),
            Err(AddThresholdError::NoSuchLimit) => return Err(ThresholdsError::NoSuchLimit),
            Err(AddThresholdError::Store(e)) => return Err(e.into()),
        }
        let all = shown(self.store.balance_thresholds(account).await?);
        all.into_iter()
            .find(|t| t.record.id == id)
            .ok_or(ThresholdsError::NotFound)
    }

    /// Remove a threshold of `account` as `user` (an owner or admin of it).
    ///
    /// # Errors
    /// [`ThresholdsError::NotAllowed`], [`ThresholdsError::NotFound`].
    #[tracing::instrument(skip_all, fields(account_id = %account, threshold_id = %id))]
    pub async fn remove_balance_threshold(
        &self,
        user: &UserId,
        account: &AccountId,
        id: &ThresholdId,
    ) -> Result<(), ThresholdsError> {
        if !self.manages_billing_of(user, account).await? {
            return Err(ThresholdsError::NotAllowed);
        }
        if self.store.remove_balance_threshold(account, id).await? {
            Ok(())
        } else {
            Err(ThresholdsError::NotFound)
        }
    }
}
