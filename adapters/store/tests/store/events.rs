//! The webhook inbox and the single transaction of a payment event; subscriptions.

use application::ports::{
    ClawbackCommand, CreditLedger, GrantCommand, GrantSource, InboxEntry, LedgerEffect,
    OrderChange, OrderRepository, PaymentEventCommand, PaymentEventOutcome, PaymentEventStore,
    StoreError, SubscriptionChange, SubscriptionRepository,
};
use domain::{
    AccountId, BillingPeriod, Currency, Duration, Money, Order, OrderId, OrderParts, OrderStatus,
    PlanId, ProviderId, RenewalIntent, SoldTerms, Subscription, SubscriptionId, SubscriptionParts,
    SubscriptionStatus, UserId,
};

use crate::support::{
    TestStore, assert_ledger_consistent, c, contract_tests, oid, order, paid_order, t, user,
};
use application::ports::Writes;

pub fn inbox(event_id: &str, at: i64) -> InboxEntry {
    InboxEntry {
        provider: ProviderId::CardGateway,
        event_id: event_id.into(),
        event_type: "checkout.session.completed".into(),
        payload: format!("{{\"id\":\"{event_id}\"}}"),
        outcome: domain::EventOutcome::Applied,
        detail: None,
        received_at: t(at),
        user_id: None,
    }
}

/// The event that pays order `id` and grants its credits.
pub fn payment(
    event_id: &str,
    order: &OrderId,
    user: &UserId,
    with_order_change: bool,
) -> PaymentEventCommand {
    PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox(event_id, 50),
        order: with_order_change.then(|| {
            let paid = OrderStatus::Paid { paid_at: t(50) };
            order_change(order, user, 0, OrderStatus::Pending, paid)
        }),
        subscription: None,
        grant: Some(GrantCommand {
            account_id: domain::AccountId::personal(user),
            amount: c(10_000),
            source: GrantSource::Order(order.clone()),
            expires_at: None,
            now: t(50),
        }),
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    }
}

/// The change of order `id` (as `support::order` makes it for `user`) from `previous` to
/// `status`, at `expected_version`.
pub fn order_change(
    id: &OrderId,
    user: &UserId,
    expected_version: i64,
    previous: OrderStatus,
    status: OrderStatus,
) -> OrderChange {
    let placed = crate::support::order(id.as_str(), user, 10);
    let with = |status| {
        Order::restore(OrderParts {
            id: placed.id().clone(),
            user_id: placed.user_id().clone(),
            account: Some(placed.account_id().clone()),
            provider: placed.provider(),
            plan: placed.plan().clone(),
            status,
            created_at: placed.created_at(),
            expires_at: placed.expires_at(),
            returns: placed.returns().clone(),
            save_method: false,
        })
    };
    OrderChange {
        before: with(previous),
        expected_version,
        after: with(status),
        mismatch: None,
    }
}

fn subscription(user: &UserId, last_event_at: i64) -> Subscription {
    Subscription::restore(parts(user, last_event_at))
}

fn parts(user: &UserId, last_event_at: i64) -> SubscriptionParts {
    SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: user.clone(),
        account: None,
        plan_id: PlanId::new("pro-monthly").unwrap(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_123".into(),
        status: SubscriptionStatus::Active,
        current_period: BillingPeriod::new(t(1000), t(2000)).unwrap(),
        renewal: RenewalIntent::Renews,
        last_event_at: t(last_event_at),
        sold_terms: Some(terms(
            Money::from_minor(999, Currency::Usd).unwrap(),
            1,
            Some(5_000),
        )),
    }
}

fn terms(price: Money, months: i64, credits_hundredths: Option<i64>) -> SoldTerms {
    let Some(Duration::Months(interval)) = Duration::from_months_value(months) else {
        panic!("{months} is not a finite interval");
    };
    SoldTerms::new(price, interval, credits_hundredths.map(c))
}

async fn a_subscription_keeps_the_terms_it_was_sold_at(store: &TestStore) {
    let u = user(store, "u1").await;
    let create = |s: &Subscription, event: &str| PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox(event, 40),
        order: None,
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    // Yearly, in a currency without minor units, without credits.
    let yearly_parts = SubscriptionParts {
        sold_terms: Some(terms(
            Money::from_minor(12_000, Currency::Jpy).unwrap(),
            12,
            None,
        )),
        ..parts(&u, 40)
    };
    let yearly = Subscription::restore(yearly_parts.clone());
    // One stored before terms were kept.
    let unknown = Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s2").unwrap(),
        provider_subscription_id: "sub_456".into(),
        sold_terms: None,
        ..parts(&u, 40)
    });
    for (s, event) in [(&yearly, "evt_1"), (&unknown, "evt_2")] {
        store.apply_payment_event(&create(s, event)).await.unwrap();
        assert_eq!(
            store.find_subscription(s.id()).await.unwrap().as_ref(),
            Some(s)
        );
    }
    // A later event changes the state; the terms stay (only a recorded price change moves them).
    let renewed = Subscription::restore(SubscriptionParts {
        current_period: BillingPeriod::new(t(2000), t(3000)).unwrap(),
        last_event_at: t(60),
        ..yearly_parts
    });
    let update = PaymentEventCommand {
        inbox: inbox("evt_3", 60),
        subscription: Some(SubscriptionChange::Update {
            before: yearly.clone(),
            subscription: renewed.clone(),
        }),
        ..create(&yearly, "evt_3")
    };
    store.apply_payment_event(&update).await.unwrap();
    let read = store.find_subscription(yearly.id()).await.unwrap().unwrap();
    assert_eq!(read, renewed);
    assert_eq!(read.sold_terms(), yearly.sold_terms());
}

async fn a_payment_event_applies_order_subscription_and_grant_together(store: &TestStore) {
    let u = user(store, "u1").await;
    store
        .create_order(&order("o1", &u, 10), None)
        .await
        .unwrap();
    let s = subscription(&u, 40);
    let period = s.current_period();
    let command = PaymentEventCommand {
        subscription: Some(SubscriptionChange::Create(s.clone(), Some(oid("o1")))),
        grant: Some(GrantCommand {
            account_id: domain::AccountId::personal(&u),
            amount: c(5_000),
            source: GrantSource::SubscriptionPeriod(s.id().clone(), period),
            expires_at: Some(t(2000)),
            now: t(50),
        }),
        ..payment("evt_1", &oid("o1"), &u, true)
    };
    let PaymentEventOutcome::Applied { ledger } =
        store.apply_payment_event(&command).await.unwrap()
    else {
        panic!("not applied");
    };
    assert!(
        matches!(&ledger[..], [LedgerEffect::Written(tx)] if tx.amount.hundredths() == 5_000 && tx.context.subscription_id == Some(s.id().clone()))
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(5_000)
    );
    let paid = store.find_order(&oid("o1")).await.unwrap().unwrap();
    assert_eq!(
        (paid.order.status().clone(), paid.updated_at),
        (OrderStatus::Paid { paid_at: t(50) }, t(50))
    );
    assert_eq!(
        store.find_subscription(s.id()).await.unwrap(),
        Some(s.clone())
    );
    assert_eq!(
        store
            .find_subscription_by_provider_id(ProviderId::CardGateway, "sub_123")
            .await
            .unwrap(),
        Some(s.clone())
    );
    assert_eq!(
        store.find_subscription_by_order(&oid("o1")).await.unwrap(),
        Some(s.clone())
    );
    assert_eq!(
        store
            .list_subscriptions(&AccountId::personal(&u))
            .await
            .unwrap(),
        vec![s]
    );
    assert_eq!(
        store
            .find_subscription(&SubscriptionId::new("s9").unwrap())
            .await
            .unwrap(),
        None
    );
    assert_ledger_consistent(store, &u).await;
}

async fn a_duplicate_event_changes_nothing(store: &TestStore) {
    let u = user(store, "u1").await;
    store
        .create_order(&order("o1", &u, 10), None)
        .await
        .unwrap();
    let first = store
        .apply_payment_event(&payment("evt_1", &oid("o1"), &u, true))
        .await
        .unwrap();
    assert!(matches!(first, PaymentEventOutcome::Applied { .. }));
    // A redelivery, even one whose CAS would fail, is a duplicate before anything else runs.
    let again = store
        .apply_payment_event(&payment("evt_1", &oid("o1"), &u, true))
        .await
        .unwrap();
    assert_eq!(again, PaymentEventOutcome::Duplicate);
    // Another event for the same payment (invoice paid after checkout completed): one grant.
    let other = store
        .apply_payment_event(&payment("evt_2", &oid("o1"), &u, false))
        .await
        .unwrap();
    assert_eq!(
        other,
        PaymentEventOutcome::Applied {
            ledger: vec![LedgerEffect::Nothing]
        }
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(10_000)
    );
    assert_eq!(store.raw_i64("SELECT COUNT(*) FROM webhook_inbox").await, 2);
    assert_ledger_consistent(store, &u).await;
}

async fn a_failed_compare_and_set_rolls_back_the_inbox_row_too(store: &TestStore) {
    let u = user(store, "u1").await;
    let id = paid_order(store, "o1", &u).await;
    let stale = store
        .apply_payment_event(&payment("evt_late", &id, &u, true))
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(0),
        "no grant"
    );
    assert_eq!(
        store.raw_i64("SELECT COUNT(*) FROM webhook_inbox").await,
        0,
        "no inbox row"
    );
    let missing = store
        .apply_payment_event(&payment("evt_ghost", &oid("ghost"), &u, true))
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound)), "{missing:?}");
    // The caller re-reads and records the event as stale, once.
    assert!(
        store
            .record_event(&inbox("evt_late", 60), &[], None)
            .await
            .unwrap()
    );
    assert!(
        !store
            .record_event(&inbox("evt_late", 61), &[], None)
            .await
            .unwrap()
    );
    assert_ledger_consistent(store, &u).await;
}

async fn subscription_changes_are_compare_and_set(store: &TestStore) {
    let u = user(store, "u1").await;
    let s = subscription(&u, 40);
    let create = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox("evt_1", 40),
        order: None,
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        grant: None,
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&create).await.unwrap();
    let twice = PaymentEventCommand {
        inbox: inbox("evt_2", 41),
        ..create.clone()
    };
    assert!(matches!(
        store.apply_payment_event(&twice).await,
        Err(StoreError::Conflict(_))
    ));
    let renewed = Subscription::restore(SubscriptionParts {
        current_period: BillingPeriod::new(t(2000), t(3000)).unwrap(),
        renewal: RenewalIntent::EndsAtPeriodEnd,
        last_event_at: t(60),
        ..parts(&u, 40)
    });
    let update = |event: &str, expected: i64| PaymentEventCommand {
        inbox: inbox(event, 60),
        subscription: Some(SubscriptionChange::Update {
            before: subscription(&u, expected),
            subscription: renewed.clone(),
        }),
        ..create.clone()
    };
    assert!(matches!(
        store.apply_payment_event(&update("evt_3", 39)).await,
        Err(StoreError::Conflict(_))
    ));
    store
        .apply_payment_event(&update("evt_4", 40))
        .await
        .unwrap();
    assert_eq!(
        store.find_subscription(s.id()).await.unwrap(),
        Some(renewed.clone())
    );
    assert!(matches!(
        store.apply_payment_event(&update("evt_5", 40)).await,
        Err(StoreError::Conflict(_))
    ));
}

async fn a_refund_claws_back_what_is_left_and_records_the_shortfall(store: &TestStore) {
    let u = user(store, "u1").await;
    store
        .create_order(&order("o1", &u, 10), None)
        .await
        .unwrap();
    store
        .apply_payment_event(&payment("evt_paid", &oid("o1"), &u, true))
        .await
        .unwrap();
    store
        .consume(&crate::support::consume(&u, 3_000, "spend-1"))
        .await
        .unwrap();
    let refund = |event: &str, expected_version: i64, status: OrderStatus, wanted: i64| {
        PaymentEventCommand {
            top_up: None,
            bonus: None,
            inbox: inbox(event, 70),
            // Paid before the first refund (what a later one replaced is not asserted).
            order: Some(order_change(
                &oid("o1"),
                &u,
                expected_version,
                OrderStatus::Paid { paid_at: t(50) },
                status,
            )),
            subscription: None,
            grant: None,
            clawbacks: vec![ClawbackCommand {
                account_id: domain::AccountId::personal(&u),
                source: GrantSource::Order(oid("o1")),
                wanted: c(wanted),
                now: t(70),
            }],
            charge: None,
            refund: None,
            told: Vec::new(),
            entitlements: None,
            audit: None,
        }
    };
    let half = OrderStatus::PartiallyRefunded {
        paid_at: t(50),
        refunded: Money::from_minor(500, Currency::Usd).unwrap(),
    };
    let out = store
        .apply_payment_event(&refund("evt_r1", 1, half, 5_000))
        .await
        .unwrap();
    assert!(
        matches!(&out, PaymentEventOutcome::Applied { ledger } if matches!(&ledger[..], [LedgerEffect::Written(tx)] if tx.amount.hundredths() == -5_000))
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(2_000)
    );
    // The rest of the refund wants 5 000 more, but only 2 000 of the lot is left (3 000 spent).
    let full = OrderStatus::Refunded { paid_at: t(50) };
    store
        .apply_payment_event(&refund("evt_r2", 2, full, 5_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(0)
    );
    let lot = "FROM credit_grants WHERE source_key = 'o1'";
    assert_eq!(
        store
            .raw_i64(&format!("SELECT remaining_hundredths {lot}"))
            .await,
        0
    );
    assert_eq!(
        store
            .raw_i64(&format!("SELECT clawed_back_hundredths {lot}"))
            .await,
        7_000
    );
    assert_eq!(
        store
            .raw_i64(&format!("SELECT shortfall_hundredths {lot}"))
            .await,
        3_000
    );
    assert_ledger_consistent(store, &u).await;
}

async fn a_clawback_never_takes_more_than_the_balance(store: &TestStore) {
    let u = user(store, "u1").await;
    store
        .create_order(&order("o1", &u, 10), None)
        .await
        .unwrap();
    store
        .apply_payment_event(&payment("evt_paid", &oid("o1"), &u, true))
        .await
        .unwrap();
    // Most of the balance is held by a reservation: held credits are not taken back.
    let hold = crate::ledger::reserve_command(&u, "r1", 9_000, "hold-1");
    store.reserve(&hold).await.unwrap();
    let command = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox("evt_refund", 80),
        order: None,
        subscription: None,
        grant: None,
        clawbacks: vec![ClawbackCommand {
            account_id: domain::AccountId::personal(&u),
            source: GrantSource::Order(oid("o1")),
            wanted: c(10_000),
            now: t(80),
        }],
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&command).await.unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(0)
    );
    assert_eq!(
        store
            .raw_i64("SELECT shortfall_hundredths FROM credit_grants")
            .await,
        9_000
    );
    let no_lot = ClawbackCommand {
        source: GrantSource::Order(oid("never-granted")),
        ..command.clawbacks[0].clone()
    };
    let nothing = PaymentEventCommand {
        inbox: inbox("evt_other", 81),
        clawbacks: vec![no_lot],
        ..command
    };
    assert_eq!(
        store.apply_payment_event(&nothing).await.unwrap(),
        PaymentEventOutcome::Applied {
            ledger: vec![LedgerEffect::Nothing]
        }
    );
    assert_ledger_consistent(store, &u).await;
}

/// Step 5: a paid period is a charge that refunds find by the provider's id (or by the order that
/// started the subscription); a refund report is kept once; a charge's refunded total moves only
/// from the value read; the clawback takes from that period's grant.
async fn charges_and_refund_reports_round_trip_and_are_compare_and_set(store: &TestStore) {
    use application::ports::{
        ChargeChange, RefundRecord, RefundRepository, RefundTarget, SubscriptionCharge,
    };
    use domain::{KeptRefund, RefundForm};
    let u = user(store, "u1").await;
    let s = subscription(&u, 40);
    let usd = |minor| Money::from_minor(minor, Currency::Usd).unwrap();
    let charge = SubscriptionCharge {
        subscription_id: s.id().clone(),
        user_id: u.clone(),
        account_id: s.account_id().clone(),
        provider: ProviderId::CardGateway,
        charge_ref: Some("in_1".into()),
        order_id: None,
        period: s.current_period(),
        amount: usd(999),
        credits: Some(c(5_000)),
        refunded: usd(0),
        paid_at: t(40),
        plan_change_at: None,
    };
    let report = RefundRecord {
        provider: ProviderId::CardGateway,
        key: "refund:re_1".into(),
        target: RefundTarget::Charge("in_1".into()),
        refund: KeptRefund {
            form: RefundForm::One,
            amount: usd(999),
        },
        received_at: t(50),
    };
    let start = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox("evt_1", 40),
        order: None,
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        grant: Some(GrantCommand {
            account_id: domain::AccountId::personal(&u),
            amount: c(5_000),
            source: GrantSource::SubscriptionPeriod(s.id().clone(), s.current_period()),
            expires_at: None,
            now: t(40),
        }),
        clawbacks: Vec::new(),
        charge: Some(ChargeChange::Record(charge.clone())),
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&start).await.unwrap();
    let found = store
        .find_charge(ProviderId::CardGateway, "in_1")
        .await
        .unwrap();
    assert_eq!(found.as_ref(), Some(&charge));
    assert_eq!(
        store.find_charge(ProviderId::MorA, "in_1").await.unwrap(),
        None
    );
    let refund = |event: &str, expected: i64| PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox(event, 50),
        order: None,
        subscription: None,
        grant: None,
        clawbacks: vec![ClawbackCommand {
            account_id: domain::AccountId::personal(&u),
            source: GrantSource::SubscriptionPeriod(s.id().clone(), s.current_period()),
            wanted: c(5_000),
            now: t(50),
        }],
        charge: Some(ChargeChange::Refund {
            subscription_id: s.id().clone(),
            period_start: s.current_period().start(),
            expected: usd(expected),
            refunded: usd(999),
        }),
        refund: Some(report.clone()),
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    // Read with a stale refunded total: refused, and nothing of it stays.
    assert!(matches!(
        store.apply_payment_event(&refund("evt_2", 100)).await,
        Err(StoreError::Conflict(_))
    ));
    let target = RefundTarget::Charge("in_1".into());
    assert!(
        store
            .refunds_of(ProviderId::CardGateway, &target)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .apply_payment_event(&refund("evt_3", 0))
        .await
        .unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(0)
    );
    let kept = store
        .refunds_of(ProviderId::CardGateway, &target)
        .await
        .unwrap();
    assert_eq!(kept, vec![report.clone()]);
    let refunded = store
        .find_charge(ProviderId::CardGateway, "in_1")
        .await
        .unwrap();
    assert_eq!(refunded.map(|c| c.refunded), Some(usd(999)));
    // The same report again (under another event id) is refused as kept before.
    let again = PaymentEventCommand {
        clawbacks: Vec::new(),
        charge: None,
        ..refund("evt_4", 999)
    };
    assert!(matches!(
        store.apply_payment_event(&again).await,
        Err(StoreError::Conflict(_))
    ));
    assert_ledger_consistent(store, &u).await;
}

/// Step 16 (issue 19): a plan change's proration is a charge of its own, found by the
/// provider's id with the change it paid; the store says what that change's lot granted; its
/// refund takes back from that lot, not from the period's.
async fn a_prorations_refund_takes_back_from_its_changes_credits(store: &TestStore) {
    use application::ports::{ChargeChange, RefundRepository, SubscriptionCharge};
    let u = user(store, "u1").await;
    let s = subscription(&u, 40);
    let usd = |minor| Money::from_minor(minor, Currency::Usd).unwrap();
    let period_lot = GrantSource::SubscriptionPeriod(s.id().clone(), s.current_period());
    let change_lot = GrantSource::PlanChange(s.id().clone(), t(1500));
    let grant = |source: &GrantSource, amount| GrantCommand {
        account_id: domain::AccountId::personal(&u),
        amount: c(amount),
        source: source.clone(),
        expires_at: None,
        now: t(40),
    };
    let start = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox("evt_1", 40),
        order: None,
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        grant: Some(grant(&period_lot, 5_000)),
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&start).await.unwrap();
    let proration = SubscriptionCharge {
        subscription_id: s.id().clone(),
        user_id: u.clone(),
        account_id: s.account_id().clone(),
        provider: ProviderId::CardGateway,
        charge_ref: Some("in_proration".into()),
        order_id: None,
        period: BillingPeriod::new(t(1500), t(2000)).unwrap(),
        amount: usd(1000),
        credits: Some(c(15_000)),
        refunded: usd(0),
        paid_at: t(1500),
        plan_change_at: Some(t(1500)),
    };
    let upgraded = PaymentEventCommand {
        inbox: inbox("evt_2", 41),
        subscription: None,
        grant: Some(grant(&change_lot, 15_000)),
        charge: Some(ChargeChange::Record(proration.clone())),
        ..start.clone()
    };
    store.apply_payment_event(&upgraded).await.unwrap();
    assert_eq!(
        store.granted_by(&change_lot).await.unwrap(),
        Some(c(15_000))
    );
    assert_eq!(store.granted_by(&period_lot).await.unwrap(), Some(c(5_000)));
    let never = GrantSource::PlanChange(s.id().clone(), t(1501));
    assert_eq!(store.granted_by(&never).await.unwrap(), None);
    let found = store
        .find_charge(ProviderId::CardGateway, "in_proration")
        .await
        .unwrap();
    assert_eq!(found, Some(proration.clone()));
    let half = PaymentEventCommand {
        inbox: inbox("evt_3", 42),
        subscription: None,
        grant: None,
        clawbacks: vec![ClawbackCommand {
            account_id: domain::AccountId::personal(&u),
            source: change_lot.clone(),
            wanted: c(7_500),
            now: t(42),
        }],
        charge: Some(ChargeChange::Refund {
            subscription_id: s.id().clone(),
            period_start: t(1500),
            expected: usd(0),
            refunded: usd(500),
        }),
        ..start.clone()
    };
    store.apply_payment_event(&half).await.unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(5_000 + 7_500)
    );
    let refunded = store
        .find_charge(ProviderId::CardGateway, "in_proration")
        .await
        .unwrap();
    assert_eq!(refunded.map(|c| c.refunded), Some(usd(500)));
    assert_ledger_consistent(store, &u).await;
}

/// The inbox listed newest first, filtered by provider and outcome, paged (issue 18).
async fn the_inbox_is_listed_newest_first_by_provider_and_outcome(store: &TestStore) {
    use application::pagination::PageRequest;
    use application::ports::InboxFilter;
    for (i, (provider, outcome)) in [
        (ProviderId::CardGateway, "applied"),
        (ProviderId::MorA, "mismatch"),
        (ProviderId::CardGateway, "mismatch"),
        (ProviderId::CardGateway, "foreign_merchant"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut entry = inbox(&format!("evt_{i}"), 10 + i64::try_from(i).unwrap());
        entry.provider = provider;
        entry.outcome = domain::EventOutcome::parse(outcome).unwrap();
        entry.detail = Some(format!("detail {i}"));
        assert!(store.record_event(&entry, &[], None).await.unwrap());
    }
    let page = |p, l| PageRequest::new(Some(p), Some(l)).unwrap();
    let all = store
        .list_events(&InboxFilter::default(), page(1, 10))
        .await
        .unwrap();
    assert_eq!(all.total, 4);
    let ids: Vec<&str> = all
        .items
        .iter()
        .map(|e| e.entry.event_id.as_str())
        .collect();
    assert_eq!(ids, ["evt_3", "evt_2", "evt_1", "evt_0"]);
    assert!(all.items.windows(2).all(|w| w[0].id > w[1].id));
    assert_eq!(all.items[0].entry.detail.as_deref(), Some("detail 3"));
    let filter = InboxFilter {
        provider: Some(ProviderId::CardGateway),
        outcome: Some(domain::EventOutcome::Mismatch),
    };
    let mismatches = store.list_events(&filter, page(1, 10)).await.unwrap();
    let ids: Vec<&str> = mismatches
        .items
        .iter()
        .map(|e| e.entry.event_id.as_str())
        .collect();
    assert_eq!((mismatches.total, ids), (1, vec!["evt_2"]));
    let by_outcome = InboxFilter {
        provider: None,
        outcome: Some(domain::EventOutcome::Mismatch),
    };
    let second = store.list_events(&by_outcome, page(2, 1)).await.unwrap();
    assert_eq!(second.total, 2);
    assert_eq!(second.items[0].entry.event_id, "evt_1");
}

/// The lots of a subscription's plan changes are found by when each was asked, apart from the
/// period's own lot and from another subscription's; one event takes back from several lots.
async fn a_subscriptions_change_lots_are_listed_and_taken_back_together(store: &TestStore) {
    use application::ports::RefundRepository;
    let u = user(store, "u1").await;
    let s = subscription(&u, 40);
    let period_lot = GrantSource::SubscriptionPeriod(s.id().clone(), s.current_period());
    let grant = |source: GrantSource, amount| GrantCommand {
        account_id: domain::AccountId::personal(&u),
        amount: c(amount),
        source,
        expires_at: None,
        now: t(40),
    };
    let start = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: inbox("evt_1", 40),
        order: None,
        subscription: Some(SubscriptionChange::Create(s.clone(), None)),
        grant: Some(grant(period_lot.clone(), 5_000)),
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&start).await.unwrap();
    for (n, (asked, amount)) in [(1500, 2_000), (900, 1_000), (10_000, 3_000)]
        .iter()
        .enumerate()
    {
        let change = PaymentEventCommand {
            inbox: inbox(&format!("evt_change_{n}"), 41),
            subscription: None,
            grant: Some(grant(
                GrantSource::PlanChange(s.id().clone(), t(*asked)),
                *amount,
            )),
            ..start.clone()
        };
        store.apply_payment_event(&change).await.unwrap();
    }
    let lots = store.change_grants(s.id()).await.unwrap();
    assert_eq!(
        lots,
        vec![
            (t(900), c(1_000)),
            (t(1500), c(2_000)),
            (t(10_000), c(3_000))
        ]
    );
    let other = domain::SubscriptionId::new(format!("{}x", s.id())).unwrap();
    assert!(store.change_grants(&other).await.unwrap().is_empty());
    let take = |source: GrantSource, wanted| ClawbackCommand {
        account_id: domain::AccountId::personal(&u),
        source,
        wanted: c(wanted),
        now: t(42),
    };
    let settle = PaymentEventCommand {
        inbox: inbox("evt_settle", 42),
        subscription: None,
        grant: None,
        clawbacks: vec![
            take(period_lot, 4_000),
            take(GrantSource::PlanChange(s.id().clone(), t(900)), 500),
        ],
        ..start.clone()
    };
    store.apply_payment_event(&settle).await.unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(5_000 + 6_000 - 4_500)
    );
    assert_ledger_consistent(store, &u).await;
}

contract_tests!(
    a_subscriptions_change_lots_are_listed_and_taken_back_together,
    a_prorations_refund_takes_back_from_its_changes_credits,
    the_inbox_is_listed_newest_first_by_provider_and_outcome,
    charges_and_refund_reports_round_trip_and_are_compare_and_set,
    a_payment_event_applies_order_subscription_and_grant_together,
    a_duplicate_event_changes_nothing,
    a_failed_compare_and_set_rolls_back_the_inbox_row_too,
    subscription_changes_are_compare_and_set,
    a_refund_claws_back_what_is_left_and_records_the_shortfall,
    a_clawback_never_takes_more_than_the_balance,
    a_subscription_keeps_the_terms_it_was_sold_at,
);
