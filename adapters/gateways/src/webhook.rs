//! The fixed webhook verification pipeline (hyperswitch's `verify_webhook_source`).
//!
//! Every provider that signs locally goes through [`verify`] in the same order: extract the
//! signature(s) and timestamp from the request, refuse a timestamp outside the tolerance window,
//! rebuild the exact bytes the provider signed, and accept if any signature verifies (several are
//! sent while a provider rotates secrets). Providers supply only a [`WebhookScheme`]: where the
//! parts are, how the message is built, and which algorithm and key verify it. (PayPal verifies
//! by calling PayPal, which its module does after the same extraction step.)

use application::ports::{WebhookError, WebhookRequest};
use domain::Timestamp;

use crate::shared::signing::{PublicKey, rsa_sha256_verify, verify_hmac_sha256};
use crate::shared::time::unix_seconds;

/// The most signatures one request may carry (a bound on verification work).
pub const MAX_SIGNATURES: usize = 8;

/// The signature material of one webhook request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SignedParts {
    /// The signing time, in seconds since the epoch, when the provider sends one.
    pub timestamp_s: Option<i64>,
    /// Candidate signatures (raw bytes, already decoded from hex or base64).
    pub signatures: Vec<Vec<u8>>,
    /// Provider-specific values the message needs (a nonce, a message id, …).
    pub extras: Vec<(String, String)>,
}

impl SignedParts {
    /// An extra value by name.
    #[must_use]
    pub fn extra(&self, name: &str) -> Option<&str> {
        self.extras
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// How a signature is checked.
pub enum Verifier<'a> {
    /// HMAC-SHA256 with this secret.
    HmacSha256(&'a [u8]),
    /// RSA-SHA256 (PKCS#1 v1.5) with this public key.
    RsaSha256(&'a PublicKey),
}

/// A provider's webhook signing scheme.
pub trait WebhookScheme {
    /// Pull the signature(s), timestamp and extras out of the request.
    ///
    /// # Errors
    /// [`WebhookError::MissingSignature`] when a header is absent or malformed.
    fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError>;

    /// The exact bytes the provider signed.
    ///
    /// # Errors
    /// [`WebhookError::Malformed`] when the message cannot be built.
    fn message(
        &self,
        request: &WebhookRequest,
        parts: &SignedParts,
    ) -> Result<Vec<u8>, WebhookError>;

    /// The algorithm and key.
    fn verifier(&self) -> Verifier<'_>;

    /// How far the timestamp may be from now, in seconds; `None` when the provider sends none.
    fn tolerance_s(&self) -> Option<i64>;
}

/// Run the pipeline.
///
/// # Errors
/// Missing or malformed signature material, a stale or future timestamp, a signature that does
/// not verify.
pub fn verify(
    scheme: &dyn WebhookScheme,
    request: &WebhookRequest,
    now: Timestamp,
) -> Result<SignedParts, WebhookError> {
    let parts = scheme.extract(request)?;
    if parts.signatures.is_empty() || parts.signatures.len() > MAX_SIGNATURES {
        return Err(WebhookError::MissingSignature);
    }
    if let Some(tolerance) = scheme.tolerance_s() {
        let timestamp = parts.timestamp_s.ok_or(WebhookError::MissingSignature)?;
        let now_s = unix_seconds(now);
        if (now_s - timestamp).abs() > tolerance {
            return Err(WebhookError::Stale);
        }
    }
    let message = scheme.message(request, &parts)?;
    let verified = match scheme.verifier() {
        Verifier::HmacSha256(secret) => parts
            .signatures
            .iter()
            .any(|s| verify_hmac_sha256(secret, &message, s)),
        Verifier::RsaSha256(key) => parts
            .signatures
            .iter()
            .any(|s| rsa_sha256_verify(key, &message, s)),
    };
    if verified {
        Ok(parts)
    } else {
        Err(WebhookError::BadSignature)
    }
}

/// A header's value (names are lower-case in [`WebhookRequest`]).
///
/// # Errors
/// [`WebhookError::MissingSignature`] when absent.
pub fn header<'a>(request: &'a WebhookRequest, name: &str) -> Result<&'a str, WebhookError> {
    request
        .headers
        .get(&name.to_ascii_lowercase())
        .map(String::as_str)
        .ok_or(WebhookError::MissingSignature)
}

/// Standard Webhooks (<https://www.standardwebhooks.com>), which Creem and Dodo Payments sign
/// with: the three headers, the HMAC key of a `whsec_<base64>` secret, and the signed message.
/// Each provider reads `webhook-signature` by its own SDK's rules.
pub mod standard {
    use crate::shared::signing::unb64;

    /// The message id, also the event's id.
    pub const ID_HEADER: &str = "webhook-id";
    /// The signing time, in seconds.
    pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
    /// Space-separated `v1,<base64>` entries.
    pub const SIGNATURE_HEADER: &str = "webhook-signature";

    /// The HMAC-SHA256 key of a secret: the base64 after an optional `whsec_`; `None` when that
    /// is not base64 or is empty.
    #[must_use]
    pub fn key(secret: &str) -> Option<Vec<u8>> {
        unb64(secret.strip_prefix("whsec_").unwrap_or(secret)).filter(|key| !key.is_empty())
    }

    /// The signed bytes: `{id}.{timestamp}.{raw body}`.
    #[must_use]
    pub fn message(id: &str, timestamp_s: i64, body: &[u8]) -> Vec<u8> {
        let mut message = format!("{id}.{timestamp_s}.").into_bytes();
        message.extend_from_slice(body);
        message
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::shared::signing::{hex, hmac_sha256, unhex};

    /// A Stripe-like scheme: `sig: t=<s>,v1=<hex>` over `t.body`.
    struct Example(&'static [u8]);

    impl WebhookScheme for Example {
        fn extract(&self, request: &WebhookRequest) -> Result<SignedParts, WebhookError> {
            let mut parts = SignedParts::default();
            for item in header(request, "sig")?.split(',') {
                match item.split_once('=') {
                    Some(("t", t)) => parts.timestamp_s = t.parse().ok(),
                    Some(("v1", v)) => parts
                        .signatures
                        .push(unhex(v).ok_or(WebhookError::MissingSignature)?),
                    _ => {}
                }
            }
            Ok(parts)
        }
        fn message(
            &self,
            request: &WebhookRequest,
            parts: &SignedParts,
        ) -> Result<Vec<u8>, WebhookError> {
            let mut m = format!("{}.", parts.timestamp_s.unwrap_or_default()).into_bytes();
            m.extend_from_slice(&request.body);
            Ok(m)
        }
        fn verifier(&self) -> Verifier<'_> {
            Verifier::HmacSha256(self.0)
        }
        fn tolerance_s(&self) -> Option<i64> {
            Some(300)
        }
    }

    fn request(sig: &str, body: &str) -> WebhookRequest {
        let mut headers = BTreeMap::new();
        headers.insert("sig".to_owned(), sig.to_owned());
        WebhookRequest {
            headers,
            body: body.as_bytes().to_vec(),
        }
    }

    fn signed(t: i64, secret: &[u8], body: &str) -> String {
        hex(&hmac_sha256(secret, format!("{t}.{body}").as_bytes()))
    }

    #[test]
    fn the_pipeline_accepts_any_valid_signature_and_refuses_everything_else() {
        let now = Timestamp::from_unix_millis(1_000_000_000);
        let t = 1_000_000;
        let good = signed(t, b"new", "{}");
        let old = signed(t, b"old", "{}");
        let scheme = Example(b"new");
        assert!(
            verify(
                &scheme,
                &request(&format!("t={t},v1={old},v1={good}"), "{}"),
                now
            )
            .is_ok()
        );
        assert_eq!(
            verify(&scheme, &request(&format!("t={t},v1={old}"), "{}"), now),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify(&scheme, &request(&format!("t={t},v1={good}"), "{ }"), now),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify(
                &scheme,
                &request(&format!("t={},v1={good}", t - 301), "{}"),
                now
            ),
            Err(WebhookError::Stale)
        );
        assert_eq!(
            verify(
                &scheme,
                &request(&format!("t={},v1={good}", t + 301), "{}"),
                now
            ),
            Err(WebhookError::Stale)
        );
        assert_eq!(
            verify(&scheme, &request(&format!("t={t}"), "{}"), now),
            Err(WebhookError::MissingSignature)
        );
        assert_eq!(
            verify(&scheme, &request("v1=zz", "{}"), now),
            Err(WebhookError::MissingSignature)
        );
        let no_header = WebhookRequest {
            headers: BTreeMap::new(),
            body: vec![],
        };
        assert_eq!(
            verify(&scheme, &no_header, now),
            Err(WebhookError::MissingSignature)
        );
    }
}
