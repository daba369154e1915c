//! Spend limits: the limits themselves ([`SpendLimitStore`]) and what a spend does to them in its
//! own transaction (count, give back, the room a settle may take).
//!
//! Every move of a limit's buckets happens after the account's balance row is locked (the lock
//! every spend of the account takes first), so a spend decides on buckets no concurrent spend
//! can move, on several instances alike. Making or removing a limit changes
//! `credit_balances.limit_count` under the same lock: a spend learns from the balance row it
//! locks whether it has limits to read, and a grouped spend that compared the row before writing
//! sees it moved.

use std::collections::HashMap;

use application::host_events::{self, HostEvent, LimitTold};
use application::ports::{
    AddLimitError, CreditTransaction, NewSpendLimit, Refusal, SpendLimitRecord, SpendLimitStore,
    StoreError,
};
use async_trait::async_trait;
use domain::{
    AccountId, Bucket, Credits, Enforcement, LimitScope, LimitStanding, MAX_LIMITS_PER_ACCOUNT,
    ReservationId, SpendLimit, SpendLimitId, SpendWindow, Timestamp, UserId,
};
use sea_orm::{ConnectionTrait, DatabaseTransaction, QueryResult, Value};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql::{self, End};

/// How far back a read of buckets reaches: every window is at most 31 days long (a month, or
/// a rolling window of [`domain::MAX_ROLLING_HOURS`]), so 32 days covers them all.
const REACH_MS: i64 = 32 * 86_400_000;

const LIMIT_COLUMNS: &str = "l.id, l.account_id, l.feature, l.model, l.api_key_id, l.member_id, \
     l.limit_window, \
     l.rolling_hours, l.credits_hundredths, l.enforcement, l.created_by, l.created_at, \
     u.bucket_start, u.spent_hundredths";

/// The limits of `account` (those that count a spend of `spend`'s scope when it is `Some`,
/// [`LimitScope::counts`]), oldest first, with their buckets from 32 days before `now`.
async fn read<C: ConnectionTrait>(
    conn: &C,
    account: &AccountId,
    spend: Option<&LimitScope>,
    now: Timestamp,
) -> Result<Vec<SpendLimitRecord>, Fail> {
    let mut values = vec![account.as_str().into()];
    let mut only = "l.account_id = $2".to_owned();
    if let Some(spend) = spend {
        for (column, value) in scope_columns(spend) {
            match value {
                None => only.push_str(&format!(" AND l.{column} IS NULL")),
                Some(v) => {
                    values.push(v.into());
                    let n = values.len() + 1;
                    only.push_str(&format!(" AND (l.{column} IS NULL OR l.{column} = ${n})"));
                }
            }
        }
    }
    let mut by_account = read_where(conn, &only, values, now).await?;
    Ok(by_account.remove(account.as_str()).unwrap_or_default())
}

/// The limits `filter` picks (an SQL condition on `l`, the limits, whose parameters, `values`,
/// start at `$2`), by account, each account's oldest first, with their buckets from 32 days
/// before `now`.
async fn read_where<C: ConnectionTrait>(
    conn: &C,
    filter: &str,
    values: Vec<Value>,
    now: Timestamp,
) -> Result<HashMap<String, Vec<SpendLimitRecord>>, Fail> {
    let mut all = vec![now.plus_millis(-REACH_MS).unix_millis().into()];
    all.extend(values);
    let sql = format!(
        "SELECT {LIMIT_COLUMNS} FROM spend_limits l LEFT JOIN spend_limit_usage u \
         ON u.limit_id = l.id AND u.bucket_start >= $1 WHERE {filter} \
         ORDER BY l.created_at, l.id, u.bucket_start"
    );
    let mut by_account: HashMap<String, Vec<SpendLimitRecord>> = HashMap::new();
    for row in sql::rows(conn, &sql, all).await? {
        let id: String = row.try_get("", "id")?;
        let account: String = row.try_get("", "account_id")?;
        let limits = by_account.entry(account).or_default();
        if limits.last().is_none_or(|l| l.id.as_str() != id) {
            limits.push(record(&row, &id)?);
        }
        let start: Option<i64> = row.try_get("", "bucket_start")?;
        let spent: Option<i64> = row.try_get("", "spent_hundredths")?;
        if let (Some(start), Some(spent), Some(limit)) = (start, spent, limits.last_mut()) {
            let spent = Credits::from_hundredths(spent)
                .map_err(|e| corrupt("spend_limit_usage", &id, e))?;
            limit.buckets.push(Bucket {
                start: Timestamp::from_unix_millis(start),
                spent,
            });
        }
    }
    Ok(by_account)
}

/// A limit's row, without its buckets.
fn record(row: &QueryResult, id: &str) -> Result<SpendLimitRecord, Fail> {
    let bad = |what: String| Fail::Store(corrupt("spend_limits", id, what));
    let window: String = row.try_get("", "limit_window")?;
    let hours: Option<i32> = row.try_get("", "rolling_hours")?;
    let hours = hours
        .map(u32::try_from)
        .transpose()
        .map_err(|e| bad(e.to_string()))?;
    let window = SpendWindow::parse(&window, hours).map_err(|e| bad(e.to_string()))?;
    let enforcement: String = row.try_get("", "enforcement")?;
    let enforcement = Enforcement::parse(&enforcement)
        .ok_or_else(|| bad(format!("enforcement {enforcement}")))?;
    let credits: i64 = row.try_get("", "credits_hundredths")?;
    let credits = Credits::from_hundredths(credits).map_err(|e| bad(e.to_string()))?;
    let account: String = row.try_get("", "account_id")?;
    let created_by: Option<String> = row.try_get("", "created_by")?;
    let member: Option<String> = row.try_get("", "member_id")?;
    Ok(SpendLimitRecord {
        id: SpendLimitId::new(id).map_err(|e| bad(e.to_string()))?,
        account_id: AccountId::new(account).map_err(|e| bad(e.to_string()))?,
        scope: LimitScope {
            feature: row.try_get("", "feature")?,
            model: row.try_get("", "model")?,
            api_key: row.try_get("", "api_key_id")?,
            member: member
                .map(UserId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
        },
        limit: SpendLimit {
            credits,
            window,
            enforcement,
        },
        created_by: created_by
            .map(UserId::new)
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        created_at: Timestamp::from_unix_millis(row.try_get("", "created_at")?),
        buckets: Vec::new(),
    })
}

/// What one limit counted of a spend.
#[derive(Debug, Clone)]
pub(crate) struct LimitCount {
    /// The limit.
    pub(crate) id: SpendLimitId,
    /// The bucket.
    pub(crate) bucket: Timestamp,
    /// How much.
    pub(crate) amount: Credits,
    /// When the spend took the limit to its credits or past them: what `limit.reached` tells.
    pub(crate) crossed: Option<LimitTold>,
}

/// `limit.reached` of every limit `counted` took to its credits or past them, with `spend`.
pub(crate) fn reached_events(counted: &[LimitCount], spend: &CreditTransaction) -> Vec<HostEvent> {
    counted
        .iter()
        .filter_map(|c| c.crossed.clone())
        .map(|told| host_events::limit_reached(told, spend))
        .collect()
}

/// What `record` tells once a spend crossed it (`after`: where it then stands).
fn told(record: &SpendLimitRecord, after: LimitStanding) -> LimitTold {
    LimitTold {
        id: record.id.clone(),
        scope: record.scope.clone(),
        limit: record.limit,
        used: after.used,
        resets_at: after.resets_at,
        created_at: record.created_at,
    }
}

/// Count a spend of `amount` by `account` at `now` (its feature, model, key and member in `spend`) against
/// every limit it falls under ([`SpendLimit::count`]), writing the counts: what was counted, or
/// the refusal of a hard limit it would pass (nothing written; of several, the one with the
/// least left). `limited`: whether the locked balance row says the account has limits (none
/// read if not).
pub(crate) async fn count(
    tx: &DatabaseTransaction,
    (account, limited): (&AccountId, bool),
    spend: &LimitScope,
    amount: Credits,
    now: Timestamp,
) -> Result<Result<Vec<LimitCount>, Refusal>, Fail> {
    if !limited {
        return Ok(Ok(Vec::new()));
    }
    let limits = read(tx, account, Some(spend), now).await?;
    let counts = match SpendLimitRecord::count_all(&limits, amount, now) {
        Ok(counts) => counts,
        Err(reached) => return Ok(Err(Refusal::LimitReached(reached))),
    };
    let counted: Vec<LimitCount> = limits
        .iter()
        .zip(counts)
        .map(|(record, c)| LimitCount {
            id: record.id.clone(),
            bucket: c.bucket,
            amount,
            crossed: c.crossed.then(|| told(record, c.after)),
        })
        .collect();
    add(tx, &counted).await?;
    mark_reached(tx, &counted).await?;
    Ok(Ok(counted))
}

/// The limits with their buckets of the accounts `accounts` picks (an SQL condition on
/// `l.account_id`, whose parameters start at `$2`), by account, for a grouped run that counts
/// its spends itself ([`count_in_run`]): under the accounts' balance-row locks, or read after
/// their balance rows by a run that writes only if those rows still hold what it read (every
/// change to a limit or its buckets changes the row).
pub(crate) async fn read_for_run<C: ConnectionTrait>(
    conn: &C,
    (accounts, values): (&str, Vec<Value>),
    now: Timestamp,
) -> Result<HashMap<String, Vec<SpendLimitRecord>>, Fail> {
    read_where(conn, accounts, values, now).await
}

/// Count a spend of `amount` at `now` (made in `spend`) against the limits of `limits` it falls
/// under, as [`count`] does but in memory, for a grouped run: what it counted, the limits'
/// buckets moved, or the refusal of a hard limit (nothing moved).
pub(crate) fn count_in_run(
    limits: &mut [SpendLimitRecord],
    spend: &LimitScope,
    amount: Credits,
    now: Timestamp,
) -> Result<Vec<LimitCount>, Refusal> {
    let counts =
        SpendLimitRecord::count_among(limits, spend, amount, now).map_err(Refusal::LimitReached)?;
    Ok(counts
        .into_iter()
        .map(|(i, c)| LimitCount {
            id: limits[i].id.clone(),
            bucket: c.bucket,
            amount,
            crossed: c.crossed.then(|| told(&limits[i], c.after)),
        })
        .collect())
}

/// What a grouped run counted (`counted`, its fresh spends' counts) as one count per bucket,
/// the sum of its counts: a bucket is written once (one upsert may not touch a row twice).
pub(crate) fn bucket_sums(counted: &[LimitCount]) -> Result<Vec<LimitCount>, Fail> {
    let mut sums: Vec<LimitCount> = Vec::new();
    for c in counted {
        match sums
            .iter_mut()
            .find(|s| s.id == c.id && s.bucket == c.bucket)
        {
            Some(sum) => {
                sum.amount = sum
                    .amount
                    .checked_add(c.amount)
                    .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("a run's count: {e}")))?;
            }
            None => sums.push(LimitCount {
                crossed: None,
                ..c.clone()
            }),
        }
    }
    Ok(sums)
}

/// What adds counts to their buckets, after `INSERT INTO spend_limit_usage (limit_id,
/// bucket_start, spent_hundredths) …`.
pub(crate) const ADD_TO_BUCKETS: &str = "ON CONFLICT (limit_id, bucket_start) DO UPDATE SET \
     spent_hundredths = spend_limit_usage.spent_hundredths + excluded.spent_hundredths";

/// Remember when each limit `counted` just reached resets: the reconciler tells `limit.reset`
/// once it has ([`tell_reset`]).
pub(crate) async fn mark_reached(
    tx: &DatabaseTransaction,
    counted: &[LimitCount],
) -> Result<(), Fail> {
    for told in counted.iter().filter_map(|c| c.crossed.as_ref()) {
        let sql = "UPDATE spend_limits SET reached_until = $2 WHERE id = $1";
        let values = vec![told.id.as_str().into(), told.resets_at.unix_millis().into()];
        sql::execute(tx, sql, values).await?;
    }
    Ok(())
}

/// Limits waiting for `limit.reset` whose reset time has come by `now`: `(id, account)`,
/// soonest first, at most `batch`.
async fn resets_due(
    db: &sea_orm::DatabaseConnection,
    now: Timestamp,
    batch: u32,
) -> Result<Vec<(SpendLimitId, AccountId)>, Fail> {
    let sql = "SELECT id, account_id FROM spend_limits WHERE reached_until IS NOT NULL \
               AND reached_until <= $1 ORDER BY reached_until, id LIMIT $2";
    let values = vec![now.unix_millis().into(), i64::from(batch).into()];
    let mut due = Vec::new();
    for row in sql::rows(db, sql, values).await? {
        let id: String = row.try_get("", "id")?;
        let account: String = row.try_get("", "account_id")?;
        let bad = |e: domain::IdError| Fail::Store(corrupt("spend_limits", &id, e));
        due.push((
            SpendLimitId::new(id.clone()).map_err(bad)?,
            AccountId::new(account).map_err(bad)?,
        ));
    }
    Ok(due)
}

/// Tell `limit.reset` of limit `id` of `account` inside `tx`, under the account's balance row
/// (the lock every spend takes first), if its reset time has come by `now` and it has room
/// again; a limit a spend filled again since waits for its next reset. Whether it was told (an
/// instance that told it first leaves nothing to tell).
async fn tell_reset(
    tx: &DatabaseTransaction,
    (id, account): (&SpendLimitId, &AccountId),
    now: Timestamp,
    events: &crate::Enc,
) -> Result<End<bool>, Fail> {
    lock_balance_row(tx, account, now).await?;
    let sql = "SELECT reached_until FROM spend_limits WHERE id = $1 AND account_id = $2";
    let values = vec![id.as_str().into(), account.as_str().into()];
    let until = sql::rows(tx, sql, values).await?;
    let until: Option<i64> = match until.first() {
        Some(row) => row.try_get("", "reached_until")?,
        None => None,
    };
    let Some(until) = until.filter(|u| *u <= now.unix_millis()) else {
        return Ok(End::Rollback(false));
    };
    let limits = read(tx, account, None, now).await?;
    let Some(record) = limits.iter().find(|l| &l.id == id) else {
        return Ok(End::Rollback(false));
    };
    let standing = record.limit.standing(&record.buckets, now);
    let sql = "UPDATE spend_limits SET reached_until = $2 WHERE id = $1";
    if standing.left.is_zero() {
        let values = vec![id.as_str().into(), standing.resets_at.unix_millis().into()];
        sql::execute(tx, sql, values).await?;
        return Ok(End::Commit(false));
    }
    sql::execute(tx, sql, vec![id.as_str().into(), None::<i64>.into()]).await?;
    let until = Timestamp::from_unix_millis(until);
    let event = host_events::limit_reset(told(record, standing), account, until, now);
    crate::outbox::Outbox::write_one(tx, event, events).await?;
    Ok(End::Commit(true))
}

/// The most a settle at `now` may take past its hold under the account's hard limits that the
/// hold made in `spend` falls under (`None`: no hard limit bounds it).
pub(crate) async fn room(
    tx: &DatabaseTransaction,
    (account, limited): (&AccountId, bool),
    spend: &LimitScope,
    now: Timestamp,
) -> Result<Option<Credits>, Fail> {
    if !limited {
        return Ok(None);
    }
    let limits = read(tx, account, Some(spend), now).await?;
    Ok(limits
        .iter()
        .filter_map(|l| l.limit.room(&l.buckets, now))
        .min())
}

/// Add `counted` to their buckets: one statement.
async fn add(tx: &DatabaseTransaction, counted: &[LimitCount]) -> Result<(), Fail> {
    if counted.is_empty() {
        return Ok(());
    }
    let mut rows = Vec::with_capacity(counted.len());
    let mut values = Vec::with_capacity(counted.len() * 3);
    for (i, c) in counted.iter().enumerate() {
        rows.push(format!("(${}, ${}, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3));
        values.push(c.id.as_str().into());
        values.push(c.bucket.unix_millis().into());
        values.push(c.amount.hundredths().into());
    }
    let sql = format!(
        "INSERT INTO spend_limit_usage (limit_id, bucket_start, spent_hundredths) VALUES {} \
         {ADD_TO_BUCKETS}",
        rows.join(", ")
    );
    sql::execute(tx, &sql, values).await?;
    Ok(())
}

/// Remember what a hold counted, for its release or settle.
pub(crate) async fn record_hold(
    tx: &DatabaseTransaction,
    hold: &ReservationId,
    counted: &[LimitCount],
) -> Result<(), Fail> {
    for c in counted {
        let sql = "INSERT INTO reservation_limit_counts \
                   (reservation_id, limit_id, bucket_start, counted_hundredths) VALUES ($1, $2, $3, $4)";
        let values = vec![
            hold.as_str().into(),
            c.id.as_str().into(),
            c.bucket.unix_millis().into(),
            c.amount.hundredths().into(),
        ];
        sql::execute(tx, sql, values).await?;
    }
    Ok(())
}

/// Give back to the buckets a hold counted in: all of each count (`None`: a release or a
/// lapse), or at most `unused` of each (a settle for less than the hold). The hold's counts are
/// then forgotten (a hold is resolved once). A limit removed since gets nothing back.
pub(crate) async fn give_back_hold(
    tx: &DatabaseTransaction,
    hold: &ReservationId,
    unused: Option<Credits>,
) -> Result<(), Fail> {
    let sql = "SELECT limit_id, bucket_start, counted_hundredths FROM reservation_limit_counts \
               WHERE reservation_id = $1";
    let rows = sql::rows(tx, sql, vec![hold.as_str().into()]).await?;
    if rows.is_empty() {
        return Ok(());
    }
    for row in rows {
        let limit: String = row.try_get("", "limit_id")?;
        let bucket: i64 = row.try_get("", "bucket_start")?;
        let counted: i64 = row.try_get("", "counted_hundredths")?;
        let back = unused.map_or(counted, |u| u.hundredths().min(counted));
        let sql = "UPDATE spend_limit_usage SET spent_hundredths = CASE \
                   WHEN spent_hundredths > $3 THEN spent_hundredths - $3 ELSE 0 END \
                   WHERE limit_id = $1 AND bucket_start = $2";
        sql::execute(tx, sql, vec![limit.into(), bucket.into(), back.into()]).await?;
    }
    let sql = "DELETE FROM reservation_limit_counts WHERE reservation_id = $1";
    sql::execute(tx, sql, vec![hold.as_str().into()]).await?;
    Ok(())
}

/// Lock `account`'s balance row (created empty if it has none): the lock every spend of the
/// account takes first.
async fn lock_balance_row(
    tx: &DatabaseTransaction,
    account: &AccountId,
    now: Timestamp,
) -> Result<(), Fail> {
    let sql = "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
               updated_at) VALUES ($1, 0, 0, $2) ON CONFLICT (account_id) DO UPDATE \
               SET limit_count = credit_balances.limit_count";
    let values = vec![account.as_str().into(), now.unix_millis().into()];
    sql::execute(tx, sql, values).await?;
    Ok(())
}

/// Move the locked balance row's `limit_count` by `delta`, and count the change in
/// `limit_changes` (what a grouped spend decided without the row's lock checks: a removal
/// and an addition leave `limit_count` as it was). A `delta` of 0 only locks the row.
async fn count_limits(
    tx: &DatabaseTransaction,
    account: &AccountId,
    delta: i64,
) -> Result<(), Fail> {
    let sql = "UPDATE credit_balances SET limit_count = limit_count + $2, \
               limit_changes = limit_changes + $3 WHERE account_id = $1";
    let changes = i64::from(delta != 0);
    let values = vec![account.as_str().into(), delta.into(), changes.into()];
    sql::execute(tx, sql, values).await?;
    Ok(())
}

#[async_trait]
impl SpendLimitStore for SeaOrmStore {
    async fn spend_limits(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Vec<SpendLimitRecord>, StoreError> {
        self.retry
            .run("spend_limits", || async {
                read(&self.db, account, None, now).await
            })
            .await
    }

    async fn add_spend_limit(
        &self,
        new: &NewSpendLimit,
    ) -> Result<SpendLimitRecord, AddLimitError> {
        self.retry
            .run("add_spend_limit", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = add_in(&tx, new).await;
                sql::finish(tx, body).await
            })
            .await?
    }

    async fn remove_spend_limit(
        &self,
        account: &AccountId,
        id: &SpendLimitId,
    ) -> Result<bool, StoreError> {
        self.retry
            .run("remove_spend_limit", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = remove_in(&tx, account, id).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn tell_limit_resets(&self, now: Timestamp, batch: u32) -> Result<u32, StoreError> {
        let due = self
            .retry
            .run("limit_resets_due", || resets_due(&self.db, now, batch))
            .await?;
        let mut told = 0;
        for (id, account) in &due {
            let fresh = self
                .retry
                .run("tell_limit_reset", || async {
                    let (_turn, tx) = self.begin_write().await?;
                    let body = tell_reset(&tx, (id, account), now, &*self.events).await;
                    sql::finish(tx, body).await
                })
                .await?;
            told += u32::from(fresh);
        }
        Ok(told)
    }
}

/// Add `new` inside `tx`: with the account's balance row locked first (the spends in flight
/// finish first, those after it count against it), refused past
/// [`MAX_LIMITS_PER_ACCOUNT`] and on a key not bound to the account (rolled back).
pub(crate) async fn add_in(
    tx: &DatabaseTransaction,
    new: &NewSpendLimit,
) -> Result<End<Result<SpendLimitRecord, AddLimitError>>, Fail> {
    lock_balance_row(tx, &new.account_id, new.now).await?;
    let sql = "SELECT COUNT(*) AS n FROM spend_limits WHERE account_id = $1";
    let values = vec![new.account_id.as_str().into()];
    let n = sql::one_i64(tx, sql, values, "n").await?.unwrap_or(0);
    if usize::try_from(n).unwrap_or(usize::MAX) >= MAX_LIMITS_PER_ACCOUNT {
        return Ok(End::Rollback(Err(AddLimitError::TooMany(
            MAX_LIMITS_PER_ACCOUNT,
        ))));
    }
    if let Some(key) = &new.scope.api_key
        && !key_of(tx, key, &new.account_id).await?
    {
        return Ok(End::Rollback(Err(AddLimitError::NoSuchKey)));
    }
    if let Some(member) = &new.scope.member
        && !member_of(tx, member, &new.account_id).await?
    {
        return Ok(End::Rollback(Err(AddLimitError::NoSuchMember)));
    }
    insert(tx, new).await?;
    seed(tx, new).await?;
    count_limits(tx, &new.account_id, 1).await?;
    let limits = read(tx, &new.account_id, None, new.now).await?;
    let record = limits
        .into_iter()
        .find(|l| l.id == new.id)
        .ok_or_else(|| StoreError::Unexpected(anyhow::anyhow!("the limit just added")))?;
    Ok(End::Commit(Ok(record)))
}

impl SeaOrmStore {
    /// Open every account from now on (a user's personal account, a team) with a hard monthly
    /// limit of `ceiling` credits, in the transaction that opens it: the operator's default
    /// ceiling, which the account's owners may lift or change like any limit; `None` opens
    /// them without.
    #[must_use]
    pub fn with_new_account_ceiling(mut self, ceiling: Option<Credits>) -> Self {
        self.ceiling = ceiling;
        self
    }

    /// The ceiling new accounts open with, if any.
    pub(crate) fn new_account_ceiling(&self) -> Option<Credits> {
        self.ceiling
    }
}

/// Give `account`, opened in `tx` just now, the operator's default ceiling: a hard monthly
/// limit of `ceiling`, whose id derives from the account (an account is opened once).
pub(crate) async fn open_with_ceiling(
    tx: &DatabaseTransaction,
    account: &AccountId,
    ceiling: Credits,
    now: Timestamp,
) -> Result<(), Fail> {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("ceiling\0{account}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let id = SpendLimitId::new(format!("lim_{hex}"))
        .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("a ceiling's id: {e}")))?;
    let new = NewSpendLimit {
        id,
        account_id: account.clone(),
        scope: LimitScope::default(),
        limit: SpendLimit {
            credits: ceiling,
            window: SpendWindow::Month,
            enforcement: Enforcement::Hard,
        },
        created_by: None,
        now,
    };
    match add_in(tx, &new).await? {
        End::Commit(Ok(_)) => Ok(()),
        End::Commit(Err(e)) | End::Rollback(Err(e)) => Err(Fail::Store(e.into())),
        End::Rollback(Ok(_)) => Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "the ceiling of {account} was not added"
        )))),
    }
}

/// Remove `account`'s limit `id` inside `tx`, with the thresholds at a percentage of it, after
/// the account's balance row as every spend takes it: whether it had it (rolled back if not).
pub(crate) async fn remove_in(
    tx: &DatabaseTransaction,
    account: &AccountId,
    id: &SpendLimitId,
) -> Result<End<bool>, Fail> {
    // An account without a balance row has no limits.
    count_limits(tx, account, 0).await?;
    let values = vec![id.as_str().into(), account.as_str().into()];
    // Explicitly, not by the cascade: SQLite enforces it only with foreign keys on.
    let sql = "DELETE FROM spend_limit_usage WHERE limit_id = \
               (SELECT id FROM spend_limits WHERE id = $1 AND account_id = $2)";
    sql::execute(tx, sql, values.clone()).await?;
    let sql = "DELETE FROM spend_limits WHERE id = $1 AND account_id = $2";
    if sql::execute(tx, sql, values.clone()).await? == 0 {
        return Ok(End::Rollback(false));
    }
    count_limits(tx, account, -1).await?;
    // The thresholds at a percentage of it go with it.
    let sql = "DELETE FROM balance_thresholds WHERE limit_id = $1 AND account_id = $2";
    let gone = sql::execute(tx, sql, values).await?;
    if gone > 0 {
        let sql = "UPDATE credit_balances SET threshold_count = threshold_count - $2 \
                   WHERE account_id = $1";
        let values = vec![
            account.as_str().into(),
            i64::try_from(gone).unwrap_or(0).into(),
        ];
        sql::execute(tx, sql, values).await?;
    }
    Ok(End::Commit(true))
}

/// Start a new limit from what its window already spent ([`domain::spend_limit::seed`]), read
/// under the balance row's lock: the ledger's consumptions, and holds (their settles and
/// releases at the hold's time) of the window and scope; the holds still pending are
/// remembered as counted, so that their release gives back.
async fn seed(tx: &DatabaseTransaction, new: &NewSpendLimit) -> Result<(), Fail> {
    let from = new.limit.window.counts_from(new.now).unix_millis();
    let mut values = vec![new.account_id.as_str().into(), from.into()];
    let mut only = String::new();
    for (column, value) in scope_columns(&new.scope) {
        if let Some(v) = value {
            values.push(v.into());
            only.push_str(&format!(" AND t.{column} = ${}", values.len()));
        }
    }
    let sql = format!(
        "SELECT COALESCE(r.created_at, t.created_at) AS at, t.amount_hundredths AS amount \
         FROM credit_transactions t LEFT JOIN credit_reservations r ON r.id = t.reservation_id \
         WHERE t.account_id = $1 AND t.created_at >= $2 AND t.kind IN ('consumption', \
         'reservation_hold', 'reservation_settle', 'reservation_release'){only}"
    );
    let mut spends = Vec::new();
    for row in sql::rows(tx, &sql, values.clone()).await? {
        let at: i64 = row.try_get("", "at")?;
        let amount: i64 = row.try_get("", "amount")?;
        spends.push((Timestamp::from_unix_millis(at), amount.saturating_neg()));
    }
    let buckets = domain::spend_limit::seed(new.limit.window, &spends, new.now);
    let counted: Vec<LimitCount> = buckets
        .iter()
        .map(|b| LimitCount {
            id: new.id.clone(),
            bucket: b.start,
            amount: b.spent,
            crossed: None,
        })
        .collect();
    add(tx, &counted).await?;
    let only = only.replace("t.", "");
    let sql = format!(
        "SELECT id, held_hundredths, created_at FROM credit_reservations \
         WHERE account_id = $1 AND created_at >= $2 AND status = 'pending'{only}"
    );
    for row in sql::rows(tx, &sql, values).await? {
        let id: String = row.try_get("", "id")?;
        let held: i64 = row.try_get("", "held_hundredths")?;
        let at: i64 = row.try_get("", "created_at")?;
        let hold = ReservationId::new(id.clone())
            .map_err(|e| Fail::Store(corrupt("credit_reservations", &id, e)))?;
        let count = LimitCount {
            id: new.id.clone(),
            bucket: new.limit.window.bucket_of(Timestamp::from_unix_millis(at)),
            amount: Credits::from_hundredths(held)
                .map_err(|e| Fail::Store(corrupt("credit_reservations", &id, e)))?,
            crossed: None,
        };
        record_hold(tx, &hold, &[count]).await?;
    }
    Ok(())
}

async fn insert(tx: &DatabaseTransaction, new: &NewSpendLimit) -> Result<(), Fail> {
    let sql = "INSERT INTO spend_limits (id, account_id, feature, limit_window, rolling_hours, \
               credits_hundredths, enforcement, created_by, created_at, api_key_id, model, \
               member_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
    let scope = &new.scope;
    let hours = new.limit.window.rolling_hours().map(i64::from);
    let values = vec![
        new.id.as_str().into(),
        new.account_id.as_str().into(),
        scope.feature.clone().into(),
        new.limit.window.code().into(),
        hours.into(),
        new.limit.credits.hundredths().into(),
        new.limit.enforcement.code().into(),
        new.created_by
            .as_ref()
            .map(|u| u.as_str().to_owned())
            .into(),
        new.now.unix_millis().into(),
        scope.api_key.clone().into(),
        scope.model.clone().into(),
        scope.member.as_ref().map(|m| m.as_str().to_owned()).into(),
    ];
    sql::execute(tx, sql, values).await?;
    Ok(())
}

/// The columns of `spend_limits` (and of the ledger and reservations, which name them alike)
/// that narrow a limit, with `scope`'s value of each.
fn scope_columns(scope: &LimitScope) -> [(&'static str, Option<&str>); 4] {
    [
        ("feature", scope.feature.as_deref()),
        ("model", scope.model.as_deref()),
        ("api_key_id", scope.api_key.as_deref()),
        ("member_id", scope.member.as_ref().map(UserId::as_str)),
    ]
}

/// Whether `member` is a member of `account`.
async fn member_of(
    tx: &DatabaseTransaction,
    member: &UserId,
    account: &AccountId,
) -> Result<bool, Fail> {
    let sql = "SELECT COUNT(*) AS n FROM account_members WHERE account_id = $1 AND user_id = $2";
    let values = vec![account.as_str().into(), member.as_str().into()];
    Ok(sql::one_i64(tx, sql, values, "n").await?.unwrap_or(0) > 0)
}

/// Whether `key` is an API key bound to `account` and not revoked.
async fn key_of(tx: &DatabaseTransaction, key: &str, account: &AccountId) -> Result<bool, Fail> {
    let sql = "SELECT COUNT(*) AS n FROM api_keys \
               WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL";
    let values = vec![key.into(), account.as_str().into()];
    Ok(sql::one_i64(tx, sql, values, "n").await?.unwrap_or(0) > 0)
}
