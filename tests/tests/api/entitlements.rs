//! Entitlements end to end through the sandbox: a plan's entitlements are held once it is paid,
//! read by the buyer's session and by an `entitlements:read` API key (a key without the scope is
//! refused), and kept as sold when an administrator edits or deletes the dynamic plan later.

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
