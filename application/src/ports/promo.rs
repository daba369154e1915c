//! Promo codes in storage: the codes administrators create and the redemptions users make.
//! Writes go through [`super::ChangeSet`]: a code is created or switched on and off as an
//! [`super::AdminWrite`], a redemption is the set's `promo` part with the grant of its credits.

use async_trait::async_trait;
use domain::{Credits, PromoCode, PromoTerms, Timestamp, UserId};

use super::store::StoreError;

/// A promo code as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPromoCode {
    /// Its id.
    pub id: String,
    /// The code users type.
    pub code: PromoCode,
    /// What a redemption grants and who may redeem it.
    pub terms: PromoTerms,
    /// Whether it may be redeemed (an administrator can switch it off and on again).
    pub active: bool,
    /// Its redemptions so far.
    pub redeemed: u32,
    /// The administrator who created it.
    pub created_by: UserId,
    /// When.
    pub created_at: Timestamp,
}

/// A redemption to write, as [`domain::decide_redemption`] decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRedemption {
    /// Its id (the grant's source is `promo:<id>`).
    pub id: String,
    /// The code's id.
    pub code_id: String,
    /// Who redeems it.
    pub user_id: UserId,
    /// The user's how-manieth redemption of the code: a second write of the same ordinal is a
    /// [`StoreError::Conflict`].
    pub ordinal: u32,
    /// The request's key (a retry finds the redemption it made).
    pub request_key: String,
    /// Credits granted.
    pub credits: Credits,
    /// When.
    pub at: Timestamp,
}

/// A redemption as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedemptionRecord {
    /// Its id.
    pub id: String,
    /// The code's id.
    pub code_id: String,
    /// Who redeemed it.
    pub user_id: UserId,
    /// The user's how-manieth redemption of the code.
    pub ordinal: u32,
    /// Credits granted.
    pub credits: Credits,
    /// When.
    pub redeemed_at: Timestamp,
}

/// What a redemption is decided from, read from storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedeemerFacts {
    /// The user's redemptions of the code so far.
    pub by_user: u32,
    /// Whether the user ever paid an order.
    pub has_paid: bool,
}

/// Reading promo codes and redemptions.
#[async_trait]
pub trait PromoStore: Send + Sync + 'static {
    /// The code `code`, if one was created.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn promo_code(&self, code: &PromoCode) -> Result<Option<StoredPromoCode>, StoreError>;

    /// The code with id `id`.
    ///
    /// # Errors
    /// As [`PromoStore::promo_code`].
    async fn promo_code_by_id(&self, id: &str) -> Result<Option<StoredPromoCode>, StoreError>;

    /// Every code, newest first, up to `limit`.
    ///
    /// # Errors
    /// As [`PromoStore::promo_code`].
    async fn promo_codes(&self, limit: u32) -> Result<Vec<StoredPromoCode>, StoreError>;

    /// The redemption `user` made of code `code_id` with `request_key`, if any.
    ///
    /// # Errors
    /// As [`PromoStore::promo_code`].
    async fn redemption_by_key(
        &self,
        code_id: &str,
        user: &UserId,
        request_key: &str,
    ) -> Result<Option<RedemptionRecord>, StoreError>;

    /// What a redemption of code `code_id` by `user` is decided from.
    ///
    /// # Errors
    /// Storage failures.
    async fn redeemer_facts(
        &self,
        code_id: &str,
        user: &UserId,
    ) -> Result<RedeemerFacts, StoreError>;

    /// The latest redemptions of code `code_id`, newest first, up to `limit`.
    ///
    /// # Errors
    /// As [`PromoStore::promo_code`].
    async fn redemptions(
        &self,
        code_id: &str,
        limit: u32,
    ) -> Result<Vec<RedemptionRecord>, StoreError>;
}
