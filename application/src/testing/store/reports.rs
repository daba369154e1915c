//! The admin reports over the in-memory state, following `ReportRepository`'s contract.
//!
//! The fake keeps no creation or update time for subscriptions: a subscription starts on the day
//! its first recorded period began (the first charge's, else its current period's), and ends on
//! the day of its last applied event when it is canceled or expired.

use std::collections::BTreeMap;

use async_trait::async_trait;
use domain::{CreditsTotal, Currency, OrderStatus, SubscriptionStatus, Timestamp};

use super::{InMemoryStore, State};
use crate::ports::{
    ConsumptionDimension, ConsumptionShare, CreditsDay, DAY_MS, ReportRepository, ReportWindow,
    RevenueDay, SPEND_KINDS, SpendDay, StoreError, SubscriptionsDay,
};
use crate::testing::lock;

fn inside(window: ReportWindow, at: Timestamp) -> bool {
    at >= window.from && at < window.until
}

fn day_of(at: Timestamp) -> i64 {
    at.unix_millis().div_euclid(DAY_MS)
}

fn credits(hundredths: i128) -> CreditsTotal {
    CreditsTotal::from_hundredths(hundredths)
}

/// Every paid payment in the window: (payment time, currency, paid, refunded).
fn payments(state: &State, window: ReportWindow) -> Vec<(Timestamp, Currency, i64, i64)> {
    let orders = state.orders.values().filter_map(|record| {
        let order = &record.order;
        let paid_at = match order.status() {
            OrderStatus::Paid { paid_at }
            | OrderStatus::PartiallyRefunded { paid_at, .. }
            | OrderStatus::Refunded { paid_at } => *paid_at,
            _ => return None,
        };
        let price = order.plan().price;
        let refunded = order.refunded().map_or(0, |m| m.amount_minor());
        Some((paid_at, price.currency(), price.amount_minor(), refunded))
    });
    let renewals = state
        .charges
        .iter()
        .filter(|c| c.order_id.is_none())
        .map(|c| {
            let refunded = c.refunded.amount_minor();
            (
                c.paid_at,
                c.amount.currency(),
                c.amount.amount_minor(),
                refunded,
            )
        });
    orders
        .chain(renewals)
        .filter(|(at, ..)| inside(window, *at))
        .collect()
}

#[async_trait]
impl ReportRepository for InMemoryStore {
    async fn revenue_by_day(&self, window: ReportWindow) -> Result<Vec<RevenueDay>, StoreError> {
        let state = lock(&self.0);
        let mut days: BTreeMap<(i64, &'static str), (Currency, i64, i64)> = BTreeMap::new();
        for (at, currency, paid, refunded) in payments(&state, window) {
            let entry = days
                .entry((day_of(at), currency.code()))
                .or_insert((currency, 0, 0));
            entry.1 += paid;
            entry.2 += refunded;
        }
        Ok(days
            .into_iter()
            .map(
                |((day, _), (currency, paid_minor, refunded_minor))| RevenueDay {
                    day,
                    currency,
                    paid_minor,
                    refunded_minor,
                },
            )
            .collect())
    }

    async fn credits_by_day(&self, window: ReportWindow) -> Result<Vec<CreditsDay>, StoreError> {
        let state = lock(&self.0);
        let mut days: BTreeMap<i64, (i128, i128)> = BTreeMap::new();
        for tx in &state.ledger.transactions {
            if !inside(window, tx.created_at) {
                continue;
            }
            let amount = i128::from(tx.amount.hundredths());
            let code = tx.kind.code();
            let entry = days.entry(day_of(tx.created_at)).or_default();
            if SPEND_KINDS.contains(&code) {
                entry.1 -= amount;
            } else if amount > 0 {
                entry.0 += amount;
            }
        }
        Ok(days
            .into_iter()
            .map(|(day, (granted, consumed))| CreditsDay {
                day,
                granted: credits(granted),
                consumed: credits(consumed),
            })
            .collect())
    }

    async fn subscriptions_by_day(
        &self,
        window: ReportWindow,
    ) -> Result<Vec<SubscriptionsDay>, StoreError> {
        let state = lock(&self.0);
        let mut days: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
        for (subscription, _) in state.subscriptions.values() {
            let started = state
                .charges
                .iter()
                .filter(|c| &c.subscription_id == subscription.id())
                .map(|c| c.period.start())
                .min()
                .unwrap_or_else(|| subscription.current_period().start());
            if inside(window, started) {
                days.entry(day_of(started)).or_default().0 += 1;
            }
            let over = matches!(
                subscription.status(),
                SubscriptionStatus::Canceled | SubscriptionStatus::Expired
            );
            let ended = subscription.last_event_at();
            if over && inside(window, ended) {
                days.entry(day_of(ended)).or_default().1 += 1;
            }
        }
        Ok(days
            .into_iter()
            .map(|(day, (started, ended))| SubscriptionsDay {
                day,
                started,
                ended,
            })
            .collect())
    }

    async fn account_spend_by_day(
        &self,
        account: &domain::AccountId,
        dimension: ConsumptionDimension,
        window: ReportWindow,
    ) -> Result<Vec<SpendDay>, StoreError> {
        let state = lock(&self.0);
        let mut groups: BTreeMap<(i64, Option<String>), i128> = BTreeMap::new();
        for tx in &state.ledger.transactions {
            if &tx.account_id != account
                || !inside(window, tx.created_at)
                || !SPEND_KINDS.contains(&tx.kind.code())
            {
                continue;
            }
            let name = match dimension {
                ConsumptionDimension::Feature => tx.context.feature.clone(),
                ConsumptionDimension::Model => tx.context.model.clone(),
            };
            *groups.entry((day_of(tx.created_at), name)).or_default() -=
                i128::from(tx.amount.hundredths());
        }
        Ok(groups
            .into_iter()
            .map(|((day, name), hundredths)| SpendDay {
                day,
                name,
                spent: credits(hundredths),
            })
            .collect())
    }

    async fn consumption_by(
        &self,
        dimension: ConsumptionDimension,
        window: ReportWindow,
        limit: u32,
    ) -> Result<Vec<ConsumptionShare>, StoreError> {
        let state = lock(&self.0);
        let mut groups: BTreeMap<Option<String>, i128> = BTreeMap::new();
        for tx in &state.ledger.transactions {
            if !inside(window, tx.created_at) || !SPEND_KINDS.contains(&tx.kind.code()) {
                continue;
            }
            let name = match dimension {
                ConsumptionDimension::Feature => tx.context.feature.clone(),
                ConsumptionDimension::Model => tx.context.model.clone(),
            };
            *groups.entry(name).or_default() -= i128::from(tx.amount.hundredths());
        }
        let mut shares: Vec<(Option<String>, i128)> =
            groups.into_iter().filter(|(_, h)| *h > 0).collect();
        shares.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(shares
            .into_iter()
            .take(limit as usize)
            .map(|(name, hundredths)| ConsumptionShare {
                name,
                consumed: credits(hundredths),
            })
            .collect())
    }
}
