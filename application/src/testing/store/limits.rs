//! Spend limits in memory, counted by the same rules as the SQL store
//! ([`SpendLimitRecord::count_all`]): a consumption and a hold count when taken, a release and a
//! settle for less give back to the bucket the hold counted in. (An overrun at settle is not
//! counted here: this fake's settles never take more than the hold.)

use async_trait::async_trait;
use domain::{
    AccountId, Credits, LimitScope, MAX_LIMITS_PER_ACCOUNT, ReservationId, SpendLimitId, Timestamp,
};

use super::{InMemoryStore, State, lock};
use crate::ports::{
    AddLimitError, ApplyError, NewSpendLimit, Refusal, SpendLimitRecord, SpendLimitStore,
    StoreError,
};

/// What a hold counted: (limit, bucket, amount).
pub(super) type HoldCounts = Vec<(SpendLimitId, Timestamp, Credits)>;

/// Count a spend of `amount` (its feature, model, API key and member in `spend`) against every limit of
/// `account` it falls under, as the SQL store does ([`SpendLimitRecord::count_all`]): what it
/// counted, or the refusal of the hard limit with the least left (nothing counted).
pub(super) fn count(
    s: &mut State,
    account: &AccountId,
    spend: &LimitScope,
    amount: Credits,
    now: Timestamp,
) -> Result<HoldCounts, ApplyError> {
    let mut limits: Vec<SpendLimitRecord> = s
        .spend_limits
        .values()
        .filter(|r| &r.account_id == account)
        .cloned()
        .collect();
    limits.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    let counts = SpendLimitRecord::count_among(&mut limits, spend, amount, now)
        .map_err(|reached| ApplyError::Refused(Refusal::LimitReached(reached)))?;
    let counted: HoldCounts = counts
        .iter()
        .map(|(i, c)| (limits[*i].id.clone(), c.bucket, amount))
        .collect();
    for (i, _) in counts {
        let moved = &limits[i];
        s.spend_limits.insert(moved.id.clone(), moved.clone());
    }
    Ok(counted)
}

/// Give back what `hold` counted (all of it, or `part` of each count).
pub(super) fn give_back(s: &mut State, hold: &ReservationId, part: Option<Credits>) {
    let Some(counts) = s.hold_limit_counts.remove(hold) else {
        return;
    };
    for (id, bucket, amount) in counts {
        let back = part.map_or(amount, |p| p.min(amount));
        if let Some(record) = s.spend_limits.get_mut(&id)
            && let Some(b) = record.buckets.iter_mut().find(|b| b.start == bucket)
        {
            b.spent = domain::spend_limit::given_back(b.spent, back);
        }
    }
}

#[async_trait]
impl SpendLimitStore for InMemoryStore {
    async fn spend_limits(
        &self,
        account: &AccountId,
        _now: Timestamp,
    ) -> Result<Vec<SpendLimitRecord>, StoreError> {
        let s = lock(&self.0);
        let mut limits: Vec<SpendLimitRecord> = s
            .spend_limits
            .values()
            .filter(|r| &r.account_id == account)
            .cloned()
            .collect();
        limits.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(limits)
    }

    async fn add_spend_limit(
        &self,
        new: &NewSpendLimit,
    ) -> Result<SpendLimitRecord, AddLimitError> {
        add_limit(&mut lock(&self.0), new)
    }

    async fn remove_spend_limit(
        &self,
        account: &AccountId,
        id: &SpendLimitId,
    ) -> Result<bool, StoreError> {
        Ok(remove_limit(&mut lock(&self.0), account, id))
    }

    /// This fake tells no host events, so no limit waits for a reset to be told.
    async fn tell_limit_resets(&self, _now: Timestamp, _batch: u32) -> Result<u32, StoreError> {
        Ok(0)
    }
}

/// Add `new` to `s` (counting from nothing: this fake does not seed from the ledger).
pub(super) fn add_limit(
    s: &mut State,
    new: &NewSpendLimit,
) -> Result<SpendLimitRecord, AddLimitError> {
    let n = s
        .spend_limits
        .values()
        .filter(|r| r.account_id == new.account_id)
        .count();
    if n >= MAX_LIMITS_PER_ACCOUNT {
        return Err(AddLimitError::TooMany(MAX_LIMITS_PER_ACCOUNT));
    }
    if let Some(key) = &new.scope.api_key {
        let bound = s.api_keys.iter().any(|(k, _)| {
            &k.id == key && k.account.as_ref() == Some(&new.account_id) && k.revoked_at.is_none()
        });
        if !bound {
            return Err(AddLimitError::NoSuchKey);
        }
    }
    if let Some(member) = &new.scope.member
        && !s
            .members
            .contains_key(&(new.account_id.clone(), member.clone()))
    {
        return Err(AddLimitError::NoSuchMember);
    }
    let record = SpendLimitRecord {
        id: new.id.clone(),
        account_id: new.account_id.clone(),
        scope: new.scope.clone(),
        limit: new.limit,
        created_by: new.created_by.clone(),
        created_at: new.now,
        buckets: Vec::new(),
    };
    s.spend_limits.insert(new.id.clone(), record.clone());
    Ok(record)
}

/// Remove `account`'s limit `id` from `s`, with the thresholds at a percentage of it: whether
/// it had it.
pub(super) fn remove_limit(s: &mut State, account: &AccountId, id: &SpendLimitId) -> bool {
    match s.spend_limits.get(id) {
        Some(r) if &r.account_id == account => {
            s.spend_limits.remove(id);
            s.thresholds.retain(|_, t| t.level.limit() != Some(id));
            true
        }
        _ => false,
    }
}
