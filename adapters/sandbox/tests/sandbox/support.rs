//! The harness every simulator module shares: the wall clock, Tally's webhook endpoint reduced
//! to the gateway's verification, and one real server holding the sandbox and that endpoint.

#![allow(
    dead_code,
    reason = "each helper serves some providers; a build with fewer provider features leaves some unused"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use application::ports::{
    AckFor, AckVerdict, Clock, PaymentGateway, VerifiedWebhook, WebhookError, WebhookRequest,
};
use domain::Timestamp;
use poem::http::StatusCode;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::web::Data;
use poem::{EndpointExt, Request, Response, Route, Server, handler, post};
use sandbox::Sandbox;

/// Real time: the sandbox stamps and the gateway checks webhooks as they happen.
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(
        clippy::disallowed_methods,
        reason = "the end-to-end tests run on real time"
    )]
    fn now(&self) -> Timestamp {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp::from_unix_millis(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }
}

/// One delivery's verification: the verified webhook, or why it was refused.
pub type Delivery = Result<VerifiedWebhook, WebhookError>;

/// Tally's webhook endpoint, reduced to the gateway's verification: every delivery's result,
/// in the order they arrived.
pub struct Receiver {
    gateway: Arc<dyn PaymentGateway>,
    deliveries: Mutex<Vec<Delivery>>,
}

impl Receiver {
    fn deliveries(&self) -> std::sync::MutexGuard<'_, Vec<Delivery>> {
        self.deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Every delivery so far.
    pub fn all(&self) -> Vec<Delivery> {
        self.deliveries().clone()
    }

    /// Every delivery since the last take, removed.
    pub fn take(&self) -> Vec<Delivery> {
        std::mem::take(&mut *self.deliveries())
    }

    /// The webhooks verified so far.
    pub fn accepted(&self) -> Vec<VerifiedWebhook> {
        self.deliveries()
            .iter()
            .filter_map(|d| d.as_ref().ok().cloned())
            .collect()
    }

    /// Why each refused webhook was refused.
    pub fn refused(&self) -> Vec<WebhookError> {
        self.deliveries()
            .iter()
            .filter_map(|d| d.as_ref().err().cloned())
            .collect()
    }

    /// The webhooks verified since the last take, removed; refusals stay.
    pub fn drain_accepted(&self) -> Vec<VerifiedWebhook> {
        let mut deliveries = self.deliveries();
        let (accepted, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut *deliveries)
            .into_iter()
            .partition(Result::is_ok);
        *deliveries = refused;
        accepted.into_iter().filter_map(Result::ok).collect()
    }

    /// The webhooks verified since the last take, removed; none may ever have been refused.
    pub fn take_accepted(&self) -> Vec<VerifiedWebhook> {
        let deliveries = self.take();
        assert!(
            deliveries.iter().all(Result::is_ok),
            "a sandbox webhook was refused"
        );
        deliveries.into_iter().filter_map(Result::ok).collect()
    }
}

#[handler]
async fn receive(request: &Request, body: Vec<u8>, receiver: Data<&Arc<Receiver>>) -> Response {
    let headers: BTreeMap<String, String> = request
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            Some((
                name.as_str().to_ascii_lowercase(),
                value.to_str().ok()?.to_owned(),
            ))
        })
        .collect();
    let result = receiver
        .gateway
        .verify_webhook(&WebhookRequest { headers, body })
        .await;
    let outcome = match &result {
        Ok(_) => AckFor::Accepted,
        Err(e) => AckFor::Refused(e.clone()),
    };
    receiver.deliveries().push(result);
    let ack = receiver.gateway.webhook_ack(&outcome);
    Response::builder()
        .status(ack_status(ack.verdict))
        .content_type(ack.content_type)
        .body(ack.body)
}

/// The HTTP status of an acknowledgement's verdict.
pub fn ack_status(verdict: AckVerdict) -> StatusCode {
    match verdict {
        AckVerdict::Accepted => StatusCode::OK,
        AckVerdict::Refused => StatusCode::BAD_REQUEST,
        AckVerdict::Unauthenticated => StatusCode::UNAUTHORIZED,
    }
}

/// The sandbox and Tally's webhook endpoint on one server.
pub struct Served<G> {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub sandbox: Sandbox,
    /// The gateway the endpoint verifies with.
    pub gateway: Arc<G>,
    pub receiver: Arc<Receiver>,
}

/// A server on a free port of 127.0.0.1: the sandbox at `/sandbox` on `clock`, and at
/// `webhook_path` Tally's webhook endpoint verifying with the gateway `gateway` builds for the
/// sandbox.
pub async fn serve<G: PaymentGateway + 'static>(
    clock: Arc<dyn Clock>,
    webhook_path: &str,
    gateway: impl FnOnce(&Sandbox) -> Arc<G>,
) -> Served<G> {
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let address = *acceptor.local_addr()[0].as_socket_addr().unwrap();
    let base = format!("http://{address}");
    let sandbox = Sandbox::new(&base, clock);
    let gateway = gateway(&sandbox);
    let receiver = Arc::new(Receiver {
        gateway: gateway.clone(),
        deliveries: Mutex::new(Vec::new()),
    });
    let app = Route::new()
        .nest("/sandbox", sandbox.routes())
        .at(webhook_path, post(receive).data(receiver.clone()));
    tokio::spawn(Server::new_with_acceptor(acceptor).run(app));
    Served {
        base,
        sandbox,
        gateway,
        receiver,
    }
}

/// An amount in US cents.
pub fn usd(minor: i64) -> domain::Money {
    domain::Money::from_minor(minor, domain::Currency::Usd).unwrap()
}

/// An amount in fen.
pub fn cny(fen: i64) -> domain::Money {
    domain::Money::from_minor(fen, domain::Currency::Cny).unwrap()
}

/// `POST {base}/sandbox/api/{path}` with a JSON body; the JSON answer, which must be a success.
pub async fn sandbox_api(base: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let response = reqwest::Client::new()
        .post(format!("{base}/sandbox/api/{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

/// Set what the saved method `method_ref`'s next off-session charges do.
pub async fn set_behaviour(base: &str, method_ref: &str, next: &str) {
    let path = format!("payment-methods/{method_ref}/behaviour");
    let answer = sandbox_api(base, &path, serde_json::json!({ "next": next })).await;
    assert_eq!(answer["next"], next);
}

/// The saved method `method_ref` as `GET {base}/sandbox/api/payment-methods` lists it.
pub async fn listed_method(base: &str, method_ref: &str) -> serde_json::Value {
    let listed: Vec<serde_json::Value> =
        reqwest::get(format!("{base}/sandbox/api/payment-methods"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    listed
        .into_iter()
        .find(|m| m["id"] == method_ref)
        .expect("the method is listed")
}
