//! The host application's backend acting for its users: whom an action is for (the caller, or
//! the user an API key with a billing scope names), the buyer's contact details a provider is
//! told, and a subscriber's cancel and list of subscriptions.

use domain::{
    CancelRefusal, CancelWhen, EventOutcome, PlanId, ProviderId, SubscriptionStatus, Timestamp,
    UserId,
};

use super::harness::*;
use crate::accounts::{ApiKey, BuyerContact, CustomerName, Email, Scope, User};
use crate::authorization::{Actor, Denied, OwnerError};
use crate::pagination::PageRequest;
use crate::ports::*;
use crate::use_cases::cancel_subscription::{CancelSubscriptionError, SubscriptionCancelled};
use crate::use_cases::initiate_payment::{BuyerDetail, InitiatePayment, InitiatePaymentError};
use crate::use_cases::sessions::Principal;

fn key(scopes: &[Scope]) -> Principal {
    Principal::Service(ApiKey {
        id: "key_1".into(),
        owner: UserId::new("usr_admin").unwrap(),
        name: "app backend".into(),
        prefix: "tly_abcd".into(),
        scopes: scopes.to_vec(),
        account: None,
        created_at: Timestamp::from_unix_millis(START_MS),
        revoked_at: None,
    })
}

fn denied(result: Result<crate::authorization::Acting, OwnerError>) -> Denied {
    match result {
        Err(OwnerError::Denied(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn buy(user: &User, plan: &str) -> InitiatePayment {
    InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: PlanId::new(plan).unwrap(),
        provider: ProviderId::CardGateway,
        idempotency_key: None,
        returns: Default::default(),
    }
}

fn contact(email: Option<&str>, name: Option<&str>) -> BuyerContact {
    BuyerContact::new(
        email.map(|e| Email::parse(e).unwrap()),
        name.map(|n| CustomerName::parse(n).unwrap()),
    )
}

/// Start and activate a `pro-monthly` subscription of `user`'s, `sub` at the provider.
async fn subscribe(h: &Harness, user: &User, sub: &str) -> domain::SubscriptionId {
    let started = h
        .service
        .initiate_payment(buy(user, "pro-monthly"))
        .await
        .unwrap();
    let order = started.order.order.id().clone();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&order),
        provider_subscription_id: sub.into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 10),
    };
    let event_id = format!("act-{sub}");
    let handled = h.deliver(ProviderId::CardGateway, &event_id, vec![activated]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    let owned = h
        .service
        .store()
        .list_subscriptions(&domain::AccountId::personal(&user.id))
        .await
        .unwrap();
    owned
        .into_iter()
        .find(|s| s.provider_subscription_id() == sub)
        .unwrap()
        .id()
        .clone()
}

#[tokio::test]
async fn a_user_acts_for_themself_and_never_for_another_user() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    let own = Principal::User(ada.clone());
    let acting = h.service.acting_for(own.clone(), Scope::BillingWrite, None);
    let acting = acting.await.unwrap();
    assert_eq!(
        (acting.user.id.clone(), acting.actor),
        (ada.id.clone(), Actor::TheUser)
    );
    let named_self = h
        .service
        .acting_for(own.clone(), Scope::BillingWrite, Some(ada.id.as_str()));
    assert_eq!(named_self.await.unwrap().user.id, ada.id);
    let other = h
        .service
        .acting_for(own, Scope::BillingWrite, Some("usr_someone_else"));
    assert_eq!(denied(other.await), Denied::OthersData(Scope::BillingWrite));
}

#[tokio::test]
async fn an_api_key_acts_for_the_user_it_names_with_the_billing_scope_only() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    let named = Some(ada.id.as_str());
    let writer = h
        .service
        .acting_for(key(&[Scope::BillingWrite]), Scope::BillingWrite, named);
    let acting = writer.await.unwrap();
    assert_eq!(
        (acting.user.id.clone(), acting.actor),
        (ada.id.clone(), Actor::ServiceKey)
    );
    // `billing:write` also reads.
    let reads = h
        .service
        .acting_for(key(&[Scope::BillingWrite]), Scope::BillingRead, named);
    assert_eq!(reads.await.unwrap().user.id, ada.id);
    for (scopes, needed) in [
        (vec![Scope::BillingRead], Scope::BillingWrite),
        (
            vec![Scope::CreditsRead, Scope::CreditsConsume],
            Scope::BillingRead,
        ),
        (vec![], Scope::BillingRead),
    ] {
        let refused = h.service.acting_for(key(&scopes), needed, named).await;
        assert_eq!(denied(refused), Denied::MissingScope(needed), "{scopes:?}");
    }
    let unnamed = h
        .service
        .acting_for(key(&[Scope::BillingWrite]), Scope::BillingWrite, None);
    assert_eq!(denied(unnamed.await), Denied::NoUserNamed);
    for unknown in ["usr_nobody", "not an id at all", ""] {
        let refused = h
            .service
            .acting_for(
                key(&[Scope::BillingWrite]),
                Scope::BillingWrite,
                Some(unknown),
            )
            .await;
        assert_eq!(denied(refused), Denied::UserNotFound, "{unknown:?}");
    }
}

#[tokio::test]
async fn a_users_own_credential_may_not_state_the_buyers_details_and_nothing_is_written() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    for (stated, detail) in [
        (contact(Some("other@example.com"), None), BuyerDetail::Email),
        (contact(None, Some("Someone Else")), BuyerDetail::Name),
    ] {
        let refused = h
            .service
            .initiate_payment_as(buy(&ada, "credits-100"), Actor::TheUser, stated)
            .await
            .unwrap_err();
        assert!(
            matches!(refused, InitiatePaymentError::BuyerDetailNotAllowed(d) if d == detail),
            "{refused:?}"
        );
    }
    let account = domain::AccountId::personal(&ada.id);
    let orders = h
        .service
        .list_orders(&account, PageRequest::new(None, None).unwrap());
    assert_eq!(orders.await.unwrap().total, 0);
    assert!(h.fake(ProviderId::CardGateway).checkouts().is_empty());
}

#[tokio::test]
async fn the_provider_is_told_the_details_a_key_states_else_those_stored() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    h.service
        .initiate_payment_as(
            buy(&ada, "credits-100"),
            Actor::TheUser,
            BuyerContact::default(),
        )
        .await
        .unwrap();
    let stated = contact(Some("billing@ada.example"), Some("Ada Lovelace"));
    h.service
        .initiate_payment_as(buy(&ada, "credits-100"), Actor::ServiceKey, stated)
        .await
        .unwrap();
    let told: Vec<(Option<String>, Option<String>)> = h
        .fake(ProviderId::CardGateway)
        .checkouts()
        .into_iter()
        .map(|c| (c.customer_email, c.customer_name))
        .collect();
    assert_eq!(
        told,
        [
            (Some("ada@example.com".into()), None),
            (
                Some("billing@ada.example".into()),
                Some("Ada Lovelace".into())
            ),
        ]
    );
}

#[tokio::test]
async fn a_host_users_contact_comes_from_its_token_and_its_placeholder_is_never_sent() {
    let h = Harness::new();
    let store = h.service.store();
    let host = |contact: BuyerContact| NewHostUser {
        issuer: "https://app.example".into(),
        subject: "42".into(),
        created_at: Timestamp::from_unix_millis(START_MS),
        signup_identity: None,
        contact,
    };
    let anonymous = host(BuyerContact::default());
    let user = store.find_or_create_host_user(&anonymous).await.unwrap();
    assert!(
        !user.email.is_deliverable(),
        "the account keeps its placeholder"
    );
    h.service
        .initiate_payment(buy(&user, "credits-100"))
        .await
        .unwrap();
    // The token later carries an address and a name; then only a new name.
    let named = contact(Some("ada@example.com"), Some("Ada"));
    store.find_or_create_host_user(&host(named)).await.unwrap();
    h.service
        .initiate_payment(buy(&user, "credits-100"))
        .await
        .unwrap();
    store
        .find_or_create_host_user(&host(contact(None, Some("Ada L."))))
        .await
        .unwrap();
    h.service
        .initiate_payment(buy(&user, "credits-100"))
        .await
        .unwrap();
    let told: Vec<(Option<String>, Option<String>)> = h
        .fake(ProviderId::CardGateway)
        .checkouts()
        .into_iter()
        .map(|c| (c.customer_email, c.customer_name))
        .collect();
    assert_eq!(
        told,
        [
            (None, None),
            (Some("ada@example.com".into()), Some("Ada".into())),
            (Some("ada@example.com".into()), Some("Ada L.".into())),
        ]
    );
}

#[tokio::test]
async fn a_subscriber_cancels_at_period_end_once_and_a_retry_asks_the_provider_nothing() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    let id = subscribe(&h, &ada, "sub_1").await;
    for _ in 0..2 {
        let cancelled = h
            .service
            .cancel_subscription_for(&ada, &id, CancelWhen::PeriodEnd)
            .await
            .unwrap();
        let SubscriptionCancelled::AtPeriodEnd(s) = cancelled else {
            panic!("expected a cancel at period end, got {cancelled:?}");
        };
        assert_eq!(s.renewal(), domain::RenewalIntent::EndsAtPeriodEnd);
        assert_eq!(s.status(), SubscriptionStatus::Active);
    }
    let fake = h.fake(ProviderId::CardGateway);
    assert_eq!(fake.cancelled_subscriptions(), ["sub_1"]);
    assert!(fake.ended_now().is_empty());
}

#[tokio::test]
async fn cancelling_now_asks_the_provider_and_waits_for_its_event() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    let id = subscribe(&h, &ada, "sub_1").await;
    let cancelled = h
        .service
        .cancel_subscription_for(&ada, &id, CancelWhen::Now);
    let SubscriptionCancelled::Now(s) = cancelled.await.unwrap() else {
        panic!("expected a cancel now");
    };
    assert!(
        s.is_live(),
        "nothing changes here before the provider's event"
    );
    assert_eq!(h.fake(ProviderId::CardGateway).ended_now(), ["sub_1"]);
}

#[tokio::test]
async fn a_cancel_is_refused_for_another_user_an_unknown_or_ended_subscription() {
    let h = Harness::new();
    let ada = h.user("ada@example.com").await;
    let bo = h.user("bo@example.com").await;
    let id = subscribe(&h, &ada, "sub_1").await;
    let theirs = h
        .service
        .cancel_subscription_for(&bo, &id, CancelWhen::PeriodEnd);
    assert!(matches!(
        theirs.await,
        Err(CancelSubscriptionError::NotOwner)
    ));
    let unknown = domain::SubscriptionId::new("sub_nope").unwrap();
    let missing = h
        .service
        .cancel_subscription_for(&ada, &unknown, CancelWhen::Now);
    assert!(matches!(
        missing.await,
        Err(CancelSubscriptionError::NotFound)
    ));
    let ended = PaymentEvent::SubscriptionCanceled {
        provider_subscription_id: "sub_1".into(),
        occurred_at: Timestamp::from_unix_millis(START_MS + 20),
    };
    let handled = h.deliver(ProviderId::CardGateway, "ended", vec![ended]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    for when in [CancelWhen::PeriodEnd, CancelWhen::Now] {
        let over = h.service.cancel_subscription_for(&ada, &id, when).await;
        assert!(
            matches!(
                over,
                Err(CancelSubscriptionError::Refused(CancelRefusal::NotLive(_)))
            ),
            "{over:?}"
        );
    }
    let fake = h.fake(ProviderId::CardGateway);
    assert!(fake.cancelled_subscriptions().is_empty());
    assert!(fake.ended_now().is_empty());
}

#[tokio::test]
async fn subscriptions_are_listed_a_page_at_a_time_for_their_user_only() {
    let mut config = config();
    config.allow_several_subscriptions = true;
    let h = Harness::with(config, |_| None);
    let ada = h.user("ada@example.com").await;
    let bo = h.user("bo@example.com").await;
    let first = subscribe(&h, &ada, "sub_1").await;
    let second = subscribe(&h, &ada, "sub_2").await;
    let page = |n| PageRequest::new(Some(n), Some(1)).unwrap();
    let one = h
        .service
        .list_subscriptions(&domain::AccountId::personal(&ada.id), page(1))
        .await
        .unwrap();
    let two = h
        .service
        .list_subscriptions(&domain::AccountId::personal(&ada.id), page(2))
        .await
        .unwrap();
    assert_eq!(one.total, 2);
    let ids: Vec<_> = [one.items, two.items]
        .concat()
        .iter()
        .map(|s| s.id().clone())
        .collect();
    let mut expected = vec![first, second];
    expected.sort();
    let mut got = ids.clone();
    got.sort();
    assert_eq!(got, expected);
    let none = h
        .service
        .list_subscriptions(&domain::AccountId::personal(&bo.id), page(1))
        .await
        .unwrap();
    assert_eq!(none.total, 0);
}
