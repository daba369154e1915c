//! Entitlements (issue 17): the union of what a user holds now, from what was sold.

use domain::entitlements::{
    EntitlementDraft, EntitlementKey, EntitlementValue, GrantSource, HeldUntil,
};
use domain::{EventOutcome, Order, OrderId, PlanSnapshot, ProviderId, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::initiate_payment::InitiatePayment;
use crate::use_cases::manage_plans::PlanInput;
use crate::use_cases::plans::PricingMode;

fn key(k: &str) -> EntitlementKey {
    EntitlementKey::new(k).unwrap()
}

/// A dynamic `team` subscription plan granting `seats`.
fn team_plan(seats: i64) -> PlanInput {
    let mut draft = plan("team", "card_gateway", "recurring", "29", "USD", None).to_draft();
    draft
        .entitlements
        .insert("seats".into(), EntitlementDraft::Integer(seats));
    draft
        .entitlements
        .insert("sso".into(), EntitlementDraft::Flag(true));
    PlanInput {
        draft,
        sort_order: 0,
        locales: Vec::new(),
    }
}

fn dynamic_harness() -> Harness {
    let mut config = config();
    config.pricing_mode = PricingMode::Dynamic;
    Harness::with(config, |_| None)
}

async fn subscribe(h: &Harness, user: &User, plan: &str) -> OrderId {
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    let order = h.service.initiate_payment(request).await.unwrap();
    let id = order.order.order.id().clone();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: format!("sub_{id}"),
        period: period(0, 30),
        amount: None,
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS + 10),
    };
    let event_id = format!("act-{id}");
    let handled = h.deliver(ProviderId::CardGateway, &event_id, vec![activated]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    id
}

#[tokio::test]
async fn a_subscriber_keeps_the_entitlements_sold_when_the_plan_is_edited_or_deleted() {
    let h = dynamic_harness();
    let admin = h.admin().await;
    h.service.create_plan(&admin, &team_plan(5)).await.unwrap();
    let user = h.user("a@example.com").await;
    subscribe(&h, &user, "team").await;
    let held = h.service.report_entitlements(&user).await.unwrap();
    assert_eq!(
        held.entitlements.get(&key("seats")),
        Some(EntitlementValue::Limit(5))
    );
    assert!(matches!(
        held.grants[0].source,
        GrantSource::Subscription(_)
    ));
    assert_eq!(held.grants[0].until, HeldUntil::Open, "it renews");

    h.service
        .update_plan(&admin, "team", &team_plan(99))
        .await
        .unwrap();
    assert_eq!(h.service.report_entitlements(&user).await.unwrap(), held);
    h.service
        .delete_plan(&admin, &plan_id("team"))
        .await
        .unwrap();
    assert_eq!(h.service.report_entitlements(&user).await.unwrap(), held);
}

#[tokio::test]
async fn an_order_stored_without_entitlements_falls_back_to_the_live_plan() {
    let h = dynamic_harness();
    let admin = h.admin().await;
    let mut pass = team_plan(7);
    pass.draft.duration_type = Some("one_time".into());
    pass.draft.months = Some(999_999);
    let stored = h.service.create_plan(&admin, &pass).await.unwrap();
    let user = h.user("a@example.com").await;
    let now = Timestamp::from_unix_millis(START_MS);
    let snapshot = PlanSnapshot {
        entitlements: None,
        ..PlanSnapshot::of(&stored.plan, stored.plan.price())
    };
    let mut order = Order::place(
        OrderId::new("old-order").unwrap(),
        user.id.clone(),
        ProviderId::CardGateway,
        snapshot,
        now,
        60_000,
    );
    order.mark_paid(now).unwrap();
    h.service.store().create_order(&order, None).await.unwrap();

    let held = h.service.report_entitlements(&user).await.unwrap();
    assert_eq!(
        held.entitlements.get(&key("seats")),
        Some(EntitlementValue::Limit(7))
    );
    assert_eq!(
        held.grants[0].source,
        GrantSource::Order(OrderId::new("old-order").unwrap())
    );
    // Without a snapshot the live plan decides, and a deleted plan grants nothing.
    h.service
        .delete_plan(&admin, &plan_id("team"))
        .await
        .unwrap();
    let held = h.service.report_entitlements(&user).await.unwrap();
    assert!(held.entitlements.is_empty(), "{held:?}");
}
