//! Helpers shared by the steps: running a list of DDL statements, and the one spelling that
//! differs between SQLite and PostgreSQL.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

/// Placeholder for an auto-incrementing 64-bit primary key in the DDL below.
pub(crate) const SERIAL_PK: &str = "{SERIAL_PK}";

/// Run `statements` in order, replacing [`SERIAL_PK`] with the backend's spelling.
///
/// SQLite's `INTEGER PRIMARY KEY AUTOINCREMENT` is a 64-bit rowid that is never reused, so ids
/// only ever increase, as PostgreSQL's `BIGSERIAL` does.
pub(crate) async fn run(manager: &SchemaManager<'_>, statements: &[&str]) -> Result<(), DbErr> {
    let serial = match manager.get_database_backend() {
        DbBackend::Sqlite => "INTEGER PRIMARY KEY AUTOINCREMENT",
        _ => "BIGSERIAL PRIMARY KEY",
    };
    let connection = manager.get_connection();
    for statement in statements {
        connection
            .execute_unprepared(&statement.replace(SERIAL_PK, serial))
            .await?;
    }
    Ok(())
}
