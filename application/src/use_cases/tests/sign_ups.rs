//! The sign-up abuse policy over the in-memory fakes: rate limits shared by every caller,
//! sign-up credits at most once per identity (password and host users alike), and the day's
//! cap on them.

use std::num::NonZeroU32;
use std::sync::Arc;

use async_trait::async_trait;
use domain::{Credits, Timestamp};

use super::harness::*;
use crate::accounts::{Role, User};
use crate::ports::{
    CreditLedger, Gateways, HostIdentity, HostTokenVerifier, SignupGrant, UserRepository,
};
use crate::service::Service;
use crate::sign_up::{ClientAddress, SignUpLimit, SignUpPolicy, SignUpRate, SignupCreditsFor};
use crate::testing::{FixedClock, InMemoryStore, PlainHasher, SequentialIds, client_of};
use crate::use_cases::sessions::{AccountsError, Principal};

const DAY_MS: i64 = 86_400_000;

/// Accepts `host|<subject>|<verified e-mail or ->`, issuer `https://host.example`.
struct FakeVerifier;

#[async_trait]
impl HostTokenVerifier for FakeVerifier {
    async fn verify(&self, token: &str, _now: Timestamp) -> Option<HostIdentity> {
        let mut parts = token.strip_prefix("host|")?.split('|');
        let (subject, email) = (parts.next()?, parts.next()?);
        Some(HostIdentity {
            issuer: "https://host.example".to_owned(),
            subject: subject.to_owned(),
            role: Role::User,
            verified_email: (email != "-").then(|| email.to_owned()),
            email: None,
            name: None,
            organisation: crate::ports::HostOrganisationClaim::NotMapped,
        })
    }
}

fn grant(daily_cap: u32) -> SignupGrant {
    SignupGrant {
        amount: Credits::from_hundredths(500).unwrap(),
        expires_after_days: None,
        daily_cap: NonZeroU32::new(daily_cap).unwrap(),
    }
}

fn rate(per_hour: u32, burst: u32) -> SignUpRate {
    SignUpRate {
        per_hour: NonZeroU32::new(per_hour).unwrap(),
        burst: NonZeroU32::new(burst).unwrap(),
    }
}

/// A service giving `grant` to `credits_for`, with limits no test reaches by accident.
fn service(grant: SignupGrant, credits_for: SignupCreditsFor) -> TestService {
    Service::new(
        InMemoryStore::new().with_signup_grant(Some(grant)),
        FixedClock::at(START_MS),
        SequentialIds::default(),
        PlainHasher,
        Gateways::new(),
        config(),
    )
    .with_host_tokens(Arc::new(FakeVerifier))
    .with_sign_up_policy(SignUpPolicy {
        per_address: rate(1000, 1000),
        per_domain: rate(1000, 1000),
        credits_for,
    })
}

async fn register(service: &TestService, email: &str) -> User {
    service
        .register(email, "password123".into(), Role::User, &client_of(email))
        .await
        .unwrap()
        .user
}

async fn host_user(service: &TestService, subject: &str, email: &str) -> User {
    match service
        .authenticate(&format!("host|{subject}|{email}"))
        .await
    {
        Ok(Principal::User(user)) => user,
        other => panic!("a host token signs its user in: {other:?}"),
    }
}

async fn balance(service: &TestService, user: &User) -> Credits {
    service
        .store
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap()
}

#[tokio::test]
async fn without_a_verified_address_only_host_users_whose_host_verified_it_get_credits() {
    let s = service(grant(100), SignupCreditsFor::VerifiedEmail);
    let password = register(&s, "ada@example.com").await;
    assert_eq!(
        balance(&s, &password).await,
        Credits::ZERO,
        "Tally verifies no address"
    );
    let unverified = host_user(&s, "h-1", "-").await;
    assert_eq!(balance(&s, &unverified).await, Credits::ZERO);
    let verified = host_user(&s, "h-2", "Bo@Example.com").await;
    assert_eq!(balance(&s, &verified).await, grant(1).amount);
    // The same verified address under another subject (the host's user made again).
    let again = host_user(&s, "h-3", "bo+again@example.com").await;
    assert_ne!(again.id, verified.id);
    assert_eq!(
        balance(&s, &again).await,
        Credits::ZERO,
        "once per identity"
    );
    let later = host_user(&s, "h-2", "bo@example.com").await;
    assert_eq!(later.id, verified.id);
    assert_eq!(
        balance(&s, &later).await,
        grant(1).amount,
        "not twice either"
    );
}

#[tokio::test]
async fn any_identity_is_given_credits_once_whatever_the_case_or_plus_tag() {
    let s = service(grant(100), SignupCreditsFor::AnyIdentity);
    let first = register(&s, "ada@example.com").await;
    assert_eq!(balance(&s, &first).await, grant(1).amount);
    let tagged = register(&s, "ADA+2@example.com").await;
    assert_eq!(balance(&s, &tagged).await, Credits::ZERO);
    let host = host_user(&s, "h-1", "ada@example.com").await;
    assert_eq!(
        balance(&s, &host).await,
        Credits::ZERO,
        "a host user is the same identity"
    );
    let subject_only = host_user(&s, "h-2", "-").await;
    assert_eq!(balance(&s, &subject_only).await, grant(1).amount);
}

#[tokio::test]
async fn past_the_days_cap_accounts_are_made_without_credits_and_counted() {
    let s = service(grant(2), SignupCreditsFor::AnyIdentity);
    let day = START_MS.div_euclid(DAY_MS);
    let a = register(&s, "a@example.com").await;
    let b = register(&s, "b@example.com").await;
    let c = register(&s, "c@example.com").await;
    assert_eq!(balance(&s, &a).await, grant(1).amount);
    assert_eq!(balance(&s, &b).await, grant(1).amount);
    assert_eq!(
        balance(&s, &c).await,
        Credits::ZERO,
        "the account exists, without credits"
    );
    assert_eq!(s.store.signup_day(day), (2, 1));
    // The next UTC day has a cap of its own; c's identity was not used up by the refusal.
    s.clock.advance_ms(DAY_MS);
    let d = register(&s, "d@example.com").await;
    assert_eq!(balance(&s, &d).await, grant(1).amount);
    assert_eq!(s.store.signup_day(day + 1), (1, 0));
}

#[tokio::test]
async fn the_limits_count_per_address_and_per_domain_before_any_account_is_made() {
    let s = service(grant(100), SignupCreditsFor::AnyIdentity).with_sign_up_policy(SignUpPolicy {
        per_address: rate(60, 2),
        per_domain: rate(60, 3),
        credits_for: SignupCreditsFor::AnyIdentity,
    });
    let from = |ip: &str| ClientAddress::from_request(ip, None, false);
    let sign_up = |email: &'static str, ip: &'static str| {
        let s = &s;
        async move {
            s.register(email, "password123".into(), Role::User, &from(ip))
                .await
        }
    };
    assert!(sign_up("a@one.example", "192.0.2.1").await.is_ok());
    assert!(sign_up("b@one.example", "192.0.2.1").await.is_ok());
    let Err(AccountsError::RateLimited(refused)) = sign_up("c@two.example", "192.0.2.1").await
    else {
        panic!("a third sign-up from one address is refused");
    };
    assert_eq!(refused.limit, SignUpLimit::Address);
    assert_eq!(refused.retry_after_seconds, 60);
    assert!(sign_up("d@One.example", "192.0.2.2").await.is_ok());
    let Err(AccountsError::RateLimited(refused)) = sign_up("e@one.example", "192.0.2.3").await
    else {
        panic!("a fourth sign-up in one domain is refused");
    };
    assert_eq!(refused.limit, SignUpLimit::Domain);
    assert!(
        s.store
            .find_user_by_email(&crate::accounts::Email::parse("e@one.example").unwrap())
            .await
            .unwrap()
            .is_none(),
        "no account for a refused sign-up"
    );
}
