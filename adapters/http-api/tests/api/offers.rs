//! Issue 19: plans carry their offer (`group`) and billing `interval` in `/api/plans`, and
//! admins set and clear the group, a bad one being a problem naming the field.

use serde_json::{Value, json};

use crate::helpers::{Answer, TestApp, bearer, spawn_app};

fn plan(id: &str, group: Option<&str>) -> Value {
    let mut plan = json!({
        "id": id,
        "provider": "card_gateway",
        "amount": "9.99",
        "currency": "USD",
        "duration": {"type": "recurring", "months": 12},
        "cardGatewayPriceId": "price_1",
        "i18n": {"en": {"name": "Pro Yearly"}}
    });
    if let Some(group) = group {
        plan["group"] = json!(group);
    }
    plan
}

async fn send(app: &TestApp, method: &str, path: &str, token: &str, body: Value) -> Answer {
    let request = match method {
        "PUT" => app.client.put(path),
        _ => app.client.post(path),
    };
    let request = request
        .header("authorization", bearer(token))
        .body_json(&body);
    Answer::of(request.send().await).await
}

#[tokio::test]
async fn public_plans_name_their_group_and_interval() {
    let app = spawn_app();
    let answer = Answer::of(app.client.get("/api/plans").send().await).await;
    answer.expect(200, None);
    let plans = answer.body["plans"].as_array().unwrap();
    let by_id = |id: &str| plans.iter().find(|p| p["id"] == id).unwrap();
    assert_eq!(by_id("pro-monthly")["group"], "pro");
    assert_eq!(by_id("pro-monthly")["interval"], "month");
    assert!(
        by_id("credits-100").get("group").is_none(),
        "a plan of its own has no group"
    );
    assert_eq!(by_id("credits-100")["interval"], "one_time");
    assert_eq!(by_id("lifetime")["interval"], "lifetime");
    // The spec's fields stay.
    assert_eq!(by_id("pro-monthly")["duration"]["months"], 1);
    assert_eq!(by_id("pro-monthly")["amountMinor"], 1_900);
}

#[tokio::test]
async fn an_admin_sets_and_clears_a_plans_group() {
    let app = spawn_app();
    let admin = app.admin().await;
    let created = send(
        &app,
        "POST",
        "/api/admin/plans",
        &admin,
        plan("pro-y", Some("pro")),
    )
    .await;
    created.expect(201, None);
    assert_eq!(created.body["group"], "pro");
    let cleared = send(
        &app,
        "PUT",
        "/api/admin/plans/pro-y",
        &admin,
        plan("pro-y", None),
    )
    .await;
    cleared.expect(200, None);
    assert!(cleared.body.get("group").is_none(), "{}", cleared.body);
}

#[tokio::test]
async fn a_bad_group_is_a_problem_naming_the_field() {
    let app = spawn_app();
    let admin = app.admin().await;
    for bad in ["Pro Plan", "", "-pro", "pro/yearly"] {
        let answer = send(
            &app,
            "POST",
            "/api/admin/plans",
            &admin,
            plan("pro-y", Some(bad)),
        )
        .await;
        answer.expect(422, Some("validation_failed"));
        let fields: Vec<&str> = answer.body["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, ["group"], "{bad:?}");
    }
    let too_long = "g".repeat(41);
    let answer = send(
        &app,
        "POST",
        "/api/admin/plans",
        &admin,
        plan("pro-y", Some(&too_long)),
    )
    .await;
    assert!(
        answer.status == 400 || answer.status == 422,
        "{}",
        answer.status
    );
    assert_eq!(answer.body["code"], "validation_failed");
}
