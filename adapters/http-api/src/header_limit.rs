//! The limits on a request's headers: at most [`MAX_REQUEST_HEADERS`] header fields and
//! [`MAX_REQUEST_HEADER_BYTES`] bytes of them; a request over either is answered 431
//! `request_header_fields_too_large`, as problem JSON.
//!
//! hyper itself refuses a request with more header fields than it parses (100 unless the server
//! says otherwise) with a bodiless 431 that no endpoint ever sees. The server therefore parses
//! up to [`HTTP1_MAX_HEADERS_PARSED`] fields and the real limit is enforced here, where the
//! refusal can carry a body. What still never reaches an endpoint: a request head larger than
//! hyper's read buffer (about 408 KiB by default), which hyper drops, and header bytes hyper
//! cannot parse at all (a NUL, a bare CR), which it answers 400 itself; the server gives that
//! answer a body with [`unparsed_request_problem`](crate::unparsed_request_problem).
//!
//! The API applies the check in its own middleware; [`HeaderLimit`] is the same check as a poem
//! middleware for whatever serves other paths on the same listener.

use poem::http::HeaderMap;
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};

use crate::problem::{Code, Problem};

/// The most header fields a request may carry.
pub const MAX_REQUEST_HEADERS: usize = 100;
/// The most bytes a request's header fields may take, counted as HTTP/1.1 sends them
/// (`name: value` and a line break each).
pub const MAX_REQUEST_HEADER_BYTES: usize = 16 * 1024;
/// How many header fields the HTTP/1 server should parse before refusing a request itself:
/// well above [`MAX_REQUEST_HEADERS`], so that this module answers, and still a bound.
pub const HTTP1_MAX_HEADERS_PARSED: usize = 1000;

/// `: ` and CRLF around each header field's name and value.
const FIELD_OVERHEAD_BYTES: usize = 4;

/// Refuse requests over the header limits with a 431 problem (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderLimit;

impl<E: Endpoint> Middleware<E> for HeaderLimit {
    type Output = HeaderLimitEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        HeaderLimitEndpoint { inner }
    }
}

/// The endpoint [`HeaderLimit`] wraps.
#[derive(Debug)]
pub struct HeaderLimitEndpoint<E> {
    inner: E,
}

impl<E: Endpoint> Endpoint for HeaderLimitEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        match check(req.headers()) {
            Ok(()) => self.inner.call(req).await.map(IntoResponse::into_response),
            Err(problem) => Ok(problem.into_response()),
        }
    }
}

/// The request's headers are within both limits.
///
/// # Errors
/// `request_header_fields_too_large` (431), saying which limit was passed.
pub(crate) fn check(headers: &HeaderMap) -> Result<(), Problem> {
    let fields = headers.len();
    if fields > MAX_REQUEST_HEADERS {
        return Err(Problem::new(
            Code::RequestHeaderFieldsTooLarge,
            format!(
                "requests may carry at most {MAX_REQUEST_HEADERS} header fields; this one has \
                 {fields}"
            ),
        ));
    }
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + FIELD_OVERHEAD_BYTES)
        .sum();
    if bytes > MAX_REQUEST_HEADER_BYTES {
        return Err(Problem::new(
            Code::RequestHeaderFieldsTooLarge,
            format!(
                "request header fields may take at most {MAX_REQUEST_HEADER_BYTES} bytes; these \
                 take {bytes}"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use poem::http::{HeaderName, HeaderValue};

    use super::*;

    fn headers(count: usize, value_bytes: usize) -> HeaderMap {
        let mut map = HeaderMap::new();
        for i in 0..count {
            let name = HeaderName::try_from(format!("x-h{i}")).unwrap();
            let value = HeaderValue::try_from("v".repeat(value_bytes)).unwrap();
            map.append(name, value);
        }
        map
    }

    #[test]
    fn at_most_100_fields_pass() {
        assert!(check(&headers(MAX_REQUEST_HEADERS, 1)).is_ok());
        let refused = check(&headers(MAX_REQUEST_HEADERS + 1, 1)).unwrap_err();
        assert_eq!(refused.status().as_u16(), 431);
        assert_eq!(refused.code(), "request_header_fields_too_large");
    }

    #[test]
    fn repeated_fields_count_one_each() {
        let mut map = HeaderMap::new();
        for _ in 0..=MAX_REQUEST_HEADERS {
            map.append("x-same", HeaderValue::from_static("v"));
        }
        assert!(check(&map).is_err());
    }

    #[test]
    fn the_fields_bytes_are_bounded() {
        assert!(check(&headers(1, MAX_REQUEST_HEADER_BYTES - 20)).is_ok());
        let refused = check(&headers(2, MAX_REQUEST_HEADER_BYTES / 2)).unwrap_err();
        assert_eq!(refused.status().as_u16(), 431);
    }

    #[test]
    fn the_server_parses_more_fields_than_are_allowed() {
        const { assert!(HTTP1_MAX_HEADERS_PARSED > MAX_REQUEST_HEADERS) };
    }
}
