//! Tally's use cases, over port traits.
//!
//! `ports` declares what the use cases need from the outside world (storage, payment gateways,
//! clock, ids, secrets); adapters implement those traits. `use_cases` holds one file per use
//! case; `service` wires them into the inbound traits the HTTP adapter depends on.
//!
//! Architecture Invariant: this crate depends on `domain` and on no adapter technology (no
//! tokio runtime, serde, sea-orm, poem or reqwest). `tests/tests/api/dependency_rule.rs` enforces it.
#![deny(missing_docs)]

pub mod accounts;
pub mod authorization;
pub mod callbacks;
pub mod cursor;
pub mod host_events;
pub mod inbound;
pub mod pagination;
pub mod ports;
pub mod service;
pub mod sign_up;
pub mod use_cases;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
