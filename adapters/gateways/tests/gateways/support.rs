//! The harness every provider module shares: recorded fixtures, a gateway context on a fixed
//! clock, plan texts and money. A provider module keeps only what is its provider's own.

#![allow(
    dead_code,
    reason = "each helper serves some providers; a build with fewer provider features leaves some unused"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use application::testing::FixedClock;
use domain::{Currency, Money, PlanText};
use gateways::shared::ProviderHttp;
use gateways::{GatewayContext, HttpSettings};

/// A recorded payload from `fixtures/<provider>/<name>`.
pub fn fixture(provider: &str, name: &str) -> Vec<u8> {
    let path = format!("{}/fixtures/{provider}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What a gateway is built with: an HTTP client for `http`, a clock fixed at `now_ms`, and
/// whether it talks to the local sandbox.
pub fn context(http: &HttpSettings, now_ms: i64, sandbox: bool) -> GatewayContext {
    GatewayContext {
        http: ProviderHttp::new(http).unwrap(),
        clock: Arc::new(FixedClock::at(now_ms)),
        sandbox,
    }
}

/// A plan's texts: `name` in English only.
pub fn english(name: &str) -> BTreeMap<String, PlanText> {
    let mut i18n = BTreeMap::new();
    i18n.insert(
        "en".to_owned(),
        PlanText {
            name: name.into(),
            ..PlanText::default()
        },
    );
    i18n
}

/// An amount in US cents.
pub fn usd(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Usd).unwrap()
}

/// An amount in euro cents.
pub fn eur(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Eur).unwrap()
}

/// An amount in fen.
pub fn cny(fen: i64) -> Money {
    Money::from_minor(fen, Currency::Cny).unwrap()
}
