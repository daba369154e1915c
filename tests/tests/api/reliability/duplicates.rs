//! Duplicates and races on one instance (SQLite, in process): every provider's genuine success
//! webhooks delivered again five times at once grant once (invariant 3), and 64 clients spending
//! one account at once spend exactly what it holds (invariants 1, 2 and 4).

use std::collections::BTreeSet;

use serde_json::json;

use super::api::{Api, assert_ledger_explains_balance, consumption_ids, types};
use super::open_shop;

/// For each provider, a plan that grants credits (Creem sells no credits pack: its monthly
/// subscription grants the period's credits).
pub const CREDIT_PLANS: [(&str, &str); 7] = [
    ("wallet_qr", "credits_cn_qr_1000"),
    ("wallet_web", "credits_cn_web_5500"),
    ("card_gateway", "credits_card_500"),
    ("wallet_global", "credits_wallet_global_2000"),
    ("mor_a", "pro_monthly_eur"),
    ("mor_b", "credits_mor_b_10000"),
    ("mor_c", "credits_mor_c_jpy"),
];
/// How many times each payment's webhooks are delivered again, all at once.
pub const REDELIVERIES: i64 = 5;
/// The feature the spending tests use, and its fixed cost in hundredths (config/credits.toml).
pub const FEATURE: &str = "image";
pub const FEATURE_COST_HUNDREDTHS: i64 = 500;
/// Concurrent clients spending one account.
pub const CLIENTS: usize = 64;
/// Spends each client attempts.
pub const SPENDS_PER_CLIENT: usize = 4;
/// How often one spend is retried with the same key after a 503 or a transport failure.
pub const MAX_RETRIES: usize = 20;

/// Redeliver every webhook the sandbox sent about `order_id`, `REDELIVERIES` times at once;
/// returns the statuses the app answered.
pub async fn redeliver(sandbox: &Api, order_id: &str) -> Vec<Option<u64>> {
    let payment = sandbox.sandbox_payment(order_id).await;
    let id = payment["id"].as_str().expect("sandbox payment");
    let reply = sandbox
        .sandbox_action(id, "redeliver", &json!({"amountMinor": REDELIVERIES}))
        .await;
    assert_eq!(reply.status, 200, "redeliver {order_id}: {reply:?}");
    reply.body["statuses"]
        .as_array()
        .expect("statuses")
        .iter()
        .map(serde_json::Value::as_u64)
        .collect()
}

/// Check that each order paid for exactly one grant: purchase grants name their order, the
/// subscription's first period grant names its subscription.
pub fn assert_one_grant_per_order(ledger: &[serde_json::Value], orders: &[String]) {
    let purchase: Vec<&str> = ledger
        .iter()
        .filter(|t| t["type"] == "purchase_grant")
        .filter_map(|t| t["orderId"].as_str())
        .collect();
    let distinct: BTreeSet<&str> = purchase.iter().copied().collect();
    assert_eq!(
        purchase.len(),
        distinct.len(),
        "a purchase granted twice: {purchase:?}"
    );
    let subscription = ledger
        .iter()
        .filter(|t| t["type"] == "subscription_grant")
        .count();
    assert_eq!(
        purchase.len() + subscription,
        orders.len(),
        "one grant per paid order: {:?}",
        types(ledger)
    );
    for granted in &distinct {
        assert!(
            orders.iter().any(|o| o == granted),
            "a grant for an unknown order {granted}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_providers_success_webhook_delivered_again_five_times_at_once_grants_once() {
    let shop = open_shop().await;
    let (api, token) = (&shop.api, &shop.buyer.token);
    let mut orders = Vec::new();
    for (provider, plan) in CREDIT_PLANS {
        let order = api.initiate(token, plan, provider).await;
        api.pay(&order).await;
        orders.push(order);
    }
    let mut expected = 0;
    for order in &orders {
        api.wait_for_status(token, order, "paid").await;
        let view = api.order(token, order).await;
        expected += view.body["creditsHundredths"].as_i64().expect("credits");
    }
    let balance_before = api.balance(token, None).await;
    let deliveries: Vec<_> = orders
        .iter()
        .map(|order| {
            let (api, order) = (api.clone(), order.clone());
            tokio::spawn(async move { (order.clone(), redeliver(&api, &order).await) })
        })
        .collect();
    for delivery in deliveries {
        let (order, statuses) = delivery.await.expect("redelivery");
        assert!(statuses.len() >= 5, "{order}: {statuses:?}");
        for status in statuses {
            assert!(matches!(status, Some(200..=299)), "{order}: {status:?}");
        }
    }
    let balance = api.balance(token, None).await;
    assert_eq!(balance, balance_before, "redelivery granted nothing more");
    assert_eq!(balance, expected);
    let ledger = api.ledger(token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_one_grant_per_order(&ledger, &orders);
}

/// What one spend came to, after retries with its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spend {
    /// 201: the transaction id.
    Spent(i64),
    /// 402: the balance did not cover it.
    Refused,
}

/// Spend once with `key`, retrying the same key on 503s and transport failures.
pub async fn spend(api: &Api, api_key: &str, user_id: &str, key: &str) -> Spend {
    let mut last = String::new();
    for attempt in 0..MAX_RETRIES {
        match api.try_consume(api_key, user_id, FEATURE, key).await {
            Ok(reply) if reply.status == 201 => {
                return Spend::Spent(reply.body["transactionId"].as_i64().expect("id"));
            }
            Ok(reply) if reply.status == 402 => {
                assert!(reply.is_problem("insufficient_credits"), "{reply:?}");
                return Spend::Refused;
            }
            Ok(reply) if reply.status == 503 => {
                assert!(reply.is_problem("service_unavailable"), "{reply:?}");
                last = format!("{reply:?}");
            }
            Ok(reply) => panic!("spend {key}: {reply:?}"),
            Err(error) => last = error,
        }
        let pause = 50 * u64::try_from(attempt + 1).unwrap_or(1);
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
    panic!("spend {key} never got an answer: {last}");
}

/// `CLIENTS` clients, client `i` on `apis[i % apis.len()]`, each spending `SPENDS_PER_CLIENT`
/// times with its own keys; returns every outcome by key.
pub async fn spend_at_once(apis: &[Api], api_key: &str, user_id: &str) -> Vec<(String, Spend)> {
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let api = apis[client % apis.len()].clone();
            let (api_key, user_id) = (api_key.to_owned(), user_id.to_owned());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for n in 0..SPENDS_PER_CLIENT {
                    let key = format!("spend-{client}-{n}");
                    let outcome = spend(&api, &api_key, &user_id, &key).await;
                    outcomes.push((key, outcome));
                }
                outcomes
            })
        })
        .collect();
    let mut all = Vec::new();
    for client in clients {
        all.extend(client.await.expect("client"));
    }
    all
}

/// The checks after `spend_at_once` on an account that held `start` hundredths: exactly as many
/// spends succeeded as the balance allowed, each once in the ledger, and the ledger explains the
/// balance.
pub async fn assert_spent_exactly_what_was_there(
    api: &Api,
    api_key: &str,
    user_id: &str,
    start: i64,
    outcomes: &[(String, Spend)],
) {
    let spent: Vec<i64> = outcomes
        .iter()
        .filter_map(|(_, o)| match o {
            Spend::Spent(id) => Some(*id),
            Spend::Refused => None,
        })
        .collect();
    let allowed = usize::try_from(start / FEATURE_COST_HUNDREDTHS).expect("positive");
    let attempts = CLIENTS * SPENDS_PER_CLIENT;
    assert_eq!(spent.len(), allowed.min(attempts), "successful spends");
    let distinct: BTreeSet<i64> = spent.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        spent.len(),
        "two spends share a transaction"
    );
    let balance = api.balance(api_key, Some(user_id)).await;
    let expected = start - FEATURE_COST_HUNDREDTHS * i64::try_from(spent.len()).expect("count");
    assert_eq!(balance, expected, "the balance after the spends");
    let ledger = api.ledger(api_key, Some(user_id)).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_eq!(
        consumption_ids(&ledger),
        distinct,
        "the ledger holds exactly the answered spends"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_spending_one_account_at_once_spend_exactly_what_it_holds() {
    let shop = open_shop().await;
    let (api, buyer) = (&shop.api, &shop.buyer);
    let order = api
        .initiate(&buyer.token, "credits_card_500", "card_gateway")
        .await;
    api.pay(&order).await;
    api.wait_for_status(&buyer.token, &order, "paid").await;
    let start = api.balance(&buyer.token, None).await;
    assert_eq!(start, 50_000);
    let outcomes = spend_at_once(std::slice::from_ref(api), &shop.api_key, &buyer.user_id).await;
    assert_spent_exactly_what_was_there(api, &shop.api_key, &buyer.user_id, start, &outcomes).await;
    // Every key again: the first outcome, marked as a replay, never a second spend.
    for (key, outcome) in outcomes.iter().step_by(7) {
        let again = api
            .try_consume(&shop.api_key, &buyer.user_id, FEATURE, key)
            .await;
        let again = again.expect("an answer");
        if let Spend::Spent(id) = outcome {
            assert_eq!(
                (again.status, again.replayed),
                (201, true),
                "{key}: {again:?}"
            );
            assert_eq!(again.body["transactionId"].as_i64(), Some(*id), "{key}");
        } else {
            assert_eq!(again.status, 402, "{key}: {again:?}");
        }
    }
    assert_eq!(api.balance(&buyer.token, None).await, 0);
}
