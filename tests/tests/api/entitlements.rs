//! Entitlements end to end through the sandbox: a plan's entitlements are held once it is paid,
//! read by the buyer's session and by an `entitlements:read` API key (a key without the scope is
//! refused), and kept as sold when an administrator edits or deletes the dynamic plan later; a
//! refund that leaves a team fewer seats than members tells its owners and removes nobody.

use application::use_cases::plans::PricingMode;
use serde_json::{Value, json};

use tests::{TestApp, spawn_app_with_admin};

/// Start the app with `pricing_mode` and an administrator; returns the app and the admin's
/// session token.
async fn app_with_admin(pricing_mode: PricingMode) -> (TestApp, String) {
    spawn_app_with_admin(|s| s.pricing_mode = pricing_mode).await
}

/// A new buyer's `(user id, session token)`.
async fn buyer(app: &TestApp, email: &str) -> (String, String) {
    let token = app.register(email).await;
    let (status, me) = app.get(&token, "/api/auth/me").await;
    assert_eq!(status, 200, "{me}");
    let id = me["id"]
        .as_str()
        .or(me["user"]["id"].as_str())
        .expect("user id")
        .to_owned();
    (id, token)
}

/// Buy `plan` through the sandbox's hosted checkout and wait for the order to be paid.
async fn buy(app: &TestApp, token: &str, plan: &str) -> String {
    let (order, _) = app
        .open_checkout(token, plan, "card_gateway", Some(&format!("buy-{plan}")))
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    order
}

#[tokio::test]
async fn a_bought_plans_entitlements_are_read_by_the_buyer_and_by_a_key_with_the_scope() {
    let (app, admin) = app_with_admin(PricingMode::Static).await;
    let (user_id, token) = buyer(&app, "buyer@example.com").await;
    let (status, before) = app.get(&token, "/api/entitlements").await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["entitlements"], json!({}));

    let order = buy(&app, &token, "lifetime_card").await;
    let (status, held) = app.get(&token, "/api/entitlements").await;
    assert_eq!(status, 200, "{held}");
    assert_eq!(held["userId"], user_id.as_str());
    assert_eq!(
        held["entitlements"],
        json!({"export_pdf": true, "priority_support": true, "projects": 100})
    );
    for grant in held["grants"].as_array().expect("grants") {
        assert_eq!(grant["orderId"], order.as_str());
        assert_eq!(grant["planId"], "lifetime_card");
        assert_eq!(grant.get("until"), None, "lifetime");
    }
    let (_, status_view) = app.get(&token, "/api/credits/status").await;
    assert_eq!(status_view["entitlements"], held["entitlements"]);

    let reader = app.api_key(&admin, &["entitlements:read"]).await;
    let path = format!("/api/entitlements?userId={user_id}");
    let (status, by_key) = app.get(&reader, &path).await;
    assert_eq!(status, 200, "{by_key}");
    assert_eq!(by_key, held);

    let credits_reader = app.api_key(&admin, &["credits:read"]).await;
    let (status, refused) = app.get(&credits_reader, &path).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["code"], "forbidden");
    let (other_id, _) = buyer(&app, "other@example.com").await;
    let (status, refused) = app
        .get(&token, &format!("/api/entitlements?userId={other_id}"))
        .await;
    assert_eq!(status, 403, "{refused}");
}

fn pass_plan(seats: u64) -> Value {
    json!({
        "id": "team_pass",
        "provider": "card_gateway",
        "amount": "49.00",
        "currency": "USD",
        "duration": {"type": "one_time", "months": 1},
        "i18n": {"en": {"name": "Team pass", "duration": "month"}},
        "entitlements": {"seats": seats, "sso": true},
    })
}

#[tokio::test]
async fn editing_or_deleting_a_dynamic_plan_does_not_change_what_its_buyer_holds() {
    let (app, admin) = app_with_admin(PricingMode::Dynamic).await;
    let (status, created) = app
        .post(&admin, "/api/admin/plans", &pass_plan(3), None)
        .await;
    assert_eq!(status, 201, "{created}");
    let (_, token) = buyer(&app, "buyer@example.com").await;
    let order = buy(&app, &token, "team_pass").await;
    let (_, held) = app.get(&token, "/api/entitlements").await;
    assert_eq!(held["entitlements"], json!({"seats": 3, "sso": true}));
    assert_eq!(held["grants"][0]["orderId"], order.as_str());
    assert!(
        held["grants"][0]["until"].is_string(),
        "a one-month pass ends"
    );

    let edited = app
        .client
        .put(app.url("/api/admin/plans/team_pass"))
        .bearer_auth(&admin)
        .json(&pass_plan(50))
        .send()
        .await
        .expect("edit");
    assert_eq!(edited.status(), 200);
    let (_, listed) = app.get(&token, "/api/plans").await;
    let listed = listed["plans"].as_array().expect("plans").clone();
    let offered = listed
        .iter()
        .find(|p| p["id"] == "team_pass")
        .expect("listed");
    assert_eq!(
        offered["entitlements"]["seats"], 50,
        "new buyers get the edit"
    );
    let (_, after_edit) = app.get(&token, "/api/entitlements").await;
    assert_eq!(after_edit, held, "the buyer keeps what was sold");

    let deleted = app
        .client
        .delete(app.url("/api/admin/plans/team_pass"))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("delete");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let (_, after_delete) = app.get(&token, "/api/entitlements").await;
    assert_eq!(after_delete, held);
}

/// Buy `plan` for `team` through the sandbox's hosted checkout and wait for it to be paid.
async fn buy_for(app: &TestApp, token: &str, plan: &str, team: &str) -> String {
    let body = json!({"planId": plan, "provider": "card_gateway", "accountId": team});
    let key = format!("buy-{plan}-{team}");
    let (status, started) = app
        .post(token, "/api/payment/initiate", &body, Some(&key))
        .await;
    assert_eq!(status, 201, "{started}");
    let order = started["orderId"].as_str().expect("order").to_owned();
    assert!(
        app.client
            .get(tests::checkout_url(&started))
            .send()
            .await
            .is_ok()
    );
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    order
}

#[tokio::test]
async fn a_refund_that_leaves_a_team_fewer_seats_than_members_tells_its_owners_and_removes_nobody()
{
    let (app, admin) = app_with_admin(PricingMode::Dynamic).await;
    for (id, seats) in [("team_pass", 3), ("team_pass_two", 2)] {
        let mut plan = pass_plan(seats);
        plan["id"] = json!(id);
        let (status, created) = app.post(&admin, "/api/admin/plans", &plan, None).await;
        assert_eq!(status, 201, "{created}");
    }
    let (_, ada) = buyer(&app, "ada@example.com").await;
    let (status, team) = app
        .post(&ada, "/api/accounts", &json!({"name": "Acme"}), None)
        .await;
    assert_eq!(status, 201, "{team}");
    let team = team["id"].as_str().expect("team").to_owned();
    let members = format!("/api/accounts/{team}/members");
    let big = buy_for(&app, &ada, "team_pass", &team).await;
    buy_for(&app, &ada, "team_pass_two", &team).await;
    for email in ["bob@example.com", "cy@example.com"] {
        let (id, _) = buyer(&app, email).await;
        let (status, added) = app
            .post(&ada, &members, &json!({"memberId": id}), None)
            .await;
        assert_eq!(status, 201, "{added}");
    }

    // The three-seat pass is refunded: two seats are left for three members.
    app.sandbox_action(&big, "refund", &json!({})).await;
    app.wait_for_status(&ada, &big, "refunded").await;
    let path = format!("/api/entitlements?accountId={team}");
    let (_, held) = app.get(&ada, &path).await;
    assert_eq!(held["entitlements"]["seats"], 2, "{held}");
    let (status, events) = app
        .get(&admin, "/api/events?type=account.seats_exceeded")
        .await;
    assert_eq!(status, 200, "{events}");
    let told: Vec<&Value> = events["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter(|e| e["data"]["accountId"] == team.as_str())
        .collect();
    assert_eq!(told.len(), 1, "{events}");
    let data = &told[0]["data"];
    assert_eq!(
        (
            &data["seats"],
            &data["members"],
            &data["by"],
            &data["cause"]
        ),
        (&json!(2), &json!(3), &Value::Null, &json!("seats_reduced")),
        "{data}"
    );

    // Nobody was removed; nobody more joins; the owner's dashboard says so.
    let (_, listed) = app.get(&ada, &members).await;
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(3),
        "{listed}"
    );
    let (dan, _) = buyer(&app, "dan@example.com").await;
    let (status, refused) = app
        .post(&ada, &members, &json!({"memberId": dan}), None)
        .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("seats_exceeded"))
    );
    let page = app
        .client
        .get(app.url("/dashboard?tab=teams"))
        .header("Cookie", format!("tally_session={ada}"))
        .send()
        .await
        .expect("dashboard")
        .text()
        .await
        .expect("page");
    assert!(page.contains("data-testid=\"seats-over\""), "{page}");
    assert!(
        page.contains("3 members and its plans now hold 2 seats"),
        "{page}"
    );
}
