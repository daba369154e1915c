//! Automatic top-up: saved payment methods, each account's rule, and the top-ups.
//!
//! A spend asks for a top-up in its own transaction ([`request`], called by the posting path
//! of accounts whose balance row counts a rule in `threshold_count`): it reads the rule, asks
//! [`domain::decide_request`], and inserts the top-up with `ON CONFLICT DO NOTHING` against the
//! partial unique index that keeps one in flight per account. The worker's claim skips rows
//! another instance holds (`FOR UPDATE SKIP LOCKED` on PostgreSQL), and a charge starts only
//! under a compare-and-set on the rule's version, in one transaction with its order.

use application::host_events;
use application::ports::{
    AutoTopUpRecord, CreditTransaction, PutAutoTopUp, PutAutoTopUpError, RuleEffect, SavedMethod,
    SavedMethodRecord, StartTopUp, StoreError, TopUpRecord, TopUpStore, TopUpWrite, may_move,
};
use async_trait::async_trait;
use domain::{
    AccountId, AfterDecline, Credits, DisabledReason, Money, OrderId, PlanId, ProviderId,
    Timestamp, TopUpRule, TopUpState, TopUpStatus, UserId,
};
use sea_orm::{ConnectionTrait, DatabaseTransaction, QueryResult};

use crate::SeaOrmStore;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql::{self, End};

const METHOD_COLUMNS: &str = "id, account_id, provider, customer_ref, method_ref, brand, last4, \
     wallet_account, order_id, consented_by, consented_at, created_at, removed_at";

const RULE_COLUMNS: &str = "account_id, enabled, threshold_hundredths, plan_id, max_per_month, \
     max_amount_minor, method_id, month_start, month_count, month_amount_minor, declines, \
     cool_off_until, disabled_reason, version, updated_by, updated_at";

const TOP_UP_COLUMNS: &str = "id, account_id, plan_id, status, balance_hundredths, order_id, \
     amount_minor, currency, credits_hundredths, reason, action_url, created_at, updated_at";

fn method(row: &QueryResult) -> Result<SavedMethodRecord, Fail> {
    let id: String = row.try_get("", "id")?;
    let bad = |what: &dyn std::fmt::Display| corrupt("saved_payment_methods", &id, what);
    let provider: String = row.try_get("", "provider")?;
    let removed_at: Option<i64> = row.try_get("", "removed_at")?;
    Ok(SavedMethodRecord {
        account_id: AccountId::new(row.try_get::<String>("", "account_id")?)
            .map_err(|e| bad(&e))?,
        provider: provider.parse::<ProviderId>().map_err(|e| bad(&e))?,
        method: SavedMethod {
            customer_ref: row.try_get("", "customer_ref")?,
            method_ref: row.try_get("", "method_ref")?,
            brand: row.try_get("", "brand")?,
            last4: row.try_get("", "last4")?,
            wallet_account: row.try_get("", "wallet_account")?,
        },
        order_id: OrderId::new(row.try_get::<String>("", "order_id")?).map_err(|e| bad(&e))?,
        consented_by: UserId::new(row.try_get::<String>("", "consented_by")?)
            .map_err(|e| bad(&e))?,
        consented_at: Timestamp::from_unix_millis(row.try_get("", "consented_at")?),
        created_at: Timestamp::from_unix_millis(row.try_get("", "created_at")?),
        removed_at: removed_at.map(Timestamp::from_unix_millis),
        id: id.clone(),
    })
}

/// The rule, its state and its version from a row of `auto_top_ups` (the method is read apart).
fn rule(row: &QueryResult) -> Result<(AutoTopUpRecord, Option<String>), Fail> {
    let account: String = row.try_get("", "account_id")?;
    let bad = |what: &dyn std::fmt::Display| corrupt("auto_top_ups", &account, what);
    let threshold =
        Credits::from_hundredths(row.try_get("", "threshold_hundredths")?).map_err(|e| bad(&e))?;
    let max_per_month: i32 = row.try_get("", "max_per_month")?;
    let month_count: i32 = row.try_get("", "month_count")?;
    let declines: i32 = row.try_get("", "declines")?;
    let method_id: Option<String> = row.try_get("", "method_id")?;
    let reason: Option<String> = row.try_get("", "disabled_reason")?;
    let updated_by: Option<String> = row.try_get("", "updated_by")?;
    let cool_off: Option<i64> = row.try_get("", "cool_off_until")?;
    let record = AutoTopUpRecord {
        account_id: AccountId::new(account.clone()).map_err(|e| bad(&e))?,
        rule: TopUpRule {
            enabled: row.try_get("", "enabled")?,
            threshold,
            plan: PlanId::new(row.try_get::<String>("", "plan_id")?).map_err(|e| bad(&e))?,
            max_per_month: u32::try_from(max_per_month).map_err(|e| bad(&e))?,
            max_amount_per_month: row.try_get("", "max_amount_minor")?,
        },
        state: TopUpState {
            month_start: Timestamp::from_unix_millis(row.try_get("", "month_start")?),
            month_count: u32::try_from(month_count).map_err(|e| bad(&e))?,
            month_amount: row.try_get("", "month_amount_minor")?,
            declines: u32::try_from(declines).map_err(|e| bad(&e))?,
            cool_off_until: cool_off.map(Timestamp::from_unix_millis),
            has_method: method_id.is_some(),
        },
        method: None,
        disabled_reason: reason
            .map(|r| DisabledReason::parse(&r).ok_or_else(|| bad(&r)))
            .transpose()?,
        version: row.try_get("", "version")?,
        updated_by: updated_by
            .map(UserId::new)
            .transpose()
            .map_err(|e| bad(&e))?,
        updated_at: Timestamp::from_unix_millis(row.try_get("", "updated_at")?),
    };
    Ok((record, method_id))
}

fn top_up(row: &QueryResult) -> Result<TopUpRecord, Fail> {
    let id: String = row.try_get("", "id")?;
    let bad = |what: &dyn std::fmt::Display| corrupt("top_up_intents", &id, what);
    let status: String = row.try_get("", "status")?;
    let order: Option<String> = row.try_get("", "order_id")?;
    let amount: Option<i64> = row.try_get("", "amount_minor")?;
    let currency: Option<String> = row.try_get("", "currency")?;
    let amount = match (amount, currency) {
        (Some(minor), Some(code)) => {
            let currency = code.parse().map_err(|e| bad(&e))?;
            Some(Money::from_minor(minor, currency).map_err(|e| bad(&e))?)
        }
        _ => None,
    };
    Ok(TopUpRecord {
        account_id: AccountId::new(row.try_get::<String>("", "account_id")?)
            .map_err(|e| bad(&e))?,
        plan_id: PlanId::new(row.try_get::<String>("", "plan_id")?).map_err(|e| bad(&e))?,
        status: TopUpStatus::parse(&status).ok_or_else(|| bad(&status))?,
        balance: Credits::from_hundredths(row.try_get("", "balance_hundredths")?)
            .map_err(|e| bad(&e))?,
        order_id: order.map(OrderId::new).transpose().map_err(|e| bad(&e))?,
        amount,
        credits: row
            .try_get::<Option<i64>>("", "credits_hundredths")?
            .map(Credits::from_hundredths)
            .transpose()
            .map_err(|e| bad(&e))?,
        reason: row.try_get("", "reason")?,
        action_url: row.try_get("", "action_url")?,
        created_at: Timestamp::from_unix_millis(row.try_get("", "created_at")?),
        updated_at: Timestamp::from_unix_millis(row.try_get("", "updated_at")?),
        id: id.clone(),
    })
}

async fn read_rule<C: ConnectionTrait>(
    conn: &C,
    account: &AccountId,
) -> Result<Option<AutoTopUpRecord>, Fail> {
    let sql = format!("SELECT {RULE_COLUMNS} FROM auto_top_ups WHERE account_id = $1");
    let rows = sql::rows(conn, &sql, vec![account.as_str().into()]).await?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let (mut record, method_id) = rule(row)?;
    if let Some(id) = method_id {
        let sql = format!("SELECT {METHOD_COLUMNS} FROM saved_payment_methods WHERE id = $1");
        let rows = sql::rows(conn, &sql, vec![id.into()]).await?;
        record.method = rows.first().map(method).transpose()?;
    }
    Ok(Some(record))
}

/// In a posting's transaction, after the balance row it wrote (whose `threshold_count` counts
/// the account's rule): ask for a top-up when the rule wants one, telling
/// `auto_top_up.requested`; a top-up already in flight makes the insert do nothing.
pub(crate) async fn request(
    tx: &DatabaseTransaction,
    posting: &CreditTransaction,
    told: &mut Outbox,
) -> Result<(), Fail> {
    if !posting.amount.is_decrease() {
        return Ok(());
    }
    let sql = format!("SELECT {RULE_COLUMNS} FROM auto_top_ups WHERE account_id = $1");
    let rows = sql::rows(tx, &sql, vec![posting.account_id.as_str().into()]).await?;
    let Some(row) = rows.first() else {
        return Ok(());
    };
    let (record, _) = rule(row)?;
    let now = posting.created_at;
    if domain::decide_request(&record.rule, record.state, posting.balance_after, now).is_err() {
        return Ok(());
    }
    let asked = TopUpRecord {
        id: format!("tup_{}", posting.id),
        account_id: posting.account_id.clone(),
        plan_id: record.rule.plan.clone(),
        status: TopUpStatus::Requested,
        balance: posting.balance_after,
        order_id: None,
        amount: None,
        credits: None,
        reason: None,
        action_url: None,
        created_at: now,
        updated_at: now,
    };
    let sql = "INSERT INTO top_up_intents (id, account_id, plan_id, status, balance_hundredths, \
               created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT DO NOTHING";
    let values = vec![
        asked.id.as_str().into(),
        asked.account_id.as_str().into(),
        asked.plan_id.as_str().into(),
        asked.status.code().into(),
        asked.balance.hundredths().into(),
        now.unix_millis().into(),
    ];
    if sql::execute(tx, sql, values).await? == 1 {
        told.extend(host_events::top_up_moved(&asked));
    }
    Ok(())
}

/// Give back a charge's count (when `$3`) and `$4` of money in the rule's month.
const GIVE_BACK: &str = "month_count = CASE WHEN $3 AND month_count > 0 THEN month_count - 1 \
     ELSE month_count END, month_amount_minor = CASE WHEN month_amount_minor >= $4 \
     THEN month_amount_minor - $4 ELSE 0 END";

/// What `effect` does to `account`'s rule.
async fn rule_effect(
    tx: &DatabaseTransaction,
    account: &AccountId,
    effect: RuleEffect,
    now: Timestamp,
) -> Result<(), Fail> {
    let (sets, give_back, extra): (&str, Option<i64>, Vec<sea_orm::Value>) = match effect {
        RuleEffect::Keep => return Ok(()),
        RuleEffect::Reset => ("declines = 0, cool_off_until = NULL", None, Vec::new()),
        RuleEffect::Declined { after, give_back } => match after {
            AfterDecline::CoolOff { until, declines } => (
                "declines = $5, cool_off_until = $6",
                Some(give_back),
                vec![i64::from(declines).into(), until.unix_millis().into()],
            ),
            AfterDecline::Disable { declines } => (
                "declines = $5, enabled = $6, disabled_reason = $7",
                Some(give_back),
                vec![
                    i64::from(declines).into(),
                    false.into(),
                    DisabledReason::Declines.code().into(),
                ],
            ),
        },
        RuleEffect::CoolOff { until, give_back } => (
            "cool_off_until = $5",
            give_back,
            vec![until.unix_millis().into()],
        ),
    };
    let sql = format!(
        "UPDATE auto_top_ups SET {sets}, {GIVE_BACK}, version = version + 1, updated_at = $2 \
         WHERE account_id = $1"
    );
    let mut values = vec![
        account.as_str().into(),
        now.unix_millis().into(),
        give_back.is_some().into(),
        give_back.unwrap_or(0).into(),
    ];
    values.extend(extra);
    sql::execute(tx, &sql, values).await?;
    Ok(())
}

async fn settle(
    tx: &DatabaseTransaction,
    write: (&str, &AccountId, TopUpStatus),
    reason: Option<&str>,
    action_url: Option<&str>,
    effect: RuleEffect,
    now: Timestamp,
) -> Result<(), Fail> {
    let (id, account, to) = write;
    let from: Vec<&str> = TopUpStatus::ALL
        .into_iter()
        .filter(|from| may_move(*from, to))
        .map(TopUpStatus::code)
        .collect();
    let sql = format!(
        "UPDATE top_up_intents SET status = $3, reason = COALESCE($4, reason), \
         action_url = COALESCE($5, action_url), updated_at = $6 \
         WHERE id = $1 AND account_id = $2 AND status IN ('{}')",
        from.join("', '")
    );
    let values = vec![
        id.into(),
        account.as_str().into(),
        to.code().into(),
        reason.map(str::to_owned).into(),
        action_url.map(str::to_owned).into(),
        now.unix_millis().into(),
    ];
    if sql::execute(tx, &sql, values).await? == 1 {
        rule_effect(tx, account, effect, now).await?;
    }
    Ok(())
}

async fn save_method(
    tx: &DatabaseTransaction,
    saved: &SavedMethodRecord,
    now: Timestamp,
) -> Result<(), Fail> {
    let sql = format!(
        "INSERT INTO saved_payment_methods ({METHOD_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL) ON CONFLICT DO NOTHING"
    );
    let m = &saved.method;
    let values = vec![
        saved.id.as_str().into(),
        saved.account_id.as_str().into(),
        saved.provider.as_str().into(),
        m.customer_ref.as_str().into(),
        m.method_ref.as_str().into(),
        m.brand.clone().into(),
        m.last4.clone().into(),
        m.wallet_account.clone().into(),
        saved.order_id.as_str().into(),
        saved.consented_by.as_str().into(),
        saved.consented_at.unix_millis().into(),
        saved.created_at.unix_millis().into(),
    ];
    if sql::execute(tx, &sql, values).await? == 1 {
        // The method the buyer consented to last is the one top-ups charge.
        let sql = "UPDATE auto_top_ups SET method_id = $2, version = version + 1, \
                   updated_at = $3 WHERE account_id = $1";
        let values = vec![
            saved.account_id.as_str().into(),
            saved.id.as_str().into(),
            now.unix_millis().into(),
        ];
        sql::execute(tx, sql, values).await?;
    }
    Ok(())
}

async fn disable(
    tx: &DatabaseTransaction,
    account: &AccountId,
    reason: DisabledReason,
    now: Timestamp,
) -> Result<(), Fail> {
    let sql = "UPDATE auto_top_ups SET enabled = $2, disabled_reason = $3, \
               version = version + 1, updated_at = $4 WHERE account_id = $1";
    let values = vec![
        account.as_str().into(),
        false.into(),
        reason.code().into(),
        now.unix_millis().into(),
    ];
    sql::execute(tx, sql, values).await?;
    Ok(())
}

async fn remove_method(
    tx: &DatabaseTransaction,
    account: &AccountId,
    id: &str,
    now: Timestamp,
) -> Result<(), Fail> {
    let sql = "UPDATE saved_payment_methods SET removed_at = $3 \
               WHERE id = $1 AND account_id = $2 AND removed_at IS NULL";
    let values = vec![id.into(), account.as_str().into(), now.unix_millis().into()];
    if sql::execute(tx, sql, values).await? == 0 {
        return Ok(());
    }
    let sql = "UPDATE auto_top_ups SET method_id = NULL, enabled = $3, disabled_reason = $4, \
               version = version + 1, updated_at = $5 WHERE account_id = $1 AND method_id = $2";
    let values = vec![
        account.as_str().into(),
        id.into(),
        false.into(),
        DisabledReason::MethodRemoved.code().into(),
        now.unix_millis().into(),
    ];
    sql::execute(tx, sql, values).await?;
    Ok(())
}

/// A change set's top-up part, inside its transaction.
pub(crate) async fn write(
    tx: &DatabaseTransaction,
    write: &TopUpWrite,
    now: Timestamp,
) -> Result<(), Fail> {
    match write {
        TopUpWrite::MethodSaved(saved) => save_method(tx, saved, now).await,
        TopUpWrite::Settle {
            id,
            account,
            to,
            reason,
            action_url,
            rule,
        } => {
            let what = (id.as_str(), account, *to);
            settle(
                tx,
                what,
                reason.as_deref(),
                action_url.as_deref(),
                *rule,
                now,
            )
            .await
        }
        TopUpWrite::Disable { account, reason } => disable(tx, account, *reason, now).await,
        TopUpWrite::RemoveMethod { account, id } => remove_method(tx, account, id, now).await,
    }
}

/// Lock `account`'s balance row (created empty if it has none), the lock every posting takes,
/// and count the new rule in its `threshold_count`, so that postings read it.
async fn count_rule(
    tx: &DatabaseTransaction,
    account: &AccountId,
    now: Timestamp,
) -> Result<(), Fail> {
    let sql = "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
               updated_at, threshold_count) VALUES ($1, 0, 0, $2, 1) ON CONFLICT (account_id) \
               DO UPDATE SET threshold_count = credit_balances.threshold_count + 1";
    sql::execute(
        tx,
        sql,
        vec![account.as_str().into(), now.unix_millis().into()],
    )
    .await?;
    Ok(())
}

/// The method a rule written by `put` charges: the one named, if it is the account's and not
/// removed; none when it names none.
async fn method_for(
    tx: &DatabaseTransaction,
    put: &PutAutoTopUp,
) -> Result<Result<Option<String>, PutAutoTopUpError>, Fail> {
    let Some(id) = &put.method_id else {
        return Ok(Ok(None));
    };
    let sql = "SELECT COUNT(*) AS n FROM saved_payment_methods \
               WHERE id = $1 AND account_id = $2 AND removed_at IS NULL";
    let values = vec![id.as_str().into(), put.account_id.as_str().into()];
    let n = sql::one_i64(tx, sql, values, "n").await?;
    Ok(if n.unwrap_or(0) == 1 {
        Ok(Some(id.clone()))
    } else {
        Err(PutAutoTopUpError::NoSuchMethod)
    })
}

async fn put_in(
    tx: &DatabaseTransaction,
    put: &PutAutoTopUp,
) -> Result<End<Result<(), PutAutoTopUpError>>, Fail> {
    let current = read_rule(tx, &put.account_id).await?;
    if current.as_ref().map(|c| c.version) != put.expected_version {
        return Ok(End::Rollback(Err(PutAutoTopUpError::Conflict)));
    }
    let method = match method_for(tx, put).await? {
        Ok(method) => method,
        Err(e) => return Ok(End::Rollback(Err(e))),
    };
    let rule = &put.rule;
    let now = put.at.unix_millis();
    let sql = if current.is_none() {
        count_rule(tx, &put.account_id, put.at).await?;
        format!(
            "INSERT INTO auto_top_ups ({RULE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, \
             $8, 0, 0, 0, NULL, NULL, 1, $9, $10)"
        )
    } else {
        // Turning the rule on (again) forgets why Tally turned it off, its declines and its
        // cool-off; the month's counts stay.
        "UPDATE auto_top_ups SET enabled = $2, threshold_hundredths = $3, plan_id = $4, \
         max_per_month = $5, max_amount_minor = $6, method_id = $7, \
         disabled_reason = CASE WHEN $2 THEN NULL ELSE disabled_reason END, \
         declines = CASE WHEN $2 THEN 0 ELSE declines END, \
         cool_off_until = CASE WHEN $2 THEN NULL ELSE cool_off_until END, \
         month_count = CASE WHEN month_start < $8 THEN 0 ELSE month_count END, \
         month_amount_minor = CASE WHEN month_start < $8 THEN 0 ELSE month_amount_minor END, \
         month_start = CASE WHEN month_start < $8 THEN $8 ELSE month_start END, \
         version = version + 1, updated_by = $9, updated_at = $10 WHERE account_id = $1"
            .to_owned()
    };
    let values = vec![
        put.account_id.as_str().into(),
        rule.enabled.into(),
        rule.threshold.hundredths().into(),
        rule.plan.as_str().into(),
        i64::from(rule.max_per_month).into(),
        rule.max_amount_per_month.into(),
        method.into(),
        domain::LimitWindow::Month
            .start_of(put.at)
            .unix_millis()
            .into(),
        put.by.as_str().into(),
        now.into(),
    ];
    sql::execute(tx, &sql, values).await?;
    Ok(End::Commit(Ok(())))
}

async fn start_in(tx: &DatabaseTransaction, start: &StartTopUp) -> Result<End<bool>, Fail> {
    let state = start.state;
    let sql = "UPDATE auto_top_ups SET month_start = $3, month_count = $4, \
               month_amount_minor = $5, version = version + 1, updated_at = $6 \
               WHERE account_id = $1 AND version = $2";
    let values = vec![
        start.top_up.account_id.as_str().into(),
        start.expected_version.into(),
        state.month_start.unix_millis().into(),
        i64::from(state.month_count).into(),
        state.month_amount.into(),
        start.order.created_at().unix_millis().into(),
    ];
    if sql::execute(tx, sql, values).await? == 0 {
        return Ok(End::Rollback(false));
    }
    crate::orders::insert(tx, &start.order).await?;
    let price = start.order.plan().price;
    let sql = "UPDATE top_up_intents SET status = $2, order_id = $3, amount_minor = $4, \
               currency = $5, updated_at = $6, credits_hundredths = $8, claimed_until = $9 \
               WHERE id = $1 AND status = $7";
    let values = vec![
        start.top_up.id.as_str().into(),
        TopUpStatus::Charging.code().into(),
        start.order.id().as_str().into(),
        price.amount_minor().into(),
        price.currency().code().into(),
        start.order.created_at().unix_millis().into(),
        TopUpStatus::Requested.code().into(),
        start.order.plan().credits.map(|c| c.hundredths()).into(),
        start.retry_at.unix_millis().into(),
    ];
    if sql::execute(tx, sql, values).await? == 0 {
        return Ok(End::Rollback(false));
    }
    Ok(End::Commit(true))
}

#[async_trait]
impl TopUpStore for SeaOrmStore {
    async fn auto_top_up(
        &self,
        account: &AccountId,
    ) -> Result<Option<AutoTopUpRecord>, StoreError> {
        self.retry
            .run("auto_top_up", || async {
                read_rule(&self.db, account).await
            })
            .await
    }

    async fn saved_methods(
        &self,
        account: &AccountId,
    ) -> Result<Vec<SavedMethodRecord>, StoreError> {
        self.retry
            .run("saved_methods", || async {
                let sql = format!(
                    "SELECT {METHOD_COLUMNS} FROM saved_payment_methods WHERE account_id = $1 \
                     ORDER BY created_at DESC, id DESC"
                );
                let rows = sql::rows(&self.db, &sql, vec![account.as_str().into()]).await?;
                rows.iter().map(method).collect()
            })
            .await
    }

    async fn put_auto_top_up(
        &self,
        put: &PutAutoTopUp,
    ) -> Result<AutoTopUpRecord, PutAutoTopUpError> {
        self.retry
            .run("put_auto_top_up", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = put_in(&tx, put).await;
                sql::finish(tx, body).await
            })
            .await??;
        self.auto_top_up(&put.account_id)
            .await?
            .ok_or(PutAutoTopUpError::Store(StoreError::NotFound))
    }

    async fn claim_top_ups(
        &self,
        now: Timestamp,
        (lease_ms, retry_ms): (i64, i64),
        limit: u32,
    ) -> Result<Vec<TopUpRecord>, StoreError> {
        let lock = match self.backend() {
            sea_orm::DbBackend::Postgres => " FOR UPDATE SKIP LOCKED",
            _ => "",
        };
        let sql = format!(
            "UPDATE top_up_intents SET claimed_until = CASE WHEN status = $5 THEN $6 ELSE $2 END \
             WHERE id IN (SELECT id FROM top_up_intents WHERE status IN ($4, $5) \
             AND (claimed_until IS NULL OR claimed_until < $1) \
             ORDER BY created_at, id LIMIT $3{lock}) RETURNING {TOP_UP_COLUMNS}"
        );
        // A read first: an idle pass takes no write lock (one SQLite writer).
        let waiting = "SELECT COUNT(*) AS n FROM (SELECT 1 FROM top_up_intents \
                       WHERE status IN ($2, $3) AND (claimed_until IS NULL OR claimed_until < $1) \
                       LIMIT 1) AS w";
        self.retry
            .run("claim_top_ups", || async {
                let values = vec![
                    now.unix_millis().into(),
                    TopUpStatus::Requested.code().into(),
                    TopUpStatus::Charging.code().into(),
                ];
                if sql::one_i64(&self.db, waiting, values, "n")
                    .await?
                    .unwrap_or(0)
                    == 0
                {
                    return Ok(Vec::new());
                }
                let values = vec![
                    now.unix_millis().into(),
                    now.plus_millis(lease_ms).unix_millis().into(),
                    i64::from(limit).into(),
                    TopUpStatus::Requested.code().into(),
                    TopUpStatus::Charging.code().into(),
                    now.plus_millis(retry_ms).unix_millis().into(),
                ];
                let rows = sql::rows(&self.db, &sql, values).await?;
                let mut claimed = rows.iter().map(top_up).collect::<Result<Vec<_>, _>>()?;
                claimed.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                Ok(claimed)
            })
            .await
    }

    async fn start_top_up(&self, start: &StartTopUp) -> Result<bool, StoreError> {
        self.retry
            .run("start_top_up", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = start_in(&tx, start).await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn keep_charge_reference(
        &self,
        order: &OrderId,
        reference: &str,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE orders SET provider_reference = $2 \
                   WHERE id = $1 AND provider_reference IS NULL";
        let values = vec![order.as_str().into(), reference.into()];
        self.run_execute("keep_charge_reference", sql, values)
            .await
            .map(drop)
    }

    async fn top_up_of_order(&self, order: &OrderId) -> Result<Option<TopUpRecord>, StoreError> {
        self.retry
            .run("top_up_of_order", || async {
                let sql =
                    format!("SELECT {TOP_UP_COLUMNS} FROM top_up_intents WHERE order_id = $1");
                let rows = sql::rows(&self.db, &sql, vec![order.as_str().into()]).await?;
                rows.first().map(top_up).transpose()
            })
            .await
    }

    async fn top_ups(
        &self,
        account: &AccountId,
        limit: u32,
    ) -> Result<Vec<TopUpRecord>, StoreError> {
        self.retry
            .run("top_ups", || async {
                let sql = format!(
                    "SELECT {TOP_UP_COLUMNS} FROM top_up_intents WHERE account_id = $1 \
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                );
                let values = vec![account.as_str().into(), i64::from(limit).into()];
                let rows = sql::rows(&self.db, &sql, values).await?;
                rows.iter().map(top_up).collect()
            })
            .await
    }
}
