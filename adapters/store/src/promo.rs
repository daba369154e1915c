//! Promo codes and their redemptions ([`PromoStore`]), and the writes a change set makes of
//! them (`crate::apply`, `crate::admin`).
//!
//! A redemption first moves its code's `redeemed` up with one statement that does so only
//! while it is below the code's `max_redemptions`: the row's lock (PostgreSQL) or the write lock
//! (SQLite) orders concurrent redemptions of a code, so the last one allowed is exact on any
//! number of instances, and the table's CHECK makes passing the limit impossible besides. The
//! redemption row is then inserted unless its code, user and ordinal (or request key) are
//! taken, which is a conflict the caller decides again from.

use application::ports::{
    NewRedemption, PromoStore, RedeemerFacts, RedemptionRecord, StoreError, StoredPromoCode,
};
use async_trait::async_trait;
use domain::{Credits, GrantCategory, PlanId, PromoCode, PromoTerms, Timestamp, UserId};
use sea_orm::{ConnectionTrait, DatabaseTransaction, FromQueryResult, Value};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql;

const CODE_COLUMNS: &str = "id, code, credits_hundredths, category, expires_after_days, \
    valid_from, valid_until, max_redemptions, per_user, new_users_only, plan_id, active, \
    redeemed, created_by, created_at";

const REDEMPTION_COLUMNS: &str = "id, code_id, user_id, ordinal, credits_hundredths, redeemed_at";

#[derive(Debug, FromQueryResult)]
struct CodeRow {
    id: String,
    code: String,
    credits_hundredths: i64,
    category: String,
    expires_after_days: Option<i32>,
    valid_from: Option<i64>,
    valid_until: Option<i64>,
    max_redemptions: Option<i32>,
    per_user: i32,
    new_users_only: bool,
    plan_id: Option<String>,
    active: bool,
    redeemed: i32,
    created_by: String,
    created_at: i64,
}

impl CodeRow {
    fn into_stored(self) -> Result<StoredPromoCode, StoreError> {
        let bad = |what: &dyn std::fmt::Display| corrupt("promo_codes", &self.id, what);
        let count = |n: i32| u32::try_from(n).map_err(|e| bad(&e));
        let terms = PromoTerms {
            credits: Credits::from_hundredths(self.credits_hundredths).map_err(|e| bad(&e))?,
            category: GrantCategory::parse(&self.category).ok_or_else(|| bad(&"its category"))?,
            expires_after_days: self.expires_after_days.map(count).transpose()?,
            valid_from: self.valid_from.map(Timestamp::from_unix_millis),
            valid_until: self.valid_until.map(Timestamp::from_unix_millis),
            max_redemptions: self.max_redemptions.map(count).transpose()?,
            per_user: count(self.per_user)?,
            new_users_only: self.new_users_only,
            plan: self
                .plan_id
                .as_deref()
                .map(PlanId::new)
                .transpose()
                .map_err(|e| bad(&e))?,
        };
        Ok(StoredPromoCode {
            code: PromoCode::parse(&self.code).map_err(|e| bad(&e))?,
            terms,
            active: self.active,
            redeemed: count(self.redeemed)?,
            created_by: UserId::new(self.created_by.clone()).map_err(|e| bad(&e))?,
            created_at: Timestamp::from_unix_millis(self.created_at),
            id: self.id,
        })
    }
}

#[derive(Debug, FromQueryResult)]
struct RedemptionRow {
    id: String,
    code_id: String,
    user_id: String,
    ordinal: i32,
    credits_hundredths: i64,
    redeemed_at: i64,
}

impl RedemptionRow {
    fn into_record(self) -> Result<RedemptionRecord, StoreError> {
        let bad = |what: &dyn std::fmt::Display| corrupt("promo_redemptions", &self.id, what);
        Ok(RedemptionRecord {
            user_id: UserId::new(self.user_id.clone()).map_err(|e| bad(&e))?,
            ordinal: u32::try_from(self.ordinal).map_err(|e| bad(&e))?,
            credits: Credits::from_hundredths(self.credits_hundredths).map_err(|e| bad(&e))?,
            redeemed_at: Timestamp::from_unix_millis(self.redeemed_at),
            code_id: self.code_id,
            id: self.id,
        })
    }
}

/// Insert `code`; [`StoreError::Conflict`] when its id or code is taken.
pub(crate) async fn create(
    tx: &DatabaseTransaction,
    code: &StoredPromoCode,
    at: Timestamp,
) -> Result<(), Fail> {
    let t = &code.terms;
    let sql = format!(
        "INSERT INTO promo_codes ({CODE_COLUMNS}, updated_at) VALUES ($1, $2, $3, $4, $5, $6, \
         $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) ON CONFLICT DO NOTHING"
    );
    let values: Vec<Value> = vec![
        code.id.as_str().into(),
        code.code.as_str().into(),
        t.credits.hundredths().into(),
        t.category.code().into(),
        t.expires_after_days.map(i64::from).into(),
        t.valid_from.map(Timestamp::unix_millis).into(),
        t.valid_until.map(Timestamp::unix_millis).into(),
        t.max_redemptions.map(i64::from).into(),
        i64::from(t.per_user).into(),
        t.new_users_only.into(),
        t.plan.as_ref().map(|p| p.as_str().to_owned()).into(),
        code.active.into(),
        i32::try_from(code.redeemed).unwrap_or(i32::MAX).into(),
        code.created_by.as_str().into(),
        code.created_at.unix_millis().into(),
        at.unix_millis().into(),
    ];
    if sql::execute(tx, &sql, values).await? == 0 {
        return Err(Fail::Store(StoreError::Conflict(
            "a promo code with this code exists".into(),
        )));
    }
    Ok(())
}

/// Switch code `id` off or on; [`StoreError::NotFound`] when there is none.
pub(crate) async fn set_active(
    tx: &DatabaseTransaction,
    id: &str,
    active: bool,
    at: Timestamp,
) -> Result<(), Fail> {
    let sql = "UPDATE promo_codes SET active = $2, updated_at = $3 WHERE id = $1";
    let values = vec![id.into(), active.into(), at.unix_millis().into()];
    if sql::execute(tx, sql, values).await? == 0 {
        return Err(Fail::Store(StoreError::NotFound));
    }
    Ok(())
}

/// Count `new` on its code and write it: `false` (nothing written) when the code's
/// redemptions reached its limit; [`StoreError::Conflict`] when the user's ordinal or request
/// key for the code is taken.
pub(crate) async fn redeem(tx: &DatabaseTransaction, new: &NewRedemption) -> Result<bool, Fail> {
    let count = "UPDATE promo_codes SET redeemed = redeemed + 1, updated_at = $2 WHERE id = $1 \
                 AND (max_redemptions IS NULL OR redeemed < max_redemptions)";
    let values = vec![new.code_id.as_str().into(), new.at.unix_millis().into()];
    if sql::execute(tx, count, values).await? == 0 {
        return Ok(false);
    }
    let insert = format!(
        "INSERT INTO promo_redemptions ({REDEMPTION_COLUMNS}, request_key) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"
    );
    let values = vec![
        new.id.as_str().into(),
        new.code_id.as_str().into(),
        new.user_id.as_str().into(),
        i64::from(new.ordinal).into(),
        new.credits.hundredths().into(),
        new.at.unix_millis().into(),
        new.request_key.as_str().into(),
    ];
    if sql::execute(tx, &insert, values).await? == 0 {
        return Err(Fail::Store(StoreError::Conflict(
            "the user's redemption of the code was written first by another request".into(),
        )));
    }
    Ok(true)
}

async fn codes<C: ConnectionTrait>(
    conn: &C,
    filter: &str,
    values: Vec<Value>,
) -> Result<Vec<StoredPromoCode>, Fail> {
    let sql = format!("SELECT {CODE_COLUMNS} FROM promo_codes {filter}");
    let rows: Vec<CodeRow> = sql::all(conn, &sql, values).await?;
    rows.into_iter()
        .map(|r| r.into_stored().map_err(Fail::Store))
        .collect()
}

async fn redemptions<C: ConnectionTrait>(
    conn: &C,
    filter: &str,
    values: Vec<Value>,
) -> Result<Vec<RedemptionRecord>, Fail> {
    let sql = format!("SELECT {REDEMPTION_COLUMNS} FROM promo_redemptions {filter}");
    let rows: Vec<RedemptionRow> = sql::all(conn, &sql, values).await?;
    rows.into_iter()
        .map(|r| r.into_record().map_err(Fail::Store))
        .collect()
}

#[async_trait]
impl PromoStore for SeaOrmStore {
    async fn promo_code(&self, code: &PromoCode) -> Result<Option<StoredPromoCode>, StoreError> {
        self.retry
            .run("promo_code", || async {
                let found = codes(&self.db, "WHERE code = $1", vec![code.as_str().into()]).await?;
                Ok(found.into_iter().next())
            })
            .await
    }

    async fn promo_code_by_id(&self, id: &str) -> Result<Option<StoredPromoCode>, StoreError> {
        self.retry
            .run("promo_code_by_id", || async {
                let found = codes(&self.db, "WHERE id = $1", vec![id.into()]).await?;
                Ok(found.into_iter().next())
            })
            .await
    }

    async fn promo_codes(&self, limit: u32) -> Result<Vec<StoredPromoCode>, StoreError> {
        self.retry
            .run("promo_codes", || async {
                let filter = "ORDER BY created_at DESC, id DESC LIMIT $1";
                codes(&self.db, filter, vec![i64::from(limit).into()]).await
            })
            .await
    }

    async fn redemption_by_key(
        &self,
        code_id: &str,
        user: &UserId,
        request_key: &str,
    ) -> Result<Option<RedemptionRecord>, StoreError> {
        self.retry
            .run("redemption_by_key", || async {
                let filter = "WHERE code_id = $1 AND user_id = $2 AND request_key = $3";
                let values = vec![code_id.into(), user.as_str().into(), request_key.into()];
                Ok(redemptions(&self.db, filter, values)
                    .await?
                    .into_iter()
                    .next())
            })
            .await
    }

    async fn redeemer_facts(
        &self,
        code_id: &str,
        user: &UserId,
    ) -> Result<RedeemerFacts, StoreError> {
        let sql = "SELECT (SELECT COUNT(*) FROM promo_redemptions \
                   WHERE code_id = $1 AND user_id = $2) AS n, \
                   (SELECT COUNT(*) FROM orders WHERE user_id = $2 \
                   AND status IN ('paid', 'partially_refunded', 'refunded')) AS paid";
        self.retry
            .run("redeemer_facts", || async {
                let values = vec![code_id.into(), user.as_str().into()];
                let row = sql::rows(&self.db, sql, values).await?;
                let row = row.first().ok_or(Fail::Retry("no row"))?;
                let n: i64 = row.try_get("", "n")?;
                let paid: i64 = row.try_get("", "paid")?;
                Ok(RedeemerFacts {
                    by_user: u32::try_from(n).unwrap_or(u32::MAX),
                    has_paid: paid > 0,
                })
            })
            .await
    }

    async fn redemptions(
        &self,
        code_id: &str,
        limit: u32,
    ) -> Result<Vec<RedemptionRecord>, StoreError> {
        self.retry
            .run("promo_redemptions", || async {
                let filter = "WHERE code_id = $1 ORDER BY redeemed_at DESC, id DESC LIMIT $2";
                let values = vec![code_id.into(), i64::from(limit).into()];
                redemptions(&self.db, filter, values).await
            })
            .await
    }
}
