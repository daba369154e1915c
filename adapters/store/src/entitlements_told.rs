//! What the host application was last told of each account's effective entitlements (the
//! `entitlements_told` row: the map, when the passing of time changes it next, and a version),
//! and the purchases the service works them out from. The rules are the service's
//! (`application`'s `entitlements_after`): it reads [`basis`], works the map out with the change
//! it is about to write, and hands the store the row to keep with that change, which [`write`]
//! keeps only if the row still has the version read. A concurrent change of the same account's
//! purchases that commits first moves the version: the later write is refused and worked out
//! again. The reconciler finds the accounts whose `next_change_at` has passed ([`due`]).

use application::ports::{EntitlementBasis, EntitlementsWrite, StoreError, ToldEntitlements};
use domain::{AccountId, Order, OrderId, OrderStatusKind, Subscription, Timestamp};
use sea_orm::{ConnectionTrait, DatabaseTransaction, FromQueryResult};

use crate::retry::Fail;
use crate::rows::{
    ORDER_COLUMNS, OWNED_BY_ACCOUNT, OrderRow, SUBSCRIPTION_COLUMNS, SubscriptionRow, corrupt,
    entitlements_from_column, entitlements_object,
};
use crate::sql;

/// An account's `entitlements_told` row.
#[derive(Debug, FromQueryResult)]
struct ToldRow {
    entitlements: String,
    next_change_at: Option<i64>,
    version: i64,
}

/// An account's purchases that may grant access.
type Purchases = (Vec<(Subscription, Option<OrderId>)>, Vec<Order>);

/// What `account`'s entitlements are worked out from: the row first, then the purchases (a
/// change of the purchases committing in between has moved the row's version).
pub(crate) async fn basis<C: ConnectionTrait>(
    conn: &C,
    account: &AccountId,
) -> Result<EntitlementBasis, Fail> {
    let sql = "SELECT entitlements, next_change_at, version FROM entitlements_told \
               WHERE account_id = $1";
    let row: Option<ToldRow> = sql::one(conn, sql, vec![account.as_str().into()]).await?;
    let told = match row {
        Some(row) => {
            let entitlements = entitlements_from_column(Some(&row.entitlements))
                .map_err(|why| Fail::Store(corrupt("entitlements_told", account.as_str(), why)))?
                .unwrap_or_default();
            Some(ToldEntitlements {
                entitlements,
                next_change_at: row.next_change_at.map(Timestamp::from_unix_millis),
                version: row.version,
            })
        }
        None => None,
    };
    let (subscriptions, orders) = purchases(conn, account).await?;
    Ok(EntitlementBasis {
        told,
        subscriptions,
        orders,
    })
}

/// The purchases of `account` that may grant access: every subscription of the account with the
/// order that started it, and the orders that may grant access (every paid one-time order, and
/// those that started a subscription).
async fn purchases<C: ConnectionTrait>(conn: &C, account: &AccountId) -> Result<Purchases, Fail> {
    let sql = format!(
        "SELECT {SUBSCRIPTION_COLUMNS}, order_id FROM subscriptions WHERE {OWNED_BY_ACCOUNT}"
    );
    let mut subscriptions = Vec::new();
    for row in sql::rows(conn, &sql, vec![account.as_str().into()]).await? {
        let origin: Option<String> = row.try_get("", "order_id")?;
        let subscription = SubscriptionRow::from_query_result(&row, "")?.into_domain()?;
        let origin = origin.map(OrderId::new).transpose().map_err(|e| {
            Fail::Store(corrupt(
                "subscriptions",
                subscription.id().as_str(),
                e.to_string(),
            ))
        })?;
        subscriptions.push((subscription, origin));
    }
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders WHERE {OWNED_BY_ACCOUNT} AND (id IN \
         (SELECT order_id FROM subscriptions WHERE {OWNED_BY_ACCOUNT}) OR (plan_type = 'one_time' \
         AND status IN ($2, $3)))"
    );
    let values = vec![
        account.as_str().into(),
        OrderStatusKind::Paid.code().into(),
        OrderStatusKind::PartiallyRefunded.code().into(),
    ];
    let rows: Vec<OrderRow> = sql::all(conn, &sql, values).await?;
    let orders = rows
        .into_iter()
        .map(|row| Ok(row.into_domain()?.order))
        .collect::<Result<_, Fail>>()?;
    Ok((subscriptions, orders))
}

/// Keep `w` inside `tx` if the row still has the version `w` expects (no row: `w` creates it);
/// a [`StoreError::Conflict`] otherwise.
pub(crate) async fn write(tx: &DatabaseTransaction, w: &EntitlementsWrite) -> Result<(), Fail> {
    let map = serde_json::Value::Object(entitlements_object(&w.entitlements).into_iter().collect());
    let mut values = vec![
        w.account.as_str().into(),
        map.to_string().into(),
        w.next_change_at.map(Timestamp::unix_millis).into(),
        w.at.unix_millis().into(),
    ];
    let sql = match w.expected_version {
        Some(version) => {
            values.push(version.into());
            "UPDATE entitlements_told SET entitlements = $2, next_change_at = $3, told_at = $4, \
             version = version + 1 WHERE account_id = $1 AND version = $5"
        }
        None => {
            "INSERT INTO entitlements_told (account_id, entitlements, next_change_at, told_at, \
             version) VALUES ($1, $2, $3, $4, 1) ON CONFLICT (account_id) DO NOTHING"
        }
    };
    if sql::execute(tx, sql, values).await? == 0 {
        let why = format!(
            "the entitlements of {} changed since they were read",
            w.account
        );
        return Err(Fail::Store(StoreError::Conflict(why)));
    }
    Ok(())
}

/// Accounts whose `next_change_at` has passed at `now`, soonest first.
pub(crate) async fn due<C: ConnectionTrait>(
    conn: &C,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<AccountId>, Fail> {
    #[derive(Debug, FromQueryResult)]
    struct Due {
        account_id: String,
    }
    let sql = "SELECT account_id FROM entitlements_told WHERE next_change_at <= $1 \
               ORDER BY next_change_at, account_id LIMIT $2";
    let values = vec![now.unix_millis().into(), i64::from(limit).into()];
    let rows: Vec<Due> = sql::all(conn, sql, values).await?;
    rows.into_iter()
        .map(|row| {
            AccountId::new(row.account_id.clone()).map_err(|e| {
                Fail::Store(corrupt("entitlements_told", &row.account_id, e.to_string()))
            })
        })
        .collect()
}
