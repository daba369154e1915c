//! The pages' static assets (`/assets/app.css`, `/assets/app.js`, `/assets/favicon.svg`),
//! embedded at build time and served with cache headers.
//!
//! Pages link each asset with `?v=<content hash>`; a request carrying the current hash is
//! cached for a year (`immutable`), any other is revalidated, so a deploy never serves stale
//! CSS or JS.

use poem::http::{StatusCode, header};
use poem::{Request, Response};

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
    version: u64,
}

const CSS: &str = include_str!("../assets/app.css");
const JS: &str = include_str!("../assets/app.js");
const FAVICON: &str = include_str!("../assets/favicon.svg");

/// FNV-1a, 64 bits: a content fingerprint for cache busting (not security).
const fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

const ASSETS: [Asset; 3] = [
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: CSS,
        version: fingerprint(CSS.as_bytes()),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: JS,
        version: fingerprint(JS.as_bytes()),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: FAVICON,
        version: fingerprint(FAVICON.as_bytes()),
    },
];

fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// The versioned URL of asset `name` (`/assets/app.css?v=…`).
pub(crate) fn url(name: &str) -> String {
    match find(name) {
        Some(asset) => format!("/assets/{}?v={:016x}", asset.name, asset.version),
        None => format!("/assets/{name}"),
    }
}

/// `GET /assets/{name}`.
pub(crate) async fn serve(request: Request) -> Response {
    let name = request.raw_path_param("name").unwrap_or_default();
    let Some(asset) = find(name) else {
        return Response::builder().status(StatusCode::NOT_FOUND).finish();
    };
    let current = format!("v={:016x}", asset.version);
    let versioned = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|pair| pair == current));
    let cache = if versioned {
        "public, max-age=31536000, immutable"
    } else {
        "public, max-age=0, must-revalidate"
    };
    Response::builder()
        .header(header::CONTENT_TYPE, asset.content_type)
        .header(header::CACHE_CONTROL, cache)
        .header(header::ETAG, format!("\"{:016x}\"", asset.version))
        .body(asset.body)
}
