//! A credits pack with a bonus through HTTP: the plan lists its bonus, `/pricing` says "500 +
//! 50 bonus credits", a purchase grants the paid credits and the bonus as two lots (the
//! bonus `bonus`, expiring on its own), the status splits them by category, and a refund takes
//! both back.

use serde_json::{Value, json};
use tests::{catalog_with, checkout_url, spawn_app_from};

const BONUS_PACK: &str = r#"
[plans.credits_bonus_550]
provider = "card_gateway"
amount = 4.99
currency = "USD"
duration = { type = "credits", credits = 550, bonusCredits = 50, bonusExpiresInDays = 30 }

[plans.credits_bonus_550.i18n.en]
name = "550 credits"
description = "500 credits and 50 more."
"#;

#[tokio::test]
async fn a_packs_bonus_is_granted_apart_with_its_own_expiry_and_refunded_with_it() {
    let catalog = catalog_with(BONUS_PACK);
    let app = spawn_app_from(catalog.path(), |_| {}).await;
    drop(catalog);
    let (status, plans) = app.get("", "/api/plans").await;
    assert_eq!(status, 200, "{plans}");
    let plan = plans
        .as_array()
        .or_else(|| plans["plans"].as_array())
        .expect("plans")
        .iter()
        .find(|p| p["id"] == "credits_bonus_550")
        .cloned()
        .expect("the bonus pack is listed");
    assert_eq!(plan["duration"]["creditsHundredths"], 55_000);
    assert_eq!(plan["duration"]["bonusCreditsHundredths"], 5_000);
    assert_eq!(plan["duration"]["bonusExpiresInDays"], 30);
    let pricing = app
        .client
        .get(app.url("/pricing?tab=credits"))
        .send()
        .await
        .expect("pricing")
        .text()
        .await
        .expect("page");
    assert!(
        pricing.contains("500.00 + 50.00 bonus credits"),
        "the card says what is bonus"
    );

    let token = app.register("bonus@example.com").await;
    let (order, started) = app
        .open_checkout(&token, "credits_bonus_550", "card_gateway", Some("bonus-1"))
        .await;
    assert!(checkout_url(&started).starts_with("http"));
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;
    assert_eq!(app.balance_hundredths(&token).await, 55_000);
    let (_, status) = app.get(&token, "/api/credits/status").await;
    let by = &status["balanceByCategory"];
    assert_eq!(
        (&by["paid"], &by["bonus"]),
        (&json!("500.00"), &json!("50.00")),
        "{status}"
    );
    let (_, ledger) = app.get(&token, "/api/credits/transactions").await;
    let grants: Vec<(&Value, &Value)> = ledger["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|t| t["type"] == "purchase_grant")
        .map(|t| (&t["amountHundredths"], &t["category"]))
        .collect();
    assert_eq!(grants.len(), 2, "{ledger}");
    assert!(
        grants.contains(&(&json!(50_000), &json!("paid"))),
        "{ledger}"
    );
    assert!(
        grants.contains(&(&json!(5_000), &json!("bonus"))),
        "{ledger}"
    );

    app.sandbox_action(&order, "refund", &json!({})).await;
    app.wait_for_status(&token, &order, "refunded").await;
    assert_eq!(
        app.balance_hundredths(&token).await,
        0,
        "a full refund takes the pack's credits and its bonus back"
    );
}
