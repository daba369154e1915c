//! Signing in with a host application's token: a host identity of its own, never a password
//! account, and an admin only for the request whose token the verifier mapped to the role.

use std::sync::Arc;

use async_trait::async_trait;
use domain::Timestamp;

use super::harness::*;
use crate::accounts::Role;
use crate::ports::{Gateways, HostIdentity, HostTokenVerifier};
use crate::service::Service;
use crate::testing::{FixedClock, InMemoryStore, PlainHasher, SequentialIds};
use crate::use_cases::sessions::{AccountsError, Principal};

/// Accepts `host|<issuer>|<subject>|<user or admin>`.
struct FakeVerifier;

#[async_trait]
impl HostTokenVerifier for FakeVerifier {
    async fn verify(&self, token: &str, _now: Timestamp) -> Option<HostIdentity> {
        let mut parts = token.strip_prefix("host|")?.split('|');
        let (issuer, subject, role) = (parts.next()?, parts.next()?, parts.next()?);
        Some(HostIdentity {
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
            role: Role::parse(role)?,
            verified_email: None,
            email: None,
            name: None,
        })
    }
}

fn service() -> TestService {
    Service::new(
        InMemoryStore::new(),
        FixedClock::at(START_MS),
        SequentialIds::default(),
        PlainHasher,
        Gateways::new(),
        config(),
    )
    .with_host_tokens(Arc::new(FakeVerifier))
}

async fn signed_in(
    service: &TestService,
    token: &str,
) -> Result<crate::accounts::User, AccountsError> {
    match service.authenticate(token).await? {
        Principal::User(user) => Ok(user),
        Principal::Service(_) | Principal::Portal(_) => {
            panic!("a host token is never a service key or a portal session")
        }
    }
}

#[tokio::test]
async fn a_host_token_naming_an_admins_id_is_a_host_user_of_its_own() {
    let service = service();
    let admin = service
        .register(
            "root@example.com",
            "password123".into(),
            Role::Admin,
            &crate::testing::client_of("root@example.com"),
        )
        .await
        .unwrap()
        .user;
    let token = format!("host||{}|user", admin.id);
    let host = signed_in(&service, &token).await.unwrap();
    assert_ne!(host.id, admin.id);
    assert!(host.id.as_str().starts_with("hst_"), "{}", host.id);
    assert_eq!(host.role, Role::User);
    assert_eq!(
        signed_in(&service, &token).await.unwrap(),
        host,
        "the same user again"
    );
    let elsewhere = signed_in(&service, &format!("host|https://idp|{}|user", admin.id))
        .await
        .unwrap();
    assert_ne!(elsewhere.id, host.id, "another issuer, another user");
    // The mapped claim makes the same user an admin for this request; nothing is stored.
    let claimed = signed_in(&service, &format!("host||{}|admin", admin.id))
        .await
        .unwrap();
    assert_eq!((&claimed.id, claimed.role), (&host.id, Role::Admin));
    let stored = service.find_user(&host.id).await.unwrap().unwrap();
    assert_eq!(stored.role, Role::User);
    assert_eq!(service.find_user(&admin.id).await.unwrap().unwrap(), admin);
}

#[tokio::test]
async fn unusable_host_identities_and_unverified_tokens_sign_nobody_in() {
    let service = service();
    let long = "s".repeat(513);
    for token in [
        "host|||user".to_owned(),
        "host||a\u{0}b|user".to_owned(),
        "host|i\u{0}|b|user".to_owned(),
        format!("host||{long}|user"),
        "not a host token".to_owned(),
    ] {
        assert!(
            matches!(
                signed_in(&service, &token).await,
                Err(AccountsError::Unauthenticated)
            ),
            "{token:?}"
        );
    }
    let without = Harness::new();
    assert!(matches!(
        without.service.authenticate("host||sub|user").await,
        Err(AccountsError::Unauthenticated)
    ));
}
