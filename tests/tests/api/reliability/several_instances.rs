//! Three `tally serve` processes on one PostgreSQL behind a load balancer (slow: only with
//! `TALLY_RELIABILITY=1`). Every provider's success webhooks, delivered five more times at once
//! and spread over the three, grant once per order (invariant 3); 64 clients spending one
//! account across the three spend exactly what it holds, never below zero, and the ledger
//! explains the balance (invariants 1 and 2).

use super::api::{assert_ledger_explains_balance, types};
use super::cluster::{Cluster, TALLY_TOML, enabled};
use super::duplicates::{
    CREDIT_PLANS, assert_one_grant_per_order, assert_spent_exactly_what_was_there, redeliver,
    spend_at_once,
};

const INSTANCES: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_providers_success_webhook_delivered_five_times_at_once_across_three_instances_grants_once()
 {
    let Some(_serial) = enabled("several_instances_webhooks").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_webhooks", INSTANCES, TALLY_TOML).await;
    let (api, token) = (&cluster.api, &cluster.buyer.token);
    let mut orders = Vec::new();
    for (provider, plan) in CREDIT_PLANS {
        orders.push(api.initiate(token, plan, provider).await);
    }
    for order in &orders {
        api.pay(order).await;
    }
    let mut expected = 0;
    for order in &orders {
        api.wait_for_status(token, order, "paid").await;
        let view = api.order(token, order).await;
        expected += view.body["creditsHundredths"].as_i64().expect("credits");
    }
    let deliveries: Vec<_> = orders
        .iter()
        .map(|order| {
            let (api, order) = (api.clone(), order.clone());
            tokio::spawn(async move { (order.clone(), redeliver(&api, &order).await) })
        })
        .collect();
    for delivery in deliveries {
        let (order, statuses) = delivery.await.expect("redelivery");
        for status in &statuses {
            assert!(matches!(status, Some(200..=299)), "{order}: {statuses:?}");
        }
    }
    let spread = cluster.balancer.webhooks_by_backend();
    assert_eq!(
        spread.len(),
        INSTANCES,
        "every instance got webhooks: {spread:?}"
    );
    let balance = api.balance(token, None).await;
    assert_eq!(balance, expected, "one grant per order");
    let ledger = api.ledger(token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_one_grant_per_order(&ledger, &orders);
    println!(
        "webhooks by instance: {spread:?}; ledger: {:?}",
        types(&ledger)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_spending_one_account_across_three_instances_spend_exactly_what_it_holds()
 {
    let Some(_serial) = enabled("several_instances_spending").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_spending", INSTANCES, TALLY_TOML).await;
    let buyer = &cluster.buyer;
    cluster.buy("credits_card_500", "card_gateway").await;
    let start = cluster.api.balance(&buyer.token, None).await;
    assert_eq!(start, 50_000);
    let apis = cluster.apis();
    let started = std::time::Instant::now();
    let outcomes = spend_at_once(&apis, &cluster.api_key, &buyer.user_id).await;
    let elapsed = started.elapsed();
    assert_spent_exactly_what_was_there(
        &apis[1],
        &cluster.api_key,
        &buyer.user_id,
        start,
        &outcomes,
    )
    .await;
    assert_eq!(cluster.api.balance(&buyer.token, None).await, 0);
    println!(
        "{} spends across {INSTANCES} instances in {elapsed:?}",
        outcomes.len()
    );
}
