//! An administrator's change to the plans, API keys and plan allowances: the part of a change
//! set (`crate::apply`) that runs it, with the set's audit entry in the same transaction.

use application::ports::{AdminWrite, ImportReport, StoreError};
use domain::Timestamp;
use sea_orm::DatabaseTransaction;

use crate::limits;
use crate::plans::{ALLOW, DISALLOW, INSERT, UPDATE, allowance_values, import, reorder, with_time};
use crate::retry::Fail;
use crate::rows::plan_values;
use crate::sql::{self, End};
use crate::users::{INSERT_API_KEY, REVOKE_API_KEY, api_key_values};

/// One changed row, or [`StoreError::NotFound`] (which rolls the transaction back).
fn changed_one(rows: u64) -> Result<(), Fail> {
    match rows {
        0 => Err(Fail::Store(StoreError::NotFound)),
        _ => Ok(()),
    }
}

/// An administrator's configuration `write` inside `tx`, stamped `at`; an import's report.
pub(crate) async fn write(
    tx: &DatabaseTransaction,
    write: AdminWrite<'_>,
    at: Timestamp,
) -> Result<End<Option<ImportReport>>, Fail> {
    match write {
        AdminWrite::ImportPlans(plans) => {
            return import(tx, plans, at).await.map(|end| end.map(Some));
        }
        AdminWrite::CreatePlan(plan) => {
            let values = with_time(plan_values(plan).map_err(Fail::Store)?, at);
            sql::execute(tx, INSERT, values).await?;
        }
        AdminWrite::UpdatePlan(plan) => {
            let values = with_time(plan_values(plan).map_err(Fail::Store)?, at);
            changed_one(sql::execute(tx, UPDATE, values).await?)?;
        }
        AdminWrite::DeletePlan(id) => {
            let sql = "DELETE FROM pricing_plan WHERE id = $1";
            changed_one(sql::execute(tx, sql, vec![id.as_str().into()]).await?)?;
        }
        AdminWrite::ReorderPlans(ids) => {
            if let End::Rollback(()) = reorder(tx, ids, at).await? {
                return Ok(End::Rollback(None));
            }
        }
        AdminWrite::CreateApiKey(key, hash) => {
            sql::execute(tx, INSERT_API_KEY, api_key_values(key, hash)).await?;
        }
        AdminWrite::RevokeApiKey(id) => {
            let values = vec![id.into(), at.unix_millis().into()];
            changed_one(sql::execute(tx, REVOKE_API_KEY, values).await?)?;
        }
        AdminWrite::AllowPlan(allowance) => {
            sql::execute(tx, ALLOW, allowance_values(allowance)).await?;
        }
        AdminWrite::RemovePlanAllowance(user, plan) => {
            let values = vec![user.as_str().into(), plan.as_str().into()];
            sql::execute(tx, DISALLOW, values).await?;
        }
        AdminWrite::AddSpendLimit(new) => {
            if let End::Commit(Err(refused)) | End::Rollback(Err(refused)) =
                limits::add_in(tx, new).await?
            {
                return Err(Fail::Store(refused.into()));
            }
        }
        AdminWrite::RemoveSpendLimit(account, id) => {
            if let End::Rollback(false) | End::Commit(false) =
                limits::remove_in(tx, account, id).await?
            {
                return Err(Fail::Store(StoreError::NotFound));
            }
        }
        AdminWrite::CreatePromoCode(code) => crate::promo::create(tx, code, at).await?,
        AdminWrite::SetPromoCodeActive(id, active) => {
            crate::promo::set_active(tx, id, active, at).await?;
        }
    }
    Ok(End::Commit(None))
}
