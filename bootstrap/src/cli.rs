//! The `tally` command line: one subcommand per operator task.
//!
//! Each subcommand is a variant of [`Command`] with its own argument struct and its own module
//! that runs it; `serve`, `migrate` and `admin` join `check-config` the same way. [`run`] maps a
//! subcommand's outcome to the process exit status.

mod check_config;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Exit status of a command refused because the configuration is invalid.
pub const EXIT_INVALID_CONFIG: u8 = 2;

/// `tally`: the payment and credits service.
#[derive(Debug, Parser)]
#[command(
    name = "tally",
    version,
    about = "Tally: the payment and credits service"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate payment.toml and credits.toml and print the plans they declare
    CheckConfig(ConfigDirArgs),
}

/// Where the configuration files are.
#[derive(Debug, Clone, Args)]
pub struct ConfigDirArgs {
    /// Directory holding payment.toml and credits.toml
    #[arg(long, value_name = "DIR", default_value = "config")]
    pub config: PathBuf,
}

/// Run a parsed command line.
///
/// # Errors
/// Failures that are not about the configuration, such as a closed stdout; an invalid
/// configuration is an `Ok` with [`EXIT_INVALID_CONFIG`].
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::CheckConfig(args) => {
            check_config::run(&args, &mut io::stdout().lock(), &mut io::stderr().lock())
        }
    }
}
