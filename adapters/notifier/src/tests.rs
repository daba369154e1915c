//! The sender against a local listener: what it sends, how it signs (checked with the Standard
//! Webhooks reference library), and which targets it refuses without opening a connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use domain::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::*;

/// A listener that answers every request with `status` and reports each request's raw text;
/// also counts the connections it accepts.
async fn receiver(
    status: u16,
) -> (
    SocketAddr,
    mpsc::UnboundedReceiver<String>,
    Arc<AtomicUsize>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0_u8; 4096];
                loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    request.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if n == 0 || complete(&text) {
                        let _ = tx.send(text);
                        break;
                    }
                }
                let answer = format!(
                    "HTTP/1.1 {status} X\r\nlocation: http://169.254.169.254/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (address, rx, connections)
}

/// Whether a raw request has its whole body (by `content-length`).
fn complete(text: &str) -> bool {
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    body.len() >= length
}

fn sender(policy: TargetPolicy) -> HttpWebhookSender {
    HttpWebhookSender::new(NotifierSettings {
        policy,
        timeout_ms: 5_000,
    })
    .unwrap()
}

fn headers_of(raw: &str) -> http::HeaderMap {
    let (head, _) = raw.split_once("\r\n\r\n").unwrap();
    let mut headers = http::HeaderMap::new();
    for line in head.lines().skip(1) {
        let (name, value) = line.split_once(':').unwrap();
        headers.append(
            http::HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
            http::HeaderValue::from_str(value.trim()).unwrap(),
        );
    }
    headers
}

fn now() -> Timestamp {
    #[allow(
        clippy::disallowed_methods,
        reason = "the reference library checks the timestamp against the real clock"
    )]
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    Timestamp::from_unix_millis(i64::try_from(since.as_millis()).unwrap())
}

#[test]
fn new_secrets_are_whsec_and_32_random_bytes() {
    let sender = sender(TargetPolicy::development());
    let a = sender.new_secret();
    let b = sender.new_secret();
    assert_ne!(a, b);
    let key = STANDARD
        .decode(a.expose().strip_prefix("whsec_").unwrap())
        .unwrap();
    assert_eq!(key.len(), 32);
    assert_eq!(format!("{a:?}"), "WebhookSecret(..)");
}

#[tokio::test]
async fn a_delivery_is_a_signed_post_that_the_reference_library_accepts_under_each_secret() {
    let (address, mut requests, _) = receiver(204).await;
    let sender = sender(TargetPolicy::development());
    let (old, new) = (sender.new_secret(), sender.new_secret());
    let payload =
        r#"{"id":"evt_1","type":"order.paid","timestamp":"2026-01-01T00:00:00Z","data":{}}"#;
    let webhook = OutgoingWebhook {
        url: format!("http://{address}/hooks?x=1"),
        message_id: "evt_1".to_owned(),
        payload: payload.to_owned(),
        secrets: vec![new.clone(), old.clone()],
        timestamp: now(),
    };
    let outcome = sender.send(&webhook).await;
    assert!(
        matches!(outcome, SendOutcome::Answered { status: 204, .. }),
        "{outcome:?}"
    );
    let raw = requests.recv().await.unwrap();
    assert!(raw.starts_with("POST /hooks?x=1 HTTP/1.1\r\n"), "{raw}");
    assert!(raw.ends_with(payload), "{raw}");
    let headers = headers_of(&raw);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["webhook-id"], "evt_1");
    let signature = headers["webhook-signature"].to_str().unwrap();
    assert_eq!(signature.split(' ').count(), 2, "{signature}");
    for secret in [&new, &old] {
        let verifier = standardwebhooks::Webhook::new(secret.expose()).unwrap();
        verifier.verify(payload.as_bytes(), &headers).unwrap();
    }
    let stranger = standardwebhooks::Webhook::new(sender.new_secret().expose()).unwrap();
    assert!(stranger.verify(payload.as_bytes(), &headers).is_err());
    let tampered = payload.replace("order.paid", "order.failed");
    let verifier = standardwebhooks::Webhook::new(new.expose()).unwrap();
    assert!(verifier.verify(tampered.as_bytes(), &headers).is_err());
}

#[tokio::test]
async fn a_redirect_is_an_answer_not_followed() {
    let (address, mut requests, connections) = receiver(302).await;
    let sender = sender(TargetPolicy::development());
    let outcome = sender
        .send(&OutgoingWebhook {
            url: format!("http://{address}/"),
            message_id: "evt_2".to_owned(),
            payload: "{}".to_owned(),
            secrets: vec![sender.new_secret()],
            timestamp: now(),
        })
        .await;
    assert!(
        matches!(outcome, SendOutcome::Answered { status: 302, .. }),
        "{outcome:?}"
    );
    requests.recv().await.unwrap();
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn production_refuses_loopback_targets_without_connecting() {
    let (address, _requests, connections) = receiver(200).await;
    let production = sender(TargetPolicy::production(false));
    let port = address.port();
    for url in [
        format!("https://127.0.0.1:{port}/"),
        format!("https://localhost:{port}/"),
        format!("https://[::ffff:127.0.0.1]:{port}/"),
        format!("https://[::1]:{port}/"),
    ] {
        let refusal = production.check_target(&url).await.unwrap_err();
        assert!(
            matches!(refusal, TargetRefusal::Address(_)),
            "{url}: {refusal}"
        );
        let outcome = production
            .send(&OutgoingWebhook {
                url: url.clone(),
                message_id: "evt_3".to_owned(),
                payload: "{}".to_owned(),
                secrets: vec![production.new_secret()],
                timestamp: now(),
            })
            .await;
        match outcome {
            SendOutcome::Failed { reason, .. } => {
                assert!(reason.starts_with("target refused"), "{reason}")
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    assert_eq!(
        production.check_target(&format!("http://{address}/")).await,
        Err(TargetRefusal::NotHttps)
    );
    assert_eq!(connections.load(Ordering::SeqCst), 0, "no request was made");
}

#[tokio::test]
async fn malformed_urls_and_other_schemes_are_refused_everywhere() {
    let development = sender(TargetPolicy::development());
    for url in [
        "not a url",
        "/relative",
        "https://user:pw@example.com/",
        "http://user@127.0.0.1/",
    ] {
        assert_eq!(
            development.check_target(url).await,
            Err(TargetRefusal::Malformed),
            "{url}"
        );
    }
    assert_eq!(
        development.check_target("ftp://127.0.0.1/").await,
        Err(TargetRefusal::Scheme)
    );
    assert_eq!(
        development.check_target("file:///etc/passwd").await,
        Err(TargetRefusal::Scheme)
    );
    assert_eq!(
        development
            .check_target("http://169.254.169.254/latest/meta-data")
            .await,
        Err(TargetRefusal::Address(
            domain::delivery::AddressClass::Metadata
        ))
    );
    assert!(
        development
            .check_target("http://127.0.0.1:9/")
            .await
            .is_ok()
    );
    assert!(
        development
            .check_target("http://localhost:9/")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn the_client_resolver_refuses_names_with_a_refused_address() {
    let resolver = PolicyResolver {
        policy: TargetPolicy::production(false),
    };
    let name: Name = "localhost".parse().unwrap();
    assert!(resolver.resolve(name).await.is_err());
    let allowing = PolicyResolver {
        policy: TargetPolicy::development(),
    };
    let name: Name = "localhost".parse().unwrap();
    let addresses: Vec<SocketAddr> = allowing.resolve(name).await.unwrap().collect();
    assert!(
        addresses.iter().all(|a| a.ip().is_loopback()),
        "{addresses:?}"
    );
}
