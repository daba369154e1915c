//! The HTTP client every gateway uses: configurable base URL, explicit timeouts, bounded
//! response bodies, and provider failures mapped into [`GatewayError`].
//!
//! Every call made through [`ProviderHttp::send`] is logged exactly once, through `tracing`
//! (target `gateways::provider_call`): the provider id, the method, the URL path (never the
//! query string), the status when there is one, and the latency in milliseconds; `info` for a
//! 2xx answer, `warn` for any other answer, a timeout or a transport failure. Nothing
//! here logs a header, a body or a query string, so no key, token or signature can leak
//! through it.

use std::time::{Duration, Instant};

use application::ports::GatewayError;
use domain::ProviderId;
use reqwest::{Method, RequestBuilder};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::shared::wire::{clip, printable};

/// The largest provider response body read, in bytes.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The most characters of a provider error body kept in a [`GatewayError`].
const MAX_ERROR_CHARS: usize = 300;
/// The most characters of a provider's own error message quoted by [`HttpReply::decode`].
const MAX_MESSAGE_CHARS: usize = 200;
/// The `tracing` target of the one log line per provider call.
pub const CALL_LOG_TARGET: &str = "gateways::provider_call";

/// Where a provider's API is and how long to wait for it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpSettings {
    /// The API base URL, without a trailing slash (the provider's documented default, a test
    /// mode URL, or the local sandbox).
    pub base_url: String,
    /// Total time for one request.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Time to establish a connection.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
}

/// The default total time for one request, in milliseconds (also a serde default of the
/// providers' settings).
#[must_use]
pub const fn default_timeout_ms() -> u64 {
    10_000
}

/// The default time to establish a connection, in milliseconds (also a serde default).
#[must_use]
pub const fn default_connect_timeout_ms() -> u64 {
    3_000
}

impl HttpSettings {
    /// Settings for `base_url` with the default timeouts.
    #[must_use]
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            timeout_ms: default_timeout_ms(),
            connect_timeout_ms: default_connect_timeout_ms(),
        }
    }

    /// Settings for `base_url` with the default connect timeout and `timeout_ms` when it is
    /// set (the default otherwise): the settings of a provider whose timeout is optional.
    #[must_use]
    pub fn with_timeout(base_url: impl Into<String>, timeout_ms: Option<u64>) -> Self {
        let mut settings = Self::new(base_url);
        if let Some(timeout_ms) = timeout_ms {
            settings.timeout_ms = timeout_ms;
        }
        settings
    }
}

/// A provider's API over HTTP.
#[derive(Debug, Clone)]
pub struct ProviderHttp {
    client: reqwest::Client,
    base_url: String,
    /// The provider the calls are logged for; set by the gateway ([`ProviderHttp::for_provider`]).
    provider: Option<ProviderId>,
}

/// A provider's answer: status and body.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// HTTP status.
    pub status: u16,
    /// The body (at most [`MAX_RESPONSE_BYTES`]).
    pub body: Vec<u8>,
    /// Response headers, names lower-cased.
    pub headers: Vec<(String, String)>,
}

impl HttpReply {
    /// Parse the body as JSON.
    ///
    /// # Errors
    /// [`GatewayError::BadResponse`] when it is not `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, GatewayError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| GatewayError::BadResponse(format!("unreadable JSON: {e}")))
    }

    /// A header's value.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `Ok(self)` for a 2xx answer; otherwise the matching [`GatewayError`].
    ///
    /// # Errors
    /// 4xx: [`GatewayError::Rejected`] with the provider's message; 5xx and others:
    /// [`GatewayError::Unreachable`].
    pub fn success(self) -> Result<Self, GatewayError> {
        match self.status {
            200..=299 => Ok(self),
            400..=499 => Err(GatewayError::Rejected(format!(
                "HTTP {}: {}",
                self.status,
                excerpt(&self.body)
            ))),
            _ => Err(GatewayError::Unreachable(format!("HTTP {}", self.status))),
        }
    }

    /// A 2xx answer as `T`; a 4xx answer whose body is the provider's error object `E` as
    /// [`GatewayError::Rejected`] `HTTP {status}: {code}: {message}`, with the `(code, message)`
    /// `describe` reads from it (the message clipped); any other answer as [`Self::success`]
    /// maps it.
    ///
    /// # Errors
    /// As described; an unreadable 2xx body is [`GatewayError::BadResponse`].
    pub fn decode<T: DeserializeOwned, E: DeserializeOwned>(
        self,
        describe: impl FnOnce(E) -> (String, String),
    ) -> Result<T, GatewayError> {
        if (400..500).contains(&self.status)
            && let Ok(error) = serde_json::from_slice::<E>(&self.body)
        {
            let (code, message) = describe(error);
            return Err(GatewayError::Rejected(format!(
                "HTTP {}: {code}: {}",
                self.status,
                clip(&message, MAX_MESSAGE_CHARS)
            )));
        }
        self.success()?.json()
    }
}

/// The start of a provider's error body, as printable text.
fn excerpt(body: &[u8]) -> String {
    printable(&String::from_utf8_lossy(body), MAX_ERROR_CHARS)
}

impl ProviderHttp {
    /// A client for `settings`.
    ///
    /// # Errors
    /// [`GatewayError::Unreachable`] when the TLS backend cannot start.
    pub fn new(settings: &HttpSettings) -> Result<Self, GatewayError> {
        crate::shared::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(settings.timeout_ms))
            .connect_timeout(Duration::from_millis(settings.connect_timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| GatewayError::Unreachable(format!("http client: {e}")))?;
        Ok(Self {
            client,
            base_url: settings.base_url.trim_end_matches('/').to_owned(),
            provider: None,
        })
    }

    /// The same client, logging its calls as `provider`'s.
    #[must_use]
    pub fn for_provider(mut self, provider: ProviderId) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `base_url` + `path` (`path` starts with `/`).
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The underlying client, to build requests.
    #[must_use]
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// A `method` request to `path` below the base URL.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// A `GET` of `path` below the base URL.
    pub fn get(&self, path: &str) -> RequestBuilder {
        self.request(Method::GET, path)
    }

    /// A `POST` to `path` below the base URL.
    pub fn post(&self, path: &str) -> RequestBuilder {
        self.request(Method::POST, path)
    }

    /// Send a request and read its answer, whatever its status; the call is logged once (see
    /// the module documentation).
    ///
    /// # Errors
    /// [`GatewayError::Unreachable`] on connection failures and timeouts;
    /// [`GatewayError::BadResponse`] on bodies over [`MAX_RESPONSE_BYTES`].
    pub async fn send(&self, request: RequestBuilder) -> Result<HttpReply, GatewayError> {
        let request = request
            .build()
            .map_err(|_| GatewayError::Unreachable("connection failed".to_owned()))?;
        let call = Call {
            provider: self.provider.map_or("unnamed", ProviderId::as_str),
            method: request.method().clone(),
            path: request.url().path().to_owned(),
        };
        let started = Instant::now();
        let result = self.exchange(request).await;
        call.log(&result, started.elapsed());
        result.map_err(|failure| failure.error)
    }

    /// Execute `request` and read its answer.
    async fn exchange(&self, request: reqwest::Request) -> Result<HttpReply, Failure> {
        let mut response = self.client.execute(request).await.map_err(|e| {
            let kind = if e.is_timeout() {
                "timed out"
            } else {
                "connection failed"
            };
            Failure::before_answer(GatewayError::Unreachable(kind.to_owned()))
        })?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| {
                v.to_str()
                    .ok()
                    .map(|v| (n.as_str().to_owned(), v.to_owned()))
            })
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| Failure {
            status: Some(status),
            error: GatewayError::Unreachable("body read failed".into()),
        })? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(Failure {
                    status: Some(status),
                    error: GatewayError::BadResponse("response too large".into()),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(HttpReply {
            status,
            body,
            headers,
        })
    }
}

/// A call that brought no usable answer: the status, when one came, and the error.
struct Failure {
    status: Option<u16>,
    error: GatewayError,
}

impl Failure {
    const fn before_answer(error: GatewayError) -> Self {
        Self {
            status: None,
            error,
        }
    }
}

/// What is logged about one provider call: never a header, body or query string.
struct Call {
    provider: &'static str,
    method: Method,
    path: String,
}

impl Call {
    /// The one log line of the call.
    fn log(&self, result: &Result<HttpReply, Failure>, elapsed: Duration) {
        let latency_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let (provider, method, path) = (self.provider, self.method.as_str(), self.path.as_str());
        match result {
            Ok(reply) if (200..300).contains(&reply.status) => tracing::info!(
                target: CALL_LOG_TARGET,
                provider, method, path, status = reply.status, latency_ms,
                "provider call"
            ),
            Ok(reply) => tracing::warn!(
                target: CALL_LOG_TARGET,
                provider, method, path, status = reply.status, latency_ms,
                "provider call failed"
            ),
            Err(Failure {
                status: Some(status),
                error,
            }) => tracing::warn!(
                target: CALL_LOG_TARGET,
                provider, method, path, status, latency_ms, %error,
                "provider call failed"
            ),
            Err(Failure {
                status: None,
                error,
            }) => tracing::warn!(
                target: CALL_LOG_TARGET,
                provider, method, path, latency_ms, %error,
                "provider call failed"
            ),
        }
    }
}
