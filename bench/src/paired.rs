//! Paired comparisons: a base point and a compared point measured alternately, round after
//! round, at each client count and in each mode, so that both meet the same background; the
//! compared point's target is a share of the base's mean rate. The team pool, the spend limits
//! and the token-kind pricing are measured this way.

use std::fmt::Write as _;

use crate::report::Target;
use crate::stats::Summary;

/// The client counts compared.
pub const LEVELS: [usize; 2] = [32, 128];
/// Alternations of the two points at each level.
pub const ROUNDS: usize = 2;

/// One round of a paired comparison.
pub trait Paired {
    /// Group-commit mode.
    fn mode(&self) -> &str;
    /// Concurrent clients.
    fn clients(&self) -> usize;
    /// Which alternation.
    fn round(&self) -> usize;
    /// The point compared against.
    fn base(&self) -> &Summary;
    /// The point compared.
    fn compared(&self) -> &Summary;
}

/// What a comparison is called in its table and targets.
pub struct Names<'a> {
    /// The paragraph above the table.
    pub intro: &'a str,
    /// The base point's column.
    pub base: &'a str,
    /// The compared point's column.
    pub compared: &'a str,
    /// The compared point's required share of the base's mean rate.
    pub need: f64,
    /// The target at a client count.
    pub target: &'a dyn Fn(usize) -> String,
}

/// The mean rate over the rounds of `mode` at `clients`: (base, compared).
fn means<R: Paired>(rows: &[R], mode: &str, clients: usize) -> Option<(f64, f64)> {
    let rows: Vec<&R> = rows
        .iter()
        .filter(|r| r.mode() == mode && r.clients() == clients)
        .collect();
    if rows.is_empty() {
        return None;
    }
    #[allow(clippy::cast_precision_loss, reason = "a handful of rounds")]
    let n = rows.len() as f64;
    let base = rows.iter().map(|r| r.base().per_second).sum::<f64>() / n;
    let compared = rows.iter().map(|r| r.compared().per_second).sum::<f64>() / n;
    Some((base, compared))
}

/// The table of `rows` (empty without rows).
#[must_use]
pub fn table<R: Paired>(rows: &[R], names: &Names<'_>) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let (b, c) = (names.base, names.compared);
    let mut md = format!(
        "{}\n\n| mode | clients | round | {b} req/s | p50 | p99 | {c} req/s | p50 | p99 | \
         {c} / {b} | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        names.intro
    );
    for r in rows {
        let (b, c) = (r.base(), r.compared());
        let ratio = if b.per_second > 0.0 {
            format!("{:.0}%", 100.0 * c.per_second / b.per_second)
        } else {
            "–".to_owned()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {ratio} | {} |",
            r.mode(),
            r.clients(),
            r.round() + 1,
            b.per_second,
            b.p50_ms,
            b.p99_ms,
            c.per_second,
            c.p50_ms,
            c.p99_ms,
            b.errors + c.errors
        );
    }
    md.push('\n');
    md
}

/// The targets of `rows` on `backend`, per mode and client count.
#[must_use]
pub fn targets<R: Paired>(rows: &[R], backend: &str, names: &Names<'_>) -> Vec<Target> {
    let mut all = Vec::new();
    for mode in [crate::report::PER_TRANSACTION, crate::report::GROUPED] {
        for clients in LEVELS {
            let (figure, met) = means(rows, mode, clients).map_or_else(
                || ("not measured".to_owned(), None),
                |(base, compared)| {
                    let share = if base > 0.0 {
                        100.0 * compared / base
                    } else {
                        0.0
                    };
                    (
                        format!("mean {compared:.0} req/s vs {base:.0} req/s = {share:.0}%"),
                        Some(base > 0.0 && compared >= names.need * base),
                    )
                },
            );
            all.push(Target {
                target: (names.target)(clients),
                backend: backend.to_owned(),
                mode: mode.to_owned(),
                figure,
                met,
            });
        }
    }
    all
}

/// Implement [`Paired`] for a row type with `mode`, `clients` and `round` fields and the named
/// base and compared summaries.
macro_rules! paired_row {
    ($row:ty, $base:ident, $compared:ident) => {
        impl crate::paired::Paired for $row {
            fn mode(&self) -> &str {
                &self.mode
            }
            fn clients(&self) -> usize {
                self.clients
            }
            fn round(&self) -> usize {
                self.round
            }
            fn base(&self) -> &crate::stats::Summary {
                &self.$base
            }
            fn compared(&self) -> &crate::stats::Summary {
                &self.$compared
            }
        }
    };
}
pub(crate) use paired_row;
