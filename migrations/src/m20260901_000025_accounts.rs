//! Step 25: accounts own credits.
//!
//! - `accounts`: who money belongs to. Every user has a personal account whose id is the user's
//!   id, so every existing id and answer stays as it was; a team account has members.
//! - `account_members`: a team's members, their role (`owner`, `admin`, `member`), their spend
//!   limit per calendar window (UTC day, ISO week or month) and what they spent in the current
//!   one. The counter sits on the member's row so that a spend updates it in its own
//!   transaction, after the account's balance row is locked.
//! - The four credit tables' `user_id` becomes `account_id`, a reference to `accounts` instead of
//!   `users`. Every existing user gets their personal account first, so every row keeps its
//!   owner. SQLite cannot change a column's reference in place: each table is rebuilt from its
//!   own stored definition, inside this step's transaction, its rows copied aside and back with
//!   the foreign keys checked at commit (`rebuild_with`).
//! - `credit_transactions.member_id` and `credit_reservations.member_id`: the member who spent
//!   from a team's account; `credit_reservations.window_start`: the member's window the hold
//!   counted in, so that a release or settle gives back headroom only in that window.
//!
//! Down refuses while a team account exists: its credits have no user to go back to.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

use crate::sql;

/// Accounts, team members and the credit tables owned by accounts.
pub(crate) struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260901_000025_accounts"
    }
}

/// The tables whose owner moves from users to accounts, parents before children.
const OWNED: &[&str] = &[
    "credit_balances",
    "credit_reservations",
    "credit_transactions",
    "credit_grants",
];

const CREATE: &[&str] = &[
    "CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('personal', 'team')),
        name TEXT NULL,
        created_by TEXT NULL REFERENCES users (id),
        created_at BIGINT NOT NULL,
        CHECK ((kind = 'team') = (name IS NOT NULL))
    )",
    "INSERT INTO accounts (id, kind, name, created_by, created_at)
        SELECT id, 'personal', NULL, id, created_at FROM users",
    "CREATE TABLE account_members (
        account_id TEXT NOT NULL REFERENCES accounts (id),
        user_id TEXT NOT NULL REFERENCES users (id),
        role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
        limit_hundredths BIGINT NULL CHECK (limit_hundredths IS NULL OR limit_hundredths > 0),
        limit_window TEXT NULL CHECK (limit_window IS NULL OR limit_window IN ('day', 'week', 'month')),
        window_start BIGINT NOT NULL DEFAULT 0,
        window_spent_hundredths BIGINT NOT NULL DEFAULT 0 CHECK (window_spent_hundredths >= 0),
        added_at BIGINT NOT NULL,
        CHECK ((limit_hundredths IS NULL) = (limit_window IS NULL)),
        PRIMARY KEY (account_id, user_id)
    )",
    "CREATE INDEX account_members_user ON account_members (user_id)",
];

const ADD_MEMBERS: &[&str] = &[
    "ALTER TABLE credit_transactions ADD COLUMN member_id TEXT NULL REFERENCES users (id)",
    "ALTER TABLE credit_reservations ADD COLUMN member_id TEXT NULL REFERENCES users (id)",
    "ALTER TABLE credit_reservations ADD COLUMN window_start BIGINT NULL",
];

const DROP_MEMBERS: &[&str] = &[
    "ALTER TABLE credit_reservations DROP COLUMN window_start",
    "ALTER TABLE credit_reservations DROP COLUMN member_id",
    "ALTER TABLE credit_transactions DROP COLUMN member_id",
];

const DROP: &[&str] = &["DROP TABLE account_members", "DROP TABLE accounts"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // A team account's id starts with `team_`; a personal one is its user's id.
        let clashing = count(
            manager,
            "SELECT COUNT(*) AS n FROM users WHERE substr(id, 1, 5) = 'team_'",
        )
        .await?;
        if clashing > 0 {
            return Err(DbErr::Migration(format!(
                "{clashing} user id(s) start with `team_`, the prefix of team accounts"
            )));
        }
        sql::run(manager, CREATE).await?;
        for table in OWNED {
            move_owner(
                manager,
                table,
                ("user_id", "users"),
                ("account_id", "accounts"),
            )
            .await?;
        }
        // SQLite drops a column only without a reference on it; adding after the rebuild keeps
        // the references simple to take out again.
        sql::run(manager, ADD_MEMBERS).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let teams = count(
            manager,
            "SELECT COUNT(*) AS n FROM accounts WHERE kind = 'team'",
        )
        .await?;
        if teams > 0 {
            return Err(DbErr::Migration(format!(
                "{teams} team account(s) exist: their credits belong to no user, so this step \
                 cannot be undone until they are deleted"
            )));
        }
        if manager.get_database_backend() == DbBackend::Sqlite {
            // SQLite drops a column only without a reference on it: rebuild without them.
            for table in ["credit_reservations", "credit_transactions"] {
                strip_member_columns(manager, table).await?;
            }
        } else {
            sql::run(manager, DROP_MEMBERS).await?;
        }
        for table in OWNED.iter().rev() {
            move_owner(
                manager,
                table,
                ("account_id", "accounts"),
                ("user_id", "users"),
            )
            .await?;
        }
        sql::run(manager, DROP).await
    }

    /// The rebuilds and the backfill happen all or not at all, on SQLite too.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}

/// The count `query` (`SELECT COUNT(*) AS n …`) answers.
pub(crate) async fn count(manager: &SchemaManager<'_>, query: &str) -> Result<i64, DbErr> {
    Ok(manager
        .get_connection()
        .query_one_raw(Statement::from_string(
            manager.get_database_backend(),
            query,
        ))
        .await?
        .map(|row| row.try_get::<i64>("", "n"))
        .transpose()?
        .unwrap_or(0))
}

/// Rename `table`'s owner column `from.0` (a reference to `from.1`) to `to.0`, referring to
/// `to.1`.
async fn move_owner(
    manager: &SchemaManager<'_>,
    table: &str,
    (from_column, from_table): (&str, &str),
    (to_column, to_table): (&str, &str),
) -> Result<(), DbErr> {
    let connection = manager.get_connection();
    if manager.get_database_backend() != DbBackend::Sqlite {
        // PostgreSQL names a column's reference `<table>_<column>_fkey`.
        for statement in [
            format!("ALTER TABLE {table} RENAME COLUMN {from_column} TO {to_column}"),
            format!("ALTER TABLE {table} DROP CONSTRAINT {table}_{from_column}_fkey"),
            format!(
                "ALTER TABLE {table} ADD CONSTRAINT {table}_{to_column}_fkey \
                 FOREIGN KEY ({to_column}) REFERENCES {to_table} (id)"
            ),
        ] {
            connection.execute_unprepared(&statement).await?;
        }
        return Ok(());
    }
    connection
        .execute_unprepared(&format!(
            "ALTER TABLE {table} RENAME COLUMN {from_column} TO {to_column}"
        ))
        .await?;
    let definition = stored_definition(manager, table).await?;
    // The owner column's definition is the only one of these tables' columns that refers to
    // `from_table`; anything else is a schema this step does not know.
    let reference = format!("REFERENCES {from_table} (id)");
    if definition.matches(&reference).count() != 1 {
        return Err(DbErr::Migration(format!(
            "{table}: expected exactly one `{reference}` in {definition}"
        )));
    }
    let rebuilt = definition.replacen(&reference, &format!("REFERENCES {to_table} (id)"), 1);
    rebuild(manager, table, &rebuilt).await
}

/// Rebuild `table` without `member_id` and `window_start`: the columns this step added last.
async fn strip_member_columns(manager: &SchemaManager<'_>, table: &str) -> Result<(), DbErr> {
    let definition = stored_definition(manager, table).await?;
    let mut kept = definition.clone();
    for added in [
        ", member_id TEXT NULL REFERENCES users (id)",
        ", window_start BIGINT NULL",
    ] {
        kept = kept.replacen(added, "", 1);
    }
    let columns = columns_of(manager, table).await?;
    let kept_columns: Vec<&str> = columns
        .iter()
        .map(String::as_str)
        .filter(|c| *c != "member_id" && *c != "window_start")
        .collect();
    rebuild_with(manager, table, &kept, &kept_columns.join(", ")).await
}

/// Rebuild `table` as `definition` (its `CREATE TABLE` statement), keeping every row.
async fn rebuild(manager: &SchemaManager<'_>, table: &str, definition: &str) -> Result<(), DbErr> {
    rebuild_with(manager, table, definition, "*").await
}

/// Change a table SQLite cannot alter in place: copy its rows aside, drop it, create it anew,
/// copy `columns` back and create its indexes again. Other tables keep their references to it
/// by name; the rows that refer to it are orphaned between the drop and the copy back, which
/// `defer_foreign_keys` lets the transaction finish (SQLite checks them again at commit).
pub(crate) async fn rebuild_with(
    manager: &SchemaManager<'_>,
    table: &str,
    definition: &str,
    columns: &str,
) -> Result<(), DbErr> {
    let connection = manager.get_connection();
    let indexes = index_definitions(manager, table).await?;
    let copy = format!("{table}_before_accounts");
    let mut statements = vec![
        "PRAGMA defer_foreign_keys = ON".to_owned(),
        format!("CREATE TEMP TABLE {copy} AS SELECT * FROM {table}"),
        // The autoincrement's high-water mark outlives the table's rows.
        format!(
            "CREATE TEMP TABLE {copy}_seq AS SELECT seq FROM sqlite_sequence WHERE name = '{table}'"
        ),
        format!("DROP TABLE {table}"),
        definition.to_owned(),
        format!("INSERT INTO {table} SELECT {columns} FROM {copy}"),
        format!(
            "UPDATE sqlite_sequence SET seq = MAX(seq, (SELECT MAX(seq) FROM {copy}_seq)) \
             WHERE name = '{table}' AND EXISTS (SELECT 1 FROM {copy}_seq)"
        ),
        format!("DROP TABLE {copy}"),
        format!("DROP TABLE {copy}_seq"),
    ];
    statements.extend(indexes);
    for statement in statements {
        connection.execute_unprepared(&statement).await?;
    }
    Ok(())
}

/// `table`'s `CREATE TABLE` statement as SQLite stores it.
pub(crate) async fn stored_definition(
    manager: &SchemaManager<'_>,
    table: &str,
) -> Result<String, DbErr> {
    let rows = strings(
        manager,
        "SELECT sql AS s FROM sqlite_master WHERE type = 'table' AND name = $1",
        table,
    )
    .await?;
    rows.into_iter()
        .next()
        .ok_or_else(|| DbErr::Migration(format!("no table {table}")))
}

/// The `CREATE INDEX` statements of `table` (not the automatic ones of its constraints).
async fn index_definitions(manager: &SchemaManager<'_>, table: &str) -> Result<Vec<String>, DbErr> {
    strings(
        manager,
        "SELECT sql AS s FROM sqlite_master WHERE type = 'index' AND tbl_name = $1 \
         AND sql IS NOT NULL ORDER BY name",
        table,
    )
    .await
}

/// `table`'s columns in order.
pub(crate) async fn columns_of(
    manager: &SchemaManager<'_>,
    table: &str,
) -> Result<Vec<String>, DbErr> {
    strings(
        manager,
        "SELECT name AS s FROM pragma_table_info($1) ORDER BY cid",
        table,
    )
    .await
}

async fn strings(
    manager: &SchemaManager<'_>,
    query: &str,
    table: &str,
) -> Result<Vec<String>, DbErr> {
    let rows = manager
        .get_connection()
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            query,
            [table.into()],
        ))
        .await?;
    rows.iter()
        .map(|row| row.try_get::<String>("", "s"))
        .collect()
}
