//! The signing and encryption primitives, from the `signing` crate the sandbox uses too (so the
//! simulator signs as the providers do without sharing the gateways' parsing).

pub use ::signing::*;
