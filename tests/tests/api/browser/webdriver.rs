//! A small W3C WebDriver client for the browser tests: it starts `chromedriver` on a free
//! loopback port (killed on drop), opens one headless Chromium session, and offers the dozen
//! commands the tests use (navigate, find, click, type, read text, run a script, screenshot),
//! each with a bounded wait.
//!
//! Written over the `reqwest` client the test crate already has, instead of a WebDriver or CDP
//! crate, to add no second HTTP or TLS stack and no browser download to the build.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// Where Debian installs Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Where Debian installs ChromeDriver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The W3C key of an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for an element, text or address lasts at most.
pub const WAIT: Duration = Duration::from_secs(15);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);

/// The viewport a session emulates.
#[derive(Debug, Clone, Copy)]
pub enum Viewport {
    /// A laptop window, 1280 by 900.
    Desktop,
    /// A phone, 390 by 844 CSS pixels (mobile emulation).
    Phone,
}

/// Whether Chromium and ChromeDriver are installed. With `CI=true` their absence is a failure;
/// elsewhere the caller skips its test.
///
/// # Panics
/// On CI, when either is missing.
#[must_use]
pub fn browser_available(test: &str) -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {CHROMIUM} and {CHROMEDRIVER} are required on CI (.ci/run installs them)"
        );
        eprintln!(
            "note: {test} skipped: install chromium and chromium-driver to run the browser tests"
        );
    }
    present
}

/// A running chromedriver with one browser session.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium (also when a test panicked, hence a plain blocking
        // request here); killing the driver then ends anything left.
        end_session(&self.base);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `DELETE /session/{id}` over a plain blocking socket, bounded by a 5 s timeout.
fn end_session(session_url: &str) {
    use std::io::{Read, Write};
    let Some(rest) = session_url.strip_prefix("http://") else {
        return;
    };
    let Some((host, path)) = rest.split_once('/') else {
        return;
    };
    let Ok(mut stream) = std::net::TcpStream::connect(host) else {
        return;
    };
    let timeout = Some(Duration::from_secs(5));
    let _ = stream.set_read_timeout(timeout);
    let _ = stream.set_write_timeout(timeout);
    let request = format!(
        "DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        // The first bytes of the answer come once the browser has closed; the rest is not
        // needed (the driver may keep the connection open).
        let mut first = [0_u8; 64];
        let _ = stream.read(&mut first);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn capabilities(profile: &Path, viewport: Viewport) -> Value {
    let mut args = vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--hide-scrollbars".to_owned(),
        "--lang=en-US".to_owned(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let mut options = json!({ "binary": CHROMIUM });
    match viewport {
        Viewport::Desktop => args.push("--window-size=1280,900".to_owned()),
        Viewport::Phone => {
            options["mobileEmulation"] =
                json!({ "deviceMetrics": { "width": 390, "height": 844, "pixelRatio": 2.0 } });
        }
    }
    options["args"] = json!(args);
    json!({ "capabilities": { "alwaysMatch": {
        "browserName": "chrome",
        "pageLoadStrategy": "normal",
        "timeouts": { "pageLoad": 30_000, "script": 10_000, "implicit": 0 },
        "goog:chromeOptions": options,
    } } })
}

impl Browser {
    /// Start chromedriver and open a Chromium session.
    ///
    /// # Panics
    /// When the driver or the browser does not start (a test failure).
    pub async fn start(viewport: Viewport) -> Self {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("http client");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Self {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            http,
            _profile: profile,
        };
        browser.wait_for_driver().await;
        let caps = capabilities(browser._profile.path(), viewport);
        let created = browser.command("POST", "/session", Some(caps)).await;
        let id = created["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        browser.base = format!("{}/session/{id}", browser.base);
        browser
    }

    async fn wait_for_driver(&self) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let ready = self.http.get(format!("{}/status", self.base)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("chromedriver did not start within {WAIT:?}");
    }

    /// Send a command; its `value`, or a panic naming the WebDriver error.
    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_command(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("webdriver {method} {path}: {e}"))
    }

    async fn try_command(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let response = request.send().await.map_err(|e| e.to_string())?;
        let ok = response.status().is_success();
        let value: Value = response.json().await.map_err(|e| e.to_string())?;
        if ok {
            Ok(value["value"].clone())
        } else {
            Err(value["value"]["message"]
                .as_str()
                .unwrap_or("error")
                .to_owned())
        }
    }

    /// Navigate to `url` and wait for the page to load.
    pub async fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({ "url": url })))
            .await;
    }

    /// The current address.
    pub async fn url(&self) -> String {
        self.command("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Wait until the address contains `part`.
    ///
    /// # Panics
    /// When it does not within [`WAIT`].
    pub async fn wait_for_url(&self, part: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let url = self.url().await;
            if url.contains(part) {
                return url;
            }
            assert!(
                Instant::now() < deadline,
                "address never contained {part:?}; at {url}"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    async fn try_find(&self, css: &str) -> Option<String> {
        let body = json!({ "using": "css selector", "value": css });
        let found = self
            .try_command("POST", "/element", Some(body))
            .await
            .ok()?;
        found[ELEMENT_KEY].as_str().map(str::to_owned)
    }

    /// Wait for an element matching `css`; its reference.
    ///
    /// # Panics
    /// When none appears within [`WAIT`].
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(id) = self.try_find(css).await {
                return id;
            }
            assert!(
                Instant::now() < deadline,
                "no element matches {css:?} on {}",
                self.url().await
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether an element matching `css` exists now.
    pub async fn exists(&self, css: &str) -> bool {
        self.try_find(css).await.is_some()
    }

    /// Click the element matching `css`, first scrolled to the middle of the window (as a
    /// person would, so the sticky header never covers it).
    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        let element = json!({ ELEMENT_KEY: id });
        let script = "arguments[0].scrollIntoView({block: 'center', inline: 'center'})";
        let body = json!({ "script": script, "args": [element] });
        self.command("POST", "/execute/sync", Some(body)).await;
        self.command("POST", &format!("/element/{id}/click"), None)
            .await;
    }

    /// Type `text` into the element matching `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// The rendered text of the element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        let id = self.find(css).await;
        let value = self
            .command("GET", &format!("/element/{id}/text"), None)
            .await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// The rendered text of the element matching `css` now, if there is one and it is still
    /// on the page when read.
    async fn try_text(&self, css: &str) -> Option<String> {
        let id = self.try_find(css).await?;
        let path = format!("/element/{id}/text");
        let value = self.try_command("GET", &path, None).await.ok()?;
        Some(value.as_str().unwrap_or_default().to_owned())
    }

    /// Wait until the element matching `css` shows text containing `needle`; the text.
    ///
    /// # Panics
    /// When it does not within [`WAIT`].
    pub async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            // The page may be replaced between finding the element and reading it (a form
            // posted just before reloads it): a stale element is looked for again.
            if let Some(text) = self.try_text(css).await {
                if text.contains(needle) {
                    return text;
                }
                assert!(
                    Instant::now() < deadline,
                    "{css:?} never showed {needle:?}: {text:?}"
                );
            } else {
                assert!(Instant::now() < deadline, "{css:?} never appeared");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether the element matching `css` is displayed.
    pub async fn is_displayed(&self, css: &str) -> bool {
        let id = self.find(css).await;
        let value = self
            .command("GET", &format!("/element/{id}/displayed"), None)
            .await;
        value.as_bool().unwrap_or(false)
    }

    /// Run `script` in the page; its return value.
    pub async fn script(&self, script: &str) -> Value {
        let body = json!({ "script": script, "args": [] });
        self.command("POST", "/execute/sync", Some(body)).await
    }

    /// Send Chrome DevTools command `cmd` with `params` (through ChromeDriver); its result.
    pub async fn devtools(&self, cmd: &str, params: Value) -> Value {
        let body = json!({ "cmd": cmd, "params": params });
        self.command("POST", "/goog/cdp/execute", Some(body)).await
    }

    /// Save a PNG of the page (the whole page on the desktop viewport) under
    /// `target/browser-screenshots/<name>.png`; its path.
    pub async fn screenshot(&self, name: &str, viewport: Viewport) -> std::path::PathBuf {
        if matches!(viewport, Viewport::Desktop) {
            // Back to the normal window first, so an earlier tall screenshot does not stretch
            // this page; then as tall as the page.
            let normal = json!({ "width": 1280, "height": 900 });
            self.command("POST", "/window/rect", Some(normal)).await;
            let height = self
                .script("return document.documentElement.scrollHeight")
                .await;
            let height = height.as_u64().unwrap_or(900).clamp(600, 6_000);
            let rect = json!({ "width": 1280, "height": height + 140 });
            self.command("POST", "/window/rect", Some(rect)).await;
        }
        let encoded = self.command("GET", "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }
}

/// `target/browser-screenshots` of this workspace (or of `CARGO_TARGET_DIR`).
fn screenshot_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        std::path::PathBuf::from,
    );
    target.join("browser-screenshots")
}
