//! Reading request cookies and writing `Set-Cookie` values.
//!
//! Every cookie the pages set is `HttpOnly`, `SameSite=Lax`, `Path=/`, and `Secure` when the
//! settings ask for it (everywhere but development).

use poem::Request;

/// The session cookie, shared with the JSON API (`/api/auth/login` sets the same one).
pub(crate) const SESSION_COOKIE: &str = "tally_session";
/// The longest cookie value read; longer ones are ignored.
const MAX_COOKIE_VALUE_CHARS: usize = 4096;

/// The value of cookie `name`, when present and not absurdly long.
pub(crate) fn get<'r>(request: &'r Request, name: &str) -> Option<&'r str> {
    request
        .headers()
        .get_all(poem::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|header| header.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty() && value.len() <= MAX_COOKIE_VALUE_CHARS)
}

/// A `Set-Cookie` value for `name=value` kept for `max_age_seconds` (0 removes it).
pub(crate) fn set(name: &str, value: &str, max_age_seconds: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        max_age_seconds.max(0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_cookie_among_several() {
        let request = Request::builder()
            .header("cookie", "a=1; tally_session=tok; b=2")
            .finish();
        assert_eq!(get(&request, "tally_session"), Some("tok"));
        assert_eq!(get(&request, "missing"), None);
    }

    #[test]
    fn cookies_are_http_only_lax_and_secure_when_asked() {
        assert_eq!(
            set("n", "v", 60, true),
            "n=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure"
        );
        assert!(!set("n", "v", 60, false).contains("Secure"));
    }
}
