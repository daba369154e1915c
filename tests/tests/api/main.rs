//! Tally's black-box test binary: one binary, one module per area.

mod dependency_rule;
mod purchases;
mod service;
