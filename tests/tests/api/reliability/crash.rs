//! `kill -9` in the middle of load (slow: only with `TALLY_RELIABILITY=1`): one of three
//! instances on PostgreSQL under spending and webhook load, and the single instance of the
//! embedded default (SQLite, here with `SQLITE_SYNCHRONOUS=normal`) under spending load. After a
//! restart: every spend that was answered 201 is in the ledger (its key replays the same
//! transaction), every retried spend applied at most once, every payment the provider made ends
//! in exactly one grant once the provider retries its webhook, nothing is half applied, and the
//! ledger explains the balance (invariants 1 to 5).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::api::{Account, Api, assert_ledger_explains_balance, consumption_ids, types};
use super::cluster::{
    Cluster, ConfigDir, Instance, TALLY_TOML, Tally, admin_key_and_buyer, enabled, free_port,
    log_dir,
};
use super::duplicates::{FEATURE, FEATURE_COST_HUNDREDTHS, Spend, spend};

/// Concurrent spenders against the victim.
const SPENDERS: usize = 12;
/// Concurrent buyers paying in the provider's sandbox (webhooks go to the victim).
const PAYERS: usize = 3;
/// Orders prepared for the webhook load, per instance (each instance allows a burst of ten
/// initiations per client).
const ORDERS_PER_INSTANCE: usize = 6;
/// Load before the kill, and after it before the load stops.
const LOAD_BEFORE_KILL: Duration = Duration::from_millis(1500);
const LOAD_AFTER_KILL: Duration = Duration::from_millis(500);
/// Between two payments of one payer: the orders last past the kill.
const PAY_PAUSE: Duration = Duration::from_millis(250);
/// The embedded default with its faster durability setting: a process crash must lose nothing.
const SQLITE_TOML: &str = "\
[database]
sqliteSynchronous = \"normal\"

[reconciler]
enabled = false
";
/// What a credits_card_500 order grants, in hundredths.
const PACK_HUNDREDTHS: i64 = 50_000;

/// The first answer a spend got during the load.
#[derive(Debug, Clone)]
enum First {
    Answered(Spend),
    /// 503, or no answer at all (the connection was cut or refused).
    Unanswered(String),
}

/// What the load did.
#[derive(Default)]
struct Record {
    spends: Mutex<Vec<(String, First)>>,
    paid_in_sandbox: Mutex<Vec<String>>,
}

/// Spenders (and payers) running until stopped.
struct Load {
    record: Arc<Record>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

impl Load {
    /// `SPENDERS` workers spending on `api` for `user`, each with fresh keys.
    fn spend(api: &Api, api_key: &str, user: &Account) -> Self {
        let record = Arc::new(Record::default());
        let stop = Arc::new(AtomicBool::new(false));
        let workers = (0..SPENDERS)
            .map(|worker| {
                let (api, key, user) = (api.clone(), api_key.to_owned(), user.user_id.clone());
                let (record, stop) = (record.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let key_n = format!("crash-{worker}-{n}");
                        n += 1;
                        let first = spend_once(&api, &key, &user, &key_n).await;
                        lock(&record.spends).push((key_n, first));
                    }
                })
            })
            .collect();
        Self {
            record,
            stop,
            workers,
        }
    }

    /// `PAYERS` buyers paying `orders` in the sandbox behind `api`, one every `PAY_PAUSE`.
    fn pay(&mut self, api: &Api, orders: Vec<String>) {
        let queue = Arc::new(Mutex::new(orders));
        for _ in 0..PAYERS {
            let (api, queue) = (api.clone(), queue.clone());
            let (record, stop) = (self.record.clone(), self.stop.clone());
            self.workers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Some(order) = lock(&queue).pop() else {
                        return;
                    };
                    // The sandbox marks the payment paid, then posts the webhook (to the victim).
                    api.pay(&order).await;
                    lock(&record.paid_in_sandbox).push(order);
                    tokio::time::sleep(PAY_PAUSE).await;
                }
            }));
        }
    }

    /// Stop every worker; the spends and the orders paid in the sandbox.
    async fn finish(self) -> (Vec<(String, First)>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for worker in self.workers {
            worker.await.expect("load worker");
        }
        let spends = lock(&self.record.spends).clone();
        let paid = lock(&self.record.paid_in_sandbox).clone();
        (spends, paid)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One spend attempt during the load, without retrying.
async fn spend_once(api: &Api, api_key: &str, user_id: &str, key: &str) -> First {
    match api.try_consume(api_key, user_id, FEATURE, key).await {
        Ok(reply) if reply.status == 201 => First::Answered(Spend::Spent(
            reply.body["transactionId"].as_i64().expect("id"),
        )),
        Ok(reply) if reply.status == 402 => First::Answered(Spend::Refused),
        Ok(reply) if reply.status == 503 => First::Unanswered("503".to_owned()),
        Ok(reply) => panic!("spend {key} during the crash: {reply:?}"),
        Err(error) => {
            // The instance is down: do not spin.
            tokio::time::sleep(Duration::from_millis(20)).await;
            First::Unanswered(error)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_killed_mid_load_loses_no_acknowledged_request_and_leaves_nothing_half_applied()
{
    let Some(_serial) = enabled("crash").await else {
        return;
    };
    let mut cluster = Cluster::start("crash", 3, TALLY_TOML).await;
    let (api, buyer) = (cluster.api.clone(), cluster.buyer.clone());
    let first_order = cluster.buy("credits_mor_b_10000", "mor_b").await;
    let start = api.balance(&buyer.token, None).await;
    let mut orders = Vec::new();
    for instance in cluster.apis() {
        for _ in 0..ORDERS_PER_INSTANCE {
            let plan = ("credits_card_500", "card_gateway");
            orders.push(instance.initiate(&buyer.token, plan.0, plan.1).await);
        }
    }
    let victim = cluster.instances[1].api();
    cluster.balancer.route_to(vec![victim.base.clone()]);

    let mut load = Load::spend(&victim, &cluster.api_key, &buyer);
    load.pay(&api, orders.clone());
    tokio::time::sleep(LOAD_BEFORE_KILL).await;
    cluster.instances[1].kill9();
    let killed_at = Instant::now();
    tokio::time::sleep(LOAD_AFTER_KILL).await;
    let (spends, paid_in_sandbox) = load.finish().await;
    cluster.instances[1].restart().await;
    let restarted_in = killed_at.elapsed();
    cluster
        .balancer
        .route_to(cluster.apis().into_iter().map(|a| a.base).collect());

    let spent = settle_spends(&victim, &cluster.api_key, &buyer.user_id, &spends).await;
    // The provider retries every webhook it could not deliver.
    for order in &paid_in_sandbox {
        let payment = api.sandbox_payment(order).await;
        let id = payment["id"].as_str().expect("payment");
        api.sandbox_action(id, "redeliver", &json!({"amountMinor": 1}))
            .await;
        api.wait_for_status(&buyer.token, order, "paid").await;
    }
    for order in orders.iter().filter(|o| !paid_in_sandbox.contains(o)) {
        let status = api.order_status(&buyer.token, order).await;
        assert_eq!(status, "pending", "{order} was never paid");
    }

    let balance = api.balance(&buyer.token, None).await;
    let ledger = api.ledger(&buyer.token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_eq!(
        consumption_ids(&ledger),
        spent,
        "exactly the applied spends"
    );
    let mut paid: Vec<&str> = paid_in_sandbox.iter().map(String::as_str).collect();
    paid.push(&first_order);
    assert_grants_are_exactly(&ledger, paid);
    let expected = start + PACK_HUNDREDTHS * count(paid_in_sandbox.len())
        - FEATURE_COST_HUNDREDTHS * count(spent.len());
    assert_eq!(balance, expected);
    let cut = cut_in_flight(&spends);
    let lost_webhooks = lost_deliveries(&api).await;
    println!(
        "crash: {} spends ({cut} cut in flight; {} applied), {} of {} orders paid in the \
         sandbox, {lost_webhooks} webhook deliveries lost, restarted in {restarted_in:?}; \
         ledger {:?}",
        spends.len(),
        spent.len(),
        paid_in_sandbox.len(),
        orders.len(),
        types(&ledger)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sqlite_instance_killed_mid_spending_loses_no_acknowledged_spend() {
    let Some(_serial) = enabled("crash_sqlite").await else {
        return;
    };
    let data = tempfile::tempdir().expect("data dir");
    let database_url = format!("sqlite://{}/tally.db", data.path().display());
    let config = ConfigDir::new(SQLITE_TOML);
    let port = free_port();
    let mut tally = Tally::start(Instance {
        name: "tally-sqlite".to_owned(),
        port,
        database_url: database_url.clone(),
        base_url: format!("http://127.0.0.1:{port}"),
        migrate: true,
        config: config.path().to_owned(),
        logs: log_dir("crash_sqlite"),
    })
    .await;
    let api = tally.api();
    let (api_key, buyer) = admin_key_and_buyer(&api, config.path(), &database_url).await;
    let order = api
        .buy_and_pay(&buyer.token, "credits_mor_b_10000", "mor_b")
        .await;
    let start = api.balance(&buyer.token, None).await;

    let load = Load::spend(&api, &api_key, &buyer);
    tokio::time::sleep(LOAD_BEFORE_KILL).await;
    tally.kill9();
    tokio::time::sleep(LOAD_AFTER_KILL).await;
    let (spends, _) = load.finish().await;
    tally.restart().await;

    let spent = settle_spends(&api, &api_key, &buyer.user_id, &spends).await;
    let balance = api.balance(&buyer.token, None).await;
    let ledger = api.ledger(&buyer.token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    assert_eq!(
        consumption_ids(&ledger),
        spent,
        "exactly the applied spends"
    );
    assert_grants_are_exactly(&ledger, vec![order.as_str()]);
    let expected = start - FEATURE_COST_HUNDREDTHS * count(spent.len());
    assert_eq!(balance, expected);
    let cut = cut_in_flight(&spends);
    println!(
        "crash on SQLite: {} spends ({cut} cut in flight; {} applied); ledger {:?}",
        spends.len(),
        spent.len(),
        types(&ledger)
    );
}

/// Retry every spend with its own key and check it against its first answer; returns the
/// transaction ids of every applied spend.
async fn settle_spends(
    api: &Api,
    api_key: &str,
    user_id: &str,
    spends: &[(String, First)],
) -> BTreeSet<i64> {
    let mut spent = BTreeSet::new();
    for (key, first) in spends {
        let settled = spend(api, api_key, user_id, key).await;
        match first {
            // A refusal for want of credits stores nothing, so its retry is decided anew: it
            // may spend once the payers' webhooks have granted more (and then exactly once).
            First::Answered(Spend::Refused) => {}
            First::Answered(answer) => {
                assert_eq!(&settled, answer, "{key}: a retry returns the first answer");
            }
            First::Unanswered(_) => {}
        }
        if let Spend::Spent(id) = settled {
            assert!(spent.insert(id), "{key}: transaction {id} answered twice");
        }
    }
    spent
}

/// Purchase grants name exactly the `paid` orders, once each.
fn assert_grants_are_exactly(ledger: &[Value], mut paid: Vec<&str>) {
    let mut granted: BTreeMap<&str, usize> = BTreeMap::new();
    for grant in ledger.iter().filter(|t| t["type"] == "purchase_grant") {
        let order = grant["orderId"].as_str().expect("order");
        *granted.entry(order).or_insert(0) += 1;
    }
    paid.sort_unstable();
    let orders: Vec<&str> = granted.keys().copied().collect();
    assert_eq!(orders, paid, "grants are the paid orders");
    assert!(
        granted.values().all(|n| *n == 1),
        "one grant per order: {granted:?}"
    );
}

/// How many spends the kill cut while in flight (not refused afterwards); at least one.
fn cut_in_flight(spends: &[(String, First)]) -> usize {
    let cut = spends
        .iter()
        .filter(|(_, first)| {
            matches!(first, First::Unanswered(why) if why != "503" && !why.contains("Connection refused"))
        })
        .count();
    assert!(cut > 0, "the kill cut spends in flight");
    cut
}

/// Webhook deliveries the sandbox made that got no 2xx (the victim was down).
async fn lost_deliveries(api: &Api) -> usize {
    let reply = api
        .send(api.client.get(api.url("/sandbox/api/deliveries")))
        .await;
    reply.body.as_array().map_or(0, |all| {
        all.iter()
            .filter(|d| !matches!(d["status"].as_u64(), Some(200..=299)))
            .count()
    })
}

fn count(n: usize) -> i64 {
    i64::try_from(n).expect("a count")
}
