//! Replaying recorded provider events (issue 18) on PostgreSQL, through each provider's real
//! gateway and the sandbox: every recorded event of a subscription purchase at five providers is
//! replayed, twice; an applied one is a duplicate, a reconciliation row (no body) is not
//! replayable, and the balance does not move.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

const PURCHASES: [(&str, &str); 5] = [
    ("card_gateway", "pro_monthly"),
    ("wallet_global", "pro_monthly_wallet_global"),
    ("mor_a", "pro_monthly_eur"),
    ("mor_b", "team_yearly"),
    ("mor_c", "pro_quarterly"),
];

async fn inbox(app: &TestApp, admin: &str) -> Vec<Value> {
    let (status, page) = app.get(admin, "/api/admin/webhook-events?limit=100").await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().expect("items").clone()
}

#[tokio::test]
async fn every_recorded_event_of_five_providers_replays_without_moving_the_balance() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let mut buyers = Vec::new();
    for (provider, plan) in PURCHASES {
        let token = app
            .register(&format!("replay-{provider}@example.com"))
            .await;
        let order = app.open_checkout(&token, plan, provider, None).await.0;
        app.sandbox_action(&order, "pay", &json!({})).await;
        app.wait_for_status(&token, &order, "paid").await;
        let balance = app.balance_hundredths(&token).await;
        assert!(balance > 0, "{provider}");
        buyers.push((token, balance));
    }
    let recorded = inbox(&app, &admin).await;
    let providers: Vec<&str> = recorded
        .iter()
        .filter_map(|e| e["provider"].as_str())
        .collect();
    for (provider, _) in PURCHASES {
        assert!(providers.contains(&provider), "{provider} recorded");
    }
    let (status, _) = app
        .post(
            &buyers[0].0,
            "/api/admin/webhook-events/1/replay",
            &json!({}),
            None,
        )
        .await;
    assert_eq!(status, 403, "customers do not replay");
    // The providers one of whose events was read again through `parse_recorded`.
    let mut reread = std::collections::BTreeSet::new();
    for _ in 0..2 {
        for event in &recorded {
            let path = format!("/api/admin/webhook-events/{}/replay", event["id"]);
            let (status, answer) = app.post(&admin, &path, &json!({}), None).await;
            let outcome = event["outcome"].as_str().unwrap();
            if event["payload"].as_str().unwrap().is_empty() {
                assert_eq!((status, &answer["code"]), (422, &json!("not_replayable")));
            } else if ["applied", "duplicate_state"].contains(&outcome) {
                assert_eq!((status, &answer["outcome"]), (200, &json!("duplicate")));
            } else {
                assert_eq!(status, 200, "{event}: {answer}");
                assert!(answer["replayedAs"].is_string(), "{answer}");
                reread.insert(event["provider"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(!reread.is_empty(), "some event was decided again");
    for (token, balance) in &buyers {
        assert_eq!(app.balance_hundredths(token).await, *balance);
    }
}
