//! Where a buyer goes back to in the host application: an absolute http(s) URL
//! ([`ReturnUrl`]), which origins the operator allows ([`ReturnOrigins`]), and the outcome a
//! return carries ([`ReturnUrl::with_outcome`]).
//!
//! An origin is compared exactly: scheme, host (lower-cased) and port (the scheme's default
//! port written or not). In development any loopback origin is allowed as well, so a host app
//! on `http://localhost:3000` works without configuration.

use std::fmt;

use crate::OrderId;

/// The longest return URL accepted, in bytes.
pub const MAX_RETURN_URL_BYTES: usize = 2048;

/// Why a text is not a return URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReturnUrlError {
    /// Not an absolute `http://` or `https://` URL with a host, or too long, or with
    /// credentials, whitespace or control characters.
    #[error("must be an absolute http(s) URL of at most 2048 characters")]
    Malformed,
}

/// An origin: scheme, lower-cased host and explicit port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    scheme: &'static str,
    host: String,
    port: u16,
}

impl Origin {
    /// Parse an origin (`https://app.example.com`, `http://localhost:3000`); a path of `/`
    /// is tolerated, anything more is refused.
    ///
    /// # Errors
    /// [`ReturnUrlError::Malformed`].
    pub fn parse(raw: &str) -> Result<Self, ReturnUrlError> {
        let url = ReturnUrl::parse(raw.trim_end_matches('/'))?;
        if url.rest.is_empty() {
            Ok(url.origin)
        } else {
            Err(ReturnUrlError::Malformed)
        }
    }

    /// Whether the host is a loopback name or address.
    #[must_use]
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self.host == "[::1]"
            || self.host.strip_prefix("127.").is_some_and(|rest| {
                rest.split('.').count() == 3 && rest.split('.').all(|p| p.parse::<u8>().is_ok())
            })
    }

    /// Whether the scheme is `https`.
    #[must_use]
    pub fn is_https(&self) -> bool {
        self.scheme == "https"
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default = if self.scheme == "https" { 443 } else { 80 };
        if self.port == default {
            write!(f, "{}://{}", self.scheme, self.host)
        } else {
            write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
        }
    }
}

/// An absolute `http(s)` URL of at most [`MAX_RETURN_URL_BYTES`], without credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnUrl {
    raw: String,
    origin: Origin,
    /// Everything after the authority (path, query, fragment).
    rest: String,
}

impl ReturnUrl {
    /// Parse a URL.
    ///
    /// # Errors
    /// [`ReturnUrlError::Malformed`].
    pub fn parse(raw: &str) -> Result<Self, ReturnUrlError> {
        let bad = ReturnUrlError::Malformed;
        if raw.len() > MAX_RETURN_URL_BYTES
            || raw
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
        {
            return Err(bad);
        }
        let lower = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
        let (scheme, after) = if lower.starts_with("https://") {
            ("https", &raw[8..])
        } else if lower.starts_with("http://") {
            ("http", &raw[7..])
        } else {
            return Err(bad);
        };
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(end);
        if authority.contains('@') {
            return Err(bad);
        }
        let (host, port) = split_port(authority, scheme).ok_or(bad)?;
        let host = host.to_ascii_lowercase();
        let host_ok = !host.is_empty()
            && (host.starts_with('[') && host.ends_with(']')
                || host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
        if !host_ok {
            return Err(bad);
        }
        Ok(Self {
            raw: raw.to_owned(),
            origin: Origin { scheme, host, port },
            rest: rest.to_owned(),
        })
    }

    /// The URL as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Its origin.
    #[must_use]
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// This URL with `orderId` and `outcome` (an order status code) added to its query, before
    /// any fragment.
    #[must_use]
    pub fn with_outcome(&self, order: &OrderId, outcome: &str) -> String {
        let (before, fragment) = match self.raw.find('#') {
            Some(at) => self.raw.split_at(at),
            None => (self.raw.as_str(), ""),
        };
        let joiner = match before.find('?') {
            None => "?",
            Some(at) if at + 1 == before.len() || before.ends_with('&') => "",
            Some(_) => "&",
        };
        format!(
            "{before}{joiner}orderId={}&outcome={}{fragment}",
            query_escape(order.as_str()),
            query_escape(outcome)
        )
    }
}

impl fmt::Display for ReturnUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// The host and port of an authority; the scheme's default port when none is written.
fn split_port<'a>(authority: &'a str, scheme: &str) -> Option<(&'a str, u16)> {
    let default = if scheme == "https" { 443 } else { 80 };
    let port_at = if authority.starts_with('[') {
        authority.find(']').map(|end| end + 1)?
    } else {
        authority.find(':').unwrap_or(authority.len())
    };
    let (host, port) = authority.split_at(port_at);
    match port.strip_prefix(':') {
        None if port.is_empty() => Some((host, default)),
        None => None,
        Some("") => Some((host, default)),
        Some(digits) if digits.chars().all(|c| c.is_ascii_digit()) => {
            Some((host, digits.parse().ok()?))
        }
        Some(_) => None,
    }
}

/// Percent-encode everything but unreserved characters.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Which return field a URL came in: named in a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnField {
    /// `successUrl` of a payment.
    SuccessUrl,
    /// `cancelUrl` of a payment.
    CancelUrl,
    /// `returnUrl` of a portal session.
    ReturnUrl,
}

impl ReturnField {
    /// The field's name as clients send it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            ReturnField::SuccessUrl => "successUrl",
            ReturnField::CancelUrl => "cancelUrl",
            ReturnField::ReturnUrl => "returnUrl",
        }
    }
}

/// A return URL refused: malformed, or outside the allowed origins.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not allowed: {reason}", field.name())]
pub struct ReturnUrlRefused {
    /// The field.
    pub field: ReturnField,
    /// Why, safe to show.
    pub reason: String,
}

/// The origins a buyer may be sent back to (`[hostApp] returnOrigins`), and whether loopback
/// origins are allowed too (development).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReturnOrigins {
    exact: Vec<Origin>,
    loopback: bool,
}

impl ReturnOrigins {
    /// Allow exactly `exact`, and with `loopback` every loopback origin.
    #[must_use]
    pub fn new(exact: Vec<Origin>, loopback: bool) -> Self {
        Self { exact, loopback }
    }

    /// Whether a buyer may be sent to `url`.
    #[must_use]
    pub fn allows(&self, url: &ReturnUrl) -> bool {
        let origin = url.origin();
        self.exact.contains(origin) || (self.loopback && origin.is_loopback())
    }

    /// Parse `raw` as the return URL in `field` and check its origin.
    ///
    /// # Errors
    /// [`ReturnUrlRefused`] naming the field.
    pub fn check(&self, field: ReturnField, raw: &str) -> Result<ReturnUrl, ReturnUrlRefused> {
        let url = ReturnUrl::parse(raw).map_err(|e| ReturnUrlRefused {
            field,
            reason: e.to_string(),
        })?;
        if self.allows(&url) {
            Ok(url)
        } else {
            Err(ReturnUrlRefused {
                field,
                reason: format!(
                    "origin {} is not among the allowed return origins ([hostApp] returnOrigins)",
                    url.origin()
                ),
            })
        }
    }
}

/// Where an order's buyer goes back to in the host application, when the host said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReturnUrls {
    /// After paying (or whatever the checkout ended in).
    pub success: Option<ReturnUrl>,
    /// After leaving the checkout.
    pub cancel: Option<ReturnUrl>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins() -> ReturnOrigins {
        ReturnOrigins::new(
            vec![Origin::parse("https://app.example.com").unwrap()],
            false,
        )
    }

    #[test]
    fn only_the_exact_origins_are_allowed() {
        let allowed = origins();
        for ok in [
            "https://app.example.com/done",
            "https://APP.example.com:443/x?y=1",
            "https://app.example.com",
        ] {
            assert!(allowed.allows(&ReturnUrl::parse(ok).unwrap()), "{ok}");
        }
        for refused in [
            "http://app.example.com/done",
            "https://app.example.com:8443/done",
            "https://app.example.com.evil.test/done",
            "https://evil.test/https://app.example.com",
            "http://localhost:3000/done",
        ] {
            assert!(
                !allowed.allows(&ReturnUrl::parse(refused).unwrap()),
                "{refused}"
            );
        }
    }

    #[test]
    fn development_allows_loopback_origins() {
        let dev = ReturnOrigins::new(Vec::new(), true);
        for ok in [
            "http://localhost:3000/a",
            "http://127.0.0.1:9/b",
            "http://[::1]:8/",
        ] {
            assert!(dev.allows(&ReturnUrl::parse(ok).unwrap()), "{ok}");
        }
        assert!(!dev.allows(&ReturnUrl::parse("http://localhost.evil.test/").unwrap()));
        assert!(!dev.allows(&ReturnUrl::parse("http://127.0.0.1.evil.test/").unwrap()));
    }

    #[test]
    fn malformed_urls_are_refused() {
        for bad in [
            "",
            "/relative",
            "//app.example.com",
            "javascript:alert(1)",
            "https://user:pw@app.example.com/",
            "https://app.example.com@evil.test/",
            "https:///nohost",
            "https://app.example.com:x/",
            "https://app.example.com/a b",
            "https://app.example.com\\@evil.test",
        ] {
            assert!(ReturnUrl::parse(bad).is_err(), "{bad}");
        }
        let long = format!("https://app.example.com/{}", "a".repeat(2048));
        assert!(ReturnUrl::parse(&long).is_err());
    }

    #[test]
    fn the_outcome_is_added_to_the_query_before_the_fragment() {
        let order = OrderId::new("ord_1").unwrap();
        let cases = [
            (
                "https://a.test/done",
                "https://a.test/done?orderId=ord_1&outcome=paid",
            ),
            (
                "https://a.test/d?x=1",
                "https://a.test/d?x=1&orderId=ord_1&outcome=paid",
            ),
            (
                "https://a.test/d?#f",
                "https://a.test/d?orderId=ord_1&outcome=paid#f",
            ),
        ];
        for (url, expected) in cases {
            assert_eq!(
                ReturnUrl::parse(url).unwrap().with_outcome(&order, "paid"),
                expected
            );
        }
    }

    #[test]
    fn a_refusal_names_the_field() {
        let refused = origins()
            .check(ReturnField::CancelUrl, "https://evil.test/")
            .unwrap_err();
        assert_eq!(refused.field, ReturnField::CancelUrl);
        assert!(refused.to_string().starts_with("cancelUrl"));
    }
}
