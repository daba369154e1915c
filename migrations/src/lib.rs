//! Tally's database migrations (sea-orm-migration), one file per step.
//!
//! Each step is plain DDL, written once for SQLite and PostgreSQL (the only difference is how an
//! auto-incrementing key is spelled, see `sql::SERIAL_PK`). The steps never import the store's
//! row types: a migration describes the schema as it stood at its release, and must keep doing so
//! after the store moves on.
//!
//! | step | release | what it does |
//! |------|---------|--------------|
//! | `m20260101_000001_initial` | before credits | users, sessions, API keys, dynamic plans, orders, subscriptions, webhook inbox, idempotency records |
//! | `m20260201_000002_credits` | credits | credit balances, transactions, grant lots and reservations; changes nothing that exists |
//! | `m20260301_000003_host_identities` | host identities | `host_identities` (issuer, subject) → user, backfilled for earlier host users |
//! | `m20260401_000004_subscription_terms` | sold terms | `subscriptions` keep price, currency, interval and credits per period, filled from their order |
//! | `m20260501_000005_refunds` | refunds | `subscription_charges` (each paid period), `refunds` (every refund report, kept against the payment it names), `orders.version` |
//! | `m20260601_000006_inbox_indexes` | admin console | indexes to list the webhook inbox by provider and by outcome |
//! | `m20260701_000007_events` | host events | `events`: the transactional outbox of events for the host application, and the catch-up feed's cursor |
//! | `m20260702_000008_webhook_endpoints` | host events | `webhook_endpoints` (URL, types, secrets, dispatch cursor) and `webhook_deliveries` (one per endpoint and event: status, attempts, next attempt, lease) |
//! | `m20260703_000009_plan_entitlements` | entitlements | `orders.plan_entitlements`: the entitlements of the plan an order sold, kept like its price |
//! | `m20260802_000011_plan_changes` | plan changes | `subscriptions.pending_*`: the plan change a subscriber asked for, until the provider's event confirms it |
//! | `m20260803_000012_admin_audit` | admin console | `admin_audit` (every administrator's action, before and after), indexes for customer search by e-mail or id prefix and for orders newest first by status and provider |
//! | `m20260804_000013_event_options` | host events | `entitlements_told`: per user, the entitlements last told (`entitlements.changed`) and when the passing of time next changes them |
//! | `m20260805_000014_chart_indexes` | admin console | indexes on the time columns the overview's charts filter on (`credit_transactions.created_at`, covering the ledger charts' columns, `orders.paid_at`, `subscription_charges.paid_at`, `subscriptions.created_at`, `subscriptions (status, updated_at)`) |
//! | `m20260806_000015_scheduled_plans` | plan changes | `subscriptions.scheduled_*`: the plan a subscription scheduled to end starts when it ends (a switch at the period's end) |
//! | `m20260807_000016_change_charges` | plan changes | `subscription_charges.plan_change_at`: a plan change's proration is a charge whose refunds take back that change's credits |
//! | `m20260808_000017_events_purge_by_id` | host events | drops `events_occurred_at`: the retention purge walks `events` by id, one index less on every event's insert |
//! | `m20260809_000018_events_in_transaction_order` | host events | PostgreSQL only: an event's id is its transaction's `txid << 20` and a sequence value, so that ids follow the order of transactions and a reader's cursor never passes an event still to commit |
//! | `m20260810_000019_sqlite_events_without_type_index` | host events | SQLite only: drops `events_type_id` (two WAL pages on every paid credits pack); the feed's `type` filter walks the primary key, a bounded number of events per read |
//! | `m20260811_000020_signup_grant_limits` | sign-up abuse | `signup_grant_identities` (an identity given sign-up credits, kept when its account is deleted) and `signup_grant_days` (per UTC day: grants given, sign-ups past the daily cap) |
//! | `m20260812_000021_plan_allowances` | plans | `plan_allowances`: hidden plans an operator allowed one user to buy or switch to |
//! | `m20260813_000022_host_user_contact` | acting for users | `host_identities.email` and `.name`: a host user's contact details from the host's token, told to the payment provider |
//! | `m20260813_000023_host_returns_and_portal` | host app | `orders.success_url`/`cancel_url`: where the host wants its buyer back; `portal_sessions`: single-use portal links and the billing-only sessions they open |
//! | `m20260814_000024_entitlements_told_version` | the house | `entitlements_told.version`: the compare-and-set of the entitlements the service works out and the store writes |
//! | `m20260901_000025_accounts` | teams | `accounts` (every user's personal account, with the user's id, and team accounts) and `account_members` (role, spend limit per window and its counter); the credit tables' `user_id` becomes `account_id`, a reference to `accounts`; `member_id` on ledger rows and holds |
//! | `m20260902_000026_account_purchases` | teams | `orders.account_id` and `subscriptions.account_id`: the account a purchase belongs to (the buyer's personal account, filled in for every existing row, or a team an owner or admin bought for) |
//! | `m20261001_000027_host_organisations` | teams | `accounts.host_organisation` (the host's id of the organisation a team mirrors), `accounts.seats_told` (when the owners were last told a team is full) and `account_members_away` (the rows of members whose latest host token named another organisation, or none, kept for their return) |
//! | `m20261002_000028_invitations` | teams | `account_invitations`: invitations to a team by e-mail (address, role, limit, the digest of the token, expiry; who accepted it and when, or when it was revoked) |
//! | `m20261003_000029_team_accounts_index` | admin console | `accounts (kind, created_at, id)`: the team accounts newest first, one index range per page |
//! | `m20261004_000030_api_key_accounts` | API keys | `api_keys.account_id`: the one account a key acts for (NULL: the whole app) |
//! | `m20261005_000031_account_entitlements_told` | teams | `entitlements_told` keyed by `account_id` (a reference to `accounts`) instead of `user_id`: a team's entitlements are told as a user's |
//! | `m20261006_000032_spend_limits` | spend controls | `spend_limits`, their usage per bucket (`spend_limit_usage`), the buckets a hold counted in (`reservation_limit_counts`), `credit_balances.limit_count` |
//! | `m20261007_000033_key_limits` | spend controls | `api_key_id` on `spend_limits` (a limit on one key's spends), `credit_transactions` and `credit_reservations` (the key that spent) |
//! | `m20261008_000034_balance_thresholds` | spend controls | `balance_thresholds` (levels of a balance told when crossed), `credit_balances.threshold_count` |
//! | `m20261009_000035_limit_resets` | spend controls | `spend_limits.reached_until` (when a reached limit's window resets, for `limit.reset`) |
//! | `m20261010_000036_limit_scopes` | spend controls | `spend_limits.model` and `spend_limits.member_id` (a limit on one model's spends, on one member's) |
//! | `m20261011_000037_limit_thresholds` | spend controls | `balance_thresholds.percent_of_limit` and `limit_id` (a threshold at a percentage of a limit's credits); the table is rebuilt |
//! | `m20261012_000038_limit_changes` | spend controls | `credit_balances.limit_changes` (every limit made or removed counts one: a grouped spend decided without locks checks it) |
//! | `m20261013_000039_token_usage` | usage pricing | `credit_transactions.usage_tokens`, `price_from`, `cost_basis_millionths` (a call's tokens by kind, the price-book entry that priced it, the provider's cost) |
//! | `m20261014_000040_grant_categories` | usage pricing | `credit_grants.category` and `priority` (paid, promotional, bonus or compensation; spent highest priority first), `credit_transactions.grant_category` |
//! | `m20261015_000041_promo_codes` | usage pricing | `promo_codes` (terms, active, `redeemed` never past `max_redemptions`) and `promo_redemptions` (unique per code, user and ordinal, and per request key) |
//! | `m20261016_000042_pack_bonus` | usage pricing | `orders.bonus_credits_hundredths` and `bonus_expires_in_days`: a credits pack's bonus as sold |
//! | `m20261017_000043_auto_top_up` | automatic top-up | `saved_payment_methods`, `auto_top_ups` (rule, caps, cool-off, version) and `top_up_intents` (at most one in flight per account), `orders.save_method` |
//! | `m20261018_000044_team_portal` | teams | `portal_sessions.account_id`: a customer-portal link for a team's billing |
//!
//! Every step migrates down as well as up; the tests in `tests/migrations.rs` prove it on SQLite
//! and, when `TEST_DATABASE_URL` is set, on PostgreSQL.

mod m20260101_000001_initial;
mod m20260201_000002_credits;
mod m20260301_000003_host_identities;
mod m20260401_000004_subscription_terms;
mod m20260501_000005_refunds;
mod m20260601_000006_inbox_indexes;
mod m20260701_000007_events;
mod m20260702_000008_webhook_endpoints;
mod m20260703_000009_plan_entitlements;
mod m20260802_000011_plan_changes;
mod m20260803_000012_admin_audit;
mod m20260804_000013_event_options;
mod m20260805_000014_chart_indexes;
mod m20260806_000015_scheduled_plans;
mod m20260807_000016_change_charges;
mod m20260808_000017_events_purge_by_id;
mod m20260809_000018_events_in_transaction_order;
mod m20260810_000019_sqlite_events_without_type_index;
mod m20260811_000020_signup_grant_limits;
mod m20260812_000021_plan_allowances;
mod m20260813_000022_host_user_contact;
mod m20260813_000023_host_returns_and_portal;
mod m20260814_000024_entitlements_told_version;
mod m20260901_000025_accounts;
mod m20260902_000026_account_purchases;
mod m20261001_000027_host_organisations;
mod m20261002_000028_invitations;
mod m20261003_000029_team_accounts_index;
mod m20261004_000030_api_key_accounts;
mod m20261005_000031_account_entitlements_told;
mod m20261006_000032_spend_limits;
mod m20261007_000033_key_limits;
mod m20261008_000034_balance_thresholds;
mod m20261009_000035_limit_resets;
mod m20261010_000036_limit_scopes;
mod m20261011_000037_limit_thresholds;
mod m20261012_000038_limit_changes;
mod m20261013_000039_token_usage;
mod m20261014_000040_grant_categories;
mod m20261015_000041_promo_codes;
mod m20261016_000042_pack_bonus;
mod m20261017_000043_auto_top_up;
mod m20261018_000044_team_portal;
mod sql;

pub use sea_orm_migration::MigratorTrait;
use sea_orm_migration::{MigrationTrait, async_trait};

/// Every migration step, oldest first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20260101_000001_initial::Migration),
            Box::new(m20260201_000002_credits::Migration),
            Box::new(m20260301_000003_host_identities::Migration),
            Box::new(m20260401_000004_subscription_terms::Migration),
            Box::new(m20260501_000005_refunds::Migration),
            Box::new(m20260601_000006_inbox_indexes::Migration),
            Box::new(m20260701_000007_events::Migration),
            Box::new(m20260702_000008_webhook_endpoints::Migration),
            Box::new(m20260703_000009_plan_entitlements::Migration),
            Box::new(m20260802_000011_plan_changes::Migration),
            Box::new(m20260803_000012_admin_audit::Migration),
            Box::new(m20260804_000013_event_options::Migration),
            Box::new(m20260805_000014_chart_indexes::Migration),
            Box::new(m20260806_000015_scheduled_plans::Migration),
            Box::new(m20260807_000016_change_charges::Migration),
            Box::new(m20260808_000017_events_purge_by_id::Migration),
            Box::new(m20260809_000018_events_in_transaction_order::Migration),
            Box::new(m20260810_000019_sqlite_events_without_type_index::Migration),
            Box::new(m20260811_000020_signup_grant_limits::Migration),
            Box::new(m20260812_000021_plan_allowances::Migration),
            Box::new(m20260813_000022_host_user_contact::Migration),
            Box::new(m20260813_000023_host_returns_and_portal::Migration),
            Box::new(m20260814_000024_entitlements_told_version::Migration),
            Box::new(m20260901_000025_accounts::Migration),
            Box::new(m20260902_000026_account_purchases::Migration),
            Box::new(m20261001_000027_host_organisations::Migration),
            Box::new(m20261002_000028_invitations::Migration),
            Box::new(m20261003_000029_team_accounts_index::Migration),
            Box::new(m20261004_000030_api_key_accounts::Migration),
            Box::new(m20261005_000031_account_entitlements_told::Migration),
            Box::new(m20261006_000032_spend_limits::Migration),
            Box::new(m20261007_000033_key_limits::Migration),
            Box::new(m20261008_000034_balance_thresholds::Migration),
            Box::new(m20261009_000035_limit_resets::Migration),
            Box::new(m20261010_000036_limit_scopes::Migration),
            Box::new(m20261011_000037_limit_thresholds::Migration),
            Box::new(m20261012_000038_limit_changes::Migration),
            Box::new(m20261013_000039_token_usage::Migration),
            Box::new(m20261014_000040_grant_categories::Migration),
            Box::new(m20261015_000041_promo_codes::Migration),
            Box::new(m20261016_000042_pack_bonus::Migration),
            Box::new(m20261017_000043_auto_top_up::Migration),
            Box::new(m20261018_000044_team_portal::Migration),
        ]
    }
}
