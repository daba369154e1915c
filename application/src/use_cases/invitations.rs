//! Invitations to a team by e-mail: an owner or admin invites an address with a role (and a
//! limit); Tally answers the invitation's secret token once, for the host app to send; the
//! invitee accepts it signed in as that address, once, within seven days, while a seat is free.
//!
//! Tally sends no mail: the inviter's app sends the link it builds from the token. Only the
//! token's digest is stored.

use domain::{
    AccountId, INVITATION_LIFETIME_MS, InvitationRefusal, MemberLimit, MemberRole, UserId,
};

use super::InfraError;
use super::sessions::{AccountsError, Principal};
use super::teams::TeamError;
use crate::accounts::Email;
use crate::host_events;
use crate::ports::{
    AcceptError, AcceptInvitation, Clock, IdGenerator, Invitation, Member, NewInvitation,
    SecretHasher, Store,
};
use crate::service::Service;

/// How every invitation token starts.
pub const INVITATION_TOKEN_PREFIX: &str = "tinv_";

/// An invitation just made, with its secret token (shown this once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedInvitation {
    /// The invitation.
    pub invitation: Invitation,
    /// Its secret token (`tinv_…`): whoever holds it and is signed in as the address accepts.
    pub token: String,
}

/// Why an invitation was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AcceptInvitationError {
    /// No valid credential, or one that is not a user's own (an API key, a portal session).
    #[error("signed-in users only")]
    Unauthenticated,
    /// No invitation has this token.
    #[error("invitation not found")]
    NotFound,
    /// The invitation cannot be accepted.
    #[error("refused: {0:?}")]
    Refused(InvitationRefusal),
    /// The user cannot join: a member already, or no seat is free.
    #[error(transparent)]
    Join(TeamError),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<AccountsError> for AcceptInvitationError {
    fn from(e: AccountsError) -> Self {
        match e {
            AccountsError::Infra(infra) => Self::Infra(infra),
            _ => Self::Unauthenticated,
        }
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Invite `email` to the team `account` as `actor` asks, with `role` and `limit`: decided as
    /// an addition of that role by `actor` (their role may grant it, the team is not a host
    /// organisation's, a seat is free now).
    ///
    /// # Errors
    /// [`TeamError::Invalid`] for a bad address; [`TeamError::AccountNotFound`] unless `actor`
    /// is a member; [`TeamError::Refused`] by the rules; infrastructure.
    #[tracing::instrument(skip_all, fields(actor = %actor, account_id = %account))]
    pub async fn invite_member(
        &self,
        actor: &UserId,
        account: &AccountId,
        email: &str,
        (role, limit): (MemberRole, Option<MemberLimit>),
    ) -> Result<CreatedInvitation, TeamError> {
        let email = Email::parse(email).map_err(|e| TeamError::Invalid {
            field: "email",
            message: e.to_string(),
        })?;
        if !account.is_team() || self.store.member(account, actor).await?.is_none() {
            return Err(TeamError::AccountNotFound);
        }
        let now = self.clock.now();
        let token = format!("{INVITATION_TOKEN_PREFIX}{}", self.ids.new_secret());
        let invitation = Invitation {
            id: self.ids.new_id("inv"),
            account_id: account.clone(),
            email: email.as_str().to_owned(),
            role,
            limit,
            invited_by: actor.clone(),
            created_at: now,
            expires_at: now.plus_millis(INVITATION_LIFETIME_MS),
        };
        let new = NewInvitation {
            invitation,
            token: self.hasher.hash_token(&token),
            seats: self.seats_of(account).await?,
        };
        self.store.create_invitation(&new).await?;
        Ok(CreatedInvitation {
            invitation: new.invitation,
            token,
        })
    }

    /// A team's open invitations, for one of its members.
    ///
    /// # Errors
    /// [`TeamError::AccountNotFound`] unless `user` is a member; infrastructure.
    #[tracing::instrument(skip_all, fields(user_id = %user, account_id = %account))]
    pub async fn open_invitations(
        &self,
        user: &UserId,
        account: &AccountId,
    ) -> Result<Vec<Invitation>, TeamError> {
        if self.store.member(account, user).await?.is_none() {
            return Err(TeamError::AccountNotFound);
        }
        Ok(self
            .store
            .open_invitations(account, self.clock.now())
            .await?)
    }

    /// Revoke the open invitation `id` of the team `account`, as `actor` (an owner or admin).
    ///
    /// # Errors
    /// [`TeamError::AccountNotFound`] unless `actor` is a member; [`TeamError::Refused`] for
    /// a plain member; [`TeamError::InvitationNotFound`] for no such open invitation.
    #[tracing::instrument(skip_all, fields(actor = %actor, account_id = %account))]
    pub async fn revoke_invitation(
        &self,
        actor: &UserId,
        account: &AccountId,
        id: &str,
    ) -> Result<(), TeamError> {
        if self.store.member(account, actor).await?.is_none() {
            return Err(TeamError::AccountNotFound);
        }
        let now = self.clock.now();
        match self.store.revoke_invitation(account, id, actor, now).await {
            Ok(()) => Ok(()),
            Err(crate::ports::MemberChangeError::AccountNotFound) => {
                Err(TeamError::InvitationNotFound)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Accept the invitation whose token is `invitation`, as the user `credential` signs in
    /// (a session or a host token; never an API key or a portal session), signed in as the
    /// address invited: a password account's address, or the address a host token says its
    /// host verified.
    ///
    /// # Errors
    /// See [`AcceptInvitationError`].
    #[tracing::instrument(skip_all)]
    pub async fn accept_invitation(
        &self,
        credential: &str,
        invitation: &str,
    ) -> Result<Member, AcceptInvitationError> {
        let (principal, address) = self.authenticate_with_address(credential).await?;
        let Principal::User(user) = principal else {
            return Err(AcceptInvitationError::Unauthenticated);
        };
        if !invitation.starts_with(INVITATION_TOKEN_PREFIX) || invitation.len() > 256 {
            return Err(AcceptInvitationError::NotFound);
        }
        let token = self.hasher.hash_token(invitation);
        let found = self
            .store
            .invitation_by_token(&token)
            .await
            .map_err(InfraError::from)?;
        let account = found.ok_or(AcceptInvitationError::NotFound)?.account_id;
        let accept = AcceptInvitation {
            token,
            user: user.id.clone(),
            email: address.map(|a| a.as_str().to_owned()),
            seats: self.seats_of(&account).await?,
            now: self.clock.now(),
        };
        let accepted = self
            .store
            .accept_invitation(&accept, host_events::member_changed)
            .await;
        match accepted {
            Ok(member) => Ok(member),
            Err(AcceptError::NotFound) => Err(AcceptInvitationError::NotFound),
            Err(AcceptError::Refused(refusal)) => Err(AcceptInvitationError::Refused(refusal)),
            Err(AcceptError::Join(refusal)) => {
                Err(AcceptInvitationError::Join(TeamError::Refused(refusal)))
            }
            Err(AcceptError::Store(e)) => Err(AcceptInvitationError::Infra(e.into())),
        }
    }
}
