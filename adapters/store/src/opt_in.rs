//! Which opt-in event types (`HostEventKind::OPT_IN`: `credits.consumed`, `credits.reserved`,
//! `credits.settled`, `credits.released`) some enabled webhook endpoint names, so that the
//! spending paths write them only then (issue 17: consumption events are high volume and
//! opt-in per endpoint).
//!
//! Spending is the hottest path, so the answer is kept in memory for [`TTL`]: while no endpoint
//! opted in, a spend costs one uncontended lock and a clock read, and takes the grouped,
//! batched path as before. A change to an endpoint through this store forgets the answer at
//! once; another instance's change takes effect here within [`TTL`] (an endpoint that opts in
//! on another instance may miss the spends of that first second; it never receives a type it
//! did not ask for).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use application::host_events::HostEventKind;
use sea_orm::{ConnectionTrait, DbErr, FromQueryResult};

use crate::sql;

/// How long an answer is kept.
pub(crate) const TTL: Duration = Duration::from_secs(1);

/// A set of opt-in types (a bit per entry of `HostEventKind::OPT_IN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Wanted(u8);

impl Wanted {
    /// No opt-in type.
    pub(crate) const NONE: Wanted = Wanted(0);

    fn bit(kind: HostEventKind) -> u8 {
        HostEventKind::OPT_IN
            .iter()
            .position(|k| *k == kind)
            .map_or(0, |i| 1 << i)
    }

    /// The opt-in types among `kinds`.
    pub(crate) fn of(kinds: impl IntoIterator<Item = HostEventKind>) -> Self {
        Wanted(kinds.into_iter().fold(0, |set, k| set | Self::bit(k)))
    }

    /// Whether `kind` is wanted (never true for a type that is not opt-in).
    pub(crate) fn wants(self, kind: HostEventKind) -> bool {
        let bit = Self::bit(kind);
        bit != 0 && self.0 & bit != 0
    }
}

#[derive(Debug, FromQueryResult)]
struct TypesRow {
    event_types: String,
}

/// The last answer and when it was read, shared by the store's clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct OptInCache(Arc<Mutex<Option<(Wanted, Instant)>>>);

impl OptInCache {
    /// The opt-in types some enabled endpoint names, read again when the answer is older than
    /// [`TTL`].
    pub(crate) async fn wanted<C: ConnectionTrait>(&self, db: &C) -> Result<Wanted, DbErr> {
        if let Some(known) = self.fresh() {
            return Ok(known);
        }
        let sql = "SELECT event_types FROM webhook_endpoints WHERE enabled";
        let rows: Vec<TypesRow> = sql::all(db, sql, vec![]).await?;
        let wanted = Wanted::of(rows.iter().flat_map(|row| {
            row.event_types
                .split(',')
                .filter_map(|code| HostEventKind::parse(code.trim()))
        }));
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some((wanted, Instant::now()));
        }
        Ok(wanted)
    }

    fn fresh(&self) -> Option<Wanted> {
        let slot = self.0.lock().ok()?;
        let (wanted, read) = (*slot)?;
        (read.elapsed() < TTL).then_some(wanted)
    }

    /// Forget the answer (an endpoint changed through this store).
    pub(crate) fn forget(&self) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_opt_in_types_are_wanted() {
        let wanted = Wanted::of([HostEventKind::CreditsSettled, HostEventKind::OrderPaid]);
        assert!(wanted.wants(HostEventKind::CreditsSettled));
        assert!(!wanted.wants(HostEventKind::CreditsConsumed));
        assert!(!wanted.wants(HostEventKind::OrderPaid));
        assert_eq!(Wanted::of([HostEventKind::OrderPaid]), Wanted::NONE);
        assert!(!Wanted::NONE.wants(HostEventKind::CreditsConsumed));
        let all = Wanted::of(HostEventKind::OPT_IN);
        assert!(HostEventKind::OPT_IN.iter().all(|k| all.wants(*k)));
    }
}
