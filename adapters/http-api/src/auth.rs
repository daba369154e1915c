//! Who is calling: a session (the `tally_session` cookie or `Authorization: Bearer <token>`) or
//! a service API key (`Authorization: Bearer tly_…` or `X-Api-Key: tly_…`).
//!
//! [`Credential`] only finds the token (its absence is a 401 `unauthorized`, mapped by the
//! middleware); `Service::authenticate` decides what the token is. What the caller may do is
//! decided by `application::authorization`; the helpers on [`AppState`] ask it and turn a
//! refusal into a 403 `forbidden` (400, 404 for a read naming no or an unknown user).

use application::accounts::{ApiKey, Scope, User};
use application::authorization::{self, Acting, Denied, OwnerError};
use application::use_cases::sessions::{AccountsError, Principal};
use poem_openapi::SecurityScheme;
use poem_openapi::auth::{ApiKey as ApiKeyToken, Bearer};

use crate::AppState;
use crate::problem::{Code, Problem};

/// The session cookie's name.
pub(crate) const SESSION_COOKIE: &str = "tally_session";

/// A session token or service API key in `Authorization: Bearer …`.
#[derive(SecurityScheme)]
#[oai(rename = "bearerToken", ty = "bearer")]
pub(crate) struct BearerToken(Bearer);

/// A service API key (`tly_…`) in `X-Api-Key`.
#[derive(SecurityScheme)]
#[oai(
    rename = "apiKeyHeader",
    ty = "api_key",
    key_name = "X-Api-Key",
    key_in = "header"
)]
pub(crate) struct ApiKeyHeader(ApiKeyToken);

/// The session token in the `tally_session` cookie (HttpOnly, SameSite=Lax).
#[derive(SecurityScheme)]
#[oai(
    rename = "sessionCookie",
    ty = "api_key",
    key_name = "tally_session",
    key_in = "cookie"
)]
pub(crate) struct SessionCookie(ApiKeyToken);

/// Any of the accepted credentials, tried in this order.
#[derive(SecurityScheme)]
pub(crate) enum Credential {
    /// `Authorization: Bearer`.
    Bearer(BearerToken),
    /// `X-Api-Key`.
    ApiKey(ApiKeyHeader),
    /// The session cookie.
    Cookie(SessionCookie),
}

impl Credential {
    /// The presented token.
    pub(crate) fn token(&self) -> &str {
        match self {
            Credential::Bearer(b) => &b.0.token,
            Credential::ApiKey(k) => &k.0.key,
            Credential::Cookie(c) => &c.0.key,
        }
    }
}

/// A credential when the caller presents one: offers are public, and say more to a user.
#[derive(SecurityScheme)]
pub(crate) enum OptionalCredential {
    /// `Authorization: Bearer`.
    Bearer(BearerToken),
    /// `X-Api-Key`.
    ApiKey(ApiKeyHeader),
    /// The session cookie.
    Cookie(SessionCookie),
    /// No credential: the offers alone.
    #[oai(fallback)]
    Anonymous,
}

impl OptionalCredential {
    /// The presented token, if any.
    pub(crate) fn token(&self) -> Option<&str> {
        match self {
            OptionalCredential::Bearer(b) => Some(&b.0.token),
            OptionalCredential::ApiKey(k) => Some(&k.0.key),
            OptionalCredential::Cookie(c) => Some(&c.0.key),
            OptionalCredential::Anonymous => None,
        }
    }
}

impl AppState {
    /// Who presents `credential`.
    ///
    /// # Errors
    /// 401 `unauthorized` for an unknown, expired or revoked token.
    pub(crate) async fn principal(&self, credential: &Credential) -> Result<Principal, Problem> {
        self.ports
            .accounts
            .authenticate(credential.token())
            .await
            .map_err(|e| match e {
                AccountsError::Infra(infra) => infra.into(),
                _ => unauthorized(),
            })
    }

    /// The signed-in user acting on their own billing (every user endpoint is billing): a
    /// user's own credential or a customer-portal session.
    ///
    /// # Errors
    /// 401 without a valid credential; 403 for a service API key.
    pub(crate) async fn user(&self, credential: &Credential) -> Result<User, Problem> {
        authorization::billing_user(self.principal(credential).await?).map_err(denied)
    }

    /// A signed-in administrator.
    ///
    /// # Errors
    /// 401 without a valid credential; 403 for anyone else.
    pub(crate) async fn admin(&self, credential: &Credential) -> Result<User, Problem> {
        authorization::administrator(self.principal(credential).await?).map_err(denied)
    }

    /// A service API key carrying `scope`.
    ///
    /// # Errors
    /// 401 without a valid credential; 403 for a user or a key without the scope.
    pub(crate) async fn service_key(
        &self,
        credential: &Credential,
        scope: Scope,
    ) -> Result<ApiKey, Problem> {
        authorization::service_key(self.principal(credential).await?, scope).map_err(denied)
    }

    /// Whose data a read guarded by `scope` is about: the signed-in user's own, or, for an API
    /// key with `scope`, the user named by `?userId=` (decided by
    /// [`application::inbound::AccountsService::data_owner`]).
    ///
    /// # Errors
    /// 401; 403 for another user's data or a key without the scope; 400 when a key names no
    /// user; 404 `user_not_found`.
    pub(crate) async fn data_owner(
        &self,
        credential: &Credential,
        scope: Scope,
        user_id: Option<&str>,
    ) -> Result<User, Problem> {
        let principal = self.principal(credential).await?;
        self.ports
            .accounts
            .data_owner(principal, scope, user_id)
            .await
            .map_err(|e| match e {
                OwnerError::Denied(why) => denied(why),
                OwnerError::Infra(infra) => infra.into(),
            })
    }

    /// Whom a billing action or read guarded by `scope` (`billing:read`, `billing:write`) is
    /// for, and who acts: the caller's own account, or, for an API key with `scope`, the user
    /// named by `?userId=` (decided by [`application::inbound::AccountsService::acting_for`]).
    ///
    /// # Errors
    /// As [`AppState::data_owner`].
    pub(crate) async fn acting_for(
        &self,
        credential: &Credential,
        scope: Scope,
        user_id: Option<&str>,
    ) -> Result<Acting, Problem> {
        let principal = self.principal(credential).await?;
        self.principal_acting_for(principal, scope, user_id).await
    }

    /// [`AppState::acting_for`] for a caller already authenticated as `principal`.
    ///
    /// # Errors
    /// As [`AppState::data_owner`], but for the credential itself.
    pub(crate) async fn principal_acting_for(
        &self,
        principal: Principal,
        scope: Scope,
        user_id: Option<&str>,
    ) -> Result<Acting, Problem> {
        self.ports
            .accounts
            .acting_for(principal, scope, user_id)
            .await
            .map_err(|e| match e {
                OwnerError::Denied(why) => denied(why),
                OwnerError::Infra(infra) => infra.into(),
            })
    }

    /// The user a billing action or read guarded by `scope` is for (see
    /// [`AppState::acting_for`]).
    ///
    /// # Errors
    /// As [`AppState::data_owner`].
    pub(crate) async fn billing_user(
        &self,
        credential: &Credential,
        scope: Scope,
        user_id: Option<&str>,
    ) -> Result<User, Problem> {
        Ok(self.acting_for(credential, scope, user_id).await?.user)
    }

    /// Whose credits a read is about: the signed-in user's own, or, for an API key with
    /// `credits:read`, the user named by `?userId=`.
    ///
    /// # Errors
    /// As [`AppState::data_owner`].
    pub(crate) async fn credits_owner(
        &self,
        credential: &Credential,
        user_id: Option<&str>,
    ) -> Result<User, Problem> {
        self.data_owner(credential, Scope::CreditsRead, user_id)
            .await
    }

    /// The `Set-Cookie` value that stores a session token for `max_age_seconds`.
    pub(crate) fn session_cookie(&self, token: &str, max_age_seconds: i64) -> String {
        let secure = if self.settings.secure_cookies {
            "; Secure"
        } else {
            ""
        };
        format!(
            "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
            max_age_seconds.max(0)
        )
    }

    /// The `Set-Cookie` value that removes the session cookie.
    pub(crate) fn cleared_session_cookie(&self) -> String {
        self.session_cookie("", 0)
    }
}

/// The answer to a refusal of the authorization policy: 403 `forbidden`, 400 for a key that
/// names no user, 404 `user_not_found`.
pub(crate) fn denied(why: Denied) -> Problem {
    let forbidden = |detail: String| Problem::new(Code::Forbidden, detail);
    match why {
        Denied::UsersOnly => forbidden("this endpoint is for signed-in users, not API keys".into()),
        Denied::PortalBillingOnly => {
            forbidden("a customer-portal session may act only on its user's billing".into())
        }
        Denied::AdministratorsOnly => forbidden("this endpoint is for administrators".into()),
        Denied::MissingScope(scope) => forbidden(format!(
            "this endpoint needs an API key with scope {}",
            scope.code()
        )),
        Denied::EventsReadersOnly => forbidden(
            "the events feed is for administrators and API keys with scope events:read".into(),
        ),
        Denied::OthersData(scope) => forbidden(match scope {
            Scope::EntitlementsRead => "users may read only their own entitlements".into(),
            Scope::BillingRead | Scope::BillingWrite => {
                "users may read and manage only their own orders and subscriptions".into()
            }
            _ => "users may read only their own credits".into(),
        }),
        Denied::NoUserNamed => Problem::bad_input("an API key must name the user with ?userId="),
        Denied::UserNotFound => Problem::new(Code::UserNotFound, "no such user"),
    }
}

/// 401 `unauthorized`.
pub(crate) fn unauthorized() -> Problem {
    Problem::new(
        Code::Unauthorized,
        "sign in, or present a valid session token or API key",
    )
}
