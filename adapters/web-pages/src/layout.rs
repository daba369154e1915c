//! The page shell every page shares: `<head>` with the stylesheet and script, the optional
//! sandbox notice, the header (brand, navigation, language switch, the user and sign-out), the
//! footer, and the error page.
//!
//! maud escapes every interpolated value; the only unescaped HTML on any page is the output of
//! [`crate::markdown`] and the QR code's SVG, both built from escaped or generated text.

use maud::{DOCTYPE, Markup, html};
use poem::Response;
use poem::http::{StatusCode, header};

use crate::assets;
use crate::csrf::CSRF_FIELD;
use crate::i18n::Lang;
use crate::state::{PageError, Visitor, sign_in_then};

/// Which navigation entry is the current page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    /// `/`.
    Home,
    /// `/pricing`.
    Pricing,
    /// `/dashboard`.
    Dashboard,
    /// `/admin/pricing`.
    Admin,
    /// Anything else.
    Other,
}

/// A whole page as a response with `status`.
pub(crate) fn page(
    visitor: &Visitor,
    status: StatusCode,
    title: &str,
    nav: Nav,
    body: Markup,
) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang=(visitor.lang.tag()) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light";
                title { (title) " · " (visitor.branding.name) }
                link rel="icon" type="image/svg+xml" href=(assets::url("favicon.svg"));
                link rel="stylesheet" href=(assets::url("app.css"));
                @if visitor.branding.accent_color.is_some() {
                    link rel="stylesheet" href="/assets/brand.css";
                }
                script src=(assets::url("app.js")) defer {}
            }
            body {
                a.skip-link href="#main" { (visitor.t("layout.skip")) }
                (sandbox_notice(visitor))
                (site_header(visitor, nav))
                main #main .container tabindex="-1" { (body) }
                (site_footer(visitor))
            }
        }
    };
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        .body(markup.into_string())
}

/// The error page for `error`.
pub(crate) fn error_page(visitor: &Visitor, error: &PageError) -> Response {
    if let PageError::SignInRequired(location) = error {
        return crate::state::redirect(location);
    }
    let (status, title, text) = error.describe();
    let body = html! {
        section.narrow.error-page {
            p.eyebrow { (status.as_u16()) }
            h1 { (visitor.t(title)) }
            p.lead { (visitor.t(text)) }
            div.actions {
                a.btn.btn-primary href="/pricing" { (visitor.t("error.to_pricing")) }
                @if visitor.user.is_some() {
                    a.btn.btn-secondary href="/dashboard" { (visitor.t("error.to_dashboard")) }
                }
            }
        }
    };
    page(visitor, status, visitor.t(title), Nav::Other, body)
}

/// The hidden CSRF field every form carries.
pub(crate) fn csrf_field(visitor: &Visitor) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(visitor.csrf_token()); }
}

fn sandbox_notice(visitor: &Visitor) -> Markup {
    html! {
        @if visitor.sandbox_notice {
            div.sandbox-banner role="note" {
                div.container {
                    strong { (visitor.t("layout.sandbox_title")) }
                    " "
                    span { (visitor.t("layout.sandbox_text")) }
                }
            }
        }
    }
}

fn nav_link(visitor: &Visitor, href: &str, key: &str, active: bool) -> Markup {
    html! {
        a.nav-link href=(href) aria-current=[active.then_some("page")] { (visitor.t(key)) }
    }
}

fn site_header(visitor: &Visitor, nav: Nav) -> Markup {
    html! {
        header.site-header {
            div.container.header-inner {
                (brand(visitor))
                nav.main-nav aria-label=(visitor.t("layout.nav_label")) {
                    (nav_link(visitor, "/pricing", "layout.nav_pricing", nav == Nav::Pricing))
                    @if visitor.user.is_some() {
                        (nav_link(visitor, "/dashboard", "layout.nav_dashboard",
                            nav == Nav::Dashboard))
                    }
                    @if visitor.is_admin() {
                        (nav_link(visitor, "/admin", "layout.nav_admin", nav == Nav::Admin))
                    }
                }
                div.header-actions {
                    (language_switch(visitor))
                    (account_actions(visitor))
                }
            }
        }
    }
}

fn language_switch(visitor: &Visitor) -> Markup {
    html! {
        nav.lang-switch aria-label=(visitor.t("layout.language")) {
            @for lang in Lang::ALL {
                a href=(visitor.in_lang(lang)) lang=(lang.tag()) hreflang=(lang.tag())
                    aria-current=[(lang == visitor.lang).then_some("true")] {
                    span.lang-full { (lang.native_name()) }
                    span.lang-short aria-hidden="true" { (lang.short_name()) }
                }
            }
        }
    }
}

fn account_actions(visitor: &Visitor) -> Markup {
    html! {
        @if let (Some(user), Some(back)) = (&visitor.user, &visitor.portal_return) {
            div.account {
                span.user-email title=(user.email.as_str()) data-testid="user-email" {
                    (user.email.as_str())
                }
                a.btn.btn-primary.btn-sm href=(back.as_str()) data-testid="portal-back" {
                    (visitor.tf("portal.back", &[("app", &visitor.branding.name)]))
                }
            }
        } @else if let Some(user) = &visitor.user {
            div.account {
                span.user-email title=(user.email.as_str()) data-testid="user-email" {
                    (user.email.as_str())
                }
                form.inline-form method="post" action="/signout" {
                    (csrf_field(visitor))
                    button.btn.btn-ghost.btn-sm type="submit" { (visitor.t("layout.sign_out")) }
                }
            }
        } @else {
            div.account {
                @if !visitor.is_at("/signin") {
                    a.btn.btn-ghost.btn-sm href=(sign_in_then(&visitor.here())) {
                        (visitor.t("layout.sign_in"))
                    }
                }
                @if !visitor.is_at("/signup") {
                    a.btn.btn-primary.btn-sm href="/signup" { (visitor.t("layout.sign_up")) }
                }
            }
        }
    }
}

fn site_footer(visitor: &Visitor) -> Markup {
    let branding = &visitor.branding;
    let support = branding.support_url.clone().or_else(|| {
        branding
            .support_email
            .as_ref()
            .map(|email| format!("mailto:{email}"))
    });
    html! {
        footer.site-footer {
            div.container.footer-inner {
                span data-testid="footer-brand" { "© " (branding.name) }
                @if let Some(support) = support {
                    a.muted href=(support) data-testid="support-link" {
                        (visitor.t("layout.support"))
                    }
                } @else {
                    span.muted { (visitor.t("layout.footer_tagline")) }
                }
            }
        }
    }
}

/// The brand in the header: the logo (an image the browser loads from the operator's URL) or
/// the name's initial, and the name; it leads to the host application's home when configured.
fn brand(visitor: &Visitor) -> Markup {
    let branding = &visitor.branding;
    let home = branding.home_url.as_deref().unwrap_or("/");
    let initial: String = branding.name.chars().take(1).collect();
    html! {
        a.brand href=(home) data-testid="brand" {
            @if let Some(logo) = &branding.logo_url {
                img.brand-logo src=(logo) alt="" width="30" height="30";
            } @else {
                span.brand-mark aria-hidden="true" { (initial) }
            }
            span.brand-name { (branding.name) }
        }
    }
}

/// The stylesheet that sets the accent colour (`/assets/brand.css`): the primary colour and
/// its hover and soft shades. The colour was validated as `#rrggbb` by the wiring; anything
/// else gives an empty sheet.
pub(crate) fn brand_stylesheet(branding: &crate::Branding) -> String {
    let Some(accent) = branding.accent_color.as_deref().filter(|c| is_hex_color(c)) else {
        return String::new();
    };
    format!(
        ":root {{ --primary: {accent}; --primary-hover: color-mix(in srgb, {accent} 85%, #000); \
         --primary-soft: color-mix(in srgb, {accent} 10%, #fff); }}\n\
         .brand-mark {{ background: {accent}; }}\n"
    )
}

/// `#rrggbb`.
pub(crate) fn is_hex_color(text: &str) -> bool {
    text.len() == 7 && text.starts_with('#') && text[1..].chars().all(|c| c.is_ascii_hexdigit())
}
