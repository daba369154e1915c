//! The payment gateways: one module per provider, each speaking its provider's real wire
//! protocol behind the narrow [`application::ports::PaymentGateway`] port.
//!
//! Layout (hyperswitch's shape): `<provider>.rs` implements the port; `<provider>/transformers.rs`
//! holds the wire structs, the provider's own amount and time rules and its status enum with its
//! exhaustive mapping into ours (unknown = pending). [`webhook`] is the fixed verification
//! pipeline every provider goes through; [`shared`] has what every provider uses: the HTTP client
//! (explicit timeouts, bounded bodies, one log line per provider call), the signing primitives,
//! money and time conversions, configuration errors and id checks. A provider module keeps only
//! what differs. Each provider is a cargo feature, all on by default.
//!
//! | id | protocol |
//! |---|---|
//! | `wallet_qr` | WeChat Pay APIv3, Native (QR) |
//! | `wallet_web` | Alipay, PC website pay |
//! | `card_gateway` | Stripe Checkout Sessions |
//! | `wallet_global` | PayPal Orders v2 and Subscriptions v1 |
//! | `mor_a` | Creem |
//! | `mor_b` | Dodo Payments |
//! | `mor_c` | Waffo Pancake |

pub mod shared;
pub mod webhook;

#[cfg(feature = "card_gateway")]
pub mod card_gateway;
#[cfg(feature = "mor_a")]
pub mod mor_a;
#[cfg(feature = "mor_b")]
pub mod mor_b;
#[cfg(feature = "mor_c")]
pub mod mor_c;
#[cfg(feature = "wallet_global")]
pub mod wallet_global;
#[cfg(feature = "wallet_qr")]
pub mod wallet_qr;
#[cfg(feature = "wallet_web")]
pub mod wallet_web;

/// The skeleton of the next provider's gateway, compiled and tested with the crate's tests.
#[cfg(test)]
pub mod template;

pub use shared::{ConfigError, GatewayContext, HttpSettings, install_crypto_provider};
