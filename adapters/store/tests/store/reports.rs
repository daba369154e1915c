//! The admin overview's aggregates (issue 18) on both databases: revenue per day and currency
//! (orders by payment time and renewal charges, refunds netted, first-period charges counted
//! once), credits granted and consumed per day, subscriptions started and ended, and
//! consumption by feature and by model — each over its window only.

use application::ports::{
    ConsumptionDimension, CreditsDay, ReportRepository, ReportWindow, RevenueDay, SubscriptionsDay,
};
use domain::{CreditsTotal, Currency, Timestamp};
use sea_orm::ConnectionTrait;

use crate::support::{TestStore, contract_tests};

const DAY: i64 = 86_400_000;
/// Day 20_000 since the epoch (2024-10-04), at midnight UTC.
const D0: i64 = 20_000 * DAY;

async fn run(store: &TestStore, sql: &str) {
    store.connection().execute_unprepared(sql).await.unwrap();
}

async fn seed(store: &TestStore) {
    run(
        store,
        "INSERT INTO users (id, email, role, created_at) VALUES \
        ('usr_a', 'a@example.com', 'user', 0)",
    )
    .await;
    run(
        store,
        "INSERT INTO accounts (id, kind, created_by, created_at) VALUES \
        ('usr_a', 'personal', 'usr_a', 0)",
    )
    .await;
    let order =
        |id: &str, amount: i64, currency: &str, status: &str, paid: Option<i64>, refunded: i64| {
            let paid = paid.map_or("NULL".to_owned(), |p| p.to_string());
            format!(
                "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, \
             currency, status, paid_at, refunded_minor, expires_at, created_at, updated_at) \
             VALUES ('{id}', 'usr_a', 'card_gateway', 'p', 'one_time', {amount}, '{currency}', \
             '{status}', {paid}, {refunded}, 0, 0, 0)"
            )
        };
    for sql in [
        order("o1", 1000, "USD", "paid", Some(D0 + 5), 0),
        order(
            "o2",
            500,
            "USD",
            "partially_refunded",
            Some(D0 + DAY - 1),
            200,
        ),
        order("o3", 700, "EUR", "refunded", Some(D0 + DAY), 700),
        order("o4", 900, "USD", "pending", None, 0),
        // Before the window: not counted.
        order("o5", 300, "USD", "paid", Some(D0 - 1), 0),
        order("o6", 2000, "USD", "paid", Some(D0 + 2 * DAY), 0),
    ] {
        run(store, &sql).await;
    }
    run(
        store,
        "INSERT INTO subscriptions (id, user_id, order_id, plan_id, provider, \
        provider_subscription_id, status, period_start, period_end, last_event_at, created_at, \
        updated_at) VALUES \
        ('sub_1', 'usr_a', 'o6', 'm', 'card_gateway', 'ps1', 'active', 1, 2, 0, \
            1728172800000, 1728172800000), \
        ('sub_2', 'usr_a', NULL, 'm', 'card_gateway', 'ps2', 'canceled', 1, 2, 0, \
            1727136000000, 1728086400007)",
    )
    .await;
    // The first period's charge belongs to order o6 (counted once); a renewal adds 2000.
    run(
        store,
        "INSERT INTO subscription_charges (subscription_id, provider, charge_ref, \
        order_id, period_start, period_end, amount_minor, currency, refunded_minor, paid_at) \
        VALUES ('sub_1', 'card_gateway', 'ch1', 'o6', 1, 2, 2000, 'USD', 0, 1728172800000), \
        ('sub_1', 'card_gateway', 'ch2', NULL, 2, 3, 2000, 'USD', 500, 1728172800009)",
    )
    .await;
    let tx = |kind: &str, amount: i64, feature: &str, model: &str, at: i64| {
        format!(
            "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
             balance_after_hundredths, feature, model, created_at) VALUES ('usr_a', '{kind}', \
             {amount}, 0, {feature}, {model}, {at})"
        )
    };
    for sql in [
        tx("purchase_grant", 10_000, "NULL", "NULL", D0),
        tx("admin_adjustment", 500, "NULL", "NULL", D0 + 1),
        tx("admin_adjustment", -100, "NULL", "NULL", D0 + 2),
        tx("consumption", -300, "'chat'", "'gpt-4o'", D0 + 3),
        tx("reservation_hold", -1000, "'image'", "'dall-e'", D0 + DAY),
        tx(
            "reservation_settle",
            600,
            "'image'",
            "'dall-e'",
            D0 + DAY + 1,
        ),
        tx("consumption", -50, "'chat'", "'gpt-4o-mini'", D0 + DAY + 2),
        tx("consumption", -999, "'chat'", "'gpt-4o'", D0 - 1),
        tx(
            "reservation_release",
            200,
            "'image'",
            "'dall-e'",
            D0 + 2 * DAY,
        ),
        tx(
            "reservation_hold",
            -100,
            "'image'",
            "'dall-e'",
            D0 + 2 * DAY + 1,
        ),
    ] {
        run(store, &sql).await;
    }
}

fn window(days: i64) -> ReportWindow {
    ReportWindow {
        from: Timestamp::from_unix_millis(D0),
        until: Timestamp::from_unix_millis(D0 + days * DAY),
    }
}

fn revenue(day: i64, currency: Currency, paid_minor: i64, refunded_minor: i64) -> RevenueDay {
    RevenueDay {
        day: 20_000 + day,
        currency,
        paid_minor,
        refunded_minor,
    }
}

async fn revenue_is_paid_and_refunded_per_day_and_currency(store: &TestStore) {
    seed(store).await;
    assert_eq!(
        store.revenue_by_day(window(3)).await.unwrap(),
        [
            revenue(0, Currency::Usd, 1500, 200),
            revenue(1, Currency::Eur, 700, 700),
            revenue(2, Currency::Usd, 4000, 500),
        ]
    );
    assert_eq!(store.revenue_by_day(window(1)).await.unwrap().len(), 1);
}

async fn credits_granted_and_consumed_per_day(store: &TestStore) {
    seed(store).await;
    let day = |d: i64, granted: i64, consumed: i64| CreditsDay {
        day: 20_000 + d,
        granted: CreditsTotal::from_hundredths(i128::from(granted)),
        consumed: CreditsTotal::from_hundredths(i128::from(consumed)),
    };
    assert_eq!(
        store.credits_by_day(window(3)).await.unwrap(),
        // Day 2: a release of 200 outweighs a hold of 100, so nothing was consumed.
        [day(0, 10_500, 300), day(1, 0, 450), day(2, 0, 0)]
    );
}

async fn subscriptions_started_and_ended_per_day(store: &TestStore) {
    seed(store).await;
    assert_eq!(
        store.subscriptions_by_day(window(3)).await.unwrap(),
        [
            SubscriptionsDay {
                day: 20_001,
                started: 0,
                ended: 1
            },
            SubscriptionsDay {
                day: 20_002,
                started: 1,
                ended: 0
            },
        ]
    );
}

async fn consumption_by_feature_and_by_model_largest_first(store: &TestStore) {
    seed(store).await;
    let names = |shares: Vec<application::ports::ConsumptionShare>| -> Vec<(String, i128)> {
        shares
            .into_iter()
            .map(|s| (s.name.unwrap_or_default(), s.consumed.hundredths()))
            .collect()
    };
    let features = store
        .consumption_by(ConsumptionDimension::Feature, window(3), 10)
        .await
        .unwrap();
    assert_eq!(
        names(features),
        [("chat".to_owned(), 350), ("image".to_owned(), 300)]
    );
    let models = store
        .consumption_by(ConsumptionDimension::Model, window(3), 2)
        .await
        .unwrap();
    assert_eq!(
        names(models),
        [("dall-e".to_owned(), 300), ("gpt-4o".to_owned(), 300)]
    );
}

/// `account`'s spend per (day from 20 000, name, hundredths) over the first three days, sorted.
async fn spend_of(
    store: &TestStore,
    account: &domain::AccountId,
    dimension: ConsumptionDimension,
) -> Vec<(i64, String, i128)> {
    let rows = store
        .account_spend_by_day(account, dimension, window(3))
        .await
        .unwrap();
    let mut rows: Vec<(i64, String, i128)> = rows
        .into_iter()
        .map(|r| {
            (
                r.day - 20_000,
                r.name.unwrap_or_default(),
                r.spent.hundredths(),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// One account's spend per day and model (or feature): holds net of their settles and
/// releases (a day of net returns counts zero), another account's nothing.
async fn an_account_s_spend_per_day_by_feature_and_by_model(store: &TestStore) {
    seed(store).await;
    let account = domain::AccountId::new("usr_a").unwrap();
    let read = |dimension| spend_of(store, &account, dimension);
    assert_eq!(
        read(ConsumptionDimension::Model).await,
        [
            (0, "gpt-4o".to_owned(), 300),
            (1, "dall-e".to_owned(), 400),
            (1, "gpt-4o-mini".to_owned(), 50),
            (2, "dall-e".to_owned(), 0),
        ]
    );
    assert_eq!(
        read(ConsumptionDimension::Feature).await,
        [
            (0, "chat".to_owned(), 300),
            (1, "chat".to_owned(), 50),
            (1, "image".to_owned(), 400),
            (2, "image".to_owned(), 0),
        ]
    );
    let other = domain::AccountId::new("usr_nobody").unwrap();
    let none = store
        .account_spend_by_day(&other, ConsumptionDimension::Model, window(3))
        .await
        .unwrap();
    assert!(none.is_empty());
}

/// A day's total may exceed the largest balance (two grants of nearly a trillion credits), and
/// even `i64` (rows written before amounts were bounded): the sums are exact, never an error.
async fn sums_beyond_a_balance_and_beyond_i64_are_exact(store: &TestStore) {
    seed(store).await;
    let near_max = 99_999_999_900_000_i64;
    let huge = 5_000_000_000_000_000_000_i64;
    let tx = |kind: &str, amount: i64, feature: &str, at: i64| {
        format!(
            "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, \
             balance_after_hundredths, feature, created_at) VALUES ('usr_a', '{kind}', \
             {amount}, 0, {feature}, {at})"
        )
    };
    for sql in [
        tx("admin_adjustment", near_max, "NULL", D0 + 5 * DAY),
        tx("admin_adjustment", near_max, "NULL", D0 + 5 * DAY + 1),
        tx("admin_adjustment", huge, "NULL", D0 + 6 * DAY),
        tx("purchase_grant", huge, "NULL", D0 + 6 * DAY + 1),
        tx("consumption", -huge, "'big'", D0 + 6 * DAY + 2),
        tx("consumption", -huge, "'big'", D0 + 6 * DAY + 3),
        tx("consumption", -7, "'big'", D0 + 6 * DAY + 4),
    ] {
        run(store, &sql).await;
    }
    let later = ReportWindow {
        from: Timestamp::from_unix_millis(D0 + 5 * DAY),
        until: Timestamp::from_unix_millis(D0 + 7 * DAY),
    };
    let days = store.credits_by_day(later).await.unwrap();
    let granted: Vec<i128> = days.iter().map(|d| d.granted.hundredths()).collect();
    let consumed: Vec<i128> = days.iter().map(|d| d.consumed.hundredths()).collect();
    assert_eq!(granted, [2 * i128::from(near_max), 2 * i128::from(huge)]);
    assert_eq!(consumed, [0, 2 * i128::from(huge) + 7]);
    let shares = store
        .consumption_by(ConsumptionDimension::Feature, later, 10)
        .await
        .unwrap();
    assert_eq!(shares.len(), 1);
    assert_eq!(shares[0].consumed.hundredths(), 2 * i128::from(huge) + 7);
    assert_eq!(shares[0].consumed.saturating_hundredths(), i64::MAX);
}

contract_tests!(
    sums_beyond_a_balance_and_beyond_i64_are_exact,
    revenue_is_paid_and_refunded_per_day_and_currency,
    credits_granted_and_consumed_per_day,
    subscriptions_started_and_ended_per_day,
    consumption_by_feature_and_by_model_largest_first,
    an_account_s_spend_per_day_by_feature_and_by_model,
);
