//! Balance thresholds: the thresholds themselves ([`ThresholdStore`]) and the crossings a
//! posting tells in its own transaction.
//!
//! Every posting writes the account's balance row with one statement that also returns
//! `credit_balances.threshold_count`, so only an account that has thresholds reads them (one
//! more statement), and only after its balance row is written: the row's lock orders the
//! crossings of concurrent postings as it orders the postings, on several instances alike.
//! Making or removing a threshold moves `threshold_count` under the same lock, and grouped
//! spends, which write only rows whose count is zero, leave such accounts to the one-by-one
//! path that tells crossings.

use application::host_events;
use application::ports::{
    AccountThresholds, AddThresholdError, CreditTransaction, LevelBases, StoreError,
    ThresholdRecord, ThresholdStore,
};
use async_trait::async_trait;
use domain::{
    AccountId, Credits, MAX_THRESHOLDS_PER_ACCOUNT, SpendLimitId, ThresholdId, ThresholdLevel,
    Timestamp, TransactionKind, UserId,
};
use sea_orm::{ConnectionTrait, DatabaseTransaction, QueryResult};

use crate::SeaOrmStore;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql::{self, End};

const COLUMNS: &str = "id, account_id, credits_hundredths, percent_of_grant, created_by, \
     created_at, percent_of_limit, limit_id";

fn record(row: &QueryResult) -> Result<ThresholdRecord, Fail> {
    let id: String = row.try_get("", "id")?;
    let account: String = row.try_get("", "account_id")?;
    let credits: Option<i64> = row.try_get("", "credits_hundredths")?;
    let percent: Option<i32> = row.try_get("", "percent_of_grant")?;
    let of_limit: Option<i32> = row.try_get("", "percent_of_limit")?;
    let limit: Option<String> = row.try_get("", "limit_id")?;
    let created_by: Option<String> = row.try_get("", "created_by")?;
    let created_at: i64 = row.try_get("", "created_at")?;
    let bad = |what: &dyn std::fmt::Display| corrupt("balance_thresholds", &id, what);
    let level = match (credits, percent, of_limit.zip(limit)) {
        (Some(c), None, None) => Credits::from_hundredths(c)
            .ok()
            .and_then(|c| ThresholdLevel::credits(c).ok()),
        (None, Some(p), None) => u32::try_from(p)
            .ok()
            .and_then(|p| ThresholdLevel::percent_of_grant(p).ok()),
        (None, None, Some((p, limit))) => u32::try_from(p)
            .ok()
            .zip(SpendLimitId::new(limit).ok())
            .and_then(|(p, limit)| ThresholdLevel::percent_of_limit(limit, p).ok()),
        _ => None,
    };
    Ok(ThresholdRecord {
        level: level.ok_or_else(|| bad(&"its level"))?,
        account_id: AccountId::new(account).map_err(|e| bad(&e))?,
        created_by: created_by
            .map(UserId::new)
            .transpose()
            .map_err(|e| bad(&e))?,
        id: ThresholdId::new(id.clone()).map_err(|e| bad(&e))?,
        created_at: Timestamp::from_unix_millis(created_at),
    })
}

/// The thresholds of `account`, oldest first.
async fn read<C: ConnectionTrait>(
    conn: &C,
    account: &AccountId,
) -> Result<Vec<ThresholdRecord>, Fail> {
    let sql = format!(
        "SELECT {COLUMNS} FROM balance_thresholds WHERE account_id = $1 ORDER BY created_at, id"
    );
    let rows = sql::rows(conn, &sql, vec![account.as_str().into()]).await?;
    rows.iter().map(record).collect()
}

/// The amount of `account`'s last grant, if it had one.
async fn last_grant<C: ConnectionTrait>(
    conn: &C,
    account: &AccountId,
) -> Result<Option<Credits>, Fail> {
    let sql = "SELECT amount_hundredths FROM credit_grants WHERE account_id = $1 \
               ORDER BY granted_at DESC, id DESC LIMIT 1";
    let amount = sql::one_i64(
        conn,
        sql,
        vec![account.as_str().into()],
        "amount_hundredths",
    )
    .await?;
    amount
        .map(|a| {
            Credits::from_hundredths(a)
                .map_err(|e| Fail::Store(corrupt("credit_grants", account.as_str(), e)))
        })
        .transpose()
}

/// The credits of `account`'s limits that `thresholds` sit at a percentage of.
async fn limit_credits<C: ConnectionTrait>(
    conn: &C,
    account: &AccountId,
    thresholds: &[ThresholdRecord],
) -> Result<Vec<(SpendLimitId, Credits)>, Fail> {
    if !thresholds.iter().any(|t| t.level.limit().is_some()) {
        return Ok(Vec::new());
    }
    let sql = "SELECT id, credits_hundredths FROM spend_limits WHERE account_id = $1";
    let mut limits = Vec::new();
    for row in sql::rows(conn, sql, vec![account.as_str().into()]).await? {
        let id: String = row.try_get("", "id")?;
        let credits: i64 = row.try_get("", "credits_hundredths")?;
        let bad = |e: &dyn std::fmt::Display| Fail::Store(corrupt("spend_limits", &id, e));
        let credits = Credits::from_hundredths(credits).map_err(|e| bad(&e))?;
        limits.push((SpendLimitId::new(id.clone()).map_err(|e| bad(&e))?, credits));
    }
    Ok(limits)
}

/// Whether `kind` is a posting that makes a grant lot (its lot is written after it, so it is
/// the last grant the crossings of its own posting are taken from).
fn grants(posting: &CreditTransaction) -> bool {
    !posting.amount.is_decrease()
        && matches!(
            posting.kind,
            TransactionKind::PurchaseGrant
                | TransactionKind::SubscriptionGrant
                | TransactionKind::AdminAdjustment
        )
}

/// Add to `told` the crossings of `posting`, just written to an account that has thresholds
/// (the balance row said so), in the posting's transaction.
pub(crate) async fn tell(
    tx: &DatabaseTransaction,
    posting: &CreditTransaction,
    told: &mut Outbox,
) -> Result<(), Fail> {
    // An automatic top-up rule is counted in `threshold_count` too.
    crate::top_ups::request(tx, posting, told).await?;
    let thresholds = read(tx, &posting.account_id).await?;
    if thresholds.is_empty() {
        return Ok(());
    }
    let last_grant = if grants(posting) {
        Some(posting.amount.magnitude())
    } else if thresholds
        .iter()
        .any(|t| matches!(t.level, ThresholdLevel::PercentOfGrant(_)))
    {
        last_grant(tx, &posting.account_id).await?
    } else {
        None
    };
    let limits = limit_credits(tx, &posting.account_id, &thresholds).await?;
    let levels: Vec<(ThresholdId, ThresholdLevel)> =
        thresholds.into_iter().map(|t| (t.id, t.level)).collect();
    let bases = LevelBases { last_grant, limits };
    told.extend(host_events::threshold_crossings(&levels, &bases, posting));
    Ok(())
}

/// Lock `account`'s balance row (created empty if it has none), the lock every posting takes,
/// and move its `threshold_count` by `delta`.
async fn count_thresholds(
    tx: &DatabaseTransaction,
    account: &AccountId,
    delta: i64,
    now: Timestamp,
) -> Result<(), Fail> {
    let sql = "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
               updated_at, threshold_count) VALUES ($1, 0, 0, $2, $3) ON CONFLICT (account_id) \
               DO UPDATE SET threshold_count = credit_balances.threshold_count + $3";
    let values = vec![
        account.as_str().into(),
        now.unix_millis().into(),
        delta.into(),
    ];
    sql::execute(tx, sql, values).await?;
    Ok(())
}

async fn add_in(
    tx: &DatabaseTransaction,
    new: &ThresholdRecord,
) -> Result<End<Result<ThresholdRecord, AddThresholdError>>, Fail> {
    count_thresholds(tx, &new.account_id, 0, new.created_at).await?;
    let sql = "SELECT COUNT(*) AS n FROM balance_thresholds WHERE account_id = $1";
    let n = sql::one_i64(tx, sql, vec![new.account_id.as_str().into()], "n").await?;
    if usize::try_from(n.unwrap_or(0)).unwrap_or(usize::MAX) >= MAX_THRESHOLDS_PER_ACCOUNT {
        return Ok(End::Rollback(Err(AddThresholdError::TooMany(
            MAX_THRESHOLDS_PER_ACCOUNT,
        ))));
    }
    if let Some(limit) = new.level.limit() {
        let sql = "SELECT COUNT(*) AS n FROM spend_limits WHERE id = $1 AND account_id = $2";
        let values = vec![limit.as_str().into(), new.account_id.as_str().into()];
        if sql::one_i64(tx, sql, values, "n").await?.unwrap_or(0) == 0 {
            return Ok(End::Rollback(Err(AddThresholdError::NoSuchLimit)));
        }
    }
    let (credits, percent, of_limit) = match &new.level {
        ThresholdLevel::Credits(c) => (Some(c.hundredths()), None, None),
        ThresholdLevel::PercentOfGrant(p) => (None, Some(i32::from(*p)), None),
        ThresholdLevel::PercentOfLimit { limit, percent } => {
            (None, None, Some((i32::from(*percent), limit.as_str())))
        }
    };
    let sql = format!(
        "INSERT INTO balance_thresholds ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
    );
    let values = vec![
        new.id.as_str().into(),
        new.account_id.as_str().into(),
        credits.into(),
        percent.into(),
        new.created_by
            .as_ref()
            .map(|u| u.as_str().to_owned())
            .into(),
        new.created_at.unix_millis().into(),
        of_limit.map(|(p, _)| p).into(),
        of_limit.map(|(_, limit)| limit.to_owned()).into(),
    ];
    sql::execute(tx, &sql, values).await?;
    count_thresholds(tx, &new.account_id, 1, new.created_at).await?;
    Ok(End::Commit(Ok(new.clone())))
}

async fn remove_in(
    tx: &DatabaseTransaction,
    account: &AccountId,
    id: &ThresholdId,
) -> Result<End<bool>, Fail> {
    // The balance row first, as every posting takes it.
    let lock = "UPDATE credit_balances SET threshold_count = threshold_count WHERE account_id = $1";
    sql::execute(tx, lock, vec![account.as_str().into()]).await?;
    let sql = "DELETE FROM balance_thresholds WHERE id = $1 AND account_id = $2";
    let values = vec![id.as_str().into(), account.as_str().into()];
    if sql::execute(tx, sql, values).await? == 0 {
        return Ok(End::Rollback(false));
    }
    let sql = "UPDATE credit_balances SET threshold_count = threshold_count - 1 \
               WHERE account_id = $1";
    sql::execute(tx, sql, vec![account.as_str().into()]).await?;
    Ok(End::Commit(true))
}

#[async_trait]
impl ThresholdStore for SeaOrmStore {
    async fn balance_thresholds(
        &self,
        account: &AccountId,
    ) -> Result<AccountThresholds, StoreError> {
        self.retry
            .run("balance_thresholds", || async {
                let items = read(&self.db, account).await?;
                let last_grant = last_grant(&self.db, account).await?;
                let limits = limit_credits(&self.db, account, &items).await?;
                let balance = crate::ledger::read_balance(&self.db, account).await?;
                Ok(AccountThresholds {
                    items,
                    bases: LevelBases { last_grant, limits },
                    balance,
                })
            })
            .await
    }

    async fn add_balance_threshold(
        &self,
        new: &ThresholdRecord,
    ) -> Result<ThresholdRecord, AddThresholdError> {
        self.retry
            .run("add_balance_threshold", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = add_in(&tx, new).await;
                sql::finish(tx, body).await
            })
            .await?
    }

    async fn remove_balance_threshold(
        &self,
        account: &AccountId,
        id: &ThresholdId,
    ) -> Result<bool, StoreError> {
        self.retry
            .run("remove_balance_threshold", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = remove_in(&tx, account, id).await;
                sql::finish(tx, body).await
            })
            .await
    }
}
