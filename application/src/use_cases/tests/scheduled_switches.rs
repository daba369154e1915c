//! Switching at the period's end and one switch at a time (issue 19) against the in-memory
//! store: the scheduled plan is claimed before the provider is asked to cancel, kept with the
//! cancellation, dropped when the provider refuses, cleared by a resume; a claim holds off other
//! switches until it settles or goes stale.

use domain::{CLAIM_HOLD_MS, EventOutcome, ProviderId, RenewalIntent, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::change_plan::ChangePlanError;
use crate::use_cases::initiate_payment::InitiatePayment;

fn switching_config() -> crate::service::ServiceConfig {
    let mut config = config();
    config.catalog.push(plan(
        "pro-plus",
        "card_gateway",
        "recurring",
        "19.99",
        "USD",
        Some("200"),
    ));
    config
}

async fn deliver(h: &Harness, event_id: &str, event: PaymentEvent) -> Vec<EventOutcome> {
    let handled = h.deliver(ProviderId::CardGateway, event_id, vec![event]);
    handled.await.unwrap().outcomes().to_vec()
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS + ms)
}

/// A user with an active `pro-monthly` subscription (`sub_1`): the user and our id.
async fn subscribed(h: &Harness) -> (User, String) {
    let user = h.user("a@example.com").await;
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new("pro-monthly").unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let order = h.service.initiate_payment(request).await.unwrap();
    let order = order.order.order.id().clone();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&order),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: at(0),
    };
    assert_eq!(deliver(h, "act", activated).await, [EventOutcome::Applied]);
    let id = held(h, &user).await.id().to_string();
    (user, id)
}

async fn held(h: &Harness, user: &User) -> domain::Subscription {
    let status = h.service.report_status(user).await.unwrap();
    status.subscription.unwrap()
}

#[tokio::test]
async fn a_switch_at_period_end_cancels_keeps_the_plan_and_holds_off_other_switches() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, id) = subscribed(&h).await;
    let scheduled = h
        .service
        .schedule_plan_switch(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    assert_eq!(scheduled.plan_id.as_str(), "pro-plus");
    assert_eq!(scheduled.direction, domain::ChangeDirection::Upgrade);
    let now = held(&h, &user).await;
    assert_eq!(now.renewal(), RenewalIntent::EndsAtPeriodEnd);
    assert_eq!(
        now.scheduled_switch().map(|s| s.plan_id().as_str()),
        Some("pro-plus")
    );
    assert_eq!(now.plan_id().as_str(), "pro-monthly");
    assert_eq!(
        h.fake(ProviderId::CardGateway).cancelled_subscriptions(),
        ["sub_1"]
    );

    // Another switch, now or later, is refused without asking the provider.
    let again = h
        .service
        .schedule_plan_switch(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await;
    assert!(
        matches!(again, Err(ChangePlanError::InProgress(_))),
        "{again:?}"
    );
    let now_switch = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await;
    assert!(
        matches!(now_switch, Err(ChangePlanError::InProgress(_))),
        "{now_switch:?}"
    );
    assert_eq!(
        h.fake(ProviderId::CardGateway)
            .cancelled_subscriptions()
            .len(),
        1
    );
    assert!(h.fake(ProviderId::CardGateway).plan_changes().is_empty());

    // The provider's own resume clears it.
    let withdrawn = PaymentEvent::SubscriptionCancelWithdrawn {
        provider_subscription_id: "sub_1".into(),
        occurred_at: at(3_600_000),
    };
    assert_eq!(
        deliver(&h, "resumed", withdrawn).await,
        [EventOutcome::Applied]
    );
    let now = held(&h, &user).await;
    assert_eq!(now.renewal(), RenewalIntent::Renews);
    assert_eq!(now.scheduled_switch(), None);
}

#[tokio::test]
async fn a_refused_cancellation_drops_the_claim_and_a_withdrawal_keeps_the_end() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, id) = subscribed(&h).await;
    let fake = h.fake(ProviderId::CardGateway);
    fake.refuse_cancellations(Some("card declined"));
    let refused = h
        .service
        .schedule_plan_switch(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await;
    assert!(
        matches!(refused, Err(ChangePlanError::Gateway(_))),
        "{refused:?}"
    );
    let now = held(&h, &user).await;
    assert_eq!(now.scheduled_switch(), None);
    assert_eq!(now.renewal(), RenewalIntent::Renews);

    fake.refuse_cancellations(None);
    h.service.clock().advance_ms(1);
    h.service
        .schedule_plan_switch(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    let withdrawn = h
        .service
        .cancel_scheduled_switch(&user, &sub_id(&id))
        .await
        .unwrap();
    assert_eq!(withdrawn.scheduled_switch(), None);
    assert_eq!(withdrawn.renewal(), RenewalIntent::EndsAtPeriodEnd);
    let nothing = h.service.cancel_scheduled_switch(&user, &sub_id(&id)).await;
    assert!(
        matches!(nothing, Err(ChangePlanError::Refused(_))),
        "{nothing:?}"
    );
    // Already ending: a new scheduled plan asks the provider nothing more. (A request in the
    // same millisecond as an earlier claim is that claim's duplicate: in progress.)
    h.service.clock().advance_ms(1);
    h.service
        .schedule_plan_switch(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    assert_eq!(fake.cancelled_subscriptions().len(), 1);
}

#[tokio::test]
async fn an_unconfirmed_change_holds_off_switches_until_it_goes_stale() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, id) = subscribed(&h).await;
    // The provider accepts but its event never comes: the change stays pending.
    h.service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    assert!(held(&h, &user).await.pending_change().is_some());
    let held_off = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await;
    assert!(
        matches!(held_off, Err(ChangePlanError::InProgress(_))),
        "{held_off:?}"
    );
    assert_eq!(h.fake(ProviderId::CardGateway).plan_changes().len(), 1);

    h.service.clock().advance_ms(CLAIM_HOLD_MS);
    h.service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    assert_eq!(h.fake(ProviderId::CardGateway).plan_changes().len(), 2);
    let pending = held(&h, &user).await;
    let change = pending.pending_change().expect("the new claim");
    assert_eq!(change.requested_at(), at(CLAIM_HOLD_MS));
}
