//! The admin console's port (issue 18) on both databases: customer search by e-mail or id prefix
//! and every list by keyset (newest first, filters, pages that meet exactly), payment totals per
//! currency, and the audit log written in the transaction of the adjustment, plan or key write.

use application::accounts::{ApiKey, Email, Role, Scope, TokenHash};
use application::cursor::{Keyset, KeysetPage, decode, encode};
use application::ports::{
    AdjustCommand, AdminConsoleStore, AdminWrite, ApiKeyRepository, AuditAction, CreditLedger,
    CustomerSearch, IdMatch, InboxFilter, LedgerEffect, Listing, NewAudit, NewHostUser, NewUser,
    OrderFilter, PlanRepository, SignupGrant, SpendError, StoreError, StoredPlan, UserRepository,
};
use application::sign_up::SignupIdentity;
use domain::{
    CreditDelta, Currency, EventOutcome, OrderStatusKind, Plan, PlanDraft, PlanId, PlanText,
    ProviderId, UserId, Visibility,
};
use store::SeaOrmStore;

use crate::events::inbox;
use crate::ledger::explain;
use crate::support::{TestStore, c, contract_tests, t, uid, user};
use application::ports::Writes;

const DAY_MS: i64 = 86_400_000;

/// Every page of a list, following `next` from the first page; the pages' items in order.
async fn walk<T, K, F, Fut>(limit: u32, mut page: F) -> (Vec<T>, usize)
where
    K: application::cursor::CursorKey,
    F: FnMut(Keyset<K>) -> Fut,
    Fut: std::future::Future<Output = KeysetPage<T, K>>,
{
    let mut keyset = Keyset::first(limit);
    let mut items = Vec::new();
    let mut pages = 0;
    loop {
        let got = page(keyset.clone()).await;
        pages += 1;
        assert!(got.items.len() <= limit as usize);
        items.extend(got.items);
        match got.next {
            // Through the opaque text, as a client passes it back.
            Some(next) => keyset.after = Some(decode(&encode(&next)).unwrap()),
            None => return (items, pages),
        }
        assert!(pages < 1000, "pagination never ends");
    }
}

async fn seed_users(store: &TestStore) {
    for (id, email, created) in [
        ("usr_alpha1", "Ann@Example.com", 10),
        ("usr_alpha2", "anna@example.com", 20),
        ("usr_beta01", "bob@example.com", 30),
        ("usr_beta02", "annika@example.org", 40),
        ("usr_gamma1", "carl@example.com", 40),
    ] {
        store
            .raw(&format!(
                "INSERT INTO users (id, email, role, created_at) \
                 VALUES ('{id}', '{email}', 'user', {created})"
            ))
            .await;
        store
            .raw(&format!(
                "INSERT INTO accounts (id, kind, created_by, created_at) \
                 VALUES ('{id}', 'personal', '{id}', {created})"
            ))
            .await;
    }
}

fn search(email: &str, id: IdMatch) -> CustomerSearch {
    CustomerSearch {
        email_prefix: email.to_owned(),
        id,
    }
}

async fn customers_are_found_by_email_or_id_prefix(store: &TestStore) {
    seed_users(store).await;
    let find = |s: CustomerSearch| async move {
        walk(1, |k| {
            let s = s.clone();
            async move { store.search_users(&s, &k).await.unwrap() }
        })
        .await
    };
    let (ann, pages) = find(search("ann", IdMatch::None)).await;
    let ids: Vec<&str> = ann.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(
        ids,
        ["usr_alpha1", "usr_alpha2", "usr_beta02"],
        "by lower-cased e-mail"
    );
    assert_eq!(pages, 3);
    let (beta, _) = find(search("usr_beta", IdMatch::Prefix("usr_beta".into()))).await;
    let ids: Vec<&str> = beta.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(
        ids,
        ["usr_beta02", "usr_beta01"],
        "id matches sorted by e-mail"
    );
    let (both, _) = find(search("bob", IdMatch::Exact("usr_alpha2".into()))).await;
    let ids: Vec<&str> = both.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(ids, ["usr_alpha2", "usr_beta01"]);
    let (none, pages) = find(search("zed", IdMatch::Prefix("USR_".into()))).await;
    assert!(none.is_empty(), "ids are case-sensitive");
    assert_eq!(pages, 1);
    let (everyone, pages) = walk(2, |k| async move { store.list_users(&k).await.unwrap() }).await;
    let ids: Vec<&str> = everyone.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "usr_gamma1",
            "usr_beta02",
            "usr_beta01",
            "usr_alpha2",
            "usr_alpha1"
        ],
        "newest first, ties by id"
    );
    assert_eq!(pages, 3);
}

async fn orders_are_listed_newest_first_by_status_provider_and_buyer(store: &TestStore) {
    seed_users(store).await;
    for (n, (user, provider, status, created)) in [
        ("usr_alpha1", "card_gateway", "paid", 100),
        ("usr_alpha1", "wallet_qr", "pending", 200),
        ("usr_beta01", "card_gateway", "paid", 200),
        ("usr_beta01", "card_gateway", "refunded", 300),
        ("usr_alpha1", "card_gateway", "paid", 400),
    ]
    .into_iter()
    .enumerate()
    {
        let (paid, refunded) = match status {
            "pending" => ("NULL", 0),
            "refunded" => ("50", 1000),
            _ => ("50", 0),
        };
        store
            .raw(&format!(
                "INSERT INTO orders (id, user_id, provider, plan_id, plan_type, amount_minor, \
                 currency, status, paid_at, refunded_minor, expires_at, created_at, updated_at) \
                 VALUES ('ord_{n}', '{user}', '{provider}', 'p', 'one_time', 1000, 'USD', \
                 '{status}', {paid}, {refunded}, 9999, {created}, {created})"
            ))
            .await;
    }
    let list = |filter: OrderFilter| async move {
        let (items, _) = walk(2, |k| {
            let filter = filter.clone();
            async move { store.orders_page(&filter, &k).await.unwrap() }
        })
        .await;
        items
            .iter()
            .map(|r| r.order.id().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list(OrderFilter::default()).await,
        ["ord_4", "ord_3", "ord_2", "ord_1", "ord_0"]
    );
    let paid = OrderFilter {
        status: Some(OrderStatusKind::Paid),
        ..OrderFilter::default()
    };
    assert_eq!(list(paid).await, ["ord_4", "ord_2", "ord_0"]);
    let qr = OrderFilter {
        provider: Some(ProviderId::WalletQr),
        ..OrderFilter::default()
    };
    assert_eq!(list(qr).await, ["ord_1"]);
    let bob_paid = OrderFilter {
        status: Some(OrderStatusKind::Refunded),
        provider: Some(ProviderId::CardGateway),
        user_id: Some(uid("usr_beta01")),
    };
    assert_eq!(list(bob_paid).await, ["ord_3"]);
    let totals = store.payment_totals(&uid("usr_beta01")).await.unwrap();
    assert_eq!(totals.len(), 1);
    assert_eq!(
        (
            totals[0].currency,
            totals[0].paid_minor,
            totals[0].refunded_minor
        ),
        (Currency::Usd, 2000, 1000)
    );
    let ann = store.payment_totals(&uid("usr_alpha1")).await.unwrap();
    assert_eq!(
        (ann[0].paid_minor, ann[0].refunded_minor),
        (2000, 0),
        "pending is not paid"
    );
    assert!(
        store
            .payment_totals(&uid("usr_gamma1"))
            .await
            .unwrap()
            .is_empty()
    );
}

fn adjust(user: &str, amount: i64, reference: &str) -> AdjustCommand {
    AdjustCommand {
        account_id: domain::AccountId::personal(&uid(user)),
        amount: CreditDelta::from_hundredths(amount).unwrap(),
        note: format!("goodwill ({reference})"),
        reference: reference.into(),
        expires_at: None,
        grant: (
            domain::GrantCategory::Compensation,
            domain::GrantPriority::default(),
        ),
        spend_order: domain::SpendOrder::default(),
        now: t(1_000 + amount.abs()),
    }
}

async fn an_adjustment_and_its_audit_entry_commit_together(store: &TestStore) {
    let u = user(store, "u1").await;
    let admin = user(store, "boss").await;
    let LedgerEffect::Written(up) = store
        .adjust(&adjust("u1", 500, "t-1"), &admin)
        .await
        .unwrap()
    else {
        panic!("not written")
    };
    assert_eq!(up.balance_after.hundredths(), 500);
    assert_eq!(
        store
            .adjust(&adjust("u1", 500, "t-1"), &admin)
            .await
            .unwrap(),
        LedgerEffect::Nothing,
        "a replay by its key"
    );
    assert!(matches!(
        store.adjust(&adjust("u1", -900, "t-2"), &admin).await,
        Err(SpendError::Insufficient { .. })
    ));
    store
        .adjust(&adjust("u1", -200, "t-3"), &admin)
        .await
        .unwrap();
    assert_eq!(
        store.raw_i64("SELECT COUNT(*) FROM admin_audit").await,
        2,
        "nothing for the replay or the refused debit"
    );
    let (log, pages) = walk(1, |k| async move { store.audit_page(&k).await.unwrap() }).await;
    assert_eq!(pages, 2);
    assert_eq!(log[0].action, AuditAction::CreditsDebited);
    assert_eq!(log[1].action, AuditAction::CreditsGranted);
    assert_eq!(
        (log[1].admin_id.as_str(), log[1].object_kind.as_str()),
        ("boss", "user")
    );
    assert_eq!(log[1].object_id, u.as_str());
    let before: serde_json::Value = serde_json::from_str(log[0].before.as_ref().unwrap()).unwrap();
    let after: serde_json::Value = serde_json::from_str(log[0].after.as_ref().unwrap()).unwrap();
    assert_eq!(before["balanceHundredths"], 500);
    assert_eq!(after["balanceHundredths"], 300);
    assert_eq!(after["amountHundredths"], -200);
    assert_eq!(after["note"], "goodwill (t-3)");
    let id = store
        .record_audit(&NewAudit {
            admin_id: admin.clone(),
            action: AuditAction::OrderRefunded,
            object_kind: "order",
            object_id: "ord_1".into(),
            before: None,
            after: None,
            at: t(5_000),
        })
        .await
        .unwrap();
    let newest = store.audit_page(&Keyset::first(1)).await.unwrap();
    assert_eq!(
        (newest.items[0].id, newest.items[0].before.as_deref()),
        (id, None)
    );
}

/// An administrator's key belongs to one adjustment of one user: the same key for another
/// user (a grant or a debit), another amount, or a sign-up grant's source is a conflict that
/// writes nothing, never a silent "done".
async fn an_adjustment_key_is_bound_to_its_user_and_request(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let admin = user(store, "boss").await;
    store
        .adjust(&adjust("ada", 500, "k-1"), &admin)
        .await
        .unwrap();
    let replay = store.adjust(&adjust("ada", 500, "k-1"), &admin).await;
    assert_eq!(replay.unwrap(), LedgerEffect::Nothing);
    store
        .adjust(&adjust("bob", 900, "bob-own"), &admin)
        .await
        .unwrap();
    for other in [
        adjust("bob", 500, "k-1"),
        adjust("bob", -100, "k-1"),
        adjust("ada", 700, "k-1"),
    ] {
        let refused = store.adjust(&other, &admin).await;
        assert!(
            matches!(refused, Err(SpendError::IdempotencyConflict)),
            "{other:?}: {refused:?}"
        );
    }
    // By another administrator too: the lot's source is the first one's.
    let plain = store.adjust(&adjust("bob", 500, "k-1"), &bob).await;
    assert!(
        matches!(plain, Err(SpendError::IdempotencyConflict)),
        "{plain:?}"
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&ada))
            .await
            .unwrap()
            .hundredths(),
        500
    );
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&bob))
            .await
            .unwrap()
            .hundredths(),
        900
    );
    assert_eq!(store.raw_i64("SELECT COUNT(*) FROM admin_audit").await, 2);
}

/// A grant that would take the balance past the largest one is refused by the domain's rule
/// before anything is written (not by the database's CHECK); its replay stays a replay.
async fn a_grant_past_the_largest_balance_is_refused_before_it_is_written(store: &TestStore) {
    let ada = user(store, "ada").await;
    let admin = user(store, "boss").await;
    let near_max = 99_999_999_900_000;
    let first = adjust("ada", near_max, "big-1");
    store.adjust(&first, &admin).await.unwrap();
    let refused = store
        .adjust(&adjust("ada", near_max, "big-2"), &admin)
        .await;
    assert!(
        matches!(refused, Err(SpendError::BalanceLimit { balance, .. }) if balance.hundredths() == near_max),
        "{refused:?}"
    );
    let replay = store.adjust(&first, &admin).await.unwrap();
    assert_eq!(replay, LedgerEffect::Nothing);
    store
        .adjust(&adjust("ada", 100_000, "fits"), &admin)
        .await
        .unwrap();
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&ada))
            .await
            .unwrap()
            .hundredths(),
        near_max + 100_000
    );
    assert_eq!(store.raw_i64("SELECT COUNT(*) FROM admin_audit").await, 2);
}

async fn a_ledger_and_the_inbox_are_walked_by_keyset(store: &TestStore) {
    user(store, "u1").await;
    let admin = user(store, "boss").await;
    for n in 1..=5 {
        store
            .adjust(&adjust("u1", n * 100, &format!("g-{n}")), &admin)
            .await
            .unwrap();
    }
    let (entries, pages) = walk(2, |k| async move {
        store.transactions_page(&uid("u1"), &k).await.unwrap()
    })
    .await;
    assert_eq!(pages, 3);
    let amounts: Vec<i64> = entries.iter().map(|e| e.amount.hundredths()).collect();
    assert_eq!(amounts, [500, 400, 300, 200, 100], "newest first");
    for (n, outcome) in [
        EventOutcome::Applied,
        EventOutcome::Mismatch,
        EventOutcome::Applied,
    ]
    .into_iter()
    .enumerate()
    {
        let mut entry = inbox(&format!("evt-{n}"), 10 + n as i64);
        entry.outcome = outcome;
        store.record_event(&entry, &[], None).await.unwrap();
    }
    let filter = |outcome: Option<EventOutcome>| InboxFilter {
        provider: Some(ProviderId::CardGateway),
        outcome,
    };
    let (all, _) = walk(2, |k| {
        let f = filter(None);
        async move { store.inbox_page(&f, &k).await.unwrap() }
    })
    .await;
    let ids: Vec<&str> = all.iter().map(|e| e.entry.event_id.as_str()).collect();
    assert_eq!(ids, ["evt-2", "evt-1", "evt-0"]);
    let (mismatches, _) = walk(2, |k| {
        let f = filter(Some(EventOutcome::Mismatch));
        async move { store.inbox_page(&f, &k).await.unwrap() }
    })
    .await;
    assert_eq!(mismatches.len(), 1);
    let found = store.find_recorded_event(mismatches[0].id).await.unwrap();
    assert_eq!(found.unwrap().entry.event_id, "evt-1");
    assert!(store.find_recorded_event(-1).await.unwrap().is_none());
}

async fn new_users_get_the_signup_grant_once_in_their_creation(store: &TestStore) {
    let grant = SignupGrant {
        amount: c(1_000),
        expires_after_days: Some(30),
        daily_cap: std::num::NonZeroU32::new(100).unwrap(),
    };
    let granting = SeaOrmStore::clone(store).with_signup_grant(Some(grant));
    let new = NewUser {
        id: uid("usr_new"),
        email: Email::parse("new@example.com").unwrap(),
        password_hash: None,
        role: Role::User,
        created_at: t(DAY_MS),
        signup_identity: Some(SignupIdentity::of_email(
            &Email::parse("new@example.com").unwrap(),
        )),
    };
    granting.create_user(&new).await.unwrap();
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&new.id))
            .await
            .unwrap(),
        c(1_000)
    );
    let taken = NewUser {
        id: uid("usr_other"),
        ..new.clone()
    };
    assert!(
        matches!(
            granting.create_user(&taken).await,
            Err(StoreError::Conflict(_))
        ),
        "a taken address"
    );
    assert_eq!(
        store
            .raw_i64("SELECT COUNT(*) FROM credit_transactions")
            .await,
        1,
        "the refused user got nothing"
    );
    assert_eq!(
        store
            .raw_i64("SELECT expires_at FROM credit_grants WHERE account_id = 'usr_new'")
            .await,
        31 * DAY_MS
    );
    let host = NewHostUser {
        issuer: "https://host.example".into(),
        subject: "sub-1".into(),
        created_at: t(DAY_MS),
        signup_identity: Some(SignupIdentity::of_host_subject(
            "https://host.example",
            "sub-1",
        )),
        contact: Default::default(),
    };
    let first = granting.find_or_create_host_user(&host).await.unwrap();
    let again = granting.find_or_create_host_user(&host).await.unwrap();
    assert_eq!(first.id, again.id);
    assert_eq!(
        granting
            .balance(&domain::AccountId::personal(&first.id))
            .await
            .unwrap(),
        c(1_000),
        "once"
    );
    let plain = user(store, "usr_plain").await;
    assert_eq!(
        store
            .balance(&domain::AccountId::personal(&plain))
            .await
            .unwrap(),
        c(0),
        "no grant configured"
    );
}

/// A plain one-time plan.
fn audited_plan(id: &str, amount: &str, hidden: bool) -> StoredPlan {
    let draft = PlanDraft {
        id: id.into(),
        provider: Some("wallet_qr".into()),
        amount: Some(amount.parse().unwrap()),
        currency: Some("CNY".into()),
        hidden,
        months: Some(999_999),
        duration_type: Some("one_time".into()),
        i18n: [(
            "en".to_owned(),
            PlanText {
                name: "Lifetime".into(),
                ..PlanText::default()
            },
        )]
        .into(),
        ..PlanDraft::default()
    };
    StoredPlan {
        plan: Plan::from_draft(&draft).unwrap(),
        listing: Listing {
            sort_order: 0,
            locales: Vec::new(),
        },
    }
}

fn entry(admin: &UserId, action: AuditAction, object: &str, at: i64) -> NewAudit {
    NewAudit {
        admin_id: admin.clone(),
        action,
        object_kind: "plan",
        object_id: object.into(),
        before: None,
        after: None,
        at: t(at),
    }
}

async fn plan_and_key_writes_commit_with_their_audit_entry_or_not_at_all(store: &TestStore) {
    let admin = user(store, "boss").await;
    let audits = || store.raw_i64("SELECT COUNT(*) FROM admin_audit");
    let plan = audited_plan("life", "99", false);
    let created = entry(&admin, AuditAction::PlanCreated, "life", 10);
    store
        .write_admin(AdminWrite::CreatePlan(&plan), &created)
        .await
        .unwrap();
    assert_eq!(audits().await, 1);
    assert!(
        store
            .write_admin(AdminWrite::CreatePlan(&plan), &created)
            .await
            .is_err(),
        "a taken id"
    );
    assert_eq!(audits().await, 1, "no entry for the refused create");
    let hidden = audited_plan("life", "99", true);
    store
        .write_admin(
            AdminWrite::UpdatePlan(&hidden),
            &entry(&admin, AuditAction::PlanUpdated, "life", 20),
        )
        .await
        .unwrap();
    let stored = store
        .find_plan(&PlanId::new("life").unwrap())
        .await
        .unwrap();
    assert_eq!(stored.unwrap().plan.visibility(), Visibility::Hidden);
    let ghost = audited_plan("ghost", "1", false);
    let unknown = PlanId::new("ghost").unwrap();
    for write in [
        AdminWrite::UpdatePlan(&ghost),
        AdminWrite::DeletePlan(&unknown),
        AdminWrite::ReorderPlans(std::slice::from_ref(&unknown)),
        AdminWrite::RevokeApiKey("key_none"),
    ] {
        let refused = store
            .write_admin(write, &entry(&admin, AuditAction::PlanUpdated, "ghost", 30))
            .await;
        assert!(
            matches!(refused, Err(StoreError::NotFound)),
            "{write:?}: {refused:?}"
        );
    }
    assert_eq!(audits().await, 2, "no entry for a refused write");
    let key = ApiKey {
        id: "key_1".into(),
        owner: admin.clone(),
        name: "backend".into(),
        prefix: "tly_abcd".into(),
        scopes: vec![Scope::CreditsRead],
        account: None,
        created_at: t(40),
        revoked_at: None,
    };
    let hash = TokenHash("digest".into());
    store
        .write_admin(
            AdminWrite::CreateApiKey(&key, &hash),
            &entry(&admin, AuditAction::ApiKeyCreated, "key_1", 40),
        )
        .await
        .unwrap();
    assert_eq!(
        store.find_api_key(&hash).await.unwrap().unwrap().id,
        "key_1"
    );
    store
        .write_admin(
            AdminWrite::RevokeApiKey("key_1"),
            &entry(&admin, AuditAction::ApiKeyRevoked, "key_1", 50),
        )
        .await
        .unwrap();
    assert_eq!(
        store.find_api_key(&hash).await.unwrap(),
        None,
        "revoked at once"
    );
    store
        .write_admin(
            AdminWrite::DeletePlan(&PlanId::new("life").unwrap()),
            &entry(&admin, AuditAction::PlanDeleted, "life", 60),
        )
        .await
        .unwrap();
    assert_eq!(store.list_plans().await.unwrap(), Vec::new());
    let log = store.audit_page(&Keyset::first(10)).await.unwrap().items;
    let actions: Vec<AuditAction> = log.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [
            AuditAction::PlanDeleted,
            AuditAction::ApiKeyRevoked,
            AuditAction::ApiKeyCreated,
            AuditAction::PlanUpdated,
            AuditAction::PlanCreated,
        ]
    );
}

async fn team_accounts_are_listed_newest_first_with_balance_and_present_members(store: &TestStore) {
    use application::ports::{NewTeam, TeamStore};
    use domain::AccountId;
    seed_users(store).await;
    for (id, owner, created) in [
        ("team_a", "usr_alpha1", 100),
        ("team_b", "usr_beta01", 200),
        ("team_c", "usr_gamma1", 200),
    ] {
        let team = NewTeam {
            id: AccountId::new(id).unwrap(),
            name: format!("Team {id}"),
            owner: uid(owner),
            now: t(created),
        };
        store.create_team(&team).await.unwrap();
    }
    store
        .raw(
            "INSERT INTO account_members (account_id, user_id, role, added_at) \
             VALUES ('team_a', 'usr_alpha2', 'member', 150)",
        )
        .await;
    // Away from a host organisation's team: kept, but not a present member.
    store
        .raw(
            "INSERT INTO account_members_away (account_id, user_id, role, added_at, away_since) \
             VALUES ('team_a', 'usr_beta02', 'member', 150, 160)",
        )
        .await;
    store
        .raw(
            "INSERT INTO credit_balances (account_id, balance_hundredths, transaction_count, \
             updated_at) VALUES ('team_a', 4200, 1, 150), ('usr_alpha1', 900, 1, 150)",
        )
        .await;
    store
        .raw("UPDATE accounts SET host_organisation = 'org_42' WHERE id = 'team_b'")
        .await;
    let (teams, pages) = walk(2, |k| async move { store.team_accounts(&k).await.unwrap() }).await;
    let listed: Vec<(&str, i64, u64, Option<&str>)> = teams
        .iter()
        .map(|t| {
            (
                t.account.id.as_str(),
                t.balance.hundredths(),
                t.members,
                t.account.host_organisation.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("team_c", 0, 1, None),
            ("team_b", 0, 1, Some("org_42")),
            ("team_a", 4200, 2, None),
        ],
        "newest first, ties by id; no personal account"
    );
    assert_eq!(pages, 2);
    assert_eq!(teams[2].account.name.as_deref(), Some("Team team_a"));
    assert_eq!(teams[2].account.created_at, t(100));
}

/// The team accounts' page as the store sends it, as the planner sees it among 5 000 accounts:
/// one range of `accounts_kind_created`, never a sort of every account.
async fn a_team_accounts_page_walks_the_index_instead_of_sorting(store: &TestStore) {
    let seed = "INSERT INTO accounts (id, kind, name, created_by, created_at) \
        SELECT CASE WHEN g % 250 = 0 THEN 'team_' ELSE 'usr_' END || CAST(g AS TEXT), \
        CASE WHEN g % 250 = 0 THEN 'team' ELSE 'personal' END, \
        CASE WHEN g % 250 = 0 THEN 'Team' END, NULL, g FROM";
    let query = "SELECT a.id, a.kind, a.name, a.host_organisation, a.created_at, \
        COALESCE(b.balance_hundredths, 0) AS balance_hundredths, \
        (SELECT COUNT(*) FROM account_members m WHERE m.account_id = a.id) AS members \
        FROM accounts a LEFT JOIN credit_balances b ON b.account_id = a.id \
        WHERE a.kind = 'team' AND (a.created_at, a.id) < (4000, 'team_4000') \
        ORDER BY a.created_at DESC, a.id DESC LIMIT 26";
    let plan = match store.backend() {
        sea_orm::DbBackend::Postgres => {
            store
                .raw(&format!("{seed} generate_series(1, 5000) AS g"))
                .await;
            store.raw("ANALYZE accounts").await;
            explain(store, &format!("EXPLAIN {query}")).await
        }
        _ => {
            store
                .raw(&format!(
                    "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s \
                     WHERE g < 5000) {seed} s"
                ))
                .await;
            let plan = explain(store, &format!("EXPLAIN QUERY PLAN {query}")).await;
            assert!(!plan.contains("TEMP B-TREE"), "the page sorts: {plan}");
            plan
        }
    };
    assert!(plan.contains("accounts_kind_created"), "{plan}");
    let page = store.team_accounts(&Keyset::first(25)).await.unwrap();
    assert_eq!(page.items.len(), 20);
    assert_eq!(page.items[0].account.id.as_str(), "team_5000");
}

contract_tests!(
    team_accounts_are_listed_newest_first_with_balance_and_present_members,
    a_team_accounts_page_walks_the_index_instead_of_sorting,
    new_users_get_the_signup_grant_once_in_their_creation,
    customers_are_found_by_email_or_id_prefix,
    orders_are_listed_newest_first_by_status_provider_and_buyer,
    an_adjustment_and_its_audit_entry_commit_together,
    an_adjustment_key_is_bound_to_its_user_and_request,
    a_grant_past_the_largest_balance_is_refused_before_it_is_written,
    plan_and_key_writes_commit_with_their_audit_entry_or_not_at_all,
    a_ledger_and_the_inbox_are_walked_by_keyset,
);
