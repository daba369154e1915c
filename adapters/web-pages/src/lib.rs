//! Tally's server-rendered web pages: the spec's table of pages (section 1) for people in a
//! browser, on a phone-sized screen too.
//!
//! [`routes`] turns the inbound [`Ports`] into one poem endpoint serving `/`, `/pricing`,
//! `/payment-success`, `/payment-cancel`, `/dashboard`, `/admin/pricing`, `/signin`, `/signup`,
//! `/signout`, the QR payment page `/pay/qr/{orderId}`, their form posts and `/assets/…`.
//! `bootstrap` mounts it at the root next to the JSON API (`/api/*`) and the sandbox.
//!
//! Layout: `state` (who is reading, error pages, CSRF-checked forms), `layout` (the shell),
//! `pages/*` (one module per page family), `i18n` with the two catalogs in `i18n/*.toml`,
//! `format` (prices per currency and language, dates), `markdown` (the safe inline subset for
//! plan features), `csrf`, `cookies`, `assets` (embedded CSS and JS).
//!
//! Safety: every page sends a Content-Security-Policy without `unsafe-inline` (styles and
//! scripts come from `/assets` only); the session cookie is the JSON API's `tally_session`
//! (HttpOnly, SameSite=Lax, Secure outside development); every form post carries a CSRF token
//! bound to a per-browser secret and to the session (see `csrf`); the pages' scripts only read
//! from the JSON API (polling a payment's status), which a cross-site page cannot forge because
//! the session cookie is SameSite=Lax and the API takes only JSON bodies.
//!
//! Boundary: pages call use cases through the inbound ports ([`Ports`]: one `Arc<dyn …>` per
//! area) and render; they decide no business rule and never see the store, the gateways or the
//! service's settings.

mod assets;
mod cookies;
mod csrf;
mod format;
mod i18n;
mod layout;
mod markdown;
mod pages;
mod state;
mod throttle;

use std::future::Future;
use std::sync::Arc;

use application::inbound::Ports;
use poem::endpoint::make;
use poem::http::{HeaderValue, StatusCode, header};
use poem::middleware::CatchPanic;
use poem::{Endpoint, EndpointExt, Request, Response, Route, get, post};

use crate::state::{PageError, PageResult, PageState, Visitor};

/// How the pages behave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSettings {
    /// Mark cookies `Secure` (every environment but development).
    pub secure_cookies: bool,
    /// Show "sandbox: no real money moves" on every page (some provider runs on the sandbox).
    pub sandbox_notice: bool,
    /// Take the client address for the sign-up limits from `X-Forwarded-For` (only behind a
    /// proxy that sets it), instead of the peer address; as the JSON API does.
    pub trust_forwarded_for: bool,
    /// The service's own address (`APP_BASE_URL`), for links a user sends to someone else (an
    /// invitation's); `None` shows such a link as a path on this site.
    pub public_base_url: Option<String>,
}

/// The operator's branding (`[branding]` in `tally.toml`), applied to every page: the name in
/// the title, header and footer, a logo, the accent colour, the support contact and the host
/// application's home. The wiring validates it (an `#rrggbb` colour, https URLs in
/// production); a logo is only ever an `<img>` the browser loads, never fetched by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branding {
    /// The product's name ("Tally" by default).
    pub name: String,
    /// The logo shown in the header instead of the initial.
    pub logo_url: Option<String>,
    /// The accent colour, `#rrggbb`.
    pub accent_color: Option<String>,
    /// The support e-mail address, linked in the footer.
    pub support_email: Option<String>,
    /// The support page, linked in the footer (before the e-mail address).
    pub support_url: Option<String>,
    /// The host application's home, where the brand in the header leads.
    pub home_url: Option<String>,
}

impl Default for Branding {
    fn default() -> Self {
        Self {
            name: "Tally".to_owned(),
            logo_url: None,
            accent_color: None,
            support_email: None,
            support_url: None,
            home_url: None,
        }
    }
}

impl Branding {
    /// The Content-Security-Policy of the pages: [`CONTENT_SECURITY_POLICY`], with the logo's
    /// origin allowed as an image source when there is a logo.
    #[must_use]
    pub fn content_security_policy(&self) -> String {
        let logo_origin = self
            .logo_url
            .as_deref()
            .and_then(|url| domain::ReturnUrl::parse(url).ok())
            .map(|url| url.origin().to_string());
        match logo_origin {
            Some(origin) => CONTENT_SECURITY_POLICY.replace(
                "img-src 'self' data:",
                &format!("img-src 'self' data: {origin}"),
            ),
            None => CONTENT_SECURITY_POLICY.to_owned(),
        }
    }
}

/// Failed sign-ins allowed per e-mail address in each window.
const SIGN_IN_FAILURES: u32 = 10;
/// The sign-in throttle's window.
const SIGN_IN_WINDOW_MS: i64 = 15 * 60 * 1000;

/// The page a buyer returns to after paying (`?orderId=…`): a provider's success return URL.
pub const PAYMENT_SUCCESS_PATH: &str = "/payment-success";
/// The page a buyer returns to after giving up on a checkout (`?orderId=…`).
pub const PAYMENT_CANCEL_PATH: &str = "/payment-cancel";

/// The two result pages under `base_url`, as the prefixes an order id completes (success,
/// cancel): what the wiring hands the service as its callback addresses.
#[must_use]
pub fn result_page_prefixes(base_url: &str) -> (String, String) {
    (
        format!("{base_url}{PAYMENT_SUCCESS_PATH}?orderId="),
        format!("{base_url}{PAYMENT_CANCEL_PATH}?orderId="),
    )
}

/// The dashboard pages a subscriber returns to from approving (first) or declining (second) a
/// plan change at the provider (PayPal): the dashboard with its notice of either.
#[must_use]
pub fn plan_change_returns(base_url: &str) -> (String, String) {
    (
        format!("{base_url}/dashboard?notice=plan_change_pending"),
        format!("{base_url}/dashboard?notice=plan_change_declined"),
    )
}

/// The Content-Security-Policy of every page: only this origin's scripts and styles, no
/// inline code, no framing; forms may post here or to an HTTPS provider.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
    form-action 'self' https:; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// Every page route, with security headers and panic catching, under Tally's own branding.
pub fn routes(ports: Ports, settings: PageSettings) -> impl Endpoint<Output = Response> + 'static {
    branded_routes(ports, settings, Branding::default())
}

/// Every page route, with security headers and panic catching, under `branding`.
pub fn branded_routes(
    ports: Ports,
    settings: PageSettings,
    branding: Branding,
) -> impl Endpoint<Output = Response> + 'static {
    i18n::load();
    let branding = Arc::new(branding);
    let csp: Arc<str> = branding.content_security_policy().into();
    let state = Arc::new(PageState {
        ports,
        settings: settings.clone(),
        sign_in_throttle: throttle::Throttle::new(SIGN_IN_FAILURES, SIGN_IN_WINDOW_MS),
        branding: branding.clone(),
    });
    let s = &state;
    admin_routes(buyer_routes(Route::new(), s), s)
        .at("/assets/:name", get(make(assets::serve)))
        .at(BRAND_CSS_PATH, get(brand_css(&branding)))
        .around(move |endpoint, request| {
            let context = (settings.clone(), branding.clone(), csp.clone());
            fallback_and_headers(context, endpoint, request)
        })
        .with(CatchPanic::new())
        .map_to_response()
}

/// The stylesheet carrying the branding's accent colour, as CSS variables (the pages' policy
/// allows no inline style).
const BRAND_CSS_PATH: &str = "/assets/brand.css";

fn brand_css(branding: &Branding) -> impl Endpoint<Output = Response> + 'static {
    let body = layout::brand_stylesheet(branding);
    make(move |_request: Request| {
        let body = body.clone();
        async move {
            Response::builder()
                .header(header::CONTENT_TYPE, "text/css; charset=utf-8")
                .header(header::CACHE_CONTROL, "no-cache")
                .body(body)
        }
    })
}

/// The visitor's and buyer's pages: home, sign-in, pricing, checkout results, dashboard.
fn buyer_routes(route: Route, s: &Arc<PageState>) -> Route {
    use pages::{
        auth, dashboard, dashboard_limits, dashboard_promo, dashboard_switch, dashboard_team_forms,
        dashboard_top_up, home, invitation, payment, portal, pricing,
    };
    route
        .at("/", get(page(s, home::show)))
        .at(
            "/signin",
            get(page(s, auth::sign_in_form)).post(page(s, auth::sign_in)),
        )
        .at(
            "/signup",
            get(page(s, auth::sign_up_form)).post(page(s, auth::sign_up)),
        )
        .at("/signout", post(page(s, auth::sign_out)))
        .at("/pricing", get(page(s, pricing::show)))
        .at("/pricing/buy", post(page(s, pricing::buy)))
        .at("/pricing/continue", get(page(s, pricing::resume)))
        .at("/pay/qr/:order_id", get(page(s, payment::qr)))
        .at(PAYMENT_SUCCESS_PATH, get(page(s, payment::success)))
        .at(PAYMENT_CANCEL_PATH, get(page(s, payment::cancel)))
        .at("/portal/:token", get(page(s, portal::open)))
        .at("/dashboard", get(page(s, dashboard::show)))
        .at(
            "/dashboard/subscription/cancel",
            post(page(s, dashboard::cancel_subscription)),
        )
        .at(
            "/dashboard/subscription/:action",
            post(page(s, dashboard_switch::act)),
        )
        .at(
            "/dashboard/teams/:action",
            post(page(s, dashboard_team_forms::act)),
        )
        .at(
            "/dashboard/limits/:action",
            post(page(s, dashboard_limits::act)),
        )
        .at(
            "/dashboard/promo-codes/redeem",
            post(page(s, dashboard_promo::redeem)),
        )
        .at(
            "/dashboard/auto-top-up/:action",
            post(page(s, dashboard_top_up::act)),
        )
        .at(
            "/invitations/accept",
            get(page(s, invitation::show)).post(page(s, invitation::accept)),
        )
}

/// The operator's pages under `/admin`.
fn admin_routes(route: Route, s: &Arc<PageState>) -> Route {
    use pages::admin;
    let route = route
        .at(
            "/admin/pricing",
            get(page(s, admin::list)).post(page(s, admin::create)),
        )
        .at("/admin/pricing/new", get(page(s, admin::new_form)))
        .at("/admin/pricing/import", post(page(s, admin::import)))
        .at("/admin/pricing/reorder", post(page(s, admin::reorder)))
        .at(
            "/admin/pricing/plans/:id/edit",
            get(page(s, admin::edit_form)),
        )
        .at("/admin/pricing/plans/:id", post(page(s, admin::update)))
        .at(
            "/admin/pricing/plans/:id/:action",
            post(page(s, admin::act)),
        )
        .at("/admin", get(page(s, admin::overview::show)))
        .at(
            "/admin/api-keys",
            get(page(s, admin::api_keys::list)).post(page(s, admin::api_keys::create)),
        )
        .at(
            "/admin/api-keys/:id/revoke",
            post(page(s, admin::api_keys::revoke)),
        )
        .at("/admin/webhooks", get(page(s, admin::inbox::list)))
        .at(
            "/admin/webhooks/:id/:step",
            post(page(s, admin::inbox::step)),
        )
        .at("/admin/customers", get(page(s, admin::customers::list)))
        .at("/admin/customers/:id", get(page(s, admin::customers::show)))
        .at(
            "/admin/customers/:id/confirm",
            post(page(s, admin::customers::confirm)),
        )
        .at(
            "/admin/customers/:id/apply",
            post(page(s, admin::customers::apply)),
        )
        .at("/admin/accounts", get(page(s, admin::accounts::list)))
        .at("/admin/accounts/:id", get(page(s, admin::accounts::show)))
        .at(
            "/admin/limits/:action",
            post(page(s, pages::dashboard_limits::admin_act)),
        )
        .at("/admin/orders", get(page(s, admin::orders::list)))
        .at("/admin/audit", get(page(s, admin::audit::list)));
    admin_setting_routes(route, s)
}

/// The console's pages of what an operator sets up: promo codes and webhook endpoints.
fn admin_setting_routes(route: Route, s: &Arc<PageState>) -> Route {
    use pages::admin;
    route
        .at(
            "/admin/promo-codes",
            get(page(s, admin::promo_codes::list)).post(page(s, admin::promo_codes::create)),
        )
        .at(
            "/admin/promo-codes/:id/:action",
            post(page(s, admin::promo_codes::act)),
        )
        .at(
            "/admin/webhook-endpoints",
            get(page(s, admin::endpoints::list)).post(page(s, admin::endpoints::create)),
        )
        .at(
            "/admin/webhook-endpoints/:id",
            get(page(s, admin::endpoints::deliveries)),
        )
        .at(
            "/admin/webhook-endpoints/:id/:action",
            post(page(s, admin::endpoints::act)),
        )
        .at(
            "/admin/webhook-endpoints/:id/deliveries/:delivery/redeliver",
            post(page(s, admin::endpoints::redeliver)),
        )
}

/// Wrap a page handler: build the visitor, run the handler, render its error, add cookies.
fn page<F, Fut>(state: &Arc<PageState>, handler: F) -> impl Endpoint<Output = Response> + 'static
where
    F: Fn(Arc<PageState>, Visitor, Request) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = PageResult> + Send + 'static,
{
    let state = state.clone();
    make(move |request: Request| {
        let state = state.clone();
        async move {
            let visitor = match state.visitor(&request).await {
                Ok(visitor) => visitor,
                Err((lang, error)) => {
                    let visitor = Visitor::anonymous(lang, &state.settings, &state.branding);
                    return layout::error_page(&visitor, &error);
                }
            };
            let response = match handler(state.clone(), visitor.clone(), request).await {
                Ok(response) => response,
                Err(error) => layout::error_page(&visitor, &error),
            };
            state::finish(&visitor, response)
        }
    })
}

/// Answer a path under these routes that does not exist with the 404 page, and add the
/// security headers to every response.
async fn fallback_and_headers<E: Endpoint<Output = Response>>(
    (settings, branding, csp): (PageSettings, Arc<Branding>, Arc<str>),
    endpoint: Arc<E>,
    request: Request,
) -> poem::Result<Response> {
    let (lang, _) = i18n::negotiate(&request);
    let response = match endpoint.call(request).await {
        Ok(response) => response,
        Err(error) if error.status() == StatusCode::NOT_FOUND => {
            let visitor = state::Visitor::anonymous(lang, &settings, &branding);
            layout::error_page(&visitor, &PageError::NotFound)
        }
        Err(error) => error.into_response(),
    };
    Ok(with_security_headers(response, &csp))
}

/// Add the security headers every page and asset carries.
fn with_security_headers(mut response: Response, csp: &str) -> Response {
    let headers = response.headers_mut();
    let csp = HeaderValue::from_str(csp)
        .unwrap_or_else(|_| HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert("content-security-policy", csp);
    let fixed = [
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "same-origin"),
        ("x-frame-options", "DENY"),
        (
            "permissions-policy",
            "camera=(), microphone=(), geolocation=()",
        ),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests;
