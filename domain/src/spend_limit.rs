//! Spend limits on an account: at most so many credits per window, hard (refuses) or soft (tells).
//!
//! A limit counts what its account spends (optionally narrowed, see [`LimitScope`]) in **buckets**: one per
//! calendar window for an hour, a day, an ISO week or a month (UTC), and one per hour for a
//! rolling window of N hours. What a limit has used at a moment is the sum of the buckets inside
//! its current window: for a calendar window, the bucket of that window; for a rolling window,
//! the last N hour buckets, the current one included. A rolling window is therefore between
//! N − 1 and N hours long, never longer: whatever was spent in the hour bucket that leaves it
//! leaves together, so the headroom a caller sees never depends on the minute they ask.
//!
//! Calendar windows are UTC, not anchored at an account's billing day: a limit is about pacing
//! consumption (and abuse), and an account with no subscription has no billing day; UTC windows
//! are the same for every account, so an operator reading usage per day sees the same day the
//! limit counted.
//!
//! The store keeps the buckets and moves them in the spend's own transaction, after the account's
//! balance row is locked (the lock every spend of the account takes first), so the rules below
//! decide on counts no concurrent spend can change. What counts: a consumption when posted; a
//! hold at its held amount when taken; when a hold is settled, the unused part goes back to the
//! bucket it counted in and an overrun is a new spend in the current bucket, within what is left.
//! A release gives the whole hold back.

use crate::UserId;
use crate::credits::Credits;
use crate::time::Timestamp;

/// Milliseconds in an hour.
const HOUR_MS: i64 = 3_600_000;

/// The most limits one account carries: every spend of the account reads them all.
pub const MAX_LIMITS_PER_ACCOUNT: usize = 20;

/// The longest rolling window, in hours (31 days).
pub const MAX_ROLLING_HOURS: u32 = 744;

/// The window a spend limit counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpendWindow {
    /// From the top of the hour (UTC) to the next.
    Hour,
    /// From 00:00 UTC to the next.
    Day,
    /// From Monday 00:00 UTC (ISO week) to the next.
    Week,
    /// From the first of the month 00:00 UTC to the next.
    Month,
    /// The last `hours` hour buckets, the current one included (1 to [`MAX_ROLLING_HOURS`]).
    Rolling {
        /// How many hours.
        hours: u32,
    },
}

/// A window that cannot be built from what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpendWindowError {
    /// Not one of the window codes.
    #[error("the window is one of hour, day, week, month, rolling")]
    UnknownWindow,
    /// A rolling window without hours, or hours with a calendar window.
    #[error("a rolling window takes rollingHours (1 to {MAX_ROLLING_HOURS}); the others take none")]
    Hours,
}

impl SpendWindow {
    /// The stored and wire code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Rolling { .. } => "rolling",
        }
    }

    /// The hours of a rolling window.
    #[must_use]
    pub const fn rolling_hours(self) -> Option<u32> {
        match self {
            Self::Rolling { hours } => Some(hours),
            _ => None,
        }
    }

    /// The window a code (and, for `rolling`, a number of hours) names.
    ///
    /// # Errors
    /// An unknown code, hours out of range, or hours given with a calendar window.
    pub fn parse(code: &str, hours: Option<u32>) -> Result<Self, SpendWindowError> {
        let window = match code {
            "hour" => Self::Hour,
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            "rolling" => match hours {
                Some(h) if (1..=MAX_ROLLING_HOURS).contains(&h) => {
                    return Ok(Self::Rolling { hours: h });
                }
                _ => return Err(SpendWindowError::Hours),
            },
            _ => return Err(SpendWindowError::UnknownWindow),
        };
        match hours {
            None => Ok(window),
            Some(_) => Err(SpendWindowError::Hours),
        }
    }

    /// The start of the bucket a spend at `at` counts in.
    #[must_use]
    pub fn bucket_of(self, at: Timestamp) -> Timestamp {
        match self {
            Self::Hour | Self::Rolling { .. } => hour_start(at),
            Self::Day => crate::LimitWindow::Day.start_of(at),
            Self::Week => crate::LimitWindow::Week.start_of(at),
            Self::Month => crate::LimitWindow::Month.start_of(at),
        }
    }

    /// The start of the earliest bucket inside the window as it stands at `now`.
    #[must_use]
    pub fn counts_from(self, now: Timestamp) -> Timestamp {
        match self {
            Self::Rolling { hours } => {
                hour_start(now).plus_millis(-(i64::from(hours) - 1) * HOUR_MS)
            }
            _ => self.bucket_of(now),
        }
    }

    /// When a bucket starting at `start` stops counting.
    #[must_use]
    pub fn bucket_leaves(self, start: Timestamp) -> Timestamp {
        match self {
            Self::Hour => start.plus_millis(HOUR_MS),
            Self::Day => start.plus_days(1),
            Self::Week => start.plus_days(7),
            Self::Month => start.plus_calendar_months(1),
            Self::Rolling { hours } => start.plus_millis(i64::from(hours) * HOUR_MS),
        }
    }
}

/// The start of the hour (UTC) that contains `at`.
fn hour_start(at: Timestamp) -> Timestamp {
    Timestamp::from_unix_millis(at.unix_millis().div_euclid(HOUR_MS) * HOUR_MS)
}

/// Whether a limit refuses a spend that would pass it, or lets it through and tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Enforcement {
    /// The spend is refused (`limit_reached`).
    Hard,
    /// The spend goes through; the crossing is told (`limit.reached`).
    Soft,
}

impl Enforcement {
    /// The stored and wire code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Hard => "hard",
            Self::Soft => "soft",
        }
    }

    /// The enforcement a code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        [Self::Hard, Self::Soft]
            .into_iter()
            .find(|e| e.code() == code)
    }
}

/// A spend limit: at most `credits` per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpendLimit {
    /// The most spent in one window (never zero).
    pub credits: Credits,
    /// The window.
    pub window: SpendWindow,
    /// Hard or soft.
    pub enforcement: Enforcement,
}

/// What a limit counted in one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's start.
    pub start: Timestamp,
    /// What was counted in it.
    pub spent: Credits,
}

/// Where a limit stands at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitStanding {
    /// What counts in the current window.
    pub used: Credits,
    /// What is left of it (zero once a soft limit is passed).
    pub left: Credits,
    /// When headroom next comes back: the end of a calendar window; for a rolling window, when
    /// its oldest bucket that holds anything leaves it (the end of the current hour plus the
    /// window when nothing counts).
    pub resets_at: Timestamp,
}

impl SpendLimit {
    /// Where the limit stands at `now`, given its `buckets` (any order; those outside the window
    /// are ignored).
    #[must_use]
    pub fn standing(&self, buckets: &[Bucket], now: Timestamp) -> LimitStanding {
        let from = self.window.counts_from(now);
        let current = self.window.bucket_of(now);
        let mut used = Credits::ZERO;
        let mut oldest = current;
        for b in buckets
            .iter()
            .filter(|b| b.start >= from && b.start <= current)
        {
            used = used.checked_add(b.spent).unwrap_or(Credits::MAX);
            if !b.spent.is_zero() && b.start < oldest {
                oldest = b.start;
            }
        }
        LimitStanding {
            used,
            left: self.credits.checked_sub(used).unwrap_or(Credits::ZERO),
            resets_at: self.window.bucket_leaves(oldest),
        }
    }

    /// Count a spend of `amount` at `now`: the bucket it counts in, and whether it crosses a soft
    /// limit (used below the limit before, at or past it after).
    ///
    /// # Errors
    /// A hard limit whose window has less than `amount` left: what is left and when it resets.
    pub fn count(
        &self,
        buckets: &[Bucket],
        amount: Credits,
        now: Timestamp,
    ) -> Result<Counted, LimitRefusal> {
        let standing = self.standing(buckets, now);
        let after = standing.used.checked_add(amount).ok();
        let passes = after.is_none_or(|after| after > self.credits);
        if passes && self.enforcement == Enforcement::Hard {
            return Err(LimitRefusal {
                left: standing.left,
                resets_at: standing.resets_at,
            });
        }
        let reaches = after.is_none_or(|after| after >= self.credits);
        let used = after.unwrap_or(Credits::MAX);
        Ok(Counted {
            bucket: self.window.bucket_of(now),
            crossed: standing.used < self.credits && reaches && !amount.is_zero(),
            // The spend lands in the current bucket, which is never older than the oldest one
            // counted: when headroom comes back does not move.
            after: LimitStanding {
                used,
                left: self.credits.checked_sub(used).unwrap_or(Credits::ZERO),
                resets_at: standing.resets_at,
            },
        })
    }

    /// The most a spend at `now` may take under this limit: what is left for a hard limit,
    /// `None` (no bound) for a soft one.
    #[must_use]
    pub fn room(&self, buckets: &[Bucket], now: Timestamp) -> Option<Credits> {
        match self.enforcement {
            Enforcement::Hard => Some(self.standing(buckets, now).left),
            Enforcement::Soft => None,
        }
    }
}

/// A spend a limit counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// The bucket it counts in.
    pub bucket: Timestamp,
    /// Whether it brought the window to the limit or past it (told for a soft limit; for a hard
    /// one, the window is now exhausted).
    pub crossed: bool,
    /// Where the limit stands with the spend counted.
    pub after: LimitStanding,
}

/// Count a spend of `amount` at `now` against every limit it falls under (each with its
/// buckets): what each counted, in order, or the refusal of a hard limit it would pass (of
/// several, the one with the least left; the first of those on a tie) and its index.
///
/// # Errors
/// `(index, refusal)` of the refusing limit.
pub fn count_all<'a>(
    limits: impl IntoIterator<Item = (&'a SpendLimit, &'a [Bucket])>,
    amount: Credits,
    now: Timestamp,
) -> Result<Vec<Counted>, (usize, LimitRefusal)> {
    let mut counted = Vec::new();
    let mut refused: Option<(usize, LimitRefusal)> = None;
    for (i, (limit, buckets)) in limits.into_iter().enumerate() {
        match limit.count(buckets, amount, now) {
            Ok(c) => counted.push(c),
            Err(r) => {
                if refused.is_none_or(|(_, was)| r.left < was.left) {
                    refused = Some((i, r));
                }
            }
        }
    }
    match refused {
        Some(refusal) => Err(refusal),
        None => Ok(counted),
    }
}

/// A spend a hard limit refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitRefusal {
    /// What is left in the window.
    pub left: Credits,
    /// When headroom next comes back.
    pub resets_at: Timestamp,
}

/// The buckets a limit made at `now` starts from: what the account already spent in its
/// current window. `spends` are `(when, hundredths)`: a consumption's cost at its time; a hold's
/// amount, and the settle or release that resolved it, at the hold's time (where the hold
/// counted, so that its release gives back there); a bucket never goes below zero.
#[must_use]
pub fn seed(window: SpendWindow, spends: &[(Timestamp, i64)], now: Timestamp) -> Vec<Bucket> {
    let from = window.counts_from(now);
    let mut sums: Vec<(Timestamp, i64)> = Vec::new();
    for &(at, hundredths) in spends {
        if at < from || at > now {
            continue;
        }
        let start = window.bucket_of(at);
        match sums.iter_mut().find(|(s, _)| *s == start) {
            Some((_, sum)) => *sum = sum.saturating_add(hundredths),
            None => sums.push((start, hundredths)),
        }
    }
    sums.sort_by_key(|(start, _)| *start);
    sums.into_iter()
        .filter_map(|(start, sum)| {
            let spent = Credits::from_hundredths(sum.max(0)).unwrap_or(Credits::MAX);
            (!spent.is_zero()).then_some(Bucket { start, spent })
        })
        .collect()
}

/// What a limit counts of its account's spends: those of one feature, one model, those made
/// with one API key, those of one team member, or any mix of these (each `None`: any).
///
/// The same shape describes a spend: its feature, model, key and member (`None`: it has none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitScope {
    /// The one feature counted.
    pub feature: Option<String>,
    /// The one AI model counted.
    pub model: Option<String>,
    /// The one API key whose spends are counted (a key bound to the account).
    pub api_key: Option<String>,
    /// The one member of a team whose spends are counted.
    pub member: Option<UserId>,
}

impl LimitScope {
    /// Whether a limit of this scope counts `spend`: each part the limit names is the spend's.
    #[must_use]
    pub fn counts(&self, spend: &LimitScope) -> bool {
        fn fits<T: PartialEq>(on: Option<&T>, of: Option<&T>) -> bool {
            on.is_none_or(|v| of == Some(v))
        }
        fits(self.feature.as_ref(), spend.feature.as_ref())
            && fits(self.model.as_ref(), spend.model.as_ref())
            && fits(self.api_key.as_ref(), spend.api_key.as_ref())
            && fits(self.member.as_ref(), spend.member.as_ref())
    }

    /// What the limit is on, as its refusal names it: `member` (one member's spends), `key`
    /// (one API key's) or `account` (the account's, maybe of one feature or model).
    #[must_use]
    pub fn owner_code(&self) -> &'static str {
        if self.member.is_some() {
            "member"
        } else if self.api_key.is_some() {
            "key"
        } else {
            "account"
        }
    }
}

/// A bucket after `amount` was given back to it (a hold released or settled for less): never
/// below zero.
#[must_use]
pub fn given_back(spent: Credits, amount: Credits) -> Credits {
    spent.checked_sub(amount).unwrap_or(Credits::ZERO)
}

#[cfg(test)]
mod tests;
