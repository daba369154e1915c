//! Hidden plans are not for sale to newcomers: a purchase or a switch to one is refused with
//! `PlanNotAvailable`, except for a buyer an administrator allowed (audited) or who holds it.

use domain::{EventOutcome, Plan, PlanId, PlanNotAvailable, ProviderId, Timestamp};

use super::harness::*;
use crate::accounts::{Role, User};
use crate::ports::*;
use crate::use_cases::admin_console::{PageAfter, PlanAllowanceError};
use crate::use_cases::change_plan::ChangePlanError;
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};

fn hidden(plan: &Plan) -> Plan {
    let mut draft = plan.to_draft();
    draft.hidden = true;
    Plan::from_draft(&draft).unwrap()
}

/// The fixtures' catalog plus `legacy` (7.99 a month, no credits) and `secret-pack`, hidden.
fn config_with_hidden() -> crate::service::ServiceConfig {
    let mut config = config();
    config.catalog.push(hidden(&plan(
        "legacy",
        "card_gateway",
        "recurring",
        "7.99",
        "USD",
        None,
    )));
    config.catalog.push(hidden(&plan(
        "secret-pack",
        "card_gateway",
        "credits",
        "5",
        "USD",
        Some("80"),
    )));
    config
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

async fn admin(h: &Harness) -> User {
    let mut admin = h.user("boss@example.com").await;
    admin.role = Role::Admin;
    admin
}

#[tokio::test]
async fn a_newcomer_cannot_buy_a_hidden_plan_and_nothing_is_written() {
    let h = Harness::with(config_with_hidden(), |_| None);
    let user = h.user("new@example.com").await;
    for id in ["legacy", "secret-pack"] {
        let refused = h.service.initiate_payment(buy(&user, id)).await;
        assert!(
            matches!(refused, Err(InitiatePaymentError::NotAvailable(PlanNotAvailable(ref p))) if p.as_str() == id),
            "{refused:?}"
        );
    }
    assert!(h.fake(ProviderId::CardGateway).checkouts().is_empty());
    // A listed plan still sells.
    h.service
        .initiate_payment(buy(&user, "pro-monthly"))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_allowed_user_buys_the_hidden_plan_and_the_allowance_is_audited() {
    let h = Harness::with(config_with_hidden(), |_| None);
    let user = h.user("vip@example.com").await;
    let other = h.user("other@example.com").await;
    let admin = admin(&h).await;
    let legacy = PlanId::new("legacy").unwrap();
    let allowed = h
        .service
        .allow_plan(&admin, &user.id, &legacy)
        .await
        .unwrap();
    assert_eq!(allowed.allowed_by, admin.id);
    h.service
        .initiate_payment(buy(&user, "legacy"))
        .await
        .unwrap();
    // Allowed to one user only.
    assert!(matches!(
        h.service.initiate_payment(buy(&other, "legacy")).await,
        Err(InitiatePaymentError::NotAvailable(_))
    ));
    let log = h.service.audit_log(&PageAfter::default()).await.unwrap();
    let entry = &log.items[0];
    assert_eq!(entry.action, AuditAction::PlanAllowed);
    assert_eq!(entry.object_id, user.id.to_string());
    // Withdrawn: no longer for sale to that user either (they hold no subscription yet).
    h.service
        .remove_plan_allowance(&admin, &user.id, &legacy)
        .await
        .unwrap();
    let log = h.service.audit_log(&PageAfter::default()).await.unwrap();
    assert_eq!(log.items[0].action, AuditAction::PlanAllowanceRemoved);
    assert!(matches!(
        h.service.initiate_payment(buy(&user, "secret-pack")).await,
        Err(InitiatePaymentError::NotAvailable(_))
    ));
    assert!(
        h.service
            .plan_allowances(&user.id)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn an_allowance_names_an_existing_user_and_plan() {
    let h = Harness::with(config_with_hidden(), |_| None);
    let user = h.user("vip@example.com").await;
    let admin = admin(&h).await;
    let nobody = domain::UserId::new("usr_nobody").unwrap();
    let legacy = PlanId::new("legacy").unwrap();
    assert!(matches!(
        h.service.allow_plan(&admin, &nobody, &legacy).await,
        Err(PlanAllowanceError::UserNotFound)
    ));
    let unknown = PlanId::new("no-such-plan").unwrap();
    assert!(matches!(
        h.service.allow_plan(&admin, &user.id, &unknown).await,
        Err(PlanAllowanceError::PlanNotFound)
    ));
}

#[tokio::test]
async fn a_subscriber_cannot_switch_to_a_hidden_plan_unless_allowed() {
    let h = Harness::with(config_with_hidden(), |_| None);
    let user = h.user("sub@example.com").await;
    let started = h
        .service
        .initiate_payment(buy(&user, "pro-monthly"))
        .await
        .unwrap();
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(started.order.order.id()),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: None,
        occurred_at: Timestamp::from_unix_millis(START_MS),
    };
    let handled = h.deliver(ProviderId::CardGateway, "act", vec![activated]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    let status = h.service.report_status(&user).await.unwrap();
    let id = status.subscription.unwrap().id().clone();
    let legacy = PlanId::new("legacy").unwrap();
    assert!(matches!(
        h.service.change_plan(&user, &id, &legacy).await,
        Err(ChangePlanError::NotAvailable(_))
    ));
    assert!(matches!(
        h.service.schedule_plan_switch(&user, &id, &legacy).await,
        Err(ChangePlanError::NotAvailable(_))
    ));
    assert!(h.fake(ProviderId::CardGateway).plan_changes().is_empty());
    let admin = admin(&h).await;
    h.service
        .allow_plan(&admin, &user.id, &legacy)
        .await
        .unwrap();
    h.service.change_plan(&user, &id, &legacy).await.unwrap();
    assert_eq!(h.fake(ProviderId::CardGateway).plan_changes().len(), 1);
}
