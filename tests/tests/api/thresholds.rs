//! Balance thresholds through HTTP: an owner sets thresholds on their account, spends across
//! them tell `credits.threshold_crossed` and a grant back over tells `credits.recovered` (read
//! from the event feed), `GET /api/thresholds` shows where each sits, malformed thresholds are
//! 422 naming the field, and only owners and admins change them.

use serde_json::{Value, json};
use tests::spawn_app_with_admin;

const THRESHOLDS: &str = "/api/thresholds";
const CONSUME: &str = "/api/credits/consume";

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["code"].as_str())
}

#[tokio::test]
async fn thresholds_tell_each_crossing_and_show_where_they_sit() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, token) = app.user("ada@example.com").await;
    let fund = format!("/api/admin/accounts/{ada}/credits");
    let grant = json!({"amount": "100", "reason": "first"});
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);

    for (body, field) in [
        (json!({}), "credits"),
        (json!({"credits": "5", "percentOfGrant": 10}), "credits"),
        (json!({"credits": "0"}), "credits"),
        (json!({"credits": "1.001"}), "credits"),
        (json!({"percentOfGrant": 0}), "percentOfGrant"),
        (json!({"percentOfGrant": 101}), "percentOfGrant"),
    ] {
        let answer = app.post(&token, THRESHOLDS, &body, None).await;
        assert_eq!(code(&answer), (422, Some("validation_failed")), "{body}");
        assert_eq!(answer.1["errors"][0]["field"], field, "{}", answer.1);
    }
    let (status, fixed) = app
        .post(&token, THRESHOLDS, &json!({"credits": "80"}), None)
        .await;
    assert_eq!(status, 201, "{fixed}");
    assert_eq!(fixed["creditsHundredths"], 8_000);
    assert_eq!(fixed["below"], false);
    let (status, share) = app
        .post(&token, THRESHOLDS, &json!({"percentOfGrant": 25}), None)
        .await;
    assert_eq!(status, 201, "{share}");
    assert_eq!(share["levelHundredths"], 2_500, "25% of the grant of 100");

    // An image costs 10 credits: 100 → 70 crosses 80; 30 → 20 crosses 25.
    let backend = app.api_key(&admin, &["credits:consume"]).await;
    let image = json!({"userId": ada, "feature": "image_hd"});
    for i in 0..8 {
        let key = format!("s{i}");
        let (status, spent) = app.post(&backend, CONSUME, &image, Some(&key)).await;
        assert_eq!(status, 201, "{spent}");
    }
    let (_, list) = app.get(&token, THRESHOLDS).await;
    let below: Vec<&Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["below"])
        .collect();
    assert_eq!(below, [&json!(true), &json!(true)], "{list}");

    let grant = json!({"amount": "200", "reason": "second"});
    assert_eq!(app.post(&admin, &fund, &grant, Some("f2")).await.0, 200);

    let reader = app.api_key(&admin, &["events:read"]).await;
    let feed = "/api/events?type=credits.threshold_crossed,credits.recovered";
    let (status, events) = app.get(&reader, feed).await;
    assert_eq!(status, 200, "{events}");
    let told: Vec<(&str, &str, i64)> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["data"]["threshold"]["id"].as_str().unwrap(),
                e["data"]["balanceHundredths"].as_i64().unwrap(),
            )
        })
        .collect();
    let (fixed_id, share_id) = (fixed["id"].as_str().unwrap(), share["id"].as_str().unwrap());
    // The grant of 200 takes 20 to 220: back over 80, and over 25% of the last grant (50).
    assert_eq!(
        told,
        [
            ("credits.threshold_crossed", fixed_id, 7_000),
            ("credits.threshold_crossed", share_id, 2_000),
            ("credits.recovered", fixed_id, 22_000),
            ("credits.recovered", share_id, 22_000),
        ]
    );

    // Only owners and admins change thresholds; a removed one is gone.
    let (_, stranger) = app.user("eve@example.com").await;
    let path = format!("{THRESHOLDS}/{fixed_id}");
    let (status, _) = app.delete(&stranger, &path).await;
    assert_eq!(status, 404, "another account has no such threshold");
    let (status, _) = app.delete(&token, &path).await;
    assert_eq!(status, 204);
    let answer = app.delete(&token, &path).await;
    assert_eq!(code(&answer), (404, Some("threshold_not_found")));
    let (_, list) = app.get(&token, THRESHOLDS).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["levelHundredths"], 5_000);
}

/// A threshold at a percentage of a limit sits at that share of the limit's credits, shows
/// which limit it follows, and goes when the limit is removed; a malformed one is 422 naming
/// the field.
#[tokio::test]
async fn a_threshold_at_a_percentage_of_a_limit_follows_the_limit() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, token) = app.user("ada@example.com").await;
    let fund = format!("/api/admin/accounts/{ada}/credits");
    let grant = json!({"amount": "100", "reason": "first"});
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);
    let ceiling = json!({"credits": "100", "window": "month"});
    let (status, limit) = app.post(&token, "/api/limits", &ceiling, None).await;
    assert_eq!(status, 201, "{limit}");
    let limit_id = limit["id"].as_str().expect("id");

    for (body, field) in [
        (json!({"percentOfLimit": 50}), "limitId"),
        (
            json!({"percentOfLimit": 0, "limitId": limit_id}),
            "percentOfLimit",
        ),
        (json!({"credits": "5", "limitId": limit_id}), "limitId"),
        (
            json!({"percentOfLimit": 50, "limitId": "lim_none"}),
            "limitId",
        ),
    ] {
        let answer = app.post(&token, THRESHOLDS, &body, None).await;
        assert_eq!(code(&answer), (422, Some("validation_failed")), "{body}");
        assert_eq!(answer.1["errors"][0]["field"], field, "{}", answer.1);
    }
    let half = json!({"percentOfLimit": 50, "limitId": limit_id});
    let (status, shown) = app.post(&token, THRESHOLDS, &half, None).await;
    assert_eq!(status, 201, "{shown}");
    assert_eq!(
        (
            &shown["percentOfLimit"],
            &shown["limitId"],
            &shown["levelHundredths"]
        ),
        (&json!(50), &json!(limit_id), &json!(5_000))
    );
    assert_eq!(shown["below"], false);

    // 100 → 45 with 11 image spends of 5: below half the ceiling of 100.
    let backend = app.api_key(&admin, &["credits:consume"]).await;
    let image = json!({"userId": ada, "feature": "image"});
    for i in 0..11 {
        let key = format!("s{i}");
        let answer = app.post(&backend, CONSUME, &image, Some(&key)).await;
        assert_eq!(answer.0, 201, "{}", answer.1);
    }
    let (_, listed) = app.get(&token, THRESHOLDS).await;
    assert_eq!(listed["items"][0]["below"], true, "{listed}");

    let path = format!("/api/limits/{limit_id}");
    assert_eq!(app.delete(&token, &path).await.0, 204);
    let (_, listed) = app.get(&token, THRESHOLDS).await;
    assert_eq!(listed["items"], json!([]), "{listed}");
}
