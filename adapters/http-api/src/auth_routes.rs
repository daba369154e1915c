//! Accounts: register, sign in, sign out and who am I. A session works as the HttpOnly
//! `tally_session` cookie (set here) or as `Authorization: Bearer <token>`.

use std::sync::Arc;

use application::accounts::{AccountError, User};
use application::sign_up::SignUpLimit;
use application::use_cases::sessions::{AccountsError, SignedIn};
use poem::Request;
use poem::web::headers::HeaderMapExt;
use poem::web::headers::authorization::{Authorization, Bearer};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::{Credential, SESSION_COOKIE};
use crate::dto::timestamp;
use crate::problem::{Code, Problem, api_response};
use crate::rate_limit::Action;

/// E-mail address and password.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct CredentialsBody {
    /// The e-mail address.
    #[oai(validator(max_length = 254))]
    pub email: String,
    /// The password (8 to 256 characters).
    #[oai(validator(max_length = 1024))]
    pub password: String,
}

/// A user account.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct UserView {
    /// Id.
    pub id: String,
    /// E-mail address.
    pub email: String,
    /// `user` or `admin`.
    pub role: String,
    /// When the account was made.
    pub created_at: String,
}

impl From<&User> for UserView {
    fn from(u: &User) -> Self {
        Self {
            id: u.id.to_string(),
            email: u.email.to_string(),
            role: u.role.code().to_owned(),
            created_at: timestamp(u.created_at),
        }
    }
}

/// A new session.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct SessionView {
    /// The signed-in user.
    pub user: UserView,
    /// The session token (also set as the `tally_session` cookie); send it as
    /// `Authorization: Bearer <token>` from non-browser clients.
    pub token: String,
    /// When the session ends.
    pub expires_at: String,
}

api_response! {
    /// `POST /api/auth/register`.
    pub enum RegisterResponse {
        /// The account exists and is signed in.
        201 Created(
            Json<SessionView>,
            /// The session cookie.
            #[oai(header = "Set-Cookie")] String
        ),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `email_taken`.
        409 Conflict,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `validation_failed`: the e-mail address or password is invalid.
        422 Unprocessable,
    }
    rate_limited:
        /// `rate_limited`: too many sign-ups from this client or in this e-mail domain.
        TooManyRequests
}

api_response! {
    /// `POST /api/auth/login`.
    pub enum LoginResponse {
        /// Signed in.
        200 Ok(
            Json<SessionView>,
            /// The session cookie.
            #[oai(header = "Set-Cookie")] String
        ),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `invalid_credentials`: wrong e-mail address or password.
        401 Unauthorized,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
    }
    rate_limited:
        /// `rate_limited`: too many sign-in attempts from this client.
        TooManyRequests
}

api_response! {
    /// `POST /api/auth/logout`.
    pub enum LogoutResponse {
        /// Signed out (also when no session was given); the cookie is cleared.
        204 SignedOut(
            /// Clears the session cookie.
            #[oai(header = "Set-Cookie")] String
        ),
    }
    problems {}
}

api_response! {
    /// `GET /api/auth/me`.
    pub enum MeResponse {
        /// The signed-in user.
        200 Ok(Json<UserView>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: an API key is not a user.
        403 Forbidden,
    }
}

/// The account endpoints.
pub(crate) struct AuthApi {
    state: Arc<AppState>,
}

impl AuthApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the account endpoints.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// Accounts and sessions.
    Auth,
}

#[OpenApi(tag = "Tag::Auth")]
impl AuthApi {
    /// Create an account and sign it in (sets the session cookie).
    #[oai(path = "/api/auth/register", method = "post")]
    async fn register(&self, request: &Request, body: Json<CredentialsBody>) -> RegisterResponse {
        let result = async {
            let CredentialsBody { email, password } = body.0;
            let client = self.state.limits.client(request);
            self.state
                .ports
                .accounts
                .register(&email, password, application::accounts::Role::User, &client)
                .await
                .map_err(accounts_problem)
        };
        match result.await {
            Ok(signed_in) => {
                let (view, cookie) = self.session(signed_in);
                RegisterResponse::Created(Json(view), cookie)
            }
            Err(problem) => problem.into(),
        }
    }

    /// Sign in with e-mail address and password (sets the session cookie).
    #[oai(path = "/api/auth/login", method = "post")]
    async fn login(&self, request: &Request, body: Json<CredentialsBody>) -> LoginResponse {
        let result = async {
            self.state.limits.check(Action::SignIn, request)?;
            let CredentialsBody { email, password } = body.0;
            self.state
                .ports
                .accounts
                .sign_in(&email, password)
                .await
                .map_err(accounts_problem)
        };
        match result.await {
            Ok(signed_in) => {
                let (view, cookie) = self.session(signed_in);
                LoginResponse::Ok(Json(view), cookie)
            }
            Err(problem) => problem.into(),
        }
    }

    /// Sign out: the session token (cookie or bearer) stops working and the cookie is cleared.
    #[oai(path = "/api/auth/logout", method = "post")]
    async fn logout(&self, request: &Request) -> LogoutResponse {
        if let Some(token) = session_token(request)
            && let Err(e) = self.state.ports.accounts.sign_out(&token).await
        {
            return match e {
                AccountsError::Infra(infra) => Problem::from(infra).into(),
                other => Problem::internal(&other).into(),
            };
        }
        LogoutResponse::SignedOut(self.state.cleared_session_cookie())
    }

    /// The signed-in user.
    #[oai(path = "/api/auth/me", method = "get")]
    async fn me(&self, credential: Credential) -> MeResponse {
        match self.state.user(&credential).await {
            Ok(user) => MeResponse::Ok(Json((&user).into())),
            Err(problem) => problem.into(),
        }
    }
}

impl AuthApi {
    fn session(&self, signed_in: SignedIn) -> (SessionView, String) {
        let now = self.state.ports.accounts.now();
        let max_age_seconds = (signed_in.expires_at.unix_millis() - now.unix_millis()) / 1000;
        let cookie = self.state.session_cookie(&signed_in.token, max_age_seconds);
        let view = SessionView {
            user: UserView::from(&signed_in.user),
            token: signed_in.token,
            expires_at: timestamp(signed_in.expires_at),
        };
        (view, cookie)
    }
}

/// The session token of a sign-out: the bearer token, else the cookie.
fn session_token(request: &Request) -> Option<String> {
    if let Some(auth) = request.headers().typed_get::<Authorization<Bearer>>() {
        return Some(auth.token().to_owned());
    }
    request
        .cookie()
        .get(SESSION_COOKIE)
        .map(|c| c.value_str().to_owned())
        .filter(|v| !v.is_empty())
}

fn accounts_problem(e: AccountsError) -> Problem {
    match e {
        AccountsError::Invalid(invalid) => {
            let field = match invalid {
                AccountError::Email => "email",
                AccountError::Password => "password",
                AccountError::Scope(_) => "scopes",
            };
            Problem::invalid_field(field, invalid.to_string())
        }
        AccountsError::EmailTaken => Problem::new(Code::EmailTaken, e.to_string()),
        AccountsError::WrongCredentials => Problem::new(Code::InvalidCredentials, e.to_string()),
        AccountsError::Unauthenticated => crate::auth::unauthorized(),
        AccountsError::RateLimited(refused) => {
            let detail = match refused.limit {
                SignUpLimit::Address => "too many sign-ups from this client",
                SignUpLimit::Domain => "too many sign-ups in this e-mail domain",
            };
            let seconds = refused.retry_after_seconds;
            Problem::rate_limited_because(seconds, format!("{detail}; retry in {seconds} s"))
        }
        AccountsError::Infra(infra) => infra.into(),
    }
}
