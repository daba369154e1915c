//! An administrator's change to the webhook endpoints and its audit entry in one transaction
//! (issue 18): [`WebhookStore::write_endpoint`](application::ports::WebhookStore).
//!
//! Each write is the statement of the store method it names, run in the caller's write
//! transaction; what it did is read in that transaction (the endpoint before and after, the
//! delivery scheduled again), handed to the caller's builder, and the entry it builds is
//! inserted before the commit. A refused write (no such endpoint, delivery or event; the cap
//! reached) rolls back and writes no entry.

use application::ports::{
    DeliveryRecord, EndpointAudit, EndpointWrite, EndpointWritten, StoreError, WebhookEndpoint,
    WebhookSecret,
};
use domain::Timestamp;
use sea_orm::{ConnectionTrait, DatabaseTransaction};

use super::{
    DELIVERY_COLUMNS, DeliveryRow, ENDPOINT_COLUMNS, EndpointRow, find_endpoint_in,
    insert_endpoint_capped, redeliver_in, update_in,
};
use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::sql::{self, End};

/// An endpoint row as the port's type (a row that does not read back is corrupt).
fn endpoint(row: EndpointRow) -> Result<WebhookEndpoint, Fail> {
    row.into_domain().map_err(Fail::Store)
}

/// Give endpoint `id` the secret `secret`, keeping the current one until `previous_until`;
/// the endpoint after it, or `None` when there is none.
pub(super) async fn rotate_in<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    secret: &WebhookSecret,
    previous_until: Timestamp,
    now: Timestamp,
) -> Result<Option<EndpointRow>, Fail> {
    let query = format!(
        "UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_until = $3, \
         secret = $2, updated_at = $4 WHERE id = $1 RETURNING {ENDPOINT_COLUMNS}"
    );
    let values = vec![
        id.into(),
        secret.expose().into(),
        previous_until.unix_millis().into(),
        now.unix_millis().into(),
    ];
    Ok(sql::one(conn, &query, values).await?)
}

/// Delivery `id` with its event, read through `conn`.
pub(super) async fn delivery_in<C: ConnectionTrait>(
    conn: &C,
    id: &str,
) -> Result<Option<DeliveryRecord>, Fail> {
    let query = format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d \
         JOIN events ev ON ev.id = d.event_row WHERE d.id = $1"
    );
    let row: Option<DeliveryRow> = sql::one(conn, &query, vec![id.into()]).await?;
    row.map(DeliveryRow::into_domain)
        .transpose()
        .map_err(Fail::Store)
}

/// Make `write` inside `tx`: what it did, or `None` when it was refused.
async fn write_in(
    tx: &DatabaseTransaction,
    write: EndpointWrite<'_>,
) -> Result<Option<EndpointWritten>, Fail> {
    let locked = sql::for_update(tx);
    Ok(match write {
        EndpointWrite::Create(new) => match insert_endpoint_capped(tx, new).await? {
            End::Commit(Some(row)) => Some(EndpointWritten::Created(endpoint(row)?)),
            End::Commit(None) | End::Rollback(_) => None,
        },
        EndpointWrite::Update { id, change, now } => {
            let Some(before) = find_endpoint_in(tx, id, locked).await? else {
                return Ok(None);
            };
            match update_in(tx, id, change, now).await? {
                End::Commit(Some(after)) => Some(EndpointWritten::Updated {
                    before: endpoint(before)?,
                    after: endpoint(after)?,
                }),
                End::Commit(None) | End::Rollback(_) => None,
            }
        }
        EndpointWrite::Delete(id) => {
            let Some(before) = find_endpoint_in(tx, id, locked).await? else {
                return Ok(None);
            };
            let delete = "DELETE FROM webhook_endpoints WHERE id = $1";
            sql::execute(tx, delete, vec![id.into()]).await?;
            Some(EndpointWritten::Deleted(endpoint(before)?))
        }
        EndpointWrite::Rotate {
            id,
            secret,
            previous_until,
            now,
        } => match rotate_in(tx, id, secret, previous_until, now).await? {
            Some(row) => Some(EndpointWritten::Rotated(endpoint(row)?)),
            None => None,
        },
        EndpointWrite::Redeliver {
            endpoint_id,
            target,
            now,
        } => match redeliver_in(tx, endpoint_id, target, now).await? {
            End::Commit(Some(id)) => delivery_in(tx, &id)
                .await?
                .map(EndpointWritten::Redelivered),
            End::Commit(None) | End::Rollback(_) => None,
        },
    })
}

impl SeaOrmStore {
    /// [`write_in`], then the entry `audit` builds from what it did, in one write transaction
    /// under the retry policy.
    pub(super) async fn endpoint_write(
        &self,
        write: EndpointWrite<'_>,
        audit: &EndpointAudit<'_>,
    ) -> Result<Option<EndpointWritten>, StoreError> {
        let written = self
            .retry
            .run("write_endpoint", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = async {
                    let Some(written) = write_in(&tx, write).await? else {
                        return Ok(End::Rollback(None));
                    };
                    crate::admin::insert_audit(&tx, &audit(&written)).await?;
                    Ok(End::Commit(Some(written)))
                }
                .await;
                sql::finish(tx, body).await
            })
            .await;
        if matches!(
            write,
            EndpointWrite::Create(_) | EndpointWrite::Update { .. } | EndpointWrite::Delete(_)
        ) {
            // Which endpoints want which events changed (or may have: a failed commit may
            // still have happened), as after the unaudited writes.
            self.opt_in.forget();
        }
        written
    }
}
