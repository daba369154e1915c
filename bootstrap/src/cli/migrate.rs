//! `tally migrate up|down|status`.

use std::process::ExitCode;

use anyhow::Context;
use migrations::{Migrator, MigratorTrait};
use store::SeaOrmStore;

use super::{EXIT_INVALID_CONFIG, MigrateArgs, MigrateDirection, runtime};
use crate::settings::{self, ProcessEnv};

/// Run a migration command against `DATABASE_URL`.
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
        let db = store.connection();
        match args.direction {
            MigrateDirection::Up => {
                Migrator::up(db, None)
                    .await
                    .context("applying migrations")?;
                println!("migrations applied");
            }
            MigrateDirection::Down => {
                Migrator::down(db, Some(1)).await.context("rolling back")?;
                println!("rolled back the newest step");
            }
            MigrateDirection::Status => print_status(&store).await?,
        }
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

async fn print_status(store: &SeaOrmStore) -> anyhow::Result<()> {
    let db = store.connection();
    for m in Migrator::get_applied_migrations(db)
        .await
        .context("reading applied migrations")?
    {
        println!("applied  {}", m.name());
    }
    for m in Migrator::get_pending_migrations(db)
        .await
        .context("reading pending migrations")?
    {
        println!("pending  {}", m.name());
    }
    Ok(())
}
