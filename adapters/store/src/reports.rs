//! The admin overview's aggregates (`ReportRepository`): one `GROUP BY` statement per report,
//! the same SQL on SQLite and PostgreSQL.
//!
//! Days are `column / 86400000` (integer division of epoch milliseconds: whole UTC days, the
//! same on both backends, no date functions); months are folded from days by the use case. Every
//! statement restricts one time column to the window with `>= $1 AND < $2`, a range an index on
//! that column can serve. An amount's sum is read in two parts (`split_sums`) that cannot
//! overflow `BIGINT` on either database and is put together in `i128`: a day may add up to more
//! than any one balance holds, and a report never fails for it.

use application::ports::{
    ConsumptionDimension, ConsumptionShare, CreditsDay, ReportRepository, ReportWindow, RevenueDay,
    SpendDay, StoreError, SubscriptionsDay,
};
use async_trait::async_trait;
use domain::{
    AccountId, CreditsTotal, Currency, OrderStatusKind, SubscriptionStatus, TransactionKind,
};
use sea_orm::{FromQueryResult, Value};

use crate::SeaOrmStore;
use crate::rows::corrupt;

/// Payments: paid orders by their payment time, and renewal charges (a first period's charge
/// is its order, counted once). `{sums}` is [`split_sums`] of the amounts; `$3` to `$5` are
/// [`OrderStatusKind::PAYMENT_ARRIVED`].
const REVENUE_SQL: &str = "SELECT day, currency, {sums} FROM ( \
        SELECT paid_at / 86400000 AS day, currency, amount_minor, refunded_minor FROM orders \
        WHERE paid_at >= $1 AND paid_at < $2 \
          AND status IN ($3, $4, $5) \
        UNION ALL \
        SELECT paid_at / 86400000 AS day, currency, amount_minor, refunded_minor \
        FROM subscription_charges \
        WHERE paid_at >= $1 AND paid_at < $2 AND order_id IS NULL \
    ) payments GROUP BY day, currency ORDER BY day, currency";

/// The codes of the transaction kinds `pick` keeps, quoted for an `IN (…)` list: the kinds
/// are the domain's (`TransactionKind::code`), never input.
fn kinds(pick: fn(TransactionKind) -> bool) -> String {
    let codes: Vec<String> = TransactionKind::ALL
        .into_iter()
        .filter(|k| pick(*k))
        .map(|k| format!("'{}'", k.code()))
        .collect();
    codes.join(", ")
}

/// Granted: every increase but a reservation's returns.
fn granted() -> String {
    format!(
        "CASE WHEN amount_hundredths > 0 AND kind NOT IN ({}) THEN amount_hundredths ELSE 0 END",
        kinds(TransactionKind::returns_a_hold)
    )
}

/// Consumed: the usage kinds, negated.
fn consumed() -> String {
    format!(
        "CASE WHEN kind IN ({}) THEN -amount_hundredths ELSE 0 END",
        kinds(TransactionKind::is_usage)
    )
}

/// Granted and consumed per day; `{sums}` is [`split_sums`] of [`granted`] and [`consumed`].
const CREDITS_SQL: &str = "SELECT created_at / 86400000 AS day, {sums} \
    FROM credit_transactions WHERE created_at >= $1 AND created_at < $2 \
    GROUP BY created_at / 86400000 ORDER BY day";

/// Started and ended subscriptions per day; `$3` and `$4` are the ended statuses.
const SUBSCRIPTIONS_SQL: &str = "SELECT day, CAST(SUM(started) AS BIGINT) AS started, \
    CAST(SUM(ended) AS BIGINT) AS ended FROM ( \
        SELECT created_at / 86400000 AS day, 1 AS started, 0 AS ended FROM subscriptions \
        WHERE created_at >= $1 AND created_at < $2 \
        UNION ALL \
        SELECT updated_at / 86400000 AS day, 0 AS started, 1 AS ended FROM subscriptions \
        WHERE updated_at >= $1 AND updated_at < $2 AND status IN ($3, $4) \
    ) changes GROUP BY day ORDER BY day";

/// `{column}` is `feature` or `model`, chosen from an enum, never from input; `{usage}` the
/// usage kinds ([`kinds`]); `{sums}` is
/// [`split_sums`] of the amounts consumed and `{total}` their whole sum, which PostgreSQL
/// computes as `NUMERIC` and SQLite, past `i64`, as an approximate number: used only to keep
/// and order the shares, never read.
const CONSUMPTION_SQL: &str = "SELECT {column} AS name, {sums} FROM credit_transactions \
    WHERE created_at >= $1 AND created_at < $2 AND kind IN ({usage}) \
    GROUP BY {column} HAVING {total} > 0 ORDER BY {total} DESC, name LIMIT $3";

/// What one account's usage spent per day and `{column}` (`feature` or `model`, from an enum);
/// `{usage}` and `{sums}` as in [`CONSUMPTION_SQL`]. The account's transactions by time are
/// the range `credit_transactions_user_created` serves.
const ACCOUNT_SPEND_SQL: &str = "SELECT created_at / 86400000 AS day, {column} AS name, {sums} \
    FROM credit_transactions WHERE account_id = $1 AND created_at >= $2 AND created_at < $3 \
    AND kind IN ({usage}) GROUP BY created_at / 86400000, {column} ORDER BY day, name";

/// Where a sum is split: each part's sum fits `i64` for any number of rows a day can hold.
const SPLIT: i64 = 1_000_000_000;

/// The sum of `expression` as two columns `<name>_high` (the sum of its quotients by
/// [`SPLIT`]) and `<name>_low` (of its remainders), so that neither database overflows
/// `BIGINT` however large the whole is (SQLite's `SUM` fails on an overflow, PostgreSQL's cast
/// back to `BIGINT` would); [`whole`] puts them together in `i128`. Quotient and remainder
/// truncate toward zero on both databases, so `high * SPLIT + low` is the exact sum.
fn split_sums(parts: &[(&str, &str)]) -> String {
    let sums: Vec<String> = parts
        .iter()
        .map(|(expression, name)| {
            format!(
                "CAST(SUM(({expression}) / {SPLIT}) AS BIGINT) AS {name}_high, \
                 CAST(SUM(({expression}) % {SPLIT}) AS BIGINT) AS {name}_low"
            )
        })
        .collect();
    sums.join(", ")
}

/// The column a dimension groups by.
fn column_of(dimension: ConsumptionDimension) -> &'static str {
    match dimension {
        ConsumptionDimension::Feature => "feature",
        ConsumptionDimension::Model => "model",
    }
}

#[derive(Debug, FromQueryResult)]
struct SpendRow {
    day: i64,
    name: Option<String>,
    spent_high: i64,
    spent_low: i64,
}

/// The whole of a split sum.
fn whole(high: i64, low: i64) -> i128 {
    i128::from(high) * i128::from(SPLIT) + i128::from(low)
}

#[derive(Debug, FromQueryResult)]
struct RevenueRow {
    day: i64,
    currency: String,
    paid_high: i64,
    paid_low: i64,
    refunded_high: i64,
    refunded_low: i64,
}

#[derive(Debug, FromQueryResult)]
struct CreditsRow {
    day: i64,
    granted_high: i64,
    granted_low: i64,
    consumed_high: i64,
    consumed_low: i64,
}

#[derive(Debug, FromQueryResult)]
struct SubscriptionsRow {
    day: i64,
    started: i64,
    ended: i64,
}

#[derive(Debug, FromQueryResult)]
struct ShareRow {
    name: Option<String>,
    consumed_high: i64,
    consumed_low: i64,
}

fn window_values(window: ReportWindow) -> Vec<Value> {
    vec![
        window.from.unix_millis().into(),
        window.until.unix_millis().into(),
    ]
}

/// A day's money in minor units; beyond `i64` (no real day comes near) it saturates.
fn minor(high: i64, low: i64) -> i64 {
    let sum = whole(high, low);
    i64::try_from(sum).unwrap_or(if sum < 0 { i64::MIN } else { i64::MAX })
}

#[async_trait]
impl ReportRepository for SeaOrmStore {
    async fn revenue_by_day(&self, window: ReportWindow) -> Result<Vec<RevenueDay>, StoreError> {
        let sums = split_sums(&[("amount_minor", "paid"), ("refunded_minor", "refunded")]);
        let sql = REVENUE_SQL.replace("{sums}", &sums);
        let mut values = window_values(window);
        values.extend(OrderStatusKind::PAYMENT_ARRIVED.map(|s| s.code().into()));
        let rows: Vec<RevenueRow> = self.fetch_all("revenue_by_day", &sql, values).await?;
        rows.into_iter()
            .map(|r| {
                let currency: Currency = r
                    .currency
                    .parse()
                    .map_err(|e| corrupt("orders", &r.currency, e))?;
                Ok(RevenueDay {
                    day: r.day,
                    currency,
                    paid_minor: minor(r.paid_high, r.paid_low),
                    refunded_minor: minor(r.refunded_high, r.refunded_low),
                })
            })
            .collect()
    }

    async fn credits_by_day(&self, window: ReportWindow) -> Result<Vec<CreditsDay>, StoreError> {
        let sums = split_sums(&[(&granted(), "granted"), (&consumed(), "consumed")]);
        let sql = CREDITS_SQL.replace("{sums}", &sums);
        let rows: Vec<CreditsRow> = self
            .fetch_all("credits_by_day", &sql, window_values(window))
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| CreditsDay {
                day: r.day,
                granted: CreditsTotal::from_hundredths(whole(r.granted_high, r.granted_low)),
                consumed: CreditsTotal::from_hundredths(whole(r.consumed_high, r.consumed_low)),
            })
            .collect())
    }

    async fn subscriptions_by_day(
        &self,
        window: ReportWindow,
    ) -> Result<Vec<SubscriptionsDay>, StoreError> {
        let mut values = window_values(window);
        values.extend(
            [SubscriptionStatus::Canceled, SubscriptionStatus::Expired].map(|s| s.code().into()),
        );
        let rows: Vec<SubscriptionsRow> = self
            .fetch_all("subscriptions_by_day", SUBSCRIPTIONS_SQL, values)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| SubscriptionsDay {
                day: r.day,
                started: u64::try_from(r.started).unwrap_or(0),
                ended: u64::try_from(r.ended).unwrap_or(0),
            })
            .collect())
    }

    async fn account_spend_by_day(
        &self,
        account: &AccountId,
        dimension: ConsumptionDimension,
        window: ReportWindow,
    ) -> Result<Vec<SpendDay>, StoreError> {
        let sql = ACCOUNT_SPEND_SQL
            .replace("{column}", column_of(dimension))
            .replace("{usage}", &kinds(TransactionKind::is_usage))
            .replace("{sums}", &split_sums(&[("-amount_hundredths", "spent")]));
        let mut values = vec![account.as_str().into()];
        values.extend(window_values(window));
        let rows: Vec<SpendRow> = self.fetch_all("account_spend_by_day", &sql, values).await?;
        Ok(rows
            .into_iter()
            .map(|r| SpendDay {
                day: r.day,
                name: r.name,
                spent: CreditsTotal::from_hundredths(whole(r.spent_high, r.spent_low)),
            })
            .collect())
    }

    async fn consumption_by(
        &self,
        dimension: ConsumptionDimension,
        window: ReportWindow,
        limit: u32,
    ) -> Result<Vec<ConsumptionShare>, StoreError> {
        let column = column_of(dimension);
        let spent = "-amount_hundredths";
        let total = format!("(SUM({spent} / {SPLIT}) * {SPLIT} + SUM({spent} % {SPLIT}))");
        let sql = CONSUMPTION_SQL
            .replace("{column}", column)
            .replace("{usage}", &kinds(TransactionKind::is_usage))
            .replace("{sums}", &split_sums(&[(spent, "consumed")]))
            .replace("{total}", &total);
        let mut values = window_values(window);
        values.push(i64::from(limit).into());
        let rows: Vec<ShareRow> = self.fetch_all("consumption_by", &sql, values).await?;
        Ok(rows
            .into_iter()
            .map(|r| ConsumptionShare {
                consumed: CreditsTotal::from_hundredths(whole(r.consumed_high, r.consumed_low)),
                name: r.name,
            })
            .collect())
    }
}
