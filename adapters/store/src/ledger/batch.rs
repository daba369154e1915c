//! Many consumptions as one set of statements, for group commit.
//!
//! Run one by one, each consumption of a group costs about six statements (savepoint, key
//! lookup, conditional decrement, ledger insert, lot read, lot draw-down), and the group's
//! single writer issues them one after the other: on PostgreSQL each is a network round trip,
//! and the writer ends up slower than eight connections working side by side. [`consume_many`]
//! decides a whole run of consumptions from three reads and writes them with three statements,
//! whatever their number:
//!
//! 1. read, with the rows locked on PostgreSQL (`FOR UPDATE`, in user order, the order every
//!    group takes them in): the balances of the run's users; then the consumptions already
//!    written under the run's keys, and the users' spendable lots (both serialized by the
//!    balance locks, like every lot change: see `postings`);
//! 2. decide each consumption in arrival order with the same rules as [`super::spend::consume`]
//!    (a known key replays or conflicts, a balance that does not cover the cost refuses with the
//!    balance as it stands after the earlier consumptions of the run, else the domain's posting
//!    rule and spend order), against the balances and lots as the earlier ones left them;
//! 3. write the fresh ones: one multi-row ledger insert, one decrement per user (a single
//!    `UPDATE … FROM (VALUES …)`, still conditional on the balance covering it) and one
//!    draw-down per lot (likewise conditional).
//!
//! Each statement's result is checked against the decision (rows written, balances after,
//! lots changed). Any difference, like any database error, is a [`Fail`]: the writer rolls the
//! run back to its savepoint and every command of it runs alone on the ordinary path, so a
//! batch never acknowledges anything the one-by-one path would not have.

use std::collections::{BTreeSet, HashMap};

use application::ports::{ConsumeCommand, CreditTransaction, Replay, StoreError};
use domain::ledger::{self, GrantLot, allocate_spend};
use domain::{Credits, TransactionKind};
use sea_orm::{ConnectionTrait, DatabaseTransaction, FromQueryResult, QueryResult, Value};

use super::Spent;
use crate::retry::Fail;
use crate::rows::{LOT_COLUMNS, LotRow, TRANSACTION_COLUMNS, TransactionRow, tokens_value};
use crate::sql::{self, End};

/// What one consumption of a run decided.
pub(crate) type Decided = Result<End<Spent<(CreditTransaction, Replay)>>, Fail>;

/// How one consumption ends, before the writes (a fresh one's transaction comes from the insert).
enum Decision {
    /// Written by this run: the `n`-th fresh posting.
    Fresh(usize),
    /// The key was written by an earlier request with the same body.
    Replay(CreditTransaction),
    /// The key was written earlier in this run with the same body: replays the `n`-th posting.
    ReplayOfFresh(usize),
    /// Decided without writing (insufficient, key conflict, a malformed command).
    Refused(Decided),
}

/// A key seen so far: in the database, or fresh in this run.
enum Seen {
    Stored(CreditTransaction, Option<String>),
    Fresh(usize, String),
}

/// One consumption to write.
struct Fresh<'a> {
    command: &'a ConsumeCommand,
    balance_after: i64,
}

/// Decide and write `commands` (consumptions, in arrival order) inside `tx`; one outcome per
/// command, in the same order. An `Err` means nothing is decided: undo the run's writes and run
/// every command alone.
pub(crate) async fn consume_many(
    tx: &DatabaseTransaction,
    commands: &[&ConsumeCommand],
) -> Result<Vec<Decided>, Fail> {
    let users: BTreeSet<&str> = commands.iter().map(|c| c.user_id.as_str()).collect();
    let mut run = Run {
        balances: lock_balances(tx, &users).await?,
        seen: stored_keys(tx, &users, commands).await?,
        lots: spendable_lots(tx, &users).await?,
        takes: Vec::new(),
        fresh: Vec::new(),
    };
    let mut decisions = Vec::with_capacity(commands.len());
    for c in commands {
        decisions.push(run.decide(c)?);
    }
    let written = run.write(tx).await?;
    Ok(decisions
        .into_iter()
        .map(|decision| match decision {
            Decision::Fresh(n) => Ok(End::Commit(Spent::Done((
                written[n].clone(),
                Replay::Fresh,
            )))),
            Decision::ReplayOfFresh(n) => Ok(End::Rollback(Spent::Done((
                written[n].clone(),
                Replay::Replayed,
            )))),
            Decision::Replay(earlier) => {
                Ok(End::Rollback(Spent::Done((earlier, Replay::Replayed))))
            }
            Decision::Refused(outcome) => outcome,
        })
        .collect())
}

/// The users' current balances and lots, as the run changes them.
type Balances = HashMap<String, Balance>;

/// One user's balance row as the run has left it so far.
#[derive(Debug, Clone, Copy, Default)]
struct Balance {
    /// `None`: the user has no balance row (nothing was ever granted).
    hundredths: Option<i64>,
    /// What the run takes from it.
    debited: i64,
    /// Transactions the run adds.
    postings: i64,
    /// The `updated_at` of the run's last posting.
    updated_at: i64,
}

/// The run's state: what it read, as its decisions so far have changed it.
struct Run<'a> {
    balances: Balances,
    seen: HashMap<(String, String), Seen>,
    lots: HashMap<String, Vec<GrantLot>>,
    /// `(lot id, hundredths)` drawn, in decision order.
    takes: Vec<(i64, i64)>,
    fresh: Vec<Fresh<'a>>,
}

impl<'a> Run<'a> {
    fn decide(&mut self, c: &'a ConsumeCommand) -> Result<Decision, Fail> {
        let Run {
            balances,
            seen,
            lots,
            takes,
            fresh,
        } = self;
        if c.amount.is_zero() {
            return Ok(Decision::Refused(Err(Fail::Store(StoreError::Unexpected(
                anyhow::anyhow!("a consumption of zero credits"),
            )))));
        }
        let user = c.user_id.as_str();
        let hash = c.idempotency.request_hash.as_str();
        let key = (user.to_owned(), c.idempotency.key.as_str().to_owned());
        match seen.get(&key) {
            Some(Seen::Stored(earlier, stored)) => {
                return Ok(if stored.as_deref() == Some(hash) {
                    Decision::Replay(earlier.clone())
                } else {
                    Decision::Refused(Ok(End::Rollback(Spent::KeyConflict)))
                });
            }
            Some(Seen::Fresh(n, stored)) => {
                return Ok(if stored == hash {
                    Decision::ReplayOfFresh(*n)
                } else {
                    Decision::Refused(Ok(End::Rollback(Spent::KeyConflict)))
                });
            }
            None => {}
        }
        let balance = balances.entry(user.to_owned()).or_default();
        let amount = c.amount.hundredths();
        let Some(before) = balance.hundredths.filter(|b| *b >= amount) else {
            let available = to_credits(balance.hundredths.unwrap_or(0))?;
            return Ok(Decision::Refused(Ok(End::Rollback(Spent::Insufficient {
                requested: c.amount,
                available,
            }))));
        };
        // The domain's posting rule must agree with the arithmetic the UPDATE will do.
        let after = ledger::post(
            to_credits(before)?,
            TransactionKind::Consumption,
            c.amount.as_decrease(),
        )
        .map_err(|e| Fail::Store(StoreError::Unexpected(anyhow::anyhow!("{e}"))))?;
        balance.hundredths = Some(after.hundredths());
        balance.debited += amount;
        balance.postings += 1;
        balance.updated_at = c.now.unix_millis();
        if let Some(user_lots) = lots.get_mut(user) {
            for (id, take) in allocate_spend(user_lots, c.amount) {
                takes.push((id, take.hundredths()));
                if let Some(lot) = user_lots.iter_mut().find(|l| l.id == id) {
                    lot.remaining = lot
                        .remaining
                        .checked_sub(take)
                        .map_err(|_| Fail::Retry("a lot drawn beyond what it holds"))?;
                }
            }
        }
        let n = fresh.len();
        fresh.push(Fresh {
            command: c,
            balance_after: after.hundredths(),
        });
        seen.insert(key, Seen::Fresh(n, hash.to_owned()));
        Ok(Decision::Fresh(n))
    }

    /// Write the fresh postings, the balances and the lot draw-downs; the written transactions, in
    /// posting order.
    async fn write(&self, tx: &DatabaseTransaction) -> Result<Vec<CreditTransaction>, Fail> {
        if self.fresh.is_empty() {
            return Ok(Vec::new());
        }
        let written = insert_postings(tx, &self.fresh).await?;
        debit_balances(tx, &self.balances).await?;
        draw_down(tx, &self.takes).await?;
        Ok(written)
    }
}

fn to_credits(hundredths: i64) -> Result<Credits, Fail> {
    Credits::from_hundredths(hundredths)
        .map_err(|e| Fail::Store(StoreError::Corrupt(format!("credit_balances: {e}"))))
}

/// `$first, $first+1, …` for `count` values.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($1, $2, $3), ($4, $5, $6), …`: `rows` tuples of `width` placeholders.
fn tuples(rows: usize, width: usize) -> String {
    (0..rows)
        .map(|r| format!("({})", placeholders(r * width + 1, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn lock_balances(tx: &DatabaseTransaction, users: &BTreeSet<&str>) -> Result<Balances, Fail> {
    let sql = format!(
        "SELECT user_id, balance_hundredths FROM credit_balances WHERE user_id IN ({}) \
         ORDER BY user_id{}",
        placeholders(1, users.len()),
        sql::for_update(tx)
    );
    let values: Vec<Value> = users.iter().map(|u| (*u).into()).collect();
    let rows = query(tx, &sql, values).await?;
    let mut balances = Balances::new();
    for row in rows {
        let user: String = row.try_get("", "user_id")?;
        let hundredths: i64 = row.try_get("", "balance_hundredths")?;
        balances.insert(
            user,
            Balance {
                hundredths: Some(hundredths),
                ..Balance::default()
            },
        );
    }
    Ok(balances)
}

async fn stored_keys(
    tx: &DatabaseTransaction,
    users: &BTreeSet<&str>,
    commands: &[&ConsumeCommand],
) -> Result<HashMap<(String, String), Seen>, Fail> {
    let keys: BTreeSet<&str> = commands
        .iter()
        .map(|c| c.idempotency.key.as_str())
        .collect();
    let sql = format!(
        "SELECT idempotency_key, {TRANSACTION_COLUMNS} FROM credit_transactions \
         WHERE kind = $1 AND user_id IN ({}) AND idempotency_key IN ({})",
        placeholders(2, users.len()),
        placeholders(2 + users.len(), keys.len())
    );
    let mut values: Vec<Value> = vec![TransactionKind::Consumption.code().into()];
    values.extend(users.iter().map(|u| Value::from(*u)));
    values.extend(keys.iter().map(|k| Value::from(*k)));
    let mut seen = HashMap::new();
    for row in query(tx, &sql, values).await? {
        let key: String = row.try_get("", "idempotency_key")?;
        let stored = TransactionRow::from_query_result(&row, "")?;
        let hash = stored.request_hash.clone();
        let stored = stored.into_domain()?;
        seen.insert(
            (stored.user_id.as_str().to_owned(), key),
            Seen::Stored(stored, hash),
        );
    }
    Ok(seen)
}

async fn spendable_lots(
    tx: &DatabaseTransaction,
    users: &BTreeSet<&str>,
) -> Result<HashMap<String, Vec<GrantLot>>, Fail> {
    let sql = format!(
        "SELECT user_id, {LOT_COLUMNS} FROM credit_grants \
         WHERE user_id IN ({}) AND expired = FALSE AND remaining_hundredths > 0",
        placeholders(1, users.len())
    );
    let values: Vec<Value> = users.iter().map(|u| (*u).into()).collect();
    let mut lots: HashMap<String, Vec<GrantLot>> = HashMap::new();
    for row in query(tx, &sql, values).await? {
        let user: String = row.try_get("", "user_id")?;
        let lot = LotRow::from_query_result(&row, "")?.into_domain()?;
        lots.entry(user).or_default().push(lot);
    }
    Ok(lots)
}

async fn query(
    tx: &DatabaseTransaction,
    sql: &str,
    values: Vec<Value>,
) -> Result<Vec<QueryResult>, Fail> {
    let statement = sea_orm::Statement::from_sql_and_values(tx.get_database_backend(), sql, values);
    Ok(tx.query_all_raw(statement).await?)
}

async fn insert_postings(
    tx: &DatabaseTransaction,
    fresh: &[Fresh<'_>],
) -> Result<Vec<CreditTransaction>, Fail> {
    const WIDTH: usize = 14;
    let sql = format!(
        "INSERT INTO credit_transactions (user_id, kind, amount_hundredths, \
         balance_after_hundredths, order_id, subscription_id, reservation_id, feature, model, \
         tokens, note, idempotency_key, request_hash, created_at) VALUES {} \
         ON CONFLICT DO NOTHING RETURNING idempotency_key, {TRANSACTION_COLUMNS}",
        tuples(fresh.len(), WIDTH)
    );
    let mut values: Vec<Value> = Vec::with_capacity(fresh.len() * WIDTH);
    for f in fresh {
        let c = f.command;
        let u = &c.context;
        values.extend([
            c.user_id.as_str().into(),
            TransactionKind::Consumption.code().into(),
            c.amount.as_decrease().hundredths().into(),
            f.balance_after.into(),
            u.order_id.as_ref().map(|id| id.as_str().to_owned()).into(),
            u.subscription_id
                .as_ref()
                .map(|id| id.as_str().to_owned())
                .into(),
            u.reservation_id
                .as_ref()
                .map(|id| id.as_str().to_owned())
                .into(),
            u.feature.clone().into(),
            u.model.clone().into(),
            tokens_value(u.tokens)?.into(),
            u.note.clone().into(),
            c.idempotency.key.as_str().to_owned().into(),
            c.idempotency.request_hash.clone().into(),
            c.now.unix_millis().into(),
        ]);
    }
    let mut by_key: HashMap<(String, String), CreditTransaction> = HashMap::new();
    for row in query(tx, &sql, values).await? {
        let key: String = row.try_get("", "idempotency_key")?;
        let written = TransactionRow::from_query_result(&row, "")?.into_domain()?;
        by_key.insert((written.user_id.as_str().to_owned(), key), written);
    }
    // A row missing here lost its key to a concurrent request: the one-by-one path replays it.
    fresh
        .iter()
        .map(|f| {
            let key = (
                f.command.user_id.as_str().to_owned(),
                f.command.idempotency.key.as_str().to_owned(),
            );
            match by_key.remove(&key) {
                Some(t) if t.balance_after.hundredths() == f.balance_after => Ok(t),
                Some(_) => Err(Fail::Retry("a batched posting's balance differs")),
                None => Err(Fail::Retry(
                    "a concurrent request with the same key committed first",
                )),
            }
        })
        .collect()
}

async fn debit_balances(tx: &DatabaseTransaction, balances: &Balances) -> Result<(), Fail> {
    let debits: Vec<(&String, &Balance)> =
        balances.iter().filter(|(_, b)| b.postings > 0).collect();
    let sql = format!(
        "WITH v(uid, amount, n, at) AS (VALUES {}) \
         UPDATE credit_balances SET balance_hundredths = balance_hundredths - v.amount, \
         transaction_count = transaction_count + v.n, updated_at = v.at \
         FROM v WHERE user_id = v.uid AND balance_hundredths >= v.amount \
         RETURNING user_id, balance_hundredths",
        tuples(debits.len(), 4)
    );
    let mut values: Vec<Value> = Vec::with_capacity(debits.len() * 4);
    for (user, b) in &debits {
        values.extend([
            user.as_str().into(),
            b.debited.into(),
            b.postings.into(),
            b.updated_at.into(),
        ]);
    }
    let rows = query(tx, &sql, values).await?;
    let mut changed = 0;
    for row in rows {
        let user: String = row.try_get("", "user_id")?;
        let after: i64 = row.try_get("", "balance_hundredths")?;
        if balances.get(&user).and_then(|b| b.hundredths) != Some(after) {
            return Err(Fail::Retry("a balance changed during a batched spend"));
        }
        changed += 1;
    }
    if changed == debits.len() {
        Ok(())
    } else {
        Err(Fail::Retry("a balance changed during a batched spend"))
    }
}

/// Draw each lot down by what the run took from it, each conditional on the lot holding it.
async fn draw_down(tx: &DatabaseTransaction, takes: &[(i64, i64)]) -> Result<(), Fail> {
    let mut per_lot: Vec<(i64, i64)> = Vec::new();
    for &(id, take) in takes {
        match per_lot.iter_mut().find(|(lot, _)| *lot == id) {
            Some((_, sum)) => *sum += take,
            None => per_lot.push((id, take)),
        }
    }
    if per_lot.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "WITH v(lot, take) AS (VALUES {}) \
         UPDATE credit_grants SET remaining_hundredths = remaining_hundredths - v.take \
         FROM v WHERE id = v.lot AND remaining_hundredths >= v.take",
        tuples(per_lot.len(), 2)
    );
    let values: Vec<Value> = per_lot
        .iter()
        .flat_map(|&(id, take)| [Value::from(id), Value::from(take)])
        .collect();
    let changed = sql::execute(tx, &sql, values).await?;
    if changed == per_lot.len() as u64 {
        Ok(())
    } else {
        Err(Fail::Retry("a grant lot changed during a batched spend"))
    }
}
