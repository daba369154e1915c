//! Three `tally serve` processes on one PostgreSQL behind a load balancer (slow: only with
//! `TALLY_RELIABILITY=1`). Every provider's success webhooks, delivered five more times at once
//! and spread over the three, grant once per order (invariant 3); 64 clients spending one
//! account across the three spend exactly what it holds, never below zero, and the ledger
//! explains the balance (invariants 1 and 2); 64 members of one team spending its pool across
//! the three, each within a daily limit, never pass their limits nor overdraw the pool
//! (invariants 18 and 19); 64 clients spending one account with a daily limit far below its
//! balance across the three spend exactly the limit (invariant 19); 64 spends below an
//! automatic top-up's threshold across the three ask for one top-up, granted once (invariant
//! 20).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::api::{Api, assert_ledger_explains_balance, consumption_ids, types};
use super::cluster::{Cluster, TALLY_TOML, enabled};
use super::duplicates::{
    CLIENTS, CREDIT_PLANS, FEATURE, FEATURE_COST_HUNDREDTHS, MAX_RETRIES, SPENDS_PER_CLIENT,
    assert_one_grant_per_order, assert_spent_exactly_what_was_there, redeliver, spend_at_once,
};

const INSTANCES: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_providers_success_webhook_delivered_five_times_at_once_across_three_instances_grants_once()
 {
    let Some(_serial) = enabled("several_instances_webhooks").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_webhooks", INSTANCES, TALLY_TOML).await;
    let (api, token) = (&cluster.api, &cluster.buyer.token);
    let mut orders = Vec::new();
    for (provider, plan) in CREDIT_PLANS {
        orders.push(api.initiate(token, plan, provider).await);
    }
    for order in &orders {
        api.pay(order).await;
    }
    let mut expected = 0;
    for order in &orders {
        api.wait_for_status(token, order, "paid").await;
        let view = api.order(token, order).await;
        expected += view.body["creditsHundredths"].as_i64().expect("credits");
    }
    let deliveries: Vec<_> = orders
        .iter()
        .map(|order| {
            let (api, order) = (api.clone(), order.clone());
            tokio::spawn(async move { (order.clone(), redeliver(&api, &order).await) })
        })
        .collect();
    for delivery in deliveries {
        let (order, statuses) = delivery.await.expect("redelivery");
        for status in &statuses {
            assert!(matches!(status, Some(200..=299)), "{order}: {statuses:?}");
        }
    }
    let spread = cluster.balancer.webhooks_by_backend();
    assert_eq!(
        spread.len(),
        INSTANCES,
        "every instance got webhooks: {spread:?}"
    );
    let balance = api.balance(token, None).await;
    assert_eq!(balance, expected, "one grant per order");
    let ledger = api.ledger(token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_one_grant_per_order(&ledger, &orders);
    println!(
        "webhooks by instance: {spread:?}; ledger: {:?}",
        types(&ledger)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_spending_one_account_across_three_instances_spend_exactly_what_it_holds()
 {
    let Some(_serial) = enabled("several_instances_spending").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_spending", INSTANCES, TALLY_TOML).await;
    let buyer = &cluster.buyer;
    cluster.buy("credits_card_500", "card_gateway").await;
    let start = cluster.api.balance(&buyer.token, None).await;
    assert_eq!(start, 50_000);
    let apis = cluster.apis();
    let started = std::time::Instant::now();
    let outcomes = spend_at_once(&apis, &cluster.api_key, &buyer.user_id).await;
    let elapsed = started.elapsed();
    assert_spent_exactly_what_was_there(
        &apis[1],
        &cluster.api_key,
        &buyer.user_id,
        start,
        &outcomes,
    )
    .await;
    assert_eq!(cluster.api.balance(&buyer.token, None).await, 0);
    println!(
        "{} spends across {INSTANCES} instances in {elapsed:?}",
        outcomes.len()
    );
}

/// The account's limit in the limited-spending test: 12 images of 5 credits, far below the 500
/// credits it holds.
const LIMIT_IMAGES: i64 = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_across_three_instances_never_pass_an_account_s_daily_limit() {
    let Some(_serial) = enabled("several_instances_limited").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_limited", INSTANCES, TALLY_TOML).await;
    let buyer = &cluster.buyer;
    cluster.buy("credits_card_500", "card_gateway").await;
    let start = cluster.api.balance(&buyer.token, None).await;
    assert_eq!(start, 50_000);
    // A day as 24 rolling hours: no calendar reset can fall inside the test.
    let credits = (LIMIT_IMAGES * FEATURE_COST_HUNDREDTHS / 100).to_string();
    let body = json!({"credits": credits, "window": "rolling", "rollingHours": 24});
    let limit = cluster
        .api
        .post(&buyer.token, "/api/limits", &body, None)
        .await;
    assert_eq!(limit.status, 201, "{limit:?}");
    let apis = cluster.apis();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let api = apis[client % apis.len()].clone();
            let (api_key, user) = (cluster.api_key.clone(), buyer.user_id.clone());
            tokio::spawn(async move {
                let mut spent = Vec::new();
                for n in 0..SPENDS_PER_CLIENT {
                    if let Some(id) = spend_within_limit(&api, &api_key, &user, client, n).await {
                        spent.push(id);
                    }
                }
                spent
            })
        })
        .collect();
    let mut spent = BTreeSet::new();
    for client in clients {
        spent.extend(client.await.expect("client"));
    }
    let allowed = usize::try_from(LIMIT_IMAGES).expect("positive");
    assert_eq!(
        spent.len(),
        allowed,
        "exactly the limit's spends, not one more"
    );
    let balance = cluster.api.balance(&buyer.token, None).await;
    assert_eq!(balance, start - LIMIT_IMAGES * FEATURE_COST_HUNDREDTHS);
    let ledger = cluster.api.ledger(&buyer.token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_eq!(
        consumption_ids(&ledger),
        spent,
        "the ledger holds the answered spends"
    );
    let listed = cluster.api.get(&buyer.token, "/api/limits").await;
    let used = &listed.body["items"][0]["usedHundredths"];
    assert_eq!(
        used.as_i64(),
        Some(LIMIT_IMAGES * FEATURE_COST_HUNDREDTHS),
        "{listed:?}"
    );
}

/// Spend `n` of `client`: its transaction id, or `None` when the limit refused it (`503`s and
/// transport errors are asked again with the same key).
async fn spend_within_limit(
    api: &Api,
    api_key: &str,
    user: &str,
    client: usize,
    n: usize,
) -> Option<i64> {
    let key = format!("limited-{client}-{n}");
    for attempt in 0..MAX_RETRIES {
        match api.try_consume(api_key, user, FEATURE, &key).await {
            Ok(reply) if reply.status == 201 => return reply.body["transactionId"].as_i64(),
            Ok(reply) if reply.status == 402 => {
                assert!(reply.is_problem("limit_reached"), "{reply:?}");
                return None;
            }
            Ok(reply) if reply.status == 503 => {}
            Ok(reply) => panic!("spend {key}: {reply:?}"),
            Err(_) => {}
        }
        let pause = 50 * u64::try_from(attempt + 1).unwrap_or(1);
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
    panic!("spend {key} never got an answer");
}

/// The team test's instances may take 64 sign-ups from one address at once.
const TEAM_TOML: &str = "\
[database]
maxConnections = 16
acquireTimeoutMs = 2000
retryAttempts = 6

[reconciler]
enabled = false

[signup]
perAddressBurst = 100
perAddressPerHour = 1000
perDomainBurst = 100
perDomainPerHour = 1000
";

/// Members of the team; what each may spend a day: four images of 5 credits.
const MEMBERS: usize = 64;
const IMAGE_CREDITS: i64 = 5;
const IMAGES_PER_DAY: i64 = 4;
/// Each member asks for twice their limit, all at once: 512 spends for a pool of 200 images,
/// which runs out before every member reaches their limit.
const TRIES_PER_MEMBER: i64 = 2 * IMAGES_PER_DAY;
const POOL_IMAGES: i64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_members_spending_one_team_across_three_instances_stay_within_their_limits() {
    let Some(_serial) = enabled("several_instances_team").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_team", INSTANCES, TEAM_TOML).await;
    let (api, owner) = (&cluster.api, &cluster.buyer);
    let team = api
        .post(
            &owner.token,
            "/api/accounts",
            &json!({"name": "Pool"}),
            None,
        )
        .await;
    assert_eq!(team.status, 201, "{team:?}");
    let team = team.body["id"].as_str().expect("team id").to_owned();
    let admin = api.login("admin@example.com").await;
    let pool = (POOL_IMAGES * IMAGE_CREDITS).to_string();
    let fund = json!({"amount": pool, "reason": "pool"});
    let path = format!("/api/admin/accounts/{team}/credits");
    let funded = api
        .post(&admin.token, &path, &fund, Some("fund-pool"))
        .await;
    assert_eq!(funded.status, 200, "{funded:?}");
    let members = join_members(api, &owner.token, &team).await;
    let apis = cluster.apis();
    let spent = spend_from_team(&apis, &cluster.api_key, &team, &members).await;

    let total: i64 = spent.values().sum();
    assert_eq!(
        total, POOL_IMAGES,
        "the pool is spent to the last credit: {spent:?}"
    );
    for (member, count) in &spent {
        assert!(*count <= IMAGES_PER_DAY, "{member} spent {count} images");
    }
    let roster = api
        .get(&owner.token, &format!("/api/accounts/{team}/members"))
        .await;
    assert_eq!(roster.status, 200, "{roster:?}");
    for row in roster.body["items"].as_array().expect("members") {
        let member = row["memberId"].as_str().expect("member");
        if member == owner.user_id {
            continue;
        }
        let used = row["limit"]["usedHundredths"].as_i64().expect("used");
        let images = spent.get(member).copied().unwrap_or(0);
        assert_eq!(used, 100 * IMAGE_CREDITS * images, "{row}");
    }
    let balance = api
        .get(
            &owner.token,
            &format!("/api/credits/balance?accountId={team}"),
        )
        .await;
    assert_eq!(balance.body["balanceHundredths"], 0, "{balance:?}");
    let ledger = team_ledger(api, &owner.token, &team).await;
    assert_ledger_explains_balance(&ledger, 0);
    let by_member = ledger.iter().filter(|t| t["type"] == "consumption").fold(
        BTreeMap::<String, i64>::new(),
        |mut counts, t| {
            let member = t["memberId"].as_str().expect("memberId").to_owned();
            *counts.entry(member).or_default() += 1;
            counts
        },
    );
    assert_eq!(by_member, spent, "the ledger names every spend's member");
    println!("{MEMBERS} members spent {total} images from one pool across {INSTANCES} instances");
}

/// Register the members and add each to `team` with the daily limit: their user ids.
async fn join_members(api: &Api, owner: &str, team: &str) -> Vec<String> {
    let mut members = Vec::new();
    for n in 0..MEMBERS {
        let member = api.register(&format!("member{n}@example.com")).await;
        let add = json!({
            "memberId": member.user_id,
            "limit": {"credits": (IMAGES_PER_DAY * IMAGE_CREDITS).to_string(), "window": "day"},
        });
        let path = format!("/api/accounts/{team}/members");
        let added = api.post(owner, &path, &add, None).await;
        assert_eq!(added.status, 201, "{added:?}");
        members.push(member.user_id);
    }
    members
}

/// Every member spends images from `team` at once, spread over the instances: how many each
/// spent. Every refusal is the limit's or the pool's.
async fn spend_from_team(
    apis: &[Api],
    api_key: &str,
    team: &str,
    members: &[String],
) -> BTreeMap<String, i64> {
    let tasks: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(n, member)| {
            let api = apis[n % apis.len()].clone();
            let (api_key, team, member) = (api_key.to_owned(), team.to_owned(), member.clone());
            tokio::spawn(async move {
                let mut spent = 0;
                for attempt in 0..TRIES_PER_MEMBER {
                    let body = json!({"userId": member, "accountId": team, "feature": "image"});
                    let key = format!("team-{member}-{attempt}");
                    let reply = api
                        .post(&api_key, "/api/credits/consume", &body, Some(&key))
                        .await;
                    match reply.status {
                        201 => spent += 1,
                        402 if reply.is_problem("limit_reached")
                            || reply.is_problem("insufficient_credits") => {}
                        other => panic!("{member}: {other} {reply:?}"),
                    }
                }
                (member, spent)
            })
        })
        .collect();
    let mut spent = BTreeMap::new();
    for task in tasks {
        let (member, count) = task.await.expect("member");
        if count > 0 {
            spent.insert(member, count);
        }
    }
    spent
}

/// Every transaction of `team`, in the order they were written.
async fn team_ledger(api: &Api, owner: &str, team: &str) -> Vec<serde_json::Value> {
    let mut items = Vec::new();
    for page in 1_u64..=50 {
        let path = format!("/api/credits/transactions?accountId={team}&page={page}&limit=100");
        let reply = api.get(owner, &path).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        items.extend(reply.body["items"].as_array().cloned().unwrap_or_default());
        if page >= reply.body["totalPages"].as_u64().unwrap_or(0) {
            break;
        }
    }
    // In the order the balance lock let them write (ids), not by their request times.
    items.sort_by_key(|t| t["id"].as_i64());
    items
}

/// Users redeeming one promo code at once across the instances, and the code's limit.
const REDEEMERS: usize = 64;
const CAMPAIGN_LIMIT: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_users_redeeming_a_forty_redemption_code_across_three_instances_redeem_forty() {
    let Some(_serial) = enabled("several_instances_promo").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_promo", INSTANCES, TEAM_TOML).await;
    let api = &cluster.api;
    let admin = api.login("admin@example.com").await;
    let body = json!({"code": "LAUNCH", "credits": "7", "maxRedemptions": CAMPAIGN_LIMIT});
    let made = api
        .post(&admin.token, "/api/admin/promo-codes", &body, None)
        .await;
    assert_eq!(made.status, 201, "{made:?}");
    let mut users = Vec::new();
    for n in 0..REDEEMERS {
        users.push(api.register(&format!("redeemer{n}@example.com")).await);
    }
    let apis = cluster.apis();
    // Each user asks twice at once, through two instances, with the same (default) key.
    let tasks: Vec<_> = users
        .iter()
        .enumerate()
        .flat_map(|(n, user)| {
            [0, 1].map(|twice| {
                let api = apis[(n + twice) % apis.len()].clone();
                let token = user.token.clone();
                tokio::spawn(async move { redeem_until_answered(&api, &token).await })
            })
        })
        .collect();
    let mut redemption_ids = BTreeSet::new();
    let mut exhausted = 0;
    for task in tasks {
        match task.await.expect("redeemer") {
            Some(id) => {
                redemption_ids.insert(id);
            }
            None => exhausted += 1,
        }
    }
    assert_eq!(
        redemption_ids.len(),
        CAMPAIGN_LIMIT,
        "exactly the campaign's redemptions, each user's two requests one redemption"
    );
    let mut credited = 0;
    for user in &users {
        let balance = api.balance(&user.token, None).await;
        assert!(
            balance == 0 || balance == 700,
            "{}: {balance}",
            user.user_id
        );
        credited += usize::from(balance == 700);
    }
    assert_eq!(credited, CAMPAIGN_LIMIT);
    let id = made.body["id"].as_str().expect("id");
    let detail = api
        .get(&admin.token, &format!("/api/admin/promo-codes/{id}"))
        .await;
    assert_eq!(
        detail.body["code"]["redeemed"], CAMPAIGN_LIMIT,
        "{detail:?}"
    );
    println!("{CAMPAIGN_LIMIT} redemptions across {INSTANCES} instances; {exhausted} refused");
}

/// Redeem `LAUNCH` as `token`: the redemption's id, or `None` when the code is used up (`503`s
/// and transport errors are asked again; the default key makes a retry find its redemption).
async fn redeem_until_answered(api: &Api, token: &str) -> Option<String> {
    let body = json!({"code": "launch"});
    for attempt in 0..MAX_RETRIES {
        let request = api
            .client
            .post(api.url("/api/promo-codes/redeem"))
            .bearer_auth(token)
            .json(&body);
        match api.try_send(request).await {
            Ok(reply) if reply.status == 200 => {
                return reply.body["id"].as_str().map(str::to_owned);
            }
            Ok(reply) if reply.status == 409 => {
                assert!(reply.is_problem("promo_code_exhausted"), "{reply:?}");
                return None;
            }
            Ok(reply) if reply.status == 503 => {}
            Ok(reply) => panic!("redeem: {reply:?}"),
            Err(_) => {}
        }
        let pause = 50 * u64::try_from(attempt + 1).unwrap_or(1);
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
    panic!("a redemption never got an answer");
}

/// Automatic top-up across the three instances: a buyer saves a card with a pack bought with
/// consent, sets a rule whose threshold every spend is below, and 64 clients spend the whole
/// balance across the three while the top-up's charge is slow. Exactly one top-up is asked for
/// and charged (each instance's worker claims with `SKIP LOCKED`), and once the provider
/// settles it, its pack is granted once and the ledger explains the balance (invariant 20).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_spends_below_the_threshold_across_three_instances_ask_for_one_top_up() {
    let Some(_serial) = enabled("several_instances_top_up").await else {
        return;
    };
    let cluster = Cluster::start("several_instances_top_up", INSTANCES, TALLY_TOML).await;
    let (api, buyer) = (&cluster.api, &cluster.buyer);
    let body =
        json!({"planId": "credits_card_500", "provider": "card_gateway", "saveForAutoTopUp": true});
    let started = api
        .post(&buyer.token, "/api/payment/initiate", &body, None)
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    let order = started.body["orderId"].as_str().expect("order").to_owned();
    api.pay(&order).await;
    api.wait_for_status(&buyer.token, &order, "paid").await;
    top_up_until(api, &buyer.token, |o| {
        o["paymentMethods"].as_array().is_some_and(|m| m.len() == 1)
    })
    .await;
    let methods = api
        .get("", &format!("/sandbox/api/payment-methods?orderId={order}"))
        .await;
    let method = methods.body[0]["id"].as_str().expect("pm").to_owned();
    let slow = api
        .post(
            "",
            &format!("/sandbox/api/payment-methods/{method}/behaviour"),
            &json!({"next": "slow"}),
            None,
        )
        .await;
    assert_eq!(slow.status, 200, "{slow:?}");
    let rule = json!({"enabled": true, "threshold": "10000", "planId": "credits_card_500", "maxPerMonth": 50});
    let request = api
        .client
        .put(api.url("/api/auto-top-up"))
        .bearer_auth(&buyer.token)
        .json(&rule);
    let set = api.send(request).await;
    assert_eq!(set.status, 200, "{set:?}");

    let apis = cluster.apis();
    let outcomes = spend_at_once(&apis, &cluster.api_key, &buyer.user_id).await;
    assert_spent_exactly_what_was_there(
        &apis[1],
        &cluster.api_key,
        &buyer.user_id,
        50_000,
        &outcomes,
    )
    .await;
    let charging = top_up_until(api, &buyer.token, |o| statuses(o) == ["charging"]).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let still = top_up_until(api, &buyer.token, |_| true).await;
    assert_eq!(statuses(&still), ["charging"], "one top-up: {still}");
    let top_up_order = charging["history"][0]["orderId"].as_str().expect("order");
    let payment = api.sandbox_payment(top_up_order).await;
    let intent = payment["id"].as_str().expect("pi");
    let settled = api
        .post(
            "",
            &format!("/sandbox/api/payments/{intent}/settle"),
            &json!({"outcome": "succeed"}),
            None,
        )
        .await;
    assert_eq!(settled.status, 200, "{settled:?}");
    top_up_until(api, &buyer.token, |o| statuses(o) == ["succeeded"]).await;
    let balance = api.balance(&buyer.token, None).await;
    assert_eq!(
        balance, 50_000,
        "the pack granted once, after the whole balance was spent"
    );
    assert_ledger_explains_balance(&api.ledger(&buyer.token, None).await, balance);
    println!(
        "{} spends across {INSTANCES} instances; one top-up",
        outcomes.len()
    );
}

/// The statuses of an automatic top-up overview's history, newest first.
fn statuses(overview: &serde_json::Value) -> Vec<&str> {
    overview["history"]
        .as_array()
        .map(|h| h.iter().filter_map(|t| t["status"].as_str()).collect())
        .unwrap_or_default()
}

/// Poll `GET /api/auto-top-up` until `done` holds (at most 20 s).
async fn top_up_until(
    api: &Api,
    token: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = None;
    for _ in 0..200 {
        let reply = api.get(token, "/api/auto-top-up").await;
        if reply.status == 200 && done(&reply.body) {
            return reply.body;
        }
        last = Some(reply);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("automatic top-up never got there: {last:?}");
}
