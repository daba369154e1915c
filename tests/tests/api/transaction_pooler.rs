//! Tally behind a transaction pooler, as on a managed PostgreSQL's pooled connection string: a
//! real PgBouncer with `pool_mode = transaction` and two server connections per database
//! (`.ci/start-pgbouncer`, whose URL is `TEST_PGBOUNCER_URL`) in front of the PostgreSQL of
//! `TEST_DATABASE_URL` (a role with `CREATEDB`: each test creates and drops its own database,
//! which the pooler forwards by name).
//!
//! The app is configured as an operator would: `DATABASE_URL` the pooler,
//! `DATABASE_DIRECT_URL` the server itself (migrations run there), and
//! `DATABASE_PREPARED_STATEMENTS=false`. Without `TEST_PGBOUNCER_URL` the tests print a note
//! and pass, unless `CI=true`, where they fail: `.ci/run` starts the pooler.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use bootstrap::settings::Settings;
use serde_json::Value;
use tests::{TestApp, config_dir, spawn_app_with, spawn_app_with_admin};

use crate::reliability::api::{Api, assert_ledger_explains_balance};
use crate::reliability::cluster::Database;

/// Sign-ups at once: the most one client address may make in a burst (`[signup]`).
const SIGN_UPS: usize = 5;
/// Clients spending one account at once, and how many times each spends.
const CLIENTS: usize = 24;
const SPENDS_PER_CLIENT: usize = 6;
/// What one use of the spent feature costs (`config/credits.toml`), and what the bought pack
/// grants (`credits_card_500`), in hundredths.
const FEATURE: &str = "image";
const FEATURE_COST_HUNDREDTHS: i64 = 500;
const PACK_HUNDREDTHS: i64 = 50_000;
/// Named statements put on the pooler's server connections, as other clients leave them.
const LEFT_BEHIND_STATEMENTS: u32 = 64;

/// `TEST_PGBOUNCER_URL` and `TEST_DATABASE_URL`, or `None` (skip) without a pooler.
///
/// # Panics
/// When `CI=true` and either is unset: CI must run these tests.
fn pooler_and_server(test: &str) -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (var("TEST_PGBOUNCER_URL"), var("TEST_DATABASE_URL")) {
        (Some(pooler), Some(server)) => Some((pooler, server)),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but TEST_PGBOUNCER_URL or TEST_DATABASE_URL is unset: \
                 `.ci/run` starts PgBouncer with .ci/start-pgbouncer"
            );
            println!(
                "{test}: skipped (needs TEST_PGBOUNCER_URL, from .ci/start-pgbouncer, and \
                 TEST_DATABASE_URL)"
            );
            None
        }
    }
}

/// `url` naming the database `database` instead of its own.
fn on_database(url: &str, database: &str) -> String {
    let base = url.split('?').next().unwrap_or(url);
    let cut = base.rfind('/').expect("a database URL");
    format!("{}/{database}", &base[..cut])
}

/// The test's own database, and its URL through the pooler.
fn database_behind_pooler(pooler: &str, server: &str, test: &str) -> (Database, String) {
    let database = Database::create(server, test);
    let name = database.url.rsplit('/').next().expect("a name").to_owned();
    let pooled = on_database(pooler, &name);
    (database, pooled)
}

/// The shipped settings with the database settings an operator behind a pooler writes.
fn pooled_settings(pooled: &str, direct: &str, prepared_statements: &str) -> Settings {
    let env: BTreeMap<String, String> = [
        ("BIND_ADDR", "127.0.0.1:0"),
        ("DATABASE_URL", pooled),
        ("DATABASE_DIRECT_URL", direct),
        ("DATABASE_PREPARED_STATEMENTS", prepared_statements),
        ("MIGRATE_ON_START", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    bootstrap::settings::load(&config_dir(), &env).expect("settings load")
}

/// Use the database of `from` in the test app's settings.
fn use_database(settings: &mut Settings, from: &Settings) {
    settings.database = from.database.clone();
    settings.migrate_on_start = from.migrate_on_start;
}

/// `psql` on `url`, within a minute; panics with its output when it fails.
fn psql(url: &str, sql: &str) -> String {
    let output = Command::new("timeout")
        .args(["60", "psql", url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .stdin(Stdio::null())
        .output()
        .expect("psql runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "psql {sql}: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

/// Leave named statements `sqlx_s_1` … on both of the pooler's server connections of the
/// database, as clients that prepared them leave them: two sessions at once, each holding a
/// server connection in its transaction, so that both are used.
fn leave_statements_behind(pooled: &str) {
    let prepares: String = (1..=LEFT_BEHIND_STATEMENTS)
        .map(|n| format!("PREPARE sqlx_s_{n} AS SELECT {n};"))
        .collect();
    let sql = format!("BEGIN; {prepares} SELECT pg_sleep(1); COMMIT;");
    let sessions: Vec<_> = (0..2)
        .map(|_| {
            let (pooled, sql) = (pooled.to_owned(), sql.clone());
            std::thread::spawn(move || psql(&pooled, &sql))
        })
        .collect();
    for session in sessions {
        session.join().expect("psql session");
    }
    // A new client sees what another one prepared: the pooler shares server connections.
    let seen = psql(
        pooled,
        "SELECT count(*) FROM pg_prepared_statements WHERE name = 'sqlx_s_1'",
    );
    assert_eq!(
        seen.trim(),
        "1",
        "the pooler does not share server connections"
    );
}

async fn readyz(app: &TestApp) -> u16 {
    let response = app
        .client
        .get(app.url("/readyz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("readyz answers");
    response.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readiness_fails_behind_a_transaction_pooler_while_queries_fail_and_holds_with_prepared_statements_off()
 {
    let test = "pooler_readiness";
    let Some((pooler, server)) = pooler_and_server(test) else {
        return;
    };
    let (database, pooled) = database_behind_pooler(&pooler, &server, test);
    leave_statements_behind(&pooled);
    let kept = pooled_settings(&pooled, &database.url, "true");
    let app = spawn_app_with(|s| use_database(s, &kept)).await;
    assert_eq!(
        readyz(&app).await,
        503,
        "named statements collide on the pooler's shared server connections, so every query \
         fails: not ready"
    );
    let healthz = app.client.get(app.url("/healthz")).send().await;
    assert_eq!(
        healthz.expect("healthz").status(),
        200,
        "alive all the same"
    );
    drop(app);
    let off = pooled_settings(&pooled, &database.url, "false");
    let app = spawn_app_with(|s| use_database(s, &off)).await;
    for _ in 0..10 {
        assert_eq!(
            readyz(&app).await,
            200,
            "unnamed statements collide with nothing"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_ups_a_purchase_and_concurrent_spends_through_a_transaction_pooler_answer_no_5xx_and_leave_the_exact_balance()
 {
    let test = "pooler_spends";
    let Some((pooler, server)) = pooler_and_server(test) else {
        return;
    };
    let (database, pooled) = database_behind_pooler(&pooler, &server, test);
    // What the clients of a busy pooler leave on its server connections collides with nothing.
    leave_statements_behind(&pooled);
    let off = pooled_settings(&pooled, &database.url, "false");
    let (app, admin) = spawn_app_with_admin(|s| use_database(s, &off)).await;
    let api = Api::new(&app.address);
    let api_key = api.create_api_key(&admin).await;
    let sign_ups: Vec<_> = (0..SIGN_UPS)
        .map(|n| {
            let api = api.clone();
            tokio::spawn(async move { api.register(&format!("buyer{n}@example.com")).await })
        })
        .collect();
    let mut buyers = Vec::new();
    for sign_up in sign_ups {
        buyers.push(sign_up.await.expect("sign-up"));
    }
    let buyer = &buyers[0];
    let start = api.balance(&buyer.token, None).await;
    api.buy_and_pay(&buyer.token, "credits_card_500", "card_gateway")
        .await;
    let bought = api.balance(&buyer.token, None).await;
    assert_eq!(bought, start + PACK_HUNDREDTHS, "the pack was granted once");
    let spent = spend_at_once(&api, &api_key, &buyer.user_id).await;
    let allowed = usize::try_from(bought / FEATURE_COST_HUNDREDTHS).expect("positive");
    assert_eq!(
        spent,
        allowed.min(CLIENTS * SPENDS_PER_CLIENT),
        "spends that went through"
    );
    let balance = api.balance(&buyer.token, None).await;
    let spent_hundredths = FEATURE_COST_HUNDREDTHS * i64::try_from(spent).expect("count");
    assert_eq!(balance, bought - spent_hundredths, "the exact balance");
    let ledger: Vec<Value> = api.ledger(&buyer.token, None).await;
    assert_ledger_explains_balance(&ledger, balance);
    for other in &buyers[1..] {
        assert_eq!(
            api.balance(&other.token, None).await,
            start,
            "{}",
            other.user_id
        );
    }
}

/// `CLIENTS` clients spending `FEATURE` for `user_id` at once, `SPENDS_PER_CLIENT` times each;
/// every answer must be 201 (spent) or 402 (not enough credits), never a 5xx. Returns how many
/// were spent.
async fn spend_at_once(api: &Api, api_key: &str, user_id: &str) -> usize {
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (api, api_key, user_id) = (api.clone(), api_key.to_owned(), user_id.to_owned());
            tokio::spawn(async move {
                let mut spent = 0;
                for n in 0..SPENDS_PER_CLIENT {
                    let key = format!("pooler-{client}-{n}");
                    let reply = api
                        .try_consume(&api_key, &user_id, FEATURE, &key)
                        .await
                        .unwrap_or_else(|e| panic!("spend {key}: {e}"));
                    match reply.status {
                        201 => spent += 1,
                        402 => assert!(reply.is_problem("insufficient_credits"), "{reply:?}"),
                        _ => panic!("spend {key}: {reply:?}"),
                    }
                }
                spent
            })
        })
        .collect();
    let mut spent = 0;
    for client in clients {
        spent += client.await.expect("client");
    }
    spent
}
