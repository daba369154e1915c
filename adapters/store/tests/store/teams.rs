//! Teams: creating a team, changing its members by the rules, and members spending the team's
//! pool within their limits, on both databases, with group commit off and on.

use std::collections::BTreeMap;

use application::accounts::TokenHash;
use application::host_events::{self, HostEventKind};
use application::pagination::{Page, PageRequest};
use application::ports::{
    AcceptError, AcceptInvitation, ConsumeCommand, CreditLedger, GrantCommand, GrantSource,
    HostOrgSync, IdempotencyRecord, InboxEntry, Invitation, Member, MemberChangeError,
    MemberCommand, NewInvitation, NewTeam, OrderRecord, OrderRepository, PaymentEventCommand,
    ReservationError, ReserveCommand, SpendError, SubscriptionChange, SubscriptionRepository,
    TeamStore, UsageContext, Writes,
};
use application::use_cases::teams::host_team_id;
use domain::InvitationRefusal;
use domain::{
    AccountId, BillingPeriod, LimitWindow, MemberChange, MemberChangeRefusal, MemberLimit,
    MemberRole, PlanId, ProviderId, RenewalIntent, ReservationId, Subscription, SubscriptionId,
    SubscriptionParts, SubscriptionStatus, UserId,
};
use serde_json::Value;

use crate::support::{TestStore, c, contract_tests, t, user};

/// 2026-11-29T15:30:00Z.
const NOW: i64 = 1_795_966_200_000;

fn team_id(name: &str) -> AccountId {
    AccountId::new(format!("team_{name}")).unwrap()
}

async fn team(store: &TestStore, name: &str, owner: &UserId) -> AccountId {
    let id = team_id(name);
    let team = NewTeam {
        id: id.clone(),
        name: format!("Team {name}"),
        owner: owner.clone(),
        now: t(NOW),
    };
    store.create_team(&team).await.expect("create team");
    id
}

async fn change(
    store: &TestStore,
    (account, actor, target): (&AccountId, &UserId, &UserId),
    changes: Vec<MemberChange>,
) -> Result<(), MemberChangeError> {
    let command = MemberCommand {
        account: account.clone(),
        actor: actor.clone(),
        target: target.clone(),
        changes,
        seats: None,
        now: t(NOW),
    };
    store
        .change_member(&command, host_events::member_changed)
        .await
        .map(drop)
}

fn refused(result: Result<(), MemberChangeError>) -> MemberChangeRefusal {
    match result {
        Err(MemberChangeError::Refused(refusal)) => refusal,
        other => panic!("not refused: {other:?}"),
    }
}

fn daily(credits: i64) -> MemberLimit {
    MemberLimit {
        credits: c(credits * 100),
        window: LimitWindow::Day,
    }
}

/// Fund `account` with `whole` credits.
async fn fund(store: &TestStore, account: &AccountId, whole: i64) {
    let grant = GrantCommand {
        account_id: account.clone(),
        amount: c(whole * 100),
        source: GrantSource::Admin(format!("fund-{account}")),
        expires_at: None,
        now: t(NOW),
    };
    store.grant(&grant).await.expect("fund");
}

fn spend(account: &AccountId, member: &UserId, whole: i64, key: &str, at: i64) -> ConsumeCommand {
    ConsumeCommand {
        account_id: account.clone(),
        member_id: Some(member.clone()),
        amount: c(whole * 100),
        idempotency: IdempotencyRecord {
            key: domain::IdempotencyKey::new(key).unwrap(),
            request_hash: format!("{member}:{whole}"),
        },
        context: UsageContext {
            feature: Some("chat".into()),
            ..UsageContext::default()
        },
        now: t(at),
        low_balance_below: None,
        spend_order: domain::SpendOrder::default(),
    }
}

fn hold(account: &AccountId, member: &UserId, whole: i64, id: &str, at: i64) -> ReserveCommand {
    ReserveCommand {
        reservation_id: ReservationId::new(id).unwrap(),
        account_id: account.clone(),
        member_id: Some(member.clone()),
        amount: c(whole * 100),
        idempotency: IdempotencyRecord {
            key: domain::IdempotencyKey::new(id).unwrap(),
            request_hash: format!("{member}:{whole}"),
        },
        context: UsageContext::default(),
        now: t(at),
        expires_at: t(at + 3_600_000),
        low_balance_below: None,
    }
}

/// The events a team's changes told, as `(type, data)`.
async fn member_events(store: &TestStore) -> Vec<(HostEventKind, Value)> {
    // Once every committed event is readable (the PostgreSQL feed holds back events while an
    // older transaction of the cluster runs, other tests' included).
    let events = crate::host_events::all_events(store).await;
    events
        .into_iter()
        .filter(|e| e.kind.code().starts_with("account."))
        .map(|e| {
            let payload: Value = serde_json::from_str(&e.payload).unwrap();
            (e.kind, payload["data"].clone())
        })
        .collect()
}

pub async fn members_change_by_the_rules_and_each_change_is_told(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let cy = user(store, "cy").await;
    let acme = team(store, "acme", &ada).await;
    let members = store.members(&acme).await.unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].role, MemberRole::Owner);
    assert_eq!(members[0].email.as_deref(), Some("ada@example.com"));
    // Owners add; members do not; nobody is added twice.
    change(
        store,
        (&acme, &ada, &bob),
        vec![MemberChange::Add(MemberRole::Admin)],
    )
    .await
    .unwrap();
    let add_cy = vec![MemberChange::Add(MemberRole::Member)];
    change(store, (&acme, &bob, &cy), add_cy.clone())
        .await
        .unwrap();
    assert_eq!(
        refused(change(store, (&acme, &bob, &cy), add_cy).await),
        MemberChangeRefusal::AlreadyMember
    );
    let nobody = UserId::new("nobody").unwrap();
    assert!(matches!(
        change(
            store,
            (&acme, &ada, &nobody),
            vec![MemberChange::Add(MemberRole::Member)]
        )
        .await,
        Err(MemberChangeError::UserNotFound)
    ));
    // An admin neither makes nor touches an owner; the last owner stays.
    let promote = vec![MemberChange::SetRole(MemberRole::Owner)];
    assert_eq!(
        refused(change(store, (&acme, &bob, &cy), promote).await),
        MemberChangeRefusal::NotAllowed
    );
    assert_eq!(
        refused(change(store, (&acme, &bob, &ada), vec![MemberChange::Remove]).await),
        MemberChangeRefusal::NotAllowed
    );
    assert_eq!(
        refused(change(store, (&acme, &ada, &ada), vec![MemberChange::Remove]).await),
        MemberChangeRefusal::LastOwner
    );
    // Several changes are one: a refused second change undoes the first.
    let both = vec![
        MemberChange::SetLimit(Some(daily(5))),
        MemberChange::SetRole(MemberRole::Owner),
    ];
    assert_eq!(
        refused(change(store, (&acme, &bob, &cy), both).await),
        MemberChangeRefusal::NotAllowed
    );
    assert_eq!(store.member(&acme, &cy).await.unwrap().unwrap().limit, None);
    change(
        store,
        (&acme, &ada, &cy),
        vec![MemberChange::SetRole(MemberRole::Admin)],
    )
    .await
    .unwrap();
    change(store, (&acme, &cy, &cy), vec![MemberChange::Remove])
        .await
        .unwrap();
    assert!(store.member(&acme, &cy).await.unwrap().is_none());
    let teams = store.memberships(&bob).await.unwrap();
    assert_eq!(teams.len(), 1);
    assert_eq!(teams[0].account.name.as_deref(), Some("Team acme"));
    assert_eq!(teams[0].role, MemberRole::Admin);
    // Personal accounts have no other members.
    let personal = AccountId::personal(&ada);
    assert_eq!(
        refused(
            change(
                store,
                (&personal, &ada, &bob),
                vec![MemberChange::Add(MemberRole::Member)]
            )
            .await
        ),
        MemberChangeRefusal::PersonalAccount
    );
    let told = member_events(store).await;
    let kinds: Vec<&str> = told.iter().map(|(k, _)| k.code()).collect();
    assert_eq!(
        kinds,
        [
            "account.member_added",
            "account.member_added",
            "account.member_added",
            "account.member_role_changed",
            "account.member_removed",
        ]
    );
    for (_, data) in &told {
        assert_eq!(data["accountId"], acme.as_str(), "{data}");
    }
    assert_eq!(told[2].1["memberId"], cy.as_str());
    assert_eq!(told[2].1["by"], bob.as_str());
    assert_eq!(told[3].1["role"], "admin");
    assert_eq!(told[3].1["previousRole"], "member");
    assert_eq!(told[4].1["by"], cy.as_str(), "cy left");
}

pub async fn a_member_spends_the_pool_within_their_limit(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let eve = user(store, "eve").await;
    let acme = team(store, "acme", &ada).await;
    fund(store, &acme, 100).await;
    change(
        store,
        (&acme, &ada, &bob),
        vec![
            MemberChange::Add(MemberRole::Member),
            MemberChange::SetLimit(Some(daily(10))),
        ],
    )
    .await
    .unwrap();
    // Within the limit: the pool pays and the ledger names the member.
    let (spent, _) = store
        .consume(&spend(&acme, &bob, 6, "k1", NOW))
        .await
        .unwrap();
    assert_eq!(spent.account_id, acme);
    assert_eq!(spent.member_id.as_ref(), Some(&bob));
    assert_eq!(store.balance(&acme).await.unwrap(), c(9_400));
    // Past it: refused with what is left and when it resets; nothing written.
    let past = store.consume(&spend(&acme, &bob, 5, "k2", NOW)).await;
    let Err(SpendError::LimitReached(reached)) = past else {
        panic!("{past:?}");
    };
    assert_eq!(reached.left, c(400));
    assert_eq!(reached.resets_at, t(1_795_996_800_000));
    assert_eq!(store.balance(&acme).await.unwrap(), c(9_400));
    // A hold counts while held; its release gives the headroom back.
    store
        .reserve(&hold(&acme, &bob, 4, "r1", NOW))
        .await
        .unwrap();
    assert!(matches!(
        store.consume(&spend(&acme, &bob, 1, "k3", NOW)).await,
        Err(SpendError::LimitReached(_))
    ));
    let rid = ReservationId::new("r1").unwrap();
    store
        .release((&acme, Some(&bob)), &rid, t(NOW + 1))
        .await
        .unwrap();
    store
        .consume(&spend(&acme, &bob, 4, "k4", NOW + 2))
        .await
        .unwrap();
    // The next day starts from nothing.
    let tomorrow = NOW + 86_400_000;
    store
        .consume(&spend(&acme, &bob, 10, "k5", tomorrow))
        .await
        .unwrap();
    // Someone outside the team spends nothing from it, and cannot resolve a member's hold.
    assert!(matches!(
        store.consume(&spend(&acme, &eve, 1, "k6", tomorrow)).await,
        Err(SpendError::NotAMember)
    ));
    let day3 = tomorrow + 86_400_000;
    store
        .reserve(&hold(&acme, &bob, 5, "r2", day3))
        .await
        .unwrap();
    let r2 = ReservationId::new("r2").unwrap();
    assert!(matches!(
        store.release((&acme, Some(&eve)), &r2, t(day3)).await,
        Err(ReservationError::NotFound)
    ));
    // An overrun is a new spend within the limit: 5 held, 12 used, 10 allowed: 10 charged.
    let (settled, _) = store
        .settle((&acme, Some(&bob)), &r2, c(1_200), t(day3 + 1))
        .await
        .unwrap();
    assert!(matches!(
        settled.status,
        application::ports::ReservationStatus::Settled { charged, .. } if charged == c(1_000)
    ));
    // A removed member's hold settles within what it holds; they spend nothing more.
    let day4 = day3 + 86_400_000;
    store
        .reserve(&hold(&acme, &bob, 3, "r3", day4))
        .await
        .unwrap();
    change(store, (&acme, &ada, &bob), vec![MemberChange::Remove])
        .await
        .unwrap();
    assert!(matches!(
        store.consume(&spend(&acme, &bob, 1, "k7", day4)).await,
        Err(SpendError::NotAMember)
    ));
    let r3 = ReservationId::new("r3").unwrap();
    let (settled, _) = store
        .settle((&acme, Some(&bob)), &r3, c(900), t(day4 + 1))
        .await
        .unwrap();
    assert!(matches!(
        settled.status,
        application::ports::ReservationStatus::Settled { charged, .. } if charged == c(300)
    ));
    // 100 - 6 - 4 - 10 - 10 - 3.
    assert_eq!(store.balance(&acme).await.unwrap(), c(6_700));
    assert_ledger_adds_up(store, &acme).await;
}

/// A member's limit or membership changed between two of their spends applies to the second,
/// including under group commit, whose batches decide members' spends from rows read (or
/// remembered from the writer's last batch) and write them only if the rows still hold them.
pub async fn a_changed_limit_or_membership_applies_to_the_next_spend(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let acme = team(store, "acme", &ada).await;
    fund(store, &acme, 100).await;
    let add = vec![
        MemberChange::Add(MemberRole::Member),
        MemberChange::SetLimit(Some(daily(10))),
    ];
    change(store, (&acme, &ada, &bob), add).await.unwrap();
    for key in ["k1", "k2"] {
        store
            .consume(&spend(&acme, &bob, 3, key, NOW))
            .await
            .unwrap();
    }
    // Lowered to what was spent: nothing is left.
    let lowered = vec![MemberChange::SetLimit(Some(daily(6)))];
    change(store, (&acme, &ada, &bob), lowered).await.unwrap();
    let past = store.consume(&spend(&acme, &bob, 1, "k3", NOW + 1)).await;
    let Err(SpendError::LimitReached(reached)) = past else {
        panic!("{past:?}");
    };
    assert_eq!(reached.left, c(0));
    // No limit: the pool alone bounds them.
    let lifted = vec![MemberChange::SetLimit(None)];
    change(store, (&acme, &ada, &bob), lifted).await.unwrap();
    store
        .consume(&spend(&acme, &bob, 50, "k4", NOW + 2))
        .await
        .unwrap();
    // Removed: they spend nothing more, and a retry of a spend they made still replays.
    change(store, (&acme, &ada, &bob), vec![MemberChange::Remove])
        .await
        .unwrap();
    assert!(matches!(
        store.consume(&spend(&acme, &bob, 1, "k5", NOW + 3)).await,
        Err(SpendError::NotAMember)
    ));
    let (again, replay) = store
        .consume(&spend(&acme, &bob, 50, "k4", NOW + 2))
        .await
        .unwrap();
    assert_eq!(replay, application::ports::Replay::Replayed);
    assert_eq!(again.member_id.as_ref(), Some(&bob));
    assert_eq!(store.balance(&acme).await.unwrap(), c(4_400));
    assert_ledger_adds_up(store, &acme).await;
}

pub async fn a_limit_set_mid_window_counts_what_was_spent(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let acme = team(store, "acme", &ada).await;
    fund(store, &acme, 100).await;
    change(
        store,
        (&acme, &ada, &bob),
        vec![MemberChange::Add(MemberRole::Member)],
    )
    .await
    .unwrap();
    store
        .consume(&spend(&acme, &bob, 7, "k1", NOW - 1_000))
        .await
        .unwrap();
    change(
        store,
        (&acme, &ada, &bob),
        vec![MemberChange::SetLimit(Some(daily(10)))],
    )
    .await
    .unwrap();
    let member = store.member(&acme, &bob).await.unwrap().unwrap();
    assert_eq!(member.count.spent, c(700));
    assert!(matches!(
        store.consume(&spend(&acme, &bob, 4, "k2", NOW)).await,
        Err(SpendError::LimitReached(r)) if r.left == c(300)
    ));
}

pub async fn a_limit_counts_holds_of_its_window_and_not_older_ones(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let acme = team(store, "acme", &ada).await;
    fund(store, &acme, 100).await;
    change(
        store,
        (&acme, &ada, &bob),
        vec![MemberChange::Add(MemberRole::Member)],
    )
    .await
    .unwrap();
    // A hold from yesterday, released today, gives nothing back to today's window.
    let yesterday = NOW - 86_400_000;
    store
        .reserve(&hold(&acme, &bob, 5, "old", yesterday))
        .await
        .unwrap();
    store
        .consume(&spend(&acme, &bob, 3, "k1", NOW - 2_000))
        .await
        .unwrap();
    let old = ReservationId::new("old").unwrap();
    store
        .release((&acme, Some(&bob)), &old, t(NOW - 1_500))
        .await
        .unwrap();
    // A hold of today, pending when the limit is set, counts; its release gives it back.
    store
        .reserve(&hold(&acme, &bob, 4, "today", NOW - 1_000))
        .await
        .unwrap();
    change(
        store,
        (&acme, &ada, &bob),
        vec![MemberChange::SetLimit(Some(daily(10)))],
    )
    .await
    .unwrap();
    let member = store.member(&acme, &bob).await.unwrap().unwrap();
    assert_eq!(member.count.spent, c(700), "3 spent and 4 held today");
    let today = ReservationId::new("today").unwrap();
    store
        .release((&acme, Some(&bob)), &today, t(NOW))
        .await
        .unwrap();
    let member = store.member(&acme, &bob).await.unwrap().unwrap();
    assert_eq!(member.count.spent, c(300));
    store
        .consume(&spend(&acme, &bob, 7, "k2", NOW))
        .await
        .unwrap();
}

/// The balance is the sum of the account's ledger, and the last row records it.
async fn assert_ledger_adds_up(store: &TestStore, account: &AccountId) {
    let page = application::pagination::PageRequest::new(Some(1), Some(100)).unwrap();
    let rows = store.transactions(account, page).await.unwrap().items;
    let sum: i64 = rows.iter().map(|t| t.amount.hundredths()).sum();
    let balance = store.balance(account).await.unwrap();
    assert_eq!(sum, balance.hundredths());
    assert_eq!(rows.first().map(|t| t.balance_after), Some(balance));
}

pub async fn members_never_pass_their_limits_under_concurrency(store: &TestStore) {
    let owner = user(store, "owner").await;
    let pool = team(store, "pool", &owner).await;
    fund(store, &pool, 1_000).await;
    let mut members = Vec::new();
    for i in 0..8 {
        let m = user(store, &format!("m{i}")).await;
        change(
            store,
            (&pool, &owner, &m),
            vec![
                MemberChange::Add(MemberRole::Member),
                MemberChange::SetLimit(Some(daily(25))),
            ],
        )
        .await
        .unwrap();
        members.push(m);
    }
    // Each member tries 12 spends of 3 credits at once (36 wanted, 25 allowed: 8 pass).
    let mut tasks = Vec::new();
    for m in &members {
        for k in 0..12 {
            let store = (**store).clone();
            let command = spend(&pool, m, 3, &format!("{m}-{k}"), NOW);
            tasks.push(tokio::spawn(async move { store.consume(&command).await }));
        }
    }
    let mut passed: BTreeMap<String, i64> = BTreeMap::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok((t, _)) => {
                *passed.entry(t.member_id.unwrap().to_string()).or_default() += 1;
            }
            Err(SpendError::LimitReached(_)) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    for m in &members {
        assert_eq!(passed.get(m.as_str()), Some(&8), "{m}: {passed:?}");
        let row = store.member(&pool, m).await.unwrap().unwrap();
        assert_eq!(row.count.spent, c(2_400));
    }
    assert_eq!(
        store.balance(&pool).await.unwrap(),
        c(100_000 - 8 * 8 * 300)
    );
    assert_ledger_adds_up(store, &pool).await;
}

/// An order an owner places for a team, the subscription it starts and the period's grant are
/// the team's: listed by its account, not by the buyer's personal one, and its credits in the
/// team's pool.
pub async fn a_team_s_purchases_are_listed_by_its_account(store: &TestStore) {
    let ada = user(store, "ada").await;
    let acme = team(store, "acme", &ada).await;
    let personal = AccountId::personal(&ada);
    let order = crate::support::order("o1", &ada, 10).for_account(acme.clone());
    store.create_order(&order, None).await.unwrap();
    let own = crate::support::order("o2", &ada, 20);
    store.create_order(&own, None).await.unwrap();
    let found = store.find_order(order.id()).await.unwrap().unwrap();
    assert_eq!(found.order.account_id(), &acme);
    assert_eq!(found.order.user_id(), &ada);
    let page = PageRequest::new(None, None).unwrap();
    let ids = |p: Page<OrderRecord>| -> Vec<String> {
        p.items.iter().map(|r| r.order.id().to_string()).collect()
    };
    assert_eq!(ids(store.list_orders(&acme, page).await.unwrap()), ["o1"]);
    assert_eq!(
        ids(store.list_orders(&personal, page).await.unwrap()),
        ["o2"]
    );
    let subscription = Subscription::restore(SubscriptionParts {
        id: SubscriptionId::new("s1").unwrap(),
        user_id: ada.clone(),
        account: Some(acme.clone()),
        plan_id: PlanId::new("team-yearly").unwrap(),
        provider: ProviderId::CardGateway,
        provider_subscription_id: "sub_1".into(),
        status: SubscriptionStatus::Active,
        current_period: BillingPeriod::new(t(NOW), t(NOW + 1_000)).unwrap(),
        renewal: RenewalIntent::Renews,
        last_event_at: t(NOW),
        sold_terms: None,
    });
    let command = PaymentEventCommand {
        top_up: None,
        bonus: None,
        inbox: InboxEntry {
            provider: ProviderId::CardGateway,
            event_id: "evt_1".into(),
            event_type: "customer.subscription.created".into(),
            payload: String::new(),
            outcome: domain::EventOutcome::Applied,
            detail: None,
            received_at: t(NOW),
            user_id: Some(ada.clone()),
        },
        order: None,
        subscription: Some(SubscriptionChange::Create(
            subscription.clone(),
            Some(order.id().clone()),
        )),
        grant: Some(GrantCommand {
            account_id: subscription.account_id().clone(),
            amount: c(500),
            source: GrantSource::Order(order.id().clone()),
            expires_at: None,
            now: t(NOW),
        }),
        clawbacks: Vec::new(),
        charge: None,
        refund: None,
        told: Vec::new(),
        entitlements: None,
        audit: None,
    };
    store.apply_payment_event(&command).await.unwrap();
    let stored = store.find_subscription(subscription.id()).await.unwrap();
    assert_eq!(stored.as_ref().map(Subscription::account_id), Some(&acme));
    assert_eq!(
        store.list_subscriptions(&acme).await.unwrap(),
        [subscription]
    );
    assert!(
        store
            .list_subscriptions(&personal)
            .await
            .unwrap()
            .is_empty()
    );
    let team_page = store.page_subscriptions(&acme, page).await.unwrap();
    assert_eq!(team_page.total, 1);
    assert_eq!(store.balance(&acme).await.unwrap(), c(500));
    assert_eq!(store.balance(&personal).await.unwrap(), c(0));
}

fn org_sync(
    user: &UserId,
    org: Option<(&str, MemberRole)>,
    seats: Option<u64>,
    at: i64,
) -> HostOrgSync {
    HostOrgSync {
        user: user.clone(),
        claim: org.map(|(id, role)| domain::HostOrgClaim {
            account: host_team_id("iss", id),
            role,
        }),
        organisation: org.map(|(id, _)| (id.to_owned(), format!("Org {id}"))),
        seats,
        now: t(at),
    }
}

async fn sync(store: &TestStore, sync: HostOrgSync) -> Result<(), MemberChangeRefusal> {
    store
        .sync_host_org(&sync, host_events::member_changed)
        .await
        .expect("sync")
}

/// Members of a host organisation's team follow their tokens: the team is created on first
/// sight, a token naming another organisation or none steps its user away (they spend nothing
/// and hold no seat, their limit and count kept), a token naming it again brings them back
/// while a seat is free; joins and role changes are told, comings and goings are not.
pub async fn a_host_organisation_s_members_follow_their_tokens(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let cy = user(store, "cy").await;
    let org = host_team_id("iss", "org_1");
    sync(
        store,
        org_sync(&ada, Some(("org_1", MemberRole::Admin)), Some(2), NOW),
    )
    .await
    .unwrap();
    let account = store.account(&org).await.unwrap().expect("created");
    assert_eq!(account.name.as_deref(), Some("Org org_1"));
    assert_eq!(account.host_organisation.as_deref(), Some("org_1"));
    sync(
        store,
        org_sync(&bob, Some(("org_1", MemberRole::Member)), Some(2), NOW),
    )
    .await
    .unwrap();
    // The seats are full: cy does not join.
    assert_eq!(
        sync(
            store,
            org_sync(&cy, Some(("org_1", MemberRole::Member)), Some(2), NOW)
        )
        .await,
        Err(MemberChangeRefusal::SeatsExhausted { seats: 2 })
    );
    assert!(store.member(&org, &cy).await.unwrap().is_none());
    // Limits are set here; members change only in the host.
    change(
        store,
        (&org, &ada, &bob),
        vec![MemberChange::SetLimit(Some(daily(10)))],
    )
    .await
    .unwrap();
    assert_eq!(
        refused(change(store, (&org, &ada, &bob), vec![MemberChange::Remove]).await),
        MemberChangeRefusal::HostManaged
    );
    fund(store, &org, 100).await;
    store
        .consume(&spend(&org, &bob, 3, "h1", NOW))
        .await
        .unwrap();
    // A token naming no organisation: bob is away, spends nothing, holds no seat.
    sync(store, org_sync(&bob, None, None, NOW + 1))
        .await
        .unwrap();
    let held = store.host_memberships(&bob).await.unwrap();
    assert_eq!(held.len(), 1);
    assert!(held[0].away);
    assert!(store.member(&org, &bob).await.unwrap().is_none());
    assert!(store.memberships(&bob).await.unwrap().is_empty());
    assert!(matches!(
        store.consume(&spend(&org, &bob, 1, "h2", NOW + 2)).await,
        Err(SpendError::NotAMember)
    ));
    sync(
        store,
        org_sync(&cy, Some(("org_1", MemberRole::Member)), Some(2), NOW + 3),
    )
    .await
    .unwrap();
    // Bob's token names it again, but the seats are taken; once one is free he comes back
    // with his limit and what he spent today.
    assert!(
        sync(
            store,
            org_sync(&bob, Some(("org_1", MemberRole::Member)), Some(2), NOW + 4)
        )
        .await
        .is_err()
    );
    assert!(store.member(&org, &bob).await.unwrap().is_none());
    sync(
        store,
        org_sync(&bob, Some(("org_1", MemberRole::Admin)), Some(3), NOW + 5),
    )
    .await
    .unwrap();
    let back = store.member(&org, &bob).await.unwrap().expect("back");
    assert_eq!(back.role, MemberRole::Admin);
    assert_eq!(back.limit, Some(daily(10)));
    assert_eq!(back.count.spent, c(300));
    assert!(matches!(
        store.consume(&spend(&org, &bob, 8, "h3", NOW + 6)).await,
        Err(SpendError::LimitReached(_))
    ));
    // Another organisation: ada steps away from the first and joins the second.
    sync(
        store,
        org_sync(&ada, Some(("org_2", MemberRole::Owner)), None, NOW + 7),
    )
    .await
    .unwrap();
    let held = store.host_memberships(&ada).await.unwrap();
    let present: Vec<_> = held
        .iter()
        .filter(|m| !m.away)
        .map(|m| m.account.clone())
        .collect();
    assert_eq!(present, [host_team_id("iss", "org_2")]);
    assert_eq!(store.members(&org).await.unwrap().len(), 2);
    let told = member_events(store).await;
    let full = told
        .iter()
        .find(|(k, _)| k.code() == "account.seats_exceeded")
        .expect("told")
        .1
        .clone();
    assert_eq!(
        (full["seats"].as_u64(), full["members"].as_u64()),
        (Some(2), Some(2)),
        "{full}"
    );
    assert_eq!(full["accountId"], org.as_str());
    // A refusal is told once while the members stay as they are: dan's second token tells
    // nothing new.
    let dan = user(store, "dan").await;
    for at in [NOW + 8, NOW + 9] {
        let claim = Some(("org_1", MemberRole::Member));
        assert!(
            sync(store, org_sync(&dan, claim, Some(2), at))
                .await
                .is_err()
        );
    }
    let told_dan = member_events(store)
        .await
        .into_iter()
        .filter(|(_, data)| data["userId"] == dan.as_str())
        .count();
    assert_eq!(told_dan, 1);
    let kinds: Vec<_> = told
        .iter()
        .map(|(kind, data)| {
            (
                kind.code(),
                data["userId"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("account.member_added", ada.to_string()),
            ("account.member_added", bob.to_string()),
            ("account.seats_exceeded", cy.to_string()),
            ("account.member_added", cy.to_string()),
            // Cy's join changed the members since: Bob's refusal is told again.
            ("account.seats_exceeded", bob.to_string()),
            ("account.member_role_changed", bob.to_string()),
            ("account.member_added", ada.to_string()),
        ],
        "{told:#?}"
    );
    // The host says cy left: away at once, and only from this team; not a member: nothing.
    assert!(store.step_away(&org, &cy, t(NOW + 10)).await.unwrap());
    assert!(store.member(&org, &cy).await.unwrap().is_none());
    assert!(!store.step_away(&org, &cy, t(NOW + 10)).await.unwrap());
    assert!(matches!(
        store.consume(&spend(&org, &cy, 1, "h4", NOW + 11)).await,
        Err(SpendError::NotAMember)
    ));
    assert_ledger_adds_up(store, &org).await;
}

/// An addition refused for seats writes nothing but tells the owners, once per state.
pub async fn an_addition_past_the_seats_is_told_once(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let acme = team(store, "acme", &ada).await;
    for _ in 0..2 {
        let command = MemberCommand {
            account: acme.clone(),
            actor: ada.clone(),
            target: bob.clone(),
            changes: vec![
                MemberChange::Add(MemberRole::Member),
                MemberChange::SetLimit(Some(daily(5))),
            ],
            seats: Some(1),
            now: t(NOW),
        };
        let refused = store
            .change_member(&command, host_events::member_changed)
            .await;
        assert!(
            matches!(
                refused,
                Err(MemberChangeError::Refused(
                    MemberChangeRefusal::SeatsExhausted { seats: 1 }
                ))
            ),
            "{refused:?}"
        );
    }
    assert!(store.member(&acme, &bob).await.unwrap().is_none());
    let told = member_events(store).await;
    let kinds: Vec<&str> = told.iter().map(|(k, _)| k.code()).collect();
    assert_eq!(
        kinds,
        ["account.member_added", "account.seats_exceeded"],
        "told once"
    );
    let data = &told[1].1;
    assert_eq!(data["userId"], bob.as_str());
    assert_eq!(data["accountId"], acme.as_str());
    assert_eq!(data["by"], ada.as_str());
    assert_eq!(
        (data["seats"].as_u64(), data["members"].as_u64()),
        (Some(1), Some(1))
    );
}

fn invitation(account: &AccountId, by: &UserId, email: &str, id: &str) -> NewInvitation {
    NewInvitation {
        invitation: Invitation {
            id: id.to_owned(),
            account_id: account.clone(),
            email: email.to_owned(),
            role: MemberRole::Admin,
            limit: Some(daily(7)),
            invited_by: by.clone(),
            created_at: t(NOW),
            expires_at: t(NOW + domain::INVITATION_LIFETIME_MS),
        },
        token: TokenHash(format!("digest-{id}")),
        seats: None,
    }
}

fn accepting(id: &str, user: &UserId, email: &str, at: i64) -> AcceptInvitation {
    AcceptInvitation {
        token: TokenHash(format!("digest-{id}")),
        user: user.clone(),
        email: Some(email.to_owned()),
        seats: None,
        now: t(at),
    }
}

async fn accept(store: &TestStore, accepting: &AcceptInvitation) -> Result<Member, AcceptError> {
    store
        .accept_invitation(accepting, host_events::member_changed)
        .await
}

/// Invitations: made as an addition by their inviter, accepted once by the address invited
/// while open and a seat is free, joining with their role and limit; revoked by an owner or
/// admin.
pub async fn an_invitation_is_accepted_once_by_its_address(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let cy = user(store, "cy").await;
    let acme = team(store, "acme", &ada).await;
    store
        .create_invitation(&invitation(&acme, &ada, "bob@example.com", "inv_1"))
        .await
        .unwrap();
    // A plain member may not invite; nobody invites to a host organisation's team.
    change(
        store,
        (&acme, &ada, &cy),
        vec![MemberChange::Add(MemberRole::Member)],
    )
    .await
    .unwrap();
    assert_eq!(
        refused(
            store
                .create_invitation(&invitation(&acme, &cy, "x@example.com", "inv_2"))
                .await
        ),
        MemberChangeRefusal::NotAllowed
    );
    let open = store.open_invitations(&acme, t(NOW)).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].email, "bob@example.com");
    assert_eq!(open[0].limit, Some(daily(7)));
    assert!(
        store
            .open_invitations(&acme, t(NOW + domain::INVITATION_LIFETIME_MS))
            .await
            .unwrap()
            .is_empty()
    );
    // Another address is refused; the address invited joins with the role and limit.
    assert!(matches!(
        accept(store, &accepting("inv_1", &cy, "cy@example.com", NOW + 1)).await,
        Err(AcceptError::Refused(InvitationRefusal::OtherEmail))
    ));
    let member = accept(store, &accepting("inv_1", &bob, "bob@example.com", NOW + 1))
        .await
        .unwrap();
    assert_eq!(
        (member.role, member.limit),
        (MemberRole::Admin, Some(daily(7)))
    );
    assert!(store.member(&acme, &bob).await.unwrap().is_some());
    assert!(matches!(
        accept(store, &accepting("inv_1", &bob, "bob@example.com", NOW + 2)).await,
        Err(AcceptError::Refused(InvitationRefusal::Used))
    ));
    assert!(
        store
            .open_invitations(&acme, t(NOW + 2))
            .await
            .unwrap()
            .is_empty()
    );
    let told = member_events(store).await;
    let (kind, data) = told.last().expect("told");
    assert_eq!(kind.code(), "account.member_added");
    assert_eq!(
        (
            data["userId"].as_str(),
            data["by"].as_str(),
            data["role"].as_str()
        ),
        (Some(bob.as_str()), Some(ada.as_str()), Some("admin"))
    );
    // Revoked, expired, unknown, a member already, no seat.
    let dan = user(store, "dan").await;
    store
        .create_invitation(&invitation(&acme, &bob, "dan@example.com", "inv_3"))
        .await
        .unwrap();
    assert_eq!(
        refused(
            store
                .revoke_invitation(&acme, "inv_3", &cy, t(NOW + 3))
                .await
        ),
        MemberChangeRefusal::NotAllowed
    );
    store
        .revoke_invitation(&acme, "inv_3", &bob, t(NOW + 3))
        .await
        .unwrap();
    assert!(matches!(
        store
            .revoke_invitation(&acme, "inv_3", &bob, t(NOW + 3))
            .await,
        Err(MemberChangeError::AccountNotFound)
    ));
    assert!(matches!(
        accept(store, &accepting("inv_3", &dan, "dan@example.com", NOW + 4)).await,
        Err(AcceptError::Refused(InvitationRefusal::Revoked))
    ));
    store
        .create_invitation(&invitation(&acme, &ada, "dan@example.com", "inv_4"))
        .await
        .unwrap();
    let late = NOW + domain::INVITATION_LIFETIME_MS;
    assert!(matches!(
        accept(store, &accepting("inv_4", &dan, "dan@example.com", late)).await,
        Err(AcceptError::Refused(InvitationRefusal::Expired))
    ));
    assert!(matches!(
        accept(store, &accepting("inv_0", &dan, "dan@example.com", NOW)).await,
        Err(AcceptError::NotFound)
    ));
    store
        .create_invitation(&invitation(&acme, &ada, "cy@example.com", "inv_5"))
        .await
        .unwrap();
    assert!(matches!(
        accept(store, &accepting("inv_5", &cy, "cy@example.com", NOW + 5)).await,
        Err(AcceptError::Join(MemberChangeRefusal::AlreadyMember))
    ));
    store
        .create_invitation(&invitation(&acme, &ada, "dan@example.com", "inv_6"))
        .await
        .unwrap();
    let full = AcceptInvitation {
        seats: Some(3),
        ..accepting("inv_6", &dan, "dan@example.com", NOW + 6)
    };
    assert!(matches!(
        accept(store, &full).await,
        Err(AcceptError::Join(MemberChangeRefusal::SeatsExhausted {
            seats: 3
        }))
    ));
    assert!(store.member(&acme, &dan).await.unwrap().is_none());
    // The invitation stays open for when a seat is free.
    accept(store, &accepting("inv_6", &dan, "dan@example.com", NOW + 7))
        .await
        .unwrap();
    // An inviter removed before the acceptance leaves nothing to accept.
    let eve = user(store, "eve").await;
    store
        .create_invitation(&invitation(&acme, &bob, "eve@example.com", "inv_7"))
        .await
        .unwrap();
    change(store, (&acme, &ada, &bob), vec![MemberChange::Remove])
        .await
        .unwrap();
    assert!(matches!(
        accept(store, &accepting("inv_7", &eve, "eve@example.com", NOW + 8)).await,
        Err(AcceptError::Refused(InvitationRefusal::Revoked))
    ));
}

contract_tests!(
    an_invitation_is_accepted_once_by_its_address,
    an_addition_past_the_seats_is_told_once,
    a_host_organisation_s_members_follow_their_tokens,
    a_team_s_purchases_are_listed_by_its_account,
    members_change_by_the_rules_and_each_change_is_told,
    a_member_spends_the_pool_within_their_limit,
    a_changed_limit_or_membership_applies_to_the_next_spend,
    a_limit_set_mid_window_counts_what_was_spent,
    a_limit_counts_holds_of_its_window_and_not_older_ones,
);

pub async fn two_owners_leaving_at_once_leave_one_owner(store: &TestStore) {
    for round in 0..4 {
        let ada = user(store, &format!("ada{round}")).await;
        let bob = user(store, &format!("bob{round}")).await;
        let acme = team(store, &format!("acme{round}"), &ada).await;
        let promote = vec![MemberChange::Add(MemberRole::Owner)];
        change(store, (&acme, &ada, &bob), promote).await.unwrap();
        let leave = |who: UserId| {
            let (store, acme) = ((**store).clone(), acme.clone());
            tokio::spawn(async move {
                let command = MemberCommand {
                    account: acme,
                    actor: who.clone(),
                    target: who,
                    changes: vec![MemberChange::Remove],
                    seats: None,
                    now: t(NOW),
                };
                store
                    .change_member(&command, host_events::member_changed)
                    .await
                    .map(drop)
            })
        };
        let (a, b) = (leave(ada.clone()), leave(bob.clone()));
        let outcomes = [a.await.unwrap(), b.await.unwrap()];
        let left = outcomes.iter().filter(|o| o.is_ok()).count();
        assert_eq!(left, 1, "{outcomes:?}");
        let owners = store.members(&acme).await.unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].role, MemberRole::Owner);
    }
}

/// Eight additions at once to a team of two with three seats: one takes the last seat, the
/// others are refused for the seats, and the team has three members.
/// An invitation accepted eight times at once (a double submit, two tabs) joins once.
pub async fn an_invitation_accepted_at_once_joins_once(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let acme = team(store, "acme", &ada).await;
    store
        .create_invitation(&invitation(&acme, &ada, "bob@example.com", "inv_race"))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (store, bob) = ((**store).clone(), bob.clone());
        tasks.push(tokio::spawn(async move {
            let accepting = accepting("inv_race", &bob, "bob@example.com", NOW + 1);
            store
                .accept_invitation(&accepting, host_events::member_changed)
                .await
                .map(drop)
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    let used = |o: &Result<(), AcceptError>| {
        matches!(o, Err(AcceptError::Refused(InvitationRefusal::Used)))
    };
    assert_eq!(
        outcomes.iter().filter(|o| used(o)).count(),
        7,
        "{outcomes:?}"
    );
    let added = member_events(store)
        .await
        .into_iter()
        .filter(|(_, data)| data["userId"] == bob.as_str())
        .count();
    assert_eq!(added, 1);
}

pub async fn additions_at_once_never_pass_the_seats(store: &TestStore) {
    let ada = user(store, "ada").await;
    let bob = user(store, "bob").await;
    let acme = team(store, "acme", &ada).await;
    let add = vec![MemberChange::Add(MemberRole::Member)];
    change(store, (&acme, &ada, &bob), add.clone())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let newcomer = user(store, &format!("new{i}")).await;
        let (store, acme, ada, add) = ((**store).clone(), acme.clone(), ada.clone(), add.clone());
        tasks.push(tokio::spawn(async move {
            let command = MemberCommand {
                account: acme,
                actor: ada,
                target: newcomer,
                changes: add,
                seats: Some(3),
                now: t(NOW),
            };
            store
                .change_member(&command, host_events::member_changed)
                .await
                .map(drop)
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    let added = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(added, 1, "{outcomes:?}");
    let seats = |o: &Result<(), MemberChangeError>| {
        matches!(
            o,
            Err(MemberChangeError::Refused(
                MemberChangeRefusal::SeatsExhausted { seats: 3 }
            ))
        )
    };
    assert_eq!(
        outcomes.iter().filter(|o| seats(o)).count(),
        7,
        "{outcomes:?}"
    );
    assert_eq!(store.members(&acme).await.unwrap().len(), 3);
}

/// Many members of one team spending at once, owners leaving at once, additions and
/// acceptances at once.
mod concurrent {
    use crate::support::concurrency_tests;

    use super::{
        additions_at_once_never_pass_the_seats, an_invitation_accepted_at_once_joins_once,
        members_never_pass_their_limits_under_concurrency,
        two_owners_leaving_at_once_leave_one_owner,
    };

    concurrency_tests!(
        members_never_pass_their_limits_under_concurrency,
        two_owners_leaving_at_once_leave_one_owner,
        additions_at_once_never_pass_the_seats,
        an_invitation_accepted_at_once_joins_once,
    );
}
