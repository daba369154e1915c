//! The HTTP API end to end over the in-memory fakes: one test binary, one module per area.

mod admin;
mod auth;
mod consumption;
mod credits;
mod entitlements;
mod errors;
mod helpers;
mod operations;
mod payment;
mod webhook;
