//! The dynamic plans table (`pricing_plan`): plans edited by admins, listed on `/pricing`.

use application::ports::{ImportReport, Listing, PlanRepository, StoreError, StoredPlan};
use async_trait::async_trait;
use domain::{Plan, PlanId, Timestamp};
use sea_orm::{DatabaseTransaction, Value};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::{PLAN_COLUMNS, PlanRow, plan_values};
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

    async fn import_plans(
        &self,
        plans: &[Plan],
        now: Timestamp,
    ) -> Result<ImportReport, StoreError> {
        self.retry
            .run("import_plans", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = import(&tx, plans, now).await;
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

async fn import(
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
