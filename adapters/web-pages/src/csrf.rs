//! CSRF protection for the pages' form posts: a signed double-submit token bound to the session.
//!
//! Each browser gets a random secret in the `tally_csrf` cookie (HttpOnly, SameSite=Lax). Every
//! form carries `csrf = HMAC-SHA256(key = that secret, message = "tally-csrf|" + session token)`
//! (an empty session before sign-in). A post is accepted only when its field verifies against
//! the cookie and the current session. A cross-site page can neither read the cookie nor the
//! session token, so it cannot compute the field; a cookie planted by a sibling subdomain does
//! not help either, because the token is also keyed to the victim's session.
//!
//! The JSON API is protected differently and the pages rely on that for their scripts, which
//! only read (`GET /api/payment/query/{id}`): the session cookie is `SameSite=Lax`, so it is not
//! sent on cross-site `POST`s, and the API accepts only `application/json` bodies, which a
//! cross-site form cannot send without a CORS preflight that the API never answers.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The cookie holding the browser's CSRF secret.
pub(crate) const CSRF_COOKIE: &str = "tally_csrf";
/// The form field carrying the token.
pub(crate) const CSRF_FIELD: &str = "csrf";
/// How long the secret cookie lives (a year; it protects, it does not authenticate).
pub(crate) const CSRF_COOKIE_MAX_AGE_SECONDS: i64 = 365 * 24 * 3600;

type HmacSha256 = Hmac<Sha256>;

/// Whether `value` can be a secret we issued (URL-safe, 8 to 128 characters).
pub(crate) fn is_plausible_secret(value: &str) -> bool {
    (8..=128).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn mac(secret: &str, session: Option<&str>) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(b"tally-csrf|");
    mac.update(session.unwrap_or_default().as_bytes());
    mac
}

/// The token forms carry for this secret and session.
pub(crate) fn token(secret: &str, session: Option<&str>) -> String {
    let bytes = mac(secret, session).finalize().into_bytes();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `presented` is the token for this secret and session (compared in constant time).
pub(crate) fn verify(secret: &str, session: Option<&str>, presented: &str) -> bool {
    let Some(bytes) = decode_hex(presented) else {
        return false;
    };
    mac(secret, session).verify_slice(&bytes).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_for_its_secret_and_session() {
        let t = token("secret_one", Some("session"));
        assert_eq!(t.len(), 64);
        assert!(verify("secret_one", Some("session"), &t));
        assert!(!verify("secret_two", Some("session"), &t));
        assert!(!verify("secret_one", Some("other"), &t));
        assert!(!verify("secret_one", None, &t));
        assert!(!verify("secret_one", Some("session"), "zz"));
        assert!(!verify("secret_one", Some("session"), &"é".repeat(32)));
    }

    #[test]
    fn only_url_safe_secrets_are_accepted() {
        assert!(is_plausible_secret("secret_12"));
        assert!(!is_plausible_secret("short"));
        assert!(!is_plausible_secret("has space in it"));
    }
}
