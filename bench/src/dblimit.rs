//! The database's own limit: the consume transaction the store runs
//! (`adapters/store/src/ledger/spend.rs` and `postings.rs`), issued straight through sqlx
//! (`store::bench::consume`) with the service's pool size and durability settings, by N
//! concurrent workers.
//!
//! [`Shape::Store`] is the store's whole transaction: `BEGIN IMMEDIATE` on SQLite (a plain
//! `BEGIN`, READ COMMITTED, on PostgreSQL); the idempotency-key lookup; the read the spend is
//! decided from, the balance with its lots (the balance row locked on PostgreSQL); the
//! conditional decrement `UPDATE … WHERE balance >= $n RETURNING`; the ledger insert `… ON
//! CONFLICT DO NOTHING RETURNING`; the conditional lot draw-down; `COMMIT`. [`Shape::Core`] is
//! the decrement and the insert alone.

use std::sync::Arc;

pub use store::bench::Shape;
use store::bench::{Consume, consume};

use crate::database::Pool;
use crate::load::{self, Spec};
use crate::stats::Summary;

/// Run consume transactions in a closed loop: worker `w` spends from `users[w % users.len()]`
/// (one user for all: the hot-account variant). Keys start with `tag`, unique per run.
pub async fn run(
    pool: &Pool,
    shape: Shape,
    users: Arc<Vec<String>>,
    tag: String,
    spec: Spec,
    now_ms: fn() -> i64,
) -> Summary {
    let pool = pool.clone();
    let tag = Arc::new(tag);
    load::closed_loop(spec, move |worker, sequence| {
        let (pool, users, tag) = (pool.clone(), users.clone(), tag.clone());
        async move {
            let user = &users[worker % users.len()];
            let c = Consume {
                user,
                key: format!("{tag}-{worker}-{sequence}"),
                amount: 500,
                now_ms: now_ms(),
            };
            consume(&pool, shape, &c).await
        }
    })
    .await
}
