//! `/signin`, `/signup` and `/signout`: the API's accounts, through forms.
//!
//! A successful sign-in or sign-up sets the same `tally_session` cookie the JSON API uses and
//! sends the reader to `next` (a path on this site only) or the dashboard.

use std::sync::Arc;

use application::accounts::{AccountError, Role};
use application::sign_up::ClientAddress;
use application::use_cases::sessions::{AccountsError, SignedIn};
use maud::{Markup, html};
use poem::http::{StatusCode, header};
use poem::{Request, Response};
use serde::Deserialize;

use crate::cookies::{self, SESSION_COOKIE};
use crate::layout::{self, Nav, csrf_field};
use crate::state::{
    PageError, PageResult, PageState, Visitor, append_cookie, read_form, redirect, safe_next,
    with_query,
};

/// The sign-in and sign-up form.
#[derive(Debug, Deserialize)]
pub(crate) struct Credentials {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: Option<String>,
}

/// Which form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SignIn,
    SignUp,
}

/// What to show above and beside the fields after a failed attempt.
#[derive(Debug, Default)]
struct Problems {
    form: Option<&'static str>,
    email: Option<&'static str>,
    password: Option<&'static str>,
}

/// `GET /signin`.
pub(crate) async fn sign_in_form(
    _state: Arc<PageState>,
    v: Visitor,
    _request: Request,
) -> PageResult {
    Ok(empty_form(&v, Kind::SignIn))
}

/// `GET /signup`.
pub(crate) async fn sign_up_form(
    _state: Arc<PageState>,
    v: Visitor,
    _request: Request,
) -> PageResult {
    Ok(empty_form(&v, Kind::SignUp))
}

/// The blank form of `kind`, or straight on to `next` for a visitor already signed in.
fn empty_form(v: &Visitor, kind: Kind) -> Response {
    let next = safe_next(v.query("next"));
    if v.user.is_some() {
        return redirect(&next);
    }
    render(v, kind, "", &next, &Problems::default(), StatusCode::OK)
}

/// `POST /signin`.
pub(crate) async fn sign_in(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: Credentials = read_form(&v, &mut request).await?;
    let next = safe_next(form.next.as_deref());
    let key = form.email.trim().to_lowercase();
    let now = state.ports.accounts.now();
    if !state.sign_in_throttle.allows(&key, now) {
        let problems = Problems {
            form: Some("auth.throttled"),
            ..Problems::default()
        };
        return Ok(render(
            &v,
            Kind::SignIn,
            &form.email,
            &next,
            &problems,
            StatusCode::TOO_MANY_REQUESTS,
        ));
    }
    match state
        .ports
        .accounts
        .sign_in(&form.email, form.password)
        .await
    {
        Ok(signed_in) => {
            state.sign_in_throttle.clear(&key);
            Ok(signed_in_response(&state, &signed_in, &next))
        }
        Err(AccountsError::Infra(e)) => Err(e.into()),
        Err(_) => {
            state.sign_in_throttle.record_failure(&key, now);
            let problems = Problems {
                form: Some("auth.wrong_credentials"),
                ..Problems::default()
            };
            Ok(render(
                &v,
                Kind::SignIn,
                &form.email,
                &next,
                &problems,
                StatusCode::UNAUTHORIZED,
            ))
        }
    }
}

/// `POST /signup`: under the service's sign-up policy, the same as the JSON API's (a sign-up
/// over its rate limit is a 429 page saying when to try again, with `Retry-After`).
pub(crate) async fn sign_up(state: Arc<PageState>, v: Visitor, mut request: Request) -> PageResult {
    let form: Credentials = read_form(&v, &mut request).await?;
    let next = safe_next(form.next.as_deref());
    let client = client_address(&state, &request);
    let error = match state
        .ports
        .accounts
        .register(&form.email, form.password, Role::User, &client)
        .await
    {
        Ok(signed_in) => return Ok(signed_in_response(&state, &signed_in, &next)),
        Err(AccountsError::Infra(e)) => return Err(e.into()),
        Err(error) => error,
    };
    let (problems, status) = sign_up_problems(&error);
    let mut response = render(&v, Kind::SignUp, &form.email, &next, &problems, status);
    if let AccountsError::RateLimited(refused) = error
        && let Ok(value) = refused.retry_after_seconds.to_string().parse()
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    Ok(response)
}

/// What the sign-up form says about a refused sign-up, and its status.
fn sign_up_problems(error: &AccountsError) -> (Problems, StatusCode) {
    let problems = |form, email, password| Problems {
        form,
        email,
        password,
    };
    match error {
        AccountsError::RateLimited(_) => (
            problems(Some("auth.sign_up_throttled"), None, None),
            StatusCode::TOO_MANY_REQUESTS,
        ),
        AccountsError::Invalid(AccountError::Password) => (
            problems(None, None, Some("auth.password_rule")),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        AccountsError::EmailTaken => (
            problems(None, Some("auth.email_taken"), None),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        _ => (
            problems(None, Some("auth.email_invalid"), None),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    }
}

/// Who is signing up: the peer address, or the last `X-Forwarded-For` entry when the operator
/// said a proxy sets it (as the JSON API decides, so both count the same client).
fn client_address(state: &PageState, request: &Request) -> ClientAddress {
    let forwarded = request
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok());
    let remote = request.remote_addr();
    let peer = remote
        .as_socket_addr()
        .map_or_else(|| remote.to_string(), |addr| addr.ip().to_string());
    ClientAddress::from_request(&peer, forwarded, state.settings.trust_forwarded_for)
}

/// `POST /signout`: the session stops working and its cookie is removed.
pub(crate) async fn sign_out(
    state: Arc<PageState>,
    v: Visitor,
    mut request: Request,
) -> PageResult {
    let _: serde::de::IgnoredAny = read_form(&v, &mut request).await?;
    if let Some(token) = v.session_token() {
        state
            .ports
            .accounts
            .sign_out(token)
            .await
            .map_err(|e| match e {
                AccountsError::Infra(infra) => PageError::from(infra),
                _ => PageError::Unexpected,
            })?;
    }
    let mut response = redirect("/");
    let cleared = cookies::set(SESSION_COOKIE, "", 0, state.settings.secure_cookies);
    append_cookie(&mut response, &cleared);
    Ok(response)
}

fn signed_in_response(state: &PageState, signed_in: &SignedIn, next: &str) -> Response {
    let now = state.ports.accounts.now();
    let max_age_seconds = (signed_in.expires_at.unix_millis() - now.unix_millis()) / 1000;
    let cookie = cookies::set(
        SESSION_COOKIE,
        &signed_in.token,
        max_age_seconds,
        state.settings.secure_cookies,
    );
    let mut response = redirect(next);
    append_cookie(&mut response, &cookie);
    response
}

fn render(
    v: &Visitor,
    kind: Kind,
    email: &str,
    next: &str,
    problems: &Problems,
    status: StatusCode,
) -> Response {
    let (title, action, submit) = match kind {
        Kind::SignIn => ("auth.sign_in_title", "/signin", "auth.sign_in_submit"),
        Kind::SignUp => ("auth.sign_up_title", "/signup", "auth.sign_up_submit"),
    };
    let lead = match kind {
        Kind::SignIn => "auth.sign_in_lead",
        Kind::SignUp => "auth.sign_up_lead",
    };
    let body = html! {
        section.auth-card.card {
            h1 { (v.t(title)) }
            p.muted { (v.t(lead)) }
            @if let Some(key) = problems.form {
                div.alert.alert-danger role="alert" { (v.t(key)) }
            }
            form.stack method="post" action=(action) novalidate {
                (csrf_field(v))
                input type="hidden" name="next" value=(next);
                (field(v, "email", "email", "auth.email", email, problems.email, kind))
                (field(v, "password", "password", "auth.password", "", problems.password, kind))
                button.btn.btn-primary.btn-block type="submit" { (v.t(submit)) }
            }
            (switch_link(v, kind, next))
        }
    };
    layout::page(v, status, v.t(title), Nav::Other, body)
}

fn field(
    v: &Visitor,
    name: &str,
    input_type: &str,
    label: &str,
    value: &str,
    error: Option<&str>,
    kind: Kind,
) -> Markup {
    let id = format!("f-{name}");
    let error_id = format!("{id}-error");
    let autocomplete = match (name, kind) {
        ("email", _) => "email",
        (_, Kind::SignIn) => "current-password",
        (_, Kind::SignUp) => "new-password",
    };
    html! {
        div.field.has-error[error.is_some()] {
            label for=(id) { (v.t(label)) }
            input #(id) type=(input_type) name=(name) value=(value) required
                autocomplete=(autocomplete)
                minlength=[(input_type == "password").then_some("8")]
                aria-invalid=[error.map(|_| "true")]
                aria-describedby=[error.map(|_| error_id.as_str())];
            @if input_type == "password" && kind == Kind::SignUp && error.is_none() {
                p.hint { (v.t("auth.password_rule")) }
            }
            @if let Some(key) = error {
                p.field-error #(error_id) { (v.t(key)) }
            }
        }
    }
}

fn switch_link(v: &Visitor, kind: Kind, next: &str) -> Markup {
    let pair = [("next".to_owned(), next.to_owned())];
    let (question, link, path) = match kind {
        Kind::SignIn => ("auth.no_account", "auth.sign_up_link", "/signup"),
        Kind::SignUp => ("auth.have_account", "auth.sign_in_link", "/signin"),
    };
    html! {
        p.auth-switch {
            (v.t(question)) " "
            a href=(with_query(path, pair.iter())) { (v.t(link)) }
        }
    }
}
