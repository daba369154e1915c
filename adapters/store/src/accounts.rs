//! Accounts: every user's personal account, and teams with their members.

use domain::{Timestamp, UserId};
use sea_orm::DatabaseTransaction;

use crate::retry::Fail;
use crate::sql;

/// Open `user`'s personal account (its id is the user's), created `at`; nothing if it exists.
pub(crate) async fn open_personal(
    tx: &DatabaseTransaction,
    user: &UserId,
    at: Timestamp,
) -> Result<(), Fail> {
    let sql = "INSERT INTO accounts (id, kind, name, created_by, created_at) \
               VALUES ($1, 'personal', NULL, $1, $2) ON CONFLICT (id) DO NOTHING";
    sql::execute(tx, sql, vec![user.as_str().into(), at.unix_millis().into()]).await?;
    Ok(())
}
