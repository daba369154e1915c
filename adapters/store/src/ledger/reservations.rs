//! Two-phase spending: reserve (a pending hold), then settle, release, or expire.
//!
//! A hold writes a negative `reservation_hold` transaction and does not draw lots down; settling
//! writes `reservation_settle` for `held - charged` (nothing when they are equal) and draws lots
//! down by `charged`; releasing or expiring writes `reservation_release` for the whole hold.

use application::host_events::HostEventKind;
use application::ports::Member;
use application::ports::{
    CreditTransaction, Refusal, Replay, Reservation, ReservationStatus, ReserveCommand, StoreError,
    UsageContext,
};
use domain::ledger::{DecidedPosting, settle as settlement};
use domain::{
    AccountId, Credits, KeyReuse, ReservationId, Timestamp, TransactionKind, UserId, WindowCount,
    count_spend, give_back, settle_ceiling,
};
use sea_orm::{DatabaseTransaction, FromQueryResult};

use super::postings::{self, Posting};
use super::{Spent, spend};
use crate::accounts;
use crate::limits;
use crate::opt_in::Wanted;
use application::host_events;

use crate::Enc;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::{RESERVATION_COLUMNS, ReservationRow, tokens_value};
use crate::sql::{self, End};

/// What a settle, release or expiry found.
pub(crate) enum Resolution {
    /// Resolved now, or earlier in the same way.
    Done(Reservation, Replay),
    /// No such reservation for this user.
    NotFound,
    /// Resolved earlier in another way (the status code).
    AlreadyResolved(&'static str),
}

async fn find(
    tx: &DatabaseTransaction,
    condition: &str,
    values: Vec<sea_orm::Value>,
) -> Result<Option<ReservationRow>, Fail> {
    let sql = format!("SELECT {RESERVATION_COLUMNS} FROM credit_reservations WHERE {condition}");
    Ok(sql::one(tx, &sql, values).await?)
}

/// Reserve: replay a known key, else insert the pending reservation and hold its amount: a spend
/// decided by the domain's spending rule on the locked balance, written by the conditional
/// decrement and checked against the decision (`postings::post_decided`).
pub(crate) async fn reserve(
    tx: &DatabaseTransaction,
    c: &ReserveCommand,
    wanted: Wanted,
    events: &Enc,
) -> Result<End<Spent<(Reservation, Replay)>>, Fail> {
    if c.amount.is_zero() {
        return Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "a reservation of zero credits"
        ))));
    }
    if let Some(seen) = earlier_reservation(tx, c).await? {
        return Ok(End::Rollback(seen));
    }
    let (balance, counted) = match member_hold(tx, c).await? {
        Ok(counted) => counted,
        Err(refused) => return Ok(End::Rollback(refused)),
    };
    let window = counted.and_then(|(_, _, window)| window);
    let Some(row) = insert(tx, c, window).await? else {
        return Err(id_taken(tx, c).await?);
    };
    let (balance, limit_counts) = match counted_by_limits(tx, c, balance).await? {
        Ok(counted) => counted,
        // The reservation's row is undone with the rest.
        Err(refusal) => return Ok(End::Rollback(Spent::Refused(refusal))),
    };
    let hold = (
        TransactionKind::ReservationHold,
        c.amount,
        c.idempotency.request_hash.as_str(),
    );
    let decided = match spend::decide(hold, &c.account_id, balance)? {
        Ok(decided) => decided,
        // The reservation's row is undone with the rest.
        Err(available) => {
            return Ok(End::Rollback(Spent::Refused(Refusal::Insufficient {
                requested: c.amount,
                available,
            })));
        }
    };
    if let Some((member, count, _)) = counted {
        accounts::write_count(tx, &c.account_id, member, count).await?;
    }
    limits::record_hold(tx, &c.reservation_id, &limit_counts).await?;
    let context = UsageContext {
        reservation_id: Some(c.reservation_id.clone()),
        ..c.context.clone()
    };
    let posting = Posting {
        user: &c.account_id,
        member: c.member_id.as_ref(),
        kind: TransactionKind::ReservationHold,
        amount: c.amount.as_decrease(),
        context: &context,
        key: None,
        now: c.now,
    };
    let mut crossings = Outbox::default();
    let hold = postings::post_decided(tx, &posting, decided, &mut crossings).await?;
    let reservation = row.into_domain()?;
    tell_reserved(tx, (&reservation, &hold, crossings), c, wanted, events).await?;
    Outbox::from(limits::reached_events(&limit_counts, &hold))
        .write(tx, events)
        .await?;
    Ok(End::Commit(Spent::Done((reservation, Replay::Fresh))))
}

/// `credits.reserved` (when an endpoint opted in) and the balance crossings of a hold (those
/// of the account's thresholds collected in `crossings`).
async fn tell_reserved(
    tx: &DatabaseTransaction,
    (reservation, hold, crossings): (&Reservation, &CreditTransaction, Outbox),
    c: &ReserveCommand,
    wanted: Wanted,
    events: &Enc,
) -> Result<(), Fail> {
    let mut told = Outbox::default();
    let kind = HostEventKind::CreditsReserved;
    if wanted.wants(kind) {
        told.push(host_events::reservation_step(
            kind,
            reservation,
            Some(hold),
            c.now,
        ));
    }
    told.extend(host_events::balance_alerts(hold, c.low_balance_below));
    told.extend(crossings);
    told.write(tx, events).await?;
    Ok(())
}

/// The reservation made earlier under `c`'s key: its replay, or a key conflict.
async fn earlier_reservation(
    tx: &DatabaseTransaction,
    c: &ReserveCommand,
) -> Result<Option<Spent<(Reservation, Replay)>>, Fail> {
    let by_key = "account_id = $1 AND idempotency_key = $2";
    let values = vec![
        c.account_id.as_str().into(),
        c.idempotency.key.as_str().into(),
    ];
    let Some(row) = find(tx, by_key, values).await? else {
        return Ok(None);
    };
    Ok(Some(
        match KeyReuse::of(Some(&row.request_hash), &c.idempotency.request_hash) {
            KeyReuse::Replay => Spent::Done((row.into_domain()?, Replay::Replayed)),
            KeyReuse::Conflict => Spent::Refused(Refusal::KeyConflict),
        },
    ))
}

/// The balance already locked and, for a team member's hold, the member, their new count and
/// the window it counted in (`None` without a limit): after the balance row, one lock order for
/// every spend, and before the hold is inserted with the window it counts in.
type MemberHold<'a> = (
    Option<(Credits, bool)>,
    Option<(&'a UserId, WindowCount, Option<Timestamp>)>,
);

async fn member_hold<'a>(
    tx: &DatabaseTransaction,
    c: &'a ReserveCommand,
) -> Result<Result<MemberHold<'a>, Spent<(Reservation, Replay)>>, Fail> {
    let Some(member) = &c.member_id else {
        return Ok(Ok((None, None)));
    };
    let balance = postings::lock_balance_limited(tx, &c.account_id).await?;
    match spend::count_member_spend(tx, &c.account_id, member, c.amount, c.now).await? {
        Ok((count, window)) => Ok(Ok((Some(balance), Some((member, count, window))))),
        // A concurrent request with this key may have committed while this one waited for the
        // rows: its outcome is the answer.
        Err(refusal) => Ok(Err(earlier_reservation(tx, c)
            .await?
            .unwrap_or(Spent::Refused(refusal)))),
    }
}

/// The balance (locked now unless the member's hold locked it) and what the hold counted
/// against the account's limits, after the balance row and the member's; or the refusal of a
/// hard limit.
async fn counted_by_limits(
    tx: &DatabaseTransaction,
    c: &ReserveCommand,
    locked: Option<(Credits, bool)>,
) -> Result<Result<(Credits, Vec<limits::LimitCount>), Refusal>, Fail> {
    let (balance, limited) = match locked {
        Some(locked) => locked,
        None => postings::lock_balance_limited(tx, &c.account_id).await?,
    };
    let within = (&c.account_id, limited);
    let spend = c.context.spent_as(c.member_id.as_ref());
    Ok(limits::count(tx, within, &spend, c.amount, c.now)
        .await?
        .map(|counts| (balance, counts)))
}

/// Insert the pending reservation and return its row; `None` when its id or key is taken.
async fn insert(
    tx: &DatabaseTransaction,
    c: &ReserveCommand,
    window: Option<Timestamp>,
) -> Result<Option<ReservationRow>, Fail> {
    let sql = format!(
        "INSERT INTO credit_reservations (id, account_id, held_hundredths, status, \
         idempotency_key, request_hash, feature, model, tokens, note, created_at, expires_at, \
         member_id, window_start, api_key_id) \
         VALUES ($1, $2, $3, $12, $4, $5, $6, $7, $8, $9, $10, $11, $13, $14, $15) \
         ON CONFLICT DO NOTHING RETURNING {RESERVATION_COLUMNS}"
    );
    let values = vec![
        c.reservation_id.as_str().into(),
        c.account_id.as_str().into(),
        c.amount.hundredths().into(),
        c.idempotency.key.as_str().into(),
        c.idempotency.request_hash.as_str().into(),
        c.context.feature.clone().into(),
        c.context.model.clone().into(),
        tokens_value(c.context.tokens)?.into(),
        c.context.note.clone().into(),
        c.now.unix_millis().into(),
        c.expires_at.unix_millis().into(),
        ReservationStatus::Pending.code().into(),
        c.member_id.as_ref().map(|m| m.as_str().to_owned()).into(),
        window.map(Timestamp::unix_millis).into(),
        c.context.api_key_id.clone().into(),
    ];
    Ok(sql::one(tx, &sql, values).await?)
}

/// Why the insert did nothing: the same key committed concurrently (run again and replay), or
/// the id belongs to another reservation (a conflict).
async fn id_taken(tx: &DatabaseTransaction, c: &ReserveCommand) -> Result<Fail, Fail> {
    let row = find(tx, "id = $1", vec![c.reservation_id.as_str().into()]).await?;
    let other = row.is_some_and(|r| {
        r.account_id != c.account_id.as_str() || r.idempotency_key != c.idempotency.key.as_str()
    });
    Ok(if other {
        Fail::Store(StoreError::Conflict(format!(
            "reservation id {} is taken",
            c.reservation_id
        )))
    } else {
        Fail::Retry("a concurrent reservation with the same key committed first")
    })
}

/// Lock the reservation row and return it if it belongs to `account`, with the start of the
/// member's window it counted in (if it counted).
async fn locked(
    tx: &DatabaseTransaction,
    account: &AccountId,
    id: &ReservationId,
) -> Result<Option<(Reservation, Option<Timestamp>)>, Fail> {
    let condition = format!("id = $1 AND account_id = $2{}", sql::for_update(tx));
    let row = find(
        tx,
        &condition,
        vec![id.as_str().into(), account.as_str().into()],
    )
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let window = row.window_start.map(Timestamp::from_unix_millis);
    Ok(Some((row.into_domain()?, window)))
}

/// The member a team's hold counts against, as their row stands (locked; `None` once they left
/// the team), and the window it counted in.
struct Holder<'a> {
    user: &'a UserId,
    row: Option<Member>,
    counted_in: Option<Timestamp>,
}

impl Holder<'_> {
    /// Write the count `f` makes of the member's, if they are still a member.
    async fn recount(
        &self,
        tx: &DatabaseTransaction,
        account: &AccountId,
        f: impl FnOnce(&Member) -> WindowCount,
    ) -> Result<(), Fail> {
        match &self.row {
            Some(row) => accounts::write_count(tx, account, self.user, f(row)).await,
            None => Ok(()),
        }
    }
}

/// Whether `by` may resolve `r` (on a team's account: the member who holds it, or an owner or
/// admin; on a personal account: its user, who names no member), and the member it counts
/// against. Read after the account's balance row is locked: one lock order for every spend.
/// `None`: not theirs to resolve (answered as not found).
async fn holder<'a>(
    tx: &DatabaseTransaction,
    (account, by): (&AccountId, Option<&UserId>),
    r: &'a Reservation,
    counted_in: Option<Timestamp>,
) -> Result<Option<Option<Holder<'a>>>, Fail> {
    let Some(member) = &r.member_id else {
        // A personal account's hold: its user (no member named) or the expiry sweep.
        return Ok(by.is_none().then_some(None));
    };
    let actor = by.filter(|actor| *actor != member);
    // Two members' rows are locked in the order of their ids, as a member change locks them.
    let (row, actor_row) = match actor {
        Some(actor) if actor < member => {
            let actor_row = accounts::locked_member(tx, account, actor).await?;
            (
                accounts::locked_member(tx, account, member).await?,
                actor_row,
            )
        }
        Some(actor) => {
            let row = accounts::locked_member(tx, account, member).await?;
            (row, accounts::locked_member(tx, account, actor).await?)
        }
        None => (accounts::locked_member(tx, account, member).await?, None),
    };
    if actor.is_some() && !actor_row.is_some_and(|m| m.role.manages_members()) {
        return Ok(None);
    }
    Ok(Some(Some(Holder {
        user: member,
        row,
        counted_in,
    })))
}

async fn set_status(
    tx: &DatabaseTransaction,
    r: &Reservation,
    status: ReservationStatus,
    now: Timestamp,
) -> Result<Reservation, Fail> {
    let (actual, charged) = match status {
        ReservationStatus::Settled { actual, charged } => {
            (Some(actual.hundredths()), Some(charged.hundredths()))
        }
        _ => (None, None),
    };
    let sql = "UPDATE credit_reservations SET status = $2, actual_hundredths = $3, \
        charged_hundredths = $4, resolved_at = $5 WHERE id = $1 AND account_id = $7 AND status = $6";
    let values = vec![
        r.id.as_str().into(),
        status.code().into(),
        actual.into(),
        charged.into(),
        now.unix_millis().into(),
        ReservationStatus::Pending.code().into(),
        r.account_id.as_str().into(),
    ];
    if sql::execute(tx, sql, values).await? != 1 {
        return Err(Fail::Retry("the reservation was resolved concurrently"));
    }
    Ok(Reservation {
        status,
        ..r.clone()
    })
}

fn resolve_context(r: &Reservation) -> UsageContext {
    UsageContext {
        reservation_id: Some(r.id.clone()),
        ..r.context.clone()
    }
}

/// What a settle may take past the hold: the available balance; for a member's hold, no more
/// than their limit leaves (an overrun is a new spend), and nothing once they left the team (a
/// removed member's hold settles within what it holds).
fn ceiling(holder: Option<&Holder<'_>>, available: Credits, now: Timestamp) -> Credits {
    match holder {
        None => available,
        Some(h) => match &h.row {
            Some(m) => settle_ceiling(available, m.limit, m.count, true, now),
            None => Credits::ZERO,
        },
    }
}

/// `most`, or less when the account's hard limits leave less room for a settle of `r` at `now`.
async fn within_limits(
    tx: &DatabaseTransaction,
    within: (&AccountId, bool),
    r: &Reservation,
    most: Credits,
    now: Timestamp,
) -> Result<Credits, Fail> {
    let spend = r.context.spent_as(r.member_id.as_ref());
    let room = limits::room(tx, within, &spend, now).await?;
    Ok(room.map_or(most, |room| most.min(room)))
}

/// A member's count after their hold of `held` settled for `charged`: an overrun counts now
/// (the ceiling left room for it); the unused part goes back to the window the hold counted in.
fn settled_count(
    m: &Member,
    h: &Holder<'_>,
    (held, charged): (Credits, Credits),
    now: Timestamp,
) -> WindowCount {
    match charged.checked_sub(held) {
        Ok(over) if !over.is_zero() => count_spend(m.limit, m.count, over, now).unwrap_or(m.count),
        _ => {
            let back = held.checked_sub(charged).unwrap_or(Credits::ZERO);
            give_back(m.limit, m.count, h.counted_in, back, now)
        }
    }
}

/// Settle with the actual usage: the unused part of the hold returns, an overrun is taken up to
/// what is available ([`settlement`]), and lots are drawn down by what is finally charged.
pub(crate) async fn settle(
    tx: &DatabaseTransaction,
    (user, by): (&AccountId, Option<&UserId>),
    id: &ReservationId,
    (actual, order): (Credits, domain::SpendOrder),
    now: Timestamp,
    wanted: Wanted,
    events: &Enc,
) -> Result<End<Resolution>, Fail> {
    let Some((r, counted_in)) = locked(tx, user, id).await? else {
        return Ok(End::Rollback(Resolution::NotFound));
    };
    // Whose it is to resolve first: someone else learns nothing of it, not even its status.
    let (available, lots, limited) = postings::lock_balance_lots_limited(tx, user).await?;
    let Some(holder) = holder(tx, (user, by), &r, counted_in).await? else {
        return Ok(End::Rollback(Resolution::NotFound));
    };
    match r.status {
        ReservationStatus::Pending => {}
        ReservationStatus::Settled {
            actual: earlier, ..
        } if earlier == actual => {
            return Ok(End::Rollback(Resolution::Done(r, Replay::Replayed)));
        }
        other => return Ok(End::Rollback(Resolution::AlreadyResolved(other.code()))),
    }
    let most = ceiling(holder.as_ref(), available, now);
    let s = settlement(
        r.held,
        actual,
        within_limits(tx, (user, limited), &r, most, now).await?,
    );
    let mut crossings = Outbox::default();
    let written = post_settle(tx, (&r, s.amount), available, (now, &mut crossings)).await?;
    postings::draw_from(tx, (user, order), &lots, s.charged).await?;
    if let Some(h) = &holder {
        h.recount(tx, user, |m| settled_count(m, h, (r.held, s.charged), now))
            .await?;
    }
    let settled_for = (s.charged, written.as_ref());
    settle_limits(tx, (user, limited), &r, settled_for, (now, events)).await?;
    let settled = set_status(
        tx,
        &r,
        ReservationStatus::Settled {
            actual,
            charged: s.charged,
        },
        now,
    )
    .await?;
    let kind = HostEventKind::CreditsSettled;
    if wanted.wants(kind) {
        let event = host_events::reservation_step(kind, &settled, written.as_ref(), now);
        Outbox::write_one(tx, event, events).await?;
    }
    crossings.write(tx, events).await?;
    Ok(End::Commit(Resolution::Done(settled, Replay::Fresh)))
}

/// The settle's ledger transaction: the difference between what `r` held and what it charged
/// (`amount`), decided on the `available` balance; nothing when it charged exactly the hold.
/// The crossings of the account's thresholds go to `crossings`.
async fn post_settle(
    tx: &DatabaseTransaction,
    (r, amount): (&Reservation, domain::CreditDelta),
    available: Credits,
    (now, crossings): (Timestamp, &mut Outbox),
) -> Result<Option<CreditTransaction>, Fail> {
    if amount.hundredths() == 0 {
        return Ok(None);
    }
    let kind = TransactionKind::ReservationSettle;
    let decided = DecidedPosting::decide(available, kind, amount)
        .map_err(|e| StoreError::Unexpected(anyhow::anyhow!("a settle of {}: {e}", r.id)))?;
    let context = resolve_context(r);
    let posting = Posting {
        user: &r.account_id,
        member: r.member_id.as_ref(),
        kind,
        amount,
        context: &context,
        key: None,
        now,
    };
    Ok(Some(
        postings::post_decided(tx, &posting, decided, crossings).await?,
    ))
}

/// The account's limits after `r` settled for `charged`: the unused part goes back to the
/// buckets the hold counted in; an overrun is a new spend now, within the room the settle's
/// ceiling left (a refusal here is a disagreement: the settle fails whole), told with the
/// settle's transaction (`written`) when it reaches a limit.
async fn settle_limits(
    tx: &DatabaseTransaction,
    within: (&AccountId, bool),
    r: &Reservation,
    (charged, written): (Credits, Option<&CreditTransaction>),
    (now, events): (Timestamp, &Enc),
) -> Result<(), Fail> {
    match charged.checked_sub(r.held) {
        Ok(over) if !over.is_zero() => {
            limits::give_back_hold(tx, &r.id, Some(Credits::ZERO)).await?;
            let spend = r.context.spent_as(r.member_id.as_ref());
            let counted = limits::count(tx, within, &spend, over, now)
                .await?
                .map_err(|refusal| {
                    Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
                        "a settle of {} within its room was refused: {refusal:?}",
                        r.id
                    )))
                })?;
            if let Some(overrun) = written {
                let told = limits::reached_events(&counted, overrun);
                Outbox::from(told).write(tx, events).await?;
            }
            Ok(())
        }
        _ => {
            let unused = r.held.checked_sub(charged).unwrap_or(Credits::ZERO);
            limits::give_back_hold(tx, &r.id, Some(unused)).await
        }
    }
}

/// Release (or, for the expiry sweep, expire) a pending hold: the whole hold returns.
pub(crate) async fn release(
    tx: &DatabaseTransaction,
    (user, by): (&AccountId, Option<&UserId>),
    id: &ReservationId,
    now: Timestamp,
    to: ReservationStatus,
    wanted: Wanted,
    events: &Enc,
) -> Result<End<Resolution>, Fail> {
    let Some((r, counted_in)) = locked(tx, user, id).await? else {
        return Ok(End::Rollback(Resolution::NotFound));
    };
    // A team's hold: the balance row first (one lock order for every spend), then the member;
    // whose it is to resolve before its status, which someone else does not learn.
    if r.member_id.is_some() {
        postings::lock_balance(tx, user).await?;
    }
    let Some(holder) = holder(tx, (user, by), &r, counted_in).await? else {
        return Ok(End::Rollback(Resolution::NotFound));
    };
    match r.status {
        ReservationStatus::Pending => {}
        s if s == to => return Ok(End::Rollback(Resolution::Done(r, Replay::Replayed))),
        other => return Ok(End::Rollback(Resolution::AlreadyResolved(other.code()))),
    }
    let context = resolve_context(&r);
    let posting = Posting {
        user,
        member: r.member_id.as_ref(),
        kind: TransactionKind::ReservationRelease,
        amount: r.held.as_increase(),
        context: &context,
        key: None,
        now,
    };
    let mut crossings = Outbox::default();
    let returned = postings::post_increase(tx, &posting, &mut crossings).await?;
    limits::give_back_hold(tx, &r.id, None).await?;
    if let Some(h) = &holder {
        h.recount(tx, user, |m| {
            give_back(m.limit, m.count, h.counted_in, r.held, now)
        })
        .await?;
    }
    let released = set_status(tx, &r, to, now).await?;
    let kind = HostEventKind::CreditsReleased;
    if wanted.wants(kind) {
        let event = host_events::reservation_step(kind, &released, Some(&returned), now);
        Outbox::write_one(tx, event, events).await?;
    }
    crossings.write(tx, events).await?;
    Ok(End::Commit(Resolution::Done(released, Replay::Fresh)))
}

#[derive(Debug, FromQueryResult)]
struct DueRow {
    id: String,
    account_id: String,
}

/// Pending reservations past their expiry: `(user, id)`, soonest first.
pub(crate) async fn due(
    db: &sea_orm::DatabaseConnection,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<(AccountId, ReservationId)>, Fail> {
    let sql = "SELECT id, account_id FROM credit_reservations WHERE status = $3 AND expires_at <= $1 \
               ORDER BY expires_at, id LIMIT $2";
    let rows: Vec<DueRow> = sql::all(
        db,
        sql,
        vec![
            now.unix_millis().into(),
            i64::from(limit).into(),
            ReservationStatus::Pending.code().into(),
        ],
    )
    .await?;
    rows.into_iter()
        .map(|r| {
            let bad = |e: domain::IdError| {
                Fail::Store(crate::rows::corrupt("credit_reservations", &r.id, e))
            };
            Ok((
                AccountId::new(r.account_id.clone()).map_err(bad)?,
                ReservationId::new(r.id.clone()).map_err(bad)?,
            ))
        })
        .collect()
}

/// A user's pending reservations, oldest first.
pub(crate) async fn pending(
    db: &sea_orm::DatabaseConnection,
    user: &AccountId,
) -> Result<Vec<Reservation>, Fail> {
    let sql = format!(
        "SELECT {RESERVATION_COLUMNS} FROM credit_reservations WHERE account_id = $1 AND status = $2 \
         ORDER BY created_at, id"
    );
    let values = vec![
        user.as_str().into(),
        ReservationStatus::Pending.code().into(),
    ];
    let rows: Vec<ReservationRow> = sql::all(db, &sql, values).await?;
    Ok(rows
        .into_iter()
        .map(ReservationRow::into_domain)
        .collect::<Result<_, _>>()?)
}
