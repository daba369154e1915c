//! Use-case tests against the in-memory fakes, and mockall tests of gateway interactions.

mod accounts_and_plans;
mod acting_for_users;
mod admin_console;
mod auto_top_up;
mod credits;
mod entitlements;
mod harness;
mod hidden_plans;
mod host_returns;
mod host_sign_in;
mod metrics;
mod ownership;
mod payments;
mod plan_change_invoices;
mod plan_changes;
mod plan_revisions;
mod refunds;
mod scheduled_switches;
mod sign_ups;
mod subscription_terms;
mod team_purchases;
mod webhooks;
