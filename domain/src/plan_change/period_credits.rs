//! What one billing period of a subscription has been granted, and what a plan change may still
//! grant in it.
//!
//! The rule (`docs/subscriptions-and-refunds.md`, "Switching plans"): within one billing period a
//! subscription is granted at most the credits per period of the most generous plan it held in
//! that period. The period's own lot is granted when the period starts, with the plan then held;
//! an upgrade confirmed later grants the new plan's credits per period less everything already
//! granted for the period (its own lot and earlier upgrades' lots), in full and not prorated,
//! expiring with the period. A plan already held in the period, or any plan no more generous than
//! what the period was already granted, grants nothing: switching down and back up again never
//! grants twice. A change of billing interval starts a new period with the new plan's own lot,
//! and every lot of the old period gives back the share of it that lies after the change
//! ([`PeriodGrants::unused_after`]), as a refund of that share would.

use crate::credits::Credits;
use crate::subscription::BillingPeriod;
use crate::time::Timestamp;

/// Which grant of a billing period a lot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeriodLotSource {
    /// The period's own lot, granted when the period started.
    Period,
    /// The lot of the plan change asked at this time (an upgrade confirmed within the period).
    Change(Timestamp),
}

/// One lot granted for a billing period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodLot {
    /// Which grant it is.
    pub source: PeriodLotSource,
    /// The credits it was granted with.
    pub amount: Credits,
}

/// The lots granted for one billing period of a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodGrants {
    period: BillingPeriod,
    lots: Vec<PeriodLot>,
}

impl PeriodGrants {
    /// Nothing granted for `period` yet.
    #[must_use]
    pub const fn none(period: BillingPeriod) -> Self {
        Self {
            period,
            lots: Vec::new(),
        }
    }

    /// The grants of `period`: its own lot (`own`, if it was granted) and, of `changes` (every
    /// plan change's lot of the subscription, by when the change was asked), those asked within
    /// the period.
    #[must_use]
    pub fn of(
        period: BillingPeriod,
        own: Option<Credits>,
        changes: &[(Timestamp, Credits)],
    ) -> Self {
        let own = own.map(|amount| PeriodLot {
            source: PeriodLotSource::Period,
            amount,
        });
        let changed = changes
            .iter()
            .filter(|(asked, _)| period.start() <= *asked && *asked < period.end())
            .map(|&(asked, amount)| PeriodLot {
                source: PeriodLotSource::Change(asked),
                amount,
            });
        let mut lots: Vec<PeriodLot> = own.into_iter().chain(changed).collect();
        lots.sort_by_key(|lot| lot.source);
        Self { period, lots }
    }

    /// The period these grants are for.
    #[must_use]
    pub const fn period(&self) -> BillingPeriod {
        self.period
    }

    /// The lots, the period's own first, then by when their change was asked.
    #[must_use]
    pub fn lots(&self) -> &[PeriodLot] {
        &self.lots
    }

    /// Everything granted for the period (saturating at the ledger's bound, which no sum of
    /// valid lots of one period reaches in practice).
    #[must_use]
    pub fn total(&self) -> Credits {
        self.lots.iter().fold(Credits::ZERO, |sum, lot| {
            sum.checked_add(lot.amount).unwrap_or(Credits::MAX)
        })
    }

    /// What a plan selling `credits_per_period` may still grant for the period: its credits
    /// less everything already granted and less `floor` (the credits per period of the plan the
    /// subscription holds, counted as granted even where the period's own lot was not, as in a
    /// trial); nothing when that is not more.
    #[must_use]
    pub fn still_due(&self, credits_per_period: Credits, floor: Credits) -> Option<Credits> {
        let granted = self.total().max(floor);
        credits_per_period
            .checked_sub(granted)
            .ok()
            .filter(|c| !c.is_zero())
    }

    /// Each lot's share that lies after `from`, for a period that ends at `from` instead of its
    /// own end (a change of billing interval): the period's own lot spans the whole period, a
    /// change's lot from its request to the period's end. Rounded down; lots with nothing to
    /// give back are left out.
    #[must_use]
    pub fn unused_after(&self, from: Timestamp) -> Vec<(PeriodLotSource, Credits)> {
        self.lots
            .iter()
            .filter_map(|lot| {
                let start = match lot.source {
                    PeriodLotSource::Period => self.period.start(),
                    PeriodLotSource::Change(asked) => asked.max(self.period.start()),
                };
                let share = share_after(lot.amount, start, self.period.end(), from)?;
                Some((lot.source, share))
            })
            .collect()
    }
}

/// The share of `amount`, spread evenly over `[start, end)`, that lies after `from` (rounded
/// down); `None` when that is nothing.
fn share_after(
    amount: Credits,
    start: Timestamp,
    end: Timestamp,
    from: Timestamp,
) -> Option<Credits> {
    let total = i128::from(end.unix_millis()) - i128::from(start.unix_millis());
    if total <= 0 {
        return None;
    }
    let left = (i128::from(end.unix_millis()) - i128::from(from.unix_millis())).clamp(0, total);
    let share = i128::from(amount.hundredths()) * left / total;
    debug_assert!(share <= i128::from(amount.hundredths()));
    let share = Credits::from_hundredths(i64::try_from(share).ok()?).ok()?;
    (!share.is_zero()).then_some(share)
}

#[cfg(test)]
mod tests;
