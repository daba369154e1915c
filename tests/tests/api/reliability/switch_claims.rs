//! One plan switch at a time across instances (issue 19; slow: only with `TALLY_RELIABILITY=1`):
//! three `tally serve` processes on one PostgreSQL, eight requests at once to switch the same
//! subscription at its period's end, spread over the three. Exactly one claims the
//! subscription and asks the provider (one cancellation webhook from the sandbox); the others
//! answer 409 `change_in_progress`.

use serde_json::{Value, json};

use super::cluster::{Cluster, TALLY_TOML, enabled};

const INSTANCES: usize = 3;
const REQUESTS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_switches_at_once_across_three_instances_reach_the_provider_once() {
    let Some(_serial) = enabled("several_instances_switches").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_switches", INSTANCES, TALLY_TOML).await;
    let token = cluster.buyer.token.clone();
    cluster.buy("pro_monthly", "card_gateway").await;
    let status = cluster.api.get(&token, "/api/credits/status").await;
    let id = status.body["subscription"]["id"]
        .as_str()
        .expect("subscription")
        .to_owned();
    let deliveries = || async {
        let sent = cluster.api.get("", "/sandbox/api/deliveries").await.body;
        sent.as_array().map_or(0, Vec::len)
    };
    let before = deliveries().await;
    let path = format!("/api/subscriptions/{id}/change-plan");
    let body = json!({"planId": "pro_yearly", "when": "period_end"});
    let apis = cluster.apis();
    let requests: Vec<_> = (0..REQUESTS)
        .map(|n| {
            let (api, token, path, body) = (
                apis[n % INSTANCES].clone(),
                token.clone(),
                path.clone(),
                body.clone(),
            );
            tokio::spawn(async move { api.post(&token, &path, &body, None).await })
        })
        .collect();
    let mut accepted = 0;
    for request in requests {
        let reply = request.await.expect("request");
        match reply.status {
            200 => accepted += 1,
            409 => assert!(reply.is_problem("change_in_progress"), "{:?}", reply.body),
            other => panic!("{other}: {:?}", reply.body),
        }
    }
    assert_eq!(accepted, 1, "exactly one switch is claimed");
    assert_eq!(
        deliveries().await,
        before + 1,
        "one cancellation at the provider"
    );
    let held: Value = cluster.api.get(&token, "/api/credits/status").await.body;
    assert_eq!(held["subscription"]["scheduledPlanId"], "pro_yearly");
    assert_eq!(held["subscription"]["cancelAtPeriodEnd"], true);
}
