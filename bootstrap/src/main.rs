//! The `tally` binary: parses the command line and hands over to [`bootstrap::cli::run`].
//!
//! Exit status: 0 on success, 2 when the configuration is invalid (or the command line is, as
//! clap reports it), 1 on any other failure.

use std::process::ExitCode;

use clap::Parser;

use bootstrap::cli::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
