//! Tally's HTTP adapter: the poem-openapi JSON API, the provider webhook endpoint, health,
//! readiness and metrics.
//!
//! [`build_api`] turns the inbound ports ([`Ports`]: `Arc<dyn …>` per area, never the store or
//! the service's parts) into a poem [`Route`]; [`openapi_json`] renders the OpenAPI document
//! that `docs/openapi.json` keeps a copy of (a test fails when the two drift).
//!
//! Layout: one module per area (`payment`, `webhook`, `credits`, `consumption`, `plans`, `admin`,
//! `auth_routes`, `health`), each with one `ApiResponse` enum per endpoint; `problem` holds the
//! RFC 9457 error body and the only place statuses are attached to error codes; `auth` turns a
//! cookie, bearer token or API key into a [`Principal`](application::use_cases::sessions::Principal);
//! `middleware` gives every response a request id, maps every framework error into a problem,
//! limits request headers (`header_limit`) and bodies and records metrics.
//!
//! Boundary: nothing here decides business rules; handlers parse, call one use case and map
//! its outcome. HTTP statuses are decided only here (HOUSE-STYLE.md rule 14).

mod admin;
mod admin_allowances;
mod admin_console;
mod admin_customers;
mod admin_customers_api;
mod admin_export;
mod admin_refund;
mod admin_replay;
mod admin_webhooks;
mod auth;
mod auth_routes;
mod auto_top_up;
mod consumption;
mod credits;
mod dto;
mod entitlements;
mod event_json;
mod events;
mod header_limit;
mod health;
mod i18n;
mod invitations;
mod limits;
mod metrics;
mod middleware;
mod offers;
mod optional_json;
mod payment;
mod plans;
mod portal;
mod problem;
mod promo_codes;
mod rate_limit;
mod subscriptions;
mod teams;
mod thresholds;
mod token_usage;
mod webhook;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use application::inbound::Ports;
use poem::endpoint::BoxEndpoint;
use poem::http::Method;
use poem::middleware::CatchPanic;
use poem::{EndpointExt, IntoEndpoint, Route};
use poem_openapi::registry::{MetaApi, Registry};
use poem_openapi::{ExtraHeader, OpenApi, OpenApiService};

pub use event_json::HostEventJson;
pub use header_limit::{
    HTTP1_MAX_HEADERS_PARSED, HeaderLimit, HeaderLimitEndpoint, MAX_REQUEST_HEADER_BYTES,
    MAX_REQUEST_HEADERS,
};
pub use health::Readiness;
pub use metrics::PrometheusMetrics;
pub use problem::{PROBLEM_CONTENT_TYPE, unparsed_request_problem};
pub use rate_limit::RateLimit;
pub use webhook::{WEBHOOK_PATH_PREFIX, webhook_url_prefix};

/// The OpenAPI document's title.
const API_TITLE: &str = "Tally API";
/// The API's version, as the OpenAPI document states it.
const API_VERSION: &str = "1.0.0";

/// How the HTTP API behaves: cookies, client addresses, limits.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// Mark the session cookie `Secure` (serve over HTTPS only).
    pub secure_cookies: bool,
    /// Take the client address for rate limits from `X-Forwarded-For` (only behind a proxy
    /// that sets it), instead of the peer address.
    pub trust_forwarded_for: bool,
    /// The largest JSON request body, in bytes.
    pub json_body_limit_bytes: usize,
    /// The largest webhook request body, in bytes.
    pub webhook_body_limit_bytes: usize,
    /// Sign-in attempts per client. (Registrations are limited by the service's sign-up
    /// policy, shared with the pages: `application::sign_up`.)
    pub sign_in_limit: RateLimit,
    /// Payment initiations per client.
    pub initiate_limit: RateLimit,
    /// `APP_BASE_URL`: the public address portal links start with; `None` takes the
    /// request's own origin.
    pub public_base_url: Option<String>,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            secure_cookies: true,
            trust_forwarded_for: false,
            json_body_limit_bytes: 64 * 1024,
            webhook_body_limit_bytes: 256 * 1024,
            sign_in_limit: RateLimit::per_minute(nonzero(10), nonzero(5)),
            initiate_limit: RateLimit::per_minute(nonzero(30), nonzero(10)),
            public_base_url: None,
        }
    }
}

const fn nonzero(value: u32) -> NonZeroU32 {
    match NonZeroU32::new(value) {
        Some(v) => v,
        None => NonZeroU32::MIN,
    }
}

/// What every handler shares: the inbound ports, the readiness probe, the settings and the
/// rate limiters.
pub(crate) struct AppState {
    pub(crate) ports: Ports,
    pub(crate) readiness: Arc<dyn Readiness>,
    pub(crate) settings: ApiSettings,
    pub(crate) limits: rate_limit::RateLimiters,
}

type Apis = (
    payment::PaymentApi,
    subscriptions::SubscriptionsApi,
    webhook::WebhookApi,
    credits::CreditsApi,
    consumption::ConsumptionApi,
    entitlements::EntitlementsApi,
    events::EventsApi,
    plans::PlansApi,
    admin::AdminApi,
    admin_webhooks::AdminWebhooksApi,
    admin_customers_api::AdminConsoleApi,
    admin_replay::AdminReplayApi,
    auth_routes::AuthApi,
    health::HealthApi,
    portal::PortalApi,
    // Teams and their invitations, one element: poem-openapi implements `OpenApi` for
    // tuples of at most sixteen.
    (
        teams::TeamsApi,
        invitations::InvitationsApi,
        limits::LimitsApi,
        thresholds::ThresholdsApi,
        auto_top_up::AutoTopUpApi,
        promo_codes::PromoCodesApi,
    ),
);

fn openapi_service(state: &Arc<AppState>) -> OpenApiService<Apis, ()> {
    document((
        payment::PaymentApi::new(state.clone()),
        subscriptions::SubscriptionsApi::new(state.clone()),
        webhook::WebhookApi::new(state.clone()),
        credits::CreditsApi::new(state.clone()),
        consumption::ConsumptionApi::new(state.clone()),
        entitlements::EntitlementsApi::new(state.clone()),
        events::EventsApi::new(state.clone()),
        plans::PlansApi::new(state.clone()),
        admin::AdminApi::new(state.clone()),
        admin_webhooks::AdminWebhooksApi::new(state.clone()),
        admin_customers_api::AdminConsoleApi::new(state.clone()),
        admin_replay::AdminReplayApi::new(state.clone()),
        auth_routes::AuthApi::new(state.clone()),
        health::HealthApi::new(state.clone()),
        portal::PortalApi::new(state.clone()),
        (
            teams::TeamsApi::new(state.clone()),
            invitations::InvitationsApi::new(state.clone()),
            limits::LimitsApi::new(state.clone()),
            thresholds::ThresholdsApi::new(state.clone()),
            auto_top_up::AutoTopUpApi::new(state.clone()),
            promo_codes::PromoCodesApi::new(state.clone()),
        ),
    ))
}

/// The API's document around `api`: the handlers, or [`DocumentOnly`].
fn document<T: OpenApi>(api: T) -> OpenApiService<T, ()> {
    OpenApiService::new(api, API_TITLE, API_VERSION)
        .description(
            "Payments (seven providers), credits and plans. Every error is \
             application/problem+json (RFC 9457) with a stable `code`; every response carries \
             `X-Request-Id`.",
        )
        .extra_response_header::<String, _>(ExtraHeader::new("X-Request-Id").description(
            "The request's id: the client's own `X-Request-Id` when it is at most 64 plain \
             characters, else a new one. Logs of the request carry it.",
        ))
}

/// The whole HTTP API as one route, wrapped in the request-id, error-mapping, body-limit and
/// panic-catching middleware.
pub fn build_api(
    ports: Ports,
    readiness: Arc<dyn Readiness>,
    settings: ApiSettings,
) -> impl poem::Endpoint<Output = poem::Response> {
    let clock_source = ports.accounts.clone();
    let context = middleware::RequestContext::new(
        Arc::new(move || clock_source.now().unix_millis()),
        middleware::BodyLimits {
            json_bytes: settings.json_body_limit_bytes,
            webhook_bytes: settings.webhook_body_limit_bytes,
        },
    );
    let state = Arc::new(AppState {
        limits: rate_limit::RateLimiters::new(&settings),
        ports,
        readiness,
        settings,
    });
    let api = openapi_service(&state);
    let spec = api.spec_endpoint();
    let docs = api.swagger_ui();
    Route::new()
        .at("/api/openapi.json", spec)
        .nest("/api/docs", docs)
        .nest("/", api.into_endpoint())
        .with(CatchPanic::new().with_handler(problem::panic_response))
        .with(context)
}

/// The OpenAPI document of the API, as `/api/openapi.json` serves it (pretty-printed JSON).
///
/// The document depends only on the handlers' types, so no ports are needed to render it.
pub fn openapi_json() -> String {
    document(DocumentOnly).spec()
}

/// The API's operations and types without its handlers: poem-openapi builds a document from
/// the types alone ([`OpenApi::meta`], [`OpenApi::register`]), and this adds no routes.
struct DocumentOnly;

impl OpenApi for DocumentOnly {
    fn meta() -> Vec<MetaApi> {
        Apis::meta()
    }

    fn register(registry: &mut Registry) {
        Apis::register(registry);
    }

    fn add_routes(self, _routes: &mut HashMap<String, HashMap<Method, BoxEndpoint<'static>>>) {}
}
