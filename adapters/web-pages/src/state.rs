//! What every page handler shares: the inbound ports and settings ([`PageState`]), who is
//! reading ([`Visitor`]: language, user, CSRF secret), the error pages ([`PageError`]), and the
//! helpers that read a CSRF-checked form and finish a response with its cookies.

use std::sync::Arc;

use application::accounts::{Role, User};
use application::inbound::Ports;
use application::use_cases::InfraError;
use application::use_cases::sessions::{AccountsError, Principal};
use domain::{AccountId, ReturnUrl};
use poem::http::{StatusCode, header};
use poem::{Request, Response};
use serde::de::DeserializeOwned;

use crate::cookies::{self, SESSION_COOKIE};
use crate::csrf::{self, CSRF_COOKIE, CSRF_COOKIE_MAX_AGE_SECONDS, CSRF_FIELD};
use crate::i18n::{self, LANG_COOKIE, Lang, LangSource};
use crate::throttle::Throttle;
use crate::{Branding, PageSettings};

/// The largest form body read, in bytes (the admin plan form is the biggest, a few KiB).
const MAX_FORM_BYTES: usize = 64 * 1024;
/// How long the language cookie lives.
const LANG_COOKIE_MAX_AGE_SECONDS: i64 = 365 * 24 * 3600;
/// The longest query string looked at.
const MAX_QUERY_CHARS: usize = 2_048;

/// The inbound ports the pages call and the page settings.
pub(crate) struct PageState {
    /// The use cases, one port per area.
    pub(crate) ports: Ports,
    pub(crate) settings: PageSettings,
    /// Failed sign-ins per e-mail address.
    pub(crate) sign_in_throttle: Throttle,
    /// The operator's branding.
    pub(crate) branding: Arc<Branding>,
}

/// Who is reading the page, in which language, with which CSRF secret.
#[derive(Debug, Clone)]
pub(crate) struct Visitor {
    /// The page language.
    pub(crate) lang: Lang,
    /// The signed-in user, if any.
    pub(crate) user: Option<User>,
    session_token: Option<String>,
    csrf_secret: String,
    csrf_secret_is_new: bool,
    lang_source: LangSource,
    path: String,
    query: Vec<(String, String)>,
    secure_cookies: bool,
    /// Show the "sandbox, no real money" notice.
    pub(crate) sandbox_notice: bool,
    /// The operator's branding.
    pub(crate) branding: Arc<Branding>,
    /// In a customer-portal session: where "Back to the app" leads. Such a visitor's user may
    /// act only on their billing.
    pub(crate) portal_return: Option<ReturnUrl>,
    /// In a customer-portal session: the one account it acts on (the user's own, or a team).
    pub(crate) portal_account: Option<AccountId>,
}

impl Visitor {
    /// The team a customer-portal session was opened for, if it was opened for a team's billing.
    pub(crate) fn portal_team(&self) -> Option<&AccountId> {
        self.portal_account.as_ref().filter(|a| a.is_team())
    }

    /// Whether this visitor may act on `account`: a customer-portal session only on the one
    /// account it was opened for (the use cases check the user's role in it); anyone else is
    /// let through to them.
    ///
    /// # Errors
    /// [`PageError::NotFound`] for a portal session and any other account.
    pub(crate) fn within_portal(&self, account: &AccountId) -> Result<(), PageError> {
        match &self.portal_account {
            Some(only) if only != account => Err(PageError::NotFound),
            _ => Ok(()),
        }
    }

    /// The catalog text for `key` in the page language.
    pub(crate) fn t<'k>(&self, key: &'k str) -> &'k str {
        self.lang.t(key)
    }

    /// The catalog text for `key` with its `{placeholders}` filled.
    pub(crate) fn tf(&self, key: &str, args: &[(&str, &str)]) -> String {
        self.lang.tf(key, args)
    }

    /// The CSRF token every form on this page carries.
    pub(crate) fn csrf_token(&self) -> String {
        csrf::token(&self.csrf_secret, self.session_token.as_deref())
    }

    /// Whether the signed-in user is an administrator.
    pub(crate) fn is_admin(&self) -> bool {
        self.user.as_ref().is_some_and(|u| u.role == Role::Admin)
    }

    /// The session token, for signing out.
    pub(crate) fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref()
    }

    /// Query parameter `name`.
    pub(crate) fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A positive page number from query parameter `name` (1 when absent or unreadable).
    pub(crate) fn page_number(&self, name: &str) -> i64 {
        self.query(name)
            .and_then(|p| p.parse::<i64>().ok())
            .filter(|p| (1..=100_000).contains(p))
            .unwrap_or(1)
    }

    /// This page's path and query, without `lang` (where sign-in sends the reader back to).
    pub(crate) fn here(&self) -> String {
        with_query(&self.path, self.query.iter().filter(|(k, _)| k != "lang"))
    }

    /// This page in another language.
    pub(crate) fn in_lang(&self, lang: Lang) -> String {
        let lang_pair = ("lang".to_owned(), lang.tag().to_owned());
        let pairs = self
            .query
            .iter()
            .filter(|(k, _)| k != "lang")
            .chain(std::iter::once(&lang_pair));
        with_query(&self.path, pairs)
    }

    /// Whether the request's path is `path`.
    pub(crate) fn is_at(&self, path: &str) -> bool {
        self.path == path
    }

    /// A signed-out visitor, for error pages rendered without a request's cookies.
    pub(crate) fn anonymous(lang: Lang, settings: &PageSettings, branding: &Arc<Branding>) -> Self {
        Visitor {
            lang,
            user: None,
            session_token: None,
            csrf_secret: String::new(),
            csrf_secret_is_new: false,
            lang_source: LangSource::Other,
            path: "/".into(),
            query: Vec::new(),
            secure_cookies: settings.secure_cookies,
            sandbox_notice: settings.sandbox_notice,
            branding: branding.clone(),
            portal_return: None,
            portal_account: None,
        }
    }

    /// Whether cookies are marked `Secure`.
    pub(crate) fn secure_cookies(&self) -> bool {
        self.secure_cookies
    }
}

/// `path?k=v&…`, with the pairs URL-encoded.
pub(crate) fn with_query<'a>(
    path: &str,
    pairs: impl Iterator<Item = &'a (String, String)>,
) -> String {
    let pairs: Vec<&(String, String)> = pairs.collect();
    if pairs.is_empty() {
        return path.to_owned();
    }
    let query = serde_urlencoded::to_string(pairs).unwrap_or_default();
    format!("{path}?{query}")
}

/// Why a page could not be shown; each becomes an error page with its status.
#[derive(Debug)]
pub(crate) enum PageError {
    /// Not signed in: a `303` to this sign-in page, which comes back afterwards.
    SignInRequired(String),
    /// 400: a form or query that cannot be read.
    BadRequest,
    /// 403: not allowed (non-admins on `/admin/pricing`).
    Forbidden,
    /// 403: the form's CSRF token did not verify.
    CsrfRejected,
    /// 404.
    NotFound,
    /// 410: a customer-portal link that was used or has expired.
    PortalLinkGone,
    /// 403: a checkout return link that is forged, expired or for another order.
    ReturnLinkInvalid,
    /// 503: the database is unavailable.
    Unavailable,
    /// 500: anything else (the cause was logged where it happened).
    Unexpected,
}

impl From<InfraError> for PageError {
    fn from(e: InfraError) -> Self {
        match e {
            InfraError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "page: database unavailable");
                PageError::Unavailable
            }
            InfraError::Unexpected(cause) => {
                tracing::error!(error = ?cause, "page: unexpected error");
                PageError::Unexpected
            }
        }
    }
}

impl PageError {
    /// The status and the catalog keys of the title and message.
    pub(crate) fn describe(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            PageError::SignInRequired(_) => (
                StatusCode::UNAUTHORIZED,
                "layout.sign_in",
                "auth.sign_in_lead",
            ),
            PageError::BadRequest => (
                StatusCode::BAD_REQUEST,
                "error.bad_request",
                "error.bad_request_text",
            ),
            PageError::Forbidden => (
                StatusCode::FORBIDDEN,
                "error.forbidden",
                "error.forbidden_text",
            ),
            PageError::CsrfRejected => (StatusCode::FORBIDDEN, "error.csrf", "error.csrf_text"),
            PageError::NotFound => (
                StatusCode::NOT_FOUND,
                "error.not_found",
                "error.not_found_text",
            ),
            PageError::PortalLinkGone => (StatusCode::GONE, "portal.gone", "portal.gone_text"),
            PageError::ReturnLinkInvalid => (
                StatusCode::FORBIDDEN,
                "payment.return_invalid",
                "payment.return_invalid_text",
            ),
            PageError::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "error.unavailable",
                "error.unavailable_text",
            ),
            PageError::Unexpected => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "error.unexpected",
                "error.unexpected_text",
            ),
        }
    }
}

/// What a page handler returns.
pub(crate) type PageResult = Result<Response, PageError>;

impl PageState {
    /// Who is reading: language, user (from the shared session cookie), CSRF secret.
    ///
    /// # Errors
    /// The database is unavailable.
    pub(crate) async fn visitor(&self, request: &Request) -> Result<Visitor, (Lang, PageError)> {
        let (lang, lang_source) = i18n::negotiate(request);
        let cookie_token = cookies::get(request, SESSION_COOKIE);
        let (user, portal) = match cookie_token {
            Some(token) => match self.ports.accounts.authenticate(token).await {
                Ok(Principal::User(user)) => (Some(user), None),
                Ok(Principal::Portal(portal)) => {
                    (Some(portal.user), Some((portal.return_url, portal.account)))
                }
                Ok(Principal::Service(_)) => (None, None),
                Err(AccountsError::Infra(e)) => return Err((lang, e.into())),
                Err(_) => (None, None),
            },
            None => (None, None),
        };
        let (portal_return, portal_account) = portal.unzip();
        let (csrf_secret, csrf_secret_is_new) =
            match cookies::get(request, CSRF_COOKIE).filter(|s| csrf::is_plausible_secret(s)) {
                Some(secret) => (secret.to_owned(), false),
                None => (self.ports.accounts.new_secret(), true),
            };
        let query = request.uri().query().unwrap_or_default();
        let query = if query.len() > MAX_QUERY_CHARS {
            ""
        } else {
            query
        };
        Ok(Visitor {
            lang,
            session_token: user.as_ref().and(cookie_token.map(str::to_owned)),
            user,
            csrf_secret,
            csrf_secret_is_new,
            lang_source,
            path: request.uri().path().to_owned(),
            query: serde_urlencoded::from_str(query).unwrap_or_default(),
            secure_cookies: self.settings.secure_cookies,
            sandbox_notice: self.settings.sandbox_notice,
            branding: self.branding.clone(),
            portal_return,
            portal_account,
        })
    }
}

/// Read a form body, check its CSRF token, and parse it into `T`.
///
/// # Errors
/// [`PageError::CsrfRejected`] for a missing or wrong token, [`PageError::BadRequest`] for a
/// body that is too big or not a form of `T`.
pub(crate) async fn read_form<T: DeserializeOwned>(
    visitor: &Visitor,
    request: &mut Request,
) -> Result<T, PageError> {
    let bytes = request
        .take_body()
        .into_bytes_limit(MAX_FORM_BYTES)
        .await
        .map_err(|_| PageError::BadRequest)?;
    let fields: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&bytes).map_err(|_| PageError::BadRequest)?;
    let presented = fields
        .iter()
        .find(|(k, _)| k == CSRF_FIELD)
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    if visitor.csrf_secret_is_new
        || !csrf::verify(
            &visitor.csrf_secret,
            visitor.session_token.as_deref(),
            presented,
        )
    {
        return Err(PageError::CsrfRejected);
    }
    serde_urlencoded::from_bytes(&bytes).map_err(|_| PageError::BadRequest)
}

/// Add the visitor's cookies (a new CSRF secret, a language chosen by `?lang=`) and keep
/// personalised pages out of shared caches.
pub(crate) fn finish(visitor: &Visitor, mut response: Response) -> Response {
    let secure = visitor.secure_cookies;
    if visitor.csrf_secret_is_new && !visitor.csrf_secret.is_empty() {
        let cookie = cookies::set(
            CSRF_COOKIE,
            &visitor.csrf_secret,
            CSRF_COOKIE_MAX_AGE_SECONDS,
            secure,
        );
        append_cookie(&mut response, &cookie);
    }
    if visitor.lang_source == LangSource::Query {
        let cookie = cookies::set(
            LANG_COOKIE,
            visitor.lang.tag(),
            LANG_COOKIE_MAX_AGE_SECONDS,
            secure,
        );
        append_cookie(&mut response, &cookie);
    }
    if !response.headers().contains_key(header::CACHE_CONTROL) {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
    }
    response
}

/// Append a `Set-Cookie` header.
pub(crate) fn append_cookie(response: &mut Response, cookie: &str) {
    if let Ok(value) = header::HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// A `303 See Other` to `location`.
pub(crate) fn redirect(location: &str) -> Response {
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, location)
        .finish()
}

/// Where sign-in may send the reader back to: a path on this site, else the dashboard.
pub(crate) fn safe_next(raw: Option<&str>) -> String {
    match raw {
        Some(next)
            if next.starts_with('/')
                && !next.starts_with("//")
                && !next.starts_with("/\\")
                && next.len() <= 512
                && !next.chars().any(|c| c.is_control() || c == '\\') =>
        {
            next.to_owned()
        }
        _ => "/dashboard".to_owned(),
    }
}

/// The sign-in page that comes back to `here` afterwards.
pub(crate) fn sign_in_then(here: &str) -> String {
    let pair = [("next".to_owned(), here.to_owned())];
    with_query("/signin", pair.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(
            safe_next(Some("/pricing?tab=credits")),
            "/pricing?tab=credits"
        );
        for bad in [
            "https://evil.example",
            "//evil.example",
            "/\\evil",
            "javascript:x",
        ] {
            assert_eq!(safe_next(Some(bad)), "/dashboard", "{bad}");
        }
        assert_eq!(safe_next(None), "/dashboard");
    }

    #[test]
    fn sign_in_links_encode_where_to_come_back() {
        assert_eq!(
            sign_in_then("/pricing?tab=credits"),
            "/signin?next=%2Fpricing%3Ftab%3Dcredits"
        );
    }
}
