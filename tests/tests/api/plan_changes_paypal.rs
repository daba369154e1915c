//! Switching plans at PayPal (`wallet_global`) through the sandbox (issue 19): the switch is a
//! revise the subscriber approves at PayPal (`approvalUrl`), after which PayPal's
//! `BILLING.SUBSCRIPTION.UPDATED` moves the subscription to the new plan, checked against the
//! switch asked for (PayPal plan id, price, currency, interval). PayPal bills the new price from
//! the next cycle, so nothing is granted on approval; the next renewal bills and grants the new
//! plan's terms. An update naming another PayPal plan is a recorded mismatch and changes nothing.
//!
//! The catalog adds `pro_plus_monthly_wallet_global` (19.99 USD a month, 3,000 credits a month,
//! PayPal plan `P-7GL4271244454362WXNWU5NQ`) next to the shipped `pro_monthly_wallet_global`
//! (9.99 USD a month, 1,000 credits a month).

use sandbox::CREDENTIALS;
use serde_json::{Value, json};
use tests::{ADMIN_PASSWORD, TestApp, catalog_with, spawn_app_from};

const PRO_PLUS: &str = r#"
[plans.pro_plus_monthly_wallet_global]
provider = "wallet_global"
amount = 19.99
currency = "USD"
duration = { months = 1, type = "recurring", credits = 3000 }
walletGlobalPlanId = "P-7GL4271244454362WXNWU5NQ"
[plans.pro_plus_monthly_wallet_global.i18n.en]
name = "Pro Plus monthly"
"#;

const CREDITS_1000: i64 = 100_000;
const CREDITS_3000: i64 = 300_000;

/// The app with the catalog above, and an administrator's token (to read the webhook inbox).
async fn app() -> (TestApp, String) {
    let catalog = catalog_with(PRO_PLUS);
    let mut settings = None;
    let app = spawn_app_from(catalog.path(), |s| settings = Some(s.clone())).await;
    drop(catalog);
    let store = bootstrap::app::connect_store(&settings.expect("settings"))
        .await
        .expect("store");
    let role = application::accounts::Role::Admin;
    bootstrap::app::create_user(&store, "admin@example.com", ADMIN_PASSWORD.into(), role)
        .await
        .expect("admin");
    let body = json!({"email": "admin@example.com", "password": ADMIN_PASSWORD});
    let (status, signed_in) = app.post("", "/api/auth/login", &body, None).await;
    assert_eq!(status, 200, "{signed_in}");
    let admin = signed_in["token"].as_str().expect("token").to_owned();
    (app, admin)
}

/// Buy and pay `pro_monthly_wallet_global`: our subscription's id, PayPal's (`I-…`) and the
/// sandbox's subscription record id (for renewals).
async fn subscribe(app: &TestApp, token: &str) -> (String, String, String) {
    let (order, _) = app
        .open_checkout(token, "pro_monthly_wallet_global", "wallet_global", None)
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(token, &order, "paid").await;
    let payment = app.sandbox_payment(&order).await;
    let paypal = payment["id"].as_str().expect("paypal id").to_owned();
    let record = payment["subscriptionId"]
        .as_str()
        .expect("sandbox subscription")
        .to_owned();
    let ours = subscription(app, token).await["id"]
        .as_str()
        .expect("subscription id")
        .to_owned();
    wait_for_balance(app, token, CREDITS_1000).await;
    (ours, paypal, record)
}

async fn subscription(app: &TestApp, token: &str) -> Value {
    let (status, body) = app.get(token, "/api/credits/status").await;
    assert_eq!(status, 200, "{body}");
    let list = body["subscriptions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(list.len(), 1, "{body}");
    list[0].clone()
}

async fn wait_for_balance(app: &TestApp, token: &str, expected: i64) {
    for _ in 0..50 {
        if app.balance_hundredths(token).await == expected {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(app.balance_hundredths(token).await, expected);
}

/// Press Approve (or Cancel) on the sandbox's consent page `approval_url`: the redirect.
async fn answer_approval(app: &TestApp, approval_url: &str, action: &str) -> String {
    let page = app.client.get(approval_url).send().await.expect("page");
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Approve"));
    let (path, query) = approval_url.split_once('?').expect("query");
    let response = app
        .client
        .post(format!("{path}/{action}?{query}"))
        .send()
        .await
        .expect("approval");
    assert_eq!(response.status(), 303, "{action}");
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// The admin inbox rows of `event_type`.
async fn recorded(app: &TestApp, admin: &str, event_type: &str) -> Vec<Value> {
    let (status, page) = app.get(admin, "/api/admin/webhook-events?limit=100").await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["eventType"] == event_type)
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_paypal_switch_waits_for_the_subscribers_approval_then_follows_paypals_update() {
    let (app, admin) = app().await;
    let token = app.register("paypal-up@example.com").await;
    let (id, paypal, record) = subscribe(&app, &token).await;

    let (status, body) = app
        .post(
            &token,
            &format!("/api/subscriptions/{id}/change-plan"),
            &json!({ "planId": "pro_plus_monthly_wallet_global" }),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["change"], "upgrade");
    assert_eq!(body["confirmed"], false, "{body}");
    let approval = body["approvalUrl"]
        .as_str()
        .expect("approvalUrl")
        .to_owned();
    assert!(
        approval.starts_with(&format!(
            "{}/sandbox/wallet_global/revise/{paypal}?ba_token=BA-",
            app.address
        )),
        "{approval}"
    );
    let pending = subscription(&app, &token).await;
    assert_eq!(pending["planId"], "pro_monthly_wallet_global");
    assert_eq!(pending["pendingPlanId"], "pro_plus_monthly_wallet_global");

    let back = answer_approval(&app, &approval, "approve").await;
    assert!(
        back.starts_with(&format!(
            "{}/dashboard?notice=plan_change_pending&subscription_id={paypal}",
            app.address
        )),
        "{back}"
    );
    let now = subscription(&app, &token).await;
    assert_eq!(now["planId"], "pro_plus_monthly_wallet_global", "{now}");
    assert_eq!(now["pendingPlanId"], Value::Null);
    let updates = recorded(&app, &admin, "BILLING.SUBSCRIPTION.UPDATED").await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["outcome"], "applied");
    // PayPal charges nothing before the next cycle: nothing is granted now.
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_1000);

    // The next cycle bills 19.99 and grants 3,000 credits.
    let renewed = app
        .client
        .post(app.url(&format!("/sandbox/api/subscriptions/{record}/renew")))
        .send()
        .await
        .expect("renew");
    assert_eq!(renewed.status(), 200);
    wait_for_balance(&app, &token, CREDITS_1000 + CREDITS_3000).await;
    let sales = recorded(&app, &admin, "PAYMENT.SALE.COMPLETED").await;
    assert!(
        sales.iter().all(|s| s["outcome"] != "mismatch"),
        "{sales:?}"
    );
}

#[tokio::test]
async fn a_declined_approval_changes_nothing_and_an_update_to_another_paypal_plan_is_a_mismatch() {
    let (app, admin) = app().await;
    let token = app.register("paypal-other@example.com").await;
    let (id, paypal, _) = subscribe(&app, &token).await;
    let (status, body) = app
        .post(
            &token,
            &format!("/api/subscriptions/{id}/change-plan"),
            &json!({ "planId": "pro_plus_monthly_wallet_global" }),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let approval = body["approvalUrl"]
        .as_str()
        .expect("approvalUrl")
        .to_owned();
    let back = answer_approval(&app, &approval, "cancel").await;
    assert!(back.contains("notice=plan_change_declined"), "{back}");
    assert!(
        recorded(&app, &admin, "BILLING.SUBSCRIPTION.UPDATED")
            .await
            .is_empty()
    );
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "pro_monthly_wallet_global"
    );

    // Someone revises the subscription at PayPal to a plan no switch asked for.
    let other = revise_at_paypal(&app, &paypal, "P-8XX0000000000000OTHERPLAN", "19.99").await;
    answer_approval(&app, &other, "approve").await;
    let updates = recorded(&app, &admin, "BILLING.SUBSCRIPTION.UPDATED").await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["outcome"], "mismatch");
    assert!(
        updates[0]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("P-8XX0000000000000OTHERPLAN"),
        "{updates:?}"
    );
    let now = subscription(&app, &token).await;
    assert_eq!(now["planId"], "pro_monthly_wallet_global", "{now}");
    assert_eq!(now["pendingPlanId"], "pro_plus_monthly_wallet_global");
    assert_eq!(app.balance_hundredths(&token).await, CREDITS_1000);
}

/// Revise PayPal subscription `paypal` to `plan_id` at `price` straight at the sandbox's API, as
/// the merchant's other tools could: the approval page's URL.
async fn revise_at_paypal(app: &TestApp, paypal: &str, plan_id: &str, price: &str) -> String {
    let token: Value = app
        .client
        .post(app.url("/sandbox/wallet_global/v1/oauth2/token"))
        .basic_auth(
            CREDENTIALS.paypal_client_id,
            Some(CREDENTIALS.paypal_client_secret),
        )
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .expect("token")
        .json()
        .await
        .expect("json");
    let base = app.address.clone();
    let answer: Value = app
        .client
        .post(app.url(&format!(
            "/sandbox/wallet_global/v1/billing/subscriptions/{paypal}/revise"
        )))
        .bearer_auth(token["access_token"].as_str().expect("access token"))
        .json(&json!({
            "plan_id": plan_id,
            "application_context": {
                "return_url": format!("{base}/dashboard"),
                "cancel_url": format!("{base}/dashboard"),
            },
            "plan": { "billing_cycles": [{
                "pricing_scheme": { "fixed_price": { "currency_code": "USD", "value": price } },
                "frequency": { "interval_unit": "MONTH", "interval_count": 1 },
            }]},
        }))
        .send()
        .await
        .expect("revise")
        .json()
        .await
        .expect("json");
    answer["links"]
        .as_array()
        .and_then(|links| links.iter().find(|l| l["rel"] == "approve"))
        .and_then(|l| l["href"].as_str())
        .expect("approve link")
        .to_owned()
}

#[tokio::test]
async fn a_lost_update_is_made_good_by_the_next_renewal_under_the_new_plan() {
    let (app, admin) = app().await;
    let token = app.register("paypal-lost@example.com").await;
    let (id, _, record) = subscribe(&app, &token).await;
    let (status, body) = app
        .post(
            &token,
            &format!("/api/subscriptions/{id}/change-plan"),
            &json!({ "planId": "pro_plus_monthly_wallet_global" }),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let approval = body["approvalUrl"]
        .as_str()
        .expect("approvalUrl")
        .to_owned();
    // PayPal's BILLING.SUBSCRIPTION.UPDATED never arrives.
    let dropped = app
        .client
        .post(app.url("/sandbox/api/drop-webhooks"))
        .json(&json!({ "count": 1 }))
        .send()
        .await
        .expect("drop");
    assert!(dropped.status().is_success());
    answer_approval(&app, &approval, "approve").await;
    assert!(
        recorded(&app, &admin, "BILLING.SUBSCRIPTION.UPDATED")
            .await
            .is_empty()
    );
    assert_eq!(
        subscription(&app, &token).await["planId"],
        "pro_monthly_wallet_global"
    );

    // The next sale bills the new plan: its subscription shows the revision, applied first.
    let renewed = app
        .client
        .post(app.url(&format!("/sandbox/api/subscriptions/{record}/renew")))
        .send()
        .await
        .expect("renew");
    assert_eq!(renewed.status(), 200);
    wait_for_balance(&app, &token, CREDITS_1000 + CREDITS_3000).await;
    let now = subscription(&app, &token).await;
    assert_eq!(now["planId"], "pro_plus_monthly_wallet_global", "{now}");
    assert_eq!(now["pendingPlanId"], Value::Null);
}
