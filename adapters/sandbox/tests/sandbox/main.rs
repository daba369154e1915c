//! The simulators end to end over real HTTP, one module per provider: the real gateway talks to
//! the simulated provider, the buyer pays on the sandbox, and the sandbox's signed webhooks come
//! back to a receiver that verifies them with the real gateway. One test binary; a provider's
//! module is built only with its cargo feature.

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
mod credential_checks;
