//! The customer portal: a host application's backend (an API key with `billing:write`) asks for
//! a link for one of its users; the link opens once, within minutes, and becomes a short
//! browser session that may do nothing but that user's billing ([`crate::authorization`]),
//! with a way back to the host. A link may be for a team's billing: the user must manage it when
//! the link is made, and every action checks their role in it again. Only digests of the link's
//! and the session's tokens are stored.

use domain::{AccountId, ReturnField, ReturnUrlRefused, Timestamp, UserId};

use super::InfraError;
use super::sessions::{PORTAL_SESSION_PREFIX, Principal};
use crate::accounts::{PortalSession, Scope};
use crate::authorization::{Denied, service_key};
use crate::ports::{Clock, IdGenerator, NewPortalLink, SecretHasher, Store};
use crate::service::Service;

/// How long a portal link can be opened: five minutes.
pub const PORTAL_LINK_LIFETIME_MS: i64 = 5 * 60 * 1000;
/// How long the session a portal link opens lasts: thirty minutes.
pub const PORTAL_SESSION_LIFETIME_MS: i64 = 30 * 60 * 1000;
/// The longest locale tag kept with a link.
const MAX_LOCALE_CHARS: usize = 16;

/// A host application asks for a portal link.
#[derive(Debug, Clone)]
pub struct CreatePortalSession {
    /// The user whose billing the portal shows.
    pub user_id: String,
    /// A team whose billing the portal shows in place of the user's own (the user must be one
    /// of its owners or admins).
    pub account_id: Option<String>,
    /// Where "Back to the app" leads (its origin must be allowed).
    pub return_url: String,
    /// The page language, when the host knows it (`en`, `zh-CN`, …).
    pub locale: Option<String>,
}

/// A portal link: show its token only in the URL handed to the user.
#[derive(Debug, Clone)]
pub struct PortalLink {
    /// The secret link token (only its digest is stored).
    pub token: String,
    /// Until when the link can be opened.
    pub expires_at: Timestamp,
}

/// A portal link opened: the browser session to set.
#[derive(Debug, Clone)]
pub struct OpenedPortal {
    /// The session token (`tlp_…`; only its digest is stored).
    pub token: String,
    /// The session.
    pub session: PortalSession,
}

/// Why a portal link could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PortalError {
    /// Not an API key with `billing:write`, or the user does not exist.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The return URL is malformed or outside the allowed origins.
    #[error(transparent)]
    ReturnUrlNotAllowed(#[from] ReturnUrlRefused),
    /// The team named is not a team the user belongs to (or no team at all).
    #[error("account not found")]
    AccountNotFound,
    /// The user belongs to the team named but does not manage its billing.
    #[error("only a team's owners and admins manage its billing")]
    NotBillingManager,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for PortalError {
    fn from(e: crate::ports::StoreError) -> Self {
        PortalError::Infra(e.into())
    }
}

/// Why a portal link did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenPortalError {
    /// Unknown, already opened, or expired: the same answer for all three.
    #[error("this portal link was used or has expired")]
    Gone,
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<crate::ports::StoreError> for OpenPortalError {
    fn from(e: crate::ports::StoreError) -> Self {
        OpenPortalError::Infra(e.into())
    }
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Make a single-use portal link for a user, for an API key with `billing:write`. Nothing
    /// is written when anything is refused.
    ///
    /// # Errors
    /// [`PortalError::Denied`] ([`Denied::MissingScope`], [`Denied::UserNotFound`]),
    /// [`PortalError::ReturnUrlNotAllowed`], [`PortalError::AccountNotFound`],
    /// [`PortalError::NotBillingManager`], infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn create_portal_session(
        &self,
        principal: Principal,
        request: CreatePortalSession,
    ) -> Result<PortalLink, PortalError> {
        let key = service_key(principal, Scope::BillingWrite)?;
        let return_url = self
            .host_app
            .return_origins
            .check(ReturnField::ReturnUrl, &request.return_url)?;
        let user_id = UserId::new(request.user_id).map_err(|_| Denied::UserNotFound)?;
        let user = self
            .store
            .find_user(&user_id)
            .await?
            .ok_or(Denied::UserNotFound)?;
        let account_id = match request.account_id {
            Some(raw) => Some(self.portal_team(&user.id, raw).await?),
            None => None,
        };
        let token = self.ids.new_secret();
        let now = self.clock.now();
        let expires_at = now.plus_millis(PORTAL_LINK_LIFETIME_MS);
        let link = NewPortalLink {
            link: self.hasher.hash_token(&token),
            user_id: user.id,
            account_id,
            return_url,
            locale: request.locale.filter(|l| plausible_locale(l)),
            created_by: key.id,
            created_at: now,
            expires_at,
        };
        self.store.create_portal_link(&link).await?;
        Ok(PortalLink { token, expires_at })
    }

    /// The team `raw` names, for a portal link of `user`: a team they manage the billing of.
    async fn portal_team(&self, user: &UserId, raw: String) -> Result<AccountId, PortalError> {
        let account = AccountId::new(raw).map_err(|_| PortalError::AccountNotFound)?;
        if !account.is_team() {
            return Err(PortalError::AccountNotFound);
        }
        match self.role_in(user, &account).await? {
            None => Err(PortalError::AccountNotFound),
            Some(role) if !role.manages_billing() => Err(PortalError::NotBillingManager),
            Some(_) => Ok(account),
        }
    }

    /// Open a portal link: once, before it expires, it becomes a browser session of
    /// [`PORTAL_SESSION_LIFETIME_MS`].
    ///
    /// # Errors
    /// [`OpenPortalError::Gone`] for an unknown, used or expired link; infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn open_portal(&self, link_token: &str) -> Result<OpenedPortal, OpenPortalError> {
        if link_token.is_empty() || link_token.len() > 256 {
            return Err(OpenPortalError::Gone);
        }
        let token = format!("{PORTAL_SESSION_PREFIX}{}", self.ids.new_secret());
        let now = self.clock.now();
        let session = self
            .store
            .open_portal_link(
                &self.hasher.hash_token(link_token),
                &self.hasher.hash_token(&token),
                now,
                now.plus_millis(PORTAL_SESSION_LIFETIME_MS),
            )
            .await?
            .ok_or(OpenPortalError::Gone)?;
        Ok(OpenedPortal { token, session })
    }
}

/// A locale tag worth keeping: letters, digits and `-`/`_`, at most 16 characters.
fn plausible_locale(tag: &str) -> bool {
    !tag.is_empty()
        && tag.chars().count() <= MAX_LOCALE_CHARS
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
