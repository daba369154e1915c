//! The `tally` binary: parses the command line and hands over to [`bootstrap::cli::run`].
//!
//! Exit status: 0 on success, 2 when the configuration is invalid (or the command line is, as
//! clap reports it), 1 on any other failure.

use std::process::ExitCode;

use clap::Parser;

use bootstrap::cli::{Cli, run};

/// jemalloc rather than the C library's malloc: its background thread gives memory freed after
/// a load back to the system within seconds (`dirty_decay_ms`, 10 s by default), also while
/// no request comes, where glibc's per-thread arenas kept all of it.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
