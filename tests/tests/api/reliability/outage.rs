//! PostgreSQL stopped under load and started again (slow: only with `TALLY_RELIABILITY=1`), on a
//! throwaway cluster of the test's own. While it is down every request that needs it is
//! answered at once with a 503 `service_unavailable` problem (never a 500, never a hang) and
//! readiness fails while liveness holds; when it is back the same process serves again by
//! itself; retried spends and the provider's retried webhook apply exactly once.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinHandle;

use super::api::{Api, Reply, assert_ledger_explains_balance, consumption_ids, types};
use super::cluster::{
    ConfigDir, Instance, PgCluster, Tally, admin_key_and_buyer, enabled, free_port,
};
use super::duplicates::{FEATURE, FEATURE_COST_HUNDREDTHS, Spend, spend};

/// A short wait for a pooled connection, so that an outage is answered within about a second.
const OUTAGE_TOML: &str = "\
[database]
maxConnections = 8
acquireTimeoutMs = 1000
retryAttempts = 3

[reconciler]
enabled = false
";
const SPENDERS: usize = 8;
/// Between two spends of one spender: the load stays well below what the balance buys.
const SPEND_PACE: Duration = Duration::from_millis(5);
const LOAD_BEFORE_OUTAGE: Duration = Duration::from_millis(1000);
const OUTAGE: Duration = Duration::from_secs(4);
/// The longest any answer may take while the database is down (acquire timeout, retries, slack).
const MAX_ANSWER_DURING_OUTAGE: Duration = Duration::from_secs(8);
/// How soon after the database is back the service must serve again.
const MAX_RECOVERY: Duration = Duration::from_secs(30);
const PACK_HUNDREDTHS: i64 = 50_000;

/// The first answer of one spend, and how long it took.
#[derive(Debug, Clone)]
struct Attempt {
    key: String,
    reply: Result<Reply, String>,
    took: Duration,
}

/// `SPENDERS` workers spending with fresh keys until `stop`, logging every first answer.
/// Start the spenders: each tries one spend every [`SPEND_PACE`], at most `budget` times, so
/// that however fast the service is, the balance outlasts the load and the recovery probes
/// (a 402 after the outage would say nothing about recovery).
fn start_spenders(
    api: &Api,
    api_key: &str,
    user_id: &str,
    budget: usize,
    log: &Arc<Mutex<Vec<Attempt>>>,
    stop: &Arc<AtomicBool>,
) -> Vec<JoinHandle<()>> {
    (0..SPENDERS)
        .map(|worker| {
            let (api, api_key, user_id) = (api.clone(), api_key.to_owned(), user_id.to_owned());
            let (log, stop) = (log.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    if n >= budget {
                        tokio::time::sleep(SPEND_PACE).await;
                        continue;
                    }
                    let key = format!("outage-{worker}-{n}");
                    n += 1;
                    let started = Instant::now();
                    let reply = api.try_consume(&api_key, &user_id, FEATURE, &key).await;
                    let took = started.elapsed();
                    let unavailable = matches!(&reply, Ok(r) if r.status == 503);
                    let attempt = Attempt { key, reply, took };
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(attempt);
                    if unavailable {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    } else {
                        tokio::time::sleep(SPEND_PACE).await;
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_under_load_gets_503_problems_and_heals_by_itself_losing_and_doubling_nothing()
 {
    let Some(_serial) = enabled("outage").await else {
        return;
    };
    let pg = PgCluster::start();
    let config = ConfigDir::new(OUTAGE_TOML);
    let port = free_port();
    let logs =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/reliability/outage");
    std::fs::create_dir_all(&logs).expect("logs");
    let tally = Tally::start(Instance {
        name: "tally".to_owned(),
        port,
        database_url: pg.url.clone(),
        base_url: format!("http://127.0.0.1:{port}"),
        migrate: true,
        config: config.path().to_owned(),
        logs,
    })
    .await;
    let api = tally.api();
    let (api_key, buyer) = admin_key_and_buyer(&api, config.path(), &pg.url).await;
    api.buy_and_pay(&buyer.token, "credits_mor_b_10000", "mor_b")
        .await;
    let start = api.balance(&buyer.token, None).await;
    let during = api
        .initiate(&buyer.token, "credits_card_500", "card_gateway")
        .await;

    let log = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    // Leave at least a hundred spends' worth for the probes and the spends after recovery.
    let allowed = usize::try_from(start / FEATURE_COST_HUNDREDTHS).expect("positive");
    let budget = allowed.saturating_sub(100) / SPENDERS;
    let workers = start_spenders(&api, &api_key, &buyer.user_id, budget, &log, &stop);
    tokio::time::sleep(LOAD_BEFORE_OUTAGE).await;
    pg.stop_immediately();
    let down_at = Instant::now();
    assert_readiness_follows_the_database(&api, 503).await;
    // The provider's webhook for a payment made now cannot be stored: a 503, which it retries.
    api.pay(&during).await;
    tokio::time::sleep(OUTAGE.saturating_sub(down_at.elapsed())).await;
    let answered_down = log.lock().unwrap_or_else(PoisonError::into_inner).len();
    pg.start_server();
    let up_at = Instant::now();
    let (recovered_in, probes) = wait_until_serving(&api, &api_key, &buyer.user_id).await;
    assert_readiness_follows_the_database(&api, 200).await;
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("spender");
    }

    let attempts = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let unavailable = check_answers(&attempts);
    assert!(
        unavailable > 0,
        "the outage was seen: {answered_down} answers before it ended"
    );
    let spent = settle(&api, &api_key, &buyer.user_id, &attempts, &probes).await;
    let payment = api.sandbox_payment(&during).await;
    let id = payment["id"].as_str().expect("payment");
    let deliveries = api
        .send(api.client.get(api.url("/sandbox/api/deliveries")))
        .await;
    let refused: Vec<_> = deliveries
        .body
        .as_array()
        .expect("deliveries")
        .iter()
        .filter(|d| d["paymentId"] == id)
        .map(|d| d["status"].clone())
        .collect();
    assert_eq!(
        refused,
        vec![json!(503)],
        "the webhook during the outage: a 503 to retry"
    );
    api.sandbox_action(id, "redeliver", &json!({"amountMinor": 2}))
        .await;
    api.wait_for_status(&buyer.token, &during, "paid").await;

    let balance = api.balance(&buyer.token, None).await;
    let ledger = api.ledger(&buyer.token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_eq!(
        consumption_ids(&ledger),
        spent,
        "every applied spend once, no other"
    );
    let grants = ledger
        .iter()
        .filter(|t| t["type"] == "purchase_grant")
        .count();
    assert_eq!(grants, 2, "one grant per paid order: {:?}", types(&ledger));
    let spent_hundredths = FEATURE_COST_HUNDREDTHS * i64::try_from(spent.len()).expect("count");
    assert_eq!(balance, start + PACK_HUNDREDTHS - spent_hundredths);
    println!(
        "outage: {} spends, {unavailable} answered 503 while the database was down for \
         {:?}; serving again {recovered_in:?} after it came back; ledger {:?}",
        attempts.len(),
        up_at.duration_since(down_at),
        types(&ledger)
    );
}

/// `/readyz` reaches `status` within ten seconds; `/healthz` stays 200 throughout.
async fn assert_readiness_follows_the_database(api: &Api, status: u16) {
    let mut last = 0;
    for _ in 0..100 {
        let health = api.send(api.client.get(api.url("/healthz"))).await;
        assert_eq!(
            health.status, 200,
            "liveness does not depend on the database"
        );
        last = api.send(api.client.get(api.url("/readyz"))).await.status;
        if last == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/readyz never answered {status}: last {last}");
}

/// Spend with fresh keys until one succeeds; how long that took, and the keys used.
async fn wait_until_serving(api: &Api, api_key: &str, user_id: &str) -> (Duration, Vec<String>) {
    let started = Instant::now();
    let mut keys = Vec::new();
    while started.elapsed() < MAX_RECOVERY {
        let key = format!("outage-probe-{}", keys.len());
        keys.push(key.clone());
        if let Ok(reply) = api.try_consume(api_key, user_id, FEATURE, &key).await
            && reply.status == 201
        {
            return (started.elapsed(), keys);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not serving {MAX_RECOVERY:?} after the database came back");
}

/// Every answer is a 201, a 402 or a 503 `service_unavailable` problem, in bounded time, and
/// none is a 500 or a transport failure; returns how many were 503s.
fn check_answers(attempts: &[Attempt]) -> usize {
    let mut unavailable = 0;
    for attempt in attempts {
        let reply = attempt
            .reply
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: no answer: {e}", attempt.key));
        assert!(
            attempt.took <= MAX_ANSWER_DURING_OUTAGE,
            "{} took {:?}",
            attempt.key,
            attempt.took
        );
        match reply.status {
            201 | 402 => {}
            503 => {
                assert!(
                    reply.is_problem("service_unavailable"),
                    "{}: {reply:?}",
                    attempt.key
                );
                unavailable += 1;
            }
            _ => panic!("{}: {reply:?}", attempt.key),
        }
    }
    unavailable
}

/// Retry every spend with its key: a 201 replays the same transaction, a 503 now applies once.
async fn settle(
    api: &Api,
    api_key: &str,
    user_id: &str,
    attempts: &[Attempt],
    probes: &[String],
) -> BTreeSet<i64> {
    let mut spent = BTreeSet::new();
    for attempt in attempts {
        let settled = spend(api, api_key, user_id, &attempt.key).await;
        if let Ok(reply) = &attempt.reply
            && reply.status == 201
        {
            let first = reply.body["transactionId"].as_i64();
            assert_eq!(
                Some(settled.clone()),
                first.map(Spend::Spent),
                "{}",
                attempt.key
            );
        }
        if let Spend::Spent(id) = settled {
            assert!(spent.insert(id), "{}: transaction {id} twice", attempt.key);
        }
    }
    for key in probes {
        if let Spend::Spent(id) = spend(api, api_key, user_id, key).await {
            assert!(spent.insert(id), "{key}: transaction {id} twice");
        }
    }
    spent
}
