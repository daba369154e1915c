//! Host event delivery (issue 17): how many signed events per second the service delivers to a
//! local receiver at the benchmark's concurrency (`[webhooks] concurrency = 32` in the
//! benchmark's `tally.toml`).
//!
//! The receiver is a minimal HTTP/1.1 server on loopback that answers every request `204` at
//! once and remembers each `webhook-id` (keep-alive, as the service's client reuses
//! connections). An administrator registers it as an endpoint for `credits.granted`; then the
//! benchmark writes the events in ONE statement (so that they become visible together, as a
//! burst of grants would) and measures from just before that statement until the receiver holds
//! every event id. The service does what it does in production: fan-out under its visibility
//! rule, claims with leases, HMAC-SHA256 signing per Standard Webhooks, one POST per event.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::api::Api;
use crate::database::Pool;

/// Concurrent deliveries per instance during the measurement.
pub const CONCURRENCY: usize = 32;
/// The longest the benchmark waits for every event.
const DEADLINE: Duration = Duration::from_secs(180);

/// One measured delivery run.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryRow {
    /// Events written.
    pub events: usize,
    /// Concurrent deliveries per instance.
    pub concurrency: usize,
    /// From the write to the last event received, seconds.
    pub seconds: f64,
    /// Events delivered per second.
    pub per_second: f64,
    /// Requests the receiver got beyond one per event (redeliveries).
    pub extra_requests: usize,
}

/// What the receiver saw.
#[derive(Default)]
struct Seen {
    ids: HashSet<String>,
    requests: usize,
}

/// Measure the delivery of `events` events written straight into the outbox.
///
/// # Errors
/// The receiver cannot listen, the endpoint is refused, or the events do not all arrive in time.
pub async fn run(
    api: &Api,
    admin_token: &str,
    pool: &Pool,
    events: usize,
) -> anyhow::Result<DeliveryRow> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/tally-events", listener.local_addr()?);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let receiver = tokio::spawn(accept(listener, seen.clone()));
    let registered = api
        .post_json(
            "/api/admin/webhook-endpoints",
            admin_token,
            &json!({ "url": url, "eventTypes": ["credits.granted"] }),
        )
        .await
        .context("registering the receiver")?;
    if registered["id"].as_str().is_none() {
        bail!("the endpoint was not created: {registered}");
    }
    // The endpoint starts after the newest event already visible: give its first fan-out a
    // moment, so that none of the measured events is older than its cursor.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    store::bench::write_events(pool, events, crate::now_ms()).await?;
    let result = wait_for(&seen, events, started).await;
    receiver.abort();
    let seconds = result?;
    let requests = seen.lock().map_or(0, |s| s.requests);
    Ok(DeliveryRow {
        events,
        concurrency: CONCURRENCY,
        seconds,
        per_second: events as f64 / seconds.max(f64::EPSILON),
        extra_requests: requests.saturating_sub(events),
    })
}

/// Wait until the receiver holds `events` distinct ids: the seconds since `started`.
async fn wait_for(seen: &Mutex<Seen>, events: usize, started: Instant) -> anyhow::Result<f64> {
    loop {
        let have = seen.lock().map_or(0, |s| s.ids.len());
        if have >= events {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > DEADLINE {
            bail!("only {have} of {events} events arrived in {DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Accept connections until aborted.
async fn accept(listener: TcpListener, seen: Arc<Mutex<Seen>>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(serve(stream, seen.clone()));
    }
}

/// Serve one keep-alive connection: every request answered 204, its `webhook-id` remembered.
async fn serve(mut stream: TcpStream, seen: Arc<Mutex<Seen>>) {
    let mut buffer = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 8 * 1024];
    loop {
        let Some((head_end, length, id)) = request_head(&buffer) else {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        while buffer.len() < head_end + length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        buffer.drain(..head_end + length);
        if let Ok(mut s) = seen.lock() {
            s.requests += 1;
            s.ids.extend(id);
        }
        let answer = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        if stream.write_all(answer).await.is_err() {
            return;
        }
    }
}

/// A complete request head at the start of `buffer`: where it ends, the body's length and the
/// `webhook-id`.
fn request_head(buffer: &[u8]) -> Option<(usize, usize, Option<String>)> {
    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buffer[..end]);
    let mut length = 0;
    let mut id = None;
    for line in head.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        } else if name.eq_ignore_ascii_case("webhook-id") {
            id = Some(value.to_owned());
        }
    }
    Some((end, length, id))
}

#[cfg(test)]
mod tests {
    use super::request_head;

    #[test]
    fn a_request_head_gives_its_end_its_body_length_and_its_webhook_id() {
        let request = b"POST /x HTTP/1.1\r\nwebhook-id: evt_1\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(
            request_head(request),
            Some((request.len() - 2, 2, Some("evt_1".to_owned())))
        );
        assert_eq!(request_head(b"POST /x HTTP/1.1\r\nwebhook-id: e"), None);
    }
}
