//! [`AccountsService`]: sign-up, sign-in, sign-out and who is calling.

use domain::{AccountId, MemberLimit, MemberRole, Timestamp, UserId};

use crate::accounts::{Role, Scope};
use crate::authorization::{Acting, Owned, OwnerError};
use crate::ports::{Invitation, Member, Membership};
#[cfg(doc)]
use crate::service::Service;
use crate::sign_up::ClientAddress;
use crate::use_cases::invitations::{AcceptInvitationError, CreatedInvitation};
use crate::use_cases::portal::{
    CreatePortalSession, OpenPortalError, OpenedPortal, PortalError, PortalLink,
};
use crate::use_cases::sessions::{AccountsError, Principal, SignedIn};
use crate::use_cases::teams::{AccountEntry, MemberRequest, TeamError};

inbound_port! {
    /// Sign-up, sign-in, sign-out and who is calling.
    #[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
    #[async_trait::async_trait]
    pub trait AccountsService {
        /// Create an account for `client` and sign it in (see [`Service::register`]).
        async fn register(
            &self,
            email: &str,
            password: String,
            role: Role,
            client: &ClientAddress,
        ) -> Result<SignedIn, AccountsError>;

        /// Sign in with a password (see [`Service::sign_in`]).
        async fn sign_in(&self, email: &str, password: String) -> Result<SignedIn, AccountsError>;

        /// End a session (see [`Service::sign_out`]).
        async fn sign_out(&self, token: &str) -> Result<(), AccountsError>;

        /// Who holds `token`: a session, a host application's token or an API key (see
        /// [`Service::authenticate`]).
        async fn authenticate(&self, token: &str) -> Result<Principal, AccountsError>;

        /// Whether an object's account is within a request's reach (see
        /// [`Service::within_reach`]).
        async fn within_reach<'a>(
            &self,
            acting: &Acting,
            owned: Owned<'a>,
        ) -> Result<(), OwnerError>;

        /// Whom an action guarded by `scope` is for, and who acts (see [`Service::acting_for`]).
        async fn acting_for<'a>(
            &self,
            principal: Principal,
            scope: Scope,
            named: Option<&'a str>,
        ) -> Result<Acting, OwnerError>;

        /// Make a single-use customer-portal link (see [`Service::create_portal_session`]).
        async fn create_portal_session(
            &self,
            principal: Principal,
            request: CreatePortalSession,
        ) -> Result<PortalLink, PortalError>;

        /// Open a customer-portal link once (see [`Service::open_portal`]).
        async fn open_portal(&self, link_token: &str) -> Result<OpenedPortal, OpenPortalError>;

        /// Create a team with `user` as its owner (see [`Service::create_team`]).
        async fn create_team(&self, user: &UserId, name: &str) -> Result<Membership, TeamError>;

        /// The accounts `user` acts in, personal first (see [`Service::my_accounts`]).
        async fn my_accounts(&self, user: &UserId) -> Result<Vec<AccountEntry>, TeamError>;

        /// The account `user` acts in when naming `account`, and their role (see
        /// [`Service::account_of`]).
        async fn account_of(
            &self,
            user: &UserId,
            account: Option<AccountId>,
        ) -> Result<(AccountId, MemberRole), TeamError>;

        /// A team's members, for one of them (see [`Service::team_members`]).
        async fn team_members(
            &self,
            user: &UserId,
            account: &AccountId,
        ) -> Result<Vec<Member>, TeamError>;

        /// Add, change or remove a team's member (see [`Service::change_team_member`]).
        async fn change_team_member(
            &self,
            actor: &UserId,
            account: &AccountId,
            target: &UserId,
            request: MemberRequest,
        ) -> Result<Option<Member>, TeamError>;

        /// The host says a member left its organisation (see [`Service::host_member_left`]).
        async fn host_member_left(&self, account: &AccountId, member: &UserId)
        -> Result<(), TeamError>;

        /// Invite an address to a team (see [`Service::invite_member`]).
        async fn invite_member(
            &self,
            actor: &UserId,
            account: &AccountId,
            email: &str,
            join: (MemberRole, Option<MemberLimit>),
        ) -> Result<CreatedInvitation, TeamError>;

        /// A team's open invitations (see [`Service::open_invitations`]).
        async fn open_invitations(
            &self,
            user: &UserId,
            account: &AccountId,
        ) -> Result<Vec<Invitation>, TeamError>;

        /// Revoke an open invitation (see [`Service::revoke_invitation`]).
        async fn revoke_invitation(
            &self,
            actor: &UserId,
            account: &AccountId,
            id: &str,
        ) -> Result<(), TeamError>;

        /// Accept an invitation with its token (see [`Service::accept_invitation`]).
        async fn accept_invitation(
            &self,
            credential: &str,
            invitation: &str,
        ) -> Result<Member, AcceptInvitationError>;

        /// Now, by the service's clock (session lifetimes, throttles, request times).
        fn now(&self) -> Timestamp;

        /// A new URL-safe secret of at least 128 bits (a form's anti-forgery secret).
        fn new_secret(&self) -> String;
    }
}
