//! The reliability suite (issue 7): hostile input, duplicate and concurrent delivery, several
//! instances on one PostgreSQL, a `kill -9` under load, and a database outage.
//!
//! The fast parts run in every `cargo test` against the in-process app on SQLite:
//! [`hostile`] (forged, stale, replayed and tampered webhooks, another user's order ids,
//! oversized bodies, malformed JSON), [`hostile_subscriptions`] (subscriptions activated for
//! what was not sold, and renewals at another price, sent by every subscription provider's
//! simulator itself) and [`duplicates`] (every provider's webhook delivered again five times at
//! once; 64 clients spending one account).
//!
//! The slow parts start real `tally serve` processes on PostgreSQL and run only with
//! `TALLY_RELIABILITY=1` (they print a note and pass otherwise, in CI too, where
//! `.ci/reliability` runs them): [`several_instances`], [`switch_claims`] (one plan switch at a
//! time), [`crash`] and [`outage`], on the machinery of [`cluster`]. `just reliability` runs
//! everything, including the schemathesis run against the OpenAPI document.

pub(crate) mod api;
pub(crate) mod cluster;
mod crash;
mod duplicates;
mod hostile;
mod hostile_subscriptions;
mod outage;
mod several_instances;
mod signed;
mod switch_claims;

use application::accounts::Role;
use tests::{TestApp, spawn_app_with};

use self::api::{Account, Api, PASSWORD};

/// An in-process app with an administrator's service API key and a signed-in buyer.
struct Shop {
    app: TestApp,
    api: Api,
    api_key: String,
    buyer: Account,
}

/// Start the app, create an administrator in its database (as `tally admin create-user --admin`
/// does), and make a service API key and a buyer.
async fn open_shop() -> Shop {
    let mut settings = None;
    let app = spawn_app_with(|s| settings = Some(s.clone())).await;
    let settings = settings.expect("settings");
    let store = bootstrap::app::connect_store(&settings)
        .await
        .expect("store");
    bootstrap::app::create_user(&store, "admin@example.com", PASSWORD.into(), Role::Admin)
        .await
        .expect("admin");
    let api = Api::new(&app.address);
    let admin = api.login("admin@example.com").await;
    let api_key = api.create_api_key(&admin.token).await;
    let buyer = api.register("buyer@example.com").await;
    Shop {
        app,
        api,
        api_key,
        buyer,
    }
}
