//! `tally admin create-user`: make an account, and the first administrator.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::Context;
use application::accounts::Role;

use super::{CreateUserArgs, EXIT_INVALID_CONFIG, runtime};
use crate::settings::{self, ProcessEnv};

/// Create the user, reading the password from `TALLY_PASSWORD` or the first line of stdin.
///
/// # Errors
/// Database failures, a taken address, an invalid password.
pub(super) fn create_user(args: &CreateUserArgs) -> anyhow::Result<ExitCode> {
    let settings = match settings::load(&args.config, &ProcessEnv) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID_CONFIG));
        }
    };
    let password = match std::env::var("TALLY_PASSWORD") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("reading the password from stdin")?;
            line.trim_end_matches(['\r', '\n']).to_owned()
        }
    };
    let role = if args.admin { Role::Admin } else { Role::User };
    runtime()?.block_on(async move {
        let store = crate::app::connect_store(&settings).await?;
        let user = crate::app::create_user(&store, &args.email, password, role).await?;
        println!(
            "created {} ({}) as {}",
            user.email,
            user.id,
            user.role.code()
        );
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
