//! Users, sessions and API keys.

use application::accounts::{ApiKey, Email, PasswordHash, Role, Scope, TokenHash};
use application::ports::{ApiKeyRepository, NewUser, StoreError, UserRepository};

use crate::support::{TestStore, contract_tests, t, uid, user};

async fn users_are_created_found_and_a_taken_email_conflicts(store: &TestStore) {
    let new = NewUser {
        id: uid("u1"),
        email: Email::parse("Ada@Example.com").unwrap(),
        password_hash: Some(PasswordHash("$argon2id$x".into())),
        role: Role::Admin,
        created_at: t(5),
    };
    let created = store.create_user(&new).await.unwrap();
    assert_eq!(created.email.as_str(), "ada@example.com");
    let (found, hash) = store
        .find_user_by_email(&new.email)
        .await
        .unwrap()
        .expect("by email");
    assert_eq!(found, created);
    assert_eq!(hash, new.password_hash);
    assert_eq!(store.find_user(&uid("u1")).await.unwrap(), Some(created));
    assert_eq!(store.find_user(&uid("nobody")).await.unwrap(), None);
    let same_email = NewUser {
        id: uid("u2"),
        ..new.clone()
    };
    assert!(matches!(
        store.create_user(&same_email).await,
        Err(StoreError::Conflict(_))
    ));
    let same_id = NewUser {
        email: Email::parse("other@example.com").unwrap(),
        ..new
    };
    assert!(matches!(
        store.create_user(&same_id).await,
        Err(StoreError::Conflict(_))
    ));
}

async fn ensure_user_creates_once_and_keeps_the_existing_user(store: &TestStore) {
    let email = Email::parse("jwt-subject@placeholder.invalid").unwrap();
    let first = store
        .ensure_user(&uid("sub-1"), &email, t(7))
        .await
        .unwrap();
    assert_eq!((first.role, first.created_at), (Role::User, t(7)));
    let other = Email::parse("else@placeholder.invalid").unwrap();
    assert_eq!(
        store
            .ensure_user(&uid("sub-1"), &other, t(9))
            .await
            .unwrap(),
        first
    );
}

async fn set_role_changes_the_role_and_refuses_unknown_users(store: &TestStore) {
    let id = user(store, "u1").await;
    store.set_role(&id, Role::Admin).await.unwrap();
    assert_eq!(
        store.find_user(&id).await.unwrap().unwrap().role,
        Role::Admin
    );
    assert!(matches!(
        store.set_role(&uid("ghost"), Role::Admin).await,
        Err(StoreError::NotFound)
    ));
}

async fn sessions_find_their_user_until_they_expire_and_can_be_deleted(store: &TestStore) {
    let id = user(store, "u1").await;
    let token = TokenHash("abc123".into());
    store
        .create_session(&token, &id, t(100), t(200))
        .await
        .unwrap();
    let found = store
        .find_session_user(&token, t(199))
        .await
        .unwrap()
        .expect("live session");
    assert_eq!(found.id, id);
    assert_eq!(
        store.find_session_user(&token, t(200)).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(
        store
            .find_session_user(&TokenHash("zzz".into()), t(1))
            .await
            .unwrap(),
        None
    );
    store.delete_session(&token).await.unwrap();
    assert_eq!(
        store.find_session_user(&token, t(150)).await.unwrap(),
        None,
        "deleted"
    );
    store.delete_session(&token).await.unwrap();
}

async fn api_keys_are_found_until_revoked_and_listed_newest_first(store: &TestStore) {
    let owner = user(store, "admin").await;
    let key = |id: &str, at: i64| ApiKey {
        id: id.into(),
        owner: owner.clone(),
        name: format!("key {id}"),
        prefix: "tly_abcd".into(),
        scopes: vec![Scope::CreditsConsume, Scope::CreditsRead],
        created_at: t(at),
        revoked_at: None,
    };
    let (k1, k2) = (key("k1", 10), key("k2", 20));
    store
        .create_api_key(&k1, &TokenHash("h1".into()))
        .await
        .unwrap();
    store
        .create_api_key(&k2, &TokenHash("h2".into()))
        .await
        .unwrap();
    let taken = store
        .create_api_key(&key("k3", 30), &TokenHash("h1".into()))
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    assert_eq!(
        store.find_api_key(&TokenHash("h1".into())).await.unwrap(),
        Some(k1.clone())
    );
    store.revoke_api_key("k1", t(50)).await.unwrap();
    store.revoke_api_key("k1", t(60)).await.unwrap();
    assert_eq!(
        store.find_api_key(&TokenHash("h1".into())).await.unwrap(),
        None,
        "revoked keys are not found"
    );
    let listed = store.list_api_keys().await.unwrap();
    assert_eq!(
        listed,
        vec![
            k2,
            ApiKey {
                revoked_at: Some(t(50)),
                ..k1
            }
        ]
    );
    assert!(matches!(
        store.revoke_api_key("nope", t(1)).await,
        Err(StoreError::NotFound)
    ));
}

contract_tests!(
    users_are_created_found_and_a_taken_email_conflicts,
    ensure_user_creates_once_and_keeps_the_existing_user,
    set_role_changes_the_role_and_refuses_unknown_users,
    sessions_find_their_user_until_they_expire_and_can_be_deleted,
    api_keys_are_found_until_revoked_and_listed_newest_first,
);
