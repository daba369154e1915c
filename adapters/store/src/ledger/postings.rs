//! The primitives every ledger operation is built from, all inside a caller's transaction:
//! balance changes as single conditional statements, the append-only transaction insert, and
//! drawing grant lots down in spend order.
//!
//! One spend rule: every decrease is decided by the domain (`decide_spend`, or `post` through
//! [`DecidedPosting`] for a settle's overrun, a clawback, an expiry) on the balance read under
//! the balance row's lock ([`lock_balance`], [`lock_balance_with_lots`]), before anything is
//! written; [`post_decided`] then writes it with the database's guard still in place (the
//! conditional decrement, the `CHECK`) and checks the guard's answer against the decision. A
//! guard that refuses, or leaves another balance than, what was decided is
//! [`StoreError::SpendDisagreement`]: never relabelled as insufficient, never run again.
//!
//! Lock order (PostgreSQL), the same in every operation so that they cannot deadlock:
//! order → subscription → reservation → balance row → grant lots. Every statement that changes a
//! lot runs after its user's balance row is locked, so the balance lock serializes a user's lots.

use application::ports::{CreditTransaction, StoreError, UsageContext};
use domain::ledger::{self, DecidedPosting, GrantLot, SpendOrder, allocate_spend_in};
use domain::{AccountId, CreditDelta, Credits, Timestamp, TransactionKind, UserId};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, FromQueryResult};

use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::{
    LOT_COLUMNS, LotRow, TRANSACTION_COLUMNS, TransactionRow, tokens_value, usage_tokens_value,
};
use crate::sql;
use crate::thresholds;

/// One transaction to append.
pub(crate) struct Posting<'a> {
    /// Whose balance.
    pub(crate) user: &'a AccountId,
    /// The member of a team's account it is spent by or returned to.
    pub(crate) member: Option<&'a UserId>,
    /// Its kind.
    pub(crate) kind: TransactionKind,
    /// Its signed amount.
    pub(crate) amount: CreditDelta,
    /// What it relates to.
    pub(crate) context: &'a UsageContext,
    /// `(idempotency key, request hash)` when the posting is keyed (UNIQUE per user and kind).
    pub(crate) key: Option<(&'a str, &'a str)>,
    /// When.
    pub(crate) now: Timestamp,
}

/// A balance read from the database, as credits (`Corrupt` if it is not a valid amount).
pub(super) fn credits(hundredths: i64) -> Result<Credits, Fail> {
    Credits::from_hundredths(hundredths)
        .map_err(|e| Fail::Store(StoreError::Corrupt(format!("credit_balances: {e}"))))
}

/// The balance, read without a lock (0 for a user without a balance row).
pub(crate) async fn read_balance<C: ConnectionTrait>(
    conn: &C,
    user: &AccountId,
) -> Result<Credits, Fail> {
    let sql = "SELECT balance_hundredths FROM credit_balances WHERE account_id = $1";
    let balance = sql::one_i64(conn, sql, vec![user.as_str().into()], "balance_hundredths").await?;
    credits(balance.unwrap_or(0))
}

/// The balance, with the row locked until the end of the transaction on PostgreSQL (on SQLite
/// the transaction already holds the write lock): what a decrease is decided from (a hold, a
/// clawback's and an expiry's take, an administrator's grant's limit); the change that follows
/// is still guarded ([`post_decided`]).
pub(crate) async fn lock_balance(
    tx: &DatabaseTransaction,
    user: &AccountId,
) -> Result<Credits, Fail> {
    Ok(lock_balance_limited(tx, user).await?.0)
}

/// [`lock_balance`], and whether the account has spend limits (`credit_balances.limit_count`).
pub(crate) async fn lock_balance_limited(
    tx: &DatabaseTransaction,
    user: &AccountId,
) -> Result<(Credits, bool), Fail> {
    let sql = format!(
        "SELECT balance_hundredths, limit_count FROM credit_balances WHERE account_id = $1{}",
        sql::for_update(tx)
    );
    let row = sql::rows(tx, &sql, vec![user.as_str().into()]).await?;
    let Some(row) = row.first() else {
        return Ok((Credits::ZERO, false));
    };
    let balance: i64 = row.try_get("", "balance_hundredths")?;
    let limits: i32 = row.try_get("", "limit_count")?;
    Ok((credits(balance)?, limits > 0))
}

/// The balance and the user's spendable lots in one statement, with the balance row locked as
/// by [`lock_balance`] (`FOR UPDATE OF b`: the balance row only; the lots change only under
/// it): what a spend that draws lots down is decided from, and the lots it draws
/// ([`draw_from`]). A user without a balance row has 0 and no lots.
pub(crate) async fn lock_balance_with_lots(
    tx: &DatabaseTransaction,
    user: &AccountId,
) -> Result<(Credits, Vec<GrantLot>), Fail> {
    let (balance, lots, _) = lock_balance_lots_limited(tx, user).await?;
    Ok((balance, lots))
}

/// `user`'s lots that still hold credits and have not expired, without locks (a report's
/// read).
pub(crate) async fn grant_lots<C: ConnectionTrait>(
    conn: &C,
    user: &AccountId,
) -> Result<Vec<GrantLot>, Fail> {
    let sql = format!(
        "SELECT {LOT_COLUMNS} FROM credit_grants g WHERE g.account_id = $1 AND NOT g.expired \
         AND g.remaining_hundredths > 0"
    );
    let mut lots = Vec::new();
    for row in sql::rows(conn, &sql, vec![user.as_str().into()]).await? {
        lots.push(LotRow::from_query_result(&row, "")?.into_domain()?);
    }
    Ok(lots)
}

/// [`lock_balance_with_lots`], and whether the account has spend limits
/// (`credit_balances.limit_count`, on the row read anyway).
pub(crate) async fn lock_balance_lots_limited(
    tx: &DatabaseTransaction,
    user: &AccountId,
) -> Result<(Credits, Vec<GrantLot>, bool), Fail> {
    // `NOT g.expired`, not `g.expired = FALSE`: SQLite would take the equality for the better
    // index and walk every unexpired lot of every user (credit_grants_due) instead of this
    // user's.
    let lock = match tx.get_database_backend() {
        DbBackend::Postgres => " FOR UPDATE OF b",
        _ => "",
    };
    let sql = format!(
        "SELECT b.balance_hundredths, b.limit_count, {LOT_COLUMNS} \
         FROM credit_balances b LEFT JOIN credit_grants g ON g.account_id = b.account_id \
         AND NOT g.expired AND g.remaining_hundredths > 0 WHERE b.account_id = $1{lock}"
    );
    let rows = sql::rows(tx, &sql, vec![user.as_str().into()]).await?;
    let mut balance = 0;
    let mut limits: i32 = 0;
    let mut lots = Vec::new();
    for row in rows {
        balance = row.try_get("", "balance_hundredths")?;
        limits = row.try_get("", "limit_count")?;
        if row.try_get::<Option<i64>>("", "id")?.is_some() {
            lots.push(LotRow::from_query_result(&row, "")?.into_domain()?);
        }
    }
    Ok((credits(balance)?, lots, limits > 0))
}

/// The balance a posting left, and whether the account has balance thresholds
/// (`credit_balances.threshold_count`, returned by the statement that wrote the balance).
type Written = (Credits, bool);

/// Add `amount`: one upsert that also counts the transaction; returns the balance after it.
async fn credit(
    tx: &DatabaseTransaction,
    user: &AccountId,
    amount: Credits,
    now: Timestamp,
) -> Result<Written, Fail> {
    let sql = "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, updated_at) \
        VALUES ($1, $2, 1, $3) ON CONFLICT (account_id) DO UPDATE SET \
        balance_hundredths = credit_balances.balance_hundredths + excluded.balance_hundredths, \
        transaction_count = credit_balances.transaction_count + 1, updated_at = excluded.updated_at \
        RETURNING balance_hundredths, threshold_count";
    let values = vec![
        user.as_str().into(),
        amount.hundredths().into(),
        now.unix_millis().into(),
    ];
    let after = written(tx, sql, values).await?;
    after.ok_or_else(|| {
        Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "the balance upsert returned no row"
        )))
    })
}

/// Run a balance write that returns the balance and the threshold count.
async fn written(
    tx: &DatabaseTransaction,
    sql: &str,
    values: Vec<sea_orm::Value>,
) -> Result<Option<Written>, Fail> {
    let rows = sql::rows(tx, sql, values).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let balance: i64 = row.try_get("", "balance_hundredths")?;
    let thresholds: i32 = row.try_get("", "threshold_count")?;
    Ok(Some((credits(balance)?, thresholds > 0)))
}

/// Remove `amount` if the balance covers it: one conditional decrement that also counts the
/// transaction; `None` (nothing changed) when it does not.
async fn debit(
    tx: &DatabaseTransaction,
    user: &AccountId,
    amount: Credits,
    now: Timestamp,
) -> Result<Option<Written>, Fail> {
    let sql = "UPDATE credit_balances SET balance_hundredths = balance_hundredths - $2, \
        transaction_count = transaction_count + 1, updated_at = $3 \
        WHERE account_id = $1 AND balance_hundredths >= $2 \
        RETURNING balance_hundredths, threshold_count";
    let values = vec![
        user.as_str().into(),
        amount.hundredths().into(),
        now.unix_millis().into(),
    ];
    written(tx, sql, values).await
}

/// Add `posting.amount` (an increase: a grant, a release) and append the transaction; the
/// crossings of the account's balance thresholds it makes go to `told`. A duplicate key (a
/// concurrent request with the same key committed first) is [`Fail::Retry`]: run again, the
/// operation finds the winner's transaction and replays it.
pub(crate) async fn post_increase(
    tx: &DatabaseTransaction,
    posting: &Posting<'_>,
    told: &mut Outbox,
) -> Result<CreditTransaction, Fail> {
    if posting.amount.is_decrease() {
        return Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "a {} of {} is a decrease, posted only as decided under the balance lock",
            posting.kind,
            posting.amount
        ))));
    }
    let (after, watched) =
        credit(tx, posting.user, posting.amount.magnitude(), posting.now).await?;
    check_against_domain(posting, after)?;
    let written = append(tx, posting, after).await?;
    if watched {
        thresholds::tell(tx, &written, told).await?;
    }
    Ok(written)
}

/// Write `decided`, a balance change the domain decided on the balance this transaction locked
/// (`decided.before`), and append its transaction: the guarded statement (the conditional
/// decrement for a decrease, the upsert under the `CHECK` for an increase), whose answer must
/// be the decided balance ([`DecidedPosting::check`]), else [`StoreError::SpendDisagreement`]
/// and nothing is kept. A duplicate key is [`Fail::Retry`], as for [`post_increase`]; the
/// crossings of the account's balance thresholds go to `told`, as there.
pub(crate) async fn post_decided(
    tx: &DatabaseTransaction,
    posting: &Posting<'_>,
    decided: DecidedPosting,
    told: &mut Outbox,
) -> Result<CreditTransaction, Fail> {
    assert!(
        decided.kind == posting.kind && decided.amount == posting.amount,
        "a decided posting writes what was decided"
    );
    let magnitude = posting.amount.magnitude();
    let guarded = if posting.amount.is_decrease() {
        debit(tx, posting.user, magnitude, posting.now).await?
    } else {
        Some(credit(tx, posting.user, magnitude, posting.now).await?)
    };
    let watched = guarded.is_some_and(|(_, watched)| watched);
    let after = decided
        .check(guarded.map(|(after, _)| after))
        .map_err(|disagreement| {
            Fail::Store(StoreError::SpendDisagreement {
                account: posting.user.clone(),
                disagreement,
            })
        })?;
    let written = append(tx, posting, after).await?;
    assert_moved_from(decided.before, &written);
    if watched {
        thresholds::tell(tx, &written, told).await?;
    }
    Ok(written)
}

/// Append the transaction of a balance change that left `after`.
async fn append(
    tx: &DatabaseTransaction,
    posting: &Posting<'_>,
    after: Credits,
) -> Result<CreditTransaction, Fail> {
    let written = insert_transaction(tx, posting, after)
        .await?
        .ok_or(Fail::Retry(
            "a concurrent request with the same key committed first",
        ))?;
    assert!(
        written.kind == posting.kind
            && written.amount == posting.amount
            && written.balance_after == after,
        "the transaction row records the posting and the balance it left"
    );
    Ok(written)
}

/// Pair assertion for a posting made under the balance row's lock ([`lock_balance`]): the
/// balance it left is the locked balance moved by exactly its amount.
pub(crate) fn assert_moved_from(before: Credits, written: &CreditTransaction) {
    assert_eq!(
        written.balance_after.hundredths(),
        before.hundredths() + written.amount.hundredths(),
        "a posting under the balance lock moves the balance by exactly its amount"
    );
}

/// Pair assertion: the database's arithmetic must agree with the domain's rule for this kind.
fn check_against_domain(posting: &Posting<'_>, after: Credits) -> Result<(), Fail> {
    let before = Credits::from_hundredths(after.hundredths() - posting.amount.hundredths());
    let agrees = before.is_ok_and(|b| ledger::post(b, posting.kind, posting.amount) == Ok(after));
    if agrees {
        Ok(())
    } else {
        Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "a {} of {} left the balance at {after}, which the ledger rules refuse",
            posting.kind,
            posting.amount
        ))))
    }
}

async fn insert_transaction(
    tx: &DatabaseTransaction,
    posting: &Posting<'_>,
    after: Credits,
) -> Result<Option<CreditTransaction>, Fail> {
    let sql = format!(
        "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, balance_after_hundredths, \
         order_id, subscription_id, reservation_id, feature, model, tokens, note, idempotency_key, \
         request_hash, created_at, member_id, api_key_id, usage_tokens, price_from, \
         cost_basis_millionths, grant_category) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
         $18, $19, $20) \
         ON CONFLICT DO NOTHING RETURNING {TRANSACTION_COLUMNS}"
    );
    let c = posting.context;
    let values = vec![
        posting.user.as_str().into(),
        posting.kind.code().into(),
        posting.amount.hundredths().into(),
        after.hundredths().into(),
        c.order_id.as_ref().map(|id| id.as_str().to_owned()).into(),
        c.subscription_id
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .into(),
        c.reservation_id
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .into(),
        c.feature.clone().into(),
        c.model.clone().into(),
        tokens_value(c.tokens)?.into(),
        c.note.clone().into(),
        posting.key.map(|(key, _)| key.to_owned()).into(),
        posting.key.map(|(_, hash)| hash.to_owned()).into(),
        posting.now.unix_millis().into(),
        posting.member.map(|m| m.as_str().to_owned()).into(),
        c.api_key_id.clone().into(),
        usage_tokens_value(c.breakdown.as_ref()).into(),
        c.price_from.map(Timestamp::unix_millis).into(),
        c.cost_basis_millionths.into(),
        c.grant_category.map(|g| g.code().to_owned()).into(),
    ];
    let row: Option<TransactionRow> = sql::one(tx, &sql, values).await?;
    Ok(row.map(TransactionRow::into_domain).transpose()?)
}

/// The transaction `user` wrote with `kind` under idempotency key `key`, if any.
pub(crate) async fn keyed_transaction<C: ConnectionTrait>(
    conn: &C,
    user: &AccountId,
    kind: TransactionKind,
    key: &str,
) -> Result<Option<(CreditTransaction, Option<String>)>, Fail> {
    let sql = format!(
        "SELECT {TRANSACTION_COLUMNS} FROM credit_transactions \
         WHERE account_id = $1 AND kind = $2 AND idempotency_key = $3"
    );
    let values = vec![user.as_str().into(), kind.code().into(), key.into()];
    let Some(row) = sql::one::<TransactionRow, _>(conn, &sql, values).await? else {
        return Ok(None);
    };
    let hash = row.request_hash.clone();
    Ok(Some((row.into_domain()?, hash)))
}

/// Draw `amount` from `lots` (`user`'s spendable lots, read under their balance row's lock:
/// [`lock_balance_with_lots`]) in the domain's spend order (`order`: [`allocate_spend_in`]). Lots
/// that hold less than `amount` in total are drawn to zero and the rest stays unattributed.
/// Each draw is conditional; a lot that changed under the lock means the lock order was broken
/// somewhere, and the operation runs again.
pub(crate) async fn draw_from(
    tx: &DatabaseTransaction,
    (user, order): (&AccountId, SpendOrder),
    lots: &[GrantLot],
    amount: Credits,
) -> Result<(), Fail> {
    for (id, take) in allocate_spend_in(order, lots, amount) {
        // The owner too: a lot is found by its account first (docs/scaling.md).
        let sql = "UPDATE credit_grants SET remaining_hundredths = remaining_hundredths - $2 \
                   WHERE id = $1 AND account_id = $3 AND remaining_hundredths >= $2";
        let values = vec![id.into(), take.hundredths().into(), user.as_str().into()];
        if sql::execute(tx, sql, values).await? != 1 {
            return Err(Fail::Retry("a grant lot changed during a spend"));
        }
    }
    Ok(())
}
