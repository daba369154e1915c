//! Team accounts and their members in memory, decided by the same rules as the SQL store.

use async_trait::async_trait;
use domain::{
    AccountId, AccountKind, Credits, HostOrgMembership, MemberChange, MemberChangeRefusal,
    MemberFacts, MemberRole, Timestamp, UserId, WindowCount, count_spend, decide_member_change,
};

use super::{InMemoryStore, State, lock};
use crate::accounts::TokenHash;
use crate::ports::{
    AcceptError, AcceptInvitation, Account, ApplyError, HostOrgSync, Invitation, Member,
    MemberChangeError, MemberChanged, MemberCommand, MemberEvents, Membership, NewInvitation,
    NewTeam, Refusal, StoreError, TeamStore,
};

fn account_of(s: &State, id: &AccountId) -> Option<Account> {
    if let Some(team) = s.accounts.get(id) {
        return Some(team.clone());
    }
    let user = id.owner()?;
    s.users.get(&user).map(|(u, _)| Account {
        id: id.clone(),
        kind: AccountKind::Personal,
        name: None,
        host_organisation: None,
        created_at: u.created_at,
    })
}

/// Count a spend of `amount` by `member` of `account` against their limit, writing the count:
/// refused when they are not a member or the limit leaves no room (as the SQL store does).
pub(super) fn member_spend(
    s: &mut State,
    account: &AccountId,
    member: &UserId,
    amount: Credits,
    now: Timestamp,
) -> Result<Option<Timestamp>, ApplyError> {
    let key = (account.clone(), member.clone());
    let row = s
        .members
        .get_mut(&key)
        .ok_or(ApplyError::Refused(Refusal::NotAMember))?;
    let count = count_spend(row.limit, row.count, amount, now)
        .map_err(|reached| ApplyError::Refused(Refusal::LimitReached(reached)))?;
    row.count = count;
    Ok(row.limit.map(|_| count.start))
}

/// Give `amount` of headroom back to `member`'s window that started at `counted_in`.
pub(super) fn member_give_back(
    s: &mut State,
    account: &AccountId,
    member: &UserId,
    counted_in: Timestamp,
    amount: Credits,
    now: Timestamp,
) {
    if let Some(row) = s.members.get_mut(&(account.clone(), member.clone())) {
        row.count = domain::give_back(row.limit, row.count, Some(counted_in), amount, now);
    }
}

/// The window a hold taken at `at` counted in, under `member`'s limit.
pub(super) fn window_of(
    s: &State,
    account: &AccountId,
    member: &UserId,
    at: Timestamp,
) -> Option<Timestamp> {
    let row = s.members.get(&(account.clone(), member.clone()))?;
    row.limit.map(|l| l.window.start_of(at))
}

fn apply(
    s: &mut State,
    command: &MemberCommand,
    change: MemberChange,
) -> Result<(), MemberChangeError> {
    let facts = facts_of(s, command).ok_or(MemberChangeError::AccountNotFound)?;
    decide_member_change(facts, change).map_err(MemberChangeError::Refused)?;
    write(s, command, change)
}

/// The facts `command` is decided on, read from `s`; `None` for no such account.
fn facts_of(s: &State, command: &MemberCommand) -> Option<MemberFacts> {
    let account = &command.account;
    let kind = account_of(s, account)?.kind;
    let role = |user: &UserId| {
        s.members
            .get(&(account.clone(), user.clone()))
            .map(|m| m.role)
    };
    let facts = MemberFacts {
        kind,
        actor: role(&command.actor),
        to_self: command.actor == command.target,
        target: role(&command.target),
        owners: u32::try_from(
            s.members
                .iter()
                .filter(|((a, _), m)| a == account && m.role == MemberRole::Owner)
                .count(),
        )
        .unwrap_or(u32::MAX),
        members: u64::try_from(s.members.keys().filter(|(a, _)| a == account).count())
            .unwrap_or(u64::MAX),
        seats: command.seats,
        host_managed: account.is_host_org(),
    };
    Some(facts)
}

/// Write a member change the rules allowed.
fn write(
    s: &mut State,
    command: &MemberCommand,
    change: MemberChange,
) -> Result<(), MemberChangeError> {
    let account = &command.account;
    let key = (account.clone(), command.target.clone());
    match change {
        MemberChange::Add(role) => {
            let email = s
                .users
                .get(&command.target)
                .map(|(u, _)| u.email.as_str().to_owned())
                .ok_or(MemberChangeError::UserNotFound)?;
            s.members.insert(
                key,
                Member {
                    account_id: account.clone(),
                    user_id: command.target.clone(),
                    email: Some(email),
                    role,
                    limit: None,
                    count: WindowCount::NONE,
                    added_at: command.now,
                },
            );
        }
        MemberChange::SetRole(role) => {
            if let Some(m) = s.members.get_mut(&key) {
                m.role = role;
            }
        }
        MemberChange::SetLimit(limit) => {
            let start = limit.map(|l| l.window.start_of(command.now));
            let spent = start.map_or(0, |start| spent_since(s, account, &command.target, start));
            if let Some(m) = s.members.get_mut(&key) {
                m.limit = limit;
                m.count = WindowCount {
                    start: start.unwrap_or(Timestamp::from_unix_millis(0)),
                    spent: Credits::from_hundredths(spent.max(0)).unwrap_or(Credits::ZERO),
                };
            }
        }
        MemberChange::Remove => {
            s.members.remove(&key);
        }
    }
    Ok(())
}

/// What `member` spent from `account` since `start`, net of what came back (as the SQL store
/// counts a limit set in the middle of a window).
fn spent_since(s: &State, account: &AccountId, member: &UserId, start: Timestamp) -> i64 {
    -s.ledger
        .transactions
        .iter()
        .filter(|t| {
            &t.account_id == account
                && t.member_id.as_ref() == Some(member)
                && t.created_at >= start
        })
        .map(|t| t.amount.hundredths())
        .sum::<i64>()
}

#[async_trait]
impl TeamStore for InMemoryStore {
    async fn create_team(&self, team: &NewTeam) -> Result<Account, StoreError> {
        let mut s = lock(&self.0);
        if s.accounts.contains_key(&team.id) {
            return Err(StoreError::Conflict(format!("account {} exists", team.id)));
        }
        let account = Account {
            id: team.id.clone(),
            kind: AccountKind::Team,
            name: Some(team.name.clone()),
            host_organisation: None,
            created_at: team.now,
        };
        s.accounts.insert(team.id.clone(), account.clone());
        let email = s
            .users
            .get(&team.owner)
            .map(|(u, _)| u.email.as_str().to_owned());
        s.members.insert(
            (team.id.clone(), team.owner.clone()),
            Member {
                account_id: team.id.clone(),
                user_id: team.owner.clone(),
                email,
                role: MemberRole::Owner,
                limit: None,
                count: WindowCount::NONE,
                added_at: team.now,
            },
        );
        Ok(account)
    }

    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError> {
        Ok(account_of(&lock(&self.0), id))
    }

    async fn memberships(&self, user: &UserId) -> Result<Vec<Membership>, StoreError> {
        let s = lock(&self.0);
        let mut out: Vec<(Timestamp, Membership)> = s
            .members
            .values()
            .filter(|m| &m.user_id == user)
            .filter_map(|m| {
                let account = s.accounts.get(&m.account_id)?.clone();
                Some((
                    m.added_at,
                    Membership {
                        account,
                        role: m.role,
                    },
                ))
            })
            .collect();
        out.sort_by(|a, b| (a.0, &a.1.account.id).cmp(&(b.0, &b.1.account.id)));
        Ok(out.into_iter().map(|(_, m)| m).collect())
    }

    async fn member(
        &self,
        account: &AccountId,
        user: &UserId,
    ) -> Result<Option<Member>, StoreError> {
        Ok(lock(&self.0)
            .members
            .get(&(account.clone(), user.clone()))
            .cloned())
    }

    async fn members(&self, account: &AccountId) -> Result<Vec<Member>, StoreError> {
        let s = lock(&self.0);
        let mut out: Vec<Member> = s
            .members
            .values()
            .filter(|m| &m.account_id == account)
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.added_at, &a.user_id).cmp(&(b.added_at, &b.user_id)));
        Ok(out)
    }

    async fn change_member(
        &self,
        command: &MemberCommand,
        _told: MemberEvents,
    ) -> Result<MemberChanged, MemberChangeError> {
        self.atomically(|s| {
            let key = (command.account.clone(), command.target.clone());
            let before = s.members.get(&key).cloned();
            for change in &command.changes {
                apply(s, command, *change)?;
            }
            Ok(MemberChanged {
                before,
                after: s.members.get(&key).cloned(),
            })
        })
    }

    async fn host_memberships(&self, user: &UserId) -> Result<Vec<HostOrgMembership>, StoreError> {
        Ok(host_memberships(&lock(&self.0), user))
    }

    async fn sync_host_org(
        &self,
        sync: &HostOrgSync,
        _told: MemberEvents,
    ) -> Result<Result<(), MemberChangeRefusal>, StoreError> {
        let mut s = lock(&self.0);
        if let (Some(claim), Some((org, name))) = (&sync.claim, &sync.organisation) {
            s.accounts
                .entry(claim.account.clone())
                .or_insert_with(|| Account {
                    id: claim.account.clone(),
                    kind: AccountKind::Team,
                    name: Some(name.clone()),
                    host_organisation: Some(org.clone()),
                    created_at: sync.now,
                });
        }
        let steps = domain::plan_host_org(&host_memberships(&s, &sync.user), sync.claim.as_ref());
        for account in &steps.step_away {
            let key = (account.clone(), sync.user.clone());
            if let Some(row) = s.members.remove(&key) {
                s.away.insert(key, row);
            }
        }
        let Some(claim) = &sync.claim else {
            return Ok(Ok(()));
        };
        let key = (claim.account.clone(), sync.user.clone());
        if steps.takes_a_seat() {
            let members = s
                .members
                .keys()
                .filter(|(a, _)| a == &claim.account)
                .count();
            let members = u64::try_from(members).unwrap_or(u64::MAX);
            if let Err(refusal) = domain::seat_free(members, sync.seats) {
                return Ok(Err(refusal));
            }
        }
        if let Some(role) = steps.join {
            let email = s
                .users
                .get(&sync.user)
                .map(|(u, _)| u.email.as_str().to_owned());
            let row = Member {
                account_id: claim.account.clone(),
                user_id: sync.user.clone(),
                email,
                role,
                limit: None,
                count: WindowCount::NONE,
                added_at: sync.now,
            };
            s.members.insert(key.clone(), row);
        }
        if steps.come_back
            && let Some(row) = s.away.remove(&key)
        {
            s.members.insert(key.clone(), row);
        }
        if let (Some(role), Some(row)) = (steps.set_role, s.members.get_mut(&key)) {
            row.role = role;
        }
        Ok(Ok(()))
    }

    async fn step_away(
        &self,
        account: &AccountId,
        user: &UserId,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut s = lock(&self.0);
        let key = (account.clone(), user.clone());
        match s.members.remove(&key) {
            Some(row) if account.is_host_org() => {
                s.away.insert(key, row);
                Ok(true)
            }
            Some(row) => {
                s.members.insert(key, row);
                Ok(false)
            }
            None => Ok(false),
        }
    }

    async fn create_invitation(&self, new: &NewInvitation) -> Result<(), MemberChangeError> {
        let invitation = &new.invitation;
        let command = MemberCommand {
            account: invitation.account_id.clone(),
            actor: invitation.invited_by.clone(),
            target: invitation.invited_by.clone(),
            changes: Vec::new(),
            seats: new.seats,
            now: invitation.created_at,
        };
        let mut s = lock(&self.0);
        let facts = {
            let mut facts = facts_of(&s, &command).ok_or(MemberChangeError::AccountNotFound)?;
            facts.to_self = false;
            facts.target = None;
            facts
        };
        decide_member_change(facts, MemberChange::Add(invitation.role))
            .map_err(MemberChangeError::Refused)?;
        s.invitations.insert(
            invitation.id.clone(),
            (invitation.clone(), new.token.clone(), false, false),
        );
        Ok(())
    }

    async fn invitation_by_token(
        &self,
        token: &TokenHash,
    ) -> Result<Option<Invitation>, StoreError> {
        Ok(lock(&self.0)
            .invitations
            .values()
            .find(|(_, t, _, _)| t == token)
            .map(|(inv, _, _, _)| inv.clone()))
    }

    async fn open_invitations(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Vec<Invitation>, StoreError> {
        let mut open: Vec<Invitation> = lock(&self.0)
            .invitations
            .values()
            .filter(|(inv, _, used, revoked)| {
                &inv.account_id == account && !used && !revoked && inv.expires_at > now
            })
            .map(|(inv, _, _, _)| inv.clone())
            .collect();
        open.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        Ok(open)
    }

    async fn revoke_invitation(
        &self,
        account: &AccountId,
        id: &str,
        actor: &UserId,
        now: Timestamp,
    ) -> Result<(), MemberChangeError> {
        let mut s = lock(&self.0);
        let role = s
            .members
            .get(&(account.clone(), actor.clone()))
            .map(|m| m.role);
        if !role.is_some_and(MemberRole::manages_members) {
            return Err(MemberChangeError::Refused(MemberChangeRefusal::NotAllowed));
        }
        match s.invitations.get_mut(id) {
            Some((inv, _, false, revoked @ false))
                if &inv.account_id == account && inv.expires_at > now =>
            {
                *revoked = true;
                Ok(())
            }
            _ => Err(MemberChangeError::AccountNotFound),
        }
    }

    async fn accept_invitation(
        &self,
        accepting: &AcceptInvitation,
        _told: MemberEvents,
    ) -> Result<Member, AcceptError> {
        accept(&mut lock(&self.0), accepting)
    }
}

/// Accept `accept` in `s` as the SQL store does (see [`TeamStore::accept_invitation`]).
fn accept(s: &mut State, accept: &AcceptInvitation) -> Result<Member, AcceptError> {
    let (id, invitation, accepted, revoked) = s
        .invitations
        .iter()
        .find(|(_, (_, token, _, _))| token == &accept.token)
        .map(|(id, (inv, _, used, revoked))| (id.clone(), inv.clone(), *used, *revoked))
        .ok_or(AcceptError::NotFound)?;
    let facts = domain::InvitationFacts {
        expires_at: invitation.expires_at,
        accepted,
        revoked,
        same_email: accept.email.as_deref() == Some(invitation.email.as_str()),
    };
    domain::decide_acceptance(facts, accept.now).map_err(AcceptError::Refused)?;
    // An inviter who may no longer grant the role leaves nothing to accept (as the SQL store).
    let by_inviter = MemberCommand {
        account: invitation.account_id.clone(),
        actor: invitation.invited_by.clone(),
        target: invitation.invited_by.clone(),
        changes: Vec::new(),
        seats: None,
        now: accept.now,
    };
    let may_grant = facts_of(s, &by_inviter).is_some_and(|facts| {
        let facts = MemberFacts {
            to_self: false,
            target: None,
            ..facts
        };
        decide_member_change(facts, MemberChange::Add(invitation.role)).is_ok()
    });
    if !may_grant {
        return Err(AcceptError::Refused(domain::InvitationRefusal::Revoked));
    }
    let account = invitation.account_id.clone();
    let key = (account.clone(), accept.user.clone());
    if s.members.contains_key(&key) {
        return Err(AcceptError::Join(MemberChangeRefusal::AlreadyMember));
    }
    let members = s.members.keys().filter(|(a, _)| a == &account).count();
    domain::seat_free(u64::try_from(members).unwrap_or(u64::MAX), accept.seats)
        .map_err(AcceptError::Join)?;
    let email = s
        .users
        .get(&accept.user)
        .map(|(u, _)| u.email.as_str().to_owned());
    let member = Member {
        account_id: account,
        user_id: accept.user.clone(),
        email,
        role: invitation.role,
        limit: invitation.limit,
        count: WindowCount {
            start: invitation
                .limit
                .map_or(Timestamp::from_unix_millis(0), |l| {
                    l.window.start_of(accept.now)
                }),
            spent: Credits::ZERO,
        },
        added_at: accept.now,
    };
    s.members.insert(key, member.clone());
    if let Some(entry) = s.invitations.get_mut(&id) {
        entry.2 = true;
    }
    Ok(member)
}

/// `user`'s rows in host organisations' teams, present and away.
fn host_memberships(s: &State, user: &UserId) -> Vec<HostOrgMembership> {
    let rows = |map: &std::collections::BTreeMap<(AccountId, UserId), Member>, away: bool| {
        map.values()
            .filter(|m| &m.user_id == user && m.account_id.is_host_org())
            .map(|m| HostOrgMembership {
                account: m.account_id.clone(),
                role: m.role,
                away,
            })
            .collect::<Vec<_>>()
    };
    let mut held = rows(&s.members, false);
    held.extend(rows(&s.away, true));
    held
}
