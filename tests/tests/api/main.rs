//! Tally's black-box test binary: one binary, one module per area.

mod browser;
mod dependency_rule;
mod entitlements;
mod event_delivery;
mod events;
mod host_tokens;
mod ownership;
mod production;
mod providers;
mod purchases;
mod reliability;
mod service;
