//! Signing in with a host application's token: a host identity of its own, never a password
//! account, and an admin only for the request whose token the verifier mapped to the role.

use std::sync::Arc;

use async_trait::async_trait;
use domain::Timestamp;

use super::harness::*;
use crate::accounts::Role;
use crate::ports::{
    Gateways, HostIdentity, HostOrganisation, HostOrganisationClaim, HostTokenVerifier,
};
use crate::service::Service;
use crate::testing::{FixedClock, InMemoryStore, PlainHasher, SequentialIds};
use crate::use_cases::sessions::{AccountsError, Principal};

/// Accepts `host|<issuer>|<subject>|<user or admin>`, then optionally `|-` (the token names no
/// organisation) or `|<org id>:<owner, admin or member>`; without either the operator maps no
/// organisation claim.
struct FakeVerifier;

#[async_trait]
impl HostTokenVerifier for FakeVerifier {
    async fn verify(&self, token: &str, _now: Timestamp) -> Option<HostIdentity> {
        let mut parts = token.strip_prefix("host|")?.split('|');
        let (issuer, subject, role) = (parts.next()?, parts.next()?, parts.next()?);
        let organisation = match parts.next() {
            None => HostOrganisationClaim::NotMapped,
            Some("-") => HostOrganisationClaim::NoOrganisation,
            Some(org) => {
                let (id, role) = org.split_once(':')?;
                HostOrganisationClaim::Organisation(HostOrganisation {
                    id: id.to_owned(),
                    role: domain::MemberRole::parse(role)?,
                    name: Some(format!("Org {id}")),
                })
            }
        };
        Some(HostIdentity {
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
            role: Role::parse(role)?,
            verified_email: None,
            email: None,
            name: None,
            organisation,
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

#[tokio::test]
async fn a_host_organisation_is_a_team_its_token_s_user_acts_in_while_the_token_names_it() {
    use domain::MemberRole;

    use crate::use_cases::teams::{TeamError, host_team_id};
    let service = service();
    let team = host_team_id("iss", "org_1");
    assert!(team.is_host_org());
    // First sight: the team is created, named by the token, the user its admin.
    let ada = signed_in(&service, "host|iss|ada|user|org_1:admin")
        .await
        .unwrap();
    let (account, role) = service
        .account_of(&ada.id, Some(team.clone()))
        .await
        .unwrap();
    assert_eq!((account.clone(), role), (team.clone(), MemberRole::Admin));
    let entry = service.my_accounts(&ada.id).await.unwrap().pop().unwrap();
    assert_eq!(entry.account.name.as_deref(), Some("Org org_1"));
    assert_eq!(entry.account.host_organisation.as_deref(), Some("org_1"));
    // A second member; the role follows the token.
    let bob = signed_in(&service, "host|iss|bob|user|org_1:member")
        .await
        .unwrap();
    signed_in(&service, "host|iss|ada|user|org_1:owner")
        .await
        .unwrap();
    let members = service.team_members(&bob.id, &team).await.unwrap();
    let roles: Vec<_> = members
        .iter()
        .map(|m| (m.user_id.clone(), m.role))
        .collect();
    assert_eq!(
        roles,
        [
            (ada.id.clone(), MemberRole::Owner),
            (bob.id.clone(), MemberRole::Member)
        ]
    );
    // Members change only in the host; limits are set here.
    let refused = service
        .change_team_member(
            &ada.id,
            &team,
            &bob.id,
            crate::use_cases::teams::MemberRequest::Remove,
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(TeamError::Refused(domain::MemberChangeRefusal::HostManaged))
        ),
        "{refused:?}"
    );
    // A token naming no organisation (removed from it, say): bob acts in the team no more.
    signed_in(&service, "host|iss|bob|user|-").await.unwrap();
    assert!(matches!(
        service.account_of(&bob.id, Some(team.clone())).await,
        Err(TeamError::AccountNotFound)
    ));
    assert_eq!(service.my_accounts(&bob.id).await.unwrap().len(), 1);
    assert_eq!(service.team_members(&ada.id, &team).await.unwrap().len(), 1);
    // Another organisation: ada steps away from the first and joins the second.
    signed_in(&service, "host|iss|ada|user|org_2:member")
        .await
        .unwrap();
    assert!(
        service
            .account_of(&ada.id, Some(team.clone()))
            .await
            .is_err()
    );
    let other = host_team_id("iss", "org_2");
    assert!(service.account_of(&ada.id, Some(other)).await.is_ok());
    // Back in the first, with her row as she left it.
    signed_in(&service, "host|iss|ada|user|org_1:owner")
        .await
        .unwrap();
    let (_, role) = service
        .account_of(&ada.id, Some(team.clone()))
        .await
        .unwrap();
    assert_eq!(role, MemberRole::Owner);
    // Without an organisation mapping nothing changes.
    signed_in(&service, "host|iss|ada|user").await.unwrap();
    assert!(service.account_of(&ada.id, Some(team)).await.is_ok());
}

#[tokio::test]
async fn an_organisation_id_that_is_not_acceptable_names_no_team() {
    let service = service();
    let long = "o".repeat(crate::use_cases::teams::MAX_HOST_ORG_BYTES + 1);
    let ada = signed_in(&service, &format!("host|iss|ada|user|{long}:member"))
        .await
        .unwrap();
    assert_eq!(service.my_accounts(&ada.id).await.unwrap().len(), 1);
}
