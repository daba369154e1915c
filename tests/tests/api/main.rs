//! Tally's black-box test binary: one binary, one module per area.

mod admin_adjustments;
mod admin_replay;
mod branding;
mod browser;
mod dependency_rule;
mod entitlements;
mod event_delivery;
mod events;
mod function_length;
mod hidden_plans;
mod host_returns;
mod host_tokens;
mod ownership;
mod plan_change_invoices;
mod plan_changes;
mod plan_changes_paypal;
mod plan_changes_providers;
mod plan_farming;
mod plan_switch_at_period_end;
mod portal;
mod production;
mod providers;
mod purchases;
mod reliability;
mod service;
mod sign_up_abuse;
