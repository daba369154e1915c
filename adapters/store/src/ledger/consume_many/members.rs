//! The team members of a run of consumptions. A member's spend is decided as on the one-by-one
//! path (`super::super::spend::consume`): their row, read after the balances (locked after them
//! on the locked path, the one lock order of every spend), counts each spend against their limit
//! with `domain::count_spend` before the balance decides it, and the run writes one update per
//! member with the count its spends left.
//!
//! The update is conditional on the row still holding what the run started from: the window's
//! start and count, and the limit. Under the locks nothing else can have changed it; on the
//! unlocked path and from the writer's memory ([`super::Known`]) it is what tells the run that a
//! spend elsewhere, a limit change or a removal came in between, and the run then takes the
//! locked path. A member not found (never one, removed, or away) is refused as on the one-by-one
//! path.

use std::collections::{BTreeMap, BTreeSet};

use application::ports::{ConsumeCommand, Refusal};
use domain::{MemberLimit, WindowCount, count_spend};
use sea_orm::{ConnectionTrait, FromQueryResult};

use super::{Cell, Lock, Part, is_postgres, rows};
use crate::accounts::{LOCKED_COLUMNS, MemberRow};
use crate::retry::Fail;
use crate::sql;

/// A member: (account, user).
pub(super) type MemberKey = (String, String);

/// One member's row as the run has left it so far.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemberCount {
    /// Their limit as read.
    pub(super) limit: Option<MemberLimit>,
    /// The count as read: the update writes only if the row still holds it.
    pub(super) was: WindowCount,
    /// The count the run's spends left.
    pub(super) now: WindowCount,
    /// Whether a spend of the run was counted here (only those rows are written).
    pub(super) spent: bool,
}

impl MemberCount {
    /// A row as read (or remembered).
    pub(super) fn read(limit: Option<MemberLimit>, count: WindowCount) -> Self {
        MemberCount {
            limit,
            was: count,
            now: count,
            spent: false,
        }
    }
}

/// The members the run's spends act as, in (account, user) order; a key absent is not a member.
pub(super) type Members = BTreeMap<MemberKey, MemberCount>;

/// The (account, member) pairs of the run's spends by members.
pub(super) fn keys<'c>(commands: &[&'c ConsumeCommand]) -> BTreeSet<(&'c str, &'c str)> {
    commands
        .iter()
        .filter_map(|c| Some((c.account_id.as_str(), c.member_id.as_ref()?.as_str())))
        .collect()
}

/// The rows of the run's members, in (account, user) order; with [`Lock::Rows`] locked on
/// PostgreSQL after the balances the caller locked first.
pub(super) async fn read<C: ConnectionTrait>(
    conn: &C,
    commands: &[&ConsumeCommand],
    lock: Lock,
) -> Result<Members, Fail> {
    let pairs = keys(commands);
    if pairs.is_empty() {
        return Ok(Members::new());
    }
    let postgres = is_postgres(conn);
    let table = pairs
        .iter()
        .map(|(account, user)| vec![Cell::text(*account), Cell::text(*user)])
        .collect();
    let (cte, values) = rows(
        postgres,
        ("p", 1),
        &[("aid", "text"), ("uid", "text")],
        table,
    );
    // CROSS JOIN: one probe of the primary key (account, user) per pair.
    let sql = format!(
        "WITH {cte} SELECT {LOCKED_COLUMNS} FROM p CROSS JOIN account_members m \
         WHERE m.account_id = p.aid AND m.user_id = p.uid ORDER BY m.account_id, m.user_id{}",
        if postgres && lock == Lock::Rows {
            " FOR UPDATE OF m"
        } else {
            ""
        }
    );
    let mut members = Members::new();
    for row in sql::rows(conn, &sql, values).await? {
        let member = MemberRow::from_query_result(&row, "")?.into_domain()?;
        members.insert(
            (
                member.account_id.as_str().to_owned(),
                member.user_id.as_str().to_owned(),
            ),
            MemberCount::read(member.limit, member.count),
        );
    }
    Ok(members)
}

/// Count `c` against its member's limit as the run left it: the member's key and count to
/// apply once the balance covers the spend (`None` for a spend from a personal account), or the
/// refusal (not a member, past the limit).
pub(super) fn count(
    members: &Members,
    c: &ConsumeCommand,
) -> Result<Option<(MemberKey, WindowCount)>, Refusal> {
    let Some(member) = &c.member_id else {
        return Ok(None);
    };
    let key = (c.account_id.as_str().to_owned(), member.as_str().to_owned());
    let Some(row) = members.get(&key) else {
        return Err(Refusal::NotAMember);
    };
    let counted =
        count_spend(row.limit, row.now, c.amount, c.now).map_err(Refusal::LimitReached)?;
    Ok(Some((key, counted)))
}

/// Apply a count [`count`] decided, once its spend is decided fresh.
pub(super) fn apply(members: &mut Members, counted: Option<(MemberKey, WindowCount)>) {
    if let Some((key, count)) = counted
        && let Some(row) = members.get_mut(&key)
    {
        row.now = count;
        row.spent = true;
    }
}

/// The members' count updates, each conditional on the row still holding the count and the
/// limit the run started from (parameters from `$first`); returns the part and how many rows it
/// must change, or `None` when no member spent.
pub(super) fn part(postgres: bool, first: usize, members: &Members) -> Option<(Part, usize)> {
    let table: Vec<Vec<Cell>> = members
        .iter()
        .filter(|(_, m)| m.spent)
        .map(|((account, user), m)| {
            vec![
                Cell::text(account.as_str()),
                Cell::text(user.as_str()),
                Cell::Int(Some(m.now.start.unix_millis())),
                Cell::Int(Some(m.now.spent.hundredths())),
                Cell::Int(Some(m.was.start.unix_millis())),
                Cell::Int(Some(m.was.spent.hundredths())),
                Cell::Int(m.limit.map(|l| l.credits.hundredths())),
                Cell::Text(m.limit.map(|l| l.window.code().to_owned())),
            ]
        })
        .collect();
    if table.is_empty() {
        return None;
    }
    let count = table.len();
    let (mut cte, values) = rows(
        postgres,
        ("mc", first),
        &[
            ("aid", "text"),
            ("uid", "text"),
            ("ws", "bigint"),
            ("wsp", "bigint"),
            ("was_ws", "bigint"),
            ("was_wsp", "bigint"),
            ("lim", "bigint"),
            ("lw", "text"),
        ],
        table,
    );
    // A null-safe comparison: no limit is NULL in both.
    let same = if postgres {
        "IS NOT DISTINCT FROM"
    } else {
        "IS"
    };
    // PostgreSQL: lock the rows in (account, user) order first (`mlk`, read to the end by the
    // UPDATE's one-time filter before it touches a row), the order a member change takes them
    // in, so that a batch and a change wait for each other instead of deadlocking.
    let gate = if postgres {
        cte.push_str(
            ", mlk AS MATERIALIZED (SELECT m.account_id FROM account_members m \
             JOIN mc ON m.account_id = mc.aid AND m.user_id = mc.uid \
             ORDER BY m.account_id, m.user_id FOR UPDATE OF m)",
        );
        "(SELECT count(*) FROM mlk) >= 0 AND "
    } else {
        ""
    };
    let statement = format!(
        "UPDATE account_members SET window_start = mc.ws, window_spent_hundredths = mc.wsp \
         FROM mc WHERE {gate}account_id = mc.aid AND user_id = mc.uid \
         AND window_start = mc.was_ws AND window_spent_hundredths = mc.was_wsp \
         AND limit_hundredths {same} mc.lim AND limit_window {same} mc.lw RETURNING account_id"
    );
    Some((
        Part {
            cte,
            statement,
            values,
        },
        count,
    ))
}

/// Every member row the run counted in was written.
pub(super) fn check_counted(written: usize, expected: usize) -> Result<(), Fail> {
    if written == expected {
        Ok(())
    } else {
        Err(Fail::Retry("a member's row changed during a batched spend"))
    }
}
