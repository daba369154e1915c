//! `entitlements.changed` (issue 17): a user's effective entitlements are worked out again
//! inside the transaction that may have changed them, compared with what was last told (the
//! user's `entitlements_told` row) and, when they differ, told in that same transaction.
//!
//! The user's row is locked (inserted first when missing) BEFORE the purchases are read: on
//! PostgreSQL a concurrent transaction of the same user waits for this one's commit at that
//! lock and then reads what this one wrote, so two changes racing are told one after the
//! other, each with its true previous map. SQLite has one writer at a time.
//!
//! The rules are `Service::report_entitlements`'s (`domain::entitlements`), fed with the
//! [`EntitlementRules`] the service configured (`HostEventLog::configure_entitlements`): each
//! purchase grants what its order was sold with, or its plan's entitlements as they are now
//! when it has none of its own.
//!
//! The passing of time changes entitlements too (one-time access running out, a cancelled or
//! past-due subscription's time ending); no transaction happens then, so the row keeps the
//! earliest such moment (`next_change_at`) and the reconciler ([`due`], [`tell_lapse`]) works
//! the users whose moment has passed out again, each in a transaction of its own.

use std::collections::BTreeMap;

use application::host_events;
use application::ports::{EntitlementRules, EntitlementsMoved, LivePlans};
use domain::entitlements::{EffectiveEntitlements, Entitlements, Holding, effective_entitlements};
use domain::{OrderStatusKind, PlanId, Subscription, Timestamp, UserId};
use sea_orm::{ConnectionTrait, DatabaseTransaction, FromQueryResult};
use serde_json::Value as Json;

use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::{
    ORDER_COLUMNS, OrderRow, PLAN_COLUMNS, PlanRow, SUBSCRIPTION_COLUMNS, SubscriptionRow, corrupt,
    entitlements_from_column, entitlements_object,
};
use crate::sql::{self, End};

/// A user's `entitlements_told` row, locked.
#[derive(Debug, FromQueryResult)]
struct ToldRow {
    entitlements: String,
    next_change_at: Option<i64>,
}

/// Lock `user`'s row and return it; `None` when the user had none (no change was told to them
/// since entitlements were released), after inserting one, as "nothing told", that this
/// transaction then holds.
///
/// The existing row is the common case, so it is read first (one statement); a missing one is
/// inserted with `ON CONFLICT DO NOTHING RETURNING`, and when a concurrent transaction inserted
/// it first (PostgreSQL waits for that one's commit) it is read again under its lock.
async fn lock_told(
    tx: &DatabaseTransaction,
    user: &UserId,
    now: Timestamp,
) -> Result<Option<ToldRow>, Fail> {
    let select = format!(
        "SELECT entitlements, next_change_at FROM entitlements_told WHERE user_id = $1{}",
        sql::for_update(tx)
    );
    let row: Option<ToldRow> = sql::one(tx, &select, vec![user.as_str().into()]).await?;
    if row.is_some() {
        return Ok(row);
    }
    let insert = "INSERT INTO entitlements_told (user_id, entitlements, next_change_at, told_at) \
                  VALUES ($1, '{}', NULL, $2) ON CONFLICT (user_id) DO NOTHING RETURNING user_id";
    let values = vec![user.as_str().into(), now.unix_millis().into()];
    if !sql::rows(tx, insert, values).await?.is_empty() {
        return Ok(None);
    }
    let row: Option<ToldRow> = sql::one(tx, &select, vec![user.as_str().into()]).await?;
    row.map(Some)
        .ok_or(Fail::Retry("the entitlements row vanished"))
}

/// A user's purchases that may grant access: every subscription (with the id of the order that
/// started it) and the orders by id.
type Purchases = (
    Vec<(Subscription, Option<String>)>,
    BTreeMap<String, domain::Order>,
);

/// `purchases` as they were before the change `moved` tells of: the states it replaced put
/// back, a subscription it created taken out.
fn undo(moved: &EntitlementsMoved, (mut subscriptions, mut orders): Purchases) -> Purchases {
    if let Some((id, before)) = &moved.subscription_before {
        match before {
            Some(before) => {
                for (s, _) in &mut subscriptions {
                    if s.id() == id {
                        *s = before.clone();
                    }
                }
            }
            None => subscriptions.retain(|(s, _)| s.id() != id),
        }
    }
    if let Some(order) = &moved.order_before {
        orders.insert(order.id().as_str().to_owned(), order.clone());
    }
    (subscriptions, orders)
}

/// The purchases of `user` that may grant access: every subscription (with the order that
/// started it) and every paid one-time order.
async fn purchases(tx: &DatabaseTransaction, user: &UserId) -> Result<Purchases, Fail> {
    let sql =
        format!("SELECT {SUBSCRIPTION_COLUMNS}, order_id FROM subscriptions WHERE user_id = $1");
    let mut subscriptions = Vec::new();
    for row in sql::rows(tx, &sql, vec![user.as_str().into()]).await? {
        let origin: Option<String> = row.try_get("", "order_id")?;
        let subscription = SubscriptionRow::from_query_result(&row, "")?.into_domain()?;
        subscriptions.push((subscription, origin));
    }
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders WHERE user_id = $1 AND (id IN \
         (SELECT order_id FROM subscriptions WHERE user_id = $1) OR (plan_type = 'one_time' \
         AND status IN ($2, $3)))"
    );
    let values = vec![
        user.as_str().into(),
        OrderStatusKind::Paid.code().into(),
        OrderStatusKind::PartiallyRefunded.code().into(),
    ];
    let rows: Vec<OrderRow> = sql::all(tx, &sql, values).await?;
    let mut orders = BTreeMap::new();
    for row in rows {
        let record = row.into_domain()?;
        orders.insert(record.order.id().as_str().to_owned(), record.order);
    }
    Ok((subscriptions, orders))
}

/// Plans' entitlements as they are now, looked up once per plan.
struct Live<'a> {
    rules: &'a LivePlans,
    known: BTreeMap<PlanId, Entitlements>,
}

impl Live<'_> {
    async fn of(&mut self, tx: &DatabaseTransaction, id: &PlanId) -> Result<Entitlements, Fail> {
        if let Some(known) = self.known.get(id) {
            return Ok(known.clone());
        }
        let found = match self.rules {
            LivePlans::Catalog(plans) => plans.get(id).cloned().unwrap_or_default(),
            LivePlans::Stored => {
                let sql = format!("SELECT {PLAN_COLUMNS} FROM pricing_plan WHERE id = $1");
                let row: Option<PlanRow> = sql::one(tx, &sql, vec![id.as_str().into()]).await?;
                match row {
                    Some(row) => row.into_domain()?.plan.entitlements().clone(),
                    None => Entitlements::none(),
                }
            }
        };
        self.known.insert(id.clone(), found.clone());
        Ok(found)
    }
}

/// The effective entitlements that `purchases` grant at `now`, and the earliest moment after
/// `now` one of them stops granting access by the passing of time.
async fn effective(
    tx: &DatabaseTransaction,
    (subscriptions, orders): &Purchases,
    rules: &EntitlementRules,
    now: Timestamp,
) -> Result<(EffectiveEntitlements, Option<Timestamp>), Fail> {
    let mut live = Live {
        rules: &rules.live_plans,
        known: BTreeMap::new(),
    };
    let mut holdings = Vec::new();
    for (subscription, origin) in subscriptions {
        // What the order that started it sold, when it sold the plan it is on now.
        let sold = origin
            .as_ref()
            .and_then(|id| orders.get(id))
            .filter(|order| &order.plan().plan_id == subscription.plan_id())
            .and_then(|order| order.plan().entitlements.clone());
        let entitlements = match sold {
            Some(sold) => sold,
            None => live.of(tx, subscription.plan_id()).await?,
        };
        let grace = rules.past_due_grace_ms;
        holdings.extend(Holding::of_subscription(
            subscription,
            entitlements,
            grace,
            now,
        ));
    }
    for order in orders.values() {
        if order.one_time_access().is_none() {
            continue;
        }
        let entitlements = match &order.plan().entitlements {
            Some(sold) => sold.clone(),
            None => live.of(tx, &order.plan().plan_id).await?,
        };
        holdings.extend(Holding::of_order(order, entitlements, now));
    }
    let next = holdings
        .iter()
        .filter_map(|h| h.until.ends_at())
        .min_by_key(|end| end.unix_millis());
    Ok((effective_entitlements(&holdings), next))
}

fn object(entitlements: &Entitlements) -> Json {
    Json::Object(entitlements_object(entitlements).into_iter().collect())
}

/// Work `user`'s entitlements out again at `now` (after the caller's changes, inside its
/// transaction), tell them to `outbox` when they differ from those last told, and keep the
/// row. A user with no row yet (nothing told since entitlements were released) is compared
/// with what they held before the change `moved` (none: the passing of time). Returns whether
/// they changed.
pub(crate) async fn tell_changes(
    tx: &DatabaseTransaction,
    user: &UserId,
    moved: Option<&EntitlementsMoved>,
    rules: &EntitlementRules,
    now: Timestamp,
    outbox: &mut Outbox,
) -> Result<bool, Fail> {
    let told = lock_told(tx, user, now).await?;
    let held_by = purchases(tx, user).await?;
    let (held, next) = effective(tx, &held_by, rules, now).await?;
    // The row as stored (a new one holds `{}`), and what the user held before.
    let (stored, previous, stored_next) = match told {
        Some(row) => {
            let stored = entitlements_from_column(Some(&row.entitlements))
                .map_err(|why| Fail::Store(corrupt("entitlements_told", user.as_str(), why)))?
                .unwrap_or_default();
            (stored.clone(), stored, row.next_change_at)
        }
        None => {
            let before_change = match moved {
                Some(moved) => undo(moved, held_by),
                None => held_by,
            };
            let (before, _) = effective(tx, &before_change, rules, now).await?;
            (Entitlements::none(), before.entitlements, None)
        }
    };
    let changed = held.entitlements != previous;
    if changed {
        outbox.push(host_events::entitlements_changed(
            user,
            &previous,
            &held.entitlements,
            now,
        ));
    }
    let next = next.map(Timestamp::unix_millis);
    if held.entitlements != stored || next != stored_next {
        let sql = "UPDATE entitlements_told SET entitlements = $2, next_change_at = $3, \
                   told_at = $4 WHERE user_id = $1";
        let values = vec![
            user.as_str().into(),
            object(&held.entitlements).to_string().into(),
            next.into(),
            now.unix_millis().into(),
        ];
        sql::execute(tx, sql, values).await?;
    }
    Ok(changed)
}

/// Users whose `next_change_at` has passed at `now`, soonest first.
pub(crate) async fn due<C: ConnectionTrait>(
    conn: &C,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<UserId>, Fail> {
    #[derive(Debug, FromQueryResult)]
    struct Due {
        user_id: String,
    }
    let sql = "SELECT user_id FROM entitlements_told WHERE next_change_at <= $1 \
               ORDER BY next_change_at, user_id LIMIT $2";
    let values = vec![now.unix_millis().into(), i64::from(limit).into()];
    let rows: Vec<Due> = sql::all(conn, sql, values).await?;
    rows.into_iter()
        .map(|row| {
            UserId::new(row.user_id.clone())
                .map_err(|e| Fail::Store(corrupt("entitlements_told", &row.user_id, e.to_string())))
        })
        .collect()
}

/// The reconciler's step for one due user: tell what the passing of time changed, in a
/// transaction of its own (a user another instance handled first is no longer due).
pub(crate) async fn tell_lapse(
    tx: &DatabaseTransaction,
    user: &UserId,
    rules: &EntitlementRules,
    now: Timestamp,
    events: &crate::Enc,
) -> Result<End<bool>, Fail> {
    let mut outbox = Outbox::default();
    let changed = tell_changes(tx, user, None, rules, now, &mut outbox).await?;
    outbox.write(tx, events).await?;
    Ok(End::Commit(changed))
}
