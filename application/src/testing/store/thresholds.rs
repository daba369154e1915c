//! Balance thresholds in memory. This fake keeps them and lists them; it tells no crossings
//! (its ledger tells no host events).

use async_trait::async_trait;
use domain::{AccountId, MAX_THRESHOLDS_PER_ACCOUNT, ThresholdId, TransactionKind};

use super::{InMemoryStore, lock};
use crate::ports::{
    AccountThresholds, AddThresholdError, LevelBases, StoreError, ThresholdRecord, ThresholdStore,
};

#[async_trait]
impl ThresholdStore for InMemoryStore {
    async fn balance_thresholds(
        &self,
        account: &AccountId,
    ) -> Result<AccountThresholds, StoreError> {
        let s = lock(&self.0);
        let mut items: Vec<ThresholdRecord> = s
            .thresholds
            .values()
            .filter(|t| &t.account_id == account)
            .cloned()
            .collect();
        items.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        let last_grant = s
            .ledger
            .transactions
            .iter()
            .rev()
            .find(|t| {
                &t.account_id == account
                    && !t.amount.is_decrease()
                    && matches!(
                        t.kind,
                        TransactionKind::PurchaseGrant
                            | TransactionKind::SubscriptionGrant
                            | TransactionKind::AdminAdjustment
                    )
            })
            .map(|t| t.amount.magnitude());
        let limits = s
            .spend_limits
            .values()
            .filter(|l| &l.account_id == account)
            .map(|l| (l.id.clone(), l.limit.credits))
            .collect();
        Ok(AccountThresholds {
            items,
            bases: LevelBases { last_grant, limits },
            balance: s.ledger.balance(account),
        })
    }

    async fn add_balance_threshold(
        &self,
        new: &ThresholdRecord,
    ) -> Result<ThresholdRecord, AddThresholdError> {
        let mut s = lock(&self.0);
        let n = s
            .thresholds
            .values()
            .filter(|t| t.account_id == new.account_id)
            .count();
        if n >= MAX_THRESHOLDS_PER_ACCOUNT {
            return Err(AddThresholdError::TooMany(MAX_THRESHOLDS_PER_ACCOUNT));
        }
        if let Some(limit) = new.level.limit()
            && s.spend_limits
                .get(limit)
                .is_none_or(|l| l.account_id != new.account_id)
        {
            return Err(AddThresholdError::NoSuchLimit);
        }
        s.thresholds.insert(new.id.clone(), new.clone());
        Ok(new.clone())
    }

    async fn remove_balance_threshold(
        &self,
        account: &AccountId,
        id: &ThresholdId,
    ) -> Result<bool, StoreError> {
        let mut s = lock(&self.0);
        if s.thresholds
            .get(id)
            .is_some_and(|t| &t.account_id == account)
        {
            s.thresholds.remove(id);
            return Ok(true);
        }
        Ok(false)
    }
}
