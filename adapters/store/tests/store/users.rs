//! Users, sessions and API keys.

use application::accounts::{ApiKey, Email, PasswordHash, Role, Scope, TokenHash};
use application::ports::{ApiKeyRepository, NewHostUser, NewUser, StoreError, UserRepository};

use crate::support::{TestStore, contract_tests, t, uid, user};

async fn users_are_created_found_and_a_taken_email_conflicts(store: &TestStore) {
    let new = NewUser {
        id: uid("u1"),
        email: Email::parse("Ada@Example.com").unwrap(),
        password_hash: Some(PasswordHash("$argon2id$x".into())),
        role: Role::Admin,
        created_at: t(5),
        signup_identity: None,
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

fn host(issuer: &str, subject: &str, at: i64) -> NewHostUser {
    NewHostUser {
        issuer: issuer.into(),
        subject: subject.into(),
        created_at: t(at),
        signup_identity: None,
        contact: Default::default(),
    }
}

async fn a_host_identity_maps_to_one_host_user_of_its_own(store: &TestStore) {
    let first = store
        .find_or_create_host_user(&host("https://idp.example", "sub-1", 7))
        .await
        .unwrap();
    assert!(first.id.as_str().starts_with("hst_"), "{}", first.id);
    assert_eq!(first.id.as_str().len(), 30);
    assert_eq!((first.role, first.created_at), (Role::User, t(7)));
    assert_eq!(first.email.as_str(), format!("{}@host.invalid", first.id));
    // The same identity again, and two at once: the same user.
    let again = store
        .find_or_create_host_user(&host("https://idp.example", "sub-1", 9))
        .await
        .unwrap();
    assert_eq!(again, first);
    let (one, two) = (
        host("https://other.example", "sub-2", 11),
        host("https://other.example", "sub-2", 12),
    );
    let (a, b) = tokio::join!(
        store.find_or_create_host_user(&one),
        store.find_or_create_host_user(&two),
    );
    assert_eq!(a.unwrap(), b.unwrap());
    // The same subject under another issuer (or none): other users.
    let elsewhere = store
        .find_or_create_host_user(&host("https://other.example", "sub-1", 9))
        .await
        .unwrap();
    let no_issuer = store
        .find_or_create_host_user(&host("", "sub-1", 9))
        .await
        .unwrap();
    assert_ne!(elsewhere.id, first.id);
    assert_ne!(no_issuer.id, first.id);
    assert_ne!(no_issuer.id, elsewhere.id);
}

async fn a_host_identity_never_resolves_to_a_password_account(store: &TestStore) {
    let admin = NewUser {
        id: uid("usr_admin"),
        email: Email::parse("root@example.com").unwrap(),
        password_hash: Some(PasswordHash("$argon2id$x".into())),
        role: Role::Admin,
        created_at: t(1),
        signup_identity: None,
    };
    store.create_user(&admin).await.unwrap();
    for issuer in ["", "https://idp.example"] {
        let hosted = store
            .find_or_create_host_user(&host(issuer, "usr_admin", 5))
            .await
            .unwrap();
        assert_ne!(hosted.id, admin.id);
        assert!(hosted.id.as_str().starts_with("hst_"), "{}", hosted.id);
        assert_eq!(hosted.role, Role::User);
    }
    let (found, hash) = store
        .find_user_by_email(&admin.email)
        .await
        .unwrap()
        .expect("the password account");
    assert_eq!(
        (found.id, found.role, hash),
        (admin.id, Role::Admin, admin.password_hash)
    );
}

async fn earlier_host_users_keep_their_mapping_and_a_mapped_password_account_is_refused(
    store: &TestStore,
) {
    // An earlier host user (id = subject), mapped under the empty issuer as migration 3 does.
    store
        .raw(
            "INSERT INTO users (id, email, password_hash, role, created_at) \
             VALUES ('legacy-sub', 'legacy-sub@host.invalid', NULL, 'admin', 1); \
             INSERT INTO host_identities (issuer, subject, user_id, created_at) \
             VALUES ('', 'legacy-sub', 'legacy-sub', 1)",
        )
        .await;
    let legacy = store
        .find_or_create_host_user(&host("", "legacy-sub", 5))
        .await
        .unwrap();
    assert_eq!(legacy.id, uid("legacy-sub"));
    assert_eq!(
        store.raw_i64("SELECT COUNT(*) AS n FROM users").await,
        1,
        "no second user for a mapped identity"
    );
    // A mapping that names a password account (planted: the store never writes one) signs
    // nobody in.
    store
        .raw(
            "INSERT INTO users (id, email, password_hash, role, created_at) \
             VALUES ('usr_root', 'root@example.com', '$argon2id$x', 'admin', 1); \
             INSERT INTO host_identities (issuer, subject, user_id, created_at) \
             VALUES ('https://idp.example', 'root', 'usr_root', 1)",
        )
        .await;
    assert!(matches!(
        store
            .find_or_create_host_user(&host("https://idp.example", "root", 5))
            .await,
        Err(StoreError::Conflict(_))
    ));
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
        account: None,
        created_at: t(at),
        revoked_at: None,
    };
    // One bound to an account, one not: the binding is stored and read back.
    let (k1, k2) = (
        key("k1", 10),
        ApiKey {
            account: Some(domain::AccountId::personal(&owner)),
            ..key("k2", 20)
        },
    );
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
    a_host_identity_maps_to_one_host_user_of_its_own,
    a_host_identity_never_resolves_to_a_password_account,
    earlier_host_users_keep_their_mapping_and_a_mapped_password_account_is_refused,
    set_role_changes_the_role_and_refuses_unknown_users,
    sessions_find_their_user_until_they_expire_and_can_be_deleted,
    api_keys_are_found_until_revoked_and_listed_newest_first,
);
