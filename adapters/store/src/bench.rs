//! Direct database access for the benchmark (the `bench` crate; feature `bench`): a pool opened
//! as the service opens its own, the PostgreSQL database of a run created and dropped, bulk
//! seeding that keeps the ledger's invariants, the checks that seeded and written rows add up,
//! and the store's consume transaction issued statement by statement (the database's own
//! limit). The service never calls it; it lives here so that every SQL statement of the
//! workspace is in the store or the migrations. No sqlx or sea-orm type leaves: [`Pool`] is
//! opaque.

mod customers;
mod limit;
mod pool;
mod seed;

pub use customers::{ROWS_PER_CUSTOMER, customer_id, seed_customers, users_and_ledger_rows};
pub use limit::{Consume, Shape, consume};
pub use pool::{Pool, create_database, drop_database};
pub use seed::{
    FUNDING, check_ledger, create_team, create_users, fund, history, order_grants_of_prefix,
    write_events,
};
