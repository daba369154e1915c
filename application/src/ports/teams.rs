//! Team accounts and their members.
//!
//! A team is an account with members. Who may change the members is decided by
//! [`domain::decide_member_change`] on the facts the store reads in the change's own
//! transaction, so that two concurrent changes cannot both pass a rule (the last owner leaving
//! while another owner is removed, say).

use async_trait::async_trait;
use domain::{
    AccountId, AccountKind, HostOrgClaim, HostOrgMembership, InvitationRefusal, MemberChange,
    MemberChangeRefusal, MemberLimit, MemberRole, Timestamp, UserId, WindowCount,
};

use super::StoreError;
use crate::accounts::TokenHash;
use crate::host_events::HostEvent;

/// An account as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its id (a personal account's is its user's).
    pub id: AccountId,
    /// Personal or team.
    pub kind: AccountKind,
    /// A team's name (`None` for a personal account).
    pub name: Option<String>,
    /// The host application's id of the organisation this team mirrors, if it mirrors one.
    pub host_organisation: Option<String>,
    /// When it was opened.
    pub created_at: Timestamp,
}

/// A member of a team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The team's account.
    pub account_id: AccountId,
    /// The member.
    pub user_id: UserId,
    /// Their e-mail address, as their account or their host's token gave it.
    pub email: Option<String>,
    /// Their role.
    pub role: MemberRole,
    /// Their spend limit, if any.
    pub limit: Option<MemberLimit>,
    /// What counts against it, as last written.
    pub count: WindowCount,
    /// When they joined.
    pub added_at: Timestamp,
}

/// A team a user belongs to, and their role in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The team's account.
    pub account: Account,
    /// The user's role.
    pub role: MemberRole,
}

/// A team to create, its creator its first owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTeam {
    /// The new account's id (`team_…`).
    pub id: AccountId,
    /// Its name.
    pub name: String,
    /// Its first owner.
    pub owner: UserId,
    /// Now.
    pub now: Timestamp,
}

/// A change to a team's members, asked by `actor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberCommand {
    /// The team.
    pub account: AccountId,
    /// Who asks.
    pub actor: UserId,
    /// Whom it changes.
    pub target: UserId,
    /// What, in order: each decided on the state the ones before it left (an addition with a
    /// limit is an `Add` then a `SetLimit`), all written or none.
    pub changes: Vec<MemberChange>,
    /// The seats the team holds as the caller read its entitlements (`domain::seat_cap`):
    /// an addition is decided against them and the members counted in the change's own
    /// transaction. `None`: no cap.
    pub seats: Option<u64>,
    /// Now.
    pub now: Timestamp,
}

/// What a member change did: the member before and after (`None` before an add and after a
/// removal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberChanged {
    /// Before.
    pub before: Option<Member>,
    /// After.
    pub after: Option<Member>,
}

/// Why a member change wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum MemberChangeError {
    /// The rules refused it.
    #[error("refused: {0:?}")]
    Refused(MemberChangeRefusal),
    /// No such account.
    #[error("account not found")]
    AccountNotFound,
    /// The user to add does not exist.
    #[error("user not found")]
    UserNotFound,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Keeping a user's memberships of host organisations' teams in step with their host token
/// (see [`domain::plan_host_org`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOrgSync {
    /// The user.
    pub user: UserId,
    /// The organisation their token names, as a team and a role; `None`: none.
    pub claim: Option<HostOrgClaim>,
    /// The claimed organisation's id as the host spells it, and the name a team created for it
    /// on first sight takes.
    pub organisation: Option<(String, String)>,
    /// The seats the claimed team holds, as the caller read its entitlements (`None`: no cap);
    /// joining or coming back is decided against them on the members counted in the sync's
    /// own transaction.
    pub seats: Option<u64>,
    /// Now.
    pub now: Timestamp,
}

/// An invitation to join a team, by e-mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    /// Its id (`inv_…`).
    pub id: String,
    /// The team.
    pub account_id: AccountId,
    /// The address invited, as `accounts::Email` normalises it.
    pub email: String,
    /// The role the invitee joins with.
    pub role: MemberRole,
    /// The limit they join with, if any.
    pub limit: Option<MemberLimit>,
    /// Who invited them.
    pub invited_by: UserId,
    /// When.
    pub created_at: Timestamp,
    /// Until when it may be accepted.
    pub expires_at: Timestamp,
}

/// An invitation to store, decided as an addition by its inviter (see
/// [`TeamStore::create_invitation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvitation {
    /// The invitation.
    pub invitation: Invitation,
    /// The digest of its secret token (only digests are stored).
    pub token: TokenHash,
    /// The seats the team holds, as the caller read them (`None`: no cap).
    pub seats: Option<u64>,
}

/// A user accepting an invitation with its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptInvitation {
    /// The digest of the token presented.
    pub token: TokenHash,
    /// Who accepts.
    pub user: UserId,
    /// The address they are signed in as (a password account's, a host token's verified
    /// address), normalised; `None` when they have none.
    pub email: Option<String>,
    /// The seats the team holds, as the caller read them (`None`: no cap).
    pub seats: Option<u64>,
    /// Now.
    pub now: Timestamp,
}

/// Why an invitation was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// No invitation has this token.
    #[error("invitation not found")]
    NotFound,
    /// The invitation cannot be accepted.
    #[error("refused: {0:?}")]
    Refused(InvitationRefusal),
    /// The user cannot join: a member already, or no seat is free.
    #[error("cannot join: {0:?}")]
    Join(MemberChangeRefusal),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The events of a member change, told in its transaction (built by
/// `host_events::member_changed`).
pub type MemberEvents = fn(&MemberCommand, &MemberChanged) -> Vec<HostEvent>;

/// Team accounts and their members.
#[async_trait]
pub trait TeamStore: Send + Sync + 'static {
    /// Create a team with its creator as owner.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] for a taken id; storage failures.
    async fn create_team(&self, team: &NewTeam) -> Result<Account, StoreError>;

    /// An account by id.
    ///
    /// # Errors
    /// Storage failures; [`StoreError::Corrupt`] for an invalid row.
    async fn account(&self, id: &AccountId) -> Result<Option<Account>, StoreError>;

    /// The teams `user` belongs to, oldest membership first.
    ///
    /// # Errors
    /// Storage failures.
    async fn memberships(&self, user: &UserId) -> Result<Vec<Membership>, StoreError>;

    /// `user`'s membership of the team `account`, if any.
    ///
    /// # Errors
    /// Storage failures.
    async fn member(
        &self,
        account: &AccountId,
        user: &UserId,
    ) -> Result<Option<Member>, StoreError>;

    /// A team's members, oldest first.
    ///
    /// # Errors
    /// Storage failures.
    async fn members(&self, account: &AccountId) -> Result<Vec<Member>, StoreError>;

    /// Change a team's members as `domain::decide_member_change` allows on what the
    /// transaction reads, with the events `told` builds from the outcome, in one transaction.
    ///
    /// # Errors
    /// See [`MemberChangeError`].
    async fn change_member(
        &self,
        command: &MemberCommand,
        told: MemberEvents,
    ) -> Result<MemberChanged, MemberChangeError>;

    /// `user`'s memberships of host organisations' teams, present and away.
    ///
    /// # Errors
    /// Storage failures.
    async fn host_memberships(&self, user: &UserId) -> Result<Vec<HostOrgMembership>, StoreError>;

    /// Keep `sync.user`'s memberships of host organisations' teams in step with their token, in
    /// one transaction: create the claimed team on first sight, then write what
    /// [`domain::plan_host_org`] decides on the rows the transaction reads, a join or a return
    /// only while [`domain::seat_free`] allows it (the other steps are written either way), with
    /// the events `told` builds for a join and a role change.
    ///
    /// # Errors
    /// `Ok(Err(refusal))` when no seat was free for the user in the claimed team; storage
    /// failures.
    async fn sync_host_org(
        &self,
        sync: &HostOrgSync,
        told: MemberEvents,
    ) -> Result<Result<(), MemberChangeRefusal>, StoreError>;

    /// Make `user` away from the host organisation's team `account` (the host says they left
    /// it), as a token naming another organisation would: their row kept for a token naming it
    /// again. `false` when they are not present in it.
    ///
    /// # Errors
    /// Storage failures.
    async fn step_away(
        &self,
        account: &AccountId,
        user: &UserId,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Store an invitation, decided in one transaction as an addition of its role by its
    /// inviter (`domain::decide_member_change`, the target not yet a member).
    ///
    /// # Errors
    /// As [`TeamStore::change_member`].
    async fn create_invitation(&self, new: &NewInvitation) -> Result<(), MemberChangeError>;

    /// The invitation whose token's digest is `token`, in any state.
    ///
    /// # Errors
    /// Storage failures.
    async fn invitation_by_token(
        &self,
        token: &TokenHash,
    ) -> Result<Option<Invitation>, StoreError>;

    /// A team's invitations still open at `now` (neither accepted, revoked nor expired), newest
    /// first.
    ///
    /// # Errors
    /// Storage failures.
    async fn open_invitations(
        &self,
        account: &AccountId,
        now: Timestamp,
    ) -> Result<Vec<Invitation>, StoreError>;

    /// Revoke the open invitation `id` of `account`, as `actor` (an owner or admin of it).
    ///
    /// # Errors
    /// [`MemberChangeError::Refused`] (`NotAllowed`) for another actor,
    /// [`MemberChangeError::AccountNotFound`] for no such open invitation; storage failures.
    async fn revoke_invitation(
        &self,
        account: &AccountId,
        id: &str,
        actor: &UserId,
        now: Timestamp,
    ) -> Result<(), MemberChangeError>;

    /// Accept an invitation in one transaction: decided on its state as read locked
    /// (`domain::decide_acceptance`: single-use), then as a join (not a member yet, a seat free
    /// under the team's lock); the user joins with its role and limit, `account.member_added`
    /// is told with the inviter as `by`, and the invitation is used up.
    ///
    /// # Errors
    /// See [`AcceptError`].
    async fn accept_invitation(
        &self,
        accept: &AcceptInvitation,
        told: MemberEvents,
    ) -> Result<Member, AcceptError>;
}
