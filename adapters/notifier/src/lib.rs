//! Tally adapter: delivers host events to the host application's webhook endpoints.
//!
//! [`HttpWebhookSender`] implements `application::ports::WebhookSender`:
//! - signs per the Standard Webhooks specification: `webhook-id`, `webhook-timestamp` (seconds)
//!   and `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` keyed by the
//!   base64-decoded `whsec_` secret, one space-separated signature per secret (two during a
//!   rotation);
//! - refuses targets the operator's [`TargetPolicy`] does not allow, at registration and again
//!   before every attempt: the scheme, then every address the host resolves to. The client's
//!   own resolver ([`PolicyResolver`]) checks the addresses of every connection it opens, so a
//!   DNS answer that changes between the check and the connection (DNS rebinding) is refused
//!   too, and the request connects only to a checked address. Redirects are never followed,
//!   proxies from the environment are ignored, and every request has a timeout.
//!
//! Boundary: nothing a caller supplies makes this send a request to an address the policy
//! refuses; a refused target is a failed attempt with a reason, never a request.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use application::ports::{OutgoingWebhook, SendOutcome, WebhookSecret, WebhookSender};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use domain::delivery::{TargetPolicy, TargetRefusal};
use hmac::{Hmac, Mac};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use sha2::Sha256;

/// The prefix of Standard Webhooks secrets.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret (the specification asks for 24 to 64).
const SECRET_BYTES: usize = 32;
/// The `User-Agent` of deliveries.
const USER_AGENT: &str = "Tally-Webhooks/1";

/// How deliveries are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifierSettings {
    /// Which targets are allowed.
    pub policy: TargetPolicy,
    /// The longest an attempt may take, DNS, connection and answer included.
    pub timeout_ms: u64,
}

/// The Standard Webhooks sender over reqwest.
#[derive(Debug, Clone)]
pub struct HttpWebhookSender {
    client: reqwest::Client,
    policy: TargetPolicy,
    timeout: Duration,
}

impl HttpWebhookSender {
    /// A sender for `settings`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built (no TLS provider).
    pub fn new(settings: NotifierSettings) -> Result<Self, reqwest::Error> {
        // Err only means a provider is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_millis(settings.timeout_ms.max(1));
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(USER_AGENT)
            .dns_resolver(PolicyResolver {
                policy: settings.policy,
            })
            .build()?;
        Ok(Self {
            client,
            policy: settings.policy,
            timeout,
        })
    }

    /// Check `url` against the policy (resolving its host); the parsed URL when allowed.
    async fn checked(&self, url: &str) -> Result<Url, TargetRefusal> {
        let url = Url::parse(url).map_err(|_| TargetRefusal::Malformed)?;
        self.policy.check_scheme(url.scheme())?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(TargetRefusal::Malformed);
        }
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.policy.check_address(IpAddr::V4(ip))?,
            Some(url::Host::Ipv6(ip)) => self.policy.check_address(IpAddr::V6(ip))?,
            Some(url::Host::Domain(domain)) => {
                let port = url.port_or_known_default().unwrap_or(443);
                tokio::time::timeout(self.timeout, checked_addresses(self.policy, domain, port))
                    .await
                    .map_err(|_| TargetRefusal::Unresolved)??;
            }
            None => return Err(TargetRefusal::Malformed),
        }
        Ok(url)
    }
}

/// Every address `host` resolves to, when the policy allows them all.
///
/// # Errors
/// No address, or one the policy refuses.
async fn checked_addresses(
    policy: TargetPolicy,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, TargetRefusal> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| TargetRefusal::Unresolved)?
        .collect();
    if addresses.is_empty() {
        return Err(TargetRefusal::Unresolved);
    }
    for address in &addresses {
        policy.check_address(address.ip())?;
    }
    Ok(addresses)
}

/// The HTTP client's resolver: a name resolves only when every address it has is allowed.
#[derive(Debug, Clone, Copy)]
pub struct PolicyResolver {
    policy: TargetPolicy,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // The port is set by the client afterwards.
            let addresses = checked_addresses(policy, &host, 0).await?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

/// The `v1,<base64>` signature of one message under one `whsec_` secret; `None` when the
/// secret is not base64.
#[must_use]
pub fn sign(
    secret: &WebhookSecret,
    message_id: &str,
    timestamp_s: i64,
    body: &str,
) -> Option<String> {
    let encoded = secret.expose();
    let key = STANDARD
        .decode(encoded.strip_prefix(SECRET_PREFIX).unwrap_or(encoded))
        .ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(message_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-signature` header: one signature per secret, space-separated.
#[must_use]
pub fn signature_header(webhook: &OutgoingWebhook, timestamp_s: i64) -> String {
    webhook
        .secrets
        .iter()
        .filter_map(|secret| sign(secret, &webhook.message_id, timestamp_s, &webhook.payload))
        .collect::<Vec<_>>()
        .join(" ")
}

fn elapsed_ms(started: Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}

/// A short reason for a request that got no answer (no URL, no secret).
fn failure_reason(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    }
}

#[async_trait]
impl WebhookSender for HttpWebhookSender {
    fn new_secret(&self) -> WebhookSecret {
        let mut bytes = [0_u8; SECRET_BYTES];
        // Without the OS random source no secret can be made safely: unrecoverable.
        getrandom::fill(&mut bytes).expect("the OS random source is available");
        WebhookSecret::new(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
    }

    async fn check_target(&self, url: &str) -> Result<(), TargetRefusal> {
        self.checked(url).await.map(|_| ())
    }

    async fn send(&self, webhook: &OutgoingWebhook) -> SendOutcome {
        let started = Instant::now();
        let url = match self.checked(&webhook.url).await {
            Ok(url) => url,
            Err(refusal) => {
                return SendOutcome::Failed {
                    reason: format!("target refused: {refusal}"),
                    latency_ms: elapsed_ms(started),
                };
            }
        };
        let timestamp_s = webhook.timestamp.unix_millis().div_euclid(1000);
        let request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("webhook-id", webhook.message_id.as_str())
            .header("webhook-timestamp", timestamp_s.to_string())
            .header("webhook-signature", signature_header(webhook, timestamp_s))
            .body(webhook.payload.clone());
        match request.send().await {
            Ok(response) => SendOutcome::Answered {
                status: response.status().as_u16(),
                latency_ms: elapsed_ms(started),
            },
            Err(error) => SendOutcome::Failed {
                reason: failure_reason(&error),
                latency_ms: elapsed_ms(started),
            },
        }
    }
}

#[cfg(test)]
mod tests;
