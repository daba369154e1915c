//! Consume from a team's shared pool: N clients, each spending as one of the team's members
//! (`userId` a member, `accountId` the team) with a daily limit per member that every spend
//! checks in its transaction but none reaches, against the same N clients spending one personal
//! account. Both put every client on one balance row, so the difference is what the member's
//! limit costs: the member row's lock, the window counter's update and the `member_id` on the
//! ledger row. The two alternate, round after round, so that both meet the same background.

use serde::Serialize;

use crate::api::Api;
use crate::consume;
use crate::paired::{LEVELS, Names, ROUNDS};
use crate::report::BackendReport;
use crate::run::{Ctx, progress};
use crate::stats::Summary;

/// The team account every member spends from.
pub const TEAM: &str = "team_bench";
/// Its members (one per client at the largest level).
pub const MEMBERS: usize = 128;
/// Each member's daily limit, in hundredths: checked on every spend, never reached.
pub const MEMBER_LIMIT: i64 = 100_000_000_000;
/// The team point's required share of the one-account point.
const NEED: f64 = 0.85;

/// One round at one client count.
#[derive(Debug, Clone, Serialize)]
pub struct TeamRow {
    /// Group-commit mode.
    pub mode: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Which alternation.
    pub round: usize,
    /// Every client spending one personal account.
    pub one_account: Summary,
    /// Every client a member spending the team's pool within their limit.
    pub team: Summary,
}

/// Who spends: the personal account's owner, the team's members.
pub struct Spenders<'a> {
    /// The one personal account.
    pub personal: &'a [String],
    /// The team's members.
    pub members: &'a [String],
    /// The service API key.
    pub api_key: &'a str,
}

/// Measure every level in `mode`, alternating the two.
pub async fn points(ctx: &Ctx, api: &Api, who: &Spenders<'_>, mode: &str) -> Vec<TeamRow> {
    let mut rows = Vec::new();
    for clients in LEVELS {
        for round in 0..ROUNDS {
            let spec = ctx.plan.spec(clients);
            let tag = format!("team-{mode}-{clients}-{round}");
            let one_account = consume::run(
                api,
                who.api_key,
                who.personal,
                None,
                &format!("{tag}-p"),
                spec,
            )
            .await;
            progress(
                &format!("one account {mode} {clients} clients, round {round}"),
                &one_account,
            );
            let team = consume::run(
                api,
                who.api_key,
                who.members,
                Some(TEAM),
                &format!("{tag}-t"),
                spec,
            )
            .await;
            progress(
                &format!("team pool {mode} {clients} clients, round {round}"),
                &team,
            );
            rows.push(TeamRow {
                mode: mode.to_owned(),
                clients,
                round,
                one_account,
                team,
            });
        }
    }
    rows
}

crate::paired::paired_row!(TeamRow, one_account, team);

/// The table of `b`'s team points.
#[must_use]
pub fn table(b: &BackendReport) -> String {
    let intro = format!(
        "Team pool: `POST /api/credits/consume` with `accountId` of a team, each client one of \
         {MEMBERS} members with a daily limit checked on every spend, against the same clients \
         on one personal account (both one balance row; rounds alternate)."
    );
    crate::paired::table(&b.team, &names(&intro))
}

fn names(intro: &str) -> Names<'_> {
    Names {
        intro,
        base: "one account",
        compared: "team",
        need: NEED,
        target: &|clients| {
            format!(
                "team pool consume with member limits at {clients} clients within 15% of one \
                 personal account's consume"
            )
        },
    }
}

/// The target: the team pool within 15% of one personal account, per mode and client count.
#[must_use]
pub fn targets(b: &BackendReport) -> Vec<crate::report::Target> {
    crate::paired::targets(&b.team, &b.backend, &names(""))
}
