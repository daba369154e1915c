//! `tally migrate up|down|status`.

use std::process::ExitCode;

use anyhow::Context;
use migrations::{Migrator, MigratorTrait};
use store::SeaOrmStore;

use super::{EXIT_INVALID_CONFIG, MigrateArgs, MigrateDirection, runtime};
use crate::settings::{self, ProcessEnv};

/// Run a migration command against `DATABASE_DIRECT_URL` when it is set, else `DATABASE_URL`.
///
/// # Errors
/// The database is unreachable or a step fails.
pub(super) fn run(args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let mut settings = match settings::load(&args.config, &ProcessEnv) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_INVALID_CONFIG));
        }
    };
    // This command decides what to apply; connecting must not apply anything by itself.
    settings.migrate_on_start = false;
    runtime()?.block_on(async move {
        let store = crate::app::connect_store(&settings).await?;
        // Past the connection pooler when a direct URL is set: migrations want a session.
        let direct = SeaOrmStore::connect_direct(&settings.database)
            .await
            .context("connecting to DATABASE_DIRECT_URL")?;
        let db = direct.as_ref().unwrap_or(store.connection());
        let done = match args.direction {
            MigrateDirection::Up => Migrator::up(db, None)
                .await
                .context("applying migrations")
                .map(|()| println!("migrations applied")),
            MigrateDirection::Down => Migrator::down(db, Some(1))
                .await
                .context("rolling back")
                .map(|()| println!("rolled back the newest step")),
            MigrateDirection::Status => {
                async {
                    let applied = Migrator::get_applied_migrations(db)
                        .await
                        .context("reading applied migrations")?;
                    let pending = Migrator::get_pending_migrations(db)
                        .await
                        .context("reading pending migrations")?;
                    for m in applied {
                        println!("applied  {}", m.name());
                    }
                    for m in pending {
                        println!("pending  {}", m.name());
                    }
                    anyhow::Ok(())
                }
                .await
            }
        };
        if let Some(direct) = direct {
            // Closing a connection the command is done with: a failure here changes nothing.
            let _ = direct.close().await;
        }
        done
    })?;
    Ok(ExitCode::SUCCESS)
}
