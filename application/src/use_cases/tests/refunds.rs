//! Refunds as safe as payments (issue 14 findings 4 and 5, CORRECTNESS.md invariant 11): every
//! refund of a subscription charge takes back that period's unspent credits; individual refunds
//! add up once each; a lost dispute is a full refund; a refund that arrives before its payment
//! is kept and applied with it.

use domain::{Currency, EventOutcome, Money, OrderId, OrderStatus, ProviderId, Timestamp};

use super::harness::*;
use crate::accounts::User;
use crate::ports::*;
use crate::testing::fixtures::{config, plan};
use crate::use_cases::initiate_payment::InitiatePayment;
use crate::use_cases::reconcile::ReconcileSettings;

async fn order(h: &Harness, user: &User, plan: &str, provider: &str) -> OrderId {
    let request = InitiatePayment {
        save_method: false,
        user: user.clone(),
        account: None,
        plan_id: domain::PlanId::new(plan).unwrap(),
        provider: provider.parse().unwrap(),
        idempotency_key: None,
        returns: Default::default(),
    };
    h.service
        .initiate_payment(request)
        .await
        .unwrap()
        .order
        .order
        .id()
        .clone()
}

async fn balance(h: &Harness, user: &User) -> i64 {
    h.service
        .balance(&domain::AccountId::personal(&user.id))
        .await
        .unwrap()
        .hundredths()
}

async fn deliver(h: &Harness, provider: ProviderId, id: &str, event: PaymentEvent) -> EventOutcome {
    let handled = h.deliver(provider, id, vec![event]).await.unwrap();
    handled.outcomes()[0]
}

async fn status(h: &Harness, user: &User, id: &OrderId) -> OrderStatus {
    h.service
        .query_payment(user, id)
        .await
        .unwrap()
        .order
        .status()
        .clone()
}

fn cny(minor: i64) -> Money {
    Money::from_minor(minor, Currency::Cny).unwrap()
}

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(START_MS + ms)
}

fn refund(charge: RefundedCharge, refund: RefundReport) -> PaymentEvent {
    PaymentEvent::Refunded {
        charge,
        refund,
        occurred_at: at(50),
    }
}

fn one(id: &str, amount: Money) -> RefundReport {
    RefundReport::One {
        refund_id: id.into(),
        amount,
    }
}

fn of_charge(charge_ref: &str) -> RefundedCharge {
    RefundedCharge::SubscriptionCharge {
        provider_subscription_id: Some("sub_1".into()),
        charge_ref: charge_ref.into(),
    }
}

/// A `pro-monthly` subscriber (50 credits a period) whose first period (charge `in_1`) and
/// second period (charge `in_2`) are paid: 100 credits.
async fn subscriber_with_two_periods(h: &Harness) -> (User, OrderId) {
    let user = h.user("sub@example.com").await;
    let id = order(h, &user, "pro-monthly", "card_gateway").await;
    let activated = PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: Some(usd(999)),
        charge_ref: Some("in_1".into()),
        occurred_at: at(10),
    };
    assert_eq!(
        deliver(h, ProviderId::CardGateway, "act", activated).await,
        EventOutcome::Applied
    );
    let renewed = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(30, 60),
        amount: usd(999),
        charge_ref: Some("in_2".into()),
        occurred_at: at(20),
    };
    assert_eq!(
        deliver(h, ProviderId::CardGateway, "ren", renewed).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(h, &user).await, 10_000);
    (user, id)
}

#[tokio::test]
async fn a_refunded_renewal_takes_back_that_period_s_credits_in_steps_once_each() {
    let h = Harness::new();
    let (user, _) = subscriber_with_two_periods(&h).await;
    let half = refund(of_charge("in_2"), RefundReport::Total(usd(500)));
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r1", half.clone()).await,
        EventOutcome::Applied
    );
    // 500 of 999 is 50.06 % of 50 credits: 25.03, rounded up to the hundredth.
    assert_eq!(balance(&h, &user).await, 10_000 - 2_503);
    // The same running total under a new event id takes nothing more.
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r1-again", half).await,
        EventOutcome::DuplicateState
    );
    let rest = refund(of_charge("in_2"), RefundReport::Total(usd(999)));
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r2", rest).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 5_000);
}

#[tokio::test]
async fn refunding_the_first_charge_by_its_order_takes_back_the_first_period_and_refunds_the_order()
{
    let h = Harness::new();
    let (user, id) = subscriber_with_two_periods(&h).await;
    let full = refund(
        RefundedCharge::Order(by_id(&id)),
        RefundReport::Total(usd(999)),
    );
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r", full).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 5_000);
    assert!(matches!(
        status(&h, &user, &id).await,
        OrderStatus::Refunded { .. }
    ));
}

#[tokio::test]
async fn a_lost_dispute_takes_back_the_whole_period() {
    let h = Harness::new();
    let (user, _) = subscriber_with_two_periods(&h).await;
    let dispute = refund(
        of_charge("in_1"),
        RefundReport::DisputeLost {
            dispute_id: "dp_1".into(),
        },
    );
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "d", dispute.clone()).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 5_000);
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "d2", dispute).await,
        EventOutcome::DuplicateState
    );
    assert_eq!(balance(&h, &user).await, 5_000);
}

#[tokio::test]
async fn two_partial_wechat_refunds_of_half_take_back_every_credit() {
    let h = Harness::new();
    let user = h.user("qr@example.com").await;
    let id = order(&h, &user, "qr-credits", "wallet_qr").await;
    deliver(&h, ProviderId::WalletQr, "paid", paid(&id, cny(100))).await;
    assert_eq!(balance(&h, &user).await, 1_000);
    let first = refund(RefundedCharge::Order(by_id(&id)), one("5030001", cny(50)));
    let second = refund(RefundedCharge::Order(by_id(&id)), one("5030002", cny(50)));
    assert_eq!(
        deliver(&h, ProviderId::WalletQr, "n1", first.clone()).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 500);
    // WeChat notifies again under a new notification id: the refund id is applied once.
    assert_eq!(
        deliver(&h, ProviderId::WalletQr, "n1-again", first).await,
        EventOutcome::DuplicateState
    );
    assert_eq!(balance(&h, &user).await, 500);
    assert_eq!(
        deliver(&h, ProviderId::WalletQr, "n2", second).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 0);
    assert!(matches!(
        status(&h, &user, &id).await,
        OrderStatus::Refunded { .. }
    ));
}

#[tokio::test]
async fn a_refund_before_its_payment_is_kept_and_applied_with_the_payment() {
    let h = Harness::new();
    let user = h.user("early@example.com").await;
    let id = order(&h, &user, "credits-100", "card_gateway").await;
    let early = refund(
        RefundedCharge::Order(by_id(&id)),
        RefundReport::Total(usd(1000)),
    );
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r", early).await,
        EventOutcome::RefundKept
    );
    assert_eq!(status(&h, &user, &id).await, OrderStatus::Pending);
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "p", paid(&id, usd(1000))).await,
        EventOutcome::Applied
    );
    assert!(matches!(
        status(&h, &user, &id).await,
        OrderStatus::Refunded { .. }
    ));
    assert_eq!(balance(&h, &user).await, 0);
}

#[tokio::test]
async fn a_refund_of_a_renewal_not_seen_yet_is_applied_when_the_renewal_lands() {
    let h = Harness::new();
    let (user, _) = subscriber_with_two_periods(&h).await;
    let early = refund(of_charge("in_3"), RefundReport::Total(usd(999)));
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r3", early).await,
        EventOutcome::RefundKept
    );
    let renewed = PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period: period(60, 90),
        amount: usd(999),
        charge_ref: Some("in_3".into()),
        occurred_at: at(30),
    };
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "ren3", renewed).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 10_000);
}

#[tokio::test]
async fn refunds_in_another_currency_or_above_the_payment_change_nothing() {
    let h = Harness::new();
    let (user, _) = subscriber_with_two_periods(&h).await;
    let eur = Money::from_minor(999, Currency::Eur).unwrap();
    let cases = [
        refund(of_charge("in_2"), RefundReport::Total(eur)),
        refund(of_charge("in_2"), RefundReport::Total(usd(1000))),
        refund(of_charge("in_2"), one("re_x", usd(0))),
    ];
    for (i, case) in cases.into_iter().enumerate() {
        let outcome = deliver(&h, ProviderId::CardGateway, &format!("m{i}"), case).await;
        assert_eq!(outcome, EventOutcome::Mismatch);
    }
    assert_eq!(balance(&h, &user).await, 10_000);
    // Each is recorded naming the subscriber, whose `payment.mismatch` then carries the user.
    let recorded: Vec<_> = h
        .service
        .store()
        .inbox()
        .into_iter()
        .filter(|e| e.outcome == domain::EventOutcome::Mismatch)
        .collect();
    assert_eq!(recorded.len(), 3);
    assert!(
        recorded
            .iter()
            .all(|e| e.user_id.as_ref() == Some(&user.id))
    );
}

#[tokio::test]
async fn a_provider_side_price_change_to_another_plan_of_ours_moves_the_terms_and_is_recorded() {
    let mut config = config();
    config.catalog.push(plan(
        "pro-plus",
        "card_gateway",
        "recurring",
        "19.99",
        "USD",
        Some("120"),
    ));
    let h = Harness::with(config, |_| None);
    let (user, _) = subscriber_with_two_periods(&h).await;
    let renewed = |period, amount, charge: &str| PaymentEvent::SubscriptionRenewed {
        provider_subscription_id: "sub_1".into(),
        period,
        amount,
        charge_ref: Some(charge.into()),
        occurred_at: at(40),
    };
    // A price that is no plan of ours stays a mismatch.
    let unknown = renewed(period(60, 90), usd(1_234), "in_x");
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "x", unknown).await,
        EventOutcome::Mismatch
    );
    let moved = renewed(period(60, 90), usd(1_999), "in_3");
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "up", moved).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 10_000 + 12_000);
    let entry = h.service.store().inbox().last().cloned().unwrap();
    assert!(
        entry.detail.as_deref().unwrap_or("").contains("pro-plus"),
        "{entry:?}"
    );
    let subscription = h
        .service
        .store()
        .find_subscription_by_provider_id(ProviderId::CardGateway, "sub_1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(subscription.plan_id().as_str(), "pro-plus");
    // The next renewal is checked against the new terms: the old price is now the mismatch.
    let old_price = renewed(period(90, 120), usd(999), "in_4");
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "old", old_price).await,
        EventOutcome::Applied
    );
    assert_eq!(
        h.service
            .store()
            .find_subscription_by_provider_id(ProviderId::CardGateway, "sub_1")
            .await
            .unwrap()
            .unwrap()
            .plan_id()
            .as_str(),
        "pro-monthly",
        "and back again, recorded the same way"
    );
}

#[tokio::test]
async fn a_second_activation_naming_the_first_charge_lets_its_refund_be_found() {
    let h = Harness::new();
    let user = h.user("pp@example.com").await;
    let id = order(&h, &user, "pro-monthly", "card_gateway").await;
    let activated = |charge_ref: Option<&str>| PaymentEvent::SubscriptionActivated {
        order: by_id(&id),
        provider_subscription_id: "sub_1".into(),
        period: period(0, 30),
        amount: None,
        charge_ref: charge_ref.map(str::to_owned),
        occurred_at: at(10),
    };
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "a1", activated(None)).await,
        EventOutcome::Applied
    );
    let named = activated(Some("SALE-1"));
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "a2", named).await,
        EventOutcome::DuplicateState
    );
    assert_eq!(balance(&h, &user).await, 5_000);
    let refund = refund(
        RefundedCharge::SubscriptionCharge {
            provider_subscription_id: None,
            charge_ref: "SALE-1".into(),
        },
        one("R-1", usd(999)),
    );
    assert_eq!(
        deliver(&h, ProviderId::CardGateway, "r", refund).await,
        EventOutcome::Applied
    );
    assert_eq!(balance(&h, &user).await, 0);
}

mod from_tally {
    use super::*;
    use crate::use_cases::refund_order::{RefundOrder, RefundOrderError};

    fn asked(id: &OrderId, amount: Option<&str>) -> RefundOrder {
        RefundOrder {
            order_id: id.clone(),
            amount: amount.map(|a| a.parse().unwrap()),
            reason: "requested by the customer".into(),
        }
    }

    async fn paid_pack(h: &Harness) -> (User, OrderId) {
        let user = h.user("buyer@example.com").await;
        let id = order(h, &user, "credits-100", "card_gateway").await;
        deliver(h, ProviderId::CardGateway, "paid", paid(&id, usd(1000))).await;
        assert_eq!(balance(h, &user).await, 10_000);
        (user, id)
    }

    #[tokio::test]
    async fn a_refund_done_at_once_is_applied_once_and_its_provider_event_adds_nothing() {
        let h = Harness::new();
        let (user, id) = paid_pack(&h).await;
        let admin = h.admin().await;
        h.fake(ProviderId::CardGateway)
            .answer_refunds(Some(RefundState::Succeeded));
        let done = h
            .service
            .refund_order(&admin, &asked(&id, Some("4.00")))
            .await
            .unwrap();
        assert_eq!(done.refund_id, format!("rf_{id}_400"));
        assert_eq!(balance(&h, &user).await, 6_000);
        assert!(matches!(
            done.order.order.status(),
            OrderStatus::PartiallyRefunded { .. }
        ));
        // The provider's own event for it: the same refund id, or the running total.
        let same = refund(
            RefundedCharge::Order(by_id(&id)),
            one(&format!("fake_rf_{id}_400"), usd(400)),
        );
        assert_eq!(
            deliver(&h, ProviderId::CardGateway, "e1", same).await,
            EventOutcome::DuplicateState
        );
        let total = refund(
            RefundedCharge::Order(by_id(&id)),
            RefundReport::Total(usd(400)),
        );
        assert_eq!(
            deliver(&h, ProviderId::CardGateway, "e2", total).await,
            EventOutcome::DuplicateState
        );
        assert_eq!(balance(&h, &user).await, 6_000);
        // The rest, by default everything left.
        let rest = h
            .service
            .refund_order(&admin, &asked(&id, None))
            .await
            .unwrap();
        assert_eq!(rest.amount, usd(600));
        assert_eq!(balance(&h, &user).await, 0);
        assert!(matches!(
            h.service.refund_order(&admin, &asked(&id, None)).await,
            Err(RefundOrderError::NotRefundable("refunded"))
        ));
    }

    #[tokio::test]
    async fn an_administrators_refund_is_audited_with_the_order_as_its_write_left_it() {
        use crate::ports::AuditAction;
        use crate::use_cases::admin_console::PageAfter;

        let h = Harness::new();
        let (user, id) = paid_pack(&h).await;
        let admin = h.user("boss@example.com").await;
        h.fake(ProviderId::CardGateway)
            .answer_refunds(Some(RefundState::Succeeded));
        h.service
            .refund_order(&admin, &asked(&id, Some("4.00")))
            .await
            .unwrap();
        assert_eq!(balance(&h, &user).await, 6_000);
        h.fake(ProviderId::CardGateway)
            .answer_refunds(Some(RefundState::Pending));
        h.service
            .refund_order(&admin, &asked(&id, Some("1.00")))
            .await
            .unwrap();
        let page = PageAfter {
            cursor: None,
            limit: Some(10),
        };
        let log = h.service.audit_log(&page).await.unwrap().items;
        assert_eq!(log.len(), 2, "one entry per refund");
        assert!(log.iter().all(|e| e.action == AuditAction::OrderRefunded));
        let text = |e: &crate::ports::AuditEntry| e.after.clone().unwrap_or_default();
        // Newest first: the pending one left the order as it was.
        assert!(
            text(&log[0]).contains("status=partially_refunded"),
            "{log:?}"
        );
        assert!(text(&log[0]).contains("refundState=pending"));
        assert!(text(&log[0]).contains(&format!("refundId=rf_{id}_500")));
        // The one done at once: written with the refund it applied.
        assert!(text(&log[1]).contains("status=partially_refunded"));
        assert!(text(&log[1]).contains("refundedMinor=400"));
        assert!(text(&log[1]).contains("refundState=succeeded"));
        assert!(log[1].before.clone().unwrap().contains("status=paid"));
    }

    #[tokio::test]
    async fn a_pending_refund_waits_for_the_provider_event_and_a_repeat_asks_with_the_same_id() {
        let h = Harness::new();
        let (user, id) = paid_pack(&h).await;
        let admin = h.admin().await;
        let fake = h.fake(ProviderId::CardGateway);
        fake.answer_refunds(Some(RefundState::Pending));
        let first = h
            .service
            .refund_order(&admin, &asked(&id, None))
            .await
            .unwrap();
        let again = h
            .service
            .refund_order(&admin, &asked(&id, None))
            .await
            .unwrap();
        assert_eq!(first.refund_id, again.refund_id, "one idempotency key");
        assert_eq!(fake.refunds().len(), 2);
        assert_eq!(
            balance(&h, &user).await,
            10_000,
            "nothing before the provider says so"
        );
        let event = refund(
            RefundedCharge::Order(by_id(&id)),
            RefundReport::Total(usd(1000)),
        );
        assert_eq!(
            deliver(&h, ProviderId::CardGateway, "e", event).await,
            EventOutcome::Applied
        );
        assert_eq!(balance(&h, &user).await, 0);
    }

    #[tokio::test]
    async fn refunds_out_of_range_unpaid_or_without_a_refund_api_are_refused_and_change_nothing() {
        let h = Harness::new();
        let (user, id) = paid_pack(&h).await;
        let admin = h.admin().await;
        assert!(matches!(
            h.service.refund_order(&admin, &asked(&id, None)).await,
            Err(RefundOrderError::NotSupported(_))
        ));
        h.fake(ProviderId::CardGateway)
            .answer_refunds(Some(RefundState::Succeeded));
        for amount in ["0", "10.01", "-1", "0.001"] {
            assert!(
                matches!(
                    h.service
                        .refund_order(&admin, &asked(&id, Some(amount)))
                        .await,
                    Err(RefundOrderError::InvalidAmount(_))
                ),
                "{amount}"
            );
        }
        let pending = order(&h, &user, "credits-100", "card_gateway").await;
        assert!(matches!(
            h.service.refund_order(&admin, &asked(&pending, None)).await,
            Err(RefundOrderError::NotRefundable("pending"))
        ));
        let unknown = OrderId::new("ord_nope").unwrap();
        assert!(matches!(
            h.service.refund_order(&admin, &asked(&unknown, None)).await,
            Err(RefundOrderError::NotFound)
        ));
        assert_eq!(balance(&h, &user).await, 10_000);
    }
}

/// The race the reconciler closes: a refund of a renewal not seen yet is kept while, on
/// another instance, the renewal itself is applied having read the kept reports before that
/// commit. The renewal lands without it; the reconciler's next pass applies it, once.
#[tokio::test]
async fn a_refund_kept_while_its_renewal_landed_is_applied_by_the_reconciler_once() {
    let h = Harness::new();
    let (user, _) = subscriber_with_two_periods(&h).await;
    // The refund transaction that committed after the renewal (charge `in_2`) read its reports.
    let late = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: InboxEntry {
            provider: ProviderId::CardGateway,
            event_id: "refund-raced".into(),
            event_type: "charge.refunded".into(),
            payload: String::new(),
            outcome: domain::EventOutcome::RefundKept,
            detail: None,
            received_at: at(40),
            user_id: None,
        },
        order: None,
        subscription: None,
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: Some(RefundRecord {
            provider: ProviderId::CardGateway,
            key: "total:in_2:999".into(),
            target: RefundTarget::Charge("in_2".into()),
            refund: domain::KeptRefund {
                form: domain::RefundForm::Total,
                amount: usd(999),
            },
            received_at: at(40),
        }),
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    h.service.store().apply_payment_event(&late).await.unwrap();
    assert_eq!(balance(&h, &user).await, 10_000, "nothing applied it yet");
    let settings = ReconcileSettings {
        pending_after_ms: 60_000,
        batch: 10,
        lease_ms: 30_000,
    };
    let report = h.service.reconcile(settings).await.unwrap();
    assert_eq!(report.kept_refunds_applied, 1);
    assert_eq!(
        balance(&h, &user).await,
        5_000,
        "the second period taken back"
    );
    let again = h.service.reconcile(settings).await.unwrap();
    assert_eq!(again.kept_refunds_applied, 0);
    assert_eq!(balance(&h, &user).await, 5_000);
}
