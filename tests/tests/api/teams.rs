//! Teams through HTTP: a user creates a team, adds a member with a daily limit, the pool is
//! funded, the member spends from it through the app's API key until the limit refuses, an
//! outsider is refused, and the last owner stays.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

async fn send(
    app: &TestApp,
    token: &str,
    (method, path): (&str, &str),
    body: Option<&Value>,
) -> (u16, Value) {
    let url = app.url(path);
    let request = match method {
        "PATCH" => app.client.patch(url),
        "DELETE" => app.client.delete(url),
        _ => app.client.post(url),
    };
    let request = match body {
        Some(body) => request.json(body),
        None => request,
    };
    let response = request.bearer_auth(token).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_member_spends_the_team_pool_within_their_limit() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, ada_token) = app.user("ada@example.com").await;
    let (bob, bob_token) = app.user("bob@example.com").await;
    let (eve, _) = app.user("eve@example.com").await;
    let backend = app
        .api_key(&admin, &["credits:consume", "credits:read"])
        .await;

    // Ada creates a team; she is its owner and it is empty.
    let (status, team) = app
        .post(
            &ada_token,
            "/api/accounts",
            &json!({"name": "  Acme  "}),
            None,
        )
        .await;
    assert_eq!(status, 201, "{team}");
    assert_eq!(team["name"], "Acme");
    assert_eq!(team["role"], "owner");
    assert_eq!(team["balanceHundredths"], 0);
    let team_id = team["id"].as_str().expect("id").to_owned();
    assert!(team_id.starts_with("team_"), "{team_id}");
    let members = format!("/api/accounts/{team_id}/members");

    // Bob joins with 10 credits a day; a member cannot add anyone.
    let add = json!({"memberId": bob, "limit": {"credits": "10", "window": "day"}});
    let (status, added) = app.post(&ada_token, &members, &add, None).await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["role"], "member");
    assert_eq!(added["limit"]["creditsHundredths"], 1000);
    assert_eq!(added["limit"]["usedHundredths"], 0);
    let (status, refused) = app
        .post(&bob_token, &members, &json!({"memberId": eve}), None)
        .await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("forbidden")));

    // The pool is funded by an administrator.
    let grant = json!({"amount": "100", "reason": "team pool"});
    let path = format!("/api/admin/accounts/{team_id}/credits");
    let (status, funded) = app.post(&admin, &path, &grant, Some("fund-1")).await;
    assert_eq!(status, 200, "{funded}");

    // Bob spends from the pool through the app's key: "image" costs 5 credits.
    let spend = |key: &str, who: &str| {
        let body = json!({"userId": who, "accountId": team_id, "feature": "image"});
        let key = key.to_owned();
        let (app, backend) = (&app, &backend);
        async move {
            app.post(backend, "/api/credits/consume", &body, Some(&key))
                .await
        }
    };
    let (status, first) = spend("s1", &bob).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["accountId"], team_id.as_str());
    assert_eq!(first["userId"], bob.as_str());
    assert_eq!(first["balanceAfterHundredths"], 9_500);
    let (status, _) = spend("s2", &bob).await;
    assert_eq!(status, 201);
    let (status, limited) = spend("s3", &bob).await;
    assert_eq!(status, 402, "{limited}");
    assert_eq!(limited["code"], "limit_reached");
    assert_eq!(limited["limit"]["leftHundredths"], 0);
    assert_eq!(limited["limit"]["window"], "day");
    // Eve is no member; Bob's own account is untouched.
    let (status, outsider) = spend("s4", &eve).await;
    assert_eq!(
        (status, outsider["code"].as_str()),
        (403, Some("not_a_member"))
    );
    assert_eq!(app.balance_hundredths(&bob_token).await, 0);

    // The team's balance and history, for its members only.
    let (status, balance) = app
        .get(
            &bob_token,
            &format!("/api/credits/balance?accountId={team_id}"),
        )
        .await;
    assert_eq!(status, 200, "{balance}");
    assert_eq!(balance["balanceHundredths"], 9_000);
    let (status, history) = app
        .get(
            &ada_token,
            &format!("/api/credits/transactions?accountId={team_id}"),
        )
        .await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(history["items"][0]["memberId"], bob.as_str());
    let (status, hidden) = app
        .get(
            &app.register("mallory@example.com").await,
            &format!("/api/credits/balance?accountId={team_id}"),
        )
        .await;
    assert_eq!(
        (status, hidden["code"].as_str()),
        (404, Some("account_not_found"))
    );

    // Listing: Bob sees the team with his role and usage.
    let (status, list) = app.get(&bob_token, "/api/accounts").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["items"][0]["kind"], "personal");
    assert_eq!(list["items"][1]["id"], team_id.as_str());
    assert_eq!(list["items"][1]["role"], "member");
    let (status, roster) = app.get(&bob_token, &members).await;
    assert_eq!(status, 200, "{roster}");
    assert_eq!(roster["items"][1]["limit"]["usedHundredths"], 1000);

    // Ada lifts Bob's limit; the last owner cannot leave; Bob leaves.
    let bob_path = format!("{members}/{bob}");
    let (status, lifted) = send(
        &app,
        &ada_token,
        ("PATCH", &bob_path),
        Some(&json!({"limit": null})),
    )
    .await;
    assert_eq!(status, 200, "{lifted}");
    assert!(lifted.get("limit").is_none(), "{lifted}");
    let (status, _) = spend("s5", &bob).await;
    assert_eq!(status, 201);
    let ada_path = format!("{members}/{ada}");
    let (status, stays) = send(&app, &ada_token, ("DELETE", &ada_path), None).await;
    assert_eq!((status, stays["code"].as_str()), (409, Some("last_owner")));
    let (status, _) = send(&app, &bob_token, ("DELETE", &bob_path), None).await;
    assert_eq!(status, 204);
    let (status, gone) = spend("s6", &bob).await;
    assert_eq!((status, gone["code"].as_str()), (403, Some("not_a_member")));

    // A bad limit and a bad name are 422s naming the field.
    let bad = json!({"memberId": eve, "limit": {"credits": "-1", "window": "day"}});
    let (status, invalid) = app.post(&ada_token, &members, &bad, None).await;
    assert_eq!(status, 422, "{invalid}");
    let (status, invalid) = app
        .post(&ada_token, "/api/accounts", &json!({"name": "   "}), None)
        .await;
    assert_eq!(status, 422, "{invalid}");
}

/// Poll `path` as `token` until `pick` of the answer is `want` (at most 10 s).
async fn eventually(app: &TestApp, token: &str, path: &str, pick: &str, want: &Value) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        let (_, answer) = app.get(token, path).await;
        if answer.pointer(pick) == Some(want) {
            return answer;
        }
        last = answer;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{path}: {pick} never became {want}: {last}");
}

#[tokio::test]
async fn an_owner_buys_team_yearly_for_the_team_and_its_members_hold_it() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (_, ada_token) = app.user("ada@example.com").await;
    let (bob, bob_token) = app.user("bob@example.com").await;
    let (_, eve_token) = app.user("eve@example.com").await;
    let (_, team) = app
        .post(&ada_token, "/api/accounts", &json!({"name": "Acme"}), None)
        .await;
    let team_id = team["id"].as_str().expect("id").to_owned();
    let members = format!("/api/accounts/{team_id}/members");
    let (status, _) = app
        .post(&ada_token, &members, &json!({"memberId": bob}), None)
        .await;
    assert_eq!(status, 201);

    // A plain member and an outsider cannot buy for the team.
    let body = json!({"planId": "team_yearly", "provider": "mor_b", "accountId": team_id});
    let initiate = "/api/payment/initiate";
    let (status, refused) = app.post(&bob_token, initiate, &body, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("not_billing_manager"))
    );
    let (status, refused) = app.post(&eve_token, initiate, &body, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (404, Some("account_not_found"))
    );

    // The owner buys it; the year's credits go to the team's pool.
    let (status, started) = app.post(&ada_token, initiate, &body, Some("team-1")).await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().expect("order id").to_owned();
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&ada_token, &order, "paid").await;
    let balance = format!("/api/credits/balance?accountId={team_id}");
    eventually(
        &app,
        &bob_token,
        &balance,
        "/balanceHundredths",
        &json!(6_000_000),
    )
    .await;
    let (_, own) = app.get(&ada_token, "/api/credits/balance").await;
    assert_eq!(own["balanceHundredths"], 0, "{own}");
    // The host is told the team's entitlements changed: about the team, no user.
    let (status, events) = app
        .get(&admin, "/api/events?type=entitlements.changed")
        .await;
    assert_eq!(status, 200, "{events}");
    let told = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|e| e["data"]["accountId"] == team_id.as_str())
        .unwrap_or_else(|| panic!("the team's entitlements: {events}"))
        .clone();
    assert_eq!(told["data"]["userId"], Value::Null, "{told}");
    assert_eq!(told["data"]["entitlements"]["seats"], 10, "{told}");

    // Every member holds the team's entitlements in the team, not in their own account.
    let path = format!("/api/entitlements?accountId={team_id}");
    let (status, held) = app.get(&bob_token, &path).await;
    assert_eq!(status, 200, "{held}");
    assert_eq!(held["accountId"], team_id.as_str());
    assert_eq!(held["entitlements"]["seats"], 10, "{held}");
    let (_, own) = app.get(&bob_token, "/api/entitlements").await;
    assert!(own["entitlements"].get("seats").is_none(), "{own}");
    let (_, outsider) = app.get(&eve_token, &path).await;
    assert_eq!(outsider["code"], "account_not_found");

    // The subscription is listed by the team; a member cannot cancel it, the owner can.
    let path = format!("/api/subscriptions?accountId={team_id}");
    let (_, listed) = app.get(&bob_token, &path).await;
    let subscription = listed["items"][0]["id"]
        .as_str()
        .expect("listed")
        .to_owned();
    let (_, own) = app.get(&ada_token, "/api/subscriptions").await;
    assert_eq!(own["items"].as_array().map(Vec::len), Some(0), "{own}");
    let cancel = format!("/api/subscriptions/{subscription}/cancel");
    let (status, refused) = app.post(&bob_token, &cancel, &json!({}), None).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("not_owner")));
    let (status, cancelled) = app.post(&ada_token, &cancel, &json!({}), None).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["cancelAtPeriodEnd"], true, "{cancelled}");
}

#[tokio::test]
async fn an_invitation_is_accepted_once_by_the_address_invited() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (_, ada_token) = app.user("ada@example.com").await;
    let (bob, bob_token) = app.user("bob@example.com").await;
    let (_, eve_token) = app.user("eve@example.com").await;
    let (_, team) = app
        .post(&ada_token, "/api/accounts", &json!({"name": "Acme"}), None)
        .await;
    let team_id = team["id"].as_str().expect("id").to_owned();
    let invitations = format!("/api/accounts/{team_id}/invitations");

    // Ada invites Bob's address as an admin with 10 credits a day; the token is shown once.
    let invite = json!({"email": "  Bob@Example.com ", "role": "admin",
        "limit": {"credits": "10", "window": "day"}});
    let (status, created) = app.post(&ada_token, &invitations, &invite, None).await;
    assert_eq!(status, 201, "{created}");
    let token = created["token"].as_str().expect("token").to_owned();
    assert!(token.starts_with("tinv_"), "{token}");
    assert_eq!(created["invitation"]["email"], "bob@example.com");
    assert_eq!(created["invitation"]["limit"]["creditsHundredths"], 1000);
    let (status, open) = app.get(&ada_token, &invitations).await;
    assert_eq!(status, 200, "{open}");
    assert_eq!(open["items"].as_array().map(Vec::len), Some(1));
    assert!(open["items"][0].get("token").is_none(), "{open}");
    // A member who is not in the team, and a bad address, are refused.
    let (status, refused) = app.post(&eve_token, &invitations, &invite, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (404, Some("account_not_found"))
    );
    let (status, refused) = app
        .post(
            &ada_token,
            &invitations,
            &json!({"email": "not an address"}),
            None,
        )
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("validation_failed"))
    );

    // Only Bob's own sign-in accepts it, once.
    let accept = json!({"token": token});
    let path = "/api/invitations/accept";
    let (status, refused) = app.post(&eve_token, path, &accept, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("invitation_email_mismatch")),
        "{refused}"
    );
    let key = app.api_key(&admin, &["billing:write"]).await;
    let (status, _) = app.post(&key, path, &accept, None).await;
    assert_eq!(status, 401, "an API key accepts nothing");
    let (status, joined) = app.post(&bob_token, path, &accept, None).await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["memberId"], bob.as_str());
    assert_eq!(joined["role"], "admin");
    assert_eq!(joined["limit"]["creditsHundredths"], 1000);
    let (status, again) = app.post(&bob_token, path, &accept, None).await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("invitation_used"))
    );
    let (status, open) = app.get(&bob_token, &invitations).await;
    assert_eq!(
        (status, open["items"].as_array().map(Vec::len)),
        (200, Some(0))
    );

    // Revoked by an admin (Bob now), the next invitation accepts nothing; an unknown token is
    // not found.
    let (_, second) = app
        .post(
            &ada_token,
            &invitations,
            &json!({"email": "eve@example.com"}),
            None,
        )
        .await;
    let id = second["invitation"]["id"].as_str().expect("id");
    let (status, _) = send(
        &app,
        &bob_token,
        ("DELETE", &format!("{invitations}/{id}")),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let revoked = json!({"token": second["token"]});
    let (status, refused) = app.post(&eve_token, path, &revoked, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("invitation_revoked"))
    );
    let unknown = json!({"token": "tinv_nothing"});
    let (status, refused) = app.post(&eve_token, path, &unknown, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (404, Some("invitation_not_found"))
    );

    // The join is told, by the inviter.
    let (status, events) = app
        .get(&admin, "/api/events?type=account.member_added")
        .await;
    assert_eq!(status, 200, "{events}");
    let joined = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .find(|e| e["data"]["userId"] == bob.as_str())
        .expect("bob's join")
        .clone();
    assert_eq!(joined["data"]["accountId"], team_id.as_str());
    assert_eq!(joined["data"]["role"], "admin");
}
