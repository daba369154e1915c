//! The HTTP client every gateway uses: configurable base URL, explicit timeouts, bounded
//! response bodies, and provider failures mapped into [`GatewayError`]. Nothing here logs a
//! header or body, so no secret can leak through it.

use std::time::Duration;

use application::ports::GatewayError;
use serde::Deserialize;

/// The largest provider response body read, in bytes.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The most characters of a provider error message kept in a [`GatewayError`].
const MAX_ERROR_CHARS: usize = 300;

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

const fn default_timeout_ms() -> u64 {
    10_000
}

const fn default_connect_timeout_ms() -> u64 {
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
}

/// A provider's API over HTTP.
#[derive(Debug, Clone)]
pub struct ProviderHttp {
    client: reqwest::Client,
    base_url: String,
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
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, GatewayError> {
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
}

/// The start of a provider's error body, as printable text.
fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_ERROR_CHARS)
        .collect()
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
        })
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

    /// Send a request and read its answer, whatever its status.
    ///
    /// # Errors
    /// [`GatewayError::Unreachable`] on connection failures and timeouts;
    /// [`GatewayError::BadResponse`] on bodies over [`MAX_RESPONSE_BYTES`].
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<HttpReply, GatewayError> {
        let mut response = request.send().await.map_err(|e| {
            let kind = if e.is_timeout() {
                "timed out"
            } else {
                "connection failed"
            };
            GatewayError::Unreachable(kind.to_owned())
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
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|_| GatewayError::Unreachable("body read failed".into()))?
        {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(GatewayError::BadResponse("response too large".into()));
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
