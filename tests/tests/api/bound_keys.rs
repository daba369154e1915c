//! Reach through HTTP: an API key bound to one account reads and charges that account alone, for
//! its members, and makes no app-wide call; a customer-portal session buys and cancels for the
//! one account it was opened for (the user's own, or a team whose billing they manage), through
//! the API as through the pages.

use serde_json::{Value, json};
use tests::{TestApp, spawn_app_with_admin};

const INITIATE: &str = "/api/payment/initiate";

async fn team(app: &TestApp, owner: &str, name: &str) -> String {
    let (status, team) = app
        .post(owner, "/api/accounts", &json!({"name": name}), None)
        .await;
    assert_eq!(status, 201, "{team}");
    team["id"].as_str().expect("id").to_owned()
}

/// The owner (`token`) buys Team Yearly for `team` and it is paid: the subscription's id.
async fn paid_team_yearly(app: &TestApp, token: &str, team: &str) -> String {
    let body = json!({"planId": "team_yearly", "provider": "mor_b", "accountId": team});
    let (status, started) = app.post(token, INITIATE, &body, None).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(started["accountId"], team, "{started}");
    let order = started["orderId"].as_str().expect("order id").to_owned();
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    subscription_of(app, token, team).await
}

async fn subscription_of(app: &TestApp, token: &str, team: &str) -> String {
    for _ in 0..100 {
        let (_, listed) = app
            .get(token, &format!("/api/subscriptions?accountId={team}"))
            .await;
        if let Some(id) = listed["items"][0]["id"].as_str() {
            return id.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{team} never held a subscription");
}

/// The portal link `body` (a user, perhaps a team) asks `billing` for, opened: its session.
async fn portal_session(app: &TestApp, billing: &str, body: &Value) -> String {
    let mut body = body.clone();
    body["returnUrl"] = json!("http://localhost:3000/account");
    let (status, link) = app.post(billing, "/api/portal-sessions", &body, None).await;
    assert_eq!(status, 201, "{link}");
    let opened = app
        .client
        .get(link["url"].as_str().expect("url"))
        .send()
        .await
        .expect("open");
    opened
        .headers()
        .get("set-cookie")
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .and_then(|pair| pair.strip_prefix("tally_session="))
        .expect("a session")
        .to_owned()
}

async fn page(app: &TestApp, session: &str, path: &str) -> (u16, String) {
    let answer = app
        .client
        .get(app.url(path))
        .header("cookie", format!("tally_session={session}"))
        .send()
        .await
        .expect("page");
    (answer.status().as_u16(), answer.text().await.expect("text"))
}

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["code"].as_str())
}

#[tokio::test]
async fn a_key_bound_to_a_team_reads_and_charges_that_team_alone() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, ada_token) = app.user("ada@example.com").await;
    let (bob, _) = app.user("bob@example.com").await;
    let (eve, _) = app.user("eve@example.com").await;
    let acme = team(&app, &ada_token, "Acme").await;
    let beta = team(&app, &ada_token, "Beta").await;
    let members = format!("/api/accounts/{acme}/members");
    let (status, _) = app
        .post(&ada_token, &members, &json!({"memberId": bob}), None)
        .await;
    assert_eq!(status, 201);

    // Binding: an account that exists, and no app-wide scope.
    let keys = "/api/admin/api-keys";
    let bound = |scopes: &[&str], account: &str| json!({"name": "acme backend", "scopes": scopes, "accountId": account});
    for refused in [
        bound(&["credits:consume", "events:read"], &acme),
        bound(&["credits:consume"], "team_nope"),
        bound(&["credits:consume"], "usr_nobody"),
    ] {
        let answer = app.post(&admin, keys, &refused, None).await;
        assert_eq!(code(&answer), (422, Some("validation_failed")), "{refused}");
    }
    let scopes = ["credits:consume", "credits:read", "billing:write"];
    let (status, created) = app.post(&admin, keys, &bound(&scopes, &acme), None).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["accountId"], acme.as_str());
    let key = created["secret"].as_str().expect("secret").to_owned();
    let (_, listed) = app.get(&admin, keys).await;
    assert_eq!(listed["keys"][0]["accountId"], acme.as_str(), "{listed}");

    // The team's pool is funded; a spend naming no account charges the team.
    let grant = json!({"amount": "100", "reason": "pool"});
    let fund = format!("/api/admin/accounts/{acme}/credits");
    assert_eq!(app.post(&admin, &fund, &grant, Some("f1")).await.0, 200);
    let consume = "/api/credits/consume";
    let spend = |who: &str, account: Option<&str>| {
        let mut body = json!({"userId": who, "feature": "image"});
        if let Some(account) = account {
            body["accountId"] = json!(account);
        }
        body
    };
    let (status, spent) = app
        .post(&key, consume, &spend(&bob, None), Some("s1"))
        .await;
    assert_eq!(status, 201, "{spent}");
    assert_eq!(spent["accountId"], acme.as_str());
    assert_eq!(spent["balanceAfterHundredths"], 9_500);
    // Another account is out of the key's reach; a user outside the team is no member.
    for (who, account) in [(&bob, Some(bob.as_str())), (&ada, Some(beta.as_str()))] {
        let answer = app
            .post(&key, consume, &spend(who, account), Some("s2"))
            .await;
        assert_eq!(code(&answer), (403, Some("forbidden")), "{account:?}");
    }
    let answer = app
        .post(&key, consume, &spend(&eve, None), Some("s3"))
        .await;
    assert_eq!(code(&answer), (403, Some("not_a_member")));

    // Reads default to the team, and reach nothing else.
    let (status, balance) = app
        .get(&key, &format!("/api/credits/balance?userId={bob}"))
        .await;
    assert_eq!(
        (status, &balance["balanceHundredths"]),
        (200, &json!(9_500))
    );
    for path in [
        format!("/api/credits/balance?userId={bob}&accountId={bob}"),
        format!("/api/accounts?userId={ada}"),
        format!("/api/accounts/{beta}/members?userId={ada}"),
        format!("/api/subscriptions?userId={ada}&accountId={beta}"),
        "/api/events".to_owned(),
    ] {
        let answer = app.get(&key, &path).await;
        assert_eq!(answer.0, 403, "{path}: {}", answer.1);
    }
    let (status, _) = app
        .get(&key, &format!("/api/accounts/{acme}/members?userId={ada}"))
        .await;
    assert_eq!(status, 200);
    // Whether a user outside the team exists is not the key's to learn.
    for outsider in [eve.as_str(), "usr_nobody"] {
        let path = format!("/api/credits/balance?userId={outsider}");
        let answer = app.get(&key, &path).await;
        assert_eq!(code(&answer), (403, Some("forbidden")), "{outsider}");
    }
    // No app-wide call: no team made, no portal link.
    let new_team = format!("/api/accounts?userId={ada}");
    let answer = (app.post(&key, &new_team, &json!({"name": "Gamma"}), None)).await;
    assert_eq!(answer.0, 403, "{}", answer.1);
    let portal = json!({"userId": ada, "returnUrl": "http://localhost:3000/account"});
    let answer = app.post(&key, "/api/portal-sessions", &portal, None).await;
    assert_eq!(answer.0, 403, "{}", answer.1);

    // Buying names the team by default; the other team's subscription and order are out of
    // reach, the team's own is not.
    let buy = json!({"planId": "team_yearly", "provider": "mor_b"});
    let path = format!("{INITIATE}?userId={ada}");
    let (status, started) = app.post(&key, &path, &buy, Some("b1")).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(started["accountId"], acme.as_str());
    let beta_subscription = paid_team_yearly(&app, &ada_token, &beta).await;
    let cancel = format!("/api/subscriptions/{beta_subscription}/cancel?userId={ada}");
    let answer = app.post(&key, &cancel, &json!({}), None).await;
    assert_eq!(code(&answer), (403, Some("forbidden")), "{}", answer.1);
    let (_, orders) = app
        .get(&ada_token, &format!("/api/orders?accountId={beta}"))
        .await;
    let beta_order = orders["items"][0]["orderId"].as_str().expect("order");
    let query = format!("/api/payment/query/{beta_order}?userId={ada}");
    let answer = app.get(&key, &query).await;
    assert_eq!(
        code(&answer),
        (404, Some("order_not_found")),
        "as another's order"
    );
    let acme_order = started["orderId"].as_str().expect("order");
    let query = format!("/api/payment/query/{acme_order}?userId={ada}");
    assert_eq!(app.get(&key, &query).await.0, 200);

    // A key bound to Bob's own account acts for Bob alone.
    let (_, own) = app
        .post(
            &admin,
            keys,
            &bound(&["credits:consume", "credits:read"], &bob),
            None,
        )
        .await;
    let own = own["secret"].as_str().expect("secret").to_owned();
    let answer = app
        .post(&own, consume, &spend(&ada, None), Some("o1"))
        .await;
    assert_eq!(code(&answer), (403, Some("not_a_member")));
    let (status, _) = app
        .get(&own, &format!("/api/credits/balance?userId={ada}"))
        .await;
    assert_eq!(status, 403);
    let answer = app
        .post(&own, consume, &spend(&bob, None), Some("o2"))
        .await;
    assert_eq!(answer.0, 402, "Bob's own account is empty: {}", answer.1);
}

#[tokio::test]
async fn a_portal_session_buys_and_cancels_for_its_users_own_account_alone() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, ada_token) = app.user("ada@example.com").await;
    let acme = team(&app, &ada_token, "Acme").await;
    let subscription = paid_team_yearly(&app, &ada_token, &acme).await;
    let billing = app.api_key(&admin, &["billing:write"]).await;
    let session = portal_session(&app, &billing, &json!({"userId": ada})).await;

    // The team Ada owns is out of the portal's reach through the API.
    let body = json!({"planId": "pro_monthly", "provider": "card_gateway", "accountId": acme});
    let answer = app.post(&session, INITIATE, &body, None).await;
    assert_eq!(code(&answer), (403, Some("forbidden")), "{}", answer.1);
    let cancel = format!("/api/subscriptions/{subscription}/cancel");
    let answer = app.post(&session, &cancel, &json!({}), None).await;
    assert_eq!(code(&answer), (403, Some("forbidden")), "{}", answer.1);
    let path = format!("/api/subscriptions?accountId={acme}");
    assert_eq!(app.get(&session, &path).await.0, 403);
    // Her own account is not.
    let body = json!({"planId": "pro_monthly", "provider": "card_gateway"});
    let (status, started) = app.post(&session, INITIATE, &body, None).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(started["accountId"], ada.as_str());
    // And Ada herself still cancels the team's subscription.
    let (status, _) = app.post(&ada_token, &cancel, &json!({}), None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_portal_link_for_a_team_reaches_that_team_s_billing_alone_while_the_user_manages_it() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let (ada, ada_token) = app.user("ada@example.com").await;
    let (bob, _) = app.user("bob@example.com").await;
    let (eve, _) = app.user("eve@example.com").await;
    let acme = team(&app, &ada_token, "Acme").await;
    let members = format!("/api/accounts/{acme}/members");
    let add = json!({"memberId": bob, "role": "admin"});
    assert_eq!(app.post(&ada_token, &members, &add, None).await.0, 201);
    let subscription = paid_team_yearly(&app, &ada_token, &acme).await;
    let billing = app.api_key(&admin, &["billing:write"]).await;

    // Only for a team the user manages: not for an outsider, not for a personal account.
    for (user, account, expected) in [
        (&eve, acme.as_str(), (404, Some("account_not_found"))),
        (&ada, ada.as_str(), (404, Some("account_not_found"))),
        (&ada, "team_nope", (404, Some("account_not_found"))),
    ] {
        let body = json!({"userId": user, "accountId": account,
                          "returnUrl": "http://localhost:3000/account"});
        let answer = app
            .post(&billing, "/api/portal-sessions", &body, None)
            .await;
        assert_eq!(code(&answer), expected, "{}", answer.1);
    }

    // Ada's link for Acme: the team's billing, and nothing of her own.
    let session = portal_session(&app, &billing, &json!({"userId": ada, "accountId": acme})).await;
    let (status, balance) = app.get(&session, "/api/credits/balance").await;
    assert_eq!(
        (status, balance["balanceHundredths"].as_i64()),
        (200, Some(6_000_000)),
        "{balance}"
    );
    let (status, listed) = app.get(&session, "/api/subscriptions").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["items"][0]["id"], subscription.as_str(), "{listed}");
    let own = format!("/api/subscriptions?accountId={ada}");
    assert_eq!(
        code(&app.get(&session, &own).await),
        (403, Some("forbidden"))
    );
    let (status, dashboard) = page(&app, &session, "/dashboard").await;
    assert_eq!(status, 200);
    assert!(
        dashboard.contains("Team Yearly"),
        "the team's plan: {dashboard}"
    );
    assert!(
        !dashboard.contains("data-testid=\"account-switcher\""),
        "no switcher"
    );
    let (status, _) = page(&app, &session, &format!("/dashboard?account={acme}")).await;
    assert_eq!(status, 200);
    // A purchase without `accountId` is for the team.
    let body = json!({"planId": "credits_mor_b_10000", "provider": "mor_b"});
    let (status, started) = app.post(&session, INITIATE, &body, None).await;
    assert_eq!(status, 201, "{started}");
    assert_eq!(started["accountId"], acme.as_str());

    // Bob's link, made while he was an admin: once he is a plain member, it reads the team but
    // acts on nothing.
    let bob_session =
        portal_session(&app, &billing, &json!({"userId": bob, "accountId": acme})).await;
    let demote = json!({"role": "member"});
    let member = format!("{members}/{bob}");
    let request = app
        .client
        .patch(app.url(&member))
        .bearer_auth(&ada_token)
        .json(&demote);
    assert_eq!(request.send().await.expect("patch").status(), 200);
    let cancel = format!("/api/subscriptions/{subscription}/cancel");
    let answer = app.post(&bob_session, &cancel, &json!({}), None).await;
    assert_eq!(code(&answer), (403, Some("not_owner")), "{}", answer.1);
    // Ada's session cancels the team's subscription.
    let (status, cancelled) = app.post(&session, &cancel, &json!({}), None).await;
    assert_eq!(status, 200, "{cancelled}");
}
