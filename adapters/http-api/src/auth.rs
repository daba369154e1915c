//! Who is calling: a session (the `tally_session` cookie or `Authorization: Bearer <token>`) or
//! a service API key (`Authorization: Bearer tly_…` or `X-Api-Key: tly_…`).
//!
//! [`Credential`] only finds the token (its absence is a 401 `unauthorized`, mapped by the
//! middleware); `Service::authenticate` decides what the token is. What the caller may do is
//! decided by `application::authorization`; the helpers on [`AppState`] ask it and turn a
//! refusal into a 403 `forbidden` (400, 404 for a read naming no or an unknown user).

use application::accounts::{ApiKey, Scope, User};
use application::authorization::{self, Acting, Denied, Owned, OwnerError};
use application::use_cases::sessions::{AccountsError, Principal};
use domain::AccountId;
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

    /// An API key carrying `scope` for a call about one account (a spend, a reservation),
    /// bound to one or not: the account then comes from
    /// [`application::authorization::key_account`].
    ///
    /// # Errors
    /// 401 without a valid credential; 403 for a user or a key without the scope.
    pub(crate) async fn account_key(
        &self,
        credential: &Credential,
        scope: Scope,
    ) -> Result<ApiKey, Problem> {
        authorization::account_key(self.principal(credential).await?, scope).map_err(denied)
    }

    /// Whom a request guarded by `scope` about one account is for, and that account: the
    /// caller's own (or an API key's with `scope`, for the user named by `?userId=`), the
    /// account `accountId` names when the caller reaches it and the user belongs to it, else the
    /// user's personal account (a bound key's own account; see
    /// [`application::authorization::Acting::account`]).
    ///
    /// # Errors
    /// 401; 403 for another user's data, a key without the scope or an account out of the
    /// caller's reach; 400 when a key names no user; 404 `user_not_found`, `account_not_found`.
    pub(crate) async fn acting_in(
        &self,
        credential: &Credential,
        scope: Scope,
        user_id: Option<&str>,
        account_id: Option<&str>,
    ) -> Result<(Acting, AccountId), Problem> {
        let acting = self.acting_for(credential, scope, user_id).await?;
        let named = account_id.map(crate::teams::team_id).transpose()?;
        let account = acting.account(named).map_err(denied)?;
        let account = self.account_for(&acting.user.id, account).await?;
        Ok((acting, account))
    }

    /// Whether the object a request names by its id is within the reach of `acting` (decided by
    /// [`application::inbound::AccountsService::within_reach`]); an unknown object passes, for
    /// the use case to answer not found. Whether the user may act on it is the use case's to say.
    ///
    /// # Errors
    /// 403 for an object of an account out of reach (the caller may answer it as not found).
    pub(crate) async fn within_reach(
        &self,
        acting: &Acting,
        owned: Owned<'_>,
    ) -> Result<(), OwnerError> {
        self.ports.accounts.within_reach(acting, owned).await
    }

    /// Whom a billing action or read guarded by `scope` is for, and who acts: the caller's own
    /// account, or, for an API key with `scope`, the user named by `?userId=` (decided by
    /// [`application::inbound::AccountsService::acting_for`]). Which accounts the request
    /// reaches is for its caller to settle ([`AppState::acting_in`], [`AppState::within_reach`]).
    ///
    /// # Errors
    /// As [`AppState::acting_in`].
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
    /// As [`AppState::acting_in`], but for the credential itself.
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
            .map_err(owner_problem)
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
        Denied::KeyBoundTo(account) => forbidden(format!(
            "this API key acts only for account {account}: it reads and charges that account \
             alone, for its members, and makes no app-wide call"
        )),
    }
}

/// The problem for a request whose acting user could not be settled.
pub(crate) fn owner_problem(e: OwnerError) -> Problem {
    match e {
        OwnerError::Denied(why) => denied(why),
        OwnerError::Infra(infra) => infra.into(),
    }
}

/// 401 `unauthorized`.
pub(crate) fn unauthorized() -> Problem {
    Problem::new(
        Code::Unauthorized,
        "sign in, or present a valid session token or API key",
    )
}
