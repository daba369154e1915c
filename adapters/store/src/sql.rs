//! Thin helpers over sea-orm's raw statements, shared by every module.
//!
//! SQL is written once with `$1`-style placeholders: PostgreSQL takes them natively and sqlx's
//! SQLite driver binds `$N` to the N-th value, so one text serves both backends. The few
//! differences (row locks) are spelled by [`for_update`].

use sea_orm::{
    AccessMode, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    FromQueryResult, IsolationLevel, QueryResult, SqliteTransactionMode, Statement,
    TransactionOptions, TransactionTrait, Value,
};

use crate::retry::Fail;

/// A statement for `conn`'s backend.
fn statement<C: ConnectionTrait>(conn: &C, sql: &str, values: Vec<Value>) -> Statement {
    Statement::from_sql_and_values(conn.get_database_backend(), sql, values)
}

/// Run a statement; returns the number of rows it changed.
pub(crate) async fn execute<C: ConnectionTrait>(
    conn: &C,
    sql: &str,
    values: Vec<Value>,
) -> Result<u64, DbErr> {
    Ok(conn
        .execute_raw(statement(conn, sql, values))
        .await?
        .rows_affected())
}

/// The first row of a query, decoded as `T`.
pub(crate) async fn one<T: FromQueryResult, C: ConnectionTrait>(
    conn: &C,
    sql: &str,
    values: Vec<Value>,
) -> Result<Option<T>, DbErr> {
    T::find_by_statement(statement(conn, sql, values))
        .one(conn)
        .await
}

/// Every row of a query, decoded as `T`.
pub(crate) async fn all<T: FromQueryResult, C: ConnectionTrait>(
    conn: &C,
    sql: &str,
    values: Vec<Value>,
) -> Result<Vec<T>, DbErr> {
    T::find_by_statement(statement(conn, sql, values))
        .all(conn)
        .await
}

/// Every row of a query, undecoded (for rows that mix several tables' columns).
pub(crate) async fn rows<C: ConnectionTrait>(
    conn: &C,
    sql: &str,
    values: Vec<Value>,
) -> Result<Vec<QueryResult>, DbErr> {
    conn.query_all_raw(statement(conn, sql, values)).await
}

/// The integer in column `column` of the first row, if there is a row.
pub(crate) async fn one_i64<C: ConnectionTrait>(
    conn: &C,
    sql: &str,
    values: Vec<Value>,
    column: &str,
) -> Result<Option<i64>, DbErr> {
    match conn.query_one_raw(statement(conn, sql, values)).await? {
        Some(row) => Ok(Some(row.try_get::<i64>("", column)?)),
        None => Ok(None),
    }
}

/// Begin a transaction that will write. On SQLite it starts with `BEGIN IMMEDIATE`, taking the
/// write lock before the first read: a deferred transaction that reads and then writes cannot
/// wait for the lock and fails with "database is locked" under contention. On PostgreSQL it is
/// an ordinary READ COMMITTED transaction; balance changes are conditional single statements and
/// reads that decide a write take row locks ([`for_update`]).
pub(crate) async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    db.begin_with_options(TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    })
    .await
}

/// Begin a read-only transaction whose reads see one snapshot (a page and its total agree):
/// REPEATABLE READ on PostgreSQL, a deferred transaction on SQLite (a WAL reader sees the
/// database as of its first read).
pub(crate) async fn begin_read(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    match db.get_database_backend() {
        DbBackend::Postgres => {
            db.begin_with_config(
                Some(IsolationLevel::RepeatableRead),
                Some(AccessMode::ReadOnly),
            )
            .await
        }
        _ => db.begin().await,
    }
}

/// ` FOR NO KEY UPDATE` on PostgreSQL (nothing on SQLite, whose write transaction holds the
/// database's lock): a lock that serialises its takers like `FOR UPDATE` but does not block a
/// row elsewhere that references this one from being written (the `FOR KEY SHARE` a foreign
/// key check takes), for rows locked to order decisions, never to change their key.
pub(crate) fn for_no_key_update<C: ConnectionTrait>(conn: &C) -> &'static str {
    match conn.get_database_backend() {
        DbBackend::Postgres => " FOR NO KEY UPDATE",
        _ => "",
    }
}

/// ` FOR UPDATE` on PostgreSQL; nothing on SQLite, where `BEGIN IMMEDIATE` already holds the
/// database's write lock.
pub(crate) fn for_update<C: ConnectionTrait>(conn: &C) -> &'static str {
    match conn.get_database_backend() {
        DbBackend::Postgres => " FOR UPDATE",
        _ => "",
    }
}

/// How a transaction's body ended.
pub(crate) enum End<T> {
    /// Keep its writes.
    Commit(T),
    /// Undo its writes (a refusal decided inside the transaction), but return `T`.
    Rollback(T),
}

impl<T> End<T> {
    /// The same end with its value mapped.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> End<U> {
        match self {
            End::Commit(value) => End::Commit(f(value)),
            End::Rollback(value) => End::Rollback(f(value)),
        }
    }
}

/// Commit or roll back `tx` as the body decided; a failed body always rolls back.
pub(crate) async fn finish<T>(
    tx: DatabaseTransaction,
    body: Result<End<T>, Fail>,
) -> Result<T, Fail> {
    match body {
        Ok(End::Commit(value)) => {
            tx.commit().await?;
            Ok(value)
        }
        Ok(End::Rollback(value)) => {
            tx.rollback().await?;
            Ok(value)
        }
        Err(e) => {
            // The body's error is the one worth reporting; a failed rollback also closes the
            // transaction.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// Single statements outside an explicit transaction, under the retry policy.
impl crate::SeaOrmStore {
    /// Run one statement; returns the number of rows it changed.
    pub(crate) async fn run_execute(
        &self,
        what: &'static str,
        sql: &str,
        values: Vec<Value>,
    ) -> Result<u64, application::ports::StoreError> {
        self.retry
            .run(what, || async {
                Ok(execute(&self.db, sql, values.clone()).await?)
            })
            .await
    }

    /// The first row of a query.
    pub(crate) async fn fetch_one<T: FromQueryResult>(
        &self,
        what: &'static str,
        sql: &str,
        values: Vec<Value>,
    ) -> Result<Option<T>, application::ports::StoreError> {
        self.retry
            .run(what, || async {
                Ok(one::<T, _>(&self.db, sql, values.clone()).await?)
            })
            .await
    }

    /// Every row of a query.
    pub(crate) async fn fetch_all<T: FromQueryResult>(
        &self,
        what: &'static str,
        sql: &str,
        values: Vec<Value>,
    ) -> Result<Vec<T>, application::ports::StoreError> {
        self.retry
            .run(what, || async {
                Ok(all::<T, _>(&self.db, sql, values.clone()).await?)
            })
            .await
    }
}

/// A page of rows and the size of the whole list, read in one snapshot.
pub(crate) async fn page<T: FromQueryResult>(
    db: &DatabaseConnection,
    count_sql: &str,
    count_values: Vec<Value>,
    items_sql: &str,
    items_values: Vec<Value>,
) -> Result<(i64, Vec<T>), Fail> {
    let tx = begin_read(db).await?;
    let body = async {
        let total = one_i64(&tx, count_sql, count_values, "total")
            .await?
            .unwrap_or(0);
        let rows: Vec<T> = all(&tx, items_sql, items_values).await?;
        Ok(End::Commit((total, rows)))
    }
    .await;
    finish(tx, body).await
}
