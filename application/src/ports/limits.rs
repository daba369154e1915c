//! Spend limits on an account: what the store keeps of them.
//!
//! The store checks an account's limits in the spend's own transaction (see
//! [`domain::spend_limit`] for what counts and when); these are the reads and writes of the
//! limits themselves.

use async_trait::async_trait;
use domain::{AccountId, Bucket, LimitScope, SpendLimit, SpendLimitId, Timestamp, UserId};

use super::StoreError;

/// A limit as stored, with what it counted in the buckets of its current window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendLimitRecord {
    /// Its id.
    pub id: SpendLimitId,
    /// The account it limits.
    pub account_id: AccountId,
    /// What it counts of the account's spends (a key bound to the account; a member of it).
    pub scope: LimitScope,
    /// The limit.
    pub limit: SpendLimit,
    /// Who made it (`None`: an operator or the app's backend).
    pub created_by: Option<UserId>,
    /// When.
    pub created_at: Timestamp,
    /// What it counted in the buckets of its window as of the read.
    pub buckets: Vec<Bucket>,
}

impl SpendLimitRecord {
    /// The refusal of a spend by this limit (a hard one), as the caller is told it.
    #[must_use]
    pub fn refusal(&self, refused: domain::LimitRefusal) -> domain::LimitReached {
        domain::LimitReached {
            owner: domain::LimitOwner::Account {
                id: self.id.clone(),
                scope: Box::new(self.scope.clone()),
            },
            credits: self.limit.credits,
            window: self.limit.window,
            left: refused.left,
            resets_at: refused.resets_at,
        }
    }

    /// Count a spend of `amount` at `now` against `limits` ([`domain::spend_limit::count_all`]):
    /// what each counted, or the refusal of the hard limit with the least left.
    ///
    /// # Errors
    /// That refusal.
    pub fn count_all(
        limits: &[SpendLimitRecord],
        amount: domain::Credits,
        now: Timestamp,
    ) -> Result<Vec<domain::Counted>, domain::LimitReached> {
        domain::spend_limit::count_all(
            limits.iter().map(|l| (&l.limit, l.buckets.as_slice())),
            amount,
            now,
        )
        .map_err(|(i, refused)| limits[i].refusal(refused))
    }

    /// Count a spend of `amount` at `now`, made in `spend`, against those of `limits` whose
    /// scope counts it ([`Self::count_all`]), adding it to their buckets: the index in `limits`
    /// of each limit that counted it, with what it counted; or the refusal (nothing moved).
    ///
    /// # Errors
    /// The refusal of the hard limit with the least left.
    pub fn count_among(
        limits: &mut [SpendLimitRecord],
        spend: &LimitScope,
        amount: domain::Credits,
        now: Timestamp,
    ) -> Result<Vec<(usize, domain::Counted)>, domain::LimitReached> {
        let under: Vec<usize> = (0..limits.len())
            .filter(|&i| limits[i].scope.counts(spend))
            .collect();
        let applicable: Vec<SpendLimitRecord> = under.iter().map(|&i| limits[i].clone()).collect();
        let counts = Self::count_all(&applicable, amount, now)?;
        for (&i, c) in under.iter().zip(&counts) {
            limits[i].add_to_bucket(c.bucket, amount);
        }
        Ok(under.into_iter().zip(counts).collect())
    }

    /// Add `amount` to the bucket that starts at `start` (made if it has none).
    pub fn add_to_bucket(&mut self, start: Timestamp, amount: domain::Credits) {
        match self.buckets.iter_mut().find(|b| b.start == start) {
            Some(b) => b.spent = b.spent.checked_add(amount).unwrap_or(domain::Credits::MAX),
            None => self.buckets.push(Bucket {
                start,
                spent: amount,
            }),
        }
    }
}

/// A limit to add to an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSpendLimit {
    /// Its id.
    pub id: SpendLimitId,
    /// The account.
    pub account_id: AccountId,
    /// What it counts of the account's spends.
    pub scope: LimitScope,
    /// The limit.
    pub limit: SpendLimit,
    /// Who makes it.
    pub created_by: Option<UserId>,
    /// Now.
    pub now: Timestamp,
}

/// Why a limit was not added.
#[derive(Debug, thiserror::Error)]
pub enum AddLimitError {
    /// The account already carries [`domain::MAX_LIMITS_PER_ACCOUNT`] limits.
    #[error("the account already has {0} limits")]
    TooMany(usize),
    /// The limit names an API key that is not bound to its account, or is revoked.
    #[error("no such API key on this account")]
    NoSuchKey,
    /// The limit names a user who is not a member of its account (a team).
    #[error("no such member of this account")]
    NoSuchMember,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A refused limit as an administrator's change set reports it
/// ([`super::AdminWrite::AddSpendLimit`]): too many is a conflict, a key not bound to the
/// account is not found.
impl From<AddLimitError> for StoreError {
    fn from(refused: AddLimitError) -> Self {
        match refused {
            AddLimitError::TooMany(n) => {
                StoreError::Conflict(format!("the account has {n} limits"))
            }
            AddLimitError::NoSuchKey | AddLimitError::NoSuchMember => StoreError::NotFound,
            AddLimitError::Store(e) => e,
        }
    }
}

/// An account's spend limits.
#[async_trait]
pub trait SpendLimitStore: Send + Sync + 'static {
    /// The limits of `account`, oldest first, with their buckets inside their windows at `now`.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn spend_limits(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Vec<SpendLimitRecord>, StoreError>;

    /// Add a limit, counting from nothing: in one transaction with the account's balance row
    /// locked (the spends in flight finish first, those after it count against it), refused
    /// past [`domain::MAX_LIMITS_PER_ACCOUNT`]. A limit on an API key needs a key bound to the
    /// account and not revoked, and one on a member a member of the account, each read in the
    /// same transaction.
    ///
    /// # Errors
    /// [`AddLimitError::TooMany`], [`AddLimitError::NoSuchKey`], [`AddLimitError::NoSuchMember`];
    /// storage failures.
    async fn add_spend_limit(&self, new: &NewSpendLimit)
    -> Result<SpendLimitRecord, AddLimitError>;

    /// Remove a limit of `account`, with what it counted; `false` when it has no such limit.
    /// Holds it counted give nothing back to it once it is gone.
    ///
    /// # Errors
    /// Storage failures.
    async fn remove_spend_limit(
        &self,
        account: &AccountId,
        id: &SpendLimitId,
    ) -> Result<bool, StoreError>;

    /// Tell `limit.reset` of up to `batch` limits that `limit.reached` told of and whose window
    /// has reset by `now` with room again, each in its own transaction under its account's
    /// balance-row lock (a spend that fills it again first is seen); a limit still full waits
    /// for its next reset. Returns how many were told.
    ///
    /// # Errors
    /// Storage failures.
    async fn tell_limit_resets(&self, now: Timestamp, batch: u32) -> Result<u32, StoreError>;
}
