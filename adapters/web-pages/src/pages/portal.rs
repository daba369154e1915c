//! `GET /portal/{token}`: a customer-portal link a host application made for one of its users
//! (`POST /api/portal-sessions`). Opened once, it becomes a short browser session restricted to
//! that user's billing (the session cookie), and the reader lands on the dashboard, in the
//! language the host asked for. A used or expired link is a 410 page saying so, never the
//! sign-in page.

use std::sync::Arc;

use application::use_cases::portal::OpenPortalError;
use poem::Request;

use crate::cookies::{self, SESSION_COOKIE};
use crate::i18n::Lang;
use crate::state::{PageError, PageResult, PageState, Visitor, append_cookie, redirect};

/// `GET /portal/{token}`.
pub(crate) async fn open(state: Arc<PageState>, v: Visitor, request: Request) -> PageResult {
    let token = request.raw_path_param("token").unwrap_or_default();
    let opened = match state.ports.accounts.open_portal(token).await {
        Ok(opened) => opened,
        Err(OpenPortalError::Gone) => return Err(PageError::PortalLinkGone),
        Err(OpenPortalError::Infra(infra)) => return Err(infra.into()),
    };
    let now = state.ports.accounts.now();
    let max_age_seconds = (opened.session.expires_at.unix_millis() - now.unix_millis()) / 1000;
    let lang = opened.session.locale.as_deref().and_then(Lang::from_tag);
    let target = match lang {
        Some(lang) => format!("/dashboard?lang={}", lang.tag()),
        None => "/dashboard".to_owned(),
    };
    let mut response = redirect(&target);
    let cookie = cookies::set(
        SESSION_COOKIE,
        &opened.token,
        max_age_seconds,
        v.secure_cookies(),
    );
    append_cookie(&mut response, &cookie);
    Ok(response)
}
