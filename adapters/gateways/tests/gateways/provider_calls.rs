//! One structured log line per outbound provider call, emitted by the shared HTTP client for
//! every gateway: provider, method, path without the query string, status and latency; `info`
//! for an answer, `warn` for a failure; never a key, header, body or query string.

use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::support::{self};
use application::ports::{PaymentGateway, PaymentRef};
use domain::OrderId;
use gateways::mor_a::{MorAGateway, MorASettings};
use gateways::shared::http::CALL_LOG_TARGET;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "creem_test_very_secret_key_0123456789";
const CHECKOUT_ID: &str = "ch_query_value_42";

/// Everything logged while it is the default subscriber, as JSON lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The lines of the provider-call target.
    fn calls(&self) -> Vec<Value> {
        self.text()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|line| line["target"] == CALL_LOG_TARGET)
            .collect()
    }
}

/// Query a Creem checkout at `base_url` with every `info` and louder line captured.
async fn query_logged(base_url: &str) -> Captured {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let mut settings = MorASettings::new(API_KEY, "whsec_creem_test");
    settings.base_url = Some(base_url.to_owned());
    settings.timeout_ms = 2_000;
    let context = support::context(&settings.http(), 1_728_734_400_000, false);
    let gateway = MorAGateway::new(&settings, context).unwrap();
    let payment = PaymentRef {
        order_id: OrderId::new("ord_01J9ZK4M2QW").unwrap(),
        provider_reference: Some(CHECKOUT_ID.to_owned()),
    };
    // The outcome is the other tests' business; only the log of the call matters here.
    let _ = gateway.query_payment(&payment).await;
    captured
}

/// No key, query string or query value anywhere in what was logged.
fn assert_nothing_secret(captured: &Captured) {
    let text = captured.text();
    for secret in [API_KEY, CHECKOUT_ID, "checkout_id", "x-api-key"] {
        assert!(!text.contains(secret), "{secret:?} was logged: {text}");
    }
}

#[tokio::test]
async fn a_provider_call_is_logged_once_at_info_with_its_method_path_status_and_latency() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/checkouts"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"id": CHECKOUT_ID, "status": "pending"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let captured = query_logged(&server.uri()).await;
    let calls = captured.calls();
    assert_eq!(calls.len(), 1, "{}", captured.text());
    let call = &calls[0];
    assert_eq!(call["level"], "INFO");
    assert_eq!(call["provider"], "mor_a");
    assert_eq!(call["method"], "GET");
    assert_eq!(call["path"], "/v1/checkouts");
    assert_eq!(call["status"], 200);
    assert!(call["latency_ms"].is_u64(), "{call}");
    assert_nothing_secret(&captured);
}

#[tokio::test]
async fn a_provider_error_answer_is_logged_once_at_warn_with_its_status() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/checkouts"))
        .respond_with(ResponseTemplate::new(503).set_body_string(API_KEY))
        .expect(1)
        .mount(&server)
        .await;
    let captured = query_logged(&server.uri()).await;
    let calls = captured.calls();
    assert_eq!(calls.len(), 1, "{}", captured.text());
    assert_eq!(calls[0]["level"], "WARN");
    assert_eq!(calls[0]["provider"], "mor_a");
    assert_eq!(calls[0]["path"], "/v1/checkouts");
    assert_eq!(calls[0]["status"], 503);
    assert_nothing_secret(&captured);
}

#[tokio::test]
async fn a_call_that_gets_no_answer_is_logged_once_at_warn_without_a_status() {
    // Nothing listens on port 9 (discard) here: the connection is refused.
    let captured = query_logged("http://127.0.0.1:9").await;
    let calls = captured.calls();
    assert_eq!(calls.len(), 1, "{}", captured.text());
    assert_eq!(calls[0]["level"], "WARN");
    assert_eq!(calls[0]["provider"], "mor_a");
    assert_eq!(calls[0]["method"], "GET");
    assert_eq!(calls[0]["path"], "/v1/checkouts");
    assert!(calls[0].get("status").is_none(), "{}", calls[0]);
    assert_eq!(calls[0]["error"], "provider unreachable: connection failed");
    assert_nothing_secret(&captured);
}
