//! Consume from a team's shared pool: N clients, each spending as one of the team's members
//! (`userId` a member, `accountId` the team) with a daily limit per member that every spend
//! checks in its transaction but none reaches, against the same N clients spending one personal
//! account. Both put every client on one balance row, so the difference is what the member's
//! limit costs: the member row's lock, the window counter's update and the `member_id` on the
//! ledger row. The two alternate, round after round, so that both meet the same background.

use serde::Serialize;

use crate::api::Api;
use crate::consume;
use crate::report::BackendReport;
use crate::run::{Ctx, progress};
use crate::stats::Summary;

/// The team account every member spends from.
pub const TEAM: &str = "team_bench";
/// Its members (one per client at the largest level).
pub const MEMBERS: usize = 128;
/// Each member's daily limit, in hundredths: checked on every spend, never reached.
pub const MEMBER_LIMIT: i64 = 100_000_000_000;
/// The client counts compared.
const LEVELS: [usize; 2] = [32, 128];
/// Alternations of the one-account point and the team point at each level.
const ROUNDS: usize = 2;
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

/// The mean rate over the rounds of `mode` at `clients`: (one account, team).
fn means(b: &BackendReport, mode: &str, clients: usize) -> Option<(f64, f64)> {
    let rows: Vec<&TeamRow> = b
        .team
        .iter()
        .filter(|r| r.mode == mode && r.clients == clients)
        .collect();
    if rows.is_empty() {
        return None;
    }
    #[allow(clippy::cast_precision_loss, reason = "a handful of rounds")]
    let n = rows.len() as f64;
    let one = rows.iter().map(|r| r.one_account.per_second).sum::<f64>() / n;
    let team = rows.iter().map(|r| r.team.per_second).sum::<f64>() / n;
    Some((one, team))
}

/// The table of `b`'s team points.
#[must_use]
pub fn table(b: &BackendReport) -> String {
    use std::fmt::Write as _;
    if b.team.is_empty() {
        return String::new();
    }
    let mut md = format!(
        "Team pool: `POST /api/credits/consume` with `accountId` of a team, each client one of \
         {MEMBERS} members with a daily limit checked on every spend, against the same clients \
         on one personal account (both one balance row; rounds alternate).\n\n\
         | mode | clients | round | one account req/s | p50 | p99 | team req/s | p50 | p99 | \
         team / one account | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in &b.team {
        let (o, t) = (&r.one_account, &r.team);
        let ratio = if o.per_second > 0.0 {
            format!("{:.0}%", 100.0 * t.per_second / o.per_second)
        } else {
            "–".to_owned()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {ratio} | {} |",
            r.mode,
            r.clients,
            r.round + 1,
            o.per_second,
            o.p50_ms,
            o.p99_ms,
            t.per_second,
            t.p50_ms,
            t.p99_ms,
            o.errors + t.errors
        );
    }
    md.push('\n');
    md
}

/// The target: the team pool within 15% of one personal account, per mode and client count.
#[must_use]
pub fn targets(b: &BackendReport) -> Vec<crate::report::Target> {
    let mut all = Vec::new();
    for mode in [crate::report::PER_TRANSACTION, crate::report::GROUPED] {
        for clients in LEVELS {
            let judged = means(b, mode, clients).map_or_else(
                || ("not measured".to_owned(), None),
                |(one, team)| {
                    (
                        format!(
                            "mean {team:.0} req/s vs {one:.0} req/s = {:.0}%",
                            if one > 0.0 { 100.0 * team / one } else { 0.0 }
                        ),
                        Some(one > 0.0 && team >= NEED * one),
                    )
                },
            );
            all.push(crate::report::Target {
                target: format!(
                    "team pool consume with member limits at {clients} clients within 15% of one \
                     personal account's consume"
                ),
                backend: b.backend.clone(),
                mode: mode.to_owned(),
                figure: judged.0,
                met: judged.1,
            });
        }
    }
    all
}
