//! Sign-up credits: once per identity, whatever became of the account that had them, and the
//! whole service's cap per UTC day, exact under concurrent sign-ups on several instances.

use std::num::NonZeroU32;

use application::accounts::{Email, Role};
use application::ports::{CreditLedger, NewHostUser, NewUser, SignupGrant, UserRepository};
use application::sign_up::SignupIdentity;
use store::SeaOrmStore;
use tokio::task::JoinSet;

use crate::support::{TestStore, c, contract_tests, t, uid};

const DAY_MS: i64 = 86_400_000;

fn grant(daily_cap: u32) -> SignupGrant {
    SignupGrant {
        amount: c(700),
        expires_after_days: None,
        daily_cap: NonZeroU32::new(daily_cap).unwrap(),
    }
}

fn identity(email: &str) -> SignupIdentity {
    SignupIdentity::of_email(&Email::parse(email).unwrap())
}

fn new_user(id: &str, email: &str, at_ms: i64, identity: Option<SignupIdentity>) -> NewUser {
    NewUser {
        id: uid(id),
        email: Email::parse(email).unwrap(),
        password_hash: None,
        role: Role::User,
        created_at: t(at_ms),
        signup_identity: identity,
    }
}

async fn sign_up_credits_are_given_once_per_identity(store: &TestStore) {
    let granting = SeaOrmStore::clone(store).with_signup_grant(Some(grant(100)));
    let first = new_user(
        "usr_a",
        "ada@example.com",
        DAY_MS,
        Some(identity("ada@example.com")),
    );
    granting.create_user(&first).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&first.id))
            .await
            .unwrap(),
        c(700)
    );
    // Another account of the same identity (a plus tag, another case): no credits.
    let again = new_user(
        "usr_b",
        "ADA+2@example.com",
        DAY_MS,
        Some(identity("ada+2@example.com")),
    );
    granting.create_user(&again).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&again.id))
            .await
            .unwrap(),
        c(0)
    );
    // A host user re-appearing under another subject with the same verified address.
    let host = NewHostUser {
        issuer: "https://host.example".into(),
        subject: "sub-9".into(),
        created_at: t(DAY_MS),
        signup_identity: Some(identity("ada@example.com")),
        contact: Default::default(),
    };
    let host = granting.find_or_create_host_user(&host).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&host.id))
            .await
            .unwrap(),
        c(0)
    );
    // No identity, nothing given; and it is not counted against the day.
    let plain = new_user("usr_c", "cy@example.com", DAY_MS, None);
    granting.create_user(&plain).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&plain.id))
            .await
            .unwrap(),
        c(0)
    );
    assert_eq!(
        store
            .raw_i64("SELECT granted FROM signup_grant_days WHERE day = 1")
            .await,
        1
    );
    // The claim outlives its account: the row names a user but holds no reference to it.
    store
        .raw(
            "INSERT INTO signup_grant_identities (identity, user_id, granted_at) \
             VALUES ('email:gone@example.com', 'usr_deleted', 1)",
        )
        .await;
    let returning = new_user(
        "usr_d",
        "gone@example.com",
        DAY_MS,
        Some(identity("gone@example.com")),
    );
    granting.create_user(&returning).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&returning.id))
            .await
            .unwrap(),
        c(0)
    );
}

async fn past_the_days_cap_a_user_is_created_without_credits_and_counted(store: &TestStore) {
    let granting = SeaOrmStore::clone(store).with_signup_grant(Some(grant(1)));
    let at = 3 * DAY_MS + 5;
    let first = new_user(
        "usr_a",
        "a@example.com",
        at,
        Some(identity("a@example.com")),
    );
    let second = new_user(
        "usr_b",
        "b@example.com",
        at + 1,
        Some(identity("b@example.com")),
    );
    granting.create_user(&first).await.unwrap();
    granting.create_user(&second).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&first.id))
            .await
            .unwrap(),
        c(700)
    );
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&second.id))
            .await
            .unwrap(),
        c(0)
    );
    let day = "SELECT granted * 1000 + capped FROM signup_grant_days WHERE day = 3";
    assert_eq!(store.raw_i64(day).await, 1_001);
    // The refused identity is not used up: the next day it is given its credits.
    let next_day = new_user(
        "usr_c",
        "B+later@example.com",
        4 * DAY_MS,
        Some(identity("b@example.com")),
    );
    granting.create_user(&next_day).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&next_day.id))
            .await
            .unwrap(),
        c(700)
    );
}

/// Twelve sign-ups at once, on two instances, with a cap of five: exactly five are given
/// credits and seven counted as capped.
async fn the_days_cap_holds_under_concurrent_sign_ups_on_two_instances(store: &TestStore) {
    let other = SeaOrmStore::connect(&store.settings, crate::support::events())
        .await
        .unwrap();
    let instances = [
        SeaOrmStore::clone(store).with_signup_grant(Some(grant(5))),
        other.with_signup_grant(Some(grant(5))),
    ];
    let mut tasks = JoinSet::new();
    for i in 0..12 {
        let instance = instances[i % 2].clone();
        let email = format!("u{i}@example.com");
        let new = new_user(
            &format!("usr_{i}"),
            &email,
            DAY_MS + 7,
            Some(identity(&email)),
        );
        tasks.spawn(async move {
            instance.create_user(&new).await.unwrap();
            instance
                .balance(&domain::AccountId::personal(&new.id))
                .await
                .unwrap()
        });
    }
    let mut given = 0;
    while let Some(balance) = tasks.join_next().await {
        if balance.expect("task") == c(700) {
            given += 1;
        }
    }
    assert_eq!(given, 5);
    let day = "SELECT granted * 1000 + capped FROM signup_grant_days WHERE day = 1";
    assert_eq!(store.raw_i64(day).await, 5_007);
    let claimed = "SELECT COUNT(*) FROM signup_grant_identities";
    assert_eq!(store.raw_i64(claimed).await, 5);
}

contract_tests!(
    sign_up_credits_are_given_once_per_identity,
    past_the_days_cap_a_user_is_created_without_credits_and_counted,
);

/// Under concurrency.
mod concurrent {
    use crate::support::concurrency_tests;

    concurrency_tests!(the_days_cap_holds_under_concurrent_sign_ups_on_two_instances);

    use super::the_days_cap_holds_under_concurrent_sign_ups_on_two_instances;
}
