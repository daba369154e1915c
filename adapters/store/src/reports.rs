//! The admin overview's aggregates (`ReportRepository`): one `GROUP BY` statement per report,
//! the same SQL on SQLite and PostgreSQL.
//!
//! Days are `column / 86400000` (integer division of epoch milliseconds: whole UTC days, the
//! same on both backends, no date functions); months are folded from days by the use case. Every
//! statement restricts one time column to the window with `>= $1 AND < $2`, a range an index on
//! that column can serve. Sums are cast to `BIGINT` because PostgreSQL sums `BIGINT`s as
//! `NUMERIC`.

use application::ports::{
    ConsumptionDimension, ConsumptionShare, CreditsDay, ReportRepository, ReportWindow, RevenueDay,
    StoreError, SubscriptionsDay,
};
use async_trait::async_trait;
use domain::{Credits, Currency};
use sea_orm::{FromQueryResult, Value};

use crate::SeaOrmStore;
use crate::rows::corrupt;

/// Payments: paid orders by their payment time, and renewal charges (a first period's charge
/// is its order, counted once).
const REVENUE_SQL: &str = "SELECT day, currency, CAST(SUM(amount_minor) AS BIGINT) AS paid_minor, \
    CAST(SUM(refunded_minor) AS BIGINT) AS refunded_minor FROM ( \
        SELECT paid_at / 86400000 AS day, currency, amount_minor, refunded_minor FROM orders \
        WHERE paid_at >= $1 AND paid_at < $2 \
          AND status IN ('paid', 'partially_refunded', 'refunded') \
        UNION ALL \
        SELECT paid_at / 86400000 AS day, currency, amount_minor, refunded_minor \
        FROM subscription_charges \
        WHERE paid_at >= $1 AND paid_at < $2 AND order_id IS NULL \
    ) payments GROUP BY day, currency ORDER BY day, currency";

/// Granted: every increase but a reservation's returns; consumed: the spend kinds, negated.
const CREDITS_SQL: &str = "SELECT created_at / 86400000 AS day, \
    CAST(SUM(CASE WHEN amount_hundredths > 0 AND kind NOT IN \
        ('reservation_settle', 'reservation_release') THEN amount_hundredths ELSE 0 END) \
        AS BIGINT) AS granted, \
    CAST(SUM(CASE WHEN kind IN ('consumption', 'reservation_hold', 'reservation_settle', \
        'reservation_release') THEN -amount_hundredths ELSE 0 END) AS BIGINT) AS consumed \
    FROM credit_transactions WHERE created_at >= $1 AND created_at < $2 \
    GROUP BY created_at / 86400000 ORDER BY day";

const SUBSCRIPTIONS_SQL: &str = "SELECT day, CAST(SUM(started) AS BIGINT) AS started, \
    CAST(SUM(ended) AS BIGINT) AS ended FROM ( \
        SELECT created_at / 86400000 AS day, 1 AS started, 0 AS ended FROM subscriptions \
        WHERE created_at >= $1 AND created_at < $2 \
        UNION ALL \
        SELECT updated_at / 86400000 AS day, 0 AS started, 1 AS ended FROM subscriptions \
        WHERE updated_at >= $1 AND updated_at < $2 AND status IN ('canceled', 'expired') \
    ) changes GROUP BY day ORDER BY day";

/// `{column}` is `feature` or `model`, chosen from an enum, never from input.
const CONSUMPTION_SQL: &str = "SELECT {column} AS name, \
    CAST(SUM(-amount_hundredths) AS BIGINT) AS consumed FROM credit_transactions \
    WHERE created_at >= $1 AND created_at < $2 AND kind IN ('consumption', \
        'reservation_hold', 'reservation_settle', 'reservation_release') \
    GROUP BY {column} HAVING SUM(-amount_hundredths) > 0 \
    ORDER BY consumed DESC, name LIMIT $3";

#[derive(Debug, FromQueryResult)]
struct RevenueRow {
    day: i64,
    currency: String,
    paid_minor: i64,
    refunded_minor: i64,
}

#[derive(Debug, FromQueryResult)]
struct CreditsRow {
    day: i64,
    granted: i64,
    consumed: i64,
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
    consumed: i64,
}

fn window_values(window: ReportWindow) -> Vec<Value> {
    vec![
        window.from.unix_millis().into(),
        window.until.unix_millis().into(),
    ]
}

/// Hundredths summed by the database; a negative sum (more returned than held that day) is
/// zero.
fn credits(table: &str, day: i64, hundredths: i64) -> Result<Credits, StoreError> {
    Credits::from_hundredths(hundredths.max(0)).map_err(|e| corrupt(table, &day.to_string(), e))
}

#[async_trait]
impl ReportRepository for SeaOrmStore {
    async fn revenue_by_day(&self, window: ReportWindow) -> Result<Vec<RevenueDay>, StoreError> {
        let rows: Vec<RevenueRow> = self
            .fetch_all("revenue_by_day", REVENUE_SQL, window_values(window))
            .await?;
        rows.into_iter()
            .map(|r| {
                let currency: Currency = r
                    .currency
                    .parse()
                    .map_err(|e| corrupt("orders", &r.currency, e))?;
                Ok(RevenueDay {
                    day: r.day,
                    currency,
                    paid_minor: r.paid_minor,
                    refunded_minor: r.refunded_minor,
                })
            })
            .collect()
    }

    async fn credits_by_day(&self, window: ReportWindow) -> Result<Vec<CreditsDay>, StoreError> {
        let rows: Vec<CreditsRow> = self
            .fetch_all("credits_by_day", CREDITS_SQL, window_values(window))
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(CreditsDay {
                    day: r.day,
                    granted: credits("credit_transactions", r.day, r.granted)?,
                    consumed: credits("credit_transactions", r.day, r.consumed)?,
                })
            })
            .collect()
    }

    async fn subscriptions_by_day(
        &self,
        window: ReportWindow,
    ) -> Result<Vec<SubscriptionsDay>, StoreError> {
        let rows: Vec<SubscriptionsRow> = self
            .fetch_all(
                "subscriptions_by_day",
                SUBSCRIPTIONS_SQL,
                window_values(window),
            )
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

    async fn consumption_by(
        &self,
        dimension: ConsumptionDimension,
        window: ReportWindow,
        limit: u32,
    ) -> Result<Vec<ConsumptionShare>, StoreError> {
        let column = match dimension {
            ConsumptionDimension::Feature => "feature",
            ConsumptionDimension::Model => "model",
        };
        let sql = CONSUMPTION_SQL.replace("{column}", column);
        let mut values = window_values(window);
        values.push(i64::from(limit).into());
        let rows: Vec<ShareRow> = self.fetch_all("consumption_by", &sql, values).await?;
        rows.into_iter()
            .map(|r| {
                Ok(ConsumptionShare {
                    consumed: credits("credit_transactions", 0, r.consumed)?,
                    name: r.name,
                })
            })
            .collect()
    }
}
