//! The payment gateways, one module per provider against a wiremock provider and recorded
//! payloads, plus the checks that span providers. One test binary; a provider's module is built
//! only with its cargo feature, so `--no-default-features --features <provider>` still tests
//! that provider alone.

mod support;

#[cfg(feature = "card_gateway")]
mod card_gateway;
#[cfg(feature = "mor_a")]
mod mor_a;
#[cfg(feature = "mor_b")]
mod mor_b;
#[cfg(feature = "mor_c")]
mod mor_c;
#[cfg(feature = "wallet_global")]
mod wallet_global;
#[cfg(feature = "wallet_qr")]
mod wallet_qr;
#[cfg(feature = "wallet_web")]
mod wallet_web;

#[cfg(all(
    feature = "wallet_qr",
    feature = "wallet_web",
    feature = "card_gateway",
    feature = "wallet_global",
    feature = "mor_a",
    feature = "mor_b",
    feature = "mor_c"
))]
mod fuzz_webhooks;
#[cfg(feature = "mor_a")]
mod provider_calls;
