//! Rows that fail the domain's constructors are reported as `Corrupt`, never a panic.

use application::accounts::TokenHash;
use application::pagination::PageRequest;
use application::ports::{
    ApiKeyRepository, CreditLedger, OrderRepository, PlanRepository, StoreError,
    SubscriptionRepository, UserRepository,
};
use domain::{AccountId, PlanId, SubscriptionId};

use crate::support::{TestStore, contract_tests, oid, uid, user};

fn is_corrupt<T: std::fmt::Debug>(result: Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Corrupt(_)))
}

const ORDER: &str = "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, \
    currency, status, paid_at, expires_at, created_at, updated_at) VALUES ";

async fn corrupt_orders_are_reported(store: &TestStore) {
    let u = user(store, "u1").await;
    store.raw(&format!("{ORDER} ('bad-currency', 'u1', 'card_gateway', 'p', 'credits', 100, 'ZZZ', 'pending', NULL, 1, 1, 1)")).await;
    store.raw(&format!("{ORDER} ('paid-never', 'u1', 'card_gateway', 'p', 'credits', 100, 'USD', 'paid', NULL, 1, 1, 1)")).await;
    store.raw(&format!("{ORDER} ('bad-plan', 'u1', 'card_gateway', 'Not A Plan', 'credits', 100, 'USD', 'pending', NULL, 1, 1, 1)")).await;
    store.raw(&format!("{ORDER} ('bad-provider', 'u1', 'stripe', 'p', 'credits', 100, 'USD', 'pending', NULL, 1, 1, 1)")).await;
    for id in ["bad-currency", "paid-never", "bad-plan", "bad-provider"] {
        let found = store.find_order(&oid(id)).await;
        assert!(is_corrupt(found), "{id}");
    }
    assert!(is_corrupt(
        store
            .list_orders(
                &AccountId::personal(&u),
                PageRequest::new(None, None).unwrap()
            )
            .await
    ));
    assert!(is_corrupt(
        store
            .claim_pending_orders(
                domain::Timestamp::from_unix_millis(10),
                10,
                domain::Timestamp::from_unix_millis(10),
                1
            )
            .await
    ));
}

async fn corrupt_plans_are_reported(store: &TestStore) {
    let insert = "INSERT INTO pricing_plan (id, provider, plan_type, currency, amount_minor, hidden, \
        locales, sort_order, data, created_at, updated_at) VALUES ";
    store.raw(&format!("{insert} ('not-json', 'card_gateway', 'one_time', 'USD', 100, FALSE, '', 0, '{{oops', 1, 1)")).await;
    let no_texts = r#"{"i18n":{},"months":999999}"#;
    store.raw(&format!("{insert} ('no-texts', 'card_gateway', 'one_time', 'USD', 100, FALSE, '', 1, '{no_texts}', 1, 1)")).await;
    let fine = r#"{"i18n":{"en":{"name":"Ok"}},"months":999999}"#;
    store.raw(&format!("{insert} ('bad-locale', 'card_gateway', 'one_time', 'USD', 100, FALSE, 'en,!!', 2, '{fine}', 1, 1)")).await;
    for id in ["not-json", "no-texts", "bad-locale"] {
        assert!(
            is_corrupt(store.find_plan(&PlanId::new(id).unwrap()).await),
            "{id}"
        );
    }
    assert!(is_corrupt(store.list_plans().await));
}

async fn corrupt_accounts_and_subscriptions_are_reported(store: &TestStore) {
    store.raw("INSERT INTO users (id, email, role, created_at) VALUES ('u1', 'not an email', 'user', 1)").await;
    store.raw("INSERT INTO users (id, email, role, created_at) VALUES ('bad id!', 'x@example.com', 'user', 1)").await;
    assert!(is_corrupt(store.find_user(&uid("u1")).await));
    let email = application::accounts::Email::parse("x@example.com").unwrap();
    assert!(is_corrupt(store.find_user_by_email(&email).await));
    store
        .raw(
            "INSERT INTO api_keys (id, owner_id, name, prefix, key_hash, scopes, created_at) \
        VALUES ('k1', 'u1', 'n', 'p', 'h1', 'credits:read root', 1)",
        )
        .await;
    assert!(is_corrupt(
        store.find_api_key(&TokenHash("h1".into())).await
    ));
    assert!(is_corrupt(store.list_api_keys().await));
    store.raw("INSERT INTO subscriptions (id, user_id, plan_id, provider, provider_subscription_id, status, \
        period_start, period_end, last_event_at, created_at, updated_at) \
        VALUES ('s1', 'u1', 'pro', 'nobody', 'sub_1', 'active', 0, 100, 0, 0, 0)").await;
    assert!(is_corrupt(
        store
            .find_subscription(&SubscriptionId::new("s1").unwrap())
            .await
    ));
    assert!(is_corrupt(
        store
            .list_subscriptions(&AccountId::new("u1").unwrap())
            .await
    ));
}

async fn corrupt_ledger_rows_are_reported(store: &TestStore) {
    let u = user(store, "u1").await;
    // Beyond the largest amount the domain represents (10^12 credits).
    store.raw("INSERT INTO credit_transactions (account_id, kind, amount_hundredths, balance_after_hundredths, created_at) \
        VALUES ('u1', 'admin_adjustment', 1, 200000000000000, 1)").await;
    assert!(is_corrupt(
        store
            .transactions(
                &domain::AccountId::personal(&u),
                PageRequest::new(None, None).unwrap()
            )
            .await
    ));
    store.raw("INSERT INTO credit_reservations (id, account_id, held_hundredths, status, idempotency_key, \
        request_hash, created_at, expires_at) VALUES ('r1', 'u1', 200000000000000, 'pending', 'k', 'h', 1, 2)").await;
    assert!(is_corrupt(
        store
            .pending_reservations(&domain::AccountId::personal(&u))
            .await
    ));
}

contract_tests!(
    corrupt_orders_are_reported,
    corrupt_plans_are_reported,
    corrupt_accounts_and_subscriptions_are_reported,
    corrupt_ledger_rows_are_reported,
);
