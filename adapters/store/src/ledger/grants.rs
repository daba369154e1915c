//! Grants (once per source), refund clawbacks and grant expiry: the operations on grant lots.
//! A grant adds the event it tells to its caller's [`Outbox`], which the caller writes with the
//! rest of its transaction's events; an expiry written in a transaction of its own tells the
//! host in it (`tell`); the payment event's transaction tells of its clawbacks itself.

use application::ports::{
    ClawbackCommand, CreditTransaction, GrantCommand, GrantSource, LedgerEffect, StoreError,
    UsageContext,
};
use domain::ledger::{DecidedPosting, take_back};
use domain::{AccountId, Credits, GrantCategory, GrantPriority, Timestamp, TransactionKind};
use sea_orm::{DatabaseTransaction, FromQueryResult};

use super::postings::{self, Posting};
use application::host_events;

use crate::Enc;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql::{self, End};

/// A grant to write.
pub(crate) struct NewGrant<'a> {
    pub(crate) user: &'a AccountId,
    pub(crate) amount: Credits,
    pub(crate) source: &'a GrantSource,
    pub(crate) expires_at: Option<Timestamp>,
    pub(crate) now: Timestamp,
    /// The transaction's context; `None` derives it from the source.
    pub(crate) context: Option<&'a UsageContext>,
    /// `(key, request hash)` for a keyed transaction (admin adjustments).
    pub(crate) key: Option<(&'a str, &'a str)>,
    /// What the credits are, and their priority in spend order.
    pub(crate) grant: (GrantCategory, GrantPriority),
}

impl<'a> NewGrant<'a> {
    /// The grant a [`GrantCommand`] asks for.
    pub(crate) fn of(c: &'a GrantCommand) -> Self {
        Self {
            user: &c.account_id,
            amount: c.amount,
            source: &c.source,
            expires_at: c.expires_at,
            now: c.now,
            context: None,
            key: None,
            grant: (c.source.category(), GrantPriority::default()),
        }
    }
}

/// The UNIQUE `(source_kind, source_key)` of a lot.
pub(crate) fn source_parts(source: &GrantSource) -> (&'static str, String) {
    match source {
        GrantSource::Order(order) => ("order", order.as_str().to_owned()),
        GrantSource::OrderBonus(order) => ("order", format!("{order}:bonus")),
        GrantSource::SubscriptionPeriod(s, period) => (
            "subscription_period",
            format!("{s}:{}", period.start().unix_millis()),
        ),
        GrantSource::Admin(reference) => ("admin", reference.clone()),
        GrantSource::Promo { redemption, .. } => ("admin", format!("promo:{redemption}")),
        // A subscription's grant like a period's, keyed apart from every period start.
        GrantSource::PlanChange(s, asked) => (
            "subscription_period",
            format!("{s}:change:{}", asked.unix_millis()),
        ),
    }
}

fn kind_and_context(source: &GrantSource) -> (TransactionKind, UsageContext) {
    match source {
        GrantSource::Order(o) | GrantSource::OrderBonus(o) => (
            TransactionKind::PurchaseGrant,
            UsageContext {
                order_id: Some(o.clone()),
                ..UsageContext::default()
            },
        ),
        GrantSource::SubscriptionPeriod(s, _) | GrantSource::PlanChange(s, _) => (
            TransactionKind::SubscriptionGrant,
            UsageContext {
                subscription_id: Some(s.clone()),
                ..UsageContext::default()
            },
        ),
        GrantSource::Admin(r) => (
            TransactionKind::AdminAdjustment,
            UsageContext {
                note: Some(r.clone()),
                ..UsageContext::default()
            },
        ),
        GrantSource::Promo { code, .. } => (
            TransactionKind::AdminAdjustment,
            UsageContext {
                note: Some(domain::promo::grant_note(code)),
                ..UsageContext::default()
            },
        ),
    }
}

/// A [`GrantCommand`] as a transaction body (the grant commits when it wrote nothing, too); a
/// grant written now is told to the host (`credits.granted`) in the same transaction.
pub(crate) async fn grant_command(
    tx: &DatabaseTransaction,
    c: &GrantCommand,
    events: &Enc,
) -> Result<End<LedgerEffect>, Fail> {
    let mut told = Outbox::default();
    let effect = grant(tx, &NewGrant::of(c), &mut told).await?;
    told.write(tx, events).await?;
    Ok(End::Commit(effect))
}

/// Write the host event a ledger effect tells, if any, inside `tx`.
pub(crate) async fn tell(
    tx: &DatabaseTransaction,
    effect: &LedgerEffect,
    events: &Enc,
) -> Result<(), Fail> {
    if let LedgerEffect::Written(t) = effect
        && let Some(event) = host_events::credits_changed(t)
    {
        Outbox::write_one(tx, event, events).await?;
    }
    Ok(())
}

/// The lot of a grant; its values: user, transaction id, source kind and key, amount, expiry,
/// time, category, priority.
const INSERT_LOT: &str = "INSERT INTO credit_grants (account_id, transaction_id, source_kind, \
    source_key, amount_hundredths, remaining_hundredths, expires_at, granted_at, category, \
    priority) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING";

/// Grant once per source: a source that already has a lot is `Nothing`. The existence check
/// runs first so that PostgreSQL never sees a failing statement in the common duplicate case; a
/// concurrent grant of the same source that commits first makes the lot insert do nothing, and
/// the whole operation runs again (and then finds the lot).
///
/// A grant written now adds its `credits.granted` to `told`, the caller's outbox, which the
/// caller writes with every other event of its transaction (`Outbox::write`); a grant that
/// writes nothing leaves it as it was.
pub(crate) async fn grant(
    tx: &DatabaseTransaction,
    g: &NewGrant<'_>,
    told: &mut Outbox,
) -> Result<LedgerEffect, Fail> {
    if g.amount.is_zero() {
        return Ok(LedgerEffect::Nothing);
    }
    let (source_kind, source_key) = source_parts(g.source);
    let exists =
        "SELECT COUNT(*) AS n FROM credit_grants WHERE source_kind = $1 AND source_key = $2";
    let values = vec![source_kind.into(), source_key.as_str().into()];
    if sql::one_i64(tx, exists, values, "n").await?.unwrap_or(0) > 0 {
        return Ok(LedgerEffect::Nothing);
    }
    let (kind, derived) = kind_and_context(g.source);
    let (category, priority) = g.grant;
    let context = UsageContext {
        grant_category: Some(category),
        ..g.context.unwrap_or(&derived).clone()
    };
    let posting = Posting {
        user: g.user,
        member: None,
        kind,
        amount: g.amount.as_increase(),
        context: &context,
        key: g.key,
        now: g.now,
    };
    let mut crossings = Outbox::default();
    let written = postings::post_increase(tx, &posting, &mut crossings).await?;
    let values = vec![
        g.user.as_str().into(),
        written.id.into(),
        source_kind.into(),
        source_key.into(),
        g.amount.hundredths().into(),
        g.expires_at.map(Timestamp::unix_millis).into(),
        g.now.unix_millis().into(),
        category.code().into(),
        i32::from(priority.get()).into(),
    ];
    if sql::execute(tx, INSERT_LOT, values).await? == 0 {
        return Err(Fail::Retry(
            "a concurrent grant of the same source committed first",
        ));
    }
    told.extend(host_events::credits_changed(&written));
    told.extend(crossings);
    Ok(LedgerEffect::Written(written))
}

#[derive(Debug, FromQueryResult)]
struct LotState {
    id: i64,
    account_id: String,
    remaining_hundredths: i64,
}

async fn lot_state(
    tx: &DatabaseTransaction,
    condition: &str,
    values: Vec<sea_orm::Value>,
) -> Result<Option<LotState>, Fail> {
    let sql =
        format!("SELECT id, account_id, remaining_hundredths FROM credit_grants WHERE {condition}");
    Ok(sql::one(tx, &sql, values).await?)
}

fn remaining(lot: &LotState) -> Result<Credits, Fail> {
    Credits::from_hundredths(lot.remaining_hundredths)
        .map_err(|e| Fail::Store(corrupt("credit_grants", &lot.id.to_string(), e)))
}

/// Take back `take_back(wanted, lot remaining, balance)` of the order's grant after a refund;
/// what cannot be taken (spent or held) is added to the lot's shortfall.
pub(crate) async fn clawback(
    tx: &DatabaseTransaction,
    c: &ClawbackCommand,
    crossings: &mut Outbox,
) -> Result<LedgerEffect, Fail> {
    if c.wanted.is_zero() {
        return Ok(LedgerEffect::Nothing);
    }
    // The balance row first (lock order), then the lot, which only changes under that lock.
    let balance = postings::lock_balance(tx, &c.account_id).await?;
    let (source_kind, source_key) = source_parts(&c.source);
    let condition = "source_kind = $1 AND source_key = $2 AND account_id = $3";
    let values = vec![
        source_kind.into(),
        source_key.into(),
        c.account_id.as_str().into(),
    ];
    let Some(lot) = lot_state(tx, condition, values).await? else {
        return Ok(LedgerEffect::Nothing);
    };
    let t = take_back(c.wanted, remaining(&lot)?, balance);
    let mut effect = LedgerEffect::Nothing;
    if !t.taken.is_zero() {
        let (_, context) = kind_and_context(&c.source);
        let posting = Posting {
            user: &c.account_id,
            member: None,
            kind: TransactionKind::RefundClawback,
            amount: t.taken.as_decrease(),
            context: &context,
            key: None,
            now: c.now,
        };
        let written = post_taken(tx, &posting, balance, crossings).await?;
        effect = LedgerEffect::Written(written);
    }
    let sql = "UPDATE credit_grants SET remaining_hundredths = remaining_hundredths - $2, \
        clawed_back_hundredths = clawed_back_hundredths + $2, \
        shortfall_hundredths = shortfall_hundredths + $3 \
        WHERE id = $1 AND account_id = $4 AND remaining_hundredths >= $2";
    let values = vec![
        lot.id.into(),
        t.taken.hundredths().into(),
        t.shortfall.hundredths().into(),
        c.account_id.as_str().into(),
    ];
    if sql::execute(tx, sql, values).await? != 1 {
        return Err(Fail::Retry("a grant lot changed during a clawback"));
    }
    Ok(effect)
}

/// Expire lot `id` if it is still due at `now`: an `expiry` transaction takes what is left of
/// it, at most the balance; the rest (held by pending reservations) is recorded as shortfall.
/// Returns whether the lot expired now.
pub(crate) async fn expire_lot(
    tx: &DatabaseTransaction,
    id: i64,
    user: &AccountId,
    now: Timestamp,
    events: &Enc,
) -> Result<End<bool>, Fail> {
    let balance = postings::lock_balance(tx, user).await?;
    let condition = "id = $1 AND expired = FALSE AND remaining_hundredths > 0 \
                     AND expires_at IS NOT NULL AND expires_at <= $2";
    let Some(lot) = lot_state(tx, condition, vec![id.into(), now.unix_millis().into()]).await?
    else {
        return Ok(End::Rollback(false));
    };
    let left = remaining(&lot)?;
    let t = take_back(left, left, balance);
    if !t.taken.is_zero() {
        let context = UsageContext::default();
        let posting = Posting {
            user,
            member: None,
            kind: TransactionKind::Expiry,
            amount: t.taken.as_decrease(),
            context: &context,
            key: None,
            now,
        };
        let mut crossings = Outbox::default();
        let written = post_taken(tx, &posting, balance, &mut crossings).await?;
        tell(tx, &LedgerEffect::Written(written), events).await?;
        crossings.write(tx, events).await?;
    }
    let sql = "UPDATE credit_grants SET remaining_hundredths = 0, expired = TRUE, \
        shortfall_hundredths = shortfall_hundredths + $3 WHERE id = $1 AND remaining_hundredths = $2";
    let values = vec![
        lot.id.into(),
        left.hundredths().into(),
        t.shortfall.hundredths().into(),
    ];
    if sql::execute(tx, sql, values).await? != 1 {
        return Err(Fail::Retry("a grant lot changed during its expiry"));
    }
    Ok(End::Commit(true))
}

/// Write a takeback (`take_back`, decided on the locked `balance`) through the spend rule's
/// guarded write: the database must leave what the ledger's rules decide.
async fn post_taken(
    tx: &DatabaseTransaction,
    posting: &Posting<'_>,
    balance: Credits,
    crossings: &mut Outbox,
) -> Result<CreditTransaction, Fail> {
    let decided = DecidedPosting::decide(balance, posting.kind, posting.amount).map_err(|e| {
        StoreError::Unexpected(anyhow::anyhow!(
            "a {} of {} for {}: {e}",
            posting.kind,
            posting.amount,
            posting.user
        ))
    })?;
    postings::post_decided(tx, posting, decided, crossings).await
}

/// Lots due for expiry: `(id, user)`, soonest first.
pub(crate) async fn due_lots(
    db: &sea_orm::DatabaseConnection,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<(i64, AccountId)>, Fail> {
    let sql = "SELECT id, account_id, remaining_hundredths FROM credit_grants \
        WHERE expired = FALSE AND expires_at IS NOT NULL AND expires_at <= $1 AND remaining_hundredths > 0 \
        ORDER BY expires_at, id LIMIT $2";
    let rows: Vec<LotState> = sql::all(
        db,
        sql,
        vec![now.unix_millis().into(), i64::from(limit).into()],
    )
    .await?;
    rows.into_iter()
        .map(|r| {
            let user = AccountId::new(r.account_id)
                .map_err(|e| Fail::Store(corrupt("credit_grants", &r.id.to_string(), e)))?;
            Ok((r.id, user))
        })
        .collect()
}
