//! The admin console's port: customer search, every order, every team account, a
//! customer's ledger and the webhook inbox by keyset, payment totals, and the audit log.
//!
//! Every list is one index range walked in the order of the index and stopped after a page
//! (step 12's indexes, besides `orders_user_created`, `credit_transactions_user_created`, the
//! inbox's of step 6 and step 29's `accounts_kind_created` for the team accounts): the keyset
//! condition is a row comparison `(created_at, id) < ($a, $b)`, which both databases turn into an
//! index bound, and the SQL names only the filters given, so a PostgreSQL plan never has to serve
//! a `$n IS NULL OR …` mix.
//!
//! Customer search compares e-mails byte by byte (code point order): on PostgreSQL with the
//! `text_pattern_ops` operators (`~>=~`, `~<~`), which the step-12 index serves whatever the
//! database's collation; on SQLite with the default `BINARY` collation. An e-mail match and an
//! id match are two index ranges, merged here.

mod audited;

pub(crate) use audited::write;

use application::accounts::User;
use application::cursor::{Keyset, KeysetPage};
use application::ports::{
    AdjustCommand, AdminConsoleStore, AuditAction, AuditEntry, AuditFacts, AuditValue,
    CreditTransaction, CustomerSearch, EmailKey, IdMatch, InboxFilter, LedgerEffect, NewAudit,
    OrderFilter, OrderRecord, PaymentTotal, RecordedEvent, Refusal, StoreError, TeamAccountSummary,
    TimeNumberKey, TimeTextKey,
};
use async_trait::async_trait;
use domain::{AccountKind, Currency, OrderStatusKind, Timestamp, UserId};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbBackend, FromQueryResult, Value};

use crate::SeaOrmStore;
use crate::accounts::{TEAM_SUMMARY_COLUMNS, TeamAccountRow};
use crate::events::InboxRow;
use crate::ledger::{Spent, adjust_hash, adjust_in};
use crate::retry::Fail;
use crate::rows::{
    ORDER_COLUMNS, OrderRow, TRANSACTION_COLUMNS, TransactionRow, USER_COLUMNS, UserRow, corrupt,
};
use crate::sql::{self, End};

/// The largest code point: appended to a prefix, the end of its range.
const PREFIX_END: char = '\u{10FFFF}';

/// Comparison operators that compare text byte by byte on `backend`.
struct ByteOrder {
    ge: &'static str,
    lt: &'static str,
    gt: &'static str,
    /// `ORDER BY` suffix for ascending byte order.
    asc: &'static str,
}

fn byte_order(backend: DbBackend) -> ByteOrder {
    match backend {
        DbBackend::Postgres => ByteOrder {
            ge: "~>=~",
            lt: "~<~",
            gt: "~>~",
            asc: " USING ~<~",
        },
        _ => ByteOrder {
            ge: ">=",
            lt: "<",
            gt: ">",
            asc: "",
        },
    }
}

/// A `WHERE` clause being built with numbered placeholders.
#[derive(Default)]
struct Conditions {
    parts: Vec<String>,
    values: Vec<Value>,
}

impl Conditions {
    /// Add `template` with each `?` replaced by the next placeholder, bound to `values`.
    fn add(&mut self, template: &str, values: Vec<Value>) {
        let mut text = String::new();
        for (i, piece) in template.split('?').enumerate() {
            if i > 0 {
                text.push_str(&format!("${}", self.values.len() + i));
            }
            text.push_str(piece);
        }
        self.values.extend(values);
        self.parts.push(text);
    }

    /// ` WHERE …` (empty without conditions), then ` LIMIT $n` bound to `limit`.
    fn finish(mut self, order_by: &str, limit: u32) -> (String, Vec<Value>) {
        let mut sql = String::new();
        if !self.parts.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&self.parts.join(" AND "));
        }
        self.values.push(i64::from(limit).into());
        sql.push_str(&format!(
            " ORDER BY {order_by} LIMIT ${}",
            self.values.len()
        ));
        (sql, self.values)
    }
}

fn users(rows: Vec<UserRow>) -> Result<Vec<User>, StoreError> {
    rows.into_iter()
        .map(|r| r.into_domain().map(|(user, _)| user))
        .collect()
}

fn email_key(user: &User) -> EmailKey {
    (user.email.as_str().to_lowercase(), user.id.to_string())
}

/// The SQL of one search range (`column` from `$1` up to `$2`) after the keyset, by e-mail.
fn search_sql(backend: DbBackend, column: &str, after: bool, fetch: u32) -> (String, i64) {
    let o = byte_order(backend);
    // `(email, id) > ($3, $4)`, spelled so that `email >= $3` bounds the index range: a page
    // deep in a long match starts where the previous one ended instead of scanning to it.
    let keyset = if after {
        format!(
            " AND lower(email) {ge} $3 AND (lower(email) {gt} $3 OR id {gt} $4)",
            ge = o.ge,
            gt = o.gt
        )
    } else {
        String::new()
    };
    let limit = if after { "$5" } else { "$3" };
    let sql = format!(
        "SELECT {USER_COLUMNS} FROM users WHERE {column} {ge} $1 AND {column} {lt} $2{keyset} \
         ORDER BY lower(email){asc}, id{asc} LIMIT {limit}",
        ge = o.ge,
        lt = o.lt,
        asc = o.asc,
    );
    (sql, i64::from(fetch))
}

fn audit_json(facts: Option<&AuditFacts>) -> Option<String> {
    facts.map(|f| {
        let map: serde_json::Map<String, serde_json::Value> = f
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    AuditValue::Text(t) => serde_json::Value::String(t.clone()),
                    AuditValue::Integer(n) => serde_json::Value::from(*n),
                    AuditValue::Null => serde_json::Value::Null,
                };
                (k.clone(), value)
            })
            .collect();
        serde_json::Value::Object(map).to_string()
    })
}

const INSERT_AUDIT: &str = "INSERT INTO admin_audit (admin_id, action, object_kind, object_id, \
    before_state, after_state, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id";

/// Write `entry` on `conn` (inside the action's transaction); returns its id.
pub(crate) async fn insert_audit<C: ConnectionTrait>(
    conn: &C,
    entry: &NewAudit,
) -> Result<i64, Fail> {
    let values = vec![
        entry.admin_id.as_str().into(),
        entry.action.code().into(),
        entry.object_kind.into(),
        entry.object_id.clone().into(),
        audit_json(entry.before.as_ref()).into(),
        audit_json(entry.after.as_ref()).into(),
        entry.at.unix_millis().into(),
    ];
    let id = sql::one_i64(conn, INSERT_AUDIT, values, "id").await?;
    id.ok_or_else(|| Fail::Store(StoreError::Unexpected(anyhow::anyhow!("no audit id"))))
}

/// The scope of an administrator's adjustment keys in `idempotency_records`.
const ADJUST_SCOPE: &str = "admin_adjustment";

/// An administrator's adjustment and the host event telling it, in `tx`. The key is the
/// administrator's, recorded with the target user and the request: used again for the same
/// adjustment it answers `Nothing` (rolling back); for another user, amount, reason or expiry
/// it is a conflict.
pub(crate) async fn adjust_keyed(
    tx: &DatabaseTransaction,
    command: &AdjustCommand,
    admin: &UserId,
    events: &crate::Enc,
) -> Result<End<Spent<LedgerEffect>>, Fail> {
    let hash = format!("{}|{}", command.account_id, adjust_hash(command));
    let sql = "SELECT request_hash FROM idempotency_records \
               WHERE user_id = $1 AND scope = $2 AND idempotency_key = $3";
    let key = vec![
        admin.as_str().into(),
        ADJUST_SCOPE.into(),
        command.reference.as_str().into(),
    ];
    if let Some(seen) = sql::one::<RequestHashRow, _>(tx, sql, key.clone()).await? {
        let earlier = if seen.request_hash == hash {
            Spent::Done(LedgerEffect::Nothing)
        } else {
            Spent::Refused(Refusal::KeyConflict)
        };
        return Ok(End::Rollback(earlier));
    }
    let decided = adjust_in(tx, command, events).await?;
    if let End::Commit(Spent::Done(LedgerEffect::Written(_))) = &decided {
        let sql = "INSERT INTO idempotency_records (user_id, scope, idempotency_key, \
                   request_hash, order_id, created_at) VALUES ($1, $2, $3, $4, NULL, $5) \
                   ON CONFLICT DO NOTHING";
        let mut values = key;
        values.extend([Value::from(hash), Value::from(command.now.unix_millis())]);
        if sql::execute(tx, sql, values).await? == 0 {
            return Err(Fail::Retry("a concurrent adjustment used the same key"));
        }
    }
    Ok(decided)
}

#[derive(Debug, FromQueryResult)]
struct RequestHashRow {
    request_hash: String,
}

/// An `admin_audit` row.
#[derive(Debug, FromQueryResult)]
struct AuditRow {
    id: i64,
    admin_id: String,
    action: String,
    object_kind: String,
    object_id: String,
    before_state: Option<String>,
    after_state: Option<String>,
    created_at: i64,
}

impl AuditRow {
    fn into_domain(self) -> Result<AuditEntry, StoreError> {
        let id = self.id.to_string();
        let admin_id = UserId::new(self.admin_id).map_err(|e| corrupt("admin_audit", &id, e))?;
        let action = AuditAction::from_code(&self.action).ok_or_else(|| {
            corrupt(
                "admin_audit",
                &id,
                format_args!("unknown action {}", self.action),
            )
        })?;
        Ok(AuditEntry {
            id: self.id,
            admin_id,
            action,
            object_kind: self.object_kind,
            object_id: self.object_id,
            before: self.before_state,
            after: self.after_state,
            at: Timestamp::from_unix_millis(self.created_at),
        })
    }
}

/// A row of [`AdminConsoleStore::payment_totals`].
#[derive(Debug, FromQueryResult)]
struct TotalRow {
    currency: String,
    paid_minor: i64,
    refunded_minor: i64,
}

/// Orders paid (whatever was refunded since) and renewal charges (a first period's charge is its
/// order's payment, counted once), summed per currency. `$2` to `$4` are
/// [`OrderStatusKind::PAYMENT_ARRIVED`].
const PAYMENT_TOTALS: &str = "SELECT currency, CAST(SUM(paid) AS BIGINT) AS paid_minor, \
    CAST(SUM(refunded) AS BIGINT) AS refunded_minor FROM ( \
      SELECT currency, amount_minor AS paid, refunded_minor AS refunded FROM orders \
      WHERE user_id = $1 AND status IN ($2, $3, $4) \
      UNION ALL \
      SELECT c.currency, c.amount_minor, c.refunded_minor FROM subscription_charges c \
      JOIN subscriptions s ON s.id = c.subscription_id \
      WHERE s.user_id = $1 AND c.order_id IS NULL \
    ) payments GROUP BY currency ORDER BY currency";

impl SeaOrmStore {
    /// One search range of users, by e-mail, after the keyset.
    async fn search_range(
        &self,
        column: &str,
        prefix: &str,
        keyset: &Keyset<EmailKey>,
    ) -> Result<Vec<User>, StoreError> {
        let (sql, fetch) = search_sql(
            self.backend(),
            column,
            keyset.after.is_some(),
            keyset.fetch(),
        );
        let mut values: Vec<Value> = vec![prefix.into(), format!("{prefix}{PREFIX_END}").into()];
        if let Some((email, id)) = &keyset.after {
            values.push(email.clone().into());
            values.push(id.clone().into());
        }
        values.push(fetch.into());
        users(
            self.fetch_all::<UserRow>("search_users", &sql, values)
                .await?,
        )
    }
}

impl SeaOrmStore {
    /// The user with id `id`, if it lies after the keyset.
    async fn exact_id(&self, id: &str, keyset: &Keyset<EmailKey>) -> Result<Vec<User>, StoreError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        let found = users(
            self.fetch_all::<UserRow>("search_users", &sql, vec![id.into()])
                .await?,
        )?;
        Ok(found
            .into_iter()
            .filter(|u| {
                keyset
                    .after
                    .as_ref()
                    .is_none_or(|after| email_key(u) > *after)
            })
            .collect())
    }
}

#[async_trait]
impl AdminConsoleStore for SeaOrmStore {
    async fn search_users(
        &self,
        search: &CustomerSearch,
        keyset: &Keyset<EmailKey>,
    ) -> Result<KeysetPage<User, EmailKey>, StoreError> {
        let mut found = self
            .search_range("lower(email)", &search.email_prefix, keyset)
            .await?;
        let by_id = match &search.id {
            IdMatch::None => None,
            IdMatch::Prefix(prefix) => Some(self.search_range("id", prefix, keyset).await?),
            IdMatch::Exact(id) => Some(self.exact_id(id, keyset).await?),
        };
        if let Some(by_id) = by_id {
            found.extend(by_id);
            found.sort_by_key(email_key);
            found.dedup_by(|a, b| a.id == b.id);
            found.truncate(keyset.fetch() as usize);
        }
        Ok(KeysetPage::from_rows(found, keyset.limit, email_key))
    }

    async fn list_users(
        &self,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<User, TimeTextKey>, StoreError> {
        let mut conditions = Conditions::default();
        if let Some((at, id)) = &keyset.after {
            conditions.add(
                "(created_at, id) < (?, ?)",
                vec![(*at).into(), id.clone().into()],
            );
        }
        let (tail, values) = conditions.finish("created_at DESC, id DESC", keyset.fetch());
        let sql = format!("SELECT {USER_COLUMNS} FROM users{tail}");
        let rows = users(
            self.fetch_all::<UserRow>("list_users", &sql, values)
                .await?,
        )?;
        Ok(KeysetPage::from_rows(rows, keyset.limit, |u| {
            (u.created_at.unix_millis(), u.id.to_string())
        }))
    }

    async fn payment_totals(&self, user: &UserId) -> Result<Vec<PaymentTotal>, StoreError> {
        let mut values: Vec<Value> = vec![user.as_str().into()];
        values.extend(OrderStatusKind::PAYMENT_ARRIVED.map(|s| s.code().into()));
        let rows: Vec<TotalRow> = self
            .fetch_all("payment_totals", PAYMENT_TOTALS, values)
            .await?;
        rows.into_iter()
            .map(|r| {
                let currency = r
                    .currency
                    .parse::<Currency>()
                    .map_err(|e| corrupt("orders", user.as_str(), e))?;
                Ok(PaymentTotal {
                    currency,
                    paid_minor: r.paid_minor,
                    refunded_minor: r.refunded_minor,
                })
            })
            .collect()
    }

    async fn orders_page(
        &self,
        filter: &OrderFilter,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<OrderRecord, TimeTextKey>, StoreError> {
        let mut conditions = Conditions::default();
        if let Some(status) = filter.status {
            conditions.add("status = ?", vec![status.code().into()]);
        }
        if let Some(provider) = filter.provider {
            conditions.add("provider = ?", vec![provider.as_str().into()]);
        }
        if let Some(user) = &filter.user_id {
            conditions.add("user_id = ?", vec![user.as_str().into()]);
        }
        if let Some((at, id)) = &keyset.after {
            conditions.add(
                "(created_at, id) < (?, ?)",
                vec![(*at).into(), id.clone().into()],
            );
        }
        let (tail, values) = conditions.finish("created_at DESC, id DESC", keyset.fetch());
        let sql = format!("SELECT {ORDER_COLUMNS} FROM orders{tail}");
        let rows: Vec<OrderRow> = self.fetch_all("orders_page", &sql, values).await?;
        let records = rows
            .into_iter()
            .map(OrderRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeysetPage::from_rows(records, keyset.limit, |r| {
            (r.order.created_at().unix_millis(), r.order.id().to_string())
        }))
    }

    async fn team_accounts(
        &self,
        keyset: &Keyset<TimeTextKey>,
    ) -> Result<KeysetPage<TeamAccountSummary, TimeTextKey>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.add("a.kind = ?", vec![AccountKind::Team.code().into()]);
        if let Some((at, id)) = &keyset.after {
            conditions.add(
                "(a.created_at, a.id) < (?, ?)",
                vec![(*at).into(), id.clone().into()],
            );
        }
        let (tail, values) = conditions.finish("a.created_at DESC, a.id DESC", keyset.fetch());
        let sql = format!(
            "SELECT {TEAM_SUMMARY_COLUMNS} FROM accounts a \
             LEFT JOIN credit_balances b ON b.account_id = a.id{tail}"
        );
        let rows: Vec<TeamAccountRow> = self.fetch_all("team_accounts", &sql, values).await?;
        let items = rows
            .into_iter()
            .map(TeamAccountRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeysetPage::from_rows(items, keyset.limit, |t| {
            (t.account.created_at.unix_millis(), t.account.id.to_string())
        }))
    }

    async fn transactions_page(
        &self,
        user: &UserId,
        keyset: &Keyset<TimeNumberKey>,
    ) -> Result<KeysetPage<CreditTransaction, TimeNumberKey>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.add("account_id = ?", vec![user.as_str().into()]);
        if let Some((at, id)) = keyset.after {
            conditions.add("(created_at, id) < (?, ?)", vec![at.into(), id.into()]);
        }
        let (tail, values) = conditions.finish("created_at DESC, id DESC", keyset.fetch());
        let sql = format!("SELECT {TRANSACTION_COLUMNS} FROM credit_transactions{tail}");
        let rows: Vec<TransactionRow> = self.fetch_all("transactions_page", &sql, values).await?;
        let items = rows
            .into_iter()
            .map(TransactionRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeysetPage::from_rows(items, keyset.limit, |t| {
            (t.created_at.unix_millis(), t.id)
        }))
    }

    async fn inbox_page(
        &self,
        filter: &InboxFilter,
        keyset: &Keyset<i64>,
    ) -> Result<KeysetPage<RecordedEvent, i64>, StoreError> {
        let mut conditions = Conditions::default();
        if let Some(provider) = filter.provider {
            conditions.add("provider = ?", vec![provider.as_str().into()]);
        }
        if let Some(outcome) = filter.outcome {
            conditions.add("outcome = ?", vec![outcome.code().into()]);
        }
        if let Some(id) = keyset.after {
            conditions.add("id < ?", vec![id.into()]);
        }
        let (tail, values) = conditions.finish("id DESC", keyset.fetch());
        let sql = format!("SELECT {INBOX_COLUMNS} FROM webhook_inbox{tail}");
        let rows: Vec<InboxRow> = self.fetch_all("inbox_page", &sql, values).await?;
        let items = rows
            .into_iter()
            .map(InboxRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeysetPage::from_rows(items, keyset.limit, |e| e.id))
    }

    async fn find_recorded_event(&self, id: i64) -> Result<Option<RecordedEvent>, StoreError> {
        let sql = format!("SELECT {INBOX_COLUMNS} FROM webhook_inbox WHERE id = $1");
        let row: Option<InboxRow> = self
            .fetch_one("find_recorded_event", &sql, vec![id.into()])
            .await?;
        row.map(InboxRow::into_domain).transpose()
    }

    async fn record_audit(&self, entry: &NewAudit) -> Result<i64, StoreError> {
        self.retry
            .run("record_audit", || insert_audit(&self.db, entry))
            .await
    }

    async fn audit_page(
        &self,
        keyset: &Keyset<i64>,
    ) -> Result<KeysetPage<AuditEntry, i64>, StoreError> {
        let mut conditions = Conditions::default();
        if let Some(id) = keyset.after {
            conditions.add("id < ?", vec![id.into()]);
        }
        let (tail, values) = conditions.finish("id DESC", keyset.fetch());
        let sql = format!(
            "SELECT id, admin_id, action, object_kind, object_id, before_state, after_state, \
             created_at FROM admin_audit{tail}"
        );
        let rows: Vec<AuditRow> = self.fetch_all("audit_page", &sql, values).await?;
        let items = rows
            .into_iter()
            .map(AuditRow::into_domain)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeysetPage::from_rows(items, keyset.limit, |e| e.id))
    }
}

/// The columns of [`InboxRow`].
const INBOX_COLUMNS: &str =
    "id, provider, event_id, event_type, payload, outcome, detail, received_at";
