//! Sessions: register, sign in, sign out, and who is calling (session, API key or host token).
//! The account types these use cases work on (users, roles, API keys, scopes) are in
//! [`crate::accounts`]; this file holds the use cases, hence the different name.

use domain::UserId;

use super::InfraError;
use crate::accounts::{
    AccountError, ApiKey, BuyerContact, CustomerName, Email, Password, PortalSession, Role, Scope,
    User,
};
use crate::ports::{
    Clock, HostIdentity, IdGenerator, NewHostUser, NewUser, SecretHasher, Store, StoreError,
    UserRepository,
};
use crate::service::Service;
use crate::sign_up::{ClientAddress, SignUpRefused, SignupCreditsFor, SignupIdentity};

/// The prefix of every service API key, so leaked keys are recognisable.
pub const API_KEY_PREFIX: &str = "tly_";

/// A signed-in user and the session token to present.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The user.
    pub user: User,
    /// The secret session token (shown once; only its hash is stored).
    pub token: String,
    /// When the session ends.
    pub expires_at: domain::Timestamp,
}

/// The prefix of every customer-portal session token, so that a request presenting one is
/// looked up among portal sessions only.
pub const PORTAL_SESSION_PREFIX: &str = "tlp_";

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Principal {
    /// A signed-in user (session cookie, bearer session token or host token).
    User(User),
    /// A customer-portal session: one user's billing, and nothing else
    /// (see [`crate::authorization`]).
    Portal(PortalSession),
    /// A server-side caller with a service API key.
    Service(ApiKey),
}

impl Principal {
    /// Whether this principal may act with `scope`.
    #[must_use]
    pub fn has_scope(&self, scope: Scope) -> bool {
        matches!(self, Principal::Service(key) if key.scopes.iter().any(|held| held.allows(scope)))
    }
}

/// Why an account operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    /// Bad e-mail address or password form.
    #[error(transparent)]
    Invalid(#[from] AccountError),
    /// The e-mail address is taken.
    #[error("an account with this email address exists")]
    EmailTaken,
    /// Wrong e-mail address or password (one message for both).
    #[error("email address or password is wrong")]
    WrongCredentials,
    /// No valid credential.
    #[error("not signed in")]
    Unauthenticated,
    /// Too many sign-ups from this client or in this e-mail domain (the abuse policy).
    #[error("too many sign-ups; retry in {} s", .0.retry_after_seconds)]
    RateLimited(SignUpRefused),
    /// Infrastructure.
    #[error(transparent)]
    Infra(#[from] InfraError),
}

impl From<StoreError> for AccountsError {
    fn from(e: StoreError) -> Self {
        AccountsError::Infra(e.into())
    }
}

/// Create an account with `role` directly (`tally admin create-user`): no rate limit, and no
/// sign-up credits (those are for accounts people make themselves, [`Service::register`]).
///
/// # Errors
/// Bad input, a taken address, infrastructure.
pub async fn create_account<U: UserRepository, H: SecretHasher, I: IdGenerator>(
    store: &U,
    hasher: &H,
    ids: &I,
    now: domain::Timestamp,
    email: &str,
    password: String,
    role: Role,
) -> Result<User, AccountsError> {
    let email = Email::parse_new(email)?;
    let new = password_user((hasher, ids), now, email, password, role)?;
    insert_user(store, &new).await
}

/// A new password account's row (no sign-up identity yet): the password checked and hashed,
/// a fresh id.
fn password_user<H: SecretHasher, I: IdGenerator>(
    (hasher, ids): (&H, &I),
    now: domain::Timestamp,
    email: Email,
    password: String,
    role: Role,
) -> Result<NewUser, AccountsError> {
    let password = Password::parse(password)?;
    let hash = hasher
        .hash_password(&password)
        .map_err(|e| InfraError::Unexpected(anyhow::anyhow!(e)))?;
    let id = UserId::new(ids.new_id("usr")).map_err(|e| InfraError::Unexpected(e.into()))?;
    Ok(NewUser {
        id,
        email,
        password_hash: Some(hash),
        role,
        created_at: now,
        signup_identity: None,
    })
}

/// Store `new`; a taken address or id is [`AccountsError::EmailTaken`].
async fn insert_user<U: UserRepository>(store: &U, new: &NewUser) -> Result<User, AccountsError> {
    match store.create_user(new).await {
        Ok(user) => Ok(user),
        Err(StoreError::Conflict(_)) => Err(AccountsError::EmailTaken),
        Err(e) => Err(e.into()),
    }
}

/// Whom a host user's sign-up credits go to: its verified e-mail address; without one, its
/// issuer and subject when any identity may be given them, else nobody.
fn host_signup_identity(
    identity: &HostIdentity,
    credits_for: SignupCreditsFor,
) -> Option<SignupIdentity> {
    let verified = identity
        .verified_email
        .as_deref()
        .and_then(|raw| Email::parse(raw).ok());
    match (verified, credits_for) {
        (Some(email), _) => Some(SignupIdentity::of_email(&email)),
        (None, SignupCreditsFor::AnyIdentity) => Some(SignupIdentity::of_host_subject(
            &identity.issuer,
            &identity.subject,
        )),
        (None, SignupCreditsFor::VerifiedEmail) => None,
    }
}

/// A portal session's user always acts with the role `user`, whatever their account's role: a
/// link an API key opened never administers.
fn billing_only(portal: PortalSession) -> PortalSession {
    PortalSession {
        user: User {
            role: Role::User,
            ..portal.user
        },
        ..portal
    }
}

/// The longest host issuer or subject accepted, in bytes.
pub const MAX_HOST_IDENTITY_BYTES: usize = 512;

/// The host identity to look up, if its issuer and subject are acceptable: a non-empty subject,
/// both at most [`MAX_HOST_IDENTITY_BYTES`] and free of control characters (a NUL would make the
/// derived id's input ambiguous, and PostgreSQL cannot store it).
fn host_user(
    identity: &HostIdentity,
    now: domain::Timestamp,
    credits_for: SignupCreditsFor,
) -> Option<NewHostUser> {
    let acceptable =
        |text: &str| text.len() <= MAX_HOST_IDENTITY_BYTES && !text.chars().any(char::is_control);
    (!identity.subject.is_empty() && acceptable(&identity.subject) && acceptable(&identity.issuer))
        .then(|| NewHostUser {
            issuer: identity.issuer.clone(),
            subject: identity.subject.clone(),
            created_at: now,
            signup_identity: host_signup_identity(identity, credits_for),
            contact: host_contact(identity),
        })
}

/// How the payment provider may reach a host user, from its token's e-mail and name claims: an
/// address that does not parse, or cannot receive mail, and a name that does not parse are left
/// out (the user still signs in).
fn host_contact(identity: &HostIdentity) -> BuyerContact {
    let email = identity
        .email
        .as_deref()
        .and_then(|raw| Email::parse(raw).ok());
    let name = identity
        .name
        .as_deref()
        .and_then(|raw| CustomerName::parse(raw).ok());
    BuyerContact::new(email, name)
}

impl<S: Store, C: Clock, I: IdGenerator, H: SecretHasher> Service<S, C, I, H> {
    /// Create an account with `role` for `client` and sign it in, under the sign-up abuse
    /// policy: the client's address and the address's e-mail domain are rate limited (before
    /// the password is hashed), and the account's e-mail address is its sign-up identity only
    /// when the policy gives credits to unverified addresses (Tally verifies none itself).
    ///
    /// # Errors
    /// Bad input, a taken address, [`AccountsError::RateLimited`], infrastructure.
    #[tracing::instrument(skip_all, fields(client = client.as_str()))]
    pub async fn register(
        &self,
        email: &str,
        password: String,
        role: Role,
        client: &ClientAddress,
    ) -> Result<SignedIn, AccountsError> {
        let email = Email::parse_new(email)?;
        let now = self.clock.now();
        let domain = email.as_str().rsplit('@').next().unwrap_or_default();
        if let Err(refused) = self.sign_ups.check(client, domain, now) {
            tracing::warn!(limit = ?refused.limit, "sign-up refused by the rate limit");
            return Err(AccountsError::RateLimited(refused));
        }
        let mut new = password_user((&self.hasher, &self.ids), now, email, password, role)?;
        new.signup_identity = match self.sign_ups.policy().credits_for {
            SignupCreditsFor::AnyIdentity => Some(SignupIdentity::of_email(&new.email)),
            SignupCreditsFor::VerifiedEmail => None,
        };
        let user = insert_user(&self.store, &new).await?;
        self.open_session(user).await
    }

    /// Sign in with e-mail address and password.
    ///
    /// # Errors
    /// [`AccountsError::WrongCredentials`] for any mismatch.
    #[tracing::instrument(skip_all)]
    pub async fn sign_in(&self, email: &str, password: String) -> Result<SignedIn, AccountsError> {
        let (Ok(email), Ok(password)) = (Email::parse(email), Password::parse(password)) else {
            return Err(AccountsError::WrongCredentials);
        };
        let Some((user, Some(hash))) = self.store.find_user_by_email(&email).await? else {
            return Err(AccountsError::WrongCredentials);
        };
        if !self.hasher.verify_password(&password, &hash) {
            return Err(AccountsError::WrongCredentials);
        }
        self.open_session(user).await
    }

    async fn open_session(&self, user: User) -> Result<SignedIn, AccountsError> {
        let token = self.ids.new_secret();
        let now = self.clock.now();
        let expires_at = now.plus_millis(self.config.session_lifetime_ms);
        self.store
            .create_session(&self.hasher.hash_token(&token), &user.id, now, expires_at)
            .await?;
        Ok(SignedIn {
            user,
            token,
            expires_at,
        })
    }

    /// Sign out: the session token stops working.
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all)]
    pub async fn sign_out(&self, token: &str) -> Result<(), AccountsError> {
        Ok(self
            .store
            .delete_session(&self.hasher.hash_token(token))
            .await?)
    }

    /// Who presents `token`: an API key (`tly_…`), a session token, or a host token.
    ///
    /// # Errors
    /// [`AccountsError::Unauthenticated`] when nothing matches.
    #[tracing::instrument(skip_all)]
    pub async fn authenticate(&self, token: &str) -> Result<Principal, AccountsError> {
        Ok(self.authenticate_with_address(token).await?.0)
    }

    /// [`Service::authenticate`], with the address the user is signed in as: a password
    /// account's own, or the address a host token says its host verified (`None` without one,
    /// and for API keys and portal sessions).
    ///
    /// # Errors
    /// As [`Service::authenticate`].
    pub(crate) async fn authenticate_with_address(
        &self,
        token: &str,
    ) -> Result<(Principal, Option<Email>), AccountsError> {
        if token.is_empty() || token.len() > 4096 {
            return Err(AccountsError::Unauthenticated);
        }
        let now = self.clock.now();
        let hash = self.hasher.hash_token(token);
        if token.starts_with(API_KEY_PREFIX) {
            return self
                .store
                .find_api_key(&hash)
                .await?
                .map(|key| (Principal::Service(key), None))
                .ok_or(AccountsError::Unauthenticated);
        }
        if token.starts_with(PORTAL_SESSION_PREFIX) {
            return self
                .store
                .find_portal_session(&hash, now)
                .await?
                .map(|portal| (Principal::Portal(billing_only(portal)), None))
                .ok_or(AccountsError::Unauthenticated);
        }
        if let Some(user) = self.store.find_session_user(&hash, now).await? {
            let address = Some(user.email.clone());
            return Ok((Principal::User(user), address));
        }
        let Some(verifier) = &self.host_tokens else {
            return Err(AccountsError::Unauthenticated);
        };
        let identity = verifier
            .verify(token, now)
            .await
            .ok_or(AccountsError::Unauthenticated)?;
        let credits_for = self.sign_ups.policy().credits_for;
        let new = host_user(&identity, now, credits_for).ok_or(AccountsError::Unauthenticated)?;
        let user = match self.store.find_or_create_host_user(&new).await {
            Ok(user) => user,
            // A mapping that cannot be made (an id collision) signs nobody in.
            Err(StoreError::Conflict(_)) => return Err(AccountsError::Unauthenticated),
            Err(e) => return Err(e.into()),
        };
        // Before the request acts: a user the host removed from an organisation acts in its
        // team no more from this request on.
        self.keep_host_org_in_step(&user.id, &identity).await?;
        let address = identity
            .verified_email
            .as_deref()
            .and_then(|raw| Email::parse(raw).ok());
        // The role is the token's for this request only; a host user's stored role is `user`.
        let user = User {
            role: identity.role,
            ..user
        };
        Ok((Principal::User(user), address))
    }

    /// The user `id`, if it exists (for a service API key acting on a user's behalf).
    ///
    /// # Errors
    /// Infrastructure only.
    #[tracing::instrument(skip_all, fields(user_id = %id))]
    pub async fn find_user(&self, id: &UserId) -> Result<Option<User>, InfraError> {
        Ok(self.store.find_user(id).await?)
    }

    /// Make a user an administrator (the `tally admin` command).
    ///
    /// # Errors
    /// Unknown user, infrastructure.
    #[tracing::instrument(skip_all)]
    pub async fn promote_to_admin(&self, email: &str) -> Result<User, AccountsError> {
        let email = Email::parse(email)?;
        let (user, _) = self
            .store
            .find_user_by_email(&email)
            .await?
            .ok_or(AccountsError::WrongCredentials)?;
        self.store.set_role(&user.id, Role::Admin).await?;
        Ok(User {
            role: Role::Admin,
            ..user
        })
    }
}
