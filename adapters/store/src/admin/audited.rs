//! An administrator's write and its audit entry in one transaction (issue 18):
//! [`AdminConsoleStore::write_audited`](application::ports::AdminConsoleStore::write_audited).

use application::ports::{AdminWrite, NewAudit, StoreError};
use sea_orm::DatabaseTransaction;

use super::insert_audit;
use crate::SeaOrmStore;
use crate::plans::{ALLOW, DISALLOW, INSERT, UPDATE, allowance_values, reorder, with_time};
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

/// `write`, then `entry`, inside `tx`.
async fn write_and_audit(
    tx: &DatabaseTransaction,
    write: AdminWrite<'_>,
    entry: &NewAudit,
) -> Result<End<()>, Fail> {
    let at = entry.at;
    match write {
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
                return Ok(End::Rollback(()));
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
    }
    insert_audit(tx, entry).await?;
    Ok(End::Commit(()))
}

impl SeaOrmStore {
    /// [`write_and_audit`] in a write transaction, under the retry policy.
    pub(super) async fn audited_write(
        &self,
        write: AdminWrite<'_>,
        entry: &NewAudit,
    ) -> Result<(), StoreError> {
        let written = self
            .retry
            .run("write_audited", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = write_and_audit(&tx, write, entry).await;
                sql::finish(tx, body).await
            })
            .await;
        if matches!(write, AdminWrite::RevokeApiKey(_)) {
            // Forget cached keys whatever the outcome: a failed commit may still have happened.
            self.keys.clear();
        }
        written
    }
}
