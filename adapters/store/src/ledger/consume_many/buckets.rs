//! The spend-limit buckets of a run of consumptions. The run counts each fresh spend against
//! the limits of its account as the one-by-one path does (`crate::limits::count`), in memory,
//! and writes each bucket it moved once, with the sum of its counts.
//!
//! The bucket upsert is not conditional: what guards it is the balance row. Every change to a
//! limit's buckets (a spend, a hold, its release or settle) posts a transaction on the
//! account's balance row, and every limit made or removed counts in its `limit_changes`, both
//! under the row's lock; the run's decrement writes only if the row still holds what the run
//! read, and the run fails whole otherwise. On PostgreSQL the upsert reads the decrement's
//! result first, so it runs after the balance rows are locked: the lock order of every spend.

use super::{Cell, Part, rows};
use crate::limits::{ADD_TO_BUCKETS, LimitCount};
use crate::retry::Fail;

/// The buckets' upsert of `sums` (one count per bucket: `crate::limits::bucket_sums`),
/// parameters from `$first`; returns the part and how many rows it must write, or `None` when
/// the run counted nothing.
pub(super) fn part(postgres: bool, first: usize, sums: &[LimitCount]) -> Option<(Part, usize)> {
    if sums.is_empty() {
        return None;
    }
    let table = sums
        .iter()
        .map(|c| {
            vec![
                Cell::text(c.id.as_str()),
                Cell::Int(Some(c.bucket.unix_millis())),
                Cell::Int(Some(c.amount.hundredths())),
            ]
        })
        .collect();
    let (cte, values) = rows(
        postgres,
        ("lu", first),
        &[("lid", "text"), ("bs", "bigint"), ("amt", "bigint")],
        table,
    );
    // `WHERE TRUE`: SQLite's parser needs a WHERE between INSERT … SELECT and ON CONFLICT.
    let after_debits = if postgres {
        "(SELECT count(*) FROM deb) >= 0"
    } else {
        "TRUE"
    };
    let statement = format!(
        "INSERT INTO spend_limit_usage (limit_id, bucket_start, spent_hundredths) \
         SELECT lid, bs, amt FROM lu WHERE {after_debits} {ADD_TO_BUCKETS} RETURNING limit_id"
    );
    Some((
        Part {
            cte,
            statement,
            values,
        },
        sums.len(),
    ))
}

/// Every bucket the run counted in was written.
pub(super) fn check_counted(written: usize, expected: usize) -> Result<(), Fail> {
    if written == expected {
        Ok(())
    } else {
        Err(Fail::Retry(
            "a limit's bucket was not written by a batched spend",
        ))
    }
}
