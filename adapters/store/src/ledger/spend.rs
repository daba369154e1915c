//! Spending now (`consume`) and administrators' signed corrections (`adjust`).

use application::host_events::HostEventKind;
use application::ports::{
    AdjustCommand, ConsumeCommand, CreditTransaction, GrantSource, LedgerEffect, Refusal, Replay,
    StoreError, UsageContext,
};
use domain::ledger::{self, DecidedPosting, LedgerError};
use domain::{
    AccountId, Credits, KeyReuse, SpendDecision, Timestamp, TransactionKind, UserId, WindowCount,
    count_spend, decide_spend,
};
use sea_orm::DatabaseTransaction;

use super::Spent;
use super::grants::{self, NewGrant};
use super::postings::{self, Posting};
use crate::accounts;
use crate::limits;
use crate::opt_in::Wanted;
use application::host_events;

use crate::Enc;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::sql::End;

/// Consume: replay a known key; else decide with the domain's spending rule (`decide_spend`)
/// on the balance locked for the rest of the transaction, then write what it decided (the
/// conditional decrement, checked against the decision: `postings::post_decided`), the ledger
/// row and the lot draw-down; `credits.consumed` is written with it when `wanted` (an endpoint
/// opted in).
pub(crate) async fn consume(
    tx: &DatabaseTransaction,
    c: &ConsumeCommand,
    wanted: Wanted,
    events: &Enc,
) -> Result<End<Spent<(CreditTransaction, Replay)>>, Fail> {
    if c.amount.is_zero() {
        return Err(zero_consumption());
    }
    // The key is looked up before the balance row is locked, so that a replay waits for no
    // lock and a fresh spend holds it no longer than its writes.
    if let Some(seen) = replay(tx, c).await? {
        return Ok(End::Rollback(seen));
    }
    let (balance, lots, limited) = postings::lock_balance_lots_limited(tx, &c.account_id).await?;
    // A team's member: their membership and limit, read after the balance row (one lock order
    // for every spend), decided before the balance; then the account's limits.
    let counted = match member_counted(tx, c).await? {
        Ok(counted) => counted,
        Err(refused) => return Ok(End::Rollback(refused)),
    };
    let limit_counts = match limits_counted(tx, c, limited).await? {
        Ok(counts) => counts,
        Err(answer) => return Ok(End::Rollback(answer)),
    };
    let spend = (
        TransactionKind::Consumption,
        c.amount,
        c.idempotency.request_hash.as_str(),
    );
    let decided = match decide(spend, &c.account_id, balance)? {
        Ok(decided) => decided,
        Err(available) => {
            // On PostgreSQL a concurrent request with this key may have committed while this one
            // waited for the balance row; its outcome is the answer, not "insufficient".
            if let Some(seen) = replay(tx, c).await? {
                return Ok(End::Rollback(seen));
            }
            return Ok(End::Rollback(Spent::Refused(Refusal::Insufficient {
                requested: c.amount,
                available,
            })));
        }
    };
    let key = c.idempotency.key.as_str();
    let posting = Posting {
        user: &c.account_id,
        member: c.member_id.as_ref(),
        kind: TransactionKind::Consumption,
        amount: c.amount.as_decrease(),
        context: &c.context,
        key: Some((key, c.idempotency.request_hash.as_str())),
        now: c.now,
    };
    let mut crossings = Outbox::default();
    let written = postings::post_decided(tx, &posting, decided, &mut crossings).await?;
    postings::draw_from(tx, (&c.account_id, c.spend_order), &lots, c.amount).await?;
    if let Some((member, count)) = counted {
        accounts::write_count(tx, &c.account_id, member, count).await?;
    }
    let spent = (&written, crossings, limit_counts.as_slice());
    tell_spent(tx, c, spent, wanted, events).await?;
    Ok(End::Commit(Spent::Done((written, Replay::Fresh))))
}

/// The events of a fresh spend, in its transaction: `credits.consumed` (when an endpoint opted
/// in), its crossings of the low-balance threshold, to zero and of the account's thresholds
/// (`crossings`), and the limits it reached.
async fn tell_spent(
    tx: &DatabaseTransaction,
    c: &ConsumeCommand,
    (written, crossings, limit_counts): (&CreditTransaction, Outbox, &[limits::LimitCount]),
    wanted: Wanted,
    events: &Enc,
) -> Result<(), Fail> {
    let mut told = Outbox::default();
    if wanted.wants(HostEventKind::CreditsConsumed) {
        told.push(host_events::consumed(written));
    }
    told.extend(host_events::balance_alerts(written, c.low_balance_below));
    told.extend(crossings);
    told.extend(limits::reached_events(limit_counts, written));
    told.write(tx, events).await?;
    Ok(())
}

/// What `c` counts against its account's limits (`limited`: the balance row says it has some),
/// or the answer when a hard limit refuses it: the refusal, unless a concurrent request with
/// `c`'s key committed while this one waited for the rows (its outcome is the answer).
async fn limits_counted(
    tx: &DatabaseTransaction,
    c: &ConsumeCommand,
    limited: bool,
) -> Result<Result<Vec<limits::LimitCount>, Spent<(CreditTransaction, Replay)>>, Fail> {
    let within = (&c.account_id, limited);
    let spend = c.context.spent_as(c.member_id.as_ref());
    match limits::count(tx, within, &spend, c.amount, c.now).await? {
        Ok(counts) => Ok(Ok(counts)),
        Err(refusal) => Ok(Err(replay(tx, c).await?.unwrap_or(Spent::Refused(refusal)))),
    }
}

/// The domain's spending rule (`decide_spend`, the one the grouped paths take too) for a
/// `kind` spend of `amount` (fingerprinted `hash`) from `user`'s locked `balance`, its key
/// already known to be unused:
/// the posting to write, or the balance that does not cover it.
pub(super) fn decide(
    (kind, amount, hash): (TransactionKind, Credits, &str),
    user: &AccountId,
    balance: Credits,
) -> Result<Result<DecidedPosting, Credits>, Fail> {
    match decide_spend(kind, amount, hash, None, balance) {
        Ok(SpendDecision::Post { after }) => {
            Ok(Ok(DecidedPosting::spend(kind, amount, balance, after)))
        }
        Ok(SpendDecision::Insufficient { available }) => Ok(Err(available)),
        Ok(SpendDecision::Reused(_)) => Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "a spend of {user} decided as a reused key without one"
        )))),
        Err(e) => Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "a {kind} of {amount} for {user}: {e}"
        )))),
    }
}

/// The member of `c` (on a team's account) and their count with `c` counted: `None` on a
/// personal account; the refusal (not a member, past the limit), unless a concurrent request
/// with `c`'s key committed while this one waited for the rows: its outcome is the answer.
async fn member_counted<'a>(
    tx: &DatabaseTransaction,
    c: &'a ConsumeCommand,
) -> Result<Result<Option<(&'a UserId, WindowCount)>, Spent<(CreditTransaction, Replay)>>, Fail> {
    let Some(member) = &c.member_id else {
        return Ok(Ok(None));
    };
    match count_member_spend(tx, &c.account_id, member, c.amount, c.now).await? {
        Ok((count, _)) => Ok(Ok(Some((member, count)))),
        Err(refusal) => Ok(Err(replay(tx, c).await?.unwrap_or(Spent::Refused(refusal)))),
    }
}

/// Count a spend of `amount` by `member` of `account` against their limit (`domain::count_spend`
/// on their row, locked): the count to write once the spend is written and the window it
/// counted in (`None` without a limit: nothing counted), or the refusal (not a member, or past
/// the limit).
pub(super) async fn count_member_spend(
    tx: &DatabaseTransaction,
    account: &AccountId,
    member: &UserId,
    amount: Credits,
    now: Timestamp,
) -> Result<Result<(WindowCount, Option<Timestamp>), Refusal>, Fail> {
    let Some(row) = accounts::locked_member(tx, account, member).await? else {
        return Ok(Err(Refusal::NotAMember));
    };
    Ok(count_spend(row.limit, row.count, amount, now)
        .map(|count| (count, row.limit.map(|_| count.start)))
        .map_err(Refusal::LimitReached))
}

/// The refusal of a consumption of nothing (the use case never asks for one).
pub(super) fn zero_consumption() -> Fail {
    Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
        "a consumption of zero credits"
    )))
}

async fn replay(
    tx: &DatabaseTransaction,
    c: &ConsumeCommand,
) -> Result<Option<Spent<(CreditTransaction, Replay)>>, Fail> {
    let key = c.idempotency.key.as_str();
    let found =
        postings::keyed_transaction(tx, &c.account_id, TransactionKind::Consumption, key).await?;
    Ok(found.map(|(earlier, hash)| {
        match KeyReuse::of(hash.as_deref(), &c.idempotency.request_hash) {
            KeyReuse::Replay => Spent::Done((earlier, Replay::Replayed)),
            KeyReuse::Conflict => Spent::Refused(Refusal::KeyConflict),
        }
    }))
}

/// The request fingerprint of an adjustment: same reference with another amount or note is a
/// different request.
pub(crate) fn adjust_hash(c: &AdjustCommand) -> String {
    match c.expires_at {
        // Without an expiry the hash is what it was before expiries existed.
        None => format!("{}|{}", c.amount.hundredths(), c.note),
        Some(at) => format!("{}|{}|{}", c.amount.hundredths(), c.note, at.unix_millis()),
    }
}

/// Adjust: keyed by `reference` (a second call with the same one is `Nothing`). An increase is
/// a grant lot with source `admin`/`reference`; a decrease spends like a consumption (decided
/// by the same rule on the locked balance), never below zero. Either is told to the host in `tx`.
pub(crate) async fn adjust(
    tx: &DatabaseTransaction,
    c: &AdjustCommand,
    events: &Enc,
) -> Result<End<Spent<LedgerEffect>>, Fail> {
    let hash = adjust_hash(c);
    if let Some(seen) = earlier_adjustment(tx, c, &hash).await? {
        return Ok(End::Rollback(seen));
    }
    if c.amount.hundredths() == 0 {
        return Ok(End::Rollback(Spent::Done(LedgerEffect::Nothing)));
    }
    let context = UsageContext {
        note: Some(c.note.clone()),
        ..UsageContext::default()
    };
    if !c.amount.is_decrease() {
        return grant_adjustment(tx, c, &hash, &context, events).await;
    }
    // A debit is a spend: decided like a consumption, on the locked balance.
    let requested = c.amount.magnitude();
    let kind = TransactionKind::AdminAdjustment;
    let (balance, lots) = postings::lock_balance_with_lots(tx, &c.account_id).await?;
    let decided = match decide((kind, requested, &hash), &c.account_id, balance)? {
        Ok(decided) => decided,
        Err(available) => {
            return Ok(End::Rollback(Spent::Refused(Refusal::Insufficient {
                requested,
                available,
            })));
        }
    };
    let posting = Posting {
        user: &c.account_id,
        member: None,
        kind,
        amount: c.amount,
        context: &context,
        key: Some((&c.reference, &hash)),
        now: c.now,
    };
    let mut crossings = Outbox::default();
    let written = postings::post_decided(tx, &posting, decided, &mut crossings).await?;
    postings::draw_from(tx, (&c.account_id, c.spend_order), &lots, requested).await?;
    let effect = LedgerEffect::Written(written);
    grants::tell(tx, &effect, events).await?;
    crossings.write(tx, events).await?;
    Ok(End::Commit(Spent::Done(effect)))
}

/// An administrator's grant: a lot with source `admin`/`reference`, if the balance can take it.
async fn grant_adjustment(
    tx: &DatabaseTransaction,
    c: &AdjustCommand,
    hash: &str,
    context: &UsageContext,
    events: &Enc,
) -> Result<End<Spent<LedgerEffect>>, Fail> {
    // The domain decides whether the balance can take the grant, on the balance locked for the
    // rest of this transaction: the database's CHECK never has to refuse it.
    let balance = postings::lock_balance(tx, &c.account_id).await?;
    if let Err(LedgerError::Overflow) =
        ledger::post(balance, TransactionKind::AdminAdjustment, c.amount)
    {
        return Ok(End::Rollback(Spent::Refused(Refusal::BalanceLimit {
            balance,
            amount: c.amount.magnitude(),
        })));
    }
    let source = GrantSource::Admin(c.reference.clone());
    let grant = NewGrant {
        user: &c.account_id,
        amount: c.amount.magnitude(),
        source: &source,
        expires_at: c.expires_at,
        now: c.now,
        context: Some(context),
        key: Some((&c.reference, hash)),
        grant: c.grant,
    };
    let mut told = Outbox::default();
    let effect = grants::grant(tx, &grant, &mut told).await?;
    told.write(tx, events).await?;
    if effect == LedgerEffect::Nothing {
        // The lot's source is taken: by this very adjustment, committed by a concurrent retry
        // since the caller's lookup (replayed), or by another user's adjustment or sign-up
        // grant under the same key (a conflict, never a silent nothing).
        let seen = earlier_adjustment(tx, c, hash).await?;
        return Ok(End::Rollback(
            seen.unwrap_or(Spent::Refused(Refusal::KeyConflict)),
        ));
    }
    Ok(End::Commit(Spent::Done(effect)))
}

/// The answer to an earlier adjustment of `c`'s user under `c`'s reference: a replay (nothing
/// more to do) when it was the same request, else a conflict.
async fn earlier_adjustment(
    tx: &DatabaseTransaction,
    c: &AdjustCommand,
    hash: &str,
) -> Result<Option<Spent<LedgerEffect>>, Fail> {
    let found = postings::keyed_transaction(
        tx,
        &c.account_id,
        TransactionKind::AdminAdjustment,
        &c.reference,
    )
    .await?;
    Ok(found.map(
        |(_, earlier)| match KeyReuse::of(earlier.as_deref(), hash) {
            KeyReuse::Replay => Spent::Done(LedgerEffect::Nothing),
            KeyReuse::Conflict => Spent::Refused(Refusal::KeyConflict),
        },
    ))
}
