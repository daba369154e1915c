//! `GET /api/offers`: the offers a host app builds its pricing page from, grouped by the same
//! function as `/pricing`; prices charged here beside production prices; what a user holds, read
//! with their own credential or by an API key naming them; bad input as problem JSON.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use tests::{TestApp, spawn_app, spawn_app_with_admin};

async fn anonymous(app: &TestApp, query: &str) -> (u16, Value) {
    let response = app
        .client
        .get(app.url(&format!("/api/offers{query}")))
        .send()
        .await
        .expect("offers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn entry<'a>(list: &'a Value, key: &str, interval: &str) -> &'a Value {
    list["offers"]
        .as_array()
        .expect("offers")
        .iter()
        .find(|o| o["key"] == key && o["interval"] == interval)
        .unwrap_or_else(|| panic!("no {key} at {interval} in {list}"))
}

fn option_ids(offer: &Value) -> Vec<&str> {
    offer["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| o["planId"].as_str().expect("planId"))
        .collect()
}

#[tokio::test]
async fn offers_are_one_entry_per_group_and_interval_with_an_option_per_provider() {
    let app = spawn_app().await;
    let (status, list) = anonymous(&app, "?locale=en").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["environment"], "development");
    assert!(list.get("userId").is_none(), "{list}");
    let monthly = entry(&list, "group-pro", "month");
    assert_eq!(monthly["type"], "recurring");
    assert_eq!(monthly["currency"], "USD");
    assert_eq!(
        option_ids(monthly),
        ["pro_monthly", "pro_monthly_wallet_global"]
    );
    assert!(monthly.get("held").is_none(), "nobody signed in");
    let yearly = entry(&list, "group-pro", "year");
    assert_eq!(option_ids(yearly), ["pro_yearly"]);
    assert_eq!(yearly["savingPercent"], 16);
    assert_eq!(yearly["originalPrice"]["amount"], "119.88");
    // One card per group and interval: the pro group is never listed twice at one interval.
    let mut seen = BTreeSet::new();
    for offer in list["offers"].as_array().expect("offers") {
        let pair = (offer["key"].to_string(), offer["interval"].to_string());
        assert!(seen.insert(pair), "listed twice: {offer}");
    }
    let intervals = list["intervals"].as_array().expect("intervals");
    assert!(intervals.contains(&json!("month")) && intervals.contains(&json!("year")));

    let (status, yearly_only) = anonymous(&app, "?interval=year").await;
    assert_eq!(status, 200, "{yearly_only}");
    let offers = yearly_only["offers"].as_array().expect("offers");
    assert!(!offers.is_empty() && offers.iter().all(|o| o["interval"] == "year"));
}

#[tokio::test]
async fn the_price_charged_here_is_told_beside_the_production_price() {
    let app = spawn_app().await;
    let (status, list) = anonymous(&app, "?currency=CNY&locale=zh-CN").await;
    assert_eq!(status, 200, "{list}");
    let offers = list["offers"].as_array().expect("offers");
    assert!(offers.iter().all(|o| o["currency"] == "CNY"), "{list}");
    let lifetime = entry(&list, "group-lifetime", "lifetime");
    let wallet = lifetime["options"]
        .as_array()
        .expect("options")
        .iter()
        .find(|o| o["provider"] == "wallet_qr")
        .expect("the wallet pays the lifetime plan in yuan");
    assert_eq!(
        wallet["price"],
        json!({"amount": "0.01", "amountMinor": 1, "currency": "CNY"})
    );
    assert_eq!(wallet["productionPrice"]["amount"], "299.00");
    assert_eq!(wallet["originalPrice"]["amount"], "399.00");
}

#[tokio::test]
async fn the_offers_are_the_cards_of_the_pricing_page() {
    let app = spawn_app().await;
    let page = app
        .client
        .get(app.url("/pricing?tab=subscriptions&period=year&lang=en"))
        .send()
        .await
        .expect("pricing")
        .text()
        .await
        .expect("html");
    // Every tab's panel is on the page; the subscriptions panel shows the toggle's interval.
    let panel = page
        .split("id=\"panel-subscriptions\"")
        .nth(1)
        .and_then(|rest| rest.split("id=\"panel-one-time\"").next())
        .expect("the subscriptions panel");
    let cards: BTreeSet<String> = panel
        .split("data-offer=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(str::to_owned))
        .collect();
    let (status, list) = anonymous(&app, "?interval=year&locale=en").await;
    assert_eq!(status, 200, "{list}");
    let offered: BTreeSet<String> = list["offers"]
        .as_array()
        .expect("offers")
        .iter()
        .filter(|o| o["type"] == "recurring")
        .map(|o| o["key"].as_str().expect("key").to_owned())
        .collect();
    assert!(!cards.is_empty());
    assert_eq!(
        cards, offered,
        "the page's yearly cards are the yearly offers"
    );
}

#[tokio::test]
async fn a_currency_or_interval_that_names_none_is_refused_naming_the_field() {
    let app = spawn_app().await;
    for (query, field) in [
        ("?currency=XYZ", "currency"),
        ("?currency=usd%20", "currency"),
        ("?interval=weekly", "interval"),
        ("?interval=months-13", "interval"),
    ] {
        let (status, problem) = anonymous(&app, query).await;
        assert_eq!(status, 422, "{query}: {problem}");
        assert_eq!(problem["code"], "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{query}");
    }
    let (status, problem) = anonymous(&app, "?userId=usr_someone").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (401, Some("unauthorized"))
    );
    let response = app
        .client
        .get(app.url("/api/offers"))
        .bearer_auth("not-a-token")
        .send()
        .await
        .expect("offers");
    assert_eq!(
        response.status(),
        401,
        "a bad credential is not read as none"
    );
}

#[tokio::test]
async fn a_user_sees_what_they_hold_and_a_key_reads_it_for_the_user_it_names() {
    let (app, admin) = spawn_app_with_admin(|_| {}).await;
    let token = app.register("holder@example.com").await;
    let (_, me) = app.get(&token, "/api/auth/me").await;
    let user_id = me["id"].as_str().expect("id").to_owned();
    let (order, _) = app
        .open_checkout(&token, "pro_monthly", "card_gateway", Some("offers-pro"))
        .await;
    app.sandbox_action(&order, "pay", &json!({})).await;
    app.wait_for_status(&token, &order, "paid").await;

    let (status, own) = app.get(&token, "/api/offers?locale=en").await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["userId"], user_id.as_str());
    assert_eq!(entry(&own, "group-pro", "month")["held"], "current");
    assert_eq!(entry(&own, "group-pro", "year")["held"], "none");

    let (status, refused) = app
        .get(&token, "/api/offers?userId=usr_somebody_else")
        .await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("forbidden")));

    let body = json!({"name": "backend", "scopes": ["billing:read"]});
    let (status, key) = app.post(&admin, "/api/admin/api-keys", &body, None).await;
    assert_eq!(status, 201, "{key}");
    let key = key["secret"].as_str().expect("secret");
    let (status, read) = app.get(key, &format!("/api/offers?userId={user_id}")).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(entry(&read, "group-pro", "month")["held"], "current");
    let (status, alone) = app.get(key, "/api/offers").await;
    assert_eq!(
        status, 200,
        "a key naming nobody reads the offers alone: {alone}"
    );
    assert!(alone.get("userId").is_none());
    let (status, problem) = app.get(key, "/api/offers?userId=usr_nobody").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("user_not_found"))
    );

    let body = json!({"name": "spender", "scopes": ["credits:consume"]});
    let (_, spender) = app.post(&admin, "/api/admin/api-keys", &body, None).await;
    let spender = spender["secret"].as_str().expect("secret");
    let (status, problem) = app
        .get(spender, &format!("/api/offers?userId={user_id}"))
        .await;
    assert_eq!((status, problem["code"].as_str()), (403, Some("forbidden")));
}
