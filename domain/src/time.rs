//! Points in time as whole milliseconds since the Unix epoch (UTC).
//!
//! The domain never reads a clock: callers pass `now` in, so every rule is deterministic.

use std::fmt;

/// A point in time, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    #[must_use]
    pub const fn from_unix_millis(millis: i64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    #[must_use]
    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// This instant moved forward by `millis`, saturating at the far future instead of wrapping.
    #[must_use]
    pub const fn plus_millis(self, millis: i64) -> Self {
        Self(self.0.saturating_add(millis))
    }

    /// This instant moved forward by whole days, saturating.
    #[must_use]
    pub const fn plus_days(self, days: i64) -> Self {
        self.plus_millis(days.saturating_mul(86_400_000))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}
