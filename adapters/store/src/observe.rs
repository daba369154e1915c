//! Watching the statements the store sends, for tests (feature `testing`).
//!
//! A test that must know exactly which SQL a store operation sends (the key audit of
//! `tests/store/key_audit.rs`: does every statement on a distributed table name the account
//! key?) connects with `SeaOrmStore::connect_observed` and is handed every statement, with its
//! values, as it completes.
//!
//! The hook is sea-orm's metric callback (`DatabaseConnection::set_metric_callback`), set on the
//! store's pool and on the group-commit writers' own pool when they open it, so that grouped
//! statements are seen too. Statements sent with `execute_unprepared` (the writers' savepoints)
//! do not pass through it; none of them names a table.
//!
//! Why a feature and not a setting: the callback costs a clock read and a call per statement,
//! and [`StoreSettings`](crate::StoreSettings) is plain data an operator's configuration fills.
//! Without the feature there is no way to build an observer, [`Watch`] holds nothing, no callback
//! is set, and sea-orm skips its timing altogether: the production path is the one without a
//! watch. The store's own tests turn the feature on through a dev-dependency on this crate.

use sea_orm::DatabaseConnection;

/// Who is shown the statements of a store: nobody, unless a test asked (feature `testing`).
#[derive(Clone, Default)]
pub(crate) struct Watch {
    #[cfg(feature = "testing")]
    observer: Option<StatementObserver>,
}

impl Watch {
    /// Show every statement `db` runs to this watch's observer, if there is one.
    #[cfg_attr(not(feature = "testing"), allow(clippy::unused_self))]
    pub(crate) fn attach(&self, db: &mut DatabaseConnection) {
        #[cfg(feature = "testing")]
        if let Some(observer) = &self.observer {
            let observer = std::sync::Arc::clone(observer);
            db.set_metric_callback(move |info| observer(&SentStatement::of(info)));
        }
        #[cfg(not(feature = "testing"))]
        let _ = db;
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "testing")]
        let watched = self.observer.is_some();
        #[cfg(not(feature = "testing"))]
        let watched = false;
        f.debug_struct("Watch").field("watched", &watched).finish()
    }
}

#[cfg(feature = "testing")]
pub use self::sent::{SentStatement, StatementObserver};

#[cfg(feature = "testing")]
mod sent {
    use std::sync::Arc;

    use sea_orm::Value;

    /// What an observer is called with: one statement the store ran.
    pub type StatementObserver = Arc<dyn Fn(&SentStatement) + Send + Sync>;

    /// One statement the store ran, as sent: its text with `$n` placeholders and its values.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SentStatement {
        /// The SQL text.
        pub sql: String,
        /// The values of `$1`, `$2`, … in order: text as it is, numbers and booleans written
        /// out, `None` for NULL; any other kind as its debug form.
        pub values: Vec<Option<String>>,
        /// Whether the database refused it.
        pub failed: bool,
    }

    impl SentStatement {
        pub(crate) fn of(info: &sea_orm::metric::Info<'_>) -> Self {
            let values = info
                .statement
                .values
                .as_ref()
                .map(|values| values.0.iter().map(text).collect())
                .unwrap_or_default();
            Self {
                sql: info.statement.sql.clone(),
                values,
                failed: info.failed,
            }
        }
    }

    fn text(value: &Value) -> Option<String> {
        match value {
            Value::String(s) => s.clone(),
            Value::BigInt(n) => n.map(|n| n.to_string()),
            Value::Int(n) => n.map(|n| n.to_string()),
            Value::Bool(b) => b.map(|b| b.to_string()),
            other => Some(format!("{other:?}")),
        }
    }

    impl super::Watch {
        /// A watch that shows every statement to `observer`.
        pub(crate) fn new(observer: StatementObserver) -> Self {
            Self {
                observer: Some(observer),
            }
        }
    }
}
