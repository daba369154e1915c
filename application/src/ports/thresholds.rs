//! Balance thresholds on an account: what the store keeps of them.
//!
//! The store tells a crossing in the transaction of the posting that crosses (see
//! [`domain::threshold`] for the rule); these are the reads and writes of the thresholds.

use async_trait::async_trait;
use domain::{
    AccountId, Credits, SpendLimitId, ThresholdBases, ThresholdId, ThresholdLevel, Timestamp,
    UserId,
};

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
    /// What their percentages are of.
    pub bases: LevelBases,
    /// The balance now.
    pub balance: Credits,
}

/// What the percentages of an account's thresholds are of, as read with them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LevelBases {
    /// The amount of the account's last grant, if it had one.
    pub last_grant: Option<Credits>,
    /// The credits of the account's limits that thresholds sit at a percentage of.
    pub limits: Vec<(SpendLimitId, Credits)>,
}

impl LevelBases {
    /// The balance `level` sits at ([`ThresholdLevel::level`]).
    #[must_use]
    pub fn level_of(&self, level: &ThresholdLevel) -> Option<Credits> {
        let limit = level.limit().and_then(|id| {
            self.limits
                .iter()
                .find(|(l, _)| l == id)
                .map(|(_, credits)| *credits)
        });
        level.level(ThresholdBases {
            last_grant: self.last_grant,
            limit,
        })
    }
}

/// Why a threshold was not added.
#[derive(Debug, thiserror::Error)]
pub enum AddThresholdError {
    /// The account already carries [`domain::MAX_THRESHOLDS_PER_ACCOUNT`] thresholds.
    #[error("the account already has {0} thresholds")]
    TooMany(usize),
    /// The threshold sits at a percentage of a limit the account does not have.
    #[error("no such limit on this account")]
    NoSuchLimit,
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
    /// [`domain::MAX_THRESHOLDS_PER_ACCOUNT`]. A threshold at a percentage of a limit needs the
    /// limit on the account, read in the same transaction (removing the limit removes it).
    ///
    /// # Errors
    /// [`AddThresholdError::TooMany`], [`AddThresholdError::NoSuchLimit`]; storage failures.
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
