//! Invitations to a team: stored decided as an addition by the inviter, accepted once under
//! the invitation's row lock (then the team's), revoked by an owner or admin.

use application::accounts::TokenHash;
use application::ports::{
    AcceptError, AcceptInvitation, Invitation, Member, MemberChangeError, MemberChanged,
    MemberCommand, MemberEvents, NewInvitation,
};
use domain::{
    AccountId, Credits, InvitationFacts, LimitWindow, MemberChange, MemberChangeRefusal,
    MemberLimit, MemberRole, Timestamp, UserId,
};
use sea_orm::{DatabaseTransaction, FromQueryResult};

use super::{locked_account_kind, locked_member, member_count, tell_seats_exceeded, write_change};
use crate::outbox::Outbox;
use crate::retry::Fail;
use crate::rows::corrupt;
use crate::sql::{self, End};

pub(super) const INVITATION_COLUMNS: &str = "id, account_id, email, role, limit_hundredths, \
    limit_window, invited_by, created_at, expires_at, accepted_at, revoked_at";

#[derive(Debug, FromQueryResult)]
pub(super) struct InvitationRow {
    id: String,
    account_id: String,
    email: String,
    role: String,
    limit_hundredths: Option<i64>,
    limit_window: Option<String>,
    invited_by: String,
    created_at: i64,
    expires_at: i64,
    accepted_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl InvitationRow {
    pub(super) fn into_domain(self) -> Result<Invitation, application::ports::StoreError> {
        let bad = |what: String| corrupt("account_invitations", &self.id, what);
        let limit = match (self.limit_hundredths, self.limit_window.as_deref()) {
            (Some(h), Some(window)) => Some(MemberLimit {
                credits: Credits::from_hundredths(h).map_err(|e| bad(e.to_string()))?,
                window: LimitWindow::parse(window)
                    .ok_or_else(|| bad(format!("unknown window {window:?}")))?,
            }),
            (None, None) => None,
            _ => return Err(bad("a limit without its window".into())),
        };
        Ok(Invitation {
            account_id: AccountId::new(self.account_id.clone()).map_err(|e| bad(e.to_string()))?,
            email: self.email.clone(),
            role: MemberRole::parse(&self.role)
                .ok_or_else(|| bad(format!("unknown role {:?}", self.role)))?,
            limit,
            invited_by: UserId::new(self.invited_by.clone()).map_err(|e| bad(e.to_string()))?,
            created_at: Timestamp::from_unix_millis(self.created_at),
            expires_at: Timestamp::from_unix_millis(self.expires_at),
            id: self.id,
        })
    }
}

/// Store `new` in `tx`, decided as an addition of its role by its inviter.
pub(super) async fn create(
    tx: &DatabaseTransaction,
    new: &NewInvitation,
) -> Result<End<Result<(), MemberChangeError>>, Fail> {
    let invitation = &new.invitation;
    let account = &invitation.account_id;
    let Some(kind) = locked_account_kind(tx, account).await? else {
        return Ok(End::Rollback(Err(MemberChangeError::AccountNotFound)));
    };
    let actor = locked_member(tx, account, &invitation.invited_by).await?;
    let facts = domain::MemberFacts {
        kind,
        actor: actor.map(|m| m.role),
        to_self: false,
        target: None,
        owners: super::owners(tx, account).await?,
        members: member_count(tx, account).await?,
        seats: new.seats,
        host_managed: account.is_host_org(),
    };
    if let Err(refusal) = domain::decide_member_change(facts, MemberChange::Add(invitation.role)) {
        return Ok(End::Rollback(Err(MemberChangeError::Refused(refusal))));
    }
    let sql = "INSERT INTO account_invitations (id, account_id, email, role, limit_hundredths, \
               limit_window, token_hash, invited_by, created_at, expires_at) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
    let values = vec![
        invitation.id.as_str().into(),
        account.as_str().into(),
        invitation.email.as_str().into(),
        invitation.role.code().into(),
        invitation.limit.map(|l| l.credits.hundredths()).into(),
        invitation.limit.map(|l| l.window.code()).into(),
        new.token.0.as_str().into(),
        invitation.invited_by.as_str().into(),
        invitation.created_at.unix_millis().into(),
        invitation.expires_at.unix_millis().into(),
    ];
    sql::execute(tx, sql, values).await?;
    Ok(End::Commit(Ok(())))
}

/// The invitation whose token's digest is `token`, locked until the end of `tx` when `locked`.
async fn by_token(
    tx: &DatabaseTransaction,
    token: &TokenHash,
    locked: bool,
) -> Result<Option<InvitationRow>, Fail> {
    let lock = if locked { sql::for_update(tx) } else { "" };
    let sql =
        format!("SELECT {INVITATION_COLUMNS} FROM account_invitations WHERE token_hash = $1{lock}");
    Ok(sql::one(tx, &sql, vec![token.0.as_str().into()]).await?)
}

/// Whether `invitation`'s inviter may still grant its role (a member whose role allows it, in a
/// team that is not a host organisation's), decided on what `tx` reads under the team's lock.
async fn inviter_may_grant(
    tx: &DatabaseTransaction,
    invitation: &Invitation,
    kind: domain::AccountKind,
) -> Result<bool, Fail> {
    let account = &invitation.account_id;
    let inviter = locked_member(tx, account, &invitation.invited_by).await?;
    let facts = domain::MemberFacts {
        kind,
        actor: inviter.map(|m| m.role),
        to_self: false,
        target: None,
        owners: super::owners(tx, account).await?,
        members: 0,
        seats: None,
        host_managed: account.is_host_org(),
    };
    Ok(domain::decide_member_change(facts, MemberChange::Add(invitation.role)).is_ok())
}

/// Accept in `tx` (see `TeamStore::accept_invitation`). The team's lock comes first, as for
/// every change of its members, then the invitation's row (which makes it single-use).
pub(super) async fn accept(
    tx: &DatabaseTransaction,
    accept: &AcceptInvitation,
    told: MemberEvents,
    events: &crate::Enc,
) -> Result<End<Result<Member, AcceptError>>, Fail> {
    let Some(seen) = by_token(tx, &accept.token, false).await? else {
        return Ok(End::Rollback(Err(AcceptError::NotFound)));
    };
    let account = seen.into_domain()?.account_id;
    let kind = locked_account_kind(tx, &account).await?;
    let Some(row) = by_token(tx, &accept.token, true).await? else {
        return Ok(End::Rollback(Err(AcceptError::NotFound)));
    };
    let facts = InvitationFacts {
        expires_at: Timestamp::from_unix_millis(row.expires_at),
        accepted: row.accepted_at.is_some(),
        revoked: row.revoked_at.is_some(),
        same_email: accept.email.as_deref() == Some(row.email.as_str()),
    };
    let id = row.id.clone();
    let invitation = row.into_domain()?;
    let decided = domain::decide_acceptance(facts, accept.now).map_err(AcceptError::Refused);
    // An inviter who may no longer grant the role (removed, demoted) leaves nothing to accept.
    let inviter_may = match kind {
        Some(kind) => inviter_may_grant(tx, &invitation, kind).await?,
        None => false,
    };
    let refused = match (decided, inviter_may) {
        (Err(refused), _) => Some(refused),
        (Ok(()), false) => Some(AcceptError::Refused(domain::InvitationRefusal::Revoked)),
        (Ok(()), true) => None,
    };
    if let Some(refused) = refused {
        return Ok(End::Rollback(Err(refused)));
    }
    join(tx, (&id, &invitation), accept, (told, events)).await
}

/// The user joins as `invitation` says, unless a member already or no seat is free; the join
/// is told.
async fn join(
    tx: &DatabaseTransaction,
    (id, invitation): (&str, &Invitation),
    accept: &AcceptInvitation,
    (told, events): (MemberEvents, &crate::Enc),
) -> Result<End<Result<Member, AcceptError>>, Fail> {
    let account = &invitation.account_id;
    if locked_member(tx, account, &accept.user).await?.is_some() {
        let refusal = MemberChangeRefusal::AlreadyMember;
        return Ok(End::Rollback(Err(AcceptError::Join(refusal))));
    }
    let members = member_count(tx, account).await?;
    if let Err(refusal) = domain::seat_free(members, accept.seats) {
        let who = (account, &accept.user, &invitation.invited_by);
        let seats = accept.seats.unwrap_or(members);
        tell_seats_exceeded(tx, who, (seats, members), accept.now, events).await?;
        return Ok(End::Commit(Err(AcceptError::Join(refusal))));
    }
    let command = MemberCommand {
        account: account.clone(),
        actor: invitation.invited_by.clone(),
        target: accept.user.clone(),
        changes: std::iter::once(MemberChange::Add(invitation.role))
            .chain(invitation.limit.map(|l| MemberChange::SetLimit(Some(l))))
            .collect(),
        seats: accept.seats,
        now: accept.now,
    };
    for change in &command.changes {
        if let Err(e) = write_change(tx, &command, *change).await? {
            return Err(unexpected(format!(
                "an accepted invitation's member could not be written: {e}"
            )));
        }
    }
    let sql = "UPDATE account_invitations SET accepted_by = $2, accepted_at = $3 WHERE id = $1";
    let values = vec![
        id.into(),
        accept.user.as_str().into(),
        accept.now.unix_millis().into(),
    ];
    sql::execute(tx, sql, values).await?;
    let member = locked_member(tx, account, &accept.user)
        .await?
        .ok_or_else(|| unexpected("the member just added".to_owned()))?;
    let changed = MemberChanged {
        before: None,
        after: Some(member.clone()),
    };
    Outbox::from(told(&command, &changed))
        .write(tx, events)
        .await?;
    Ok(End::Commit(Ok(member)))
}

fn unexpected(what: String) -> Fail {
    Fail::Store(application::ports::StoreError::Unexpected(anyhow::anyhow!(
        what
    )))
}
/// Revoke in `tx` (see `TeamStore::revoke_invitation`).
pub(super) async fn revoke(
    tx: &DatabaseTransaction,
    (account, id): (&AccountId, &str),
    actor: &UserId,
    now: Timestamp,
) -> Result<End<Result<(), MemberChangeError>>, Fail> {
    // The team's lock first, as an acceptance takes it before the invitation's row.
    locked_account_kind(tx, account).await?;
    let role = locked_member(tx, account, actor).await?.map(|m| m.role);
    if !role.is_some_and(MemberRole::manages_members) {
        let refusal = MemberChangeRefusal::NotAllowed;
        return Ok(End::Rollback(Err(MemberChangeError::Refused(refusal))));
    }
    let sql = "UPDATE account_invitations SET revoked_at = $3 \
               WHERE id = $1 AND account_id = $2 AND accepted_at IS NULL \
               AND revoked_at IS NULL AND expires_at > $3";
    let values = vec![id.into(), account.as_str().into(), now.unix_millis().into()];
    if sql::execute(tx, sql, values).await? == 1 {
        Ok(End::Commit(Ok(())))
    } else {
        Ok(End::Rollback(Err(MemberChangeError::AccountNotFound)))
    }
}
