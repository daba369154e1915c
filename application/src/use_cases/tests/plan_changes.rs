//! Switching plans and resuming (issue 19) against the in-memory store: the request keeps the
//! change asked for and asks the provider; only the provider's event billing exactly that plan
//! moves the subscription, grants an upgrade's extra credits once, and a downgrade's lower
//! credits start at the next renewal.

use domain::{ChangeDirection, EventOutcome, OrderId, ProviderId, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::change_plan::ChangePlanError;
use crate::use_cases::initiate_payment::InitiatePayment;

/// `pro-monthly` grants 50 credits a period; `pro-plus` (19.99) 200; `pro-lite` (4.99) 20.
const CREDITS_50: i64 = 5_000;

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
    config.catalog.push(plan(
        "pro-lite",
        "card_gateway",
        "recurring",
        "4.99",
        "USD",
        Some("20"),
    ));
    config
}

fn at(days: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS + days * 86_400_000)
}

async fn balance(h: &Harness, user: &User) -> i64 {
    h.service
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap()
        .hundredths()
}

async fn deliver(h: &Harness, event_id: &str, event: PaymentEvent) -> Vec<EventOutcome> {
    let handled = h.deliver(ProviderId::CardGateway, event_id, vec![event]);
    handled.await.unwrap().outcomes().to_vec()
}

/// A user with an active `pro-monthly` subscription (`sub_1`) whose first period granted 50.
async fn subscribed(h: &Harness) -> (User, OrderId, String) {
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
    assert_eq!(balance(h, &user).await, CREDITS_50);
    let status = h.service.report_status(&user).await.unwrap();
    let id = status.subscription.unwrap().id().to_string();
    (user, order, id)
}

fn switched(minor: i64, occurred_days: i64) -> PaymentEvent {
    PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: "sub_1".into(),
        price: usd(minor),
        interval_months: Some(1),
        occurred_at: at(occurred_days),
    }
}

async fn held(h: &Harness, user: &User) -> domain::Subscription {
    let status = h.service.report_status(user).await.unwrap();
    status.subscription.unwrap()
}

#[tokio::test]
async fn an_upgrade_waits_for_the_provider_then_moves_the_plan_and_grants_the_difference_once() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, _, id) = subscribed(&h).await;

    let outcome = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    assert_eq!(outcome.change.direction(), ChangeDirection::Upgrade);
    assert_eq!(outcome.subscription.plan_id().as_str(), "pro-monthly");
    let asked = h.fake(ProviderId::CardGateway).plan_changes();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].provider_subscription_id, "sub_1");
    assert_eq!(asked[0].snapshot.price, usd(1999));
    assert_eq!(asked[0].direction, ChangeDirection::Upgrade);
    let pending = held(&h, &user).await;
    assert_eq!(
        pending.pending_change().map(|c| c.plan_id().as_str()),
        Some("pro-plus")
    );
    assert_eq!(
        balance(&h, &user).await,
        CREDITS_50,
        "nothing before the provider"
    );

    assert_eq!(
        deliver(&h, "upd", switched(1999, 1)).await,
        [EventOutcome::Applied]
    );
    let now = held(&h, &user).await;
    assert_eq!(now.plan_id().as_str(), "pro-plus");
    assert_eq!(now.pending_change(), None);
    assert_eq!(now.sold_terms().unwrap().price(), usd(1999));
    // 200 credits a period now, 50 already granted for this one: 150 more.
    assert_eq!(balance(&h, &user).await, CREDITS_50 + 15_000);

    // Delivered again, or reported again under another id: nothing more.
    assert_eq!(
        deliver(&h, "upd", switched(1999, 1)).await,
        [EventOutcome::Duplicate]
    );
    assert_eq!(
        deliver(&h, "upd-again", switched(1999, 2)).await,
        [EventOutcome::DuplicateState]
    );
    assert_eq!(balance(&h, &user).await, CREDITS_50 + 15_000);

    // The next renewal bills and grants the new plan's terms.
    let renewal = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(30, 60),
        amount: usd(1999),
        charge_ref: None,
        occurred_at: at(30),
    };
    assert_eq!(deliver(&h, "renew", renewal).await, [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, CREDITS_50 + 15_000 + 20_000);
}

#[tokio::test]
async fn a_provider_event_billing_another_price_than_asked_is_a_mismatch_and_changes_nothing() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, _, id) = subscribed(&h).await;
    // Nothing asked: a switch to 19.99 is a mismatch.
    assert_eq!(
        deliver(&h, "unasked", switched(1999, 1)).await,
        [EventOutcome::Mismatch]
    );
    assert_eq!(held(&h, &user).await.plan_id().as_str(), "pro-monthly");

    h.service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await
        .unwrap();
    for (event_id, minor) in [("cent", 1), ("lite", 499)] {
        assert_eq!(
            deliver(&h, event_id, switched(minor, 1)).await,
            [EventOutcome::Mismatch]
        );
    }
    let still = held(&h, &user).await;
    assert_eq!(still.plan_id().as_str(), "pro-monthly");
    assert!(
        still.pending_change().is_some(),
        "the asked change still waits"
    );
    assert_eq!(balance(&h, &user).await, CREDITS_50);
}

#[tokio::test]
async fn a_downgrade_grants_nothing_now_and_the_next_renewal_grants_the_lower_credits() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, _, id) = subscribed(&h).await;
    let outcome = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-lite"))
        .await
        .unwrap();
    assert_eq!(outcome.change.direction(), ChangeDirection::Downgrade);
    assert_eq!(
        deliver(&h, "upd", switched(499, 1)).await,
        [EventOutcome::Applied]
    );
    assert_eq!(held(&h, &user).await.plan_id().as_str(), "pro-lite");
    assert_eq!(balance(&h, &user).await, CREDITS_50);
    let renewal = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(30, 60),
        amount: usd(499),
        charge_ref: None,
        occurred_at: at(30),
    };
    assert_eq!(deliver(&h, "renew", renewal).await, [EventOutcome::Applied]);
    assert_eq!(balance(&h, &user).await, CREDITS_50 + 2_000);
}

#[tokio::test]
async fn a_refused_switch_forgets_the_change_and_refusals_name_their_reason() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, _, id) = subscribed(&h).await;
    h.fake(ProviderId::CardGateway)
        .refuse_plan_changes(Some("no such price"));
    let refused = h
        .service
        .change_plan(&user, &sub_id(&id), &plan_id("pro-plus"))
        .await;
    assert!(
        matches!(refused, Err(ChangePlanError::Gateway(_))),
        "{refused:?}"
    );
    assert_eq!(held(&h, &user).await.pending_change(), None);

    let other = h.user("b@example.com").await;
    let cases = [
        (
            h.service
                .change_plan(&other, &sub_id(&id), &plan_id("pro-plus"))
                .await,
            "not owner",
        ),
        (
            h.service
                .change_plan(&user, &sub_id(&id), &plan_id("pro-monthly"))
                .await,
            "same",
        ),
        (
            h.service
                .change_plan(&user, &sub_id(&id), &plan_id("credits-100"))
                .await,
            "type",
        ),
        (
            h.service
                .change_plan(&user, &sub_id(&id), &plan_id("qr-credits"))
                .await,
            "provider",
        ),
        (
            h.service
                .change_plan(&user, &sub_id("nope"), &plan_id("pro-plus"))
                .await,
            "unknown",
        ),
    ];
    for (result, case) in cases {
        let e = result.unwrap_err();
        let fits = match case {
            "not owner" => matches!(e, ChangePlanError::NotOwner),
            "same" => e.to_string().contains("already on this plan"),
            "type" => e.to_string().contains("not a subscription"),
            "provider" => matches!(e, ChangePlanError::NotSwitchable(_)),
            _ => matches!(e, ChangePlanError::NotFound),
        };
        assert!(fits, "{case}: {e:?}");
    }
    assert_eq!(h.fake(ProviderId::CardGateway).plan_changes().len(), 1);
}

#[tokio::test]
async fn a_scheduled_cancellation_is_resumed_through_the_provider() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, order, id) = subscribed(&h).await;
    let early = h.service.resume_subscription(&user, &sub_id(&id)).await;
    assert!(
        matches!(early, Err(ChangePlanError::Refused(_))),
        "{early:?}"
    );
    h.service.cancel_payment(&user, &order).await.unwrap();
    assert_eq!(
        held(&h, &user).await.renewal(),
        domain::RenewalIntent::EndsAtPeriodEnd
    );
    let resumed = h
        .service
        .resume_subscription(&user, &sub_id(&id))
        .await
        .unwrap();
    assert_eq!(resumed.renewal(), domain::RenewalIntent::Renews);
    assert_eq!(
        held(&h, &user).await.renewal(),
        domain::RenewalIntent::Renews
    );
    assert_eq!(h.fake(ProviderId::CardGateway).resumed(), ["sub_1"]);
}

/// Switch `user`'s subscription `id` to `plan` and confirm it with the provider's event
/// (`minor` a month), an hour after the last switch.
async fn switch_and_confirm(h: &Harness, user: &User, id: &str, plan: &str, minor: i64, n: i64) {
    h.service.clock().advance_ms(3_600_000);
    h.service
        .change_plan(user, &sub_id(id), &plan_id(plan))
        .await
        .unwrap();
    let event = PaymentEvent::SubscriptionPlanChanged {
        provider_subscription_id: "sub_1".into(),
        price: usd(minor),
        interval_months: Some(1),
        occurred_at: Timestamp::from_unix_millis(START_MS + n * 3_600_000 + 1),
    };
    let outcome = deliver(h, &format!("switch-{n}"), event).await;
    assert_eq!(outcome, [EventOutcome::Applied], "switch {n} to {plan}");
}

#[tokio::test]
async fn switching_down_and_back_up_within_a_period_grants_a_plans_credits_once() {
    let h = Harness::with(switching_config(), |_| None);
    let (user, _, id) = subscribed(&h).await;
    // Down to pro-lite and back to pro-monthly: the period already had pro-monthly's 50.
    for round in 0..3 {
        switch_and_confirm(&h, &user, &id, "pro-lite", 499, 2 * round + 1).await;
        switch_and_confirm(&h, &user, &id, "pro-monthly", 999, 2 * round + 2).await;
    }
    assert_eq!(balance(&h, &user).await, CREDITS_50);
    // Up to pro-plus: 200 less the 50 the period had; down and up again: nothing more.
    switch_and_confirm(&h, &user, &id, "pro-plus", 1999, 7).await;
    assert_eq!(balance(&h, &user).await, 20_000);
    switch_and_confirm(&h, &user, &id, "pro-lite", 499, 8).await;
    switch_and_confirm(&h, &user, &id, "pro-plus", 1999, 9).await;
    assert_eq!(balance(&h, &user).await, 20_000);
}
