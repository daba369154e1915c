//! A hidden plan is not for sale to newcomers (`pro_monthly_legacy` ships hidden: "kept for
//! existing subscribers; not offered to new customers"): it is not listed, a purchase or a
//! switch to it is 422 `plan_not_available`, unless an administrator allowed the customer it
//! (audited), and nothing is written for a refused request.

use serde_json::json;
use tests::{TestApp, spawn_app, spawn_app_with_admin};

async fn orders(app: &TestApp, token: &str) -> usize {
    let (status, body) = app.get(token, "/api/orders").await;
    assert_eq!(status, 200, "{body}");
    body["items"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_newcomer_cannot_buy_or_switch_to_a_hidden_plan() {
    let app = spawn_app().await;
    let token = app.register("newcomer@example.com").await;
    let (status, plans) = app.get(&token, "/api/plans").await;
    assert_eq!(status, 200);
    assert!(!plans.to_string().contains("pro_monthly_legacy"), "{plans}");

    let (status, body) = app
        .initiate(&token, "pro_monthly_legacy", "card_gateway", Some("k1"))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("plan_not_available")),
        "{body}"
    );
    assert_eq!(orders(&app, &token).await, 0, "nothing written");

    let (order, _) = app
        .open_checkout(&token, "pro_monthly", "card_gateway", None)
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    let (_, status_body) = app.get(&token, "/api/credits/status").await;
    let id = status_body["subscriptions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/subscriptions/{id}/change-plan");
    let body = json!({ "planId": "pro_monthly_legacy" });
    let (status, refused) = app.post(&token, &path, &body, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("plan_not_available")),
        "{refused}"
    );
    let when_it_ends = json!({ "planId": "pro_monthly_legacy", "when": "period_end" });
    let (status, refused) = app.post(&token, &path, &when_it_ends, None).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (422, Some("plan_not_available"))
    );
}

#[tokio::test]
async fn an_allowed_customer_buys_the_hidden_plan_and_the_allowance_is_audited() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let token = app.register("vip@example.com").await;
    let (_, me) = app.get(&token, "/api/auth/me").await;
    let user = me["id"].as_str().unwrap().to_owned();
    let path = format!("/api/admin/users/{user}/plan-allowances/pro_monthly_legacy");

    // Only administrators allow plans; unknown users and plans are 404.
    let put = |who: String, path: String| {
        let request = app.client.put(app.url(&path)).bearer_auth(who);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(put(token.clone(), path.clone()).await, 403);
    let unknown_user = "/api/admin/users/usr_nobody/plan-allowances/pro_monthly_legacy";
    assert_eq!(put(admin.clone(), unknown_user.into()).await, 404);
    let unknown_plan = format!("/api/admin/users/{user}/plan-allowances/no_such_plan");
    assert_eq!(put(admin.clone(), unknown_plan).await, 404);
    assert_eq!(put(admin.clone(), path.clone()).await, 200);

    let (status, listed) = app
        .get(&admin, &format!("/api/admin/users/{user}/plan-allowances"))
        .await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["items"][0]["planId"], "pro_monthly_legacy");
    let (_, audit) = app.get(&admin, "/api/admin/audit").await;
    assert_eq!(audit["items"][0]["action"], "plan.allowed", "{audit}");

    let (status, body) = app
        .initiate(&token, "pro_monthly_legacy", "card_gateway", None)
        .await;
    assert_eq!(status, 201, "{body}");
    // Another customer still cannot.
    let other = app.register("other@example.com").await;
    let (status, _) = app
        .initiate(&other, "pro_monthly_legacy", "card_gateway", None)
        .await;
    assert_eq!(status, 422);

    // Withdrawn: audited, and no longer for sale to the customer.
    let removed = app.client.delete(app.url(&path)).bearer_auth(&admin).send();
    assert_eq!(removed.await.unwrap().status().as_u16(), 204);
    let (_, audit) = app.get(&admin, "/api/admin/audit").await;
    assert_eq!(audit["items"][0]["action"], "plan.allowance_removed");
}
