//! The credit ledger. Every test ends with the ledger invariant check.

use application::pagination::PageRequest;
use application::ports::{
    AdjustCommand, CreditLedger, GrantCommand, GrantSource, LedgerEffect, Replay, ReservationError,
    ReservationStatus, ReserveCommand, SpendError, UsageContext,
};
use domain::{BillingPeriod, CreditDelta, ReservationId, SubscriptionId, TransactionKind, UserId};

use crate::support::{
    TestStore, assert_ledger_consistent, c, consume, contract_tests, grant, key, t, uid, user,
};
use application::ports::Writes;

pub fn reserve_command(user: &UserId, id: &str, amount: i64, key_text: &str) -> ReserveCommand {
    ReserveCommand {
        reservation_id: ReservationId::new(id).unwrap(),
        account_id: domain::AccountId::personal(user),
        member_id: None,
        amount: c(amount),
        idempotency: key(key_text, &format!("hash-{amount}")),
        context: UsageContext {
            feature: Some("chat".into()),
            model: Some("gpt".into()),
            tokens: Some(99),
            note: None,
            ..UsageContext::default()
        },
        now: t(300),
        expires_at: t(900),
        low_balance_below: None,
    }
}

fn rid(id: &str) -> ReservationId {
    ReservationId::new(id).unwrap()
}

async fn the_balance_of_an_unknown_user_is_zero(store: &TestStore) {
    let ghost = uid("ghost");
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&ghost))
            .await
            .unwrap(),
        c(0)
    );
    let page = store
        .transactions(
            &domain::AccountId::personal(&ghost),
            PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!((page.items.len(), page.total), (0, 0));
    let refused = store.consume(&consume(&ghost, 1, "k")).await;
    assert!(
        matches!(refused, Err(SpendError::Insufficient { available, .. }) if available == c(0))
    );
    assert_ledger_consistent(store, &ghost).await;
}

async fn a_source_grants_once(store: &TestStore) {
    let u = user(store, "u1").await;
    let s = SubscriptionId::new("s1").unwrap();
    let period = |start| BillingPeriod::new(t(start), t(start + 100)).unwrap();
    let command = |source| GrantCommand {
        account_id: domain::AccountId::personal(&u),
        amount: c(1_000),
        source,
        expires_at: None,
        now: t(5),
    };
    store.raw("INSERT INTO subscriptions (id, user_id, plan_id, provider, provider_subscription_id, status, \
        period_start, period_end, last_event_at, created_at, updated_at) \
        VALUES ('s1', 'u1', 'pro', 'card_gateway', 'sub_1', 'active', 0, 100, 0, 0, 0)").await;
    let first = store
        .grant(&command(GrantSource::SubscriptionPeriod(
            s.clone(),
            period(0),
        )))
        .await
        .unwrap();
    let LedgerEffect::Written(tx) = first else {
        panic!("not written")
    };
    assert_eq!(
        (tx.kind, tx.amount.hundredths(), tx.balance_after),
        (TransactionKind::SubscriptionGrant, 1_000, c(1_000))
    );
    assert_eq!(tx.context.subscription_id, Some(s.clone()));
    let again = store
        .grant(&command(GrantSource::SubscriptionPeriod(
            s.clone(),
            period(0),
        )))
        .await
        .unwrap();
    assert_eq!(again, LedgerEffect::Nothing);
    let next_period = store
        .grant(&command(GrantSource::SubscriptionPeriod(s, period(100))))
        .await
        .unwrap();
    assert!(matches!(next_period, LedgerEffect::Written(_)));
    store
        .grant(&command(GrantSource::Admin("promo-1".into())))
        .await
        .unwrap();
    assert_eq!(
        store
            .grant(&command(GrantSource::Admin("promo-1".into())))
            .await
            .unwrap(),
        LedgerEffect::Nothing
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(3_000)
    );
    assert_ledger_consistent(store, &u).await;
}

async fn consume_spends_replays_and_refuses(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 1_000, None).await;
    let (tx, replay) = store.consume(&consume(&u, 400, "k1")).await.unwrap();
    assert_eq!(
        (tx.kind, tx.amount.hundredths(), tx.balance_after, replay),
        (TransactionKind::Consumption, -400, c(600), Replay::Fresh)
    );
    assert_eq!(
        (tx.context.feature.as_deref(), tx.context.tokens),
        (Some("chat"), Some(1200))
    );
    let (again, replay) = store.consume(&consume(&u, 400, "k1")).await.unwrap();
    assert_eq!((again, replay), (tx, Replay::Replayed));
    let mut different = consume(&u, 400, "k1");
    different.idempotency.request_hash = "other".into();
    assert!(matches!(
        store.consume(&different).await,
        Err(SpendError::IdempotencyConflict)
    ));
    let too_much = store.consume(&consume(&u, 601, "k2")).await;
    assert!(
        matches!(too_much, Err(SpendError::Insufficient { requested, available }) if requested == c(601) && available == c(600))
    );
    assert_eq!(
        store
            .raw_i64("SELECT COUNT(*) FROM credit_transactions")
            .await,
        2,
        "a refusal writes nothing"
    );
    let (last, _) = store.consume(&consume(&u, 600, "k2")).await.unwrap();
    assert_eq!(
        last.balance_after,
        c(0),
        "a refused key can be used once the balance covers it"
    );
    assert_ledger_consistent(store, &u).await;
}

async fn settling_returns_the_unused_part_and_replays(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 1_000, None).await;
    let (r, replay) = store
        .reserve(&reserve_command(&u, "r1", 500, "hold-1"))
        .await
        .unwrap();
    assert_eq!(
        (r.status, r.held, replay),
        (ReservationStatus::Pending, c(500), Replay::Fresh)
    );
    assert_eq!(r.context.model.as_deref(), Some("gpt"));
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(500)
    );
    assert_eq!(
        store
            .pending_reservations(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        vec![r.clone()]
    );
    let (settled, replay) = store
        .settle(
            (&domain::AccountId::personal(&u), None),
            &rid("r1"),
            c(300),
            t(400),
        )
        .await
        .unwrap();
    assert_eq!(
        (settled.status, replay),
        (
            ReservationStatus::Settled {
                actual: c(300),
                charged: c(300)
            },
            Replay::Fresh
        )
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(700)
    );
    let (_, replay) = store
        .settle(
            (&domain::AccountId::personal(&u), None),
            &rid("r1"),
            c(300),
            t(401),
        )
        .await
        .unwrap();
    assert_eq!(replay, Replay::Replayed);
    assert!(matches!(
        store
            .settle(
                (&domain::AccountId::personal(&u), None),
                &rid("r1"),
                c(301),
                t(402)
            )
            .await,
        Err(ReservationError::AlreadyResolved("settled"))
    ));
    assert!(matches!(
        store
            .release((&domain::AccountId::personal(&u), None), &rid("r1"), t(403))
            .await,
        Err(ReservationError::AlreadyResolved("settled"))
    ));
    assert!(matches!(
        store
            .settle(
                (&domain::AccountId::personal(&uid("other")), None),
                &rid("r1"),
                c(1),
                t(404)
            )
            .await,
        Err(ReservationError::NotFound)
    ));
    assert_eq!(
        store
            .pending_reservations(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        Vec::new()
    );
    let page = store
        .transactions(
            &domain::AccountId::personal(&u),
            PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    let kinds: Vec<(TransactionKind, i64)> = page
        .items
        .iter()
        .map(|tx| (tx.kind, tx.amount.hundredths()))
        .collect();
    assert_eq!(
        kinds[..2],
        [
            (TransactionKind::ReservationSettle, 200),
            (TransactionKind::ReservationHold, -500)
        ]
    );
    assert_eq!(page.items[0].context.reservation_id, Some(rid("r1")));
    assert_eq!(
        store
            .raw_i64("SELECT remaining_hundredths FROM credit_grants")
            .await,
        700,
        "lots drawn by the charge"
    );
    assert_ledger_consistent(store, &u).await;
}

async fn settling_caps_an_overrun_at_what_is_available(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 1_000, None).await;
    store
        .reserve(&reserve_command(&u, "r1", 500, "hold-1"))
        .await
        .unwrap();
    let (settled, _) = store
        .settle(
            (&domain::AccountId::personal(&u), None),
            &rid("r1"),
            c(5_000),
            t(400),
        )
        .await
        .unwrap();
    assert_eq!(
        settled.status,
        ReservationStatus::Settled {
            actual: c(5_000),
            charged: c(1_000)
        }
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(0)
    );
    // Settling exactly the hold writes no settle transaction.
    grant(store, &u, "g2", 300, None).await;
    store
        .reserve(&reserve_command(&u, "r2", 300, "hold-2"))
        .await
        .unwrap();
    store
        .settle(
            (&domain::AccountId::personal(&u), None),
            &rid("r2"),
            c(300),
            t(500),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .raw_i64("SELECT COUNT(*) FROM credit_transactions WHERE kind = 'reservation_settle'")
            .await,
        1
    );
    assert_ledger_consistent(store, &u).await;
}

async fn releasing_returns_the_hold_and_replays(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 1_000, None).await;
    store
        .reserve(&reserve_command(&u, "r1", 600, "hold-1"))
        .await
        .unwrap();
    let (released, replay) = store
        .release((&domain::AccountId::personal(&u), None), &rid("r1"), t(400))
        .await
        .unwrap();
    assert_eq!(
        (released.status, replay),
        (ReservationStatus::Released, Replay::Fresh)
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(1_000)
    );
    assert_eq!(
        store
            .release((&domain::AccountId::personal(&u), None), &rid("r1"), t(401))
            .await
            .unwrap()
            .1,
        Replay::Replayed
    );
    assert!(matches!(
        store
            .settle(
                (&domain::AccountId::personal(&u), None),
                &rid("r1"),
                c(1),
                t(402)
            )
            .await,
        Err(ReservationError::AlreadyResolved("released"))
    ));
    assert!(matches!(
        store
            .release(
                (&domain::AccountId::personal(&u), None),
                &rid("nope"),
                t(403)
            )
            .await,
        Err(ReservationError::NotFound)
    ));
    assert_ledger_consistent(store, &u).await;
}

async fn reserving_replays_and_refuses(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 1_000, None).await;
    let (first, _) = store
        .reserve(&reserve_command(&u, "r1", 400, "hold-1"))
        .await
        .unwrap();
    let (again, replay) = store
        .reserve(&reserve_command(&u, "r2", 400, "hold-1"))
        .await
        .unwrap();
    assert_eq!((again, replay), (first, Replay::Replayed));
    let conflict = store
        .reserve(&reserve_command(&u, "r2", 401, "hold-1"))
        .await;
    assert!(matches!(conflict, Err(SpendError::IdempotencyConflict)));
    let short = store
        .reserve(&reserve_command(&u, "r3", 601, "hold-3"))
        .await;
    assert!(
        matches!(short, Err(SpendError::Insufficient { available, .. }) if available == c(600))
    );
    assert_eq!(
        store
            .pending_reservations(&domain::AccountId::personal(&u))
            .await
            .unwrap()
            .len(),
        1,
        "a refused hold leaves no reservation"
    );
    let other = user(store, "u2").await;
    grant(store, &other, "g2", 1_000, None).await;
    let taken = store
        .reserve(&reserve_command(&other, "r1", 100, "their-key"))
        .await;
    assert!(
        matches!(
            taken,
            Err(SpendError::Store(application::ports::StoreError::Conflict(
                _
            )))
        ),
        "{taken:?}"
    );
    assert_ledger_consistent(store, &u).await;
    assert_ledger_consistent(store, &other).await;
}

async fn lapsed_reservations_expire_and_return_their_hold(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 1_000, None).await;
    store
        .reserve(&reserve_command(&u, "r1", 300, "hold-1"))
        .await
        .unwrap();
    let mut late = reserve_command(&u, "r2", 200, "hold-2");
    late.expires_at = t(5_000);
    store.reserve(&late).await.unwrap();
    assert_eq!(store.expire_reservations(t(899), 10).await.unwrap(), 0);
    assert_eq!(store.expire_reservations(t(900), 10).await.unwrap(), 1);
    assert_eq!(
        store.expire_reservations(t(900), 10).await.unwrap(),
        0,
        "expired once"
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(800)
    );
    let pending: Vec<String> = store
        .pending_reservations(&domain::AccountId::personal(&u))
        .await
        .unwrap()
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(pending, vec!["r2"]);
    assert!(matches!(
        store
            .settle(
                (&domain::AccountId::personal(&u), None),
                &rid("r1"),
                c(1),
                t(901)
            )
            .await,
        Err(ReservationError::AlreadyResolved("expired"))
    ));
    assert!(matches!(
        store
            .release((&domain::AccountId::personal(&u), None), &rid("r1"), t(901))
            .await,
        Err(ReservationError::AlreadyResolved("expired"))
    ));
    assert_ledger_consistent(store, &u).await;
}

async fn grants_expire_with_an_expiry_transaction(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "expiring", 1_000, Some(500)).await;
    grant(store, &u, "forever", 1_000, None).await;
    // Spends draw the expiring lot first.
    store.consume(&consume(&u, 300, "k1")).await.unwrap();
    assert_eq!(store.expire_grants(t(499), 10).await.unwrap(), 0);
    assert_eq!(store.expire_grants(t(500), 10).await.unwrap(), 1);
    assert_eq!(
        store.expire_grants(t(501), 10).await.unwrap(),
        0,
        "expired once"
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(1_000)
    );
    let page = store
        .transactions(
            &domain::AccountId::personal(&u),
            PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    let newest = &page.items[0];
    assert_eq!(
        (
            newest.kind,
            newest.amount.hundredths(),
            newest.balance_after
        ),
        (TransactionKind::Expiry, -700, c(1_000))
    );
    // A lot whose credits are held takes only the balance and records the rest as shortfall.
    grant(store, &u, "soon", 500, Some(600)).await;
    store
        .reserve(&reserve_command(&u, "r1", 1_400, "hold-1"))
        .await
        .unwrap();
    assert_eq!(store.expire_grants(t(600), 10).await.unwrap(), 1);
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&u))
            .await
            .unwrap(),
        c(0)
    );
    assert_eq!(
        store
            .raw_i64("SELECT shortfall_hundredths FROM credit_grants WHERE source_key = 'soon'")
            .await,
        400
    );
    assert_ledger_consistent(store, &u).await;
}

async fn adjustments_apply_once_per_reference(store: &TestStore) {
    let u = user(store, "u1").await;
    let adjust = |amount: i64, reference: &str| AdjustCommand {
        account_id: domain::AccountId::personal(&u),
        amount: CreditDelta::from_hundredths(amount).unwrap(),
        note: "goodwill".into(),
        reference: reference.into(),
        expires_at: None,
        grant: (
            domain::GrantCategory::Compensation,
            domain::GrantPriority::default(),
        ),
        spend_order: domain::SpendOrder::default(),
        now: t(10),
    };
    let LedgerEffect::Written(up) = store.adjust(&adjust(500, "ticket-1"), &u).await.unwrap()
    else {
        panic!("not written")
    };
    assert_eq!(
        (up.kind, up.context.note.as_deref()),
        (TransactionKind::AdminAdjustment, Some("goodwill"))
    );
    assert_eq!(
        store.adjust(&adjust(500, "ticket-1"), &u).await.unwrap(),
        LedgerEffect::Nothing
    );
    assert!(matches!(
        store.adjust(&adjust(400, "ticket-1"), &u).await,
        Err(SpendError::IdempotencyConflict)
    ));
    let LedgerEffect::Written(down) = store.adjust(&adjust(-200, "ticket-2"), &u).await.unwrap()
    else {
        panic!("not written")
    };
    assert_eq!(down.balance_after, c(300));
    assert_eq!(
        store.adjust(&adjust(-200, "ticket-2"), &u).await.unwrap(),
        LedgerEffect::Nothing
    );
    let too_much = store.adjust(&adjust(-301, "ticket-3"), &u).await;
    assert!(
        matches!(too_much, Err(SpendError::Insufficient { available, .. }) if available == c(300))
    );
    assert_ledger_consistent(store, &u).await;
}

async fn transactions_are_paged_newest_first_with_a_total(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 10_000, None).await;
    for i in 0..6 {
        let mut command = consume(&u, 10 + i, &format!("k{i}"));
        command.now = t(1_000 + i);
        store.consume(&command).await.unwrap();
    }
    let page = |n| PageRequest::new(Some(n), Some(3)).unwrap();
    let first = store
        .transactions(&domain::AccountId::personal(&u), page(1))
        .await
        .unwrap();
    let amounts: Vec<i64> = first
        .items
        .iter()
        .map(|tx| tx.amount.hundredths())
        .collect();
    assert_eq!(
        (amounts, first.total, first.total_pages()),
        (vec![-15, -14, -13], 7, 3)
    );
    let third = store
        .transactions(&domain::AccountId::personal(&u), page(3))
        .await
        .unwrap();
    let kinds: Vec<TransactionKind> = third.items.iter().map(|tx| tx.kind).collect();
    assert_eq!(kinds, vec![TransactionKind::AdminAdjustment]);
    assert_ledger_consistent(store, &u).await;
}

/// The page query the store runs, as the planner sees it at 20 000 rows.
async fn a_transactions_page_walks_the_index_instead_of_sorting(store: &TestStore) {
    let u = user(store, "u1").await;
    user(store, "u2").await;
    let seed = "INSERT INTO credit_transactions (account_id, kind, amount_hundredths, balance_after_hundredths, created_at) \
        SELECT CASE WHEN g % 2 = 0 THEN 'u1' ELSE 'u2' END, 'admin_adjustment', 1, g, g FROM";
    let query = "SELECT * FROM credit_transactions WHERE account_id = 'u1' ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0";
    let plan = match store.backend() {
        sea_orm::DbBackend::Postgres => {
            store
                .raw(&format!("{seed} generate_series(1, 20000) AS g"))
                .await;
            store.raw("ANALYZE credit_transactions").await;
            explain(store, &format!("EXPLAIN {query}")).await
        }
        _ => {
            store.raw(&format!("WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 20000) {seed} s")).await;
            explain(store, &format!("EXPLAIN QUERY PLAN {query}")).await
        }
    };
    assert!(plan.contains("credit_transactions_user_created"), "{plan}");
    assert!(
        !plan.contains("Sort") && !plan.contains("TEMP B-TREE"),
        "the page sorts: {plan}"
    );
    let page = store
        .transactions(
            &domain::AccountId::personal(&u),
            PageRequest::new(Some(1), Some(20)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        (page.items.len(), page.items[0].created_at),
        (20, t(20_000))
    );
}

/// The plan `sql` (an `EXPLAIN …` statement) gets, one line per row.
pub(crate) async fn explain(store: &TestStore, sql: &str) -> String {
    use sea_orm::ConnectionTrait;
    let backend = store.connection().get_database_backend();
    let rows = store
        .connection()
        .query_all_raw(sea_orm::Statement::from_string(backend, sql))
        .await
        .unwrap();
    let column = if backend == sea_orm::DbBackend::Postgres {
        "QUERY PLAN"
    } else {
        "detail"
    };
    rows.iter()
        .map(|r| r.try_get::<String>("", column).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An administrator's grant may expire (promotional credits, issue 18); the same key with another
/// expiry is another adjustment.
async fn an_admin_grant_keeps_its_expiry(store: &TestStore) {
    let u = user(store, "u1").await;
    let grant = |expires: Option<i64>| AdjustCommand {
        account_id: domain::AccountId::personal(&u),
        amount: CreditDelta::from_hundredths(1_000).unwrap(),
        note: "promotion".into(),
        reference: "promo-1".into(),
        expires_at: expires.map(t),
        grant: (
            domain::GrantCategory::Compensation,
            domain::GrantPriority::default(),
        ),
        spend_order: domain::SpendOrder::default(),
        now: t(10),
    };
    store.adjust(&grant(Some(5_000)), &u).await.unwrap();
    assert_eq!(
        store
            .raw_i64("SELECT expires_at FROM credit_grants WHERE source_kind = 'admin'")
            .await,
        5_000
    );
    assert_eq!(
        store.adjust(&grant(Some(5_000)), &u).await.unwrap(),
        LedgerEffect::Nothing
    );
    assert!(matches!(
        store.adjust(&grant(Some(6_000)), &u).await,
        Err(SpendError::IdempotencyConflict)
    ));
    assert_ledger_consistent(store, &u).await;
}

/// A spend priced by a price-book entry keeps its tokens by kind, the entry's date and the
/// provider's cost; one priced by the rules keeps none of them.
async fn a_spend_keeps_its_tokens_by_kind_and_how_it_was_priced(store: &TestStore) {
    let u = user(store, "u1").await;
    grant(store, &u, "g1", 10_000, None).await;
    let by_kind = domain::pricing::TokenUsage::new([100_000, 20_000, 500_000, 0, 1]).unwrap();
    let mut priced = consume(&u, 231, "k1");
    priced.context.breakdown = Some(by_kind);
    priced.context.tokens = Some(620_001);
    priced.context.price_from = Some(t(5));
    priced.context.cost_basis_millionths = Some(3_400_005);
    let (spent, _) = store.consume(&priced).await.unwrap();
    assert_eq!(spent.context, priced.context);
    store.consume(&consume(&u, 100, "k2")).await.unwrap();
    let page = store
        .transactions(
            &domain::AccountId::personal(&u),
            PageRequest::new(None, None).unwrap(),
        )
        .await
        .unwrap();
    let (plain, by_book) = (&page.items[0], &page.items[1]);
    assert_eq!(by_book.context, priced.context);
    assert_eq!(
        (
            plain.context.breakdown,
            plain.context.price_from,
            plain.context.cost_basis_millionths
        ),
        (None, None, None)
    );
    assert_ledger_consistent(store, &u).await;
}

/// Grants keep their category and priority; a spend draws the highest priority first, then
/// the soonest expiry, then given before paid credits (or paid first, as its command says),
/// and the ledger's grant rows say what their credits are.
async fn spends_draw_by_priority_then_expiry_then_category(store: &TestStore) {
    use domain::{GrantCategory, GrantPriority, SpendOrder};
    let u = user(store, "u1").await;
    let account = domain::AccountId::personal(&u);
    let give = |amount: i64, reference: &str, category, priority: u16| AdjustCommand {
        account_id: account.clone(),
        amount: CreditDelta::from_hundredths(amount).unwrap(),
        note: "grant".into(),
        reference: reference.into(),
        expires_at: None,
        grant: (category, GrantPriority::new(priority).unwrap()),
        spend_order: SpendOrder::default(),
        now: t(10),
    };
    store
        .adjust(&give(500, "paid", GrantCategory::Paid, 0), &u)
        .await
        .unwrap();
    store
        .adjust(&give(300, "promo", GrantCategory::Promotional, 0), &u)
        .await
        .unwrap();
    let left = |lots: Vec<domain::GrantLot>| -> Vec<(GrantCategory, u16, i64)> {
        let mut v: Vec<_> = lots
            .iter()
            .map(|l| (l.category, l.priority.get(), l.remaining.hundredths()))
            .collect();
        v.sort_unstable();
        v
    };
    store.consume(&consume(&u, 200, "k1")).await.unwrap();
    assert_eq!(
        left(store.grant_lots(&account).await.unwrap()),
        [
            (GrantCategory::Paid, 0, 500),
            (GrantCategory::Promotional, 0, 100)
        ],
        "given credits first by default"
    );
    let mut paid_first = consume(&u, 200, "k2");
    paid_first.spend_order = SpendOrder::PaidFirst;
    store.consume(&paid_first).await.unwrap();
    assert_eq!(
        left(store.grant_lots(&account).await.unwrap()),
        [
            (GrantCategory::Paid, 0, 300),
            (GrantCategory::Promotional, 0, 100)
        ]
    );
    store
        .adjust(&give(100, "first", GrantCategory::Bonus, 5), &u)
        .await
        .unwrap();
    store.consume(&consume(&u, 150, "k3")).await.unwrap();
    assert_eq!(
        left(store.grant_lots(&account).await.unwrap()),
        [
            (GrantCategory::Paid, 0, 300),
            (GrantCategory::Promotional, 0, 50)
        ],
        "the prioritized lot first, then the given one"
    );
    let page = store
        .transactions(&account, PageRequest::new(None, None).unwrap())
        .await
        .unwrap();
    let categories: Vec<Option<GrantCategory>> = page
        .items
        .iter()
        .map(|tx| tx.context.grant_category)
        .collect();
    assert_eq!(
        categories,
        // Newest first: the grants are at t(10), the spends at t(200).
        [
            None,
            None,
            None,
            Some(GrantCategory::Bonus),
            Some(GrantCategory::Promotional),
            Some(GrantCategory::Paid),
        ]
    );
    assert_ledger_consistent(store, &u).await;
}

contract_tests!(
    spends_draw_by_priority_then_expiry_then_category,
    a_spend_keeps_its_tokens_by_kind_and_how_it_was_priced,
    an_admin_grant_keeps_its_expiry,
    a_transactions_page_walks_the_index_instead_of_sorting,
    the_balance_of_an_unknown_user_is_zero,
    a_source_grants_once,
    consume_spends_replays_and_refuses,
    settling_returns_the_unused_part_and_replays,
    settling_caps_an_overrun_at_what_is_available,
    releasing_returns_the_hold_and_replays,
    reserving_replays_and_refuses,
    lapsed_reservations_expire_and_return_their_hold,
    grants_expire_with_an_expiry_transaction,
    adjustments_apply_once_per_reference,
    transactions_are_paged_newest_first_with_a_total,
);
