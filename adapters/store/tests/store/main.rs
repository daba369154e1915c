//! The store's contract tests: every port method against a real database, SQLite always and
//! PostgreSQL when `TEST_DATABASE_URL` is set, plus concurrency tests on both. One test binary;
//! each module holds generic `async fn name(store: &TestStore)` contracts and generates
//! `module::sqlite::name` and `module::postgres::name` tests from them, and the same again with
//! group commit on (`module::sqlite_grouped::name`, `module::postgres_grouped::name`);
//! `group_commit` holds the tests of grouping itself.

mod support;

mod admin;
mod admin_audited;
mod concurrency;
mod connection;
mod corrupt;
mod entitlements;
mod events;
mod group_commit;
mod host_events;
mod key_audit;
mod ledger;
mod limits;
mod orders;
mod plans;
mod reports;
mod signup_grants;
mod spend_rule;
mod subscription_events;
mod switch_claims;
mod teams;
mod users;
mod webhooks;
