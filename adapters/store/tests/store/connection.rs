//! Connecting: SQLite's pragmas, readiness, and an unreachable database.

use application::ports::{StoreError, UserRepository};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use store::{SeaOrmStore, SqliteSynchronous, StoreSettings};

use crate::support::{self, TestStore, contract_tests};

async fn pragma(store: &SeaOrmStore, name: &str) -> String {
    let sql = format!("PRAGMA {name}");
    let row = store
        .connection()
        .query_one_raw(Statement::from_string(DbBackend::Sqlite, sql))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<String>(0)
        .or_else(|_| row.try_get_by_index::<i64>(0).map(|n| n.to_string()))
        .unwrap()
}

#[tokio::test]
async fn sqlite_files_run_in_wal_mode_with_foreign_keys_and_the_chosen_durability() {
    let store = support::sqlite_file(2).await;
    assert_eq!(pragma(&store, "journal_mode").await, "wal");
    assert_eq!(pragma(&store, "foreign_keys").await, "1");
    assert_eq!(pragma(&store, "synchronous").await, "2", "FULL by default");
    assert_eq!(pragma(&store, "busy_timeout").await, "5000");
    let dir = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        sqlite_synchronous: SqliteSynchronous::Normal,
        busy_timeout_ms: 1234,
        ..StoreSettings::new(format!("sqlite://{}", dir.path().join("n.db").display()))
    };
    let normal = SeaOrmStore::connect(&settings, crate::support::events())
        .await
        .unwrap();
    assert_eq!(pragma(&normal, "synchronous").await, "1");
    assert_eq!(pragma(&normal, "busy_timeout").await, "1234");
}

#[tokio::test]
async fn an_unreachable_database_is_busy() {
    let settings = StoreSettings {
        acquire_timeout_ms: 500,
        ..StoreSettings::new("postgres://tally:x@127.0.0.1:1/none")
    };
    assert!(matches!(
        SeaOrmStore::connect(&settings, crate::support::events()).await,
        Err(StoreError::Busy(_))
    ));
}

#[tokio::test]
async fn a_closed_pool_is_busy() {
    let store = support::sqlite().await;
    let clone = (*store).clone();
    store.cleanup().await;
    assert!(matches!(
        clone.find_user(&support::uid("u1")).await,
        Err(StoreError::Busy(_))
    ));
    assert!(matches!(clone.ping().await, Err(StoreError::Busy(_))));
}

async fn the_store_answers_pings(store: &TestStore) {
    store.ping().await.unwrap();
}

contract_tests!(the_store_answers_pings);
