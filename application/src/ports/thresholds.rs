//! Balance thresholds on an account: what the store keeps of them.
//!
//! The store tells a crossing in the transaction of the posting that crosses (see
//! [`domain::threshold`] for the rule); these are the reads and writes of the thresholds.

use async_trait::async_trait;
use domain::{AccountId, Credits, ThresholdId, ThresholdLevel, Timestamp, UserId};

use super::StoreError;

/// A threshold as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThresholdRecord {
    /// Its id.
    pub id: ThresholdId,
    /// The account whose balance it watches.
    pub account_id: AccountId,
    /// Where it sits.
    pub level: ThresholdLevel,
    /// Who made it (`None`: an operator or the app's backend).
    pub created_by: Option<UserId>,
    /// When.
    pub created_at: Timestamp,
}

/// An account's thresholds, with what their levels are taken from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountThresholds {
    /// Oldest first.
    pub items: Vec<ThresholdRecord>,
    /// The amount of the account's last grant (what a percentage is of), if it had one.
    pub last_grant: Option<Credits>,
    /// The balance now.
    pub balance: Credits,
}

/// Why a threshold was not added.
#[derive(Debug, thiserror::Error)]
pub enum AddThresholdError {
    /// The account already carries [`domain::MAX_THRESHOLDS_PER_ACCOUNT`] thresholds.
    #[error("the account already has {0} thresholds")]
    TooMany(usize),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An account's balance thresholds.
#[async_trait]
pub trait ThresholdStore: Send + Sync + 'static {
    /// The thresholds of `account`, oldest first, with its last grant and balance.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn balance_thresholds(
        &self,
        account: &AccountId,
    ) -> Result<AccountThresholds, StoreError>;

    /// Add `new` to its account, in one transaction with the account's balance row locked (the
    /// postings in flight finish first; those after it tell its crossings), refused past
    /// [`domain::MAX_THRESHOLDS_PER_ACCOUNT`].
    ///
    /// # Errors
    /// [`AddThresholdError::TooMany`]; storage failures.
    async fn add_balance_threshold(
        &self,
        new: &ThresholdRecord,
    ) -> Result<ThresholdRecord, AddThresholdError>;

    /// Remove a threshold of `account`; `false` when it has no such threshold.
    ///
    /// # Errors
    /// Storage failures.
    async fn remove_balance_threshold(
        &self,
        account: &AccountId,
        id: &ThresholdId,
    ) -> Result<bool, StoreError>;
}
