//! Reports for the admin overview's charts and an account's spend chart: what the store keeps,
//! added up per UTC day within a time window.
//!
//! Every method reads one window `[from, until)` of one time column, so an adapter can answer
//! from a range scan; days are whole UTC days counted from 1970-01-01 (`millis / 86_400_000`),
//! which the use case folds into months where a chart wants them. Money stays in minor units per
//! currency, credits in hundredths: nothing is converted or rounded here.

use async_trait::async_trait;
use domain::{AccountId, CreditsTotal, Currency, Timestamp};

use super::StoreError;

/// Milliseconds in a UTC day.
pub const DAY_MS: i64 = 86_400_000;

/// The ledger kinds that spend credits (a hold, its settlement and its release add up to what a
/// reservation spent); their amounts, negated, are what was consumed.
pub const SPEND_KINDS: [&str; 4] = [
    "consumption",
    "reservation_hold",
    "reservation_settle",
    "reservation_release",
];

/// A time window: `from` inclusive, `until` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportWindow {
    /// The first instant counted.
    pub from: Timestamp,
    /// The first instant no longer counted.
    pub until: Timestamp,
}

/// What payments made on one day in one currency brought in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevenueDay {
    /// Days since 1970-01-01 (UTC) of the payment.
    pub day: i64,
    /// The payments' currency.
    pub currency: Currency,
    /// What was paid, in minor units.
    pub paid_minor: i64,
    /// What of those payments has been refunded since, in minor units.
    pub refunded_minor: i64,
}

/// Credits that came in and went out on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditsDay {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    /// Every increase but a reservation's returns: purchase and subscription grants, admin
    /// grants.
    pub granted: CreditsTotal,
    /// What usage spent (see [`SPEND_KINDS`]); a day whose releases outweigh its holds counts
    /// zero.
    pub consumed: CreditsTotal,
}

/// Subscriptions that started and ended on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionsDay {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    /// Subscriptions first recorded that day.
    pub started: u64,
    /// Subscriptions recorded canceled or expired that day.
    pub ended: u64,
}

/// What one feature or one model consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumptionShare {
    /// The feature or model; `None` for spends that named none.
    pub name: Option<String>,
    /// What it consumed.
    pub consumed: CreditsTotal,
}

/// What one account spent on one day on one feature or model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendDay {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    /// The feature or model; `None` for spends that named none.
    pub name: Option<String>,
    /// What usage spent (see [`SPEND_KINDS`]); a day whose releases outweigh its holds counts
    /// zero.
    pub spent: CreditsTotal,
}

/// What consumption is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumptionDimension {
    /// The spend's `feature`.
    Feature,
    /// The spend's `model`.
    Model,
}

/// Aggregates for the admin overview, read-only.
#[async_trait]
pub trait ReportRepository: Send + Sync + 'static {
    /// Paid orders (paid, partially refunded or refunded) and subscription renewal charges whose
    /// payment time lies in `window`, per day of payment and currency, oldest first; the
    /// refunded part is what has been refunded of those payments so far.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for a currency the domain does not know.
    async fn revenue_by_day(&self, window: ReportWindow) -> Result<Vec<RevenueDay>, StoreError>;

    /// Credits granted and consumed per day of the ledger entries in `window`, oldest first;
    /// days without entries are left out.
    ///
    /// # Errors
    /// Storage failures.
    async fn credits_by_day(&self, window: ReportWindow) -> Result<Vec<CreditsDay>, StoreError>;

    /// Subscriptions started (first recorded) and ended (recorded canceled or expired) per day
    /// in `window`, oldest first; days with neither are left out.
    ///
    /// # Errors
    /// Storage failures.
    async fn subscriptions_by_day(
        &self,
        window: ReportWindow,
    ) -> Result<Vec<SubscriptionsDay>, StoreError>;

    /// The `limit` features or models that consumed the most in `window`, largest first (ties
    /// by name); groups that consumed nothing are left out.
    ///
    /// # Errors
    /// Storage failures.
    async fn consumption_by(
        &self,
        dimension: ConsumptionDimension,
        window: ReportWindow,
        limit: u32,
    ) -> Result<Vec<ConsumptionShare>, StoreError>;

    /// What `account` spent per day and feature (or model) in `window`, by day then name;
    /// pairs without usage entries are left out.
    ///
    /// # Errors
    /// Storage failures.
    async fn account_spend_by_day(
        &self,
        account: &AccountId,
        dimension: ConsumptionDimension,
        window: ReportWindow,
    ) -> Result<Vec<SpendDay>, StoreError>;
}
