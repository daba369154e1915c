//! The HTTP API end to end over the in-memory fakes: one test binary, one module per area.

mod admin;
mod admin_console;
mod admin_replay;
mod auth;
mod consumption;
mod credits;
mod entitlements;
mod errors;
mod helpers;
mod offers;
mod operations;
mod payment;
mod ports;
mod webhook;
