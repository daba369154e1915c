//! `POST /api/portal-sessions`: a host application's backend (an API key with `billing:write`)
//! asks for a single-use link to Tally's customer portal for one of its users. The link opens
//! once, within five minutes, into a 30-minute browser session restricted to that user's
//! billing (decided by `application::authorization`), with a "Back to the app" link; with
//! `accountId`, to the billing of a team the user manages.

use std::sync::Arc;

use application::use_cases::portal::{CreatePortalSession, PortalError};
use poem::Request;
use poem::http::header;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use crate::AppState;
use crate::auth::{Credential, denied};
use crate::dto::timestamp;
use crate::problem::{Code, Problem, api_response};

/// The path under which a portal link opens (the web pages serve it).
pub const PORTAL_PATH: &str = "/portal/";

/// `POST /api/portal-sessions`.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PortalSessionBody {
    /// The user whose billing the portal shows.
    #[oai(validator(min_length = 1, max_length = 128))]
    pub user_id: String,
    /// A team whose billing the portal shows in place of the user's own: the user must be one
    /// of its owners or admins (checked again at every action in the portal). Omitted: the
    /// user's own billing.
    #[oai(validator(min_length = 1, max_length = 128))]
    pub account_id: Option<String>,
    /// Where the portal's "Back to the app" link leads: an absolute http(s) URL under an
    /// allowed origin (`[hostApp] returnOrigins`; any loopback origin in development).
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub return_url: String,
    /// The portal's language (`en`, `zh-CN`); the browser's otherwise.
    #[oai(validator(max_length = 16))]
    pub locale: Option<String>,
}

/// A portal link.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PortalSessionView {
    /// The link to send the user's browser to: single use, valid until `expiresAt`.
    pub url: String,
    /// When the link stops working (RFC 3339).
    pub expires_at: String,
}

api_response! {
    /// `POST /api/portal-sessions`.
    pub enum PortalSessionResponse {
        /// The link.
        201 Created(Json<PortalSessionView>),
    }
    problems {
        /// `validation_failed`: the body is malformed.
        400 BadRequest,
        /// `unauthorized`: no valid credential.
        401 Unauthorized,
        /// `forbidden`: not an API key with scope `billing:write`.
        /// Also `forbidden`: an API key bound to one account.
        /// Also `not_billing_manager`: `accountId` names a team the user is a plain member of.
        403 Forbidden,
        /// `user_not_found`.
        /// Also `account_not_found`: `accountId` names no team the user belongs to.
        404 NotFound,
        /// `payload_too_large`: the body is over 64 KiB.
        413 PayloadTooLarge,
        /// `return_url_not_allowed`: `returnUrl` is not an absolute http(s) URL under an
        /// allowed origin (the detail names the field).
        422 Unprocessable,
    }
}

/// The customer-portal endpoint.
pub(crate) struct PortalApi {
    state: Arc<AppState>,
}

impl PortalApi {
    pub(crate) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

/// Tags of the portal endpoint.
#[derive(poem_openapi::Tags)]
enum Tag {
    /// The hosted customer portal.
    Portal,
}

#[OpenApi(tag = "Tag::Portal")]
impl PortalApi {
    /// Make a single-use link to the customer portal for a user (API keys with scope
    /// `billing:write`). Opening it starts a 30-minute browser session that can do nothing but
    /// that user's billing: subscription, plans, orders, credits and buying.
    #[oai(path = "/api/portal-sessions", method = "post")]
    async fn create(
        &self,
        credential: Credential,
        request: &Request,
        body: Json<PortalSessionBody>,
    ) -> PortalSessionResponse {
        let result = async {
            let principal = self.state.principal(&credential).await?;
            let body = body.0;
            let link = self
                .state
                .ports
                .accounts
                .create_portal_session(
                    principal,
                    CreatePortalSession {
                        user_id: body.user_id,
                        account_id: body.account_id,
                        return_url: body.return_url,
                        locale: body.locale,
                    },
                )
                .await
                .map_err(portal_problem)?;
            let base = self.public_base(request);
            Ok::<_, Problem>(PortalSessionView {
                url: format!("{base}{PORTAL_PATH}{}", link.token),
                expires_at: timestamp(link.expires_at),
            })
        };
        match result.await {
            Ok(view) => PortalSessionResponse::Created(Json(view)),
            Err(problem) => problem.into(),
        }
    }
}

impl PortalApi {
    /// `APP_BASE_URL`, or the origin the request came to.
    fn public_base(&self, request: &Request) -> String {
        if let Some(base) = &self.state.settings.public_base_url {
            return base.trim_end_matches('/').to_owned();
        }
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        let scheme = if self.state.settings.secure_cookies {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{host}")
    }
}

fn portal_problem(e: PortalError) -> Problem {
    match e {
        PortalError::Denied(why) => denied(why),
        PortalError::ReturnUrlNotAllowed(refused) => {
            Problem::new(Code::ReturnUrlNotAllowed, refused.to_string())
        }
        PortalError::AccountNotFound => Problem::new(
            Code::AccountNotFound,
            "no such team, or the user is not one of its members",
        ),
        PortalError::NotBillingManager => Problem::new(
            Code::NotBillingManager,
            "only a team's owners and admins manage its billing",
        ),
        PortalError::Infra(infra) => infra.into(),
    }
}
