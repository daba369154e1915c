//! Buying for a team: an owner or admin buys plans and packs for the team's account; the
//! credits, the subscription and its access belong to the team, whose owners and admins manage
//! it; a plain member or an outsider cannot buy for it.

use domain::{
    AccountId, CancelWhen, EventOutcome, MemberRole, OrderId, ProviderId, SubscriptionStatus,
};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::use_cases::cancel_subscription::{CancelSubscriptionError, SubscriptionCancelled};
use crate::use_cases::initiate_payment::{InitiatePayment, InitiatePaymentError};
use crate::use_cases::teams::MemberRequest;

fn buy(user: &User, account: Option<&AccountId>, plan: &str) -> InitiatePayment {
    InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: account.cloned(),
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: "card_gateway".parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    }
}

async fn balance(h: &Harness, account: &AccountId) -> i64 {
    h.service.balance(account).await.unwrap().hundredths()
}

/// A team owned by `owner`, with `admin` and `member` in their roles.
async fn team(h: &Harness, owner: &User, admin: &User, member: &User) -> AccountId {
    let team = h.service.create_team(&owner.id, "Acme").await.unwrap();
    let id = team.account.id;
    for (user, role) in [(admin, MemberRole::Admin), (member, MemberRole::Member)] {
        let add = MemberRequest::Add { role, limit: None };
        h.service
            .change_team_member(&owner.id, &id, &user.id, add)
            .await
            .unwrap();
    }
    id
}

async fn started(h: &Harness, request: InitiatePayment) -> OrderId {
    let started = h.service.initiate_payment(request).await.unwrap();
    started.order.order.id().clone()
}

#[tokio::test]
async fn a_pack_an_admin_buys_for_the_team_credits_the_team_s_pool() {
    let h = Harness::new();
    let (ada, bo, cy) = (
        h.user("ada@example.com").await,
        h.user("bo@example.com").await,
        h.user("cy@example.com").await,
    );
    let team = team(&h, &ada, &bo, &cy).await;
    let id = started(&h, buy(&bo, Some(&team), "credits-100")).await;
    let order = h.service.query_payment(&bo, &id).await.unwrap().order;
    assert_eq!(order.account_id(), &team);
    assert_eq!(order.user_id(), &bo.id);
    let handled = h
        .deliver(ProviderId::CardGateway, "evt_1", vec![paid(&id, usd(1000))])
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::Applied]);
    assert_eq!(balance(&h, &team).await, 10_000);
    assert_eq!(balance(&h, &AccountId::personal(&bo.id)).await, 0);
    // The team's orders list it; the buyer's own account's do not.
    let page = crate::pagination::PageRequest::new(None, None).unwrap();
    let theirs = h.service.list_orders(&team, page).await.unwrap();
    assert_eq!(theirs.total, 1);
    let own = AccountId::personal(&bo.id);
    assert_eq!(h.service.list_orders(&own, page).await.unwrap().total, 0);
}

#[tokio::test]
async fn a_plain_member_or_an_outsider_cannot_buy_for_the_team() {
    let h = Harness::new();
    let (ada, bo, cy, dee) = (
        h.user("ada@example.com").await,
        h.user("bo@example.com").await,
        h.user("cy@example.com").await,
        h.user("dee@example.com").await,
    );
    let team = team(&h, &ada, &bo, &cy).await;
    let member = h
        .service
        .initiate_payment(buy(&cy, Some(&team), "credits-100"))
        .await;
    assert!(
        matches!(member, Err(InitiatePaymentError::NotBillingManager)),
        "{member:?}"
    );
    let outsider = h
        .service
        .initiate_payment(buy(&dee, Some(&team), "credits-100"))
        .await;
    assert!(
        matches!(outsider, Err(InitiatePaymentError::AccountNotFound)),
        "{outsider:?}"
    );
    // Another user's personal account is no team to buy for either.
    let personal = AccountId::personal(&ada.id);
    let theirs = h
        .service
        .initiate_payment(buy(&dee, Some(&personal), "credits-100"))
        .await;
    assert!(
        matches!(theirs, Err(InitiatePaymentError::AccountNotFound)),
        "{theirs:?}"
    );
    assert!(h.fake(ProviderId::CardGateway).checkouts().is_empty());
}

#[tokio::test]
async fn a_team_s_subscription_is_the_team_s_and_its_owners_and_admins_manage_it() {
    let h = Harness::new();
    let (ada, bo, cy) = (
        h.user("ada@example.com").await,
        h.user("bo@example.com").await,
        h.user("cy@example.com").await,
    );
    let team = team(&h, &ada, &bo, &cy).await;
    let id = started(&h, buy(&ada, Some(&team), "pro-monthly")).await;
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: Some("in_1".into()),
        occurred_at: domain::Timestamp::from_unix_millis(START_MS + 10),
    };
    let handled = h
        .deliver(ProviderId::CardGateway, "act", vec![activated])
        .await
        .unwrap();
    assert_eq!(handled.outcomes(), [EventOutcome::Applied]);
    assert_eq!(balance(&h, &team).await, 5_000);
    // The team's entitlements were worked out and told, not the buyer's own: the purchase is
    // the team's.
    let personal = domain::AccountId::personal(&ada.id);
    let basis = h
        .service
        .store()
        .entitlement_basis(&personal)
        .await
        .unwrap();
    assert!(basis.told.is_none(), "{:?}", basis.told);
    let basis = h.service.store().entitlement_basis(&team).await.unwrap();
    assert!(
        basis.told.is_some(),
        "the team's entitlements were worked out and kept"
    );
    let status = h.service.report_account_status(&team).await.unwrap();
    let [held] = status.subscriptions.as_slice() else {
        panic!("one subscription: {:?}", status.subscriptions);
    };
    let subscription = held.subscription.id().clone();
    assert_eq!(held.subscription.account_id(), &team);
    // The buyer's personal account holds nothing: a second personal subscription may start.
    let mine = h.service.report_status(&ada).await.unwrap().subscriptions;
    assert!(mine.is_empty());
    started(&h, buy(&ada, None, "pro-monthly")).await;
    // The team holds one: another is refused for it.
    let again = h
        .service
        .initiate_payment(buy(&bo, Some(&team), "pro-monthly"))
        .await;
    assert!(
        matches!(again, Err(InitiatePaymentError::AlreadySubscribed { .. })),
        "{again:?}"
    );
    // A plain member cannot cancel it; an admin who did not buy it can.
    let member = h
        .service
        .cancel_subscription_for(&cy, &subscription, CancelWhen::PeriodEnd)
        .await;
    assert!(
        matches!(member, Err(CancelSubscriptionError::NotOwner)),
        "{member:?}"
    );
    let cancelled = h
        .service
        .cancel_subscription_for(&bo, &subscription, CancelWhen::PeriodEnd)
        .await
        .unwrap();
    let SubscriptionCancelled::AtPeriodEnd(s) = cancelled else {
        panic!("expected a cancel at period end, got {cancelled:?}");
    };
    assert_eq!(s.status(), SubscriptionStatus::Active);
    assert_eq!(s.account_id(), &team);
}

#[tokio::test]
async fn a_team_s_plan_caps_its_members_and_a_downgrade_removes_nobody() {
    use domain::entitlements::EntitlementDraft;
    use domain::{MemberChangeRefusal, SubscriptionStatus as S};

    use crate::use_cases::manage_plans::PlanInput;
    use crate::use_cases::plans::PricingMode;
    use crate::use_cases::teams::TeamError;

    let mut config = config();
    config.pricing_mode = PricingMode::Dynamic;
    let h = Harness::with(config, |_| None);
    let admin = h.admin().await;
    let mut draft = plan("team-3", "card_gateway", "recurring", "29", "USD", None).to_draft();
    draft
        .entitlements
        .insert("seats".into(), EntitlementDraft::Integer(3));
    let input = PlanInput {
        draft,
        sort_order: 0,
        locales: Vec::new(),
    };
    h.service.create_plan(&admin, &input).await.unwrap();
    let (ada, bo, cy, dee) = (
        h.user("ada@example.com").await,
        h.user("bo@example.com").await,
        h.user("cy@example.com").await,
        h.user("dee@example.com").await,
    );
    // Before the team holds seats, nothing caps it.
    let team = team(&h, &ada, &bo, &cy).await;
    let id = started(&h, buy(&ada, Some(&team), "team-3")).await;
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_team".into(),
        period: period(0, 30),
        amount: None,
        charge_ref: None,
        occurred_at: domain::Timestamp::from_unix_millis(START_MS + 10),
    };
    let handled = h.deliver(ProviderId::CardGateway, "act", vec![activated]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    // Three members fill three seats: a fourth is refused, naming the seats.
    let add = MemberRequest::Add {
        role: MemberRole::Member,
        limit: None,
    };
    let refused = h
        .service
        .change_team_member(&ada.id, &team, &dee.id, add.clone())
        .await;
    assert!(
        matches!(
            refused,
            Err(TeamError::Refused(MemberChangeRefusal::SeatsExhausted {
                seats: 3
            }))
        ),
        "{refused:?}"
    );
    // Once the subscription runs out the team holds no seats: nothing caps it, and nobody was
    // removed.
    let ended = PaymentEvent::SubscriptionExpired {
        provider_subscription_id: "sub_team".into(),
        occurred_at: domain::Timestamp::from_unix_millis(START_MS + 20),
    };
    let handled = h.deliver(ProviderId::CardGateway, "end", vec![ended]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    let status = h.service.report_account_status(&team).await.unwrap();
    assert!(
        status
            .subscriptions
            .iter()
            .all(|s| s.subscription.status() == S::Expired)
    );
    assert_eq!(
        h.service.team_members(&ada.id, &team).await.unwrap().len(),
        3
    );
    h.service
        .change_team_member(&ada.id, &team, &dee.id, add)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_buyer_made_a_plain_member_can_no_longer_end_the_team_s_subscription_by_its_order() {
    use crate::use_cases::cancel_payment::{CancelOutcome, CancelPaymentError};

    let h = Harness::new();
    let (ada, bo, cy) = (
        h.user("ada@example.com").await,
        h.user("bo@example.com").await,
        h.user("cy@example.com").await,
    );
    let team = team(&h, &ada, &bo, &cy).await;
    let id = started(&h, buy(&bo, Some(&team), "pro-monthly")).await;
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: Some("in_1".into()),
        occurred_at: domain::Timestamp::from_unix_millis(START_MS + 10),
    };
    let handled = h.deliver(ProviderId::CardGateway, "act", vec![activated]);
    assert_eq!(handled.await.unwrap().outcomes(), [EventOutcome::Applied]);
    let demote = MemberRequest::Update {
        role: Some(MemberRole::Member),
        limit: None,
    };
    h.service
        .change_team_member(&ada.id, &team, &bo.id, demote)
        .await
        .unwrap();
    let refused = h.service.cancel_payment(&bo, &id).await;
    assert!(
        matches!(refused, Err(CancelPaymentError::NotOwner)),
        "{refused:?}"
    );
    assert!(
        h.fake(ProviderId::CardGateway)
            .cancelled_subscriptions()
            .is_empty()
    );
    // Made an admin again, they may.
    let promote = MemberRequest::Update {
        role: Some(MemberRole::Admin),
        limit: None,
    };
    h.service
        .change_team_member(&ada.id, &team, &bo.id, promote)
        .await
        .unwrap();
    let ended = h.service.cancel_payment(&bo, &id).await.unwrap();
    assert!(
        matches!(ended, CancelOutcome::SubscriptionEndsAtPeriodEnd(..)),
        "{ended:?}"
    );
}
