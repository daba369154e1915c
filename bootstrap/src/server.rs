//! The HTTP server: poem's endpoint served by hyper, configured as poem's own `Server` cannot be.
//!
//! poem 3's `Server` builds hyper's connection builder itself and exposes none of its HTTP/1
//! settings, so hyper's limit of 100 header fields stays in force and a request over it gets
//! hyper's bodiless 431 before any endpoint runs. [`serve`] is the same accept loop (one task per
//! connection, graceful drain on shutdown) with hyper told to parse up to
//! [`http_api::HTTP1_MAX_HEADERS_PARSED`] fields, so that the real limit
//! ([`http_api::HeaderLimit`], 100 fields) answers with problem JSON.
//!
//! Requests hyper cannot parse at all (a NUL or another control byte in a header, an overlong
//! URI) are still refused by hyper itself, which writes a status line and headers but no body.
//! `ProblemOnParseError` recognises that head on its way to the socket and sends the same
//! status with a problem JSON body instead ([`http_api::unparsed_request_problem`]). It looks
//! only at the first write of a response, and only at one that is a whole `HTTP/1.1` head of
//! status 400, 414 or 431 with `content-length: 0` and no content type: the API never sends
//! that (its errors all have bodies).
//!
//! Not covered: a request head larger than hyper's read buffer (about 408 KiB by default) is
//! not answered at all; hyper closes the connection (seen in a test with a 418 KB head). HTTP/2
//! requests over 16 KiB of header list are refused by h2 itself (as under poem's `Server`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use poem::listener::Acceptor;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Endpoint, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The largest HTTP/2 header list accepted, in bytes (poem's `Server` default).
const HTTP2_MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;
/// Reset streams an HTTP/2 client may leave pending before it is sent GOAWAY (poem's default).
const HTTP2_MAX_PENDING_RESETS: usize = 20;

/// Serve `endpoint` on `acceptor` until `shutdown` completes, then let in-flight requests
/// finish for at most `grace`.
///
/// # Errors
/// None today: a failed accept is logged and the loop goes on (as poem's `Server` does).
pub async fn serve<A, E>(
    mut acceptor: A,
    endpoint: E,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> io::Result<()>
where
    A: Acceptor + 'static,
    E: Endpoint<Output = Response> + 'static,
{
    let endpoint = Arc::new(endpoint);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = acceptor.accept() => match accepted {
                Ok((socket, local, remote, scheme)) => {
                    let connection = Connection {
                        endpoint: endpoint.clone(),
                        local,
                        remote,
                        scheme,
                    };
                    connections.spawn(connection.serve(socket, stop_rx.clone()));
                }
                Err(error) => tracing::warn!(%error, "accepting a connection failed"),
            },
        }
    }
    drop(acceptor);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "connections still open after the grace period are closed"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// One accepted connection and what its requests need.
struct Connection<E> {
    endpoint: Arc<E>,
    local: LocalAddr,
    remote: RemoteAddr,
    scheme: poem::http::uri::Scheme,
}

impl<E: Endpoint<Output = Response> + 'static> Connection<E> {
    async fn serve<Io>(self, socket: Io, mut stop: watch::Receiver<bool>)
    where
        Io: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let Self {
            endpoint,
            local,
            remote,
            scheme,
        } = self;
        let service = hyper::service::service_fn(move |req: poem::http::Request<Incoming>| {
            let endpoint = endpoint.clone();
            let request = poem::Request::from((req, local.clone(), remote.clone(), scheme.clone()));
            async move {
                let response: hyper::Response<_> = endpoint.get_response(request).await.into();
                Ok::<_, Infallible>(response)
            }
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .max_headers(http_api::HTTP1_MAX_HEADERS_PARSED);
        // As poem's `Server` sets them.
        builder
            .http2()
            .max_header_list_size(HTTP2_MAX_HEADER_LIST_BYTES)
            .max_pending_accept_reset_streams(HTTP2_MAX_PENDING_RESETS);
        let io = TokioIo::new(ProblemOnParseError::new(socket));
        let connection = builder.serve_connection_with_upgrades(io, service);
        tokio::pin!(connection);
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = stop.wait_for(|stopping| *stopping) => {}
        }
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}

/// A connection's IO that gives hyper's own bodiless refusals a problem JSON body (see the
/// module docs).
struct ProblemOnParseError<T> {
    inner: T,
    /// A replacement response being written: its bytes, how many are written, and how many
    /// bytes of hyper's to report written once it is all out.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<T> ProblemOnParseError<T> {
    fn new(inner: T) -> Self {
        Self {
            inner,
            replacing: None,
        }
    }
}

/// hyper's refusals are a status line, `content-length: 0` and a date: far below this.
const MAX_REFUSAL_HEAD_BYTES: usize = 512;

/// `head` with a problem JSON body, when it is hyper's bodiless refusal of an unparsable
/// request.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    // Cheap checks first: this sees every write of every response.
    if head.len() > MAX_REFUSAL_HEAD_BYTES
        || !head.starts_with(b"HTTP/1.1 4")
        || !head.ends_with(b"\r\n\r\n")
    {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let mut lines = text.trim_end_matches("\r\n").split("\r\n");
    let status_line = lines.next()?;
    let fields: Vec<&str> = lines.collect();
    let bodiless = fields
        .iter()
        .any(|f| f.eq_ignore_ascii_case("content-length: 0"));
    if !bodiless
        || fields
            .iter()
            .any(|f| f.to_ascii_lowercase().starts_with("content-type:"))
    {
        return None;
    }
    let body = http_api::unparsed_request_problem(status)?;
    let mut out = format!(
        "{status_line}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n",
        http_api::PROBLEM_CONTENT_TYPE,
        body.len()
    );
    for field in fields {
        let name = field.split(':').next().unwrap_or_default();
        if !name.eq_ignore_ascii_case("content-length") && !name.eq_ignore_ascii_case("connection")
        {
            out.push_str(field);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&body);
    Some(bytes)
}

impl<T: AsyncRead + Unpin> AsyncRead for ProblemOnParseError<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ProblemOnParseError<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none() {
            match replacement(buf) {
                Some(bytes) => this.replacing = Some((bytes, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        while let Some((bytes, written, reported)) = this.replacing.as_mut() {
            if *written == bytes.len() {
                let reported = *reported;
                this.replacing = None;
                return Poll::Ready(Ok(reported));
            }
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(0))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    // Not vectored: hyper then hands each response's head to `poll_write` whole, which is what
    // `replacement` recognises.
}

#[cfg(test)]
mod tests {
    use poem::listener::{Listener, TcpListener};
    use poem::{EndpointExt, handler};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    #[handler]
    fn hello() -> &'static str {
        "hello"
    }

    /// Serve a plain endpoint behind the header limit on port 0; its address.
    async fn start() -> std::net::SocketAddr {
        let acceptor = TcpListener::bind("127.0.0.1:0")
            .into_acceptor()
            .await
            .unwrap();
        let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
        // As `app.rs` builds it: a boxed endpoint behind the header limit.
        let endpoint = hello.with(http_api::HeaderLimit).boxed();
        tokio::spawn(serve(
            acceptor,
            endpoint,
            std::future::pending(),
            Duration::from_secs(1),
        ));
        addr
    }

    /// Send `raw` as is and read the whole answer (the server closes after a refusal; the
    /// requests here say `connection: close` otherwise).
    async fn exchange(addr: std::net::SocketAddr, raw: &[u8]) -> String {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut reader, mut writer) = stream.into_split();
        let raw = raw.to_vec();
        // The server may answer and close before it has read everything.
        let sending = tokio::spawn(async move { writer.write_all(&raw).await });
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        let read = async {
            loop {
                match reader.read(&mut chunk).await {
                    Ok(0) => break,
                    Ok(n) => answer.extend_from_slice(&chunk[..n]),
                    Err(_) => break,
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .unwrap();
        sending.abort();
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn problem_code(answer: &str) -> serde_json::Value {
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/problem+json"),
            "{answer}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        body["code"].clone()
    }

    #[tokio::test]
    async fn three_hundred_header_fields_are_a_431_problem() {
        let addr = start().await;
        // 300: refused by the header limit; 1200: by hyper, past what it parses.
        for fields in [300, 1200] {
            let mut raw = String::from("GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n");
            for i in 0..fields {
                raw.push_str(&format!("x-filler-{i}: 1\r\n"));
            }
            raw.push_str("\r\n");
            let answer = exchange(addr, raw.as_bytes()).await;
            assert!(answer.starts_with("HTTP/1.1 431 "), "{fields}: {answer}");
            assert_eq!(problem_code(&answer), "request_header_fields_too_large");
        }
    }

    #[tokio::test]
    async fn a_nul_in_a_header_value_is_a_400_problem() {
        let addr = start().await;
        let answer = exchange(
            addr,
            b"POST / HTTP/1.1\r\nhost: x\r\nidempotency-key: ab\0cd\r\ncontent-length: 0\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        assert_eq!(problem_code(&answer), "bad_request");
        assert!(answer.contains("NUL"), "{answer}");
    }

    #[test]
    fn only_a_bodiless_refusal_head_is_replaced() {
        let hyper_s = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let replaced = String::from_utf8(replacement(hyper_s).unwrap()).unwrap();
        assert!(
            replaced.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{replaced}"
        );
        assert!(replaced.contains("\r\ndate: x\r\n"), "{replaced}");
        assert!(replaced.contains("\"code\":\"bad_request\""), "{replaced}");
        for kept in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
        ] {
            assert!(
                replacement(kept).is_none(),
                "{}",
                String::from_utf8_lossy(kept)
            );
        }
    }

    #[tokio::test]
    async fn ordinary_requests_are_served() {
        let addr = start().await;
        let answer = exchange(
            addr,
            b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");
    }
}
