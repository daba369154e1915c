//! How the simulator signs the webhooks it sends and answers `verify-webhook-signature`.
//!
//! PayPal signs `transmission_id|transmission_time|webhook_id|crc32(body)` with RSA and a
//! certificate at `PAYPAL-CERT-URL`, and verifies its own signatures when asked. The simulator
//! is the only verifier of its signatures, so it uses an HMAC-SHA256 under a sandbox key over
//! `transmission_id|transmission_time|webhook_id|sha256(canonical event)` (base64 in
//! `PAYPAL-TRANSMISSION-SIG`), and records every transmission id it sent on the payment it was
//! about. It answers `SUCCESS` only for a recorded transmission whose headers, webhook id and
//! event are unchanged; the canonical event (keys sorted) makes the check independent of how
//! the gateway re-serializes the event.

use serde::Deserialize;
use serde_json::Value;
use signing::{b64, hex, hmac_sha256, sha256, unb64, verify_hmac_sha256};

use super::resources::iso;
use crate::credentials::CREDENTIALS;
use crate::hub::Hub;

/// The sandbox's transmission signing key (published, like every sandbox credential).
const SIGNING_KEY: &[u8] = b"tally-sandbox-paypal-transmission-key";
/// PayPal's `PAYPAL-AUTH-ALGO`.
pub(super) const AUTH_ALGO: &str = "SHA256withRSA";
/// `extra` key: the transmission ids sent about a payment, space-separated.
const TRANSMISSIONS: &str = "transmissions";
/// The most transmission ids remembered per payment (older ones stop verifying).
const MAX_TRANSMISSIONS: usize = 64;
/// The deepest event JSON canonicalized (a bound on recursion).
const MAX_DEPTH: usize = 32;

/// The `PAYPAL-CERT-URL` the simulator sends.
pub(super) fn cert_url(hub: &Hub) -> String {
    format!(
        "{}/sandbox/wallet_global/v1/notifications/certs/CERT-sandbox-tally",
        hub.public_base_url()
    )
}

/// The `PAYPAL-*` headers of a new transmission of `event`, about `payment_id`; the id is
/// recorded on the payment so that verification can find it.
pub(super) fn sign(hub: &Hub, payment_id: &str, event: &Value) -> Vec<(String, String)> {
    let transmission_id = format!("{payment_id}.{}", hub.new_id("T"));
    let transmission_time = iso(hub.now_ms());
    let message = message(
        &transmission_id,
        &transmission_time,
        CREDENTIALS.paypal_webhook_id,
        event,
    );
    record(hub, payment_id, &transmission_id);
    vec![
        ("paypal-auth-algo".into(), AUTH_ALGO.into()),
        ("paypal-cert-url".into(), cert_url(hub)),
        ("paypal-transmission-id".into(), transmission_id),
        (
            "paypal-transmission-sig".into(),
            b64(&hmac_sha256(SIGNING_KEY, message.as_bytes())),
        ),
        ("paypal-transmission-time".into(), transmission_time),
    ]
}

/// A `verify-webhook-signature` request.
#[derive(Debug, Deserialize)]
pub(super) struct VerifyRequest {
    auth_algo: String,
    cert_url: String,
    transmission_id: String,
    transmission_sig: String,
    transmission_time: String,
    webhook_id: String,
    webhook_event: Value,
}

/// Whether `request` describes a transmission this simulator sent, unchanged.
pub(super) fn verifies(hub: &Hub, request: &VerifyRequest) -> bool {
    if request.webhook_id != CREDENTIALS.paypal_webhook_id
        || request.auth_algo != AUTH_ALGO
        || request.cert_url != cert_url(hub)
    {
        return false;
    }
    let Some(signature) = unb64(&request.transmission_sig) else {
        return false;
    };
    let message = message(
        &request.transmission_id,
        &request.transmission_time,
        &request.webhook_id,
        &request.webhook_event,
    );
    recorded(hub, &request.transmission_id)
        && verify_hmac_sha256(SIGNING_KEY, message.as_bytes(), &signature)
}

fn message(
    transmission_id: &str,
    transmission_time: &str,
    webhook_id: &str,
    event: &Value,
) -> String {
    let mut canonical_event = String::new();
    canonical(event, &mut canonical_event, 0);
    format!(
        "{transmission_id}|{transmission_time}|{webhook_id}|{}",
        hex(&sha256(canonical_event.as_bytes()))
    )
}

/// JSON with object keys sorted at every level; past [`MAX_DEPTH`] values are cut to `null`
/// (such an event cannot have been sent by the simulator, so it simply fails to verify).
fn canonical(value: &Value, out: &mut String, depth: usize) {
    match value {
        _ if depth > MAX_DEPTH => out.push_str("null"),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out, depth + 1);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out, depth + 1);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn record(hub: &Hub, payment_id: &str, transmission_id: &str) {
    // A webhook about a payment the hub no longer keeps simply cannot be verified later.
    let _ = hub.update_payment(payment_id, |payment| {
        let list = payment.extra.entry(TRANSMISSIONS.to_owned()).or_default();
        let mut ids: Vec<&str> = list.split_whitespace().collect();
        ids.push(transmission_id);
        let keep = ids.len().saturating_sub(MAX_TRANSMISSIONS);
        *list = ids[keep..].join(" ");
        Ok(())
    });
}

fn recorded(hub: &Hub, transmission_id: &str) -> bool {
    let Some((payment_id, _)) = transmission_id.split_once('.') else {
        return false;
    };
    hub.payment(payment_id)
        .and_then(|p| p.extra.get(TRANSMISSIONS).cloned())
        .is_some_and(|ids| ids.split_whitespace().any(|id| id == transmission_id))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let mut out = String::new();
        canonical(
            &json!({"b": 1, "a": {"d": [1, {"y": 2, "x": 1}], "c": "é"}}),
            &mut out,
            0,
        );
        assert_eq!(out, r#"{"a":{"c":"é","d":[1,{"x":1,"y":2}]},"b":1}"#);
    }
}
