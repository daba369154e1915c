//! `tally serve` with OTLP export on and no collector to be found: it serves as usual.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `GET path` over plain HTTP/1.1: the status code, or `None` while nothing answers.
fn get(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn serving_goes_on_when_the_collector_cannot_be_reached() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    for file in ["payment.toml", "credits.toml"] {
        std::fs::copy(shipped.join(file), dir.path().join(file)).expect("config copied");
    }
    // Nothing listens on the collector's port: every export is refused.
    let collector = free_port();
    std::fs::write(
        dir.path().join("tally.toml"),
        format!("[telemetry]\notlpEndpoint = \"http://127.0.0.1:{collector}\"\n"),
    )
    .expect("tally.toml written");
    let port = free_port();
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(["serve", "--config"])
            .arg(dir.path())
            .env("BIND_ADDR", format!("127.0.0.1:{port}"))
            .env(
                "DATABASE_URL",
                format!("sqlite://{}/tally.db", dir.path().display()),
            )
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tally serve starts"),
    );
    let started = Instant::now();
    while get(port, "/healthz").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "tally serve never answered"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Requests make spans; their export fails; answers keep coming, and quickly.
    for _ in 0..20 {
        let asked = Instant::now();
        assert_eq!(get(port, "/api/plans"), Some(200));
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "no request waits on the exporter"
        );
    }
    assert_eq!(get(port, "/healthz"), Some(200));
    drop(server);
}
