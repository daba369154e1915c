//! Balance thresholds: levels of an account's balance the host application is told about when
//! the balance crosses them, downwards (`credits.threshold_crossed`) and back up
//! (`credits.recovered`).
//!
//! A threshold is an absolute number of credits, a percentage of the account's last grant
//! (a pack of 1,000 credits with a 20% threshold: 200 credits), or a percentage of one of the
//! account's spend limits (a monthly ceiling of 5,000 credits with a 50% threshold: told when
//! the balance falls below 2,500, less than half a month's allowance). The crossing rule is the one
//! the low-balance and depleted alerts have always followed ([`crate::ledger::balance_alerts`]
//! is built on it): a posting that takes the balance from `before` to `after` crosses a level
//! downwards when `before >= level > after`, and upwards when `before < level <= after`. So
//! each crossing is told exactly once without remembering anything: only the posting that
//! crosses meets the rule, never those on either side of it. `credits.depleted` is the
//! downward crossing of the smallest level there is, one hundredth of a credit.

use crate::{Credits, SpendLimitId};

/// The most thresholds one account carries.
pub const MAX_THRESHOLDS_PER_ACCOUNT: usize = 20;

/// Where a threshold sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThresholdLevel {
    /// At this many credits (positive).
    Credits(Credits),
    /// At this percentage (1 to 100) of the account's last grant.
    PercentOfGrant(u8),
    /// At this percentage (1 to 100) of the credits of one of the account's spend limits.
    PercentOfLimit {
        /// The limit.
        limit: SpendLimitId,
        /// The percentage.
        percent: u8,
    },
}

/// What a threshold's percentage is of, as read with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThresholdBases {
    /// The amount of the account's last grant, if it had one.
    pub last_grant: Option<Credits>,
    /// The credits of the limit a percentage of a limit is of, while it exists.
    pub limit: Option<Credits>,
}

/// Why a threshold is not a valid one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdError {
    /// Zero credits.
    ZeroCredits,
    /// A percentage outside 1 to 100.
    Percent,
}

impl std::fmt::Display for ThresholdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThresholdError::ZeroCredits => f.write_str("must be a positive number of credits"),
            ThresholdError::Percent => f.write_str("must be a whole percentage from 1 to 100"),
        }
    }
}

impl std::error::Error for ThresholdError {}

impl ThresholdLevel {
    /// An absolute threshold.
    ///
    /// # Errors
    /// [`ThresholdError::ZeroCredits`].
    pub fn credits(credits: Credits) -> Result<Self, ThresholdError> {
        if credits.is_zero() {
            return Err(ThresholdError::ZeroCredits);
        }
        Ok(ThresholdLevel::Credits(credits))
    }

    /// A threshold at `percent` of the last grant.
    ///
    /// # Errors
    /// [`ThresholdError::Percent`].
    pub fn percent_of_grant(percent: u32) -> Result<Self, ThresholdError> {
        Ok(ThresholdLevel::PercentOfGrant(percentage(percent)?))
    }

    /// A threshold at `percent` of the credits of the limit `limit`.
    ///
    /// # Errors
    /// [`ThresholdError::Percent`].
    pub fn percent_of_limit(limit: SpendLimitId, percent: u32) -> Result<Self, ThresholdError> {
        Ok(ThresholdLevel::PercentOfLimit {
            limit,
            percent: percentage(percent)?,
        })
    }

    /// The balance it sits at, given what its percentage is of: a percentage rounded down to
    /// the hundredth (at least one hundredth), or `None` when there is nothing to take it of (an
    /// account never granted anything, a limit since removed).
    #[must_use]
    pub fn level(&self, bases: ThresholdBases) -> Option<Credits> {
        let (base, percent) = match self {
            ThresholdLevel::Credits(c) => return Some(*c),
            ThresholdLevel::PercentOfGrant(p) => (bases.last_grant, *p),
            ThresholdLevel::PercentOfLimit { percent, .. } => (bases.limit, *percent),
        };
        let base = base.filter(|b| !b.is_zero())?;
        let hundredths = i128::from(base.hundredths()) * i128::from(percent) / 100;
        let hundredths = i64::try_from(hundredths).ok()?.max(1);
        Credits::from_hundredths(hundredths).ok()
    }

    /// The limit a percentage of a limit is of.
    #[must_use]
    pub fn limit(&self) -> Option<&SpendLimitId> {
        match self {
            ThresholdLevel::PercentOfLimit { limit, .. } => Some(limit),
            _ => None,
        }
    }
}

/// A whole percentage from 1 to 100.
fn percentage(percent: u32) -> Result<u8, ThresholdError> {
    match u8::try_from(percent) {
        Ok(p @ 1..=100) => Ok(p),
        _ => Err(ThresholdError::Percent),
    }
}

/// Which way a balance crossed a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// From at or above it to below it.
    Down,
    /// From below it to at or above it.
    Up,
}

/// How a posting that took the balance from `before` to `after` crossed `level`, if it did.
#[must_use]
pub fn crossing(before: Credits, after: Credits, level: Credits) -> Option<Crossing> {
    if before >= level && after < level {
        Some(Crossing::Down)
    } else if before < level && after >= level {
        Some(Crossing::Up)
    } else {
        None
    }
}

/// The level of `credits.depleted`: the balance reaching zero is its downward crossing.
#[must_use]
pub fn depleted_level() -> Credits {
    Credits::SMALLEST
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn c(hundredths: i64) -> Credits {
        Credits::from_hundredths(hundredths).unwrap()
    }

    #[test]
    fn a_level_is_crossed_once_each_way() {
        let level = c(1000);
        assert_eq!(crossing(c(1500), c(900), level), Some(Crossing::Down));
        assert_eq!(crossing(c(1000), c(999), level), Some(Crossing::Down));
        assert_eq!(crossing(c(900), c(800), level), None, "already below");
        assert_eq!(
            crossing(c(1500), c(1000), level),
            None,
            "at the level is above it"
        );
        assert_eq!(crossing(c(999), c(1000), level), Some(Crossing::Up));
        assert_eq!(crossing(c(0), c(5000), level), Some(Crossing::Up));
        assert_eq!(crossing(c(1200), c(5000), level), None, "already above");
    }

    #[test]
    fn depleted_is_the_crossing_of_one_hundredth() {
        let level = depleted_level();
        assert_eq!(crossing(c(1), c(0), level), Some(Crossing::Down));
        assert_eq!(crossing(c(0), c(0), level), None);
        assert_eq!(crossing(c(0), c(1), level), Some(Crossing::Up));
    }

    #[test]
    fn a_percentage_takes_its_level_from_the_last_grant() {
        let grant = |g: Option<i64>| ThresholdBases {
            last_grant: g.map(c),
            limit: Some(c(1)),
        };
        let p = ThresholdLevel::percent_of_grant(20).unwrap();
        assert_eq!(p.level(grant(Some(100_000))), Some(c(20_000)));
        assert_eq!(
            p.level(grant(Some(3))),
            Some(c(1)),
            "never below one hundredth"
        );
        assert_eq!(p.level(grant(None)), None);
        assert_eq!(p.level(grant(Some(0))), None);
        let all = ThresholdLevel::percent_of_grant(100).unwrap();
        assert_eq!(all.level(grant(Some(777))), Some(c(777)));
        assert_eq!(
            ThresholdLevel::percent_of_grant(0),
            Err(ThresholdError::Percent)
        );
        assert_eq!(
            ThresholdLevel::percent_of_grant(101),
            Err(ThresholdError::Percent)
        );
        assert_eq!(
            ThresholdLevel::credits(c(0)),
            Err(ThresholdError::ZeroCredits)
        );
        assert_eq!(
            ThresholdLevel::credits(c(5)).unwrap().level(grant(None)),
            Some(c(5))
        );
    }

    #[test]
    fn a_percentage_of_a_limit_takes_its_level_from_the_limit() {
        let id = SpendLimitId::new("lim_1").unwrap();
        let half = ThresholdLevel::percent_of_limit(id.clone(), 50).unwrap();
        assert_eq!(half.limit(), Some(&id));
        let of = |limit: Option<i64>| ThresholdBases {
            last_grant: Some(c(999_999)),
            limit: limit.map(c),
        };
        assert_eq!(half.level(of(Some(500_000))), Some(c(250_000)));
        assert_eq!(
            half.level(of(Some(1))),
            Some(c(1)),
            "never below one hundredth"
        );
        assert_eq!(half.level(of(None)), None, "the limit is gone");
        assert_eq!(
            ThresholdLevel::percent_of_limit(id, 101),
            Err(ThresholdError::Percent)
        );
        assert_eq!(ThresholdLevel::percent_of_grant(20).unwrap().limit(), None);
    }

    proptest! {
        /// Over any run of postings (spends and increases, each never taking the balance below
        /// zero), a level's crossings alternate: the first is downwards exactly when the run
        /// starts at or above the level, and after the run the last one says which side the
        /// balance is on. So each crossing is told once, whichever way the balance moves.
        #[test]
        fn crossings_of_a_level_alternate_and_end_on_the_balance_s_side(
            // Small amounts, so that runs often land exactly on the level.
            start in 0i64..20,
            level in 1i64..20,
            moves in prop::collection::vec(-8i64..8, 0..60),
        ) {
            let level = c(level);
            let mut balance = c(start);
            let mut told = Vec::new();
            for delta in moves {
                let after = c((balance.hundredths() + delta).max(0));
                if let Some(crossed) = crossing(balance, after, level) {
                    told.push(crossed);
                }
                balance = after;
            }
            for pair in told.windows(2) {
                prop_assert_ne!(pair[0], pair[1], "crossings alternate");
            }
            if let Some(first) = told.first() {
                let expected = if c(start) >= level { Crossing::Down } else { Crossing::Up };
                prop_assert_eq!(*first, expected);
            }
            let below_now = balance < level;
            let below_at_start = c(start) < level;
            match told.last() {
                Some(last) => prop_assert_eq!(*last == Crossing::Down, below_now),
                None => prop_assert_eq!(below_now, below_at_start),
            }
        }
    }
}
