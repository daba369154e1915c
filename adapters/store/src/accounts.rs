//! Accounts: every user's personal account, and teams with their members.
//!
//! A member's row carries their limit and the count of their current window; a spend from a
//! team reads it locked, after the account's balance row (one lock order for every spend), and
//! writes the count the domain decided in the same transaction.

use application::accounts::TokenHash;
use application::ports::{
    AcceptError, AcceptInvitation, Account, HostOrgSync, Invitation, Member, MemberChangeError,
    MemberChanged, MemberCommand, MemberEvents, Membership, NewInvitation, NewTeam, StoreError,
    TeamAccountSummary, TeamStore,
};
use async_trait::async_trait;
use domain::{
    AccountId, AccountKind, Credits, HostOrgMembership, LimitWindow, MemberChange,
    MemberChangeRefusal, MemberFacts, MemberLimit, MemberRole, Timestamp, UserId, WindowCount,
    decide_member_change,
};
use sea_orm::{DatabaseTransaction, FromQueryResult};

mod invitations;

use crate::SeaOrmStore;
use crate::limits;
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql::{self, End};

/// Open `user`'s personal account (its id is the user's), created `at`; nothing if it exists.
pub(crate) async fn open_personal(
    tx: &DatabaseTransaction,
    user: &UserId,
    at: Timestamp,
    ceiling: Option<Credits>,
) -> Result<(), Fail> {
    let sql = "INSERT INTO accounts (id, kind, name, created_by, created_at) \
               VALUES ($1, 'personal', NULL, $1, $2) ON CONFLICT (id) DO NOTHING";
    let opened = sql::execute(tx, sql, vec![user.as_str().into(), at.unix_millis().into()]).await?;
    if opened == 1
        && let Some(ceiling) = ceiling
    {
        limits::open_with_ceiling(tx, &AccountId::personal(user), ceiling, at).await?;
    }
    Ok(())
}

const ACCOUNT_COLUMNS: &str = "a.id, a.kind, a.name, a.host_organisation, a.created_at";

#[derive(Debug, FromQueryResult)]
struct AccountRow {
    id: String,
    kind: String,
    name: Option<String>,
    host_organisation: Option<String>,
    created_at: i64,
}

impl AccountRow {
    fn into_domain(self) -> Result<Account, StoreError> {
        let bad = |what: String| corrupt("accounts", &self.id, what);
        Ok(Account {
            id: AccountId::new(self.id.clone()).map_err(|e| bad(e.to_string()))?,
            kind: AccountKind::parse(&self.kind)
                .ok_or_else(|| bad(format!("unknown kind {:?}", self.kind)))?,
            name: self.name,
            host_organisation: self.host_organisation,
            created_at: Timestamp::from_unix_millis(self.created_at),
        })
    }
}

/// The columns of [`TeamAccountRow`] over `accounts a` joined with its balance `b` (`LEFT JOIN
/// credit_balances b ON b.account_id = a.id`): the present members are counted on
/// `account_members`' primary key, whose first column is the account.
pub(crate) const TEAM_SUMMARY_COLUMNS: &str = "a.id, a.kind, a.name, a.host_organisation, \
    a.created_at, COALESCE(b.balance_hundredths, 0) AS balance_hundredths, \
    (SELECT COUNT(*) FROM account_members m WHERE m.account_id = a.id) AS members";

/// A team account with its balance and how many members are present, as the console lists it.
#[derive(Debug, FromQueryResult)]
pub(crate) struct TeamAccountRow {
    id: String,
    kind: String,
    name: Option<String>,
    host_organisation: Option<String>,
    created_at: i64,
    balance_hundredths: i64,
    members: i64,
}

impl TeamAccountRow {
    pub(crate) fn into_domain(self) -> Result<TeamAccountSummary, StoreError> {
        let bad = |what: String| corrupt("accounts", &self.id, what);
        let balance = Credits::from_hundredths(self.balance_hundredths)
            .map_err(|e| bad(format!("balance: {e}")))?;
        let members = u64::try_from(self.members).map_err(|e| bad(format!("members: {e}")))?;
        let account = AccountRow {
            id: self.id,
            kind: self.kind,
            name: self.name,
            host_organisation: self.host_organisation,
            created_at: self.created_at,
        }
        .into_domain()?;
        Ok(TeamAccountSummary {
            account,
            balance,
            members,
        })
    }
}

const MEMBER_COLUMNS: &str = "m.account_id, m.user_id, COALESCE(h.email, u.email) AS email, \
    m.role, m.limit_hundredths, m.limit_window, m.window_start, m.window_spent_hundredths, \
    m.added_at";

/// A member's row as a spend or a change reads it, locked: everything but the address.
pub(crate) const LOCKED_COLUMNS: &str = "m.account_id, m.user_id, CAST(NULL AS TEXT) AS email, m.role, \
    m.limit_hundredths, m.limit_window, m.window_start, m.window_spent_hundredths, m.added_at";

/// The members' rows with their users and, for host users, their host identity (whose e-mail
/// address is the one their host's token gave; their account's is a placeholder).
const MEMBERS_FROM: &str = "account_members m JOIN users u ON u.id = m.user_id \
    LEFT JOIN host_identities h ON h.user_id = m.user_id";

#[derive(Debug, FromQueryResult)]
pub(crate) struct MemberRow {
    account_id: String,
    user_id: String,
    email: Option<String>,
    role: String,
    limit_hundredths: Option<i64>,
    limit_window: Option<String>,
    window_start: i64,
    window_spent_hundredths: i64,
    added_at: i64,
}

impl MemberRow {
    pub(crate) fn into_domain(self) -> Result<Member, StoreError> {
        let key = format!("{}/{}", self.account_id, self.user_id);
        let bad = |what: String| corrupt("account_members", &key, what);
        let credits = |h: i64| Credits::from_hundredths(h).map_err(|e| bad(e.to_string()));
        let limit = match (self.limit_hundredths, self.limit_window.as_deref()) {
            (Some(h), Some(window)) => Some(MemberLimit {
                credits: credits(h)?,
                window: LimitWindow::parse(window)
                    .ok_or_else(|| bad(format!("unknown window {window:?}")))?,
            }),
            (None, None) => None,
            _ => return Err(bad("a limit without its window".into())),
        };
        Ok(Member {
            account_id: AccountId::new(self.account_id.clone()).map_err(|e| bad(e.to_string()))?,
            user_id: UserId::new(self.user_id.clone()).map_err(|e| bad(e.to_string()))?,
            email: self.email,
            role: MemberRole::parse(&self.role)
                .ok_or_else(|| bad(format!("unknown role {:?}", self.role)))?,
            limit,
            count: WindowCount {
                start: Timestamp::from_unix_millis(self.window_start),
                spent: credits(self.window_spent_hundredths)?,
            },
            added_at: Timestamp::from_unix_millis(self.added_at),
        })
    }
}

/// `user`'s membership of `account` (without their address), its row locked until the end of
/// the transaction on PostgreSQL (SQLite's transaction holds the write lock already).
pub(crate) async fn locked_member(
    tx: &DatabaseTransaction,
    account: &AccountId,
    user: &UserId,
) -> Result<Option<Member>, Fail> {
    // The member's own row alone (no address): a spend reads it on the account's key only.
    let sql = format!(
        "SELECT {LOCKED_COLUMNS} FROM account_members m \
         WHERE m.account_id = $1 AND m.user_id = $2{}",
        sql::for_update(tx)
    );
    let row: Option<MemberRow> = sql::one(
        tx,
        &sql,
        vec![account.as_str().into(), user.as_str().into()],
    )
    .await?;
    Ok(row.map(MemberRow::into_domain).transpose()?)
}

/// Write a member's window count as the domain decided it.
pub(crate) async fn write_count(
    tx: &DatabaseTransaction,
    account: &AccountId,
    user: &UserId,
    count: WindowCount,
) -> Result<(), Fail> {
    let sql = "UPDATE account_members SET window_start = $3, window_spent_hundredths = $4 \
               WHERE account_id = $1 AND user_id = $2";
    let values = vec![
        account.as_str().into(),
        user.as_str().into(),
        count.start.unix_millis().into(),
        count.spent.hundredths().into(),
    ];
    if sql::execute(tx, sql, values).await? != 1 {
        return Err(Fail::Store(StoreError::Unexpected(anyhow::anyhow!(
            "the member {user} of {account} went while their row was locked"
        ))));
    }
    Ok(())
}

/// What a member's spends count against a window since `start`, from the ledger: their
/// consumptions, holds and overruns less what settles and releases of holds taken in the
/// window gave back, never below zero (a hold made before `start` and released after gives
/// nothing back to this window). The count a limit set in the middle of a window starts from.
async fn spent_since(
    tx: &DatabaseTransaction,
    account: &AccountId,
    user: &UserId,
    start: Timestamp,
) -> Result<Credits, Fail> {
    // The returns (settles and releases) of holds taken before `start` gave back to their own
    // window; an overrun past a hold is a spend when it was settled.
    let sql = "SELECT CAST(COALESCE(SUM(t.amount_hundredths), 0) AS BIGINT) AS net \
               FROM credit_transactions t LEFT JOIN credit_reservations r \
               ON r.id = t.reservation_id AND r.account_id = t.account_id \
               WHERE t.account_id = $1 AND t.member_id = $2 AND t.created_at >= $3 \
               AND (t.reservation_id IS NULL OR r.created_at >= $3 \
                    OR (t.kind = 'reservation_settle' AND t.amount_hundredths < 0))";
    let net = sql::one_i64(
        tx,
        sql,
        vec![
            account.as_str().into(),
            user.as_str().into(),
            start.unix_millis().into(),
        ],
        "net",
    )
    .await?
    .unwrap_or(0);
    let spent = (-net).max(0);
    Credits::from_hundredths(spent)
        .map_err(|e| Fail::Store(StoreError::Unexpected(anyhow::anyhow!("{e}"))))
}

/// How many owners `account` has.
async fn owners(tx: &DatabaseTransaction, account: &AccountId) -> Result<u32, Fail> {
    let sql = "SELECT COUNT(*) AS n FROM account_members WHERE account_id = $1 AND role = 'owner'";
    let n = sql::one_i64(tx, sql, vec![account.as_str().into()], "n")
        .await?
        .unwrap_or(0);
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

/// The account's kind, its row locked until the end of the transaction on PostgreSQL: every
/// change of a team's members takes this lock first, so that two changes are decided one after
/// the other (two owners leaving at once cannot both pass the last-owner rule).
async fn locked_account_kind(
    tx: &DatabaseTransaction,
    account: &AccountId,
) -> Result<Option<AccountKind>, Fail> {
    let sql = format!(
        "SELECT kind FROM accounts WHERE id = $1{}",
        sql::for_no_key_update(tx)
    );
    let row = sql::rows(tx, &sql, vec![account.as_str().into()]).await?;
    let Some(row) = row.first() else {
        return Ok(None);
    };
    let kind: String = row.try_get("", "kind")?;
    Ok(Some(AccountKind::parse(&kind).ok_or_else(|| {
        corrupt(
            "accounts",
            account.as_str(),
            format!("unknown kind {kind:?}"),
        )
    })?))
}

async fn user_exists(tx: &DatabaseTransaction, user: &UserId) -> Result<bool, Fail> {
    let sql = "SELECT COUNT(*) AS n FROM users WHERE id = $1";
    Ok(sql::one_i64(tx, sql, vec![user.as_str().into()], "n")
        .await?
        .unwrap_or(0)
        > 0)
}

/// One member change, decided on what `tx` reads now and written in it.
async fn apply_change(
    tx: &DatabaseTransaction,
    command: &MemberCommand,
    change: MemberChange,
) -> Result<Result<(), MemberChangeError>, Fail> {
    let account = &command.account;
    let Some(kind) = locked_account_kind(tx, account).await? else {
        return Ok(Err(MemberChangeError::AccountNotFound));
    };
    let (actor, target) = (&command.actor, &command.target);
    // Two members' rows are locked in the order of their ids, as a settle locks them.
    let (actor, target) = if actor == target {
        let row = locked_member(tx, account, actor).await?;
        (row.clone(), row)
    } else if actor < target {
        let a = locked_member(tx, account, actor).await?;
        (a, locked_member(tx, account, target).await?)
    } else {
        let t = locked_member(tx, account, target).await?;
        (locked_member(tx, account, actor).await?, t)
    };
    // The members are counted under the account's lock, which every change takes first: two
    // additions never both take the last seat.
    let members = match (change, command.seats) {
        (MemberChange::Add(_), Some(_)) => member_count(tx, account).await?,
        _ => 0,
    };
    let facts = MemberFacts {
        kind,
        actor: actor.as_ref().map(|m| m.role),
        to_self: command.target == command.actor,
        target: target.as_ref().map(|m| m.role),
        owners: owners(tx, account).await?,
        members,
        seats: command.seats,
        host_managed: account.is_host_org(),
    };
    if let Err(refusal) = decide_member_change(facts, change) {
        return Ok(Err(MemberChangeError::Refused(refusal)));
    }
    write_change(tx, command, change).await
}

/// How many members `account` has.
async fn member_count(tx: &DatabaseTransaction, account: &AccountId) -> Result<u64, Fail> {
    let sql = "SELECT COUNT(*) AS n FROM account_members WHERE account_id = $1";
    let n = sql::one_i64(tx, sql, vec![account.as_str().into()], "n").await?;
    Ok(u64::try_from(n.unwrap_or(0)).unwrap_or(0))
}

/// Write a member change the rules allowed.
async fn write_change(
    tx: &DatabaseTransaction,
    command: &MemberCommand,
    change: MemberChange,
) -> Result<Result<(), MemberChangeError>, Fail> {
    let account = &command.account;
    let who = vec![account.as_str().into(), command.target.as_str().into()];
    match change {
        MemberChange::Add(role) => {
            if !user_exists(tx, &command.target).await? {
                return Ok(Err(MemberChangeError::UserNotFound));
            }
            let sql = "INSERT INTO account_members (account_id, user_id, role, added_at) \
                       VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
            let mut values = who;
            values.extend([role.code().into(), command.now.unix_millis().into()]);
            if sql::execute(tx, sql, values).await? != 1 {
                // Added concurrently: decided again on what is there now.
                return Err(Fail::Retry("a member was added concurrently"));
            }
            members_changed(tx, account).await?;
        }
        MemberChange::SetRole(role) => {
            let sql = "UPDATE account_members SET role = $3 WHERE account_id = $1 AND user_id = $2";
            let mut values = who;
            values.push(role.code().into());
            sql::execute(tx, sql, values).await?;
        }
        MemberChange::SetLimit(limit) => {
            // A limit counts from what the member already spent in its current window.
            let (hundredths, window, start, spent) = match limit {
                Some(limit) => {
                    let start = limit.window.start_of(command.now);
                    let spent = spent_since(tx, account, &command.target, start).await?;
                    (
                        Some(limit.credits.hundredths()),
                        Some(limit.window.code()),
                        start.unix_millis(),
                        spent.hundredths(),
                    )
                }
                None => (None, None, 0, 0),
            };
            let sql = "UPDATE account_members SET limit_hundredths = $3, limit_window = $4, \
                       window_start = $5, window_spent_hundredths = $6 \
                       WHERE account_id = $1 AND user_id = $2";
            let mut values = who.clone();
            values.extend([hundredths.into(), window.into(), start.into(), spent.into()]);
            sql::execute(tx, sql, values).await?;
            // The member's pending holds taken in the window count in it now (their release
            // gives the headroom back); older ones, or all without a limit, count in none.
            let sql = "UPDATE credit_reservations SET window_start = CASE \
                       WHEN $3 > 0 AND created_at >= $3 THEN $3 ELSE NULL END \
                       WHERE account_id = $1 AND member_id = $2 AND status = $4";
            let mut values = who;
            values.extend([start.into(), "pending".into()]);
            sql::execute(tx, sql, values).await?;
        }
        MemberChange::Remove => {
            let sql = "DELETE FROM account_members WHERE account_id = $1 AND user_id = $2";
            sql::execute(tx, sql, who).await?;
            members_changed(tx, account).await?;
        }
    }
    Ok(Ok(()))
}

/// `user`'s rows in host organisations' teams ($1), present and away: the member table and the
/// away table, both read on `user_id`'s index.
const HOST_MEMBERSHIPS: &str = "SELECT account_id, role, 0 AS away FROM account_members \
    WHERE user_id = $1 AND substr(account_id, 1, 9) = 'team_org_' \
    UNION ALL SELECT account_id, role, 1 AS away FROM account_members_away WHERE user_id = $1 \
    ORDER BY account_id";

#[derive(Debug, FromQueryResult)]
struct HostMembershipRow {
    account_id: String,
    role: String,
    away: i32,
}

impl HostMembershipRow {
    fn into_domain(self) -> Result<HostOrgMembership, StoreError> {
        let bad = |what: String| corrupt("account_members", &self.account_id, what);
        Ok(HostOrgMembership {
            account: AccountId::new(self.account_id.clone()).map_err(|e| bad(e.to_string()))?,
            role: MemberRole::parse(&self.role)
                .ok_or_else(|| bad(format!("unknown role {:?}", self.role)))?,
            away: self.away != 0,
        })
    }
}

/// The member columns both tables share.
const MEMBER_ROW: &str = "account_id, user_id, role, limit_hundredths, limit_window, \
    window_start, window_spent_hundredths, added_at";

/// Move `user`'s row in `account` from the member table to the away table, or back (`away`
/// false); `now` is when they stepped away.
async fn move_member(
    tx: &DatabaseTransaction,
    account: &AccountId,
    user: &UserId,
    away: bool,
    now: Timestamp,
) -> Result<(), Fail> {
    let who = vec![account.as_str().into(), user.as_str().into()];
    // The row is locked before it is copied, so that the copy is the row as a change that
    // committed just before left it (a limit set, a spend counted), never an older version.
    let lock = format!(
        "SELECT user_id FROM {} WHERE account_id = $1 AND user_id = $2{}",
        if away {
            "account_members"
        } else {
            "account_members_away"
        },
        sql::for_update(tx)
    );
    if sql::rows(tx, &lock, who.clone()).await?.is_empty() {
        return Err(Fail::Retry("a host member's row moved concurrently"));
    }
    let (insert, from) = if away {
        (
            format!(
                "INSERT INTO account_members_away ({MEMBER_ROW}, away_since) \
                 SELECT {MEMBER_ROW}, $3 FROM account_members \
                 WHERE account_id = $1 AND user_id = $2"
            ),
            "account_members",
        )
    } else {
        (
            format!(
                "INSERT INTO account_members ({MEMBER_ROW}) SELECT {MEMBER_ROW} \
                 FROM account_members_away WHERE account_id = $1 AND user_id = $2"
            ),
            "account_members_away",
        )
    };
    let mut values = who.clone();
    if away {
        values.push(now.unix_millis().into());
    }
    if sql::execute(tx, &insert, values).await? != 1 {
        return Err(Fail::Retry("a host member's row moved concurrently"));
    }
    let delete = format!("DELETE FROM {from} WHERE account_id = $1 AND user_id = $2");
    sql::execute(tx, &delete, who).await?;
    members_changed(tx, account).await
}

/// A team's members changed: the owners are told again at the next refusal for seats.
async fn members_changed(tx: &DatabaseTransaction, account: &AccountId) -> Result<(), Fail> {
    let sql = "UPDATE accounts SET seats_told = NULL WHERE id = $1 AND seats_told IS NOT NULL";
    sql::execute(tx, sql, vec![account.as_str().into()]).await?;
    Ok(())
}

/// Open the team of the organisation `sync` claims unless it exists (whichever instance commits
/// first creates it).
async fn open_host_team(
    tx: &DatabaseTransaction,
    sync: &HostOrgSync,
    ceiling: Option<Credits>,
) -> Result<(), Fail> {
    let (Some(claim), Some((organisation, name))) = (&sync.claim, &sync.organisation) else {
        return Ok(());
    };
    let sql = "INSERT INTO accounts (id, kind, name, created_by, created_at, \
               host_organisation) VALUES ($1, 'team', $2, $3, $4, $5) \
               ON CONFLICT (id) DO NOTHING";
    let values = vec![
        claim.account.as_str().into(),
        name.as_str().into(),
        sync.user.as_str().into(),
        sync.now.unix_millis().into(),
        organisation.as_str().into(),
    ];
    if sql::execute(tx, sql, values).await? == 1
        && let Some(ceiling) = ceiling
    {
        limits::open_with_ceiling(tx, &claim.account, ceiling, sync.now).await?;
    }
    Ok(())
}

/// Lock `user`'s row: every sync of one user's memberships takes it first, so that two
/// requests of theirs at once are written one after the other on what the first left.
async fn lock_user(tx: &DatabaseTransaction, user: &UserId) -> Result<(), Fail> {
    let sql = format!(
        "SELECT id FROM users WHERE id = $1{}",
        sql::for_no_key_update(tx)
    );
    sql::rows(tx, &sql, vec![user.as_str().into()]).await?;
    Ok(())
}

/// `user`'s rows in host organisations' teams, read in `tx`.
async fn held_host_rows(
    tx: &DatabaseTransaction,
    user: &UserId,
) -> Result<Vec<HostOrgMembership>, Fail> {
    let held: Vec<HostMembershipRow> =
        sql::all(tx, HOST_MEMBERSHIPS, vec![user.as_str().into()]).await?;
    Ok(held
        .into_iter()
        .map(HostMembershipRow::into_domain)
        .collect::<Result<Vec<_>, _>>()?)
}

/// Whether a seat is free for `sync.user` in the claimed team, counted under its lock; when
/// none is, `account.seats_exceeded` is written.
async fn seat_for(
    tx: &DatabaseTransaction,
    sync: &HostOrgSync,
    account: &AccountId,
    events: &crate::Enc,
) -> Result<Result<(), MemberChangeRefusal>, Fail> {
    let members = member_count(tx, account).await?;
    let refusal = match domain::seat_free(members, sync.seats) {
        Ok(()) => return Ok(Ok(())),
        Err(refusal) => refusal,
    };
    let seats = sync.seats.unwrap_or(members);
    let who = (account, &sync.user, &sync.user);
    tell_seats_exceeded(tx, who, (seats, members), sync.now, events).await?;
    Ok(Err(refusal))
}

/// Tell `account.seats_exceeded` for `user`, refused by `by`, unless the team's owners were
/// told already at these seats and this count (`accounts.seats_told`, written under the team's
/// lock): a full team's refusals tell once until its seats or members change.
async fn tell_seats_exceeded(
    tx: &DatabaseTransaction,
    who: (&AccountId, &UserId, &UserId),
    (seats, members): (u64, u64),
    now: Timestamp,
    events: &crate::Enc,
) -> Result<(), Fail> {
    let state = format!("{seats}:{members}");
    let sql = "UPDATE accounts SET seats_told = $2 \
               WHERE id = $1 AND (seats_told IS NULL OR seats_told <> $2)";
    let values = vec![who.0.as_str().into(), state.into()];
    if sql::execute(tx, sql, values).await? == 1 {
        let told = application::host_events::seats_exceeded(who, seats, members, now);
        Outbox::from(vec![told]).write(tx, events).await?;
    }
    Ok(())
}

/// Write the steps that bring `sync.user` into the claimed team, or change their role there.
async fn join_host_team(
    tx: &DatabaseTransaction,
    sync: &HostOrgSync,
    account: &AccountId,
    steps: &domain::HostOrgSteps,
) -> Result<(), Fail> {
    let who = || vec![account.as_str().into(), sync.user.as_str().into()];
    if let Some(role) = steps.join {
        let sql = "INSERT INTO account_members (account_id, user_id, role, added_at) \
                   VALUES ($1, $2, $3, $4)";
        let mut values = who();
        values.extend([role.code().into(), sync.now.unix_millis().into()]);
        sql::execute(tx, sql, values).await?;
        members_changed(tx, account).await?;
    }
    if steps.come_back {
        move_member(tx, account, &sync.user, false, sync.now).await?;
    }
    if let Some(role) = steps.set_role {
        let sql = "UPDATE account_members SET role = $3 WHERE account_id = $1 AND user_id = $2";
        let mut values = who();
        values.push(role.code().into());
        sql::execute(tx, sql, values).await?;
    }
    Ok(())
}

/// Keep `sync.user`'s memberships in step with their token, in `tx` (see
/// [`TeamStore::sync_host_org`]).
async fn sync_host_org(
    tx: &DatabaseTransaction,
    sync: &HostOrgSync,
    told: MemberEvents,
    (events, ceiling): (&crate::Enc, Option<Credits>),
) -> Result<End<Result<(), MemberChangeRefusal>>, Fail> {
    lock_user(tx, &sync.user).await?;
    open_host_team(tx, sync, ceiling).await?;
    let held = held_host_rows(tx, &sync.user).await?;
    let steps = domain::plan_host_org(&held, sync.claim.as_ref());
    // The lock every change of a team's members takes, on each team this sync changes, in the
    // order of their ids (two users' syncs in opposite directions take them in the same order).
    let mut teams: Vec<&AccountId> = steps.step_away.iter().collect();
    teams.extend(sync.claim.as_ref().map(|c| &c.account));
    teams.sort_unstable();
    for team in teams {
        locked_account_kind(tx, team).await?;
    }
    for account in &steps.step_away {
        move_member(tx, account, &sync.user, true, sync.now).await?;
    }
    let Some(claim) = &sync.claim else {
        return Ok(End::Commit(Ok(())));
    };
    if steps.takes_a_seat()
        && let Err(refusal) = seat_for(tx, sync, &claim.account, events).await?
    {
        return Ok(End::Commit(Err(refusal)));
    }
    let before = locked_member(tx, &claim.account, &sync.user).await?;
    join_host_team(tx, sync, &claim.account, &steps).await?;
    let after = locked_member(tx, &claim.account, &sync.user).await?;
    // A join tells `account.member_added`, a role change `account.member_role_changed`; coming
    // back and stepping away tell nothing (a member switching organisations is not news): one
    // coming back is "before" as they were while away.
    let before = match before {
        None if steps.come_back => {
            let away_role = held
                .iter()
                .find(|m| m.account == claim.account)
                .map(|m| m.role);
            after.clone().map(|a| Member {
                role: away_role.unwrap_or(a.role),
                ..a
            })
        }
        before => before,
    };
    let command = MemberCommand {
        account: claim.account.clone(),
        actor: sync.user.clone(),
        target: sync.user.clone(),
        changes: steps
            .join
            .map(MemberChange::Add)
            .into_iter()
            .chain(steps.set_role.map(MemberChange::SetRole))
            .collect(),
        seats: sync.seats,
        now: sync.now,
    };
    let changed = MemberChanged { before, after };
    Outbox::from(told(&command, &changed))
        .write(tx, events)
        .await?;
    Ok(End::Commit(Ok(())))
}

#[async_trait]
impl TeamStore for SeaOrmStore {
    async fn create_team(&self, team: &NewTeam) -> Result<Account, StoreError> {
        self.retry
            .run("create_team", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = async {
                    let sql = "INSERT INTO accounts (id, kind, name, created_by, created_at) \
                               VALUES ($1, 'team', $2, $3, $4)";
                    let values = vec![
                        team.id.as_str().into(),
                        team.name.as_str().into(),
                        team.owner.as_str().into(),
                        team.now.unix_millis().into(),
                    ];
                    sql::execute(&tx, sql, values).await?;
                    if let Some(ceiling) = self.new_account_ceiling() {
                        limits::open_with_ceiling(&tx, &team.id, ceiling, team.now).await?;
                    }
                    let sql = "INSERT INTO account_members (account_id, user_id, role, added_at) \
                               VALUES ($1, $2, 'owner', $3)";
                    let values = vec![
                        team.id.as_str().into(),
                        team.owner.as_str().into(),
                        team.now.unix_millis().into(),
                    ];
                    sql::execute(&tx, sql, values).await?;
                    let owner = locked_member(&tx, &team.id, &team.owner)
                        .await?
                        .ok_or_else(|| {
                            StoreError::Unexpected(anyhow::anyhow!("the owner just added"))
                        })?;
                    let command = MemberCommand {
                        account: team.id.clone(),
                        actor: team.owner.clone(),
                        target: team.owner.clone(),
                        changes: vec![MemberChange::Add(MemberRole::Owner)],
                        seats: None,
                        now: team.now,
                    };
                    let changed = MemberChanged {
                        before: None,
                        after: Some(owner),
                    };
                    let told = application::host_events::member_changed(&command, &changed);
                    Outbox::from(told).write(&tx, &*self.events).await?;
                    Ok(End::Commit(Account {
                        id: team.id.clone(),
                        kind: AccountKind::Team,
                        name: Some(team.name.clone()),
                        host_organisation: None,
                        created_at: team.now,
                    }))
                }
                .await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        let sql = format!("SELECT {ACCOUNT_COLUMNS} FROM accounts a WHERE a.id = $1");
        let row: Option<AccountRow> = self
            .fetch_one("account", &sql, vec![id.as_str().into()])
            .await?;
        row.map(AccountRow::into_domain).transpose()
    }

    async fn memberships(&self, user: &UserId) -> Result<Vec<Membership>, StoreError> {
        let sql = format!(
            "SELECT {ACCOUNT_COLUMNS}, m.role FROM account_members m \
             JOIN accounts a ON a.id = m.account_id WHERE m.user_id = $1 \
             ORDER BY m.added_at, a.id"
        );
        let rows = self
            .retry
            .run("memberships", || async {
                Ok(sql::rows(&self.db, &sql, vec![user.as_str().into()]).await?)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let role: String = row
                    .try_get("", "role")
                    .map_err(|e| StoreError::Unexpected(e.into()))?;
                let account = AccountRow::from_query_result(row, "")
                    .map_err(|e| StoreError::Unexpected(e.into()))?
                    .into_domain()?;
                let role = MemberRole::parse(&role).ok_or_else(|| {
                    corrupt("account_members", account.id.as_str(), "unknown role")
                })?;
                Ok(Membership { account, role })
            })
            .collect()
    }

    async fn member(
        &self,
        account: &AccountId,
        user: &UserId,
    ) -> Result<Option<Member>, StoreError> {
        let sql = format!(
            "SELECT {MEMBER_COLUMNS} FROM {MEMBERS_FROM} \
             WHERE m.account_id = $1 AND m.user_id = $2"
        );
        let row: Option<MemberRow> = self
            .fetch_one(
                "member",
                &sql,
                vec![account.as_str().into(), user.as_str().into()],
            )
            .await?;
        row.map(MemberRow::into_domain).transpose()
    }

    async fn members(&self, account: &AccountId) -> Result<Vec<Member>, StoreError> {
        let sql = format!(
            "SELECT {MEMBER_COLUMNS} FROM {MEMBERS_FROM} \
             WHERE m.account_id = $1 ORDER BY m.added_at, m.user_id"
        );
        let rows: Vec<MemberRow> = self
            .fetch_all("members", &sql, vec![account.as_str().into()])
            .await?;
        rows.into_iter().map(MemberRow::into_domain).collect()
    }

    async fn change_member(
        &self,
        command: &MemberCommand,
        told: MemberEvents,
    ) -> Result<MemberChanged, MemberChangeError> {
        self.retry
            .run("change_member", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = async {
                    // The team's lock before any member's row, as every change takes them.
                    locked_account_kind(&tx, &command.account).await?;
                    let before = locked_member(&tx, &command.account, &command.target).await?;
                    for change in &command.changes {
                        match apply_change(&tx, command, *change).await? {
                            Ok(()) => {}
                            Err(MemberChangeError::Refused(
                                MemberChangeRefusal::SeatsExhausted { seats },
                            )) => {
                                // The addition comes first and wrote nothing: the owners are
                                // told, and that alone is committed.
                                let members = member_count(&tx, &command.account).await?;
                                let who = (&command.account, &command.target, &command.actor);
                                let state = (seats, members);
                                let events = &*self.events;
                                tell_seats_exceeded(&tx, who, state, command.now, events).await?;
                                let refused = MemberChangeRefusal::SeatsExhausted { seats };
                                return Ok(End::Commit(Err(MemberChangeError::Refused(refused))));
                            }
                            Err(refused) => return Ok(End::Rollback(Err(refused))),
                        }
                    }
                    let after = locked_member(&tx, &command.account, &command.target).await?;
                    let changed = MemberChanged { before, after };
                    Outbox::from(told(command, &changed))
                        .write(&tx, &*self.events)
                        .await?;
                    Ok(End::Commit(Ok(changed)))
                }
                .await;
                sql::finish(tx, body).await
            })
            .await?
    }

    async fn step_away(
        &self,
        account: &AccountId,
        user: &UserId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        if !account.is_host_org() {
            return Ok(false);
        }
        self.retry
            .run("step_away", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = async {
                    // The locks a sync takes, in its order: the user's, then the team's.
                    lock_user(&tx, user).await?;
                    locked_account_kind(&tx, account).await?;
                    if locked_member(&tx, account, user).await?.is_none() {
                        return Ok(End::Rollback(false));
                    }
                    move_member(&tx, account, user, true, now).await?;
                    Ok(End::Commit(true))
                }
                .await;
                sql::finish(tx, body).await
            })
            .await
    }

    async fn create_invitation(&self, new: &NewInvitation) -> Result<(), MemberChangeError> {
        self.retry
            .run("create_invitation", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = invitations::create(&tx, new).await;
                sql::finish(tx, body).await
            })
            .await?
    }

    async fn invitation_by_token(
        &self,
        token: &TokenHash,
    ) -> Result<Option<Invitation>, StoreError> {
        let sql = format!(
            "SELECT {} FROM account_invitations WHERE token_hash = $1",
            invitations::INVITATION_COLUMNS
        );
        let row: Option<invitations::InvitationRow> = self
            .fetch_one("invitation_by_token", &sql, vec![token.0.as_str().into()])
            .await?;
        row.map(invitations::InvitationRow::into_domain).transpose()
    }

    async fn open_invitations(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Vec<Invitation>, StoreError> {
        let sql = format!(
            "SELECT {} FROM account_invitations WHERE account_id = $1 AND accepted_at IS NULL \
             AND revoked_at IS NULL AND expires_at > $2 ORDER BY created_at DESC, id DESC",
            invitations::INVITATION_COLUMNS
        );
        let values = vec![account.as_str().into(), now.unix_millis().into()];
        let rows: Vec<invitations::InvitationRow> =
            self.fetch_all("open_invitations", &sql, values).await?;
        rows.into_iter()
            .map(invitations::InvitationRow::into_domain)
            .collect()
    }

    async fn revoke_invitation(
        &self,
        account: &AccountId,
        id: &str,
        actor: &UserId,
        now: Timestamp,
    ) -> Result<(), MemberChangeError> {
        self.retry
            .run("revoke_invitation", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = invitations::revoke(&tx, (account, id), actor, now).await;
                sql::finish(tx, body).await
            })
            .await?
    }

    async fn accept_invitation(
        &self,
        accept: &AcceptInvitation,
        told: MemberEvents,
    ) -> Result<Member, AcceptError> {
        self.retry
            .run("accept_invitation", || async {
                let (_turn, tx) = self.begin_write().await?;
                let body = invitations::accept(&tx, accept, told, &*self.events).await;
                sql::finish(tx, body).await
            })
            .await?
    }

    async fn host_memberships(&self, user: &UserId) -> Result<Vec<HostOrgMembership>, StoreError> {
        let rows: Vec<HostMembershipRow> = self
            .fetch_all(
                "host_memberships",
                HOST_MEMBERSHIPS,
                vec![user.as_str().into()],
            )
            .await?;
        rows.into_iter()
            .map(HostMembershipRow::into_domain)
            .collect()
    }

    async fn sync_host_org(
        &self,
        sync: &HostOrgSync,
        told: MemberEvents,
    ) -> Result<Result<(), MemberChangeRefusal>, StoreError> {
        self.retry
            .run("sync_host_org", || async {
                let (_turn, tx) = self.begin_write().await?;
                let opening = (&*self.events, self.new_account_ceiling());
                let body = sync_host_org(&tx, sync, told, opening).await;
                sql::finish(tx, body).await
            })
            .await
    }
}
