//! Tally's settings, wiring and command line.
//!
//! `bootstrap` is the only crate that sees every other one: it reads the configuration files,
//! builds the adapters and hands them to the application. The `tally` binary (`src/main.rs`)
//! only parses the command line and calls [`cli::run`].
//!
//! - [`catalog`]: the static plan catalog (`payment.toml`) and the consumption rules
//!   (`credits.toml`), read exactly and validated as a whole.
//! - [`cli`]: the `tally` subcommands.

pub mod app;
pub mod catalog;
pub mod cli;
pub mod host_app;
pub mod host_tokens;
pub mod providers;
pub mod seams;
pub mod server;
pub mod settings;
pub mod sign_up;
pub mod telemetry;
pub mod webhooks;
