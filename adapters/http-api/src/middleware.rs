//! The request context around every endpoint: a request id (the client's when sane, else a new
//! one) in a tracing span and in `X-Request-Id`; the limits on request headers and bodies; the
//! catch-all mapping of framework errors (parse failures, unknown routes, missing credentials,
//! …) into problem JSON; and the request metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use poem::PathPattern;
use poem::error::{NotFoundError, ReadBodyError};
use poem::http::{HeaderValue, StatusCode};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use poem_openapi::error::{
    AuthorizationError, ContentTypeError, ParseParamError, ParsePathError, ParseRequestPayloadError,
};
use tracing::Instrument;

use crate::auth::unauthorized;
use crate::header_limit;
use crate::metrics;
use crate::problem::{Code, Problem};
use crate::webhook::WEBHOOK_PATH_PREFIX;

/// The request id header, in and out.
pub(crate) const REQUEST_ID_HEADER: &str = "x-request-id";
/// The longest client-sent request id that is kept.
const MAX_REQUEST_ID_CHARS: usize = 64;

/// Milliseconds since the epoch, from the service's clock.
pub(crate) type MillisSource = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The largest request bodies, by kind of endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) json_bytes: usize,
    pub(crate) webhook_bytes: usize,
}

/// The middleware (see the module docs).
pub(crate) struct RequestContext {
    now_millis: MillisSource,
    counter: Arc<AtomicU64>,
    limits: BodyLimits,
}

impl RequestContext {
    pub(crate) fn new(now_millis: MillisSource, limits: BodyLimits) -> Self {
        Self {
            now_millis,
            counter: Arc::new(AtomicU64::new(0)),
            limits,
        }
    }
}

impl<E: Endpoint> Middleware<E> for RequestContext {
    type Output = RequestContextEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        RequestContextEndpoint {
            inner,
            now_millis: self.now_millis.clone(),
            counter: self.counter.clone(),
            limits: self.limits,
        }
    }
}

/// The endpoint the middleware wraps.
pub(crate) struct RequestContextEndpoint<E> {
    inner: E,
    now_millis: MillisSource,
    counter: Arc<AtomicU64>,
    limits: BodyLimits,
}

impl<E: Endpoint> Endpoint for RequestContextEndpoint<E> {
    type Output = Response;

    async fn call(&self, mut req: Request) -> poem::Result<Response> {
        let started = Instant::now();
        let request_id = self.request_id(&req);
        let method = req.method().clone();
        let span = tracing::info_span!(
            "request",
            request_id = %request_id,
            method = %method,
            path = %req.uri().path(),
        );
        async move {
            // Paths under the webhook route take the webhook body limit.
            let limit = if req.uri().path().starts_with(WEBHOOK_PATH_PREFIX) {
                self.limits.webhook_bytes
            } else {
                self.limits.json_bytes
            };
            let checked = match header_limit::check(req.headers()) {
                Ok(()) => buffer_body(&mut req, limit).await,
                Err(problem) => Err(problem),
            };
            let mut response = match checked {
                Ok(()) => match self.inner.call(req).await {
                    Ok(output) => output.into_response(),
                    Err(error) => error_response(error),
                },
                Err(problem) => problem.into_response(),
            };
            let route = response
                .data::<PathPattern>()
                .map_or_else(|| "unmatched".to_owned(), |p| p.0.to_string());
            let status = response.status();
            if let Ok(value) = HeaderValue::from_str(&request_id) {
                response.headers_mut().insert(REQUEST_ID_HEADER, value);
            }
            metrics::record_request(method.as_str(), &route, status.as_u16(), started.elapsed());
            tracing::debug!(%status, route, "request done");
            Ok(response)
        }
        .instrument(span)
        .await
    }
}

impl<E> RequestContextEndpoint<E> {
    /// The client's `X-Request-Id` when it is short and plain, else `<millis hex>-<counter hex>`.
    fn request_id(&self, req: &Request) -> String {
        let sent = req
            .headers()
            .get(REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| is_sane_request_id(v));
        match sent {
            Some(id) => id.to_owned(),
            None => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                format!("{:x}-{n:06x}", (self.now_millis)())
            }
        }
    }
}

fn is_sane_request_id(id: &str) -> bool {
    (1..=MAX_REQUEST_ID_CHARS).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// Read the body up to `limit` bytes and put it back, so no handler can read more.
async fn buffer_body(req: &mut Request, limit: usize) -> Result<(), Problem> {
    let declared = req
        .headers()
        .get(poem::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        Problem::new(
            Code::PayloadTooLarge,
            format!("request bodies here are limited to {limit} bytes"),
        )
    };
    if declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX)) {
        return Err(too_large());
    }
    match req.take_body().into_bytes_limit(limit).await {
        Ok(bytes) => {
            req.set_body(bytes);
            Ok(())
        }
        Err(ReadBodyError::PayloadTooLarge) => Err(too_large()),
        Err(e) => Err(Problem::new(
            Code::BadRequest,
            format!("the request body could not be read: {e}"),
        )),
    }
}

/// A framework error as problem JSON: parse failures are 400s, a missing credential 401, an
/// unknown route 404; anything else keeps its status, and a 5xx is logged.
fn error_response(error: poem::Error) -> Response {
    let pattern = error.data::<PathPattern>().cloned();
    let status = error.status();
    let problem = if error.is::<ParseRequestPayloadError>()
        || error.is::<ParseParamError>()
        || error.is::<ParsePathError>()
    {
        Problem::bad_input(error.to_string())
    } else if error.is::<ContentTypeError>() {
        Problem::new(Code::BadRequest, format!("{error}; send application/json"))
    } else if error.is::<AuthorizationError>() {
        unauthorized()
    } else if error.is::<NotFoundError>() || status == StatusCode::NOT_FOUND {
        Problem::new(Code::NotFound, "no such resource")
    } else if status == StatusCode::METHOD_NOT_ALLOWED {
        Problem::new(
            Code::MethodNotAllowed,
            "this path does not take this method",
        )
    } else if status == StatusCode::PAYLOAD_TOO_LARGE {
        Problem::new(Code::PayloadTooLarge, "request body too large")
    } else if status.is_server_error() {
        Problem::internal(&error)
    } else {
        Problem::with_status(Code::BadRequest, status, error.to_string())
    };
    let mut response = problem.into_response();
    if let Some(pattern) = pattern {
        response.set_data(pattern);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_request_ids_are_kept() {
        assert!(is_sane_request_id("abc-123_x.y:z"));
        assert!(!is_sane_request_id(""));
        assert!(!is_sane_request_id("has space"));
        assert!(!is_sane_request_id(&"a".repeat(65)));
    }
}
