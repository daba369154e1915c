//! The dynamic plans table (`pricing_plan`): plans edited by admins, listed on `/pricing`.

use application::ports::{
    ImportReport, Listing, PlanAllowance, PlanRepository, StoreError, StoredPlan,
};
use async_trait::async_trait;
use domain::{Plan, PlanId, Timestamp, UserId};
use sea_orm::{DatabaseTransaction, FromQueryResult, Value};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::{PLAN_COLUMNS, PlanRow, corrupt, plan_values};
use crate::sql::{self, End};

pub(crate) const INSERT: &str = "INSERT INTO pricing_plan (id, provider, plan_type, currency, amount_minor, \
    original_amount_minor, hidden, locales, sort_order, data, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)";

/// An import replaces the plan but keeps the stored listing (sort order and locales).
const UPSERT: &str = "INSERT INTO pricing_plan (id, provider, plan_type, currency, amount_minor, \
    original_amount_minor, hidden, locales, sort_order, data, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) \
    ON CONFLICT (id) DO UPDATE SET provider = excluded.provider, plan_type = excluded.plan_type, \
    currency = excluded.currency, amount_minor = excluded.amount_minor, \
    original_amount_minor = excluded.original_amount_minor, hidden = excluded.hidden, \
    data = excluded.data, updated_at = excluded.updated_at";

pub(crate) const UPDATE: &str = "UPDATE pricing_plan SET provider = $2, plan_type = $3, currency = $4, \
    amount_minor = $5, original_amount_minor = $6, hidden = $7, locales = $8, sort_order = $9, \
    data = $10, updated_at = $11 WHERE id = $1";

/// Allow a user a plan; allowing it again keeps the first allowance.
pub(crate) const ALLOW: &str = "INSERT INTO plan_allowances (user_id, plan_id, allowed_by, \
    allowed_at) VALUES ($1, $2, $3, $4) ON CONFLICT (user_id, plan_id) DO NOTHING";

/// Withdraw a user's allowance of a plan.
pub(crate) const DISALLOW: &str = "DELETE FROM plan_allowances WHERE user_id = $1 AND plan_id = $2";

/// The values of [`ALLOW`].
pub(crate) fn allowance_values(a: &PlanAllowance) -> Vec<Value> {
    vec![
        a.user_id.as_str().into(),
        a.plan_id.as_str().into(),
        a.allowed_by.as_str().into(),
        a.allowed_at.unix_millis().into(),
    ]
}

/// A `plan_allowances` row.
#[derive(Debug, FromQueryResult)]
struct AllowanceRow {
    user_id: String,
    plan_id: String,
    allowed_by: String,
    allowed_at: i64,
}

impl AllowanceRow {
    fn into_domain(self) -> Result<PlanAllowance, StoreError> {
        let key = format!("{}:{}", self.user_id, self.plan_id);
        let bad = |why: String| corrupt("plan_allowances", &key, why);
        Ok(PlanAllowance {
            user_id: UserId::new(&self.user_id).map_err(|e| bad(e.to_string()))?,
            plan_id: PlanId::new(&self.plan_id).map_err(|e| bad(e.to_string()))?,
            allowed_by: UserId::new(&self.allowed_by).map_err(|e| bad(e.to_string()))?,
            allowed_at: Timestamp::from_unix_millis(self.allowed_at),
        })
    }
}

pub(crate) fn with_time(mut values: Vec<Value>, now: Timestamp) -> Vec<Value> {
    values.push(now.unix_millis().into());
    values
}

#[async_trait]
impl PlanRepository for SeaOrmStore {
    async fn list_plans(&self) -> Result<Vec<StoredPlan>, StoreError> {
        let sql = format!("SELECT {PLAN_COLUMNS} FROM pricing_plan ORDER BY sort_order, id");
        let rows: Vec<PlanRow> = self.fetch_all("list_plans", &sql, Vec::new()).await?;
        rows.into_iter().map(PlanRow::into_domain).collect()
    }

    async fn find_plan(&self, id: &PlanId) -> Result<Option<StoredPlan>, StoreError> {
        let sql = format!("SELECT {PLAN_COLUMNS} FROM pricing_plan WHERE id = $1");
        let row: Option<PlanRow> = self
            .fetch_one("find_plan", &sql, vec![id.as_str().into()])
            .await?;
        row.map(PlanRow::into_domain).transpose()
    }

    async fn plan_allowed(&self, user: &UserId, plan: &PlanId) -> Result<bool, StoreError> {
        let sql = "SELECT user_id, plan_id, allowed_by, allowed_at FROM plan_allowances \
            WHERE user_id = $1 AND plan_id = $2";
        let values = vec![user.as_str().into(), plan.as_str().into()];
        let row: Option<AllowanceRow> = self.fetch_one("plan_allowed", sql, values).await?;
        Ok(row.is_some())
    }

    async fn plan_allowances(&self, user: &UserId) -> Result<Vec<PlanAllowance>, StoreError> {
        let sql = "SELECT user_id, plan_id, allowed_by, allowed_at FROM plan_allowances \
            WHERE user_id = $1 ORDER BY plan_id";
        let rows: Vec<AllowanceRow> = self
            .fetch_all("plan_allowances", sql, vec![user.as_str().into()])
            .await?;
        rows.into_iter().map(AllowanceRow::into_domain).collect()
    }

    async fn create_plan(&self, plan: &StoredPlan, now: Timestamp) -> Result<(), StoreError> {
        let values = with_time(plan_values(plan)?, now);
        self.run_execute("create_plan", INSERT, values)
            .await
            .map(drop)
    }

    async fn update_plan(&self, plan: &StoredPlan, now: Timestamp) -> Result<(), StoreError> {
        let values = with_time(plan_values(plan)?, now);
        match self.run_execute("update_plan", UPDATE, values).await? {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }

    async fn delete_plan(&self, id: &PlanId) -> Result<(), StoreError> {
        let sql = "DELETE FROM pricing_plan WHERE id = $1";
        match self
            .run_execute("delete_plan", sql, vec![id.as_str().into()])
            .await?
        {
            0 => Err(StoreError::NotFound),
            _ => Ok(()),
        }
    }

    async fn reorder_plans(&self, ids: &[PlanId], now: Timestamp) -> Result<(), StoreError> {
        self.retry
            .run("reorder_plans", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = reorder(&tx, ids, now).await;
                sql::finish(tx, body).await
            })
            .await
    }
}

#[derive(Debug, sea_orm::FromQueryResult)]
struct IdRow {
    id: String,
}

pub(crate) async fn reorder(
    tx: &DatabaseTransaction,
    ids: &[PlanId],
    now: Timestamp,
) -> Result<End<()>, Fail> {
    let sql = format!(
        "SELECT id FROM pricing_plan ORDER BY sort_order, id{}",
        sql::for_update(tx)
    );
    let stored: Vec<String> = sql::all::<IdRow, _>(tx, &sql, Vec::new())
        .await?
        .into_iter()
        .map(|r| r.id)
        .collect();
    let mut order: Vec<&str> = Vec::with_capacity(stored.len());
    for id in ids {
        if !stored.iter().any(|s| s == id.as_str()) {
            return Err(Fail::Store(StoreError::NotFound));
        }
        if !order.contains(&id.as_str()) {
            order.push(id.as_str());
        }
    }
    let listed = order.clone();
    order.extend(
        stored
            .iter()
            .map(String::as_str)
            .filter(|s| !listed.contains(s)),
    );
    for (position, id) in order.iter().enumerate() {
        let position =
            i32::try_from(position).map_err(|_| StoreError::Conflict("too many plans".into()))?;
        let sql = "UPDATE pricing_plan SET sort_order = $2, updated_at = $3 WHERE id = $1 AND sort_order <> $2";
        sql::execute(
            tx,
            sql,
            vec![(*id).into(), position.into(), now.unix_millis().into()],
        )
        .await?;
    }
    Ok(End::Commit(()))
}

pub(crate) async fn import(
    tx: &DatabaseTransaction,
    plans: &[Plan],
    now: Timestamp,
) -> Result<End<ImportReport>, Fail> {
    let next = "SELECT CAST(COALESCE(MAX(sort_order), -1) + 1 AS BIGINT) AS next FROM pricing_plan";
    let mut next_order = sql::one_i64(tx, next, Vec::new(), "next")
        .await?
        .unwrap_or(0);
    let mut report = ImportReport::default();
    for plan in plans {
        let exists = "SELECT COUNT(*) AS n FROM pricing_plan WHERE id = $1";
        let found = sql::one_i64(tx, exists, vec![plan.id().as_str().into()], "n")
            .await?
            .unwrap_or(0)
            > 0;
        let sort_order =
            i32::try_from(next_order).map_err(|_| StoreError::Conflict("too many plans".into()))?;
        let stored = StoredPlan {
            plan: plan.clone(),
            listing: Listing {
                sort_order,
                locales: Vec::new(),
            },
        };
        sql::execute(tx, UPSERT, with_time(plan_values(&stored)?, now)).await?;
        if found {
            report.updated += 1;
        } else {
            report.created += 1;
            next_order += 1;
        }
    }
    Ok(End::Commit(report))
}
