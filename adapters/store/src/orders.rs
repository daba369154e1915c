//! Orders: idempotent creation, checkout, compare-and-set transitions, listing, and the
//! reconciler's claims on pending orders.

use application::pagination::{Page, PageRequest};
use application::ports::{
    CheckoutRecord, CheckoutTarget, CreateOrderOutcome, IdempotencyRecord, OrderRecord,
    OrderRepository, StoreError,
};
use async_trait::async_trait;
use domain::{
    AccountId, Order, OrderId, OrderStatus, OrderStatusKind, ProviderId, Timestamp, UserId,
};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr, FromQueryResult};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::{
    ORDER_COLUMNS, OWNED_BY_ACCOUNT, OrderRow, corrupt, entitlements_value, order_status_values,
};
use crate::sql::{self, End};

/// The idempotency scope of order creation.
const CREATE_ORDER_SCOPE: &str = "create_order";

const INSERT: &str = "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, \
    currency, credits_hundredths, months, status, failure_reason, paid_at, refunded_minor, \
    expires_at, created_at, updated_at, plan_entitlements, success_url, cancel_url, account_id, \
    bonus_credits_hundredths, bonus_expires_in_days, save_method) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, COALESCE($13, $6), $14, $15, $15, \
    $16, $17, $18, $19, $20, $21, $22)";

#[derive(Debug, FromQueryResult)]
struct IdempotencyRow {
    request_hash: String,
    order_id: Option<String>,
}

/// Move order `id` to `status` (and record `mismatch` when given), only if it still has
/// `expected_version` (compare-and-set); the version moves on. Returns the number of rows
/// changed (0 or 1).
pub(crate) async fn transition<C: ConnectionTrait>(
    conn: &C,
    id: &OrderId,
    expected_version: i64,
    status: &OrderStatus,
    mismatch: Option<&str>,
    now: Timestamp,
) -> Result<u64, DbErr> {
    let sql = "UPDATE orders SET status = $3, paid_at = $4, failure_reason = $5, \
        refunded_minor = COALESCE($6, amount_minor), mismatch = COALESCE($7, mismatch), \
        updated_at = $8, version = version + 1 WHERE id = $1 AND version = $2";
    let (code, paid_at, reason, refunded) = order_status_values(status);
    let values = vec![
        id.as_str().into(),
        expected_version.into(),
        code.into(),
        paid_at.into(),
        reason.into(),
        refunded.into(),
        mismatch.map(str::to_owned).into(),
        now.unix_millis().into(),
    ];
    sql::execute(conn, sql, values).await
}

/// Whether order `id` exists.
pub(crate) async fn order_exists<C: ConnectionTrait>(
    conn: &C,
    id: &OrderId,
) -> Result<bool, DbErr> {
    let sql = "SELECT COUNT(*) AS n FROM orders WHERE id = $1";
    Ok(sql::one_i64(conn, sql, vec![id.as_str().into()], "n")
        .await?
        .unwrap_or(0)
        > 0)
}

pub(crate) async fn find<C: ConnectionTrait>(
    conn: &C,
    id: &str,
) -> Result<Option<OrderRecord>, Fail> {
    let sql = format!("SELECT {ORDER_COLUMNS} FROM orders WHERE id = $1");
    let row: Option<OrderRow> = sql::one(conn, &sql, vec![id.into()]).await?;
    Ok(row.map(OrderRow::into_domain).transpose()?)
}

pub(crate) async fn insert(tx: &DatabaseTransaction, order: &Order) -> Result<(), DbErr> {
    let plan = order.plan();
    let (code, paid_at, reason, refunded) = order_status_values(order.status());
    let values = vec![
        order.id().as_str().into(),
        order.user_id().as_str().into(),
        order.provider().as_str().into(),
        plan.plan_id.as_str().into(),
        plan.plan_type.as_str().into(),
        plan.price.amount_minor().into(),
        plan.price.currency().code().into(),
        plan.credits.map(domain::Credits::hundredths).into(),
        plan.duration.map(domain::Duration::months_value).into(),
        code.into(),
        reason.into(),
        paid_at.into(),
        refunded.into(),
        order.expires_at().unix_millis().into(),
        order.created_at().unix_millis().into(),
        entitlements_value(plan.entitlements.as_ref()).into(),
        url_value(order.returns().success.as_ref()).into(),
        url_value(order.returns().cancel.as_ref()).into(),
        order.account_id().as_str().into(),
        plan.bonus.map(|b| b.credits.hundredths()).into(),
        plan.bonus
            .and_then(|b| b.expires_in_days)
            .map(i64::from)
            .into(),
        order.save_method().into(),
    ];
    sql::execute(tx, INSERT, values).await.map(drop)
}

fn url_value(url: Option<&domain::ReturnUrl>) -> Option<String> {
    url.map(|u| u.as_str().to_owned())
}

/// The answer to an earlier use of `record`'s key by `user`: the order it created, or a
/// conflict when the key came with another request.
async fn earlier_in<C: ConnectionTrait>(
    conn: &C,
    user: &str,
    record: &IdempotencyRecord,
) -> Result<Option<CreateOrderOutcome>, Fail> {
    let sql = "SELECT request_hash, order_id FROM idempotency_records \
               WHERE user_id = $1 AND scope = $2 AND idempotency_key = $3";
    let values = vec![
        user.into(),
        CREATE_ORDER_SCOPE.into(),
        record.key.as_str().into(),
    ];
    let Some(seen) = sql::one::<IdempotencyRow, _>(conn, sql, values).await? else {
        return Ok(None);
    };
    if seen.request_hash != record.request_hash {
        return Ok(Some(CreateOrderOutcome::KeyConflict));
    }
    let bad = || corrupt("idempotency_records", record.key.as_str(), "names no order");
    let id = seen.order_id.ok_or_else(bad)?;
    let earlier = find(conn, &id).await?.ok_or_else(bad)?;
    Ok(Some(CreateOrderOutcome::Replayed(earlier)))
}

async fn create_in(
    tx: &DatabaseTransaction,
    order: &Order,
    idempotency: Option<&IdempotencyRecord>,
) -> Result<End<CreateOrderOutcome>, Fail> {
    let user = order.user_id().as_str();
    if let Some(record) = idempotency
        && let Some(earlier) = earlier_in(tx, user, record).await?
    {
        return Ok(End::Rollback(earlier));
    }
    insert(tx, order).await?;
    if let Some(record) = idempotency {
        let sql = "INSERT INTO idempotency_records (user_id, scope, idempotency_key, request_hash, \
                   order_id, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";
        let values = vec![
            user.into(),
            CREATE_ORDER_SCOPE.into(),
            record.key.as_str().into(),
            record.request_hash.as_str().into(),
            order.id().as_str().into(),
            order.created_at().unix_millis().into(),
        ];
        if sql::execute(tx, sql, values).await? == 0 {
            return Err(Fail::Retry(
                "a concurrent request used the same idempotency key",
            ));
        }
    }
    Ok(End::Commit(CreateOrderOutcome::Created))
}

#[async_trait]
impl OrderRepository for SeaOrmStore {
    async fn create_order(
        &self,
        order: &Order,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<CreateOrderOutcome, StoreError> {
        self.retry
            .run("create_order", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = create_in(&tx, order, idempotency).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn attach_checkout(
        &self,
        id: &OrderId,
        checkout: &CheckoutRecord,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let (kind, url) = match &checkout.target {
            CheckoutTarget::Redirect(url) => ("redirect", url),
            CheckoutTarget::QrCode(url) => ("qr_code", url),
        };
        let sql = "UPDATE orders SET provider_reference = $2, checkout_kind = $3, checkout_url = $4, \
                   updated_at = $5 WHERE id = $1 AND status = $6";
        let values = vec![
            id.as_str().into(),
            checkout.provider_reference.clone().into(),
            kind.into(),
            url.as_str().into(),
            now.unix_millis().into(),
            OrderStatusKind::Pending.code().into(),
        ];
        if self.run_execute("attach_checkout", sql, values).await? > 0 {
            return Ok(());
        }
        self.missing_or_conflict(id, "the order is no longer pending")
            .await
    }

    async fn earlier_order(
        &self,
        user: &UserId,
        idempotency: &IdempotencyRecord,
    ) -> Result<Option<CreateOrderOutcome>, StoreError> {
        self.retry
            .run("earlier_order", || {
                earlier_in(&self.db, user.as_str(), idempotency)
            })
            .await
    }

    async fn find_order(&self, id: &OrderId) -> Result<Option<OrderRecord>, StoreError> {
        self.retry
            .run("find_order", || find(&self.db, id.as_str()))
            .await
    }

    async fn find_order_by_reference(
        &self,
        provider: ProviderId,
        reference: &str,
    ) -> Result<Option<OrderRecord>, StoreError> {
        let sql = format!(
            "SELECT {ORDER_COLUMNS} FROM orders WHERE provider = $1 AND provider_reference = $2"
        );
        let values = vec![provider.as_str().into(), reference.into()];
        let row: Option<OrderRow> = self
            .fetch_one("find_order_by_reference", &sql, values)
            .await?;
        row.map(OrderRow::into_domain).transpose()
    }

    async fn list_orders(
        &self,
        account: &AccountId,
        page: PageRequest,
    ) -> Result<Page<OrderRecord>, StoreError> {
        let count = format!("SELECT COUNT(*) AS total FROM orders WHERE {OWNED_BY_ACCOUNT}");
        let items = format!(
            "SELECT {ORDER_COLUMNS} FROM orders WHERE {OWNED_BY_ACCOUNT} \
             ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
        );
        let (total, rows) = self
            .retry
            .run("list_orders", || {
                sql::page::<OrderRow>(
                    &self.db,
                    &count,
                    vec![account.as_str().into()],
                    &items,
                    page_values(account, page),
                )
            })
            .await?;
        let items = rows
            .into_iter()
            .map(OrderRow::into_domain)
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items,
            request: page,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn claim_pending_orders(
        &self,
        created_before: Timestamp,
        limit: u32,
        now: Timestamp,
        lease_ms: i64,
    ) -> Result<Vec<OrderRecord>, StoreError> {
        // One statement: on PostgreSQL the inner SELECT skips rows another instance is claiming.
        let lock = match self.backend() {
            sea_orm::DbBackend::Postgres => " FOR UPDATE SKIP LOCKED",
            _ => "",
        };
        let sql = format!(
            "UPDATE orders SET claimed_until = $3 WHERE id IN (SELECT id FROM orders \
             WHERE status = $5 AND created_at < $1 AND (claimed_until IS NULL OR claimed_until < $2) \
             ORDER BY created_at, id LIMIT $4{lock}) RETURNING {ORDER_COLUMNS}"
        );
        let values = vec![
            created_before.unix_millis().into(),
            now.unix_millis().into(),
            now.plus_millis(lease_ms).unix_millis().into(),
            i64::from(limit).into(),
            OrderStatusKind::Pending.code().into(),
        ];
        let rows: Vec<OrderRow> = self.fetch_all("claim_pending_orders", &sql, values).await?;
        let mut claimed = rows
            .into_iter()
            .map(OrderRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        claimed.sort_by(|a, b| {
            (a.order.created_at(), a.order.id()).cmp(&(b.order.created_at(), b.order.id()))
        });
        Ok(claimed)
    }
}

/// `[user, limit, offset]` for a page query.
pub(crate) fn page_values(owner: &impl AsRef<str>, page: PageRequest) -> Vec<sea_orm::Value> {
    let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
    vec![
        owner.as_ref().into(),
        i64::from(page.limit()).into(),
        offset.into(),
    ]
}

impl SeaOrmStore {
    /// After a conditional update changed nothing: `NotFound` or `Conflict(why)`.
    async fn missing_or_conflict(&self, id: &OrderId, why: &str) -> Result<(), StoreError> {
        let exists = self
            .retry
            .run("order_exists", || async {
                Ok(order_exists(&self.db, id).await?)
            })
            .await?;
        Err(if exists {
            StoreError::Conflict(why.to_owned())
        } else {
            StoreError::NotFound
        })
    }
}
