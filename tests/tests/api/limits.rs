//! Spend limits through HTTP: an owner sets a limit on their account, a spend that would pass it
//! is `402 limit_reached` naming the limit, what is left and when it resets, holds count while
//! held, `GET /api/limits` shows the usage, and only owners and admins change limits.

use serde_json::{Value, json};
use tests::spawn_app_with_admin;

const LIMITS: &str = "/api/limits";
const CONSUME: &str = "/api/credits/consume";

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["code"].as_str())
}

#[tokio::test]
async fn a_limit_refuses_the_spend_past_it_and_shows_its_usage() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, token) = app.user("ada@example.com").await;
    let grant = json!({"amount": "100", "reason": "test"});
    let fund = format!("/api/admin/accounts/{ada}/credits");
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);

    // Malformed limits are 422 naming the field.
    for (body, field) in [
        (json!({"credits": "12", "window": "fortnight"}), "window"),
        (
            json!({"credits": "12", "window": "rolling"}),
            "rollingHours",
        ),
        (
            json!({"credits": "12", "window": "day", "rollingHours": 5}),
            "rollingHours",
        ),
        (json!({"credits": "0", "window": "day"}), "credits"),
        (json!({"credits": "1.001", "window": "day"}), "credits"),
        (
            json!({"credits": "12", "window": "day", "enforcement": "maybe"}),
            "enforcement",
        ),
    ] {
        let answer = app.post(&token, LIMITS, &body, None).await;
        assert_eq!(code(&answer), (422, Some("validation_failed")), "{body}");
        assert_eq!(answer.1["errors"][0]["field"], field, "{}", answer.1);
    }

    let body = json!({"credits": "12", "window": "day"});
    let (status, limit) = app.post(&token, LIMITS, &body, None).await;
    assert_eq!(status, 201, "{limit}");
    assert_eq!(limit["enforcement"], "hard");
    assert_eq!(limit["usedHundredths"], 0);
    assert!(
        limit["resetsAt"]
            .as_str()
            .unwrap()
            .ends_with("T00:00:00.000Z"),
        "{limit}"
    );
    let id = limit["id"].as_str().expect("id").to_owned();

    let image = json!({"userId": ada, "feature": "image"});
    let backend = app.api_key(&admin, &["credits:consume"]).await;
    for key in ["s1", "s2"] {
        let (status, spent) = app.post(&backend, CONSUME, &image, Some(key)).await;
        assert_eq!(status, 201, "{spent}");
    }
    let refused = app.post(&backend, CONSUME, &image, Some("s3")).await;
    assert_eq!(
        code(&refused),
        (402, Some("limit_reached")),
        "{}",
        refused.1
    );
    let named = &refused.1["limit"];
    assert_eq!(named["scope"], "account");
    assert_eq!(named["id"], id.as_str());
    assert_eq!(named["window"], "day");
    assert_eq!(named["leftHundredths"], 200);
    assert_eq!(named["resetsAt"], limit["resetsAt"]);
    // A retry of an earlier spend replays; a hold past the limit is refused too.
    assert_eq!(app.post(&backend, CONSUME, &image, Some("s1")).await.0, 201);
    let hold = app
        .post(&backend, "/api/credits/reservations", &image, Some("r1"))
        .await;
    assert_eq!(code(&hold), (402, Some("limit_reached")), "{}", hold.1);
    assert_eq!(app.balance_hundredths(&token).await, 9_000);

    let (status, listed) = app.get(&token, LIMITS).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["items"][0]["usedHundredths"], 1_000);
    assert_eq!(listed["items"][0]["left"], "2.00");

    // Removed, it refuses nothing; removed twice, it is not found.
    let path = format!("{LIMITS}/{id}");
    assert_eq!(app.delete(&token, &path).await.0, 204);
    assert_eq!(
        code(&app.delete(&token, &path).await),
        (404, Some("limit_not_found"))
    );
    assert_eq!(app.post(&backend, CONSUME, &image, Some("s3")).await.0, 201);
    let (_, listed) = app.get(&token, LIMITS).await;
    assert_eq!(listed["items"], json!([]));
}

#[tokio::test]
async fn owners_and_admins_change_a_team_s_limits_and_its_members_read_them() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (_, ada_token) = app.user("ada@example.com").await;
    let (bob, bob_token) = app.user("bob@example.com").await;
    let (status, team) = app
        .post(&ada_token, "/api/accounts", &json!({"name": "Acme"}), None)
        .await;
    assert_eq!(status, 201, "{team}");
    let team = team["id"].as_str().expect("id").to_owned();
    let members = format!("/api/accounts/{team}/members");
    let added = app
        .post(&ada_token, &members, &json!({"memberId": bob}), None)
        .await;
    assert_eq!(added.0, 201, "{}", added.1);

    let on_team = format!("{LIMITS}?accountId={team}");
    let rolling =
        json!({"credits": "50", "window": "rolling", "rollingHours": 5, "feature": "image"});
    let answer = app.post(&bob_token, &on_team, &rolling, None).await;
    assert_eq!(code(&answer), (403, Some("not_billing_manager")));
    let (status, limit) = app.post(&ada_token, &on_team, &rolling, None).await;
    assert_eq!(status, 201, "{limit}");
    assert_eq!(
        (&limit["window"], &limit["rollingHours"], &limit["feature"]),
        (&json!("rolling"), &json!(5), &json!("image"))
    );
    let (status, listed) = app.get(&bob_token, &on_team).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["items"][0]["accountId"], team.as_str());
    let path = format!(
        "{LIMITS}/{}?accountId={team}",
        limit["id"].as_str().unwrap()
    );
    assert_eq!(
        code(&app.delete(&bob_token, &path).await),
        (403, Some("not_billing_manager"))
    );

    // An API key reads with credits:read for a member; it changes with billing:write only.
    let reader = app.api_key(&admin, &["credits:read"]).await;
    let (status, _) = app.get(&reader, &format!("{on_team}&userId={bob}")).await;
    assert_eq!(status, 200);
    let answer = app
        .post(&reader, &format!("{on_team}&userId={bob}"), &rolling, None)
        .await;
    assert_eq!(answer.0, 403, "{}", answer.1);
    // Someone outside the team reads nothing of it.
    let (_, eve_token) = app.user("eve@example.com").await;
    assert_eq!(app.get(&eve_token, &on_team).await.0, 404);

    // An account carries at most 20 limits.
    let daily = json!({"credits": "1", "window": "hour"});
    for _ in 1..20 {
        assert_eq!(app.post(&ada_token, &on_team, &daily, None).await.0, 201);
    }
    let answer = app.post(&ada_token, &on_team, &daily, None).await;
    assert_eq!(code(&answer), (422, Some("too_many_limits")));
}

/// A limit on an API key bound to an account counts that key's spends alone, and refuses the
/// key's spend past it as `limit_reached` with `scope: key`; a key of another account, or an
/// app-wide one, cannot carry one.
#[tokio::test]
async fn a_key_limit_caps_the_spends_made_with_that_key() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, token) = app.user("ada@example.com").await;
    let (bob, _) = app.user("bob@example.com").await;
    let grant = json!({"amount": "100", "reason": "test"});
    let fund = format!("/api/admin/accounts/{ada}/credits");
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);
    let key_for = |account: &str, name: &str| json!({"name": name, "scopes": ["credits:consume"], "accountId": account});
    let mut keys = Vec::new();
    for (account, name) in [(&ada, "agent"), (&ada, "app"), (&bob, "bob's")] {
        let (status, key) = app
            .post(&admin, "/api/admin/api-keys", &key_for(account, name), None)
            .await;
        assert_eq!(status, 201, "{key}");
        keys.push((
            key["id"].as_str().unwrap().to_owned(),
            key["secret"].as_str().unwrap().to_owned(),
        ));
    }
    let app_wide = app.api_key(&admin, &["credits:consume"]).await;
    let (agent_id, agent) = &keys[0];
    let (_, other) = &keys[1];
    let (bob_key, _) = &keys[2];

    // Bob's key is not one of Ada's: refused, naming the field.
    let body = json!({"credits": "5", "window": "day", "apiKeyId": bob_key});
    let answer = app.post(&token, LIMITS, &body, None).await;
    assert_eq!(
        code(&answer),
        (422, Some("validation_failed")),
        "{}",
        answer.1
    );
    assert_eq!(answer.1["errors"][0]["field"], "apiKeyId");

    let body = json!({"credits": "5", "window": "day", "apiKeyId": agent_id});
    let (status, limit) = app.post(&token, LIMITS, &body, None).await;
    assert_eq!(status, 201, "{limit}");
    assert_eq!(limit["apiKeyId"], agent_id.as_str());

    // `image` costs 5: the agent's key spends it once; the other keys are not capped by it.
    let image = json!({"userId": ada, "feature": "image"});
    assert_eq!(app.post(agent, CONSUME, &image, Some("a1")).await.0, 201);
    let refused = app.post(agent, CONSUME, &image, Some("a2")).await;
    assert_eq!(
        code(&refused),
        (402, Some("limit_reached")),
        "{}",
        refused.1
    );
    let named = &refused.1["limit"];
    assert_eq!(named["scope"], "key", "{named}");
    assert_eq!(named["apiKeyId"], agent_id.as_str());
    assert_eq!(named["id"], limit["id"]);
    assert_eq!(named["leftHundredths"], 0);
    assert_eq!(app.post(other, CONSUME, &image, Some("o1")).await.0, 201);
    assert_eq!(
        app.post(&app_wide, CONSUME, &image, Some("w1")).await.0,
        201
    );

    // The list shows the key's limit with what the key spent.
    let (status, list) = app.get(&token, LIMITS).await;
    assert_eq!(status, 200, "{list}");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["apiKeyId"], agent_id.as_str());
    assert_eq!(items[0]["usedHundredths"], 500);
    assert_eq!(app.balance_hundredths(&token).await, 8_500);

    // The operator's list of keys shows the limit on the key, and on it alone.
    let (status, listed) = app.get(&admin, "/api/admin/api-keys").await;
    assert_eq!(status, 200, "{listed}");
    let keys = listed["keys"].as_array().unwrap();
    let limits_of = |id: &str| {
        let key = keys.iter().find(|k| k["id"] == id).expect("the key");
        key["limits"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(limits_of(agent_id), 1, "{listed}");
    assert_eq!(limits_of(keys[1]["id"].as_str().unwrap()), 0);
    let agent_limits = &keys.iter().find(|k| k["id"] == agent_id.as_str()).unwrap()["limits"];
    assert_eq!(agent_limits[0]["usedHundredths"], 500, "{listed}");
}

/// An operator reads, adds and removes any account's limits, each change in the audit log; the
/// account's owner sees the operator's limit and is bound by it; others are refused.
#[tokio::test]
async fn an_operator_sets_a_customer_s_limits_audited() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, token) = app.user("ada@example.com").await;
    let grant = json!({"amount": "100", "reason": "test"});
    let fund = format!("/api/admin/accounts/{ada}/credits");
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);
    let path = format!("/api/admin/accounts/{ada}/limits");
    let body = json!({"credits": "5", "window": "month"});

    assert_eq!(
        code(&app.post(&token, &path, &body, None).await),
        (403, Some("forbidden"))
    );
    assert_eq!(
        code(&app.get(&token, &path).await),
        (403, Some("forbidden"))
    );
    let nobody = "/api/admin/accounts/team_nobody/limits";
    assert_eq!(
        code(&app.post(&admin, nobody, &body, None).await),
        (404, Some("account_not_found"))
    );

    let (status, limit) = app.post(&admin, &path, &body, None).await;
    assert_eq!(status, 201, "{limit}");
    let id = limit["id"].as_str().unwrap().to_owned();
    let (_, mine) = app.get(&token, LIMITS).await;
    assert_eq!(mine["items"][0]["id"], id.as_str(), "{mine}");
    let backend = app.api_key(&admin, &["credits:consume"]).await;
    let image = json!({"userId": ada, "feature": "image"});
    assert_eq!(app.post(&backend, CONSUME, &image, Some("s1")).await.0, 201);
    let refused = app.post(&backend, CONSUME, &image, Some("s2")).await;
    assert_eq!(code(&refused), (402, Some("limit_reached")));
    let (status, listed) = app.get(&admin, &path).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["items"][0]["usedHundredths"], 500);

    let one = format!("{path}/{id}");
    assert_eq!(app.delete(&admin, &one).await.0, 204);
    assert_eq!(
        code(&app.delete(&admin, &one).await),
        (404, Some("limit_not_found"))
    );
    let (_, audit) = app.get(&admin, "/api/admin/audit").await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("limit."))
        .collect();
    assert_eq!(actions, ["limit.removed", "limit.added"], "{audit}");
}

/// Each window kind across its reset, on the application's clock moved forward (a test-only
/// seam: no request moves it): the spend refused at the limit goes through once the window
/// has passed; a rolling window of 5 hours still holds a spend 4 hours later.
#[tokio::test]
async fn each_window_kind_resets_on_the_moved_clock() {
    const HOUR: i64 = 3_600_000;
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let backend = app
        .api_key(&admin, &["credits:consume", "billing:write"])
        .await;
    let windows = [
        ("hour", None, HOUR),
        ("day", None, 24 * HOUR),
        ("week", None, 7 * 24 * HOUR),
        ("month", None, 31 * 24 * HOUR),
        ("rolling", Some(5), 5 * HOUR),
    ];
    let mut users = Vec::new();
    for (window, _, _) in &windows {
        let (id, _) = app.user(&format!("{window}@example.com")).await;
        let grant = json!({"amount": "100", "reason": "test"});
        let fund = format!("/api/admin/accounts/{id}/credits");
        assert_eq!(app.post(&admin, &fund, &grant, Some(&id)).await.0, 200);
        users.push(id);
    }
    for ((window, hours, length), user) in windows.iter().zip(&users) {
        let body = json!({"credits": "5", "window": window, "rollingHours": hours});
        let (status, limit) = app
            .post(&backend, &format!("{LIMITS}?userId={user}"), &body, None)
            .await;
        assert_eq!(status, 201, "{window}: {limit}");
        let image = json!({"userId": user, "feature": "image"});
        let spend = |n: u32| format!("{window}-{n}");
        assert_eq!(
            app.post(&backend, CONSUME, &image, Some(&spend(1))).await.0,
            201
        );
        let refused = app.post(&backend, CONSUME, &image, Some(&spend(2))).await;
        assert_eq!(code(&refused), (402, Some("limit_reached")), "{window}");
        if *window == "rolling" {
            app.advance_clock(length - HOUR);
            let still = app.post(&backend, CONSUME, &image, Some(&spend(3))).await;
            assert_eq!(code(&still), (402, Some("limit_reached")), "4 hours on");
            app.advance_clock(HOUR);
        } else {
            app.advance_clock(*length);
        }
        let (status, spent) = app.post(&backend, CONSUME, &image, Some(&spend(4))).await;
        assert_eq!(status, 201, "{window} after its reset: {spent}");
    }
}

/// A limit on a model counts the spends naming that model alone, whoever makes them; one on a
/// member of a team counts that member's spends alone, whatever the model. A refusal names the
/// limit's model or member.
#[tokio::test]
async fn model_and_member_limits_count_their_own_spends() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, ada_token) = app.user("ada@example.com").await;
    let (bob, _) = app.user("bob@example.com").await;
    let (eve, _) = app.user("eve@example.com").await;
    let (_, team) = app
        .post(&ada_token, "/api/accounts", &json!({"name": "Acme"}), None)
        .await;
    let team = team["id"].as_str().expect("id").to_owned();
    let members = format!("/api/accounts/{team}/members");
    let added = app
        .post(&ada_token, &members, &json!({"memberId": bob}), None)
        .await;
    assert_eq!(added.0, 201, "{}", added.1);
    let grant = json!({"amount": "100", "reason": "pool"});
    let fund = format!("/api/admin/accounts/{team}/credits");
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);

    let on_team = format!("{LIMITS}?accountId={team}");
    let not_member = json!({"credits": "3", "window": "day", "memberId": eve});
    let answer = app.post(&ada_token, &on_team, &not_member, None).await;
    assert_eq!(code(&answer), (422, Some("validation_failed")));
    assert_eq!(answer.1["errors"][0]["field"], "memberId", "{}", answer.1);
    let on_bob = json!({"credits": "3", "window": "day", "memberId": bob});
    let (status, bobs) = app.post(&ada_token, &on_team, &on_bob, None).await;
    assert_eq!(status, 201, "{bobs}");
    assert_eq!(bobs["memberId"], bob.as_str());
    let on_model = json!({"credits": "2", "window": "day", "model": "gpt-4o"});
    let (status, model) = app.post(&ada_token, &on_team, &on_model, None).await;
    assert_eq!(status, 201, "{model}");
    assert_eq!(model["model"], "gpt-4o");

    // A chat of 1,000 tokens costs 1 credit on gpt-4o and 1.25 on claude-sonnet-4.
    let backend = app.api_key(&admin, &["credits:consume"]).await;
    let chat = |who: &str, model: &str, key: &str| {
        let body = json!({"userId": who, "accountId": team, "model": model, "tokens": 1000});
        let (app, backend, key) = (&app, &backend, key.to_owned());
        async move { app.post(backend, CONSUME, &body, Some(&key)).await }
    };
    assert_eq!(chat(&bob, "gpt-4o", "c1").await.0, 201);
    assert_eq!(chat(&bob, "gpt-4o", "c2").await.0, 201);
    let refused = chat(&ada, "gpt-4o", "c3").await;
    assert_eq!(
        code(&refused),
        (402, Some("limit_reached")),
        "{}",
        refused.1
    );
    let named = &refused.1["limit"];
    assert_eq!(
        (&named["scope"], &named["id"], &named["model"]),
        (&json!("account"), &model["id"], &json!("gpt-4o"))
    );
    let refused = chat(&bob, "claude-sonnet-4", "c4").await;
    assert_eq!(
        code(&refused),
        (402, Some("limit_reached")),
        "{}",
        refused.1
    );
    let named = &refused.1["limit"];
    assert_eq!(
        (&named["scope"], &named["id"], &named["memberId"]),
        (&json!("member"), &bobs["id"], &json!(bob))
    );
    assert_eq!(named["leftHundredths"], 100);
    // Ada's other models are not limited.
    assert_eq!(chat(&ada, "claude-sonnet-4", "c5").await.0, 201);

    let (_, listed) = app.get(&ada_token, &on_team).await;
    let used: Vec<_> = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|l| l["usedHundredths"].clone())
        .collect();
    assert_eq!(used, [json!(200), json!(200)], "{listed}");
}
