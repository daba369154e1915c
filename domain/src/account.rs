//! Accounts: who owns credits, who may spend them, and how much a member may spend per window.
//!
//! Every user has a personal account whose id is the user's id; a team account has members with
//! a role. A spend charges exactly one account and names the acting member. A member of a team
//! may carry a limit: at most so many credits per calendar window (UTC day, ISO week starting
//! Monday, calendar month). The counter of a member's window lives with the member and moves in
//! the spend's own transaction; the rules here decide every move, so the per-request path, the
//! tests and the property tests share one definition.
//!
//! What counts against a window: a consumption when it is posted; a hold when it is taken (at
//! its held amount); when a hold is settled, the part returned gives headroom back to the window
//! it counted in (if that window is still the current one) and an overrun past the hold is a new
//! spend in the current window, allowed only within what is left of it. A release gives the whole
//! hold back to its window on the same terms.

use crate::credits::Credits;
use crate::entitlements::{EntitlementKey, EntitlementValue, Entitlements};
use crate::ids::{AccountId, UserId};
use crate::time::Timestamp;

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

impl AccountId {
    /// How every team account's id starts. No user id starts so (users are `usr_…` or host
    /// users' prefix; the accounts step refuses a database where one does), so an account id
    /// tells by itself whether it is a team's or a user's personal one.
    pub const TEAM_PREFIX: &'static str = "team_";

    /// Whether this is a team's account.
    #[must_use]
    pub fn is_team(&self) -> bool {
        self.as_str().starts_with(Self::TEAM_PREFIX)
    }

    /// The user whose personal account this is (`None` for a team's).
    #[must_use]
    pub fn owner(&self) -> Option<UserId> {
        if self.is_team() {
            None
        } else {
            UserId::new(self.as_str()).ok()
        }
    }

    /// The user a ledger entry or hold of this account is about: the member of a team who acted,
    /// else the user whose personal account this is (`None` for a team's entry no member made).
    #[must_use]
    pub fn acting_user(&self, member: Option<&UserId>) -> Option<UserId> {
        member.cloned().or_else(|| self.owner())
    }

    /// The personal account of `user`: the same id.
    #[must_use]
    pub fn personal(user: &UserId) -> Self {
        Self::new(user.as_str()).expect("a user id is a valid account id")
    }

    /// Whether this is `user`'s personal account.
    #[must_use]
    pub fn is_personal_of(&self, user: &UserId) -> bool {
        self.as_str() == user.as_str()
    }
}

/// What kind of account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountKind {
    /// One user's own.
    Personal,
    /// Shared by members.
    Team,
}

impl AccountKind {
    /// The stored and wire code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Personal => "personal",
            Self::Team => "team",
        }
    }

    /// The kind a code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        match code {
            "personal" => Some(Self::Personal),
            "team" => Some(Self::Team),
            _ => None,
        }
    }
}

/// A member's role in a team.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberRole {
    /// Spends.
    Member,
    /// Spends, and manages members and their limits (not owners).
    Admin,
    /// Everything an admin does, for every member, owners included.
    Owner,
}

impl MemberRole {
    /// Every role.
    pub const ALL: [MemberRole; 3] = [Self::Owner, Self::Admin, Self::Member];

    /// The stored and wire code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Admin => "admin",
            Self::Member => "member",
        }
    }

    /// The role a code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }

    /// Whether this role manages members: adds, removes, changes roles and limits.
    #[must_use]
    pub const fn manages_members(self) -> bool {
        matches!(self, Self::Owner | Self::Admin)
    }

    /// Whether this role manages the team's billing: buys plans and packs for it, cancels and
    /// changes its subscriptions, opens its billing portal. A member only spends.
    #[must_use]
    pub const fn manages_billing(self) -> bool {
        matches!(self, Self::Owner | Self::Admin)
    }
}

/// The calendar window a member's limit counts in (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitWindow {
    /// From 00:00 UTC to the next.
    Day,
    /// From Monday 00:00 UTC (ISO week) to the next.
    Week,
    /// From the first of the month 00:00 UTC to the next.
    Month,
}

impl LimitWindow {
    /// Every window.
    pub const ALL: [LimitWindow; 3] = [Self::Day, Self::Week, Self::Month];

    /// The stored and wire code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
        }
    }

    /// The window a code names.
    #[must_use]
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.code() == code)
    }

    /// The start of the window that contains `at`.
    #[must_use]
    pub fn start_of(self, at: Timestamp) -> Timestamp {
        let day = at.unix_millis().div_euclid(DAY_MS);
        let start_day = match self {
            Self::Day => day,
            // 1970-01-01 was a Thursday: Monday is three days before a multiple of seven.
            Self::Week => day - (day + 3).rem_euclid(7),
            Self::Month => day - i64::from(crate::time::day_of_month(at)) + 1,
        };
        Timestamp::from_unix_millis(start_day.saturating_mul(DAY_MS))
    }

    /// The end of the window that starts at `start` (the next one's start).
    #[must_use]
    pub fn end_of(self, start: Timestamp) -> Timestamp {
        match self {
            Self::Day => start.plus_days(1),
            Self::Week => start.plus_days(7),
            Self::Month => start.plus_calendar_months(1),
        }
    }
}

/// A member's limit: at most `credits` per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberLimit {
    /// The most a member spends in one window (never zero).
    pub credits: Credits,
    /// The window.
    pub window: LimitWindow,
}

/// What a member has spent in the window that starts at `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowCount {
    /// The start of the window the count is for.
    pub start: Timestamp,
    /// What counts against the limit in it.
    pub spent: Credits,
}

impl WindowCount {
    /// Nothing counted yet.
    pub const NONE: WindowCount = WindowCount {
        start: Timestamp::from_unix_millis(0),
        spent: Credits::ZERO,
    };

    /// The count as it stands at `now` under `window`: a count of an earlier window is zero.
    #[must_use]
    pub fn at(self, window: LimitWindow, now: Timestamp) -> WindowCount {
        let start = window.start_of(now);
        if start == self.start {
            self
        } else {
            WindowCount {
                start,
                spent: Credits::ZERO,
            }
        }
    }
}

/// Whose limit refused a spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitOwner {
    /// The acting member's own limit in a team.
    Member,
    /// A limit on the account, maybe narrowed to a feature, a model, a key or a member.
    Account {
        /// The limit's id.
        id: crate::SpendLimitId,
        /// What it counts (boxed: a refusal travels in `Result`s).
        scope: Box<crate::LimitScope>,
    },
}

/// A spend refused by a limit: which, what is left in its window and when headroom comes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitReached {
    /// Whose limit.
    pub owner: LimitOwner,
    /// The most spent per window.
    pub credits: Credits,
    /// The window.
    pub window: crate::SpendWindow,
    /// What is left in the current window.
    pub left: Credits,
    /// When the window ends and the count starts again (for a rolling window, when its oldest
    /// counted hour leaves it).
    pub resets_at: Timestamp,
}

impl From<LimitWindow> for crate::SpendWindow {
    fn from(window: LimitWindow) -> Self {
        match window {
            LimitWindow::Day => Self::Day,
            LimitWindow::Week => Self::Week,
            LimitWindow::Month => Self::Month,
        }
    }
}

/// Count a spend of `amount` at `now` against `limit`, given the member's stored `count`: the
/// count to store, or the refusal. Without a limit the count is left as it is.
///
/// # Errors
/// [`LimitReached`] when the window's count plus `amount` would pass the limit.
pub fn count_spend(
    limit: Option<MemberLimit>,
    count: WindowCount,
    amount: Credits,
    now: Timestamp,
) -> Result<WindowCount, LimitReached> {
    let Some(limit) = limit else {
        return Ok(count);
    };
    let current = count.at(limit.window, now);
    let left = limit
        .credits
        .checked_sub(current.spent)
        .unwrap_or(Credits::ZERO);
    match current.spent.checked_add(amount) {
        Ok(spent) if spent <= limit.credits => Ok(WindowCount {
            start: current.start,
            spent,
        }),
        _ => Err(LimitReached {
            owner: LimitOwner::Member,
            credits: limit.credits,
            window: limit.window.into(),
            left,
            resets_at: limit.window.end_of(current.start),
        }),
    }
}

/// What `limit` leaves for a spend at `now`: `None` without a limit.
#[must_use]
pub fn headroom(limit: Option<MemberLimit>, count: WindowCount, now: Timestamp) -> Option<Credits> {
    let limit = limit?;
    let current = count.at(limit.window, now);
    Some(
        limit
            .credits
            .checked_sub(current.spent)
            .unwrap_or(Credits::ZERO),
    )
}

/// Give `amount` of headroom back after a hold counted in the window starting `counted_in` is
/// released or settled for less: only while that window is still the current one (a past
/// window's count no longer matters, and the current one never counted the hold).
#[must_use]
pub fn give_back(
    limit: Option<MemberLimit>,
    count: WindowCount,
    counted_in: Option<Timestamp>,
    amount: Credits,
    now: Timestamp,
) -> WindowCount {
    let (Some(limit), Some(counted_in)) = (limit, counted_in) else {
        return count;
    };
    let current = count.at(limit.window, now);
    if current.start != counted_in || count.start != counted_in {
        return current;
    }
    WindowCount {
        start: current.start,
        spent: current.spent.checked_sub(amount).unwrap_or(Credits::ZERO),
    }
}

/// How a member's hold settles: the most the settle may take past the hold, given the
/// account's `available` balance, the member's limit and whether they are still a member (a
/// removed member's hold settles only within what it held).
#[must_use]
pub fn settle_ceiling(
    available: Credits,
    limit: Option<MemberLimit>,
    count: WindowCount,
    still_member: bool,
    now: Timestamp,
) -> Credits {
    if !still_member {
        return Credits::ZERO;
    }
    match headroom(limit, count, now) {
        Some(room) => available.min(room),
        None => available,
    }
}

/// A change to a team's members that the rules refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChangeRefusal {
    /// The acting user may not make this change.
    NotAllowed,
    /// The change would leave the team without an owner.
    LastOwner,
    /// The user is already a member.
    AlreadyMember,
    /// The user is not a member.
    NotAMember,
    /// Personal accounts have no other members.
    PersonalAccount,
    /// The host application decides who belongs to the team and with which role (it mirrors
    /// a host organisation): only limits are set here.
    HostManaged,
    /// The team has as many members as its seats, or more (after a downgrade): nobody is added.
    SeatsExhausted {
        /// The seats the team holds.
        seats: u64,
    },
}

/// A change to a team's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    /// Add a user with a role.
    Add(MemberRole),
    /// Change a member's role.
    SetRole(MemberRole),
    /// Set or clear a member's limit.
    SetLimit(Option<MemberLimit>),
    /// Remove a member (themselves: leaving).
    Remove,
}

/// The facts a member change is decided on, read in the change's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberFacts {
    /// The account's kind.
    pub kind: AccountKind,
    /// The acting user's role, if they are a member.
    pub actor: Option<MemberRole>,
    /// Whether the acting user is the target.
    pub to_self: bool,
    /// The target's role, if they are a member.
    pub target: Option<MemberRole>,
    /// How many owners the team has.
    pub owners: u32,
    /// How many members the team has.
    pub members: u64,
    /// The seats the team holds (its `seats` entitlement, [`seat_cap`]); `None`: no cap.
    pub seats: Option<u64>,
    /// Whether the team mirrors a host organisation ([`AccountId::is_host_org`]): the host's
    /// tokens decide who is a member and with which role.
    pub host_managed: bool,
}

/// The entitlement key whose limit caps a team's members.
pub const SEATS_KEY: &str = "seats";

/// The members a team holding `entitlements` may have: the limit of its `seats` entitlement;
/// `None` (no cap) when it holds none, or holds it as a plain `true`.
#[must_use]
pub fn seat_cap(entitlements: &Entitlements) -> Option<u64> {
    let key = EntitlementKey::new(SEATS_KEY).ok()?;
    match entitlements.get(&key)? {
        EntitlementValue::Limit(seats) => Some(seats),
        EntitlementValue::Enabled => None,
    }
}

/// The seats a change of a team's entitlements from `previous` to `now` left it with, when that
/// change lowered them below its `members` (a downgrade, a refund, a plan ending): nobody is
/// removed, nobody more may join, and the owners are told. `None` when the seats did not go
/// down, or still fit the members.
#[must_use]
pub fn seats_reduced_below(
    previous: &Entitlements,
    now: &Entitlements,
    members: u64,
) -> Option<u64> {
    let seats = seat_cap(now)?;
    let lowered = seat_cap(previous).is_none_or(|before| seats < before);
    (lowered && members > seats).then_some(seats)
}

/// Decide a member change: who may do what. Owners manage everyone; admins manage admins and
/// members and grant at most admin; every member may leave (remove themselves); only an owner
/// sets their own limit; the last owner can neither leave, be removed nor stop being an owner;
/// nobody is added once the members fill the team's seats (a team over its seats after a
/// downgrade keeps everyone); in a team mirroring a host organisation only limits change here.
///
/// # Errors
/// The refusal.
pub fn decide_member_change(
    facts: MemberFacts,
    change: MemberChange,
) -> Result<(), MemberChangeRefusal> {
    if facts.kind == AccountKind::Personal {
        return Err(MemberChangeRefusal::PersonalAccount);
    }
    let actor = facts.actor.ok_or(MemberChangeRefusal::NotAllowed)?;
    if facts.host_managed && !matches!(change, MemberChange::SetLimit(_)) {
        return Err(MemberChangeRefusal::HostManaged);
    }
    let last_owner = facts.target == Some(MemberRole::Owner) && facts.owners <= 1;
    if let MemberChange::Add(role) = change {
        may_grant(actor, role)?;
        if facts.target.is_some() {
            return Err(MemberChangeRefusal::AlreadyMember);
        }
        return seat_free(facts.members, facts.seats);
    }
    let target = facts.target.ok_or(MemberChangeRefusal::NotAMember)?;
    match change {
        MemberChange::Add(_) => unreachable!("handled above"),
        MemberChange::Remove => {
            if !facts.to_self {
                may_manage(actor, target)?;
            }
            if last_owner {
                return Err(MemberChangeRefusal::LastOwner);
            }
            Ok(())
        }
        MemberChange::SetRole(role) => {
            may_manage(actor, target)?;
            may_grant(actor, role)?;
            if last_owner && role != MemberRole::Owner {
                return Err(MemberChangeRefusal::LastOwner);
            }
            Ok(())
        }
        MemberChange::SetLimit(_) => {
            if facts.to_self && actor != MemberRole::Owner {
                return Err(MemberChangeRefusal::NotAllowed);
            }
            may_manage(actor, target)
        }
    }
}

/// Whether `actor` manages a member whose role is `target`.
fn may_manage(actor: MemberRole, target: MemberRole) -> Result<(), MemberChangeRefusal> {
    let allowed = match actor {
        MemberRole::Owner => true,
        MemberRole::Admin => target != MemberRole::Owner,
        MemberRole::Member => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(MemberChangeRefusal::NotAllowed)
    }
}

/// Whether `actor` gives someone `role`.
fn may_grant(actor: MemberRole, role: MemberRole) -> Result<(), MemberChangeRefusal> {
    let allowed = match actor {
        MemberRole::Owner => true,
        MemberRole::Admin => role != MemberRole::Owner,
        MemberRole::Member => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(MemberChangeRefusal::NotAllowed)
    }
}

mod host_org;
mod invitation;

pub use host_org::{
    HOST_ORG_TEAM_PREFIX, HostOrgClaim, HostOrgMembership, HostOrgSteps, plan_host_org, seat_free,
};
pub use invitation::{
    INVITATION_LIFETIME_MS, InvitationFacts, InvitationRefusal, decide_acceptance,
};

#[cfg(test)]
mod tests;
