//! Refund reports and subscription charges (CORRECTNESS.md invariant 11): each report is kept
//! once per `(provider, refund_key)` against the payment it names; each paid period of a
//! subscription is a charge with the refunded total acted on so far (compare-and-set).

use application::ports::{
    ChargeChange, GrantSource, RefundRecord, RefundRepository, RefundTarget, StoreError,
    SubscriptionCharge,
};
use async_trait::async_trait;
use domain::{
    AccountId, BillingPeriod, Credits, Currency, KeptRefund, Money, OrderId, ProviderId,
    RefundForm, SubscriptionId, Timestamp, UserId,
};
use sea_orm::{DatabaseTransaction, DbErr, FromQueryResult};

use crate::SeaOrmStore;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql;

/// Keep `r`; false when `(provider, refund_key)` was kept before.
pub(crate) async fn keep(tx: &DatabaseTransaction, r: &RefundRecord) -> Result<bool, DbErr> {
    let (order_id, charge_ref) = match &r.target {
        RefundTarget::Order(id) => (Some(id.as_str().to_owned()), None),
        RefundTarget::Charge(charge) => (None, Some(charge.clone())),
    };
    let sql = "INSERT INTO refunds (provider, refund_key, order_id, charge_ref, form, \
        amount_minor, currency, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
        ON CONFLICT DO NOTHING";
    let values = vec![
        r.provider.as_str().into(),
        r.key.as_str().into(),
        order_id.into(),
        charge_ref.into(),
        r.refund.form.code().into(),
        r.refund.amount.amount_minor().into(),
        r.refund.amount.currency().code().into(),
        r.received_at.unix_millis().into(),
    ];
    Ok(sql::execute(tx, sql, values).await? == 1)
}

/// Record a paid period (a second record of the same period only adds the provider's charge id
/// when the first had none: PayPal tells an activation without it, then the first sale), or move
/// a charge's refunded total if it is still what the decision read.
pub(crate) async fn apply_charge(
    tx: &DatabaseTransaction,
    change: &ChargeChange,
) -> Result<(), Fail> {
    match change {
        ChargeChange::Record(c) => {
            let sql = "INSERT INTO subscription_charges (subscription_id, provider, charge_ref, \
                order_id, period_start, period_end, amount_minor, currency, credits_hundredths, \
                refunded_minor, paid_at, plan_change_at) \
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                ON CONFLICT (subscription_id, period_start) DO UPDATE \
                SET charge_ref = COALESCE(subscription_charges.charge_ref, excluded.charge_ref)";
            let values = vec![
                c.subscription_id.as_str().into(),
                c.provider.as_str().into(),
                c.charge_ref.clone().into(),
                c.order_id.as_ref().map(|o| o.as_str().to_owned()).into(),
                c.period.start().unix_millis().into(),
                c.period.end().unix_millis().into(),
                c.amount.amount_minor().into(),
                c.amount.currency().code().into(),
                c.credits.map(Credits::hundredths).into(),
                c.refunded.amount_minor().into(),
                c.paid_at.unix_millis().into(),
                c.plan_change_at.map(|t| t.unix_millis()).into(),
            ];
            sql::execute(tx, sql, values).await?;
            Ok(())
        }
        ChargeChange::Refund {
            subscription_id,
            period_start,
            expected,
            refunded,
        } => {
            let sql = "UPDATE subscription_charges SET refunded_minor = $3 \
                WHERE subscription_id = $1 AND period_start = $2 AND refunded_minor = $4";
            let values = vec![
                subscription_id.as_str().into(),
                period_start.unix_millis().into(),
                refunded.amount_minor().into(),
                expected.amount_minor().into(),
            ];
            if sql::execute(tx, sql, values).await? == 1 {
                Ok(())
            } else {
                Err(Fail::Store(StoreError::Conflict(format!(
                    "charge of {subscription_id} was refunded since it was read"
                ))))
            }
        }
    }
}

#[derive(Debug, FromQueryResult)]
struct RefundRow {
    provider: String,
    refund_key: String,
    order_id: Option<String>,
    charge_ref: Option<String>,
    form: String,
    amount_minor: i64,
    currency: String,
    received_at: i64,
}

impl RefundRow {
    fn into_domain(self) -> Result<RefundRecord, StoreError> {
        let bad = |what: String| corrupt("refunds", &self.refund_key, what);
        let provider: ProviderId = self.provider.parse().map_err(|e| bad(format!("{e}")))?;
        let currency: Currency = self.currency.parse().map_err(|e| bad(format!("{e}")))?;
        let amount =
            Money::from_minor(self.amount_minor, currency).map_err(|e| bad(e.to_string()))?;
        let form = RefundForm::from_code(&self.form).ok_or_else(|| bad(self.form.clone()))?;
        let target = match (&self.order_id, &self.charge_ref) {
            (Some(order), None) => {
                RefundTarget::Order(OrderId::new(order.clone()).map_err(|e| bad(e.to_string()))?)
            }
            (None, Some(charge)) => RefundTarget::Charge(charge.clone()),
            _ => return Err(bad("names no single payment".into())),
        };
        Ok(RefundRecord {
            provider,
            key: self.refund_key,
            target,
            refund: KeptRefund { form, amount },
            received_at: Timestamp::from_unix_millis(self.received_at),
        })
    }
}

#[derive(Debug, FromQueryResult)]
struct ChargeRow {
    subscription_id: String,
    user_id: String,
    account_id: String,
    provider: String,
    charge_ref: Option<String>,
    order_id: Option<String>,
    period_start: i64,
    period_end: i64,
    amount_minor: i64,
    currency: String,
    credits_hundredths: Option<i64>,
    refunded_minor: i64,
    paid_at: i64,
    plan_change_at: Option<i64>,
}

const CHARGE_COLUMNS: &str = "c.subscription_id, s.user_id, \
    COALESCE(s.account_id, s.user_id) AS account_id, c.provider, c.charge_ref, \
    c.order_id, c.period_start, c.period_end, c.amount_minor, c.currency, \
    c.credits_hundredths, c.refunded_minor, c.paid_at, c.plan_change_at";

impl ChargeRow {
    fn into_domain(self) -> Result<SubscriptionCharge, StoreError> {
        let bad = |what: String| corrupt("subscription_charges", &self.subscription_id, what);
        let t = Timestamp::from_unix_millis;
        let currency: Currency = self.currency.parse().map_err(|e| bad(format!("{e}")))?;
        let money = |minor: i64| Money::from_minor(minor, currency).map_err(|e| bad(e.to_string()));
        Ok(SubscriptionCharge {
            subscription_id: SubscriptionId::new(self.subscription_id.clone())
                .map_err(|e| bad(e.to_string()))?,
            user_id: UserId::new(self.user_id.clone()).map_err(|e| bad(e.to_string()))?,
            account_id: AccountId::new(self.account_id.clone()).map_err(|e| bad(e.to_string()))?,
            provider: self.provider.parse().map_err(|e| bad(format!("{e}")))?,
            charge_ref: self.charge_ref.clone(),
            order_id: self
                .order_id
                .clone()
                .map(OrderId::new)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            period: BillingPeriod::new(t(self.period_start), t(self.period_end))
                .ok_or_else(|| bad("empty period".into()))?,
            amount: money(self.amount_minor)?,
            credits: self
                .credits_hundredths
                .map(Credits::from_hundredths)
                .transpose()
                .map_err(|e| bad(e.to_string()))?,
            refunded: money(self.refunded_minor)?,
            paid_at: t(self.paid_at),
            plan_change_at: self.plan_change_at.map(t),
        })
    }
}

/// A lot's granted amount.
#[derive(Debug, FromQueryResult)]
struct Amount {
    n: i64,
}

/// A plan change's lot: its source key and granted amount.
#[derive(Debug, FromQueryResult)]
struct ChangeLot {
    source_key: String,
    n: i64,
}

impl SeaOrmStore {
    async fn charge_where(
        &self,
        what: &'static str,
        condition: &str,
        values: Vec<sea_orm::Value>,
    ) -> Result<Option<SubscriptionCharge>, StoreError> {
        let sql = format!(
            "SELECT {CHARGE_COLUMNS} FROM subscription_charges c \
             JOIN subscriptions s ON s.id = c.subscription_id WHERE {condition} \
             ORDER BY c.period_start LIMIT 1"
        );
        let row: Option<ChargeRow> = self.fetch_one(what, &sql, values).await?;
        row.map(ChargeRow::into_domain).transpose()
    }
}

#[async_trait]
impl RefundRepository for SeaOrmStore {
    async fn refunds_of(
        &self,
        provider: ProviderId,
        target: &RefundTarget,
    ) -> Result<Vec<RefundRecord>, StoreError> {
        let (condition, key) = match target {
            RefundTarget::Order(id) => ("order_id = $2", id.as_str().to_owned()),
            RefundTarget::Charge(charge) => ("charge_ref = $2", charge.clone()),
        };
        let sql = format!(
            "SELECT provider, refund_key, order_id, charge_ref, form, amount_minor, currency, \
             received_at FROM refunds WHERE provider = $1 AND {condition} ORDER BY id"
        );
        let values = vec![provider.as_str().into(), key.into()];
        let rows: Vec<RefundRow> = self.fetch_all("refunds_of", &sql, values).await?;
        rows.into_iter().map(RefundRow::into_domain).collect()
    }

    async fn granted_by(&self, source: &GrantSource) -> Result<Option<Credits>, StoreError> {
        let (kind, key) = crate::ledger::source_parts(source);
        let sql = "SELECT amount_hundredths AS n FROM credit_grants \
            WHERE source_kind = $1 AND source_key = $2";
        let values = vec![kind.into(), key.clone().into()];
        let row: Option<Amount> = self.fetch_one("granted_by", sql, values).await?;
        row.map(|r| {
            Credits::from_hundredths(r.n).map_err(|e| corrupt("credit_grants", &key, e.to_string()))
        })
        .transpose()
    }

    async fn change_grants(
        &self,
        subscription: &SubscriptionId,
    ) -> Result<Vec<(Timestamp, Credits)>, StoreError> {
        // The keys `<subscription>:change:<ms>` of one subscription sort between its prefix and
        // the prefix with ';' (the character after ':'): one range of the unique index.
        let prefix = format!("{subscription}:change:");
        let sql = "SELECT source_key, amount_hundredths AS n FROM credit_grants \
            WHERE source_kind = 'subscription_period' AND source_key >= $1 AND source_key < $2 \
            ORDER BY source_key";
        let values = vec![
            prefix.clone().into(),
            format!("{subscription}:change;").into(),
        ];
        let rows: Vec<ChangeLot> = self.fetch_all("change_grants", sql, values).await?;
        let mut lots = rows
            .into_iter()
            .map(|row| {
                let bad = |why: String| corrupt("credit_grants", &row.source_key, why);
                let asked = row.source_key[prefix.len()..]
                    .parse::<i64>()
                    .map_err(|e| bad(e.to_string()))?;
                let amount = Credits::from_hundredths(row.n).map_err(|e| bad(e.to_string()))?;
                Ok((Timestamp::from_unix_millis(asked), amount))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        lots.sort_by_key(|(asked, _)| *asked);
        Ok(lots)
    }

    async fn find_charge(
        &self,
        provider: ProviderId,
        charge_ref: &str,
    ) -> Result<Option<SubscriptionCharge>, StoreError> {
        let values = vec![provider.as_str().into(), charge_ref.into()];
        self.charge_where(
            "find_charge",
            "c.provider = $1 AND c.charge_ref = $2",
            values,
        )
        .await
    }

    async fn find_charge_of_order(
        &self,
        order: &OrderId,
    ) -> Result<Option<SubscriptionCharge>, StoreError> {
        let values = vec![order.as_str().into()];
        self.charge_where("find_charge_of_order", "c.order_id = $1", values)
            .await
    }

    async fn charges_with_unapplied_refunds(
        &self,
        limit: u32,
    ) -> Result<Vec<SubscriptionCharge>, StoreError> {
        let sql = format!("{UNAPPLIED_REFUNDS} SELECT {CHARGE_COLUMNS} {UNAPPLIED_CHARGES}");
        let values = vec![i64::from(limit).into()];
        let rows: Vec<ChargeRow> = self
            .fetch_all("charges_with_unapplied_refunds", &sql, values)
            .await?;
        rows.into_iter().map(ChargeRow::into_domain).collect()
    }
}

/// What the kept reports of each provider charge add up to, the way `domain::refunded_total`
/// adds them (the largest running total, the sum of single refunds, a lost dispute = all).
const UNAPPLIED_REFUNDS: &str = "WITH kept AS (SELECT provider, charge_ref, \
    MAX(CASE WHEN form = 'total' THEN amount_minor ELSE 0 END) AS running, \
    SUM(CASE WHEN form = 'one' THEN amount_minor ELSE 0 END) AS singles, \
    MAX(CASE WHEN form = 'dispute_lost' THEN 1 ELSE 0 END) AS lost \
    FROM refunds WHERE charge_ref IS NOT NULL GROUP BY provider, charge_ref)";

/// The charges whose kept reports add up to more than they have applied.
const UNAPPLIED_CHARGES: &str = "FROM subscription_charges c \
    JOIN subscriptions s ON s.id = c.subscription_id \
    JOIN kept k ON k.provider = c.provider AND k.charge_ref = c.charge_ref \
    WHERE c.refunded_minor < c.amount_minor \
    AND (k.lost = 1 OR k.running > c.refunded_minor OR k.singles > c.refunded_minor) \
    ORDER BY c.id LIMIT $1";
