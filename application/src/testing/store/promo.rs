//! Promo codes and redemptions in memory, with the guards the database keeps: a code's count
//! never passes its limit, and a user's ordinal and request key are unique per code.

use async_trait::async_trait;
use domain::{OrderStatus, PromoCode, UserId};

use super::{InMemoryStore, State, lock};
use crate::ports::{
    ApplyError, NewRedemption, PromoStore, RedeemerFacts, RedemptionRecord, Refusal, StoreError,
    StoredPromoCode,
};

pub(super) fn create(s: &mut State, code: &StoredPromoCode) -> Result<(), StoreError> {
    if s.promo_codes.values().any(|c| c.code == code.code) || s.promo_codes.contains_key(&code.id) {
        return Err(StoreError::Conflict("promo code exists".into()));
    }
    s.promo_codes.insert(code.id.clone(), code.clone());
    Ok(())
}

pub(super) fn set_active(s: &mut State, id: &str, active: bool) -> Result<(), StoreError> {
    let code = s.promo_codes.get_mut(id).ok_or(StoreError::NotFound)?;
    code.active = active;
    Ok(())
}

pub(super) fn redeem(s: &mut State, new: &NewRedemption) -> Result<(), ApplyError> {
    let taken = s.promo_redemptions.iter().any(|(r, key)| {
        r.code_id == new.code_id
            && r.user_id == new.user_id
            && (r.ordinal == new.ordinal || key == &new.request_key)
    });
    if taken {
        return Err(StoreError::Conflict("redemption exists".into()).into());
    }
    let code = s
        .promo_codes
        .get_mut(&new.code_id)
        .ok_or(StoreError::NotFound)?;
    if code
        .terms
        .max_redemptions
        .is_some_and(|max| code.redeemed >= max)
    {
        return Err(ApplyError::Refused(Refusal::PromoExhausted));
    }
    code.redeemed += 1;
    let record = RedemptionRecord {
        id: new.id.clone(),
        code_id: new.code_id.clone(),
        user_id: new.user_id.clone(),
        ordinal: new.ordinal,
        credits: new.credits,
        redeemed_at: new.at,
    };
    s.promo_redemptions.push((record, new.request_key.clone()));
    Ok(())
}

#[async_trait]
impl PromoStore for InMemoryStore {
    async fn promo_code(&self, code: &PromoCode) -> Result<Option<StoredPromoCode>, StoreError> {
        let s = lock(&self.0);
        Ok(s.promo_codes.values().find(|c| &c.code == code).cloned())
    }

    async fn promo_code_by_id(&self, id: &str) -> Result<Option<StoredPromoCode>, StoreError> {
        Ok(lock(&self.0).promo_codes.get(id).cloned())
    }

    async fn promo_codes(&self, limit: u32) -> Result<Vec<StoredPromoCode>, StoreError> {
        let s = lock(&self.0);
        let mut codes: Vec<StoredPromoCode> = s.promo_codes.values().cloned().collect();
        codes.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        codes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok(codes)
    }

    async fn redemption_by_key(
        &self,
        code_id: &str,
        user: &UserId,
        request_key: &str,
    ) -> Result<Option<RedemptionRecord>, StoreError> {
        let s = lock(&self.0);
        Ok(s.promo_redemptions
            .iter()
            .find(|(r, key)| r.code_id == code_id && &r.user_id == user && key == request_key)
            .map(|(r, _)| r.clone()))
    }

    async fn redeemer_facts(
        &self,
        code_id: &str,
        user: &UserId,
    ) -> Result<RedeemerFacts, StoreError> {
        let s = lock(&self.0);
        let by_user = s
            .promo_redemptions
            .iter()
            .filter(|(r, _)| r.code_id == code_id && &r.user_id == user)
            .count();
        let has_paid = s.orders.values().any(|o| {
            o.order.user_id() == user
                && matches!(
                    o.order.status(),
                    OrderStatus::Paid { .. }
                        | OrderStatus::PartiallyRefunded { .. }
                        | OrderStatus::Refunded { .. }
                )
        });
        Ok(RedeemerFacts {
            by_user: u32::try_from(by_user).unwrap_or(u32::MAX),
            has_paid,
        })
    }

    async fn redemptions(
        &self,
        code_id: &str,
        limit: u32,
    ) -> Result<Vec<RedemptionRecord>, StoreError> {
        let s = lock(&self.0);
        Ok(s.promo_redemptions
            .iter()
            .rev()
            .filter(|(r, _)| r.code_id == code_id)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(r, _)| r.clone())
            .collect())
    }
}
