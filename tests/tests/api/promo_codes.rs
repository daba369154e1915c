//! Promo codes through HTTP: an administrator creates codes (malformed ones are 422 naming the
//! field, a second code with the same text in another case is 409); users redeem them into
//! their personal accounts case-insensitively, once per request key, within the total and
//! per-user limits even when they all ask at once; unknown, disabled and expired codes are told
//! alike; codes for new users or for holders of a plan refuse others; every attempt counts
//! against the user's allowance of guesses; the credits come as the code's category and the
//! host is told `credits.granted` and `promo_code.redeemed`.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

const ADMIN_CODES: &str = "/api/admin/promo-codes";
const REDEEM: &str = "/api/promo-codes/redeem";

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["code"].as_str())
}

async fn create(app: &TestApp, admin: &str, body: &Value) -> Value {
    let (status, made) = app.post(admin, ADMIN_CODES, body, None).await;
    assert_eq!(status, 201, "{made}");
    made
}

async fn redeem(app: &TestApp, token: &str, code: &str, key: Option<&str>) -> (u16, Value) {
    let mut body = json!({"code": code});
    if let Some(key) = key {
        body["idempotencyKey"] = json!(key);
    }
    app.post(token, REDEEM, &body, None).await
}

#[tokio::test]
async fn a_code_is_redeemed_once_per_user_into_promotional_credits_and_told() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    for (body, field) in [
        (json!({"code": "ab", "credits": "5"}), "code"),
        (json!({"code": "LAUNCH 50", "credits": "5"}), "code"),
        (json!({"code": "LAUNCH", "credits": "0"}), "credits"),
        (json!({"code": "LAUNCH", "credits": "1.001"}), "credits"),
        (
            json!({"code": "LAUNCH", "credits": "5", "category": "free"}),
            "category",
        ),
        (
            json!({"code": "LAUNCH", "credits": "5", "perUser": 0}),
            "perUser",
        ),
        (
            json!({"code": "LAUNCH", "credits": "5", "maxRedemptions": 0}),
            "maxRedemptions",
        ),
        (
            json!({"code": "LAUNCH", "credits": "5", "expiresAfterDays": 0}),
            "expiresAfterDays",
        ),
        (
            json!({"code": "LAUNCH", "credits": "5", "planId": "no_such_plan"}),
            "planId",
        ),
        (
            json!({"code": "LAUNCH", "credits": "5", "validFrom": "2030-01-02T00:00:00Z",
                   "validUntil": "2030-01-01T00:00:00Z"}),
            "validUntil",
        ),
        (
            json!({"code": "LAUNCH", "credits": "5", "validFrom": "tomorrow"}),
            "validFrom",
        ),
    ] {
        let answer = app.post(&admin, ADMIN_CODES, &body, None).await;
        assert_eq!(code(&answer), (422, Some("validation_failed")), "{body}");
        assert_eq!(answer.1["errors"][0]["field"], field, "{}", answer.1);
    }
    let made = create(
        &app,
        &admin,
        &json!({"code": "launch-50", "credits": "50", "expiresAfterDays": 30}),
    )
    .await;
    assert_eq!(made["code"], "LAUNCH-50");
    assert_eq!(made["category"], "promotional");
    assert_eq!(made["perUser"], 1);
    let again = app
        .post(
            &admin,
            ADMIN_CODES,
            &json!({"code": "Launch-50", "credits": "5"}),
            None,
        )
        .await;
    assert_eq!(code(&again), (409, Some("promo_code_exists")));

    let (ada, token) = app.user("ada@example.com").await;
    let (status, first) = redeem(&app, &token, " Launch-50 ", None).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["creditsHundredths"], 5_000);
    assert_eq!(first["category"], "promotional");
    assert_eq!(first["replayed"], false);
    assert!(first["expiresAt"].is_string(), "{first}");
    let (status, replay) = redeem(&app, &token, "LAUNCH-50", None).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["id"], first["id"]);
    let other_key = redeem(&app, &token, "LAUNCH-50", Some("second")).await;
    assert_eq!(code(&other_key), (409, Some("promo_code_already_redeemed")));
    assert_eq!(app.balance_hundredths(&token).await, 5_000);
    let (_, status) = app.get(&token, "/api/credits/status").await;
    assert_eq!(
        status["balanceByCategory"]["promotional"], "50.00",
        "{status}"
    );

    for unknown in ["NOPE-123", "x", "LAUNCH-50!"] {
        let answer = redeem(&app, &token, unknown, Some(unknown)).await;
        assert_eq!(
            code(&answer),
            (404, Some("promo_code_invalid")),
            "{unknown}"
        );
    }

    let reader = app.api_key(&admin, &["events:read"]).await;
    let (status, events) = app
        .get(
            &reader,
            "/api/events?type=promo_code.redeemed,credits.granted",
        )
        .await;
    assert_eq!(status, 200, "{events}");
    let told: Vec<&Value> = events["data"].as_array().expect("events").iter().collect();
    let redeemed: Vec<&&Value> = told
        .iter()
        .filter(|e| e["type"] == "promo_code.redeemed")
        .collect();
    assert_eq!(redeemed.len(), 1, "{events}");
    assert_eq!(redeemed[0]["data"]["code"], "LAUNCH-50");
    assert_eq!(redeemed[0]["data"]["userId"], ada.as_str());
    assert_eq!(redeemed[0]["data"]["redemptionId"], first["id"]);
    let granted = told
        .iter()
        .find(|e| e["type"] == "credits.granted" && e["data"]["userId"] == ada.as_str())
        .expect("credits.granted");
    assert_eq!(
        granted["data"]["transaction"]["category"], "promotional",
        "{granted}"
    );

    let (status, detail) = app
        .get(
            &admin,
            &format!("{ADMIN_CODES}/{}", made["id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["code"]["redeemed"], 1);
    assert_eq!(detail["redemptions"][0]["userId"], ada.as_str());
    let (status, list) = app.get(&token, ADMIN_CODES).await;
    assert_eq!(status, 403, "{list}");
}

#[tokio::test]
async fn disabled_and_expired_codes_are_told_like_unknown_ones_and_guesses_are_limited() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let made = create(&app, &admin, &json!({"code": "SPRING", "credits": "10"})).await;
    create(
        &app,
        &admin,
        &json!({"code": "OLD", "credits": "10", "validUntil": "2020-01-01T00:00:00Z"}),
    )
    .await;
    create(
        &app,
        &admin,
        &json!({"code": "LATER", "credits": "10", "validFrom": "2099-01-01T00:00:00Z"}),
    )
    .await;
    let path = format!("{ADMIN_CODES}/{}", made["id"].as_str().unwrap());
    let off = app
        .client
        .patch(app.url(&path))
        .bearer_auth(&admin)
        .json(&json!({"active": false}))
        .send()
        .await
        .expect("patch");
    assert_eq!(off.status(), 200);
    let (_, token) = app.user("bo@example.com").await;
    for text in ["SPRING", "OLD", "LATER", "NEVER-MADE"] {
        let answer = redeem(&app, &token, text, Some(text)).await;
        assert_eq!(code(&answer), (404, Some("promo_code_invalid")), "{text}");
        assert_eq!(
            answer.1["detail"],
            "no such promo code, or it is not valid now"
        );
    }
    // Four attempts so far; the allowance is ten at once.
    for n in 0..6 {
        let key = format!("guess-{n}");
        let answer = redeem(&app, &token, &format!("GUESS-{n}"), Some(&key)).await;
        assert_eq!(code(&answer), (404, Some("promo_code_invalid")));
    }
    let limited = redeem(&app, &token, "GUESS-X", Some("x")).await;
    assert_eq!(code(&limited), (429, Some("rate_limited")), "{}", limited.1);
    assert_eq!(app.balance_hundredths(&token).await, 0);
}

#[tokio::test]
async fn many_redemptions_at_once_stop_at_the_codes_limits() {
    let (app, admin) = spawn_app_with_admin(|s| {
        let generous = application::sign_up::SignUpRate {
            per_hour: std::num::NonZeroU32::new(1000).expect("positive"),
            burst: std::num::NonZeroU32::new(100).expect("positive"),
        };
        s.sign_up.per_address = generous;
        s.sign_up.per_domain = generous;
    })
    .await;
    create(
        &app,
        &admin,
        &json!({"code": "FIRST5", "credits": "3", "maxRedemptions": 5}),
    )
    .await;
    let mut users = Vec::new();
    for n in 0..12 {
        users.push(app.user(&format!("u{n}@example.com")).await);
    }
    let app = std::sync::Arc::new(app);
    let tasks: Vec<_> = users
        .iter()
        .map(|(_, token)| {
            let (app, token) = (app.clone(), token.clone());
            tokio::spawn(async move { redeem(&app, &token, "first5", None).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        let (status, body) = task.await.expect("task");
        outcomes.push((status, body["code"].as_str().map(str::to_owned)));
    }
    let redeemed = outcomes.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(redeemed, 5, "{outcomes:?}");
    for (status, problem) in outcomes.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(
            (*status, problem.as_deref()),
            (409, Some("promo_code_exhausted"))
        );
    }
    let mut total = 0;
    for (_, token) in &users {
        total += app.balance_hundredths(token).await;
    }
    assert_eq!(total, 5 * 300);

    // One user, three redemptions allowed, eight requests with their own keys at once.
    create(
        &app,
        &admin,
        &json!({"code": "THRICE", "credits": "1", "perUser": 3}),
    )
    .await;
    let (_, token) = app.user("many@example.com").await;
    let tasks: Vec<_> = (0..8)
        .map(|n| {
            let (app, token) = (app.clone(), token.clone());
            tokio::spawn(
                async move { redeem(&app, &token, "THRICE", Some(&format!("k{n}"))).await },
            )
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        let answer = task.await.expect("task");
        statuses.push((answer.0, answer.1["code"].as_str().map(str::to_owned)));
    }
    let ok = statuses.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(ok, 3, "{statuses:?}");
    assert!(
        statuses
            .iter()
            .filter(|(s, _)| *s != 200)
            .all(|(s, c)| *s == 409 && c.as_deref() == Some("promo_code_already_redeemed")),
        "{statuses:?}"
    );
    assert_eq!(app.balance_hundredths(&token).await, 300);
}

#[tokio::test]
async fn codes_for_new_users_or_plan_holders_refuse_everyone_else() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    create(
        &app,
        &admin,
        &json!({"code": "WELCOME", "credits": "5", "newUsersOnly": true}),
    )
    .await;
    create(
        &app,
        &admin,
        &json!({"code": "PROONLY", "credits": "5", "planId": "pro_monthly", "category": "bonus"}),
    )
    .await;
    let (_, token) = app.user("cy@example.com").await;
    let not_holder = redeem(&app, &token, "PROONLY", None).await;
    assert_eq!(code(&not_holder), (403, Some("promo_code_not_eligible")));

    let body = json!({"planId": "pro_monthly", "provider": "card_gateway"});
    let (status, started) = app.post(&token, "/api/payment/initiate", &body, None).await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().expect("order").to_owned();
    let opened = app.client.get(tests::checkout_url(&started)).send().await;
    assert!(opened.is_ok());
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;

    let holder = redeem(&app, &token, "PROONLY", None).await;
    assert_eq!(holder.0, 200, "{}", holder.1);
    assert_eq!(holder.1["category"], "bonus");
    let paid_before = redeem(&app, &token, "WELCOME", None).await;
    assert_eq!(code(&paid_before), (403, Some("promo_code_not_eligible")));
    let (_, fresh) = app.user("dee@example.com").await;
    let new_user = redeem(&app, &fresh, "welcome", None).await;
    assert_eq!(new_user.0, 200, "{}", new_user.1);
}
