//! The `tally` command line: one subcommand per operator task.
//!
//! Each subcommand is a variant of [`Command`] with its own argument struct and its own module
//! that runs it; `serve`, `migrate` and `admin` join `check-config` the same way. [`run`] maps a
//! subcommand's outcome to the process exit status.

mod admin;
mod check_config;
mod migrate;
mod serve;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Exit status of a command refused because the configuration is invalid.
pub const EXIT_INVALID_CONFIG: u8 = 2;
/// Exit status of `check-config --online` when a live provider did not accept its credentials
/// (refused, unreachable, or an unexpected answer).
pub const EXIT_PROVIDER_CHECK_FAILED: u8 = 3;

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
    #[command(after_long_help = CHECK_CONFIG_HELP)]
    CheckConfig(CheckConfigArgs),
    /// Run the service (settings from tally.toml and the environment)
    Serve(ConfigDirArgs),
    /// Apply, roll back or list database migrations
    Migrate(MigrateArgs),
    /// Administration tasks
    #[command(subcommand)]
    Admin(AdminCommand),
}

/// The rest of `tally check-config --help`: what is checked against production, and `--online`.
const CHECK_CONFIG_HELP: &str = "\
Checks everything `tally serve` checks before it starts, with the same tally.toml and
environment (APP_ENV, APP_BASE_URL, ...): the catalog, the providers that are live (a
[providers.<id>] table), sandboxed (development) or off (production), and the host
application's key.

Test and live keys: with APP_ENV=production, a live provider whose credentials are test-mode
ones is refused, naming the provider and the setting, because a deployment on test keys takes
no money while looking healthy. Test mode is: card_gateway secretKey sk_test_/rk_test_;
wallet_global sandbox = true (or a sandbox.paypal.com baseUrl); mor_a testMode = true or a
creem_test_ apiKey; mor_b testMode = true; mor_c mode = \"test\"; wallet_web a baseUrl on
Alipay's sandbox (alipaydev.com). wallet_qr (WeChat Pay) has no test mode. Development runs
on test keys freely.

--online: after the checks pass, build each live provider's gateway with its credentials and
make one authenticated call that changes nothing (card_gateway GET /v1/balance; wallet_global
an OAuth access token; mor_a GET /v1/products/search; mor_b GET /products; mor_c a GraphQL read
of the store; wallet_qr and wallet_web a look-up of an order that does not exist). Each live
provider gets one line: accepted (and the credentials' mode), credentials refused (the
provider's error code and message), unreachable, or an unexpected answer. Sandboxed providers
are not called.

Exit status: 0 when everything passed; 2 when the configuration is invalid; 3 when --online
found a live provider that did not accept its credentials.";

/// `tally check-config`.
#[derive(Debug, Clone, Args)]
pub struct CheckConfigArgs {
    /// Where the configuration files are.
    #[command(flatten)]
    pub dir: ConfigDirArgs,
    /// Also call each live provider once with its credentials and report what answered
    #[arg(long)]
    pub online: bool,
}

/// `tally migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// What to do
    #[arg(value_enum)]
    pub direction: MigrateDirection,
    /// Directory holding tally.toml
    #[arg(long, value_name = "DIR", default_value = "config")]
    pub config: PathBuf,
}

/// Which way to migrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MigrateDirection {
    /// Apply every pending step
    Up,
    /// Roll back the newest applied step
    Down,
    /// List applied and pending steps
    Status,
}

/// `tally admin …`.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a user (with --admin, an administrator); the password is read from the
    /// TALLY_PASSWORD environment variable or standard input
    CreateUser(CreateUserArgs),
}

/// `tally admin create-user`.
#[derive(Debug, Clone, Args)]
pub struct CreateUserArgs {
    /// The user's e-mail address
    #[arg(long)]
    pub email: String,
    /// Make the user an administrator
    #[arg(long)]
    pub admin: bool,
    /// Directory holding tally.toml
    #[arg(long, value_name = "DIR", default_value = "config")]
    pub config: PathBuf,
}

/// Where the configuration files are.
#[derive(Debug, Clone, Args)]
pub struct ConfigDirArgs {
    /// Directory holding payment.toml and credits.toml
    #[arg(long, value_name = "DIR", default_value = "config")]
    pub config: PathBuf,
}

/// A runtime for the commands that talk to the database or serve.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))
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
        Command::Serve(args) => serve::run(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Admin(AdminCommand::CreateUser(args)) => admin::create_user(&args),
    }
}
